/* Symbolization at report time (see symbols.h; the search order is in
 * docs/symbols.md). Every file is checked against the id recorded for the image
 * before it is used, and every file looked at is written to the image's log for
 * --explain. */
#define _GNU_SOURCE
#include "tally/archive.h"
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
	struct section *secs; /* executable sections, for code outside any symbol */
	size_t nsecs;
	struct tally_sym secsym;
	char **owned; /* names we had to copy (version suffixes cut) */
	size_t nowned, aowned;
	bool mismatch;
	bool loud; /* the note is a warning every report shows, not only -v */
	char *note;
	struct tally_sym *syms;
	size_t nsyms;
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
	Dwarf *dw;
	bool have_symtab;  /* the names come from a .symtab (not only .dynsym) */
	uint64_t kdelta;   /* --vmlinux: running kernel address - vmlinux address */
	size_t dwarf_missing; /* addresses in no compile unit (damaged or partial DWARF) */
	char *dwarf_err;
	uint32_t image;
	struct tally_resolver *r;
	const struct tally_db_image *di; /* a kernel module's own identity; NULL: r->db->images[image] */
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
	struct tally_db_image img; /* what the debug search needs: the .ko's path, the recorded build-id */
	struct imgsyms sub;        /* the .ko's Dwfl and DWARF; its log is the module's for --explain */
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
	const char *archive; /* reading an archive: its root, the only place files come from (besides the options) */
	debuginfod_client *dfd;
	/* libdebuginfod, loaded only when --debuginfod is used (it brings libcurl) */
	void *dfd_lib;
	debuginfod_client *(*dfd_begin)(void);
	int (*dfd_find)(debuginfod_client *, const unsigned char *, int, char **);
	void (*dfd_set_progressfn)(debuginfod_client *, debuginfod_progressfn_t);
	void (*dfd_set_user_data)(debuginfod_client *, void *);
	void *(*dfd_get_user_data)(debuginfod_client *);
	void (*dfd_end)(debuginfod_client *);
};

static struct tally_resolver *dfd_resolver; /* for the progress callback's lookups */

static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, char **file_name,
		       Elf **elfp)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name, (void)elfp;
	return -1;
}

static int find_debuginfo_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			     const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			     char **debuginfo_file_name);

int tally_resolver_new(struct tally_resolver **out, const struct tally_db *db, const struct tally_resolver_opts *o)
{
	struct tally_resolver *r = xcalloc(1, sizeof(*r));
	elf_version(EV_CURRENT);
	r->db = db;
	r->archive = db->archive;
	if (o)
		r->o = *o;
	if (r->o.debuginfod_timeout <= 0)
		r->o.debuginfod_timeout = 10;
	r->im = xcalloc(db->nimages + 1, sizeof(*r->im));
	for (size_t i = 0; i < db->nimages; i++) {
		r->im[i].image = (uint32_t)i;
		r->im[i].r = r;
	}
	/* our own callbacks: the search order is ours (docs/symbols.md), every
	 * candidate is verified, and nothing goes to the network unless asked */
	r->cb.find_elf = no_find_elf;
	r->cb.find_debuginfo = find_debuginfo_cb;
	r->cb.section_address = dwfl_offline_section_address;
	r->cb.debuginfo_path = &r->debuginfo_path;
	const char *rel = tally_meta_get(&db->session, "kernel-release");
	if (r->archive) {
		/* the archive's own modules, never this machine's /lib/modules */
		struct strbuf md = STRBUF_INIT;
		strbuf_addf(&md, "%s/kernel/modules", r->archive);
		r->modules_dir = strbuf_detach(&md);
	} else if (r->o.modules_dir)
		r->modules_dir = xstrdup(r->o.modules_dir);
	else if (rel && *rel && !strchr(rel, '/')) {
		struct strbuf md = STRBUF_INIT;
		strbuf_addf(&md, "/lib/modules/%s", rel);
		r->modules_dir = strbuf_detach(&md);
	}
	*out = r;
	return 0;
}

static void imgsyms_release(struct imgsyms *s)
{
	free(s->note);
	free(s->syms);
	free(s->names);
	free(s->ph);
	for (size_t k = 0; k < s->nsecs; k++)
		free(s->secs[k].label);
	free(s->secs);
	for (size_t k = 0; k < s->nowned; k++)
		free(s->owned[k]);
	free(s->owned);
	strbuf_release(&s->log);
	free(s->file);
	free(s->debug_file);
	free(s->dwarf_err);
	if (s->dwfl)
		dwfl_end(s->dwfl);
	tally_jitdump_release(s->jd);
	free(s->jd);
	for (size_t k = 0; k < s->nkmods; k++) {
		struct kmod *km = &s->kmods[k];
		imgsyms_release(&km->sub);
		free(km->mem);
		free(km->name);
		free(km->img.path);
	}
	free(s->kmods);
	free(s->ksym_kmod);
	free(s->ksym_delta);
	free(s->ksym_placed);
}

void tally_resolver_free(struct tally_resolver *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->db->nimages; i++)
		imgsyms_release(&r->im[i]);
	for (size_t i = 0; i < r->nko; i++) {
		free(r->ko[i].norm);
		free(r->ko[i].path);
	}
	free(r->ko);
	strbuf_release(&r->ko_note);
	free(r->modules_dir);
	free(r->fc);
	free(r->frames);
	tally_hidx_release(&r->fc_idx);
	for (size_t i = 0; i < r->npaths; i++)
		free(r->paths[i]);
	free(r->paths);
	tally_hidx_release(&r->path_idx);
	if (r->dfd)
		r->dfd_end(r->dfd);
	/* libdebuginfod stays loaded: libcurl and its TLS library keep global state
	 * that unloading would turn into leaks (and a second resolver reuses it) */
	free(r->im);
	free(r);
}

static void set_note(struct imgsyms *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_note(struct imgsyms *s, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	free(s->note);
	s->note = strbuf_detach(&sb);
}

static void logf_(struct imgsyms *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct imgsyms *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_addstr(&s->log, "  ");
	strbuf_vaddf(&s->log, fmt, ap);
	strbuf_addch(&s->log, '\n');
	va_end(ap);
}

static int cmp_sym(const void *a, const void *b)
{
	const struct tally_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* larger first: the enclosing function wins over a zero-size label */
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	if (x->prio != y->prio)
		return x->prio - y->prio;
	return (int)strlen(x->name) - (int)strlen(y->name);
}

/* Sorted, aliases collapsed, zero sizes extended to the next symbol. */
static void finish_syms(struct imgsyms *s)
{
	tally_qsort(s->syms, s->nsyms, sizeof(*s->syms), cmp_sym);
	size_t u = 0;
	for (size_t i = 0; i < s->nsyms; i++)
		if (!u || s->syms[u - 1].addr != s->syms[i].addr)
			s->syms[u++] = s->syms[i];
	s->nsyms = u;
	for (size_t i = 0; i + 1 < u; i++)
		if (!s->syms[i].size) {
			uint64_t end = s->syms[i + 1].addr;
			for (size_t k = 0; k < s->nsecs; k++)
				if (s->syms[i].addr >= s->secs[k].start && s->syms[i].addr < s->secs[k].end &&
				    s->secs[k].end < end)
					end = s->secs[k].end;
			s->syms[i].size = end - s->syms[i].addr;
		}
}

/* ---- identity checks ---- */

/* Whether the file's headers promise more than it holds (truncated, or a
 * damaged header): such a file is never used, libdwfl would read past it. */
static bool elf_damaged(const char *path, struct strbuf *why)
{
	struct stat st;
	int fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, &st);
	if (fd < 0) {
		strbuf_addf(why, ", but cannot be read: %s", tally_errmsg());
		return true;
	}
	uint64_t size = (uint64_t)st.st_size;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	bool bad = false;
	if (!e || !gelf_getehdr(e, &eh)) {
		strbuf_addf(why, ", but damaged ELF header (%s)", elf_errmsg(-1));
		bad = true;
		goto out;
	}
	if (eh.e_shoff && (eh.e_shoff > size || (uint64_t)eh.e_shnum * eh.e_shentsize > size - eh.e_shoff)) {
		strbuf_addf(why, ", but truncated: its section headers end past its %" PRIu64 " bytes", size);
		bad = true;
		goto out;
	}
	size_t nph = 0;
	if (elf_getphdrnum(e, &nph) == 0)
		for (size_t i = 0; i < nph && !bad; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)) {
				strbuf_addf(why, ", but truncated: segment %zu ends past its %" PRIu64 " bytes", i, size);
				bad = true;
			}
		}
	Elf_Scn *scn = NULL;
	while (!bad && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh)) {
			strbuf_addf(why, ", but damaged section header (%s)", elf_errmsg(-1));
			bad = true;
		} else if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)) {
			strbuf_addf(why, ", but truncated: section %zu ends past its %" PRIu64 " bytes", elf_ndxscn(scn), size);
			bad = true;
		}
	}
out:
	if (e)
		elf_end(e);
	close(fd);
	return bad;
}

/* Returns 1 when path is the recorded file, 0 when it is another file, -1 when
 * it cannot be read as ELF, -2 when it is the recorded file but truncated or
 * damaged; *why says which (for the log). */
static int check_file(const struct tally_db_image *di, const char *path, struct strbuf *why)
{
	struct tally_elf_info info;
	bool hash = !strcmp(di->id_kind, "xxh64");
	strbuf_reset(why);
	if (tally_elf_info(path, hash ? 2 : 0, &info)) {
		strbuf_addf(why, "%s", tally_errmsg());
		return -1;
	}
	if (!info.is_elf) {
		strbuf_addstr(why, "not an ELF file (or a damaged one)");
		return -1;
	}
	char hex[160];
	if (!strcmp(di->id_kind, "build-id")) {
		if (!info.build_id_len) {
			strbuf_addf(why, "has no build-id, the profile recorded %s: not used", di->id);
			return 0;
		}
		tally_hex(info.build_id, info.build_id_len, hex);
		if (strcmp(hex, di->id)) {
			strbuf_addf(why, "has build-id %s, the profile recorded %s: another file, not used", hex, di->id);
			return 0;
		}
		strbuf_addf(why, "build-id %s matches", hex);
		if (elf_damaged(path, why)) {
			strbuf_addstr(why, ": skipped");
			return -2;
		}
		return 1;
	}
	if (hash) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
		if (!info.have_hash || strcmp(hex, di->id)) {
			strbuf_addf(why, "content hash %s, the profile recorded %s: another file, not used", hex, di->id);
			return 0;
		}
		strbuf_addf(why, "content hash %s matches", hex);
		if (elf_damaged(path, why)) {
			strbuf_addstr(why, ": skipped");
			return -2;
		}
		return 1;
	}
	strbuf_addstr(why, "no id was recorded, so it cannot be verified");
	if (elf_damaged(path, why)) {
		strbuf_addstr(why, ": skipped");
		return -2;
	}
	strbuf_addstr(why, ": used as it is");
	return 1;
}

static uint32_t crc32_file(int fd, bool *ok)
{
	static uint32_t table[256];
	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	uint32_t crc = 0xffffffffu;
	unsigned char buf[65536];
	ssize_t n;
	*ok = true;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
	if (n < 0)
		*ok = false;
	lseek(fd, 0, SEEK_SET);
	return crc ^ 0xffffffffu;
}

/* Which of the sections that matter an ELF file has, as text. */
static void describe_sections(Elf *elf, struct strbuf *out)
{
	static const char *const want[] = { ".symtab", ".dynsym", ".debug_info", ".debug_line", ".eh_frame",
					    ".debug_frame", ".gnu_debuglink", ".gnu_debugdata" };
	bool have[ARRAY_SIZE(want)] = { false };
	bool nobits_text = false;
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) {
		strbuf_addstr(out, "no section headers");
		return;
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!nm)
			continue;
		if (!strcmp(nm, ".text") && sh.sh_type == SHT_NOBITS)
			nobits_text = true;
		for (size_t i = 0; i < ARRAY_SIZE(want); i++)
			if (!strcmp(nm, want[i]) || (!strncmp(want[i], ".debug_", 7) && !strncmp(nm, ".zdebug_", 8) &&
						     !strcmp(nm + 8, want[i] + 7)))
				have[i] = have[i] || sh.sh_type != SHT_NOBITS;
	}
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		strbuf_addf(out, "%s%s %s", i ? ", " : "", want[i], have[i] ? "yes" : "no");
	strbuf_addf(out, "; CFI %s", have[4] && have[5] ? ".eh_frame and .debug_frame" : have[4] ? ".eh_frame" : have[5] ? ".debug_frame" : "none");
	if (nobits_text)
		strbuf_addstr(out, "; code sections are empty (a separate debug file)");
}

static bool elf_has_section(Elf *elf, const char *name)
{
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		if (gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS && (nm = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    !strcmp(nm, name))
			return true;
	}
	return false;
}

/* ---- where debug files may be (docs/symbols.md) ---- */

struct cand {
	char *path;
	const char *why;
	bool debuglink; /* verify by CRC when the image has no build-id */
};

static void add_cand(struct cand **c, size_t *n, size_t *a, const char *why, bool dl, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static void add_cand(struct cand **c, size_t *n, size_t *a, const char *why, bool dl, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*c)[i].path, sb.buf)) {
			strbuf_release(&sb);
			return;
		}
	GROW(*c, *a, *n + 1);
	(*c)[(*n)++] = (struct cand){ strbuf_detach(&sb), why, dl };
}

static char *dirname_of(const char *path)
{
	const char *sl = strrchr(path, '/');
	if (!sl)
		return xstrdup(".");
	if (sl == path)
		return xstrdup("");
	return xstrndup(path, (size_t)(sl - path));
}

/* Candidates in order: per --debug-dir the build-id tree, then the binary's own
 * path and its debuglink under it; the system's build-id tree; the debuglink
 * next to the binary, in .debug/ and under /usr/lib/debug; the --mapfile
 * entries with this build-id. */
static void debug_cands(struct tally_resolver *r, const struct tally_db_image *di, const char *main_path,
			const char *debuglink, struct cand **c, size_t *n)
{
	size_t a = 0;
	bool bid = !strcmp(di->id_kind, "build-id") && strlen(di->id) > 2;
	const char *orig = di->path;
	char *odir = dirname_of(orig);
	char *mdir = main_path ? dirname_of(main_path) : NULL;
	for (size_t i = 0; r->o.debug_dirs && r->o.debug_dirs[i]; i++) {
		const char *d = r->o.debug_dirs[i];
		if (bid)
			add_cand(c, n, &a, "--debug-dir build-id", false, "%s/.build-id/%.2s/%s.debug", d, di->id, di->id + 2);
		if (orig[0] == '/') {
			add_cand(c, n, &a, "--debug-dir with the binary's path", false, "%s%s", d, orig);
			add_cand(c, n, &a, "--debug-dir with the binary's path", false, "%s%s.debug", d, orig);
		}
		if (debuglink && orig[0] == '/')
			add_cand(c, n, &a, "--debug-dir with the binary's directory and its debuglink", true, "%s%s/%s", d, odir,
				 debuglink);
	}
	if (bid && r->archive)
		add_cand(c, n, &a, "the archive's build-id directory", false, "%s/debug/.build-id/%.2s/%s.debug", r->archive,
			 di->id, di->id + 2);
	else if (bid)
		add_cand(c, n, &a, "system build-id directory", false, "/usr/lib/debug/.build-id/%.2s/%s.debug", di->id,
			 di->id + 2);
	if (debuglink) {
		const char *dirs[2] = { mdir, odir };
		for (int k = 0; k < 2; k++) {
			if (!dirs[k] || (k == 1 && mdir && !strcmp(mdir, odir)))
				continue;
			/* an archive's debuglink files sit next to its copy of the image, and
			 * nothing outside it is looked at */
			if (r->archive && (k == 1 || !main_path))
				continue;
			add_cand(c, n, &a, ".gnu_debuglink next to the binary", true, "%s/%s", dirs[k], debuglink);
			add_cand(c, n, &a, ".gnu_debuglink in .debug/", true, "%s/.debug/%s", dirs[k], debuglink);
			if ((dirs[k][0] == '/' || !dirs[k][0]) && !r->archive)
				add_cand(c, n, &a, ".gnu_debuglink under /usr/lib/debug", true, "/usr/lib/debug%s/%s", dirs[k],
					 debuglink);
		}
	}
	if (bid && r->o.map) {
		size_t first, m = tally_imgmap_find(r->o.map, di->id, &first);
		for (size_t i = 0; i < m; i++)
			if (r->o.map->e[first + i].flags & (TALLY_IMGMAP_DEBUG | TALLY_IMGMAP_SYMTAB))
				add_cand(c, n, &a, "--mapfile", false, "%s", r->o.map->e[first + i].path);
	}
	free(odir);
	free(mdir);
}

static void free_cands(struct cand *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i].path);
	free(c);
}

struct dfd_deadline {
	double until;
};

static int dfd_progress(debuginfod_client *c, long a, long b)
{
	(void)a, (void)b;
	const struct dfd_deadline *d = dfd_resolver ? dfd_resolver->dfd_get_user_data(c) : NULL;
	/* non-zero cancels the download: the report never waits longer than the limit */
	return d && tally_now_mono() > d->until;
}

/* The debug file from DEBUGINFOD_URLS, or -1. Logged. */
static int try_debuginfod(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di, char **path)
{
	if (!r->o.debuginfod)
		return -1;
	if (strcmp(di->id_kind, "build-id")) {
		logf_(s, "debuginfod: not asked (no build-id recorded)");
		return -1;
	}
	const char *urls = getenv("DEBUGINFOD_URLS");
	if (!urls || !*urls) {
		logf_(s, "debuginfod: not asked (DEBUGINFOD_URLS is empty)");
		return -1;
	}
	if (!r->dfd_lib) {
		r->dfd_lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!r->dfd_lib) {
			logf_(s, "debuginfod: cannot load libdebuginfod.so.1: %s (install libdebuginfod1)", dlerror());
			return -1;
		}
		*(void **)&r->dfd_begin = dlsym(r->dfd_lib, "debuginfod_begin");
		*(void **)&r->dfd_find = dlsym(r->dfd_lib, "debuginfod_find_debuginfo");
		*(void **)&r->dfd_set_progressfn = dlsym(r->dfd_lib, "debuginfod_set_progressfn");
		*(void **)&r->dfd_set_user_data = dlsym(r->dfd_lib, "debuginfod_set_user_data");
		*(void **)&r->dfd_get_user_data = dlsym(r->dfd_lib, "debuginfod_get_user_data");
		*(void **)&r->dfd_end = dlsym(r->dfd_lib, "debuginfod_end");
		if (!r->dfd_begin || !r->dfd_find || !r->dfd_set_progressfn || !r->dfd_set_user_data ||
		    !r->dfd_get_user_data || !r->dfd_end) {
			logf_(s, "debuginfod: libdebuginfod.so.1 lacks a function tally needs");
			dlclose(r->dfd_lib);
			r->dfd_lib = NULL;
			return -1;
		}
	}
	if (!r->dfd) {
		char t[32];
		/* the library's own limits, then ours in the progress callback */
		snprintf(t, sizeof(t), "%d", (int)(r->o.debuginfod_timeout + 0.999));
		setenv("DEBUGINFOD_TIMEOUT", t, 0);
		setenv("DEBUGINFOD_MAXTIME", t, 0);
		r->dfd = r->dfd_begin();
		if (!r->dfd) {
			logf_(s, "debuginfod: the client could not start");
			return -1;
		}
		r->dfd_set_progressfn(r->dfd, dfd_progress);
	}
	unsigned char id[64];
	size_t len = strlen(di->id) / 2;
	if (len > sizeof(id))
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned v;
		if (sscanf(di->id + 2 * i, "%2x", &v) != 1)
			return -1;
		id[i] = (unsigned char)v;
	}
	struct dfd_deadline d = { tally_now_mono() + r->o.debuginfod_timeout };
	r->dfd_set_user_data(r->dfd, &d);
	dfd_resolver = r;
	char *p = NULL;
	double t0 = tally_now_mono();
	int fd = r->dfd_find(r->dfd, id, (int)len, &p);
	r->dfd_set_user_data(r->dfd, NULL);
	dfd_resolver = NULL;
	if (fd < 0) {
		logf_(s, "debuginfod (%s): %s after %.1f s", urls,
		      tally_now_mono() - t0 >= r->o.debuginfod_timeout ? "gave up at the time limit" : strerror(-fd),
		      tally_now_mono() - t0);
		free(p);
		return -1;
	}
	*path = p;
	return fd;
}

/* Opens the first candidate that is this image's debug file; logs every one. */
static int open_debug(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
		      const char *main_path, const char *debuglink, GElf_Word crc, char **out_path)
{
	struct cand *c = NULL;
	size_t n = 0;
	struct strbuf why = STRBUF_INIT;
	int ret = -1;
	debug_cands(r, di, main_path, debuglink, &c, &n);
	for (size_t i = 0; i < n && ret < 0; i++) {
		if (main_path && !strcmp(c[i].path, main_path))
			continue;
		if (access(c[i].path, F_OK) != 0) {
			logf_(s, "debug file '%s' (%s): not there", c[i].path, c[i].why);
			continue;
		}
		int ok;
		if (c[i].debuglink && strcmp(di->id_kind, "build-id")) {
			/* no build-id to compare: the debuglink's CRC says whether it belongs */
			int fd = tally_open_regular(AT_FDCWD, c[i].path, TALLY_OPEN_FOLLOW, 0, NULL);
			bool rd = fd >= 0;
			uint32_t got = rd ? crc32_file(fd, &rd) : 0;
			strbuf_reset(&why);
			if (fd < 0)
				strbuf_addstr(&why, tally_errmsg());
			else
				close(fd);
			ok = !rd ? -1 : got == crc ? 1 : 0;
			if (fd >= 0)
				strbuf_addf(&why, ok < 0 ? "cannot be read" : ok ? "CRC %08x matches the debuglink" :
						"CRC %08x, the debuglink says %08x: another file, not used", got, crc);
		} else {
			ok = check_file(di, c[i].path, &why);
		}
		bool useful = false;
		if (ok == 1) {
			int fd = tally_open_regular(AT_FDCWD, c[i].path, TALLY_OPEN_FOLLOW, 0, NULL);
			Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
			useful = e && (elf_has_section(e, ".debug_info") || elf_has_section(e, ".symtab"));
			if (e)
				elf_end(e);
			if (fd >= 0)
				close(fd);
		}
		logf_(s, "debug file '%s' (%s): %s%s", c[i].path, c[i].why, why.buf,
		      ok == 1 ? (useful ? ": used" : ", but it has neither .debug_info nor .symtab: not used") : "");
		if (ok == 1 && useful) {
			ret = tally_open_regular(AT_FDCWD, c[i].path, TALLY_OPEN_FOLLOW, 0, NULL);
			if (ret >= 0)
				*out_path = xstrdup(c[i].path);
		}
	}
	if (ret < 0) {
		char *p = NULL;
		ret = try_debuginfod(r, s, di, &p);
		if (ret >= 0) {
			int ok = check_file(di, p, &why);
			logf_(s, "debug file '%s' (debuginfod): %s%s", p, why.buf, ok == 1 ? ": used" : "");
			if (ok == 1) {
				*out_path = p;
			} else {
				close(ret);
				ret = -1;
				free(p);
			}
		}
	}
	strbuf_release(&why);
	free_cands(c, n);
	return ret;
}

static int find_debuginfo_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			     const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			     char **debuginfo_file_name)
{
	(void)mod, (void)modname, (void)base;
	struct imgsyms *s = *userdata;
	if (!s)
		return -1;
	const struct tally_db_image *di = s->di ? s->di : &s->r->db->images[s->image];
	if (!strcmp(di->kind, "kernel"))
		return -1; /* vmlinux is given whole */
	char *p = NULL;
	if (s->debug_searched)
		return -1; /* libdwfl asks again for DWARF after the symbol table: the answer is the same */
	int fd = open_debug(s->r, s, di, file_name, debuglink_file, debuglink_crc, &p);
	s->debug_searched = fd < 0;
	if (fd >= 0) {
		free(s->debug_file);
		s->debug_file = xstrdup(p);
		*debuginfo_file_name = p;
	}
	return fd;
}

/* ---- loading an image ---- */

static char *strip_deleted(const char *path)
{
	const char *del = strstr(path, " (deleted)");
	return del ? xstrndup(path, (size_t)(del - path)) : xstrdup(path);
}

/* The image file: --image-path, then --mapfile, then the recorded path; the
 * first that is the recorded file. *mismatch when one was found but was
 * another file. Logged. */
static char *find_file(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di, bool *mismatch,
		       struct strbuf *damaged)
{
	struct cand *c = NULL;
	size_t n = 0, a = 0;
	char *p = strip_deleted(di->path);
	for (size_t i = 0; r->o.image_path && r->o.image_path[i]; i++) {
		/* opreport's --image-path: the file by name under each directory, then by its whole path */
		add_cand(&c, &n, &a, "--image-path", false, "%s/%s", r->o.image_path[i], tally_basename(p));
		if (p[0] == '/')
			add_cand(&c, &n, &a, "--image-path with the recorded path", false, "%s%s", r->o.image_path[i], p);
	}
	if (r->o.map && strcmp(di->id_kind, "none")) {
		size_t first, m = tally_imgmap_find(r->o.map, di->id, &first);
		for (size_t i = 0; i < m; i++)
			add_cand(&c, &n, &a, "--mapfile", false, "%s", r->o.map->e[first + i].path);
	}
	if (r->archive) {
		/* never the file that has the recorded path on this machine */
		struct strbuf m = STRBUF_INIT;
		tally_archive_image_member(di, &m);
		add_cand(&c, &n, &a, "in the archive", false, "%s/%s", r->archive, m.buf);
		strbuf_release(&m);
	} else {
		add_cand(&c, &n, &a, "recorded path", false, "%s", p);
	}
	free(p);
	char *found = NULL;
	struct strbuf why = STRBUF_INIT;
	for (size_t i = 0; i < n && !found; i++) {
		if (access(c[i].path, F_OK) != 0) {
			logf_(s, "image file '%s' (%s): not there", c[i].path, c[i].why);
			continue;
		}
		int ok = check_file(di, c[i].path, &why);
		logf_(s, "image file '%s' (%s): %s%s", c[i].path, c[i].why, why.buf, ok == 1 ? ": used" : "");
		if (ok == 0)
			*mismatch = true;
		if (ok == -2 && !damaged->len)
			strbuf_addf(damaged, "'%s' %s", c[i].path, why.buf);
		struct stat st;
		/* a FIFO, a device or a directory where the file was: said, not "not there" */
		if (ok == -1 && !damaged->len && stat(c[i].path, &st) == 0 && !S_ISREG(st.st_mode))
			strbuf_addstr(damaged, why.buf);
		if (ok == 1)
			found = xstrdup(c[i].path);
	}
	strbuf_release(&why);
	free_cands(c, n);
	return found;
}

/* Reports path to a fresh Dwfl as the image's module; NULL with a note on failure. */
static Dwfl_Module *report_module_mem(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
				      const char *path, void *mem, size_t len)
{
	if (s->dwfl)
		dwfl_end(s->dwfl);
	s->dwfl = dwfl_begin(&r->cb);
	if (!s->dwfl) {
		set_note(s, "libdwfl: %s", dwfl_errmsg(-1));
		return NULL;
	}
	/* opened here, not by libdwfl: a file swapped for a FIFO since it was
	 * checked must not hang the report */
	int fd = -1;
	if (!mem && (fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, NULL)) < 0) {
		logf_(s, "%s", tally_errmsg());
		set_note(s, "%s (skipped)", tally_errmsg());
		s->loud = true;
		dwfl_end(s->dwfl);
		s->dwfl = NULL;
		return NULL;
	}
	dwfl_report_begin(s->dwfl);
	Dwfl_Module *mod = mem ? dwfl_report_offline_memory(s->dwfl, di->name, path, mem, len)
			       : dwfl_report_offline(s->dwfl, di->name, path, fd);
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (!mod && fd >= 0)
		close(fd); /* libdwfl keeps it only on success */
	if (!mod) {
		logf_(s, "'%s' cannot be read as ELF: %s", path, dwfl_errmsg(-1));
		set_note(s, "'%s' is not a readable ELF file: %s (skipped)", path, dwfl_errmsg(-1));
		s->loud = true;
		dwfl_end(s->dwfl);
		s->dwfl = NULL;
		return NULL;
	}
	void **ud;
	dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	*ud = s;
	return mod;
}

static Dwfl_Module *report_module(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
				  const char *path)
{
	return report_module_mem(r, s, di, path, NULL, 0);
}

/* A symbol of a libdwfl module: addr is libdwfl's (the bias included), shndx the
 * section index resolved, elf the file it came from. */
struct fsym {
	GElf_Sym sym;
	GElf_Addr addr;
	GElf_Word shndx;
	Elf *elf;
	const char *name;
};

/* Symbol i of mod, when it is a defined function (or ifunc) with a name. */
static bool func_sym(Dwfl_Module *mod, int i, struct fsym *f)
{
	Dwarf_Addr sbias;
	f->name = dwfl_module_getsym_info(mod, i, &f->sym, &f->addr, &f->shndx, &f->elf, &sbias);
	int t = f->name ? GELF_ST_TYPE(f->sym.st_info) : STT_NOTYPE;
	return f->name && *f->name && f->sym.st_shndx != SHN_UNDEF && (t == STT_FUNC || t == STT_GNU_IFUNC);
}

static void load_tables(struct imgsyms *s, const char *path, bool debug_only)
{
	Dwfl_Module *mod = s->mod;
	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	s->bias = bias;
	s->have_symtab = elf_has_section(elf, ".symtab");
	size_t nph = 0;
	if (elf && elf_getphdrnum(elf, &nph) == 0) {
		s->ph = xcalloc(nph + 1, sizeof(*s->ph));
		uint64_t base = UINT64_MAX;
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < base)
				base = ph.p_vaddr;
		}
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (!debug_only)
				s->ph[s->nph++] = (struct phdr){ ph.p_offset, ph.p_filesz, ph.p_vaddr };
			else if (ph.p_flags & PF_X)
				/* a debug file keeps the addresses, not the binary's file offsets:
				 * code segments sit at their address from the first load (the
				 * linkers' usual layout) */
				s->ph[s->nph++] = (struct phdr){ ph.p_vaddr - base, ph.p_memsz, ph.p_vaddr };
		}
		if (debug_only)
			logf_(s, "file offsets of code taken as address - 0x%" PRIx64 " (the debug file has no file offsets of the binary)",
			      base == UINT64_MAX ? 0 : base);
	}
	/* executable sections: a zero-size symbol ends with its section, and code in
	 * no symbol (PLT stubs) is named after its section */
	size_t shstrndx, scap = 0;
	if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
		Elf_Scn *scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) ||
			    (sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_NOBITS))
				continue;
			const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
			struct strbuf lb = STRBUF_INIT;
			strbuf_addf(&lb, "[%s]", nm ? nm : "?");
			GROW(s->secs, scap, s->nsecs + 1);
			s->secs[s->nsecs++] = (struct section){ sh.sh_addr, sh.sh_addr + sh.sh_size, strbuf_detach(&lb) };
		}
	}
	/* libdwfl takes .symtab from the file, else from its debug file (the search
	 * below runs then), else .gnu_debugdata, else .dynsym */
	int n = dwfl_module_getsymtab(mod);
	size_t cap = 0;
	for (int i = 0; i < n; i++) {
		struct fsym f;
		if (!func_sym(mod, i, &f))
			continue;
		const char *name = f.name;
		GElf_Sym sym = f.sym;
		GElf_Addr addr = f.addr;
		if (f.elf != elf && elf_has_section(f.elf, ".symtab"))
			s->have_symtab = true;
		GROW(s->syms, cap, s->nsyms + 1);
		/* names stay valid while the Dwfl lives */
		int b = GELF_ST_BIND(sym.st_info);
		const char *at = strchr(name, '@');
		if (at && at != name) {
			/* memcpy@@GLIBC_2.14 is memcpy to the reader */
			GROW(s->owned, s->aowned, s->nowned + 1);
			s->owned[s->nowned++] = xstrndup(name, (size_t)(at - name));
			name = s->owned[s->nowned - 1];
		}
		s->syms[s->nsyms++] = (struct tally_sym){ addr - bias, sym.st_size, name,
							  b == STB_GLOBAL ? 0 : b == STB_WEAK ? 1 : 2 };
	}
	if (n < 0)
		logf_(s, "symbol table: %s", dwfl_errmsg(-1));
	if (!s->nsyms)
		set_note(s, "'%s' has no function symbols (install its debug package, give --debug-dir, or see --explain)",
			 path);
	finish_syms(s);
}

static void load_dwfl(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di, const char *path,
		      bool verify)
{
	struct strbuf why = STRBUF_INIT;
	if (verify) {
		int ok = check_file(di, path, &why);
		logf_(s, "image file '%s': %s%s", path, why.buf, ok == 1 ? ": used" : "");
		if (ok != 1) {
			s->mismatch = ok == 0;
			set_note(s, "'%s' %s", path, why.buf);
			s->loud = true;
			strbuf_release(&why);
			return;
		}
	}
	strbuf_release(&why);
	s->mod = report_module(r, s, di, path);
	if (!s->mod)
		return;
	free(s->file);
	s->file = xstrdup(path);
	load_tables(s, path, false);
}

static void load_file(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di)
{
	bool mismatch = false;
	struct strbuf damaged = STRBUF_INIT;
	char *path = find_file(r, s, di, &mismatch, &damaged);
	if (path) {
		load_dwfl(r, s, di, path, false);
		free(path);
		strbuf_release(&damaged);
		return;
	}
	/* no image file: its debug file (found by build-id) has the symbols and
	 * DWARF, and its program headers still map file offsets to addresses */
	char *dpath = NULL;
	int fd = -1;
	if (!strcmp(di->id_kind, "build-id")) {
		logf_(s, "no image file: looking for its debug file instead");
		fd = open_debug(r, s, di, NULL, NULL, 0, &dpath);
	}
	if (fd >= 0) {
		close(fd);
		s->mod = report_module(r, s, di, dpath);
		if (s->mod) {
			s->file = xstrdup(dpath);
			s->debug_file = xstrdup(dpath);
			load_tables(s, dpath, true);
		}
		free(dpath);
		if (damaged.len && !s->nsyms) {
			set_note(s, "%s", damaged.buf);
			s->loud = true;
		}
		strbuf_release(&damaged);
		return;
	}
	if (damaged.len) {
		set_note(s, "%s (and no debug file was found)", damaged.buf);
		s->loud = true;
	} else if (mismatch) {
		s->mismatch = true;
		s->loud = true;
		set_note(s, "'%s' is not the file that was recorded (%s %s): not symbolized (find the original with --image-path or --mapfile; --explain says where tally looked)",
			 di->path, di->id_kind, di->id);
	} else if (r->archive) {
		set_note(s, "'%s' is not in the archive (it was archived with --exclude-dependent, or its file was not found when archiving)",
			 di->path);
	} else {
		set_note(s, "'%s' is not on this machine%s (copy it here, or point --image-path or --mapfile at it)", di->path,
			 di->foreign_ns ? " (it was mapped inside a container: --image-path ROOT finds ROOT/path)" : "");
	}
	strbuf_release(&damaged);
}

static void load_jit(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di)
{
	struct strbuf p = STRBUF_INIT, sb = STRBUF_INIT;
	size_t cap = 0, bad = 0;
	bool have_map = false, have_dump = false;
	strbuf_addf(&p, "%s/jit/perf-%d-%s.map", tally_db_image_dir(r->db, (uint32_t)(di - r->db->images)), di->pid, di->id);
	if (tally_read_regular(&sb, AT_FDCWD, p.buf, 0, TALLY_DB_FILE_MAX) == 0) {
		logf_(s, "JIT map copied at record time: '%s'", p.buf);
		have_map = true;
		struct tally_perfmap_sym *ms;
		size_t nms;
		tally_perfmap_parse(sb.buf, sb.len, &ms, &nms, &bad);
		s->names = strbuf_detach(&sb);
		GROW(s->syms, cap, s->nsyms + nms);
		for (size_t i = 0; i < nms; i++) {
			s->names[ms[i].name + ms[i].name_len] = '\0'; /* its newline, or the end */
			s->syms[s->nsyms++] = (struct tally_sym){ ms[i].start, ms[i].size, s->names + ms[i].name, 0 };
		}
		free(ms);
	}
	strbuf_reset(&p);
	strbuf_reset(&sb);
	strbuf_addf(&p, "%s/jit/jitdump-%d-%s.txt", tally_db_image_dir(r->db, (uint32_t)(di - r->db->images)), di->pid, di->id);
	if (tally_read_regular(&sb, AT_FDCWD, p.buf, 0, TALLY_DB_FILE_MAX) == 0) {
		logf_(s, "jitdump copied at record time: '%s'", p.buf);
		have_dump = true;
		s->jd = xcalloc(1, sizeof(*s->jd));
		if (tally_jitdump_read_buf(s->jd, sb.buf, sb.len, p.buf)) {
			set_note(s, "%s", tally_errmsg());
			s->loud = true;
			free(s->jd);
			s->jd = NULL;
		} else {
			if (s->jd->warning) {
				set_note(s, "%s", s->jd->warning);
				s->loud = true;
			}
			for (size_t i = 0; i < s->jd->nfuncs; i++) {
				/* a perf map entry at the same address (listed first) wins */
				GROW(s->syms, cap, s->nsyms + 1);
				s->syms[s->nsyms++] = (struct tally_sym){ s->jd->funcs[i].addr, s->jd->funcs[i].size, s->jd->funcs[i].name, 1 };
			}
		}
	}
	if (!have_map && !have_dump)
		set_note(s, "no copy of the JIT map or jitdump '%s' in the database", di->path);
	if (bad) {
		/* after the jitdump copy's own note, if it has one */
		set_note(s, "%s%sthe JIT map of pid %d had %zu malformed line%s (skipped)", s->note ? s->note : "",
			 s->note ? "; " : "", di->pid, bad, bad == 1 ? "" : "s");
		s->loud = true;
	}
	finish_syms(s);
	strbuf_release(&p);
	strbuf_release(&sb);
}

static bool ksym_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db *db = ctx;
	return !strcmp(db->ksyms[idx].name, key);
}

static int cmp_delta(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* --vmlinux: verified against the recorded kernel build-id, then placed where
 * the recorded kernel.syms say the running kernel was (KASLR). */
static void load_vmlinux(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di, const char *path)
{
	if (path == r->o.vmlinux) {
		struct strbuf why = STRBUF_INIT;
		int ok = check_file(di, path, &why);
		logf_(s, "--vmlinux '%s': %s%s", path, why.buf, ok == 1 ? "" : " (kernel functions still come from kernel.syms)");
		if (ok != 1) {
			set_note(s, "--vmlinux '%s' %s", path, why.buf);
			s->loud = true;
			strbuf_release(&why);
			return;
		}
		strbuf_release(&why);
	}
	Dwfl_Module *mod = report_module(r, s, di, path);
	if (!mod)
		return;
	GElf_Addr bias = 0;
	dwfl_module_getelf(mod, &bias);
	/* the offset between the recorded addresses and vmlinux's: the one most of
	 * the symbols both know agree on. kernel.syms keeps one address per name
	 * and a kernel has many static functions whose name another file uses too:
	 * each other copy gives a wrong offset, whichever comes first in .symtab. */
	int n = dwfl_module_getsymtab(mod);
	struct tally_hidx idx = { 0 };
	const struct tally_db *db = r->db;
	for (size_t i = 0; i < db->nksyms; i++) {
		const char *nm = db->ksyms[i].name;
		uint64_t h = tally_hash_bytes(nm, strlen(nm), 0);
		if (!db->ksyms[i].module && tally_hidx_get(&idx, h, nm, ksym_eq, db) == TALLY_HIDX_NONE)
			tally_hidx_put(&idx, h, (uint32_t)i);
	}
	uint64_t *ds = NULL;
	size_t nd = 0, ad = 0;
	for (int i = 0; i < n; i++) {
		struct fsym f;
		if (!func_sym(mod, i, &f) || !f.sym.st_value)
			continue;
		uint32_t k = tally_hidx_get(&idx, tally_hash_bytes(f.name, strlen(f.name), 0), f.name, ksym_eq, db);
		if (k == TALLY_HIDX_NONE)
			continue;
		GROW(ds, ad, nd + 1);
		ds[nd++] = db->ksyms[k].addr - (f.addr - bias);
	}
	tally_hidx_release(&idx);
	tally_qsort(ds, nd, sizeof(*ds), cmp_delta);
	uint64_t delta = 0;
	size_t agree = 0, runner_up = 0;
	for (size_t i = 0, j; i < nd; i = j) {
		for (j = i; j < nd && ds[j] == ds[i]; j++)
			;
		if (j - i > agree) {
			runner_up = agree;
			agree = j - i;
			delta = ds[i];
		} else if (j - i > runner_up) {
			runner_up = j - i;
		}
	}
	free(ds);
	if (!agree || runner_up >= agree) {
		logf_(s, "vmlinux: no symbol of it is at a consistent offset from the recorded kernel.syms: lines not used");
		set_note(s, "--vmlinux '%s': its symbols are at no consistent offset from the recorded kernel.syms: no kernel source lines",
			 path);
		s->loud = true;
		dwfl_end(s->dwfl);
		s->dwfl = NULL;
		return;
	}
	s->kdelta = delta;
	s->mod = mod;
	s->bias = bias;
	s->file = xstrdup(path);
	logf_(s, "vmlinux: placed at +0x%" PRIx64 " (kernel address layout randomization), from %zu symbols", delta, agree);
	if (nd > agree)
		logf_(s, "vmlinux: %zu other symbol%s of the same names (static functions that another file names alike) at other offsets: not used",
		      nd - agree, nd - agree == 1 ? "" : "s");
}

/* ---- kernel modules ---- */

/* The module name of a .ko file name (ext4.ko.xz: ext4), '-' written '_' as the
 * kernel does; NULL when it is not a module file. */
static char *ko_norm(const char *file)
{
	static const char *const ext[] = { ".ko", ".ko.xz", ".ko.gz", ".ko.zst", ".ko.bz2" };
	size_t n = strlen(file);
	for (size_t i = 0; i < ARRAY_SIZE(ext); i++) {
		size_t e = strlen(ext[i]);
		if (n > e && !strcmp(file + n - e, ext[i])) {
			char *m = xstrndup(file, n - e);
			for (char *c = m; *c; c++)
				if (*c == '-')
					*c = '_';
			return m;
		}
	}
	return NULL;
}

/* Every .ko under dir, depth first in name order; symlinked directories are not
 * followed (no loops), files may be symlinks. At most *left entries are looked
 * at (a container's root given as --image-path can hold a whole system). */
static void ko_walk(struct tally_resolver *r, const char *dir, int depth, size_t *cap, size_t *left)
{
	struct dirent **ents = NULL;
	int n = depth > 12 || !*left ? -1 : scandir(dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		unsigned char t = ents[i]->d_type;
		struct strbuf p = STRBUF_INIT;
		struct stat st;
		char *norm = NULL;
		if ((nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2]))) || !*left)
			goto next;
		--*left;
		strbuf_addf(&p, "%s/%s", dir, nm);
		if (t == DT_UNKNOWN && lstat(p.buf, &st) == 0)
			t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
		if (t == DT_DIR)
			ko_walk(r, p.buf, depth + 1, cap, left);
		else if ((t == DT_REG || t == DT_LNK) && (norm = ko_norm(nm)) &&
			 (t == DT_REG || (stat(p.buf, &st) == 0 && S_ISREG(st.st_mode)))) {
			GROW(r->ko, *cap, r->nko + 1);
			r->ko[r->nko++] = (struct kofile){ norm, strbuf_detach(&p) };
			norm = NULL;
		}
	next:
		free(norm);
		strbuf_release(&p);
		free(ents[i]);
	}
	free(ents);
}

/* Where module files are looked for, in order: each --image-path (opreport's
 * role for modules), /lib/modules/RELEASE of the recording, and its debug tree. */
static size_t ko_roots(struct tally_resolver *r, const char **roots, char **own, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; r->o.image_path && r->o.image_path[i] && n + 2 < max; i++)
		roots[n++] = r->o.image_path[i];
	*own = NULL;
	if (r->modules_dir && r->archive) {
		roots[n++] = r->modules_dir;
	} else if (r->modules_dir) {
		roots[n++] = r->modules_dir;
		struct strbuf d = STRBUF_INIT;
		strbuf_addf(&d, "/usr/lib/debug%s", r->modules_dir);
		*own = strbuf_detach(&d);
		roots[n++] = *own;
	}
	return n;
}

#define KO_WALK_MAX 200000

static void ko_index(struct tally_resolver *r)
{
	if (r->ko_walked)
		return;
	r->ko_walked = true;
	const char *roots[64];
	char *own;
	size_t n = ko_roots(r, roots, &own, 64), cap = 0;
	for (size_t i = 0; i < n; i++) {
		size_t left = KO_WALK_MAX;
		ko_walk(r, roots[i], 0, &cap, &left);
		if (!left)
			strbuf_addf(&r->ko_note, "the search under '%s' stopped after %d entries; ", roots[i], KO_WALK_MAX);
	}
	free(own);
}

/* A .ko.zst into memory (libdwfl reads .xz, .gz and .bz2 itself); NULL with why. */
static void *zstd_file(const char *path, size_t *len, struct strbuf *why)
{
	struct strbuf in = STRBUF_INIT;
	if (tally_read_regular(&in, AT_FDCWD, path, TALLY_OPEN_FOLLOW, 1u << 30)) {
		strbuf_addstr(why, tally_errmsg());
		return NULL;
	}
	ZSTD_DStream *z = ZSTD_createDStream();
	size_t cap = in.len * 4 + 4096, used = 0;
	char *out = xmalloc(cap);
	ZSTD_inBuffer ib = { in.buf, in.len, 0 };
	size_t rc = z ? ZSTD_initDStream(z) : 0;
	bool bad = !z || ZSTD_isError(rc);
	while (!bad && ib.pos < ib.size) {
		if (cap - used < 65536) {
			if (cap > (1u << 30)) {
				bad = true;
				strbuf_addstr(why, "decompresses to over 1 GiB: not a module");
				break;
			}
			cap *= 2;
			out = xrealloc(out, cap);
		}
		ZSTD_outBuffer ob = { out + used, cap - used, 0 };
		rc = ZSTD_decompressStream(z, &ob, &ib);
		used += ob.pos;
		if (ZSTD_isError(rc)) {
			bad = true;
			strbuf_addf(why, "zstd: %s", ZSTD_getErrorName(rc));
		} else if (!ob.pos && ib.pos < ib.size && rc == 0) {
			break;
		}
	}
	if (!bad && rc != 0) {
		bad = true;
		strbuf_addstr(why, "zstd: the file ends inside a frame (truncated)");
	}
	ZSTD_freeDStream(z);
	strbuf_release(&in);
	if (bad) {
		if (!why->len)
			strbuf_addstr(why, "zstd: cannot decompress");
		free(out);
		return NULL;
	}
	*len = used;
	return out;
}

/* The release a module was built for, from its .modinfo vermagic; NULL when
 * it has none. Allocated. */
static char *ko_vermagic(Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		if (!gelf_getshdr(scn, &sh) || !(nm = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(nm, ".modinfo"))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			return NULL;
		const char *p = d->d_buf, *end = p + d->d_size;
		while (p < end) {
			size_t l = strnlen(p, (size_t)(end - p));
			if (l > 9 && !strncmp(p, "vermagic=", 9))
				return xstrndup(p + 9, strcspn(p + 9, " "));
			p += l + 1;
		}
	}
	return NULL;
}

struct kosym {
	const char *name;
	uint64_t addr, size;
	uint32_t shndx;
	int count;
};

static bool kosym_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct kosym *k = ctx;
	return !strcmp(k[idx].name, key);
}

/* Places the module's kernel.syms symbols in the .ko: each by its name, every
 * symbol of a section at the same distance, no recorded symbol shorter than
 * the .ko's. Returns how many were placed; 0 with why when the file does not
 * fit the recording (another build). */
static size_t kmod_place(struct tally_resolver *r, struct imgsyms *ks, uint32_t k, Dwfl_Module *mod,
			 struct strbuf *why)
{
	const struct tally_db *db = r->db;
	int n = dwfl_module_getsymtab(mod);
	struct kosym *t = xcalloc(n > 0 ? (size_t)n + 1 : 1, sizeof(*t));
	size_t nt = 0;
	struct tally_hidx idx = { 0 };
	for (int i = 0; i < n; i++) {
		struct fsym f;
		if (!func_sym(mod, i, &f))
			continue;
		uint64_t h = tally_hash_bytes(f.name, strlen(f.name), 0);
		uint32_t j = tally_hidx_get(&idx, h, f.name, kosym_eq, t);
		if (j != TALLY_HIDX_NONE) {
			t[j].count++;
			continue;
		}
		t[nt] = (struct kosym){ f.name, f.addr, f.sym.st_size, f.shndx, 1 };
		tally_hidx_put(&idx, h, (uint32_t)nt++);
	}
	/* per section: the distance its first placed symbol gave */
	uint32_t *sec = NULL;
	uint64_t *sec_delta = NULL;
	size_t nsec = 0, asec = 0, placed = 0, unknown = 0, ambiguous = 0;
	bool ok = true;
	for (size_t i = 0; i < db->nksyms && ok; i++) {
		if (ks->ksym_kmod[i] != k)
			continue;
		const struct tally_ksym *y = &db->ksyms[i];
		uint32_t j = tally_hidx_get(&idx, tally_hash_bytes(y->name, strlen(y->name), 0), y->name, kosym_eq, t);
		if (j == TALLY_HIDX_NONE) {
			unknown++;
			continue;
		}
		if (t[j].count > 1) {
			ambiguous++;
			continue;
		}
		if (y->size && t[j].size > y->size) {
			strbuf_addf(why, "'%s' is %" PRIu64 " bytes in it but %" PRIu64 " when recorded", y->name, t[j].size,
				    y->size);
			ok = false;
			break;
		}
		uint64_t d = y->addr - t[j].addr;
		size_t s;
		for (s = 0; s < nsec && sec[s] != t[j].shndx; s++)
			;
		if (s == nsec) {
			GROW(sec, asec, nsec + 1);
			sec_delta = xrealloc(sec_delta, asec * sizeof(*sec_delta));
			sec[nsec] = t[j].shndx;
			sec_delta[nsec++] = d;
		} else if (sec_delta[s] != d) {
			strbuf_addf(why, "'%s' is not where the other recorded functions of its section put it", y->name);
			ok = false;
			break;
		}
		ks->ksym_delta[i] = d;
		ks->ksym_placed[i] = true;
		placed++;
	}
	if (ok && !placed)
		strbuf_addf(why, "none of the %zu recorded function%s of the module is in it", unknown + ambiguous,
			    unknown + ambiguous == 1 ? "" : "s");
	else if (ok && (unknown || ambiguous))
		strbuf_addf(why, "%zu recorded function%s placed (%zu not in it, %zu named twice in it)", placed,
			    placed == 1 ? "" : "s", unknown, ambiguous);
	else if (ok)
		strbuf_addf(why, "all %zu recorded function%s placed", placed, placed == 1 ? "" : "s");
	if (!ok || !placed) {
		for (size_t i = 0; i < db->nksyms; i++)
			if (ks->ksym_kmod[i] == k)
				ks->ksym_placed[i] = false;
		placed = 0;
	}
	free(sec);
	free(sec_delta);
	free(t);
	tally_hidx_release(&idx);
	return placed;
}

/* Finds, verifies and places module k's .ko: the first file with its name that
 * has the recorded build-id (or, when none was recorded, the recording's
 * kernel release and a consistent layout). Logged in the module's own log. */
static void kmod_load(struct tally_resolver *r, struct imgsyms *ks, uint32_t k)
{
	struct kmod *km = &ks->kmods[k];
	struct imgsyms *s = &km->sub;
	const struct tally_db *db = r->db;
	km->state = -1;
	ko_index(r);
	const char *roots[64];
	char *own;
	size_t nroots = ko_roots(r, roots, &own, 64);
	struct strbuf rs = STRBUF_INIT;
	for (size_t i = 0; i < nroots; i++)
		strbuf_addf(&rs, "%s'%s'%s", i ? ", " : "", roots[i], access(roots[i], F_OK) ? " (not there)" : "");
	free(own);
	logf_(s, "looked for %s.ko (.xz, .gz, .zst, .bz2; '-' or '_') under %s", km->name, nroots ? rs.buf : "nothing (the recording names no kernel release)");
	if (r->ko_note.len)
		logf_(s, "%s(give the directory that holds the modules)", r->ko_note.buf);
	strbuf_release(&rs);
	const char *rel = tally_meta_get(&db->session, "kernel-release");
	const char *want = !strcmp(km->img.id_kind, "build-id") ? km->img.id : NULL;
	if (!want)
		logf_(s, "no build-id was recorded for it: a file is used when it was built for kernel %s and its functions fit the recorded ones",
		      rel ? rel : "(unknown)");
	size_t tried = 0;
	for (size_t f = 0; f < r->nko && km->state < 0; f++) {
		if (strcmp(r->ko[f].norm, km->name))
			continue;
		const char *path = r->ko[f].path;
		struct strbuf why = STRBUF_INIT;
		tried++;
		size_t plen = strlen(path);
		bool zst = plen > 4 && !strcmp(path + plen - 4, ".zst");
		bool plain = plen > 3 && !strcmp(path + plen - 3, ".ko");
		void *mem = NULL;
		size_t len = 0;
		if (zst && !(mem = zstd_file(path, &len, &why))) {
			logf_(s, "'%s': %s: not used", path, why.buf);
			strbuf_release(&why);
			continue;
		}
		if (plain && elf_damaged(path, &why)) {
			logf_(s, "'%s': %s: not used", path, why.buf + (strncmp(why.buf, ", but ", 6) ? 0 : 6));
			strbuf_release(&why);
			continue;
		}
		free(km->img.path);
		km->img.path = xstrdup(path);
		s->debug_searched = false;
		Dwfl_Module *mod = report_module_mem(r, s, &km->img, path, mem, len);
		if (!mod) {
			free(mem);
			logf_(s, "'%s': not a readable module", path);
			strbuf_release(&why);
			continue;
		}
		const unsigned char *bits;
		GElf_Addr vaddr;
		int nb = dwfl_module_build_id(mod, &bits, &vaddr);
		char hex[160] = "";
		if (nb > 0 && nb < 64)
			tally_hex(bits, (size_t)nb, hex);
		GElf_Addr bias;
		char *vm = ko_vermagic(dwfl_module_getelf(mod, &bias));
		bool fits = false;
		if (want && strcmp(hex, want)) {
			strbuf_addf(&why, "has build-id %s, the recording has %s: another build, not used", hex[0] ? hex : "(none)",
				    want);
		} else if (!want && vm && rel && strcmp(vm, rel)) {
			strbuf_addf(&why, "built for kernel %s, the recording ran %s: not used", vm, rel);
		} else {
			if (want)
				strbuf_addf(&why, "build-id %s matches; ", hex);
			else
				strbuf_addf(&why, "built for kernel %s; ", vm ? vm : "(not said: no vermagic)");
			struct strbuf pw = STRBUF_INIT;
			fits = kmod_place(r, ks, k, mod, &pw) > 0;
			strbuf_addf(&why, "%s%s", pw.buf, fits ? ": used" : ": not used");
			strbuf_release(&pw);
		}
		free(vm);
		logf_(s, "'%s': %s", path, why.buf);
		strbuf_release(&why);
		if (fits) {
			km->state = 1;
			km->mem = mem;
			s->mod = mod;
			s->bias = 0; /* addresses below are libdwfl's own (ET_REL: its layout) */
			free(s->file);
			s->file = xstrdup(path);
		} else {
			dwfl_end(s->dwfl);
			s->dwfl = NULL;
			free(mem);
		}
	}
	if (!tried)
		logf_(s, "no file named so: functions from kernel.syms, no source lines");
	else if (km->state < 0) {
		/* a file was there but is not the module that ran: say so in every report */
		struct strbuf n = STRBUF_INIT;
		strbuf_addf(&n, "%s%smodule %s: no file found fits the recording (%zu tried): its functions are named from kernel.syms, without source lines (see --explain kernel)",
			    ks->note ? ks->note : "", ks->note ? "; " : "", km->name, tried);
		free(ks->note);
		ks->note = strbuf_detach(&n);
		ks->loud = true;
	}
}

/* The kernel's modules with samples, each kernel.syms symbol tied to its module. */
static void kmods_init(struct tally_resolver *r, struct imgsyms *s)
{
	const struct tally_db *db = r->db;
	s->ksym_kmod = xcalloc(db->nksyms + 1, sizeof(*s->ksym_kmod));
	s->ksym_delta = xcalloc(db->nksyms + 1, sizeof(*s->ksym_delta));
	s->ksym_placed = xcalloc(db->nksyms + 1, sizeof(*s->ksym_placed));
	size_t cap = 0;
	for (size_t i = 0; i < db->nksyms; i++) {
		const char *m = db->ksyms[i].module;
		s->ksym_kmod[i] = UINT32_MAX;
		if (!m)
			continue;
		uint32_t k;
		for (k = 0; k < s->nkmods && strcmp(s->kmods[k].name, m); k++)
			;
		if (k == s->nkmods) {
			GROW(s->kmods, cap, s->nkmods + 1);
			struct kmod *km = &s->kmods[s->nkmods++];
			memset(km, 0, sizeof(*km));
			km->name = xstrdup(m);
			const struct tally_db_module *rec = NULL;
			for (size_t j = 0; j < db->nmods && !rec; j++)
				if (!strcmp(db->mods[j].name, m))
					rec = &db->mods[j];
			km->img = (struct tally_db_image){ .name = km->name, .path = xstrdup(m),
							   .id = rec && rec->build_id ? rec->build_id : (char *)"",
							   .id_kind = rec && rec->build_id ? (char *)"build-id" : (char *)"none",
							   .kind = (char *)"kmod" };
		}
		s->ksym_kmod[i] = k;
	}
	/* the subs point at their own identity (stable now: kmods is not grown again) */
	for (size_t k = 0; k < s->nkmods; k++) {
		s->kmods[k].sub.r = r;
		s->kmods[k].sub.image = s->image;
		s->kmods[k].sub.di = &s->kmods[k].img;
		s->kmods[k].sub.state = 1;
	}
}

/* For a kernel address in a module's function: the module's .ko (loaded on
 * first use) and the address in it; NULL when there is none to use. */
static struct imgsyms *kmod_at(struct tally_resolver *r, struct imgsyms *s, const struct tally_sym *sym, uint64_t addr,
			       uint64_t *koaddr, const char **modname)
{
	if (!sym || !s->ksym_kmod || sym < s->syms || sym >= s->syms + s->nsyms)
		return NULL;
	size_t i = (size_t)(sym - s->syms);
	uint32_t k = s->ksym_kmod[i];
	if (k == UINT32_MAX)
		return NULL;
	struct kmod *km = &s->kmods[k];
	*modname = km->name;
	if (!km->state)
		kmod_load(r, s, k);
	if (km->state != 1 || !s->ksym_placed[i])
		return NULL;
	*koaddr = addr - s->ksym_delta[i];
	return &km->sub;
}

/* No --vmlinux: the places where distributions and kernel builds leave the
 * running kernel's image (perf looks in the same ones), used only when its
 * build-id is the recorded kernel's. */
static void find_vmlinux(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di)
{
	const char *rel = tally_meta_get(&r->db->session, "kernel-release");
	struct cand *c = NULL;
	size_t n = 0, a = 0;
	bool bid = !strcmp(di->id_kind, "build-id") && strlen(di->id) > 2;
	for (size_t i = 0; bid && r->o.debug_dirs && r->o.debug_dirs[i]; i++)
		add_cand(&c, &n, &a, "--debug-dir build-id", false, "%s/.build-id/%.2s/%s.debug", r->o.debug_dirs[i], di->id,
			 di->id + 2);
	if (r->archive)
		add_cand(&c, &n, &a, "in the archive", false, "%s/kernel/vmlinux", r->archive);
	else if (bid)
		add_cand(&c, &n, &a, "system build-id directory", false, "/usr/lib/debug/.build-id/%.2s/%s.debug", di->id,
			 di->id + 2);
	if (rel && *rel && !strchr(rel, '/') && !r->archive) {
		static const char *const fmts[] = { "/usr/lib/debug/boot/vmlinux-%s", "/usr/lib/debug/lib/modules/%s/vmlinux",
						    "/boot/vmlinux-%s", "/lib/modules/%s/build/vmlinux",
						    "/usr/lib/debug/boot/vmlinux-%s.debug" };
		for (size_t i = 0; i < ARRAY_SIZE(fmts); i++) {
			struct strbuf p = STRBUF_INIT;
			strbuf_addf(&p, fmts[i], rel);
			add_cand(&c, &n, &a, "the usual place", false, "%s", p.buf);
			strbuf_release(&p);
		}
	}
	struct strbuf why = STRBUF_INIT;
	const char *found = NULL;
	for (size_t i = 0; i < n && !found; i++) {
		if (access(c[i].path, F_OK) != 0)
			continue; /* the usual places are usually empty: only files there are logged */
		int ok = check_file(di, c[i].path, &why);
		logf_(s, "vmlinux '%s' (%s): %s%s", c[i].path, c[i].why, why.buf, ok == 1 ? ": used" : "");
		if (ok == 1)
			found = c[i].path;
	}
	strbuf_release(&why);
	if (found)
		load_vmlinux(r, s, di, found);
	else
		logf_(s, "no --vmlinux, and no image of the recorded kernel in %zu usual places (/usr/lib/debug/boot/vmlinux-RELEASE, /boot/vmlinux-RELEASE, ...): kernel functions from kernel.syms, no kernel source lines",
		      n);
	free_cands(c, n);
}

static void load_kernel(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di)
{
	const struct tally_db *db = r->db;
	s->syms = xcalloc(db->nksyms + 1, sizeof(*s->syms));
	struct strbuf names = STRBUF_INIT;
	size_t *offs = xcalloc(db->nksyms + 1, sizeof(size_t));
	for (size_t i = 0; i < db->nksyms; i++) {
		offs[i] = names.len;
		strbuf_addstr(&names, db->ksyms[i].name);
		if (db->ksyms[i].module)
			strbuf_addf(&names, " [%s]", db->ksyms[i].module);
		strbuf_addch(&names, '\0');
	}
	s->names = strbuf_detach(&names);
	for (size_t i = 0; i < db->nksyms; i++)
		s->syms[i] = (struct tally_sym){ db->ksyms[i].addr, db->ksyms[i].size, s->names + offs[i], 0 };
	s->nsyms = db->nksyms;
	free(offs);
	kmods_init(r, s);
	logf_(s, "kernel.syms in the database: %zu symbols (those the samples needed, read from /proc/kallsyms while recording)",
	      db->nksyms);
	if (!s->nsyms) {
		const char *why = tally_meta_get(&db->session, "kernel-symbols");
		set_note(s, "the database has no kernel symbols%s%s", why ? ": " : "", why ? why : "");
	}
	if (r->o.vmlinux)
		load_vmlinux(r, s, di, r->o.vmlinux);
	else
		find_vmlinux(r, s, di);
}

static void load(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = &r->im[image];
	const struct tally_db_image *di = &r->db->images[image];
	s->state = 1;
	if (!strcmp(di->kind, "kernel")) {
		load_kernel(r, s, di);
	} else if (!strcmp(di->kind, "jit")) {
		load_jit(r, s, di);
	} else if (!strcmp(di->kind, "nomap")) {
		set_note(s, "code outside any file, and no JIT map named it");
		logf_(s, "executable memory backed by no file (and no JIT map named it): nothing to look up");
	} else if (!strcmp(di->kind, "vdso")) {
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/vdso.so", tally_db_image_dir(r->db, image));
		/* a file of the database: never through a link */
		int fd = tally_open_regular(AT_FDCWD, p.buf, 0, TALLY_DB_FILE_MAX, NULL);
		if (fd >= 0) {
			close(fd);
			load_dwfl(r, s, di, p.buf, !strcmp(di->id_kind, "build-id"));
		} else if (fd == -ENOENT) {
			logf_(s, "vDSO copy '%s': not there", p.buf);
			set_note(s, "no copy of the vDSO in the database");
		} else {
			logf_(s, "vDSO copy: %s", tally_errmsg());
			set_note(s, "%s: not used", tally_errmsg());
		}
		strbuf_release(&p);
	} else if (!strcmp(di->id_kind, "unreachable")) {
		s->mismatch = true;
		logf_(s, "mapped inside another mount namespace by a process that exited before its file could be read through /proc/PID/root: which file ran is unknown");
		set_note(s, "'%s' was mapped inside a container by a process that exited before tally could read it: not symbolized",
			 di->path);
	} else if (!strcmp(di->id_kind, "replaced")) {
		s->mismatch = true;
		logf_(s, "the file at '%s' was replaced or deleted while it was mapped, so which file ran is unknown", di->path);
		set_note(s, "'%s' was replaced or deleted while it was mapped, so the file that ran is unknown: not symbolized (record with --build-id-mmap to keep build-ids)",
			 di->path);
	} else {
		load_file(r, s, di);
	}
}

static const struct tally_sym *lookup(const struct imgsyms *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nsyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	const struct tally_sym *y = &s->syms[lo - 1];
	return addr < y->addr + (y->size ? y->size : 1) ? y : NULL;
}

/* A file offset as a link-time address through the loadable segments. */
static bool offset_to_addr(const struct imgsyms *s, uint64_t offset, uint64_t *addr)
{
	for (size_t i = 0; i < s->nph; i++)
		if (offset >= s->ph[i].off && offset < s->ph[i].off + s->ph[i].filesz) {
			*addr = offset - s->ph[i].off + s->ph[i].vaddr;
			return true;
		}
	return false;
}

static bool is_file_kind(const struct tally_db_image *di)
{
	return strcmp(di->kind, "kernel") && strcmp(di->kind, "jit") && strcmp(di->kind, "nomap");
}

static struct imgsyms *get(struct tally_resolver *r, uint32_t image)
{
	if (image >= r->db->nimages)
		return NULL;
	struct imgsyms *s = &r->im[image];
	if (!s->state)
		load(r, image);
	return s;
}

const struct tally_sym *tally_resolve(struct tally_resolver *r, uint32_t image, uint64_t offset)
{
	struct imgsyms *s = get(r, image);
	if (!s || !s->nsyms)
		return NULL;
	uint64_t addr = offset;
	if (is_file_kind(&r->db->images[image]) && !offset_to_addr(s, offset, &addr))
		return NULL;
	const struct tally_sym *y = lookup(s, addr);
	if (y)
		return y;
	for (size_t i = 0; i < s->nsecs; i++)
		if (addr >= s->secs[i].start && addr < s->secs[i].end) {
			/* e.g. [.plt]: honest about where, without inventing a function */
			s->secsym = (struct tally_sym){ s->secs[i].start, s->secs[i].end - s->secs[i].start, s->secs[i].label, 0 };
			return &s->secsym;
		}
	return NULL;
}

/* ---- DWARF: lines and inline chains ---- */

static Dwarf *get_dwarf(struct imgsyms *s)
{
	if (s->dwarf_state)
		return s->dw;
	s->dwarf_state = -1;
	if (!s->mod)
		return NULL;
	Dwarf_Addr b;
	s->dw = dwfl_module_getdwarf(s->mod, &b);
	if (s->dw) {
		s->dwarf_state = 1;
		const char *dbg = NULL, *mainf = NULL;
		dwfl_module_info(s->mod, NULL, NULL, NULL, NULL, NULL, &mainf, &dbg);
		logf_(s, "DWARF (lines, inlines): from '%s'", dbg ? dbg : mainf ? mainf : s->file);
	} else {
		int e = dwfl_errno();
		logf_(s, "DWARF (lines, inlines): none: %s", e ? dwfl_errmsg(e) : "no debug info found");
	}
	return s->dw;
}

static bool has_pc_attr(Dwarf_Die *d)
{
	return dwarf_hasattr(d, DW_AT_low_pc) || dwarf_hasattr(d, DW_AT_ranges) || dwarf_hasattr(d, DW_AT_entry_pc);
}

/* The DIEs of the subprogram containing pc and the inlined subroutines within
 * it that contain pc, outermost first. Returns how many (at most max). */
static int scope_chain(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *chain, int max, int n, int depth)
{
	Dwarf_Die child;
	if (depth > 64 || dwarf_child(parent, &child) != 0)
		return n;
	do {
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
			if (dwarf_haspc(&child, pc) == 1) {
				if (n < max)
					chain[n++] = child;
				return scope_chain(&child, pc, chain, max, n, depth + 1);
			}
			break;
		case DW_TAG_lexical_block:
		case DW_TAG_try_block:
		case DW_TAG_catch_block:
			if (!has_pc_attr(&child) || dwarf_haspc(&child, pc) == 1) {
				int m = scope_chain(&child, pc, chain, max, n, depth + 1);
				if (m > n || has_pc_attr(&child))
					return m;
			}
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_module: {
			int m = scope_chain(&child, pc, chain, max, n, depth + 1);
			if (m > n)
				return m;
			break;
		}
		default:
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return n;
}

static const char *call_file(Dwarf_Die *cu, Dwarf_Die *die, int *line)
{
	Dwarf_Attribute a;
	Dwarf_Word v;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &a), &v) == 0)
		*line = (int)v;
	Dwarf_Files *files;
	size_t nfiles;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &a), &v) != 0 || dwarf_getsrcfiles(cu, &files, &nfiles) != 0 ||
	    v >= nfiles)
		return NULL;
	return dwarf_filesrc(files, v, NULL, NULL);
}

static void push_frame(struct tally_resolver *r, const char *name, const char *file, int line, bool inl, uint64_t addr)
{
	GROW(r->frames, r->aframes, r->nframes + 1);
	r->frames[r->nframes++] = (struct tally_srcframe){ name, file, line, inl, addr };
}

static bool path_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_resolver *r = ctx;
	return !strcmp(r->paths[idx], key);
}

/* sb's text, kept once for the resolver's life; sb is released. */
static const char *intern(struct tally_resolver *r, struct strbuf *sb)
{
	uint64_t h = tally_hash_bytes(sb->buf, strlen(sb->buf), 0);
	uint32_t i = tally_hidx_get(&r->path_idx, h, sb->buf, path_eq, r);
	if (i == TALLY_HIDX_NONE) {
		GROW(r->paths, r->apaths, r->npaths + 1);
		r->paths[r->npaths] = strbuf_detach(sb);
		tally_hidx_put(&r->path_idx, h, (uint32_t)r->npaths);
		i = (uint32_t)r->npaths++;
	}
	strbuf_release(sb);
	return r->paths[i];
}

/* A line table's file name as an absolute path: a relative name is joined to the
 * CU's DW_AT_comp_dir, and "." and "dir/.." are folded (as the compiler wrote
 * them, without looking at the file system). Interned: lives with the resolver. */
static const char *abs_srcpath(struct tally_resolver *r, Dwarf_Die *cu, const char *file)
{
	if (!file)
		return NULL;
	struct strbuf sb = STRBUF_INIT;
	Dwarf_Attribute at;
	const char *dir = file[0] == '/' ? NULL : dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &at));
	if (dir)
		strbuf_addf(&sb, "%s/", dir);
	strbuf_addstr(&sb, file);
	/* fold components in place: out only ever moves back to a '/' it wrote */
	char *start = sb.buf + (sb.buf[0] == '/'), *in = start, *out = start;
	while (*in) {
		char *end = strchrnul(in, '/');
		bool more = *end != '\0'; /* (the '/' written below may land on the NUL) */
		size_t n = (size_t)(end - in);
		bool dotdot = n == 2 && in[0] == '.' && in[1] == '.';
		char *last = out; /* the start of the last component written */
		if (out > start)
			for (last = out - 1; last > start && last[-1] != '/'; last--)
				;
		if (n == 0 || (n == 1 && in[0] == '.')) {
			/* nothing */
		} else if (dotdot && out > start && strncmp(last, "../", 3)) {
			out = last;
		} else {
			memmove(out, in, n);
			out += n;
			*out++ = '/';
		}
		if (!more)
			break;
		in = end + 1;
	}
	if (out > start && out[-1] == '/')
		out--;
	*out = '\0';
	sb.len = (size_t)(out - sb.buf);
	return intern(r, &sb);
}

/* name with the module it is in, " [mod]" as kernel.syms writes it; interned */
static const char *in_module(struct tally_resolver *r, const char *name, const char *mod)
{
	if (!name || !mod)
		return name;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s [%s]", name, mod);
	return intern(r, &sb);
}

static void compute_frames(struct tally_resolver *r, uint32_t image, uint64_t offset, bool ret)
{
	struct imgsyms *s = get(r, image);
	if (!s || s->mismatch)
		return;
	const struct tally_db_image *di = &r->db->images[image];
	uint64_t off = offset - (ret && offset ? 1 : 0);
	const struct tally_sym *sym = tally_resolve(r, image, off);
	const char *outer = sym ? sym->name : NULL;
	uint64_t outer_addr = sym ? sym->addr : 0;
	size_t first = r->nframes;
	uint64_t addr = 0;
	Dwarf *dw = NULL;
	/* where the DWARF is: the image's own file, or for the kernel, --vmlinux or a module's .ko */
	struct imgsyms *d = s;
	const char *modname = NULL;
	/* DWARF is for inlines and lines: a --symbols --no-inline report never reads it */
	bool want = !r->o.no_inline || r->o.lines;
	if (want && is_file_kind(di)) {
		if (offset_to_addr(s, off, &addr))
			dw = get_dwarf(s);
	} else if (want && !strcmp(di->kind, "kernel")) {
		/* a module's code: its .ko, never vmlinux */
		struct imgsyms *m = kmod_at(r, s, sym, off, &addr, &modname);
		if (m) {
			d = m;
			dw = get_dwarf(m);
		} else if (!modname && s->mod) {
			addr = off - s->kdelta;
			dw = get_dwarf(s);
		}
	}
	if (dw) {
		Dwarf_Addr modaddr = addr + d->bias, cubias = 0;
		dwfl_errno(); /* clear */
		Dwarf_Die *cu = dwfl_module_addrdie(d->mod, modaddr, &cubias);
		if (cu) {
			Dwarf_Addr pc = modaddr - cubias;
			const char *file = NULL;
			int line = 0;
			Dwarf_Line *l = dwarf_getsrc_die(cu, pc);
			if (l) {
				file = abs_srcpath(r, cu, dwarf_linesrc(l, NULL, NULL));
				dwarf_lineno(l, &line);
			}
			Dwarf_Die chain[32];
			int n = scope_chain(cu, pc, chain, 32, 0, 0);
			if (r->o.no_inline)
				n = n ? 1 : 0;
			/* innermost first: each inlined frame's location, then its call site in the next */
			for (int i = n - 1; i >= 1; i--) {
				Dwarf_Attribute a;
				Dwarf_Die origin;
				uint64_t key = dwarf_dieoffset(&chain[i]);
				if (dwarf_attr(&chain[i], DW_AT_abstract_origin, &a) && dwarf_formref_die(&a, &origin))
					key = dwarf_dieoffset(&origin);
				push_frame(r, in_module(r, dwarf_diename(&chain[i]), modname), file, line, true, key);
				file = abs_srcpath(r, cu, call_file(cu, &chain[i], &line));
			}
			if (!outer && n)
				outer = in_module(r, dwarf_diename(&chain[0]), modname);
			if (outer || file)
				push_frame(r, outer, file, line, false, outer_addr);
		} else if (sym) {
			/* code the symbol table knows but no compile unit covers: DWARF that is
			 * damaged, or partial (code built without -g) */
			int e = dwfl_errno();
			if (!d->dwarf_missing++ || (e && !strcmp(d->dwarf_err, "no compile unit covers it"))) {
				free(d->dwarf_err);
				const char *m = e ? dwfl_errmsg(e) : NULL;
				d->dwarf_err = xstrdup(m && !strstr(m, "out of range") ? m : "no compile unit covers it");
			}
		}
	}
	if (r->nframes == first && outer && s->jd) {
		/* JIT code: the jitdump's line records */
		const char *file;
		unsigned line;
		if (!tally_resolver_jit_line(r, image, off, &file, &line))
			push_frame(r, outer, file, (int)line, false, outer_addr);
	}
	if (r->nframes == first && outer)
		push_frame(r, outer, NULL, 0, false, outer_addr);
}

static bool fc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_resolver *r = ctx;
	const struct fcache *k = key, *c = &r->fc[idx];
	return c->image == k->image && c->offset == k->offset && c->ret == k->ret;
}

size_t tally_resolve_frames(struct tally_resolver *r, uint32_t image, uint64_t offset, bool ret,
			    const struct tally_srcframe **out)
{
	struct fcache k = { image, ret, offset, 0, 0 };
	uint64_t h = tally_hash_u64(offset ^ ((uint64_t)image << 40) ^ ((uint64_t)ret << 63));
	uint32_t i = tally_hidx_get(&r->fc_idx, h, &k, fc_eq, r);
	if (i == TALLY_HIDX_NONE) {
		k.first = (uint32_t)r->nframes;
		compute_frames(r, image, offset, ret);
		k.n = (uint32_t)(r->nframes - k.first);
		GROW(r->fc, r->afc, r->nfc + 1);
		r->fc[r->nfc] = k;
		tally_hidx_put(&r->fc_idx, h, (uint32_t)r->nfc);
		i = (uint32_t)r->nfc++;
	}
	*out = r->fc[i].n ? &r->frames[r->fc[i].first] : NULL;
	return r->fc[i].n;
}

void tally_resolve_leaf(struct tally_resolver *r, uint32_t image, uint64_t offset, struct tally_leaf *out)
{
	memset(out, 0, sizeof(*out));
	out->name = "[unknown]";
	if (tally_resolver_mismatch(r, image)) {
		/* a changed file: raw offsets are the only honest answer */
		snprintf(out->buf, sizeof(out->buf), "[offset 0x%" PRIx64 "]", offset);
		out->name = out->buf;
		out->addr = offset;
		out->has_addr = true;
		return;
	}
	const struct tally_srcframe *fr;
	if (!tally_resolve_frames(r, image, offset, false, &fr))
		return;
	if (fr[0].name) {
		out->name = fr[0].name;
		out->addr = fr[0].addr;
		out->has_addr = !fr[0].inlined;
		out->inlined = fr[0].inlined;
	}
	out->file = fr[0].file;
	out->line = fr[0].line;
}

bool tally_resolver_has_dwarf(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = get(r, image);
	if (!s || s->mismatch)
		return false;
	/* the kernel: --vmlinux, or a module's .ko that was used */
	for (size_t k = 0; k < s->nkmods; k++)
		if (s->kmods[k].state == 1 && get_dwarf(&s->kmods[k].sub))
			return true;
	return get_dwarf(s) != NULL;
}

const char *tally_resolver_note(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = get(r, image);
	if (s && !s->note && s->dwarf_missing && s->dwarf_err && strcmp(s->dwarf_err, "no compile unit covers it")) {
		/* damaged DWARF is worth a warning; code built without -g is not */
		set_note(s, "its DWARF is damaged (%s): source lines and inlines skipped for %zu address%s", s->dwarf_err,
			 s->dwarf_missing, s->dwarf_missing == 1 ? "" : "es");
		s->loud = true;
	}
	return s ? s->note : NULL;
}

bool tally_resolver_loaded(const struct tally_resolver *r, uint32_t image)
{
	return image < r->db->nimages && r->im[image].state;
}

bool tally_resolver_loud(struct tally_resolver *r, uint32_t image)
{
	tally_resolver_note(r, image);
	struct imgsyms *s = get(r, image);
	return s && (s->mismatch || s->loud);
}

bool tally_resolver_mismatch(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = get(r, image);
	return s && s->mismatch;
}

void tally_resolver_explain(struct tally_resolver *r, uint32_t image, struct strbuf *out)
{
	struct imgsyms *s = get(r, image);
	if (!s)
		return;
	const struct tally_db_image *di = &r->db->images[image];
	if (s->mod && !s->mismatch)
		get_dwarf(s);
	strbuf_addf(out, "  recorded: %s '%s', %s %s\n", di->kind, di->path, di->id_kind, di->id);
	if (di->foreign_ns)
		strbuf_addstr(out, "  mapped inside another mount namespace (a container): the path is the container's; give --image-path with the container's root directory, --mapfile or --debug-dir to find the file\n");
	strbuf_add(out, s->log.buf ? s->log.buf : "", s->log.len);
	if (s->mod && !s->mismatch) {
		GElf_Addr b;
		Elf *elf = dwfl_module_getelf(s->mod, &b);
		strbuf_addf(out, "  sections of '%s': ", s->file);
		describe_sections(elf, out);
		strbuf_addch(out, '\n');
		Dwarf_Addr db;
		Dwarf *dw = s->dw ? s->dw : NULL;
		Elf *delf = dw ? dwarf_getelf(dw) : NULL;
		(void)db;
		if (delf && delf != elf) {
			strbuf_addf(out, "  sections of the debug file '%s': ", s->debug_file ? s->debug_file : "?");
			describe_sections(delf, out);
			strbuf_addch(out, '\n');
		}
	}
	/* the verdict */
	if (!strcmp(di->kind, "kernel")) {
		strbuf_addf(out, "  functions: %s\n", s->nsyms ? "named from kernel.syms" : "not named: the database has no kernel symbols");
		strbuf_addf(out, "  lines: %s%s%s\n", s->dw && !r->o.vmlinux ? "from '" : "", s->dw && !r->o.vmlinux ? s->file : "",
			    s->dw && !r->o.vmlinux ? "' (found by its build-id)" : s->dw ? "from --vmlinux" :
				 r->o.vmlinux ? "none (the --vmlinux given was not used, see above)" :
						"none (give --vmlinux with the running kernel's image)");
		/* modules: named by kernel.syms with the module in brackets; lines from their .ko */
		for (size_t k = 0; k < s->nkmods; k++) {
			struct kmod *km = &s->kmods[k];
			if (!km->state)
				kmod_load(r, s, (uint32_t)k);
			struct imgsyms *m = &km->sub;
			if (m->mod)
				get_dwarf(m);
			bool bid = !strcmp(km->img.id_kind, "build-id");
			strbuf_addf(out, "  module %s: recorded %s%s\n", km->name, bid ? "build-id " : "",
				    bid ? km->img.id : "without a build-id");
			/* the module's own log, indented under it */
			for (const char *p = m->log.buf ? m->log.buf : ""; *p;) {
				size_t l = strcspn(p, "\n");
				strbuf_addf(out, "  %.*s\n", (int)l, p);
				p += l + (p[l] == '\n');
			}
			strbuf_addf(out, "    %s: functions from kernel.syms; lines: %s\n", km->name,
				    km->state == 1 && m->dw ? "from its .ko's DWARF" :
				    km->state == 1 ? "none (its .ko has no DWARF: install the kernel's debug package or give --debug-dir)" :
						     "none (no .ko of this build: give --image-path DIR with the module files)");
		}
		return;
	}
	if (s->mismatch) {
		strbuf_addstr(out, "  functions: not named: no file with the recorded id was found, and a file with another id is never used (raw offsets are shown)\n");
		return;
	}
	if (!s->nsyms) {
		strbuf_addf(out, "  functions: not named: %s\n", s->note ? s->note : "no symbols");
	} else if (!strcmp(di->kind, "jit")) {
		strbuf_addf(out, "  functions: named from the JIT map (%zu entries)\n", s->nsyms);
	} else if (s->have_symtab) {
		strbuf_addf(out, "  functions: named from .symtab (%zu functions)\n", s->nsyms);
	} else {
		strbuf_addf(out, "  functions: only the exported ones, from .dynsym (%zu functions); local functions are [unknown] (install its debug package, or give --debug-dir or --mapfile)\n",
			    s->nsyms);
	}
	if (s->mod)
		strbuf_addf(out, "  lines and inlines: %s\n",
			    s->dw ? "from DWARF" : "none: no .debug_info in the image or any debug file found above");
	if (s->dwarf_missing)
		strbuf_addf(out, "  lines and inlines: %zu sampled address%s in named functions had no DWARF (%s): built without -g, or damaged debug info\n",
			    s->dwarf_missing, s->dwarf_missing == 1 ? "" : "es", s->dwarf_err);
}

Dwfl_Module *tally_resolver_module(struct tally_resolver *r, uint32_t image, GElf_Addr *bias_out)
{
	struct imgsyms *s = get(r, image);
	if (!s || !s->mod || s->mismatch)
		return NULL;
	if (bias_out)
		*bias_out = s->bias;
	return s->mod;
}

int tally_resolver_addr(struct tally_resolver *r, uint32_t image, uint64_t offset, uint64_t *addr)
{
	struct imgsyms *s = get(r, image);
	if (!s)
		return -1;
	const struct tally_db_image *di = &r->db->images[image];
	if (!is_file_kind(di)) {
		*addr = offset - s->kdelta;
		return 0;
	}
	if (!s->mod || s->mismatch)
		return -1;
	return offset_to_addr(s, offset, addr) ? 0 : -1;
}

const struct tally_jit_func *tally_resolver_jit_func(struct tally_resolver *r, uint32_t image, uint64_t addr,
						     uint32_t *elf_mach)
{
	if (image >= r->db->nimages || strcmp(r->db->images[image].kind, "jit"))
		return NULL;
	struct imgsyms *s = &r->im[image];
	if (!s->state)
		load(r, image);
	if (!s->jd)
		return NULL;
	if (elf_mach)
		*elf_mach = s->jd->elf_mach;
	return tally_jitdump_find(s->jd, addr);
}

int tally_resolver_jit_line(struct tally_resolver *r, uint32_t image, uint64_t addr, const char **file, unsigned *line)
{
	const struct tally_jit_func *f = tally_resolver_jit_func(r, image, addr, NULL);
	const struct tally_jit_line *l = f ? tally_jitdump_line(f, addr) : NULL;
	if (!l || !l->line)
		return -1;
	*file = r->im[image].jd->files[l->file];
	*line = l->line;
	return 0;
}

static size_t add_rfile(struct tally_resolver_file *out, size_t n, size_t max, const char *path,
			enum tally_rfile_role role, const char *module, const struct tally_db_image *di)
{
	if (!path || n >= max)
		return n;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(out[i].path, path))
			return n;
	out[n] = (struct tally_resolver_file){ path, role, module, di->id_kind, di->id };
	return n + 1;
}

size_t tally_resolver_files(struct tally_resolver *r, uint32_t image, struct tally_resolver_file *out, size_t max)
{
	struct imgsyms *s = get(r, image);
	if (!s || s->mismatch)
		return 0;
	const struct tally_db_image *di = &r->db->images[image];
	size_t n = 0;
	if (!strcmp(di->kind, "kernel")) {
		if (s->mod)
			n = add_rfile(out, n, max, s->file, TALLY_RFILE_VMLINUX, NULL, di);
		for (size_t k = 0; k < s->nkmods; k++) {
			struct kmod *km = &s->kmods[k];
			if (!km->state)
				kmod_load(r, s, (uint32_t)k);
			if (km->state != 1)
				continue;
			get_dwarf(&km->sub);
			n = add_rfile(out, n, max, km->sub.file, TALLY_RFILE_MODULE, km->name, &km->img);
			n = add_rfile(out, n, max, km->sub.debug_file, TALLY_RFILE_MODULE_DEBUG, km->name, &km->img);
		}
		return n;
	}
	if (!is_file_kind(di) || !strcmp(di->kind, "vdso") || !s->mod)
		return 0; /* JIT maps, jitdumps and the vDSO are copies inside the database */
	get_dwarf(s);
	/* with no image file found, its debug file was loaded in its place */
	if (!s->file || !s->debug_file || strcmp(s->file, s->debug_file))
		n = add_rfile(out, n, max, s->file, TALLY_RFILE_IMAGE, NULL, di);
	n = add_rfile(out, n, max, s->debug_file, TALLY_RFILE_DEBUG, NULL, di);
	return n;
}
