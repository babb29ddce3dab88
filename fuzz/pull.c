/* What a remote host sends back for a pull (docs/remote.md): its listing of
 * files ("SIZE NAME" lines) and a tar stream, through tally_remote_untar, the
 * extraction of tally_remote_pull. The input is the listing, a NUL byte, then
 * the stream (no NUL: all of it is the stream, with no listing). Oracles: the
 * error is one line; nothing is ever written outside the directory given
 * (its sibling stays empty); what it accepts is regular files and directories
 * only, each file as large as the listing says and every listed file there. */
#include "fuzz.h"

#include "tally/remote.h"

struct seen {
	size_t files;
	uint64_t bytes;
};

/* Regular files of mode 0600 (and directories): their count and sizes. */
static void visit(const char *path, const char *rel, const struct stat *st, void *ctx)
{
	struct seen *s = ctx;
	(void)rel;
	if (S_ISDIR(st->st_mode))
		return;
	FUZZ_CHECK((st->st_mode & 0777) == 0600, "'%s' has mode %o", path, st->st_mode & 0777);
	s->files++;
	s->bytes += (uint64_t)st->st_size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *base = fuzz_dir();
	static unsigned run;
	char dst[512];
	/* a directory of its own each run, removed after it */
	snprintf(dst, sizeof(dst), "%s/h%u", base, ++run);
	const char *side = fuzz_side_dir(base);
	const uint8_t *nul = memchr(data, '\0', size);
	char *listing = nul ? strndup((const char *)data, (size_t)(nul - data)) : NULL;
	const uint8_t *tar = nul ? nul + 1 : data;
	size_t tlen = nul ? size - (size_t)(tar - data) : size;
	size_t files = 0;
	uint64_t bytes = 0;
	int r = tally_remote_untar(tar, tlen, dst, listing, "host 'h1'", &files, &bytes);
	if (r) {
		fuzz_check_errmsg();
		FUZZ_CHECK(!strncmp(tally_errmsg(), "host 'h1'", 9) || strstr(tally_errmsg(), dst),
			   "the error names neither the host nor the directory: '%s'",
			   tally_errmsg());
	} else {
		struct seen w = { 0, 0 };
		fuzz_walk(dst, "", visit, &w);
		FUZZ_CHECK(w.files == files && w.bytes == bytes,
			   "%zu files of %llu bytes written, %zu of %llu said", w.files,
			   (unsigned long long)w.bytes, files, (unsigned long long)bytes);
		if (listing) {
			size_t listed = 0;
			for (const char *p = listing; *p; p++)
				listed += *p == '\n';
			FUZZ_CHECK(listed == files, "%zu files listed, %zu accepted", listed,
				   files);
		}
	}
	/* never outside dst, whatever the stream asked */
	const char *left;
	FUZZ_CHECK(!(left = fuzz_first_entry(side)), "'%s' was written beside the directory", left);
	FUZZ_CHECK(tally_remove_tree(dst) == 0 || access(dst, F_OK) != 0,
		   "what was pulled into '%s' cannot be removed: %s", dst, tally_errmsg());
	free(listing);
	return 0;
}
