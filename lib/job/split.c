/* Shell-style words without a shell: the quoting of a control file's lines
 * and of cmd's command (tally_job_split, job.h). Nothing is ever expanded:
 * '$' and '`' outside single quotes are refused rather than kept, so that a
 * line meant for a shell fails loudly instead of running with a literal
 * "$HOME" (and no command substitution can ever happen). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally/job.h"

void tally_job_argv_free(char **argv)
{
	if (!argv)
		return;
	for (char **a = argv; *a; a++)
		free(*a);
	free(argv);
}

char **tally_job_argv_dup(char *const *argv)
{
	size_t n = 0;
	while (argv && argv[n])
		n++;
	char **v = xcalloc(n + 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = xstrdup(argv[i]);
	return v;
}

static int refuse_expansion(char c)
{
	if (c == '$')
		return tally_seterr(
			-EINVAL, "'$' is not expanded (no variables here): quote it as '$' or \\$");
	return tally_seterr(
		-EINVAL, "'`' is not run (no command substitution here): quote it as '`' or \\`");
}

int tally_job_split(const char *line, char ***out, size_t *nout)
{
	char **v = NULL;
	size_t n = 0, alloc = 0;
	struct strbuf w = STRBUF_INIT;
	bool inword = false;
	int ret = 0;
	const char *p = line;

	for (;;) {
		char c = *p;
		if (!c || c == '\n' || c == ' ' || c == '\t' || c == '\r') {
			if (inword) {
				STRLIST_PUSH(v, n, alloc, strbuf_detach(&w));
				inword = false;
			}
			if (!c)
				break;
			p++;
			continue;
		}
		if (c == '#' && !inword)
			break;
		inword = true;
		if (c == '\'') {
			const char *e = strchr(p + 1, '\'');
			if (!e) {
				ret = tally_seterr(-EINVAL, "unterminated ' quote");
				goto fail;
			}
			strbuf_add(&w, p + 1, (size_t)(e - p - 1));
			p = e + 1;
		} else if (c == '"') {
			p++;
			for (;;) {
				if (!*p) {
					ret = tally_seterr(-EINVAL, "unterminated \" quote");
					goto fail;
				}
				if (*p == '"') {
					p++;
					break;
				}
				if (*p == '\\' && p[1] && strchr("\\\"$`", p[1])) {
					strbuf_addch(&w, p[1]);
					p += 2;
					continue;
				}
				if (*p == '$' || *p == '`') {
					ret = refuse_expansion(*p);
					goto fail;
				}
				strbuf_addch(&w, *p++);
			}
		} else if (c == '\\') {
			if (!p[1]) {
				ret = tally_seterr(-EINVAL,
						   "a backslash ends the line (nothing to escape)");
				goto fail;
			}
			strbuf_addch(&w, p[1]);
			p += 2;
		} else if (c == '$' || c == '`') {
			ret = refuse_expansion(c);
			goto fail;
		} else {
			strbuf_addch(&w, c);
			p++;
		}
	}
	if (!v)
		v = xcalloc(1, sizeof(*v));
	*out = v;
	if (nout)
		*nout = n;
	strbuf_release(&w);
	return 0;
fail:
	strbuf_release(&w);
	tally_job_argv_free(v);
	return ret;
}
