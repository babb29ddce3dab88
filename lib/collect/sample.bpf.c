/* Samples counted in the kernel (docs/sampling.md, "Counting in the kernel"):
 * attached to tally's per-CPU sampling events, the program adds each sample
 * to a map keyed by (process, event, mode, address) and tells the kernel not
 * to write it to the ring buffer; tally reads and clears the map once per
 * round and counts each entry as its samples. When the map has no room the
 * sample goes to the ring buffer as usual, so nothing is lost. Built with
 * clang -target bpf. */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "sample-bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* set before loading: which events count time (their weight is the period
 * tally set, as the kernel keeps reporting the first one) */
const volatile sb_u32 time_based[SB_MAX_EVENTS] = {};

struct sb_slot slots[SB_MAX_CPUS * SB_MAX_EVENTS] = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct sb_key);
	__type(value, struct sb_val);
} counts SEC(".maps");

static __always_inline int count(struct bpf_perf_event_data *ctx, sb_u32 ev)
{
	sb_u32 cpu = bpf_get_smp_processor_id();
	if (cpu >= SB_MAX_CPUS)
		return 1;
	struct sb_slot *s = &slots[cpu * SB_MAX_EVENTS + ev];
	sb_u64 now = bpf_ktime_get_ns();
	sb_u64 id = bpf_get_current_pid_tgid();
	struct sb_key k = {};
	k.tgid = (sb_u32)(id >> 32);
	k.event = (sb_u16)ev;
	k.ip = PT_REGS_IP(&ctx->regs);
	k.kernel = (sb_u16)(k.ip >> 63); /* the upper half of the address space */

	/* the weight: the period tally set, and what its last change cut short */
	sb_u64 w = ctx->sample_period, c = 0;
	if (time_based[ev] && s->period) {
		w = s->period;
		c = s->carry;
		if (c) {
			__sync_fetch_and_sub(&s->carry, c);
			w += c;
		}
	}

	struct sb_val *v = bpf_map_lookup_elem(&counts, &k);
	if (!v) {
		struct sb_val nv = { 1, w, now };
		if (bpf_map_update_elem(&counts, &k, &nv, BPF_NOEXIST) == 0)
			goto counted;
		v = bpf_map_lookup_elem(&counts, &k); /* another CPU added it meanwhile */
		if (!v) {
			/* no room: the ring buffer takes this sample (tally weighs it
			 * there), and the carry waits for the next one */
			if (c)
				__sync_fetch_and_add(&s->carry, c);
			s->ring++;
			return 1;
		}
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->weight, w);
	if (now > v->last)
		v->last = now;
counted:
	s->weighed += w;
	/* back-to-back samples of one running thread: what the timer really did */
	sb_u32 tid = (sb_u32)id;
	if (time_based[ev] && s->last_time && s->last_tid == tid && tid && now > s->last_time &&
	    now - s->last_time < w * 3 / 2) {
		sb_u64 n = s->nivals;
		s->ivals[n & (SB_IVALS - 1)] = now - s->last_time;
		s->nivals = n + 1;
	}
	s->last_time = now;
	s->last_tid = tid;
	return 0;
}

/* one entry point per event: the program cannot tell which fd it runs for */
#define COUNT(n)                                                   \
	SEC("perf_event") int count##n(struct bpf_perf_event_data *ctx) \
	{                                                          \
		return count(ctx, n);                              \
	}
COUNT(0)
COUNT(1)
COUNT(2)
COUNT(3)
