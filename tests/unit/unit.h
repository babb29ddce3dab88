/* Helpers shared by the cmocka unit tests: temporary directories, small file
 * I/O, and an assertion on the core's error message. Header-only (static
 * inline) so that every test-<module>.c stays one self-contained executable. */
#ifndef TALLY_UNIT_H
#define TALLY_UNIT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tally/db.h"
#include "tally/util.h"

/* The core's last error message must contain s. */
#define assert_errmsg_has(s)                                                            \
	do {                                                                            \
		const char *em_ = tally_errmsg();                                       \
		if (!strstr(em_, (s)))                                                  \
			fail_msg("error message '%s' does not contain '%s'", em_, (s)); \
	} while (0)

/* haystack must contain needle (both strings). */
#define assert_str_has(haystack, needle)                                                \
	do {                                                                            \
		const char *h_ = (haystack), *n_ = (needle);                            \
		if (!h_ || !strstr(h_, n_))                                             \
			fail_msg("'%s' does not contain '%s'", h_ ? h_ : "(null)", n_); \
	} while (0)

/* A fresh empty directory; the caller frees the string and removes the tree. */
static inline char *unit_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *t = NULL;
	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&t, "%s/tally-unit-XXXXXX", base) < 0)
		abort();
	if (!mkdtemp(t)) {
		fprintf(stderr, "mkdtemp '%s': %s\n", t, strerror(errno));
		abort();
	}
	return t;
}

/* dir/name, malloc'd. */
static inline char *unit_path(const char *dir, const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		abort();
	return p;
}

static inline void unit_write(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		fprintf(stderr, "cannot write '%s': %s\n", path, strerror(errno));
		abort();
	}
	if (len && fwrite(data, 1, len, f) != len)
		abort();
	if (fclose(f))
		abort();
}

static inline void unit_write_str(const char *path, const char *s)
{
	unit_write(path, s, strlen(s));
}

/* The whole file, NUL-terminated and malloc'd, or NULL when it cannot be read. */
static inline char *unit_read(const char *path, size_t *len)
{
	if (len)
		*len = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	if (!b)
		abort();
	for (;;) {
		size_t r = fread(b + n, 1, cap - n - 1, f);
		n += r;
		if (r == 0)
			break;
		if (cap - n - 1 == 0) {
			cap *= 2;
			b = realloc(b, cap);
			if (!b)
				abort();
		}
	}
	fclose(f);
	b[n] = '\0';
	if (len)
		*len = n;
	return b;
}

/* Entries of a directory other than . and .. (no temporary may be left behind). */
static inline size_t unit_dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static inline bool unit_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* The count of event ev at the flat entry of offset off in db (the first
 * such entry); fails the test when there is none. */
static inline uint64_t unit_entry_count(const struct tally_db *db, uint64_t off, int ev)
{
	for (size_t i = 0; i < db->nentries; i++)
		if (db->entries[i].offset == off)
			return db->counts[i * (size_t)db->nevents + (size_t)ev];
	fail_msg("no entry at %#llx", (unsigned long long)off);
	return 0;
}

#endif
