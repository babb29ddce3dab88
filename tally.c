/* tally: command table and dispatch (like git.c and perf.c); every command's
 * help, man page and completion come from its option table (options.h).
 *
 * To add a command: write builtin/<name>.c with int cmd_<name>(int argc, char
 * **argv) and its const struct tally_cmdopts <name>_cmdopts, declare both in
 * builtin/builtin.h, add a row to the table below and the file to
 * builtin_sources (and the name to man_cmds) in meson.build, give it a section
 * in docs/cli.md (a test checks) and tests under tests/. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/options.h"
#include "tally/util.h"

#ifndef TALLY_VERSION
#define TALLY_VERSION "unknown"
#endif

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const struct tally_cmdopts *opts;
};

static const struct cmd commands[] = {
	{ "record", cmd_record, &record_cmdopts },
	{ "report", cmd_report, &report_cmdopts },
	{ "annotate", cmd_annotate, &annotate_cmdopts },
	{ "events", cmd_events, &events_cmdopts },
	{ "export", cmd_export, &export_cmdopts },
	{ "merge", cmd_merge, &merge_cmdopts },
	{ "diff", cmd_diff, &diff_cmdopts },
	{ "scan", cmd_scan, &scan_cmdopts },
	{ "daemon", cmd_daemon, &daemon_cmdopts },
	{ "ctl", cmd_ctl, &ctl_cmdopts },
	{ "archive", cmd_archive, &archive_cmdopts },
	{ "cache", cmd_cache, &cache_cmdopts },
	{ "job", cmd_job, &job_cmdopts },
	{ "top", cmd_top, &top_cmdopts },
	{ "push", cmd_push, &push_cmdopts },
};

static const struct cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tally <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].opts->summary);
	fprintf(f,
		"\n'tally help <command>' (or 'tally <command> --help') shows a command's options;\n"
		"'man tally-<command>' and docs/cli.md have them all.\n");
}

static int write_out(struct strbuf *sb)
{
	int r = fwrite(sb->buf, 1, sb->len, stdout) == sb->len && fflush(stdout) == 0 ? 0 : 1;
	if (r)
		tally_error("cannot write to standard output");
	strbuf_release(sb);
	return r;
}

static void unknown_cmd(const char *name)
{
	struct strbuf names = STRBUF_INIT;
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		strbuf_addf(&names, "%s%s", i ? ", " : "", commands[i].name);
	tally_error("unknown command '%s' (commands: %s; see 'tally --help')", name, names.buf);
	strbuf_release(&names);
}

/* tally(1): the commands, each pointing at its own page. */
static void main_man(struct strbuf *out)
{
	strbuf_addf(
		out,
		".TH TALLY 1 \"\" \"tally %s\" \"tally manual\"\n.SH NAME\ntally \\- a whole-system statistical sampling profiler\n"
		".SH SYNOPSIS\n.B tally\n<command> [options]\n.SH COMMANDS\n",
		TALLY_VERSION);
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		strbuf_addf(out, ".TP\n.BR tally\\-%s (1)\n%s\n", commands[i].name,
			    commands[i].opts->summary);
	strbuf_addstr(out, ".SH SEE ALSO\n.BR perf (1)\n");
}

/* A bash completion script: commands, then each command's options; a file name
 * after an option that takes a value and for operands. */
static void completion(struct strbuf *out)
{
	strbuf_addstr(
		out,
		"# bash completion for tally (written by 'tally help --completion')\n_tally()\n{\n"
		"\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} opts vals\n"
		"\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W \"");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		strbuf_addf(out, "%s%s", i ? " " : "", commands[i].name);
	strbuf_addstr(out, " help\" -- \"$cur\"))\n\t\treturn\n\tfi\n\tcase ${COMP_WORDS[1]} in\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		struct strbuf w = STRBUF_INIT, v = STRBUF_INIT;
		tally_opts_words(commands[i].opts, &w);
		for (char *save = NULL, *t = strtok_r(w.buf, " ", &save); t;
		     t = strtok_r(NULL, " ", &save))
			if (tally_opts_takes_value(commands[i].opts, t))
				strbuf_addf(&v, "%s%s", v.len ? " " : "", t);
		strbuf_reset(&w);
		tally_opts_words(commands[i].opts, &w);
		strbuf_addf(out, "\t%s) opts=\"%s\" vals=\"%s\" ;;\n", commands[i].name, w.buf,
			    v.len ? v.buf : "");
		strbuf_release(&w);
		strbuf_release(&v);
	}
	strbuf_addstr(out, "\thelp) COMPREPLY=($(compgen -W \"");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		strbuf_addf(out, "%s%s", i ? " " : "", commands[i].name);
	strbuf_addstr(
		out,
		"\" -- \"$cur\")); return ;;\n\t*) return ;;\n\tesac\n"
		"\tif [[ \" $vals \" == *\" $prev \"* ]]; then\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
		"\telif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
		"\telse\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\tfi\n}\ncomplete -o filenames -F _tally tally\n");
}

/* tally help [CMD] | --man [CMD] | --completion */
static int cmd_help(int argc, char **argv)
{
	struct strbuf sb = STRBUF_INIT;
	if (argc == 1) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--completion") && argc == 2) {
		completion(&sb);
		return write_out(&sb);
	}
	bool man = !strcmp(argv[1], "--man");
	if (man && argc == 2) {
		main_man(&sb);
		return write_out(&sb);
	}
	if (argc != 2 + man) {
		tally_error("usage: tally help [--man] [COMMAND] | tally help --completion");
		return 2;
	}
	const struct cmd *c = find_cmd(argv[1 + man]);
	if (!c) {
		unknown_cmd(argv[1 + man]);
		return 2;
	}
	if (man)
		tally_opts_man(c->opts, TALLY_VERSION, &sb);
	else
		tally_opts_help(c->opts, &sb);
	return write_out(&sb);
}

int tally_usage_error(const char *cmd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* one parenthesis at the end, not two in a row: a message that ends in
	 * its own takes the pointer to --help inside it */
	size_t n = strlen(msg);
	if (n && msg[n - 1] == ')') {
		size_t i = n - 1;
		int depth = 0;
		do {
			if (msg[i] == ')')
				depth++;
			else if (msg[i] == '(')
				depth--;
		} while (depth && i-- > 0);
		if (!depth) {
			msg[n - 1] = '\0';
			tally_error("%s%s'tally %s --help')", msg,
				    !strncmp(msg + i + 1, "see ", 4) ? ", or " : "; see ", cmd);
			return 2;
		}
	}
	tally_error("%s (see 'tally %s --help')", msg, cmd);
	return 2;
}

int tally_cmd_options(const struct tally_cmdopts *c, void *const *ctxs, int argc, char **argv,
		      int *first)
{
	int r = tally_opts_parse(c, ctxs, argc, argv, first);
	if (r == TALLY_OPTS_HELP) {
		struct strbuf sb = STRBUF_INIT;
		tally_opts_help(c, &sb);
		return write_out(&sb);
	}
	if (r < 0)
		return tally_usage_error(c->name, "%s", tally_errmsg());
	return -1;
}

int main(int argc, char **argv)
{
	tally_print_init();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "-h"))
		return cmd_help(1, argv + 1);
	if (!strcmp(name, "help"))
		return cmd_help(argc - 1, argv + 1);
	if (!strcmp(name, "--version") || !strcmp(name, "version")) {
		printf("tally %s\n", TALLY_VERSION);
		return 0;
	}
	if (!strcmp(name, "--list-cmds")) {
		for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
			printf("%s\n", commands[i].name);
		return 0;
	}
	const struct cmd *c = find_cmd(name);
	if (c)
		return c->fn(argc - 1, argv + 1);
	unknown_cmd(name);
	return 2;
}
