/* pprof: the database as a gzip-compressed profile.proto (lib/export/profile.proto;
 * samples, locations and functions encoded here, the rest with protobuf-c), what
 * `go tool pprof` and the services that ingest pprof read. docs/export.md says
 * what every field holds. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "lib/export/pbwrite.h"
#include "tally/export.h"

typedef Perftools__Profiles__Profile PProfile;
typedef Perftools__Profiles__ValueType PValueType;
typedef Perftools__Profiles__Mapping PMapping;

#define PAGE 4096u

/* ---- interning tables ---- */

struct strtab {
	char **v;
	size_t n, alloc;
	struct tally_hidx idx;
};

static bool str_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !strcmp(((const struct strtab *)ctx)->v[idx], key);
}

static int64_t str_id(struct strtab *t, const char *s)
{
	uint64_t h = tally_hash_bytes(s, strlen(s), 7);
	uint32_t i = tally_hidx_get(&t->idx, h, s, str_eq, t);
	if (i == TALLY_HIDX_NONE) {
		GROW(t->v, t->alloc, t->n + 1);
		t->v[t->n] = xstrdup(s);
		tally_hidx_put(&t->idx, h, (uint32_t)t->n);
		i = (uint32_t)t->n++;
	}
	return i;
}

/* One frame of code at a location, innermost first (see location_frames). */
struct frame {
	const char *name;
	const char *file;
	int line;
	uint64_t addr; /* the function's address (its identity with the name) */
};

struct func {
	uint32_t image;
	int64_t name, file;
	uint64_t addr;
	int64_t start_line;
};

struct map {
	uint32_t image;
	uint64_t delta; /* address - file offset */
	uint64_t lo, hi; /* addresses seen */
	bool named; /* some location has a function from us */
	bool lines; /* every location with a function has its file and line */
};

struct loc {
	uint32_t image;
	uint64_t offset; /* of the instruction looked up (callers: return address - 1) */
	uint64_t address;
	uint32_t map;
	uint32_t first, n; /* into lines */
};

struct line {
	uint32_t func;
	int64_t line;
};

struct pp {
	const struct tally_export *x;
	struct strtab str;
	struct func *funcs;
	size_t nfuncs, afuncs;
	struct tally_hidx func_idx;
	struct map *maps;
	size_t nmaps, amaps;
	struct tally_hidx map_idx;
	struct loc *locs;
	size_t nlocs, alocs;
	struct tally_hidx loc_idx;
	struct line *lines;
	size_t nlines, alines;
	uint32_t other_loc; /* [other], for --percent-limit; UINT32_MAX until needed */
	struct kept_str *kept; /* KEPT_SLOTS (kept_id) */
};

/* str_id of a string the resolver keeps for its life (names, files), by its
 * address: a location's frames name a few thousand functions, met a million times */
#define KEPT_SLOTS 16384
struct kept_str {
	const char *s;
	int64_t id;
};

static int64_t kept_id(struct pp *p, const char *s)
{
	struct kept_str *k = &p->kept[tally_hash_u64((uintptr_t)s) & (KEPT_SLOTS - 1)];
	if (k->s != s) {
		k->s = s;
		k->id = str_id(&p->str, s);
	}
	return k->id;
}

static bool func_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct func *a = &((const struct pp *)ctx)->funcs[idx], *b = key;
	return a->image == b->image && a->name == b->name && a->addr == b->addr &&
	       a->file == b->file;
}

static uint32_t func_id(struct pp *p, const struct func *k)
{
	uint64_t h = tally_hash_u64(((uint64_t)k->image << 40) ^ (uint64_t)k->name ^
				    tally_hash_u64(k->addr) ^ ((uint64_t)k->file << 20));
	uint32_t i = tally_hidx_get(&p->func_idx, h, k, func_eq, p);
	if (i == TALLY_HIDX_NONE) {
		GROW(p->funcs, p->afuncs, p->nfuncs + 1);
		p->funcs[p->nfuncs] = *k;
		tally_hidx_put(&p->func_idx, h, (uint32_t)p->nfuncs);
		i = (uint32_t)p->nfuncs++;
	}
	return i;
}

static bool map_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct map *a = &((const struct pp *)ctx)->maps[idx], *b = key;
	return a->image == b->image && a->delta == b->delta;
}

static uint32_t map_id(struct pp *p, uint32_t image, uint64_t delta)
{
	struct map k = { image, delta, UINT64_MAX, 0, false, true };
	uint64_t h = tally_hash_u64(((uint64_t)image << 32) ^ tally_hash_u64(delta));
	uint32_t i = tally_hidx_get(&p->map_idx, h, &k, map_eq, p);
	if (i == TALLY_HIDX_NONE) {
		GROW(p->maps, p->amaps, p->nmaps + 1);
		p->maps[p->nmaps] = k;
		tally_hidx_put(&p->map_idx, h, (uint32_t)p->nmaps);
		i = (uint32_t)p->nmaps++;
	}
	return i;
}

static bool loc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct loc *a = &((const struct pp *)ctx)->locs[idx], *b = key;
	return a->image == b->image && a->offset == b->offset;
}

/* The code at (image, offset), innermost frame first: the inline chain with
 * source files and lines when debug info has them, else the function the symbol
 * table names. 0 frames when nothing is known. */
static size_t location_frames(struct tally_resolver *res, uint32_t image, uint64_t offset,
			      struct frame *out)
{
	if (tally_resolver_mismatch(res, image))
		return 0;
	/* the inline chain with source lines (innermost first, as pprof's Location.line) */
	const struct tally_srcframe *sf;
	size_t n = tally_resolve_frames(res, image, offset, false, &sf), k = 0;
	for (size_t i = 0; i < n && k < 64; i++)
		if (sf[i].name)
			out[k++] = (struct frame){ sf[i].name, sf[i].file, sf[i].line, sf[i].addr };
	return k;
}

static uint64_t loc_hash(uint32_t image, uint64_t offset)
{
	return tally_hash_u64(((uint64_t)image << 48) ^ tally_hash_u64(offset));
}

/* A new location for (image, offset), numbered next: its mapping, and its
 * frames' lines and functions. */
static uint32_t loc_new(struct pp *p, uint32_t image, uint64_t offset)
{
	struct loc k = { .image = image, .offset = offset };
	uint64_t addr = tally_export_addr(p->x->res, image, offset);
	k.address = addr;
	k.map = map_id(p, image, addr - offset);
	struct map *m = &p->maps[k.map];
	if (addr < m->lo)
		m->lo = addr;
	if (addr > m->hi)
		m->hi = addr;
	struct frame fr[64];
	size_t nf = location_frames(p->x->res, image, offset, fr);
	k.first = (uint32_t)p->nlines;
	k.n = (uint32_t)nf;
	for (size_t j = 0; j < nf; j++) {
		struct func f = { image, kept_id(p, fr[j].name),
				  kept_id(p, fr[j].file ? fr[j].file : ""), fr[j].addr, 0 };
		GROW(p->lines, p->alines, p->nlines + 1);
		p->lines[p->nlines++] = (struct line){ func_id(p, &f), fr[j].line };
		if (!fr[j].file || !fr[j].line)
			m->lines = false;
	}
	/* a location without a function (a PLT stub, code past the symbols)
	 * stays an address; it does not make the rest of the image unnamed */
	if (nf)
		m->named = true;
	GROW(p->locs, p->alocs, p->nlocs + 1);
	p->locs[p->nlocs] = k;
	return (uint32_t)p->nlocs++;
}

/* The location of (image, offset) of a flat profile, numbered when new. */
static uint32_t loc_id(struct pp *p, uint32_t image, uint64_t offset)
{
	struct loc k = { .image = image, .offset = offset };
	uint64_t h = loc_hash(image, offset);
	uint32_t i = tally_hidx_get(&p->loc_idx, h, &k, loc_eq, p);
	if (i != TALLY_HIDX_NONE)
		return i;
	i = loc_new(p, image, offset);
	tally_hidx_put(&p->loc_idx, h, i);
	return i;
}

/* The instruction a frame of a stack stands for: callers' frames are return
 * addresses, the call is the byte before. */
static uint64_t frame_offset(const struct tally_frame *fr, bool leaf)
{
	return fr->offset - (leaf || !fr->offset ? 0 : 1);
}

/* The locations of the stacks' frames, numbered as they were met (seen: the
 * slots of locof, frame number * 2 + 1 when a caller, in the order met;
 * locof[slot] is its place in seen + 1 on entry, its location + 1 on
 * return). Slots are one location each but for a leaf and a caller at the
 * byte after it (or callers at 0 and 1), which share one: found in an index
 * made once with room for all, the slots' places in it fetched ahead. */
static void number_locs(struct pp *p, const struct tally_db *db, uint32_t *locof,
			const uint32_t *seen, size_t n)
{
	size_t cap = 1024;
	while (cap / 4 * 3 < n + 1)
		cap *= 2;
	uint64_t *slot = xcalloc(cap, sizeof(*slot)); /* hash << 32 | location + 1 */
	size_t mask = cap - 1;
	enum { AHEAD = 16 };
	uint32_t hs[2 * AHEAD];
	for (size_t i = 0; i < n + AHEAD; i++) {
		if (i < n) {
			const struct tally_frame *fr = &db->frame_tab[seen[i] / 2];
			uint32_t h =
				(uint32_t)loc_hash(fr->image, frame_offset(fr, !(seen[i] & 1)));
			hs[i % (2 * AHEAD)] = h;
			__builtin_prefetch(&slot[h & mask]);
		}
		if (i < AHEAD)
			continue;
		size_t j = i - AHEAD;
		const struct tally_frame *fr = &db->frame_tab[seen[j] / 2];
		uint64_t off = frame_offset(fr, !(seen[j] & 1));
		uint32_t h = hs[j % (2 * AHEAD)], loc = UINT32_MAX;
		size_t at = h & mask;
		for (; slot[at]; at = (at + 1) & mask) {
			if ((uint32_t)(slot[at] >> 32) != h)
				continue;
			const struct loc *l = &p->locs[(uint32_t)slot[at] - 1];
			if (l->image == fr->image && l->offset == off) {
				loc = (uint32_t)slot[at] - 1;
				break;
			}
		}
		if (loc == UINT32_MAX) {
			loc = loc_new(p, fr->image, off);
			slot[at] = (uint64_t)h << 32 | (loc + 1);
		}
		locof[seen[j]] = loc + 1;
	}
	free(slot);
}

static uint32_t other_loc(struct pp *p)
{
	if (p->other_loc != UINT32_MAX)
		return p->other_loc;
	struct func f = { UINT32_MAX, str_id(&p->str, "[other]"), str_id(&p->str, ""), 0, 0 };
	GROW(p->lines, p->alines, p->nlines + 1);
	p->lines[p->nlines] = (struct line){ func_id(p, &f), 0 };
	GROW(p->locs, p->alocs, p->nlocs + 1);
	p->locs[p->nlocs] = (struct loc){ UINT32_MAX, 0, 0, UINT32_MAX, (uint32_t)p->nlines, 1 };
	p->nlines++;
	p->other_loc = (uint32_t)p->nlocs++;
	return p->other_loc;
}

/* ---- samples ---- */

/* The samples before the --percent-limit cut: one per stack (or location) of
 * the database with samples. A stack's locations are not copied: they are its
 * frames' (locof: per frame of the database, as leaf and as caller). */
struct samples {
	const struct tally_db *db;
	const uint32_t *locof; /* NULL: flat samples, src is their location */
	uint32_t *src;         /* the database stack, or the location */
	int32_t *pid;
	uint32_t *label;       /* the label set (db->labels; 0: none) */
	uint64_t *counts;      /* n * nevents: the values (weights once db is weighed) */
	uint64_t *raw;         /* n * nevents: the sample counts */
	size_t n, alloc, apid, alabel, acounts, araw;
};

static void add_sample(struct samples *s, int ne, uint32_t src, int32_t pid, uint32_t label,
		       const uint64_t *counts, const uint64_t *raw)
{
	GROW(s->src, s->alloc, s->n + 1);
	GROW(s->pid, s->apid, s->n + 1);
	GROW(s->label, s->alabel, s->n + 1);
	s->label[s->n] = label;
	GROW(s->counts, s->acounts, (s->n + 1) * (size_t)ne);
	GROW(s->raw, s->araw, (s->n + 1) * (size_t)ne);
	s->src[s->n] = src;
	s->pid[s->n] = pid;
	memcpy(&s->counts[s->n * (size_t)ne], counts, (size_t)ne * sizeof(uint64_t));
	memcpy(&s->raw[s->n * (size_t)ne], raw, (size_t)ne * sizeof(uint64_t));
	s->n++;
}

/* Sample k's locations, leaf first, into *buf; their number. */
static uint32_t sample_locs(const struct samples *s, size_t k, uint32_t **buf, size_t *abuf)
{
	if (!s->locof) {
		GROW(*buf, *abuf, 1);
		(*buf)[0] = s->src[k];
		return 1;
	}
	const struct tally_db_stack *st = &s->db->stacks[s->src[k]];
	const uint32_t *ids = &s->db->stack_frames[st->first];
	GROW(*buf, *abuf, (size_t)st->len + 2);
	for (uint32_t f = 0; f < st->len; f++)
		(*buf)[f] = s->locof[(size_t)ids[f] * 2 + (f != 0)] - 1;
	return st->len;
}

/* The output samples: equal (locations, pid, label set) add up. A sample's locations are
 * those of the first sample that had them (struct samples), or, when the cut
 * changed them, a copy in more. */
struct psample {
	size_t from;   /* the sample, or (copied) the start in more */
	uint32_t len;
	bool copied;
	int32_t pid;
	uint32_t label;
};

struct outs {
	const struct samples *s;
	uint32_t *buf; /* for locations of samples compared */
	size_t abuf;
	struct psample *v;
	size_t n, alloc;
	uint32_t *more;
	size_t nmore, amore;
	uint64_t *vals; /* n * nv */
	size_t avals;
	uint64_t *slot; /* hash << 32 | output sample + 1 */
	size_t mask;
	int nv;
};

/* q's locations: in more, or made into *buf. */
static const uint32_t *out_locs(const struct outs *o, const struct psample *q, uint32_t **buf,
				size_t *abuf)
{
	if (q->copied)
		return &o->more[q->from];
	sample_locs(o->s, q->from, buf, abuf);
	return *buf;
}

static uint32_t out_hash(const uint32_t *locs, uint32_t len, int32_t pid, uint32_t label)
{
	return (uint32_t)tally_hash_bytes(locs, len * sizeof(uint32_t),
					  (uint64_t)(uint32_t)pid | (uint64_t)label << 32);
}

/* Adds sample k with locations locs (leaf first; copy: changed by the cut,
 * kept in more) of hash h (out_hash). The table has room for every sample
 * (out_table). */
static void add_out(struct outs *o, size_t k, const uint32_t *locs, uint32_t len, bool copy,
		    int32_t pid, uint32_t label, const uint64_t *vals, uint32_t h)
{
	size_t at = h & o->mask;
	for (; o->slot[at]; at = (at + 1) & o->mask) {
		if ((uint32_t)(o->slot[at] >> 32) != h)
			continue;
		size_t i = (uint32_t)o->slot[at] - 1;
		const struct psample *q = &o->v[i];
		if (q->len == len && q->pid == pid && q->label == label &&
		    !memcmp(out_locs(o, q, &o->buf, &o->abuf), locs, len * sizeof(uint32_t))) {
			for (int v = 0; v < o->nv; v++)
				o->vals[i * (size_t)o->nv + (size_t)v] = tally_add_sat(
					o->vals[i * (size_t)o->nv + (size_t)v], vals[v]);
			return;
		}
	}
	GROW(o->v, o->alloc, o->n + 1);
	struct psample *q = &o->v[o->n];
	*q = (struct psample){ k, len, copy, pid, label };
	if (copy) {
		GROW(o->more, o->amore, o->nmore + len + 1);
		memcpy(&o->more[o->nmore], locs, len * sizeof(uint32_t));
		q->from = o->nmore;
		o->nmore += len;
	}
	GROW(o->vals, o->avals, (o->n + 1) * (size_t)o->nv);
	memcpy(&o->vals[o->n * (size_t)o->nv], vals, (size_t)o->nv * sizeof(uint64_t));
	o->slot[at] = (uint64_t)h << 32 | (o->n + 1);
	o->n++;
}

/* ---- the message in pieces, encoded and deflated side by side ---- */

/* A sample's label from a label set, its strings' ids made beforehand. */
struct lab_ids {
	int64_t key, value;
	bool comm; /* the key is comm= (left out beside the pid's own comm) */
	bool over; /* the key is one of the caller's labels (x->labels), which take its place */
	/* (the caller's) only on samples whose label set lacks the key (x->label_defaults) */
	bool dflt;
};

/* What every piece reads, made before the first starts and not changed
 * while they run (so that pieces run on threads side by side). */
struct enc {
	const struct tally_db *db;
	const struct outs *o;
	const struct pp *p;
	const struct tally_export_comms *comms;
	const int64_t *comm_sid;  /* per comms entry: its string + 1 (0: no sample's) */
	const uint32_t *labfirst; /* per label set (1 on): its first in labs, its end next */
	const struct lab_ids *labs;
	const struct lab_ids *extra; /* the caller's labels (x->labels), on every sample */
	size_t nextra;
	bool over_pid, over_comm;    /* ... name pid or comm: the process's are left out */
	int64_t key_pid, key_comm;
	const ProtobufCMessage *head; /* field 1: the sample types */
	PMapping *const *pmp;         /* field 3, in id order */
	const uint32_t *mid;          /* map -> mapping id */
	const ProtobufCMessage *rest; /* fields 7 on */
};

/* Field 2: output samples from to to. */
static void enc_samples(const struct enc *e, size_t from, size_t to, struct pbout *pb)
{
	const struct outs *o = e->o;
	size_t nv = (size_t)o->nv;
	struct pbel el = { 0 };
	uint32_t *run = NULL;
	size_t arun = 0;
	for (size_t k = from; k < to && !pb->err; k++) {
		const struct psample *q = &o->v[k];
		const uint32_t *ql = out_locs(o, q, &run, &arun);
		/* labels: pid and its comm (per-pid databases), then the sample's
		 * label set (comm=, host=, run=: pprof -tagfocus comm=NAME), a key once */
		const struct lab_ids *ls = q->label ? &e->labs[e->labfirst[q->label - 1]] : NULL;
		size_t nls = q->label ? e->labfirst[q->label] - e->labfirst[q->label - 1] : 0;
		size_t at = q->pid ? tally_export_comm_at(e->comms, q->pid) : SIZE_MAX;
		int64_t comm = at != SIZE_MAX ? e->comm_sid[at] - 1 : -1;
		size_t room = (size_t)q->len * 10 + nv * 10 + (nls + e->nextra + 2) * 40 + 32;
		el_reset(&el, room);
		if (q->len) {
			size_t n = 0;
			for (uint32_t j = 0; j < q->len; j++)
				n += varint_len((uint64_t)ql[j] + 1);
			el_tag(&el, 1, 2);
			el_varint(&el, n);
			for (uint32_t j = 0; j < q->len; j++)
				el_varint(&el, (uint64_t)ql[j] + 1);
		}
		if (nv) {
			size_t n = 0;
			for (size_t v = 0; v < nv; v++)
				n += varint_len(o->vals[k * nv + v]);
			el_tag(&el, 2, 2);
			el_varint(&el, n);
			for (size_t v = 0; v < nv; v++)
				el_varint(&el, o->vals[k * nv + v]);
		}
		for (size_t j = 0; j < nls + e->nextra + 2; j++) {
			int64_t key, str = 0, num = 0;
			if (j >= nls + 2) { /* the caller's, last */
				const struct lab_ids *cl = &e->extra[j - nls - 2];
				bool has = false;
				for (size_t k = 0; cl->dflt && k < nls && !has; k++)
					has = ls[k].key == cl->key;
				if (has)
					continue;
				key = cl->key;
				str = cl->value;
			} else if (j == 0) { /* the pid */
				if (!q->pid || e->over_pid)
					continue;
				key = e->key_pid;
				num = q->pid;
			} else if (j == 1) { /* its comm */
				if (comm < 0 || e->over_comm)
					continue;
				key = e->key_comm;
				str = comm;
			} else {
				if ((comm >= 0 && ls[j - 2].comm) || ls[j - 2].over)
					continue;
				key = ls[j - 2].key;
				str = ls[j - 2].value;
			}
			el_tag(&el, 3, 2);
			el_varint(&el, (key ? 1 + varint_len((uint64_t)key) : 0) +
					       (str ? 1 + varint_len((uint64_t)str) : 0) +
					       (num ? 1 + varint_len((uint64_t)num) : 0));
			el_int(&el, 1, key);
			el_int(&el, 2, str);
			el_int(&el, 3, num);
		}
		pb_el(pb, 2, &el);
	}
	free(run);
	free(el.b);
}

/* Fields 3 on: mappings, locations, functions, strings and the rest. */
static void enc_tail(const struct enc *e, struct pbout *pb)
{
	const struct pp *p = e->p;
	for (size_t k = 0; k < p->nmaps; k++)
		pb_msg(pb, 3, &e->pmp[k]->base);
	struct pbel el = { 0 };
	for (size_t k = 0; k < p->nlocs && !pb->err; k++) {
		const struct loc *l = &p->locs[k];
		el_reset(&el, (size_t)l->n * 24 + 40);
		el_int(&el, 1, (int64_t)(k + 1));
		el_int(&el, 2, l->map == UINT32_MAX ? 0 : e->mid[l->map]);
		el_int(&el, 3, (int64_t)l->address);
		for (uint32_t j = 0; j < l->n; j++) {
			const struct line *ln = &p->lines[l->first + j];
			el_tag(&el, 4, 2);
			el_varint(&el, 1 + varint_len(ln->func + 1) +
					       (ln->line ? 1 + varint_len((uint64_t)ln->line) : 0));
			el_int(&el, 1, ln->func + 1);
			el_int(&el, 2, ln->line);
		}
		pb_el(pb, 4, &el);
	}
	for (size_t k = 0; k < p->nfuncs && !pb->err; k++) {
		el_reset(&el, 64);
		el_int(&el, 1, (int64_t)(k + 1));
		el_int(&el, 2, p->funcs[k].name);
		el_int(&el, 3, p->funcs[k].name);
		el_int(&el, 4, p->funcs[k].file);
		el_int(&el, 5, p->funcs[k].start_line);
		pb_el(pb, 5, &el);
	}
	free(el.b);
	for (size_t k = 0; k < p->str.n && !pb->err; k++) {
		size_t n = strlen(p->str.v[k]);
		pb_varint(pb, 6 << 3 | 2);
		pb_varint(pb, n);
		pb_put(pb, p->str.v[k], n);
	}
	pb_msg(pb, 0, e->rest);
}

/* A piece of the message: the sample types first (head), output samples
 * from to to, the fields after the samples last (tail); deflated on its own
 * (no dictionary: the same pieces on any machine give the same file). */
struct piece {
	size_t from, to;
	bool head, tail;
	struct strbuf gz; /* its raw deflate */
	size_t len;       /* its bytes of the message */
	uLong crc;
	int err;          /* no memory for its message (pb_put's error) */
	int zr;           /* Z_OK, or zlib's error */
};

struct pieces {
	const struct enc *e;
	struct piece *pc;
	size_t n;
	_Atomic size_t next;
};

static void run_piece(const struct enc *e, struct piece *pc)
{
	struct pbout pb = { .msg = STRBUF_INIT };
	if (pc->head)
		pb_msg(&pb, 0, e->head);
	enc_samples(e, pc->from, pc->to, &pb);
	if (pc->tail)
		enc_tail(e, &pb);
	pc->len = pb.msg.len;
	if (pb.err) {
		pc->err = pb.err;
	} else {
		/* the whole message's last piece holds its tail */
		pc->zr = deflate_piece((const unsigned char *)pb.msg.buf, pb.msg.len, pc->tail,
				       &pc->gz);
		pc->crc = crc32_z(0, (const unsigned char *)pb.msg.buf, pb.msg.len);
	}
	strbuf_release(&pb.msg);
}

/* A thread's share: the next piece no thread has taken, until none is left;
 * the last piece (the tail, the largest when there are several) first. */
static void pieces_run(void *ctx, size_t t)
{
	(void)t;
	struct pieces *ps = ctx;
	for (size_t i; (i = atomic_fetch_add(&ps->next, 1)) < ps->n;)
		run_piece(ps->e, &ps->pc[(i + ps->n - 1) % ps->n]);
}

/* Output samples per piece: pieces of about a megabyte of the message,
 * which deflate nearly as well on their own as in one stream (0.05% larger
 * at a million samples); the number of pieces depends on the profile only,
 * the number of threads on the CPUs. */
#define PIECE_SAMPLES (1u << 15)

/* The message being deflated: its tail (fields 3 on) maybe early, on a
 * thread of its own while the samples are made, then the samples' pieces. */
struct message {
	const struct enc *e;
	struct piece *pc;
	size_t n;
	struct piece tail;
	bool early;  /* the tail is a piece of its own, started by message_start */
	bool thread; /* ... on its thread (else it runs in message_deflate) */
	pthread_t th;
};

static void *tail_thread(void *ctx)
{
	struct message *m = ctx;
	run_piece(m->e, &m->tail);
	return NULL;
}

/* early: the tail's locations and strings are all made (e's but the
 * samples): deflated from now on. */
static void message_start(struct message *m, const struct enc *e, bool early)
{
	memset(m, 0, sizeof(*m));
	m->e = e;
	m->early = early;
	m->tail.tail = true;
	if (early)
		m->thread = pthread_create(&m->th, NULL, tail_thread, m) == 0;
}

/* The samples, then the tail unless early, in pieces encoded and deflated
 * side by side: one thread per CPU, up to 4 (pigz's way). */
static void message_deflate(struct message *m)
{
	const struct enc *e = m->e;
	size_t ns = e->o->n / PIECE_SAMPLES + 1;
	m->n = m->early || ns == 1 ? ns : ns + 1;
	struct piece *pc = m->pc = xcalloc(m->n + 1, sizeof(*pc));
	for (size_t i = 0; i < ns; i++) {
		pc[i].from = e->o->n / ns * i;
		pc[i].to = i + 1 == ns ? e->o->n : e->o->n / ns * (i + 1);
	}
	pc[0].head = true;
	if (!m->early)
		pc[m->n - 1].tail = true; /* with the samples when they are few, else alone */
	struct pieces ps = { e, pc, m->n, 0 };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t threads = m->n < 4 ? m->n : 4;
	if (cpus > 0 && (size_t)cpus < threads)
		threads = (size_t)cpus;
	if (threads > 1)
		tally_run_parallel(threads, pieces_run, &ps);
	else
		pieces_run(&ps, 0);
	if (m->thread)
		pthread_join(m->th, NULL);
	else if (m->early)
		run_piece(e, &m->tail); /* no thread to be had */
	if (m->early)
		pc[m->n++] = m->tail;
}

/* The message's pieces one after the other behind the gzip header, as one
 * gzip member into out, the CRC-32 made of theirs; the pieces freed. */
static int message_gzip(struct message *m, struct strbuf *out)
{
	struct piece *pc = m->pc;
	size_t n = m->n;
	int r = 0;
	size_t len = 0, gzlen = 0;
	uLong crc = 0;
	for (size_t i = 0; i < n && !r; i++) {
		if (pc[i].err)
			r = tally_seterr(pc[i].err,
					 "no memory for the pprof profile (a piece of %zu bytes)",
					 pc[i].len);
		else if (pc[i].zr != Z_OK)
			r = tally_seterr(
				-EIO,
				"cannot compress the pprof profile (a piece of %zu bytes): zlib error %d",
				pc[i].len, pc[i].zr);
		crc = i ? crc32_combine(crc, pc[i].crc, (z_off_t)pc[i].len) : pc[i].crc;
		len += pc[i].len;
		gzlen += pc[i].gz.len;
	}
	if (!r && strbuf_grow(out, 10 + gzlen + 8))
		r = tally_seterr(-ENOMEM, "no memory for the compressed pprof profile (%zu bytes)",
				 10 + gzlen + 8);
	if (!r) {
		/* the gzip header as zlib writes it (no name, no time; 4: the fastest level; 3:
		 * Unix) */
		static const unsigned char head[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 3 };
		strbuf_add(out, head, sizeof(head));
		for (size_t i = 0; i < n; i++) {
			strbuf_add(out, pc[i].gz.buf, pc[i].gz.len);
			strbuf_release(&pc[i].gz);
		}
		/* the trailer: the CRC-32 and the length mod 2^32, little-endian */
		unsigned char tail[8];
		for (int b = 0; b < 4; b++) {
			tail[b] = (unsigned char)(crc >> (8 * b));
			tail[4 + b] = (unsigned char)((uint64_t)len >> (8 * b));
		}
		strbuf_add(out, tail, sizeof(tail));
	}
	for (size_t i = 0; i < n; i++)
		strbuf_release(&pc[i].gz);
	free(pc);
	return r;
}

/* ---- session facts ---- */

/* The CPU-time events, whose weight pprof calls "cpu". */
static bool cpu_event(const char *ev)
{
	return !strcmp(ev, "cpu-clock") || !strcmp(ev, "task-clock");
}

int tally_export_pprof(const struct tally_export *x, struct tally_export_out *out)
{
	const struct tally_db *db = x->db;
	int ne = x->nevents;
	size_t dbne = (size_t)db->nevents;
	struct pp p = { .x = x,
			.other_loc = UINT32_MAX,
			.kept = xcalloc(KEPT_SLOTS, sizeof(struct kept_str)) };
	str_id(&p.str, "");

	/* sample types: per event its samples and, when db is period-weighted,
	 * its weight (each sample's own period: time in nanoseconds, or events) */
	int nv = 0;
	int *val_event = xcalloc((size_t)ne * 2 + 1, sizeof(int));
	bool *val_raw = xcalloc((size_t)ne * 2 + 1, sizeof(bool));
	PValueType *vt = xcalloc((size_t)ne * 2 + 1, sizeof(PValueType));
	PValueType **vtp = xcalloc((size_t)ne * 2 + 1, sizeof(PValueType *));
	PValueType period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	int64_t period = 0, default_type = 0;
	struct strbuf sb = STRBUF_INIT;
	for (int i = 0; i < ne; i++) {
		const char *ev = db->events[x->events[i]];
		bool time = tally_db_unit_time(db, x->events[i]);
		perftools__profiles__value_type__init(&vt[nv]);
		strbuf_reset(&sb);
		if (ne == 1)
			strbuf_addstr(&sb, "samples");
		else
			strbuf_addf(&sb, "%s-samples", ev);
		vt[nv].type = str_id(&p.str, sb.buf);
		vt[nv].unit = str_id(&p.str, "count");
		val_event[nv] = i;
		val_raw[nv] = true;
		vtp[nv] = &vt[nv];
		nv++;
		if (db->weighed) {
			perftools__profiles__value_type__init(&vt[nv]);
			vt[nv].type = str_id(&p.str, ne == 1 && cpu_event(ev) ? "cpu" : ev);
			vt[nv].unit = str_id(&p.str, time ? "nanoseconds" : "events");
			val_event[nv] = i;
			vtp[nv] = &vt[nv];
			if (i == 0) {
				/* the mean of the periods the samples had (never one drawn period)
				 */
				uint64_t w = tally_db_weight_total(db, x->events[0]),
					 n = db->samples[x->events[0]];
				period_type = vt[nv];
				period = n ? (int64_t)(((double)w + (double)n / 2) / (double)n) : 0;
				default_type = vt[nv].type;
			}
			nv++;
		} else if (i == 0) {
			period_type = vt[nv - 1];
			period = 1;
			default_type = vt[nv - 1].type;
		}
	}

	/* the samples: stacks when recorded, else the flat profiles; a frame's
	 * location is looked up once (locof: per frame, as leaf and as caller) */
	struct samples s = { .db = db };
	uint64_t *c = xcalloc((size_t)ne + 1, sizeof(uint64_t));
	uint64_t *r = xcalloc((size_t)ne + 1, sizeof(uint64_t));
	/* the sample counts beside the values: the weights' arrays once db is weighed */
	const uint64_t *rawst = db->weighed ? db->stack_weights : db->stack_counts;
	const uint64_t *rawfl = db->weighed ? db->weights : db->counts;
	uint64_t *totals = xcalloc((size_t)ne + 1, sizeof(uint64_t));
	uint32_t *locof = NULL;
	if (db->has_stacks) {
		locof = xcalloc(db->nframe_tab * 2 + 1, sizeof(uint32_t));
		s.locof = locof;
		uint32_t *seen = NULL;
		size_t nseen = 0, aseen = 0;
		for (size_t k = 0; k < db->nstacks; k++) {
			const struct tally_db_stack *st = &db->stacks[k];
			bool any = false;
			for (int i = 0; i < ne; i++) {
				c[i] = db->stack_counts[k * dbne + (size_t)x->events[i]];
				r[i] = rawst[k * dbne + (size_t)x->events[i]];
				totals[i] += c[i];
				any |= c[i] != 0;
			}
			if (!any || !st->len)
				continue;
			/* a leaf is seldom met twice: its slot is fetched a few stacks ahead */
			if (k + 4 < db->nstacks)
				__builtin_prefetch(
					&locof[(size_t)db->stack_frames[db->stacks[k + 4].first] *
					       2]);
			/* locations are numbered root first, as they are met */
			for (uint32_t f = st->len; f-- > 0;) {
				uint32_t slot = db->stack_frames[st->first + f] * 2 + (f != 0);
				if (!locof[slot]) {
					GROW(seen, aseen, nseen + 1);
					seen[nseen++] = slot;
					locof[slot] = (uint32_t)nseen;
				}
			}
			add_sample(&s, ne, (uint32_t)k, st->pid, st->label, c, r);
		}
		number_locs(&p, db, locof, seen, nseen);
		free(seen);
	} else {
		/* each entry's label set: that of its .prof */
		uint32_t *elab = xcalloc(db->nentries + 1, sizeof(uint32_t));
		for (size_t q = 0; q < db->nprofs; q++)
			for (size_t k = db->profs[q].first;
			     k < db->profs[q].end && k < db->nentries; k++)
				elab[k] = db->profs[q].label;
		for (size_t k = 0; k < db->nentries; k++) {
			const struct tally_db_entry *en = &db->entries[k];
			bool any = false;
			for (int i = 0; i < ne; i++) {
				c[i] = db->counts[k * dbne + (size_t)x->events[i]];
				r[i] = rawfl[k * dbne + (size_t)x->events[i]];
				totals[i] += c[i];
				any |= c[i] != 0;
			}
			if (!any)
				continue;
			add_sample(&s, ne, loc_id(&p, en->image, en->offset), en->pid, elab[k], c,
				   r);
		}
		free(elab);
	}
	/* --percent-limit: each sample's kept prefix, root first */
	uint64_t *min = xcalloc((size_t)ne + 1, sizeof(uint64_t));
	tally_export_trim_min(x, totals, min);
	uint32_t *keep = NULL; /* NULL: nothing is cut */
	bool cut = false;
	uint32_t *run = NULL;
	size_t arun = 0;
	for (int i = 0; i < ne; i++)
		cut |= min[i] > 0;
	if (cut) {
		uint32_t *keys = NULL;
		size_t nkeys = 0, akeys = 0;
		struct tally_trim_stack *ts = xcalloc(s.n + 1, sizeof(*ts));
		for (size_t k = 0; k < s.n; k++) {
			uint32_t len = sample_locs(&s, k, &run, &arun);
			GROW(keys, akeys, nkeys + len + 1);
			ts[k] = (struct tally_trim_stack){ (uint32_t)nkeys, len };
			for (uint32_t j = 0; j < len; j++)
				keys[nkeys++] = run[len - 1 - j]; /* root first */
		}
		keep = xcalloc(s.n + 1, sizeof(uint32_t));
		tally_export_trim(keys, ts, s.n, s.counts, ne, min, keep);
		free(ts);
		free(keys);
	}

	/* ---- the message: all but the samples made before them ---- */
	PProfile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	prof.period_type = &period_type;
	prof.period = period;
	prof.default_sample_type = default_type;
	const char *dur = tally_meta_get(&db->session, "duration");
	prof.duration_nanos = dur ? (int64_t)(strtod(dur, NULL) * 1e9) : 0;
	double start;
	prof.time_nanos = tally_db_utc_time(tally_meta_get(&db->session, "start-time"), &start)
				  ? (int64_t)start * 1000000000LL
				  : 0;
	int64_t comments[3];
	const char *target = tally_meta_get(&db->session, "command");
	strbuf_reset(&sb);
	strbuf_addf(&sb, "tally export of %s", x->input);
	comments[prof.n_comment++] = str_id(&p.str, sb.buf);
	if (target) {
		strbuf_reset(&sb);
		strbuf_addf(&sb, "command: %s", target);
		comments[prof.n_comment++] = str_id(&p.str, sb.buf);
	}
	const char *samp = tally_meta_get(&db->session, "sampling");
	if (samp) {
		strbuf_reset(&sb);
		strbuf_addf(&sb, "sampling: %s", samp);
		comments[prof.n_comment++] = str_id(&p.str, sb.buf);
	}
	prof.comment = comments;

	/* the strings of the samples' labels, in the samples' order (that of the
	 * output samples they make); per pid its comm's and per label set its
	 * keys' and values', so that the pieces of the message only read */
	int64_t key_pid = str_id(&p.str, "pid"), key_comm = str_id(&p.str, "comm");
	struct tally_export_comms comms;
	tally_export_comms_init(&comms, db);
	int64_t *comm_sid = xcalloc(comms.n + 1, sizeof(int64_t));
	uint32_t *labfirst = xcalloc((size_t)db->nlabels + 1, sizeof(uint32_t));
	bool *labmade = xcalloc((size_t)db->nlabels + 1, sizeof(bool));
	struct lab_ids *labs = NULL;
	size_t alabs = 0;
	for (uint32_t i = 0; i < db->nlabels; i++)
		labfirst[i + 1] = labfirst[i] + (uint32_t)db->labels[i].n;
	GROW(labs, alabs, (size_t)labfirst[db->nlabels] + 1);
	for (size_t k = 0; k < s.n; k++) {
		int32_t pid = db->per_pid ? s.pid[k] : 0;
		size_t at = pid ? tally_export_comm_at(&comms, pid) : SIZE_MAX;
		if (at != SIZE_MAX && !comm_sid[at])
			comm_sid[at] = str_id(&p.str, comms.v[at].comm) + 1;
		uint32_t l = s.label[k] <= db->nlabels ? s.label[k] : 0;
		if (!l || labmade[l - 1])
			continue;
		labmade[l - 1] = true;
		const struct tally_labelset *ls = &db->labels[l - 1];
		for (size_t j = 0; j < ls->n; j++) {
			struct lab_ids *li = &labs[labfirst[l - 1] + j];
			li->key = str_id(&p.str, ls->v[j].key);
			li->value = str_id(&p.str, ls->v[j].value);
			li->comm = !strcmp(ls->v[j].key, "comm");
			li->over = x->labels && tally_labelset_get(x->labels, ls->v[j].key);
		}
	}
	free(labmade);
	/* the caller's labels, on every sample (push: host=, --label) */
	size_t nextra = 0, nl = x->labels ? x->labels->n : 0,
	       nd = x->label_defaults ? x->label_defaults->n : 0;
	struct lab_ids *extra = xcalloc(nl + nd + 1, sizeof(*extra));
	for (size_t j = 0; j < nl; j++) {
		extra[nextra].key = str_id(&p.str, x->labels->v[j].key);
		extra[nextra++].value = str_id(&p.str, x->labels->v[j].value);
	}
	for (size_t j = 0; j < nd; j++) {
		if (x->labels && tally_labelset_get(x->labels, x->label_defaults->v[j].key))
			continue;
		extra[nextra].key = str_id(&p.str, x->label_defaults->v[j].key);
		extra[nextra].value = str_id(&p.str, x->label_defaults->v[j].value);
		extra[nextra++].dflt = true;
	}

	/* mappings: pprof takes the first for the main binary, so the profiled
	 * program's executable goes first: the executable with the most samples
	 * in its code or below it (in the stacks that hold it), so that a
	 * program whose time is in its libraries (python in libpython) is the
	 * main binary rather than a wrapper that ran a little code of its own
	 * (a shell shim); without stacks, the most samples in its code */
	uint64_t *img_samples = xcalloc(db->nimages + 1, sizeof(uint64_t));
	/* only executables can be the main binary: the frames' executables, by
	 * frame number, read in the stacks (none: no stack is read) */
	uint32_t *exec_of = NULL; /* per frame, its image + 1 when an executable, else 0 */
	if (db->has_stacks && db->nstacks) {
		bool *is_exec = xcalloc(db->nimages + 1, sizeof(bool)), any_exec = false;
		for (uint32_t i = 0; i < db->nimages; i++)
			any_exec |= is_exec[i] = !strcmp(db->images[i].kind, "exec");
		if (any_exec) {
			exec_of = xcalloc(db->nframe_tab + 1, sizeof(uint32_t));
			for (size_t f = 0; f < db->nframe_tab; f++) {
				uint32_t im = db->frame_tab[f].image;
				if (im < db->nimages && is_exec[im])
					exec_of[f] = im + 1;
			}
		}
		free(is_exec);
	}
	if (exec_of) {
		uint64_t *seen = xcalloc(db->nimages + 1, sizeof(uint64_t));
		for (size_t k = 0; k < db->nstacks; k++) {
			const struct tally_db_stack *st = &db->stacks[k];
			uint64_t c = 0;
			for (int i = 0; i < ne; i++)
				c += db->stack_counts[k * dbne + (size_t)x->events[i]];
			if (!c)
				continue;
			const uint32_t *ids = &db->stack_frames[st->first];
			for (uint32_t f = 0; f < st->len; f++) {
				uint32_t im1 = exec_of[ids[f]];
				if (im1 && seen[im1 - 1] != k + 1) {
					seen[im1 - 1] = k + 1;
					img_samples[im1 - 1] += c;
				}
			}
		}
		free(seen);
		free(exec_of);
	} else if (!db->has_stacks) {
		for (size_t k = 0; k < db->nentries; k++)
			for (int i = 0; i < ne; i++)
				img_samples[db->entries[k].image] +=
					db->counts[k * dbne + (size_t)x->events[i]];
	}
	uint32_t main_image = UINT32_MAX;
	for (uint32_t i = 0; i < db->nimages; i++)
		if (!strcmp(db->images[i].kind, "exec") && img_samples[i] &&
		    (main_image == UINT32_MAX || img_samples[i] > img_samples[main_image]))
			main_image = i;
	free(img_samples);
	uint32_t *mid = xcalloc(p.nmaps + 1, sizeof(uint32_t)); /* map -> id */
	uint32_t next = 1;
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < p.nmaps; k++)
			if ((p.maps[k].image == main_image) == (pass == 0))
				mid[k] = next++;
	PMapping *pm = xcalloc(p.nmaps + 1, sizeof(PMapping));
	PMapping **pmp = xcalloc(p.nmaps + 1, sizeof(PMapping *));
	for (size_t k = 0; k < p.nmaps; k++) {
		const struct map *m = &p.maps[k];
		const struct tally_db_image *im = &db->images[m->image];
		perftools__profiles__mapping__init(&pm[k]);
		pm[k].id = mid[k];
		bool file = tally_export_is_file(im);
		if (file) {
			/* pages, as the loader maps them: the offset of the first is what
			 * pprof needs to find the ELF segment and so the link-time addresses */
			pm[k].memory_start = m->lo & ~(uint64_t)(PAGE - 1);
			pm[k].memory_limit = (m->hi + PAGE) & ~(uint64_t)(PAGE - 1);
		} else {
			pm[k].memory_start = m->lo;
			pm[k].memory_limit = m->hi + 1;
		}
		pm[k].file_offset = file ? pm[k].memory_start - m->delta : 0;
		pm[k].filename = str_id(&p.str, tally_export_image_name(im, &sb));
		if (!strcmp(im->id_kind, "build-id"))
			pm[k].build_id = str_id(&p.str, im->id);
		/* pprof symbolizes a mapping itself (and so replaces our names and
		 * inlines) when none of these is set: has_functions whenever we named
		 * some of its code, the files and lines when we had them for all of it */
		pm[k].has_functions = m->named;
		pm[k].has_filenames = m->named && m->lines;
		pm[k].has_line_numbers = m->named && m->lines;
		pmp[mid[k] - 1] = &pm[k];
	}

	/* 1: sample types; 2: samples; 3 on: the rest, encoded here (a million
	 * samples and locations: no protobuf-c structure each). The rest, once
	 * the locations and strings are all made (the cut makes [other] among
	 * the samples), is deflated while the samples are. */
	PProfile part = PERFTOOLS__PROFILES__PROFILE__INIT;
	part.n_sample_type = (size_t)nv;
	part.sample_type = vtp;
	struct outs o = { .s = &s, .nv = nv }; /* made after the tail starts */
	struct enc e = { .db = db,
			 .o = &o,
			 .p = &p,
			 .comms = &comms,
			 .comm_sid = comm_sid,
			 .labfirst = labfirst,
			 .labs = labs,
			 .extra = extra,
			 .nextra = nextra,
			 .over_pid = x->labels && tally_labelset_get(x->labels, "pid"),
			 .over_comm = x->labels && tally_labelset_get(x->labels, "comm"),
			 .key_pid = key_pid,
			 .key_comm = key_comm,
			 .head = &part.base,
			 .pmp = pmp,
			 .mid = mid,
			 .rest = &prof.base };
	struct message msg;
	message_start(&msg, &e, s.n >= PIECE_SAMPLES && !cut);

	/* the output samples' index, made once: at most one per sample, its load
	 * kept under a half */
	size_t cap = 1024;
	while (cap < 2 * (s.n + 1))
		cap *= 2;
	o.slot = xcalloc(cap, sizeof(*o.slot));
	o.mask = cap - 1;
	/* each sample's place in the index is fetched while the samples before
	 * it are added (AHEAD: the samples made ready before theirs is read) */
	enum { AHEAD = 16, RING = 2 * AHEAD };
	struct pending {
		uint32_t *locs;
		size_t alocs;
		uint32_t len, label, h;
		int32_t pid;
		bool copy;
	} pend[RING];
	memset(pend, 0, sizeof(pend));
	uint64_t *vals = xcalloc((size_t)nv + 1, sizeof(uint64_t));
	for (size_t i = 0; i < s.n + AHEAD; i++) {
		if (i < s.n) {
			struct pending *pd = &pend[i % RING];
			if (s.locof && i + 4 < s.n)
				__builtin_prefetch(
					&s.locof[(size_t)db->stack_frames[db->stacks[s.src[i + 4]]
										  .first] *
						 2]);
			pd->pid = db->per_pid ? s.pid[i] : 0;
			pd->label = s.label[i] <= db->nlabels ? s.label[i] : 0;
			uint32_t n = sample_locs(&s, i, &run, &arun);
			pd->copy = keep && keep[i] != n;
			if (!pd->copy) {
				GROW(pd->locs, pd->alocs, (size_t)n + 1);
				memcpy(pd->locs, run, n * sizeof(uint32_t));
				pd->len = n;
			} else {
				/* cut: [other] in place of the leaf part, then the kept callers */
				uint32_t len = 0, drop = n - keep[i];
				GROW(pd->locs, pd->alocs, (size_t)n + 2);
				pd->locs[len++] = other_loc(&p);
				for (uint32_t j = drop; j < n; j++)
					pd->locs[len++] = run[j];
				pd->len = len;
			}
			pd->h = out_hash(pd->locs, pd->len, pd->pid, pd->label);
			__builtin_prefetch(&o.slot[pd->h & o.mask]);
		}
		if (i < AHEAD)
			continue;
		size_t k = i - AHEAD;
		const struct pending *pd = &pend[k % RING];
		for (int v = 0; v < nv; v++)
			vals[v] = (val_raw[v] ? s.raw
					      : s.counts)[k * (size_t)ne + (size_t)val_event[v]];
		add_out(&o, k, pd->locs, pd->len, pd->copy, pd->pid, pd->label, vals, pd->h);
	}
	for (int i = 0; i < RING; i++)
		free(pend[i].locs);
	free(vals);
	free(o.slot);
	o.slot = NULL;

	/* the samples' values and sample counts are in o by now */
	free(s.counts);
	free(s.raw);
	s.counts = s.raw = NULL;
	message_deflate(&msg);
	free(comm_sid);
	free(labfirst);
	free(labs);
	free(extra);
	tally_export_comms_release(&comms);

	free(pmp);
	free(pm);
	free(mid);
	free(o.v);
	free(o.more);
	free(o.vals);
	free(o.buf);
	free(run);
	free(keep);
	free(locof);
	free(min);
	free(totals);
	free(c);
	free(r);
	free(s.src);
	free(s.pid);
	free(s.label);
	free(s.counts);
	free(s.raw);
	for (size_t k = 0; k < p.str.n; k++)
		free(p.str.v[k]);
	free(p.str.v);
	tally_hidx_release(&p.str.idx);
	free(p.funcs);
	tally_hidx_release(&p.func_idx);
	free(p.maps);
	tally_hidx_release(&p.map_idx);
	free(p.locs);
	tally_hidx_release(&p.loc_idx);
	free(p.lines);
	free(p.kept);
	strbuf_release(&sb);
	free(vtp);
	free(vt);
	free(val_raw);
	free(val_event);
	/* put together once the rest is freed: the pieces and the file are the
	 * largest things held */
	return message_gzip(&msg, tally_export_out_file(out, ""));
}

int tally_export_pprof_buf(const struct tally_export *x, struct strbuf *out)
{
	struct tally_export_out o = { 0 };
	int r = tally_export_pprof(x, &o);
	if (!r && o.n) {
		/* the one file, handed over whole */
		if (!out->len) {
			strbuf_release(out);
			*out = o.files[0].data;
			strbuf_init(&o.files[0].data);
		} else {
			strbuf_add(out, o.files[0].data.buf, o.files[0].data.len);
		}
	}
	tally_export_out_release(&o);
	return r;
}
