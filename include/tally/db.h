/* The profile database: a directory of plain-text files (docs/format.md).
 * Writing is atomic (staging directory, then rename); reading validates every
 * line and names the file and line of anything damaged. */
#ifndef TALLY_DB_H
#define TALLY_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>

#include "tally/frame.h"
#include "tally/elfinfo.h"

/* The format a database is written in: version 4 when it holds weights
 * (everything tally records, merges and flushes: version 3 with the stacks
 * file binary), else version 1, or version 2 when it holds labels
 * (docs/format.md); this tally reads all four (version 3: weights, stacks
 * as text). Bundles keep their own version (1), which TALLY_FORMAT_VERSION
 * also names. */
#define TALLY_FORMAT_VERSION 1
#define TALLY_FORMAT_VERSION_LABELS 2
#define TALLY_FORMAT_VERSION_WEIGHTS 3
#define TALLY_FORMAT_VERSION_BINARY_STACKS 4
/* The largest file of a database (or bundle) a reader takes: about 40 times
 * the 'stacks' file of a million distinct call stacks. Database files are read only when
 * they are regular files (never through a symbolic link, a FIFO or a device). */
#define TALLY_DB_FILE_MAX ((uint64_t)4 << 30)

/* Ordered key: value metadata (the session file, .prof headers). */
struct tally_kv {
	char *key, *value;
};
struct tally_meta {
	struct tally_kv *kv;
	size_t n, alloc;
};
void tally_meta_set(struct tally_meta *m, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The value, or NULL. The string belongs to m. */
const char *tally_meta_get(const struct tally_meta *m, const char *key);
void tally_meta_release(struct tally_meta *m);

/* The session's fp-repair-stops (docs/format.md): why the frame-pointer repair
 * could not finish, by cause, in the order of enum tally_fp_stop from
 * TALLY_FP_NOCFI on. Written with TALLY_FP_STOPS_FMT, read by
 * tally_fp_stops_parse (false: not that form). */
#define TALLY_FP_NSTOPS_SAID 4
#define TALLY_FP_STOPS_FMT                                                                  \
	"no CFI %" PRIu64 ", stack copy too small %" PRIu64 ", chain not rejoined %" PRIu64 \
	", depth limit %" PRIu64
bool tally_fp_stops_parse(const char *v, uint64_t n[TALLY_FP_NSTOPS_SAID]);

/* ---- the temporaries next to a database, and their recovery ----
 * While lib/db writes or removes the database DIR/NAME it keeps, next to it:
 *   DIR/.NAME.tmp-PID   the staging copy of a save (locked with flock while it is
 *                       written; after the swap, the old copy being removed)
 *   DIR/.NAME.old-PID   the old database moved aside (a filesystem without
 *                       RENAME_EXCHANGE), until the new one is in place
 *   DIR/.NAME.gone-PID  a database being removed, out of readers' sight first
 * where PID is the writer's. Readers skip every dot-name; these names are made
 * and recognized by the functions below only. */
enum tally_db_temp { TALLY_DB_STAGE, TALLY_DB_OLD, TALLY_DB_GONE };
/* The path of path's temporary of that kind for pid (caller frees). */
char *tally_db_temp_path(const char *path, enum tally_db_temp kind, int pid);
/* Whether a directory entry's name is such a temporary: its kind, its
 * database's name (*target, the caller's; target may be NULL) and pid. */
bool tally_db_temp_parse(const char *name, enum tally_db_temp *kind, char **target, int *pid);

struct tally_db_recovery {
	size_t removed;  /* stale staging, old and half-removed copies deleted */
	size_t restored; /* databases put back from .old-PID (theirs was missing) */
	size_t kept;     /* temporaries of writers still at work */
};
/* Clears what a killed writer left beside path (and, when path is a daemon's
 * directory, beside its epochs and drain): a temporary whose writer is gone is
 * removed, except that an .old-PID copy is renamed back when the database
 * itself is missing. A writer is gone when its pid is not running (this process
 * counts as gone: it is not saving) and, for a staging directory, nobody holds
 * its lock: a live writer's temporaries are never touched. Only directories
 * owned by this user are touched. Every open (tally_db_open*) and every save
 * (tally_db_save*, tally_db_check_target) runs it first; failures are left for
 * the next run. *rv (may be NULL) gets what was done. 0, or the first -errno
 * of a removal that failed. */
int tally_db_recover(const char *path, struct tally_db_recovery *rv);
/* Removes the database (or daemon drain, epoch) directory at path: renamed out
 * of readers' sight (.NAME.gone-PID), then deleted. 0 or -errno with tally_seterr. */
int tally_db_remove(const char *path);

/* Fails with a one-line error when path exists (and !force) or its parent is
 * not writable (after tally_db_recover: a database a killed writer moved aside
 * counts as existing). */
int tally_db_check_target(const char *path, bool force);
/* The name of an image's files in a database (its .prof, its copy): the file
 * name of path without " (deleted)", brackets, blanks or slashes ("unknown"
 * when nothing is left). The caller frees it. */
char *tally_db_image_name(const char *path);

struct tally_db_image {
	char *name;    /* file name for reports: libc.so.6, kernel, nomap, jit */
	char *path;
	char *id;      /* build-id or content hash (hex) */
	char *id_kind; /* build-id | xxh64 | none | replaced | unreachable */
	char *kind;    /* exec | lib | kernel | nomap | jit | vdso */
	int pid;       /* JIT and per-pid nomap: the process */
	/* the copies the database keeps of a JIT map (or of the vDSO) and of a
	 * jitdump: in memory (aux, jd_text), or in the directory dir (NULL: the
	 * database's own, see tally_db_image_dir) */
	char *aux;
	size_t aux_len;
	char *jd_text;
	size_t jd_text_len;
	char *dir;
	/* mapped inside another mount namespace: path is the container's (file mntns) */
	bool foreign_ns;
};

struct tally_db_entry {
	uint32_t image;
	int32_t pid;
	uint64_t offset;
};

/* One .prof file: its entries are entries[first..end), all of one image, pid
 * and label set. */
struct tally_db_prof {
	uint32_t image;
	int32_t pid;
	size_t first, end;
	uint32_t label; /* db->labels: 0 for none */
};

struct tally_db_stack {
	uint32_t first, len; /* into stack_frames, leaf first */
	int32_t pid;
	uint32_t label; /* db->labels: 0 for none */
};

/* A label: where samples came from (host=web1, run=before.db), kept by
 * tally merge (docs/format.md, "labels"). */
struct tally_label {
	char *key, *value;
};
/* A set of labels, sorted by key, each key once. Label set 0 of a database
 * is the empty set. */
struct tally_labelset {
	struct tally_label *v;
	size_t n;
};

/* A recording a merge holds (its 'sources' file, docs/format.md): how long
 * it ran, so that a report of a label's samples says how long its runs were
 * recorded, and what it was, so that a merge given one of its own sources
 * again refuses it. */
struct tally_db_source {
	uint64_t id;        /* tally_db_session_id of the recording's session */
	char *start, *stop; /* its start-time and stop-time, or NULL */
	double duration;    /* its duration in seconds, -1 when unknown */
	char *command;      /* its command (else its target), or NULL */
	struct tally_labelset labels; /* the source labels its samples got (run, host, --label) */
};

struct tally_db_task {
	int pid;
	char *comm, *exe;
};

/* A kernel module loaded while recording (the 'modules' file). */
struct tally_db_module {
	char *name;
	uint64_t size, addr;
	char *build_id; /* hex, or NULL when it was not known */
};

struct tally_db {
	char *path;
	struct tally_meta session;
	int nevents;
	char **events;
	uint64_t *samples; /* per event, from the session */
	uint64_t lost, throttled;
	bool per_pid;
	bool has_stacks;
	/* tally_db_save writes the stacks file as text (format 3's lines), not binary */
	bool text_stacks;

	struct tally_db_image *images;
	size_t nimages;

	struct tally_db_entry *entries;
	size_t nentries, aentries;
	uint64_t *counts; /* nentries * nevents */
	size_t acounts;
	/* the summed sampling periods beside the counts, in the event's unit
	 * (tally_db_unit): nentries * nevents, NULL when the database has none (a
	 * format 1 or 2 database; tally_db_weigh then makes them from period-mean) */
	uint64_t *weights;
	size_t aweights;
	struct tally_db_prof *profs; /* one per (image, pid): no two files share one */
	size_t nprofs, aprofs;

	/* call stacks: each distinct frame once (image is a db image index), and
	 * the stacks as runs of frame numbers; read with tally_db_frame */
	struct tally_frame *frame_tab;
	size_t nframe_tab, aframe_tab;
	uint32_t *stack_frames; /* indices into frame_tab, leaf first */
	size_t nstack_frames, astack_frames;
	struct tally_db_stack *stacks;
	size_t nstacks, astacks;
	uint64_t *stack_counts; /* nstacks * nevents */
	size_t astack_counts;
	uint64_t *stack_weights; /* nstacks * nevents, as weights (NULL: none) */
	size_t astack_weights;
	/* tally_db_weigh ran: counts and stack_counts hold the weights and
	 * weights and stack_weights the sample counts (stacks loaded later too) */
	bool weighed;
	/* tally_db_wall ran: column wall[0] holds itself plus wall[1] and wall[2] (-1: none) */
	int wall[3];
	bool walled;
	/* the database has weights of its own (format 3, or built from sources
	 * that had or were given them); false: tally_db_weigh synthesizes them */
	bool has_weights;
	struct tally_db_lazy *lazy; /* stacks not read yet (TALLY_DB_STACKS_LATER), or NULL */

	struct tally_ksym *ksyms;
	size_t nksyms;
	struct tally_db_task *tasks;
	size_t ntasks;

	char *modules;  /* the 'modules' file, or NULL */
	struct tally_db_module *mods; /* ... read */
	size_t nmods;
	/* label sets: id 0 is the empty set, ids 1..nlabels are labels[id - 1] */
	struct tally_labelset *labels;
	size_t nlabels;
	/* a bundle's files, or an archive, unpacked for this reader (removed on release) */
	char *tmpdir;
	char *files;    /* where the database's files are when not at path: an archive's db/ */
	/* read from an archive (archive.h): its root, where the resolver looks (only) */
	char *archive;
	size_t nepochs; /* a daemon database: how many epochs were merged (0: not one) */
	struct tally_db_source *sources; /* a merge: the recordings it holds, sorted (labels, id) */
	size_t nsources;
};

/* Reads a whole database: a directory written by tally record, a daemon's
 * directory of epochs (all of them merged: tally_db_open_select in epoch.h
 * chooses), or a bundle file (tally ctl drain). On error db is released and
 * tally_seterr names the file (and line) and the fix. */
int tally_db_open(struct tally_db *db, const char *path);
/* The same for a plain database directory only. */
int tally_db_open_dir(struct tally_db *db, const char *path);

/* Open flag: leave the stacks file unread (it is opened, not read) until
 * tally_db_load_stacks asks for it, so that what needs no stacks (the per-image
 * summary, functions, lines) costs nothing for them; until then nstacks is 0. */
#define TALLY_DB_STACKS_LATER 1u
int tally_db_open_dir_flags(struct tally_db *db, const char *path, unsigned flags);
/* Reads the stacks that TALLY_DB_STACKS_LATER left unread: at once 0 when
 * there is nothing left to read. A damaged or missing stacks file is the error
 * an open without the flag would have given (file, line, fix; again at every
 * call), and db stays usable without stacks. 0 or -errno with tally_seterr. */
int tally_db_load_stacks(struct tally_db *db);

/* For the views only (never before a database is written or merged: names
 * are part of an image's identity there): file images that share a name but
 * not a file get their directory after it, "libc.so.6 (/opt/x/lib)", and
 * those that share the file too (two containers' copies) their id's first
 * 12 digits, so that no two rows of a report look alike. */
void tally_db_names_apart(struct tally_db *db);

/* ---- period weights (lib/db/weigh.c) ---- */

/* The unit of event ev's weights: "ns" for time (cpu-clock, task-clock,
 * off-cpu), "events" for everything else; the session's weight-unit when it
 * names one. */
const char *tally_db_unit(const struct tally_db *db, int ev);
/* Whether ev's weights are time (unit "ns"). */
bool tally_db_unit_time(const struct tally_db *db, int ev);
/* Makes every count of db (flat and stacks, and stacks loaded later) its
 * weight, so that every view, total and export built afterwards is period-
 * weighted, and keeps the sample counts in weights/stack_weights. A database
 * without weights gets count x period-mean (what format 1 and 2 meant). Once
 * only; db->samples stays the sample counts. */
void tally_db_weigh(struct tally_db *db);
/* Wall-clock time (lib/db/wall.c, docs/offcpu.md): weighs db, then adds the
 * off-cpu and off-cpu-preempted times into the on-CPU column (cpu-clock, else
 * task-clock), renamed "wall" (stacks loaded later too), so that a task's
 * rows add up to its whole time. -EINVAL with tally_seterr naming db when it
 * lacks either part (record with --off-cpu). */
int tally_db_wall(struct tally_db *db);
void tally_db_wall_loaded_stacks(struct tally_db *db);
/* Takes the stacks back out of wall-clock time (before more are read into them). */
void tally_db_unwall_stacks(struct tally_db *db);
/* Event ev's total weight (after tally_db_weigh: of the counts; before: of the
 * weights, or count x period-mean without them). */
uint64_t tally_db_weight_total(const struct tally_db *db, int ev);

/* Frame k (0: the leaf) of a stack of db. */
static inline const struct tally_frame *tally_db_frame(const struct tally_db *db,
						       const struct tally_db_stack *st, uint32_t k)
{
	return &db->frame_tab[db->stack_frames[st->first + k]];
}
/* The directory that holds image's copied files (jit/perf-PID-ID.map, vdso.so). */
const char *tally_db_image_dir(const struct tally_db *db, uint32_t image);
/* Frees what an image holds (and zeroes it). */
void tally_db_image_release(struct tally_db_image *d);
void tally_db_release(struct tally_db *db);
/* Index of an event by name, or -1. */
int tally_db_event(const struct tally_db *db, const char *name);
/* The comm of a pid from the task list, or NULL. */
const char *tally_db_comm(const struct tally_db *db, int pid);

/* ---- labels (lib/db/labels.c) ---- */

#define TALLY_LABEL_KEY_MAX 64
#define TALLY_LABEL_VALUE_MAX 4096
/* Whether key[0..n) is a label key: 1 to 64 letters, digits, '_', '-', '.'. */
bool tally_label_key_ok(const char *key, size_t n);
/* Whether v is a label value: 1 to 4096 bytes, no control character. */
bool tally_label_value_ok(const char *v);
/* "KEY=VALUE" (VALUE may be empty: no such label) into new strings the caller
 * frees. -EINVAL with tally_seterr naming what ("--label") and the rule. */
int tally_label_parse(const char *s, const char *what, char **key, char **value);
/* The value of key in set (NULL: none; set may be NULL). */
const char *tally_labelset_get(const struct tally_labelset *set, const char *key);
/* Sets key to a copy of value, the set kept sorted; NULL or "" removes key. */
void tally_labelset_set(struct tally_labelset *set, const char *key, const char *value);
/* dst (overwritten) becomes a copy of src (may be NULL: empty). */
void tally_labelset_copy(struct tally_labelset *dst, const struct tally_labelset *src);
void tally_labelset_release(struct tally_labelset *set);
/* Order of sets: by their (key, value) pairs in order, a prefix first. */
int tally_labelset_cmp(const struct tally_labelset *a, const struct tally_labelset *b);
uint64_t tally_labelset_hash(const struct tally_labelset *set);
/* "host=web1,run=a.db" */
void tally_labelset_format(struct strbuf *sb, const struct tally_labelset *set);
/* Label set id of db (0 or past the end: the empty set), and one value of it. */
const struct tally_labelset *tally_db_labelset(const struct tally_db *db, uint32_t id);
const char *tally_db_label(const struct tally_db *db, uint32_t id, const char *key);
/* The 'labels' file: parsed into db->labels (ids from 1, in order), or
 * written (a comment line, then one line per set). 0 or -EINVAL with
 * tally_seterr naming what and the line. */
int tally_db_parse_labels(struct tally_db *db, const char *buf, size_t len, const char *what);
void tally_db_format_labels(const struct tally_db *db, struct strbuf *sb);
/* "its labels: host, run" (the keys of db's label sets), or nothing. */
void tally_db_label_keys(const struct tally_db *db, struct strbuf *sb);

/* ---- sources: the recordings a merge holds (lib/db/sources.c) ---- */

/* What identifies a recording: a hash of its session's keys and values, in
 * order (its host, command, times, counts: two recordings never share it). */
uint64_t tally_db_session_id(const struct tally_meta *session);
/* A source made from a recording's session, with labels (copied; may be NULL). */
void tally_db_source_from_session(struct tally_db_source *out, const struct tally_meta *session,
				  const struct tally_labelset *labels);
void tally_db_source_copy(struct tally_db_source *dst, const struct tally_db_source *src);
void tally_db_source_release(struct tally_db_source *s);
/* Whether every label of the source is in set (its samples carry them). */
bool tally_db_source_in(const struct tally_db_source *s, const struct tally_labelset *set);
/* Order of sources: by labels, then id, then times (a merge's file is sorted). */
int tally_db_source_cmp(const struct tally_db_source *a, const struct tally_db_source *b);
/* The 'sources' file: parsed into db->sources (appended), or written. 0 or
 * -EINVAL with tally_seterr naming what and the line. */
int tally_db_parse_sources(struct tally_db *db, const char *buf, size_t len, const char *what);
void tally_db_format_sources(const struct tally_db *db, struct strbuf *sb);

/* ---- building a database in memory: the writer, merges of epochs, drains ---- */


struct tally_db_builder;
/* A new, empty database in the making with these events (count columns, in
 * this order), per-pid or not, with call stacks or not. The caller owns it:
 * tally_db_builder_finish or _free. */
struct tally_db_builder *tally_db_builder_new(int nevents, char *const *events, bool per_pid,
					      bool stacks);
void tally_db_builder_free(struct tally_db_builder *b);
/* The session keys the result starts from (copied; the counts are set at finish). */
void tally_db_builder_session(struct tally_db_builder *b, const struct tally_meta *session);
/* An image: the index of the equal one already there (same kind, id, path and
 * pid; exec and lib count as one kind), else a copy. */
uint32_t tally_db_builder_image(struct tally_db_builder *b, const struct tally_db_image *im);
/* Adds counts (one per event) to (image, pid, offset); pid 0 unless per-pid. */
void tally_db_builder_entry(struct tally_db_builder *b, uint32_t image, int32_t pid,
			    uint64_t offset, const uint64_t *counts);
/* Adds counts to a stack (frames' images are builder indices, leaf first). */
void tally_db_builder_stack(struct tally_db_builder *b, int32_t pid,
			    const struct tally_frame *frames, uint32_t n, const uint64_t *counts);
/* The same under a label set (an id from tally_db_builder_label; 0: none). */
void tally_db_builder_entry_label(struct tally_db_builder *b, uint32_t image, int32_t pid,
				  uint32_t label, uint64_t offset, const uint64_t *counts);
void tally_db_builder_stack_label(struct tally_db_builder *b, int32_t pid, uint32_t label,
				  const struct tally_frame *frames, uint32_t n,
				  const uint64_t *counts);
/* The same with the weights of the counts (one per event, in the event's
 * unit: tally_db_unit); weights NULL: each sample weighs 1. A builder given
 * weights (or a database: tally_db_builder_add) makes a database with weights
 * (format 3); one given none makes one without (format 1 or 2). */
void tally_db_builder_entry_w(struct tally_db_builder *b, uint32_t image, int32_t pid,
			      uint32_t label, uint64_t offset, const uint64_t *counts,
			      const uint64_t *weights);
void tally_db_builder_stack_w(struct tally_db_builder *b, int32_t pid, uint32_t label,
			      const struct tally_frame *frames, uint32_t n, const uint64_t *counts,
			      const uint64_t *weights);
/* The id of a label set (copied; 0 for the empty set or NULL). */
uint32_t tally_db_builder_label(struct tally_db_builder *b, const struct tally_labelset *set);
/* Labels that tally_db_builder_add gives the samples of the databases added
 * next, for the keys their own label sets lack (set copied; NULL: none). A
 * builder given them keeps the sources of what it adds (tally_db_source):
 * a database's own sources, their labels filled the same way, or the
 * database itself as one. */
void tally_db_builder_source(struct tally_db_builder *b, const struct tally_labelset *set);
/* The result will not depend on the order databases are added in, nor on how
 * merges are grouped (tally merge): images, label sets, stacks, tasks and
 * modules in an order of their own, a kernel symbol named differently by two
 * parts named the same way whatever came first, and in the session the keys
 * every part that has them agrees on ('varies' names the others, sorted),
 * durations summed in milliseconds. Call before adding anything. */
void tally_db_builder_canonical(struct tally_db_builder *b);
/* Whether adding src (tally_db_builder_add) keeps every count the builder sums
 * below 2^64 (and the summed durations under 100 years): 0, or -EOVERFLOW
 * with tally_seterr naming what (src's name). */
int tally_db_builder_fits(const struct tally_db_builder *b, const struct tally_db *src,
			  const char *what);
void tally_db_builder_ksym(struct tally_db_builder *b, const struct tally_ksym *k);
void tally_db_builder_task(struct tally_db_builder *b, int pid, const char *comm, const char *exe);
/* Tasks kept one per program, (comm, exe), with the pid added last, rather
 * than one per process: for a database whose profiles are not per process
 * (no pid joins them) that lives long, a daemon's epoch, which meets a new
 * process for every command a busy machine runs. Call before adding anything. */
void tally_db_builder_tasks_by_program(struct tally_db_builder *b);
void tally_db_builder_counters(struct tally_db_builder *b, uint64_t lost, uint64_t throttled);
/* The module list (the 'modules' file's text; copied). */
void tally_db_builder_modules(struct tally_db_builder *b, const char *modules);
/* Adds a whole database: images, counts and their weights (events matched by
 * name; one the builder lacks is left out; a database without weights weighs
 * each sample by its own period-mean), label sets (with the source's labels, see
 * tally_db_builder_source), stacks (a database without them adds one-frame
 * stacks of its leaves), kernel symbols, tasks, lost and throttled counts, and
 * its session (times span both, durations add up, the rest as the newest said,
 * or see tally_db_builder_canonical). */
void tally_db_builder_add(struct tally_db_builder *b, const struct tally_db *src);
/* Reads the copies db keeps of JIT maps, jitdumps and the vDSO into memory
 * (images' aux and jd_text), so that what is built from db can be written
 * after db is released (a bundle's files go with it). A copy that is missing
 * stays missing. */
void tally_db_keep_copies(struct tally_db *db);
/* Reads now the stacks that tally_db_builder_add took along unread (from a
 * database opened with TALLY_DB_STACKS_LATER, each stacks file parsed once,
 * straight into the builder's), so that the builder holds them all; call it
 * after each such add to keep no file open. 0 or -errno with tally_seterr
 * (again at every call; tally_db_builder_finish then leaves them unread). */
int tally_db_builder_load_stacks(struct tally_db_builder *b);
/* The database built (out is overwritten); frees b. */
void tally_db_builder_finish(struct tally_db_builder *b, struct tally_db *out);

/* Writes db as the directory path, atomically (a staging directory, synced, then
 * swapped in with one rename): replace allows an existing database there (never
 * anything else). 0 or -errno with tally_seterr (ENOSPC and EDQUOT say so). */
int tally_db_save(const struct tally_db *db, const char *path, bool replace);
/* A copy kept from one save to the next. A daemon saves its current epoch
 * every minute, and creating every file of the new copy and deleting every file
 * of the old one was most of what such a save cost (the filesystem finds an
 * inode for each new file and frees each old file's blocks). With a spare, the
 * old copy a save swaps out is kept under the staging name (DIR/.NAME.tmp-PID,
 * locked as a staging copy is, so recovery leaves it alone while its writer
 * lives), and the next save writes over its files in place, removes those it
 * does not write, and swaps it in: nothing is created or deleted while the
 * files keep their names. A spare kept for another database (the epoch before)
 * is renamed to serve. Initialize with path NULL. */
struct tally_db_spare {
	char *path;    /* the copy kept; NULL: none */
	int fd;        /* its lock (while path is set) */
	int stacks_fd; /* its 'stacks', locked alone (while path is set; -1: none):
			* readers share-lock the file they keep (lib/db/stacks.c) */
};
/* Removes the spare copy (when there is one) and forgets it. */
void tally_db_spare_drop(struct tally_db_spare *sp);
/* The same as tally_db_save, calling check(ctx, staging) once every file is
 * written and before anything is published: a non-zero return (a -errno with
 * tally_seterr) drops the new copy and is returned. For limits on what is
 * really on disk. spare (may be NULL): the copy written over, if it holds one,
 * and where the old copy is kept after the swap (its path is NULL when it was
 * not: a new database, a filesystem without RENAME_EXCHANGE, an error). */
int tally_db_save_checked(const struct tally_db *db, const char *path, bool replace,
			  int (*check)(void *ctx, const char *staging), void *ctx,
			  struct tally_db_spare *spare);
/* db as one self-contained file (docs/format.md, "bundle"), appended to out. */
int tally_db_bundle(const struct tally_db *db, struct strbuf *out);
/* Bytes the files of db hold (what tally_db_save writes); *files (may be NULL)
 * gets how many files that is. */
size_t tally_db_bytes(const struct tally_db *db, size_t *files);

/* Parsing helpers, exposed for the unit tests and fuzzers. Each returns 0 or
 * -EINVAL with tally_seterr naming what (file) and line. */
int tally_parse_header_line(const char *line, const char *what, size_t lineno, char **key,
			    char **value);
int tally_parse_prof_line(const char *line, const char *what, size_t lineno, int nevents,
			  uint64_t *offset, uint64_t *counts);
/* The same for a format 3 line, 'OFFSET COUNT WEIGHT ...' (a count and its
 * weight per event; a weight without a sample is refused); weights NULL: a
 * format 1 or 2 line. */
int tally_parse_prof_line_w(const char *line, const char *what, size_t lineno, int nevents,
			    uint64_t *offset, uint64_t *counts, uint64_t *weights);

/* The parsers of a database's files, each over one file's bytes (buf, len:
 * anything, read only; a NUL byte or a last line without its newline is
 * refused), what naming the file in errors. tally_db_open_dir reads each file
 * and calls these, in this order, on a zeroed db: session (events, counts,
 * every value tally reads checked), images, labels (format version 2:
 * tally_db_parse_labels), each .prof, stacks (refused when
 * the session says call-graph none), kernel.syms, tasks, modules, mntns; then
 * tally_db_check_totals. 0 or -EINVAL with tally_seterr naming what and the
 * line; db stays consistent either way (tally_db_release frees it). */
int tally_db_parse_session(struct tally_db *db, const char *buf, size_t len, const char *what);
int tally_db_parse_images(struct tally_db *db, const char *buf, size_t len, const char *what);
int tally_db_parse_prof(struct tally_db *db, const char *buf, size_t len, const char *what);
int tally_db_parse_stacks(struct tally_db *db, const char *buf, size_t len, const char *what);
int tally_db_parse_ksyms(struct tally_db *db, const char *buf, size_t len, const char *what);
int tally_db_parse_tasks(struct tally_db *db, const char *buf, size_t len, const char *what);
/* The 'modules' file into db->mods (db->modules, the text kept, is the caller's). */
int tally_db_parse_modules(struct tally_db *db, const char *buf, size_t len, const char *what);
int tally_db_parse_mntns(struct tally_db *db, const char *buf, size_t len, const char *what);
/* Whether the .prof files' counts add up (without passing 2^64) to the
 * session's samples of each event. 0 or -EINVAL with tally_seterr naming what. */
int tally_db_check_totals(const struct tally_db *db, const char *what);
/* A session time, "2026-11-21T13:07:00Z" exactly (a real date and time), as
 * seconds since 1970 into *out (may be NULL). */
bool tally_db_utc_time(const char *s, double *out);

/* The member name of an image's file in an archive (lib/db/member.c):
 * images/ID/NAME, NAME its file name, each part made safe. */
void tally_db_image_member(const struct tally_db_image *di, struct strbuf *out);
/* name appended to out safe in any archive and shell: letters, digits and
 * ._+- kept, anything else '_', never '.', '..' or a hidden name, cut at a
 * " (deleted)" suffix. */
void tally_db_add_safe_name(struct strbuf *out, const char *name);

#endif
