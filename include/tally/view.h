/* The report's view model: the rows every rendering of a report lists, built
 * in one place from a database, a resolver and a selection. The text and JSON
 * renderers (tally/report.h) and the HTML page (tally/html.h) take their rows
 * from here, so the three list the same rows with the same counts:
 *
 *   image rows      one per image (and process with --per-pid) with
 *                   samples of the event in the selected profiles
 *   function rows   the flat profiles of some image rows, one per function
 *                   (the innermost frame: an inlined function when DWARF has
 *                   one), or with lines one per (file, line, function)
 *   call-graph rows one per function on the selected stacks, self and
 *                   inclusive, with its callers and callees; trees top-down
 *                   or around one function (tally/callgraph.h builds them)
 */
#ifndef TALLY_VIEW_H
#define TALLY_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/callgraph.h"
#include "tally/db.h"
#include "tally/select.h"
#include "tally/symbols.h"

struct tally_view_row {
	uint32_t image;   /* db->images */
	int32_t pid;      /* the process of a --per-pid profile, else 0 */
	size_t prof;      /* image rows: the (first) profile (db->profs) */
	const size_t *profs; /* image rows: every selected profile of the row (its image and
			      * pid, one per label set of a merge); nprofs of them */
	size_t nprofs;
	/* image rows: the image's name, with " [PID]" per process; else the function */
	const char *name;
	uint64_t addr;    /* the function's link-time address when has_addr */
	/* false for [unknown], raw offsets and inlined functions (their addr is an id) */
	bool has_addr;
	bool inlined;     /* an inlined function (from DWARF) */
	const char *file; /* line rows: the source file, NULL where the code has no line */
	int line;
	uint64_t samples; /* the row's samples (self samples for functions): their
			   * weight when db is period-weighted (tally_db_weigh) */
	uint64_t nsamples; /* image, function and line rows: the raw sample count */
	uint64_t incl;    /* call-graph rows: samples with the function anywhere on the stack */
	uint32_t func;    /* call-graph rows: the function (cg.funcs) */
	size_t seq;       /* the order the row was found in: the last tie-break of every sort */
};

/* A table of rows, sorted. The names belong to the table, the resolver or
 * the call graph the rows came from; the table lives no longer than those. */
struct tally_view_rows {
	struct tally_view_row *v;
	size_t n, alloc;
	uint64_t total; /* the samples of all the rows (self samples for call graphs) */
	uint64_t ntotal; /* image, function and line rows: their raw sample count */
	char **owned;
	size_t nowned, aowned;
	size_t *profs; /* the image rows' profiles */
};
void tally_view_rows_release(struct tally_view_rows *t);

/* Image rows of event ev: one per image (and process, with --per-pid) whose
 * profiles sel selects and have samples of ev (the profiles of a merge's
 * label sets summed), by samples (then name, then pid). t->total gets the
 * event's selected samples. */
void tally_view_images(struct tally_view_rows *t, const struct tally_db *db,
		       const struct tally_select *sel, int ev);

/* Function rows (lines: file:line rows) of event ev in the profiles of the
 * image rows images[0..nimages): one per (image, function, address, inlined
 * [, file, line]) summed over those profiles, by samples (then function,
 * file, line, image, address). `tally report --symbols` takes one image row
 * at a time, the HTML report's table without stacks all of them at once. */
void tally_view_functions(struct tally_view_rows *t, const struct tally_db *db,
			  struct tally_resolver *res, int ev, const struct tally_view_row *images,
			  size_t nimages, bool lines);

/* Applies the selection to db in place for the call-graph views: a stack
 * counts when its process is selected and the function it was sampled in
 * is in a selected image (as `tally export` selects stacks); flat counts
 * and events outside the selection become zero (tally_select_apply). */
void tally_view_select(struct tally_db *db, const struct tally_select *sel);

/* The call-graph view of one event: the model of tally/callgraph.h over the
 * stacks of the processes sel selects (db selected by tally_view_select),
 * and its functions as rows by inclusive samples (then self, then name). */
struct tally_view_cg {
	struct tally_cg cg;
	struct tally_view_rows funcs; /* every function; .func indexes cg.funcs */
	/* the arcs of each function, in arc order: callers of f at
	 * in[in_first[f] .. in_first[f + 1]), callees at out[out_first[f] ..) */
	uint32_t *in, *in_first, *out, *out_first;
};
void tally_view_cg_build(struct tally_view_cg *v, const struct tally_db *db,
			 struct tally_resolver *res, const struct tally_select *sel, int ev);
/* The same with tally_cg_build_flags' flags (TALLY_CG_NO_ARCS: no arcs, for
 * the views that show none). */
void tally_view_cg_build_flags(struct tally_view_cg *v, const struct tally_db *db,
			       struct tally_resolver *res, const struct tally_select *sel, int ev,
			       unsigned flags);
void tally_view_cg_release(struct tally_view_cg *v);
/* The arcs (indices into v->cg.arcs) that call function f (callees: that f
 * calls), in the order the model found them; *n gets how many. */
const uint32_t *tally_view_cg_arcs(const struct tally_view_cg *v, uint32_t f, bool callees,
				   size_t *n);

/* The children of tree node `at` (tally_cg_tree) that hold at least limit
 * percent of base, by count: a new array the caller frees; *n gets its length. */
uint32_t *tally_view_tree_kids(const struct tally_cg_node *nodes, uint32_t at, uint64_t base,
			       double limit, size_t *n);

/* A percentage, 0 of nothing. */
static inline double tally_view_pct(uint64_t n, uint64_t d)
{
	return d ? 100.0 * (double)n / (double)d : 0.0;
}

/* ---- what the values are (docs/sampling.md, "weights") ---- */

/* Whether db can be period-weighted: it has weights of its own, or a
 * period-mean for every event (a database merged before weights were kept
 * has neither: its views stay in samples). */
bool tally_view_can_weigh(const struct tally_db *db);
/* tally_db_weigh(db) when it can be weighed and samples is false. */
void tally_view_weigh(struct tally_db *db, bool samples);

/* The values of event ev in db's views: "ns" or "events" when db is period-
 * weighted (tally_db_weigh), "samples" when it holds the raw sample counts. */
const char *tally_view_unit(const struct tally_db *db, int ev);
/* The heading of a text column of those values: "msec" (time is shown in
 * milliseconds with one decimal), "events" or "samples". */
const char *tally_view_heading(const struct tally_db *db, int ev);
/* Appends value v of event ev as its column shows it, right-aligned in width
 * (0: as it comes): milliseconds with one decimal for time, else an integer. */
void tally_view_value(struct strbuf *sb, const struct tally_db *db, int ev, uint64_t v, int width);
/* The same followed by a space and its unit, singular for 1: "12.5 msec",
 * "1 sample", "300 events". */
void tally_view_value_unit(struct strbuf *sb, const struct tally_db *db, int ev, uint64_t v);
/* Event ev's whole: its total weight when db is period-weighted, else its
 * samples (db->samples, from the session). */
uint64_t tally_view_event_total(const struct tally_db *db, int ev);

/* What event ev's values are, for a "# values:" line (no "# ", no newline):
 * e.g. "msec, weighted by period (the time each sample stands for; 840
 * samples in all): --samples for sample counts"; off-CPU events are waits
 * weighed by their time, a --wall column both. */
void tally_view_values_desc(struct strbuf *sb, const struct tally_db *db, int ev);

/* What a label selection (report --label, each group of --by-label) holds,
 * for its header: its samples, and from a merge's sources (tally_db_source)
 * the recordings its samples came from. */
struct tally_view_labelspan {
	bool active;        /* the selection has labels (else nothing below is set) */
	struct strbuf what; /* "host=h1", the labels selected */
	uint64_t samples;   /* event ev's samples in it (counts, not weights) */
	/* the recordings its samples came from (0: the database has no sources) */
	size_t nsources;
	double duration;    /* their durations summed, seconds (-1: unknown) */
	const char *start, *stop; /* the earliest start, the latest stop (db's strings), or NULL */
	const char *command;      /* their command when they share one, else NULL */
};
void tally_view_labelspan(struct tally_view_labelspan *out, const struct tally_db *db,
			  const struct tally_select *sel, int ev);
void tally_view_labelspan_release(struct tally_view_labelspan *s);
/* tally_view_values_desc with the samples of a selection: "N samples in
 * WHAT, of M in all" (what NULL: the plain description). */
void tally_view_values_desc_sel(struct strbuf *sb, const struct tally_db *db, int ev, uint64_t n,
				const char *what);
/* How event ev was taken, for an "# event:" line: "off-cpu, every wait off
 * the CPU (blocked)", "wall: cpu-clock at ..., and every wait off the CPU",
 * or "cpu-clock, " and sampling (the session's "sampling" value). */
void tally_view_event_desc(struct strbuf *sb, const struct tally_db *db, int ev);

/* The lost samples' share of all samples, recorded and lost: summed as
 * doubles, so that counts near 2^64 (a damaged or hostile session) cannot
 * wrap the sum and give a share over 100%. */
double tally_view_lost_pct(const struct tally_db *db);

#endif
