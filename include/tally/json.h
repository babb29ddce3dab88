/* A JSON writer into a strbuf: containers, keys and values, with the commas
 * between them placed by the writer, never by its caller, and every string
 * through strbuf_add_json_str (escaped; bytes that are not UTF-8 become
 * U+FFFD), so what it writes is always valid JSON. No spaces are added.
 *
 *   struct tally_json j;
 *   tally_json_init(&j, &out);
 *   tally_json_obj(&j);
 *   tally_json_kstr(&j, "name", name);
 *   tally_json_karr(&j, "rows");
 *   ... tally_json_u64(&j, n) ...
 *   tally_json_end(&j);     (the array)
 *   tally_json_end(&j);     (the object)
 *
 * Nesting has no limit (a call tree can be 500,000 levels deep): levels past
 * TALLY_JSON_DEPTH live on the heap, freed when the document is closed.
 * A key outside an object, or an end with nothing open, is the caller's
 * mistake: the output is then not JSON, but nothing aborts. */
#ifndef TALLY_JSON_H
#define TALLY_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/util.h"

#define TALLY_JSON_DEPTH 64

struct tally_json {
	struct strbuf *out;
	size_t depth;
	bool after_key;
	/* per level: bit 0, something was written there (the next one needs a
	 * comma); bit 1, an object (closed by '}', else ']') */
	unsigned char lv[TALLY_JSON_DEPTH + 1];
	unsigned char *deep; /* levels past TALLY_JSON_DEPTH */
	size_t adeep;
};

void tally_json_init(struct tally_json *j, struct strbuf *out);
void tally_json_obj(struct tally_json *j);
void tally_json_arr(struct tally_json *j);
/* Closes the innermost object or array. */
void tally_json_end(struct tally_json *j);
void tally_json_key(struct tally_json *j, const char *key);
void tally_json_str(struct tally_json *j, const char *s); /* NULL: null */
void tally_json_u64(struct tally_json *j, uint64_t v);
void tally_json_i64(struct tally_json *j, int64_t v);
/* printf("%.*f", prec, v); NaN and infinities (which JSON has not): null */
void tally_json_num(struct tally_json *j, double v, int prec);
void tally_json_bool(struct tally_json *j, bool v);
void tally_json_null(struct tally_json *j);
/* printf-formatted text as a JSON string */
void tally_json_strf(struct tally_json *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* key and value in one call */
void tally_json_kobj(struct tally_json *j, const char *key);
void tally_json_karr(struct tally_json *j, const char *key);
void tally_json_kstr(struct tally_json *j, const char *key, const char *s);
void tally_json_ku64(struct tally_json *j, const char *key, uint64_t v);
void tally_json_ki64(struct tally_json *j, const char *key, int64_t v);
void tally_json_knum(struct tally_json *j, const char *key, double v, int prec);
void tally_json_kbool(struct tally_json *j, const char *key, bool v);
void tally_json_knull(struct tally_json *j, const char *key);

#endif
