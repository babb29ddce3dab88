/* Report-time symbolization: (image, offset) to function, source line and
 * inline chain, through elfutils libdwfl/libdw for files (symbol tables, DWARF,
 * separate debug info found by build-id as docs/symbols.md says), the
 * database's kernel.syms (and --vmlinux) for the kernel and its copied maps for
 * JIT code. Each image is opened lazily, once, and every file used is verified
 * against the recorded id; each distinct (image, offset) is resolved once. */
#ifndef TALLY_SYMBOLS_H
#define TALLY_SYMBOLS_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/util.h"

struct tally_sym {
	uint64_t addr; /* as the image's symbol table says (link-time address) */
	uint64_t size;
	const char *name;
	int prio; /* among aliases at one address, the lowest wins: global, then weak, then local;
		   * TALLY_SYM_FDE: no symbol, bounds from .eh_frame, named IMAGE+0xADDRESS;
		   * TALLY_SYM_SECTION: neither, the executable section's name ([.plt]) */
};
#define TALLY_SYM_FDE 3
#define TALLY_SYM_SECTION 4

struct tally_imgmap;

struct tally_resolver_opts {
	const char **image_path; /* extra directories to look for images in (NULL-terminated) */
	/* --debug-dir: debug-file directories, searched first (NULL-terminated) */
	const char **debug_dirs;
	const struct tally_imgmap *map; /* --mapfile: image signature to paths (may be NULL) */
	const char *vmlinux;     /* --vmlinux: the kernel image with symbols and DWARF */
	/* kernel modules (default /lib/modules/RELEASE of the recording) */
	const char *modules_dir;
	bool debuginfod;         /* --debuginfod: ask DEBUGINFOD_URLS for missing debug info */
	/* seconds for all the downloads of the resolver (0: the default, 10) */
	double debuginfod_timeout;
	bool no_inline;          /* frames are functions only, inlined code counts for its caller */
	bool lines;              /* source lines wanted: with no_inline, DWARF is read only then */
	/* --no-demangle: C++ and Rust names as the symbol table has them */
	bool no_demangle;
	/* --no-buildid-cache: never look in the build-id cache (tally/cache.h) */
	bool no_cache;
	/* slow work under way (loading an image's symbols, a debuginfod download):
	 * a short text for a progress line, NULL when it is over; may be NULL */
	void (*progress)(void *ctx, const char *what);
	void *progress_ctx;
};

/* One frame of the code at an address: innermost first, the last is the
 * function that contains the address (not inlined). */
struct tally_srcframe {
	const char *name; /* NULL when unknown */
	const char *file; /* source file of the location within this frame, or NULL */
	int line;         /* 0 when unknown */
	bool inlined;
	/* the function's symbol address; inlined: an id of the inlined function */
	uint64_t addr;
};

struct tally_resolver;

/* *out is owned by the caller (tally_resolver_free). */
int tally_resolver_new(struct tally_resolver **out, const struct tally_db *db,
		       const struct tally_resolver_opts *o);
void tally_resolver_free(struct tally_resolver *r);

/* The function containing offset in db image `image`, or NULL (no symbol, or the
 * image could not be opened or verified: see tally_resolver_note). */
const struct tally_sym *tally_resolve(struct tally_resolver *r, uint32_t image, uint64_t offset);
/* The frames at offset (see struct tally_srcframe): the inline chain (unless
 * no_inline) from DWARF and the source lines when there is debug info, else the
 * one function from the symbol table. ret: offset is a return address (the call
 * before it is looked up). *out stays valid until the next call; 0 frames when
 * nothing is known. Cached: each (image, offset, ret) is resolved once. */
size_t tally_resolve_frames(struct tally_resolver *r, uint32_t image, uint64_t offset, bool ret,
			    const struct tally_srcframe **out);
/* The code at (image, offset) as the flat views (report --symbols and --lines,
 * the HTML report's table without stacks) count it: the innermost frame, an
 * inlined function when DWARF has one there; "[offset 0x...]" (in buf) for a
 * file that differs from the recorded one, "[unknown]" when nothing names it.
 * has_addr: addr is the function's own address (not an inline id). */
struct tally_leaf {
	const char *name;
	uint64_t addr;
	bool has_addr, inlined;
	const char *file; /* NULL when unknown */
	int line;
	char buf[40];
};
void tally_resolve_leaf(struct tally_resolver *r, uint32_t image, uint64_t offset,
			struct tally_leaf *out);
/* Why an image has no symbols (a one-line note), or NULL when it has them. */
const char *tally_resolver_note(struct tally_resolver *r, uint32_t image);
/* True when the report has opened (or tried to open) the image's symbols. */
bool tally_resolver_loaded(const struct tally_resolver *r, uint32_t image);
/* True when the note is a warning for every report (damaged input, changed file). */
bool tally_resolver_loud(struct tally_resolver *r, uint32_t image);
/* True when the image's file differs from what was recorded (build-id mismatch). */
bool tally_resolver_mismatch(struct tally_resolver *r, uint32_t image);
/* The link-time address (as the image's ELF headers and DWARF use; add the
 * bias for libdwfl) of a file offset of db image `image`. For JIT and nomap
 * images the offset is already an address; for the kernel it is the running
 * kernel's address, turned into a vmlinux address when --vmlinux gave one. 0,
 * or -1 when the offset is in no loadable segment or the image has no verified
 * file. */
int tally_resolver_addr(struct tally_resolver *r, uint32_t image, uint64_t offset, uint64_t *addr);

/* The libdwfl module of db image `image` (a file-backed image, the vDSO copy,
 * or the kernel when --vmlinux gave a matching one), loaded and verified against
 * the recorded id as for tally_resolve, with its separate debug info searched as
 * the report searches it (docs/symbols.md) when dwarf_getdwarf/dwfl_module_getdwarf
 * asks for it. NULL when the image has no such module (JIT, nomap, kernel.syms
 * only, not found, or a different file: see tally_resolver_note). *bias_out (may
 * be NULL) gets the module's load bias: module address = link-time address + bias.
 * The module belongs to the resolver and lives until tally_resolver_free. */
Dwfl_Module *tally_resolver_module(struct tally_resolver *r, uint32_t image, GElf_Addr *bias_out);

struct tally_jit_func;
/* JIT images: the jitdump function (name, code bytes, line table; jitdump.h)
 * containing addr, or NULL (no jitdump, or a perf map named it). *elf_mach (may
 * be NULL) gets the ELF machine of its code. It belongs to the resolver. */
const struct tally_jit_func *tally_resolver_jit_func(struct tally_resolver *r, uint32_t image,
						     uint64_t addr, uint32_t *elf_mach);
/* JIT images: the source line of addr from the jitdump's debug info records.
 * 0, or -1 when the dump gave no line for it. *file belongs to the resolver. */
int tally_resolver_jit_line(struct tally_resolver *r, uint32_t image, uint64_t addr,
			    const char **file, unsigned *line);

/* Whether DWARF (lines, inlines) was found for the image (loads it). */
bool tally_resolver_has_dwarf(struct tally_resolver *r, uint32_t image);
/* Where the report looked for the image and its debug info, what it found and
 * why its functions and lines are or are not named: text lines, each ending in
 * a newline, appended to out (docs/symbols.md). Loads the image and its DWARF. */
void tally_resolver_explain(struct tally_resolver *r, uint32_t image, struct strbuf *out);

/* The files the resolver uses for db image `image`, each verified against the
 * recorded id (loading the image, its DWARF and, for the kernel, the modules
 * with samples): the image file and its separate debug file; for the kernel
 * its image (vmlinux) and each module's .ko and debug file. At most max into
 * out; the paths belong to the resolver. None for JIT, nomap and the vDSO
 * (the database holds copies of them) nor for an image whose file differs. */
enum tally_rfile_role {
	TALLY_RFILE_IMAGE,
	TALLY_RFILE_DEBUG,
	TALLY_RFILE_VMLINUX,
	TALLY_RFILE_MODULE,
	TALLY_RFILE_MODULE_DEBUG
};
struct tally_resolver_file {
	const char *path;
	enum tally_rfile_role role;
	const char *module;        /* modules: the name */
	const char *id_kind, *id;  /* what it was verified against (a module's own build-id) */
};
size_t tally_resolver_files(struct tally_resolver *r, uint32_t image,
			    struct tally_resolver_file *out, size_t max);

#endif
