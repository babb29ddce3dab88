/* perf_event_open plumbing: event table, per-CPU ring buffers, time-ordered
 * delivery of records, and period randomization (see docs/sampling.md). */
#define _GNU_SOURCE
#include "tally/collect.h"
#include "tally/offcpu.h"
#include "tally/unwind.h"
#include "tally/util.h"
#include "sample-bpf.h"
#include "watch-bpf.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SW(n, a, c, t, d) { n, a, PERF_TYPE_SOFTWARE, c, t, d, 0 }
#define HW(n, a, c, d) { n, a, PERF_TYPE_HARDWARE, c, false, d, 0 }

const struct tally_event_desc tally_event_table[] = {
	SW("cpu-clock", NULL, PERF_COUNT_SW_CPU_CLOCK, true, "CPU time, from a high-resolution timer per CPU (the default)"),
	SW("task-clock", NULL, PERF_COUNT_SW_TASK_CLOCK, true, "CPU time of the profiled tasks only"),
	SW("page-faults", "faults", PERF_COUNT_SW_PAGE_FAULTS, false, "page faults, minor and major"),
	SW("minor-faults", NULL, PERF_COUNT_SW_PAGE_FAULTS_MIN, false, "page faults served without I/O"),
	SW("major-faults", NULL, PERF_COUNT_SW_PAGE_FAULTS_MAJ, false, "page faults that needed I/O"),
	SW("context-switches", "cs", PERF_COUNT_SW_CONTEXT_SWITCHES, false, "context switches"),
	SW("cpu-migrations", "migrations", PERF_COUNT_SW_CPU_MIGRATIONS, false, "moves of a task to another CPU"),
	SW("alignment-faults", NULL, PERF_COUNT_SW_ALIGNMENT_FAULTS, false, "unaligned accesses fixed up by the kernel"),
	SW("emulation-faults", NULL, PERF_COUNT_SW_EMULATION_FAULTS, false, "instructions emulated by the kernel"),
	HW("cycles", "cpu-cycles", PERF_COUNT_HW_CPU_CYCLES, "CPU cycles (hardware PMU)"),
	HW("instructions", NULL, PERF_COUNT_HW_INSTRUCTIONS, "instructions retired (hardware PMU)"),
	HW("cache-references", NULL, PERF_COUNT_HW_CACHE_REFERENCES, "last-level cache accesses (hardware PMU)"),
	HW("cache-misses", NULL, PERF_COUNT_HW_CACHE_MISSES, "last-level cache misses (hardware PMU)"),
	HW("branches", "branch-instructions", PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "branch instructions retired (hardware PMU)"),
	HW("branch-misses", NULL, PERF_COUNT_HW_BRANCH_MISSES, "mispredicted branches (hardware PMU)"),
	HW("bus-cycles", NULL, PERF_COUNT_HW_BUS_CYCLES, "bus cycles (hardware PMU)"),
	HW("stalled-cycles-frontend", NULL, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND, "cycles stalled in the front end (hardware PMU)"),
	HW("stalled-cycles-backend", NULL, PERF_COUNT_HW_STALLED_CYCLES_BACKEND, "cycles stalled in the back end (hardware PMU)"),
	HW("ref-cycles", NULL, PERF_COUNT_HW_REF_CPU_CYCLES, "reference cycles, unaffected by frequency scaling (hardware PMU)"),
	{ "off-cpu", NULL, PERF_TYPE_TRACEPOINT, 0, false,
	  "time blocked off the CPU (sleeping, waiting), per stack, from sched:sched_switch (--off-cpu)", TALLY_OFFCPU_BLOCKED },
	{ "off-cpu-preempted", NULL, PERF_TYPE_TRACEPOINT, 0, false,
	  "time runnable but preempted, recorded with off-cpu", TALLY_OFFCPU_PREEMPTED },
};
const size_t tally_event_table_len = ARRAY_SIZE(tally_event_table);

const struct tally_event_desc *tally_event_find(const char *name)
{
	for (size_t i = 0; i < tally_event_table_len; i++) {
		const struct tally_event_desc *e = &tally_event_table[i];
		if (!strcmp(e->name, name) || (e->alias && !strcmp(e->alias, name)))
			return e;
	}
	return NULL;
}

static long sys_perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group, unsigned long flags)
{
	return syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

int tally_perf_paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	int v = 2;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 2;
		fclose(f);
	}
	return v;
}

static bool exclude_kernel_needed(void)
{
	/* like perf: unprivileged users at paranoid >= 2 may only sample user space */
	return geteuid() != 0 && tally_perf_paranoid() >= 2;
}

static int open_error(const struct tally_event_desc *ev, int e, const char *where)
{
	if (ev->type == PERF_TYPE_HARDWARE && (e == ENOENT || e == EOPNOTSUPP || e == ENODEV || e == EINVAL))
		return tally_seterr(-e, "cannot sample event '%s': this machine has no hardware PMU for it (use -e cpu-clock, or see 'tally events')",
				    ev->name);
	if (e == EACCES || e == EPERM)
		return tally_seterr(-e, "permission denied opening event '%s' %s: kernel.perf_event_paranoid is %d (run as root, grant CAP_PERFMON, or lower it with 'sysctl kernel.perf_event_paranoid=-1')",
				    ev->name, where, tally_perf_paranoid());
	if (e == ESRCH)
		return tally_seterr(-e, "cannot attach to %s: no such process", where);
	if (e == EMFILE)
		return tally_seterr(-e, "cannot open event '%s' %s: too many open files (raise 'ulimit -n')", ev->name, where);
	return tally_seterr(-e, "cannot open event '%s' %s: %s", ev->name, where, strerror(e));
}

int tally_event_probe(const struct tally_event_desc *ev)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = ev->type;
	a.config = ev->config;
	if (ev->offcpu) {
		/* a probe changes nothing: tracefs not mounted yet is mounted by the
		 * recording itself (as root), which opens the event then */
		struct tally_offcpu_fmt f;
		int r = tally_offcpu_format(&f, false);
		if (r == -ENOENT && geteuid() == 0)
			return 0;
		if (r)
			return r;
		a.config = f.id;
	}
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	long fd = sys_perf_event_open(&a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return open_error(ev, errno, "for this process");
	close((int)fd);
	return 0;
}

/* Counted samples (docs/sampling.md, "Rounds"): a round asked for comes at
 * least this long after the last round or look, and so does a look */
#define COUNTED_MIN_GAP_S 0.2
/* with the exec watch, looks that find nothing asking are spaced out, up to
 * this: a program new to tally is told of at its exec, and what is left to
 * the looks is a library new to tally mapped by a program it knows */
#define COUNTED_LOOK_MAX_S 1.0
/* and a round at least this long after the last while records wait (short
 * processes of programs already seen: their records wait in the rings, a
 * quarter of which holds a thousand or so) */
#define COUNTED_CALM_S (TALLY_COUNTED_ROUND_MS / 1000.0)

struct ring {
	int fd;     /* the fd whose buffer this is */
	void *base; /* metadata page, then data */
	size_t size;
	int cpu;
	uint64_t peeked; /* bpf: records before this position were looked at, not read */
};

/* A period tally set on an event, and from when (CLOCK_MONOTONIC ns, the
 * clock of the samples' times: 0 for the one it was opened with). */
struct period_change {
	uint64_t since, period;
	/* a per-CPU timer event: its count (ns) when the change was made, or
	 * UINT64_MAX; the kernel starts the new period afresh, so the time since
	 * the last sample before the change goes to the first sample after it */
	uint64_t count;
	bool carried;
};
#define PERIOD_HISTORY 4

struct evfd {
	int fd;
	int event; /* -1: the side-band (dummy) event */
	int cpu;
	uint64_t id;
	pid_t task; /* the task it was opened on, -1 for per-CPU events (all tasks, or a cgroup's) */
	bool on_exec; /* enabled by the kernel at the command's exec */
	uint8_t kind; /* FD_SWITCH_OUT: sched_switch, the target's switch-outs */
	/* the periods tally set on it, newest last: a sample's weight is the one in
	 * effect at its time (samples taken before a change may still be in the
	 * ring when it is made); 0 changes: a period the kernel adapts (-F) */
	struct period_change chg[PERIOD_HISTORY];
	unsigned nchg;
	uint64_t weighed; /* the weights of its samples so far (per-CPU timer events) */
};
enum { FD_SAMPLE, FD_SWITCH_OUT };

struct period_stats {
	uint64_t min, max, n;
	uint64_t reached; /* samples taken by an event tally redraws (not one inherited by a later task) */
	double sum;
	/* intervals between consecutive samples of one thread on one CPU: what the
	 * timer really did (the sample's period field keeps the opening value) */
	uint64_t ivals[4096];
	size_t nivals;
	uint64_t seen_ivals;
};

struct last_sample {
	uint64_t time;
	uint32_t tid;
};

struct tally_collector {
	struct tally_collect_opts o;
	struct evfd *fds;
	size_t nfds, afds;
	struct ring *rings;
	size_t nrings, arings;
	struct tally_hidx ids; /* sample id -> fds index */
	uint64_t *mean_period; /* per event, 0 when in freq mode */
	uint64_t *mean_cpu;    /* per (cpu, event): the period now asked of that CPU (0: freq mode) */
	uint64_t *freq_cpu;    /* per cpu: the frequency of freq-mode events there */
	bool *cpu_on;          /* per cpu: sampling wanted there (tally_collector_cpu_set) */
	bool paused;           /* tally_collector_pause */
	bool enabled;          /* tally_collector_enable was called */
	struct period_stats *ps;
	struct last_sample *last; /* per (cpu, event) */
	size_t pagesz, data_size;
	char *stage;
	size_t stage_len, stage_alloc;
	struct recref { uint64_t time; size_t off; } *refs, *tmp;
	size_t nrefs, arefs, atmp;
	size_t *runs; /* start of each ring's records in refs: each run is in time order */
	size_t nruns, aruns;
	struct pollfd *pfd; /* the wait's fds, kept from round to round */
	size_t apfd;
	double last_redraw;
	uint64_t rng;
	size_t sample_trailer; /* bytes of sample_id at the end of non-sample records */
	/* off-CPU (docs/offcpu.md) */
	int off_ev;                  /* index of the off-cpu event, -1 for none */
	struct tally_offcpu_fmt ofmt;
	struct tally_offcpu *off;
	bool off_flush;              /* count the tasks still off up to now at the next poll */
	uint64_t max_time;           /* the latest record time seen */
	struct tally_offcpu_bpf *bpf; /* off-CPU time from the BPF program instead of the tracepoint */
	const char *off_why;         /* why auto took the tracepoint (static), or NULL */
	uint64_t off_stop;           /* when it was stopped or paused (CLOCK_MONOTONIC ns) */
	/* samples counted in the kernel (sample-bpf.h, docs/sampling.md) */
	struct tally_sample_bpf *sbpf;
	uint64_t *sb_seen;           /* per slot: the intervals already taken from it */
	char sb_why[256];            /* why auto took the ring, or "" */
	double last_round;           /* when the last poll read the rings (bpf: rounds 200 ms apart at least) */
	double sb_busy_until;        /* bpf: rounds every 200 ms until then (a record asked for a round soon) */
	double last_look;            /* bpf: when records waiting in the rings were last looked at */
	bool sb_asked;               /* bpf: a look found a record that asks for a round (the next round knows) */
	/* bpf: the exec watch (watch-bpf.h), or NULL (watch_why says why): while
	 * it tells of the programs new to tally, the looks back off from 200 ms
	 * to a second when they find nothing that asks */
	struct tally_watch_bpf *watch;
	char watch_why[256];
	double look_gap;             /* bpf: from the last round or look to the next look, s */
	double fill_s;               /* bpf: at the last look, how soon a ring would be full, s */
	uint64_t watch_told;         /* execs the watch told of (those tally took) */
	uint64_t watch_bursts;       /* bursts of execs it told of (watch_mark) */
	uint64_t burst_execs;        /* execs that make a burst: their records could fill half a ring */
	uint64_t rounds, looks;      /* polls that read the rings, and (bpf) those that only looked */
	uint64_t rounds_asked;       /* bpf: rounds a record, the exec watch or the second after one asked for */
	bool round_asked;            /* bpf: the round counted_wait let through is one of those */
	char *peek_buf;              /* bpf: a record that wraps around the end of its ring, copied whole */
	double sb_last_full;         /* bpf: when the last round took every place that counted */
	uint32_t *sb_pids;           /* bpf: the processes whose places a round takes (sorted) */
	size_t nsb_pids, asb_pids;
	uint32_t *sb_exited;         /* bpf: processes that ended since the last full round */
	size_t nsb_exited, asb_exited;
	bool *sb_taken;              /* bpf: per entry of the drain, taken this round */
	size_t asb_taken;
	double redraw_s;             /* seconds between two redraws of the periods */
};

/* A sample count read from the BPF map, staged with the ring records and
 * delivered in time order among them (at the time of its last sample). */
#define TALLY_REC_COUNTED 0x7c01
struct counted_rec {
	struct perf_event_header h;
	uint32_t tgid;
	uint16_t event, kernel;
	uint64_t ip, count, weight, time;
};

static bool id_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_collector *c = ctx;
	return c->fds[idx].id == *(const uint64_t *)key;
}

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: enough for drawing periods, cheap and without global state */
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t draw_period(struct tally_collector *c, uint64_t mean)
{
	/* uniform in [mean - mean/8, mean + mean/8]: mean unchanged, phase decorrelated */
	uint64_t span = mean / 4;
	if (span < 2)
		return mean;
	return mean - mean / 8 + rng_next(&c->rng) % (span + 1);
}

/* n samples of summed weight w, each w/n on average: the period statistics
 * (reached: taken by an event whose period tally sets) */
static void period_stats_add(struct period_stats *s, uint64_t w, uint64_t n, bool reached)
{
	uint64_t each = w / n;
	if (each < s->min)
		s->min = each;
	if (each > s->max)
		s->max = each;
	s->n += n;
	if (reached)
		s->reached += n;
	s->sum += (double)w;
}

/* One interval between back-to-back samples of a thread, into the reservoir
 * the percentiles are taken from. */
static void keep_interval(struct tally_collector *c, struct period_stats *s, uint64_t d)
{
	s->seen_ivals++;
	if (s->nivals < ARRAY_SIZE(s->ivals)) {
		s->ivals[s->nivals++] = d;
	} else {
		uint64_t j = rng_next(&c->rng) % s->seen_ivals;
		if (j < ARRAY_SIZE(s->ivals))
			s->ivals[j] = d;
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The slot through which the BPF program weighs the samples of a per-CPU
 * timer event with the period tally set (NULL: none, the ring's samples). */
static struct sb_slot *sample_slot(const struct tally_collector *c, const struct evfd *f)
{
#ifdef TALLY_HAVE_BPF
	if (c->sbpf && f->task < 0 && f->event >= 0 && c->o.events[f->event]->time_based)
		return tally_sample_bpf_slot(c->sbpf, f->cpu, f->event);
#else
	(void)c, (void)f;
#endif
	return NULL;
}

/* Sets a fixed period on an fd and remembers from when it holds. */
static int set_period(const struct tally_collector *c, struct evfd *f, uint64_t p)
{
	/* a per-CPU timer event counts the nanoseconds its tasks ran: what it
	 * counted before the change tells how much of the last period was cut */
	uint64_t count = UINT64_MAX;
	struct sb_slot *slot = sample_slot(c, f);
	if (!slot && f->task < 0 && f->event >= 0 && c->o.events[f->event]->time_based &&
	    read(f->fd, &count, sizeof count) != sizeof count)
		count = UINT64_MAX;
	if (ioctl(f->fd, PERF_EVENT_IOC_PERIOD, &p) < 0)
		return -errno;
	if (slot) {
		/* the program weighs the samples: the new period, and the part of
		 * the old one the change cut, the time since the last sample there
		 * (a per-CPU clock counts all of it), without a read of the count
		 * (each one an interrupt of that CPU) */
		uint64_t prev = __atomic_load_n(&slot->period, __ATOMIC_RELAXED);
		uint64_t last = __atomic_load_n(&slot->last_time, __ATOMIC_RELAXED);
		uint64_t now = mono_ns();
		__atomic_store_n(&slot->period, p, __ATOMIC_RELAXED);
		if (prev && last && now > last && now - last < 2 * prev)
			__atomic_fetch_add(&slot->carry, now - last, __ATOMIC_RELAXED);
	}
	/* the time after the change: a sample before it had the old period, and
	 * the new one cannot fire sooner than one period after the change */
	if (f->nchg == PERIOD_HISTORY) {
		memmove(&f->chg[0], &f->chg[1], (PERIOD_HISTORY - 1) * sizeof(f->chg[0]));
		f->nchg--;
	}
	/* a sample the ring still gets (the BPF map was full) carries nothing */
	f->chg[f->nchg++] = (struct period_change){ mono_ns(), p, count, slot != NULL };
	return 0;
}

/* The weight of a sample on f at time t: the period in effect then (0: none
 * tally set), and for the first sample after a change of a per-CPU timer
 * event, the part of the period the change cut short. */
static uint64_t period_at(struct evfd *f, uint64_t t)
{
	for (unsigned i = f->nchg; i-- > 0;) {
		struct period_change *ch = &f->chg[i];
		if (ch->since > t && i)
			continue;
		uint64_t w = ch->period;
		if (!ch->carried) {
			/* every sample before the change was delivered: the time between
			 * the last of them and the change was counted, never sampled.  A
			 * task that ran on this CPU only now and then (a busy machine)
			 * may see several changes between two samples: each cut the
			 * period then running, so up to three periods of each change
			 * not carried yet are this one's to carry (a period and a late
			 * timer's overrun, seen up to 2.6 ms of a 1.1 ms period) */
			uint64_t bound = 0;
			for (unsigned j = i + 1; j-- > 0 && !f->chg[j].carried;) {
				f->chg[j].carried = true;
				bound += 3 * (j ? f->chg[j - 1].period : f->chg[j].period);
			}
			if (ch->count != UINT64_MAX) {
				if (ch->count > f->weighed && ch->count - f->weighed < bound)
					w += ch->count - f->weighed;
				else
					/* not carried (more than the changes could cut: a
					 * sample lost): the count up to the change is taken
					 * as weighed, or every later change would look too
					 * long too, and its cut be lost as well (1.2% of a
					 * busy machine's CPU time went so) */
					f->weighed = ch->count;
			}
		}
		return w;
	}
	return 0;
}

/* Whether event ev of a TARGET_CHILD collector is opened on the command's
 * cgroup: the events whose period tally fixes (and redraws); a period the
 * kernel adapts stays on the command's own task events, enabled at its exec,
 * so that tally's child before the exec does not train it. */
static bool cgroup_event(const struct tally_collector *c, int ev)
{
	/* off-cpu too: its samples are the switch-outs of the cgroup's tasks, its
	 * PERF_RECORD_SWITCH_CPU_WIDE records their switch-ins, with no perf
	 * context of their own to switch (docs/offcpu.md) */
	return c->o.use_cgroup && ev >= 0 && (c->mean_period[ev] != 0 || c->o.events[ev]->offcpu);
}

/* The sched_switch event: a sample per switch-out of the target's tasks, with
 * the raw fields (prev_pid, prev_state, next_pid) and the user stack of the
 * task going off (the kernel part is always schedule(): left out, see
 * docs/offcpu.md); its switch-ins come as PERF_RECORD_SWITCH records of the
 * same event (context_switch), written when the task is back on a CPU. */
static void setup_switch_attr(const struct tally_collector *c, struct perf_event_attr *a)
{
	a->type = PERF_TYPE_TRACEPOINT;
	a->config = c->ofmt.id;
	a->freq = 0;
	a->sample_freq = 0;
	a->sample_period = 1;
	a->sample_type |= PERF_SAMPLE_RAW;
	a->wakeup_watermark = (uint32_t)(c->data_size / 4);
	a->context_switch = 1;
	a->sample_type |= PERF_SAMPLE_CALLCHAIN;
	a->exclude_callchain_kernel = 1;
	/* without -g only the first user frame is kept: the place that waited */
	if (!c->o.callchain)
		a->sample_max_stack = 1;
}

/* ev < 0: the side-band event of opts.sideband_dummy, which never samples */
static void setup_attr(struct tally_collector *c, struct perf_event_attr *a, int ev, bool sideband)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	if (ev < 0) {
		a->type = PERF_TYPE_SOFTWARE;
		a->config = PERF_COUNT_SW_DUMMY;
		a->sample_period = 1;
	} else {
		const struct tally_event_desc *d = c->o.events[ev];
		a->type = d->type;
		a->config = d->config;
		if (c->mean_period[ev]) {
			a->sample_period = c->o.randomize ? draw_period(c, c->mean_period[ev]) : c->mean_period[ev];
		} else {
			a->freq = 1;
			a->sample_freq = c->o.freq;
		}
	}
	/* the same layout for every event of a ring: the records' sample_id trailer is parsed blind */
	a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			 PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
	if (c->o.callchain && ev >= 0)
		a->sample_type |= PERF_SAMPLE_CALLCHAIN;
	if ((c->o.stack_user || c->o.leaf_stack) && ev >= 0) {
		a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		a->sample_regs_user = tally_unwind_regs_mask();
		a->sample_stack_user = c->o.stack_user ? c->o.stack_user : c->o.leaf_stack;
	}
	a->sample_id_all = 1;
	/* sample times on CLOCK_MONOTONIC: comparable with when a period was changed */
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->disabled = 1;
	a->exclude_kernel = exclude_kernel_needed();
	a->exclude_hv = 1;
	a->exclude_callchain_user = 0;
	a->watermark = 1;
	/* samples counted in the kernel leave the rings the side-band records:
	 * each wakes the wait (a new process or file is looked at within a round
	 * of 200 ms, as through the ring; tally_collector_poll spaces the rounds) */
	a->wakeup_watermark = c->sbpf ? 1 : (uint32_t)(c->data_size / 2);
	if (ev >= 0 && c->o.events[ev]->offcpu)
		setup_switch_attr(c, a);
	/* cgroup events are per CPU: every task of the cgroup, nothing to inherit */
	if (c->o.target != TALLY_TARGET_SYSTEM && !cgroup_event(c, ev))
		a->inherit = 1;
	if (c->o.target == TALLY_TARGET_CHILD && !cgroup_event(c, ev))
		a->enable_on_exec = 1;
	if (sideband) {
		a->mmap = 1;
		a->mmap2 = 1;
		a->comm = 1;
		a->comm_exec = 1;
		a->task = 1;
		/* off by default: the kernel leaks the record's build-id flag to every other
		 * listener of the same mmap, which makes a concurrent perf misread it */
		a->build_id = c->o.build_id_mmap;
	}
}

static int add_ring(struct tally_collector *c, int fd, int cpu)
{
	size_t len = c->pagesz + c->data_size;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		if (e == EPERM || e == ENOMEM)
			return tally_seterr(-e, "cannot map a %zu KiB ring buffer: %s (raise kernel.perf_event_mlock_kb or 'ulimit -l')",
					    len / 1024, strerror(e));
		return tally_seterr(-e, "cannot map a ring buffer: %s", strerror(e));
	}
	GROW(c->rings, c->arings, c->nrings + 1);
	c->rings[c->nrings++] = (struct ring){ .fd = fd, .base = m, .size = len, .cpu = cpu };
	return 0;
}

static const struct tally_event_desc dummy_desc = {
	"dummy", NULL, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY, false, "side-band records only", 0
};

/* Opens the events of one (pid, cpu) pair; the first fd on a CPU owns that CPU's ring. */
static int open_one(struct tally_collector *c, pid_t pid, int cpu, int *ring_fd_for_cpu)
{
	/* with sideband_dummy a dummy event carries the side-band records and owns the
	 * ring, so sampling can be switched off on a CPU while processes stay followed */
	for (int ev = c->o.sideband_dummy ? -1 : 0; ev < c->o.nevents; ev++) {
		struct perf_event_attr a;
		bool first = *ring_fd_for_cpu < 0;
		const struct tally_event_desc *d = ev < 0 ? &dummy_desc : c->o.events[ev];
		if (d->offcpu == TALLY_OFFCPU_PREEMPTED)
			continue; /* delivered from off-cpu's records */
		if (d->offcpu && c->bpf)
			continue; /* the BPF program's, no perf event */
		/* side-band records come once per (task, cpu) from the first event */
		setup_attr(c, &a, ev, ev == (c->o.sideband_dummy ? -1 : 0));
		bool cg = cgroup_event(c, ev);
		long fd = sys_perf_event_open(&a, cg ? c->o.cgroup_fd : pid, cpu, -1,
					      PERF_FLAG_FD_CLOEXEC | (cg ? PERF_FLAG_PID_CGROUP : 0));
		if (fd < 0) {
			int e = errno;
			char where[64];
			if (c->o.target == TALLY_TARGET_SYSTEM || cg)
				snprintf(where, sizeof(where), "on CPU %d", cpu);
			else
				snprintf(where, sizeof(where), "for pid %d", (int)pid);
			if (e == ESRCH) {
				/* a thread of an attached process went away while we enumerated */
				if (c->o.target == TALLY_TARGET_PIDS && c->nfds)
					return 0;
			}
			return open_error(d, e, where);
		}
		GROW(c->fds, c->afds, c->nfds + 1);
		struct evfd *f = &c->fds[c->nfds];
		f->fd = (int)fd;
		f->event = ev;
		f->cpu = cpu;
		f->task = cg ? -1 : pid;
		f->on_exec = a.enable_on_exec;
		f->kind = d->offcpu ? FD_SWITCH_OUT : FD_SAMPLE;
		f->nchg = 0;
		f->weighed = 0;
		if (ev >= 0 && !a.freq) {
			f->chg[0] = (struct period_change){ 0, a.sample_period, UINT64_MAX, true };
			f->nchg = 1;
		}
		if (ioctl(f->fd, PERF_EVENT_IOC_ID, &f->id) < 0) {
			int e = errno;
			close(f->fd);
			return tally_seterr(-e, "cannot read the id of event '%s': %s", d->name, strerror(e));
		}
		c->nfds++;
		tally_hidx_put(&c->ids, tally_hash_u64(f->id), (uint32_t)(c->nfds - 1));
		if (first) {
			int r = add_ring(c, f->fd, cpu);
			if (r)
				return r;
			*ring_fd_for_cpu = f->fd;
		} else if (ioctl(f->fd, PERF_EVENT_IOC_SET_OUTPUT, *ring_fd_for_cpu) < 0) {
			return tally_seterr(-errno, "cannot share a ring buffer: %s", strerror(errno));
		}
	}
	return 0;
}

static int list_threads(pid_t pid, pid_t **out, size_t *n)
{
	char path[64];
	size_t cap = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	*out = NULL;
	*n = 0;
	if (!d)
		return tally_seterr(-ESRCH, "cannot attach to pid %d: no such process", (int)pid);
	struct dirent *de;
	while ((de = readdir(d))) {
		int tid = atoi(de->d_name);
		if (tid <= 0)
			continue;
		GROW(*out, cap, *n + 1);
		(*out)[(*n)++] = tid;
	}
	closedir(d);
	return 0;
}

/* --off-cpu-mechanism: the BPF program when asked, or for auto when it loads
 * and no call graph is asked (docs/offcpu.md: its frame-pointer walk loses the
 * callers of libc's frameless wrappers, and DWARF needs a stack copy). 0 with
 * c->bpf set or not, or -errno when bpf was asked and cannot load. */
static int open_offcpu_bpf(struct tally_collector *c)
{
	if (c->o.offcpu_mech == TALLY_OFFCPU_TRACEPOINT)
		return 0;
	if (c->o.offcpu_mech == TALLY_OFFCPU_AUTO && c->o.callchain) {
		c->off_why = "call graphs asked";
		return 0;
	}
#ifdef TALLY_HAVE_BPF
	struct tally_offcpu_bpf_opts bo = { .min_ns = c->o.offcpu_min, .callchain = c->o.callchain };
	if (c->o.target == TALLY_TARGET_SYSTEM) {
		bo.mode = TALLY_OFFCPU_BPF_ALL;
	} else if (c->o.target == TALLY_TARGET_CHILD && c->o.use_cgroup) {
		struct stat st;
		if (fstat(c->o.cgroup_fd, &st) < 0)
			return tally_seterr(-errno, "cannot read the command's cgroup: %s", strerror(errno));
		bo.mode = TALLY_OFFCPU_BPF_CGROUP;
		bo.cgroup_id = (uint64_t)st.st_ino; /* a cgroup2 directory's inode is its id */
	} else {
		bo.mode = TALLY_OFFCPU_BPF_TGIDS;
		bo.tgids = c->o.pids;
		bo.ntgids = c->o.npids;
	}
	int r = tally_offcpu_bpf_open(&c->bpf, &bo);
	if (!r) {
		/* -e off-cpu alone: a dummy event still follows mmaps, comms and exits */
		bool other = false;
		for (int ev = 0; ev < c->o.nevents; ev++)
			other = other || !c->o.events[ev]->offcpu;
		if (!other)
			c->o.sideband_dummy = true;
		return 0;
	}
	if (c->o.offcpu_mech == TALLY_OFFCPU_BPF) {
		char why[512];
		snprintf(why, sizeof(why), "%s", tally_errmsg());
		return tally_seterr(r, "%s (%suse --off-cpu-mechanism tracepoint)", why,
				    r == -EPERM ? "run as root or grant CAP_BPF and CAP_PERFMON, or " : "");
	}
	c->off_why = "the BPF program did not load (see --off-cpu-mechanism bpf)";
	return 0;
#else
	if (c->o.offcpu_mech == TALLY_OFFCPU_BPF)
		return tally_seterr(-ENOTSUP, "this tally was built without BPF (libbpf-dev, bpftool and clang; use --off-cpu-mechanism tracepoint)");
	c->off_why = "built without BPF";
	return 0;
#endif
}

int tally_sample_parse_mech(const char *s, enum tally_sample_mech *out)
{
	static const char *const names[] = { "ring", "bpf", "auto" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			*out = (enum tally_sample_mech)i;
			return 0;
		}
	return tally_seterr(-EINVAL, "unknown sample mechanism '%s' (known: ring, bpf, auto)", s);
}

/* Why the BPF program cannot count the samples o asks for, or NULL. */
static const char *sample_bpf_unfit(const struct tally_collect_opts *o)
{
	if (o->target != TALLY_TARGET_SYSTEM)
		return "it counts the whole system only";
	if (o->callchain || o->stack_user || o->leaf_stack)
		return "call graphs asked";
	if (o->ncpus > SB_MAX_CPUS)
		return "more CPUs than it has slots for";
	/* the sampling events are all of the PMU or software kinds (the
	 * tracepoints of the event table are off-CPU's, which it leaves alone) */
	for (int ev = SB_MAX_EVENTS; ev < o->nevents; ev++)
		if (!o->events[ev]->offcpu)
			return "more than 4 events";
	return NULL;
}

int tally_sample_bpf_fits(const struct tally_collect_opts *o)
{
	const char *why = sample_bpf_unfit(o);
	return why ? tally_seterr(-EINVAL, "--sample-mechanism bpf cannot count these samples: %s (use --sample-mechanism ring)", why)
		   : 0;
}

#ifdef TALLY_HAVE_BPF
/* What failed, with the way out: the ring (and the privileges for -EPERM). */
static int sample_bpf_error(int r)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", tally_errmsg());
	return tally_seterr(r, "%s (%suse --sample-mechanism ring)", msg,
			    r == -EPERM ? "run as root or grant CAP_BPF and CAP_PERFMON, or " : "");
}
#endif

/* --sample-mechanism bpf, or auto where it fits and loads: the program is
 * loaded before the events are opened (their rings then wake the wait at each
 * side-band record: see tally_collector_poll) and attached to them after. 0
 * with c->sbpf set or not (auto: c->sb_why says why not), or -errno when bpf
 * was asked and cannot be. */
static int load_sample_bpf(struct tally_collector *c)
{
	if (c->o.sample_mech == TALLY_SAMPLE_RING)
		return 0;
	bool asked = c->o.sample_mech == TALLY_SAMPLE_BPF;
	const char *why = sample_bpf_unfit(&c->o);
	if (why) {
		if (asked)
			return tally_sample_bpf_fits(&c->o);
		snprintf(c->sb_why, sizeof(c->sb_why), "%s", why);
		return 0;
	}
#ifdef TALLY_HAVE_BPF
	bool tb[SB_MAX_EVENTS] = { false };
	for (int ev = 0; ev < c->o.nevents && ev < SB_MAX_EVENTS; ev++)
		tb[ev] = c->o.events[ev]->time_based && !c->o.events[ev]->offcpu;
	int r = tally_sample_bpf_open(&c->sbpf, tb, c->o.nevents < SB_MAX_EVENTS ? c->o.nevents : SB_MAX_EVENTS);
	if (!r)
		return 0;
	if (!asked) {
		snprintf(c->sb_why, sizeof(c->sb_why), "the BPF program did not load: %s", tally_errmsg());
		return 0;
	}
	return sample_bpf_error(r);
#else
	if (!asked) {
		snprintf(c->sb_why, sizeof(c->sb_why), "built without BPF");
		return 0;
	}
	return tally_seterr(-ENOTSUP, "this tally was built without BPF (libbpf-dev, bpftool and clang; use --sample-mechanism ring)");
#endif
}

/* The loaded program on every sampling fd. */
static int attach_sample_bpf(struct tally_collector *c)
{
	if (!c->sbpf)
		return 0;
	int r = 0;
#ifdef TALLY_HAVE_BPF
	for (size_t i = 0; !r && i < c->nfds; i++) {
		struct evfd *f = &c->fds[i];
		if (f->event < 0 || f->kind != FD_SAMPLE)
			continue;
		/* a failure here ends the recording: a program left on some fds
		 * would keep their samples from the ring */
		r = tally_sample_bpf_attach(c->sbpf, f->fd, f->event);
		struct sb_slot *slot = sample_slot(c, f);
		if (!r && slot && f->nchg)
			slot->period = f->chg[f->nchg - 1].period;
		if (f->nchg)
			f->chg[f->nchg - 1].carried = true;
	}
	if (!r) {
		c->sb_seen = xcalloc((size_t)c->o.ncpus * SB_MAX_EVENTS, sizeof(uint64_t));
		c->redraw_s = TALLY_COUNTED_ROUND_MS / 1000.0;
		return 0;
	}
	return sample_bpf_error(r);
#else
	return r;
#endif
}

/* The rings are looked at (or read): the exec watch tells of the next burst
 * of execs from now (watch-bpf.h), so that the side-band records of programs
 * it does not tell of cannot fill a ring between two looks however far apart
 * they are. */
static void watch_mark(struct tally_collector *c)
{
#ifdef TALLY_HAVE_BPF
	if (c->watch)
		tally_watch_bpf_mark(c->watch, c->burst_execs);
#else
	(void)c;
#endif
}

/* Counted samples: the exec watch, where it loads (not needed: without it the
 * looks stay 200 ms apart). TALLY_EXEC_WATCH=off leaves it out (tests, and
 * comparisons); a value other than on or off is refused. */
static int load_watch(struct tally_collector *c)
{
	c->look_gap = COUNTED_MIN_GAP_S;
	if (!c->sbpf)
		return 0;
	const char *env = getenv("TALLY_EXEC_WATCH");
	if (env && strcmp(env, "on") && strcmp(env, "off"))
		return tally_seterr(-EINVAL, "TALLY_EXEC_WATCH is '%s': it takes on or off (unset: on where it loads)", env);
	if (env && !strcmp(env, "off")) {
		snprintf(c->watch_why, sizeof(c->watch_why), "TALLY_EXEC_WATCH=off");
		return 0;
	}
#ifdef TALLY_HAVE_BPF
	if (tally_watch_bpf_open(&c->watch))
		snprintf(c->watch_why, sizeof(c->watch_why), "%s", tally_errmsg());
	/* an exec's side-band records: its fork, comm, exit and a map of each
	 * file of code, 600 bytes for /bin/true (7 records), more with more
	 * libraries; counted as 2 KiB, a burst is the execs that would fill half
	 * a ring (128 for 512 KiB) were they all on one CPU */
	c->burst_execs = c->data_size / 2 / 2048 > 8 ? c->data_size / 2 / 2048 : 8;
	watch_mark(c);
#else
	snprintf(c->watch_why, sizeof(c->watch_why), "built without BPF");
#endif
	return 0;
}

int tally_collector_open(struct tally_collector **out, const struct tally_collect_opts *opts)
{
	struct tally_collector *c = xcalloc(1, sizeof(*c));
	int ret = 0;
	int *ring_of_cpu = NULL;
	c->o = *opts;
	c->pagesz = (size_t)sysconf(_SC_PAGESIZE);
	c->off_ev = -1;
	c->redraw_s = 0.2;
	int ev_pre = -1;
	for (int ev = 0; ev < opts->nevents; ev++) {
		if (opts->events[ev]->offcpu == TALLY_OFFCPU_BLOCKED)
			c->off_ev = ev;
		else if (opts->events[ev]->offcpu == TALLY_OFFCPU_PREEMPTED)
			ev_pre = ev;
	}
	/* a record per context switch: room for a burst of them between two polls */
	size_t pages = opts->stack_user ? 512 : c->off_ev >= 0 ? 512 : 128;
	c->data_size = (opts->ring_pages ? opts->ring_pages : pages) * c->pagesz;
	c->rng = (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(tally_now_wall() * 1e9);
	if (!c->rng)
		c->rng = 1;
	c->mean_period = xcalloc((size_t)opts->nevents, sizeof(uint64_t));
	c->mean_cpu = xcalloc((size_t)opts->nevents * (size_t)opts->ncpus, sizeof(uint64_t));
	c->freq_cpu = xcalloc((size_t)opts->ncpus, sizeof(uint64_t));
	c->cpu_on = xcalloc((size_t)opts->ncpus, sizeof(bool));
	c->ps = xcalloc((size_t)opts->nevents, sizeof(*c->ps));
	c->last = xcalloc((size_t)opts->nevents * (size_t)opts->ncpus, sizeof(*c->last));
	if (c->off_ev >= 0) {
		ret = open_offcpu_bpf(c);
		if (ret) {
			tally_collector_free(c);
			return ret;
		}
	}
	if (c->off_ev >= 0 && !c->bpf) {
		ret = tally_offcpu_format(&c->ofmt, true);
		if (ret) {
			tally_collector_free(c);
			return ret;
		}
	}
	if (c->off_ev >= 0)
		c->off = tally_offcpu_new(c->off_ev, ev_pre, opts->offcpu_min);
	ret = load_sample_bpf(c);
	if (ret) {
		tally_collector_free(c);
		return ret;
	}
	for (int ev = 0; ev < opts->nevents; ev++) {
		c->ps[ev].min = UINT64_MAX;
		if (opts->events[ev]->offcpu)
			continue; /* one sample per switch: no period */
		if (opts->period)
			c->mean_period[ev] = opts->period;
		else if (opts->events[ev]->time_based)
			c->mean_period[ev] = 1000000000ULL / opts->freq;
	}
	for (int cpu = 0; cpu < opts->ncpus; cpu++) {
		c->cpu_on[cpu] = opts->cpus[cpu];
		c->freq_cpu[cpu] = opts->freq;
		for (int ev = 0; ev < opts->nevents; ev++)
			c->mean_cpu[(size_t)cpu * (size_t)opts->nevents + (size_t)ev] = c->mean_period[ev];
	}
	/* trailer of non-sample records: pid/tid, time, cpu, identifier */
	c->sample_trailer = 32;

	ring_of_cpu = xmalloc((size_t)opts->ncpus * sizeof(int));
	for (int i = 0; i < opts->ncpus; i++)
		ring_of_cpu[i] = -1;

	for (int cpu = 0; cpu < opts->ncpus; cpu++) {
		if (!opts->cpus[cpu])
			continue;
		if (opts->target == TALLY_TARGET_SYSTEM) {
			ret = open_one(c, -1, cpu, &ring_of_cpu[cpu]);
		} else if (opts->target == TALLY_TARGET_CHILD) {
			ret = open_one(c, opts->pids[0], cpu, &ring_of_cpu[cpu]);
		} else {
			for (size_t p = 0; p < opts->npids && !ret; p++) {
				pid_t *tids;
				size_t ntids;
				ret = list_threads(opts->pids[p], &tids, &ntids);
				for (size_t t = 0; t < ntids && !ret; t++)
					ret = open_one(c, tids[t], cpu, &ring_of_cpu[cpu]);
				free(tids);
			}
		}
		if (ret)
			goto fail;
	}
	ret = attach_sample_bpf(c);
	if (ret)
		goto fail;
	ret = load_watch(c);
	if (ret)
		goto fail;
	free(ring_of_cpu);
	*out = c;
	return 0;
fail:
	free(ring_of_cpu);
	tally_collector_free(c);
	return ret;
}

static const char *fd_event_name(const struct tally_collector *c, const struct evfd *f)
{
	return f->event < 0 ? dummy_desc.name : c->o.events[f->event]->name;
}

/* Whether an fd should count now: the side-band event always, a sampling event
 * when its CPU is on and collection is not paused. */
static bool fd_wanted(const struct tally_collector *c, const struct evfd *f)
{
	if (f->event < 0)
		return true;
	/* a task switched out on one CPU comes back on any: off-CPU time follows
	 * every CPU or none (tally_collector_cpu_set leaves it on) */
	if (f->kind == FD_SWITCH_OUT)
		return !c->paused;
	return !c->paused && f->cpu >= 0 && f->cpu < c->o.ncpus && c->cpu_on[f->cpu];
}

/* Applies fd_wanted to every fd (cpu < 0) or to those of one CPU. */
static int apply_enable(struct tally_collector *c, int cpu)
{
	for (size_t i = 0; i < c->nfds; i++) {
		struct evfd *f = &c->fds[i];
		if (cpu >= 0 && f->cpu != cpu)
			continue;
		unsigned long req = fd_wanted(c, f) ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE;
		/* a task that exited leaves its fd behind: ESRCH is harmless */
		if (ioctl(f->fd, req, 0) < 0 && errno != ESRCH)
			return tally_seterr(-errno, "cannot control event '%s': %s", fd_event_name(c, f), strerror(errno));
	}
	return 0;
}

/* The BPF program follows the collector: on while enabled and not paused. */
static void bpf_follow(struct tally_collector *c)
{
#ifdef TALLY_HAVE_BPF
	if (c->bpf)
		tally_offcpu_bpf_enable(c->bpf, c->enabled && !c->paused);
#else
	(void)c;
#endif
}

int tally_collector_enable(struct tally_collector *c)
{
	c->enabled = true;
	bpf_follow(c);
	if (c->o.target == TALLY_TARGET_CHILD) {
		/* the command's task events enable themselves at its exec; its cgroup's now */
		for (size_t i = 0; i < c->nfds; i++)
			if (!c->fds[i].on_exec && ioctl(c->fds[i].fd, PERF_EVENT_IOC_ENABLE, 0) < 0 && errno != ESRCH)
				return tally_seterr(-errno, "cannot control event '%s': %s", fd_event_name(c, &c->fds[i]),
						    strerror(errno));
		return 0;
	}
	return apply_enable(c, -1);
}

int tally_collector_disable(struct tally_collector *c)
{
	c->enabled = false;
	c->off_flush = true;
	c->off_stop = mono_ns();
	bpf_follow(c);
	for (size_t i = 0; i < c->nfds; i++)
		if (ioctl(c->fds[i].fd, PERF_EVENT_IOC_DISABLE, 0) < 0 && errno != ESRCH)
			return tally_seterr(-errno, "cannot control event '%s': %s", fd_event_name(c, &c->fds[i]),
					    strerror(errno));
	return 0;
}

int tally_collector_pause(struct tally_collector *c, bool paused)
{
	c->paused = paused;
	if (paused) {
		c->off_flush = true;
		c->off_stop = mono_ns();
	}
	bpf_follow(c);
	return c->enabled ? apply_enable(c, -1) : 0;
}

bool tally_collector_paused(const struct tally_collector *c)
{
	return c->paused;
}

int tally_collector_cpu_set(struct tally_collector *c, int cpu, bool on)
{
	if (cpu < 0 || cpu >= c->o.ncpus || !c->o.cpus[cpu])
		return tally_seterr(-EINVAL, "CPU %d is not sampled by this collector", cpu);
	c->cpu_on[cpu] = on;
	return c->enabled ? apply_enable(c, cpu) : 0;
}

int tally_collector_cpu_rate(struct tally_collector *c, int cpu, uint64_t freq, uint64_t period)
{
	if (cpu < 0 || cpu >= c->o.ncpus || !c->o.cpus[cpu])
		return tally_seterr(-EINVAL, "CPU %d is not sampled by this collector", cpu);
	if (!freq == !period)
		return tally_seterr(-EINVAL, "give a frequency or a period");
	int ne = c->o.nevents;
	/* check every event first: a change applies to all of them or to none */
	for (int ev = 0; ev < ne; ev++) {
		const struct tally_event_desc *d = c->o.events[ev];
		if (d->time_based || d->offcpu)
			continue; /* off-cpu: one sample per switch, whatever the rate */
		if (c->mean_period[ev] && freq)
			return tally_seterr(-EINVAL, "event '%s' samples every %" PRIu64 " events here: give a period, not a frequency",
					    d->name, c->mean_period[ev]);
		if (!c->mean_period[ev] && period)
			return tally_seterr(-EINVAL, "event '%s' samples at a frequency here (the kernel adapts its period): give a frequency, not a period",
					    d->name);
	}
	for (int ev = 0; ev < ne; ev++) {
		uint64_t *mean = &c->mean_cpu[(size_t)cpu * (size_t)ne + (size_t)ev];
		if (c->o.events[ev]->offcpu)
			continue;
		if (c->o.events[ev]->time_based)
			*mean = period ? period : 1000000000ULL / freq;
		else if (c->mean_period[ev])
			*mean = period;
		for (size_t i = 0; i < c->nfds; i++) {
			struct evfd *f = &c->fds[i];
			if (f->cpu != cpu || f->event != ev)
				continue;
			/* for a freq-mode event the kernel takes the value as the new frequency */
			uint64_t v = *mean ? (c->o.randomize ? draw_period(c, *mean) : *mean) : freq;
			int e = 0;
			if (*mean)
				e = set_period(c, f, v);
			else if (ioctl(f->fd, PERF_EVENT_IOC_PERIOD, &v) < 0)
				e = -errno;
			if (e && e != -ESRCH)
				return tally_seterr(e, "cannot change the rate of event '%s' on CPU %d: %s",
						    c->o.events[ev]->name, cpu, strerror(-e));
		}
		if (c->o.events[ev]->time_based || c->mean_period[ev]) {
			/* the interval statistics restart at the new period */
			c->last[(size_t)cpu * (size_t)ne + (size_t)ev].time = 0;
		}
	}
	c->freq_cpu[cpu] = freq; /* 0: given as a period */
	return 0;
}

void tally_collector_cpu_state(const struct tally_collector *c, int cpu, struct tally_cpu_state *st)
{
	memset(st, 0, sizeof(*st));
	if (cpu < 0 || cpu >= c->o.ncpus)
		return;
	st->opened = c->o.cpus[cpu];
	st->on = c->cpu_on[cpu];
	st->sampling = st->opened && st->on && !c->paused && c->enabled;
	st->freq = c->freq_cpu[cpu];
	st->period = c->o.nevents ? c->mean_cpu[(size_t)cpu * (size_t)c->o.nevents] : 0;
}

static void redraw_periods(struct tally_collector *c)
{
	for (size_t i = 0; i < c->nfds; i++) {
		if (c->fds[i].event < 0)
			continue;
		uint64_t mean = c->mean_cpu[(size_t)c->fds[i].cpu * (size_t)c->o.nevents + (size_t)c->fds[i].event];
		if (!mean)
			continue;
		uint64_t p = draw_period(c, mean);
		/* a task that exited leaves its fd behind: ESRCH is expected and harmless */
		(void)set_period(c, &c->fds[i], p);
	}
}

/* Copies everything new in a ring into the staging buffer and frees the ring space. */
/* Copies len bytes of ring r from position pos to dst (across the end of
 * the ring's data, back to its start). */
static void ring_copy(const struct tally_collector *c, const struct ring *r, uint64_t pos, size_t len, char *dst)
{
	const char *data = (const char *)r->base + c->pagesz;
	size_t start = (size_t)(pos % c->data_size);
	size_t first = len < c->data_size - start ? len : c->data_size - start;
	memcpy(dst, data + start, first);
	if (len > first)
		memcpy(dst + first, data, len - first);
}

static void read_ring(struct tally_collector *c, struct ring *r)
{
	struct perf_event_mmap_page *meta = r->base;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	if (head == tail)
		return;
	size_t len = (size_t)(head - tail);
	GROW(c->stage, c->stage_alloc, c->stage_len + len);
	ring_copy(c, r, tail, len, c->stage + c->stage_len);
	c->stage_len += len;
	__atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
}

static int cmp_ref(const void *a, const void *b)
{
	const struct recref *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Merges the per-ring runs of refs (each already in time order) pairwise: O(n log rings). */
static void merge_runs(struct tally_collector *c)
{
	size_t k = c->nruns;
	if (k < 2 || c->nrefs < 2)
		return;
	GROW(c->tmp, c->atmp, c->nrefs);
	GROW(c->runs, c->aruns, k + 1);
	c->runs[k] = c->nrefs;
	while (k > 1) {
		size_t nk = 0;
		for (size_t r = 0; r < k; r += 2) {
			size_t a = c->runs[r], mid = c->runs[r + 1 <= k ? r + 1 : k], end = r + 2 <= k ? c->runs[r + 2] : mid;
			size_t i = a, j = mid, o = a;
			while (i < mid && j < end)
				c->tmp[o++] = cmp_ref(&c->refs[j], &c->refs[i]) < 0 ? c->refs[j++] : c->refs[i++];
			while (i < mid)
				c->tmp[o++] = c->refs[i++];
			while (j < end)
				c->tmp[o++] = c->refs[j++];
			c->runs[nk++] = a;
		}
		c->runs[nk] = c->nrefs;
		struct recref *t = c->refs;
		c->refs = c->tmp;
		c->tmp = t;
		size_t ta = c->arefs;
		c->arefs = c->atmp;
		c->atmp = ta;
		k = nk;
	}
}

void tally_collector_random_samples(const struct tally_collector *c, int event, uint64_t *reached, uint64_t *total)
{
	*reached = c ? c->ps[event].reached : 0;
	*total = c ? c->ps[event].n : 0;
}

const char *tally_collector_scope(const struct tally_collector *c)
{
	if (!c)
		return "none";
	if (c->o.target == TALLY_TARGET_SYSTEM)
		return "every task (per-CPU events)";
	if (c->o.use_cgroup)
		return "every task of the command (per-CPU events on its own cgroup)";
	return "the original tasks only (threads and children started later keep the period drawn when they were created)";
}

/* The user registers and stack copy of a sample (PERF_SAMPLE_REGS_USER,
 * PERF_SAMPLE_STACK_USER) at p..end into r: the copy, then the size the
 * kernel actually filled (dyn_size). */
static void user_regs_stack(const uint64_t *p, const uint64_t *end, struct tally_rec *r)
{
	if (p >= end)
		return;
	uint64_t abi = *p++;
	if (abi) {
		uint64_t n = (uint64_t)__builtin_popcountll(tally_unwind_regs_mask());
		if (n <= (uint64_t)(end - p)) {
			r->regs = p;
			r->nregs = n;
			p += n;
		} else {
			p = end;
		}
	}
	if (p < end) {
		uint64_t size = *p++;
		if (size && size / 8 + 1 <= (uint64_t)(end - p)) {
			uint64_t dyn = p[size / 8];
			r->stack = (const uint8_t *)p;
			r->stack_len = dyn < size ? dyn : size;
		}
	}
}

/* A sched_switch sample (after its period field, p..end): the switch-out of
 * the task that ran. */
static void deliver_switch(struct tally_collector *c, struct tally_rec *r, const uint64_t *p, const uint64_t *end)
{
	const uint64_t *chain = NULL;
	uint64_t nr = 0;
	if (p < end) {
		nr = *p++;
		if (nr > (uint64_t)(end - p))
			return;
		chain = p;
		p += nr;
	}
	if ((const char *)p + 4 > (const char *)end)
		return;
	uint32_t rawsize;
	memcpy(&rawsize, p, 4);
	const char *raw = (const char *)p + 4;
	if (rawsize > (size_t)((const char *)end - raw))
		return;
	/* the u32 size and the data are padded to 8 bytes together */
	p = (const uint64_t *)(raw + rawsize);
	struct tally_switch sw;
	if (tally_offcpu_parse_raw(&c->ofmt, raw, rawsize, &sw))
		return;
	if (sw.prev_pid > 0) {
		if (c->o.stack_user || c->o.leaf_stack)
			user_regs_stack(p, end, r);
		/* the place that waited is the first user frame (the chain holds no
		 * kernel part); a kernel thread has only the tracepoint's own ip */
		uint64_t user_ip = 0;
		for (uint64_t i = 0; i < nr && !user_ip; i++)
			if (chain[i] < PERF_CONTEXT_MAX)
				user_ip = chain[i];
		r->misc = (uint16_t)((r->misc & ~PERF_RECORD_MISC_CPUMODE_MASK) |
				     (user_ip ? PERF_RECORD_MISC_USER : PERF_RECORD_MISC_KERNEL));
		if (user_ip)
			r->ip = user_ip;
		r->nr = c->o.callchain && user_ip ? nr : 0;
		r->chain = r->nr ? chain : NULL;
		tally_offcpu_out(c->off, r, sw.prev_state);
	}
}

/* The BPF program's waits, as samples at the latest record's time (the maps
 * they resolve in are still known); flush: and the tasks still off. */
static void drain_bpf(struct tally_collector *c, bool flush, tally_rec_fn fn, void *ctx)
{
#ifdef TALLY_HAVE_BPF
	uint64_t now = mono_ns();
	uint64_t t = c->max_time ? c->max_time : now;
	/* a failed read leaves the waits in the map for the next round */
	tally_offcpu_bpf_drain(c->bpf, c->off, t, flush, c->off_stop ? c->off_stop : now, fn, ctx);
#else
	(void)c, (void)flush, (void)fn, (void)ctx;
#endif
}

static void deliver_counted(struct tally_collector *c, const struct counted_rec *cr, tally_rec_fn fn, void *ctx);

static void deliver(struct tally_collector *c, const struct perf_event_header *h, tally_rec_fn fn, void *ctx)
{
	struct tally_rec r;
	memset(&r, 0, sizeof(r));
	r.raw = h;
	r.type = h->type;
	r.misc = h->misc;
	r.event = -1;
	if (h->type == TALLY_REC_COUNTED) {
		deliver_counted(c, (const struct counted_rec *)h, fn, ctx);
		return;
	}
	const uint64_t *p = (const uint64_t *)(h + 1);
	const uint64_t *end = (const uint64_t *)((const char *)h + h->size);
	if (h->type == PERF_RECORD_SAMPLE) {
		if (end - p < 6)
			return;
		uint64_t id = p[0];
		uint32_t fi = tally_hidx_get(&c->ids, tally_hash_u64(id), &id, id_eq, c);
		if (fi == TALLY_HIDX_NONE)
			return;
		r.event = c->fds[fi].event;
		if (r.event < 0)
			return;
		r.ip = p[1];
		r.pid = (uint32_t)p[2];
		r.tid = (uint32_t)(p[2] >> 32);
		r.time = p[3];
		r.cpu = (uint32_t)p[4];
		r.period = p[5];
		p += 6;
		if (r.time > c->max_time)
			c->max_time = r.time;
		if (c->fds[fi].kind != FD_SAMPLE) {
			deliver_switch(c, &r, p, end);
			return;
		}
		if (c->o.callchain && p < end) {
			uint64_t nr = *p++;
			if (nr > (uint64_t)(end - p))
				nr = (uint64_t)(end - p);
			r.nr = nr;
			r.chain = p;
			p += nr;
		}
		if (c->o.stack_user || c->o.leaf_stack)
			user_regs_stack(p, end, &r);
		struct period_stats *s = &c->ps[r.event];
		/* an inherited event reports its parent's id: a sample of another task came
		 * through a copy made at that task's creation, whose period tally cannot redraw */
		bool reached = c->fds[fi].task < 0 || (uint32_t)c->fds[fi].task == r.tid;
		/* what the sample stands for: a timer event (cpu-clock, task-clock) keeps
		 * reporting the period it was opened with whatever tally set since, so
		 * its weight is the period tally set last before the sample; a copy
		 * inherited by a later task reports its own, fixed at its creation, as
		 * every counting event reports the period it really used (-F adapts it) */
		r.weight = r.period;
		if (reached && c->o.events[r.event]->time_based && c->fds[fi].nchg) {
			uint64_t p = period_at(&c->fds[fi], r.time);
			if (p)
				r.weight = p;
			c->fds[fi].weighed += r.weight;
		}
		period_stats_add(s, r.weight, 1, reached);
		uint64_t mean = r.cpu < (uint32_t)c->o.ncpus ? c->mean_cpu[(size_t)r.cpu * (size_t)c->o.nevents + (size_t)r.event] : 0;
		if (mean && c->o.events[r.event]->time_based) {
			struct last_sample *l = &c->last[(size_t)r.cpu * (size_t)c->o.nevents + (size_t)r.event];
			uint64_t d = r.time - l->time;
			/* only back-to-back samples of a running thread: no sleeps, no migrations */
			if (l->time && l->tid == r.tid && r.time > l->time && d < mean * 3 / 2)
				keep_interval(c, s, d);
			l->time = r.time;
			l->tid = r.tid;
		}
	} else if ((size_t)h->size >= sizeof(*h) + c->sample_trailer) {
		const uint64_t *t = (const uint64_t *)((const char *)h + h->size - c->sample_trailer);
		r.pid = (uint32_t)t[0];
		r.tid = (uint32_t)(t[0] >> 32);
		r.time = t[1];
		r.cpu = (uint32_t)t[2];
		if (r.time > c->max_time)
			c->max_time = r.time;
		if (h->type == PERF_RECORD_EXIT && c->off)
			tally_offcpu_exit(c->off, ((const uint32_t *)(h + 1))[2]);
		/* a process ends: its waits before its maps are forgotten */
		if (h->type == PERF_RECORD_EXIT && c->bpf && ((const uint32_t *)(h + 1))[0] == ((const uint32_t *)(h + 1))[2])
			drain_bpf(c, false, fn, ctx);
		/* a task back on a CPU: the record is written by the task itself */
		if ((h->type == PERF_RECORD_SWITCH || h->type == PERF_RECORD_SWITCH_CPU_WIDE) && c->off &&
		    !(h->misc & PERF_RECORD_MISC_SWITCH_OUT))
			tally_offcpu_in(c->off, r.tid, r.time, r.cpu, fn, ctx);
	}
	fn(ctx, &r);
}

/* The counts read from the BPF map, as one more run of records in time order
 * (sort: there are records of the rings to order them among): each at the
 * time of its last sample, so that an exec or an exit after it is applied
 * after it, and a fork or an mmap before its first sample before it. */
static void stage_counted(struct tally_collector *c, const struct sb_key *k, const struct sb_val *v, size_t n,
			  const bool *taken, bool sort)
{
	size_t first = c->nrefs;
	GROW(c->stage, c->stage_alloc, c->stage_len + n * sizeof(struct counted_rec));
	GROW(c->refs, c->arefs, c->nrefs + n);
	for (size_t i = 0; i < n; i++) {
		if (!v[i].count || k[i].event >= c->o.nevents || (taken && !taken[i]))
			continue;
		struct counted_rec cr = {
			.h = { .type = TALLY_REC_COUNTED, .misc = 0, .size = sizeof(cr) },
			.tgid = k[i].tgid, .event = k[i].event, .kernel = k[i].kernel,
			.ip = k[i].ip, .count = v[i].count, .weight = v[i].weight, .time = v[i].last,
		};
		memcpy(c->stage + c->stage_len, &cr, sizeof(cr));
		c->refs[c->nrefs++] = (struct recref){ cr.time, c->stage_len };
		c->stage_len += sizeof(cr);
	}
	if (!sort)
		return;
	tally_qsort(c->refs + first, c->nrefs - first, sizeof(*c->refs), cmp_ref);
	if (c->nrefs > first) {
		GROW(c->runs, c->aruns, c->nruns + 1);
		c->runs[c->nruns++] = first;
	}
}

/* A round of counted samples every 200 ms while side-band records come
 * takes only the places of the processes those records are of (and of those
 * that ended in or since the last full round): their order among the records
 * matters (an exec or an mmap after a sample, an exit). The other places
 * count on in the tables and are taken by a full round, at most a round's
 * time later (4 s, as when nothing comes): a process with no records has the
 * same maps then. A round asked for now (a flush, a peek, the end) is always
 * full. */
#define COUNTED_FULL_S (TALLY_COUNTED_ROUND_MS / 1000.0)

struct pid_key {
	const uint32_t *v;
	uint32_t pid;
};

static bool pid_below(const void *ctx, size_t i)
{
	const struct pid_key *k = ctx;
	return k->v[i] < k->pid;
}

/* The entries of the drain this round takes (NULL: all, a full round), from
 * the side-band records staged in c->refs. A process that ended this round
 * is taken whole by the rounds up to the next full one after it: its last
 * samples may still be in the tables, and it is forgotten a few rounds after
 * its exit (so a full round keeps its own round's exits for the next). */
static bool *counted_taken(struct tally_collector *c, const struct sb_key *k, size_t n, bool full)
{
	if (full)
		c->nsb_exited = 0;
	c->nsb_pids = 0;
	for (size_t i = 0; i < c->nrefs; i++) {
		const struct perf_event_header *h = (const void *)(c->stage + c->refs[i].off);
		if (h->type != PERF_RECORD_FORK && h->type != PERF_RECORD_EXIT && h->type != PERF_RECORD_COMM &&
		    h->type != PERF_RECORD_MMAP && h->type != PERF_RECORD_MMAP2)
			continue;
		if (h->size < sizeof(*h) + sizeof(uint32_t))
			continue;
		uint32_t pid = ((const uint32_t *)(h + 1))[0];
		/* a process's records come together (an exec's mmaps, its threads'
		 * exits): each pid once in a row, not once per record */
		if (h->type == PERF_RECORD_EXIT && (!c->nsb_exited || c->sb_exited[c->nsb_exited - 1] != pid)) {
			GROW(c->sb_exited, c->asb_exited, c->nsb_exited + 1);
			c->sb_exited[c->nsb_exited++] = pid;
		}
		if (!full && (!c->nsb_pids || c->sb_pids[c->nsb_pids - 1] != pid)) {
			GROW(c->sb_pids, c->asb_pids, c->nsb_pids + 1);
			c->sb_pids[c->nsb_pids++] = pid;
		}
	}
	if (full)
		return NULL;
	GROW(c->sb_pids, c->asb_pids, c->nsb_pids + c->nsb_exited + 1);
	if (c->nsb_exited)
		memcpy(c->sb_pids + c->nsb_pids, c->sb_exited, c->nsb_exited * sizeof(uint32_t));
	c->nsb_pids += c->nsb_exited;
	tally_qsort(c->sb_pids, c->nsb_pids, sizeof(uint32_t), tally_cmp_u32);
	GROW(c->sb_taken, c->asb_taken, n + 1);
	for (size_t i = 0; i < n; i++) {
		struct pid_key key = { c->sb_pids, k[i].tgid };
		size_t at = tally_partition(c->nsb_pids, pid_below, &key);
		c->sb_taken[i] = at < c->nsb_pids && c->sb_pids[at] == k[i].tgid;
	}
	return c->sb_taken;
}

/* What the timer did, from the program's slots: the intervals between
 * back-to-back samples of one thread it measured since the last round. */
static void take_intervals(struct tally_collector *c)
{
#ifdef TALLY_HAVE_BPF
	for (int cpu = 0; cpu < c->o.ncpus; cpu++) {
		for (int ev = 0; ev < c->o.nevents && ev < SB_MAX_EVENTS; ev++) {
			struct sb_slot *slot = tally_sample_bpf_slot(c->sbpf, cpu, ev);
			uint64_t *seen = &c->sb_seen[(size_t)cpu * SB_MAX_EVENTS + (size_t)ev];
			uint64_t n = __atomic_load_n(&slot->nivals, __ATOMIC_ACQUIRE);
			if (n <= *seen)
				continue;
			uint64_t from = n - *seen > SB_IVALS ? n - SB_IVALS : *seen;
			for (uint64_t i = from; i < n; i++)
				keep_interval(c, &c->ps[ev], __atomic_load_n(&slot->ivals[i & (SB_IVALS - 1)], __ATOMIC_RELAXED));
			*seen = n;
		}
	}
#else
	(void)c;
#endif
}

/* A count from the BPF map as a record of count samples of summed weight. */
static void deliver_counted(struct tally_collector *c, const struct counted_rec *cr, tally_rec_fn fn, void *ctx)
{
	struct tally_rec r;
	memset(&r, 0, sizeof(r));
	r.raw = &cr->h;
	r.type = PERF_RECORD_SAMPLE;
	r.misc = cr->kernel ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER;
	r.event = cr->event;
	r.pid = r.tid = cr->tgid;
	r.time = cr->time;
	r.ip = cr->ip;
	r.count = cr->count;
	r.weight = cr->weight;
	r.period = cr->weight / cr->count;
	if (r.time > c->max_time)
		c->max_time = r.time;
	/* one sample's own weight is not kept: min and max of the places' means */
	period_stats_add(&c->ps[r.event], cr->weight, cr->count, true);
	fn(ctx, &r);
}

/* Counted samples: the milliseconds from now until gap seconds after the
 * last round or look (0: now). */
static int gap_ms(const struct tally_collector *c, double gap)
{
	double last = c->last_look > c->last_round ? c->last_look : c->last_round;
	double left = gap - (tally_now_mono() - last);
	return left > 0 ? (int)(left * 1000) + 1 : 0;
}

/* ... until a round asked for may come (200 ms after the last round or look) */
static int counted_gap_ms(const struct tally_collector *c)
{
	return gap_ms(c, COUNTED_MIN_GAP_S);
}

/* ... until the next look (200 ms, or up to a second with the exec watch) */
static int look_gap_ms(const struct tally_collector *c)
{
	return gap_ms(c, c->look_gap);
}

/* Whether some ring holds records not yet read. */
static bool rings_pending(const struct tally_collector *c)
{
	for (size_t i = 0; i < c->nrings; i++) {
		const struct perf_event_mmap_page *meta = c->rings[i].base;
		if (__atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) != meta->data_tail)
			return true;
	}
	return false;
}

/* The record at position pos of ring r (len bytes of it, at most size):
 * where it lies whole in the ring, or copied into c->peek_buf when it wraps. */
static const void *ring_at(struct tally_collector *c, const struct ring *r, uint64_t pos, size_t len)
{
	size_t start = (size_t)(pos % c->data_size);
	if (start + len <= c->data_size)
		return (const char *)r->base + c->pagesz + start;
	if (!c->peek_buf)
		c->peek_buf = xmalloc(UINT16_MAX + 1);
	ring_copy(c, r, pos, len, c->peek_buf);
	return c->peek_buf;
}

/* Whether a side-band record asks for a round soon: the caller's prompt says
 * so (every one, without a prompt); a sample never does. */
static bool asks_round(const struct tally_collector *c, const struct perf_event_header *h)
{
	return h->type != PERF_RECORD_SAMPLE && (!c->o.prompt || c->o.prompt(c->o.prompt_ctx, h));
}

/* Whether the records waiting in the rings ask for a round now: one of them
 * does (c->sb_asked then says so to the round), or a ring is a quarter full
 * (the round makes room before the kernel must drop any). Each record is
 * looked at once, not read: it stays where it is for the round, which asks
 * only those no look saw. since: seconds since the last look or round, from
 * which c->fill_s gets how soon a ring at the pace it filled since would be
 * full (samples through the ring when the table of places is full come fast:
 * the looks must not back off past that). */
static bool rings_prompt(struct tally_collector *c, double since)
{
	c->fill_s = HUGE_VAL;
	for (size_t i = 0; i < c->nrings; i++) {
		struct ring *r = &c->rings[i];
		const struct perf_event_mmap_page *meta = r->base;
		uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE), tail = meta->data_tail;
		if (head - tail >= c->data_size / 4)
			return true;
		uint64_t pos = r->peeked > tail ? r->peeked : tail;
		if (head > pos && since > 0) {
			double t = (double)(c->data_size - (head - tail)) * since / (double)(head - pos);
			if (t < c->fill_s)
				c->fill_s = t;
		}
		while (head - pos >= sizeof(struct perf_event_header)) {
			struct perf_event_header h;
			memcpy(&h, ring_at(c, r, pos, sizeof(h)), sizeof(h));
			if (h.size < sizeof(h) || h.size > head - pos)
				return true; /* cannot be: the round reads it as it can */
			if (h.type != PERF_RECORD_SAMPLE && asks_round(c, ring_at(c, r, pos, h.size))) { /* no copy for a sample */
				c->sb_asked = true;
				return true;
			}
			pos += h.size;
		}
		r->peeked = pos;
	}
	return false;
}

/* Whether a record of the staged bytes [from, to) asks for a round. */
static bool stage_asks(const struct tally_collector *c, size_t from, size_t to)
{
	while (from + sizeof(struct perf_event_header) <= to) {
		const struct perf_event_header *h = (const void *)(c->stage + from);
		if (h->size < sizeof(*h) || from + h->size > to)
			return false; /* the round stops there too */
		if (asks_round(c, h))
			return true;
		from += h->size;
	}
	return false;
}

/* The exec watch told of a program tally must look at while it lives (one new
 * to it, or one whose processes make JIT code): its records ask for a round,
 * and the looks are 200 ms apart again. false when it told of nothing. */
static bool watch_told(struct tally_collector *c)
{
#ifdef TALLY_HAVE_BPF
	unsigned b = 0, n = c->watch ? tally_watch_bpf_take(c->watch, &b) : 0;
	if (!n && !b)
		return false;
	c->watch_told += n;
	c->watch_bursts += b;
	if (n) {
		c->look_gap = COUNTED_MIN_GAP_S;
		c->sb_asked = true; /* the round after: rounds 200 ms apart for a second */
	}
	/* a burst of known programs: one round, which empties the rings */
	return true;
#else
	(void)c;
	return false;
#endif
}

/* Counted samples: waits for the next round (docs/sampling.md, "Rounds") and
 * says whether it is now. The rings wake the wait at the first side-band
 * record; the records are looked at 200 ms after the last round or look, and
 * a round comes then if one of them asks for it (a file not seen before, a
 * JIT's memory: the caller's prompt), a ring is a quarter full, a round's time
 * (4 s) has passed since the last round, or one did less than a second ago.
 * Otherwise they wait in the rings, and the next look is 200 ms later (the
 * rings, not read, would wake the wait at once: only the caller's fd and the
 * exec watch's are waited on then). With the exec watch, which tells of each
 * program new to tally at its exec (a round then, 200 ms after the last at the
 * soonest), a look that finds nothing asking doubles the time to the next, up
 * to a second. pfd: the rings, then the caller's fd (if any), then the
 * watch's (if any). Ready at once when the caller asks (timeout 0), or when
 * its timeout ends a wait with nothing in the rings; its fd makes a look. */
static bool counted_wait(struct tally_collector *c, struct pollfd *pfd, size_t n, int timeout_ms)
{
	if (timeout_ms <= 0)
		return true;
	bool pending = rings_pending(c);
	bool busy = tally_now_mono() < c->sb_busy_until;
	if (busy)
		c->look_gap = COUNTED_MIN_GAP_S;
	if ((pending || busy) && look_gap_ms(c) < timeout_ms)
		timeout_ms = look_gap_ms(c);
	/* the fds besides the rings */
	struct pollfd *w = pfd + c->nrings;
	int nw = (int)(n - c->nrings);
	int wake_at = c->o.wake_fd >= 0 ? 0 : -1, watch_at = c->watch ? nw - 1 : -1;
	bool caller = false, told = false;
	int r = 0;
	if (pending) {
		r = poll(w, (nfds_t)nw, timeout_ms);
	} else {
		r = poll(pfd, n, timeout_ms);
		bool ring_in = false;
		for (size_t i = 0; i < c->nrings && r > 0; i++)
			ring_in = ring_in || (pfd[i].revents & POLLIN);
		bool other = false;
		for (int i = 0; i < nw && r > 0; i++)
			other = other || (w[i].revents & POLLIN);
		if (ring_in && !other) {
			int g = look_gap_ms(c);
			if (g > timeout_ms)
				g = timeout_ms;
			r = g > 0 ? poll(w, (nfds_t)nw, g) : 0;
		} else if (r > 0 && !other) {
			r = poll(w, (nfds_t)nw, timeout_ms); /* a ring whose tasks all exited (POLLHUP): not a spin */
		}
	}
	caller = r > 0 && wake_at >= 0 && (w[wake_at].revents & POLLIN);
	told = r > 0 && watch_at >= 0 && (w[watch_at].revents & POLLIN);
	if (told && watch_told(c)) {
		c->round_asked = true;
		int g = counted_gap_ms(c);
		if (g > 0 && wake_at >= 0)
			poll(w + wake_at, 1, g); /* the caller may still end the wait */
		else if (g > 0)
			poll(NULL, 0, g);
		return true;
	}
	if (!caller && !rings_pending(c)) {
		/* the wait's own end, nothing waiting: the tables' round (of the
		 * second after a record that asked, or a round's time since the last) */
		c->round_asked = busy;
		return true;
	}
	/* the caller's fd: what it asks for that needs the counts reads them
	 * itself (a timeout of 0), the rest does not need a round */
	double now = tally_now_mono();
	double since = now - (c->last_look > c->last_round ? c->last_look : c->last_round);
	c->last_look = now;
	watch_mark(c);
	if (now - c->last_round >= COUNTED_CALM_S || now < c->sb_busy_until || rings_prompt(c, since)) {
		/* a record that asked: the looks are 200 ms apart again (not after
		 * a round that only the time or a ring's fill made) */
		if (now < c->sb_busy_until || c->sb_asked) {
			c->look_gap = COUNTED_MIN_GAP_S;
			c->round_asked = true;
		}
		return true;
	}
	c->looks++;
	/* nothing asked: with the exec watch, the next look may wait longer, but
	 * not past half the time a ring would take to fill (at a look, a quarter
	 * full makes a round) */
	if (c->watch && !caller) {
		double g = c->look_gap * 2 < COUNTED_LOOK_MAX_S ? c->look_gap * 2 : COUNTED_LOOK_MAX_S;
		if (g > c->fill_s / 2)
			g = c->fill_s / 2 > COUNTED_MIN_GAP_S ? c->fill_s / 2 : COUNTED_MIN_GAP_S;
		c->look_gap = g;
	}
	return false;
}

int tally_collector_poll(struct tally_collector *c, int timeout_ms, tally_rec_fn fn, void *ctx)
{
	bool asked_now = timeout_ms <= 0;
	GROW(c->pfd, c->apfd, c->nrings + 2);
	struct pollfd *pfd = c->pfd;
	size_t n = 0;
	for (size_t i = 0; i < c->nrings; i++) {
		pfd[n].fd = c->rings[i].fd;
		pfd[n++].events = POLLIN;
	}
	if (c->o.wake_fd >= 0) {
		pfd[n].fd = c->o.wake_fd;
		pfd[n++].events = POLLIN;
	}
#ifdef TALLY_HAVE_BPF
	if (c->watch) {
		pfd[n].fd = tally_watch_bpf_fd(c->watch);
		pfd[n++].events = POLLIN;
	}
#endif
	if (c->sbpf) {
		if (!counted_wait(c, pfd, n, timeout_ms))
			return 0; /* records wait in the rings for the round */
	} else if (timeout_ms > 0) {
		int r = poll(pfd, n, timeout_ms);
		/* a ring whose tasks all exited reports POLLHUP at once: wait out the interval
		 * instead of spinning, unless the caller's fd woke us */
		bool hup_only = r > 0;
		for (size_t i = 0; i < n && r > 0; i++)
			if (pfd[i].revents & POLLIN)
				hup_only = false;
		if (hup_only) {
			struct pollfd w = { .fd = c->o.wake_fd, .events = POLLIN };
			poll(&w, c->o.wake_fd >= 0 ? 1 : 0, timeout_ms);
		}
	}
	c->last_round = tally_now_mono();
	watch_mark(c);
	c->rounds++;
	c->rounds_asked += c->round_asked;
	c->round_asked = false;

	/* a new period costs an IPI per event fd (the daemon's largest cost after the
	 * samples themselves): 5 times a second (once a round with the BPF
	 * program, whose rounds are 4 s apart when nothing asks sooner) is plenty
	 * to break any lock-step between the program and the sampling */
	if (c->o.randomize && tally_now_mono() - c->last_redraw >= c->redraw_s) {
		redraw_periods(c);
		c->last_redraw = tally_now_mono();
	}

	/* the samples counted in the kernel, read before the rings: every record
	 * they may need (a fork, an exec, an mmap) is then in what the rings hold */
	const struct sb_key *sk = NULL;
	const struct sb_val *sv = NULL;
	size_t nsb = 0;
	int sberr = 0;
#ifdef TALLY_HAVE_BPF
	if (c->sbpf)
		sberr = tally_sample_bpf_drain(c->sbpf, &sk, &sv, &nsb);
#endif

	c->stage_len = 0;
	c->nruns = 0;
	/* a record that asked for a round soon, found by a look or among those no
	 * look saw: the rounds are 200 ms apart for a second (a new program's first
	 * samples, a JIT's, are taken while it lives) */
	bool asked = c->sb_asked;
	c->sb_asked = false;
	for (size_t i = 0; i < c->nrings; i++) {
		size_t before = c->stage_len;
		struct ring *r = &c->rings[i];
		uint64_t tail = ((const struct perf_event_mmap_page *)r->base)->data_tail;
		read_ring(c, r);
		if (c->sbpf && !asked) {
			size_t seen = r->peeked > tail ? (size_t)(r->peeked - tail) : 0;
			if (before + seen < c->stage_len)
				asked = stage_asks(c, before + seen, c->stage_len);
		}
		if (c->stage_len > before) {
			GROW(c->runs, c->aruns, c->nruns + 1);
			c->runs[c->nruns++] = before; /* a byte offset for now */
		}
	}
	c->nrefs = 0;
	size_t run = 0;
	for (size_t off = 0; off + sizeof(struct perf_event_header) <= c->stage_len;) {
		if (run < c->nruns && c->runs[run] == off)
			c->runs[run++] = c->nrefs; /* now an index into refs */
		const struct perf_event_header *h = (const void *)(c->stage + off);
		if (h->size < sizeof(*h) || off + h->size > c->stage_len)
			break; /* cannot happen with a sane kernel; never read past what we copied */
		uint64_t t = 0;
		if (h->type == PERF_RECORD_SAMPLE && h->size >= sizeof(*h) + 32)
			t = ((const uint64_t *)(h + 1))[3];
		else if (h->size >= sizeof(*h) + c->sample_trailer)
			t = *(const uint64_t *)((const char *)h + h->size - c->sample_trailer + 8);
		GROW(c->refs, c->arefs, c->nrefs + 1);
		c->refs[c->nrefs++] = (struct recref){ t, off };
		off += h->size;
	}
	/* the counts need an order only among records of the rings */
	bool alone = !c->nrefs;
	if (c->sbpf && asked)
		c->sb_busy_until = c->last_round + 1.0;
#ifdef TALLY_HAVE_BPF
	if (c->sbpf) {
		bool full = asked_now || c->last_round - c->sb_last_full >= COUNTED_FULL_S;
		if (full)
			c->sb_last_full = c->last_round;
		bool *taken = counted_taken(c, sk, nsb, full);
		tally_sample_bpf_commit(c->sbpf, taken);
		if (nsb)
			stage_counted(c, sk, sv, nsb, taken, !alone);
	}
#endif
	/* records from different CPUs interleave in time: a fork on one CPU must be seen
	 * before the child's first sample on another */
	if (!alone)
		merge_runs(c);
	/* within one ring, side-band records can carry a time slightly before the sample
	 * written ahead of them: nearly sorted, so insertion finishes the job cheaply */
	for (size_t i = 1; !alone && i < c->nrefs; i++) {
		struct recref x = c->refs[i];
		size_t j = i;
		while (j > 0 && cmp_ref(&c->refs[j - 1], &x) > 0) {
			c->refs[j] = c->refs[j - 1];
			j--;
		}
		c->refs[j] = x;
	}
	for (size_t i = 0; i < c->nrefs; i++)
		deliver(c, (const void *)(c->stage + c->refs[i].off), fn, ctx);
	if (c->bpf) {
		drain_bpf(c, c->off_flush, fn, ctx);
		c->off_flush = false;
	}
	if (c->off && c->off_flush) {
		/* stopped or paused: the tasks still off count up to the last record
		 * (tally's own switches keep it close to now) */
		tally_offcpu_flush(c->off, c->max_time, fn, ctx);
		c->off_flush = false;
	}
	if (c->sbpf)
		take_intervals(c);
	return sberr ? sberr : (int)c->nrefs;
}

void tally_collector_periods(const struct tally_collector *c, int event, uint64_t *min,
			     uint64_t *max, double *mean)
{
	if (!c) {
		*min = *max = 0;
		*mean = 0;
		return;
	}
	const struct period_stats *s = &c->ps[event];
	*min = s->n ? s->min : 0;
	*max = s->n ? s->max : 0;
	*mean = s->n ? s->sum / (double)s->n : 0;
}

size_t tally_collector_intervals(struct tally_collector *c, int event, uint64_t *p10, uint64_t *p50, uint64_t *p90)
{
	*p10 = *p50 = *p90 = 0;
	if (!c)
		return 0;
	struct period_stats *s = &c->ps[event];
	if (!s->nivals)
		return 0;
	tally_qsort(s->ivals, s->nivals, sizeof(uint64_t), tally_cmp_u64);
	*p10 = s->ivals[s->nivals / 10];
	*p50 = s->ivals[s->nivals / 2];
	*p90 = s->ivals[s->nivals * 9 / 10];
	return s->nivals;
}

uint64_t tally_collector_mean_period(const struct tally_collector *c, int event)
{
	return c ? c->mean_period[event] : 0;
}

void tally_collector_free(struct tally_collector *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nrings; i++)
		munmap(c->rings[i].base, c->rings[i].size);
	for (size_t i = 0; i < c->nfds; i++)
		close(c->fds[i].fd);
	free(c->rings);
	free(c->fds);
	tally_hidx_release(&c->ids);
	free(c->mean_period);
	free(c->mean_cpu);
	free(c->freq_cpu);
	free(c->cpu_on);
	free(c->ps);
	free(c->last);
	free(c->stage);
	free(c->refs);
	free(c->tmp);
	free(c->runs);
	free(c->pfd);
	free(c->peek_buf);
	tally_offcpu_free(c->off);
#ifdef TALLY_HAVE_BPF
	tally_offcpu_bpf_free(c->bpf);
	tally_sample_bpf_free(c->sbpf);
	tally_watch_bpf_free(c->watch);
#endif
	free(c->sb_seen);
	free(c->sb_pids);
	free(c->sb_exited);
	free(c->sb_taken);
	free(c);
}

bool tally_collector_offcpu_stats(const struct tally_collector *c, struct tally_offcpu_stats *st)
{
	tally_offcpu_stats(c ? c->off : NULL, st);
	return c && c->off;
}

void tally_collector_rounds(const struct tally_collector *c, uint64_t *rounds, uint64_t *looks, uint64_t *asked)
{
	*rounds = c->rounds;
	*looks = c->looks;
	if (asked)
		*asked = c->rounds_asked;
}

bool tally_collector_watch(const struct tally_collector *c, uint64_t *told, uint64_t *bursts, const char **why)
{
	*told = c ? c->watch_told : 0;
	*bursts = c ? c->watch_bursts : 0;
	*why = c && !c->watch && c->watch_why[0] ? c->watch_why : NULL;
	return c && c->watch;
}

void tally_collector_watch_program(struct tally_collector *c, uint32_t dev, uint64_t ino, uint32_t gen)
{
#ifdef TALLY_HAVE_BPF
	if (c && c->watch) {
		struct wb_file f = { .ino = ino, .dev = dev, .gen = gen };
		tally_watch_bpf_close(c->watch, &f); /* a full table: such a program's starts are looked at later */
	}
#else
	(void)c, (void)dev, (void)ino, (void)gen;
#endif
}

void tally_collector_watch_forget(struct tally_collector *c)
{
#ifdef TALLY_HAVE_BPF
	if (c && c->watch)
		tally_watch_bpf_forget(c->watch);
#else
	(void)c;
#endif
}

enum tally_sample_mech tally_collector_sample_mech(const struct tally_collector *c)
{
	return c && c->sbpf ? TALLY_SAMPLE_BPF : TALLY_SAMPLE_RING;
}

const char *tally_sample_mech_name(enum tally_sample_mech m)
{
	return m == TALLY_SAMPLE_BPF ? "bpf" : m == TALLY_SAMPLE_AUTO ? "auto" : "ring";
}

const char *tally_collector_sample_mech_why(const struct tally_collector *c)
{
	return c && c->sb_why[0] ? c->sb_why : NULL;
}

uint64_t tally_collector_sample_overflow(const struct tally_collector *c)
{
	uint64_t n = 0;
#ifdef TALLY_HAVE_BPF
	for (int cpu = 0; c && c->sbpf && cpu < c->o.ncpus; cpu++)
		for (int ev = 0; ev < c->o.nevents && ev < SB_MAX_EVENTS; ev++)
			n += __atomic_load_n(&tally_sample_bpf_slot(c->sbpf, cpu, ev)->ring, __ATOMIC_RELAXED);
#else
	(void)c;
#endif
	return n;
}

uint64_t tally_collector_sample_tables_emptied(const struct tally_collector *c)
{
#ifdef TALLY_HAVE_BPF
	return c && c->sbpf ? tally_sample_bpf_emptied(c->sbpf) : 0;
#else
	(void)c;
	return 0;
#endif
}

const char *tally_collector_offcpu_mech(const struct tally_collector *c, const char **why)
{
	if (why)
		*why = c ? c->off_why : NULL;
	if (!c || c->off_ev < 0)
		return NULL;
	return c->bpf ? "bpf" : "tracepoint";
}
