/* Flame graphs: the function-level call tree of one event (from the stacks of
 * a tally_cg) laid out as a flame graph (roots at the top, callees under them,
 * so that the graph opens on its root whatever its depth) or its inverse (leaf
 * functions at the top, their callers below), with the frames under a percent
 * limit folded into one "other" frame per parent so that the picture stays
 * small whatever the number of stacks; and its SVG rendering, interactive
 * (zoom, search, hover details, frames under a pixel hidden, a function's
 * sandwich, focus and ignore) without any external resource.
 * Used by `tally export --format svg` and `tally report --html`. */
#ifndef TALLY_FLAME_H
#define TALLY_FLAME_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/callgraph.h"
#include "tally/db.h"
#include "tally/util.h"

#define TALLY_FLAME_ALL UINT32_MAX          /* the bottom frame: every sample */
#define TALLY_FLAME_OTHER (UINT32_MAX - 1)  /* frames under the limit, folded */
#define TALLY_FLAME_DEEP (UINT32_MAX - 2)   /* the levels past TALLY_FLAME_MAX_DEPTH, folded */

/* The deepest level drawn: a graph that tall is already 16,000 pixels; what
 * a stack holds past it (a recursion thousands of calls deep) is one frame
 * per column that says how many levels it folds. */
#define TALLY_FLAME_MAX_DEPTH 1024

/* The default --percent-limit of flame graphs: about one pixel of a
 * 1200-pixel-wide graph, so folding hides nothing that could be seen. */
#define TALLY_FLAME_DEFAULT_LIMIT 0.1

struct tally_flame_frame {
	uint32_t func;   /* index in the tally_cg's funcs, or TALLY_FLAME_ALL / _OTHER */
	uint32_t depth;  /* 0 for the ALL frame */
	uint64_t x;      /* left edge, in samples from the left of the graph */
	uint64_t count;  /* samples in this frame and above it (inclusive) */
	uint64_t self;   /* samples that ended in this frame */
	uint32_t folded; /* OTHER: how many frames it stands for; DEEP: how many levels, at most */
};

struct tally_flame {
	/* preorder: each frame is followed by the frames above it; siblings are
	 * ordered by function name with OTHER last */
	struct tally_flame_frame *frames;
	size_t nframes, aframes;
	uint64_t total;
	uint32_t max_depth;
	bool inverted;
	double limit;
	uint64_t folded_samples; /* samples in OTHER frames */
	uint32_t folded_frames;  /* frames folded into OTHER frames */
};

/* Builds the flame graph of cg (inverted: the callers' graph, leaf functions at
 * the bottom level). Frames with fewer than percent_limit % of cg->total
 * samples fold into an OTHER frame of their parent. The work is linear in the
 * frames of cg's stacks (after sorting the stacks) and the memory is that of
 * the frames kept. fl is released with tally_flame_release. */
void tally_flame_build(struct tally_flame *fl, const struct tally_cg *cg, bool invert,
		       double percent_limit);
void tally_flame_release(struct tally_flame *fl);

/* A differential flame graph's other side: per frame of the graph, the
 * samples of the same path of functions (matched by image and function name
 * from the bottom up) in the base profile. */
struct tally_flame_diff {
	const uint64_t *base_incl, *base_self; /* one per frame */
	uint64_t base_total;
};

struct tally_flame_svg_opts {
	const char *title;    /* the heading above the graph */
	const char *subtitle; /* a smaller line under it (NULL: none) */
	const char *event;    /* the event name, for the ALL frame */
	const char *id;       /* element id of the <svg> (NULL: none) */
	bool standalone;      /* a whole SVG document with its own script (else an
				 <svg> element for an HTML page that loads the script) */
	unsigned width;       /* pixels (0: 1200) */
	/* a differential graph: frames coloured by the change of their self share
	 * from the base (red grew, blue shrank, white unchanged), NULL: by kind */
	const struct tally_flame_diff *diff;
};

/* Appends the SVG of fl (whose frames are functions of cg, images of db). */
void tally_flame_svg(struct strbuf *out, const struct tally_flame *fl, const struct tally_cg *cg,
		     const struct tally_db *db, const struct tally_flame_svg_opts *o);

/* For each frame of fl (the flame graph of cg, not inverted; images of db),
 * the inclusive and self samples of the same path in base_cg (images of
 * base_db) into base_incl and base_self (fl->nframes each). */
void tally_flame_diff_counts(const struct tally_flame *fl, const struct tally_cg *cg,
			     const struct tally_db *db, const struct tally_cg *base_cg,
			     const struct tally_db *base_db, uint64_t *base_incl,
			     uint64_t *base_self);
/* Appends the differential flame graph of two profiles: the shape of new_cg,
 * each frame coloured by the change of its self share from base_cg (Brendan
 * Gregg's convention), frames under percent_limit % folded; o->diff is set
 * here. */
void tally_flame_diff_svg(struct strbuf *out, const struct tally_cg *base_cg,
			  const struct tally_db *base_db, const struct tally_cg *new_cg,
			  const struct tally_db *new_db, double percent_limit,
			  const struct tally_flame_svg_opts *o);

/* The script that makes flame graphs interactive (every <svg class="tally-flame">
 * of the document): zoom on click, search, hover details, the frames under a
 * pixel shown on demand, a selected function's sandwich, focus and ignore,
 * reset. For pages that embed graphs made with standalone false. */
extern const char tally_flame_js[];

/* Text for XML and HTML: & < > " ' escaped, control characters other than
 * tab and newline dropped, bytes that are not UTF-8 replaced by U+FFFD (XML
 * parsers refuse a document with either). */
void tally_strbuf_add_xml(struct strbuf *sb, const char *s);

#endif
