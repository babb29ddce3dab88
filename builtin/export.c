/* tally export: a database in the formats other tools read (docs/export.md).
 * To add a format: write its writer (include/tally/export.h), add one line to
 * the formats table below, document it in docs/export.md and docs/cli.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/export.h"
#include "tally/report.h"
#include "tally/select.h"
#include "tally/symbols.h"
#include "tally/symopts.h"
#include "tally/util.h"

enum {
	FMT_STACKS = 1,   /* needs call stacks (record with -g) */
	FMT_ONE_EVENT = 2, /* one event: --event, else the first recorded */
	FMT_TEXT = 4,     /* text: may go to stdout with -o - */
	FMT_IMAGE = 8,    /* of one image (--image): its stacks are not selected by leaf image */
};

struct format {
	const char *name;
	unsigned flags;
	const char *default_output;
	tally_export_fn write;
	const char *help;
};

/* name, flags, default output, writer, help: the formats table and the help's list */
#define EXPORT_FORMATS(X)                                                                        \
	X("pprof", 0, "tally.pb.gz", tally_export_pprof,                                         \
	  "gzipped profile.proto for go tool pprof")                                             \
	X("callgrind", FMT_TEXT, "callgrind.out.tally", tally_export_callgrind,                  \
	  "callgrind format for callgrind_annotate and KCachegrind (op2calltree)")               \
	X("gmon", FMT_ONE_EVENT | FMT_IMAGE, "gmon.out", tally_export_gmon,                      \
	  "gmon.out of one image (--image, default the main program) for gprof (opgprof)")       \
	X("folded", FMT_STACKS | FMT_ONE_EVENT | FMT_TEXT, "tally.folded", tally_export_folded,  \
	  "folded stacks for flamegraph.pl, inferno, speedscope")                                \
	X("svg", FMT_STACKS | FMT_ONE_EVENT, "tally.svg", tally_export_svg,                      \
	  "an interactive flame graph (zoom, search)")                                           \
	X("speedscope", FMT_STACKS | FMT_TEXT, "tally.speedscope.json", tally_export_speedscope, \
	  "speedscope's JSON: a profile per event and process")

#define FORMAT_ROW(name, flags, out, fn, help) { name, flags, out, fn, help },
#define FORMAT_HELP(name, flags, out, fn, help) "  " name ": " help " (" out ")\n"

static const struct format formats[] = { EXPORT_FORMATS(FORMAT_ROW) };

struct expopts {
	const char *input, *output, *fmtname;
	bool wall;
	struct tally_export x;
};

enum { OPT_PLIMIT };

static int export_handle(void *ctx, int code, const char *arg)
{
	struct expopts *o = ctx;
	switch (code) {
	case OPT_PLIMIT: {
		char *end;
		o->x.percent_limit = strtod(arg, &end);
		if (end == arg || *end || !(o->x.percent_limit >= 0 && o->x.percent_limit <= 100))
			return tally_seterr(
				-EINVAL,
				"invalid --percent-limit '%s': expected a percentage from 0 to 100",
				arg);
		break;
	}
	}
	return 0;
}

static const struct tally_option export_options[] = {
	TALLY_OPT_STRING('i', "input", "DIR", "database (default tally.db)", struct expopts, input),
	TALLY_OPT_STRING('o', "output", "FILE",
			 "where to write (default per format, below; - for stdout: text formats)",
			 struct expopts, output),
	TALLY_OPT_STRING(0, "format", "FORMAT", "one of the formats below", struct expopts,
			 fmtname),
	TALLY_OPT(0, "percent-limit", TALLY_ARG_REQUIRED, "P",
		  "cut stacks under P% of the samples to an [other] frame (default 0)", OPT_PLIMIT),
	TALLY_OPT_FLAG(0, "wall",
		       "on-CPU and off-CPU time in one event, 'wall' (a --off-cpu recording)",
		       struct expopts, wall),
	TALLY_OPT_FLAG(0, "comm-root", "folded: the process's command name as the root frame",
		       struct expopts, x.comm_root),
	TALLY_OPT_FLAG(0, "per-process",
		       "callgrind: one file per process, FILE.PID (needs --per-pid)",
		       struct expopts, x.per_process),
	TALLY_OPTION_END,
};
static const struct tally_optgroup export_group = { NULL, export_options, export_handle };

const struct tally_cmdopts export_cmdopts = {
	.name = "export",
	.summary = "write a profile for pprof, KCachegrind, gprof or flame graphs",
	.usage = "[options] --format FORMAT",
	.footer = "formats (default output file):\n" EXPORT_FORMATS(FORMAT_HELP),
	.groups = { &export_group, &tally_select_group, &tally_symopts_group,
		    &tally_db_select_group },
};

static char *format_names(void)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < ARRAY_SIZE(formats); i++)
		strbuf_addf(&sb, "%s%s", i ? ", " : "", formats[i].name);
	return strbuf_detach(&sb);
}

int cmd_export(int argc, char **argv)
{
	struct expopts o = { .input = "tally.db" };
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_symopts so;
	tally_symopts_init(&so);
	struct tally_db_select epochs = { 0 };
	void *ctx[] = { &o, &sel, &so, &epochs };
	int first, ret = tally_cmd_options(&export_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0) {
		tally_symopts_release(&so);
		return ret;
	}
	ret = 0;
	const char *input = o.input, *output = o.output, *fmtname = o.fmtname;
	struct tally_export x = o.x;
	if (first < argc) {
		tally_symopts_release(&so);
		return tally_usage_error("export", "unexpected argument '%s'", argv[first]);
	}
	char *names = format_names();
	const struct format *fmt = NULL;
	for (size_t i = 0; fmtname && i < ARRAY_SIZE(formats); i++)
		if (!strcmp(formats[i].name, fmtname))
			fmt = &formats[i];
	if (!fmt) {
		if (fmtname)
			tally_error("unknown export format '%s' (known formats: %s)", fmtname,
				    names);
		else
			tally_error("give --format (known formats: %s)", names);
		free(names);
		tally_symopts_release(&so);
		return 2;
	}
	free(names);
	if (!output)
		output = fmt->default_output;
	if (!strcmp(output, "-") && !(fmt->flags & FMT_TEXT)) {
		tally_symopts_release(&so);
		tally_error("the %s format is binary: give -o FILE, not stdout", fmt->name);
		return 2;
	}
	if (x.per_process && strcmp(fmt->name, "callgrind")) {
		tally_symopts_release(&so);
		tally_error("--per-process is for --format callgrind only");
		return 2;
	}
	if (x.per_process && !strcmp(output, "-")) {
		tally_symopts_release(&so);
		tally_error(
			"--per-process writes one file per process: give -o PREFIX, not stdout");
		return 2;
	}
	if (x.comm_root && strcmp(fmt->name, "folded")) {
		tally_symopts_release(&so);
		tally_error("--comm-root is for --format folded only");
		return 2;
	}

	struct tally_db db;
	if (tally_db_open_select(&db, input, &epochs)) {
		tally_error_last();
		tally_symopts_release(&so);
		return 1;
	}
	tally_db_names_apart(&db);
	struct tally_resolver *res = NULL;
	struct tally_export_out out = { 0 };
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	int *events = xmalloc((size_t)(db.nevents + 1) * sizeof(int));
	if (o.wall) {
		/* one column of time: the on-CPU samples and the off-CPU waits (docs/offcpu.md) */
		if (tally_db_wall(&db)) {
			tally_error_last();
			ret = 1;
			goto out;
		}
		if (!sel.event)
			sel.event = "wall";
	}
	int sc = tally_select_check(&sel, &db, input, &w);
	if (!sc && tally_select_nonempty(&sel, &db, input)) {
		/* one line: the filter that matched nothing, and what there is */
		tally_warnings_release(&w);
		tally_error("nothing to export: %s", tally_errmsg());
		ret = 1;
		goto out;
	}
	tally_print_warnings(&w);
	if (sc) {
		tally_error_last();
		ret = 1;
		goto out;
	}
	if ((fmt->flags & FMT_STACKS) && !db.has_stacks) {
		tally_error(
			"'%s' has no call stacks, which the %s format needs (record with -g or --call-graph to get them)",
			input, fmt->name);
		ret = 1;
		goto out;
	}
	tally_select_apply(&db, &sel, !(fmt->flags & FMT_IMAGE));
	for (int e = 0; e < db.nevents; e++) {
		if (!tally_select_event(&sel, e))
			continue;
		if ((fmt->flags & FMT_ONE_EVENT) && x.nevents)
			break;
		events[x.nevents++] = e;
	}
	uint64_t total = 0;
	for (int i = 0; i < x.nevents; i++)
		total += tally_select_total(&db, events[i], (fmt->flags & FMT_STACKS) != 0);
	if (!total) {
		tally_error("nothing to export: '%s' has no samples%s", input,
			    sel.image || sel.pid || sel.comm || sel.event || sel.excl
				    ? " in the selection"
				    : "");
		ret = 1;
		goto out;
	}
	x.db = &db;
	x.input = input;
	x.events = events;
	x.image = sel.image;
	struct tally_resolver_opts ro = { 0 };
	if (tally_symopts_ready(&so, &ro)) {
		ret = 1;
		goto out;
	}
	/* on a terminal: what takes long (symbols, then the writing) */
	tally_progress_attach(&ro);
	tally_resolver_new(&res, &db, &ro);
	x.res = res;
	struct tally_export_sink sink;
	tally_export_sink_attach(&sink, output, &out);
	char phase[64];
	snprintf(phase, sizeof(phase), "writing the %s export", fmt->name);
	tally_progress_say(phase);
	int wr = fmt->write(&x, &out);
	tally_progress_done();
	tally_print_warnings(&out.warnings);
	if (wr < 0 || tally_export_sink_finish(&sink) < 0) {
		tally_export_sink_release(&sink);
		tally_error_last();
		ret = 1;
		goto out;
	}
	tally_export_sink_release(&sink);
	if (strcmp(output, "-")) {
		uint64_t n = 0;
		for (size_t i = 0; i < out.n; i++)
			n += out.files[i].put + out.files[i].data.len;
		if (out.n == 1)
			tally_say("wrote '%s%s' (%s, %" PRIu64 " bytes%s%s)", output,
				  out.files[0].suffix, fmt->name, n, out.note ? "; " : "",
				  out.note ? out.note : "");
		else
			tally_say("wrote %zu files '%s.*' (%s, %" PRIu64 " bytes)", out.n, output,
				  fmt->name, n);
	}
	/* the same warnings as report: an image whose file is wrong or damaged */
	tally_report_image_warnings(&db, res, tally_verbose, &w);
	tally_print_warnings(&w);
out:
	tally_progress_done();
	tally_export_out_release(&out);
	tally_resolver_free(res);
	free(events);
	tally_db_release(&db);
	tally_symopts_release(&so);
	return ret;
}
