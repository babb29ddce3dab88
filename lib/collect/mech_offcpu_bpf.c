/* Off-CPU time aggregated in the kernel by a BPF program (docs/offcpu.md),
 * a mechanism of internal.h over the loader of offcpu_bpf.c: no perf event
 * of its own; its map of waits is read after each round's records (and at
 * each process's exit, before its maps are forgotten). Built only with
 * libbpf; mech_nobpf.c stands in for it without. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct offcpu_bpf {
	struct offcpu_mech om;
	struct tally_offcpu_bpf *bpf;
};

static void bpf_enable(struct tally_collector *c, struct mech *m, bool on)
{
	(void)c;
	tally_offcpu_bpf_enable(((struct offcpu_bpf *)m)->bpf, on);
}

/* The program's waits, as samples at the latest record's time (the maps
 * they resolve in are still known); flush: and the tasks still off. */
static void drain(struct tally_collector *c, struct offcpu_bpf *b, bool flush, struct round *rd)
{
	uint64_t now = collect_mono_ns();
	uint64_t t = c->max_time ? c->max_time : now;
	/* a failed read leaves the waits in the map for the next round */
	tally_offcpu_bpf_drain(b->bpf, b->om.off, t, flush, b->om.stop ? b->om.stop : now, rd->fn,
			       rd->ctx);
}

static void bpf_sideband(struct tally_collector *c, struct mech *m, struct round *rd,
			 const struct tally_rec *r)
{
	/* a process ends: its waits before its maps are forgotten */
	const uint32_t *pt = (const uint32_t *)(r->raw + 1);
	if (r->type == PERF_RECORD_EXIT && pt[0] == pt[2])
		drain(c, (struct offcpu_bpf *)m, false, rd);
}

static void bpf_finish(struct tally_collector *c, struct mech *m, struct round *rd)
{
	struct offcpu_bpf *b = (struct offcpu_bpf *)m;
	drain(c, b, b->om.flush, rd);
	b->om.flush = false;
}

static void bpf_free(struct mech *m)
{
	struct offcpu_bpf *b = (struct offcpu_bpf *)m;
	tally_offcpu_bpf_free(b->bpf);
	offcpu_mech_release(&b->om);
	free(b);
}

static const struct mech_ops bpf_ops = {
	.name = "bpf",
	.kind = TALLY_OFFCPU_BPF,
	.enable = bpf_enable,
	.pause = offcpu_mech_pause,
	.sideband = bpf_sideband,
	.finish = bpf_finish,
	.stats = offcpu_mech_stats,
	.free = bpf_free,
};

int mech_offcpu_bpf_open(struct tally_collector *c, bool asked, struct mech **out)
{
	*out = NULL;
	struct tally_offcpu_bpf_opts bo = { .min_ns = c->o.offcpu_min, .callchain = c->o.callchain,
					    .slice_len = c->o.leaf_stack };
	if (c->o.target == TALLY_TARGET_SYSTEM) {
		bo.mode = TALLY_OFFCPU_BPF_ALL;
	} else if (c->o.target == TALLY_TARGET_CHILD && c->o.use_cgroup) {
		struct stat st;
		if (fstat(c->o.cgroup_fd, &st) < 0)
			return tally_seterr(-errno, "cannot read the command's cgroup: %s",
					    strerror(errno));
		bo.mode = TALLY_OFFCPU_BPF_CGROUP;
		bo.cgroup_id = (uint64_t)st.st_ino; /* a cgroup2 directory's inode is its id */
	} else {
		bo.mode = TALLY_OFFCPU_BPF_TGIDS;
		bo.tgids = c->o.pids;
		bo.ntgids = c->o.npids;
	}
	struct tally_offcpu_bpf *prog;
	int r = tally_offcpu_bpf_open(&prog, &bo);
	if (r) {
		if (asked) {
			char why[512];
			snprintf(why, sizeof(why), "%s", tally_errmsg());
			return tally_seterr(
				r, "%s (%suse --off-cpu-mechanism tracepoint)", why,
				r == -EPERM ? "run as root or grant CAP_BPF and CAP_PERFMON, or "
					    : "");
		}
		c->off_why = "the BPF program did not load (see --off-cpu-mechanism bpf)";
		return 0;
	}
	/* -e off-cpu alone: a dummy event still follows mmaps, comms and exits */
	bool other = false;
	for (int ev = 0; ev < c->o.nevents; ev++)
		other = other || !c->o.events[ev]->offcpu;
	if (!other)
		c->o.sideband_dummy = true;
	struct offcpu_bpf *b = xcalloc(1, sizeof(*b));
	b->bpf = prog;
	offcpu_mech_init(c, &b->om, &bpf_ops);
	*out = &b->om.m;
	return 0;
}
