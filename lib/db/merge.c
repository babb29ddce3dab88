/* What tally merge knows of its inputs before it sums them (tally/merge.h):
 * their sessions, read without their profiles where they can be, the
 * events of the result, and the labels each input's samples get. */
#define _GNU_SOURCE
#include "tally/merge.h"
#include "tally/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void tally_merge_input_init(struct tally_merge_input *in, const char *path,
			    const struct tally_merge_label *labels, size_t n)
{
	memset(in, 0, sizeof(*in));
	in->path = path;
	in->nlabels = n;
	in->labels = xcalloc(n + 1, sizeof(*in->labels));
	for (size_t i = 0; i < n; i++)
		in->labels[i] = (struct tally_merge_label){ xstrdup(labels[i].key),
							    xstrdup(labels[i].value) };
}

void tally_merge_input_release(struct tally_merge_input *in)
{
	for (size_t i = 0; i < in->nlabels; i++) {
		free(in->labels[i].key);
		free(in->labels[i].value);
	}
	free(in->labels);
	for (int e = 0; e < in->nevents; e++) {
		free(in->events[e]);
		if (in->units)
			free(in->units[e]);
		if (in->period_kinds)
			free(in->period_kinds[e]);
	}
	free(in->events);
	free(in->units);
	free(in->period_kinds);
	free(in->valued);
	for (size_t i = 0; i < in->nids; i++)
		free(in->held[i]);
	free(in->held);
	free(in->ids);
	free(in->sampling);
	free(in->call_graph);
	free(in->host);
}


struct bundle_files {
	struct strbuf session, sources;
};

static int bundle_session(void *ctx, const char *name, const char *data, size_t len)
{
	struct bundle_files *bf = ctx;
	if (!strcmp(name, "session"))
		strbuf_add(&bf->session, data, len);
	else if (!strcmp(name, "sources"))
		strbuf_add(&bf->sources, data, len);
	return 0;
}

/* The recordings an input holds: its sources, or itself. */
static void held_recordings(struct tally_merge_input *in, const struct tally_db *db)
{
	in->merge = db->nsources > 0;
	in->nids = db->nsources ? db->nsources : 1;
	in->ids = xcalloc(in->nids, sizeof(*in->ids));
	in->held = xcalloc(in->nids, sizeof(*in->held));
	for (size_t i = 0; i < in->nids; i++) {
		struct strbuf sb = STRBUF_INIT;
		if (db->nsources) {
			in->ids[i] = db->sources[i].id;
			tally_labelset_format(&sb, &db->sources[i].labels);
		} else {
			in->ids[i] = tally_db_session_id(&db->session);
		}
		in->held[i] = strbuf_detach(&sb);
	}
}

/* Item i of a comma-separated list, or "" (a new string). */
static char *list_item(const char *list, int i)
{
	const char *p = list;
	for (int k = 0; k < i && p; k++) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return p ? xstrndup(p, strcspn(p, ",")) : xstrdup("");
}

int tally_merge_input_read(struct tally_merge_input *in, const struct tally_db_select *dbsel)
{
	struct stat st;
	struct tally_db db;
	memset(&db, 0, sizeof(db));
	struct strbuf text = STRBUF_INIT, path = STRBUF_INIT;
	int r;
	if (stat(in->path, &st) == 0 && S_ISDIR(st.st_mode) && !tally_db_is_daemon(in->path) &&
	    !tally_db_select_active(dbsel)) {
		strbuf_addf(&path, "%s/session", in->path);
		r = tally_read_regular(&text, AT_FDCWD, path.buf, 0, 1 << 20);
		if (!r)
			r = tally_db_parse_session(&db, text.buf ? text.buf : "", text.len,
						   path.buf);
		else
			r = 1;
		/* and the recordings a merge holds (an optional file) */
		strbuf_reset(&path);
		strbuf_reset(&text);
		strbuf_addf(&path, "%s/sources", in->path);
		int k = r ? 0 : tally_read_regular(&text, AT_FDCWD, path.buf, 0, TALLY_DB_FILE_MAX);
		if (!r && !k)
			r = tally_db_parse_sources(&db, text.buf ? text.buf : "", text.len,
						   path.buf);
		else if (!r && k != -ENOENT)
			r = 1;
	} else if (stat(in->path, &st) == 0 && S_ISREG(st.st_mode) &&
		   !tally_db_select_active(dbsel)) {
		r = tally_read_regular(&text, AT_FDCWD, in->path, TALLY_OPEN_FOLLOW,
				       TALLY_DB_FILE_MAX);
		struct bundle_files bf = { STRBUF_INIT, STRBUF_INIT };
		int b = r ? r
			  : tally_bundle_parse(text.buf ? text.buf : "", text.len, in->path,
					       bundle_session, &bf);
		strbuf_addf(&path, "%s:session", in->path);
		if (b == 0 && bf.session.len)
			r = tally_db_parse_session(&db, bf.session.buf, bf.session.len, path.buf);
		else
			r = 1;
		strbuf_reset(&path);
		strbuf_addf(&path, "%s:sources", in->path);
		if (!r && bf.sources.len)
			r = tally_db_parse_sources(&db, bf.sources.buf, bf.sources.len, path.buf);
		strbuf_release(&bf.session);
		strbuf_release(&bf.sources);
	} else {
		r = 1;
	}
	if (r == 1) {
		/* whatever it is, opening it says what is wrong or gives the session */
		tally_db_release(&db);
		r = tally_db_open_select(&db, in->path, dbsel);
	}
	if (!r) {
		in->nevents = db.nevents;
		in->events = xcalloc((size_t)db.nevents + 1, sizeof(char *));
		for (int e = 0; e < db.nevents; e++)
			in->events[e] = xstrdup(db.events[e]);
		const char *v;
		in->sampling = xstrdup((v = tally_meta_get(&db.session, "sampling")) ? v : "");
		const char *pk = tally_meta_get(&db.session, "period-kind");
		in->call_graph =
			xstrdup((v = tally_meta_get(&db.session, "call-graph")) ? v : "none");
		in->host = (v = tally_meta_get(&db.session, "host")) ? xstrdup(v) : NULL;
		in->per_pid = db.per_pid;
		held_recordings(in, &db);
		/* what its values are: a database with weights has them; one
		 * without (an older tally's) is weighed by each event's period-mean */
		bool weights = tally_meta_get(&db.session, "weight-unit") != NULL;
		const char *pm = tally_meta_get(&db.session, "period-mean");
		in->units = xcalloc((size_t)db.nevents + 1, sizeof(char *));
		in->valued = xcalloc((size_t)db.nevents + 1, sizeof(bool));
		in->period_kinds = xcalloc((size_t)db.nevents + 1, sizeof(char *));
		for (int e = 0; e < db.nevents; e++) {
			in->units[e] = xstrdup(tally_db_unit(&db, e));
			in->period_kinds[e] = pk ? list_item(pk, e) : xstrdup("");
			char *m = pm ? list_item(pm, e) : xstrdup("");
			in->valued[e] = weights || strtoull(m, NULL, 10) > 0;
			free(m);
		}
	}
	tally_db_release(&db);
	strbuf_release(&text);
	strbuf_release(&path);
	return r;
}

int tally_merge_event_index(const struct tally_merge_input *in, const char *ev)
{
	for (int e = 0; e < in->nevents; e++)
		if (!strcmp(in->events[e], ev))
			return e;
	return -1;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **tally_merge_events(const struct tally_merge_input *in, size_t nin, int *n)
{
	bool same = true;
	for (size_t i = 1; i < nin && same; i++) {
		same = in[i].nevents == in[0].nevents;
		for (int e = 0; same && e < in[0].nevents; e++)
			same = !strcmp(in[i].events[e], in[0].events[e]);
	}
	char **ev = NULL;
	size_t nev = 0, aev = 0;
	for (size_t i = 0; i < nin; i++)
		for (int e = 0; e < in[i].nevents; e++) {
			bool have = false;
			for (size_t k = 0; k < nev && !have; k++)
				have = !strcmp(ev[k], in[i].events[e]);
			if (!have) {
				GROW(ev, aev, nev + 1);
				ev[nev++] = in[i].events[e];
			}
		}
	if (!same)
		tally_qsort(ev, nev, sizeof(*ev), cmp_name);
	*n = (int)nev;
	return ev;
}

/* A label value from a name or a host: control characters become '?', and
 * it is cut to the longest a value may be. */
static char *label_value(const char *s)
{
	size_t n = strlen(s);
	if (n > TALLY_LABEL_VALUE_MAX)
		n = TALLY_LABEL_VALUE_MAX;
	char *v = xstrndup(s, n);
	for (char *c = v; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			*c = '?';
	return v;
}

void tally_merge_source_labels(const struct tally_merge_input *in, struct tally_labelset *set)
{
	memset(set, 0, sizeof(*set));
	size_t n = strlen(in->path);
	while (n > 1 && in->path[n - 1] == '/')
		n--;
	char *name = xstrndup(in->path, n);
	char *run = label_value(name);
	tally_labelset_set(set, "run", run);
	free(run);
	free(name);
	if (in->host && *in->host) {
		char *host = label_value(in->host);
		tally_labelset_set(set, "host", host);
		free(host);
	}
	for (size_t i = 0; i < in->nlabels; i++)
		tally_labelset_set(set, in->labels[i].key, in->labels[i].value);
}
