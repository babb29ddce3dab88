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

#endif
