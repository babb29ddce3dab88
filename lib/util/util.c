/* Allocation, error reporting, parsers, atomic files and clocks used across tally. */
#define _GNU_SOURCE
#include "tally/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* per thread: a job drives its hosts from threads of its own */
static _Thread_local char errbuf[1024];
static void (*oom_handler)(size_t n);

void tally_set_oom_handler(void (*fn)(size_t n))
{
	oom_handler = fn;
}

/* The core never prints or exits: the program's handler does (tally.c sets
 * one that says so and exits 1); without one, there is no way on. */
static _Noreturn void oom(size_t n)
{
	if (oom_handler)
		oom_handler(n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom(strlen(s));
	return p;
}

char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		oom(n);
	return p;
}

/* The capacity to grow to: doubling from have (min when empty) until want,
 * want itself when doubling would pass max. 0 when want is over max. */
static size_t grown_size(size_t have, size_t want, size_t min, size_t max)
{
	if (want > max)
		return 0;
	size_t n = have ? have : min;
	while (n < want)
		n = n > max / 2 ? want : n * 2;
	return n;
}

int tally_grow_try(void **p, size_t *alloc, size_t want, size_t sz)
{
	if (want <= *alloc)
		return 0;
	/* no object may be larger than PTRDIFF_MAX bytes (malloc refuses them) */
	size_t n = grown_size(*alloc, want, 16, sz ? PTRDIFF_MAX / sz : PTRDIFF_MAX);
	if (!n)
		return -EOVERFLOW;
	void *q = realloc(*p, n * (sz ? sz : 1));
	if (!q)
		return -ENOMEM;
	*p = q;
	*alloc = n;
	return 0;
}

void tally_grow(void **p, size_t *alloc, size_t want, size_t sz)
{
	if (want > *alloc && tally_grow_try(p, alloc, want, sz))
		oom(want > SIZE_MAX / (sz ? sz : 1) ? SIZE_MAX : want * (sz ? sz : 1));
}

int tally_seterr(int code, const char *fmt, ...)
{
	/* through a copy: the old message may be one of the arguments */
	char tmp[sizeof(errbuf)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	memcpy(errbuf, tmp, sizeof(errbuf));
	return code < 0 ? code : -code;
}

const char *tally_errmsg(void)
{
	return errbuf[0] ? errbuf : "unknown error";
}

void tally_warnings_add(struct tally_warnings *w, const char *fmt, ...)
{
	if (!w)
		return;
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	/* one line each, by contract */
	for (size_t i = 0; i < sb.len; i++)
		if (sb.buf[i] == '\n')
			sb.buf[i] = ' ';
	GROW(w->v, w->alloc, w->n + 1);
	w->v[w->n++] = strbuf_detach(&sb);
}

void tally_warnings_release(struct tally_warnings *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i]);
	free(w->v);
	w->v = NULL;
	w->n = w->alloc = 0;
}

/* ---- strbuf ---- */

void strbuf_init(struct strbuf *sb)
{
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
}

void strbuf_release(struct strbuf *sb)
{
	free(sb->buf);
	strbuf_init(sb);
}

void strbuf_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

int strbuf_grow(struct strbuf *sb, size_t extra)
{
	if (extra > SIZE_MAX - 1 - sb->len)
		return -EOVERFLOW;
	size_t want = sb->len + extra + 1;
	if (want <= sb->alloc)
		return 0;
	size_t n = grown_size(sb->alloc, want, 64, PTRDIFF_MAX);
	if (!n)
		return -EOVERFLOW;
	char *p = realloc(sb->buf, n);
	if (!p)
		return -ENOMEM;
	sb->buf = p;
	sb->alloc = n;
	return 0;
}

/* The appenders cannot fail: like xmalloc, they end the program when memory
 * (or the address space) is exhausted, rather than lose text. */
static void must_grow(struct strbuf *sb, size_t extra)
{
	if (strbuf_grow(sb, extra))
		oom(extra > SIZE_MAX - 1 - sb->len ? SIZE_MAX : sb->len + extra + 1);
}

void strbuf_add(struct strbuf *sb, const void *data, size_t n)
{
	if (!n) {
		must_grow(sb, 0);
		sb->buf[sb->len] = '\0';
		return;
	}
	must_grow(sb, n);
	memcpy(sb->buf + sb->len, data, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void strbuf_addstr(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

void strbuf_addch(struct strbuf *sb, char c)
{
	strbuf_add(sb, &c, 1);
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	va_copy(cp, ap);
	must_grow(sb, 64);
	int n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, cp);
	va_end(cp);
	if (n < 0)
		return;
	if ((size_t)n >= sb->alloc - sb->len) {
		must_grow(sb, (size_t)n);
		vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, ap);
	}
	sb->len += (size_t)n;
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

void strbuf_add_escaped(struct strbuf *sb, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '\\': strbuf_addstr(sb, "\\\\"); break;
		case '\n': strbuf_addstr(sb, "\\n"); break;
		case '\t': strbuf_addstr(sb, "\\t"); break;
		case '\r': strbuf_addstr(sb, "\\r"); break;
		default: strbuf_addch(sb, *s);
		}
	}
}

/* The length of the UTF-8 sequence at s (at most n bytes), 0 when it is not
 * one (overlong forms, surrogates and code points past U+10FFFF included), and
 * 0 for the C1 controls U+0080..U+009F, which terminals obey as escapes,
 * unless c1 allows them. */
static size_t utf8_seq(const unsigned char *s, size_t n, bool c1)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xc2 && !c1)
		lo = 0xa0; /* U+0080..U+009F */
	else if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

static size_t utf8_len(const unsigned char *s, size_t n)
{
	return utf8_seq(s, n, false);
}

void strbuf_add_json_str(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, '"');
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		/* a run of bytes printed as they are, in one copy: a byte at a time
		 * made a report that repeats a 10 MB name 20 times take 2.7 s */
		size_t run = i;
		while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
			run++;
		if (run > i) {
			strbuf_add(sb, p + i, run - i);
			i = run;
			continue;
		}
		unsigned char c = p[i];
		switch (c) {
		case '"': strbuf_addstr(sb, "\\\""); break;
		case '\\': strbuf_addstr(sb, "\\\\"); break;
		case '\n': strbuf_addstr(sb, "\\n"); break;
		case '\t': strbuf_addstr(sb, "\\t"); break;
		case '\r': strbuf_addstr(sb, "\\r"); break;
		default:
			if (c < 0x20) {
				strbuf_addf(sb, "\\u%04x", c);
			} else if (c < 0x80) {
				strbuf_addch(sb, (char)c);
			} else {
				/* valid UTF-8 passes (C1 controls escaped); anything else is
				 * one U+FFFD per bad byte, so the output is always valid JSON */
				size_t u = utf8_seq(p + i, n - i, true);
				if (u == 2 && c == 0xc2 && p[i + 1] < 0xa0)
					strbuf_addf(sb, "\\u%04x", p[i + 1]);
				else if (u)
					strbuf_add(sb, p + i, u);
				else
					strbuf_addstr(sb, "\xef\xbf\xbd");
				i += u ? u : 1;
				continue;
			}
		}
		i++;
	}
	strbuf_addch(sb, '"');
}

/* Escapes s[0..len) (at most max bytes of it) into out, which has room for
 * max * 4 + 4 bytes: returns the length written. */
static size_t excerpt(char *out, const char *s, size_t len, size_t max)
{
	static const char hx[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, o = 0;
	while (i < len) {
		unsigned char c = p[i];
		size_t u = c >= 0x80 ? utf8_len(p + i, len - i) : 0;
		size_t take = u ? u : 1;
		if (i + take > max)
			break;
		if (u) {
			memcpy(out + o, p + i, u);
			o += u;
		} else if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			switch (c) {
			case '\\': out[o++] = '\\'; break;
			case '\n': out[o++] = 'n'; break;
			case '\t': out[o++] = 't'; break;
			case '\r': out[o++] = 'r'; break;
			default:
				out[o++] = 'x';
				out[o++] = hx[c >> 4];
				out[o++] = hx[c & 15];
			}
		}
		i += take;
	}
	if (i < len) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return o;
}

void strbuf_add_excerpt(struct strbuf *sb, const char *s, size_t len, size_t max)
{
	if (max > (SIZE_MAX - 4) / 4)
		max = (SIZE_MAX - 4) / 4;
	if (max > len)
		max = len;
	must_grow(sb, max * 4 + 4);
	sb->len += excerpt(sb->buf + sb->len, s, len, max);
}

const char *tally_excerpt(char *out, const char *s)
{
	if (!s)
		s = "";
	excerpt(out, s, strnlen(s, TALLY_EXCERPT_MAX + 1), TALLY_EXCERPT_MAX);
	return out;
}

void tally_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (*r == '\\' && r[1]) {
			char c = r[1];
			char o = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == '\\' ? '\\' : 0;
			if (o) {
				*w++ = o;
				r++;
				continue;
			}
		}
		*w++ = *r;
	}
	*w = '\0';
}

char *strbuf_detach(struct strbuf *sb)
{
	char *r = sb->buf ? sb->buf : xstrdup("");
	strbuf_init(sb);
	return r;
}

int strbuf_read_file(struct strbuf *sb, const char *path, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tally_seterr(-errno, "cannot open '%s': %s", path, strerror(errno));
	int r = tally_read_fd(sb, fd, path, max);
	close(fd);
	return r;
}

/* ---- hash index ---- */

uint32_t tally_hidx_get(const struct tally_hidx *h, uint64_t hash, const void *key,
			tally_hidx_eq eq, const void *ctx)
{
	if (!h->mask)
		return TALLY_HIDX_NONE;
	for (size_t i = hash & h->mask;; i = (i + 1) & h->mask) {
		const struct tally_hslot *s = &h->slots[i];
		if (!s->idx1)
			return TALLY_HIDX_NONE;
		if (s->hash == hash && eq(ctx, s->idx1 - 1, key))
			return s->idx1 - 1;
	}
}

static void hidx_insert(struct tally_hslot *slots, size_t mask, uint64_t hash, uint32_t idx1)
{
	size_t i = hash & mask;
	while (slots[i].idx1)
		i = (i + 1) & mask;
	slots[i].hash = hash;
	slots[i].idx1 = idx1;
}

void tally_hidx_put(struct tally_hidx *h, uint64_t hash, uint32_t idx)
{
	/* keep the load below 1/2: probes stay short on the record hot path */
	if ((h->count + 1) * 2 > h->mask + 1 || !h->mask) {
		size_t cap = h->mask ? (h->mask + 1) * 2 : 64;
		struct tally_hslot *ns = xcalloc(cap, sizeof(*ns));
		for (size_t i = 0; h->mask && i <= h->mask; i++)
			if (h->slots[i].idx1)
				hidx_insert(ns, cap - 1, h->slots[i].hash, h->slots[i].idx1);
		free(h->slots);
		h->slots = ns;
		h->mask = cap - 1;
	}
	hidx_insert(h->slots, h->mask, hash, idx + 1);
	h->count++;
}

void tally_hidx_release(struct tally_hidx *h)
{
	free(h->slots);
	h->slots = NULL;
	h->mask = h->count = 0;
}

uint64_t tally_hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *c = p;
	uint64_t h = seed ^ 0x9e3779b97f4a7c15ULL;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, c, 8);
		h = tally_hash_u64(h ^ w);
		c += 8;
		n -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, c, n);
	return tally_hash_u64(h ^ w ^ ((uint64_t)n << 56));
}

/* ---- parsers ---- */

int tally_parse_u64(const char *s, const char *what, uint64_t min, uint64_t max, uint64_t *out)
{
	char q[TALLY_EXCERPT_SIZE];
	char *end;
	if (!s || !*s || !isdigit((unsigned char)*s))
		goto bad;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end)
		goto bad;
	if (errno || v < min || v > max)
		return tally_seterr(-EINVAL, "invalid %s '%s': must be between %llu and %llu", what, tally_excerpt(q, s),
				    (unsigned long long)min, (unsigned long long)max);
	*out = v;
	return 0;
bad:
	return tally_seterr(-EINVAL, "invalid %s '%s': expected a whole number from %llu to %llu", what,
			    tally_excerpt(q, s), (unsigned long long)min, (unsigned long long)max);
}

/* v with at most three decimals, no trailing zeros and no exponent (as
 * tally_parse_duration reads it back), then unit. */
static void fixed3(char *buf, size_t n, double v, const char *unit)
{
	snprintf(buf, n, "%.3f", v);
	char *e = buf + strlen(buf);
	while (e > buf && e[-1] == '0')
		*--e = '\0';
	if (e > buf && e[-1] == '.')
		*--e = '\0';
	snprintf(e, n - (size_t)(e - buf), "%s", unit);
}

const char *tally_format_duration(double seconds, char *buf, size_t n)
{
	double r = seconds < 0 ? 0 : seconds;
	if (r > 0 && r < 1) {
		fixed3(buf, n, r * 1000, "ms");
	} else if (r >= 1e15) {
		snprintf(buf, n, "%.0fs", r);
	} else if (r != (double)(uint64_t)r) {
		fixed3(buf, n, r, "s");
	} else {
		/* whole seconds: in the largest unit that holds them whole */
		uint64_t v = (uint64_t)r;
		if (v && v % 86400 == 0)
			snprintf(buf, n, "%" PRIu64 "d", v / 86400);
		else if (v && v % 3600 == 0)
			snprintf(buf, n, "%" PRIu64 "h", v / 3600);
		else if (v && v % 60 == 0)
			snprintf(buf, n, "%" PRIu64 "m", v / 60);
		else
			snprintf(buf, n, "%" PRIu64 "s", v);
	}
	return buf;
}

int tally_parse_duration(const char *s, const char *what, double *seconds)
{
	char *end;
	if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '.'))
		goto bad;
	/* plain decimals only: strtod would also take 0x10 and 1e3 */
	for (const char *c = s; *c && !isalpha((unsigned char)*c) && *c != '-'; c++)
		if (!isdigit((unsigned char)*c) && *c != '.')
			goto bad;
	if (strpbrk(s, "xXeE") && strcspn(s, "xXeE") < strspn(s, "0123456789."))
		goto bad;
	errno = 0;
	double v = strtod(s, &end);
	if (end > s + strspn(s, "0123456789."))
		goto bad;
	if (!isfinite(v) || v < 0)
		goto bad;
	if (!strcmp(end, "") || !strcmp(end, "s"))
		;
	else if (!strcmp(end, "ms"))
		v /= 1000;
	else if (!strcmp(end, "m"))
		v *= 60;
	else if (!strcmp(end, "h"))
		v *= 3600;
	else if (!strcmp(end, "d"))
		v *= 86400;
	else
		goto bad;
	/* after the unit: 1e308 days is finite text but no finite time */
	if (!(v > 0 && v <= TALLY_DURATION_MAX))
		goto bad;
	*seconds = v;
	return 0;
bad:;
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(-EINVAL, "invalid %s '%s': expected a duration such as 1.5, 30s, 5m or 2h, more than 0 and at most %.0fd (100 years)",
			    what, tally_excerpt(q, s), TALLY_DURATION_MAX / 86400);
}

int tally_parse_cpulist(const char *s, int ncpus, bool *set)
{
	memset(set, 0, (size_t)ncpus * sizeof(*set));
	if (!strcmp(s, "all")) {
		for (int i = 0; i < ncpus; i++)
			set[i] = true;
		return 0;
	}
	char q[TALLY_EXCERPT_SIZE];
	const char *p = s;
	if (!*p)
		goto bad;
	while (*p) {
		char *end;
		if (!isdigit((unsigned char)*p))
			goto bad;
		const char *na = p, *nb = p;
		errno = 0;
		long a = strtol(p, &end, 10), b = a;
		bool huge = errno == ERANGE;
		p = end;
		if (*p == '-') {
			p++;
			if (!isdigit((unsigned char)*p))
				goto bad;
			nb = p;
			errno = 0;
			b = strtol(p, &end, 10);
			huge = huge || errno == ERANGE;
			p = end;
		}
		if (a > b && !huge)
			goto bad;
		if (huge || b >= ncpus) {
			/* the number as written: strtol's LONG_MAX is not what was asked */
			const char *n = a >= ncpus ? na : nb;
			return tally_seterr(-EINVAL, "invalid CPU list '%s': CPU %.*s does not exist (this machine has CPUs 0-%d)",
					    tally_excerpt(q, s), (int)strspn(n, "0123456789") > 24 ? 24 : (int)strspn(n, "0123456789"),
					    n, ncpus - 1);
		}
		for (long i = a; i <= b; i++)
			set[i] = true;
		if (*p == ',' && p[1])
			p++;
		else if (*p)
			goto bad;
	}
	return 0;
bad:
	return tally_seterr(-EINVAL, "invalid CPU list '%s': expected numbers and ranges such as 0,2-3 (CPUs 0-%d)",
			    tally_excerpt(q, s), ncpus - 1);
}

int tally_parse_intlist(const char *s, const char *what, int **out, size_t *n)
{
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	const char *p = s;
	if (!*p)
		goto bad;
	while (*p) {
		char *end;
		if (!isdigit((unsigned char)*p))
			goto bad;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (errno || v <= 0 || v > INT_MAX)
			goto bad;
		GROW(*out, cap, *n + 1);
		(*out)[(*n)++] = (int)v;
		p = end;
		if (*p == ',' && p[1])
			p++;
		else if (*p)
			goto bad;
	}
	return 0;
bad:
	free(*out);
	*out = NULL;
	*n = 0;
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(-EINVAL, "invalid %s '%s': expected numbers from 1 to %d separated by commas", what,
			    tally_excerpt(q, s), INT_MAX);
}

size_t tally_partition(size_t n, bool (*before)(const void *ctx, size_t i), const void *ctx)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (before(ctx, mid))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t tally_upper_u64(const void *base, size_t n, size_t stride, size_t off, uint64_t key)
{
	const unsigned char *b = base;
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t v;
		memcpy(&v, b + mid * stride + off, sizeof(v));
		if (v <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void tally_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

int tally_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int tally_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- files ---- */

static int write_all(int fd, const void *data, size_t len)
{
	return tally_write_all(fd, data, len);
}

/* Whether path is by its name one of this process's descriptors:
 * /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N (links the system
 * keeps in directories of its own, the only links an output follows). */
static bool fd_name(const char *path)
{
	if (!strcmp(path, "/dev/stdout") || !strcmp(path, "/dev/stderr"))
		return true;
	static const char *const dirs[] = { "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		size_t n = strlen(dirs[i]);
		if (!strncmp(path, dirs[i], n) && path[n] && strspn(path + n, "0123456789") == strlen(path + n))
			return true;
	}
	return false;
}

static bool stream_mode(mode_t m)
{
	return S_ISCHR(m) || S_ISFIFO(m) || S_ISSOCK(m);
}

bool tally_path_is_stream(const char *path)
{
	struct stat st;
	/* a descriptor the shell set up (-o /dev/stdout > FILE): written through, not replaced */
	if (fd_name(path))
		return stat(path, &st) == 0 && (stream_mode(st.st_mode) || S_ISREG(st.st_mode));
	/* anything else as it is: a link (even to a device) is replaced, never followed */
	return lstat(path, &st) == 0 && stream_mode(st.st_mode);
}

int tally_open_stream(const char *path)
{
	bool fdn = fd_name(path);
	/* appended: a file behind /dev/stdout is written after what is there, as by the shell */
	int fd = open(path, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC | (fdn ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return tally_seterr(-errno, "cannot write '%s': %s", path, strerror(errno));
	/* checked on the descriptor: a name swapped after it was looked at (a
	 * FIFO in /tmp replaced by a file) is never written through */
	struct stat st;
	if (fstat(fd, &st) < 0 || !(stream_mode(st.st_mode) || (fdn && S_ISREG(st.st_mode)))) {
		close(fd);
		return tally_seterr(-EAGAIN, "cannot write '%s': it changed while it was opened (write it again)", path);
	}
	return fd;
}

/* A device, a pipe or a socket at path: written into, never replaced. */

static int write_stream(const char *path, const void *data, size_t len)
{
	int fd = tally_open_stream(path);
	if (fd < 0)
		return fd;
	int e = -write_all(fd, data, len);
	if (close(fd) < 0 && !e && errno != EINTR)
		e = errno;
	if (e)
		return tally_seterr(-e, "cannot write '%s': %s", path, strerror(e));
	return 0;
}

static int write_atomic(const char *path, const void *data, size_t len, mode_t mode, bool umasked)
{
	if (!*path)
		return tally_seterr(-EINVAL, "cannot write a file with an empty name");
	struct stat st;
	if (tally_path_is_stream(path))
		return write_stream(path, data, len);
	if (lstat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return tally_seterr(-EISDIR, "cannot write '%s': it is a directory", path);
		/* the user chose the mode of a file of theirs: the new one keeps it */
		if (S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
			mode = st.st_mode & 07777;
			umasked = false;
		}
	}
	if (umasked) {
		mode_t um = umask(0);
		umask(um);
		mode &= ~um;
	}
	/* an unpredictable name, created exclusively (O_CREAT|O_EXCL: a planted
	 * symbolic link or file is never opened), mode 0600 until it is complete */
	struct strbuf tmp = STRBUF_INIT;
	strbuf_addf(&tmp, "%s.tmp-XXXXXX", path);
	int fd = mkostemp(tmp.buf, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		strbuf_release(&tmp);
		char *dir = tally_dirname(path);
		struct stat ds;
		int r;
		if (e == ENOENT && stat(dir, &ds) == 0 && S_ISDIR(ds.st_mode))
			/* no such file, in a directory that is there: /proc, /sys */
			r = tally_seterr(-e, "cannot write '%s': directory '%s' takes no new files (a virtual file system such as /proc: write elsewhere)",
					 path, dir);
		else
			r = tally_seterr(-e, "cannot write '%s': %s%s", path, strerror(e),
					 e == ENOSPC || e == EDQUOT ? " (free some space)" : "");
		free(dir);
		return r;
	}
	int e = -write_all(fd, data, len);
	if (!e && mode != 0600 && fchmod(fd, mode) < 0)
		e = errno;
	if (!e && fsync(fd) < 0)
		e = errno;
	if (close(fd) < 0 && !e)
		e = errno;
	/* rename replaces path itself, never what a link at path points to */
	if (!e && rename(tmp.buf, path) < 0)
		e = errno;
	if (e)
		unlink(tmp.buf);
	strbuf_release(&tmp);
	if (e)
		return tally_seterr(-e, "cannot write '%s': %s%s", path, strerror(e),
				    e == ENOSPC || e == EDQUOT ? " (free some space)" : "");
	return 0;
}

int tally_write_file_atomic(const char *path, const void *data, size_t len)
{
	return write_atomic(path, data, len, 0600, false);
}

int tally_write_file_atomic_mode(const char *path, const void *data, size_t len, unsigned mode)
{
	return write_atomic(path, data, len, (mode_t)mode & 07777, true);
}

/* name (relative to dfd) and everything under it, through directory fds. */
static int remove_at(int dfd, const char *name)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	int ret = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = remove_at(dirfd(d), de->d_name);
		if (r && !ret)
			ret = r;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && !ret)
		ret = -errno;
	return ret;
}

int tally_remove_tree(const char *path)
{
	return remove_at(AT_FDCWD, path);
}

const char *tally_file_kind(unsigned mode)
{
	mode_t m = (mode_t)mode;
	return S_ISREG(m) ? "a regular file" : S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" :
	       S_ISLNK(m) ? "a symbolic link" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : "of an unknown type";
}

static int not_regular(const char *path, mode_t m)
{
	return tally_seterr(S_ISDIR(m) ? -EISDIR : S_ISLNK(m) ? -ELOOP : -EINVAL, "'%s' is %s, not a regular file", path,
			    tally_file_kind(m));
}

int tally_open_regular(int dirfd, const char *path, int flags, uint64_t max_size, struct stat *out)
{
	bool follow = flags & TALLY_OPEN_FOLLOW;
	struct stat st;
	/* what it is before it is opened: a device is never opened (a watchdog
	 * starts counting when it is), a FIFO never waited on */
	if (fstatat(dirfd, path, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
		return tally_seterr(-errno, "cannot open '%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return not_regular(path, st.st_mode);
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow ? 0 : O_NOFOLLOW));
	if (fd < 0) {
		if (errno == ELOOP && !follow)
			return not_regular(path, S_IFLNK);
		return tally_seterr(-errno, "cannot open '%s': %s", path, strerror(errno));
	}
	/* and what was opened: it may have been swapped since the look */
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return tally_seterr(-e, "cannot read '%s': %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return not_regular(path, st.st_mode);
	}
	if (max_size && (uint64_t)st.st_size > max_size) {
		char m[32];
		tally_format_size(max_size, m, sizeof(m));
		close(fd);
		return tally_seterr(-EFBIG, "'%s' is larger than %s", path, m);
	}
	/* the non-blocking open was for the open only */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	if (out)
		*out = st;
	return fd;
}

int tally_read_fd(struct strbuf *sb, int fd, const char *what, uint64_t max)
{
	size_t start = sb->len;
	for (;;) {
		if (sb->alloc - sb->len < 2 && strbuf_grow(sb, 65536)) {
			if (sb->buf)
				sb->buf[sb->len] = '\0';
			return tally_seterr(-ENOMEM, "cannot read '%s': out of memory", what);
		}
		ssize_t n = read(fd, sb->buf + sb->len, sb->alloc - sb->len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			sb->buf[sb->len] = '\0';
			return tally_seterr(-e, "cannot read '%s': %s", what, strerror(e));
		}
		sb->buf[sb->len + (size_t)n] = '\0';
		if (n == 0)
			return 0;
		sb->len += (size_t)n;
		if (max && sb->len - start > max) {
			char m[32];
			tally_format_size(max, m, sizeof(m));
			return tally_seterr(-EFBIG, "'%s' is larger than %s", what, m);
		}
	}
}

int tally_read_regular(struct strbuf *sb, int dirfd, const char *path, int flags, uint64_t max_size)
{
	struct stat st;
	int fd = tally_open_regular(dirfd, path, flags, max_size, &st);
	if (fd < 0)
		return fd;
	/* one allocation for the whole file (it may still grow: the bound holds) */
	if ((uint64_t)st.st_size >= SIZE_MAX || strbuf_grow(sb, (size_t)st.st_size + 1)) {
		close(fd);
		return tally_seterr(-ENOMEM, "cannot read '%s': out of memory for its %" PRIu64 " bytes", path,
				    (uint64_t)st.st_size);
	}
	int r = tally_read_fd(sb, fd, path, max_size);
	close(fd);
	return r;
}

double tally_now_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double tally_now_wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void tally_format_utc(double wall, char *buf, size_t n)
{
	struct tm tm;
	/* years 0 to 9999 only: a time_t cast of anything else is undefined or unprintable */
	if (!(wall >= -62167219200.0 && wall < 253402300800.0)) {
		snprintf(buf, n, "(no valid time)");
		return;
	}
	time_t t = (time_t)wall;
	if (!gmtime_r(&t, &tm)) {
		snprintf(buf, n, "(no valid time)");
		return;
	}
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char *tally_basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

char *tally_dirname(const char *path)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/') /* trailing slashes */
		n--;
	while (n && path[n - 1] != '/') /* the last component */
		n--;
	if (!n)
		return xstrdup(".");
	while (n > 1 && path[n - 1] == '/') /* the slashes before it */
		n--;
	return xstrndup(path, n);
}

int tally_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t k = write(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

int tally_parse_size(const char *s, const char *what, uint64_t min, uint64_t *out)
{
	char q[TALLY_EXCERPT_SIZE];
	const char *p = s;
	uint64_t v = 0;
	bool huge = false;
	if (!s || !isdigit((unsigned char)*p))
		goto bad;
	while (isdigit((unsigned char)*p)) {
		uint64_t d = (uint64_t)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			huge = true;
		else
			v = v * 10 + d;
		p++;
	}
	int shift = 0;
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 't': case 'T': shift = 40; p++; break;
	default: break;
	}
	if (shift && *p == 'i')
		p++;
	if (*p == 'B' || (*p == 'b' && !shift))
		p++;
	if (*p)
		goto bad;
	if (huge || v > (TALLY_SIZE_MAX >> shift))
		huge = true;
	else
		v <<= shift;
	if (huge || v < min) {
		char m[32], x[32];
		tally_format_size(min, m, sizeof(m));
		tally_format_size(TALLY_SIZE_MAX, x, sizeof(x));
		return tally_seterr(-EINVAL, "invalid %s '%s': must be at least %s and at most %s", what, tally_excerpt(q, s), m, x);
	}
	*out = v;
	return 0;
bad:
	return tally_seterr(-EINVAL, "invalid %s '%s': expected a size such as 512k, 64M or 2G", what, tally_excerpt(q, s));
}

void tally_format_size(uint64_t bytes, char *buf, size_t n)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024 && u + 1 < ARRAY_SIZE(unit)) {
		v /= 1024;
		u++;
	}
	if (!u)
		snprintf(buf, n, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, n, "%.1f %s", v, unit[u]);
}

/* ---- lines ---- */

void tally_lines_init(struct tally_lines *L, char *text, const char *what)
{
	L->cur = text;
	L->what = what;
	L->ln = 0;
}

char *tally_lines_next(struct tally_lines *L)
{
	char *s = L->cur;
	if (!s || !*s)
		return NULL;
	char *nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		L->cur = nl + 1;
	} else {
		L->cur = s + strlen(s);
	}
	L->ln++;
	return s;
}

int tally_lines_err(const struct tally_lines *L, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tally_seterr(code, "'%s' line %zu: %s", L->what, L->ln, msg);
}

bool tally_relpath_ok(const char *name, size_t max)
{
	size_t len = strlen(name);
	if (!len || len > max || name[0] == '/')
		return false;
	for (const char *c = name; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			return false;
	for (const char *p = name; *p;) {
		size_t l = strcspn(p, "/");
		if (!l || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += l;
		if (*p == '/' && !*++p)
			return false; /* a trailing slash */
	}
	return true;
}

void tally_last_line(const char *text, struct strbuf *sb)
{
	size_t len = text ? strlen(text) : 0;
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r' || text[len - 1] == '\t'))
		len--;
	size_t start = len;
	while (start && text[start - 1] != '\n')
		start--;
	strbuf_add_excerpt(sb, text + start, len - start, 200);
}

/* ---- work in parallel ---- */

struct par_job {
	void (*fn)(void *ctx, size_t i);
	void *ctx;
	size_t i;
};

static void *par_thread(void *arg)
{
	struct par_job *j = arg;
	j->fn(j->ctx, j->i);
	return NULL;
}

void tally_run_parallel(size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
	struct par_job *j = xcalloc(n + 1, sizeof(*j));
	pthread_t *t = xcalloc(n + 1, sizeof(*t));
	bool *made = xcalloc(n + 1, sizeof(bool));
	for (size_t i = 0; i < n; i++) {
		j[i] = (struct par_job){ fn, ctx, i };
		if (pthread_create(&t[i], NULL, par_thread, &j[i]) == 0)
			made[i] = true;
		else
			fn(ctx, i); /* no thread to be had: here, in turn */
	}
	for (size_t i = 0; i < n; i++)
		if (made[i])
			pthread_join(t[i], NULL);
	free(made);
	free(t);
	free(j);
}
