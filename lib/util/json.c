/* The JSON writer (tally/json.h): commas placed once, here. */
#include "tally/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

enum { USED = 1, OBJ = 2 };

void tally_json_init(struct tally_json *j, struct strbuf *out)
{
	j->out = out;
	j->depth = 0;
	j->after_key = false;
	j->lv[0] = 0;
	j->deep = NULL;
	j->adeep = 0;
}

static unsigned char *level(struct tally_json *j, size_t d)
{
	if (d <= TALLY_JSON_DEPTH)
		return &j->lv[d];
	GROW(j->deep, j->adeep, d - TALLY_JSON_DEPTH);
	return &j->deep[d - TALLY_JSON_DEPTH - 1];
}

/* before any value or key: the comma that separates it from the previous one */
static void sep(struct tally_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	unsigned char *l = level(j, j->depth);
	if (*l & USED)
		strbuf_addch(j->out, ',');
	*l |= USED;
}

static void json_open(struct tally_json *j, bool obj)
{
	sep(j);
	strbuf_addch(j->out, obj ? '{' : '[');
	j->depth++;
	*level(j, j->depth) = obj ? OBJ : 0;
}

void tally_json_obj(struct tally_json *j)
{
	json_open(j, true);
}

void tally_json_arr(struct tally_json *j)
{
	json_open(j, false);
}

void tally_json_end(struct tally_json *j)
{
	if (!j->depth)
		/* nothing open: a caller's mistake, never a crash (no assert: the core never
		 * aborts) */
		return;
	strbuf_addch(j->out, *level(j, j->depth) & OBJ ? '}' : ']');
	j->depth--;
	if (!j->depth) { /* the document is whole */
		free(j->deep);
		j->deep = NULL;
		j->adeep = 0;
	}
}

void tally_json_key(struct tally_json *j, const char *key)
{
	sep(j);
	strbuf_add_json_str(j->out, key);
	strbuf_addch(j->out, ':');
	j->after_key = true;
}

void tally_json_str(struct tally_json *j, const char *s)
{
	sep(j);
	if (s)
		strbuf_add_json_str(j->out, s);
	else
		strbuf_addstr(j->out, "null");
}

void tally_json_strf(struct tally_json *j, const char *fmt, ...)
{
	struct strbuf t = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&t, fmt, ap);
	va_end(ap);
	tally_json_str(j, t.buf ? t.buf : "");
	strbuf_release(&t);
}

void tally_json_u64(struct tally_json *j, uint64_t v)
{
	sep(j);
	strbuf_add_u64(j->out, v);
}

void tally_json_i64(struct tally_json *j, int64_t v)
{
	sep(j);
	strbuf_add_i64(j->out, v);
}

void tally_json_num(struct tally_json *j, double v, int prec)
{
	sep(j);
	if (isfinite(v))
		strbuf_addf(j->out, "%.*f", prec, v);
	else
		strbuf_addstr(j->out, "null");
}

void tally_json_bool(struct tally_json *j, bool v)
{
	sep(j);
	strbuf_addstr(j->out, v ? "true" : "false");
}

void tally_json_null(struct tally_json *j)
{
	sep(j);
	strbuf_addstr(j->out, "null");
}

void tally_json_kobj(struct tally_json *j, const char *key)
{
	tally_json_key(j, key);
	tally_json_obj(j);
}

void tally_json_karr(struct tally_json *j, const char *key)
{
	tally_json_key(j, key);
	tally_json_arr(j);
}

void tally_json_kstr(struct tally_json *j, const char *key, const char *s)
{
	tally_json_key(j, key);
	tally_json_str(j, s);
}

void tally_json_ku64(struct tally_json *j, const char *key, uint64_t v)
{
	tally_json_key(j, key);
	tally_json_u64(j, v);
}

void tally_json_ki64(struct tally_json *j, const char *key, int64_t v)
{
	tally_json_key(j, key);
	tally_json_i64(j, v);
}

void tally_json_knum(struct tally_json *j, const char *key, double v, int prec)
{
	tally_json_key(j, key);
	tally_json_num(j, v, prec);
}

void tally_json_kbool(struct tally_json *j, const char *key, bool v)
{
	tally_json_key(j, key);
	tally_json_bool(j, v);
}

void tally_json_knull(struct tally_json *j, const char *key)
{
	tally_json_key(j, key);
	tally_json_null(j);
}
