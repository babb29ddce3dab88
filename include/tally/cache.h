/* The build-id cache (docs/symbols.md, "The build-id cache"): a copy of every
 * file image a recording sampled, and of its separate debug file, kept per
 * user under $XDG_CACHE_HOME/tally/buildid (default ~/.cache/tally/buildid)
 * and named by the image's id, so that a profile names its code after the
 * program was rebuilt, upgraded or removed (perf's ~/.debug, debuginfod's
 * client cache, DCPI's kept images). Bounded: least recently used entries go
 * first once it holds more than its limit.
 *
 * Layout: one directory per image, named by its build-id (hex) or
 * "xxh64-HASH" for an image without one, holding
 *   image   the image file, byte for byte
 *   debug   its separate debug file, with compressed DWARF sections
 *           decompressed (reports then read only the parts they need)
 *   path    the path the image was recorded at (for 'tally cache list')
 *   used    empty; its modification time is when a report or a recording
 *           last used the entry (least recently used goes first)
 * Nothing in it is trusted: every reader verifies a file against the id its
 * profile recorded. Written without following any link, in a directory
 * checked as tally_dir_check(TALLY_DIR_PRIVATE) checks (the user's alone,
 * every directory above it out of other users' reach); each file is made
 * under a temporary name and renamed into place. */
#ifndef TALLY_CACHE_H
#define TALLY_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/util.h"

/* The default limit: this much, or a tenth of the file system that holds the
 * cache when that is less. TALLY_BUILDID_CACHE_SIZE (a size, tally_parse_size)
 * overrides it. */
#define TALLY_CACHE_DEFAULT_MAX (UINT64_C(4) << 30)

struct tally_cache {
	char *path; /* the directory, without links */
	int fd;     /* open on it (O_DIRECTORY), -1 when closed */
};

/* The cache's directory (not checked, not made) into out: TALLY_BUILDID_CACHE
 * when it is a path, else $XDG_CACHE_HOME/tally/buildid, else
 * $HOME/.cache/tally/buildid; for root, its own home's (the passwd entry's)
 * unless XDG_CACHE_HOME is set. -ENOENT with tally_seterr when the cache is
 * off (TALLY_BUILDID_CACHE=off) or no home is known. */
int tally_cache_path(struct strbuf *out);
/* Opens the cache, made (mode 0700, and the directories above it) when create
 * and missing; checked as tally_dir_check(TALLY_DIR_PRIVATE). For root, when
 * the environment's directory fails the check (sudo keeps the user's HOME),
 * root's own is used. 0, or -errno with tally_seterr (the cache is then not
 * used: c->fd stays -1). */
int tally_cache_open(struct tally_cache *c, bool create);
void tally_cache_close(struct tally_cache *c);

#define TALLY_CACHE_KEY_MAX 160
/* The entry's name for an image id (id_kind "build-id" or "xxh64", id in
 * lowercase hex) into key (TALLY_CACHE_KEY_MAX bytes): false for any other
 * id (none, replaced, unreachable) or one that is not hex. */
bool tally_cache_key(const char *id_kind, const char *id, char *key);

enum tally_cache_file { TALLY_CACHE_IMAGE, TALLY_CACHE_DEBUG };
/* The path of an entry's file when it is there (a regular file; allocated,
 * the caller's), else NULL. Not verified: the caller verifies it against
 * its id (the resolver does, as for every file). */
char *tally_cache_find(const struct tally_cache *c, const char *key, enum tally_cache_file f);
/* Whether the entry's file is there (one fstatat). */
bool tally_cache_has(const struct tally_cache *c, const char *key, enum tally_cache_file f);
/* Marks the entry as used now (least recently used goes first). */
void tally_cache_touch(const struct tally_cache *c, const char *key);

/* A file of the cache's own beside its entries, by name (the kernel's symbols,
 * lib/record/kcache.c): read whole into sb when it is a regular file of the
 * user's of at most max bytes, or written under a temporary name and renamed
 * into place (not synced: a cache, whose reader checks what it reads).
 * 0 or -errno with tally_seterr. */
int tally_cache_read_file(const struct tally_cache *c, const char *name, struct strbuf *sb,
			  uint64_t max);
/* The same file opened (read-only): the fd, or -errno with tally_seterr. */
int tally_cache_open_file(const struct tally_cache *c, const char *name, uint64_t max);
int tally_cache_write_file(const struct tally_cache *c, const char *name, const void *data,
			   size_t len);

/* Adds the file open at src_fd (its name src, for errors) as the entry's
 * image or debug file, once it is verified to have the id (a build-id: the
 * same; xxh64: the same content hash); a debug file's compressed DWARF
 * sections are written decompressed. recorded: the image's recorded path (kept
 * for the listing; NULL: none). 1 when added, 0 when it was there already,
 * -errno with tally_seterr (-ESTALE: the file is not the one of that id). */
int tally_cache_add_fd(struct tally_cache *c, const char *id_kind, const char *id, int src_fd,
		       const char *src, enum tally_cache_file f, const char *recorded);
/* The same by path (followed: /lib64 is a link). */
int tally_cache_add(struct tally_cache *c, const char *id_kind, const char *id, const char *src,
		    enum tally_cache_file f, const char *recorded);
/* Adds an image (open at src_fd, or by src when src_fd < 0) and, when the
 * image has a build-id but no DWARF of its own, its separate debug file,
 * looked for as a report looks for it on this machine: by build-id under
 * /usr/lib/debug/.build-id, then by its .gnu_debuglink next to src, in .debug/
 * and under /usr/lib/debug. Either may be there already. 0 or -errno with
 * tally_seterr (what could not be added). */
int tally_cache_add_image(struct tally_cache *c, const char *id_kind, const char *id, int src_fd,
			  const char *src, const char *recorded);

struct tally_cache_entry {
	char *key;
	char *path;     /* as recorded, or NULL */
	uint64_t bytes; /* of its files (allocated blocks) */
	double used;    /* seconds since 1970 */
	bool image, debug;
};
struct tally_cache_list {
	struct tally_cache_entry *v; /* most recently used first */
	size_t n, alloc;
	uint64_t bytes;
};
/* Every entry of the cache. 0 or -errno with tally_seterr. */
int tally_cache_list(const struct tally_cache *c, struct tally_cache_list *out);
void tally_cache_list_release(struct tally_cache_list *l);
/* The cache's limit in bytes (see TALLY_CACHE_DEFAULT_MAX). -EINVAL with
 * tally_seterr when TALLY_BUILDID_CACHE_SIZE is not a size. */
int tally_cache_limit(const struct tally_cache *c, uint64_t *out);
/* Removes least recently used entries until the cache holds at most max bytes,
 * and the temporaries of writers that are gone. *removed and *freed (may be
 * NULL) get how many entries and bytes went. 0 or -errno with tally_seterr. */
int tally_cache_prune(const struct tally_cache *c, uint64_t max, size_t *removed, uint64_t *freed);
/* Removes one entry. 0, -ENOENT, or -errno with tally_seterr. */
int tally_cache_remove(const struct tally_cache *c, const char *key);

/* ---- filling it while recording (lib/cache/fill.c) ----
 * The recording engine hands over every file image as it gets its first
 * sample; what the cache lacks is copied on a thread of its own, never on the
 * recording's. The source file is opened when it is handed over (while the
 * process that mapped it runs: a program rebuilt in place after the recording
 * is not the one copied), and checked to be the file mapped. */
struct tally_cache_filler;
/* A filler for this user's cache; NULL when the cache is off or cannot be
 * used, and then *why (may be NULL) gets the reason (the caller's to free). */
struct tally_cache_filler *tally_cache_filler_new(char **why);
/* An image with samples: touched when the cache has it, else queued. src: the
 * path to read it by (through /proc/PID/root for a container's), recorded: as
 * the profile names it; dev (major << 20 | minor, as struct tally_image's maj
 * and min) and ino: the file that was mapped (ino 0: unknown). Called on the
 * recording's thread: at most an open, an fstat and an fstatat. */
void tally_cache_filler_image(struct tally_cache_filler *f, const char *id_kind, const char *id,
			      const char *src, const char *recorded, uint32_t maj, uint32_t min,
			      uint64_t ino);
/* What is queued and not yet copied goes on in a process of its own, detached
 * (the caller is about to exit: tally record's end never waits for a copy).
 * Nothing is started when nothing is left. */
void tally_cache_filler_handoff(struct tally_cache_filler *f);
/* Images handed over, found in the cache, and copied into it so far. */
void tally_cache_filler_counts(const struct tally_cache_filler *f, size_t *seen, size_t *cached,
			       size_t *copied);
/* Stops the thread: a copy under way gives up within a block (64 KiB) or a
 * section, and the thread is joined (a thread stuck in a read for 2 s is left
 * to end alone), so no thread of the filler outlives it. Accepts NULL. */
void tally_cache_filler_free(struct tally_cache_filler *f);

#endif
