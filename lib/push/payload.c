/* The request of each format (docs/push.md), made from a database through
 * the pprof export's builder (symbolized, mappings with build-ids, labels):
 *   pyroscope  the gzipped pprof as the 'profile' part of a multipart form,
 *              POST /ingest?name=APP{host=H,K=V}&from=S&until=S&spyName=tally
 *   parca      {"series":[{"labels":{"labels":[...]},"samples":[{"rawProfile":
 *              BASE64}]}],"normalized":false}: WriteRawRequest as its HTTP/JSON
 *              gateway takes it, POST /profiles/writeraw
 *   otlp       an ExportProfilesServiceRequest (lib/push/otlp.c),
 *              POST /v1development/profiles */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tally/push.h"

void tally_push_payload_release(struct tally_push_payload *p)
{
	strbuf_release(&p->body);
	free(p->query);
	memset(p, 0, sizeof(*p));
}

/* The host the database was recorded on: its session's, else this one. */
static void host_name(const struct tally_db *db, struct strbuf *out)
{
	const char *h = tally_meta_get(&db->session, "host");
	if (h && *h) {
		strbuf_addstr(out, h);
		return;
	}
	char buf[256] = "";
	if (gethostname(buf, sizeof(buf) - 1) < 0 || !*buf)
		snprintf(buf, sizeof(buf), "unknown");
	strbuf_addstr(out, buf);
}

/* Samples (not weights) of x's events in its database. */
static uint64_t sample_count(const struct tally_export *x)
{
	const struct tally_db *db = x->db;
	size_t ne = (size_t)db->nevents;
	const uint64_t *st = db->weighed ? db->stack_weights : db->stack_counts;
	const uint64_t *fl = db->weighed ? db->weights : db->counts;
	uint64_t n = 0;
	for (int i = 0; i < x->nevents; i++) {
		size_t e = (size_t)x->events[i];
		if (db->has_stacks && st)
			for (size_t k = 0; k < db->nstacks; k++)
				n += st[k * ne + e];
		else if (fl)
			for (size_t k = 0; k < db->nentries; k++)
				n += fl[k * ne + e];
	}
	return n;
}

/* A label name fit for the server: Pyroscope takes [A-Za-z0-9_.], Parca
 * (Prometheus) [A-Za-z_][A-Za-z0-9_]; anything else becomes '_'. */
static void add_name(struct strbuf *sb, const char *k, bool dots)
{
	for (const char *p = k; *p; p++) {
		bool ok = isalnum((unsigned char)*p) || *p == '_' || (dots && *p == '.');
		if (p == k && !dots && isdigit((unsigned char)*p))
			strbuf_addch(sb, '_');
		strbuf_addch(sb, ok ? *p : '_');
	}
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void add_base64(struct strbuf *sb, const unsigned char *p, size_t n)
{
	if (strbuf_grow(sb, (n + 2) / 3 * 4 + 1))
		return;
	char *o = sb->buf + sb->len;
	size_t i = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = b64[(v >> 6) & 63];
		*o++ = b64[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	sb->len = (size_t)(o - sb->buf);
	sb->buf[sb->len] = '\0';
}

/* s (n bytes) into sb as a URL's query value: every byte but the unreserved
 * ones (RFC 3986: letters, digits, - . _ ~) as %XX. */
static void url_escape(struct strbuf *sb, const char *s, size_t n)
{
	static const char hx[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    (c && strchr("-._~", c))) {
			strbuf_addch(sb, (char)c);
		} else {
			strbuf_addch(sb, '%');
			strbuf_addch(sb, hx[c >> 4]);
			strbuf_addch(sb, hx[c & 15]);
		}
	}
}

/* name=APP{host=H,K=V,...}&from=S&until=S&spyName=tally, escaped for a URL:
 * the series' labels (Pyroscope's own parser: no ',', '{', '}' or '=' in a value). */
static char *pyroscope_query(const char *app, const struct tally_labelset *ls, double from,
			     double until)
{
	struct strbuf name = STRBUF_INIT, q = STRBUF_INIT;
	strbuf_addf(&name, "%s{", app);
	for (size_t i = 0; i < ls->n; i++) {
		if (i)
			strbuf_addch(&name, ',');
		add_name(&name, ls->v[i].key, true);
		strbuf_addch(&name, '=');
		for (const char *p = ls->v[i].value; *p; p++)
			strbuf_addch(&name, strchr(",{}=", *p) ? '_' : *p);
	}
	strbuf_addch(&name, '}');
	strbuf_addstr(&q, "name=");
	url_escape(&q, name.buf, name.len);
	strbuf_addf(&q, "&from=%" PRId64 "&until=%" PRId64 "&spyName=tally", (int64_t)from,
		    (int64_t)(until > from ? until : from + 1));
	strbuf_release(&name);
	return strbuf_detach(&q);
}

static void parca_body(const char *app, const struct tally_labelset *ls, const struct strbuf *gz,
		       struct strbuf *out)
{
	strbuf_addstr(
		out,
		"{\"series\":[{\"labels\":{\"labels\":[{\"name\":\"__name__\",\"value\":\"tally\"},"
		"{\"name\":\"service_name\",\"value\":");
	strbuf_add_json_str(out, app);
	strbuf_addch(out, '}');
	for (size_t i = 0; i < ls->n; i++) {
		struct strbuf k = STRBUF_INIT;
		add_name(&k, ls->v[i].key, false);
		if (strcmp(k.buf, "service_name") && strcmp(k.buf, "__name__")) {
			strbuf_addstr(out, ",{\"name\":");
			strbuf_add_json_str(out, k.buf);
			strbuf_addstr(out, ",\"value\":");
			strbuf_add_json_str(out, ls->v[i].value);
			strbuf_addch(out, '}');
		}
		strbuf_release(&k);
	}
	strbuf_addstr(out, "]},\"samples\":[{\"rawProfile\":\"");
	add_base64(out, (const unsigned char *)gz->buf, gz->len);
	strbuf_addstr(out, "\"}]}],\"normalized\":false}");
}

/* in gzipped into out: the OTLP body (the spec's Content-Encoding: gzip). */
static int gzip_body(const struct strbuf *in, struct strbuf *out)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return tally_seterr(-ENOMEM, "cannot compress the OTLP request: zlib cannot start");
	size_t room = deflateBound(&z, (uLong)in->len) + 32;
	int zr = Z_MEM_ERROR;
	if (!strbuf_grow(out, room)) {
		z.next_in = (Bytef *)in->buf;
		z.avail_in = (uInt)in->len;
		z.next_out = (Bytef *)out->buf + out->len;
		z.avail_out = (uInt)room;
		zr = deflate(&z, Z_FINISH);
		out->len += room - z.avail_out;
		out->buf[out->len] = '\0';
	}
	deflateEnd(&z);
	return zr == Z_STREAM_END
		       ? 0
		       : tally_seterr(-EIO, "cannot compress the OTLP request: zlib error %d", zr);
}

int tally_push_payload_build(const struct tally_push_opts *o, const struct tally_export *x0,
			     double from, double until, struct tally_push_payload *out)
{
	memset(out, 0, sizeof(*out));
	const char *app = o->app ? o->app : "tally";
	struct tally_export x = *x0;
	/* the series' labels: the user's, and the host unless the user named one */
	struct tally_labelset series = { 0 }, host = { 0 };
	tally_labelset_copy(&series, &o->labels);
	struct strbuf hn = STRBUF_INIT;
	host_name(x.db, &hn);
	if (!tally_labelset_get(&series, "host"))
		tally_labelset_set(&series, "host", hn.buf);
	tally_labelset_set(&host, "host", hn.buf);
	strbuf_release(&hn);
	/* the profile's start and length: those of what it holds */
	struct tally_db *db = (struct tally_db *)x.db;
	char ts[32];
	tally_format_utc(from, ts, sizeof(ts));
	tally_meta_set(&db->session, "start-time", "%s", ts);
	tally_meta_set(&db->session, "duration", "%.3f", until > from ? until - from : 0.0);
	struct strbuf gz = STRBUF_INIT;
	int r;
	if (o->format == TALLY_PUSH_OTLP) {
		/* host and the user's labels are the resource's: not on every sample */
		x.labels = NULL;
		x.label_defaults = NULL;
		r = tally_export_pprof_buf(&x, &gz);
		struct strbuf msg = STRBUF_INIT;
		if (!r)
			r = tally_push_otlp_from_pprof(gz.buf, gz.len, app, &series, &msg);
		out->profile_bytes = msg.len;
		if (!r)
			r = gzip_body(&msg, &out->body);
		strbuf_release(&msg);
		out->content_type = "application/x-protobuf";
		out->gzip = true;
	} else {
		x.labels = &o->labels;
		x.label_defaults = &host;
		r = tally_export_pprof_buf(&x, &gz);
		out->profile_bytes = gz.len;
		if (!r && o->format == TALLY_PUSH_PYROSCOPE) {
			out->form = true;
			out->body = gz;
			strbuf_init(&gz);
			out->query = pyroscope_query(app, &series, from, until);
		} else if (!r) {
			parca_body(app, &series, &gz, &out->body);
			out->content_type = "application/json";
		}
	}
	if (!r)
		out->samples = sample_count(&x);
	else
		tally_push_payload_release(out);
	strbuf_release(&gz);
	tally_labelset_release(&series);
	tally_labelset_release(&host);
	return r;
}
