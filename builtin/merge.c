/* tally merge: databases (recordings, a daemon's epochs, drained bundles)
 * summed into one, each input's samples under labels that say where they came
 * from (host, run), through the database builder (lib/db/build.c) in its
 * canonical mode, so that merging is associative and order-independent. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/archive.h"
#include "tally/cache.h"
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/util.h"

/* A --label as given: an empty value drops the key (and its default). */
struct given {
	char *key, *value;
};

struct input {
	const char *path;
	struct given *labels; /* the --label options before it */
	size_t nlabels;
	/* from its session (pass 1) */
	char **events;
	int nevents;
	char *sampling, *period_kind, *call_graph, *host;
	char **units;  /* per event: what its values are (ns, events: tally_db_unit) */
	bool *valued;  /* per event: its samples have values (weights, or a period-mean to weigh them by) */
	bool per_pid;
	/* the recordings it holds: a merge's sources, or itself (tally_db_source) */
	uint64_t *ids;
	char **held; /* each one's labels ("host=h1,run=a.db"), for messages */
	size_t nids;
	bool merge;  /* it is a merge (it has sources) */
};

struct mopts {
	const char *output;
	bool force, text_stacks;
	struct given *cur; /* the --label options so far */
	size_t ncur;
	struct input *in;
	size_t nin, ain;
};

enum { OPT_LABEL };

static int merge_handle(void *ctx, int code, const char *arg)
{
	struct mopts *o = ctx;
	switch (code) {
	case OPT_LABEL: {
		char *k, *v;
		int r = tally_label_parse(arg, "--label", &k, &v);
		if (r)
			return r;
		for (size_t i = 0; i < o->ncur; i++)
			if (!strcmp(o->cur[i].key, k)) {
				free(o->cur[i].value);
				o->cur[i].value = v;
				free(k);
				return 0;
			}
		o->cur = xrealloc(o->cur, (o->ncur + 1) * sizeof(*o->cur));
		o->cur[o->ncur++] = (struct given){ k, v };
		break;
	}
	}
	return 0;
}

static const struct tally_option merge_options[] = {
	TALLY_OPT_STRING('o', "output", "DIR",
		"the merged database (required)",
		struct mopts, output),
	TALLY_OPT_FLAG('f', "force", "replace DIR if it is a database", struct mopts, force),
	TALLY_OPT(0, "label", TALLY_ARG_REQUIRED, "KEY=VALUE",
	  "label the samples of the inputs that follow (default: host=the\nrecording's host, run=the input's name; KEY= drops KEY)", OPT_LABEL),
	TALLY_OPT_FLAG(0, "text-stacks",
		"write the stacks file as text lines (to read or edit), not binary;\nevery tally command reads either",
		struct mopts, text_stacks),
	TALLY_OPTION_END,
};
static const struct tally_optgroup merge_group = { NULL, merge_options, merge_handle };

const struct tally_cmdopts merge_cmdopts = {
	.name = "merge",
	.summary = "sum databases, epochs and drains of several runs and hosts into one",
	.usage = "-o DIR [options] [--label KEY=VALUE] INPUT...",
	.footer = "inputs: databases, daemon databases (their epochs, or those --epoch, --since and\n"
		  "--until select), bundles from 'tally ctl drain', archives from 'tally archive'.\n"
		  "The samples of each input keep labels (host, run) that reports and exports\n"
		  "select with --label and report groups with --by-label. Inputs with different\n"
		  "events are kept apart (one event column each); the same event sampled at\n"
		  "different rates or periods merges by value (the time or the events each sample\n"
		  "stands for); different call-graph modes, and values that cannot be added, are\n"
		  "refused.\n",
	.stop_at_nonopt = true,
	.groups = { &merge_group, &tally_db_select_group },
};

static void input_release(struct input *in)
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
	}
	free(in->events);
	free(in->units);
	free(in->valued);
	for (size_t i = 0; i < in->nids; i++)
		free(in->held[i]);
	free(in->held);
	free(in->ids);
	free(in->sampling);
	free(in->period_kind);
	free(in->call_graph);
	free(in->host);
}

static void add_input(struct mopts *o, const char *path)
{
	GROW(o->in, o->ain, o->nin + 1);
	struct input *in = &o->in[o->nin++];
	memset(in, 0, sizeof(*in));
	in->path = path;
	in->nlabels = o->ncur;
	in->labels = xcalloc(o->ncur + 1, sizeof(*in->labels));
	for (size_t i = 0; i < o->ncur; i++)
		in->labels[i] = (struct given){ xstrdup(o->cur[i].key), xstrdup(o->cur[i].value) };
}

/* Options and inputs in order: a --label applies to the inputs after it. -1
 * to go on, else the exit status. */
static int parse_args(struct mopts *o, struct tally_db_select *dbsel, int argc, char **argv)
{
	void *ctx[] = { o, dbsel };
	char **av = argv;
	int ac = argc;
	for (;;) {
		int first, r = tally_cmd_options(&merge_cmdopts, ctx, ac, av, &first);
		if (r >= 0)
			return r;
		bool dashdash = first > 1 && !strcmp(av[first - 1], "--");
		int k = first;
		while (k < ac && (dashdash || av[k][0] != '-' || !av[k][1]))
			add_input(o, av[k++]);
		if (k >= ac)
			break;
		/* options again: av[k - 1] stands in for the command's name */
		av += k - 1;
		ac -= k - 1;
	}
	if (!o->output)
		return tally_usage_error("merge", "give the merged database with -o DIR");
	if (!o->nin)
		return tally_usage_error("merge", "give the databases to merge");
	return -1;
}

/* The session of one input, read without its profiles where it can be:
 * a database's session file, a bundle's. A daemon database is opened whole
 * (its epochs merged as reports merge them). */
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
static void held_recordings(struct input *in, const struct tally_db *db)
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

static int read_session(struct input *in, const struct tally_db_select *dbsel)
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
			r = tally_db_parse_session(&db, text.buf ? text.buf : "", text.len, path.buf);
		else
			r = 1;
		/* and the recordings a merge holds (an optional file) */
		strbuf_reset(&path);
		strbuf_reset(&text);
		strbuf_addf(&path, "%s/sources", in->path);
		int k = r ? 0 : tally_read_regular(&text, AT_FDCWD, path.buf, 0, TALLY_DB_FILE_MAX);
		if (!r && !k)
			r = tally_db_parse_sources(&db, text.buf ? text.buf : "", text.len, path.buf);
		else if (!r && k != -ENOENT)
			r = 1;
	} else if (stat(in->path, &st) == 0 && S_ISREG(st.st_mode) && !tally_db_select_active(dbsel)) {
		r = tally_read_regular(&text, AT_FDCWD, in->path, TALLY_OPEN_FOLLOW, TALLY_DB_FILE_MAX);
		struct bundle_files bf = { STRBUF_INIT, STRBUF_INIT };
		int b = r ? r : tally_bundle_parse(text.buf ? text.buf : "", text.len, in->path, bundle_session, &bf);
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
		in->period_kind = xstrdup((v = tally_meta_get(&db.session, "period-kind")) ? v : "");
		in->call_graph = xstrdup((v = tally_meta_get(&db.session, "call-graph")) ? v : "none");
		in->host = (v = tally_meta_get(&db.session, "host")) ? xstrdup(v) : NULL;
		in->per_pid = db.per_pid;
		held_recordings(in, &db);
		/* what its values are: a database with weights has them; one
		 * without (an older tally's) is weighed by each event's period-mean */
		bool weights = tally_meta_get(&db.session, "weight-unit") != NULL;
		const char *pm = tally_meta_get(&db.session, "period-mean");
		in->units = xcalloc((size_t)db.nevents + 1, sizeof(char *));
		in->valued = xcalloc((size_t)db.nevents + 1, sizeof(bool));
		for (int e = 0; e < db.nevents; e++) {
			in->units[e] = xstrdup(tally_db_unit(&db, e));
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

static int event_index(const struct input *in, const char *ev)
{
	for (int e = 0; e < in->nevents; e++)
		if (!strcmp(in->events[e], ev))
			return e;
	return -1;
}

/* "frequency 99", "period 100000 (adaptive)": how an input sampled its event e. */
static void sampled_as(const struct input *in, int e, struct strbuf *sb)
{
	char *k = list_item(in->period_kind, e);
	strbuf_reset(sb);
	strbuf_addstr(sb, *in->sampling ? in->sampling : "an unknown rate");
	if (*k && strcmp(k, "fixed"))
		strbuf_addf(sb, " (%s period)", k);
	free(k);
}

/* What may not be summed: another call-graph mode, or an event both inputs
 * have whose values cannot be added: one sampled another way (rate, period,
 * fixed or adapted period) merges by value, the time or the events each
 * sample stands for, so both need values (weights, or a period-mean to
 * weigh by), and in the same unit. */
static int check_alike(const struct input *a, const struct input *b)
{
	if (strcmp(a->call_graph, b->call_graph)) {
		tally_error("cannot merge '%s' (call graphs: %s) with '%s' (call graphs: %s): merge databases recorded with the same --call-graph",
			    b->path, b->call_graph, a->path, a->call_graph);
		return 1;
	}
	struct strbuf sa = STRBUF_INIT, sb = STRBUF_INIT;
	int bad = 0;
	for (int e = 0; e < b->nevents && !bad; e++) {
		int k = event_index(a, b->events[e]);
		if (k < 0)
			continue;
		if (strcmp(a->units[k], b->units[e])) {
			tally_error("cannot merge '%s' with '%s': event '%s' counts %s in '%s' and %s in '%s', which do not add up (report them apart)",
				    b->path, a->path, b->events[e], a->units[k], a->path, b->units[e], b->path);
			bad = 1;
			break;
		}
		char *ka = list_item(a->period_kind, k), *kb = list_item(b->period_kind, e);
		bool same = !strcmp(a->sampling, b->sampling) && !strcmp(ka, kb);
		free(ka);
		free(kb);
		if (same || (a->valued[k] && b->valued[e]))
			continue;
		sampled_as(a, k, &sa);
		sampled_as(b, e, &sb);
		const struct input *none = !b->valued[e] ? b : a;
		tally_error("cannot merge '%s' with '%s': event '%s' was sampled at %s in '%s' and at %s in '%s', and '%s' has no periods to weigh its samples by, so their values cannot be added (merge databases sampled alike, or report them apart)",
			    b->path, a->path, b->events[e], sa.buf, a->path, sb.buf, b->path, none->path);
		bad = 1;
	}
	strbuf_release(&sa);
	strbuf_release(&sb);
	return bad;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The events of the result: the inputs' list when they all have the same,
 * else the union by name (the same whatever the order of the inputs). */
static char **merged_events(const struct mopts *o, int *n)
{
	bool same = true;
	for (size_t i = 1; i < o->nin && same; i++) {
		same = o->in[i].nevents == o->in[0].nevents;
		for (int e = 0; same && e < o->in[0].nevents; e++)
			same = !strcmp(o->in[i].events[e], o->in[0].events[e]);
	}
	char **ev = NULL;
	size_t nev = 0, aev = 0;
	for (size_t i = 0; i < o->nin; i++)
		for (int e = 0; e < o->in[i].nevents; e++) {
			bool have = false;
			for (size_t k = 0; k < nev && !have; k++)
				have = !strcmp(ev[k], o->in[i].events[e]);
			if (!have) {
				GROW(ev, aev, nev + 1);
				ev[nev++] = o->in[i].events[e];
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

/* The labels of one input: host (from its session) and run (its name) unless
 * a --label says otherwise. */
static void source_labels(const struct input *in, struct tally_labelset *set)
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

/* Two names for one database: the same file or directory. */
static int check_distinct(const struct mopts *o)
{
	struct stat *st = xcalloc(o->nin + 1, sizeof(*st));
	bool *ok = xcalloc(o->nin + 1, sizeof(bool));
	int r = 0;
	for (size_t i = 0; i < o->nin && !r; i++) {
		ok[i] = stat(o->in[i].path, &st[i]) == 0;
		for (size_t k = 0; k < i && !r && ok[i]; k++)
			if (ok[k] && st[k].st_dev == st[i].st_dev && st[k].st_ino == st[i].st_ino) {
				tally_error("'%s' and '%s' are the same database: its samples would count twice (give it once)",
					    o->in[k].path, o->in[i].path);
				r = 1;
			}
	}
	free(ok);
	free(st);
	return r;
}

/* A recording given twice, once inside a merge (or in two merges): its
 * samples would count twice. */
static int check_held(const struct mopts *o)
{
	for (size_t i = 0; i < o->nin; i++)
		for (size_t k = i + 1; k < o->nin; k++) {
			const struct input *a = &o->in[i], *b = &o->in[k];
			for (size_t x = 0; x < a->nids; x++)
				for (size_t y = 0; y < b->nids; y++) {
					if (a->ids[x] != b->ids[y])
						continue;
					const struct input *m = a->merge ? a : b, *r = a->merge ? b : a;
					const char *as = m == a ? a->held[x] : b->held[y];
					if (a->merge && b->merge)
						tally_error("'%s' and '%s' both hold the recording merged as %s: its samples would count twice (leave it out of one of them, or merge their other inputs)",
							    a->path, b->path, as);
					else if (m->merge)
						tally_error("'%s' is already inside '%s' (merged into it as %s): its samples would count twice (leave one of them out)",
							    r->path, m->path, as);
					else
						tally_error("'%s' and '%s' are the same recording (a copy of it): its samples would count twice (give it once)",
							    a->path, b->path);
					return 1;
				}
		}
	return 0;
}

/* An archive's image and debug files, copied into the build-id cache: the
 * merged database names its images by id and path, and reports of it (and
 * tally archive) find the files there once the archive is gone. Each file is
 * checked against its id as it is copied; what cannot be kept is said once. */
static void keep_archived(struct tally_cache *c, bool *tried, const struct tally_db *db, const char *input)
{
	if (!db->archive)
		return;
	if (!*tried) {
		*tried = true;
		if (tally_cache_open(c, true))
			tally_warn("the binaries of '%s' are not kept: %s (reports of the merge name its code only while its files are here)",
				   input, tally_errmsg());
	}
	if (c->fd < 0)
		return;
	struct strbuf p = STRBUF_INIT, m = STRBUF_INIT;
	size_t kept = 0, failed = 0;
	for (size_t i = 0; i < db->nimages; i++) {
		const struct tally_db_image *di = &db->images[i];
		char key[TALLY_CACHE_KEY_MAX];
		if ((strcmp(di->kind, "exec") && strcmp(di->kind, "lib")) || !tally_cache_key(di->id_kind, di->id, key))
			continue;
		strbuf_reset(&m);
		tally_archive_image_member(di, &m);
		strbuf_reset(&p);
		strbuf_addf(&p, "%s/%s", db->archive, m.buf);
		/* what the archive does not hold (--exclude-dependent) is left alone */
		if (access(p.buf, F_OK) == 0) {
			int r = tally_cache_add(c, di->id_kind, di->id, p.buf, TALLY_CACHE_IMAGE, di->path);
			kept += r >= 0;
			failed += r < 0;
		}
		if (strcmp(di->id_kind, "build-id") || strlen(di->id) < 3)
			continue;
		strbuf_reset(&p);
		strbuf_addf(&p, "%s/debug/.build-id/%.2s/%s.debug", db->archive, di->id, di->id + 2);
		if (access(p.buf, F_OK) == 0)
			failed += tally_cache_add(c, di->id_kind, di->id, p.buf, TALLY_CACHE_DEBUG, NULL) < 0;
	}
	if (failed)
		tally_warn("%zu file%s of '%s' could not be kept in the build-id cache: %s", failed, failed == 1 ? "" : "s", input,
			   tally_errmsg());
	tally_info("kept %zu image%s of '%s' in the build-id cache ('%s')", kept, kept == 1 ? "" : "s", input, c->path);
	strbuf_release(&p);
	strbuf_release(&m);
}

int cmd_merge(int argc, char **argv)
{
	struct mopts o;
	memset(&o, 0, sizeof(o));
	struct tally_db_select dbsel = { 0 };
	struct tally_db_builder *b = NULL;
	char **events = NULL;
	struct tally_cache cache = { NULL, -1 };
	bool cache_tried = false;
	int ret = parse_args(&o, &dbsel, argc, argv);
	if (ret >= 0)
		goto out;
	ret = 1;
	if (check_distinct(&o))
		goto out;
	if (tally_db_check_target(o.output, o.force)) {
		tally_error_last();
		goto out;
	}
	/* pass 1: the sessions, to refuse what cannot be summed before any work */
	bool per_pid = true;
	for (size_t i = 0; i < o.nin; i++) {
		if (read_session(&o.in[i], &dbsel)) {
			tally_error_last();
			goto out;
		}
		for (size_t k = 0; k < i; k++)
			if (check_alike(&o.in[k], &o.in[i]))
				goto out;
		per_pid = per_pid && o.in[i].per_pid;
	}
	if (check_held(&o))
		goto out;
	int nev;
	events = merged_events(&o, &nev);
	for (int e = 0; e < nev; e++) {
		size_t have = 0, first = 0;
		for (size_t i = 0; i < o.nin; i++)
			if (event_index(&o.in[i], events[e]) >= 0 && !have++)
				first = i;
		if (have < o.nin)
			tally_warn("event '%s' is in %zu of the %zu inputs (first '%s'): it is kept apart, its counts are those inputs' alone",
				   events[e], have, o.nin, o.in[first].path);
	}
	if (!per_pid && o.nin > 1)
		for (size_t i = 0; i < o.nin; i++)
			if (o.in[i].per_pid) {
				tally_warn("not every input was recorded with --per-pid: the merge keeps no per-process profiles");
				break;
			}
	bool stacks = strcmp(o.in[0].call_graph, "none") != 0;
	b = tally_db_builder_new(nev, events, per_pid, stacks);
	tally_db_builder_canonical(b);

	/* pass 2: one input at a time, released once added */
	for (size_t i = 0; i < o.nin; i++) {
		struct input *in = &o.in[i];
		struct tally_db db;
		/* the stacks file is not read into db but, at the add, straight into the merge's */
		if (tally_db_open_flags(&db, in->path, &dbsel, TALLY_DB_STACKS_LATER)) {
			tally_error_last();
			goto out;
		}
		const char *cg = tally_meta_get(&db.session, "call-graph");
		bool changed = strcmp(cg ? cg : "none", in->call_graph) != 0;
		for (int e = 0; e < db.nevents && !changed; e++)
			changed = event_index(in, db.events[e]) < 0;
		if (changed) {
			tally_error("'%s' changed while it was merged (its events or call graphs): merge again", in->path);
			tally_db_release(&db);
			goto out;
		}
		if (tally_db_builder_fits(b, &db, in->path)) {
			tally_error_last();
			tally_db_release(&db);
			goto out;
		}
		tally_db_keep_copies(&db);
		keep_archived(&cache, &cache_tried, &db, in->path);
		struct tally_labelset src;
		source_labels(in, &src);
		tally_db_builder_source(b, &src);
		tally_labelset_release(&src);
		tally_db_builder_add(b, &db);
		int lr = tally_db_builder_load_stacks(b);
		tally_db_release(&db);
		if (lr) {
			tally_error_last();
			goto out;
		}
	}
	struct tally_db out;
	tally_db_builder_finish(b, &out);
	b = NULL;
	out.text_stacks = o.text_stacks;
	int r = tally_db_save(&out, o.output, o.force);
	if (r) {
		tally_error_last();
	} else {
		uint64_t samples = 0;
		for (int e = 0; e < out.nevents; e++)
			samples += out.samples[e];
		tally_say("merged %zu input%s into '%s': %" PRIu64 " samples, %zu label set%s", o.nin,
			o.nin == 1 ? "" : "s", o.output, samples, out.nlabels, out.nlabels == 1 ? "" : "s");
		ret = 0;
	}
	tally_db_release(&out);
out:
	tally_cache_close(&cache);
	tally_db_builder_free(b);
	free(events);
	for (size_t i = 0; i < o.nin; i++)
		input_release(&o.in[i]);
	free(o.in);
	for (size_t i = 0; i < o.ncur; i++) {
		free(o.cur[i].key);
		free(o.cur[i].value);
	}
	free(o.cur);
	return ret;
}
