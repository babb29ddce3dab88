/* tally scan: the Itsy profiler's iscan. Walks directories for ELF files and
 * writes a map from image signature to path, for `tally report --mapfile` to
 * find unstripped copies of images recorded on a stripped system. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builtin/builtin.h"
#include "tally/imgmap.h"
#include "tally/util.h"

struct scanopts {
	const char *output;
	bool quiet;
};

static int scan_handle(void *ctx, int code, const char *arg)
{
	struct scanopts *o = ctx;
	switch (code) {
	case 'o': o->output = arg; break;
	case 'q': o->quiet = true; break;
	case 'v': tally_verbose = 1; break;
	}
	return 0;
}

static const struct tally_option scan_options[] = {
	TALLY_OPT('o', "output", TALLY_ARG_REQUIRED, "FILE",
		  "write the map to FILE (default: standard output)", 'o'),
	TALLY_OPT('q', "quiet", TALLY_ARG_NONE, NULL, "no note per skipped file or directory loop",
		  'q'),
	TALLY_OPT('v', "verbose", TALLY_ARG_NONE, NULL,
		  "end with the counts of files, images, loops and skips", 'v'),
	TALLY_OPTION_END,
};
static const struct tally_optgroup scan_group = { NULL, scan_options, scan_handle };

const struct tally_cmdopts scan_cmdopts = {
	.name = "scan",
	.summary = "map image signatures to files, for reports of stripped systems (iscan)",
	.usage = "[options] [DIR...]",
	.footer =
		"Writes a map from image signature (build-id, else content hash) to the ELF\n"
		"files under each DIR (default: /usr/lib/debug /usr/local/lib /usr/local/bin\n"
		"/usr/lib /usr/bin /usr/sbin /usr/libexec /lib /bin /sbin /opt, those that exist).\n",
	.groups = { &scan_group },
};

static void scan_warn(const char *msg, void *ctx)
{
	if (!*(bool *)ctx)
		tally_warn("%s", msg);
}

int cmd_scan(int argc, char **argv)
{
	struct scanopts so = { 0 };
	void *ctx[] = { &so };
	int first, r = tally_cmd_options(&scan_cmdopts, ctx, argc, argv, &first);
	if (r >= 0)
		return r;
	const char *output = so.output;
	bool quiet = so.quiet;
	const char **dirs = NULL;
	char **real = NULL;
	size_t n = 0, a = 0, nreal = 0, areal = 0;
	if (first < argc) {
		for (int i = first; i < argc; i++) {
			/* absolute paths: the map is read from anywhere */
			char *rp = realpath(argv[i], NULL);
			GROW(dirs, a, n + 1);
			dirs[n++] = rp ? rp : argv[i];
			if (rp) {
				GROW(real, areal, nreal + 1);
				real[nreal++] = rp;
			}
		}
	} else {
		for (size_t i = 0; tally_scan_default_dirs[i]; i++) {
			struct stat st;
			if (stat(tally_scan_default_dirs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
				GROW(dirs, a, n + 1);
				dirs[n++] = tally_scan_default_dirs[i];
			}
		}
	}
	struct strbuf out = STRBUF_INIT;
	struct tally_scan_stats st;
	int ret = tally_scan(dirs, n, &out, &st, scan_warn, &quiet);
	free(dirs);
	for (size_t i = 0; i < nreal; i++)
		free(real[i]);
	free(real);
	if (ret) {
		tally_error_last();
		strbuf_release(&out);
		return 1;
	}
	if (output) {
		if (tally_write_file_atomic(output, out.buf, out.len)) {
			tally_error_last();
			strbuf_release(&out);
			return 1;
		}
	} else {
		fwrite(out.buf, 1, out.len, stdout);
		if (fflush(stdout)) {
			tally_error("cannot write the map: %s", strerror(errno));
			strbuf_release(&out);
			return 1;
		}
	}
	strbuf_release(&out);
	tally_info(
		"scan: %zu files, %zu ELF images mapped, %zu directory loops skipped, %zu unreadable, %zu damaged ELF",
		st.files, st.elf, st.loops, st.unreadable, st.bad_elf);
	if (st.loops && !quiet)
		tally_warn("skipped %zu director%s already walked (symlink loops or bind mounts)",
			   st.loops, st.loops == 1 ? "y" : "ies");
	return 0;
}
