/* Processes for the job harness: tests, cmd and perf profilers and external
 * plugin steps are children started in process groups of their own, waited
 * for through a pidfd (with a time limit and the job's interrupt descriptor),
 * ended with escalating signals, and whatever they leave behind is swept at
 * the end of each test. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	return -1;
#endif
}

/* In the child: only async-signal-safe calls from here to exec. */
static void child_setup(const struct job_spawn *s, int errfd, pid_t parent)
{
	setpgid(0, 0);
	/* it ends with the job, were the job killed (kill -9, the OOM killer);
	 * what it starts is the watcher's (job_watch_start) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (s->go_fd >= 0) {
		char b;
		while (read(s->go_fd, &b, 1) < 0 && errno == EINTR)
			;
	}
	int nul = open("/dev/null", O_RDWR);
	/* move every source out of 0-4 first, so the dup2s cannot overwrite one */
	int out = s->out_fd >= 0 ? fcntl(s->out_fd, F_DUPFD, 10) : fcntl(nul, F_DUPFD, 10);
	int err = s->err_fd >= 0 ? fcntl(s->err_fd, F_DUPFD, 10) : fcntl(nul, F_DUPFD, 10);
	int f3 = s->fd3 >= 0 ? fcntl(s->fd3, F_DUPFD, 10) : -1;
	int f4 = s->fd4 >= 0 ? fcntl(s->fd4, F_DUPFD, 10) : -1;
	int e = fcntl(errfd, F_DUPFD_CLOEXEC, 10);
	dup2(nul, 0);
	dup2(out, 1);
	dup2(err, 2);
	if (f3 >= 0)
		dup2(f3, 3);
	if (f4 >= 0)
		dup2(f4, 4);
	/* nothing else of the parent's reaches the child */
	unsigned keep = f4 >= 0 ? 5 : f3 >= 0 ? 4 : 3;
	if (close_range(keep, (unsigned)e - 1, 0) < 0 || close_range((unsigned)e + 1, ~0U, 0) < 0)
		for (int fd = (int)keep; fd < 1024; fd++)
			if (fd != e)
				close(fd);
	if (s->fn) {
		close(e); /* no exec to close it: the parent would wait for the end */
		_exit(s->fn(s->arg));
	}
	if (strchr(s->argv[0], '/'))
		execve(s->argv[0], s->argv, s->envp ? s->envp : environ);
	else if (s->envp) {
		/* execvpe searches the caller's PATH */
		execvpe(s->argv[0], s->argv, s->envp);
	} else
		execvp(s->argv[0], s->argv);
	int code = errno;
	ssize_t w = write(e, &code, sizeof(code));
	(void)w;
	_exit(127);
}

int job_spawn(const struct job_spawn *s, pid_t *pid, int *pidfd, int *err_pipe)
{
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		return tally_seterr(-errno, "cannot make a pipe: %s", strerror(errno));
	pid_t parent = getpid();
	pid_t c = fork();
	if (c < 0) {
		int e = errno;
		close(ep[0]);
		close(ep[1]);
		return tally_seterr(-e, "cannot fork: %s", strerror(e));
	}
	if (c == 0) {
		close(ep[0]);
		child_setup(s, ep[1], parent);
		_exit(127);
	}
	close(ep[1]);
	/* in the parent too, so that the group exists before anyone signals it */
	setpgid(c, c);
	*pid = c;
	*pidfd = pidfd_of(c);
	if (err_pipe) {
		*err_pipe = ep[0];
		return 0;
	}
	int r = job_exec_error(ep[0]);
	if (r) {
		waitpid(c, NULL, 0);
		if (*pidfd >= 0)
			close(*pidfd);
		*pidfd = -1;
		char q[TALLY_EXCERPT_SIZE];
		return tally_seterr(r, "cannot run '%s': %s",
				    tally_excerpt(q, s->argv ? s->argv[0] : "?"), strerror(-r));
	}
	return 0;
}

int job_exec_error(int fd)
{
	int code = 0;
	ssize_t n;
	do
		n = read(fd, &code, sizeof(code));
	while (n < 0 && errno == EINTR);
	close(fd);
	return n == (ssize_t)sizeof(code) ? -(code ? code : EIO) : 0;
}

bool job_intr_came(const struct job_intr *in)
{
	if (!in || in->fd < 0)
		return false;
	if (!in->count) {
		struct pollfd pf = { .fd = in->fd, .events = POLLIN };
		return poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN);
	}
	/* the count first, then the byte (tally_job_interrupt): a ^C between
	 * the draining and the count is seen, or wakes the next poll */
	char buf[64];
	while (read(in->fd, buf, sizeof(buf)) > 0)
		;
	return *in->count > in->base;
}

bool job_intr_hurry(const struct job_intr *in)
{
	return in && in->count && *in->count >= 2;
}

struct job_intr job_intr_now(const struct job_intr *in)
{
	struct job_intr now = { -1, NULL, 0 };
	if (in) {
		now = *in;
		if (now.count)
			now.base = *now.count;
	}
	return now;
}

int job_wait_in(pid_t pid, int pidfd, double timeout, const struct job_intr *in, int *status)
{
	int intr_fd = in ? in->fd : -1;
	double end = timeout >= 0 ? tally_now_mono() + timeout : 0;
	if (in && in->count && *in->count > in->base)
		return -EINTR; /* came before the wait, drained by another */
	for (;;) {
		int ms = -1;
		if (timeout >= 0) {
			double left = end - tally_now_mono();
			if (left <= 0) {
				if (waitpid(pid, status, WNOHANG) == pid)
					return 1;
				return 0;
			}
			ms = (int)(left * 1000) + 1;
		}
		if (pidfd < 0 && (ms < 0 || ms > 10))
			ms = 10; /* no pidfd: poll the child */
		struct pollfd pf[2];
		int n = 0;
		if (pidfd >= 0)
			pf[n++] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		if (intr_fd >= 0)
			pf[n++] = (struct pollfd){ .fd = intr_fd, .events = POLLIN };
		int r = poll(pf, (nfds_t)n, ms);
		if (r < 0 && errno != EINTR)
			return tally_seterr(-errno, "cannot wait for process %d: %s", (int)pid,
					    strerror(errno));
		pid_t w = waitpid(pid, status, WNOHANG);
		if (w == pid)
			return 1;
		if (w < 0 && errno == ECHILD) {
			*status = 0;
			return 1;
		}
		if (intr_fd >= 0 && r > 0 && (pf[n - 1].revents & POLLIN) && job_intr_came(in))
			return -EINTR;
	}
}

int job_wait(pid_t pid, int pidfd, double timeout, int intr_fd, int *status)
{
	struct job_intr in = { intr_fd, NULL, 0 };
	return job_wait_in(pid, pidfd, timeout, &in, status);
}

void job_end_in(pid_t pid, int pidfd, bool group, int first_sig, double grace,
		const struct job_intr *in, int *status)
{
	int st = 0;
	int sigs[3] = { first_sig, SIGTERM, SIGKILL };
	if (job_intr_hurry(in))
		grace = 0;
	for (int i = 0; i < 3; i++) {
		if (i > 0 && sigs[i] == sigs[i - 1])
			continue;
		if (group)
			kill(-pid, sigs[i]);
		kill(pid, sigs[i]);
		/* another ^C while it is given time: no more time */
		int r = job_wait_in(pid, pidfd, sigs[i] == SIGKILL ? -1 : grace,
				    sigs[i] == SIGKILL ? NULL : in, &st);
		if (r == 1)
			break;
		if (r == -EINTR)
			grace = 0;
	}
	if (group)
		kill(-pid, SIGKILL); /* what the group still holds */
	if (status)
		*status = st;
}

void job_end(pid_t pid, int pidfd, bool group, int first_sig, double grace, int *status)
{
	job_end_in(pid, pidfd, group, first_sig, grace, NULL, status);
}

int job_run_capture(char *const *argv, char *const *envp, double timeout, int intr_fd,
		    struct strbuf *out, int *status)
{
	struct job_intr in = { intr_fd, NULL, 0 };
	return job_run_capture_in(argv, envp, timeout, &in, 0, out, status);
}

/* What a child printed: out keeps the first CAPTURE_KEEP bytes (a version's
 * first line), tail the last CAPTURE_KEEP of the rest (a failure's last
 * line); *dropped when bytes between them went. */
#define CAPTURE_KEEP 65536
static void capture(struct strbuf *out, struct strbuf *tail, bool *dropped, const char *buf,
		    size_t k)
{
	if (!out)
		return;
	if (out->len < CAPTURE_KEEP) {
		size_t take = k < CAPTURE_KEEP - out->len ? k : CAPTURE_KEEP - out->len;
		strbuf_add(out, buf, take);
		buf += take;
		k -= take;
	}
	if (!k)
		return;
	strbuf_add(tail, buf, k);
	if (tail->len > 2 * CAPTURE_KEEP) {
		memmove(tail->buf, tail->buf + tail->len - CAPTURE_KEEP, CAPTURE_KEEP);
		tail->len = CAPTURE_KEEP;
		tail->buf[tail->len] = 0;
		*dropped = true;
	}
}

int job_run_capture_in(char *const *argv, char *const *envp, double timeout,
		       const struct job_intr *in, double grace, struct strbuf *out, int *status)
{
	struct strbuf tail = STRBUF_INIT;
	bool dropped = false;
	int intr_fd = in ? in->fd : -1;
	bool interrupted = false;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return tally_seterr(-errno, "cannot make a pipe: %s", strerror(errno));
	struct job_spawn s = { .argv = argv,
			       .envp = envp,
			       .out_fd = p[1],
			       .err_fd = p[1],
			       .go_fd = -1,
			       .fd3 = -1,
			       .fd4 = -1 };
	pid_t pid;
	int pidfd, ret;
	ret = job_spawn(&s, &pid, &pidfd, NULL);
	close(p[1]);
	if (ret) {
		close(p[0]);
		return ret;
	}
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	double end = timeout >= 0 ? tally_now_mono() + timeout : 0;
	bool open_pipe = true;
	ret = 0;
	for (;;) {
		struct pollfd pf[3];
		int n = 0, ipipe = -1, ipid = -1, iintr = -1;
		if (open_pipe) {
			ipipe = n;
			pf[n++] = (struct pollfd){ .fd = p[0], .events = POLLIN };
		}
		if (pidfd >= 0) {
			ipid = n;
			pf[n++] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		}
		if (intr_fd >= 0) {
			iintr = n;
			pf[n++] = (struct pollfd){ .fd = intr_fd, .events = POLLIN };
		}
		int ms = pidfd < 0 ? 10 : -1;
		if (timeout >= 0) {
			double left = end - tally_now_mono();
			if (left <= 0) {
				ret = -ETIMEDOUT;
				break;
			}
			if (ms < 0 || left * 1000 < ms)
				ms = (int)(left * 1000) + 1;
		}
		int r = poll(pf, (nfds_t)n, ms);
		if (r < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
		if (ipipe >= 0 && pf[ipipe].revents) {
			char buf[4096];
			ssize_t k = read(p[0], buf, sizeof(buf));
			if (k > 0) {
				capture(out, &tail, &dropped, buf, (size_t)k);
			} else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
				open_pipe = false;
			}
		}
		if (iintr >= 0 && r > 0 && (pf[iintr].revents & POLLIN) && job_intr_came(in)) {
			ret = -EINTR;
			interrupted = true;
			break;
		}
		(void)ipid;
		if (waitpid(pid, status, WNOHANG) == pid) {
			pid = -1;
			break;
		}
	}
	if (pid > 0 && interrupted && grace > 0) {
		/* SIGTERM, then SIGKILL after grace, or at the next interrupt */
		struct job_intr next = job_intr_now(in);
		job_end_in(pid, pidfd, true, SIGTERM, grace, &next, status);
	} else if (pid > 0) {
		job_end(pid, pidfd, true, SIGKILL, 0, status);
	}
	/* what is left in the pipe (the child is gone; its leftovers may hold it) */
	for (;;) {
		char buf[4096];
		ssize_t k = read(p[0], buf, sizeof(buf));
		if (k <= 0)
			break;
		capture(out, &tail, &dropped, buf, (size_t)k);
	}
	if (out && tail.len) {
		if (dropped)
			strbuf_addstr(out, "\n[...]\n");
		strbuf_add(out, tail.buf, tail.len);
	}
	strbuf_release(&tail);
	close(p[0]);
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}

void job_describe_status(int status, struct strbuf *sb)
{
	if (WIFSIGNALED(status))
		strbuf_addf(sb, "killed by signal %d (%s)", WTERMSIG(status),
			    sigabbrev_np(WTERMSIG(status)) ?: "?");
	else
		strbuf_addf(sb, "exit status %d", WEXITSTATUS(status));
}

int job_exit_code(int status)
{
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* The watcher (job_watch_start): a child that job_sweep spares. */
static pid_t watch_pid = -1;

/* The children of every thread of this process, the watcher's excepted. */
static size_t children(pid_t **out)
{
	size_t n = 0, alloc = 0;
	pid_t *v = NULL;
	DIR *d = opendir("/proc/self/task");
	if (!d) {
		*out = NULL;
		return 0;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
		struct strbuf sb = STRBUF_INIT;
		if (!strbuf_read_file(&sb, path, 1 << 20) && sb.buf) {
			char *save = NULL;
			for (char *t = strtok_r(sb.buf, " \n", &save); t;
			     t = strtok_r(NULL, " \n", &save)) {
				if ((pid_t)atoi(t) == watch_pid)
					continue;
				GROW(v, alloc, n + 1);
				v[n++] = (pid_t)atoi(t);
			}
		}
		strbuf_release(&sb);
	}
	closedir(d);
	*out = v;
	return n;
}

unsigned job_sweep(double grace)
{
	unsigned ended = 0;
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* reap what has exited already */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	for (int round = 0; round < 20; round++) {
		pid_t *v;
		size_t n = children(&v);
		if (!n) {
			free(v);
			break;
		}
		for (size_t i = 0; i < n; i++) {
			kill(v[i], round ? SIGKILL : SIGTERM);
			ended++;
		}
		double end = tally_now_mono() + (round ? 1.0 : grace);
		for (;;) {
			pid_t w = waitpid(-1, NULL, WNOHANG);
			if (w < 0)
				break;
			if (w > 0)
				continue;
			pid_t *left;
			size_t k = children(&left);
			free(left);
			if (!k || tally_now_mono() >= end)
				break;
			struct timespec ts = { 0, 5 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		free(v);
	}
	return ended;
}

bool job_in_path(const char *name)
{
	if (strchr(name, '/'))
		return access(name, X_OK) == 0;
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	struct strbuf sb = STRBUF_INIT;
	bool found = false;
	for (const char *p = path; !found;) {
		const char *c = strchr(p, ':');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		strbuf_reset(&sb);
		if (len)
			strbuf_add(&sb, p, len);
		else
			strbuf_addch(&sb, '.');
		strbuf_addf(&sb, "/%s", name);
		struct stat st;
		if (stat(sb.buf, &st) == 0 && S_ISREG(st.st_mode) && access(sb.buf, X_OK) == 0)
			found = true;
		if (!c)
			break;
		p = c + 1;
	}
	strbuf_release(&sb);
	return found;
}

int job_mkdirs(const char *path, unsigned mode)
{
	char *p = xstrdup(path);
	int ret = 0;
	for (char *s = p + 1;; s++) {
		if (*s == '/' || !*s) {
			char c = *s;
			*s = 0;
			if (mkdir(p, mode) < 0 && errno != EEXIST) {
				int e = errno;
				char q[JOB_QPATH_SIZE];
				ret = tally_seterr(-e, "cannot make the directory '%s': %s",
						   job_qpath_buf(q, p), strerror(e));
				break;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	if (!ret) {
		struct stat st;
		if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
			char q[JOB_QPATH_SIZE];
			ret = tally_seterr(-ENOTDIR, "'%s' is not a directory",
					   job_qpath_buf(q, path));
		}
	}
	free(p);
	return ret;
}

/* ---- directories that others must not be able to change ---- */

const char *job_qpath_buf(char *out, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	job_qpath(&sb, path ? path : "");
	memcpy(out, sb.buf, sb.len + 1);
	strbuf_release(&sb);
	return out;
}

const char *job_qpath(struct strbuf *sb, const char *path)
{
	strbuf_reset(sb);
	strbuf_add_excerpt(sb, path, strlen(path), 400);
	return sb->buf;
}

/* ---- the watcher: what a killed job leaves ---- */

#define WATCH_MARK "TALLY_JOB_ID="

/* Whether process pid's environment (as it was exec'd) holds mark. */
static bool marked(pid_t pid, const char *mark)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	struct strbuf sb = STRBUF_INIT;
	bool yes = false;
	if (!strbuf_read_file(&sb, path, 1 << 20) && sb.buf) {
		size_t ml = strlen(mark);
		for (size_t i = 0; i < sb.len; i += strlen(sb.buf + i) + 1)
			if (!strncmp(sb.buf + i, mark, ml) && !sb.buf[i + ml]) {
				yes = true;
				break;
			}
	}
	strbuf_release(&sb);
	return yes;
}

/* Every process but us whose environment holds mark: sig sent to each (0:
 * none); how many there were. */
static size_t signal_marked(const char *mark, int sig)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 1 || pid == (long)getpid() || !marked((pid_t)pid, mark))
			continue;
		n++;
		if (!sig)
			continue;
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
		/* the process itself, not whatever takes its number after it */
		int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
		if (fd >= 0) {
			if (marked((pid_t)pid, mark))
				syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
			close(fd);
			continue;
		}
#endif
		kill((pid_t)pid, sig);
	}
	closedir(d);
	return n;
}

/* The watcher's life: notes until the job says "bye"; at EOF without one
 * the job is dead: what carries its mark ends, then died() is told. */
static void watch_loop(int fd, const char *mark, void (*died)(void *ctx, const char *note),
		       void *ctx)
{
	struct strbuf in = STRBUF_INIT, note = STRBUF_INIT;
	bool bye = false;
	for (;;) {
		char buf[512];
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		strbuf_add(&in, buf, (size_t)k);
		char *nl;
		while (in.buf && (nl = memchr(in.buf, '\n', in.len))) {
			size_t len = (size_t)(nl - in.buf);
			if (len == 3 && !memcmp(in.buf, "bye", 3)) {
				bye = true;
			} else {
				strbuf_reset(&note);
				strbuf_add(&note, in.buf, len);
			}
			memmove(in.buf, nl + 1, in.len - len - 1);
			in.len -= len + 1;
			in.buf[in.len] = 0;
		}
	}
	if (!bye) {
		/* SIGTERM, a second to end, then SIGKILL until none is left */
		for (int round = 0; round < 50 && signal_marked(mark, round ? SIGKILL : SIGTERM);
		     round++) {
			double end = tally_now_mono() + (round ? 0.2 : 1.0);
			while (tally_now_mono() < end && signal_marked(mark, 0)) {
				struct timespec ts = { 0, 20 * 1000 * 1000 };
				nanosleep(&ts, NULL);
			}
		}
		if (died)
			died(ctx, note.buf ? note.buf : "");
	}
	strbuf_release(&in);
	strbuf_release(&note);
}

int job_watch_start(struct job_watch *w, void (*died)(void *ctx, const char *note), void *ctx)
{
	w->pid = -1;
	w->fd = -1;
	unsigned char r[16];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return tally_seterr(-EIO, "cannot make the job's mark: %s", strerror(errno));
	struct strbuf mark = STRBUF_INIT;
	strbuf_addstr(&mark, WATCH_MARK);
	for (size_t i = 0; i < sizeof(r); i++)
		strbuf_addf(&mark, "%02x", r[i]);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		strbuf_release(&mark);
		return tally_seterr(-errno, "cannot make a pipe: %s", strerror(errno));
	}
	fflush(NULL);
	pid_t c = fork();
	if (c < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		strbuf_release(&mark);
		return tally_seterr(-e, "cannot fork: %s", strerror(e));
	}
	if (c == 0) {
		/* the watcher: a group of its own (a terminal's ^C is the job's),
		 * nothing of the job's open but its end of the pipe */
		setpgid(0, 0);
		prctl(PR_SET_NAME, "tally-watch");
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		int nul = open("/dev/null", O_RDWR);
		int in = fcntl(p[0], F_DUPFD, 10);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		dup2(in, 3);
		if (close_range(4, ~0U, 0) < 0)
			for (int fd = 4; fd < 1024; fd++)
				close(fd);
		watch_loop(3, mark.buf, died, ctx);
		_exit(0);
	}
	close(p[0]);
	w->pid = c;
	w->fd = p[1];
	watch_pid = c;
	/* everything the job starts from here on carries the mark: the
	 * watcher finds it after the job, whatever its group or session */
	char *eq = strchr(mark.buf, '=');
	*eq = 0;
	setenv(mark.buf, eq + 1, 1);
	strbuf_release(&mark);
	return 0;
}

void job_watch_note(struct job_watch *w, const char *note)
{
	if (w->fd < 0)
		return;
	struct strbuf sb = STRBUF_INIT;
	for (const char *p = note; *p; p++)
		strbuf_addch(&sb, *p == '\n' ? ' ' : *p);
	strbuf_addch(&sb, '\n');
	tally_write_all(w->fd, sb.buf, sb.len);
	strbuf_release(&sb);
}

void job_watch_end(struct job_watch *w)
{
	if (w->fd >= 0) {
		tally_write_all(w->fd, "bye\n", 4);
		close(w->fd);
		w->fd = -1;
	}
	if (w->pid > 0) {
		while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (watch_pid == w->pid)
			watch_pid = -1;
		w->pid = -1;
	}
}
