/* The daemon's engine (include/tally/daemon.h, docs/daemon.md): its database
 * directory, lock and socket set up, its recording started, and its rounds:
 * records in, control connections served, memory watched, flushes and epochs
 * when their time comes. The database side is store.c, the control server
 * server.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/daemon/internal.h"
#include "tally/ctl.h"
#include "tally/elfinfo.h"
#include "tally/epoch.h"

void tally_daemon_opts_init(struct tally_daemon_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->flush_interval = 60;
	o->ctl_timeout = 5;
	o->max_memory = 128ull << 20;
	o->min_free = 64ull << 20;
}

void dmn_log(struct tally_daemon *d, const char *fmt, ...)
{
	if (!d->log)
		return;
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	d->log(d->log_ctx, sb.buf ? sb.buf : "");
	strbuf_release(&sb);
}

/* ---- memory ---- */

/* The heap the daemon has in use: glibc's count, which costs a walk of the
 * allocator's bins; where that is not available (a sanitizer's allocator
 * answers 0), the aggregate's own estimate, which walks every image, process
 * and task and so is not taken every round when glibc can answer. */
uint64_t dmn_memory_used(const struct tally_daemon *d)
{
	struct mallinfo2 mi = mallinfo2();
	uint64_t heap = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
	if (heap)
		return heap;
	return (d->agg ? tally_agg_memory(d->agg) : 0) + tally_kallsyms_bytes(d->kc.table);
}

uint64_t dmn_agg_samples(const struct tally_daemon *d)
{
	uint64_t n = 0;
	if (d->agg)
		for (int e = 0; e < d->agg->nevents; e++)
			n += d->agg->samples[e];
	return n;
}

void dmn_cpu_state(const struct tally_daemon *d, int cpu, struct tally_cpu_state *st)
{
	if (d->col)
		tally_collector_cpu_state(d->col, cpu, st);
	else
		memset(st, 0, sizeof(*st));
}

/* Near the memory bound: flush early (memory goes back), or drop what cannot be written.
 * Looked at every WATCH_S: glibc's count walks the allocator's free lists (a
 * twentieth of the daemon's own time when taken every round); and sooner when
 * the aggregate's own count (cheap) grew by WATCH_GROWTH of the bound since
 * the last look: a second's growth is not always small beside the bound (a
 * busy machine sampled at 20 kHz with call graphs grew it by 10 MiB a second,
 * and a 16 MiB bound was passed between two looks).  An early flush comes at
 * most once a second, unless the aggregate holds a quarter of the bound: then
 * a flush gives back memory, whatever the processes followed take. */
#define WATCH_S 1.0
#define WATCH_GROWTH 8 /* an eighth */
static void watch_memory(struct tally_daemon *d)
{
	double now = tally_now_mono();
	size_t agg = tally_agg_memory(d->agg);
	if (agg < d->watch_agg) /* emptied by a flush since */
		d->watch_agg = agg;
	if (now - d->last_watch < WATCH_S && agg < d->watch_agg + d->max_memory / WATCH_GROWTH)
		return;
	d->last_watch = now;
	d->watch_agg = agg;
	uint64_t used = dmn_memory_used(d);
	if (used < d->max_memory / 4 * 3)
		return;
	if (dmn_agg_samples(d) && (now - d->last_early >= 1.0 || agg >= d->max_memory / 4)) {
		d->last_early = now;
		if (!d->write_error && tally_daemon_flush(d, "memory", NULL) == 0) {
			d->early_flushes++;
			dmn_log(d, "flushed early: memory reached %.0f%% of --max-memory",
				100.0 * (double)used / (double)d->max_memory);
		} else if (used >= d->max_memory / 10 * 9) {
			uint64_t n = dmn_agg_samples(d);
			d->samples_total += n;
			d->lost_total += d->agg->lost;
			d->dropped += n;
			tally_agg_reset(d->agg);
			d->delta_start = tally_now_wall();
			dmn_log(d,
				"dropped %" PRIu64
				" sample%s: writing is stopped and memory is at --max-memory",
				n, n == 1 ? "" : "s");
		}
		tally_agg_release_unwind(d->agg);
		used = dmn_memory_used(d);
		d->watch_agg = tally_agg_memory(d->agg);
	}
	if (used >= d->max_memory && !d->memory_warned) {
		char a[32], b[32];
		tally_format_size(used, a, sizeof(a));
		tally_format_size(d->max_memory, b, sizeof(b));
		dmn_log(d,
			"memory is %s even after a flush, above --max-memory %s: the processes it follows need more (raise the limit)",
			a, b);
		d->memory_warned = true;
	}
}

/* ---- setup ---- */

/* The database directory: created, or an existing daemon database; private. */
static int prepare_db(struct tally_daemon *d, const char *arg)
{
	struct stat st;
	if (!arg || !*arg)
		return tally_seterr(-EINVAL, "empty database path (name one with --db DIR)");
	if (stat(arg, &st) < 0) {
		if (errno != ENOENT)
			return tally_seterr(-errno, "cannot use '%s': %s", arg, strerror(errno));
		if (mkdir(arg, 0700) < 0)
			return tally_seterr(-errno, "cannot create '%s': %s", arg, strerror(errno));
		d->created_db = true;
	} else {
		if (!S_ISDIR(st.st_mode))
			return tally_seterr(
				-ENOTDIR,
				"'%s' exists and is not a directory (choose another --db)", arg);
		if (st.st_uid != geteuid())
			return tally_seterr(
				-EPERM, "'%s' belongs to uid %d, not to you (choose another --db)",
				arg, (int)st.st_uid);
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/session", arg);
		bool recorded = access(p.buf, F_OK) == 0;
		strbuf_reset(&p);
		strbuf_addf(&p, "%s/%s", arg, TALLY_DAEMON_MARKER);
		bool ours = access(p.buf, F_OK) == 0;
		strbuf_release(&p);
		if (recorded)
			return tally_seterr(
				-EEXIST,
				"'%s' is a database written by 'tally record' (choose another --db)",
				arg);
		if (!ours) {
			DIR *dir = opendir(arg);
			bool empty = true;
			struct dirent *de;
			while (dir && (de = readdir(dir)))
				if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
					empty = false;
			if (dir)
				closedir(dir);
			if (!empty)
				return tally_seterr(
					-EEXIST,
					"'%s' is not empty and not a daemon database (choose another --db)",
					arg);
		}
	}
	/* other users may not read the profiles */
	if (chmod(arg, 0700) < 0)
		return tally_seterr(-errno, "cannot make '%s' private: %s", arg, strerror(errno));
	char *abs = realpath(arg, NULL);
	if (!abs)
		return tally_seterr(-errno, "cannot resolve '%s': %s", arg, strerror(errno));
	d->db = abs;
	if (stat(abs, &st) < 0)
		return tally_seterr(-errno, "cannot use '%s': %s", arg, strerror(errno));
	d->db_dev = st.st_dev;
	d->db_ino = st.st_ino;
	return 0;
}

/* One daemon per database: the pid file is also the lock. */
static int take_lock(struct tally_daemon *d)
{
	d->pidfile = dmn_path(d, "daemon.pid");
	int fd = open(d->pidfile, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return tally_seterr(-errno, "cannot open '%s': %s", d->pidfile, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		char buf[32] = "";
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		close(fd);
		if (e == EWOULDBLOCK)
			return tally_seterr(
				-EBUSY,
				"database '%s' is in use by tally daemon pid %s (one daemon per database: stop it with 'kill %s', or use another --db)",
				d->db, *buf ? buf : "?", *buf ? buf : "PID");
		return tally_seterr(-e, "cannot lock '%s': %s", d->pidfile, strerror(e));
	}
	d->lockfd = fd;
	return 0;
}

static void write_pid(struct tally_daemon *d, pid_t pid)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);
	if (ftruncate(d->lockfd, 0) < 0 || pwrite(d->lockfd, buf, (size_t)n, 0) != n)
		dmn_log(d, "cannot write '%s': %s", d->pidfile, strerror(errno));
	/* a pid is no profile: readable by others, as pid files are */
	if (d->pidfile_extra &&
	    tally_write_file_atomic_mode(d->pidfile_extra, buf, (size_t)n, 0644))
		dmn_log(d, "%s", tally_errmsg());
}

/* The marker that makes the directory a daemon database. */
static int write_marker(struct tally_daemon *d)
{
	static const char marker[] = "format-version: 1\nlayout: epochs\n";
	char *m = dmn_path(d, TALLY_DAEMON_MARKER);
	struct stat st;
	int r = 0;
	if (stat(m, &st) < 0)
		r = tally_write_file_atomic(m, marker, strlen(marker));
	free(m);
	return r;
}

static int event_loop(struct tally_daemon *d)
{
	if (pipe2(d->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		d->wake[0] = d->wake[1] = -1;
		return tally_seterr(-errno, "cannot set up the event loop: %s", strerror(errno));
	}
	if ((d->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return tally_seterr(-errno, "cannot set up the event loop: %s", strerror(errno));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &d->listenfd };
	struct epoll_event wv = { .events = EPOLLIN, .data.ptr = &d->wake[0] };
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->listenfd, &ev) < 0 ||
	    epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->wake[0], &wv) < 0)
		return tally_seterr(-errno, "cannot set up the event loop: %s", strerror(errno));
	return 0;
}

int tally_daemon_new(struct tally_daemon **out, const struct tally_daemon_opts *o)
{
	*out = NULL;
	if (!o->smp || !o->smp->nev)
		return tally_seterr(-EINVAL,
				    "no sampling settings for the daemon (resolve them first)");
	struct tally_daemon *d = xcalloc(1, sizeof(*d));
	d->lockfd = d->listenfd = d->epfd = -1;
	d->wake[0] = d->wake[1] = -1;
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++)
		d->clients[i].fd = -1;
	d->smp = o->smp;
	d->flush_interval = o->flush_interval;
	d->epoch_every = o->epoch_every;
	d->keep = o->keep;
	d->ctl_timeout = o->ctl_timeout;
	d->max_memory = o->max_memory;
	d->max_db_size = o->max_db_size;
	d->min_free = o->min_free;
	d->verbose = o->verbose;
	d->log = o->log;
	d->log_ctx = o->log_ctx;
	if (o->pidfile_extra)
		d->pidfile_extra = xstrdup(o->pidfile_extra);
	if (o->push && tally_push_opts_given(o->push)) {
		d->push = xcalloc(1, sizeof(*d->push));
		tally_push_opts_copy(d->push, o->push);
	}
	int r = prepare_db(d, o->db);
	if (!r)
		r = take_lock(d);
	if (r)
		goto fail;
	if (o->socket) {
		d->sock = xstrdup(o->socket);
	} else {
		d->sock = dmn_path(d, TALLY_CTL_SOCKET_NAME);
	}
	if (*d->sock != '/') {
		char *cwd = getcwd(NULL, 0);
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s/%s", cwd ? cwd : ".", d->sock);
		free(cwd);
		free(d->sock);
		d->sock = strbuf_detach(&sb);
	}
	r = write_marker(d);
	if (r)
		goto fail;
	dmn_recover(d);
	{
		/* an earlier daemon's clients drained: carry on with their pile */
		char *dr = dmn_path(d, DRAIN_DIR);
		struct stat st;
		d->draining = stat(dr, &st) == 0;
		free(dr);
	}
	r = dmn_listen(d);
	if (!r)
		r = event_loop(d);
	if (r)
		goto fail;
	*out = d;
	return 0;
fail:
	tally_daemon_free(d);
	return r;
}

const char *tally_daemon_db(const struct tally_daemon *d)
{
	return d->db;
}

const char *tally_daemon_sample_mech(const struct tally_daemon *d)
{
	return tally_collector_sample_mech(d->col) == TALLY_SAMPLE_BPF
		       ? "counted in the kernel (bpf)"
		       : "through the ring buffers";
}

const char *tally_daemon_socket(const struct tally_daemon *d)
{
	return d->sock;
}

int tally_daemon_begin(struct tally_daemon *d, struct tally_agg *agg, struct tally_collector *col,
		       char **warning)
{
	if (warning)
		*warning = NULL;
	if (d->started || d->agg)
		return tally_seterr(-EINVAL, "the daemon was started already");
	if (agg->nevents != d->smp->nev)
		return tally_seterr(-EINVAL,
				    "the aggregate counts %d events, the sampling settings %d",
				    agg->nevents, d->smp->nev);
	d->agg = agg;
	d->col = col;
	/* one process's JIT sources may take at most a quarter of --max-memory (of
	 * 256 MiB at most): a hostile map or dump cannot push the daemon past it */
	if (agg->jit_budget > d->max_memory / 4)
		agg->jit_budget = d->max_memory / 4;
	d->wall_start = tally_now_wall();
	d->mono_start = tally_now_mono();
	d->db_bytes = dmn_db_bytes(d);
	if (dmn_begin_epoch(d, d->wall_start) && warning) {
		struct strbuf w = STRBUF_INIT;
		strbuf_addf(&w, "%s (collecting all the same; writing is retried every flush)",
			    tally_errmsg());
		*warning = strbuf_detach(&w);
	}
	dmn_prune(d, d->wall_start);
	/* the pusher: a thread of its own, from the backlog the cursor keeps */
	if (d->push) {
		int r = tally_pusher_start(&d->pusher, d->db, d->push);
		if (r)
			return r;
	}
	d->started = true;
	d->next_flush = tally_now_mono() + d->flush_interval;
	d->next_epoch = tally_now_mono() + d->epoch_every;
	return 0;
}

int tally_daemon_start(struct tally_daemon *d, char **warning)
{
	if (warning)
		*warning = NULL;
	if (d->started || d->rec)
		return tally_seterr(-EINVAL, "the daemon was started already");
	write_pid(d, getpid());
	struct tally_recording_opts ro;
	tally_recording_opts_init(&ro);
	ro.smp = d->smp;
	ro.target = TALLY_TARGET_SYSTEM;
	ro.sideband_dummy = true;
	ro.identify_early = true;
	ro.wake_fd = d->epfd; /* the socket and the wake pipe end a wait too */
	int r = tally_recording_new(&d->rec, &ro);
	if (!r)
		r = tally_recording_start(d->rec);
	if (r) {
		tally_recording_free(d->rec);
		d->rec = NULL;
		return r;
	}
	return tally_daemon_begin(d, tally_recording_agg(d->rec), tally_recording_collector(d->rec),
				  warning);
}

void tally_daemon_wake(struct tally_daemon *d)
{
	int e = errno;
	char c = 0;
	if (d->wake[1] >= 0 && write(d->wake[1], &c, 1) < 0) {
		/* full: a wake-up is pending anyway */
	}
	errno = e;
}

void dmn_sync(struct tally_daemon *d)
{
	/* a flush or a peek has everything sampled until now: what the rings and
	 * the BPF map hold is read first, without waiting */
	if (d->rec && d->started && tally_recording_step(d->rec, 0) < 0)
		dmn_log(d, "%s", tally_errmsg());
}

/* Once a second: is the database directory still where it was? Removed
 * (rm -rf of a test's directory, an uninstall) or moved, nothing the daemon
 * flushes can land and no client can reach its socket: it stops as SIGTERM
 * stops it, by raising it (the caller's handler ends its loop), without the
 * final flush. */
#define DB_LOOK_S 1.0
static void watch_db(struct tally_daemon *d)
{
	double now = tally_now_mono();
	if (d->db_gone || now - d->last_db_look < DB_LOOK_S)
		return;
	d->last_db_look = now;
	struct stat st;
	if (stat(d->db, &st) == 0 ? st.st_dev == d->db_dev && st.st_ino == d->db_ino
				  : errno != ENOENT && errno != ENOTDIR)
		return;
	d->db_gone = true;
	dmn_log(d, "the database directory '%s' was removed or moved: stopping", d->db);
	raise(SIGTERM);
}

void tally_daemon_step(struct tally_daemon *d, int timeout_ms)
{
	/* the rings wake the wait when half full, the socket, the wake pipe and
	 * the next flush end it too: the tick is only for the period's redraw (every
	 * 200 ms) and the bookkeeping of a round, which costs the same however few
	 * records it reads; so one round per redraw (with --no-randomize too) */
	if (timeout_ms < 0) {
		/* --sample-mechanism bpf: the tables are read, and the period
		 * redrawn, once a round (every 4 s when nothing else asks sooner) */
		timeout_ms = tally_collector_sample_mech(d->col) == TALLY_SAMPLE_BPF
				     ? TALLY_COUNTED_ROUND_MS
				     : DAEMON_TICK_MS;
		if (d->started) {
			/* a flush or an epoch due sooner than the tick ends the wait */
			double next = d->next_flush;
			if (d->epoch_every > 0 && d->next_epoch < next)
				next = d->next_epoch;
			double left = (next - tally_now_mono()) * 1000;
			if (left < timeout_ms)
				timeout_ms = left > 0 ? (int)left + 1 : 0;
		}
	}
	int due = dmn_ctl_due_ms(d);
	if (due >= 0 && due < timeout_ms)
		timeout_ms = due;
	if (d->rec) {
		if (tally_recording_step(d->rec, timeout_ms) < 0)
			dmn_log(d, "%s", tally_errmsg());
	} else {
		struct pollfd p = { .fd = d->epfd, .events = POLLIN };
		poll(&p, 1, timeout_ms);
	}
	tally_daemon_serve(d);
	if (!d->started)
		return;
	tally_pusher_logs(d->pusher, d->log, d->log_ctx);
	watch_db(d);
	if (d->db_gone)
		return;
	watch_memory(d);
	double now = tally_now_mono();
	if (now >= d->next_flush)
		tally_daemon_flush(d, "interval", NULL);
	if (d->epoch_every > 0 && now >= d->next_epoch) {
		if (tally_daemon_new_epoch(d, NULL))
			d->next_epoch = now + d->epoch_every;
	}
}

int tally_daemon_stop(struct tally_daemon *d, struct strbuf *msg)
{
	if (!d->started)
		return 0;
	if (d->rec)
		tally_recording_stop(d->rec);
	if (d->db_gone) {
		/* nowhere to write, and no backlog left to push */
		if (msg)
			strbuf_addf(msg,
				    "%" PRIu64
				    " sample%s unwritten: the database directory '%s' is gone",
				    dmn_agg_samples(d), dmn_agg_samples(d) == 1 ? "" : "s", d->db);
		tally_pusher_stop(d->pusher, 0, d->log, d->log_ctx);
		d->pusher = NULL;
		return tally_seterr(-ENOENT, "the database directory '%s' is gone", d->db);
	}
	int r = tally_daemon_flush(d, "exit", msg);
	if (r && msg)
		strbuf_addf(msg, "%" PRIu64 " sample%s unwritten: %s", dmn_agg_samples(d),
			    dmn_agg_samples(d) == 1 ? "" : "s", d->write_error);
	/* what the last flush added, if the server takes it soon; else it waits on disk */
	tally_pusher_stop(d->pusher, TALLY_DAEMON_PUSH_GRACE, d->log, d->log_ctx);
	d->pusher = NULL;
	return r;
}

void tally_daemon_free(struct tally_daemon *d)
{
	if (!d)
		return;
	tally_pusher_stop(d->pusher, 0, d->log, d->log_ctx);
	if (d->push) {
		tally_push_opts_release(d->push);
		free(d->push);
	}
	dmn_close_clients(d);
	if (d->listenfd >= 0) {
		close(d->listenfd);
		unlink(d->sock);
	}
	if (d->epfd >= 0)
		close(d->epfd);
	if (d->wake[0] >= 0) {
		close(d->wake[0]);
		close(d->wake[1]);
	}
	tally_recording_free(d->rec);
	tally_ksym_cache_release(&d->kc);
	/* the copy kept for the next flush: a daemon that ends leaves none */
	tally_db_spare_drop(&d->spare);
	if (d->lockfd >= 0) {
		if (ftruncate(d->lockfd, 0) < 0) {
			/* a stale pid in an unlocked file misleads nobody: the lock decides */
		}
		close(d->lockfd);
	}
	if (d->pidfile_extra)
		unlink(d->pidfile_extra);
	if (d->created_db && !d->started && d->db)
		tally_remove_tree(d->db); /* a start that failed leaves nothing behind */
	free(d->db);
	free(d->sock);
	free(d->pidfile);
	free(d->pidfile_extra);
	free(d->epoch);
	free(d->write_error);
	for (size_t i = 0; i < d->nmy_epochs; i++)
		free(d->my_epochs[i]);
	free(d->my_epochs);
	free(d);
}
