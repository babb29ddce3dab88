/* The report's text and JSON renderers (lib/report/render.c): what
 * `tally report` prints, written into a strbuf from the rows of the view
 * model (tally/view.h). They never print or exit: the caller writes the
 * buffer where it wants and prints the warnings handed back. docs/cli.md
 * describes the text, docs/report-json.md the JSON. */
#ifndef TALLY_REPORT_H
#define TALLY_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/select.h"
#include "tally/symbols.h"
#include "tally/util.h"

struct tally_report_opts {
	const char *input;              /* the database as the user named it */
	const struct tally_select *sel; /* checked (tally_select_check) against db */
	bool symbols, lines;            /* the flat views: functions, or source lines, per image */
	bool flat;                      /* with symbols or lines: one table across the images */
	/* the call-graph views (db selected by tally_view_select) */
	bool children, callgraph, tree;
	const char *callers, *callees;
	double percent_limit;           /* rows under it (of their % column) are left out */
	/* at most this many rows per table, and images with --symbols/--lines (0: all) */
	uint64_t top;
	/* text: names with their template arguments and parameters */
	bool full_names;
	const char *explain_image;      /* --explain IMAGE, or NULL for every image with samples */
};

/* Whether o asks for a call-graph view. */
bool tally_report_is_cg(const struct tally_report_opts *o);

/* The report of every selected event as text (docs/cli.md), appended to out,
 * then the lost-samples line. Warnings (a --callers or --callees function
 * that is not in an event's stacks) go to w (may be NULL). */
void tally_report_text(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_report_opts *o, struct tally_warnings *w);
/* The same report as one JSON object and a newline (docs/report-json.md). */
void tally_report_json(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_report_opts *o, struct tally_warnings *w);

/* --by-label KEY: the report (text, or JSON with json) once per value of
 * label key on db's profiles, sorted, and once for the samples without it,
 * appended to out. db's counts are changed for each value's view and put
 * back after the last. -EINVAL with tally_seterr when no profile has the
 * label (the error lists those there are) or o->sel has no room for one
 * more label. */
int tally_report_by_label(struct strbuf *out, struct tally_db *db, struct tally_resolver *res,
			  const struct tally_report_opts *o, const char *key, bool json,
			  struct tally_warnings *w);

/* --explain: per image with samples of event ev (or the image o->explain_image
 * names), where tally looked for it and its debug info, what it found and how
 * many samples got names; text or JSON. -ENOENT with tally_seterr (listing the
 * images there are) when explain_image names none. */
int tally_report_explain(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
			 const struct tally_report_opts *o, int ev, bool json);

/* One warning per image the resolver opened whose file is wrong or damaged
 * (with all, every note: -v): whatever the view, once, not once per event. */
void tally_report_image_warnings(const struct tally_db *db, struct tally_resolver *res, bool all,
				 struct tally_warnings *w);
/* The same, but not for the images skip[i] says (skip NULL: none): those an
 * error names already (diff --fail-above). */
void tally_report_image_warnings_skip(const struct tally_db *db, struct tally_resolver *res,
				      bool all, const bool *skip, struct tally_warnings *w);
/* The recording's warnings about JIT maps and jitdumps (untrusted, damaged). */
void tally_report_jit_warnings(const struct tally_db *db, struct tally_warnings *w);

#endif
