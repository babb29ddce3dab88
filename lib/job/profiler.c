/* Profiler plugins: the built-ins (builtins.c) and external ones, a directory
 * NAME/ on the profilers path holding an executable `profiler` called as
 * `profiler STEP ARGS...` with TALLY_PROFDIR, TALLY_SRCDIR, TALLY_TEST and
 * TALLY_ITERATION in its environment. Each step is a function of its own
 * (job.h), callable by anything that has a profiling directory. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

static const struct job_builtin *const builtins[] = { &job_builtin_tally, &job_builtin_cmd,
						      &job_builtin_perf };

/* Time limits of the external steps (seconds): a plugin that hangs must not
 * hang the job. setup may build things. */
#define SETUP_LIMIT 1800.0
#define REPORT_LIMIT 600.0
#define STEP_LIMIT 60.0
/* How long an interrupted step has from SIGTERM to SIGKILL. */
#define STEP_GRACE 2.0
/* How long a job waits for another job's setup of the same plugin. */
#define LOCK_LIMIT (SETUP_LIMIT + 60.0)

void tally_profilers_path(const char *dirs, char ***out)
{
	char **v = NULL;
	size_t n = 0, alloc = 0;
	const char *srcs[] = { dirs, getenv("TALLY_PROFILERS_PATH"), TALLY_PROFILERS_SYSDIR };
	for (size_t i = 0; i < ARRAY_SIZE(srcs); i++) {
		if (!srcs[i])
			continue;
		for (const char *p = srcs[i];;) {
			const char *c = strchr(p, ':');
			size_t len = c ? (size_t)(c - p) : strlen(p);
			if (len)
				STRLIST_PUSH(v, n, alloc, xstrndup(p, len));
			if (!c)
				break;
			p = c + 1;
		}
	}
	if (!v)
		v = xcalloc(1, sizeof(*v));
	*out = v;
}

char *tally_profilers_state_dir(void)
{
	const char *e = getenv("TALLY_STATE_DIR");
	struct strbuf sb = STRBUF_INIT;
	if (e && *e) {
		strbuf_addstr(&sb, e);
	} else if ((e = getenv("XDG_STATE_HOME")) && *e == '/') {
		strbuf_addf(&sb, "%s/tally/profilers", e);
	} else {
		/* never a path made of an unset HOME ("/.local/...", or a shared
		 * fallback that another user could make first): the passwd entry's */
		const char *home = getenv("HOME");
		if (!home || home[0] != '/') {
			struct passwd *pw = getpwuid(geteuid());
			home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
		}
		if (!home)
			return NULL;
		strbuf_addf(&sb, "%s/.local/state/tally/profilers", strcmp(home, "/") ? home : "");
	}
	return strbuf_detach(&sb);
}

static const struct job_builtin *find_builtin(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(builtins); i++)
		if (!strcmp(builtins[i]->name, name))
			return builtins[i];
	return NULL;
}

int job_builtin_check(const char *name, char *const *args)
{
	const struct job_builtin *bi = find_builtin(name);
	int r = bi && bi->check ? bi->check(args) : 0;
	if (r) {
		struct strbuf msg = STRBUF_INIT;
		strbuf_addstr(&msg, tally_errmsg());
		r = tally_seterr(r, "profiler '%s': %s", name, msg.buf);
		strbuf_release(&msg);
	}
	return r;
}

/* DIR/NAME/profiler when it is an executable regular file. */
static char *plugin_in(const char *dir, const char *name)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s/profiler", dir, name);
	struct stat st;
	if (stat(sb.buf, &st) == 0 && S_ISREG(st.st_mode) && access(sb.buf, X_OK) == 0)
		return strbuf_detach(&sb);
	strbuf_release(&sb);
	return NULL;
}

/* A plugin is run as its user: it and the directories above it out of other
 * users' reach (nobody else may have put it there, or change it).
 * -EPERM with tally_seterr naming it. */
static int plugin_check(const char *name, const char *exe)
{
	int r = tally_file_check(exe, TALLY_DIR_SHARED);
	if (r) {
		struct strbuf msg = STRBUF_INIT, q = STRBUF_INIT;
		strbuf_addstr(&msg, tally_errmsg());
		r = tally_seterr(
			r,
			"profiler '%s' at '%s' is not run: %s (a profiler must be out of other users' reach)",
			name, job_qpath(&q, exe), msg.buf);
		strbuf_release(&msg);
		strbuf_release(&q);
	}
	return r;
}

static void path_string(const struct tally_profiler_env *env, struct strbuf *sb)
{
	for (size_t i = 0; env->path && env->path[i]; i++)
		strbuf_addf(sb, "%s%s", i ? ":" : "", env->path[i]);
	if (!sb->len)
		strbuf_addstr(sb, "(empty)");
}

int tally_profiler_find(struct tally_profiler **out, const char *name, char *const *args,
			const struct tally_profiler_env *env)
{
	const struct job_builtin *bi = find_builtin(name);
	char *exe = NULL, *where = NULL;
	int r;
	if (!bi) {
		for (size_t i = 0; env->path && env->path[i] && !exe; i++)
			if ((exe = plugin_in(env->path[i], name)))
				where = tally_dirname(exe);
		if (!exe) {
			struct strbuf sb = STRBUF_INIT;
			path_string(env, &sb);
			char q[TALLY_EXCERPT_SIZE];
			tally_seterr(
				-ENOENT,
				"unknown profiler '%s': not built in (tally, cmd, perf) and no %s/profiler in %s (--profilers-path, TALLY_PROFILERS_PATH)",
				tally_excerpt(q, name), name, sb.buf);
			strbuf_release(&sb);
			return -ENOENT;
		}
	}
	if (exe && (r = plugin_check(name, exe))) {
		free(exe);
		free(where);
		return r;
	}
	struct tally_profiler *p = xcalloc(1, sizeof(*p));
	p->name = xstrdup(name);
	p->label = xstrdup(name);
	p->args = tally_job_argv_dup(args);
	p->bi = bi;
	p->exe = exe;
	p->where = where ? where : xstrdup("built-in");
	if (!bi && env->state_dir) {
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s/%s", env->state_dir, name);
		p->srcdir = strbuf_detach(&sb);
	}
	*out = p;
	return 0;
}

void tally_profiler_free(struct tally_profiler *p)
{
	if (!p)
		return;
	if (p->bi && p->bi->release)
		p->bi->release(p);
	free(p->name);
	free(p->where);
	free(p->label);
	free(p->version);
	free(p->exe);
	free(p->srcdir);
	tally_job_argv_free(p->args);
	free(p);
}

const char *tally_profiler_name(const struct tally_profiler *p)
{
	return p->name;
}

const char *tally_profiler_where(const struct tally_profiler *p)
{
	return p->where;
}

void tally_profiler_set_label(struct tally_profiler *p, const char *label)
{
	free(p->label);
	p->label = xstrdup(label);
}

const char *tally_profiler_label(const struct tally_profiler *p)
{
	return p->label;
}

/* The plugin's environment: ours without any TALLY_ variable of the steps,
 * then those the step gets. */
static char **step_env(const struct tally_profiler *p, const char *step,
		       const struct tally_profiler_run *r)
{
	char **v = NULL;
	size_t n = 0, alloc = 0;
	static const char *const ours[] = {
		"TALLY_PROFDIR=",   "TALLY_SRCDIR=",   "TALLY_TEST=",
		"TALLY_ITERATION=", "TALLY_TEST_PID=", "TALLY_PROFILER="
	};
	for (char **e = environ; e && *e; e++) {
		bool skip = false;
		for (size_t i = 0; i < ARRAY_SIZE(ours); i++)
			if (!strncmp(*e, ours[i], strlen(ours[i])))
				skip = true;
		if (!skip)
			STRLIST_PUSH(v, n, alloc, xstrdup(*e));
	}
	struct strbuf sb = STRBUF_INIT;
	if (p->srcdir_ok && strcmp(step, "version")) {
		/* only once checked (setup): never a directory others could fill;
		 * version says what the plugin is, before anything is set up */
		strbuf_addf(&sb, "TALLY_SRCDIR=%s", p->srcdir);
		STRLIST_PUSH(v, n, alloc, strbuf_detach(&sb));
	}
	strbuf_addf(&sb, "TALLY_PROFILER=%s", p->name);
	STRLIST_PUSH(v, n, alloc, strbuf_detach(&sb));
	if (r) {
		strbuf_addf(&sb, "TALLY_PROFDIR=%s", r->profdir);
		STRLIST_PUSH(v, n, alloc, strbuf_detach(&sb));
		strbuf_addf(&sb, "TALLY_TEST=%s", r->test);
		STRLIST_PUSH(v, n, alloc, strbuf_detach(&sb));
		strbuf_addf(&sb, "TALLY_ITERATION=%u", r->iteration);
		STRLIST_PUSH(v, n, alloc, strbuf_detach(&sb));
		if (r->test_pid > 0) {
			strbuf_addf(&sb, "TALLY_TEST_PID=%d", r->test_pid);
			STRLIST_PUSH(v, n, alloc, strbuf_detach(&sb));
		}
	}
	return v;
}

/* Runs `profiler STEP ARGS...`: 0 when it exits 0; else an error naming the
 * profiler, the step and the last line it printed. out (may be NULL) gets
 * what it printed. */
static int run_step(struct tally_profiler *p, const char *step, const struct tally_profiler_run *r,
		    double limit, int intr_fd, struct strbuf *out)
{
	if (!p->srcdir_ok && strcmp(step, "version") && strcmp(step, "setup"))
		return tally_seterr(
			-EINVAL,
			"profiler '%s' failed at %s: not set up (its setup step comes first)",
			p->name, step);
	char **argv = NULL;
	size_t n = 0, alloc = 0;
	STRLIST_PUSH(argv, n, alloc, xstrdup(p->exe));
	STRLIST_PUSH(argv, n, alloc, xstrdup(step));
	if (strcmp(step, "version"))
		for (char **a = p->args; a && *a; a++)
			STRLIST_PUSH(argv, n, alloc, xstrdup(*a));
	char **env = step_env(p, step, r);
	struct strbuf cap = STRBUF_INIT;
	int status = 0;
	/* the job's ^C ends the step (SIGTERM, then SIGKILL after STEP_GRACE
	 * or at the next ^C); without a job, intr_fd readable does */
	struct job_intr in =
		p->intr ? job_intr_now(p->intr) : (struct job_intr){ intr_fd, NULL, 0 };
	int ret = job_run_capture_in(argv, env, limit, &in, STEP_GRACE, &cap, &status);
	struct strbuf last = STRBUF_INIT;
	tally_last_line(cap.buf, &last);
	if (ret == -ETIMEDOUT)
		ret = tally_seterr(-ETIMEDOUT,
				   "profiler '%s' failed at %s: no end after %.0f s (killed)",
				   p->name, step, limit);
	else if (ret == -EINTR)
		ret = tally_seterr(-EINTR, "profiler '%s' failed at %s: interrupted (ended by ^C)",
				   p->name, step);
	else if (ret) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", tally_errmsg());
		ret = tally_seterr(ret, "profiler '%s' failed at %s: %s", p->name, step, msg);
	} else if (status) {
		struct strbuf how = STRBUF_INIT;
		job_describe_status(status, &how);
		ret = tally_seterr(-EIO, "profiler '%s' failed at %s (%s)%s%s", p->name, step,
				   how.buf, last.len ? ": " : "", last.buf ? last.buf : "");
		strbuf_release(&how);
	}
	if (out)
		strbuf_add(out, cap.buf ? cap.buf : "", cap.len);
	strbuf_release(&cap);
	strbuf_release(&last);
	tally_job_argv_free(argv);
	tally_job_argv_free(env);
	return ret;
}

const char *tally_profiler_version(struct tally_profiler *p)
{
	if (p->version)
		return p->version;
	if (p->bi) {
		p->version = xstrdup(TALLY_VERSION);
		return p->version;
	}
	struct strbuf out = STRBUF_INIT;
	if ((p->version_err = run_step(p, "version", NULL, STEP_LIMIT, -1, &out))) {
		strbuf_release(&out);
		return NULL;
	}
	/* the first line, trimmed */
	char *s = out.buf ? out.buf : "";
	s += strspn(s, " \t\r\n");
	size_t len = strcspn(s, "\r\n");
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (!len) {
		strbuf_release(&out);
		tally_seterr(
			-EINVAL,
			"profiler '%s' failed at version: it printed no version (%s/profiler version must print one line)",
			p->name, p->where);
		return NULL;
	}
	/* printed on terminals and kept in .setup-version: escaped, bounded */
	struct strbuf v = STRBUF_INIT;
	strbuf_add_excerpt(&v, s, len, 100);
	p->version = strbuf_detach(&v);
	strbuf_release(&out);
	return p->version;
}

/* A file of the state directory that may be believed: a regular file of
 * ours that only we write. 0, or -EPERM with the reason. */
static int own_file(int fd, const char *path)
{
	struct stat st;
	struct strbuf q = STRBUF_INIT;
	int ret = 0;
	if (fstat(fd, &st) < 0)
		ret = tally_seterr(-errno, "cannot stat '%s': %s", job_qpath(&q, path),
				   strerror(errno));
	else if (!S_ISREG(st.st_mode))
		ret = tally_seterr(-EPERM, "'%s' is %s, not a regular file", job_qpath(&q, path),
				   tally_file_kind(st.st_mode));
	else if (st.st_uid != geteuid())
		ret = tally_seterr(-EPERM, "'%s' belongs to uid %u, not to you",
				   job_qpath(&q, path), (unsigned)st.st_uid);
	else if (st.st_mode & 022)
		ret = tally_seterr(-EPERM, "'%s' is writable by others", job_qpath(&q, path));
	strbuf_release(&q);
	return ret;
}

/* The version recorded after the last successful setup (NULL: none, or a
 * file that is not ours). */
static char *setup_done(const char *srcdir)
{
	if (!srcdir)
		return NULL;
	struct strbuf sb = STRBUF_INIT, path = STRBUF_INIT;
	strbuf_addf(&path, "%s/.setup-version", srcdir);
	char *v = NULL;
	int fd = tally_open_regular(AT_FDCWD, path.buf, 0, 4096, NULL);
	if (fd >= 0 && !own_file(fd, path.buf) && !tally_read_fd(&sb, fd, path.buf, 4096) &&
	    sb.buf) {
		sb.buf[strcspn(sb.buf, "\n")] = 0;
		v = xstrdup(sb.buf);
	}
	if (fd >= 0)
		close(fd);
	strbuf_release(&sb);
	strbuf_release(&path);
	return v;
}

/* p's state directory (TALLY_SRCDIR) made and checked before anything in it
 * is run or believed: the state directory and it ours, written by us alone,
 * every directory above ours or root's and out of others' reach
 * (tally_dir_check); p->srcdir becomes its path without links. */
static int srcdir_check(struct tally_profiler *p, const struct tally_profiler_env *env)
{
	if (p->srcdir_ok)
		return 0;
	if (!p->srcdir || !env->state_dir)
		return tally_seterr(
			-ENOENT,
			"profiler '%s' failed at setup: no state directory (HOME is not set and uid %u has no home directory): give --state-dir DIR or TALLY_STATE_DIR",
			p->name, (unsigned)geteuid());
	char *res = NULL;
	const char *bad = env->state_dir;
	int r = tally_dir_check(env->state_dir, 0700, TALLY_DIR_PRIVATE, NULL);
	if (!r) {
		bad = p->srcdir;
		r = tally_dir_check(p->srcdir, 0700, TALLY_DIR_PRIVATE, &res);
	}
	if (r) {
		struct strbuf msg = STRBUF_INIT, q = STRBUF_INIT;
		strbuf_addstr(&msg, tally_errmsg());
		r = tally_seterr(
			r,
			"profiler '%s' failed at setup: cannot use the state directory '%s': %s (give --state-dir DIR or TALLY_STATE_DIR: a directory of your own)",
			p->name, job_qpath(&q, bad), msg.buf);
		strbuf_release(&msg);
		strbuf_release(&q);
		return r;
	}
	free(p->srcdir);
	p->srcdir = res;
	p->srcdir_ok = true;
	return 0;
}

/* Waits for the setup lock (fd, at path) that another job holds, as long as
 * a setup may take, ended by an interrupt. */
static int lock_setup(struct tally_profiler *p, int fd, const char *path, int intr_fd)
{
	struct job_intr in =
		p->intr ? job_intr_now(p->intr) : (struct job_intr){ intr_fd, NULL, 0 };
	double end = tally_now_mono() + LOCK_LIMIT;
	struct strbuf q = STRBUF_INIT;
	int ret = 0;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			ret = tally_seterr(-errno,
					   "profiler '%s' failed at setup: cannot lock '%s': %s",
					   p->name, job_qpath(&q, path), strerror(errno));
			break;
		}
		if (tally_now_mono() >= end) {
			ret = tally_seterr(
				-ETIMEDOUT,
				"profiler '%s' failed at setup: another job has held '%s' for %.0f min (a setup takes at most %.0f)",
				p->name, job_qpath(&q, path), LOCK_LIMIT / 60, SETUP_LIMIT / 60);
			break;
		}
		/* no event tells of a released flock: look again every 50 ms */
		struct pollfd pf = { .fd = in.fd, .events = POLLIN };
		if (poll(&pf, in.fd >= 0 ? 1 : 0, 50) > 0 && (pf.revents & POLLIN) &&
		    job_intr_came(&in)) {
			ret = tally_seterr(
				-EINTR,
				"profiler '%s' failed at setup: interrupted (ended by ^C) while another job held '%s'",
				p->name, job_qpath(&q, path));
			break;
		}
	}
	strbuf_release(&q);
	return ret;
}

int tally_profiler_setup(struct tally_profiler *p, const struct tally_profiler_env *env,
			 int intr_fd, bool *ran)
{
	if (ran)
		*ran = false;
	if (p->bi) {
		const char *why = p->bi->unavailable ? p->bi->unavailable() : NULL;
		if (why)
			return tally_seterr(-ENOENT, "profiler '%s' failed at setup: %s", p->name,
					    why);
		return 0;
	}
	int ret = srcdir_check(p, env);
	if (ret)
		return ret;
	const char *version = tally_profiler_version(p);
	if (!version)
		return p->version_err ? p->version_err : -EIO;
	/* one setup at a time: a second job waits here, then finds it done */
	struct strbuf lock = STRBUF_INIT, q = STRBUF_INIT;
	strbuf_addf(&lock, "%s/.setup-lock", p->srcdir);
	int fd = open(lock.buf, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
	if (fd < 0) {
		int e = errno;
		ret = tally_seterr(-e, "profiler '%s' failed at setup: cannot open '%s': %s",
				   p->name, job_qpath(&q, lock.buf), strerror(e));
		goto out;
	}
	if ((ret = own_file(fd, lock.buf))) {
		struct strbuf msg = STRBUF_INIT;
		strbuf_addstr(&msg, tally_errmsg());
		ret = tally_seterr(ret, "profiler '%s' failed at setup: %s", p->name, msg.buf);
		strbuf_release(&msg);
		goto out;
	}
	if ((ret = lock_setup(p, fd, lock.buf, intr_fd)))
		goto out;
	char *done = setup_done(p->srcdir);
	if (!done || strcmp(done, version)) {
		ret = run_step(p, "setup", NULL, SETUP_LIMIT, intr_fd, NULL);
		if (!ret) {
			struct strbuf path = STRBUF_INIT, v = STRBUF_INIT;
			strbuf_addf(&path, "%s/.setup-version", p->srcdir);
			strbuf_addf(&v, "%s\n", version);
			ret = tally_write_file_atomic(path.buf, v.buf, v.len);
			strbuf_release(&path);
			strbuf_release(&v);
			if (ran)
				*ran = true;
		}
	}
	free(done);
out:
	if (fd >= 0)
		close(fd); /* drops the lock */
	strbuf_release(&lock);
	strbuf_release(&q);
	return ret;
}

int tally_profiler_initialize(struct tally_profiler *p, const struct tally_profiler_env *env,
			      int intr_fd)
{
	(void)env;
	if (p->bi) {
		int r = p->bi->initialize(p);
		if (r) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%s", tally_errmsg());
			return tally_seterr(r, "profiler '%s' failed at initialize: %s", p->name,
					    msg);
		}
		return 0;
	}
	return run_step(p, "initialize", NULL, STEP_LIMIT, intr_fd, NULL);
}

static int builtin_step(struct tally_profiler *p, const char *step, int r)
{
	if (!r)
		return 0;
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", tally_errmsg());
	return tally_seterr(r, "profiler '%s' failed at %s: %s", p->label, step, msg);
}

int tally_profiler_start(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	if (p->bi)
		return builtin_step(p, "start", p->bi->start(p, r));
	return run_step(p, "start", r, STEP_LIMIT, -1, NULL);
}

/* After a second ^C nothing waits: no plugin's stop, no report (a built-in's
 * stop still runs: it ends its process at once, or its recording). */
static int hurried(struct tally_profiler *p, const char *step)
{
	return tally_seterr(-EINTR, "profiler '%s' failed at %s: not run (a second ^C)", p->label,
			    step);
}

int tally_profiler_stop(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	if (!p->bi && job_intr_hurry(p->intr))
		return hurried(p, "stop");
	if (p->bi)
		return builtin_step(p, "stop", p->bi->stop(p, r));
	return run_step(p, "stop", r, STEP_LIMIT, -1, NULL);
}

int tally_profiler_report(struct tally_profiler *p, const struct tally_profiler_run *r)
{
	if (job_intr_hurry(p->intr))
		return hurried(p, "report");
	if (p->bi)
		return builtin_step(p, "report", p->bi->report(p, r));
	return run_step(p, "report", r, REPORT_LIMIT, -1, NULL);
}

static void info_of(struct tally_profiler *p, struct tally_profiler_info *i)
{
	memset(i, 0, sizeof(*i));
	i->name = xstrdup(p->name);
	i->where = xstrdup(p->where);
	const char *v = tally_profiler_version(p);
	if (v)
		i->version = xstrdup(v);
	else
		i->error = xstrdup(tally_errmsg());
	if (p->bi) {
		const char *why = p->bi->unavailable ? p->bi->unavailable() : NULL;
		i->setup = xstrdup(why ? "unavailable" : "built-in");
		if (why)
			i->error = xstrdup(why);
		return;
	}
	char *done = setup_done(p->srcdir);
	struct strbuf sb = STRBUF_INIT;
	if (!done)
		strbuf_addstr(&sb, "no");
	else if (v && !strcmp(done, v))
		strbuf_addstr(&sb, "yes");
	else
		strbuf_addf(&sb, "old (%s)", done);
	i->setup = strbuf_detach(&sb);
	free(done);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int tally_profilers_list(const struct tally_profiler_env *env, struct tally_profiler_info **out,
			 size_t *nout)
{
	struct tally_profiler_info *v = NULL;
	size_t n = 0, alloc = 0;
	char **seen = NULL;
	size_t nseen = 0, aseen = 0;
	for (size_t i = 0; i < ARRAY_SIZE(builtins); i++) {
		struct tally_profiler *p;
		if (tally_profiler_find(&p, builtins[i]->name, NULL, env))
			continue;
		GROW(v, alloc, n + 1);
		info_of(p, &v[n++]);
		STRLIST_PUSH(seen, nseen, aseen, xstrdup(p->name));
		tally_profiler_free(p);
	}
	for (size_t d = 0; env->path && env->path[d]; d++) {
		DIR *dir = opendir(env->path[d]);
		if (!dir)
			continue;
		char **names = NULL;
		size_t nn = 0, an = 0;
		struct dirent *e;
		while ((e = readdir(dir)))
			if (e->d_name[0] != '.')
				STRLIST_PUSH(names, nn, an, xstrdup(e->d_name));
		closedir(dir);
		tally_qsort(names, nn, sizeof(*names), cmp_str);
		for (size_t k = 0; k < nn; k++) {
			char *exe = plugin_in(env->path[d], names[k]);
			if (!exe)
				continue;
			bool shadowed = false;
			for (size_t s = 0; s < nseen; s++)
				if (!strcmp(seen[s], names[k]))
					shadowed = true;
			struct tally_profiler *p = xcalloc(1, sizeof(*p));
			p->name = xstrdup(names[k]);
			p->label = xstrdup(names[k]);
			p->exe = exe;
			p->where = tally_dirname(exe);
			if (env->state_dir) {
				struct strbuf sb = STRBUF_INIT;
				strbuf_addf(&sb, "%s/%s", env->state_dir, names[k]);
				p->srcdir = strbuf_detach(&sb);
			}
			GROW(v, alloc, n + 1);
			if (plugin_check(names[k], exe)) {
				/* never asked its version: that would run it */
				memset(&v[n], 0, sizeof(v[n]));
				v[n].name = xstrdup(names[k]);
				v[n].where = xstrdup(p->where);
				v[n].setup = xstrdup("unsafe");
				v[n].error = xstrdup(tally_errmsg());
			} else {
				info_of(p, &v[n]);
			}
			if (shadowed) {
				free(v[n].setup);
				v[n].setup = xstrdup("shadowed");
			}
			n++;
			if (!shadowed)
				STRLIST_PUSH(seen, nseen, aseen, xstrdup(names[k]));
			tally_profiler_free(p);
		}
		tally_job_argv_free(names);
	}
	tally_job_argv_free(seen);
	*out = v;
	*nout = n;
	return 0;
}

void tally_profiler_infos_free(struct tally_profiler_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].where);
		free(v[i].version);
		free(v[i].error);
		free(v[i].setup);
	}
	free(v);
}
