/* Unit tests for lib/remote: words quoted for a remote shell, the ssh command
 * line, and the extraction of a pull's tar stream (names that lead out,
 * links, special files, sizes that do not match the host's listing). */
#define _GNU_SOURCE
#include "unit.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/wait.h>

#include "tally/remote.h"

/* What /bin/sh makes of the quoted word: the word itself, byte for byte. */
static void test_remote__quote_round_trip(void **state)
{
	(void)state;
	const char *words[] = { "plain", "with space", "it's",     "'", "''", "$(touch /tmp/x)",
				"`id`",  "a;b|c&d",    "\\n\"q\"", "*", "~",  "-x",
				"",      "new\nline",  NULL };
	for (int i = 0; words[i]; i++) {
		struct strbuf q = STRBUF_INIT, cmd = STRBUF_INIT;
		tally_sh_quote(&q, words[i]);
		strbuf_addf(&cmd, "printf %%s %s", q.buf);
		FILE *p = popen(cmd.buf, "r");
		assert_non_null(p);
		char got[256];
		size_t n = fread(got, 1, sizeof(got) - 1, p);
		got[n] = '\0';
		assert_int_equal(pclose(p), 0);
		if (strcmp(got, words[i]))
			fail_msg("'%s' quoted as %s came back as '%s'", words[i], q.buf, got);
		strbuf_release(&q);
		strbuf_release(&cmd);
	}
}

static void test_remote__argv(void **state)
{
	(void)state;
	struct tally_remote r = { .host = "-oProxyCommand=x", .ssh = "ssh -F cfg" };
	char *words[] = { "sh", "-c", "echo $1", "sh", "a b", NULL };
	char **argv = tally_remote_argv(&r, words);
	assert_string_equal(argv[0], "/bin/sh");
	assert_string_equal(argv[2], "ssh -F cfg \"$@\"");
	/* the host after "--": never an option, whatever it starts with */
	assert_string_equal(argv[4], "--");
	assert_string_equal(argv[5], "-oProxyCommand=x");
	assert_string_equal(argv[6], "'sh' '-c' 'echo $1' 'sh' 'a b'");
	assert_null(argv[7]);
	tally_remote_argv_free(argv);
}

struct member {
	const char *name;
	int type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFIFO */
	const char *data;
	const char *link;
};

static void make_tar(struct strbuf *out, const struct member *m, size_t n)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	size_t used = 0;
	size_t cap = 1 << 20;
	char *buf = xmalloc(cap);
	assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, m[i].name);
		archive_entry_set_filetype(e, (unsigned)m[i].type);
		archive_entry_set_perm(e, 0644);
		size_t len = m[i].data ? strlen(m[i].data) : 0;
		archive_entry_set_size(e, (la_int64_t)len);
		if (m[i].link)
			archive_entry_set_symlink(e, m[i].link);
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (len)
			assert_int_equal(archive_write_data(a, m[i].data, len), (la_ssize_t)len);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	strbuf_add(out, buf, used);
	free(buf);
}

static void test_remote__untar_good(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dst = unit_path(tmp, "h1");
	const struct member m[] = {
		{ "./", AE_IFDIR, NULL, NULL },
		{ "./tally.db/", AE_IFDIR, NULL, NULL },
		{ "./tally.db/session", AE_IFREG, "format-version: 1\n", NULL },
		{ "./report.txt", AE_IFREG, "hello\n", NULL },
	};
	struct strbuf t = STRBUF_INIT;
	make_tar(&t, m, 4);
	size_t files;
	uint64_t bytes;
	assert_int_equal(tally_remote_untar(t.buf, t.len, dst,
					    "18 tally.db/session\n6 report.txt\n", "host 'h1'",
					    &files, &bytes),
			 0);
	assert_int_equal(files, 2);
	assert_int_equal(bytes, 24);
	char *p = unit_path(dst, "tally.db/session");
	size_t n;
	char *got = unit_read(p, &n);
	assert_string_equal(got, "format-version: 1\n");
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	free(got);
	free(p);
	strbuf_release(&t);
	tally_remove_tree(tmp);
	free(dst);
	free(tmp);
}

/* Each bad stream is refused with the member named, and nothing is written
 * outside the directory. */
static void test_remote__untar_refuses(void **state)
{
	(void)state;
	static const struct {
		struct member m;
		const char *listing, *why;
	} cases[] = {
		{ { "../escape", AE_IFREG, "x", NULL },
		  "1 ../escape\n",
		  "refused '../escape': a name that leads out" },
		{ { "a/../../escape", AE_IFREG, "x", NULL },
		  "1 a/../../escape\n",
		  "a name that leads out" },
		{ { "/tmp/abs", AE_IFREG, "x", NULL },
		  "1 /tmp/abs\n",
		  "refused '/tmp/abs': a name that leads out" },
		{ { "link", AE_IFLNK, NULL, "/etc/passwd" },
		  "",
		  "refused 'link': a symbolic link" },
		{ { "fifo", AE_IFIFO, NULL, NULL }, "", "refused 'fifo': a special file" },
		{ { "short", AE_IFREG, "abc", NULL },
		  "4 short\n",
		  "refused 'short': the stream declares 3 bytes and the host listed 4 (nothing written)" },
		{ { "big", AE_IFREG, "abc", NULL },
		  "1 big\n",
		  "refused 'big': the stream declares 3 bytes and the host listed 1 (nothing written)" },
		{ { "one", AE_IFREG, "abc", NULL },
		  "3 one\n3 one\n",
		  "its listing names 'one' twice" },
		{ { "one", AE_IFREG, "abc", NULL },
		  "3one\n",
		  "its listing has a line that is not 'SIZE NAME': '3one'" },
		{ { "one", AE_IFREG, "abc", NULL },
		  "x one\n",
		  "its listing has a line that is not 'SIZE NAME'" },
		{ { "extra", AE_IFREG, "abc", NULL },
		  "3 other\n",
		  "'extra' came, but the host's listing has no such file" },
		{ { "one", AE_IFREG, "abc", NULL },
		  "3 one\n3 two\n",
		  "1 files came of the 2 the host listed" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *tmp = unit_tmpdir();
		char *dst = unit_path(tmp, "in");
		struct strbuf t = STRBUF_INIT;
		make_tar(&t, &cases[i].m, 1);
		size_t files;
		uint64_t bytes;
		int r = tally_remote_untar(t.buf, t.len, dst, cases[i].listing, "host 'h1'", &files,
					   &bytes);
		if (!r)
			fail_msg("case %zu (%s) accepted", i, cases[i].m.name);
		assert_errmsg_has("host 'h1'");
		assert_errmsg_has(cases[i].why);
		/* nothing beside the directory */
		assert_true(unit_dir_entries(tmp) <= 1);
		/* a file the listing does not have is refused before it is made (it was
		 * made empty, and its descriptor kept, until fuzz-pull found it) */
		if (strstr(cases[i].why, "has no such file") ||
		    strstr(cases[i].why, "nothing written")) {
			char *x = unit_path(dst, cases[i].m.name);
			assert_false(unit_exists(x));
			free(x);
		}
		strbuf_release(&t);
		tally_remove_tree(tmp);
		free(dst);
		free(tmp);
	}
}

/* A sparse member: a few bytes of stream that declare 64 MiB, where the
 * host listed 1 byte. Refused before anything is written for it (reading it
 * would fill its holes: 64 MiB written here, 4 GiB for the largest). */
static void test_remote__untar_sparse_member(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dst = unit_path(tmp, "in");
	struct archive *a = archive_write_new();
	archive_write_set_format_pax(a);
	size_t used = 0, cap = 1 << 16;
	char *buf = xmalloc(cap);
	assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "big");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 64 << 20);
	archive_entry_sparse_add_entry(e, 0, 1);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	assert_int_equal(archive_write_data(a, "x", 1), 1);
	archive_entry_free(e);
	archive_write_close(a);
	archive_write_free(a);
	assert_true(used < 16384);
	size_t files;
	uint64_t bytes;
	assert_int_not_equal(
		tally_remote_untar(buf, used, dst, "1 big\n", "host 'h1'", &files, &bytes), 0);
	assert_errmsg_has(
		"refused 'big': the stream declares 67108864 bytes and the host listed 1 (nothing written)");
	assert_int_equal(unit_dir_entries(dst), 0);
	assert_int_equal(bytes, 0);
	free(buf);
	tally_remove_tree(tmp);
	free(dst);
	free(tmp);
}

/* The listing is bounded in count (refused before any member is read), and
 * a pull of many files is looked up, not searched: 50,000 listed files and
 * as many members come back whole. */
static void test_remote__untar_listing_bounds(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dst = unit_path(tmp, "in");
	struct strbuf list = STRBUF_INIT;
	for (int i = 0; i <= TALLY_PULL_MAX_FILES; i++)
		strbuf_addf(&list, "1 f%d\n", i);
	struct strbuf t = STRBUF_INIT;
	const struct member m[] = { { "f0", AE_IFREG, "x", NULL } };
	make_tar(&t, m, 1);
	size_t files;
	uint64_t bytes;
	assert_int_not_equal(
		tally_remote_untar(t.buf, t.len, dst, list.buf, "host 'h1'", &files, &bytes), 0);
	assert_errmsg_has(
		"host 'h1': its listing has more than 100000 files (refused before any is read)");
	assert_false(unit_exists(dst));
	strbuf_release(&list);
	strbuf_release(&t);
	tally_remove_tree(tmp);
	free(dst);
	free(tmp);
}

/* A refusal names the member whole: a path of 150 bytes is not cut. */
static void test_remote__untar_long_name(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dst = unit_path(tmp, "in");
	const char *name =
		"tally.db/a-directory-with-a-long-name/another-directory-with-a-long-name/and-one-more-directory/the-link-at-the-end";
	const struct member m[] = { { name, AE_IFLNK, NULL, "/etc/passwd" } };
	struct strbuf t = STRBUF_INIT;
	make_tar(&t, m, 1);
	size_t files;
	uint64_t bytes;
	assert_int_not_equal(tally_remote_untar(t.buf, t.len, dst, "", "host 'h1'", &files, &bytes),
			     0);
	char want[512];
	snprintf(want, sizeof(want), "refused '%s': a symbolic link", name);
	assert_errmsg_has(want);
	strbuf_release(&t);
	tally_remove_tree(tmp);
	free(dst);
	free(tmp);
}

/* A link planted in the directory before the pull is never followed. */
static void test_remote__untar_planted_link(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dst = unit_path(tmp, "in");
	char *out = unit_path(tmp, "outside");
	assert_int_equal(mkdir(dst, 0700), 0);
	assert_int_equal(mkdir(out, 0700), 0);
	char *lnk = unit_path(dst, "sub");
	assert_int_equal(symlink(out, lnk), 0);
	const struct member m[] = { { "sub/file", AE_IFREG, "x", NULL } };
	struct strbuf t = STRBUF_INIT;
	make_tar(&t, m, 1);
	size_t files;
	uint64_t bytes;
	assert_int_not_equal(
		tally_remote_untar(t.buf, t.len, dst, "1 sub/file\n", "host 'h1'", &files, &bytes),
		0);
	assert_int_equal(unit_dir_entries(out), 0);
	strbuf_release(&t);
	tally_remove_tree(tmp);
	free(lnk);
	free(out);
	free(dst);
	free(tmp);
}

/* ---- the probe's answer ---- */

static int probe(const char *text, struct tally_remote_facts *f)
{
	char *buf = xstrdup(text);
	int r = tally_remote_parse_probe(buf, "h1", 1000.0, 0.5, f);
	free(buf);
	return r;
}

static void test_remote__probe_good(void **state)
{
	(void)state;
	struct tally_remote_facts f;
	assert_int_equal(
		probe("x86_64\n0f3c2b1a-1111-2222-3333-444455556666\n1001.25\ntally 0.1.0\nend\n",
		      &f),
		0);
	assert_string_equal(f.arch, "x86_64");
	assert_string_equal(f.boot_id, "0f3c2b1a-1111-2222-3333-444455556666");
	assert_string_equal(f.tally, "tally 0.1.0");
	/* the host's clock at the probe's midpoint (1000.25 here) was 1001.25 */
	assert_true(f.clock_offset > 0.999 && f.clock_offset < 1.001);
	tally_remote_facts_release(&f);
	/* a date without %N (busybox) */
	assert_int_equal(probe("armv7l\n-\n1001.%N\nend\n", &f), 0);
	assert_true(f.clock_offset > 0.74 && f.clock_offset < 0.76);
	tally_remote_facts_release(&f);
	/* no tally there, no boot id */
	assert_int_equal(probe("aarch64\n-\n1000.25\nend\n", &f), 0);
	assert_null(f.tally);
	assert_string_equal(f.boot_id, "-");
	tally_remote_facts_release(&f);
}

static void test_remote__probe_refused(void **state)
{
	(void)state;
	static const char *bad[] = {
		"",
		"x86_64\n-\n1000\n",                                /* no end */
		"x86_64\n-\nend\n",                                 /* three lines */
		"x86_64\n-\n1000\ntally\nend\nmore\n",            /* a line after end */
		"x86_64\n-\n1000\nend\nmore\n",
		"\n-\n1000\nend\n",                                 /* no architecture */
		"x86 64\n-\n1000\nend\n",                           /* not a word */
		"x86_64\nnot-a-boot-id\n1000\nend\n",
		"x86_64\n-\nnan\nend\n",                            /* the clock is not a time */
		"x86_64\n-\ninf\nend\n",
		"x86_64\n-\n-5\nend\n",
		"x86_64\n-\n1e400\nend\n",
		"x86_64\n-\n1000.%Nx\nend\n",
		"x86_64\n-\n%N\nend\n",
		"x86_64\n-\n1000\ntally \x1b[31mred\nend\n",       /* a control character */
		"x86_64\n-\n1000\n\nend\n",                        /* an empty version line */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tally_remote_facts f;
		int r = probe(bad[i], &f);
		if (r != -EPROTO)
			fail_msg("probe answer %zu accepted: '%s'", i, bad[i]);
		assert_non_null(strstr(tally_errmsg(), "host 'h1'"));
		assert_null(strchr(tally_errmsg(), '\n'));
		assert_null(f.arch);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_remote__quote_round_trip),
		cmocka_unit_test(test_remote__argv),
		cmocka_unit_test(test_remote__untar_good),
		cmocka_unit_test(test_remote__untar_refuses),
		cmocka_unit_test(test_remote__untar_planted_link),
		cmocka_unit_test(test_remote__untar_sparse_member),
		cmocka_unit_test(test_remote__untar_listing_bounds),
		cmocka_unit_test(test_remote__untar_long_name),
		cmocka_unit_test(test_remote__probe_good),
		cmocka_unit_test(test_remote__probe_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
