/* A database built in memory, by summing: the writer feeds it an aggregate,
 * report feeds it a daemon's epochs, the daemon feeds it an epoch and what it
 * aggregated since the last flush. Equal keys add up; nothing is kept twice. */
#define _GNU_SOURCE
#include "stacks.h"
#include "db-private.h"
#include "build.h"
#include "tally/db.h"
#include "tally/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Counters of the session that a merge adds up (the stop reasons are three more). */
static const char *const summed_keys[] = { "dwarf-unwinds",     "dwarf-stopped-early",
					   "dwarf-joined-fp",   "jit-untrusted",
					   "fp-leaf-checked",   "fp-leaf-repaired",
					   "fp-leaf-unchecked", "fp-repair-frames" };

struct tally_db_builder *tally_db_builder_new(int nevents, char *const *events, bool per_pid,
					      bool stacks)
{
	struct tally_db_builder *b = xcalloc(1, sizeof(*b));
	b->nevents = nevents;
	b->events = xcalloc((size_t)nevents + 1, sizeof(char *));
	for (int e = 0; e < nevents; e++)
		b->events[e] = xstrdup(events[e]);
	b->per_pid = per_pid;
	b->stacks = stacks;
	b->ss.nevents = nevents;
	b->ss.dedup = true;
	b->totals = xcalloc((size_t)nevents + 1, sizeof(uint64_t));
	b->wtotals = xcalloc((size_t)nevents + 1, sizeof(uint64_t));
	b->rs_reached = xcalloc((size_t)nevents + 1, sizeof(uint64_t));
	b->rs_total = xcalloc((size_t)nevents + 1, sizeof(uint64_t));
	return b;
}

void tally_db_builder_canonical(struct tally_db_builder *b)
{
	b->canonical = true;
}

static bool str_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !strcmp(((const struct bstrs *)ctx)->v[idx], key);
}

static bool strs_has(const struct bstrs *t, const char *s)
{
	return tally_hidx_get(&t->idx, tally_hash_bytes(s, strlen(s), 3), s, str_eq, t) !=
	       TALLY_HIDX_NONE;
}

static void strs_add(struct bstrs *t, const char *s)
{
	uint64_t h = tally_hash_bytes(s, strlen(s), 3);
	if (tally_hidx_get(&t->idx, h, s, str_eq, t) != TALLY_HIDX_NONE)
		return;
	GROW(t->v, t->alloc, t->n + 1);
	t->v[t->n] = xstrdup(s);
	tally_hidx_put(&t->idx, h, (uint32_t)t->n++);
}

static void strs_release(struct bstrs *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	tally_hidx_release(&t->idx);
	memset(t, 0, sizeof(*t));
}

static char *copy_bytes(const char *p, size_t n)
{
	if (!p)
		return NULL;
	char *c = xmalloc(n + 1);
	memcpy(c, p, n);
	c[n] = '\0';
	return c;
}

void tally_db_builder_free(struct tally_db_builder *b)
{
	if (!b)
		return;
	for (int e = 0; b->events && e < b->nevents; e++)
		free(b->events[e]);
	free(b->events);
	tally_meta_release(&b->session);
	for (size_t i = 0; i < b->nimages; i++)
		tally_db_image_release(&b->images[i]);
	free(b->images);
	tally_hidx_release(&b->image_idx);
	free(b->cells);
	free(b->ccounts);
	tally_hidx_release(&b->cell_idx);
	tally_stackset_release(&b->ss);
	lazy_free(b->lazy);
	tally_ksyms_free(b->ksyms, b->nksyms);
	tally_hidx_release(&b->ksym_idx);
	for (size_t i = 0; i < b->ntasks; i++) {
		free(b->tasks[i].comm);
		free(b->tasks[i].exe);
	}
	free(b->tasks);
	tally_hidx_release(&b->task_idx);
	free(b->modules);
	for (size_t i = 0; i < b->nlabels; i++)
		tally_labelset_release(&b->labels[i]);
	free(b->labels);
	tally_hidx_release(&b->label_idx);
	tally_labelset_release(&b->source);
	for (size_t i = 0; i < b->nsrcs; i++)
		tally_db_source_release(&b->srcs[i]);
	free(b->srcs);
	strs_release(&b->module_lines);
	strs_release(&b->varies);
	free(b->totals);
	free(b->wtotals);
	free(b->rs_reached);
	free(b->rs_total);
	free(b);
}

void tally_db_builder_session(struct tally_db_builder *b, const struct tally_meta *session)
{
	for (size_t i = 0; i < session->n; i++)
		tally_meta_set(&b->session, session->kv[i].key, "%s", session->kv[i].value);
}

/* ---- images ---- */

/* exec and lib are one kind for identity: which one a file is depends on which
 * processes had samples, which differs between the databases merged */
const char *tally_db_kind_class(const char *kind)
{
	return !strcmp(kind, "exec") ? "lib" : kind;
}

static uint64_t image_key_hash(const struct tally_db_image *im)
{
	const char *k = tally_db_kind_class(im->kind);
	uint64_t h = tally_hash_bytes(k, strlen(k), 1);
	h = tally_hash_bytes(im->id, strlen(im->id), h);
	h = tally_hash_bytes(im->path, strlen(im->path), h);
	return tally_hash_u64(h ^ (uint64_t)(uint32_t)im->pid);
}

static bool image_key_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db_builder *b = ctx;
	const struct tally_db_image *x = &b->images[idx], *k = key;
	return x->pid == k->pid &&
	       !strcmp(tally_db_kind_class(x->kind), tally_db_kind_class(k->kind)) &&
	       !strcmp(x->id, k->id) && !strcmp(x->path, k->path);
}

uint32_t tally_db_builder_image(struct tally_db_builder *b, const struct tally_db_image *im)
{
	uint64_t h = image_key_hash(im);
	uint32_t i = tally_hidx_get(&b->image_idx, h, im, image_key_eq, b);
	if (i != TALLY_HIDX_NONE) {
		struct tally_db_image *x = &b->images[i];
		if (!strcmp(im->kind, "exec") && strcmp(x->kind, "exec")) {
			free(x->kind);
			x->kind = xstrdup("exec");
		}
		/* the newest copies of a JIT map, jitdump or vDSO win */
		if (im->aux || im->jd_text || im->dir) {
			free(x->aux);
			free(x->jd_text);
			free(x->dir);
			x->aux = copy_bytes(im->aux, im->aux_len);
			x->aux_len = im->aux ? im->aux_len : 0;
			x->jd_text = copy_bytes(im->jd_text, im->jd_text_len);
			x->jd_text_len = im->jd_text ? im->jd_text_len : 0;
			x->dir = im->dir ? xstrdup(im->dir) : NULL;
		}
		x->foreign_ns = x->foreign_ns || im->foreign_ns;
		return i;
	}
	GROW(b->images, b->aimages, b->nimages + 1);
	struct tally_db_image *x = &b->images[b->nimages];
	memset(x, 0, sizeof(*x));
	x->name = xstrdup(im->name);
	x->path = xstrdup(im->path);
	x->id = xstrdup(im->id);
	x->id_kind = xstrdup(im->id_kind);
	x->kind = xstrdup(im->kind);
	x->pid = im->pid;
	x->foreign_ns = im->foreign_ns;
	x->aux = copy_bytes(im->aux, im->aux_len);
	x->aux_len = im->aux ? im->aux_len : 0;
	x->jd_text = copy_bytes(im->jd_text, im->jd_text_len);
	x->jd_text_len = im->jd_text ? im->jd_text_len : 0;
	x->dir = im->dir ? xstrdup(im->dir) : NULL;
	tally_hidx_put(&b->image_idx, h, (uint32_t)b->nimages);
	return (uint32_t)b->nimages++;
}

/* ---- labels ---- */

static bool label_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !tally_labelset_cmp(&((const struct tally_db_builder *)ctx)->labels[idx], key);
}

uint32_t tally_db_builder_label(struct tally_db_builder *b, const struct tally_labelset *set)
{
	if (!set || !set->n)
		return 0;
	uint64_t h = tally_labelset_hash(set);
	uint32_t i = tally_hidx_get(&b->label_idx, h, set, label_eq, b);
	if (i != TALLY_HIDX_NONE)
		return i + 1;
	GROW(b->labels, b->alabels, b->nlabels + 1);
	tally_labelset_copy(&b->labels[b->nlabels], set);
	tally_hidx_put(&b->label_idx, h, (uint32_t)b->nlabels);
	return (uint32_t)++b->nlabels;
}

void tally_db_builder_source(struct tally_db_builder *b, const struct tally_labelset *set)
{
	tally_labelset_release(&b->source);
	tally_labelset_copy(&b->source, set);
	b->track_sources = true;
}

/* src's sources (or src itself, a recording) into the builder's, their
 * labels filled from the source labels as its label sets are */
static void add_sources(struct tally_db_builder *b, const struct tally_db *src)
{
	if (!src->nsources) {
		GROW(b->srcs, b->asrcs, b->nsrcs + 1);
		tally_db_source_from_session(&b->srcs[b->nsrcs++], &src->session, &b->source);
		return;
	}
	for (size_t i = 0; i < src->nsources; i++) {
		GROW(b->srcs, b->asrcs, b->nsrcs + 1);
		struct tally_db_source *s = &b->srcs[b->nsrcs++];
		tally_db_source_copy(s, &src->sources[i]);
		for (size_t k = 0; k < b->source.n; k++)
			if (!tally_labelset_get(&s->labels, b->source.v[k].key))
				tally_labelset_set(&s->labels, b->source.v[k].key,
						   b->source.v[k].value);
	}
}

/* ---- counts ---- */

static bool cell_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db_builder *b = ctx;
	const struct bcell *c = &b->cells[idx], *k = key;
	return c->image == k->image && c->pid == k->pid && c->offset == k->offset &&
	       c->label == k->label;
}

void tally_db_builder_entry(struct tally_db_builder *b, uint32_t image, int32_t pid,
			    uint64_t offset, const uint64_t *counts)
{
	tally_db_builder_entry_label(b, image, pid, 0, offset, counts);
}

void tally_db_builder_entry_label(struct tally_db_builder *b, uint32_t image, int32_t pid,
				  uint32_t label, uint64_t offset, const uint64_t *counts)
{
	tally_db_builder_entry_w(b, image, pid, label, offset, counts, NULL);
}

void tally_db_builder_entry_w(struct tally_db_builder *b, uint32_t image, int32_t pid,
			      uint32_t label, uint64_t offset, const uint64_t *counts,
			      const uint64_t *weights)
{
	struct bcell k = { image, b->per_pid && pid > 0 ? pid : 0, offset, label };
	uint64_t h = tally_hash_u64(offset ^ ((uint64_t)image << 40) ^
				    ((uint64_t)(uint32_t)k.pid << 8) ^ ((uint64_t)label << 20));
	uint32_t i = tally_hidx_get(&b->cell_idx, h, &k, cell_eq, b);
	size_t ne = (size_t)b->nevents;
	if (i == TALLY_HIDX_NONE) {
		GROW(b->cells, b->acells, b->ncells + 1);
		b->cells[b->ncells] = k;
		size_t want = (b->ncells + 1) * 2 * ne;
		if (want > b->accounts) {
			size_t old = b->accounts;
			GROW(b->ccounts, b->accounts, want);
			memset(b->ccounts + old, 0, (b->accounts - old) * sizeof(uint64_t));
		}
		tally_hidx_put(&b->cell_idx, h, (uint32_t)b->ncells);
		i = (uint32_t)b->ncells++;
	}
	if (weights)
		b->weighted = true;
	for (size_t e = 0; e < ne; e++) {
		uint64_t w = weights ? weights[e] : counts[e];
		b->ccounts[i * 2 * ne + e] += counts[e];
		b->ccounts[i * 2 * ne + ne + e] = tally_add_sat(b->ccounts[i * 2 * ne + ne + e], w);
		b->wtotals[e] = tally_add_sat(b->wtotals[e], w);
	}
}

void tally_db_builder_stack(struct tally_db_builder *b, int32_t pid,
			    const struct tally_frame *frames, uint32_t n, const uint64_t *counts)
{
	tally_db_builder_stack_label(b, pid, 0, frames, n, counts);
}

void tally_db_builder_stack_label(struct tally_db_builder *b, int32_t pid, uint32_t label,
				  const struct tally_frame *frames, uint32_t n,
				  const uint64_t *counts)
{
	tally_db_builder_stack_w(b, pid, label, frames, n, counts, NULL);
}

void tally_db_builder_stack_w(struct tally_db_builder *b, int32_t pid, uint32_t label,
			      const struct tally_frame *frames, uint32_t n, const uint64_t *counts,
			      const uint64_t *weights)
{
	if (!b->stacks || !n)
		return;
	if (weights)
		b->weighted = true;
	/* the stack sets hold the counts, then the weights */
	size_t ne = (size_t)b->nevents;
	uint64_t cwbuf[2 * 8],
		*cw = 2 * ne <= ARRAY_SIZE(cwbuf) ? cwbuf : xmalloc(2 * ne * sizeof(uint64_t));
	memcpy(cw, counts, ne * sizeof(uint64_t));
	memcpy(cw + ne, weights ? weights : counts, ne * sizeof(uint64_t));
	counts = cw;
	pid = b->per_pid && pid > 0 ? pid : 0;
	if (b->lazy) {
		/* after the stacks left unread, in order */
		lazy_stack(&b->lazy, pid, label, frames, n, counts, b->nevents);
		if (cw != cwbuf)
			free(cw);
		return;
	}
	uint32_t buf[64], *ids = n <= ARRAY_SIZE(buf) ? buf : xmalloc(n * sizeof(uint32_t));
	for (uint32_t i = 0; i < n; i++)
		ids[i] = tally_stackset_frame(&b->ss, frames[i].image, frames[i].offset);
	tally_stackset_add(&b->ss, pid, label, ids, n, counts);
	if (ids != buf)
		free(ids);
	if (cw != cwbuf)
		free(cw);
}

static bool ksym_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db_builder *b = ctx;
	return b->ksyms[idx].addr == *(const uint64_t *)key;
}

static bool ksym_before(const struct tally_ksym *a, const struct tally_ksym *b)
{
	int c = strcmp(a->name, b->name);
	if (!c)
		c = strcmp(a->module ? a->module : "", b->module ? b->module : "");
	if (!c)
		c = a->size != b->size ? (a->size < b->size ? -1 : 1) : a->type - b->type;
	return c < 0;
}

void tally_db_builder_ksym(struct tally_db_builder *b, const struct tally_ksym *k)
{
	uint64_t h = tally_hash_u64(k->addr);
	uint32_t i = tally_hidx_get(&b->ksym_idx, h, &k->addr, ksym_eq, b);
	if (i != TALLY_HIDX_NONE) {
		/* two kernels may name one address differently: the same one wins whatever the
		 * order */
		struct tally_ksym *x = &b->ksyms[i];
		if (b->canonical && ksym_before(k, x)) {
			free(x->name);
			free(x->module);
			*x = *k;
			x->name = xstrdup(k->name);
			x->module = k->module ? xstrdup(k->module) : NULL;
		}
		return;
	}
	GROW(b->ksyms, b->aksyms, b->nksyms + 1);
	struct tally_ksym *x = &b->ksyms[b->nksyms];
	*x = *k;
	x->name = xstrdup(k->name);
	x->module = k->module ? xstrdup(k->module) : NULL;
	tally_hidx_put(&b->ksym_idx, h, (uint32_t)b->nksyms++);
}

struct task_key {
	int pid;
	const char *comm, *exe;
};

static bool task_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db_builder *b = ctx;
	const struct tally_db_task *t = &b->tasks[idx];
	const struct task_key *k = key;
	return (b->by_program || t->pid == k->pid) && !strcmp(t->comm, k->comm) &&
	       !strcmp(t->exe, k->exe);
}

void tally_db_builder_tasks_by_program(struct tally_db_builder *b)
{
	b->by_program = true;
}

void tally_db_builder_task(struct tally_db_builder *b, int pid, const char *comm, const char *exe)
{
	struct task_key k = { pid, comm ? comm : "", exe ? exe : "" };
	uint64_t h = tally_hash_bytes(k.comm, strlen(k.comm),
				      b->by_program ? 0 : (uint64_t)(uint32_t)pid);
	h = tally_hash_bytes(k.exe, strlen(k.exe), h);
	uint32_t at = tally_hidx_get(&b->task_idx, h, &k, task_eq, b);
	if (at != TALLY_HIDX_NONE) {
		/* by program: the pid added last (the newest, in a daemon's merge) */
		b->tasks[at].pid = pid;
		return;
	}
	GROW(b->tasks, b->atasks, b->ntasks + 1);
	b->tasks[b->ntasks] = (struct tally_db_task){ pid, xstrdup(k.comm), xstrdup(k.exe) };
	tally_hidx_put(&b->task_idx, h, (uint32_t)b->ntasks++);
}

void tally_db_builder_modules(struct tally_db_builder *b, const char *modules)
{
	if (b->canonical && modules) {
		/* the union of the lists, sorted at the end */
		const char *p = modules;
		while (*p) {
			size_t l = strcspn(p, "\n");
			if (l && *p != '#') {
				char *line = xstrndup(p, l);
				strs_add(&b->module_lines, line);
				free(line);
			}
			p += l;
			if (*p)
				p++;
		}
		return;
	}
	free(b->modules);
	b->modules = modules ? xstrdup(modules) : NULL;
}

void tally_db_builder_counters(struct tally_db_builder *b, uint64_t lost, uint64_t throttled)
{
	b->lost += lost;
	b->throttled += throttled;
}

/* ---- sessions ---- */

/* A duration in seconds ("2.004") as whole milliseconds: sums of them do not
 * depend on the order they are added in. */
static uint64_t duration_ms(const char *d)
{
	double v = d ? strtod(d, NULL) : 0;
	return v > 0 ? (uint64_t)(v * 1000.0 + 0.5) : 0;
}

/* The session keys the result computes, spans or sums rather than copies. */
static bool computed_key(const char *k)
{
	static const char *const keys[] = {
		"format-version",    "events",    "samples",     "lost",
		"throttled",         "images",    "per-pid",     "call-graph",
		"start-time",        "stop-time", "duration",    "dwarf-stop-reasons",
		"fp-repair-stops",   "varies",    "weight-unit", "weight-total",
		"randomized-samples"
	};
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (!strcmp(k, keys[i]))
			return true;
	for (size_t i = 0; i < ARRAY_SIZE(summed_keys); i++)
		if (!strcmp(k, summed_keys[i]))
			return true;
	return false;
}

/* A key stops being copied once two parts disagree on it (its name goes to
 * 'varies'); so a key is in the result when every part that has it agrees,
 * whatever the order and grouping of the merges. */
static void canonical_keys(struct tally_db_builder *b, const struct tally_meta *m)
{
	const char *v = tally_meta_get(m, "varies");
	for (const char *p = v ? v : ""; *p;) {
		size_t l = strcspn(p, ",");
		if (l) {
			char *k = xstrndup(p, l);
			strs_add(&b->varies, k);
			free(k);
		}
		p += l;
		if (*p)
			p++;
	}
	for (size_t i = 0; i < m->n; i++) {
		const char *k = m->kv[i].key;
		if (computed_key(k) || strs_has(&b->varies, k))
			continue;
		const char *have = tally_meta_get(&b->session, k);
		if (!have)
			tally_meta_set(&b->session, k, "%s", m->kv[i].value);
		else if (strcmp(have, m->kv[i].value))
			strs_add(&b->varies, k);
	}
	/* the keys that vary leave the session */
	size_t w = 0;
	for (size_t i = 0; i < b->session.n; i++) {
		if (!computed_key(b->session.kv[i].key) &&
		    strs_has(&b->varies, b->session.kv[i].key)) {
			free(b->session.kv[i].key);
			free(b->session.kv[i].value);
			continue;
		}
		b->session.kv[w++] = b->session.kv[i];
	}
	b->session.n = w;
}

static void merge_session(struct tally_db_builder *b, const struct tally_meta *m)
{
	/* the newest database's values (canonical: those all agree on), then
	 * what spans or sums over all of them */
	if (b->canonical)
		canonical_keys(b, m);
	else
		for (size_t i = 0; i < m->n; i++)
			tally_meta_set(&b->session, m->kv[i].key, "%s", m->kv[i].value);
	/* the span of the times (the reader checked them; none before 1970) */
	double st, sp;
	if (tally_db_utc_time(tally_meta_get(m, "start-time"), &st) && st >= 0 &&
	    (!b->have_start || st < b->start)) {
		b->start = st;
		b->have_start = true;
	}
	if (tally_db_utc_time(tally_meta_get(m, "stop-time"), &sp) && sp >= 0 &&
	    (!b->have_stop || sp > b->stop)) {
		b->stop = sp;
		b->have_stop = true;
	}
	const char *d = tally_meta_get(m, "duration");
	if (d) {
		b->duration += strtod(d, NULL);
		b->duration_ms += duration_ms(d);
	}
	for (size_t k = 0; k < ARRAY_SIZE(summed_keys); k++) {
		const char *v = tally_meta_get(m, summed_keys[k]);
		if (v)
			b->sums[k] += strtoull(v, NULL, 10);
	}
	const char *why = tally_meta_get(m, "dwarf-stop-reasons");
	unsigned long long w1, w2, w3;
	if (why &&
	    sscanf(why,
		   "stack copy too small %llu, no CFI or unreadable frame %llu, depth limit %llu",
		   &w1, &w2, &w3) == 3) {
		b->sums[NSUMMED] += w1;
		b->sums[NSUMMED + 1] += w2;
		b->sums[NSUMMED + 2] += w3;
	}
	const char *fps = tally_meta_get(m, "fp-repair-stops");
	uint64_t fp[TALLY_FP_NSTOPS_SAID];
	if (fps && tally_fp_stops_parse(fps, fp))
		for (size_t i = 0; i < TALLY_FP_NSTOPS_SAID; i++)
			b->sums[NFPSTOPS + i] += fp[i];
	if (b->have_start) {
		char ts[32];
		tally_format_utc(b->start, ts, sizeof(ts));
		tally_meta_set(&b->session, "start-time", "%s", ts);
	}
	if (b->have_stop) {
		char ts[32];
		tally_format_utc(b->stop, ts, sizeof(ts));
		tally_meta_set(&b->session, "stop-time", "%s", ts);
	}
	if (d && b->canonical)
		tally_meta_set(&b->session, "duration", "%" PRIu64 ".%03" PRIu64,
			       b->duration_ms / 1000, b->duration_ms % 1000);
	else if (d)
		tally_meta_set(&b->session, "duration", "%.3f", b->duration);
	for (size_t k = 0; k < ARRAY_SIZE(summed_keys); k++)
		if (tally_meta_get(m, summed_keys[k]) ||
		    tally_meta_get(&b->session, summed_keys[k]))
			tally_meta_set(&b->session, summed_keys[k], "%" PRIu64, b->sums[k]);
	if (why || tally_meta_get(&b->session, "dwarf-stop-reasons"))
		tally_meta_set(&b->session, "dwarf-stop-reasons",
			       "stack copy too small %" PRIu64
			       ", no CFI or unreadable frame %" PRIu64 ", depth limit %" PRIu64,
			       b->sums[NSUMMED], b->sums[NSUMMED + 1], b->sums[NSUMMED + 2]);
	/* a merge with a database recorded before the repair said its causes
	 * sums those that did */
	if (fps || tally_meta_get(&b->session, "fp-repair-stops"))
		tally_meta_set(&b->session, "fp-repair-stops", TALLY_FP_STOPS_FMT,
			       b->sums[NFPSTOPS], b->sums[NFPSTOPS + 1], b->sums[NFPSTOPS + 2],
			       b->sums[NFPSTOPS + 3]);
}

static bool add_fits(uint64_t sum, uint64_t v)
{
	return v <= UINT64_MAX - sum;
}

int tally_db_builder_fits(const struct tally_db_builder *b, const struct tally_db *src,
			  const char *what)
{
	for (int e = 0; e < src->nevents; e++)
		for (int k = 0; k < b->nevents; k++)
			if (!strcmp(src->events[e], b->events[k]) &&
			    !add_fits(b->totals[k], src->samples[e]))
				return tally_seterr(
					-EOVERFLOW,
					"'%s': its '%s' samples and those merged before it add up past %" PRIu64
					" (merge fewer databases at once)",
					what, src->events[e], UINT64_MAX);
	/* the weights too (a database without them weighs count x period-mean) */
	for (int e = 0; e < src->nevents; e++)
		for (int k = 0; k < b->nevents; k++) {
			if (strcmp(src->events[e], b->events[k]))
				continue;
			uint64_t w = 0;
			const uint64_t *sw = tally_db_raw_weights(src),
				       *sc = tally_db_raw_counts(src);
			uint64_t mean = sw ? 1 : tally_db_mean_period(src, e);
			bool over = false;
			for (size_t i = 0; i < src->nentries && !over; i++) {
				uint64_t x;
				size_t at = i * (size_t)src->nevents + (size_t)e;
				over = sw ? false : __builtin_mul_overflow(sc[at], mean, &x);
				if (sw)
					x = sw[at];
				over = over || __builtin_add_overflow(w, x, &w);
			}
			if (over || !add_fits(b->wtotals[k], w))
				return tally_seterr(
					-EOVERFLOW,
					"'%s': its '%s' weights and those merged before it add up past %" PRIu64
					" (merge fewer databases at once)",
					what, src->events[e], UINT64_MAX);
		}
	uint64_t v[ARRAY_SIZE(b->sums)] = { 0 };
	for (size_t k = 0; k < ARRAY_SIZE(summed_keys); k++) {
		const char *s = tally_meta_get(&src->session, summed_keys[k]);
		v[k] = s ? strtoull(s, NULL, 10) : 0; /* checked by the reader */
	}
	const char *why = tally_meta_get(&src->session, "dwarf-stop-reasons");
	unsigned long long w[3] = { 0, 0, 0 };
	if (why)
		(void)sscanf(
			why,
			"stack copy too small %llu, no CFI or unreadable frame %llu, depth limit %llu",
			&w[0], &w[1], &w[2]);
	for (int i = 0; i < 3; i++)
		v[NSUMMED + i] = w[i];
	const char *fps = tally_meta_get(&src->session, "fp-repair-stops");
	uint64_t fp[TALLY_FP_NSTOPS_SAID];
	if (fps && tally_fp_stops_parse(fps, fp))
		for (size_t i = 0; i < TALLY_FP_NSTOPS_SAID; i++)
			v[NFPSTOPS + i] = fp[i];
	bool fits = add_fits(b->lost, src->lost) && add_fits(b->throttled, src->throttled);
	for (size_t k = 0; k < ARRAY_SIZE(v); k++)
		fits = fits && add_fits(b->sums[k], v[k]);
	if (!fits)
		return tally_seterr(
			-EOVERFLOW,
			"'%s': its counters (lost, throttled, dwarf-*, fp-leaf-*, fp-repair-*, jit-untrusted) and those merged before it add up past %" PRIu64
			" (merge fewer databases at once)",
			what, UINT64_MAX);
	uint64_t d = duration_ms(tally_meta_get(&src->session, "duration"));
	if (!add_fits(b->duration_ms, d) ||
	    b->duration_ms + d > (uint64_t)(TALLY_DURATION_MAX * 1000))
		return tally_seterr(
			-EOVERFLOW,
			"'%s': its duration and those merged before it add up past %.0f days, more than a database may hold (merge fewer databases at once)",
			what, TALLY_DURATION_MAX / 86400);
	return 0;
}

/* The builder's id of src's label set l (with the source's labels), made
 * the first time it is asked for; lab caches them. */
static uint32_t source_label(struct tally_db_builder *b, const struct tally_db *src, uint32_t *lab,
			     uint32_t l)
{
	if (l > src->nlabels)
		l = 0;
	if (lab[l] == TALLY_HIDX_NONE) {
		struct tally_labelset set;
		tally_labelset_copy(&set, tally_db_labelset(src, l));
		for (size_t k = 0; k < b->source.n; k++)
			if (!tally_labelset_get(&set, b->source.v[k].key))
				tally_labelset_set(&set, b->source.v[k].key, b->source.v[k].value);
		lab[l] = tally_db_builder_label(b, &set);
		tally_labelset_release(&set);
	}
	return lab[l];
}

/* c (2 * ne: counts, then weights) = stack s of src in the builder's events. */
static void stack_cw(uint64_t *c, size_t ne, const struct tally_db *src, const int *col,
		     const uint64_t *mean, const uint64_t *sc, const uint64_t *sw, size_t s)
{
	memset(c, 0, 2 * ne * sizeof(uint64_t));
	for (int e = 0; e < src->nevents; e++) {
		if (col[e] < 0)
			continue;
		size_t at = s * (size_t)src->nevents + (size_t)e;
		c[col[e]] = sc[at];
		if (sw)
			c[ne + (size_t)col[e]] = sw[at];
		else
			c[ne + (size_t)col[e]] = tally_mul_sat(sc[at], mean[e]);
	}
}

/* Adds src's randomized-samples (REACHED/TOTAL per event) to the builder's. */
static void source_random(struct tally_db_builder *b, const struct tally_db *src, const int *col)
{
	const char *v = tally_meta_get(&src->session, "randomized-samples");
	if (!v)
		return;
	const char *p = v;
	for (int e = 0; e < src->nevents && *p; e++) {
		char *end;
		unsigned long long r = strtoull(p, &end, 10), t = 0;
		if (*end == '/')
			t = strtoull(end + 1, &end, 10);
		if (col[e] >= 0) {
			b->rs_reached[col[e]] = tally_add_sat(b->rs_reached[col[e]], r);
			b->rs_total[col[e]] = tally_add_sat(b->rs_total[col[e]], t);
		}
		p = end;
		if (*p != ',')
			break;
		p++;
	}
	b->rs_any = true;
}

void tally_db_builder_add(struct tally_db_builder *b, const struct tally_db *src)
{
	size_t ne = (size_t)b->nevents;
	int *col = xmalloc(((size_t)src->nevents + 1) * sizeof(int)); /* src event -> ours, or -1 */
	for (int e = 0; e < src->nevents; e++) {
		col[e] = -1;
		for (int k = 0; k < b->nevents; k++)
			if (!strcmp(src->events[e], b->events[k]))
				col[e] = k;
		if (col[e] >= 0)
			b->totals[col[e]] += src->samples[e];
	}
	uint32_t *img = xmalloc((src->nimages + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < src->nimages; i++) {
		struct tally_db_image im = src->images[i];
		/* its copied files stay where they are until written again */
		if (!im.aux && !im.jd_text && !im.dir &&
		    (!strcmp(im.kind, "jit") || !strcmp(im.kind, "vdso")))
			im.dir = (char *)tally_db_image_dir(src, (uint32_t)i);
		img[i] = tally_db_builder_image(b, &im);
	}
	/* its label sets (those in use: an unused one would be a set of the
	 * result), with the source's labels for the keys a set lacks */
	uint32_t *lab = xmalloc((src->nlabels + 1) * sizeof(uint32_t));
	for (size_t l = 0; l <= src->nlabels; l++)
		lab[l] = TALLY_HIDX_NONE;
	/* an entry's label set is its profile's */
	uint32_t *elab = xmalloc((src->nentries + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < src->nentries; i++)
		elab[i] = TALLY_HIDX_NONE;
	for (size_t p = 0; p < src->nprofs; p++)
		for (size_t i = src->profs[p].first; i < src->profs[p].end && i < src->nentries;
		     i++)
			elab[i] = source_label(b, src, lab, src->profs[p].label);
	for (size_t i = 0; i < src->nentries; i++)
		if (elab[i] == TALLY_HIDX_NONE)
			elab[i] = source_label(b, src, lab, 0);
	/* the counts and their weights: a database without weights of its own
	 * weighs each sample by its own period-mean, so that a merge of databases
	 * sampled at different periods is right for each of them */
	const uint64_t *scounts = tally_db_raw_counts(src), *sweights = tally_db_raw_weights(src);
	const uint64_t *sscounts = tally_db_raw_stack_counts(src),
		       *ssweights = tally_db_raw_stack_weights(src);
	uint64_t *mean = xcalloc((size_t)src->nevents + 1, sizeof(uint64_t));
	for (int e = 0; e < src->nevents; e++)
		mean[e] = tally_db_mean_period(src, e);
	uint64_t *c = xcalloc(2 * ne + 1, sizeof(uint64_t)), *w = c + ne;
	for (size_t i = 0; i < src->nentries; i++) {
		const struct tally_db_entry *en = &src->entries[i];
		memset(c, 0, 2 * ne * sizeof(uint64_t));
		for (int e = 0; e < src->nevents; e++)
			if (col[e] >= 0) {
				size_t at = i * (size_t)src->nevents + (size_t)e;
				c[col[e]] = scounts[at];
				if (sweights)
					w[col[e]] = sweights[at];
				else
					w[col[e]] = tally_mul_sat(scounts[at], mean[e]);
			}
		tally_db_builder_entry_w(b, img[en->image], en->pid, elab[i], en->offset, c, w);
		if (b->stacks && !src->has_stacks) {
			/* every sample needs a stack: its leaf alone says what is known */
			struct tally_frame f = { img[en->image], en->offset };
			tally_db_builder_stack_w(b, en->pid, elab[i], &f, 1, c, w);
		}
	}
	b->weighted = true;
	free(elab);
	if (b->stacks && src->has_stacks && src->lazy) {
		/* read when the result's are (tally_db_load_stacks, or
		 * tally_db_builder_load_stacks), every label set of src mapped */
		for (uint32_t l = 0; l <= src->nlabels; l++)
			(void)source_label(b, src, lab, l);
		lazy_take(&b->lazy, src, img, lab, col, b->nevents, b->per_pid);
	} else if (b->stacks && src->has_stacks && !b->lazy) {
		/* each distinct frame of src numbered once in ours, its stacks then
		 * added as they are held: runs of frame numbers */
		uint32_t *fid = xmalloc((src->nframe_tab + 1) * sizeof(uint32_t));
		for (size_t f = 0; f < src->nframe_tab; f++)
			fid[f] = tally_stackset_frame(&b->ss, img[src->frame_tab[f].image],
						      src->frame_tab[f].offset);
		uint32_t *ids = NULL;
		size_t aids = 0;
		for (size_t s = 0; s < src->nstacks; s++) {
			const struct tally_db_stack *st = &src->stacks[s];
			if (!st->len)
				continue;
			GROW(ids, aids, st->len);
			for (uint32_t k = 0; k < st->len; k++)
				ids[k] = fid[src->stack_frames[st->first + k]];
			stack_cw(c, ne, src, col, mean, sscounts, ssweights, s);
			tally_stackset_add(&b->ss, b->per_pid && st->pid > 0 ? st->pid : 0,
					   source_label(b, src, lab, st->label), ids, st->len, c);
		}
		free(ids);
		free(fid);
	} else if (b->stacks && src->has_stacks) {
		struct tally_frame *fr = NULL;
		size_t afr = 0;
		for (size_t s = 0; s < src->nstacks; s++) {
			const struct tally_db_stack *st = &src->stacks[s];
			GROW(fr, afr, st->len);
			for (uint32_t k = 0; k < st->len; k++)
				fr[k] = (struct tally_frame){
					img[tally_db_frame(src, st, k)->image],
					tally_db_frame(src, st, k)->offset
				};
			stack_cw(c, ne, src, col, mean, sscounts, ssweights, s);
			tally_db_builder_stack_w(b, st->pid, source_label(b, src, lab, st->label),
						 fr, st->len, c, w);
		}
		free(fr);
	}
	for (size_t i = 0; i < src->nksyms; i++)
		tally_db_builder_ksym(b, &src->ksyms[i]);
	for (size_t i = 0; i < src->ntasks; i++)
		tally_db_builder_task(b, src->tasks[i].pid, src->tasks[i].comm, src->tasks[i].exe);
	b->lost += src->lost;
	b->throttled += src->throttled;
	if (src->modules)
		tally_db_builder_modules(b, src->modules);
	merge_session(b, &src->session);
	source_random(b, src, col);
	b->sources = true;
	if (b->track_sources)
		add_sources(b, src);
	free(mean);
	free(c);
	free(lab);
	free(img);
	free(col);
}

/* ---- a database's copied files, in memory ---- */

static void read_copy(const struct tally_db *db, uint32_t i, const char *rel, char **data,
		      size_t *len)
{
	struct strbuf p = STRBUF_INIT, sb = STRBUF_INIT;
	strbuf_addf(&p, "%s/%s", tally_db_image_dir(db, i), rel);
	/* as the writer reads them: a regular file, never through a link */
	if (tally_read_regular(&sb, AT_FDCWD, p.buf, 0, TALLY_DB_FILE_MAX) == 0) {
		*len = sb.len;
		*data = strbuf_detach(&sb);
	}
	strbuf_release(&p);
	strbuf_release(&sb);
}

void tally_db_keep_copies(struct tally_db *db)
{
	struct strbuf rel = STRBUF_INIT;
	for (uint32_t i = 0; i < db->nimages; i++) {
		struct tally_db_image *im = &db->images[i];
		if (im->aux || im->jd_text)
			continue;
		if (!strcmp(im->kind, "jit")) {
			strbuf_reset(&rel);
			strbuf_addf(&rel, "jit/perf-%d-%s.map", im->pid, im->id);
			read_copy(db, i, rel.buf, &im->aux, &im->aux_len);
			strbuf_reset(&rel);
			strbuf_addf(&rel, "jit/jitdump-%d-%s.txt", im->pid, im->id);
			read_copy(db, i, rel.buf, &im->jd_text, &im->jd_text_len);
		} else if (!strcmp(im->kind, "vdso")) {
			read_copy(db, i, "vdso.so", &im->aux, &im->aux_len);
		}
	}
	strbuf_release(&rel);
}
