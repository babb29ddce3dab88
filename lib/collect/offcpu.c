/* Off-CPU intervals from sched_switch records (see offcpu.h, docs/offcpu.md):
 * the tracepoint's format from tracefs, and per task the stack and time of its
 * last switch-out until its next switch-in. */
#define _GNU_SOURCE
#include "tally/offcpu.h"
#include "tally/fprepair.h"
#include "tally/util.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const tracefs_dirs[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

/* The value of "name:VALUE;" after key in line, or -1. */
static long field_num(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	if (!p)
		return -1;
	p += strlen(key);
	char *end;
	errno = 0;
	long v = strtol(p, &end, 10);
	if (errno || end == p || *end != ';' || v < 0)
		return -1;
	return v;
}

int tally_offcpu_parse_format(const char *text, struct tally_offcpu_fmt *f)
{
	memset(f, 0, sizeof(*f));
	long id = -1, pp = -1, ps = -1, pss = -1, np = -1;
	const char *line = text;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[256];
		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
		memcpy(buf, line, len);
		buf[len] = 0;
		if (!strncmp(buf, "ID: ", 4)) {
			char *end;
			id = strtol(buf + 4, &end, 10);
			if (end == buf + 4 || *end)
				id = -1;
		} else if (strstr(buf, " prev_pid;")) {
			pp = field_num(buf, "offset:");
		} else if (strstr(buf, " prev_state;")) {
			ps = field_num(buf, "offset:");
			pss = field_num(buf, "size:");
		} else if (strstr(buf, " next_pid;")) {
			np = field_num(buf, "offset:");
		}
		line = nl ? nl + 1 : NULL;
	}
	if (id < 0 || pp < 0 || ps < 0 || np < 0 || (pss != 4 && pss != 8) || pp > 4096 ||
	    ps > 4096 || np > 4096)
		return tally_seterr(
			-EINVAL,
			"the format of tracepoint 'sched:sched_switch' lacks prev_pid, prev_state or next_pid");
	f->id = (uint64_t)id;
	f->prev_pid_off = (uint32_t)pp;
	f->prev_state_off = (uint32_t)ps;
	f->prev_state_size = (uint32_t)pss;
	f->next_pid_off = (uint32_t)np;
	uint32_t m = f->prev_pid_off + 4;
	if (f->prev_state_off + f->prev_state_size > m)
		m = f->prev_state_off + f->prev_state_size;
	if (f->next_pid_off + 4 > m)
		m = f->next_pid_off + 4;
	f->min_size = m;
	return 0;
}

int tally_offcpu_format(struct tally_offcpu_fmt *f, bool may_mount)
{
	struct strbuf sb = STRBUF_INIT;
	char path[128];
	int ret = -ENOENT;
	for (int attempt = 0; attempt < 2 && ret; attempt++) {
		for (size_t i = 0; i < ARRAY_SIZE(tracefs_dirs) && ret; i++) {
			snprintf(path, sizeof(path), "%s/events/sched/sched_switch/format",
				 tracefs_dirs[i]);
			if (access(path, F_OK) == 0)
				ret = strbuf_read_file(&sb, path, 1 << 16);
		}
		/* not mounted: mount it where the kernel makes room for it (perf does the same) */
		if (ret == -ENOENT && attempt == 0 && may_mount && geteuid() == 0 &&
		    mount("nodev", tracefs_dirs[0], "tracefs", 0, NULL) < 0)
			break;
	}
	if (ret == -ENOENT) {
		strbuf_release(&sb);
		return tally_seterr(
			-ENOENT,
			"cannot record off-CPU time: tracefs is not mounted (as root: 'mount -t tracefs nodev /sys/kernel/tracing')");
	}
	if (ret) {
		strbuf_release(&sb);
		return tally_seterr(
			ret, "cannot record off-CPU time: cannot read '%s': %s (run as root)", path,
			strerror(-ret));
	}
	ret = tally_offcpu_parse_format(sb.buf, f);
	strbuf_release(&sb);
	return ret;
}

int tally_offcpu_parse_raw(const struct tally_offcpu_fmt *f, const void *raw, size_t len,
			   struct tally_switch *sw)
{
	if (len < f->min_size)
		return -EINVAL;
	const char *p = raw;
	memcpy(&sw->prev_pid, p + f->prev_pid_off, 4);
	memcpy(&sw->next_pid, p + f->next_pid_off, 4);
	if (f->prev_state_size == 8) {
		memcpy(&sw->prev_state, p + f->prev_state_off, 8);
	} else {
		int32_t s;
		memcpy(&s, p + f->prev_state_off, 4);
		sw->prev_state = s;
	}
	return 0;
}

enum tally_wait tally_offcpu_wait_kind(int64_t prev_state)
{
	/* the tracepoint reports TASK_REPORT bits (S 0x1, D 0x2, T 0x4, t 0x8, X 0x10,
	 * Z 0x20, P 0x40, I 0x80) or 0x100 for a preemption; none: runnable */
	if (prev_state & 0x100)
		return TALLY_WAIT_PREEMPTED;
	if (prev_state & 0x30)
		return TALLY_WAIT_EXIT;
	if (!(prev_state & 0xff))
		return TALLY_WAIT_PREEMPTED;
	return TALLY_WAIT_BLOCKED;
}

struct pend {
	uint32_t tid, pid;
	bool pending;
	enum tally_wait kind;
	uint16_t misc;
	uint32_t cpu;
	uint64_t time, ip;
	uint64_t nr, nregs, stack_len, regs_mask;
	uint64_t *chain;
	size_t achain;
	uint64_t *regs;
	size_t aregs;
	uint8_t *stack;
	size_t astack;
};

struct tally_offcpu {
	int ev[2]; /* blocked, preempted */
	uint64_t min_ns;
	struct pend *p;
	size_t np, ap;
	struct tally_hidx idx; /* tid -> p */
	size_t npending;
	size_t ndead; /* slots of tasks that ended (tid 0): dropped when they are many */
	struct tally_offcpu_stats st;
	struct tally_offcpu_stats kst; /* the BPF program's own counters (dropped, lost, nostack) */
	uint64_t *chain;               /* tally_offcpu_add's call chain */
	size_t achain;
};

struct tally_offcpu *tally_offcpu_new(int ev_blocked, int ev_preempted, uint64_t min_ns)
{
	struct tally_offcpu *o = xcalloc(1, sizeof(*o));
	o->ev[0] = ev_blocked;
	o->ev[1] = ev_preempted >= 0 ? ev_preempted : ev_blocked;
	o->min_ns = min_ns;
	return o;
}

static void pend_release(struct pend *p)
{
	free(p->chain);
	free(p->regs);
	free(p->stack);
	p->chain = NULL;
	p->regs = NULL;
	p->stack = NULL;
	p->achain = p->aregs = p->astack = 0;
}

void tally_offcpu_free(struct tally_offcpu *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->np; i++)
		pend_release(&o->p[i]);
	free(o->p);
	free(o->chain);
	tally_hidx_release(&o->idx);
	free(o);
}

static bool tid_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_offcpu *o = ctx;
	return o->p[idx].tid == *(const uint32_t *)key;
}

static struct pend *find(struct tally_offcpu *o, uint32_t tid, bool create)
{
	uint32_t i = tally_hidx_get(&o->idx, tally_hash_u64(tid), &tid, tid_eq, o);
	if (i != TALLY_HIDX_NONE)
		return &o->p[i];
	if (!create)
		return NULL;
	GROW(o->p, o->ap, o->np + 1);
	memset(&o->p[o->np], 0, sizeof(o->p[0]));
	o->p[o->np].tid = tid;
	tally_hidx_put(&o->idx, tally_hash_u64(tid), (uint32_t)o->np);
	return &o->p[o->np++];
}

static void set_pending(struct tally_offcpu *o, struct pend *p, bool on)
{
	if (p->pending != on)
		o->npending += on ? 1 : (size_t)-1;
	p->pending = on;
}

/* The slots of tasks that ended, once they are most of the table: a daemon
 * sees tasks come and go for days. */
static void compact(struct tally_offcpu *o)
{
	if (o->ndead < 1024 || o->ndead * 2 < o->np)
		return;
	size_t n = 0;
	tally_hidx_release(&o->idx);
	memset(&o->idx, 0, sizeof(o->idx));
	for (size_t i = 0; i < o->np; i++) {
		if (!o->p[i].tid)
			continue;
		o->p[n] = o->p[i];
		tally_hidx_put(&o->idx, tally_hash_u64(o->p[n].tid), (uint32_t)n);
		n++;
	}
	o->np = n;
	o->ndead = 0;
}

/* Task tid ended: its slot is emptied (found no more), freed by compact. */
static void forget(struct tally_offcpu *o, uint32_t tid)
{
	struct pend *p = find(o, tid, false);
	if (!p)
		return;
	set_pending(o, p, false);
	pend_release(p);
	p->tid = 0;
	o->ndead++;
	compact(o);
}

void tally_offcpu_out(struct tally_offcpu *o, const struct tally_rec *s, int64_t prev_state)
{
	if (!s->tid)
		/* the idle task: never delivered (tally_offcpu_in), and tid 0 marks a free slot */
		return;
	enum tally_wait k = tally_offcpu_wait_kind(prev_state);
	if (k == TALLY_WAIT_EXIT) {
		/* its last switch: it will not come back */
		forget(o, s->tid);
		return;
	}
	struct pend *p = find(o, s->tid, true);
	set_pending(o, p, true);
	p->pid = s->pid;
	p->kind = k;
	p->misc = s->misc;
	p->cpu = s->cpu;
	p->time = s->time;
	p->ip = s->ip;
	p->nr = s->nr;
	if (s->nr) {
		GROW(p->chain, p->achain, s->nr);
		memcpy(p->chain, s->chain, s->nr * sizeof(uint64_t));
	}
	p->nregs = s->regs ? s->nregs : 0;
	p->regs_mask = s->regs_mask;
	if (p->nregs) {
		GROW(p->regs, p->aregs, p->nregs);
		memcpy(p->regs, s->regs, p->nregs * sizeof(uint64_t));
	}
	p->stack_len = s->stack ? s->stack_len : 0;
	if (p->stack_len) {
		GROW(p->stack, p->astack, p->stack_len);
		memcpy(p->stack, s->stack, p->stack_len);
	}
}

static void deliver(struct tally_offcpu *o, struct pend *p, uint64_t time, uint32_t cpu,
		    tally_rec_fn fn, void *ctx)
{
	set_pending(o, p, false);
	uint64_t d = time > p->time ? time - p->time : 0;
	if (d < o->min_ns || !d) {
		o->st.dropped++;
		o->st.dropped_ns += d;
		return;
	}
	int k = p->kind == TALLY_WAIT_PREEMPTED;
	o->st.waits[k]++;
	o->st.ns[k] += d;
	struct tally_rec r;
	memset(&r, 0, sizeof(r));
	r.type = PERF_RECORD_SAMPLE;
	r.misc = p->misc;
	r.event = o->ev[k];
	r.pid = p->pid;
	r.tid = p->tid;
	r.cpu = cpu;
	/* the switch-out's time: the stack and the maps it resolves in are of then */
	r.time = p->time;
	r.ip = p->ip;
	r.period = d;
	r.weight = d;
	r.nr = p->nr;
	r.chain = p->nr ? p->chain : NULL;
	r.regs = p->nregs ? p->regs : NULL;
	r.nregs = p->nregs;
	r.regs_mask = p->regs_mask;
	r.stack = p->stack_len ? p->stack : NULL;
	r.stack_len = p->stack_len;
	fn(ctx, &r);
}

void tally_offcpu_in(struct tally_offcpu *o, uint32_t tid, uint64_t time, uint32_t cpu,
		     tally_rec_fn fn, void *ctx)
{
	if (!tid)
		return; /* the idle task */
	struct pend *p = find(o, tid, false);
	if (!p || !p->pending) {
		/* only a target's switch-outs are recorded: a switch-in of any other task
		 * comes here too. Count only the tasks we have seen. */
		if (p)
			o->st.unmatched++;
		return;
	}
	deliver(o, p, time, cpu, fn, ctx);
}

void tally_offcpu_exit(struct tally_offcpu *o, uint32_t tid)
{
	forget(o, tid);
}

void tally_offcpu_flush(struct tally_offcpu *o, uint64_t time, tally_rec_fn fn, void *ctx)
{
	for (size_t i = 0; i < o->np && o->npending; i++)
		if (o->p[i].pending)
			deliver(o, &o->p[i], time, o->p[i].cpu, fn, ctx);
}

void tally_offcpu_stats(const struct tally_offcpu *o, struct tally_offcpu_stats *st)
{
	if (!o) {
		memset(st, 0, sizeof(*st));
		return;
	}
	*st = o->st;
	st->pending = o->npending;
	st->dropped += o->kst.dropped;
	st->dropped_ns += o->kst.dropped_ns;
	st->lost = o->kst.lost;
	st->lost_ns = o->kst.lost_ns;
	st->nostack = o->kst.nostack;
	st->turnovers = o->kst.turnovers;
	st->noslice = o->kst.noslice;
}

int tally_offcpu_parse_mech(const char *s, enum tally_offcpu_mech *out)
{
	static const char *const names[] = { "auto", "bpf", "tracepoint" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			*out = (enum tally_offcpu_mech)i;
			return 0;
		}
	return tally_seterr(-EINVAL,
			    "unknown off-CPU mechanism '%s' (known: auto, bpf, tracepoint)", s);
}

void tally_offcpu_add(struct tally_offcpu *o, const struct tally_offcpu_entry *e, uint64_t time,
		      tally_rec_fn fn, void *ctx)
{
	if (!e->count || !e->ns || !e->nips || !e->ips[0] || !e->tid) {
		/* nothing to put anywhere: counted, never silently lost */
		o->st.dropped += e->count;
		o->st.dropped_ns += e->ns;
		return;
	}
	int k = e->preempted;
	o->st.waits[k] += e->count;
	o->st.ns[k] += e->ns;
	struct tally_rec r;
	memset(&r, 0, sizeof(r));
	r.type = PERF_RECORD_SAMPLE;
	r.misc = e->kernel ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER;
	r.event = o->ev[k];
	r.pid = e->tgid;
	r.tid = e->tid;
	r.time = time;
	r.ip = e->ips[0];
	r.period = e->ns;
	r.weight = e->ns;
	r.count = e->count;
	/* as from the tracepoint: the user chain, none for a kernel thread */
	if (e->chain && !e->kernel) {
		GROW(o->chain, o->achain, e->nips + 1);
		o->chain[0] = PERF_CONTEXT_USER;
		memcpy(o->chain + 1, e->ips, e->nips * sizeof(uint64_t));
		r.nr = e->nips + 1;
		r.chain = o->chain;
		if (e->regs) {
			r.regs = e->regs;
			r.nregs = 3;
			r.regs_mask = tally_unwind_fp_regs_mask();
			r.stack = e->stack;
			r.stack_len = e->stack_len;
		}
	}
	fn(ctx, &r);
}

void tally_offcpu_kernel_counts(struct tally_offcpu *o, const struct tally_offcpu_stats *k)
{
	o->kst.dropped = k->dropped;
	o->kst.dropped_ns = k->dropped_ns;
	o->kst.lost = k->lost;
	o->kst.lost_ns = k->lost_ns;
	o->kst.nostack = k->nostack;
	o->kst.turnovers = k->turnovers;
	o->kst.noslice = k->noslice;
}

size_t tally_offcpu_slots(const struct tally_offcpu *o)
{
	return o ? o->np : 0;
}
