/* Call-graph model at report time: stacks of a database turned into stacks of
 * functions, with self and inclusive counts, caller/callee arcs, top-down trees
 * and the unwind-quality summary. Scales with distinct stacks, not samples. */
#ifndef TALLY_CALLGRAPH_H
#define TALLY_CALLGRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/symbols.h"

struct tally_cg_func {
	uint32_t image;
	char *name;     /* function, or [unknown] / [offset 0x..] */
	uint64_t addr;
	bool has_addr;
	uint64_t self, incl;
	bool root;      /* a process root: _start, thread start, kernel entry */
	/* code inlined into its caller (from DWARF); addr is then an id, not an address */
	bool inlined;
	/* the same in samples (self and incl are weights once db is weighed) */
	uint64_t nself, nincl;
};

struct tally_cg_stack {
	uint32_t first, len; /* into funcs_of, leaf first */
	uint64_t count;
	uint32_t src; /* the database stack (db->stacks) it comes from */
	uint64_t nsamples; /* its samples (count is their weight once db is weighed) */
};

struct tally_cg_arc {
	uint32_t caller, callee;
	uint64_t count;
	uint64_t nsamples;
};

struct tally_cg_node {
	uint32_t func;
	uint32_t parent; /* UINT32_MAX at the top */
	uint64_t count;
	uint32_t *kids;
	size_t nkids, akids;
	uint64_t nsamples;
};

struct tally_cg_frame {
	uint32_t image;
	bool leaf;
	uint64_t offset;
	uint32_t first, n; /* into fc_funcs */
};

struct tally_cg {
	struct tally_cg_func *funcs;
	size_t nfuncs, afuncs;
	uint32_t *funcs_of;
	size_t nfuncs_of, afuncs_of;
	struct tally_cg_stack *stacks;
	size_t nstacks, astacks;
	struct tally_cg_arc *arcs;
	size_t narcs, aarcs;
	/* the counts (self, incl, count, total, ...) are the database's: period
	 * weights once tally_db_weigh ran; the n- fields beside them are always
	 * sample counts */
	uint64_t total;
	uint64_t rooted; /* samples whose stack reached a root */
	uint64_t truncated; /* samples whose stack ended at the recording depth limit */
	uint64_t ntotal, nrooted, ntruncated;
	struct tally_hidx func_idx, arc_idx;
	/* the functions of each distinct (image, offset, leaf) frame, interned once */
	struct tally_cg_frame *fcache;
	size_t nfcache, afcache;
	uint32_t *fc_funcs;
	size_t nfc_funcs, afc_funcs;
	/* per database frame, as a leaf and as a caller: its function, or fcache entry
	 * (callgraph.c) */
	uint32_t *fc_of;
	struct tally_cg_name_slot *name_cache; /* while building */
};

/* Builds the model for one event; keep(db, pid) selects stacks by process (NULL: all).
 * The work is linear in the frames of the database's stacks, with one symbol
 * lookup per distinct frame. */
void tally_cg_build(struct tally_cg *cg, const struct tally_db *db, struct tally_resolver *res,
		    int event, bool (*keep)(const struct tally_db *db, int pid, const void *ctx),
		    const void *ctx);
/* Build flag: no caller/callee arcs (cg->arcs stays empty); what needs no
 * arcs (inclusive counts, trees, flame graphs, folded stacks) is spared the
 * table of every distinct (caller, callee) pair, which can be as large as the
 * stacks themselves. tally_cg_arcs adds them later. */
#define TALLY_CG_NO_ARCS 1u
void tally_cg_build_flags(struct tally_cg *cg, const struct tally_db *db,
			  struct tally_resolver *res, int event,
			  bool (*keep)(const struct tally_db *db, int pid, const void *ctx),
			  const void *ctx, unsigned flags);
/* The caller/callee arcs of cg's stacks (each counted once per stack that has it). */
void tally_cg_arcs(struct tally_cg *cg);
void tally_cg_release(struct tally_cg *cg);
/* Index of a function by name, or -1. */
long tally_cg_find(const struct tally_cg *cg, const char *name);

/* A tree: top-down from the roots (focus < 0), the callees of focus, or (invert)
 * its callers. nodes[0] is a synthetic top whose count is the total considered.
 * The caller frees with tally_cg_tree_free. */
struct tally_cg_node *tally_cg_tree(const struct tally_cg *cg, long focus, bool invert,
				    size_t *nnodes);
void tally_cg_tree_free(struct tally_cg_node *nodes, size_t n);

/* The points where unwinding stopped short of a root: (function, samples), sorted, at most max. */
size_t tally_cg_stops(const struct tally_cg *cg, uint32_t *funcs, uint64_t *counts, size_t max);
/* The same with each stop's samples into nsamples (when counts are weights). */
size_t tally_cg_stops_n(const struct tally_cg *cg, uint32_t *funcs, uint64_t *counts,
			uint64_t *nsamples, size_t max);

#endif
