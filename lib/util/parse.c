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
