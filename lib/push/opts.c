/* Push options (include/tally/push.h, docs/push.md): the option groups of
 * tally push and of the commands that push as they go, the checks made
 * before anything is sent, the endpoint of each format and the HTTP headers
 * (given on the command line, or read from a file so that a secret never
 * shows in ps). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/push.h"

void tally_push_opts_init(struct tally_push_opts *o)
{
	memset(o, 0, sizeof(*o));
}

void tally_push_opts_release(struct tally_push_opts *o)
{
	free(o->url);
	free(o->app);
	free(o->header_file);
	tally_labelset_release(&o->labels);
	tally_push_headers_free(o->headers, o->nheaders);
	memset(o, 0, sizeof(*o));
}

void tally_push_opts_copy(struct tally_push_opts *dst, const struct tally_push_opts *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->url = src->url ? xstrdup(src->url) : NULL;
	dst->format = src->format;
	dst->app = src->app ? xstrdup(src->app) : NULL;
	tally_labelset_copy(&dst->labels, &src->labels);
	for (size_t i = 0; i < src->nheaders; i++)
		STRLIST_PUSH(dst->headers, dst->nheaders, dst->aheaders, xstrdup(src->headers[i]));
	dst->header_file = src->header_file ? xstrdup(src->header_file) : NULL;
	dst->timeout = src->timeout;
	dst->retry_max = src->retry_max;
}

bool tally_push_opts_given(const struct tally_push_opts *o)
{
	return o->url || o->format;
}

static const char *const format_names[] = { [TALLY_PUSH_PYROSCOPE] = "pyroscope",
					    [TALLY_PUSH_PARCA] = "parca",
					    [TALLY_PUSH_OTLP] = "otlp" };
/* each format's path on its server */
static const char *const endpoints[] = { [TALLY_PUSH_PYROSCOPE] = "/ingest",
					 [TALLY_PUSH_PARCA] = "/profiles/writeraw",
					 [TALLY_PUSH_OTLP] = "/v1development/profiles" };

const char *tally_push_format_name(enum tally_push_format f)
{
	return f > TALLY_PUSH_NONE && f <= TALLY_PUSH_OTLP ? format_names[f] : "none";
}

static int parse_format(const char *arg, const char *what, enum tally_push_format *f)
{
	for (int i = TALLY_PUSH_PYROSCOPE; i <= TALLY_PUSH_OTLP; i++)
		if (!strcmp(arg, format_names[i])) {
			*f = (enum tally_push_format)i;
			return 0;
		}
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(-EINVAL, "unknown %s '%s' (expected pyroscope, parca or otlp)", what,
			    tally_excerpt(q, arg));
}

/* 'Name: value': a token name (RFC 9110), a value without control characters. */
static bool header_ok(const char *h)
{
	const char *c = strchr(h, ':');
	if (!c || c == h)
		return false;
	for (const char *p = h; p < c; p++)
		if (!isalnum((unsigned char)*p) && !strchr("!#$%&'*+-.^_`|~", *p))
			return false;
	for (const char *p = c + 1; *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\t')
			return false;
	return true;
}

/* The push options, once: tally push's spelling and help, then the spelling
 * and help of the commands that push as they go (a NULL spelling: not
 * theirs). Both groups' tables and the names in the errors come from here. */
#define PUSH_OPTIONS(X)                                                                                        \
	X(PO_URL, "to", "push", "URL",                                                                         \
	  "the server: its base URL (http://host:4040) or the endpoint itself",                                \
	  "send what each flush adds to a profiling service (docs/push.md)")                                   \
	X(PO_FORMAT, "format", "push-format", "F",                                                             \
	  "pyroscope (POST /ingest), parca (POST /profiles/writeraw) or\notlp (POST /v1development/profiles)", \
	  "pyroscope, parca or otlp")                                                                          \
	X(PO_APP, "app", "push-app", "NAME",                                                                   \
	  "the service's name the server files it under (default tally)",                                      \
	  "the service's name the server files it under (default tally)")                                      \
	X(PO_LABEL, "label", "push-label", "K=V", "a label on every sample (repeatable)",                      \
	  "a label on every sample pushed (repeatable)")                                                       \
	X(PO_HEADER, "header", "push-header", "'K: V'",                                                        \
	  "an HTTP header of every request (repeatable; seen in ps: no secrets)",                              \
	  "an HTTP header of every push (repeatable; seen in ps: no secrets)")                                 \
	X(PO_HEADER_FILE, "header-file", "push-header-file", "FILE",                                           \
	  "HTTP headers, one 'K: V' a line (tokens, passwords: never in ps)",                                  \
	  "HTTP headers, one 'K: V' a line, read at every push")                                               \
	X(PO_TIMEOUT, "timeout", "push-timeout", "D", "at most D for one request (default 30s)",               \
	  "at most D for one push (default 30s)")
/* and one of the commands that push as they go only */
#define PUSH_GOING_ONLY(X)                                 \
	X(PO_RETRY_MAX, NULL, "push-retry-max", "D", NULL, \
	  "the longest wait between tries while the server fails (default 5m)")

#define PO_CODE(code, once, going, argname, once_help, going_help) code,
enum { PO_FIRST_ = 0x33ff, PUSH_OPTIONS(PO_CODE) PUSH_GOING_ONLY(PO_CODE) };

#define PO_ONCE_ROW(code, once, going, argname, once_help, going_help) \
	TALLY_OPT(0, once, TALLY_ARG_REQUIRED, argname, once_help, code),
#define PO_GOING_ROW(code, once, going, argname, once_help, going_help) \
	TALLY_OPT(0, going, TALLY_ARG_REQUIRED, argname, going_help, code),

static const struct tally_option push_options[] = { PUSH_OPTIONS(PO_ONCE_ROW) TALLY_OPTION_END };
static const struct tally_option push_going_options[] = {
	PUSH_OPTIONS(PO_GOING_ROW) PUSH_GOING_ONLY(PO_GOING_ROW) TALLY_OPTION_END
};

/* "--format" or "--push-format": the option of code as the command spells it */
static const char *spelled(int code, bool going)
{
#define PO_NAME(c, once_name, going_name, argname, once_help, going_help) \
	case c:                                                           \
		return going ? "--" going_name : "--" once_name;
	switch (code) {
	PUSH_OPTIONS(PO_NAME)
	}
#undef PO_NAME
	return "--push-retry-max";
}

static int push_handle(void *ctx, int code, const char *arg, bool daemon)
{
	struct tally_push_opts *o = ctx;
	char q[TALLY_EXCERPT_SIZE];
	const char *what = spelled(code, daemon);
	switch (code) {
	case PO_URL:
		free(o->url);
		o->url = xstrdup(arg);
		return 0;
	case PO_FORMAT:
		return parse_format(arg, what, &o->format);
	case PO_APP:
		if (!*arg)
			return tally_seterr(-EINVAL, "%s needs a name", what);
		for (const char *p = arg; *p; p++)
			if (!isalnum((unsigned char)*p) && !strchr("-._/", *p))
				return tally_seterr(
					-EINVAL,
					"invalid %s '%s': letters, digits and '-', '.', '_', '/' only (Pyroscope's rule for a service name)",
					what, tally_excerpt(q, arg));
		free(o->app);
		o->app = xstrdup(arg);
		return 0;
	case PO_LABEL: {
		char *k, *v;
		int r = tally_label_parse(arg, what, &k, &v);
		if (r)
			return r;
		if (!*v) {
			free(k);
			free(v);
			return tally_seterr(-EINVAL, "%s '%s' has no value (give KEY=VALUE)", what,
					    tally_excerpt(q, arg));
		}
		tally_labelset_set(&o->labels, k, v);
		free(k);
		free(v);
		return 0;
	}
	case PO_HEADER:
		if (!header_ok(arg))
			return tally_seterr(
				-EINVAL,
				"invalid %s '%s': expected 'Name: value' (secrets go in %s, not on the command line)",
				what, tally_excerpt(q, arg), spelled(PO_HEADER_FILE, daemon));
		STRLIST_PUSH(o->headers, o->nheaders, o->aheaders, xstrdup(arg));
		return 0;
	case PO_HEADER_FILE:
		free(o->header_file);
		o->header_file = xstrdup(arg);
		return 0;
	case PO_TIMEOUT:
	case PO_RETRY_MAX: {
		double *d = code == PO_TIMEOUT ? &o->timeout : &o->retry_max;
		int r = tally_parse_duration(arg, what, d);
		if (!r && *d < 0.1)
			r = tally_seterr(-EINVAL, "%s '%s' is too short (at least 100ms)", what,
					 tally_excerpt(q, arg));
		return r;
	}
	}
	return 0;
}

static int push_handle_once(void *ctx, int code, const char *arg)
{
	return push_handle(ctx, code, arg, false);
}

static int push_handle_going(void *ctx, int code, const char *arg)
{
	return push_handle(ctx, code, arg, true);
}

const struct tally_optgroup tally_push_group = { NULL, push_options, push_handle_once };
const struct tally_optgroup tally_push_as_you_go_group = { "pushing to a profiling service",
							   push_going_options, push_handle_going };

char *tally_push_endpoint(const struct tally_push_opts *o)
{
	const char *ep = o->format ? endpoints[o->format] : "";
	struct strbuf sb = STRBUF_INIT;
	const char *u = o->url ? o->url : "";
	size_t n = strcspn(u, "?#");
	while (n && u[n - 1] == '/')
		n--;
	size_t el = strlen(ep);
	strbuf_add(&sb, u, n);
	if (!(n >= el && !strncmp(u + n - el, ep, el)))
		strbuf_addstr(&sb, ep);
	if (u[n] == '/')
		while (u[n] == '/')
			n++;
	strbuf_addstr(&sb, u + n);
	return strbuf_detach(&sb);
}

int tally_push_opts_check(const struct tally_push_opts *o, const char *url_opt, const char *fmt_opt)
{
	char q[TALLY_EXCERPT_SIZE];
	if (!o->url)
		return tally_seterr(-EINVAL, "%s names no server: give %s URL", fmt_opt, url_opt);
	if (!o->format)
		return tally_seterr(-EINVAL, "%s '%s' needs %s pyroscope, parca or otlp", url_opt,
				    tally_excerpt(q, o->url), fmt_opt);
	if (strncasecmp(o->url, "http://", 7) && strncasecmp(o->url, "https://", 8))
		return tally_seterr(-EINVAL, "%s '%s' is not an http:// or https:// URL", url_opt, tally_excerpt(q, o->url));
	const char *host = strstr(o->url, "//") + 2;
	if (!*host || *host == '/')
		return tally_seterr(-EINVAL, "%s '%s' names no host", url_opt,
				    tally_excerpt(q, o->url));
	for (const char *p = o->url; *p; p++)
		if ((unsigned char)*p <= ' ')
			return tally_seterr(-EINVAL, "%s '%s' has a space or a control character",
					    url_opt, tally_excerpt(q, o->url));
	char **h = NULL;
	size_t n = 0;
	int r = tally_push_headers(o, &h, &n);
	tally_push_headers_free(h, n);
	return r;
}

int tally_push_headers(const struct tally_push_opts *o, char ***out, size_t *n)
{
	char **h = NULL;
	size_t nh = 0, ah = 0;
	for (size_t i = 0; i < o->nheaders; i++)
		STRLIST_PUSH(h, nh, ah, xstrdup(o->headers[i]));
	int r = 0;
	if (o->header_file) {
		struct strbuf sb = STRBUF_INIT;
		char q[TALLY_EXCERPT_SIZE];
		/* followed when a link: secrets are often mounted so (Kubernetes) */
		r = tally_read_regular(&sb, AT_FDCWD, o->header_file, TALLY_OPEN_FOLLOW, 1 << 20);
		if (r) {
			char keep[512];
			snprintf(keep, sizeof(keep), "%s", tally_errmsg());
			r = tally_seterr(r, "cannot read the header file: %s", keep);
		} else {
			size_t ln = 0;
			char *save = NULL;
			for (char *l = strtok_r(sb.buf ? sb.buf : (char *)"", "\n", &save); l && !r;
			     l = strtok_r(NULL, "\n", &save)) {
				ln++;
				size_t len = strlen(l);
				if (len && l[len - 1] == '\r')
					l[--len] = '\0';
				if (!len || l[0] == '#')
					continue;
				if (!header_ok(l))
					r = tally_seterr(
						-EINVAL,
						"header file '%s' line %zu: expected 'Name: value'",
						tally_excerpt(q, o->header_file), ln);
				else
					STRLIST_PUSH(h, nh, ah, xstrdup(l));
			}
		}
		strbuf_release(&sb);
	}
	if (r) {
		tally_push_headers_free(h, nh);
		h = NULL;
		nh = 0;
	}
	*out = h;
	*n = nh;
	return r;
}

void tally_push_headers_free(char **h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(h[i]);
	free(h);
}
