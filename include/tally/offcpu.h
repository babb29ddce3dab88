/* Off-CPU time from the sched:sched_switch tracepoint (docs/offcpu.md): the
 * tracepoint's format read from tracefs, and the state machine that turns
 * switches into off-CPU intervals. A task switched out leaves its stack and
 * the time; its next switch-in (on any CPU) delivers one sample of the off-cpu
 * event (blocked) or of off-cpu-preempted (switched out while runnable) with
 * that stack and weight = the interval in nanoseconds. The collector
 * (lib/collect/mech_offcpu_tp.c) feeds it; the state machine itself needs no kernel, so
 * it is tested on its own. */
#ifndef TALLY_OFFCPU_H
#define TALLY_OFFCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/collect.h"

/* Where the fields of a sched_switch record's raw data are. */
struct tally_offcpu_fmt {
	uint64_t id; /* the tracepoint's id (perf_event_attr.config) */
	uint32_t prev_pid_off, prev_state_off, next_pid_off;
	uint32_t prev_state_size; /* 4 or 8 */
	uint32_t min_size;        /* the raw data must hold this many bytes */
};

/* Reads sched/sched_switch's id and format from tracefs (/sys/kernel/tracing,
 * else /sys/kernel/debug/tracing; when neither is there, may_mount and we may,
 * tracefs is mounted on /sys/kernel/tracing, as perf does: a recording does,
 * a probe of what is available never). 0, or -errno with tally_seterr
 * naming the file and the fix. */
int tally_offcpu_format(struct tally_offcpu_fmt *f, bool may_mount);
/* Parses a format file's text into *f (id included). 0 or -EINVAL with tally_seterr. */
int tally_offcpu_parse_format(const char *text, struct tally_offcpu_fmt *f);

/* One switch, as read from the raw data. */
struct tally_switch {
	int32_t prev_pid, next_pid; /* thread ids */
	int64_t prev_state;
};
/* 0, or -EINVAL when raw (len bytes) is too short for f. */
int tally_offcpu_parse_raw(const struct tally_offcpu_fmt *f, const void *raw, size_t len,
			   struct tally_switch *sw);

/* The kind of wait a switch-out's prev_state says (the tracepoint's report
 * bits: 0x100 preempted, 0x10/0x20 the task is dying). */
enum tally_wait { TALLY_WAIT_BLOCKED, TALLY_WAIT_PREEMPTED, TALLY_WAIT_EXIT };
enum tally_wait tally_offcpu_wait_kind(int64_t prev_state);

struct tally_offcpu_stats {
	uint64_t waits[2];   /* delivered: blocked, preempted */
	uint64_t ns[2];      /* their summed time */
	uint64_t dropped;    /* shorter than the minimum */
	uint64_t dropped_ns;
	/* switch-ins of a task whose switch-out was not seen (it went off before the recording) */
	uint64_t unmatched;
	uint64_t pending;    /* tasks off the CPU right now */
	uint64_t lost;       /* BPF: waits that found no room in the kernel's map */
	uint64_t lost_ns;
	/* BPF with call graphs: waits whose stack found no room in the kernel's stack map (one
	 * frame kept) */
	uint64_t nostack;
	/* BPF with call graphs: times the stack maps turned over (the full one emptied) */
	uint64_t turnovers;
	/* BPF with -g: waits whose top of the stack was not kept (no repair) */
	uint64_t noslice;
};

struct tally_offcpu;

/* ev_blocked / ev_preempted: the event indices to deliver to (ev_preempted < 0:
 * preempted intervals are delivered as ev_blocked). min_ns: shorter intervals
 * are dropped (counted). The caller owns the result (tally_offcpu_free). */
struct tally_offcpu *tally_offcpu_new(int ev_blocked, int ev_preempted, uint64_t min_ns);
void tally_offcpu_free(struct tally_offcpu *o);

/* A task switches out: s is the sched_switch sample of that task (pid, tid,
 * time, cpu, ip, chain, regs, stack; copied). */
void tally_offcpu_out(struct tally_offcpu *o, const struct tally_rec *s, int64_t prev_state);
/* Task tid is switched in at time on cpu: delivers its interval to fn when its
 * switch-out was seen. */
void tally_offcpu_in(struct tally_offcpu *o, uint32_t tid, uint64_t time, uint32_t cpu,
		     tally_rec_fn fn, void *ctx);
/* Task tid ended: whatever it had pending is forgotten. */
void tally_offcpu_exit(struct tally_offcpu *o, uint32_t tid);
/* Every task still off the CPU is counted up to time (the end of the
 * recording, or a pause), then forgotten. */
void tally_offcpu_flush(struct tally_offcpu *o, uint64_t time, tally_rec_fn fn, void *ctx);
void tally_offcpu_stats(const struct tally_offcpu *o, struct tally_offcpu_stats *st);
/* The tasks the table holds (live and not yet dropped), for the tests. */
size_t tally_offcpu_slots(const struct tally_offcpu *o);

/* The mechanism that records off-CPU time (--off-cpu-mechanism). */
enum tally_offcpu_mech { TALLY_OFFCPU_AUTO, TALLY_OFFCPU_BPF, TALLY_OFFCPU_TRACEPOINT };
/* "auto", "bpf" or "tracepoint": 0, or -EINVAL with tally_seterr. */
int tally_offcpu_parse_mech(const char *s, enum tally_offcpu_mech *out);

/* One entry of the BPF program's map of waits (offcpu_bpf.c): the waits of
 * one task at one stack, of one kind, summed in the kernel. ips: the stack,
 * innermost first (one ip without call graphs); kernel: a task with no user
 * part, put at a kernel address; chain: deliver ips as the call chain. */
struct tally_offcpu_entry {
	uint32_t tgid, tid;
	bool preempted, kernel, chain;
	uint64_t ns, count;
	const uint64_t *ips;
	size_t nips;
	/* with a chain, the top of the user stack at the switch-out (the BPF
	 * program's slice), for the repair of frame pointers with CFI:
	 * registers bp, sp, ip (tally_unwind_fp_regs_mask), NULL: none */
	const uint64_t *regs;
	const uint8_t *stack;
	size_t stack_len;
};
/* Delivers e to fn as one sample of the off-cpu (or off-cpu-preempted) event
 * that stands for e->count waits and weighs e->ns, at time (a time the
 * task's maps are still known), and counts it as tally_offcpu_in would. An
 * entry with no waits or no ip is counted as dropped. */
void tally_offcpu_add(struct tally_offcpu *o, const struct tally_offcpu_entry *e, uint64_t time,
		      tally_rec_fn fn, void *ctx);
/* The kernel's own counters (cumulative; dropped, lost and nostack of k):
 * waits under the minimum, waits lost for lack of room, stacks the stack map
 * had no room for. */
void tally_offcpu_kernel_counts(struct tally_offcpu *o, const struct tally_offcpu_stats *k);

/* The BPF mechanism (offcpu_bpf.c; absent from a build without libbpf). */
struct tally_offcpu_bpf;
enum { TALLY_OFFCPU_BPF_ALL, TALLY_OFFCPU_BPF_CGROUP, TALLY_OFFCPU_BPF_TGIDS };
struct tally_offcpu_bpf_opts {
	/* which tasks: every one, a cgroup's, processes (and what they start) */
	int mode;
	uint64_t cgroup_id;  /* TALLY_OFFCPU_BPF_CGROUP */
	const int *tgids;    /* TALLY_OFFCPU_BPF_TGIDS */
	size_t ntgids;
	uint64_t min_ns;
	bool callchain;
	/* with callchain: bytes of user stack per place for the repair (0: none) */
	uint32_t slice_len;
};
/* Loads and attaches the program (disabled until tally_offcpu_bpf_enable).
 * The caller owns *out (tally_offcpu_bpf_free). 0, or -errno with tally_seterr
 * saying why (-ENOTSUP: tally was built without it). */
int tally_offcpu_bpf_open(struct tally_offcpu_bpf **out, const struct tally_offcpu_bpf_opts *opts);
void tally_offcpu_bpf_enable(struct tally_offcpu_bpf *b, bool on);
/* Reads and clears the map of waits, each entry through tally_offcpu_add at
 * time; flush: the tasks still off the CPU are counted up to end and
 * forgotten too. Returns the number of entries or -errno. */
int tally_offcpu_bpf_drain(struct tally_offcpu_bpf *b, struct tally_offcpu *o, uint64_t time,
			   bool flush, uint64_t end, tally_rec_fn fn, void *ctx);
void tally_offcpu_bpf_free(struct tally_offcpu_bpf *b);

#endif
