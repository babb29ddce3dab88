/* Unit tests for lib/util: strbuf, the hash index, the option parsers, atomic
 * file writes, tree removal, dirname, write-all and read-fd. */
#define _GNU_SOURCE
#include "unit.h"

#include <inttypes.h>

#include <pthread.h>
#include <time.h>

#include "tally/json.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- strbuf ---- */

static void test_util__strbuf_init_empty(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	assert_null(sb.buf);
	assert_int_equal(sb.len, 0);
	strbuf_reset(&sb); /* on a never-grown buffer: must not touch NULL */
	assert_int_equal(sb.len, 0);
	char *s = strbuf_detach(&sb);
	assert_non_null(s);
	assert_string_equal(s, "");
	free(s);
	strbuf_release(&sb);
}

static void test_util__strbuf_add(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	strbuf_add(&sb, "abc", 3);
	strbuf_addstr(&sb, "def");
	strbuf_addch(&sb, 'g');
	strbuf_add(&sb, "h\0i", 3); /* binary data: len counts the NUL */
	assert_int_equal(sb.len, 10);
	assert_memory_equal(sb.buf, "abcdefgh\0i", 10);
	assert_int_equal(sb.buf[10], '\0');
	assert_true(sb.alloc > sb.len);
	strbuf_reset(&sb);
	assert_int_equal(sb.len, 0);
	assert_string_equal(sb.buf, "");
	strbuf_addstr(&sb, "x");
	assert_string_equal(sb.buf, "x");
	strbuf_release(&sb);
	assert_null(sb.buf);
	assert_int_equal(sb.len, 0);
	assert_int_equal(sb.alloc, 0);
}

static void test_util__strbuf_add_grows(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	char expect[10001];
	for (int i = 0; i < 10000; i++) {
		strbuf_addch(&sb, (char)('a' + i % 26));
		expect[i] = (char)('a' + i % 26);
	}
	expect[10000] = '\0';
	assert_int_equal(sb.len, 10000);
	assert_string_equal(sb.buf, expect);
	assert_true(sb.alloc >= 10001);
	strbuf_release(&sb);
}

static void test_util__strbuf_addf(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%d-%s", 42, "x");
	assert_string_equal(sb.buf, "42-x");
	assert_int_equal(sb.len, 4);
	strbuf_addf(&sb, "%s", "");
	assert_int_equal(sb.len, 4);
	strbuf_release(&sb);
}

static void test_util__strbuf_addf_growth(void **state)
{
	(void)state;
	/* longer than the initial allocation, appended to existing content, so the
	 * second vsnprintf pass (after growing) must produce the whole text */
	char big[1000];
	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "start:");
	strbuf_addf(&sb, "[%s|%d]", big, 7);
	assert_int_equal(sb.len, 6 + 1 + 999 + 3);
	assert_int_equal(strlen(sb.buf), sb.len);
	assert_memory_equal(sb.buf, "start:[", 7);
	assert_memory_equal(sb.buf + 7, big, 999);
	assert_string_equal(sb.buf + 7 + 999, "|7]");
	/* many small appends across several doublings */
	strbuf_reset(&sb);
	for (int i = 0; i < 2000; i++)
		strbuf_addf(&sb, "%04d,", i);
	assert_int_equal(sb.len, 2000 * 5);
	assert_memory_equal(sb.buf, "0000,0001,", 10);
	assert_string_equal(sb.buf + 1999 * 5, "1999,");
	strbuf_release(&sb);
}

static void test_util__strbuf_json(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	strbuf_add_json_str(&sb, "plain");
	assert_string_equal(sb.buf, "\"plain\"");
	strbuf_reset(&sb);
	strbuf_add_json_str(&sb, "a\"b\\c");
	assert_string_equal(sb.buf, "\"a\\\"b\\\\c\"");
	strbuf_reset(&sb);
	strbuf_add_json_str(&sb, "l1\nl2\tt\rr");
	assert_string_equal(sb.buf, "\"l1\\nl2\\tt\\rr\"");
	strbuf_reset(&sb);
	strbuf_add_json_str(&sb, "\x01\x1f\x7f");
	assert_string_equal(sb.buf, "\"\\u0001\\u001f\x7f\"");
	strbuf_reset(&sb);
	strbuf_add_json_str(&sb, "");
	assert_string_equal(sb.buf, "\"\"");
	strbuf_reset(&sb);
	/* UTF-8 passes through unchanged */
	strbuf_add_json_str(&sb, "caf\xc3\xa9");
	assert_string_equal(sb.buf, "\"caf\xc3\xa9\"");
	strbuf_reset(&sb);
	/* every byte that is not UTF-8 is one U+FFFD: a stray continuation, a
	 * lone lead, an overlong '/', a surrogate, past U+10FFFF, a cut sequence */
	strbuf_add_json_str(&sb, "a\x80"
				 "b\xff"
				 "c\xc0\xaf"
				 "d\xed\xa0\x80"
				 "e\xf4\x90\x80\x80"
				 "f\xe2\x82");
	assert_string_equal(sb.buf, "\"a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd"
				    "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
				    "e\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
				    "f\xef\xbf\xbd\xef\xbf\xbd\"");
	strbuf_reset(&sb);
	/* 4-byte UTF-8 kept; a C1 control (valid UTF-8) escaped */
	strbuf_add_json_str(&sb, "\xf0\x9f\x94\xa5\xc2\x85");
	assert_string_equal(sb.buf, "\"\xf0\x9f\x94\xa5\\u0085\"");
	strbuf_reset(&sb);
	/* runs of plain bytes (copied whole) around every kind of escape */
	strbuf_add_json_str(
		&sb, "run one\"run two\\run three\x01run four\xc3\xa9run five\x80run six\nend");
	assert_string_equal(
		sb.buf,
		"\"run one\\\"run two\\\\run three\\u0001run four\xc3\xa9run five\xef\xbf\xbd"
		"run six\\nend\"");
	strbuf_release(&sb);
}

/* The line reader: lines split in place and numbered from 1, the last one
 * without its newline too, empty lines counted; errors say what and where. */
static void test_util__lines(void **state)
{
	(void)state;
	char text[] = "first\n\nthird\nlast";
	struct tally_lines L;
	tally_lines_init(&L, text, "db/session");
	assert_string_equal(tally_lines_next(&L), "first");
	assert_int_equal(L.ln, 1);
	assert_string_equal(tally_lines_next(&L), "");
	assert_string_equal(tally_lines_next(&L), "third");
	assert_int_equal(L.ln, 3);
	assert_int_equal(tally_lines_err(&L, -EINVAL, "expected %s", "'key: value'"), -EINVAL);
	assert_string_equal(tally_errmsg(), "'db/session' line 3: expected 'key: value'");
	assert_string_equal(tally_lines_next(&L), "last");
	assert_int_equal(L.ln, 4);
	assert_null(tally_lines_next(&L));
	assert_null(tally_lines_next(&L));
	assert_int_equal(L.ln, 4);
	char empty[] = "";
	tally_lines_init(&L, empty, "x");
	assert_null(tally_lines_next(&L));
	assert_int_equal(L.ln, 0);
}

static void test_util__json_writer(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	struct tally_json j;
	tally_json_init(&j, &sb);
	tally_json_obj(&j);
	tally_json_kstr(&j, "a", "x\"y");
	tally_json_karr(&j, "list");
	tally_json_u64(&j, 1);
	tally_json_i64(&j, -2);
	tally_json_obj(&j);
	tally_json_end(&j);
	tally_json_arr(&j);
	tally_json_end(&j);
	tally_json_num(&j, 0.5, 2);
	tally_json_num(&j, 0.0 / 0.0, 2);
	tally_json_str(&j, NULL);
	tally_json_end(&j);
	tally_json_kobj(&j, "o");
	tally_json_kbool(&j, "t", true);
	tally_json_knull(&j, "n");
	tally_json_key(&j, "f");
	tally_json_strf(&j, "0x%x", 255);
	tally_json_end(&j);
	tally_json_ku64(&j, "last", 18446744073709551615ULL);
	tally_json_end(&j);
	assert_string_equal(
		sb.buf,
		"{\"a\":\"x\\\"y\",\"list\":[1,-2,{},[],0.50,null,null],"
		"\"o\":{\"t\":true,\"n\":null,\"f\":\"0xff\"},\"last\":18446744073709551615}");
	assert_int_equal(j.depth, 0);
	/* two documents in one buffer: the writer starts over */
	strbuf_reset(&sb);
	tally_json_init(&j, &sb);
	tally_json_arr(&j);
	tally_json_end(&j);
	assert_string_equal(sb.buf, "[]");
	/* nesting without a limit: 100,000 levels (a call tree can be deeper) */
	strbuf_reset(&sb);
	tally_json_init(&j, &sb);
	for (int i = 0; i < 100000; i++) {
		tally_json_obj(&j);
		tally_json_kstr(&j, "k", "v");
		tally_json_karr(&j, "c");
	}
	for (int i = 0; i < 100000; i++) {
		tally_json_end(&j);
		tally_json_end(&j);
	}
	assert_int_equal(sb.len, 100000 * strlen("{\"k\":\"v\",\"c\":[]}"));
	assert_memory_equal(sb.buf, "{\"k\":\"v\",\"c\":[{\"k\"", 18);
	assert_memory_equal(sb.buf + sb.len - 4, "]}]}", 4);
	assert_null(j.deep);
	strbuf_release(&sb);
}

static void test_util__strbuf_escape(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	strbuf_add_escaped(&sb, "a\\b\nc\td\re \"q\"");
	assert_string_equal(sb.buf, "a\\\\b\\nc\\td\\re \"q\"");
	strbuf_reset(&sb);
	strbuf_add_escaped(&sb, "");
	assert_int_equal(sb.len, 0);
	strbuf_release(&sb);

	char u1[] = "a\\b\\nc\\td\\re";
	tally_unescape(u1);
	assert_string_equal(u1, "a\\b\nc\td\re");
	/* unknown escapes and a trailing backslash are kept */
	char u2[] = "\\x\\0end\\";
	tally_unescape(u2);
	assert_string_equal(u2, "\\x\\0end\\");
	char u3[] = "";
	tally_unescape(u3);
	assert_string_equal(u3, "");
}

static void test_util__strbuf_escape_roundtrip(void **state)
{
	(void)state;
	/* every string over an alphabet of the troublesome characters survives
	 * escape + unescape, and the escaped form has no line or field breaks */
	static const char alpha[] = { '\\', 'n', 't', 'r', '\n', '\t', '\r', 'a' };
	char s[7], *copy;
	uint32_t seed = 12345;
	for (int iter = 0; iter < 20000; iter++) {
		int len = iter % 7;
		for (int i = 0; i < len; i++) {
			seed = seed * 1103515245u + 12345u;
			s[i] = alpha[(seed >> 16) % sizeof(alpha)];
		}
		s[len] = '\0';
		struct strbuf sb = STRBUF_INIT;
		strbuf_add_escaped(&sb, s);
		copy = strbuf_detach(&sb);
		if (strpbrk(copy, "\n\t\r"))
			fail_msg("escaped form of a %d-byte string still has a break", len);
		tally_unescape(copy);
		if (strcmp(copy, s))
			fail_msg("escape round trip changed a %d-byte string", len);
		free(copy);
	}
}

static void test_util__strbuf_detach(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "owned");
	char *s = strbuf_detach(&sb);
	assert_string_equal(s, "owned");
	assert_null(sb.buf);
	assert_int_equal(sb.len, 0);
	assert_int_equal(sb.alloc, 0);
	/* the buffer is reusable and independent of the detached string */
	strbuf_addstr(&sb, "again");
	assert_string_equal(sb.buf, "again");
	assert_string_equal(s, "owned");
	free(s);
	strbuf_release(&sb);
}

static void test_util__strbuf_read_file(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *p = unit_path(dir, "f");
	char data[100000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('0' + i % 10);
	unit_write(p, data, sizeof(data));
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "pre:");
	assert_int_equal(strbuf_read_file(&sb, p, 0), 0);
	assert_int_equal(sb.len, 4 + sizeof(data));
	assert_memory_equal(sb.buf, "pre:", 4);
	assert_memory_equal(sb.buf + 4, data, sizeof(data));
	assert_int_equal(sb.buf[sb.len], '\0');
	strbuf_reset(&sb);
	assert_true(strbuf_read_file(&sb, p, 1000) < 0);
	assert_errmsg_has(p);
	strbuf_reset(&sb);
	char *missing = unit_path(dir, "missing");
	assert_int_equal(strbuf_read_file(&sb, missing, 0), -ENOENT);
	assert_errmsg_has(missing);
	strbuf_release(&sb);
	assert_int_equal(tally_remove_tree(dir), 0);
	free(missing);
	free(p);
	free(dir);
}

/* ---- hash index ---- */

struct items {
	uint64_t *keys;
	size_t n;
	int eq_calls;
};

static bool items_eq(const void *ctx, uint32_t idx, const void *key)
{
	struct items *it = (struct items *)ctx;
	it->eq_calls++;
	assert_true(idx < it->n);
	return it->keys[idx] == *(const uint64_t *)key;
}

static void test_util__hidx_empty(void **state)
{
	(void)state;
	struct tally_hidx h = { 0 };
	struct items it = { NULL, 0, 0 };
	uint64_t k = 5;
	assert_int_equal(tally_hidx_get(&h, 123, &k, items_eq, &it), TALLY_HIDX_NONE);
	assert_int_equal(it.eq_calls, 0);
	tally_hidx_release(&h);
	tally_hidx_release(&h); /* twice is harmless */
}

static void test_util__hidx_many(void **state)
{
	(void)state;
	enum { N = 20000 };
	struct items it = { calloc(N, sizeof(uint64_t)), 0, 0 };
	struct tally_hidx h = { 0 };
	size_t resizes = 0, last_mask = 0;
	for (size_t i = 0; i < N; i++) {
		uint64_t key = i * 7919 + 3;
		uint64_t hash = tally_hash_u64(key);
		assert_int_equal(tally_hidx_get(&h, hash, &key, items_eq, &it), TALLY_HIDX_NONE);
		it.keys[it.n] = key;
		tally_hidx_put(&h, hash, (uint32_t)it.n);
		it.n++;
		if (h.mask != last_mask) {
			resizes++;
			last_mask = h.mask;
		}
		assert_int_equal(h.count, it.n);
		/* capacity stays a power of two with the load at most 1/2 */
		assert_int_equal((h.mask + 1) & h.mask, 0);
		assert_true(h.count * 2 <= h.mask + 1);
	}
	assert_true(resizes >= 5);
	for (size_t i = 0; i < N; i++) {
		uint64_t key = i * 7919 + 3;
		assert_int_equal(tally_hidx_get(&h, tally_hash_u64(key), &key, items_eq, &it), i);
	}
	for (uint64_t key = 1; key < 3000; key += 7919) {
		/* not of the form i*7919+3 */
		uint64_t k = key + 1;
		assert_int_equal(tally_hidx_get(&h, tally_hash_u64(k), &k, items_eq, &it),
				 TALLY_HIDX_NONE);
	}
	uint64_t absent = 5;
	assert_int_equal(tally_hidx_get(&h, tally_hash_u64(absent), &absent, items_eq, &it),
			 TALLY_HIDX_NONE);
	tally_hidx_release(&h);
	assert_int_equal(h.mask, 0);
	assert_int_equal(h.count, 0);
	assert_null(h.slots);
	free(it.keys);
}

static void test_util__hidx_collisions(void **state)
{
	(void)state;
	/* every key under one hash: only the eq callback tells them apart. The hash
	 * is all ones so probing starts at the last slot and must wrap around. */
	enum { N = 300 };
	struct items it = { calloc(N, sizeof(uint64_t)), 0, 0 };
	struct tally_hidx h = { 0 };
	const uint64_t H = UINT64_MAX;
	for (size_t i = 0; i < N; i++) {
		it.keys[i] = 1000 + i;
		tally_hidx_put(&h, H, (uint32_t)i);
		it.n++;
	}
	for (size_t i = 0; i < N; i++) {
		uint64_t k = 1000 + i;
		assert_int_equal(tally_hidx_get(&h, H, &k, items_eq, &it), i);
	}
	uint64_t missing = 999;
	assert_int_equal(tally_hidx_get(&h, H, &missing, items_eq, &it), TALLY_HIDX_NONE);
	/* same key under a different hash is not found: the hash is part of the key */
	uint64_t k0 = 1000;
	it.eq_calls = 0;
	assert_int_equal(tally_hidx_get(&h, 0x1234, &k0, items_eq, &it), TALLY_HIDX_NONE);
	tally_hidx_release(&h);
	free(it.keys);
}

static void test_util__hash_bytes(void **state)
{
	(void)state;
	const char a[] = "abcdefghijklmnopq";
	/* deterministic, sensitive to content, length and seed */
	assert_int_equal(tally_hash_bytes(a, 17, 1), tally_hash_bytes(a, 17, 1));
	assert_true(tally_hash_bytes(a, 17, 1) != tally_hash_bytes(a, 17, 2));
	assert_true(tally_hash_bytes(a, 16, 1) != tally_hash_bytes(a, 17, 1));
	assert_true(tally_hash_bytes(a, 3, 0) != tally_hash_bytes("abd", 3, 0));
	/* a trailing NUL byte is not the same as a shorter input */
	assert_true(tally_hash_bytes("ab\0", 3, 0) != tally_hash_bytes("ab", 2, 0));
	assert_true(tally_hash_u64(1) != tally_hash_u64(2));
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return x < y ? -1 : x > y;
}

static void test_util__qsort(void **state)
{
	(void)state;
	tally_qsort(NULL, 0, sizeof(int), cmp_int); /* no array at all: fine */
	int one[] = { 5 };
	tally_qsort(one, 1, sizeof(int), cmp_int);
	assert_int_equal(one[0], 5);
	int v[] = { 9, -3, 7, 0, 7, 2 };
	tally_qsort(v, ARRAY_SIZE(v), sizeof(int), cmp_int);
	int want[] = { -3, 0, 2, 7, 7, 9 };
	assert_memory_equal(v, want, sizeof(want));
	/* tally_cmp_u64: unsigned order, past INT64_MAX too (a difference cast
	 * to int would get these wrong) */
	uint64_t u[] = { UINT64_MAX, 1, (uint64_t)1 << 63, 0, 1, ((uint64_t)1 << 32) + 1 };
	tally_qsort(u, ARRAY_SIZE(u), sizeof(*u), tally_cmp_u64);
	uint64_t uwant[] = { 0, 1, 1, ((uint64_t)1 << 32) + 1, (uint64_t)1 << 63, UINT64_MAX };
	assert_memory_equal(u, uwant, sizeof(uwant));
	assert_int_equal(tally_cmp_u64(&u[1], &u[2]), 0);
}

/* ---- tally_parse_u64 ---- */

static void test_util__parse_u64_good(void **state)
{
	(void)state;
	uint64_t v = 0;
	assert_int_equal(tally_parse_u64("0", "n", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(tally_parse_u64("10", "n", 0, 10, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(tally_parse_u64("5", "n", 5, 5, &v), 0);
	assert_int_equal(v, 5);
	assert_int_equal(tally_parse_u64("007", "n", 0, 10, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(tally_parse_u64("18446744073709551615", "n", 0, UINT64_MAX, &v), 0);
	assert_int_equal(v, UINT64_MAX);
}

static void test_util__parse_u64_bounds(void **state)
{
	(void)state;
	uint64_t v = 77;
	assert_int_equal(tally_parse_u64("11", "--freq", 1, 10, &v), -EINVAL);
	assert_int_equal(v, 77); /* untouched on failure */
	assert_errmsg_has("--freq");
	assert_errmsg_has("'11'");
	assert_errmsg_has("between 1 and 10");
	assert_int_equal(tally_parse_u64("0", "--freq", 1, 10, &v), -EINVAL);
	assert_errmsg_has("between 1 and 10");
	assert_int_equal(v, 77);
}

static void test_util__parse_u64_garbage(void **state)
{
	(void)state;
	const char *bad[] = { "",   "abc",  "-1",  "+1",  " 1", "1 ",
			      "1x", "0x10", "1.5", "1e3", "--", NULL };
	for (int i = 0; bad[i]; i++) {
		uint64_t v = 77;
		int r = tally_parse_u64(bad[i], "--count", 0, UINT64_MAX, &v);
		if (r != -EINVAL)
			fail_msg("tally_parse_u64('%s') returned %d, want -EINVAL", bad[i], r);
		assert_int_equal(v, 77);
		assert_errmsg_has("--count");
	}
	uint64_t v = 0;
	assert_int_equal(tally_parse_u64(NULL, "--count", 0, 10, &v), -EINVAL);
}

static void test_util__parse_u64_overflow(void **state)
{
	(void)state;
	uint64_t v = 77;
	assert_int_equal(tally_parse_u64("18446744073709551616", "n", 0, UINT64_MAX, &v), -EINVAL);
	assert_int_equal(tally_parse_u64("99999999999999999999999", "n", 0, UINT64_MAX, &v),
			 -EINVAL);
	assert_int_equal(v, 77);
	assert_errmsg_has("99999999999999999999999");
}

static void test_util__parse_u64_says_range(void **state)
{
	(void)state;
	uint64_t v = 77;
	/* whatever is wrong, the error says what is allowed */
	assert_int_equal(tally_parse_u64("12x", "--freq", 1, 1000000, &v), -EINVAL);
	assert_errmsg_has("from 1 to 1000000");
	assert_int_equal(tally_parse_u64("99999999999999999999999", "--freq", 1, 1000000, &v),
			 -EINVAL);
	assert_errmsg_has("between 1 and 1000000");
	assert_int_equal(v, 77);
}

/* ---- growth that cannot be satisfied ---- */

static void test_util__strbuf_grow_overflow(void **state)
{
	(void)state;
	alarm(10); /* the doubling loop used to wrap to 0 and spin: a hang is a failure */
	struct strbuf sb = STRBUF_INIT;
	assert_int_equal(strbuf_grow(&sb, SIZE_MAX), -EOVERFLOW);
	assert_null(sb.buf);
	strbuf_addstr(&sb, "abc");
	size_t alloc = sb.alloc;
	char *buf = sb.buf;
	/* len + extra + 1 near SIZE_MAX */
	assert_int_equal(strbuf_grow(&sb, SIZE_MAX - 10), -EOVERFLOW);
	/* len + extra + 1 wraps to 0 */
	assert_int_equal(strbuf_grow(&sb, SIZE_MAX - 3), -EOVERFLOW);
	/* more than an object may hold */
	assert_int_equal(strbuf_grow(&sb, (size_t)PTRDIFF_MAX), -EOVERFLOW);
	/* untouched on failure */
	assert_ptr_equal(sb.buf, buf);
	assert_int_equal(sb.alloc, alloc);
	assert_int_equal(sb.len, 3);
	assert_string_equal(sb.buf, "abc");
	/* and a growth that fits still works */
	assert_int_equal(strbuf_grow(&sb, 100000), 0);
	assert_true(sb.alloc >= 100004);
	assert_string_equal(sb.buf, "abc");
	strbuf_release(&sb);
	alarm(0);
}

static void test_util__grow_try_overflow(void **state)
{
	(void)state;
	alarm(10);
	uint64_t *v = NULL;
	size_t alloc = 0;
	assert_int_equal(tally_grow_try((void **)&v, &alloc, 10, sizeof(*v)), 0);
	assert_true(alloc >= 10);
	uint64_t *keep = v;
	size_t before = alloc;
	/* want * size past SIZE_MAX (it used to wrap to a small allocation) */
	assert_int_equal(tally_grow_try((void **)&v, &alloc, SIZE_MAX / 4, sizeof(*v)), -EOVERFLOW);
	assert_int_equal(tally_grow_try((void **)&v, &alloc, SIZE_MAX, sizeof(*v)), -EOVERFLOW);
	assert_int_equal(tally_grow_try((void **)&v, &alloc, SIZE_MAX, 1), -EOVERFLOW);
	assert_ptr_equal(v, keep);
	assert_int_equal(alloc, before);
	free(v);
	alarm(0);
}

/* ---- quoting damaged input ---- */

/* numbers in decimal without printf: the same text as printf's, at the ends of the ranges */
static void test_util__add_numbers(void **state)
{
	(void)state;
	const uint64_t u[] = { 0, 7, 10, 99, 1000000007, UINT64_MAX - 1, UINT64_MAX };
	const int64_t i[] = { 0, -1, 1, -10, INT64_MAX, INT64_MIN, INT64_MIN + 1 };
	char want[32];
	for (size_t k = 0; k < ARRAY_SIZE(u); k++) {
		struct strbuf sb = STRBUF_INIT;
		strbuf_addstr(&sb, "x");
		strbuf_add_u64(&sb, u[k]);
		snprintf(want, sizeof(want), "x%" PRIu64, u[k]);
		assert_string_equal(sb.buf, want);
		strbuf_release(&sb);
		strbuf_add_i64(&sb, i[k]);
		snprintf(want, sizeof(want), "%" PRId64, i[k]);
		assert_string_equal(sb.buf, want);
		strbuf_release(&sb);
	}
}

/* the one UTF-8 validator: every ill-formed kind refused, C1 on request */
static void test_util__utf8_seq(void **state)
{
	(void)state;
	const unsigned char *u;
#define SEQ(str, n, c1) (u = (const unsigned char *)(str), tally_utf8_seq(u, n, c1))
	assert_int_equal(SEQ("\xc3\xa9", 2, false), 2);           /* e acute */
	assert_int_equal(SEQ("\xe2\x82\xac", 3, false), 3);       /* the euro sign */
	assert_int_equal(SEQ("\xf0\x9f\x98\x80", 4, false), 4);   /* U+1F600 */
	assert_int_equal(SEQ("\xe2\x82\xac", 2, false), 0);       /* cut short */
	assert_int_equal(SEQ("\xc0\xaf", 2, true), 0);             /* overlong '/' */
	assert_int_equal(SEQ("\xe0\x80\xaf", 3, true), 0);         /* overlong, 3 bytes */
	assert_int_equal(SEQ("\xed\xa0\x80", 3, true), 0);         /* a surrogate */
	assert_int_equal(SEQ("\xf4\x90\x80\x80", 4, true), 0);     /* past U+10FFFF */
	assert_int_equal(SEQ("\xc3\x28", 2, true), 0);             /* no continuation */
	assert_int_equal(SEQ("\xc2\x9b", 2, false), 0);            /* C1 CSI: refused */
	assert_int_equal(SEQ("\xc2\x9b", 2, true), 2);             /* ... unless asked */
#undef SEQ
}

static void test_util__excerpt(void **state)
{
	(void)state;
	char q[TALLY_EXCERPT_SIZE];
	assert_string_equal(tally_excerpt(q, "plain text: 1,2"), "plain text: 1,2");
	assert_string_equal(tally_excerpt(q, NULL), "");
	/* a terminal escape sequence and other controls are written out, never sent raw */
	assert_string_equal(tally_excerpt(q, "\x1b]0;owned\x07\x1b[2J"),
			    "\\x1b]0;owned\\x07\\x1b[2J");
	assert_string_equal(tally_excerpt(q, "a\tb\nc\rd\\e\x7f"), "a\\tb\\nc\\rd\\\\e\\x7f");
	/* UTF-8 stays readable; bytes that are not UTF-8 are escaped, and so are C1 controls */
	assert_string_equal(tally_excerpt(q, "caf\xc3\xa9 \xe2\x82\xac"),
			    "caf\xc3\xa9 \xe2\x82\xac");
	assert_string_equal(tally_excerpt(q, "\xff\xc3(\xc0\xaf"), "\\xff\\xc3(\\xc0\\xaf");
	assert_string_equal(tally_excerpt(q, "\xc2\x9b" "31m"), "\\xc2\\x9b31m"); /* CSI as U+009B */
	assert_string_equal(tally_excerpt(q, "\xed\xa0\x80"), "\\xed\\xa0\\x80");    /* a surrogate */
	assert_string_equal(tally_excerpt(q, "\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
	/* at most 40 bytes of the input, marked as cut, never cut inside a character */
	char in[100];
	memset(in, 'x', sizeof(in) - 1);
	in[99] = '\0';
	tally_excerpt(q, in);
	assert_int_equal(strlen(q), 43);
	assert_string_equal(q + 40, "...");
	memset(in, 'x', 39);
	memcpy(in + 39, "\xc3\xa9tail", 7);
	tally_excerpt(q, in);
	assert_string_equal(q + 39, "...");
	/* the worst case fits the buffer: 40 bytes, each escaped to four */
	memset(in, 1, 99);
	tally_excerpt(q, in);
	assert_int_equal(strlen(q), 40 * 4 + 3);
	struct strbuf sb = STRBUF_INIT;
	strbuf_add_excerpt(&sb, "a\0b", 3, 10);
	assert_string_equal(sb.buf, "a\\x00b");
	strbuf_release(&sb);
	/* the value parsers quote what they were given the same way */
	uint64_t v;
	assert_int_equal(tally_parse_u64("\x1b[31m7", "--count", 0, 9, &v), -EINVAL);
	assert_errmsg_has("'\\x1b[31m7'");
	if (strchr(tally_errmsg(), 0x1b))
		fail_msg("raw escape in '%s'", tally_errmsg());
}

/* ---- tally_parse_duration ---- */

static void test_util__parse_duration_good(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		double want;
	} ok[] = {
		{ "1.5", 1.5 }, { "30", 30 },     { "30s", 30 },    { "5m", 300 },   { "2h", 7200 },
		{ "500ms", 0.5 }, { "1d", 86400 }, { ".25", 0.25 }, { "0.001", 0.001 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		double d = -1;
		int r = tally_parse_duration(ok[i].s, "--duration", &d);
		if (r != 0)
			fail_msg("tally_parse_duration('%s') failed: %s", ok[i].s, tally_errmsg());
		if (fabs(d - ok[i].want) > 1e-9 * ok[i].want)
			fail_msg("tally_parse_duration('%s') = %g, want %g", ok[i].s, d,
				 ok[i].want);
	}
}

/* As people write durations, and as tally_parse_duration reads them back. */
static void test_util__format_duration(void **state)
{
	(void)state;
	static const struct {
		double s;
		const char *want;
	} v[] = {
		{ 3600, "1h" },
		{ 5400, "90m" },
		{ 86400, "1d" },
		{ 90, "90s" },
		{ 60, "1m" },
		{ 1, "1s" },
		{ 0.25, "250ms" },
		{ 1.5, "1.5s" },
		{ 7 * 86400, "7d" },
		{ 3601, "3601s" },
		/* never an exponent, which the parser would not read back */
		{ 1234.5, "1234.5s" },
		{ 0.0125, "12.5ms" },
		{ 86400.25, "86400.25s" },
	};
	char buf[48];
	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		assert_string_equal(tally_format_duration(v[i].s, buf, sizeof(buf)), v[i].want);
		double back = 0;
		assert_int_equal(tally_parse_duration(buf, "--epoch-every", &back), 0);
		assert_true(fabs(back - v[i].s) < 1e-9 * v[i].s);
	}
}

static void test_util__parse_duration_bad(void **state)
{
	(void)state;
	const char *bad[] = { "-1", "0",  "0s",  "0ms", "abc",   "5x", "",     "5 s", "5ss", "5sm",
			      "s",  "ms", "inf", "nan", "1e400", ".",  "-0.5", " 5",  NULL };
	for (int i = 0; bad[i]; i++) {
		double d = 42;
		int r = tally_parse_duration(bad[i], "--duration", &d);
		if (r != -EINVAL)
			fail_msg("tally_parse_duration('%s') returned %d (%g), want -EINVAL",
				 bad[i], r, d);
		if (d != 42)
			fail_msg("tally_parse_duration('%s') wrote %g on failure", bad[i], d);
		assert_errmsg_has("--duration");
	}
	double d;
	assert_int_equal(tally_parse_duration(NULL, "--duration", &d), -EINVAL);
}

static void test_util__parse_duration_infinite(void **state)
{
	(void)state;
	/* 1e308 is finite text; as days it is not a finite time */
	char big[400];
	big[0] = '1';
	memset(big + 1, '0', 308);
	strcpy(big + 309, "d");
	double d = 42;
	assert_int_equal(tally_parse_duration(big, "--keep", &d), -EINVAL);
	assert_true(d == 42);
	assert_errmsg_has("--keep");
	assert_errmsg_has("at most 36525d");
	strcpy(big + 309, "h");
	assert_int_equal(tally_parse_duration(big, "--keep", &d), -EINVAL);
	strcpy(big + 309, "");
	assert_int_equal(tally_parse_duration(big, "--keep", &d), -EINVAL);
	/* the bound itself, and just past it */
	assert_int_equal(tally_parse_duration("36525d", "--keep", &d), 0);
	assert_true(d == TALLY_DURATION_MAX);
	assert_int_equal(tally_parse_duration("36525.5d", "--keep", &d), -EINVAL);
	assert_int_equal(tally_parse_duration("876601h", "--keep", &d), -EINVAL);
	/* a 400-digit number overflows strtod itself */
	memset(big, '9', 399);
	big[399] = '\0';
	assert_int_equal(tally_parse_duration(big, "--keep", &d), -EINVAL);
	assert_errmsg_has("...'"); /* quoted, cut */
}

static void test_util__parse_size_range(void **state)
{
	(void)state;
	uint64_t v = 77;
	assert_int_equal(tally_parse_size("1024T", "--max-db-size", 0, &v), 0);
	assert_int_equal(v, 1ull << 50);
	assert_int_equal(tally_parse_size("1048576T", "--max-db-size", 0, &v), 0);
	assert_int_equal(v, TALLY_SIZE_MAX);
	const char *big[] = { "1048577T", "99999999999999999999", "18446744073709551615",
			      "16777216TiB", NULL };
	for (int i = 0; big[i]; i++) {
		v = 77;
		if (tally_parse_size(big[i], "--max-db-size", 4096, &v) != -EINVAL)
			fail_msg("'%s' was accepted as a size", big[i]);
		assert_int_equal(v, 77);
		assert_errmsg_has("at least 4.0 KiB and at most 1.0 EiB");
	}
}

/* ---- tally_parse_cpulist ---- */

static void test_util__parse_cpulist_good(void **state)
{
	(void)state;
	bool set[8];
	memset(set, 1, sizeof(set));
	assert_int_equal(tally_parse_cpulist("0,2-3", 4, set), 0);
	assert_true(set[0]);
	assert_false(set[1]);
	assert_true(set[2]);
	assert_true(set[3]);
	assert_true(set[4]); /* beyond ncpus: not touched */

	assert_int_equal(tally_parse_cpulist("all", 8, set), 0);
	for (int i = 0; i < 8; i++)
		assert_true(set[i]);

	assert_int_equal(tally_parse_cpulist("5", 8, set), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(set[i], i == 5);

	assert_int_equal(tally_parse_cpulist("1-1,7,3-4", 8, set), 0);
	bool want[8] = { false, true, false, true, true, false, false, true };
	assert_memory_equal(set, want, sizeof(want));

	/* overlapping ranges are a union */
	assert_int_equal(tally_parse_cpulist("0-2,1-3", 8, set), 0);
	bool want2[8] = { true, true, true, true, false, false, false, false };
	assert_memory_equal(set, want2, sizeof(want2));
}

static void test_util__parse_cpulist_out_of_range(void **state)
{
	(void)state;
	bool set[4];
	assert_int_equal(tally_parse_cpulist("4", 4, set), -EINVAL);
	assert_errmsg_has("'4'");
	assert_errmsg_has("CPU 4 does not exist");
	assert_errmsg_has("0-3");
	assert_int_equal(tally_parse_cpulist("0,2-9", 4, set), -EINVAL);
	assert_errmsg_has("CPU 9");
	/* a number past long: the CPU named as written, never strtol's LONG_MAX */
	assert_int_equal(tally_parse_cpulist("99999999999999999999999", 4, set), -EINVAL);
	assert_errmsg_has("CPU 99999999999999999999999 does not exist");
	assert_errmsg_has("0-3");
	assert_int_equal(tally_parse_cpulist("1-99999999999999999999999", 4, set), -EINVAL);
	assert_errmsg_has("CPU 99999999999999999999999 does not exist");
}

static void test_util__parse_cpulist_bad(void **state)
{
	(void)state;
	const char *bad[] = { "3-1",   "a",  "",   "1-",    "-1",  "1,,2", "1;2",
			      "1-2-3", " 1", "1 ", "all,1", "ALL", NULL };
	for (int i = 0; bad[i]; i++) {
		bool set[8];
		int r = tally_parse_cpulist(bad[i], 8, set);
		if (r != -EINVAL)
			fail_msg("tally_parse_cpulist('%s') returned %d, want -EINVAL", bad[i], r);
		assert_errmsg_has("invalid CPU list");
	}
}

/* ---- tally_parse_intlist ---- */

static void test_util__parse_intlist_good(void **state)
{
	(void)state;
	int *v = NULL;
	size_t n = 0;
	assert_int_equal(tally_parse_intlist("1,2,3", "--pid", &v, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(v[0], 1);
	assert_int_equal(v[1], 2);
	assert_int_equal(v[2], 3);
	free(v);

	assert_int_equal(tally_parse_intlist("2147483647", "--pid", &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0], INT_MAX);
	free(v);

	/* more than the initial growth step */
	struct strbuf sb = STRBUF_INIT;
	for (int i = 1; i <= 100; i++)
		strbuf_addf(&sb, "%s%d", i > 1 ? "," : "", i * 10);
	assert_int_equal(tally_parse_intlist(sb.buf, "--pid", &v, &n), 0);
	assert_int_equal(n, 100);
	for (int i = 0; i < 100; i++)
		assert_int_equal(v[i], (i + 1) * 10);
	free(v);
	strbuf_release(&sb);
}

static void test_util__parse_intlist_bad(void **state)
{
	(void)state;
	const char *bad[] = {
		"",    "0",  "-1",  "1,0", "a", "1,a", "1,,2", "2147483648", "99999999999999999999",
		"1 2", " 1", "1.5", NULL
	};
	for (int i = 0; bad[i]; i++) {
		int dummy = 0;
		int *v = &dummy; /* must be reset to NULL */
		size_t n = 99;
		int r = tally_parse_intlist(bad[i], "--pid", &v, &n);
		if (r != -EINVAL)
			fail_msg("tally_parse_intlist('%s') returned %d, want -EINVAL", bad[i], r);
		assert_null(v);
		assert_int_equal(n, 0);
		assert_errmsg_has("--pid");
		assert_errmsg_has("from 1 to 2147483647");
	}
}

/* ---- atomic writes and tree removal ---- */

static void test_util__write_file_atomic(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *p = unit_path(dir, "out.txt");
	assert_int_equal(tally_write_file_atomic(p, "hello\n", 6), 0);
	size_t len;
	char *got = unit_read(p, &len);
	assert_non_null(got);
	assert_int_equal(len, 6);
	assert_string_equal(got, "hello\n");
	free(got);
	assert_int_equal(unit_dir_entries(dir), 1); /* no temporary left behind */

	/* replacing: the new content, still one file */
	char big[200000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 31);
	assert_int_equal(tally_write_file_atomic(p, big, sizeof(big)), 0);
	got = unit_read(p, &len);
	assert_int_equal(len, sizeof(big));
	assert_memory_equal(got, big, sizeof(big));
	free(got);
	assert_int_equal(unit_dir_entries(dir), 1);

	/* empty content */
	assert_int_equal(tally_write_file_atomic(p, "", 0), 0);
	got = unit_read(p, &len);
	assert_int_equal(len, 0);
	free(got);

	assert_int_equal(tally_remove_tree(dir), 0);
	free(p);
	free(dir);
}

static void test_util__write_file_atomic_fails(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();

	/* a directory that does not exist */
	char *p = unit_path(dir, "nodir/out.txt");
	int r = tally_write_file_atomic(p, "x", 1);
	assert_true(r < 0);
	assert_errmsg_has(p);
	free(p);

	/* the parent is a regular file */
	char *file = unit_path(dir, "plain");
	unit_write_str(file, "x");
	p = unit_path(dir, "plain/out.txt");
	r = tally_write_file_atomic(p, "x", 1);
	assert_true(r < 0);
	assert_errmsg_has(p);
	free(p);

	/* the target is a directory: the rename fails and the temporary is removed */
	char *sub = unit_path(dir, "sub");
	assert_int_equal(mkdir(sub, 0755), 0);
	char *inner = unit_path(sub, "keep");
	unit_write_str(inner, "keep");
	r = tally_write_file_atomic(sub, "x", 1);
	assert_true(r < 0);
	assert_errmsg_has(sub);
	assert_int_equal(unit_dir_entries(dir), 2); /* plain and sub only */
	assert_true(unit_exists(inner));

	/* an unwritable directory (root ignores permissions: skip that part then) */
	if (geteuid() != 0) {
		char *ro = unit_path(dir, "ro");
		assert_int_equal(mkdir(ro, 0555), 0);
		p = unit_path(ro, "out.txt");
		r = tally_write_file_atomic(p, "x", 1);
		assert_true(r < 0);
		assert_errmsg_has(p);
		assert_int_equal(unit_dir_entries(ro), 0);
		chmod(ro, 0755);
		free(p);
		free(ro);
	} else {
		/* /proc accepts no new files even from root */
		r = tally_write_file_atomic("/proc/tally-unit-test", "x", 1);
		assert_true(r < 0);
		assert_errmsg_has("/proc/tally-unit-test");
	}

	assert_int_equal(tally_remove_tree(dir), 0);
	free(inner);
	free(sub);
	free(file);
	free(dir);
}

/* Symbolic links planted where the old writer put its temporary (PATH.tmp.PID
 * for this pid and the next 200) and at the new pattern's fixed part: the
 * write goes to the file asked, the link targets stay as they were, and the
 * links are left alone. */
static void test_util__write_file_atomic_planted_links(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *victim = unit_path(dir, "victim");
	unit_write_str(victim, "precious\n");
	assert_int_equal(chmod(victim, 0644), 0);
	char *out = unit_path(dir, "out");
	char name[4096];
	int me = (int)getpid();
	for (int pid = me; pid <= me + 200; pid++) {
		snprintf(name, sizeof(name), "%s.tmp.%d", out, pid);
		assert_int_equal(symlink(victim, name), 0);
	}
	snprintf(name, sizeof(name), "%s.tmp-XXXXXX", out);
	assert_int_equal(symlink(victim, name), 0);
	size_t before = unit_dir_entries(dir);

	assert_int_equal(tally_write_file_atomic(out, "profile\n", 8), 0);
	size_t len;
	char *got = unit_read(victim, &len);
	assert_string_equal(got, "precious\n");
	free(got);
	got = unit_read(out, &len);
	assert_string_equal(got, "profile\n");
	free(got);
	struct stat st;
	assert_int_equal(lstat(out, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	/* a profile is private: 0600 whatever the umask */
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(lstat(victim, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	/* the new file and nothing else: no temporary left, no link removed */
	assert_int_equal(unit_dir_entries(dir), before + 1);

	/* a link at the output path itself is replaced, not followed */
	char *linked = unit_path(dir, "linked");
	assert_int_equal(symlink(victim, linked), 0);
	assert_int_equal(tally_write_file_atomic(linked, "new\n", 4), 0);
	got = unit_read(victim, &len);
	assert_string_equal(got, "precious\n");
	free(got);
	assert_int_equal(lstat(linked, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);

	assert_int_equal(tally_remove_tree(dir), 0);
	free(linked);
	free(out);
	free(victim);
	free(dir);
}

/* Modes: 0600 for a new file whatever the umask; a file of ours that is
 * replaced keeps the mode its owner gave it; another mode (a pid file's 0644)
 * is taken with the umask applied. */
static void test_util__write_file_atomic_modes(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *p = unit_path(dir, "out");
	mode_t old = umask(0);
	struct stat st;
	assert_int_equal(tally_write_file_atomic(p, "a", 1), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(chmod(p, 0640), 0);
	assert_int_equal(tally_write_file_atomic(p, "b", 1), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);

	char *pidf = unit_path(dir, "pid");
	umask(022);
	assert_int_equal(tally_write_file_atomic_mode(pidf, "1\n", 2, 0666), 0);
	assert_int_equal(stat(pidf, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	umask(old);
	assert_int_equal(unit_dir_entries(dir), 2);

	assert_int_equal(tally_remove_tree(dir), 0);
	free(pidf);
	free(p);
	free(dir);
}

/* Opening what another user may have put there: each kind of non-file is
 * refused at once (a FIFO with no writer would block a plain open forever),
 * with a message naming the path and what it is. */
static void test_util__open_regular(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *file = unit_path(dir, "file");
	unit_write_str(file, "0123456789");
	char *fifo = unit_path(dir, "fifo");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	char *link = unit_path(dir, "link");
	assert_int_equal(symlink(file, link), 0);
	char *zero = unit_path(dir, "zero");
	assert_int_equal(symlink("/dev/zero", zero), 0);
	char *lfifo = unit_path(dir, "lfifo");
	assert_int_equal(symlink(fifo, lfifo), 0);
	char *sub = unit_path(dir, "sub");
	assert_int_equal(mkdir(sub, 0700), 0);

	struct stat st;
	int fd = tally_open_regular(AT_FDCWD, file, 0, 0, &st);
	assert_true(fd >= 0);
	assert_int_equal(st.st_size, 10);
	/* the descriptor blocks as usual: O_NONBLOCK was for the open only */
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);

	double t0 = tally_now_mono();
	assert_int_equal(tally_open_regular(AT_FDCWD, fifo, 0, 0, NULL), -EINVAL);
	assert_errmsg_has(fifo);
	assert_errmsg_has("is a FIFO, not a regular file");
	assert_int_equal(tally_open_regular(AT_FDCWD, lfifo, TALLY_OPEN_FOLLOW, 0, NULL), -EINVAL);
	assert_errmsg_has("is a FIFO, not a regular file");
	assert_true(tally_now_mono() - t0 < 1.0);

	assert_int_equal(tally_open_regular(AT_FDCWD, link, 0, 0, NULL), -ELOOP);
	assert_errmsg_has(link);
	assert_errmsg_has("is a symbolic link, not a regular file");
	fd = tally_open_regular(AT_FDCWD, link, TALLY_OPEN_FOLLOW, 0, NULL);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tally_open_regular(AT_FDCWD, zero, 0, 0, NULL), -ELOOP);
	assert_int_equal(tally_open_regular(AT_FDCWD, zero, TALLY_OPEN_FOLLOW, 0, NULL), -EINVAL);
	assert_errmsg_has("is a character device, not a regular file");
	assert_int_equal(tally_open_regular(AT_FDCWD, sub, 0, 0, NULL), -EISDIR);
	assert_errmsg_has("is a directory, not a regular file");
	char *missing = unit_path(dir, "missing");
	assert_int_equal(tally_open_regular(AT_FDCWD, missing, 0, 0, NULL), -ENOENT);
	assert_errmsg_has(missing);
	assert_int_equal(tally_open_regular(AT_FDCWD, file, 0, 9, NULL), -EFBIG);
	assert_errmsg_has(file);
	fd = tally_open_regular(AT_FDCWD, file, 0, 10, NULL);
	assert_true(fd >= 0);
	close(fd);
	/* relative to a directory */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	fd = tally_open_regular(dfd, "file", 0, 0, NULL);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tally_open_regular(dfd, "fifo", 0, 0, NULL), -EINVAL);
	assert_errmsg_has("'fifo' is a FIFO");
	close(dfd);

	/* the whole file, appended; bounded */
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "pre:");
	assert_int_equal(tally_read_regular(&sb, AT_FDCWD, link, TALLY_OPEN_FOLLOW, 0), 0);
	assert_string_equal(sb.buf, "pre:0123456789");
	assert_int_equal(sb.len, 14);
	strbuf_reset(&sb);
	assert_int_equal(tally_read_regular(&sb, AT_FDCWD, file, 0, 5), -EFBIG);
	assert_int_equal(tally_read_regular(&sb, AT_FDCWD, zero, TALLY_OPEN_FOLLOW, 1 << 20),
			 -EINVAL);
	assert_int_equal(tally_read_regular(&sb, AT_FDCWD, fifo, 0, 0), -EINVAL);
	strbuf_release(&sb);

	assert_int_equal(tally_remove_tree(dir), 0);
	free(missing);
	free(sub);
	free(lfifo);
	free(zero);
	free(link);
	free(fifo);
	free(file);
	free(dir);
}

static void test_util__remove_tree(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *outside = unit_tmpdir();
	char *precious = unit_path(outside, "precious");
	unit_write_str(precious, "do not delete");

	char *a = unit_path(dir, "a");
	char *ab = unit_path(dir, "a/b");
	char *abc = unit_path(dir, "a/b/c");
	assert_int_equal(mkdir(a, 0755), 0);
	assert_int_equal(mkdir(ab, 0755), 0);
	assert_int_equal(mkdir(abc, 0755), 0);
	for (int i = 0; i < 50; i++) {
		char name[64];
		snprintf(name, sizeof(name), "a/b/f%d", i);
		char *f = unit_path(dir, name);
		unit_write_str(f, "x");
		free(f);
	}
	char *f1 = unit_path(dir, ".hidden");
	unit_write_str(f1, "x");
	/* a symlink to a directory outside: the link goes, the target stays */
	char *link = unit_path(dir, "a/link");
	assert_int_equal(symlink(outside, link), 0);
	char *dangling = unit_path(dir, "dangling");
	assert_int_equal(symlink("/nonexistent/tally", dangling), 0);

	assert_int_equal(tally_remove_tree(dir), 0);
	assert_false(unit_exists(dir));
	assert_true(unit_exists(precious));

	/* a missing path is not an error; a single file is removed */
	assert_int_equal(tally_remove_tree(dir), 0);
	assert_int_equal(tally_remove_tree(precious), 0);
	assert_false(unit_exists(precious));
	assert_int_equal(tally_remove_tree(outside), 0);
	assert_false(unit_exists(outside));

	free(dangling);
	free(link);
	free(f1);
	free(abc);
	free(ab);
	free(a);
	free(precious);
	free(outside);
	free(dir);
}

/* ---- small helpers ---- */

static void test_util__basename(void **state)
{
	(void)state;
	assert_string_equal(tally_basename("/usr/lib/libc.so.6"), "libc.so.6");
	assert_string_equal(tally_basename("libc.so.6"), "libc.so.6");
	assert_string_equal(tally_basename("/dir/"), "");
	assert_string_equal(tally_basename(""), "");
}

static void test_util__seterr(void **state)
{
	(void)state;
	assert_int_equal(tally_seterr(EINVAL, "x %d", 1), -EINVAL);
	assert_string_equal(tally_errmsg(), "x 1");
	assert_int_equal(tally_seterr(-ENOENT, "cannot open '%s'", "f"), -ENOENT);
	assert_string_equal(tally_errmsg(), "cannot open 'f'");
	/* truncated to the buffer, never overflowing it */
	char big[4000];
	memset(big, 'e', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tally_seterr(EIO, "%s", big);
	assert_true(strlen(tally_errmsg()) < sizeof(big) - 1);
	assert_true(strlen(tally_errmsg()) > 100);
}

static void test_util__grow(void **state)
{
	(void)state;
	int *v = NULL;
	size_t alloc = 0;
	for (size_t i = 0; i < 1000; i++) {
		GROW(v, alloc, i + 1);
		assert_true(alloc >= i + 1);
		v[i] = (int)i;
	}
	for (size_t i = 0; i < 1000; i++)
		assert_int_equal(v[i], i);
	size_t before = alloc;
	GROW(v, alloc, 3); /* never shrinks */
	assert_int_equal(alloc, before);
	free(v);
}

static void test_util__format_utc(void **state)
{
	(void)state;
	char buf[32];
	tally_format_utc(0, buf, sizeof(buf));
	assert_string_equal(buf, "1970-01-01T00:00:00Z");
	tally_format_utc(1795266420.9, buf, sizeof(buf));
	assert_string_equal(buf, "2026-11-21T13:07:00Z");
	double a = tally_now_mono(), b = tally_now_mono();
	assert_true(b >= a);
	assert_true(tally_now_wall() > 1.6e9);
}

static void test_util__format_utc_out_of_range(void **state)
{
	(void)state;
	/* no time_t cast of what time_t cannot hold (undefined), no garbage */
	char buf[32];
	const double bad[] = { INFINITY, -INFINITY,      NAN,           1e300,
			       -1e300,   253402300800.0, -62167219201.0 };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(buf, 'z', sizeof(buf));
		tally_format_utc(bad[i], buf, sizeof(buf));
		assert_string_equal(buf, "(no valid time)");
	}
	tally_format_utc(253402300799.0, buf, sizeof(buf));
	assert_string_equal(buf, "9999-12-31T23:59:59Z");
	tally_format_utc(-86400, buf, sizeof(buf));
	assert_string_equal(buf, "1969-12-31T00:00:00Z");
}

/* ---- dirname, write-all, read-fd ---- */

static void check_dirname(const char *path, const char *want)
{
	char *d = tally_dirname(path);
	assert_string_equal(d, want);
	free(d);
}

static void test_util__dirname(void **state)
{
	(void)state;
	check_dirname("/x", "/");
	check_dirname("x", ".");
	check_dirname("/", "/");
	check_dirname("//", "/");
	check_dirname("a/b/", "a");
	check_dirname("a//b", "a");
	check_dirname("/a/b/c", "/a/b");
	check_dirname("a/", ".");
	check_dirname("", ".");
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* a pipe holds 64 KiB by default: 1 MiB through it needs many reads, and the
 * writer, interrupted by a timer every millisecond (no SA_RESTART) while the
 * reader waits, sees short writes and EINTR that it must carry on from */
static void test_util__write_all_read_fd(void **state)
{
	(void)state;
	size_t n = 1 << 20;
	unsigned char *data = xmalloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 7 + (i >> 9));
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		struct sigaction sa = { .sa_handler = on_alarm };
		sigaction(SIGALRM, &sa, NULL);
		struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
		setitimer(ITIMER_REAL, &it, NULL);
		_exit(tally_write_all(fds[1], data, n) == 0 ? 0 : 1);
	}
	close(fds[1]);
	usleep(50000);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "head:");
	assert_int_equal(tally_read_fd(&sb, fds[0], "pipe", 0), 0);
	close(fds[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(sb.len, 5 + n);
	assert_memory_equal(sb.buf, "head:", 5);
	assert_memory_equal(sb.buf + 5, data, n);
	assert_int_equal(sb.buf[sb.len], '\0');
	strbuf_release(&sb);
	free(data);
}

static void test_util__write_all_errors(void **state)
{
	(void)state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	close(fds[0]);
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);
	assert_int_equal(tally_write_all(fds[1], "x", 1), -EPIPE);
	signal(SIGPIPE, old);
	close(fds[1]);
	assert_int_equal(tally_write_all(-1, "x", 1), -EBADF);
	assert_int_equal(tally_write_all(-1, "x", 0), 0); /* nothing to write */
}

static void test_util__read_fd_limit(void **state)
{
	(void)state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(tally_write_all(fds[1], "0123456789", 10), 0);
	close(fds[1]);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "prefix"); /* the limit counts what is read, not what was there */
	assert_int_equal(tally_read_fd(&sb, fds[0], "pipe", 9), -EFBIG);
	close(fds[0]);
	strbuf_reset(&sb);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(tally_write_all(fds[1], "0123456789", 10), 0);
	close(fds[1]);
	strbuf_addstr(&sb, "prefix");
	assert_int_equal(tally_read_fd(&sb, fds[0], "pipe", 10), 0);
	assert_string_equal(sb.buf, "prefix0123456789");
	close(fds[0]);
	assert_int_equal(tally_read_fd(&sb, -1, "fd -1", 0), -EBADF);
	strbuf_release(&sb);
}

/* ---- binary search ---- */

static bool int_below(const void *ctx, size_t i)
{
	const int *k = ctx; /* k[0] the key, k + 1 the array */
	return k[1 + i] < k[0];
}

static bool index_below(const void *ctx, size_t i)
{
	return i < *(const size_t *)ctx;
}

static void test_util__partition(void **state)
{
	(void)state;
	/* key, then the sorted array: lower bounds of every key from 0 to 10 */
	int a[] = { 0, 1, 3, 3, 3, 5, 8, 9 };
	size_t n = ARRAY_SIZE(a) - 1;
	for (int key = 0; key <= 10; key++) {
		a[0] = key;
		size_t want = 0;
		while (want < n && a[1 + want] < key)
			want++;
		assert_int_equal(tally_partition(n, int_below, a), want);
	}
	assert_int_equal(tally_partition(0, int_below, a), 0);
	a[0] = 3;
	assert_int_equal(tally_partition(n, int_below, a), 1); /* the first of equal keys */
	/* huge n: the middle is computed without overflow */
	size_t limit = SIZE_MAX - 5;
	assert_true(tally_partition(SIZE_MAX, index_below, &limit) == limit);
}

struct addr_item {
	char tag;
	uint64_t addr;
	uint32_t size;
};

static void test_util__upper_u64(void **state)
{
	(void)state;
	struct addr_item v[] = {
		{ 'a', 0x10, 1 }, { 'b', 0x20, 1 }, { 'c', 0x20, 1 }, { 'd', UINT64_MAX - 1, 1 }
	};
	assert_int_equal(TALLY_UPPER_U64(v, 4, addr, 0), 0);
	assert_int_equal(TALLY_UPPER_U64(v, 4, addr, 0xf), 0);
	assert_int_equal(TALLY_UPPER_U64(v, 4, addr, 0x10), 1);
	assert_int_equal(TALLY_UPPER_U64(v, 4, addr, 0x1f), 1);
	assert_int_equal(TALLY_UPPER_U64(v, 4, addr, 0x20), 3); /* past every equal one */
	assert_int_equal(TALLY_UPPER_U64(v, 4, addr, UINT64_MAX - 2), 3);
	assert_int_equal(TALLY_UPPER_U64(v, 4, addr, UINT64_MAX), 4);
	assert_int_equal(TALLY_UPPER_U64(v, 0, addr, UINT64_MAX), 0);
	uint64_t plain[] = { 1, 2, 4, 8 };
	assert_int_equal(tally_upper_u64(plain, 4, sizeof(*plain), 0, 5), 3);
}

/* ---- tally_run_parallel ---- */

struct par_ctx {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t arrived, n;
	int calls[8];
	bool met[8];
};

/* each call waits (up to 5 s) until all have arrived: only calls that run at
 * once all get there */
static void par_fn(void *ctx, size_t i)
{
	struct par_ctx *c = ctx;
	pthread_mutex_lock(&c->mu);
	c->calls[i]++;
	c->arrived++;
	pthread_cond_broadcast(&c->cv);
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	while (c->arrived < c->n)
		if (pthread_cond_timedwait(&c->cv, &c->mu, &dl))
			break;
	c->met[i] = c->arrived == c->n;
	pthread_mutex_unlock(&c->mu);
}

static void test_util__run_parallel(void **state)
{
	(void)state;
	struct par_ctx c = { .mu = PTHREAD_MUTEX_INITIALIZER,
			     .cv = PTHREAD_COND_INITIALIZER,
			     .n = 8 };
	tally_run_parallel(8, par_fn, &c);
	for (size_t i = 0; i < 8; i++) {
		assert_int_equal(c.calls[i], 1);
		if (!c.met[i])
			fail_msg("call %zu did not run at the same time as the others", i);
	}
	tally_run_parallel(0, par_fn, &c); /* nothing to do */
	assert_int_equal(c.arrived, 8);
}

/* ---- outputs that are streams ---- */

static void test_util__open_stream(void **state)
{
	(void)state;
	assert_true(tally_path_is_stream("/dev/null"));
	int fd = tally_open_stream("/dev/null");
	assert_true(fd >= 0);
	close(fd);
	/* a regular file is no stream: one named as such but swapped for a file
	 * by the time it is opened is refused on its descriptor */
	char path[] = "/tmp/tally-unit-stream-XXXXXX";
	int t = mkstemp(path);
	assert_true(t >= 0);
	close(t);
	assert_false(tally_path_is_stream(path));
	assert_int_equal(tally_open_stream(path), -EAGAIN);
	assert_non_null(strstr(tally_errmsg(), "changed while it was opened"));
	unlink(path);
}

/* /proc/PID/stat: this process's own fields, a command name with blanks and
 * parentheses in it, and a pid no process has. */
static void test_util__pstat(void **state)
{
	(void)state;
	struct tally_pstat st;
	assert_int_equal(tally_pstat_read((int)getpid(), &st), 0);
	assert_int_equal(st.state, 'R'); /* reading its own stat, it runs */
	assert_int_equal(st.ppid, (int)getppid());
	assert_int_equal(st.pgrp, (int)getpgrp());
	assert_int_equal(st.session, (int)getsid(0));
	assert_true(st.start_ticks > 0);
	struct timespec boot;
	clock_gettime(CLOCK_BOOTTIME, &boot);
	uint64_t start = tally_pstat_start_ns(&st);
	assert_true(start > 0);
	assert_true(start <= (uint64_t)boot.tv_sec * 1000000000u + (uint64_t)boot.tv_nsec);

	/* a child named ") x (y) Z 1 2 3": the fields follow the last ')' */
	int named[2], done[2];
	assert_int_equal(pipe(named), 0);
	assert_int_equal(pipe(done), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		/* named, it says so, then waits until the parent closes done */
		close(named[0]);
		close(done[1]);
		prctl(PR_SET_NAME, ") x (y) Z 1 2 3");
		char c;
		if (write(named[1], "r", 1) != 1 || read(done[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(named[1]);
	close(done[0]);
	char c;
	assert_int_equal(read(named[0], &c, 1), 1);
	assert_int_equal(tally_pstat_read((int)child, &st), 0);
	assert_int_equal(st.ppid, (int)getpid());
	assert_int_equal(st.session, (int)getsid(0));
	assert_true(st.state == 'S' || st.state == 'R');
	assert_true(st.start_ticks > 0);
	close(done[1]);
	close(named[0]);
	int ws;
	assert_int_equal(waitpid(child, &ws, 0), child);

	/* past the kernel's largest pid (4194304) */
	assert_int_equal(tally_pstat_read(0x3fffffff, &st), -ENOENT);
	assert_int_equal(tally_pstat_start_ns(&st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_util__strbuf_init_empty),
		cmocka_unit_test(test_util__strbuf_add),
		cmocka_unit_test(test_util__strbuf_add_grows),
		cmocka_unit_test(test_util__strbuf_addf),
		cmocka_unit_test(test_util__strbuf_addf_growth),
		cmocka_unit_test(test_util__strbuf_json),
		cmocka_unit_test(test_util__json_writer),
		cmocka_unit_test(test_util__lines),
		cmocka_unit_test(test_util__strbuf_escape),
		cmocka_unit_test(test_util__strbuf_escape_roundtrip),
		cmocka_unit_test(test_util__strbuf_detach),
		cmocka_unit_test(test_util__strbuf_read_file),
		cmocka_unit_test(test_util__hidx_empty),
		cmocka_unit_test(test_util__hidx_many),
		cmocka_unit_test(test_util__hidx_collisions),
		cmocka_unit_test(test_util__hash_bytes),
		cmocka_unit_test(test_util__qsort),
		cmocka_unit_test(test_util__parse_u64_good),
		cmocka_unit_test(test_util__parse_u64_bounds),
		cmocka_unit_test(test_util__parse_u64_garbage),
		cmocka_unit_test(test_util__parse_u64_overflow),
		cmocka_unit_test(test_util__parse_u64_says_range),
		cmocka_unit_test(test_util__strbuf_grow_overflow),
		cmocka_unit_test(test_util__grow_try_overflow),
		cmocka_unit_test(test_util__excerpt),
		cmocka_unit_test(test_util__parse_duration_good),
		cmocka_unit_test(test_util__format_duration),
		cmocka_unit_test(test_util__parse_duration_bad),
		cmocka_unit_test(test_util__parse_duration_infinite),
		cmocka_unit_test(test_util__parse_size_range),
		cmocka_unit_test(test_util__parse_cpulist_good),
		cmocka_unit_test(test_util__parse_cpulist_out_of_range),
		cmocka_unit_test(test_util__parse_cpulist_bad),
		cmocka_unit_test(test_util__parse_intlist_good),
		cmocka_unit_test(test_util__parse_intlist_bad),
		cmocka_unit_test(test_util__write_file_atomic),
		cmocka_unit_test(test_util__write_file_atomic_fails),
		cmocka_unit_test(test_util__write_file_atomic_planted_links),
		cmocka_unit_test(test_util__write_file_atomic_modes),
		cmocka_unit_test(test_util__open_regular),
		cmocka_unit_test(test_util__remove_tree),
		cmocka_unit_test(test_util__basename),
		cmocka_unit_test(test_util__dirname),
		cmocka_unit_test(test_util__partition),
		cmocka_unit_test(test_util__upper_u64),
		cmocka_unit_test(test_util__write_all_read_fd),
		cmocka_unit_test(test_util__write_all_errors),
		cmocka_unit_test(test_util__read_fd_limit),
		cmocka_unit_test(test_util__seterr),
		cmocka_unit_test(test_util__grow),
		cmocka_unit_test(test_util__format_utc),
		cmocka_unit_test(test_util__format_utc_out_of_range),
		cmocka_unit_test(test_util__run_parallel),
		cmocka_unit_test(test_util__utf8_seq),
		cmocka_unit_test(test_util__add_numbers),
		cmocka_unit_test(test_util__open_stream),
		cmocka_unit_test(test_util__pstat),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
