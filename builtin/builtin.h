/* The commands of tally. To add one: write builtin/<name>.c with
 * int cmd_<name>(int argc, char **argv), declare it here, add it to the table in
 * tally.c and to builtin_sources in meson.build, document it in docs/cli.md and
 * README.md, and give it tests under tests/. */
#ifndef TALLY_BUILTIN_H
#define TALLY_BUILTIN_H

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_annotate(int argc, char **argv);

int cmd_scan(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_ctl(int argc, char **argv);

/* The printers (builtin/print.c): "tally: msg" (error), "tally: warning: msg"
 * on stderr; die() also exits with status 1; info() prints only with -v. */
void tally_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tally_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
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

/* Shared by commands: prints the usage error for cmd and returns 2. */
int tally_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* After getopt_long returned '?': the usage error for the option it refused
 * (an unknown one, or one missing its value, told apart by shortopts), 2. */
int tally_getopt_error(const char *cmd, const char *shortopts, char **argv);

#endif
