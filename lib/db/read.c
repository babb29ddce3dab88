/* Reading a profile database: every file is validated line by line, and any
 * damage is reported with the file, the line and what to do. */
#define _GNU_SOURCE
#include "tally/db.h"
#include "tally/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DAMAGED "the database is damaged: record it again"

int tally_parse_header_line(const char *line, const char *what, size_t lineno, char **key, char **value)
{
	const char *colon = strchr(line, ':');
	const char *k = line;
	if (!colon || colon == line)
		goto bad;
	for (const char *c = k; c < colon; c++)
		if (!(isalnum((unsigned char)*c) || *c == '-' || *c == '_' || *c == '.'))
			goto bad;
	const char *v = colon + 1;
	if (*v == ' ')
		v++;
	else if (*v)
		goto bad;
	*key = xstrndup(k, (size_t)(colon - k));
	*value = xstrdup(v);
	tally_unescape(*value);
	return 0;
bad:
	return tally_seterr(-EINVAL, "'%s' line %zu: expected 'key: value', got '%.40s' (%s)", what, lineno, line, DAMAGED);
}

static bool parse_hex(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;
	while (isxdigit((unsigned char)*s)) {
		if (n == 16)
			return false;
		int d = isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10);
		v = (v << 4) | (uint64_t)d;
		s++;
		n++;
	}
	if (!n)
		return false;
	*p = s;
	*out = v;
	return true;
}

static bool parse_dec(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;
	while (isdigit((unsigned char)*s)) {
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
		s++;
		n++;
	}
	if (!n)
		return false;
	*p = s;
	*out = v;
	return true;
}

int tally_parse_prof_line(const char *line, const char *what, size_t lineno, int nevents, uint64_t *offset,
			  uint64_t *counts)
{
	const char *p = line;
	if (!parse_hex(&p, offset))
		goto bad;
	for (int e = 0; e < nevents; e++) {
		if (*p != ' ')
			goto bad;
		p++;
		if (!parse_dec(&p, &counts[e]))
			goto bad;
	}
	if (*p)
		goto bad;
	return 0;
bad:
	return tally_seterr(-EINVAL, "'%s' line %zu: expected 'OFFSET COUNT' with %d count%s, got '%.40s' (%s)", what,
			    lineno, nevents, nevents == 1 ? "" : "s", line, DAMAGED);
}

/* Splits a file's text into lines in place; *next is set past the line. */
static char *next_line(char **cur)
{
	char *s = *cur;
	if (!s || !*s)
		return NULL;
	char *nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		*cur = nl + 1;
	} else {
		*cur = s + strlen(s);
	}
	return s;
}

/* Each file's parser, after its loader read the text into sb (path names it). */
typedef int parse_fn(struct tally_db *db, struct strbuf *sb, struct strbuf *path);
static parse_fn parse_session, parse_images, parse_prof, parse_stacks, parse_ksyms, parse_tasks, parse_mntns,
	parse_modules;
static int check_text(const struct strbuf *sb, const struct strbuf *path);

static int read_text(struct strbuf *sb, const char *dir, const char *name, struct strbuf *path, bool optional)
{
	strbuf_reset(path);
	strbuf_addf(path, "%s/%s", dir, name);
	strbuf_reset(sb);
	int r = strbuf_read_file(sb, path->buf, 0);
	if (r == -ENOENT && optional)
		return 1;
	if (r)
		return r;
	return check_text(sb, path);
}

/* A file's bytes as the parsers take them: whole lines of text, no NUL. */
static int check_text(const struct strbuf *sb, const struct strbuf *path)
{
	if (sb->len && sb->buf[sb->len - 1] != '\n') {
		size_t lines = 1;
		for (size_t i = 0; i < sb->len; i++)
			lines += sb->buf[i] == '\n';
		return tally_seterr(-EINVAL, "'%s' line %zu: the file ends in the middle of the line (%s)", path->buf, lines,
				    DAMAGED);
	}
	if (memchr(sb->buf, '\0', sb->len))
		return tally_seterr(-EINVAL, "'%s' contains binary data (%s)", path->buf, DAMAGED);
	return 0;
}

static char **split_list(const char *s, int *n)
{
	char **out = NULL;
	size_t cap = 0;
	*n = 0;
	const char *p = s;
	while (*p) {
		size_t len = strcspn(p, ",");
		GROW(out, cap, (size_t)*n + 1);
		out[(*n)++] = xstrndup(p, len);
		p += len;
		if (*p == ',')
			p++;
	}
	return out;
}

static int parse_counts_list(const char *s, int n, uint64_t *out)
{
	const char *p = s;
	for (int i = 0; i < n; i++) {
		if (i) {
			if (*p != ',')
				return -1;
			p++;
		}
		if (!parse_dec(&p, &out[i]))
			return -1;
	}
	return *p ? -1 : 0;
}

static int load_session(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	struct stat dst;
	if (stat(db->path, &dst) == 0 && !S_ISDIR(dst.st_mode))
		return tally_seterr(-ENOTDIR, "'%s' is not a tally database: it is a file, not a directory", db->path);
	int r = read_text(sb, db->path, "session", path, true);
	if (r == 1) {
		struct stat st;
		if (stat(db->path, &st) < 0)
			return tally_seterr(-ENOENT, "no database at '%s' (record one with 'tally record -o %s -- COMMAND')",
					    db->path, db->path);
		if (!S_ISDIR(st.st_mode))
			return tally_seterr(-ENOTDIR, "'%s' is not a tally database: it is a file, not a directory", db->path);
		return tally_seterr(-EINVAL, "'%s' is not a tally database: it has no 'session' file (record one with 'tally record -o %s')",
				    db->path, db->path);
	}
	return r ? r : parse_session(db, sb, path);
}

static int parse_session(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r;
	char *cur = sb->buf;
	char *line;
	size_t ln = 0;
	while ((line = next_line(&cur))) {
		ln++;
		if (!*line || line[0] == '#')
			continue;
		char *k, *v;
		if ((r = tally_parse_header_line(line, path->buf, ln, &k, &v)))
			return r;
		GROW(db->session.kv, db->session.alloc, db->session.n + 1);
		db->session.kv[db->session.n++] = (struct tally_kv){ k, v };
	}
	const char *fv = tally_meta_get(&db->session, "format-version");
	if (!fv)
		return tally_seterr(-EINVAL, "'%s' has no format-version (%s)", path->buf, DAMAGED);
	if (strcmp(fv, "1"))
		return tally_seterr(-EINVAL, "'%s' has format-version %s, and this tally reads version %d (use a newer tally)",
				    path->buf, fv, TALLY_FORMAT_VERSION);
	const char *ev = tally_meta_get(&db->session, "events");
	if (!ev || !*ev)
		return tally_seterr(-EINVAL, "'%s' names no events (%s)", path->buf, DAMAGED);
	db->events = split_list(ev, &db->nevents);
	db->samples = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	const char *s = tally_meta_get(&db->session, "samples");
	if (!s || parse_counts_list(s, db->nevents, db->samples))
		return tally_seterr(-EINVAL, "'%s': 'samples' must hold one count per event (%s)", path->buf, DAMAGED);
	const char *l = tally_meta_get(&db->session, "lost");
	const char *t = tally_meta_get(&db->session, "throttled");
	if ((l && parse_counts_list(l, 1, &db->lost)) || (t && parse_counts_list(t, 1, &db->throttled)))
		return tally_seterr(-EINVAL, "'%s': 'lost' and 'throttled' must be counts (%s)", path->buf, DAMAGED);
	const char *pp = tally_meta_get(&db->session, "per-pid");
	db->per_pid = pp && !strcmp(pp, "yes");
	const char *cg = tally_meta_get(&db->session, "call-graph");
	db->has_stacks = cg && strcmp(cg, "none");
	return 0;
}

/* A process id field: 0 (no process) to INT_MAX, the whole string. */
static bool parse_pid(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < 0 || v > 0x7fffffff)
		return false;
	*out = (int)v;
	return true;
}

static int load_images(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = read_text(sb, db->path, "images", path, false);
	return r ? r : parse_images(db, sb, path);
}

static int parse_images(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	size_t cap = 0;
	char *cur = sb->buf, *line;
	size_t ln = 0;
	while ((line = next_line(&cur))) {
		ln++;
		if (!*line || line[0] == '#')
			continue;
		char *f[7];
		int nf = 0;
		/* the path (last field) may itself contain tabs: split six times only */
		char *p = line;
		while (nf < 6) {
			char *tab = strchr(p, '\t');
			if (!tab)
				break;
			*tab = '\0';
			f[nf++] = p;
			p = tab + 1;
		}
		f[nf++] = p;
		char *end;
		unsigned long idx = nf == 7 ? strtoul(f[0], &end, 10) : 0;
		int pid = 0;
		if (nf != 7 || *end || idx != db->nimages || !parse_pid(f[4], &pid))
			return tally_seterr(-EINVAL, "'%s' line %zu: expected 'index kind id id-kind pid name path' in order (%s)",
					    path->buf, ln, DAMAGED);
		GROW(db->images, cap, db->nimages + 1);
		struct tally_db_image *im = &db->images[db->nimages++];
		memset(im, 0, sizeof(*im));
		im->kind = xstrdup(f[1]);
		im->id = xstrdup(f[2]);
		im->id_kind = xstrdup(f[3]);
		im->pid = pid;
		tally_unescape(f[5]);
		tally_unescape(f[6]);
		im->name = xstrdup(f[5]);
		im->path = xstrdup(f[6]);
	}
	return 0;
}

static int load_prof(struct tally_db *db, const char *name, struct strbuf *sb, struct strbuf *path)
{
	int r = read_text(sb, db->path, name, path, false);
	return r ? r : parse_prof(db, sb, path);
}

static int parse_prof(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r;
	char *cur = sb->buf, *line;
	size_t ln = 0;
	struct tally_meta h = { 0 };
	while ((line = next_line(&cur))) {
		ln++;
		if (!*line)
			break;
		char *k, *v;
		if ((r = tally_parse_header_line(line, path->buf, ln, &k, &v)))
			goto out;
		GROW(h.kv, h.alloc, h.n + 1);
		h.kv[h.n++] = (struct tally_kv){ k, v };
	}
	const char *fv = tally_meta_get(&h, "format-version");
	const char *ix = tally_meta_get(&h, "index");
	const char *pidv = tally_meta_get(&h, "pid");
	const char *smp = tally_meta_get(&h, "samples");
	if (!fv || strcmp(fv, "1")) {
		r = tally_seterr(-EINVAL, "'%s' has format-version %s, and this tally reads version %d (use a newer tally)",
				 path->buf, fv ? fv : "(none)", TALLY_FORMAT_VERSION);
		goto out;
	}
	char *end = NULL;
	unsigned long idx = ix ? strtoul(ix, &end, 10) : 0;
	if (!ix || *end || idx >= db->nimages) {
		r = tally_seterr(-EINVAL, "'%s': header 'index' is missing or names no image in 'images' (%s)", path->buf, DAMAGED);
		goto out;
	}
	int pid = 0;
	if (pidv && !parse_pid(pidv, &pid)) {
		r = tally_seterr(-EINVAL, "'%s': header 'pid' is not a process id: '%s' (%s)", path->buf, pidv, DAMAGED);
		goto out;
	}
	uint64_t *want = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	uint64_t *got = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	uint64_t *c = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	if (!smp || parse_counts_list(smp, db->nevents, want)) {
		r = tally_seterr(-EINVAL, "'%s': header 'samples' must hold one count per event (%s)", path->buf, DAMAGED);
		goto out2;
	}
	GROW(db->profs, db->aprofs, db->nprofs + 1);
	db->profs[db->nprofs] = (struct tally_db_prof){ (uint32_t)idx, pid, db->nentries, db->nentries };
	while ((line = next_line(&cur))) {
		ln++;
		uint64_t off;
		if ((r = tally_parse_prof_line(line, path->buf, ln, db->nevents, &off, c)))
			goto out2;
		GROW(db->entries, db->aentries, db->nentries + 1);
		db->entries[db->nentries] = (struct tally_db_entry){ (uint32_t)idx, pid, off };
		GROW(db->counts, db->acounts, (db->nentries + 1) * (size_t)db->nevents);
		for (int e = 0; e < db->nevents; e++) {
			db->counts[db->nentries * (size_t)db->nevents + (size_t)e] = c[e];
			got[e] += c[e];
		}
		db->nentries++;
	}
	db->profs[db->nprofs].end = db->nentries;
	for (size_t k = 0; k < db->nprofs && !r; k++)
		if (db->profs[k].image == (uint32_t)idx && db->profs[k].pid == pid)
			r = tally_seterr(-EINVAL, "'%s' profiles image %lu%s again: another .prof file already does (%s)",
					 path->buf, idx, pid ? " for the same pid" : "", DAMAGED);
	if (r)
		goto out2;
	db->nprofs++;
	for (int e = 0; e < db->nevents; e++)
		if (got[e] != want[e]) {
			r = tally_seterr(-EINVAL, "'%s': its lines add up to %" PRIu64 " samples but its header says %" PRIu64
						  " (the file is truncated or damaged: record again)",
					 path->buf, got[e], want[e]);
			break;
		}
out2:
	free(want);
	free(got);
	free(c);
out:
	tally_meta_release(&h);
	return r;
}

static int load_stacks(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = read_text(sb, db->path, "stacks", path, true);
	if (r == 1)
		return db->has_stacks ? tally_seterr(-ENOENT, "'%s/stacks' is missing though the session recorded call graphs (%s)",
						     db->path, DAMAGED)
				      : 0;
	return r ? r : parse_stacks(db, sb, path);
}

static int parse_stacks(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	char *cur = sb->buf, *line;
	size_t ln = 0;
	uint64_t *c = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	while ((line = next_line(&cur))) {
		ln++;
		if (!*line || line[0] == '#')
			continue;
		char *sp = strchr(line, ' ');
		if (!sp)
			goto bad;
		*sp = '\0';
		if (parse_counts_list(line, db->nevents, c))
			goto bad;
		const char *p = sp + 1;
		uint64_t pid;
		if (!parse_dec(&p, &pid))
			goto bad;
		struct tally_db_stack st = { (uint32_t)db->nframes, 0, (int32_t)pid };
		while (*p == ' ') {
			p++;
			uint64_t img, off;
			if (!parse_dec(&p, &img) || *p++ != ':' || !parse_hex(&p, &off) || img >= db->nimages)
				goto bad;
			GROW(db->frames, db->aframes, db->nframes + 1);
			db->frames[db->nframes++] = (struct tally_frame){ (uint32_t)img, off };
			st.len++;
		}
		if (*p || !st.len)
			goto bad;
		GROW(db->stacks, db->astacks, db->nstacks + 1);
		db->stacks[db->nstacks] = st;
		GROW(db->stack_counts, db->astack_counts, (db->nstacks + 1) * (size_t)db->nevents);
		memcpy(&db->stack_counts[db->nstacks * (size_t)db->nevents], c, (size_t)db->nevents * sizeof(uint64_t));
		db->nstacks++;
	}
	free(c);
	/* every sample has a stack: the counts must add up to the session's */
	for (int e = 0; e < db->nevents; e++) {
		uint64_t sum = 0;
		for (size_t i = 0; i < db->nstacks; i++)
			sum += db->stack_counts[i * (size_t)db->nevents + (size_t)e];
		if (sum != db->samples[e])
			return tally_seterr(-EINVAL, "'%s': its stacks hold %" PRIu64 " '%s' samples but the session counted %" PRIu64
						     " (the file is truncated or damaged: record again)",
					    path->buf, sum, db->events[e], db->samples[e]);
	}
	return 0;
bad:
	free(c);
	return tally_seterr(-EINVAL, "'%s' line %zu: expected 'COUNT PID IMAGE:OFFSET...' (%s)", path->buf, ln, DAMAGED);
}

static int load_ksyms(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = read_text(sb, db->path, "kernel.syms", path, true);
	if (r == 1)
		return 0;
	return r ? r : parse_ksyms(db, sb, path);
}

static int parse_ksyms(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	size_t cap = 0;
	char *cur = sb->buf, *line;
	size_t ln = 0;
	while ((line = next_line(&cur))) {
		ln++;
		if (!*line || line[0] == '#')
			continue;
		const char *p = line;
		uint64_t addr, size;
		if (!parse_hex(&p, &addr) || *p++ != ' ' || !parse_hex(&p, &size) || *p++ != ' ' || !*p || p[1] != ' ' ||
		    !p[2])
			return tally_seterr(-EINVAL, "'%s' line %zu: expected 'ADDRESS SIZE TYPE NAME [MODULE]' (%s)", path->buf,
					    ln, DAMAGED);
		char type = *p;
		const char *name = p + 2;
		const char *mod = strstr(name, " [");
		GROW(db->ksyms, cap, db->nksyms + 1);
		struct tally_ksym *k = &db->ksyms[db->nksyms++];
		k->addr = addr;
		k->size = size;
		k->type = type;
		k->name = mod ? xstrndup(name, (size_t)(mod - name)) : xstrdup(name);
		k->module = mod ? xstrndup(mod + 2, strcspn(mod + 2, "]")) : NULL;
	}
	for (size_t i = 1; i < db->nksyms; i++)
		if (db->ksyms[i].addr < db->ksyms[i - 1].addr)
			return tally_seterr(-EINVAL, "'%s': symbols are not sorted by address (%s)", path->buf, DAMAGED);
	return 0;
}

static int load_tasks(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = read_text(sb, db->path, "tasks", path, true);
	if (r == 1)
		return 0;
	return r ? r : parse_tasks(db, sb, path);
}

static int parse_tasks(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	size_t cap = 0, ln = 0;
	char *cur = sb->buf, *line;
	while ((line = next_line(&cur))) {
		ln++;
		if (!*line || line[0] == '#')
			continue;
		char *t1 = strchr(line, '\t');
		char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		char *end;
		long pid = strtol(line, &end, 10);
		/* a damaged task list would name processes wrongly (--comm, per-pid reports) */
		if (!t2 || end != t1 || end == line || pid <= 0 || pid > 0x7fffffff || strchr(t2 + 1, '\t'))
			return tally_seterr(-EINVAL, "'%s' line %zu: expected 'PID<tab>COMM<tab>EXE' (%s)", path->buf, ln,
					    DAMAGED);
		*t1 = *t2 = '\0';
		tally_unescape(t1 + 1);
		tally_unescape(t2 + 1);
		GROW(db->tasks, cap, db->ntasks + 1);
		db->tasks[db->ntasks++] = (struct tally_db_task){ (int)pid, xstrdup(t1 + 1), xstrdup(t2 + 1) };
	}
	return 0;
}

/* Optional: the images mapped inside another mount namespace. */
static int load_mntns(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = read_text(sb, db->path, "mntns", path, true);
	if (r == 1)
		return 0;
	return r ? r : parse_mntns(db, sb, path);
}

static int parse_mntns(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	char *cur = sb->buf, *line;
	size_t ln = 0;
	while ((line = next_line(&cur))) {
		ln++;
		if (!*line || line[0] == '#')
			continue;
		char *end;
		unsigned long i = strtoul(line, &end, 10);
		if (*end || end == line || i >= db->nimages)
			return tally_seterr(-EINVAL, "'%s' line %zu: expected an image index below %zu (%s)", path->buf, ln,
					    db->nimages, DAMAGED);
		db->images[i].foreign_ns = true;
	}
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The 'modules' file's lines, 'name size address [build-id]' (the build-id since
 * tally 0.1: '-' when unknown), into db->mods. */
int tally_db_parse_modules(struct tally_db *db, const char *text, const char *what)
{
	size_t ln = 0, cap = 0;
	struct strbuf copy = STRBUF_INIT;
	strbuf_addstr(&copy, text);
	char *cur = copy.buf, *line;
	while ((line = next_line(&cur))) {
		ln++;
		if (!*line || line[0] == '#')
			continue;
		char name[128], addr[32], id[160], extra[2];
		unsigned long long size;
		char *end;
		int n = sscanf(line, "%127s %llu %31s %159s %1s", name, &size, addr, id, extra);
		bool ok = n == 3 || n == 4;
		errno = 0;
		uint64_t a = ok ? strtoull(addr, &end, 16) : 0;
		ok = ok && !errno && *end == '\0' && end != addr;
		for (const char *c = n == 4 && strcmp(id, "-") ? id : ""; ok && *c; c++)
			ok = strchr("0123456789abcdef", *c) != NULL;
		if (!ok) {
			strbuf_release(&copy);
			return tally_seterr(-EINVAL, "'%s' line %zu: expected 'NAME SIZE ADDRESS [BUILD-ID]' (%s)", what,
					    ln, DAMAGED);
		}
		GROW(db->mods, cap, db->nmods + 1);
		db->mods[db->nmods++] = (struct tally_db_module){ xstrdup(name), size, a,
								  n == 4 && strcmp(id, "-") ? xstrdup(id) : NULL };
	}
	strbuf_release(&copy);
	return 0;
}

static int load_modules(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = read_text(sb, db->path, "modules", path, true);
	if (r == 1)
		return 0;
	return r ? r : parse_modules(db, sb, path);
}

static int parse_modules(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r;
	if ((r = tally_db_parse_modules(db, sb->buf, path->buf)))
		return r;
	db->modules = strbuf_detach(sb);
	return 0;
}

int tally_db_parse_file(struct tally_db *db, const char *name, const void *buf, size_t len)
{
	static const struct {
		const char *name;
		parse_fn *parse;
	} files[] = {
		{ "session", parse_session },	{ "images", parse_images }, { "stacks", parse_stacks },
		{ "kernel.syms", parse_ksyms }, { "tasks", parse_tasks },   { "modules", parse_modules },
		{ "mntns", parse_mntns },
	};
	parse_fn *parse = NULL;
	size_t l = strlen(name);
	if (l > 5 && !strcmp(name + l - 5, ".prof"))
		parse = parse_prof;
	for (size_t i = 0; i < ARRAY_SIZE(files) && !parse; i++)
		if (!strcmp(name, files[i].name))
			parse = files[i].parse;
	if (!parse)
		return tally_seterr(-EINVAL, "'%s' is not a file of a tally database", name);
	struct strbuf sb = STRBUF_INIT, path = STRBUF_INIT;
	strbuf_add(&sb, buf, len);
	if (db->path)
		strbuf_addf(&path, "%s/", db->path);
	strbuf_addstr(&path, name);
	int r = check_text(&sb, &path);
	if (!r)
		r = parse(db, &sb, &path);
	strbuf_release(&sb);
	strbuf_release(&path);
	return r;
}

int tally_db_open_dir(struct tally_db *db, const char *path)
{
	memset(db, 0, sizeof(*db));
	db->path = xstrdup(path);
	struct strbuf sb = STRBUF_INIT, p = STRBUF_INIT;
	char **names = NULL;
	size_t nnames = 0, anames = 0;
	int r = load_session(db, &sb, &p);
	if (!r)
		r = load_images(db, &sb, &p);
	if (!r) {
		DIR *d = opendir(path);
		if (!d) {
			r = tally_seterr(-errno, "cannot read database '%s': %s", path, strerror(errno));
		} else {
			struct dirent *de;
			while ((de = readdir(d))) {
				size_t l = strlen(de->d_name);
				if (l > 5 && !strcmp(de->d_name + l - 5, ".prof") && de->d_name[0] != '.') {
					GROW(names, anames, nnames + 1);
					names[nnames++] = xstrdup(de->d_name);
				}
			}
			closedir(d);
			tally_qsort(names, nnames, sizeof(*names), cmp_name);
		}
	}
	for (size_t i = 0; !r && i < nnames; i++)
		r = load_prof(db, names[i], &sb, &p);
	if (!r)
		r = load_stacks(db, &sb, &p);
	if (!r)
		r = load_ksyms(db, &sb, &p);
	if (!r)
		r = load_tasks(db, &sb, &p);
	if (!r)
		r = load_modules(db, &sb, &p);
	if (!r)
		r = load_mntns(db, &sb, &p);
	if (!r) {
		/* the .prof files must account for every sample the session counted */
		for (int e = 0; e < db->nevents && !r; e++) {
			uint64_t sum = 0;
			for (size_t i = 0; i < db->nentries; i++)
				sum += db->counts[i * (size_t)db->nevents + (size_t)e];
			if (sum != db->samples[e])
				r = tally_seterr(-EINVAL, "'%s': the .prof files hold %" PRIu64 " '%s' samples but the session counted %" PRIu64
							  " (a profile file is missing or damaged: record again)",
						 path, sum, db->events[e], db->samples[e]);
		}
	}
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	strbuf_release(&sb);
	strbuf_release(&p);
	if (r) {
		char keep[1024];
		snprintf(keep, sizeof(keep), "%s", tally_errmsg());
		tally_db_release(db);
		tally_seterr(r, "%s", keep);
	}
	return r;
}

void tally_db_release(struct tally_db *db)
{
	free(db->path);
	tally_meta_release(&db->session);
	for (int i = 0; i < db->nevents; i++)
		free(db->events[i]);
	free(db->events);
	free(db->samples);
	for (size_t i = 0; i < db->nimages; i++) {
		free(db->images[i].name);
		free(db->images[i].path);
		free(db->images[i].id);
		free(db->images[i].id_kind);
		free(db->images[i].kind);
		free(db->images[i].aux);
		free(db->images[i].jd_text);
		free(db->images[i].dir);
	}
	free(db->images);
	free(db->entries);
	free(db->counts);
	free(db->profs);
	free(db->frames);
	free(db->stacks);
	free(db->stack_counts);
	tally_ksyms_free(db->ksyms, db->nksyms);
	for (size_t i = 0; i < db->ntasks; i++) {
		free(db->tasks[i].comm);
		free(db->tasks[i].exe);
	}
	free(db->tasks);
	free(db->modules);
	for (size_t i = 0; i < db->nmods; i++) {
		free(db->mods[i].name);
		free(db->mods[i].build_id);
	}
	free(db->mods);
	if (db->tmpdir)
		tally_remove_tree(db->tmpdir);
	free(db->tmpdir);
	memset(db, 0, sizeof(*db));
}

const char *tally_db_image_dir(const struct tally_db *db, uint32_t image)
{
	if (image < db->nimages && db->images[image].dir)
		return db->images[image].dir;
	return db->tmpdir ? db->tmpdir : db->path;
}

int tally_db_event(const struct tally_db *db, const char *name)
{
	for (int i = 0; i < db->nevents; i++)
		if (!strcmp(db->events[i], name))
			return i;
	return -1;
}

const char *tally_db_comm(const struct tally_db *db, int pid)
{
	for (size_t i = db->ntasks; i-- > 0;)
		if (db->tasks[i].pid == pid)
			return db->tasks[i].comm;
	return NULL;
}
