/* What the daemon engine's files share (lib/daemon/): its state and the
 * functions one part calls in another. Not installed: include/tally/daemon.h
 * is the interface. */
#ifndef TALLY_DAEMON_INTERNAL_H
#define TALLY_DAEMON_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tally/agg.h"
#include "tally/collect.h"
#include "tally/daemon.h"
#include "tally/db.h"
#include "tally/snapshot.h"
#include "tally/push.h"
#include "tally/record.h"
#include "tally/sampling.h"
#include "tally/util.h"

#define DRAIN_DIR "drain"
/* the longest wait of a round, ms (tally_daemon_step) */
#define DAEMON_TICK_MS 200

/* A control connection: reading its request until a newline (or the peer's
 * end), then writing its reply as the peer takes it, then closed. */
struct client {
	int fd;
	uid_t uid;
	struct strbuf in, out;
	size_t out_off;
	double deadline; /* monotonic: the whole request by then, each part of the reply */
	double since;    /* monotonic: accepted */
	uint64_t serial; /* accept order: the oldest is evicted first */
	bool replying;
};

struct tally_daemon {
	/* configuration */
	char *db, *sock, *pidfile, *pidfile_extra;
	const struct tally_sampling *smp;
	double flush_interval, epoch_every, keep, ctl_timeout;
	uint64_t max_memory, max_db_size, min_free;
	bool verbose;
	tally_daemon_log_fn log;
	void *log_ctx;
	struct tally_push_opts *push; /* --push (NULL: none) */
	struct tally_pusher *pusher;  /* its thread, once begun */
	bool created_db; /* made by this start: removed again if the start fails */
	bool started;

	/* resources */
	int lockfd, listenfd, epfd;
	int wake[2];
	struct tally_recording *rec; /* the daemon's own, or NULL (tally_daemon_begin) */
	struct tally_collector *col; /* NULL: none */
	/* the collector's randomized-samples (reached, total per event) at the last
	 * flush: an epoch's session says those of its own samples */
	uint64_t rs_base[2][TALLY_SAMPLING_MAX_EVENTS];
	struct tally_agg *agg;
	struct tally_ksym_cache kc;
	struct client clients[TALLY_DAEMON_MAX_CLIENTS];
	uint64_t serial;
	/* no slot could be freed: new connections wait in the kernel's backlog
	 * (the socket is not watched) until a slot frees or this time */
	bool listen_paused;
	double listen_resume;

	/* the control server's figures (status) */
	uint64_t ctl_served, ctl_evicted, ctl_busy, ctl_refused, ctl_dropped;
	double refused_logged;   /* monotonic: last refusal logged */
	uint64_t refused_quiet;  /* refusals not logged since */

	/* state */
	char *epoch;
	double epoch_start;          /* wall */
	double delta_start;          /* wall: what is in memory began here */
	double wall_start, mono_start;
	double next_flush, next_epoch, last_early, last_watch; /* monotonic */
	size_t watch_agg;            /* the aggregate's own count at the last look at memory */
	char *write_error;           /* NULL while writing works */
	uint64_t samples_total, lost_total, dropped, cleared;
	uint64_t flushes, early_flushes, drains;
	/* the drain stream: kept (DIR/drain, merged at every flush) only once a
	 * client has drained, from this daemon or an earlier one; before that the
	 * first drain is made from the epochs this daemon began */
	bool draining;
	char **my_epochs;
	size_t nmy_epochs, amy_epochs;
	double last_flush_ms, last_flush_wall;
	uint64_t db_bytes;
	/* the current epoch's copy kept from the last flush for the next to write
	 * over (lib/db), and what it takes on disk (counted in db_bytes) */
	struct tally_db_spare spare;
	uint64_t spare_bytes;
	/* the database directory as it was opened: a daemon whose directory is
	 * removed (or moved) can write nothing more, and nobody can reach its
	 * socket: it stops (tally_daemon_step) */
	dev_t db_dev;
	ino_t db_ino;
	double last_db_look; /* monotonic */
	bool db_gone;
	bool memory_warned;
	uint64_t nostack_logged; /* off-CPU waits without their stack, said in the log so far */
};

/* engine.c */
void dmn_log(struct tally_daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* engine.c: reads what the collector holds now (before a flush or a peek) */
void dmn_sync(struct tally_daemon *d);
uint64_t dmn_memory_used(const struct tally_daemon *d);
uint64_t dmn_agg_samples(const struct tally_daemon *d);
/* A CPU's sampling state (all off without a collector). */
void dmn_cpu_state(const struct tally_daemon *d, int cpu, struct tally_cpu_state *st);

/* store.c: the database side */
char *dmn_path(const struct tally_daemon *d, const char *name);
uint64_t dmn_db_bytes(const struct tally_daemon *d);
void dmn_session(struct tally_daemon *d, const struct tally_agg *a, struct tally_meta *s,
		 double now);
int dmn_begin_epoch(struct tally_daemon *d, double now);
void dmn_prune(struct tally_daemon *d, double now);
void dmn_recover(struct tally_daemon *d);
void dmn_set_write_error(struct tally_daemon *d, const char *msg);

/* server.c: the control server */
int dmn_listen(struct tally_daemon *d);
/* Milliseconds until the control server needs a round (-1: no need). */
int dmn_ctl_due_ms(const struct tally_daemon *d);
void dmn_close_clients(struct tally_daemon *d);

#endif
