/* Small utilities shared by all of tally: allocation that cannot fail silently,
 * the error-message buffer the core fills for the builtins to print, a growable
 * string buffer, a hash index, and number/list parsers. */
#ifndef TALLY_UTIL_H
#define TALLY_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Allocation that does not fail: on failure the handler the program set
 * (tally_set_oom_handler; tally's prints one line and exits 1) runs, and
 * without one the process aborts (there is no useful recovery). Sizes that do
 * not fit in memory at all (a count times an element size past PTRDIFF_MAX)
 * are failures too, never a wrapped-around small allocation. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Grow *p (of *alloc elements of size sz) to hold at least want elements. */
void tally_set_oom_handler(void (*fn)(size_t n));
void tally_grow(void **p, size_t *alloc, size_t want, size_t sz);
/* The same without exiting: 0, -EOVERFLOW when want elements of sz bytes are
 * more than an object may hold, -ENOMEM when memory is short; *p and *alloc
 * are unchanged on failure. */
int tally_grow_try(void **p, size_t *alloc, size_t want, size_t sz)
	__attribute__((warn_unused_result));
#define GROW(p, alloc, want) tally_grow((void **)&(p), &(alloc), (want), sizeof(*(p)))
/* Appends s to a NULL-terminated list of n strings (repeatable options). */
#define STRLIST_PUSH(list, n, alloc, s)                                        \
	do {                                                                   \
		GROW(list, alloc, (n) + 2);                                    \
		(list)[(n)++] = (s);                                           \
		(list)[(n)] = NULL;                                            \
	} while (0)

/* The core's error channel: a function that fails calls tally_seterr() with a
 * one-line message (lowercase, the thing in quotes, the fix in parentheses) and
 * returns a negative errno-style code; the builtin prints tally_errmsg(). */
int tally_seterr(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *tally_errmsg(void);

/* Warnings the core hands back to its caller, one line each, in order (the
 * core never prints: the builtins print them, builtin/print.c). A function
 * that may warn takes a struct tally_warnings * (NULL: the caller does not
 * want them). */
struct tally_warnings {
	char **v;
	size_t n, alloc;
};
#define TALLY_WARNINGS_INIT { NULL, 0, 0 }
void tally_warnings_add(struct tally_warnings *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tally_warnings_release(struct tally_warnings *w);

/* Growable string buffer (git's strbuf): buf is always NUL-terminated. The
 * appenders cannot fail (memory exhaustion is the OOM handler's, as for
 * xmalloc);
 * strbuf_grow, for sizes that come from outside, returns its failure. */
struct strbuf {
	char *buf;
	size_t len, alloc;
};
#define STRBUF_INIT { NULL, 0, 0 }
void strbuf_init(struct strbuf *sb);
void strbuf_release(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
/* Room for extra more bytes (and the NUL): 0, -EOVERFLOW when len + extra does
 * not fit in an object, -ENOMEM when memory is short; sb is unchanged on
 * failure. Never exits. */
int strbuf_grow(struct strbuf *sb, size_t extra) __attribute__((warn_unused_result));
void strbuf_add(struct strbuf *sb, const void *data, size_t n);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, char c);
/* v in decimal, as "%" PRIu64 / PRId64 write it, without printf's cost (the
 * exports write millions of numbers). */
void strbuf_add_u64(struct strbuf *sb, uint64_t v);
void strbuf_add_i64(struct strbuf *sb, int64_t v);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
/* JSON string literal with quotes and escapes. */
void strbuf_add_json_str(struct strbuf *sb, const char *s);
/* The length of the UTF-8 sequence at s (at most n bytes, s[0] >= 0x80), 0
 * when it is not one (overlong forms, surrogates and code points past
 * U+10FFFF included), and 0 for the C1 controls U+0080..U+009F, which
 * terminals obey as escapes, unless c1 allows them. The one validator. */
size_t tally_utf8_seq(const unsigned char *s, size_t n, bool c1);
/* Text fields of the database: backslash, newline, tab and CR become \\ \n \t \r. */
void strbuf_add_escaped(struct strbuf *sb, const char *s);
/* len bytes of s as they may be quoted in an error message: at most max bytes
 * of s (then "..."), with control characters, DEL, backslash and bytes that
 * are not UTF-8 escaped (\n \t \r \\ \xNN), so that damaged input never
 * reaches a terminal raw. */
void strbuf_add_excerpt(struct strbuf *sb, const char *s, size_t len, size_t max);
/* The last non-empty line of text (a failed command's message, for an error),
 * at most 200 bytes, escaped as strbuf_add_excerpt does; nothing when there is none. */
void tally_last_line(const char *text, struct strbuf *sb);
/* The same into out (TALLY_EXCERPT_SIZE bytes), at most TALLY_EXCERPT_MAX bytes
 * of a NUL-terminated s (NULL: ""); returns out. For tally_seterr arguments:
 *   char q[TALLY_EXCERPT_SIZE];
 *   tally_seterr(-EINVAL, "... got '%s'", tally_excerpt(q, line)); */
#define TALLY_EXCERPT_MAX 40
#define TALLY_EXCERPT_SIZE (TALLY_EXCERPT_MAX * 4 + 4)
const char *tally_excerpt(char *out, const char *s);
/* Lines of a NUL-terminated text, split in place (each newline becomes a
 * NUL), numbered from 1, with the name of what is read, so that an error
 * says where: "'WHAT' line N: ...". The one line loop of the readers.
 *   struct tally_lines L;
 *   tally_lines_init(&L, text, path);
 *   for (char *line; (line = tally_lines_next(&L));)
 *           if (bad) return tally_lines_err(&L, -EINVAL, "expected ... (%s)", why); */
struct tally_lines {
	char *cur;
	const char *what;
	size_t ln; /* the number of the line last returned */
};
void tally_lines_init(struct tally_lines *L, char *text, const char *what);
char *tally_lines_next(struct tally_lines *L);
/* The next line that is not empty and not a comment ('#' first), or NULL. */
char *tally_lines_next_data(struct tally_lines *L);
int tally_lines_err(const struct tally_lines *L, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Undoes strbuf_add_escaped in place; unknown escapes are kept as they are. */
void tally_unescape(char *s);
/* The same, and \xHH too (a byte; \x00 is kept as it is): undoes
 * tally_jit_escape. */
void tally_unescape_bytes(char *s);
/* The value of a hex digit (either case), or -1. */
int tally_hexval(int c);
/* Caller owns the returned string; sb is reset. */
char *strbuf_detach(struct strbuf *sb);
/* Read a whole file (up to max bytes, 0 = no limit). 0 or -errno (tally_seterr set).
 * For the system's own files (/proc, /sys); a file another user may have put
 * there is read with tally_read_regular. */
int strbuf_read_file(struct strbuf *sb, const char *path, size_t max);

/* A process as /proc/PID/stat has it: the fields after its command name
 * (which may hold blanks and parentheses). start_ticks is 0 when the line
 * stops before it. */
struct tally_pstat {
	char state;
	int ppid, pgrp, session;
	uint64_t start_ticks; /* the process's start, clock ticks after boot */
};
/* 0, or -errno: -ENOENT no such process, -EINVAL a line it cannot read (no
 * error message is set: callers decide what a missing process means). */
int tally_pstat_read(int pid, struct tally_pstat *st);
/* The process's start in ns after boot (CLOCK_BOOTTIME, which is never
 * behind CLOCK_MONOTONIC), or 0 when unknown. */
uint64_t tally_pstat_start_ns(const struct tally_pstat *st);

/* Hash index: maps 64-bit hashes to item indices kept in the caller's own array;
 * the caller supplies equality. One type serves every table in tally. */
struct tally_hidx {
	struct tally_hslot *slots;
	size_t mask; /* capacity - 1, capacity a power of two; 0 when empty */
	size_t count;
};
struct tally_hslot {
	uint64_t hash;
	uint32_t idx1; /* index + 1; 0 = empty */
};
typedef bool (*tally_hidx_eq)(const void *ctx, uint32_t idx, const void *key);
#define TALLY_HIDX_NONE UINT32_MAX
/* The index of the item equal to key, or TALLY_HIDX_NONE. */
uint32_t tally_hidx_get(const struct tally_hidx *h, uint64_t hash, const void *key,
			tally_hidx_eq eq, const void *ctx);
/* Add idx under hash (the caller has checked it is absent). */
void tally_hidx_put(struct tally_hidx *h, uint64_t hash, uint32_t idx);
void tally_hidx_release(struct tally_hidx *h);

uint64_t tally_hash_bytes(const void *p, size_t n, uint64_t seed);
/* a + b and a x b, UINT64_MAX where they would wrap: sums and weights of
 * samples saturate (a reader refuses totals that do not add up) rather
 * than wrap to a small number. */
static inline uint64_t tally_add_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t tally_mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t tally_hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Parsers: 0 on success, -EINVAL with tally_seterr naming what (an option name)
 * and the range allowed on failure; *out is untouched then. */
int tally_parse_u64(const char *s, const char *what, uint64_t min, uint64_t max, uint64_t *out);
/* Decimal seconds, or a number with suffix ms, s, m, h, d: more than 0, at most
 * TALLY_DURATION_MAX seconds (100 years; never infinite). */
#define TALLY_DURATION_MAX (36525.0 * 86400)
int tally_parse_duration(const char *s, const char *what, double *seconds);
/* A duration as a person writes it (and tally_parse_duration reads it): in
 * the largest unit that holds it whole ("1h", "90m", "45s", "2d"), else
 * "250ms", "1.5s"; into buf (n bytes), which it returns. */
const char *tally_format_duration(double seconds, char *buf, size_t n);
/* A size in bytes: digits with an optional suffix k, M, G or T (powers of 1024;
 * "KiB", "MB" and the like too), from min to TALLY_SIZE_MAX. */
#define TALLY_SIZE_MAX (UINT64_C(1) << 60)
int tally_parse_size(const char *s, const char *what, uint64_t min, uint64_t *out);
/* A size for people: "1.5 MiB". */
void tally_format_size(uint64_t bytes, char *buf, size_t n);
/* "0,2-3" or "all" into a bitmap of ncpus bits (bool array). */
int tally_parse_cpulist(const char *s, int ncpus, bool *set);
/* "1,2,3" into an array of ints from 1 to INT_MAX (caller frees *out). */
int tally_parse_intlist(const char *s, const char *what, int **out, size_t *n);

/* Binary search, the one of tally. tally_partition: the number of leading
 * items of [0, n) for which before(ctx, i) holds, where before holds for a
 * prefix and fails for the rest (a lower bound: before = "item i < key"; an
 * upper bound: before = "item i <= key"). */
size_t tally_partition(size_t n, bool (*before)(const void *ctx, size_t i), const void *ctx);
/* The number of leading items of base (n items of stride bytes, sorted by the
 * uint64_t at byte off of each) whose value is <= key: the item holding key
 * in a sorted table of start addresses is the one before it, when it is not 0.
 * TALLY_UPPER_U64(arr, n, field, key) names the field. */
size_t tally_upper_u64(const void *base, size_t n, size_t stride, size_t off, uint64_t key);
#define TALLY_UPPER_U64(arr, n, field, key)                                                     \
	((void)sizeof(                                                                          \
		 char[sizeof((arr)->field) == sizeof(uint64_t) ? 1 : -1]), /* a 64-bit field */ \
	 tally_upper_u64((arr), (n), sizeof(*(arr)), offsetof(__typeof__(*(arr)), field), (key)))

/* qsort that accepts an empty (NULL) array, which qsort itself does not. */
void tally_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
/* Its comparisons of uint64_t and uint32_t values, in ascending order. */
int tally_cmp_u64(const void *a, const void *b);
int tally_cmp_u32(const void *a, const void *b);

/* ---- files ---- */

/* Whether path is a device, a pipe or a socket itself (not a link to one), or
 * is by name one of this process's descriptors (/dev/stdout, /dev/fd/N):
 * what a writer writes into as it is (appending), never replaces with a file
 * of its own. Any other link is replaced, never followed. */
bool tally_path_is_stream(const char *path);
/* Opens such a path for appending and checks the descriptor is still one:
 * the fd, or -errno with tally_seterr. */
int tally_open_stream(const char *path);
/* Write data to path atomically: a temporary with an unpredictable name created
 * exclusively in path's directory (no symbolic link is ever followed, nothing
 * that exists is ever opened), synced, then renamed over path. The file is
 * created mode 0600 (output holds profiles), except that a regular file of
 * ours it replaces keeps its mode (chmod once to share). On failure the
 * temporary is removed and path is untouched. A device, pipe or socket at
 * path (tally_path_is_stream) is written into instead. 0 or -errno with
 * tally_seterr. */
int tally_write_file_atomic(const char *path, const void *data, size_t len);
/* The same with another mode for a new file (umask applies): 0644 for a pid file. */
int tally_write_file_atomic_mode(const char *path, const void *data, size_t len, unsigned mode);
/* rm -rf, for directories tally made itself: never follows a symbolic link
 * (each directory is opened without following and emptied through its fd). */
int tally_remove_tree(const char *path);

/* Opening files that another user may have put there (databases, bundles, image
 * and debug files found by path): read-only, close-on-exec, without blocking
 * (a FIFO never hangs the open), and only when it is a regular file of at most
 * max_size bytes (0: any size). A symbolic link is refused unless flags has
 * TALLY_OPEN_FOLLOW (image and debug files: /lib64 and .build-id are links).
 * path is relative to dirfd (AT_FDCWD: the working directory), and the error
 * names path as given. The descriptor, or -errno with tally_seterr saying what
 * the file is: "'P' is a FIFO, not a regular file", "'P' is a symbolic link, not
 * a regular file" (-ELOOP), "'P' is larger than 4.0 GiB" (-EFBIG); a directory
 * is -EISDIR, anything else not regular -EINVAL, a missing file -ENOENT. *st
 * (may be NULL) gets the file's fstat. */
#define TALLY_OPEN_FOLLOW 1
struct stat;
int tally_open_regular(int dirfd, const char *path, int flags, uint64_t max_size, struct stat *st);
/* What a file of this st_mode is, for errors: "a FIFO", "a directory",
 * "a regular file", "a symbolic link", "a character device", ... */
const char *tally_file_kind(unsigned mode);
/* The whole of such a file appended to sb (NUL-terminated). 0 or -errno as above. */
int tally_read_regular(struct strbuf *sb, int dirfd, const char *path, int flags,
		       uint64_t max_size);
/* The rest of fd into sb, up to max bytes (0: no bound); what names it in errors. */
int tally_read_fd(struct strbuf *sb, int fd, const char *what, uint64_t max);
/* How far tally_dir_check trusts the directories of a path. */
enum tally_dir_trust {
	/* what is written there (a job's results): no directory on the way
	 * that others may change, i.e. a group- or world-writable one only when
	 * it is sticky (/tmp), and in it only what is ours or root's */
	TALLY_DIR_SHARED,
	/* what is run or believed from there (the profilers' state, the build-id
	 * cache): that, and every directory on the way ours or root's and written
	 * by its owner alone, the last one ours */
	TALLY_DIR_PRIVATE,
};
/* Checks the directory path, walked from '/' without following any link that
 * did not pass itself, made (mode create_mode) where missing when create_mode
 * is not 0. *resolved (may be NULL) gets the path without links, to use from
 * then on: nobody but us and root can change what it names. 0, or -EPERM
 * (-errno) with tally_seterr giving the reason; the caller says what the
 * directory was for and the fix. */
int tally_dir_check(const char *path, unsigned create_mode, enum tally_dir_trust trust,
		    char **resolved);
/* The file path (links resolved) and the directories above it, as
 * tally_dir_check checks them, and the file not writable by others. 0, or
 * -EPERM (-errno) with tally_seterr giving the reason. */
int tally_file_check(const char *path, enum tally_dir_trust trust);
/* Monotonic and wall clock helpers. */
double tally_now_mono(void);
double tally_now_wall(void);
void tally_format_utc(double wall, char *buf, size_t n); /* 2026-11-21T13:07:00Z */
/* Whether name is a safe relative path to write under a directory: not empty,
 * at most max bytes, not absolute, no empty, '.' or '..' component, no
 * trailing slash, no control character. */
bool tally_relpath_ok(const char *name, size_t max);
/* Basename without allocation. */
const char *tally_basename(const char *path);
/* The directory holding path, newly allocated, as POSIX dirname(3) defines
 * it: "/x" -> "/", "x" -> ".", "/" -> "/", "a/b/" -> "a", "a//b" -> "a",
 * "" -> ".". */
char *tally_dirname(const char *path);
/* Write all n bytes to fd, retrying short writes and EINTR: 0 or -errno
 * (-EIO when write returns 0). Sets no message. */
int tally_write_all(int fd, const void *p, size_t n);

/* Calls fn(ctx, i) for every i below n, each on a thread of its own, all at
 * once (work that waits: one remote host each), and returns when every call
 * has; a call whose thread cannot be made runs on the caller's, in turn. */
void tally_run_parallel(size_t n, void (*fn)(void *ctx, size_t i), void *ctx);

#endif
