/* The build-id cache (tally/cache.h): where it is, opening it (checked as a
 * private directory), its entries (found, touched, added after a check of
 * their id, listed, pruned least recently used first). Every name in it is
 * opened relative to the cache's descriptor and without following links. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "tally/cache.h"
#include "tally/elfinfo.h"

#include "lib/cache/internal.h"

static bool is_off(const char *v)
{
	return v && (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no"));
}

/* The directory under a cache home: HOME/tally/buildid. */
static void under(struct strbuf *out, const char *home, const char *rest)
{
	strbuf_reset(out);
	strbuf_addf(out, "%s%s/tally/buildid", home, rest);
}

/* root's own home, from the passwd entry (sudo keeps the user's HOME). */
static const char *root_home(void)
{
	struct passwd *pw = getpwuid(geteuid());
	return pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
}

int tally_cache_path(struct strbuf *out)
{
	const char *v = getenv("TALLY_BUILDID_CACHE");
	if (is_off(v))
		return tally_seterr(-ENOENT, "the build-id cache is off (TALLY_BUILDID_CACHE=%s)",
				    v);
	if (v && v[0] == '/') {
		strbuf_reset(out);
		strbuf_addstr(out, v);
		return 0;
	}
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	if (x && x[0] == '/')
		under(out, x, "");
	else if (geteuid() == 0 && root_home())
		under(out, root_home(), "/.cache");
	else if (h && h[0] == '/')
		under(out, h, "/.cache");
	else
		return tally_seterr(
			-ENOENT,
			"no home directory for the build-id cache (set HOME or XDG_CACHE_HOME)");
	return 0;
}

static int open_at(struct tally_cache *c, const char *path, bool create)
{
	char *resolved = NULL;
	/* the directories missing on the way (~/.cache, ~/.cache/tally) are made
	 * as the walk reaches them, each only below one that passed the check:
	 * never in a directory another user owns, never through their link */
	int r = tally_dir_check(path, create ? 0700 : 0, TALLY_DIR_PRIVATE, &resolved);
	if (r) {
		char *why = xstrdup(tally_errmsg());
		r = tally_seterr(r, "the build-id cache '%s' is not used: %s", path, why);
		free(why);
		return r;
	}
	int fd = open(resolved, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
		r = tally_seterr(fd < 0 ? -errno : -EPERM,
				 "the build-id cache '%s' is not used: %s", resolved,
				 fd < 0 ? strerror(errno) : "it changed while it was checked");
		if (fd >= 0)
			close(fd);
		free(resolved);
		return r;
	}
	/* what it holds is the user's alone, as a database's files are */
	if (st.st_mode & 077)
		(void)fchmod(fd, 0700);
	c->path = resolved;
	c->fd = fd;
	return 0;
}

int tally_cache_open(struct tally_cache *c, bool create)
{
	c->path = NULL;
	c->fd = -1;
	struct strbuf p = STRBUF_INIT;
	int r = tally_cache_path(&p);
	if (!r)
		r = open_at(c, p.buf, create);
	const char *rh = root_home();
	if (r && r != -ENOENT && geteuid() == 0 && rh && !getenv("TALLY_BUILDID_CACHE")) {
		/* root's cache is root's own: never in a directory another user owns */
		struct strbuf q = STRBUF_INIT;
		under(&q, rh, "/.cache");
		if (strcmp(q.buf, p.buf)) {
			char *first = xstrdup(tally_errmsg());
			r = open_at(c, q.buf, create);
			if (r)
				tally_seterr(r, "%s", first);
			free(first);
		}
		strbuf_release(&q);
	}
	strbuf_release(&p);
	return r;
}

void tally_cache_close(struct tally_cache *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->path);
	c->path = NULL;
	c->fd = -1;
}

bool tally_cache_key(const char *id_kind, const char *id, char *key)
{
	size_t n = id ? strlen(id) : 0;
	if (!n || n > 128 || strspn(id, "0123456789abcdef") != n)
		return false;
	if (!strcmp(id_kind, "build-id"))
		snprintf(key, TALLY_CACHE_KEY_MAX, "%s", id);
	else if (!strcmp(id_kind, "xxh64"))
		snprintf(key, TALLY_CACHE_KEY_MAX, "xxh64-%s", id);
	else
		return false;
	return true;
}

/* An entry's name as the directory holds it: what tally_cache_key makes. */
static bool key_ok(const char *key)
{
	const char *h = !strncmp(key, "xxh64-", 6) ? key + 6 : key;
	size_t n = strlen(h);
	return n && n <= 128 && strspn(h, "0123456789abcdef") == n;
}

static const char *const file_names[] = { "image", "debug" };

bool tally_cache_has(const struct tally_cache *c, const char *key, enum tally_cache_file f)
{
	char rel[TALLY_CACHE_KEY_MAX + 16];
	struct stat st;
	snprintf(rel, sizeof(rel), "%s/%s", key, file_names[f]);
	return c->fd >= 0 && key_ok(key) && fstatat(c->fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode);
}

char *tally_cache_find(const struct tally_cache *c, const char *key, enum tally_cache_file f)
{
	if (!tally_cache_has(c, key, f))
		return NULL;
	struct strbuf p = STRBUF_INIT;
	strbuf_addf(&p, "%s/%s/%s", c->path, key, file_names[f]);
	return strbuf_detach(&p);
}

void tally_cache_touch(const struct tally_cache *c, const char *key)
{
	if (c->fd < 0 || !key_ok(key))
		return;
	char rel[TALLY_CACHE_KEY_MAX + 16];
	snprintf(rel, sizeof(rel), "%s/used", key);
	if (utimensat(c->fd, rel, NULL, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
		int fd = openat(c->fd, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				0600);
		if (fd >= 0)
			close(fd);
	}
}

/* ---- adding ---- */

/* A temporary's name: .tmp-PID-RANDOM (prune removes those of writers gone). */
static void tmp_name(char *buf, size_t n)
{
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		rnd = (uint64_t)tally_now_mono() * 1000003u ^ (uint64_t)getpid();
	snprintf(buf, n, ".tmp-%d-%016" PRIx64, (int)getpid(), rnd);
}

/* The entry's directory, made when missing (0700), never a link. */
static int entry_dir(const struct tally_cache *c, const char *key)
{
	if (mkdirat(c->fd, key, 0700) < 0 && errno != EEXIST)
		return tally_seterr(-errno, "cannot make '%s/%s': %s", c->path, key,
				    strerror(errno));
	struct stat st;
	if (fstatat(c->fd, key, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid())
		return tally_seterr(-EPERM, "'%s/%s' is not a directory of the build-id cache",
				    c->path, key);
	return 0;
}

/* ---- the cache's own files, beside the entries ---- */

int tally_cache_open_file(const struct tally_cache *c, const char *name, uint64_t max)
{
	struct stat st;
	int fd = tally_open_regular(c->fd, name, 0, max, &st);
	if (fd < 0)
		return fd;
	if (st.st_uid != geteuid()) {
		close(fd);
		return tally_seterr(-EPERM, "'%s/%s' is not the user's own", c->path, name);
	}
	return fd;
}

int tally_cache_read_file(const struct tally_cache *c, const char *name, struct strbuf *sb,
			  uint64_t max)
{
	int fd = tally_cache_open_file(c, name, max);
	if (fd < 0)
		return fd;
	int r = tally_read_fd(sb, fd, name, max);
	close(fd);
	return r;
}

int tally_cache_write_file(const struct tally_cache *c, const char *name, const void *data,
			   size_t len)
{
	char tmp[64];
	tmp_name(tmp, sizeof(tmp));
	int fd = openat(c->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return tally_seterr(-errno, "cannot write '%s/%s': %s", c->path, name,
				    strerror(errno));
	int r = tally_write_all(fd, data, len);
	if (close(fd) < 0 && !r)
		r = -errno;
	if (!r && renameat(c->fd, tmp, c->fd, name) < 0)
		r = -errno;
	if (r) {
		unlinkat(c->fd, tmp, 0);
		return tally_seterr(r, "cannot write '%s/%s': %s", c->path, name, strerror(-r));
	}
	return 0;
}

/* Whether the file open at fd has the id. */
static int check_id(int fd, const char *what, const char *id_kind, const char *id)
{
	struct tally_elf_info info;
	bool hash = !strcmp(id_kind, "xxh64");
	if (lseek(fd, 0, SEEK_SET) < 0 || tally_elf_info_fd(fd, what, hash ? 2 : 0, &info))
		return -EIO;
	char hex[160];
	if (hash)
		snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
	else if (info.build_id_len && info.build_id_len < 64)
		tally_hex(info.build_id, info.build_id_len, hex);
	else
		hex[0] = '\0';
	if (!info.is_elf || strcmp(hex, id))
		return tally_seterr(-ESTALE,
				    "'%s' is not the file of %s %s (it has %s): not cached", what,
				    id_kind, id, hex[0] ? hex : "none");
	return 0;
}

static __thread const int *copy_stop;

void tally_cache_copy_stop(const int *stop)
{
	copy_stop = stop;
}

int tally_cache_copy_stopped(const char *what)
{
	if (copy_stop && __atomic_load_n(copy_stop, __ATOMIC_RELAXED))
		return tally_seterr(-ECANCELED, "'%s': not cached (the copy was stopped)", what);
	return 0;
}

/* The whole of from (size bytes when it was checked) into to: by offset, as
 * the filler's thread and the process it hands its work to may copy from one
 * descriptor at once; a file that is not size bytes long at the end (cut or
 * grown while it was read) is not copied. */
static int copy_fd(int from, int to, uint64_t size, const char *what)
{
	int r = tally_cache_copy_range(from, to, 0, size, what);
	struct stat st;
	if (!r && (fstat(from, &st) < 0 || (uint64_t)st.st_size != size))
		r = tally_seterr(-ESTALE, "'%s' changed while it was copied: not cached", what);
	return r;
}

int tally_cache_add_fd(struct tally_cache *c, const char *id_kind, const char *id, int src_fd,
		       const char *src, enum tally_cache_file f, const char *recorded)
{
	char key[TALLY_CACHE_KEY_MAX];
	if (c->fd < 0)
		return tally_seterr(-EBADF, "the build-id cache is not open");
	if (!tally_cache_key(id_kind, id, key) ||
	    (f == TALLY_CACHE_DEBUG && strcmp(id_kind, "build-id")))
		return tally_seterr(-EINVAL, "'%s' has no id the build-id cache keeps (%s %s)", src,
				    id_kind, id);
	if (tally_cache_has(c, key, f))
		return 0;
	int r = tally_cache_copy_stopped(src);
	if (r)
		return r;
	struct stat st;
	if (fstat(src_fd, &st) < 0 || !S_ISREG(st.st_mode))
		return tally_seterr(-EINVAL, "'%s' is not a regular file: not cached", src);
	r = check_id(src_fd, src, id_kind, id);
	if (r)
		return r == -EIO ? tally_seterr(-EIO, "'%s': %s", src, tally_errmsg()) : r;
	char tmp[64];
	tmp_name(tmp, sizeof(tmp));
	int out = openat(c->fd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return tally_seterr(-errno, "cannot write into the build-id cache '%s': %s",
				    c->path, strerror(errno));
	r = 1;
	if (f == TALLY_CACHE_DEBUG)
		r = tally_cache_decompress_elf(src_fd, out, src);
	if (r == 1) /* nothing to decompress (or not a file it can rewrite): byte for byte */
		r = copy_fd(src_fd, out, (uint64_t)st.st_size, src);
	/* and the copy itself: the source may have changed while it was read */
	if (!r)
		r = check_id(out, src, id_kind, id);
	if (!r && (r = entry_dir(c, key)) == 0) {
		char rel[TALLY_CACHE_KEY_MAX + 16];
		snprintf(rel, sizeof(rel), "%s/%s", key, file_names[f]);
		if (renameat2(c->fd, tmp, c->fd, rel, RENAME_NOREPLACE) < 0)
			r = errno == EEXIST ? 0
					    : tally_seterr(-errno, "cannot write '%s/%s': %s",
							   c->path, rel, strerror(errno));
		else
			r = 1;
		if (r == 1 && recorded) {
			snprintf(rel, sizeof(rel), "%s/path", key);
			struct strbuf line = STRBUF_INIT;
			strbuf_add_escaped(&line, recorded);
			strbuf_addch(&line, '\n');
			int pf = openat(c->fd, rel,
					O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (pf >= 0) {
				(void)tally_write_all(pf, line.buf, line.len);
				close(pf);
			}
			strbuf_release(&line);
		}
		if (r == 1)
			tally_cache_touch(c, key);
	}
	close(out);
	if (r != 1)
		unlinkat(c->fd, tmp, 0);
	return r;
}

int tally_cache_add(struct tally_cache *c, const char *id_kind, const char *id, const char *src,
		    enum tally_cache_file f, const char *recorded)
{
	int fd = tally_open_regular(AT_FDCWD, src, TALLY_OPEN_FOLLOW, 0, NULL);
	if (fd < 0)
		return fd;
	int r = tally_cache_add_fd(c, id_kind, id, fd, src, f, recorded);
	close(fd);
	return r;
}

int tally_cache_add_image(struct tally_cache *c, const char *id_kind, const char *id, int src_fd,
			  const char *src, const char *recorded)
{
	int fd = src_fd >= 0 ? src_fd
			     : tally_open_regular(AT_FDCWD, src, TALLY_OPEN_FOLLOW, 0, NULL);
	if (fd < 0)
		return fd;
	int r = tally_cache_add_fd(c, id_kind, id, fd, src, TALLY_CACHE_IMAGE, recorded);
	if (r >= 0 && !strcmp(id_kind, "build-id")) {
		char key[TALLY_CACHE_KEY_MAX];
		if (tally_cache_key(id_kind, id, key) &&
		    !tally_cache_has(c, key, TALLY_CACHE_DEBUG)) {
			char *dbg = tally_cache_debug_file(fd, src, id);
			if (dbg) {
				int k = tally_cache_add(c, id_kind, id, dbg, TALLY_CACHE_DEBUG,
							NULL);
				if (k < 0 && r >= 0)
					r = k;
				free(dbg);
			}
		}
	}
	if (src_fd < 0)
		close(fd);
	return r < 0 ? r : 0;
}

/* ---- listing and pruning ---- */

/* Bytes of the entry's files and when it was last used (its 'used' time,
 * else its newest file's). */
static void entry_stat(int dfd, struct tally_cache_entry *e)
{
	static const char *const names[] = { "image", "debug", "path", "used" };
	struct stat st;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		e->bytes += (uint64_t)st.st_blocks * 512;
		double t = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
		if (i == 3 || t > e->used)
			e->used = t;
		if (i == 3)
			break;
		e->image = e->image || i == 0;
		e->debug = e->debug || i == 1;
	}
	struct strbuf p = STRBUF_INIT;
	if (tally_read_regular(&p, dfd, "path", 0, 1 << 16) == 0 && p.len) {
		p.buf[strcspn(p.buf, "\n")] = '\0';
		tally_unescape(p.buf);
		e->path = strbuf_detach(&p);
	}
	strbuf_release(&p);
}

static int cmp_used(const void *a, const void *b)
{
	const struct tally_cache_entry *x = a, *y = b;
	if (x->used != y->used)
		return x->used > y->used ? -1 : 1;
	return strcmp(x->key, y->key);
}

int tally_cache_list(const struct tally_cache *c, struct tally_cache_list *out)
{
	memset(out, 0, sizeof(*out));
	int dfd = openat(c->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return tally_seterr(-errno, "cannot read the build-id cache '%s': %s", c->path,
				    strerror(errno));
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !key_ok(de->d_name))
			continue;
		int efd =
			openat(c->fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (efd < 0)
			continue;
		GROW(out->v, out->alloc, out->n + 1);
		struct tally_cache_entry *e = &out->v[out->n++];
		memset(e, 0, sizeof(*e));
		e->key = xstrdup(de->d_name);
		entry_stat(efd, e);
		close(efd);
		out->bytes += e->bytes;
	}
	closedir(d);
	tally_qsort(out->v, out->n, sizeof(*out->v), cmp_used);
	return 0;
}

void tally_cache_list_release(struct tally_cache_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].path);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int tally_cache_limit(const struct tally_cache *c, uint64_t *out)
{
	const char *v = getenv("TALLY_BUILDID_CACHE_SIZE");
	if (v && *v)
		return tally_parse_size(v, "TALLY_BUILDID_CACHE_SIZE", 0, out);
	uint64_t max = TALLY_CACHE_DEFAULT_MAX;
	struct statvfs sv;
	if (c->fd >= 0 && fstatvfs(c->fd, &sv) == 0) {
		uint64_t tenth = (uint64_t)sv.f_blocks * sv.f_frsize / 10;
		if (tenth && tenth < max)
			max = tenth;
	}
	*out = max;
	return 0;
}

int tally_cache_remove(const struct tally_cache *c, const char *key)
{
	if (!key_ok(key))
		return -ENOENT;
	/* out of readers' sight first, then removed (never following a link) */
	char gone[64 + TALLY_CACHE_KEY_MAX];
	char tmp[64];
	tmp_name(tmp, sizeof(tmp));
	snprintf(gone, sizeof(gone), ".gone%s", tmp + 4);
	if (renameat(c->fd, key, c->fd, gone) < 0)
		return errno == ENOENT ? -ENOENT
				       : tally_seterr(-errno, "cannot remove '%s/%s': %s", c->path,
						      key, strerror(errno));
	struct strbuf p = STRBUF_INIT;
	strbuf_addf(&p, "%s/%s", c->path, gone);
	int r = tally_remove_tree(p.buf);
	strbuf_release(&p);
	return r;
}

/* Temporaries (.tmp-PID-..., .gone-PID-...) whose writer is gone. */
static void sweep_tmp(const struct tally_cache *c)
{
	int dfd = openat(c->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		int pid;
		if ((sscanf(de->d_name, ".tmp-%d-", &pid) != 1 &&
		     sscanf(de->d_name, ".gone-%d-", &pid) != 1) ||
		    pid <= 0)
			continue;
		/* this process's own may be being written (the filler's thread) */
		if (pid == (int)getpid() || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/%s", c->path, de->d_name);
		if (de->d_name[1] == 't')
			unlinkat(c->fd, de->d_name, 0);
		else
			tally_remove_tree(p.buf);
		strbuf_release(&p);
	}
	closedir(d);
}

int tally_cache_prune(const struct tally_cache *c, uint64_t max, size_t *removed, uint64_t *freed)
{
	if (removed)
		*removed = 0;
	if (freed)
		*freed = 0;
	sweep_tmp(c);
	struct tally_cache_list l;
	int r = tally_cache_list(c, &l);
	if (r)
		return r;
	uint64_t have = l.bytes;
	/* least recently used first: the list is most recent first */
	for (size_t i = l.n; i > 0 && have > max; i--) {
		struct tally_cache_entry *e = &l.v[i - 1];
		int k = tally_cache_remove(c, e->key);
		if (k && k != -ENOENT) {
			r = k;
			break;
		}
		have -= e->bytes;
		if (!k && removed)
			(*removed)++;
		if (!k && freed)
			*freed += e->bytes;
	}
	tally_cache_list_release(&l);
	return r;
}
