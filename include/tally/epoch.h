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
int tally_epochs_prune(const char *dir, double keep, double now, size_t keep_min, const char *current);

/* ---- which epochs a command reads ---- */

struct tally_db_select {
	const char *epoch; /* one epoch by name, or NULL */
	bool has_since, has_until;
	double since, until; /* seconds since 1970 (UTC) */
};

/* getopt_long values and table entries of --epoch, --since and --until (needs <getopt.h>). */
enum { TALLY_OPT_EPOCH = 0x2100, TALLY_OPT_SINCE, TALLY_OPT_UNTIL };
#define TALLY_DB_SELECT_LONGOPTS                                       \
	{ "epoch", required_argument, NULL, TALLY_OPT_EPOCH },         \
	{ "since", required_argument, NULL, TALLY_OPT_SINCE },         \
	{ "until", required_argument, NULL, TALLY_OPT_UNTIL }
#define TALLY_DB_SELECT_USAGE                                                                        \
	"daemon databases (all epochs merged unless one of these selects):\n"                       \
	"      --epoch NAME         only this epoch (a name such as 202611211307)\n"                 \
	"      --since WHEN         epochs with samples after WHEN: a duration ago (2h, 30m)\n"     \
	"                           or a UTC time (2026-11-21T13:07, 202611211307)\n"                \
	"      --until WHEN         epochs that began before WHEN (same forms)\n"

/* Handles one option of a command's getopt_long loop: 1 when opt was --epoch,
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

/* A bundle's bytes (read from path, which names it in errors; buf[len] is a
 * NUL, as in a strbuf), opened as
 * tally_db_open opens a bundle file (which reads the file and calls this):
 * unpacked into a new directory under $TMPDIR (else /tmp), removed by
 * tally_db_release. 0 or -errno with tally_seterr. */
int tally_db_open_bundle(struct tally_db *db, const char *path, const char *buf, size_t len);

/* "2h" (that long before now), "202611211307", "2026-11-21", "2026-11-21T13:07",
 * "2026-11-21 13:07:30Z": seconds since 1970, UTC. 0 or -EINVAL with tally_seterr. */
int tally_parse_time(const char *s, const char *what, double now, double *out);

#endif
