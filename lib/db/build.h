/* What the builder's files share (lib/db/build.c adds, lib/db/build-finish.c
 * puts the result in order and hands it out as a database). */
#ifndef TALLY_DB_BUILD_H
#define TALLY_DB_BUILD_H

#include "stacks.h"
#include "tally/db.h"
#include "tally/util.h"

#define NSUMMED 8          /* summed_keys */
#define NFPSTOPS (NSUMMED + 3) /* after the three DWARF stop reasons: fp-repair-stops */
#define NSUMS (NFPSTOPS + TALLY_FP_NSTOPS_SAID)

struct bcell {
	uint32_t image;
	int32_t pid;
	uint64_t offset;
	uint32_t label;
};

/* Strings kept once (module lines, session keys that vary). */
struct bstrs {
	char **v;
	size_t n, alloc;
	struct tally_hidx idx;
};

struct tally_db_builder {
	int nevents;
	char **events;
	bool per_pid, stacks;
	struct tally_meta session;
	bool sources; /* a database was added: its session is merged, not copied */
	double start, stop, duration;
	bool have_start, have_stop;
	/* session counters that add up: summed_keys, the three DWARF stop reasons, fp-repair-
	 * stops */
	uint64_t sums[NSUMS];
	/* weights were given (a database added, or tally_db_builder_entry_w):
	 * the result has them; else they are dropped at finish */
	bool weighted;
	uint64_t *wtotals;     /* per event: the weights added */
	uint64_t *rs_reached, *rs_total; /* per event: randomized-samples of the databases added */
	bool rs_any;

	struct tally_db_image *images;
	size_t nimages, aimages;
	struct tally_hidx image_idx;

	struct bcell *cells;
	size_t ncells, acells;
	uint64_t *ccounts; /* per cell: the counts of the events, then their weights */
	size_t accounts;
	struct tally_hidx cell_idx;

	struct stackset ss;           /* the stacks, equal ones summed */
	struct tally_db_lazy *lazy;   /* stacks of the sources left unread, added after ss's */

	struct tally_ksym *ksyms;
	size_t nksyms, aksyms;
	struct tally_hidx ksym_idx;

	struct tally_db_task *tasks;
	size_t ntasks, atasks;
	struct tally_hidx task_idx;

	uint64_t lost, throttled;
	char *modules;

	/* label sets: id 0 is the empty set, id i is labels[i - 1] */
	struct tally_labelset *labels;
	size_t nlabels, alabels;
	struct tally_hidx label_idx;
	struct tally_labelset source; /* added to the sets of the databases added next */
	bool track_sources;           /* tally_db_builder_source was called: keep the sources */
	struct tally_db_source *srcs;
	size_t nsrcs, asrcs;

	/* tally_db_builder_canonical: the result does not depend on the order */
	bool canonical;
	/* tally_db_builder_tasks_by_program: one task per (comm, exe) */
	bool by_program;
	struct bstrs module_lines; /* the union of the module lists */
	struct bstrs varies;       /* session keys whose values differ between the parts */
	uint64_t duration_ms;
	uint64_t *totals;          /* per event: the samples of the databases added */
};

/* exec and lib are one kind for identity: which one a file is depends on which
 * processes had samples, which differs between the databases merged */
const char *tally_db_kind_class(const char *kind);

#endif
