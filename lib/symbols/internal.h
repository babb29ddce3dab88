/* Private to lib/symbols (as libdwfl's libdwflP.h): the resolver's state and what
 * its files (resolver.c, verify.c, debugfind.c, debuginfod.c, symtab.c, kernel.c,
 * kmod.c, dwarf.c, explain.c) share. The public API is tally/symbols.h. */
#ifndef TALLY_SYMBOLS_INTERNAL_H
#define TALLY_SYMBOLS_INTERNAL_H

#include "tally/cache.h"
#include "tally/demangle.h"
#include "tally/jitdump.h"
#include "tally/symbols.h"
#include "tally/imgmap.h"
#include "tally/util.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elf.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

struct phdr {
	uint64_t off, filesz, vaddr;
};

struct section {
	uint64_t start, end;
	char *label; /* "[.plt]" */
};

struct imgsyms {
	int state; /* 0 not loaded, 1 loaded */
	/* its image's kind (sym_is_file_kind, "kernel"), said at load: asked per lookup */
	bool file_kind, kernel;
	struct section *secs; /* executable sections, for code outside any symbol */
	size_t nsecs;
	struct tally_sym secsym;
	char **owned; /* names we had to copy (version suffixes cut, demangled) */
	size_t nowned, aowned;
	uint8_t *demangled; /* per symbol: its name was demangled (or needs not be) */
	uint32_t *symframe; /* per symbol: its frame in r->frames + 1, when its code has no
			       DWARF to read (dwarf.c, symbol_frame); 0: not yet */
	bool mismatch;
	bool loud; /* the note is a warning every report shows, not only -v */
	char *note;
	struct tally_sym *syms;
	size_t nsyms;
	size_t last_sym; /* lookup's last answer: the upper bound of its address in syms */
	char *names; /* storage for JIT and kernel names when copied */
	struct phdr *ph;
	size_t nph;
	Dwfl *dwfl;
	Dwfl_Module *mod; /* verified against the recorded id */
	uint64_t bias;
	struct tally_jitdump *jd; /* JIT: the database's copy of the process's jitdump */
	struct strbuf log; /* for --explain: where we looked and what we found */
	char *file;        /* the file the module was made from */
	char *debug_file;  /* the separate debug file libdwfl was given, if any */
	int dwarf_state;   /* 0 not asked, 1 found, -1 none */
	bool debug_searched; /* the search for a debug file ran and found none */
	bool from_cache;   /* the image file is the build-id cache's copy */
	Dwarf *dw;
	bool have_symtab;  /* the names come from a .symtab (not only .dynsym) */
	/* of syms: functions no symbol names, from .eh_frame FDEs (IMAGE+0xADDR) */
	size_t nfde;
	uint64_t kdelta;   /* --vmlinux: running kernel address - vmlinux address */
	size_t dwarf_missing; /* addresses in no compile unit (damaged or partial DWARF) */
	char *dwarf_err;
	uint32_t image;
	struct tally_resolver *r;
	/* a kernel module's own identity; NULL: r->db->images[image] */
	const struct tally_db_image *di;
	/* the kernel: its modules, and where each kernel.syms symbol of a module is in its .ko */
	struct kmod *kmods;
	size_t nkmods;
	uint32_t *ksym_kmod;  /* per symbol: index into kmods, or UINT32_MAX */
	uint64_t *ksym_delta; /* recorded address - the .ko's address (libdwfl's layout) */
	bool *ksym_placed;
};

/* A kernel module with samples: its .ko, found under --image-path or
 * /lib/modules/RELEASE, verified and placed by the recorded symbols. */
struct kmod {
	char *name;               /* as kernel.syms names it */
	/* what the debug search needs: the .ko's path, the recorded build-id */
	struct tally_db_image img;
	/* the .ko's Dwfl and DWARF; its log is the module's for --explain */
	struct imgsyms sub;
	void *mem;                 /* a .ko.zst, decompressed: libdwfl reads it in place */
	int state;                 /* 0 not looked for, 1 placed, -1 not usable */
};

/* A .ko file under one of the directories searched for modules. */
struct kofile {
	char *norm; /* the module's name as the kernel writes it ('-' as '_'), no extension */
	char *path;
};

struct fcache {
	uint32_t image;
	bool ret;
	uint64_t offset;
	uint32_t first, n;
};

struct tally_resolver {
	const struct tally_db *db;
	struct tally_resolver_opts o;
	struct imgsyms *im;
	char *debuginfo_path;
	Dwfl_Callbacks cb;
	/* resolved frames, once per (image, offset, ret) */
	struct fcache *fc;
	size_t nfc, afc;
	struct tally_hidx fc_idx;
	struct tally_srcframe *frames;
	size_t nframes, aframes;
	/* source file names made absolute (the CU's comp_dir joined), interned */
	char **paths;
	size_t npaths, apaths;
	struct tally_hidx path_idx;
	/* .ko files under --image-path, /lib/modules/RELEASE and its debug tree */
	struct kofile *ko;
	size_t nko;
	bool ko_walked;
	struct strbuf ko_note; /* a search that stopped early, for --explain */
	char *modules_dir;
	/* reading an archive: its root, the only place files come from (besides the options) */
	const char *archive;
	struct tally_cache cache; /* the build-id cache, opened at its first use (sym_cache) */
	/* 0 not opened yet, 1 open, -1 none (off, missing, not the user's) */
	int cache_state;
	debuginfod_client *dfd;
	/* libdebuginfod, loaded only when --debuginfod is used (it brings libcurl) */
	void *dfd_lib;
	debuginfod_client *(*dfd_begin)(void);
	int (*dfd_find)(debuginfod_client *, const unsigned char *, int, char **);
	void (*dfd_set_progressfn)(debuginfod_client *, debuginfod_progressfn_t);
	void (*dfd_set_user_data)(debuginfod_client *, void *);
	void *(*dfd_get_user_data)(debuginfod_client *);
	void (*dfd_end)(debuginfod_client *);
	/* --debuginfod-timeout bounds the whole report: when it ends (0: not started) */
	double dfd_until;
	uint32_t dfd_image; /* the image being downloaded, for progress */
};

struct cand {
	char *path;
	const char *why;
	bool debuglink; /* verify by CRC when the image has no build-id */
};

struct fsym {
	GElf_Sym sym;
	GElf_Addr addr;
	GElf_Word shndx;
	Elf *elf;
	const char *name;
};

void sym_set_note(struct imgsyms *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A progress line for slow work (tally_resolver_opts.progress), if asked for. */
void sym_progress(struct tally_resolver *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void sym_logf_(struct imgsyms *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sym_finish_syms(struct imgsyms *s);
void sym_load(struct tally_resolver *r, uint32_t image);
bool sym_offset_to_addr(const struct imgsyms *s, uint64_t offset, uint64_t *addr);
bool sym_is_file_kind(const struct tally_db_image *di);
struct imgsyms *sym_get(struct tally_resolver *r, uint32_t image);
bool sym_elf_damaged(const char *path, struct strbuf *why);
int sym_check_file(const struct tally_db_image *di, const char *path, struct strbuf *why);
uint32_t sym_crc32_file(int fd, bool *ok);
void sym_describe_sections(Elf *elf, struct strbuf *out);
bool sym_elf_has_section(Elf *elf, const char *name);
void sym_add_cand(struct cand **c, size_t *n, size_t *a, const char *why, bool dl, const char *fmt,
		  ...) __attribute__((format(printf, 6, 7)));
void sym_free_cands(struct cand *c, size_t n);
int sym_open_debug(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
		   const char *main_path, const char *debuglink, GElf_Word crc, char **out_path);
int sym_find_debuginfo_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name);
int sym_try_debuginfod(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
		       char **path);
Dwfl_Module *sym_report_module_mem(struct tally_resolver *r, struct imgsyms *s,
				   const struct tally_db_image *di, const char *path, void *mem,
				   size_t len);
Dwfl_Module *sym_report_module(struct tally_resolver *r, struct imgsyms *s,
			       const struct tally_db_image *di, const char *path);
bool sym_func_sym(Dwfl_Module *mod, int i, struct fsym *f);
void sym_load_dwfl(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
		   const char *path, bool verify);
void sym_load_file(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di);
void sym_load_jit(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di);
void sym_load_kernel(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di);
void sym_kmod_load(struct tally_resolver *r, struct imgsyms *ks, uint32_t k);
void sym_kmods_init(struct tally_resolver *r, struct imgsyms *s);
struct imgsyms *sym_kmod_at(struct tally_resolver *r, struct imgsyms *s,
			    const struct tally_sym *sym, uint64_t addr, uint64_t *koaddr,
			    const char **modname);
Dwarf *sym_get_dwarf(struct imgsyms *s);
/* The build-id cache, when the report may use it (not an archive's, not
 * --no-buildid-cache) and it is there: opened at the first call, or NULL. */
struct tally_cache *sym_cache(struct tally_resolver *r);

#endif
