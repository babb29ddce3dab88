/* One push request over HTTP(S) with libcurl (docs/push.md): TLS with the
 * system's certificates, proxies from the environment as curl reads them
 * (http_proxy, https_proxy, no_proxy), a timeout for the whole request, and
 * the answer sorted into taken, worth trying again, or refused for good. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/push.h"
#include "lib/push/curl.h"

#ifndef TALLY_VERSION
#define TALLY_VERSION "unknown"
#endif

/* The first bytes of the server's answer: enough for its error message. */
#define REPLY_KEEP 2048

struct reply {
	struct strbuf body;
	double retry_after;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct reply *r = ctx;
	size_t len = size * n;
	if (r->body.len < REPLY_KEEP) {
		size_t take = REPLY_KEEP - r->body.len < len ? REPLY_KEEP - r->body.len : len;
		strbuf_add(&r->body, p, take);
	}
	return len;
}

/* Retry-After: seconds (an HTTP date is left for the back-off to cover). */
static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	struct reply *r = ctx;
	size_t len = size * n;
	static const char name[] = "retry-after:";
	if (len > sizeof(name) - 1 && !strncasecmp(p, name, sizeof(name) - 1)) {
		char buf[32];
		size_t k = len - (sizeof(name) - 1);
		if (k >= sizeof(buf))
			k = sizeof(buf) - 1;
		memcpy(buf, p + sizeof(name) - 1, k);
		buf[k] = '\0';
		char *end;
		double v = strtod(buf, &end);
		if (end != buf && v >= 0 && v < 86400)
			r->retry_after = v;
	}
	return len;
}

/* The first line of the server's answer, printable, for the message. */
static void answer_line(const struct strbuf *body, struct strbuf *out)
{
	if (!body->len)
		return;
	size_t n = 0;
	while (n < body->len && n < 200 && body->buf[n] != '\n' && body->buf[n] != '\r')
		n++;
	strbuf_addstr(out, ": ");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)body->buf[i];
		strbuf_addch(out, c >= 0x20 && c < 0x7f ? (char)c : '?');
	}
}

int tally_push_send(const struct tally_push_opts *o, const struct tally_push_payload *p,
		    double *retry_after)
{
	*retry_after = 0;
	const struct tally_curl *cu = tally_curl();
	if (!cu)
		return -EAGAIN; /* a setting to fix while the backlog waits */
	char *endpoint = tally_push_endpoint(o);
	struct strbuf url = STRBUF_INIT;
	strbuf_addstr(&url, endpoint);
	if (p->query)
		strbuf_addf(&url, "%s%s", strchr(endpoint, '?') ? "&" : "?", p->query);
	char **hdrs = NULL;
	size_t nh = 0;
	int r = tally_push_headers(o, &hdrs, &nh);
	if (r) {
		free(endpoint);
		strbuf_release(&url);
		return -EAGAIN; /* the file may be fixed meanwhile; its error is set */
	}
	CURL *c = cu->easy_init();
	struct curl_slist *hl = NULL;
	curl_mime *mime = NULL;
	struct reply rep = { STRBUF_INIT, 0 };
	char errbuf[CURL_ERROR_SIZE] = "";
	if (!c) {
		r = tally_seterr(-EAGAIN, "cannot push to '%s': libcurl has no memory", endpoint);
		goto out;
	}
	if (!p->form && p->content_type) {
		struct strbuf ct = STRBUF_INIT;
		strbuf_addf(&ct, "Content-Type: %s", p->content_type);
		hl = cu->slist_append(hl, ct.buf);
		strbuf_release(&ct);
	}
	if (p->gzip)
		hl = cu->slist_append(hl, "Content-Encoding: gzip");
	/* no 'Expect: 100-continue' wait before the body */
	hl = cu->slist_append(hl, "Expect:");
	for (size_t i = 0; i < nh; i++)
		hl = cu->slist_append(hl, hdrs[i]);
	cu->easy_setopt(c, CURLOPT_URL, url.buf);
#if LIBCURL_VERSION_NUM >= 0x075500
	cu->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	cu->easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	cu->easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for name lookups */
	cu->easy_setopt(c, CURLOPT_USERAGENT, "tally/" TALLY_VERSION);
	cu->easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	long ms = (long)((o->timeout > 0 ? o->timeout : 30) * 1000);
	cu->easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
	cu->easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms < 10000 ? ms : 10000L);
	cu->easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	cu->easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	cu->easy_setopt(c, CURLOPT_WRITEDATA, &rep);
	cu->easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	cu->easy_setopt(c, CURLOPT_HEADERDATA, &rep);
	if (p->form) {
		/* Pyroscope's form: the profile as the part named 'profile' */
		mime = cu->mime_init(c);
		curl_mimepart *part = cu->mime_addpart(mime);
		cu->mime_name(part, "profile");
		cu->mime_filename(part, "profile.pprof");
		cu->mime_type(part, "application/octet-stream");
		cu->mime_data(part, p->body.buf ? p->body.buf : "", p->body.len);
		cu->easy_setopt(c, CURLOPT_MIMEPOST, mime);
	} else {
		cu->easy_setopt(c, CURLOPT_POSTFIELDS, p->body.buf ? p->body.buf : "");
		cu->easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->body.len);
	}
	CURLcode cr = cu->easy_perform(c);
	if (cr != CURLE_OK) {
		r = tally_seterr(-EAGAIN, "cannot push to '%s': %s", endpoint,
				 *errbuf ? errbuf : cu->easy_strerror(cr));
		goto out;
	}
	long status = 0;
	cu->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300) {
		r = 0;
		goto out;
	}
	struct strbuf why = STRBUF_INIT;
	answer_line(&rep.body, &why);
	/* refused for good: the data (bad, too large, of a type it does not take) */
	bool rejected = status == 400 || status == 413 || status == 415 || status == 422;
	r = tally_seterr(rejected ? -EBADMSG : -EAGAIN, "'%s' answered %ld%s%s", endpoint, status,
			 why.buf ? why.buf : "",
			 status == 401 || status == 403 ? " (check the credentials in the headers)"
			 : status == 404                ? " (check the URL and --format)"
							: "");
	strbuf_release(&why);
	*retry_after = rep.retry_after;
out:
	if (mime)
		cu->mime_free(mime);
	cu->slist_free_all(hl);
	if (c)
		cu->easy_cleanup(c);
	tally_push_headers_free(hdrs, nh);
	strbuf_release(&rep.body);
	strbuf_release(&url);
	free(endpoint);
	return r;
}
