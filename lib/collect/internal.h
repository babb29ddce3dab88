/* The collector's private interface: what the files of lib/collect share
 * behind include/tally/collect.h. Never included outside lib/collect (the
 * unit tests aside).
 *
 * A collector is perf event fds (evfd.c) writing into per-CPU rings
 * (ring.c), with periods it sets and redraws (period.c), and two
 * mechanisms behind one ops table (as perf's bpf_counter_ops): one that
 * brings the samples (mech_ring.c: every sample through the rings;
 * mech_counted.c: counted in the kernel by a BPF program) and, with an
 * off-CPU event, one that brings off-CPU time (mech_offcpu_tp.c: the
 * sched_switch tracepoint; mech_offcpu_bpf.c: a BPF program). A build
 * without BPF compiles mech_nobpf.c instead of the two BPF mechanisms. A
 * poll (poll.c) waits for the round rounds.c says, drains each mechanism,
 * merges their records with the rings' in time order and delivers them. */
#ifndef TALLY_COLLECT_INTERNAL_H
#define TALLY_COLLECT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "tally/collect.h"
#include "tally/offcpu.h"
#include "tally/util.h"
#include "period.h"
#include "ring.h"
#include "rounds.h"

struct perf_event_attr;
struct pollfd;

/* events.c */
/* perf_event_open(2) */
long collect_perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group,
		       unsigned long flags);
/* Whether events must leave the kernel out (unprivileged, paranoid >= 2). */
bool collect_exclude_kernel(void);
/* -e with tally_seterr: event ev could not be opened (where: "on CPU 1", "for pid 7"). */
int collect_open_error(const struct tally_event_desc *ev, int e, const char *where);
/* The side-band event (opts.sideband_dummy): no samples, the records of mmaps, comms and tasks. */
extern const struct tally_event_desc collect_dummy_desc;

/* CLOCK_MONOTONIC in ns: the clock of the samples' times. */
static inline uint64_t collect_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One perf event fd. */
struct evfd {
	int fd;
	int event; /* -1: the side-band (dummy) event */
	int cpu;
	uint64_t id;
	pid_t task;   /* the task it was opened on, -1 per CPU (all tasks, or a cgroup's) */
	bool on_exec; /* enabled by the kernel at the command's exec */
	bool mech_weighs; /* the sample mechanism weighs them: told each period (ops->period) */
	uint8_t kind; /* whose samples: FD_SAMPLE the sample mechanism's, FD_SWITCH_OUT off-CPU's */
	struct period_hist hist; /* the periods tally set on it */
};
enum { FD_SAMPLE, FD_SWITCH_OUT };

/* One poll that reads the rings: where its records go, and what it knows. */
struct round {
	/* every record of every mechanism reaches the caller through fn: a step
	 * per sample (e.g. on the user stack) goes in one place, here */
	tally_rec_fn fn;
	void *ctx;
	bool now;   /* the caller asked for it now (timeout 0): it takes everything counted */
	/* it takes every place counted in the kernel, not only those of the
	 * processes its records are of */
	bool full;
	bool alone; /* no record of the rings: a mechanism's own need no order */
	int err;    /* a mechanism's drain failed (-errno): returned after the round */
};

/* What a mechanism counted, for the session and the status (all zero where
 * it does not apply). */
struct mech_stats {
	uint64_t overflow;       /* counted samples that went through the ring (a full table) */
	uint64_t tables_emptied; /* full tables of places emptied */
	bool watch;              /* the exec watch runs (else watch_why says why not, or NULL) */
	const char *watch_why;
	uint64_t told, bursts;   /* starts it told of, bursts of starts */
	struct tally_offcpu_stats off;
};

struct mech;
/* A mechanism that brings samples or off-CPU time. Every member but name
 * and kind may be NULL (nothing to do). */
struct mech_ops {
	const char *name; /* as the session says it: "ring", "bpf", "tracepoint" */
	int kind;         /* enum tally_sample_mech or enum tally_offcpu_mech */
	/* samples counted in the kernel: the rings carry the side-band records
	 * only, each wakes the wait, and records wait in the rings between
	 * rounds (the rounds with looks of rounds.h) */
	bool counts;
	/* the attributes of its own perf event (the off-CPU event's); none: it
	 * opens none */
	void (*attr)(const struct tally_collector *c, const struct mech *m,
		     struct perf_event_attr *a);
	/* once the perf events are open: what it needs of them (a program on
	 * the sampling fds). 0, or -errno with tally_seterr */
	int (*attach)(struct tally_collector *c, struct mech *m);
	/* collection on (enabled and not paused) or off */
	void (*enable)(struct tally_collector *c, struct mech *m, bool on);
	/* collection stops (a pause, the end): what is still open is counted
	 * up to now at the next round */
	void (*pause)(struct tally_collector *c, struct mech *m);
	/* a round, before the rings are read: what it counted (first, so that
	 * every record its counts need is in the rings). 0 or -errno */
	int (*drain)(struct tally_collector *c, struct mech *m, struct round *rd);
	/* after the rings are read: its records among theirs (rings_put, rings_end_run) */
	void (*stage)(struct tally_collector *c, struct mech *m, struct round *rd);
	/* a record of its own staged among the rings' (type >= MECH_REC_OWN) */
	void (*own)(struct tally_collector *c, struct mech *m, struct round *rd,
		    const struct perf_event_header *h);
	/* a sample of one of its fds: r has the sample's fixed fields, p..end
	 * the rest of the record. Delivers what it stands for to rd->fn */
	void (*sample)(struct tally_collector *c, struct mech *m, struct round *rd, struct evfd *f,
		       struct tally_rec *r, const uint64_t *p, const uint64_t *end);
	/* a side-band record (exit, switch), before the caller has it */
	void (*sideband)(struct tally_collector *c, struct mech *m, struct round *rd,
			 const struct tally_rec *r);
	/* after the round's records */
	void (*finish)(struct tally_collector *c, struct mech *m, struct round *rd);
	/* a descriptor of its own the wait watches besides the rings (-1: none),
	 * and what it told when it woke the wait: starts of programs tally
	 * must look at, *bursts of starts */
	int (*wake_fd)(const struct mech *m);
	unsigned (*woke)(struct mech *m, unsigned *bursts);
	/* the rings were looked at or read */
	void (*looked)(struct tally_collector *c, struct mech *m);
	/* fd f's period is now p (an fd it weighs: mech_weighs) */
	void (*period)(struct tally_collector *c, struct mech *m, const struct evfd *f, uint64_t p);
	/* the exec watch: tell of each start of this program; forget what it told of */
	void (*watch_program)(struct mech *m, uint32_t dev, uint64_t ino, uint32_t gen);
	void (*watch_forget)(struct mech *m);
	void (*stats)(const struct tally_collector *c, const struct mech *m, struct mech_stats *st);
	void (*free)(struct mech *m);
};

/* Each mechanism's state begins with this. */
struct mech {
	const struct mech_ops *ops;
};

/* The type of the records a mechanism stages among the rings' (above the kernel's). */
#define MECH_REC_OWN 0x7c00

/* The off-CPU mechanisms' shared part: the intervals (offcpu.h). */
struct offcpu_mech {
	struct mech m;
	struct tally_offcpu *off;
	bool flush;    /* count the tasks still off up to the last record at the next round */
	uint64_t stop; /* when collection stopped (CLOCK_MONOTONIC ns), 0: never */
};

struct tally_collector {
	struct tally_collect_opts o;
	struct evfd *fds;
	size_t nfds, afds;
	struct tally_hidx ids; /* sample id -> fds index */
	struct rings rings;
	struct periods per;
	struct rounds rounds;
	struct mech *samples;  /* how samples reach tally */
	struct mech *offcpu;   /* with an off-CPU event: how its time does, else NULL */
	char sample_why[256];  /* why auto took the ring, or "" */
	const char *off_why;   /* why auto took the tracepoint (static), or NULL */
	int off_ev, pre_ev;    /* the off-cpu and off-cpu-preempted events, -1 for none */
	bool *cpu_on;          /* per cpu: sampling wanted there (tally_collector_cpu_set) */
	bool paused;           /* tally_collector_pause */
	bool enabled;          /* tally_collector_enable was called */
	uint64_t max_time;     /* the latest record time seen */
	struct pollfd *pfd;    /* the wait's fds, kept from round to round */
	size_t apfd;
};

/* evfd.c */
/* Opens the events of opts.cpus and opts.target, each CPU's ring with the
 * first. 0, or -errno with tally_seterr. */
int evfds_open(struct tally_collector *c);
void evfds_close(struct tally_collector *c);
/* The fd of sample id, or NULL. */
struct evfd *evfds_find(const struct tally_collector *c, uint64_t id);
/* Applies what is wanted (on CPU, not paused) to every fd (cpu < 0) or to one CPU's. */
int evfds_apply(struct tally_collector *c, int cpu);
/* Enables every fd but those the kernel enables at the command's exec
 * (all: every one), or disables every one. */
int evfds_switch(struct tally_collector *c, bool on, bool all);
/* A fixed period on f, remembered from now on. 0 or -errno. */
int evfds_set_period(struct tally_collector *c, struct evfd *f, uint64_t p);
/* New periods drawn for every fd with a fixed one. */
void evfds_redraw(struct tally_collector *c);

/* mech_ring.c: samples through the rings */
struct mech *mech_ring_new(void);
/* A sample of the rings on f (any mechanism's, when the kernel counts only
 * some of them): its call chain, registers, stack and weight, to rd->fn. */
void mech_ring_sample(struct tally_collector *c, struct mech *m, struct round *rd, struct evfd *f,
		      struct tally_rec *r, const uint64_t *p, const uint64_t *end);
/* The user registers the samples carry: every one the CFI may use for DWARF
 * unwinding, ip, sp and bp for the frame-pointer repair (unwind.h). */
uint64_t collect_regs_mask(const struct tally_collector *c);
/* The user registers (of mask) and stack copy of a sample at p..end into r. */
void mech_user_regs_stack(const uint64_t *p, const uint64_t *end, uint64_t mask,
			  struct tally_rec *r);

/* mech_counted.c (mech_nobpf.c without BPF): samples counted in the kernel.
 * 0 with *out set, or (not asked: auto) with *out NULL and c->sample_why
 * saying why; -errno with tally_seterr when it was asked and cannot be. */
int mech_counted_open(struct tally_collector *c, bool asked, struct mech **out);

/* mech_offcpu_tp.c: off-CPU time from the sched_switch tracepoint */
int mech_offcpu_tp_open(struct tally_collector *c, struct mech **out);
/* The part the off-CPU mechanisms share. */
void offcpu_mech_init(struct tally_collector *c, struct offcpu_mech *o, const struct mech_ops *ops);
void offcpu_mech_pause(struct tally_collector *c, struct mech *m);
void offcpu_mech_stats(const struct tally_collector *c, const struct mech *m,
		       struct mech_stats *st);
void offcpu_mech_release(struct offcpu_mech *o);

/* mech_offcpu_bpf.c (mech_nobpf.c without BPF): off-CPU time from the BPF
 * program. As mech_counted_open, with c->off_why. */
int mech_offcpu_bpf_open(struct tally_collector *c, bool asked, struct mech **out);

/* The statistics of m (zeros for NULL). */
void mech_stats(const struct tally_collector *c, const struct mech *m, struct mech_stats *st);
void mech_free(struct mech *m);

#endif
