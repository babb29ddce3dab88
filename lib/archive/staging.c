/* What archives leave on disk while they are made or read (an archive's
 * staging copy and stripped copies next to OUT, a tarball unpacked into
 * $TMPDIR) is never left behind: each is named PREFIX + PID-XXXXXX, held with
 * flock(2) by the process that made it, and removed by the handlers of
 * SIGINT, SIGTERM, SIGHUP and SIGPIPE when one ends the process; what a
 * process killed outright (kill -9, a crash) left is removed by the next run
 * that looks there, when it provably is ours and abandoned: owned by this
 * user, not a link, in a directory no other user may rename things into,
 * not locked, and its process gone. Nothing named like ours but not ours is
 * ever opened for writing, followed, or removed. */
#define _GNU_SOURCE
#include "tally/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/archive/internal.h"

/* ---- removing a tree, async-signal-safe ---- */

/* rm -rf of dfd/name with no allocation and no link followed (each
 * directory opened O_NOFOLLOW, its entries unlinked through its fd): what a
 * signal handler may do. Our trees hold only directories and regular files
 * that this user made in a directory of mode 0700, and names of at most 1024
 * bytes (tally_archive_name_ok); a deeper or stranger tree is left as it is
 * where it cannot be removed. */
static void remove_tree_at(int dfd, const char *name)
{
	int top = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0) {
		if (errno == ENOTDIR || errno == ELOOP)
			unlinkat(dfd, name, 0);
		return;
	}
	char rel[4096];
	size_t len = 0;
	rel[0] = '\0';
	_Alignas(8) char buf[4096];
	/* each step goes down one directory or removes one: bounded */
	for (unsigned steps = 0; steps < (1u << 22); steps++) {
		int fd = openat(top, len ? rel : ".",
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			break;
		bool down = false, removed = false;
		for (;;) {
			ssize_t n = getdents64(fd, buf, sizeof(buf));
			if (n <= 0)
				break;
			for (ssize_t off = 0; off < n && !down;) {
				struct dirent64 *d = (struct dirent64 *)(buf + off);
				off += d->d_reclen;
				const char *e = d->d_name;
				if (!strcmp(e, ".") || !strcmp(e, ".."))
					continue;
				if (unlinkat(fd, e, 0) == 0) {
					removed = true;
					continue;
				}
				if (errno != EISDIR)
					continue;
				size_t el = strlen(e);
				if (len + 1 + el + 1 > sizeof(rel))
					continue;
				if (len)
					rel[len++] = '/';
				memcpy(rel + len, e, el + 1);
				len += el;
				down = true;
			}
			if (down)
				break;
		}
		close(fd);
		/* entries unlinked while the directory was read may hide others: read it again */
		if (down || removed)
			continue;
		if (!len)
			break;
		if (unlinkat(top, rel, AT_REMOVEDIR) < 0)
			break; /* not empty: something we cannot remove; leave the rest */
		while (len && rel[len - 1] != '/')
			len--;
		if (len)
			len--;
		rel[len] = '\0';
	}
	close(top);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

/* ---- what this process holds ---- */

/* A fixed table the handlers read without locks: a slot is filled before
 * its state says so and emptied after its state says not. */
#define SLOTS 256
static struct slot {
	volatile sig_atomic_t used;
	pid_t pid;  /* the process that holds it (a forked child never removes its parent's) */
	int dirfd;  /* the directory it is in */
	int lockfd; /* it, opened, flock()ed */
	dev_t dev;
	ino_t ino;
	char name[NAME_MAX + 1];
} slots[SLOTS];
static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };

static void on_signal(int sig)
{
	pid_t me = getpid();
	for (int i = 0; i < SLOTS; i++) {
		struct slot *s = &slots[i];
		struct stat st;
		if (s->used && s->pid == me &&
		    fstatat(s->dirfd, s->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    st.st_dev == s->dev && st.st_ino == s->ino)
			remove_tree_at(s->dirfd, s->name);
	}
	/* then the signal does what it did: it ends the process (blocked here, it
	 * is delivered as the handler returns) */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	raise(sig);
}

/* Our handler for each signal that nobody else handles or ignores (a
 * command with its own handler ends its work and releases what it opened). */
static void install_handlers(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
		struct sigaction old;
		if (sigaction(sigs[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
		    old.sa_handler == SIG_DFL)
			sigaction(sigs[i], &sa, NULL);
	}
}

int tally_ar_hold(int dirfd, const char *name)
{
	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))) {
		close(fd);
		return -EINVAL;
	}
	/* the lock says "in use" to a later run; where locks are not supported,
	 * the process id in the name still does */
	flock(fd, LOCK_EX | LOCK_NB);
	int pfd = dirfd == AT_FDCWD ? open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
				    : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (pfd < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	sigset_t block, old;
	sigemptyset(&block);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaddset(&block, sigs[i]);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	install_handlers();
	/* what was removed since (an unpacked archive, by tally_db_release) is
	 * no longer held: its slot is free again */
	for (int i = 0; i < SLOTS; i++) {
		struct stat cur;
		if (slots[i].used &&
		    (fstatat(slots[i].dirfd, slots[i].name, &cur, AT_SYMLINK_NOFOLLOW) < 0 ||
		     cur.st_dev != slots[i].dev || cur.st_ino != slots[i].ino))
			tally_ar_release(i);
	}
	int slot = -1;
	for (int i = 0; i < SLOTS && slot < 0; i++)
		if (!slots[i].used)
			slot = i;
	if (slot >= 0) {
		struct slot *s = &slots[slot];
		s->pid = getpid();
		s->dirfd = pfd;
		s->lockfd = fd;
		s->dev = st.st_dev;
		s->ino = st.st_ino;
		strcpy(s->name, name);
		s->used = 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (slot < 0) {
		/* more at once than the table holds: this one is not removed on a
		 * signal, but the next run still finds it abandoned */
		close(pfd);
		close(fd);
	}
	return slot;
}

void tally_ar_release(int slot)
{
	if (slot < 0 || slot >= SLOTS || !slots[slot].used)
		return;
	struct slot *s = &slots[slot];
	s->used = 0;
	close(s->lockfd);
	close(s->dirfd);
}

int tally_ar_hold_path(const char *path)
{
	const char *base = tally_basename(path);
	if (base == path)
		return tally_ar_hold(AT_FDCWD, path);
	char *dir = xstrndup(path, (size_t)(base - path));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (dfd < 0)
		return -errno;
	int r = tally_ar_hold(dfd, base);
	close(dfd);
	return r;
}

/* ---- what a process that was killed left ---- */

/* Whether name is PREFIX followed by PID-XXXXXX (six characters of
 * mkdtemp's), and that pid. */
static bool our_name(const char *name, const char *prefix, pid_t *pid)
{
	size_t pl = strlen(prefix);
	if (strncmp(name, prefix, pl))
		return false;
	const char *p = name + pl;
	long v = 0;
	size_t digits = 0;
	for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
		v = v * 10 + (*p - '0');
	if (!digits || *p != '-' || v <= 0 || v > INT_MAX)
		return false;
	p++;
	for (int i = 0; i < 6; i++, p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return false;
	if (*p)
		return false;
	*pid = (pid_t)v;
	return true;
}

static bool alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno != ESRCH;
}

int tally_ar_tidy(const char *dir, const char *const *prefixes, size_t nprefixes)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	struct stat dst;
	uid_t me = geteuid();
	/* where another user may rename or link things in (a shared directory
	 * without the sticky bit, one of another user's), nothing there is
	 * provably ours: left alone */
	if (fstat(dfd, &dst) < 0 || (dst.st_uid != me && dst.st_uid != 0) ||
	    ((dst.st_mode & (S_IWGRP | S_IWOTH)) && !(dst.st_mode & S_ISVTX))) {
		close(dfd);
		return 0;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	int removed = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t pid = 0;
		bool match = false;
		for (size_t i = 0; i < nprefixes && !match; i++)
			match = our_name(de->d_name, prefixes[i], &pid);
		if (!match || pid == getpid())
			continue;
		struct stat st, fst;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_uid != me || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
			continue;
		int fd = openat(dirfd(d), de->d_name,
				O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
					(S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
		if (fd < 0)
			continue;
		/* the one looked at, still ours, and no process holds it */
		if (fstat(fd, &fst) == 0 && fst.st_dev == st.st_dev && fst.st_ino == st.st_ino &&
		    fst.st_uid == me && flock(fd, LOCK_EX | LOCK_NB) == 0 && !alive(pid)) {
			remove_tree_at(dirfd(d), de->d_name);
			removed++;
		}
		close(fd);
	}
	closedir(d);
	return removed;
}
