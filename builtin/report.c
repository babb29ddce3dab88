/* tally report: its options, then calls into lib/report (the view model and
 * the text and JSON renderers) or lib/export/html.c (--html). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
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
#include "tally/symbols.h"
#include "tally/util.h"
#include "tally/view.h"

static const char report_usage[] =
	"usage: tally report [options]\n"
	"\n"
	"  -i, --input DIR          database (default tally.db)\n"
	"  -f, --symbols            functions within each image (inlined functions as their own rows)\n"
	"  -l, --lines              source lines within each image (file:line, function)\n"
	"      --no-inline          count inlined code for the function it was inlined into\n"
	"      --explain [IMAGE]    where tally looked for each image and its debug info, and why\n"
	"                           its functions and lines are or are not named\n"
	TALLY_SELECT_USAGE
	"      --top N              at most N rows per table\n"
	"      --image-path DIR     look for images and modules' .ko files under DIR too (repeatable)\n"
	"      --debug-dir DIR      look for debug files under DIR first (repeatable; DIR/.build-id/..)\n"
	"      --mapfile FILE       find images and debug files by signature ('tally scan -o FILE')\n"
	"      --vmlinux FILE       the kernel image, for kernel source lines (build-id checked)\n"
	"      --debuginfod         fetch missing debug info from DEBUGINFOD_URLS (opt-in)\n"
	"      --debuginfod-timeout SECS  at most this long per image (default 10)\n"
	"      --json               JSON output (docs/report-json.md)\n"
	"      --html FILE          the whole report as one self-contained HTML page (docs/html.md)\n"
	"call graphs (databases recorded with -g):\n"
	"      --children           per function: inclusive %%, self %%, name (sorted by inclusive)\n"
	"      --callgraph          per function: its callers above, its callees below\n"
	"      --tree               top-down call tree\n"
	"      --callers SYM        the tree of SYM's callers\n"
	"      --callees SYM        the tree of SYM's callees\n"
	"      --percent-limit P    leave out tree nodes under P%% (default 0.5); with --html, fold\n"
	"                           flame-graph frames and drop table rows under P%% (default 0.1)\n"
	TALLY_DB_SELECT_USAGE;

enum { OPT_TOP = 256, OPT_JSON, OPT_IMGPATH, OPT_CHILDREN,
       OPT_CALLGRAPH, OPT_TREE, OPT_CALLERS, OPT_CALLEES, OPT_PLIMIT, OPT_NOINLINE, OPT_EXPLAIN, OPT_DEBUGDIR,
       OPT_MAPFILE, OPT_VMLINUX, OPT_DEBUGINFOD, OPT_DFDTIMEOUT, OPT_HTML };

static const struct option report_opts[] = {
	{ "input", required_argument, NULL, 'i' },
	{ "symbols", no_argument, NULL, 'f' },
	{ "lines", no_argument, NULL, 'l' },
	{ "no-inline", no_argument, NULL, OPT_NOINLINE },
	{ "explain", no_argument, NULL, OPT_EXPLAIN },
	{ "debug-dir", required_argument, NULL, OPT_DEBUGDIR },
	{ "mapfile", required_argument, NULL, OPT_MAPFILE },
	{ "vmlinux", required_argument, NULL, OPT_VMLINUX },
	{ "debuginfod", no_argument, NULL, OPT_DEBUGINFOD },
	{ "debuginfod-timeout", required_argument, NULL, OPT_DFDTIMEOUT },
	TALLY_SELECT_OPTIONS,
	{ "top", required_argument, NULL, OPT_TOP },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "image-path", required_argument, NULL, OPT_IMGPATH },
	{ "children", no_argument, NULL, OPT_CHILDREN },
	{ "callgraph", no_argument, NULL, OPT_CALLGRAPH },
	{ "tree", no_argument, NULL, OPT_TREE },
	{ "callers", required_argument, NULL, OPT_CALLERS },
	{ "callees", required_argument, NULL, OPT_CALLEES },
	{ "percent-limit", required_argument, NULL, OPT_PLIMIT },
	{ "html", required_argument, NULL, OPT_HTML },
	TALLY_DB_SELECT_LONGOPTS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct ropts {
	const char *input;
	struct tally_select sel;
	struct tally_report_opts r;
	bool json;
	const char **image_path;
	size_t nimage_path;
	bool plimit_set;
	bool no_inline, explain, debuginfod;
	const char **debug_dirs;
	size_t ndebug_dirs;
	const char *mapfile, *vmlinux;
	double dfd_timeout;
	const char *html;
};

/* The options into o: 0, or the exit status of a usage error (printed). */
static int parse_options(struct ropts *o, struct tally_db_select *dbsel, int argc, char **argv)
{
	size_t aimage_path = 0, adebug = 0;
	optind = 1;
	opterr = 0;
	int opt, sr;
	static const char shortopts[] = "i:flh";
	while ((opt = getopt_long(argc, argv, shortopts, report_opts, NULL)) != -1) {
		int es = tally_db_select_opt(dbsel, opt, optarg);
		if (es < 0)
			return tally_usage_error("report", "%s", tally_errmsg());
		if (es)
			continue;
		switch (opt) {
		case 'i': o->input = optarg; break;
		case 'f': o->r.symbols = true; break;
		case 'l': o->r.lines = true; break;
		case OPT_NOINLINE: o->no_inline = true; break;
		case OPT_EXPLAIN: o->explain = true; break;
		case OPT_DEBUGDIR:
			STRLIST_PUSH(o->debug_dirs, o->ndebug_dirs, adebug, optarg);
			break;
		case OPT_MAPFILE: o->mapfile = optarg; break;
		case OPT_VMLINUX: o->vmlinux = optarg; break;
		case OPT_DEBUGINFOD: o->debuginfod = true; break;
		case OPT_DFDTIMEOUT:
			if (tally_parse_duration(optarg, "--debuginfod-timeout", &o->dfd_timeout) || o->dfd_timeout <= 0 ||
			    o->dfd_timeout > 3600)
				return tally_usage_error("report", "invalid --debuginfod-timeout '%s': expected seconds from 0.1 to 3600", optarg);
			break;
		case OPT_TOP:
			if (tally_parse_u64(optarg, "--top", 1, UINT32_MAX, &o->r.top))
				return tally_usage_error("report", "%s", tally_errmsg());
			break;
		case OPT_JSON: o->json = true; break;
		case OPT_IMGPATH:
			STRLIST_PUSH(o->image_path, o->nimage_path, aimage_path, optarg);
			break;
		case OPT_CHILDREN: o->r.children = true; break;
		case OPT_CALLGRAPH: o->r.callgraph = true; break;
		case OPT_TREE: o->r.tree = true; break;
		case OPT_CALLERS: o->r.callers = optarg; break;
		case OPT_CALLEES: o->r.callees = optarg; break;
		case OPT_PLIMIT: {
			char *end;
			o->r.percent_limit = strtod(optarg, &end);
			if (end == optarg || *end || !(o->r.percent_limit >= 0 && o->r.percent_limit <= 100))
				return tally_usage_error("report", "invalid --percent-limit '%s': expected a percentage from 0 to 100", optarg);
			o->plimit_set = true;
			break;
		}
		case OPT_HTML: o->html = optarg; break;
		case 'h': fputs(report_usage, stdout); return -1;
		default:
			sr = tally_select_getopt(&o->sel, opt, optarg);
			if (sr < 0)
				return tally_usage_error("report", "%s", tally_errmsg());
			if (sr > 0)
				break;
			return tally_getopt_error("report", shortopts, argv);
		}
	}
	if (o->explain && optind < argc)
		o->r.explain_image = argv[optind++];
	if (optind < argc)
		return tally_usage_error("report", "unexpected argument '%s'", argv[optind]);
	if (o->html && (o->json || o->r.symbols || o->r.lines || o->explain || tally_report_is_cg(&o->r)))
		return tally_usage_error("report", "--html makes the whole report: leave out --json, --symbols, --lines, --explain and the call-graph views");
	return 0;
}

/* Writes the page, or the report (text, JSON or --explain) to stdout: 0 or 1. */
static int render(struct ropts *o, struct tally_db *db, struct tally_resolver *res)
{
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	int ret = 0;
	if (o->html) {
		struct tally_html_opts ho = { o->input, &o->sel, o->plimit_set ? o->r.percent_limit : TALLY_FLAME_DEFAULT_LIMIT,
					      TALLY_HTML_ANNOTATE, o->r.top };
		if (tally_html_write(o->html, db, res, &ho)) {
			tally_error("%s", tally_errmsg());
			ret = 1;
		}
		tally_report_image_warnings(db, res, tally_verbose, &w);
		tally_print_warnings(&w);
		return ret;
	}
	struct strbuf out = STRBUF_INIT;
	if (o->explain) {
		if (tally_report_explain(&out, db, res, &o->r, o->sel.ev_only >= 0 ? o->sel.ev_only : 0, o->json)) {
			tally_error("%s", tally_errmsg());
			ret = 1;
		}
	} else if (o->json) {
		tally_report_json(&out, db, res, &o->r, &w);
	} else {
		tally_report_text(&out, db, res, &o->r, &w);
	}
	tally_report_image_warnings(db, res, tally_verbose, &w);
	tally_print_warnings(&w);
	if (out.len)
		fwrite(out.buf, 1, out.len, stdout);
	if (fflush(stdout) != 0) {
		tally_error("cannot write the report: %s", strerror(errno));
		ret = 1;
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
	struct tally_imgmap map;
	bool have_map = false, have_db = false;
	struct tally_db db;
	struct tally_resolver *res = NULL;
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	int ret = parse_options(&o, &dbsel, argc, argv);
	if (ret) {
		ret = ret < 0 ? 0 : ret; /* --help */
		goto out;
	}
	o.r.input = o.input;
	ret = 1;
	if (o.html && tally_html_check_target(o.html)) {
		tally_error("%s", tally_errmsg());
		goto out;
	}
	if (o.mapfile) {
		if (tally_imgmap_load(&map, o.mapfile)) {
			tally_error("%s", tally_errmsg());
			goto out;
		}
		have_map = true;
	}
	if (o.vmlinux && access(o.vmlinux, R_OK) != 0) {
		tally_error("cannot read --vmlinux '%s': %s", o.vmlinux, strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < o.ndebug_dirs; i++)
		if (access(o.debug_dirs[i], X_OK) != 0)
			tally_warn("--debug-dir '%s': %s (searched anyway)", o.debug_dirs[i], strerror(errno));
	if (tally_db_open_select(&db, o.input, &dbsel)) {
		tally_error("%s", tally_errmsg());
		goto out;
	}
	have_db = true;
	int sc = tally_select_check(&o.sel, &db, o.input, &w);
	tally_print_warnings(&w);
	if (sc) {
		tally_error("%s", tally_errmsg());
		goto out;
	}
	bool cgmode = tally_report_is_cg(&o.r);
	if ((int)o.r.symbols + (int)o.r.lines + (int)o.explain + (int)o.r.children + (int)o.r.callgraph + (int)o.r.tree +
		    !!o.r.callers + !!o.r.callees > 1) {
		tally_error("give one of --symbols, --lines, --explain, --children, --callgraph, --tree, --callers, --callees");
		ret = 2;
		goto out;
	}
	if (cgmode && !db.has_stacks) {
		tally_error("'%s' has no call stacks (record with -g or --call-graph to get them)", o.input);
		goto out;
	}
	if (!o.plimit_set)
		o.r.percent_limit = (o.r.tree || o.r.callers || o.r.callees) ? 0.5 : 0;
	if (cgmode)
		tally_view_select(&db, &o.sel);
	tally_warn_jit(&db);
	struct tally_resolver_opts ro = {
		.image_path = o.image_path,
		.debug_dirs = o.debug_dirs,
		.map = have_map ? &map : NULL,
		.vmlinux = o.vmlinux,
		.debuginfod = o.debuginfod,
		.debuginfod_timeout = o.dfd_timeout,
		.no_inline = o.no_inline,
		.lines = o.r.lines || o.explain,
	};
	tally_resolver_new(&res, &db, &ro);
	ret = render(&o, &db, res);
out:
	tally_resolver_free(res);
	if (have_db)
		tally_db_release(&db);
	if (have_map)
		tally_imgmap_release(&map);
	free(o.image_path);
	free(o.debug_dirs);
	return ret;
}
