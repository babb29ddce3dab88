/* Folded stacks (Brendan Gregg's stackcollapse format): one line per distinct
 * function-level stack, root first, frames joined by ';', then the count. Read
 * by flamegraph.pl, inferno and speedscope. Lines come sorted as strcmp sorts
 * them, equal lines added up, without building the lines to sort them: each
 * name is ranked once (as followed by ';', and as ending the line), and the
 * stacks are grouped level by level on those ranks, which orders them as their
 * text would; the text is written once, as it goes out. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/callgraph.h"
#include "tally/diff.h"
#include "tally/export.h"

/* ---- the names: each distinct one once ---- */

struct names {
	char **v;
	size_t *len;
	size_t n, alloc, alen;
	struct tally_hidx idx;
};

static bool name_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !strcmp(((const struct names *)ctx)->v[idx], key);
}

static uint32_t name_id(struct names *t, const char *s)
{
	uint64_t h = tally_hash_bytes(s, strlen(s), 0);
	uint32_t i = tally_hidx_get(&t->idx, h, s, name_eq, t);
	if (i == TALLY_HIDX_NONE) {
		GROW(t->v, t->alloc, t->n + 1);
		GROW(t->len, t->alen, t->n + 1);
		t->v[t->n] = xstrdup(s);
		t->len[t->n] = strlen(s);
		tally_hidx_put(&t->idx, h, (uint32_t)t->n);
		i = (uint32_t)t->n++;
	}
	return i;
}

/* The root frame of --comm-root: the process's command name with a per-pid
 * database (a process without one, not in the task list or with an empty
 * name, is [pid N]), else its comm label, else the executable the stack runs in. */
static void root_label(const struct tally_db *db, const struct tally_export_comms *comms,
		       const struct tally_db_stack *st, struct strbuf *sb)
{
	if (db->per_pid && st->pid) {
		const char *c = tally_export_comm(comms, st->pid);
		if (c && *c)
			tally_export_add_name(sb, c, ";");
		else
			strbuf_addf(sb, "[pid %d]", st->pid);
		return;
	}
	/* the name the recording kept in the key (docs/format.md, "labels") */
	const char *c = tally_db_label(db, st->label, "comm");
	if (c && *c) {
		tally_export_add_name(sb, c, ";");
		return;
	}
	bool kernel = st->len > 0;
	for (uint32_t i = st->len; i-- > 0;) {
		const struct tally_db_image *im = &db->images[tally_db_frame(db, st, i)->image];
		if (!strcmp(im->kind, "exec")) {
			tally_export_add_name(sb, im->name, ";");
			return;
		}
		kernel &= !strcmp(im->kind, "kernel");
	}
	strbuf_addstr(sb, kernel ? "[kernel]" : "[unknown]");
}

static void frame_name(const struct tally_db *db, const struct tally_cg_func *f, struct strbuf *sb)
{
	if (!strcmp(f->name, "[unknown]")) {
		strbuf_addch(sb, '[');
		tally_export_add_name(sb, db->images[f->image].name, ";[]");
		strbuf_addch(sb, ']');
	} else {
		tally_export_add_name(sb, f->name, ";");
	}
}

/* A name followed by ';' (more frames follow: v even) or by the end of the
 * line (v odd), v = name * 2 + end, as strcmp orders the lines: names hold no
 * ';', so the first name that differs decides, with its ending. */
static int cmp_variant(const void *a, const void *b, void *ctx)
{
	const struct names *t = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const unsigned char *p = (const unsigned char *)t->v[x / 2],
			    *q = (const unsigned char *)t->v[y / 2];
	while (*p && *p == *q) {
		p++;
		q++;
	}
	int cp = *p ? *p : (x & 1 ? 0 : ';'), cq = *q ? *q : (y & 1 ? 0 : ';');
	return cp - cq;
}

/* ---- the lines ---- */

struct fold {
	const struct tally_cg *cg;
	const struct names *names;
	uint32_t *rank;     /* per name and ending: name * 2 + (0 more, 1 end) -> rank */
	uint32_t *label;    /* per stack: its --comm-root name, or NULL */
	uint32_t *fname;    /* per function: its name */
	uint32_t *keep;     /* per stack: its elements before [other] (see element) */
	uint32_t *nel;      /* per stack: its elements */
	uint32_t other;     /* the name [other] */
	uint32_t *order, *tmp, *key, *cnt;
	uint32_t *path;     /* the names of the group being grown, root first */
	size_t apath;
	struct strbuf *o;
	struct tally_export_out *out;
	int err;
};

/* Element d (root first) of stack s: a name. */
static inline uint32_t element(const struct fold *F, uint32_t s, uint32_t d)
{
	if (d >= F->keep[s])
		return F->other;
	if (F->label) {
		if (!d)
			return F->label[s];
		d--;
	}
	const struct tally_cg_stack *st = &F->cg->stacks[s];
	return F->fname[F->cg->funcs_of[st->first + st->len - 1 - d]];
}

static void emit(struct fold *F, uint32_t depth, uint64_t count)
{
	const struct names *t = F->names;
	size_t n = 24;
	for (uint32_t i = 0; i < depth; i++)
		n += t->len[F->path[i]] + 1;
	if (strbuf_grow(F->o, n)) {
		if (!F->err)
			F->err = tally_seterr(
				-ENOMEM, "no memory for a line of folded stacks (%zu bytes)", n);
		return;
	}
	char *p = F->o->buf + F->o->len;
	for (uint32_t i = 0; i < depth; i++) {
		if (i)
			*p++ = ';';
		memcpy(p, t->v[F->path[i]], t->len[F->path[i]]);
		p += t->len[F->path[i]];
	}
	char digits[24];
	int k = 0;
	do
		digits[k++] = (char)('0' + count % 10);
	while ((count /= 10));
	*p++ = ' ';
	while (k)
		*p++ = digits[--k];
	*p++ = '\n';
	*p = '\0';
	F->o->len = (size_t)(p - F->o->buf);
	int r = tally_export_out_flush(F->out, F->o);
	if (r && !F->err)
		F->err = r;
}

struct group {
	uint32_t key;  /* rank of (name, end) */
	uint32_t name;
	bool end;      /* the stacks of the group end here: one line */
	size_t start, end_at;
	uint64_t count;
};

static int cmp_group(const void *a, const void *b)
{
	uint32_t x = ((const struct group *)a)->key, y = ((const struct group *)b)->key;
	return x < y ? -1 : x > y;
}

/* The lines of the stacks order[i..j), which share their first d elements
 * (F->path[0..d)): grouped by element d and its ending, in rank order. */
static void lines(struct fold *F, size_t i, size_t j, uint32_t d)
{
	const struct tally_cg *cg = F->cg;
	GROW(F->path, F->apath, (size_t)d + 2);
	if (j - i == 1) {
		/* one stack: its line */
		uint32_t s = F->order[i];
		GROW(F->path, F->apath, (size_t)F->nel[s] + 1);
		for (uint32_t k = d; k < F->nel[s]; k++)
			F->path[k] = element(F, s, k);
		emit(F, F->nel[s], cg->stacks[s].count);
		return;
	}
	struct group gbuf[16], *g = gbuf;
	size_t ng = 0, ag = ARRAY_SIZE(gbuf);
	for (size_t k = i; k < j; k++) {
		if (k + 8 < j) {
			/* the stacks' functions are all over memory: fetched ahead */
			const struct tally_cg_stack *ahead = &cg->stacks[F->order[k + 8]];
			uint32_t e = d - (F->label ? 1 : 0);
			if (e < ahead->len)
				__builtin_prefetch(
					&cg->funcs_of[ahead->first + ahead->len - 1 - e]);
		}
		uint32_t s = F->order[k];
		uint32_t name = element(F, s, d);
		bool end = d + 1 == F->nel[s];
		uint32_t key = F->rank[name * 2 + end];
		F->key[s] = key;
		if (!F->cnt[key]++) {
			if (ng == ag) {
				ag *= 2;
				g = g == gbuf ? memcpy(xmalloc(ag * sizeof(*g)), gbuf, sizeof(gbuf))
					      : xrealloc(g, ag * sizeof(*g));
			}
			g[ng++] = (struct group){ key, name, end, 0, 0, 0 };
		}
	}
	if (ng > 1)
		qsort(g, ng, sizeof(*g), cmp_group);
	size_t pos = i;
	for (size_t k = 0; k < ng; k++) {
		g[k].start = g[k].end_at = pos;
		pos += F->cnt[g[k].key];
		F->cnt[g[k].key] = (uint32_t)k;
	}
	if (ng > 1) {
		for (size_t k = i; k < j; k++) {
			uint32_t s = F->order[k];
			struct group *q = &g[F->cnt[F->key[s]]];
			F->tmp[q->end_at++] = s;
			q->count += cg->stacks[s].count;
		}
		memcpy(F->order + i, F->tmp + i, (j - i) * sizeof(uint32_t));
	} else {
		g[0].end_at = j;
		for (size_t k = i; k < j; k++)
			g[0].count += cg->stacks[F->order[k]].count;
	}
	for (size_t k = 0; k < ng; k++)
		F->cnt[g[k].key] = 0;
	for (size_t k = 0; k < ng; k++) {
		F->path[d] = g[k].name;
		if (g[k].end) /* the stacks of the group are one line */
			emit(F, d + 1, g[k].count);
		else
			lines(F, g[k].start, g[k].end_at, d + 1);
	}
	if (g != gbuf)
		free(g);
}

int tally_export_folded(const struct tally_export *x, struct tally_export_out *out)
{
	const struct tally_db *db = x->db;
	int ev = x->events[0];
	struct tally_cg cg;
	tally_cg_build_flags(&cg, db, x->res, ev, NULL, NULL, TALLY_CG_NO_ARCS);
	struct fold F = { .cg = &cg, .out = out };
	struct names names = { 0 };
	F.names = &names;
	struct strbuf sb = STRBUF_INIT;

	/* the names: of the functions, [other], the root labels */
	F.fname = xmalloc((cg.nfuncs + 1) * sizeof(uint32_t));
	for (size_t f = 0; f < cg.nfuncs; f++) {
		strbuf_reset(&sb);
		frame_name(db, &cg.funcs[f], &sb);
		F.fname[f] = name_id(&names, sb.buf ? sb.buf : "");
	}
	F.other = name_id(&names, "[other]");
	if (x->comm_root) {
		struct tally_export_comms comms;
		tally_export_comms_init(&comms, db);
		F.label = xmalloc((cg.nstacks + 1) * sizeof(uint32_t));
		for (size_t s = 0; s < cg.nstacks; s++) {
			strbuf_reset(&sb);
			root_label(db, &comms, &db->stacks[cg.stacks[s].src], &sb);
			F.label[s] = name_id(&names, sb.buf ? sb.buf : "");
		}
		tally_export_comms_release(&comms);
	}

	/* --percent-limit: each stack's kept prefix (keys: the label's name, then
	 * functions; a label is only ever the first key, so the two never meet) */
	uint32_t cr = x->comm_root ? 1 : 0;
	F.keep = xmalloc((cg.nstacks + 1) * sizeof(uint32_t));
	F.nel = xmalloc((cg.nstacks + 1) * sizeof(uint32_t));
	uint64_t min;
	tally_export_trim_min(x, &cg.total, &min);
	if (min) {
		uint32_t *keys = NULL;
		uint64_t *counts = xmalloc((cg.nstacks + 1) * sizeof(uint64_t));
		size_t nkeys = 0, akeys = 0;
		struct tally_trim_stack *ts = xcalloc(cg.nstacks + 1, sizeof(*ts));
		for (size_t s = 0; s < cg.nstacks; s++) {
			const struct tally_cg_stack *cs = &cg.stacks[s];
			ts[s].first = (uint32_t)nkeys;
			counts[s] = cs->count;
			GROW(keys, akeys, nkeys + cs->len + 1);
			if (cr)
				keys[nkeys++] = F.label[s];
			for (uint32_t i = cs->len; i-- > 0;)
				keys[nkeys++] = cg.funcs_of[cs->first + i];
			ts[s].len = (uint32_t)nkeys - ts[s].first;
		}
		tally_export_trim(keys, ts, cg.nstacks, counts, 1, &min, F.keep);
		free(ts);
		free(counts);
		free(keys);
	} else {
		for (size_t s = 0; s < cg.nstacks; s++)
			F.keep[s] = cg.stacks[s].len + cr;
	}
	for (size_t s = 0; s < cg.nstacks; s++)
		F.nel[s] = F.keep[s] + (F.keep[s] < cg.stacks[s].len + cr);

	/* every name twice: followed by more, and ending the line; ranked */
	size_t nv = names.n * 2;
	uint32_t *byvar = xmalloc((nv + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < nv; i++)
		byvar[i] = (uint32_t)i;
	if (nv > 1)
		qsort_r(byvar, nv, sizeof(uint32_t), cmp_variant, &names);
	F.rank = xmalloc((nv + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < nv; i++)
		F.rank[byvar[i]] = (uint32_t)i;
	free(byvar);

	F.order = xmalloc((cg.nstacks + 1) * sizeof(uint32_t));
	F.tmp = xmalloc((cg.nstacks + 1) * sizeof(uint32_t));
	F.key = xmalloc((cg.nstacks + 1) * sizeof(uint32_t));
	F.cnt = xcalloc(nv + 1, sizeof(uint32_t));
	for (size_t s = 0; s < cg.nstacks; s++)
		F.order[s] = (uint32_t)s;
	F.o = tally_export_out_file(out, "");
	if (cg.nstacks)
		lines(&F, 0, cg.nstacks, 0);
	free(F.path);
	free(F.cnt);
	free(F.key);
	free(F.tmp);
	free(F.order);
	free(F.rank);
	strbuf_release(&sb);
	free(F.nel);
	free(F.keep);
	free(F.label);
	free(F.fname);
	for (size_t i = 0; i < names.n; i++)
		free(names.v[i]);
	free(names.v);
	free(names.len);
	tally_hidx_release(&names.idx);
	tally_cg_release(&cg);
	return F.err;
}

/* ---- two profiles: difffolded.pl's format ---- */

/* The distinct lines of both profiles, each with its two counts. */
struct dline {
	char *text;
	uint64_t count[2];
};

struct lines {
	struct dline *v;
	size_t n, alloc;
	struct tally_hidx idx;
};

static bool line_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !strcmp(((const struct lines *)ctx)->v[idx].text, key);
}

static void add_side(struct lines *l, int side, const struct tally_cg *cg,
		     const struct tally_db *db)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t s = 0; s < cg->nstacks; s++) {
		const struct tally_cg_stack *cs = &cg->stacks[s];
		if (!cs->count)
			continue;
		strbuf_reset(&sb);
		for (uint32_t i = cs->len; i-- > 0;) {
			frame_name(db, &cg->funcs[cg->funcs_of[cs->first + i]], &sb);
			if (i)
				strbuf_addch(&sb, ';');
		}
		const char *text = sb.buf ? sb.buf : "";
		uint64_t h = tally_hash_bytes(text, strlen(text), 0);
		uint32_t k = tally_hidx_get(&l->idx, h, text, line_eq, l);
		if (k == TALLY_HIDX_NONE) {
			GROW(l->v, l->alloc, l->n + 1);
			l->v[l->n] = (struct dline){ xstrdup(text), { 0, 0 } };
			tally_hidx_put(&l->idx, h, (uint32_t)l->n);
			k = (uint32_t)l->n++;
		}
		l->v[k].count[side] += cs->count;
	}
	strbuf_release(&sb);
}

static const struct lines *sort_lines;

static int cmp_line_idx(const void *a, const void *b)
{
	return strcmp(sort_lines->v[*(const uint32_t *)a].text,
		      sort_lines->v[*(const uint32_t *)b].text);
}

int tally_diff_folded(struct strbuf *out, const struct tally_cg *base_cg,
		      const struct tally_db *base_db, const struct tally_cg *new_cg,
		      const struct tally_db *new_db, bool normalize)
{
	struct lines l = { 0 };
	add_side(&l, 0, base_cg, base_db);
	add_side(&l, 1, new_cg, new_db);
	uint32_t *order = xmalloc((l.n + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < l.n; i++)
		order[i] = (uint32_t)i;
	sort_lines = &l;
	tally_qsort(order, l.n, sizeof(uint32_t), cmp_line_idx);
	sort_lines = NULL;
	/* the base column in the line order, scaled to the new total */
	uint64_t *base = xmalloc((l.n + 1) * sizeof(uint64_t));
	uint64_t bt = 0, nt = 0;
	for (size_t i = 0; i < l.n; i++) {
		base[i] = l.v[order[i]].count[0];
		bt += base[i];
		nt += l.v[order[i]].count[1];
	}
	if (normalize)
		tally_scale_counts(base, l.n, bt, nt);
	for (size_t i = 0; i < l.n; i++)
		strbuf_addf(out, "%s %" PRIu64 " %" PRIu64 "\n", l.v[order[i]].text, base[i],
			    l.v[order[i]].count[1]);
	free(base);
	free(order);
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].text);
	free(l.v);
	tally_hidx_release(&l.idx);
	return 0;
}
