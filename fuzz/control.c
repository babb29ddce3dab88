/* A tally job control file (docs/job.md) through tally_job_control_parse,
 * and its words through tally_job_split. Oracles: an error is one line naming
 * the file and a line of it (or the whole file: no run); what is accepted has
 * steps in line order, profiler names and tags that are safe directory names
 * (no '/', not starting with '.', tags unique and not the job's own files),
 * commands and tests with a first word, iterations >= 1 and a finite time
 * limit. Words round-trip: each word of the first line,
 * put back in single quotes, splits again into the same words. */
#include "fuzz.h"

#include <math.h>

#include "tally/job.h"

static bool safe_name(const char *s)
{
	return *s && *s != '.' && !strchr(s, '/') &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.+") ==
		       strlen(s);
}

static void words_round_trip(const char *line)
{
	char **w;
	size_t n;
	if (tally_job_split(line, &w, &n)) {
		fuzz_check_errmsg();
		return;
	}
	struct strbuf q = STRBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		strbuf_addstr(&q, i ? " '" : "'");
		for (const char *p = w[i]; *p; p++)
			if (*p == '\'')
				strbuf_addstr(&q, "'\\''");
			else
				strbuf_addch(&q, *p);
		strbuf_addch(&q, '\'');
	}
	char **w2;
	size_t n2;
	FUZZ_CHECK(!tally_job_split(q.buf ? q.buf : "", &w2, &n2),
		   "the quoted words do not split again: %s", tally_errmsg());
	FUZZ_CHECK(n2 == n, "%zu words quoted gave %zu", n, n2);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(!strcmp(w[i], w2[i]), "word %zu '%s' came back as '%s'", i, w[i], w2[i]);
	tally_job_argv_free(w2);
	tally_job_argv_free(w);
	strbuf_release(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	/* the first line's words */
	char *nl = strchr(text, '\n');
	char *first = nl ? xstrndup(text, (size_t)(nl - text)) : xstrdup(text);
	words_round_trip(first);
	free(first);

	struct tally_job_control c;
	int r = tally_job_control_parse(&c, "fuzz.ctl", text);
	if (r) {
		fuzz_check_errmsg();
		FUZZ_CHECK(!strncmp(tally_errmsg(), "'fuzz.ctl' ", 11),
			   "the error does not name the file: '%s'", tally_errmsg());
	} else {
		/* (parsed as a string, the text ends at a NUL: tally_job_control_read
		 * refuses a file with NUL bytes before parsing) */
		unsigned last = 0;
		bool run = false;
		for (size_t i = 0; i < c.n; i++) {
			const struct tally_job_step *s = &c.steps[i];
			FUZZ_CHECK(s->line > last, "step %zu on line %u after line %u", i, s->line,
				   last);
			last = s->line;
			switch (s->cmd) {
			case TALLY_JOB_ADD:
				FUZZ_CHECK(s->args != NULL, "add without args");
				/* fallthrough */
			case TALLY_JOB_DELETE:
				FUZZ_CHECK(s->name && safe_name(s->name), "profiler name '%s'",
					   s->name ? s->name : "(null)");
				break;
			case TALLY_JOB_ONLY:
				break;
			case TALLY_JOB_HOSTS:
				/* before any run, at least one host, none empty or an option */
				FUZZ_CHECK(!run, "hosts after a run (line %u)", s->line);
				FUZZ_CHECK(s->args && s->args[0], "hosts without a host");
				for (size_t k = 0; s->args && s->args[k]; k++)
					FUZZ_CHECK(s->args[k][0] && s->args[k][0] != '-',
						   "host '%s'", s->args[k]);
				break;
			case TALLY_JOB_RUN:
				run = true;
				FUZZ_CHECK(s->args && s->args[0], "run without a test");
				FUZZ_CHECK(s->command || tally_job_builtin_test(s->args[0]),
					   "test '%s'", s->args[0]);
				FUZZ_CHECK(s->iterations >= 1, "iterations %u", s->iterations);
				FUZZ_CHECK(isfinite(s->timeout) && s->timeout >= 0, "timeout %g",
					   s->timeout);
				FUZZ_CHECK(s->tag && safe_name(s->tag) &&
						   strcmp(s->tag, "status.json") &&
						   strcmp(s->tag, "control"),
					   "tag '%s'", s->tag ? s->tag : "(null)");
				for (size_t k = 0; k < i; k++)
					FUZZ_CHECK(c.steps[k].cmd != TALLY_JOB_RUN ||
							   strcmp(c.steps[k].tag, s->tag),
						   "tag '%s' twice", s->tag);
				break;
			}
		}
		FUZZ_CHECK(run, "accepted without a run line");
	}
	tally_job_control_release(&c);
	free(text);
	return 0;
}
