/* Unit tests for lib/util/options.c: one option table parses, and writes the
 * help, the man page and the completion words. */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/options.h"
#include "tally/sampling.h"
#include "tally/select.h"
#include "tally/epoch.h"
#include "tally/symopts.h"

struct seen {
	int n;
	int codes[16];
	const char *args[16];
};

static int take(void *ctx, int code, const char *arg)
{
	struct seen *s = ctx;
	if (code == 99)
		return tally_seterr(-EINVAL, "invalid --bad '%s'", arg);
	s->codes[s->n] = code;
	s->args[s->n++] = arg;
	return 0;
}

static const struct tally_option own[] = {
	TALLY_OPT('o', "output", TALLY_ARG_REQUIRED, "FILE", "where to write", 1),
	TALLY_OPT(0, "force", TALLY_ARG_NONE, NULL, "replace", 2),
	TALLY_OPT(0, "format", TALLY_ARG_REQUIRED, "FMT", "which format", 3),
	TALLY_OPT(0, "explain", TALLY_ARG_OPTIONAL, "IMAGE", "why\nand a second line", 4),
	TALLY_OPT(0, "bad", TALLY_ARG_REQUIRED, "X", "always refused", 99),
	TALLY_OPTION_END,
};
static const struct tally_option other[] = {
	TALLY_OPT('v', "verbose", TALLY_ARG_NONE, NULL, "more", 1),
	TALLY_OPTION_END,
};
static const struct tally_optgroup g_own = { NULL, own, take };
static const struct tally_optgroup g_other = { "more", other, take };
static const struct tally_cmdopts cmd = { .name = "t",
					  .summary = "a test command",
					  .usage = "[options] ARG",
					  .groups = { &g_own, &g_other } };
static const struct tally_cmdopts cmd_stop = { .name = "t",
					       .summary = "s",
					       .usage = "[--] CMD",
					       .stop_at_nonopt = true,
					       .groups = { &g_own, &g_other } };

static int parse(const struct tally_cmdopts *c, struct seen *a, struct seen *b, int *first, ...)
{
	char *argv[16];
	int argc = 0;
	va_list ap;
	va_start(ap, first);
	for (char *s; (s = va_arg(ap, char *));)
		argv[argc++] = s;
	va_end(ap);
	argv[argc] = NULL;
	void *ctx[] = { a, b };
	return tally_opts_parse(c, ctx, argc, argv, first);
}

static void test_options__groups_get_their_codes(void **state)
{
	(void)state;
	struct seen a = { 0 }, b = { 0 };
	int first;
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "-o", "x", "--force", "-v",
			       "--format=pprof", "arg", NULL),
			 0);
	assert_int_equal(a.n, 3);
	assert_int_equal(a.codes[0], 1);
	assert_string_equal(a.args[0], "x");
	assert_int_equal(a.codes[1], 2);
	assert_int_equal(a.codes[2], 3);
	assert_string_equal(a.args[2], "pprof");
	assert_int_equal(b.n, 1);
	assert_int_equal(b.codes[0], 1);
	assert_int_equal(first, 6); /* operands are moved after the options */
}

static void test_options__errors_say_which(void **state)
{
	(void)state;
	struct seen a = { 0 }, b = { 0 };
	int first;
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--nope", NULL), -EINVAL);
	assert_errmsg_has("option '--nope' is unknown");
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--format", NULL), -EINVAL);
	assert_errmsg_has("option '--format' needs a value");
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "-o", NULL), -EINVAL);
	assert_errmsg_has("option '-o' needs a value");
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "-Z", NULL), -EINVAL);
	assert_errmsg_has("option '-Z' is unknown");
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--force=1", NULL), -EINVAL);
	assert_errmsg_has("option '--force' takes no value");
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--fo", NULL), -EINVAL);
	assert_errmsg_has("option '--fo' is ambiguous (--force, --format)");
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--bad", "1", NULL), -EINVAL);
	assert_errmsg_has("invalid --bad '1'");
	/* a unique prefix is the option, as getopt_long has it */
	a.n = 0;
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--forc", NULL), 0);
	assert_int_equal(a.codes[0], 2);
}

static void test_options__optional_value_and_help(void **state)
{
	(void)state;
	struct seen a = { 0 }, b = { 0 };
	int first;
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--explain", "img", NULL), 0);
	assert_null(a.args[0]); /* without '=' the next word is an operand */
	assert_int_equal(first, 2);
	a.n = 0;
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--explain=img", NULL), 0);
	assert_string_equal(a.args[0], "img");
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "--force", "--help", NULL),
			 TALLY_OPTS_HELP);
	assert_int_equal(parse(&cmd, &a, &b, &first, "t", "-h", NULL), TALLY_OPTS_HELP);
}

static void test_options__stop_at_operand(void **state)
{
	(void)state;
	struct seen a = { 0 }, b = { 0 };
	int first;
	assert_int_equal(
		parse(&cmd_stop, &a, &b, &first, "t", "--force", "prog", "-v", "--nope", NULL), 0);
	assert_int_equal(first, 2);
	assert_int_equal(b.n, 0); /* -v belongs to prog */
}

static void test_options__help_text(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	tally_opts_help(&cmd, &sb);
	assert_str_has(sb.buf, "usage: tally t [options] ARG\n");
	assert_str_has(sb.buf, "  -o, --output FILE        where to write\n");
	assert_str_has(
		sb.buf,
		"      --explain[=IMAGE]    why\n                           and a second line\n");
	assert_str_has(sb.buf, "\nmore:\n  -v, --verbose ");
	assert_str_has(sb.buf, "  -h, --help ");
	assert_null(strstr(sb.buf, "%%"));
	strbuf_reset(&sb);
	tally_opts_man(&cmd, "9.9", &sb);
	assert_str_has(sb.buf, ".TH TALLY-T 1 \"\" \"tally 9.9\"");
	assert_str_has(sb.buf, ".B \\-o, \\-\\-output FILE\nwhere to write\n");
	assert_str_has(sb.buf, ".SS more\n");
	strbuf_reset(&sb);
	tally_opts_words(&cmd, &sb);
	assert_string_equal(sb.buf,
			    "-o --output --force --format --explain --bad -v --verbose --help");
	assert_true(tally_opts_takes_value(&cmd, "--format"));
	assert_true(tally_opts_takes_value(&cmd, "-o"));
	assert_false(tally_opts_takes_value(&cmd, "--force"));
	assert_false(tally_opts_takes_value(&cmd, "--explain"));
	strbuf_release(&sb);
}

static void test_options__check_finds_bad_tables(void **state)
{
	(void)state;
	assert_int_equal(tally_opts_check(&cmd), 0);
	static const struct tally_option dup[] = {
		TALLY_OPT('o', "out", TALLY_ARG_REQUIRED, "F", "x", 1),
		TALLY_OPTION_END,
	};
	static const struct tally_optgroup g_dup = { NULL, dup, take };
	static const struct tally_cmdopts c1 = {
		.name = "d", .summary = "s", .usage = "u", .groups = { &g_own, &g_dup }
	};
	assert_int_equal(tally_opts_check(&c1), -EINVAL);
	assert_errmsg_has("'-o' is given twice");
	static const struct tally_option nohelp[] = {
		TALLY_OPT(0, "quiet", TALLY_ARG_NONE, NULL, "", 1),
		TALLY_OPTION_END,
	};
	static const struct tally_optgroup g_nohelp = { NULL, nohelp, take };
	static const struct tally_cmdopts c2 = {
		.name = "d", .summary = "s", .usage = "u", .groups = { &g_nohelp }
	};
	assert_int_equal(tally_opts_check(&c2), -EINVAL);
	assert_errmsg_has("has no help");
	static const struct tally_option noval[] = {
		TALLY_OPT(0, "size", TALLY_ARG_REQUIRED, NULL, "a size", 1),
		TALLY_OPTION_END,
	};
	static const struct tally_optgroup g_noval = { NULL, noval, take };
	static const struct tally_cmdopts c3 = {
		.name = "d", .summary = "s", .usage = "u", .groups = { &g_noval }
	};
	assert_int_equal(tally_opts_check(&c3), -EINVAL);
	assert_errmsg_has("a value name goes with a value");
}

/* Options bound to members take their values with no handler; a bound
 * option mixes with handled ones in a group; a table that binds nothing and
 * has no handler is refused. */
struct bound {
	const char *out, *fmt;
	bool force, quiet;
	int listed;
};

static int take_list(void *ctx, int code, const char *arg)
{
	(void)arg;
	struct bound *b = ctx;
	if (code == 7)
		b->listed++;
	return 0;
}

static void test_options__bound_members(void **state)
{
	(void)state;
	static const struct tally_option opts[] = {
		TALLY_OPT_STRING('o', "output", "FILE", "where", struct bound, out),
		TALLY_OPT_STRING(0, "format", "F", "which", struct bound, fmt),
		TALLY_OPT_FLAG('f', "force", "replace", struct bound, force),
		TALLY_OPT_FLAG(0, "quiet", "say less", struct bound, quiet),
		TALLY_OPT(0, "list", TALLY_ARG_REQUIRED, "X", "one more (repeatable)", 7),
		TALLY_OPTION_END,
	};
	static const struct tally_optgroup g = { NULL, opts, take_list };
	static const struct tally_cmdopts c = {
		.name = "b", .summary = "s", .usage = "u", .groups = { &g }
	};
	assert_int_equal(tally_opts_check(&c), 0);
	struct bound b = { .out = "default" };
	void *ctx[] = { &b };
	char *argv[] = { "b", "-f", "--format", "json",   "--list", "a",    "-o",
			 "x", "-o", "y",        "--list", "b",      "rest", NULL };
	int first;
	assert_int_equal(tally_opts_parse(&c, ctx, 13, argv, &first), 0);
	assert_string_equal(b.out, "y"); /* the last given */
	assert_string_equal(b.fmt, "json");
	assert_true(b.force);
	assert_false(b.quiet);
	assert_int_equal(b.listed, 2);
	assert_int_equal(first, 12);
	/* a bound option still needs its value */
	char *novalue[] = { "b", "--format", NULL };
	assert_int_equal(tally_opts_parse(&c, ctx, 2, novalue, &first), -EINVAL);
	assert_errmsg_has("--format");
	/* no handler and an option bound to nothing */
	static const struct tally_option loose[] = {
		TALLY_OPT(0, "what", TALLY_ARG_NONE, NULL, "goes nowhere", 1),
		TALLY_OPTION_END,
	};
	static const struct tally_optgroup g_loose = { NULL, loose, NULL };
	static const struct tally_cmdopts c2 = {
		.name = "l", .summary = "s", .usage = "u", .groups = { &g_loose }
	};
	assert_int_equal(tally_opts_check(&c2), -EINVAL);
	assert_errmsg_has("bound to nothing");
}

/* The bound numbers: each kind takes a good value into its member and refuses
 * a bad one with the one line of its parser, naming the option as spelled. */
struct nums {
	uint64_t top, size;
	double every;
};

static int parse_nums(struct nums *n, char *opt, char *val)
{
	static const struct tally_option opts[] = {
		TALLY_OPT_U64(0, "top", "N", "rows", struct nums, top, 1, 100),
		TALLY_OPT_DURATION('e', "every", "TIME", "how often", struct nums, every),
		TALLY_OPT_SIZE(0, "max", "SIZE", "how much", struct nums, size, 4096),
		TALLY_OPTION_END,
	};
	static const struct tally_optgroup g = { NULL, opts, NULL };
	static const struct tally_cmdopts c = {
		.name = "n", .summary = "s", .usage = "u", .groups = { &g }
	};
	assert_int_equal(tally_opts_check(&c), 0);
	char *argv[] = { "n", opt, val, NULL };
	void *ctx[] = { n };
	int first;
	return tally_opts_parse(&c, ctx, 3, argv, &first);
}

static void test_options__bound_numbers(void **state)
{
	(void)state;
	struct nums n = { 0 };
	assert_int_equal(parse_nums(&n, "--top", "100"), 0);
	assert_int_equal(n.top, 100);
	assert_int_equal(parse_nums(&n, "--every", "1.5m"), 0);
	assert_true(n.every == 90.0);
	assert_int_equal(parse_nums(&n, "--max", "8k"), 0);
	assert_int_equal(n.size, 8192);

	/* refused, the member untouched, one line naming the option */
	assert_int_equal(parse_nums(&n, "--top", "101"), -EINVAL);
	assert_string_equal(tally_errmsg(), "invalid --top '101': must be between 1 and 100");
	assert_int_equal(parse_nums(&n, "--top", "x"), -EINVAL);
	assert_string_equal(tally_errmsg(),
			    "invalid --top 'x': expected a whole number from 1 to 100");
	assert_int_equal(n.top, 100);
	assert_int_equal(parse_nums(&n, "-e", "soon"), -EINVAL);
	assert_errmsg_has("invalid --every 'soon': expected a duration");
	assert_null(strchr(tally_errmsg(), '\n'));
	assert_true(n.every == 90.0);
	assert_int_equal(parse_nums(&n, "--max", "1k"), -EINVAL);
	assert_errmsg_has("invalid --max '1k'");
	assert_null(strchr(tally_errmsg(), '\n'));
	assert_int_equal(n.size, 8192);
}

/* The shared groups are well formed, and together (as a command would use
 * them) spell no option twice. */
static void test_options__shared_groups(void **state)
{
	(void)state;
	static const struct tally_cmdopts all = {
		.name = "all",
		.summary = "s",
		.usage = "u",
		.groups = { &tally_sampling_group, &tally_symopts_group, &tally_db_select_group }
	};
	assert_int_equal(tally_opts_check(&all), 0);
	static const struct tally_cmdopts rep = {
		.name = "rep",
		.summary = "s",
		.usage = "u",
		.groups = { &tally_select_group, &tally_symopts_group, &tally_db_select_group }
	};
	assert_int_equal(tally_opts_check(&rep), 0);
	/* the symbol group fills the resolver's options */
	struct tally_symopts so;
	tally_symopts_init(&so);
	char *argv[] = { "x",
			 "--image-path",
			 "/a",
			 "--image-path",
			 "/b",
			 "--debug-dir",
			 "/nonexistent-dbg",
			 "--no-inline",
			 NULL };
	static const struct tally_cmdopts sym = {
		.name = "sym", .summary = "s", .usage = "u", .groups = { &tally_symopts_group }
	};
	void *ctx[] = { &so };
	int first;
	assert_int_equal(tally_opts_parse(&sym, ctx, 8, argv, &first), 0);
	struct tally_resolver_opts ro = { 0 };
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	assert_int_equal(tally_symopts_prepare(&so, &ro, &w), 0);
	assert_string_equal(ro.image_path[0], "/a");
	assert_string_equal(ro.image_path[1], "/b");
	assert_null(ro.image_path[2]);
	assert_string_equal(ro.debug_dirs[0], "/nonexistent-dbg");
	assert_true(ro.no_inline);
	assert_int_equal(w.n, 1);
	assert_str_has(w.v[0], "--debug-dir '/nonexistent-dbg'");
	tally_warnings_release(&w);
	tally_symopts_release(&so);
	tally_symopts_init(&so);
	char *bad[] = { "x", "--debuginfod-timeout", "1e400", NULL };
	assert_int_equal(tally_opts_parse(&sym, ctx, 3, bad, &first), -EINVAL);
	assert_errmsg_has("--debuginfod-timeout");
	tally_symopts_release(&so);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options__groups_get_their_codes),
		cmocka_unit_test(test_options__errors_say_which),
		cmocka_unit_test(test_options__optional_value_and_help),
		cmocka_unit_test(test_options__stop_at_operand),
		cmocka_unit_test(test_options__help_text),
		cmocka_unit_test(test_options__check_finds_bad_tables),
		cmocka_unit_test(test_options__shared_groups),
		cmocka_unit_test(test_options__bound_members),
		cmocka_unit_test(test_options__bound_numbers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
