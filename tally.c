/* tally: command table and dispatch (like git.c and perf.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/util.h"

#ifndef TALLY_VERSION
#define TALLY_VERSION "unknown"
#endif

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct cmd commands[] = {
	{ "record", cmd_record, "profile a command, processes or the whole system into a database" },
	{ "report", cmd_report, "where the time went: per image, per function" },
	{ "annotate", cmd_annotate, "one function's source and instructions with their samples" },
	{ "events", cmd_events, "list the events this machine can sample" },
	{ "export", cmd_export, "write a profile for pprof, KCachegrind, gprof or flame graphs" },
	{ "scan", cmd_scan, "map image signatures to files, for reports of stripped systems (iscan)" },
	{ "daemon", cmd_daemon, "profile the whole system without end, into epochs (tally ctl steers it)" },
	{ "ctl", cmd_ctl, "control a running daemon: start, stop, flush, epoch, status, cpus, drain" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: tally <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\n'tally <command> --help' shows a command's options; docs/cli.md has them all.\n");
}

int tally_usage_error(const char *cmd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tally_error("%s (see 'tally %s --help')", msg, cmd);
	return 2;
}

int tally_getopt_error(const char *cmd, const char *shortopts, char **argv)
{
	if (optopt && optopt < 256) {
		const char *c = strchr(shortopts + (shortopts[0] == '+'), optopt);
		return tally_usage_error(cmd, "option '-%c' %s", optopt, c && c[1] == ':' ? "needs a value" : "is unknown");
	}
	return tally_usage_error(cmd, "unknown option or missing value '%s'", argv[optind - 1]);
}

int main(int argc, char **argv)
{
	tally_print_init();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(name, "--version") || !strcmp(name, "version")) {
		printf("tally %s\n", TALLY_VERSION);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(commands[i].name, name))
			return commands[i].fn(argc - 1, argv + 1);
	tally_error("unknown command '%s' (commands: record, report, annotate, events, export, scan, daemon, ctl; see 'tally --help')", name);
	return 2;
}
