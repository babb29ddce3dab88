/* The daemon's engine (docs/daemon.md): the whole system sampled without end
 * into a database of epochs; what is in memory is merged into the current
 * epoch every flush interval (within disk quotas), old epochs are pruned, a
 * drain stream hands out what came since the last drain, and a control server
 * answers tally ctl on a Unix socket without ever waiting on a client.
 *
 * The engine never prints, exits or forks: what it has to say goes to the
 * log function its caller gives; detaching (fork, setsid) and signals are the
 * caller's (builtin/daemon.c), but for one: a daemon whose database
 * directory was removed raises SIGTERM, and so stops as that stops it. One
 * thread drives it; tally_daemon_wake may be called from a signal handler. */
#ifndef TALLY_DAEMON_H
#define TALLY_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "tally/agg.h"
#include "tally/collect.h"
#include "tally/sampling.h"
#include "tally/util.h"

/* The log's name inside the database directory (not counted by --max-db-size). */
#define TALLY_DAEMON_LOG_NAME "daemon.log"
/* Control connections served at once (docs/daemon.md: the limits). */
#define TALLY_DAEMON_MAX_CLIENTS 16
/* Seconds a new control connection keeps its slot whatever comes after it:
 * the time its client has to send the request (docs/daemon.md). */
#define TALLY_DAEMON_CTL_GRACE 0.05
/* Seconds the daemon's end waits for the push of what its last flush added
 * (docs/push.md): what is not sent by then stays in the backlog. */
#define TALLY_DAEMON_PUSH_GRACE 5.0
/* --keep never deletes the newest epochs. */
#define TALLY_DAEMON_KEEP_NEWEST 3

/* One line for the log (no newline); the caller adds the time and its pid. */
typedef void (*tally_daemon_log_fn)(void *ctx, const char *line);

struct tally_push_opts;
struct tally_daemon_opts {
	const char *db;            /* the database directory (created when missing) */
	const char *socket;        /* the control socket; NULL: DIR/ctl.sock */
	const char *pidfile_extra; /* --pid-file, or NULL */
	double flush_interval;     /* seconds (default 60) */
	double epoch_every;        /* 0: only on request */
	double keep;               /* 0: keep every epoch */
	double ctl_timeout;        /* seconds (default 5) */
	uint64_t max_memory;       /* bytes (default 128 MiB) */
	uint64_t max_db_size;      /* 0: no bound */
	uint64_t min_free;         /* bytes (default 64 MiB) */
	/* How to sample: resolved, the caller's; it must outlive the daemon. */
	const struct tally_sampling *smp;
	/* --push: what each flush adds is sent there (docs/push.md); NULL:
	 * nothing is pushed. Copied. */
	const struct tally_push_opts *push;
	bool verbose;              /* log every flush and status request */
	tally_daemon_log_fn log;   /* NULL: nothing is logged */
	void *log_ctx;
};

struct tally_daemon;

/* A log writer for the daemon (tally_daemon_logfile_line is a
 * tally_daemon_log_fn): `TIME tally daemon[PID]: line`, to a stream (not
 * closed here), or once opened to a file rotated at 1 MiB (one old copy,
 * PATH.1). */
struct tally_daemon_logfile {
	FILE *f;
	char *path; /* NULL: a stream */
};
void tally_daemon_logfile_init(struct tally_daemon_logfile *lg, FILE *stream);
/* From now on to the file at path (appended). 0 or -errno with tally_seterr. */
int tally_daemon_logfile_open(struct tally_daemon_logfile *lg, const char *path);
/* Opens the file again (after someone else rotated it: SIGHUP). */
void tally_daemon_logfile_reopen(struct tally_daemon_logfile *lg);
void tally_daemon_logfile_line(void *ctx, const char *line);
void tally_daemon_logfile_printf(struct tally_daemon_logfile *lg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Closes the file (not a stream). */
void tally_daemon_logfile_release(struct tally_daemon_logfile *lg);

/* The defaults of the options (sizes, intervals); db and smp are left NULL. */
void tally_daemon_opts_init(struct tally_daemon_opts *o);

/* Prepares the database directory (created, or an existing daemon database of
 * this user; made private), takes its lock (one daemon per database), removes
 * what a killed daemon left and listens on the control socket. Nothing is
 * sampled yet. *out is the caller's (tally_daemon_free). 0 or -errno with
 * tally_seterr; a directory it created is removed again. */
int tally_daemon_new(struct tally_daemon **out, const struct tally_daemon_opts *o);

/* The database directory (absolute), the socket's path (absolute). */
const char *tally_daemon_db(const struct tally_daemon *d);
const char *tally_daemon_socket(const struct tally_daemon *d);
/* How samples reach it, in words: through the ring buffers, or counted in the kernel. */
const char *tally_daemon_sample_mech(const struct tally_daemon *d);

/* Starts: writes the pid file, opens the collector on every CPU the sampling
 * settings name, begins the first epoch and prunes. 0, or -errno with
 * tally_seterr (nothing sampled). When the first epoch cannot be written the
 * daemon starts all the same (writing is retried every flush): 0, and
 * *warning (may be NULL) gets why, the caller's to free. */
int tally_daemon_start(struct tally_daemon *d, char **warning);
/* The same over an aggregate its caller feeds (a harness, a test): no
 * collector of its own; col may be NULL (then start, stop and cpus are
 * refused). agg and col stay the caller's and must outlive the daemon. */
int tally_daemon_begin(struct tally_daemon *d, struct tally_agg *agg, struct tally_collector *col,
		       char **warning);

/* One round: waits up to timeout_ms (negative: the daemon's tick, 200 ms, the
 * interval of the randomized period's redraw) for records or control connections, serves the
 * connections that are ready, drops those past their deadline, watches memory, and flushes or
 * begins an epoch when their time has come. Once a second it looks for its database directory:
 * removed or moved, it raises SIGTERM (and tally_daemon_stop then writes nothing). */
void tally_daemon_step(struct tally_daemon *d, int timeout_ms);
/* Serves the control connections that are ready now, without waiting. */
void tally_daemon_serve(struct tally_daemon *d);
/* Ends the current wait at once. Async-signal-safe. */
void tally_daemon_wake(struct tally_daemon *d);

/* Writes what is in memory into the current epoch (and the drain's pile). 0
 * (msg, may be NULL, says what), or -errno with tally_seterr: then writing is
 * stopped until a flush succeeds, and what is in memory stays. why is logged. */
int tally_daemon_flush(struct tally_daemon *d, const char *why, struct strbuf *msg);
/* Flushes, then begins a new epoch. 0 (msg says what) or -errno. */
int tally_daemon_new_epoch(struct tally_daemon *d, struct strbuf *msg);
/* Flushes, then appends everything since the previous drain to out as one
 * bundle, and forgets it for the drain stream. 0 or -errno with tally_seterr. */
int tally_daemon_drain(struct tally_daemon *d, struct strbuf *out);
/* The `status` text: `key: value` lines. */
void tally_daemon_status(struct tally_daemon *d, struct strbuf *out);
/* Runs one control request line (no newline) from uid; the framed reply (ok or
 * error) is appended to out. */
void tally_daemon_control(struct tally_daemon *d, const char *line, uid_t uid, struct strbuf *out);

/* Takes a connected control socket (accepted, or one end of a socketpair) as
 * a client of uid: refused at once unless uid is the owner's or root's; when
 * every slot is taken, the oldest connection still short of its request and
 * older than TALLY_DAEMON_CTL_GRACE is evicted (told `busy`); when there is
 * none, the new one is told `busy`. Its request is read (and run) at once if
 * it is there. fd becomes the daemon's (closed by it). 0 when it got a slot,
 * -EPERM (refused), -EBUSY (no slot) or -errno. */
int tally_daemon_add_client(struct tally_daemon *d, int fd, uid_t uid);
/* Control connections held now. */
int tally_daemon_clients(const struct tally_daemon *d);

/* The end: the last records are read and what is in memory is flushed. 0 (msg,
 * may be NULL, says what was written) or -errno with tally_seterr (msg says
 * how many samples could not be written, and why: they are lost). */
int tally_daemon_stop(struct tally_daemon *d, struct strbuf *msg);

/* Closes connections and the socket (removed), releases the lock, frees
 * everything; a database directory this daemon created but never started in is
 * removed. Accepts NULL. */
void tally_daemon_free(struct tally_daemon *d);

#endif
