/* Push: profiles sent to the services fleets look at them in (docs/push.md):
 * Grafana Pyroscope (POST /ingest, gzipped pprof in a multipart form), Parca
 * (POST /profiles/writeraw, the HTTP/JSON form of WriteRawRequest) and
 * OpenTelemetry (POST /v1development/profiles, an OTLP
 * ExportProfilesServiceRequest), over HTTP(S) with libcurl.
 *
 * The profiles are symbolized here (the pprof export's builder) and carry
 * the machine's name and the user's labels. tally push sends a database
 * once; the daemon's pusher (tally_pusher_*) sends what each flush added,
 * at least once, from a backlog kept on disk (the epochs and a cursor). */
#ifndef TALLY_PUSH_H
#define TALLY_PUSH_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/export.h"
#include "tally/options.h"
#include "tally/util.h"

enum tally_push_format {
	TALLY_PUSH_NONE = 0,
	TALLY_PUSH_PYROSCOPE,
	TALLY_PUSH_PARCA,
	TALLY_PUSH_OTLP,
};

/* Where and how to push. Zero-initialize (or tally_push_opts_init);
 * tally_push_opts_release frees what the option handlers copied. */
struct tally_push_opts {
	char *url;                     /* as given: a server's base URL, or the endpoint itself */
	enum tally_push_format format;
	char *app;                     /* the service's name (NULL: "tally") */
	struct tally_labelset labels;  /* --label K=V: on every sample */
	char **headers;                /* --header 'K: V', as given */
	size_t nheaders, aheaders;
	char *header_file;             /* --header-file: one 'K: V' a line, read at every request */
	double timeout;                /* seconds one request may take (0: 30) */
	double retry_max;              /* the daemon's longest wait between tries (0: 300 s) */
};
void tally_push_opts_init(struct tally_push_opts *o);
void tally_push_opts_release(struct tally_push_opts *o);
/* dst (initialized or not) becomes a deep copy of src. */
void tally_push_opts_copy(struct tally_push_opts *dst, const struct tally_push_opts *src);
/* Whether push options were given at all (a URL or a format). */
bool tally_push_opts_given(const struct tally_push_opts *o);
/* Checks the options before anything is sent: a URL of http or https, a
 * format, the header file readable and well formed. url_opt and fmt_opt name
 * the options in the message ("--to", "--format"; "--push", "--push-format").
 * 0 or -EINVAL with tally_seterr (one line, naming the option and the fix). */
int tally_push_opts_check(const struct tally_push_opts *o, const char *url_opt,
			  const char *fmt_opt);
/* "pyroscope", "parca", "otlp". */
const char *tally_push_format_name(enum tally_push_format f);
/* The URL requests go to: the URL as given when its path already ends with
 * the format's endpoint (/ingest, /profiles/writeraw, /v1development/profiles),
 * else the URL with that path appended. The caller frees it. */
char *tally_push_endpoint(const struct tally_push_opts *o);
/* The HTTP headers of a request: --header's, then the header file's. 0 or
 * -errno with tally_seterr naming the file and line. *out is the caller's
 * (tally_push_headers_free). */
int tally_push_headers(const struct tally_push_opts *o, char ***out, size_t *n);
void tally_push_headers_free(char **h, size_t n);

/* tally push's options (--to, --format, --app, --label, --header,
 * --header-file, --timeout) and those of the commands that push as they go,
 * the daemon and the job profiler (--push, --push-format, --push-app,
 * --push-label, --push-header, --push-header-file, --push-timeout,
 * --push-retry-max): option groups for a struct tally_push_opts context. */
extern const struct tally_optgroup tally_push_group, tally_push_as_you_go_group;

/* ---- one request ---- */

struct tally_push_payload {
	struct strbuf body;      /* the request's body, or (form) the profile part's bytes */
	bool form;               /* Pyroscope: body goes as the multipart form's 'profile' part */
	char *query;             /* appended to the endpoint ("name=...&from=..."), or NULL */
	const char *content_type;
	bool gzip;               /* the body is gzipped (Content-Encoding: gzip) */
	uint64_t samples;        /* the samples it holds, all events summed */
	size_t profile_bytes;    /* the profile itself (gzipped pprof, or the OTLP message) */
};
void tally_push_payload_release(struct tally_push_payload *p);

/* The request that pushes x's database (x: the events, the resolver; its
 * labels are set here) as a profile of the time [from, until) (seconds since
 * 1970): pprof labels host= (the recording's host, unless its label sets
 * name one) and the user's; for OTLP the same as resource attributes. 0 or
 * -errno with tally_seterr. */
int tally_push_payload_build(const struct tally_push_opts *o, const struct tally_export *x,
			     double from, double until, struct tally_push_payload *out);

/* Sends one request and waits for the answer (at most the timeout). 0 on a
 * 2xx answer; -EAGAIN when it is worth trying again later (no connection,
 * a timeout, 408, 429, 5xx, and 401, 403 and 404: a setting to fix while the
 * backlog waits), *retry_after then the seconds the server asked to wait (0:
 * none); -EBADMSG when the server refused these data for good (400, 413, 415,
 * 422: sending them again would not help). tally_seterr names the endpoint,
 * the status and the first line of the server's answer. */
int tally_push_send(const struct tally_push_opts *o, const struct tally_push_payload *p,
		    double *retry_after);

/* What a push sent. */
struct tally_push_sent {
	uint64_t samples;      /* samples of every event, summed */
	size_t bytes;          /* the request's body */
	size_t profile_bytes;  /* the profile in it (gzipped pprof, or the OTLP message) */
};
struct tally_resolver_opts;
/* Pushes db (opened; period-weighted here when it can be) as one profile of
 * the time it covers (its session's start-time to stop-time), every event,
 * symbolized through ro (may be NULL: the defaults). 0 (*sent, may be NULL,
 * says what), -ENODATA when db holds no sample (nothing is sent), or the
 * error of tally_push_payload_build or tally_push_send. */
int tally_push_db(const struct tally_push_opts *o, struct tally_db *db,
		  const struct tally_resolver_opts *ro, struct tally_push_sent *sent);

/* The OTLP request of a pprof profile (gzipped, as tally_export_pprof_buf
 * makes it): one Profile per sample type sharing one dictionary; the labels
 * of the samples become their attributes (comm: process.executable.name,
 * pid: process.pid, host: host.name), the build-ids the mappings'
 * process.executable.build_id.gnu; resource (may be NULL) becomes the
 * resource's attributes, with service.name = app. 0 or -errno with tally_seterr. */
int tally_push_otlp_from_pprof(const void *gz, size_t len, const char *app,
			       const struct tally_labelset *resource, struct strbuf *out);

/* ---- the backlog of a daemon's database: what each flush added ---- */

/* The cursor: per epoch, the counts pushed so far of each of its stacks (or,
 * without stacks, of each place), keyed by a hash of what the stack is, so
 * that what a flush added is the epoch now less what was pushed. Kept in
 * DIR/push.cursor, written whole (atomically) after every push the server
 * took. */
struct tally_push_cursor;

/* Reads DIR's cursor for this target (url and format): a cursor missing,
 * damaged or kept for another target starts from the epochs as they are now
 * (what they hold counts as pushed: the backlog is what comes after), and
 * *fresh says so (may be NULL). The caller frees it. 0 or -errno. */
int tally_push_cursor_open(struct tally_push_cursor **out, const char *dir, const char *target,
			   bool *fresh);
void tally_push_cursor_free(struct tally_push_cursor *c);
/* Writes it (DIR/push.cursor, atomically). 0 or -errno with tally_seterr. */
int tally_push_cursor_save(struct tally_push_cursor *c);

/* The backlog as a scan of the epochs found it. */
struct tally_push_backlog {
	uint64_t samples;     /* recorded and not pushed yet */
	size_t epochs;        /* epochs with samples not pushed yet */
	uint64_t dropped;     /* ever: samples of epochs deleted (--keep) before they were pushed */
	uint64_t rejected;    /* ever: samples the server refused for good (400, 413, ...) */
	uint64_t dropped_now; /* ... by this scan: to be said in the log */
	char *dropped_epochs; /* this scan's dropped epochs' names, or NULL (caller frees) */
};

/* Looks at the epochs on disk (their sessions' sample counts only): epochs
 * gone are forgotten, what they held unpushed counted as dropped; *bl gets
 * the backlog. Cheap: for the status while the server is down. 0 or -errno. */
int tally_push_cursor_scan(struct tally_push_cursor *c, struct tally_push_backlog *bl);
/* The next epoch with something to push (oldest first), its delta made
 * ready: *db is the epoch with only what was not pushed yet left in its
 * counts (and its sample totals), the caller's to build a payload from and
 * release; *epoch its name (the cursor's), *from and *until the time the
 * delta covers. An epoch that is not the newest and holds nothing new is
 * marked done (and its counts forgotten). 1 when there is something to push,
 * 0 when nothing is left, -errno with tally_seterr. */
int tally_push_cursor_next(struct tally_push_cursor *c, struct tally_db *db, const char **epoch,
			   double *from, double *until);
/* The delta the last tally_push_cursor_next made was taken by the server
 * (or refused for good: rejected, counted): the epoch's counts as they were
 * then count as pushed. Call tally_push_cursor_save after. */
void tally_push_cursor_done(struct tally_push_cursor *c, bool rejected);

/* ---- the daemon's pusher: a thread that sends the backlog ---- */

struct tally_pusher;
/* Starts the thread that pushes DIR's epochs to o's target (o is copied):
 * at once what the cursor says is left, then after every notify. Nothing
 * it does waits on the caller, nor the caller on it (but for a mutex held
 * for a copy of its state). 0 or -errno with tally_seterr. */
int tally_pusher_start(struct tally_pusher **out, const char *dir, const struct tally_push_opts *o);
/* A flush added samples: push them (now, or when the back-off ends). Never waits. */
void tally_pusher_notify(struct tally_pusher *p, uint64_t samples);
/* The lines the pusher has for the log since the last call, each handed to
 * log (on the caller's thread: the log is the caller's to write). */
void tally_pusher_logs(struct tally_pusher *p, void (*log)(void *ctx, const char *line), void *ctx);
/* The 'push' lines of tally ctl status: the target, the last success, the
 * backlog (and what was dropped or refused), the last error and the next try. */
void tally_pusher_status(struct tally_pusher *p, struct strbuf *out);
/* Stops the thread: when the server answered the last try, one last pass
 * of at most grace seconds for what the last flush added (what it cannot
 * send stays in the backlog); its last log lines to log (may be NULL); frees.
 * A thread still building a push a second past the grace is left running
 * (and p with it) for the process's end to stop. Accepts NULL. */
void tally_pusher_stop(struct tally_pusher *p, double grace,
		       void (*log)(void *ctx, const char *line), void *ctx);

#endif
