/* The job harness (tally job, docs/job.md): profilers as plugins run around
 * tests, in autotest's model. A control file says which profilers run around
 * which tests; each profiler is a plugin with the steps setup (once per
 * version), initialize (every load), start, stop and report (every profiled
 * iteration); results go to RESULTS/TAG/ for each test with a job-wide
 * status.json.
 *
 * The steps are functions of their own that take the profiling directory as a
 * parameter, so that something other than the job (an agent on a remote host)
 * can drive the same profilers. The core never prints or exits: progress goes
 * through a callback, errors through tally_seterr. */
#ifndef TALLY_JOB_H
#define TALLY_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "tally/util.h"

/* ---- shell-style words ---- */

/* Splits line into words as a POSIX shell would without expanding anything:
 * blanks separate words, '...' keeps everything literally, "..." keeps
 * everything but \" \\ \$ \` (escapes), a backslash outside quotes keeps the
 * next character, '#' at the start of a word begins a comment. A '$' or '`'
 * outside single quotes and unescaped is refused (-EINVAL: the control file
 * has no variables and never any command substitution), as is an unterminated
 * quote. *out is a NULL-terminated array, *n its length (may be NULL); both
 * the caller's (tally_job_argv_free). 0 or -EINVAL with tally_seterr (the
 * message names the problem, not the line: the caller adds where). */
int tally_job_split(const char *line, char ***out, size_t *n);
void tally_job_argv_free(char **argv);
char **tally_job_argv_dup(char *const *argv);

/* ---- control files ---- */

enum tally_job_cmd {
	TALLY_JOB_ADD,    /* profilers add NAME [ARGS...] */
	TALLY_JOB_DELETE, /* profilers delete NAME */
	TALLY_JOB_ONLY,   /* profilers only on|off */
	/* run [--iterations N] [--tag TAG] [--timeout D] TEST [ARGS...] | -- COMMAND [ARGS...] */
	TALLY_JOB_RUN,
	/* hosts HOST... (before the first run: the job's remote hosts, as --host) */
	TALLY_JOB_HOSTS,
};

struct tally_job_step {
	enum tally_job_cmd cmd;
	unsigned line;      /* 1-based line in the control file */
	char *name;         /* ADD, DELETE: the profiler */
	/* ADD: its arguments; RUN: the test and its arguments; HOSTS: the hosts (NULL-
	 * terminated) */
	char **args;
	bool only;          /* ONLY */
	bool command;       /* RUN: a command (after --), not a built-in test */
	unsigned iterations; /* RUN: unprofiled iterations (default 1) */
	double timeout;     /* RUN: seconds per iteration (0: none) */
	char *tag;          /* RUN: the results directory's name (--tag, else the test's) */
};

struct tally_job_control {
	char *path; /* as given, for errors */
	struct tally_job_step *steps;
	size_t n, alloc;
};

/* Parses a control file's text: one command a line, '#' comments, words as
 * tally_job_split. Checks what can be checked without the profilers path: the
 * commands and their options, built-in tests and profilers and their
 * arguments, profiler names (letters, digits, '_', '-', '.'; not starting
 * with '.'), deleting a
 * profiler that is not added, adding one twice (cmd excepted), a file without
 * any run. Tags not given are made unique (.2, .3), stepping aside for the
 * tags given; a tag given twice is refused. 0, or -EINVAL with
 * tally_seterr "'PATH' line N: ..." (one line). c is the caller's
 * (tally_job_control_release, also after a failure). */
int tally_job_control_parse(struct tally_job_control *c, const char *path, const char *text);
/* The same, reading path first (-errno with tally_seterr naming it). */
int tally_job_control_read(struct tally_job_control *c, const char *path);
void tally_job_control_release(struct tally_job_control *c);

/* The built-in tests ("sleeptest"). */
bool tally_job_builtin_test(const char *name);

/* ---- profilers ---- */

/* Where external profilers are found and where they keep their state. */
struct tally_profiler_env {
	char **path;           /* directories searched in order (NULL-terminated; may be NULL) */
	const char *state_dir; /* TALLY_SRCDIR of profiler NAME is state_dir/NAME */
};

/* The directories to search: dirs (--profilers-path, colon-separated; may be
 * NULL), then TALLY_PROFILERS_PATH, then TALLY_PROFILERS_SYSDIR. *out is the
 * caller's (tally_job_argv_free). */
#define TALLY_PROFILERS_SYSDIR "/usr/lib/tally/profilers"
void tally_profilers_path(const char *dirs, char ***out);
/* The state directory: TALLY_STATE_DIR, else $XDG_STATE_HOME/tally/profilers,
 * else $HOME/.local/state/tally/profilers. Newly allocated. */
char *tally_profilers_state_dir(void);

/* One profiled iteration, as the steps see it. */
struct tally_profiler_run {
	const char *profdir; /* where the results go (exists) */
	const char *test;    /* the test's tag */
	unsigned iteration;  /* 1-based */
	int test_pid;        /* the test's process, started and waiting for its go; -1 without */
};

struct tally_profiler;

/* Finds profiler name (a built-in: tally, cmd, perf; else NAME/profiler on the
 * path) for use with args (copied). -ENOENT with tally_seterr naming the
 * directories searched. *out is the caller's (tally_profiler_free). */
int tally_profiler_find(struct tally_profiler **out, const char *name, char *const *args,
			const struct tally_profiler_env *env);
void tally_profiler_free(struct tally_profiler *p);
const char *tally_profiler_name(const struct tally_profiler *p);
/* "built-in", or the plugin's directory. */
const char *tally_profiler_where(const struct tally_profiler *p);
/* The plugin's version (the tally version for built-ins; `profiler version`
 * for the others, asked once and kept). Owned by p; NULL with tally_seterr
 * when it cannot be had. */
const char *tally_profiler_version(struct tally_profiler *p);
/* The name the profiler's files are given in the profiling directory (cmd:
 * "cmd-vmstat"); set when several instances share a directory. */
void tally_profiler_set_label(struct tally_profiler *p, const char *label);
const char *tally_profiler_label(const struct tally_profiler *p);

/* The steps. Each returns 0, or -errno with tally_seterr naming the profiler,
 * the step and its message. intr_fd (may be -1): when it becomes readable,
 * setup and initialize give up (-EINTR). */
/* setup: runs `setup` when the version differs from the one recorded after the
 * last successful setup in TALLY_SRCDIR, holding a lock there so that two jobs
 * starting together set up once. *ran (may be NULL): whether it ran. */
int tally_profiler_setup(struct tally_profiler *p, const struct tally_profiler_env *env,
			 int intr_fd, bool *ran);
int tally_profiler_initialize(struct tally_profiler *p, const struct tally_profiler_env *env,
			      int intr_fd);
int tally_profiler_start(struct tally_profiler *p, const struct tally_profiler_run *r);
int tally_profiler_stop(struct tally_profiler *p, const struct tally_profiler_run *r);
int tally_profiler_report(struct tally_profiler *p, const struct tally_profiler_run *r);

/* What `tally job profilers` lists. */
struct tally_profiler_info {
	char *name, *where, *version; /* version NULL when it could not be had (error: why) */
	char *error;
	/* "built-in", "yes" (version set up), "no", "old (VERSION)" */
	char *setup;
};
/* Every built-in and every profiler on the path (the first of a name wins;
 * later ones are listed as shadowed). *out the caller's (tally_profiler_infos_free). */
int tally_profilers_list(const struct tally_profiler_env *env, struct tally_profiler_info **out,
			 size_t *n);
void tally_profiler_infos_free(struct tally_profiler_info *v, size_t n);

/* ---- jobs ---- */

struct tally_job_opts {
	const char *control;      /* the control file */
	/* Remote hosts (--host, docs/remote.md): the profilers run on each, through
	 * an agent there, and their results come back to profiling/HOST/; none: here. */
	char *const *hosts;
	size_t nhosts;
	const char *remote_root;  /* NULL: TALLY_REMOTE_ROOT */
	/* how long a host that went away may take to come back (0: 60 s) */
	double host_timeout;
	/* NULL: ./results/JOBNAME (the control file's name without extension) */
	const char *results;
	const char *profilers_path; /* --profilers-path (colon-separated), may be NULL */
	const char *state_dir;    /* NULL: tally_profilers_state_dir() */
	/* Progress, one line at a time (a test started, its result); may be NULL. */
	void (*progress)(void *ctx, const char *line);
	void *progress_ctx;
};

struct tally_job;

/* Reads and checks the control file, finds every profiler it adds (before
 * anything runs), and creates the results directory (refused when it exists:
 * results are never overwritten). *out the caller's (tally_job_free). 0, or
 * -errno with tally_seterr. */
int tally_job_new(struct tally_job **out, const struct tally_job_opts *o);
/* Sets up and initializes every profiler, then runs the control file's
 * commands. Returns 0 when the job ran to its end (tests may have failed:
 * tally_job_failed), -EINTR when interrupted (the results are whole: the test
 * was stopped, its profilers stopped and reported, status written), other
 * -errno with tally_seterr when a profiler's setup or initialize failed (no
 * test ran) or the results cannot be written. Nothing it started is left
 * running when it returns. */
int tally_job_run(struct tally_job *j);
/* Async-signal-safe, any thread: stop the job (^C). */
void tally_job_interrupt(struct tally_job *j);
/* How many tests failed; how many ran. */
unsigned tally_job_failed(const struct tally_job *j);
unsigned tally_job_tests(const struct tally_job *j);
/* The results directory. */
const char *tally_job_results(const struct tally_job *j);
void tally_job_free(struct tally_job *j);

/* The profilers of a control file's 'profilers add' lines, one a line
 * (NAME [ARGS...], each word quoted), as an agent takes them; "" for none. */
char *tally_job_control_profilers(const struct tally_job_control *c);
/* Starts the profilers (tally_job_control_profilers) on host as a job would
 * (tally installed, an agent set up and initialized there), then ends it:
 * 0, or -errno with tally_seterr naming the host and the profiler. */
int tally_job_host_check(const char *host, const char *root, const char *profilers);

/* ---- the agent on a remote host (lib/job/agent.c, docs/remote.md) ---- */

/* Sets up and initializes the profilers (one a line: NAME [ARGS...]) in the
 * private directory dir, then detaches an agent that answers on dir/agent.sock;
 * *ready gets "ready PID BOOTID SETUPS", SETUPS the profilers (0-based,
 * comma-separated, '-' for none) whose setup ran. 0, or -errno with tally_seterr (a profiler's
 * setup or initialize failed: its message). */
int tally_job_agent_start(const char *dir, const char *profilers, struct strbuf *ready);
/* One request to the agent of dir; its answer ("ok ...", "error ...") in
 * answer. -ENOTCONN when no agent answers there. */
int tally_job_agent_ctl(const char *dir, char *const *words, struct strbuf *answer);

/* What the job makes of a host's answer to `tally job agent start DIR`
 * (word "ready") or `tally job agent ctl DIR REQUEST` (word "ok"): out its
 * stdout (len bytes: whatever a host sends), status its exit status, err its
 * stderr (NUL-terminated, may be NULL). 0 when it exited 0 and out is one
 * line, the word alone or followed by a space and printable ASCII, at most
 * TALLY_AGENT_ANSWER_MAX bytes; *rest (may be NULL) gets what follows the
 * word and its space. Otherwise -errno with tally_seterr "host 'HOST': ...",
 * one line in which what the host said is escaped and bounded: -EHOSTUNREACH
 * (ssh's 255), -ENOTCONN (3: no agent there), -EIO (an error: the last line of
 * its stderr, else of its stdout, "tally: " taken off), -EPROTO (exit 0 with
 * anything but such a line). */
#define TALLY_AGENT_ANSWER_MAX 1000
int tally_agent_answer(const char *host, const char *word, const char *out, size_t len, int status,
		       const char *err, struct strbuf *rest);

/* ---- a request to a host's agent (lib/job/agent.c, docs/remote.md) ----
 * One line of tab-separated words: status | quit | stop | clean TAG |
 * start TAG ITERATION PROFILERS, PROFILERS the indices of the agent's
 * profilers to start, comma-separated, or '-'. */
enum tally_agent_op {
	TALLY_AGENT_STATUS,
	TALLY_AGENT_QUIT,
	TALLY_AGENT_START,
	TALLY_AGENT_STOP,
	TALLY_AGENT_CLEAN
};
struct tally_agent_req {
	enum tally_agent_op op;
	const char *tag; /* start, clean: a safe directory name (points into the line) */
	unsigned iter;   /* start */
	size_t *idx;     /* start: the profilers, each below nprofilers, each once */
	size_t nidx;
};
/* Parses line (changed in place) for an agent of nprofilers profilers: 0, or
 * -EINVAL with tally_seterr saying what is wrong and what is expected (the
 * agent answers "error" and that). Release what a 0 gave. */
int tally_agent_parse(char *line, size_t nprofilers, struct tally_agent_req *req);
void tally_agent_req_release(struct tally_agent_req *req);

#endif
