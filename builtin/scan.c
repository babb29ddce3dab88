/* tally scan: the Itsy profiler's iscan. Walks directories for ELF files and
 * writes a map from image signature to path, for `tally report --mapfile` to
 * find unstripped copies of images recorded on a stripped system. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builtin/builtin.h"
#include "tally/imgmap.h"
#include "tally/util.h"

static const char scan_usage[] =
	"usage: tally scan [options] [DIR...]\n"
	"\n"
	"Writes a map from image signature (build-id, else content hash) to the ELF\n"
	"files under each DIR (default: /usr/lib/debug /usr/local/lib /usr/local/bin\n"
	"/usr/lib /usr/bin /usr/sbin /usr/libexec /lib /bin /sbin /opt, those that exist).\n"
	"\n"
	"  -o, --output FILE   write the map to FILE (default: standard output)\n"
	"  -q, --quiet         no note per skipped file or directory loop\n"
	"  -v, --verbose       end with the counts of files, images, loops and skips\n";

static const struct option scan_opts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void scan_warn(const char *msg, void *ctx)
{
	if (!*(bool *)ctx)
		tally_warn("%s", msg);
}

int cmd_scan(int argc, char **argv)
{
	const char *output = NULL;
	bool quiet = false;
	optind = 1;
	opterr = 0;
	int opt;
	static const char shortopts[] = "o:qvh";
	while ((opt = getopt_long(argc, argv, shortopts, scan_opts, NULL)) != -1) {
		switch (opt) {
		case 'o': output = optarg; break;
		case 'q': quiet = true; break;
		case 'v': tally_verbose = 1; break;
		case 'h': fputs(scan_usage, stdout); return 0;
		default:
			return tally_getopt_error("scan", shortopts, argv);
		}
	}
	const char **dirs = NULL;
	char **real = NULL;
	size_t n = 0, a = 0, nreal = 0, areal = 0;
	if (optind < argc) {
		for (int i = optind; i < argc; i++) {
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
		tally_error("%s", tally_errmsg());
		strbuf_release(&out);
		return 1;
	}
	if (output) {
		if (tally_write_file_atomic(output, out.buf, out.len)) {
			tally_error("%s", tally_errmsg());
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
	tally_info("scan: %zu files, %zu ELF images mapped, %zu directory loops skipped, %zu unreadable, %zu damaged ELF",
		   st.files, st.elf, st.loops, st.unreadable, st.bad_elf);
	if (st.loops && !quiet)
		tally_warn("skipped %zu director%s already walked (symlink loops or bind mounts)", st.loops,
			   st.loops == 1 ? "y" : "ies");
	return 0;
}
