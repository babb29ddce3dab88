/* Samples counted in the kernel (docs/sampling.md, "Counting in the kernel"):
 * attached to tally's per-CPU sampling events, the program adds each sample
 * to the place of (process, event, mode, address) in a table that tally maps
 * into its memory and reads once per round without a system call: it keeps
 * what it read last of each place and takes the difference. A place is claimed
 * once per table (a slot, found again through a hash map by its key); when the
 * table has no room the sample goes to the ring buffer as usual, so nothing is
 * lost. Two tables: tally turns new places to the other when one fills, and
 * empties the first a round later, in its own memory. Built with clang
 * -target bpf. */
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

/* the places of both tables, slots claimed of each, and the table new places go to */
struct sb_place places[2][SB_PLACES] = {};
sb_u32 claimed[2] = {};
sb_u32 active = 0;

/* a place's key to where it was claimed: the table (bit 31) and the slot. An
 * entry may be stale (its table emptied since, or turned away from): the slot
 * then holds another key, or none, and the place is claimed again. Nothing is
 * ever deleted; the least recently used entries make room. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2 * SB_PLACES);
	__type(key, struct sb_key);
	__type(value, sb_u32);
} places_index SEC(".maps");

static __always_inline int holds(const struct sb_place *p, const struct sb_key *k)
{
	return p->ready && p->key.ip == k->ip && p->key.tgid == k->tgid &&
	       p->key.event == k->event && p->key.kernel == k->kernel;
}

/* the place of k in the active table, claimed if new there; NULL when it is full */
static __always_inline struct sb_place *place(const struct sb_key *k, sb_u64 now)
{
	sb_u32 t = active & 1;
	sb_u32 *at = bpf_map_lookup_elem(&places_index, k);
	if (at && (*at >> 31) == t) {
		struct sb_place *p = &places[t][*at & (SB_PLACES - 1)];
		if (holds(p, k))
			return p;
	}
	sb_u32 i = __sync_fetch_and_add(&claimed[t], 1);
	if (i >= SB_PLACES)
		return NULL;
	i &= SB_PLACES - 1;
	asm volatile("" : "+r"(i)); /* the mask stays: for the verifier */
	struct sb_place *p = &places[t][i];
	p->key = *k;
	p->last = now;
	__sync_fetch_and_add(&p->ready, 1); /* after its key: tally reads the key once ready */
	/* two CPUs that claim one new place at once make two slots of one key:
	 * each counts what it got, so the sum is right */
	sb_u32 v = (t << 31) | i;
	bpf_map_update_elem(&places_index, k, &v, BPF_ANY);
	return p;
}

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

	struct sb_place *v = place(&k, now);
	if (!v) {
		/* no room: the ring buffer takes this sample (tally weighs it
		 * there), and the carry waits for the next one */
		if (c)
			__sync_fetch_and_add(&s->carry, c);
		s->ring++;
		return 1;
	}
	/* the weight before the count: a reader that sees the count sees its weight */
	__sync_fetch_and_add(&v->weight, w);
	__sync_fetch_and_add(&v->count, 1);
	if (now > v->last)
		v->last = now;
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
