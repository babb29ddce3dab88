/* The diff model (see diff.h): each side's rows from the view model, matched
 * by names, with shares and changes. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tally/diff.h"
#include "tally/view.h"

static const char *own(struct tally_diff *d, const char *s)
{
	if (!s)
		return NULL;
	GROW(d->owned, d->aowned, d->nowned + 1);
	return d->owned[d->nowned++] = xstrdup(s);
}

struct key {
	const char *image, *name, *file;
	int line;
};

static bool row_eq(const void *ctx, uint32_t idx, const void *k)
{
	const struct tally_diff_row *r = &((const struct tally_diff *)ctx)->v[idx];
	const struct key *key = k;
	return r->line == key->line && !strcmp(r->name, key->name) &&
	       !strcmp(r->image, key->image) &&
	       (r->file == key->file || (r->file && key->file && !strcmp(r->file, key->file)));
}

static uint64_t key_hash(const struct key *k)
{
	uint64_t h = tally_hash_bytes(k->image, strlen(k->image) + 1, (uint64_t)(unsigned)k->line);
	h = tally_hash_bytes(k->name, strlen(k->name) + 1, h);
	return k->file ? tally_hash_bytes(k->file, strlen(k->file), h) : h;
}

/* Adds n samples of one side to the row of key (made when new). */
static void add(struct tally_diff *d, struct tally_hidx *idx, const struct key *k, bool inlined,
		bool is_new, uint64_t n)
{
	uint64_t h = key_hash(k);
	uint32_t i = tally_hidx_get(idx, h, k, row_eq, d);
	if (i == TALLY_HIDX_NONE) {
		GROW(d->v, d->alloc, d->n + 1);
		struct tally_diff_row *r = &d->v[d->n];
		memset(r, 0, sizeof(*r));
		r->image = own(d, k->image);
		r->name = own(d, k->name);
		r->file = own(d, k->file);
		r->line = k->line;
		r->inlined = inlined;
		tally_hidx_put(idx, h, (uint32_t)d->n);
		i = (uint32_t)d->n++;
	}
	if (is_new)
		d->v[i].new_ += n;
	else
		d->v[i].base += n;
}

/* Counts a row of an image the side could not name (tally_diff_unnamed). */
static void note_unnamed(struct tally_diff *d, const struct tally_diff_side *s, bool is_new,
			 uint32_t image, uint64_t value)
{
	const struct tally_db_image *di = &s->db->images[image];
	if (!value || (strcmp(di->kind, "exec") && strcmp(di->kind, "lib")) ||
	    tally_resolver_module(s->res, image, NULL))
		return;
	for (size_t i = 0; i < d->nunnamed; i++)
		if (d->unnamed[i].new_side == is_new && d->unnamed[i].image == image) {
			d->unnamed[i].value += value;
			return;
		}
	GROW(d->unnamed, d->aunnamed, d->nunnamed + 1);
	d->unnamed[d->nunnamed++] = (struct tally_diff_unnamed){
		is_new, image, di->name, di->path, tally_resolver_note(s->res, image), value
	};
}

/* One side's rows into d; its total. */
static uint64_t add_side(struct tally_diff *d, struct tally_hidx *idx,
			 const struct tally_diff_side *s, bool is_new)
{
	const struct tally_db *db = s->db;
	if (d->view == TALLY_DIFF_CHILDREN) {
		struct tally_view_cg v;
		tally_view_cg_build(&v, db, s->res, s->sel, s->ev);
		for (size_t i = 0; i < v.funcs.n; i++) {
			const struct tally_view_row *r = &v.funcs.v[i];
			if (!r->incl)
				continue;
			struct key k = { db->images[r->image].name, r->name, NULL, 0 };
			add(d, idx, &k, r->inlined, is_new, r->incl);
			note_unnamed(d, s, is_new, r->image, r->incl);
		}
		uint64_t total = v.funcs.total;
		tally_view_cg_release(&v);
		return total;
	}
	struct tally_view_rows images, funcs;
	tally_view_images(&images, db, s->sel, s->ev);
	tally_view_functions(&funcs, db, s->res, s->ev, images.v, images.n,
			     d->view == TALLY_DIFF_LINES);
	for (size_t i = 0; i < funcs.n; i++) {
		const struct tally_view_row *r = &funcs.v[i];
		struct key k = { db->images[r->image].name, r->name, r->file,
				 r->file ? r->line : 0 };
		add(d, idx, &k, r->inlined, is_new, r->samples);
		note_unnamed(d, s, is_new, r->image, r->samples);
	}
	uint64_t total = images.total;
	tally_view_rows_release(&funcs);
	tally_view_rows_release(&images);
	return total;
}

static double mag(const struct tally_diff *d, const struct tally_diff_row *r)
{
	return fabs(d->absolute ? r->delta : r->points);
}

static const struct tally_diff *sort_diff;

/* By the size of the change, then growth before shrinking, then by name,
 * image, file and line: the same order whatever the order rows were found in. */
static int cmp_row(const void *a, const void *b)
{
	const struct tally_diff_row *x = a, *y = b;
	double mx = mag(sort_diff, x), my = mag(sort_diff, y);
	if (mx != my)
		return mx > my ? -1 : 1;
	double sx = sort_diff->absolute ? x->delta : x->points,
	       sy = sort_diff->absolute ? y->delta : y->points;
	if (sx != sy)
		return sx > sy ? -1 : 1;
	int c = strcmp(x->name, y->name);
	if (!c)
		c = strcmp(x->image, y->image);
	if (!c && x->file != y->file)
		c = !x->file ? 1 : !y->file ? -1 : strcmp(x->file, y->file);
	if (!c && x->line != y->line)
		c = x->line < y->line ? -1 : 1;
	return c;
}

void tally_diff_build(struct tally_diff *d, const struct tally_diff_side *base,
		      const struct tally_diff_side *new_, enum tally_diff_view view, bool absolute)
{
	memset(d, 0, sizeof(*d));
	d->view = view;
	d->absolute = absolute;
	d->event = base->db->events[base->ev];
	d->db = base->db;
	d->ev = base->ev;
	d->base_input = base->input;
	d->new_input = new_->input;
	struct tally_hidx idx = { 0 };
	d->base_total = add_side(d, &idx, base, false);
	d->new_total = add_side(d, &idx, new_, true);
	tally_hidx_release(&idx);
	size_t w = 0;
	for (size_t i = 0; i < d->n; i++) {
		struct tally_diff_row *r = &d->v[i];
		if (!r->base && !r->new_)
			continue;
		r->base_pct = tally_view_pct(r->base, d->base_total);
		r->new_pct = tally_view_pct(r->new_, d->new_total);
		r->points = r->new_pct - r->base_pct;
		r->delta = (double)r->new_ - (double)r->base;
		r->only = !r->base   ? TALLY_DIFF_NEW_ONLY
			  : !r->new_ ? TALLY_DIFF_BASE_ONLY
				     : TALLY_DIFF_BOTH;
		d->v[w++] = *r;
	}
	d->n = w;
	sort_diff = d;
	tally_qsort(d->v, d->n, sizeof(*d->v), cmp_row);
	sort_diff = NULL;
}

void tally_diff_release(struct tally_diff *d)
{
	for (size_t i = 0; i < d->nowned; i++)
		free(d->owned[i]);
	free(d->owned);
	free(d->v);
	free(d->unnamed);
	memset(d, 0, sizeof(*d));
}

static int cmp_growth(const void *a, const void *b)
{
	const struct tally_diff_row *x = *(const struct tally_diff_row *const *)a,
				    *y = *(const struct tally_diff_row *const *)b;
	if (x->points != y->points)
		return x->points > y->points ? -1 : 1;
	return strcmp(x->name, y->name);
}

const struct tally_diff_row **tally_diff_grew(const struct tally_diff *d, double pct, size_t *n)
{
	const struct tally_diff_row **v = xmalloc((d->n + 1) * sizeof(*v));
	*n = 0;
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].points > pct)
			v[(*n)++] = &d->v[i];
	tally_qsort(v, *n, sizeof(*v), cmp_growth);
	return v;
}

/* ---- normalization ---- */

struct rem {
	uint64_t frac; /* the remainder, out of `from` */
	size_t i;
};

static int cmp_rem(const void *a, const void *b)
{
	const struct rem *x = a, *y = b;
	if (x->frac != y->frac)
		return x->frac > y->frac ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

void tally_scale_counts(uint64_t *v, size_t n, uint64_t from, uint64_t to)
{
	if (!from)
		return;
	struct rem *r = xmalloc((n + 1) * sizeof(*r));
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned __int128 x = (unsigned __int128)v[i] * to;
		v[i] = (uint64_t)(x / from);
		r[i] = (struct rem){ (uint64_t)(x % from), i };
		sum += v[i];
	}
	/* the floors fall short of `to` by less than n */
	tally_qsort(r, n, sizeof(*r), cmp_rem);
	for (size_t k = 0; k < n && sum < to; k++) {
		v[r[k].i]++;
		sum++;
	}
	free(r);
}

static void scale_column(uint64_t *counts, size_t rows, int nevents, int ev, uint64_t to)
{
	uint64_t *v = xmalloc((rows + 1) * sizeof(uint64_t));
	uint64_t from = 0;
	for (size_t i = 0; i < rows; i++) {
		v[i] = counts[i * (size_t)nevents + (size_t)ev];
		from += v[i];
	}
	tally_scale_counts(v, rows, from, to);
	for (size_t i = 0; i < rows; i++)
		counts[i * (size_t)nevents + (size_t)ev] = v[i];
	free(v);
}

void tally_diff_normalize(struct tally_db *base, int ev, const struct tally_db *new_, int new_ev)
{
	/* base's values (its weights, or with --samples its counts) scaled to
	 * new's totals, so that every value compares shares; a weighted base
	 * keeps its sample counts beside them, as sampled */
	bool stacks = base->has_stacks && new_->has_stacks;
	scale_column(base->counts, base->nentries, base->nevents, ev,
		     tally_select_total(new_, new_ev, false));
	if (stacks)
		scale_column(base->stack_counts, base->nstacks, base->nevents, ev,
			     tally_select_total(new_, new_ev, true));
	if (!base->weighed)
		base->samples[ev] = tally_select_total(base, ev, false);
}
