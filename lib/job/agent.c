/* The agent of a job on a remote host (docs/remote.md): started over ssh with
 * the job's profilers, it sets them up and initializes them, then detaches
 * (it outlives the ssh connection) and answers requests on a unix socket in
 * its private directory: start, stop (stop and report), status, clean, quit.
 * Each request is one line of tab-separated words; each answer "ok ..." or
 * "error MESSAGE". The profilers run through the same steps as a local job's
 * (tally_profiler_*), their results under DIR/results/TAG/iteration.N. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"
#include "tally/job.h"

struct agent {
	const char *dir;
	struct tally_profiler **p;
	size_t n, ap;
	struct tally_profiler_env env;
	bool *started; /* per profiler, in the iteration at hand */
	char *tag;
	unsigned iter;
	char *profdir;
};

static int sock_path(const char *dir, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/agent.sock", dir);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
		return tally_seterr(-ENAMETOOLONG, "the agent's directory '%s' is too long for a socket path", dir);
	return 0;
}

static void boot_id(char *out, size_t n)
{
	struct strbuf sb = STRBUF_INIT;
	snprintf(out, n, "-");
	if (!strbuf_read_file(&sb, "/proc/sys/kernel/random/boot_id", 256) && sb.len) {
		while (sb.len && sb.buf[sb.len - 1] == '\n')
			sb.buf[--sb.len] = '\0';
		snprintf(out, n, "%s", sb.buf);
	}
	strbuf_release(&sb);
}

/* A tag as a directory name: what the job made of it (no '/', no leading '.'). */
static bool tag_ok(const char *t)
{
	return t[0] && t[0] != '.' && !strchr(t, '/') && strlen(t) < 200;
}

static void stop_all(struct agent *a, struct strbuf *errs)
{
	struct tally_profiler_run run = { a->profdir, a->tag, a->iter, -1 };
	bool *stopped = xcalloc(a->n + 1, sizeof(bool));
	for (size_t i = a->n; i-- > 0;)
		if (a->started[i]) {
			if (tally_profiler_stop(a->p[i], &run))
				strbuf_addf(errs, "%s%s", errs->len ? "; " : "", tally_errmsg());
			else
				stopped[i] = true;
			a->started[i] = false;
		}
	for (size_t i = 0; i < a->n; i++)
		if (stopped[i] && tally_profiler_report(a->p[i], &run))
			strbuf_addf(errs, "%s%s", errs->len ? "; " : "", tally_errmsg());
	free(stopped);
	free(a->tag);
	free(a->profdir);
	a->tag = a->profdir = NULL;
}

/* One request; the answer into out. Returns false for quit. */
static bool serve(struct agent *a, char *line, struct strbuf *out)
{
	char *w[8] = { 0 };
	int n = 0;
	for (char *s = line, *t; n < 8 && s; s = t) {
		t = strchr(s, '\t');
		if (t)
			*t++ = '\0';
		w[n++] = s;
	}
	if (!n || !w[0][0]) {
		strbuf_addstr(out, "error empty request");
		return true;
	}
	if (!strcmp(w[0], "status")) {
		char b[64];
		boot_id(b, sizeof(b));
		strbuf_addf(out, "ok %s %s", b, a->tag ? a->tag : "-");
		return true;
	}
	if (!strcmp(w[0], "quit")) {
		if (a->tag) {
			struct strbuf e = STRBUF_INIT;
			stop_all(a, &e);
			strbuf_release(&e);
		}
		strbuf_addstr(out, "ok");
		return false;
	}
	if (!strcmp(w[0], "start") && n == 4) {
		/* start TAG ITER INDICES (comma-separated profiler numbers, or "-") */
		if (!tag_ok(w[1])) {
			strbuf_addstr(out, "error tag '");
			strbuf_add_excerpt(out, w[1], strlen(w[1]), 40);
			strbuf_addstr(out, "' cannot name a directory (no '/', not starting with '.')");
			return true;
		}
		if (a->tag) {
			struct strbuf e = STRBUF_INIT;
			stop_all(a, &e); /* a start without its stop: the old one ends first */
			strbuf_release(&e);
		}
		a->tag = xstrdup(w[1]);
		a->iter = (unsigned)strtoul(w[2], NULL, 10);
		struct strbuf pd = STRBUF_INIT;
		strbuf_addf(&pd, "%s/results/%s/iteration.%u", a->dir, a->tag, a->iter);
		a->profdir = strbuf_detach(&pd);
		if (job_mkdirs(a->profdir, 0700)) {
			strbuf_addf(out, "error %s", tally_errmsg());
			return true;
		}
		struct tally_profiler_run run = { a->profdir, a->tag, a->iter, -1 };
		struct strbuf errs = STRBUF_INIT;
		for (char *s = w[3], *t; s && *s && strcmp(s, "-"); s = t) {
			t = strchr(s, ',');
			if (t)
				*t++ = '\0';
			size_t k = (size_t)strtoul(s, NULL, 10);
			if (k >= a->n) {
				strbuf_addf(&errs, "%sno profiler %zu", errs.len ? "; " : "", k);
				continue;
			}
			if (tally_profiler_start(a->p[k], &run))
				strbuf_addf(&errs, "%s%s", errs.len ? "; " : "", tally_errmsg());
			else
				a->started[k] = true;
		}
		if (errs.len)
			strbuf_addf(out, "error %s", errs.buf);
		else
			strbuf_addstr(out, "ok");
		strbuf_release(&errs);
		return true;
	}
	if (!strcmp(w[0], "stop")) {
		if (!a->tag) {
			strbuf_addstr(out, "error nothing was started (start TAG ITERATION PROFILERS first)");
			return true;
		}
		struct strbuf errs = STRBUF_INIT;
		stop_all(a, &errs);
		if (errs.len)
			strbuf_addf(out, "error %s", errs.buf);
		else
			strbuf_addstr(out, "ok");
		strbuf_release(&errs);
		return true;
	}
	if (!strcmp(w[0], "clean") && n == 2 && tag_ok(w[1])) {
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/results/%s", a->dir, w[1]);
		tally_remove_tree(p.buf);
		strbuf_release(&p);
		strbuf_addstr(out, "ok");
		return true;
	}
	strbuf_addstr(out, "error unknown request '");
	strbuf_add_excerpt(out, w[0], strlen(w[0]), 40);
	strbuf_addstr(out, "' (start TAG ITERATION PROFILERS, stop, status, clean TAG, quit)");
	return true;
}

static void agent_loop(struct agent *a, int ls)
{
	for (;;) {
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || (cr.uid != geteuid() && cr.uid != 0)) {
			close(c);
			continue;
		}
		struct timeval tv = { 10, 0 };
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		struct strbuf in = STRBUF_INIT, out = STRBUF_INIT;
		char buf[512];
		ssize_t k;
		while (in.len < 4096 && (k = read(c, buf, sizeof(buf))) > 0) {
			strbuf_add(&in, buf, (size_t)k);
			if (memchr(in.buf, '\n', in.len))
				break;
		}
		bool go_on = true;
		char *nl = in.buf ? memchr(in.buf, '\n', in.len) : NULL;
		if (nl) {
			*nl = '\0';
			go_on = serve(a, in.buf, &out);
		} else {
			strbuf_addstr(&out, "error no request");
		}
		strbuf_addch(&out, '\n');
		tally_write_all(c, out.buf, out.len);
		close(c);
		strbuf_release(&in);
		strbuf_release(&out);
		if (!go_on)
			break;
	}
}

int tally_job_agent_start(const char *dir, const char *profilers, struct strbuf *ready)
{
	struct agent a = { .dir = dir };
	struct stat st;
	if (job_mkdirs(dir, 0700))
		return -EIO;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return tally_seterr(-EPERM, "the agent's directory '%s' is not the user's own directory", dir);
	chmod(dir, 0700);
	struct sockaddr_un sa;
	int r = sock_path(dir, &sa);
	if (r)
		return r;
	tally_profilers_path(NULL, &a.env.path);
	char *state = tally_profilers_state_dir();
	a.env.state_dir = state;
	/* one profiler a line: NAME [ARGS...], words as in a control file */
	for (const char *p = profilers; p && *p && !r;) {
		const char *e = strchr(p, '\n');
		char *line = e ? xstrndup(p, (size_t)(e - p)) : xstrdup(p);
		p = e ? e + 1 : p + strlen(p);
		char **w = NULL;
		size_t nw = 0;
		if (!(r = tally_job_split(line, &w, &nw)) && nw) {
			struct tally_profiler *pr = NULL;
			r = tally_profiler_find(&pr, w[0], w + 1, &a.env);
			if (!r) {
				GROW(a.p, a.ap, a.n + 1);
				a.p[a.n++] = pr;
				r = tally_profiler_setup(pr, &a.env, -1, NULL);
				if (!r)
					r = tally_profiler_initialize(pr, &a.env, -1);
			}
		}
		tally_job_argv_free(w);
		free(line);
	}
	int ls = -1;
	if (!r) {
		unlink(sa.sun_path);
		ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 16) < 0)
			r = tally_seterr(-errno, "the agent cannot listen on '%s': %s", sa.sun_path, strerror(errno));
	}
	if (!r) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			r = tally_seterr(-errno, "the agent cannot start: %s", strerror(errno));
		} else if (pid == 0) {
			/* the agent: its own session, no terminal, no ssh connection */
			setsid();
			signal(SIGHUP, SIG_IGN);
			signal(SIGPIPE, SIG_IGN);
			struct strbuf log = STRBUF_INIT;
			strbuf_addf(&log, "%s/agent.log", dir);
			int fd = open(log.buf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
			dup2(nul, 0);
			dup2(fd >= 0 ? fd : nul, 1);
			dup2(fd >= 0 ? fd : nul, 2);
			strbuf_release(&log);
			a.started = xcalloc(a.n + 1, sizeof(bool));
			agent_loop(&a, ls);
			unlink(sa.sun_path);
			_exit(0);
		} else {
			char b[64];
			boot_id(b, sizeof(b));
			strbuf_addf(ready, "ready %d %s", (int)pid, b);
		}
	}
	if (ls >= 0)
		close(ls);
	for (size_t i = 0; i < a.n; i++)
		tally_profiler_free(a.p[i]);
	free(a.p);
	tally_job_argv_free(a.env.path);
	free(state);
	return r;
}

int tally_job_agent_ctl(const char *dir, char *const *words, struct strbuf *answer)
{
	struct sockaddr_un sa;
	int r = sock_path(dir, &sa);
	if (r)
		return r;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return tally_seterr(-errno, "socket: %s", strerror(errno));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(s);
		return tally_seterr(-ENOTCONN, "no agent answers at '%s' (%s)", sa.sun_path, strerror(e));
	}
	struct strbuf req = STRBUF_INIT;
	for (size_t i = 0; words[i]; i++) {
		if (strchr(words[i], '\t') || strchr(words[i], '\n')) {
			close(s);
			strbuf_release(&req);
			return tally_seterr(-EINVAL, "a request word holds a tab or a newline");
		}
		strbuf_addf(&req, "%s%s", i ? "\t" : "", words[i]);
	}
	strbuf_addch(&req, '\n');
	r = tally_write_all(s, req.buf, req.len) ? tally_seterr(-errno, "cannot ask the agent: %s", strerror(errno)) : 0;
	strbuf_release(&req);
	if (!r) {
		r = tally_read_fd(answer, s, "the agent's answer", 1 << 20);
		while (answer->len && answer->buf[answer->len - 1] == '\n')
			answer->buf[--answer->len] = '\0';
		if (!r && !answer->len)
			r = tally_seterr(-ENOTCONN, "the agent at '%s' closed without an answer", sa.sun_path);
	}
	close(s);
	return r;
}
