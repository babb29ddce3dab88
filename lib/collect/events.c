/* The event table (the names record, report and the database use), probing
 * whether this machine can sample an event, and the errors of opening one. */
#define _GNU_SOURCE
#include "tally/collect.h"
#include "tally/offcpu.h"
#include "tally/util.h"
#include "internal.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SW(n, a, c, t, d) { n, a, PERF_TYPE_SOFTWARE, c, t, d, 0 }
#define HW(n, a, c, d) { n, a, PERF_TYPE_HARDWARE, c, false, d, 0 }

const struct tally_event_desc tally_event_table[] = {
	SW("cpu-clock", NULL, PERF_COUNT_SW_CPU_CLOCK, true,
	   "CPU time, from a high-resolution timer per CPU (the default)"),
	SW("task-clock", NULL, PERF_COUNT_SW_TASK_CLOCK, true,
	   "CPU time of the profiled tasks only"),
	SW("page-faults", "faults", PERF_COUNT_SW_PAGE_FAULTS, false,
	   "page faults, minor and major"),
	SW("minor-faults", NULL, PERF_COUNT_SW_PAGE_FAULTS_MIN, false,
	   "page faults served without I/O"),
	SW("major-faults", NULL, PERF_COUNT_SW_PAGE_FAULTS_MAJ, false,
	   "page faults that needed I/O"),
	SW("context-switches", "cs", PERF_COUNT_SW_CONTEXT_SWITCHES, false, "context switches"),
	SW("cpu-migrations", "migrations", PERF_COUNT_SW_CPU_MIGRATIONS, false,
	   "moves of a task to another CPU"),
	SW("alignment-faults", NULL, PERF_COUNT_SW_ALIGNMENT_FAULTS, false,
	   "unaligned accesses fixed up by the kernel"),
	SW("emulation-faults", NULL, PERF_COUNT_SW_EMULATION_FAULTS, false,
	   "instructions emulated by the kernel"),
	HW("cycles", "cpu-cycles", PERF_COUNT_HW_CPU_CYCLES, "CPU cycles (hardware PMU)"),
	HW("instructions", NULL, PERF_COUNT_HW_INSTRUCTIONS, "instructions retired (hardware PMU)"),
	HW("cache-references", NULL, PERF_COUNT_HW_CACHE_REFERENCES,
	   "last-level cache accesses (hardware PMU)"),
	HW("cache-misses", NULL, PERF_COUNT_HW_CACHE_MISSES,
	   "last-level cache misses (hardware PMU)"),
	HW("branches", "branch-instructions", PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
	   "branch instructions retired (hardware PMU)"),
	HW("branch-misses", NULL, PERF_COUNT_HW_BRANCH_MISSES,
	   "mispredicted branches (hardware PMU)"),
	HW("bus-cycles", NULL, PERF_COUNT_HW_BUS_CYCLES, "bus cycles (hardware PMU)"),
	HW("stalled-cycles-frontend", NULL, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
	   "cycles stalled in the front end (hardware PMU)"),
	HW("stalled-cycles-backend", NULL, PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
	   "cycles stalled in the back end (hardware PMU)"),
	HW("ref-cycles", NULL, PERF_COUNT_HW_REF_CPU_CYCLES,
	   "reference cycles, unaffected by frequency scaling (hardware PMU)"),
	{ "off-cpu", NULL, PERF_TYPE_TRACEPOINT, 0, false,
	  "time blocked off the CPU (sleeping, waiting), per stack, from sched:sched_switch (--off-cpu)",
	  TALLY_OFFCPU_BLOCKED },
	{ "off-cpu-preempted", NULL, PERF_TYPE_TRACEPOINT, 0, false,
	  "time runnable but preempted, recorded with off-cpu", TALLY_OFFCPU_PREEMPTED },
};
const size_t tally_event_table_len = ARRAY_SIZE(tally_event_table);

/* the side-band event of opts.sideband_dummy, which never samples */
const struct tally_event_desc collect_dummy_desc = {
	"dummy", NULL, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY, false, "side-band records only", 0
};

const struct tally_event_desc *tally_event_find(const char *name)
{
	for (size_t i = 0; i < tally_event_table_len; i++) {
		const struct tally_event_desc *e = &tally_event_table[i];
		if (!strcmp(e->name, name) || (e->alias && !strcmp(e->alias, name)))
			return e;
	}
	return NULL;
}

long collect_perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group,
		       unsigned long flags)
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

bool collect_exclude_kernel(void)
{
	/* like perf: unprivileged users at paranoid >= 2 may only sample user space */
	return geteuid() != 0 && tally_perf_paranoid() >= 2;
}

int collect_open_error(const struct tally_event_desc *ev, int e, const char *where)
{
	if (ev->type == PERF_TYPE_HARDWARE &&
	    (e == ENOENT || e == EOPNOTSUPP || e == ENODEV || e == EINVAL))
		return tally_seterr(
			-e,
			"cannot sample event '%s': this machine has no hardware PMU for it (use -e cpu-clock, or see 'tally events')",
			ev->name);
	if (e == EACCES || e == EPERM)
		return tally_seterr(
			-e,
			"permission denied opening event '%s' %s: kernel.perf_event_paranoid is %d (run as root, grant CAP_PERFMON, or lower it with 'sysctl kernel.perf_event_paranoid=-1')",
			ev->name, where, tally_perf_paranoid());
	if (e == ESRCH)
		return tally_seterr(-e, "cannot attach to %s: no such process", where);
	if (e == EMFILE)
		return tally_seterr(
			-e, "cannot open event '%s' %s: too many open files (raise 'ulimit -n')",
			ev->name, where);
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
	long fd = collect_perf_open(&a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return collect_open_error(ev, errno, "for this process");
	close((int)fd);
	return 0;
}
