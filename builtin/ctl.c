/* tally ctl: one command to a running tally daemon over its socket
 * (Akaros' kprof control file, as a command). The request is checked here
 * with the daemon's own parser before anything is sent. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/ctl.h"
#include "tally/util.h"

struct ctlopts {
	const char *db, *sock;
	double timeout;
};

static const struct tally_option ctl_options[] = {
	TALLY_OPT_STRING('d', "db", "DIR",
		"the daemon's database (its socket is DIR/ctl.sock; default tally.db)",
		struct ctlopts, db),
	TALLY_OPT_STRING(0, "socket", "PATH", "the daemon's socket", struct ctlopts, sock),
	TALLY_OPT_DURATION(0, "timeout", "D",
		"give up after D without an answer (default 60s)",
		struct ctlopts, timeout),
	TALLY_OPTION_END,
};
static const struct tally_optgroup ctl_group = { NULL, ctl_options, NULL };

const struct tally_cmdopts ctl_cmdopts = {
	.name = "ctl",
	.summary =
		"control a running daemon: collection, flushes, epochs, status, per-CPU timers, drains",
	.usage = "[--db DIR | --socket PATH] [--timeout D] COMMAND [ARGS]",
	.stop_at_nonopt = true,
	.footer =
		"commands:\n"
		"  start                collection on\n"
		"  stop                 collection off (the event timers keep their settings)\n"
		"  clear                drop what is in memory, not yet flushed\n"
		"  startclr             clear, then start\n"
		"  flush                write what is in memory into the current epoch now\n"
		"  epoch                flush, then begin a new epoch\n"
		"  status               state, events and rates, CPUs, samples, memory, database, epoch\n"
		"  cpus LIST|all on|off [freq HZ|period N]\n"
		"                       sampling on or off on some CPUs, at a new rate\n"
		"  drain [-o FILE]      a profile of everything since the previous drain (to FILE or stdout);\n"
		"                       'tally report -i FILE' reads it\n"
		"  peek [-o FILE]       a profile of what is in memory now (not flushed yet), forgetting nothing;\n"
		"                       what 'tally top --db' shows\n",
	.groups = { &ctl_group },
};

int cmd_ctl(int argc, char **argv)
{
	struct ctlopts o = { "tally.db", NULL, 60 };
	void *ctx[] = { &o };
	const char *outfile = NULL;
	int first, r = tally_cmd_options(&ctl_cmdopts, ctx, argc, argv, &first);
	if (r >= 0)
		return r;
	const char *db = o.db, *sock = o.sock;
	double timeout = o.timeout;
	char **words = argv + first;
	int nwords = argc - first;
	/* drain's (and peek's) -o is the client's business: the daemon sends the profile here */
	if (nwords >= 1 && (!strcmp(words[0], "drain") || !strcmp(words[0], "peek"))) {
		if (nwords == 3 && !strcmp(words[1], "-o") && *words[2]) {
			outfile = words[2];
			nwords = 1;
		} else if (nwords != 1) {
			tally_error("usage: %s [-o FILE]", words[0]);
			return 2;
		}
	}
	long n = sysconf(_SC_NPROCESSORS_CONF);
	struct tally_ctl_req q;
	if (tally_ctl_parse(nwords, words, n > 0 ? (int)n : 1, &q)) {
		tally_error_last();
		return 2;
	}
	tally_ctl_req_release(&q);
	if ((q.op == TALLY_CTL_DRAIN || q.op == TALLY_CTL_PEEK) && !outfile && isatty(1)) {
		tally_error(
			"%s writes a profile, not text: redirect stdout to a file or give -o FILE",
			words[0]);
		return 2;
	}
	struct strbuf path = STRBUF_INIT, line = STRBUF_INIT, body = STRBUF_INIT;
	if (sock)
		strbuf_addstr(&path, sock);
	else
		strbuf_addf(&path, "%s/%s", db, TALLY_CTL_SOCKET_NAME);
	for (int i = 0; i < nwords; i++)
		strbuf_addf(&line, "%s%s", i ? " " : "", words[i]);
	bool ok = false;
	int ret = 0;
	if (tally_ctl_call(path.buf, line.buf, timeout, &ok, &body)) {
		tally_error_last();
		ret = 1;
	} else if (!ok) {
		/* the daemon's message, on one line, and never raw bytes from the socket */
		for (size_t i = 0; i < body.len; i++)
			if (body.buf[i] == '\n')
				body.buf[i] = ' ';
		struct strbuf msg = STRBUF_INIT;
		strbuf_add_excerpt(&msg, body.buf ? body.buf : "", body.len, body.len);
		tally_error("%s", msg.buf ? msg.buf : "");
		strbuf_release(&msg);
		ret = 1;
	} else if (outfile) {
		if (tally_write_file_atomic(outfile, body.buf ? body.buf : "", body.len)) {
			tally_error_last();
			ret = 1;
		}
	} else if (body.len && fwrite(body.buf, 1, body.len, stdout) != body.len) {
		tally_error("cannot write the answer: %s", strerror(errno));
		ret = 1;
	}
	if (!ret && fflush(stdout) != 0) {
		tally_error("cannot write the answer: %s", strerror(errno));
		ret = 1;
	}
	strbuf_release(&path);
	strbuf_release(&line);
	strbuf_release(&body);
	return ret;
}
