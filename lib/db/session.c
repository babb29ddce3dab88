/* The session file: its values checked as tally reads them (numbers, times,
 * choices), the format version and the counts it promises. */
#define _GNU_SOURCE
#include "tally/db.h"
#include "tally/util.h"
#include "db-private.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define DAMAGED TALLY_DB_DAMAGED

/* A plain decimal (digits, optionally a point and digits) with a finite value. */
static bool plain_decimal(const char *s, size_t n, double *out)
{
	size_t d = 0, i = 0;
	while (i < n && isdigit((unsigned char)s[i]))
		i++, d++;
	if (i < n && s[i] == '.')
		for (i++; i < n && isdigit((unsigned char)s[i]); i++)
			d++;
	if (!d || i != n || n > 64)
		return false;
	char b[65];
	memcpy(b, s, n);
	b[n] = '\0';
	double v = strtod(b, NULL);
	if (!isfinite(v))
		return false;
	if (out)
		*out = v;
	return true;
}

bool tally_db_utc_format(const char *s, const char *fmt, double *out)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(s, fmt, &tm);
	if (!end || *end)
		return false;
	/* strptime takes 2026-02-30 and 24:00:61: the time must give the text back */
	time_t t = timegm(&tm);
	struct tm chk;
	char back[32];
	if (t == (time_t)-1 || !gmtime_r(&t, &chk) || !strftime(back, sizeof(back), fmt, &chk) ||
	    strcmp(back, s))
		return false;
	if (out)
		*out = (double)t;
	return true;
}

bool tally_db_utc_time(const char *s, double *out)
{
	return s && strlen(s) == 20 && tally_db_utc_format(s, "%Y-%m-%dT%H:%M:%SZ", out);
}

/* Items of a comma-separated list, each checked by ok (a pointer and length). */
static bool each_item(const char *v, bool (*ok)(const char *s, size_t n))
{
	for (const char *p = v;;) {
		size_t n = strcspn(p, ",");
		if (!ok(p, n))
			return false;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

/* A sample period: the kernel's are 64-bit, tally asks for at most 2^62 (-c). */
static bool item_period(const char *s, size_t n)
{
	double v;
	return plain_decimal(s, n, &v) && v <= (double)(UINT64_MAX >> 2);
}

static bool item_u64(const char *s, size_t n)
{
	char b[24];
	uint64_t v;
	if (!n || n >= sizeof(b))
		return false;
	memcpy(b, s, n);
	b[n] = '\0';
	return tally_db_whole_u64(b, &v);
}

static bool item_unit(const char *s, size_t n)
{
	return (n == 2 && !strncmp(s, "ns", 2)) || (n == 6 && !strncmp(s, "events", 6));
}

static bool item_intervals(const char *s, size_t n)
{
	const char *a = memchr(s, '/', n);
	const char *b = a ? memchr(a + 1, '/', (size_t)(s + n - a - 1)) : NULL;
	return a && b && item_u64(s, (size_t)(a - s)) && item_u64(a + 1, (size_t)(b - a - 1)) &&
	       item_u64(b + 1, (size_t)(s + n - b - 1));
}

static bool item_event(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			/* printable ASCII: names are printed and matched as they are */
			return false;
	return true;
}

/* Whether a session value that tally reads as a number, a time or a choice
 * is one; *want says what it should be when it is not. */
static bool session_value_ok(const char *k, const char *v, const char **want)
{
	static const char *const counters[] = { "lost",
						"throttled",
						"dwarf-unwinds",
						"dwarf-stopped-early",
						"dwarf-joined-fp",
						"jit-untrusted",
						"max-stack",
						"stack-size",
						"images",
						"fp-repair-frames" };
	uint64_t u;
	for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
		if (!strcmp(k, counters[i])) {
			*want = "a count (a whole number below 2^64)";
			return tally_db_whole_u64(v, &u);
		}
	if (!strcmp(k, "start-time") || !strcmp(k, "stop-time")) {
		*want = "a UTC time such as 2026-11-21T13:07:00Z";
		return tally_db_utc_time(v, NULL);
	}
	if (!strcmp(k, "duration")) {
		double d;
		*want = "seconds, a decimal number of at most 100 years";
		return plain_decimal(v, strlen(v), &d) && d <= TALLY_DURATION_MAX;
	}
	if (!strcmp(k, "weight-total")) {
		*want = "counts (whole numbers below 2^64) separated by commas";
		return each_item(v, item_u64);
	}
	if (!strcmp(k, "weight-unit")) {
		*want = "'ns' or 'events' per event, separated by commas";
		return each_item(v, item_unit);
	}
	if (!strcmp(k, "period-mean") || !strcmp(k, "period-min") || !strcmp(k, "period-max")) {
		*want = "decimal numbers up to 2^62 separated by commas";
		return each_item(v, item_period);
	}
	if (!strcmp(k, "interval-p10-p50-p90")) {
		*want = "A/B/C counts separated by commas";
		return each_item(v, item_intervals);
	}
	if (!strcmp(k, "events")) {
		*want = "event names separated by commas";
		return each_item(v, item_event);
	}
	if (!strcmp(k, "per-pid")) {
		*want = "yes or no";
		return !strcmp(v, "yes") || !strcmp(v, "no");
	}
	if (!strcmp(k, "call-graph")) {
		*want = "none, fp or dwarf";
		return !strcmp(v, "none") || !strcmp(v, "fp") || !strcmp(v, "dwarf");
	}
	if (!strcmp(k, "dwarf-stop-reasons")) {
		unsigned long long a, b, c;
		int n = -1;
		*want = "'stack copy too small N, no CFI or unreadable frame N, depth limit N'";
		return sscanf(v,
			      "stack copy too small %llu, no CFI or unreadable frame %llu, depth limit %llu%n",
			      &a, &b, &c, &n) == 3 &&
		       n == (int)strlen(v) && !strchr(v, '-');
	}
	if (!strcmp(k, "fp-repair-stops")) {
		uint64_t n[TALLY_FP_NSTOPS_SAID];
		*want = "'no CFI N, stack copy too small N, chain not rejoined N, depth limit N'";
		return tally_fp_stops_parse(v, n);
	}
	if (!strcmp(k, "daemon-pid")) {
		int pid;
		*want = "a process id";
		return tally_db_parse_pid(v, &pid) && pid > 0;
	}
	return true;
}

bool tally_fp_stops_parse(const char *v, uint64_t n[TALLY_FP_NSTOPS_SAID])
{
	static const char *const words[TALLY_FP_NSTOPS_SAID] = {
		"no CFI ", ", stack copy too small ", ", chain not rejoined ", ", depth limit "
	};
	for (size_t i = 0; i < TALLY_FP_NSTOPS_SAID; i++) {
		size_t l = strlen(words[i]);
		if (strncmp(v, words[i], l))
			return false;
		v += l;
		if (!tally_db_parse_dec(&v, &n[i]))
			return false;
	}
	return !*v;
}

/* ---- session ---- */

static int parse_session(struct tally_db *db, char *text, const char *what)
{
	char *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	int r;
	char q[TALLY_EXCERPT_SIZE];
	while ((line = tally_lines_next_data(&L))) {
		char *k, *v;
		if ((r = tally_parse_header_line(line, L.what, L.ln, &k, &v)))
			return r;
		const char *want = NULL;
		if (tally_meta_get(&db->session, k))
			r = tally_lines_err(&L, -EINVAL, "'%s' is given twice (%s)", k, DAMAGED);
		else if (!session_value_ok(k, v, &want))
			r = tally_lines_err(&L, -EINVAL, "'%s' must be %s, not '%s' (%s)", k, want,
					 tally_excerpt(q, v), DAMAGED);
		if (r) {
			free(k);
			free(v);
			return r;
		}
		GROW(db->session.kv, db->session.alloc, db->session.n + 1);
		db->session.kv[db->session.n++] = (struct tally_kv){ k, v };
	}
	const char *fv = tally_meta_get(&db->session, "format-version");
	if (!fv)
		return tally_seterr(-EINVAL, "'%s' has no format-version (%s)", what, DAMAGED);
	if (strcmp(fv, "1") && strcmp(fv, "2") && strcmp(fv, "3") && strcmp(fv, "4"))
		return tally_seterr(
			-EINVAL,
			"'%s' has format-version %s, and this tally reads versions %d to %d (use a newer tally)",
			what, tally_excerpt(q, fv), TALLY_FORMAT_VERSION,
			TALLY_FORMAT_VERSION_BINARY_STACKS);
	const char *ev = tally_meta_get(&db->session, "events");
	if (!ev || !*ev)
		return tally_seterr(-EINVAL, "'%s' names no events (%s)", what, DAMAGED);
	db->events = tally_db_split_list(ev, &db->nevents);
	for (int i = 0; i < db->nevents; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(db->events[i], db->events[j]))
				return tally_seterr(
					-EINVAL, "'%s': event '%s' is named twice in 'events' (%s)",
					what, tally_excerpt(q, db->events[i]), DAMAGED);
	db->samples = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	const char *s = tally_meta_get(&db->session, "samples");
	if (!s || tally_db_parse_counts(s, db->nevents, db->samples))
		return tally_seterr(-EINVAL, "'%s': 'samples' must hold one count per event (%s)",
				    what, DAMAGED);
	const char *l = tally_meta_get(&db->session, "lost");
	const char *t = tally_meta_get(&db->session, "throttled");
	if ((l && tally_db_parse_counts(l, 1, &db->lost)) ||
	    (t && tally_db_parse_counts(t, 1, &db->throttled)))
		return tally_seterr(-EINVAL, "'%s': 'lost' and 'throttled' must be counts (%s)",
				    what, DAMAGED);
	db->has_weights = tally_db_weighted(db);
	if (db->has_weights) {
		/* the weights add up to weight-total, as the counts to samples */
		uint64_t *wt = xcalloc((size_t)db->nevents + 1, sizeof(uint64_t));
		int bad = tally_db_weight_totals(db, wt);
		free(wt);
		if (bad)
			return tally_seterr(
				-EINVAL,
				"'%s': 'weight-total' must hold one count per event in a database of format 3 or later (%s)",
				what, DAMAGED);
		const char *u = tally_meta_get(&db->session, "weight-unit");
		int nu = 0;
		char **units = u ? tally_db_split_list(u, &nu) : NULL;
		for (int i = 0; units && i < nu; i++)
			free(units[i]);
		free(units);
		if (nu != db->nevents)
			return tally_seterr(
				-EINVAL,
				"'%s': 'weight-unit' must name one unit per event in a database of format 3 or later (%s)",
				what, DAMAGED);
	}
	const char *pp = tally_meta_get(&db->session, "per-pid");
	db->per_pid = pp && !strcmp(pp, "yes");
	const char *cg = tally_meta_get(&db->session, "call-graph");
	db->has_stacks = cg && strcmp(cg, "none");
	return 0;
}

bool tally_db_labelled(const struct tally_db *db)
{
	const char *fv = tally_meta_get(&db->session, "format-version");
	return fv && (!strcmp(fv, "2") || !strcmp(fv, "3") || !strcmp(fv, "4"));
}

bool tally_db_weighted(const struct tally_db *db)
{
	const char *fv = tally_meta_get(&db->session, "format-version");
	return fv && (!strcmp(fv, "3") || !strcmp(fv, "4"));
}

bool tally_db_binary_stacks(const struct tally_db *db)
{
	const char *fv = tally_meta_get(&db->session, "format-version");
	return fv && !strcmp(fv, "4");
}

int tally_db_weight_totals(const struct tally_db *db, uint64_t *out)
{
	const char *v = tally_meta_get(&db->session, "weight-total");
	return v && tally_db_parse_counts(v, db->nevents, out) == 0 ? 0 : -1;
}

int tally_db_parse_session(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	return tally_db_parse_copy(db, buf, len, what, parse_session);
}

int tally_db_load_session(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	struct stat dst;
	if (stat(db->path, &dst) == 0 && !S_ISDIR(dst.st_mode))
		return tally_seterr(
			-ENOTDIR, "'%s' is not a tally database: it is %s, not a directory",
			db->path, S_ISREG(dst.st_mode) ? "a file" : tally_file_kind(dst.st_mode));
	int r = tally_db_read_text(sb, db->path, "session", path, true);
	if (r == 1) {
		struct stat st;
		if (stat(db->path, &st) < 0)
			return tally_seterr(
				-ENOENT,
				"no database at '%s' (record one with 'tally record -o %s -- COMMAND')",
				db->path, db->path);
		if (!S_ISDIR(st.st_mode))
			return tally_seterr(
				-ENOTDIR,
				"'%s' is not a tally database: it is a file, not a directory",
				db->path);
		return tally_seterr(
			-EINVAL,
			"'%s' is not a tally database: it has no 'session' file (record one with 'tally record -o %s')",
			db->path, db->path);
	}
	if (r)
		return r;
	return tally_db_parse_text(db, sb->buf, sb->len, path->buf, parse_session);
}

