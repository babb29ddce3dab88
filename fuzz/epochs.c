/* A daemon database's list of epochs (tally_epochs_list): directory names and
 * the start and stop times of their sessions. The input is lines of
 * 'NAME[<tab>START[<tab>STOP]]': each NAME becomes a directory of a fresh
 * daemon database in memory, with a session file holding 'start-time: START'
 * and 'stop-time: STOP' when given. Oracles: only well-formed epoch names are
 * listed, oldest first, none stops before it starts; the name for a new epoch
 * is well-formed and new. */
#include "fuzz.h"

#include "tally/epoch.h"

#include <math.h>

static int cmp_names(const char *a, const char *b)
{
	int c = strncmp(a, b, 12);
	if (c)
		return c;
	unsigned long x = a[12] == '-' ? strtoul(a + 13, NULL, 10) : 1,
		      y = b[12] == '-' ? strtoul(b + 13, NULL, 10) : 1;
	return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/db", fuzz_dir());
	tally_remove_tree(dir);
	if (mkdir(dir, 0700) < 0)
		abort();
	fuzz_write(dir, TALLY_DAEMON_MARKER, "", 0);
	char *text = fuzz_cstr(data, size);
	int made = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && made < 32;
	     l = strtok_r(NULL, "\n", &save)) {
		char *start = strchr(l, '\t'), *stop = NULL;
		if (start) {
			*start++ = '\0';
			stop = strchr(start, '\t');
			if (stop)
				*stop++ = '\0';
		}
		if (!*l || strchr(l, '/') || strlen(l) > 200)
			continue;
		char p[768];
		snprintf(p, sizeof(p), "%s/%s", dir, l);
		if (mkdir(p, 0700) < 0)
			continue;
		made++;
		if (start) {
			struct strbuf s = STRBUF_INIT;
			strbuf_addf(&s, "format-version: 1\nstart-time: %s\n", start);
			if (stop)
				strbuf_addf(&s, "stop-time: %s\n", stop);
			fuzz_write(p, "session", s.buf, s.len);
			strbuf_release(&s);
		}
	}
	free(text);

	FUZZ_CHECK(tally_db_is_daemon(dir), "the marker file is not seen");
	struct tally_epoch *e;
	size_t n;
	int r = tally_epochs_list(dir, &e, &n);
	FUZZ_CHECK(r == 0, "cannot list: %s", tally_errmsg());
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(tally_epoch_name_ok(e[i].name), "listed '%s'", e[i].name);
		FUZZ_CHECK(isfinite(e[i].start) && isfinite(e[i].stop) && e[i].stop >= e[i].start,
			   "'%s' spans %f to %f", e[i].name, e[i].start, e[i].stop);
		if (i)
			FUZZ_CHECK(cmp_names(e[i - 1].name, e[i].name) <= 0,
				   "'%s' listed before '%s'", e[i - 1].name, e[i].name);
	}
	/* the daemon names a new epoch by the time now: here the minute of the
	 * newest epoch, to meet the numbering of epochs begun in one minute */
	double when = 1.7e9;
	if (n) {
		char minute[13];
		memcpy(minute, e[n - 1].name, 12);
		minute[12] = '\0';
		FUZZ_CHECK(tally_parse_time(minute, "epoch", 0, &when) == 0,
			   "epoch '%s' has no time", e[n - 1].name);
	}
	char *nn = tally_epoch_new_name(dir, when);
	FUZZ_CHECK(tally_epoch_name_ok(nn), "new epoch name '%s'", nn);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(strcmp(nn, e[i].name), "new epoch name '%s' is taken", nn);
	free(nn);
	tally_epochs_free(e, n);
	return 0;
}
