/* callgrind (op2calltree): the callgrind profile format that callgrind_annotate
 * and KCachegrind read. Self cost per function at instruction positions (and
 * source lines when known), inclusive cost through calls= lines built from the
 * stacks; one file for everything, or one per process. docs/export.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/export.h"

#ifndef TALLY_VERSION
#define TALLY_VERSION "unknown"
#endif

struct cfunc {
	uint32_t image; /* UINT32_MAX: [other] */
	char *name;
	uint64_t addr;  /* link-time address of the function (callgrind's call target) */
	char *file;     /* source file, or NULL */
};

struct cframe {
	uint32_t image;
	uint64_t offset; /* looked up (callers: return address - 1) */
	uint32_t func;
	uint64_t addr;   /* link-time address of the instruction */
	int line;
};

/* self: (func, addr, line) -> costs; calls: (caller, site addr, site line, callee) -> calls, costs
 */
struct cost {
	uint32_t func, callee; /* callee UINT32_MAX for self cost */
	uint64_t addr;
	int line;
	uint64_t calls;
	uint32_t mark; /* the stack that last counted this call (recursion counts once) */
};

struct cg {
	const struct tally_export *x;
	struct cfunc *funcs;
	size_t nfuncs, afuncs;
	struct tally_hidx func_idx;
	struct cframe *frames;
	size_t nframes, aframes;
	struct tally_hidx frame_idx;
	struct cost *costs;
	size_t ncosts, acosts;
	uint64_t *cc; /* ncosts * nevents */
	size_t acc;
	struct tally_hidx cost_idx;
	uint32_t other;
};

static bool func_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct cfunc *a = &((const struct cg *)ctx)->funcs[idx], *b = key;
	return a->image == b->image && a->addr == b->addr && !strcmp(a->name, b->name);
}

static uint32_t func_id(struct cg *g, uint32_t image, const char *name, uint64_t addr,
			const char *file)
{
	struct cfunc k = { image, (char *)name, addr, NULL };
	uint64_t h = tally_hash_bytes(name, strlen(name), addr ^ ((uint64_t)image << 32));
	uint32_t i = tally_hidx_get(&g->func_idx, h, &k, func_eq, g);
	if (i == TALLY_HIDX_NONE) {
		GROW(g->funcs, g->afuncs, g->nfuncs + 1);
		g->funcs[g->nfuncs] =
			(struct cfunc){ image, xstrdup(name), addr, file ? xstrdup(file) : NULL };
		tally_hidx_put(&g->func_idx, h, (uint32_t)g->nfuncs);
		i = (uint32_t)g->nfuncs++;
	}
	return i;
}

static bool frame_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct cframe *a = &((const struct cg *)ctx)->frames[idx], *b = key;
	return a->image == b->image && a->offset == b->offset;
}

/* The function and position of the code at (image, offset): the function the
 * symbol table names, with its source file and line when debug info has them. */
static uint32_t frame_id(struct cg *g, uint32_t image, uint64_t offset)
{
	struct cframe k = { .image = image, .offset = offset };
	uint64_t h = tally_hash_u64(((uint64_t)image << 48) ^ tally_hash_u64(offset));
	uint32_t i = tally_hidx_get(&g->frame_idx, h, &k, frame_eq, g);
	if (i != TALLY_HIDX_NONE)
		return i;
	struct tally_resolver *res = g->x->res;
	const struct tally_db_image *im = &g->x->db->images[image];
	k.addr = tally_export_addr(res, image, offset);
	const struct tally_sym *s =
		tally_resolver_mismatch(res, image) ? NULL : tally_resolve(res, image, offset);
	if (s) {
		/* the function's own file and line (for inlined code: the line of the
		 * outermost call site), from the resolver's inline chain */
		const struct tally_srcframe *sf;
		size_t n = tally_resolve_frames(res, image, offset, false, &sf);
		const struct tally_srcframe *outer = n && !sf[n - 1].inlined ? &sf[n - 1] : NULL;
		k.func = func_id(g, image, s->name, s->addr, outer ? outer->file : NULL);
		k.line = outer ? outer->line : 0;
	} else {
		/* one function per image for what no symbol names, as folded's [IMAGE] */
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "[%s]", im->name);
		k.func = func_id(g, image, sb.buf, 0, NULL);
		strbuf_release(&sb);
	}
	GROW(g->frames, g->aframes, g->nframes + 1);
	g->frames[g->nframes] = k;
	tally_hidx_put(&g->frame_idx, h, (uint32_t)g->nframes);
	return (uint32_t)g->nframes++;
}

static bool cost_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct cost *a = &((const struct cg *)ctx)->costs[idx], *b = key;
	return a->func == b->func && a->callee == b->callee && a->addr == b->addr &&
	       a->line == b->line;
}

static uint32_t cost_id(struct cg *g, uint32_t func, uint32_t callee, uint64_t addr, int line)
{
	struct cost k = { func, callee, addr, line, 0, 0 };
	uint64_t h = tally_hash_u64(((uint64_t)func << 32 | callee) ^ tally_hash_u64(addr) ^
				    (uint64_t)(unsigned)line);
	uint32_t i = tally_hidx_get(&g->cost_idx, h, &k, cost_eq, g);
	if (i == TALLY_HIDX_NONE) {
		size_t ne = (size_t)g->x->nevents;
		GROW(g->costs, g->acosts, g->ncosts + 1);
		GROW(g->cc, g->acc, (g->ncosts + 1) * ne);
		g->costs[g->ncosts] = k;
		memset(&g->cc[g->ncosts * ne], 0, ne * sizeof(uint64_t));
		tally_hidx_put(&g->cost_idx, h, (uint32_t)g->ncosts);
		i = (uint32_t)g->ncosts++;
	}
	return i;
}

static void add_cc(struct cg *g, uint32_t c, const uint64_t *v)
{
	size_t ne = (size_t)g->x->nevents;
	for (size_t e = 0; e < ne; e++)
		g->cc[c * ne + e] += v[e];
}

static int cmp_cost(const void *a, const void *b, void *ctx)
{
	const struct cg *g = ctx;
	const struct cost *x = &g->costs[*(const uint32_t *)a],
			  *y = &g->costs[*(const uint32_t *)b];
	const struct cfunc *fx = &g->funcs[x->func], *fy = &g->funcs[y->func];
	if (fx->image != fy->image)
		return fx->image < fy->image ? -1 : 1;
	if (x->func != y->func)
		return x->func < y->func ? -1 : 1;
	/* self cost first, then calls */
	if ((x->callee == UINT32_MAX) != (y->callee == UINT32_MAX))
		return x->callee == UINT32_MAX ? -1 : 1;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->callee != y->callee)
		return x->callee < y->callee ? -1 : 1;
	return x->line - y->line;
}

/* Name compression (the format's "(id) name"): ids per kind, given on first use. */
struct names {
	struct tally_hidx idx;
	char **v;
	size_t n, alloc;
};

static bool name_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !strcmp(((const struct names *)ctx)->v[idx], key);
}

static void put_name(struct strbuf *o, const char *field, struct names *t, const char *name)
{
	uint64_t h = tally_hash_bytes(name, strlen(name), 3);
	uint32_t i = tally_hidx_get(&t->idx, h, name, name_eq, t);
	if (i != TALLY_HIDX_NONE) {
		strbuf_addf(o, "%s=(%u)\n", field, i + 1);
		return;
	}
	GROW(t->v, t->alloc, t->n + 1);
	t->v[t->n] = xstrdup(name);
	tally_hidx_put(&t->idx, h, (uint32_t)t->n);
	t->n++;
	strbuf_addf(o, "%s=(%zu) ", field, t->n);
	tally_export_add_name(o, name, "");
	strbuf_addch(o, '\n');
}

static void release_names(struct names *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	tally_hidx_release(&t->idx);
}

static void add_costs(struct strbuf *o, const uint64_t *v, int ne)
{
	for (int e = 0; e < ne; e++) {
		strbuf_addch(o, ' ');
		strbuf_add_u64(o, v[e]);
	}
	strbuf_addch(o, '\n');
}

/* One callgrind file: the samples of process pid (all with pid < 0). */
static void write_one(const struct tally_export *x, int pid, struct strbuf *o)
{
	const struct tally_db *db = x->db;
	size_t ne = (size_t)x->nevents, dbne = (size_t)db->nevents;
	struct cg g = { .x = x, .other = UINT32_MAX };
	uint64_t *c = xcalloc(ne + 1, sizeof(uint64_t));
	uint64_t *totals = xcalloc(ne + 1, sizeof(uint64_t));

	/* stacks (or flat locations) as frame ids, root first */
	uint32_t *fr = NULL;
	uint64_t *counts = NULL, *nsamp = NULL; /* nsamp: each stack's samples (calls=) */
	struct tally_trim_stack *st = NULL;
	size_t nfr = 0, afr = 0, nst = 0, ast = 0, acounts = 0, ansamp = 0;
	size_t nsrc = db->has_stacks ? db->nstacks : db->nentries;
	/* the sample counts: beside the weights once db is weighed */
	const uint64_t *raw = db->has_stacks ? (db->weighed ? db->stack_weights : db->stack_counts)
					     : (db->weighed ? db->weights : db->counts);
	for (size_t k = 0; k < nsrc; k++) {
		int32_t p = db->has_stacks ? db->stacks[k].pid : db->entries[k].pid;
		if (pid >= 0 && p != pid)
			continue;
		bool any = false;
		for (size_t e = 0; e < ne; e++) {
			c[e] = db->has_stacks ? db->stack_counts[k * dbne + (size_t)x->events[e]]
					      : db->counts[k * dbne + (size_t)x->events[e]];
			totals[e] += c[e];
			any |= c[e] != 0;
		}
		if (!any)
			continue;
		GROW(st, ast, nst + 1);
		GROW(counts, acounts, (nst + 1) * ne);
		memcpy(&counts[nst * ne], c, ne * sizeof(uint64_t));
		GROW(nsamp, ansamp, nst + 1);
		nsamp[nst] = 0;
		for (size_t e = 0; e < ne; e++)
			nsamp[nst] += raw[k * dbne + (size_t)x->events[e]];
		st[nst].first = (uint32_t)nfr;
		if (db->has_stacks) {
			const struct tally_db_stack *s = &db->stacks[k];
			GROW(fr, afr, nfr + s->len + 1);
			for (uint32_t f = s->len; f-- > 0;) {
				const struct tally_frame *q = tally_db_frame(db, s, f);
				uint64_t off = q->offset - (f == 0 || !q->offset ? 0 : 1);
				fr[nfr++] = frame_id(&g, q->image, off);
			}
		} else {
			GROW(fr, afr, nfr + 1);
			fr[nfr++] = frame_id(&g, db->entries[k].image, db->entries[k].offset);
		}
		st[nst].len = (uint32_t)nfr - st[nst].first;
		nst++;
	}
	uint64_t *min = xcalloc(ne + 1, sizeof(uint64_t));
	tally_export_trim_min(x, totals, min);
	uint32_t *keep = xcalloc(nst + 1, sizeof(uint32_t));
	tally_export_trim(fr, st, nst, counts, (int)ne, min, keep);

	/* self cost at the leaf; each call (caller frame -> callee function) with the
	 * inclusive cost of the stacks that hold it, once per stack */
	for (size_t k = 0; k < nst; k++) {
		const uint32_t *f = &fr[st[k].first];
		uint32_t n = keep[k];
		uint64_t *v = &counts[k * ne];
		uint64_t calls = nsamp[k];
		uint32_t leaf_func;
		uint64_t leaf_addr = 0;
		int leaf_line = 0;
		if (n < st[k].len) {
			if (g.other == UINT32_MAX)
				g.other = func_id(&g, UINT32_MAX, "[other]", 0, NULL);
			leaf_func = g.other;
		} else {
			leaf_func = g.frames[f[n - 1]].func;
			leaf_addr = g.frames[f[n - 1]].addr;
			leaf_line = g.frames[f[n - 1]].line;
		}
		add_cc(&g, cost_id(&g, leaf_func, UINT32_MAX, leaf_addr, leaf_line), v);
		uint32_t mark = (uint32_t)k + 1;
		for (uint32_t j = 0; j < n; j++) {
			const struct cframe *caller = &g.frames[f[j]];
			uint32_t callee = j + 1 < n ? g.frames[f[j + 1]].func
						    : (n < st[k].len ? g.other : UINT32_MAX);
			if (callee == UINT32_MAX)
				break;
			/* a function's consecutive frames are one (as in tally report) */
			if (callee == caller->func)
				continue;
			uint32_t ci = cost_id(&g, caller->func, callee, caller->addr, caller->line);
			if (g.costs[ci].mark == mark)
				continue;
			g.costs[ci].mark = mark;
			g.costs[ci].calls += calls;
			add_cc(&g, ci, v);
		}
	}

	strbuf_addstr(o, "# callgrind format\nversion: 1\ncreator: tally " TALLY_VERSION "\n");
	if (pid > 0)
		strbuf_addf(o, "pid: %d\n", pid);
	const char *cmd =
		pid > 0 ? tally_db_comm(db, pid) : tally_meta_get(&db->session, "command");
	if (!cmd)
		cmd = tally_meta_get(&db->session, "target");
	if (cmd) {
		strbuf_addstr(o, "cmd: ");
		tally_export_add_name(o, cmd, "");
		strbuf_addch(o, '\n');
	}
	strbuf_addstr(o, "part: 1\ndesc: tally export of ");
	tally_export_add_name(o, x->input, "");
	strbuf_addch(o, '\n');
	/* each event's cost: its time in nanoseconds or its events (each sample
	 * weighted by its period), or (--samples) its samples */
	for (size_t e = 0; e < ne; e++) {
		const char *u = !db->weighed                           ? "samples"
				: tally_db_unit_time(db, x->events[e]) ? "nanoseconds"
								       : "events";
		strbuf_addf(o, "event: %s : %s %s\n", db->events[x->events[e]],
			    db->events[x->events[e]], u);
	}
	strbuf_addstr(o, "positions: instr line\nevents:");
	for (size_t e = 0; e < ne; e++)
		strbuf_addf(o, " %s", db->events[x->events[e]]);
	strbuf_addch(o, '\n');

	uint32_t *order = xmalloc((g.ncosts + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < g.ncosts; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, g.ncosts, sizeof(uint32_t), cmp_cost, &g);
	struct names obs = { 0 }, fls = { 0 }, fns = { 0 };
	struct strbuf sb = STRBUF_INIT;
	uint32_t cur = UINT32_MAX, cur_image = UINT32_MAX - 1;
	uint64_t *sum = xcalloc(ne + 1, sizeof(uint64_t));
	for (size_t i = 0; i < g.ncosts; i++) {
		const struct cost *q = &g.costs[order[i]];
		const uint64_t *v = &g.cc[order[i] * ne];
		const struct cfunc *fn = &g.funcs[q->func];
		if (q->func != cur) {
			strbuf_addch(o, '\n');
			if (fn->image != cur_image) {
				put_name(o, "ob", &obs,
					 fn->image == UINT32_MAX
						 ? "[other]"
						 : tally_export_image_name(&db->images[fn->image],
									   &sb));
				cur_image = fn->image;
			}
			put_name(o, "fl", &fls, fn->file ? fn->file : "???");
			put_name(o, "fn", &fns, fn->name);
			cur = q->func;
		}
		if (q->callee == UINT32_MAX) {
			strbuf_addf(o, "0x%" PRIx64 " %d", q->addr, q->line);
			add_costs(o, v, (int)ne);
			for (size_t e = 0; e < ne; e++)
				sum[e] += v[e];
			continue;
		}
		const struct cfunc *ce = &g.funcs[q->callee];
		if (ce->image != fn->image)
			put_name(o, "cob", &obs,
				 ce->image == UINT32_MAX
					 ? "[other]"
					 : tally_export_image_name(&db->images[ce->image], &sb));
		put_name(o, "cfl", &fls, ce->file ? ce->file : "???");
		put_name(o, "cfn", &fns, ce->name);
		strbuf_addf(o, "calls=%" PRIu64 " 0x%" PRIx64 " 0\n0x%" PRIx64 " %d", q->calls,
			    ce->addr, q->addr, q->line);
		add_costs(o, v, (int)ne);
	}
	strbuf_addstr(o, "\ntotals:");
	add_costs(o, sum, (int)ne);

	free(sum);
	strbuf_release(&sb);
	release_names(&obs);
	release_names(&fls);
	release_names(&fns);
	free(order);
	free(keep);
	free(min);
	free(st);
	free(counts);
	free(nsamp);
	free(fr);
	free(c);
	free(totals);
	for (size_t i = 0; i < g.nfuncs; i++) {
		free(g.funcs[i].name);
		free(g.funcs[i].file);
	}
	free(g.funcs);
	tally_hidx_release(&g.func_idx);
	free(g.frames);
	tally_hidx_release(&g.frame_idx);
	free(g.costs);
	free(g.cc);
	tally_hidx_release(&g.cost_idx);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return x < y ? -1 : x > y;
}

int tally_export_callgrind(const struct tally_export *x, struct tally_export_out *out)
{
	const struct tally_db *db = x->db;
	if (!x->per_process) {
		write_one(x, -1, tally_export_out_file(out, ""));
		return 0;
	}
	if (!db->per_pid)
		return tally_seterr(
			-EINVAL,
			"'%s' was recorded without --per-pid, so it has no processes to write one file each for (record again with --per-pid, or leave out --per-process)",
			x->input);
	/* the processes with samples of the exported events */
	size_t dbne = (size_t)db->nevents;
	size_t nsrc = db->has_stacks ? db->nstacks : db->nentries;
	int *pids = NULL;
	size_t npids = 0, apids = 0;
	for (size_t k = 0; k < nsrc; k++) {
		bool any = false;
		for (int e = 0; e < x->nevents && !any; e++)
			any = (db->has_stacks ? db->stack_counts
					      : db->counts)[k * dbne + (size_t)x->events[e]] != 0;
		if (!any)
			continue;
		GROW(pids, apids, npids + 1);
		pids[npids++] = db->has_stacks ? db->stacks[k].pid : db->entries[k].pid;
	}
	tally_qsort(pids, npids, sizeof(int), cmp_int);
	struct strbuf suffix = STRBUF_INIT;
	for (size_t i = 0; i < npids; i++) {
		if (i && pids[i] == pids[i - 1])
			continue;
		strbuf_reset(&suffix);
		strbuf_addf(&suffix, ".%d", pids[i]);
		write_one(x, pids[i], tally_export_out_file(out, suffix.buf));
	}
	strbuf_release(&suffix);
	free(pids);
	return 0;
}
