/* The agent of a job on a remote host (docs/remote.md): started over ssh with
 * the job's profilers, it sets them up and initializes them, then detaches
 * (it outlives the ssh connection) and answers requests on a unix socket in
 * its private directory: start, stop (stop and report), status, clean, quit.
 * Each request is one line of tab-separated words; each answer "ok ..." or
 * "error MESSAGE". The profilers run through the same steps as a local job's
 * (tally_profiler_*), their results under DIR/results/TAG/iteration.N. */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tally/job.h"

struct agent {
	const char *dir;
	double lease; /* seconds without a request after which it ends (0: none) */
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
		return tally_seterr(-ENAMETOOLONG,
				    "the agent's directory '%s' is too long for a socket path",
				    dir);
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

/* A decimal of at most 10 digits up to max, nothing else. */
static bool parse_dec(const char *s, unsigned long max, unsigned long *out)
{
	size_t n = strspn(s, "0123456789");
	if (!n || n > 10 || s[n])
		return false;
	unsigned long v = strtoul(s, NULL, 10);
	if (v > max)
		return false;
	*out = v;
	return true;
}

static int bad_word(const char *what, const char *w, const char *rule)
{
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(-EINVAL, "%s '%s' %s", what, tally_excerpt(q, w), rule);
}

int tally_agent_parse(char *line, size_t nprofilers, struct tally_agent_req *req)
{
	memset(req, 0, sizeof(*req));
	char *w[8] = { 0 };
	int n = 0;
	for (char *s = line, *t; s; s = t) {
		t = strchr(s, '\t');
		if (t)
			*t++ = '\0';
		if (n == 8)
			return tally_seterr(-EINVAL, "too many words in the request (at most 8)");
		w[n++] = s;
	}
	if (!n || !w[0][0])
		return tally_seterr(-EINVAL, "empty request");
	static const struct {
		const char *name;
		enum tally_agent_op op;
		int words;
		const char *usage;
	} ops[] = {
		{ "status", TALLY_AGENT_STATUS, 1, "status" },
		{ "quit", TALLY_AGENT_QUIT, 1, "quit" },
		{ "stop", TALLY_AGENT_STOP, 1, "stop" },
		{ "start", TALLY_AGENT_START, 4, "start TAG ITERATION PROFILERS" },
		{ "clean", TALLY_AGENT_CLEAN, 2, "clean TAG" },
	};
	size_t k = 0;
	while (k < ARRAY_SIZE(ops) && strcmp(ops[k].name, w[0]))
		k++;
	if (k == ARRAY_SIZE(ops))
		return bad_word("unknown request", w[0],
				"(start TAG ITERATION PROFILERS, stop, status, clean TAG, quit)");
	if (n != ops[k].words)
		return tally_seterr(-EINVAL, "'%s' takes %d word%s after it, not %d (%s)",
				    ops[k].name, ops[k].words - 1, ops[k].words == 2 ? "" : "s",
				    n - 1, ops[k].usage);
	req->op = ops[k].op;
	if (n > 1) {
		/* a tag as a directory name: what the job made of it */
		if (!w[1][0] || w[1][0] == '.' || strchr(w[1], '/') || strlen(w[1]) >= 200)
			return bad_word(
				"tag", w[1],
				"cannot name a directory (1 to 199 bytes, no '/', not starting with '.')");
		req->tag = w[1];
	}
	if (req->op != TALLY_AGENT_START)
		return 0;
	unsigned long v;
	if (!parse_dec(w[2], UINT_MAX, &v))
		return bad_word("iteration", w[2], "is not a number from 0 to 4294967295");
	req->iter = (unsigned)v;
	if (!strcmp(w[3], "-"))
		return 0;
	for (char *s = w[3], *t; s; s = t) {
		t = strchr(s, ',');
		if (t)
			*t++ = '\0';
		if (!parse_dec(s, ULONG_MAX, &v) || v >= nprofilers) {
			tally_agent_req_release(req);
			char q[TALLY_EXCERPT_SIZE];
			return nprofilers
				       ? tally_seterr(
						 -EINVAL,
						 "no profiler '%s' (the profilers are 0 to %zu, comma-separated, or '-')",
						 tally_excerpt(q, s), nprofilers - 1)
				       : bad_word("profiler", s,
						  "does not exist (this agent has none: '-')");
		}
		for (size_t i = 0; i < req->nidx; i++)
			if (req->idx[i] == v) {
				tally_agent_req_release(req);
				return tally_seterr(-EINVAL, "profiler %lu named twice", v);
			}
		req->idx = xrealloc(req->idx, (req->nidx + 1) * sizeof(*req->idx));
		req->idx[req->nidx++] = (size_t)v;
	}
	return 0;
}

void tally_agent_req_release(struct tally_agent_req *req)
{
	free(req->idx);
	req->idx = NULL;
	req->nidx = 0;
}

/* One request; the answer into out. Returns false for quit. */
static bool serve(struct agent *a, char *line, struct strbuf *out)
{
	struct tally_agent_req req;
	if (tally_agent_parse(line, a->n, &req)) {
		strbuf_addf(out, "error %s", tally_errmsg());
		return true;
	}
	bool go_on = true;
	switch (req.op) {
	case TALLY_AGENT_STATUS: {
		char b[64];
		boot_id(b, sizeof(b));
		strbuf_addf(out, "ok %s %s", b, a->tag ? a->tag : "-");
		break;
	}
	case TALLY_AGENT_QUIT:
		if (a->tag) {
			struct strbuf e = STRBUF_INIT;
			stop_all(a, &e);
			strbuf_release(&e);
		}
		strbuf_addstr(out, "ok");
		go_on = false;
		break;
	case TALLY_AGENT_START: {
		if (a->tag) {
			struct strbuf e = STRBUF_INIT;
			stop_all(a, &e); /* a start without its stop: the old one ends first */
			strbuf_release(&e);
		}
		a->tag = xstrdup(req.tag);
		a->iter = req.iter;
		struct strbuf pd = STRBUF_INIT;
		strbuf_addf(&pd, "%s/results/%s/iteration.%u", a->dir, a->tag, a->iter);
		a->profdir = strbuf_detach(&pd);
		if (job_mkdirs(a->profdir, 0700)) {
			strbuf_addf(out, "error %s", tally_errmsg());
			break;
		}
		struct tally_profiler_run run = { a->profdir, a->tag, a->iter, -1 };
		struct strbuf errs = STRBUF_INIT;
		for (size_t i = 0; i < req.nidx; i++) {
			size_t k = req.idx[i];
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
		break;
	}
	case TALLY_AGENT_STOP: {
		if (!a->tag) {
			strbuf_addstr(
				out,
				"error nothing was started (start TAG ITERATION PROFILERS first)");
			break;
		}
		struct strbuf errs = STRBUF_INIT;
		stop_all(a, &errs);
		if (errs.len)
			strbuf_addf(out, "error %s", errs.buf);
		else
			strbuf_addstr(out, "ok");
		strbuf_release(&errs);
		break;
	}
	case TALLY_AGENT_CLEAN: {
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/results/%s", a->dir, req.tag);
		tally_remove_tree(p.buf);
		strbuf_release(&p);
		strbuf_addstr(out, "ok");
		break;
	}
	}
	tally_agent_req_release(&req);
	return go_on;
}

/* DIR/lease: the lease in seconds, its mtime the last request: what the next
 * agent on the host reads to tell a directory a dead job left behind. */
static void lease_touch(const struct agent *a)
{
	char path[PATH_MAX], txt[32];
	snprintf(path, sizeof(path), "%s/lease", a->dir);
	int n = snprintf(txt, sizeof(txt), "%.0f %d\n", a->lease, (int)getpid());
	tally_write_file_atomic_mode(path, txt, (size_t)n, 0600);
}

static void agent_loop(struct agent *a, int ls)
{
	for (;;) {
		if (a->lease > 0) {
			/* the lease: no request from the job for that long, and the
			 * job is gone (killed, its host cut off): stop and end */
			struct pollfd p = { .fd = ls, .events = POLLIN };
			int k = poll(&p, 1, (int)(a->lease * 1000));
			if (k < 0 && errno == EINTR)
				continue;
			if (k == 0) {
				if (a->tag) {
					struct strbuf e = STRBUF_INIT;
					stop_all(a, &e);
					strbuf_release(&e);
				}
				/* nothing of it is wanted any more: its job is gone */
				tally_remove_tree(a->dir);
				_exit(0);
			}
		}
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
		    (cr.uid != geteuid() && cr.uid != 0)) {
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
		if (a->lease > 0)
			lease_touch(a);
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

/* Every process of session sid but this one killed (SIGKILL), a few rounds
 * (what is killed may have forked): what an agent started dies with it. */
static void kill_session(pid_t sid)
{
	for (int round = 0; round < 10; round++) {
		DIR *d = opendir("/proc");
		if (!d)
			return;
		int killed = 0;
		for (struct dirent *e; (e = readdir(d));) {
			char *end;
			long pid = strtol(e->d_name, &end, 10);
			if (*end || pid <= 0 || pid == getpid())
				continue;
			struct tally_pstat st;
			if (!tally_pstat_read((int)pid, &st) && st.session == sid &&
			    st.state != 'Z') {
				kill((pid_t)pid, SIGKILL);
				killed++;
			}
		}
		closedir(d);
		if (!killed)
			return;
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* The agent's watcher: a child that lives as long as the agent (its parent
 * death signal) and then ends every process left in the agent's session, the
 * profilers' processes among them, however the agent ended (quit, its lease,
 * kill -9). */
static void start_watcher(void)
{
	pid_t agent = getpid(), sid = getsid(0);
	pid_t w = fork();
	if (w != 0)
		return;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* nothing of the agent's held open: its socket refuses once it is gone,
	 * and ssh's session ends when the agent's start has printed */
	int nul = open("/dev/null", O_RDWR);
	for (int fd = 0; fd < 3 && nul >= 0; fd++)
		dup2(nul, fd);
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == agent) {
		int sig;
		sigwait(&set, &sig);
	}
	kill_session(sid);
	_exit(0);
}

/* The directories beside dir that a dead job left: no agent alive there (its
 * pid in DIR/lease is gone) and no request for longer than its lease. */
static void clean_abandoned(const char *dir)
{
	char *parent = tally_dirname(dir);
	DIR *d = opendir(parent);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		struct strbuf sub = STRBUF_INIT, lease = STRBUF_INIT, txt = STRBUF_INIT;
		strbuf_addf(&sub, "%s/%s", parent, e->d_name);
		strbuf_addf(&lease, "%s/lease", sub.buf);
		struct stat st;
		double secs = 0;
		int pid = 0;
		if (strcmp(sub.buf, dir) && lstat(lease.buf, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid() && !strbuf_read_file(&txt, lease.buf, 64) && txt.buf &&
		    sscanf(txt.buf, "%lf %d", &secs, &pid) == 2 && pid > 0 && kill(pid, 0) < 0 &&
		    errno == ESRCH && (double)(time(NULL) - st.st_mtime) > secs)
			tally_remove_tree(sub.buf);
		strbuf_release(&sub);
		strbuf_release(&lease);
		strbuf_release(&txt);
	}
	if (d)
		closedir(d);
	free(parent);
}

int tally_job_agent_start(const char *dir, const char *profilers, struct strbuf *ready)
{
	struct agent a = { .dir = dir };
	struct stat st;
	if (job_mkdirs(dir, 0700))
		return -EIO;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return tally_seterr(
			-EPERM, "the agent's directory '%s' is not the user's own directory", dir);
	chmod(dir, 0700);
	struct sockaddr_un sa;
	int r = sock_path(dir, &sa);
	if (r)
		return r;
	/* the profilers the job sent along (DIR/profilers) first, then the
	 * host's own path */
	struct strbuf sent = STRBUF_INIT;
	strbuf_addf(&sent, "%s/profilers", dir);
	tally_profilers_path(sent.buf, &a.env.path);
	strbuf_release(&sent);
	char *state = tally_profilers_state_dir();
	a.env.state_dir = state;
	struct strbuf setups = STRBUF_INIT; /* the profilers whose setup ran here */
	/* one profiler a line: NAME [ARGS...], words as in a control file */
	for (const char *p = profilers; p && *p && !r;) {
		const char *e = strchr(p, '\n');
		char *line = e ? xstrndup(p, (size_t)(e - p)) : xstrdup(p);
		p = e ? e + 1 : p + strlen(p);
		char **w = NULL;
		size_t nw = 0;
		if (!strncmp(line, "lease=", 6)) {
			/* lease=SECONDS: the job's lease (it asks at least that often) */
			char *end;
			double v = strtod(line + 6, &end);
			if (!*end && v >= 1 && v <= 86400)
				a.lease = v;
			free(line);
			continue;
		}
		if (!(r = tally_job_split(line, &w, &nw)) && nw) {
			/* label=LABEL first: the name the job gives its files */
			const char *label = NULL;
			size_t k = 0;
			if (!strncmp(w[0], "label=", 6) && nw > 1)
				label = w[k++] + 6;
			/* on a host there is no test process: tally profiles the whole
			 * host there (-a), as autotest's server-side profilers do */
			bool all = strcmp(w[k], "tally") != 0;
			for (size_t i = k + 1; i < nw && !all; i++)
				all = !strcmp(w[i], "-a") || !strcmp(w[i], "--all-cpus");
			if (!all) {
				w = xrealloc(w, (nw + 2) * sizeof(*w));
				w[nw++] = xstrdup("-a");
				w[nw] = NULL;
			}
			struct tally_profiler *pr = NULL;
			r = tally_profiler_find(&pr, w[k], w + k + 1, &a.env);
			if (!r && label && label[0])
				tally_profiler_set_label(pr, label);
			if (!r) {
				GROW(a.p, a.ap, a.n + 1);
				a.p[a.n++] = pr;
				bool ran = false;
				r = tally_profiler_setup(pr, &a.env, -1, &ran);
				if (!r && ran)
					strbuf_addf(&setups, "%s%zu", setups.len ? "," : "",
						    a.n - 1);
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
		if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    listen(ls, 16) < 0)
			r = tally_seterr(-errno, "the agent cannot listen on '%s': %s", sa.sun_path,
					 strerror(errno));
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
			start_watcher();
			struct strbuf log = STRBUF_INIT;
			strbuf_addf(&log, "%s/agent.log", dir);
			int fd = open(log.buf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
			dup2(nul, 0);
			dup2(fd >= 0 ? fd : nul, 1);
			dup2(fd >= 0 ? fd : nul, 2);
			strbuf_release(&log);
			a.started = xcalloc(a.n + 1, sizeof(bool));
			if (a.lease > 0) {
				lease_touch(&a);
				clean_abandoned(dir);
			}
			agent_loop(&a, ls);
			unlink(sa.sun_path);
			_exit(0);
		} else {
			char b[64];
			boot_id(b, sizeof(b));
			strbuf_addf(ready, "ready %d %s %s", (int)pid, b,
				    setups.len ? setups.buf : "-");
		}
	}
	if (ls >= 0)
		close(ls);
	for (size_t i = 0; i < a.n; i++)
		tally_profiler_free(a.p[i]);
	free(a.p);
	tally_job_argv_free(a.env.path);
	free(state);
	strbuf_release(&setups);
	return r;
}

/* The last non-empty line of text, at most max bytes of it, escaped: what a
 * host said, as one line that cannot reach a terminal or a status file raw. */
static void host_line(struct strbuf *sb, const char *text, size_t len, size_t max)
{
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ' ||
		       text[len - 1] == '\t'))
		len--;
	size_t start = len;
	while (start && text[start - 1] != '\n')
		start--;
	strbuf_add_excerpt(sb, text + start, len - start, max);
}

int tally_agent_answer(const char *host, const char *word, const char *out, size_t len, int status,
		       const char *err, struct strbuf *rest)
{
	size_t wl = strlen(word);
	if (status == 255)
		return tally_seterr(-EHOSTUNREACH, "host '%s' cannot be reached", host);
	if (status == 3)
		return tally_seterr(-ENOTCONN, "host '%s': its agent is gone", host);
	if (status) {
		/* the remote tally's error line is the reason, "tally: " taken off */
		const char *e = err ? err : "";
		size_t el = strlen(e);
		struct strbuf m = STRBUF_INIT;
		host_line(&m, e, el, TALLY_AGENT_ANSWER_MAX);
		if (!m.len)
			host_line(&m, out ? out : "", out ? len : 0, TALLY_AGENT_ANSWER_MAX);
		const char *msg = m.buf ? m.buf : "";
		if (!strncmp(msg, "tally: ", 7))
			msg += 7;
		int r = tally_seterr(-EIO, "host '%s': %s", host,
				     msg[0] ? msg : "it failed and said nothing");
		strbuf_release(&m);
		return r;
	}
	/* exit 0: one line, the word and printable ASCII after a space, nothing else */
	size_t n = len;
	if (n && out[n - 1] == '\n')
		n--;
	bool ok = n >= wl && n <= TALLY_AGENT_ANSWER_MAX && !memcmp(out, word, wl) &&
		  (n == wl || out[wl] == ' ');
	for (size_t i = 0; ok && i < n; i++)
		ok = out[i] >= 0x20 && out[i] < 0x7f;
	if (!ok) {
		struct strbuf q = STRBUF_INIT;
		strbuf_add_excerpt(&q, out ? out : "", out ? len : 0, 200);
		int r = tally_seterr(
			-EPROTO,
			"host '%s': its agent answered '%s', not '%s ...' (not a tally agent of this version?)",
			host, q.buf ? q.buf : "", word);
		strbuf_release(&q);
		return r;
	}
	if (rest) {
		strbuf_reset(rest);
		strbuf_add(rest, n > wl ? out + wl + 1 : "", n > wl ? n - wl - 1 : 0);
	}
	return 0;
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
		return tally_seterr(-ENOTCONN, "no agent answers at '%s' (%s)", sa.sun_path,
				    strerror(e));
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
	r = tally_write_all(s, req.buf, req.len)
		    ? tally_seterr(-errno, "cannot ask the agent: %s", strerror(errno))
		    : 0;
	strbuf_release(&req);
	if (!r) {
		r = tally_read_fd(answer, s, "the agent's answer", 1 << 20);
		while (answer->len && answer->buf[answer->len - 1] == '\n')
			answer->buf[--answer->len] = '\0';
		if (!r && !answer->len)
			r = tally_seterr(-ENOTCONN, "the agent at '%s' closed without an answer",
					 sa.sun_path);
	}
	close(s);
	return r;
}
