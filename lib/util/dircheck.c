/* Directories that other users must not be able to change (util.h,
 * tally_dir_check): a path walked from '/' one component at a time, each
 * looked at without following it and opened with O_NOFOLLOW, a symbolic link
 * followed only once it has passed the checks itself. Used for what tally
 * later believes or writes into without looking again: a job's results and
 * profilers' state, the build-id cache (lib/cache). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tally/util.h"

/* path quoted whole for an error message (escaped, at most 400 bytes), in sb. */
static const char *qpath(struct strbuf *sb, const char *path)
{
	strbuf_reset(sb);
	strbuf_add_excerpt(sb, path, strlen(path), 400);
	return sb->buf;
}

/* Whether the entry st (at path) of the directory pst (at ppath; NULL for
 * '/') is out of other users' reach, for tally_dir_check: 0, or -EPERM with
 * the reason. leaf: the directory asked for itself. */
static int dir_entry_ok(const struct stat *pst, const char *ppath, const struct stat *st,
			const char *path, enum tally_dir_trust trust, bool leaf)
{
	uid_t me = geteuid();
	struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
	int ret = 0;
	bool link = S_ISLNK(st->st_mode);
	if (pst && (pst->st_mode & 022)) {
		/* a shared directory (/tmp): a sticky one only, and in it only what
		 * is ours or root's, which nobody else may rename or remove there */
		if (!(pst->st_mode & S_ISVTX))
			ret = tally_seterr(
				-EPERM,
				"'%s' is writable by others, who could replace what is in it",
				qpath(&a, ppath));
		else if (st->st_uid != me && st->st_uid != 0)
			ret = tally_seterr(
				-EPERM,
				"'%s' belongs to uid %u, not to you, in the shared directory '%s'",
				qpath(&a, path), (unsigned)st->st_uid, qpath(&b, ppath));
	}
	if (!ret && trust == TALLY_DIR_PRIVATE) {
		/* every directory on the way ours or root's and written by its
		 * owner alone (sticky ones excepted, checked above); the last ours */
		if (st->st_uid != me && (st->st_uid != 0 || (leaf && !link)))
			ret = tally_seterr(-EPERM, "'%s' belongs to uid %u, not to you",
					   qpath(&a, path), (unsigned)st->st_uid);
		else if (!link && (st->st_mode & 022) && (leaf || !(st->st_mode & S_ISVTX)))
			ret = tally_seterr(-EPERM, "'%s' is writable by others (chmod go-w '%s')",
					   qpath(&a, path), qpath(&b, path));
	}
	strbuf_release(&a);
	strbuf_release(&b);
	return ret;
}

/* fd becomes '/' again, pst its stat. */
static int dir_walk_root(int *fd, struct stat *pst)
{
	int nfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (nfd < 0 || fstat(nfd, pst) < 0) {
		int e = errno;
		if (nfd >= 0)
			close(nfd);
		return tally_seterr(-e, "cannot open '/': %s", strerror(e));
	}
	if (*fd >= 0)
		close(*fd);
	*fd = nfd;
	return 0;
}

int tally_dir_check(const char *path, unsigned create_mode, enum tally_dir_trust trust,
		    char **resolved)
{
	/* todo: what is left to walk; done: the part walked, without links,
	 * "." or ".." (so its ".." is its lexical parent) */
	struct strbuf todo = STRBUF_INIT, done = STRBUF_INIT, q = STRBUF_INIT;
	char *name = NULL, *here = NULL;
	int ret = 0, links = 0, fd = -1;
	struct stat pst;
	if (path[0] != '/') {
		char *cwd = getcwd(NULL, 0);
		if (!cwd)
			return tally_seterr(-errno, "cannot find the working directory: %s",
					    strerror(errno));
		strbuf_addf(&todo, "%s/", cwd);
		free(cwd);
	}
	strbuf_addstr(&todo, path);
	if ((ret = dir_walk_root(&fd, &pst)))
		goto out;
	if (trust == TALLY_DIR_PRIVATE && (ret = dir_entry_ok(NULL, NULL, &pst, "/", trust, false)))
		goto out;
	for (size_t at = 0;;) {
		at += strspn(todo.buf + at, "/");
		size_t len = strcspn(todo.buf + at, "/");
		if (!len)
			break;
		free(name);
		name = xstrndup(todo.buf + at, len);
		at += len;
		bool leaf = !todo.buf[at + strspn(todo.buf + at, "/")];
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, "..")) {
			char *slash = done.len ? strrchr(done.buf, '/') : NULL;
			if (slash) {
				done.len = (size_t)(slash - done.buf);
				done.buf[done.len] = 0;
			}
			int nfd = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (nfd < 0 || fstat(nfd, &pst) < 0) {
				ret = tally_seterr(-errno, "cannot open '%s/..': %s",
						   qpath(&q, done.len ? done.buf : ""),
						   strerror(errno));
				if (nfd >= 0)
					close(nfd);
				goto out;
			}
			close(fd);
			fd = nfd;
			continue;
		}
		free(here);
		struct strbuf h = STRBUF_INIT;
		strbuf_addf(&h, "%s/%s", done.len ? done.buf : "", name);
		here = strbuf_detach(&h);
		struct stat st;
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			int e = errno;
			if (e != ENOENT || !create_mode) {
				ret = tally_seterr(-e, "cannot reach '%s': %s", qpath(&q, here),
						   strerror(e));
				goto out;
			}
			if (mkdirat(fd, name, create_mode) < 0 && errno != EEXIST) {
				ret = tally_seterr(-errno, "cannot make the directory '%s': %s",
						   qpath(&q, here), strerror(errno));
				goto out;
			}
			if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				ret = tally_seterr(-errno, "cannot reach '%s': %s", qpath(&q, here),
						   strerror(errno));
				goto out;
			}
		}
		if ((ret = dir_entry_ok(&pst, done.len ? done.buf : "/", &st, here, trust, leaf)))
			goto out;
		if (S_ISLNK(st.st_mode)) {
			/* a link out of others' reach: what it names is walked instead */
			char target[PATH_MAX];
			ssize_t k = readlinkat(fd, name, target, sizeof(target) - 1);
			if (k <= 0 || ++links > 40) {
				ret = tally_seterr(k <= 0 ? -EINVAL : -ELOOP,
						   "cannot follow the link '%s'%s", qpath(&q, here),
						   k <= 0 ? "" : ": too many links");
				goto out;
			}
			target[k] = 0;
			struct strbuf nt = STRBUF_INIT;
			strbuf_addf(&nt, "%s/%s", target, todo.buf + at);
			strbuf_release(&todo);
			todo = nt;
			at = 0;
			if (target[0] == '/') {
				strbuf_reset(&done);
				if ((ret = dir_walk_root(&fd, &pst)))
					goto out;
			}
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			ret = tally_seterr(-ENOTDIR, "'%s' is %s, not a directory", qpath(&q, here),
					   tally_file_kind(st.st_mode));
			goto out;
		}
		int nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat nst;
		if (nfd < 0 || fstat(nfd, &nst) < 0 || nst.st_dev != st.st_dev ||
		    nst.st_ino != st.st_ino) {
			if (nfd >= 0)
				close(nfd);
			ret = tally_seterr(-EAGAIN, "'%s' changed while it was checked (try again)",
					   qpath(&q, here));
			goto out;
		}
		close(fd);
		fd = nfd;
		pst = st;
		strbuf_addf(&done, "/%s", name);
	}
	if (trust == TALLY_DIR_PRIVATE && !done.len)
		ret = tally_seterr(-EPERM, "'/' cannot be a directory of your own");
	else if (resolved)
		*resolved = done.len ? strbuf_detach(&done) : xstrdup("/");
out:
	if (fd >= 0)
		close(fd);
	free(name);
	free(here);
	strbuf_release(&todo);
	strbuf_release(&done);
	strbuf_release(&q);
	return ret;
}

int tally_file_check(const char *path, enum tally_dir_trust trust)
{
	struct strbuf q = STRBUF_INIT;
	char *real = realpath(path, NULL);
	if (!real) {
		int e = errno;
		int r = tally_seterr(-e, "cannot reach '%s': %s", qpath(&q, path), strerror(e));
		strbuf_release(&q);
		return r;
	}
	char *dir = tally_dirname(real);
	int ret = tally_dir_check(dir, 0, trust, NULL);
	struct stat pst, st;
	if (!ret && (stat(dir, &pst) < 0 || lstat(real, &st) < 0))
		ret = tally_seterr(-errno, "cannot reach '%s': %s", qpath(&q, real),
				   strerror(errno));
	/* as a directory on the way would be, and never writable by others */
	if (!ret)
		ret = dir_entry_ok(&pst, dir, &st, real, TALLY_DIR_SHARED, true);
	if (!ret && (st.st_mode & 022))
		ret = tally_seterr(-EPERM, "'%s' is writable by others (chmod go-w '%s')",
				   qpath(&q, real), real);
	free(dir);
	free(real);
	strbuf_release(&q);
	return ret;
}
