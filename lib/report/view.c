/* The report's view model (see view.h): image, function, line and call-graph
 * rows, built once for every rendering (text, JSON, HTML). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tally/collect.h"
#include "tally/view.h"

void tally_view_rows_release(struct tally_view_rows *t)
{
	for (size_t i = 0; i < t->nowned; i++)
		free(t->owned[i]);
	free(t->owned);
	free(t->profs);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static const char *own(struct tally_view_rows *t, char *s)
{
	GROW(t->owned, t->aowned, t->nowned + 1);
	return t->owned[t->nowned++] = s;
}

static struct tally_view_row *add_row(struct tally_view_rows *t)
{
	GROW(t->v, t->alloc, t->n + 1);
	struct tally_view_row *r = &t->v[t->n];
	memset(r, 0, sizeof(*r));
	r->seq = t->n++;
	return r;
}

/* By samples, then name, file (rows without one last), line and pid; the
 * order found breaks the remaining ties. */
static int cmp_row(const void *a, const void *b)
{
	const struct tally_view_row *x = a, *y = b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	if (x->file != y->file) {
		if (!x->file || !y->file)
			return x->file ? -1 : 1;
		if ((c = strcmp(x->file, y->file)))
			return c;
	}
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The samples of entry i (the counts hold weights once db is weighed). */
static uint64_t raw_count(const struct tally_db *db, size_t i, int ev)
{
	const uint64_t *v = db->weighed ? db->weights : db->counts;
	return v[i * (size_t)db->nevents + (size_t)ev];
}

static bool image_row_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_view_row *r = &((const struct tally_view_rows *)ctx)->v[idx];
	const struct tally_db_prof *k = key;
	return r->image == k->image && r->pid == k->pid;
}

void tally_view_images(struct tally_view_rows *t, const struct tally_db *db,
		       const struct tally_select *sel, int ev)
{
	memset(t, 0, sizeof(*t));
	struct tally_hidx idx = { 0 };
	uint32_t *row_of = xmalloc((db->nprofs + 1) * sizeof(uint32_t));
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		row_of[p] = TALLY_HIDX_NONE;
		if (!tally_select_prof(sel, db, pf))
			continue;
		uint64_t c = 0, raw = 0;
		for (size_t i = pf->first; i < pf->end; i++) {
			c += db->counts[i * (size_t)db->nevents + (size_t)ev];
			raw += raw_count(db, i, ev);
		}
		if (!c)
			continue;
		t->total += c;
		t->ntotal += raw;
		/* one row per image and pid: a merge's label sets add up */
		uint64_t h =
			tally_hash_u64(((uint64_t)pf->image << 32) ^ (uint64_t)(uint32_t)pf->pid);
		uint32_t j = tally_hidx_get(&idx, h, pf, image_row_eq, t);
		if (j == TALLY_HIDX_NONE) {
			struct tally_view_row *r = add_row(t);
			const struct tally_db_image *im = &db->images[pf->image];
			r->image = pf->image;
			r->pid = pf->pid;
			r->prof = p;
			if (pf->pid && db->per_pid) {
				struct strbuf sb = STRBUF_INIT;
				strbuf_addf(&sb, "%s [%d]", im->name, pf->pid);
				r->name = own(t, strbuf_detach(&sb));
			} else {
				r->name = im->name;
			}
			j = (uint32_t)r->seq;
			tally_hidx_put(&idx, h, j);
		}
		t->v[j].samples += c;
		t->v[j].nsamples += raw;
		t->v[j].nprofs++;
		row_of[p] = j;
	}
	tally_hidx_release(&idx);
	/* each row's profiles, in the database's order */
	t->profs = xmalloc((db->nprofs + 1) * sizeof(size_t));
	size_t at = 0;
	for (size_t j = 0; j < t->n; j++) {
		t->v[j].profs = &t->profs[at];
		at += t->v[j].nprofs;
		t->v[j].nprofs = 0;
	}
	for (size_t p = 0; p < db->nprofs; p++)
		if (row_of[p] != TALLY_HIDX_NONE) {
			struct tally_view_row *r = &t->v[row_of[p]];
			((size_t *)r->profs)[r->nprofs++] = p;
		}
	free(row_of);
	tally_qsort(t->v, t->n, sizeof(*t->v), cmp_row);
}

static bool row_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_view_row *r = &((const struct tally_view_rows *)ctx)->v[idx], *k = key;
	return r->image == k->image && r->addr == k->addr && r->inlined == k->inlined &&
	       r->line == k->line && !strcmp(r->name, k->name) &&
	       (r->file == k->file || (r->file && k->file && !strcmp(r->file, k->file)));
}

/* The function rows of one profile's entries, added to t. */
static void prof_functions(struct tally_view_rows *t, struct tally_hidx *idx,
			   const struct tally_db *db, struct tally_resolver *res, int ev,
			   const struct tally_db_prof *pf, bool lines, bool one)
{
	for (size_t i = pf->first; i < pf->end; i++) {
		uint64_t c = db->counts[i * (size_t)db->nevents + (size_t)ev];
		if (!c)
			continue;
		uint64_t raw = raw_count(db, i, ev);
		t->total += c;
		t->ntotal += raw;
		struct tally_leaf lf;
		tally_resolve_leaf(res, pf->image, db->entries[i].offset, &lf);
		struct tally_view_row key = { .image = pf->image, .name = lf.name, .addr = lf.addr,
					      .has_addr = lf.has_addr, .inlined = lf.inlined };
		if (lines) {
			key.file = lf.file;
			key.line = lf.line;
		}
		/* equality on name and address: two local functions may share a name */
		uint64_t h = tally_hash_bytes(key.name, strlen(key.name),
					      key.addr ^ ((uint64_t)key.image << 32) ^
						      (uint64_t)key.line ^
						      ((uint64_t)key.inlined << 62));
		if (key.file)
			h = tally_hash_bytes(key.file, strlen(key.file), h);
		uint32_t j = tally_hidx_get(idx, h, &key, row_eq, t);
		if (j == TALLY_HIDX_NONE) {
			struct tally_view_row *r = add_row(t);
			size_t seq = r->seq;
			*r = key;
			r->seq = seq;
			r->pid = one ? pf->pid : 0;
			/* a raw offset's name is in lf.buf, which does not outlive this loop */
			if (key.name == lf.buf)
				r->name = own(t, xstrdup(lf.buf));
			tally_hidx_put(idx, h, (uint32_t)seq);
			j = (uint32_t)seq;
		}
		t->v[j].samples += c;
		t->v[j].nsamples += raw;
	}
}

void tally_view_functions(struct tally_view_rows *t, const struct tally_db *db,
			  struct tally_resolver *res, int ev, const struct tally_view_row *images,
			  size_t nimages, bool lines)
{
	memset(t, 0, sizeof(*t));
	struct tally_hidx idx = { 0 };
	for (size_t m = 0; m < nimages; m++) {
		/* an image row stands for its profiles (a row not from tally_view_images: its prof)
		 */
		size_t n = images[m].profs ? images[m].nprofs : 1;
		for (size_t q = 0; q < n; q++) {
			size_t p = images[m].profs ? images[m].profs[q] : images[m].prof;
			prof_functions(t, &idx, db, res, ev, &db->profs[p], lines, nimages == 1);
		}
	}
	tally_hidx_release(&idx);
	tally_qsort(t->v, t->n, sizeof(*t->v), cmp_row);
}

void tally_view_select(struct tally_db *db, const struct tally_select *sel)
{
	tally_select_apply(db, sel, true);
}

static bool keep_pid(const struct tally_db *db, int pid, const void *ctx)
{
	return tally_select_pid(ctx, db, pid);
}

/* By inclusive samples, then self, then name; the order found breaks the
 * remaining ties. */
static int cmp_incl(const void *a, const void *b)
{
	const struct tally_view_row *x = a, *y = b;
	if (x->incl != y->incl)
		return x->incl > y->incl ? -1 : 1;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Arcs grouped by one end, in arc order within a group (a counting sort). */
static void group_arcs(const struct tally_cg *cg, bool by_caller, uint32_t **list, uint32_t **first)
{
	uint32_t *f = xcalloc(cg->nfuncs + 2, sizeof(uint32_t));
	uint32_t *l = xmalloc((cg->narcs + 1) * sizeof(uint32_t));
	for (size_t a = 0; a < cg->narcs; a++)
		f[(by_caller ? cg->arcs[a].caller : cg->arcs[a].callee) + 1]++;
	for (size_t i = 0; i < cg->nfuncs; i++)
		f[i + 1] += f[i];
	uint32_t *at = xmalloc((cg->nfuncs + 1) * sizeof(uint32_t));
	memcpy(at, f, cg->nfuncs * sizeof(uint32_t));
	for (size_t a = 0; a < cg->narcs; a++)
		l[at[by_caller ? cg->arcs[a].caller : cg->arcs[a].callee]++] = (uint32_t)a;
	free(at);
	*list = l;
	*first = f;
}

void tally_view_cg_build(struct tally_view_cg *v, const struct tally_db *db,
			 struct tally_resolver *res, const struct tally_select *sel, int ev)
{
	tally_view_cg_build_flags(v, db, res, sel, ev, 0);
}

void tally_view_cg_build_flags(struct tally_view_cg *v, const struct tally_db *db,
			       struct tally_resolver *res, const struct tally_select *sel, int ev,
			       unsigned flags)
{
	memset(v, 0, sizeof(*v));
	tally_cg_build_flags(&v->cg, db, res, ev, keep_pid, sel, flags);
	const struct tally_cg *cg = &v->cg;
	struct tally_view_rows *t = &v->funcs;
	t->total = cg->total;
	for (size_t i = 0; i < cg->nfuncs; i++) {
		const struct tally_cg_func *f = &cg->funcs[i];
		struct tally_view_row *r = add_row(t);
		r->image = f->image;
		r->name = f->name;
		r->addr = f->addr;
		r->has_addr = f->has_addr && !f->inlined;
		r->inlined = f->inlined;
		r->samples = f->self;
		r->incl = f->incl;
		r->func = (uint32_t)i;
	}
	tally_qsort(t->v, t->n, sizeof(*t->v), cmp_incl);
	group_arcs(cg, false, &v->in, &v->in_first);
	group_arcs(cg, true, &v->out, &v->out_first);
}

void tally_view_cg_release(struct tally_view_cg *v)
{
	tally_view_rows_release(&v->funcs);
	free(v->in);
	free(v->in_first);
	free(v->out);
	free(v->out_first);
	tally_cg_release(&v->cg);
	memset(v, 0, sizeof(*v));
}

const uint32_t *tally_view_cg_arcs(const struct tally_view_cg *v, uint32_t f, bool callees,
				   size_t *n)
{
	const uint32_t *first = callees ? v->out_first : v->in_first;
	*n = first[f + 1] - first[f];
	return (callees ? v->out : v->in) + first[f];
}

static int cmp_kid(const void *a, const void *b, void *ctx)
{
	const struct tally_cg_node *nodes = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (nodes[x].count != nodes[y].count)
		return nodes[x].count > nodes[y].count ? -1 : 1;
	return x < y ? -1 : x > y; /* the model's order among equals */
}

uint32_t *tally_view_tree_kids(const struct tally_cg_node *nodes, uint32_t at, uint64_t base,
			       double limit, size_t *n)
{
	const struct tally_cg_node *nd = &nodes[at];
	uint32_t *kids = xmalloc((nd->nkids + 1) * sizeof(uint32_t));
	size_t nk = 0;
	for (size_t i = 0; i < nd->nkids; i++)
		if (tally_view_pct(nodes[nd->kids[i]].count, base) >= limit)
			kids[nk++] = nd->kids[i];
	qsort_r(kids, nk, sizeof(*kids), cmp_kid, (void *)nodes);
	*n = nk;
	return kids;
}

double tally_view_lost_pct(const struct tally_db *db)
{
	double all = (double)db->lost;
	for (int e = 0; e < db->nevents; e++)
		all += (double)db->samples[e];
	return all > 0 ? 100.0 * (double)db->lost / all : 0.0;
}

const char *tally_view_unit(const struct tally_db *db, int ev)
{
	return db->weighed ? tally_db_unit(db, ev) : "samples";
}

const char *tally_view_heading(const struct tally_db *db, int ev)
{
	if (!db->weighed)
		return "samples";
	return tally_db_unit_time(db, ev) ? "msec" : "events";
}

/* 1: off-CPU waits (blocked or preempted); 0: samples; 2: a --wall column (both) */
static int kind_of(const struct tally_db *db, int ev)
{
	if (db->walled && ev == db->wall[0])
		return 2;
	if (ev < 0 || ev >= db->nevents)
		return 0;
	const struct tally_event_desc *d = tally_event_find(db->events[ev]);
	return d && d->offcpu ? 1 : 0;
}

void tally_view_values_desc(struct strbuf *sb, const struct tally_db *db, int ev)
{
	tally_view_values_desc_sel(sb, db, ev, 0, NULL);
}

void tally_view_values_desc_sel(struct strbuf *sb, const struct tally_db *db, int ev,
				uint64_t sel_n, const char *sel)
{
	uint64_t all = ev >= 0 && ev < db->nevents && db->samples ? db->samples[ev] : 0;
	int kind = kind_of(db, ev);
	static const char *const what[] = { "samples", "waits", "samples and waits" };
	/* "840 samples in all", or a label selection's: "312 samples in host=h1, of 840 in all" */
	struct strbuf count = STRBUF_INIT;
	if (sel)
		strbuf_addf(&count, "%" PRIu64 "%s%s in %s, of %" PRIu64 " in all", sel_n,
			    db->weighed ? " " : "", db->weighed ? what[kind] : "", sel, all);
	else
		strbuf_addf(&count, "%" PRIu64 "%s%s in all", all, db->weighed ? " " : "",
			    db->weighed ? what[kind] : "");
	if (!db->weighed)
		strbuf_addf(sb, "%s (%s), not weighted by %s%s", what[kind], count.buf,
			    kind == 1 ? "their time" : "period",
			    tally_view_can_weigh(db)
				    ? ""
				    : " (the database has no periods to weigh them by)");
	else if (kind == 1)
		strbuf_addf(
			sb,
			"%s, the time of each wait off the CPU (%s): --samples for the number of waits",
			tally_view_heading(db, ev), count.buf);
	else if (kind == 2)
		strbuf_addf(
			sb,
			"%s, on-CPU samples weighted by period and waits off the CPU by their time (%s): --samples for their number",
			tally_view_heading(db, ev), count.buf);
	else
		strbuf_addf(
			sb,
			"%s, weighted by period (the %s each sample stands for; %s): --samples for sample counts",
			tally_view_heading(db, ev), tally_db_unit_time(db, ev) ? "time" : "events",
			count.buf);
	strbuf_release(&count);
}

void tally_view_labelspan(struct tally_view_labelspan *out, const struct tally_db *db,
			  const struct tally_select *sel, int ev)
{
	memset(out, 0, sizeof(*out));
	out->duration = -1;
	if (!sel || !sel->nlabels || ev < 0 || ev >= db->nevents)
		return;
	out->active = true;
	for (int i = 0; i < sel->nlabels; i++)
		strbuf_addf(&out->what, "%s%s", i ? "," : "", sel->labels[i]);
	/* counts, not weights: after tally_db_weigh the counts are in weights */
	const uint64_t *raw = db->weighed && db->weights ? db->weights : db->counts;
	size_t ne = (size_t)db->nevents;
	bool *from = xcalloc(db->nsources + 1, sizeof(bool));
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		if (!tally_select_label(sel, db, pf->label))
			continue;
		uint64_t n = 0;
		for (size_t i = pf->first; i < pf->end && i < db->nentries; i++)
			n = tally_add_sat(n, raw[i * ne + (size_t)ev]);
		out->samples = tally_add_sat(out->samples, n);
		const struct tally_labelset *set = tally_db_labelset(db, pf->label);
		for (size_t k = 0; n && k < db->nsources; k++)
			from[k] = from[k] || tally_db_source_in(&db->sources[k], set);
	}
	bool same_cmd = true;
	for (size_t k = 0; k < db->nsources; k++) {
		const struct tally_db_source *s = &db->sources[k];
		if (!from[k])
			continue;
		if (!out->nsources++) {
			out->duration = 0;
			out->command = s->command;
		}
		if (s->duration < 0 || out->duration < 0)
			out->duration = -1;
		else
			out->duration += s->duration;
		if (s->start && (!out->start || strcmp(s->start, out->start) < 0))
			out->start = s->start;
		if (s->stop && (!out->stop || strcmp(s->stop, out->stop) > 0))
			out->stop = s->stop;
		same_cmd =
			same_cmd && s->command && out->command && !strcmp(s->command, out->command);
	}
	if (!same_cmd)
		out->command = NULL;
	free(from);
}

void tally_view_labelspan_release(struct tally_view_labelspan *s)
{
	strbuf_release(&s->what);
}

/* Whether key is one the parts of a merge disagreed on (its 'varies'). */
static bool varies(const struct tally_db *db, const char *key)
{
	const char *v = tally_meta_get(&db->session, "varies");
	size_t n = strlen(key);
	for (; v && *v; v += strcspn(v, ",") + (v[strcspn(v, ",")] == ',')) {
		if (!strncmp(v, key, n) && (v[n] == ',' || !v[n]))
			return true;
	}
	return false;
}

void tally_view_event_desc(struct strbuf *sb, const struct tally_db *db, int ev)
{
	const char *samp = tally_meta_get(&db->session, "sampling");
	if (!samp && varies(db, "sampling"))
		samp = "sampled at several rates, merged by value"; /* tally merge of -F 99 and -F 499 */
	const char *min = tally_meta_get(&db->session, "off-cpu-min-ns");
	char *end = NULL;
	unsigned long long m = min ? strtoull(min, &end, 10) : 0;
	int kind = kind_of(db, ev);
	const char *name = ev >= 0 && ev < db->nevents ? db->events[ev] : "?";
	if (kind == 1)
		strbuf_addf(sb, "%s, every wait off the CPU (%s)", name,
			    strstr(name, "preempted") ? "preempted: runnable, waiting for a CPU"
						      : "blocked: sleeping or waiting");
	else if (kind == 2) {
		/* the on-CPU event's item of the session's "randomized" list */
		const char *r = tally_meta_get(&db->session, "randomized");
		for (int i = 0; r && i < ev; i++) {
			r = strchr(r, ',');
			r = r ? r + 1 : NULL;
		}
		strbuf_addf(
			sb,
			"wall: on the CPU sampled (%s%s), and every wait off the CPU, blocked or preempted",
			samp ? samp : "?",
			r && !strncmp(r, "yes", 3) && (r[3] == ',' || !r[3]) ? ", randomized" : "");
	}
	else
		strbuf_addf(sb, "%s, %s", name, samp ? samp : "?");
	if (kind && end && !*end && m)
		strbuf_addf(sb, "; waits under %.3g ms dropped", (double)m / 1e6);
}

void tally_view_value(struct strbuf *sb, const struct tally_db *db, int ev, uint64_t v, int width)
{
	if (db->weighed && tally_db_unit_time(db, ev))
		strbuf_addf(sb, "%*.1f", width, (double)v / 1e6);
	else
		strbuf_addf(sb, "%*" PRIu64, width, v);
}

void tally_view_value_unit(struct strbuf *sb, const struct tally_db *db, int ev, uint64_t v)
{
	tally_view_value(sb, db, ev, v, 0);
	const char *h = tally_view_heading(db, ev);
	if (v == 1 && !strcmp(h, "samples"))
		strbuf_addstr(sb, " sample");
	else if (v == 1 && !strcmp(h, "events"))
		strbuf_addstr(sb, " event");
	else
		strbuf_addf(sb, " %s", h);
}

uint64_t tally_view_event_total(const struct tally_db *db, int ev)
{
	if (ev < 0 || ev >= db->nevents)
		return 0;
	return db->weighed ? tally_db_weight_total(db, ev) : db->samples[ev];
}

bool tally_view_can_weigh(const struct tally_db *db)
{
	if (db->weighed || db->weights)
		return true;
	const char *pm = tally_meta_get(&db->session, "period-mean");
	for (int e = 0; e < db->nevents; e++) {
		if (!pm)
			return false;
		char *end;
		if (!(strtod(pm, &end) > 0) || (*end && *end != ','))
			return false;
		pm = *end ? end + 1 : NULL;
	}
	return true;
}

void tally_view_weigh(struct tally_db *db, bool samples)
{
	if (!samples && tally_view_can_weigh(db))
		tally_db_weigh(db);
}
