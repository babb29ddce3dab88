/* Off-CPU time aggregated in the kernel (offcpu.h, docs/offcpu.md): loads
 * offcpu.bpf.c (embedded as a libbpf skeleton), tells it which tasks to
 * follow, and reads and clears its map of waits once per round. Built only
 * with libbpf (meson option bpf). */
#define _GNU_SOURCE
#include "tally/offcpu.h"
#include "tally/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "offcpu-bpf.h"
#include "offcpu.skel.h"

#define BATCH 1024

struct tally_offcpu_bpf {
	struct offcpu_skel *skel;
	struct tally_offcpu_bpf_opts o;
	int waits_fd, starts_fd, stacks_fd, stats_fd;
	int ncpus;
	bool batch_ok;
	struct ob_key *keys;
	struct ob_val *vals;
	struct ob_stats *stats; /* ncpus: the program's per-CPU counters, read at every drain */
	uint64_t ips[OB_MAX_STACK];
};

/* libbpf's first warning since the load began: the reason it failed (the
 * later ones repeat the failure one level up; libtally never prints) */
static char last_msg[256];

static int on_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	char buf[sizeof(last_msg)];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	if (buf[0] && !last_msg[0])
		memcpy(last_msg, buf, sizeof(buf));
	return 0;
}

void tally_offcpu_bpf_free(struct tally_offcpu_bpf *b)
{
	if (!b)
		return;
	offcpu_skel__destroy(b->skel);
	free(b->keys);
	free(b->vals);
	free(b->stats);
	free(b);
}

static int load_error(int e, const char *what)
{
	return tally_seterr(e < 0 ? e : -EINVAL, "cannot %s the off-CPU BPF program: %s%s%s", what, strerror(e < 0 ? -e : e),
			    last_msg[0] ? ": " : "", last_msg);
}

int tally_offcpu_bpf_open(struct tally_offcpu_bpf **out, const struct tally_offcpu_bpf_opts *opts)
{
	*out = NULL;
	last_msg[0] = 0;
	libbpf_set_print(on_libbpf_print);
	struct tally_offcpu_bpf *b = xcalloc(1, sizeof(*b));
	b->o = *opts;
	int ret = 0;
	b->skel = offcpu_skel__open();
	if (!b->skel) {
		ret = load_error(-errno, "open");
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
		ret = load_error(ret, "load");
		goto fail;
	}
	b->waits_fd = bpf_map__fd(b->skel->maps.waits);
	b->starts_fd = bpf_map__fd(b->skel->maps.starts);
	b->stacks_fd = bpf_map__fd(b->skel->maps.stacks);
	b->stats_fd = bpf_map__fd(b->skel->maps.stats);
	b->ncpus = libbpf_num_possible_cpus();
	if (b->ncpus <= 0) {
		ret = load_error(b->ncpus, "size the counters of");
		goto fail;
	}
	for (size_t i = 0; i < opts->ntgids; i++) {
		ob_u32 tgid = (ob_u32)opts->tgids[i], one = 1;
		if (bpf_map_update_elem(bpf_map__fd(b->skel->maps.tgids), &tgid, &one, BPF_ANY)) {
			ret = load_error(-errno, "configure");
			goto fail;
		}
	}
	ret = offcpu_skel__attach(b->skel);
	if (ret) {
		ret = load_error(ret, "attach");
		goto fail;
	}
	b->batch_ok = true;
	b->keys = xcalloc(BATCH, sizeof(*b->keys));
	b->vals = xcalloc(BATCH, sizeof(*b->vals));
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

/* The waits one at a time: a kernel without batch operations on hash maps. */
static int drain_slow(struct tally_offcpu_bpf *b, struct tally_offcpu *o, uint64_t time, tally_rec_fn fn, void *ctx)
{
	int n = 0;
	struct ob_key k, next;
	struct ob_val v;
	void *prev = NULL;
	while (!bpf_map_get_next_key(b->waits_fd, prev, &next)) {
		k = next;
		if (!bpf_map_lookup_and_delete_elem(b->waits_fd, &k, &v) ||
		    (!bpf_map_lookup_elem(b->waits_fd, &k, &v) && !bpf_map_delete_elem(b->waits_fd, &k))) {
			add_entry(b, o, &k, v.ns, v.count, time, fn, ctx);
			n++;
		}
		prev = NULL; /* the key is gone: start over */
	}
	return n;
}

static int drain_waits(struct tally_offcpu_bpf *b, struct tally_offcpu *o, uint64_t time, tally_rec_fn fn, void *ctx)
{
	if (!b->batch_ok)
		return drain_slow(b, o, time, fn, ctx);
	int n = 0;
	ob_u64 token = 0;
	bool first = true;
	for (;;) {
		__u32 count = BATCH;
		int r = bpf_map_lookup_and_delete_batch(b->waits_fd, first ? NULL : &token, &token, b->keys, b->vals, &count, NULL);
		int e = r ? -errno : 0;
		if (r && e != -ENOENT && !count) {
			if (first && (e == -EINVAL || e == -ENOTSUP || e == -EOPNOTSUPP)) {
				b->batch_ok = false;
				return drain_slow(b, o, time, fn, ctx);
			}
			return tally_seterr(e, "cannot read the off-CPU BPF map: %s", strerror(-e));
		}
		first = false;
		for (__u32 i = 0; i < count; i++)
			add_entry(b, o, &b->keys[i], b->vals[i].ns, b->vals[i].count, time, fn, ctx);
		n += (int)count;
		if (r)
			break; /* -ENOENT: the end */
	}
	return n;
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
	int n = drain_waits(b, o, time, fn, ctx);
	if (n < 0)
		return n;
	if (flush)
		n += drain_starts(b, o, time, end, fn, ctx);
	/* the program's counters, per CPU */
	struct ob_stats *st = b->stats;
	ob_u32 zero = 0;
	if (!bpf_map_lookup_elem(b->stats_fd, &zero, st)) {
		struct ob_stats sum = { 0 };
		for (int i = 0; i < b->ncpus; i++) {
			sum.dropped += st[i].dropped;
			sum.dropped_ns += st[i].dropped_ns;
			sum.lost += st[i].lost;
			sum.lost_ns += st[i].lost_ns;
		}
		tally_offcpu_kernel_counts(o, sum.dropped, sum.dropped_ns, sum.lost, sum.lost_ns);
	}
	return n;
}
