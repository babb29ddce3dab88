/* A job's remote hosts (docs/remote.md): tally installed on each, an agent
 * started there with the job's profilers, every host asked at once and waited
 * for (a barrier) before the test starts and after it ends, the results pulled
 * into profiling/HOST/ and checked before the host's copy goes. A host whose
 * agent is gone (the host rebooted: its boot id changed; or the agent died) is
 * found at the next request: what it wrote is pulled, its agent started again,
 * and the gap said; one that does not come back within the limit is lost, and
 * the job goes on with the others. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tally/json.h"
#include "tally/remote.h"

/* seconds the install and the agent's start (the profilers' setup) may take,
 * and a pull, at least, whatever --host-timeout says of a request */
#define BEGIN_LIMIT 600.0
#define PULL_LIMIT 60.0
/* seconds a stop request has at least for each profiler (stop and report) */
#define STEP_ALLOWANCE 60.0

struct job_hosts;
struct host;
static int host_start_fn(struct host *h);
static int host_stop_fn(struct host *h);
static void set_str(char **p, const char *s);

struct host {
	struct job_hosts *hs;
	struct tally_remote r;
	char *tally;       /* the installed tally on the host */
	char *agentdir;    /* the agent's private directory there */
	char *boot_id;
	/* its install checked and its agent started: only then is anything under the root run */
	bool agent;
	bool lost;
	bool running;      /* profilers started and not yet stopped */
	int (*fn)(struct host *h); /* the work of the round at hand */
	int ret;
	char err[2048];
	struct strbuf note; /* what happened to it in this round (a restart, a gap) */
	/* the profilers whose setup ran at its agent's last start ("0,2", "-") */
	char *setups;
	unsigned restarts; /* its agent started again (a reboot, a dead agent) */
	bool installed;    /* this job copied tally there */
	/* the profiled iteration at hand, for status.json */
	struct job_host_iter it;
};

struct job_hosts {
	struct host *h;
	size_t n;
	char *profilers; /* one a line, for the agents */
	size_t nprof;    /* how many */
	/* the external profilers, sent to each agent's directory */
	char **plugin_dirs, **plugin_names;
	size_t nplugins;
	char *labels;    /* their names, ", "-separated, for warnings */
	const char *tag;
	unsigned iter;
	const char *indices;
	const char *profdir;
	double limit;
	char *mux; /* ssh's shared connections, one per host (a private directory) */
	double lease; /* the agents end when the job has not asked for that long */
	pthread_t pinger;
	bool pinging;
	int ping_stop[2]; /* written to end the pinger */
};

static void host_round(void *ctx, size_t i)
{
	struct host *h = &((struct job_hosts *)ctx)->h[i];
	double t0 = tally_now_mono();
	if (h->lost) {
		h->it.lost = true;
		/* never asked again, and never forgotten: each later profiled
		 * iteration says that it went without it */
		if (h->fn == host_start_fn) {
			h->ret = -EHOSTDOWN;
			snprintf(h->err, sizeof(h->err),
				 "host '%s' is lost (since an earlier test): not profiled",
				 h->r.host);
		}
		if (h->ret)
			set_str(&h->it.start_err, h->err);
		return;
	}
	h->ret = h->fn(h);
	if (h->ret)
		snprintf(h->err, sizeof(h->err), "%s", tally_errmsg());
	double secs = tally_now_mono() - t0;
	if (h->fn == host_start_fn) {
		h->it.start = secs;
		if (h->ret)
			set_str(&h->it.start_err, h->err);
	} else if (h->fn == host_stop_fn) {
		h->it.stop = secs - h->it.pull;
		if (h->ret && !h->it.pull_err)
			set_str(&h->it.stop_err, h->err);
	}
	if (h->note.len) {
		struct strbuf n = STRBUF_INIT;
		strbuf_addf(&n, "%s%shost '%s': %s", h->it.note ? h->it.note : "",
			    h->it.note ? "; " : "", h->r.host, h->note.buf);
		free(h->it.note);
		h->it.note = strbuf_detach(&n);
	}
	h->it.lost = h->lost;
}

/* Every live host's fn at once; the round ends when all have answered (a
 * round takes the slowest host's time, not the sum). */
static void round_all(struct job_hosts *hs, int (*fn)(struct host *))
{
	for (size_t i = 0; i < hs->n; i++) {
		struct host *h = &hs->h[i];
		h->fn = fn;
		h->ret = 0;
		h->err[0] = '\0';
		strbuf_reset(&h->note);
	}
	tally_run_parallel(hs->n, host_round, hs);
}

static void set_str(char **p, const char *s)
{
	free(*p);
	*p = s ? xstrdup(s) : NULL;
}

/* Runs the installed tally on the host with words after it: its stdout in
 * out, its stderr in err. */
static int host_tally(struct host *h, char *const *words, const char *in, struct strbuf *out,
		      struct strbuf *err, int *status)
{
	size_t n = 0;
	while (words[n])
		n++;
	char **w = xcalloc(n + 2, sizeof(char *));
	w[0] = h->tally;
	for (size_t i = 0; i < n; i++)
		w[i + 1] = words[i];
	int r = tally_remote_run(&h->r, w, in, in ? strlen(in) : 0, out, 1 << 20, err, status);
	free(w);
	return r;
}

static int host_begin_steps(struct host *h, bool *installed, size_t *bytesp);
/* Installs tally if needed and starts the agent (its profilers set up and
 * initialized there). */
static int host_begin(struct host *h)
{
	bool inst;
	size_t bytes;
	/* the copy of tally and the profilers' setup may take their time: not
	 * a request's limit, at least BEGIN_LIMIT */
	struct tally_remote r0 = h->r;
	h->r.timeout = h->r.timeout > BEGIN_LIMIT ? h->r.timeout : BEGIN_LIMIT;
	int r = host_begin_steps(h, &inst, &bytes);
	h->r = r0;
	return r;
}

static int host_begin_steps(struct host *h, bool *installed, size_t *bytesp)
{
	bool inst;
	size_t bytes;
	int r = tally_remote_install(&h->r, &inst, &bytes);
	h->installed |= inst;
	if (installed)
		*installed = inst;
	if (bytesp)
		*bytesp = bytes;
	if (r)
		return r;
	if (h->hs->nplugins) {
		/* the external profilers as this machine has them, beside the
		 * agent: its profilers path begins there (docs/remote.md) */
		struct strbuf pd = STRBUF_INIT;
		strbuf_addf(&pd, "%s/profilers", h->agentdir);
		r = tally_remote_send_dirs(&h->r, h->hs->plugin_dirs, h->hs->plugin_names,
					   h->hs->nplugins, pd.buf);
		strbuf_release(&pd);
		if (r)
			return r;
	}
	char *words[] = { "job", "agent", "start", h->agentdir, NULL };
	struct strbuf out = STRBUF_INIT, err = STRBUF_INIT, rest = STRBUF_INIT;
	int st;
	r = host_tally(h, words, h->hs->profilers, &out, &err, &st);
	if (!r && st == 255)
		r = tally_seterr(-EHOSTUNREACH,
				 "host '%s': the connection dropped while its agent started",
				 h->r.host);
	else if (!r && st == 3)
		st = 1; /* start has no "gone": its error is its message */
	if (!r)
		r = tally_agent_answer(h->r.host, "ready", out.buf ? out.buf : "", out.len, st,
				       err.buf, &rest);
	if (!r) {
		/* ready PID BOOTID SETUPS */
		char *sp = strchr(rest.buf ? rest.buf : "", ' ');
		char *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
		if (sp2)
			*sp2 = '\0';
		set_str(&h->boot_id, sp ? sp + 1 : "-");
		set_str(&h->setups, sp2 ? sp2 + 1 : "-");
		h->agent = true;
	}
	strbuf_release(&out);
	strbuf_release(&err);
	strbuf_release(&rest);
	return r;
}

/* A request to the host's agent: 0 with what its answer says after "ok",
 * -ENOTCONN when no agent answers (gone), -EHOSTUNREACH when the host cannot
 * be reached, -EIO with its error message (tally_agent_answer: escaped). */
static int ask(struct host *h, char *const *req, struct strbuf *answer)
{
	size_t n = 0;
	while (req[n])
		n++;
	char **w = xcalloc(n + 6, sizeof(char *));
	w[0] = "job";
	w[1] = "agent";
	w[2] = "ctl";
	w[3] = h->agentdir;
	for (size_t i = 0; i < n; i++)
		w[4 + i] = req[i];
	int st;
	struct strbuf out = STRBUF_INIT, err = STRBUF_INIT;
	strbuf_reset(answer);
	int r = host_tally(h, w, NULL, &out, &err, &st);
	free(w);
	if (r == -ETIMEDOUT) {
		/* connected, and no answer within the limit: a hung host is lost
		 * at once, never waited for again (each request would cost it) */
		h->lost = true;
		r = tally_seterr(
			-EHOSTDOWN,
			"host '%s' is lost: no answer to '%s' within %.0f s (--host-timeout)",
			h->r.host, req[0], h->r.timeout);
	} else if (!r) {
		r = tally_agent_answer(h->r.host, "ok", out.buf ? out.buf : "", out.len, st,
				       err.buf, answer);
	}
	strbuf_release(&out);
	strbuf_release(&err);
	return r;
}

/* Whether a request's failure means the agent or the host went away (no
 * agent there, no connection): it may come back (a reboot). */
static bool gone(int r)
{
	return r == -ENOTCONN || r == -EHOSTUNREACH;
}

/* The agent is gone: wait (up to the limit) for the host to answer, tell a
 * reboot from a dead agent by the boot id, and start the agent again. */
static int recover(struct host *h)
{
	struct job_hosts *hs = h->hs;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct tally_remote_facts f = { 0 };
	int r;
	for (;;) {
		r = tally_remote_probe(&h->r, &f);
		if (!r)
			break;
		tally_remote_facts_release(&f);
		if (r == -EPERM) {
			/* its root is not private any more: nothing more is run there */
			h->lost = true;
			return r;
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		double waited =
			(double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (waited >= hs->limit) {
			h->lost = true;
			return tally_seterr(-EHOSTDOWN,
					    "host '%s' is lost: it did not come back within %.0f s",
					    h->r.host, hs->limit);
		}
		sleep(1);
	}
	bool rebooted = h->boot_id && strcmp(h->boot_id, f.boot_id);
	strbuf_addf(&h->note, "%s%s", h->note.len ? "; " : "",
		    rebooted ? "rebooted (its boot id changed)" : "its agent died");
	if (h->running)
		strbuf_addf(&h->note,
			    "; profilers %s did not survive it: what they had not written is lost",
			    hs->labels);
	tally_remote_facts_release(&f);
	r = host_begin(h);
	if (!r) {
		strbuf_addstr(&h->note, "; its agent started again");
		h->restarts++;
	}
	return r;
}

static int host_start(struct host *h)
{
	struct job_hosts *hs = h->hs;
	char iter[16];
	snprintf(iter, sizeof(iter), "%u", hs->iter);
	char *req[] = { "start", (char *)hs->tag, iter, (char *)hs->indices, NULL };
	struct strbuf a = STRBUF_INIT;
	int r = ask(h, req, &a);
	if (gone(r)) {
		r = recover(h);
		if (!r)
			r = ask(h, req, &a);
	}
	h->running = !r;
	strbuf_release(&a);
	return r;
}

static int host_start_fn(struct host *h)
{
	return host_start(h);
}

static int host_stop(struct host *h);
static int host_stop_fn(struct host *h)
{
	return host_stop(h);
}

static int pull(struct host *h)
{
	struct job_hosts *hs = h->hs;
	struct strbuf rdir = STRBUF_INIT, ldir = STRBUF_INIT;
	strbuf_addf(&rdir, "%s/results/%s/iteration.%u", h->agentdir, hs->tag, hs->iter);
	strbuf_addf(&ldir, "%s/%s", hs->profdir, h->r.host);
	size_t files;
	uint64_t bytes;
	/* a transfer: the request's limit, and at least PULL_LIMIT */
	struct tally_remote rr = h->r;
	rr.timeout = rr.timeout > PULL_LIMIT ? rr.timeout : PULL_LIMIT;
	double t0 = tally_now_mono();
	int r = tally_remote_pull(&rr, rdir.buf, ldir.buf, &files, &bytes);
	h->it.pull = tally_now_mono() - t0;
	if (r == -ETIMEDOUT) {
		h->lost = true;
		r = tally_seterr(-EHOSTDOWN,
				 "host '%s' is lost: its results did not come within %.0f s",
				 h->r.host, rr.timeout);
	}
	h->it.files = files;
	h->it.bytes = bytes;
	if (r)
		set_str(&h->it.pull_err, tally_errmsg());
	if (!r) {
		/* checked here: the host's copy may go */
		char *req[] = { "clean", (char *)hs->tag, NULL };
		struct strbuf a = STRBUF_INIT;
		ask(h, req, &a);
		strbuf_release(&a);
	}
	strbuf_release(&rdir);
	strbuf_release(&ldir);
	return r;
}

static int host_stop(struct host *h)
{
	char *req[] = { "stop", NULL };
	struct strbuf a = STRBUF_INIT;
	/* stop runs the profilers' stop and report steps there: the request's
	 * limit, and at least STEP_ALLOWANCE a profiler (as the steps have here) */
	double t = h->r.timeout, want = STEP_ALLOWANCE * (double)(h->hs->nprof ? h->hs->nprof : 1);
	h->r.timeout = t > want ? t : want;
	int r = ask(h, req, &a);
	h->r.timeout = t;
	strbuf_release(&a);
	if (gone(r)) {
		/* what it had written before it went comes back all the same */
		r = recover(h);
	}
	h->running = false;
	if (h->lost)
		return r;
	int p = pull(h);
	return r ? r : p;
}

static int host_quit(struct host *h)
{
	/* a host whose root was never checked (refused, unreachable): nothing
	 * under it is run, not even to say quit */
	if (!h->agent)
		return 0;
	/* the end of the job: a live host has PULL_LIMIT at least to quit and
	 * clean (a hung one is lost already, never asked) */
	h->r.timeout = h->r.timeout > PULL_LIMIT ? h->r.timeout : PULL_LIMIT;
	char *req[] = { "quit", NULL };
	struct strbuf a = STRBUF_INIT;
	ask(h, req, &a);
	strbuf_release(&a);
	/* the agent's directory goes with it; the install stays for the next job */
	char *w[] = { "rm", "-rf", "--", h->agentdir, NULL };
	int st;
	tally_remote_run(&h->r, w, NULL, 0, NULL, 0, NULL, &st);
	return 0;
}

/* The external profilers of the lines, found as the job found them: their
 * directories go to the hosts with the agents. */
static void find_plugins(struct job_hosts *hs, const char *profilers,
			 const struct tally_profiler_env *env)
{
	for (const char *p = profilers; env && p && *p;) {
		const char *e = strchr(p, '\n');
		char *line = e ? xstrndup(p, (size_t)(e - p)) : xstrdup(p);
		p = e ? e + 1 : p + strlen(p);
		char **w = NULL;
		size_t nw = 0;
		struct tally_profiler *pr = NULL;
		if (!tally_job_split(line, &w, &nw) && nw &&
		    !tally_profiler_find(&pr, w[0], w + 1, env) && !pr->bi && pr->where) {
			bool dup = false;
			for (size_t i = 0; i < hs->nplugins && !dup; i++)
				dup = !strcmp(hs->plugin_names[i], w[0]);
			if (!dup) {
				hs->plugin_dirs = xrealloc(hs->plugin_dirs,
							   (hs->nplugins + 1) * sizeof(char *));
				hs->plugin_names = xrealloc(hs->plugin_names,
							    (hs->nplugins + 1) * sizeof(char *));
				hs->plugin_dirs[hs->nplugins] = xstrdup(pr->where);
				hs->plugin_names[hs->nplugins++] = xstrdup(w[0]);
			}
		}
		if (pr)
			tally_profiler_free(pr);
		tally_job_argv_free(w);
		free(line);
	}
}

/* /tmp/tally-ssh-PID-* of this user whose job (PID) is gone: a job killed
 * (kill -9, an OOM kill) could not remove its directory of shared
 * connections. */
static void clean_dead_mux(void)
{
	DIR *d = opendir("/tmp");
	for (struct dirent *e; d && (e = readdir(d));) {
		int pid = 0;
		char rest[32];
		if (sscanf(e->d_name, "tally-ssh-%d-%31s", &pid, rest) != 2 || pid <= 0 ||
		    strlen(rest) != 6)
			continue;
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "/tmp/%s", e->d_name);
		struct stat st;
		if (lstat(p.buf, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
		    kill(pid, 0) < 0 && errno == ESRCH)
			tally_remove_tree(p.buf);
		strbuf_release(&p);
	}
	if (d)
		closedir(d);
}

int job_hosts_new(struct job_hosts **out, char *const *hosts, size_t n, const char *root,
		  double limit, const char *jobname, const char *profilers, const char *labels,
		  const struct tally_profiler_env *env)
{
	*out = NULL;
	int r = tally_remote_hosts_check(hosts, n);
	if (r)
		return r;
	struct job_hosts *hs = xcalloc(1, sizeof(*hs));
	hs->n = n;
	hs->h = xcalloc(n + 1, sizeof(*hs->h));
	/* the agents' lease: four times a request's limit (at least 10 s); the
	 * job asks each agent at least four times as often (job_hosts_begin) */
	hs->limit = limit > 0 ? limit : 60;
	hs->lease = 4 * hs->limit > 10 ? 4 * hs->limit : 10;
	/* each profiler's line led by its label (label=cmd-vmstat), as the job
	 * names its files: several cmd profilers on a host keep apart */
	struct strbuf prof = STRBUF_INIT;
	strbuf_addf(&prof, "lease=%.0f\n", hs->lease);
	const char *lab = labels && *labels ? labels : NULL;
	for (const char *p = profilers; p && *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (lab) {
			const char *comma = strstr(lab, ", ");
			size_t ll = comma ? (size_t)(comma - lab) : strlen(lab);
			struct strbuf w = STRBUF_INIT;
			strbuf_addstr(&w, "label=");
			strbuf_add(&w, lab, ll);
			tally_sh_quote(&prof, w.buf);
			strbuf_addch(&prof, ' ');
			strbuf_release(&w);
			lab = comma ? comma + 2 : NULL;
		}
		strbuf_add(&prof, p, len);
		strbuf_addch(&prof, '\n');
		hs->nprof++;
		p = e ? e + 1 : p + len;
	}
	hs->profilers = strbuf_detach(&prof);
	hs->labels = xstrdup(labels);
	find_plugins(hs, profilers, env);
	hs->ping_stop[0] = hs->ping_stop[1] = -1;
	/* the job's pid in its name: the next job removes what a dead one left */
	clean_dead_mux();
	char tmpl[64];
	snprintf(tmpl, sizeof(tmpl), "/tmp/tally-ssh-%d-XXXXXX", (int)getpid());
	if (mkdtemp(tmpl))
		hs->mux = xstrdup(tmpl);
	for (size_t i = 0; i < n; i++) {
		struct host *h = &hs->h[i];
		h->hs = hs;
		/* --host-timeout bounds every request, not only a host's return */
		h->r = (struct tally_remote){
			.host = hosts[i], .root = root, .mux_dir = hs->mux, .timeout = hs->limit
		};
		char *dir = tally_remote_dir(&h->r);
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s/tally", dir);
		h->tally = strbuf_detach(&sb);
		/* one directory per job run and host name, beside the versions (an
		 * install that replaces a version leaves the agents be): two jobs
		 * on one host keep apart, and so do two names of one machine */
		strbuf_addf(&sb, "%s/agents/%s-%d-%ld-%s", root && *root ? root : TALLY_REMOTE_ROOT,
			    jobname, (int)getpid(), (long)time(NULL), hosts[i]);
		h->agentdir = strbuf_detach(&sb);
		free(dir);
		strbuf_init(&h->note);
	}
	*out = hs;
	return 0;
}

/* The first failure of a round, as the round's error (every host named in it). */
static int round_error(struct job_hosts *hs)
{
	struct strbuf sb = STRBUF_INIT;
	int r = 0;
	for (size_t i = 0; i < hs->n; i++)
		if (hs->h[i].ret) {
			strbuf_addf(&sb, "%s%s", sb.len ? "; " : "", hs->h[i].err);
			if (!r)
				r = hs->h[i].ret;
		}
	if (r)
		tally_seterr(r, "%s", sb.buf);
	strbuf_release(&sb);
	return r;
}

/* The pinger: every live agent asked 'status' a quarter of its lease apart,
 * so that it lives as long as the job does, however long a test runs (its
 * answer and any failure are not the rounds' business). */
static void *pinger(void *arg)
{
	struct job_hosts *hs = arg;
	for (;;) {
		struct pollfd p = { .fd = hs->ping_stop[0], .events = POLLIN };
		if (poll(&p, 1, (int)(hs->lease / 4 * 1000)) != 0)
			return NULL;
		for (size_t i = 0; i < hs->n; i++) {
			struct host *h = &hs->h[i];
			if (__atomic_load_n(&h->lost, __ATOMIC_RELAXED) ||
			    !__atomic_load_n(&h->agent, __ATOMIC_RELAXED))
				continue;
			struct tally_remote r = h->r;
			r.timeout = hs->limit;
			char *w[] = {
				h->tally, "job", "agent", "ctl", h->agentdir, "status", NULL
			};
			int st;
			tally_remote_run(&r, w, NULL, 0, NULL, 0, NULL, &st);
		}
	}
}

int job_hosts_begin(struct job_hosts *hs)
{
	round_all(hs, host_begin);
	int r = round_error(hs);
	if (!r && !hs->pinging && pipe2(hs->ping_stop, O_CLOEXEC) == 0)
		hs->pinging = pthread_create(&hs->pinger, NULL, pinger, hs) == 0;
	return r;
}

/* Notes and errors of the round, into errs (one "host 'H': ..." each). */
static void collect(struct job_hosts *hs, struct strbuf *errs, struct strbuf *notes)
{
	for (size_t i = 0; i < hs->n; i++) {
		struct host *h = &hs->h[i];
		if (h->note.len)
			strbuf_addf(notes, "%shost '%s': %s", notes->len ? "; " : "", h->r.host,
				    h->note.buf);
		if (h->ret)
			strbuf_addf(errs, "%s%s", errs->len ? "; " : "", h->err);
	}
}

void job_hosts_start(struct job_hosts *hs, const char *tag, unsigned iter, const char *indices,
		     struct strbuf *errs, struct strbuf *notes)
{
	hs->tag = tag;
	hs->iter = iter;
	hs->indices = indices;
	for (size_t i = 0; i < hs->n; i++) {
		job_host_iters_free(&hs->h[i].it, 1, false);
		memset(&hs->h[i].it, 0, sizeof(hs->h[i].it));
		hs->h[i].it.host = hs->h[i].r.host;
		hs->h[i].it.iteration = iter;
	}
	round_all(hs, host_start_fn);
	collect(hs, errs, notes);
}

void job_hosts_stop(struct job_hosts *hs, const char *profdir, struct strbuf *errs,
		    struct strbuf *notes)
{
	hs->profdir = profdir;
	round_all(hs, host_stop_fn);
	collect(hs, errs, notes);
}

void job_hosts_free(struct job_hosts *hs)
{
	if (!hs)
		return;
	if (hs->pinging) {
		ssize_t w = write(hs->ping_stop[1], "x", 1);
		(void)w;
		pthread_join(hs->pinger, NULL);
	}
	for (int k = 0; k < 2; k++)
		if (hs->ping_stop[k] >= 0)
			close(hs->ping_stop[k]);
	round_all(hs, host_quit);
	for (size_t i = 0; i < hs->n; i++)
		tally_remote_mux_close(&hs->h[i].r);
	if (hs->mux) {
		tally_remove_tree(hs->mux);
		free(hs->mux);
	}
	for (size_t i = 0; i < hs->n; i++) {
		free(hs->h[i].tally);
		free(hs->h[i].agentdir);
		free(hs->h[i].boot_id);
		free(hs->h[i].setups);
		job_host_iters_free(&hs->h[i].it, 1, false);
		strbuf_release(&hs->h[i].note);
	}
	free(hs->h);
	free(hs->profilers);
	for (size_t i = 0; i < hs->nplugins; i++) {
		free(hs->plugin_dirs[i]);
		free(hs->plugin_names[i]);
	}
	free(hs->plugin_dirs);
	free(hs->plugin_names);
	free(hs->labels);
	free(hs);
}

size_t job_hosts_lost(const struct job_hosts *hs)
{
	size_t n = 0;
	for (size_t i = 0; hs && i < hs->n; i++)
		n += hs->h[i].lost;
	return n;
}

/* The hosts' tally databases of one iteration summed into profdir/all-hosts.db,
 * each host's samples under the label host=HOST, and its text report by host
 * beside it (all-hosts.txt): one view of every host next to each one's own. */
void job_hosts_merge(struct job_hosts *hs, const char *profdir, int intr_fd, struct strbuf *errs)
{
	struct strbuf db = STRBUF_INIT;
	char **argv = xcalloc(6 + 3 * hs->n + 1, sizeof(char *));
	size_t n = 0, inputs = 0;
	argv[n++] = xstrdup("/proc/self/exe");
	argv[n++] = xstrdup("merge");
	argv[n++] = xstrdup("-o");
	strbuf_addf(&db, "%s/all-hosts.db", profdir);
	argv[n++] = xstrdup(db.buf);
	for (size_t i = 0; i < hs->n; i++) {
		struct strbuf in = STRBUF_INIT, lab = STRBUF_INIT;
		struct stat st;
		strbuf_addf(&in, "%s/%s/tally.db", profdir, hs->h[i].r.host);
		if (stat(in.buf, &st) == 0 && S_ISDIR(st.st_mode)) {
			strbuf_addf(&lab, "host=%s", hs->h[i].r.host);
			argv[n++] = xstrdup("--label");
			argv[n++] = strbuf_detach(&lab);
			argv[n++] = strbuf_detach(&in);
			inputs++;
		}
		strbuf_release(&in);
		strbuf_release(&lab);
	}
	if (inputs) {
		struct strbuf out = STRBUF_INIT;
		int st = 0;
		/* what was pulled is merged even after ^C (the interrupt is not
		 * passed on: a merge of results already here is short, and
		 * bounded) */
		(void)intr_fd;
		int r = job_run_capture(argv, NULL, 600, -1, &out, &st);
		if (r || st) {
			struct strbuf last = STRBUF_INIT, why = STRBUF_INIT;
			tally_last_line(out.buf ? out.buf : "", &last);
			if (r == -ETIMEDOUT)
				strbuf_addstr(&why, "'tally merge' took more than 600 s (killed)");
			else if (r)
				strbuf_addf(&why, "%s", tally_errmsg());
			else
				job_describe_status(st, &why);
			strbuf_addf(errs, "%sthe hosts' databases could not be merged: %s%s%s",
				    errs->len ? "; " : "", why.buf, !r && last.len ? ": " : "",
				    !r && last.len ? last.buf : "");
			strbuf_release(&last);
			strbuf_release(&why);
		} else {
			char *rep[] = { "/proc/self/exe", "report", "-i", db.buf,
					"--by-label",     "host",   NULL };
			strbuf_reset(&out);
			r = job_run_capture(rep, NULL, 600, -1, &out, &st);
			struct strbuf txt = STRBUF_INIT;
			strbuf_addf(&txt, "%s/all-hosts.txt", profdir);
			if (!r && !st)
				tally_write_file_atomic_mode(txt.buf, out.buf ? out.buf : "",
							     out.len, 0600);
			strbuf_release(&txt);
		}
		strbuf_release(&out);
	}
	tally_job_argv_free(argv);
	strbuf_release(&db);
}

char *tally_job_control_profilers(const struct tally_job_control *c)
{
	struct strbuf prof = STRBUF_INIT;
	strbuf_addstr(&prof, "");
	for (size_t i = 0; i < c->n; i++) {
		const struct tally_job_step *st = &c->steps[i];
		if (st->cmd != TALLY_JOB_ADD)
			continue;
		tally_sh_quote(&prof, st->name);
		for (size_t a = 0; st->args && st->args[a]; a++) {
			strbuf_addch(&prof, ' ');
			tally_sh_quote(&prof, st->args[a]);
		}
		strbuf_addch(&prof, '\n');
	}
	return strbuf_detach(&prof);
}

int tally_job_host_check(const char *host, const char *root, const char *profilers)
{
	struct job_hosts *hs;
	char *const one[] = { (char *)host, NULL };
	struct tally_profiler_env env = { 0 };
	tally_profilers_path(NULL, &env.path);
	char *state = tally_profilers_state_dir();
	env.state_dir = state;
	job_hosts_new(&hs, one, 1, root, 0, "check", profilers, "", &env);
	tally_job_argv_free(env.path);
	free(state);
	int r = job_hosts_begin(hs);
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", r ? tally_errmsg() : "");
	job_hosts_free(hs); /* the agent told to quit, its directory removed */
	if (r)
		tally_seterr(r, "%s", msg);
	return r;
}

/* ---- for status.json and the job's progress ---- */

void job_host_iters_free(struct job_host_iter *v, size_t n, bool whole)
{
	for (size_t i = 0; v && i < n; i++) {
		if (whole)
			free((char *)v[i].host);
		free(v[i].note);
		free(v[i].start_err);
		free(v[i].stop_err);
		free(v[i].pull_err);
	}
	if (whole)
		free(v);
}

void job_hosts_iteration(const struct job_hosts *hs, struct job_host_iter **out, size_t *n)
{
	*out = xcalloc(hs->n + 1, sizeof(**out));
	*n = hs->n;
	for (size_t i = 0; i < hs->n; i++) {
		const struct job_host_iter *a = &hs->h[i].it;
		struct job_host_iter *b = &(*out)[i];
		*b = *a;
		b->host = xstrdup(hs->h[i].r.host);
		b->note = a->note ? xstrdup(a->note) : NULL;
		b->start_err = a->start_err ? xstrdup(a->start_err) : NULL;
		b->stop_err = a->stop_err ? xstrdup(a->stop_err) : NULL;
		b->pull_err = a->pull_err ? xstrdup(a->pull_err) : NULL;
	}
}

void job_host_iters_json(const struct job_host_iter *v, size_t n, struct tally_json *js)
{
	tally_json_karr(js, "hosts");
	for (size_t i = 0; i < n; i++) {
		tally_json_obj(js);
		tally_json_kstr(js, "host", v[i].host);
		tally_json_ku64(js, "iteration", v[i].iteration);
		tally_json_kstr(js, "state", v[i].lost ? "lost" : v[i].note ? "recovered" : "ok");
		tally_json_knum(js, "start", v[i].start, 6);
		tally_json_knum(js, "stop", v[i].stop, 6);
		tally_json_knum(js, "pull", v[i].pull, 6);
		tally_json_ku64(js, "files", v[i].files);
		tally_json_ku64(js, "bytes", v[i].bytes);
		if (v[i].note)
			tally_json_kstr(js, "note", v[i].note);
		tally_json_end(js);
	}
	tally_json_end(js);
}

void job_hosts_json(const struct job_hosts *hs, struct tally_json *js)
{
	tally_json_karr(js, "hosts");
	for (size_t i = 0; hs && i < hs->n; i++) {
		const struct host *h = &hs->h[i];
		tally_json_obj(js);
		tally_json_kstr(js, "host", h->r.host);
		tally_json_kstr(js, "status", h->lost ? "lost" : h->agent ? "ok" : "not started");
		tally_json_kstr(js, "boot_id", h->boot_id);
		tally_json_kbool(js, "installed", h->installed);
		tally_json_ku64(js, "agent_restarts", h->restarts);
		tally_json_end(js);
	}
	tally_json_end(js);
}

size_t job_hosts_count(const struct job_hosts *hs)
{
	return hs ? hs->n : 0;
}

const char *job_hosts_name(const struct job_hosts *hs, size_t i)
{
	return hs->h[i].r.host;
}

bool job_hosts_setup_ran(const struct job_hosts *hs, size_t i, size_t prof)
{
	const char *s = hs->h[i].setups;
	for (const char *p = s; p && *p && *p != '-';) {
		char *e;
		unsigned long v = strtoul(p, &e, 10);
		if (e == p)
			break;
		if (v == prof)
			return true;
		p = *e == ',' ? e + 1 : e;
	}
	return false;
}
