/* tally top's session: ticks of a recording or of a daemon's memory fed to
 * the window, the screen or a snapshot drawn after each, keys between. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "builtin/top.h"
#include "tally/ctl.h"
#include "tally/db.h"
#include "tally/snapshot.h"
#include "tally/record.h"
#include "tally/sampling.h"
#include "tally/view.h"



static void show(struct top *t)
{
	struct strbuf out = STRBUF_INIT;
	t->st.message = t->msg.len ? t->msg.buf : NULL;
	if (t->interactive) {
		if (top_got_winch) {
			top_got_winch = 0;
			top_term_size(t->out_fd, &t->width, &t->height);
			strbuf_addstr(&out, "\033[2J");
		}
		tally_top_screen(t->win, &t->ui, &t->st, t->width, t->height, &out);
	} else {
		tally_top_text(t->win, &t->ui.q, &t->st, t->o.rows, &out);
		strbuf_addch(&out, '\n');
	}
	if (tally_write_all(t->out_fd, out.buf, out.len) < 0 && !t->interactive)
		top_got_quit = 1; /* nobody reads the snapshots any more */
	strbuf_release(&out);
}

/* Keys waiting on the terminal: 1 when the screen must be drawn again. */
static int read_keys(struct top *t)
{
	int redraw = 0;
	unsigned char buf[64];
	ssize_t n;
	if (top_got_tstp && t->interactive) {
		top_suspend(t->keys, t->out_fd);
		redraw = 1;
	}
	while (t->keys && (n = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++) {
			/* an escape sequence (arrows, function keys) is not Escape */
			if (buf[i] == 27 && i + 1 < n && buf[i + 1] == '[') {
				i += 2;
				while (i < n && !(buf[i] >= 0x40 && buf[i] <= 0x7e))
					i++;
				continue;
			}
			redraw |= tally_top_key(&t->ui, buf[i]);
		}
	if (t->ui.quit)
		top_got_quit = 1;
	return redraw;
}

/* One tick's database into the window; then the screen or a snapshot. */
static void tick(struct top *t, struct tally_db *db, bool cumulative, double since, double elapsed)
{
	tally_top_tick(t->win, TALLY_TOP_DECAY);
	strbuf_reset(&t->msg);
	/* shares by period weight (time, or events), as the report's; the rate
	 * and the count stay in samples, counted: a recording's tick holds what
	 * is new, a peek the daemon's whole memory, of which the last peek saw
	 * part while the memory began at the same time */
	uint64_t ns = db->nevents > 0 ? db->samples[0] : 0, got = ns;
	if (cumulative) {
		if (t->ticks && since == t->peek_since && ns >= t->peek_samples)
			got = ns - t->peek_samples;
		t->peek_since = since;
		t->peek_samples = ns;
	}
	tally_view_weigh(db, false);
	t->st.unit = db->nevents > 0 ? tally_view_heading(db, 0) : NULL;
	if (tally_top_feed_db(t->feed, t->win, db, cumulative, since, NULL))
		strbuf_addf(&t->msg, "symbols: %s", tally_errmsg());
	if (tally_top_callgraph(t->win) && !db->has_stacks) {
		strbuf_reset(&t->msg);
		strbuf_addstr(&t->msg, "no call graphs in these samples: the shares are self only");
	}
	t->st.rate = elapsed > 0 ? (double)got / elapsed : 0;
	t->st.samples += got;
	t->ticks++;
	if (!t->ui.frozen)
		show(t);
}

static bool done(struct top *t)
{
	return top_got_quit || t->ui.quit || (t->o.iterations && t->ticks >= t->o.iterations) ||
	       (t->o.once && t->ticks >= 1);
}

/* The keys typed and a resize since the last look: the screen drawn again
 * when either asks for it. */
static void keys_and_resize(struct top *t)
{
	top_drain_wakeups();
	int redraw = read_keys(t);
	if (top_got_winch)
		redraw = 1;
	if (redraw && t->interactive && !done(t))
		show(t);
}

/* Waits until deadline (monotonic) or a key or a signal: the screen is drawn
 * again after a key or a resize. */
static void wait_until(struct top *t, int epfd, double deadline)
{
	for (;;) {
		double left = deadline - tally_now_mono();
		if (left <= 0 || done(t))
			return;
		struct epoll_event ev;
		int n = epoll_wait(epfd, &ev, 1, (int)(left * 1000) + 1);
		keys_and_resize(t);
		if (n < 0 && errno != EINTR)
			return;
	}
}

/* What a step of the recording returned (n): 1 when the recording ended (its
 * target did, or an error, said here with *ret set). */
static int step_ended(struct top *t, int n, int *ret)
{
	if (n < 0) {
		tally_error_last();
		*ret = 1;
		return 1;
	}
	if (n)
		t->target_ended = true;
	return n ? 1 : 0;
}

int top_run_recording(struct top *t, struct tally_recording *rec, const struct tally_sampling *smp,
			 const char *target)
{
	struct tally_agg *agg = tally_recording_agg(rec);
	struct tally_collector *col = tally_recording_collector(rec);
	struct tally_ksym_cache kc = { 0 };
	uint64_t lost = 0;
	double last = tally_now_mono();
	int ret = 0;
	for (;;) {
		double next = last + t->o.delay;
		int ended = 0;
		while (!ended && !done(t)) {
			double left = next - tally_now_mono();
			if (left <= 0)
				break;
			int n = tally_recording_step(rec,
						     left > 0.05 ? 50 : (int)(left * 1000) + 1);
			keys_and_resize(t);
			ended = step_ended(t, n, &ret);
		}
		double now = tally_now_mono();
		if (done(t) && !ended)
			break; /* quit, or enough ticks: what came since the last is not shown */
		/* a tick shows everything sampled until now: a round that reads what the
		 * rings and the counted samples' tables hold, without waiting (with
		 * --sample-mechanism bpf the rounds otherwise read them every 4 s) */
		if (!ended)
			ended = step_ended(t, tally_recording_step(rec, 0), &ret);
		struct tally_meta m = { 0 };
		tally_sampling_session(smp, col, agg, target, NULL, &m);
		struct tally_db db;
		lost += agg->lost;
		t->st.lost = lost;
		if (tally_db_from_agg_live(&db, agg, &m, &kc)) {
			tally_error_last();
			tally_meta_release(&m);
			ret = 1;
			break;
		}
		tally_meta_release(&m);
		tally_agg_reset(agg);
		tick(t, &db, false, 0, now - last);
		tally_db_release(&db);
		last = now;
		if (ended || done(t))
			break;
	}
	tally_ksym_cache_release(&kc);
	return ret;
}

int top_run_daemon(struct top *t, int epfd)
{
	struct strbuf path = STRBUF_INIT, body = STRBUF_INIT;
	if (t->o.sock)
		strbuf_addstr(&path, t->o.sock);
	else
		strbuf_addf(&path, "%s/%s", t->o.db, TALLY_CTL_SOCKET_NAME);
	/* the daemon's clock at its last answer, its memory's start then */
	double last = 0, last_since = 0;
	int ret = 0, r;
	bool first = true;
	while (!done(t)) {
		bool ok = false;
		strbuf_reset(&body);
		if ((r = tally_ctl_call(path.buf, "peek", 10, &ok, &body))) {
			/* a daemon busy with a long flush: said, and asked again; a
			 * daemon gone (or never there) ends the view */
			if (first || r != -ETIMEDOUT) {
				tally_error_last();
				ret = 1;
				break;
			}
			strbuf_reset(&t->msg);
			strbuf_addf(&t->msg, "%s (asking again)", tally_errmsg());
			if (t->interactive)
				show(t);
			else
				tally_warn("%s", t->msg.buf);
			wait_until(t, epfd, tally_now_mono() + t->o.delay);
			continue;
		}
		if (!ok) {
			struct strbuf m = STRBUF_INIT;
			strbuf_add_excerpt(&m, body.buf ? body.buf : "", body.len, 300);
			tally_error("the daemon at '%s' answered: %s", path.buf,
				    m.buf ? m.buf : "");
			strbuf_release(&m);
			ret = 1;
			break;
		}
		struct tally_db db;
		struct strbuf what = STRBUF_INIT;
		strbuf_addf(&what, "the answer of '%s' to peek", path.buf);
		r = tally_top_db_from_bundle(&db, body.buf ? body.buf : "", body.len, what.buf);
		strbuf_release(&what);
		if (r) {
			tally_error_last();
			ret = 1;
			break;
		}
		const char *since = tally_meta_get(&db.session, "memory-since");
		if (!since) {
			tally_db_release(&db);
			tally_error(
				"the daemon at '%s' answered peek without 'memory-since' (restart it with this tally)",
				path.buf);
			ret = 1;
			break;
		}
		strbuf_reset(&t->events);
		for (int e = 0; e < db.nevents; e++)
			strbuf_addf(&t->events, "%s%s", e ? "," : "", db.events[e]);
		t->st.events = t->events.buf ? t->events.buf : "?";
		t->st.lost = db.lost;
		/* the rate over the daemon's own clock: when it answered, not when
		 * the answer came (a slow answer would squeeze two ticks' samples
		 * into one). What a tick adds came since the last answer, or, the
		 * first time and after a flush, since the memory's start (the
		 * whole memory is new then) */
		const char *dur = tally_meta_get(&db.session, "duration");
		double dsince = strtod(since, NULL);
		double dnow = dsince + (dur ? strtod(dur, NULL) : 0);
		double from = !first && dsince == last_since ? last : dsince;
		double now = tally_now_mono();
		tick(t, &db, true, dsince, dnow > from ? dnow - from : 0);
		first = false;
		tally_db_release(&db);
		last = dnow;
		last_since = dsince;
		wait_until(t, epfd, now + t->o.delay);
	}
	strbuf_release(&path);
	strbuf_release(&body);
	return ret;
}
