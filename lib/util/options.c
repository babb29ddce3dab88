/* Option tables (see options.h): one parser over getopt_long, and the help,
 * man page and completion words written from the same tables. */
#define _GNU_SOURCE
#include "tally/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Long options' getopt values: LONG_BASE + index into the flattened table. */
#define LONG_BASE 0x10000

struct flat {
	const struct tally_option *o;
	int group;
};

static size_t flatten(const struct tally_cmdopts *cmd, struct flat **out)
{
	size_t n = 0, cap = 0;
	struct flat *f = NULL;
	for (int g = 0; g < TALLY_MAX_OPTGROUPS && cmd->groups[g]; g++)
		for (const struct tally_option *o = cmd->groups[g]->opts;
		     o->short_name || o->long_name; o++) {
			GROW(f, cap, n + 1);
			f[n++] = (struct flat){ o, g };
		}
	*out = f;
	return n;
}

static const struct tally_option help_opt =
	TALLY_OPT('h', "help", TALLY_ARG_NONE, NULL, "show this help", 0);

/* The long option a token such as "--fo=1" names, by getopt's rules: an exact
 * name, else the one name it is a prefix of. Names the candidates of an
 * ambiguous prefix in *ambig. */
static const struct tally_option *find_long(const struct flat *f, size_t n, const char *tok,
					    struct strbuf *ambig)
{
	const char *name = tok + 2;
	size_t len = strcspn(name, "=");
	const struct tally_option *hit = NULL;
	int nhit = 0;
	for (size_t i = 0; i <= n; i++) {
		const struct tally_option *o = i < n ? f[i].o : &help_opt;
		if (!o->long_name || strncmp(o->long_name, name, len))
			continue;
		if (!o->long_name[len])
			return o;
		strbuf_addf(ambig, "%s--%s", nhit ? ", " : "", o->long_name);
		hit = o;
		nhit++;
	}
	return nhit == 1 ? hit : NULL;
}

static int parse_error(const struct flat *f, size_t n, int ret, char **argv)
{
	const char *tok = argv[optind - 1];
	if (optopt && optopt < LONG_BASE) {
		for (size_t i = 0; i < n; i++)
			if (f[i].o->short_name == optopt)
				return tally_seterr(-EINVAL, "option '-%c' needs a value", optopt);
		return tally_seterr(-EINVAL, "option '-%c' is unknown", optopt);
	}
	if (optopt >= LONG_BASE && (size_t)(optopt - LONG_BASE) < n) {
		const struct tally_option *o = f[optopt - LONG_BASE].o;
		if (ret == ':')
			return tally_seterr(-EINVAL, "option '--%s' needs a value", o->long_name);
		return tally_seterr(-EINVAL, "option '--%s' takes no value", o->long_name);
	}
	if (!strncmp(tok, "--", 2)) {
		struct strbuf amb = STRBUF_INIT;
		find_long(f, n, tok, &amb);
		int r;
		if (amb.len && strchr(amb.buf, ','))
			r = tally_seterr(-EINVAL, "option '%.*s' is ambiguous (%s)",
					 (int)strcspn(tok, "="), tok, amb.buf);
		else
			r = tally_seterr(-EINVAL, "option '%.*s' is unknown",
					 (int)strcspn(tok, "="), tok);
		strbuf_release(&amb);
		return r;
	}
	return tally_seterr(-EINVAL, "option '%s' is unknown", tok);
}

/* Sets the member an option is bound to: 0, or the parser's -EINVAL (its
 * message names the option as it is spelled in the help). */
static int bound(const struct tally_option *o, void *ctx, const char *arg)
{
	char *m = (char *)ctx + o->offset;
	char what[64];
	if (o->long_name)
		snprintf(what, sizeof(what), "--%s", o->long_name);
	else
		snprintf(what, sizeof(what), "-%c", o->short_name);
	switch (o->bind) {
	case TALLY_BIND_FLAG: *(bool *)m = true; return 0;
	case TALLY_BIND_STRING: *(const char **)m = arg; return 0;
	case TALLY_BIND_U64: return tally_parse_u64(arg, what, o->min, o->max, (uint64_t *)m);
	case TALLY_BIND_DURATION: return tally_parse_duration(arg, what, (double *)m);
	case TALLY_BIND_SIZE: return tally_parse_size(arg, what, o->min, (uint64_t *)m);
	case TALLY_BIND_NONE: break;
	}
	return tally_seterr(-EINVAL, "option '%s' is bound to nothing", what);
}

int tally_opts_parse(const struct tally_cmdopts *cmd, void *const *ctxs, int argc, char **argv,
		     int *first)
{
	struct flat *f;
	size_t n = flatten(cmd, &f);
	struct option *lo = xcalloc(n + 2, sizeof(*lo));
	struct strbuf so = STRBUF_INIT;
	size_t nl = 0;
	/* '+': stop at the first operand; ':': tell a missing value from an unknown option */
	strbuf_addstr(&so, cmd->stop_at_nonopt ? "+:h" : ":h");
	for (size_t i = 0; i < n; i++) {
		const struct tally_option *o = f[i].o;
		int has = o->arg == TALLY_ARG_REQUIRED   ? required_argument
			  : o->arg == TALLY_ARG_OPTIONAL ? optional_argument
							 : no_argument;
		if (o->short_name)
			strbuf_addf(&so, "%c%s", o->short_name,
				    has == required_argument   ? ":"
				    : has == optional_argument ? "::"
							       : "");
		if (o->long_name)
			lo[nl++] = (struct option){ o->long_name, has, NULL, LONG_BASE + (int)i };
	}
	lo[nl++] = (struct option){ "help", no_argument, NULL, 'h' };

	int ret = 0, opt;
	opterr = 0;
	optind = 0; /* glibc: start afresh (a process may parse more than once) */
	while ((opt = getopt_long(argc, argv, so.buf, lo, NULL)) != -1) {
		if (opt == '?' || opt == ':') {
			ret = parse_error(f, n, opt, argv);
			break;
		}
		if (opt == 'h') {
			ret = TALLY_OPTS_HELP;
			break;
		}
		size_t i = n;
		if (opt >= LONG_BASE)
			i = (size_t)(opt - LONG_BASE);
		else
			for (i = 0; i < n && f[i].o->short_name != opt; i++)
				;
		if (i >= n) { /* cannot happen: getopt returns only what it was given */
			ret = tally_seterr(-EINVAL, "option '%s' is unknown", argv[optind - 1]);
			break;
		}
		const struct tally_optgroup *g = cmd->groups[f[i].group];
		const struct tally_option *o = f[i].o;
		void *ctx = ctxs ? ctxs[f[i].group] : NULL;
		int r = o->bind == TALLY_BIND_NONE ? g->handle(ctx, o->code, optarg)
						   : bound(o, ctx, optarg);
		if (r < 0) {
			ret = r;
			break;
		}
	}
	*first = optind;
	free(lo);
	free(f);
	strbuf_release(&so);
	return ret;
}

/* "-F, --freq HZ", "    --explain[=IMAGE]" */
static void spelling(const struct tally_option *o, struct strbuf *sb)
{
	if (o->short_name)
		strbuf_addf(sb, "-%c%s", o->short_name, o->long_name ? ", " : "");
	else
		strbuf_addstr(sb, "    ");
	if (o->long_name)
		strbuf_addf(sb, "--%s", o->long_name);
	if (o->argname) {
		if (o->arg == TALLY_ARG_OPTIONAL)
			strbuf_addf(sb, "[=%s]", o->argname);
		else
			strbuf_addf(sb, " %s", o->argname);
	}
}

#define HELP_COL 27

static void help_line(const struct tally_option *o, struct strbuf *out)
{
	struct strbuf left = STRBUF_INIT;
	strbuf_addstr(&left, "  ");
	spelling(o, &left);
	strbuf_add(out, left.buf, left.len);
	if (left.len + 2 > HELP_COL)
		strbuf_addstr(out, "  ");
	else
		strbuf_addf(out, "%*s", (int)(HELP_COL - left.len), "");
	for (const char *p = o->help; *p;) {
		size_t l = strcspn(p, "\n");
		strbuf_add(out, p, l);
		strbuf_addch(out, '\n');
		p += l;
		if (*p == '\n' && *++p)
			strbuf_addf(out, "%*s", HELP_COL, "");
	}
	strbuf_release(&left);
}

void tally_opts_help(const struct tally_cmdopts *cmd, struct strbuf *out)
{
	strbuf_addf(out, "usage: tally %s %s\n\n%s\n", cmd->name, cmd->usage, cmd->summary);
	for (int g = 0; g < TALLY_MAX_OPTGROUPS && cmd->groups[g]; g++) {
		const struct tally_optgroup *gr = cmd->groups[g];
		strbuf_addch(out, '\n');
		if (gr->title)
			strbuf_addf(out, "%s:\n", gr->title);
		for (const struct tally_option *o = gr->opts; o->short_name || o->long_name; o++)
			help_line(o, out);
	}
	strbuf_addch(out, '\n');
	help_line(&help_opt, out);
	if (cmd->footer)
		strbuf_addf(out, "\n%s", cmd->footer);
}

/* Text in roff: backslashes and minus signs escaped, no line starting with a
 * control character. */
static void roff(struct strbuf *out, const char *s, size_t len)
{
	bool bol = out->len == 0 || out->buf[out->len - 1] == '\n';
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (bol && (c == '.' || c == '\''))
			strbuf_addstr(out, "\\&");
		bol = false;
		if (c == '\\')
			strbuf_addstr(out, "\\e");
		else if (c == '-')
			strbuf_addstr(out, "\\-");
		else
			strbuf_addch(out, c);
		if (c == '\n')
			bol = true;
	}
}

static void roff_str(struct strbuf *out, const char *s)
{
	roff(out, s, strlen(s));
}

void tally_opts_man(const struct tally_cmdopts *cmd, const char *version, struct strbuf *out)
{
	strbuf_addf(out, ".TH TALLY-%s 1 \"\" \"tally %s\" \"tally manual\"\n", cmd->name, version);
	for (char *p = out->buf + 9; *p && *p != ' '; p++)
		if (*p >= 'a' && *p <= 'z')
			*p = (char)(*p - 'a' + 'A');
	strbuf_addstr(out, ".SH NAME\n");
	strbuf_addf(out, "tally\\-%s \\- ", cmd->name);
	roff_str(out, cmd->summary);
	strbuf_addstr(out, "\n.SH SYNOPSIS\n.B tally ");
	roff_str(out, cmd->name);
	strbuf_addch(out, '\n');
	roff_str(out, cmd->usage);
	strbuf_addstr(out, "\n.SH OPTIONS\n");
	for (int g = 0; g < TALLY_MAX_OPTGROUPS && cmd->groups[g]; g++) {
		const struct tally_optgroup *gr = cmd->groups[g];
		if (gr->title) {
			strbuf_addstr(out, ".SS ");
			roff_str(out, gr->title);
			strbuf_addch(out, '\n');
		}
		for (const struct tally_option *o = gr->opts; o->short_name || o->long_name; o++) {
			struct strbuf sp = STRBUF_INIT;
			spelling(o, &sp);
			strbuf_addstr(out, ".TP\n.B ");
			roff_str(out, sp.buf + (o->short_name ? 0 : 4));
			strbuf_addch(out, '\n');
			for (const char *p = o->help; *p;) {
				size_t l = strcspn(p, "\n");
				roff(out, p, l);
				strbuf_addch(out, '\n');
				p += l + (p[l] == '\n');
			}
			strbuf_release(&sp);
		}
	}
	if (cmd->footer) {
		strbuf_addstr(out, ".SH NOTES\n.nf\n");
		roff_str(out, cmd->footer);
		if (out->buf[out->len - 1] != '\n')
			strbuf_addch(out, '\n');
		strbuf_addstr(out, ".fi\n");
	}
	strbuf_addstr(out, ".SH SEE ALSO\n.BR tally (1)\n");
}

void tally_opts_words(const struct tally_cmdopts *cmd, struct strbuf *out)
{
	for (int g = 0; g < TALLY_MAX_OPTGROUPS && cmd->groups[g]; g++)
		for (const struct tally_option *o = cmd->groups[g]->opts;
		     o->short_name || o->long_name; o++) {
			if (o->short_name)
				strbuf_addf(out, "%s-%c", out->len ? " " : "", o->short_name);
			if (o->long_name)
				strbuf_addf(out, "%s--%s", out->len ? " " : "", o->long_name);
		}
	strbuf_addf(out, "%s--help", out->len ? " " : "");
}

bool tally_opts_takes_value(const struct tally_cmdopts *cmd, const char *word)
{
	for (int g = 0; g < TALLY_MAX_OPTGROUPS && cmd->groups[g]; g++)
		for (const struct tally_option *o = cmd->groups[g]->opts;
		     o->short_name || o->long_name; o++) {
			bool hit = (word[0] == '-' && word[1] == o->short_name && o->short_name &&
				    !word[2]) ||
				   (o->long_name && !strncmp(word, "--", 2) &&
				    !strcmp(word + 2, o->long_name));
			if (hit)
				return o->arg == TALLY_ARG_REQUIRED;
		}
	return false;
}

int tally_opts_check(const struct tally_cmdopts *cmd)
{
	struct flat *f;
	size_t n = flatten(cmd, &f);
	int ret = 0;
	if (!cmd->name || !cmd->summary || !cmd->usage)
		ret = tally_seterr(-EINVAL, "command '%s': name, summary or usage missing",
				   cmd->name ? cmd->name : "?");
	for (size_t i = 0; i < n && !ret; i++) {
		const struct tally_option *o = f[i].o;
		char nm[64];
		if (o->long_name)
			snprintf(nm, sizeof(nm), "--%s", o->long_name);
		else
			snprintf(nm, sizeof(nm), "-%c", o->short_name);
		if (!o->help || !*o->help)
			ret = tally_seterr(-EINVAL, "%s: option '%s' has no help", cmd->name, nm);
		else if ((o->arg != TALLY_ARG_NONE) != (o->argname != NULL))
			ret = tally_seterr(-EINVAL,
					   "%s: option '%s': a value name goes with a value",
					   cmd->name, nm);
		else if (o->bind == TALLY_BIND_NONE && !cmd->groups[f[i].group]->handle)
			ret = tally_seterr(-EINVAL,
					   "%s: option '%s' has no handler and is bound to nothing",
					   cmd->name, nm);
		else if ((o->bind == TALLY_BIND_FLAG) !=
			 (o->arg == TALLY_ARG_NONE && o->bind != TALLY_BIND_NONE))
			ret = tally_seterr(-EINVAL, "%s: option '%s': a flag takes no value",
					   cmd->name, nm);
		else if (o->short_name == 'h' || (o->long_name && !strcmp(o->long_name, "help")))
			ret = tally_seterr(-EINVAL, "%s: '-h/--help' is every command's own",
					   cmd->name);
		for (size_t j = i + 1; j < n && !ret; j++) {
			const struct tally_option *p = f[j].o;
			if (o->short_name && o->short_name == p->short_name)
				ret = tally_seterr(-EINVAL, "%s: '-%c' is given twice", cmd->name,
						   o->short_name);
			else if (o->long_name && p->long_name &&
				 !strcmp(o->long_name, p->long_name))
				ret = tally_seterr(-EINVAL, "%s: '--%s' is given twice", cmd->name,
						   o->long_name);
			else if (f[i].group == f[j].group && o->bind == TALLY_BIND_NONE &&
				 p->bind == TALLY_BIND_NONE && o->code == p->code)
				ret = tally_seterr(
					-EINVAL,
					"%s: option '%s' shares its code with another of its group",
					cmd->name, nm);
		}
	}
	free(f);
	return ret;
}
