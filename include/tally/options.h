/* One option table per command, built from shared groups: the parser (over
 * getopt_long), the --help text, the man page and the shell completion all
 * come from the same tables, so a command's options cannot differ from what
 * its help, its man page and docs/cli.md say.
 *
 * A command lists its groups (its own options first, then shared ones such as
 * sampling, selection or symbol search); each group has a handler that takes
 * the group's codes for the context the command passes beside it. */
#ifndef TALLY_OPTIONS_H
#define TALLY_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/util.h"

enum tally_opt_arg {
	TALLY_ARG_NONE,
	TALLY_ARG_REQUIRED,
	TALLY_ARG_OPTIONAL, /* --explain[=IMAGE]: the value only with '=' */
};

/* Where an option goes: to the group's handler by its code, or straight
 * into a member of the group's context (the option is then one row of the
 * table: nothing in the handler, no code). */
enum tally_opt_bind {
	TALLY_BIND_NONE,   /* the handler takes it (code) */
	TALLY_BIND_FLAG,   /* a bool member set to true */
	TALLY_BIND_STRING, /* a const char * member set to the value (the last given wins) */
	TALLY_BIND_U64,    /* a uint64_t member, a whole number from min to max (tally_parse_u64) */
	TALLY_BIND_DURATION, /* a double member, seconds (tally_parse_duration) */
	TALLY_BIND_SIZE,   /* a uint64_t member, bytes from min (tally_parse_size) */
};

struct tally_option {
	int short_name;        /* 'F', or 0 */
	const char *long_name; /* "freq", or NULL */
	enum tally_opt_arg arg;
	const char *argname;   /* the value's name in the help ("HZ"), NULL without a value */
	const char *help;      /* the help text; '\n' starts a continuation line */
	int code;              /* handed to the group's handler (TALLY_BIND_NONE) */
	enum tally_opt_bind bind;
	size_t offset;         /* the member's offset in the context, when bound */
	uint64_t min, max;     /* the range of a bound number (U64: both; SIZE: min) */
};

#define TALLY_OPTION_END { 0, NULL, TALLY_ARG_NONE, NULL, NULL, 0, TALLY_BIND_NONE, 0, 0, 0 }

/* An option handed to the group's handler with code. */
#define TALLY_OPT(s, l, arg, argname, help, code)                        \
	{                                                                \
		s, l, arg, argname, help, code, TALLY_BIND_NONE, 0, 0, 0 \
	}

/* An option bound to a member of the context struct TYPE, as git's OPT_*
 * rows are: the member's type is checked where the table is compiled. */
#define TALLY_OPT_CHECK_(type, field, want)                                                 \
	(offsetof(type, field) +                                                            \
	 0 * sizeof(char[__builtin_types_compatible_p(__typeof__(((type *)0)->field), want) \
				 ? 1                                                        \
				 : -1]))
/* -s/--long sets the bool TYPE.FIELD */
#define TALLY_OPT_FLAG(s, l, help, type, field)                       \
	{                                                             \
		s, l, TALLY_ARG_NONE, NULL, help, 0, TALLY_BIND_FLAG, \
			TALLY_OPT_CHECK_(type, field, bool), 0, 0     \
	}
/* -s/--long VALUE sets the const char * TYPE.FIELD */
#define TALLY_OPT_STRING(s, l, argname, help, type, field)                     \
	{                                                                      \
		s, l, TALLY_ARG_REQUIRED, argname, help, 0, TALLY_BIND_STRING, \
			TALLY_OPT_CHECK_(type, field, const char *), 0, 0      \
	}
/* The bound numbers: the value is read by the parser of include/tally/util.h
 * named after the kind, with the option's spelling ("--top") in its error. */
/* -s/--long N sets the uint64_t TYPE.FIELD, a whole number from lo to hi */
#define TALLY_OPT_U64(s, l, argname, help, type, field, lo, hi)             \
	{                                                                   \
		s, l, TALLY_ARG_REQUIRED, argname, help, 0, TALLY_BIND_U64, \
			TALLY_OPT_CHECK_(type, field, uint64_t), lo, hi     \
	}
/* -s/--long TIME sets the double TYPE.FIELD to seconds */
#define TALLY_OPT_DURATION(s, l, argname, help, type, field)                     \
	{                                                                        \
		s, l, TALLY_ARG_REQUIRED, argname, help, 0, TALLY_BIND_DURATION, \
			TALLY_OPT_CHECK_(type, field, double), 0, 0              \
	}
/* -s/--long SIZE sets the uint64_t TYPE.FIELD to bytes, at least lo */
#define TALLY_OPT_SIZE(s, l, argname, help, type, field, lo)                 \
	{                                                                    \
		s, l, TALLY_ARG_REQUIRED, argname, help, 0, TALLY_BIND_SIZE, \
			TALLY_OPT_CHECK_(type, field, uint64_t), lo, 0       \
	}

struct tally_optgroup {
	const char *title; /* a heading in the help, NULL for the command's own options */
	const struct tally_option *opts; /* ends with TALLY_OPTION_END */
	/* Takes one option of the group (those not bound to a member): 0 taken, a
	 * negative errno with tally_seterr naming the option and the expected
	 * value when the value is bad. NULL when every option is bound. */
	int (*handle)(void *ctx, int code, const char *arg);
};

#define TALLY_MAX_OPTGROUPS 8

struct tally_cmdopts {
	const char *name;    /* "record" */
	const char *summary; /* one line for 'tally --help' and the man page's NAME */
	const char *usage;   /* "[options] [--] [COMMAND [ARGS...]]": after "tally NAME " */
	const char *footer;  /* text after the options in --help (may be NULL) */
	bool stop_at_nonopt; /* options end at the first operand (record's COMMAND) */
	const struct tally_optgroup *groups[TALLY_MAX_OPTGROUPS + 1]; /* NULL-terminated */
};

/* Parses argv (argv[0] is the command's name) with cmd's tables, handing each
 * option to its group's handler with ctxs[g] (the context for groups[g]).
 * *first gets the index of the first operand. Returns 0, TALLY_OPTS_HELP when
 * -h/--help was given (print tally_opts_help, exit 0), or a negative errno with
 * tally_seterr saying which option was unknown, lacks its value or had a bad one. */
#define TALLY_OPTS_HELP 1
int tally_opts_parse(const struct tally_cmdopts *cmd, void *const *ctxs, int argc, char **argv,
		     int *first);

/* The --help text of a command (usage, options by group, footer). */
void tally_opts_help(const struct tally_cmdopts *cmd, struct strbuf *out);
/* The command's man page, in roff (man(7)). */
void tally_opts_man(const struct tally_cmdopts *cmd, const char *version, struct strbuf *out);
/* Every option spelling of a command ("-F --freq ..."), space-separated: for
 * shell completion. */
void tally_opts_words(const struct tally_cmdopts *cmd, struct strbuf *out);
/* Whether the option named by word ("--freq", "-F") takes a value. */
bool tally_opts_takes_value(const struct tally_cmdopts *cmd, const char *word);

/* Checks a command's tables: every option has a help text, no spelling is used
 * twice, codes are unique within a group. 0, or -EINVAL with tally_seterr
 * naming the first problem (the unit tests run it over every command). */
int tally_opts_check(const struct tally_cmdopts *cmd);

#endif
