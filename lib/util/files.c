/* Files: opened without following links, read within a bound, written atomically. */
#define _GNU_SOURCE
#include "tally/util.h"
#include "lib/util/internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Whether path is by its name one of this process's descriptors:
 * /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N (links the system
 * keeps in directories of its own, the only links an output follows). */
static bool fd_name(const char *path)
{
	if (!strcmp(path, "/dev/stdout") || !strcmp(path, "/dev/stderr"))
		return true;
	static const char *const dirs[] = { "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		size_t n = strlen(dirs[i]);
		if (!strncmp(path, dirs[i], n) && path[n] &&
		    strspn(path + n, "0123456789") == strlen(path + n))
			return true;
	}
	return false;
}

static bool stream_mode(mode_t m)
{
	return S_ISCHR(m) || S_ISFIFO(m) || S_ISSOCK(m);
}

bool tally_path_is_stream(const char *path)
{
	struct stat st;
	/* a descriptor the shell set up (-o /dev/stdout > FILE): written through, not replaced */
	if (fd_name(path))
		return stat(path, &st) == 0 && (stream_mode(st.st_mode) || S_ISREG(st.st_mode));
	/* anything else as it is: a link (even to a device) is replaced, never followed */
	return lstat(path, &st) == 0 && stream_mode(st.st_mode);
}

int tally_open_stream(const char *path)
{
	bool fdn = fd_name(path);
	/* appended: a file behind /dev/stdout is written after what is there, as by the shell */
	int fd = open(path, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC | (fdn ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return tally_seterr(-errno, "cannot write '%s': %s", path, strerror(errno));
	/* checked on the descriptor: a name swapped after it was looked at (a
	 * FIFO in /tmp replaced by a file) is never written through */
	struct stat st;
	if (fstat(fd, &st) < 0 || !(stream_mode(st.st_mode) || (fdn && S_ISREG(st.st_mode)))) {
		close(fd);
		return tally_seterr(
			-EAGAIN,
			"cannot write '%s': it changed while it was opened (write it again)", path);
	}
	return fd;
}

/* A device, a pipe or a socket at path: written into, never replaced. */

static int write_stream(const char *path, const void *data, size_t len)
{
	int fd = tally_open_stream(path);
	if (fd < 0)
		return fd;
	int e = -tally_write_all(fd, data, len);
	if (close(fd) < 0 && !e && errno != EINTR)
		e = errno;
	if (e)
		return tally_seterr(-e, "cannot write '%s': %s", path, strerror(e));
	return 0;
}

static int write_atomic(const char *path, const void *data, size_t len, mode_t mode, bool umasked)
{
	if (!*path)
		return tally_seterr(-EINVAL, "cannot write a file with an empty name");
	struct stat st;
	if (tally_path_is_stream(path))
		return write_stream(path, data, len);
	if (lstat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return tally_seterr(-EISDIR, "cannot write '%s': it is a directory", path);
		/* the user chose the mode of a file of theirs: the new one keeps it */
		if (S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
			mode = st.st_mode & 07777;
			umasked = false;
		}
	}
	if (umasked) {
		mode_t um = umask(0);
		umask(um);
		mode &= ~um;
	}
	/* an unpredictable name, created exclusively (O_CREAT|O_EXCL: a planted
	 * symbolic link or file is never opened), mode 0600 until it is complete */
	struct strbuf tmp = STRBUF_INIT;
	strbuf_addf(&tmp, "%s.tmp-XXXXXX", path);
	int fd = mkostemp(tmp.buf, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		strbuf_release(&tmp);
		char *dir = tally_dirname(path);
		struct stat ds;
		int r;
		if (e == ENOENT && stat(dir, &ds) == 0 && S_ISDIR(ds.st_mode))
			/* no such file, in a directory that is there: /proc, /sys */
			r = tally_seterr(
				-e,
				"cannot write '%s': directory '%s' takes no new files (a virtual file system such as /proc: write elsewhere)",
				path, dir);
		else
			r = tally_seterr(-e, "cannot write '%s': %s%s", path, strerror(e),
					 e == ENOSPC || e == EDQUOT ? " (free some space)" : "");
		free(dir);
		return r;
	}
	int e = -tally_write_all(fd, data, len);
	if (!e && mode != 0600 && fchmod(fd, mode) < 0)
		e = errno;
	if (!e && fsync(fd) < 0)
		e = errno;
	if (close(fd) < 0 && !e)
		e = errno;
	/* rename replaces path itself, never what a link at path points to */
	if (!e && rename(tmp.buf, path) < 0)
		e = errno;
	if (e)
		unlink(tmp.buf);
	strbuf_release(&tmp);
	if (e)
		return tally_seterr(-e, "cannot write '%s': %s%s", path, strerror(e),
				    e == ENOSPC || e == EDQUOT ? " (free some space)" : "");
	return 0;
}

int tally_write_file_atomic(const char *path, const void *data, size_t len)
{
	return write_atomic(path, data, len, 0600, false);
}

int tally_write_file_atomic_mode(const char *path, const void *data, size_t len, unsigned mode)
{
	return write_atomic(path, data, len, (mode_t)mode & 07777, true);
}

/* name (relative to dfd) and everything under it, through directory fds. */
static int remove_at(int dfd, const char *name)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	int ret = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = remove_at(dirfd(d), de->d_name);
		if (r && !ret)
			ret = r;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && !ret)
		ret = -errno;
	return ret;
}

int tally_remove_tree(const char *path)
{
	return remove_at(AT_FDCWD, path);
}

const char *tally_file_kind(unsigned mode)
{
	mode_t m = (mode_t)mode;
	return S_ISREG(m)    ? "a regular file"
	       : S_ISDIR(m)  ? "a directory"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISLNK(m)  ? "a symbolic link"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
			     : "of an unknown type";
}

static int not_regular(const char *path, mode_t m)
{
	return tally_seterr(S_ISDIR(m)   ? -EISDIR
			    : S_ISLNK(m) ? -ELOOP
					 : -EINVAL,
			    "'%s' is %s, not a regular file", path, tally_file_kind(m));
}

int tally_open_regular(int dirfd, const char *path, int flags, uint64_t max_size, struct stat *out)
{
	bool follow = flags & TALLY_OPEN_FOLLOW;
	struct stat st;
	/* what it is before it is opened: a device is never opened (a watchdog
	 * starts counting when it is), a FIFO never waited on */
	if (fstatat(dirfd, path, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
		return tally_seterr(-errno, "cannot open '%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return not_regular(path, st.st_mode);
	int fd = openat(dirfd, path,
			O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow ? 0 : O_NOFOLLOW));
	if (fd < 0) {
		if (errno == ELOOP && !follow)
			return not_regular(path, S_IFLNK);
		return tally_seterr(-errno, "cannot open '%s': %s", path, strerror(errno));
	}
	/* and what was opened: it may have been swapped since the look */
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return tally_seterr(-e, "cannot read '%s': %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return not_regular(path, st.st_mode);
	}
	if (max_size && (uint64_t)st.st_size > max_size) {
		char m[32];
		tally_format_size(max_size, m, sizeof(m));
		close(fd);
		return tally_seterr(-EFBIG, "'%s' is larger than %s", path, m);
	}
	/* the non-blocking open was for the open only */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	if (out)
		*out = st;
	return fd;
}

int tally_read_fd(struct strbuf *sb, int fd, const char *what, uint64_t max)
{
	size_t start = sb->len;
	for (;;) {
		if (sb->alloc - sb->len < 2 && strbuf_grow(sb, 65536)) {
			if (sb->buf)
				sb->buf[sb->len] = '\0';
			return tally_seterr(-ENOMEM, "cannot read '%s': out of memory", what);
		}
		ssize_t n = read(fd, sb->buf + sb->len, sb->alloc - sb->len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			sb->buf[sb->len] = '\0';
			return tally_seterr(-e, "cannot read '%s': %s", what, strerror(e));
		}
		sb->buf[sb->len + (size_t)n] = '\0';
		if (n == 0)
			return 0;
		sb->len += (size_t)n;
		if (max && sb->len - start > max) {
			char m[32];
			tally_format_size(max, m, sizeof(m));
			return tally_seterr(-EFBIG, "'%s' is larger than %s", what, m);
		}
	}
}

int tally_read_regular(struct strbuf *sb, int dirfd, const char *path, int flags, uint64_t max_size)
{
	struct stat st;
	int fd = tally_open_regular(dirfd, path, flags, max_size, &st);
	if (fd < 0)
		return fd;
	/* one allocation for the whole file (it may still grow: the bound holds) */
	if ((uint64_t)st.st_size >= SIZE_MAX || strbuf_grow(sb, (size_t)st.st_size + 1)) {
		close(fd);
		return tally_seterr(-ENOMEM,
				    "cannot read '%s': out of memory for its %" PRIu64 " bytes",
				    path, (uint64_t)st.st_size);
	}
	int r = tally_read_fd(sb, fd, path, max_size);
	close(fd);
	return r;
}

double tally_now_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double tally_now_wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void tally_format_utc(double wall, char *buf, size_t n)
{
	struct tm tm;
	/* years 0 to 9999 only: a time_t cast of anything else is undefined or unprintable */
	if (!(wall >= -62167219200.0 && wall < 253402300800.0)) {
		snprintf(buf, n, "(no valid time)");
		return;
	}
	time_t t = (time_t)wall;
	if (!gmtime_r(&t, &tm)) {
		snprintf(buf, n, "(no valid time)");
		return;
	}
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char *tally_basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

char *tally_dirname(const char *path)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/') /* trailing slashes */
		n--;
	while (n && path[n - 1] != '/') /* the last component */
		n--;
	if (!n)
		return xstrdup(".");
	while (n > 1 && path[n - 1] == '/') /* the slashes before it */
		n--;
	return xstrndup(path, n);
}

int tally_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t k = write(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

int tally_parse_size(const char *s, const char *what, uint64_t min, uint64_t *out)
{
	char q[TALLY_EXCERPT_SIZE];
	const char *p = s;
	uint64_t v = 0;
	bool huge = false;
	if (!s || !isdigit((unsigned char)*p))
		goto bad;
	while (isdigit((unsigned char)*p)) {
		uint64_t d = (uint64_t)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			huge = true;
		else
			v = v * 10 + d;
		p++;
	}
	int shift = 0;
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 't': case 'T': shift = 40; p++; break;
	default: break;
	}
	if (shift && *p == 'i')
		p++;
	if (*p == 'B' || (*p == 'b' && !shift))
		p++;
	if (*p)
		goto bad;
	if (huge || v > (TALLY_SIZE_MAX >> shift))
		huge = true;
	else
		v <<= shift;
	if (huge || v < min) {
		char m[32], x[32];
		tally_format_size(min, m, sizeof(m));
		tally_format_size(TALLY_SIZE_MAX, x, sizeof(x));
		return tally_seterr(-EINVAL, "invalid %s '%s': must be at least %s and at most %s",
				    what, tally_excerpt(q, s), m, x);
	}
	*out = v;
	return 0;
bad:
	return tally_seterr(-EINVAL, "invalid %s '%s': expected a size such as 512k, 64M or 2G",
			    what, tally_excerpt(q, s));
}

void tally_format_size(uint64_t bytes, char *buf, size_t n)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024 && u + 1 < ARRAY_SIZE(unit)) {
		v /= 1024;
		u++;
	}
	if (!u)
		snprintf(buf, n, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, n, "%.1f %s", v, unit[u]);
}

int tally_pstat_read(int pid, struct tally_pstat *st)
{
	char path[64], buf[1024];
	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	/* "pid (comm) S ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime cutime cstime priority nice threads itreal start" */
	const char *rp = strrchr(buf, ')');
	unsigned long long start = 0;
	int got = rp ? sscanf(rp + 1,
			      " %c %d %d %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s"
			      " %llu",
			      &st->state, &st->ppid, &st->pgrp, &st->session, &start)
		     : 0;
	if (got < 4)
		return -EINVAL;
	if (got == 5)
		st->start_ticks = start;
	return 0;
}

uint64_t tally_pstat_start_ns(const struct tally_pstat *st)
{
	long hz = sysconf(_SC_CLK_TCK);
	if (!st->start_ticks || hz <= 0)
		return 0;
	return st->start_ticks * (1000000000ull / (uint64_t)hz);
}
