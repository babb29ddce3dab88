/* tally daemon: the whole system sampled without end into a database of
 * epochs, steered by tally ctl over a Unix socket. This file is the command:
 * its options, its log file, signals and detaching; the engine (flushes,
 * epochs, quotas, the drain stream, the control server) is lib/daemon/ and the
 * design docs/daemon.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/daemon.h"
#include "tally/push.h"
#include "tally/sampling.h"
#include "tally/util.h"

/* The daemon's own options, as given; cmd_daemon hands them to the engine. */
struct dopts {
	const char *db, *sock, *pidfile;
	bool foreground;
	double flush_interval, epoch_every, keep, ctl_timeout;
	uint64_t max_memory, max_db_size, min_free;
};

enum { OPT_VERBOSE };

/* -v sets the process's tally_verbose: the handler's; the rest are one row each */
static int daemon_handle(void *ctx, int code, const char *arg)
{
	(void)ctx;
	(void)arg;
	if (code == OPT_VERBOSE)
		tally_verbose = 1;
	return 0;
}

static const struct tally_option daemon_options[] = {
	TALLY_OPT_STRING('d', "db", "DIR",
			 "the database directory (default tally.db): epochs, socket, pid file, log",
			 struct dopts, db),
	TALLY_OPT_STRING(0, "socket", "PATH", "the control socket (default DIR/ctl.sock)",
			 struct dopts, sock),
	TALLY_OPT_STRING(0, "pid-file", "PATH",
			 "also write the daemon's pid there (DIR/daemon.pid always)", struct dopts,
			 pidfile),
	TALLY_OPT_FLAG(0, "foreground",
		       "stay attached and log to stderr (default: detach, log to DIR/daemon.log)",
		       struct dopts, foreground),
	TALLY_OPT_DURATION(0, "flush-interval", "D",
			   "merge what is in memory into the database every D (default 60s)",
			   struct dopts, flush_interval),
	TALLY_OPT_DURATION(0, "epoch-every", "D",
			   "start a new epoch every D (default: only on 'tally ctl epoch')",
			   struct dopts, epoch_every),
	TALLY_OPT_DURATION(0, "keep", "D",
			   "delete epochs whose last flush is older than D (the newest 3 stay)",
			   struct dopts, keep),
	TALLY_OPT_SIZE(0, "max-memory", "SIZE",
		       "flush early before the daemon's memory reaches SIZE (default 128M)",
		       struct dopts, max_memory, 16ull << 20),
	TALLY_OPT_SIZE(0, "max-db-size", "SIZE",
		       "stop writing (and say so) rather than grow the directory past SIZE",
		       struct dopts, max_db_size, 4096),
	TALLY_OPT_SIZE(
		0, "min-free", "SIZE",
		"stop writing rather than leave less than SIZE free on its filesystem (default 64M)",
		struct dopts, min_free, 0),
	TALLY_OPT_DURATION(
		0, "ctl-timeout", "D",
		"drop a control connection that has not sent its whole request D after connecting, or whose reply stalls for D (default 5s)",
		struct dopts, ctl_timeout),
	TALLY_OPT('v', "verbose", TALLY_ARG_NONE, NULL, "log more", OPT_VERBOSE),
	TALLY_OPTION_END,
};
static const struct tally_optgroup daemon_group = { NULL, daemon_options, daemon_handle };

const struct tally_cmdopts daemon_cmdopts = {
	.name = "daemon",
	.summary = "profile the whole system without end, into epochs (profd; tally ctl steers it)",
	.usage = "[options]",
	.footer = "durations: seconds (decimals allowed) or 200ms, 30s, 5m, 2h, 1d\n",
	.groups = { &daemon_group, &tally_sampling_group, &tally_offcpu_group,
		    &tally_push_as_you_go_group },
};

static struct tally_daemon *the_daemon; /* for the signal handler */
static volatile sig_atomic_t got_term, got_hup;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_term = 1;
	if (the_daemon)
		tally_daemon_wake(the_daemon);
}

/* The parent of a detaching daemon: waits for the daemon to say over the
 * pipe whether it started, prints that, and exits. */
static _Noreturn void wait_for_start(pid_t pid, int fd, const char *cpus, struct tally_daemon *d,
				     const char *logpath)
{
	struct strbuf msg = STRBUF_INIT;
	char buf[512];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			strbuf_add(&msg, buf, (size_t)n);
	int code = 1;
	char *save = NULL;
	for (char *l = strtok_r(msg.buf ? msg.buf : (char *)"", "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(l, "OK")) {
			code = 0;
			tally_say(
				"daemon pid %d samples CPUs %s into '%s' (control: tally ctl --socket %s; log: %s)",
				(int)pid, cpus, tally_daemon_db(d), tally_daemon_socket(d),
				logpath);
		} else if (l[0] == 'W') {
			tally_warn("%s", l + 2);
		} else {
			tally_error("%s", l + 2);
		}
	}
	if (code && !msg.len)
		tally_error("the daemon (pid %d) died while starting (see '%s')", (int)pid,
			    logpath);
	_exit(code);
}

/* Detaches: the parent waits for the child's word; the child gets a new
 * session, its log file and /dev/null, and returns the pipe to report on. */
static int detach(struct tally_daemon_logfile *lg, const char *logpath, const char *cpus,
		  struct tally_daemon *d, int *ready)
{
	int pp[2];
	if (tally_daemon_logfile_open(lg, logpath)) {
		tally_error_last();
		return -1;
	}
	if (pipe2(pp, O_CLOEXEC) < 0) {
		tally_error("cannot create a pipe: %s", strerror(errno));
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		tally_error("cannot fork: %s", strerror(errno));
		close(pp[0]);
		close(pp[1]);
		return -1;
	}
	if (pid > 0) {
		close(pp[1]);
		wait_for_start(pid, pp[0], cpus, d, logpath);
	}
	close(pp[0]);
	*ready = pp[1];
	setsid();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		close(null);
	}
	if (chdir("/") < 0) {
		/* paths are absolute: the working directory does not matter */
	}
	return 0;
}

int cmd_daemon(int argc, char **argv)
{
	struct tally_daemon_opts o;
	tally_daemon_opts_init(&o);
	struct tally_sampling smp;
	tally_sampling_init(&smp);
	/* a daemon samples the whole system for days: counted in the kernel where it can */
	smp.sample_mech = TALLY_SAMPLE_AUTO;
	struct tally_daemon_logfile lg;
	tally_daemon_logfile_init(&lg, stderr); /* until it detaches */
	char *logpath = NULL;
	struct tally_daemon *d = NULL;
	struct strbuf cpus = STRBUF_INIT;
	int ret = 1, ready = -1;

	struct dopts dop = { .db = "tally.db",
			     .flush_interval = o.flush_interval,
			     .ctl_timeout = o.ctl_timeout,
			     .max_memory = o.max_memory,
			     .min_free = o.min_free };
	struct tally_push_opts push;
	tally_push_opts_init(&push);
	void *ctx[] = { &dop, &smp, &smp, &push };
	int first;
	ret = tally_cmd_options(&daemon_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 1;
	if (first < argc) {
		ret = tally_usage_error(
			"daemon",
			"unexpected argument '%s' (the daemon profiles the whole system; -C chooses CPUs)",
			argv[first]);
		goto out;
	}
	bool foreground = dop.foreground;
	o.pidfile_extra = dop.pidfile;
	o.flush_interval = dop.flush_interval;
	o.epoch_every = dop.epoch_every;
	o.keep = dop.keep;
	o.ctl_timeout = dop.ctl_timeout;
	o.max_memory = dop.max_memory;
	o.max_db_size = dop.max_db_size;
	o.min_free = dop.min_free;
	o.verbose = tally_verbose != 0;
	if (tally_push_opts_given(&push)) {
		if (tally_push_opts_check(&push, "--push", "--push-format")) {
			tally_error_last();
			ret = 2;
			goto out;
		}
		o.push = &push;
	}
	{
		int r = tally_sampling_resolve(&smp);
		if (r) {
			tally_error_last();
			ret = r == -EINVAL ? 2 : 1;
			goto out;
		}
	}

	o.db = dop.db;
	o.socket = dop.sock;
	o.smp = &smp;
	o.log = tally_daemon_logfile_line;
	o.log_ctx = &lg;
	if (tally_daemon_new(&d, &o)) {
		tally_error_last();
		goto out;
	}
	{
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/%s", tally_daemon_db(d), TALLY_DAEMON_LOG_NAME);
		logpath = strbuf_detach(&p);
	}
	the_daemon = d;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	tally_cpus_string(smp.cpus, smp.ncpus, &cpus);
	/* the rings of perf events are not inherited by a fork: detach first, and
	 * have the daemon say over a pipe whether it could start */
	if (!foreground && detach(&lg, logpath, cpus.buf, d, &ready))
		goto out;
	char *warning = NULL;
	if (tally_daemon_start(d, &warning)) {
		if (ready >= 0) {
			dprintf(ready, "E %s\n", tally_errmsg());
			tally_daemon_logfile_printf(&lg, "cannot start: %s", tally_errmsg());
		} else {
			tally_error_last();
		}
		goto out;
	}
	if (warning) {
		if (ready >= 0)
			dprintf(ready, "W %s\n", warning);
		else
			tally_warn("%s", warning);
		free(warning);
	}
	if (ready >= 0) {
		dprintf(ready, "OK\n");
		close(ready);
		ready = -1;
	}
	tally_daemon_logfile_printf(
		&lg, "started: events %s, CPUs %s, samples %s, database %s, socket %s",
		smp.evnames.buf, cpus.buf, tally_daemon_sample_mech(d), tally_daemon_db(d),
		tally_daemon_socket(d));
	while (!got_term) {
		tally_daemon_step(d, -1);
		if (got_hup) {
			got_hup = 0;
			tally_daemon_logfile_reopen(&lg);
			tally_daemon_flush(d, "SIGHUP", NULL);
		}
	}
	{
		struct strbuf m = STRBUF_INIT;
		int r = tally_daemon_stop(d, &m);
		tally_daemon_logfile_printf(&lg, r ? "stopping with %s" : "stopped (%s)",
					    m.buf ? m.buf : "");
		strbuf_release(&m);
	}
	ret = 0;
out:
	the_daemon = NULL;
	tally_daemon_free(d);
	if (ready >= 0)
		close(ready);
	tally_daemon_logfile_release(&lg);
	free(logpath);
	strbuf_release(&cpus);
	tally_sampling_release(&smp);
	tally_push_opts_release(&push);
	return ret;
}
