/* What part of a database a report or an export looks at: the filters that
 * `tally report`, `tally export` and `tally diff` share (--image, --pid,
 * --comm, --event, --exclude-dependent, --label), parsed and applied in one
 * place. */
#ifndef TALLY_SELECT_H
#define TALLY_SELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/options.h"

#define TALLY_SELECT_LABELS 16

struct tally_select {
	const char *image, *comm, *event;
	int pid;
	bool excl;  /* --exclude-dependent: only the programs' own executables */
	bool samples; /* --samples: raw sample counts, not period weights */
	int ev_only; /* after tally_select_check: the --event index, or -1 for all */
	/* --label KEY=VALUE (as given): a label set is selected when, for each
	 * KEY named, its value is one of the VALUEs given (an empty VALUE: the
	 * set has no KEY) */
	const char *labels[TALLY_SELECT_LABELS];
	int nlabels;
	/* after tally_select_check: --comm is matched against the comm label the
	 * recording kept (docs/format.md), not the process list */
	bool comm_by_label;
};

/* The codes of the options in tally_select_group. */
enum {
	TALLY_OPT_SEL_IMAGE = 0x1000,
	TALLY_OPT_SEL_PID,
	TALLY_OPT_SEL_COMM,
	TALLY_OPT_SEL_EVENT,
	TALLY_OPT_SEL_EXCL,
	TALLY_OPT_SEL_LABEL,
	TALLY_OPT_SEL_SAMPLES,
};

void tally_select_init(struct tally_select *s);
/* 1 when opt was a selection option (taken), 0 when it is not one, -errno with
 * tally_seterr on a bad value. */
int tally_select_getopt(struct tally_select *s, int opt, const char *arg);
/* Checks the selection against an open database (per-pid filters need a
 * --per-pid recording; the event must exist), sets ev_only and, unless
 * --samples asked for the raw sample counts, makes db period-weighted
 * (tally_db_weigh: every view and export built from it afterwards shows
 * time or events, docs/sampling.md "weights"). -EINVAL with
 * tally_seterr naming the database and the fix; warnings (a pid with no
 * samples) are added to w (may be NULL). */
int tally_select_check(struct tally_select *s, struct tally_db *db, const char *input,
		       struct tally_warnings *w);

/* Whether the filters (--image, --pid, --comm, --label, --exclude-dependent)
 * select any sample of the selected events (after tally_select_check): 0 when
 * they do or when none is given, else -ENOENT with tally_seterr saying
 * "'INPUT' has no samples in the selection: " and which filter matched
 * nothing and what there is instead (the images, processes, commands or
 * label values with samples). */
int tally_select_nonempty(const struct tally_select *s, const struct tally_db *db,
			  const char *input);

bool tally_select_image_matches(const struct tally_db_image *im, const char *want);
/* Whether one profile (image, pid) is selected. */
bool tally_select_prof(const struct tally_select *s, const struct tally_db *db,
		       const struct tally_db_prof *pf);
/* Whether a process is selected (--pid, --comm): for stack-based views. */
bool tally_select_pid(const struct tally_select *s, const struct tally_db *db, int pid);
/* Whether a label set (db->labels id) is selected (--label). */
bool tally_select_label(const struct tally_select *s, const struct tally_db *db, uint32_t label);
/* Whether an event is selected. */
static inline bool tally_select_event(const struct tally_select *s, int ev)
{
	return s->ev_only < 0 || ev == s->ev_only;
}

/* --image, --pid, --comm, --event, --exclude-dependent, --label as an option group
 * (options.h), for a struct tally_select context. */
extern const struct tally_optgroup tally_select_group;

/* Applies the selection to db in place: the counts (flat and stack) of
 * unselected profiles, processes and events become zero. A stack is selected
 * when its process is (--pid, --comm) and, with stacks_by_image, its leaf's
 * image is (--image, --exclude-dependent), as a flat profile is. */
void tally_select_apply(struct tally_db *db, const struct tally_select *sel, bool stacks_by_image);
/* Samples of one event after the selection: flat, and in stacks. */
uint64_t tally_select_total(const struct tally_db *db, int event, bool stacks);

#endif
