/* tally top: the hottest functions now, refreshed every second (perf top):
 * a terminal view steered by keys, or one text snapshot a tick without a
 * terminal. It samples through the recording engine (record.h), or reads a
 * running daemon's memory over its control socket (--db). The window, the
 * feed and the screen are lib/top (top.h); the session and the terminal
 * are top-session.c and top-term.c (builtin/top.h); this file is the
 * options, then calls. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/top.h"
#include "tally/record.h"
#include "tally/sampling.h"
#include "tally/symopts.h"


enum { OPT_DELAY, OPT_VIEW, OPT_SORT };

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
	case OPT_DELAY: {
		int r = tally_parse_duration(arg, "--delay", &o->delay);
		if (!r && (o->delay < 0.05 || o->delay > 3600))
			r = tally_seterr(-EINVAL, "--delay takes 50ms to 1h, not '%s'", arg);
		return r;
	}
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
	TALLY_OPT_FLAG('a', "all-cpus",
		       "the whole system, kernel included (the default without -p or COMMAND)",
		       struct topopts, all),
	TALLY_OPT_STRING('p', "pid", "LIST", "attach to running processes", struct topopts,
			 pid_arg),
	TALLY_OPT_STRING(
		0, "db", "DIR",
		"show what the tally daemon of DIR samples (its control socket):\nno perf events of its own",
		struct topopts, db),
	TALLY_OPT_STRING(0, "socket", "PATH",
			 "the daemon's control socket (default DIR/ctl.sock; implies --db)",
			 struct topopts, sock),
	TALLY_OPT_FLAG(0, "once", "print one text snapshot after one interval, then exit",
		       struct topopts, once),
	TALLY_OPT('d', "delay", TALLY_ARG_REQUIRED, "SECS",
		  "the interval between refreshes (default 1s; 50ms to 1h)", OPT_DELAY),
	TALLY_OPT_U64('n', "iterations", "N", "exit after N refreshes", struct topopts, iterations,
		      1, UINT32_MAX),
	TALLY_OPT_U64(0, "rows", "N", "rows of each text snapshot (default 25; 0: all)",
		      struct topopts, rows, 0, 1000000),
	TALLY_OPT(0, "view", TALLY_ARG_REQUIRED, "VIEW",
		  "functions (default), images or commands (keys v, 1 2 3)", OPT_VIEW),
	TALLY_OPT(0, "sort", TALLY_ARG_REQUIRED, "KEY",
		  "share (default), self, name, image or command (key s)", OPT_SORT),
	TALLY_OPT_STRING(0, "comm", "TEXT", "only commands whose name contains TEXT (key c)",
			 struct topopts, comm),
	TALLY_OPT_STRING(0, "image", "TEXT", "only images whose name contains TEXT (key i)",
			 struct topopts, image),
	TALLY_OPTION_END,
};
static const struct tally_optgroup top_group = { NULL, top_options, top_handle };

const struct tally_cmdopts top_cmdopts = {
	.name = "top",
	.summary = "the hottest functions now, refreshed every second, in a terminal or as text",
	.usage = "[-a | -p PID | --db DIR] [options] [--] [COMMAND [ARGS...]]",
	.footer =
		"keys: v (or Tab, 1 2 3) functions, images or commands; s order; c and i filter by command\n"
		"or image; = no filters; Space freeze; h help; q quit. Without a terminal on stdout (or\n"
		"with --once) a text snapshot is printed every interval (docs/top.md).\n",
	.stop_at_nonopt = true,
	.groups = { &top_group, &tally_sampling_group, &tally_symopts_group },
};

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
		ret = tally_usage_error("top",
					"give a COMMAND, or -a, or -p, or --db, not several");
		goto out;
	}
	if (t.o.db &&
	    (smp.freq || smp.period || strcmp(smp.events_arg, "cpu-clock") || smp.cpu_arg ||
	     smp.stack_user || !smp.randomize || smp.per_pid || smp.build_id_mmap)) {
		ret = tally_usage_error(
			"top",
			"--db shows what the daemon samples: its rate, events and CPUs are its own (tally ctl cpus)");
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
	if (tally_symopts_ready(&so, &ro))
		goto out;
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
	if ((epfd = top_wakeups_open(t.keys, t.interactive)) < 0) {
		tally_error_last();
		goto out;
	}
	if (t.o.db) {
		strbuf_addf(&target, "daemon '%s'", t.o.db);
		t.st.target = target.buf;
		t.st.events = "the daemon's";
		t.st.interval = t.o.delay;
		if (t.interactive) {
			top_term_enter(t.keys ? STDIN_FILENO : -1, t.out_fd);
			top_term_size(t.out_fd, &t.width, &t.height);
		}
		ret = top_run_daemon(&t, epfd);
		goto out;
	}

	smp.per_pid = true; /* the command column */
	{
		int r = tally_sampling_resolve(&smp);
		if (r) {
			tally_error_last();
			ret = r == -EINVAL ? 2 : 1;
			goto out;
		}
		/* its columns are shares of on-CPU samples: waits off the CPU are not
		 * shown, so they are refused rather than recorded for nothing */
		for (int i = 0; i < smp.nev; i++)
			if (smp.evs[i]->offcpu) {
				tally_error(
					"top shows time on the CPU only, not event '%s' (time off the CPU: 'tally record --off-cpu', then 'tally report --wall' or '--event off-cpu')",
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
		tally_error_last();
		goto out;
	}
	strbuf_addstr(&events, smp.evnames.buf ? smp.evnames.buf : "cpu-clock");
	t.st.target = target.buf;
	t.st.events = events.buf;
	t.st.interval = t.o.delay;
	if (tally_recording_start(rec)) {
		tally_error_last();
		ret = tally_recording_exit_code(rec) == 127 ? 127 : 1;
		goto out;
	}
	if (t.interactive) {
		top_term_enter(t.keys ? STDIN_FILENO : -1, t.out_fd);
		top_term_size(t.out_fd, &t.width, &t.height);
	}
	ret = top_run_recording(&t, rec, &smp, ncmd ? "command" : npids ? "pids" : "system");
	tally_recording_stop(rec);
	top_term_restore();
	/* a command that ended by itself gives its status; one top stopped (q,
	 * --once, -n) does not make top fail */
	if (!ret && ncmd && t.target_ended && tally_recording_exit_code(rec) >= 0)
		ret = tally_recording_exit_code(rec);
out:
	top_term_restore();
	tally_recording_free(rec);
	tally_top_free(t.win);
	tally_top_feed_free(t.feed);
	tally_top_ui_release(&t.ui);
	strbuf_release(&t.msg);
	strbuf_release(&t.events);
	strbuf_release(&target);
	strbuf_release(&events);
	top_wakeups_close(epfd);
	free(pids);
	if (free_db)
		free((char *)t.o.db);
	tally_symopts_release(&so);
	tally_sampling_release(&smp);
	return ret;
}
