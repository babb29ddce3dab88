/* Private to lib/job: processes (spawn, wait with a time limit and an
 * interrupt, end with escalating signals, sweep what is left) and the
 * profiler plugins' insides. */
#ifndef TALLY_JOB_INTERNAL_H
#define TALLY_JOB_INTERNAL_H

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
/* Waits for pid (pidfd, -1 to poll) up to timeout seconds (< 0: no limit),
 * ending early when intr_fd (-1: none) is readable. 1 when it exited (*status
 * the wait status; reaped), 0 on time out, -EINTR when interrupted. */
int job_wait(pid_t pid, int pidfd, double timeout, int intr_fd, int *status);
/* Ends pid (its process group too when group): first_sig, then SIGTERM after
 * grace seconds, then SIGKILL after grace more; reaps it. *status (may be NULL). */
void job_end(pid_t pid, int pidfd, bool group, int first_sig, double grace, int *status);
/* Runs argv (envp; NULL: as it is) to its end with stdout and stderr captured
 * into out (its first 64 KiB); the child's leftovers may keep the pipe open:
 * the wait is for the child, not for EOF. 0 with *status, -ETIMEDOUT (killed
 * after timeout seconds), -EINTR (intr_fd readable; killed), or -errno when it
 * could not be run (tally_seterr). */
int job_run_capture(char *const *argv, char *const *envp, double timeout, int intr_fd, struct strbuf *out, int *status);
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

/* ---- profilers (profiler.c, builtins.c) ---- */

struct job_builtin {
	const char *name;
	const char *summary;
	/* NULL when it can run here; else why not (static) */
	const char *(*unavailable)(void);
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
	const struct job_builtin *bi; /* NULL: an external plugin */
	char *exe;                    /* external: DIR/NAME/profiler */
	char *srcdir;                 /* external: TALLY_SRCDIR */
	void *state;                  /* the built-in's */
};

extern const struct job_builtin job_builtin_tally, job_builtin_cmd, job_builtin_perf;

/* ---- remote hosts (hosts.c, docs/remote.md) ---- */

struct job_hosts;
/* The hosts of a job: profilers is what their agents run (one a line: NAME
 * [ARGS...], in the order of the control file's adds), labels their names for
 * warnings; limit: seconds a host that went away may take to come back, and
 * a request may take; env: where the job found its external profilers (they
 * are sent to each host with its agent). */
int job_hosts_new(struct job_hosts **out, char *const *hosts, size_t n, const char *root, double limit, const char *jobname,
		  const char *profilers, const char *labels, const struct tally_profiler_env *env);
/* tally installed where it is missing and an agent started on every host, all
 * at once; an error names every host that failed (no test may run then). */
int job_hosts_begin(struct job_hosts *hs);
/* The profilers of indices ("0,2", "-": none) started on every host, all at
 * once, waited for; what failed into errs, what happened (a host rebooted,
 * its agent restarted) into notes. */
void job_hosts_start(struct job_hosts *hs, const char *tag, unsigned iter, const char *indices, struct strbuf *errs,
		     struct strbuf *notes);
/* Stopped and reported on every host, the results pulled into profdir/HOST/. */
void job_hosts_stop(struct job_hosts *hs, const char *profdir, struct strbuf *errs, struct strbuf *notes);
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
