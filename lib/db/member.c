/* The names a database's files have inside an archive of it (db.h): an
 * image's copy is images/ID/NAME, so that a database read from an archive
 * finds it (the resolver) and the archive's writer and readers agree. */
#define _GNU_SOURCE
#include "tally/db.h"
#include "tally/util.h"

#include <ctype.h>
#include <string.h>

void tally_db_add_safe_name(struct strbuf *out, const char *name)
{
	size_t start = out->len;
	for (const char *c = name; *c; c++) {
		if (!strncmp(c, " (deleted)", 10))
			break;
		unsigned char ch = (unsigned char)*c;
		strbuf_addch(out, isalnum(ch) || ch == '.' || ch == '_' || ch == '+' || ch == '-'
					  ? (char)ch
					  : '_');
	}
	if (out->len == start)
		strbuf_addch(out, '_');
	if (out->buf[start] == '.')
		out->buf[start] = '_'; /* never '.', '..' or a hidden name */
}

void tally_db_image_member(const struct tally_db_image *di, struct strbuf *out)
{
	strbuf_addstr(out, "images/");
	tally_db_add_safe_name(out, di->id);
	strbuf_addch(out, '/');
	tally_db_add_safe_name(out, tally_basename(di->path));
}
