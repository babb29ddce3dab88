/* The sampling options that tally record and tally daemon share (-F, -c, -e, -C,
 * -g, --call-graph, --per-pid, --no-randomize, --build-id-mmap): parsing, the
 * checks that need the machine (events, the kernel's rate cap, online CPUs),
 * the collector options they make, and the session keys that describe them.
 * One parser, so the two commands accept and refuse the same things. */
#ifndef TALLY_SAMPLING_H
#define TALLY_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/agg.h"
#include "tally/collect.h"
#include "tally/db.h"
#include "tally/options.h"
#include "tally/util.h"

/* The codes of the long-only options in tally_sampling_group. */
enum {
	TALLY_OPT_NORAND = 0x2000,
	TALLY_OPT_PERPID,
	TALLY_OPT_CALLGRAPH,
	TALLY_OPT_BUILDID_MMAP,
	TALLY_OPT_OFFCPU,
	TALLY_OPT_OFFCPU_MIN,
	TALLY_OPT_OFFCPU_MECH,
	TALLY_OPT_SAMPLE_MECH,
};

#define TALLY_SAMPLING_MAX_EVENTS 16
/* Bytes of user stack copied per sample with frame-pointer call graphs, to
 * unwind the functions without a frame pointer at the top of the stack with
 * their CFI (docs/callgraph.md). */
#define TALLY_FP_STACK 2048

struct tally_sampling {
	/* as given on the command line */
	const char *events_arg; /* default "cpu-clock" */
	const char *cpu_arg;    /* NULL: every online CPU */
	uint64_t freq, period;  /* 0 when not given */
	bool randomize, callchain, per_pid, build_id_mmap;
	uint32_t stack_user;    /* --call-graph dwarf: bytes of user stack per sample */
	uint32_t fp_stack;      /* -g, --call-graph fp[,SIZE]: bytes of user stack per sample for the
				 * repair (docs/callgraph.md), TALLY_FP_STACK unless given */
	bool offcpu;            /* --off-cpu: off-cpu and off-cpu-preempted added to the events */
	uint64_t offcpu_min;    /* --off-cpu-min, ns (0: every wait) */
	int offcpu_mech;        /* --off-cpu-mechanism: enum tally_offcpu_mech (offcpu.h) */
	bool offcpu_mech_set;
	/* --sample-mechanism: enum tally_sample_mech (collect.h), default ring */
	int sample_mech;

	/* filled by tally_sampling_resolve */
	const struct tally_event_desc *evs[TALLY_SAMPLING_MAX_EVENTS];
	int nev;
	struct strbuf evnames; /* "cpu-clock,page-faults" */
	bool *cpus;            /* ncpus entries: the CPUs to sample */
	int ncpus;
};

void tally_sampling_init(struct tally_sampling *s);
void tally_sampling_release(struct tally_sampling *s);

/* Handles one option from getopt_long. Returns 1 when opt is a sampling option
 * (taken), 0 when it is not one, -EINVAL with tally_seterr for a bad value. */
int tally_sampling_opt(struct tally_sampling *s, int opt, const char *arg);

/* After parsing: -F and -c together, the events (known, not repeated, samplable
 * here), the kernel's maximum sample rate and the CPUs (offline ones dropped, or
 * refused when named). 0, or -EINVAL (the user's mistake: exit 2) or another
 * -errno (the machine cannot: exit 1), with tally_seterr. */
int tally_sampling_resolve(struct tally_sampling *s);

/* The collector options for these settings (events, rate, call chains, CPUs);
 * the caller sets target, pids and wake_fd. co points into s. */
void tally_sampling_collect_opts(const struct tally_sampling *s, struct tally_collect_opts *co);

/* Comma-separated ranges of the set CPUs ("0-3,6"), appended to sb. */
void tally_cpus_string(const bool *set, int n, struct strbuf *sb);

/* The session keys that say how the samples were taken: format-version, tool,
 * host, kernel, arch, cpus, events, sampling, randomized, period statistics,
 * per-pid, call graph and unwinding figures, max-stack, jit-untrusted; target
 * ("command", "pids 12,34", "system") and command (NULL: none) after arch. The
 * caller adds the times and what is its own. */
void tally_sampling_session(const struct tally_sampling *s, struct tally_collector *col,
			    const struct tally_agg *a, const char *target, const char *command,
			    struct tally_meta *m);

/* The kernel's perf_event_max_sample_rate, or 0 when unreadable. */
uint64_t tally_max_sample_rate(void);

/* The sampling options as an option group (options.h), for a struct
 * tally_sampling context. */
extern const struct tally_optgroup tally_sampling_group;
/* --off-cpu, --off-cpu-min, --off-cpu-mechanism: the same struct
 * tally_sampling as its context (record, the daemon, the job profiler). */
extern const struct tally_optgroup tally_offcpu_group;

#endif
