/* Image maps (`tally scan`, the Itsy profiler's iscan): a text file from image
 * signature (build-id, or the XXH64 content hash tally uses for files without
 * one) to the paths of files with that signature, so that a report can find
 * unstripped copies of images recorded on a stripped system. docs/format.md
 * describes the file. */
#ifndef TALLY_IMGMAP_H
#define TALLY_IMGMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/util.h"

/* What a scanned file holds (the map's flags column). */
#define TALLY_IMGMAP_SYMTAB 1u /* .symtab: function names */
#define TALLY_IMGMAP_DEBUG 2u  /* .debug_info: lines and inlines */

struct tally_imgmap_entry {
	char *id_kind; /* build-id | xxh64 */
	char *id;      /* lowercase hex */
	unsigned flags;
	char *path;
};

struct tally_imgmap {
	char *file; /* where it was read from */
	/* sorted by id, the most useful file (debug, then symtab) first */
	struct tally_imgmap_entry *e;
	size_t n, alloc;
};

/* Reads a map file (tally_imgmap_parse over its bytes). 0, or -errno with
 * tally_seterr naming the file and line. */
int tally_imgmap_load(struct tally_imgmap *m, const char *path);
/* Parses a map's bytes (buf, len: anything; a NUL byte is refused as binary
 * data) into m; what names it (m->file, errors). 0 or -EINVAL with tally_seterr
 * naming what and the line; m is released on failure. */
int tally_imgmap_parse(struct tally_imgmap *m, const char *buf, size_t len, const char *what);
void tally_imgmap_release(struct tally_imgmap *m);
/* The entries with this id: returns how many, *first their index. */
size_t tally_imgmap_find(const struct tally_imgmap *m, const char *id, size_t *first);

/* The directories `tally scan` walks when given none (NULL-terminated). */
extern const char *const tally_scan_default_dirs[];

struct tally_scan_stats {
	size_t files;      /* regular files looked at */
	size_t elf;        /* ELF files mapped */
	/* directories skipped because they were already walked (loops, bind mounts) */
	size_t loops;
	size_t unreadable; /* files or directories that could not be read */
	size_t bad_elf;    /* files with an ELF magic that libelf refused */
};

/* Walks dirs (symlinks to directories followed, each directory walked once by
 * device and inode) for ELF files and appends their map lines to out. warn,
 * when not NULL, gets a one-line note for each thing skipped. 0 or -errno
 * (only for a top-level directory that cannot be opened). */
int tally_scan(const char *const *dirs, size_t ndirs, struct strbuf *out,
	       struct tally_scan_stats *st, void (*warn)(const char *msg, void *ctx), void *ctx);

#endif
