/* Labels: where the samples of a merged database came from (host=web1,
 * run=before.db). A database of format version 2 lists its label sets in the
 * file 'labels' (docs/format.md); each profile and each stack names one by id,
 * as it names its process by pid. Sets, parsed and compared here. */
#define _GNU_SOURCE
#include "tally/db.h"
#include "tally/util.h"
#include "db-private.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define DAMAGED "the database is damaged: merge it again"

bool tally_label_key_ok(const char *key, size_t n)
{
	if (!n || n > TALLY_LABEL_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)key[i]) || key[i] == '_' || key[i] == '-' ||
		      key[i] == '.'))
			return false;
	return true;
}

bool tally_label_value_ok(const char *v)
{
	size_t n = strlen(v);
	if (!n || n > TALLY_LABEL_VALUE_MAX)
		return false;
	for (const unsigned char *c = (const unsigned char *)v; *c; c++)
		if (*c < ' ' || *c == 0x7f)
			return false;
	return true;
}

int tally_label_parse(const char *s, const char *what, char **key, char **value)
{
	const char *eq = strchr(s, '=');
	char q[TALLY_EXCERPT_SIZE];
	if (!eq || !tally_label_key_ok(s, (size_t)(eq - s)))
		return tally_seterr(
			-EINVAL,
			"invalid %s '%s': expected KEY=VALUE with a KEY of letters, digits, '_', '-' or '.' (at most %d)",
			what, tally_excerpt(q, s), TALLY_LABEL_KEY_MAX);
	if (eq[1] && !tally_label_value_ok(eq + 1))
		return tally_seterr(
			-EINVAL,
			"invalid %s '%s': the value holds a control character or is longer than %d bytes",
			what, tally_excerpt(q, s), TALLY_LABEL_VALUE_MAX);
	*key = xstrndup(s, (size_t)(eq - s));
	*value = xstrdup(eq + 1);
	return 0;
}

const char *tally_labelset_get(const struct tally_labelset *set, const char *key)
{
	for (size_t i = 0; set && i < set->n; i++)
		if (!strcmp(set->v[i].key, key))
			return set->v[i].value;
	return NULL;
}

void tally_labelset_set(struct tally_labelset *set, const char *key, const char *value)
{
	size_t i = 0;
	while (i < set->n && strcmp(set->v[i].key, key) < 0)
		i++;
	bool have = i < set->n && !strcmp(set->v[i].key, key);
	if (!value || !*value) {
		if (have) {
			free(set->v[i].key);
			free(set->v[i].value);
			memmove(&set->v[i], &set->v[i + 1], (set->n - i - 1) * sizeof(*set->v));
			set->n--;
		}
		return;
	}
	if (have) {
		free(set->v[i].value);
		set->v[i].value = xstrdup(value);
		return;
	}
	set->v = xrealloc(set->v, (set->n + 1) * sizeof(*set->v));
	memmove(&set->v[i + 1], &set->v[i], (set->n - i) * sizeof(*set->v));
	set->v[i] = (struct tally_label){ xstrdup(key), xstrdup(value) };
	set->n++;
}

void tally_labelset_copy(struct tally_labelset *dst, const struct tally_labelset *src)
{
	dst->n = src ? src->n : 0;
	dst->v = dst->n ? xmalloc(dst->n * sizeof(*dst->v)) : NULL;
	for (size_t i = 0; i < dst->n; i++)
		dst->v[i] =
			(struct tally_label){ xstrdup(src->v[i].key), xstrdup(src->v[i].value) };
}

void tally_labelset_release(struct tally_labelset *set)
{
	for (size_t i = 0; i < set->n; i++) {
		free(set->v[i].key);
		free(set->v[i].value);
	}
	free(set->v);
	set->v = NULL;
	set->n = 0;
}

int tally_labelset_cmp(const struct tally_labelset *a, const struct tally_labelset *b)
{
	for (size_t i = 0; i < a->n && i < b->n; i++) {
		int c = strcmp(a->v[i].key, b->v[i].key);
		if (!c)
			c = strcmp(a->v[i].value, b->v[i].value);
		if (c)
			return c;
	}
	return a->n < b->n ? -1 : a->n > b->n;
}

uint64_t tally_labelset_hash(const struct tally_labelset *set)
{
	uint64_t h = 0x1abe1;
	for (size_t i = 0; i < set->n; i++) {
		h = tally_hash_bytes(set->v[i].key, strlen(set->v[i].key) + 1, h);
		h = tally_hash_bytes(set->v[i].value, strlen(set->v[i].value) + 1, h);
	}
	return h;
}

void tally_labelset_format(struct strbuf *sb, const struct tally_labelset *set)
{
	for (size_t i = 0; i < set->n; i++)
		strbuf_addf(sb, "%s%s=%s", i ? "," : "", set->v[i].key, set->v[i].value);
}

const struct tally_labelset *tally_db_labelset(const struct tally_db *db, uint32_t id)
{
	static const struct tally_labelset empty;
	return id && id <= db->nlabels ? &db->labels[id - 1] : &empty;
}

const char *tally_db_label(const struct tally_db *db, uint32_t id, const char *key)
{
	return tally_labelset_get(tally_db_labelset(db, id), key);
}

/* ---- the 'labels' file ---- */

static bool set_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !tally_labelset_cmp(&((const struct tally_db *)ctx)->labels[idx], key);
}

int tally_db_parse_label_fields(char *s, const char *what, size_t ln, struct tally_labelset *set)
{
	char q[TALLY_EXCERPT_SIZE];
	char *save = NULL;
	for (char *f = s ? strtok_r(s, "\t", &save) : NULL; f; f = strtok_r(NULL, "\t", &save)) {
		char *eq = strchr(f, '=');
		if (eq)
			tally_unescape(eq + 1);
		if (!eq || !tally_label_key_ok(f, (size_t)(eq - f)) ||
		    !tally_label_value_ok(eq + 1))
			return tally_seterr(-EINVAL,
					    "'%s' line %zu: '%s' is not a label KEY=VALUE (%s)",
					    what, ln, tally_excerpt(q, f), DAMAGED);
		*eq = '\0';
		if (set->n && strcmp(set->v[set->n - 1].key, f) >= 0)
			return tally_seterr(
				-EINVAL,
				"'%s' line %zu: its keys are not sorted or '%s' is given twice (%s)",
				what, ln, tally_excerpt(q, f), DAMAGED);
		tally_labelset_set(set, f, eq + 1);
	}
	return 0;
}

int tally_db_parse_labels(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	size_t cap = db->nlabels;
	if (memchr(buf, '\0', len))
		return tally_seterr(-EINVAL, "'%s' contains binary data (%s)", what, DAMAGED);
	if (len && buf[len - 1] != '\n')
		return tally_seterr(-EINVAL, "'%s': the file ends in the middle of a line (%s)",
				    what, DAMAGED);
	int r = 0;
	char *text = xstrndup(buf, len), *line;
	struct tally_lines L;
	tally_lines_init(&L, text, what);
	struct tally_hidx seen = { 0 };
	for (size_t i = 0; i < db->nlabels; i++)
		tally_hidx_put(&seen, tally_labelset_hash(&db->labels[i]), (uint32_t)i);
	while (!r && (line = tally_lines_next_data(&L))) {
		/* ID<TAB>KEY=VALUE<TAB>KEY=VALUE..., ids from 1 in order, keys sorted */
		char *save = NULL, *f = strtok_r(line, "\t", &save);
		char *idend = NULL;
		errno = 0;
		/* a line of tabs alone has no id */
		unsigned long long id = f ? strtoull(f, &idend, 10) : 0;
		if (!f || !isdigit((unsigned char)*f) || *idend || errno || id != db->nlabels + 1) {
			r = tally_lines_err(
				&L, -EINVAL,
				"expected label set %zu first ('ID<tab>KEY=VALUE...') (%s)",
				db->nlabels + 1, DAMAGED);
			break;
		}
		struct tally_labelset set = { 0 };
		r = tally_db_parse_label_fields(save, what, L.ln, &set);
		if (!r && !set.n)
			r = tally_lines_err(&L, -EINVAL, "label set %llu is empty (%s)", id,
					    DAMAGED);
		uint64_t h = tally_labelset_hash(&set);
		uint32_t twin = r ? TALLY_HIDX_NONE : tally_hidx_get(&seen, h, &set, set_eq, db);
		if (twin != TALLY_HIDX_NONE)
			r = tally_lines_err(&L, -EINVAL,
					    "label set %llu is label set %u again (%s)", id,
					    twin + 1, DAMAGED);
		if (r) {
			tally_labelset_release(&set);
			break;
		}
		GROW(db->labels, cap, db->nlabels + 1);
		db->labels[db->nlabels] = set;
		tally_hidx_put(&seen, h, (uint32_t)db->nlabels++);
	}
	free(text);
	tally_hidx_release(&seen);
	return r;
}

void tally_db_format_labels(const struct tally_db *db, struct strbuf *sb)
{
	strbuf_addstr(sb, "# id\tlabels (KEY=VALUE, by key)\n");
	for (size_t i = 0; i < db->nlabels; i++) {
		strbuf_addf(sb, "%zu", i + 1);
		for (size_t k = 0; k < db->labels[i].n; k++) {
			strbuf_addf(sb, "\t%s=", db->labels[i].v[k].key);
			strbuf_add_escaped(sb, db->labels[i].v[k].value);
		}
		strbuf_addch(sb, '\n');
	}
}

void tally_db_label_keys(const struct tally_db *db, struct strbuf *sb)
{
	char **keys = NULL;
	size_t n = 0, cap = 0;
	for (size_t l = 0; l < db->nlabels; l++)
		for (size_t k = 0; k < db->labels[l].n; k++) {
			bool have = false;
			for (size_t i = 0; i < n && !have; i++)
				have = !strcmp(keys[i], db->labels[l].v[k].key);
			if (!have) {
				GROW(keys, cap, n + 1);
				keys[n++] = db->labels[l].v[k].key;
			}
		}
	if (n)
		strbuf_addstr(sb, "its labels: ");
	for (size_t i = 0; i < n; i++)
		strbuf_addf(sb, "%s%s", i ? ", " : "", keys[i]);
	free(keys);
}
