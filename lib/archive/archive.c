/* Writing archives (archive.h, docs/format.md "Archives"): what goes in comes
 * from the resolver (the files it verified against the recorded ids), each
 * opened once, verified again from that descriptor and copied from it (what is
 * at a path can change between two opens), the MANIFEST holds each member's size and XXH3-128, and
 * the archive is built next to its target under an unpredictable name and renamed into place, so a
 * failure leaves nothing. What it creates is the user's alone, as a
 * database's files are: files 0600, directories 0700, each created
 * exclusively (nothing planted there is ever opened or followed). */
#define _GNU_SOURCE
#include "tally/archive.h"
#include "tally/elfinfo.h"
#include "tally/util.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "lib/archive/internal.h"

static const char *const role_names[TALLY_AR_NROLES] = { "db", "image", "debug", "vmlinux",
							 "module" };

const char *tally_archive_role_name(enum tally_archive_role role)
{
	return role < TALLY_AR_NROLES ? role_names[role] : "?";
}

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n > m && !strcmp(s + n - m, suf);
}

enum tally_archive_kind tally_archive_kind_of(const char *path)
{
	if (ends_with(path, ".tar"))
		return TALLY_ARCHIVE_TAR;
	if (ends_with(path, ".tar.gz") || ends_with(path, ".tgz"))
		return TALLY_ARCHIVE_TAR_GZ;
	if (ends_with(path, ".tar.zst") || ends_with(path, ".tzst"))
		return TALLY_ARCHIVE_TAR_ZST;
	return TALLY_ARCHIVE_DIR;
}

bool tally_archive_name_ok(const char *name)
{
	if (!tally_relpath_ok(name, 1024))
		return false;
	if (!strcmp(name, TALLY_ARCHIVE_MANIFEST))
		return true;
	static const char *const tops[] = { "db/", "images/", "debug/", "kernel/" };
	for (size_t i = 0; i < ARRAY_SIZE(tops); i++)
		if (!strncmp(name, tops[i], strlen(tops[i])))
			return true;
	return false;
}

/* ---- checksums ---- */

void tally_ar_hex16(const unsigned char *sum, char *hex)
{
	tally_hex(sum, 16, hex);
}

void tally_ar_sum_init(struct tally_ar_sum *h)
{
	memset(h, 0, sizeof(*h));
	XXH3_128bits_reset((XXH3_state_t *)h->state);
}

void tally_ar_sum_update(struct tally_ar_sum *h, const void *p, size_t n)
{
	XXH3_128bits_update((XXH3_state_t *)h->state, p, n);
}

void tally_ar_sum_final(struct tally_ar_sum *h, unsigned char out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest((XXH3_state_t *)h->state));
	memcpy(out, c.digest, 16);
}

_Static_assert(sizeof(((struct tally_ar_sum *)0)->state) >= sizeof(XXH3_state_t),
	       "tally_ar_sum too small");

/* ---- the MANIFEST ---- */

void tally_manifest_format(const struct tally_archive_member *m, size_t n, struct strbuf *out)
{
	strbuf_addf(out, "tally-archive: %d\n# role size xxh3-128 name\n", TALLY_ARCHIVE_VERSION);
	for (size_t i = 0; i < n; i++) {
		char hex[40];
		tally_ar_hex16(m[i].sum, hex);
		strbuf_addf(out, "%s %" PRIu64 " %s ", tally_archive_role_name(m[i].role),
			    m[i].size, hex);
		strbuf_add_escaped(out, m[i].name);
		strbuf_addch(out, '\n');
	}
	strbuf_addf(out, "end: %zu files\n", n);
}

void tally_manifest_release(struct tally_manifest *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->e[i].name);
	free(m->e);
	memset(m, 0, sizeof(*m));
}

/* Not tally_hexval: a MANIFEST's checksums are lowercase, as
 * tally_manifest_format writes them, and an uppercase one is refused, so
 * that an archive has one MANIFEST for its members. */
static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

#define DAMAGED_ARCHIVE "a damaged or altered archive: make it again with 'tally archive'"

int tally_manifest_parse(struct tally_manifest *m, const char *text, size_t len, const char *what)
{
	memset(m, 0, sizeof(*m));
	struct tally_hidx idx = { 0 };
	size_t lineno = 0, want = SIZE_MAX;
	const char *p = text, *end = text + len;
	char *line = NULL;
	int r = 0;
	while (p < end && !r) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl) {
			r = tally_seterr(-EINVAL, "'%s' line %zu: no newline at the end (%s)", what,
					 lineno + 1, DAMAGED_ARCHIVE);
			break;
		}
		free(line);
		line = NULL;
		lineno++;
		if (memchr(p, '\0', (size_t)(nl - p))) {
			r = tally_seterr(-EINVAL, "'%s' line %zu: a NUL byte (%s)", what, lineno,
					 DAMAGED_ARCHIVE);
			break;
		}
		line = xstrndup(p, (size_t)(nl - p));
		p = nl + 1;
		if (lineno == 1) {
			if (strncmp(line, "tally-archive: ", 15)) {
				r = tally_seterr(
					-EINVAL,
					"'%s' is not a tally archive's MANIFEST: it does not begin with 'tally-archive:'",
					what);
			} else if (strcmp(line + 15, "1")) {
				char q[TALLY_EXCERPT_SIZE];
				r = tally_seterr(
					-EINVAL,
					"'%s' is of archive format-version '%s', and this tally reads version %d (use a newer tally)",
					what, tally_excerpt(q, line + 15), TALLY_ARCHIVE_VERSION);
			}
			continue;
		}
		if (want != SIZE_MAX) {
			r = tally_seterr(-EINVAL,
					 "'%s' line %zu: something follows the 'end:' line (%s)",
					 what, lineno, DAMAGED_ARCHIVE);
			break;
		}
		if (line[0] == '#' || !line[0])
			continue;
		if (!strncmp(line, "end: ", 5)) {
			char *e;
			errno = 0;
			unsigned long long v = strtoull(line + 5, &e, 10);
			if (errno || e == line + 5 || !isdigit((unsigned char)line[5]) ||
			    strcmp(e, " files") || v != m->n) {
				char q[TALLY_EXCERPT_SIZE];
				r = tally_seterr(
					-EINVAL,
					"'%s' line %zu: expected 'end: %zu files', got '%s' (%s)",
					what, lineno, m->n, tally_excerpt(q, line),
					DAMAGED_ARCHIVE);
				break;
			}
			want = m->n;
			continue;
		}
		/* ROLE SIZE SUM NAME */
		char *f[3], *s = line;
		for (int k = 0; k < 3; k++) {
			f[k] = s;
			s = strchr(s, ' ');
			if (!s)
				break;
			*s++ = '\0';
		}
		struct tally_manifest_entry e = { 0 };
		bool ok = s != NULL && *s;
		int role = -1;
		for (int k = 0; ok && k < TALLY_AR_NROLES; k++)
			if (!strcmp(f[0], role_names[k]))
				role = k;
		ok = ok && role >= 0 && isdigit((unsigned char)f[1][0]) && strlen(f[2]) == 32;
		if (ok) {
			char *e2;
			errno = 0;
			unsigned long long v = strtoull(f[1], &e2, 10);
			ok = !errno && !*e2 && strlen(f[1]) <= 20;
			e.size = v;
		}
		for (int k = 0; ok && k < 16; k++) {
			int a = hexval(f[2][2 * k]), b = hexval(f[2][2 * k + 1]);
			ok = a >= 0 && b >= 0;
			if (ok) /* a negative digit shifted is undefined (found by fuzz-manifest) */
				e.sum[k] = (unsigned char)(a << 4 | b);
		}
		if (!ok) {
			r = tally_seterr(-EINVAL,
					 "'%s' line %zu: expected 'ROLE SIZE XXH3-128 NAME' (%s)",
					 what, lineno, DAMAGED_ARCHIVE);
			break;
		}
		e.role = (enum tally_archive_role)role;
		e.name = xstrdup(s);
		tally_unescape(e.name);
		char q[TALLY_EXCERPT_SIZE];
		if (!tally_archive_name_ok(e.name) || !strcmp(e.name, TALLY_ARCHIVE_MANIFEST)) {
			/* quoted as an excerpt: an escaped newline in the name is one once
			 * unescaped (found by fuzz-manifest) */
			r = tally_seterr(-EINVAL,
					 "'%s' line %zu: '%s' is not a name a member may have (%s)",
					 what, lineno, tally_excerpt(q, e.name), DAMAGED_ARCHIVE);
			free(e.name);
			break;
		}
		uint64_t h = tally_hash_bytes(e.name, strlen(e.name), 0);
		if (tally_hidx_get(&idx, h, e.name, tally_ar_entry_eq, m) != TALLY_HIDX_NONE) {
			r = tally_seterr(-EINVAL, "'%s' line %zu: '%s' is listed twice (%s)", what,
					 lineno, tally_excerpt(q, e.name), DAMAGED_ARCHIVE);
			free(e.name);
			break;
		}
		GROW(m->e, m->alloc, m->n + 1);
		m->e[m->n] = e;
		tally_hidx_put(&idx, h, (uint32_t)m->n++);
	}
	free(line);
	tally_hidx_release(&idx);
	if (!r && lineno == 0)
		r = tally_seterr(-EINVAL, "'%s' is empty (%s)", what, DAMAGED_ARCHIVE);
	if (!r && want == SIZE_MAX)
		r = tally_seterr(-EINVAL, "'%s' has no 'end:' line (cut short: %s)", what,
				 DAMAGED_ARCHIVE);
	if (r)
		tally_manifest_release(m);
	return r;
}

bool tally_ar_entry_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_manifest *m = ctx;
	return !strcmp(m->e[idx].name, key);
}

/* ---- the plan ---- */

static struct tally_archive_member *add_member(struct tally_archive_plan *p, const char *name,
					       enum tally_archive_role role)
{
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->m[i].name, name))
			return NULL;
	GROW(p->m, p->alloc, p->n + 1);
	struct tally_archive_member *m = &p->m[p->n++];
	memset(m, 0, sizeof(*m));
	m->name = xstrdup(name);
	m->role = role;
	m->fd = m->tmpfd = -1;
	return m;
}

void tally_archive_plan_release(struct tally_archive_plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->m[i].name);
		free(p->m[i].src);
		free(p->m[i].addrs);
		free(p->m[i].note);
		free(p->m[i].tmp);
		if (p->m[i].fd >= 0)
			close(p->m[i].fd);
		if (p->m[i].tmpfd >= 0)
			close(p->m[i].tmpfd);
	}
	free(p->m);
	strbuf_release(&p->bundle);
	memset(p, 0, sizeof(*p));
}

/* The database's files, from its bundle (one file, in memory). */
static int plan_db(struct tally_archive_plan *p, const struct tally_db *db)
{
	int r = tally_db_bundle(db, &p->bundle);
	if (r)
		return r;
	const char *s = p->bundle.buf, *end = s + p->bundle.len;
	s = memchr(s, '\n', (size_t)(end - s)) + 1;
	while (s < end && !strncmp(s, "file: ", 6)) {
		char *e;
		unsigned long long len = strtoull(s + 6, &e, 10);
		const char *nl = memchr(e, '\n', (size_t)(end - e));
		struct strbuf name = STRBUF_INIT;
		strbuf_addstr(&name, "db/");
		strbuf_add(&name, e + 1, (size_t)(nl - e - 1));
		struct tally_archive_member *m = add_member(p, name.buf, TALLY_AR_DB);
		if (!m || !tally_archive_name_ok(name.buf)) {
			r = tally_seterr(-EINVAL,
					 "the database's file '%s' cannot be archived (its name)",
					 name.buf + 3);
			strbuf_release(&name);
			return r;
		}
		strbuf_release(&name);
		m->data = nl + 1;
		m->size = m->src_size = len;
		m->note = xstrdup("the database");
		s = nl + 1 + len + 1;
	}
	return 0;
}

/* The link-time addresses of image's sampled offsets and stack frames. */
static uint64_t *image_addrs(const struct tally_db *db, struct tally_resolver *r, uint32_t image,
			     size_t *n)
{
	uint64_t *a = NULL;
	size_t na = 0, cap = 0;
	for (size_t i = 0; i < db->nentries + db->nframe_tab; i++) {
		uint32_t im = i < db->nentries ? db->entries[i].image
					       : db->frame_tab[i - db->nentries].image;
		uint64_t off = i < db->nentries ? db->entries[i].offset
						: db->frame_tab[i - db->nentries].offset;
		uint64_t addr;
		if (im != image || tally_resolver_addr(r, image, off, &addr))
			continue;
		GROW(a, cap, na + 2);
		a[na++] = addr;
		if (i >= db->nentries && addr)
			a[na++] = addr - 1; /* a return address: the call before it */
	}
	tally_qsort(a, na, sizeof(*a), tally_cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < na; i++)
		if (!u || a[u - 1] != a[i])
			a[u++] = a[i];
	*n = u;
	return a;
}

/* The debuginfod client's cache entry for a build-id (libdebuginfod keeps
 * BUILDID/debuginfo), when there is one: add_file checks that it is that
 * build's. Allocated, or NULL. */
static char *debuginfod_cached(const char *build_id)
{
	struct strbuf p = STRBUF_INIT;
	const char *c = getenv("DEBUGINFOD_CACHE_PATH"), *x = getenv("XDG_CACHE_HOME"),
		   *h = getenv("HOME");
	if (c && *c)
		strbuf_addf(&p, "%s/%s/debuginfo", c, build_id);
	else if (x && *x)
		strbuf_addf(&p, "%s/debuginfod_client/%s/debuginfo", x, build_id);
	else if (h && *h)
		strbuf_addf(&p, "%s/.cache/debuginfod_client/%s/debuginfo", h, build_id);
	if (p.len && access(p.buf, F_OK) == 0)
		return strbuf_detach(&p);
	strbuf_release(&p);
	return NULL;
}

/* What a file to put in must be: the id it is checked against from its
 * descriptor, and how it is opened. */
struct want {
	const char *id_kind, *id; /* "build-id" or "xxh64" and its hex; anything else: no id */
	/* a debug file found by .gnu_debuglink: the image it belongs to (else -1) */
	int crc_fd;
	/* a link at its path is not followed (an image at its recorded path) */
	bool nofollow;
	/* with no id, copied as found (the kernel's files, from system directories) */
	bool unverified_ok;
	bool quiet;               /* another file there is no error, only not taken (a cache) */
};

/* The CRC an image's .gnu_debuglink section gives its debug file. */
static bool debuglink_crc(int fd, uint32_t *crc)
{
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t shstrndx;
	bool ok = false;
	if (!e || elf_getshdrstrndx(e, &shstrndx))
		goto out;
	Elf_Scn *scn = NULL;
	while (!ok && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *nm;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(nm = elf_strptr(e, shstrndx, sh.sh_name)) || strcmp(nm, ".gnu_debuglink"))
			continue;
		Elf_Data *d = elf_rawdata(scn, NULL);
		const unsigned char *b = d ? d->d_buf : NULL;
		size_t nl = b ? strnlen((const char *)b, d->d_size) : 0;
		size_t at = (nl + 4) & ~(size_t)3;
		if (!b || nl == d->d_size || at + 4 > d->d_size)
			break;
		bool le = elf_getident(e, NULL)[EI_DATA] == ELFDATA2LSB;
		*crc = le ? (uint32_t)b[at] | (uint32_t)b[at + 1] << 8 | (uint32_t)b[at + 2] << 16 |
				       (uint32_t)b[at + 3] << 24
			  : (uint32_t)b[at + 3] | (uint32_t)b[at + 2] << 8 |
				       (uint32_t)b[at + 1] << 16 | (uint32_t)b[at] << 24;
		ok = true;
	}
out:
	if (e)
		elf_end(e);
	return ok;
}

/* The CRC-32 of an open file (zlib's, the one .gnu_debuglink gives), read with pread. */
static int crc_of_fd(int fd, uint32_t *out)
{
	unsigned char *buf = xmalloc(1 << 16);
	uLong crc = crc32(0L, Z_NULL, 0);
	int r = 0;
	for (off_t off = 0;;) {
		ssize_t k = pread(fd, buf, 1 << 16, off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			r = -errno;
		if (k <= 0)
			break;
		crc = crc32(crc, buf, (uInt)k);
		off += k;
	}
	free(buf);
	*out = (uint32_t)crc;
	return r;
}

/* Whether the file open as fd is the one wanted: 1 yes; 0 another file, -1
 * no id to check it by, -errno unreadable; *why says which (for messages). */
static int verify(int fd, const char *src, const struct want *wt, struct strbuf *why)
{
	bool bid = !strcmp(wt->id_kind, "build-id"), hash = !strcmp(wt->id_kind, "xxh64");
	if (!bid && wt->crc_fd >= 0) {
		uint32_t want, got;
		if (!debuglink_crc(wt->crc_fd, &want)) {
			strbuf_addstr(why, "its image names no CRC for it");
			return -1;
		}
		int k = crc_of_fd(fd, &got);
		if (k)
			return tally_seterr(k, "cannot read '%s': %s", src, strerror(-k));
		if (got != want) {
			strbuf_addf(why, "its CRC is %08x, the image's .gnu_debuglink says %08x",
				    got, want);
			return 0;
		}
		return 1;
	}
	if (!bid && !hash) {
		strbuf_addstr(why, "no id was recorded to verify it by");
		return -1;
	}
	struct tally_elf_info info;
	int k = tally_elf_info_fd(fd, src, hash ? 2 : 0, &info);
	if (k)
		return k;
	if (!info.is_elf && wt->unverified_ok) {
		/* a compressed module (.ko.xz, .ko.zst): its build-id is inside */
		strbuf_addstr(why, "not an ELF file (a compressed module) to read a build-id from");
		return -1;
	}
	char hex[160] = "";
	if (bid && info.build_id_len)
		tally_hex(info.build_id, info.build_id_len, hex);
	else if (hash)
		snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
	if (strcmp(hex, wt->id)) {
		strbuf_addf(why, "it has %s %s, the profile recorded %s",
			    bid ? "build-id" : "content hash", *hex ? hex : "(none)", wt->id);
		return 0;
	}
	return 1;
}

/* Opens src once, checks from that descriptor that it is the file wanted, and
 * plans it as member name, to be copied (or stripped) from that descriptor. A
 * file another one has taken the place of since the resolver looked is an
 * error ("changed"); one that cannot be verified, or a link where none may be,
 * is left out with a warning. *fd_out (may be NULL) gets the descriptor kept
 * (or -1 when the file is not taken). */
static int add_file(struct tally_archive_plan *p, const char *name, enum tally_archive_role role,
		    const char *src, const char *note, bool strip, const struct tally_db *db,
		    struct tally_resolver *r, uint32_t image, const struct want *wt,
		    struct tally_warnings *w, int *fd_out)
{
	if (fd_out)
		*fd_out = -1;
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->m[i].name, name))
			return 0; /* two images share the file */
	struct stat st;
	/* a regular file only (a FIFO put there meanwhile never hangs the archive) */
	int fd = tally_open_regular(AT_FDCWD, src, wt->nofollow ? 0 : TALLY_OPEN_FOLLOW, 0, &st);
	if (fd == -ELOOP && wt->nofollow) {
		tally_warnings_add(
			w,
			"'%s' (%s) is not archived: it is a symbolic link now, not the file the kernel recorded (not followed)",
			src, note);
		return 0;
	}
	if (fd < 0 && wt->quiet)
		return 0;
	if (fd < 0)
		return tally_seterr(fd, "cannot read '%s' (%s): %s", src, note, tally_errmsg());
	struct strbuf why = STRBUF_INIT;
	int v = verify(fd, src, wt, &why);
	if (v < 0 && v != -1) {
		close(fd);
		strbuf_release(&why);
		return v;
	}
	if (v == -1 && !wt->unverified_ok) {
		tally_warnings_add(w, "'%s' (%s) is not archived: %s", src, note, why.buf);
		v = 0;
	} else if (v == 0 && !wt->quiet) {
		int e = tally_seterr(-EAGAIN,
				     "'%s' (%s) changed while it was archived: %s (archive again)",
				     src, note, why.buf);
		close(fd);
		strbuf_release(&why);
		return e;
	}
	strbuf_release(&why);
	if (v == 0) {
		close(fd);
		return 0;
	}
	struct tally_archive_member *m = add_member(p, name, role);
	if (!m) {
		close(fd);
		return 0;
	}
	m->fd = fd;
	if (fd_out)
		*fd_out = fd;
	m->src = xstrdup(src);
	m->note = xstrdup(note);
	m->size = m->src_size = (uint64_t)st.st_size;
	if (strip) {
		m->addrs = image_addrs(db, r, image, &m->naddrs);
		struct tally_strip_stats ss;
		int k = tally_strip_debug(fd, src, m->addrs, m->naddrs, -1, &ss);
		if (k == 0) {
			m->strip = true;
			m->size = ss.size;
			free(m->note);
			struct strbuf n = STRBUF_INIT;
			char a[32], b[32];
			tally_format_size(ss.size, a, sizeof(a));
			tally_format_size(m->src_size, b, sizeof(b));
			strbuf_addf(&n, "%s; %zu of %zu compile units kept: %s instead of %s", note,
				    ss.kept, ss.units, a, b);
			m->note = strbuf_detach(&n);
		} else if (k != -ENOTSUP) {
			return k;
		}
	}
	return 0;
}

int tally_archive_plan(struct tally_archive_plan *p, const struct tally_db *db,
		       struct tally_resolver *r, const struct tally_archive_opts *o,
		       struct tally_warnings *w)
{
	memset(p, 0, sizeof(*p));
	int ret = plan_db(p, db);
	struct tally_resolver_file f[256];
	struct strbuf name = STRBUF_INIT, note = STRBUF_INIT;
	for (uint32_t i = 0; !ret && i < db->nimages; i++) {
		const struct tally_db_image *di = &db->images[i];
		bool kernel = !strcmp(di->kind, "kernel");
		if (!kernel && strcmp(di->kind, "exec") && strcmp(di->kind, "lib"))
			continue; /* JIT, nomap and the vDSO: copies are in the database */
		if (o->exclude_dependent && strcmp(di->kind, "exec"))
			continue;
		if (kernel && o->no_debug)
			/* vmlinux and modules give only kernel lines; functions come from
			 * kernel.syms */
			continue;
		size_t nf = tally_resolver_files(r, i, f, ARRAY_SIZE(f));
		bool bid = !strcmp(di->id_kind, "build-id");
		bool have_debug = false;
		int image_fd = -1; /* the image's, for its debug file's CRC */
		char *recorded = xstrdup(di->path);
		char *deleted = strstr(recorded, " (deleted)");
		if (deleted)
			*deleted = '\0';
		for (size_t k = 0; k < nf && !ret; k++) {
			const struct tally_resolver_file *x = &f[k];
			bool xbid = !strcmp(x->id_kind, "build-id") && strlen(x->id) > 2;
			strbuf_reset(&name);
			strbuf_reset(&note);
			enum tally_archive_role role;
			bool strip = false;
			struct want wt = { .id_kind = x->id_kind,
					   .id = x->id,
					   .crc_fd = -1,
					   .unverified_ok = kernel };
			switch (x->role) {
			case TALLY_RFILE_IMAGE:
				tally_db_image_member(di, &name);
				role = TALLY_AR_IMAGE;
				strbuf_addf(&note, "image %s", di->name);
				strip = o->strip && bid;
				/* the kernel gave the file's own name: a link there now is not it
				 */
				wt.nofollow = !strcmp(x->path, recorded);
				break;
			case TALLY_RFILE_DEBUG:
				have_debug = true;
				if (o->no_debug)
					continue;
				role = TALLY_AR_DEBUG;
				strbuf_addf(&note, "debug file of %s", di->name);
				wt.crc_fd = image_fd;
				if (xbid) {
					strbuf_addf(&name, "debug/.build-id/%.2s/%s.debug", x->id,
						    x->id + 2);
					strip = o->strip;
				} else {
					/* found by its .gnu_debuglink (and CRC): next to the
					 * archive's copy of the image */
					tally_db_image_member(di, &name);
					char *sl = strrchr(name.buf, '/');
					name.len = (size_t)(sl + 1 - name.buf);
					name.buf[name.len] = '\0';
					strbuf_addstr(&name, tally_basename(x->path));
					if (!tally_archive_name_ok(name.buf)) {
						tally_warnings_add(
							w,
							"the debug file '%s' of %s is not archived: its name cannot be an archive member's",
							x->path, di->name);
						continue;
					}
				}
				break;
			case TALLY_RFILE_VMLINUX:
				role = TALLY_AR_VMLINUX;
				strbuf_addstr(&name, "kernel/vmlinux");
				strbuf_addstr(&note, "the kernel's image");
				strip = o->strip;
				break;
			case TALLY_RFILE_MODULE:
				role = TALLY_AR_MODULE;
				strbuf_addstr(&name, "kernel/modules/");
				tally_db_add_safe_name(&name, tally_basename(x->path));
				strbuf_addf(&note, "module %s", x->module);
				break;
			case TALLY_RFILE_MODULE_DEBUG:
			default:
				if (!xbid) {
					tally_warnings_add(
						w,
						"the debug file '%s' of module %s is not archived: the module has no build-id to find it by",
						x->path, x->module);
					continue;
				}
				role = TALLY_AR_DEBUG;
				strbuf_addf(&name, "debug/.build-id/%.2s/%s.debug", x->id,
					    x->id + 2);
				strbuf_addf(&note, "debug file of module %s", x->module);
				break;
			}
			int fd;
			ret = add_file(p, name.buf, role, x->path, note.buf, strip, db, r, i, &wt,
				       w, &fd);
			if (x->role == TALLY_RFILE_IMAGE)
				image_fd = fd;
		}
		free(recorded);
		if (ret)
			break;
		if (!nf && !kernel) {
			const char *why = tally_resolver_note(r, i);
			tally_warnings_add(w, "%s '%s' is not archived: %s", di->kind, di->path,
					   why ? why : "its file was not found");
			continue;
		}
		/* a debuginfod download already in its cache serves without the network */
		if (!kernel && bid && !have_debug && !o->no_debug &&
		    !tally_resolver_has_dwarf(r, i)) {
			char *c = debuginfod_cached(di->id);
			if (c) {
				strbuf_reset(&name);
				strbuf_reset(&note);
				strbuf_addf(&name, "debug/.build-id/%.2s/%s.debug", di->id,
					    di->id + 2);
				strbuf_addf(&note, "debug file of %s (debuginfod cache)", di->name);
				/* the cache may hold anything: only that build's is taken */
				struct want wt = { .id_kind = "build-id",
						   .id = di->id,
						   .crc_fd = -1,
						   .quiet = true };
				ret = add_file(p, name.buf, TALLY_AR_DEBUG, c, note.buf, o->strip,
					       db, r, i, &wt, w, NULL);
				free(c);
			}
		}
	}
	strbuf_release(&name);
	strbuf_release(&note);
	for (size_t i = 0; i < p->n; i++)
		p->total += p->m[i].size;
	if (ret)
		tally_archive_plan_release(p);
	return ret;
}

/* ---- writing ---- */

struct writer {
	struct tally_archive_plan *p;
	const char *path;
	tally_archive_progress_fn fn;
	void *ctx;
	uint64_t done;
	double last;
	char buf[1 << 20];
};

static void progress(struct writer *w, const char *member, uint64_t add)
{
	w->done += add;
	if (!w->fn)
		return;
	double now = tally_now_mono();
	if (now - w->last < 0.1 && w->done < w->p->total)
		return;
	w->last = now;
	w->fn(w->ctx, w->done, w->p->total, member);
}

static int write_err(const char *path, int e)
{
	if (e == ENOSPC || e == EDQUOT)
		return tally_seterr(
			-e,
			"cannot write '%s': %s (free some space, or write the archive elsewhere)",
			path, strerror(e));
	return tally_seterr(-e, "cannot write '%s': %s", path, strerror(e));
}

/* Creates the directories above name under dirfd. */
int tally_ar_mkparents(int dirfd, const char *name)
{
	char *d = xstrdup(name);
	int r = 0;
	for (char *s = strchr(d, '/'); s && !r; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdirat(dirfd, d, 0700) < 0 && errno != EEXIST)
			r = -errno;
		else {
			struct stat st;
			if (fstatat(dirfd, d, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
				r = -ENOTDIR;
		}
		*s = '/';
	}
	free(d);
	return r;
}

static int changed(const struct tally_archive_member *m)
{
	return tally_seterr(-EAGAIN, "'%s' (%s) changed while it was archived (archive again)",
			    m->src, m->note);
}

/* Reads a member's source (its file, its stripped copy or its bytes) in
 * pieces, hashing them; out(ctx, data, n) gets each piece (NULL: hash only). */
static int read_member(struct writer *w, struct tally_archive_member *m,
		       int (*out)(void *, const void *, size_t), void *octx, unsigned char sum[16])
{
	struct tally_ar_sum h;
	tally_ar_sum_init(&h);
	if (m->data) {
		tally_ar_sum_update(&h, m->data, (size_t)m->size);
		int r = out ? out(octx, m->data, (size_t)m->size) : 0;
		if (r)
			return r;
		progress(w, m->name, m->size);
		tally_ar_sum_final(&h, sum);
		return 0;
	}
	/* the descriptor the plan verified (or our stripped copy of it), never
	 * the path again: what is at the path now may be another file */
	const char *src = m->tmp ? m->tmp : m->src;
	int fd = m->tmp ? m->tmpfd : m->fd;
	if (fd < 0)
		return tally_seterr(-EBADF, "cannot read '%s' (%s): not opened", src, m->note);
	uint64_t got = 0;
	int r = 0;
	for (;;) {
		ssize_t k = pread(fd, w->buf, sizeof(w->buf), (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = tally_seterr(-errno, "cannot read '%s' (%s): %s", src, m->note,
					 strerror(errno));
			break;
		}
		if (!k)
			break;
		got += (uint64_t)k;
		if (got > m->size) {
			r = changed(m);
			break;
		}
		tally_ar_sum_update(&h, w->buf, (size_t)k);
		if (out && (r = out(octx, w->buf, (size_t)k)))
			break;
		progress(w, m->name, (uint64_t)k);
	}
	if (!r && got != m->size)
		r = changed(m);
	if (!r)
		tally_ar_sum_final(&h, sum);
	return r;
}

/* Makes the stripped copies (into dir, under their member names when
 * by_name, else numbered) and measures them again. */
static int make_stripped(struct writer *w, int dirfd, const char *dir, bool by_name)
{
	for (size_t i = 0; i < w->p->n; i++) {
		struct tally_archive_member *m = &w->p->m[i];
		if (!m->strip)
			continue;
		struct strbuf rel = STRBUF_INIT;
		if (by_name)
			strbuf_addstr(&rel, m->name);
		else
			strbuf_addf(&rel, "strip-%zu", i);
		int r = tally_ar_mkparents(dirfd, rel.buf);
		int fd = r ? -1
			   : openat(dirfd, rel.buf,
				    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = write_err(dir, r ? -r : errno);
			strbuf_release(&rel);
			return r;
		}
		struct strbuf full = STRBUF_INIT;
		strbuf_addf(&full, "%s/%s", dir, rel.buf);
		free(m->tmp);
		m->tmp = strbuf_detach(&full);
		m->tmpfd = fd; /* read back from here, never by its name */
		strbuf_release(&rel);
		struct tally_strip_stats ss;
		r = tally_strip_debug(m->fd, m->src, m->addrs, m->naddrs, fd, &ss);
		if (r == -ENOTSUP)
			r = changed(m);
		if (r)
			return r;
		if (ss.size != m->size)
			return changed(m);
	}
	return 0;
}

struct fdout {
	int fd;
	const char *path;
};

static int fd_out(void *ctx, const void *p, size_t n)
{
	struct fdout *o = ctx;
	int r = tally_write_all(o->fd, p, n);
	return r ? write_err(o->path, -r) : 0;
}

/* Writes the staging directory: every member (copied and hashed in one pass,
 * stripped copies made in place), then the MANIFEST. */
static int write_dir(struct writer *w, const char *staging)
{
	int dirfd = open(staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return write_err(w->path, errno);
	int r = make_stripped(w, dirfd, staging, true);
	for (size_t i = 0; !r && i < w->p->n; i++) {
		struct tally_archive_member *m = &w->p->m[i];
		if (m->strip) {
			r = read_member(w, m, NULL, NULL, m->sum);
			m->have_sum = !r;
			continue;
		}
		r = tally_ar_mkparents(dirfd, m->name);
		int fd = r ? -1
			   : openat(dirfd, m->name,
				    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = write_err(w->path, r ? -r : errno);
			break;
		}
		struct fdout o = { fd, w->path };
		r = read_member(w, m, fd_out, &o, m->sum);
		if (close(fd) < 0 && !r)
			r = write_err(w->path, errno);
		m->have_sum = !r;
	}
	if (!r) {
		struct strbuf man = STRBUF_INIT;
		tally_manifest_format(w->p->m, w->p->n, &man);
		int fd = openat(dirfd, TALLY_ARCHIVE_MANIFEST,
				O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || tally_write_all(fd, man.buf, man.len) || close(fd) < 0)
			r = write_err(w->path, errno ? errno : EIO);
		strbuf_release(&man);
	}
	if (!r && syncfs(dirfd) < 0)
		r = write_err(w->path, errno);
	close(dirfd);
	return r;
}

struct tarout {
	struct archive *a;
	const char *path;
};

static int tar_err(struct tarout *t)
{
	int e = archive_errno(t->a);
	if (e == ENOSPC || e == EDQUOT)
		return write_err(t->path, e);
	return tally_seterr(-(e > 0 ? e : EIO), "cannot write '%s': %s", t->path,
			    archive_error_string(t->a));
}

static int tar_out(void *ctx, const void *p, size_t n)
{
	struct tarout *t = ctx;
	la_ssize_t k = archive_write_data(t->a, p, n);
	return k < 0 || (size_t)k != n ? tar_err(t) : 0;
}

static int tar_entry(struct tarout *t, const char *name, uint64_t size, time_t mtime)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0600); /* as written into a directory archive */
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_mtime(e, mtime, 0);
	int r = archive_write_header(t->a, e) != ARCHIVE_OK ? tar_err(t) : 0;
	archive_entry_free(e);
	return r;
}

/* Writes the tarball into fd: the stripped copies are made first in a scratch
 * directory (scratch: its template, made unique; removed by the caller), every
 * member hashed for the MANIFEST, which goes first; then each member, hashed
 * again as it is written (a file that changed meanwhile is an error). */
static int write_tar(struct writer *w, int fd, enum tally_archive_kind kind, char *scratch,
		     bool *made_scratch, int *scratch_slot)
{
	int r = 0;
	bool any_strip = false;
	for (size_t i = 0; i < w->p->n; i++)
		any_strip = any_strip || w->p->m[i].strip;
	if (any_strip) {
		if (!mkdtemp(scratch))
			return write_err(w->path, errno);
		*made_scratch = true;
		*scratch_slot = tally_ar_hold_path(scratch);
		int dirfd = open(scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dirfd < 0)
			return write_err(w->path, errno);
		r = make_stripped(w, dirfd, scratch, false);
		close(dirfd);
		if (r)
			return r;
	}
	/* the first pass: checksums for the MANIFEST (not counted as progress) */
	tally_archive_progress_fn fn = w->fn;
	w->fn = NULL;
	for (size_t i = 0; !r && i < w->p->n; i++) {
		r = read_member(w, &w->p->m[i], NULL, NULL, w->p->m[i].sum);
		w->p->m[i].have_sum = !r;
	}
	w->fn = fn;
	w->done = 0;
	if (r)
		return r;
	struct tarout t = { archive_write_new(), w->path };
	if (!t.a)
		return tally_seterr(-ENOMEM, "libarchive: cannot start writing '%s'", w->path);
	int ok = archive_write_set_format_pax_restricted(t.a);
	if (ok == ARCHIVE_OK && kind == TALLY_ARCHIVE_TAR_GZ)
		ok = archive_write_add_filter_gzip(t.a);
	if (ok == ARCHIVE_OK && kind == TALLY_ARCHIVE_TAR_ZST)
		ok = archive_write_add_filter_zstd(t.a);
	if (ok == ARCHIVE_OK)
		ok = archive_write_open_fd(t.a, fd);
	if (ok != ARCHIVE_OK) {
		r = tally_seterr(-EINVAL, "cannot write '%s': libarchive: %s", w->path,
				 archive_error_string(t.a));
		archive_write_free(t.a);
		return r;
	}
	time_t now = (time_t)tally_now_wall();
	struct strbuf man = STRBUF_INIT;
	tally_manifest_format(w->p->m, w->p->n, &man);
	r = tar_entry(&t, TALLY_ARCHIVE_MANIFEST, man.len, now);
	if (!r)
		r = tar_out(&t, man.buf, man.len);
	strbuf_release(&man);
	for (size_t i = 0; !r && i < w->p->n; i++) {
		struct tally_archive_member *m = &w->p->m[i];
		unsigned char again[16];
		r = tar_entry(&t, m->name, m->size, now);
		if (!r)
			r = read_member(w, m, tar_out, &t, again);
		if (!r && memcmp(again, m->sum, 16))
			r = changed(m);
	}
	if (!r && archive_write_close(t.a) != ARCHIVE_OK)
		r = tar_err(&t);
	archive_write_free(t.a);
	if (!r && fsync(fd) < 0)
		r = write_err(w->path, errno);
	return r;
}

static int rename_noreplace(const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* a filesystem without RENAME_NOREPLACE: a link for a file, rename for a directory */
	struct stat st;
	if (lstat(to, &st) == 0)
		return -EEXIST;
	if (link(from, to) == 0)
		return unlink(from) < 0 ? -errno : 0;
	return rename(from, to) < 0 ? -errno : 0;
}

int tally_archive_write(struct tally_archive_plan *p, const char *path,
			tally_archive_progress_fn fn, void *ctx)
{
	enum tally_archive_kind kind = tally_archive_kind_of(path);
	struct stat st;
	if (lstat(path, &st) == 0)
		return tally_seterr(
			-EEXIST, "'%s' already exists (remove it, or choose another name)", path);
	const char *base = tally_basename(path);
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return tally_seterr(
			-EINVAL,
			"'%s' cannot be an archive's name (name a file or directory to create)",
			path);
	struct strbuf dir = STRBUF_INIT, staging = STRBUF_INIT, scratch = STRBUF_INIT,
		      pre1 = STRBUF_INIT, pre2 = STRBUF_INIT;
	strbuf_add(&dir, path, (size_t)(base - path));
	if (!dir.len)
		strbuf_addstr(&dir, "./");
	/* what an earlier writer of path that was killed left (staging.c) */
	strbuf_addf(&pre1, ".%s.tmp-", base);
	strbuf_addf(&pre2, ".%s.strip-", base);
	const char *prefixes[] = { pre1.buf, pre2.buf };
	tally_ar_tidy(dir.buf, prefixes, ARRAY_SIZE(prefixes));
	/* unpredictable names, created exclusively: 0700 and 0600; our pid in
	 * them tells a later run whether we are still at work */
	strbuf_addf(&staging, "%s%s%d-XXXXXX", dir.buf, pre1.buf, (int)getpid());
	strbuf_addf(&scratch, "%s%s%d-XXXXXX", dir.buf, pre2.buf, (int)getpid());
	struct writer *w = xcalloc(1, sizeof(*w));
	*w = (struct writer){ .p = p, .path = path, .fn = fn, .ctx = ctx };
	int r;
	bool made = false, made_scratch = false;
	int slot = -1, scratch_slot = -1;
	if (kind == TALLY_ARCHIVE_DIR) {
		if (!mkdtemp(staging.buf)) {
			r = tally_seterr(-errno, "cannot create '%s': %s in '%s'", path,
					 strerror(errno), dir.buf);
		} else {
			made = true;
			slot = tally_ar_hold_path(staging.buf);
			r = write_dir(w, staging.buf);
		}
	} else {
		int fd = mkostemp(staging.buf, O_CLOEXEC);
		if (fd < 0) {
			r = tally_seterr(-errno, "cannot create '%s': %s in '%s'", path,
					 strerror(errno), dir.buf);
		} else {
			made = true;
			slot = tally_ar_hold_path(staging.buf);
			r = write_tar(w, fd, kind, scratch.buf, &made_scratch, &scratch_slot);
			if (close(fd) < 0 && !r)
				r = write_err(path, errno);
		}
	}
	if (!r) {
		int k = rename_noreplace(staging.buf, path);
		if (k == -EEXIST || k == -ENOTEMPTY)
			r = tally_seterr(
				k,
				"'%s' appeared while the archive was written (remove it, or choose another name)",
				path);
		else if (k)
			r = tally_seterr(k, "cannot rename the archive into '%s': %s", path,
					 strerror(-k));
		else {
			int dfd = open(dir.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd >= 0) {
				fsync(dfd);
				close(dfd);
			}
		}
	}
	if (r && made)
		tally_remove_tree(staging.buf);
	tally_ar_release(slot);
	for (size_t i = 0; i < p->n; i++) {
		free(p->m[i].tmp);
		p->m[i].tmp = NULL;
		if (p->m[i].tmpfd >= 0)
			close(p->m[i].tmpfd);
		p->m[i].tmpfd = -1;
	}
	if (made_scratch)
		tally_remove_tree(scratch.buf);
	tally_ar_release(scratch_slot);
	free(w);
	strbuf_release(&dir);
	strbuf_release(&staging);
	strbuf_release(&scratch);
	strbuf_release(&pre1);
	strbuf_release(&pre2);
	return r;
}
