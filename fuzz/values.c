/* The value parsers of the command line and the control protocol: whole
 * numbers (-F, -c, --top, ...), durations (--duration, --flush-interval,
 * --ctl-timeout, --keep, --epoch-every), sizes (--max-memory), CPU lists (-C,
 * ctl cpus), pid lists (-p), times (--since, --until) and epoch names
 * (--epoch). The first input byte chooses the parser (and its bounds), the
 * rest up to a NUL is the value. Oracles: an accepted value is in its range
 * and finite, and where there is a printed form, it parses back the same;
 * a refusal is a one-line error. */
#include "fuzz.h"

#include "tally/epoch.h"
#include "tally/sampling.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>

#define NOW 1.7e9 /* 2023-11-14: a fixed "now" for relative times */

static void one_u64(const char *s, unsigned sel)
{
	static const uint64_t bounds[][2] = {
		{ 0, UINT64_MAX }, { 1, 1000000 }, { 64, 65528 }, { 1, UINT64_MAX >> 2 }
	};
	const uint64_t *b = bounds[sel % 4];
	uint64_t v;
	if (tally_parse_u64(s, "value", b[0], b[1], &v)) {
		fuzz_check_errmsg();
		return;
	}
	FUZZ_CHECK(v >= b[0] && v <= b[1], "'%s' gave %" PRIu64 ", outside %" PRIu64 "-%" PRIu64, s,
		   v, b[0], b[1]);
	char back[32];
	snprintf(back, sizeof(back), "%" PRIu64, v);
	uint64_t w;
	FUZZ_CHECK(tally_parse_u64(back, "value", b[0], b[1], &w) == 0 && w == v,
		   "'%s' does not parse back", back);
}

static void one_duration(const char *s)
{
	double d;
	if (tally_parse_duration(s, "--duration", &d)) {
		fuzz_check_errmsg();
		return;
	}
	FUZZ_CHECK(fuzz_known("i7") || (isfinite(d) && d > 0),
		   "'%s' was accepted as a duration of %g s", s, d);
}

static void one_size(const char *s)
{
	uint64_t v;
	if (tally_parse_size(s, "--max-memory", 4096, &v)) {
		fuzz_check_errmsg();
		return;
	}
	FUZZ_CHECK(v >= 4096, "'%s' gave %" PRIu64 " bytes, below the minimum", s, v);
	char buf[32];
	tally_format_size(v, buf, sizeof(buf));
	FUZZ_CHECK(buf[0], "no printed form of %" PRIu64, v);
}

static void one_cpulist(const char *s, int ncpus)
{
	bool *set = xcalloc((size_t)ncpus + 1, sizeof(bool));
	if (tally_parse_cpulist(s, ncpus, set)) {
		fuzz_check_errmsg();
		free(set);
		return;
	}
	struct strbuf sb = STRBUF_INIT;
	tally_cpus_string(set, ncpus, &sb);
	if (sb.len) {
		bool *again = xcalloc((size_t)ncpus + 1, sizeof(bool));
		FUZZ_CHECK(tally_parse_cpulist(sb.buf, ncpus, again) == 0 &&
				   !memcmp(set, again, (size_t)ncpus),
			   "'%s' printed as '%s' parses differently", s, sb.buf);
		free(again);
	}
	strbuf_release(&sb);
	free(set);
}

static void one_intlist(const char *s)
{
	int *v;
	size_t n;
	if (tally_parse_intlist(s, "-p", &v, &n)) {
		fuzz_check_errmsg();
		FUZZ_CHECK(!v && !n, "a refused list kept its numbers");
		return;
	}
	FUZZ_CHECK(n > 0, "'%s': an empty list was accepted", s);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(v[i] > 0, "'%s' holds %d", s, v[i]);
	free(v);
}

/* A time a time_t holds (a cast of anything else is undefined: item 7). */
static bool time_ok(double t)
{
	return isfinite(t) && fabs(t) < 9.2e18;
}

static void one_time(const char *s)
{
	double t;
	if (tally_parse_time(s, "--since", NOW, &t)) {
		fuzz_check_errmsg();
		return;
	}
	FUZZ_CHECK(fuzz_known("i7") || time_ok(t), "'%s' was accepted as the time %g", s, t);
	char buf[64];
	if (time_ok(t))
		tally_format_utc(t, buf, sizeof(buf));
}

static void one_epoch(const char *s)
{
	struct tally_db_select sel;
	memset(&sel, 0, sizeof(sel));
	bool ok = tally_epoch_name_ok(s);
	int r = tally_db_select_opt(&sel, TALLY_OPT_EPOCH, s);
	FUZZ_CHECK(ok ? r == 1 : r == -EINVAL, "'%s': name_ok %d, --epoch %d", s, ok, r);
	if (!ok) {
		fuzz_check_errmsg();
		return;
	}
	char minute[13];
	memcpy(minute, s, 12);
	minute[12] = '\0';
	double t;
	FUZZ_CHECK(tally_parse_time(minute, "--since", NOW, &t) == 0,
		   "epoch '%s': its minute '%s' is not a time", s, minute);
}

/* --since and --until together: "SINCE<tab>UNTIL" */
static void one_range(char *s)
{
	char *until = strchr(s, '\t');
	if (until)
		*until++ = '\0';
	struct tally_db_select sel;
	memset(&sel, 0, sizeof(sel));
	double t;
	if (fuzz_known("i7") &&
	    ((!tally_parse_time(s, "--since", NOW, &t) && !time_ok(t)) ||
	     (until && !tally_parse_time(until, "--until", NOW, &t) && !time_ok(t))))
		return;
	int r = tally_db_select_opt(&sel, TALLY_OPT_SINCE, s);
	if (r == 1 && until)
		r = tally_db_select_opt(&sel, TALLY_OPT_UNTIL, until);
	if (r != 1) {
		fuzz_check_errmsg();
		return;
	}
	FUZZ_CHECK(time_ok(sel.since) &&
			   (!sel.has_until || (time_ok(sel.until) && sel.since <= sel.until)),
		   "--since %g --until %g accepted", sel.since, sel.until);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	unsigned sel = data[0];
	char *s = fuzz_cstr(data + 1, size - 1);
	switch (sel % 8) {
	case 0: one_u64(s, sel / 8); break;
	case 1: one_duration(s); break;
	case 2: one_size(s); break;
	case 3: one_cpulist(s, 1 + (int)(sel / 8)); break;
	case 4: one_intlist(s); break;
	case 5: one_time(s); break;
	case 6: one_epoch(s); break;
	case 7: one_range(s); break;
	}
	free(s);
	return 0;
}
