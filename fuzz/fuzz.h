/* What the libFuzzer targets share (docs/fuzzing.md): a NUL-terminated copy of
 * the input, a private directory in memory (tmpfs) for the parsers that read
 * files by path, and the oracle's failure, which must be a crash for libFuzzer
 * to keep the input. Header-only: each target is one file. */
#ifndef TALLY_FUZZ_H
#define TALLY_FUZZ_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tally/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An oracle that does not hold: a crash, with the reason on stderr. */
#define FUZZ_CHECK(cond, ...)                                                            \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "fuzz oracle failed: %s (%s:%d): ", #cond, __FILE__, \
				__LINE__);                                               \
			fprintf(stderr, __VA_ARGS__);                                    \
			fputc('\n', stderr);                                             \
			abort();                                                         \
		}                                                                        \
	} while (0)

/* The input as a C string (caller frees): what a parser of text gets from a
 * strbuf, the bytes and a NUL after them. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1);
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Whether the oracle of a known, not yet fixed defect is turned off: the
 * environment's TALLY_FUZZ_KNOWN lists issue 17's item numbers (i5,i7,...), so
 * that a long campaign looks past what is already known (docs/fuzzing.md).
 * Unset, as in make fuzz-smoke, every oracle holds. */
static inline bool fuzz_known(const char *item)
{
	const char *k = getenv("TALLY_FUZZ_KNOWN");
	size_t n = strlen(item);
	for (const char *p = k; p && *p; p += strcspn(p, ","), p += *p == ',')
		if (!strncmp(p, item, n) && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

/* Every error is one line (the builtins print it as one): no newline in it. */
static inline void fuzz_check_errmsg(void)
{
	if (fuzz_known("i14"))
		return;
	const char *m = tally_errmsg();
	FUZZ_CHECK(!strchr(m, '\n'), "error message of more than one line: '%s'", m);
}

/* A directory of this process in memory (/dev/shm, else $TMPDIR or /tmp),
 * removed at exit; TMPDIR points into it, so what the core unpacks goes there. */
static char fuzz_dir_path[256];

static inline void fuzz_dir_cleanup(void)
{
	if (fuzz_dir_path[0])
		tally_remove_tree(fuzz_dir_path);
}

static inline const char *fuzz_dir(void)
{
	if (fuzz_dir_path[0])
		return fuzz_dir_path;
	const char *bases[] = { "/dev/shm", getenv("TMPDIR"), "/tmp" };
	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i] || !*bases[i])
			continue;
		snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/tally-fuzz.XXXXXX", bases[i]);
		if (mkdtemp(fuzz_dir_path))
			break;
		fuzz_dir_path[0] = '\0';
	}
	if (!fuzz_dir_path[0]) {
		fprintf(stderr, "fuzz: cannot create a scratch directory\n");
		abort();
	}
	atexit(fuzz_dir_cleanup);
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s/tmp", fuzz_dir_path);
	mkdir(tmp, 0700);
	setenv("TMPDIR", tmp, 1);
	return fuzz_dir_path;
}

/* Writes len bytes as dir/name (created or replaced). */
static inline void fuzz_write(const char *dir, const char *name, const void *data, size_t len)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "fuzz: cannot write '%s': %s\n", p, strerror(errno));
		abort();
	}
	const char *d = data;
	while (len) {
		ssize_t w = write(fd, d, len);
		if (w <= 0) {
			fprintf(stderr, "fuzz: cannot write '%s': %s\n", p, strerror(errno));
			abort();
		}
		d += w;
		len -= (size_t)w;
	}
	close(fd);
}

/* base/side, made empty-or-kept: a sibling of what the target writes into,
 * which must stay empty (nothing written outside the directory given). */
static inline const char *fuzz_side_dir(const char *base)
{
	static char side[512];
	snprintf(side, sizeof(side), "%s/side", base);
	mkdir(side, 0700);
	return side;
}

/* The name of an entry of dir, or NULL when it is empty. */
static inline const char *fuzz_first_entry(const char *dir)
{
	static char name[256];
	DIR *d = opendir(dir);
	FUZZ_CHECK(d != NULL, "cannot open '%s'", dir);
	struct dirent *e;
	const char *found = NULL;
	while (!found && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(name, sizeof(name), "%s", e->d_name);
			found = name;
		}
	closedir(d);
	return found;
}

/* visit(path, rel, st, ctx) for each entry under dir, depth first (rel: its
 * name below the top; pass "" for the top), each checked to be a regular file
 * or a directory (no link, no special file). The names are read and the
 * directory closed before going down: a tree may nest deeper than this
 * process may hold descriptors. */
static inline void fuzz_walk(const char *dir, const char *rel,
			     void (*visit)(const char *path, const char *rel, const struct stat *st,
					   void *ctx),
			     void *ctx)
{
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
		FUZZ_CHECK(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode),
			   "'%s' is neither a file nor a directory", r.buf);
		visit(p.buf, r.buf, &st, ctx);
		if (S_ISDIR(st.st_mode))
			fuzz_walk(p.buf, r.buf, visit, ctx);
		strbuf_release(&p);
		strbuf_release(&r);
		free(names[i]);
	}
	free(names);
}

#endif
