/* Self-contained archives of a profile (docs/format.md, "Archives"): the
 * database and every file its reports need (images, their separate debug
 * files, vmlinux, sampled modules' .ko files), keyed by the image ids the
 * database recorded, with a MANIFEST of sizes and checksums. Written as a
 * directory or a tarball (through libarchive), atomically; read by every
 * command that reads a database, and then the resolver looks only inside. */
#ifndef TALLY_ARCHIVE_H
#define TALLY_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/symbols.h"
#include "tally/util.h"

#define TALLY_ARCHIVE_VERSION 1
#define TALLY_ARCHIVE_MANIFEST "MANIFEST"

enum tally_archive_kind {
	TALLY_ARCHIVE_DIR,
	TALLY_ARCHIVE_TAR,
	TALLY_ARCHIVE_TAR_GZ,
	TALLY_ARCHIVE_TAR_ZST,
};

/* The kind of archive a name asks for, by its suffix: .tar, .tar.gz or .tgz,
 * .tar.zst or .tzst; anything else is a directory. */
enum tally_archive_kind tally_archive_kind_of(const char *path);

/* What an archive member is (its role, in the MANIFEST and --list). */
enum tally_archive_role {
	TALLY_AR_DB,      /* a file of the database (db/...) */
	TALLY_AR_IMAGE,   /* an image file (images/ID/NAME) */
	TALLY_AR_DEBUG,   /* its separate debug file */
	TALLY_AR_VMLINUX, /* the kernel's image (kernel/vmlinux) */
	TALLY_AR_MODULE,  /* a sampled module's .ko (kernel/modules/...) */
	TALLY_AR_NROLES,
};
/* "db", "image", "debug", "vmlinux", "module". */
const char *tally_archive_role_name(enum tally_archive_role role);

struct tally_archive_member {
	char *name;  /* inside the archive */
	enum tally_archive_role role;
	char *src;   /* the file copied, or NULL for a database file (data) */
	/* src opened once when planned, verified from it, and copied from it (-1: none) */
	int fd;
	int tmpfd;   /* strip: the stripped copy, while writing (-1: none) */
	const char *data; /* a database file's bytes (into the plan's bundle) */
	uint64_t size;    /* bytes of the member (for strip: as written) */
	uint64_t src_size; /* bytes of the source file */
	bool strip;       /* written with only the sampled DWARF (--strip-debug-to-sampled) */
	uint64_t *addrs;  /* strip: the link-time addresses the reports need */
	size_t naddrs;
	char *note;       /* why it is as it is ("image libc.so.6", "module ext4"), for --list */
	char *tmp;        /* strip: the stripped copy, while writing */
	unsigned char sum[16]; /* XXH3-128 of the member (canonical, big-endian) */
	bool have_sum;
};

struct tally_archive_opts {
	bool no_debug;          /* no separate debug files, vmlinux nor .ko files */
	bool strip;             /* --strip-debug-to-sampled */
	bool exclude_dependent; /* only the programs' own executables (oparchive -x) */
};

struct tally_archive_plan {
	struct tally_archive_member *m;
	size_t n, alloc;
	struct strbuf bundle; /* the database as a bundle: db members point into it */
	uint64_t total;       /* bytes of all members */
};

/* What an archive of db holds: the database's files, then per image with
 * samples the file and separate debug file the resolver r (made for db with the
 * user's symbol options) verified and used, the kernel's vmlinux and each
 * sampled module's .ko (and their debug files). Each file is opened once, here,
 * and verified again from that descriptor against the recorded id (build-id,
 * content hash, or the CRC the image's .gnu_debuglink gives), and the writer
 * copies from that same descriptor: a file swapped since the resolver looked
 * (for a link to another file, say) is never what goes in. An image is opened
 * at its recorded path without following a link there (the kernel recorded the
 * file's own name). Images whose files were not found, or that no recorded id
 * can verify, are left out, with a warning in w. With o->strip, the debug files
 * are measured as they will be written. 0 or -errno with tally_seterr; the plan
 * holds a descriptor per file until tally_archive_plan_release. */
int tally_archive_plan(struct tally_archive_plan *p, const struct tally_db *db,
		       struct tally_resolver *r, const struct tally_archive_opts *o,
		       struct tally_warnings *w);
void tally_archive_plan_release(struct tally_archive_plan *p);

/* Called now and then while writing: bytes done of total, the member at hand. */
typedef void (*tally_archive_progress_fn)(void *ctx, uint64_t done, uint64_t total,
					  const char *member);

/* Writes the plan as path (kind by suffix, tally_archive_kind_of), atomically:
 * built next to path (as .NAME.tmp-PID-XXXXXX, stripped copies of a tarball
 * in .NAME.strip-PID-XXXXXX) and renamed into place at the end; a failure
 * leaves nothing behind, nor does SIGINT, SIGTERM, SIGHUP or SIGPIPE (removed
 * as the signal ends the process), and what an earlier writer of path that was
 * killed outright left is removed first (staging.c says when it is provably
 * ours). path must not exist. Every file is copied from the descriptor the
 * plan verified. A source file that changed since the plan is an error. 0 or
 * -errno with tally_seterr. */
int tally_archive_write(struct tally_archive_plan *p, const char *path,
			tally_archive_progress_fn fn, void *ctx);

/* ---- reading ---- */

/* Whether path is to be read as an archive: "archive:PATH", a directory with a
 * MANIFEST, or a file that is a tarball (tar, gzip, zstd, xz or bzip2 magic). */
bool tally_archive_is(const char *path);
/* Opens the database of the archive at path ("archive:" prefix allowed): a
 * directory in place, a tarball unpacked into a private temporary directory
 * ($TMPDIR/tally-archive.PID-XXXXXX, mode 0700, removed by tally_db_release,
 * or by SIGINT, SIGTERM, SIGHUP or SIGPIPE as one ends the process; what a
 * reader that was killed outright left there is removed by the next), nothing
 * ever written outside it. Every member is checked against the MANIFEST (names, types,
 * sizes, checksums): '..', absolute names, links, device files, unlisted or
 * missing members and a wrong size or checksum are refused with an error
 * naming the member. db->archive is set: the resolver then looks only inside
 * the archive. 0 or -errno with tally_seterr. */
int tally_archive_open(struct tally_db *db, const char *path);
/* The same for a tarball's len bytes in memory, what naming it (the fuzzer's
 * entry point: the reading of members, every check, the database inside). */
int tally_archive_open_buf(struct tally_db *db, const void *data, size_t len, const char *what);

/* ---- the MANIFEST (exposed for the unit tests and the fuzzer) ---- */

struct tally_manifest_entry {
	char *name;
	enum tally_archive_role role;
	uint64_t size;
	unsigned char sum[16];
};
struct tally_manifest {
	struct tally_manifest_entry *e;
	size_t n, alloc;
};
/* Parses a MANIFEST's text (len bytes, no NUL needed); what names it in errors.
 * 0 or -EINVAL with tally_seterr naming what and the line. */
int tally_manifest_parse(struct tally_manifest *m, const char *text, size_t len, const char *what);
void tally_manifest_release(struct tally_manifest *m);
/* The MANIFEST's text for these members. */
void tally_manifest_format(const struct tally_archive_member *m, size_t n, struct strbuf *out);
/* Whether name may be a member: relative, no empty, '.' or '..' component, no
 * control characters, under MANIFEST, db/, images/, debug/ or kernel/. */
bool tally_archive_name_ok(const char *name);

/* Copies the image and debug files an opened archive's database (db->archive
 * set) holds into the open cache c, each checked against its id as it is
 * copied (lib/archive/keep.c), so that a database merged from it names its
 * code once the archive is gone. Returns how many images were kept; *failed
 * is how many files could not be, the last one's error in tally_errmsg(). */
struct tally_cache;
size_t tally_archive_keep(struct tally_cache *c, const struct tally_db *db, size_t *failed);

/* ---- --strip-debug-to-sampled (lib/archive/strip.c) ---- */

/* Writes to fd (or, fd < 0, only measures) a copy of the ELF file open as in
 * (read with pread and libelf: its offset does not matter; src names it) that
 * keeps what reports read for the given link-time addresses: the ELF and
 * program headers and every allocated section at their offsets, .symtab and
 * the line, string, range and abbreviation tables whole, and of .debug_info
 * only the compile units that hold an address (and the units they refer to);
 * the other units become empty ones of the same size (zeros, written as holes)
 * and sections reports never read (location lists, macros, name indexes)
 * become SHT_NOBITS. *size: the file's size; *data: its bytes that are not
 * holes; *units and *kept: compile units in all and kept. 0, -ENOTSUP when the
 * file cannot be stripped so (not ELF64 of this byte order, relocatable, no
 * DWARF: copy it whole), or -errno with tally_seterr. */
struct tally_strip_stats {
	uint64_t size, data;
	size_t units, kept;
};
int tally_strip_debug(int in, const char *src, const uint64_t *addrs, size_t naddrs, int fd,
		      struct tally_strip_stats *st);

#endif
