/* strbuf: a growable string, as git has it, and its escapers. */
#define _GNU_SOURCE
#include "tally/util.h"
#include "lib/util/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	size_t n = util_grown_size(sb->alloc, want, 64, PTRDIFF_MAX);
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
		util_oom(extra > SIZE_MAX - 1 - sb->len ? SIZE_MAX : sb->len + extra + 1);
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

void strbuf_add_u64(struct strbuf *sb, uint64_t v)
{
	char t[20];
	size_t n = sizeof(t);
	do
		t[--n] = (char)('0' + v % 10);
	while ((v /= 10));
	strbuf_add(sb, t + n, sizeof(t) - n);
}

void strbuf_add_i64(struct strbuf *sb, int64_t v)
{
	if (v < 0) {
		strbuf_addch(sb, '-');
		strbuf_add_u64(sb, -(uint64_t)v);
	} else {
		strbuf_add_u64(sb, (uint64_t)v);
	}
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
size_t tally_utf8_seq(const unsigned char *s, size_t n, bool c1)
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
	return tally_utf8_seq(s, n, false);
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
		while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' &&
		       p[run] != '\\')
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
				size_t u = tally_utf8_seq(p + i, n - i, true);
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

int tally_hexval(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* \\ \n \t \r, and with hex \xHH (not \x00: a C string cannot hold it). */
static void unescape(char *s, bool hex)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (*r == '\\' && r[1]) {
			char c = r[1];
			char o = c == 'n'    ? '\n'
				 : c == 't'  ? '\t'
				 : c == 'r'  ? '\r'
				 : c == '\\' ? '\\'
					     : 0;
			if (o) {
				*w++ = o;
				r++;
				continue;
			}
			int hi, lo;
			if (hex && c == 'x' && (hi = tally_hexval((unsigned char)r[2])) >= 0 &&
			    (lo = tally_hexval((unsigned char)r[3])) >= 0 && (hi | lo)) {
				*w++ = (char)(hi << 4 | lo);
				r += 3;
				continue;
			}
		}
		*w++ = *r;
	}
	*w = '\0';
}

void tally_unescape(char *s)
{
	unescape(s, false);
}

void tally_unescape_bytes(char *s)
{
	unescape(s, true);
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
