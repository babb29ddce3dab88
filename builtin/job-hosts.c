/* tally job hosts: checks the hosts a job would profile, all at once: each is
 * reached over ssh (TALLY_SSH), tally is installed in its private directory
 * unless a working one of this version is there, and what it says of itself
 * (architecture, boot id, clock offset) is shown. The work is lib/remote. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/job.h"
#include "tally/remote.h"
#include "tally/util.h"

/* --host and --remote-root, shared by job hosts and job run (builtin.h) */
enum { OPT_HOST = 1, OPT_ROOT };

static int remote_handle(void *ctx, int code, const char *arg)
{
	struct tally_hosts_opts *o = ctx;
	switch (code) {
	case OPT_HOST:
		if (!arg[0])
			return tally_seterr(-EINVAL, "--host needs a host name (as ssh takes it)");
		if (tally_remote_host_ok(arg))
			return -EINVAL;
		GROW(o->hosts, o->ahosts, o->nhosts + 1);
		o->hosts[o->nhosts++] = (char *)arg;
		break;
	case OPT_ROOT:
		if (arg[0] != '/' && strncmp(arg, "~/", 2))
			return tally_seterr(
				-EINVAL,
				"--remote-root '%s' must be an absolute path on the hosts, or one under '~/' (the user's home there)",
				arg);
		o->root = arg;
		break;
	}
	return 0;
}

static const struct tally_option remote_options[] = {
	TALLY_OPT(0, "host", TALLY_ARG_REQUIRED, "HOST",
		  "a host, as ssh takes it: NAME, user@NAME, an alias (repeatable)", OPT_HOST),
	TALLY_OPT(
		0, "remote-root", TALLY_ARG_REQUIRED, "DIR",
		"where tally lives on the hosts (default " TALLY_REMOTE_ROOT
		",\nunder the ssh user's home there; one directory per version under\nit, private to the user)",
		OPT_ROOT),
	TALLY_OPTION_END,
};
const struct tally_optgroup tally_hosts_group = { "remote hosts (docs/remote.md)", remote_options,
						  remote_handle };

struct hostsopts {
	struct tally_hosts_opts h;
	double timeout;
};

enum { OPT_TIMEOUT = 1 };

static int hosts_handle(void *ctx, int code, const char *arg)
{
	struct hostsopts *o = ctx;
	if (code == OPT_TIMEOUT)
		return tally_parse_duration(arg, "--timeout", &o->timeout);
	return 0;
}

static const struct tally_option hosts_options[] = {
	TALLY_OPT(0, "timeout", TALLY_ARG_REQUIRED, "D", "give up on a host after D (default 60s)",
		  OPT_TIMEOUT),
	TALLY_OPTION_END,
};
static const struct tally_optgroup hosts_group = { NULL, hosts_options, hosts_handle };

const struct tally_cmdopts job_hosts_cmdopts = {
	.name = "job hosts",
	.summary = "check the hosts of a job: reachable, tally installed, clock offset",
	.usage = "--host HOST [--host HOST...] | CONTROL",
	.footer = "every connection is one run of $TALLY_SSH (default: ssh -o BatchMode=yes)\n"
		  "with the host and a quoted command as its arguments (docs/remote.md)\n",
	.groups = { &hosts_group, &tally_hosts_group },
};

struct hostjob {
	struct tally_remote r;
	const char *profilers; /* a control file's: started and ended there (NULL: none) */
	struct tally_remote_facts f;
	bool installed;
	size_t bytes;
	int ret;
	char err[1024];
};

static void check_host(void *ctx, size_t i)
{
	struct hostjob *h = &((struct hostjob *)ctx)[i];
	h->ret = tally_remote_install(&h->r, &h->installed, &h->bytes);
	if (!h->ret)
		h->ret = tally_remote_probe(&h->r, &h->f);
	/* the clock timed on the connection the install opened: no handshake
	 * in its round trip */
	if (!h->ret)
		h->ret = tally_remote_clock(&h->r, &h->f.clock_offset, &h->f.rtt);
	/* the profilers set up and initialized there, as the job will, then ended */
	if (!h->ret && h->profilers && h->profilers[0])
		h->ret = tally_job_host_check(h->r.host, h->r.root, h->profilers);
	if (h->ret)
		snprintf(h->err, sizeof(h->err), "%s", tally_errmsg());
}

int cmd_job_hosts(int argc, char **argv)
{
	struct hostsopts o;
	memset(&o, 0, sizeof(o));
	void *ctx[] = { &o, &o.h };
	int first, ret = tally_cmd_options(&job_hosts_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 2;
	if (argc - first > 1) {
		tally_usage_error(
			"job hosts",
			"unexpected argument '%s' (one control file, or hosts with --host)",
			argv[first + 1]);
		goto out;
	}
	/* a control file's 'hosts' lines, after the --host ones */
	struct tally_job_control ctl = { 0 };
	if (first < argc) {
		int r = tally_job_control_read(&ctl, argv[first]);
		if (r) {
			tally_error_last();
			tally_job_control_release(&ctl);
			ret = r == -EINVAL ? 2 : 1;
			goto out;
		}
		for (size_t i = 0; i < ctl.n; i++)
			for (size_t k = 0;
			     ctl.steps[i].cmd == TALLY_JOB_HOSTS && ctl.steps[i].args[k]; k++) {
				GROW(o.h.hosts, o.h.ahosts, o.h.nhosts + 1);
				o.h.hosts[o.h.nhosts++] = ctl.steps[i].args[k];
			}
	}
	if (!o.h.nhosts) {
		tally_usage_error(
			"job hosts",
			first < argc
				? "'%s' has no 'hosts' line: name the hosts there, or with --host HOST"
				: "name at least one host: --host HOST, or a control file with a 'hosts' line",
			first < argc ? argv[first] : "");
		tally_job_control_release(&ctl);
		goto out;
	}
	if (tally_remote_hosts_check(o.h.hosts, o.h.nhosts)) {
		tally_usage_error("job hosts", "%s", tally_errmsg());
		tally_job_control_release(&ctl);
		goto out;
	}
	size_t nh = o.h.nhosts;
	char *profilers = first < argc ? tally_job_control_profilers(&ctl) : NULL;
	struct hostjob *h = xcalloc(nh, sizeof(*h));
	/* one shared connection per host, private, ended at the end */
	char mux[64];
	snprintf(mux, sizeof(mux), "/tmp/tally-ssh-%d-XXXXXX", (int)getpid());
	bool have_mux = mkdtemp(mux) != NULL;
	for (size_t i = 0; i < nh; i++) {
		h[i].r = (struct tally_remote){ .host = o.h.hosts[i],
						.root = o.h.root,
						.timeout = o.timeout,
						.mux_dir = have_mux ? mux : NULL };
		h[i].profilers = profilers;
	}
	/* every host at once: the slowest handshake, not their sum */
	tally_run_parallel(nh, check_host, h);
	ret = 0;
	printf("%-20s %-8s %-24s %12s %10s  %s\n", "host", "arch", "tally", "clock offset",
	       "round trip", "boot id");
	for (size_t i = 0; i < nh; i++) {
		if (h[i].ret) {
			tally_error("%s", h[i].err);
			printf("%-20s %s\n", o.h.hosts[i], "unusable (above)");
			tally_remote_facts_release(&h[i].f);
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
		printf("%-20s %-8s %-24s %+11.3fs %9.3fs  %s%s\n", o.h.hosts[i], h[i].f.arch, inst,
		       h[i].f.clock_offset, h[i].f.rtt, h[i].f.boot_id,
		       profilers && profilers[0] ? "  (profilers initialized)" : "");
		tally_remote_facts_release(&h[i].f);
	}
	for (size_t i = 0; i < nh && have_mux; i++)
		tally_remote_mux_close(&h[i].r);
	if (have_mux)
		tally_remove_tree(mux);
	free(h);
	free(profilers);
	tally_job_control_release(&ctl);
	if (fflush(stdout) != 0) {
		tally_error("cannot write the host list: %s", strerror(errno));
		ret = 1;
	}
out:
	free(o.h.hosts);
	return ret;
}
