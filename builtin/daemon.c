/* tally daemon: the whole system sampled without end into a database of
 * epochs; the in-memory aggregate is merged into the current epoch every
 * flush interval, and tally ctl steers it over a Unix socket. The design
 * (flushes, crash safety, the memory bound, the protocol) is docs/daemon.md. */
#define _GNU_SOURCE
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "builtin/builtin.h"
#include "tally/agg.h"
#include "tally/collect.h"
#include "tally/ctl.h"
#include "tally/db.h"
#include "tally/elfinfo.h"
#include "tally/epoch.h"
#include "tally/sampling.h"
#include "tally/util.h"

/* The daemon's own options, as given; cmd_daemon copies them into its state. */
struct dopts {
	const char *db, *sock, *pidfile;
	bool foreground;
	double flush_interval, epoch_every, keep, ctl_timeout;
	uint64_t max_memory, max_db_size, min_free;
};

enum {
	OPT_DB = 1, OPT_SOCKET, OPT_PIDFILE, OPT_FOREGROUND, OPT_FLUSH, OPT_EPOCH_EVERY, OPT_KEEP, OPT_MAXMEM, OPT_MAXDB,
	OPT_MINFREE, OPT_CTL_TIMEOUT, OPT_VERBOSE,
};

static int daemon_handle(void *ctx, int code, const char *arg)
{
	struct dopts *o = ctx;
	switch (code) {
	case OPT_DB: o->db = arg; break;
	case OPT_SOCKET: o->sock = arg; break;
	case OPT_PIDFILE: o->pidfile = arg; break;
	case OPT_FOREGROUND: o->foreground = true; break;
	case OPT_FLUSH: return tally_parse_duration(arg, "--flush-interval", &o->flush_interval);
	case OPT_EPOCH_EVERY: return tally_parse_duration(arg, "--epoch-every", &o->epoch_every);
	case OPT_KEEP: return tally_parse_duration(arg, "--keep", &o->keep);
	case OPT_CTL_TIMEOUT: return tally_parse_duration(arg, "--ctl-timeout", &o->ctl_timeout);
	case OPT_MAXMEM: return tally_parse_size(arg, "--max-memory", 16ull << 20, &o->max_memory);
	case OPT_MAXDB: return tally_parse_size(arg, "--max-db-size", 4096, &o->max_db_size);
	case OPT_MINFREE: return tally_parse_size(arg, "--min-free", 0, &o->min_free);
	case OPT_VERBOSE: tally_verbose = 1; break;
	}
	return 0;
}

static const struct tally_option daemon_options[] = {
	{ 'd', "db", TALLY_ARG_REQUIRED, "DIR", "the database directory (default tally.db): epochs, socket, pid file, log", OPT_DB },
	{ 0, "socket", TALLY_ARG_REQUIRED, "PATH", "the control socket (default DIR/ctl.sock)", OPT_SOCKET },
	{ 0, "pid-file", TALLY_ARG_REQUIRED, "PATH", "also write the daemon's pid there (DIR/daemon.pid always)", OPT_PIDFILE },
	{ 0, "foreground", TALLY_ARG_NONE, NULL, "stay attached and log to stderr (default: detach, log to DIR/daemon.log)", OPT_FOREGROUND },
	{ 0, "flush-interval", TALLY_ARG_REQUIRED, "D", "merge what is in memory into the database every D (default 60s)", OPT_FLUSH },
	{ 0, "epoch-every", TALLY_ARG_REQUIRED, "D", "start a new epoch every D (default: only on 'tally ctl epoch')", OPT_EPOCH_EVERY },
	{ 0, "keep", TALLY_ARG_REQUIRED, "D", "delete epochs whose last flush is older than D (the newest 3 stay)", OPT_KEEP },
	{ 0, "max-memory", TALLY_ARG_REQUIRED, "SIZE", "flush early before the daemon's memory reaches SIZE (default 128M)", OPT_MAXMEM },
	{ 0, "max-db-size", TALLY_ARG_REQUIRED, "SIZE", "stop writing (and say so) rather than grow the directory past SIZE", OPT_MAXDB },
	{ 0, "min-free", TALLY_ARG_REQUIRED, "SIZE", "stop writing rather than leave less than SIZE free on its filesystem (default 64M)",
	  OPT_MINFREE },
	{ 0, "ctl-timeout", TALLY_ARG_REQUIRED, "D", "drop a control connection idle for D (default 5s)", OPT_CTL_TIMEOUT },
	{ 'v', "verbose", TALLY_ARG_NONE, NULL, "log more", OPT_VERBOSE },
	TALLY_OPTION_END,
};
static const struct tally_optgroup daemon_group = { NULL, daemon_options, daemon_handle };

const struct tally_cmdopts daemon_cmdopts = {
	.name = "daemon",
	.summary = "profile the whole system without end, into epochs (profd; tally ctl steers it)",
	.usage = "[options]",
	.footer = "durations: seconds (decimals allowed) or 200ms, 30s, 5m, 2h, 1d\n",
	.groups = { &daemon_group, &tally_sampling_group },
};

#define MAX_CLIENTS 16
#define KEEP_NEWEST 3
#define LOG_MAX (1u << 20)
#define DRAIN_DIR "drain"

struct client {
	int fd;
	uid_t uid;
	bool refused; /* not the owner: its request is read, then refused */
	struct strbuf in, out;
	size_t out_off;
	double deadline; /* monotonic */
	bool replying;
};

struct daemon {
	/* configuration */
	char *db, *sock, *pidfile, *pidfile_extra, *logpath;
	bool foreground;
	bool created_db; /* made by this start: removed again if the start fails */
	bool started;
	double flush_interval, epoch_every, keep, ctl_timeout;
	uint64_t max_memory, max_db_size, min_free;
	struct tally_sampling smp;

	/* resources */
	int lockfd, listenfd, epfd;
	FILE *log;
	struct tally_collector *col;
	struct tally_agg agg;
	struct tally_ksym_cache kc;
	struct client clients[MAX_CLIENTS];

	/* state */
	char *epoch;
	double epoch_start;          /* wall */
	double delta_start;          /* wall: what is in memory began here */
	double wall_start, mono_start;
	double next_flush, next_epoch, last_early; /* monotonic */
	char *write_error;           /* NULL while writing works */
	uint64_t samples_total, lost_total, dropped, cleared;
	uint64_t flushes, early_flushes, drains;
	/* the drain stream: kept (DIR/drain, merged at every flush) only once a
	 * client has drained, from this daemon or an earlier one; before that the
	 * first drain is made from the epochs this daemon began */
	bool draining;
	char **my_epochs;
	size_t nmy_epochs, amy_epochs;
	double last_flush_ms, last_flush_wall;
	uint64_t db_bytes;
	bool memory_warned;
};

static int sig_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_term, got_hup;

static void on_signal(int sig)
{
	int e = errno;
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_term = 1;
	char c = 0;
	if (write(sig_pipe[1], &c, 1) < 0) {
		/* full: a wake-up is pending anyway */
	}
	errno = e;
}

/* ---- logging ---- */

static void dlog(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dlog(struct daemon *d, const char *fmt, ...)
{
	if (!d->log)
		return;
	if (!d->foreground && ftell(d->log) > (long)LOG_MAX) {
		/* one old log is kept: the log never grows without bound */
		struct strbuf old = STRBUF_INIT;
		strbuf_addf(&old, "%s.1", d->logpath);
		rename(d->logpath, old.buf);
		strbuf_release(&old);
		FILE *f = fopen(d->logpath, "ae");
		if (f) {
			fclose(d->log);
			d->log = f;
		}
	}
	char ts[32];
	tally_format_utc(tally_now_wall(), ts, sizeof(ts));
	fprintf(d->log, "%s tally daemon[%d]: ", ts, (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	vfprintf(d->log, fmt, ap);
	va_end(ap);
	fputc('\n', d->log);
	fflush(d->log);
}

/* ---- sizes and memory ---- */

/* Disk space a directory takes, like du: allocated blocks of files and directories. */
static uint64_t dir_bytes(const char *path)
{
	uint64_t sum = 0;
	DIR *dir = opendir(path);
	if (!dir)
		return 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/%s", path, de->d_name);
		struct stat st;
		if (lstat(p.buf, &st) == 0) {
			sum += (uint64_t)st.st_blocks * 512;
			if (S_ISDIR(st.st_mode))
				sum += dir_bytes(p.buf);
		}
		strbuf_release(&p);
	}
	closedir(dir);
	return sum;
}

/* A directory's disk usage as du counts it: its own blocks and its contents'. */
static uint64_t tree_bytes(const char *path)
{
	struct stat st;
	return (lstat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0) + dir_bytes(path);
}

/* What --max-db-size counts: the database directory without its log (which its
 * rotation bounds, and which must go on when writing has stopped). */
static uint64_t db_bytes(const struct daemon *d)
{
	uint64_t sum = tree_bytes(d->db);
	const char *logs[] = { "daemon.log", "daemon.log.1" };
	for (size_t i = 0; i < ARRAY_SIZE(logs); i++) {
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/%s", d->db, logs[i]);
		struct stat st;
		if (lstat(p.buf, &st) == 0 && (uint64_t)st.st_blocks * 512 <= sum)
			sum -= (uint64_t)st.st_blocks * 512;
		strbuf_release(&p);
	}
	return sum;
}



/* The heap the daemon has in use (glibc's count; the aggregate's own estimate
 * where that is not available, as under a sanitizer). */
static uint64_t memory_used(const struct daemon *d)
{
	struct mallinfo2 mi = mallinfo2();
	uint64_t heap = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
	uint64_t own = tally_agg_memory(&d->agg) + tally_kallsyms_bytes(d->kc.table);
	return heap > own ? heap : own;
}

static uint64_t rss_bytes(void)
{
	struct strbuf sb = STRBUF_INIT;
	uint64_t rss = 0;
	if (strbuf_read_file(&sb, "/proc/self/statm", 256) == 0) {
		unsigned long long pages = 0;
		if (sscanf(sb.buf, "%*u %llu", &pages) == 1)
			rss = pages * (uint64_t)sysconf(_SC_PAGESIZE);
	}
	strbuf_release(&sb);
	return rss;
}

static uint64_t agg_samples(const struct tally_agg *a)
{
	uint64_t n = 0;
	for (int e = 0; e < a->nevents; e++)
		n += a->samples[e];
	return n;
}

/* ---- the database ---- */

static char *in_db(const struct daemon *d, const char *name)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s", d->db, name);
	return strbuf_detach(&sb);
}

/* The session of a database made from a (the daemon's aggregate, or an empty
 * one: its counters are summed when epochs merge). */
static void session_for(struct daemon *d, const struct tally_agg *a, struct tally_meta *s, double now)
{
	memset(s, 0, sizeof(*s));
	tally_sampling_session(&d->smp, d->col, a, "system", NULL, s);
	struct strbuf rates = STRBUF_INIT;
	bool differ = false;
	for (int c = 0; c < d->smp.ncpus; c++) {
		struct tally_cpu_state st;
		tally_collector_cpu_state(d->col, c, &st);
		if (!st.opened)
			continue;
		if (!st.on || (st.freq && st.freq != d->smp.freq) || (!st.freq && st.period != d->smp.period))
			differ = true;
		strbuf_addf(&rates, "%s%d=", rates.len ? "," : "", c);
		if (!st.on)
			strbuf_addstr(&rates, "off");
		else if (st.freq)
			strbuf_addf(&rates, "%" PRIu64 "Hz", st.freq);
		else
			strbuf_addf(&rates, "period %" PRIu64, st.period);
	}
	if (differ)
		tally_meta_set(s, "cpu-sampling", "%s", rates.buf);
	strbuf_release(&rates);
	char ts[32];
	tally_format_utc(d->delta_start, ts, sizeof(ts));
	tally_meta_set(s, "start-time", "%s", ts);
	tally_format_utc(now, ts, sizeof(ts));
	tally_meta_set(s, "stop-time", "%s", ts);
	tally_meta_set(s, "duration", "%.3f", now > d->delta_start ? now - d->delta_start : 0.0);
	tally_meta_set(s, "epoch", "%s", d->epoch);
	tally_meta_set(s, "daemon-pid", "%d", (int)getpid());
}

/* Free space and --max-db-size allow a database of `bytes` (on disk) replacing
 * `old`; after is whether the new copy is already written (and so counted as
 * used space, not free). */
static int room_for(struct daemon *d, const char *what, uint64_t bytes, uint64_t old, bool after)
{
	if (d->max_db_size && d->db_bytes - (old < d->db_bytes ? old : d->db_bytes) + bytes > d->max_db_size) {
		char a[32], b[32];
		tally_format_size(d->db_bytes - (old < d->db_bytes ? old : d->db_bytes) + bytes, a, sizeof(a));
		tally_format_size(d->max_db_size, b, sizeof(b));
		return tally_seterr(-EFBIG, "writing %s would make '%s' %s, over --max-db-size %s (delete epochs, or raise the limit)",
				    what, d->db, a, b);
	}
	struct statvfs vs;
	if (statvfs(d->db, &vs) == 0) {
		uint64_t avail = (uint64_t)vs.f_bavail * (uint64_t)vs.f_frsize;
		/* the new copy is written before the old one goes */
		if (avail < (after ? 0 : bytes) + d->min_free) {
			char a[32], b[32], c[32];
			tally_format_size(avail, a, sizeof(a));
			tally_format_size(bytes, b, sizeof(b));
			tally_format_size(d->min_free, c, sizeof(c));
			return tally_seterr(-ENOSPC, "only %s free on the filesystem of '%s': writing %s (%s) would leave less than --min-free %s (free some space)",
					    a, d->db, what, b, c);
		}
	}
	return 0;
}

struct room_check {
	struct daemon *d;
	const char *what;
	uint64_t old;
};

/* tally_db_save's check: what the new copy really takes on disk. */
static int check_room(void *ctx, const char *staging)
{
	struct room_check *rc = ctx;
	return room_for(rc->d, rc->what, tree_bytes(staging), rc->old, true);
}

/* Merges delta (delta_bytes on disk) into the database directory at path
 * (created when missing). */
static int merge_into(struct daemon *d, const char *path, const char *what, const struct tally_db *delta,
		      size_t delta_bytes)
{
	struct tally_db old, merged;
	struct stat st;
	bool have = stat(path, &st) == 0;
	int r;
	if (have) {
		r = tally_db_open_dir(&old, path);
		if (r) {
			/* never written by a daemon that lived: it cannot happen, but do not lose new data over it */
			dlog(d, "cannot read %s '%s' (%s): starting it again", what, path, tally_errmsg());
			struct strbuf bad = STRBUF_INIT;
			strbuf_addf(&bad, "%s.damaged-%ld", path, (long)time(NULL));
			rename(path, bad.buf);
			strbuf_release(&bad);
			have = false;
		}
	}
	struct tally_db_builder *b = tally_db_builder_new(delta->nevents, delta->events, delta->per_pid, delta->has_stacks);
	if (have)
		tally_db_builder_add(b, &old);
	tally_db_builder_add(b, delta);
	tally_db_builder_finish(b, &merged);
	/* the merge is at most the old files plus the new ones: enough to see whether it
	 * can be written at all; what it takes is checked before it is published */
	uint64_t old_bytes = have ? tree_bytes(path) : 0;
	struct room_check rc = { d, what, old_bytes };
	r = room_for(d, what, old_bytes + delta_bytes, old_bytes, false);
	if (!r)
		r = tally_db_save_checked(&merged, path, true, check_room, &rc);
	tally_db_release(&merged);
	if (have)
		tally_db_release(&old);
	return r;
}

static void set_write_error(struct daemon *d, const char *msg)
{
	if (!msg) {
		if (d->write_error)
			dlog(d, "writing resumed");
		free(d->write_error);
		d->write_error = NULL;
		return;
	}
	if (!d->write_error || strcmp(d->write_error, msg))
		dlog(d, "writing stopped, collection goes on: %s", msg);
	free(d->write_error);
	d->write_error = xstrdup(msg);
}

/* The epochs this daemon began, for its first drain (not needed once it drains). */
static void remember_epoch(struct daemon *d, const char *name)
{
	if (d->draining)
		return;
	GROW(d->my_epochs, d->amy_epochs, d->nmy_epochs + 1);
	d->my_epochs[d->nmy_epochs++] = xstrdup(name);
}

static void forget_epochs(struct daemon *d, bool all)
{
	size_t j = 0;
	for (size_t i = 0; i < d->nmy_epochs; i++) {
		char *p = in_db(d, d->my_epochs[i]);
		struct stat st;
		if (!all && stat(p, &st) == 0)
			d->my_epochs[j++] = d->my_epochs[i];
		else
			free(d->my_epochs[i]);
		free(p);
	}
	d->nmy_epochs = j;
}

/* --keep: delete old epochs, and forget them */
static void prune(struct daemon *d, double now)
{
	if (d->keep <= 0)
		return;
	int k = tally_epochs_prune(d->db, d->keep, now, KEEP_NEWEST, d->epoch);
	if (k > 0) {
		dlog(d, "deleted %d epoch%s older than --keep", k, k == 1 ? "" : "s");
		d->db_bytes = db_bytes(d);
		forget_epochs(d, false);
	}
}

/* Writes what is in memory into the current epoch (and the drain's pile).
 * 0 (msg says what), or -errno: then writing stops until a flush succeeds. */
static int flush(struct daemon *d, const char *why, struct strbuf *msg)
{
	double t0 = tally_now_mono(), now = tally_now_wall();
	tally_agg_identify(&d->agg);
	uint64_t n = agg_samples(&d->agg);
	if (!n && !d->agg.lost && !d->agg.throttled) {
		if (msg)
			strbuf_addf(msg, "nothing to flush into epoch %s", d->epoch);
		d->next_flush = t0 + d->flush_interval;
		d->delta_start = now; /* time without samples (collection stopped) counts for nothing */
		return 0;
	}
	tally_agg_snapshot_jit(&d->agg);
	tally_agg_tasks(&d->agg);
	for (size_t i = 0; i < d->agg.njit_warnings; i++)
		dlog(d, "%s", d->agg.jit_warnings[i]);
	struct tally_meta s;
	session_for(d, &d->agg, &s, now);
	struct tally_db delta;
	int r = tally_db_from_agg(&delta, &d->agg, &s, &d->kc);
	tally_meta_release(&s);
	if (r)
		goto out;
	char *ep = in_db(d, d->epoch), *dr = in_db(d, DRAIN_DIR);
	struct strbuf what = STRBUF_INIT;
	strbuf_addf(&what, "epoch %s", d->epoch);
	size_t delta_bytes = tally_db_bytes(&delta, NULL);
	r = merge_into(d, ep, what.buf, &delta, delta_bytes);
	if (!r && d->draining) {
		d->db_bytes = db_bytes(d);
		if (merge_into(d, dr, "the drain's samples", &delta, delta_bytes))
			dlog(d, "the drain stream misses %" PRIu64 " samples: %s", n, tally_errmsg());
	}
	strbuf_release(&what);
	free(ep);
	free(dr);
	tally_db_release(&delta);
out:
	d->next_flush = tally_now_mono() + d->flush_interval;
	if (r) {
		set_write_error(d, tally_errmsg());
		return r;
	}
	set_write_error(d, NULL);
	d->samples_total += n;
	d->lost_total += d->agg.lost;
	tally_agg_reset(&d->agg);
	/* the merge's memory goes back to the system, not only to malloc */
	malloc_trim(0);
	d->delta_start = now;
	d->db_bytes = db_bytes(d);
	d->flushes++;
	d->last_flush_ms = (tally_now_mono() - t0) * 1000;
	d->last_flush_wall = now;
	if (msg)
		strbuf_addf(msg, "flushed %" PRIu64 " samples into epoch %s (%.0f ms)", n, d->epoch, d->last_flush_ms);
	if (tally_verbose)
		dlog(d, "flush (%s): %" PRIu64 " samples into epoch %s in %.0f ms", why, n, d->epoch, d->last_flush_ms);
	prune(d, now);
	return 0;
}

/* An empty epoch beginning at now: written at once, so readers see it. */
static int begin_epoch(struct daemon *d, double now)
{
	char *name = tally_epoch_new_name(d->db, now);
	char *path = in_db(d, name);
	char *old = d->epoch;
	double old_start = d->delta_start;
	d->epoch = name;
	d->delta_start = now;
	struct tally_agg empty;
	tally_agg_init(&empty, d->smp.nev, d->smp.per_pid, true);
	struct tally_meta s;
	session_for(d, &empty, &s, now);
	struct tally_db db;
	int r = tally_db_from_agg(&db, &empty, &s, NULL);
	tally_meta_release(&s);
	tally_agg_release(&empty);
	struct room_check rc = { d, "a new epoch", 0 };
	if (!r)
		r = tally_db_save_checked(&db, path, false, check_room, &rc);
	tally_db_release(&db);
	free(path);
	if (r && old) {
		d->epoch = old;
		d->delta_start = old_start;
		free(name);
		return r;
	}
	if (r) {
		/* at start: collect all the same, and write when there is room again */
		remember_epoch(d, name);
		d->epoch_start = now;
		d->next_epoch = tally_now_mono() + d->epoch_every;
		set_write_error(d, tally_errmsg());
		return r;
	}
	free(old);
	remember_epoch(d, name);
	d->epoch_start = now;
	d->db_bytes = db_bytes(d);
	d->next_epoch = tally_now_mono() + d->epoch_every;
	dlog(d, "epoch %s begins", name);
	prune(d, now);
	return 0;
}

static int new_epoch(struct daemon *d, struct strbuf *msg)
{
	struct strbuf f = STRBUF_INIT;
	int r = flush(d, "epoch", &f);
	if (r) {
		strbuf_release(&f);
		return r;
	}
	char *prev = xstrdup(d->epoch);
	/* what arrived while the old epoch was written belongs to the new one */
	r = begin_epoch(d, d->delta_start);
	if (r)
		set_write_error(d, tally_errmsg());
	else if (msg)
		strbuf_addf(msg, "epoch %s begins (%s; epoch %s is complete)", d->epoch, f.buf, prev);
	free(prev);
	strbuf_release(&f);
	return r;
}

/* Removes what a killed daemon may have left: staging copies and half-done swaps. */
static void recover(struct daemon *d)
{
	DIR *dir = opendir(d->db);
	if (!dir)
		return;
	struct dirent *de;
	while ((de = readdir(dir))) {
		const char *n = de->d_name;
		if (n[0] != '.' || !strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		char *full = in_db(d, n);
		const char *old = strstr(n, ".old-");
		if (old) {
			/* a swap without RENAME_EXCHANGE was cut between its two renames */
			struct strbuf target = STRBUF_INIT;
			strbuf_addf(&target, "%s/%.*s", d->db, (int)(old - n - 1), n + 1);
			struct stat st;
			if (stat(target.buf, &st) < 0 && rename(full, target.buf) == 0) {
				dlog(d, "restored '%s' from a write that was cut short", target.buf);
			} else {
				tally_remove_tree(full);
			}
			strbuf_release(&target);
		} else if (strstr(n, ".tmp-") || strstr(n, ".gone-")) {
			tally_remove_tree(full);
		}
		free(full);
	}
	closedir(dir);
}

/* ---- control ---- */

static void status_text(struct daemon *d, struct strbuf *o)
{
	double up = tally_now_mono() - d->mono_start;
	bool paused = tally_collector_paused(d->col);
	char a[32], b[32], c[32];
	strbuf_addf(o, "state: %s\n", paused ? "stopped" : "running");
	strbuf_addf(o, "pid: %d\n", (int)getpid());
	strbuf_addf(o, "database: %s\n", d->db);
	strbuf_addf(o, "socket: %s\n", d->sock);
	strbuf_addf(o, "uptime: %.1f s\n", up);
	strbuf_addf(o, "events: %s\n", d->smp.evnames.buf);
	if (d->smp.period)
		strbuf_addf(o, "sampling: period %" PRIu64 "%s\n", d->smp.period, d->smp.randomize ? ", randomized" : "");
	else
		strbuf_addf(o, "sampling: frequency %" PRIu64 " Hz%s\n", d->smp.freq, d->smp.randomize ? ", randomized" : "");
	strbuf_addf(o, "call-graph: %s\n", d->smp.stack_user ? "dwarf" : d->smp.callchain ? "fp" : "none");
	strbuf_addf(o, "per-pid: %s\n", d->smp.per_pid ? "yes" : "no");
	for (int cpu = 0; cpu < d->smp.ncpus; cpu++) {
		struct tally_cpu_state st;
		tally_collector_cpu_state(d->col, cpu, &st);
		if (!st.opened) {
			strbuf_addf(o, "cpu %d: not sampled\n", cpu);
			continue;
		}
		strbuf_addf(o, "cpu %d: %s, ", cpu, st.sampling ? "on" : st.on ? "on (collection stopped)" : "off");
		if (st.freq)
			strbuf_addf(o, "%" PRIu64 " Hz\n", st.freq);
		else
			strbuf_addf(o, "period %" PRIu64 "\n", st.period);
	}
	uint64_t inmem = agg_samples(&d->agg);
	strbuf_addf(o, "samples: %" PRIu64 "\n", d->samples_total + inmem);
	strbuf_addf(o, "lost: %" PRIu64 "\n", d->lost_total + d->agg.lost);
	strbuf_addf(o, "in-memory: %" PRIu64 " samples not yet flushed\n", inmem);
	if (d->cleared || d->dropped)
		strbuf_addf(o, "discarded: %" PRIu64 " samples cleared, %" PRIu64 " dropped while writing was stopped\n",
			    d->cleared, d->dropped);
	tally_format_size(memory_used(d), a, sizeof(a));
	tally_format_size(tally_agg_memory(&d->agg), b, sizeof(b));
	tally_format_size(d->max_memory, c, sizeof(c));
	strbuf_addf(o, "memory: %s in use (aggregate %s), limit %s", a, b, c);
	tally_format_size(rss_bytes(), a, sizeof(a));
	strbuf_addf(o, "; resident %s\n", a);
	tally_format_size(d->db_bytes, a, sizeof(a));
	strbuf_addf(o, "db-size: %s", a);
	if (d->max_db_size) {
		tally_format_size(d->max_db_size, b, sizeof(b));
		strbuf_addf(o, ", limit %s", b);
	}
	struct statvfs vs;
	if (statvfs(d->db, &vs) == 0) {
		tally_format_size((uint64_t)vs.f_bavail * (uint64_t)vs.f_frsize, b, sizeof(b));
		strbuf_addf(o, ", %s free", b);
	}
	strbuf_addch(o, '\n');
	tally_format_utc(d->epoch_start, a, sizeof(a));
	struct tally_epoch *ep;
	size_t nep = 0;
	if (tally_epochs_list(d->db, &ep, &nep) == 0)
		tally_epochs_free(ep, nep);
	strbuf_addf(o, "epoch: %s (began %s; %zu on disk)\n", d->epoch, a, nep);
	strbuf_addf(o, "flush: every %.3g s; %" PRIu64 " flushes (%" PRIu64 " early for memory)", d->flush_interval,
		    d->flushes, d->early_flushes);
	if (d->flushes) {
		tally_format_utc(d->last_flush_wall, a, sizeof(a));
		strbuf_addf(o, ", last %s taking %.0f ms", a, d->last_flush_ms);
	}
	strbuf_addf(o, ", next in %.1f s\n", d->next_flush - tally_now_mono() > 0 ? d->next_flush - tally_now_mono() : 0.0);
	if (d->epoch_every > 0)
		strbuf_addf(o, "epoch-every: %.3g s\n", d->epoch_every);
	if (d->keep > 0)
		strbuf_addf(o, "keep: %.3g s (the newest %d epochs always)\n", d->keep, KEEP_NEWEST);
	strbuf_addf(o, "writing: %s%s\n", d->write_error ? "stopped: " : "ok", d->write_error ? d->write_error : "");
	strbuf_addf(o, "drains: %" PRIu64 "\n", d->drains);
}

static int do_cpus(struct daemon *d, const struct tally_ctl_req *q, struct strbuf *out)
{
	uint64_t maxrate = tally_max_sample_rate();
	uint64_t eff = q->freq ? q->freq : q->period && d->smp.evs[0]->time_based ? 1000000000ULL / q->period : 0;
	if (maxrate && eff > maxrate)
		return tally_seterr(-EINVAL, "%s (%" PRIu64 " samples per second is above kernel.perf_event_max_sample_rate %" PRIu64 ")",
				    TALLY_CTL_CPUS_USAGE, eff, maxrate);
	for (int c = 0; c < q->ncpus; c++)
		if (q->cpus[c] && (c >= d->smp.ncpus || !d->smp.cpus[c])) {
			struct strbuf have = STRBUF_INIT;
			tally_cpus_string(d->smp.cpus, d->smp.ncpus, &have);
			int r = tally_seterr(-EINVAL, "%s (CPU %d is not sampled by this daemon: it samples %s)", TALLY_CTL_CPUS_USAGE,
					     c, have.buf);
			strbuf_release(&have);
			return r;
		}
	for (int c = 0; c < q->ncpus; c++) {
		if (!q->cpus[c] || !(q->freq || q->period))
			continue;
		if (tally_collector_cpu_rate(d->col, c, q->freq, q->period))
			return tally_seterr(-EINVAL, "%s (%s)", TALLY_CTL_CPUS_USAGE, tally_errmsg());
	}
	for (int c = 0; c < q->ncpus; c++) {
		if (!q->cpus[c])
			continue;
		if (tally_collector_cpu_set(d->col, c, q->on))
			return -EIO;
		struct tally_cpu_state st;
		tally_collector_cpu_state(d->col, c, &st);
		strbuf_addf(out, "cpu %d: %s, ", c, st.on ? "on" : "off");
		if (st.freq)
			strbuf_addf(out, "%" PRIu64 " Hz\n", st.freq);
		else
			strbuf_addf(out, "period %" PRIu64 "\n", st.period);
	}
	return 0;
}

static int do_drain(struct daemon *d, struct strbuf *out)
{
	int r = flush(d, "drain", NULL);
	if (r)
		return tally_seterr(r, "cannot drain: writing is stopped (%s)", d->write_error ? d->write_error : tally_errmsg());
	char *dr = in_db(d, DRAIN_DIR);
	struct tally_db db;
	struct stat st;
	if (!d->draining) {
		/* the first drain: everything this daemon wrote, from its epochs (those
		 * --keep has not deleted); from now on a pile of flushes is kept */
		const char *names[TALLY_SAMPLING_MAX_EVENTS];
		for (int e = 0; e < d->smp.nev; e++)
			names[e] = d->smp.evs[e]->name;
		struct tally_db_builder *b =
			tally_db_builder_new(d->smp.nev, (char *const *)names, d->smp.per_pid, d->smp.callchain);
		r = 0;
		for (size_t i = 0; i < d->nmy_epochs && !r; i++) {
			char *p = in_db(d, d->my_epochs[i]);
			struct tally_db one;
			if (stat(p, &st) == 0) {
				r = tally_db_open_dir(&one, p);
				if (!r) {
					tally_db_builder_add(b, &one);
					tally_db_release(&one);
				}
			}
			free(p);
		}
		if (r)
			tally_db_builder_free(b);
		else
			tally_db_builder_finish(b, &db);
	} else if (stat(dr, &st) == 0) {
		r = tally_db_open_dir(&db, dr);
	} else {
		/* nothing since the last drain: an empty profile all the same */
		struct tally_agg empty;
		tally_agg_init(&empty, d->smp.nev, d->smp.per_pid, true);
		struct tally_meta s;
		double now = tally_now_wall();
		session_for(d, &empty, &s, now);
		char ts[32];
		tally_format_utc(now, ts, sizeof(ts));
		tally_meta_set(&s, "start-time", "%s", ts);
		tally_meta_set(&s, "duration", "0.000");
		r = tally_db_from_agg(&db, &empty, &s, NULL);
		tally_meta_release(&s);
		tally_agg_release(&empty);
	}
	if (!r) {
		tally_meta_set(&db.session, "target", "system (drained from tally daemon pid %d)", (int)getpid());
		r = tally_db_bundle(&db, out);
		tally_db_release(&db);
		/* more than a client takes: refused, and kept for the next drain */
		if (!r && out->len > TALLY_CTL_MAX_REPLY)
			r = tally_seterr(-EMSGSIZE, "cannot drain: the profile takes %zu bytes, more than the %llu a reply may hold (read the epochs with 'tally report -i %s')",
					 out->len, TALLY_CTL_MAX_REPLY, d->db);
	}
	if (!r) {
		/* forgotten by the drain stream: the next drain starts after this one */
		struct strbuf gone = STRBUF_INIT;
		strbuf_addf(&gone, "%s/.%s.gone-%d", d->db, DRAIN_DIR, (int)getpid());
		if (rename(dr, gone.buf) == 0)
			tally_remove_tree(gone.buf);
		strbuf_release(&gone);
		d->drains++;
		d->draining = true;
		forget_epochs(d, true);
		d->db_bytes = db_bytes(d);
	}
	free(dr);
	return r;
}

static const char *op_name(enum tally_ctl_op op)
{
	static const char *const names[] = { "start", "stop", "clear", "startclr", "flush", "epoch", "status", "cpus", "drain" };
	return (size_t)op < ARRAY_SIZE(names) ? names[op] : "?";
}

/* Runs one request; the reply goes to out. */
static void execute(struct daemon *d, const char *line, uid_t uid, struct strbuf *out)
{
	struct tally_ctl_req q;
	struct strbuf body = STRBUF_INIT;
	int r = tally_ctl_parse_line(line, d->smp.ncpus, &q);
	if (r) {
		tally_ctl_frame(out, false, tally_errmsg(), strlen(tally_errmsg()));
		dlog(d, "ctl (uid %d): refused '%.60s': %s", (int)uid, line, tally_errmsg());
		return;
	}
	switch (q.op) {
	case TALLY_CTL_START:
		r = tally_collector_pause(d->col, false);
		if (!r)
			strbuf_addstr(&body, "collection on\n");
		break;
	case TALLY_CTL_STOP:
		r = tally_collector_pause(d->col, true);
		if (!r)
			strbuf_addstr(&body, "collection off (what is in memory stays: 'tally ctl flush' writes it)\n");
		break;
	case TALLY_CTL_CLEAR:
	case TALLY_CTL_STARTCLR: {
		uint64_t n = agg_samples(&d->agg);
		d->samples_total += n;
		d->lost_total += d->agg.lost;
		d->cleared += n;
		tally_agg_reset(&d->agg);
		d->delta_start = tally_now_wall();
		strbuf_addf(&body, "cleared %" PRIu64 " samples from memory\n", n);
		if (q.op == TALLY_CTL_STARTCLR) {
			r = tally_collector_pause(d->col, false);
			if (!r)
				strbuf_addstr(&body, "collection on\n");
		}
		break;
	}
	case TALLY_CTL_FLUSH:
		r = flush(d, "ctl", &body);
		if (!r)
			strbuf_addch(&body, '\n');
		break;
	case TALLY_CTL_EPOCH:
		r = new_epoch(d, &body);
		if (!r)
			strbuf_addch(&body, '\n');
		break;
	case TALLY_CTL_STATUS:
		status_text(d, &body);
		break;
	case TALLY_CTL_CPUS:
		r = do_cpus(d, &q, &body);
		break;
	case TALLY_CTL_DRAIN:
		r = do_drain(d, &body);
		break;
	}
	if (r) {
		const char *m = tally_errmsg();
		tally_ctl_frame(out, false, m, strlen(m));
		dlog(d, "ctl (uid %d): %s failed: %s", (int)uid, op_name(q.op), m);
	} else {
		tally_ctl_frame(out, true, body.buf ? body.buf : "", body.len);
		if (tally_verbose || (q.op != TALLY_CTL_STATUS))
			dlog(d, "ctl (uid %d): %s", (int)uid, op_name(q.op));
	}
	strbuf_release(&body);
	tally_ctl_req_release(&q);
}

static void client_close(struct daemon *d, struct client *c)
{
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	strbuf_release(&c->in);
	strbuf_release(&c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

static void client_reply(struct daemon *d, struct client *c, bool ok, const char *msg)
{
	if (msg)
		tally_ctl_frame(&c->out, ok, msg, strlen(msg));
	c->replying = true;
	c->out_off = 0;
	c->deadline = tally_now_mono() + d->ctl_timeout;
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
	epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void client_write(struct daemon *d, struct client *c)
{
	while (c->out_off < c->out.len) {
		ssize_t n = send(c->fd, c->out.buf + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* a slow reader: the rest when it has room, within its deadline */
		if (n <= 0) {
			client_close(d, c);
			return;
		}
		c->out_off += (size_t)n;
		c->deadline = tally_now_mono() + d->ctl_timeout;
	}
	client_close(d, c);
}

static void client_read(struct daemon *d, struct client *c)
{
	for (;;) {
		char buf[1024];
		ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			client_close(d, c);
			return;
		}
		if (n == 0) {
			/* the peer is done sending: what it sent is the request, if anything */
			if (!c->in.len) {
				client_close(d, c);
				return;
			}
			break;
		}
		strbuf_add(&c->in, buf, (size_t)n);
		if (memchr(c->in.buf, '\n', c->in.len))
			break;
		if (c->in.len >= TALLY_CTL_MAX_REQUEST) {
			char m[128];
			snprintf(m, sizeof(m), "request longer than %d bytes: %s", TALLY_CTL_MAX_REQUEST, TALLY_CTL_USAGE);
			dlog(d, "ctl (uid %d): refused a request of over %d bytes", (int)c->uid, TALLY_CTL_MAX_REQUEST);
			client_reply(d, c, false, m);
			return;
		}
	}
	char *nl = memchr(c->in.buf, '\n', c->in.len);
	size_t len = nl ? (size_t)(nl - c->in.buf) : c->in.len;
	if (len >= TALLY_CTL_MAX_REQUEST) {
		char m[128];
		snprintf(m, sizeof(m), "request longer than %d bytes: %s", TALLY_CTL_MAX_REQUEST, TALLY_CTL_USAGE);
		client_reply(d, c, false, m);
		return;
	}
	if (c->refused) {
		char m[128];
		snprintf(m, sizeof(m), "permission denied: this daemon belongs to uid %d", (int)geteuid());
		client_reply(d, c, false, m);
		return;
	}
	if (memchr(c->in.buf, '\0', len)) {
		/* NUL bytes: garbage, whatever follows them */
		client_reply(d, c, false, TALLY_CTL_USAGE);
		return;
	}
	if (len && c->in.buf[len - 1] == '\r')
		len--;
	char *line = xstrndup(c->in.buf, len);
	execute(d, line, c->uid, &c->out);
	free(line);
	client_reply(d, c, true, NULL);
}

static void accept_clients(struct daemon *d)
{
	for (;;) {
		int fd = accept4(d->listenfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		bool refused = false;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0)
			cr.uid = (uid_t)-1;
		if (cr.uid != geteuid()) {
			/* the socket's mode keeps others out; this is the second lock: whatever
			 * it asks is read (so the refusal reaches it) and refused */
			refused = true;
			dlog(d, "ctl: refused a connection from uid %d (not the owner)", (int)cr.uid);
		}
		struct client *c = NULL;
		for (int i = 0; i < MAX_CLIENTS && !c; i++)
			if (d->clients[i].fd < 0)
				c = &d->clients[i];
		if (!c) {
			const char *m = "busy: too many control connections at once (try again)";
			struct strbuf f = STRBUF_INIT;
			tally_ctl_frame(&f, false, m, strlen(m));
			if (send(fd, f.buf, f.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
				/* it will see the connection closed */
			}
			strbuf_release(&f);
			close(fd);
			continue;
		}
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->uid = cr.uid;
		c->refused = refused;
		c->deadline = tally_now_mono() + d->ctl_timeout;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			c->fd = -1;
		}
	}
}

static void handle_events(struct daemon *d)
{
	struct epoll_event evs[MAX_CLIENTS + 2];
	int n = epoll_wait(d->epfd, evs, (int)ARRAY_SIZE(evs), 0);
	for (int i = 0; i < n; i++) {
		void *p = evs[i].data.ptr;
		if (p == &d->listenfd) {
			accept_clients(d);
		} else if (p == &sig_pipe[0]) {
			char buf[64];
			while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
				;
		} else {
			struct client *c = p;
			if (c->fd < 0)
				continue;
			if (c->replying)
				client_write(d, c);
			else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				client_read(d, c);
		}
	}
	/* a client that hangs is dropped: the daemon never waits on one */
	double now = tally_now_mono();
	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct client *c = &d->clients[i];
		if (c->fd >= 0 && now > c->deadline) {
			dlog(d, "ctl (uid %d): dropped a connection idle for %.3g s", (int)c->uid, d->ctl_timeout);
			client_close(d, c);
		}
	}
}

/* ---- setup ---- */

static int make_socket(struct daemon *d)
{
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(d->sock) >= sizeof(sa.sun_path))
		return tally_seterr(-ENAMETOOLONG, "socket path '%s' is longer than %zu bytes (use a shorter --socket or --db)", d->sock,
				    sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, d->sock, strlen(d->sock));
	struct stat st;
	if (lstat(d->sock, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return tally_seterr(-EEXIST, "'%s' exists and is not a socket (remove it, or choose another --socket)", d->sock);
		/* a socket someone answers on belongs to another daemon; a dead one is ours to replace */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			return tally_seterr(-EADDRINUSE, "'%s' is the socket of another running daemon (choose another --socket)", d->sock);
		}
		if (probe >= 0)
			close(probe);
		unlink(d->sock);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return tally_seterr(-errno, "cannot create a socket: %s", strerror(errno));
	mode_t old = umask(0077);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(d->sock, 0600) < 0 || listen(fd, 16) < 0) {
		int e = errno;
		close(fd);
		return tally_seterr(-e, "cannot listen on '%s': %s", d->sock, strerror(e));
	}
	d->listenfd = fd;
	return 0;
}

/* The database directory: created, or an existing daemon database; private. */
static int prepare_db(struct daemon *d, const char *arg)
{
	struct stat st;
	if (!*arg)
		return tally_seterr(-EINVAL, "empty database path (name one with --db DIR)");
	if (stat(arg, &st) < 0) {
		if (errno != ENOENT)
			return tally_seterr(-errno, "cannot use '%s': %s", arg, strerror(errno));
		if (mkdir(arg, 0700) < 0)
			return tally_seterr(-errno, "cannot create '%s': %s", arg, strerror(errno));
		d->created_db = true;
	} else {
		if (!S_ISDIR(st.st_mode))
			return tally_seterr(-ENOTDIR, "'%s' exists and is not a directory (choose another --db)", arg);
		if (st.st_uid != geteuid())
			return tally_seterr(-EPERM, "'%s' belongs to uid %d, not to you (choose another --db)", arg, (int)st.st_uid);
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/session", arg);
		bool recorded = access(p.buf, F_OK) == 0;
		strbuf_reset(&p);
		strbuf_addf(&p, "%s/%s", arg, TALLY_DAEMON_MARKER);
		bool ours = access(p.buf, F_OK) == 0;
		strbuf_release(&p);
		if (recorded)
			return tally_seterr(-EEXIST, "'%s' is a database written by 'tally record' (choose another --db)", arg);
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
				return tally_seterr(-EEXIST, "'%s' is not empty and not a daemon database (choose another --db)", arg);
		}
	}
	/* other users may not read the profiles */
	if (chmod(arg, 0700) < 0)
		return tally_seterr(-errno, "cannot make '%s' private: %s", arg, strerror(errno));
	char *abs = realpath(arg, NULL);
	if (!abs)
		return tally_seterr(-errno, "cannot resolve '%s': %s", arg, strerror(errno));
	d->db = abs;
	return 0;
}

/* One daemon per database: the pid file is also the lock. */
static int take_lock(struct daemon *d)
{
	d->pidfile = in_db(d, "daemon.pid");
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
			return tally_seterr(-EBUSY, "database '%s' is in use by tally daemon pid %s (one daemon per database: stop it with 'kill %s', or use another --db)",
					    d->db, *buf ? buf : "?", *buf ? buf : "PID");
		return tally_seterr(-e, "cannot lock '%s': %s", d->pidfile, strerror(e));
	}
	d->lockfd = fd;
	return 0;
}

static void write_pid(struct daemon *d, pid_t pid)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);
	if (ftruncate(d->lockfd, 0) < 0 || pwrite(d->lockfd, buf, (size_t)n, 0) != n)
		dlog(d, "cannot write '%s': %s", d->pidfile, strerror(errno));
	if (d->pidfile_extra && tally_write_file_atomic(d->pidfile_extra, buf, (size_t)n))
		dlog(d, "%s", tally_errmsg());
}

static void on_record(void *ctx, const struct tally_rec *rec)
{
	tally_agg_record(ctx, rec);
}

/* Near the memory bound: flush early (memory goes back), or drop what cannot be written. */
static void watch_memory(struct daemon *d)
{
	double now = tally_now_mono();
	uint64_t used = memory_used(d);
	if (used < d->max_memory / 4 * 3)
		return;
	if (agg_samples(&d->agg) && now - d->last_early >= 1.0) {
		d->last_early = now;
		if (!d->write_error && flush(d, "memory", NULL) == 0) {
			d->early_flushes++;
			dlog(d, "flushed early: memory reached %.0f%% of --max-memory", 100.0 * (double)used / (double)d->max_memory);
		} else if (used >= d->max_memory / 10 * 9) {
			uint64_t n = agg_samples(&d->agg);
			d->samples_total += n;
			d->lost_total += d->agg.lost;
			d->dropped += n;
			tally_agg_reset(&d->agg);
			d->delta_start = tally_now_wall();
			dlog(d, "dropped %" PRIu64 " samples: writing is stopped and memory is at --max-memory", n);
		}
		tally_agg_release_unwind(&d->agg);
		used = memory_used(d);
	}
	if (used >= d->max_memory && !d->memory_warned) {
		char a[32], b[32];
		tally_format_size(used, a, sizeof(a));
		tally_format_size(d->max_memory, b, sizeof(b));
		dlog(d, "memory is %s even after a flush, above --max-memory %s: the processes it follows need more (raise the limit)",
		     a, b);
		d->memory_warned = true;
	}
}

static void cleanup(struct daemon *d)
{
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (d->clients[i].fd >= 0)
			client_close(d, &d->clients[i]);
	if (d->listenfd >= 0) {
		close(d->listenfd);
		unlink(d->sock);
	}
	if (d->epfd >= 0)
		close(d->epfd);
	tally_collector_free(d->col);
	tally_agg_release(&d->agg);
	tally_ksym_cache_release(&d->kc);
	if (d->lockfd >= 0) {
		if (ftruncate(d->lockfd, 0) < 0) {
			/* a stale pid in an unlocked file misleads nobody: the lock decides */
		}
		close(d->lockfd);
	}
	if (d->pidfile_extra)
		unlink(d->pidfile_extra);
	if (d->log && d->log != stderr)
		fclose(d->log);
	if (d->created_db && !d->started && d->db)
		tally_remove_tree(d->db); /* a start that failed leaves nothing behind */
	tally_sampling_release(&d->smp);
	free(d->db);
	free(d->sock);
	free(d->pidfile);
	free(d->pidfile_extra);
	free(d->logpath);
	free(d->epoch);
	free(d->write_error);
	for (size_t i = 0; i < d->nmy_epochs; i++)
		free(d->my_epochs[i]);
	free(d->my_epochs);
}

int cmd_daemon(int argc, char **argv)
{
	struct daemon dd, *d = &dd;
	memset(d, 0, sizeof(*d));
	d->lockfd = d->listenfd = d->epfd = -1;
	for (int i = 0; i < MAX_CLIENTS; i++)
		d->clients[i].fd = -1;
	d->flush_interval = 60;
	d->ctl_timeout = 5;
	d->max_memory = 128ull << 20;
	d->min_free = 64ull << 20;
	tally_sampling_init(&d->smp);
	int ret = 1;
	struct dopts o = { .db = "tally.db", .flush_interval = d->flush_interval, .ctl_timeout = d->ctl_timeout,
			   .max_memory = d->max_memory, .min_free = d->min_free };
	void *ctx[] = { &o, &d->smp };
	int first;
	ret = tally_cmd_options(&daemon_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 1;
	if (first < argc) {
		ret = tally_usage_error("daemon", "unexpected argument '%s' (the daemon profiles the whole system; -C chooses CPUs)",
					argv[first]);
		goto out;
	}
	const char *db_arg = o.db, *sock_arg = o.sock;
	d->pidfile_extra = o.pidfile ? xstrdup(o.pidfile) : NULL;
	d->foreground = o.foreground;
	d->flush_interval = o.flush_interval;
	d->epoch_every = o.epoch_every;
	d->keep = o.keep;
	d->ctl_timeout = o.ctl_timeout;
	d->max_memory = o.max_memory;
	d->max_db_size = o.max_db_size;
	d->min_free = o.min_free;
	{
		int r = tally_sampling_resolve(&d->smp);
		if (r) {
			tally_error("%s", tally_errmsg());
			ret = r == -EINVAL ? 2 : 1;
			goto out;
		}
	}
	if (prepare_db(d, db_arg) || take_lock(d)) {
		tally_error("%s", tally_errmsg());
		goto out;
	}
	if (sock_arg) {
		d->sock = xstrdup(sock_arg);
	} else {
		d->sock = in_db(d, TALLY_CTL_SOCKET_NAME);
	}
	if (*d->sock != '/') {
		char *cwd = getcwd(NULL, 0);
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s/%s", cwd ? cwd : ".", d->sock);
		free(cwd);
		free(d->sock);
		d->sock = strbuf_detach(&sb);
	}
	/* the marker that makes this directory a daemon database */
	{
		char *m = in_db(d, TALLY_DAEMON_MARKER);
		struct stat st;
		if (stat(m, &st) < 0 &&
		    tally_write_file_atomic(m, "format-version: 1\nlayout: epochs\n", strlen("format-version: 1\nlayout: epochs\n"))) {
			tally_error("%s", tally_errmsg());
			free(m);
			goto out;
		}
		free(m);
	}
	d->log = stderr;
	d->logpath = in_db(d, "daemon.log");
	recover(d);
	{
		/* an earlier daemon's clients drained: carry on with their pile */
		char *dr = in_db(d, DRAIN_DIR);
		struct stat st;
		d->draining = stat(dr, &st) == 0;
		free(dr);
	}
	if (make_socket(d)) {
		tally_error("%s", tally_errmsg());
		goto out;
	}
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0 || (d->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		tally_error("cannot set up the event loop: %s", strerror(errno));
		goto out;
	}
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &d->listenfd };
		epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->listenfd, &ev);
		struct epoll_event sv = { .events = EPOLLIN, .data.ptr = &sig_pipe[0] };
		epoll_ctl(d->epfd, EPOLL_CTL_ADD, sig_pipe[0], &sv);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct strbuf cpus = STRBUF_INIT;
	tally_cpus_string(d->smp.cpus, d->smp.ncpus, &cpus);
	/* the rings of perf events are not inherited by a fork: detach first, and
	 * have the daemon say over a pipe whether it could start */
	int ready = -1;
	if (!d->foreground) {
		FILE *lf = fopen(d->logpath, "ae");
		int pp[2];
		if (!lf || pipe2(pp, O_CLOEXEC) < 0) {
			tally_error("cannot open the log '%s': %s", d->logpath, strerror(errno));
			if (lf)
				fclose(lf);
			strbuf_release(&cpus);
			goto out;
		}
		fflush(stdout);
		fflush(stderr);
		pid_t pid = fork();
		if (pid < 0) {
			tally_error("cannot fork: %s", strerror(errno));
			fclose(lf);
			strbuf_release(&cpus);
			goto out;
		}
		if (pid > 0) {
			close(pp[1]);
			struct strbuf msg = STRBUF_INIT;
			char buf[512];
			ssize_t n;
			while ((n = read(pp[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
				if (n > 0)
					strbuf_add(&msg, buf, (size_t)n);
			int code = 1;
			char *save = NULL;
			for (char *l = strtok_r(msg.buf ? msg.buf : (char *)"", "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
				if (!strcmp(l, "OK")) {
					code = 0;
					fprintf(stderr, "tally: daemon pid %d samples CPUs %s into '%s' (control: tally ctl --socket %s; log: %s)\n",
						(int)pid, cpus.buf, d->db, d->sock, d->logpath);
				} else if (l[0] == 'W') {
					tally_warn("%s", l + 2);
				} else {
					tally_error("%s", l + 2);
				}
			}
			if (code && !msg.len)
				tally_error("the daemon (pid %d) died while starting (see '%s')", (int)pid, d->logpath);
			_exit(code);
		}
		close(pp[0]);
		ready = pp[1];
		setsid();
		d->log = lf;
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			close(null);
		}
		if (chdir("/") < 0) {
			/* paths are absolute: the working directory does not matter */
		}
	}
	write_pid(d, getpid());
	struct tally_collect_opts co;
	memset(&co, 0, sizeof(co));
	tally_sampling_collect_opts(&d->smp, &co);
	co.target = TALLY_TARGET_SYSTEM;
	co.sideband_dummy = true;
	co.wake_fd = d->epfd;
	if (tally_collector_open(&d->col, &co) || tally_collector_enable(d->col)) {
		if (ready >= 0) {
			dprintf(ready, "E %s\n", tally_errmsg());
			dlog(d, "cannot start: %s", tally_errmsg());
		} else {
			tally_error("%s", tally_errmsg());
		}
		strbuf_release(&cpus);
		goto out;
	}
	tally_agg_init(&d->agg, d->smp.nev, d->smp.per_pid, true);
	d->agg.dwarf = d->smp.stack_user != 0;
	d->wall_start = tally_now_wall();
	d->mono_start = tally_now_mono();
	d->db_bytes = db_bytes(d);
	if (begin_epoch(d, d->wall_start)) {
		if (ready >= 0)
			dprintf(ready, "W %s (collecting all the same; writing is retried every flush)\n", tally_errmsg());
		else
			tally_warn("%s (collecting all the same; writing is retried every flush)", tally_errmsg());
	}
	prune(d, d->wall_start);
	d->started = true;
	if (ready >= 0) {
		dprintf(ready, "OK\n");
		close(ready);
	}
	dlog(d, "started: events %s, CPUs %s, database %s, socket %s", d->smp.evnames.buf, cpus.buf, d->db, d->sock);
	strbuf_release(&cpus);
	d->next_flush = tally_now_mono() + d->flush_interval;
	d->next_epoch = tally_now_mono() + d->epoch_every;
	const int tick_ms = d->smp.randomize ? 50 : 100;
	while (!got_term) {
		int n = tally_collector_poll(d->col, tick_ms, on_record, &d->agg);
		if (n < 0)
			dlog(d, "%s", tally_errmsg());
		handle_events(d);
		tally_agg_identify(&d->agg);
		tally_agg_collect_dead(&d->agg);
		if (got_hup) {
			got_hup = 0;
			if (!d->foreground) {
				FILE *lf = fopen(d->logpath, "ae");
				if (lf) {
					fclose(d->log);
					d->log = lf;
				}
			}
			flush(d, "SIGHUP", NULL);
		}
		watch_memory(d);
		double now = tally_now_mono();
		if (now >= d->next_flush)
			flush(d, "interval", NULL);
		if (d->epoch_every > 0 && now >= d->next_epoch) {
			if (new_epoch(d, NULL))
				d->next_epoch = now + d->epoch_every;
		}
	}
	tally_collector_disable(d->col);
	tally_collector_poll(d->col, 0, on_record, &d->agg);
	tally_agg_identify(&d->agg);
	{
		struct strbuf m = STRBUF_INIT;
		if (flush(d, "exit", &m))
			dlog(d, "stopping with %" PRIu64 " samples unwritten: %s", agg_samples(&d->agg), d->write_error);
		else
			dlog(d, "stopped (%s)", m.buf);
		strbuf_release(&m);
	}
	ret = 0;
out:
	cleanup(d);
	if (sig_pipe[0] >= 0) {
		close(sig_pipe[0]);
		close(sig_pipe[1]);
		sig_pipe[0] = sig_pipe[1] = -1;
	}
	return ret;
}
