/* What the off-CPU BPF program (offcpu.bpf.c) and tally share: the key and
 * value of its map of waits, the record of a task off the CPU, and its
 * counters (docs/offcpu.md). Included by the BPF object and by offcpu_bpf.c. */
#ifndef TALLY_OFFCPU_BPF_H
#define TALLY_OFFCPU_BPF_H

#ifdef __bpf__
typedef __u8 ob_u8;
typedef __u32 ob_u32;
typedef __s32 ob_s32;
typedef __u64 ob_u64;
#else
#include <stdint.h>
typedef uint8_t ob_u8;
typedef uint32_t ob_u32;
typedef int32_t ob_s32;
typedef uint64_t ob_u64;
#endif

/* the deepest stack the stack map keeps (the kernel's PERF_MAX_STACK_DEPTH) */
#define OB_MAX_STACK 127

/* the room of each of the two stack maps (slots; a stack whose slot holds
 * another has no room) */
#define OB_STACKS 8192

/* Without call graphs (ustack, kstack -1) a wait is put at ip, its first user
 * frame, or at a kernel ip for a task with no user part (kernel set). The
 * stack ids are of the map of epoch's parity, as it was in that epoch. slice:
 * with frame-pointer call graphs, the top of the user stack the wait left in
 * the slices map (0: none), for tally to unwind the functions without a frame
 * pointer there with their CFI (lib/unwind/fprepair.c). */
struct ob_key {
	ob_u32 tgid, tid;
	ob_s32 ustack, kstack; /* stack map ids, -1: none */
	ob_u64 ip;
	ob_u32 preempted, kernel;
	ob_u32 epoch, pad;
	ob_u64 slice;
};

/* The top of a user stack at a switch-out: the registers the repair needs and
 * up to OB_SLICE bytes from sp. Kept once per (process, slice) in an LRU map
 * (OB_SLICES of them): slice is a hash of ip, sp, bp and the words from sp to
 * the frame rbp points at (where the frames without a frame pointer are, with
 * their return addresses), at most OB_HASHED bytes when rbp is no frame of
 * that stack; the waits of one place share it and aggregate as before. */
#define OB_SLICE 2048
#define OB_SLICES 4096
#define OB_HASHED 256
struct ob_slice_key {
	ob_u32 tgid, pad;
	ob_u64 slice;
};
struct ob_slice {
	ob_u64 ip, sp, bp;
	ob_u32 len, pad;
	ob_u8 stack[OB_SLICE];
};

struct ob_val {
	ob_u64 ns, count;
};

/* a task switched out, until it is switched in */
struct ob_start {
	ob_u64 time;
	struct ob_key key; /* tid and stacks of the switch-out */
};

/* per CPU, summed by tally */
struct ob_stats {
	ob_u64 dropped, dropped_ns; /* shorter than min_ns */
	ob_u64 lost, lost_ns;       /* no room in the map of waits */
	/* call graphs: waits whose stack the stack map had no room for (one frame kept) */
	ob_u64 nostack;
	/* frame-pointer call graphs: waits whose top of the stack could not be read */
	ob_u64 noslice;
};

/* how tasks are chosen */
enum { OB_ALL = 0, OB_CGROUP = 1, OB_TGIDS = 2 };

#endif
