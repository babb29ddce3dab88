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

#include <dirent.h>
#include <sys/stat.h>

#include "tally/archive.h"
#include "tally/db.h"

/* Every entry under dir (rel: its name inside the archive) is a directory
 * of mode 0700 or a regular file of mode 0600 with a member's name. */
static void walk(const char *dir, const char *rel, size_t *files)
{
	/* the names first, the directory closed before going down */
	DIR *d = opendir(dir);
	FUZZ_CHECK(d != NULL, "cannot open '%s'", dir);
	char **names = NULL;
	size_t n = 0, a = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		GROW(names, a, n + 1);
		names[n++] = xstrdup(e->d_name);
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) {
		struct strbuf p = STRBUF_INIT, r = STRBUF_INIT;
		strbuf_addf(&p, "%s/%s", dir, names[i]);
		strbuf_addf(&r, "%s%s%s", rel, *rel ? "/" : "", names[i]);
		struct stat st;
		FUZZ_CHECK(lstat(p.buf, &st) == 0, "lstat '%s'", p.buf);
		FUZZ_CHECK(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode), "'%s' is neither a file nor a directory", r.buf);
		if (S_ISDIR(st.st_mode)) {
			FUZZ_CHECK((st.st_mode & 0777) == 0700, "directory '%s' has mode %o", r.buf, st.st_mode & 0777);
			walk(p.buf, r.buf, files);
		} else {
			FUZZ_CHECK((st.st_mode & 0777) == 0600, "'%s' has mode %o", r.buf, st.st_mode & 0777);
			FUZZ_CHECK(tally_archive_name_ok(r.buf), "'%s' is no member's name", r.buf);
			(*files)++;
		}
		strbuf_release(&p);
		strbuf_release(&r);
		free(names[i]);
	}
	free(names);
}

static bool empty_dir(const char *dir, const char **left)
{
	static char name[256];
	DIR *d = opendir(dir);
	FUZZ_CHECK(d != NULL, "cannot open '%s'", dir);
	struct dirent *e;
	bool empty = true;
	while (empty && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(name, sizeof(name), "%s", e->d_name);
			empty = false;
		}
	closedir(d);
	*left = name;
	return empty;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *base = fuzz_dir();
	char tmp[512], side[512];
	snprintf(tmp, sizeof(tmp), "%s/tmp", base);
	snprintf(side, sizeof(side), "%s/side", base);
	mkdir(side, 0700);
	struct tally_db db;
	int r = tally_archive_open_buf(&db, data, size, "fuzz.tar");
	if (r) {
		fuzz_check_errmsg();
		FUZZ_CHECK(strstr(tally_errmsg(), "fuzz.tar") != NULL, "the error does not name the archive: '%s'", tally_errmsg());
	} else {
		FUZZ_CHECK(db.archive && db.tmpdir, "an archive opened with no directory");
		size_t files = 0;
		walk(db.archive, "", &files);
		struct strbuf d = STRBUF_INIT;
		strbuf_addf(&d, "%s/db", db.archive);
		struct stat st;
		FUZZ_CHECK(lstat(d.buf, &st) == 0 && S_ISDIR(st.st_mode), "an archive opened with no db/");
		strbuf_release(&d);
		tally_db_release(&db);
	}
	const char *left;
	FUZZ_CHECK(empty_dir(side, &left), "'%s' was written outside TMPDIR", left);
	FUZZ_CHECK(empty_dir(tmp, &left), "'%s' was left in TMPDIR", left);
	/* and beside TMPDIR, only it and the sibling */
	DIR *d = opendir(base);
	FUZZ_CHECK(d != NULL, "cannot open '%s'", base);
	struct dirent *e;
	while ((e = readdir(d)))
		FUZZ_CHECK(!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "tmp") ||
				   !strcmp(e->d_name, "side"),
			   "'%s' was written beside TMPDIR", e->d_name);
	closedir(d);
	return 0;
}
