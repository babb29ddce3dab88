/* A recording's aggregate made into a database (tally/snapshot.h): each
 * sampled image identified (build-id, or a hash of its bytes; the vDSO
 * copied), the kernel's symbols the samples need (/proc/kallsyms, kept
 * between writes), the module list; then written out (lib/db) or shown
 * live (tally top, the daemon's peek). */
#define _GNU_SOURCE
#include "tally/snapshot.h"
#include "tally/db.h"
#include "tally/util.h"

#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <xxhash.h>

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

/* The database's description of aggregate image i (strings borrowed or in *own). */
static void identify(struct tally_agg *a, uint32_t i, struct tally_db_image *d,
		     const char *kernel_id)
{
	struct tally_image *im = &a->images[i];
	char hex[32];
	memset(d, 0, sizeof(*d));
	switch (im->kind) {
	case TALLY_IMG_FILE:
		d->name = tally_db_image_name(im->path);
		d->path = xstrdup(im->path);
		tally_image_identify(im);
		d->id = xstrdup(im->id);
		d->id_kind = xstrdup(im->id_kind);
		d->foreign_ns = im->foreign_ns;
		/* from the task list: libc.so.6 is runnable too, so the ELF type cannot tell */
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
			 im->jd_text
				 ? XXH64(im->jd_text, im->jd_text_len,
					 XXH64(im->jit_map ? im->jit_map : "", im->jit_map_len, 0))
				 : XXH64(im->jit_map ? im->jit_map : "", im->jit_map_len, 0));
		d->id = xstrdup(hex);
		d->id_kind = xstrdup("xxh64");
		d->kind = xstrdup("jit");
		d->pid = im->pid;
		if (im->jit_map) {
			d->aux = xmalloc(im->jit_map_len + 1);
			memcpy(d->aux, im->jit_map, im->jit_map_len);
			d->aux[im->jit_map_len] = '\0';
			d->aux_len = im->jit_map_len;
		}
		if (im->jd_text) {
			d->jd_text = xmalloc(im->jd_text_len + 1);
			memcpy(d->jd_text, im->jd_text, im->jd_text_len);
			d->jd_text[im->jd_text_len] = '\0';
			d->jd_text_len = im->jd_text_len;
		}
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
			d->aux = xmalloc(len + 1);
			memcpy(d->aux, p, len);
			d->aux_len = len;
		} else {
			d->id = xstrdup("00000000");
			d->id_kind = xstrdup("none");
		}
		d->kind = xstrdup("vdso");
		break;
	}
	}
}

void tally_ksym_cache_release(struct tally_ksym_cache *kc)
{
	tally_kallsyms_free(kc->table);
	free(kc->modules);
	memset(kc, 0, sizeof(*kc));
}

/* The symbols containing addrs into the builder: from kc's table when there is
 * one (read again when the modules changed), else for this write alone
 * (tally_kernel_symbols_for: the build-id cache's copy, or /proc/kallsyms).
 * Loading or unloading a module moves symbols: kc's table is then read again. */
static int kernel_symbols(struct tally_db_builder *b, struct tally_ksym_cache *kc, uint64_t *addrs,
			  size_t n, const char *modules)
{
	struct tally_kallsyms *once = NULL;
	if (!kc) {
		bool cached;
		int r = tally_kernel_symbols_for(addrs, n, modules, &once, &cached);
		if (r)
			return r;
	} else if (!kc->table || !kc->modules || !modules || strcmp(kc->modules, modules)) {
		tally_kallsyms_free(kc->table);
		kc->table = NULL;
		free(kc->modules);
		kc->modules = NULL;
		int r = tally_kallsyms_open(NULL, &kc->table);
		kc->reads++;
		if (r)
			return r;
		kc->modules = modules ? xstrdup(modules) : NULL;
	}
	for (size_t i = 0; i < n; i++) {
		struct tally_ksym k;
		if (tally_kallsyms_lookup(once ? once : kc->table, addrs[i], &k)) {
			tally_db_builder_ksym(b, &k);
			free(k.name);
			free(k.module);
		}
	}
	tally_kallsyms_free(once);
	return 0;
}

/* The loaded modules, each with its build-id from sysfs (so a report can tell
 * its .ko from another build of the same module). */
static char *read_modules(void)
{
	struct strbuf mods = STRBUF_INIT, out = STRBUF_INIT, notes = STRBUF_INIT;
	strbuf_addstr(&out, "# name size address build-id\n");
	if (strbuf_read_file(&mods, "/proc/modules", 0) == 0) {
		char *save = NULL;
		for (char *l = strtok_r(mods.buf, "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save)) {
			char name[128], addr[32], id[160];
			unsigned long size;
			if (sscanf(l, "%127s %lu %*s %*s %*s %31s", name, &size, addr) != 3)
				continue;
			strbuf_reset(&notes);
			strbuf_addf(&notes, "/sys/module/%s/notes/.note.gnu.build-id", name);
			tally_notes_build_id(notes.buf, id, sizeof(id));
			strbuf_addf(&out, "%s %lu %s %s\n", name, size, addr, id[0] ? id : "-");
		}
	}
	strbuf_release(&notes);
	strbuf_release(&mods);
	return strbuf_detach(&out);
}

int tally_db_from_agg(struct tally_db *out, struct tally_agg *a, const struct tally_meta *session,
		      struct tally_ksym_cache *kc)
{
	int ne = a->nevents;
	const char *evs = tally_meta_get(session, "events");
	char **names = xcalloc((size_t)ne + 1, sizeof(char *));
	{
		const char *p = evs ? evs : "";
		for (int e = 0; e < ne; e++) {
			size_t l = strcspn(p, ",");
			names[e] = l ? xstrndup(p, l) : xstrdup("?");
			p += l;
			if (*p == ',')
				p++;
		}
	}
	const char *cg = tally_meta_get(session, "call-graph");
	bool stacks = cg && strcmp(cg, "none");
	struct tally_db_builder *b = tally_db_builder_new(ne, names, a->per_pid, stacks);
	for (int e = 0; e < ne; e++)
		free(names[e]);
	free(names);
	tally_db_builder_session(b, session);

	char kernel_id[160];
	tally_kernel_build_id(kernel_id, sizeof(kernel_id));

	/* which images have samples, and their index in the database */
	bool *used = xcalloc(a->nimages + 1, sizeof(bool));
	for (size_t r = 0; r < a->nrows; r++) {
		const struct tally_stack *st = &a->stacks[a->rows[r].stack];
		for (uint32_t f = 0; f < st->len; f++)
			used[a->frames[a->stack_frames[st->first + f]].image] = true;
	}
	uint32_t *canon = xmalloc((a->nimages + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < a->nimages; i++) {
		canon[i] = UINT32_MAX;
		if (!used[i])
			continue;
		struct tally_db_image d;
		identify(a, (uint32_t)i, &d, kernel_id);
		/* the same file reached through two keys (kernel build-id, /proc maps) is one image
		 */
		canon[i] = tally_db_builder_image(b, &d);
		tally_db_image_release(&d);
	}

	/* the command names as labels (comm=NAME, docs/format.md): a label set each */
	uint32_t *comm_label = xcalloc(a->ncomms + 1, sizeof(uint32_t));
	for (size_t i = 0; i < a->ncomms; i++) {
		char v[16];
		size_t n = strnlen(a->comms[i], sizeof(v) - 1);
		for (size_t k = 0; k < n; k++) /* a label value holds no control character */
			v[k] = (unsigned char)a->comms[i][k] < 0x20 || a->comms[i][k] == 0x7f
				       ? '?'
				       : a->comms[i][k];
		v[n] = '\0';
		struct tally_label l = { (char *)"comm", v };
		struct tally_labelset set = { &l, 1 };
		comm_label[i + 1] = n ? tally_db_builder_label(b, &set) : 0;
	}

	/* self counts per (image, pid, comm, offset): the leaf of each stack; the stacks */
	struct tally_frame *fr = NULL;
	size_t afr = 0;
	for (size_t r = 0; r < a->nrows; r++) {
		const struct tally_stack *st = &a->stacks[a->rows[r].stack];
		const struct tally_frame *leaf = &a->frames[a->stack_frames[st->first]];
		const uint64_t *c = &a->counts[r * (size_t)ne];
		uint32_t lab = a->rows[r].comm <= a->ncomms ? comm_label[a->rows[r].comm] : 0;
		/* what each count weighs: the periods of its samples (tally_rec.weight) */
		const uint64_t *w = &a->weights[r * (size_t)ne];
		tally_db_builder_entry_w(b, canon[leaf->image], a->rows[r].pid, lab, leaf->offset,
					 c, w);
		if (stacks) {
			GROW(fr, afr, st->len);
			for (uint32_t f = 0; f < st->len; f++) {
				const struct tally_frame *x =
					&a->frames[a->stack_frames[st->first + f]];
				fr[f] = (struct tally_frame){ canon[x->image], x->offset };
			}
			tally_db_builder_stack_w(b, a->rows[r].pid, lab, fr, st->len, c, w);
		}
	}
	free(fr);
	free(comm_label);

	/* kernel symbols that the samples need, and the module list */
	uint64_t *kaddrs = NULL;
	size_t nk = 0, ak = 0;
	if (a->kernel_image < a->nimages && used[a->kernel_image])
		for (size_t f = 0; f < a->nframes; f++)
			if (a->frames[f].image == a->kernel_image) {
				GROW(kaddrs, ak, nk + 1);
				kaddrs[nk++] = a->frames[f].offset;
			}
	struct tally_meta extra = { 0 };
	if (nk) {
		char *mods = read_modules();
		if (kernel_symbols(b, kc, kaddrs, nk, mods))
			tally_meta_set(&extra, "kernel-symbols", "unavailable: %s", tally_errmsg());
		tally_db_builder_modules(b, mods);
		free(mods);
	}
	free(kaddrs);

	for (size_t t = 0; t < a->ntasks; t++)
		tally_db_builder_task(b, a->tasks[t].pid, a->tasks[t].comm, a->tasks[t].exe);
	tally_db_builder_counters(b, a->lost, a->throttled);
	if (extra.n)
		tally_db_builder_session(b, &extra);
	tally_meta_release(&extra);
	free(canon);
	free(used);
	tally_db_builder_finish(b, out);
	return 0;
}

int tally_db_write(const char *path, bool force, struct tally_agg *a, struct tally_meta *session)
{
	int ret = tally_db_check_target(path, force);
	if (ret)
		return ret;
	struct tally_db db;
	ret = tally_db_from_agg(&db, a, session, NULL);
	if (!ret) {
		ret = tally_db_save(&db, path, force);
		/* the caller's session gets what was written (samples, lost, kernel-symbols) */
		for (size_t i = 0; i < db.session.n; i++)
			tally_meta_set(session, db.session.kv[i].key, "%s", db.session.kv[i].value);
	}
	tally_db_release(&db);
	return ret;
}

static bool live_task_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct tally_db *db = ctx;
	return db->tasks[i].pid == *(const int *)key;
}

int tally_db_from_agg_live(struct tally_db *out, struct tally_agg *a,
			   const struct tally_meta *session, struct tally_ksym_cache *kc)
{
	int r = tally_db_from_agg(out, a, session, kc);
	if (r)
		return r;
	if (!a->per_pid)
		return 0;
	/* the live processes with samples: the task list has only those that exited */
	struct tally_hidx have = { 0 };
	for (size_t i = 0; i < out->ntasks; i++)
		tally_hidx_put(&have, tally_hash_u64((uint64_t)(uint32_t)out->tasks[i].pid),
			       (uint32_t)i);
	size_t cap = out->ntasks;
	for (size_t i = 0; i < a->nrows; i++) {
		int pid = a->rows[i].pid;
		uint64_t h = tally_hash_u64((uint64_t)(uint32_t)pid);
		if (tally_hidx_get(&have, h, &pid, live_task_eq, out) != TALLY_HIDX_NONE)
			continue;
		struct tally_proc *p = tally_agg_proc(a, pid, false);
		if (!p)
			continue;
		GROW(out->tasks, cap, out->ntasks + 1);
		out->tasks[out->ntasks] = (struct tally_db_task){ pid, xstrdup(p->comm),
								  xstrdup(p->exe ? p->exe : "") };
		tally_hidx_put(&have, h, (uint32_t)out->ntasks++);
	}
	tally_hidx_release(&have);
	return 0;
}
