/* Reading archives (archive.h): a directory in place, a tarball unpacked by
 * libarchive into a private temporary directory. Nothing but regular files
 * under the names an archive may hold is ever created, always relative to
 * that directory (openat, no links followed); every member is checked against
 * the MANIFEST's sizes and checksums before the database is read. */
#define _GNU_SOURCE
#include "tally/archive.h"
#include "tally/util.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/archive/internal.h"

#define ALTERED "a damaged or altered archive: make it again with 'tally archive'"
#define MANIFEST_MAX (16u << 20)
/* Bytes no byte of the archive stands for, which are read (hashed) all the
 * same: the holes of sparse members (tally writes none; a tarball of an
 * archive's directory may have a few), and what a compressed tarball unpacks
 * to beyond RATIO times its bytes read so far. A member past either is
 * refused before it is read: 10 KiB that say 1 PiB would take hours to hash. */
#define HOLES_MAX ((uint64_t)1 << 30)
#define UNPACK_FREE ((uint64_t)1 << 30)
#define UNPACK_RATIO 1024

static const char *strip_prefix(const char *path)
{
	return !strncmp(path, "archive:", 8) ? path + 8 : path;
}

bool tally_archive_is(const char *path)
{
	if (!strncmp(path, "archive:", 8))
		return true;
	struct stat st;
	if (stat(path, &st) < 0)
		return false;
	if (S_ISDIR(st.st_mode)) {
		struct strbuf m = STRBUF_INIT;
		strbuf_addf(&m, "%s/%s", path, TALLY_ARCHIVE_MANIFEST);
		bool is = lstat(m.buf, &st) == 0 && S_ISREG(st.st_mode);
		strbuf_release(&m);
		return is;
	}
	if (!S_ISREG(st.st_mode))
		return false;
	unsigned char b[512] = { 0 };
	int fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, NULL);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
	if (fd >= 0)
		close(fd);
	if (n < 6)
		return false;
	return (b[0] == 0x1f && b[1] == 0x8b) ||                                  /* gzip */
	       (b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) ||  /* zstd */
	       !memcmp(b, "\xfd" "7zXZ", 6) || !memcmp(b, "BZh", 3) ||            /* xz, bzip2 */
	       (n == 512 && !memcmp(b + 257, "ustar", 5));                         /* tar */
}

/* A member's name as printable text (control characters as '?'), for errors. */
static const char *shown(const char *name, char *buf, size_t n)
{
	size_t i = 0;
	for (; name && name[i] && i + 4 < n; i++)
		buf[i] = (unsigned char)name[i] < ' ' || name[i] == 0x7f ? '?' : name[i];
	buf[i] = '\0';
	if (name && name[i])
		strcpy(buf + (i > n - 4 ? n - 4 : i), "...");
	return buf;
}

static int refuse(const char *apath, const char *member, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int refuse(const char *apath, const char *member, const char *fmt, ...)
{
	char nb[240];
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	int r = tally_seterr(-EINVAL, "'%s': member '%s' %s", apath, shown(member, nb, sizeof(nb)),
			     sb.buf);
	strbuf_release(&sb);
	return r;
}

/* Whether a directory may be in an archive: something a member's name may be under. */
static bool dir_ok(const char *name)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, name);
	while (sb.len && sb.buf[sb.len - 1] == '/')
		sb.buf[--sb.len] = '\0';
	strbuf_addstr(&sb, "/x");
	bool ok = tally_archive_name_ok(sb.buf);
	strbuf_release(&sb);
	return ok;
}

static bool has_dotdot(const char *name)
{
	for (const char *p = name; *p;) {
		size_t l = strcspn(p, "/");
		if (l == 2 && p[0] == '.' && p[1] == '.')
			return true;
		p += l + (p[l] == '/');
	}
	return false;
}

/* Whether a link at member name with this target would point outside the
 * archive's directory. */
static bool link_outside(const char *name, const char *target, bool hard)
{
	if (!target || target[0] == '/')
		return true;
	long depth = 0;
	if (!hard)
		for (const char *c = name; *c; c++)
			depth += *c == '/';
	for (const char *p = target; *p;) {
		size_t l = strcspn(p, "/");
		if (l == 2 && p[0] == '.' && p[1] == '.')
			depth--;
		else if (l && !(l == 1 && p[0] == '.'))
			depth++;
		if (depth < 0)
			return true;
		p += l + (p[l] == '/');
	}
	return false;
}

static int read_all_fd(int fd, struct strbuf *sb, size_t max)
{
	char buf[65536];
	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (!k)
			return 0;
		if (sb->len + (size_t)k > max)
			return -EFBIG;
		strbuf_add(sb, buf, (size_t)k);
	}
}

/* What was found in the archive: name, size and checksum of each file. */
struct found {
	struct tally_manifest got;
	struct tally_hidx idx;
	struct tally_manifest man;
	struct tally_hidx man_idx;
	bool have_man;
	uint64_t holes;    /* bytes of holes (sparse members, sparse files) so far */
	uint64_t unpacked; /* bytes of members' data unpacked so far */
};

/* A member's holes, counted before they are read: more than HOLES_MAX in the
 * archive are refused. */
static int add_holes(const char *apath, const char *name, struct found *f, uint64_t size,
		     uint64_t holes)
{
	if (holes <= HOLES_MAX && f->holes <= HOLES_MAX - holes) {
		f->holes += holes;
		return 0;
	}
	char a[32], b[32], c[32];
	tally_format_size(size, a, sizeof(a));
	tally_format_size(holes, b, sizeof(b));
	tally_format_size(HOLES_MAX, c, sizeof(c));
	return refuse(
		apath, name,
		"is %s with %s of holes (sparse): more than the %s an archive may have in all (refused unread: %s)",
		a, b, c, ALTERED);
}

static void found_release(struct found *f)
{
	tally_manifest_release(&f->got);
	tally_hidx_release(&f->idx);
	tally_manifest_release(&f->man);
	tally_hidx_release(&f->man_idx);
}

static const struct tally_manifest_entry *man_find(const struct found *f, const char *name)
{
	uint32_t i = tally_hidx_get(&f->man_idx, tally_hash_bytes(name, strlen(name), 0), name,
				    tally_ar_entry_eq, &f->man);
	return i == TALLY_HIDX_NONE ? NULL : &f->man.e[i];
}

static int check_one(const char *apath, const struct found *f, const struct tally_manifest_entry *g)
{
	const struct tally_manifest_entry *e = man_find(f, g->name);
	if (!e)
		return refuse(apath, g->name, "is not in the MANIFEST (%s)", ALTERED);
	if (e->size != g->size)
		return refuse(apath, g->name,
			      "is %" PRIu64 " bytes but the MANIFEST says %" PRIu64 " (%s)",
			      g->size, e->size, ALTERED);
	if (memcmp(e->sum, g->sum, 16)) {
		char a[40], b[40];
		tally_ar_hex16(g->sum, a);
		tally_ar_hex16(e->sum, b);
		return refuse(apath, g->name, "has checksum %s but the MANIFEST says %s (%s)", a, b,
			      ALTERED);
	}
	return 0;
}

static int load_manifest(const char *apath, struct found *f, const char *text, size_t len)
{
	struct strbuf what = STRBUF_INIT;
	strbuf_addf(&what, "%s:%s", apath, TALLY_ARCHIVE_MANIFEST);
	int r = tally_manifest_parse(&f->man, text, len, what.buf);
	strbuf_release(&what);
	if (r)
		return r;
	for (size_t i = 0; i < f->man.n; i++)
		tally_hidx_put(&f->man_idx,
			       tally_hash_bytes(f->man.e[i].name, strlen(f->man.e[i].name), 0),
			       (uint32_t)i);
	f->have_man = true;
	return 0;
}

/* Everything found against the MANIFEST, and the MANIFEST against what was found. */
static int check_all(const char *apath, struct found *f)
{
	if (!f->have_man)
		return tally_seterr(
			-EINVAL,
			"'%s' is not a tally archive: it has no %s (make one with 'tally archive')",
			apath, TALLY_ARCHIVE_MANIFEST);
	for (size_t i = 0; i < f->got.n; i++) {
		int r = check_one(apath, f, &f->got.e[i]);
		if (r)
			return r;
	}
	for (size_t i = 0; i < f->man.n; i++) {
		const char *n = f->man.e[i].name;
		if (tally_hidx_get(&f->idx, tally_hash_bytes(n, strlen(n), 0), n, tally_ar_entry_eq,
				   &f->got) == TALLY_HIDX_NONE) {
			char nb[240];
			return tally_seterr(
				-EINVAL,
				"'%s': the MANIFEST lists '%s', which the archive lacks (%s)",
				apath, shown(n, nb, sizeof(nb)), ALTERED);
		}
	}
	return 0;
}

static void add_found(struct found *f, const char *name, uint64_t size, const unsigned char *sum)
{
	GROW(f->got.e, f->got.alloc, f->got.n + 1);
	f->got.e[f->got.n] =
		(struct tally_manifest_entry){ xstrdup(name), TALLY_AR_DB, size, { 0 } };
	memcpy(f->got.e[f->got.n].sum, sum, 16);
	tally_hidx_put(&f->idx, tally_hash_bytes(name, strlen(name), 0), (uint32_t)f->got.n++);
}

static const unsigned char zeros[65536];

/* The checksum goes over a sparse member's holes as zeros. */
static void hash_zeros(struct tally_ar_sum *h, uint64_t n)
{
	while (n) {
		size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
		tally_ar_sum_update(h, zeros, k);
		n -= k;
	}
}

/* ---- tarballs ---- */

static bool all_zero(const unsigned char *p, size_t n)
{
	return !n || (!p[0] && !memcmp(p, p + 1, n - 1));
}

/* One regular member into rootfd/name, hashed (holes of sparse members as
 * zeros, holes counted with f's: reserved of them were counted from its
 * header already); blocks of zeros are left as holes in the file written. */
static int extract_file(struct archive *a, const char *apath, int rootfd, const char *name,
			uint64_t size, uint64_t reserved, unsigned char sum[16], struct found *f)
{
	int r = tally_ar_mkparents(rootfd, name);
	if (r == -ENOTDIR)
		return refuse(apath, name, "lies under a name that is a file (%s)", ALTERED);
	int fd = r ? -1
		   : openat(rootfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
	if (fd < 0) {
		int e = r ? -r : errno;
		if (e == EEXIST || e == EISDIR)
			return refuse(apath, name, "appears twice (%s)", ALTERED);
		return tally_seterr(-e,
				    "cannot unpack '%s': %s (set TMPDIR to a directory with room)",
				    apath, strerror(e));
	}
	struct tally_ar_sum h;
	tally_ar_sum_init(&h);
	uint64_t pos = 0;
	for (;;) {
		const void *buf;
		size_t n;
		la_int64_t off;
		int k = archive_read_data_block(a, &buf, &n, &off);
		if (k == ARCHIVE_EOF)
			break;
		if (k != ARCHIVE_OK) {
			r = tally_seterr(-EINVAL, "'%s': member '%s' cannot be read: %s (%s)",
					 apath, name, archive_error_string(a), ALTERED);
			break;
		}
		if (off < 0 || (uint64_t)off < pos || (uint64_t)off > size ||
		    n > size - (uint64_t)off) {
			r = refuse(apath, name,
				   "holds more bytes than its header's %" PRIu64 " (%s)", size,
				   ALTERED);
			break;
		}
		/* a gap its header did not announce counts as holes too, before it is hashed */
		uint64_t gap = (uint64_t)off - pos, extra = gap > reserved ? gap - reserved : 0;
		reserved -= gap - extra;
		if (extra && (r = add_holes(apath, name, f, size, extra)))
			break;
		/* and what a compressed stream gives beyond any ratio a real archive has */
		f->unpacked += n;
		la_int64_t raw = archive_filter_bytes(a, -1);
		if (f->unpacked > UNPACK_FREE &&
		    f->unpacked / UNPACK_RATIO > (uint64_t)(raw > 0 ? raw : 0)) {
			char x[32], y[32];
			tally_format_size(f->unpacked, x, sizeof(x));
			tally_format_size((uint64_t)(raw > 0 ? raw : 0), y, sizeof(y));
			r = refuse(
				apath, name,
				"unpacks past %s from %s of the archive, more than %d times as much (refused: %s)",
				x, y, UNPACK_RATIO, ALTERED);
			break;
		}
		hash_zeros(&h, gap);
		pos = (uint64_t)off;
		tally_ar_sum_update(&h, buf, n);
		const char *c = buf;
		/* zeros: a hole (ftruncate below sets the size) */
		size_t left = all_zero(buf, n) ? 0 : n;
		if (!left)
			pos += n;
		while (left && !r) {
			ssize_t w = pwrite(fd, c, left, (off_t)pos);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				r = tally_seterr(
					w < 0 ? -errno : -EIO,
					"cannot unpack '%s': %s (set TMPDIR to a directory with room)",
					apath, strerror(w < 0 ? errno : EIO));
			else {
				c += w;
				left -= (size_t)w;
				pos += (uint64_t)w;
			}
		}
		if (r)
			break;
	}
	if (!r && size - pos > reserved)
		r = add_holes(apath, name, f, size, size - pos - reserved);
	if (!r)
		hash_zeros(&h, size - pos);
	if (!r && ftruncate(fd, (off_t)size) < 0)
		r = tally_seterr(-errno, "cannot unpack '%s': %s", apath, strerror(errno));
	if (close(fd) < 0 && !r)
		r = tally_seterr(-errno, "cannot unpack '%s': %s", apath, strerror(errno));
	if (!r)
		tally_ar_sum_final(&h, sum);
	return r;
}

static bool known_top(const char *name, size_t l)
{
	static const char *const tops[] = { TALLY_ARCHIVE_MANIFEST, "db", "images", "debug",
					    "kernel" };
	for (size_t i = 0; i < ARRAY_SIZE(tops); i++)
		if (strlen(tops[i]) == l && !strncmp(name, tops[i], l))
			return true;
	return false;
}

/* The tarball apath (or, data not NULL, its len bytes in memory) unpacked
 * into root, every member checked. */
static int extract(const char *apath, const void *data, size_t len, const char *root,
		   struct found *f)
{
	struct archive *a = archive_read_new();
	if (!a)
		return tally_seterr(-ENOMEM, "libarchive: cannot start reading '%s'", apath);
	/* only these: libarchive's other filters may run external programs */
	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_bzip2(a);
	/* a regular file only (one swapped for a FIFO never hangs the read) */
	int afd = data ? -1 : tally_open_regular(AT_FDCWD, apath, TALLY_OPEN_FOLLOW, 0, NULL);
	if (!data && afd < 0) {
		archive_read_free(a);
		return tally_seterr(afd, "cannot read archive %s", tally_errmsg());
	}
	int r = 0;
	if ((data ? archive_read_open_memory(a, data, len)
		  : archive_read_open_fd(a, afd, 1 << 16)) != ARCHIVE_OK) {
		r = tally_seterr(-EINVAL, "'%s' is not a tally archive nor a database: %s", apath,
				 archive_error_string(a));
		archive_read_free(a);
		if (afd >= 0)
			close(afd);
		return r;
	}
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		r = tally_seterr(-errno, "cannot unpack '%s' into '%s': %s", apath, root,
				 strerror(errno));
		archive_read_free(a);
		if (afd >= 0)
			close(afd);
		return r;
	}
	/* a directory all members are in (a tarball of the archive's directory) */
	char *prefix = NULL;
	bool first = true;
	struct archive_entry *e;
	int k;
	struct strbuf text = STRBUF_INIT;
	while (!r && (k = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *raw = archive_entry_pathname(e);
		if (!raw || !*raw) {
			r = tally_seterr(-EINVAL,
					 "'%s': a member has no name or an unreadable one (%s)",
					 apath, ALTERED);
			break;
		}
		if (raw[0] == '/') {
			r = refuse(
				apath, raw,
				"is an absolute path (refused: an archive names files inside itself only)");
			break;
		}
		if (has_dotdot(raw)) {
			r = refuse(
				apath, raw,
				"has '..' in its name (refused: an archive names files inside itself only)");
			break;
		}
		const char *name = raw;
		while (name[0] == '.' && name[1] == '/')
			name += 2;
		while (*name == '/')
			name++;
		size_t l1 = strcspn(name, "/");
		if (first && l1 && name[l1] == '/' && !known_top(name, l1) && name[0] != '.')
			prefix = xstrndup(name, l1 + 1);
		first = false;
		if (prefix) {
			size_t pl = strlen(prefix);
			if (!strncmp(name, prefix, pl))
				name += pl;
			else if (!strncmp(name, prefix, pl - 1) && !name[pl - 1])
				name += pl - 1; /* the directory itself */
			else {
				r = refuse(apath, raw,
					   "is not under '%s' like the members before it (%s)",
					   prefix, ALTERED);
				break;
			}
		}
		const char *hl = archive_entry_hardlink(e);
		mode_t type = archive_entry_filetype(e);
		if (hl) {
			char tb[240];
			if (link_outside(raw, hl, true))
				r = refuse(apath, raw,
					   "is a hard link to '%s', outside the archive (refused)",
					   shown(hl, tb, sizeof(tb)));
			else
				r = refuse(
					apath, raw,
					"is a hard link to '%s' (refused: a tally archive holds regular files only)",
					shown(hl, tb, sizeof(tb)));
			break;
		}
		if (type == AE_IFLNK) {
			char tb[240];
			const char *t = archive_entry_symlink(e);
			if (link_outside(raw, t, false))
				r = refuse(
					apath, raw,
					"is a symbolic link to '%s', outside the archive (refused)",
					shown(t, tb, sizeof(tb)));
			else
				r = refuse(
					apath, raw,
					"is a symbolic link to '%s' (refused: a tally archive holds regular files only)",
					shown(t, tb, sizeof(tb)));
			break;
		}
		if (type == AE_IFCHR || type == AE_IFBLK) {
			r = refuse(
				apath, raw,
				"is a device file (refused: a tally archive holds regular files only)");
			break;
		}
		if (type == AE_IFDIR) {
			if (*name && !dir_ok(name)) {
				r = refuse(apath, raw, "is a directory no tally archive has (%s)",
					   ALTERED);
				break;
			}
			continue; /* made as the files under it need */
		}
		if (type != AE_IFREG) {
			r = refuse(apath, raw,
				   "is a %s (refused: a tally archive holds regular files only)",
				   type == AE_IFIFO    ? "named pipe"
				   : type == AE_IFSOCK ? "socket"
						       : "file of an unknown type");
			break;
		}
		if (!tally_archive_name_ok(name)) {
			r = refuse(apath, raw, "has a name no tally archive member has (%s)",
				   ALTERED);
			break;
		}
		if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0) {
			r = refuse(apath, raw, "has no size (%s)", ALTERED);
			break;
		}
		uint64_t size = (uint64_t)archive_entry_size(e);
		if (!strcmp(name, TALLY_ARCHIVE_MANIFEST)) {
			if (f->have_man) {
				r = refuse(apath, raw, "appears twice (%s)", ALTERED);
				break;
			}
			if (size > MANIFEST_MAX) {
				r = refuse(apath, raw,
					   "is %" PRIu64 " bytes, too large for a MANIFEST (%s)",
					   size, ALTERED);
				break;
			}
			strbuf_reset(&text);
			for (;;) {
				char buf[65536];
				la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
				if (n < 0) {
					r = tally_seterr(
						-EINVAL,
						"'%s': its MANIFEST cannot be read: %s (%s)", apath,
						archive_error_string(a), ALTERED);
					break;
				}
				if (!n)
					break;
				if (text.len + (size_t)n > size) {
					r = refuse(apath, raw,
						   "holds more bytes than its header's %" PRIu64
						   " (%s)",
						   size, ALTERED);
					break;
				}
				strbuf_add(&text, buf, (size_t)n);
			}
			if (!r && text.len != size)
				r = refuse(apath, raw,
					   "is %zu bytes but its header says %" PRIu64 " (%s)",
					   text.len, size, ALTERED);
			if (!r)
				r = load_manifest(apath, f, text.buf ? text.buf : "", text.len);
			/* the members before it are checked now, those after it as they come */
			for (size_t i = 0; !r && i < f->got.n; i++)
				r = check_one(apath, f, &f->got.e[i]);
			continue;
		}
		if (f->have_man) {
			const struct tally_manifest_entry *me = man_find(f, name);
			if (!me) {
				r = refuse(apath, name, "is not in the MANIFEST (%s)", ALTERED);
				break;
			}
			if (me->size != size) {
				r = refuse(apath, name,
					   "is %" PRIu64 " bytes but the MANIFEST says %" PRIu64
					   " (%s)",
					   size, me->size, ALTERED);
				break;
			}
		}
		/* a sparse member's holes, from its header: counted before it is read */
		uint64_t data = 0, reserved = 0;
		if (archive_entry_sparse_reset(e) > 0) {
			la_int64_t so, sl;
			while (archive_entry_sparse_next(e, &so, &sl) == ARCHIVE_OK)
				data += sl > 0 ? (uint64_t)sl : 0;
			reserved = data < size ? size - data : 0;
			if ((r = add_holes(apath, name, f, size, reserved)))
				break;
		}
		unsigned char sum[16];
		r = extract_file(a, apath, rootfd, name, size, reserved, sum, f);
		if (r)
			break;
		add_found(f, name, size, sum);
		if (f->have_man)
			r = check_one(apath, f, &f->got.e[f->got.n - 1]);
	}
	if (!r && k != ARCHIVE_EOF)
		r = tally_seterr(-EINVAL, "'%s' is damaged: %s (%s)", apath,
				 archive_error_string(a), ALTERED);
	strbuf_release(&text);
	free(prefix);
	close(rootfd);
	archive_read_free(a);
	if (afd >= 0)
		close(afd); /* libarchive leaves a descriptor it was given open */
	if (!r)
		r = check_all(apath, f);
	return r;
}

/* ---- directories ---- */

/* Walks dir (relative rel) for regular files, refusing anything else. */
static int walk_dir(const char *apath, int walkfd, const char *rel, struct found *f, int depth)
{
	DIR *d = fdopendir(walkfd);
	if (!d) {
		int e = errno;
		close(walkfd);
		return tally_seterr(-e, "cannot read archive '%s': %s", apath, strerror(e));
	}
	struct dirent *de;
	int r = 0;
	struct strbuf name = STRBUF_INIT;
	while (!r && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		strbuf_reset(&name);
		if (*rel)
			strbuf_addf(&name, "%s/", rel);
		strbuf_addstr(&name, de->d_name);
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = tally_seterr(-errno, "cannot read archive '%s': '%s': %s", apath,
					 name.buf, strerror(errno));
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			char t[4096], tb[240];
			ssize_t n = readlinkat(dirfd(d), de->d_name, t, sizeof(t) - 1);
			t[n < 0 ? 0 : n] = '\0';
			r = refuse(
				apath, name.buf,
				"is a symbolic link to '%s'%s (refused: a tally archive holds regular files only)",
				shown(t, tb, sizeof(tb)),
				link_outside(name.buf, t, false) ? ", outside the archive" : "");
		} else if (S_ISDIR(st.st_mode)) {
			if (depth > 32 || !dir_ok(name.buf)) {
				r = refuse(apath, name.buf,
					   "is a directory no tally archive has (%s)", ALTERED);
				break;
			}
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = sub < 0 ? tally_seterr(-errno, "cannot read archive '%s': '%s': %s",
						   apath, name.buf, strerror(errno))
				    : walk_dir(apath, sub, name.buf, f, depth + 1);
		} else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
			r = refuse(
				apath, name.buf,
				"is a device file (refused: a tally archive holds regular files only)");
		} else if (!S_ISREG(st.st_mode)) {
			r = refuse(
				apath, name.buf,
				"is not a regular file (refused: a tally archive holds regular files only)");
		} else if (!strcmp(name.buf, TALLY_ARCHIVE_MANIFEST)) {
			continue;
		} else if (!tally_archive_name_ok(name.buf)) {
			r = refuse(apath, name.buf, "has a name no tally archive member has (%s)",
				   ALTERED);
		} else {
			unsigned char zero[16] = { 0 };
			add_found(f, name.buf, (uint64_t)st.st_size, zero);
		}
	}
	strbuf_release(&name);
	closedir(d);
	return r;
}

/* The bytes of holes in an open file (SEEK_DATA and SEEK_HOLE: a filesystem
 * without them says it has none). */
static uint64_t file_holes(int fd, uint64_t size)
{
	uint64_t holes = 0;
	off_t pos = 0;
	while ((uint64_t)pos < size) {
		off_t data = lseek(fd, pos, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO) /* a hole to the end */
				holes += size - (uint64_t)pos;
			break;
		}
		holes += (uint64_t)(data - pos);
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole <= data)
			break;
		pos = hole;
	}
	lseek(fd, 0, SEEK_SET);
	return holes;
}

/* A file's checksum, read without following a link; its holes counted with
 * f's before it is read. */
static int sum_file(const char *apath, int rootfd, const char *name, uint64_t size,
		    unsigned char sum[16], struct found *f)
{
	int fd = openat(rootfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return tally_seterr(-errno, "cannot read archive '%s': '%s': %s", apath, name,
				    strerror(errno));
	int hr = add_holes(apath, name, f, size, file_holes(fd, size));
	if (hr) {
		close(fd);
		return hr;
	}
	struct tally_ar_sum h;
	tally_ar_sum_init(&h);
	char *buf = xmalloc(1 << 20);
	uint64_t got = 0;
	int r = 0;
	for (;;) {
		ssize_t k = read(fd, buf, 1 << 20);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = tally_seterr(-errno, "cannot read archive '%s': '%s': %s", apath, name,
					 strerror(errno));
			break;
		}
		if (!k)
			break;
		got += (uint64_t)k;
		if (got > size)
			break; /* growing: changed (below) */
		tally_ar_sum_update(&h, buf, (size_t)k);
	}
	free(buf);
	close(fd);
	if (!r && got != size)
		r = refuse(apath, name, "changed while it was read (try again)");
	if (!r)
		tally_ar_sum_final(&h, sum);
	return r;
}

static int verify_dir(const char *apath, const char *root, struct found *f)
{
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return tally_seterr(-errno, "cannot read archive '%s': %s", apath, strerror(errno));
	struct strbuf text = STRBUF_INIT;
	int r = 0;
	int mfd = openat(rootfd, TALLY_ARCHIVE_MANIFEST, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (mfd < 0) {
		r = errno == ENOENT
			    ? tally_seterr(
				      -ENOENT,
				      "'%s' is not a tally archive: it has no %s (make one with 'tally archive')",
				      apath, TALLY_ARCHIVE_MANIFEST)
			    : refuse(apath, TALLY_ARCHIVE_MANIFEST, "cannot be read: %s",
				     strerror(errno));
	} else {
		struct stat st;
		int k = fstat(mfd, &st) < 0    ? -errno
			: !S_ISREG(st.st_mode) ? -EINVAL
					       : read_all_fd(mfd, &text, MANIFEST_MAX);
		close(mfd);
		if (k)
			r = refuse(apath, TALLY_ARCHIVE_MANIFEST, "cannot be read: %s",
				   k == -EINVAL ? "not a regular file" : strerror(-k));
		else
			r = load_manifest(apath, f, text.buf ? text.buf : "", text.len);
	}
	strbuf_release(&text);
	int dfd = r ? -1 : dup(rootfd);
	if (!r)
		r = dfd < 0 ? tally_seterr(-errno, "cannot read archive '%s': %s", apath,
					   strerror(errno))
			    : walk_dir(apath, dfd, "", f, 0);
	/* sizes first (cheap), then the checksums */
	for (size_t i = 0; !r && i < f->got.n; i++) {
		const struct tally_manifest_entry *e = man_find(f, f->got.e[i].name);
		if (!e)
			r = refuse(apath, f->got.e[i].name, "is not in the MANIFEST (%s)", ALTERED);
		else if (e->size != f->got.e[i].size)
			r = refuse(apath, f->got.e[i].name,
				   "is %" PRIu64 " bytes but the MANIFEST says %" PRIu64 " (%s)",
				   f->got.e[i].size, e->size, ALTERED);
	}
	for (size_t i = 0; !r && i < f->got.n; i++)
		r = sum_file(apath, rootfd, f->got.e[i].name, f->got.e[i].size, f->got.e[i].sum, f);
	close(rootfd);
	if (!r)
		r = check_all(apath, f);
	return r;
}

/* ---- the database inside ---- */

/* The error message with root/ written as the archive's name and a colon. */
static void rename_in_error(int r, const char *root, const char *apath)
{
	const char *m = tally_errmsg();
	struct strbuf sb = STRBUF_INIT;
	size_t tl = strlen(root);
	while (*m) {
		if (!strncmp(m, root, tl) && m[tl] == '/') {
			strbuf_addf(&sb, "%s:", apath);
			m += tl + 1;
		} else {
			strbuf_addch(&sb, *m++);
		}
	}
	tally_seterr(r, "%s", sb.buf ? sb.buf : "");
	strbuf_release(&sb);
}

/* Opens the database of the archive apath (path as the user named it): a
 * directory (is_dir) in place, else a tarball (the file apath, or data, len
 * bytes) unpacked into a private temporary directory. */
static int open_archive(struct tally_db *db, const char *path, const char *apath, bool is_dir,
			const void *data, size_t len)
{
	memset(db, 0, sizeof(*db));
	struct found f = { 0 };
	char *root = NULL, *tmp = NULL;
	int r = 0;
	if (is_dir) {
		root = realpath(apath, NULL);
		if (!root)
			r = tally_seterr(-errno, "cannot read archive '%s': %s", apath,
					 strerror(errno));
		else
			r = verify_dir(apath, root, &f);
	} else {
		const char *td = getenv("TMPDIR");
		td = td && *td ? td : "/tmp";
		/* what readers that were killed left there (staging.c) */
		static const char *const prefixes[] = { "tally-archive." };
		tally_ar_tidy(td, prefixes, ARRAY_SIZE(prefixes));
		/* our pid in the name tells a later reader whether we are still at work */
		struct strbuf tmpl = STRBUF_INIT;
		strbuf_addf(&tmpl, "%s/tally-archive.%d-XXXXXX", td, (int)getpid());
		if (!mkdtemp(tmpl.buf)) {
			r = tally_seterr(
				-errno,
				"cannot unpack '%s': cannot create a directory in '%s': %s (set TMPDIR)",
				apath, td, strerror(errno));
			strbuf_release(&tmpl);
		} else {
			/* removed if a signal ends us while it exists */
			tally_ar_hold_path(tmpl.buf);
			tmp = strbuf_detach(&tmpl);
			root = realpath(tmp, NULL);
			r = root ? extract(apath, data, len, root, &f)
				 : tally_seterr(-errno, "cannot unpack '%s': %s", apath,
						strerror(errno));
		}
	}
	found_release(&f);
	if (!r) {
		struct strbuf d = STRBUF_INIT;
		strbuf_addf(&d, "%s/db", root);
		r = tally_db_open_dir(db, d.buf);
		if (r) {
			rename_in_error(r, root, apath);
			strbuf_release(&d);
		} else {
			free(db->path);
			db->path = xstrdup(path);
			db->files = strbuf_detach(&d);
			db->archive = root;
			db->tmpdir = tmp;
			return 0;
		}
	}
	if (tmp)
		tally_remove_tree(tmp);
	free(tmp);
	free(root);
	memset(db, 0, sizeof(*db));
	return r;
}

int tally_archive_open(struct tally_db *db, const char *path)
{
	const char *apath = strip_prefix(path);
	memset(db, 0, sizeof(*db));
	struct stat st;
	if (stat(apath, &st) < 0)
		return tally_seterr(-errno, "cannot read archive '%s': %s", apath, strerror(errno));
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return tally_seterr(-EINVAL,
				    "'%s' is not a tally archive: neither a directory nor a file",
				    apath);
	return open_archive(db, path, apath, S_ISDIR(st.st_mode), NULL, 0);
}

int tally_archive_open_buf(struct tally_db *db, const void *data, size_t len, const char *what)
{
	/* libarchive takes no empty buffer for one */
	static const char none;
	return open_archive(db, what, what, false, len ? data : &none, len);
}
