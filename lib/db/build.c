/* A database built in memory, by summing: the writer feeds it an aggregate,
 * report feeds it a daemon's epochs, the daemon feeds it an epoch and what it
 * aggregated since the last flush. Equal keys add up; nothing is kept twice. */
#define _GNU_SOURCE
#include "stacks.h"
#include "tally/db.h"
#include "tally/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bcell {
	uint32_t image;
	int32_t pid;
	uint64_t offset;
};

struct tally_db_builder {
	int nevents;
	char **events;
	bool per_pid, stacks;
	struct tally_meta session;
	bool sources; /* a database was added: its session is merged, not copied */
	double start, stop, duration;
	bool have_start, have_stop;
	uint64_t sums[7]; /* session counters that add up, see summed_keys */

	struct tally_db_image *images;
	size_t nimages, aimages;
	struct tally_hidx image_idx;

	struct bcell *cells;
	size_t ncells, acells;
	uint64_t *ccounts;
	size_t accounts;
	struct tally_hidx cell_idx;

	struct stackset ss;           /* the stacks, equal ones summed */
	struct tally_db_lazy *lazy;   /* stacks of the sources left unread, added after ss's */

	struct tally_ksym *ksyms;
	size_t nksyms, aksyms;
	struct tally_hidx ksym_idx;

	struct tally_db_task *tasks;
	size_t ntasks, atasks;
	struct tally_hidx task_idx;

	uint64_t lost, throttled;
	char *modules;
};

/* Counters of the session that a merge adds up (the stop reasons are three). */
static const char *const summed_keys[] = { "dwarf-unwinds", "dwarf-stopped-early", "dwarf-joined-fp", "jit-untrusted" };

struct tally_db_builder *tally_db_builder_new(int nevents, char *const *events, bool per_pid, bool stacks)
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
	return b;
}

static void image_free(struct tally_db_image *im)
{
	free(im->name);
	free(im->path);
	free(im->id);
	free(im->id_kind);
	free(im->kind);
	free(im->aux);
	free(im->jd_text);
	free(im->dir);
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
		image_free(&b->images[i]);
	free(b->images);
	tally_hidx_release(&b->image_idx);
	free(b->cells);
	free(b->ccounts);
	tally_hidx_release(&b->cell_idx);
	tally_stackset_release(&b->ss);
	tally_lazy_free(b->lazy);
	tally_ksyms_free(b->ksyms, b->nksyms);
	tally_hidx_release(&b->ksym_idx);
	for (size_t i = 0; i < b->ntasks; i++) {
		free(b->tasks[i].comm);
		free(b->tasks[i].exe);
	}
	free(b->tasks);
	tally_hidx_release(&b->task_idx);
	free(b->modules);
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
static const char *kind_class(const char *kind)
{
	return !strcmp(kind, "exec") ? "lib" : kind;
}

static uint64_t image_key_hash(const struct tally_db_image *im)
{
	const char *k = kind_class(im->kind);
	uint64_t h = tally_hash_bytes(k, strlen(k), 1);
	h = tally_hash_bytes(im->id, strlen(im->id), h);
	h = tally_hash_bytes(im->path, strlen(im->path), h);
	return tally_hash_u64(h ^ (uint64_t)(uint32_t)im->pid);
}

static bool image_key_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db_builder *b = ctx;
	const struct tally_db_image *x = &b->images[idx], *k = key;
	return x->pid == k->pid && !strcmp(kind_class(x->kind), kind_class(k->kind)) && !strcmp(x->id, k->id) &&
	       !strcmp(x->path, k->path);
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

/* ---- counts ---- */

static bool cell_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db_builder *b = ctx;
	const struct bcell *c = &b->cells[idx], *k = key;
	return c->image == k->image && c->pid == k->pid && c->offset == k->offset;
}

void tally_db_builder_entry(struct tally_db_builder *b, uint32_t image, int32_t pid, uint64_t offset,
			    const uint64_t *counts)
{
	struct bcell k = { image, b->per_pid && pid > 0 ? pid : 0, offset };
	uint64_t h = tally_hash_u64(offset ^ ((uint64_t)image << 40) ^ ((uint64_t)(uint32_t)k.pid << 8));
	uint32_t i = tally_hidx_get(&b->cell_idx, h, &k, cell_eq, b);
	size_t ne = (size_t)b->nevents;
	if (i == TALLY_HIDX_NONE) {
		GROW(b->cells, b->acells, b->ncells + 1);
		b->cells[b->ncells] = k;
		size_t want = (b->ncells + 1) * ne;
		if (want > b->accounts) {
			size_t old = b->accounts;
			GROW(b->ccounts, b->accounts, want);
			memset(b->ccounts + old, 0, (b->accounts - old) * sizeof(uint64_t));
		}
		tally_hidx_put(&b->cell_idx, h, (uint32_t)b->ncells);
		i = (uint32_t)b->ncells++;
	}
	for (size_t e = 0; e < ne; e++)
		b->ccounts[i * ne + e] += counts[e];
}

void tally_db_builder_stack(struct tally_db_builder *b, int32_t pid, const struct tally_frame *frames, uint32_t n,
			    const uint64_t *counts)
{
	if (!b->stacks || !n)
		return;
	pid = b->per_pid && pid > 0 ? pid : 0;
	if (b->lazy) {
		/* after the stacks left unread, in order */
		tally_lazy_stack(&b->lazy, pid, frames, n, counts, b->nevents);
		return;
	}
	uint32_t buf[64], *ids = n <= ARRAY_SIZE(buf) ? buf : xmalloc(n * sizeof(uint32_t));
	for (uint32_t i = 0; i < n; i++)
		ids[i] = tally_stackset_frame(&b->ss, frames[i].image, frames[i].offset);
	tally_stackset_add(&b->ss, pid, ids, n, counts);
	if (ids != buf)
		free(ids);
}

static bool ksym_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db_builder *b = ctx;
	return b->ksyms[idx].addr == *(const uint64_t *)key;
}

void tally_db_builder_ksym(struct tally_db_builder *b, const struct tally_ksym *k)
{
	uint64_t h = tally_hash_u64(k->addr);
	if (tally_hidx_get(&b->ksym_idx, h, &k->addr, ksym_eq, b) != TALLY_HIDX_NONE)
		return;
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
	return t->pid == k->pid && !strcmp(t->comm, k->comm) && !strcmp(t->exe, k->exe);
}

void tally_db_builder_task(struct tally_db_builder *b, int pid, const char *comm, const char *exe)
{
	struct task_key k = { pid, comm ? comm : "", exe ? exe : "" };
	uint64_t h = tally_hash_bytes(k.comm, strlen(k.comm), (uint64_t)(uint32_t)pid);
	h = tally_hash_bytes(k.exe, strlen(k.exe), h);
	if (tally_hidx_get(&b->task_idx, h, &k, task_eq, b) != TALLY_HIDX_NONE)
		return;
	GROW(b->tasks, b->atasks, b->ntasks + 1);
	b->tasks[b->ntasks] = (struct tally_db_task){ pid, xstrdup(k.comm), xstrdup(k.exe) };
	tally_hidx_put(&b->task_idx, h, (uint32_t)b->ntasks++);
}

void tally_db_builder_modules(struct tally_db_builder *b, const char *modules)
{
	free(b->modules);
	b->modules = modules ? xstrdup(modules) : NULL;
}

void tally_db_builder_counters(struct tally_db_builder *b, uint64_t lost, uint64_t throttled)
{
	b->lost += lost;
	b->throttled += throttled;
}

/* ---- sessions ---- */

/* "2026-11-21T13:07:00Z" to seconds since 1970, or -1. */
static double parse_utc(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	if (!s)
		return -1;
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (!end || *end)
		return -1;
	return (double)timegm(&tm);
}

static void merge_session(struct tally_db_builder *b, const struct tally_meta *m)
{
	/* the newest database's values, then what spans or sums over all of them */
	for (size_t i = 0; i < m->n; i++)
		tally_meta_set(&b->session, m->kv[i].key, "%s", m->kv[i].value);
	double st = parse_utc(tally_meta_get(m, "start-time"));
	double sp = parse_utc(tally_meta_get(m, "stop-time"));
	if (st >= 0 && (!b->have_start || st < b->start)) {
		b->start = st;
		b->have_start = true;
	}
	if (sp >= 0 && (!b->have_stop || sp > b->stop)) {
		b->stop = sp;
		b->have_stop = true;
	}
	const char *d = tally_meta_get(m, "duration");
	if (d)
		b->duration += strtod(d, NULL);
	for (size_t k = 0; k < ARRAY_SIZE(summed_keys); k++) {
		const char *v = tally_meta_get(m, summed_keys[k]);
		if (v)
			b->sums[k] += strtoull(v, NULL, 10);
	}
	const char *why = tally_meta_get(m, "dwarf-stop-reasons");
	unsigned long long w1, w2, w3;
	if (why && sscanf(why, "stack copy too small %llu, no CFI or unreadable frame %llu, depth limit %llu", &w1, &w2,
			  &w3) == 3) {
		b->sums[4] += w1;
		b->sums[5] += w2;
		b->sums[6] += w3;
	}
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
	if (d)
		tally_meta_set(&b->session, "duration", "%.3f", b->duration);
	for (size_t k = 0; k < ARRAY_SIZE(summed_keys); k++)
		if (tally_meta_get(&b->session, summed_keys[k]))
			tally_meta_set(&b->session, summed_keys[k], "%" PRIu64, b->sums[k]);
	if (tally_meta_get(&b->session, "dwarf-stop-reasons"))
		tally_meta_set(&b->session, "dwarf-stop-reasons",
			       "stack copy too small %" PRIu64 ", no CFI or unreadable frame %" PRIu64 ", depth limit %" PRIu64,
			       b->sums[4], b->sums[5], b->sums[6]);
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
	}
	uint32_t *img = xmalloc((src->nimages + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < src->nimages; i++) {
		struct tally_db_image im = src->images[i];
		/* its copied files stay where they are until written again */
		if (!im.aux && !im.jd_text && !im.dir && (!strcmp(im.kind, "jit") || !strcmp(im.kind, "vdso")))
			im.dir = (char *)tally_db_image_dir(src, (uint32_t)i);
		img[i] = tally_db_builder_image(b, &im);
	}
	uint64_t *c = xcalloc(ne + 1, sizeof(uint64_t));
	for (size_t i = 0; i < src->nentries; i++) {
		const struct tally_db_entry *en = &src->entries[i];
		memset(c, 0, ne * sizeof(uint64_t));
		for (int e = 0; e < src->nevents; e++)
			if (col[e] >= 0)
				c[col[e]] = src->counts[i * (size_t)src->nevents + (size_t)e];
		tally_db_builder_entry(b, img[en->image], en->pid, en->offset, c);
		if (b->stacks && !src->has_stacks) {
			/* every sample needs a stack: its leaf alone says what is known */
			struct tally_frame f = { img[en->image], en->offset };
			tally_db_builder_stack(b, en->pid, &f, 1, c);
		}
	}
	if (b->stacks && src->has_stacks && src->lazy) {
		/* read when the result's are (tally_db_load_stacks) */
		tally_lazy_take(&b->lazy, src, img, col, b->nevents, b->per_pid);
	} else if (b->stacks && src->has_stacks) {
		struct tally_frame *fr = NULL;
		size_t afr = 0;
		for (size_t s = 0; s < src->nstacks; s++) {
			const struct tally_db_stack *st = &src->stacks[s];
			GROW(fr, afr, st->len);
			for (uint32_t k = 0; k < st->len; k++)
				fr[k] = (struct tally_frame){ img[tally_db_frame(src, st, k)->image], tally_db_frame(src, st, k)->offset };
			memset(c, 0, ne * sizeof(uint64_t));
			for (int e = 0; e < src->nevents; e++)
				if (col[e] >= 0)
					c[col[e]] = src->stack_counts[s * (size_t)src->nevents + (size_t)e];
			tally_db_builder_stack(b, st->pid, fr, st->len, c);
		}
		free(fr);
	}
	for (size_t i = 0; i < src->nksyms; i++)
		tally_db_builder_ksym(b, &src->ksyms[i]);
	for (size_t i = 0; i < src->ntasks; i++)
		tally_db_builder_task(b, src->tasks[i].pid, src->tasks[i].comm, src->tasks[i].exe);
	b->lost += src->lost;
	b->throttled += src->throttled;
	if (src->modules) {
		free(b->modules);
		b->modules = xstrdup(src->modules);
	}
	merge_session(b, &src->session);
	b->sources = true;
	free(c);
	free(img);
	free(col);
}

/* ---- the result ---- */

static const struct tally_db_builder *sort_ctx;

static int cmp_cell(const void *x, const void *y)
{
	const struct bcell *a = &sort_ctx->cells[*(const uint32_t *)x], *b = &sort_ctx->cells[*(const uint32_t *)y];
	if (a->image != b->image)
		return a->image < b->image ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static int cmp_ksym(const void *x, const void *y)
{
	const struct tally_ksym *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

void tally_db_builder_finish(struct tally_db_builder *b, struct tally_db *out)
{
	size_t ne = (size_t)b->nevents;
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
	out->nentries = out->aentries = b->ncells;
	out->acounts = b->ncells * ne;
	for (size_t i = 0; i < b->ncells; i++) {
		const struct bcell *c = &b->cells[order[i]];
		out->entries[i] = (struct tally_db_entry){ c->image, c->pid, c->offset };
		memcpy(&out->counts[i * ne], &b->ccounts[(size_t)order[i] * ne], ne * sizeof(uint64_t));
		for (size_t e = 0; e < ne; e++)
			out->samples[e] += out->counts[i * ne + e];
		if (!i || c->image != out->entries[i - 1].image || c->pid != out->entries[i - 1].pid) {
			GROW(out->profs, out->aprofs, out->nprofs + 1);
			out->profs[out->nprofs++] = (struct tally_db_prof){ c->image, c->pid, i, i };
		}
		out->profs[out->nprofs - 1].end = i + 1;
	}
	free(order);

	tally_stackset_to_db(&b->ss, out);
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
	if (out->modules)
		(void)tally_db_parse_modules(out, out->modules, strlen(out->modules), "modules"); /* our own text, or read (and checked) before */

	/* the session: the caller's (or the merged) keys, the counts from the data */
	out->session = b->session;
	memset(&b->session, 0, sizeof(b->session));
	struct tally_meta *m = &out->session;
	if (!tally_meta_get(m, "format-version"))
		tally_meta_set(m, "format-version", "%d", TALLY_FORMAT_VERSION);
	struct strbuf sb = STRBUF_INIT;
	for (size_t e = 0; e < ne; e++)
		strbuf_addf(&sb, "%s%s", e ? "," : "", out->events[e]);
	tally_meta_set(m, "events", "%s", sb.buf ? sb.buf : "");
	strbuf_reset(&sb);
	for (size_t e = 0; e < ne; e++)
		strbuf_addf(&sb, "%s%" PRIu64, e ? "," : "", out->samples[e]);
	tally_meta_set(m, "samples", "%s", sb.buf ? sb.buf : "0");
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
	tally_db_builder_free(b);
}
