/* Record-time aggregation: JIT code, perf maps and jitdumps (the checks, the
 * warning budget, the snapshot at exit and the settling of anonymous samples). */
#define _GNU_SOURCE
#include "tally/agg.h"
#include "internal.h"
#include "tally/elfinfo.h"
#include "tally/unwind.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define JIT_WARN_MAX 32

static void jit_warn(struct tally_agg *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void jit_warn(struct tally_agg *a, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	size_t listed = a->njit_warnings < JIT_WARN_MAX ? a->njit_warnings : JIT_WARN_MAX - 1;
	for (size_t i = 0; i < listed; i++)
		if (!strcmp(a->jit_warnings[i], sb.buf)) {
			strbuf_release(&sb);
			return;
		}
	if (a->njit_warnings < JIT_WARN_MAX - 1) {
		GROW(a->jit_warnings, a->ajit_warnings, a->njit_warnings + 1);
		a->jit_warnings[a->njit_warnings++] = strbuf_detach(&sb);
		return;
	}
	/* many processes (a hostile user's, perhaps): the session stays small */
	strbuf_reset(&sb);
	a->jit_warnings_more++;
	strbuf_addf(&sb, "%" PRIu64 " more JIT warning%s not listed (only the first %d are)",
		    a->jit_warnings_more, a->jit_warnings_more == 1 ? "" : "s", JIT_WARN_MAX - 1);
	if (a->njit_warnings == JIT_WARN_MAX) {
		free(a->jit_warnings[JIT_WARN_MAX - 1]);
	} else {
		GROW(a->jit_warnings, a->ajit_warnings, a->njit_warnings + 1);
		a->njit_warnings++;
	}
	a->jit_warnings[JIT_WARN_MAX - 1] = strbuf_detach(&sb);
}

/* The file from its start (the runtime keeps appending to it), at most max bytes;
 * *more says whether it had more. */
static int read_fd(struct strbuf *sb, int fd, size_t max, bool *more)
{
	strbuf_reset(sb);
	*more = false;
	off_t at = 0;
	while (sb->len < max) {
		if (strbuf_grow(sb, 65536))
			return -ENOMEM;
		size_t want = sb->alloc - sb->len - 1;
		if (want > max - sb->len)
			want = max - sb->len;
		ssize_t n = pread(fd, sb->buf + sb->len, want, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		sb->len += (size_t)n;
		at += n;
	}
	if (sb->len == max) {
		char c;
		ssize_t n;
		while ((n = pread(fd, &c, 1, at)) < 0 && errno == EINTR)
			;
		*more = n > 0;
	}
	if (sb->buf)
		sb->buf[sb->len] = '\0';
	return 0;
}

/* "a FIFO": what a file that is not the one expected is, for warnings. */
static const char *file_kind(const struct stat *st)
{
	switch (st->st_mode & S_IFMT) {
	case S_IFLNK: return "a symbolic link";
	case S_IFIFO: return "a FIFO";
	case S_IFDIR: return "a directory";
	case S_IFCHR: case S_IFBLK: return "a device";
	case S_IFSOCK: return "a socket";
	case S_IFREG: return "another file";
	default: return "something else";
	}
}

void agg_snapshot_jit(struct tally_agg *a, struct tally_proc *p)
{
	if (p->jit_image == TALLY_HIDX_NONE)
		return;
	struct tally_image *im = &a->images[p->jit_image];
	struct strbuf sb = STRBUF_INIT;
	size_t budget = a->jit_budget, used = 0;
	char bs[32];
	tally_format_size(budget, bs, sizeof(bs));
	bool more;
	if (p->jit == 1) {
		/* from the descriptor opened when it was checked: never by its name again,
		 * which its owner may have pointed anywhere since */
		char mp[64];
		snprintf(mp, sizeof(mp), "/tmp/perf-%d.map", p->pid);
		if (read_fd(&sb, p->jit_map_fd, budget, &more) == 0) {
			if (more) {
				/* whole lines only */
				char *nl = sb.len ? memrchr(sb.buf, '\n', sb.len) : NULL;
				sb.len = nl ? (size_t)(nl - sb.buf) + 1 : 0;
				sb.buf[sb.len] = '\0';
				jit_warn(
					a,
					"perf map '%s' of pid %d is larger than the per-process JIT budget of %s: only its first %zu bytes are used",
					mp, p->pid, bs, sb.len);
			}
			used = sb.len;
			free(im->jit_map);
			im->jit_map_len = sb.len;
			im->jit_map = strbuf_detach(&sb);
		} else {
			jit_warn(a, "perf map '%s' of pid %d: cannot read it: %s", mp, p->pid,
				 strerror(errno));
		}
		struct stat st;
		if (lstat(mp, &st) == 0 && ((uint64_t)st.st_dev != p->jit_map_dev ||
					    (uint64_t)st.st_ino != p->jit_map_ino))
			jit_warn(
				a,
				"perf map '%s' of pid %d was replaced by %s after tally opened it: the copy is of the file tally opened (docs/symbols.md)",
				mp, p->pid, file_kind(&st));
		strbuf_reset(&sb);
	}
	if (p->jitdump) {
		size_t room = budget - used;
		if (read_fd(&sb, p->jitdump_fd, room, &more) == 0) {
			if (more)
				jit_warn(
					a,
					"jitdump '%s' of pid %d is larger than the per-process JIT budget of %s: only its first %zu bytes are read",
					p->jitdump, p->pid, bs, sb.len);
			/* what parsing may cost: in proportion to the dump, within the budget */
			size_t pb = tally_jitdump_budget(sb.len), left = room - sb.len;
			struct tally_jitdump *jd = xcalloc(1, sizeof(*jd));
			if (tally_jitdump_parse_budget(jd, sb.buf, sb.len,
						       pb < left ? pb
						       : left    ? left
								 : 1)) {
				jit_warn(
					a,
					"jitdump '%s' of pid %d: %s: not used (its code counts as nomap)",
					p->jitdump, p->pid, tally_errmsg());
				tally_jitdump_release(jd);
				free(jd);
			} else {
				if (jd->warning)
					jit_warn(a, "jitdump '%s' of pid %d: %s", p->jitdump,
						 p->pid, jd->warning);
				tally_jitdump_release(im->jd);
				free(im->jd);
				im->jd = jd;
				free(im->jd_source);
				im->jd_source = xstrdup(p->jitdump);
			}
		} else {
			jit_warn(
				a,
				"jitdump '%s' of pid %d: cannot read it: %s (its code counts as nomap)",
				p->jitdump, p->pid, strerror(errno));
		}
	}
	strbuf_release(&sb);
}

struct jrange {
	uint64_t start, end;
};

static int cmp_jrange(const void *x, const void *y)
{
	const struct jrange *a = x, *b = y;
	return a->start < b->start ? -1 : a->start > b->start;
}

/* The address ranges a perf map names, sorted. */
static struct jrange *map_ranges(const char *map, size_t len, size_t *n)
{
	struct tally_perfmap_sym *syms;
	size_t bad;
	tally_perfmap_parse(map, len, &syms, n, &bad);
	struct jrange *r = *n ? xmalloc(*n * sizeof(*r)) : NULL;
	for (size_t i = 0; i < *n; i++)
		r[i] = (struct jrange){ syms[i].start,
					syms[i].start + (syms[i].size ? syms[i].size : 1) };
	free(syms);
	tally_qsort(r, *n, sizeof(*r), cmp_jrange);
	return r;
}

static bool in_ranges(const struct jrange *r, size_t n, uint64_t addr)
{
	/* ranges may overlap (code reused): look back from the last start <= addr */
	size_t lo = TALLY_UPPER_U64(r, n, start, addr);
	for (size_t i = lo; i-- > 0 && lo - i <= 64;)
		if (addr < r[i].end)
			return true;
	return false;
}

/* Samples in anonymous memory that neither the perf map nor the jitdump names
 * are nomap, as if the process had neither; the jitdump keeps what has samples. */
static void settle_jit(struct tally_agg *a)
{
	bool moved = false;
	for (size_t i = 0; i < a->nimages; i++) {
		struct tally_image *im = &a->images[i];
		if (im->kind != TALLY_IMG_JIT)
			continue;
		size_t nr = 0;
		struct jrange *r =
			im->jit_map ? map_ranges(im->jit_map, im->jit_map_len, &nr) : NULL;
		uint32_t nomap = TALLY_HIDX_NONE;
		if (im->jd)
			for (size_t k = 0; k < im->jd->nfuncs; k++)
				im->jd->funcs[k].keep = false;
		for (size_t f = 0; f < a->nframes; f++) {
			if (a->frames[f].image != i)
				continue;
			uint64_t addr = a->frames[f].offset;
			struct tally_jit_func *jf =
				im->jd ? tally_jitdump_find(im->jd, addr) : NULL;
			if (jf)
				jf->keep = true;
			if (jf || in_ranges(r, nr, addr))
				continue;
			if (nomap == TALLY_HIDX_NONE) {
				struct tally_image k;
				memset(&k, 0, sizeof(k));
				k.kind = TALLY_IMG_NOMAP;
				k.path = (char *)"";
				k.pid = a->per_pid ? im->pid : 0;
				nomap = tally_agg_image(a, &k);
				im = &a->images[i]; /* the registry may have moved */
			}
			a->frames[f].image = nomap;
			moved = true;
		}
		free(r);
		free(im->jd_text);
		im->jd_text = NULL;
		im->jd_text_len = 0;
		if (im->jd) {
			struct strbuf sb = STRBUF_INIT;
			tally_jitdump_format(im->jd, false,
					     im->jd_source ? im->jd_source : im->path, &sb);
			im->jd_text_len = sb.len;
			im->jd_text = strbuf_detach(&sb);
		}
	}
	if (moved) {
		/* frames changed keys: index them again (two may now be equal: both stay) */
		tally_hidx_release(&a->frame_idx);
		for (size_t f = 0; f < a->nframes; f++) {
			const struct tally_frame *fr = &a->frames[f];
			uint64_t h = tally_hash_u64(fr->offset ^ ((uint64_t)fr->image << 48) ^
						    fr->image);
			tally_hidx_put(&a->frame_idx, h, (uint32_t)f);
		}
	}
}

void tally_agg_snapshot_jit(struct tally_agg *a)
{
	agg_memo_forget(a); /* JIT frames move */
	for (size_t i = 0; i < a->nprocs; i++)
		if (!a->procs[i]->dead)
			agg_snapshot_jit(a, a->procs[i]);
	settle_jit(a);
}

bool agg_is_jitdump_name(const char *path, int pid)
{
	/* jit-PID.dump, PID the process's own (a runtime names it so) */
	const char *b = tally_basename(path);
	if (strncmp(b, "jit-", 4) || pid <= 0)
		return false; /* every mapping is asked: most are not, and say so here */
	b += 4;
	long long n = 0;
	if (*b < '1' || *b > '9')
		return false;
	for (; *b >= '0' && *b <= '9'; b++)
		if ((n = n * 10 + (*b - '0')) > pid)
			return false;
	return n == pid && !strcmp(b, ".dump");
}

/* Opens a JIT file of process p once, as it is checked: not through a symbolic
 * link, without blocking (a FIFO), and only a regular file owned by the process's
 * own user (another user could otherwise name its code, and the recorder may be
 * root). The descriptor, or -1 with a warning or the untrusted count saying why
 * (nothing when there is no such file). */
static int open_jit_file(struct tally_agg *a, struct tally_proc *p, const char *path,
			 const char *what, const char *name, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP)
			jit_warn(
				a,
				"%s '%s' of pid %d is a symbolic link: not used (its code counts as nomap)",
				what, name, p->pid);
		else if (errno != ENOENT && errno != ENOTDIR)
			jit_warn(a,
				 "%s '%s' of pid %d: cannot open it: %s (its code counts as nomap)",
				 what, name, p->pid, strerror(errno));
		return -1;
	}
	if (fstat(fd, st) < 0) {
		jit_warn(a, "%s '%s' of pid %d: cannot stat it: %s (its code counts as nomap)",
			 what, name, p->pid, strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		jit_warn(
			a,
			"%s '%s' of pid %d is %s, not a regular file: not used (its code counts as nomap)",
			what, name, p->pid, file_kind(st));
		close(fd);
		return -1;
	}
	char pp[32];
	struct stat ps;
	snprintf(pp, sizeof(pp), "/proc/%d", p->pid);
	if (stat(pp, &ps) < 0 || ps.st_uid != st->st_uid) {
		a->jit_untrusted++;
		close(fd);
		return -1;
	}
	return fd;
}

static uint32_t jit_image(struct tally_agg *a, struct tally_proc *p, const char *path)
{
	if (p->jit_image != TALLY_HIDX_NONE)
		return p->jit_image;
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_JIT;
	k.path = (char *)path;
	k.pid = p->pid;
	p->jit_image = tally_agg_image(a, &k);
	return p->jit_image;
}

/* A jitdump is trusted, as a perf map is, only when the process's own user owns
 * it; it is read when the process exits or recording ends. */
void agg_check_jitdump(struct tally_agg *a, struct tally_proc *p, const char *name)
{
	if (p->jitdump)
		return;
	struct strbuf rp = STRBUF_INIT;
	/* the process's own view of its files (another mount namespace) while it lives */
	strbuf_addf(&rp, "/proc/%d/root%s", p->pid, name);
	if (name[0] != '/' || access(rp.buf, R_OK) != 0) {
		strbuf_reset(&rp);
		strbuf_addstr(&rp, name);
	}
	/* kept open: the dump is read from it when the process has exited, or was removed */
	struct stat st;
	int fd = open_jit_file(a, p, rp.buf, "jitdump", name, &st);
	if (fd >= 0) {
		p->jitdump_fd = fd;
		p->jitdump = xstrdup(name);
		jit_image(a, p, name);
	}
	strbuf_release(&rp);
}

/* Decides once per process whether /tmp/perf-PID.map may name its anonymous code:
 * only a map owned by the process's own user is trusted, and it is kept open from
 * then on (snapshot_jit reads it). */
void agg_check_jit(struct tally_agg *a, struct tally_proc *p)
{
	if (p->jit_wait) {
		p->jit_wait--;
		return;
	}
	char mp[64];
	snprintf(mp, sizeof(mp), "/tmp/perf-%d.map", p->pid);
	p->jit = -1;
	struct stat st;
	errno = 0;
	int fd = open_jit_file(a, p, mp, "perf map", mp, &st);
	if (fd < 0 && errno == ENOENT && p->jit_tries < 24) {
		/* no map yet: a runtime creates it as it starts, and a call-graph
		 * recording meets anonymous addresses (return addresses unwound
		 * through a runtime's stubs) before its first JIT sample. Looked for
		 * again after 1, 3, 7, ... more anonymous samples: a process that
		 * never writes one costs a few dozen open()s */
		p->jit = 0;
		p->jit_wait = (1u << ++p->jit_tries) - 1;
		return;
	}
	if (fd < 0)
		return;
	p->jit_map_fd = fd;
	p->jit_map_dev = (uint64_t)st.st_dev;
	p->jit_map_ino = (uint64_t)st.st_ino;
	jit_image(a, p, mp);
	p->jit = 1;
}
