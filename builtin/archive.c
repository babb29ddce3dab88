/* tally archive: a database and every file its reports need, as one directory
 * or tarball to analyse anywhere (oparchive, perf archive); --list says what
 * would go in. The work is lib/archive. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/archive.h"
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/symbols.h"
#include "tally/symopts.h"
#include "tally/util.h"

struct aropts {
	const char *input, *output;
	bool list;
	struct tally_archive_opts a;
};

static const struct tally_option archive_options[] = {
	TALLY_OPT_STRING('i', "input", "DIR", "database (default tally.db)", struct aropts, input),
	TALLY_OPT_STRING(
		'o', "output", "OUT",
		"the archive to create: a directory, or OUT.tar, OUT.tar.gz, OUT.tar.zst\n(by the suffix); it must not exist",
		struct aropts, output),
	TALLY_OPT_FLAG('l', "list", "list what would go in, with sizes, and write nothing",
		       struct aropts, list),
	TALLY_OPT_FLAG(
		0, "no-debug",
		"leave out separate debug files, vmlinux and modules' .ko files\n(kernel functions still come from kernel.syms)",
		struct aropts, a.no_debug),
	TALLY_OPT_FLAG(
		0, "strip-debug-to-sampled",
		"keep of each debug file (and vmlinux) only the DWARF the sampled\nfunctions need (docs/format.md says what is kept)",
		struct aropts, a.strip),
	TALLY_OPT_FLAG('x', "exclude-dependent",
		       "only the programs' own executables: no libraries, no kernel files",
		       struct aropts, a.exclude_dependent),
	TALLY_OPTION_END,
};
static const struct tally_optgroup archive_group = { NULL, archive_options, NULL };

const struct tally_cmdopts archive_cmdopts = {
	.name = "archive",
	.summary =
		"a profile and the files its reports need, to analyse anywhere (oparchive, perf archive)",
	.usage = "[options] -o OUT | --list",
	.footer = "read it with any command: tally report -i archive:OUT (or -i OUT.tar.zst)\n"
		  "the symbol-search options say where to find the files to put in\n",
	.groups = { &archive_group, &tally_symopts_group, &tally_db_select_group },
};

static void list(const struct tally_archive_plan *p, const char *input)
{
	char sz[32];
	tally_format_size(p->total, sz, sizeof(sz));
	printf("# tally archive of '%s': %zu files, %" PRIu64 " bytes (%s) before compression\n",
	       input, p->n, p->total, sz);
	printf("%12s  %-7s  %-60s  %s\n", "bytes", "role", "member", "from");
	for (size_t i = 0; i < p->n; i++) {
		const struct tally_archive_member *m = &p->m[i];
		printf("%12" PRIu64 "  %-7s  %-60s  %s", m->size, tally_archive_role_name(m->role),
		       m->name, m->src ? m->src : input);
		if (m->role != TALLY_AR_DB)
			printf(" (%s)", m->note);
		putchar('\n');
	}
	printf("%12" PRIu64 "  total\n", p->total);
}

/* The copy's progress, on print.c's one progress line (a terminal only). */
static void progress(void *ctx, uint64_t done, uint64_t total, const char *member)
{
	(void)ctx;
	char a[32], b[32], line[160];
	tally_format_size(done, a, sizeof(a));
	tally_format_size(total, b, sizeof(b));
	snprintf(line, sizeof(line), "archiving %3.0f%% (%s of %s) %.50s",
		 total ? 100.0 * (double)done / (double)total : 100.0, a, b, member);
	tally_progress_say(line);
}

/* The plan holds each file it verified open until it is copied (one
 * descriptor per file, besides the resolver's): as many as the hard limit
 * allows (tally waits with poll, never select). */
static void more_descriptors(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int cmd_archive(int argc, char **argv)
{
	struct aropts o;
	memset(&o, 0, sizeof(o));
	o.input = "tally.db";
	struct tally_symopts so;
	tally_symopts_init(&so);
	struct tally_db_select dbsel = { 0 };
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	struct tally_resolver *res = NULL;
	struct tally_archive_plan plan = { 0 };
	bool have_db = false, have_plan = false;
	struct tally_db db;
	void *ctx[] = { &o, &so, &dbsel };
	int first, ret = tally_cmd_options(&archive_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 2;
	if (first < argc) {
		tally_usage_error("archive", "unexpected argument '%s'", argv[first]);
		goto out;
	}
	if (!o.list == !o.output) {
		tally_usage_error("archive",
				  o.list ? "--list writes nothing: leave out -o"
					 : "give -o OUT (the archive to create) or --list");
		goto out;
	}
	if (o.a.no_debug && o.a.strip) {
		tally_usage_error(
			"archive",
			"--no-debug leaves debug files out: --strip-debug-to-sampled has nothing to strip");
		goto out;
	}
	ret = 1;
	if (o.output && !access(o.output, F_OK)) {
		tally_error("'%s' already exists (remove it, or choose another name)", o.output);
		goto out;
	}
	struct tally_resolver_opts ro = { 0 };
	if (tally_symopts_ready(&so, &ro))
		goto out;
	if (tally_db_open_select(&db, o.input, &dbsel)) {
		tally_error_last();
		goto out;
	}
	have_db = true;
	more_descriptors();
	ro.lines = true; /* the debug files that give lines are wanted */
	tally_resolver_new(&res, &db, &ro);
	int pr = tally_archive_plan(&plan, &db, res, &o.a, &w);
	tally_print_warnings(&w);
	if (pr) {
		tally_error_last();
		goto out;
	}
	have_plan = true;
	if (o.list) {
		list(&plan, o.input);
		ret = fflush(stdout) ? 1 : 0;
		if (ret)
			tally_error("cannot write the list: %s", strerror(errno));
		goto out;
	}
	double t0 = tally_now_mono();
	tally_progress_start();
	int wr = tally_archive_write(&plan, o.output, progress, NULL);
	tally_progress_done();
	if (wr) {
		tally_error_last();
		goto out;
	}
	char a[32];
	tally_format_size(plan.total, a, sizeof(a));
	tally_say(
		"wrote '%s': %zu files, %s before compression, in %.2f s (read it with 'tally report -i %s%s')",
		o.output, plan.n + 1, a, tally_now_mono() - t0,
		tally_archive_kind_of(o.output) == TALLY_ARCHIVE_DIR ? "archive:" : "", o.output);
	ret = 0;
out:
	if (have_plan)
		tally_archive_plan_release(&plan);
	tally_resolver_free(res);
	if (have_db)
		tally_db_release(&db);
	tally_symopts_release(&so);
	tally_warnings_release(&w);
	return ret;
}
