/* tally top's window (top.h): decayed self and inclusive samples per
 * (command, image, function), per (command, image) and per command, and the
 * three views grouped, filtered and sorted from them. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "tally/top.h"

/* names are interned: one copy each, compared by index */
struct names {
	char **s;
	size_t n, a;
	struct tally_hidx idx;
};

struct ent {
	uint32_t comm, image, func; /* name ids; func UINT32_MAX in the image table */
	double self, total;
	uint64_t mark; /* the stack that last counted it inclusive */
};

struct table {
	struct ent *e;
	size_t n, a;
	struct tally_hidx idx;
};

struct tally_top {
	bool callgraph;
	struct names names;
	struct table funcs, images, comms;
	double total;
	uint64_t stack_serial;
};

static bool name_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct names *n = ctx;
	return !strcmp(n->s[i], key);
}

static uint32_t intern(struct names *n, const char *s)
{
	uint64_t h = tally_hash_bytes(s, strlen(s), 0x70b);
	uint32_t i = tally_hidx_get(&n->idx, h, s, name_eq, n);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(n->s, n->a, n->n + 1);
	n->s[n->n] = xstrdup(s);
	tally_hidx_put(&n->idx, h, (uint32_t)n->n);
	return (uint32_t)n->n++;
}

static uint64_t ent_hash(uint32_t comm, uint32_t image, uint32_t func)
{
	return tally_hash_u64(((uint64_t)comm << 40) ^ ((uint64_t)image << 20) ^ func ^
			      ((uint64_t)func << 50));
}

static bool ent_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct table *t = ctx;
	const struct ent *k = key;
	const struct ent *e = &t->e[i];
	return e->comm == k->comm && e->image == k->image && e->func == k->func;
}

static struct ent *table_get(struct table *t, uint32_t comm, uint32_t image, uint32_t func)
{
	struct ent k = { .comm = comm, .image = image, .func = func };
	uint64_t h = ent_hash(comm, image, func);
	uint32_t i = tally_hidx_get(&t->idx, h, &k, ent_eq, t);
	if (i == TALLY_HIDX_NONE) {
		GROW(t->e, t->a, t->n + 1);
		i = (uint32_t)t->n++;
		t->e[i] = k;
		tally_hidx_put(&t->idx, h, i);
	}
	return &t->e[i];
}

static void table_release(struct table *t)
{
	free(t->e);
	tally_hidx_release(&t->idx);
	memset(t, 0, sizeof(*t));
}

struct tally_top *tally_top_new(bool callgraph)
{
	struct tally_top *t = xcalloc(1, sizeof(*t));
	t->callgraph = callgraph;
	return t;
}

void tally_top_free(struct tally_top *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->names.n; i++)
		free(t->names.s[i]);
	free(t->names.s);
	tally_hidx_release(&t->names.idx);
	table_release(&t->funcs);
	table_release(&t->images);
	table_release(&t->comms);
	free(t);
}

bool tally_top_callgraph(const struct tally_top *t)
{
	return t->callgraph;
}

double tally_top_total(const struct tally_top *t)
{
	return t->total;
}

/* Decays a table and drops what is below the floor (the index is rebuilt). */
static void table_decay(struct table *t, double decay)
{
	size_t k = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct ent e = t->e[i];
		e.self *= decay;
		e.total *= decay;
		if (e.total >= 0.01 || e.self >= 0.01)
			t->e[k++] = e;
	}
	t->n = k;
	tally_hidx_release(&t->idx);
	for (size_t i = 0; i < t->n; i++)
		tally_hidx_put(&t->idx, ent_hash(t->e[i].comm, t->e[i].image, t->e[i].func),
			       (uint32_t)i);
}

void tally_top_tick(struct tally_top *t, double decay)
{
	if (!(decay > 0 && decay <= 1))
		decay = TALLY_TOP_DECAY;
	table_decay(&t->funcs, decay);
	table_decay(&t->images, decay);
	table_decay(&t->comms, decay);
	t->total = 0;
	for (size_t i = 0; i < t->comms.n; i++)
		t->total += t->comms.e[i].self;
	/* names no entry uses any more are kept: they are few (functions seen) */
}

void tally_top_add(struct tally_top *t, const char *comm, const struct tally_top_frame *frames,
		   size_t n, double count)
{
	if (!n || !(count > 0))
		return;
	uint32_t c = intern(&t->names, comm && *comm ? comm : "?");
	struct ent *e = table_get(&t->comms, c, UINT32_MAX, UINT32_MAX);
	e->self += count;
	e->total += count;
	t->total += count;
	if (!t->callgraph)
		n = 1;
	uint64_t mark = ++t->stack_serial;
	for (size_t k = 0; k < n; k++) {
		uint32_t im = intern(&t->names, frames[k].image ? frames[k].image : "?");
		uint32_t fn = intern(&t->names, frames[k].func ? frames[k].func : "[unknown]");
		struct ent *f = table_get(&t->funcs, c, im, fn);
		if (!k)
			f->self += count;
		/* a recursive function counts once a stack */
		if (f->mark != mark) {
			f->mark = mark;
			f->total += count;
		}
		struct ent *i = table_get(&t->images, c, im, UINT32_MAX);
		if (!k)
			i->self += count;
		if (i->mark != mark) {
			i->mark = mark;
			i->total += count;
		}
	}
}

/* ---- the views ---- */

struct group {
	uint32_t key1, key2; /* functions: image, func; images: image; commands: comm */
	double self, total;
	uint32_t best_comm;
	double best;
	size_t ncomms;
	uint32_t last_comm; /* commands come in any order: counted through a set below */
};

struct gtable {
	struct group *g;
	size_t n, a;
	struct tally_hidx idx;
};

static bool group_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct gtable *t = ctx;
	const uint32_t *k = key;
	return t->g[i].key1 == k[0] && t->g[i].key2 == k[1];
}

struct sort_ctx {
	const struct tally_top *t;
	enum tally_top_sort sort;
};
static struct sort_ctx sort_ctx; /* qsort has no context argument in C11 */

static int cmp_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static int cmp_row(const void *pa, const void *pb)
{
	const struct tally_top_row *a = pa, *b = pb;
	int c = 0;
	switch (sort_ctx.sort) {
	case TALLY_TOP_BY_SHARE:
		c = a->total < b->total ? 1 : a->total > b->total ? -1 : 0;
		if (!c)
			c = a->self < b->self ? 1 : a->self > b->self ? -1 : 0;
		break;
	case TALLY_TOP_BY_SELF:
		c = a->self < b->self ? 1 : a->self > b->self ? -1 : 0;
		break;
	case TALLY_TOP_BY_NAME:
		c = cmp_str(a->name, b->name);
		break;
	case TALLY_TOP_BY_IMAGE:
		c = cmp_str(a->image, b->image);
		if (!c)
			c = a->total < b->total ? 1 : a->total > b->total ? -1 : 0;
		break;
	case TALLY_TOP_BY_COMMAND:
		c = cmp_str(a->comm, b->comm);
		if (!c)
			c = a->total < b->total ? 1 : a->total > b->total ? -1 : 0;
		break;
	case TALLY_TOP_NSORTS:
		break;
	}
	if (!c)
		c = cmp_str(a->name, b->name);
	if (!c)
		c = cmp_str(a->image, b->image);
	return c;
}

static bool matches(const char *s, const char *filter)
{
	return !filter || !*filter || strstr(s, filter);
}

size_t tally_top_rows(struct tally_top *t, const struct tally_top_query *q,
		      struct tally_top_row **rows)
{
	const struct table *src = q->view == TALLY_TOP_FUNCTIONS ? &t->funcs : &t->images;
	struct gtable g = { 0 };
	/* the commands each group has: (group, comm) pairs seen */
	struct gtable pairs = { 0 };
	for (size_t i = 0; i < src->n; i++) {
		const struct ent *e = &src->e[i];
		if (!matches(t->names.s[e->comm], q->comm_filter) ||
		    !matches(t->names.s[e->image], q->image_filter))
			continue;
		uint32_t key[2];
		switch (q->view) {
		case TALLY_TOP_FUNCTIONS:
			key[0] = e->image, key[1] = e->func;
			break;
		case TALLY_TOP_IMAGES:
			key[0] = e->image, key[1] = 0;
			break;
		default:
			key[0] = e->comm, key[1] = 0;
			break;
		}
		uint64_t h = tally_hash_u64(((uint64_t)key[0] << 32) | key[1]);
		uint32_t gi = tally_hidx_get(&g.idx, h, key, group_eq, &g);
		if (gi == TALLY_HIDX_NONE) {
			GROW(g.g, g.a, g.n + 1);
			gi = (uint32_t)g.n++;
			g.g[gi] = (struct group){
				.key1 = key[0], .key2 = key[1], .best_comm = e->comm, .best = -1
			};
			tally_hidx_put(&g.idx, h, gi);
		}
		struct group *gr = &g.g[gi];
		gr->self += e->self;
		/* commands: samples are the command's own (its leaves), whatever
		 * images they are in; inclusive per image would count one stack
		 * several times */
		gr->total += q->view == TALLY_TOP_COMMANDS ? e->self : e->total;
		double v = t->callgraph ? e->total : e->self;
		if (v > gr->best) {
			gr->best = v;
			gr->best_comm = e->comm;
		}
		uint32_t pk[2] = { gi, e->comm };
		uint64_t ph = tally_hash_u64(((uint64_t)gi << 32) | e->comm);
		if (tally_hidx_get(&pairs.idx, ph, pk, group_eq, &pairs) == TALLY_HIDX_NONE) {
			GROW(pairs.g, pairs.a, pairs.n + 1);
			pairs.g[pairs.n] = (struct group){ .key1 = gi, .key2 = e->comm };
			tally_hidx_put(&pairs.idx, ph, (uint32_t)pairs.n++);
			gr->ncomms++;
		}
	}
	struct tally_top_row *out = xcalloc(g.n + 1, sizeof(*out));
	size_t n = 0;
	for (size_t i = 0; i < g.n; i++) {
		const struct group *gr = &g.g[i];
		if (gr->self < 0.005 && gr->total < 0.005)
			continue;
		struct tally_top_row *r = &out[n++];
		switch (q->view) {
		case TALLY_TOP_FUNCTIONS:
			r->name = t->names.s[gr->key2];
			r->image = t->names.s[gr->key1];
			break;
		case TALLY_TOP_IMAGES:
			r->name = r->image = t->names.s[gr->key1];
			break;
		default:
			r->name = t->names.s[gr->key1];
			r->image = NULL;
			break;
		}
		r->comm = t->names.s[gr->best_comm];
		r->ncomms = gr->ncomms;
		r->self = gr->self;
		r->total = t->callgraph ? gr->total : gr->self;
	}
	sort_ctx = (struct sort_ctx){ t, q->sort };
	tally_qsort(out, n, sizeof(*out), cmp_row);
	free(g.g);
	tally_hidx_release(&g.idx);
	free(pairs.g);
	tally_hidx_release(&pairs.idx);
	*rows = out;
	return n;
}
