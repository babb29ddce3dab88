/* Off-CPU time from the sched:sched_switch tracepoint (docs/offcpu.md), a
 * mechanism of internal.h: a perf event per CPU (or per task) whose samples
 * are the target's switch-outs, each with the user stack of the task going
 * off, and whose PERF_RECORD_SWITCH records are their switch-ins; the
 * intervals between them come from offcpu.c. Also the part both off-CPU
 * mechanisms share. */
#define _GNU_SOURCE
#include "internal.h"

#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

void offcpu_mech_init(struct tally_collector *c, struct offcpu_mech *o, const struct mech_ops *ops)
{
	o->m.ops = ops;
	o->off = tally_offcpu_new(c->off_ev, c->pre_ev, c->o.offcpu_min);
}

void offcpu_mech_release(struct offcpu_mech *o)
{
	tally_offcpu_free(o->off);
}

void offcpu_mech_pause(struct tally_collector *c, struct mech *m)
{
	(void)c;
	struct offcpu_mech *o = (struct offcpu_mech *)m;
	o->flush = true;
	o->stop = collect_mono_ns();
}

void offcpu_mech_stats(const struct tally_collector *c, const struct mech *m, struct mech_stats *st)
{
	(void)c;
	tally_offcpu_stats(((const struct offcpu_mech *)m)->off, &st->off);
}

struct offcpu_tp {
	struct offcpu_mech om;
	struct tally_offcpu_fmt fmt;
};

/* The sched_switch event: a sample per switch-out of the target's tasks, with
 * the raw fields (prev_pid, prev_state, next_pid) and the user stack of the
 * task going off (the kernel part is always schedule(): left out, see
 * docs/offcpu.md); its switch-ins come as PERF_RECORD_SWITCH records of the
 * same event (context_switch), written when the task is back on a CPU. */
static void tp_attr(const struct tally_collector *c, const struct mech *m,
		    struct perf_event_attr *a)
{
	const struct offcpu_tp *t = (const struct offcpu_tp *)m;
	a->type = PERF_TYPE_TRACEPOINT;
	a->config = t->fmt.id;
	a->freq = 0;
	a->sample_freq = 0;
	a->sample_period = 1;
	a->sample_type |= PERF_SAMPLE_RAW;
	a->wakeup_watermark = (uint32_t)(c->rings.data_size / 4);
	a->context_switch = 1;
	a->sample_type |= PERF_SAMPLE_CALLCHAIN;
	a->exclude_callchain_kernel = 1;
	/* without -g only the first user frame is kept: the place that waited */
	if (!c->o.callchain)
		a->sample_max_stack = 1;
}

/* A sched_switch sample (after its period field, p..end): the switch-out of
 * the task that ran. */
static void tp_sample(struct tally_collector *c, struct mech *m, struct round *rd, struct evfd *f,
		      struct tally_rec *r, const uint64_t *p, const uint64_t *end)
{
	(void)rd, (void)f;
	struct offcpu_tp *t = (struct offcpu_tp *)m;
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
	if (tally_offcpu_parse_raw(&t->fmt, raw, rawsize, &sw))
		return;
	if (sw.prev_pid > 0) {
		if (c->o.stack_user || c->o.leaf_stack)
			mech_user_regs_stack(p, end, collect_regs_mask(c), r);
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
		tally_offcpu_out(t->om.off, r, sw.prev_state);
	}
}

static void tp_sideband(struct tally_collector *c, struct mech *m, struct round *rd,
			const struct tally_rec *r)
{
	(void)c;
	struct offcpu_tp *t = (struct offcpu_tp *)m;
	if (r->type == PERF_RECORD_EXIT)
		tally_offcpu_exit(t->om.off, ((const uint32_t *)(r->raw + 1))[2]);
	/* a task back on a CPU: the record is written by the task itself */
	if ((r->type == PERF_RECORD_SWITCH || r->type == PERF_RECORD_SWITCH_CPU_WIDE) &&
	    !(r->misc & PERF_RECORD_MISC_SWITCH_OUT))
		tally_offcpu_in(t->om.off, r->tid, r->time, r->cpu, rd->fn, rd->ctx);
}

static void tp_finish(struct tally_collector *c, struct mech *m, struct round *rd)
{
	struct offcpu_tp *t = (struct offcpu_tp *)m;
	if (!t->om.flush)
		return;
	/* stopped or paused: the tasks still off count up to the last record
	 * (tally's own switches keep it close to now) */
	tally_offcpu_flush(t->om.off, c->max_time, rd->fn, rd->ctx);
	t->om.flush = false;
}

static void tp_free(struct mech *m)
{
	offcpu_mech_release((struct offcpu_mech *)m);
	free(m);
}

static const struct mech_ops tp_ops = {
	.name = "tracepoint",
	.kind = TALLY_OFFCPU_TRACEPOINT,
	.attr = tp_attr,
	.pause = offcpu_mech_pause,
	.sample = tp_sample,
	.sideband = tp_sideband,
	.finish = tp_finish,
	.stats = offcpu_mech_stats,
	.free = tp_free,
};

int mech_offcpu_tp_open(struct tally_collector *c, struct mech **out)
{
	*out = NULL;
	struct offcpu_tp *t = xcalloc(1, sizeof(*t));
	int ret = tally_offcpu_format(&t->fmt, true);
	if (ret) {
		free(t);
		return ret;
	}
	offcpu_mech_init(c, &t->om, &tp_ops);
	*out = &t->om.m;
	return 0;
}
