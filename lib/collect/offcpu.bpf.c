/* Off-CPU time aggregated in the kernel (docs/offcpu.md): at every switch-out
 * of a target task, its time and stack; at its switch-in, the interval added
 * to a map keyed by (tgid, tid, stack, preempted) that tally reads and clears
 * once per round. Built with clang -target bpf; the kernel fields it reads
 * are declared here and relocated against the running kernel's BTF (CO-RE),
 * so no vmlinux.h of the build machine is needed. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "offcpu-bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct task_struct {
	int pid;
	int tgid;
	int exit_state;
} __attribute__((preserve_access_index));

#ifdef __TARGET_ARCH_x86
/* the user registers a task entered the kernel with */
struct pt_regs {
	unsigned long bp;
	unsigned long sp;
	unsigned long ip;
} __attribute__((preserve_access_index));
#endif

/* set before loading */
const volatile ob_u32 mode = OB_ALL;
const volatile ob_u64 cgroup_id = 0;
const volatile ob_u64 min_ns = 0;
const volatile ob_u32 callchain = 0;
/* with frame-pointer call graphs: the bytes of user stack a slice keeps (at
 * most OB_SLICE; 0: no slices) */
const volatile ob_u32 slice_len = 0;
/* set by tally while running: off while paused or stopped */
volatile ob_u32 enabled = 0;
/* set by tally: the stack map of the waits that begin now is stacks0 for an
 * even epoch, stacks1 for an odd one (tally empties the other when it turns
 * them over, its stacks still in use copied first) */
volatile ob_u32 epoch = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, ob_u32);
	__type(value, struct ob_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ob_key);
	__type(value, struct ob_val);
} waits SEC(".maps");

#define STACK_MAP                                                          \
	struct {                                                           \
		__uint(type, BPF_MAP_TYPE_STACK_TRACE);                    \
		__uint(max_entries, OB_STACKS);                            \
		__uint(key_size, sizeof(ob_u32));                          \
		__uint(value_size, OB_MAX_STACK * sizeof(ob_u64));         \
	}
STACK_MAP stacks0 SEC(".maps");
STACK_MAP stacks1 SEC(".maps");

/* the id of the stack now in the epoch's map, or a negative error */
static __always_inline ob_s32 stack_id(void *ctx, ob_u32 ep, ob_u64 flags)
{
	return (ep & 1) ? bpf_get_stackid(ctx, &stacks1, flags)
			: bpf_get_stackid(ctx, &stacks0, flags);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, ob_u32);
	__type(value, ob_u32);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, ob_u32);
	__type(value, struct ob_stats);
} stats SEC(".maps");

/* the tops of the stacks the waits left, for tally to read (an LRU map: the
 * places not waited at for a while make room) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OB_SLICES);
	__type(key, struct ob_slice_key);
	__type(value, struct ob_slice);
} slices SEC(".maps");

/* where a slice is read, per CPU (too big for the program's stack) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, ob_u32);
	__type(value, struct ob_slice);
} slice_buf SEC(".maps");

/* Reads up to want bytes of user stack from sp into buf (the task is the one
 * running: its memory is current's): the bytes read. A read that would cross
 * the stack's end fails whole: shorter ones then. */
static __always_inline ob_u32 read_stack(ob_u8 *buf, ob_u32 want, ob_u64 sp)
{
	if (want > OB_SLICE)
		want = OB_SLICE;
	if (want >= 8 && bpf_probe_read_user(buf, want, (const void *)sp) == 0)
		return want;
	if (want > 512 && bpf_probe_read_user(buf, 512, (const void *)sp) == 0)
		return 512;
	if (want > 64 && bpf_probe_read_user(buf, 64, (const void *)sp) == 0)
		return 64;
	return 0;
}

static __always_inline void count_noslice(void)
{
	ob_u32 zero = 0;
	struct ob_stats *st = bpf_map_lookup_elem(&stats, &zero);
	if (st)
		st->noslice++;
}

/* The top of the user stack of task t going off the CPU, for tally's repair
 * of the frame-pointer chain (docs/offcpu.md): its registers and the words
 * from sp up to the frame rbp points at hashed into k->slice, and the slice
 * kept once per (process, hash) with slice_len bytes. */
static __always_inline void take_slice(struct ob_key *k, struct task_struct *t)
{
#ifdef __TARGET_ARCH_x86
	ob_u32 zero = 0;
	struct ob_slice *sl = bpf_map_lookup_elem(&slice_buf, &zero);
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!sl || !regs) {
		count_noslice();
		return;
	}
	ob_u64 ip = BPF_CORE_READ(regs, ip), sp = BPF_CORE_READ(regs, sp),
	       bp = BPF_CORE_READ(regs, bp);
	/* the frames without a frame pointer lie between sp and the frame at rbp */
	ob_u32 want = OB_HASHED;
	if (bp >= sp && bp - sp + 16 <= slice_len)
		want = (ob_u32)(bp - sp + 16);
	ob_u32 got = read_stack(sl->stack, want, sp);
	if (!got) {
		count_noslice();
		return;
	}
	ob_u64 h = 0xcbf29ce484222325ULL ^ ip;
	h = (h ^ sp) * 0x100000001b3ULL;
	h = (h ^ bp) * 0x100000001b3ULL;
	for (ob_u32 i = 0; i < OB_SLICE / 8; i++) {
		if (i * 8 + 8 > got)
			break;
		ob_u64 w = *(ob_u64 *)&sl->stack[i * 8];
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	if (!h)
		h = 1;
	struct ob_slice_key sk = { .tgid = k->tgid, .slice = h };
	k->slice = h;
	if (bpf_map_lookup_elem(&slices, &sk))
		return; /* kept already: the next waits at this place */
	sl->ip = ip;
	sl->sp = sp;
	sl->bp = bp;
	sl->pad = 0;
	sl->len = read_stack(sl->stack, slice_len, sp);
	bpf_map_update_elem(&slices, &sk, sl, BPF_ANY);
#else
	(void)k;
	(void)t;
#endif
}

static __always_inline int wanted(struct task_struct *t)
{
	if (mode == OB_CGROUP)
		return bpf_get_current_cgroup_id() == cgroup_id; /* current is prev */
	if (mode == OB_TGIDS) {
		ob_u32 tgid = BPF_CORE_READ(t, tgid);
		return bpf_map_lookup_elem(&tgids, &tgid) != 0;
	}
	return 1;
}

static __always_inline void switch_out(void *ctx, struct task_struct *prev, int preempt,
				       ob_u32 state, ob_u64 now)
{
	ob_u32 tid = BPF_CORE_READ(prev, pid);
	if (!tid)
		return; /* the idle task */
	/* TASK_DEAD, or an exit state: its last switch */
	if ((state & 0x80) || BPF_CORE_READ(prev, exit_state)) {
		bpf_map_delete_elem(&starts, &tid);
		return;
	}
	if (!wanted(prev))
		return;
	struct ob_start s = {};
	s.time = now;
	s.key.tgid = BPF_CORE_READ(prev, tgid);
	s.key.tid = tid;
	s.key.preempted = preempt || !(state & 0xff);
	s.key.ustack = s.key.kstack = -1;
	ob_u32 ep = epoch;
	s.key.epoch = ep;
	if (callchain)
		s.key.ustack = stack_id(ctx, ep, BPF_F_USER_STACK);
	if (callchain && s.key.ustack == -14 /* -EFAULT: no user part, a kernel thread */) {
		s.key.kernel = 1;
		s.key.kstack = stack_id(ctx, ep, 0);
		if (s.key.kstack < 0)
			s.key.ustack = s.key.kstack = -1;
	}
	if (callchain && s.key.ustack < 0 && !s.key.kernel)
		/* the stack map had no room (-EEXIST, -ENOMEM): one frame below */
		s.key.ustack = -1;
	if (slice_len && s.key.ustack >= 0)
		take_slice(&s.key, prev);
	if (callchain && s.key.ustack < 0 && s.key.kstack < 0) {
		/* counted: the session says how many waits kept one frame only */
		ob_u32 zero = 0;
		struct ob_stats *st = bpf_map_lookup_elem(&stats, &zero);
		if (st)
			st->nostack++;
	}
	if (s.key.ustack < 0 && s.key.kstack < 0) {
		/* the place that waited: one user frame, walked no further */
		ob_u64 ip = 0;
		if (bpf_get_stack(ctx, &ip, sizeof(ip), BPF_F_USER_STACK) <= 0 || !ip) {
			s.key.kernel = 1;
			if (bpf_get_stack(ctx, &ip, sizeof(ip), 0) <= 0)
				ip = 0;
		}
		s.key.ip = ip;
	}
	bpf_map_update_elem(&starts, &tid, &s, BPF_ANY);
}

static __always_inline void switch_in(struct task_struct *next, ob_u64 now)
{
	ob_u32 tid = BPF_CORE_READ(next, pid);
	if (!tid)
		return;
	struct ob_start *s = bpf_map_lookup_elem(&starts, &tid);
	if (!s)
		return;
	ob_u64 d = now > s->time ? now - s->time : 0;
	struct ob_key k = s->key;
	bpf_map_delete_elem(&starts, &tid);
	ob_u32 zero = 0;
	struct ob_stats *st = bpf_map_lookup_elem(&stats, &zero);
	if (d < min_ns || !d) {
		if (st) {
			st->dropped++;
			st->dropped_ns += d;
		}
		return;
	}
	struct ob_val *v = bpf_map_lookup_elem(&waits, &k);
	if (!v) {
		struct ob_val nv = { d, 1 };
		if (!bpf_map_update_elem(&waits, &k, &nv, BPF_NOEXIST))
			return;
		v = bpf_map_lookup_elem(&waits, &k); /* another CPU made it first */
	}
	if (v) {
		__sync_fetch_and_add(&v->ns, d);
		__sync_fetch_and_add(&v->count, 1);
	} else if (st) {
		st->lost++;
		st->lost_ns += d;
	}
}

/* (bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state) */
SEC("tp_btf/sched_switch")
int tally_switch(unsigned long long *ctx)
{
	if (!enabled)
		return 0;
	ob_u64 now = bpf_ktime_get_ns(); /* CLOCK_MONOTONIC, as the perf records' times */
	switch_out(ctx, (struct task_struct *)ctx[1], (int)(ctx[0] & 1), (ob_u32)ctx[3], now);
	switch_in((struct task_struct *)ctx[2], now);
	return 0;
}

/* (struct task_struct *parent, struct task_struct *child): what the target's
 * processes start is the target too, as with inherited perf events */
SEC("tp_btf/sched_process_fork")
int tally_fork(unsigned long long *ctx)
{
	if (mode != OB_TGIDS)
		return 0;
	struct task_struct *parent = (struct task_struct *)ctx[0],
			   *child = (struct task_struct *)ctx[1];
	ob_u32 pt = BPF_CORE_READ(parent, tgid), ct = BPF_CORE_READ(child, tgid);
	if (pt == ct || !bpf_map_lookup_elem(&tgids, &pt))
		return 0;
	ob_u32 one = 1;
	bpf_map_update_elem(&tgids, &ct, &one, BPF_ANY);
	return 0;
}
