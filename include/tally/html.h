/* The HTML report (`tally report --html FILE`): one self-contained page (its
 * style and scripts inline, no network access, no external fonts) with the
 * summary by image, a sortable table of functions, the flame graph and its
 * inverse, the annotated source of the hottest functions, and the session's
 * metadata, unwind and lost-sample figures. docs/html.md describes it. */
#ifndef TALLY_HTML_H
#define TALLY_HTML_H

#include "tally/db.h"
#include "tally/select.h"
#include "tally/symbols.h"
#include "tally/util.h"

struct tally_html_opts {
	const char *input;              /* the database as the user named it */
	const struct tally_select *sel; /* checked (tally_select_check) against db */
	double percent_limit;           /* flame frames and table rows under it fold or drop */
	/* how many of the hottest functions get their source (0: none) */
	unsigned annotate;
	/* function table: the top N by inclusive and by self (0: TALLY_HTML_MAX_ROWS) */
	uint64_t max_rows;
};

/* The default number of functions whose source the report annotates. */
#define TALLY_HTML_ANNOTATE 5
/* ... among those with at least this percentage of the event's samples. */
#define TALLY_HTML_ANNOTATE_MIN 1.0
/* A function table has the top this many by inclusive samples and the top
 * this many by self samples (the page states what it left out). */
#define TALLY_HTML_MAX_ROWS 500

/* Appends the page to out. */
void tally_html_report(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_html_opts *o);

/* Fails with a one-line error (tally_seterr) when path cannot be written: a
 * directory, or in a directory that does not exist or is not writable. For
 * checking before the work. */
int tally_html_check_target(const char *path);

/* Applies the selection to db (tally_select_apply: a stack is kept when its
 * process and its leaf's image are selected), builds the page and writes it
 * to path atomically (never a partial file). 0, or -errno with tally_seterr
 * naming the file. */
int tally_html_write(const char *path, struct tally_db *db, struct tally_resolver *res,
		     const struct tally_html_opts *o);

/* tally diff --html: the rows of a diff as a sortable table, and with call
 * stacks on both sides (base_cg and new_cg not NULL) the differential flame
 * graph (tally_flame_diff_svg), as one self-contained page appended to out. */
struct tally_diff;
struct tally_cg;
struct tally_html_diff_opts {
	double percent_limit; /* flame frames under it fold */
	uint64_t max_rows;    /* the table's rows (0: TALLY_HTML_MAX_ROWS) */
};
void tally_html_diff(struct strbuf *out, const struct tally_diff *d, const struct tally_cg *base_cg,
		     const struct tally_db *base_db, const struct tally_cg *new_cg,
		     const struct tally_db *new_db, const struct tally_html_diff_opts *o);

#endif
