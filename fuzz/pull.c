/* What a remote host sends back for a pull (docs/remote.md): its listing of
 * files ("SIZE NAME" lines) and a tar stream, through tally_remote_untar, the
 * extraction of tally_remote_pull. The input is the listing, a NUL byte, then
 * the stream (no NUL: all of it is the stream, with no listing). Oracles: the
 * error is one line; nothing is ever written outside the directory given
 * (its sibling stays empty); what it accepts is regular files and directories
 * only, each file as large as the listing says and every listed file there. */
#include "fuzz.h"

#include <dirent.h>
#include <sys/stat.h>

#include "tally/remote.h"

/* Regular files and directories under dir (no link, no special file), their
 * count and the sum of the files' sizes. */
static void walk(const char *dir, size_t *files, uint64_t *bytes)
{
	/* the names first, the directory closed before going down: a stream may
	 * nest directories deeper than this process may hold descriptors */
	DIR *d = opendir(dir);
	FUZZ_CHECK(d != NULL, "cannot open '%s'", dir);
	char **names = NULL;
	size_t n = 0, a = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		GROW(names, a, n + 1);
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) {
		size_t plen = strlen(dir) + strlen(names[i]) + 2;
		char *p = malloc(plen);
		snprintf(p, plen, "%s/%s", dir, names[i]);
		struct stat st;
		FUZZ_CHECK(lstat(p, &st) == 0, "lstat '%s'", p);
		FUZZ_CHECK(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode), "'%s' is neither a file nor a directory", p);
		if (S_ISDIR(st.st_mode)) {
			walk(p, files, bytes);
		} else {
			FUZZ_CHECK((st.st_mode & 0777) == 0600, "'%s' has mode %o", p, st.st_mode & 0777);
			(*files)++;
			*bytes += (uint64_t)st.st_size;
		}
		free(p);
		free(names[i]);
	}
	free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *base = fuzz_dir();
	static unsigned run;
	char dst[512], side[512];
	/* a directory of its own each run, removed after it */
	snprintf(dst, sizeof(dst), "%s/h%u", base, ++run);
	snprintf(side, sizeof(side), "%s/side", base);
	mkdir(side, 0700);
	const uint8_t *nul = memchr(data, '\0', size);
	char *listing = nul ? strndup((const char *)data, (size_t)(nul - data)) : NULL;
	const uint8_t *tar = nul ? nul + 1 : data;
	size_t tlen = nul ? size - (size_t)(tar - data) : size;
	size_t files = 0;
	uint64_t bytes = 0;
	int r = tally_remote_untar(tar, tlen, dst, listing, "host 'h1'", &files, &bytes);
	if (r) {
		fuzz_check_errmsg();
		FUZZ_CHECK(!strncmp(tally_errmsg(), "host 'h1'", 9) || strstr(tally_errmsg(), dst), "the error names neither the host nor the directory: '%s'",
			   tally_errmsg());
	} else {
		size_t f = 0;
		uint64_t b = 0;
		walk(dst, &f, &b);
		FUZZ_CHECK(f == files && b == bytes, "%zu files of %llu bytes written, %zu of %llu said", f, (unsigned long long)b, files,
			   (unsigned long long)bytes);
		if (listing) {
			size_t listed = 0;
			for (const char *p = listing; *p; p++)
				listed += *p == '\n';
			FUZZ_CHECK(listed == files, "%zu files listed, %zu accepted", listed, files);
		}
	}
	/* never outside dst, whatever the stream asked */
	DIR *d = opendir(side);
	FUZZ_CHECK(d != NULL, "the sibling directory is gone");
	struct dirent *e;
	while ((e = readdir(d)))
		FUZZ_CHECK(!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."), "'%s' was written beside the directory", e->d_name);
	closedir(d);
	FUZZ_CHECK(tally_remove_tree(dst) == 0 || access(dst, F_OK) != 0, "what was pulled into '%s' cannot be removed: %s", dst,
		   tally_errmsg());
	free(listing);
	return 0;
}
