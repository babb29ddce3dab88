/* Daemon databases: epochs (naming, listing, pruning), bundles (one-file
 * databases from tally ctl drain), and the selection and merge of epochs that
 * every reading command shares (see epoch.h). */
#define _GNU_SOURCE
#include "tally/epoch.h"
#include "tally/archive.h"
#include "tally/util.h"
#include "db-private.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- times ---- */

static bool all_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* "YYYYMMDDHHMM" (12 digits) to seconds, or -1. */
static double minute_name_time(const char *s)
{
	if (strlen(s) < 12 || !all_digits(s, 12))
		return -1;
	char buf[13];
	memcpy(buf, s, 12);
	buf[12] = '\0';
	double t;
	return tally_db_utc_format(buf, "%Y%m%d%H%M", &t) ? t : -1;
}

int tally_parse_time(const char *s, const char *what, double now, double *out)
{
	if (!s || !*s)
		goto bad;
	size_t n = strlen(s);
	if (n == 12 && all_digits(s, 12)) {
		double t = minute_name_time(s);
		if (t < 0)
			goto bad;
		*out = t;
		return 0;
	}
	static const char *const fmts[] = {
		"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M",
		"%Y-%m-%d %H:%M",    "%Y-%m-%d",
	};
	for (size_t i = 0; i < ARRAY_SIZE(fmts); i++) {
		struct tm tm;
		memset(&tm, 0, sizeof(tm));
		const char *end = strptime(s, fmts[i], &tm);
		if (!end)
			continue;
		if (*end == 'Z')
			end++;
		if (*end)
			continue;
		struct tm asked = tm;
		time_t t = timegm(&tm); /* normalizes tm: 2026-02-30 becomes March 2 */
		if (asked.tm_mday != tm.tm_mday || asked.tm_mon != tm.tm_mon ||
		    asked.tm_hour != tm.tm_hour)
			goto bad;
		*out = (double)t;
		return 0;
	}
	double d;
	if (tally_parse_duration(s, what, &d) == 0) {
		*out = now - d;
		return 0;
	}
bad:;
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(
		-EINVAL,
		"invalid %s '%s': expected a duration before now (30m, 2h, 1d; at most %.0fd) or a UTC time (2026-11-21T13:07, 202611211307)",
		what, tally_excerpt(q, s), TALLY_DURATION_MAX / 86400);
}

static void format_when(double t, char *buf, size_t n)
{
	tally_format_utc(t, buf, n);
}

/* ---- epochs ---- */

bool tally_epoch_name_ok(const char *name)
{
	if (minute_name_time(name) < 0)
		return false;
	const char *p = name + 12;
	if (!*p)
		return true;
	/* the second epoch of a minute is -2: -1 would be the first one's number again */
	if (*p++ != '-' || !*p || *p == '0' || !strcmp(p, "1") || strlen(p) > 6)
		return false;
	return all_digits(p, strlen(p));
}

static unsigned epoch_number(const char *name)
{
	return name[12] == '-' ? (unsigned)strtoul(name + 13, NULL, 10) : 1;
}

static int cmp_epoch(const void *a, const void *b)
{
	const struct tally_epoch *x = a, *y = b;
	int c = strncmp(x->name, y->name, 12);
	if (c)
		return c;
	unsigned nx = epoch_number(x->name), ny = epoch_number(y->name);
	return nx < ny ? -1 : nx > ny;
}

bool tally_db_is_daemon(const char *path)
{
	struct strbuf p = STRBUF_INIT;
	struct stat st;
	strbuf_addf(&p, "%s/%s", path, TALLY_DAEMON_MARKER);
	bool marker = stat(p.buf, &st) == 0 && S_ISREG(st.st_mode);
	strbuf_reset(&p);
	strbuf_addf(&p, "%s/session", path);
	bool session = access(p.buf, F_OK) == 0;
	strbuf_release(&p);
	return marker && !session;
}

/* The start-time and stop-time of a database's session, without reading the rest. */
static void session_times(const char *dbdir, double *start, double *stop)
{
	struct strbuf p = STRBUF_INIT, sb = STRBUF_INIT;
	strbuf_addf(&p, "%s/session", dbdir);
	if (tally_read_regular(&sb, AT_FDCWD, p.buf, 0, 1 << 20) == 0) {
		char *save = NULL;
		for (char *l = strtok_r(sb.buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			double *into = !strncmp(l, "start-time: ", 12)  ? start
				       : !strncmp(l, "stop-time: ", 11) ? stop
									: NULL;
			double t;
			if (into && tally_db_utc_time(strchr(l, ' ') + 1, &t))
				*into = t; /* a damaged time is refused when the epoch is read */
		}
	}
	strbuf_release(&p);
	strbuf_release(&sb);
}

int tally_epochs_list(const char *dir, struct tally_epoch **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return tally_seterr(-errno, "cannot read '%s': %s", dir, strerror(errno));
	size_t cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!tally_epoch_name_ok(de->d_name))
			continue;
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/%s", dir, de->d_name);
		struct stat st;
		/* a link is not an epoch (the daemon makes none): it would lead out of the database
		 */
		if (lstat(p.buf, &st) < 0 || !S_ISDIR(st.st_mode)) {
			strbuf_release(&p);
			continue;
		}
		GROW(*out, cap, *n + 1);
		struct tally_epoch *e = &(*out)[(*n)++];
		e->name = xstrdup(de->d_name);
		e->path = strbuf_detach(&p);
		e->start = minute_name_time(e->name);
		e->stop = -1;
		session_times(e->path, &e->start, &e->stop);
		if (e->stop < e->start)
			e->stop = e->start;
	}
	closedir(d);
	tally_qsort(*out, *n, sizeof(**out), cmp_epoch);
	return 0;
}

void tally_epochs_free(struct tally_epoch *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].path);
	}
	free(e);
}

char *tally_epoch_new_name(const char *dir, double when)
{
	time_t t = (time_t)when;
	struct tm tm;
	gmtime_r(&t, &tm);
	char base[16];
	strftime(base, sizeof(base), "%Y%m%d%H%M", &tm);
	struct tally_epoch *e;
	size_t n;
	unsigned next = 1;
	if (tally_epochs_list(dir, &e, &n) == 0) {
		for (size_t i = 0; i < n; i++)
			if (!strncmp(e[i].name, base, 12) && epoch_number(e[i].name) >= next)
				next = epoch_number(e[i].name) + 1;
		tally_epochs_free(e, n);
	}
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, base);
	if (next > 1)
		strbuf_addf(&sb, "-%u", next);
	return strbuf_detach(&sb);
}

int tally_epochs_prune(const char *dir, double keep, double now, size_t keep_min,
		       const char *current)
{
	struct tally_epoch *e;
	size_t n;
	int r = tally_epochs_list(dir, &e, &n);
	if (r)
		return r;
	int removed = 0;
	for (size_t i = 0; i + keep_min < n; i++) {
		if (current && !strcmp(e[i].name, current))
			continue;
		if (e[i].stop >= now - keep)
			continue;
		if (tally_db_remove(e[i].path) == 0)
			removed++;
	}
	tally_epochs_free(e, n);
	return removed;
}

/* ---- selection ---- */

int tally_db_select_opt(struct tally_db_select *sel, int opt, const char *arg)
{
	double now = tally_now_wall();
	switch (opt) {
	case TALLY_OPT_EPOCH:
		if (!tally_epoch_name_ok(arg)) {
			char q[TALLY_EXCERPT_SIZE];
			return tally_seterr(
				-EINVAL,
				"invalid --epoch '%s': an epoch is named YYYYMMDDHHMM[-N] (see 'tally ctl status' or the database directory)",
				tally_excerpt(q, arg));
		}
		sel->epoch = arg;
		break;
	case TALLY_OPT_SINCE:
		if (tally_parse_time(arg, "--since", now, &sel->since))
			return -EINVAL;
		sel->has_since = true;
		break;
	case TALLY_OPT_UNTIL:
		if (tally_parse_time(arg, "--until", now, &sel->until))
			return -EINVAL;
		sel->has_until = true;
		break;
	default:
		return 0;
	}
	if (sel->epoch && (sel->has_since || sel->has_until))
		return tally_seterr(
			-EINVAL,
			"--epoch names one epoch: it cannot be combined with --since or --until");
	if (sel->has_since && sel->has_until && sel->since > sel->until) {
		char a[32], b[32];
		format_when(sel->since, a, sizeof(a));
		format_when(sel->until, b, sizeof(b));
		return tally_seterr(-EINVAL, "--since (%s) is after --until (%s)", a, b);
	}
	return 1;
}

bool tally_db_select_active(const struct tally_db_select *sel)
{
	return sel && (sel->epoch || sel->has_since || sel->has_until);
}

static bool in_range(const struct tally_db_select *sel, double start, double stop)
{
	if (sel->has_since && stop < sel->since)
		return false;
	if (sel->has_until && start >= sel->until)
		return false;
	return true;
}

static void range_text(const struct tally_db_select *sel, struct strbuf *sb)
{
	char a[32];
	if (sel->has_since) {
		format_when(sel->since, a, sizeof(a));
		strbuf_addf(sb, "since %s", a);
	}
	if (sel->has_until) {
		format_when(sel->until, a, sizeof(a));
		strbuf_addf(sb, "%suntil %s", sel->has_since ? ", " : "", a);
	}
}

/* ---- bundles ---- */

static bool bundle_name_ok(const char *n)
{
	const char *base = !strncmp(n, "jit/", 4) ? n + 4 : n;
	if (!*base || base[0] == '.' || strchr(base, '/'))
		return false;
	for (const char *c = base; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			return false;
	return true;
}

struct bundle_names {
	char **v;
	size_t n, alloc;
	struct tally_hidx idx;
};

static bool name_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !strcmp(((const struct bundle_names *)ctx)->v[idx], key);
}

int tally_bundle_parse(const char *buf, size_t len, const char *what,
		       int (*file)(void *ctx, const char *name, const char *data, size_t len),
		       void *ctx)
{
	const char *p = buf, *end = buf + len;
	char q[TALLY_EXCERPT_SIZE];
	if (len < 13 || strncmp(buf, "tally-bundle:", 13))
		return tally_seterr(
			-ENOTDIR,
			"'%s' is not a tally database: it is a file, not a directory (nor a bundle from 'tally ctl drain', nor an archive from 'tally archive')",
			what);
	const char *nl = memchr(p, '\n', len);
	if (!nl || strncmp(buf, "tally-bundle: 1\n", 16)) {
		/* the version as written, never more than its line (which may be all there is) */
		const char *v = buf + 13, *ve = nl ? nl : end;
		while (v < ve && *v == ' ')
			v++;
		if (v == ve)
			return tally_seterr(
				-EINVAL,
				"'%s' is a damaged bundle: its first line names no format-version (drain it again)",
				what);
		struct strbuf sb = STRBUF_INIT;
		strbuf_add_excerpt(&sb, v, (size_t)(ve - v), TALLY_EXCERPT_MAX);
		tally_seterr(
			-EINVAL,
			"'%s' is a bundle of format-version %s, and this tally reads version %d (use a newer tally)",
			what, sb.buf, TALLY_FORMAT_VERSION);
		strbuf_release(&sb);
		return -EINVAL;
	}
	p = nl + 1;
	struct bundle_names seen = { 0 };
	size_t files = 0;
	int r = 0;
	for (;;) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			goto damaged;
		if ((size_t)(end - p) >= 5 && !strncmp(p, "end: ", 5)) {
			const char *d = p + 5;
			uint64_t want = 0;
			bool digits = d < nl && isdigit((unsigned char)*d);
			for (;
			     d < nl && isdigit((unsigned char)*d) && want <= (UINT64_MAX - 9) / 10;
			     d++)
				want = want * 10 + (uint64_t)(*d - '0');
			if (!digits || (size_t)(end - d) != 7 || strncmp(d, " files\n", 7) ||
			    want != files)
				goto damaged;
			goto out;
		}
		if ((size_t)(nl - p) < 8 || strncmp(p, "file: ", 6) ||
		    !isdigit((unsigned char)p[6]))
			goto damaged;
		const char *d = p + 6;
		uint64_t flen = 0;
		for (; d < nl && isdigit((unsigned char)*d); d++) {
			if (flen > (UINT64_MAX - 9) / 10)
				goto damaged;
			flen = flen * 10 + (uint64_t)(*d - '0');
		}
		if (d >= nl || *d != ' ' || memchr(d + 1, '\0', (size_t)(nl - d - 1)))
			goto damaged;
		char *name = xstrndup(d + 1, (size_t)(nl - d - 1));
		const char *data = nl + 1;
		if (!bundle_name_ok(name) || flen > (uint64_t)(end - data) ||
		    (uint64_t)(end - data) - flen < 1 || data[flen] != '\n') {
			free(name);
			goto damaged;
		}
		uint64_t h = tally_hash_bytes(name, strlen(name), 0);
		if (tally_hidx_get(&seen.idx, h, name, name_eq, &seen) != TALLY_HIDX_NONE) {
			r = tally_seterr(
				-EINVAL,
				"'%s' holds the file '%s' twice (the bundle is damaged: drain it again)",
				what, tally_excerpt(q, name));
			free(name);
			goto out;
		}
		GROW(seen.v, seen.alloc, seen.n + 1);
		seen.v[seen.n] = name;
		tally_hidx_put(&seen.idx, h, (uint32_t)seen.n++);
		if (file && (r = file(ctx, name, data, (size_t)flen)))
			goto out;
		files++;
		p = data + flen + 1;
	}
damaged:
	r = tally_seterr(
		-EINVAL,
		"'%s' is a damaged bundle: bad or missing entry at byte %zu (drain it again)", what,
		(size_t)(p - buf));
out:
	for (size_t i = 0; i < seen.n; i++)
		free(seen.v[i]);
	free(seen.v);
	tally_hidx_release(&seen.idx);
	return r;
}

struct unpack {
	const char *what, *dir;
	bool made_jit;
};

/* Writes one file of a bundle into the unpacking directory. */
static int unpack_file(void *ctx, const char *name, const char *data, size_t len)
{
	struct unpack *u = ctx;
	struct strbuf fp = STRBUF_INIT;
	if (!strncmp(name, "jit/", 4) && !u->made_jit) {
		strbuf_addf(&fp, "%s/jit", u->dir);
		mkdir(fp.buf, 0700);
		u->made_jit = true;
		strbuf_reset(&fp);
	}
	strbuf_addf(&fp, "%s/%s", u->dir, name);
	int fd = open(fp.buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int r = 0;
	if (fd < 0) {
		r = tally_seterr(-errno, "cannot unpack '%s' into '%s': %s", u->what, u->dir,
				 strerror(errno));
	} else {
		int w = tally_write_all(fd, data, len);
		if (w)
			r = tally_seterr(w, "cannot unpack '%s' into '%s': %s", u->what, u->dir,
					 strerror(-w));
		close(fd);
	}
	strbuf_release(&fp);
	return r;
}

/* The error message with the unpacked directory's name replaced by the bundle's. */
static void rename_in_error(int r, const char *tmp, const char *path)
{
	const char *m = tally_errmsg();
	struct strbuf sb = STRBUF_INIT;
	size_t tl = strlen(tmp);
	while (*m) {
		if (!strncmp(m, tmp, tl)) {
			strbuf_addstr(&sb, path);
			m += tl;
			if (*m == '/') {
				strbuf_addch(&sb, ':');
				m++;
			}
		} else {
			strbuf_addch(&sb, *m++);
		}
	}
	tally_seterr(r, "%s", sb.buf ? sb.buf : "");
	strbuf_release(&sb);
}

int tally_db_open_bundle_buf(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	memset(db, 0, sizeof(*db));
	/* checked whole before anything is written */
	int r = tally_bundle_parse(buf, len, what, NULL, NULL);
	if (r)
		return r;
	const char *td = getenv("TMPDIR");
	struct strbuf tmpl = STRBUF_INIT;
	strbuf_addf(&tmpl, "%s/tally-bundle.XXXXXX", td && *td ? td : "/tmp");
	if (!mkdtemp(tmpl.buf)) {
		r = tally_seterr(-errno,
				 "cannot unpack '%s': cannot create a directory in '%s': %s", what,
				 td && *td ? td : "/tmp", strerror(errno));
		strbuf_release(&tmpl);
		return r;
	}
	struct unpack u = { what, tmpl.buf, false };
	r = tally_bundle_parse(buf, len, what, unpack_file, &u);
	if (!r) {
		r = tally_db_read_dir(db, tmpl.buf);
		if (r)
			rename_in_error(r, tmpl.buf, what);
	}
	if (r) {
		tally_remove_tree(tmpl.buf);
		strbuf_release(&tmpl);
		memset(db, 0, sizeof(*db));
		return r;
	}
	free(db->path);
	db->path = xstrdup(what);
	db->tmpdir = strbuf_detach(&tmpl);
	return 0;
}

static int open_bundle(struct tally_db *db, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	/* the name the user gave may be a link; what it leads to must be a file */
	int r = tally_read_regular(&sb, AT_FDCWD, path, TALLY_OPEN_FOLLOW, TALLY_DB_FILE_MAX);
	if (r) {
		strbuf_release(&sb);
		memset(db, 0, sizeof(*db));
		return r;
	}
	r = tally_db_open_bundle_buf(db, sb.buf ? sb.buf : "", sb.len, path);
	strbuf_release(&sb);
	return r;
}

/* ---- opening ---- */

static bool same_dir(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* An epoch the daemon may be replacing while we read: read it again when the
 * directory changed under us. 1 when the epoch no longer exists (pruned). */
static int open_epoch(struct tally_db *db, const char *path, unsigned flags)
{
	for (int attempt = 0;; attempt++) {
		struct stat a, b;
		if (stat(path, &a) < 0) {
			memset(db, 0, sizeof(*db));
			return errno == ENOENT ? 1
					       : tally_seterr(-errno, "cannot read '%s': %s", path,
							      strerror(errno));
		}
		int r = tally_db_read_dir_flags(db, path, flags);
		bool moved = stat(path, &b) < 0 || !same_dir(&a, &b);
		if (!moved)
			return r;
		if (!r)
			tally_db_release(db);
		if (attempt == 100)
			return tally_seterr(
				-EAGAIN, "'%s' keeps changing while it is read (try again)", path);
		usleep(2000);
	}
}

int tally_epoch_read(struct tally_db *db, const char *path)
{
	int r = open_epoch(db, path, 0);
	if (r == 1)
		r = tally_seterr(-ENOENT, "epoch '%s' is gone (deleted by --keep)", path);
	return r;
}

/* What the daemon's first flush would make: for a database with no epoch yet. */
static int no_epochs(const char *path)
{
	return tally_seterr(
		-ENOENT,
		"'%s' is a daemon database with no epoch yet (wait for the daemon's first flush, or 'tally ctl flush')",
		path);
}

/* Reads the session file's keys of one epoch (for events, per-pid, stacks). */
static void epoch_session(const char *dir, struct tally_meta *m)
{
	struct strbuf p = STRBUF_INIT, sb = STRBUF_INIT;
	strbuf_addf(&p, "%s/session", dir);
	if (tally_read_regular(&sb, AT_FDCWD, p.buf, 0, 1 << 20) == 0) {
		char *save = NULL;
		size_t ln = 0;
		for (char *l = strtok_r(sb.buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			char *k, *v;
			if (tally_parse_header_line(l, p.buf, ++ln, &k, &v) == 0) {
				tally_meta_set(m, k, "%s", v);
				free(k);
				free(v);
			}
		}
	}
	strbuf_release(&p);
	strbuf_release(&sb);
}

/* What a merge of epochs adds up, so far: every count the builder sums. */
struct merge_sums {
	char **events;
	size_t nev;
	uint64_t *samples; /* per event of events */
	uint64_t *weights; /* ... their weights */
	/* lost, throttled, the summed session keys, the stop reasons */
	uint64_t other[2 + 8 + 3 + TALLY_FP_NSTOPS_SAID];
};

static void merge_sums_release(struct merge_sums *m)
{
	for (size_t e = 0; e < m->nev; e++)
		free(m->events[e]);
	free(m->events);
	free(m->samples);
	free(m->weights);
}

static bool add_fits(uint64_t *sum, uint64_t v)
{
	if (v > UINT64_MAX - *sum)
		return false;
	*sum += v;
	return true;
}

/* Adds one epoch's counts to m: -EINVAL with tally_seterr when a sum of the
 * merge would pass 2^64 (each epoch adds up; together they would wrap). */
static int merge_fits(struct merge_sums *m, const struct tally_db *one, const char *path)
{
	static const char *const keys[] = { "dwarf-unwinds",     "dwarf-stopped-early",
					    "dwarf-joined-fp",   "jit-untrusted",
					    "fp-leaf-checked",   "fp-leaf-repaired",
					    "fp-leaf-unchecked", "fp-repair-frames" };
	const char *what = NULL, *wwhat = NULL;
	for (int e = 0; e < one->nevents && !what; e++)
		for (size_t k = 0; k < m->nev; k++)
			if (!strcmp(one->events[e], m->events[k]) &&
			    !add_fits(&m->samples[k], one->samples[e]))
				what = one->events[e];
	/* the weights too: an epoch's weight-total (format 3), or its samples x period-mean */
	uint64_t *wt = xcalloc((size_t)one->nevents + 1, sizeof(uint64_t));
	if (!one->has_weights || tally_db_weight_totals(one, wt))
		for (int e = 0; e < one->nevents; e++)
			wt[e] = tally_mul_sat(one->samples[e], tally_db_mean_period(one, e));
	for (int e = 0; e < one->nevents && !what && !wwhat; e++)
		for (size_t k = 0; k < m->nev; k++)
			if (!strcmp(one->events[e], m->events[k]) &&
			    !add_fits(&m->weights[k], wt[e]))
				wwhat = one->events[e];
	free(wt);
	if (wwhat)
		return tally_seterr(
			-EINVAL,
			"'%s': its epochs together weigh more than %" PRIu64
			" of '%s' (an epoch is damaged: read them one by one with --epoch)",
			path, UINT64_MAX, wwhat);
	uint64_t v[ARRAY_SIZE(m->other)] = { one->lost, one->throttled, 0 };
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		const char *s = tally_meta_get(&one->session, keys[k]);
		v[2 + k] = s ? strtoull(s, NULL, 10) : 0; /* checked by the reader */
	}
	const char *why = tally_meta_get(&one->session, "dwarf-stop-reasons");
	unsigned long long w[3] = { 0, 0, 0 };
	if (why)
		(void)sscanf(
			why,
			"stack copy too small %llu, no CFI or unreadable frame %llu, depth limit %llu",
			&w[0], &w[1], &w[2]);
	for (int i = 0; i < 3; i++)
		v[2 + ARRAY_SIZE(keys) + i] = w[i];
	const char *fps = tally_meta_get(&one->session, "fp-repair-stops");
	uint64_t fp[TALLY_FP_NSTOPS_SAID];
	if (fps && tally_fp_stops_parse(fps, fp))
		for (size_t i = 0; i < TALLY_FP_NSTOPS_SAID; i++)
			v[2 + ARRAY_SIZE(keys) + 3 + i] = fp[i];
	if (what)
		return tally_seterr(
			-EINVAL,
			"'%s': its epochs together hold more than %" PRIu64
			" '%s' samples (an epoch is damaged: read them one by one with --epoch)",
			path, UINT64_MAX, what);
	for (size_t i = 0; i < ARRAY_SIZE(v); i++)
		if (!add_fits(&m->other[i], v[i]))
			return tally_seterr(
				-EINVAL,
				"'%s': the counters of its epochs (lost, throttled, dwarf-*, fp-leaf-*, fp-repair-*, jit-untrusted) add up past %" PRIu64
				" (an epoch is damaged: read them one by one with --epoch)",
				path, UINT64_MAX);
	return 0;
}

static int open_daemon(struct tally_db *db, const char *path, const struct tally_db_select *sel,
		       unsigned flags)
{
	struct tally_epoch *ep;
	size_t n;
	memset(db, 0, sizeof(*db));
	int r = tally_epochs_list(path, &ep, &n);
	if (r)
		return r;
	/* the selection */
	size_t *pick = xmalloc((n + 1) * sizeof(size_t));
	size_t np = 0;
	for (size_t i = 0; i < n; i++) {
		if (sel && sel->epoch && strcmp(ep[i].name, sel->epoch))
			continue;
		if (sel && !in_range(sel, ep[i].start, ep[i].stop))
			continue;
		pick[np++] = i;
	}
	if (!n) {
		r = no_epochs(path);
		goto out;
	}
	if (!np) {
		struct strbuf what = STRBUF_INIT;
		for (size_t i = 0; i < n; i++) {
			if (n > 8 && i == 3) {
				strbuf_addf(&what, ", ... (%zu more)", n - 6);
				i = n - 3;
			}
			strbuf_addf(&what, "%s%s", i ? ", " : "", ep[i].name);
		}
		if (sel->epoch) {
			r = tally_seterr(-ENOENT, "no epoch '%s' in '%s' (it has: %s)", sel->epoch,
					 path, what.buf);
		} else {
			struct strbuf rg = STRBUF_INIT;
			char a[32], b[32];
			range_text(sel, &rg);
			format_when(ep[0].start, a, sizeof(a));
			format_when(ep[n - 1].stop, b, sizeof(b));
			r = tally_seterr(
				-ENOENT,
				"no epoch of '%s' lies in the range asked (%s): its epochs span %s to %s (%s)",
				path, rg.buf, a, b, what.buf);
			strbuf_release(&rg);
		}
		strbuf_release(&what);
		goto out;
	}
	if (np == 1) {
		for (;;) {
			r = open_epoch(db, ep[pick[0]].path, flags);
			if (r != 1)
				break;
			r = tally_seterr(
				-ENOENT,
				"epoch '%s' of '%s' was deleted while it was read (--keep): run again",
				ep[pick[0]].name, path);
			break;
		}
		if (!r) {
			db->nepochs = 1;
			tally_meta_set(&db->session, "epochs", "%s", ep[pick[0]].name);
		}
		goto out;
	}
	/* several: the union of their events, per-pid only if all are, stacks if any has them */
	char **events = NULL;
	size_t nev = 0, aev = 0;
	bool per_pid = true, stacks = false;
	for (size_t k = 0; k < np; k++) {
		struct tally_meta m = { 0 };
		epoch_session(ep[pick[k]].path, &m);
		const char *evs = tally_meta_get(&m, "events");
		for (const char *p = evs ? evs : ""; *p;) {
			size_t l = strcspn(p, ",");
			bool have = false;
			for (size_t e = 0; e < nev && !have; e++)
				have = strlen(events[e]) == l && !strncmp(events[e], p, l);
			if (!have && l) {
				GROW(events, aev, nev + 1);
				events[nev++] = xstrndup(p, l);
			}
			p += l;
			if (*p == ',')
				p++;
		}
		const char *pp = tally_meta_get(&m, "per-pid");
		const char *cg = tally_meta_get(&m, "call-graph");
		if (tally_meta_get(&m, "format-version")) {
			per_pid = per_pid && pp && !strcmp(pp, "yes");
			stacks = stacks || (cg && strcmp(cg, "none"));
		}
		tally_meta_release(&m);
	}
	if (!nev) {
		GROW(events, aev, 1);
		events[nev++] = xstrdup("cpu-clock");
	}
	struct tally_db_builder *b = tally_db_builder_new((int)nev, events, per_pid, stacks);
	struct merge_sums sums = {
		events, nev, xcalloc(nev, sizeof(uint64_t)), xcalloc(nev, sizeof(uint64_t)), { 0 }
	};
	size_t used = 0;
	for (size_t k = 0; k < np; k++) {
		struct tally_db one;
		r = open_epoch(&one, ep[pick[k]].path, flags);
		if (r == 1) {
			r = 0; /* pruned meanwhile: it is not there any more */
			continue;
		}
		if (!r && (r = merge_fits(&sums, &one, path)))
			tally_db_release(&one);
		if (r) {
			tally_db_builder_free(b);
			merge_sums_release(&sums);
			goto out;
		}
		tally_db_builder_add(b, &one);
		tally_db_release(&one);
		used++;
	}
	merge_sums_release(&sums);
	tally_db_builder_finish(b, db);
	free(db->path);
	db->path = xstrdup(path);
	db->nepochs = used;
	tally_meta_set(&db->session, "epochs", "%s to %s (%zu)", ep[pick[0]].name,
		       ep[pick[np - 1]].name, used);
out:
	free(pick);
	tally_epochs_free(ep, n);
	return r;
}

int tally_db_open_select(struct tally_db *db, const char *path, const struct tally_db_select *sel)
{
	return tally_db_open_flags(db, path, sel, 0);
}

int tally_db_open_flags(struct tally_db *db, const char *path, const struct tally_db_select *sel,
			unsigned flags)
{
	struct stat st;
	if (!tally_db_select_active(sel))
		sel = NULL;
	/* what a killed writer left: beside the database, and in a daemon's directory */
	tally_db_recover(path, NULL);
	bool archive = tally_archive_is(path);
	if (!archive && stat(path, &st) == 0 && S_ISDIR(st.st_mode) && tally_db_is_daemon(path))
		return open_daemon(db, path, sel, flags);
	if (sel && sel->epoch) {
		memset(db, 0, sizeof(*db));
		return tally_seterr(
			-EINVAL,
			"--epoch: '%s' is not a daemon database, it has no epochs (written by 'tally daemon')",
			path);
	}
	int r;
	if (archive)
		r = tally_archive_open(db, path);
	else if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
		r = open_bundle(db, path);
	else
		r = tally_db_read_dir_flags(db, path, flags);
	if (r || !sel)
		return r;
	/* one recording: selected whole or not at all */
	double start = -1, stop = -1;
	if (!tally_db_utc_time(tally_meta_get(&db->session, "start-time"), &start))
		start = -1;
	if (!tally_db_utc_time(tally_meta_get(&db->session, "stop-time"), &stop))
		stop = -1;
	if (stop < start)
		stop = start;
	if (start >= 0 && in_range(sel, start, stop))
		return 0;
	struct strbuf rg = STRBUF_INIT;
	char a[32], b[32];
	range_text(sel, &rg);
	format_when(start, a, sizeof(a));
	format_when(stop, b, sizeof(b));
	if (start < 0)
		r = tally_seterr(-ENOENT,
				 "'%s' has no start-time, so no time range selects it (%s)", path,
				 rg.buf);
	else
		r = tally_seterr(-ENOENT,
				 "'%s' was recorded from %s to %s, outside the range asked (%s)",
				 path, a, b, rg.buf);
	strbuf_release(&rg);
	tally_db_release(db);
	return r;
}

int tally_db_open(struct tally_db *db, const char *path)
{
	return tally_db_open_select(db, path, NULL);
}

static int db_select_handle(void *ctx, int code, const char *arg)
{
	int r = tally_db_select_opt(ctx, code, arg);
	return r < 0 ? r : 0;
}

static const struct tally_option db_select_options[] = {
	TALLY_OPT(0, "epoch", TALLY_ARG_REQUIRED, "NAME",
		  "only this epoch (a name such as 202611211307)", TALLY_OPT_EPOCH),
	TALLY_OPT(
		0, "since", TALLY_ARG_REQUIRED, "WHEN",
		"epochs with samples after WHEN: a duration ago (2h, 30m)\nor a UTC time (2026-11-21T13:07, 202611211307)",
		TALLY_OPT_SINCE),
	TALLY_OPT(0, "until", TALLY_ARG_REQUIRED, "WHEN",
		  "epochs that began before WHEN (same forms)", TALLY_OPT_UNTIL),
	TALLY_OPTION_END,
};

const struct tally_optgroup tally_db_select_group = {
	"daemon databases (all epochs merged unless one of these selects)", db_select_options,
	db_select_handle
};
