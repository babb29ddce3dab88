/* Writing a profile database (docs/format.md): identify each sampled image,
 * sum samples per (image, pid, offset), snapshot kernel symbols, then publish the
 * whole directory with one rename. */
#define _GNU_SOURCE
#include "tally/db.h"
#include "db-private.h"
#include "stacks.h"
#include "tally/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>

static void meta_format(struct strbuf *sb, const struct tally_meta *m)
{
	for (size_t i = 0; i < m->n; i++) {
		strbuf_addf(sb, "%s: ", m->kv[i].key);
		strbuf_add_escaped(sb, m->kv[i].value);
		strbuf_addch(sb, '\n');
	}
}

/* The session's lines with the format version the content needs. */
static void session_format(struct strbuf *sb, const struct tally_meta *m, int version)
{
	bool done = false;
	for (size_t i = 0; i < m->n; i++) {
		if (!strcmp(m->kv[i].key, "format-version")) {
			strbuf_addf(sb, "format-version: %d\n", version);
			done = true;
			continue;
		}
		strbuf_addf(sb, "%s: ", m->kv[i].key);
		strbuf_add_escaped(sb, m->kv[i].value);
		strbuf_addch(sb, '\n');
	}
	if (!done)
		strbuf_addf(sb, "format-version: %d\n", version);
}

int tally_db_check_target(const char *path, bool force)
{
	struct stat st;
	if (!*path)
		return tally_seterr(-EINVAL, "empty database path (name one with -o DIR)");
	tally_db_recover(path, NULL);
	if (stat(path, &st) == 0) {
		if (!force)
			return tally_seterr(
				-EEXIST,
				"database '%s' already exists (use --force to replace it, or -o to name another)",
				path);
		if (!S_ISDIR(st.st_mode))
			return tally_seterr(
				-ENOTDIR,
				"'%s' exists and is not a database directory (remove it or choose another -o)",
				path);
		struct strbuf s = STRBUF_INIT;
		strbuf_addf(&s, "%s/session", path);
		bool is_db = access(s.buf, F_OK) == 0;
		strbuf_release(&s);
		if (!is_db)
			return tally_seterr(
				-EEXIST,
				"'%s' exists and is not a tally database: --force only replaces databases (choose another -o)",
				path);
	}
	char *parent = tally_dirname(path);
	int ret = 0;
	if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode))
		ret = tally_seterr(-ENOENT,
				   "cannot create database '%s': directory '%s' does not exist",
				   path, parent);
	else if (access(parent, W_OK | X_OK) < 0)
		ret = tally_seterr(
			-EACCES,
			"cannot create database '%s': directory '%s' is not writable (choose another -o)",
			path, parent);
	free(parent);
	return ret;
}

char *tally_db_image_name(const char *path)
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

/* ---- writing a database out: a directory, or a bundle ---- */

/* Where the files go: put(name, data, len) for each. */
struct sink {
	int (*put)(struct sink *s, const char *name, const void *data, size_t len);
	const char *dir;     /* directory sinks: the staging directory */
	const char *db;      /* ... and the database it becomes (errors name it) */
	struct strbuf *out;  /* bundle sinks */
	size_t files, bytes;
	bool made_jit;
	/* a spare copy written over (struct tally_db_spare): its files are
	 * rewritten in place, and the names put are kept to remove the others */
	bool overwrite;
	char **put_names;
	size_t nput, aput;
	struct tally_hidx put_idx;
	/* the spare's files when its writing began: a name this save does not
	 * find is given one of them that it has not written (renamed: no inode
	 * made, none freed). Such names are written last (deferred, a copy of
	 * their content kept), when every name the spare had and this save writes
	 * has been written: the pool is then only what this save leaves */
	char **pool;
	size_t npool, apool;
	bool defer;
	struct deferred {
		char *name;
		void *data;
		size_t len;
	} *deferred;
	size_t ndeferred, adeferred;
};

static bool name_eq(const void *ctx, uint32_t idx, const void *key)
{
	char *const *names = ctx;
	return !strcmp(names[idx], key);
}

static void sink_release(struct sink *s)
{
	for (size_t i = 0; i < s->nput; i++)
		free(s->put_names[i]);
	free(s->put_names);
	tally_hidx_release(&s->put_idx);
	for (size_t i = 0; i < s->npool; i++)
		free(s->pool[i]);
	free(s->pool);
	for (size_t i = 0; i < s->ndeferred; i++) {
		free(s->deferred[i].name);
		free(s->deferred[i].data);
	}
	free(s->deferred);
}

static bool was_put(const struct sink *s, const char *name)
{
	return tally_hidx_get(&s->put_idx, tally_hash_bytes(name, strlen(name), 0), name, name_eq,
			      s->put_names) != TALLY_HIDX_NONE;
}

/* The regular files at the top of the spare dir, for put_dir to rename. */
static void fill_pool(struct sink *s, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (de->d_type != DT_REG &&
		    (de->d_type != DT_UNKNOWN ||
		     fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		     !S_ISREG(st.st_mode)))
			continue;
		GROW(s->pool, s->apool, s->npool + 1);
		s->pool[s->npool++] = xstrdup(de->d_name);
	}
	closedir(d);
}

/* Opens the file at p of a spare copy to be written over, st what is there
 * (NULL: nothing): the same inode when it is a regular file of its own, else
 * (with from_pool, when there is nothing) a file of the spare this save has
 * not written, renamed (no new inode, no blocks freed), else a new one. A
 * link, a directory, a device or a shared inode is never opened for writing
 * nor written through. */
static int open_over(struct sink *s, const char *p, const struct stat *st, bool from_pool,
		     off_t *size)
{
	int fd = -1;
	struct stat now;
	if (st && S_ISREG(st->st_mode) && st->st_nlink == 1)
		fd = open(p, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	while (!st && from_pool && s->npool) {
		char *from = s->pool[--s->npool];
		bool ok = !was_put(s, from);
		if (ok) {
			struct strbuf f = STRBUF_INIT;
			strbuf_addf(&f, "%s/%s", s->dir, from);
			ok = fstatat(AT_FDCWD, f.buf, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
			     S_ISREG(now.st_mode) && rename(f.buf, p) == 0;
			strbuf_release(&f);
		}
		free(from);
		if (ok) {
			fd = open(p, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
			break;
		}
	}
	/* checked again on what was opened: it may have changed since */
	if (fd >= 0 && fstat(fd, &now) == 0 && S_ISREG(now.st_mode) && now.st_nlink == 1) {
		*size = now.st_size;
		return fd;
	}
	if (fd >= 0)
		close(fd);
	tally_remove_tree(p);
	*size = 0;
	return open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

static int put_dir(struct sink *s, const char *name, const void *data, size_t len)
{
	struct strbuf p = STRBUF_INIT;
	if (!strncmp(name, "jit/", 4) && !s->made_jit) {
		strbuf_addf(&p, "%s/jit", s->dir);
		struct stat st;
		/* a spare's 'jit' that is not a directory of its own is never written through */
		if (s->overwrite && lstat(p.buf, &st) == 0 && !S_ISDIR(st.st_mode))
			unlink(p.buf);
		if (mkdir(p.buf, 0700) < 0 && errno != EEXIST) {
			int e = errno;
			int r = tally_seterr(
				-e, "cannot write database '%s' (its directory 'jit'): %s%s", s->db,
				strerror(e),
				e == ENOSPC || e == EDQUOT ? " (free some space)" : "");
			strbuf_release(&p);
			return r;
		}
		s->made_jit = true;
		strbuf_reset(&p);
	}
	strbuf_addf(&p, "%s/%s", s->dir, name);
	/* a private staging directory: no temporary names needed, and the whole
	 * directory is synced once before it is published; profiles are private */
	off_t had = 0;
	int fd;
	if (s->overwrite) {
		struct stat st;
		bool there = fstatat(AT_FDCWD, p.buf, &st, AT_SYMLINK_NOFOLLOW) == 0;
		bool missing = !there && errno == ENOENT && !strchr(name, '/');
		if (missing && s->defer) {
			/* new to the spare: written after the names it has (struct sink) */
			GROW(s->deferred, s->adeferred, s->ndeferred + 1);
			struct deferred *d = &s->deferred[s->ndeferred++];
			d->name = xstrdup(name);
			d->data = xmalloc(len + 1);
			memcpy(d->data, data, len);
			d->len = len;
			strbuf_release(&p);
			return 0;
		}
		fd = open_over(s, p.buf, there ? &st : NULL, missing, &had);
	} else {
		fd = open(p.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	int e = 0;
	if (fd < 0) {
		e = errno;
	} else {
		e = -tally_write_all(fd, data, len);
		/* written over: what the older content had beyond this goes */
		if (!e && had > (off_t)len && ftruncate(fd, (off_t)len) < 0)
			e = errno;
		if (close(fd) < 0 && !e)
			e = errno;
	}
	if (!e && s->overwrite) {
		GROW(s->put_names, s->aput, s->nput + 1);
		s->put_names[s->nput] = xstrdup(name);
		tally_hidx_put(&s->put_idx, tally_hash_bytes(name, strlen(name), 0),
			       (uint32_t)s->nput++);
	}
	int r = 0;
	if (e)
		r = tally_seterr(-e, "cannot write database '%s' (its file '%s'): %s%s", s->db,
				 name, strerror(e),
				 e == ENOSPC || e == EDQUOT ? " (free some space)" : "");
	strbuf_release(&p);
	s->files++;
	s->bytes += len;
	return r;
}

static int put_bundle(struct sink *s, const char *name, const void *data, size_t len)
{
	if (s->out) {
		strbuf_addf(s->out, "file: %zu %s\n", len, name);
		strbuf_add(s->out, data, len);
		strbuf_addch(s->out, '\n');
	}
	s->files++;
	s->bytes += len;
	return 0;
}

static const char *task_comm(const struct tally_db *db, int pid)
{
	const char *c = tally_db_comm(db, pid);
	return c ? c : "";
}

/* A copied file of image i: its content in memory (mem, n), or read from its
 * directory. 1 when there is one. */
static int image_aux(const struct tally_db *db, uint32_t i, const char *mem, size_t n,
		     const char *rel, struct strbuf *sb, const char **data, size_t *len)
{
	const struct tally_db_image *im = &db->images[i];
	if (mem) {
		*data = mem;
		*len = n;
		return 1;
	}
	if (im->aux || im->jd_text)
		return 0; /* the image's copies are in memory, and this one is not among them */
	struct strbuf p = STRBUF_INIT;
	strbuf_addf(&p, "%s/%s", tally_db_image_dir(db, i), rel);
	strbuf_reset(sb);
	int r = tally_read_regular(sb, AT_FDCWD, p.buf, 0, TALLY_DB_FILE_MAX);
	strbuf_release(&p);
	if (r)
		return 0; /* none was kept: the reader says so when it needs it */
	*data = sb->buf ? sb->buf : "";
	*len = sb->len;
	return 1;
}

/* Numbers for the big files, without printf (a flush formats hundreds of thousands). */
static void add_dec(struct strbuf *sb, uint64_t v)
{
	char b[24];
	size_t n = sizeof(b);
	do {
		b[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	strbuf_add(sb, b + n, sizeof(b) - n);
}

static void add_hex(struct strbuf *sb, uint64_t v)
{
	char b[16];
	size_t n = sizeof(b);
	do {
		b[--n] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	strbuf_add(sb, b + n, sizeof(b) - n);
}

static int save_to(const struct tally_db *db, struct sink *k)
{
	/* a database opened with TALLY_DB_STACKS_LATER: never write it without them */
	if (db->lazy)
		return tally_seterr(
			-EINVAL, "'%s': its stacks were not read (tally_db_load_stacks)", db->path);
	int ret = 0;
	size_t ne = (size_t)db->nevents;
	struct strbuf sb = STRBUF_INIT, name = STRBUF_INIT, aux = STRBUF_INIT;
	struct tally_hidx names = { 0 };
	char **used_names = NULL;
	size_t nused = 0, aused = 0;
	/* weights need version 3, written as version 4 (binary stacks); without
	 * them, labels (tally merge) need version 2, and everything else stays
	 * readable by version 1 readers */
	const uint64_t *counts = tally_db_raw_counts(db), *weights = tally_db_raw_weights(db);
	const uint64_t *scounts = tally_db_raw_stack_counts(db),
		       *sweights = tally_db_raw_stack_weights(db);
	bool weighted = db->has_weights && weights;
	int version = weighted ? TALLY_FORMAT_VERSION_BINARY_STACKS
			       : db->nlabels ? TALLY_FORMAT_VERSION_LABELS : TALLY_FORMAT_VERSION;
	uint64_t *mean = xcalloc(ne + 1, sizeof(uint64_t));
	for (size_t e = 0; e < ne; e++)
		mean[e] = tally_db_mean_period(db, (int)e);
	struct tally_meta session = { 0 };
	for (size_t i = 0; i < db->session.n; i++)
		/* a database without weights (format 1 or 2) says nothing of them */
		if (weighted || (strcmp(db->session.kv[i].key, "weight-total") &&
				 strcmp(db->session.kv[i].key, "weight-unit")))
			tally_meta_set(&session, db->session.kv[i].key, "%s",
				       db->session.kv[i].value);
	if (weighted) {
		/* the weights' sums and unit, from the data written */
		struct strbuf wt = STRBUF_INIT, wu = STRBUF_INIT;
		for (size_t e = 0; e < ne; e++) {
			uint64_t t = 0;
			for (size_t i = 0; i < db->nentries; i++)
				t = t + weights[i * ne + e] < t ? UINT64_MAX
								: t + weights[i * ne + e];
			strbuf_addf(&wt, "%s%" PRIu64, e ? "," : "", t);
			strbuf_addf(&wu, "%s%s", e ? "," : "", tally_db_unit(db, (int)e));
		}
		tally_meta_set(&session, "weight-unit", "%s", wu.buf ? wu.buf : "");
		tally_meta_set(&session, "weight-total", "%s", wt.buf ? wt.buf : "");
		strbuf_release(&wt);
		strbuf_release(&wu);
	}

	/* one .prof per (image, pid) */
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		const struct tally_db_image *d = &db->images[pf->image];
		int pid = pf->pid ? pf->pid : d->pid;
		uint64_t *tot = xcalloc(2 * ne + 1, sizeof(uint64_t)), *wtot = tot + ne;
		for (size_t i = pf->first; i < pf->end; i++)
			for (size_t e = 0; e < ne; e++) {
				tot[e] += counts[i * ne + e];
				if (weighted)
					wtot[e] += weights[i * ne + e];
			}
		strbuf_reset(&name);
		char *fn = tally_db_image_name(d->name);
		strbuf_addf(&name, "%s-%s", fn, d->id);
		free(fn);
		if (pid)
			strbuf_addf(&name, "-%d", pid);
		if (pf->label && version > 1)
			strbuf_addf(&name, "-l%u", pf->label);
		/* two images may share a name and id (unidentified files with one file
		 * name): a suffix keeps their profiles apart */
		size_t base = name.len;
		for (int n = 2;; n++) {
			strbuf_addstr(&name, ".prof");
			if (tally_hidx_get(&names, tally_hash_bytes(name.buf, name.len, 0),
					   name.buf, name_eq, used_names) == TALLY_HIDX_NONE)
				break;
			name.len = base;
			name.buf[base] = '\0';
			strbuf_addf(&name, ".%d", n);
		}
		GROW(used_names, aused, nused + 1);
		used_names[nused] = xstrdup(name.buf);
		tally_hidx_put(&names, tally_hash_bytes(name.buf, name.len, 0), (uint32_t)nused++);
		struct tally_meta h = { 0 };
		tally_meta_set(&h, "format-version", "%d", version);
		tally_meta_set(&h, "image", "%s", d->name);
		tally_meta_set(&h, "path", "%s", d->path);
		tally_meta_set(&h, "image-id", "%s", d->id);
		tally_meta_set(&h, "id-kind", "%s", d->id_kind);
		tally_meta_set(&h, "kind", "%s", d->kind);
		tally_meta_set(&h, "index", "%u", pf->image);
		if (pf->pid) {
			tally_meta_set(&h, "pid", "%d", pf->pid);
			tally_meta_set(&h, "comm", "%s", task_comm(db, pf->pid));
		}
		if (pf->label && version > 1)
			tally_meta_set(&h, "label", "%u", pf->label);
		tally_meta_set(&h, "events", "%s", tally_meta_get(&db->session, "events"));
		struct strbuf tl = STRBUF_INIT;
		for (size_t e = 0; e < ne; e++)
			strbuf_addf(&tl, "%s%" PRIu64, e ? "," : "", tot[e]);
		tally_meta_set(&h, "samples", "%s", tl.buf ? tl.buf : "");
		if (weighted) {
			strbuf_reset(&tl);
			for (size_t e = 0; e < ne; e++)
				strbuf_addf(&tl, "%s%" PRIu64, e ? "," : "", wtot[e]);
			tally_meta_set(&h, "weights", "%s", tl.buf ? tl.buf : "");
		}
		strbuf_release(&tl);
		free(tot);
		strbuf_reset(&sb);
		meta_format(&sb, &h);
		tally_meta_release(&h);
		strbuf_addch(&sb, '\n');
		for (size_t i = pf->first; i < pf->end; i++) {
			add_hex(&sb, db->entries[i].offset);
			for (size_t e = 0; e < ne; e++) {
				strbuf_addch(&sb, ' ');
				add_dec(&sb, counts[i * ne + e]);
				if (weighted) {
					strbuf_addch(&sb, ' ');
					add_dec(&sb, weights[i * ne + e]);
				}
			}
			strbuf_addch(&sb, '\n');
		}
		if ((ret = k->put(k, name.buf, sb.buf, sb.len)))
			goto out;
	}

	/* stacks, when call chains were recorded */
	if (db->has_stacks && version >= TALLY_FORMAT_VERSION_BINARY_STACKS && !db->text_stacks) {
		strbuf_reset(&sb);
		if ((ret = tally_stacks_write_binary(db, scounts, sweights, mean, &sb)) ||
		    (ret = k->put(k, "stacks", sb.buf, sb.len)))
			goto out;
	} else if (db->has_stacks) {
		strbuf_reset(&sb);
		strbuf_addstr(
			&sb,
			version > 2
				? "# count:weight[,count:weight...] pid label frames (image-index:hex-offset, leaf first)\n"
			: version > 1
				? "# count[,count...] pid label frames (image-index:hex-offset, leaf first)\n"
				: "# count[,count...] pid frames (image-index:hex-offset, leaf first)\n");
		for (size_t s = 0; s < db->nstacks; s++) {
			const struct tally_db_stack *st = &db->stacks[s];
			for (size_t e = 0; e < ne; e++) {
				if (e)
					strbuf_addch(&sb, ',');
				add_dec(&sb, scounts[s * ne + e]);
				if (weighted) {
					/* a database given weights without stack weights: count x
					 * period-mean */
					uint64_t w;
					if (sweights)
						w = sweights[s * ne + e];
					else
						w = tally_mul_sat(scounts[s * ne + e], mean[e]);
					strbuf_addch(&sb, ':');
					add_dec(&sb, w);
				}
			}
			strbuf_addch(&sb, ' ');
			add_dec(&sb, (uint64_t)(st->pid > 0 ? st->pid : 0));
			if (version > 1) {
				strbuf_addch(&sb, ' ');
				add_dec(&sb, st->label);
			}
			for (uint32_t f = 0; f < st->len; f++) {
				const struct tally_frame *fr = tally_db_frame(db, st, f);
				strbuf_addch(&sb, ' ');
				add_dec(&sb, fr->image);
				strbuf_addch(&sb, ':');
				add_hex(&sb, fr->offset);
			}
			strbuf_addch(&sb, '\n');
		}
		if ((ret = k->put(k, "stacks", sb.buf, sb.len)))
			goto out;
	}

	/* kernel symbols and the module list */
	bool kernel = false;
	for (size_t i = 0; i < db->nimages; i++)
		kernel = kernel || !strcmp(db->images[i].kind, "kernel");
	if (kernel || db->nksyms) {
		strbuf_reset(&sb);
		strbuf_addstr(&sb, "# address size type name [module]\n");
		for (size_t i = 0; i < db->nksyms; i++) {
			const struct tally_ksym *ks = &db->ksyms[i];
			strbuf_addf(&sb, "%" PRIx64 " %" PRIx64 " %c %s", ks->addr, ks->size,
				    ks->type, ks->name);
			if (ks->module)
				strbuf_addf(&sb, " [%s]", ks->module);
			strbuf_addch(&sb, '\n');
		}
		if ((ret = k->put(k, "kernel.syms", sb.buf, sb.len)))
			goto out;
	}
	if (db->modules && (ret = k->put(k, "modules", db->modules, strlen(db->modules))))
		goto out;

	/* JIT maps, jitdumps and the vDSO, copied: they do not outlive the machine or the process
	 */
	bool vdso_done = false;
	for (size_t i = 0; i < db->nimages; i++) {
		const struct tally_db_image *im = &db->images[i];
		const char *data;
		size_t len;
		if (!strcmp(im->kind, "jit")) {
			strbuf_reset(&name);
			strbuf_addf(&name, "jit/jitdump-%d-%s.txt", im->pid, im->id);
			if (image_aux(db, (uint32_t)i, im->jd_text, im->jd_text_len, name.buf, &aux,
				      &data, &len) &&
			    (ret = k->put(k, name.buf, data, len)))
				goto out;
			strbuf_reset(&name);
			strbuf_addf(&name, "jit/perf-%d-%s.map", im->pid, im->id);
			if (image_aux(db, (uint32_t)i, im->aux, im->aux_len, name.buf, &aux, &data,
				      &len) &&
			    (ret = k->put(k, name.buf, data, len)))
				goto out;
		} else if (!strcmp(im->kind, "vdso") && !vdso_done) {
			if (image_aux(db, (uint32_t)i, im->aux, im->aux_len, "vdso.so", &aux, &data,
				      &len)) {
				vdso_done = true;
				if ((ret = k->put(k, "vdso.so", data, len)))
					goto out;
			}
		}
	}

	/* image registry and task list */
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n");
	for (size_t i = 0; i < db->nimages; i++) {
		const struct tally_db_image *im = &db->images[i];
		strbuf_addf(&sb, "%zu\t%s\t%s\t%s\t%d\t", i, im->kind, im->id, im->id_kind,
			    im->pid);
		strbuf_add_escaped(&sb, im->name);
		strbuf_addch(&sb, '\t');
		strbuf_add_escaped(&sb, im->path);
		strbuf_addch(&sb, '\n');
	}
	if ((ret = k->put(k, "images", sb.buf, sb.len)))
		goto out;
	/* images mapped inside another mount namespace: their paths are the container's */
	strbuf_reset(&sb);
	for (size_t i = 0; i < db->nimages; i++)
		if (db->images[i].foreign_ns)
			strbuf_addf(
				&sb, "%s%zu\n",
				sb.len ? ""
				       : "# index of an image mapped in another mount namespace\n",
				i);
	if (sb.len && (ret = k->put(k, "mntns", sb.buf, sb.len)))
		goto out;
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "# pid\tcomm\texe\n");
	for (size_t i = 0; i < db->ntasks; i++) {
		strbuf_addf(&sb, "%d\t", db->tasks[i].pid);
		strbuf_add_escaped(&sb, db->tasks[i].comm);
		strbuf_addch(&sb, '\t');
		strbuf_add_escaped(&sb, db->tasks[i].exe ? db->tasks[i].exe : "");
		strbuf_addch(&sb, '\n');
	}
	if ((ret = k->put(k, "tasks", sb.buf, sb.len)))
		goto out;

	if (db->nlabels) {
		strbuf_reset(&sb);
		tally_db_format_labels(db, &sb);
		if ((ret = k->put(k, "labels", sb.buf, sb.len)))
			goto out;
	}
	if (db->nsources) {
		strbuf_reset(&sb);
		tally_db_format_sources(db, &sb);
		if ((ret = k->put(k, "sources", sb.buf, sb.len)))
			goto out;
	}

	/* the session last: its presence marks a complete database */
	strbuf_reset(&sb);
	session_format(&sb, &session, version);
	ret = k->put(k, "session", sb.buf, sb.len);
out:
	tally_meta_release(&session);
	free(mean);
	for (size_t i = 0; i < nused; i++)
		free(used_names[i]);
	free(used_names);
	tally_hidx_release(&names);
	strbuf_release(&sb);
	strbuf_release(&name);
	strbuf_release(&aux);
	return ret;
}

size_t tally_db_bytes(const struct tally_db *db, size_t *files)
{
	struct sink k = { .put = put_bundle };
	save_to(db, &k);
	if (files)
		*files = k.files;
	return k.bytes;
}

int tally_db_bundle(const struct tally_db *db, struct strbuf *out)
{
	struct sink k = { .put = put_bundle, .out = out };
	strbuf_addf(out, "tally-bundle: %d\n", TALLY_FORMAT_VERSION);
	int r = save_to(db, &k);
	if (!r)
		strbuf_addf(out, "end: %zu files\n", k.files);
	return r;
}

/* Removes what a spare copy holds that this save did not write (an image no
 * longer in the database, a label numbered otherwise): under dir, the entries
 * named prefix + name. */
static int prune_unput(struct sink *s, int dfd, const char *prefix)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		return -e;
	}
	struct strbuf rel = STRBUF_INIT;
	int ret = 0;
	struct dirent *de;
	while ((de = readdir(d)) && !ret) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		strbuf_reset(&rel);
		strbuf_addf(&rel, "%s%s", prefix, de->d_name);
		if (was_put(s, rel.buf))
			continue;
		struct stat st;
		if (!*prefix && !strcmp(de->d_name, "jit") &&
		    fstatat(dirfd(d), "jit", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode)) {
			int jfd = openat(dirfd(d), "jit",
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			ret = jfd < 0 ? -errno : prune_unput(s, jfd, "jit/");
			/* kept when it still holds what was written */
			if (!ret && unlinkat(dirfd(d), "jit", AT_REMOVEDIR) < 0 &&
			    errno != ENOTEMPTY && errno != EEXIST)
				ret = -errno;
			continue;
		}
		strbuf_reset(&rel);
		strbuf_addf(&rel, "%s/%s%s", s->dir, prefix, de->d_name);
		ret = tally_remove_tree(rel.buf);
	}
	strbuf_release(&rel);
	closedir(d);
	if (ret)
		return tally_seterr(
			ret, "cannot write database '%s' (removing what its older copy held): %s",
			s->db, strerror(-ret));
	return 0;
}

void tally_db_spare_drop(struct tally_db_spare *sp)
{
	if (!sp->path)
		return;
	tally_remove_tree(sp->path);
	close(sp->fd);
	if (sp->stacks_fd >= 0)
		close(sp->stacks_fd);
	free(sp->path);
	sp->path = NULL;
	sp->fd = -1;
	sp->stacks_fd = -1;
}

/* The spare copy kept for another database (the epoch before) serves this
 * one's staging copy: most of its files will have the same names. 1 when
 * stage is now that copy, locked (*lockfd, and *stacksfd its 'stacks' when it
 * has one, -1 else), 0 when there is none to take. */
static int take_spare(struct tally_db_spare *sp, const char *stage, int *lockfd, int *stacksfd)
{
	if (!sp || !sp->path)
		return 0;
	char *from = sp->path;
	int fd = sp->fd, sfd = sp->stacks_fd;
	sp->path = NULL;
	sp->fd = -1;
	sp->stacks_fd = -1;
	struct stat a, b;
	bool ok = true;
	if (strcmp(from, stage)) {
		tally_remove_tree(stage);
		ok = rename(from, stage) == 0;
	}
	/* still the directory it locked (nobody removed or replaced it) */
	ok = ok && fstat(fd, &a) == 0 && lstat(stage, &b) == 0 && S_ISDIR(b.st_mode) &&
	     a.st_dev == b.st_dev && a.st_ino == b.st_ino;
	if (!ok) {
		tally_remove_tree(from); /* when it was not renamed: the caller makes stage anew */
		close(fd);
		if (sfd >= 0)
			close(sfd);
		free(from);
		return 0;
	}
	free(from);
	*lockfd = fd;
	*stacksfd = sfd;
	return 1;
}

/* After the swap the old copy is at stage: kept as the spare, locked, when
 * asked for. true when kept; false also when a reader holds its 'stacks' (a
 * share lock on the file: it reads it, or keeps it open to read later),
 * which must never be written over. The spare's 'stacks' stays locked while
 * it is one: a reader that opened it just before the swap then reads it at
 * once, before a flush could write it (lib/db/stacks.c). */
static bool keep_spare(struct tally_db_spare *sp, const char *stage)
{
	if (!sp)
		return false;
	int fd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return false;
	}
	int sfd = openat(fd, "stacks", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (sfd < 0 && errno != ENOENT) {
		close(fd);
		return false;
	}
	if (sfd >= 0 && flock(sfd, LOCK_EX | LOCK_NB) < 0) {
		close(sfd);
		close(fd);
		return false;
	}
	sp->path = xstrdup(stage);
	sp->fd = fd;
	sp->stacks_fd = sfd;
	return true;
}

static void fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

int tally_db_save(const struct tally_db *db, const char *path, bool replace)
{
	return tally_db_save_checked(db, path, replace, NULL, NULL, NULL);
}

int tally_db_save_checked(const struct tally_db *db, const char *path, bool replace,
			  int (*check)(void *ctx, const char *staging), void *ctx,
			  struct tally_db_spare *spare)
{
	int ret = tally_db_check_target(path, replace);
	if (ret)
		return ret;
	char *parent = tally_dirname(path);
	char *stage = tally_db_temp_path(path, TALLY_DB_STAGE, (int)getpid());
	char *old = tally_db_temp_path(path, TALLY_DB_OLD, (int)getpid());
	int lockfd = -1, stacksfd = -1;
	bool over = take_spare(spare, stage, &lockfd, &stacksfd);
	if (!over)
		tally_remove_tree(stage);
	if (!over && mkdir(stage, 0700) < 0) {
		int e = errno;
		if (e == ENOENT) /* the directory is there (checked above): /proc, /sys */
			ret = tally_seterr(
				-e,
				"cannot create database '%s': directory '%s' takes no new files (a virtual file system such as /proc: choose another -o)",
				path, parent);
		else
			ret = tally_seterr(-e, "cannot create database '%s': %s%s", path,
					   strerror(e),
					   e == ENOSPC || e == EDQUOT ? " (free some space)" : "");
		goto out;
	}
	/* held until the copy is published: tally_db_recover leaves a locked stage
	 * alone (where flock fails, the writer's pid alone says it is at work) */
	if (!over) {
		lockfd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (lockfd >= 0)
			flock(lockfd, LOCK_EX | LOCK_NB);
	}
	struct sink k = {
		.put = put_dir, .dir = stage, .db = path, .overwrite = over, .defer = over
	};
	if (over)
		fill_pool(&k, stage);
	ret = save_to(db, &k);
	k.defer = false;
	for (size_t i = 0; !ret && i < k.ndeferred; i++)
		ret = put_dir(&k, k.deferred[i].name, k.deferred[i].data, k.deferred[i].len);
	if (!ret && over) {
		int dfd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		ret = dfd < 0 ? tally_seterr(-errno, "cannot write database '%s': %s", path,
					     strerror(errno))
			      : prune_unput(&k, dfd, "");
	}
	sink_release(&k);
	if (!ret && check)
		ret = check(ctx, stage);
	if (ret)
		goto fail;
	/* every file on disk before the directory is published (one call for all) */
	if (lockfd >= 0 && syncfs(lockfd) < 0 && errno == EIO) {
		ret = tally_seterr(-EIO, "cannot write database '%s': %s", path, strerror(EIO));
		goto fail;
	}
	struct stat st;
	bool exists = stat(path, &st) == 0;
	if (exists) {
		/* one atomic swap: a reader or a crash sees the old or the new, never neither */
		if (renameat2(AT_FDCWD, stage, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
			/* the copy published: unlocked at once, for readers to share-lock
			 * its 'stacks' (lib/db/stacks.c) */
			if (stacksfd >= 0) {
				close(stacksfd);
				stacksfd = -1;
			}
			if (lockfd >= 0) {
				close(lockfd);
				lockfd = -1;
			}
			fsync_dir(parent);
			/* stage is now the old copy: the next save's spare, or removed */
			if (!keep_spare(spare, stage))
				tally_remove_tree(stage);
			goto out;
		}
		if (errno != EINVAL && errno != ENOSYS) {
			ret = tally_seterr(-errno, "cannot replace database '%s': %s", path,
					   strerror(errno));
			goto fail;
		}
		/* a filesystem without RENAME_EXCHANGE: move the old one aside first */
		if (rename(path, old) < 0) {
			ret = tally_seterr(-errno, "cannot replace database '%s': %s", path,
					   strerror(errno));
			goto fail;
		}
	}
	if (rename(stage, path) < 0) {
		ret = tally_seterr(-errno, "cannot create database '%s': %s", path,
				   strerror(errno));
		if (exists)
			rename(old, path);
		goto fail;
	}
	fsync_dir(parent);
	if (exists)
		tally_remove_tree(old);
	goto out;
fail:
	tally_remove_tree(stage);
out:
	if (stacksfd >= 0)
		close(stacksfd);
	if (lockfd >= 0)
		close(lockfd);
	free(parent);
	free(stage);
	free(old);
	return ret;
}
