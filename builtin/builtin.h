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

int cmd_scan(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_archive(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_job(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_push(int argc, char **argv);
/* The remote hosts of a job (--host, --remote-root: builtin/job-hosts.c), one
 * option group for job run and job hosts. */
struct tally_hosts_opts {
	char **hosts;
	size_t nhosts, ahosts;
	const char *root;
};
struct tally_optgroup;
extern const struct tally_optgroup tally_hosts_group;
/* tally job hosts (builtin/job-hosts.c): argv[0] is "hosts" */
int cmd_job_hosts(int argc, char **argv);

/* The printers (builtin/print.c): "tally: msg" (error), "tally: warning: msg"
 * on stderr; die() also exits with status 1; info() prints only with -v. */
void tally_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tally_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The core's last error (tally_errmsg) as an error line. */
void tally_error_last(void);
struct tally_symopts;
struct tally_resolver_opts;
/* The symbol options made into resolver options (tally_symopts_prepare):
 * their warnings printed; 0, or 1 with the error printed. */
int tally_symopts_ready(struct tally_symopts *so, struct tally_resolver_opts *ro);
/* "tally: msg" on stderr, as an error is put, for what a command did (what
 * it wrote, where and how big; what it pushed), with or without -v. */
void tally_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void tally_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int tally_verbose;
void tally_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the warnings the core handed back, one line each, and empties w. */
struct tally_warnings;
void tally_print_warnings(struct tally_warnings *w);
/* Called first by main: the out-of-memory handler that prints and exits 1. */
void tally_print_init(void);
struct tally_db;
/* Shared by report and annotate: the recording's warnings about JIT maps and
 * jitdumps (untrusted, damaged), one line each. */
void tally_warn_jit(const struct tally_db *db);
/* Progress of slow work on stderr when it is a terminal, and nothing
 * otherwise: one line, "tally: WHAT ... N s", shown after half a second and
 * its seconds kept going. tally_progress_start starts it (once);
 * tally_progress_attach starts it and sets ro's progress callback (symbol
 * work: debuginfod downloads, loading images); tally_progress_say names the
 * phase a builtin starts (NULL: none); tally_progress_done clears the line and
 * stops (the printers above clear the line too). */
struct tally_resolver_opts;
void tally_progress_start(void);
void tally_progress_attach(struct tally_resolver_opts *ro);
void tally_progress_say(const char *what);
void tally_progress_done(void);

/* Shared by commands: prints the usage error for cmd and returns 2. */
int tally_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a command's options with its table (tally_opts_parse): -1 to go on,
 * else the exit status to return at once (0 after printing --help, 2 after a
 * usage error). *first: the first operand. */
int tally_cmd_options(const struct tally_cmdopts *c, void *const *ctxs, int argc, char **argv,
		      int *first);

extern const struct tally_cmdopts record_cmdopts, report_cmdopts, annotate_cmdopts, events_cmdopts,
	export_cmdopts, scan_cmdopts, daemon_cmdopts, ctl_cmdopts, merge_cmdopts, diff_cmdopts,
	archive_cmdopts, job_cmdopts, job_hosts_cmdopts, top_cmdopts, cache_cmdopts;
extern const struct tally_cmdopts push_cmdopts;

#endif
