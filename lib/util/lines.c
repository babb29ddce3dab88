/* Lines of a text, split in place, numbered for errors. */
#define _GNU_SOURCE
#include "tally/util.h"
#include "lib/util/internal.h"

#include <stdio.h>
#include <string.h>

void tally_lines_init(struct tally_lines *L, char *text, const char *what)
{
	L->cur = text;
	L->what = what;
	L->ln = 0;
}

char *tally_lines_next(struct tally_lines *L)
{
	char *s = L->cur;
	if (!s || !*s)
		return NULL;
	char *nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		L->cur = nl + 1;
	} else {
		L->cur = s + strlen(s);
	}
	L->ln++;
	return s;
}

char *tally_lines_next_data(struct tally_lines *L)
{
	char *s;
	while ((s = tally_lines_next(L)) && (!*s || *s == '#'))
		;
	return s;
}

int tally_lines_err(const struct tally_lines *L, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tally_seterr(code, "'%s' line %zu: %s", L->what, L->ln, msg);
}

bool tally_relpath_ok(const char *name, size_t max)
{
	size_t len = strlen(name);
	if (!len || len > max || name[0] == '/')
		return false;
	for (const char *c = name; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			return false;
	for (const char *p = name; *p;) {
		size_t l = strcspn(p, "/");
		if (!l || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += l;
		if (*p == '/' && !*++p)
			return false; /* a trailing slash */
	}
	return true;
}

void tally_last_line(const char *text, struct strbuf *sb)
{
	size_t len = text ? strlen(text) : 0;
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r' ||
		       text[len - 1] == '\t'))
		len--;
	size_t start = len;
	while (start && text[start - 1] != '\n')
		start--;
	strbuf_add_excerpt(sb, text + start, len - start, 200);
}
