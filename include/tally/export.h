/* Exports of a database to the formats other tools read: pprof, callgrind,
 * gmon.out, folded stacks (docs/export.md). A writer fills one or more output
 * buffers; the builtin writes them to files atomically, so a failed export
 * never leaves a partial file. */
#ifndef TALLY_EXPORT_H
#define TALLY_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/select.h"
#include "tally/symbols.h"
#include "tally/util.h"

/* What a writer exports. The database has the selection applied already
 * (tally_select_apply): unselected samples count zero. */
struct tally_export {
	const struct tally_db *db;
	struct tally_resolver *res;
	const char *input;    /* the database path, for messages */
	const int *events;    /* the events to export (indices); one for one-event formats */
	int nevents;
	/* stacks (or locations) under this % of an event are cut to [other] */
	double percent_limit;
	bool comm_root;       /* folded: the command name as the root frame */
	bool per_process;     /* callgrind: one file per process */
	/* gmon: the image asked for (--image), or NULL for the main program */
	const char *image;
	/* pprof: labels every sample carries besides its own label set (tally
	 * push: host=, --label); one of these takes the place of a key the
	 * sample's set has too. NULL: none */
	const struct tally_labelset *labels;
	/* pprof: labels for the samples whose label set lacks the key (tally
	 * push: host=, unless a merge said which host each sample is from) */
	const struct tally_labelset *label_defaults;
};

/* One output file: the -o path plus suffix ("" for the main file). */
struct tally_export_file {
	char *suffix;
	struct strbuf data;
	uint64_t put;      /* bytes passed to out->put already (data holds the rest) */
};
struct tally_export_out {
	struct tally_export_file *files;
	size_t n, alloc;
	/* Set by the caller, or NULL: where the data of big outputs goes while
	 * they are written (tally_export_out_flush), file by file in order; 0 or
	 * -errno with tally_seterr. The caller still writes what is left in data. */
	int (*put)(void *ctx, size_t file, const void *data, size_t len);
	void *ctx;
	struct tally_warnings warnings; /* what the writer has to say (the builtin prints it) */
	/* what was written, for the closing line (gmon: which image), or NULL; freed by release */
	char *note;
};
/* A new output buffer; it belongs to out. */
struct strbuf *tally_export_out_file(struct tally_export_out *out, const char *suffix);
/* For writers of big outputs: passes sb (a buffer of out) on to out->put once
 * it holds a MiB, so that memory stays flat whatever the size of the output.
 * 0 or the put's error. */
int tally_export_out_flush(struct tally_export_out *out, struct strbuf *sb);
void tally_export_out_release(struct tally_export_out *out);

/* Where the files of an export go: OUTPUT followed by each file's suffix,
 * each written through a temporary beside it (OUTPUT.tmp.PID) and renamed
 * when whole, big ones as the writer goes (attach sets out->put); a device
 * or a pipe is written into, never replaced; "-" is stdout. */
struct tally_export_sink {
	const char *output;
	const struct tally_export_out *out;
	int *fd;      /* per file: its temporary, or -1 */
	bool *stream; /* per file: fd is the output itself (a device, a pipe) */
	size_t nfd;
	uint64_t token; /* random: the temporaries' names */
};
void tally_export_sink_attach(struct tally_export_sink *k, const char *output,
			      struct tally_export_out *out);
/* Writes what the files still hold and puts each in place; on a failure
 * removes those already written. 0 or -errno with tally_seterr. */
int tally_export_sink_finish(struct tally_export_sink *k);
/* Closes and removes the temporaries left (a failed export); frees. */
void tally_export_sink_release(struct tally_export_sink *k);

/* A writer: 0, or -1 with tally_seterr (one line naming what is missing). */
typedef int (*tally_export_fn)(const struct tally_export *x, struct tally_export_out *out);

int tally_export_folded(const struct tally_export *x, struct tally_export_out *out);
int tally_export_pprof(const struct tally_export *x, struct tally_export_out *out);
/* The same profile in memory: its gzip-compressed bytes appended to out (the
 * caller's). 0, or -1 with tally_seterr. */
int tally_export_pprof_buf(const struct tally_export *x, struct strbuf *out);
int tally_export_callgrind(const struct tally_export *x, struct tally_export_out *out);
int tally_export_gmon(const struct tally_export *x, struct tally_export_out *out);
/* lib/export/flame.c */
int tally_export_svg(const struct tally_export *x, struct tally_export_out *out);
int tally_export_speedscope(const struct tally_export *x, struct tally_export_out *out);

/* Folded stacks of two profiles (difffolded.pl's format, for flamegraph.pl's
 * differential graphs): one line per stack of either, "STACK BASE NEW",
 * frames named as tally_export_folded names them, lines sorted; normalize
 * scales the BASE column to add up to NEW's total (tally_scale_counts). */
struct tally_cg;
int tally_diff_folded(struct strbuf *out, const struct tally_cg *base_cg,
		      const struct tally_db *base_db, const struct tally_cg *new_cg,
		      const struct tally_db *new_db, bool normalize);

/* The --percent-limit cut, shared by the writers: stacks are given as keys
 * (root first) with counts (nevents per stack); in the prefix tree of all the
 * stacks a node is kept when, for some event, it holds at least min[event]
 * samples. keep[i] gets the length of stack i's kept prefix (== its length
 * when nothing is cut). Keys are four bytes (functions, locations: a key
 * each per frame of millions of stacks), and compared only with the keys of
 * the same depth under the same parent. */
struct tally_trim_stack {
	uint32_t first, len; /* into keys */
};
void tally_export_trim(const uint32_t *keys, const struct tally_trim_stack *stacks, size_t n,
		       const uint64_t *counts, int nevents, const uint64_t *min, uint32_t *keep);
/* min[] for a percent limit: ceil(total * pct / 100) per event (0 for pct 0). */
void tally_export_trim_min(const struct tally_export *x, const uint64_t *totals, uint64_t *min);

/* A function name fit for a one-line format: control characters become '?',
 * and each character of `bad` becomes '_'. */
void tally_export_add_name(struct strbuf *sb, const char *name, const char *bad);

/* The name other tools know an image by: its path for files, [kernel.kallsyms],
 * [vdso], [jit], [nomap]. Written into sb (reset first); returns sb->buf. */
const char *tally_export_image_name(const struct tally_db_image *im, struct strbuf *sb);
/* Whether the image is a file (exec, lib, vdso): offsets are file offsets. */
bool tally_export_is_file(const struct tally_db_image *im);
/* The link-time address of (image, offset), or the offset itself when the file
 * cannot be read (see tally_resolver_addr). */
uint64_t tally_export_addr(struct tally_resolver *res, uint32_t image, uint64_t offset);

/* The command names of the database's processes, looked up by pid in
 * O(log n) (as tally_db_comm, the last task of a pid wins). */
struct tally_export_comm {
	int pid;
	size_t order;
	const char *comm; /* the database's */
};
struct tally_export_comms {
	struct tally_export_comm *v;
	size_t n;
};
void tally_export_comms_init(struct tally_export_comms *c, const struct tally_db *db);
const char *tally_export_comm(const struct tally_export_comms *c, int pid);
/* The index in c->v of pid's command name, or SIZE_MAX when it has none. */
size_t tally_export_comm_at(const struct tally_export_comms *c, int pid);
void tally_export_comms_release(struct tally_export_comms *c);

#endif
