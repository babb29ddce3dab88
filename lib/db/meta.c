/* The key-value store of a session (tally_meta, tally/db.h): what a
 * recording sets, a database's session file holds, and every reader gets. */
#define _GNU_SOURCE
#include "tally/db.h"
#include "tally/util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void tally_meta_set(struct tally_meta *m, const char *key, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->kv[i].key, key)) {
			free(m->kv[i].value);
			m->kv[i].value = strbuf_detach(&sb);
			return;
		}
	GROW(m->kv, m->alloc, m->n + 1);
	m->kv[m->n].key = xstrdup(key);
	m->kv[m->n].value = strbuf_detach(&sb);
	m->n++;
}

const char *tally_meta_get(const struct tally_meta *m, const char *key)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->kv[i].key, key))
			return m->kv[i].value;
	return NULL;
}

void tally_meta_release(struct tally_meta *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->kv[i].key);
		free(m->kv[i].value);
	}
	free(m->kv);
	memset(m, 0, sizeof(*m));
}
