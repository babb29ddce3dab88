/* tally daemon: the whole system sampled without end into a database of
 * epochs, steered by tally ctl over a Unix socket. This file is the command:
 * its options, its log file, signals and detaching; the engine (flushes,
 * epochs, quotas, the drain stream, the control server) is lib/daemon/ and the
 * design docs/daemon.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/daemon.h"
#include "tally/sampling.h"
#include "tally/util.h"

static const char daemon_usage[] =
	"usage: tally daemon [options]\n"
	"\n"
	"  -d, --db DIR             the database directory (default tally.db): epochs, socket, pid file, log\n"
	"      --socket PATH        the control socket (default DIR/ctl.sock)\n"
	"      --pid-file PATH      also write the daemon's pid there (DIR/daemon.pid always)\n"
	"      --foreground         stay attached and log to stderr (default: detach, log to DIR/daemon.log)\n"
	"      --flush-interval D   merge what is in memory into the database every D (default 60s)\n"
	"      --epoch-every D      start a new epoch every D (default: only on 'tally ctl epoch')\n"
	"      --keep D             delete epochs whose last flush is older than D (the newest 3 stay)\n"
	"      --max-memory SIZE    flush early before the daemon's memory reaches SIZE (default 128M)\n"
	"      --max-db-size SIZE   stop writing (and say so) rather than grow the directory past SIZE\n"
	"      --min-free SIZE      stop writing rather than leave less than SIZE free on its filesystem (default 64M)\n"
	"      --ctl-timeout D      drop a control connection idle for D (default 5s)\n"
	TALLY_SAMPLING_USAGE
	"  -v, --verbose            log more\n"
	"durations: seconds (decimals allowed) or 200ms, 30s, 5m, 2h, 1d\n";

enum {
	OPT_SOCKET = 256, OPT_PIDFILE, OPT_FOREGROUND, OPT_FLUSH, OPT_EPOCH_EVERY, OPT_KEEP, OPT_MAXMEM, OPT_MAXDB,
	OPT_MINFREE, OPT_CTL_TIMEOUT,
};

static const struct option daemon_opts[] = {
	{ "db", required_argument, NULL, 'd' },
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "pid-file", required_argument, NULL, OPT_PIDFILE },
	{ "foreground", no_argument, NULL, OPT_FOREGROUND },
	{ "flush-interval", required_argument, NULL, OPT_FLUSH },
	{ "epoch-every", required_argument, NULL, OPT_EPOCH_EVERY },
	{ "keep", required_argument, NULL, OPT_KEEP },
	{ "max-memory", required_argument, NULL, OPT_MAXMEM },
	{ "max-db-size", required_argument, NULL, OPT_MAXDB },
	{ "min-free", required_argument, NULL, OPT_MINFREE },
	{ "ctl-timeout", required_argument, NULL, OPT_CTL_TIMEOUT },
	TALLY_SAMPLING_LONGOPTS,
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
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
static _Noreturn void wait_for_start(pid_t pid, int fd, const char *cpus, struct tally_daemon *d, const char *logpath)
{
	struct strbuf msg = STRBUF_INIT;
	char buf[512];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			strbuf_add(&msg, buf, (size_t)n);
	int code = 1;
	char *save = NULL;
	for (char *l = strtok_r(msg.buf ? msg.buf : (char *)"", "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(l, "OK")) {
			code = 0;
			fprintf(stderr, "tally: daemon pid %d samples CPUs %s into '%s' (control: tally ctl --socket %s; log: %s)\n",
				(int)pid, cpus, tally_daemon_db(d), tally_daemon_socket(d), logpath);
		} else if (l[0] == 'W') {
			tally_warn("%s", l + 2);
		} else {
			tally_error("%s", l + 2);
		}
	}
	if (code && !msg.len)
		tally_error("the daemon (pid %d) died while starting (see '%s')", (int)pid, logpath);
	_exit(code);
}

/* Detaches: the parent waits for the child's word; the child gets a new
 * session, its log file and /dev/null, and returns the pipe to report on. */
static int detach(struct tally_daemon_logfile *lg, const char *logpath, const char *cpus, struct tally_daemon *d,
		  int *ready)
{
	int pp[2];
	if (tally_daemon_logfile_open(lg, logpath)) {
		tally_error("%s", tally_errmsg());
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
	struct tally_daemon_logfile lg;
	tally_daemon_logfile_init(&lg, stderr); /* until it detaches */
	char *logpath = NULL;
	struct tally_daemon *d = NULL;
	struct strbuf cpus = STRBUF_INIT;
	const char *db_arg = "tally.db", *sock_arg = NULL;
	bool foreground = false;
	int ret = 1, ready = -1;

	optind = 1;
	opterr = 0;
	int opt;
	static const char shortopts[] = "+d:vh" TALLY_SAMPLING_SHORTOPTS;
	while ((opt = getopt_long(argc, argv, shortopts, daemon_opts, NULL)) != -1) {
		int r = tally_sampling_opt(&smp, opt, optarg);
		if (r < 0) {
			ret = tally_usage_error("daemon", "%s", tally_errmsg());
			goto out;
		}
		if (r)
			continue;
		double *dur = NULL;
		const char *what = NULL;
		switch (opt) {
		case 'd': db_arg = optarg; break;
		case OPT_SOCKET: sock_arg = optarg; break;
		case OPT_PIDFILE:
			o.pidfile_extra = optarg;
			break;
		case OPT_FOREGROUND: foreground = true; break;
		case OPT_FLUSH: dur = &o.flush_interval; what = "--flush-interval"; break;
		case OPT_EPOCH_EVERY: dur = &o.epoch_every; what = "--epoch-every"; break;
		case OPT_KEEP: dur = &o.keep; what = "--keep"; break;
		case OPT_CTL_TIMEOUT: dur = &o.ctl_timeout; what = "--ctl-timeout"; break;
		case OPT_MAXMEM:
			if (tally_parse_size(optarg, "--max-memory", 16ull << 20, &o.max_memory)) {
				ret = tally_usage_error("daemon", "%s", tally_errmsg());
				goto out;
			}
			break;
		case OPT_MAXDB:
			if (tally_parse_size(optarg, "--max-db-size", 4096, &o.max_db_size)) {
				ret = tally_usage_error("daemon", "%s", tally_errmsg());
				goto out;
			}
			break;
		case OPT_MINFREE:
			if (tally_parse_size(optarg, "--min-free", 0, &o.min_free)) {
				ret = tally_usage_error("daemon", "%s", tally_errmsg());
				goto out;
			}
			break;
		case 'v': tally_verbose = 1; o.verbose = true; break;
		case 'h':
			fputs(daemon_usage, stdout);
			ret = 0;
			goto out;
		default:
			ret = tally_getopt_error("daemon", shortopts, argv);
			goto out;
		}
		if (dur && tally_parse_duration(optarg, what, dur)) {
			ret = tally_usage_error("daemon", "%s", tally_errmsg());
			goto out;
		}
	}
	if (optind < argc) {
		ret = tally_usage_error("daemon", "unexpected argument '%s' (the daemon profiles the whole system; -C chooses CPUs)",
					argv[optind]);
		goto out;
	}
	{
		int r = tally_sampling_resolve(&smp);
		if (r) {
			tally_error("%s", tally_errmsg());
			ret = r == -EINVAL ? 2 : 1;
			goto out;
		}
	}

	o.db = db_arg;
	o.socket = sock_arg;
	o.smp = &smp;
	o.log = tally_daemon_logfile_line;
	o.log_ctx = &lg;
	if (tally_daemon_new(&d, &o)) {
		tally_error("%s", tally_errmsg());
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
			tally_error("%s", tally_errmsg());
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
	tally_daemon_logfile_printf(&lg, "started: events %s, CPUs %s, database %s, socket %s", smp.evnames.buf, cpus.buf,
				    tally_daemon_db(d), tally_daemon_socket(d));
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
		tally_daemon_logfile_printf(&lg, r ? "stopping with %s" : "stopped (%s)", m.buf ? m.buf : "");
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
	return ret;
}
