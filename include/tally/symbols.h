/* Report-time symbolization: (image, offset) to function, through elfutils
 * libdwfl for files (symbol tables, separate debug info by build-id), the
 * database's kernel.syms for the kernel and its copied maps for JIT code.
 * Each image is opened lazily, once, and verified against the recorded id. */
#ifndef TALLY_SYMBOLS_H
#define TALLY_SYMBOLS_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>

#include "tally/db.h"

struct tally_sym {
	uint64_t addr; /* as the image's symbol table says (link-time address) */
	uint64_t size;
	const char *name;
	int prio; /* among aliases at one address, the lowest wins: global, then weak, then local */
};

struct tally_resolver_opts {
	const char **image_path; /* extra directories to look for images in (NULL-terminated) */
};

struct tally_resolver;

/* *out is owned by the caller (tally_resolver_free). */
int tally_resolver_new(struct tally_resolver **out, const struct tally_db *db, const struct tally_resolver_opts *o);
void tally_resolver_free(struct tally_resolver *r);

/* The function containing offset in db image `image`, or NULL (no symbol, or the
 * image could not be opened or verified: see tally_resolver_note). */
const struct tally_sym *tally_resolve(struct tally_resolver *r, uint32_t image, uint64_t offset);
/* Why an image has no symbols (a one-line note), or NULL when it has them. */
const char *tally_resolver_note(struct tally_resolver *r, uint32_t image);
/* True when the report has opened (or tried to open) the image's symbols. */
bool tally_resolver_loaded(const struct tally_resolver *r, uint32_t image);
/* True when the note is a warning for every report (damaged input, changed file). */
bool tally_resolver_loud(struct tally_resolver *r, uint32_t image);
/* True when the image's file differs from what was recorded (build-id mismatch). */
bool tally_resolver_mismatch(struct tally_resolver *r, uint32_t image);

/* The libdwfl module of db image `image` (a file-backed image, the vDSO copy,
 * or the kernel when --vmlinux gave a matching one), loaded and verified against
 * the recorded id as for tally_resolve, with its separate debug info searched as
 * the report searches it (docs/symbols.md) when dwarf_getdwarf/dwfl_module_getdwarf
 * asks for it. NULL when the image has no such module (JIT, nomap, kernel.syms
 * only, not found, or a different file: see tally_resolver_note). *bias_out (may
 * be NULL) gets the module's load bias: module address = link-time address + bias.
 * The module belongs to the resolver and lives until tally_resolver_free. */
Dwfl_Module *tally_resolver_module(struct tally_resolver *r, uint32_t image, GElf_Addr *bias_out);
/* The link-time address (as the image's ELF headers and DWARF use) of a file
 * offset of db image `image` (for kernel, JIT and nomap images the offset is
 * already an address). 0 or -1 when the offset is in no loadable segment or the
 * image has no verified file. */
int tally_resolver_addr(struct tally_resolver *r, uint32_t image, uint64_t offset, uint64_t *addr);

#endif
