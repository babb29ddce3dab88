/* Pulls of a host's results: its listing, then a tar stream unpacked so that
 * nothing lands outside the directory and nothing exceeds what was listed. */
#define _GNU_SOURCE
#include "tally/remote.h"
#include "lib/remote/internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* The host's listing "SIZE NAME\n..." of a pull, parsed once: its names
 * sorted, each looked up by a binary search (a pull of n files costs n log n,
 * whatever the host sends), each marked when it came. */
struct listing {
	struct lent {
		const char *name; /* into the listing's text */
		size_t len;
		long long size;
		bool came;
	} *v;
	size_t n;
};

static int lent_cmp(const void *a, const void *b)
{
	const struct lent *x = a, *y = b;
	int c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
	return c ? c : x->len < y->len ? -1 : x->len > y->len;
}

static int listing_parse(struct listing *L, const char *sizes, const char *what)
{
	memset(L, 0, sizeof(*L));
	size_t lines = 0;
	for (const char *p = sizes; *p; p++)
		lines += *p == '\n';
	if (lines > TALLY_PULL_MAX_FILES)
		return tally_seterr(
			-EFBIG,
			"%s: its listing has more than %d files (refused before any is read)", what,
			TALLY_PULL_MAX_FILES);
	L->v = xcalloc(lines + 1, sizeof(*L->v));
	char q[QNAME_SIZE];
	for (const char *p = sizes; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		size_t num = 0;
		while (num < len && p[num] >= '0' && p[num] <= '9')
			num++;
		struct lent *l = &L->v[L->n];
		if (!num || num > 18 || num + 1 >= len || p[num] != ' ' || !e) {
			char *line = xstrndup(p, len);
			int r = tally_seterr(
				-EPROTO, "%s: its listing has a line that is not 'SIZE NAME': '%s'",
				what, rmt_qname(q, line));
			free(line);
			return r;
		}
		l->size = strtoll(p, NULL, 10);
		l->name = p + num + 1;
		l->len = len - num - 1;
		L->n++;
		p = e + 1;
	}
	qsort(L->v, L->n, sizeof(*L->v), lent_cmp);
	for (size_t i = 1; i < L->n; i++)
		if (!lent_cmp(&L->v[i - 1], &L->v[i])) {
			char *name = xstrndup(L->v[i].name, L->v[i].len);
			int r = tally_seterr(-EPROTO, "%s: its listing names '%s' twice", what,
					     rmt_qname(q, name));
			free(name);
			return r;
		}
	return 0;
}

static struct lent *listing_find(const struct listing *L, const char *name)
{
	struct lent key = { .name = name, .len = strlen(name) };
	return L->n ? bsearch(&key, L->v, L->n, sizeof(*L->v), lent_cmp) : NULL;
}

static int mkdirs(const char *base, const char *rel)
{
	/* each component made under base, none a link (O_NOFOLLOW on the way down) */
	int dfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	char *tmp = xstrdup(rel);
	int r = 0;
	for (char *s = tmp, *slash; s && *s && !r; s = slash ? slash + 1 : NULL) {
		slash = strchr(s, '/');
		if (slash)
			*slash = '\0';
		if (mkdirat(dfd, s, 0700) < 0 && errno != EEXIST)
			r = -errno;
		int nfd = r ? -1 : openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (!r && nfd < 0)
			r = -errno;
		close(dfd);
		dfd = nfd;
	}
	free(tmp);
	if (r) {
		if (dfd >= 0)
			close(dfd);
		return r;
	}
	return dfd;
}

int tally_remote_untar(const void *tar, size_t len, const char *ldir, const char *sizes,
		       const char *what, size_t *files, uint64_t *bytes)
{
	*files = 0;
	*bytes = 0;
	struct listing L = { 0 };
	int ret = sizes ? listing_parse(&L, sizes, what) : 0;
	if (ret) {
		free(L.v);
		return ret;
	}
	if (mkdir(ldir, 0700) < 0 && errno != EEXIST) {
		free(L.v);
		return tally_seterr(-errno, "cannot create '%s': %s", ldir, strerror(errno));
	}
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tar, len) != ARCHIVE_OK)
		ret = tally_seterr(-EIO, "%s: not a tar stream: %s", what, archive_error_string(a));
	struct archive_entry *e;
	char q[QNAME_SIZE];
	while (!ret) {
		int k = archive_read_next_header(a, &e);
		if (k == ARCHIVE_EOF)
			break;
		if (k != ARCHIVE_OK) {
			ret = tally_seterr(-EIO, "%s: a damaged tar stream: %s", what,
					   archive_error_string(a));
			break;
		}
		const char *name = archive_entry_pathname(e);
		if (!name)
			name = "";
		while (name[0] == '.' && name[1] == '/')
			name += 2;
		if (!name[0] || !strcmp(name, "."))
			continue;
		char *n = xstrdup(name);
		size_t nl = strlen(n);
		while (nl && n[nl - 1] == '/')
			n[--nl] = '\0';
		mode_t type = archive_entry_filetype(e);
		/* at most 1 KiB: the pulled tree stays within PATH_MAX under any
		 * results directory, for every tool that removes or reads it by path */
		if (!tally_relpath_ok(n, 1024)) {
			ret = tally_seterr(
				-EPERM,
				"%s: refused '%s': a name that leads out of '%s' (absolute, with '..', or over 1 KiB)",
				what, rmt_qname(q, name), ldir);
		} else if (type == AE_IFDIR) {
			int d = mkdirs(ldir, n);
			if (d < 0)
				ret = tally_seterr(
					d, "%s: cannot make '%s' in '%s': %s (a link in the way?)",
					what, rmt_qname(q, n), ldir, strerror(-d));
			else
				close(d);
		} else if (type != AE_IFREG) {
			ret = tally_seterr(
				-EPERM, "%s: refused '%s': %s, not a regular file or a directory",
				what, rmt_qname(q, n),
				type == AE_IFLNK            ? "a symbolic link"
				: archive_entry_hardlink(e) ? "a hard link"
							    : "a special file");
		} else {
			/* what the stream declares, checked against the listing before
			 * anything is created for it: a member is never larger than
			 * the host said (a sparse one is all holes here) */
			struct lent *l = sizes ? listing_find(&L, n) : NULL;
			long long declared = archive_entry_size_is_set(e)
						     ? (long long)archive_entry_size(e)
						     : -1;
			long long want = sizes ? (l ? l->size : -1) : declared;
			int fd = -1, dfd = -1;
			const char *base = n;
			if (sizes && !l) {
				ret = tally_seterr(
					-EPROTO,
					"%s: '%s' came, but the host's listing has no such file",
					what, rmt_qname(q, n));
			} else if (l && l->came) {
				ret = tally_seterr(-EPROTO, "%s: '%s' came twice", what,
						   rmt_qname(q, n));
			} else if (want < 0 || declared != want) {
				ret = tally_seterr(
					-EFBIG,
					"%s: refused '%s': the stream declares %lld bytes and the host listed %lld (nothing written)",
					what, rmt_qname(q, n), declared, want);
			} else if ((uint64_t)want > PULL_MAX - *bytes) {
				ret = tally_seterr(
					-EFBIG, "%s: more than 4 GiB of results (stopped)", what);
			} else {
				if (l)
					l->came = true;
				char *slash = strrchr(n, '/');
				if (slash) {
					*slash = '\0';
					dfd = mkdirs(ldir, n);
					*slash = '/';
				} else {
					dfd = open(ldir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
					if (dfd < 0)
						dfd = -errno;
				}
				base = slash ? slash + 1 : n;
				fd = dfd < 0 ? dfd
					     : openat(dfd, base,
						      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
							      O_CLOEXEC,
						      0600);
				if (dfd >= 0 && fd < 0)
					fd = -errno;
				if (fd < 0)
					ret = tally_seterr(fd, "%s: cannot write '%s' in '%s': %s",
							   what, rmt_qname(q, n), ldir,
							   strerror(-fd));
			}
			if (!ret) {
				uint64_t got = 0;
				for (;;) {
					char buf[65536];
					la_ssize_t m = archive_read_data(a, buf, sizeof(buf));
					if (m == 0)
						break;
					if (m < 0) {
						ret = tally_seterr(
							-EIO, "%s: '%s' is cut short: %s", what,
							rmt_qname(q, n), archive_error_string(a));
						break;
					}
					if ((uint64_t)m > (uint64_t)want - got) {
						ret = tally_seterr(
							-EFBIG,
							"%s: refused '%s': more than the %lld bytes the host listed",
							what, rmt_qname(q, n), want);
						break;
					}
					if (tally_write_all(fd, buf, (size_t)m)) {
						ret = tally_seterr(-errno,
								   "cannot write '%s/%s': %s", ldir,
								   n, strerror(errno));
						break;
					}
					got += (uint64_t)m;
				}
				if (close(fd) < 0 && !ret)
					ret = tally_seterr(-errno, "cannot write '%s/%s': %s", ldir,
							   n, strerror(errno));
				if (!ret && got != (uint64_t)want)
					ret = tally_seterr(
						-EIO,
						"%s: '%s' has %llu bytes here and %lld on the host",
						what, rmt_qname(q, n), (unsigned long long)got,
						want);
				if (ret)
					/* nothing of a refused member stays */
					unlinkat(dfd, base, 0);
				else {
					(*files)++;
					*bytes += got;
				}
			}
			if (dfd >= 0)
				close(dfd);
		}
		free(n);
	}
	archive_read_free(a);
	/* every file of the listing came */
	for (size_t i = 0; !ret && i < L.n; i++)
		if (!L.v[i].came) {
			char *name = xstrndup(L.v[i].name, L.v[i].len);
			ret = tally_seterr(
				-EIO,
				"%s: %zu files came of the %zu the host listed ('%s' did not)",
				what, *files, L.n, rmt_qname(q, name));
			free(name);
		}
	free(L.v);
	return ret;
}

/* The pull's script: $1 the directory; a listing of its regular files
 * (SIZE NAME, NUL-free names without newlines), an end line, then the tar. */
static const char list_sh[] = "cd \"$1\" || exit 3; find . -type f -printf '%s %P\\n'";
static const char tar_sh[] = "cd \"$1\" || exit 3; exec tar -c -f - --no-xattrs --no-acls .";

int tally_remote_pull(const struct tally_remote *r, const char *rdir, const char *ldir,
		      size_t *files, uint64_t *bytes)
{
	*files = 0;
	*bytes = 0;
	struct strbuf list = STRBUF_INIT, tar = STRBUF_INIT, err = STRBUF_INIT;
	int status;
	char *lw[] = { "sh", "-c", (char *)list_sh, "sh", (char *)rdir, NULL };
	int ret = tally_remote_run(r, lw, NULL, 0, &list, 16 << 20, &err, &status);
	if (!ret && status)
		ret = rmt_run_failed(r, "listing the results", status, &err);
	if (!ret) {
		char *tw[] = { "sh", "-c", (char *)tar_sh, "sh", (char *)rdir, NULL };
		strbuf_reset(&err);
		ret = tally_remote_run(r, tw, NULL, 0, &tar, PULL_MAX, &err, &status);
		if (!ret && status)
			ret = rmt_run_failed(r, "sending the results", status, &err);
	}
	if (!ret) {
		struct strbuf what = STRBUF_INIT;
		strbuf_addf(&what, "host '%s'", r->host);
		ret = tally_remote_untar(tar.buf ? tar.buf : "", tar.len, ldir,
					 list.buf ? list.buf : "", what.buf, files, bytes);
		strbuf_release(&what);
	}
	strbuf_release(&list);
	strbuf_release(&tar);
	strbuf_release(&err);
	return ret;
}
