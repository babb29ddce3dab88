/* Unit tests for lib/job: the shell-style word splitter, control-file
 * parsing (commands, options, tags, every error with its line), the
 * profilers path, and one job driven through the core's API (a plugin's
 * steps in order, the results, status.json) without the command in front. */
#define _GNU_SOURCE
#include "unit.h"

#include <sys/wait.h>

#include "tally/job.h"

/* split line, which must give the n words of want */
static void split_is(const char *line, const char *const *want, size_t n)
{
	char **w;
	size_t got;
	if (tally_job_split(line, &w, &got))
		fail_msg("'%s' was refused: %s", line, tally_errmsg());
	if (got != n)
		fail_msg("'%s': %zu words, expected %zu", line, got, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(w[i], want[i]);
	assert_null(w[n]);
	tally_job_argv_free(w);
}

#define SPLIT(line, ...)                                                            \
	do {                                                                        \
		const char *const want_[] = { __VA_ARGS__ };                        \
		split_is(line, want_, sizeof(want_) / sizeof(want_[0]));            \
	} while (0)

static void split_refused(const char *line, const char *msg)
{
	char **w = NULL;
	int r = tally_job_split(line, &w, NULL);
	if (r != -EINVAL)
		fail_msg("'%s' was not refused (%d)", line, r);
	assert_null(w);
	assert_errmsg_has(msg);
}

static void test_job__split_words(void **state)
{
	(void)state;
	SPLIT("a b\tc", "a", "b", "c");
	SPLIT("  lead  trail  ", "lead", "trail");
	SPLIT("'vmstat 1' x", "vmstat 1", "x");
	SPLIT("\"a b\" c", "a b", "c");
	SPLIT("a'b c'd", "ab cd");
	SPLIT("'' x", "", "x");
	SPLIT("\"\"", "");
	SPLIT("a\\ b", "a b");
	SPLIT("'$HOME' \\$x '`id`'", "$HOME", "$x", "`id`");
	SPLIT("\"q\\\"uote\\\\ \\$ \\`\"", "q\"uote\\ $ `");
	SPLIT("\"a\\nb\"", "a\\nb"); /* other escapes stay as written in double quotes */
	SPLIT("'a\"b'", "a\"b");
	SPLIT("x # a comment", "x");
	SPLIT("x#not-a-comment", "x#not-a-comment");
	SPLIT("'#' kept", "#", "kept");
	/* nothing */
	char **w;
	size_t n = 99;
	assert_int_equal(tally_job_split("   # only a comment", &w, &n), 0);
	assert_int_equal(n, 0);
	assert_null(w[0]);
	tally_job_argv_free(w);
}

static void test_job__split_refuses(void **state)
{
	(void)state;
	split_refused("echo 'open", "unterminated ' quote");
	split_refused("echo \"open", "unterminated \" quote");
	split_refused("echo $HOME", "'$' is not expanded");
	split_refused("echo \"$(id)\"", "'$' is not expanded");
	split_refused("echo `id`", "'`' is not run");
	split_refused("echo \"`id`\"", "'`' is not run");
	split_refused("echo x\\", "a backslash ends the line");
}

/* parse text, which must fail with msg */
static void control_refused(const char *text, const char *msg)
{
	struct tally_job_control c;
	int r = tally_job_control_parse(&c, "t.ctl", text);
	if (r != -EINVAL)
		fail_msg("'%s' was not refused (%d)", text, r);
	assert_errmsg_has(msg);
	assert_null(strchr(tally_errmsg(), '\n'));
	tally_job_control_release(&c);
}

static void test_job__control_parse(void **state)
{
	(void)state;
	struct tally_job_control c;
	const char *text = "# a job\n"
			   "profilers add tally -F 999 -g\n"
			   "profilers add cmd 'vmstat 1'\n"
			   "\n"
			   "run sleeptest 1\n"
			   "run sleeptest 2   # again\n"
			   "profilers only on\n"
			   "run --iterations 3 --tag=build --timeout 2m -- make -j2\n"
			   "profilers delete cmd\n"
			   "run -- /usr/bin/true\n";
	assert_int_equal(tally_job_control_parse(&c, "t.ctl", text), 0);
	assert_int_equal(c.n, 8);
	assert_int_equal(c.steps[0].cmd, TALLY_JOB_ADD);
	assert_int_equal(c.steps[0].line, 2);
	assert_string_equal(c.steps[0].name, "tally");
	assert_string_equal(c.steps[0].args[1], "999");
	assert_string_equal(c.steps[1].args[0], "vmstat 1");
	assert_null(c.steps[1].args[1]);
	assert_int_equal(c.steps[2].cmd, TALLY_JOB_RUN);
	assert_int_equal(c.steps[2].line, 5);
	assert_false(c.steps[2].command);
	assert_int_equal(c.steps[2].iterations, 1);
	assert_string_equal(c.steps[2].tag, "sleeptest");
	assert_string_equal(c.steps[3].tag, "sleeptest.2");
	assert_int_equal(c.steps[4].cmd, TALLY_JOB_ONLY);
	assert_true(c.steps[4].only);
	assert_true(c.steps[5].command);
	assert_int_equal(c.steps[5].iterations, 3);
	assert_true(c.steps[5].timeout == 120);
	assert_string_equal(c.steps[5].tag, "build");
	assert_string_equal(c.steps[5].args[0], "make");
	assert_int_equal(c.steps[6].cmd, TALLY_JOB_DELETE);
	assert_string_equal(c.steps[7].tag, "true");
	tally_job_control_release(&c);

	/* a tag given is never renamed: automatic ones step aside for it,
	 * wherever it is given */
	assert_int_equal(
		tally_job_control_parse(
			&c, "t.ctl",
			"run sleeptest 0\nrun sleeptest 0\nrun --tag sleeptest.2 sleeptest 0\nrun --tag x sleeptest 0\n"
			"run sleeptest 0\n"),
		0);
	assert_string_equal(c.steps[0].tag, "sleeptest");
	assert_string_equal(c.steps[1].tag, "sleeptest.3");
	assert_string_equal(c.steps[2].tag, "sleeptest.2");
	assert_string_equal(c.steps[3].tag, "x");
	assert_string_equal(c.steps[4].tag, "sleeptest.4");
	tally_job_control_release(&c);
	assert_int_equal(tally_job_control_parse(
				 &c, "t.ctl", "run sleeptest 0\nrun --tag sleeptest sleeptest 1\n"),
			 0);
	assert_string_equal(c.steps[0].tag, "sleeptest.2");
	assert_string_equal(c.steps[1].tag, "sleeptest");
	tally_job_control_release(&c);

	/* a default tag is a safe directory name; reserved names get a suffix */
	assert_int_equal(tally_job_control_parse(&c, "t.ctl",
						 "run -- '/bin/odd name;$x'\nrun -- ./control\n"),
			 0);
	assert_string_equal(c.steps[0].tag, "odd_name__x");
	assert_string_equal(c.steps[1].tag, "control.2");
	tally_job_control_release(&c);

	/* several cmd profilers may be added; delete removes them all */
	assert_int_equal(
		tally_job_control_parse(
			&c, "t.ctl",
			"profilers add cmd a\nprofilers add cmd b\nprofilers delete cmd\nprofilers add tally\nrun sleeptest 0\n"),
		0);
	tally_job_control_release(&c);
}

static void test_job__control_errors(void **state)
{
	(void)state;
	control_refused("run sleeptest 0\nfrob\n", "'t.ctl' line 2: unknown command 'frob'");
	control_refused("run sleeptest 0\n\n\nrun -- echo 'x\n",
			"'t.ctl' line 4: unterminated ' quote");
	control_refused("profilers add tally\nprofilers add tally\nrun sleeptest 0\n",
			"'t.ctl' line 2: profiler 'tally' is already added (line 1)");
	control_refused(
		"profilers add tally\nprofilers delete tally\nprofilers delete tally\nrun sleeptest 0\n",
		"'t.ctl' line 3: profiler 'tally' is not added here");
	control_refused("profilers add a/b\nrun sleeptest 0\n", "'a/b' is not a profiler's name");
	control_refused("profilers add .hidden\nrun sleeptest 0\n",
			"'.hidden' is not a profiler's name");
	control_refused("run --tag .. sleeptest 0\n", "'..' cannot be a tag");
	control_refused("run --tag a/b sleeptest 0\n", "'a/b' cannot be a tag");
	control_refused("run --iterations 1x sleeptest 0\n", "invalid --iterations '1x'");
	control_refused("run --timeout 0 sleeptest 0\n", "invalid --timeout '0'");
	control_refused("run sleeptest 1 2\n", "sleeptest takes one duration");
	control_refused("run nosuch\n", "unknown test 'nosuch'");
	control_refused("profilers only\nrun sleeptest 0\n", "'profilers only' takes on or off");
	control_refused("# nothing\n", "'t.ctl' has no 'run' line");
	control_refused("", "'t.ctl' has no 'run' line");
	control_refused("run --tag b sleeptest 0\nrun --tag=b -- true\n",
			"'t.ctl' line 2: tag 'b' is already given on line 1");
	/* autotest's Python: what to write here */
	control_refused(
		"job.profilers.add(\"tally\")\nrun sleeptest 0\n",
		"'t.ctl' line 1: unknown command 'job.profilers.add(tally)': a control file is not Python, write 'profilers add tally'");
	control_refused("job.profilers.add('tally', '-F', '99')\nrun sleeptest 0\n",
			"write 'profilers add tally -F 99'");
	control_refused("run sleeptest 0\njob.profilers.delete('cmd')\n",
			"write 'profilers delete cmd'");
	control_refused("job.run_test('sleeptest', seconds=1)\n",
			"a control file is not Python (profilers add NAME [ARGS...]");
	/* the built-in profilers' arguments, with the rest of the file */
	control_refused("run sleeptest 0\nprofilers add tally -F abc\n",
			"'t.ctl' line 2: profiler 'tally': invalid frequency -F 'abc'");
	control_refused("profilers add tally --bogus\nrun sleeptest 0\n",
			"'t.ctl' line 1: profiler 'tally': option '--bogus' is unknown");
	control_refused("profilers add cmd\nrun sleeptest 0\n",
			"'t.ctl' line 1: profiler 'cmd': no command");
}

static void test_job__profilers_path(void **state)
{
	(void)state;
	char **v;
	setenv("TALLY_PROFILERS_PATH", "/e1::/e2", 1);
	tally_profilers_path("/a:/b", &v);
	const char *want[] = { "/a", "/b", "/e1", "/e2", TALLY_PROFILERS_SYSDIR };
	for (size_t i = 0; i < 5; i++)
		assert_string_equal(v[i], want[i]);
	assert_null(v[5]);
	tally_job_argv_free(v);
	unsetenv("TALLY_PROFILERS_PATH");
	tally_profilers_path(NULL, &v);
	assert_string_equal(v[0], TALLY_PROFILERS_SYSDIR);
	assert_null(v[1]);
	tally_job_argv_free(v);

	setenv("TALLY_STATE_DIR", "/st", 1);
	char *s = tally_profilers_state_dir();
	assert_string_equal(s, "/st");
	free(s);
	unsetenv("TALLY_STATE_DIR");
	setenv("XDG_STATE_HOME", "/xdg", 1);
	s = tally_profilers_state_dir();
	assert_string_equal(s, "/xdg/tally/profilers");
	free(s);
	unsetenv("XDG_STATE_HOME");
}

static void test_job__unknown_profiler(void **state)
{
	(void)state;
	char *path[] = { "/nonexistent/one", "/nonexistent/two", NULL };
	struct tally_profiler_env env = { path, "/tmp" };
	struct tally_profiler *p = NULL;
	assert_int_equal(tally_profiler_find(&p, "nosuch", NULL, &env), -ENOENT);
	assert_null(p);
	assert_errmsg_has("unknown profiler 'nosuch'");
	assert_errmsg_has("/nonexistent/one:/nonexistent/two");
	/* the built-ins are found anywhere */
	assert_int_equal(tally_profiler_find(&p, "cmd", NULL, &env), 0);
	assert_string_equal(tally_profiler_where(p), "built-in");
	assert_string_equal(tally_profiler_version(p), TALLY_VERSION);
	tally_profiler_free(p);
}

/* A whole job through the API: a plugin that logs its steps, a test, the
 * results and status.json. */
static void test_job__run_api(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *plugins = unit_path(dir, "plugins");
	char *pdir = unit_path(plugins, "logger");
	char *exe = unit_path(pdir, "profiler");
	char *log = unit_path(dir, "steps.log");
	char *ctl = unit_path(dir, "j.ctl");
	char *results = unit_path(dir, "res");
	char *state_dir = unit_path(dir, "state");
	assert_int_equal(mkdir(plugins, 0755), 0);
	assert_int_equal(mkdir(pdir, 0755), 0);
	char script[2048];
	snprintf(
		script, sizeof(script),
		"#!/bin/sh\ncase $1 in version) echo 3 ;; *) echo \"$1 $TALLY_TEST $TALLY_ITERATION $2\" >>'%s' ;; esac\nexit 0\n",
		log);
	unit_write_str(exe, script);
	assert_int_equal(chmod(exe, 0755), 0);
	unit_write_str(
		ctl,
		"profilers add logger arg\nrun --iterations 2 --tag t -- sh -c 'echo out'\nrun -- false\n");

	struct tally_job_opts o = { 0 };
	o.control = ctl;
	o.results = results;
	o.profilers_path = plugins;
	o.state_dir = state_dir;
	struct tally_job *j;
	if (tally_job_new(&j, &o))
		fail_msg("tally_job_new: %s", tally_errmsg());
	if (tally_job_run(j))
		fail_msg("tally_job_run: %s", tally_errmsg());
	assert_int_equal(tally_job_tests(j), 2);
	assert_int_equal(tally_job_failed(j), 1);
	tally_job_free(j);

	char *got = unit_read(log, NULL);
	assert_string_equal(
		got,
		"setup   arg\ninitialize   arg\nstart t 3 arg\nstop t 3 arg\nreport t 3 arg\n");
	free(got);
	char *out = unit_path(results, "t/output");
	got = unit_read(out, NULL);
	assert_string_equal(got, "out\nout\nout\n"); /* two iterations, then the profiled one */
	free(got);
	char *st = unit_path(results, "t/status");
	got = unit_read(st, NULL);
	assert_true(!strncmp(got, "GOOD exit 0 time ", 17));
	assert_str_has(got, "\nprofiling complete\n");
	free(got);
	char *st2 = unit_path(results, "false/status");
	got = unit_read(st2, NULL);
	assert_true(!strncmp(got, "FAIL exit 1 time ", 17));
	assert_str_has(got, "(exit status 1)");
	free(got);
	char *js = unit_path(results, "status.json");
	got = unit_read(js, NULL);
	assert_str_has(got, "\"status\":\"FAIL\"");
	assert_str_has(got, "\"setup\":\"ran\"");
	assert_str_has(got, "\"version\":\"3\"");
	free(got);

	/* the same results again: refused, untouched */
	assert_int_equal(tally_job_new(&j, &o), -EEXIST);
	assert_null(j);
	assert_errmsg_has("already exist");

	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	free(js);
	free(st2);
	free(st);
	free(out);
	free(state_dir);
	free(results);
	free(ctl);
	free(log);
	free(exe);
	free(pdir);
	free(plugins);
	free(dir);
}

/* ---- the agent's requests ---- */

static int agent_req(const char *line, size_t nprof, struct tally_agent_req *req)
{
	static char buf[256];
	snprintf(buf, sizeof(buf), "%s", line);
	return tally_agent_parse(buf, nprof, req);
}

static void test_job__agent_request(void **state)
{
	(void)state;
	struct tally_agent_req r;
	assert_int_equal(agent_req("start\tT1\t3\t2,0", 3, &r), 0);
	assert_int_equal(r.op, TALLY_AGENT_START);
	assert_string_equal(r.tag, "T1");
	assert_int_equal(r.iter, 3);
	assert_int_equal(r.nidx, 2);
	assert_int_equal(r.idx[0], 2);
	assert_int_equal(r.idx[1], 0);
	tally_agent_req_release(&r);
	assert_int_equal(agent_req("start\tT1\t4294967295\t-", 3, &r), 0);
	assert_int_equal(r.iter, 4294967295u);
	assert_int_equal(r.nidx, 0);
	assert_int_equal(agent_req("clean\tT1", 0, &r), 0);
	assert_int_equal(r.op, TALLY_AGENT_CLEAN);
	assert_int_equal(agent_req("status", 0, &r), 0);
	assert_int_equal(r.op, TALLY_AGENT_STATUS);
	static const struct {
		const char *line, *msg;
	} bad[] = {
		{ "", "empty request" },
		{ "start\tT\t1\t3", "no profiler '3' (the profilers are 0 to 2" },
		{ "start\tT\t1\t0,0", "profiler 0 named twice" },
		{ "start\tT\t1\t0,", "no profiler ''" },
		{ "start\tT\t1\t-1", "no profiler '-1'" },
		{ "start\tT\t1\t 1", "no profiler ' 1'" },
		{ "start\tT\t4294967296\t0", "iteration '4294967296' is not a number" },
		{ "start\tT\t+1\t0", "iteration '+1' is not a number" },
		{ "start\t.T\t1\t0", "tag '.T' cannot name a directory" },
		{ "clean\ta/b", "tag 'a/b' cannot name a directory" },
		{ "clean", "'clean' takes 1 word after it, not 0" },
		{ "stop\tnow", "'stop' takes 0 words after it, not 1" },
		{ "a\tb\tc\td\te\tf\tg\th\ti", "too many words" },
		{ "frob", "unknown request 'frob'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (agent_req(bad[i].line, 3, &r) != -EINVAL)
			fail_msg("request %zu accepted", i);
		if (!strstr(tally_errmsg(), bad[i].msg))
			fail_msg("request %zu: '%s', expected '%s'", i, tally_errmsg(), bad[i].msg);
		assert_null(r.idx);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job__split_words),
		cmocka_unit_test(test_job__split_refuses),
		cmocka_unit_test(test_job__control_parse),
		cmocka_unit_test(test_job__control_errors),
		cmocka_unit_test(test_job__profilers_path),
		cmocka_unit_test(test_job__unknown_profiler),
		cmocka_unit_test(test_job__run_api),
		cmocka_unit_test(test_job__agent_request),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
