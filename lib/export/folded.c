/* Folded stacks (Brendan Gregg's stackcollapse format): one line per distinct
 * function-level stack, root first, frames joined by ';', then the count. Read
 * by flamegraph.pl, inferno and speedscope. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/callgraph.h"
#include "tally/export.h"

struct line {
	char *text;
	uint64_t count;
};

struct lines {
	struct line *v;
	size_t n, alloc;
	struct tally_hidx idx;
};

static bool line_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct lines *l = ctx;
	return !strcmp(l->v[idx].text, key);
}

static void add_line(struct lines *l, const char *text, uint64_t count)
{
	uint64_t h = tally_hash_bytes(text, strlen(text), 0);
	uint32_t i = tally_hidx_get(&l->idx, h, text, line_eq, l);
	if (i == TALLY_HIDX_NONE) {
		GROW(l->v, l->alloc, l->n + 1);
		l->v[l->n] = (struct line){ xstrdup(text), 0 };
		tally_hidx_put(&l->idx, h, (uint32_t)l->n);
		i = (uint32_t)l->n++;
	}
	l->v[i].count += count;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

/* The root frame of --comm-root: the process's command name with a per-pid
 * database (a process without one, not in the task list or with an empty
 * name, is [pid N]), else the executable the stack runs in. */
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
	bool kernel = st->len > 0;
	for (uint32_t i = st->len; i-- > 0;) {
		const struct tally_db_image *im = &db->images[db->frames[st->first + i].image];
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

int tally_export_folded(const struct tally_export *x, struct tally_export_out *out)
{
	const struct tally_db *db = x->db;
	int ev = x->events[0];
	struct tally_cg cg;
	tally_cg_build(&cg, db, x->res, ev, NULL, NULL);

	/* keys, root first: functions, and with --comm-root a root label each */
	uint64_t *keys = NULL;
	size_t nkeys = 0, akeys = 0;
	struct tally_trim_stack *ts = xcalloc(cg.nstacks + 1, sizeof(*ts));
	char **roots = xcalloc(cg.nstacks + 1, sizeof(char *));
	struct lines labels = { 0 };
	struct tally_export_comms comms;
	tally_export_comms_init(&comms, db);
	uint64_t *counts = xmalloc((cg.nstacks + 1) * sizeof(uint64_t));
	for (size_t s = 0; s < cg.nstacks; s++) {
		const struct tally_cg_stack *cs = &cg.stacks[s];
		ts[s].first = (uint32_t)nkeys;
		counts[s] = cs->count;
		GROW(keys, akeys, nkeys + cs->len + 1);
		if (x->comm_root) {
			struct strbuf sb = STRBUF_INIT;
			root_label(db, &comms, &db->stacks[cs->src], &sb);
			roots[s] = strbuf_detach(&sb); /* never NULL, even when nothing was added */
			add_line(&labels, roots[s], 0);
			uint32_t li = tally_hidx_get(&labels.idx, tally_hash_bytes(roots[s], strlen(roots[s]), 0), roots[s],
						     line_eq, &labels);
			keys[nkeys++] = (1ULL << 40) + li;
		}
		for (uint32_t i = cs->len; i-- > 0;)
			keys[nkeys++] = cg.funcs_of[cs->first + i];
		ts[s].len = (uint32_t)nkeys - ts[s].first;
	}
	uint64_t min;
	tally_export_trim_min(x, &cg.total, &min);
	uint32_t *keep = xmalloc((cg.nstacks + 1) * sizeof(uint32_t));
	tally_export_trim(keys, ts, cg.nstacks, counts, 1, &min, keep);

	struct lines lines = { 0 };
	struct strbuf sb = STRBUF_INIT;
	for (size_t s = 0; s < cg.nstacks; s++) {
		strbuf_reset(&sb);
		for (uint32_t j = 0; j < keep[s]; j++) {
			if (j)
				strbuf_addch(&sb, ';');
			uint64_t k = keys[ts[s].first + j];
			if (k >= (1ULL << 40))
				strbuf_addstr(&sb, roots[s]);
			else
				frame_name(db, &cg.funcs[k], &sb);
		}
		if (keep[s] < ts[s].len)
			strbuf_addstr(&sb, keep[s] ? ";[other]" : "[other]");
		add_line(&lines, sb.buf ? sb.buf : "", cg.stacks[s].count);
	}
	strbuf_release(&sb);
	tally_qsort(lines.v, lines.n, sizeof(*lines.v), cmp_line);
	struct strbuf *o = tally_export_out_file(out, "");
	for (size_t i = 0; i < lines.n; i++) {
		strbuf_addf(o, "%s %" PRIu64 "\n", lines.v[i].text, lines.v[i].count);
		free(lines.v[i].text);
	}
	free(lines.v);
	tally_hidx_release(&lines.idx);
	tally_export_comms_release(&comms);
	for (size_t i = 0; i < labels.n; i++)
		free(labels.v[i].text);
	free(labels.v);
	tally_hidx_release(&labels.idx);
	for (size_t s = 0; s < cg.nstacks; s++)
		free(roots[s]);
	free(roots);
	free(keep);
	free(counts);
	free(ts);
	free(keys);
	tally_cg_release(&cg);
	return 0;
}
