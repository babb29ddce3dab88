/* An archive's members (docs/format.md "Archives": what 'tally archive'
 * writes, and every command reads with -i OUT.tar...) through
 * tally_archive_open_buf: a tarball (plain, gzip, zstd, xz or bzip2) unpacked
 * by libarchive into a private directory under $TMPDIR (here in memory),
 * every member checked against the MANIFEST, then the database inside read.
 * Oracles: a refusal is one line that names the archive; nothing is ever
 * written outside TMPDIR (a sibling directory stays empty, nothing new
 * appears beside it); what opens holds
 * only directories (0700) and regular files (0600) under names a member may
 * have, its database among them; and whatever the outcome, once the database
 * is released TMPDIR is empty again. The time an input may take is
 * libFuzzer's -timeout (a sparse member's holes, a decompression bomb). */
#include "fuzz.h"

#include "tally/archive.h"
#include "tally/db.h"

/* Every entry is a directory of mode 0700 or a regular file of mode 0600
 * with a member's name. */
static void visit(const char *path, const char *rel, const struct stat *st, void *ctx)
{
	(void)path;
	if (S_ISDIR(st->st_mode)) {
		FUZZ_CHECK((st->st_mode & 0777) == 0700, "directory '%s' has mode %o", rel,
			   st->st_mode & 0777);
	} else {
		FUZZ_CHECK((st->st_mode & 0777) == 0600, "'%s' has mode %o", rel,
			   st->st_mode & 0777);
		FUZZ_CHECK(tally_archive_name_ok(rel), "'%s' is no member's name", rel);
		(*(size_t *)ctx)++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *base = fuzz_dir();
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s/tmp", base);
	const char *side = fuzz_side_dir(base);
	struct tally_db db;
	int r = tally_archive_open_buf(&db, data, size, "fuzz.tar");
	if (r) {
		fuzz_check_errmsg();
		FUZZ_CHECK(strstr(tally_errmsg(), "fuzz.tar") != NULL,
			   "the error does not name the archive: '%s'", tally_errmsg());
	} else {
		FUZZ_CHECK(db.archive && db.tmpdir, "an archive opened with no directory");
		size_t files = 0;
		fuzz_walk(db.archive, "", visit, &files);
		struct strbuf d = STRBUF_INIT;
		strbuf_addf(&d, "%s/db", db.archive);
		struct stat st;
		FUZZ_CHECK(lstat(d.buf, &st) == 0 && S_ISDIR(st.st_mode),
			   "an archive opened with no db/");
		strbuf_release(&d);
		tally_db_release(&db);
	}
	const char *left;
	FUZZ_CHECK(!(left = fuzz_first_entry(side)), "'%s' was written outside TMPDIR", left);
	FUZZ_CHECK(!(left = fuzz_first_entry(tmp)), "'%s' was left in TMPDIR", left);
	/* and beside TMPDIR, only it and the sibling */
	DIR *d = opendir(base);
	FUZZ_CHECK(d != NULL, "cannot open '%s'", base);
	struct dirent *e;
	while ((e = readdir(d)))
		FUZZ_CHECK(!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
				   !strcmp(e->d_name, "tmp") || !strcmp(e->d_name, "side"),
			   "'%s' was written beside TMPDIR", e->d_name);
	closedir(d);
	return 0;
}
