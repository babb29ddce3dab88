/* lib/db's own header for the call stacks of a database (lib/db/stacks.c):
 * the set that holds them (each distinct frame once, the stacks as runs of
 * frame numbers), the reader of the stacks file, and the parts of it left
 * unread by TALLY_DB_STACKS_LATER. Shared by the reader (read.c), the builder
 * of merges (build.c) and the opener of daemon databases (epoch.c). */
#ifndef TALLY_DB_STACKS_H
#define TALLY_DB_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/db.h"
#include "db-private.h"

struct strbuf;

struct frame_slot {
	uint64_t offset;
	uint32_t image;
	uint32_t id1; /* frame number + 1; 0: empty */
};

/* Stacks in the making; zero-initialize, then set nevents (and dedup). */
struct stackset {
	int nevents;
	bool dedup; /* equal (pid, label set, frames) stacks add up into one, as merges want */
	struct tally_frame *frame_tab;
	size_t nframe_tab, aframe_tab;
	struct frame_slot *fslot; /* the frames' index */
	size_t fmask;
	struct frame_slot *recent; /* in front of it, small enough to stay in cache:
				      the callers' frames repeat from stack to stack */
	uint32_t *stack_frames;
	size_t nstack_frames, astack_frames;
	struct tally_db_stack *stacks;
	size_t nstacks, astacks;
	/* per stack 2 * nevents values: the counts of the events, then their
	 * weights (docs/format.md, "weights") */
	uint64_t *counts;
	size_t acounts;
	/* with dedup, the stacks' index: the stack's hash (low 32 bits) << 32 | stack number + 1 */
	uint64_t *sslot;
	size_t smask;
};

/* The number of frame (image, offset), added when new. */
uint32_t tally_stackset_frame(struct stackset *s, uint32_t image, uint64_t offset);
/* A stack of frame numbers (leaf first, n > 0) of a pid and label set with
 * nevents counts followed by nevents weights; with dedup an equal stack
 * already there gets them added instead. */
void tally_stackset_add(struct stackset *s, int32_t pid, uint32_t label, const uint32_t *frames,
			uint32_t n, const uint64_t *counts);
/* Moves the stacks into db (whose own are dropped): stack_counts and
 * stack_weights; s is left empty. */
void tally_stackset_to_db(struct stackset *s, struct tally_db *db);
/* The binary stacks file (format version 4, docs/format.md) of db's stacks
 * (counts scounts, weights sweights, or counts x mean when NULL) into out. */
int tally_stacks_write_binary(const struct tally_db *db, const uint64_t *scounts,
			      const uint64_t *sweights, const uint64_t *mean, struct strbuf *out);
/* Takes db's stacks into s, to add more to them; db is left without (a
 * database without stack_weights gives its counts x period-mean). */
void tally_stackset_from_db(struct stackset *s, struct tally_db *db);
void tally_stackset_release(struct stackset *s);

/* How the stacks file of one database goes into the database it is read for:
 * column e of the file is event col[e] there (-1: left out), image i is
 * img[i], label set l is lab[l]; NULL maps are the identity. */
struct stacks_map {
	int nevents; /* the file's count columns */
	char **events; /* their names, and their samples in the file's session */
	const uint64_t *samples;
	const int *col;
	size_t nimages; /* the file's images */
	const uint32_t *img;
	bool merged;  /* pids as a merge has them: per_pid ? (pid > 0 ? pid : 0) : 0 */
	bool per_pid;
	bool none;    /* the session says 'call-graph: none': the file must not be there */
	bool labelled; /* format version 2: a label set id follows the pid */
	size_t nlabels; /* the file's label sets (ids 0..nlabels) */
	const uint32_t *lab;
	bool weighted; /* format version 3: COUNT:WEIGHT per event */
	const uint64_t *mean; /* not weighted: per column, what a sample weighs (its period-mean) */
	/* weighted: per column, the session's weight-total the weights must add up to (NULL:
	 * unchecked) */
	const uint64_t *wtotals;
	bool binary; /* format version 4: the file may be binary (or text, as version 3's) */
};

/* Reads the stacks file fd (named what in messages) into s, text or (format
 * version 4) binary: every line or record checked, and the counts must add up
 * to the session's samples of each event. 0 or -errno with tally_seterr
 * naming the file and line (or stack, or frame). */
int tally_stacks_read_fd(struct stackset *s, int fd, const char *what, const struct stacks_map *m);

/* One part of the unread stacks: a file, or stacks added to a merge after
 * a file it left unread (the one-frame stacks of a database without stacks). */
struct lazy_part {
	int fd;       /* the stacks file, opened with its database and share-locked
		       * (a daemon writes over a copy only when it can lock its
		       * 'stacks' alone: lib/db/write.c, keep_spare); -1: none.
		       * A dup shares the lock */
	char *what;   /* its path, for messages */
	int err;      /* when it could not be opened: the error, at load */
	char *msg;
	int nevents;  /* the file's events and its session's samples of each */
	char **events;
	uint64_t *samples;
	int *col;     /* NULL: identity */
	size_t nimages;
	uint32_t *img; /* NULL: identity */
	bool merged, per_pid, none;
	bool labelled;
	size_t nlabels;
	uint32_t *lab; /* NULL: identity */
	bool weighted;     /* as in stacks_map */
	uint64_t *mean;
	uint64_t *wtotals; /* NULL: unchecked */
	bool binary;
	/* no file (what NULL): stacks held in memory, in the merge's images and
	 * events, as the builder would have added them */
	struct tally_frame *mframes;
	size_t nmframes, amframes;
	struct tally_db_stack *mstacks; /* first: into mframes; labels the merge's */
	size_t nmstacks, amstacks;
	uint64_t *mcounts;              /* nmstacks * 2 * the merge's events (counts, weights) */
	size_t amcounts;
};

struct tally_db_lazy {
	struct lazy_part *parts;
	size_t nparts, aparts;
	bool dedup; /* parts of a merge: equal stacks add up */
	int err;    /* a load that failed: its error, again at every call */
	char *msg;
};

/* read.c: the stacks file of the database being opened (path, session and
 * images read): read now, or with TALLY_DB_STACKS_LATER opened and kept. */
int tally_stacks_open(struct tally_db *db, unsigned flags);
/* build.c: a merge takes src's unread stacks along, its images, label sets
 * (0..src->nlabels) and events mapped by img, lab and col into the merge's
 * nevents events. */
void lazy_take(struct tally_db_lazy **into, const struct tally_db *src, const uint32_t *img,
	       const uint32_t *lab, const int *col, int nevents, bool per_pid);
/* build.c: a stack for a merge that has unread parts, to come after them
 * (frames in the merge's images, label set, and counts then weights of its
 * nevents events). */
void lazy_stack(struct tally_db_lazy **into, int32_t pid, uint32_t label,
		const struct tally_frame *frames, uint32_t n, const uint64_t *counts, int nevents);
/* Reads the parts of *lp into s (stacks of s->nevents counts, after those s
 * has): 0, and *lp is freed (NULL); or the error of the first part that
 * failed, which *lp keeps (its parts dropped) to give again at every call,
 * and s holds what was read before it. */
int lazy_read(struct stackset *s, struct tally_db_lazy **lp);
void lazy_free(struct tally_db_lazy *l);

/* ---- what stacks.c and stacks-bin.c share ---- */

#define DAMAGED TALLY_DB_DAMAGED
/* the binary file's magic and header size (docs/format.md, "stacks") */
#define BIN_MAGIC "TALLYSTK"
#define BIN_HEAD 40
/* the longest line of a text stacks file */
#define LONGEST (64u << 20)

/* Where the binary file comes from: an open file, or memory. */
struct bsrc {
	int fd;                   /* -1: mem */
	const unsigned char *mem;
	size_t len, pos;          /* mem: its length; what is read (the file's offset: pread) */
	int err;                  /* a read that failed: -errno */
};

/* The counts of a stack in the file's events, as the database's events */
void stacks_map_counts(const struct stacks_map *m, size_t sne, const uint64_t *c, uint64_t *mc);
/* The stacks' counts and weights against the session's: 0 or -EINVAL naming what. */
int stacks_check_sums(const struct stacks_map *m, const char *what, const uint64_t *sum,
		      const uint64_t *wsum);
/* The binary stacks file from b, its header h (nh bytes) read: into s. */
int stacks_read_binary(struct stackset *s, struct bsrc *b, const unsigned char *h, size_t nh,
		       const char *what, const struct stacks_map *m, uint64_t size);

#endif
