/* The profile database: a directory of plain-text files (docs/format.md).
 * Writing is atomic (staging directory, then rename); reading validates every
 * line and names the file and line of anything damaged. */
#ifndef TALLY_DB_H
#define TALLY_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/agg.h"
#include "tally/elfinfo.h"

#define TALLY_FORMAT_VERSION 1

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

/* Fails with a one-line error when path exists (and !force) or its parent is not writable. */
int tally_db_check_target(const char *path, bool force);
/* Writes the aggregate and the session metadata (the caller's keys; counts are
 * added here) as a database at path, atomically. */
int tally_db_write(const char *path, bool force, struct tally_agg *a, struct tally_meta *session);

struct tally_db_image {
	char *name;    /* file name for reports: libc.so.6, kernel, nomap, jit */
	char *path;
	char *id;      /* build-id or content hash (hex) */
	char *id_kind; /* build-id | xxh64 | none */
	char *kind;    /* exec | lib | kernel | nomap | jit | vdso */
	int pid;       /* JIT and per-pid nomap: the process */
	bool foreign_ns; /* mapped inside another mount namespace: path is the container's (file mntns) */
};

struct tally_db_entry {
	uint32_t image;
	int32_t pid;
	uint64_t offset;
};

/* One .prof file: its entries are entries[first..end), all of one image and pid. */
struct tally_db_prof {
	uint32_t image;
	int32_t pid;
	size_t first, end;
};

struct tally_db_stack {
	uint32_t first, len; /* into frames, leaf first */
	int32_t pid;
};

struct tally_db_task {
	int pid;
	char *comm, *exe;
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

	struct tally_db_image *images;
	size_t nimages;

	struct tally_db_entry *entries;
	size_t nentries, aentries;
	uint64_t *counts; /* nentries * nevents */
	size_t acounts;
	struct tally_db_prof *profs; /* one per (image, pid): no two files share one */
	size_t nprofs, aprofs;

	struct tally_frame *frames; /* image is a db image index */
	size_t nframes, aframes;
	struct tally_db_stack *stacks;
	size_t nstacks, astacks;
	uint64_t *stack_counts; /* nstacks * nevents */
	size_t astack_counts;

	struct tally_ksym *ksyms;
	size_t nksyms;
	struct tally_db_task *tasks;
	size_t ntasks;
};

/* Reads a whole database. On error db is released and tally_seterr names the
 * file (and line) and the fix. */
int tally_db_open(struct tally_db *db, const char *path);
void tally_db_release(struct tally_db *db);
/* Index of an event by name, or -1. */
int tally_db_event(const struct tally_db *db, const char *name);
/* The comm of a pid from the task list, or NULL. */
const char *tally_db_comm(const struct tally_db *db, int pid);

/* Parsing helpers, exposed for the unit tests and fuzzers. Each returns 0 or
 * -EINVAL with tally_seterr naming what (file) and line. */
int tally_parse_header_line(const char *line, const char *what, size_t lineno, char **key, char **value);
int tally_parse_prof_line(const char *line, const char *what, size_t lineno, int nevents, uint64_t *offset,
			  uint64_t *counts);

#endif
