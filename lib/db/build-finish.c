/* The built database: images, label sets and stacks put in an order of
 * their own (tally_db_builder_canonical), then handed out as a struct tally_db
 * with the session's counts computed from the data. */
#define _GNU_SOURCE
#include "build.h"
#include "db-private.h"
#include "stacks.h"
#include "tally/db.h"
#include "tally/util.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void meta_del(struct tally_meta *m, const char *key)
{
	size_t w = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (!strcmp(m->kv[i].key, key)) {
			free(m->kv[i].key);
			free(m->kv[i].value);
			continue;
		}
		m->kv[w++] = m->kv[i];
	}
	m->n = w;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_source(const void *a, const void *b)
{
	return tally_db_source_cmp(a, b);
}

static const struct tally_db_builder *sort_ctx;

static int cmp_cell(const void *x, const void *y)
{
	const struct bcell *a = &sort_ctx->cells[*(const uint32_t *)x],
			   *b = &sort_ctx->cells[*(const uint32_t *)y];
	if (a->image != b->image)
		return a->image < b->image ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->label != b->label)
		return a->label < b->label ? -1 : 1;
	return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* ---- the canonical order: the same result whatever the order of the adds ---- */

static int cmp_image(const void *x, const void *y)
{
	const struct tally_db_image *a = &sort_ctx->images[*(const uint32_t *)x],
				    *b = &sort_ctx->images[*(const uint32_t *)y];
	int c = strcmp(tally_db_kind_class(a->kind), tally_db_kind_class(b->kind));
	if (!c)
		c = strcmp(a->id, b->id);
	if (!c)
		c = strcmp(a->path, b->path);
	if (!c && a->pid != b->pid)
		c = a->pid < b->pid ? -1 : 1;
	if (!c)
		c = strcmp(a->name, b->name);
	return c ? c : strcmp(a->kind, b->kind);
}

static int cmp_label(const void *x, const void *y)
{
	return tally_labelset_cmp(&sort_ctx->labels[*(const uint32_t *)x],
				  &sort_ctx->labels[*(const uint32_t *)y]);
}

/* A stack's place in the canonical order: its pid, label set, then its
 * frames root first, each by a hash of it (its root's here: cheap to compare
 * first), by the frame itself where two hashes are equal. Stacks that share
 * their callers are next to one another, as in a call tree: a reader that goes
 * through them in order finds the callers it met just before. */
struct stack_order {
	uint32_t stack;
	int32_t pid;
	uint32_t label;
	uint64_t root;
};

static const uint64_t *sort_fh; /* per frame of the builder's stacks, its hash */

static int cmp_frame(const struct tally_frame *f, const struct tally_frame *g)
{
	if (f->image != g->image)
		return f->image < g->image ? -1 : 1;
	return f->offset < g->offset ? -1 : f->offset > g->offset;
}

static int cmp_stack(const void *x, const void *y)
{
	const struct stack_order *p = x, *q = y;
	if (p->pid != q->pid)
		return p->pid < q->pid ? -1 : 1;
	if (p->label != q->label)
		return p->label < q->label ? -1 : 1;
	if (p->root != q->root)
		return p->root < q->root ? -1 : 1;
	const struct stackset *ss = &sort_ctx->ss;
	const struct tally_db_stack *a = &ss->stacks[p->stack], *b = &ss->stacks[q->stack];
	const uint32_t *fa = &ss->stack_frames[a->first], *fb = &ss->stack_frames[b->first];
	uint32_t n = a->len < b->len ? a->len : b->len;
	for (uint32_t i = 1; i <= n; i++) {
		uint32_t u = fa[a->len - i], v = fb[b->len - i];
		if (u == v)
			continue;
		if (sort_fh[u] != sort_fh[v])
			return sort_fh[u] < sort_fh[v] ? -1 : 1;
		int c = cmp_frame(&ss->frame_tab[u], &ss->frame_tab[v]);
		if (c)
			return c;
	}
	return a->len < b->len ? -1 : a->len > b->len;
}

static int cmp_task(const void *x, const void *y)
{
	const struct tally_db_task *a = x, *b = y;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	int c = strcmp(a->comm, b->comm);
	return c ? c : strcmp(a->exe, b->exe);
}

/* The rank of a session key in the written file: the order of docs/format.md,
 * then the others by name. */
static int key_rank(const char *k)
{
	static const char *const order[] = {
		"format-version",
		"tool",
		"host",
		"kernel-release",
		"arch",
		"target",
		"command",
		"cpus",
		"events",
		"sampling",
		"randomized",
		"period-kind",
		"randomized-scope",
		"randomized-samples",
		"period-mean",
		"period-min",
		"period-max",
		"interval-p10-p50-p90",
		"per-pid",
		"call-graph",
		"max-stack",
		"stack-size",
		"dwarf-unwinds",
		"dwarf-stopped-early",
		"dwarf-joined-fp",
		"dwarf-stop-reasons",
		"start-time",
		"stop-time",
		"duration",
		"exit-status",
		"samples",
		"weight-unit",
		"weight-total",
		"lost",
		"throttled",
		"images",
		"kernel-symbols",
		"jit-untrusted",
		"epoch",
		"epochs",
		"daemon-pid",
		"cpu-sampling",
		"varies",
	};
	for (size_t i = 0; i < ARRAY_SIZE(order); i++)
		if (!strcmp(k, order[i]))
			return (int)i;
	return (int)ARRAY_SIZE(order);
}

static int cmp_kv(const void *x, const void *y)
{
	const struct tally_kv *a = x, *b = y;
	int ra = key_rank(a->key), rb = key_rank(b->key);
	return ra != rb ? (ra < rb ? -1 : 1) : strcmp(a->key, b->key);
}

/* Images, label sets and stacks in an order of their own (not the order they
 * came in), the indices that name them renumbered. */
static void canonicalize(struct tally_db_builder *b)
{
	struct stackset *ss = &b->ss;
	size_t n = b->nimages > b->nlabels ? b->nimages : b->nlabels;
	if (ss->nstacks > n)
		n = ss->nstacks;
	uint32_t *order = xmalloc((n + 1) * sizeof(uint32_t));
	uint32_t *newi = xmalloc((n + 2) * sizeof(uint32_t));
	sort_ctx = b;

	for (size_t i = 0; i < b->nimages; i++)
		order[i] = (uint32_t)i;
	tally_qsort(order, b->nimages, sizeof(uint32_t), cmp_image);
	struct tally_db_image *images = xmalloc((b->nimages + 1) * sizeof(*images));
	for (size_t i = 0; i < b->nimages; i++) {
		images[i] = b->images[order[i]];
		newi[order[i]] = (uint32_t)i;
	}
	free(b->images);
	b->images = images;
	b->aimages = b->nimages;
	for (size_t i = 0; i < b->ncells; i++)
		b->cells[i].image = newi[b->cells[i].image];
	/* the frames' index goes stale: nothing is added after this */
	for (size_t i = 0; i < ss->nframe_tab; i++)
		ss->frame_tab[i].image = newi[ss->frame_tab[i].image];

	/* the label sets in use (a set of an input that names no sample is not
	 * one of the result), in their own order */
	bool *used = xcalloc(b->nlabels + 1, sizeof(bool));
	for (size_t i = 0; i < b->ncells; i++)
		used[b->cells[i].label] = true;
	for (size_t i = 0; i < ss->nstacks; i++)
		used[ss->stacks[i].label] = true;
	size_t nl = 0;
	for (size_t i = 0; i < b->nlabels; i++) {
		if (used[i + 1])
			order[nl++] = (uint32_t)i;
		else
			tally_labelset_release(&b->labels[i]);
	}
	free(used);
	tally_qsort(order, nl, sizeof(uint32_t), cmp_label);
	struct tally_labelset *labels = xmalloc((nl + 1) * sizeof(*labels));
	newi[0] = 0;
	for (size_t i = 0; i < nl; i++) {
		labels[i] = b->labels[order[i]];
		newi[order[i] + 1] = (uint32_t)i + 1;
	}
	free(b->labels);
	tally_hidx_release(&b->label_idx); /* stale too */
	b->labels = labels;
	b->nlabels = b->alabels = nl;
	for (size_t i = 0; i < b->ncells; i++)
		b->cells[i].label = newi[b->cells[i].label];
	for (size_t i = 0; i < ss->nstacks; i++)
		ss->stacks[i].label = newi[ss->stacks[i].label];

	/* the stacks (their frames stay where they are; the stacks' index goes stale) */
	uint64_t *fh = xmalloc((ss->nframe_tab + 1) * sizeof(uint64_t));
	for (size_t i = 0; i < ss->nframe_tab; i++)
		fh[i] = tally_hash_u64(ss->frame_tab[i].offset ^
				       ((uint64_t)ss->frame_tab[i].image << 48));
	sort_fh = fh;
	struct stack_order *so = xmalloc((ss->nstacks + 1) * sizeof(*so));
	for (size_t i = 0; i < ss->nstacks; i++) {
		const struct tally_db_stack *st = &ss->stacks[i];
		so[i] = (struct stack_order){
			(uint32_t)i, st->pid, st->label,
			st->len ? fh[ss->stack_frames[st->first + st->len - 1]] : 0
		};
	}
	tally_qsort(so, ss->nstacks, sizeof(*so), cmp_stack);
	sort_fh = NULL;
	free(fh);
	size_t ne = 2 * (size_t)b->nevents; /* counts, then weights */
	struct tally_db_stack *stacks = xmalloc((ss->nstacks + 1) * sizeof(*stacks));
	uint64_t *counts = xmalloc((ss->nstacks * ne + 1) * sizeof(uint64_t));
	for (size_t i = 0; i < ss->nstacks; i++) {
		stacks[i] = ss->stacks[so[i].stack];
		memcpy(&counts[i * ne], &ss->counts[(size_t)so[i].stack * ne],
		       ne * sizeof(uint64_t));
	}
	free(so);
	free(ss->stacks);
	free(ss->counts);
	ss->stacks = stacks;
	ss->astacks = ss->nstacks + 1;
	ss->counts = counts;
	ss->acounts = ss->nstacks * ne + 1;

	tally_qsort(b->tasks, b->ntasks, sizeof(*b->tasks), cmp_task);
	if (b->module_lines.n) {
		tally_qsort(b->module_lines.v, b->module_lines.n, sizeof(char *), cmp_str);
		struct strbuf sb = STRBUF_INIT;
		strbuf_addstr(&sb, "# name size address build-id\n");
		for (size_t i = 0; i < b->module_lines.n; i++)
			strbuf_addf(&sb, "%s\n", b->module_lines.v[i]);
		free(b->modules);
		b->modules = strbuf_detach(&sb);
	}
	if (b->varies.n) {
		tally_qsort(b->varies.v, b->varies.n, sizeof(char *), cmp_str);
		struct strbuf sb = STRBUF_INIT;
		for (size_t i = 0; i < b->varies.n; i++)
			strbuf_addf(&sb, "%s%s", i ? "," : "", b->varies.v[i]);
		tally_meta_set(&b->session, "varies", "%s", sb.buf);
		strbuf_release(&sb);
	}
	sort_ctx = NULL;
	free(order);
	free(newi);
}

static int cmp_ksym(const void *x, const void *y)
{
	const struct tally_ksym *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

int tally_db_builder_load_stacks(struct tally_db_builder *b)
{
	return lazy_read(&b->ss, &b->lazy);
}

void tally_db_builder_finish(struct tally_db_builder *b, struct tally_db *out)
{
	size_t ne = (size_t)b->nevents;
	/* the canonical order needs every stack: those that cannot be read stay
	 * unread, with their error (the result cannot be written without them) */
	if (b->canonical && !tally_db_builder_load_stacks(b))
		canonicalize(b);
	memset(out, 0, sizeof(*out));
	out->path = xstrdup("");
	out->nevents = b->nevents;
	out->events = b->events;
	b->events = NULL;
	out->per_pid = b->per_pid;
	out->has_stacks = b->stacks;
	out->samples = xcalloc(ne + 1, sizeof(uint64_t));
	out->lost = b->lost;
	out->throttled = b->throttled;
	out->images = b->images;
	out->nimages = b->nimages;
	b->images = NULL;
	b->nimages = 0;

	/* entries grouped per (image, pid), by offset: one .prof each */
	uint32_t *order = xmalloc((b->ncells + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < b->ncells; i++)
		order[i] = (uint32_t)i;
	sort_ctx = b;
	tally_qsort(order, b->ncells, sizeof(uint32_t), cmp_cell);
	sort_ctx = NULL;
	out->entries = xmalloc((b->ncells + 1) * sizeof(*out->entries));
	out->counts = xmalloc((b->ncells * ne + 1) * sizeof(uint64_t));
	out->weights = xmalloc((b->ncells * ne + 1) * sizeof(uint64_t));
	out->nentries = out->aentries = b->ncells;
	out->acounts = out->aweights = b->ncells * ne;
	for (size_t i = 0; i < b->ncells; i++) {
		const struct bcell *c = &b->cells[order[i]];
		out->entries[i] = (struct tally_db_entry){ c->image, c->pid, c->offset };
		memcpy(&out->counts[i * ne], &b->ccounts[(size_t)order[i] * 2 * ne],
		       ne * sizeof(uint64_t));
		memcpy(&out->weights[i * ne], &b->ccounts[(size_t)order[i] * 2 * ne + ne],
		       ne * sizeof(uint64_t));
		for (size_t e = 0; e < ne; e++)
			out->samples[e] += out->counts[i * ne + e];
		if (!i || c->image != out->entries[i - 1].image ||
		    c->pid != out->entries[i - 1].pid ||
		    c->label != out->profs[out->nprofs - 1].label) {
			GROW(out->profs, out->aprofs, out->nprofs + 1);
			out->profs[out->nprofs++] =
				(struct tally_db_prof){ c->image, c->pid, i, i, c->label };
		}
		out->profs[out->nprofs - 1].end = i + 1;
	}
	free(order);

	tally_stackset_to_db(&b->ss, out);
	out->has_weights = b->weighted;
	if (!b->weighted) {
		/* nothing gave weights: a database of counts alone, as format 1 and 2 */
		free(out->weights);
		free(out->stack_weights);
		out->weights = out->stack_weights = NULL;
		out->aweights = out->astack_weights = 0;
	}
	if (b->lazy)
		b->lazy->dedup = true;
	out->lazy = b->lazy;
	b->lazy = NULL;

	tally_qsort(b->ksyms, b->nksyms, sizeof(*b->ksyms), cmp_ksym);
	out->ksyms = b->ksyms;
	out->nksyms = b->nksyms;
	b->ksyms = NULL;
	b->nksyms = 0;
	out->tasks = b->tasks;
	out->ntasks = b->ntasks;
	b->tasks = NULL;
	b->ntasks = 0;
	out->modules = b->modules;
	b->modules = NULL;
	out->labels = b->labels;
	out->nlabels = b->nlabels;
	b->labels = NULL;
	b->nlabels = 0;
	/* the recordings: in an order of their own (merging is associative) */
	tally_qsort(b->srcs, b->nsrcs, sizeof(*b->srcs), cmp_source);
	out->sources = b->srcs;
	out->nsources = b->nsrcs;
	b->srcs = NULL;
	b->nsrcs = 0;
	if (out->modules)
		(void)tally_db_parse_modules(out, out->modules, strlen(out->modules), "modules"); /* our own text, or read (and checked) before */

	/* the session: the caller's (or the merged) keys, the counts from the data */
	out->session = b->session;
	memset(&b->session, 0, sizeof(b->session));
	struct tally_meta *m = &out->session;
	tally_meta_set(m, "format-version", "%d",
		       b->weighted    ? TALLY_FORMAT_VERSION_BINARY_STACKS
		       : out->nlabels ? TALLY_FORMAT_VERSION_LABELS
				      : TALLY_FORMAT_VERSION);
	struct strbuf sb = STRBUF_INIT;
	for (size_t e = 0; e < ne; e++)
		strbuf_addf(&sb, "%s%s", e ? "," : "", out->events[e]);
	tally_meta_set(m, "events", "%s", sb.buf ? sb.buf : "");
	strbuf_reset(&sb);
	for (size_t e = 0; e < ne; e++)
		strbuf_addf(&sb, "%s%" PRIu64, e ? "," : "", out->samples[e]);
	tally_meta_set(m, "samples", "%s", sb.buf ? sb.buf : "0");
	meta_del(m, "weight-unit");
	meta_del(m, "weight-total");
	if (b->weighted) {
		/* the unit by the event's kind (the sources' said the same) and the
		 * sum of the weights: what the reader checks them against */
		strbuf_reset(&sb);
		for (size_t e = 0; e < ne; e++)
			strbuf_addf(&sb, "%s%s", e ? "," : "", tally_db_unit(out, (int)e));
		tally_meta_set(m, "weight-unit", "%s", sb.buf ? sb.buf : "");
		strbuf_reset(&sb);
		for (size_t e = 0; e < ne; e++) {
			uint64_t t = 0;
			for (size_t i = 0; i < out->nentries; i++)
				t = tally_add_sat(t, out->weights[i * ne + e]);
			strbuf_addf(&sb, "%s%" PRIu64, e ? "," : "", t);
		}
		tally_meta_set(m, "weight-total", "%s", sb.buf ? sb.buf : "0");
	}
	if (b->rs_any) {
		strbuf_reset(&sb);
		for (size_t e = 0; e < ne; e++)
			strbuf_addf(&sb, "%s%" PRIu64 "/%" PRIu64, e ? "," : "", b->rs_reached[e],
				    b->rs_total[e]);
		tally_meta_set(m, "randomized-samples", "%s", sb.buf ? sb.buf : "");
	}
	strbuf_release(&sb);
	tally_meta_set(m, "lost", "%" PRIu64, out->lost);
	tally_meta_set(m, "throttled", "%" PRIu64, out->throttled);
	tally_meta_set(m, "images", "%zu", out->nimages);
	tally_meta_set(m, "per-pid", "%s", out->per_pid ? "yes" : "no");
	const char *cg = tally_meta_get(m, "call-graph");
	if (!out->has_stacks)
		tally_meta_set(m, "call-graph", "none");
	else if (!cg || !strcmp(cg, "none"))
		tally_meta_set(m, "call-graph", "fp");
	if (b->canonical)
		tally_qsort(m->kv, m->n, sizeof(*m->kv), cmp_kv);
	tally_db_builder_free(b);
}
