/* What the files of lib/db share and nobody else uses. */
#ifndef TALLY_DB_PRIVATE_H
#define TALLY_DB_PRIVATE_H

#include "tally/db.h"

/* tally_db_open_dir without the recovery step: for directories whose
 * temporaries were recovered already (a daemon's epochs) or that no other
 * writer knows (an unpacked bundle). */
int tally_db_read_dir(struct tally_db *db, const char *path);
/* The same with tally_db_open_dir_flags' flags (no recovery). */
int tally_db_read_dir_flags(struct tally_db *db, const char *path, unsigned flags);
/* Whether db (its session read) is of the format version with labels (2):
 * its profiles may name a label set, its stacks name one after the pid. */
bool tally_db_labelled(const struct tally_db *db);
/* Whether it is format version 3 or 4: counts come with weights. */
bool tally_db_weighted(const struct tally_db *db);
/* Whether it is format version 4: its stacks file is binary (or text, as
 * version 3's: either is read). */
bool tally_db_binary_stacks(const struct tally_db *db);
/* The session's weight-total, one per event, into out: 0, or -1 when it has
 * none (the reader checked its form). */
int tally_db_weight_totals(const struct tally_db *db, uint64_t *out);

/* The sample counts and their weights whether tally_db_weigh ran or not
 * (weights: NULL when the database has none). */
static inline const uint64_t *tally_db_raw_counts(const struct tally_db *db)
{
	return db->weighed ? db->weights : db->counts;
}
static inline const uint64_t *tally_db_raw_weights(const struct tally_db *db)
{
	return db->weighed ? db->counts : db->weights;
}
static inline const uint64_t *tally_db_raw_stack_counts(const struct tally_db *db)
{
	return db->weighed ? db->stack_weights : db->stack_counts;
}
static inline const uint64_t *tally_db_raw_stack_weights(const struct tally_db *db)
{
	return db->weighed ? db->stack_counts : db->stack_weights;
}
/* lib/db/weigh.c: what one sample of event ev weighs in a database without
 * weights (its session's period-mean; 1 when it has none). */
uint64_t tally_db_mean_period(const struct tally_db *db, int ev);

/* lib/db/weigh.c: the stacks of a weighed database back to sample counts
 * (before more are read into them), and weighed again (after). */
void tally_db_unweigh_stacks(struct tally_db *db);
void tally_db_weigh_loaded_stacks(struct tally_db *db);

/* ---- what the readers share (lib/db/read.c, lib/db/session.c) ---- */

#define TALLY_DB_DAMAGED "the database is damaged: record it again"

/* Digits at *p (at most 2^64 - 1), *p moved past them. */
bool tally_db_parse_dec(const char **p, uint64_t *out);
/* A whole decimal number that fits in 64 bits. */
bool tally_db_whole_u64(const char *s, uint64_t *out);
/* A process id: 0 (no process) to INT_MAX, the whole string. */
bool tally_db_parse_pid(const char *s, int *out);
/* s split at commas, *n items (each to free, and the array). */
char **tally_db_split_list(const char *s, int *n);
/* n counts separated by commas into out: 0, or -1. */
int tally_db_parse_counts(const char *s, int n, uint64_t *out);
/* The file name of the database dir into sb (its path into path), checked to
 * be a regular file of lines: 0, 1 when it is not there and optional. */
int tally_db_read_text(struct strbuf *sb, const char *dir, const char *name, struct strbuf *path,
		       bool optional);

/* A parser of one file's text (NUL-terminated, split in place). */
typedef int (*tally_db_parse_fn)(struct tally_db *db, char *text, const char *what);
/* fn over text checked to be lines first. */
int tally_db_parse_text(struct tally_db *db, char *text, size_t len, const char *what,
			tally_db_parse_fn fn);
/* fn over a copy of buf (any bytes, read-only), checked first. */
int tally_db_parse_copy(struct tally_db *db, const char *buf, size_t len, const char *what,
			tally_db_parse_fn fn);
/* lib/db/session.c: s, a UTC time in strftime's fmt, to seconds since 1970:
 * false unless the time gives the text back (strptime takes 2026-02-30). */
bool tally_db_utc_format(const char *s, const char *fmt, double *out);
/* lib/db/session.c: the session file of db->path, read and checked. */
int tally_db_load_session(struct tally_db *db, struct strbuf *sb, struct strbuf *path);

/* lib/db/labels.c: the KEY=VALUE fields of line ln of what (s: tab-separated,
 * split in place; NULL: none) into set, keys sorted: 0, or an error. */
int tally_db_parse_label_fields(char *s, const char *what, size_t ln, struct tally_labelset *set);

#endif
