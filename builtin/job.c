/* tally job: profilers as plugins around tests (autotest's job profilers;
 * docs/job.md). The harness is lib/job; this prints its progress and errors. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/job.h"
#include "tally/remote.h"
#include "tally/util.h"

struct jobopts {
	const char *results, *path, *state;
	struct tally_hosts_opts h;
	double host_timeout;
};

enum { OPT_VERBOSE };

/* -v sets the process's tally_verbose: the handler's; the rest are one row each */
static int job_handle(void *ctx, int code, const char *arg)
{
	(void)ctx;
	(void)arg;
	if (code == OPT_VERBOSE)
		tally_verbose = 1;
	return 0;
}

static const struct tally_option job_options[] = {
	TALLY_OPT_STRING('r', "results", "DIR",
			 "run: where the results go (default results/JOBNAME; never overwritten)",
			 struct jobopts, results),
	TALLY_OPT_STRING(
		0, "profilers-path", "DIRS",
		"colon-separated directories of external profilers, searched before\nTALLY_PROFILERS_PATH and " TALLY_PROFILERS_SYSDIR,
		struct jobopts, path),
	TALLY_OPT_STRING(
		0, "state-dir", "DIR",
		"where profilers keep their set-up state (TALLY_SRCDIR is DIR/NAME;\ndefault TALLY_STATE_DIR, else ~/.local/state/tally/profilers)",
		struct jobopts, state),
	TALLY_OPT('v', "verbose", TALLY_ARG_NONE, NULL, "say what it is doing", OPT_VERBOSE),
	TALLY_OPT_DURATION(
		0, "host-timeout", "D",
		"run: how long a host that went away may take to come back (default 60s)",
		struct jobopts, host_timeout),
	TALLY_OPTION_END,
};
static const struct tally_optgroup job_group = { NULL, job_options, job_handle };

const struct tally_cmdopts job_cmdopts = {
	.name = "job",
	.summary =
		"run tests with profilers around them, from a control file (autotest's job profilers)",
	.usage =
		"run [-r RESULTS] [--profilers-path DIRS] CONTROL | profilers [--profilers-path DIRS] | hosts --host HOST...",
	.footer =
		"commands:\n"
		"  run CONTROL          run the control file's tests with its profilers; results in\n"
		"                       RESULTS/TAG/ (status, output, profiling/) and RESULTS/status.json\n"
		"  profilers            the profilers there are: name, version, set up or not, where\n"
		"  hosts --host HOST... check remote hosts over ssh (TALLY_SSH): reachable, tally\n"
		"                       installed there, clock offset ('tally job hosts --help')\n"
		"control file (one command a line, '#' comments, shell-style quoting, no expansion):\n"
		"  profilers add NAME [ARGS...]    e.g. profilers add tally -F 999 -g; profilers add cmd 'vmstat 1'\n"
		"  profilers delete NAME\n"
		"  profilers only on|off           on: every iteration profiled (off: one extra profiled iteration)\n"
		"  run [--iterations N] [--tag TAG] [--timeout D] TEST [ARGS...]     built-in: sleeptest SECONDS\n"
		"  run [--iterations N] [--tag TAG] [--timeout D] -- COMMAND [ARGS...]\n"
		"exit status: 0 every test passed, 1 a test failed or the job could not run,\n"
		"2 a usage or control-file error, 130 interrupted (the results are whole)\n",
	.groups = { &job_group, &tally_hosts_group },
};

static struct tally_job *running;

static void on_signal(int sig)
{
	(void)sig;
	tally_job_interrupt(running);
}

static void show(void *ctx, const char *line)
{
	(void)ctx;
	printf("%s\n", line);
	fflush(stdout);
}

static int job_run(const struct jobopts *o, const char *control)
{
	struct tally_job_opts jo = { 0 };
	jo.control = control;
	jo.results = o->results;
	jo.profilers_path = o->path;
	jo.state_dir = o->state;
	jo.progress = show;
	jo.hosts = o->h.hosts;
	jo.nhosts = o->h.nhosts;
	jo.remote_root = o->h.root;
	jo.host_timeout = o->host_timeout;
	struct tally_job *j;
	int r = tally_job_new(&j, &jo);
	if (r) {
		tally_error_last();
		return r == -EINVAL ? 2 : 1;
	}
	running = j;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	/* one handler at a time: each counts one interrupt (a second ^C hurries) */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaddset(&sa.sa_mask, SIGHUP);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	tally_info("results in '%s'", tally_job_results(j));
	r = tally_job_run(j);
	int ret;
	if (r == -EINTR) {
		tally_error_last();
		ret = 130;
	} else if (r) {
		tally_error_last();
		ret = 1;
	} else {
		unsigned n = tally_job_tests(j), f = tally_job_failed(j);
		printf("%u test%s, %u failed: results in '%s'\n", n, n == 1 ? "" : "s", f,
		       tally_job_results(j));
		ret = f ? 1 : 0;
	}
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	running = NULL;
	tally_job_free(j);
	return ret;
}

static int job_profilers(const struct jobopts *o)
{
	struct tally_profiler_env env = { 0 };
	tally_profilers_path(o->path, &env.path);
	char *state = o->state ? xstrdup(o->state) : tally_profilers_state_dir();
	env.state_dir = state;
	struct tally_profiler_info *v;
	size_t n;
	tally_profilers_list(&env, &v, &n);
	printf("%-16s %-14s %-12s %s\n", "name", "version", "set up", "where");
	for (size_t i = 0; i < n; i++) {
		printf("%-16s %-14s %-12s %s\n", v[i].name, v[i].version ? v[i].version : "?",
		       v[i].setup, v[i].where);
		if (v[i].error)
			printf("%-16s   (%s)\n", "", v[i].error);
	}
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; env.path[i]; i++)
		strbuf_addf(&sb, "%s%s", i ? ":" : "", env.path[i]);
	printf("searched: %s\n", sb.len ? sb.buf : "(nothing)");
	strbuf_release(&sb);
	tally_profiler_infos_free(v, n);
	tally_job_argv_free(env.path);
	free(state);
	return fflush(stdout) ? 1 : 0;
}

/* tally job agent start DIR (the profilers, one a line, on stdin) |
 * tally job agent ctl DIR WORDS...: exit 0 ok, 1 an error answer, 3 no agent. */
static int job_agent(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "start") && argc == 3) {
		struct strbuf in = STRBUF_INIT, ready = STRBUF_INIT;
		if (tally_read_fd(&in, 0, "the profilers", 1 << 20)) {
			tally_error_last();
			return 1;
		}
		int r = tally_job_agent_start(argv[2], in.buf ? in.buf : "", &ready);
		if (r)
			tally_error_last();
		else
			printf("%s\n", ready.buf);
		strbuf_release(&in);
		strbuf_release(&ready);
		return r ? 1 : 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "ctl")) {
		struct strbuf a = STRBUF_INIT;
		int r = tally_job_agent_ctl(argv[2], argv + 3, &a);
		if (r) {
			tally_error_last();
			strbuf_release(&a);
			return r == -ENOTCONN ? 3 : 1;
		}
		/* "ok ..." on stdout; "error MSG" is the command's error, on stderr */
		int ok = !strncmp(a.buf, "ok", 2);
		if (ok)
			printf("%s\n", a.buf);
		else
			tally_error("%s", !strncmp(a.buf, "error ", 6) ? a.buf + 6 : a.buf);
		strbuf_release(&a);
		return ok ? 0 : 1;
	}
	return tally_usage_error(
		"job",
		"the agent is started by a job: job agent start DIR, or job agent ctl DIR REQUEST");
}

static int job_main(struct jobopts *op, int argc, char **argv);

int cmd_job(int argc, char **argv)
{
	/* job hosts has options of its own (builtin/job-hosts.c) */
	if (argc > 1 && !strcmp(argv[1], "hosts"))
		return cmd_job_hosts(argc - 1, argv + 1);
	/* the agent on a remote host, run over ssh by a job (docs/remote.md) */
	if (argc > 1 && !strcmp(argv[1], "agent"))
		return job_agent(argc - 1, argv + 1);
	struct jobopts o = { 0 };
	int r = job_main(&o, argc, argv);
	free(o.h.hosts);
	return r;
}

/* run and profilers; o's hosts are the caller's to free, whatever happens */
static int job_main(struct jobopts *op, int argc, char **argv)
{
	void *ctx[] = { op, &op->h };
	int first, r = tally_cmd_options(&job_cmdopts, ctx, argc, argv, &first);
	if (r >= 0)
		return r;
	char **ops = argv + first;
	int nops = argc - first;
	if (!nops)
		return tally_usage_error("job", "give a command: run CONTROL or profilers");
	if (!strcmp(ops[0], "run")) {
		if (nops != 2)
			return tally_usage_error(
				"job",
				nops < 2 ? "'job run' needs a control file"
					 : "'job run' takes one control file, got '%s' too",
				nops > 2 ? ops[2] : "");
		return job_run(op, ops[1]);
	}
	if (!strcmp(ops[0], "profilers")) {
		if (nops != 1)
			return tally_usage_error(
				"job", "'job profilers' takes no argument, got '%s'", ops[1]);
		if (op->results)
			return tally_usage_error("job", "-r is for 'job run'");
		return job_profilers(op);
	}
	return tally_usage_error("job", "unknown job command '%s' (run, profilers, hosts)", ops[0]);
}
