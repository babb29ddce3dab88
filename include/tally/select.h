/* What part of a database a report or an export looks at: the filters that
 * `tally report` and `tally export` share (--image, --pid, --comm, --event,
 * --exclude-dependent), parsed and applied in one place. */
#ifndef TALLY_SELECT_H
#define TALLY_SELECT_H

#include <stdbool.h>

#include "tally/db.h"

struct tally_select {
	const char *image, *comm, *event;
	int pid;
	bool excl;  /* --exclude-dependent: only the programs' own executables */
	int ev_only; /* after tally_select_check: the --event index, or -1 for all */
};

/* getopt_long codes of the shared options: put TALLY_SELECT_OPTIONS in the
 * command's option table and pass every code to tally_select_getopt. */
enum {
	TALLY_OPT_SEL_IMAGE = 0x1000,
	TALLY_OPT_SEL_PID,
	TALLY_OPT_SEL_COMM,
	TALLY_OPT_SEL_EVENT,
	TALLY_OPT_SEL_EXCL,
};
#define TALLY_SELECT_OPTIONS                                                   \
	{ "image", required_argument, NULL, TALLY_OPT_SEL_IMAGE },             \
	{ "pid", required_argument, NULL, TALLY_OPT_SEL_PID },                 \
	{ "comm", required_argument, NULL, TALLY_OPT_SEL_COMM },               \
	{ "event", required_argument, NULL, TALLY_OPT_SEL_EVENT },             \
	{ "exclude-dependent", no_argument, NULL, TALLY_OPT_SEL_EXCL }

/* The usage lines of the shared options. */
#define TALLY_SELECT_USAGE                                                                      \
	"      --exclude-dependent  only the profiled programs' own executables\n"                 \
	"      --image NAME         only this image (file name or full path)\n"                    \
	"      --pid PID            only this process (needs a --per-pid database)\n"              \
	"      --comm NAME          only processes with this name (needs --per-pid)\n"             \
	"      --event NAME         only this event\n"

void tally_select_init(struct tally_select *s);
/* 1 when opt was a selection option (taken), 0 when it is not one, -1 with
 * tally_seterr on a bad value. */
int tally_select_getopt(struct tally_select *s, int opt, const char *arg);
/* Checks the selection against an open database (per-pid filters need a
 * --per-pid recording; the event must exist) and sets ev_only. -1 with
 * tally_seterr naming the database and the fix; warnings (a pid with no
 * samples) are added to w (may be NULL). */
int tally_select_check(struct tally_select *s, const struct tally_db *db, const char *input, struct tally_warnings *w);

bool tally_select_image_matches(const struct tally_db_image *im, const char *want);
/* Whether one profile (image, pid) is selected. */
bool tally_select_prof(const struct tally_select *s, const struct tally_db *db, const struct tally_db_prof *pf);
/* Whether a process is selected (--pid, --comm): for stack-based views. */
bool tally_select_pid(const struct tally_select *s, const struct tally_db *db, int pid);
/* Whether an event is selected. */
static inline bool tally_select_event(const struct tally_select *s, int ev)
{
	return s->ev_only < 0 || ev == s->ev_only;
}

#endif
