/* A job's remote hosts (docs/remote.md): tally installed on each, an agent
 * started there with the job's profilers, every host asked at once and waited
 * for (a barrier) before the test starts and after it ends, the results pulled
 * into profiling/HOST/ and checked before the host's copy goes. A host whose
 * agent is gone (the host rebooted: its boot id changed; or the agent died) is
 * found at the next request: what it wrote is pulled, its agent started again,
 * and the gap said; one that does not come back within the limit is lost, and
 * the job goes on with the others. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tally/remote.h"

struct job_hosts;

struct host {
	struct job_hosts *hs;
	struct tally_remote r;
	char *tally;       /* the installed tally on the host */
	char *agentdir;    /* the agent's private directory there */
	char *boot_id;
	bool agent;        /* its install checked and its agent started: only then is anything under the root run */
	bool lost;
	bool running;      /* profilers started and not yet stopped */
	int (*fn)(struct host *h); /* the work of the round at hand */
	int ret;
	char err[1024];
	struct strbuf note; /* what happened to it in this round (a restart, a gap) */
};

struct job_hosts {
	struct host *h;
	size_t n;
	char *profilers; /* one a line, for the agents */
	char *labels;    /* their names, ", "-separated, for warnings */
	const char *tag;
	unsigned iter;
	const char *indices;
	const char *profdir;
	double limit;
	char *mux; /* ssh's shared connections, one per host (a private directory) */
};

static void host_round(void *ctx, size_t i)
{
	struct host *h = &((struct job_hosts *)ctx)->h[i];
	if (h->lost)
		return;
	h->ret = h->fn(h);
	if (h->ret)
		snprintf(h->err, sizeof(h->err), "%s", tally_errmsg());
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
static int host_tally(struct host *h, char *const *words, const char *in, struct strbuf *out, struct strbuf *err, int *status)
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

/* Installs tally if needed and starts the agent (its profilers set up and
 * initialized there). */
static int host_begin(struct host *h)
{
	bool inst;
	size_t bytes;
	int r = tally_remote_install(&h->r, &inst, &bytes);
	if (r)
		return r;
	char *words[] = { "job", "agent", "start", h->agentdir, NULL };
	struct strbuf out = STRBUF_INIT, err = STRBUF_INIT, rest = STRBUF_INIT;
	int st;
	r = host_tally(h, words, h->hs->profilers, &out, &err, &st);
	if (!r && st == 255)
		r = tally_seterr(-EHOSTUNREACH, "host '%s': the connection dropped while its agent started", h->r.host);
	else if (!r && st == 3)
		st = 1; /* start has no "gone": its error is its message */
	if (!r)
		r = tally_agent_answer(h->r.host, "ready", out.buf ? out.buf : "", out.len, st, err.buf, &rest);
	if (!r) {
		/* ready PID BOOTID */
		char *sp = strchr(rest.buf ? rest.buf : "", ' ');
		set_str(&h->boot_id, sp ? sp + 1 : "-");
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
	if (!r)
		r = tally_agent_answer(h->r.host, "ok", out.buf ? out.buf : "", out.len, st, err.buf, answer);
	strbuf_release(&out);
	strbuf_release(&err);
	return r;
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
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		double waited = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (waited >= hs->limit) {
			h->lost = true;
			return tally_seterr(-EHOSTDOWN, "host '%s' is lost: it did not come back within %.0f s", h->r.host, hs->limit);
		}
		sleep(1);
	}
	bool rebooted = h->boot_id && strcmp(h->boot_id, f.boot_id);
	strbuf_addf(&h->note, "%s%s", h->note.len ? "; " : "",
		    rebooted ? "rebooted (its boot id changed)" : "its agent died");
	if (h->running)
		strbuf_addf(&h->note, "; profilers %s did not survive it: what they had not written is lost", hs->labels);
	tally_remote_facts_release(&f);
	r = host_begin(h);
	if (!r)
		strbuf_addstr(&h->note, "; its agent started again");
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
	if (r == -ENOTCONN || r == -EHOSTUNREACH) {
		r = recover(h);
		if (!r)
			r = ask(h, req, &a);
	}
	h->running = !r;
	strbuf_release(&a);
	return r;
}

static int pull(struct host *h)
{
	struct job_hosts *hs = h->hs;
	struct strbuf rdir = STRBUF_INIT, ldir = STRBUF_INIT;
	strbuf_addf(&rdir, "%s/results/%s/iteration.%u", h->agentdir, hs->tag, hs->iter);
	strbuf_addf(&ldir, "%s/%s", hs->profdir, h->r.host);
	size_t files;
	uint64_t bytes;
	int r = tally_remote_pull(&h->r, rdir.buf, ldir.buf, &files, &bytes);
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
	int r = ask(h, req, &a);
	strbuf_release(&a);
	if (r == -ENOTCONN || r == -EHOSTUNREACH) {
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

int job_hosts_new(struct job_hosts **out, char *const *hosts, size_t n, const char *root, double limit, const char *jobname,
		  const char *profilers, const char *labels)
{
	*out = NULL;
	int r = tally_remote_hosts_check(hosts, n);
	if (r)
		return r;
	struct job_hosts *hs = xcalloc(1, sizeof(*hs));
	hs->n = n;
	hs->h = xcalloc(n + 1, sizeof(*hs->h));
	/* each profiler's line led by its label (label=cmd-vmstat), as the job
	 * names its files: several cmd profilers on a host keep apart */
	struct strbuf prof = STRBUF_INIT;
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
		p = e ? e + 1 : p + len;
	}
	hs->profilers = strbuf_detach(&prof);
	hs->labels = xstrdup(labels);
	hs->limit = limit > 0 ? limit : 60;
	char tmpl[] = "/tmp/tally-ssh-XXXXXX";
	if (mkdtemp(tmpl))
		hs->mux = xstrdup(tmpl);
	for (size_t i = 0; i < n; i++) {
		struct host *h = &hs->h[i];
		h->hs = hs;
		h->r = (struct tally_remote){ .host = hosts[i], .root = root, .mux_dir = hs->mux };
		char *dir = tally_remote_dir(&h->r);
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s/tally", dir);
		h->tally = strbuf_detach(&sb);
		/* one directory per job run and host name, beside the versions (an
		 * install that replaces a version leaves the agents be): two jobs
		 * on one host keep apart, and so do two names of one machine */
		strbuf_addf(&sb, "%s/agents/%s-%d-%ld-%s", root && *root ? root : TALLY_REMOTE_ROOT, jobname, (int)getpid(), (long)time(NULL),
			    hosts[i]);
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

int job_hosts_begin(struct job_hosts *hs)
{
	round_all(hs, host_begin);
	return round_error(hs);
}

/* Notes and errors of the round, into errs (one "host 'H': ..." each). */
static void collect(struct job_hosts *hs, struct strbuf *errs, struct strbuf *notes)
{
	for (size_t i = 0; i < hs->n; i++) {
		struct host *h = &hs->h[i];
		if (h->note.len)
			strbuf_addf(notes, "%shost '%s': %s", notes->len ? "; " : "", h->r.host, h->note.buf);
		if (h->ret)
			strbuf_addf(errs, "%s%s", errs->len ? "; " : "", h->err);
	}
}

void job_hosts_start(struct job_hosts *hs, const char *tag, unsigned iter, const char *indices, struct strbuf *errs,
		     struct strbuf *notes)
{
	hs->tag = tag;
	hs->iter = iter;
	hs->indices = indices;
	round_all(hs, host_start);
	collect(hs, errs, notes);
}

void job_hosts_stop(struct job_hosts *hs, const char *profdir, struct strbuf *errs, struct strbuf *notes)
{
	hs->profdir = profdir;
	round_all(hs, host_stop);
	collect(hs, errs, notes);
}

void job_hosts_free(struct job_hosts *hs)
{
	if (!hs)
		return;
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
		strbuf_release(&hs->h[i].note);
	}
	free(hs->h);
	free(hs->profilers);
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
		int r = job_run_capture(argv, NULL, 600, intr_fd, &out, &st);
		if (r || st) {
			struct strbuf last = STRBUF_INIT;
			tally_last_line(out.buf ? out.buf : "", &last);
			strbuf_addf(errs, "%sthe hosts' databases could not be merged: %s", errs->len ? "; " : "",
				    r ? tally_errmsg() : last.buf);
			strbuf_release(&last);
		} else {
			char *rep[] = { "/proc/self/exe", "report", "-i", db.buf, "--by-label", "host", NULL };
			strbuf_reset(&out);
			r = job_run_capture(rep, NULL, 600, intr_fd, &out, &st);
			struct strbuf txt = STRBUF_INIT;
			strbuf_addf(&txt, "%s/all-hosts.txt", profdir);
			if (!r && !st)
				tally_write_file_atomic_mode(txt.buf, out.buf ? out.buf : "", out.len, 0600);
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
	job_hosts_new(&hs, one, 1, root, 0, "check", profilers, "");
	int r = job_hosts_begin(hs);
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", r ? tally_errmsg() : "");
	job_hosts_free(hs); /* the agent told to quit, its directory removed */
	if (r)
		tally_seterr(r, "%s", msg);
	return r;
}
