/* Reading a profile database: every file is validated line by line, and any
 * damage is reported with the file, the line and what to do. */
#define _GNU_SOURCE
#include "stacks.h"
#include "tally/db.h"
#include "tally/util.h"
#include "db-private.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int tally_parse_header_line(const char *line, const char *what, size_t lineno, char **key,
			    char **value)
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
bad:;
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(-EINVAL, "'%s' line %zu: expected 'key: value', got '%s' (%s)", what,
			    lineno, tally_excerpt(q, line), DAMAGED);
}

static bool parse_hex(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;
	while (isxdigit((unsigned char)*s)) {
		if (n == 16)
			return false;
		/* no tolower() call per digit: the stacks file is mostly hex digits */
		int d = *s <= '9' ? *s - '0' : (*s | 0x20) - 'a' + 10;
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

bool tally_db_parse_dec(const char **p, uint64_t *out)
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

int tally_parse_prof_line(const char *line, const char *what, size_t lineno, int nevents,
			  uint64_t *offset, uint64_t *counts)
{
	return tally_parse_prof_line_w(line, what, lineno, nevents, offset, counts, NULL);
}

int tally_parse_prof_line_w(const char *line, const char *what, size_t lineno, int nevents,
			    uint64_t *offset, uint64_t *counts, uint64_t *weights)
{
	const char *p = line;
	char q[TALLY_EXCERPT_SIZE];
	if (!parse_hex(&p, offset))
		goto bad;
	for (int e = 0; e < nevents; e++) {
		if (*p != ' ')
			goto bad;
		p++;
		if (!tally_db_parse_dec(&p, &counts[e]))
			goto bad;
		if (weights) {
			if (*p != ' ')
				goto bad;
			p++;
			if (!tally_db_parse_dec(&p, &weights[e]))
				goto bad;
		}
	}
	if (*p)
		goto bad;
	for (int e = 0; weights && e < nevents; e++)
		if (!counts[e] && weights[e])
			return tally_seterr(-EINVAL,
					    "'%s' line %zu: a weight of %" PRIu64
					    " for no sample, in '%s' (%s)",
					    what, lineno, weights[e], tally_excerpt(q, line),
					    DAMAGED);
	return 0;
bad:
	if (weights)
		return tally_seterr(
			-EINVAL,
			"'%s' line %zu: expected 'OFFSET COUNT WEIGHT' with %d count%s and weight%s, got '%s' (%s)",
			what, lineno, nevents, nevents == 1 ? "" : "s", nevents == 1 ? "" : "s",
			tally_excerpt(q, line), DAMAGED);
	return tally_seterr(
		-EINVAL, "'%s' line %zu: expected 'OFFSET COUNT' with %d count%s, got '%s' (%s)",
		what, lineno, nevents, nevents == 1 ? "" : "s", tally_excerpt(q, line), DAMAGED);
}

/* A file of the database, read whole and checked to be lines. */
int tally_db_read_text(struct strbuf *sb, const char *dir, const char *name, struct strbuf *path,
		       bool optional)
{
	strbuf_reset(path);
	strbuf_addf(path, "%s/%s", dir, name);
	strbuf_reset(sb);
	/* never through a link (out of the database), never a FIFO or a device */
	int r = tally_read_regular(sb, AT_FDCWD, path->buf, 0, TALLY_DB_FILE_MAX);
	if (r == -ENOENT && optional)
		return 1;
	if (r == -ELOOP || r == -EINVAL || r == -EISDIR)
		return tally_seterr(
			r,
			"%s (a database holds only the regular files tally wrote: record it again)",
			tally_errmsg());
	if (r == -EFBIG)
		return tally_seterr(r, "%s (%s)", tally_errmsg(), DAMAGED);
	if (r)
		return r;
	if (sb->len && sb->buf[sb->len - 1] != '\n') {
		size_t lines = 1;
		for (size_t i = 0; i < sb->len; i++)
			lines += sb->buf[i] == '\n';
		return tally_seterr(-EINVAL,
				    "'%s' line %zu: the file ends in the middle of the line (%s)",
				    path->buf, lines, DAMAGED);
	}
	if (memchr(sb->buf, '\0', sb->len))
		return tally_seterr(-EINVAL, "'%s' contains binary data (%s)", path->buf, DAMAGED);
	return 0;
}

char **tally_db_split_list(const char *s, int *n)
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

int tally_db_parse_counts(const char *s, int n, uint64_t *out)
{
	const char *p = s;
	for (int i = 0; i < n; i++) {
		if (i) {
			if (*p != ',')
				return -1;
			p++;
		}
		if (!tally_db_parse_dec(&p, &out[i]))
			return -1;
	}
	return *p ? -1 : 0;
}

/* ---- the text of one file ---- */

/* A file's text must be lines: no NUL byte (binary data), a newline at the end. */
static int check_text(const char *buf, size_t len, const char *what)
{
	const char *nul = memchr(buf, '\0', len);
	const char *upto = nul ? nul : buf + len;
	size_t lines = 1;
	for (const char *c = buf; (c = memchr(c, '\n', (size_t)(upto - c))); c++)
		lines++;
	if (nul)
		return tally_seterr(-EINVAL,
				    "'%s' line %zu: binary data (a NUL byte) in a text file (%s)",
				    what, lines, DAMAGED);
	if (len && buf[len - 1] != '\n')
		return tally_seterr(-EINVAL,
				    "'%s' line %zu: the file ends in the middle of the line (%s)",
				    what, lines, DAMAGED);
	return 0;
}

/* fn over text that is checked first; text (NUL-terminated) is split in place. */
int tally_db_parse_text(struct tally_db *db, char *text, size_t len, const char *what,
			tally_db_parse_fn fn)
{
	int r = check_text(text, len, what);
	return r ? r : fn(db, text, what);
}

/* fn over a copy of buf: the public entry points take any bytes, read-only. */
int tally_db_parse_copy(struct tally_db *db, const char *buf, size_t len, const char *what,
			tally_db_parse_fn fn)
{
	int r = check_text(buf, len, what);
	if (r)
		return r;
	char *copy = xmalloc(len + 1);
	memcpy(copy, buf, len);
	copy[len] = '\0';
	r = fn(db, copy, what);
	free(copy);
	return r;
}

/* An optional file of the database, read into sb and parsed by fn: 0 when it
 * is not there. */
static int load_optional(struct tally_db *db, const char *name, tally_db_parse_fn fn,
			 struct strbuf *sb, struct strbuf *path)
{
	int r = tally_db_read_text(sb, db->path, name, path, true);
	if (r == 1)
		return 0;
	return r ? r : tally_db_parse_text(db, sb->buf, sb->len, path->buf, fn);
}

/* A merge's sources (optional: a recording, or a merge by an older tally,
 * has none). */
static int load_sources(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = tally_db_read_text(sb, db->path, "sources", path, true);
	if (r == 1)
		return 0;
	return r ? r : tally_db_parse_sources(db, sb->buf ? sb->buf : "", sb->len, path->buf);
}

/* ---- values ---- */

/* A whole decimal number that fits in 64 bits. */
bool tally_db_whole_u64(const char *s, uint64_t *out)
{
	const char *p = s;
	return tally_db_parse_dec(&p, out) && !*p;
}

/* A process id: 0 (no process) to INT_MAX, the whole string. */
bool tally_db_parse_pid(const char *s, int *out)
{
	uint64_t v;
	if (!tally_db_whole_u64(s, &v) || v > INT32_MAX)
		return false;
	*out = (int)v;
	return true;
}

/* ---- images ---- */

static bool lower_hex(const char *s, size_t min, size_t max)
{
	size_t n = strlen(s);
	if (n < min || n > max)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			return false;
	return true;
}

/* What is wrong with an image line's fields (NULL: nothing), as the writer
 * makes them (docs/format.md): the id goes into file names, the kind decides
 * how the image is read. */
static const char *image_problem(const struct tally_db_image *im)
{
	static const char *const kinds[] = { "exec", "lib", "kernel", "nomap", "jit", "vdso" };
	bool kind_ok = false;
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		kind_ok = kind_ok || !strcmp(im->kind, kinds[i]);
	if (!kind_ok)
		return "its kind is none of exec, lib, kernel, nomap, jit, vdso";
	const char *ik = im->id_kind;
	if (!strcmp(ik, "build-id")) {
		if (!lower_hex(im->id, 2, 128) || strlen(im->id) % 2)
			return "its build-id is not lowercase hex digits (2 to 128, an even number)";
	} else if (!strcmp(ik, "xxh64")) {
		if (!lower_hex(im->id, 16, 16))
			return "its xxh64 id is not 16 lowercase hex digits";
	} else if (!strcmp(ik, "none") || !strcmp(ik, "replaced") || !strcmp(ik, "unreachable")) {
		if (strcmp(im->id, "00000000"))
			return "an image without an id has the id 00000000";
	} else {
		return "its id kind is none of build-id, xxh64, none, replaced, unreachable";
	}
	if (!*im->name || strchr(im->name, '/') || !printable(im->name))
		return "its name is empty or holds a '/' or a control character";
	if (strlen(im->name) > NAME_MAX)
		return "its name is longer than a file name can be (255 bytes)";
	bool file = !strcmp(im->kind, "exec") || !strcmp(im->kind, "lib");
	bool per_process = !strcmp(im->kind, "jit") || !strcmp(im->kind, "nomap");
	if (!per_process && im->pid)
		return "only jit and nomap images belong to a process (pid 0 otherwise)";
	if (!strcmp(im->kind, "jit") &&
	    (!im->pid || strcmp(im->name, "jit") || strcmp(ik, "xxh64")))
		return "a jit image is named 'jit', has an xxh64 id and its process's pid";
	if (!strcmp(im->kind, "kernel") &&
	    (strcmp(im->name, "kernel") || strcmp(im->path, "[kernel]") ||
	     (strcmp(ik, "build-id") && strcmp(ik, "none"))))
		return "the kernel image is named 'kernel', with path '[kernel]' and a build-id or none";
	if (!strcmp(im->kind, "nomap") &&
	    (strcmp(im->name, "nomap") || *im->path || strcmp(ik, "none")))
		return "a nomap image is named 'nomap', with no path and no id";
	if (!strcmp(im->kind, "vdso") &&
	    (strcmp(im->name, "[vdso]") || strcmp(im->path, "[vdso]") ||
	     (strcmp(ik, "xxh64") && strcmp(ik, "none"))))
		return "the vdso image is named '[vdso]', with path '[vdso]' and an xxh64 id or none";
	if (file && (!strcmp(im->name, "kernel") && !strcmp(im->path, "[kernel]")))
		return "the kernel is an image of kind 'kernel'";
	return NULL;
}

static int parse_images(struct tally_db *db, char *text, const char *what)
{
	size_t cap = 0;
	char *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	while ((line = tally_lines_next_data(&L))) {
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
		uint64_t idx = 0;
		int pid = 0;
		if (nf != 7 || !tally_db_whole_u64(f[0], &idx) || idx != db->nimages ||
		    !tally_db_parse_pid(f[4], &pid))
			return tally_lines_err(
				&L, -EINVAL,
				"expected 'index kind id id-kind pid name path' in order (%s)",
				DAMAGED);
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
		const char *why = image_problem(im);
		if (why)
			return tally_lines_err(&L, -EINVAL, "image %zu: %s (%s)", db->nimages - 1,
					       why, DAMAGED);
	}
	return 0;
}

static const struct tally_db_image *apart_images;

static int cmp_apart(const void *x, const void *y)
{
	const struct tally_db_image *a = &apart_images[*(const uint32_t *)x],
				    *b = &apart_images[*(const uint32_t *)y];
	int c = strcmp(a->name, b->name);
	return c ? c : *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

void tally_db_names_apart(struct tally_db *db)
{
	uint32_t *ix = xmalloc((db->nimages + 1) * sizeof(*ix)), n = 0;
	for (uint32_t i = 0; i < db->nimages; i++)
		if (!strcmp(db->images[i].kind, "exec") || !strcmp(db->images[i].kind, "lib"))
			ix[n++] = i;
	apart_images = db->images;
	qsort(ix, n, sizeof(*ix), cmp_apart);
	for (uint32_t a = 0, b; a < n; a = b) {
		for (b = a + 1; b < n && !strcmp(db->images[ix[a]].name, db->images[ix[b]].name);
		     b++)
			;
		if (b - a < 2)
			continue;
		/* a run of one name: each says where it is, or which it is */
		for (uint32_t k = a; k < b; k++) {
			struct tally_db_image *im = &db->images[ix[k]];
			bool same_path = false;
			for (uint32_t m = a; m < b && !same_path; m++)
				same_path = m != k && !strcmp(db->images[ix[m]].path, im->path);
			struct strbuf sb = STRBUF_INIT;
			if (same_path) {
				strbuf_addf(&sb, "%s (%.12s)", im->name, im->id);
			} else {
				char *dir = tally_dirname(im->path);
				strbuf_addf(&sb, "%s (%s)", im->name, dir);
				free(dir);
			}
			free(im->name);
			im->name = strbuf_detach(&sb);
		}
	}
	apart_images = NULL;
	free(ix);
}

int tally_db_parse_images(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	return tally_db_parse_copy(db, buf, len, what, parse_images);
}

/* A version 2 database's label sets (the file is optional: none, then). */
static int load_labels(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	if (!tally_db_labelled(db))
		return 0;
	int r = tally_db_read_text(sb, db->path, "labels", path, true);
	if (r == 1)
		return 0;
	if (r)
		return r;
	return tally_db_parse_labels(db, sb->buf ? sb->buf : "", sb->len, path->buf);
}

static int load_images(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = tally_db_read_text(sb, db->path, "images", path, false);
	if (r)
		return r;
	return tally_db_parse_text(db, sb->buf, sb->len, path->buf, parse_images);
}

/* ---- profiles ---- */

/* sum[e] += c[e] for every event, or false (sum unchanged) when one would pass 2^64. */
static bool add_counts(uint64_t *sum, const uint64_t *c, int n)
{
	for (int e = 0; e < n; e++)
		if (c[e] > UINT64_MAX - sum[e])
			return false;
	for (int e = 0; e < n; e++)
		sum[e] += c[e];
	return true;
}

/* A version 2 profile's label set ('label: N', absent for none). */
static int prof_label(const struct tally_db *db, const struct tally_meta *h, const char *what,
		      uint32_t *label)
{
	const char *lv = tally_meta_get(h, "label");
	uint64_t v = 0;
	*label = 0;
	if (!lv || !tally_db_labelled(db))
		return 0;
	if (!tally_db_whole_u64(lv, &v) || v > db->nlabels) {
		char q[TALLY_EXCERPT_SIZE];
		return tally_seterr(
			-EINVAL, "'%s': header 'label' names no label set in 'labels': '%s' (%s)",
			what, tally_excerpt(q, lv), DAMAGED);
	}
	*label = (uint32_t)v;
	return 0;
}

static int parse_prof(struct tally_db *db, char *text, const char *what)
{
	char *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	int r = 0;
	struct tally_meta h = { 0 };
	char q[TALLY_EXCERPT_SIZE];
	if (!db->nevents) {
		r = tally_seterr(-EINVAL, "'%s': a profile read before the session (%s)", what,
				 DAMAGED);
		goto out;
	}
	while ((line = tally_lines_next(&L))) {
		if (!*line)
			break;
		char *k, *v;
		if ((r = tally_parse_header_line(line, L.what, L.ln, &k, &v)))
			goto out;
		GROW(h.kv, h.alloc, h.n + 1);
		h.kv[h.n++] = (struct tally_kv){ k, v };
	}
	const char *fv = tally_meta_get(&h, "format-version");
	const char *ix = tally_meta_get(&h, "index");
	const char *pidv = tally_meta_get(&h, "pid");
	const char *smp = tally_meta_get(&h, "samples");
	const char *sfv = tally_meta_get(&db->session, "format-version");
	if (!fv || !sfv || strcmp(fv, sfv)) {
		r = tally_seterr(
			-EINVAL,
			"'%s' has format-version %s, and its session version %s (use a newer tally, or record again)",
			what, fv ? tally_excerpt(q, fv) : "(none)", sfv ? sfv : "(none)");
		goto out;
	}
	uint32_t label = 0;
	if ((r = prof_label(db, &h, what, &label)))
		goto out;
	uint64_t idx = 0;
	if (!ix || !tally_db_whole_u64(ix, &idx) || idx >= db->nimages) {
		r = tally_seterr(
			-EINVAL,
			"'%s': header 'index' is missing or names no image in 'images' (%s)", what,
			DAMAGED);
		goto out;
	}
	int pid = 0;
	if (pidv && !tally_db_parse_pid(pidv, &pid)) {
		r = tally_seterr(
			-EINVAL,
			"'%s': header 'pid' is not a process id: '%s' (one from 0 to %d; %s)", what,
			tally_excerpt(q, pidv), INT32_MAX, DAMAGED);
		goto out;
	}
	bool weighted = tally_db_weighted(db);
	uint64_t *want = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	uint64_t *got = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	uint64_t *c = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	uint64_t *wwant = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	uint64_t *wgot = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	uint64_t *w = xcalloc((size_t)db->nevents, sizeof(uint64_t));
	if (!smp || tally_db_parse_counts(smp, db->nevents, want)) {
		r = tally_seterr(-EINVAL,
				 "'%s': header 'samples' must hold one count per event (%s)", what,
				 DAMAGED);
		goto out2;
	}
	const char *wv = tally_meta_get(&h, "weights");
	if (weighted && (!wv || tally_db_parse_counts(wv, db->nevents, wwant))) {
		r = tally_seterr(
			-EINVAL,
			"'%s': header 'weights' must hold one count per event in a format 3 profile (%s)",
			what, DAMAGED);
		goto out2;
	}
	GROW(db->profs, db->aprofs, db->nprofs + 1);
	db->profs[db->nprofs] =
		(struct tally_db_prof){ (uint32_t)idx, pid, db->nentries, db->nentries, label };
	while ((line = tally_lines_next(&L))) {
		uint64_t off;
		if ((r = tally_parse_prof_line_w(line, L.what, L.ln, db->nevents, &off, c,
						 weighted ? w : NULL)))
			goto undo;
		/* counts that wrap would add up to anything: refused where the sum passes 2^64 */
		if (!add_counts(got, c, db->nevents)) {
			r = tally_lines_err(&L, -EINVAL, "the counts add up past %" PRIu64 " (%s)",
					    UINT64_MAX, DAMAGED);
			goto undo;
		}
		if (weighted && !add_counts(wgot, w, db->nevents)) {
			r = tally_lines_err(&L, -EINVAL, "the weights add up past %" PRIu64 " (%s)",
					    UINT64_MAX, DAMAGED);
			goto undo;
		}
		GROW(db->entries, db->aentries, db->nentries + 1);
		db->entries[db->nentries] = (struct tally_db_entry){ (uint32_t)idx, pid, off };
		GROW(db->counts, db->acounts, (db->nentries + 1) * (size_t)db->nevents);
		memcpy(&db->counts[db->nentries * (size_t)db->nevents], c,
		       (size_t)db->nevents * sizeof(uint64_t));
		if (weighted) {
			GROW(db->weights, db->aweights, (db->nentries + 1) * (size_t)db->nevents);
			memcpy(&db->weights[db->nentries * (size_t)db->nevents], w,
			       (size_t)db->nevents * sizeof(uint64_t));
		}
		db->nentries++;
	}
	db->profs[db->nprofs].end = db->nentries;
	for (size_t k = 0; k < db->nprofs && !r; k++)
		if (db->profs[k].image == (uint32_t)idx && db->profs[k].pid == pid &&
		    db->profs[k].label == label)
			r = tally_seterr(-EINVAL,
					 "'%s' profiles image %" PRIu64
					 "%s again: another .prof file already does (%s)",
					 what, idx, pid ? " for the same pid" : "", DAMAGED);
	if (r)
		goto undo;
	for (int e = 0; e < db->nevents; e++)
		if (got[e] != want[e]) {
			r = tally_seterr(-EINVAL,
					 "'%s': its lines add up to %" PRIu64
					 " samples but its header says %" PRIu64
					 " (the file is truncated or damaged: record again)",
					 what, got[e], want[e]);
			goto undo;
		}
	for (int e = 0; weighted && e < db->nevents; e++)
		if (wgot[e] != wwant[e]) {
			r = tally_seterr(-EINVAL,
					 "'%s': its lines weigh %" PRIu64
					 " but its header says %" PRIu64
					 " (the file is truncated or damaged: record again)",
					 what, wgot[e], wwant[e]);
			goto undo;
		}
	db->nprofs++;
	goto out2;
undo:
	/* a refused profile leaves nothing behind */
	db->nentries = db->profs[db->nprofs].first;
out2:
	free(want);
	free(got);
	free(c);
	free(wwant);
	free(wgot);
	free(w);
out:
	tally_meta_release(&h);
	return r;
}

int tally_db_parse_prof(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	return tally_db_parse_copy(db, buf, len, what, parse_prof);
}

static int load_prof(struct tally_db *db, const char *name, struct strbuf *sb, struct strbuf *path)
{
	int r = tally_db_read_text(sb, db->path, name, path, false);
	if (r)
		return r;
	return tally_db_parse_text(db, sb->buf, sb->len, path->buf, parse_prof);
}

/* ---- stacks: lib/db/stacks.c ---- */

/* ---- kernel symbols, tasks, mount namespaces ---- */

static int parse_ksyms(struct tally_db *db, char *text, const char *what)
{
	size_t cap = db->nksyms;
	char *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	while ((line = tally_lines_next_data(&L))) {
		const char *p = line;
		uint64_t addr, size;
		if (!parse_hex(&p, &addr) || *p++ != ' ' || !parse_hex(&p, &size) || *p++ != ' ' ||
		    !*p || p[1] != ' ' || !p[2])
			return tally_lines_err(&L, -EINVAL,
					       "expected 'ADDRESS SIZE TYPE NAME [MODULE]' (%s)",
					       DAMAGED);
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
			return tally_seterr(-EINVAL, "'%s': symbols are not sorted by address (%s)",
					    what, DAMAGED);
	return 0;
}

int tally_db_parse_ksyms(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	return tally_db_parse_copy(db, buf, len, what, parse_ksyms);
}

static int parse_tasks(struct tally_db *db, char *text, const char *what)
{
	size_t cap = db->ntasks;
	char *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	while ((line = tally_lines_next_data(&L))) {
		char *t1 = strchr(line, '\t');
		char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		int pid = 0;
		if (t1)
			*t1 = '\0';
		/* a damaged task list would name processes wrongly (--comm, per-pid reports) */
		if (!t2 || !tally_db_parse_pid(line, &pid) || !pid || strchr(t2 + 1, '\t'))
			return tally_lines_err(&L, -EINVAL, "expected 'PID<tab>COMM<tab>EXE' (%s)",
					       DAMAGED);
		*t2 = '\0';
		tally_unescape(t1 + 1);
		tally_unescape(t2 + 1);
		GROW(db->tasks, cap, db->ntasks + 1);
		db->tasks[db->ntasks++] =
			(struct tally_db_task){ pid, xstrdup(t1 + 1), xstrdup(t2 + 1) };
	}
	return 0;
}

int tally_db_parse_tasks(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	return tally_db_parse_copy(db, buf, len, what, parse_tasks);
}

/* Optional: the images mapped inside another mount namespace. */
static int parse_mntns(struct tally_db *db, char *text, const char *what)
{
	char *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	while ((line = tally_lines_next_data(&L))) {
		uint64_t i;
		if (!tally_db_whole_u64(line, &i) || i >= db->nimages)
			return tally_lines_err(&L, -EINVAL,
					       "expected an image index below %zu (%s)",
					       db->nimages, DAMAGED);
		db->images[i].foreign_ns = true;
	}
	return 0;
}

int tally_db_parse_mntns(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	return tally_db_parse_copy(db, buf, len, what, parse_mntns);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- modules ---- */

/* The 'modules' file's lines, 'name size address [build-id]' (the build-id since
 * tally 0.1: '-' when unknown), into db->mods. */
static int parse_modules(struct tally_db *db, char *text, const char *what)
{
	size_t cap = db->nmods;
	char *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	while ((line = tally_lines_next_data(&L))) {
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
		if (!ok)
			return tally_lines_err(&L, -EINVAL,
					       "expected 'NAME SIZE ADDRESS [BUILD-ID]' (%s)",
					       DAMAGED);
		GROW(db->mods, cap, db->nmods + 1);
		db->mods[db->nmods++] =
			(struct tally_db_module){ xstrdup(name), size, a,
						  n == 4 && strcmp(id, "-") ? xstrdup(id) : NULL };
	}
	return 0;
}

int tally_db_parse_modules(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	return tally_db_parse_copy(db, buf, len, what, parse_modules);
}

static int load_modules(struct tally_db *db, struct strbuf *sb, struct strbuf *path)
{
	int r = tally_db_read_text(sb, db->path, "modules", path, true);
	if (r == 1)
		return 0;
	if (r)
		return r;
	/* parsed on a copy: the text is kept as it was (written back with the database) */
	if ((r = tally_db_parse_modules(db, sb->buf, sb->len, path->buf)))
		return r;
	db->modules = strbuf_detach(sb);
	return 0;
}

int tally_db_check_totals(const struct tally_db *db, const char *what)
{
	/* the .prof files must account for every sample the session counted */
	for (int e = 0; e < db->nevents; e++) {
		uint64_t sum = 0;
		for (size_t i = 0; i < db->nentries; i++) {
			uint64_t c = db->counts[i * (size_t)db->nevents + (size_t)e];
			if (c > UINT64_MAX - sum)
				return tally_seterr(
					-EINVAL,
					"'%s': the .prof files hold more than %" PRIu64
					" '%s' samples together (a profile file is damaged: record again)",
					what, UINT64_MAX, db->events[e]);
			sum += c;
		}
		if (sum != db->samples[e])
			return tally_seterr(-EINVAL,
					    "'%s': the .prof files hold %" PRIu64
					    " '%s' samples but the session counted %" PRIu64
					    " (a profile file is missing or damaged: record again)",
					    what, sum, db->events[e], db->samples[e]);
	}
	const uint64_t *wts = tally_db_raw_weights(db);
	if (!db->has_weights || !wts)
		return 0;
	uint64_t *wt = xcalloc((size_t)db->nevents + 1, sizeof(uint64_t));
	int r = 0;
	if (tally_db_weight_totals(db, wt)) {
		free(wt);
		return 0; /* none to check against */
	}
	for (int e = 0; e < db->nevents && !r; e++) {
		uint64_t sum = 0;
		bool over = false;
		for (size_t i = 0; i < db->nentries && !over; i++)
			over = __builtin_add_overflow(sum, wts[i * (size_t)db->nevents + (size_t)e],
						      &sum);
		if (over)
			r = tally_seterr(
				-EINVAL,
				"'%s': the .prof files weigh more than %" PRIu64
				" of '%s' together (a profile file is damaged: record again)",
				what, UINT64_MAX, db->events[e]);
		else if (sum != wt[e])
			r = tally_seterr(-EINVAL,
					 "'%s': the .prof files weigh %" PRIu64
					 " of '%s' but the session's weight-total is %" PRIu64
					 " (a profile file is missing or damaged: record again)",
					 what, sum, db->events[e], wt[e]);
	}
	free(wt);
	return r;
}

int tally_db_open_dir(struct tally_db *db, const char *path)
{
	tally_db_recover(path, NULL);
	return tally_db_read_dir_flags(db, path, 0);
}

int tally_db_open_dir_flags(struct tally_db *db, const char *path, unsigned flags)
{
	tally_db_recover(path, NULL);
	return tally_db_read_dir_flags(db, path, flags);
}

int tally_db_read_dir(struct tally_db *db, const char *path)
{
	return tally_db_read_dir_flags(db, path, 0);
}

int tally_db_read_dir_flags(struct tally_db *db, const char *path, unsigned flags)
{
	memset(db, 0, sizeof(*db));
	db->path = xstrdup(path);
	struct strbuf sb = STRBUF_INIT, p = STRBUF_INIT;
	char **names = NULL;
	size_t nnames = 0, anames = 0;
	int r = tally_db_load_session(db, &sb, &p);
	if (!r)
		r = load_images(db, &sb, &p);
	if (!r)
		r = load_labels(db, &sb, &p);
	if (!r) {
		DIR *d = opendir(path);
		if (!d) {
			r = tally_seterr(-errno, "cannot read database '%s': %s", path,
					 strerror(errno));
		} else {
			struct dirent *de;
			while ((de = readdir(d))) {
				size_t l = strlen(de->d_name);
				if (l > 5 && !strcmp(de->d_name + l - 5, ".prof") &&
				    de->d_name[0] != '.') {
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
		r = tally_stacks_open(db, flags); /* lib/db/stacks.c */
	if (!r)
		r = load_optional(db, "kernel.syms", parse_ksyms, &sb, &p);
	if (!r)
		r = load_optional(db, "tasks", parse_tasks, &sb, &p);
	if (!r)
		r = load_modules(db, &sb, &p);
	if (!r)
		r = load_optional(db, "mntns", parse_mntns, &sb, &p);
	if (!r)
		r = load_sources(db, &sb, &p);
	if (!r)
		r = tally_db_check_totals(db, path);
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

void tally_db_image_release(struct tally_db_image *d)
{
	free(d->name);
	free(d->path);
	free(d->id);
	free(d->id_kind);
	free(d->kind);
	free(d->aux);
	free(d->jd_text);
	free(d->dir);
	memset(d, 0, sizeof(*d));
}

void tally_db_release(struct tally_db *db)
{
	free(db->path);
	tally_meta_release(&db->session);
	for (int i = 0; i < db->nevents; i++)
		free(db->events[i]);
	free(db->events);
	free(db->samples);
	for (size_t i = 0; i < db->nimages; i++)
		tally_db_image_release(&db->images[i]);
	free(db->images);
	free(db->entries);
	free(db->counts);
	free(db->weights);
	free(db->profs);
	free(db->frame_tab);
	free(db->stack_frames);
	free(db->stacks);
	free(db->stack_counts);
	free(db->stack_weights);
	lazy_free(db->lazy);
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
	for (size_t i = 0; i < db->nlabels; i++)
		tally_labelset_release(&db->labels[i]);
	free(db->labels);
	for (size_t i = 0; i < db->nsources; i++)
		tally_db_source_release(&db->sources[i]);
	free(db->sources);
	if (db->tmpdir)
		tally_remove_tree(db->tmpdir);
	free(db->tmpdir);
	free(db->files);
	free(db->archive);
	memset(db, 0, sizeof(*db));
}

const char *tally_db_image_dir(const struct tally_db *db, uint32_t image)
{
	if (image < db->nimages && db->images[image].dir)
		return db->images[image].dir;
	return db->files ? db->files : db->tmpdir ? db->tmpdir : db->path;
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
