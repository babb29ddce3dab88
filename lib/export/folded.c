/* Folded stacks (Brendan Gregg's stackcollapse format): one line per distinct
 * function-level stack, root first, frames joined by ';', then the count. Read
 * by flamegraph.pl, inferno and speedscope. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/callgraph.h"
#include "tally/diff.h"
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

/* ---- two profiles: difffolded.pl's format ---- */

static void add_side(struct lines *l, uint64_t **cols, size_t *acols, int side, const struct tally_cg *cg,
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
		add_line(l, text, 0);
		uint32_t k = tally_hidx_get(&l->idx, tally_hash_bytes(text, strlen(text), 0), text, line_eq, l);
		if (*acols < l->n * 2) {
			size_t old = *acols;
			GROW(*cols, *acols, l->n * 2);
			memset(*cols + old, 0, (*acols - old) * sizeof(uint64_t));
		}
		(*cols)[(size_t)k * 2 + (size_t)side] += cs->count;
	}
	strbuf_release(&sb);
}

static const struct lines *sort_lines;

static int cmp_line_idx(const void *a, const void *b)
{
	return strcmp(sort_lines->v[*(const uint32_t *)a].text, sort_lines->v[*(const uint32_t *)b].text);
}

int tally_diff_folded(struct strbuf *out, const struct tally_cg *base_cg, const struct tally_db *base_db,
		      const struct tally_cg *new_cg, const struct tally_db *new_db, bool normalize)
{
	struct lines l = { 0 };
	uint64_t *cols = NULL;
	size_t acols = 0;
	add_side(&l, &cols, &acols, 0, base_cg, base_db);
	add_side(&l, &cols, &acols, 1, new_cg, new_db);
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
		base[i] = cols[(size_t)order[i] * 2];
		bt += base[i];
		nt += cols[(size_t)order[i] * 2 + 1];
	}
	if (normalize)
		tally_scale_counts(base, l.n, bt, nt);
	for (size_t i = 0; i < l.n; i++)
		strbuf_addf(out, "%s %" PRIu64 " %" PRIu64 "\n", l.v[order[i]].text, base[i], cols[(size_t)order[i] * 2 + 1]);
	free(base);
	free(order);
	free(cols);
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].text);
	free(l.v);
	tally_hidx_release(&l.idx);
	return 0;
}
