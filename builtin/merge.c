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
#include "tally/merge.h"
#include "tally/util.h"

struct mopts {
	const char *output;
	bool force, text_stacks;
	struct tally_merge_label *cur; /* the --label options so far */
	size_t ncur;
	struct tally_merge_input *in;
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
		o->cur[o->ncur++] = (struct tally_merge_label){ k, v };
		break;
	}
	}
	return 0;
}

static const struct tally_option merge_options[] = {
	TALLY_OPT_STRING('o', "output", "DIR", "the merged database (required)", struct mopts,
			 output),
	TALLY_OPT_FLAG('f', "force", "replace DIR if it is a database", struct mopts, force),
	TALLY_OPT(
		0, "label", TALLY_ARG_REQUIRED, "KEY=VALUE",
		"label the samples of the inputs that follow (default: host=the\nrecording's host, run=the input's name; KEY= drops KEY)",
		OPT_LABEL),
	TALLY_OPT_FLAG(
		0, "text-stacks",
		"write the stacks file as text lines (to read or edit), not binary;\nevery tally command reads either",
		struct mopts, text_stacks),
	TALLY_OPTION_END,
};
static const struct tally_optgroup merge_group = { NULL, merge_options, merge_handle };

const struct tally_cmdopts merge_cmdopts = {
	.name = "merge",
	.summary = "sum databases, epochs and drains of several runs and hosts into one",
	.usage = "-o DIR [options] [--label KEY=VALUE] INPUT...",
	.footer =
		"inputs: databases, daemon databases (their epochs, or those --epoch, --since and\n"
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

static void add_input(struct mopts *o, const char *path)
{
	GROW(o->in, o->ain, o->nin + 1);
	tally_merge_input_init(&o->in[o->nin++], path, o->cur, o->ncur);
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

/* "frequency 99", "period 100000 (adaptive)": how an input sampled its event e. */
static void sampled_as(const struct tally_merge_input *in, int e, struct strbuf *sb)
{
	const char *k = in->period_kinds[e];
	strbuf_reset(sb);
	strbuf_addstr(sb, *in->sampling ? in->sampling : "an unknown rate");
	if (*k && strcmp(k, "fixed"))
		strbuf_addf(sb, " (%s period)", k);
}

/* What may not be summed: another call-graph mode, or an event both inputs
 * have whose values cannot be added: one sampled another way (rate, period,
 * fixed or adapted period) merges by value, the time or the events each
 * sample stands for, so both need values (weights, or a period-mean to
 * weigh by), and in the same unit. */
static int check_alike(const struct tally_merge_input *a, const struct tally_merge_input *b)
{
	if (strcmp(a->call_graph, b->call_graph)) {
		tally_error(
			"cannot merge '%s' (call graphs: %s) with '%s' (call graphs: %s): merge databases recorded with the same --call-graph",
			b->path, b->call_graph, a->path, a->call_graph);
		return 1;
	}
	struct strbuf sa = STRBUF_INIT, sb = STRBUF_INIT;
	int bad = 0;
	for (int e = 0; e < b->nevents && !bad; e++) {
		int k = tally_merge_event_index(a, b->events[e]);
		if (k < 0)
			continue;
		if (strcmp(a->units[k], b->units[e])) {
			tally_error(
				"cannot merge '%s' with '%s': event '%s' counts %s in '%s' and %s in '%s', which do not add up (report them apart)",
				b->path, a->path, b->events[e], a->units[k], a->path, b->units[e],
				b->path);
			bad = 1;
			break;
		}
		bool same = !strcmp(a->sampling, b->sampling) &&
			    !strcmp(a->period_kinds[k], b->period_kinds[e]);
		if (same || (a->valued[k] && b->valued[e]))
			continue;
		sampled_as(a, k, &sa);
		sampled_as(b, e, &sb);
		const struct tally_merge_input *none = !b->valued[e] ? b : a;
		tally_error(
			"cannot merge '%s' with '%s': event '%s' was sampled at %s in '%s' and at %s in '%s', and '%s' has no periods to weigh its samples by, so their values cannot be added (merge databases sampled alike, or report them apart)",
			b->path, a->path, b->events[e], sa.buf, a->path, sb.buf, b->path,
			none->path);
		bad = 1;
	}
	strbuf_release(&sa);
	strbuf_release(&sb);
	return bad;
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
				tally_error(
					"'%s' and '%s' are the same database: its samples would count twice (give it once)",
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
			const struct tally_merge_input *a = &o->in[i], *b = &o->in[k];
			for (size_t x = 0; x < a->nids; x++)
				for (size_t y = 0; y < b->nids; y++) {
					if (a->ids[x] != b->ids[y])
						continue;
					const struct tally_merge_input *m = a->merge ? a : b,
								       *r = a->merge ? b : a;
					const char *as = m == a ? a->held[x] : b->held[y];
					if (a->merge && b->merge)
						tally_error(
							"'%s' and '%s' both hold the recording merged as %s: its samples would count twice (leave it out of one of them, or merge their other inputs)",
							a->path, b->path, as);
					else if (m->merge)
						tally_error(
							"'%s' is already inside '%s' (merged into it as %s): its samples would count twice (leave one of them out)",
							r->path, m->path, as);
					else
						tally_error(
							"'%s' and '%s' are the same recording (a copy of it): its samples would count twice (give it once)",
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
static void keep_archived(struct tally_cache *c, bool *tried, const struct tally_db *db,
			  const char *input)
{
	if (!db->archive)
		return;
	if (!*tried) {
		*tried = true;
		if (tally_cache_open(c, true))
			tally_warn(
				"the binaries of '%s' are not kept: %s (reports of the merge name its code only while its files are here)",
				input, tally_errmsg());
	}
	if (c->fd < 0)
		return;
	size_t failed;
	size_t kept = tally_archive_keep(c, db, &failed);
	if (failed)
		tally_warn("%zu file%s of '%s' could not be kept in the build-id cache: %s", failed,
			   failed == 1 ? "" : "s", input, tally_errmsg());
	tally_info("kept %zu image%s of '%s' in the build-id cache ('%s')", kept,
		   kept == 1 ? "" : "s", input, c->path);
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
		if (tally_merge_input_read(&o.in[i], &dbsel)) {
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
	events = tally_merge_events(o.in, o.nin, &nev);
	for (int e = 0; e < nev; e++) {
		size_t have = 0, first = 0;
		for (size_t i = 0; i < o.nin; i++)
			if (tally_merge_event_index(&o.in[i], events[e]) >= 0 && !have++)
				first = i;
		if (have < o.nin)
			tally_warn(
				"event '%s' is in %zu of the %zu inputs (first '%s'): it is kept apart, its counts are those inputs' alone",
				events[e], have, o.nin, o.in[first].path);
	}
	if (!per_pid && o.nin > 1)
		for (size_t i = 0; i < o.nin; i++)
			if (o.in[i].per_pid) {
				tally_warn(
					"not every input was recorded with --per-pid: the merge keeps no per-process profiles");
				break;
			}
	bool stacks = strcmp(o.in[0].call_graph, "none") != 0;
	b = tally_db_builder_new(nev, events, per_pid, stacks);
	tally_db_builder_canonical(b);

	/* pass 2: one input at a time, released once added */
	for (size_t i = 0; i < o.nin; i++) {
		struct tally_merge_input *in = &o.in[i];
		struct tally_db db;
		/* the stacks file is not read into db but, at the add, straight into the merge's */
		if (tally_db_open_flags(&db, in->path, &dbsel, TALLY_DB_STACKS_LATER)) {
			tally_error_last();
			goto out;
		}
		const char *cg = tally_meta_get(&db.session, "call-graph");
		bool changed = strcmp(cg ? cg : "none", in->call_graph) != 0;
		for (int e = 0; e < db.nevents && !changed; e++)
			changed = tally_merge_event_index(in, db.events[e]) < 0;
		if (changed) {
			tally_error(
				"'%s' changed while it was merged (its events or call graphs): merge again",
				in->path);
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
		tally_merge_source_labels(in, &src);
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
		tally_say("merged %zu input%s into '%s': %" PRIu64 " samples, %zu label set%s",
			  o.nin, o.nin == 1 ? "" : "s", o.output, samples, out.nlabels,
			  out.nlabels == 1 ? "" : "s");
		ret = 0;
	}
	tally_db_release(&out);
out:
	tally_cache_close(&cache);
	tally_db_builder_free(b);
	free(events);
	for (size_t i = 0; i < o.nin; i++)
		tally_merge_input_release(&o.in[i]);
	free(o.in);
	for (size_t i = 0; i < o.ncur; i++) {
		free(o.cur[i].key);
		free(o.cur[i].value);
	}
	free(o.cur);
	return ret;
}
