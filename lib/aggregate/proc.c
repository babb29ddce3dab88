/* Record-time aggregation: processes, their maps, the mmap/comm/fork/exit records,
 * address-to-image resolution and the procfs reader. */
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
#include <linux/fs.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* ---- processes ---- */

static bool proc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	return a->procs[idx]->pid == *(const int *)key;
}

struct tally_proc *agg_proc_lookup(struct tally_agg *a, int pid)
{
	if (a->last_proc && a->last_proc->pid == pid)
		return a->last_proc;
	uint32_t i = tally_hidx_get(&a->proc_idx, tally_hash_u64((uint64_t)pid), &pid, proc_eq, a);
	return i == TALLY_HIDX_NONE ? NULL : (a->last_proc = a->procs[i]);
}

struct tally_proc *tally_agg_proc(struct tally_agg *a, int pid, bool create)
{
	struct tally_proc *p = agg_proc_lookup(a, pid);
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
		tally_hidx_put(&a->proc_idx, tally_hash_u64((uint64_t)a->procs[i]->pid),
			       (uint32_t)i);
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
	if (!a->dead_pending)
		return; /* the daemon's every round: no walk of every process for nothing */
	bool freeing = false, pending = false;
	for (size_t i = 0; i < a->nprocs; i++) {
		struct tally_proc *p = a->procs[i];
		if (p->dead && ++p->dead > 2)
			freeing = true;
		else
			pending |= p->dead != 0;
	}
	a->dead_pending = pending;
	if (!freeing)
		return;
	size_t j = 0;
	for (size_t i = 0; i < a->nprocs; i++) {
		struct tally_proc *p = a->procs[i];
		if (p->dead > 2) {
			if (p->sampled)
				remember_task(a, p);
			GROW(a->grave, a->agrave, a->ngrave + 1);
			a->grave[a->ngrave++] = p;
			continue;
		}
		a->procs[j++] = p;
	}
	a->nprocs = j;
	rebuild_proc_idx(a);
	/* the memo's entries of the others stay: a machine where some process
	 * ends every round would otherwise never keep one */
	if (a->ngrave >= TALLY_AGG_GRAVE)
		agg_free_grave(a);
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

void tally_proc_add_map(struct tally_proc *p, uint64_t start, uint64_t end, uint64_t pgoff,
			uint32_t image)
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
	/* the maps do not overlap, in order of start: the one before the first
	 * that starts past addr, if it reaches addr */
	size_t i = TALLY_UPPER_U64(p->maps, p->nmaps, start, addr);
	if (!i || addr >= p->maps[i - 1].end)
		return NULL;
	p->last = i - 1;
	return &p->maps[i - 1];
}

static bool is_anon_name(const char *name)
{
	/* most names are a file's path: one test of its first two characters */
	if (name[0] == '/' && name[1] != '/' && name[1] != 'm')
		return false;
	return !*name || !strcmp(name, "//anon") || !strncmp(name, "[anon", 5) || !strncmp(name, "/memfd:", 7) ||
	       !strcmp(name, "[heap]") || !strncmp(name, "[stack", 6);
}

/* The key of the image of a file mapping (its build-id from the record, else
 * its device and inode); name stays the caller's. */
static void file_key(struct tally_image *k, int pid, const char *name, const uint8_t *bid,
		     uint8_t bid_len, uint32_t maj, uint32_t min, uint64_t ino, uint64_t ino_gen)
{
	memset(k, 0, sizeof(*k));
	k->kind = !strcmp(name, "[vdso]") ? TALLY_IMG_VDSO : TALLY_IMG_FILE;
	k->path = (char *)name;
	if (bid_len) {
		if (bid_len > 20)
			bid_len = 20;
		memcpy(k->build_id, bid, bid_len);
		k->build_id_len = bid_len;
	} else if (k->kind == TALLY_IMG_FILE) {
		k->maj = maj;
		k->min = min;
		k->ino = ino;
		k->ino_gen = ino_gen;
	}
	k->pid = pid;
}

static uint32_t file_image(struct tally_agg *a, int pid, const char *name, const uint8_t *bid,
			   uint8_t bid_len, uint32_t maj, uint32_t min, uint64_t ino,
			   uint64_t ino_gen)
{
	struct tally_image k;
	file_key(&k, pid, name, bid, bid_len, maj, min, ino, ino_gen);
	uint32_t i = tally_agg_image(a, &k);
	/* keep a live pid for opening the file through /proc/PID/root later */
	a->images[i].pid = pid;
	return i;
}

/* PERF_RECORD_MMAP2 (linux/perf_event.h; sample_id after the name) */
struct perf_record_mmap2 {
	struct perf_event_header h;
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	union {
		struct { uint32_t maj, min; uint64_t ino, ino_generation; } f;
		struct { uint8_t size, res1; uint16_t res2; uint8_t id[20]; } b;
	} u;
	uint32_t prot, flags;
	char filename[];
};

/* An executable mapping's record, its name copied into name (NUL-terminated);
 * NULL for a record too short or of memory that cannot run. */
static const struct perf_record_mmap2 *exec_mmap2(const struct perf_event_header *h,
						  char name[4096])
{
	const struct perf_record_mmap2 *m = (const void *)h;
	if (h->size < sizeof(*m) + 1 || !(m->prot & 4 /* PROT_EXEC */))
		return NULL;
	size_t maxlen = h->size - sizeof(*m);
	size_t nl = strnlen(m->filename, maxlen < 4095 ? maxlen : 4095);
	memcpy(name, m->filename, nl);
	name[nl] = '\0';
	return m;
}

bool tally_agg_record_prompt(struct tally_agg *a, const struct perf_event_header *h)
{
	if (h->type == PERF_RECORD_MMAP)
		return true; /* not asked for: whatever it is, looked at soon */
	if (h->type != PERF_RECORD_MMAP2)
		return false;
	char name[4096];
	const struct perf_record_mmap2 *m = exec_mmap2(h, name);
	if (!m)
		return false;
	if (is_anon_name(name) || agg_is_jitdump_name(name, (int)m->pid))
		return true; /* a JIT's code: its perf map is checked while the process lives */
	struct tally_image k;
	if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)
		file_key(&k, (int)m->pid, name, m->u.b.id, m->u.b.size, 0, 0, 0, 0);
	else
		file_key(&k, (int)m->pid, name, NULL, 0, m->u.f.maj, m->u.f.min, m->u.f.ino,
			 m->u.f.ino_generation);
	return !tally_agg_image_known(a, &k);
}

/* A device number as the kernel encodes it (and the exec watch reads it). */
static uint32_t kernel_dev(uint32_t maj, uint32_t min)
{
	return (maj << 20) | (min & 0xfffff);
}

/* The file of p's program when its mmap record named it by build-id (no
 * inode in it): what /proc/PID/exe is, if that is still the file p->exe names
 * (the process may have ended, or exec'd another). The generation is the
 * inode's (FS_IOC_GETVERSION; 0 where the filesystem keeps none), as the
 * exec watch reads it in the kernel. */
static void exe_from_proc(struct tally_proc *p)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", p->pid);
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st, named;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && stat(p->exe, &named) == 0 &&
	    named.st_dev == st.st_dev && named.st_ino == st.st_ino) {
		int gen = 0;
		if (ioctl(fd, FS_IOC_GETVERSION, &gen) < 0)
			gen = 0;
		p->exe_dev = kernel_dev(major(st.st_dev), minor(st.st_dev));
		p->exe_ino = st.st_ino;
		p->exe_gen = (uint32_t)gen;
	}
	close(fd);
}

/* p maps a JIT's code: its program, once, in the list of those whose starts
 * the collector is asked to watch */
static void jit_program(struct tally_agg *a, struct tally_proc *p)
{
	if (p->exe_jit_said)
		return;
	if (!p->exe_ino && p->exe && p->exe[0] == '/' && p->pid > 0)
		exe_from_proc(p);
	p->exe_jit_said = true;
	if (!p->exe_ino)
		return;
	GROW(a->jit_programs, a->ajit_programs, a->njit_programs + 1);
	a->jit_programs[a->njit_programs++] =
		(struct tally_file_id){ p->exe_dev, p->exe_gen, p->exe_ino };
}

void agg_on_mmap2(struct tally_agg *a, const struct tally_rec *r)
{
	char name[4096];
	const struct perf_record_mmap2 *m = exec_mmap2(r->raw, name);
	if (!m)
		return;
	struct tally_proc *p = tally_agg_proc(a, (int)m->pid, true);
	p->memo_gen++; /* its maps change */
	if (agg_is_jitdump_name(name, p->pid)) {
		/* the runtime's marker: the dump names its code; nothing runs in this mapping */
		jit_program(a, p);
		agg_check_jitdump(a, p, name);
		return;
	}
	uint32_t img;
	if (is_anon_name(name))
		img = TALLY_MAP_ANON;
	else if (r->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)
		img = file_image(a, p->pid, name, m->u.b.id, m->u.b.size, 0, 0, 0, 0);
	else
		img = file_image(a, p->pid, name, NULL, 0, m->u.f.maj, m->u.f.min, m->u.f.ino,
				 m->u.f.ino_generation);
	if (img != TALLY_MAP_ANON && !p->exe && name[0] == '/') {
		p->exe = xstrdup(name);
		if (!(r->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) {
			p->exe_dev = kernel_dev(m->u.f.maj, m->u.f.min);
			p->exe_ino = m->u.f.ino;
			p->exe_gen = (uint32_t)m->u.f.ino_generation;
		}
	}
	if (img == TALLY_MAP_ANON)
		jit_program(a, p);
	tally_proc_add_map(p, m->addr, m->addr + m->len, m->pgoff, img);
	tally_unwind_proc_mapped(p, m->addr, m->addr + m->len);
}

void agg_on_comm(struct tally_agg *a, const struct tally_rec *r)
{
	const struct {
		struct perf_event_header h;
		uint32_t pid, tid;
		char comm[];
	} *c = (const void *)r->raw;
	if (r->raw->size < sizeof(*c) + 1)
		return;
	struct tally_proc *p = tally_agg_proc(a, (int)c->pid, true);
	p->memo_gen++; /* its name, and with exec its maps */
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
		p->exe_ino = 0;
		p->exe_jit_said = false;
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

void agg_on_fork(struct tally_agg *a, const struct tally_rec *r)
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
	child->memo_gen++; /* maps and name from the parent */
	if (parent && parent != child) {
		/* a fork copies the address space */
		child->nmaps = 0;
		if (parent->nmaps) {
			GROW(child->maps, child->amaps, parent->nmaps);
			memcpy(child->maps, parent->maps, parent->nmaps * sizeof(*child->maps));
		}
		child->nmaps = parent->nmaps;
		memcpy(child->comm, parent->comm, sizeof(child->comm));
		if (parent->exe && !child->exe) {
			child->exe = xstrdup(parent->exe);
			child->exe_dev = parent->exe_dev;
			child->exe_ino = parent->exe_ino;
			child->exe_gen = parent->exe_gen;
			child->exe_jit_said = parent->exe_jit_said;
		}
	}
}

void agg_on_exit_rec(struct tally_agg *a, const struct tally_rec *r)
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
		agg_snapshot_jit(a, p);
		p->memo_gen++;
		p->dead = 1;
		a->dead_pending = true;
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
	/* its maps and name: the memo's rows of this process only (a daemon
	 * loads each process at its first sample, often) */
	p->memo_gen++;
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
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &pgoff,
			   &maj, &min, &ino, &pos) < 7)
			continue;
		if (perms[2] != 'x')
			continue;
		char *name = line + pos;
		name[strcspn(name, "\n")] = '\0';
		if (agg_is_jitdump_name(name, pid)) {
			agg_check_jitdump(a, p, name);
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
	/* a new process's images come together: its namespace is looked at once */
	int last_pid = 0;
	bool last_same = true;
	for (; a->images_checked < a->nimages; a->images_checked++) {
		struct tally_image *im = &a->images[a->images_checked];
		if (im->kind != TALLY_IMG_FILE || im->pid <= 0 || im->path[0] != '/')
			continue;
		if (im->pid != last_pid) {
			bool known;
			last_same = same_mnt_ns(im->pid, &known) || !known;
			last_pid = im->pid;
		}
		if (last_same)
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
		if (stat(p.buf, &st) == 0 &&
		    (!im->ino || (st.st_ino == im->ino && major(st.st_dev) == im->maj &&
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
