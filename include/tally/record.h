/* The recording engine: the collector opened on a target (a command it
 * starts, running processes, or the whole system), its records fed to the
 * aggregate round by round, the stop conditions (a request, a duration, the
 * target's exit) and the database written at the end. tally record drives one
 * to its end; tally daemon turns its rounds without end and writes epochs of
 * its own; a job harness can start one in-process around a test and stop it
 * when the test ends.
 *
 * The engine never prints, exits or installs a signal handler: a caller that
 * wants signals to stop it calls tally_recording_request_stop (and
 * tally_recording_wake on SIGCHLD) from its handlers.
 *
 * Threads: one thread owns a recording and calls everything but
 * tally_recording_request_stop and tally_recording_wake, which any thread or a
 * signal handler may call at any time between new and free. */
#ifndef TALLY_RECORD_H
#define TALLY_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include "tally/agg.h"
#include "tally/collect.h"
#include "tally/db.h"
#include "tally/sampling.h"

struct tally_recording_opts {
	/* How to sample: resolved (tally_sampling_resolve); the caller's, it must
	 * outlive the recording. */
	const struct tally_sampling *smp;
	enum tally_target target;
	/* TARGET_CHILD: the command, NULL-terminated (argv[0] is searched in PATH).
	 * It is started stopped by tally_recording_new and execs at
	 * tally_recording_start; SIGINT, SIGTERM and SIGCHLD are default in it. */
	char *const *argv;
	/* TARGET_PIDS: the processes to attach to (their threads are followed). */
	const int *pids;
	size_t npids;
	/* Stop after this many seconds of sampling; 0: no limit. A command still
	 * running then is sent SIGTERM and waited for. */
	double duration;
	/* A descriptor polled with the ring buffers, so that the caller's own
	 * events (an epoll set of sockets) end a wait; -1 (tally_recording_opts_init):
	 * the recording makes its own, which tally_recording_wake writes to. */
	int wake_fd;
	/* Side-band records from a dummy event per CPU, so that sampling can be
	 * paused while processes are still followed (a daemon). */
	bool sideband_dummy;
	/* Identify every file image in the round it is first mapped
	 * (tally_agg_identify), not only those of other mount namespaces: what a
	 * collector that runs for long needs (docs/daemon.md). */
	bool identify_early;
	/* Copy each sampled file image (and its debug file) into the user's
	 * build-id cache (tally/cache.h), on a thread of its own, so that the
	 * database names its code after a rebuild (docs/symbols.md). On by
	 * default (tally_recording_opts_init); TALLY_BUILDID_CACHE=off turns it
	 * off for every recording. */
	bool buildid_cache;
};

/* Why a recording ended. */
enum tally_recording_end {
	TALLY_RECORDING_RUNNING = 0, /* it has not */
	TALLY_RECORDING_REQUESTED,   /* tally_recording_request_stop, or stopped by its owner */
	TALLY_RECORDING_DURATION,    /* opts.duration ran out */
	TALLY_RECORDING_CHILD_EXITED, /* the command ended */
	TALLY_RECORDING_PIDS_EXITED, /* every attached process ended */
	TALLY_RECORDING_FAILED,      /* reading the rings failed (tally_recording_run's error) */
};

struct tally_recording;

/* Defaults: no target, no duration, wake_fd -1. */
void tally_recording_opts_init(struct tally_recording_opts *o);

/* Opens the collector on the target (starting the command, stopped before its
 * exec) and an empty aggregate; nothing is sampled until tally_recording_start.
 * *out is the caller's (tally_recording_free). 0, or -errno with tally_seterr:
 * -EINVAL for options that do not fit together, the collector's error
 * (privilege, rate) otherwise; the command is then killed and reaped. */
int tally_recording_new(struct tally_recording **out, const struct tally_recording_opts *o);

/* Enables the events and lets the command exec. 0, or -errno with tally_seterr;
 * a command that cannot be run ("cannot run 'x': ...") gives
 * tally_recording_exit_code 127 and the recording ends. */
int tally_recording_start(struct tally_recording *r);

/* One round: waits up to timeout_ms (negative: the recording's own tick, 50 ms,
 * 100 ms without randomization) for records, feeds them to the aggregate,
 * identifies new images, frees exited processes, then checks the stop
 * conditions. 1 once the recording has ended (tally_recording_end), 0 while it
 * goes on, -errno with tally_seterr when reading the rings failed (it goes on:
 * the caller decides). */
int tally_recording_step(struct tally_recording *r, int timeout_ms);

/* Rounds until the recording ends. 0, or the -errno of a failed round (the
 * recording has then ended with TALLY_RECORDING_FAILED). */
int tally_recording_run(struct tally_recording *r);

/* Asks the recording to end: a command is sent SIGTERM (again every round until
 * it exits) and the recording ends when it does; any other target ends at the
 * next round. Async-signal-safe, callable from any thread. */
void tally_recording_request_stop(struct tally_recording *r);
/* Ends the current wait early (e.g. from a SIGCHLD handler). Async-signal-safe,
 * any thread; without opts.wake_fd only. */
void tally_recording_wake(struct tally_recording *r);

/* Ends sampling: a command still running is sent SIGTERM and waited for, the
 * events are disabled and the records still in the rings are read. Calling it
 * again does nothing. 0 or -errno with tally_seterr. */
int tally_recording_stop(struct tally_recording *r);

/* After stop (which it calls when needed): copies the JIT sources of the
 * processes still alive, makes the task list and the session (how, what, when;
 * the command's exit status). Calling it again does nothing. After this the
 * aggregate's jit_warnings are final. */
int tally_recording_finish(struct tally_recording *r);

/* Writes the database to path (finishing first when needed); with force an
 * existing database there is replaced. When path appeared during the recording
 * (it was checked free before: tally_db_check_target) and force is not set,
 * the data goes to "path.PID" instead. *written (may be NULL) gets the
 * directory really written, the caller's to free. 0 or -errno with tally_seterr. */
int tally_recording_write(struct tally_recording *r, const char *path, bool force, char **written);

/* Why it ended (TALLY_RECORDING_RUNNING while it goes on). */
enum tally_recording_end tally_recording_end(const struct tally_recording *r);
/* The command's pid (TARGET_CHILD), else -1. */
int tally_recording_pid(const struct tally_recording *r);
/* The command's exit status as a shell gives it (0-255, 128+N for signal N,
 * 127 when it could not be run), or -1 without a command or while it runs. */
int tally_recording_exit_code(const struct tally_recording *r);
/* Samples of every event, and samples the kernel lost, so far. */
uint64_t tally_recording_samples(const struct tally_recording *r);
uint64_t tally_recording_lost(const struct tally_recording *r);
/* Seconds of sampling: from start to stop (to now while it runs). */
double tally_recording_duration(const struct tally_recording *r);
/* The parts, for a caller that does more with them (a daemon flushes the
 * aggregate itself; tally record prints the event periods): owned by r. */
struct tally_agg *tally_recording_agg(struct tally_recording *r);
struct tally_collector *tally_recording_collector(struct tally_recording *r);
/* The session made by tally_recording_finish (NULL before). */
const struct tally_meta *tally_recording_session(const struct tally_recording *r);

/* What the build-id cache could not copy yet goes on in a detached process
 * (tally_cache_filler_handoff): for a caller about to exit (tally record),
 * whose end then never waits for a copy. */
void tally_recording_cache_handoff(struct tally_recording *r);
/* Why the build-id cache is not filled (it cannot be used), or NULL. */
const char *tally_recording_cache_warning(const struct tally_recording *r);

/* Kills a command still running (SIGKILL) and reaps it, frees everything.
 * Accepts NULL. */
void tally_recording_free(struct tally_recording *r);

#endif
