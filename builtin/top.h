/* tally top, in three files: the command (top.c: options, then calls), its
 * session (top-session.c) and its terminal and signals (top-term.c). */
#ifndef TALLY_BUILTIN_TOP_H
#define TALLY_BUILTIN_TOP_H

#include <signal.h>
#include <stdbool.h>

#include "builtin/builtin.h"
#include "tally/top.h"

struct topopts {
	const char *pid_arg, *db, *sock, *comm, *image;
	int view, sort;
	bool all, once;
	double delay;
	uint64_t iterations, rows;
};

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
	/* a daemon's memory at the last peek: since when, and its samples (what a
	 * tick adds is the difference while the memory began at the same time) */
	double peek_since;
	uint64_t peek_samples;
};

/* ---- the terminal and signals (top-term.c) ---- */

/* set by the signal handler: q or a signal to end, a resize, ^Z */
extern volatile sig_atomic_t top_got_quit, top_got_winch, top_got_tstp;
/* The pipe the handler wakes, stdin's keys (keys) and the signals' handlers
 * (^Z's too when interactive): an epoll set of them, or -errno. */
int top_wakeups_open(bool keys, bool interactive);
void top_wakeups_close(int epfd);
/* Reads what the handler wrote, so that the next wait waits. */
void top_drain_wakeups(void);
/* The alternate screen, the cursor hidden, keys unbuffered (in_fd >= 0);
 * top_term_restore (also at exit) undoes all of it. */
void top_term_enter(int in_fd, int out_fd);
void top_term_restore(void);
/* ^Z: the terminal back to the shell while stopped, the view back after. */
void top_suspend(bool keys, int out_fd);
void top_term_size(int fd, int *w, int *h);

/* ---- the session (top-session.c) ---- */

struct tally_recording;
struct tally_sampling;
/* Ticks of a recording until it ends or top is done; 0 or the exit code. */
int top_run_recording(struct top *t, struct tally_recording *rec, const struct tally_sampling *smp,
		      const char *target);
/* Ticks of the daemon's memory (--db) until top is done; 0 or 1. */
int top_run_daemon(struct top *t, int epfd);

#endif
