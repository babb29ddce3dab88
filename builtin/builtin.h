/* The commands of tally: each is int cmd_<name>(int argc, char **argv) with its
 * option table <name>_cmdopts (the steps to add one are at the top of tally.c). */
#ifndef TALLY_BUILTIN_H
#define TALLY_BUILTIN_H

#include "tally/options.h"
#include "tally/util.h"

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_annotate(int argc, char **argv);

struct tally_db;
/* Shared by report and annotate: the recording's warnings about JIT maps and
 * jitdumps (untrusted, damaged), one line each. */
void tally_warn_jit(const struct tally_db *db);
int cmd_scan(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_ctl(int argc, char **argv);

/* Shared by commands: prints the usage error for cmd and returns 2. */
int tally_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a command's options with its table (tally_opts_parse): -1 to go on,
 * else the exit status to return at once (0 after printing --help, 2 after a
 * usage error). *first: the first operand. */
int tally_cmd_options(const struct tally_cmdopts *c, void *const *ctxs, int argc, char **argv, int *first);
int tally_getopt_error(const char *cmd, const char *shortopts, char **argv);
/* Prints each line of a core warnings buffer (one warning a line) as a warning. */
void tally_print_warnings(const struct strbuf *w);

extern const struct tally_cmdopts record_cmdopts, annotate_cmdopts, events_cmdopts, export_cmdopts, scan_cmdopts, ctl_cmdopts;

#endif
