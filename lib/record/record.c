/* The recording engine (include/tally/record.h): a target started or
 * attached to, the collector's rounds fed to the aggregate, the stop
 * conditions, and the database written at the end. Shared by tally record,
 * tally daemon and anything that records in-process. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tally/cache.h"
#include "tally/record.h"
#include "tally/snapshot.h"
#include "tally/util.h"

enum state { ST_NEW, ST_RUNNING, ST_STOPPED, ST_FINISHED };

struct tally_recording {
	struct tally_recording_opts o;
	int *pids; /* TARGET_PIDS: a copy of opts.pids */
	pid_t *tpids;
	char *argv0, *cmdline;
	struct strbuf target; /* the session's "target" */

	int wake[2]; /* the own wake pipe, or -1 */
	atomic_int stop_requested;

	/* TARGET_CHILD */
	pid_t child;
	int go_fd;  /* write a byte: the child may exec */
	int err_fd; /* read: errno of a failed exec, or EOF when exec succeeded */
	bool child_done;
	char *cgroup;   /* the command's own cgroup v2 directory, removed at the end, or NULL */
	bool child_execed; /* with cgroup: its exec was seen (COMM exec or MMAP2 record) */
	int cgroup_fd;
	int status;
	int exit_code;

	struct tally_collector *col;
	struct tally_agg agg;
	bool have_agg;
	uint64_t agg_resets; /* agg.resets the collector was last told of */

	enum state state;
	enum tally_recording_end end;
	double wall_start, mono_start, mono_stop;
	struct tally_meta session;
	bool have_session;

	/* the build-id cache: each file image handed over at its first sample */
	struct tally_cache_filler *filler;
	bool filler_tried;
	char *filler_why;
	size_t frames_seen;   /* agg.frames[0..frames_seen) looked at */
	uint64_t cache_resets; /* agg.resets when they were */
	uint8_t *image_seen;  /* per agg image: handed over */
	size_t aimage_seen;
};

void tally_recording_opts_init(struct tally_recording_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->target = TALLY_TARGET_SYSTEM;
	o->wake_fd = -1;
	o->buildid_cache = true;
}

static bool record_prompt(void *ctx, const struct perf_event_header *h)
{
	struct tally_recording *r = ctx;
	return tally_agg_record_prompt(&r->agg, h);
}

static void on_record(void *ctx, const struct tally_rec *rec)
{
	struct tally_recording *r = ctx;
	if (r->cgroup && !r->child_execed && rec->pid == (uint32_t)r->child) {
		/* per-CPU events are on before the command's exec (there is no
		 * enable_on_exec for them): tally's own child until then is not
		 * sampled. Its exec: the COMM record says so, or the new program's
		 * first mapping */
		if ((rec->type == PERF_RECORD_COMM && (rec->misc & PERF_RECORD_MISC_COMM_EXEC)) ||
		    rec->type == PERF_RECORD_MMAP2)
			r->child_execed = true;
		else if (rec->type == PERF_RECORD_SAMPLE)
			return;
	}
	tally_agg_record(&r->agg, rec);
}

/* Forks the command, held before its exec until start writes to go_fd. */
static int spawn_stopped(struct tally_recording *r, char *const *argv)
{
	int go[2], err[2];
	if (pipe2(go, O_CLOEXEC) < 0)
		return tally_seterr(-errno, "cannot create a pipe: %s", strerror(errno));
	if (pipe2(err, O_CLOEXEC) < 0) {
		int e = errno;
		close(go[0]);
		close(go[1]);
		return tally_seterr(-e, "cannot create a pipe: %s", strerror(e));
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(go[0]);
		close(go[1]);
		close(err[0]);
		close(err[1]);
		return tally_seterr(-e, "cannot fork: %s", strerror(e));
	}
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		char b;
		if (read(go[0], &b, 1) != 1)
			_exit(127); /* the recording gave up before starting us */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		execvp(argv[0], argv);
		int e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	r->child = pid;
	r->go_fd = go[1];
	r->err_fd = err[0];
	return 0;
}

/* The cgroup v2 mount point (root "/" only), or NULL. Caller frees. */
static char *cgroup2_mount(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return NULL;
	char *line = NULL, *found = NULL;
	size_t cap = 0;
	while (!found && getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER */
		char root[512], mnt[512];
		if (sscanf(line, "%*s %*s %*s %511s %511s", root, mnt) != 2)
			continue;
		const char *dash = strstr(line, " - ");
		if (!dash || strncmp(dash + 3, "cgroup2 ", 8) || strcmp(root, "/") ||
		    strchr(mnt, '\\'))
			continue;
		found = xstrdup(mnt);
	}
	free(line);
	fclose(f);
	return found;
}

static int write_str(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int e = n == (ssize_t)strlen(text) ? 0 : (n < 0 ? -errno : -EIO);
	close(fd);
	return e;
}

/* Removes the empty cgroups a tally that was killed (SIGKILL: no clean-up)
 * left under dir: "tally-PID-CHILD" whose PID is gone. One that still holds a
 * process is kept (rmdir refuses it). */
static void sweep_stale_cgroups(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		int pid, child;
		char end;
		if (sscanf(de->d_name, "tally-%d-%d%c", &pid, &child, &end) != 2 || pid <= 0 ||
		    pid == (int)getpid())
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		char path[4200];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		(void)rmdir(path);
	}
	closedir(d);
}

/* Puts the held child into a cgroup of its own, below tally's, so that per-CPU
 * events scoped to it follow every task of the command and take each redrawn
 * period (docs/sampling.md). False when this machine does not allow it: then
 * the events are inherited from the child, as before. */
static bool child_cgroup(struct tally_recording *r)
{
	char *mnt = cgroup2_mount();
	if (!mnt)
		return false;
	struct strbuf own = STRBUF_INIT, dir = STRBUF_INIT;
	bool ok = false;
	if (strbuf_read_file(&own, "/proc/self/cgroup", 1 << 16) == 0) {
		const char *l = own.buf;
		while (l && strncmp(l, "0::", 3)) {
			l = strchr(l, '\n');
			l = l ? l + 1 : NULL;
		}
		if (l) {
			l += 3;
			size_t len = strcspn(l, "\n");
			strbuf_addf(&dir, "%s%.*s", mnt, (int)len,
				    (len == 1 && *l == '/') ? "" : l);
			sweep_stale_cgroups(dir.buf);
			strbuf_addf(&dir, "/tally-%d-%d", (int)getpid(), (int)r->child);
			if (mkdir(dir.buf, 0755) == 0) {
				char procs[4200], pid[32];
				snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir.buf);
				snprintf(pid, sizeof(pid), "%d\n", (int)r->child);
				int fd = -1;
				if (write_str(procs, pid) == 0)
					fd = open(dir.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
				if (fd >= 0) {
					r->cgroup = strbuf_detach(&dir);
					r->cgroup_fd = fd;
					ok = true;
				} else {
					rmdir(dir.buf);
				}
			}
		}
	}
	strbuf_release(&own);
	strbuf_release(&dir);
	free(mnt);
	return ok;
}

/* Moves whatever still runs in the command's cgroup back to tally's, then removes it. */
static void child_cgroup_remove(struct tally_recording *r)
{
	if (!r->cgroup)
		return;
	if (r->cgroup_fd >= 0)
		close(r->cgroup_fd);
	r->cgroup_fd = -1;
	char path[4200];
	snprintf(path, sizeof(path), "%s/cgroup.procs", r->cgroup);
	struct strbuf procs = STRBUF_INIT;
	char *slash = strrchr(r->cgroup, '/');
	for (int round = 0; round < 3 && rmdir(r->cgroup) < 0 && errno == EBUSY && slash; round++) {
		strbuf_reset(&procs);
		if (strbuf_read_file(&procs, path, 1 << 20) != 0)
			break;
		char parent[4200];
		snprintf(parent, sizeof(parent), "%.*s/cgroup.procs", (int)(slash - r->cgroup),
			 r->cgroup);
		for (char *l = procs.buf, *nl; l && *l; l = nl) {
			nl = strchr(l, '\n');
			if (nl)
				*nl++ = '\0';
			char line[32];
			snprintf(line, sizeof(line), "%s\n", l);
			(void)write_str(parent, line);
		}
	}
	strbuf_release(&procs);
	free(r->cgroup);
	r->cgroup = NULL;
}

static int shell_code(int status)
{
	return WIFEXITED(status) ? WEXITSTATUS(status)
				 : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int tally_recording_new(struct tally_recording **out, const struct tally_recording_opts *o)
{
	*out = NULL;
	if (!o->smp || !o->smp->nev)
		return tally_seterr(-EINVAL,
				    "no sampling settings for the recording (resolve them first)");
	if (o->target == TALLY_TARGET_CHILD && (!o->argv || !o->argv[0] || !o->argv[0][0]))
		return tally_seterr(-EINVAL, "nothing to run: give a command");
	if (o->target == TALLY_TARGET_PIDS && (!o->pids || !o->npids))
		return tally_seterr(-EINVAL, "no process to attach to: give pids");
	if (o->duration < 0)
		return tally_seterr(-EINVAL, "a negative duration (give seconds, or 0 for none)");

	struct tally_recording *r = xcalloc(1, sizeof(*r));
	r->o = *o;
	r->wake[0] = r->wake[1] = -1;
	r->child = -1;
	r->cgroup_fd = -1;
	r->go_fd = r->err_fd = -1;
	r->exit_code = -1;
	atomic_init(&r->stop_requested, 0);
	int ret = 0;
	if (o->wake_fd < 0 && pipe2(r->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		ret = tally_seterr(-errno, "cannot create a pipe: %s", strerror(errno));
		r->wake[0] = r->wake[1] = -1;
		goto fail;
	}

	struct tally_collect_opts co;
	memset(&co, 0, sizeof(co));
	tally_sampling_collect_opts(o->smp, &co);
	co.wake_fd = o->wake_fd >= 0 ? o->wake_fd : r->wake[0];
	co.prompt = record_prompt;
	co.prompt_ctx = r;
	co.sideband_dummy = o->sideband_dummy;
	co.target = o->target;
	switch (o->target) {
	case TALLY_TARGET_CHILD: {
		struct strbuf cl = STRBUF_INIT;
		for (int i = 0; o->argv[i]; i++)
			strbuf_addf(&cl, "%s%s", i ? " " : "", o->argv[i]);
		r->cmdline = strbuf_detach(&cl);
		r->argv0 = xstrdup(o->argv[0]);
		strbuf_addstr(&r->target, "command");
		ret = spawn_stopped(r, o->argv);
		if (ret)
			goto fail;
		r->tpids = xmalloc(sizeof(pid_t));
		r->tpids[0] = r->child;
		co.pids = r->tpids;
		co.npids = 1;
		/* a period the kernel adapts is not ours to randomize: no cgroup needed */
		bool fixed = o->smp->period != 0;
		for (int e = 0; e < o->smp->nev; e++)
			fixed = fixed || o->smp->evs[e]->time_based;
		/* off-CPU time too: per-CPU events on the cgroup switch no perf
		 * context with every task (docs/offcpu.md) */
		if (((o->smp->randomize && fixed) || o->smp->offcpu) && child_cgroup(r)) {
			co.use_cgroup = true;
			co.cgroup_fd = r->cgroup_fd;
		}
		break;
	}
	case TALLY_TARGET_PIDS:
		r->pids = xmalloc(o->npids * sizeof(int));
		r->tpids = xmalloc(o->npids * sizeof(pid_t));
		strbuf_addstr(&r->target, "pids ");
		for (size_t i = 0; i < o->npids; i++) {
			r->pids[i] = o->pids[i];
			r->tpids[i] = o->pids[i];
			strbuf_addf(&r->target, "%s%d", i ? "," : "", o->pids[i]);
		}
		co.pids = r->tpids;
		co.npids = o->npids;
		break;
	case TALLY_TARGET_SYSTEM:
		strbuf_addstr(&r->target, "system");
		break;
	}
	r->o.argv = NULL; /* the caller's: not kept */
	r->o.pids = r->pids;

	ret = tally_collector_open(&r->col, &co);
	if (ret && co.use_cgroup) {
		/* per-CPU events need more privilege than a task's: inherit instead */
		child_cgroup_remove(r);
		co.use_cgroup = false;
		ret = tally_collector_open(&r->col, &co);
	}
	if (ret)
		goto fail;
	tally_agg_init(&r->agg, o->smp->nev, o->smp->per_pid, o->target == TALLY_TARGET_SYSTEM);
	r->have_agg = true;
	r->agg.dwarf = o->smp->stack_user != 0;
	if (o->target == TALLY_TARGET_PIDS)
		for (size_t i = 0; i < o->npids; i++)
			tally_agg_load_procfs(&r->agg, r->pids[i]);
	*out = r;
	return 0;
fail:
	tally_recording_free(r);
	return ret;
}

int tally_recording_start(struct tally_recording *r)
{
	if (r->state != ST_NEW || r->end)
		return tally_seterr(-EINVAL, "the recording was started already");
	r->wall_start = tally_now_wall();
	r->mono_start = tally_now_mono();
	int ret = tally_collector_enable(r->col);
	if (ret)
		return ret;
	r->state = ST_RUNNING;
	if (r->child > 0) {
		char b = 1;
		if (write(r->go_fd, &b, 1) != 1) {
			ret = tally_seterr(-errno, "cannot start '%s': %s", r->argv0,
					   strerror(errno));
			r->end = TALLY_RECORDING_FAILED;
			return ret;
		}
		close(r->go_fd);
		r->go_fd = -1;
		int e = 0;
		ssize_t n;
		while ((n = read(r->err_fd, &e, sizeof(e))) < 0 && errno == EINTR)
			;
		close(r->err_fd);
		r->err_fd = -1;
		if (n == (ssize_t)sizeof(e)) {
			waitpid(r->child, &r->status, 0);
			r->child_done = true;
			r->exit_code = 127;
			r->end = TALLY_RECORDING_CHILD_EXITED;
			return tally_seterr(-e, "cannot run '%s': %s%s", r->argv0, strerror(e),
					    e == ENOENT ? " (check the name and PATH)" : "");
		}
	}
	return 0;
}

static void drain_wake(struct tally_recording *r)
{
	char buf[64];
	if (r->wake[0] >= 0)
		while (read(r->wake[0], buf, sizeof(buf)) > 0)
			;
}

static void identify(struct tally_recording *r)
{
	if (r->o.identify_early)
		tally_agg_identify(&r->agg);
	else
		tally_agg_identify_new(&r->agg);
	/* programs whose processes made JIT code: the exec watch tells of their starts */
	for (size_t i = 0; i < r->agg.njit_programs; i++)
		tally_collector_watch_program(r->col, r->agg.jit_programs[i].dev,
					      r->agg.jit_programs[i].ino,
					      r->agg.jit_programs[i].gen);
	r->agg.njit_programs = 0;
}

/* The file images of the frames made since the last look (samples and their
 * stacks) go to the build-id cache once each: identified now, while their
 * processes run (what the writer would do at the end anyway), and handed to
 * the filler, which at most opens each here (tally/cache.h). */
static void cache_fill(struct tally_recording *r)
{
	struct tally_agg *a = &r->agg;
	if (!r->o.buildid_cache || !r->have_agg)
		return;
	if (a->resets != r->cache_resets) {
		/* a daemon's flush emptied the frames and renumbered the images */
		r->cache_resets = a->resets;
		r->frames_seen = 0;
		if (r->image_seen)
			memset(r->image_seen, 0, r->aimage_seen);
	}
	if (r->frames_seen >= a->nframes)
		return;
	if (!r->filler_tried) {
		r->filler_tried = true;
		r->filler = tally_cache_filler_new(&r->filler_why);
	}
	if (!r->filler) {
		r->frames_seen = a->nframes;
		return;
	}
	if (r->aimage_seen < a->nimages) {
		size_t old = r->aimage_seen;
		GROW(r->image_seen, r->aimage_seen, a->nimages);
		memset(r->image_seen + old, 0, r->aimage_seen - old);
	}
	struct strbuf src = STRBUF_INIT;
	for (; r->frames_seen < a->nframes; r->frames_seen++) {
		uint32_t i = a->frames[r->frames_seen].image;
		if (i >= a->nimages || r->image_seen[i])
			continue;
		r->image_seen[i] = 1;
		struct tally_image *im = &a->images[i];
		if (im->kind != TALLY_IMG_FILE || im->path[0] != '/')
			continue;
		tally_image_identify(im);
		const char *del = strstr(im->path, " (deleted)");
		if (del)
			continue; /* the file that ran is gone: whatever has its name is another */
		strbuf_reset(&src);
		if (im->foreign_ns && im->pid > 0)
			strbuf_addf(&src, "/proc/%d/root", im->pid);
		strbuf_addstr(&src, im->path);
		tally_cache_filler_image(r->filler, im->id_kind, im->id, src.buf, im->path, im->maj,
					 im->min, im->ino);
	}
	strbuf_release(&src);
}

static bool pids_alive(const struct tally_recording *r)
{
	for (size_t i = 0; i < r->o.npids; i++)
		if (kill(r->pids[i], 0) == 0 || errno != ESRCH)
			return true;
	return false;
}

int tally_recording_step(struct tally_recording *r, int timeout_ms)
{
	if (r->state != ST_RUNNING || r->end)
		return 1;
	/* the aggregate was emptied (a daemon's flush, top's refresh): the images
	 * of the programs the exec watch told of went with it, so it tells of
	 * them again at their next start */
	if (r->agg.resets != r->agg_resets) {
		r->agg_resets = r->agg.resets;
		tally_collector_watch_forget(r->col);
	}
	if (timeout_ms < 0) {
		/* samples counted in the kernel: the tables are read once a round */
		bool counted = tally_collector_sample_mech(r->col) == TALLY_SAMPLE_BPF;
		timeout_ms = counted ? TALLY_COUNTED_ROUND_MS : r->o.smp->randomize ? 50 : 100;
		if (r->o.duration > 0) {
			/* a duration ends within a few ms, however long the round */
			double left = r->o.duration - (tally_now_mono() - r->mono_start);
			if (left * 1000 < timeout_ms)
				timeout_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
		}
	}
	uint64_t rounds, looks, after;
	tally_collector_rounds(r->col, &rounds, &looks, NULL);
	int n = tally_collector_poll(r->col, timeout_ms, on_record, r);
	drain_wake(r);
	tally_collector_rounds(r->col, &after, &looks, NULL);
	if (after != rounds) {
		/* a look that left the records in the rings is not a round: an
		 * ended process stays until two rounds have read what it left */
		identify(r);
		tally_agg_collect_dead(&r->agg);
	}
	cache_fill(r);
	if (n < 0)
		return n;
	bool stop = atomic_load(&r->stop_requested) != 0;
	if (r->child > 0 && !r->child_done) {
		if (stop)
			kill(r->child, SIGTERM);
		if (waitpid(r->child, &r->status, WNOHANG) == r->child) {
			r->child_done = true;
			r->exit_code = shell_code(r->status);
		}
	}
	if (r->child_done)
		r->end = TALLY_RECORDING_CHILD_EXITED;
	else if (r->child <= 0 && stop)
		r->end = TALLY_RECORDING_REQUESTED;
	else if (r->o.duration > 0 && tally_now_mono() - r->mono_start >= r->o.duration)
		r->end = TALLY_RECORDING_DURATION;
	else if (r->o.target == TALLY_TARGET_PIDS && !pids_alive(r))
		r->end = TALLY_RECORDING_PIDS_EXITED;
	return r->end ? 1 : 0;
}

int tally_recording_run(struct tally_recording *r)
{
	for (;;) {
		int n = tally_recording_step(r, -1);
		if (n < 0) {
			r->end = TALLY_RECORDING_FAILED;
			return n;
		}
		if (n)
			return 0;
	}
}

void tally_recording_wake(struct tally_recording *r)
{
	int e = errno;
	char c = 0;
	if (r->wake[1] >= 0 && write(r->wake[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is pending already */
	}
	errno = e;
}

void tally_recording_request_stop(struct tally_recording *r)
{
	atomic_store(&r->stop_requested, 1);
	tally_recording_wake(r);
}

int tally_recording_stop(struct tally_recording *r)
{
	if (r->state != ST_RUNNING)
		return 0;
	if (r->child > 0 && !r->child_done) {
		/* a duration or a request ended it: stop it as a user would, then collect it */
		kill(r->child, SIGTERM);
		while (waitpid(r->child, &r->status, 0) < 0 && errno == EINTR)
			;
		r->child_done = true;
		r->exit_code = shell_code(r->status);
	}
	if (!r->end)
		r->end = TALLY_RECORDING_REQUESTED;
	int ret = tally_collector_disable(r->col);
	int n = tally_collector_poll(r->col, 0, on_record, r);
	identify(r);
	cache_fill(r);
	r->mono_stop = tally_now_mono();
	r->state = ST_STOPPED;
	return ret ? ret : n < 0 ? n : 0;
}

int tally_recording_finish(struct tally_recording *r)
{
	if (r->state == ST_FINISHED)
		return 0;
	if (r->state == ST_NEW)
		return tally_seterr(-EINVAL, "the recording was never started");
	int ret = tally_recording_stop(r);
	tally_agg_snapshot_jit(&r->agg);
	tally_agg_tasks(&r->agg);
	struct tally_meta *s = &r->session;
	tally_sampling_session(r->o.smp, r->col, &r->agg, r->target.buf, r->cmdline, s);
	char ts[32];
	tally_format_utc(r->wall_start, ts, sizeof(ts));
	tally_meta_set(s, "start-time", "%s", ts);
	tally_format_utc(r->wall_start + (r->mono_stop - r->mono_start), ts, sizeof(ts));
	tally_meta_set(s, "stop-time", "%s", ts);
	tally_meta_set(s, "duration", "%.3f", r->mono_stop - r->mono_start);
	if (r->child > 0)
		tally_meta_set(s, "exit-status", "%d", shell_code(r->status));
	r->have_session = true;
	r->state = ST_FINISHED;
	return ret;
}

int tally_recording_write(struct tally_recording *r, const char *path, bool force, char **written)
{
	if (written)
		*written = NULL;
	if (r->state != ST_FINISHED) {
		if (r->state == ST_NEW)
			return tally_seterr(-EINVAL, "the recording was never started");
		tally_recording_finish(r);
	}
	struct strbuf where = STRBUF_INIT;
	strbuf_addstr(&where, path);
	int ret = tally_db_write(where.buf, force, &r->agg, &r->session);
	if (ret == -EEXIST && !force) {
		/* someone created it while we recorded: keep the data under another name */
		strbuf_addf(&where, ".%d", (int)getpid());
		ret = tally_db_write(where.buf, false, &r->agg, &r->session);
	}
	if (!ret && written)
		*written = strbuf_detach(&where);
	strbuf_release(&where);
	return ret;
}

enum tally_recording_end tally_recording_end(const struct tally_recording *r)
{
	return r->end;
}

int tally_recording_pid(const struct tally_recording *r)
{
	return r->child > 0 ? (int)r->child : -1;
}

int tally_recording_exit_code(const struct tally_recording *r)
{
	return r->exit_code;
}

uint64_t tally_recording_samples(const struct tally_recording *r)
{
	uint64_t n = 0;
	if (r->have_agg)
		for (int e = 0; e < r->agg.nevents; e++)
			n += r->agg.samples[e];
	return n;
}

uint64_t tally_recording_lost(const struct tally_recording *r)
{
	return r->have_agg ? r->agg.lost : 0;
}

double tally_recording_duration(const struct tally_recording *r)
{
	if (r->state == ST_NEW)
		return 0;
	return (r->state == ST_RUNNING ? tally_now_mono() : r->mono_stop) - r->mono_start;
}

struct tally_agg *tally_recording_agg(struct tally_recording *r)
{
	return &r->agg;
}

struct tally_collector *tally_recording_collector(struct tally_recording *r)
{
	return r->col;
}

const struct tally_meta *tally_recording_session(const struct tally_recording *r)
{
	return r->have_session ? &r->session : NULL;
}

void tally_recording_cache_handoff(struct tally_recording *r)
{
	tally_cache_filler_handoff(r->filler);
}

const char *tally_recording_cache_warning(const struct tally_recording *r)
{
	return r->filler_why;
}

void tally_recording_free(struct tally_recording *r)
{
	if (!r)
		return;
	tally_cache_filler_free(r->filler);
	free(r->filler_why);
	free(r->image_seen);
	if (r->go_fd >= 0)
		close(r->go_fd); /* a command never started reads EOF and exits 127 */
	if (r->err_fd >= 0)
		close(r->err_fd);
	if (r->child > 0 && !r->child_done) {
		kill(r->child, SIGKILL);
		while (waitpid(r->child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	tally_collector_free(r->col);
	child_cgroup_remove(r);
	if (r->have_agg)
		tally_agg_release(&r->agg);
	tally_meta_release(&r->session);
	if (r->wake[0] >= 0) {
		close(r->wake[0]);
		close(r->wake[1]);
	}
	strbuf_release(&r->target);
	free(r->pids);
	free(r->tpids);
	free(r->argv0);
	free(r->cmdline);
	free(r);
}
