/* Image maps: `tally scan` writes them, `tally report --mapfile` reads them
 * (see imgmap.h; the file format is in docs/format.md). */
#define _GNU_SOURCE
#include "tally/imgmap.h"
#include "tally/elfinfo.h"
#include "tally/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const tally_scan_default_dirs[] = {
	"/usr/lib/debug", "/usr/local/lib", "/usr/local/bin", "/usr/lib", "/usr/bin", "/usr/sbin",
	"/usr/libexec",   "/lib",           "/bin",           "/sbin",    "/opt",     NULL,
};

#define MAP_HEADER "# tally image map, format 1"

static int cmp_entry(const void *a, const void *b)
{
	const struct tally_imgmap_entry *x = a, *y = b;
	int c = strcmp(x->id, y->id);
	if (c)
		return c;
	/* the most useful copy first: DWARF, then a symbol table */
	if (x->flags != y->flags)
		return (int)y->flags - (int)x->flags;
	return strcmp(x->path, y->path);
}

void tally_imgmap_release(struct tally_imgmap *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->e[i].id_kind);
		free(m->e[i].id);
		free(m->e[i].path);
	}
	free(m->e);
	free(m->file);
	memset(m, 0, sizeof(*m));
}

static bool is_hex(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

int tally_imgmap_parse(struct tally_imgmap *m, const char *buf, size_t len, const char *what)
{
	memset(m, 0, sizeof(*m));
	m->file = xstrdup(what);
	int ret = 0;
	size_t ln = 0;
	const char *cur = buf, *end = buf + len;
	struct strbuf line = STRBUF_INIT;
	if (!len) {
		ret = tally_seterr(
			-EINVAL,
			"'%s' is not a tally image map (it is empty; write one with 'tally scan')",
			what);
		goto fail;
	}
	while (cur < end) {
		const char *nl = memchr(cur, '\n', (size_t)(end - cur));
		size_t n = nl ? (size_t)(nl - cur) : (size_t)(end - cur);
		ln++;
		/* a NUL would end the line early and hide the rest: binary data, as the database
		 * reader says */
		if (memchr(cur, '\0', n)) {
			ret = tally_seterr(
				-EINVAL,
				"'%s' line %zu: binary data (a NUL byte) in a text file (the map is damaged: run 'tally scan' again)",
				what, ln);
			goto fail;
		}
		strbuf_reset(&line);
		strbuf_add(&line, cur, n);
		cur = nl ? nl + 1 : end;
		if (ln == 1 && strcmp(line.buf, MAP_HEADER)) {
			ret = tally_seterr(
				-EINVAL,
				"'%s' is not a tally image map (its first line should be '%s'; write one with 'tally scan')",
				what, MAP_HEADER);
			goto fail;
		}
		if (!line.len || line.buf[0] == '#')
			continue;
		char *f[4];
		int nf = 0;
		char *p = line.buf;
		for (; nf < 3; nf++) {
			f[nf] = p;
			char *t = strchr(p, '\t');
			if (!t)
				break;
			*t = '\0';
			p = t + 1;
		}
		if (nf != 3) {
			ret = tally_seterr(
				-EINVAL,
				"'%s' line %zu: expected 'ID-KIND<TAB>ID<TAB>FLAGS<TAB>PATH' (the map is damaged: run 'tally scan' again)",
				what, ln);
			goto fail;
		}
		f[3] = p;
		if ((strcmp(f[0], "build-id") && strcmp(f[0], "xxh64")) || !is_hex(f[1]) ||
		    !*f[3]) {
			ret = tally_seterr(
				-EINVAL,
				"'%s' line %zu: bad id kind, id or path (the map is damaged: run 'tally scan' again)",
				what, ln);
			goto fail;
		}
		unsigned flags = 0;
		if (strchr(f[2], 's'))
			flags |= TALLY_IMGMAP_SYMTAB;
		if (strchr(f[2], 'd'))
			flags |= TALLY_IMGMAP_DEBUG;
		tally_unescape(f[3]);
		GROW(m->e, m->alloc, m->n + 1);
		m->e[m->n++] = (struct tally_imgmap_entry){ xstrdup(f[0]), xstrdup(f[1]), flags,
							    xstrdup(f[3]) };
	}
	strbuf_release(&line);
	tally_qsort(m->e, m->n, sizeof(*m->e), cmp_entry);
	return 0;
fail:
	strbuf_release(&line);
	tally_imgmap_release(m);
	return ret;
}

int tally_imgmap_load(struct tally_imgmap *m, const char *path)
{
	memset(m, 0, sizeof(*m));
	struct strbuf sb = STRBUF_INIT;
	/* a regular file (a FIFO would hang the report), through a link if need be */
	int ret = tally_read_regular(&sb, AT_FDCWD, path, TALLY_OPEN_FOLLOW, 1u << 30);
	if (ret == -ENOENT || ret == -EACCES || ret == -EPERM) {
		strbuf_release(&sb);
		return tally_seterr(
			ret, "cannot read map file '%s': %s (write one with 'tally scan -o %s')",
			path, strerror(-ret), path);
	}
	if (ret) {
		strbuf_release(&sb);
		return tally_seterr(ret,
				    "cannot read map file: %s (write one with 'tally scan -o %s')",
				    tally_errmsg(), path);
	}
	ret = tally_imgmap_parse(m, sb.buf ? sb.buf : "", sb.len, path);
	strbuf_release(&sb);
	return ret;
}

struct imgmap_key {
	const struct tally_imgmap *m;
	const char *id;
};

static bool id_before(const void *ctx, size_t i)
{
	const struct imgmap_key *k = ctx;
	return strcmp(k->m->e[i].id, k->id) < 0;
}

size_t tally_imgmap_find(const struct tally_imgmap *m, const char *id, size_t *first)
{
	struct imgmap_key k = { m, id };
	size_t lo = tally_partition(m->n, id_before, &k);
	*first = lo;
	size_t n = 0;
	while (lo + n < m->n && !strcmp(m->e[lo + n].id, id))
		n++;
	return n;
}

/* ---- scanning ---- */

struct devino {
	dev_t dev;
	ino_t ino;
};

struct scan {
	struct strbuf *out;
	struct tally_scan_stats *st;
	void (*warn)(const char *msg, void *ctx);
	void *ctx;
	struct devino *seen;
	size_t nseen, aseen;
	struct tally_hidx seen_idx;
	struct strbuf msg;
};

static bool devino_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct scan *s = ctx;
	const struct devino *k = key;
	return s->seen[idx].dev == k->dev && s->seen[idx].ino == k->ino;
}

/* True the first time a directory (by device and inode) is seen. */
static bool first_visit(struct scan *s, const struct stat *st)
{
	struct devino k = { st->st_dev, st->st_ino };
	uint64_t h = tally_hash_u64((uint64_t)st->st_ino * 31 + (uint64_t)st->st_dev);
	if (tally_hidx_get(&s->seen_idx, h, &k, devino_eq, s) != TALLY_HIDX_NONE)
		return false;
	GROW(s->seen, s->aseen, s->nseen + 1);
	s->seen[s->nseen] = k;
	tally_hidx_put(&s->seen_idx, h, (uint32_t)s->nseen++);
	return true;
}

static void warnf(struct scan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(struct scan *s, const char *fmt, ...)
{
	if (!s->warn)
		return;
	va_list ap;
	va_start(ap, fmt);
	strbuf_reset(&s->msg);
	strbuf_vaddf(&s->msg, fmt, ap);
	va_end(ap);
	s->warn(s->msg.buf, s->ctx);
}

static void scan_file(struct scan *s, const char *path, int fd)
{
	unsigned char magic[4];
	if (pread(fd, magic, 4, 0) != 4 || memcmp(magic, "\177ELF", 4))
		return;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
		s->st->bad_elf++;
		warnf(s, "'%s': not a readable ELF file (%s): skipped", path, elf_errmsg(-1));
		if (e)
			elf_end(e);
		return;
	}
	unsigned flags = 0;
	size_t shstrndx;
	if (elf_getshdrstrndx(e, &shstrndx) == 0) {
		Elf_Scn *scn = NULL;
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			const char *nm;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
			    !(nm = elf_strptr(e, shstrndx, sh.sh_name)))
				continue;
			if (!strcmp(nm, ".symtab"))
				flags |= TALLY_IMGMAP_SYMTAB;
			else if (!strcmp(nm, ".debug_info") || !strcmp(nm, ".zdebug_info"))
				flags |= TALLY_IMGMAP_DEBUG;
		}
	}
	elf_end(e);
	/* the same identity the recorder gives: build-id, else a hash of the bytes */
	struct tally_elf_info info;
	if (tally_elf_info_fd(fd, path, 1, &info)) {
		s->st->unreadable++;
		warnf(s, "%s: skipped", tally_errmsg());
		return;
	}
	char hex[160];
	const char *kind = "build-id";
	if (info.build_id_len) {
		tally_hex(info.build_id, info.build_id_len, hex);
	} else if (info.have_hash) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
		kind = "xxh64";
	} else {
		return;
	}
	s->st->elf++;
	strbuf_addf(s->out, "%s\t%s\t%s%s%s\t", kind, hex, flags & TALLY_IMGMAP_SYMTAB ? "s" : "",
		    flags & TALLY_IMGMAP_DEBUG ? "d" : "", flags ? "" : "-");
	strbuf_add_escaped(s->out, path);
	strbuf_addch(s->out, '\n');
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void scan_dir(struct scan *s, const char *dir, int depth)
{
	if (depth > 64) {
		warnf(s, "'%s': more than 64 directories deep: skipped", dir);
		return;
	}
	DIR *d = opendir(dir);
	if (!d) {
		s->st->unreadable++;
		warnf(s, "cannot read directory '%s': %s: skipped", dir, strerror(errno));
		return;
	}
	/* names first, sorted: the map comes out the same on every run */
	char **names = NULL;
	size_t n = 0, a = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		GROW(names, a, n + 1);
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	tally_qsort(names, n, sizeof(*names), cmp_name);
	struct strbuf p = STRBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		strbuf_reset(&p);
		strbuf_addf(&p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", names[i]);
		struct stat st;
		/* symlinks followed: a loop shows up as a directory seen before */
		if (stat(p.buf, &st) != 0) {
			struct stat lst;
			if (lstat(p.buf, &lst) == 0 && S_ISLNK(lst.st_mode))
				continue; /* a dangling symlink */
			s->st->unreadable++;
			warnf(s, "cannot read '%s': %s: skipped", p.buf, strerror(errno));
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (!first_visit(s, &st)) {
				s->st->loops++;
				warnf(s,
				      "'%s': a directory already walked (a symlink loop or a bind mount): skipped",
				      p.buf);
				continue;
			}
			scan_dir(s, p.buf, depth + 1);
		} else if (S_ISREG(st.st_mode) && st.st_size >= 64) {
			struct stat lst;
			/* a symlink to a file is the file itself under another name: the real
			 * path is listed when its directory is walked */
			if (lstat(p.buf, &lst) == 0 && S_ISLNK(lst.st_mode))
				continue;
			s->st->files++;
			/* the file looked at, opened without blocking: swapped for a FIFO, it is
			 * skipped */
			int fd = tally_open_regular(AT_FDCWD, p.buf, 0, 0, NULL);
			if (fd < 0) {
				s->st->unreadable++;
				warnf(s, "%s: skipped", tally_errmsg());
				continue;
			}
			scan_file(s, p.buf, fd);
			close(fd);
		}
	}
	strbuf_release(&p);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int tally_scan(const char *const *dirs, size_t ndirs, struct strbuf *out,
	       struct tally_scan_stats *st, void (*warn)(const char *msg, void *ctx), void *ctx)
{
	struct scan s = { out, st, warn, ctx, NULL, 0, 0, { 0 }, STRBUF_INIT };
	memset(st, 0, sizeof(*st));
	elf_version(EV_CURRENT);
	if (!out->len)
		strbuf_addstr(out, MAP_HEADER
			      "\n# id-kind\tid\tflags (s .symtab, d .debug_info)\tpath\n");
	int ret = 0;
	for (size_t i = 0; i < ndirs; i++) {
		struct stat sst;
		if (stat(dirs[i], &sst) != 0) {
			ret = tally_seterr(-errno, "cannot scan '%s': %s", dirs[i],
					   strerror(errno));
			break;
		}
		if (!S_ISDIR(sst.st_mode)) {
			ret = tally_seterr(-ENOTDIR, "cannot scan '%s': not a directory", dirs[i]);
			break;
		}
		if (!first_visit(&s, &sst)) {
			st->loops++;
			warnf(&s, "'%s': a directory already walked: skipped", dirs[i]);
			continue;
		}
		scan_dir(&s, dirs[i], 0);
	}
	free(s.seen);
	tally_hidx_release(&s.seen_idx);
	strbuf_release(&s.msg);
	return ret;
}
