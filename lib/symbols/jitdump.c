/* perf's jitdump format, read at record time, the database's text copy of it,
 * read at report time, and perf maps (see jitdump.h). The files are written by
 * a runtime we do not trust to be well formed, nor to be harmless: every length
 * is checked against the file, and what one dump may make us allocate is
 * bounded (tally_jitdump_budget). */
#define _GNU_SOURCE
#include "tally/jitdump.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JITDUMP_MAGIC 0x4A695444u /* "JiTD" as the writer's byte order stores it */
#define JITDUMP_MAGIC_SWAPPED 0x4454694Au
#define JITDUMP_VERSION 1
#define JITDUMP_HEADER 40 /* magic, version, total_size, elf_mach, pad1, pid, timestamp, flags */
#define JITREC_HEADER 16  /* id, total_size, timestamp */
#define CODE_MAX (256u << 20)
#define MIB ((size_t)1 << 20)

enum {
	JIT_CODE_LOAD = 0,
	JIT_CODE_MOVE = 1,
	JIT_CODE_DEBUG_INFO = 2,
	JIT_CODE_CLOSE = 3,
	JIT_CODE_UNWINDING_INFO = 4
};

static uint32_t get32(const unsigned char *p, bool swap)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return swap ? __builtin_bswap32(v) : v;
}

static uint64_t get64(const unsigned char *p, bool swap)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return swap ? __builtin_bswap64(v) : v;
}

/* One past the last byte of f (a function of size 0 still covers its address);
 * UINT64_MAX where that would wrap. */
static uint64_t func_end(const struct tally_jit_func *f)
{
	uint64_t n = f->size ? f->size : 1;
	return f->addr > UINT64_MAX - n ? UINT64_MAX : f->addr + n;
}

static size_t func_cost(size_t name_len, uint64_t code_size, size_t nlines)
{
	return sizeof(struct tally_jit_func) + name_len + 1 + (size_t)code_size +
	       nlines * sizeof(struct tally_jit_line);
}

static size_t func_bytes(const struct tally_jit_func *f)
{
	return func_cost(strlen(f->name), f->code ? f->size : 0, f->nlines);
}

/* Counts cost against the budget: false (and nothing counted) when it would pass it. */
static bool charge(struct tally_jitdump *jd, size_t cost)
{
	if (jd->budget && (jd->bytes > jd->budget || cost > jd->budget - jd->bytes))
		return false;
	jd->bytes += cost;
	return true;
}

size_t tally_jitdump_budget(size_t len)
{
	return len > (SIZE_MAX - MIB) / 4 ? SIZE_MAX : 4 * len + MIB;
}

static void func_free(struct tally_jit_func *f)
{
	free(f->name);
	free(f->code);
	free(f->lines);
}

void tally_jitdump_release(struct tally_jitdump *jd)
{
	if (!jd)
		return;
	for (size_t i = 0; i < jd->nfuncs; i++)
		func_free(&jd->funcs[i]);
	free(jd->funcs);
	for (size_t i = 0; i < jd->nfiles; i++)
		free(jd->files[i]);
	free(jd->files);
	tally_hidx_release(&jd->file_idx);
	free(jd->warning);
	memset(jd, 0, sizeof(*jd));
}

static bool file_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_jitdump *jd = ctx;
	return !strcmp(jd->files[idx], key);
}

/* The index of file name (n bytes, no NUL among them), added when new; UINT32_MAX
 * when adding it would pass the budget. */
static uint32_t intern_file(struct tally_jitdump *jd, const char *name, size_t n)
{
	char *s = xstrndup(name, n);
	uint64_t h = tally_hash_bytes(s, n, 0);
	uint32_t i = tally_hidx_get(&jd->file_idx, h, s, file_eq, jd);
	if (i != TALLY_HIDX_NONE || !charge(jd, n + 1 + sizeof(char *))) {
		free(s);
		return i == TALLY_HIDX_NONE ? UINT32_MAX : i;
	}
	GROW(jd->files, jd->afiles, jd->nfiles + 1);
	jd->files[jd->nfiles] = s;
	tally_hidx_put(&jd->file_idx, h, (uint32_t)jd->nfiles);
	return (uint32_t)jd->nfiles++;
}

static struct tally_jit_func *add_func(struct tally_jitdump *jd)
{
	GROW(jd->funcs, jd->afuncs, jd->nfuncs + 1);
	struct tally_jit_func *f = &jd->funcs[jd->nfuncs++];
	memset(f, 0, sizeof(*f));
	f->order = jd->next_order++;
	return f;
}

/* By address, then in the order they came (a stable sort: the copy keeps it). */
static int cmp_line(const void *a, const void *b)
{
	const struct tally_jit_line *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* addr + size (a function of size 0 still covers its address) does not wrap. */
static bool range_ok(uint64_t addr, uint64_t size)
{
	return addr <= UINT64_MAX - (size ? size : 1);
}

static int cmp_func(const void *a, const void *b)
{
	const struct tally_jit_func *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* A binary heap of function indices ordered by load order: the newest on top
 * (sign > 0) or the oldest (sign < 0). */
struct oheap {
	uint32_t *v;
	size_t n;
	int sign;
	const struct tally_jit_func *f;
};

static bool oh_above(const struct oheap *h, uint32_t a, uint32_t b)
{
	uint64_t x = h->f[a].order, y = h->f[b].order;
	return h->sign > 0 ? x > y : x < y;
}

static void oh_push(struct oheap *h, uint32_t i)
{
	size_t k = h->n++;
	h->v[k] = i;
	while (k && oh_above(h, h->v[k], h->v[(k - 1) / 2])) {
		uint32_t t = h->v[k];
		h->v[k] = h->v[(k - 1) / 2];
		h->v[(k - 1) / 2] = t;
		k = (k - 1) / 2;
	}
}

static void oh_pop(struct oheap *h)
{
	h->v[0] = h->v[--h->n];
	size_t k = 0;
	for (;;) {
		size_t l = 2 * k + 1, r = l + 1, m = k;
		if (l < h->n && oh_above(h, h->v[l], h->v[m]))
			m = l;
		if (r < h->n && oh_above(h, h->v[r], h->v[m]))
			m = r;
		if (m == k)
			break;
		uint32_t t = h->v[k];
		h->v[k] = h->v[m];
		h->v[m] = t;
		k = m;
	}
}

/* Sorted by address; where two functions overlap (the runtime reused the memory),
 * the one loaded last names it and the other is dropped, whether or not something
 * newer drops that one in turn. One sweep in address order, O(n log n): the
 * functions that started earlier and still cover the current address are kept in
 * two heaps, newest and oldest on top, so the current function is dropped when the
 * newest of them is newer, and drops those of them older than itself. */
static void finish(struct tally_jitdump *jd)
{
	size_t n = jd->nfuncs;
	tally_qsort(jd->funcs, n, sizeof(*jd->funcs), cmp_func);
	bool *drop = xcalloc(n + 1, sizeof(bool));
	struct oheap newest = { xmalloc((n + 1) * sizeof(uint32_t)), 0, 1, jd->funcs };
	struct oheap oldest = { xmalloc((n + 1) * sizeof(uint32_t)), 0, -1, jd->funcs };
	for (size_t g = 0; g < n; g++) {
		const struct tally_jit_func *cur = &jd->funcs[g];
		while (newest.n && func_end(&jd->funcs[newest.v[0]]) <= cur->addr)
			oh_pop(&newest);
		if (newest.n && jd->funcs[newest.v[0]].order > cur->order)
			drop[g] = true;
		while (oldest.n) {
			uint32_t t = oldest.v[0];
			if (func_end(&jd->funcs[t]) > cur->addr) {
				if (jd->funcs[t].order > cur->order)
					break;
				drop[t] = true;
			}
			oh_pop(&oldest);
		}
		oh_push(&newest, (uint32_t)g);
		oh_push(&oldest, (uint32_t)g);
	}
	free(newest.v);
	free(oldest.v);
	size_t u = 0;
	for (size_t i = 0; i < n; i++) {
		if (drop[i]) {
			size_t b = func_bytes(&jd->funcs[i]);
			jd->bytes -= b < jd->bytes ? b : jd->bytes;
			func_free(&jd->funcs[i]);
			continue;
		}
		tally_qsort(jd->funcs[i].lines, jd->funcs[i].nlines, sizeof(*jd->funcs[i].lines),
			    cmp_line);
		jd->funcs[u++] = jd->funcs[i];
	}
	jd->nfuncs = u;
	free(drop);
}

struct pending_debug {
	uint64_t code_addr;
	struct tally_jit_line *lines;
	size_t n;
	bool valid;
};

static void warn_once(struct tally_jitdump *jd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void warn_once(struct tally_jitdump *jd, const char *fmt, ...)
{
	if (jd->warning)
		return;
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	jd->warning = strbuf_detach(&sb);
}

/* JIT_CODE_DEBUG_INFO: code_addr, nr_entry, then entries of addr, line, discrim
 * and a NUL-terminated file name. 0 when parsed, -1 when the entries overrun the
 * record, -2 when their file names would pass the budget. Entries with an empty
 * file name are not kept (a runtime wrote garbage there). */
static int parse_debug(struct tally_jitdump *jd, const unsigned char *p, size_t len, bool swap,
		       struct pending_debug *pd)
{
	if (len < 16)
		return -1;
	uint64_t code_addr = get64(p, swap), nr = get64(p + 8, swap);
	size_t off = 16;
	struct tally_jit_line *lines = NULL;
	size_t n = 0, cap = 0;
	int r = -1;
	for (uint64_t i = 0; i < nr; i++) {
		if (len - off < 17)
			goto bad;
		uint64_t addr = get64(p + off, swap);
		uint32_t line = get32(p + off + 8, swap), discrim = get32(p + off + 12, swap);
		const char *name = (const char *)p + off + 16;
		size_t nl = strnlen(name, len - off - 16);
		if (nl == len - off - 16)
			goto bad;
		off += 16 + nl + 1;
		if (!nl)
			continue;
		uint32_t file = intern_file(jd, name, nl);
		if (file == UINT32_MAX) {
			r = -2;
			goto bad;
		}
		GROW(lines, cap, n + 1);
		lines[n] = (struct tally_jit_line){ addr, line, discrim, file, (uint32_t)n };
		n++;
	}
	free(pd->lines);
	*pd = (struct pending_debug){ code_addr, lines, n, true };
	return 0;
bad:
	free(lines);
	return r;
}

/* The pending line table, if it is f's: its entries inside f move to f. */
static void take_lines(struct tally_jit_func *f, struct pending_debug *pd)
{
	if (!pd->valid || pd->code_addr != f->addr)
		return;
	uint64_t end = func_end(f);
	size_t k = 0;
	for (size_t i = 0; i < pd->n; i++)
		if (pd->lines[i].addr >= f->addr && pd->lines[i].addr < end)
			pd->lines[k++] = pd->lines[i];
	if (k) {
		f->lines = pd->lines;
		f->nlines = k;
	} else {
		free(pd->lines);
	}
	*pd = (struct pending_debug){ 0, NULL, 0, false };
}

/* The newest function per (code index, address), for JIT_CODE_MOVE: a hash index
 * over distinct keys, each key's newest function in latest[]. */
struct move_idx {
	struct tally_hidx h;
	uint64_t *addr, *index;
	size_t *latest;
	size_t n, a_addr, a_index, a_latest;
};

struct move_key {
	uint64_t addr, index;
};

static bool move_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct move_idx *m = ctx;
	const struct move_key *k = key;
	return m->addr[idx] == k->addr && m->index[idx] == k->index;
}

static uint64_t move_hash(uint64_t addr, uint64_t index)
{
	return tally_hash_u64(addr ^ tally_hash_u64(index));
}

static void move_note(struct move_idx *m, uint64_t addr, uint64_t index, size_t func)
{
	struct move_key k = { addr, index };
	uint64_t h = move_hash(addr, index);
	uint32_t i = tally_hidx_get(&m->h, h, &k, move_eq, m);
	if (i != TALLY_HIDX_NONE) {
		m->latest[i] = func;
		return;
	}
	GROW(m->addr, m->a_addr, m->n + 1);
	GROW(m->index, m->a_index, m->n + 1);
	GROW(m->latest, m->a_latest, m->n + 1);
	m->addr[m->n] = addr;
	m->index[m->n] = index;
	m->latest[m->n] = func;
	tally_hidx_put(&m->h, h, (uint32_t)m->n);
	m->n++;
}

static size_t move_find(const struct move_idx *m, uint64_t addr, uint64_t index)
{
	struct move_key k = { addr, index };
	uint32_t i = tally_hidx_get(&m->h, move_hash(addr, index), &k, move_eq, m);
	return i == TALLY_HIDX_NONE ? SIZE_MAX : m->latest[i];
}

static void move_release(struct move_idx *m)
{
	tally_hidx_release(&m->h);
	free(m->addr);
	free(m->index);
	free(m->latest);
}

int tally_jitdump_parse(struct tally_jitdump *jd, const void *buf, size_t len)
{
	return tally_jitdump_parse_budget(jd, buf, len, tally_jitdump_budget(len));
}

int tally_jitdump_parse_budget(struct tally_jitdump *jd, const void *buf, size_t len, size_t budget)
{
	memset(jd, 0, sizeof(*jd));
	jd->budget = budget;
	const unsigned char *p = buf;
	if (len < JITDUMP_HEADER)
		return tally_seterr(-EINVAL, "%zu bytes, too short for a jitdump header", len);
	uint32_t magic;
	memcpy(&magic, p, 4);
	bool swap = false;
	if (magic == JITDUMP_MAGIC_SWAPPED)
		swap = true;
	else if (magic != JITDUMP_MAGIC)
		return tally_seterr(
			-EINVAL, "bad magic 0x%08" PRIx32 " (a jitdump starts with 'JiTD')", magic);
	uint32_t version = get32(p + 4, swap), hsize = get32(p + 8, swap);
	if (version != JITDUMP_VERSION)
		return tally_seterr(-EINVAL,
				    "jitdump version %" PRIu32 ", and tally reads version %d",
				    version, JITDUMP_VERSION);
	if (hsize < JITDUMP_HEADER || hsize > len)
		return tally_seterr(-EINVAL,
				    "header size %" PRIu32
				    " is not between %d and the file's %zu bytes",
				    hsize, JITDUMP_HEADER, len);
	jd->elf_mach = get32(p + 12, swap);
	jd->pid = get32(p + 20, swap);
	struct pending_debug pd = { 0, NULL, 0, false };
	struct move_idx mi;
	memset(&mi, 0, sizeof(mi));
	size_t off = hsize, damaged = 0, first_bad = 0;
	while (off < len) {
		if (len - off < JITREC_HEADER) {
			warn_once(
				jd,
				"truncated record at byte %zu: %zu bytes left, a record header needs %d (the rest is ignored)",
				off, len - off, JITREC_HEADER);
			break;
		}
		uint32_t id = get32(p + off, swap), rsize = get32(p + off + 4, swap);
		if (rsize < JITREC_HEADER) {
			warn_once(jd,
				  "record at byte %zu has size %" PRIu32
				  ", less than its own header (the rest is ignored)",
				  off, rsize);
			break;
		}
		if (rsize > len - off) {
			warn_once(jd,
				  "truncated record at byte %zu: it claims %" PRIu32
				  " bytes, the file has %zu left (the rest is ignored)",
				  off, rsize, len - off);
			break;
		}
		const unsigned char *r = p + off + JITREC_HEADER;
		size_t rl = rsize - JITREC_HEADER;
		bool ok = true;
		if (id == JIT_CODE_LOAD) {
			if (rl < 40) {
				ok = false;
			} else {
				uint64_t code_addr = get64(r + 16, swap),
					 code_size = get64(r + 24, swap),
					 index = get64(r + 32, swap);
				const char *name = (const char *)r + 40;
				size_t nl = strnlen(name, rl - 40);
				if (!nl || nl == rl - 40 || code_size > rl - 40 - nl - 1 ||
				    code_size > CODE_MAX || !range_ok(code_addr, code_size)) {
					ok = false;
				} else {
					struct tally_jit_func tmp = { .addr = code_addr,
								      .size = code_size };
					size_t nlines = 0;
					if (pd.valid && pd.code_addr == code_addr)
						for (size_t i = 0; i < pd.n; i++)
							nlines += pd.lines[i].addr >= code_addr &&
								  pd.lines[i].addr < func_end(&tmp);
					if (!charge(jd, func_cost(nl, code_size, nlines))) {
						jd->dropped++;
						if (pd.valid && pd.code_addr == code_addr) {
							free(pd.lines);
							pd = (struct pending_debug){ 0, NULL, 0,
										     false };
						}
					} else {
						struct tally_jit_func *f = add_func(jd);
						f->addr = code_addr;
						f->size = code_size;
						f->index = index;
						f->name = xstrndup(name, nl);
						if (code_size) {
							f->code = xmalloc(code_size);
							memcpy(f->code, name + nl + 1, code_size);
						}
						take_lines(f, &pd);
						move_note(&mi, code_addr, index, jd->nfuncs - 1);
					}
				}
			}
		} else if (id == JIT_CODE_MOVE) {
			if (rl < 48) {
				ok = false;
			} else {
				uint64_t old_addr = get64(r + 16, swap),
					 new_addr = get64(r + 24, swap),
					 index = get64(r + 40, swap);
				size_t si = move_find(&mi, old_addr, index);
				if (si != SIZE_MAX) {
					const struct tally_jit_func *src = &jd->funcs[si];
					if (!range_ok(new_addr, src->size)) {
						ok = false;
					} else if (!charge(jd, func_bytes(src))) {
						jd->dropped++;
						jd->dropped_moves++;
					} else {
						/* the code may have run at both places: keep both
						 */
						struct tally_jit_func *f = add_func(jd);
						src = &jd->funcs[si];
						f->addr = new_addr;
						f->size = src->size;
						f->index = index;
						f->name = xstrdup(src->name);
						if (src->code) {
							f->code = xmalloc(src->size);
							memcpy(f->code, src->code, src->size);
						}
						if (src->nlines) {
							f->lines = xmalloc(src->nlines *
									   sizeof(*f->lines));
							f->nlines = src->nlines;
							for (size_t k = 0; k < src->nlines; k++) {
								f->lines[k] = src->lines[k];
								f->lines[k].addr =
									src->lines[k].addr -
									old_addr + new_addr;
							}
						}
						move_note(&mi, new_addr, index, jd->nfuncs - 1);
					}
				}
			}
		} else if (id == JIT_CODE_DEBUG_INFO) {
			int d = parse_debug(jd, r, rl, swap, &pd);
			ok = d != -1;
			if (d == -2)
				jd->dropped++;
		} else if (id == JIT_CODE_CLOSE) {
			break;
		}
		/* JIT_CODE_UNWINDING_INFO and record types of later versions: not needed */
		if (!ok && !damaged++)
			first_bad = off;
		off += rsize;
	}
	free(pd.lines);
	move_release(&mi);
	if (damaged || jd->dropped) {
		struct strbuf sb = STRBUF_INIT;
		if (damaged)
			strbuf_addf(&sb, "%zu damaged record%s skipped (the first at byte %zu)",
				    damaged, damaged == 1 ? "" : "s", first_bad);
		if (jd->dropped) {
			char b[32];
			tally_format_size(jd->budget, b, sizeof(b));
			strbuf_addf(
				&sb,
				"%s%" PRIu64 " record%s dropped (%" PRIu64
				" JIT_CODE_MOVE): they would have taken the dump past its memory budget of %s (docs/symbols.md)",
				sb.len ? "; " : "", jd->dropped, jd->dropped == 1 ? "" : "s",
				jd->dropped_moves, b);
		}
		if (jd->warning)
			strbuf_addf(&sb, "; %s", jd->warning);
		free(jd->warning);
		jd->warning = strbuf_detach(&sb);
	}
	finish(jd);
	return 0;
}

/* ---- record time: a dump still being written ---- */

void tally_jitdump_cursor_release(struct tally_jitdump_cursor *cur)
{
	free(cur->unwind);
	cur->unwind = NULL;
	cur->unwind_len = cur->unwind_hdr_len = 0;
}

/* The bytes of each kind of record the scan needs in its buffer: the fixed
 * part of a load or a move, the whole of the unwinding info. */
#define LOAD_FIXED (JITREC_HEADER + 40)
#define MOVE_FIXED (JITREC_HEADER + 48)
#define UNWIND_FIXED (JITREC_HEADER + 24)

size_t tally_jitdump_scan(struct tally_jitdump_cursor *cur, const void *buf, size_t len,
			  uint64_t file_len, tally_jit_code_fn fn, void *ctx)
{
	const unsigned char *p = buf;
	if (cur->done)
		return 0;
	if (cur->off == 0) {
		if (file_len < JITDUMP_HEADER)
			return 0;
		if (len < JITDUMP_HEADER)
			return JITDUMP_HEADER;
		uint32_t magic;
		memcpy(&magic, p, 4);
		cur->swap = magic == JITDUMP_MAGIC_SWAPPED;
		uint32_t hsize = get32(p + 8, cur->swap);
		if ((magic != JITDUMP_MAGIC && !cur->swap) ||
		    get32(p + 4, cur->swap) != JITDUMP_VERSION || hsize < JITDUMP_HEADER) {
			cur->done = true;
			return 0;
		}
		cur->elf_mach = get32(p + 12, cur->swap);
		cur->off = hsize;
		if (hsize > len)
			return 0; /* read again from the first record */
		p += hsize;
		len -= hsize;
	}
	bool swap = cur->swap;
	while (file_len > cur->off && file_len - cur->off >= JITREC_HEADER) {
		if (len < JITREC_HEADER)
			return JITREC_HEADER;
		uint32_t id = get32(p, swap), rsize = get32(p + 4, swap);
		if (rsize < JITREC_HEADER) {
			cur->done = true; /* the snapshot's parse says where */
			return 0;
		}
		if (rsize > file_len - cur->off)
			return 0; /* being written: whole next time */
		size_t need = id == JIT_CODE_LOAD   ? LOAD_FIXED
			      : id == JIT_CODE_MOVE ? MOVE_FIXED
						    : 0;
		if (id == JIT_CODE_UNWINDING_INFO && rsize >= UNWIND_FIXED &&
		    rsize <= UNWIND_FIXED + TALLY_JIT_UNWIND_MAX + 8)
			need = rsize; /* shorter than its fixed part: skipped */
		if (need > rsize)
			need = 0; /* too short to be one: skipped */
		if (len < need)
			return need;
		const unsigned char *r = p + JITREC_HEADER;
		if (id == JIT_CODE_LOAD) {
			struct tally_jit_code_event ev = { .addr = need ? get64(r + 16, swap) : 0,
							   .size = need ? get64(r + 24, swap) : 0,
							   .index =
								   need ? get64(r + 32, swap) : 0 };
			if (need && ev.size <= CODE_MAX && range_ok(ev.addr, ev.size)) {
				ev.unwind = cur->unwind;
				ev.unwind_len = cur->unwind_len;
				ev.eh_frame_hdr_len = cur->unwind_hdr_len;
				fn(ctx, &ev);
			}
			tally_jitdump_cursor_release(cur); /* it was this load's */
		} else if (id == JIT_CODE_MOVE && need) {
			struct tally_jit_code_event ev = { .move = true,
							   .old_addr = get64(r + 16, swap),
							   .addr = get64(r + 24, swap),
							   .size = get64(r + 32, swap),
							   .index = get64(r + 40, swap) };
			if (ev.size <= CODE_MAX && range_ok(ev.addr, ev.size))
				fn(ctx, &ev);
		} else if (id == JIT_CODE_UNWINDING_INFO) {
			tally_jitdump_cursor_release(cur);
			uint64_t us = need ? get64(r, swap) : 0, hs = need ? get64(r + 8, swap) : 0;
			/* an .eh_frame (possibly empty) and its header, within the record */
			if (need && hs && hs < us && us <= rsize - UNWIND_FIXED &&
			    us <= TALLY_JIT_UNWIND_MAX) {
				cur->unwind = xmalloc((size_t)us);
				memcpy(cur->unwind, r + 24, (size_t)us);
				cur->unwind_len = (size_t)us;
				cur->unwind_hdr_len = (size_t)hs;
			}
		} else if (id == JIT_CODE_CLOSE) {
			cur->done = true;
			return 0;
		}
		cur->off += rsize;
		if (rsize >= len)
			/* the rest of the record (code) was not read: read from the next */
			return 0;
		p += rsize;
		len -= rsize;
	}
	return 0;
}

struct tally_jit_func *tally_jitdump_find(const struct tally_jitdump *jd, uint64_t addr)
{
	size_t lo = TALLY_UPPER_U64(jd->funcs, jd->nfuncs, addr, addr);
	if (!lo)
		return NULL;
	struct tally_jit_func *f = &jd->funcs[lo - 1];
	return addr < func_end(f) ? f : NULL;
}

const struct tally_jit_line *tally_jitdump_line(const struct tally_jit_func *f, uint64_t addr)
{
	size_t lo = TALLY_UPPER_U64(f->lines, f->nlines, addr, addr);
	return lo ? &f->lines[lo - 1] : NULL;
}

/* ---- escaping names and file names ---- */

/* The length of the printable UTF-8 sequence at p (no C1 control), else 0;
 * the string's NUL ends every sequence. */
static size_t utf8_seq(const unsigned char *p)
{
	return tally_utf8_seq(p, strnlen((const char *)p, 4), false);
}

void tally_jit_escape(struct strbuf *sb, const char *s)
{
	static const char hx[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		unsigned c = *p;
		if (c == '\\' || c == '\n' || c == '\t' || c == '\r') {
			strbuf_addch(sb, '\\');
			strbuf_addch(sb, c == '\\'   ? '\\'
					 : c == '\n' ? 'n'
					 : c == '\t' ? 't'
						     : 'r');
			p++;
		} else if (c >= 0x20 && c < 0x7f) {
			strbuf_addch(sb, (char)c);
			p++;
		} else {
			size_t n = c >= 0x80 ? utf8_seq(p) : 0;
			if (n) {
				strbuf_add(sb, p, n);
				p += n;
			} else {
				char e[4] = { '\\', 'x', hx[c >> 4], hx[c & 15] };
				strbuf_add(sb, e, 4);
				p++;
			}
		}
	}
}

char *tally_jit_display_name(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		size_t n = *p >= 0x20 && *p < 0x7f ? 1 : *p >= 0x80 ? utf8_seq(p) : 0;
		if (!n)
			break;
		p += n;
	}
	if (!*p)
		return NULL;
	struct strbuf sb = STRBUF_INIT;
	tally_jit_escape(&sb, s);
	return strbuf_detach(&sb);
}

/* ---- the database's text copy ---- */

void tally_jitdump_format(const struct tally_jitdump *jd, bool all, const char *source,
			  struct strbuf *out)
{
	strbuf_addstr(
		out,
		"# tally's copy of a jitdump: func ADDR SIZE INDEX NAME, then its line and code lines (docs/format.md)\n");
	strbuf_addstr(out, "source: ");
	tally_jit_escape(out, source);
	strbuf_addf(out, "\nelf-mach: %" PRIu32 "\npid: %" PRIu32 "\n\n", jd->elf_mach, jd->pid);
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < jd->nfuncs; i++) {
		const struct tally_jit_func *f = &jd->funcs[i];
		if (!all && !f->keep)
			continue;
		strbuf_addf(out, "func %" PRIx64 " %" PRIx64 " %" PRIu64 " ", f->addr, f->size,
			    f->index);
		tally_jit_escape(out, f->name);
		strbuf_addch(out, '\n');
		for (size_t k = 0; k < f->nlines; k++) {
			strbuf_addf(out, "line %" PRIx64 " %" PRIu32 " %" PRIu32 " ",
				    f->lines[k].addr, f->lines[k].line, f->lines[k].discrim);
			tally_jit_escape(out, jd->files[f->lines[k].file]);
			strbuf_addch(out, '\n');
		}
		if (f->code && f->size) {
			strbuf_addstr(out, "code ");
			for (uint64_t b = 0; b < f->size;) {
				char chunk[512];
				size_t k = 0;
				for (; k < sizeof(chunk) && b < f->size; b++) {
					chunk[k++] = hx[f->code[b] >> 4];
					chunk[k++] = hx[f->code[b] & 15];
				}
				strbuf_add(out, chunk, k);
			}
			strbuf_addch(out, '\n');
		}
	}
}

static bool hex_field(char **p, uint64_t *v)
{
	char *s = *p, *end;
	if (!isxdigit((unsigned char)*s))
		return false;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 16);
	if (errno || (*end != ' ' && *end))
		return false;
	*v = x;
	*p = *end ? end + 1 : end;
	return true;
}

static bool dec_field(char **p, uint64_t *v, uint64_t max)
{
	char *s = *p, *end;
	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || x > max || (*end != ' ' && *end))
		return false;
	*v = x;
	*p = *end ? end + 1 : end;
	return true;
}

/* The first damaged line of a copy, and how many there were. */
struct damage {
	size_t n, first;
	char *why;
};

static void damaged(struct damage *d, size_t ln, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void damaged(struct damage *d, size_t ln, const char *fmt, ...)
{
	if (!d->n++) {
		struct strbuf sb = STRBUF_INIT;
		va_list ap;
		va_start(ap, fmt);
		strbuf_vaddf(&sb, fmt, ap);
		va_end(ap);
		d->first = ln;
		d->why = strbuf_detach(&sb);
	}
}

int tally_jitdump_read_buf(struct tally_jitdump *jd, const char *text, size_t len, const char *what)
{
	memset(jd, 0, sizeof(*jd));
	struct strbuf lb = STRBUF_INIT;
	struct damage dmg = { 0, 0, NULL };
	size_t ln = 0, at = 0, lcap = 0;
	bool header = true;
	size_t cur = SIZE_MAX; /* the function the next line and code lines belong to */
	bool skipping = false; /* its func line was damaged: they go with it */
	bool lines_bad = false; /* its line table was damaged: dropped */
	while (at < len) {
		const char *s = text + at, *nl = memchr(s, '\n', len - at);
		size_t n = nl ? (size_t)(nl - s) : len - at;
		at += n + (nl ? 1 : 0);
		ln++;
		bool nul = memchr(s, '\0', n) != NULL;
		strbuf_reset(&lb);
		strbuf_add(&lb, s, n);
		char *l = lb.buf;
		if (!n) {
			header = false;
			continue;
		}
		if (l[0] == '#')
			continue;
		if (header && strncmp(l, "func ", 5)) {
			uint64_t v;
			char *c;
			if (nul)
				damaged(&dmg, ln, "a header line holds a NUL byte");
			else if (!strncmp(l, "elf-mach: ", 10) &&
				 (c = l + 10, dec_field(&c, &v, UINT32_MAX)))
				jd->elf_mach = (uint32_t)v;
			else if (!strncmp(l, "pid: ", 5) &&
				 (c = l + 5, dec_field(&c, &v, UINT32_MAX)))
				jd->pid = (uint32_t)v;
			else if (strncmp(l, "source: ", 8))
				damaged(&dmg, ln,
					"expected a header line 'source: FILE', 'elf-mach: N' or 'pid: N' before the first 'func' line");
			continue;
		}
		header = false;
		char *p = l + 5;
		uint64_t a, b, c;
		if (!strncmp(l, "func ", 5)) {
			cur = SIZE_MAX;
			skipping = true;
			lines_bad = false;
			lcap = 0;
			if (nul) {
				damaged(&dmg, ln,
					"a 'func' line holds a NUL byte: its function is skipped");
			} else if (!hex_field(&p, &a) || !hex_field(&p, &b) ||
				   !dec_field(&p, &c, UINT64_MAX) || !*p) {
				damaged(&dmg, ln,
					"expected 'func ADDR SIZE INDEX NAME' (hex, hex, decimal, a name): its function is skipped");
			} else if (b > CODE_MAX || !range_ok(a, b)) {
				damaged(&dmg, ln,
					"size 0x%" PRIx64 " at 0x%" PRIx64
					" is over 256 MiB or past the end of the address space: its function is skipped",
					b, a);
			} else {
				tally_unescape_bytes(p);
				struct tally_jit_func *f = add_func(jd);
				f->addr = a;
				f->size = b;
				f->index = c;
				f->name = xstrdup(p);
				jd->bytes += func_cost(strlen(p), 0, 0);
				cur = jd->nfuncs - 1;
				skipping = false;
			}
		} else if (!strncmp(l, "line ", 5)) {
			if (skipping || lines_bad)
				continue;
			if (cur == SIZE_MAX) {
				damaged(&dmg, ln, "a 'line' line before any 'func' line");
				continue;
			}
			struct tally_jit_func *f = &jd->funcs[cur];
			if (nul || !hex_field(&p, &a) || !dec_field(&p, &b, UINT32_MAX) ||
			    !dec_field(&p, &c, UINT32_MAX)) {
				damaged(&dmg, ln,
					"expected 'line ADDR LINE DISCRIM FILE' (hex, decimal, decimal, a file name): the line table of the function at 0x%" PRIx64
					" is dropped",
					f->addr);
				jd->bytes -= f->nlines * sizeof(*f->lines);
				free(f->lines);
				f->lines = NULL;
				f->nlines = 0;
				lines_bad = true;
				continue;
			}
			/* as the recorder keeps them: inside the function, with a file name */
			if (!*p || a < f->addr || a >= func_end(f))
				continue;
			tally_unescape_bytes(p);
			uint32_t file = intern_file(jd, p, strlen(p));
			GROW(f->lines, lcap, f->nlines + 1);
			f->lines[f->nlines] = (struct tally_jit_line){ a, (uint32_t)b, (uint32_t)c,
								       file, (uint32_t)f->nlines };
			f->nlines++;
			jd->bytes += sizeof(*f->lines);
		} else if (!strncmp(l, "code ", 5)) {
			if (skipping)
				continue;
			if (cur == SIZE_MAX) {
				damaged(&dmg, ln, "a 'code' line before any 'func' line");
				continue;
			}
			struct tally_jit_func *f = &jd->funcs[cur];
			size_t nd = n - 5;
			if (f->code) {
				damaged(&dmg, ln,
					"a second 'code' line for the function at 0x%" PRIx64
					" (the first is kept)",
					f->addr);
				continue;
			}
			if (nul || nd != f->size * 2) {
				damaged(&dmg, ln,
					"the code of the function at 0x%" PRIx64
					" has %zu hex digits, its size 0x%" PRIx64 " needs %" PRIu64
					": its code is dropped",
					f->addr, nd, f->size, f->size * 2);
				continue;
			}
			unsigned char *code = xmalloc(f->size + 1);
			bool ok = true;
			for (size_t k = 0; k < f->size && ok; k++) {
				int hi = tally_hexval((unsigned char)p[2 * k]),
				    lo = tally_hexval((unsigned char)p[2 * k + 1]);
				ok = hi >= 0 && lo >= 0;
				if (ok)
					code[k] = (unsigned char)(hi << 4 | lo);
			}
			if (!ok) {
				free(code);
				damaged(&dmg, ln,
					"the code of the function at 0x%" PRIx64
					" is not hex digits: its code is dropped",
					f->addr);
				continue;
			}
			f->code = code;
			jd->bytes += f->size;
		} else {
			damaged(&dmg, ln,
				"expected 'func ADDR SIZE INDEX NAME', 'line ADDR LINE DISCRIM FILE' or 'code HEX'");
		}
	}
	strbuf_release(&lb);
	finish(jd);
	if (dmg.n) {
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "'%s' line %zu: %s (", what, dmg.first, dmg.why);
		if (dmg.n > 1)
			strbuf_addf(&sb, "%zu damaged lines in all; ", dmg.n);
		strbuf_addstr(&sb, "the rest of the copy is used; record again for a whole one)");
		jd->warning = strbuf_detach(&sb);
		free(dmg.why);
	}
	return 0;
}

int tally_jitdump_read_copy(struct tally_jitdump *jd, const char *text, const char *what)
{
	return tally_jitdump_read_buf(jd, text, strlen(text), what);
}

/* ---- perf maps ---- */

static bool map_hex(const char **p, const char *end, uint64_t *v)
{
	const char *s = *p;
	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	uint64_t x = 0;
	const char *d = s;
	for (; s < end && tally_hexval((unsigned char)*s) >= 0; s++) {
		if (x >> 60)
			return false; /* more than 64 bits */
		x = x << 4 | (uint64_t)tally_hexval((unsigned char)*s);
	}
	if (s == d)
		return false;
	*v = x;
	*p = s;
	return true;
}

static bool map_sep(const char **p, const char *end)
{
	const char *s = *p;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (s == *p)
		return false;
	*p = s;
	return true;
}

/* What is wrong with the map line [s, end), or NULL when it is good; *name
 * gets where its name starts. */
static const char *map_line_bad(const char *s, const char *end, uint64_t *start, uint64_t *size,
				const char **name)
{
	const char *p = s;
	if (memchr(s, '\0', (size_t)(end - s)))
		return "a NUL byte";
	if (!map_hex(&p, end, start))
		return "START is not a hex number of at most 16 digits";
	if (!map_sep(&p, end))
		return "no space or tab after START";
	if (!map_hex(&p, end, size))
		return "SIZE is not a hex number of at most 16 digits";
	if (!map_sep(&p, end) || p == end)
		return "no NAME after SIZE (a name with a newline in it breaks its line in two)";
	if (*start > UINT64_MAX - (*size ? *size : 1))
		return "START + SIZE is past the end of the address space";
	*name = p;
	return NULL;
}

int tally_perfmap_parse(const char *buf, size_t len, struct tally_perfmap_sym **syms, size_t *nsyms,
			size_t *bad)
{
	return tally_perfmap_parse_why(buf, len, syms, nsyms, bad, NULL);
}

int tally_perfmap_parse_why(const char *buf, size_t len, struct tally_perfmap_sym **syms,
			    size_t *nsyms, size_t *bad, struct strbuf *why)
{
	struct tally_perfmap_sym *r = NULL;
	size_t n = 0, cap = 0, nbad = 0, at = 0, ln = 0;
	while (at < len) {
		const char *s = buf + at, *nl = memchr(s, '\n', len - at);
		const char *end = nl ? nl : buf + len;
		at = (size_t)(end - buf) + (nl ? 1 : 0);
		ln++;
		if (s == end)
			continue;
		const char *p = NULL, *what;
		uint64_t start = 0, size = 0;
		if ((what = map_line_bad(s, end, &start, &size, &p))) {
			if (!nbad++ && why) {
				strbuf_addf(why, "line %zu: %s, in '", ln, what);
				strbuf_add_excerpt(why, s, (size_t)(end - s), TALLY_EXCERPT_MAX);
				strbuf_addstr(why, "' (expected 'START SIZE NAME')");
			}
			continue;
		}
		GROW(r, cap, n + 1);
		r[n++] = (struct tally_perfmap_sym){ start, size, (size_t)(p - buf),
						     (size_t)(end - p) };
	}
	*syms = r;
	*nsyms = n;
	*bad = nbad;
	return 0;
}
