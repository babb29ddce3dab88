/* Record-time aggregation (see agg.h): the hot path of tally record. */
#define _GNU_SOURCE
#include "tally/agg.h"
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

/* x86-64 kernel addresses live in the upper half; cpumode says so too, but a
 * callchain entry carries no cpumode of its own */
#define KERNEL_START 0xffff800000000000ULL

void tally_agg_init(struct tally_agg *a, int nevents, bool per_pid, bool lazy_procfs)
{
	memset(a, 0, sizeof(*a));
	a->nevents = nevents;
	a->per_pid = per_pid;
	a->lazy_procfs = lazy_procfs;
	a->samples = xcalloc((size_t)nevents, sizeof(uint64_t));
	a->jit_budget = TALLY_JIT_BUDGET;
	struct tally_image k = { .kind = TALLY_IMG_KERNEL, .path = (char *)"[kernel]" };
	a->kernel_image = tally_agg_image(a, &k);
}

static void proc_free(struct tally_proc *p)
{
	if (!p)
		return;
	tally_unwind_proc_release(p);
	free(p->maps);
	free(p->exe);
	if (p->jit == 1)
		close(p->jit_map_fd);
	if (p->jitdump)
		close(p->jitdump_fd);
	free(p->jitdump);
	free(p);
}

void tally_agg_release(struct tally_agg *a)
{
	for (size_t i = 0; i < a->nimages; i++) {
		free(a->images[i].path);
		free(a->images[i].jit_map);
		free(a->images[i].id);
		free(a->images[i].id_kind);
		tally_jitdump_release(a->images[i].jd);
		free(a->images[i].jd);
		free(a->images[i].jd_source);
		free(a->images[i].jd_text);
	}
	free(a->images);
	tally_hidx_release(&a->image_idx);
	free(a->frames);
	free(a->frame_stack1);
	tally_hidx_release(&a->frame_idx);
	free(a->stack_frames);
	free(a->stacks);
	tally_hidx_release(&a->stack_idx);
	free(a->rows);
	free(a->counts);
	tally_hidx_release(&a->row_idx);
	for (size_t i = 0; i < a->nprocs; i++)
		proc_free(a->procs[i]);
	free(a->procs);
	for (size_t i = 0; i < a->ntasks; i++)
		free(a->tasks[i].exe);
	free(a->tasks);
	tally_hidx_release(&a->proc_idx);
	free(a->samples);
	for (size_t i = 0; i < a->njit_warnings; i++)
		free(a->jit_warnings[i]);
	free(a->jit_warnings);
	memset(a, 0, sizeof(*a));
}

/* ---- images ---- */

static uint64_t image_hash(const struct tally_image *k)
{
	uint64_t h = tally_hash_bytes(k->path, strlen(k->path), (uint64_t)k->kind);
	if (k->build_id_len)
		h = tally_hash_bytes(k->build_id, k->build_id_len, h);
	else
		h = tally_hash_u64(h ^ k->ino ^ ((uint64_t)k->maj << 40) ^ ((uint64_t)k->min << 20) ^ k->ino_gen);
	return tally_hash_u64(h ^ (uint64_t)(k->kind == TALLY_IMG_JIT || k->kind == TALLY_IMG_NOMAP ? k->pid : 0));
}

static bool image_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	const struct tally_image *x = &a->images[idx], *k = key;
	if (x->kind != k->kind || strcmp(x->path, k->path))
		return false;
	if ((x->kind == TALLY_IMG_JIT || x->kind == TALLY_IMG_NOMAP) && x->pid != k->pid)
		return false;
	if (x->build_id_len != k->build_id_len)
		return false;
	if (k->build_id_len)
		return !memcmp(x->build_id, k->build_id, k->build_id_len);
	return x->maj == k->maj && x->min == k->min && x->ino == k->ino && x->ino_gen == k->ino_gen;
}

uint32_t tally_agg_image(struct tally_agg *a, const struct tally_image *key)
{
	uint64_t h = image_hash(key);
	uint32_t i = tally_hidx_get(&a->image_idx, h, key, image_eq, a);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(a->images, a->aimages, a->nimages + 1);
	struct tally_image *im = &a->images[a->nimages];
	*im = *key;
	im->path = xstrdup(key->path);
	im->jit_map = NULL;
	im->jit_map_len = 0;
	im->id = im->id_kind = NULL;
	im->jd = NULL;
	im->jd_source = NULL;
	im->jd_text = NULL;
	im->jd_text_len = 0;
	tally_hidx_put(&a->image_idx, h, (uint32_t)a->nimages);
	return (uint32_t)a->nimages++;
}

/* ---- processes ---- */

static bool proc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	return a->procs[idx]->pid == *(const int *)key;
}

static struct tally_proc *proc_lookup(struct tally_agg *a, int pid)
{
	if (a->last_proc && a->last_proc->pid == pid)
		return a->last_proc;
	uint32_t i = tally_hidx_get(&a->proc_idx, tally_hash_u64((uint64_t)pid), &pid, proc_eq, a);
	return i == TALLY_HIDX_NONE ? NULL : (a->last_proc = a->procs[i]);
}

struct tally_proc *tally_agg_proc(struct tally_agg *a, int pid, bool create)
{
	struct tally_proc *p = proc_lookup(a, pid);
	if (p || !create)
		return p;
	p = xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->jit_map_fd = -1;
	p->jitdump_fd = -1;
	p->jit_image = TALLY_HIDX_NONE;
	p->nomap_image = TALLY_HIDX_NONE;
	GROW(a->procs, a->aprocs, a->nprocs + 1);
	a->procs[a->nprocs] = p;
	tally_hidx_put(&a->proc_idx, tally_hash_u64((uint64_t)pid), (uint32_t)a->nprocs);
	a->nprocs++;
	a->last_proc = p;
	return p;
}

static void rebuild_proc_idx(struct tally_agg *a)
{
	tally_hidx_release(&a->proc_idx);
	for (size_t i = 0; i < a->nprocs; i++)
		tally_hidx_put(&a->proc_idx, tally_hash_u64((uint64_t)a->procs[i]->pid), (uint32_t)i);
	a->last_proc = NULL;
}

static void remember_task(struct tally_agg *a, const struct tally_proc *p)
{
	GROW(a->tasks, a->atasks, a->ntasks + 1);
	struct tally_task *t = &a->tasks[a->ntasks++];
	t->pid = p->pid;
	memcpy(t->comm, p->comm, sizeof(t->comm));
	t->exe = p->exe ? xstrdup(p->exe) : NULL;
}

void tally_agg_collect_dead(struct tally_agg *a)
{
	/* a process that exited two rounds ago has had all its records delivered */
	size_t j = 0;
	bool changed = false;
	for (size_t i = 0; i < a->nprocs; i++) {
		struct tally_proc *p = a->procs[i];
		if (p->dead && ++p->dead > 2) {
			if (p->sampled)
				remember_task(a, p);
			proc_free(p);
			changed = true;
			continue;
		}
		a->procs[j++] = p;
	}
	a->nprocs = j;
	if (changed)
		rebuild_proc_idx(a);
}

void tally_agg_tasks(struct tally_agg *a)
{
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i]->sampled) {
			remember_task(a, a->procs[i]);
			a->procs[i]->sampled = false;
		}
}

/* ---- maps ---- */

void tally_proc_add_map(struct tally_proc *p, uint64_t start, uint64_t end, uint64_t pgoff, uint32_t image)
{
	if (end <= start)
		return;
	/* cut whatever the new mapping overlaps, keeping the parts outside it */
	struct tally_map extra = { 0, 0, 0, 0 };
	bool have_extra = false;
	size_t j = 0;
	for (size_t i = 0; i < p->nmaps; i++) {
		struct tally_map m = p->maps[i];
		if (m.end <= start || m.start >= end) {
			p->maps[j++] = m;
			continue;
		}
		if (m.start < start && m.end > end) {
			extra = m;
			extra.pgoff += end - m.start;
			extra.start = end;
			have_extra = true;
			m.end = start;
			p->maps[j++] = m;
		} else if (m.start < start) {
			m.end = start;
			p->maps[j++] = m;
		} else if (m.end > end) {
			m.pgoff += end - m.start;
			m.start = end;
			p->maps[j++] = m;
		}
	}
	p->nmaps = j;
	GROW(p->maps, p->amaps, p->nmaps + 2);
	/* insert sorted */
	struct tally_map nm = { start, end, pgoff, image };
	size_t pos = p->nmaps;
	while (pos > 0 && p->maps[pos - 1].start > start)
		pos--;
	memmove(&p->maps[pos + 1], &p->maps[pos], (p->nmaps - pos) * sizeof(nm));
	p->maps[pos] = nm;
	p->nmaps++;
	if (have_extra) {
		pos = p->nmaps;
		while (pos > 0 && p->maps[pos - 1].start > extra.start)
			pos--;
		memmove(&p->maps[pos + 1], &p->maps[pos], (p->nmaps - pos) * sizeof(nm));
		p->maps[pos] = extra;
		p->nmaps++;
	}
	p->last = 0;
}

const struct tally_map *tally_proc_find_map(struct tally_proc *p, uint64_t addr)
{
	if (p->last < p->nmaps) {
		const struct tally_map *m = &p->maps[p->last];
		if (addr >= m->start && addr < m->end)
			return m;
	}
	size_t lo = 0, hi = p->nmaps;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct tally_map *m = &p->maps[mid];
		if (addr < m->start)
			hi = mid;
		else if (addr >= m->end)
			lo = mid + 1;
		else {
			p->last = mid;
			return m;
		}
	}
	return NULL;
}

static bool is_anon_name(const char *name)
{
	return !*name || !strcmp(name, "//anon") || !strncmp(name, "[anon", 5) || !strncmp(name, "/memfd:", 7) ||
	       !strcmp(name, "[heap]") || !strncmp(name, "[stack", 6);
}

static bool is_jitdump_name(const char *path, int pid);
static void check_jitdump(struct tally_agg *a, struct tally_proc *p, const char *name);

static uint32_t file_image(struct tally_agg *a, int pid, const char *name, const uint8_t *bid, uint8_t bid_len,
			   uint32_t maj, uint32_t min, uint64_t ino, uint64_t ino_gen)
{
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = !strcmp(name, "[vdso]") ? TALLY_IMG_VDSO : TALLY_IMG_FILE;
	k.path = (char *)name;
	if (bid_len) {
		if (bid_len > 20)
			bid_len = 20;
		memcpy(k.build_id, bid, bid_len);
		k.build_id_len = bid_len;
	} else if (k.kind == TALLY_IMG_FILE) {
		k.maj = maj;
		k.min = min;
		k.ino = ino;
		k.ino_gen = ino_gen;
	}
	k.pid = pid;
	uint32_t i = tally_agg_image(a, &k);
	/* keep a live pid for opening the file through /proc/PID/root later */
	a->images[i].pid = pid;
	return i;
}

static void on_mmap2(struct tally_agg *a, const struct tally_rec *r)
{
	const struct perf_record_mmap2 {
		struct perf_event_header h;
		uint32_t pid, tid;
		uint64_t addr, len, pgoff;
		union {
			struct { uint32_t maj, min; uint64_t ino, ino_generation; } f;
			struct { uint8_t size, res1; uint16_t res2; uint8_t id[20]; } b;
		} u;
		uint32_t prot, flags;
		char filename[];
	} *m = (const void *)r->raw;
	if (r->raw->size < sizeof(*m) + 1)
		return;
	if (!(m->prot & 4 /* PROT_EXEC */))
		return;
	struct tally_proc *p = tally_agg_proc(a, (int)m->pid, true);
	size_t maxlen = r->raw->size - sizeof(*m);
	char name[4096];
	size_t nl = strnlen(m->filename, maxlen < sizeof(name) - 1 ? maxlen : sizeof(name) - 1);
	memcpy(name, m->filename, nl);
	name[nl] = '\0';
	if (is_jitdump_name(name, p->pid)) {
		/* the runtime's marker: the dump names its code; nothing runs in this mapping */
		check_jitdump(a, p, name);
		return;
	}
	uint32_t img;
	if (is_anon_name(name))
		img = TALLY_MAP_ANON;
	else if (r->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)
		img = file_image(a, p->pid, name, m->u.b.id, m->u.b.size, 0, 0, 0, 0);
	else
		img = file_image(a, p->pid, name, NULL, 0, m->u.f.maj, m->u.f.min, m->u.f.ino, m->u.f.ino_generation);
	if (img != TALLY_MAP_ANON && !p->exe && name[0] == '/')
		p->exe = xstrdup(name);
	tally_proc_add_map(p, m->addr, m->addr + m->len, m->pgoff, img);
}

static void on_comm(struct tally_agg *a, const struct tally_rec *r)
{
	const struct {
		struct perf_event_header h;
		uint32_t pid, tid;
		char comm[];
	} *c = (const void *)r->raw;
	if (r->raw->size < sizeof(*c) + 1)
		return;
	struct tally_proc *p = tally_agg_proc(a, (int)c->pid, true);
	if (c->pid == c->tid || (r->misc & PERF_RECORD_MISC_COMM_EXEC)) {
		size_t n = strnlen(c->comm, r->raw->size - sizeof(*c));
		if (n > sizeof(p->comm) - 1)
			n = sizeof(p->comm) - 1;
		memcpy(p->comm, c->comm, n);
		p->comm[n] = '\0';
	}
	if (r->misc & PERF_RECORD_MISC_COMM_EXEC) {
		/* a new program: the old address space is gone */
		p->nmaps = 0;
		tally_unwind_proc_release(p);
		free(p->exe);
		p->exe = NULL;
		if (p->jit == 1)
			close(p->jit_map_fd);
		p->jit_map_fd = -1;
		p->jit = 0;
		if (p->jitdump)
			close(p->jitdump_fd);
		free(p->jitdump);
		p->jitdump = NULL;
		p->jit_image = TALLY_HIDX_NONE;
		p->nomap_image = TALLY_HIDX_NONE;
	}
}

static void on_fork(struct tally_agg *a, const struct tally_rec *r)
{
	const struct {
		struct perf_event_header h;
		uint32_t pid, ppid, tid, ptid;
		uint64_t time;
	} *f = (const void *)r->raw;
	if (r->raw->size < sizeof(*f) || f->pid == f->ppid)
		return; /* a new thread shares its process's maps */
	struct tally_proc *parent = tally_agg_proc(a, (int)f->ppid, false);
	struct tally_proc *child = tally_agg_proc(a, (int)f->pid, true);
	/* a reused pid is a new process, whatever the old one's state */
	child->dead = 0;
	if (parent && parent != child) {
		/* a fork copies the address space */
		child->nmaps = 0;
		if (parent->nmaps) {
			GROW(child->maps, child->amaps, parent->nmaps);
			memcpy(child->maps, parent->maps, parent->nmaps * sizeof(*child->maps));
		}
		child->nmaps = parent->nmaps;
		memcpy(child->comm, parent->comm, sizeof(child->comm));
		if (parent->exe && !child->exe)
			child->exe = xstrdup(parent->exe);
	}
}

#define JIT_WARN_MAX 32

static void jit_warn(struct tally_agg *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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
	strbuf_addf(&sb, "%" PRIu64 " more JIT warning%s not listed (only the first %d are)", a->jit_warnings_more,
		    a->jit_warnings_more == 1 ? "" : "s", JIT_WARN_MAX - 1);
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

static void snapshot_jit(struct tally_agg *a, struct tally_proc *p)
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
				jit_warn(a, "perf map '%s' of pid %d is larger than the per-process JIT budget of %s: only its first %zu bytes are used",
					 mp, p->pid, bs, sb.len);
			}
			used = sb.len;
			free(im->jit_map);
			im->jit_map_len = sb.len;
			im->jit_map = strbuf_detach(&sb);
		} else {
			jit_warn(a, "perf map '%s' of pid %d: cannot read it: %s", mp, p->pid, strerror(errno));
		}
		struct stat st;
		if (lstat(mp, &st) == 0 && ((uint64_t)st.st_dev != p->jit_map_dev || (uint64_t)st.st_ino != p->jit_map_ino))
			jit_warn(a, "perf map '%s' of pid %d was replaced by %s after tally opened it: the copy is of the file tally opened (docs/symbols.md)",
				 mp, p->pid, file_kind(&st));
		strbuf_reset(&sb);
	}
	if (p->jitdump) {
		size_t room = budget - used;
		if (read_fd(&sb, p->jitdump_fd, room, &more) == 0) {
			if (more)
				jit_warn(a, "jitdump '%s' of pid %d is larger than the per-process JIT budget of %s: only its first %zu bytes are read",
					 p->jitdump, p->pid, bs, sb.len);
			/* what parsing may cost: in proportion to the dump, within the budget */
			size_t pb = tally_jitdump_budget(sb.len), left = room - sb.len;
			struct tally_jitdump *jd = xcalloc(1, sizeof(*jd));
			if (tally_jitdump_parse_budget(jd, sb.buf, sb.len, pb < left ? pb : left ? left : 1)) {
				jit_warn(a, "jitdump '%s' of pid %d: %s: not used (its code counts as nomap)", p->jitdump, p->pid,
					 tally_errmsg());
				tally_jitdump_release(jd);
				free(jd);
			} else {
				if (jd->warning)
					jit_warn(a, "jitdump '%s' of pid %d: %s", p->jitdump, p->pid, jd->warning);
				tally_jitdump_release(im->jd);
				free(im->jd);
				im->jd = jd;
				free(im->jd_source);
				im->jd_source = xstrdup(p->jitdump);
			}
		} else {
			jit_warn(a, "jitdump '%s' of pid %d: cannot read it: %s (its code counts as nomap)", p->jitdump, p->pid,
				 strerror(errno));
		}
	}
	strbuf_release(&sb);
}

static void on_exit_rec(struct tally_agg *a, const struct tally_rec *r)
{
	const struct {
		struct perf_event_header h;
		uint32_t pid, ppid, tid, ptid;
		uint64_t time;
	} *f = (const void *)r->raw;
	if (r->raw->size < sizeof(*f) || f->pid != f->tid)
		return;
	struct tally_proc *p = tally_agg_proc(a, (int)f->pid, false);
	if (p) {
		snapshot_jit(a, p);
		p->dead = 1;
	}
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
		r[i] = (struct jrange){ syms[i].start, syms[i].start + (syms[i].size ? syms[i].size : 1) };
	free(syms);
	tally_qsort(r, *n, sizeof(*r), cmp_jrange);
	return r;
}

static bool in_ranges(const struct jrange *r, size_t n, uint64_t addr)
{
	/* ranges may overlap (code reused): look back from the last start <= addr */
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
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
		struct jrange *r = im->jit_map ? map_ranges(im->jit_map, im->jit_map_len, &nr) : NULL;
		uint32_t nomap = TALLY_HIDX_NONE;
		if (im->jd)
			for (size_t k = 0; k < im->jd->nfuncs; k++)
				im->jd->funcs[k].keep = false;
		for (size_t f = 0; f < a->nframes; f++) {
			if (a->frames[f].image != i)
				continue;
			uint64_t addr = a->frames[f].offset;
			struct tally_jit_func *jf = im->jd ? tally_jitdump_find(im->jd, addr) : NULL;
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
			tally_jitdump_format(im->jd, false, im->jd_source ? im->jd_source : im->path, &sb);
			im->jd_text_len = sb.len;
			im->jd_text = strbuf_detach(&sb);
		}
	}
	if (moved) {
		/* frames changed keys: index them again (two may now be equal: both stay) */
		tally_hidx_release(&a->frame_idx);
		for (size_t f = 0; f < a->nframes; f++) {
			const struct tally_frame *fr = &a->frames[f];
			uint64_t h = tally_hash_u64(fr->offset ^ ((uint64_t)fr->image << 48) ^ fr->image);
			tally_hidx_put(&a->frame_idx, h, (uint32_t)f);
		}
	}
}

void tally_agg_snapshot_jit(struct tally_agg *a)
{
	for (size_t i = 0; i < a->nprocs; i++)
		if (!a->procs[i]->dead)
			snapshot_jit(a, a->procs[i]);
	settle_jit(a);
}

static bool is_jitdump_name(const char *path, int pid)
{
	/* jit-PID.dump, PID the process's own (a runtime names it so) */
	const char *b = tally_basename(path);
	char want[48];
	snprintf(want, sizeof(want), "jit-%d.dump", pid);
	return !strcmp(b, want);
}

/* Opens a JIT file of process p once, as it is checked: not through a symbolic
 * link, without blocking (a FIFO), and only a regular file owned by the process's
 * own user (another user could otherwise name its code, and the recorder may be
 * root). The descriptor, or -1 with a warning or the untrusted count saying why
 * (nothing when there is no such file). */
static int open_jit_file(struct tally_agg *a, struct tally_proc *p, const char *path, const char *what, const char *name,
			 struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP)
			jit_warn(a, "%s '%s' of pid %d is a symbolic link: not used (its code counts as nomap)", what, name, p->pid);
		else if (errno != ENOENT && errno != ENOTDIR)
			jit_warn(a, "%s '%s' of pid %d: cannot open it: %s (its code counts as nomap)", what, name, p->pid,
				 strerror(errno));
		return -1;
	}
	if (fstat(fd, st) < 0) {
		jit_warn(a, "%s '%s' of pid %d: cannot stat it: %s (its code counts as nomap)", what, name, p->pid,
			 strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		jit_warn(a, "%s '%s' of pid %d is %s, not a regular file: not used (its code counts as nomap)", what, name, p->pid,
			 file_kind(st));
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
static void check_jitdump(struct tally_agg *a, struct tally_proc *p, const char *name)
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
static void check_jit(struct tally_agg *a, struct tally_proc *p)
{
	char mp[64];
	snprintf(mp, sizeof(mp), "/tmp/perf-%d.map", p->pid);
	p->jit = -1;
	struct stat st;
	int fd = open_jit_file(a, p, mp, "perf map", mp, &st);
	if (fd < 0)
		return;
	p->jit_map_fd = fd;
	p->jit_map_dev = (uint64_t)st.st_dev;
	p->jit_map_ino = (uint64_t)st.st_ino;
	jit_image(a, p, mp);
	p->jit = 1;
}

static uint32_t resolve(struct tally_agg *a, struct tally_proc *p, uint64_t ip, bool kernel, uint64_t *off)
{
	if (kernel || ip >= KERNEL_START) {
		*off = ip;
		return a->kernel_image;
	}
	const struct tally_map *m = p ? tally_proc_find_map(p, ip) : NULL;
	if (m && m->image != TALLY_MAP_ANON) {
		*off = ip - m->start + m->pgoff;
		return m->image;
	}
	*off = ip;
	if (p) {
		if (p->jit == 0)
			check_jit(a, p);
		if (p->jit_image != TALLY_HIDX_NONE)
			return p->jit_image;
		if (p->nomap_image == TALLY_HIDX_NONE) {
			struct tally_image k;
			memset(&k, 0, sizeof(k));
			k.kind = TALLY_IMG_NOMAP;
			k.path = (char *)"";
			k.pid = a->per_pid ? p->pid : 0;
			p->nomap_image = tally_agg_image(a, &k);
		}
		return p->nomap_image;
	}
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_NOMAP;
	k.path = (char *)"";
	return tally_agg_image(a, &k);
}

/* ---- frames, stacks, counts ---- */

static bool frame_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	const struct tally_frame *f = &a->frames[idx], *k = key;
	return f->image == k->image && f->offset == k->offset;
}

uint32_t tally_agg_frame(struct tally_agg *a, uint32_t image, uint64_t offset)
{
	struct tally_frame k = { image, offset };
	uint64_t h = tally_hash_u64(offset ^ ((uint64_t)image << 48) ^ image);
	uint32_t i = tally_hidx_get(&a->frame_idx, h, &k, frame_eq, a);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(a->frames, a->aframes, a->nframes + 1);
	GROW(a->frame_stack1, a->aframe_stack1, a->nframes + 1);
	a->frames[a->nframes] = k;
	a->frame_stack1[a->nframes] = 0;
	tally_hidx_put(&a->frame_idx, h, (uint32_t)a->nframes);
	return (uint32_t)a->nframes++;
}

struct stack_key {
	const uint32_t *f;
	uint32_t len;
};

static bool stack_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	const struct stack_key *k = key;
	const struct tally_stack *s = &a->stacks[idx];
	return s->len == k->len && !memcmp(&a->stack_frames[s->first], k->f, k->len * sizeof(uint32_t));
}

uint32_t tally_agg_stack(struct tally_agg *a, const uint32_t *frames, uint32_t len)
{
	struct stack_key k = { frames, len };
	uint64_t h = tally_hash_bytes(frames, len * sizeof(uint32_t), len);
	uint32_t i = tally_hidx_get(&a->stack_idx, h, &k, stack_eq, a);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(a->stack_frames, a->astack_frames, a->nstack_frames + len);
	memcpy(&a->stack_frames[a->nstack_frames], frames, len * sizeof(uint32_t));
	GROW(a->stacks, a->astacks, a->nstacks + 1);
	a->stacks[a->nstacks] = (struct tally_stack){ (uint32_t)a->nstack_frames, len };
	a->nstack_frames += len;
	tally_hidx_put(&a->stack_idx, h, (uint32_t)a->nstacks);
	return (uint32_t)a->nstacks++;
}

struct row_key {
	uint32_t stack;
	int32_t pid;
};

static bool row_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	const struct row_key *k = key;
	return a->rows[idx].stack == k->stack && a->rows[idx].pid == k->pid;
}

void tally_agg_count(struct tally_agg *a, uint32_t stack, int pid, int event, uint64_t n)
{
	struct row_key k = { stack, pid };
	uint64_t h = tally_hash_u64(((uint64_t)stack << 32) ^ (uint32_t)pid);
	uint32_t i = tally_hidx_get(&a->row_idx, h, &k, row_eq, a);
	if (i == TALLY_HIDX_NONE) {
		GROW(a->rows, a->arows, a->nrows + 1);
		a->rows[a->nrows] = (struct tally_count_row){ stack, pid };
		size_t want = (a->nrows + 1) * (size_t)a->nevents;
		if (want > a->acounts) {
			size_t old = a->acounts;
			GROW(a->counts, a->acounts, want);
			memset(a->counts + old, 0, (a->acounts - old) * sizeof(uint64_t));
		}
		tally_hidx_put(&a->row_idx, h, (uint32_t)a->nrows);
		i = (uint32_t)a->nrows++;
	}
	a->counts[(size_t)i * (size_t)a->nevents + (size_t)event] += n;
}

static void on_sample(struct tally_agg *a, const struct tally_rec *r)
{
	bool kernel = (r->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
	struct tally_proc *p = NULL;
	if (r->pid != 0 && r->pid != UINT32_MAX) {
		p = proc_lookup(a, (int)r->pid);
		if (!p && a->lazy_procfs)
			tally_agg_load_procfs(a, (int)r->pid); /* best effort: it may be gone */
		if (!p)
			p = tally_agg_proc(a, (int)r->pid, true);
		p->sampled = true;
	}
	uint32_t *fr = a->scratch_frames;
	uint32_t n = 0;
	uint64_t off;
	if (!r->nr) {
		uint32_t img = resolve(a, p, r->ip, kernel, &off);
		fr[n++] = tally_agg_frame(a, img, off);
	} else {
		bool in_kernel = kernel;
		size_t user_at = SIZE_MAX; /* index in fr where user frames begin */
		for (uint64_t i = 0; i < r->nr; i++) {
			uint64_t ip = r->chain[i];
			if (ip >= PERF_CONTEXT_MAX) {
				if (ip == PERF_CONTEXT_KERNEL)
					in_kernel = true;
				else if (ip == PERF_CONTEXT_USER)
					in_kernel = false;
				continue;
			}
			if (n == ARRAY_SIZE(a->scratch_frames))
				break; /* kept as far as it goes: reports count it as stopped early */
			if (!in_kernel && user_at == SIZE_MAX)
				user_at = n;
			uint32_t img = resolve(a, in_kernel ? NULL : p, ip, in_kernel, &off);
			fr[n++] = tally_agg_frame(a, img, off);
		}
		if (a->dwarf && r->regs && p) {
			/* the user part from DWARF CFI; the frame-pointer chain only extends it */
			const char *why;
			size_t room = ARRAY_SIZE(a->scratch_pcs);
			size_t nu = tally_unwind_sample(a, p, r->regs, r->nregs, r->stack, r->stack_len, a->scratch_pcs, room, &why);
			a->uw_samples++;
			size_t kn = user_at == SIZE_MAX ? n : user_at;
			uint32_t fpu[ARRAY_SIZE(a->scratch_frames)];
			size_t nfp = n - kn;
			memcpy(fpu, fr + kn, nfp * sizeof(uint32_t));
			n = kn;
			for (size_t i = 0; i < nu && n < ARRAY_SIZE(a->scratch_frames); i++) {
				uint32_t img = resolve(a, p, a->scratch_pcs[i], false, &off);
				fr[n++] = tally_agg_frame(a, img, off);
			}
			if (why) {
				a->uw_short++;
				if (!strcmp(why, "stack copy too small"))
					a->uw_why_stack++;
				else if (!strcmp(why, "depth limit"))
					a->uw_why_depth++;
				else
					a->uw_why_cfi++;
				/* join: the fp chain starts at the same sampled ip, so where it agrees
				 * with the last DWARF frame at the same depth it can continue it; a
				 * match elsewhere counts only if the address is unique in the chain
				 * (recursion repeats return addresses) */
				size_t j = SIZE_MAX;
				if (nu && nu - 1 < nfp && fpu[nu - 1] == fr[n - 1]) {
					j = nu - 1;
				} else if (nu) {
					size_t hits = 0;
					for (size_t k = 0; k < nfp; k++)
						if (fpu[k] == fr[n - 1]) {
							j = k;
							hits++;
						}
					if (hits != 1)
						j = SIZE_MAX;
				}
				if (j != SIZE_MAX && j + 1 < nfp) {
					for (size_t k = j + 1; k < nfp && n < ARRAY_SIZE(a->scratch_frames); k++)
						fr[n++] = fpu[k];
					a->uw_joined++;
				} else if (nu <= 1 && nfp > 1) {
					n = kn;
					for (size_t k = 0; k < nfp; k++)
						fr[n++] = fpu[k];
					a->uw_joined++;
				}
			}
		}
		if (!n) {
			uint32_t img = resolve(a, p, r->ip, kernel, &off);
			fr[n++] = tally_agg_frame(a, img, off);
		}
	}
	uint32_t st;
	if (n == 1) {
		if (!a->frame_stack1[fr[0]])
			a->frame_stack1[fr[0]] = tally_agg_stack(a, fr, 1) + 1;
		st = a->frame_stack1[fr[0]] - 1;
	} else {
		st = tally_agg_stack(a, fr, n);
	}
	/* the kernel reports pid -1 for a task it can no longer name (exiting): no process */
	tally_agg_count(a, st, a->per_pid && r->pid != UINT32_MAX ? (int)r->pid : 0, r->event, 1);
	a->samples[r->event]++;
}

void tally_agg_record(struct tally_agg *a, const struct tally_rec *r)
{
	switch (r->type) {
	case PERF_RECORD_SAMPLE:
		if (r->event >= 0 && r->event < a->nevents)
			on_sample(a, r);
		break;
	case PERF_RECORD_MMAP2:
		on_mmap2(a, r);
		break;
	case PERF_RECORD_COMM:
		on_comm(a, r);
		break;
	case PERF_RECORD_FORK:
		on_fork(a, r);
		break;
	case PERF_RECORD_EXIT:
		on_exit_rec(a, r);
		break;
	case PERF_RECORD_LOST:
		if (r->raw->size >= sizeof(*r->raw) + 16)
			a->lost += ((const uint64_t *)(r->raw + 1))[1];
		break;
	case PERF_RECORD_LOST_SAMPLES:
		if (r->raw->size >= sizeof(*r->raw) + 8)
			a->lost += ((const uint64_t *)(r->raw + 1))[0];
		break;
	case PERF_RECORD_THROTTLE:
		a->throttled++;
		break;
	default:
		break;
	}
}

int tally_agg_load_procfs(struct tally_agg *a, int pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return tally_seterr(-errno, "cannot read '%s': %s", path, strerror(errno));
	struct tally_proc *p = tally_agg_proc(a, pid, true);
	char line[4608];
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	ssize_t ln = readlink(path, line, sizeof(line) - 1);
	if (ln > 0 && !p->exe) {
		line[ln] = '\0';
		p->exe = xstrdup(line);
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, pgoff, ino;
		unsigned maj, min;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &pgoff, &maj, &min, &ino,
			   &pos) < 7)
			continue;
		if (perms[2] != 'x')
			continue;
		char *name = line + pos;
		name[strcspn(name, "\n")] = '\0';
		if (is_jitdump_name(name, pid)) {
			check_jitdump(a, p, name);
			continue;
		}
		uint32_t img;
		if (is_anon_name(name) || (!ino && name[0] != '['))
			img = TALLY_MAP_ANON;
		else if (name[0] == '[' && strcmp(name, "[vdso]"))
			continue; /* [vsyscall] and friends */
		else
			img = file_image(a, pid, name, NULL, 0, maj, min, ino, 0);
		if (img != TALLY_MAP_ANON && !p->exe && name[0] == '/')
			p->exe = xstrdup(name);
		tally_proc_add_map(p, start, end, pgoff, img);
	}
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(p->comm, sizeof(p->comm), f))
			p->comm[strcspn(p->comm, "\n")] = '\0';
		fclose(f);
	}
	return 0;
}

/* ---- identity, reset and size (the daemon's needs) ---- */

void tally_image_identify(struct tally_image *im)
{
	if (im->id || im->kind != TALLY_IMG_FILE)
		return;
	char hex[160];
	if (im->build_id_len) {
		/* the kernel read it at mmap time: authoritative even if the file changed since */
		tally_hex(im->build_id, im->build_id_len, hex);
		im->id = xstrdup(hex);
		im->id_kind = xstrdup("build-id");
		return;
	}
	if (im->early == 1) {
		/* read through /proc/PID/root while the process (in a container) lived */
		if (im->early_id_len) {
			tally_hex(im->early_id, im->early_id_len, hex);
			im->id = xstrdup(hex);
			im->id_kind = xstrdup("build-id");
		} else {
			snprintf(hex, sizeof(hex), "%016" PRIx64, im->early_hash);
			im->id = xstrdup(hex);
			im->id_kind = xstrdup("xxh64");
		}
		return;
	}
	struct tally_elf_info info;
	struct strbuf p = STRBUF_INIT;
	const char *path = im->path;
	bool via_root = false;
	/* a process in another mount namespace sees its own files: use its root while it lives */
	if (im->pid > 0) {
		strbuf_addf(&p, "/proc/%d/root%s", im->pid, im->path);
		if (access(p.buf, R_OK) == 0) {
			path = p.buf;
			via_root = true;
		}
	}
	char *clean = NULL;
	const char *del = strstr(path, " (deleted)");
	if (del) {
		clean = xstrndup(path, (size_t)(del - path));
		path = clean;
	}
	int r = tally_elf_info(path, 1, &info);
	/* without a build-id from the kernel, the file must still be the one that was
	 * mapped: same device and inode (the kernel gave them in MMAP2 or /proc maps) */
	bool replaced = false;
	struct stat st;
	if (im->ino && stat(path, &st) == 0 &&
	    (st.st_ino != im->ino || major(st.st_dev) != im->maj || minor(st.st_dev) != im->min))
		replaced = true;
	if (im->ino && r != 0)
		replaced = true;
	if (im->foreign_ns && !via_root) {
		/* its own root is gone and this machine's file at that path may be
		 * another: unknown, never symbolized */
		im->id = xstrdup("00000000");
		im->id_kind = xstrdup("unreachable");
	} else if (replaced) {
		im->id = xstrdup("00000000");
		im->id_kind = xstrdup("replaced");
	} else if (r == 0 && info.build_id_len) {
		tally_hex(info.build_id, info.build_id_len, hex);
		im->id = xstrdup(hex);
		im->id_kind = xstrdup("build-id");
	} else if (r == 0 && info.have_hash) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
		im->id = xstrdup(hex);
		im->id_kind = xstrdup("xxh64");
	} else {
		im->id = xstrdup("00000000");
		im->id_kind = xstrdup("none");
	}
	free(clean);
	strbuf_release(&p);
}

void tally_agg_identify(struct tally_agg *a)
{
	tally_agg_identify_new(a); /* containers' files first: through the process's root */
	for (size_t i = a->nidentified; i < a->nimages; i++)
		tally_image_identify(&a->images[i]);
	a->nidentified = a->nimages;
}

void tally_agg_release_unwind(struct tally_agg *a)
{
	for (size_t i = 0; i < a->nprocs; i++)
		tally_unwind_proc_release(a->procs[i]);
}

static uint32_t remap_image(const uint32_t *map, uint32_t i)
{
	return i == TALLY_MAP_ANON || i == TALLY_HIDX_NONE ? i : map[i];
}

void tally_agg_reset(struct tally_agg *a)
{
	/* the counts and what only they referenced: freed, so memory goes back */
	free(a->frames);
	a->frames = NULL;
	a->nframes = a->aframes = 0;
	free(a->frame_stack1);
	a->frame_stack1 = NULL;
	a->aframe_stack1 = 0;
	tally_hidx_release(&a->frame_idx);
	free(a->stack_frames);
	a->stack_frames = NULL;
	a->nstack_frames = a->astack_frames = 0;
	free(a->stacks);
	a->stacks = NULL;
	a->nstacks = a->astacks = 0;
	tally_hidx_release(&a->stack_idx);
	free(a->rows);
	a->rows = NULL;
	a->nrows = a->arows = 0;
	free(a->counts);
	a->counts = NULL;
	a->acounts = 0;
	tally_hidx_release(&a->row_idx);
	for (size_t i = 0; i < a->ntasks; i++)
		free(a->tasks[i].exe);
	free(a->tasks);
	a->tasks = NULL;
	a->ntasks = a->atasks = 0;
	memset(a->samples, 0, (size_t)a->nevents * sizeof(uint64_t));
	a->lost = a->throttled = 0;
	a->jit_untrusted = 0;
	for (size_t i = 0; i < a->njit_warnings; i++)
		free(a->jit_warnings[i]);
	a->njit_warnings = 0;
	a->jit_warnings_more = 0;
	a->uw_samples = a->uw_short = a->uw_joined = 0;
	a->uw_why_stack = a->uw_why_cfi = a->uw_why_depth = 0;
	for (size_t i = 0; i < a->nprocs; i++)
		a->procs[i]->sampled = false;

	/* images: the kernel and what some process still maps */
	bool *keep = xcalloc(a->nimages + 1, sizeof(bool));
	keep[a->kernel_image] = true;
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct tally_proc *p = a->procs[i];
		for (size_t m = 0; m < p->nmaps; m++)
			if (p->maps[m].image != TALLY_MAP_ANON)
				keep[p->maps[m].image] = true;
		if (p->jit_image != TALLY_HIDX_NONE)
			keep[p->jit_image] = true;
		if (p->nomap_image != TALLY_HIDX_NONE)
			keep[p->nomap_image] = true;
	}
	uint32_t *map = xmalloc((a->nimages + 1) * sizeof(uint32_t));
	size_t n = 0;
	bool all_identified = a->nidentified == a->nimages;
	for (size_t i = 0; i < a->nimages; i++) {
		if (!keep[i]) {
			free(a->images[i].path);
			free(a->images[i].jit_map);
			free(a->images[i].id);
			free(a->images[i].id_kind);
			tally_jitdump_release(a->images[i].jd);
			free(a->images[i].jd);
			free(a->images[i].jd_source);
			free(a->images[i].jd_text);
			map[i] = TALLY_HIDX_NONE;
			continue;
		}
		map[i] = (uint32_t)n;
		a->images[n++] = a->images[i];
	}
	bool all_checked = a->images_checked == a->nimages;
	a->nimages = n;
	a->nidentified = all_identified ? n : 0; /* identification skips images already done */
	a->images_checked = all_checked ? n : 0;
	tally_hidx_release(&a->image_idx);
	for (size_t i = 0; i < n; i++)
		tally_hidx_put(&a->image_idx, image_hash(&a->images[i]), (uint32_t)i);
	a->kernel_image = map[a->kernel_image];
	for (size_t i = 0; i < a->nprocs; i++) {
		struct tally_proc *p = a->procs[i];
		for (size_t m = 0; m < p->nmaps; m++)
			p->maps[m].image = remap_image(map, p->maps[m].image);
		p->jit_image = remap_image(map, p->jit_image);
		p->nomap_image = remap_image(map, p->nomap_image);
	}
	free(map);
	free(keep);
}

static size_t hidx_bytes(const struct tally_hidx *h)
{
	return h->mask ? (h->mask + 1) * sizeof(struct tally_hslot) : 0;
}

size_t tally_agg_memory(const struct tally_agg *a)
{
	size_t m = sizeof(*a) + (size_t)a->nevents * sizeof(uint64_t);
	m += a->aimages * sizeof(struct tally_image);
	for (size_t i = 0; i < a->nimages; i++) {
		const struct tally_image *im = &a->images[i];
		m += strlen(im->path) + 1 + im->jit_map_len + im->jd_text_len;
		if (im->jd) /* kept until written: counted, so --max-memory sees it */
			m += sizeof(*im->jd) + im->jd->bytes;
		if (im->id)
			m += strlen(im->id) + strlen(im->id_kind) + 2;
	}
	m += a->aframes * sizeof(*a->frames) + a->astack_frames * sizeof(*a->stack_frames) +
	     a->aframe_stack1 * sizeof(*a->frame_stack1) + a->astacks * sizeof(*a->stacks) + a->arows * sizeof(*a->rows) + a->acounts * sizeof(*a->counts);
	m += hidx_bytes(&a->image_idx) + hidx_bytes(&a->frame_idx) + hidx_bytes(&a->stack_idx) +
	     hidx_bytes(&a->row_idx) + hidx_bytes(&a->proc_idx);
	m += a->aprocs * sizeof(*a->procs);
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct tally_proc *p = a->procs[i];
		m += sizeof(*p) + p->amaps * sizeof(*p->maps) + (p->exe ? strlen(p->exe) + 1 : 0);
	}
	m += a->atasks * sizeof(*a->tasks);
	for (size_t i = 0; i < a->ntasks; i++)
		m += a->tasks[i].exe ? strlen(a->tasks[i].exe) + 1 : 0;
	return m;
}

/* ---- containers: files seen through another mount namespace ---- */

static bool same_mnt_ns(int pid, bool *known)
{
	static struct stat self;
	static bool have_self;
	char p[64];
	struct stat st;
	*known = false;
	if (!have_self) {
		if (stat("/proc/self/ns/mnt", &self) != 0)
			return true;
		have_self = true;
	}
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", pid);
	if (stat(p, &st) != 0)
		return true;
	*known = true;
	return st.st_ino == self.st_ino && st.st_dev == self.st_dev;
}

void tally_agg_identify_new(struct tally_agg *a)
{
	for (; a->images_checked < a->nimages; a->images_checked++) {
		struct tally_image *im = &a->images[a->images_checked];
		if (im->kind != TALLY_IMG_FILE || im->pid <= 0 || im->path[0] != '/')
			continue;
		bool known;
		if (same_mnt_ns(im->pid, &known) || !known)
			continue;
		im->foreign_ns = true;
		if (im->build_id_len)
			continue; /* the kernel gave its build-id: nothing to read */
		struct strbuf p = STRBUF_INIT;
		const char *del = strstr(im->path, " (deleted)");
		strbuf_addf(&p, "/proc/%d/root", im->pid);
		strbuf_add(&p, im->path, del ? (size_t)(del - im->path) : strlen(im->path));
		struct stat st;
		struct tally_elf_info info;
		im->early = -1;
		/* the file the process mapped, not whatever has its name now */
		if (stat(p.buf, &st) == 0 && (!im->ino || (st.st_ino == im->ino && major(st.st_dev) == im->maj &&
							   minor(st.st_dev) == im->min)) &&
		    tally_elf_info(p.buf, 1, &info) == 0) {
			if (info.build_id_len) {
				size_t n = info.build_id_len > 20 ? 20 : info.build_id_len;
				memcpy(im->early_id, info.build_id, n);
				im->early_id_len = (uint8_t)n;
				im->early = 1;
			} else if (info.have_hash) {
				im->early_hash = info.hash;
				im->early = 1;
			}
		}
		strbuf_release(&p);
	}
}
