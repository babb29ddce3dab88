/* The diff of two profiles (`tally diff BASE NEW`): per function, per source
 * line or per function with its callees (inclusive), the share of each side's
 * samples and the change in points, from the rows of each side's view model
 * (tally/view.h). Rows are matched by image name and function name (and
 * source file and line), never by address or offset, so that a rebuilt binary
 * diffs cleanly; a row only one side has says so. Its renderers: text and
 * JSON (lib/report/render.c), the differential flame graph (tally/flame.h),
 * folded stacks with two counts (tally/export.h), the HTML page (tally/html.h). */
#ifndef TALLY_DIFF_H
#define TALLY_DIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/select.h"
#include "tally/symbols.h"
#include "tally/util.h"

enum tally_diff_view {
	TALLY_DIFF_SYMBOLS,  /* self samples per function */
	TALLY_DIFF_LINES,    /* self samples per (function, source file, line) */
	TALLY_DIFF_CHILDREN, /* inclusive samples per function (call stacks) */
};

/* One side of a diff: a database with the selection applied
 * (tally_select_apply), its resolver, and the event compared. */
struct tally_diff_side {
	const struct tally_db *db;
	struct tally_resolver *res;
	const struct tally_select *sel; /* checked against db (tally_select_check) */
	int ev;
	const char *input; /* as the user named it */
};

enum tally_diff_only { TALLY_DIFF_BOTH, TALLY_DIFF_BASE_ONLY, TALLY_DIFF_NEW_ONLY };

struct tally_diff_row {
	const char *image; /* the image's name (libc.so.6, kernel) */
	const char *name;  /* the function */
	const char *file;  /* lines: the source file, NULL where the code has none */
	int line;
	bool inlined;
	uint64_t base, new_;       /* samples on each side (inclusive for children) */
	double base_pct, new_pct;  /* of each side's total */
	double points;             /* new_pct - base_pct */
	double delta;              /* new_ - base, in samples */
	enum tally_diff_only only;
};

/* An image of one side whose code that side could not name: a file image
 * (exec, lib) with no verified file (its recorded path holds another build,
 * or nothing, and no copy was found: not --image-path, not the build-id
 * cache), so its rows are raw offsets that never match the other side's
 * names. One per (side, image), in the order met. */
struct tally_diff_unnamed {
	bool new_side;
	uint32_t image;     /* in that side's database */
	const char *name;   /* the image's name */
	const char *path;   /* its recorded path */
	const char *why;    /* the resolver's note (why it is not named), or NULL */
	uint64_t value;     /* what its rows hold in the diff (samples, or their weight) */
};

struct tally_diff {
	enum tally_diff_view view;
	bool absolute;       /* sorted by the change in samples, not in points */
	const char *event;   /* the event's name (base's string) */
	/* base's database and event: what the values are (tally/view.h) */
	const struct tally_db *db;
	int ev;
	const char *base_input, *new_input;
	uint64_t base_total, new_total;
	struct tally_diff_row *v; /* by the size of the change, largest first */
	size_t n, alloc;
	char **owned;
	size_t nowned, aowned;
	struct tally_diff_unnamed *unnamed; /* --fail-above refuses to judge these */
	size_t nunnamed, aunnamed;
};

/* Builds the rows of view from each side's view model. The strings belong to
 * d; d lives no longer than the sides' databases. */
void tally_diff_build(struct tally_diff *d, const struct tally_diff_side *base,
		      const struct tally_diff_side *new_, enum tally_diff_view view, bool absolute);
void tally_diff_release(struct tally_diff *d);

/* The rows whose share grew by more than pct points (--fail-above), largest
 * growth first: a new array of pointers into d (the caller frees), *n how many. */
const struct tally_diff_row **tally_diff_grew(const struct tally_diff *d, double pct, size_t *n);

/* Makes base's event ev weigh as much in all as new_'s event new_ev, so that
 * a tool that subtracts one side from the other (go tool pprof -diff_base)
 * shows the change of shares: base's values (its period weights once
 * tally_db_weigh ran, else its sample counts) are scaled to new_'s total
 * (flat profiles and stacks each, tally_scale_counts); a weighted base keeps
 * its sample counts as sampled (pprof's samples type). Other events are left
 * as they are. */
void tally_diff_normalize(struct tally_db *base, int ev, const struct tally_db *new_, int new_ev);

/* Scales v[0..n) (adding up to from, not 0) to add up to exactly `to`: each
 * rounded down, then the largest remainders (then the lowest index) get one more. */
void tally_scale_counts(uint64_t *v, size_t n, uint64_t from, uint64_t to);

/* The text of a diff (docs/cli.md, tally diff): top rows (0: all). */
void tally_diff_text(struct strbuf *out, const struct tally_diff *d, uint64_t top);
/* The same as one JSON object and a newline (docs/report-json.md, "diff"). */
void tally_diff_json(struct strbuf *out, const struct tally_diff *d, uint64_t top);

#endif
