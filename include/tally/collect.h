/* Sampling through perf_event_open: the event table, opening one event per CPU
 * (and per thread for attached processes), the mmap ring buffers, and handing
 * the records to the caller in time order. No symbolization, no I/O besides the
 * kernel interface. */
#ifndef TALLY_COLLECT_H
#define TALLY_COLLECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct perf_event_header;

struct tally_event_desc {
	const char *name;
	const char *alias; /* another accepted name, or NULL */
	uint32_t type;     /* PERF_TYPE_* */
	uint64_t config;
	bool time_based;   /* period counts nanoseconds: -F becomes a period we can randomize */
	const char *desc;
	/* off-CPU time from the sched:sched_switch tracepoint (docs/offcpu.md):
	 * TALLY_OFFCPU_BLOCKED opens it (config: the tracepoint's id, read at open),
	 * TALLY_OFFCPU_PREEMPTED opens nothing and takes the preempted intervals
	 * the first one finds; 0 for every other event */
	uint8_t offcpu;
};
enum { TALLY_OFFCPU_BLOCKED = 1, TALLY_OFFCPU_PREEMPTED = 2 };

extern const struct tally_event_desc tally_event_table[];
extern const size_t tally_event_table_len;

/* The event called name (or alias), or NULL. */
const struct tally_event_desc *tally_event_find(const char *name);
/* 0 when this machine can sample the event, else -errno with tally_seterr saying why
 * (hardware events without a PMU name cpu-clock as the alternative). */
int tally_event_probe(const struct tally_event_desc *ev);

enum tally_target { TALLY_TARGET_CHILD, TALLY_TARGET_PIDS, TALLY_TARGET_SYSTEM };

struct tally_collect_opts {
	const struct tally_event_desc *const *events;
	int nevents;
	uint64_t freq;   /* samples per second, or 0 when period is set */
	uint64_t period; /* events per sample, or 0 */
	bool randomize;
	bool callchain;  /* PERF_SAMPLE_CALLCHAIN */
	/* bytes of user stack to copy per sample (DWARF unwinding), 0 for none */
	uint32_t stack_user;
	uint32_t leaf_stack; /* with callchain and no stack_user: bytes of user stack (and the user
			      * registers) per sample, to find the caller a frame-pointer chain
			      * skips */
	/* ask the kernel for build-ids in MMAP2 records (see docs/sampling.md) */
	bool build_id_mmap;
	enum tally_target target;
	const pid_t *pids; /* TARGET_CHILD: one pid (not yet exec'd); TARGET_PIDS: processes */
	size_t npids;
	const bool *cpus;  /* which CPUs, ncpus entries */
	int ncpus;
	size_t ring_pages; /* data pages per ring buffer, a power of two (0 = default) */
	int wake_fd;       /* polled with the rings so a signal can end a wait; -1 for none */
	bool sideband_dummy; /* side-band records (mmap, comm, fork, exit) from a dummy event per CPU
			      * that stays on while sampling is paused or a CPU is switched off */
	/* TARGET_CHILD: instead of one inherited event per CPU on the child, per-CPU
	 * events scoped to the cgroup v2 directory open as cgroup_fd (the child
	 * already in it), so that a redrawn period reaches every task of the command */
	bool use_cgroup;
	int cgroup_fd;
	/* with an off-CPU event: intervals shorter than this (ns) are dropped, counted */
	uint64_t offcpu_min;
	int offcpu_mech; /* enum tally_offcpu_mech (offcpu.h): auto, bpf or tracepoint */
	int sample_mech; /* enum tally_sample_mech: how samples reach tally */
	/* bpf: whether a side-band record still in a ring asks for a round soon
	 * (docs/sampling.md, "Rounds"), called with prompt_ctx; NULL: every one */
	bool (*prompt)(void *ctx, const struct perf_event_header *h);
	void *prompt_ctx;
};

/* How samples reach tally (docs/sampling.md, "Counting in the kernel"): each
 * through the ring buffer (the default), or counted in the kernel by a BPF
 * program per (process, event, mode, address) and read every 4 seconds, or
 * sooner when side-band records come. bpf needs per-CPU events on every task
 * (the whole system), no call graph and at most 4 sampling events of the PMU
 * or software kinds; auto takes it where that holds and the program loads,
 * the ring elsewhere (the daemon's default). */
enum tally_sample_mech { TALLY_SAMPLE_RING, TALLY_SAMPLE_BPF, TALLY_SAMPLE_AUTO };
/* With bpf, the map is read, and the period redrawn, once a round: a caller's
 * wait when nothing else wakes it (side-band records, a full table, a flush, a
 * peek or a status ask for a round sooner). A round has a cost of its own (a
 * wake, a new period per fd, a scan of the tables), and a place's samples of
 * four seconds are one count to add: the longer the round, the less of both. */
#define TALLY_COUNTED_ROUND_MS 4000
int tally_sample_parse_mech(const char *s, enum tally_sample_mech *out);

/* A record as the caller sees it. For samples the parsed fields are set; for the
 * others raw points at the kernel record (struct perf_event_header first). */
struct tally_rec {
	const struct perf_event_header *raw;
	uint32_t type;
	uint16_t misc;
	int event;        /* index into opts.events for samples, -1 otherwise */
	uint32_t pid, tid, cpu;
	uint64_t time;
	uint64_t ip, period;
	/* what the sample stands for, in the event's unit (ns for time): the
	 * period really in effect (period can be stale), an off-CPU interval; 0:
	 * the period */
	uint64_t weight;
	/* samples this record stands for (off-CPU waits summed in the kernel); 0: one */
	uint64_t count;
	uint64_t nr;      /* callchain length */
	const uint64_t *chain;
	const uint64_t *regs; /* user registers (in the order of regs_mask's bits), or NULL */
	uint64_t nregs;
	uint64_t regs_mask;   /* which registers (perf's bits); 0: tally_unwind_regs_mask() */
	const uint8_t *stack; /* user stack copy from the sampled SP */
	uint64_t stack_len;
};

struct tally_collector;
typedef void (*tally_rec_fn)(void *ctx, const struct tally_rec *rec);

/* Opens every event fd and ring buffer. *out is owned by the caller (tally_collector_free).
 * Returns 0 or -errno with tally_seterr naming the event and the fix (privilege:
 * perf_event_paranoid / CAP_PERFMON; rate: perf_event_max_sample_rate). */
int tally_collector_open(struct tally_collector **out, const struct tally_collect_opts *opts);
/* Enables the events (TARGET_CHILD events enable themselves at exec). */
int tally_collector_enable(struct tally_collector *c);
int tally_collector_disable(struct tally_collector *c);
/* Collection on or off (sampling events only: with sideband_dummy processes stay
 * followed); applied now if enabled, else at tally_collector_enable. */
int tally_collector_pause(struct tally_collector *c, bool paused);
bool tally_collector_paused(const struct tally_collector *c);
/* Sampling on one CPU on or off (a CPU of opts.cpus). */
int tally_collector_cpu_set(struct tally_collector *c, int cpu, bool on);
/* A new rate for one CPU, for every event: freq (Hz) or period (events; ns for
 * time-based events), one of them 0. A fixed-period counting event takes only a
 * period, a kernel-adapted one only a frequency: -EINVAL with tally_seterr, and
 * nothing changed. */
int tally_collector_cpu_rate(struct tally_collector *c, int cpu, uint64_t freq, uint64_t period);
struct tally_cpu_state {
	bool opened;   /* in opts.cpus */
	bool on;       /* tally_collector_cpu_set */
	bool sampling; /* opened, on, enabled and not paused */
	uint64_t freq; /* the frequency asked (0 when set by a period) */
	/* the mean period of the first event there (0 in kernel-adapted frequency mode) */
	uint64_t period;
};
void tally_collector_cpu_state(const struct tally_collector *c, int cpu,
			       struct tally_cpu_state *st);

/* Waits up to timeout_ms for data, then reads every ring, sorts the records by
 * time and calls fn for each. Redraws randomized periods. Returns the number of
 * records, or -errno. -EINTR is returned as 0. */
int tally_collector_poll(struct tally_collector *c, int timeout_ms, tally_rec_fn fn, void *ctx);
/* Observed sample periods (for the session metadata and the randomization test).
 * This and the next two accept a NULL collector (nothing sampled: zeros), for
 * the session of an aggregate fed without one. */
void tally_collector_periods(const struct tally_collector *c, int event, uint64_t *min,
			     uint64_t *max, double *mean);
/* For time-based events: percentiles (ns) of the intervals between consecutive
 * samples of one thread on one CPU, i.e. the periods the timer really used.
 * Returns how many intervals were kept (0: none measured). */
size_t tally_collector_intervals(struct tally_collector *c, int event, uint64_t *p10, uint64_t *p50,
				 uint64_t *p90);
/* Which samples a randomized period reached: *total samples of the event, of
 * which *reached were taken by an event tally opened itself, so redraws (a
 * sample of a thread or child through an event it inherited is not). */
void tally_collector_random_samples(const struct tally_collector *c, int event, uint64_t *reached,
				    uint64_t *total);
/* How the events reach the tasks, for the session's "randomized-scope": a short
 * static phrase (docs/sampling.md). */
const char *tally_collector_scope(const struct tally_collector *c);
/* The period the randomizer centres on for an event (0 when the kernel adapts it). */
uint64_t tally_collector_mean_period(const struct tally_collector *c, int event);
void tally_collector_free(struct tally_collector *c);

struct tally_offcpu_stats;
/* The off-CPU counters (offcpu.h); all zero without an off-CPU event or collector.
 * Returns whether the collector records off-CPU time. */
bool tally_collector_offcpu_stats(const struct tally_collector *c, struct tally_offcpu_stats *st);

/* How off-CPU time is recorded: "bpf", "tracepoint", or NULL without it; *why
 * (may be NULL) says why auto chose the tracepoint, or NULL. */
const char *tally_collector_offcpu_mech(const struct tally_collector *c, const char **why);
/* The polls that read the rings (rounds), and those that only looked at the
 * records waiting there and left them for a later round (bpf; 0 otherwise);
 * *asked (may be NULL): the rounds that a record asking for one, the exec
 * watch or the second after either made (bpf). */
void tally_collector_rounds(const struct tally_collector *c, uint64_t *rounds, uint64_t *looks,
			    uint64_t *asked);
enum tally_sample_mech tally_collector_sample_mech(const struct tally_collector *c);
/* With bpf, the exec watch (docs/sampling.md, "Rounds"): whether it runs
 * (else *why says why not), how many execs it told of, and (*bursts) how
 * many bursts of execs of known programs (watch-bpf.h). */
bool tally_collector_watch(const struct tally_collector *c, uint64_t *told, uint64_t *bursts,
			   const char **why);
/* Asks the exec watch to tell of every start of the program in that file
 * (device major << 20 | minor, inode, generation): its processes make JIT
 * code, whose perf maps are read while they live. Nothing without a watch. */
void tally_collector_watch_program(struct tally_collector *c, uint32_t dev, uint64_t ino,
				   uint32_t gen);
/* The programs the exec watch told of are forgotten (the caller forgot their
 * images): each is told of again at its next start. */
void tally_collector_watch_forget(struct tally_collector *c);
/* "ring", "bpf" or "auto", as the option and the session name it. */
const char *tally_sample_mech_name(enum tally_sample_mech m);
/* Why auto took the ring (a static or collector-held string), or NULL. */
const char *tally_collector_sample_mech_why(const struct tally_collector *c);
/* 0 when --sample-mechanism bpf can count the samples o asks for, or -EINVAL
 * with why not. */
int tally_sample_bpf_fits(const struct tally_collect_opts *o);
/* With bpf: the samples that went through the ring because the table of
 * places was full, and how many times a full table was emptied. */
uint64_t tally_collector_sample_overflow(const struct tally_collector *c);
uint64_t tally_collector_sample_tables_emptied(const struct tally_collector *c);


/* The kernel.perf_event_paranoid setting, or 2 when unreadable. */
int tally_perf_paranoid(void);

#endif
