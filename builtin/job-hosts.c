/* tally job hosts: checks the hosts a job would profile, all at once: each is
 * reached over ssh (TALLY_SSH), tally is installed in its private directory
 * unless a working one of this version is there, and what it says of itself
 * (architecture, boot id, clock offset) is shown. The work is lib/remote. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/remote.h"
#include "tally/util.h"

struct hostsopts {
	const char **hosts;
	size_t nhosts, ahosts;
	const char *root;
	double timeout;
};

enum { OPT_HOST = 1, OPT_ROOT, OPT_TIMEOUT };

static int hosts_handle(void *ctx, int code, const char *arg)
{
	struct hostsopts *o = ctx;
	switch (code) {
	case OPT_HOST:
		if (!arg[0])
			return tally_seterr(-EINVAL, "--host needs a host name (as ssh takes it)");
		GROW(o->hosts, o->ahosts, o->nhosts + 1);
		o->hosts[o->nhosts++] = arg;
		break;
	case OPT_ROOT:
		if (arg[0] != '/')
			return tally_seterr(-EINVAL, "--remote-root '%s' must be an absolute path on the hosts", arg);
		o->root = arg;
		break;
	case OPT_TIMEOUT: return tally_parse_duration(arg, "--timeout", &o->timeout);
	}
	return 0;
}

static const struct tally_option hosts_options[] = {
	{ 0, "host", TALLY_ARG_REQUIRED, "HOST", "a host, as ssh takes it: NAME, user@NAME, an alias (repeatable)", OPT_HOST },
	{ 0, "remote-root", TALLY_ARG_REQUIRED, "DIR",
	  "where tally lives on the hosts (default " TALLY_REMOTE_ROOT "; one\ndirectory per version under it, private to the user)", OPT_ROOT },
	{ 0, "timeout", TALLY_ARG_REQUIRED, "D", "give up on a host after D (default 60s)", OPT_TIMEOUT },
	TALLY_OPTION_END,
};
static const struct tally_optgroup hosts_group = { NULL, hosts_options, hosts_handle };

const struct tally_cmdopts job_hosts_cmdopts = {
	.name = "job hosts",
	.summary = "check the hosts of a job: reachable, tally installed, clock offset",
	.usage = "--host HOST [--host HOST...]",
	.footer = "every connection is one run of $TALLY_SSH (default: ssh -o BatchMode=yes)\n"
		  "with the host and a quoted command as its arguments (docs/remote.md)\n",
	.groups = { &hosts_group },
};

struct hostjob {
	struct tally_remote r;
	struct tally_remote_facts f;
	bool installed;
	size_t bytes;
	int ret;
	char err[1024];
};

static void *check_host(void *arg)
{
	struct hostjob *h = arg;
	h->ret = tally_remote_install(&h->r, &h->installed, &h->bytes);
	if (!h->ret)
		h->ret = tally_remote_probe(&h->r, &h->f);
	if (h->ret)
		snprintf(h->err, sizeof(h->err), "%s", tally_errmsg());
	return NULL;
}

int cmd_job_hosts(int argc, char **argv)
{
	struct hostsopts o;
	memset(&o, 0, sizeof(o));
	void *ctx[] = { &o };
	int first, ret = tally_cmd_options(&job_hosts_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 2;
	if (first < argc) {
		tally_usage_error("job hosts", "unexpected argument '%s' (hosts are given with --host)", argv[first]);
		goto out;
	}
	if (!o.nhosts) {
		tally_usage_error("job hosts", "name at least one host: --host HOST");
		goto out;
	}
	struct hostjob *h = xcalloc(o.nhosts, sizeof(*h));
	pthread_t *t = xcalloc(o.nhosts, sizeof(*t));
	/* every host at once: the slowest handshake, not their sum */
	for (size_t i = 0; i < o.nhosts; i++) {
		h[i].r = (struct tally_remote){ .host = o.hosts[i], .root = o.root, .timeout = o.timeout };
		if (pthread_create(&t[i], NULL, check_host, &h[i])) {
			t[i] = 0;
			check_host(&h[i]);
		}
	}
	for (size_t i = 0; i < o.nhosts; i++)
		if (t[i])
			pthread_join(t[i], NULL);
	ret = 0;
	printf("%-20s %-8s %-24s %12s %10s  %s\n", "host", "arch", "tally", "clock offset", "round trip", "boot id");
	for (size_t i = 0; i < o.nhosts; i++) {
		if (h[i].ret) {
			tally_error("%s", h[i].err);
			printf("%-20s %s\n", o.hosts[i], "unusable (above)");
			ret = 1;
			continue;
		}
		char inst[64];
		if (h[i].installed) {
			char sz[32];
			tally_format_size(h[i].bytes, sz, sizeof(sz));
			snprintf(inst, sizeof(inst), "installed now (%s)", sz);
		} else {
			snprintf(inst, sizeof(inst), "%s", "already there");
		}
		printf("%-20s %-8s %-24s %+11.3fs %9.3fs  %s\n", o.hosts[i], h[i].f.arch, inst, h[i].f.clock_offset, h[i].f.rtt,
		       h[i].f.boot_id);
		tally_remote_facts_release(&h[i].f);
	}
	free(h);
	free(t);
	if (fflush(stdout) != 0) {
		tally_error("cannot write the host list: %s", strerror(errno));
		ret = 1;
	}
out:
	free(o.hosts);
	return ret;
}
