/* A daemon's database: a directory of epochs, each a complete database
 * (docs/format.md) named by its UTC start time, YYYYMMDDHHMM, with -2, -3, ...
 * for a second and third epoch begun in the same minute. Which epochs a reader
 * takes (--epoch, --since, --until) and how they are merged is decided here, once,
 * for every command that reads databases. */
#ifndef TALLY_EPOCH_H
#define TALLY_EPOCH_H

#include <stdbool.h>
#include <stddef.h>

#include "tally/db.h"
#include "tally/options.h"

/* The marker file of a daemon's database directory. */
#define TALLY_DAEMON_MARKER "tally-daemon"

struct tally_epoch {
	char *name;   /* 202611211307, 202611211307-2 */
	char *path;   /* DIR/NAME */
	double start; /* seconds since 1970 (UTC): its session's start-time, else its name */
	double stop;  /* its last flush (stop-time), else start */
};

/* Whether path is a daemon's database (a directory with the marker file and no
 * session of its own). */
bool tally_db_is_daemon(const char *path);
/* Whether name has the form of an epoch's name. */
bool tally_epoch_name_ok(const char *name);
/* The epochs in dir, oldest first (by name: start minute, then number).
 * *out is the caller's (tally_epochs_free). 0 or -errno with tally_seterr. */
int tally_epochs_list(const char *dir, struct tally_epoch **out, size_t *n);
void tally_epochs_free(struct tally_epoch *e, size_t n);
/* A name for an epoch starting at `when` that dir does not have yet (caller frees). */
char *tally_epoch_new_name(const char *dir, double when);
/* Deletes the epochs whose last flush is more than keep seconds before now, but
 * never the newest keep_min ones nor the one named current. Returns how many
 * were deleted, or -errno. */
int tally_epochs_prune(const char *dir, double keep, double now, size_t keep_min,
		       const char *current);

/* Reads the epoch at path (DIR/NAME) as it is now, retried while the daemon
 * swaps a new copy in, without the recovery every open runs first: for the
 * daemon's own threads, which must not take its staging copies for a killed
 * writer's. -ENOENT when it is gone, or the reader's error (tally_seterr). */
int tally_epoch_read(struct tally_db *db, const char *path);

/* ---- which epochs a command reads ---- */

struct tally_db_select {
	const char *epoch; /* one epoch by name, or NULL */
	bool has_since, has_until;
	double since, until; /* seconds since 1970 (UTC) */
};

/* The codes of --epoch, --since and --until in tally_db_select_group. */
enum { TALLY_OPT_EPOCH = 0x2100, TALLY_OPT_SINCE, TALLY_OPT_UNTIL };

/* Handles one option of tally_db_select_group: 1 when opt was --epoch,
 * --since or --until (taken), 0 when it is not one of them, -EINVAL with
 * tally_seterr when its value is bad or --epoch meets --since/--until. */
int tally_db_select_opt(struct tally_db_select *sel, int opt, const char *arg);
/* Whether sel selects anything (else every epoch is read). */
bool tally_db_select_active(const struct tally_db_select *sel);

/* Opens path as tally_db_open does, keeping only the selected epochs (sel may
 * be NULL: all). Several epochs are merged into one database (counts summed,
 * db->nepochs set, session key 'epochs' naming them); a database or bundle
 * that is not a daemon's counts as one epoch spanning its start and stop time.
 * Reading an epoch the daemon replaces meanwhile is retried. 0 or -errno with
 * tally_seterr (an empty selection names the range and what there is). */
int tally_db_open_select(struct tally_db *db, const char *path, const struct tally_db_select *sel);
/* The same with flags (TALLY_DB_STACKS_LATER: the stacks are read by
 * tally_db_load_stacks; a bundle's are read at once). */
int tally_db_open_flags(struct tally_db *db, const char *path, const struct tally_db_select *sel,
			unsigned flags);

/* ---- bundles (docs/format.md) ---- */

/* Checks a bundle's bytes (buf, len) whole, calling file(ctx, name, data, len)
 * for each file in it when file is not NULL (a non-zero return stops and is
 * returned). what names the bundle in errors. 0, -ENOTDIR when it is not a
 * bundle at all, or -EINVAL with tally_seterr (version, entry, name, count). */
int tally_bundle_parse(const char *buf, size_t len, const char *what,
		       int (*file)(void *ctx, const char *name, const char *data, size_t len),
		       void *ctx);
/* Opens the bundle in buf as a database (unpacked into a private temporary
 * directory, removed by tally_db_release); what names it (db->path, errors).
 * tally_db_open reads a bundle file with this. 0 or -errno with tally_seterr. */
int tally_db_open_bundle_buf(struct tally_db *db, const char *buf, size_t len, const char *what);

/* "2h" (that long before now), "202611211307", "2026-11-21", "2026-11-21T13:07",
 * "2026-11-21 13:07:30Z": seconds since 1970, UTC. 0 or -EINVAL with tally_seterr. */
int tally_parse_time(const char *s, const char *what, double now, double *out);

/* --epoch, --since, --until as an option group (options.h), for a struct
 * tally_db_select context. */
extern const struct tally_optgroup tally_db_select_group;

#endif
