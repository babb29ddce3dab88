/* tally annotate (opannotate): one function's source with samples per line,
 * and with --asm its instructions with samples and the lines they come from. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/annotate.h"
#include "tally/db.h"
#include "tally/report.h"
#include "tally/symbols.h"
#include "tally/symopts.h"
#include "tally/util.h"
#include "tally/view.h"

struct annopts {
	const char *input, *image, *event;
	bool want_asm, json, samples;
	const char **srcdirs;
	size_t nsrc, asrc;
};

/* --source-dir is a list: the handler's; the rest are one row each */
enum { OPT_SRCDIR = 1 };

static int annotate_handle(void *ctx, int code, const char *arg)
{
	struct annopts *o = ctx;
	if (code == OPT_SRCDIR)
		STRLIST_PUSH(o->srcdirs, o->nsrc, o->asrc, arg);
	return 0;
}

static const struct tally_option annotate_options[] = {
	TALLY_OPT_STRING('i', "input", "DIR", "database (default tally.db)", struct annopts, input),
	TALLY_OPT_FLAG(0, "asm", "interleave the disassembly: samples per instruction",
		       struct annopts, want_asm),
	TALLY_OPT_STRING(0, "image", "NAME",
			 "the image (file name or path) when SYMBOL is in several", struct annopts,
			 image),
	TALLY_OPT_STRING(0, "event", "NAME", "this event (default: the database's first)",
			 struct annopts, event),
	TALLY_OPT(
		0, "source-dir", TALLY_ARG_REQUIRED, "DIR",
		"look for source files under DIR too (repeatable); OLD=NEW\nreplaces a leading OLD of the recorded path with NEW",
		OPT_SRCDIR),
	TALLY_OPT_FLAG(0, "json", "JSON output (docs/cli.md)", struct annopts, json),
	TALLY_OPT_FLAG(
		0, "samples",
		"raw sample counts instead of the default, time or events with each\nsample weighted by its period (as perf's)",
		struct annopts, samples),
	TALLY_OPTION_END,
};
static const struct tally_optgroup annotate_group = { NULL, annotate_options, annotate_handle };

const struct tally_cmdopts annotate_cmdopts = {
	.name = "annotate",
	.summary = "one function's source and instructions with their samples (opannotate)",
	.usage = "[options] SYMBOL",
	.groups = { &annotate_group, &tally_symopts_group },
};

int cmd_annotate(int argc, char **argv)
{
	struct annopts o = { .input = "tally.db" };
	struct tally_symopts so;
	tally_symopts_init(&so);
	void *ctx[] = { &o, &so };
	struct tally_resolver *res = NULL;
	struct tally_db db;
	bool have_db = false;
	int first, ret = tally_cmd_options(&annotate_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 0;
	const char *input = o.input, *image = o.image, *event = o.event;
	bool want_asm = o.want_asm, json = o.json;
	const char **srcdirs = o.srcdirs;
	if (first >= argc || argc - first > 1) {
		if (first >= argc)
			ret = tally_usage_error(
				"annotate",
				"name a function to annotate, as 'tally report --symbols' lists them");
		else
			ret = tally_usage_error(
				"annotate", "unexpected argument '%s': annotate takes one function",
				argv[first + 1]);
		goto out;
	}
	const char *symbol = argv[first];
	struct tally_resolver_opts ro = { 0 };
	if (tally_symopts_ready(&so, &ro)) {
		ret = 1;
		goto out;
	}
	if (tally_db_open(&db, input)) {
		tally_error_last();
		ret = 1;
		goto out;
	}
	tally_db_names_apart(&db);
	have_db = true;
	tally_view_weigh(&db, o.samples);
	int ev = 0;
	if (event) {
		ev = tally_db_event(&db, event);
		if (ev < 0) {
			struct strbuf names = STRBUF_INIT;
			for (int e = 0; e < db.nevents; e++)
				strbuf_addf(&names, "%s%s", e ? ", " : "", db.events[e]);
			tally_error("event '%s' is not in '%s' (it has: %s)", event, input,
				    names.buf);
			strbuf_release(&names);
			ret = 1;
			goto out;
		}
	}
	tally_progress_attach(&ro);
	tally_resolver_new(&res, &db, &ro);
	struct tally_annotate_opts ao = { symbol, image, ev };
	struct tally_annot_func *funcs = NULL;
	size_t nf = 0;
	if (tally_annotate(&db, res, &ao, &funcs, &nf)) {
		tally_error_last();
		ret = 1;
		goto out;
	}
	tally_warn_jit(&db);
	struct strbuf out = STRBUF_INIT;
	struct tally_annotate_render_opts rop = {
		.source_dirs = srcdirs, .want_asm = want_asm, .json = json, .input = input
	};
	tally_annotate_render(&db, ev, funcs, nf, &rop, &out);
	/* damaged or changed images the annotation read */
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	tally_report_image_warnings(&db, res, tally_verbose, &w);
	tally_progress_done();
	tally_print_warnings(&w);
	fwrite(out.buf, 1, out.len, stdout);
	if (fflush(stdout) != 0) {
		tally_error("cannot write the annotation: %s", strerror(errno));
		ret = 1;
	}
	strbuf_release(&out);
	tally_annotate_free(funcs, nf);
out:
	tally_resolver_free(res);
	if (have_db)
		tally_db_release(&db);
	free(o.srcdirs);
	tally_symopts_release(&so);
	return ret;
}
