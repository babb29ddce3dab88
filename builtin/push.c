/* tally push: a database sent to a profiling service, Grafana Pyroscope,
 * Parca or an OpenTelemetry collector (docs/push.md): the database (or
 * each selected epoch of a daemon's) as one profile of the time it covers,
 * symbolized here. The requests and the pusher are lib/push/. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builtin/builtin.h"
#include "tally/epoch.h"
#include "tally/push.h"
#include "tally/symopts.h"

struct popts {
	const char *input;
};

enum { OPT_INPUT = 1 };

static int push_cmd_handle(void *ctx, int code, const char *arg)
{
	struct popts *o = ctx;
	if (code == OPT_INPUT)
		o->input = arg;
	return 0;
}

static const struct tally_option push_cmd_options[] = {
	TALLY_OPT(
		'i', "input", TALLY_ARG_REQUIRED, "DB",
		"what to send: a database, a daemon's (each epoch as one profile),\na bundle or an archive (default tally.db)",
		OPT_INPUT),
	TALLY_OPTION_END,
};
static const struct tally_optgroup push_cmd_group = { NULL, push_cmd_options, push_cmd_handle };

const struct tally_cmdopts push_cmdopts = {
	.name = "push",
	.summary = "send a profile to Grafana Pyroscope, Parca or an OpenTelemetry collector",
	.usage = "[options] --to URL --format pyroscope|parca|otlp",
	.footer =
		"endpoints (appended to URL unless it ends with one):\n"
		"  pyroscope: POST /ingest (pprof in a multipart form; name=APP{host=...,LABELS})\n"
		"  parca: POST /profiles/writeraw (WriteRawRequest as JSON, pprof inside)\n"
		"  otlp: POST /v1development/profiles (OTLP profiles, opentelemetry-proto v1.11.0)\n"
		"durations: seconds (decimals allowed) or 200ms, 30s, 5m\n",
	.groups = { &push_cmd_group, &tally_push_group, &tally_db_select_group,
		    &tally_symopts_group },
};

/* One database (or epoch) pushed; its line said. 0 or 1. */
static int push_one(const struct tally_push_opts *po, struct tally_db *db, const char *what,
		    const struct tally_resolver_opts *ro)
{
	struct tally_push_sent sent;
	int r = tally_push_db(po, db, ro, &sent);
	if (r == -ENODATA) {
		tally_warn("%s: no samples, nothing sent", what);
		return 0;
	}
	if (r) {
		tally_error_last();
		return 1;
	}
	char *ep = tally_push_endpoint(po);
	tally_say("pushed %s to '%s' (%s: %" PRIu64 " sample%s, %zu bytes)", what, ep,
		  tally_push_format_name(po->format), sent.samples, sent.samples == 1 ? "" : "s",
		  sent.bytes);
	free(ep);
	return 0;
}

/* Whether an epoch lies in the selection (as tally_db_open_select picks). */
static bool selected(const struct tally_db_select *sel, const struct tally_epoch *e)
{
	if (sel->epoch && strcmp(sel->epoch, e->name))
		return false;
	if (sel->has_since && e->stop < sel->since)
		return false;
	if (sel->has_until && e->start >= sel->until)
		return false;
	return true;
}

int cmd_push(int argc, char **argv)
{
	struct popts o = { .input = "tally.db" };
	struct tally_push_opts po;
	tally_push_opts_init(&po);
	struct tally_db_select epochs = { 0 };
	struct tally_symopts so;
	tally_symopts_init(&so);
	void *ctx[] = { &o, &po, &epochs, &so };
	int first, ret = tally_cmd_options(&push_cmdopts, ctx, argc, argv, &first);
	struct tally_resolver_opts ro = { 0 };
	struct tally_epoch *ep = NULL;
	size_t nep = 0;
	if (ret >= 0)
		goto out;
	ret = 1;
	if (first < argc) {
		ret = tally_usage_error("push", "unexpected argument '%s'", argv[first]);
		goto out;
	}
	if (tally_push_opts_check(&po, "--to", "--format")) {
		tally_error_last();
		ret = 2;
		goto out;
	}
	if (tally_symopts_ready(&so, &ro))
		goto out;
	struct stat st;
	if (stat(o.input, &st) == 0 && S_ISDIR(st.st_mode) && tally_db_is_daemon(o.input)) {
		/* a daemon's: each epoch as the profile of its own time */
		if (tally_epochs_list(o.input, &ep, &nep)) {
			tally_error_last();
			goto out;
		}
		size_t n = 0;
		ret = 0;
		for (size_t i = 0; i < nep; i++) {
			if (!selected(&epochs, &ep[i]))
				continue;
			n++;
			struct tally_db_select one = { .epoch = ep[i].name };
			struct tally_db db;
			if (tally_db_open_select(&db, o.input, &one)) {
				tally_error_last();
				ret = 1;
				continue;
			}
			struct strbuf what = STRBUF_INIT;
			strbuf_addf(&what, "epoch %s of '%s'", ep[i].name, o.input);
			ret |= push_one(&po, &db, what.buf, &ro);
			strbuf_release(&what);
			tally_db_release(&db);
		}
		if (!n) {
			/* what there is, and why none was picked: the reader says it */
			struct tally_db db;
			if (tally_db_open_select(&db, o.input, &epochs) == 0) {
				tally_db_release(&db);
				tally_error("no epoch of '%s' is selected", o.input);
			} else {
				tally_error_last();
			}
			ret = 1;
		}
		goto out;
	}
	struct tally_db db;
	if (tally_db_open_select(&db, o.input, &epochs)) {
		tally_error_last();
		goto out;
	}
	struct strbuf what = STRBUF_INIT;
	strbuf_addf(&what, "'%s'", o.input);
	ret = push_one(&po, &db, what.buf, &ro);
	strbuf_release(&what);
	tally_db_release(&db);
out:
	tally_epochs_free(ep, nep);
	tally_symopts_release(&so);
	tally_push_opts_release(&po);
	return ret;
}
