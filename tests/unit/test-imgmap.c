/* Unit tests for lib/symbols/imgmap.c: reading image maps (order, lookups,
 * escapes, every damaged line refused with its number) and scanning a small
 * tree with a symlink loop. */
#define _GNU_SOURCE
#include "unit.h"

#include <sys/stat.h>

#include "tally/imgmap.h"

static void test_imgmap__load_find(void **state)
{
	(void)state;
	char *d = unit_tmpdir(), *p = unit_path(d, "map");
	unit_write_str(p, "# tally image map, format 1\n"
			  "# comment\n"
			  "build-id\tbb\t-\t/stripped/b\n"
			  "build-id\tbb\tsd\t/full/b\n"
			  "build-id\tbb\ts\t/sym/b\n"
			  "xxh64\t0011223344556677\t-\t/with\\ttab\n"
			  "build-id\taa\td\t/a\n");
	struct tally_imgmap m;
	assert_int_equal(tally_imgmap_load(&m, p), 0);
	assert_int_equal(m.n, 5);
	size_t first, n = tally_imgmap_find(&m, "bb", &first);
	assert_int_equal(n, 3);
	/* the most useful copy first: DWARF and symbols, then symbols, then stripped */
	assert_string_equal(m.e[first].path, "/full/b");
	assert_int_equal(m.e[first].flags, TALLY_IMGMAP_SYMTAB | TALLY_IMGMAP_DEBUG);
	assert_string_equal(m.e[first + 1].path, "/sym/b");
	assert_string_equal(m.e[first + 2].path, "/stripped/b");
	n = tally_imgmap_find(&m, "0011223344556677", &first);
	assert_int_equal(n, 1);
	assert_string_equal(m.e[first].path, "/with\ttab");
	assert_string_equal(m.e[first].id_kind, "xxh64");
	assert_int_equal(tally_imgmap_find(&m, "cc", &first), 0);
	assert_int_equal(tally_imgmap_find(&m, "a", &first), 0);
	tally_imgmap_release(&m);
	unlink(p);
	rmdir(d);
	free(p);
	free(d);
}

static void test_imgmap__damaged(void **state)
{
	(void)state;
	static const struct {
		const char *text, *err;
	} cases[] = {
		{ "", "is not a tally image map" },
		{ "# tally image map, format 2\n", "is not a tally image map" },
		{ "# tally image map, format 1\nbuild-id\taa\ts\n",
		  "line 2: expected 'ID-KIND<TAB>ID<TAB>FLAGS<TAB>PATH'" },
		{ "# tally image map, format 1\nsha1\taa\ts\t/x\n", "line 2: bad id kind" },
		{ "# tally image map, format 1\nbuild-id\tAA\ts\t/x\n", "line 2: bad id kind" },
		{ "# tally image map, format 1\n\nbuild-id\taa\ts\t\n",
		  "line 3: bad id kind, id or path" },
	};
	char *d = unit_tmpdir(), *p = unit_path(d, "map");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		unit_write_str(p, cases[i].text);
		struct tally_imgmap m;
		assert_int_equal(tally_imgmap_load(&m, p), -EINVAL);
		assert_errmsg_has(cases[i].err);
		assert_null(m.e);
	}
	struct tally_imgmap m;
	unlink(p);
	assert_int_equal(tally_imgmap_load(&m, p), -ENOENT);
	assert_errmsg_has("cannot read map file");
	rmdir(d);
	free(p);
	free(d);
}

static void test_imgmap__binary(void **state)
{
	(void)state;
	/* a NUL inside a well-formed line: the lines after it were silently dropped
	 * and the map "loaded" */
	static const char text[] = "# tally image map, format 1\n"
				   "build-id\taa\td\t/a\n"
				   "build-id\tbb\td\t/b\0hidden\n"
				   "build-id\tcc\td\t/c\n";
	char *d = unit_tmpdir(), *p = unit_path(d, "map");
	unit_write(p, text, sizeof(text) - 1);
	struct tally_imgmap m;
	assert_int_equal(tally_imgmap_load(&m, p), -EINVAL);
	char want[600];
	snprintf(want, sizeof(want), "'%s' line 3: binary data", p);
	assert_errmsg_has(want);
	assert_null(m.e);
	assert_int_equal(m.n, 0);
	/* the (buffer, length) parser, over bytes with no NUL after them */
	static const char good[] =
		"# tally image map, format 1\nbuild-id\taa\td\t/a\nxxh64\t0011223344556677\t-\t/b";
	char *exact = malloc(sizeof(good) - 1);
	assert_non_null(exact);
	memcpy(exact, good, sizeof(good) - 1);
	assert_int_equal(tally_imgmap_parse(&m, exact, sizeof(good) - 1, "mem.map"), 0);
	assert_int_equal(m.n, 2);
	assert_string_equal(m.file, "mem.map");
	size_t first;
	assert_int_equal(tally_imgmap_find(&m, "0011223344556677", &first), 1);
	assert_string_equal(m.e[first].path, "/b");
	tally_imgmap_release(&m);
	for (size_t cut = 0; cut < sizeof(good) - 1; cut++) {
		int r = tally_imgmap_parse(&m, exact, cut, "mem.map");
		if (!r)
			tally_imgmap_release(&m);
	}
	free(exact);
	assert_int_equal(tally_imgmap_parse(&m, text, sizeof(text) - 1, "mem.map"), -EINVAL);
	assert_errmsg_has("'mem.map' line 3: binary data");
	unlink(p);
	rmdir(d);
	free(p);
	free(d);
}

static void warn_count(const char *msg, void *ctx)
{
	(void)msg;
	(*(int *)ctx)++;
}

static void test_imgmap__scan_loop(void **state)
{
	(void)state;
	char *d = unit_tmpdir(), *sub = unit_path(d, "sub"), *loop = unit_path(d, "sub/loop"),
	     *elf = unit_path(d, "sub/true");
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(symlink("..", loop), 0);
	/* a real ELF file: /bin/true's bytes */
	size_t len;
	char *bytes = unit_read("/bin/true", &len);
	assert_non_null(bytes);
	unit_write(elf, bytes, len);
	free(bytes);
	struct strbuf out = STRBUF_INIT;
	struct tally_scan_stats st;
	int warns = 0;
	const char *dirs[] = { d };
	assert_int_equal(tally_scan(dirs, 1, &out, &st, warn_count, &warns), 0);
	assert_int_equal(st.elf, 1);
	assert_int_equal(st.loops, 1);
	assert_true(warns >= 1);
	assert_str_has(out.buf, "# tally image map, format 1\n");
	assert_str_has(out.buf, "/sub/true\n");
	/* what scan writes, load reads */
	char *mp = unit_path(d, "map");
	unit_write(mp, out.buf, out.len);
	struct tally_imgmap m;
	assert_int_equal(tally_imgmap_load(&m, mp), 0);
	assert_int_equal(m.n, 1);
	tally_imgmap_release(&m);
	const char *bad[] = { elf };
	assert_int_equal(tally_scan(bad, 1, &out, &st, NULL, NULL), -ENOTDIR);
	assert_errmsg_has("not a directory");
	strbuf_release(&out);
	unlink(mp);
	unlink(elf);
	unlink(loop);
	rmdir(sub);
	rmdir(d);
	free(mp);
	free(elf);
	free(loop);
	free(sub);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_imgmap__load_find),
		cmocka_unit_test(test_imgmap__damaged),
		cmocka_unit_test(test_imgmap__binary),
		cmocka_unit_test(test_imgmap__scan_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
