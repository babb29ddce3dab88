/* speedscope's file format (https://www.speedscope.app/file-format-schema.json):
 * one JSON document with the functions once ("shared.frames": name, and the
 * image as "file"), and one "sampled" profile per event and process (per
 * event only, for a database without processes told apart): each distinct
 * function-level stack once, root first, with its samples as its weight.
 * speedscope shows every profile of the file in its list, in the order
 * written: events in the order asked, processes by samples, most first. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally/callgraph.h"
#include "tally/export.h"
#include "tally/json.h"

#ifndef TALLY_VERSION
#define TALLY_VERSION "unknown"
#endif

/* one process of one event: its stacks (indices into the call graph) */
struct proc {
	int pid;
	uint64_t total;
	uint32_t *stacks;
	size_t n, a;
};

static int cmp_proc(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return x->pid - y->pid;
}

static bool pid_eq(const void *ctx, uint32_t i, const void *key)
{
	return ((const struct proc *)ctx)[i].pid == *(const int *)key;
}

/* The frames of every event's call graph share one table: a function (name
 * and image) is one frame whatever the event. */
struct frames {
	struct tally_hidx idx;
	struct {
		uint32_t image;
		char *name;
	} *v;
	size_t n, a;
};

struct fkey {
	uint32_t image;
	const char *name;
};

static bool frame_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct frames *f = ctx;
	const struct fkey *k = key;
	return f->v[i].image == k->image && !strcmp(f->v[i].name, k->name);
}

static uint32_t frame_id(struct frames *f, uint32_t image, const char *name)
{
	struct fkey k = { image, name };
	uint64_t h = tally_hash_bytes(name, strlen(name), image);
	uint32_t i = tally_hidx_get(&f->idx, h, &k, frame_eq, f);
	if (i == TALLY_HIDX_NONE) {
		GROW(f->v, f->a, f->n + 1);
		f->v[f->n].image = image;
		f->v[f->n].name = xstrdup(name);
		tally_hidx_put(&f->idx, h, (uint32_t)f->n);
		i = (uint32_t)f->n++;
	}
	return i;
}

/* The distinct kept stacks of one process (same frames, both cut or both
 * whole), in the order first met: an index made once with room for them all
 * (a growing tally_hidx rehashes, and calls back on every probe), a slot
 * holding the low 32 bits of the stack's hash above its number + 1. */
struct uniq {
	const uint32_t *keys;
	const struct tally_trim_stack *ts;
	const uint32_t *keep;
	uint64_t *slot;
	size_t mask;
	uint32_t *first; /* per distinct stack: the stack that stands for it */
	uint64_t *w;     /* ... and its samples */
	size_t n;
};

static void uniq_init(struct uniq *u, const uint32_t *keys, const struct tally_trim_stack *ts,
		      const uint32_t *keep, size_t max)
{
	*u = (struct uniq){ .keys = keys, .ts = ts, .keep = keep, .mask = 1 };
	while (u->mask < 2 * max)
		u->mask <<= 1;
	u->slot = xcalloc(u->mask, sizeof(uint64_t));
	u->mask--;
	u->first = xcalloc(max + 1, sizeof(uint32_t));
	u->w = xcalloc(max + 1, sizeof(uint64_t));
}

static uint32_t uniq_hash(const struct uniq *u, uint32_t st)
{
	return (uint32_t)tally_hash_bytes(&u->keys[u->ts[st].first], u->keep[st] * sizeof(uint32_t),
					  u->keep[st] < u->ts[st].len);
}

static void uniq_add(struct uniq *u, uint32_t st, uint32_t h, uint64_t count)
{
	uint32_t kb = u->keep[st];
	bool cb = kb < u->ts[st].len;
	const uint32_t *kst = &u->keys[u->ts[st].first];
	size_t at = h & u->mask;
	for (; u->slot[at]; at = (at + 1) & u->mask) {
		if ((uint32_t)(u->slot[at] >> 32) != h)
			continue;
		uint32_t i = (uint32_t)u->slot[at] - 1, a = u->first[i];
		if (u->keep[a] == kb && (u->keep[a] < u->ts[a].len) == cb &&
		    !memcmp(&u->keys[u->ts[a].first], kst, kb * sizeof(uint32_t))) {
			u->w[i] += count;
			return;
		}
	}
	u->first[u->n] = st;
	u->w[u->n] = count;
	u->slot[at] = (uint64_t)h << 32 | (u->n + 1);
	u->n++;
}

/* ",v" (or "v" first in its array), the JSON writer's output for one number
 * but without its bookkeeping: tens of millions of frame numbers */
static void put_u64(struct strbuf *sb, bool comma, uint64_t v)
{
	if (comma)
		strbuf_addch(sb, ',');
	strbuf_add_u64(sb, v);
}

int tally_export_speedscope(const struct tally_export *x, struct tally_export_out *out)
{
	const struct tally_db *db = x->db;
	if (!db->has_stacks)
		return tally_seterr(
			-EINVAL,
			"'%s' has no call stacks: speedscope needs them (record with -g or --call-graph dwarf)",
			x->input);
	struct strbuf *sb = tally_export_out_file(out, "");
	struct tally_json j;
	tally_json_init(&j, sb);
	struct frames fr = { 0 };
	struct tally_export_comms comms;
	tally_export_comms_init(&comms, db);
	struct strbuf name = STRBUF_INIT;
	int err = 0;

	tally_json_obj(&j);
	tally_json_kstr(&j, "$schema", "https://www.speedscope.app/file-format-schema.json");
	tally_json_karr(&j, "profiles");
	for (int e = 0; e < x->nevents && !err; e++) {
		int ev = x->events[e];
		struct tally_cg cg;
		tally_cg_build_flags(&cg, db, x->res, ev, NULL, NULL, TALLY_CG_NO_ARCS);
		uint32_t *fid = xcalloc(cg.nfuncs + 1, sizeof(uint32_t));
		for (size_t f = 0; f < cg.nfuncs; f++) {
			const struct tally_cg_func *fn = &cg.funcs[f];
			strbuf_reset(&name);
			if (!strcmp(fn->name, "[unknown]"))
				strbuf_addf(&name, "[%s]", db->images[fn->image].name);
			else
				strbuf_addf(&name, "%s%s", fn->name,
					    fn->inlined ? " (inlined)" : "");
			fid[f] = frame_id(&fr, fn->image, name.buf);
		}
		/* the --percent-limit cut, on the function-level stacks (root first) */
		/* every stack's functions */
		uint32_t *keys = xcalloc(cg.nfuncs_of + 1, sizeof(uint32_t));
		size_t nkeys = 0;
		struct tally_trim_stack *ts = xcalloc(cg.nstacks + 1, sizeof(*ts));
		uint64_t *counts = xcalloc(cg.nstacks + 1, sizeof(uint64_t));
		for (size_t s = 0; s < cg.nstacks; s++) {
			const struct tally_cg_stack *st = &cg.stacks[s];
			ts[s] = (struct tally_trim_stack){ (uint32_t)nkeys, st->len };
			for (uint32_t d = 0; d < st->len; d++)
				keys[nkeys++] = fid[cg.funcs_of[st->first + st->len - 1 - d]];
			counts[s] = st->count;
		}
		/* the stacks are keys from here on: their functions' list (four
		 * bytes a frame, tens of megabytes) goes before the rest is made */
		free(cg.funcs_of);
		cg.funcs_of = NULL;
		cg.nfuncs_of = cg.afuncs_of = 0;
		uint64_t min = 0, total = cg.total;
		struct tally_export one = *x;
		one.nevents = 1;
		one.events = &ev;
		tally_export_trim_min(&one, &total, &min);
		uint32_t *keep = xcalloc(cg.nstacks + 1, sizeof(uint32_t));
		tally_export_trim(keys, ts, cg.nstacks, counts, 1, &min, keep);

		/* the processes (one, pid 0, without per-pid) */
		struct proc *procs = NULL;
		size_t nprocs = 0, aprocs = 0;
		struct tally_hidx pidx = { 0 };
		for (size_t s = 0; s < cg.nstacks; s++) {
			if (!cg.stacks[s].count)
				continue;
			int pid = db->per_pid ? db->stacks[cg.stacks[s].src].pid : 0;
			uint64_t h = tally_hash_u64((uint64_t)(uint32_t)pid);
			uint32_t i = tally_hidx_get(&pidx, h, &pid, pid_eq, procs);
			if (i == TALLY_HIDX_NONE) {
				GROW(procs, aprocs, nprocs + 1);
				procs[nprocs] = (struct proc){ .pid = pid };
				tally_hidx_put(&pidx, h, (uint32_t)nprocs);
				i = (uint32_t)nprocs++;
			}
			struct proc *p = &procs[i];
			GROW(p->stacks, p->a, p->n + 1);
			p->stacks[p->n++] = (uint32_t)s;
			p->total += cg.stacks[s].count;
		}
		tally_qsort(procs, nprocs, sizeof(*procs), cmp_proc);
		uint32_t other = UINT32_MAX; /* the [other] frame, made when a stack is cut */
		for (size_t i = 0; i < nprocs && !err; i++) {
			const struct proc *p = &procs[i];
			tally_json_obj(&j);
			tally_json_kstr(&j, "type", "sampled");
			strbuf_reset(&name);
			if (p->pid) {
				const char *c = tally_export_comm(&comms, p->pid);
				strbuf_addf(&name, "%s (pid %d) %s", c && *c ? c : "?", p->pid,
					    db->events[ev]);
			} else {
				strbuf_addstr(&name, db->events[ev]);
			}
			tally_json_kstr(&j, "name", name.buf);
			/* weights: time in nanoseconds when db is period-weighted, else
			 * events or (--samples) samples, which speedscope calls "none" */
			tally_json_kstr(&j, "unit",
					db->weighed && tally_db_unit_time(db, ev) ? "nanoseconds"
										  : "none");
			tally_json_ku64(&j, "startValue", 0);
			tally_json_ku64(&j, "endValue", p->total);
			/* database stacks that differ only in offsets are one function
			 * stack: written once with their samples added up */
			struct uniq u;
			uniq_init(&u, keys, ts, keep, p->n);
			/* the hashes first, so that the slot of a stack a few ahead is
			 * fetched while this one is placed (the index is megabytes) */
			uint32_t *hs = xcalloc(p->n + 1, sizeof(uint32_t));
			for (size_t k = 0; k < p->n; k++)
				hs[k] = uniq_hash(&u, p->stacks[k]);
			for (size_t k = 0; k < p->n; k++) {
				if (k + 8 < p->n)
					__builtin_prefetch(&u.slot[hs[k + 8] & u.mask]);
				uniq_add(&u, p->stacks[k], hs[k], cg.stacks[p->stacks[k]].count);
			}
			free(hs);
			free(u.slot);
			uint32_t *first = u.first;
			uint64_t *w = u.w;
			size_t nu = u.n;
			/* written as they go (the sink takes a megabyte at a time):
			 * the whole profile is tens of megabytes */
			tally_json_karr(&j, "samples");
			for (size_t k = 0; k < nu && !err; k++) {
				uint32_t st = first[k];
				tally_json_arr(&j);
				for (uint32_t d = 0; d < keep[st]; d++)
					put_u64(sb, d, keys[ts[st].first + d]);
				if (keep[st] < ts[st].len) {
					if (other == UINT32_MAX)
						other = frame_id(&fr, UINT32_MAX, "[other]");
					put_u64(sb, keep[st], other);
				}
				tally_json_end(&j);
				err = tally_export_out_flush(out, sb);
			}
			tally_json_end(&j);
			tally_json_karr(&j, "weights");
			for (size_t k = 0; k < nu && !err; k++) {
				put_u64(sb, k, w[k]);
				if (!(k & 4095))
					err = tally_export_out_flush(out, sb);
			}
			tally_json_end(&j);
			tally_json_end(&j);
			free(first);
			free(w);
			if (!err)
				err = tally_export_out_flush(out, sb);
		}
		for (size_t i = 0; i < nprocs; i++)
			free(procs[i].stacks);
		free(procs);
		tally_hidx_release(&pidx);
		free(keep);
		free(counts);
		free(ts);
		free(keys);
		free(fid);
		tally_cg_release(&cg);
	}
	tally_json_end(&j);
	if (!err) {
		/* the frames last: every event's functions are known by then */
		tally_json_kobj(&j, "shared");
		tally_json_karr(&j, "frames");
		struct strbuf img = STRBUF_INIT;
		for (size_t f = 0; f < fr.n; f++) {
			tally_json_obj(&j);
			tally_json_kstr(&j, "name", fr.v[f].name);
			if (fr.v[f].image != UINT32_MAX)
				tally_json_kstr(
					&j, "file",
					tally_export_image_name(&db->images[fr.v[f].image], &img));
			tally_json_end(&j);
		}
		strbuf_release(&img);
		tally_json_end(&j);
		tally_json_end(&j);
		strbuf_reset(&name);
		strbuf_addf(&name, "%s", tally_basename(x->input));
		tally_json_kstr(&j, "name", name.buf);
		tally_json_ku64(&j, "activeProfileIndex", 0);
		tally_json_kstr(&j, "exporter", "tally " TALLY_VERSION);
		tally_json_end(&j);
		strbuf_addch(sb, '\n');
	}
	for (size_t f = 0; f < fr.n; f++)
		free(fr.v[f].name);
	free(fr.v);
	tally_hidx_release(&fr.idx);
	tally_export_comms_release(&comms);
	strbuf_release(&name);
	return err;
}
