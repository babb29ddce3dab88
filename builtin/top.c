/* tally top: the hottest functions now, refreshed every second (perf top):
 * a terminal view steered by keys, or one text snapshot a tick without a
 * terminal. It samples through the recording engine (record.h), or reads a
 * running daemon's memory over its control socket (--db). The window, the
 * feed and the screen are lib/top (top.h); this file is the terminal, the
 * signals and the clock. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/ctl.h"
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/record.h"
#include "tally/sampling.h"
#include "tally/symopts.h"
#include "tally/top.h"
#include "tally/util.h"
#include "tally/view.h"

struct topopts {
	const char *pid_arg, *db, *sock, *comm, *image;
	int view, sort;
	bool all, once;
	double delay;
	uint64_t iterations, rows;
};

enum { OPT_ALL = 1, OPT_PID, OPT_DB, OPT_ONCE, OPT_DELAY, OPT_ITER, OPT_ROWS, OPT_COMM, OPT_IMAGE, OPT_VIEW, OPT_SORT, OPT_SOCKET };

static int pick(const char *arg, const char *what, const char *const *names, int n, int *out)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(arg, names[i])) {
			*out = i;
			return 0;
		}
	struct strbuf l = STRBUF_INIT;
	for (int i = 0; i < n; i++)
		strbuf_addf(&l, "%s%s", i ? ", " : "", names[i]);
	int r = tally_seterr(-EINVAL, "%s takes %s, not '%s'", what, l.buf, arg);
	strbuf_release(&l);
	return r;
}

static int top_handle(void *ctx, int code, const char *arg)
{
	struct topopts *o = ctx;
	switch (code) {
	case OPT_ALL: o->all = true; break;
	case OPT_PID: o->pid_arg = arg; break;
	case OPT_DB: o->db = arg; break;
	case OPT_SOCKET: o->sock = arg; break;
	case OPT_ONCE: o->once = true; break;
	case OPT_DELAY: {
		int r = tally_parse_duration(arg, "--delay", &o->delay);
		if (!r && (o->delay < 0.05 || o->delay > 3600))
			r = tally_seterr(-EINVAL, "--delay takes 50ms to 1h, not '%s'", arg);
		return r;
	}
	case OPT_ITER: return tally_parse_u64(arg, "--iterations", 1, UINT32_MAX, &o->iterations);
	case OPT_ROWS: return tally_parse_u64(arg, "--rows", 0, 1000000, &o->rows);
	case OPT_COMM: o->comm = arg; break;
	case OPT_IMAGE: o->image = arg; break;
	case OPT_VIEW: {
		static const char *const v[] = { "functions", "images", "commands" };
		return pick(arg, "--view", v, 3, &o->view);
	}
	case OPT_SORT: {
		static const char *const v[] = { "share", "self", "name", "image", "command" };
		return pick(arg, "--sort", v, 5, &o->sort);
	}
	}
	return 0;
}

static const struct tally_option top_options[] = {
	{ 'a', "all-cpus", TALLY_ARG_NONE, NULL, "the whole system, kernel included (the default without -p or COMMAND)", OPT_ALL },
	{ 'p', "pid", TALLY_ARG_REQUIRED, "LIST", "attach to running processes", OPT_PID },
	{ 0, "db", TALLY_ARG_REQUIRED, "DIR", "show what the tally daemon of DIR samples (its control socket):\nno perf events of its own", OPT_DB },
	{ 0, "socket", TALLY_ARG_REQUIRED, "PATH", "the daemon's control socket (default DIR/ctl.sock; implies --db)", OPT_SOCKET },
	{ 0, "once", TALLY_ARG_NONE, NULL, "print one text snapshot after one interval, then exit", OPT_ONCE },
	{ 'd', "delay", TALLY_ARG_REQUIRED, "SECS", "the interval between refreshes (default 1s; 50ms to 1h)", OPT_DELAY },
	{ 'n', "iterations", TALLY_ARG_REQUIRED, "N", "exit after N refreshes", OPT_ITER },
	{ 0, "rows", TALLY_ARG_REQUIRED, "N", "rows of each text snapshot (default 25; 0: all)", OPT_ROWS },
	{ 0, "view", TALLY_ARG_REQUIRED, "VIEW", "functions (default), images or commands (keys v, 1 2 3)", OPT_VIEW },
	{ 0, "sort", TALLY_ARG_REQUIRED, "KEY", "share (default), self, name, image or command (key s)", OPT_SORT },
	{ 0, "comm", TALLY_ARG_REQUIRED, "TEXT", "only commands whose name contains TEXT (key c)", OPT_COMM },
	{ 0, "image", TALLY_ARG_REQUIRED, "TEXT", "only images whose name contains TEXT (key i)", OPT_IMAGE },
	TALLY_OPTION_END,
};
static const struct tally_optgroup top_group = { NULL, top_options, top_handle };

const struct tally_cmdopts top_cmdopts = {
	.name = "top",
	.summary = "the hottest functions now, refreshed every second, in a terminal or as text",
	.usage = "[-a | -p PID | --db DIR] [options] [--] [COMMAND [ARGS...]]",
	.footer = "keys: v (or Tab, 1 2 3) functions, images or commands; s order; c and i filter by command\n"
		  "or image; = no filters; Space freeze; h help; q quit. Without a terminal on stdout (or\n"
		  "with --once) a text snapshot is printed every interval (docs/top.md).\n",
	.stop_at_nonopt = true,
	.groups = { &top_group, &tally_sampling_group, &tally_symopts_group },
};

/* ---- signals and the terminal ---- */

static int sig_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_quit, got_winch, got_tstp;

static void on_signal(int sig)
{
	int e = errno;
	if (sig == SIGWINCH)
		got_winch = 1;
	else if (sig == SIGTSTP)
		got_tstp = 1;
	else if (sig != SIGCHLD)
		got_quit = 1;
	char c = 0;
	if (sig_pipe[1] >= 0 && write(sig_pipe[1], &c, 1) < 0) {
		/* full: a wake-up is pending */
	}
	errno = e;
}

static struct termios saved_tio;
static bool tio_saved;
static int tty_out = -1;
static int stdin_flags = -1; /* stdin's file status flags before top made it non-blocking */

static void term_restore(void)
{
	if (tty_out >= 0) {
		static const char leave[] = "\033[0m\033[?25h\033[?1049l";
		if (write(tty_out, leave, sizeof(leave) - 1) < 0) {
			/* nothing to do: the terminal is gone */
		}
	}
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
		tio_saved = false;
	}
	/* the open file is the shell's too: the next program must not find it non-blocking */
	if (stdin_flags >= 0) {
		fcntl(STDIN_FILENO, F_SETFL, stdin_flags);
		stdin_flags = -1;
	}
}

static void term_enter(int in_fd, int out_fd)
{
	tty_out = out_fd;
	if (in_fd >= 0 && tcgetattr(in_fd, &saved_tio) == 0) {
		struct termios t = saved_tio;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		if (tcsetattr(in_fd, TCSANOW, &t) == 0)
			tio_saved = true;
	}
	static const char enter[] = "\033[?1049h\033[?25l\033[2J";
	if (write(out_fd, enter, sizeof(enter) - 1) < 0) {
		/* the screen is drawn anyway */
	}
	static bool registered;
	if (!registered)
		atexit(term_restore);
	registered = true;
}

/* ^Z: the shell gets its screen and terminal back while tally top is
 * stopped (sampling stops with it), and the view comes back on SIGCONT. */
static void suspend(bool keys, int out_fd)
{
	got_tstp = 0;
	term_restore();
	signal(SIGTSTP, SIG_DFL);
	raise(SIGTSTP);
	/* continued */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTSTP, &sa, NULL);
	term_enter(keys ? STDIN_FILENO : -1, out_fd);
	got_winch = 1; /* the size may have changed meanwhile: redraw whole */
}

static void term_size(int fd, int *w, int *h)
{
	struct winsize ws;
	*w = 80;
	*h = 24;
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*w = ws.ws_col;
		*h = ws.ws_row;
	}
}

static void drain_pipe(void)
{
	char buf[64];
	while (sig_pipe[0] >= 0 && read(sig_pipe[0], buf, sizeof(buf)) > 0)
		;
}

/* ---- one session ---- */

struct top {
	struct topopts o;
	bool interactive, keys;
	int out_fd;
	struct tally_top *win;
	struct tally_top_feed *feed;
	struct tally_top_ui ui;
	struct tally_top_status st;
	struct strbuf msg, events;
	uint64_t ticks;
	int width, height;
	bool target_ended; /* the target ended by itself (not stopped by top) */
};

static void show(struct top *t)
{
	struct strbuf out = STRBUF_INIT;
	t->st.message = t->msg.len ? t->msg.buf : NULL;
	if (t->interactive) {
		if (got_winch) {
			got_winch = 0;
			term_size(t->out_fd, &t->width, &t->height);
			strbuf_addstr(&out, "\033[2J");
		}
		tally_top_screen(t->win, &t->ui, &t->st, t->width, t->height, &out);
	} else {
		tally_top_text(t->win, &t->ui.q, &t->st, t->o.rows, &out);
		strbuf_addch(&out, '\n');
	}
	if (tally_write_all(t->out_fd, out.buf, out.len) < 0 && !t->interactive)
		got_quit = 1; /* nobody reads the snapshots any more */
	strbuf_release(&out);
}

/* Keys waiting on the terminal: 1 when the screen must be drawn again. */
static int read_keys(struct top *t)
{
	int redraw = 0;
	unsigned char buf[64];
	ssize_t n;
	if (got_tstp && t->interactive) {
		suspend(t->keys, t->out_fd);
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
		got_quit = 1;
	return redraw;
}

/* One tick's database into the window; then the screen or a snapshot. */
static void tick(struct top *t, struct tally_db *db, bool cumulative, double since, double elapsed)
{
	double added = 0;
	tally_top_tick(t->win, TALLY_TOP_DECAY);
	strbuf_reset(&t->msg);
	/* shares by period weight (time, or events), as the report's; the rate
	 * stays in samples: the weight fed, at the tick's samples per weight */
	uint64_t wt = db->nevents > 0 ? tally_db_weight_total(db, 0) : 0, ns = db->nevents > 0 ? db->samples[0] : 0;
	tally_view_weigh(db, false);
	t->st.unit = db->nevents > 0 ? tally_view_heading(db, 0) : NULL;
	if (tally_top_feed_db(t->feed, t->win, db, cumulative, since, &added))
		strbuf_addf(&t->msg, "symbols: %s", tally_errmsg());
	if (wt)
		added = added * (double)ns / (double)wt;
	if (tally_top_callgraph(t->win) && !db->has_stacks) {
		strbuf_reset(&t->msg);
		strbuf_addstr(&t->msg, "no call graphs in these samples: the shares are self only");
	}
	t->st.rate = elapsed > 0 ? added / elapsed : 0;
	t->st.samples += (uint64_t)(added + 0.5);
	t->ticks++;
	if (!t->ui.frozen)
		show(t);
}

static bool done(struct top *t)
{
	return got_quit || t->ui.quit || (t->o.iterations && t->ticks >= t->o.iterations) || (t->o.once && t->ticks >= 1);
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
		drain_pipe();
		int redraw = read_keys(t);
		if (got_winch)
			redraw = 1;
		if (redraw && t->interactive && !done(t))
			show(t);
		if (n < 0 && errno != EINTR)
			return;
	}
}

/* What a step of the recording returned (n): 1 when the recording ended (its
 * target did, or an error, said here with *ret set). */
static int step_ended(struct top *t, int n, int *ret)
{
	if (n < 0) {
		tally_error("%s", tally_errmsg());
		*ret = 1;
		return 1;
	}
	if (n)
		t->target_ended = true;
	return n ? 1 : 0;
}

static int run_recording(struct top *t, struct tally_recording *rec, const struct tally_sampling *smp,
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
			int n = tally_recording_step(rec, left > 0.05 ? 50 : (int)(left * 1000) + 1);
			drain_pipe();
			int redraw = read_keys(t);
			if (got_winch)
				redraw = 1;
			if (redraw && t->interactive && !done(t))
				show(t);
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
		if (tally_top_db_from_agg(&db, agg, &m, &kc)) {
			tally_error("%s", tally_errmsg());
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

static int run_daemon(struct top *t, int epfd)
{
	struct strbuf path = STRBUF_INIT, body = STRBUF_INIT;
	if (t->o.sock)
		strbuf_addstr(&path, t->o.sock);
	else
		strbuf_addf(&path, "%s/%s", t->o.db, TALLY_CTL_SOCKET_NAME);
	double last = 0, last_since = 0; /* the daemon's clock at its last answer, its memory's start then */
	int ret = 0, r;
	bool first = true;
	while (!done(t)) {
		bool ok = false;
		strbuf_reset(&body);
		if ((r = tally_ctl_call(path.buf, "peek", 10, &ok, &body))) {
			/* a daemon busy with a long flush: said, and asked again; a
			 * daemon gone (or never there) ends the view */
			if (first || r != -ETIMEDOUT) {
				tally_error("%s", tally_errmsg());
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
			tally_error("the daemon at '%s' answered: %s", path.buf, m.buf ? m.buf : "");
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
			tally_error("%s", tally_errmsg());
			ret = 1;
			break;
		}
		const char *since = tally_meta_get(&db.session, "memory-since");
		if (!since) {
			tally_db_release(&db);
			tally_error("the daemon at '%s' answered peek without 'memory-since' (restart it with this tally)", path.buf);
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

int cmd_top(int argc, char **argv)
{
	struct top t = { .o = { .delay = 1.0, .rows = 25 } };
	struct tally_sampling smp;
	struct tally_symopts so;
	tally_sampling_init(&smp);
	tally_symopts_init(&so);
	strbuf_init(&t.msg);
	struct tally_recording *rec = NULL;
	int *pids = NULL;
	size_t npids = 0;
	int epfd = -1, ret;
	struct strbuf target = STRBUF_INIT, events = STRBUF_INIT;
	bool free_db = false;

	void *ctx[] = { &t.o, &smp, &so };
	int first;
	ret = tally_cmd_options(&top_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 2;
	if (t.o.sock && !t.o.db)
		t.o.db = tally_dirname(t.o.sock), free_db = true;
	char **cmd = argv + first;
	int ncmd = argc - first;
	int given = (ncmd > 0) + (t.o.all) + (t.o.pid_arg != NULL) + (t.o.db != NULL);
	if (given > 1) {
		ret = tally_usage_error("top", "give a COMMAND, or -a, or -p, or --db, not several");
		goto out;
	}
	if (t.o.db && (smp.freq || smp.period || strcmp(smp.events_arg, "cpu-clock") || smp.cpu_arg || smp.stack_user ||
		       !smp.randomize || smp.per_pid || smp.build_id_mmap)) {
		ret = tally_usage_error("top", "--db shows what the daemon samples: its rate, events and CPUs are its own (tally ctl cpus)");
		goto out;
	}
	if (smp.freq && smp.period) {
		ret = tally_usage_error("top", "-F and -c both set the sampling rate: give one");
		goto out;
	}
	if (t.o.pid_arg && tally_parse_intlist(t.o.pid_arg, "pid list -p", &pids, &npids)) {
		ret = tally_usage_error("top", "%s", tally_errmsg());
		goto out;
	}
	ret = 1;
	for (size_t i = 0; i < npids; i++)
		if (kill(pids[i], 0) < 0 && errno == ESRCH) {
			tally_error("cannot attach to pid %d: no such process", pids[i]);
			goto out;
		}
	struct tally_resolver_opts ro = { 0 };
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	if (tally_symopts_prepare(&so, &ro, &w)) {
		tally_print_warnings(&w);
		tally_error("%s", tally_errmsg());
		goto out;
	}
	tally_print_warnings(&w);
	ro.no_inline = true;

	t.interactive = !t.o.once && isatty(STDOUT_FILENO);
	t.keys = t.interactive && isatty(STDIN_FILENO);
	t.out_fd = STDOUT_FILENO;
	tally_top_ui_init(&t.ui, smp.callchain);
	t.ui.q.view = (enum tally_top_view)t.o.view;
	t.ui.q.sort = (enum tally_top_sort)t.o.sort;
	if (t.o.comm && *t.o.comm)
		t.ui.q.comm_filter = t.ui.comm_filter = xstrdup(t.o.comm);
	if (t.o.image && *t.o.image)
		t.ui.q.image_filter = t.ui.image_filter = xstrdup(t.o.image);
	t.win = tally_top_new(smp.callchain);
	t.feed = tally_top_feed_new(&ro);

	/* signals and keys wake the waits: a pipe, and the terminal, in one epoll set */
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0 || (epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		tally_error("cannot make a pipe: %s", strerror(errno));
		goto out;
	}
	{
		struct epoll_event ev = { .events = EPOLLIN };
		epoll_ctl(epfd, EPOLL_CTL_ADD, sig_pipe[0], &ev);
		if (t.keys) {
			stdin_flags = fcntl(STDIN_FILENO, F_GETFL);
			if (stdin_flags >= 0)
				fcntl(STDIN_FILENO, F_SETFL, stdin_flags | O_NONBLOCK);
			epoll_ctl(epfd, EPOLL_CTL_ADD, STDIN_FILENO, &ev);
		}
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (t.interactive)
		sigaction(SIGTSTP, &sa, NULL);
	if (t.o.db) {
		strbuf_addf(&target, "daemon '%s'", t.o.db);
		t.st.target = target.buf;
		t.st.events = "the daemon's";
		t.st.interval = t.o.delay;
		if (t.interactive) {
			term_enter(t.keys ? STDIN_FILENO : -1, t.out_fd);
			term_size(t.out_fd, &t.width, &t.height);
		}
		ret = run_daemon(&t, epfd);
		goto out;
	}

	smp.per_pid = true; /* the command column */
	{
		int r = tally_sampling_resolve(&smp);
		if (r) {
			tally_error("%s", tally_errmsg());
			ret = r == -EINVAL ? 2 : 1;
			goto out;
		}
		/* its columns are shares of on-CPU samples: waits off the CPU are not
		 * shown, so they are refused rather than recorded for nothing */
		for (int i = 0; i < smp.nev; i++)
			if (smp.evs[i]->offcpu) {
				tally_error("top shows time on the CPU only, not event '%s' (time off the CPU: 'tally record --off-cpu', then 'tally report --wall' or '--event off-cpu')",
					    smp.evs[i]->name);
				ret = 2;
				goto out;
			}
	}
	struct tally_recording_opts rop;
	tally_recording_opts_init(&rop);
	rop.smp = &smp;
	rop.identify_early = true;
	rop.wake_fd = epfd;
	if (ncmd) {
		rop.target = TALLY_TARGET_CHILD;
		rop.argv = cmd;
		strbuf_addf(&target, "command '%s'", tally_basename(cmd[0]));
	} else if (npids) {
		rop.target = TALLY_TARGET_PIDS;
		rop.pids = pids;
		rop.npids = npids;
		strbuf_addf(&target, "pids %s", t.o.pid_arg);
	} else {
		rop.target = TALLY_TARGET_SYSTEM;
		strbuf_addstr(&target, "system");
	}
	/* the screen is the terminal's: a command gets /dev/null for its input
	 * and output while the screen is drawn (docs/top.md) */
	int saved[3] = { -1, -1, -1 };
	if (ncmd && t.interactive) {
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int fd = 0; fd < 3 && nul >= 0; fd++) {
			saved[fd] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
			dup2(nul, fd);
		}
		if (nul >= 0)
			close(nul);
	}
	int r = tally_recording_new(&rec, &rop);
	for (int fd = 0; fd < 3; fd++)
		if (saved[fd] >= 0) {
			dup2(saved[fd], fd);
			close(saved[fd]);
		}
	if (r) {
		tally_error("%s", tally_errmsg());
		goto out;
	}
	strbuf_addstr(&events, smp.evnames.buf ? smp.evnames.buf : "cpu-clock");
	t.st.target = target.buf;
	t.st.events = events.buf;
	t.st.interval = t.o.delay;
	if (tally_recording_start(rec)) {
		tally_error("%s", tally_errmsg());
		ret = tally_recording_exit_code(rec) == 127 ? 127 : 1;
		goto out;
	}
	if (t.interactive) {
		term_enter(t.keys ? STDIN_FILENO : -1, t.out_fd);
		term_size(t.out_fd, &t.width, &t.height);
	}
	ret = run_recording(&t, rec, &smp, ncmd ? "command" : npids ? "pids" : "system");
	tally_recording_stop(rec);
	term_restore();
	/* a command that ended by itself gives its status; one top stopped (q,
	 * --once, -n) does not make top fail */
	if (!ret && ncmd && t.target_ended && tally_recording_exit_code(rec) >= 0)
		ret = tally_recording_exit_code(rec);
out:
	term_restore();
	tally_recording_free(rec);
	tally_top_free(t.win);
	tally_top_feed_free(t.feed);
	tally_top_ui_release(&t.ui);
	strbuf_release(&t.msg);
	strbuf_release(&t.events);
	strbuf_release(&target);
	strbuf_release(&events);
	if (epfd >= 0)
		close(epfd);
	for (int i = 0; i < 2; i++)
		if (sig_pipe[i] >= 0) {
			close(sig_pipe[i]);
			sig_pipe[i] = -1;
		}
	free(pids);
	if (free_db)
		free((char *)t.o.db);
	tally_symopts_release(&so);
	tally_sampling_release(&smp);
	return ret;
}
