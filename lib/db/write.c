/* Writing a profile database (docs/format.md): identify each sampled image,
 * sum samples per (image, pid, offset), snapshot kernel symbols, then publish the
 * whole directory with one rename. */
#define _GNU_SOURCE
#include "tally/db.h"
#include "tally/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <xxhash.h>
#include <elf.h>
#include <link.h>

void tally_meta_set(struct tally_meta *m, const char *key, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->kv[i].key, key)) {
			free(m->kv[i].value);
			m->kv[i].value = strbuf_detach(&sb);
			return;
		}
	GROW(m->kv, m->alloc, m->n + 1);
	m->kv[m->n].key = xstrdup(key);
	m->kv[m->n].value = strbuf_detach(&sb);
	m->n++;
}

const char *tally_meta_get(const struct tally_meta *m, const char *key)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->kv[i].key, key))
			return m->kv[i].value;
	return NULL;
}

void tally_meta_release(struct tally_meta *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->kv[i].key);
		free(m->kv[i].value);
	}
	free(m->kv);
	memset(m, 0, sizeof(*m));
}

static void meta_format(struct strbuf *sb, const struct tally_meta *m)
{
	for (size_t i = 0; i < m->n; i++) {
		strbuf_addf(sb, "%s: ", m->kv[i].key);
		strbuf_add_escaped(sb, m->kv[i].value);
		strbuf_addch(sb, '\n');
	}
}

static char *parent_dir(const char *path)
{
	const char *s = strrchr(path, '/');
	if (!s)
		return xstrdup(".");
	if (s == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(s - path));
}

int tally_db_check_target(const char *path, bool force)
{
	struct stat st;
	if (!*path)
		return tally_seterr(-EINVAL, "empty database path (name one with -o DIR)");
	if (stat(path, &st) == 0) {
		if (!force)
			return tally_seterr(-EEXIST, "database '%s' already exists (use --force to replace it, or -o to name another)", path);
		if (!S_ISDIR(st.st_mode))
			return tally_seterr(-ENOTDIR, "'%s' exists and is not a database directory (remove it or choose another -o)", path);
		struct strbuf s = STRBUF_INIT;
		strbuf_addf(&s, "%s/session", path);
		bool is_db = access(s.buf, F_OK) == 0;
		strbuf_release(&s);
		if (!is_db)
			return tally_seterr(-EEXIST, "'%s' exists and is not a tally database: --force only replaces databases (choose another -o)", path);
	}
	char *parent = parent_dir(path);
	int ret = 0;
	if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode))
		ret = tally_seterr(-ENOENT, "cannot create database '%s': directory '%s' does not exist", path, parent);
	else if (access(parent, W_OK | X_OK) < 0)
		ret = tally_seterr(-EACCES, "cannot create database '%s': directory '%s' is not writable (choose another -o)",
				   path, parent);
	free(parent);
	return ret;
}

/* ---- image identity ---- */

struct dbimg {
	char *name, *path, *id, *id_kind, *kind;
	int pid;
	bool foreign_ns;
	const char *jit_map;
	size_t jit_map_len;
	const char *jd_text; /* the jitdump copy */
	size_t jd_text_len;
};

static char *sanitize_name(const char *path)
{
	const char *b = tally_basename(path);
	struct strbuf sb = STRBUF_INIT;
	for (const char *c = b; *c; c++) {
		if (!strncmp(c, " (deleted)", 10))
			break;
		unsigned char ch = (unsigned char)*c;
		if (ch == '[' || ch == ']')
			continue; /* [vdso] is vdso on disk: no glob characters in file names */
		strbuf_addch(&sb, (ch <= ' ' || ch == '/' || ch == 0x7f) ? '_' : (char)ch);
	}
	if (!sb.len)
		strbuf_addstr(&sb, "unknown");
	return strbuf_detach(&sb);
}

static void identify_file(const struct tally_image *im, struct dbimg *d)
{
	struct tally_elf_info info;
	char hex[160];
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
	if (!im->build_id_len && im->ino && stat(path, &st) == 0 &&
	    (st.st_ino != im->ino || major(st.st_dev) != im->maj || minor(st.st_dev) != im->min))
		replaced = true;
	if (!im->build_id_len && im->ino && r != 0)
		replaced = true;
	/* set by the caller from the task list: libc.so.6 is runnable too, so the ELF type cannot tell */
	d->kind = NULL;
	d->foreign_ns = im->foreign_ns;
	if (im->early == 1 && !im->build_id_len) {
		/* read through /proc/PID/root while the process (in a container) lived */
		if (im->early_id_len) {
			tally_hex(im->early_id, im->early_id_len, hex);
			d->id = xstrdup(hex);
			d->id_kind = xstrdup("build-id");
		} else {
			snprintf(hex, sizeof(hex), "%016" PRIx64, im->early_hash);
			d->id = xstrdup(hex);
			d->id_kind = xstrdup("xxh64");
		}
	} else if (im->foreign_ns && !im->build_id_len && !via_root) {
		/* its own root is gone and this machine's file at that path may be
		 * another: unknown, never symbolized */
		d->id = xstrdup("00000000");
		d->id_kind = xstrdup("unreachable");
	} else if (im->build_id_len) {
		/* the kernel read it at mmap time: authoritative even if the file changed since */
		tally_hex(im->build_id, im->build_id_len, hex);
		d->id = xstrdup(hex);
		d->id_kind = xstrdup("build-id");
		/* a file replaced since keeps the recorded id: the report then refuses the new file */
	} else if (replaced) {
		d->id = xstrdup("00000000");
		d->id_kind = xstrdup("replaced");
	} else if (r == 0 && info.build_id_len) {
		tally_hex(info.build_id, info.build_id_len, hex);
		d->id = xstrdup(hex);
		d->id_kind = xstrdup("build-id");
	} else if (r == 0 && info.have_hash) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
		d->id = xstrdup(hex);
		d->id_kind = xstrdup("xxh64");
	} else {
		d->id = xstrdup("00000000");
		d->id_kind = xstrdup("none");
	}
	free(clean);
	strbuf_release(&p);
}

/* The vDSO is the same for every process of this kernel: ours serves for all. */
static int vdso_bytes(const void **p, size_t *len)
{
	const ElfW(Ehdr) *eh = (const void *)getauxval(AT_SYSINFO_EHDR);
	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG))
		return -1;
	size_t end = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	const ElfW(Phdr) *ph = (const void *)((const char *)eh + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset + ph[i].p_filesz > end)
			end = ph[i].p_offset + ph[i].p_filesz;
	*p = eh;
	*len = end;
	return 0;
}

static void identify(struct tally_agg *a, uint32_t i, struct dbimg *d, const char *kernel_id)
{
	const struct tally_image *im = &a->images[i];
	char hex[32];
	memset(d, 0, sizeof(*d));
	d->pid = 0;
	switch (im->kind) {
	case TALLY_IMG_FILE:
		d->name = sanitize_name(im->path);
		d->path = xstrdup(im->path);
		identify_file(im, d);
		d->kind = xstrdup("lib");
		for (size_t t = 0; t < a->ntasks; t++)
			if (a->tasks[t].exe && !strcmp(a->tasks[t].exe, im->path)) {
				free(d->kind);
				d->kind = xstrdup("exec");
				break;
			}
		break;
	case TALLY_IMG_KERNEL:
		d->name = xstrdup("kernel");
		d->path = xstrdup("[kernel]");
		d->id = xstrdup(*kernel_id ? kernel_id : "00000000");
		d->id_kind = xstrdup(*kernel_id ? "build-id" : "none");
		d->kind = xstrdup("kernel");
		break;
	case TALLY_IMG_NOMAP:
		d->name = xstrdup("nomap");
		d->path = xstrdup("");
		d->id = xstrdup("00000000");
		d->id_kind = xstrdup("none");
		d->kind = xstrdup("nomap");
		d->pid = im->pid;
		break;
	case TALLY_IMG_JIT:
		d->name = xstrdup("jit");
		d->path = xstrdup(im->path);
		/* the copies' contents identify the image: a map alone hashes as it always did */
		snprintf(hex, sizeof(hex), "%016" PRIx64,
			 im->jd_text ? XXH64(im->jd_text, im->jd_text_len, XXH64(im->jit_map ? im->jit_map : "", im->jit_map_len, 0))
				     : XXH64(im->jit_map ? im->jit_map : "", im->jit_map_len, 0));
		d->id = xstrdup(hex);
		d->id_kind = xstrdup("xxh64");
		d->kind = xstrdup("jit");
		d->pid = im->pid;
		d->jit_map = im->jit_map;
		d->jit_map_len = im->jit_map_len;
		d->jd_text = im->jd_text;
		d->jd_text_len = im->jd_text_len;
		break;
	case TALLY_IMG_VDSO: {
		const void *p;
		size_t len;
		d->name = xstrdup("[vdso]");
		d->path = xstrdup("[vdso]");
		if (vdso_bytes(&p, &len) == 0) {
			snprintf(hex, sizeof(hex), "%016" PRIx64, XXH64(p, len, 0));
			d->id = xstrdup(hex);
			d->id_kind = xstrdup("xxh64");
		} else {
			d->id = xstrdup("00000000");
			d->id_kind = xstrdup("none");
		}
		d->kind = xstrdup("vdso");
		break;
	}
	}
}

static void dbimg_release(struct dbimg *d)
{
	free(d->name);
	free(d->path);
	free(d->id);
	free(d->id_kind);
	free(d->kind);
}

/* ---- per-file sums ---- */

struct cell {
	uint32_t image; /* db index */
	int32_t pid;
	uint64_t offset;
	uint32_t row; /* into sums */
};

struct sums {
	struct cell *cells;
	size_t n, alloc;
	uint64_t *counts;
	size_t acounts;
	struct tally_hidx idx;
	int nevents;
};

static bool cell_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct sums *s = ctx;
	const struct cell *c = &s->cells[idx], *k = key;
	return c->image == k->image && c->pid == k->pid && c->offset == k->offset;
}

static void sums_add(struct sums *s, uint32_t image, int32_t pid, uint64_t offset, const uint64_t *counts)
{
	struct cell k = { image, pid, offset, 0 };
	uint64_t h = tally_hash_u64(offset ^ ((uint64_t)image << 40) ^ ((uint64_t)(uint32_t)pid << 8));
	uint32_t i = tally_hidx_get(&s->idx, h, &k, cell_eq, s);
	if (i == TALLY_HIDX_NONE) {
		GROW(s->cells, s->alloc, s->n + 1);
		k.row = (uint32_t)s->n;
		s->cells[s->n] = k;
		size_t want = (s->n + 1) * (size_t)s->nevents;
		if (want > s->acounts) {
			size_t old = s->acounts;
			GROW(s->counts, s->acounts, want);
			memset(s->counts + old, 0, (s->acounts - old) * sizeof(uint64_t));
		}
		tally_hidx_put(&s->idx, h, (uint32_t)s->n);
		i = (uint32_t)s->n++;
	}
	for (int e = 0; e < s->nevents; e++)
		s->counts[(size_t)i * (size_t)s->nevents + (size_t)e] += counts[e];
}

static int cmp_cell(const void *a, const void *b)
{
	const struct cell *x = a, *y = b;
	if (x->image != y->image)
		return x->image < y->image ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int write_in(const char *dir, const char *name, const struct strbuf *sb)
{
	struct strbuf p = STRBUF_INIT;
	strbuf_addf(&p, "%s/%s", dir, name);
	int r = tally_write_file_atomic(p.buf, sb->buf ? sb->buf : "", sb->len);
	strbuf_release(&p);
	return r;
}

static const char *task_comm(const struct tally_agg *a, int pid)
{
	for (size_t i = a->ntasks; i-- > 0;)
		if (a->tasks[i].pid == pid)
			return a->tasks[i].comm;
	return "";
}

static int write_contents(const char *dir, struct tally_agg *a, struct tally_meta *session)
{
	int ret = 0;
	int ne = a->nevents;
	char kernel_id[160];
	tally_kernel_build_id(kernel_id, sizeof(kernel_id));
	struct strbuf sb = STRBUF_INIT;

	/* 1. which images have samples, and their canonical db index */
	bool *used = xcalloc(a->nimages + 1, sizeof(bool));
	for (size_t r = 0; r < a->nrows; r++) {
		const struct tally_stack *st = &a->stacks[a->rows[r].stack];
		for (uint32_t f = 0; f < st->len; f++)
			used[a->frames[a->stack_frames[st->first + f]].image] = true;
	}
	uint32_t *canon = xmalloc((a->nimages + 1) * sizeof(uint32_t));
	struct dbimg *dimg = NULL;
	size_t ndimg = 0, adimg = 0;
	for (size_t i = 0; i < a->nimages; i++) {
		canon[i] = UINT32_MAX;
		if (!used[i])
			continue;
		struct dbimg d;
		identify(a, (uint32_t)i, &d, kernel_id);
		/* the same file reached through two keys (kernel build-id, /proc maps) is one image */
		for (size_t j = 0; j < ndimg; j++)
			if (!strcmp(dimg[j].kind, d.kind) && !strcmp(dimg[j].id, d.id) && !strcmp(dimg[j].path, d.path) &&
			    dimg[j].pid == d.pid) {
				canon[i] = (uint32_t)j;
				break;
			}
		if (canon[i] != UINT32_MAX) {
			dbimg_release(&d);
			continue;
		}
		GROW(dimg, adimg, ndimg + 1);
		dimg[ndimg] = d;
		canon[i] = (uint32_t)ndimg++;
	}

	/* 2. self counts per (image, pid, offset): the leaf of each stack */
	struct sums s;
	memset(&s, 0, sizeof(s));
	s.nevents = ne;
	uint64_t *kaddrs = NULL;
	size_t nk = 0, ak = 0;
	for (size_t r = 0; r < a->nrows; r++) {
		const struct tally_stack *st = &a->stacks[a->rows[r].stack];
		const struct tally_frame *leaf = &a->frames[a->stack_frames[st->first]];
		sums_add(&s, canon[leaf->image], a->rows[r].pid, leaf->offset, &a->counts[r * (size_t)ne]);
	}
	for (size_t f = 0; f < a->nframes; f++)
		if (a->frames[f].image == a->kernel_image && used[a->kernel_image]) {
			GROW(kaddrs, ak, nk + 1);
			kaddrs[nk++] = a->frames[f].offset;
		}
	tally_qsort(s.cells, s.n, sizeof(*s.cells), cmp_cell);

	/* 3. one .prof per (image, pid) */
	for (size_t i = 0; i < s.n;) {
		size_t j = i;
		uint64_t *tot = xcalloc((size_t)ne, sizeof(uint64_t));
		while (j < s.n && s.cells[j].image == s.cells[i].image && s.cells[j].pid == s.cells[i].pid) {
			for (int e = 0; e < ne; e++)
				tot[e] += s.counts[(size_t)s.cells[j].row * (size_t)ne + (size_t)e];
			j++;
		}
		const struct dbimg *d = &dimg[s.cells[i].image];
		int pid = s.cells[i].pid ? s.cells[i].pid : d->pid;
		strbuf_reset(&sb);
		struct strbuf fname = STRBUF_INIT;
		char *fn = sanitize_name(d->name);
		strbuf_addf(&fname, "%s-%s", fn, d->id);
		free(fn);
		if (pid)
			strbuf_addf(&fname, "-%d", pid);
		strbuf_addstr(&fname, ".prof");
		struct tally_meta h = { 0 };
		tally_meta_set(&h, "format-version", "%d", TALLY_FORMAT_VERSION);
		tally_meta_set(&h, "image", "%s", d->name);
		tally_meta_set(&h, "path", "%s", d->path);
		tally_meta_set(&h, "image-id", "%s", d->id);
		tally_meta_set(&h, "id-kind", "%s", d->id_kind);
		tally_meta_set(&h, "kind", "%s", d->kind);
		tally_meta_set(&h, "index", "%u", s.cells[i].image);
		if (s.cells[i].pid) {
			tally_meta_set(&h, "pid", "%d", s.cells[i].pid);
			tally_meta_set(&h, "comm", "%s", task_comm(a, s.cells[i].pid));
		}
		tally_meta_set(&h, "events", "%s", tally_meta_get(session, "events"));
		struct strbuf tl = STRBUF_INIT;
		for (int e = 0; e < ne; e++)
			strbuf_addf(&tl, "%s%" PRIu64, e ? "," : "", tot[e]);
		tally_meta_set(&h, "samples", "%s", tl.buf);
		strbuf_release(&tl);
		meta_format(&sb, &h);
		tally_meta_release(&h);
		strbuf_addch(&sb, '\n');
		for (size_t k = i; k < j; k++) {
			strbuf_addf(&sb, "%" PRIx64, s.cells[k].offset);
			for (int e = 0; e < ne; e++)
				strbuf_addf(&sb, " %" PRIu64, s.counts[(size_t)s.cells[k].row * (size_t)ne + (size_t)e]);
			strbuf_addch(&sb, '\n');
		}
		free(tot);
		ret = write_in(dir, fname.buf, &sb);
		strbuf_release(&fname);
		if (ret)
			goto out;
		i = j;
	}

	/* 4. stacks, when call chains were recorded */
	const char *cg = tally_meta_get(session, "call-graph");
	if (cg && strcmp(cg, "none")) {
		strbuf_reset(&sb);
		strbuf_addstr(&sb, "# count[,count...] pid frames (image-index:hex-offset, leaf first)\n");
		for (size_t r = 0; r < a->nrows; r++) {
			const struct tally_stack *st = &a->stacks[a->rows[r].stack];
			for (int e = 0; e < ne; e++)
				strbuf_addf(&sb, "%s%" PRIu64, e ? "," : "", a->counts[r * (size_t)ne + (size_t)e]);
			strbuf_addf(&sb, " %d", a->rows[r].pid);
			for (uint32_t f = 0; f < st->len; f++) {
				const struct tally_frame *fr = &a->frames[a->stack_frames[st->first + f]];
				strbuf_addf(&sb, " %u:%" PRIx64, canon[fr->image], fr->offset);
			}
			strbuf_addch(&sb, '\n');
		}
		if ((ret = write_in(dir, "stacks", &sb)))
			goto out;
	}

	/* 5. kernel symbols that the samples need, and the module list */
	if (nk) {
		struct tally_ksym *ks = NULL;
		size_t nks = 0;
		strbuf_reset(&sb);
		strbuf_addstr(&sb, "# address size type name [module]\n");
		if (tally_kallsyms_needed(NULL, kaddrs, nk, &ks, &nks) == 0) {
			for (size_t i = 0; i < nks; i++) {
				strbuf_addf(&sb, "%" PRIx64 " %" PRIx64 " %c %s", ks[i].addr, ks[i].size, ks[i].type, ks[i].name);
				if (ks[i].module)
					strbuf_addf(&sb, " [%s]", ks[i].module);
				strbuf_addch(&sb, '\n');
			}
			tally_ksyms_free(ks, nks);
		} else {
			tally_meta_set(session, "kernel-symbols", "unavailable: %s", tally_errmsg());
		}
		if ((ret = write_in(dir, "kernel.syms", &sb)))
			goto out;
		struct strbuf mods = STRBUF_INIT;
		strbuf_reset(&sb);
		strbuf_addstr(&sb, "# name size address\n");
		if (strbuf_read_file(&mods, "/proc/modules", 0) == 0) {
			char *save = NULL;
			for (char *l = strtok_r(mods.buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
				char name[128], addr[32];
				unsigned long size;
				if (sscanf(l, "%127s %lu %*s %*s %*s %31s", name, &size, addr) == 3)
					strbuf_addf(&sb, "%s %lu %s\n", name, size, addr);
			}
		}
		strbuf_release(&mods);
		if ((ret = write_in(dir, "modules", &sb)))
			goto out;
	}

	/* 6. JIT maps, jitdumps and the vDSO, copied: they do not outlive the machine or the process */
	for (size_t i = 0; i < ndimg; i++) {
		if (!strcmp(dimg[i].kind, "jit") && dimg[i].jd_text) {
			struct strbuf jp = STRBUF_INIT;
			strbuf_addf(&jp, "%s/jit", dir);
			mkdir(jp.buf, 0755);
			strbuf_addf(&jp, "/jitdump-%d-%s.txt", dimg[i].pid, dimg[i].id);
			ret = tally_write_file_atomic(jp.buf, dimg[i].jd_text, dimg[i].jd_text_len);
			strbuf_release(&jp);
			if (ret)
				goto out;
		}
		if (!strcmp(dimg[i].kind, "jit") && dimg[i].jit_map) {
			struct strbuf jp = STRBUF_INIT, jc = STRBUF_INIT;
			strbuf_addf(&jp, "%s/jit", dir);
			mkdir(jp.buf, 0755);
			strbuf_addf(&jp, "/perf-%d-%s.map", dimg[i].pid, dimg[i].id);
			strbuf_add(&jc, dimg[i].jit_map, dimg[i].jit_map_len);
			ret = tally_write_file_atomic(jp.buf, jc.buf ? jc.buf : "", jc.len);
			strbuf_release(&jp);
			strbuf_release(&jc);
			if (ret)
				goto out;
		}
		if (!strcmp(dimg[i].kind, "vdso")) {
			const void *p;
			size_t len;
			if (vdso_bytes(&p, &len) == 0) {
				struct strbuf v = STRBUF_INIT;
				strbuf_add(&v, p, len);
				ret = write_in(dir, "vdso.so", &v);
				strbuf_release(&v);
				if (ret)
					goto out;
			}
		}
	}

	/* 7. image registry and task list */
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n");
	for (size_t i = 0; i < ndimg; i++) {
		strbuf_addf(&sb, "%zu\t%s\t%s\t%s\t%d\t", i, dimg[i].kind, dimg[i].id, dimg[i].id_kind, dimg[i].pid);
		strbuf_add_escaped(&sb, dimg[i].name);
		strbuf_addch(&sb, '\t');
		strbuf_add_escaped(&sb, dimg[i].path);
		strbuf_addch(&sb, '\n');
	}
	if ((ret = write_in(dir, "images", &sb)))
		goto out;
	/* images mapped inside another mount namespace: their paths are the container's */
	strbuf_reset(&sb);
	for (size_t i = 0; i < ndimg; i++)
		if (dimg[i].foreign_ns)
			strbuf_addf(&sb, "%s%zu\n", sb.len ? "" : "# index of an image mapped in another mount namespace\n", i);
	if (sb.len && (ret = write_in(dir, "mntns", &sb)))
		goto out;
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "# pid\tcomm\texe\n");
	for (size_t i = 0; i < a->ntasks; i++) {
		strbuf_addf(&sb, "%d\t", a->tasks[i].pid);
		strbuf_add_escaped(&sb, a->tasks[i].comm);
		strbuf_addch(&sb, '\t');
		strbuf_add_escaped(&sb, a->tasks[i].exe ? a->tasks[i].exe : "");
		strbuf_addch(&sb, '\n');
	}
	if ((ret = write_in(dir, "tasks", &sb)))
		goto out;

	/* 8. the session last: its presence marks a complete database */
	strbuf_reset(&sb);
	for (int e = 0; e < ne; e++)
		strbuf_addf(&sb, "%s%" PRIu64, e ? "," : "", a->samples[e]);
	tally_meta_set(session, "samples", "%s", sb.buf ? sb.buf : "0");
	tally_meta_set(session, "lost", "%" PRIu64, a->lost);
	tally_meta_set(session, "throttled", "%" PRIu64, a->throttled);
	tally_meta_set(session, "images", "%zu", ndimg);
	strbuf_reset(&sb);
	meta_format(&sb, session);
	ret = write_in(dir, "session", &sb);
out:
	for (size_t i = 0; i < ndimg; i++)
		dbimg_release(&dimg[i]);
	free(dimg);
	free(canon);
	free(used);
	free(s.cells);
	free(s.counts);
	tally_hidx_release(&s.idx);
	free(kaddrs);
	strbuf_release(&sb);
	return ret;
}

static void fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

int tally_db_write(const char *path, bool force, struct tally_agg *a, struct tally_meta *session)
{
	int ret = tally_db_check_target(path, force);
	if (ret)
		return ret;
	char *parent = parent_dir(path);
	struct strbuf stage = STRBUF_INIT, old = STRBUF_INIT;
	strbuf_addf(&stage, "%s/.%s.tmp-%d", parent, tally_basename(path), (int)getpid());
	strbuf_addf(&old, "%s/.%s.old-%d", parent, tally_basename(path), (int)getpid());
	tally_remove_tree(stage.buf);
	if (mkdir(stage.buf, 0755) < 0) {
		ret = tally_seterr(-errno, "cannot create database '%s': %s", path, strerror(errno));
		goto out;
	}
	ret = write_contents(stage.buf, a, session);
	if (ret)
		goto fail;
	fsync_dir(stage.buf);
	struct stat st;
	bool replace = stat(path, &st) == 0;
	if (replace && rename(path, old.buf) < 0) {
		ret = tally_seterr(-errno, "cannot replace database '%s': %s", path, strerror(errno));
		goto fail;
	}
	if (rename(stage.buf, path) < 0) {
		ret = tally_seterr(-errno, "cannot create database '%s': %s", path, strerror(errno));
		if (replace)
			rename(old.buf, path);
		goto fail;
	}
	fsync_dir(parent);
	if (replace)
		tally_remove_tree(old.buf);
	goto out;
fail:
	tally_remove_tree(stage.buf);
out:
	free(parent);
	strbuf_release(&stage);
	strbuf_release(&old);
	return ret;
}
