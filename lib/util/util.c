/* Allocation and error reporting used across tally; the rest of lib/util is one file a purpose. */
#define _GNU_SOURCE
#include "tally/util.h"
#include "lib/util/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* per thread: a job drives its hosts from threads of its own */
static _Thread_local char errbuf[1024];
static void (*oom_handler)(size_t n);

void tally_set_oom_handler(void (*fn)(size_t n))
{
	oom_handler = fn;
}

/* The core never prints or exits: the program's handler does (tally.c sets
 * one that says so and exits 1); without one, there is no way on. */
_Noreturn void util_oom(size_t n)
{
	if (oom_handler)
		oom_handler(n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		util_oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		util_oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		util_oom(n);
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		util_oom(strlen(s));
	return p;
}

char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		util_oom(n);
	return p;
}

/* The capacity to grow to: doubling from have (min when empty) until want,
 * want itself when doubling would pass max. 0 when want is over max. */
size_t util_grown_size(size_t have, size_t want, size_t min, size_t max)
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
	size_t n = util_grown_size(*alloc, want, 16, sz ? PTRDIFF_MAX / sz : PTRDIFF_MAX);
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
		util_oom(want > SIZE_MAX / (sz ? sz : 1) ? SIZE_MAX : want * (sz ? sz : 1));
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
