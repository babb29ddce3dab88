/* tally top: the live view's core (docs/top.md). Three parts, none of which
 * prints, reads a terminal or samples:
 *
 *  - the window (struct tally_top): the hottest functions, images and
 *    commands over a decaying window; each tick multiplies every score by
 *    the decay (7/8, as perf top) and adds the samples that came in it;
 *  - the feed (struct tally_top_feed): turns one tick's database (from the
 *    recording's aggregate, or a daemon's in-memory samples read over its
 *    control socket) into the window's input, symbolizing each distinct
 *    (image, offset) once through the resolver (lib/symbols);
 *  - the screen: the view's rows as a text snapshot or as a full terminal
 *    screen in ANSI escapes, and the keys that steer it.
 *
 * builtin/top.c drives them: the recording (record.h) or the daemon, the
 * terminal (termios, SIGWINCH), the clock. */
#ifndef TALLY_TOP_H
#define TALLY_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/agg.h"
#include "tally/db.h"
#include "tally/symbols.h"
#include "tally/util.h"

/* ---- the window ---- */

/* What each tick keeps of the window before it adds its samples. */
#define TALLY_TOP_DECAY (7.0 / 8.0)

enum tally_top_view { TALLY_TOP_FUNCTIONS, TALLY_TOP_IMAGES, TALLY_TOP_COMMANDS };
enum tally_top_sort {
	TALLY_TOP_BY_SHARE, /* the view's share: inclusive with call graphs, else self */
	TALLY_TOP_BY_SELF,
	TALLY_TOP_BY_NAME,
	TALLY_TOP_BY_IMAGE,
	TALLY_TOP_BY_COMMAND,
	TALLY_TOP_NSORTS,
};

struct tally_top;

/* A frame as the window takes it: names (copied). */
struct tally_top_frame {
	const char *image; /* the image's name (libc.so.6, kernel) */
	const char *func;  /* the function's name, "[unknown]" when none */
};

/* *out is the caller's (tally_top_free). callgraph: samples come with their
 * stacks, and functions and images get an inclusive share besides self. */
struct tally_top *tally_top_new(bool callgraph);
void tally_top_free(struct tally_top *t);
bool tally_top_callgraph(const struct tally_top *t);
/* A new tick: every score is multiplied by decay (0 < decay <= 1; 1 keeps
 * everything), and what falls under a hundredth of a sample is forgotten. */
void tally_top_tick(struct tally_top *t, double decay);
/* count samples of command comm (NULL or "": "?") at a stack (n frames, the
 * leaf first; n >= 1; only the leaf without call graphs). */
void tally_top_add(struct tally_top *t, const char *comm, const struct tally_top_frame *frames,
		   size_t n, double count);
/* The samples in the window (decayed), of every command, unfiltered. */
double tally_top_total(const struct tally_top *t);

/* What a view shows: the view, its order and its filters (substrings of the
 * command's or image's name; NULL or "": none). */
struct tally_top_query {
	enum tally_top_view view;
	enum tally_top_sort sort;
	const char *comm_filter, *image_filter;
};

/* One row: functions name a function of image; images name the image;
 * commands name the command. comm is the command with the most of the row's
 * samples, ncomms how many commands have some. self and total (inclusive, with
 * call graphs; else equal to self) are decayed samples: divide by
 * tally_top_total for a share. Strings belong to the window until its next
 * tick, add or free. */
struct tally_top_row {
	const char *name, *image, *comm;
	size_t ncomms;
	double self, total;
};

/* The rows of a view in its order (ties: by name), into *rows (the caller
 * frees the array, not the strings); how many. */
size_t tally_top_rows(struct tally_top *t, const struct tally_top_query *q,
		      struct tally_top_row **rows);

/* ---- the feed ---- */

struct tally_top_feed;

/* ro: where symbols are searched (may be NULL: the defaults). *out is the
 * caller's (tally_top_feed_free). */
struct tally_top_feed *tally_top_feed_new(const struct tally_resolver_opts *ro);
void tally_top_feed_free(struct tally_top_feed *f);

/* Adds one tick's samples of db (event 0; stacks when the window has call
 * graphs and db has them) to the window. cumulative: db holds everything
 * since `since` (a daemon's memory, which it empties at every flush), and only
 * what grew since the previous call is added; a different `since` starts
 * again. Otherwise db holds the tick's samples only. Commands are named by
 * db's task list (per-pid databases; else "?"). The samples added go to
 * *added (may be NULL). 0, or -errno with tally_seterr (the resolver's). */
int tally_top_feed_db(struct tally_top_feed *f, struct tally_top *t, const struct tally_db *db,
		      bool cumulative, double since, double *added);

/* A daemon's peek (a bundle: docs/format.md) read in memory: the files a
 * database directory holds, parsed as tally_db_open_dir parses them, with no
 * temporary directory (a tick must not write and remove a file per process).
 * The copies of JIT maps and of the vDSO are left out: their code is
 * [unknown]. db is the caller's (tally_db_release). 0 or -errno with
 * tally_seterr naming what and the file. */
int tally_top_db_from_bundle(struct tally_db *db, const char *buf, size_t len, const char *what);

/* ---- the screen and the keys ---- */

/* The view's state, which the keys change. */
struct tally_top_ui {
	struct tally_top_query q;
	bool frozen; /* the screen is not refreshed (sampling goes on) */
	bool quit;
	bool help;   /* the keys' help instead of the rows */
	int prompt;  /* 'c' or 'i' while a filter is typed, else 0 */
	struct strbuf input;
	char *comm_filter, *image_filter; /* owned; q points at them */
};
void tally_top_ui_init(struct tally_top_ui *ui, bool callgraph);
void tally_top_ui_release(struct tally_top_ui *ui);
/* One key (a byte from the terminal: 27 for Escape, 3 for ^C). 1 when the
 * screen must be drawn again, 0 when nothing changed. */
int tally_top_key(struct tally_top_ui *ui, int key);

/* What the screen says above its rows. */
struct tally_top_status {
	const char *target;  /* "command 'make'", "pids 12,34", "system", "daemon 'DIR'" */
	const char *events;  /* "cpu-clock" */
	double rate;         /* samples a second in the last tick */
	uint64_t samples, lost; /* since the start */
	double interval;     /* seconds a tick */
	const char *message; /* the last error or note, or NULL */
	/* what the rows' values are: "msec" (the window holds nanoseconds of
	 * period-weighted time, shown as milliseconds), "events", or NULL for
	 * samples */
	const char *unit;
};

/* A snapshot as text for scripts: one header line, "# " and the view, then a
 * line of column names, then one line a row: share (percent), [self share,]
 * value (decayed; st->unit, else samples), then the view's columns as the
 * screen has them (functions: image, command, function; images: command,
 * image; commands: command), the name last (it may hold blanks).
 * At most max rows (0: all). Appended to out. */
void tally_top_text(struct tally_top *t, const struct tally_top_query *q,
		    const struct tally_top_status *st, size_t max, struct strbuf *out);
/* The whole terminal screen, width x height, in ANSI escapes (home, each line
 * cleared, reverse video for the column names): the status, the rows that fit
 * (names cut to the width), the prompt or the keys' line at the bottom. */
void tally_top_screen(struct tally_top *t, const struct tally_top_ui *ui,
		      const struct tally_top_status *st, int width, int height, struct strbuf *out);

#endif
