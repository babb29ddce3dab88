/* The collector's perf event fds (internal.h): their attributes, opening
 * them per CPU and per task (or on the command's cgroup), each CPU's ring
 * with the first, turning them on and off, and the periods set on them. */
#define _GNU_SOURCE
#include "tally/unwind.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static bool id_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_collector *c = ctx;
	return c->fds[idx].id == *(const uint64_t *)key;
}

struct evfd *evfds_find(const struct tally_collector *c, uint64_t id)
{
	uint32_t fi = tally_hidx_get(&c->ids, tally_hash_u64(id), &id, id_eq, c);
	return fi == TALLY_HIDX_NONE ? NULL : &c->fds[fi];
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
	return c->o.use_cgroup && ev >= 0 && (c->per.mean[ev] != 0 || c->o.events[ev]->offcpu);
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
		if (c->per.mean[ev]) {
			a->sample_period = c->o.randomize ? periods_draw(&c->per, c->per.mean[ev])
							  : c->per.mean[ev];
		} else {
			a->freq = 1;
			a->sample_freq = c->o.freq;
		}
	}
	/* the same layout for every event of a ring: the records' sample_id trailer is parsed blind
	 */
	a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
			 PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
	if (c->o.callchain && ev >= 0)
		a->sample_type |= PERF_SAMPLE_CALLCHAIN;
	if ((c->o.stack_user || c->o.leaf_stack) && ev >= 0) {
		a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		a->sample_regs_user = collect_regs_mask(c);
		a->sample_stack_user = c->o.stack_user ? c->o.stack_user : c->o.leaf_stack;
	}
	a->sample_id_all = 1;
	/* sample times on CLOCK_MONOTONIC: comparable with when a period was changed */
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->disabled = 1;
	a->exclude_kernel = collect_exclude_kernel();
	a->exclude_hv = 1;
	a->exclude_callchain_user = 0;
	a->watermark = 1;
	/* samples counted in the kernel leave the rings the side-band records:
	 * each wakes the wait (a new process or file is looked at within a round
	 * of 200 ms, as through the ring; rounds.c spaces the rounds) */
	a->wakeup_watermark = c->samples->ops->counts ? 1 : (uint32_t)(c->rings.data_size / 2);
	if (ev >= 0 && c->o.events[ev]->offcpu)
		c->offcpu->ops->attr(c, c->offcpu, a);
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

/* Opens the events of one (pid, cpu) pair; the first fd on a CPU owns that CPU's ring. */
static int open_one(struct tally_collector *c, pid_t pid, int cpu, int *ring_fd_for_cpu)
{
	/* with sideband_dummy a dummy event carries the side-band records and owns the
	 * ring, so sampling can be switched off on a CPU while processes stay followed */
	for (int ev = c->o.sideband_dummy ? -1 : 0; ev < c->o.nevents; ev++) {
		struct perf_event_attr a;
		bool first = *ring_fd_for_cpu < 0;
		const struct tally_event_desc *d = ev < 0 ? &collect_dummy_desc : c->o.events[ev];
		if (d->offcpu == TALLY_OFFCPU_PREEMPTED)
			continue; /* delivered from off-cpu's records */
		if (d->offcpu && !c->offcpu->ops->attr)
			continue; /* the mechanism has no perf event (the BPF program's) */
		/* side-band records come once per (task, cpu) from the first event */
		setup_attr(c, &a, ev, ev == (c->o.sideband_dummy ? -1 : 0));
		bool cg = cgroup_event(c, ev);
		long fd = collect_perf_open(&a, cg ? c->o.cgroup_fd : pid, cpu, -1,
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
			return collect_open_error(d, e, where);
		}
		GROW(c->fds, c->afds, c->nfds + 1);
		struct evfd *f = &c->fds[c->nfds];
		f->fd = (int)fd;
		f->event = ev;
		f->cpu = cpu;
		f->task = cg ? -1 : pid;
		f->on_exec = a.enable_on_exec;
		f->mech_weighs = false;
		f->kind = d->offcpu ? FD_SWITCH_OUT : FD_SAMPLE;
		period_hist_open(&f->hist, ev >= 0 && !a.freq ? a.sample_period : 0);
		if (ioctl(f->fd, PERF_EVENT_IOC_ID, &f->id) < 0) {
			int e = errno;
			close(f->fd);
			return tally_seterr(-e, "cannot read the id of event '%s': %s", d->name,
					    strerror(e));
		}
		c->nfds++;
		tally_hidx_put(&c->ids, tally_hash_u64(f->id), (uint32_t)(c->nfds - 1));
		if (first) {
			int r = rings_map(&c->rings, f->fd, cpu);
			if (r)
				return r;
			*ring_fd_for_cpu = f->fd;
		} else if (ioctl(f->fd, PERF_EVENT_IOC_SET_OUTPUT, *ring_fd_for_cpu) < 0) {
			return tally_seterr(-errno, "cannot share a ring buffer: %s",
					    strerror(errno));
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

int evfds_open(struct tally_collector *c)
{
	const struct tally_collect_opts *o = &c->o;
	int ret = 0;
	int *ring_of_cpu = xmalloc((size_t)o->ncpus * sizeof(int));
	for (int i = 0; i < o->ncpus; i++)
		ring_of_cpu[i] = -1;
	for (int cpu = 0; cpu < o->ncpus && !ret; cpu++) {
		if (!o->cpus[cpu])
			continue;
		if (o->target == TALLY_TARGET_SYSTEM) {
			ret = open_one(c, -1, cpu, &ring_of_cpu[cpu]);
		} else if (o->target == TALLY_TARGET_CHILD) {
			ret = open_one(c, o->pids[0], cpu, &ring_of_cpu[cpu]);
		} else {
			for (size_t p = 0; p < o->npids && !ret; p++) {
				pid_t *tids;
				size_t ntids;
				ret = list_threads(o->pids[p], &tids, &ntids);
				for (size_t t = 0; t < ntids && !ret; t++)
					ret = open_one(c, tids[t], cpu, &ring_of_cpu[cpu]);
				free(tids);
			}
		}
	}
	free(ring_of_cpu);
	return ret;
}

void evfds_close(struct tally_collector *c)
{
	for (size_t i = 0; i < c->nfds; i++)
		close(c->fds[i].fd);
	free(c->fds);
	c->fds = NULL;
	c->nfds = c->afds = 0;
	tally_hidx_release(&c->ids);
}

static const char *fd_event_name(const struct tally_collector *c, const struct evfd *f)
{
	return f->event < 0 ? collect_dummy_desc.name : c->o.events[f->event]->name;
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

static int control(const struct tally_collector *c, const struct evfd *f, unsigned long req)
{
	/* a task that exited leaves its fd behind: ESRCH is harmless */
	if (ioctl(f->fd, req, 0) < 0 && errno != ESRCH)
		return tally_seterr(-errno, "cannot control event '%s': %s", fd_event_name(c, f),
				    strerror(errno));
	return 0;
}

int evfds_apply(struct tally_collector *c, int cpu)
{
	for (size_t i = 0; i < c->nfds; i++) {
		struct evfd *f = &c->fds[i];
		if (cpu >= 0 && f->cpu != cpu)
			continue;
		int r = control(c, f,
				fd_wanted(c, f) ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE);
		if (r)
			return r;
	}
	return 0;
}

int evfds_switch(struct tally_collector *c, bool on, bool all)
{
	for (size_t i = 0; i < c->nfds; i++) {
		if (on && !all && c->fds[i].on_exec)
			continue; /* the kernel enables it at the command's exec */
		int r = control(c, &c->fds[i], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE);
		if (r)
			return r;
	}
	return 0;
}

int evfds_set_period(struct tally_collector *c, struct evfd *f, uint64_t p)
{
	/* a per-CPU timer event counts the nanoseconds its tasks ran: what it
	 * counted before the change tells how much of the last period was cut
	 * (unless the sample mechanism weighs its samples itself) */
	uint64_t count = UINT64_MAX;
	if (!f->mech_weighs && f->task < 0 && f->event >= 0 && c->o.events[f->event]->time_based &&
	    read(f->fd, &count, sizeof count) != sizeof count)
		count = UINT64_MAX;
	if (ioctl(f->fd, PERF_EVENT_IOC_PERIOD, &p) < 0)
		return -errno;
	if (f->mech_weighs)
		c->samples->ops->period(c, c->samples, f, p);
	/* a sample the ring still gets (the BPF map was full) carries nothing */
	period_hist_set(&f->hist, collect_mono_ns(), p, count, f->mech_weighs);
	return 0;
}

void evfds_redraw(struct tally_collector *c)
{
	for (size_t i = 0; i < c->nfds; i++) {
		if (c->fds[i].event < 0)
			continue;
		uint64_t mean = *periods_cpu(&c->per, c->fds[i].cpu, c->fds[i].event);
		if (!mean)
			continue;
		uint64_t p = periods_draw(&c->per, mean);
		/* a task that exited leaves its fd behind: ESRCH is expected and harmless */
		(void)evfds_set_period(c, &c->fds[i], p);
	}
}
