/* Private to lib/job: processes (spawn, wait with a time limit and an
 * interrupt, end with escalating signals, sweep what is left) and the
 * profiler plugins' insides. */
#ifndef TALLY_JOB_INTERNAL_H
#define TALLY_JOB_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tally/job.h"

/* ---- processes (proc.c) ---- */

struct job_spawn {
	char *const *argv;   /* argv[0] searched in PATH when it has no '/' */
	char *const *envp;   /* NULL: the environment as it is */
	int out_fd, err_fd;  /* -1: /dev/null */
	int go_fd;           /* >= 0: the child waits for a byte (or EOF) on it before it execs */
	int fd3, fd4;        /* >= 0: given to the child as descriptors 3 and 4 */
	/* instead of exec: the child runs fn(arg) and exits with its value */
	int (*fn)(void *arg);
	void *arg;
};

/* Forks the child in a process group of its own (a terminal's ^C reaches the
 * job, which stops the child itself), stdin /dev/null. *err_pipe (may be NULL:
 * then spawn waits to know) is a descriptor that gives the errno of a failed
 * exec, or EOF once the child has exec'd (job_exec_error). 0 or -errno. */
int job_spawn(const struct job_spawn *s, pid_t *pid, int *pidfd, int *err_pipe);
/* Reads the exec result of err_pipe and closes it: 0 when the exec happened. */
int job_exec_error(int err_pipe);
/* The job's interrupt (^C) as a wait sees it: fd becomes readable at each
 * one. Without count, a readable fd is an interrupt. With count (how many
 * there were, bumped before the byte is written), fd is drained at each
 * wake-up and only an interrupt after base counts: a first ^C ends what was
 * running when it came, not each step after it; a second one hurries
 * everything (job_intr_hurry: no more grace, no more reports). */
struct job_intr {
	int fd;
	volatile sig_atomic_t *count;
	int base;
};
/* Whether an interrupt came (drains fd when there is a count). */
bool job_intr_came(const struct job_intr *in);
/* A second interrupt came: nothing waits any more. */
bool job_intr_hurry(const struct job_intr *in);
/* in (may be NULL) with the interrupts so far as its base: what a wait that
 * starts now is ended by. */
struct job_intr job_intr_now(const struct job_intr *in);

/* Waits for pid (pidfd, -1 to poll) up to timeout seconds (< 0: no limit),
 * ending early when intr_fd (-1: none) is readable. 1 when it exited (*status
 * the wait status; reaped), 0 on time out, -EINTR when interrupted. */
int job_wait(pid_t pid, int pidfd, double timeout, int intr_fd, int *status);
/* The same, ended by the interrupt in (may be NULL). */
int job_wait_in(pid_t pid, int pidfd, double timeout, const struct job_intr *in, int *status);
/* Ends pid (its process group too when group): first_sig, then SIGTERM after
 * grace seconds, then SIGKILL after grace more; reaps it. *status (may be NULL). */
void job_end(pid_t pid, int pidfd, bool group, int first_sig, double grace, int *status);
/* The same, with no grace once in says hurry, or from its next interrupt. */
void job_end_in(pid_t pid, int pidfd, bool group, int first_sig, double grace,
		const struct job_intr *in, int *status);
/* Runs argv (envp; NULL: as it is) to its end with stdout and stderr captured
 * into out (its first 64 KiB and its last, "[...]" between them when more
 * went: the first line and the last are kept); the child's leftovers may keep the pipe open:
 * the wait is for the child, not for EOF. 0 with *status, -ETIMEDOUT (killed
 * after timeout seconds), -EINTR (intr_fd readable; killed), or -errno when it
 * could not be run (tally_seterr). */
int job_run_capture(char *const *argv, char *const *envp, double timeout, int intr_fd,
		    struct strbuf *out, int *status);
/* The same, interrupted by in (may be NULL): then SIGTERM to the child's
 * group, SIGKILL after grace seconds or at the next interrupt (grace 0:
 * SIGKILL at once, as after a time out). */
int job_run_capture_in(char *const *argv, char *const *envp, double timeout,
		       const struct job_intr *in, double grace, struct strbuf *out, int *status);
/* "exit status N" / "killed by signal N (NAME)" */
void job_describe_status(int status, struct strbuf *sb);
/* The exit status as a shell gives it (0-255, 128+N for signal N). */
int job_exit_code(int status);
/* Makes the process a child subreaper and ends every child it has left
 * (SIGTERM, then SIGKILL after grace), reaping them: nothing of a test or a
 * plugin survives it. How many it ended. */
unsigned job_sweep(double grace);
/* Whether name is found as an executable in PATH (or is a path to one). */
bool job_in_path(const char *name);
/* mkdir -p with mode for the directories it makes. 0 or -errno (tally_seterr). */
int job_mkdirs(const char *path, unsigned mode);

/* Directories out of other users' reach: tally_dir_check, tally_file_check
 * (tally/util.h). */
/* path quoted whole for an error message (escaped, at most 400 bytes), in sb. */
const char *job_qpath(struct strbuf *sb, const char *path);
/* The same into out (JOB_QPATH_SIZE bytes), as tally_excerpt is used:
 *   char q[JOB_QPATH_SIZE];
 *   tally_seterr(-e, "cannot write '%s': %s", job_qpath_buf(q, path), ...); */
#define JOB_QPATH_SIZE (400 * 4 + 4)
const char *job_qpath_buf(char *out, const char *path);

/* ---- a killed job's leftovers (proc.c) ---- */

/* Every child of job_spawn ends with the job (PR_SET_PDEATHSIG); what they
 * start in turn is the watcher's: a process of its own that outlives the
 * job. */
struct job_watch {
	pid_t pid;
	int fd;
};
/* Starts the watcher and marks the environment (TALLY_JOB_ID, random) that
 * everything the job starts from then on inherits. When the job ends
 * without job_watch_end (kill -9, the OOM killer, a crash), the watcher
 * ends every process that carries the mark, whatever its group or session
 * (SIGTERM, a second, then SIGKILL), then calls died(ctx, the last note)
 * in its own process. job_sweep spares it. 0 or -errno (tally_seterr). */
int job_watch_start(struct job_watch *w, void (*died)(void *ctx, const char *note), void *ctx);
/* What the job is doing, for died() ("test 'x'"). */
void job_watch_note(struct job_watch *w, const char *note);
/* The job ends as it should: the watcher goes, reaped. */
void job_watch_end(struct job_watch *w);

/* ---- profilers (profiler.c, builtins.c) ---- */

struct job_builtin {
	const char *name;
	const char *summary;
	/* NULL when it can run here; else why not (static) */
	const char *(*unavailable)(void);
	/* its arguments, as far as they can be checked anywhere (NULL: any):
	 * 0 or -EINVAL with the reason, before anything is made or run */
	int (*check)(char *const *args);
	int (*initialize)(struct tally_profiler *p);
	int (*start)(struct tally_profiler *p, const struct tally_profiler_run *r);
	int (*stop)(struct tally_profiler *p, const struct tally_profiler_run *r);
	int (*report)(struct tally_profiler *p, const struct tally_profiler_run *r);
	void (*release)(struct tally_profiler *p);
};

struct tally_profiler {
	char *name, *where, *label;
	char **args;
	char *version;
	int version_err;              /* why version is NULL: -errno */
	const struct job_builtin *bi; /* NULL: an external plugin */
	char *exe;                    /* external: DIR/NAME/profiler */
	char *srcdir;                 /* external: TALLY_SRCDIR (NULL: no state directory) */
	bool srcdir_ok;               /* srcdir checked (setup): it may be given to the steps */
	void *state;                  /* the built-in's */
	const struct job_intr *intr;  /* the job's ^C, which ends a step (NULL: none) */
};

extern const struct job_builtin job_builtin_tally, job_builtin_cmd, job_builtin_perf;
/* A built-in profiler's arguments checked (job_builtin.check): 0 for any
 * other name, or -EINVAL with "profiler 'NAME': REASON". */
int job_builtin_check(const char *name, char *const *args);

/* ---- remote hosts (hosts.c, docs/remote.md) ---- */

struct job_hosts;
/* The hosts of a job: profilers is what their agents run (one a line: NAME
 * [ARGS...], in the order of the control file's adds), labels their names for
 * warnings; limit: seconds a host that went away may take to come back, and
 * a request may take; env: where the job found its external profilers (they
 * are sent to each host with its agent). */
int job_hosts_new(struct job_hosts **out, char *const *hosts, size_t n, const char *root,
		  double limit, const char *jobname, const char *profilers, const char *labels,
		  const struct tally_profiler_env *env);
/* tally installed where it is missing and an agent started on every host, all
 * at once; an error names every host that failed (no test may run then). */
int job_hosts_begin(struct job_hosts *hs);
/* The profilers of indices ("0,2", "-": none) started on every host, all at
 * once, waited for; what failed into errs, what happened (a host rebooted,
 * its agent restarted) into notes. */
void job_hosts_start(struct job_hosts *hs, const char *tag, unsigned iter, const char *indices,
		     struct strbuf *errs, struct strbuf *notes);
/* Stopped and reported on every host, the results pulled into profdir/HOST/. */
void job_hosts_stop(struct job_hosts *hs, const char *profdir, struct strbuf *errs,
		    struct strbuf *notes);
/* The hosts' tally.db of the iteration in profdir summed into all-hosts.db
 * (label host=HOST) with its report by host in all-hosts.txt; a failure into errs. */
void job_hosts_merge(struct job_hosts *hs, const char *profdir, int intr_fd, struct strbuf *errs);
/* How many hosts are lost. */
size_t job_hosts_lost(const struct job_hosts *hs);
/* Every agent told to quit and its directory removed. */
void job_hosts_free(struct job_hosts *hs);

/* One host in one profiled iteration, as status.json tells it. */
struct job_host_iter {
	const char *host;
	unsigned iteration;
	bool lost;
	double start, stop, pull;  /* seconds its requests took */
	size_t files;
	uint64_t bytes;            /* what its pull brought */
	char *note;                /* what happened to it (a reboot, a restart), or NULL */
	char *start_err, *stop_err, *pull_err; /* each step's error, or NULL */
};
/* The hosts' records of the iteration that job_hosts_start and _stop just
 * ran, copied: *out the caller's (job_host_iters_free with whole). */
void job_hosts_iteration(const struct job_hosts *hs, struct job_host_iter **out, size_t *n);
void job_host_iters_free(struct job_host_iter *v, size_t n, bool whole);
/* status.json's "hosts" of a test (the records) and of the job (each host,
 * its state, boot id, install and agent restarts). */
struct tally_json;
void job_host_iters_json(const struct job_host_iter *v, size_t n, struct tally_json *js);
void job_hosts_json(const struct job_hosts *hs, struct tally_json *js);
/* The hosts, their names, and whether the setup of profiler prof (0-based,
 * in the order of the adds) ran on host i when its agent last started. */
size_t job_hosts_count(const struct job_hosts *hs);
const char *job_hosts_name(const struct job_hosts *hs, size_t i);
bool job_hosts_setup_ran(const struct job_hosts *hs, size_t i, size_t prof);

#endif
