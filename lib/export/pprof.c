/* pprof: the database as a gzip-compressed profile.proto (lib/export/profile.proto,
 * serialized with protobuf-c), what `go tool pprof` and the services that ingest
 * pprof read. docs/export.md says what every field holds. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "tally/export.h"

typedef Perftools__Profiles__Profile PProfile;
typedef Perftools__Profiles__ValueType PValueType;
typedef Perftools__Profiles__Sample PSample;
typedef Perftools__Profiles__Label PLabel;
typedef Perftools__Profiles__Mapping PMapping;
typedef Perftools__Profiles__Location PLocation;
typedef Perftools__Profiles__Line PLine;
typedef Perftools__Profiles__Function PFunction;

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
	bool named, lines;
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

struct psample {
	uint32_t first, len; /* into sample_locs, leaf first */
	int32_t pid;
	uint64_t *values;
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
};

static bool func_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct func *a = &((const struct pp *)ctx)->funcs[idx], *b = key;
	return a->image == b->image && a->name == b->name && a->addr == b->addr && a->file == b->file;
}

static uint32_t func_id(struct pp *p, const struct func *k)
{
	uint64_t h = tally_hash_u64(((uint64_t)k->image << 40) ^ (uint64_t)k->name ^ tally_hash_u64(k->addr) ^
				    ((uint64_t)k->file << 20));
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
	struct map k = { image, delta, UINT64_MAX, 0, true, true };
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
static size_t location_frames(struct tally_resolver *res, uint32_t image, uint64_t offset, struct frame *out)
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

static uint32_t loc_id(struct pp *p, uint32_t image, uint64_t offset)
{
	struct loc k = { .image = image, .offset = offset };
	uint64_t h = tally_hash_u64(((uint64_t)image << 48) ^ tally_hash_u64(offset));
	uint32_t i = tally_hidx_get(&p->loc_idx, h, &k, loc_eq, p);
	if (i != TALLY_HIDX_NONE)
		return i;
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
		struct func f = { image, str_id(&p->str, fr[j].name), str_id(&p->str, fr[j].file ? fr[j].file : ""),
				  fr[j].addr, 0 };
		GROW(p->lines, p->alines, p->nlines + 1);
		p->lines[p->nlines++] = (struct line){ func_id(p, &f), fr[j].line };
		if (!fr[j].file || !fr[j].line)
			m->lines = false;
	}
	if (!nf)
		m->named = m->lines = false;
	GROW(p->locs, p->alocs, p->nlocs + 1);
	p->locs[p->nlocs] = k;
	tally_hidx_put(&p->loc_idx, h, (uint32_t)p->nlocs);
	return (uint32_t)p->nlocs++;
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

struct samples {
	uint32_t *locs; /* root first while collecting */
	size_t nlocs, alocs;
	struct tally_trim_stack *st;
	int32_t *pid;
	uint64_t *counts; /* n * nevents */
	size_t n, alloc, apid, acounts;
};

static void add_sample(struct samples *s, int ne, int32_t pid, const uint64_t *counts)
{
	GROW(s->st, s->alloc, s->n + 1);
	GROW(s->pid, s->apid, s->n + 1);
	GROW(s->counts, s->acounts, (s->n + 1) * (size_t)ne);
	s->pid[s->n] = pid;
	memcpy(&s->counts[s->n * (size_t)ne], counts, (size_t)ne * sizeof(uint64_t));
	s->n++;
}

/* Merged output samples: equal (locations, pid) add up. */
struct outs {
	struct psample *v;
	size_t n, alloc;
	uint32_t *locs;
	size_t nlocs, alocs;
	uint64_t *vals;
	size_t nvals, avals;
	struct tally_hidx idx;
	int nv;
};

struct okey {
	const uint32_t *locs;
	uint32_t len;
	int32_t pid;
};

static bool out_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct outs *o = ctx;
	const struct okey *k = key;
	const struct psample *s = &o->v[idx];
	return s->len == k->len && s->pid == k->pid && !memcmp(&o->locs[s->first], k->locs, k->len * sizeof(uint32_t));
}

static void add_out(struct outs *o, const uint32_t *locs, uint32_t len, int32_t pid, const uint64_t *vals)
{
	struct okey k = { locs, len, pid };
	uint64_t h = tally_hash_bytes(locs, len * sizeof(uint32_t), (uint64_t)(uint32_t)pid);
	uint32_t i = tally_hidx_get(&o->idx, h, &k, out_eq, o);
	if (i == TALLY_HIDX_NONE) {
		GROW(o->v, o->alloc, o->n + 1);
		GROW(o->locs, o->alocs, o->nlocs + len + 1);
		GROW(o->vals, o->avals, (o->n + 1) * (size_t)o->nv);
		memcpy(&o->locs[o->nlocs], locs, len * sizeof(uint32_t));
		o->v[o->n] = (struct psample){ (uint32_t)o->nlocs, len, pid, NULL };
		memset(&o->vals[o->n * (size_t)o->nv], 0, (size_t)o->nv * sizeof(uint64_t));
		o->nlocs += len;
		tally_hidx_put(&o->idx, h, (uint32_t)o->n);
		i = (uint32_t)o->n++;
	}
	for (int v = 0; v < o->nv; v++)
		o->vals[i * (size_t)o->nv + (size_t)v] += vals[v];
}

/* ---- session facts ---- */

/* Item i of a comma-separated list as a number, or 0. */
static double list_num(const char *list, int i)
{
	const char *p = list;
	for (int k = 0; k < i && p; k++) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return p ? strtod(p, NULL) : 0;
}

static bool time_event(const char *ev)
{
	return !strcmp(ev, "cpu-clock") || !strcmp(ev, "task-clock");
}

static int64_t parse_utc(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return 0;
	return (int64_t)timegm(&tm) * 1000000000LL;
}

static int gzip_into(struct strbuf *out, const uint8_t *data, size_t len)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return tally_seterr(-1, "zlib: cannot start compressing the pprof profile");
	size_t bound = deflateBound(&z, len);
	if (strbuf_grow(out, bound)) {
		deflateEnd(&z);
		return tally_seterr(-ENOMEM, "zlib: no memory for the compressed pprof profile (%zu bytes)", bound);
	}
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out->buf + out->len;
	z.avail_out = (uInt)bound;
	int r = deflate(&z, Z_FINISH);
	size_t n = bound - z.avail_out;
	deflateEnd(&z);
	if (r != Z_STREAM_END)
		return tally_seterr(-1, "zlib: cannot compress the pprof profile (%d)", r);
	out->len += n;
	out->buf[out->len] = '\0';
	return 0;
}

int tally_export_pprof(const struct tally_export *x, struct tally_export_out *out)
{
	const struct tally_db *db = x->db;
	int ne = x->nevents;
	size_t dbne = (size_t)db->nevents;
	struct pp p = { .x = x, .other_loc = UINT32_MAX };
	str_id(&p.str, "");

	/* sample types: per event its samples, and its period's worth where known */
	int nv = 0;
	int *val_event = xcalloc((size_t)ne * 2 + 1, sizeof(int));
	double *val_mult = xcalloc((size_t)ne * 2 + 1, sizeof(double));
	PValueType *vt = xcalloc((size_t)ne * 2 + 1, sizeof(PValueType));
	PValueType **vtp = xcalloc((size_t)ne * 2 + 1, sizeof(PValueType *));
	PValueType period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	int64_t period = 0, default_type = 0;
	const char *pmean = tally_meta_get(&db->session, "period-mean");
	struct strbuf sb = STRBUF_INIT;
	for (int i = 0; i < ne; i++) {
		const char *ev = db->events[x->events[i]];
		double mean = pmean ? list_num(pmean, x->events[i]) : 0;
		perftools__profiles__value_type__init(&vt[nv]);
		strbuf_reset(&sb);
		if (ne == 1)
			strbuf_addstr(&sb, "samples");
		else
			strbuf_addf(&sb, "%s-samples", ev);
		vt[nv].type = str_id(&p.str, sb.buf);
		vt[nv].unit = str_id(&p.str, "count");
		val_event[nv] = i;
		val_mult[nv] = 1;
		vtp[nv] = &vt[nv];
		nv++;
		if (mean > 0) {
			perftools__profiles__value_type__init(&vt[nv]);
			vt[nv].type = str_id(&p.str, ne == 1 && time_event(ev) ? "cpu" : ev);
			vt[nv].unit = str_id(&p.str, time_event(ev) ? "nanoseconds" : "count");
			val_event[nv] = i;
			val_mult[nv] = mean;
			vtp[nv] = &vt[nv];
			if (i == 0) {
				period_type = vt[nv];
				period = (int64_t)(mean + 0.5);
				default_type = vt[nv].type;
			}
			nv++;
		} else if (i == 0) {
			period_type = vt[nv - 1];
			period = 1;
			default_type = vt[nv - 1].type;
		}
	}

	/* the samples: stacks when recorded, else the flat profiles */
	struct samples s = { 0 };
	uint64_t *c = xcalloc((size_t)ne + 1, sizeof(uint64_t));
	uint64_t *totals = xcalloc((size_t)ne + 1, sizeof(uint64_t));
	if (db->has_stacks) {
		for (size_t k = 0; k < db->nstacks; k++) {
			const struct tally_db_stack *st = &db->stacks[k];
			bool any = false;
			for (int i = 0; i < ne; i++) {
				c[i] = db->stack_counts[k * dbne + (size_t)x->events[i]];
				totals[i] += c[i];
				any |= c[i] != 0;
			}
			if (!any || !st->len)
				continue;
			GROW(s.locs, s.alocs, s.nlocs + st->len);
			GROW(s.st, s.alloc, s.n + 1);
			s.st[s.n] = (struct tally_trim_stack){ (uint32_t)s.nlocs, st->len };
			for (uint32_t f = st->len; f-- > 0;) {
				const struct tally_frame *fr = &db->frames[st->first + f];
				/* callers' frames are return addresses: the call is the byte before */
				uint64_t off = fr->offset - (f == 0 || !fr->offset ? 0 : 1);
				s.locs[s.nlocs++] = loc_id(&p, fr->image, off);
			}
			add_sample(&s, ne, st->pid, c);
		}
	} else {
		for (size_t k = 0; k < db->nentries; k++) {
			const struct tally_db_entry *en = &db->entries[k];
			bool any = false;
			for (int i = 0; i < ne; i++) {
				c[i] = db->counts[k * dbne + (size_t)x->events[i]];
				totals[i] += c[i];
				any |= c[i] != 0;
			}
			if (!any)
				continue;
			GROW(s.locs, s.alocs, s.nlocs + 1);
			GROW(s.st, s.alloc, s.n + 1);
			s.st[s.n] = (struct tally_trim_stack){ (uint32_t)s.nlocs, 1 };
			s.locs[s.nlocs++] = loc_id(&p, en->image, en->offset);
			add_sample(&s, ne, en->pid, c);
		}
	}
	uint64_t *min = xcalloc((size_t)ne + 1, sizeof(uint64_t));
	tally_export_trim_min(x, totals, min);
	uint32_t *keep = xcalloc(s.n + 1, sizeof(uint32_t));
	uint64_t *keys = xcalloc(s.nlocs + 1, sizeof(uint64_t));
	for (size_t i = 0; i < s.nlocs; i++)
		keys[i] = s.locs[i];
	tally_export_trim(keys, s.st, s.n, s.counts, ne, min, keep);
	free(keys);

	struct outs o = { .nv = nv };
	uint32_t *path = NULL;
	size_t apath = 0;
	uint64_t *vals = xcalloc((size_t)nv + 1, sizeof(uint64_t));
	for (size_t k = 0; k < s.n; k++) {
		uint32_t len = 0;
		GROW(path, apath, (size_t)s.st[k].len + 2);
		if (keep[k] < s.st[k].len)
			path[len++] = other_loc(&p);
		for (uint32_t j = keep[k]; j-- > 0;)
			path[len++] = s.locs[s.st[k].first + j]; /* leaf first */
		for (int v = 0; v < nv; v++) {
			double cnt = (double)s.counts[k * (size_t)ne + (size_t)val_event[v]];
			vals[v] = (uint64_t)(cnt * val_mult[v] + 0.5);
		}
		add_out(&o, path, len, db->per_pid ? s.pid[k] : 0, vals);
	}
	free(path);
	free(vals);

	/* ---- the message ---- */
	PProfile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	prof.n_sample_type = (size_t)nv;
	prof.sample_type = vtp;
	prof.period_type = &period_type;
	prof.period = period;
	prof.default_sample_type = default_type;
	const char *dur = tally_meta_get(&db->session, "duration");
	prof.duration_nanos = dur ? (int64_t)(strtod(dur, NULL) * 1e9) : 0;
	prof.time_nanos = parse_utc(tally_meta_get(&db->session, "start-time"));
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

	/* samples */
	int64_t key_pid = str_id(&p.str, "pid"), key_comm = str_id(&p.str, "comm");
	struct tally_export_comms comms;
	tally_export_comms_init(&comms, db);
	PSample *ps = xcalloc(o.n + 1, sizeof(PSample));
	PSample **psp = xcalloc(o.n + 1, sizeof(PSample *));
	PLabel *pl = xcalloc(o.n * 2 + 1, sizeof(PLabel));
	PLabel **plp = xcalloc(o.n * 2 + 1, sizeof(PLabel *));
	uint64_t *locids = xcalloc(o.nlocs + 1, sizeof(uint64_t));
	int64_t *values = xcalloc(o.n * (size_t)nv + 1, sizeof(int64_t));
	size_t nl = 0;
	for (size_t k = 0; k < o.n; k++) {
		perftools__profiles__sample__init(&ps[k]);
		const struct psample *q = &o.v[k];
		for (uint32_t j = 0; j < q->len; j++)
			locids[q->first + j] = (uint64_t)o.locs[q->first + j] + 1;
		ps[k].n_location_id = q->len;
		ps[k].location_id = &locids[q->first];
		for (int v = 0; v < nv; v++)
			values[k * (size_t)nv + (size_t)v] = (int64_t)o.vals[k * (size_t)nv + (size_t)v];
		ps[k].n_value = (size_t)nv;
		ps[k].value = &values[k * (size_t)nv];
		if (q->pid) {
			ps[k].label = &plp[nl];
			perftools__profiles__label__init(&pl[nl]);
			pl[nl].key = key_pid;
			pl[nl].num = q->pid;
			plp[nl] = &pl[nl];
			nl++;
			ps[k].n_label = 1;
			const char *comm = tally_export_comm(&comms, q->pid);
			if (comm) {
				perftools__profiles__label__init(&pl[nl]);
				pl[nl].key = key_comm;
				pl[nl].str = str_id(&p.str, comm);
				plp[nl] = &pl[nl];
				nl++;
				ps[k].n_label = 2;
			}
		}
		psp[k] = &ps[k];
	}
	prof.n_sample = o.n;
	prof.sample = psp;
	tally_export_comms_release(&comms);

	/* mappings: pprof takes the first for the main binary, so the profiled
	 * program's executable (the one with the most samples) goes first */
	uint64_t *img_samples = xcalloc(db->nimages + 1, sizeof(uint64_t));
	for (size_t k = 0; k < db->nentries; k++)
		for (int i = 0; i < ne; i++)
			img_samples[db->entries[k].image] += db->counts[k * dbne + (size_t)x->events[i]];
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
		/* without lines from us, pprof looks them up itself (addr2line) when it
		 * finds the binary; our function names stay when it does not */
		pm[k].has_functions = m->named && (m->lines || !file || !strcmp(im->kind, "vdso"));
		pm[k].has_filenames = m->named && m->lines;
		pm[k].has_line_numbers = m->named && m->lines;
		pmp[mid[k] - 1] = &pm[k];
	}
	prof.n_mapping = p.nmaps;
	prof.mapping = pmp;

	/* functions */
	PFunction *pf = xcalloc(p.nfuncs + 1, sizeof(PFunction));
	PFunction **pfp = xcalloc(p.nfuncs + 1, sizeof(PFunction *));
	for (size_t k = 0; k < p.nfuncs; k++) {
		perftools__profiles__function__init(&pf[k]);
		pf[k].id = k + 1;
		pf[k].name = pf[k].system_name = p.funcs[k].name;
		pf[k].filename = p.funcs[k].file;
		pf[k].start_line = p.funcs[k].start_line;
		pfp[k] = &pf[k];
	}
	prof.n_function = p.nfuncs;
	prof.function = pfp;

	/* locations */
	PLocation *plc = xcalloc(p.nlocs + 1, sizeof(PLocation));
	PLocation **plcp = xcalloc(p.nlocs + 1, sizeof(PLocation *));
	PLine *pln = xcalloc(p.nlines + 1, sizeof(PLine));
	PLine **plnp = xcalloc(p.nlines + 1, sizeof(PLine *));
	for (size_t k = 0; k < p.nlines; k++) {
		perftools__profiles__line__init(&pln[k]);
		pln[k].function_id = p.lines[k].func + 1;
		pln[k].line = p.lines[k].line;
		plnp[k] = &pln[k];
	}
	for (size_t k = 0; k < p.nlocs; k++) {
		const struct loc *l = &p.locs[k];
		perftools__profiles__location__init(&plc[k]);
		plc[k].id = k + 1;
		plc[k].mapping_id = l->map == UINT32_MAX ? 0 : mid[l->map];
		plc[k].address = l->address;
		plc[k].n_line = l->n;
		plc[k].line = &plnp[l->first];
		plcp[k] = &plc[k];
	}
	prof.n_location = p.nlocs;
	prof.location = plcp;
	prof.n_string_table = p.str.n;
	prof.string_table = p.str.v;

	size_t len = perftools__profiles__profile__get_packed_size(&prof);
	uint8_t *buf = xmalloc(len + 1);
	perftools__profiles__profile__pack(&prof, buf);
	int ret = gzip_into(tally_export_out_file(out, ""), buf, len);
	free(buf);

	free(plnp);
	free(pln);
	free(plcp);
	free(plc);
	free(pfp);
	free(pf);
	free(pmp);
	free(pm);
	free(mid);
	free(values);
	free(locids);
	free(plp);
	free(pl);
	free(psp);
	free(ps);
	free(o.v);
	free(o.locs);
	free(o.vals);
	tally_hidx_release(&o.idx);
	free(keep);
	free(min);
	free(totals);
	free(c);
	free(s.locs);
	free(s.st);
	free(s.pid);
	free(s.counts);
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
	strbuf_release(&sb);
	free(vtp);
	free(vt);
	free(val_mult);
	free(val_event);
	return ret;
}
