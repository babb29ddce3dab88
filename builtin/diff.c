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

/* The exit status when something grew by more than --fail-above. */
#define EXIT_GREW 3

struct dopts {
	bool symbols, lines, children, absolute, json;
	const char *html, *format, *output;
	double fail_above;
	bool fail_set;
	uint64_t top;
	double percent_limit;
	bool plimit_set;
};

enum { OPT_FAIL_ABOVE, OPT_PLIMIT };

static int parse_pct(const char *arg, const char *what, double max, double *out)
{
	char *end;
	double v = strtod(arg, &end);
	if (end == arg || *end || !(v >= 0 && v <= max))
		return tally_seterr(-EINVAL, "invalid %s '%s': expected a percentage from 0 to %g", what, arg, max);
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
	TALLY_OPT_FLAG('f', "symbols",
		"per function, self samples (the default)",
		struct dopts, symbols),
	TALLY_OPT_FLAG('l', "lines", "per source line (file:line, function)", struct dopts, lines),
	TALLY_OPT_FLAG(0, "children",
		"per function, inclusive samples (needs call stacks)",
		struct dopts, children),
	TALLY_OPT_FLAG(0, "absolute",
		"compare sample counts, not shares of each side's total (exports:\nthe base is not scaled to the new total)",
		struct dopts, absolute),
	TALLY_OPT_FLAG(0, "json", "JSON output (docs/report-json.md)", struct dopts, json),
	TALLY_OPT_STRING(0, "html", "FILE",
		"the diff as one HTML page, with a differential flame graph",
		struct dopts, html),
	TALLY_OPT_STRING(0, "format", "FORMAT",
		"pprof (FILE and its base for go tool pprof -diff_base), folded\n(STACK BASE NEW lines, difffolded.pl's) or svg (a differential flame graph)",
		struct dopts, format),
	TALLY_OPT_STRING('o', "output", "FILE",
		"where --format writes (- for stdout: folded)",
		struct dopts, output),
	TALLY_OPT(0, "fail-above", TALLY_ARG_REQUIRED, "PCT",
	  "exit with status 3, naming them, when functions (lines) grew by more\nthan PCT points of the samples; status 2 when a side has code it\ncannot name", OPT_FAIL_ABOVE),
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
	.footer = "BASE and NEW are databases (a daemon's too: --epoch, --since, --until select\n"
		  "in both), bundles, archives or merges; the selection options apply to both.\n"
		  "Functions are matched by image and function name, so a rebuilt program diffs\n"
		  "cleanly: the base's binary is named from the build-id cache that 'tally record'\n"
		  "fills (or an archive). Exit status: 0, 1 on an error, 2 on a usage error or when\n"
		  "--fail-above meets code a side cannot name, 3 when a row grew past --fail-above.\n",
	.groups = { &diff_group, &tally_select_group, &tally_symopts_group, &tally_db_select_group },
};

/* One side: the database, its selection (its own copy: event indices differ)
 * and its resolver. */
struct side {
	const char *input;
	struct tally_db db;
	bool open;
	struct tally_select sel;
	struct tally_resolver *res;
	int ev;
	struct tally_cg cg;
	bool have_cg;
};

static void side_release(struct side *s)
{
	if (s->have_cg)
		tally_cg_release(&s->cg);
	tally_resolver_free(s->res);
	if (s->open)
		tally_db_release(&s->db);
}

static void side_cg(struct side *s)
{
	if (!s->have_cg) {
		tally_cg_build(&s->cg, &s->db, s->res, s->ev, NULL, NULL);
		s->have_cg = true;
	}
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
	tally_error("'%s' (%s) and '%s' (%s) have no event in common: nothing to compare", base->input, a.buf,
		    new_->input, b.buf);
	strbuf_release(&a);
	strbuf_release(&b);
	return 1;
}

/* FILE's base: x.pb.gz -> x.base.pb.gz, else FILE.base. */
static char *base_name(const char *out)
{
	size_t n = strlen(out);
	struct strbuf sb = STRBUF_INIT;
	if (n > 6 && !strcmp(out + n - 6, ".pb.gz"))
		strbuf_addf(&sb, "%.*s.base.pb.gz", (int)(n - 6), out);
	else
		strbuf_addf(&sb, "%s.base", out);
	return strbuf_detach(&sb);
}

static int write_pprof(struct side *base, struct side *new_, const struct dopts *o)
{
	if (!o->absolute)
		tally_diff_normalize(&base->db, base->ev, &new_->db, new_->ev);
	struct tally_export_out outs[2];
	memset(outs, 0, sizeof(outs));
	struct side *sides[2] = { base, new_ };
	int r = 0;
	for (int i = 0; i < 2 && !r; i++) {
		struct tally_export x = { 0 };
		x.db = &sides[i]->db;
		x.res = sides[i]->res;
		x.input = sides[i]->input;
		x.events = &sides[i]->ev;
		x.nevents = 1;
		r = tally_export_pprof(&x, &outs[i]);
		tally_print_warnings(&outs[i].warnings);
	}
	char *bname = base_name(o->output);
	if (!r)
		r = tally_write_file_atomic(bname, outs[0].files[0].data.buf, outs[0].files[0].data.len);
	if (!r) {
		r = tally_write_file_atomic(o->output, outs[1].files[0].data.buf, outs[1].files[0].data.len);
		if (r)
			unlink(bname);
	}
	if (r)
		tally_error_last();
	else
		tally_say("wrote '%s' (new) and '%s' (base%s): go tool pprof -diff_base '%s' '%s'", o->output,
			bname, o->absolute ? "" : ", scaled to the new total", bname, o->output);
	free(bname);
	tally_export_out_release(&outs[0]);
	tally_export_out_release(&outs[1]);
	return r ? 1 : 0;
}

static int write_text_out(const char *output, const char *what, struct strbuf *sb)
{
	int r;
	if (!strcmp(output, "-")) {
		r = fwrite(sb->buf ? sb->buf : "", 1, sb->len, stdout) == sb->len && fflush(stdout) == 0 ? 0 : -EIO;
		if (r)
			tally_seterr(r, "cannot write to standard output");
	} else {
		r = tally_write_file_atomic(output, sb->buf ? sb->buf : "", sb->len);
	}
	if (r) {
		tally_error_last();
		return 1;
	}
	if (strcmp(output, "-"))
		tally_say("wrote '%s' (%s, %zu bytes)", output, what, sb->len);
	return 0;
}

/* A gate that could not name a side's code neither passes nor fails: one
 * line naming the image (its share, why) and the fixes, status 2; else 0. */
static int check_named(const struct tally_diff *d, const struct side *base, const struct side *new_)
{
	if (!d->nunnamed)
		return 0;
	const struct tally_diff_unnamed *u = &d->unnamed[0];
	const struct side *s = u->new_side ? new_ : base;
	const struct tally_db_image *di = &s->db.images[u->image];
	uint64_t total = u->new_side ? d->new_total : d->base_total;
	struct strbuf why = STRBUF_INIT;
	if (tally_resolver_mismatch(s->res, u->image) && strcmp(di->id_kind, "build-id") && strcmp(di->id_kind, "xxh64"))
		strbuf_addf(&why, "which file ran is unknown (%s)", di->id_kind);
	else if (tally_resolver_mismatch(s->res, u->image))
		strbuf_addf(&why, "'%s' is another build than the one recorded, %s %s, and no copy of that was found", di->path,
			    di->id_kind, di->id);
	else if (di->path[0] == '/' && access(di->path, F_OK) != 0 && errno == ENOENT)
		strbuf_addf(&why, "'%s' is gone, and no copy of it was found", di->path);
	else
		strbuf_addf(&why, "%s", u->why ? u->why : "its file was not found");
	size_t same = 0;
	bool other = false;
	for (size_t i = 1; i < d->nunnamed; i++) {
		same += d->unnamed[i].new_side == u->new_side;
		other = other || d->unnamed[i].new_side != u->new_side;
	}
	if (same)
		strbuf_addf(&why, "; and %zu more image%s there", same, same == 1 ? "" : "s");
	if (other)
		strbuf_addf(&why, "; '%s' has such code too", u->new_side ? base->input : new_->input);
	tally_error("--fail-above cannot judge '%s': %.2f%% of its samples are in image '%s', whose code it cannot name (%s): "
		    "record with the build-id cache on ('tally cache'), or 'tally archive' the base before rebuilding, "
		    "or give the file with --image-path",
		    s->input, tally_view_pct(u->value, total), u->name, why.buf);
	strbuf_release(&why);
	return 2;
}

/* Status 3 and one line naming what grew past --fail-above; 0 otherwise. */
static int check_growth(const struct tally_diff *d, double limit)
{
	size_t n;
	const struct tally_diff_row **g = tally_diff_grew(d, limit, &n);
	if (!n) {
		free(g);
		return 0;
	}
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < n && i < 5; i++) {
		const struct tally_diff_row *r = g[i];
		strbuf_addf(&sb, "%s'%s' in '%s'", i ? ", " : "", r->name, r->image);
		if (d->view == TALLY_DIFF_LINES && r->file)
			strbuf_addf(&sb, " at %s:%d", tally_basename(r->file), r->line);
		strbuf_addf(&sb, " %+.2f", r->points);
	}
	if (n > 5)
		strbuf_addf(&sb, " and %zu more", n - 5);
	tally_error("%zu %s grew by more than %g points (--fail-above): %s", n,
		    d->view == TALLY_DIFF_LINES ? (n == 1 ? "line" : "lines") : (n == 1 ? "function" : "functions"), limit,
		    sb.buf);
	strbuf_release(&sb);
	free(g);
	return EXIT_GREW;
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
		ret = tally_usage_error("diff", argc - first < 2 ? "give two databases: BASE and NEW" : "unexpected argument '%s'",
					argv[first + 2 < argc ? first + 2 : first]);
		goto out;
	}
	base->input = argv[first];
	new_->input = argv[first + 1];
	if ((int)o.symbols + (int)o.lines + (int)o.children > 1) {
		ret = tally_usage_error("diff", "give one of --symbols, --lines, --children");
		goto out;
	}
	if ((int)o.json + !!o.html + !!o.format > 1) {
		ret = tally_usage_error("diff", "give one of --json, --html, --format");
		goto out;
	}
	static const char *const formats[] = { "pprof", "folded", "svg" };
	bool fmt_ok = !o.format;
	for (size_t i = 0; i < ARRAY_SIZE(formats) && !fmt_ok; i++)
		fmt_ok = !strcmp(o.format, formats[i]);
	if (!fmt_ok) {
		tally_error("unknown diff format '%s' (known formats: pprof, folded, svg)", o.format);
		goto out;
	}
	if (o.output && !o.format) {
		ret = tally_usage_error("diff", "-o is where --format writes: give --format too (or --html FILE)");
		goto out;
	}
	if (o.format && !o.output)
		o.output = !strcmp(o.format, "pprof") ? "diff.pb.gz" : !strcmp(o.format, "svg") ? "diff.svg" : "diff.folded";
	if (o.format && !strcmp(o.output, "-") && strcmp(o.format, "folded")) {
		ret = tally_usage_error("diff", "the %s format goes to files: give -o FILE, not stdout", o.format);
		goto out;
	}
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
		tally_error("'%s' has no call stacks, which %s needs (record both with -g or --call-graph)",
			    base->db.has_stacks ? new_->input : base->input, o.children ? "--children" : "a flame graph or folded stacks");
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		tally_export_select(&sides[i].db, &sides[i].sel, true);
		tally_warn_jit(&sides[i].db);
		tally_resolver_new(&sides[i].res, &sides[i].db, &ro);
	}
	struct tally_diff_side ds[2];
	for (int i = 0; i < 2; i++)
		ds[i] = (struct tally_diff_side){ &sides[i].db, sides[i].res, &sides[i].sel, sides[i].ev, sides[i].input };
	enum tally_diff_view view = o.lines ? TALLY_DIFF_LINES : o.children ? TALLY_DIFF_CHILDREN : TALLY_DIFF_SYMBOLS;
	tally_diff_build(&d, &ds[0], &ds[1], view, o.absolute);
	have_diff = true;
	if (!d.base_total || !d.new_total) {
		tally_error("nothing to compare: '%s' has no '%s' samples%s", d.base_total ? new_->input : base->input, d.event,
			    sel.image || sel.pid || sel.comm || sel.excl || sel.nlabels ? " in the selection" : "");
		goto out;
	}
	double limit = o.plimit_set ? o.percent_limit : TALLY_FLAME_DEFAULT_LIMIT;
	int wr = 0;
	if (o.html) {
		struct strbuf page = STRBUF_INIT;
		if (stacks) {
			side_cg(base);
			side_cg(new_);
		}
		struct tally_html_diff_opts ho = { limit, o.top };
		tally_html_diff(&page, &d, stacks ? &base->cg : NULL, &base->db, stacks ? &new_->cg : NULL, &new_->db, &ho);
		if (tally_write_file_atomic(o.html, page.buf, page.len)) {
			tally_error_last();
			wr = 1;
		} else {
			tally_say("wrote '%s' (%zu bytes)", o.html, page.len);
		}
		strbuf_release(&page);
	} else if (o.format && !strcmp(o.format, "pprof")) {
		wr = write_pprof(base, new_, &o);
	} else if (o.format) {
		side_cg(base);
		side_cg(new_);
		struct strbuf sb = STRBUF_INIT;
		if (!strcmp(o.format, "folded")) {
			tally_diff_folded(&sb, &base->cg, &base->db, &new_->cg, &new_->db, !o.absolute);
		} else {
			struct strbuf title = STRBUF_INIT, sub = STRBUF_INIT;
			strbuf_addf(&title, "Differential flame graph: %s -> %s", base->input, new_->input);
			strbuf_addf(&sub, "%s, %" PRIu64 " samples (base %" PRIu64 ")", new_->db.events[new_->ev], new_->cg.total,
				    base->cg.total);
			struct tally_flame_svg_opts fo = { title.buf, sub.buf, new_->db.events[new_->ev], NULL, true, 0, NULL };
			tally_flame_diff_svg(&sb, &base->cg, &base->db, &new_->cg, &new_->db, limit, &fo);
			strbuf_release(&title);
			strbuf_release(&sub);
		}
		wr = write_text_out(o.output, o.format, &sb);
		strbuf_release(&sb);
	} else {
		struct strbuf out = STRBUF_INIT;
		if (o.json)
			tally_diff_json(&out, &d, o.top);
		else
			tally_diff_text(&out, &d, o.top);
		wr = write_text_out("-", "diff", &out);
		strbuf_release(&out);
	}
	/* the images a gate refuses to judge are said once, by its error */
	bool gate = !wr && o.fail_set;
	for (int i = 0; i < 2; i++) {
		bool *skip = xcalloc(sides[i].db.nimages + 1, sizeof(bool));
		for (size_t k = 0; gate && k < d.nunnamed; k++)
			if (d.unnamed[k].new_side == (i == 1))
				skip[d.unnamed[k].image] = true;
		tally_report_image_warnings_skip(&sides[i].db, sides[i].res, tally_verbose, skip, &w);
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
