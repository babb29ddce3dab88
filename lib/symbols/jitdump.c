/* perf's jitdump format, read at record time, and the database's text copy of
 * it, read at report time (see jitdump.h). The dump is written by a runtime
 * we do not trust to be well formed: every length is checked against the file. */
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

enum { JIT_CODE_LOAD = 0, JIT_CODE_MOVE = 1, JIT_CODE_DEBUG_INFO = 2, JIT_CODE_CLOSE = 3, JIT_CODE_UNWINDING_INFO = 4 };

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

static uint32_t intern_file(struct tally_jitdump *jd, const char *name)
{
	uint64_t h = tally_hash_bytes(name, strlen(name), 0);
	uint32_t i = tally_hidx_get(&jd->file_idx, h, name, file_eq, jd);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(jd->files, jd->afiles, jd->nfiles + 1);
	jd->files[jd->nfiles] = xstrdup(name);
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

static int cmp_line(const void *a, const void *b)
{
	const struct tally_jit_line *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_func(const void *a, const void *b)
{
	const struct tally_jit_func *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Sorted by address; where two functions overlap (the runtime reused the memory),
 * the one loaded last names it and the other is dropped. */
static void finish(struct tally_jitdump *jd)
{
	tally_qsort(jd->funcs, jd->nfuncs, sizeof(*jd->funcs), cmp_func);
	bool *drop = xcalloc(jd->nfuncs + 1, sizeof(bool));
	for (size_t i = 0; i < jd->nfuncs; i++) {
		struct tally_jit_func *a = &jd->funcs[i];
		uint64_t end = a->addr + (a->size ? a->size : 1);
		for (size_t j = i + 1; j < jd->nfuncs && jd->funcs[j].addr < end; j++)
			drop[jd->funcs[j].order < a->order ? j : i] = true;
	}
	size_t u = 0;
	for (size_t i = 0; i < jd->nfuncs; i++) {
		if (drop[i]) {
			func_free(&jd->funcs[i]);
			continue;
		}
		tally_qsort(jd->funcs[i].lines, jd->funcs[i].nlines, sizeof(*jd->funcs[i].lines), cmp_line);
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

static void warn_once(struct tally_jitdump *jd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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
 * and a NUL-terminated file name. False when the entries overrun the record. */
static bool parse_debug(struct tally_jitdump *jd, const unsigned char *p, size_t len, bool swap, struct pending_debug *pd)
{
	if (len < 16)
		return false;
	uint64_t code_addr = get64(p, swap), nr = get64(p + 8, swap);
	size_t off = 16;
	struct tally_jit_line *lines = NULL;
	size_t n = 0, cap = 0;
	for (uint64_t i = 0; i < nr; i++) {
		if (len - off < 17)
			goto bad;
		uint64_t addr = get64(p + off, swap);
		uint32_t line = get32(p + off + 8, swap), discrim = get32(p + off + 12, swap);
		const char *name = (const char *)p + off + 16;
		size_t nl = strnlen(name, len - off - 16);
		if (nl == len - off - 16)
			goto bad;
		GROW(lines, cap, n + 1);
		lines[n++] = (struct tally_jit_line){ addr, line, discrim, intern_file(jd, name) };
		off += 16 + nl + 1;
	}
	free(pd->lines);
	*pd = (struct pending_debug){ code_addr, lines, n, true };
	return true;
bad:
	free(lines);
	return false;
}

int tally_jitdump_parse(struct tally_jitdump *jd, const void *buf, size_t len)
{
	memset(jd, 0, sizeof(*jd));
	const unsigned char *p = buf;
	if (len < JITDUMP_HEADER)
		return tally_seterr(-EINVAL, "%zu bytes, too short for a jitdump header", len);
	uint32_t magic;
	memcpy(&magic, p, 4);
	bool swap = false;
	if (magic == JITDUMP_MAGIC_SWAPPED)
		swap = true;
	else if (magic != JITDUMP_MAGIC)
		return tally_seterr(-EINVAL, "bad magic 0x%08" PRIx32 " (a jitdump starts with 'JiTD')", magic);
	uint32_t version = get32(p + 4, swap), hsize = get32(p + 8, swap);
	if (version != JITDUMP_VERSION)
		return tally_seterr(-EINVAL, "jitdump version %" PRIu32 ", and tally reads version %d", version, JITDUMP_VERSION);
	if (hsize < JITDUMP_HEADER || hsize > len)
		return tally_seterr(-EINVAL, "header size %" PRIu32 " is not between %d and the file's %zu bytes", hsize,
				    JITDUMP_HEADER, len);
	jd->elf_mach = get32(p + 12, swap);
	jd->pid = get32(p + 20, swap);
	struct pending_debug pd = { 0, NULL, 0, false };
	size_t off = hsize, damaged = 0, first_bad = 0;
	while (off < len) {
		if (len - off < JITREC_HEADER) {
			warn_once(jd, "truncated record at byte %zu: %zu bytes left, a record header needs %d (the rest is ignored)", off,
				  len - off, JITREC_HEADER);
			break;
		}
		uint32_t id = get32(p + off, swap), rsize = get32(p + off + 4, swap);
		if (rsize < JITREC_HEADER) {
			warn_once(jd, "record at byte %zu has size %" PRIu32 ", less than its own header (the rest is ignored)", off, rsize);
			break;
		}
		if (rsize > len - off) {
			warn_once(jd, "truncated record at byte %zu: it claims %" PRIu32 " bytes, the file has %zu left (the rest is ignored)",
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
				uint64_t code_addr = get64(r + 16, swap), code_size = get64(r + 24, swap), index = get64(r + 32, swap);
				const char *name = (const char *)r + 40;
				size_t nl = strnlen(name, rl - 40);
				if (nl == rl - 40 || code_size > rl - 40 - nl - 1 || code_size > CODE_MAX ||
				    code_addr + code_size < code_addr) {
					ok = false;
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
					if (pd.valid && pd.code_addr == code_addr) {
						f->lines = pd.lines;
						f->nlines = pd.n;
						pd = (struct pending_debug){ 0, NULL, 0, false };
					}
				}
			}
		} else if (id == JIT_CODE_MOVE) {
			if (rl < 48) {
				ok = false;
			} else {
				uint64_t old_addr = get64(r + 16, swap), new_addr = get64(r + 24, swap), index = get64(r + 40, swap);
				struct tally_jit_func *src = NULL;
				for (size_t i = jd->nfuncs; i-- > 0;)
					if (jd->funcs[i].index == index && jd->funcs[i].addr == old_addr) {
						src = &jd->funcs[i];
						break;
					}
				if (src) {
					/* the code may have run at both places: keep both */
					size_t si = (size_t)(src - jd->funcs);
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
						f->lines = xmalloc(src->nlines * sizeof(*f->lines));
						f->nlines = src->nlines;
						for (size_t k = 0; k < src->nlines; k++) {
							f->lines[k] = src->lines[k];
							f->lines[k].addr = src->lines[k].addr - old_addr + new_addr;
						}
					}
				}
			}
		} else if (id == JIT_CODE_DEBUG_INFO) {
			ok = parse_debug(jd, r, rl, swap, &pd);
		} else if (id == JIT_CODE_CLOSE) {
			break;
		}
		/* JIT_CODE_UNWINDING_INFO and record types of later versions: not needed */
		if (!ok && !damaged++)
			first_bad = off;
		off += rsize;
	}
	free(pd.lines);
	if (damaged) {
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%zu damaged record%s skipped (the first at byte %zu)", damaged, damaged == 1 ? "" : "s", first_bad);
		if (jd->warning)
			strbuf_addf(&sb, "; %s", jd->warning);
		free(jd->warning);
		jd->warning = strbuf_detach(&sb);
	}
	finish(jd);
	return 0;
}

struct tally_jit_func *tally_jitdump_find(const struct tally_jitdump *jd, uint64_t addr)
{
	size_t lo = 0, hi = jd->nfuncs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (jd->funcs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	struct tally_jit_func *f = &jd->funcs[lo - 1];
	return addr < f->addr + (f->size ? f->size : 1) ? f : NULL;
}

const struct tally_jit_line *tally_jitdump_line(const struct tally_jit_func *f, uint64_t addr)
{
	size_t lo = 0, hi = f->nlines;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (f->lines[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &f->lines[lo - 1] : NULL;
}

/* ---- the database's text copy ---- */

void tally_jitdump_format(const struct tally_jitdump *jd, bool all, const char *source, struct strbuf *out)
{
	strbuf_addstr(out, "# tally's copy of a jitdump: func ADDR SIZE INDEX NAME, then its line and code lines (docs/format.md)\n");
	strbuf_addstr(out, "source: ");
	strbuf_add_escaped(out, source);
	strbuf_addf(out, "\nelf-mach: %" PRIu32 "\npid: %" PRIu32 "\n\n", jd->elf_mach, jd->pid);
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < jd->nfuncs; i++) {
		const struct tally_jit_func *f = &jd->funcs[i];
		if (!all && !f->keep)
			continue;
		strbuf_addf(out, "func %" PRIx64 " %" PRIx64 " %" PRIu64 " ", f->addr, f->size, f->index);
		strbuf_add_escaped(out, f->name);
		strbuf_addch(out, '\n');
		for (size_t k = 0; k < f->nlines; k++) {
			strbuf_addf(out, "line %" PRIx64 " %" PRIu32 " %" PRIu32 " ", f->lines[k].addr, f->lines[k].line,
				    f->lines[k].discrim);
			strbuf_add_escaped(out, jd->files[f->lines[k].file]);
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

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

int tally_jitdump_read_copy(struct tally_jitdump *jd, char *text, const char *what)
{
	memset(jd, 0, sizeof(*jd));
	char *cur = text;
	size_t ln = 0;
	bool header = true;
	struct tally_jit_func *f = NULL;
	size_t lcap = 0;
	while (*cur) {
		char *l = cur, *nl = strchr(cur, '\n');
		if (nl) {
			*nl = '\0';
			cur = nl + 1;
		} else {
			cur += strlen(cur);
		}
		ln++;
		if (l[0] == '#')
			continue;
		if (!*l) {
			header = false;
			continue;
		}
		if (header && strncmp(l, "func ", 5)) {
			uint64_t v;
			char *c;
			if (!strncmp(l, "elf-mach: ", 10) && (c = l + 10, dec_field(&c, &v, UINT32_MAX)))
				jd->elf_mach = (uint32_t)v;
			else if (!strncmp(l, "pid: ", 5) && (c = l + 5, dec_field(&c, &v, UINT32_MAX)))
				jd->pid = (uint32_t)v;
			else if (strncmp(l, "source: ", 8))
				goto bad;
			continue;
		}
		header = false;
		char *p = l + 5;
		uint64_t a, b, c;
		if (!strncmp(l, "func ", 5)) {
			if (!hex_field(&p, &a) || !hex_field(&p, &b) || !dec_field(&p, &c, UINT64_MAX) || !*p || b > CODE_MAX)
				goto bad;
			f = add_func(jd);
			f->addr = a;
			f->size = b;
			f->index = c;
			tally_unescape(p);
			f->name = xstrdup(p);
			lcap = 0;
		} else if (!strncmp(l, "line ", 5) && f) {
			if (!hex_field(&p, &a) || !dec_field(&p, &b, UINT32_MAX) || !dec_field(&p, &c, UINT32_MAX) || !*p)
				goto bad;
			tally_unescape(p);
			GROW(f->lines, lcap, f->nlines + 1);
			f->lines[f->nlines++] = (struct tally_jit_line){ a, (uint32_t)b, (uint32_t)c, intern_file(jd, p) };
		} else if (!strncmp(l, "code ", 5) && f && !f->code) {
			size_t n = strlen(p);
			if (n != f->size * 2)
				goto bad;
			f->code = xmalloc(f->size + 1);
			for (size_t k = 0; k < f->size; k++) {
				int hi = hexval((unsigned char)p[2 * k]), lo = hexval((unsigned char)p[2 * k + 1]);
				if (hi < 0 || lo < 0)
					goto bad;
				f->code[k] = (unsigned char)(hi << 4 | lo);
			}
		} else {
			goto bad;
		}
	}
	finish(jd);
	return 0;
bad:
	tally_jitdump_release(jd);
	return tally_seterr(-EINVAL, "'%s' line %zu: expected 'func ADDR SIZE INDEX NAME', 'line ADDR LINE DISCRIM FILE' or 'code HEX' (the database is damaged: record it again)",
			    what, ln);
}
