/* tally report: its options, then calls into lib/report (the view model and
 * the text and JSON renderers) or lib/export/html.c (--html). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/flame.h"
#include "tally/html.h"
#include "tally/imgmap.h"
#include "tally/report.h"
#include "tally/select.h"
#include "tally/sort.h"
#include "tally/symbols.h"
#include "tally/symopts.h"
#include "tally/util.h"
#include "tally/view.h"

struct ropts {
	const char *input;
	struct tally_select sel;
	struct tally_report_opts r;
	bool json;
	bool plimit_set;
	bool explain;
	const char *html;
	const char *by_label;
	bool wall;
	struct tally_sort sort; /* --sort */
	bool sort_given;
};

enum { OPT_PLIMIT, OPT_BY_LABEL, OPT_SORT };

static int report_handle(void *ctx, int code, const char *arg)
{
	struct ropts *o = ctx;
	switch (code) {
	case OPT_SORT:
		o->sort_given = true;
		return tally_sort_parse(&o->sort, arg);
	case OPT_BY_LABEL:
		if (!tally_label_key_ok(arg, strlen(arg)))
			return tally_seterr(
				-EINVAL,
				"invalid --by-label '%s': a label KEY is letters, digits, '_', '-' or '.'",
				arg);
		o->by_label = arg;
		break;
	case OPT_PLIMIT: {
		char *end;
		o->r.percent_limit = strtod(arg, &end);
		if (end == arg || *end || !(o->r.percent_limit >= 0 && o->r.percent_limit <= 100))
			return tally_seterr(
				-EINVAL,
				"invalid --percent-limit '%s': expected a percentage from 0 to 100",
				arg);
		o->plimit_set = true;
		break;
	}
	}
	return 0;
}

static const struct tally_option report_options[] = {
	TALLY_OPT_STRING('i', "input", "DIR", "database (default tally.db)", struct ropts, input),
	TALLY_OPT_FLAG('f', "symbols",
		       "functions within each image (inlined functions as their own rows)",
		       struct ropts, r.symbols),
	TALLY_OPT_FLAG('l', "lines", "source lines within each image (file:line, function)",
		       struct ropts, r.lines),
	TALLY_OPT(
		0, "sort", TALLY_ARG_REQUIRED, "KEYS",
		"one table grouped by KEYS, comma-separated: comm, pid, image,\nfunction, line (perf report --sort; comm needs no --per-pid)",
		OPT_SORT),
	TALLY_OPT_FLAG(
		0, "flat",
		"the hottest functions (with --lines: lines) of all images in one table\n(perf report's default view, pprof -top)",
		struct ropts, r.flat),
	TALLY_OPT_FLAG(
		0, "explain",
		"where tally looked for each image (or the IMAGE operand) and its debug\ninfo, and why its functions and lines are or are not named",
		struct ropts, explain),
	TALLY_OPT_U64(0, "top", "N", "at most N rows per table", struct ropts, r.top, 1,
		      UINT32_MAX),
	TALLY_OPT_FLAG(
		0, "wall",
		"wall-clock time: on-CPU (cpu-clock) and off-CPU time in one event,\n'wall', in ns (a --off-cpu recording; docs/offcpu.md)",
		struct ropts, wall),
	TALLY_OPT_FLAG(0, "json", "JSON output (docs/report-json.md)", struct ropts, json),
	TALLY_OPT_FLAG(
		0, "full-names",
		"C++ and Rust names with their template arguments and parameters\n(text; JSON, HTML and exports always have them)",
		struct ropts, r.full_names),
	TALLY_OPT_STRING(0, "html", "FILE",
			 "the whole report as one self-contained HTML page (docs/html.md)",
			 struct ropts, html),
	TALLY_OPT(0, "by-label", TALLY_ARG_REQUIRED, "KEY",
		  "one report per value of the label KEY (a merge's host, run: tally merge)",
		  OPT_BY_LABEL),
	TALLY_OPTION_END,
};

static const struct tally_option report_cg_options[] = {
	TALLY_OPT_FLAG(0, "children",
		       "per function: inclusive %, self %, name (sorted by inclusive)",
		       struct ropts, r.children),
	TALLY_OPT_FLAG(0, "callgraph", "per function: its callers above, its callees below",
		       struct ropts, r.callgraph),
	TALLY_OPT_FLAG(0, "tree", "top-down call tree", struct ropts, r.tree),
	TALLY_OPT_STRING(0, "callers", "SYM", "the tree of SYM's callers", struct ropts, r.callers),
	TALLY_OPT_STRING(0, "callees", "SYM", "the tree of SYM's callees", struct ropts, r.callees),
	TALLY_OPT(
		0, "percent-limit", TALLY_ARG_REQUIRED, "P",
		"leave out tree nodes and rows under P% (trees: default 0.5); with\n--html, fold flame-graph frames and drop table rows under P% (default 0.1)",
		OPT_PLIMIT),
	TALLY_OPTION_END,
};

static const struct tally_optgroup report_group = { NULL, report_options, report_handle };
static const struct tally_optgroup report_cg_group = { "call graphs (databases recorded with -g)",
						       report_cg_options, report_handle };

const struct tally_cmdopts report_cmdopts = {
	.name = "report",
	.summary =
		"where the time went: per image, per function, per line, call graphs (iprof, opreport)",
	.usage = "[options] [IMAGE]",
	.groups = { &report_group, &report_cg_group, &tally_select_group, &tally_symopts_group,
		    &tally_db_select_group },
};

/* The options into o: -1 to go on, else the exit status (0 after --help). */
static int parse_options(struct ropts *o, struct tally_symopts *so, struct tally_db_select *dbsel,
			 int argc, char **argv)
{
	void *ctx[] = { o, o, &o->sel, so, dbsel };
	int first, r = tally_cmd_options(&report_cmdopts, ctx, argc, argv, &first);
	if (r >= 0)
		return r;
	if (o->explain && first < argc)
		o->r.explain_image = argv[first++];
	if (first < argc)
		return tally_usage_error("report", "unexpected argument '%s'", argv[first]);
	if (o->r.flat && !o->r.lines)
		o->r.symbols = true;
	/* --explain counts the samples each image's names and lines cover */
	if (o->explain)
		o->sel.samples = true;
	if (o->sort_given && (o->html || o->r.symbols || o->r.lines || o->r.flat || o->explain ||
			      o->by_label || tally_report_is_cg(&o->r)))
		return tally_usage_error(
			"report",
			"--sort makes a table of its own: leave out --html, --symbols, --lines, --flat, --explain, --by-label and the call-graph views");
	if (o->html &&
	    (o->json || o->r.symbols || o->r.lines || o->explain || tally_report_is_cg(&o->r)))
		return tally_usage_error(
			"report",
			"--html makes the whole report: leave out --json, --symbols, --lines, --explain and the call-graph views");
	if (o->by_label && (o->html || o->explain))
		return tally_usage_error(
			"report",
			"--by-label groups the text and JSON reports: leave out --html and --explain");
	return -1;
}

/* The report to stdout: 0, or 1 when it could not be written. */
static int write_report(const struct strbuf *out)
{
	if (out->len)
		fwrite(out->buf, 1, out->len, stdout);
	if (fflush(stdout) != 0) {
		tally_error("cannot write the report: %s", strerror(errno));
		return 1;
	}
	return 0;
}

/* Writes the page, or the report (text, JSON or --explain) to stdout: 0 or 1. */
static int render(struct ropts *o, struct tally_db *db, struct tally_resolver *res)
{
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	int ret = 0;
	if (o->html) {
		struct tally_html_opts ho = { o->input, &o->sel,
					      o->plimit_set ? o->r.percent_limit
							    : TALLY_FLAME_DEFAULT_LIMIT,
					      TALLY_HTML_ANNOTATE, o->r.top };
		tally_progress_say("writing the HTML report");
		int hr = tally_html_write(o->html, db, res, &ho);
		tally_progress_done();
		if (hr) {
			tally_error_last();
			ret = 1;
		} else {
			/* as export says what it wrote */
			struct stat st;
			if (stat(o->html, &st) == 0)
				tally_say("wrote '%s' (HTML report, %lld bytes)", o->html,
					  (long long)st.st_size);
			else
				tally_say("wrote '%s' (HTML report)", o->html);
		}
		tally_report_image_warnings(db, res, tally_verbose, &w);
		tally_print_warnings(&w);
		return ret;
	}
	struct strbuf out = STRBUF_INIT;
	if (o->sort_given) {
		tally_report_sort(&out, db, res, &o->r, &o->sort,
				  o->sel.ev_only >= 0 ? o->sel.ev_only : 0, o->json);
	} else if (o->explain) {
		if (tally_report_explain(&out, db, res, &o->r,
					 o->sel.ev_only >= 0 ? o->sel.ev_only : 0, o->json)) {
			tally_error_last();
			ret = 1;
		}
	} else if (o->json) {
		tally_report_json(&out, db, res, &o->r, &w);
	} else {
		tally_report_text(&out, db, res, &o->r, &w);
	}
	tally_report_image_warnings(db, res, tally_verbose, &w);
	tally_progress_done();
	tally_print_warnings(&w);
	if (write_report(&out))
		ret = 1;
	strbuf_release(&out);
	return ret;
}

/* --by-label KEY: the report once per value of the label (lib/report/bylabel.c). */
static int render_by_label(struct ropts *o, struct tally_db *db, struct tally_resolver *res)
{
	struct strbuf out = STRBUF_INIT;
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	int ret = 0;
	if (tally_report_by_label(&out, db, res, &o->r, o->by_label, o->json, &w)) {
		tally_warnings_release(&w);
		tally_error_last();
		ret = 1;
	} else {
		tally_report_image_warnings(db, res, tally_verbose, &w);
		tally_print_warnings(&w);
		ret = write_report(&out);
	}
	strbuf_release(&out);
	return ret;
}

int cmd_report(int argc, char **argv)
{
	struct ropts o;
	memset(&o, 0, sizeof(o));
	o.input = "tally.db";
	tally_select_init(&o.sel);
	o.r.sel = &o.sel;
	struct tally_db_select dbsel = { 0 };
	struct tally_symopts so;
	tally_symopts_init(&so);
	bool have_db = false;
	struct tally_db db;
	struct tally_resolver *res = NULL;
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	int ret = parse_options(&o, &so, &dbsel, argc, argv);
	if (ret >= 0)
		goto out;
	o.r.input = o.input;
	ret = 1;
	if (o.html && tally_html_check_target(o.html)) {
		tally_error_last();
		goto out;
	}
	struct tally_resolver_opts ro = { 0 };
	if (tally_symopts_ready(&so, &ro))
		goto out;
	/* the stacks are read only for the views that need them */
	if (tally_db_open_flags(&db, o.input, &dbsel, TALLY_DB_STACKS_LATER)) {
		tally_error_last();
		goto out;
	}
	have_db = true;
	tally_db_names_apart(&db);
	if (o.wall && tally_db_wall(&db)) {
		tally_error_last();
		goto out;
	}
	if (o.wall && !o.sel.event)
		o.sel.event = "wall";
	int sc = tally_select_check(&o.sel, &db, o.input, &w);
	if (!sc && tally_select_nonempty(&o.sel, &db, o.input)) {
		/* the filter that matched nothing is the error (not a warning and 0 Total) */
		tally_warnings_release(&w);
		tally_error("nothing to report: %s", tally_errmsg());
		goto out;
	}
	tally_print_warnings(&w);
	if (sc) {
		tally_error_last();
		goto out;
	}
	if (o.sort_given && tally_sort_check(&o.sort, &db, o.input)) {
		tally_error_last();
		goto out;
	}
	bool cgmode = tally_report_is_cg(&o.r);
	if ((int)o.r.symbols + (int)o.r.lines + (int)o.explain + (int)o.r.children +
		    (int)o.r.callgraph + (int)o.r.tree + !!o.r.callers + !!o.r.callees >
	    1) {
		tally_error(
			"give one of --symbols, --lines, --explain, --children, --callgraph, --tree, --callers, --callees");
		ret = 2;
		goto out;
	}
	if (cgmode && !db.has_stacks) {
		tally_error("'%s' has no call stacks (record with -g or --call-graph to get them)",
			    o.input);
		goto out;
	}
	if ((cgmode || o.html) && tally_db_load_stacks(&db)) {
		tally_error_last();
		goto out;
	}
	if (!o.plimit_set)
		o.r.percent_limit = (o.r.tree || o.r.callers || o.r.callees) ? 0.5 : 0;
	if (cgmode && !o.by_label)
		tally_view_select(&db, &o.sel);
	tally_warn_jit(&db);
	ro.lines = o.r.lines || o.explain || (o.sort_given && tally_sort_needs_lines(&o.sort));
	tally_progress_attach(&ro);
	tally_resolver_new(&res, &db, &ro);
	ret = o.by_label ? render_by_label(&o, &db, res) : render(&o, &db, res);
	tally_progress_done();
out:
	tally_resolver_free(res);
	if (have_db)
		tally_db_release(&db);
	tally_symopts_release(&so);
	return ret;
}
