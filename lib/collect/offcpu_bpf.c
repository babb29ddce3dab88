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
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf-common.h"
#include "offcpu-bpf.h"
#include "offcpu.skel.h"

#define BATCH 1024

/* A stack of an earlier epoch that a task still off the CPU (or a wait not
 * yet read) names, copied out of its map before that map was emptied. */
struct kept_stack {
	uint64_t key; /* epoch << 32 | stack id */
	size_t first; /* its frames: ips[first, first + nips) of its struct kept */
	uint32_t nips;
};

struct kept {
	struct kept_stack *v;
	size_t n, alloc;
	uint64_t *ips;
	size_t nips, aips;
};

struct tally_offcpu_bpf {
	struct offcpu_skel *skel;
	struct tally_offcpu_bpf_opts o;
	int starts_fd, stacks_fd[2], stats_fd, slices_fd;
	struct ob_slice slice; /* the last slice read */
	uint64_t slice_regs[3];
	uint64_t noslice;      /* slices named by a wait and gone from the map when read */
	int ncpus;
	struct tally_bpf_drain waits;
	struct ob_stats *stats; /* ncpus: the program's per-CPU counters, read at every drain */
	uint64_t ips[OB_MAX_STACK];
	/* The two stack maps turn over (call graphs only): the program puts the
	 * stacks of the waits that begin in epoch E in map E & 1. Once the
	 * current map holds an eighth of its room (or had none for a stack), the
	 * epoch moves on, the stacks of the last one still named are kept here
	 * and its map is emptied for the next: a daemon that runs for weeks
	 * keeps finding room for new stacks. */
	uint32_t epoch;
	bool old_live;      /* the map of epoch - 1 is not emptied yet */
	bool turn_due;      /* turn over at the next drain */
	uint8_t *seen;      /* OB_STACKS bits: the ids of the current map met in waits */
	size_t nseen;
	uint64_t nostack;   /* the program's count of stacks with no room, at the last drain */
	struct kept kept;   /* sorted by key */
	struct kept next;   /* a turnover's, until its end */
	uint64_t turnovers;
};

void tally_offcpu_bpf_free(struct tally_offcpu_bpf *b)
{
	if (!b)
		return;
	offcpu_skel__destroy(b->skel);
	tally_bpf_drain_release(&b->waits);
	free(b->stats);
	free(b->seen);
	free(b->kept.v);
	free(b->kept.ips);
	free(b->next.v);
	free(b->next.ips);
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
	b->skel->rodata->slice_len =
		opts->callchain ? (opts->slice_len < OB_SLICE ? opts->slice_len : OB_SLICE) : 0;
	if (!opts->callchain) {
		/* no stack ids without call graphs: keep the stack maps small */
		bpf_map__set_max_entries(b->skel->maps.stacks0, 1);
		bpf_map__set_max_entries(b->skel->maps.stacks1, 1);
	}
	if (!b->skel->rodata->slice_len)
		bpf_map__set_max_entries(b->skel->maps.slices, 1);
	ret = offcpu_skel__load(b->skel);
	if (ret) {
		ret = tally_bpf_error(ret, "load", "off-CPU");
		goto fail;
	}
	tally_bpf_drain_init(&b->waits, bpf_map__fd(b->skel->maps.waits), sizeof(struct ob_key),
			     sizeof(struct ob_val), BATCH, "off-CPU BPF map");
	b->starts_fd = bpf_map__fd(b->skel->maps.starts);
	b->stacks_fd[0] = bpf_map__fd(b->skel->maps.stacks0);
	b->stacks_fd[1] = bpf_map__fd(b->skel->maps.stacks1);
	b->seen = xcalloc(OB_STACKS / 8, 1);
	b->stats_fd = bpf_map__fd(b->skel->maps.stats);
	b->slices_fd = bpf_map__fd(b->skel->maps.slices);
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

static uint64_t kept_key(uint32_t epoch, int32_t id)
{
	return (uint64_t)epoch << 32 | (uint32_t)id;
}

static const struct kept_stack *kept_find(const struct kept *k, uint64_t key)
{
	size_t i = TALLY_UPPER_U64(k->v, k->n, key, key);
	return i && k->v[i - 1].key == key ? &k->v[i - 1] : NULL;
}

/* The frames of stack id of epoch into ips: their number, 0 when the stack
 * is gone. (A lookup in a stack map fills the value past its frames with
 * zeros, which ends the count.) */
static uint32_t stack_frames(struct tally_offcpu_bpf *b, uint32_t epoch, int32_t id, uint64_t *ips)
{
	uint32_t n = 0;
	if (epoch == b->epoch || (epoch + 1 == b->epoch && b->old_live)) {
		if (bpf_map_lookup_elem(b->stacks_fd[epoch & 1], &id, ips))
			return 0;
		while (n < OB_MAX_STACK && ips[n])
			n++;
		if (epoch == b->epoch &&
		    !(b->seen[(uint32_t)id / 8 % (OB_STACKS / 8)] & 1u << (id % 8))) {
			b->seen[(uint32_t)id / 8 % (OB_STACKS / 8)] |= (uint8_t)(1u << (id % 8));
			if (++b->nseen >= OB_STACKS / 8)
				b->turn_due = true;
		}
		return n;
	}
	const struct kept_stack *ks = kept_find(&b->kept, kept_key(epoch, id));
	if (!ks)
		return 0;
	memcpy(ips, &b->kept.ips[ks->first], ks->nips * sizeof(*ips));
	return ks->nips;
}

static void add_entry(struct tally_offcpu_bpf *b, struct tally_offcpu *o, const struct ob_key *k,
		      uint64_t ns, uint64_t count, uint64_t time, tally_rec_fn fn, void *ctx)
{
	struct tally_offcpu_entry e = {
		.tgid = k->tgid,
		.tid = k->tid,
		.preempted = k->preempted != 0,
		.kernel = k->kernel != 0,
		.chain = b->o.callchain,
		.ns = ns,
		.count = count,
		.ips = b->ips,
		.nips = 0,
	};
	int32_t id = k->kernel ? k->kstack : k->ustack;
	if (id >= 0) {
		e.nips = stack_frames(b, k->epoch, id, b->ips);
		struct ob_slice_key sk = { .tgid = k->tgid, .slice = k->slice };
		if (k->slice && !k->kernel && e.nips) {
			if (!bpf_map_lookup_elem(b->slices_fd, &sk, &b->slice) &&
			    b->slice.ip == b->ips[0]) {
				/* bp, sp, ip: the order of tally_unwind_fp_regs_mask's bits */
				b->slice_regs[0] = b->slice.bp;
				b->slice_regs[1] = b->slice.sp;
				b->slice_regs[2] = b->slice.ip;
				e.regs = b->slice_regs;
				e.stack = b->slice.stack;
				e.stack_len = b->slice.len < OB_SLICE ? b->slice.len : OB_SLICE;
			} else {
				b->noslice += count; /* made room for others before it was read */
			}
		}
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
static int drain_starts(struct tally_offcpu_bpf *b, struct tally_offcpu *o, uint64_t time,
			uint64_t end, tally_rec_fn fn, void *ctx)
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

/* Every run of the program that began before this call has ended: it runs
 * under RCU, and MEMBARRIER_CMD_GLOBAL waits for a grace period (where the
 * kernel refuses it, a pause far longer than a run). */
static void wait_for_runs(void)
{
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0)
		return;
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

/* The first half of a turnover: the waits that begin from now on put their
 * stacks in the other map (emptied at the last turnover), and the stacks of
 * earlier epochs that tasks still off the CPU name are copied into next
 * (each once: many threads wait at the same place). */
static void turn_begin(struct tally_offcpu_bpf *b, struct kept *next)
{
	b->epoch++;
	__atomic_store_n(&b->skel->bss->epoch, b->epoch, __ATOMIC_RELEASE);
	wait_for_runs(); /* no task goes off with the old epoch after this */
	b->old_live = true;
	/* a start deleted under the walk sends it back to the first key: it
	 * walks again (duplicates go below), at most 16 times the map's room
	 * for a map never still */
	uint64_t *keys = NULL;
	size_t nkeys = 0, akeys = 0, most = 16 * (size_t)bpf_map__max_entries(b->skel->maps.starts);
	ob_u32 tid, at;
	struct ob_start st;
	bool first = true;
	for (size_t guard = 0;
	     guard < most && !bpf_map_get_next_key(b->starts_fd, first ? NULL : &at, &tid);
	     guard++) {
		first = false;
		at = tid;
		if (bpf_map_lookup_elem(b->starts_fd, &tid, &st) || st.key.epoch == b->epoch)
			continue;
		int32_t id = st.key.kernel ? st.key.kstack : st.key.ustack;
		if (id >= 0) {
			GROW(keys, akeys, nkeys + 1);
			keys[nkeys++] = kept_key(st.key.epoch, id);
		}
	}
	tally_qsort(keys, nkeys, sizeof(*keys), tally_cmp_u64);
	for (size_t i = 0; i < nkeys; i++) {
		if (i && keys[i] == keys[i - 1])
			continue;
		uint32_t n = stack_frames(b, (uint32_t)(keys[i] >> 32), (int32_t)(uint32_t)keys[i],
					  b->ips);
		if (!n)
			continue;
		GROW(next->v, next->alloc, next->n + 1);
		GROW(next->ips, next->aips, next->nips + n);
		next->v[next->n++] = (struct kept_stack){ keys[i], next->nips, n };
		memcpy(&next->ips[next->nips], b->ips, n * sizeof(*b->ips));
		next->nips += n;
	}
	free(keys);
}

/* The second half, once the waits of before are read: the old map emptied,
 * the stacks kept those that tasks still off name. */
static void turn_end(struct tally_offcpu_bpf *b, struct kept *next)
{
	int fd = b->stacks_fd[(b->epoch - 1) & 1];
	int32_t id, cur, *at = NULL;
	while (!bpf_map_get_next_key(fd, at, &cur)) {
		bpf_map_delete_elem(fd, &cur);
		id = cur;
		at = &id;
	}
	b->old_live = false;
	free(b->kept.v);
	free(b->kept.ips);
	b->kept = *next;
	*next = (struct kept){ 0 };
	memset(b->seen, 0, OB_STACKS / 8);
	b->nseen = 0;
	b->turn_due = false;
	b->turnovers++;
}

int tally_offcpu_bpf_drain(struct tally_offcpu_bpf *b, struct tally_offcpu *o, uint64_t time,
			   bool flush, uint64_t end, tally_rec_fn fn, void *ctx)
{
	struct waits_ctx w = { b, o, time, fn, ctx };
	if (b->o.callchain && b->turn_due && !b->old_live)
		turn_begin(b, &b->next);
	long taken = tally_bpf_drain_all(&b->waits, take_waits, &w);
	if (taken < 0)
		return (int)taken; /* the turnover ends at a drain that reads them all */
	int n = (int)taken;
	if (flush)
		n += drain_starts(b, o, time, end, fn, ctx);
	if (b->old_live)
		turn_end(b, &b->next);
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
			sum.noslice += st[i].noslice;
		}
		sum.noslice += b->noslice;
		if (sum.nostack > b->nostack)
			b->turn_due = true; /* a stack found no room: make room */
		b->nostack = sum.nostack;
		sum.turnovers = b->turnovers;
		tally_offcpu_kernel_counts(o, &sum);
	}
	return n;
}
