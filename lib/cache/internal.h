/* Private to lib/cache: what cache.c and fill.c share with elf.c, the ELF
 * work of the cache (a debug file's search, decompressing its DWARF). */
#ifndef TALLY_CACHE_INTERNAL_H
#define TALLY_CACHE_INTERNAL_H

#include <stdint.h>

/* Writes to out a copy of the ELF file open at src (named what in errors)
 * with its compressed sections (SHF_COMPRESSED) decompressed: the bytes up to
 * the first of them as they are, the sections from there on laid out again
 * one after another, then the section headers. 0 when written, 1 when there
 * is nothing to decompress or the file is not one this rewrites (not a
 * little-endian ELF64 of this machine's byte order, a segment past the first
 * compressed section): the caller copies it as it is. -errno with
 * tally_seterr on a failure to read or write. */
int tally_cache_decompress_elf(int src, int out, const char *what);
/* How many times its file's size a debug file's compressed sections may claim
 * to hold decompressed (over it: -EFBIG, not cached). */
#define TALLY_CACHE_INFLATE_MAX 32
/* The bytes [off, off + n) of src into out with pread: never the descriptor's
 * position, which a process the descriptor was handed to shares. 0, or -errno
 * with tally_seterr (-EIO when the file ends first). */
int tally_cache_copy_range(int src, int out, uint64_t off, uint64_t n, const char *what);
/* The separate debug file of the image open at fd (its path src) with
 * build-id id (hex), when the image has no DWARF of its own: the first of
 * /usr/lib/debug/.build-id/xx/rest.debug and its .gnu_debuglink next to src,
 * in .debug/ and under /usr/lib/debug that has that build-id. Allocated, or
 * NULL. */
char *tally_cache_debug_file(int fd, const char *src, const char *id);
/* For the calling thread: while *stop (may be NULL: never) is non-zero, a
 * copy into the cache gives up between two blocks (-ECANCELED, nothing left
 * behind). The filler's thread sets it, so that its end need not wait for a
 * whole file. */
void tally_cache_copy_stop(const int *stop);
/* -ECANCELED with tally_seterr (naming what) once the calling thread's copy
 * is stopped (tally_cache_copy_stop), else 0. */
int tally_cache_copy_stopped(const char *what);

#endif
