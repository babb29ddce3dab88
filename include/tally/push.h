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
/* Whether push options were given at all (a URL or a format). */
bool tally_push_opts_given(const struct tally_push_opts *o);
/* Checks the options before anything is sent: a URL of http or https, a
 * format, the header file readable and well formed. url_opt and fmt_opt name
 * the options in the message ("--to", "--format"; "--push", "--push-format").
 * 0 or -EINVAL with tally_seterr (one line, naming the option and the fix). */
int tally_push_opts_check(const struct tally_push_opts *o, const char *url_opt, const char *fmt_opt);
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
	uint64_t samples;        /* the samples it holds, all events summed */
	size_t profile_bytes;    /* the profile itself (gzipped pprof, or the OTLP message) */
};
void tally_push_payload_release(struct tally_push_payload *p);

/* The request that pushes x's database (x: the events, the resolver; its
 * labels are set here) as a profile of the time [from, until) (seconds since
 * 1970): pprof labels host= (the recording's host, unless its label sets
 * name one) and the user's; for OTLP the same as resource attributes. 0 or
 * -errno with tally_seterr. */
int tally_push_payload_build(const struct tally_push_opts *o, const struct tally_export *x, double from, double until,
			     struct tally_push_payload *out);

/* Sends one request and waits for the answer (at most the timeout). 0 on a
 * 2xx answer; -EAGAIN when it is worth trying again later (no connection,
 * a timeout, 408, 429, 5xx, and 401, 403 and 404: a setting to fix while the
 * backlog waits), *retry_after then the seconds the server asked to wait (0:
 * none); -EBADMSG when the server refused these data for good (400, 413, 415,
 * 422: sending them again would not help). tally_seterr names the endpoint,
 * the status and the first line of the server's answer. */
int tally_push_send(const struct tally_push_opts *o, const struct tally_push_payload *p, double *retry_after);

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
int tally_push_db(const struct tally_push_opts *o, struct tally_db *db, const struct tally_resolver_opts *ro,
		  struct tally_push_sent *sent);

/* The OTLP request of a pprof profile (gzipped, as tally_export_pprof_buf
 * makes it): one Profile per sample type sharing one dictionary; the labels
 * of the samples become their attributes (comm: process.executable.name,
 * pid: process.pid, host: host.name), the build-ids the mappings'
 * process.executable.build_id.gnu; resource (may be NULL) becomes the
 * resource's attributes, with service.name = app. 0 or -errno with tally_seterr. */
int tally_push_otlp_from_pprof(const void *gz, size_t len, const char *app, const struct tally_labelset *resource,
			       struct strbuf *out);

#endif
