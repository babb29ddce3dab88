/* A job (tally_job_new, tally_job_run; job.h): the control file read and its
 * profilers found before anything runs, every profiler set up and
 * initialized before any test, then each run: the test's iterations
 * (unprofiled, then one profiled; or every one profiled with 'profilers only
 * on'), the active profilers started in the order added and stopped in
 * reverse around each profiled iteration, reported, and the results written
 * under RESULTS/TAG/ with a job-wide status.json rewritten after every test,
 * so that an interrupted job leaves whole results. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tally/remote.h"
#include "tally/json.h"

/* How long a test has to end after SIGINT (^C) or SIGTERM (time out) before
 * the next signal. */
#define TEST_GRACE 2.0

struct iter {
	unsigned n;
	bool profiled;
	int exit_code;
	double time;
	char *reason; /* NULL: it passed */
};

struct perr {
	char *label, *step, *msg;
	char *host; /* a host's failure: which (NULL: here, or every host) */
};

/* One test as status.json tells it. */
struct test_rec {
	const struct tally_job_step *s;
	bool good;
	int code;
	double time;
	const char *reason; /* one of its's, or NULL */
	const char *profiling;
	struct iter *its;
	size_t nits;
	char **labels;     /* the active profilers */
	double (*secs)[3]; /* per profiler: seconds in start, stop, report */
	size_t nact;
	struct perr *errs;
	size_t nerrs, aerrs;
	struct job_host_iter *hits; /* each host in each profiled iteration (remote jobs) */
	size_t nhits;
	struct strbuf errtext; /* the errors, "; "-separated, for its status */
};

static void test_rec_release(struct test_rec *t)
{
	for (size_t i = 0; i < t->nits; i++)
		free(t->its[i].reason);
	free(t->its);
	tally_job_argv_free(t->labels);
	free(t->secs);
	for (size_t i = 0; i < t->nerrs; i++) {
		free(t->errs[i].label);
		free(t->errs[i].step);
		free(t->errs[i].msg);
		free(t->errs[i].host);
	}
	free(t->errs);
	job_host_iters_free(t->hits, t->nhits, true);
	strbuf_release(&t->errtext);
}

struct loaded {
	struct tally_profiler *p; /* NULL for steps that add none */
	bool setup_ran;
	const char *setup; /* for status.json */
};

struct tally_job {
	struct tally_job_opts o;
	struct tally_job_control ctl;
	struct tally_profiler_env env;
	char *state_dir;
	char *results;
	char *absresults; /* what the profilers are given: they may change directory */
	struct loaded *profs; /* one per step */
	int intr[2];
	volatile sig_atomic_t interrupted; /* how many ^C */
	struct job_intr jintr;             /* what the profilers' steps are ended by */
	unsigned failed, ntests;
	struct test_rec *recs; /* the tests run, for status.json */
	size_t nrecs, arecs;
	const char *status;  /* job status: RUNNING, GOOD, FAIL, INTERRUPTED, ERROR */
	char *error;
	double started;
	bool ran;
	struct job_hosts *hosts; /* NULL: the profilers run here */
	int lockfd;              /* the results directory, locked while the job runs */
	pid_t pid;               /* the job's process */
	struct job_watch watch;  /* what ends the job's leftovers were it killed */
};

static void progress(struct tally_job *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void progress(struct tally_job *j, const char *fmt, ...)
{
	if (!j->o.progress)
		return;
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	j->o.progress(j->o.progress_ctx, sb.buf);
	strbuf_release(&sb);
}

void tally_job_interrupt(struct tally_job *j)
{
	if (!j)
		return;
	int e = errno;
	/* the count before the byte: a wait woken by the byte sees it */
	j->interrupted++;
	ssize_t w = write(j->intr[1], "x", 1);
	(void)w;
	errno = e;
}

unsigned tally_job_failed(const struct tally_job *j)
{
	return j->failed;
}

unsigned tally_job_tests(const struct tally_job *j)
{
	return j->ntests;
}

const char *tally_job_results(const struct tally_job *j)
{
	return j->results;
}

void tally_job_free(struct tally_job *j)
{
	if (j && j->hosts) {
		job_hosts_free(j->hosts);
		j->hosts = NULL;
	}
	if (!j)
		return;
	for (size_t i = 0; i < j->ctl.n && j->profs; i++)
		tally_profiler_free(j->profs[i].p);
	free(j->profs);
	tally_job_control_release(&j->ctl);
	tally_job_argv_free(j->env.path);
	free(j->state_dir);
	free(j->results);
	free(j->absresults);
	free(j->error);
	for (size_t i = 0; i < j->nrecs; i++)
		test_rec_release(&j->recs[i]);
	free(j->recs);
	job_watch_end(&j->watch);
	if (j->lockfd >= 0)
		close(j->lockfd);
	if (j->intr[0] >= 0)
		close(j->intr[0]);
	if (j->intr[1] >= 0)
		close(j->intr[1]);
	free(j);
}

/* "'PATH' line N: " before the message just set. */
static int at_line(struct tally_job *j, unsigned line, int r)
{
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", tally_errmsg());
	char q[JOB_QPATH_SIZE];
	return tally_seterr(r, "'%s' line %u: %s", job_qpath_buf(q, j->ctl.path), line, msg);
}

/* cmd's files are named after its command: cmd-vmstat */
static char *base_label(const struct tally_job_step *s)
{
	if (strcmp(s->name, "cmd") || !s->args[0])
		return xstrdup(s->name);
	char **w = NULL;
	const char *cmd = s->args[0];
	if (!s->args[1] && !tally_job_split(s->args[0], &w, NULL) && w[0])
		cmd = w[0];
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "cmd-");
	for (const char *p = tally_basename(cmd); *p; p++)
		strbuf_addch(&sb, (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
						  (*p >= '0' && *p <= '9') || *p == '-' ||
						  *p == '_' || *p == '.'
					  ? *p
					  : '_');
	tally_job_argv_free(w);
	return strbuf_detach(&sb);
}

static bool label_taken(const struct tally_job *j, size_t upto, const char *label)
{
	for (size_t i = 0; i < upto; i++)
		if (j->profs[i].p && !strcmp(tally_profiler_label(j->profs[i].p), label))
			return true;
	return false;
}

static char *default_results(const char *control)
{
	const char *b = tally_basename(control);
	const char *dot = strrchr(b, '.');
	size_t len = dot && dot != b ? (size_t)(dot - b) : strlen(b);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "results/");
	if (!len)
		strbuf_addstr(&sb, "job");
	else
		strbuf_add(&sb, b, len);
	return strbuf_detach(&sb);
}

/* ---- room for the last status.json ---- */

/* Room kept beside status.json while the job runs, given up for the last
 * status.json when the disk is full (a test filled it): the job never ends
 * with its status.json saying RUNNING for want of a few kilobytes. */
#define RESERVE_NAME ".status-reserve"
#define RESERVE_SIZE (1 << 20)

static void reserve_path(const char *dir, struct strbuf *sb)
{
	strbuf_addf(sb, "%s/" RESERVE_NAME, dir);
}

/* The room beside status.json (in dir) given back: 0, or -ENOENT when there
 * was none. */
static int reserve_release(const char *dir)
{
	struct strbuf sb = STRBUF_INIT;
	reserve_path(dir, &sb);
	int r = unlink(sb.buf) < 0 ? -errno : 0;
	strbuf_release(&sb);
	return r;
}

/* The room made (best effort: without it, the job runs as it would). */
static void reserve_make(const char *dir)
{
	struct strbuf sb = STRBUF_INIT;
	reserve_path(dir, &sb);
	int fd = open(sb.buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0 && posix_fallocate(fd, 0, RESERVE_SIZE) != 0)
		unlink(sb.buf);
	if (fd >= 0)
		close(fd);
	strbuf_release(&sb);
}

/* ---- a job that died ---- */

/* The end of the JSON string at s[i] ('"'): the index after its closing
 * quote, 0 when there is none. */
static size_t json_str_end(const char *s, size_t n, size_t i)
{
	for (i++; i < n; i++) {
		if (s[i] == '\\')
			i++;
		else if (s[i] == '"')
			return i + 1;
	}
	return 0;
}

/* The end of the JSON value at s[i] (objects and arrays skipped whole): the
 * index after it, 0 when it has none. */
static size_t json_value_end(const char *s, size_t n, size_t i)
{
	int depth = 0;
	for (; i < n; i++) {
		char c = s[i];
		if (c == '"') {
			size_t e = json_str_end(s, n, i);
			if (!e)
				return 0;
			if (!depth)
				return e;
			i = e - 1;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			if (!depth)
				return i;
			if (!--depth)
				return i + 1;
		} else if (!depth && c == ',') {
			return i;
		}
	}
	return depth ? 0 : i;
}

static size_t json_ws(const char *s, size_t n, size_t i)
{
	while (i < n && isspace((unsigned char)s[i]))
		i++;
	return i;
}

/* Where the value of the top-level key "status" of a status.json is: true
 * with [*v0, *v1). */
static bool json_top_status(const char *s, size_t n, size_t *v0, size_t *v1)
{
	size_t i = json_ws(s, n, 0);
	if (i >= n || s[i] != '{')
		return false;
	for (i++;;) {
		i = json_ws(s, n, i);
		if (i >= n || s[i] != '"')
			return false;
		size_t k0 = i, k1 = json_str_end(s, n, i);
		if (!k1)
			return false;
		i = json_ws(s, n, k1);
		if (i >= n || s[i] != ':')
			return false;
		i = json_ws(s, n, i + 1);
		size_t e = json_value_end(s, n, i);
		if (!e || e <= i)
			return false;
		if (k1 - k0 == 8 && !memcmp(s + k0, "\"status\"", 8)) {
			*v0 = i;
			*v1 = e;
			return true;
		}
		i = json_ws(s, n, e);
		if (i >= n || s[i] != ',')
			return false;
		i++;
	}
}

/* A status.json (in dir) that says RUNNING says ERROR instead, with why:
 * its job died. 1 when it was changed, 0 when it did not say RUNNING,
 * -errno. */
static int mark_dead(const char *dir, const char *why)
{
	struct strbuf path = STRBUF_INIT, sb = STRBUF_INIT, out = STRBUF_INIT;
	strbuf_addf(&path, "%s/status.json", dir);
	reserve_release(dir); /* the job is over: its room is for this write */
	size_t v0, v1;
	int ret = tally_read_regular(&sb, AT_FDCWD, path.buf, 0, 1ULL << 28);
	if (!ret && sb.buf && json_top_status(sb.buf, sb.len, &v0, &v1) && v1 - v0 == 9 &&
	    !memcmp(sb.buf + v0, "\"RUNNING\"", 9)) {
		strbuf_add(&out, sb.buf, v0);
		strbuf_addstr(&out, "\"ERROR\",\"error\":");
		strbuf_add_json_str(&out, why);
		strbuf_add(&out, sb.buf + v1, sb.len - v1);
		ret = tally_write_file_atomic_mode(path.buf, out.buf, out.len, 0644);
		if (!ret)
			ret = 1;
	}
	strbuf_release(&path);
	strbuf_release(&sb);
	strbuf_release(&out);
	return ret;
}

/* Results that exist: 1 when their job died (status.json RUNNING, nobody
 * holds their lock; now marked so), -1 when a job holds them, 0 else. */
static int results_dead(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int ret = 0;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		ret = errno == EWOULDBLOCK ? -1 : 0;
	else if (
		mark_dead(
			dir,
			"the job died before it finished (killed: kill -9, the OOM killer, or a crash); found by the next run") ==
		1)
		ret = 1;
	close(fd);
	return ret;
}

/* In the watcher, after the job died and what it left was ended. */
static void job_died(void *ctx, const char *note)
{
	struct tally_job *j = ctx;
	struct strbuf why = STRBUF_INIT;
	if (strncmp(note, "test ", 5)) {
		/* no test ran: nothing to keep, and nothing to stop a rerun */
		tally_remove_tree(j->absresults);
		return;
	}
	strbuf_addf(
		&why,
		"the job (pid %d) died before it finished%s%s (killed: kill -9, the OOM killer, or a crash); what it had started was ended",
		(int)j->pid, *note ? " while " : "", note);
	mark_dead(j->absresults, why.buf);
	strbuf_release(&why);
}

/* The results directory, new: made in a directory that nobody but us and
 * root can change (a shared one, /tmp, only when sticky and what is on the
 * way ours), so that what the job writes there cannot be sent elsewhere
 * (tally_dir_check); absresults is its path without links. */
static int make_results(struct tally_job *j)
{
	size_t len = strlen(j->results);
	while (len > 1 && j->results[len - 1] == '/')
		j->results[--len] = 0;
	char *parent = tally_dirname(j->results), *rparent = NULL;
	struct strbuf q = STRBUF_INIT, msg = STRBUF_INIT, path = STRBUF_INIT;
	int ret = tally_dir_check(parent, 0755, TALLY_DIR_SHARED, &rparent);
	if (ret) {
		strbuf_addstr(&msg, tally_errmsg());
		ret = tally_seterr(
			ret,
			"cannot make the results '%s': %s (give -r DIR in a directory of your own)",
			job_qpath(&q, j->results), msg.buf);
		goto out;
	}
	strbuf_addf(&path, "%s/%s", strcmp(rparent, "/") ? rparent : "",
		    tally_basename(j->results));
	if (mkdir(path.buf, 0755) < 0) {
		int e = errno;
		int dead = e == EEXIST ? results_dead(path.buf) : 0;
		if (dead > 0)
			ret = tally_seterr(
				-EEXIST,
				"results '%s' already exist, of a job that died before it finished (its status.json said RUNNING, now ERROR): give another -r DIR or move them away",
				job_qpath(&q, j->results));
		else if (dead < 0)
			ret = tally_seterr(
				-EEXIST,
				"results '%s' are being written by a job that still runs: give another -r DIR",
				job_qpath(&q, j->results));
		else if (e == EEXIST)
			ret = tally_seterr(
				-EEXIST,
				"results '%s' already exist: give another -r DIR or move them away (results are never overwritten)",
				job_qpath(&q, j->results));
		else
			ret = tally_seterr(-e, "cannot make the results directory '%s': %s",
					   job_qpath(&q, j->results), strerror(e));
		goto out;
	}
	/* held while the job runs: a status.json that says RUNNING with the
	 * lock free is a job that died */
	j->lockfd = open(path.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (j->lockfd < 0 || flock(j->lockfd, LOCK_EX | LOCK_NB) < 0) {
		ret = tally_seterr(-errno, "cannot lock the results directory '%s': %s",
				   job_qpath(&q, j->results), strerror(errno));
		goto out;
	}
	reserve_make(path.buf);
	j->absresults = strbuf_detach(&path);
out:
	free(parent);
	free(rparent);
	strbuf_release(&q);
	strbuf_release(&msg);
	strbuf_release(&path);
	return ret;
}

int tally_job_new(struct tally_job **out, const struct tally_job_opts *o)
{
	struct tally_job *j = xcalloc(1, sizeof(*j));
	j->o = *o;
	j->intr[0] = j->intr[1] = -1;
	j->lockfd = -1;
	j->watch = (struct job_watch){ -1, -1 };
	j->status = "RUNNING";
	int ret = tally_job_control_read(&j->ctl, o->control);
	if (ret) {
		/* missing, unreadable, a directory: the control file's fault (exit 2) */
		ret = -EINVAL;
		goto fail;
	}
	tally_profilers_path(o->profilers_path, &j->env.path);
	j->state_dir = o->state_dir ? xstrdup(o->state_dir) : tally_profilers_state_dir();
	if (j->state_dir && j->state_dir[0] != '/') {
		/* TALLY_SRCDIR must hold wherever a plugin runs */
		char *cwd = getcwd(NULL, 0);
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s/%s", cwd ? cwd : ".", j->state_dir);
		free(cwd);
		free(j->state_dir);
		j->state_dir = strbuf_detach(&sb);
	}
	j->env.state_dir = j->state_dir;
	j->profs = xcalloc(j->ctl.n, sizeof(*j->profs));
	for (size_t i = 0; i < j->ctl.n; i++) {
		const struct tally_job_step *s = &j->ctl.steps[i];
		if (s->cmd != TALLY_JOB_ADD)
			continue;
		ret = tally_profiler_find(&j->profs[i].p, s->name, s->args, &j->env);
		if (ret) {
			/* an unknown one is the control file's mistake, as a bad
			 * command is (exit 2); one that may not be run is not */
			ret = at_line(j, s->line, ret == -ENOENT ? -EINVAL : ret);
			goto fail;
		}
		char *base = base_label(s);
		struct strbuf sb = STRBUF_INIT;
		strbuf_addstr(&sb, base);
		for (unsigned k = 2; label_taken(j, i, sb.buf); k++) {
			strbuf_reset(&sb);
			strbuf_addf(&sb, "%s.%u", base, k);
		}
		tally_profiler_set_label(j->profs[i].p, sb.buf);
		strbuf_release(&sb);
		free(base);
	}
	j->results = o->results ? xstrdup(o->results) : default_results(o->control);
	if ((ret = make_results(j)))
		goto fail;
	/* the control file beside its results */
	{
		struct strbuf sb = STRBUF_INIT, path = STRBUF_INIT;
		tally_read_regular(&sb, AT_FDCWD, o->control, TALLY_OPEN_FOLLOW, 1 << 20);
		strbuf_addf(&path, "%s/control", j->results);
		ret = tally_write_file_atomic_mode(path.buf, sb.buf ? sb.buf : "", sb.len, 0644);
		strbuf_release(&sb);
		strbuf_release(&path);
		if (ret)
			goto fail;
	}
	if (pipe2(j->intr, O_CLOEXEC | O_NONBLOCK) < 0) {
		ret = tally_seterr(-errno, "cannot make a pipe: %s", strerror(errno));
		goto fail;
	}
	j->jintr = (struct job_intr){ j->intr[0], &j->interrupted, 0 };
	for (size_t i = 0; i < j->ctl.n; i++)
		if (j->profs[i].p)
			j->profs[i].p->intr = &j->jintr;
	/* the hosts: --host, then the control file's 'hosts' lines */
	char **hosts = NULL;
	size_t nhosts = 0, ahosts = 0;
	for (size_t i = 0; i < o->nhosts; i++) {
		GROW(hosts, ahosts, nhosts + 1);
		hosts[nhosts++] = o->hosts[i];
	}
	for (size_t i = 0; i < j->ctl.n; i++)
		for (size_t k = 0;
		     j->ctl.steps[i].cmd == TALLY_JOB_HOSTS && j->ctl.steps[i].args[k]; k++) {
			GROW(hosts, ahosts, nhosts + 1);
			hosts[nhosts++] = j->ctl.steps[i].args[k];
		}
	if (nhosts) {
		/* the profilers run on the hosts, each through its agent: they are
		 * given there as the control file gives them */
		struct strbuf labels = STRBUF_INIT, q = STRBUF_INIT;
		char *prof = tally_job_control_profilers(&j->ctl);
		for (size_t i = 0; i < j->ctl.n; i++)
			if (j->ctl.steps[i].cmd == TALLY_JOB_ADD)
				strbuf_addf(&labels, "%s%s", labels.len ? ", " : "",
					    tally_profiler_label(j->profs[i].p));
		const char *base = tally_basename(o->control);
		strbuf_add(&q, base, strcspn(base, "."));
		for (size_t i = 0; i < q.len; i++)
			if (!isalnum((unsigned char)q.buf[i]) && q.buf[i] != '-' && q.buf[i] != '_')
				q.buf[i] = '_';
		ret = job_hosts_new(&j->hosts, hosts, nhosts, o->remote_root, o->host_timeout,
				    q.len ? q.buf : "job", prof, labels.buf ? labels.buf : "",
				    &j->env);
		free(hosts);
		hosts = NULL;
		free(prof);
		strbuf_release(&labels);
		strbuf_release(&q);
		if (ret)
			goto fail;
	}
	j->started = tally_now_wall();
	*out = j;
	return 0;
fail:
	tally_job_free(j);
	*out = NULL;
	return ret;
}

/* ---- status.json ---- */

/* path replaced atomically by data (a temporary beside it, renamed), without
 * the fsync of tally_write_file_atomic: an interrupted job leaves the old file
 * or the new one, and the per-test writes stay off the test's critical path
 * (a sync costs milliseconds here); the job's last status.json is synced. */
static int write_status_file(const char *path, const char *data, size_t len, bool sync)
{
	if (sync) {
		/* the job's last status.json: on a full disk, with the room kept */
		int r = tally_write_file_atomic_mode(path, data, len, 0644);
		if ((r == -ENOSPC || r == -EDQUOT)) {
			char *dir = tally_dirname(path);
			if (!reserve_release(dir))
				r = tally_write_file_atomic_mode(path, data, len, 0644);
			free(dir);
		}
		return r;
	}
	struct strbuf tmp = STRBUF_INIT;
	strbuf_addf(&tmp, "%s.tmp-XXXXXX", path);
	int fd = mkostemp(tmp.buf, O_CLOEXEC);
	int ret = 0;
	if (fd < 0 || fchmod(fd, 0644) < 0 || tally_write_all(fd, data, len) < 0) {
		int e = errno;
		char q[JOB_QPATH_SIZE];
		ret = tally_seterr(-e, "cannot write '%s': %s", job_qpath_buf(q, path),
				   strerror(e));
	}
	if (fd >= 0 && close(fd) < 0 && !ret) {
		char q[JOB_QPATH_SIZE];
		ret = tally_seterr(-errno, "cannot write '%s': %s", job_qpath_buf(q, path),
				   strerror(errno));
	}
	if (!ret && rename(tmp.buf, path) < 0) {
		char q[JOB_QPATH_SIZE];
		ret = tally_seterr(-errno, "cannot write '%s': %s", job_qpath_buf(q, path),
				   strerror(errno));
	}
	if (ret && fd >= 0)
		unlink(tmp.buf);
	strbuf_release(&tmp);
	return ret;
}

static void json_argv(struct tally_json *js, const char *key, char *const *argv)
{
	tally_json_karr(js, key);
	for (size_t i = 0; argv && argv[i]; i++)
		tally_json_str(js, argv[i]);
	tally_json_end(js);
}

static void json_test(struct tally_json *js, const struct test_rec *t)
{
	tally_json_obj(js);
	tally_json_kstr(js, "tag", t->s->tag);
	tally_json_ku64(js, "line", t->s->line);
	json_argv(js, t->s->command ? "command" : "test", t->s->args);
	tally_json_kstr(js, "status", t->good ? "GOOD" : "FAIL");
	tally_json_ki64(js, "exit", t->code);
	tally_json_knum(js, "time", t->time, 6);
	tally_json_kstr(js, "reason", t->reason);
	if (t->s->timeout > 0)
		tally_json_knum(js, "timeout", t->s->timeout, 3);
	tally_json_karr(js, "iterations");
	for (size_t i = 0; i < t->nits; i++) {
		tally_json_obj(js);
		tally_json_ku64(js, "n", t->its[i].n);
		tally_json_kbool(js, "profiled", t->its[i].profiled);
		tally_json_ki64(js, "exit", t->its[i].exit_code);
		tally_json_knum(js, "time", t->its[i].time, 6);
		tally_json_end(js);
	}
	tally_json_end(js);
	tally_json_karr(js, "profilers");
	for (size_t i = 0; i < t->nact; i++) {
		tally_json_obj(js);
		tally_json_kstr(js, "label", t->labels[i]);
		if (t->hits) {
			/* on hosts: each host's times are in "hosts" */
			tally_json_knull(js, "start");
			tally_json_knull(js, "stop");
			tally_json_knull(js, "report");
		} else {
			tally_json_knum(js, "start", t->secs[i][0], 6);
			tally_json_knum(js, "stop", t->secs[i][1], 6);
			tally_json_knum(js, "report", t->secs[i][2], 6);
		}
		tally_json_end(js);
	}
	tally_json_end(js);
	if (t->hits)
		job_host_iters_json(t->hits, t->nhits, js);
	tally_json_kstr(js, "profiling", t->profiling);
	tally_json_karr(js, "profiler_errors");
	for (size_t i = 0; i < t->nerrs; i++) {
		tally_json_obj(js);
		tally_json_kstr(js, "profiler", t->errs[i].label);
		if (t->errs[i].host)
			tally_json_kstr(js, "host", t->errs[i].host);
		tally_json_kstr(js, "step", t->errs[i].step);
		tally_json_kstr(js, "message", t->errs[i].msg);
		tally_json_end(js);
	}
	tally_json_end(js);
	tally_json_end(js);
}

static int write_status_json(struct tally_job *j, bool sync)
{
	struct strbuf sb = STRBUF_INIT, path = STRBUF_INIT;
	char when[64], now[64];
	tally_format_utc(j->started, when, sizeof(when));
	tally_format_utc(tally_now_wall(), now, sizeof(now));
	struct tally_json js;
	tally_json_init(&js, &sb);
	tally_json_obj(&js);
	tally_json_kstr(&js, "control", j->ctl.path);
	tally_json_kstr(&js, "results", j->results);
	tally_json_kstr(&js, "status", j->status);
	tally_json_kstr(&js, "started", when);
	tally_json_kstr(&js, "updated", now);
	tally_json_ku64(&js, "tests_run", j->ntests);
	tally_json_ku64(&js, "tests_failed", j->failed);
	if (j->error)
		tally_json_kstr(&js, "error", j->error);
	tally_json_karr(&js, "profilers");
	for (size_t i = 0; i < j->ctl.n; i++) {
		struct tally_profiler *p = j->profs[i].p;
		if (!p)
			continue;
		tally_json_obj(&js);
		tally_json_kstr(&js, "name", tally_profiler_name(p));
		tally_json_kstr(&js, "label", tally_profiler_label(p));
		tally_json_ku64(&js, "line", j->ctl.steps[i].line);
		json_argv(&js, "args", j->ctl.steps[i].args);
		tally_json_kstr(&js, "where", tally_profiler_where(p));
		tally_json_kstr(&js, "version", p->version);
		tally_json_kstr(&js, "setup", j->profs[i].setup ? j->profs[i].setup : "not loaded");
		tally_json_end(&js);
	}
	tally_json_end(&js);
	if (j->hosts)
		job_hosts_json(j->hosts, &js);
	tally_json_karr(&js, "tests");
	for (size_t i = 0; i < j->nrecs; i++)
		json_test(&js, &j->recs[i]);
	tally_json_end(&js);
	tally_json_end(&js);
	strbuf_addch(&sb, '\n');
	strbuf_addf(&path, "%s/status.json", j->results);
	int r = write_status_file(path.buf, sb.buf, sb.len, sync);
	strbuf_release(&sb);
	strbuf_release(&path);
	return r;
}

/* ---- tests ---- */

static int sleeptest(void *arg)
{
	double secs = *(const double *)arg;
	struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return 0;
}

static void proferr(struct test_rec *t, const struct tally_profiler *p, const char *step,
		    const char *msg)
{
	strbuf_addf(&t->errtext, "%s%s", t->errtext.len ? "; " : "", msg);
	GROW(t->errs, t->aerrs, t->nerrs + 1);
	t->errs[t->nerrs++] = (struct perr){ xstrdup(tally_profiler_label(p)), xstrdup(step),
					     xstrdup(msg), NULL };
}

/* What a host (NULL: the hosts together) said of an iteration: its profiling
 * is incomplete. */
static void hosterr(struct test_rec *t, const char *host, const char *step, const char *msg)
{
	strbuf_addf(&t->errtext, "%s%s", t->errtext.len ? "; " : "", msg);
	GROW(t->errs, t->aerrs, t->nerrs + 1);
	t->errs[t->nerrs++] = (struct perr){ xstrdup("hosts"), xstrdup(step), xstrdup(msg),
					     host ? xstrdup(host) : NULL };
}

/* One iteration: the test started (waiting for its go), the profilers started,
 * the test let go and waited for, the profilers stopped and reported. */
static void run_iteration(struct tally_job *j, const struct tally_job_step *s,
			  struct tally_profiler **act, size_t nact, const char *profdir, int outfd,
			  struct iter *it, struct test_rec *pe)
{
	int go[2] = { -1, -1 };
	double secs = 0;
	if (!s->command && s->args[1] && strcmp(s->args[1], "0"))
		tally_parse_duration(s->args[1], "sleeptest", &secs);
	if (pipe2(go, O_CLOEXEC) < 0) {
		it->reason = xstrdup("cannot make a pipe");
		it->exit_code = -1;
		return;
	}
	struct job_spawn sp = { .argv = s->args,
				.out_fd = outfd,
				.err_fd = outfd,
				.go_fd = go[0],
				.fd3 = -1,
				.fd4 = -1 };
	if (!s->command) {
		sp.fn = sleeptest;
		sp.arg = &secs;
	}
	pid_t pid;
	int pidfd = -1, errp = -1;
	if (job_spawn(&sp, &pid, &pidfd, &errp)) {
		it->reason = xstrdup(tally_errmsg());
		it->exit_code = -1;
		close(go[0]);
		close(go[1]);
		return;
	}
	close(go[0]);
	bool *started = xcalloc(nact + 1, sizeof(bool));
	struct tally_profiler_run run = { profdir, s->tag, it->n, pid };
	struct strbuf herrs = STRBUF_INIT, hnotes = STRBUF_INIT;
	if (it->profiled && j->hosts) {
		/* every host recording before the test begins: a barrier */
		struct strbuf idx = STRBUF_INIT;
		for (size_t i = 0; i < nact; i++) {
			size_t k = 0;
			for (size_t a = 0; a < j->ctl.n; a++) {
				if (j->ctl.steps[a].cmd != TALLY_JOB_ADD)
					continue;
				if (j->profs[a].p == act[i])
					strbuf_addf(&idx, "%s%zu", idx.len ? "," : "", k);
				k++;
			}
		}
		double h0 = tally_now_mono();
		job_hosts_start(j->hosts, s->tag, it->n, idx.len ? idx.buf : "-", &herrs, &hnotes);
		progress(j, "HOSTS %s: recording on every host after %.3f s", s->tag,
			 tally_now_mono() - h0);
		strbuf_release(&idx);
	}
	if (it->profiled && !j->hosts)
		for (size_t i = 0; i < nact; i++) {
			double t = tally_now_mono();
			if (tally_profiler_start(act[i], &run))
				proferr(pe, act[i], "start", tally_errmsg());
			else
				started[i] = true;
			pe->secs[i][0] += tally_now_mono() - t;
		}
	double t0 = tally_now_mono();
	ssize_t w = write(go[1], "g", 1);
	(void)w;
	close(go[1]);
	int ee = job_exec_error(errp);
	if (ee) {
		struct strbuf sb = STRBUF_INIT;
		char q[TALLY_EXCERPT_SIZE];
		strbuf_addf(&sb, "cannot run '%s': %s", tally_excerpt(q, s->args[0]),
			    strerror(-ee));
		it->reason = strbuf_detach(&sb);
		dprintf(outfd, "tally: %s\n", it->reason);
	}
	int st = 0;
	/* any ^C of the job ends the test, even one during its profilers' start */
	int r = job_wait_in(pid, pidfd, s->timeout > 0 ? s->timeout : -1, &j->jintr, &st);
	struct job_intr next = job_intr_now(&j->jintr); /* which ends its grace */
	if (r == 0) {
		job_end_in(pid, pidfd, true, SIGTERM, TEST_GRACE, &next, &st);
		if (!it->reason) {
			struct strbuf sb = STRBUF_INIT;
			strbuf_addf(&sb, "timed out after %g s", s->timeout);
			it->reason = strbuf_detach(&sb);
		}
	} else if (r < 0) {
		job_end_in(pid, pidfd, true, SIGINT, TEST_GRACE, &next, &st);
		if (!it->reason)
			it->reason = xstrdup("interrupted");
	}
	it->time = tally_now_mono() - t0;
	kill(-pid, SIGKILL); /* what the test left in its group */
	if (pidfd >= 0)
		close(pidfd);
	it->exit_code = job_exit_code(st);
	if (!it->reason && st) {
		struct strbuf sb = STRBUF_INIT;
		job_describe_status(st, &sb);
		it->reason = strbuf_detach(&sb);
	}
	if (it->profiled && j->hosts) {
		job_hosts_stop(j->hosts, profdir, &herrs, &hnotes);
		struct strbuf merr = STRBUF_INIT;
		job_hosts_merge(j->hosts, profdir, j->intr[0], &merr);
		if (merr.len)
			strbuf_addf(&herrs, "%s%s", herrs.len ? "; " : "", merr.buf);
		/* each host's failures as its own entries, by step */
		struct job_host_iter *hv;
		size_t hn;
		job_hosts_iteration(j->hosts, &hv, &hn);
		for (size_t i = 0; i < hn; i++) {
			if (hv[i].note)
				hosterr(pe, hv[i].host, "recover", hv[i].note);
			if (hv[i].start_err)
				hosterr(pe, hv[i].host, "start", hv[i].start_err);
			if (hv[i].stop_err)
				hosterr(pe, hv[i].host, "stop", hv[i].stop_err);
			if (hv[i].pull_err)
				hosterr(pe, hv[i].host, "pull", hv[i].pull_err);
		}
		if (merr.len)
			hosterr(pe, NULL, "merge", merr.buf);
		pe->hits = xrealloc(pe->hits, (pe->nhits + hn + 1) * sizeof(*pe->hits));
		memcpy(pe->hits + pe->nhits, hv, hn * sizeof(*hv));
		pe->nhits += hn;
		free(hv);
		strbuf_release(&merr);
		if (hnotes.len || herrs.len)
			progress(j, "      %s: %s%s%s", s->tag, hnotes.len ? hnotes.buf : "",
				 hnotes.len && herrs.len ? "; " : "", herrs.buf ? herrs.buf : "");
	} else if (it->profiled) {
		bool *stopped = xcalloc(nact + 1, sizeof(bool));
		for (size_t i = nact; i-- > 0;)
			if (started[i]) {
				double t = tally_now_mono();
				if (tally_profiler_stop(act[i], &run))
					proferr(pe, act[i], "stop", tally_errmsg());
				else
					stopped[i] = true;
				pe->secs[i][1] += tally_now_mono() - t;
			}
		for (size_t i = 0; i < nact; i++)
			if (stopped[i]) {
				double t = tally_now_mono();
				if (tally_profiler_report(act[i], &run))
					proferr(pe, act[i], "report", tally_errmsg());
				pe->secs[i][2] += tally_now_mono() - t;
			}
		free(stopped);
	}
	free(started);
	strbuf_release(&herrs);
	strbuf_release(&hnotes);
	/* nothing of the test or of a plugin outlives the iteration */
	job_sweep(job_intr_hurry(&j->jintr) ? 0 : 1.0);
}

static int run_test(struct tally_job *j, const struct tally_job_step *s,
		    struct tally_profiler **act, size_t nact, bool only)
{
	struct strbuf dir = STRBUF_INIT, path = STRBUF_INIT, prof = STRBUF_INIT, st = STRBUF_INIT;
	int ret = 0, outfd = -1;
	strbuf_addf(&dir, "%s/%s", j->absresults, s->tag);
	if (mkdir(dir.buf, 0755) < 0) {
		char q[JOB_QPATH_SIZE];
		ret = tally_seterr(-errno, "cannot make '%s': %s", job_qpath_buf(q, dir.buf),
				   strerror(errno));
		goto out;
	}
	strbuf_addf(&path, "%s/output", dir.buf);
	outfd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		     0644);
	if (outfd < 0) {
		char q[JOB_QPATH_SIZE];
		ret = tally_seterr(-errno, "cannot create '%s': %s", job_qpath_buf(q, path.buf),
				   strerror(errno));
		goto out;
	}
	/* the record status.json tells, kept by the job from here on */
	GROW(j->recs, j->arecs, j->nrecs + 1);
	struct test_rec *t = &j->recs[j->nrecs++];
	memset(t, 0, sizeof(*t));
	t->s = s;
	t->nact = nact;
	t->secs = xcalloc(nact + 1, sizeof(double[3]));
	t->labels = xcalloc(nact + 1, sizeof(char *));
	for (size_t i = 0; i < nact; i++)
		t->labels[i] = xstrdup(tally_profiler_label(act[i]));
	unsigned total = s->iterations + (nact && !only ? 1 : 0);
	t->its = xcalloc(total, sizeof(*t->its));
	strbuf_addf(&prof, "%s/profiling", dir.buf);
	progress(j, "START %s", s->tag);
	{
		struct strbuf note = STRBUF_INIT;
		strbuf_addf(&note, "test '%s' ran", s->tag);
		job_watch_note(&j->watch, note.buf);
		strbuf_release(&note);
	}
	bool failed = false, profiled_any = false;
	for (unsigned k = 1; k <= total && !failed && !j->interrupted; k++) {
		struct iter *it = &t->its[t->nits];
		it->n = k;
		it->profiled = nact && (only || k == total);
		struct strbuf pd = STRBUF_INIT;
		if (it->profiled) {
			if (!profiled_any && mkdir(prof.buf, 0755) < 0) {
				char q[JOB_QPATH_SIZE];
				ret = tally_seterr(-errno, "cannot make '%s': %s",
						   job_qpath_buf(q, prof.buf), strerror(errno));
				break;
			}
			profiled_any = true;
			strbuf_addstr(&pd, prof.buf);
			if (only && total > 1) {
				strbuf_addf(&pd, "/iteration.%u", k);
				if (mkdir(pd.buf, 0755) < 0) {
					char q[JOB_QPATH_SIZE];
					ret = tally_seterr(-errno, "cannot make '%s': %s",
							   job_qpath_buf(q, pd.buf),
							   strerror(errno));
					strbuf_release(&pd);
					break;
				}
			}
		}
		t->nits++;
		run_iteration(j, s, act, nact, pd.buf, outfd, it, t);
		strbuf_release(&pd);
		failed = it->reason != NULL;
	}
	for (size_t i = 0; i < t->nits; i++)
		t->time += t->its[i].time;
	for (size_t i = 0; i < t->nits && !t->reason; i++)
		if (t->its[i].reason) {
			t->reason = t->its[i].reason;
			t->code = t->its[i].exit_code;
		}
	if (!t->reason && (ret || (j->interrupted && t->nits < total)))
		t->reason = ret ? "the results could not be written" : "interrupted";
	t->good = !t->reason;
	j->ntests++;
	if (!t->good)
		j->failed++;
	strbuf_addf(&st, "%s exit %d time %.3f s", t->good ? "GOOD" : "FAIL", t->code, t->time);
	if (t->reason)
		strbuf_addf(&st, " (%s)", t->reason);
	strbuf_addch(&st, '\n');
	t->profiling = !nact            ? "none"
		       : !profiled_any  ? "not run"
		       : t->errtext.len ? "incomplete"
					: "complete";
	if (nact && !profiled_any)
		strbuf_addf(&st, "profiling not run: the test %s before its profiled iteration\n",
			    j->interrupted ? "was interrupted" : "failed");
	else if (nact)
		strbuf_addf(&st, "profiling %s%s%s\n", t->profiling, t->errtext.len ? ": " : "",
			    t->errtext.len ? t->errtext.buf : "");
	strbuf_reset(&path);
	strbuf_addf(&path, "%s/status", dir.buf);
	int w = write_status_file(path.buf, st.buf, st.len, false);
	if (!ret)
		ret = w;
	progress(j, "%s %s %.3f s%s%s%s", t->good ? "GOOD " : "FAIL ", s->tag, t->time,
		 t->reason ? " (" : "", t->reason ? t->reason : "", t->reason ? ")" : "");
	if (t->errtext.len)
		progress(j, "      %s: profiling incomplete: %s", s->tag, t->errtext.buf);
out:
	if (outfd >= 0)
		close(outfd);
	strbuf_release(&dir);
	strbuf_release(&path);
	strbuf_release(&prof);
	strbuf_release(&st);
	return ret;
}

/* Every profiler set up (once per plugin per job) and initialized. */
static int load(struct tally_job *j)
{
	if (j->hosts) {
		/* set up and initialized on the hosts, by their agents */
		progress(j, "HOSTS installing tally and starting the agents");
		int r = job_hosts_begin(j->hosts);
		for (size_t i = 0, k = 0; i < j->ctl.n; i++) {
			struct tally_profiler *p = j->profs[i].p;
			if (!p)
				continue;
			/* the same profilers as here: their version is this one's */
			tally_profiler_version(p);
			j->profs[i].setup = "on the hosts";
			for (size_t h = 0; h < job_hosts_count(j->hosts); h++)
				if (job_hosts_setup_ran(j->hosts, h, k))
					progress(j, "SETUP %s %s (%s) on host '%s'",
						 tally_profiler_name(p),
						 p->version ? p->version : "?",
						 tally_profiler_where(p),
						 job_hosts_name(j->hosts, h));
			k++;
		}
		return r;
	}
	for (size_t i = 0; i < j->ctl.n; i++) {
		struct tally_profiler *p = j->profs[i].p;
		if (!p)
			continue;
		unsigned line = j->ctl.steps[i].line;
		/* the state directory is checked before any step of the plugin runs */
		bool ran = false;
		int r = tally_profiler_setup(p, &j->env, j->intr[0], &ran);
		if (r)
			return at_line(j, line, r);
		if (!tally_profiler_version(p))
			return at_line(j, line, j->interrupted ? -EINTR : -EIO);
		for (size_t k = 0; k < i && !ran; k++)
			if (j->profs[k].p &&
			    !strcmp(tally_profiler_name(j->profs[k].p), tally_profiler_name(p)) &&
			    j->profs[k].setup)
				j->profs[i].setup = j->profs[k].setup;
		if (!j->profs[i].setup) {
			j->profs[i].setup_ran = ran;
			j->profs[i].setup = p->bi ? "built-in" : ran ? "ran" : "current";
			if (ran)
				progress(j, "SETUP %s %s (%s)", tally_profiler_name(p),
					 tally_profiler_version(p), tally_profiler_where(p));
		}
		r = tally_profiler_initialize(p, &j->env, j->intr[0]);
		if (r)
			return at_line(j, line, r);
		if (j->interrupted)
			return tally_seterr(-EINTR, "interrupted");
	}
	return 0;
}

int tally_job_run(struct tally_job *j)
{
	if (j->ran)
		return tally_seterr(-EINVAL, "this job has run already");
	j->ran = true;
	j->pid = getpid();
	job_sweep(0); /* a subreaper from here on: what a test leaves is ours to end */
	int ret = job_watch_start(&j->watch, job_died, j);
	if (!ret) {
		job_watch_note(&j->watch, "setting up the profilers");
		ret = load(j);
	}
	if (ret) {
		/* no test ran: nothing to keep, and nothing to refuse a rerun
		 * with (the error is the caller's to tell) */
		j->error = xstrdup(tally_errmsg());
		job_sweep(0);
		tally_remove_tree(j->absresults);
		goto out;
	}
	write_status_json(j, false);
	struct tally_profiler **act = xcalloc(j->ctl.n + 1, sizeof(*act));
	size_t nact = 0;
	bool only = false;
	for (size_t i = 0; i < j->ctl.n && !j->interrupted && !ret; i++) {
		const struct tally_job_step *s = &j->ctl.steps[i];
		switch (s->cmd) {
		case TALLY_JOB_ADD:
			act[nact++] = j->profs[i].p;
			break;
		case TALLY_JOB_DELETE: {
			size_t k = 0;
			for (size_t a = 0; a < nact; a++)
				if (strcmp(tally_profiler_name(act[a]), s->name))
					act[k++] = act[a];
			nact = k;
			break;
		}
		case TALLY_JOB_ONLY:
			only = s->only;
			break;
		case TALLY_JOB_HOSTS:
			break; /* the job's hosts, taken by tally_job_new */
		case TALLY_JOB_RUN:
			ret = run_test(j, s, act, nact, only);
			if (!ret)
				ret = write_status_json(j, false);
			break;
		}
	}
	free(act);
	if (ret) {
		j->status = "ERROR";
		j->error = xstrdup(tally_errmsg());
	} else {
		j->status = j->interrupted ? "INTERRUPTED" : j->failed ? "FAIL" : "GOOD";
	}
	int w = write_status_json(j, true);
	if (!ret)
		ret = w;
	reserve_release(j->absresults);
out:
	/* nothing it started is left running, whatever happened */
	job_sweep(job_intr_hurry(&j->jintr) ? 0 : 1.0);
	job_watch_end(&j->watch);
	if (ret) {
		if (j->error)
			tally_seterr(ret, "%s", j->error);
		return ret;
	}
	if (j->interrupted)
		return tally_seterr(-EINTR, "interrupted: the results so far are in '%s'",
				    j->results);
	return 0;
}
