/* The temporaries lib/db keeps next to a database while it writes or removes
 * one (their names are made and recognized here only), and the recovery of
 * what a killed writer left: run by every open and every save (db.h). */
#define _GNU_SOURCE
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const temp_tag[] = {
	[TALLY_DB_STAGE] = "tmp",
	[TALLY_DB_OLD] = "old",
	[TALLY_DB_GONE] = "gone",
};

/* path without trailing slashes ("db/" is "db"; "/" stays). */
static char *trim_path(const char *path)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	return xstrndup(path, n);
}

/* The directory holding path ("." for a bare name); path has no trailing slash. */
static char *parent_of(const char *path)
{
	const char *s = strrchr(path, '/');
	if (!s)
		return xstrdup(".");
	if (s == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(s - path));
}

char *tally_db_temp_path(const char *path, enum tally_db_temp kind, int pid)
{
	char *p = trim_path(path), *dir = parent_of(p);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/.%s.%s-%d", dir, tally_basename(p), temp_tag[kind], pid);
	free(dir);
	free(p);
	return strbuf_detach(&sb);
}

bool tally_db_temp_parse(const char *name, enum tally_db_temp *kind, char **target, int *pid)
{
	if (name[0] != '.')
		return false;
	const char *dash = strrchr(name, '-');
	if (!dash || !dash[1] || strlen(dash + 1) > 9)
		return false;
	for (const char *c = dash + 1; *c; c++)
		if (!isdigit((unsigned char)*c))
			return false;
	long p = strtol(dash + 1, NULL, 10);
	if (p <= 0)
		return false;
	for (int k = 0; k < (int)ARRAY_SIZE(temp_tag); k++) {
		size_t tl = strlen(temp_tag[k]);
		const char *tag = dash - tl;
		/* ".NAME.TAG-PID" with a NAME of at least one character */
		if (tag < name + 3 || tag[-1] != '.' || strncmp(tag, temp_tag[k], tl))
			continue;
		*kind = (enum tally_db_temp)k;
		*pid = (int)p;
		if (target)
			*target = xstrndup(name + 1, (size_t)(tag - 1 - (name + 1)));
		return true;
	}
	return false;
}

/* Whether the process that made a temporary may still be at work on it. This
 * process is not (a save never runs inside another); a killed writer whose
 * parent has not reaped it yet (a zombie: kill(pid, 0) still finds it) is
 * not; a pid that another namespace reuses is told apart by the staging
 * directory's lock. */
static bool owner_alive(int pid)
{
	if (pid == (int)getpid())
		return false;
	if (kill(pid, 0) < 0 && errno != EPERM)
		return false;
	struct tally_pstat st;
	if (tally_pstat_read(pid, &st))
		return true; /* no /proc, or a line it cannot read: the pid alone says */
	return st.state != 'Z' && st.state != 'X';
}

/* Whether a staging directory is locked by its writer (tally_db_save holds
 * flock on it from its creation to its publication). */
static bool stage_locked(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool busy = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return busy;
}

struct temp {
	char *name, *target;
	enum tally_db_temp kind;
	int pid;
};

/* The temporaries in dir (of the database named only, when only is not NULL). */
static int recover_dir(const char *dir, const char *only, struct tally_db_recovery *rv)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		return -e;
	}
	struct temp *t = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct temp x;
		if (!tally_db_temp_parse(de->d_name, &x.kind, &x.target, &x.pid))
			continue;
		if (only && strcmp(x.target, only)) {
			free(x.target);
			continue;
		}
		x.name = xstrdup(de->d_name);
		GROW(t, cap, n + 1);
		t[n++] = x;
	}
	int ret = 0;
	uid_t me = geteuid();
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		/* only directories this user made: never another user's files */
		if (fstatat(dfd, t[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != me)
			continue;
		bool live = owner_alive(t[i].pid);
		if (!live && t[i].kind == TALLY_DB_STAGE)
			live = stage_locked(dfd, t[i].name);
		if (!live && t[i].kind == TALLY_DB_OLD) {
			/* cut between its two renames, or at work between them: its stage tells */
			struct strbuf s = STRBUF_INIT;
			strbuf_addf(&s, ".%s.%s-%d", t[i].target, temp_tag[TALLY_DB_STAGE],
				    t[i].pid);
			live = stage_locked(dfd, s.buf);
			strbuf_release(&s);
		}
		if (live) {
			rv->kept++;
			continue;
		}
		if (t[i].kind == TALLY_DB_OLD &&
		    fstatat(dfd, t[i].target, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
			/* the database was moved aside and its successor never came: put it back */
			int r = renameat2(dfd, t[i].name, dfd, t[i].target, RENAME_NOREPLACE);
			if (r < 0 && errno == EINVAL)
				r = renameat(dfd, t[i].name, dfd, t[i].target);
			if (r == 0) {
				rv->restored++;
				continue;
			}
			if (errno == ENOENT)
				continue; /* another reader put it back first */
		}
		struct strbuf full = STRBUF_INIT;
		strbuf_addf(&full, "%s/%s", dir, t[i].name);
		int r = tally_remove_tree(full.buf);
		strbuf_release(&full);
		if (r == 0)
			rv->removed++;
		else if (!ret)
			ret = r;
	}
	for (size_t i = 0; i < n; i++) {
		free(t[i].name);
		free(t[i].target);
	}
	free(t);
	closedir(d);
	return ret;
}

int tally_db_recover(const char *path, struct tally_db_recovery *out)
{
	struct tally_db_recovery rv = { 0 };
	if (!*path)
		return 0;
	char *p = trim_path(path), *dir = parent_of(p);
	int ret = recover_dir(dir, tally_basename(p), &rv);
	/* a daemon's directory holds its epochs' and drains' temporaries */
	struct strbuf m = STRBUF_INIT;
	strbuf_addf(&m, "%s/%s", p, TALLY_DAEMON_MARKER);
	struct stat st;
	if (lstat(m.buf, &st) == 0 && S_ISREG(st.st_mode)) {
		int r = recover_dir(p, NULL, &rv);
		if (r && !ret)
			ret = r;
	}
	strbuf_release(&m);
	free(dir);
	free(p);
	if (out)
		*out = rv;
	return ret;
}

int tally_db_remove(const char *path)
{
	char *gone = tally_db_temp_path(path, TALLY_DB_GONE, (int)getpid());
	int r = 0;
	/* out of readers' sight first, then removed */
	if (rename(path, gone) < 0)
		r = tally_seterr(-errno, "cannot remove '%s': %s", path, strerror(errno));
	else
		tally_remove_tree(gone);
	free(gone);
	return r;
}
