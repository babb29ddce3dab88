/* tally export: a database in the formats other tools read (docs/export.md).
 * To add a format: write its writer (include/tally/export.h), add one line to
 * the formats table below, document it in docs/export.md and docs/cli.md. */
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
#include "tally/export.h"
#include "tally/report.h"
#include "tally/select.h"
#include "tally/symbols.h"
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

static const struct format formats[] = {
	{ "pprof", 0, "tally.pb.gz", tally_export_pprof, "gzipped profile.proto for go tool pprof" },
	{ "callgrind", FMT_TEXT, "callgrind.out.tally", tally_export_callgrind,
	  "callgrind format for callgrind_annotate and KCachegrind (op2calltree)" },
	{ "gmon", FMT_ONE_EVENT | FMT_IMAGE, "gmon.out", tally_export_gmon,
	  "gmon.out of one image (--image, default the main program) for gprof (opgprof)" },
	{ "folded", FMT_STACKS | FMT_ONE_EVENT | FMT_TEXT, "tally.folded", tally_export_folded,
	  "folded stacks for flamegraph.pl, inferno, speedscope" },
	{ "svg", FMT_STACKS | FMT_ONE_EVENT, "tally.svg", tally_export_svg, "an interactive flame graph (zoom, search)" },
};

static const char export_usage[] =
	"usage: tally export [options] --format FORMAT\n"
	"\n"
	"  -i, --input DIR          database (default tally.db)\n"
	"  -o, --output FILE        where to write (default per format, below; - for stdout: text formats)\n"
	"      --format FORMAT      one of the formats below\n"
	TALLY_SELECT_USAGE
	"      --percent-limit P    cut stacks under P% of the samples to an [other] frame (default 0)\n"
	"      --image-path DIR     look for the images under DIR too (repeatable)\n"
	"      --comm-root          folded: the process's command name as the root frame\n"
	"      --per-process        callgrind: one file per process, FILE.PID (needs --per-pid)\n"
	TALLY_DB_SELECT_USAGE
	"formats (default output file):\n";

enum { OPT_FORMAT = 256, OPT_PLIMIT, OPT_IMGPATH, OPT_COMM_ROOT, OPT_PER_PROCESS };

static const struct option export_opts[] = {
	{ "input", required_argument, NULL, 'i' },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	TALLY_SELECT_OPTIONS,
	{ "percent-limit", required_argument, NULL, OPT_PLIMIT },
	{ "image-path", required_argument, NULL, OPT_IMGPATH },
	{ "comm-root", no_argument, NULL, OPT_COMM_ROOT },
	{ "per-process", no_argument, NULL, OPT_PER_PROCESS },
	TALLY_DB_SELECT_LONGOPTS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	fputs(export_usage, stdout);
	for (size_t i = 0; i < ARRAY_SIZE(formats); i++)
		printf("  %-10s %s (%s)\n", formats[i].name, formats[i].help, formats[i].default_output);
}

static char *format_names(void)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < ARRAY_SIZE(formats); i++)
		strbuf_addf(&sb, "%s%s", i ? ", " : "", formats[i].name);
	return strbuf_detach(&sb);
}

/* Writes every output file atomically; on a failure removes those already written. */
static int write_outputs(const char *output, const struct tally_export_out *out)
{
	if (!strcmp(output, "-")) {
		for (size_t i = 0; i < out->n; i++)
			fwrite(out->files[i].data.buf, 1, out->files[i].data.len, stdout);
		if (fflush(stdout) != 0)
			return tally_seterr(-errno, "cannot write the export to stdout: %s", strerror(errno));
		return 0;
	}
	for (size_t i = 0; i < out->n; i++) {
		struct strbuf path = STRBUF_INIT;
		strbuf_addf(&path, "%s%s", output, out->files[i].suffix);
		int r = tally_write_file_atomic(path.buf, out->files[i].data.buf ? out->files[i].data.buf : "",
						out->files[i].data.len);
		strbuf_release(&path);
		if (r < 0) {
			for (size_t k = 0; k < i; k++) {
				strbuf_addf(&path, "%s%s", output, out->files[k].suffix);
				unlink(path.buf);
				strbuf_reset(&path);
			}
			strbuf_release(&path);
			return r;
		}
	}
	return 0;
}

int cmd_export(int argc, char **argv)
{
	const char *input = "tally.db", *output = NULL, *fmtname = NULL;
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_export x = { 0 };
	const char **image_path = NULL;
	size_t nimage_path = 0, aimage_path = 0;
	int ret = 0, sr, opt;
	optind = 1;
	opterr = 0;
	struct tally_db_select epochs = { 0 };
	static const char shortopts[] = "i:o:h";
	while ((opt = getopt_long(argc, argv, shortopts, export_opts, NULL)) != -1) {
		int es = tally_db_select_opt(&epochs, opt, optarg);
		if (es < 0) {
			free(image_path);
			return tally_usage_error("export", "%s", tally_errmsg());
		}
		if (es)
			continue;
		switch (opt) {
		case 'i': input = optarg; break;
		case 'o': output = optarg; break;
		case OPT_FORMAT: fmtname = optarg; break;
		case OPT_PLIMIT: {
			char *end;
			x.percent_limit = strtod(optarg, &end);
			if (end == optarg || *end || !(x.percent_limit >= 0 && x.percent_limit <= 100)) {
				free(image_path);
				return tally_usage_error("export", "invalid --percent-limit '%s': expected a percentage from 0 to 100", optarg);
			}
			break;
		}
		case OPT_IMGPATH:
			STRLIST_PUSH(image_path, nimage_path, aimage_path, optarg);
			break;
		case OPT_COMM_ROOT: x.comm_root = true; break;
		case OPT_PER_PROCESS: x.per_process = true; break;
		case 'h': usage(); free(image_path); return 0;
		default:
			sr = tally_select_getopt(&sel, opt, optarg);
			if (sr > 0)
				break;
			free(image_path);
			if (sr < 0)
				return tally_usage_error("export", "%s", tally_errmsg());
			return tally_getopt_error("export", shortopts, argv);
		}
	}
	if (optind < argc) {
		free(image_path);
		return tally_usage_error("export", "unexpected argument '%s'", argv[optind]);
	}
	char *names = format_names();
	const struct format *fmt = NULL;
	for (size_t i = 0; fmtname && i < ARRAY_SIZE(formats); i++)
		if (!strcmp(formats[i].name, fmtname))
			fmt = &formats[i];
	if (!fmt) {
		if (fmtname)
			tally_error("unknown export format '%s' (known formats: %s)", fmtname, names);
		else
			tally_error("give --format (known formats: %s)", names);
		free(names);
		free(image_path);
		return 2;
	}
	free(names);
	if (!output)
		output = fmt->default_output;
	if (!strcmp(output, "-") && !(fmt->flags & FMT_TEXT)) {
		free(image_path);
		tally_error("the %s format is binary: give -o FILE, not stdout", fmt->name);
		return 2;
	}
	if (x.per_process && strcmp(fmt->name, "callgrind")) {
		free(image_path);
		tally_error("--per-process is for --format callgrind only");
		return 2;
	}
	if (x.per_process && !strcmp(output, "-")) {
		free(image_path);
		tally_error("--per-process writes one file per process: give -o PREFIX, not stdout");
		return 2;
	}
	if (x.comm_root && strcmp(fmt->name, "folded")) {
		free(image_path);
		tally_error("--comm-root is for --format folded only");
		return 2;
	}

	struct tally_db db;
	if (tally_db_open_select(&db, input, &epochs)) {
		tally_error("%s", tally_errmsg());
		free(image_path);
		return 1;
	}
	struct tally_resolver *res = NULL;
	struct tally_export_out out = { 0 };
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	int *events = xmalloc((size_t)(db.nevents + 1) * sizeof(int));
	if (sel.pid && db.per_pid) {
		/* one line: the empty selection is the error (report only warns) */
		bool found = false;
		for (size_t i = 0; i < db.nentries && !found; i++)
			found = db.entries[i].pid == sel.pid;
		if (!found) {
			tally_error("nothing to export: '%s' has no samples in the selection (none of pid %d)", input, sel.pid);
			ret = 1;
			goto out;
		}
	}
	int sc = tally_select_check(&sel, &db, input, &w);
	tally_print_warnings(&w);
	if (sc) {
		tally_error("%s", tally_errmsg());
		ret = 1;
		goto out;
	}
	if ((fmt->flags & FMT_STACKS) && !db.has_stacks) {
		tally_error("'%s' has no call stacks, which the %s format needs (record with -g or --call-graph to get them)",
			    input, fmt->name);
		ret = 1;
		goto out;
	}
	tally_export_select(&db, &sel, !(fmt->flags & FMT_IMAGE));
	for (int e = 0; e < db.nevents; e++) {
		if (!tally_select_event(&sel, e))
			continue;
		if ((fmt->flags & FMT_ONE_EVENT) && x.nevents)
			break;
		events[x.nevents++] = e;
	}
	uint64_t total = 0;
	for (int i = 0; i < x.nevents; i++)
		total += tally_export_total(&db, events[i], (fmt->flags & FMT_STACKS) != 0);
	if (!total) {
		tally_error("nothing to export: '%s' has no samples%s", input,
			    sel.image || sel.pid || sel.comm || sel.event || sel.excl ? " in the selection" : "");
		ret = 1;
		goto out;
	}
	x.db = &db;
	x.input = input;
	x.events = events;
	x.image = sel.image;
	struct tally_resolver_opts ro = { .image_path = image_path };
	tally_resolver_new(&res, &db, &ro);
	x.res = res;
	int wr = fmt->write(&x, &out);
	tally_print_warnings(&out.warnings);
	if (wr < 0 || write_outputs(output, &out) < 0) {
		tally_error("%s", tally_errmsg());
		ret = 1;
		goto out;
	}
	if (strcmp(output, "-")) {
		uint64_t n = 0;
		for (size_t i = 0; i < out.n; i++)
			n += out.files[i].data.len;
		if (out.n == 1)
			fprintf(stderr, "tally: wrote '%s%s' (%s, %" PRIu64 " bytes)\n", output, out.files[0].suffix, fmt->name, n);
		else
			fprintf(stderr, "tally: wrote %zu files '%s.*' (%s, %" PRIu64 " bytes)\n", out.n, output, fmt->name, n);
	}
	/* the same warnings as report: an image whose file is wrong or damaged */
	tally_report_image_warnings(&db, res, tally_verbose, &w);
	tally_print_warnings(&w);
out:
	tally_export_out_release(&out);
	tally_resolver_free(res);
	free(events);
	tally_db_release(&db);
	free(image_path);
	return ret;
}
