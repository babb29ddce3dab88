/* Unit tests for lib/archive: the MANIFEST (what is written is read back; every
 * damaged or lying line refused with its number), member names (nothing that
 * leaves the archive or falls outside its layout), image member names, the
 * kind of an output by its suffix. */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/archive.h"

static void test_archive__manifest_roundtrip(void **state)
{
	(void)state;
	struct tally_archive_member m[3];
	memset(m, 0, sizeof(m));
	m[0] = (struct tally_archive_member){ .name = "db/session",
					      .role = TALLY_AR_DB,
					      .size = 12 };
	m[1] = (struct tally_archive_member){ .name = "images/abcd/with\\back",
					      .role = TALLY_AR_IMAGE,
					      .size = 0 };
	m[2] = (struct tally_archive_member){ .name = "debug/.build-id/ab/cd.debug",
					      .role = TALLY_AR_DEBUG,
					      .size = UINT64_MAX };
	for (int i = 0; i < 16; i++)
		m[2].sum[i] = (unsigned char)(0xf0 + i);
	struct strbuf sb = STRBUF_INIT;
	tally_manifest_format(m, 3, &sb);
	assert_str_has(sb.buf, "tally-archive: 1\n");
	assert_str_has(sb.buf, "\nend: 3 files\n");
	struct tally_manifest man;
	assert_int_equal(tally_manifest_parse(&man, sb.buf, sb.len, "M"), 0);
	assert_int_equal(man.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(man.e[i].name, m[i].name);
		assert_int_equal(man.e[i].role, m[i].role);
		assert_true(man.e[i].size == m[i].size);
		assert_memory_equal(man.e[i].sum, m[i].sum, 16);
	}
	tally_manifest_release(&man);
	strbuf_release(&sb);
}

static void test_archive__manifest_damaged(void **state)
{
	(void)state;
	static const char sum[] = "00112233445566778899aabbccddeeff";
	static const struct {
		const char *text, *err;
	} cases[] = {
		{ "", "is empty" },
		{ "tally-bundle: 1\n", "is not a tally archive's MANIFEST" },
		{ "tally-archive: 2\nend: 0 files\n", "format-version '2'" },
		{ "tally-archive: 1\n", "has no 'end:' line" },
		{ "tally-archive: 1\nend: 0 files", "line 2: no newline" },
		{ "tally-archive: 1\nend: 1 files\n", "line 2: expected 'end: 0 files'" },
		{ "tally-archive: 1\nend: 0 files\n# more\n",
		  "line 3: something follows the 'end:' line" },
		{ "tally-archive: 1\nlibrary 1 %s db/x\nend: 1 files\n",
		  "line 2: expected 'ROLE SIZE XXH3-128 NAME'" },
		{ "tally-archive: 1\ndb -1 %s db/x\nend: 1 files\n", "line 2: expected" },
		{ "tally-archive: 1\ndb 99999999999999999999999 %s db/x\nend: 1 files\n",
		  "line 2: expected" },
		{ "tally-archive: 1\ndb 1 0011 db/x\nend: 1 files\n", "line 2: expected" },
		/* checksums are lowercase, as tally_manifest_format writes them */
		{ "tally-archive: 1\ndb 1 00112233445566778899AABBCCDDEEFF db/x\nend: 1 files\n",
		  "line 2: expected" },
		{ "tally-archive: 1\ndb 1 %s\nend: 1 files\n", "line 2: expected" },
		{ "tally-archive: 1\ndb 1 %s ../x\nend: 1 files\n",
		  "line 2: '../x' is not a name" },
		{ "tally-archive: 1\ndb 1 %s /etc/passwd\nend: 1 files\n",
		  "line 2: '/etc/passwd' is not a name" },
		{ "tally-archive: 1\ndb 1 %s db/../../x\nend: 1 files\n", "is not a name" },
		{ "tally-archive: 1\ndb 1 %s etc/x\nend: 1 files\n", "'etc/x' is not a name" },
		{ "tally-archive: 1\ndb 1 %s MANIFEST\nend: 1 files\n",
		  "'MANIFEST' is not a name" },
		{ "tally-archive: 1\ndb 1 %s db/a\\nb\nend: 1 files\n", "is not a name" },
		{ "tally-archive: 1\ndb 1 %s db/x\ndb 2 %s db/x\nend: 2 files\n",
		  "line 3: 'db/x' is listed twice" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[512];
		snprintf(text, sizeof(text), cases[i].text, sum, sum);
		struct tally_manifest man;
		assert_int_equal(tally_manifest_parse(&man, text, strlen(text), "A:MANIFEST"),
				 -EINVAL);
		assert_errmsg_has(cases[i].err);
		assert_errmsg_has("'A:MANIFEST");
		assert_null(man.e);
	}
	/* a NUL byte inside a line */
	static const char nul[] =
		"tally-archive: 1\ndb 1 00112233445566778899aabbccddeeff db/x\0y\nend: 1 files\n";
	struct tally_manifest man;
	assert_int_equal(tally_manifest_parse(&man, nul, sizeof(nul) - 1, "M"), -EINVAL);
	assert_errmsg_has("line 2: a NUL byte");
}

static void test_archive__names(void **state)
{
	(void)state;
	static const char *const ok[] = { "MANIFEST",
					  "db/session",
					  "db/jit/perf-1-ab.map",
					  "images/ab/libc.so.6",
					  "debug/.build-id/ab/cd.debug",
					  "kernel/vmlinux",
					  "kernel/modules/ext4.ko.xz" };
	static const char *const bad[] = { "",        "/db/x",    "db",        "db/",
					   "db//x",   "db/./x",   "db/../x",   "../db/x",
					   "db/x/..", "x/db",     "manifest",  "MANIFEST/x",
					   "db/a\tb", "db/a\x7f", "images/ab/" };
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		assert_true(tally_archive_name_ok(ok[i]));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (tally_archive_name_ok(bad[i]))
			fail_msg("'%s' was taken as a member name", bad[i]);
	}
	char longname[2048];
	memset(longname, 'a', sizeof(longname));
	memcpy(longname, "db/", 3);
	longname[sizeof(longname) - 1] = '\0';
	assert_false(tally_archive_name_ok(longname));
}

static void test_archive__image_member(void **state)
{
	(void)state;
	struct tally_db_image di = { .path = "/opt/my prog/a$b (deleted)", .id = "5160f4" };
	struct strbuf sb = STRBUF_INIT;
	tally_db_image_member(&di, &sb);
	assert_string_equal(sb.buf, "images/5160f4/a_b");
	assert_true(tally_archive_name_ok(sb.buf));
	strbuf_reset(&sb);
	di.path = "/x/..";
	tally_db_image_member(&di, &sb);
	assert_string_equal(sb.buf, "images/5160f4/_.");
	assert_true(tally_archive_name_ok(sb.buf));
	strbuf_reset(&sb);
	di.path = "/x/.hidden";
	tally_db_image_member(&di, &sb);
	assert_string_equal(sb.buf, "images/5160f4/_hidden");
	strbuf_release(&sb);
}

static void test_archive__kind_of(void **state)
{
	(void)state;
	assert_int_equal(tally_archive_kind_of("out"), TALLY_ARCHIVE_DIR);
	assert_int_equal(tally_archive_kind_of("out.tar"), TALLY_ARCHIVE_TAR);
	assert_int_equal(tally_archive_kind_of("a/out.tar.gz"), TALLY_ARCHIVE_TAR_GZ);
	assert_int_equal(tally_archive_kind_of("out.tgz"), TALLY_ARCHIVE_TAR_GZ);
	assert_int_equal(tally_archive_kind_of("out.tar.zst"), TALLY_ARCHIVE_TAR_ZST);
	assert_int_equal(tally_archive_kind_of("out.tzst"), TALLY_ARCHIVE_TAR_ZST);
	assert_int_equal(tally_archive_kind_of(".tar"), TALLY_ARCHIVE_DIR);
	assert_int_equal(tally_archive_kind_of("out.zst"), TALLY_ARCHIVE_DIR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_archive__manifest_roundtrip),
		cmocka_unit_test(test_archive__manifest_damaged),
		cmocka_unit_test(test_archive__names),
		cmocka_unit_test(test_archive__image_member),
		cmocka_unit_test(test_archive__kind_of),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
