/* The built-in profilers of tally job:
 *   tally  tally's own recorder, in-process (lib/record), on the test's
 *          process tree or the whole system; the database stays, with its
 *          text report (functions, and the call graph when recorded with
 *          stacks) and its HTML report beside it;
 *   cmd    a command started at start, stopped at stop (SIGINT, then SIGTERM,
 *          then SIGKILL), its output in the profiling directory;
 *   perf   Linux perf around the test (perf record -a), reported per sort key. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/html.h"
#include "tally/flame.h"
#include "tally/options.h"
#include "tally/push.h"
#include "tally/record.h"
#include "tally/report.h"
#include "tally/sampling.h"
#include "tally/select.h"
#include "tally/symbols.h"
#include "tally/symopts.h"
#include "tally/view.h"

/* ---- tally ---- */

struct tally_prof {
	struct tally_sampling smp;
	bool all;
	struct tally_recording *rec;
	pthread_t thread;
	bool thread_running;
	int run_ret;
	char err[512]; /* the thread's error message */
	char *db;      /* written by stop */
	/* --push: each run's database is sent there after its report */
	struct tally_push_opts push;
};

enum { TOPT_ALL = 1 };

static int tally_prof_handle(void *ctx, int code, const char *arg)
{
	(void)arg;
	struct tally_prof *t = ctx;
	if (code == TOPT_ALL)
		t->all = true;
	return 0;
}

static const struct tally_option tally_prof_options[] = {
	TALLY_OPT('a', "all-cpus", TALLY_ARG_NONE, NULL,
		  "the whole system, kernel included (default: the test's processes)", TOPT_ALL),
	TALLY_OPTION_END,
};
static const struct tally_optgroup tally_prof_group = { NULL, tally_prof_options,
							tally_prof_handle };
static const struct tally_cmdopts tally_prof_cmdopts = {
	.name = "job profiler tally",
	.summary = "tally's sampler around a test",
	.usage = "[options]",
	.groups = { &tally_prof_group, &tally_sampling_group, &tally_offcpu_group,
		    &tally_push_as_you_go_group },
};

static void tally_release(struct tally_profiler *p)
{
	struct tally_prof *t = p->state;
	if (!t)
		return;
	if (t->thread_running) {
		tally_recording_request_stop(t->rec);
		pthread_join(t->thread, NULL);
	}
	tally_recording_free(t->rec);
	tally_sampling_release(&t->smp);
	tally_push_opts_release(&t->push);
	free(t->db);
	free(t);
	p->state = NULL;
}

/* The tally profiler's arguments into t: 0, or -EINVAL with the reason. */
static int tally_parse(struct tally_prof *t, char *const *args)
{
	tally_sampling_init(&t->smp);
	/* getopt permutes its argv: a copy, with a name first */
	size_t n = 0;
	while (args && args[n])
		n++;
	char **argv = xcalloc(n + 2, sizeof(*argv));
	argv[0] = "tally";
	for (size_t i = 0; i < n; i++)
		argv[i + 1] = args[i];
	void *ctx[] = { t, &t->smp, &t->smp, &t->push };
	int first = 0;
	int r = tally_opts_parse(&tally_prof_cmdopts, ctx, (int)n + 1, argv, &first);
	if (r == TALLY_OPTS_HELP)
		r = tally_seterr(
			-EINVAL,
			"no --help here: its options are tally record's sampling options and -a (docs/job.md)");
	else if (!r && first < (int)n + 1) {
		char q[TALLY_EXCERPT_SIZE];
		r = tally_seterr(
			-EINVAL,
			"unexpected argument '%s' (the test is what it profiles; -a for the whole system)",
			tally_excerpt(q, argv[first]));
	}
	free(argv);
	if (!r && tally_push_opts_given(&t->push))
		r = tally_push_opts_check(&t->push, "--push", "--push-format");
	if (!r && t->smp.freq && t->smp.period)
		r = tally_seterr(-EINVAL, "-F and -c both set the sampling rate: give one");
	return r;
}

static int tally_check(char *const *args)
{
	struct tally_prof t;
	memset(&t, 0, sizeof(t));
	int r = tally_parse(&t, args);
	tally_sampling_release(&t.smp);
	tally_push_opts_release(&t.push);
	return r;
}

static int tally_initialize(struct tally_profiler *p)
{
	tally_release(p);
	struct tally_prof *t = xcalloc(1, sizeof(*t));
	p->state = t;
	int r = tally_parse(t, p->args);
	if (!r)
		r = tally_sampling_resolve(&t->smp);
	if (!r) {
		/* can it sample here at all (privilege, -a as a user)? A recording
		 * opened and closed at once on this process (or the system) says so
		 * now, before any test runs */
		struct tally_recording_opts ro;
		tally_recording_opts_init(&ro);
		ro.smp = &t->smp;
		int self = (int)getpid();
		if (t->all) {
			ro.target = TALLY_TARGET_SYSTEM;
		} else {
			ro.target = TALLY_TARGET_PIDS;
			ro.pids = &self;
			ro.npids = 1;
		}
		struct tally_recording *probe = NULL;
		r = tally_recording_new(&probe, &ro);
		tally_recording_free(probe);
	}
	return r;
}

static void *tally_thread(void *arg)
{
	struct tally_prof *t = arg;
	t->run_ret = tally_recording_run(t->rec);
	if (t->run_ret)
		snprintf(t->err, sizeof(t->err), "%s", tally_errmsg());
	return NULL;
}

static int tally_start(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	struct tally_prof *t = p->state;
	if (!t)
		return tally_seterr(-EINVAL, "not initialized");
	if (!t->all && r->test_pid <= 0)
		return tally_seterr(-EINVAL,
				    "no test process to profile (use -a for the whole system)");
	free(t->db);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s.db", r->profdir, p->label);
	t->db = strbuf_detach(&sb);
	int ret = tally_db_check_target(t->db, false);
	if (ret)
		return ret;
	struct tally_recording_opts ro;
	tally_recording_opts_init(&ro);
	ro.smp = &t->smp;
	int pid = r->test_pid;
	if (t->all) {
		ro.target = TALLY_TARGET_SYSTEM;
	} else {
		ro.target = TALLY_TARGET_PIDS;
		ro.pids = &pid;
		ro.npids = 1;
	}
	ret = tally_recording_new(&t->rec, &ro);
	if (ret)
		return ret;
	ret = tally_recording_start(t->rec);
	if (!ret) {
		t->err[0] = 0;
		t->run_ret = 0;
		ret = -pthread_create(&t->thread, NULL, tally_thread, t);
		if (ret)
			tally_seterr(ret, "cannot start the recording's thread: %s",
				     strerror(-ret));
		else
			t->thread_running = true;
	}
	if (ret) {
		tally_recording_free(t->rec);
		t->rec = NULL;
	}
	return ret;
}

static int tally_stop(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	(void)r;
	struct tally_prof *t = p->state;
	if (!t || !t->rec)
		return tally_seterr(-EINVAL, "not started");
	tally_recording_request_stop(t->rec);
	if (t->thread_running) {
		pthread_join(t->thread, NULL);
		t->thread_running = false;
	}
	int ret = 0;
	char *written = NULL;
	if (t->run_ret)
		ret = tally_seterr(t->run_ret, "%s", t->err);
	else
		ret = tally_recording_finish(t->rec);
	/* what was recorded is written even after a failed round */
	int w = tally_recording_write(t->rec, t->db, false, &written);
	if (!ret)
		ret = w;
	if (written && strcmp(written, t->db)) {
		free(t->db);
		t->db = written;
		written = NULL;
	}
	free(written);
	tally_recording_free(t->rec);
	t->rec = NULL;
	return ret;
}

static int write_text(const char *path, const struct strbuf *sb)
{
	return tally_write_file_atomic(path, sb->buf ? sb->buf : "", sb->len);
}

static int tally_report(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	struct tally_prof *t = p->state;
	if (!t || !t->db)
		return tally_seterr(-EINVAL, "nothing recorded");
	struct tally_db db;
	int ret = tally_db_open_flags(&db, t->db, NULL, TALLY_DB_STACKS_LATER);
	if (ret)
		return ret;
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_symopts so;
	tally_symopts_init(&so);
	struct tally_resolver_opts ro = { 0 };
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	struct tally_resolver *res = NULL;
	struct strbuf out = STRBUF_INIT, path = STRBUF_INIT;
	ret = tally_symopts_prepare(&so, &ro, &w);
	if (!ret)
		ret = tally_select_check(&sel, &db, t->db, &w);
	if (ret)
		goto out;
	ret = tally_resolver_new(&res, &db, &ro);
	if (ret)
		goto out;
	struct tally_report_opts o;
	memset(&o, 0, sizeof(o));
	o.input = t->db;
	o.sel = &sel;
	o.symbols = true;
	tally_report_text(&out, &db, res, &o, &w);
	strbuf_addf(&path, "%s/%s.txt", r->profdir, p->label);
	if ((ret = write_text(path.buf, &out)))
		goto out;
	if (db.has_stacks) {
		if ((ret = tally_db_load_stacks(&db)))
			goto out;
		tally_view_select(&db, &sel);
		memset(&o, 0, sizeof(o));
		o.input = t->db;
		o.sel = &sel;
		o.callgraph = true;
		strbuf_reset(&out);
		tally_report_text(&out, &db, res, &o, &w);
		strbuf_reset(&path);
		strbuf_addf(&path, "%s/%s-callgraph.txt", r->profdir, p->label);
		if ((ret = write_text(path.buf, &out)))
			goto out;
	}
	struct tally_html_opts ho = { t->db, &sel, TALLY_FLAME_DEFAULT_LIMIT, TALLY_HTML_ANNOTATE,
				      0 };
	strbuf_reset(&path);
	strbuf_addf(&path, "%s/%s.html", r->profdir, p->label);
	ret = tally_html_write(path.buf, &db, res, &ho);
	if (!ret && tally_push_opts_given(&t->push)) {
		/* --push: the run's profile, whole, to the service (docs/push.md) */
		struct tally_db all;
		ret = tally_db_open(&all, t->db);
		if (!ret) {
			ret = tally_push_db(&t->push, &all, &ro, NULL);
			if (ret == -ENODATA)
				ret = 0;
			tally_db_release(&all);
		}
	}
out:
	tally_resolver_free(res);
	tally_symopts_release(&so);
	tally_warnings_release(&w);
	strbuf_release(&out);
	strbuf_release(&path);
	tally_db_release(&db);
	return ret;
}

const struct job_builtin job_builtin_tally = {
	.name = "tally",
	.summary =
		"tally's sampler on the test's processes (or -a), database and reports in profiling/",
	.check = tally_check,
	.initialize = tally_initialize,
	.start = tally_start,
	.stop = tally_stop,
	.report = tally_report,
	.release = tally_release,
};

/* ---- cmd and perf: a child process around the test ---- */

struct child_prof {
	char **argv;  /* cmd: the command */
	pid_t pid;
	int pidfd;
	int ctlfd, ackfd; /* perf's control FIFOs, held open while it runs */
	char *log;
};

/* How long a command has to end after SIGINT, then after SIGTERM. */
#define CMD_GRACE 2.0
#define PERF_GRACE 10.0

static void close_fifos(struct child_prof *c)
{
	if (c->ctlfd >= 0)
		close(c->ctlfd);
	if (c->ackfd >= 0)
		close(c->ackfd);
	c->ctlfd = c->ackfd = -1;
}

static void child_release(struct tally_profiler *p)
{
	struct child_prof *c = p->state;
	if (!c)
		return;
	if (c->pid > 0)
		job_end(c->pid, c->pidfd, true, SIGKILL, 0, NULL);
	if (c->pidfd >= 0)
		close(c->pidfd);
	close_fifos(c);
	tally_job_argv_free(c->argv);
	free(c->log);
	free(c);
	p->state = NULL;
}

static struct child_prof *child_state(struct tally_profiler *p)
{
	child_release(p);
	struct child_prof *c = xcalloc(1, sizeof(*c));
	c->pid = -1;
	c->pidfd = -1;
	c->ctlfd = c->ackfd = -1;
	p->state = c;
	return c;
}

static int open_log(const char *profdir, const char *name, char **path)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s", profdir, name);
	int fd = open(sb.buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		int e = errno;
		char q[JOB_QPATH_SIZE];
		tally_seterr(-e, "cannot create '%s': %s", job_qpath_buf(q, sb.buf), strerror(e));
		strbuf_release(&sb);
		return -e;
	}
	*path = strbuf_detach(&sb);
	return fd;
}

/* Stops the child: sig, then SIGTERM and SIGKILL after grace each. 0 when it
 * ended by itself after sig (or exited 0). */
static int child_stop(struct child_prof *c, int sig, double grace, const char *what, bool need_zero,
		      const struct job_intr *intr)
{
	if (c->pid <= 0)
		return tally_seterr(-EINVAL, "not started");
	int st = 0;
	int r = job_wait(c->pid, c->pidfd, 0, -1, &st);
	bool died_before = r == 1;
	/* a ^C while it is given time to end: no more time */
	struct job_intr in = job_intr_now(intr);
	if (!died_before)
		job_end_in(c->pid, c->pidfd, true, sig, grace, &in, &st);
	else
		kill(-c->pid, SIGKILL);
	c->pid = -1;
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->pidfd = -1;
	close_fifos(c);
	bool ok = WIFEXITED(st) ? (!need_zero || WEXITSTATUS(st) == 0) : WTERMSIG(st) == sig;
	if (died_before || !ok) {
		struct strbuf how = STRBUF_INIT;
		job_describe_status(st, &how);
		int ret = died_before && !need_zero && WIFEXITED(st) && WEXITSTATUS(st) == 0
				  ? 0
				  : tally_seterr(-EIO, "%s %s (%s; see its log)", what,
						 died_before ? "ended before the test did"
							     : "did not stop cleanly",
						 how.buf);
		strbuf_release(&how);
		return ret;
	}
	return 0;
}

/* cmd's command: its one argument split as a control file's words are, or
 * its arguments as they are. *out the caller's. */
static int cmd_argv(char *const *args, char ***out)
{
	size_t n = 0;
	while (args && args[n])
		n++;
	if (n == 1) {
		int r = tally_job_split(args[0], out, NULL);
		if (r)
			return r;
	} else {
		*out = tally_job_argv_dup(args);
	}
	if (!(*out)[0])
		return tally_seterr(-EINVAL, "no command (e.g. profilers add cmd 'vmstat 1')");
	return 0;
}

static int cmd_check(char *const *args)
{
	char **argv = NULL;
	int r = cmd_argv(args, &argv);
	tally_job_argv_free(argv);
	return r;
}

/* A command's name as an error quotes it: a path whole (up to PATH_MAX),
 * escaped as every quoted input is. */
static void cmd_name(struct strbuf *sb, const char *argv0)
{
	strbuf_add_excerpt(sb, argv0, strlen(argv0), PATH_MAX);
}

static int cmd_initialize(struct tally_profiler *p)
{
	struct child_prof *c = child_state(p);
	int r = cmd_argv(p->args, &c->argv);
	if (r)
		return r;
	if (!job_in_path(c->argv[0])) {
		struct strbuf q = STRBUF_INIT;
		cmd_name(&q, c->argv[0]);
		r = tally_seterr(-ENOENT, "command '%s' not found in PATH", q.buf);
		strbuf_release(&q);
	}
	return r;
}

static int cmd_start(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	struct child_prof *c = p->state;
	free(c->log);
	c->log = NULL;
	struct strbuf name = STRBUF_INIT;
	strbuf_addf(&name, "%s.log", p->label);
	int fd = open_log(r->profdir, name.buf, &c->log);
	strbuf_release(&name);
	if (fd < 0)
		return fd;
	struct job_spawn s = {
		.argv = c->argv, .out_fd = fd, .err_fd = fd, .go_fd = -1, .fd3 = -1, .fd4 = -1
	};
	int ret = job_spawn(&s, &c->pid, &c->pidfd, NULL);
	close(fd);
	if (ret)
		c->pid = -1;
	return ret;
}

static int cmd_stop(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	(void)r;
	struct child_prof *c = p->state;
	struct strbuf what = STRBUF_INIT;
	strbuf_addch(&what, '\'');
	cmd_name(&what, c->argv[0]);
	strbuf_addch(&what, '\'');
	int ret = child_stop(c, SIGINT, CMD_GRACE, what.buf, false, p->intr);
	strbuf_release(&what);
	return ret;
}

static int cmd_report(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	(void)r;
	struct child_prof *c = p->state;
	struct stat st;
	if (!c->log || stat(c->log, &st) < 0) {
		char q[JOB_QPATH_SIZE];
		return tally_seterr(-ENOENT, "its log '%s' is gone",
				    job_qpath_buf(q, c->log ? c->log : "?"));
	}
	return 0;
}

const struct job_builtin job_builtin_cmd = {
	.name = "cmd",
	.summary = "a command around the test (e.g. 'vmstat 1'), its output in profiling/",
	.check = cmd_check,
	.initialize = cmd_initialize,
	.start = cmd_start,
	.stop = cmd_stop,
	.report = cmd_report,
	.release = child_release,
};

static const char *perf_unavailable(void)
{
	return job_in_path("perf") ? NULL : "'perf' is not installed (Debian package linux-perf)";
}

static int perf_initialize(struct tally_profiler *p)
{
	child_state(p);
	const char *why = perf_unavailable();
	if (why)
		return tally_seterr(-ENOENT, "%s", why);
	/* perf can sample here at all (paranoia, privilege) */
	char *argv[] = { "perf", "record", "-a", "-o", "/dev/null", "--", "true", NULL };
	struct strbuf out = STRBUF_INIT;
	int st = 0;
	struct job_intr in = job_intr_now(p->intr);
	int r = job_run_capture_in(argv, NULL, 30, &in, CMD_GRACE, &out, &st);
	if (r == -EINTR)
		r = tally_seterr(-EINTR, "interrupted (ended by ^C)");
	if (!r && st) {
		struct strbuf last = STRBUF_INIT;
		tally_last_line(out.buf, &last);
		r = tally_seterr(-EPERM, "'perf record -a' cannot run here: %s",
				 last.buf ? last.buf : "?");
		strbuf_release(&last);
	}
	strbuf_release(&out);
	return r;
}

static int perf_start(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	struct child_prof *c = p->state;
	free(c->log);
	c->log = NULL;
	struct strbuf name = STRBUF_INIT, data = STRBUF_INIT, ctl = STRBUF_INIT, ack = STRBUF_INIT,
		      spec = STRBUF_INIT;
	strbuf_addf(&name, "%s.log", p->label);
	int fd = open_log(r->profdir, name.buf, &c->log);
	strbuf_release(&name);
	if (fd < 0)
		return fd;
	/* started disabled, enabled through its control FIFO and its ack waited
	 * for: perf samples before the test begins (perf 6.1 mishandles pipes
	 * given as --control fd:) */
	char dir[] = "/tmp/tally-perf-XXXXXX";
	int ret = 0;
	if (!mkdtemp(dir)) {
		close(fd);
		return tally_seterr(-errno, "cannot make a directory in /tmp: %s", strerror(errno));
	}
	strbuf_addf(&ctl, "%s/ctl", dir);
	strbuf_addf(&ack, "%s/ack", dir);
	strbuf_addf(&spec, "fifo:%s,%s", ctl.buf, ack.buf);
	strbuf_addf(&data, "%s/%s.data", r->profdir, p->label);
	char **argv = NULL;
	size_t n = 0, alloc = 0;
	if (mkfifo(ctl.buf, 0600) < 0 || mkfifo(ack.buf, 0600) < 0) {
		ret = tally_seterr(-errno, "cannot make a FIFO in '%s': %s", dir, strerror(errno));
		goto out;
	}
	/* read-write: opening never blocks, and never sees a hang-up */
	c->ctlfd = open(ctl.buf, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	c->ackfd = open(ack.buf, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (c->ctlfd < 0 || c->ackfd < 0) {
		ret = tally_seterr(-errno, "cannot open a FIFO in '%s': %s", dir, strerror(errno));
		goto out;
	}
	const char *fixed[] = { "perf",      "record", "-a", "-D",    "-1",
				"--control", spec.buf, "-o", data.buf };
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		STRLIST_PUSH(argv, n, alloc, xstrdup(fixed[i]));
	for (char **a = p->args; *a; a++)
		STRLIST_PUSH(argv, n, alloc, xstrdup(*a));
	struct job_spawn s = {
		.argv = argv, .out_fd = fd, .err_fd = fd, .go_fd = -1, .fd3 = -1, .fd4 = -1
	};
	ret = job_spawn(&s, &c->pid, &c->pidfd, NULL);
	if (ret) {
		c->pid = -1;
		goto out;
	}
	ssize_t w = write(c->ctlfd, "enable\n", 7);
	char buf[16] = { 0 };
	double end = tally_now_mono() + 10;
	bool acked = false, interrupted = false;
	struct job_intr in = job_intr_now(p->intr);
	while (w == 7 && !acked && tally_now_mono() < end) {
		struct pollfd pf[3] = { { .fd = c->ackfd, .events = POLLIN },
					{ .fd = in.fd, .events = POLLIN },
					{ .fd = c->pidfd, .events = POLLIN } };
		if (poll(pf, c->pidfd >= 0 ? 3 : 2, 100) < 0 && errno != EINTR)
			break;
		if ((pf[1].revents & POLLIN) && job_intr_came(&in)) {
			interrupted = true;
			break;
		}
		if (pf[0].revents & POLLIN) {
			ssize_t k = read(c->ackfd, buf, sizeof(buf) - 1);
			acked = k > 0 && !strncmp(buf, "ack", 3);
			break;
		}
		if (c->pidfd >= 0 && (pf[2].revents & POLLIN))
			break;
	}
	if (!acked) {
		child_stop(c, SIGKILL, 0, "perf", false, NULL);
		char q[JOB_QPATH_SIZE];
		ret = interrupted
			      ? tally_seterr(-EINTR,
					     "interrupted (ended by ^C) while perf record started")
			      : tally_seterr(-EIO, "perf record did not start (see '%s')",
					     job_qpath_buf(q, c->log));
	}
out:
	close(fd);
	unlink(ctl.buf);
	unlink(ack.buf);
	rmdir(dir);
	tally_job_argv_free(argv);
	strbuf_release(&data);
	strbuf_release(&ctl);
	strbuf_release(&ack);
	strbuf_release(&spec);
	return ret;
}

static int perf_stop(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	(void)r;
	/* perf writes its file on SIGINT and exits 0 */
	return child_stop(p->state, SIGINT, PERF_GRACE, "perf record", true, p->intr);
}

static int perf_report(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	static const char *const keys[] = { "dso", "sym" };
	int ret = 0;
	for (size_t k = 0; k < ARRAY_SIZE(keys) && !ret; k++) {
		struct strbuf data = STRBUF_INIT, name = STRBUF_INIT, out = STRBUF_INIT;
		strbuf_addf(&data, "%s/%s.data", r->profdir, p->label);
		strbuf_addf(&name, "%s.%s.txt", p->label, keys[k]);
		char *path = NULL;
		int fd = open_log(r->profdir, name.buf, &path);
		if (fd < 0) {
			ret = fd;
		} else {
			char *argv[] = { "perf",   "report", "--stdio",       "-i",
					 data.buf, "--sort", (char *)keys[k], NULL };
			struct job_spawn s = { .argv = argv,
					       .out_fd = fd,
					       .err_fd = -1,
					       .go_fd = -1,
					       .fd3 = -1,
					       .fd4 = -1 };
			pid_t pid;
			int pidfd, st = 0;
			ret = job_spawn(&s, &pid, &pidfd, NULL);
			close(fd);
			if (!ret) {
				struct job_intr in = job_intr_now(p->intr);
				int w = job_wait_in(pid, pidfd, 600, &in, &st);
				if (w == -EINTR) {
					struct job_intr next = job_intr_now(p->intr);
					job_end_in(pid, pidfd, true, SIGTERM, CMD_GRACE, &next,
						   &st);
					ret = tally_seterr(
						-EINTR,
						"perf report --sort %s interrupted (ended by ^C)",
						keys[k]);
				} else if (w != 1) {
					job_end(pid, pidfd, true, SIGKILL, 0, &st);
					ret = tally_seterr(
						-ETIMEDOUT,
						"perf report --sort %s took more than 600 s",
						keys[k]);
				} else if (st) {
					struct strbuf how = STRBUF_INIT;
					job_describe_status(st, &how);
					ret = tally_seterr(-EIO,
							   "perf report --sort %s failed (%s)",
							   keys[k], how.buf);
					strbuf_release(&how);
				}
				if (pidfd >= 0)
					close(pidfd);
			}
		}
		free(path);
		strbuf_release(&data);
		strbuf_release(&name);
		strbuf_release(&out);
	}
	return ret;
}

const struct job_builtin job_builtin_perf = {
	.name = "perf",
	.summary = "Linux perf record -a around the test, perf report per dso and per symbol",
	.unavailable = perf_unavailable,
	.initialize = perf_initialize,
	.start = perf_start,
	.stop = perf_stop,
	.report = perf_report,
	.release = child_release,
};
