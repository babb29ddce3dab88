/* tally record: run or attach, sample, aggregate in memory, write the database. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/agg.h"
#include "tally/collect.h"
#include "tally/db.h"
#include "tally/sampling.h"
#include "tally/util.h"

struct recopts {
	const char *out, *pid_arg;
	bool force, all;
	double duration;
};

enum { OPT_OUTPUT = 1, OPT_FORCE, OPT_ALL, OPT_PID, OPT_DURATION, OPT_VERBOSE };

static int record_handle(void *ctx, int code, const char *arg)
{
	struct recopts *o = ctx;
	switch (code) {
	case OPT_OUTPUT: o->out = arg; break;
	case OPT_FORCE: o->force = true; break;
	case OPT_ALL: o->all = true; break;
	case OPT_PID: o->pid_arg = arg; break;
	case OPT_DURATION: return tally_parse_duration(arg, "--duration", &o->duration);
	case OPT_VERBOSE: tally_verbose = 1; break;
	}
	return 0;
}

static const struct tally_option record_options[] = {
	{ 'o', "output", TALLY_ARG_REQUIRED, "DIR", "database directory (default tally.db)", OPT_OUTPUT },
	{ 0, "force", TALLY_ARG_NONE, NULL, "replace an existing database", OPT_FORCE },
	{ 'a', "all-cpus", TALLY_ARG_NONE, NULL, "the whole system, kernel included", OPT_ALL },
	{ 'p', "pid", TALLY_ARG_REQUIRED, "LIST", "attach to running processes", OPT_PID },
	{ 0, "duration", TALLY_ARG_REQUIRED, "SECS", "stop after this long (also 500ms, 2m, ...); a COMMAND then gets SIGTERM", OPT_DURATION },
	{ 'v', "verbose", TALLY_ARG_NONE, NULL, "say what it is doing", OPT_VERBOSE },
	TALLY_OPTION_END,
};
static const struct tally_optgroup record_group = { NULL, record_options, record_handle };

const struct tally_cmdopts record_cmdopts = {
	.name = "record",
	.summary = "profile a command, processes or the whole system into a database",
	.usage = "[options] [--] [COMMAND [ARGS...]]",
	.stop_at_nonopt = true,
	.groups = { &record_group, &tally_sampling_group },
};

static int wake_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_stop, got_child, got_term;

static void on_signal(int sig)
{
	int e = errno;
	if (sig == SIGCHLD)
		got_child = 1;
	else if (sig == SIGTERM)
		got_term = got_stop = 1;
	else
		got_stop = 1;
	char c = 0;
	if (write(wake_pipe[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = e;
}

static void drain_wake(void)
{
	char buf[64];
	while (read(wake_pipe[0], buf, sizeof(buf)) > 0)
		;
}

static void on_record(void *ctx, const struct tally_rec *rec)
{
	tally_agg_record(ctx, rec);
}

struct child {
	pid_t pid;
	int go_fd;  /* write a byte: the child may exec */
	int err_fd; /* read: errno of a failed exec, or EOF when exec succeeded */
};

static int spawn_stopped(char **argv, struct child *c)
{
	int go[2], err[2];
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		return tally_seterr(-errno, "cannot create a pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		return tally_seterr(-errno, "cannot fork: %s", strerror(errno));
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		char b;
		if (read(go[0], &b, 1) != 1)
			_exit(127); /* tally gave up before starting us */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		execvp(argv[0], argv);
		int e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	c->pid = pid;
	c->go_fd = go[1];
	c->err_fd = err[0];
	return 0;
}

int cmd_record(int argc, char **argv)
{
	struct recopts o = { .out = "tally.db" };
	int ret = 1;
	int *pids = NULL;
	size_t npids = 0;
	pid_t *tpids = NULL;
	struct tally_sampling smp;
	tally_sampling_init(&smp);

	void *ctx[] = { &o, &smp };
	int first;
	ret = tally_cmd_options(&record_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out_early;
	ret = 1;
	const char *out = o.out, *pid_arg = o.pid_arg;
	bool force = o.force, all = o.all;
	double duration = o.duration;
	char **cmd = argv + first;
	int ncmd = argc - first;
	if (smp.freq && smp.period) {
		ret = tally_usage_error("record", "-F and -c both set the sampling rate: give one");
		goto out_early;
	}
	if (ncmd && (all || pid_arg)) {
		ret = tally_usage_error("record", "give a COMMAND, or -a, or -p, not several");
		goto out_early;
	}
	if (all && pid_arg) {
		ret = tally_usage_error("record", "-a and -p cannot be combined");
		goto out_early;
	}
	if (!ncmd && !all && !pid_arg) {
		ret = tally_usage_error("record", "nothing to profile: give a COMMAND (after --), -a or -p PID");
		goto out_early;
	}
	{
		int r = tally_sampling_resolve(&smp);
		if (r) {
			tally_error("%s", tally_errmsg());
			ret = r == -EINVAL ? 2 : 1;
			goto out_early;
		}
	}
	int nev = smp.nev;
	const struct tally_event_desc *const *evs = smp.evs;
	bool *cpus = smp.cpus;
	int ncpus = smp.ncpus;
	uint64_t freq = smp.freq;
	bool randomize = smp.randomize;
	if (pid_arg) {
		if (tally_parse_intlist(pid_arg, "pid list -p", &pids, &npids)) {
			ret = tally_usage_error("record", "%s", tally_errmsg());
			goto out_early;
		}
		for (size_t i = 0; i < npids; i++)
			if (kill(pids[i], 0) < 0 && errno == ESRCH) {
				tally_error("cannot attach to pid %d: no such process", pids[i]);
				ret = 1;
				goto out_early;
			}
	}
	if (tally_db_check_target(out, force)) {
		tally_error("%s", tally_errmsg());
		ret = 1;
		goto out_early;
	}

	/* signals: a self-pipe wakes the poll loop */
	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		tally_die("cannot create a pipe: %s", strerror(errno));
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (ncmd) {
		/* the terminal's ^C reaches the command itself; tally waits for it to end */
		signal(SIGINT, SIG_IGN);
	} else {
		sigaction(SIGINT, &sa, NULL);
	}

	struct child child = { -1, -1, -1 };
	struct tally_collect_opts co;
	memset(&co, 0, sizeof(co));
	tally_sampling_collect_opts(&smp, &co);
	co.wake_fd = wake_pipe[0];
	if (ncmd) {
		if (spawn_stopped(cmd, &child)) {
			tally_error("%s", tally_errmsg());
			goto out_early;
		}
		tpids = xmalloc(sizeof(pid_t));
		tpids[0] = child.pid;
		co.target = TALLY_TARGET_CHILD;
		co.pids = tpids;
		co.npids = 1;
	} else if (pid_arg) {
		tpids = xmalloc(npids * sizeof(pid_t));
		for (size_t i = 0; i < npids; i++)
			tpids[i] = pids[i];
		co.target = TALLY_TARGET_PIDS;
		co.pids = tpids;
		co.npids = npids;
	} else {
		co.target = TALLY_TARGET_SYSTEM;
	}

	struct tally_collector *col = NULL;
	if (tally_collector_open(&col, &co)) {
		tally_error("%s", tally_errmsg());
		if (child.pid > 0) {
			kill(child.pid, SIGKILL);
			waitpid(child.pid, NULL, 0);
		}
		goto out_early;
	}
	struct tally_agg agg;
	tally_agg_init(&agg, nev, smp.per_pid, co.target == TALLY_TARGET_SYSTEM);
	agg.dwarf = smp.stack_user != 0;
	if (co.target == TALLY_TARGET_PIDS)
		for (size_t i = 0; i < npids; i++)
			tally_agg_load_procfs(&agg, pids[i]);

	struct strbuf cpustr = STRBUF_INIT;
	tally_cpus_string(cpus, ncpus, &cpustr);
	for (int e = 0; e < nev; e++) {
		uint64_t mp = tally_collector_mean_period(col, e);
		if (mp)
			tally_info("event %s: period %" PRIu64 "%s%s on CPUs %s", evs[e]->name, mp, evs[e]->time_based ? " ns" : "",
				   randomize ? " (randomized +-12.5%)" : "", cpustr.buf);
		else
			tally_info("event %s: %" PRIu64 " Hz (kernel-adjusted period) on CPUs %s", evs[e]->name, freq, cpustr.buf);
	}

	double wall_start = tally_now_wall(), mono_start = tally_now_mono();
	if (tally_collector_enable(col)) {
		tally_error("%s", tally_errmsg());
		goto out_col;
	}
	int status = 0;
	bool child_done = false;
	if (child.pid > 0) {
		char b = 1;
		if (write(child.go_fd, &b, 1) != 1)
			tally_die("cannot start '%s': %s", cmd[0], strerror(errno));
		close(child.go_fd);
		int e = 0;
		ssize_t n;
		while ((n = read(child.err_fd, &e, sizeof(e))) < 0 && errno == EINTR)
			;
		close(child.err_fd);
		if (n == (ssize_t)sizeof(e)) {
			waitpid(child.pid, NULL, 0);
			tally_error("cannot run '%s': %s%s", cmd[0], strerror(e),
				    e == ENOENT ? " (check the name and PATH)" : "");
			ret = 127;
			goto out_agg;
		}
		tally_info("started '%s' as pid %d", cmd[0], (int)child.pid);
	}
	tally_info("recording into '%s'", out);

	const int tick_ms = randomize ? 50 : 100;
	for (;;) {
		int n = tally_collector_poll(col, tick_ms, on_record, &agg);
		if (n < 0) {
			tally_error("%s", tally_errmsg());
			break;
		}
		drain_wake();
		tally_agg_identify_new(&agg);
		tally_agg_collect_dead(&agg);
		if (child.pid > 0 && got_term && !child_done)
			kill(child.pid, SIGTERM);
		if (child.pid > 0 && !child_done) {
			pid_t w = waitpid(child.pid, &status, WNOHANG);
			if (w == child.pid)
				child_done = true;
		}
		if (child_done)
			break;
		if (!ncmd && got_stop)
			break;
		if (duration > 0 && tally_now_mono() - mono_start >= duration)
			break;
		if (pid_arg) {
			bool alive = false;
			for (size_t i = 0; i < npids; i++)
				alive = alive || kill(pids[i], 0) == 0 || errno != ESRCH;
			if (!alive) {
				tally_info("every attached process has exited");
				break;
			}
		}
	}
	if (child.pid > 0 && !child_done) {
		/* --duration ended a command: stop it as a user would, then collect it */
		kill(child.pid, SIGTERM);
		waitpid(child.pid, &status, 0);
	}
	tally_collector_disable(col);
	tally_collector_poll(col, 0, on_record, &agg);
	tally_agg_identify_new(&agg);
	double mono_stop = tally_now_mono();
	tally_agg_snapshot_jit(&agg);
	tally_agg_tasks(&agg);

	/* session metadata */
	struct tally_meta s = { 0 };
	{
		struct strbuf cl = STRBUF_INIT, tg = STRBUF_INIT;
		for (int i = 0; i < ncmd; i++)
			strbuf_addf(&cl, "%s%s", i ? " " : "", cmd[i]);
		if (ncmd)
			strbuf_addstr(&tg, "command");
		else if (pid_arg)
			strbuf_addf(&tg, "pids %s", pid_arg);
		else
			strbuf_addstr(&tg, "system");
		tally_sampling_session(&smp, col, &agg, tg.buf, ncmd ? cl.buf : NULL, &s);
		strbuf_release(&cl);
		strbuf_release(&tg);
	}
	char ts[32];
	tally_format_utc(wall_start, ts, sizeof(ts));
	tally_meta_set(&s, "start-time", "%s", ts);
	tally_format_utc(wall_start + (mono_stop - mono_start), ts, sizeof(ts));
	tally_meta_set(&s, "stop-time", "%s", ts);
	tally_meta_set(&s, "duration", "%.3f", mono_stop - mono_start);
	for (size_t i = 0; i < agg.njit_warnings; i++)
		tally_warn("%s", agg.jit_warnings[i]); /* in the session too (jit-warning-N) */
	if (child.pid > 0)
		tally_meta_set(&s, "exit-status", "%d",
			       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0));

	int wr = tally_db_write(out, force, &agg, &s);
	if (wr == -EEXIST && !force) {
		/* someone created it while we recorded: keep the data under another name */
		struct strbuf alt = STRBUF_INIT;
		strbuf_addf(&alt, "%s.%d", out, (int)getpid());
		tally_warn("'%s' appeared while recording; writing '%s' instead", out, alt.buf);
		wr = tally_db_write(alt.buf, false, &agg, &s);
		strbuf_release(&alt);
	}
	if (wr) {
		tally_error("%s", tally_errmsg());
		ret = 1;
	} else {
		uint64_t total = 0;
		for (int e = 0; e < nev; e++)
			total += agg.samples[e];
		fprintf(stderr, "tally: wrote '%s': %" PRIu64 " samples, %" PRIu64 " lost (see 'tally report -i %s')\n", out,
			total, agg.lost, out);
		if (agg.lost)
			tally_warn("%" PRIu64 " samples were lost: lower -F, or the system is too busy", agg.lost);
		if (child.pid > 0)
			ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		else
			ret = 0;
	}
	tally_meta_release(&s);
out_agg:
	tally_agg_release(&agg);
out_col:
	strbuf_release(&cpustr);
	tally_collector_free(col);
out_early:
	free(tpids);
	free(pids);
	tally_sampling_release(&smp);
	return ret;
}
