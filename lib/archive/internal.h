/* What the archive writer (archive.c), reader (read.c) and stripper (strip.c)
 * share inside libtally. */
#ifndef TALLY_ARCHIVE_INTERNAL_H
#define TALLY_ARCHIVE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A streaming XXH3-128 (the MANIFEST's checksum), without xxhash.h here. */
struct tally_ar_sum {
	_Alignas(64) unsigned char state[1024];
};
void tally_ar_sum_init(struct tally_ar_sum *h);
void tally_ar_sum_update(struct tally_ar_sum *h, const void *p, size_t n);
void tally_ar_sum_final(struct tally_ar_sum *h, unsigned char out[16]);
/* 32 hex digits and a NUL into hex. */
void tally_ar_hex16(const unsigned char *sum, char *hex);
/* Equality of a MANIFEST entry's name (ctx: the struct tally_manifest). */
bool tally_ar_entry_eq(const void *ctx, uint32_t idx, const void *key);
/* Creates the directories above name (a checked member name) under dirfd. 0 or -errno. */
int tally_ar_mkparents(int dirfd, const char *name);

/* ---- staging copies and unpacked archives (staging.c) ---- */

/* Holds dirfd/name, a file or directory this process just made under a name
 * PREFIX + PID-XXXXXX (its pid, then mkdtemp's six letters): locks it (flock), so
 * that tally_ar_tidy of another process leaves it, and removes it (without
 * following links) if SIGINT, SIGTERM, SIGHUP or SIGPIPE ends the process
 * (handlers installed on the first call, for those signals nobody else
 * handles or ignores). A slot for tally_ar_release, or -errno (then it is
 * not held, but still found by tally_ar_tidy once this process is gone). */
int tally_ar_hold(int dirfd, const char *name);
/* The same for a path. */
int tally_ar_hold_path(const char *path);
/* No longer held (renamed into place, or removed): its lock is dropped. */
void tally_ar_release(int slot);
/* Removes from dir what processes that were killed left there: each entry
 * named one of the prefixes + PID-XXXXXX, owned by this user, a regular file
 * or directory (never a link), not locked, whose process is gone; nothing
 * when dir is one where another user may rename or link things in (writable
 * by others without the sticky bit, or another user's). The number removed. */
int tally_ar_tidy(const char *dir, const char *const *prefixes, size_t nprefixes);

#endif
