/* The daemon's pusher (docs/push.md): a thread of its own that sends what
 * each flush added to the epochs, from the backlog on disk (the epochs and
 * the cursor, lib/push/cursor.c), so that nothing of a push (building the
 * profile, symbols, the network) ever holds up sampling or a flush. The
 * daemon's thread only tells it of a flush, asks for its status and takes
 * its log lines, each under a mutex held for a copy.
 *
 * When the server fails (no answer, a timeout, 5xx, 429, ...) the pusher
 * waits before it tries again: 1 s, doubling up to --push-retry-max, each
 * wait drawn between half and all of it (jitter, so that a fleet that lost
 * its server does not come back at once), or the Retry-After the server
 * asked for. Flushes meanwhile only add to the backlog. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tally/push.h"
#include "tally/symbols.h"
#include "tally/view.h"

#define RETRY_MIN 1.0
#define RETRY_MAX_DEFAULT 300.0

struct tally_pusher {
	char *dir;
	struct tally_push_opts o;
	char *endpoint;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu: what the daemon's thread asks */
	bool stop;
	double grace_end; /* monotonic: the last pass gives up then */
	bool work;        /* a flush (or the start) left something to look at */
	/* under mu: what it says */
	struct strbuf logs;
	double last_ok;         /* wall: the last push taken (0: none) */
	uint64_t last_samples;  /* ... its samples */
	size_t last_bytes, last_profile_bytes;
	uint64_t pushes, samples, bytes; /* taken, since start */
	char *error;            /* the last failure, NULL after a success */
	double error_at;        /* wall */
	unsigned failures;      /* in a row */
	double next_try;        /* monotonic: the back-off's end (0: none) */
	struct tally_push_backlog bl;
	uint64_t flushed;       /* samples flushes told of since the last scan */
	uint64_t flushes;       /* flushes told of */
	unsigned seed;
	/* the pusher's own: the request that failed, sent again as it is while
	 * no flush has changed what is to send (not made anew at every try) */
	struct tally_push_payload again;
	bool have_again;
	uint64_t again_flushes;
	char *again_epoch;
	struct tally_push_cursor *cursor; /* the thread's, once started */
};

static void say(struct tally_pusher *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct tally_pusher *p, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&p->mu);
	strbuf_addstr(&p->logs, "push: ");
	va_start(ap, fmt);
	strbuf_vaddf(&p->logs, fmt, ap);
	va_end(ap);
	strbuf_addch(&p->logs, '\n');
	pthread_mutex_unlock(&p->mu);
}

/* The wait after n failures in a row: 1 s doubling to the cap, jittered. */
static double backoff(struct tally_pusher *p, unsigned n, double retry_after)
{
	double cap = p->o.retry_max > 0 ? p->o.retry_max : RETRY_MAX_DEFAULT;
	double w = RETRY_MIN;
	for (unsigned i = 1; i < n && w < cap; i++)
		w *= 2;
	if (w > cap)
		w = cap;
	w *= 0.5 + 0.5 * ((double)rand_r(&p->seed) / RAND_MAX);
	if (retry_after > w)
		w = retry_after < cap ? retry_after : cap;
	return w;
}

/* Sends pl, within the daemon's grace once it is stopping. */
static int send(struct tally_pusher *p, const struct tally_push_payload *pl, double *retry_after)
{
	struct tally_push_opts o = p->o;
	pthread_mutex_lock(&p->mu);
	if (p->stop) {
		double left = p->grace_end - tally_now_mono();
		double t = o.timeout > 0 ? o.timeout : 30;
		o.timeout = left < t ? (left > 0.1 ? left : 0.1) : t;
	}
	pthread_mutex_unlock(&p->mu);
	return tally_push_send(&o, pl, retry_after);
}

/* One epoch's delta made into a request: weighed, symbolized. 0, or -EBADMSG
 * (it cannot be made: refused for good, as the server would). */
static int build(struct tally_pusher *p, struct tally_db *db, double from, double until,
		 struct tally_push_payload *pl)
{
	tally_view_weigh(db, false);
	int *events = xcalloc((size_t)db->nevents + 1, sizeof(int));
	for (int e = 0; e < db->nevents; e++)
		events[e] = e;
	struct tally_resolver *res = NULL;
	/* functions, not their inlined frames: these need each image's DWARF
	 * read again at every push, nine tenths of a push's CPU on a whole
	 * machine's epoch (docs/push.md); 'tally push' of an epoch has them */
	struct tally_resolver_opts ro = { .no_inline = true };
	int r = tally_resolver_new(&res, db, &ro);
	if (!r) {
		struct tally_export x = { .db = db,
					  .res = res,
					  .input = db->path,
					  .events = events,
					  .nevents = db->nevents };
		r = tally_push_payload_build(&p->o, &x, from, until, pl);
	}
	if (r) {
		char keep[512];
		snprintf(keep, sizeof(keep), "%s", tally_errmsg());
		r = tally_seterr(-EBADMSG, "cannot make the profile to push: %s", keep);
	}
	tally_resolver_free(res);
	free(events);
	return r;
}

static void set_error(struct tally_pusher *p, const char *msg, double wait)
{
	pthread_mutex_lock(&p->mu);
	bool same = p->error && !strcmp(p->error, msg);
	free(p->error);
	p->error = xstrdup(msg);
	p->error_at = tally_now_wall();
	p->next_try = wait > 0 ? tally_now_mono() + wait : 0;
	if (wait > 0)
		p->work = true; /* tried again when the wait is over */
	unsigned n = p->failures;
	pthread_mutex_unlock(&p->mu);
	/* said once, and again every tenth time in a row */
	if (!same || n % 10 == 0)
		say(p, "%s (try %u; next in %.1f s; the backlog waits on disk)", msg, n, wait);
}

/* Sends epoch by epoch until nothing is left or the server fails. */
static void pass(struct tally_pusher *p, struct tally_push_cursor *c)
{
	struct tally_push_backlog bl;
	if (tally_push_cursor_scan(c, &bl) == 0) {
		if (bl.dropped_now) {
			say(p,
			    "dropped %" PRIu64
			    " sample%s never sent: epoch%s %s deleted (--keep) before the server took them",
			    bl.dropped_now, bl.dropped_now == 1 ? "" : "s",
			    strchr(bl.dropped_epochs, ',') ? "s" : "", bl.dropped_epochs);
			tally_push_cursor_save(c);
		}
		free(bl.dropped_epochs);
		bl.dropped_epochs = NULL;
		pthread_mutex_lock(&p->mu);
		p->bl = bl;
		p->flushed = 0;
		pthread_mutex_unlock(&p->mu);
	}
	for (;;) {
		pthread_mutex_lock(&p->mu);
		bool late = p->stop && tally_now_mono() >= p->grace_end;
		pthread_mutex_unlock(&p->mu);
		if (late)
			break;
		pthread_mutex_lock(&p->mu);
		uint64_t flushes = p->flushes;
		pthread_mutex_unlock(&p->mu);
		if (p->have_again && p->again_flushes != flushes) {
			/* a flush added more since: made anew, bigger */
			tally_push_payload_release(&p->again);
			free(p->again_epoch);
			p->again_epoch = NULL;
			p->have_again = false;
		}
		int r;
		if (!p->have_again) {
			struct tally_db db;
			const char *epoch;
			double from, until;
			r = tally_push_cursor_next(c, &db, &epoch, &from, &until);
			if (r < 0) {
				char keep[512];
				snprintf(keep, sizeof(keep), "cannot read the backlog: %s",
					 tally_errmsg());
				pthread_mutex_lock(&p->mu);
				unsigned n = ++p->failures;
				pthread_mutex_unlock(&p->mu);
				set_error(p, keep, backoff(p, n, 0));
				return;
			}
			if (r == 0)
				break;
			p->again_epoch = xstrdup(epoch);
			r = build(p, &db, from, until, &p->again);
			tally_db_release(&db);
			p->again_flushes = flushes;
			p->have_again = r == 0;
		} else {
			r = 0;
		}
		char *name = xstrdup(p->again_epoch ? p->again_epoch : "?");
		double ra = 0;
		struct tally_push_sent sent = { 0 };
		if (!r) {
			r = send(p, &p->again, &ra);
			sent.samples = p->again.samples;
			sent.bytes = p->again.body.len;
			sent.profile_bytes = p->again.profile_bytes;
		}
		if (r == -EAGAIN) {
			char keep[512];
			snprintf(keep, sizeof(keep), "%s", tally_errmsg());
			pthread_mutex_lock(&p->mu);
			unsigned n = ++p->failures;
			pthread_mutex_unlock(&p->mu);
			set_error(p, keep, backoff(p, n, ra));
			free(name);
			return;
		}
		/* taken, or refused for good: not sent again */
		tally_push_payload_release(&p->again);
		free(p->again_epoch);
		p->again_epoch = NULL;
		p->have_again = false;
		bool rejected = r != 0;
		tally_push_cursor_done(c, rejected);
		int sr = tally_push_cursor_save(c);
		pthread_mutex_lock(&p->mu);
		if (!rejected) {
			p->last_ok = tally_now_wall();
			p->last_samples = sent.samples;
			p->last_bytes = sent.bytes;
			p->last_profile_bytes = sent.profile_bytes;
			p->pushes++;
			p->samples += sent.samples;
			p->bytes += sent.bytes;
		}
		bool was_failing = p->failures > 0;
		p->failures = 0;
		p->next_try = 0;
		if (!rejected) {
			free(p->error);
			p->error = NULL;
		}
		pthread_mutex_unlock(&p->mu);
		if (rejected) {
			char keep[512];
			snprintf(keep, sizeof(keep), "%s", tally_errmsg());
			set_error(p, keep, 0);
			say(p,
			    "epoch %s: %" PRIu64 " samples refused for good and not sent again: %s",
			    name, sent.samples, keep);
		} else if (was_failing) {
			say(p, "the server takes pushes again: epoch %s, %" PRIu64 " samples", name,
			    sent.samples);
		}
		if (sr)
			say(p,
			    "cannot write the cursor (what was sent is sent again after a restart): %s",
			    tally_errmsg());
		free(name);
	}
	if (tally_push_cursor_scan(c, &bl) == 0) {
		free(bl.dropped_epochs);
		bl.dropped_epochs = NULL;
		pthread_mutex_lock(&p->mu);
		p->bl = bl;
		p->flushed = 0;
		pthread_mutex_unlock(&p->mu);
	}
}

static void *run(void *arg)
{
	struct tally_pusher *p = arg;
	/* the pusher's work is the least urgent of the daemon's */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
	struct tally_push_cursor *c = p->cursor;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		for (;;) {
			double now = tally_now_mono();
			if (p->stop)
				break;
			if (p->work && (!p->next_try || now >= p->next_try))
				break;
			if (p->next_try && p->work) {
				struct timespec ts;
				clock_gettime(CLOCK_MONOTONIC, &ts);
				double w = p->next_try - now;
				ts.tv_sec += (time_t)w;
				ts.tv_nsec += (long)((w - (double)(time_t)w) * 1e9);
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				pthread_cond_timedwait(&p->cv, &p->mu, &ts);
			} else {
				pthread_cond_wait(&p->cv, &p->mu);
			}
		}
		bool stop = p->stop;
		/* the last pass: for what the last flush added, and only when the
		 * server answered the last try */
		bool last = stop && p->work && !p->failures && tally_now_mono() < p->grace_end;
		p->work = false;
		pthread_mutex_unlock(&p->mu);
		if (stop && !last)
			break;
		pass(p, c);
		if (stop)
			break;
	}
	return NULL;
}

/* What tally_pusher_start made before its thread ran, undone (and at the
 * end, after what the thread made). */
static void unmake(struct tally_pusher *p)
{
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	tally_push_opts_release(&p->o);
	free(p->endpoint);
	free(p->dir);
	strbuf_release(&p->logs);
	free(p);
}

int tally_pusher_start(struct tally_pusher **out, const char *dir, const struct tally_push_opts *o)
{
	struct tally_pusher *p = xcalloc(1, sizeof(*p));
	p->dir = xstrdup(dir);
	tally_push_opts_copy(&p->o, o);
	p->endpoint = tally_push_endpoint(o);
	strbuf_init(&p->logs);
	p->work = true; /* what the backlog holds from before */
	p->seed = (unsigned)getpid() ^ (unsigned)(tally_now_wall() * 1000);
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* the cursor now, before any flush: a new one starts from this present */
	struct strbuf target = STRBUF_INIT;
	strbuf_addf(&target, "%s %s", tally_push_format_name(o->format), p->endpoint);
	bool fresh = false;
	int r = tally_push_cursor_open(&p->cursor, dir, target.buf, &fresh);
	strbuf_release(&target);
	if (r) {
		char keep[512];
		snprintf(keep, sizeof(keep), "%s", tally_errmsg());
		unmake(p);
		return tally_seterr(r, "cannot open the push cursor of '%s': %s", dir, keep);
	}
	if (fresh)
		say(p,
		    "to %s (%s): a new cursor, from the present on (what the epochs held before is not sent)",
		    p->endpoint, tally_push_format_name(o->format));
	r = pthread_create(&p->th, NULL, run, p);
	if (r) {
		tally_push_cursor_free(p->cursor);
		unmake(p);
		return tally_seterr(-r, "cannot start the pusher's thread: %s", strerror(r));
	}
	*out = p;
	return 0;
}

void tally_pusher_notify(struct tally_pusher *p, uint64_t samples)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->work = true;
	p->flushed = tally_add_sat(p->flushed, samples);
	p->flushes++;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void tally_pusher_logs(struct tally_pusher *p, void (*log)(void *ctx, const char *line), void *ctx)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	if (!p->logs.len) {
		pthread_mutex_unlock(&p->mu);
		return;
	}
	char *text = strbuf_detach(&p->logs);
	pthread_mutex_unlock(&p->mu);
	char *save = NULL;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (log)
			log(ctx, l);
	free(text);
}

void tally_pusher_status(struct tally_pusher *p, struct strbuf *o)
{
	if (!p)
		return;
	char a[32];
	pthread_mutex_lock(&p->mu);
	strbuf_addf(o, "push: %s to %s (app %s)\n", tally_push_format_name(p->o.format),
		    p->endpoint, p->o.app ? p->o.app : "tally");
	if (p->last_ok) {
		tally_format_utc(p->last_ok, a, sizeof(a));
		strbuf_addf(
			o, "push-last: %s, %" PRIu64 " sample%s in %zu bytes (profile %zu bytes)\n",
			a, p->last_samples, p->last_samples == 1 ? "" : "s", p->last_bytes,
			p->last_profile_bytes);
	} else {
		strbuf_addstr(o, "push-last: none yet\n");
	}
	/* what the last scan found, and what flushes added since */
	uint64_t backlog = tally_add_sat(p->bl.samples, p->flushed);
	size_t nep = p->bl.epochs ? p->bl.epochs : p->flushed ? 1 : 0;
	strbuf_addf(o,
		    "push-backlog: %" PRIu64 " sample%s in %zu epoch%s not sent yet; %" PRIu64
		    " dropped (epochs deleted by --keep before they were sent), %" PRIu64
		    " refused by the server\n",
		    backlog, backlog == 1 ? "" : "s", nep, nep == 1 ? "" : "s", p->bl.dropped,
		    p->bl.rejected);
	if (p->error) {
		tally_format_utc(p->error_at, a, sizeof(a));
		strbuf_addf(o, "push-error: %s: %s", a, p->error);
		if (p->next_try)
			strbuf_addf(o, " (try %u failed; next in %.1f s)", p->failures,
				    p->next_try > tally_now_mono() ? p->next_try - tally_now_mono()
								   : 0.0);
		strbuf_addch(o, '\n');
	} else {
		strbuf_addstr(o, "push-error: none\n");
	}
	strbuf_addf(o,
		    "push-sent: %" PRIu64 " push%s, %" PRIu64 " samples, %" PRIu64
		    " bytes since start\n",
		    p->pushes, p->pushes == 1 ? "" : "es", p->samples, p->bytes);
	pthread_mutex_unlock(&p->mu);
}

void tally_pusher_stop(struct tally_pusher *p, double grace,
		       void (*log)(void *ctx, const char *line), void *ctx)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	p->grace_end = tally_now_mono() + grace;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	/* a push being built cannot be cut short: past the grace (and a second)
	 * the thread is left to the process's end, which ends it; its cursor is
	 * written whole or not at all, so what it was sending stays in the
	 * backlog for the next start */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	double w = grace + 1;
	ts.tv_sec += (time_t)w;
	ts.tv_nsec += (long)((w - (double)(time_t)w) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	if (pthread_timedjoin_np(p->th, NULL, &ts) == ETIMEDOUT) {
		tally_pusher_logs(p, log, ctx);
		if (log)
			log(ctx,
			    "push: the last push was not done at the end: what it held stays in the backlog for the next start");
		return;
	}
	tally_pusher_logs(p, log, ctx);
	tally_push_cursor_free(p->cursor);
	tally_push_payload_release(&p->again);
	free(p->again_epoch);
	free(p->error);
	unmake(p);
}
