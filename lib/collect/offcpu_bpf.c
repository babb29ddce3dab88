/* Off-CPU time aggregated in the kernel (offcpu.h, docs/offcpu.md): loads
 * offcpu.bpf.c (embedded as a libbpf skeleton), tells it which tasks to
 * follow, and reads and clears its map of waits once per round. Built only
 * with libbpf (meson option bpf). */
#define _GNU_SOURCE
#include "tally/offcpu.h"
#include "tally/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf-common.h"
#include "offcpu-bpf.h"
#include "offcpu.skel.h"

#define BATCH 1024

struct tally_offcpu_bpf {
	struct offcpu_skel *skel;
	struct tally_offcpu_bpf_opts o;
	int starts_fd, stacks_fd, stats_fd;
	int ncpus;
	struct tally_bpf_drain waits;
	struct ob_stats *stats; /* ncpus: the program's per-CPU counters, read at every drain */
	uint64_t ips[OB_MAX_STACK];
};

void tally_offcpu_bpf_free(struct tally_offcpu_bpf *b)
{
	if (!b)
		return;
	offcpu_skel__destroy(b->skel);
	tally_bpf_drain_release(&b->waits);
	free(b->stats);
	free(b);
}

int tally_offcpu_bpf_open(struct tally_offcpu_bpf **out, const struct tally_offcpu_bpf_opts *opts)
{
	*out = NULL;
	tally_bpf_log_begin();
	struct tally_offcpu_bpf *b = xcalloc(1, sizeof(*b));
	b->o = *opts;
	int ret = 0;
	b->skel = offcpu_skel__open();
	if (!b->skel) {
		ret = tally_bpf_error(-errno, "open", "off-CPU");
		goto fail;
	}
	b->skel->rodata->mode = (ob_u32)(opts->mode == TALLY_OFFCPU_BPF_CGROUP ? OB_CGROUP :
					 opts->mode == TALLY_OFFCPU_BPF_TGIDS ? OB_TGIDS : OB_ALL);
	b->skel->rodata->cgroup_id = opts->cgroup_id;
	b->skel->rodata->min_ns = opts->min_ns;
	b->skel->rodata->callchain = opts->callchain;
	if (!opts->callchain) {
		/* no stack ids without call graphs: keep the stack map small */
		bpf_map__set_max_entries(b->skel->maps.stacks, 1);
	}
	ret = offcpu_skel__load(b->skel);
	if (ret) {
		ret = tally_bpf_error(ret, "load", "off-CPU");
		goto fail;
	}
	tally_bpf_drain_init(&b->waits, bpf_map__fd(b->skel->maps.waits), sizeof(struct ob_key), sizeof(struct ob_val), BATCH,
			     "off-CPU BPF map");
	b->starts_fd = bpf_map__fd(b->skel->maps.starts);
	b->stacks_fd = bpf_map__fd(b->skel->maps.stacks);
	b->stats_fd = bpf_map__fd(b->skel->maps.stats);
	b->ncpus = libbpf_num_possible_cpus();
	if (b->ncpus <= 0) {
		ret = tally_bpf_error(b->ncpus, "size the counters of", "off-CPU");
		goto fail;
	}
	for (size_t i = 0; i < opts->ntgids; i++) {
		ob_u32 tgid = (ob_u32)opts->tgids[i], one = 1;
		if (bpf_map_update_elem(bpf_map__fd(b->skel->maps.tgids), &tgid, &one, BPF_ANY)) {
			ret = tally_bpf_error(-errno, "configure", "off-CPU");
			goto fail;
		}
	}
	ret = offcpu_skel__attach(b->skel);
	if (ret) {
		ret = tally_bpf_error(ret, "attach", "off-CPU");
		goto fail;
	}
	b->stats = xcalloc((size_t)b->ncpus, sizeof(*b->stats));
	*out = b;
	return 0;
fail:
	tally_offcpu_bpf_free(b);
	return ret;
}

void tally_offcpu_bpf_enable(struct tally_offcpu_bpf *b, bool on)
{
	b->skel->bss->enabled = on;
}

static void add_entry(struct tally_offcpu_bpf *b, struct tally_offcpu *o, const struct ob_key *k, uint64_t ns,
		      uint64_t count, uint64_t time, tally_rec_fn fn, void *ctx)
{
	struct tally_offcpu_entry e = {
		.tgid = k->tgid, .tid = k->tid, .preempted = k->preempted != 0, .kernel = k->kernel != 0,
		.chain = b->o.callchain, .ns = ns, .count = count, .ips = b->ips, .nips = 0,
	};
	int32_t id = k->kernel ? k->kstack : k->ustack;
	if (id >= 0) {
		memset(b->ips, 0, sizeof(b->ips));
		if (!bpf_map_lookup_elem(b->stacks_fd, &id, b->ips))
			while (e.nips < OB_MAX_STACK && b->ips[e.nips])
				e.nips++;
	} else {
		/* one frame (no call graph, or a stack the map had no room for) */
		b->ips[0] = k->ip;
		e.nips = 1;
		e.chain = false;
	}
	tally_offcpu_add(o, &e, time, fn, ctx);
}

struct waits_ctx {
	struct tally_offcpu_bpf *b;
	struct tally_offcpu *o;
	uint64_t time;
	tally_rec_fn fn;
	void *ctx;
};

static void take_waits(void *ctx, const void *keys, const void *vals, size_t n)
{
	struct waits_ctx *w = ctx;
	const struct ob_key *k = keys;
	const struct ob_val *v = vals;
	for (size_t i = 0; i < n; i++)
		add_entry(w->b, w->o, &k[i], v[i].ns, v[i].count, w->time, w->fn, w->ctx);
}

/* The tasks still off the CPU: each counted up to end, then forgotten. */
static int drain_starts(struct tally_offcpu_bpf *b, struct tally_offcpu *o, uint64_t time, uint64_t end, tally_rec_fn fn,
			void *ctx)
{
	int n = 0;
	ob_u32 tid;
	struct ob_start s;
	while (!bpf_map_get_next_key(b->starts_fd, NULL, &tid)) {
		if (!bpf_map_lookup_elem(b->starts_fd, &tid, &s)) {
			uint64_t d = end > s.time ? end - s.time : 0;
			if (d && d >= b->o.min_ns) {
				add_entry(b, o, &s.key, d, 1, time, fn, ctx);
				n++;
			} else {
				/* under the minimum: counted as dropped, as the program does */
				struct tally_offcpu_entry e = { .tid = tid, .ns = d, .count = 1 };
				tally_offcpu_add(o, &e, time, fn, ctx);
			}
		}
		if (bpf_map_delete_elem(b->starts_fd, &tid))
			break;
	}
	return n;
}

int tally_offcpu_bpf_drain(struct tally_offcpu_bpf *b, struct tally_offcpu *o, uint64_t time, bool flush, uint64_t end,
			   tally_rec_fn fn, void *ctx)
{
	struct waits_ctx w = { b, o, time, fn, ctx };
	long taken = tally_bpf_drain_all(&b->waits, take_waits, &w);
	if (taken < 0)
		return (int)taken;
	int n = (int)taken;
	if (flush)
		n += drain_starts(b, o, time, end, fn, ctx);
	/* the program's counters, per CPU */
	struct ob_stats *st = b->stats;
	ob_u32 zero = 0;
	if (!bpf_map_lookup_elem(b->stats_fd, &zero, st)) {
		struct tally_offcpu_stats sum = { 0 };
		for (int i = 0; i < b->ncpus; i++) {
			sum.dropped += st[i].dropped;
			sum.dropped_ns += st[i].dropped_ns;
			sum.lost += st[i].lost;
			sum.lost_ns += st[i].lost_ns;
			sum.nostack += st[i].nostack;
		}
		tally_offcpu_kernel_counts(o, &sum);
	}
	return n;
}
