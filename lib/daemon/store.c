/* The daemon's database side (docs/daemon.md): flushing the aggregate into
 * the current epoch (merged with what is there, within --max-db-size and
 * --min-free), epochs begun and pruned, the drain stream, and the recovery of
 * what a killed daemon left behind. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/daemon/internal.h"
#include "tally/ctl.h"
#include "tally/epoch.h"
#include "tally/offcpu.h"

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
uint64_t dmn_db_bytes(const struct tally_daemon *d)
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

char *dmn_path(const struct tally_daemon *d, const char *name)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s", d->db, name);
	return strbuf_detach(&sb);
}

/* The session of a database made from a (the daemon's aggregate, or an empty
 * one: its counters are summed when epochs merge). */
void dmn_session(struct tally_daemon *d, const struct tally_agg *a, struct tally_meta *s,
		 double now)
{
	memset(s, 0, sizeof(*s));
	tally_sampling_session(d->smp, d->col, a, "system", NULL, s);
	if (d->smp->randomize && d->col) {
		/* the collector counts from its start: what reached the samples of a
		 * (those since the last flush; none for an empty aggregate), so that
		 * the flushes of an epoch add up (docs/format.md, "Merging") */
		struct strbuf rs = STRBUF_INIT;
		for (int e = 0; e < d->smp->nev; e++) {
			uint64_t reached = 0, total = 0;
			if (a == d->agg) {
				tally_collector_random_samples(d->col, e, &reached, &total);
				reached -= reached >= d->rs_base[0][e] ? d->rs_base[0][e] : reached;
				total -= total >= d->rs_base[1][e] ? d->rs_base[1][e] : total;
			}
			strbuf_addf(&rs, "%s%" PRIu64 "/%" PRIu64, e ? "," : "", reached, total);
		}
		tally_meta_set(s, "randomized-samples", "%s", rs.buf ? rs.buf : "");
		strbuf_release(&rs);
	}
	struct strbuf rates = STRBUF_INIT;
	bool differ = false;
	for (int c = 0; c < d->smp->ncpus; c++) {
		struct tally_cpu_state st;
		dmn_cpu_state(d, c, &st);
		if (!st.opened)
			continue;
		if (!st.on || (st.freq && st.freq != d->smp->freq) ||
		    (!st.freq && st.period != d->smp->period))
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
/* The database's size without old bytes of it (never below 0). */
static uint64_t db_bytes_less(const struct tally_daemon *d, uint64_t old)
{
	return d->db_bytes - (old < d->db_bytes ? old : d->db_bytes);
}

static int room_for(struct tally_daemon *d, const char *what, uint64_t bytes, uint64_t old,
		    bool after)
{
	if (d->max_db_size && db_bytes_less(d, old) + bytes > d->max_db_size) {
		char a[32], b[32];
		tally_format_size(db_bytes_less(d, old) + bytes, a, sizeof(a));
		tally_format_size(d->max_db_size, b, sizeof(b));
		return tally_seterr(
			-EFBIG,
			"writing %s would make '%s' %s, over --max-db-size %s (delete epochs, or raise the limit)",
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
			return tally_seterr(
				-ENOSPC,
				"only %s free on the filesystem of '%s': writing %s (%s) would leave less than --min-free %s (free some space)",
				a, d->db, what, b, c);
		}
	}
	return 0;
}

struct room_check {
	struct tally_daemon *d;
	const char *what;
	uint64_t old;
	uint64_t bytes; /* what the new copy takes, once checked (UINT64_MAX before) */
};

/* tally_db_save's check: what the new copy really takes on disk. */
static int check_room(void *ctx, const char *staging)
{
	struct room_check *rc = ctx;
	rc->bytes = tree_bytes(staging);
	return room_for(rc->d, rc->what, rc->bytes, rc->old, true);
}

/* Merges delta (delta_bytes on disk) into the database directory at path
 * (created when missing), and counts the change in d->db_bytes: the whole
 * directory is not walked again for each flush (with hourly epochs kept a
 * week, thousands of files). With spare (the current epoch's), the copy the
 * save swaps out is kept for the next flush to write over (lib/db,
 * struct tally_db_spare), as long as --max-db-size leaves room for it. */
static int merge_into(struct tally_daemon *d, const char *path, const char *what,
		      const struct tally_db *delta, size_t delta_bytes, bool spare)
{
	struct tally_db old, merged;
	struct stat st;
	bool have = stat(path, &st) == 0;
	int r;
	if (have) {
		r = tally_db_open_dir(&old, path);
		if (r) {
			/* never written by a daemon that lived: it cannot happen, but do not lose
			 * new data over it */
			dmn_log(d, "cannot read %s '%s' (%s): starting it again", what, path,
				tally_errmsg());
			struct strbuf bad = STRBUF_INIT;
			strbuf_addf(&bad, "%s.damaged-%ld", path, (long)time(NULL));
			rename(path, bad.buf);
			strbuf_release(&bad);
			have = false;
		}
	}
	struct tally_db_builder *b = tally_db_builder_new(delta->nevents, delta->events,
							  delta->per_pid, delta->has_stacks);
	/* without --per-pid an epoch lists the programs that had samples, not every process */
	if (!delta->per_pid)
		tally_db_builder_tasks_by_program(b);
	if (have)
		tally_db_builder_add(b, &old);
	tally_db_builder_add(b, delta);
	tally_db_builder_finish(b, &merged);
	/* the merge is at most the old files plus the new ones: enough to see whether it
	 * can be written at all; what it takes is checked before it is published */
	uint64_t old_bytes = have ? tree_bytes(path) : 0;
	/* with a spare, the copy written over is the spare and the one swapped out
	 * stays: kept only while the limit leaves room for both copies */
	uint64_t spare_bytes = spare && d->spare.path ? d->spare_bytes : 0;
	bool keep = spare && have &&
		    (!d->max_db_size ||
		     db_bytes_less(d, spare_bytes) + old_bytes + delta_bytes <= d->max_db_size);
	if (spare && !keep && d->spare.path) {
		tally_db_spare_drop(&d->spare);
		d->db_bytes = db_bytes_less(d, spare_bytes);
		spare_bytes = 0;
	}
	uint64_t replaced = keep ? spare_bytes : old_bytes;
	struct room_check rc = { d, what, replaced, UINT64_MAX };
	r = room_for(d, what, old_bytes + delta_bytes, replaced, false);
	bool saved = !r;
	if (saved)
		r = tally_db_save_checked(&merged, path, true, check_room, &rc,
					  keep ? &d->spare : NULL);
	if (keep && saved) {
		/* the spare was written over (or, on an error after it was taken,
		 * removed; an error before leaves it as it was); the old copy is the
		 * spare now, unless it could not be kept */
		if (r) {
			if (!d->spare.path) {
				d->db_bytes = db_bytes_less(d, spare_bytes);
				d->spare_bytes = 0;
			}
		} else {
			if (!d->spare.path)
				replaced += old_bytes;
			d->spare_bytes = d->spare.path ? old_bytes : 0;
		}
	}
	if (!r && rc.bytes != UINT64_MAX)
		d->db_bytes = db_bytes_less(d, replaced) + rc.bytes;
	else if (!r)
		d->db_bytes = dmn_db_bytes(d);
	tally_db_release(&merged);
	if (have)
		tally_db_release(&old);
	return r;
}

void dmn_set_write_error(struct tally_daemon *d, const char *msg)
{
	if (!msg) {
		if (d->write_error)
			dmn_log(d, "writing resumed");
		free(d->write_error);
		d->write_error = NULL;
		return;
	}
	if (!d->write_error || strcmp(d->write_error, msg))
		dmn_log(d, "writing stopped, collection goes on: %s", msg);
	free(d->write_error);
	d->write_error = xstrdup(msg);
}

/* The epochs this daemon began, for its first drain (not needed once it drains). */
static void remember_epoch(struct tally_daemon *d, const char *name)
{
	if (d->draining)
		return;
	GROW(d->my_epochs, d->amy_epochs, d->nmy_epochs + 1);
	d->my_epochs[d->nmy_epochs++] = xstrdup(name);
}

static void forget_epochs(struct tally_daemon *d, bool all)
{
	size_t j = 0;
	for (size_t i = 0; i < d->nmy_epochs; i++) {
		char *p = dmn_path(d, d->my_epochs[i]);
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
void dmn_prune(struct tally_daemon *d, double now)
{
	if (d->keep <= 0)
		return;
	int k = tally_epochs_prune(d->db, d->keep, now, TALLY_DAEMON_KEEP_NEWEST, d->epoch);
	if (k > 0) {
		dmn_log(d, "deleted %d epoch%s older than --keep", k, k == 1 ? "" : "s");
		d->db_bytes = dmn_db_bytes(d);
		forget_epochs(d, false);
	}
}

/* Off-CPU waits (bpf, -g) that kept one frame since the last flush that said
 * so: in the log, as record warns of them (the epoch's session counts them). */
static void log_nostack(struct tally_daemon *d)
{
	struct tally_offcpu_stats os;
	if (!d->col || !tally_collector_offcpu_stats(d->col, &os) ||
	    os.nostack <= d->nostack_logged)
		return;
	uint64_t k = os.nostack - d->nostack_logged;
	dmn_log(d,
		"%" PRIu64
		" off-CPU wait%s kept one frame since the last flush: the kernel's stack map had no room "
		"for %s stack (off-cpu-no-stack in the session; --off-cpu-mechanism tracepoint keeps every stack)",
		k, k == 1 ? "" : "s", k == 1 ? "its" : "their");
	d->nostack_logged = os.nostack;
}

/* Writes what is in memory into the current epoch (and the drain's pile).
 * 0 (msg says what), or -errno: then writing stops until a flush succeeds. */
int tally_daemon_flush(struct tally_daemon *d, const char *why, struct strbuf *msg)
{
	dmn_sync(d);
	double t0 = tally_now_mono(), now = tally_now_wall();
	tally_agg_identify(d->agg);
	uint64_t n = dmn_agg_samples(d);
	if (!n && !d->agg->lost && !d->agg->throttled) {
		if (msg)
			strbuf_addf(msg, "nothing to flush into epoch %s", d->epoch);
		d->next_flush = t0 + d->flush_interval;
		/* time without samples (collection stopped) counts for nothing */
		d->delta_start = now;
		return 0;
	}
	tally_agg_snapshot_jit(d->agg);
	tally_agg_tasks(d->agg);
	for (size_t i = 0; i < d->agg->njit_warnings; i++)
		dmn_log(d, "%s", d->agg->jit_warnings[i]);
	struct tally_meta s;
	dmn_session(d, d->agg, &s, now);
	for (int e = 0; d->col && e < d->smp->nev; e++) /* the next flush counts from here */
		tally_collector_random_samples(d->col, e, &d->rs_base[0][e], &d->rs_base[1][e]);
	struct tally_db delta;
	int r = tally_db_from_agg(&delta, d->agg, &s, &d->kc);
	tally_meta_release(&s);
	if (r)
		goto out;
	char *ep = dmn_path(d, d->epoch), *dr = dmn_path(d, DRAIN_DIR);
	struct strbuf what = STRBUF_INIT;
	strbuf_addf(&what, "epoch %s", d->epoch);
	size_t delta_bytes = tally_db_bytes(&delta, NULL);
	r = merge_into(d, ep, what.buf, &delta, delta_bytes, true);
	if (!r && d->draining) {
		if (merge_into(d, dr, "the drain's samples", &delta, delta_bytes, false))
			dmn_log(d, "the drain stream misses %" PRIu64 " sample%s: %s", n,
				n == 1 ? "" : "s", tally_errmsg());
	}
	strbuf_release(&what);
	free(ep);
	free(dr);
	tally_db_release(&delta);
out:
	d->next_flush = tally_now_mono() + d->flush_interval;
	if (r) {
		dmn_set_write_error(d, tally_errmsg());
		return r;
	}
	dmn_set_write_error(d, NULL);
	d->samples_total += n;
	d->lost_total += d->agg->lost;
	tally_pusher_notify(d->pusher, n);
	tally_agg_reset(d->agg);
	/* the merge's memory goes back to the system, not only to malloc */
	malloc_trim(0);
	d->delta_start = now;
	d->flushes++;
	/* now and then the whole directory, as du: what else changed it (a file
	 * removed by hand) is counted again */
	if (!(d->flushes % 16))
		d->db_bytes = dmn_db_bytes(d);
	d->last_flush_ms = (tally_now_mono() - t0) * 1000;
	d->last_flush_wall = now;
	if (msg)
		strbuf_addf(msg, "flushed %" PRIu64 " sample%s into epoch %s (%.0f ms)", n,
			    n == 1 ? "" : "s", d->epoch, d->last_flush_ms);
	if (d->verbose)
		dmn_log(d, "flush (%s): %" PRIu64 " sample%s into epoch %s in %.0f ms", why, n,
			n == 1 ? "" : "s", d->epoch, d->last_flush_ms);
	log_nostack(d);
	dmn_prune(d, now);
	return 0;
}

/* An empty epoch beginning at now: written at once, so readers see it. */
int dmn_begin_epoch(struct tally_daemon *d, double now)
{
	char *name = tally_epoch_new_name(d->db, now);
	char *path = dmn_path(d, name);
	char *old = d->epoch;
	double old_start = d->delta_start;
	d->epoch = name;
	d->delta_start = now;
	struct tally_agg empty;
	tally_agg_init(&empty, d->smp->nev, d->smp->per_pid, true);
	struct tally_meta s;
	dmn_session(d, &empty, &s, now);
	struct tally_db db;
	int r = tally_db_from_agg(&db, &empty, &s, NULL);
	tally_meta_release(&s);
	tally_agg_release(&empty);
	struct room_check rc = { d, "a new epoch", 0, UINT64_MAX };
	if (!r)
		r = tally_db_save_checked(&db, path, false, check_room, &rc, NULL);
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
		dmn_set_write_error(d, tally_errmsg());
		return r;
	}
	free(old);
	remember_epoch(d, name);
	d->epoch_start = now;
	d->db_bytes = dmn_db_bytes(d);
	d->next_epoch = tally_now_mono() + d->epoch_every;
	dmn_log(d, "epoch %s begins", name);
	dmn_prune(d, now);
	return 0;
}

int tally_daemon_new_epoch(struct tally_daemon *d, struct strbuf *msg)
{
	struct strbuf f = STRBUF_INIT;
	int r = tally_daemon_flush(d, "epoch", &f);
	if (r) {
		strbuf_release(&f);
		return r;
	}
	char *prev = xstrdup(d->epoch);
	/* what arrived while the old epoch was written belongs to the new one */
	r = dmn_begin_epoch(d, d->delta_start);
	if (r)
		dmn_set_write_error(d, tally_errmsg());
	else if (msg)
		strbuf_addf(msg, "epoch %s begins (%s; epoch %s is complete)", d->epoch, f.buf,
			    prev);
	free(prev);
	strbuf_release(&f);
	return r;
}

/* Removes what a killed daemon may have left: staging copies and half-done
 * swaps (lib/db's recovery, which knows its own temporaries' names). */
void dmn_recover(struct tally_daemon *d)
{
	struct tally_db_recovery rv;
	tally_db_recover(d->db, &rv);
	if (rv.restored)
		dmn_log(d, "restored %zu database%s from writes that were cut short", rv.restored,
			      rv.restored == 1 ? "" : "s");
}

int tally_daemon_drain(struct tally_daemon *d, struct strbuf *out)
{
	int r = tally_daemon_flush(d, "drain", NULL);
	if (r)
		return tally_seterr(r, "cannot drain: writing is stopped (%s)",
				    d->write_error ? d->write_error : tally_errmsg());
	char *dr = dmn_path(d, DRAIN_DIR);
	struct tally_db db;
	struct stat st;
	if (!d->draining) {
		/* the first drain: everything this daemon wrote, from its epochs (those
		 * --keep has not deleted); from now on a pile of flushes is kept */
		const char *names[TALLY_SAMPLING_MAX_EVENTS];
		for (int e = 0; e < d->smp->nev; e++)
			names[e] = d->smp->evs[e]->name;
		struct tally_db_builder *b = tally_db_builder_new(
			d->smp->nev, (char *const *)names, d->smp->per_pid, d->smp->callchain);
		r = 0;
		for (size_t i = 0; i < d->nmy_epochs && !r; i++) {
			char *p = dmn_path(d, d->my_epochs[i]);
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
		tally_agg_init(&empty, d->smp->nev, d->smp->per_pid, true);
		struct tally_meta s;
		double now = tally_now_wall();
		dmn_session(d, &empty, &s, now);
		char ts[32];
		tally_format_utc(now, ts, sizeof(ts));
		tally_meta_set(&s, "start-time", "%s", ts);
		tally_meta_set(&s, "duration", "0.000");
		r = tally_db_from_agg(&db, &empty, &s, NULL);
		tally_meta_release(&s);
		tally_agg_release(&empty);
	}
	if (!r) {
		tally_meta_set(&db.session, "target", "system (drained from tally daemon pid %d)",
			       (int)getpid());
		r = tally_db_bundle(&db, out);
		tally_db_release(&db);
		/* more than a client takes: refused, and kept for the next drain */
		if (!r && out->len > TALLY_CTL_MAX_REPLY)
			r = tally_seterr(
				-EMSGSIZE,
				"cannot drain: the profile takes %zu bytes, more than the %llu a reply may hold (read the epochs with 'tally report -i %s')",
				out->len, TALLY_CTL_MAX_REPLY, d->db);
	}
	if (!r) {
		/* forgotten by the drain stream: the next drain starts after this one */
		tally_db_remove(dr);
		d->drains++;
		d->draining = true;
		forget_epochs(d, true);
		d->db_bytes = dmn_db_bytes(d);
	}
	free(dr);
	return r;
}

