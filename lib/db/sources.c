/* Sources: the recordings a merge holds, one line each in its 'sources' file
 * (docs/format.md): an id (a hash of the recording's session), its times,
 * its duration, its command and the source labels its samples got. Reports of
 * a label's samples take their duration from them (a merge's own duration is
 * all of them together); tally merge finds a recording given twice, once
 * inside a merge, by its id. */
#define _GNU_SOURCE
#include "tally/db.h"
#include "tally/util.h"
#include "db-private.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DAMAGED "the database is damaged: merge it again"

uint64_t tally_db_session_id(const struct tally_meta *session)
{
	uint64_t h = 0x5e55105e;
	for (size_t i = 0; i < session->n; i++) {
		h = tally_hash_bytes(session->kv[i].key, strlen(session->kv[i].key) + 1, h);
		h = tally_hash_bytes(session->kv[i].value, strlen(session->kv[i].value) + 1, h);
	}
	return h;
}

static char *dup_or_null(const char *s)
{
	return s && *s ? xstrdup(s) : NULL;
}

void tally_db_source_from_session(struct tally_db_source *out, const struct tally_meta *session,
				  const struct tally_labelset *labels)
{
	memset(out, 0, sizeof(*out));
	out->id = tally_db_session_id(session);
	out->start = dup_or_null(tally_meta_get(session, "start-time"));
	out->stop = dup_or_null(tally_meta_get(session, "stop-time"));
	const char *d = tally_meta_get(session, "duration");
	char *end = NULL;
	out->duration = d ? strtod(d, &end) : -1;
	if (!d || end == d || *end || !(out->duration >= 0) || !isfinite(out->duration))
		out->duration = -1;
	const char *c = tally_meta_get(session, "command");
	out->command = dup_or_null(c ? c : tally_meta_get(session, "target"));
	tally_labelset_copy(&out->labels, labels);
}

void tally_db_source_copy(struct tally_db_source *dst, const struct tally_db_source *src)
{
	*dst = *src;
	dst->start = dup_or_null(src->start);
	dst->stop = dup_or_null(src->stop);
	dst->command = dup_or_null(src->command);
	tally_labelset_copy(&dst->labels, &src->labels);
}

void tally_db_source_release(struct tally_db_source *s)
{
	free(s->start);
	free(s->stop);
	free(s->command);
	tally_labelset_release(&s->labels);
	memset(s, 0, sizeof(*s));
}

bool tally_db_source_in(const struct tally_db_source *s, const struct tally_labelset *set)
{
	for (size_t i = 0; i < s->labels.n; i++) {
		const char *v = tally_labelset_get(set, s->labels.v[i].key);
		if (!v || strcmp(v, s->labels.v[i].value))
			return false;
	}
	return true;
}

static int cmp_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

int tally_db_source_cmp(const struct tally_db_source *a, const struct tally_db_source *b)
{
	int c = tally_labelset_cmp(&a->labels, &b->labels);
	if (c)
		return c;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	if ((c = cmp_str(a->start, b->start)) || (c = cmp_str(a->stop, b->stop)) ||
	    (c = cmp_str(a->command, b->command)))
		return c;
	return a->duration < b->duration ? -1 : a->duration > b->duration;
}

/* A time field as written: "-" for none. */
static void add_field(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, '\t');
	if (s && *s)
		strbuf_add_escaped(sb, s);
	else
		strbuf_addch(sb, '-');
}

void tally_db_format_sources(const struct tally_db *db, struct strbuf *sb)
{
	strbuf_addstr(
		sb, "# id\tstart-time\tstop-time\tduration\tcommand\tlabels (KEY=VALUE, by key)\n");
	for (size_t i = 0; i < db->nsources; i++) {
		const struct tally_db_source *s = &db->sources[i];
		strbuf_addf(sb, "%016" PRIx64, s->id);
		add_field(sb, s->start);
		add_field(sb, s->stop);
		if (s->duration >= 0)
			strbuf_addf(sb, "\t%.3f", s->duration);
		else
			strbuf_addstr(sb, "\t-");
		add_field(sb, s->command);
		for (size_t k = 0; k < s->labels.n; k++) {
			strbuf_addf(sb, "\t%s=", s->labels.v[k].key);
			strbuf_add_escaped(sb, s->labels.v[k].value);
		}
		strbuf_addch(sb, '\n');
	}
}

/* Field f of a line split at tabs ("-" is none): unescaped, or NULL. */
static char *field_value(const char *f)
{
	if (!strcmp(f, "-"))
		return NULL;
	char *v = xstrdup(f);
	tally_unescape(v);
	return v;
}

int tally_db_parse_sources(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	size_t cap = db->nsources;
	char q[TALLY_EXCERPT_SIZE];
	if (memchr(buf, '\0', len))
		return tally_seterr(-EINVAL, "'%s': a NUL byte (%s)", what, DAMAGED);
	if (len && buf[len - 1] != '\n')
		return tally_seterr(-EINVAL, "'%s': the file ends in the middle of a line (%s)",
				    what, DAMAGED);
	int r = 0;
	char *text = xstrndup(buf, len), *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	while (!r && (line = tally_lines_next_data(&L))) {
		/* ID START STOP DURATION COMMAND KEY=VALUE... (tab-separated) */
		char *f[5], *s = line;
		int nf = 0;
		for (; nf < 5 && s; nf++) {
			f[nf] = s;
			char *t = strchr(s, '\t');
			if (t)
				*t = '\0';
			s = t ? t + 1 : NULL;
		}
		if (nf < 5) {
			r = tally_lines_err(
				&L, -EINVAL,
				"expected 'ID<tab>START<tab>STOP<tab>DURATION<tab>COMMAND<tab>KEY=VALUE...' (%s)",
				DAMAGED);
			break;
		}
		struct tally_db_source src = { 0 };
		char *e;
		errno = 0;
		src.id = strtoull(f[0], &e, 16);
		bool ok = strlen(f[0]) == 16 && strspn(f[0], "0123456789abcdef") == 16 && !*e &&
			  !errno;
		if (ok && strcmp(f[3], "-")) {
			src.duration = strtod(f[3], &e);
			ok = e != f[3] && !*e && src.duration >= 0 && isfinite(src.duration) &&
			     isdigit((unsigned char)f[3][0]);
		} else {
			src.duration = -1;
		}
		for (int k = 1; ok && k <= 2; k++)
			ok = !strcmp(f[k], "-") || tally_db_utc_time(f[k], NULL);
		if (!ok) {
			r = tally_lines_err(
				&L, -EINVAL,
				"expected a 16-digit id, two times (or '-') and seconds (or '-'), got '%s' (%s)",
				tally_excerpt(q, f[0]), DAMAGED);
			break;
		}
		src.start = field_value(f[1]);
		src.stop = field_value(f[2]);
		src.command = field_value(f[4]);
		if ((r = tally_db_parse_label_fields(s, what, L.ln, &src.labels))) {
			tally_db_source_release(&src);
			break;
		}
		GROW(db->sources, cap, db->nsources + 1);
		db->sources[db->nsources++] = src;
	}
	free(text);
	return r;
}
