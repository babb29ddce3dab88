/* Demangling (libiberty's cplus_demangle: C++ and Rust) and the short names of
 * narrow text columns (demangle.h). */
#define _GNU_SOURCE
#include "tally/demangle.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

bool tally_is_mangled(const char *name)
{
	return name && name[0] == '_' && (name[1] == 'Z' || name[1] == 'R') && name[2];
}

char *tally_demangle(const char *name)
{
	if (!tally_is_mangled(name))
		return NULL;
	char *d = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
	if (d && !*d) {
		free(d);
		return NULL;
	}
	return d;
}

/* The index just past the bracket group that opens at s[i] ('<', '(', '{' or
 * '['), counting every kind of bracket as one depth; the end of s when it is
 * not closed. */
static size_t group_end(const char *s, size_t i)
{
	int depth = 0;
	for (; s[i]; i++) {
		if (strchr("<({[", s[i]))
			depth++;
		else if (strchr(">)}]", s[i]) && --depth == 0)
			return i + 1;
	}
	return i;
}

static bool starts(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

static bool ends_with(const struct strbuf *sb, size_t from, const char *p)
{
	size_t n = strlen(p);
	return sb->len >= from + n && !memcmp(sb->buf + sb->len - n, p, n);
}

void tally_name_short(struct strbuf *out, const char *name)
{
	static const char *const ops[] = { "<<=", ">>=", "<=>", "->*", "<<", ">>", "<=",
					   ">=",  "->",  "()",  "[]",  "<",  ">" };
	static const char *const quals[] = { " const", " volatile", " &&", " &", " noexcept" };
	size_t base = out->len, i = 0;
	const char *rp = strrchr(name, ')');
	bool sig = rp && (!rp[1] || starts(rp + 1, " const") || starts(rp + 1, " volatile") ||
			  starts(rp + 1, " &") || starts(rp + 1, " [clone") ||
			  starts(rp + 1, " noexcept"));
	if (!strpbrk(name, "(<") || !(sig || strstr(name, "::"))) {
		/* C, kernel ("name [module]") and JIT names ("JS:*<anonymous> /a.js:1"):
		 * a demangled C++ or Rust name has a scope or a parameter list */
		strbuf_addstr(out, name);
		return;
	}
	while (name[i]) {
		char c = name[i];
		bool comp_start = out->len == base || ends_with(out, base, "::");
		if (starts(name + i, "operator") &&
		    (i == 0 || !(isalnum((unsigned char)name[i - 1]) || name[i - 1] == '_'))) {
			strbuf_addstr(out, "operator");
			i += 8;
			for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
				if (starts(name + i, ops[k])) {
					strbuf_addstr(out, ops[k]);
					i += strlen(ops[k]);
					break;
				}
			continue;
		}
		if (c == '<' || c == '{') {
			size_t e = group_end(name, i);
			/* a Rust "<T as Trait>" path, or a lambda: the name itself */
			if (c == '{' || comp_start)
				strbuf_add(out, name + i, e - i);
			i = e;
			continue;
		}
		if (c == '(') {
			if (starts(name + i, "(anonymous namespace)")) {
				strbuf_addstr(out, "(anonymous namespace)");
				i += 21;
				continue;
			}
			i = group_end(name, i);
			for (bool more = true; more;) {
				more = false;
				for (size_t k = 0; k < sizeof(quals) / sizeof(quals[0]); k++)
					if (starts(name + i, quals[k])) {
						i += strlen(quals[k]);
						more = true;
					}
			}
			continue;
		}
		if (c == '[' && starts(name + i, "[abi:")) {
			i = group_end(name, i);
			continue;
		}
		if (c == ' ' && name[i + 1] == '[' && out->len > base) {
			/* " [clone .constprop.0]": another function, said as the demangler says it */
			size_t e = group_end(name, i + 1);
			strbuf_add(out, name + i, e - i);
			i = e;
			continue;
		}
		if (c == ' ') {
			if (ends_with(out, base, "operator"))
				strbuf_addch(out, ' ');
			else if (name[i + 1] == '<' && out->len > base)
				; /* "operator< <int>": the template arguments of an operator */
			else if (out->buf) {
				out->len = base; /* what came before was a return type */
				out->buf[base] = '\0';
			}
			i++;
			continue;
		}
		strbuf_addch(out, c);
		i++;
	}
	if (out->len == base)
		strbuf_addstr(out, name);
}

bool tally_name_matches(const char *name, const char *want)
{
	if (!strcmp(name, want))
		return true;
	struct strbuf sb = STRBUF_INIT;
	tally_name_short(&sb, name);
	bool m = !strcmp(sb.buf, want);
	strbuf_release(&sb);
	if (!m && tally_is_mangled(want)) {
		char *d = tally_demangle(want);
		m = d && !strcmp(d, name);
		free(d);
	}
	return m;
}
