/* Per-line samples of one function, with its source text: what the HTML
 * report shows for the hottest functions. Lines come from DWARF through the
 * resolver's libdwfl module of the image (tally_resolver_module), so only
 * verified files are used. (tally annotate computes the same per-line
 * figures for the terminal; the two should share one implementation.) */
#ifndef TALLY_SOURCE_H
#define TALLY_SOURCE_H

#include <stdint.h>

#include "tally/db.h"
#include "tally/select.h"
#include "tally/symbols.h"

struct tally_source_line {
	uint32_t line;
	uint64_t samples;
	char *text; /* the line of the source file, or NULL when it could not be read */
};

struct tally_source {
	char *file; /* the file that has most of the function's samples */
	struct tally_source_line *lines; /* by line: the sampled lines and a little context */
	size_t nlines, alines;
	uint64_t samples;     /* the function's samples */
	uint64_t elsewhere;   /* of those, samples at lines of other files (inlined code) */
	uint64_t unlocated;   /* of those, samples with no line information */
	char *note;           /* why there is no source text, or NULL */
};

/* Per-line samples of event ev in the function at link-time address addr
 * (named name) of db image `image`, from the profiles the selection keeps.
 * -1 when the image has no line information for it (nothing to show); else
 * 0, and src is released with tally_source_release. */
int tally_source_build(struct tally_source *src, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_select *sel, int ev, uint32_t image, uint64_t addr, const char *name);
void tally_source_release(struct tally_source *src);

#endif
