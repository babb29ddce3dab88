/* Parsers of numbers, durations and sizes given on command lines and in files. */
#define _GNU_SOURCE
#include "tally/util.h"
#include "lib/util/internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		return tally_seterr(-EINVAL, "invalid %s '%s': must be between %llu and %llu", what,
				    tally_excerpt(q, s), (unsigned long long)min,
				    (unsigned long long)max);
	*out = v;
	return 0;
bad:
	return tally_seterr(-EINVAL, "invalid %s '%s': expected a whole number from %llu to %llu",
			    what, tally_excerpt(q, s), (unsigned long long)min,
			    (unsigned long long)max);
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
	return tally_seterr(
		-EINVAL,
		"invalid %s '%s': expected a duration such as 1.5, 30s, 5m or 2h, more than 0 and at most %.0fd (100 years)",
		what, tally_excerpt(q, s), TALLY_DURATION_MAX / 86400);
}

/* The numbers of a list such as "0,2-3" (no empty item, no comma at either
 * end), each read by item from *p (a digit there) and *p moved past it: 0,
 * 1 when the list is not one, or item's error (negative, its message set). */
static int each_listed(const char *s, int (*item)(const char **p, void *ctx), void *ctx)
{
	const char *p = s;
	if (!*p)
		return 1;
	while (*p) {
		if (!isdigit((unsigned char)*p))
			return 1;
		int r = item(&p, ctx);
		if (r)
			return r;
		if (*p == ',' && p[1])
			p++;
		else if (*p)
			return 1;
	}
	return 0;
}

struct cpulist {
	const char *s;
	int ncpus;
	bool *set;
};

/* A CPU or a range of them, A-B. */
static int cpu_item(const char **pp, void *ctx)
{
	const struct cpulist *c = ctx;
	const char *p = *pp;
	char *end;
	const char *na = p, *nb = p;
	errno = 0;
	long a = strtol(p, &end, 10), b = a;
	bool huge = errno == ERANGE;
	p = end;
	if (*p == '-') {
		p++;
		if (!isdigit((unsigned char)*p))
			return 1;
		nb = p;
		errno = 0;
		b = strtol(p, &end, 10);
		huge = huge || errno == ERANGE;
		p = end;
	}
	if (a > b && !huge)
		return 1;
	if (huge || b >= c->ncpus) {
		/* the number as written: strtol's LONG_MAX is not what was asked */
		char q[TALLY_EXCERPT_SIZE];
		const char *n = a >= c->ncpus ? na : nb;
		int digits = (int)strspn(n, "0123456789");
		return tally_seterr(
			-EINVAL,
			"invalid CPU list '%s': CPU %.*s does not exist (this machine has CPUs 0-%d)",
			tally_excerpt(q, c->s), digits > 24 ? 24 : digits, n, c->ncpus - 1);
	}
	for (long i = a; i <= b; i++)
		c->set[i] = true;
	*pp = p;
	return 0;
}

int tally_parse_cpulist(const char *s, int ncpus, bool *set)
{
	memset(set, 0, (size_t)ncpus * sizeof(*set));
	if (!strcmp(s, "all")) {
		for (int i = 0; i < ncpus; i++)
			set[i] = true;
		return 0;
	}
	struct cpulist c = { s, ncpus, set };
	int r = each_listed(s, cpu_item, &c);
	if (r <= 0)
		return r;
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(
		-EINVAL,
		"invalid CPU list '%s': expected numbers and ranges such as 0,2-3 (CPUs 0-%d)",
		tally_excerpt(q, s), ncpus - 1);
}

struct intlist {
	int **out;
	size_t *n, cap;
};

/* A number from 1 to INT_MAX. */
static int int_item(const char **p, void *ctx)
{
	struct intlist *l = ctx;
	char *end;
	errno = 0;
	long v = strtol(*p, &end, 10);
	if (errno || v <= 0 || v > INT_MAX)
		return 1;
	GROW(*l->out, l->cap, *l->n + 1);
	(*l->out)[(*l->n)++] = (int)v;
	*p = end;
	return 0;
}

int tally_parse_intlist(const char *s, const char *what, int **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	struct intlist l = { out, n, 0 };
	if (!each_listed(s, int_item, &l))
		return 0;
	free(*out);
	*out = NULL;
	*n = 0;
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(-EINVAL,
			    "invalid %s '%s': expected numbers from 1 to %d separated by commas",
			    what, tally_excerpt(q, s), INT_MAX);
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

struct upper {
	const unsigned char *base;
	size_t stride, off;
	uint64_t key;
};

static bool at_or_below(const void *ctx, size_t i)
{
	const struct upper *u = ctx;
	uint64_t v;
	memcpy(&v, u->base + i * u->stride + u->off, sizeof(v));
	return v <= u->key;
}

size_t tally_upper_u64(const void *base, size_t n, size_t stride, size_t off, uint64_t key)
{
	struct upper u = { base, stride, off, key };
	return tally_partition(n, at_or_below, &u);
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
