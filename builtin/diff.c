/* tally diff BASE NEW: what changed between two profiles, per function, per
 * source line or per function with its callees, as text, JSON, an HTML page,
 * a differential flame graph, difffolded.pl's folded stacks or a pair of pprof
 * profiles for go tool pprof -diff_base; --fail-above for CI. The model is
 * lib/report/diff.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "builtin/diff.h"
#include "tally/callgraph.h"
#include "tally/db.h"
#include "tally/diff.h"
#include "tally/epoch.h"
#include "tally/export.h"
#include "tally/flame.h"
#include "tally/html.h"
#include "tally/report.h"
#include "tally/select.h"
#include "tally/symbols.h"
#include "tally/symopts.h"
#include "tally/util.h"
#include "tally/view.h"

enum { OPT_FAIL_ABOVE, OPT_PLIMIT };

static int parse_pct(const char *arg, const char *what, double max, double *out)
{
	char *end;
	double v = strtod(arg, &end);
	if (end == arg || *end || !(v >= 0 && v <= max))
		return tally_seterr(-EINVAL, "invalid %s '%s': expected a percentage from 0 to %g",
				    what, arg, max);
	*out = v;
	return 0;
}

static int diff_handle(void *ctx, int code, const char *arg)
{
	struct dopts *o = ctx;
	switch (code) {
	case OPT_FAIL_ABOVE:
		o->fail_set = true;
		return parse_pct(arg, "--fail-above", 100, &o->fail_above);
	case OPT_PLIMIT:
		o->plimit_set = true;
		return parse_pct(arg, "--percent-limit", 100, &o->percent_limit);
	}
	return 0;
}

static const struct tally_option diff_options[] = {
	TALLY_OPT_FLAG('f', "symbols", "per function, self samples (the default)", struct dopts,
		       symbols),
	TALLY_OPT_FLAG('l', "lines", "per source line (file:line, function)", struct dopts, lines),
	TALLY_OPT_FLAG(0, "children", "per function, inclusive samples (needs call stacks)",
		       struct dopts, children),
	TALLY_OPT_FLAG(
		0, "absolute",
		"compare sample counts, not shares of each side's total (exports:\nthe base is not scaled to the new total)",
		struct dopts, absolute),
	TALLY_OPT_FLAG(0, "json", "JSON output (docs/report-json.md)", struct dopts, json),
	TALLY_OPT_STRING(0, "html", "FILE",
			 "the diff as one HTML page, with a differential flame graph", struct dopts,
			 html),
	TALLY_OPT_STRING(
		0, "format", "FORMAT",
		"pprof (FILE and its base for go tool pprof -diff_base), folded\n(STACK BASE NEW lines, difffolded.pl's) or svg (a differential flame graph)",
		struct dopts, format),
	TALLY_OPT_STRING('o', "output", "FILE", "where --format writes (- for stdout: folded)",
			 struct dopts, output),
	TALLY_OPT(
		0, "fail-above", TALLY_ARG_REQUIRED, "PCT",
		"exit with status 3, naming them, when functions (lines) grew by more\nthan PCT points of the samples; status 2 when a side has code it\ncannot name",
		OPT_FAIL_ABOVE),
	TALLY_OPT_U64(0, "top", "N", "at most N rows", struct dopts, top, 1, UINT32_MAX),
	TALLY_OPT(0, "percent-limit", TALLY_ARG_REQUIRED, "P",
		  "flame graphs: fold frames under P% of the samples (default 0.1)", OPT_PLIMIT),
	TALLY_OPTION_END,
};
static const struct tally_optgroup diff_group = { NULL, diff_options, diff_handle };

const struct tally_cmdopts diff_cmdopts = {
	.name = "diff",
	.summary = "what changed between two profiles, per function, line or call path (perf diff)",
	.usage = "[options] BASE NEW",
	.footer =
		"BASE and NEW are databases (a daemon's too: --epoch, --since, --until select\n"
		"in both), bundles, archives or merges; the selection options apply to both.\n"
		"Functions are matched by image and function name, so a rebuilt program diffs\n"
		"cleanly: the base's binary is named from the build-id cache that 'tally record'\n"
		"fills (or an archive). Exit status: 0, 1 on an error, 2 on a usage error or when\n"
		"--fail-above meets code a side cannot name, 3 when a row grew past --fail-above.\n",
	.groups = { &diff_group, &tally_select_group, &tally_symopts_group,
		    &tally_db_select_group },
};

static void side_release(struct side *s)
{
	if (s->have_cg)
		tally_cg_release(&s->cg);
	tally_resolver_free(s->res);
	if (s->open)
		tally_db_release(&s->db);
}

/* The event both sides are compared on: --event, else NEW's first that BASE has. */
static int pick_event(struct side *base, struct side *new_)
{
	if (new_->sel.ev_only >= 0) {
		new_->ev = new_->sel.ev_only;
		base->ev = base->sel.ev_only;
		return 0;
	}
	for (int e = 0; e < new_->db.nevents; e++) {
		int b = tally_db_event(&base->db, new_->db.events[e]);
		if (b >= 0) {
			new_->ev = e;
			base->ev = b;
			return 0;
		}
	}
	struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
	for (int e = 0; e < base->db.nevents; e++)
		strbuf_addf(&a, "%s%s", e ? "," : "", base->db.events[e]);
	for (int e = 0; e < new_->db.nevents; e++)
		strbuf_addf(&b, "%s%s", e ? "," : "", new_->db.events[e]);
	tally_error("'%s' (%s) and '%s' (%s) have no event in common: nothing to compare",
		    base->input, a.buf, new_->input, b.buf);
	strbuf_release(&a);
	strbuf_release(&b);
	return 1;
}

/* The output options together: -1 when they go, else the exit status. */
static int check_outputs(struct dopts *o)
{
	if ((int)o->symbols + (int)o->lines + (int)o->children > 1) {
		return tally_usage_error("diff", "give one of --symbols, --lines, --children");
	}
	if ((int)o->json + !!o->html + !!o->format > 1) {
		return tally_usage_error("diff", "give one of --json, --html, --format");
	}
	static const char *const formats[] = { "pprof", "folded", "svg" };
	bool fmt_ok = !o->format;
	for (size_t i = 0; i < ARRAY_SIZE(formats) && !fmt_ok; i++)
		fmt_ok = !strcmp(o->format, formats[i]);
	if (!fmt_ok) {
		tally_error("unknown diff format '%s' (known formats: pprof, folded, svg)",
			    o->format);
		return 2;
	}
	if (o->output && !o->format) {
		return tally_usage_error(
			"diff", "-o is where --format writes: give --format too (or --html FILE)");
	}
	if (o->format && !o->output)
		o->output = !strcmp(o->format, "pprof") ? "diff.pb.gz"
			    : !strcmp(o->format, "svg") ? "diff.svg"
							: "diff.folded";
	if (o->format && !strcmp(o->output, "-") && strcmp(o->format, "folded")) {
		return tally_usage_error(
			"diff", "the %s format goes to files: give -o FILE, not stdout", o->format);
	}
	return -1;
}

int cmd_diff(int argc, char **argv)
{
	struct dopts o;
	memset(&o, 0, sizeof(o));
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_symopts so;
	tally_symopts_init(&so);
	struct tally_db_select dbsel = { 0 };
	struct side sides[2];
	memset(sides, 0, sizeof(sides));
	struct side *base = &sides[0], *new_ = &sides[1];
	struct tally_diff d;
	bool have_diff = false;
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	void *ctx[] = { &o, &sel, &so, &dbsel };
	int first, ret = tally_cmd_options(&diff_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 2;
	if (argc - first != 2) {
		ret = tally_usage_error("diff",
					argc - first < 2 ? "give two databases: BASE and NEW"
							 : "unexpected argument '%s'",
					argv[first + 2 < argc ? first + 2 : first]);
		goto out;
	}
	base->input = argv[first];
	new_->input = argv[first + 1];
	ret = check_outputs(&o);
	if (ret >= 0)
		goto out;
	ret = 1;
	if (o.html && tally_html_check_target(o.html)) {
		tally_error_last();
		goto out;
	}
	struct tally_resolver_opts ro = { 0 };
	if (tally_symopts_ready(&so, &ro))
		goto out;
	ro.lines = o.lines;
	for (int i = 0; i < 2; i++) {
		struct side *s = &sides[i];
		if (tally_db_open_select(&s->db, s->input, &dbsel)) {
			tally_error_last();
			goto out;
		}
		s->open = true;
	}
	/* both sides weighted, or both in samples: one side without periods to
	 * weigh by (an old merge) makes both compare samples */
	if (!tally_view_can_weigh(&base->db) || !tally_view_can_weigh(&new_->db))
		sel.samples = true;
	for (int i = 0; i < 2; i++) {
		struct side *s = &sides[i];
		s->sel = sel;
		int sc = tally_select_check(&s->sel, &s->db, s->input, &w);
		tally_print_warnings(&w);
		if (sc) {
			tally_error_last();
			goto out;
		}
	}
	if (pick_event(base, new_))
		goto out;
	bool stacks = base->db.has_stacks && new_->db.has_stacks;
	bool need_stacks = o.children || (o.format && strcmp(o.format, "pprof"));
	if (need_stacks && !stacks) {
		tally_error(
			"'%s' has no call stacks, which %s needs (record both with -g or --call-graph)",
			base->db.has_stacks ? new_->input : base->input,
			o.children ? "--children" : "a flame graph or folded stacks");
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		tally_select_apply(&sides[i].db, &sides[i].sel, true);
		tally_warn_jit(&sides[i].db);
		tally_resolver_new(&sides[i].res, &sides[i].db, &ro);
	}
	struct tally_diff_side ds[2];
	for (int i = 0; i < 2; i++)
		ds[i] = (struct tally_diff_side){ &sides[i].db, sides[i].res, &sides[i].sel,
						  sides[i].ev, sides[i].input };
	enum tally_diff_view view = o.lines      ? TALLY_DIFF_LINES
				    : o.children ? TALLY_DIFF_CHILDREN
						 : TALLY_DIFF_SYMBOLS;
	tally_diff_build(&d, &ds[0], &ds[1], view, o.absolute);
	have_diff = true;
	if (!d.base_total || !d.new_total) {
		tally_error("nothing to compare: '%s' has no '%s' samples%s",
			    d.base_total ? new_->input : base->input, d.event,
			    sel.image || sel.pid || sel.comm || sel.excl || sel.nlabels
				    ? " in the selection"
				    : "");
		goto out;
	}
	int wr = write_diff(&d, base, new_, &o, stacks);
	/* the images a gate refuses to judge are said once, by its error */
	bool gate = !wr && o.fail_set;
	for (int i = 0; i < 2; i++) {
		bool *skip = xcalloc(sides[i].db.nimages + 1, sizeof(bool));
		for (size_t k = 0; gate && k < d.nunnamed; k++)
			if (d.unnamed[k].new_side == (i == 1))
				skip[d.unnamed[k].image] = true;
		tally_report_image_warnings_skip(&sides[i].db, sides[i].res, tally_verbose, skip,
						 &w);
		free(skip);
	}
	tally_print_warnings(&w);
	ret = wr;
	if (gate)
		ret = check_named(&d, base, new_);
	if (!ret && gate)
		ret = check_growth(&d, o.fail_above);
out:
	if (have_diff)
		tally_diff_release(&d);
	side_release(base);
	side_release(new_);
	tally_symopts_release(&so);
	tally_warnings_release(&w);
	return ret;
}
