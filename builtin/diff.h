/* tally diff's parts (builtin/diff.c: options and the two sides;
 * builtin/diff-out.c: the outputs and the --fail-above gate). */
#ifndef TALLY_BUILTIN_DIFF_H
#define TALLY_BUILTIN_DIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/callgraph.h"
#include "tally/db.h"
#include "tally/diff.h"
#include "tally/select.h"
#include "tally/symbols.h"

/* The exit status when something grew by more than --fail-above. */
#define EXIT_GREW 3

struct dopts {
	bool symbols, lines, children, absolute, json;
	const char *html, *format, *output;
	double fail_above;
	bool fail_set;
	uint64_t top;
	double percent_limit;
	bool plimit_set;
};

/* One side: the database, its selection (its own copy: event indices differ)
 * and its resolver. */
struct side {
	const char *input;
	struct tally_db db;
	bool open;
	struct tally_select sel;
	struct tally_resolver *res;
	int ev;
	struct tally_cg cg;
	bool have_cg;
};

/* The diff in the form the options ask: 0, or 1 when it could not be written. */
int write_diff(const struct tally_diff *d, struct side *base, struct side *new_,
	       const struct dopts *o, bool stacks);
/* A gate that could not name a side's code neither passes nor fails: one
 * line naming the image (its share, why) and the fixes, status 2; else 0. */
int check_named(const struct tally_diff *d, const struct side *base, const struct side *new_);
/* Status EXIT_GREW and one line naming what grew past --fail-above; 0 otherwise. */
int check_growth(const struct tally_diff *d, double limit);

#endif
