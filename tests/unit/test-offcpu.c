/* Unit tests for lib/collect/offcpu.c: the sched_switch format and raw fields,
 * and the state machine that turns switch-outs and switch-ins into off-CPU
 * samples, fed to an aggregate the way the collector does. */
#define _GNU_SOURCE
#include "unit.h"

#include <linux/perf_event.h>

#include "tally/agg.h"
#include "tally/offcpu.h"

/* The format file of a 6.x kernel (its layout is what the parser must read,
 * not the offsets it happens to have) */
static const char format_text[] =
	"name: sched_switch\n"
	"ID: 372\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
	"\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
	"\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n"
	"\n"
	"print fmt: \"prev_comm=%s ...\"\n";

static void test_offcpu__format(void **state)
{
	(void)state;
	struct tally_offcpu_fmt f;
	assert_int_equal(tally_offcpu_parse_format(format_text, &f), 0);
	assert_int_equal(f.id, 372);
	assert_int_equal(f.prev_pid_off, 24);
	assert_int_equal(f.prev_state_off, 32);
	assert_int_equal(f.prev_state_size, 8);
	assert_int_equal(f.next_pid_off, 56);
	assert_int_equal(f.min_size, 60);

	/* a raw record: the fields where the format says */
	unsigned char raw[68];
	memset(raw, 0xee, sizeof(raw));
	int32_t prev = 4242, next = 77;
	int64_t st = 0x100;
	memcpy(raw + 24, &prev, 4);
	memcpy(raw + 32, &st, 8);
	memcpy(raw + 56, &next, 4);
	struct tally_switch sw;
	assert_int_equal(tally_offcpu_parse_raw(&f, raw, sizeof(raw), &sw), 0);
	assert_int_equal(sw.prev_pid, 4242);
	assert_int_equal(sw.next_pid, 77);
	assert_int_equal(sw.prev_state, 0x100);
	/* too short for next_pid: refused, not read past */
	assert_int_equal(tally_offcpu_parse_raw(&f, raw, 59, &sw), -EINVAL);

	/* a format without next_pid is refused with the tracepoint named */
	char *bad = xstrdup(format_text);
	char *np = strstr(bad, " next_pid;");
	memcpy(np, " next_pod;", 10);
	assert_int_equal(tally_offcpu_parse_format(bad, &f), -EINVAL);
	assert_errmsg_has("sched:sched_switch");
	free(bad);
}

static void test_offcpu__wait_kind(void **state)
{
	(void)state;
	assert_int_equal(tally_offcpu_wait_kind(0x1), TALLY_WAIT_BLOCKED);   /* S */
	assert_int_equal(tally_offcpu_wait_kind(0x2), TALLY_WAIT_BLOCKED);   /* D */
	assert_int_equal(tally_offcpu_wait_kind(0x80), TALLY_WAIT_BLOCKED);  /* I */
	assert_int_equal(tally_offcpu_wait_kind(0x0), TALLY_WAIT_PREEMPTED); /* R */
	assert_int_equal(tally_offcpu_wait_kind(0x100), TALLY_WAIT_PREEMPTED); /* R+ */
	assert_int_equal(tally_offcpu_wait_kind(0x10), TALLY_WAIT_EXIT);     /* X */
	assert_int_equal(tally_offcpu_wait_kind(0x20), TALLY_WAIT_EXIT);     /* Z */
}

struct got {
	struct tally_rec r[16];
	uint64_t chain[16][8];
	int n;
};

static void collect(void *ctx, const struct tally_rec *r)
{
	struct got *g = ctx;
	assert_true(g->n < 16);
	g->r[g->n] = *r;
	assert_true(r->nr <= 8);
	if (r->nr)
		memcpy(g->chain[g->n], r->chain, r->nr * sizeof(uint64_t));
	g->n++;
}

static struct tally_rec out_rec(uint32_t tid, uint64_t time, const uint64_t *chain, uint64_t nr)
{
	struct tally_rec s;
	memset(&s, 0, sizeof(s));
	s.type = PERF_RECORD_SAMPLE;
	s.misc = PERF_RECORD_MISC_USER;
	s.pid = 100;
	s.tid = tid;
	s.time = time;
	s.cpu = 1;
	s.ip = chain ? chain[1] : 0x1234;
	s.chain = chain;
	s.nr = nr;
	return s;
}

static void test_offcpu__intervals(void **state)
{
	(void)state;
	struct tally_offcpu *o = tally_offcpu_new(1, 2, 0);
	struct got g = { .n = 0 };
	uint64_t chain[3] = { PERF_CONTEXT_USER, 0x401000, 0x402000 };

	/* blocked at 1000, back at 5000 on another CPU */
	struct tally_rec s = out_rec(101, 1000, chain, 3);
	tally_offcpu_out(o, &s, 0x1);
	chain[1] = 0xdead; /* the state machine keeps its own copy */
	tally_offcpu_in(o, 101, 5000, 0, collect, &g);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.r[0].event, 1);
	assert_int_equal(g.r[0].weight, 4000);
	assert_int_equal(g.r[0].tid, 101);
	assert_int_equal(g.r[0].pid, 100);
	assert_int_equal(g.r[0].nr, 3);
	assert_int_equal(g.chain[0][1], 0x401000);
	/* a second switch-in without a switch-out delivers nothing */
	tally_offcpu_in(o, 101, 6000, 0, collect, &g);
	assert_int_equal(g.n, 1);

	/* preempted: the other event */
	chain[1] = 0x401000;
	s = out_rec(101, 7000, chain, 3);
	tally_offcpu_out(o, &s, 0x100);
	tally_offcpu_in(o, 101, 7500, 1, collect, &g);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.r[1].event, 2);
	assert_int_equal(g.r[1].weight, 500);

	/* a task that has not been seen switching out: not ours, nothing */
	tally_offcpu_in(o, 999, 8000, 1, collect, &g);
	assert_int_equal(g.n, 2);

	/* a dying task's last switch, and an exit, forget what was pending */
	s = out_rec(102, 9000, NULL, 0);
	tally_offcpu_out(o, &s, 0x1);
	tally_offcpu_out(o, &s, 0x20);
	s = out_rec(103, 9000, NULL, 0);
	tally_offcpu_out(o, &s, 0x2);
	tally_offcpu_exit(o, 103);
	tally_offcpu_in(o, 102, 9500, 1, collect, &g);
	tally_offcpu_in(o, 103, 9500, 1, collect, &g);
	assert_int_equal(g.n, 2);

	/* still off at the end: counted up to it */
	s = out_rec(104, 10000, NULL, 0);
	tally_offcpu_out(o, &s, 0x1);
	struct tally_offcpu_stats st;
	tally_offcpu_stats(o, &st);
	assert_int_equal(st.pending, 1);
	tally_offcpu_flush(o, 12500, collect, &g);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.r[2].tid, 104);
	assert_int_equal(g.r[2].weight, 2500);
	assert_int_equal(g.r[2].ip, 0x1234);
	tally_offcpu_stats(o, &st);
	assert_int_equal(st.pending, 0);
	assert_int_equal(st.waits[0], 2);
	assert_int_equal(st.waits[1], 1);
	assert_int_equal(st.ns[0], 4000 + 2500);
	assert_int_equal(st.ns[1], 500);
	/* tid 101's second switch-in; 102 and 103 ended: forgotten, not unmatched */
	assert_int_equal(st.unmatched, 1);
	tally_offcpu_free(o);
}

static void test_offcpu__min(void **state)
{
	(void)state;
	struct tally_offcpu *o = tally_offcpu_new(0, -1, 1000);
	struct got g = { .n = 0 };
	struct tally_rec s = out_rec(5, 0, NULL, 0);
	tally_offcpu_out(o, &s, 0x1);
	tally_offcpu_in(o, 5, 999, 0, collect, &g); /* shorter than the minimum */
	s.time = 2000;
	tally_offcpu_out(o, &s, 0x0);
	tally_offcpu_in(o, 5, 3000, 0, collect, &g); /* exactly the minimum: kept */
	assert_int_equal(g.n, 1);
	assert_int_equal(g.r[0].weight, 1000);
	assert_int_equal(g.r[0].event, 0); /* no preempted event: the blocked one */
	struct tally_offcpu_stats st;
	tally_offcpu_stats(o, &st);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.dropped_ns, 999);
	assert_int_equal(st.waits[1], 1);
	tally_offcpu_free(o);
}


static void to_agg(void *ctx, const struct tally_rec *r)
{
	tally_agg_record(ctx, r);
}

/* The weight of the row whose leaf frame is at offset leaf, event ev. */
static uint64_t row_weight(const struct tally_agg *a, uint64_t leaf, int ev, uint64_t *count)
{
	uint64_t w = 0;
	*count = 0;
	for (size_t i = 0; i < a->nrows; i++) {
		const struct tally_stack *st = &a->stacks[a->rows[i].stack];
		if (a->frames[a->stack_frames[st->first]].offset != leaf)
			continue;
		w += a->weights[i * (size_t)a->nevents + (size_t)ev];
		*count += a->counts[i * (size_t)a->nevents + (size_t)ev];
	}
	return w;
}

/* The aggregate sums the intervals per stack: two waits in one place and
 * six in another come out as their times, not their numbers. */
static void test_offcpu__aggregate_time(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 3, false, false);
	struct tally_offcpu *o = tally_offcpu_new(1, 2, 0);
	uint64_t ca[3] = { PERF_CONTEXT_USER, 0x7000, 0x7100 }; /* block_a <- main */
	uint64_t cb[3] = { PERF_CONTEXT_USER, 0x8000, 0x7100 }; /* block_b <- main */
	uint64_t t = 1000;
	for (int i = 0; i < 2; i++) {
		struct tally_rec s = out_rec(7, t, ca, 3);
		tally_offcpu_out(o, &s, 0x1);
		t += 6000000;
		tally_offcpu_in(o, 7, t, 0, to_agg, &a);
		for (int j = 0; j < 3; j++) {
			s = out_rec(7, t, cb, 3);
			tally_offcpu_out(o, &s, 0x1);
			t += 1000000;
			tally_offcpu_in(o, 7, t, 0, to_agg, &a);
		}
	}
	uint64_t na, nb;
	assert_int_equal(row_weight(&a, 0x7000, 1, &na), 12000000);
	assert_int_equal(row_weight(&a, 0x8000, 1, &nb), 6000000);
	assert_int_equal(na, 2);
	assert_int_equal(nb, 6);
	assert_int_equal(a.samples[1], 8);
	assert_int_equal(a.samples[2], 0);
	tally_offcpu_free(o);
	tally_agg_release(&a);
}

/* Tasks come and go (a daemon, for days): the table keeps the live ones
 * only, and they still find their switch-outs. */
static void test_offcpu__many_tasks(void **state)
{
	(void)state;
	struct tally_offcpu *o = tally_offcpu_new(0, -1, 0);
	struct got g = { .n = 0 };
	for (uint32_t round = 0; round < 20; round++) {
		for (uint32_t t = 1; t <= 3000; t++) {
			uint32_t tid = round * 3000 + t;
			struct tally_rec s = out_rec(tid, 100, NULL, 0);
			tally_offcpu_out(o, &s, 0x1);
			if (t > 10)
				tally_offcpu_exit(o, tid);
		}
	}
	struct tally_offcpu_stats st;
	tally_offcpu_stats(o, &st);
	assert_int_equal(st.pending, 200);
	/* the survivors of the first round are still there */
	for (uint32_t t = 1; t <= 10; t++)
		tally_offcpu_in(o, t, 300, 0, collect, &g);
	assert_int_equal(g.n, 10);
	assert_int_equal(g.r[9].weight, 200);
	/* and the ended ones are gone */
	tally_offcpu_in(o, 11, 300, 0, collect, &g);
	assert_int_equal(g.n, 10);
	/* the table holds far fewer than the 60000 tasks seen */
	assert_true(tally_offcpu_slots(o) < 3000);
	tally_offcpu_free(o);
}

/* An entry of the BPF program's map (waits summed in the kernel) becomes one
 * sample standing for its waits, weighing their time: the aggregate then
 * holds what the tracepoint path's one sample per wait would give. */
static void test_offcpu__bpf_entry(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 3, false, false);
	struct tally_offcpu *o = tally_offcpu_new(1, 2, 0);
	uint64_t ips_a[2] = { 0x7000, 0x7100 }, ips_b[2] = { 0x8000, 0x7100 };
	/* block_a: 2 waits, 12 ms; block_b: 6 waits, 6 ms; preempted: 3, 1 ms */
	struct tally_offcpu_entry ea = { .tgid = 100,
					 .tid = 7,
					 .chain = true,
					 .ns = 12000000,
					 .count = 2,
					 .ips = ips_a,
					 .nips = 2 };
	struct tally_offcpu_entry eb = { .tgid = 100,
					 .tid = 7,
					 .chain = true,
					 .ns = 6000000,
					 .count = 6,
					 .ips = ips_b,
					 .nips = 2 };
	struct tally_offcpu_entry ep = { .tgid = 100,
					 .tid = 8,
					 .preempted = true,
					 .ns = 1000000,
					 .count = 3,
					 .ips = ips_a,
					 .nips = 1 };
	tally_offcpu_add(o, &ea, 5000, to_agg, &a);
	tally_offcpu_add(o, &eb, 5000, to_agg, &a);
	tally_offcpu_add(o, &ep, 5000, to_agg, &a);
	uint64_t na, nb, np;
	assert_int_equal(row_weight(&a, 0x7000, 1, &na), 12000000);
	assert_int_equal(row_weight(&a, 0x8000, 1, &nb), 6000000);
	assert_int_equal(row_weight(&a, 0x7000, 2, &np), 1000000);
	assert_int_equal(na, 2);
	assert_int_equal(nb, 6);
	assert_int_equal(np, 3);
	assert_int_equal(a.samples[1], 8);
	assert_int_equal(a.samples[2], 3);
	struct tally_offcpu_stats st;
	tally_offcpu_stats(o, &st);
	assert_int_equal(st.waits[0], 8);
	assert_int_equal(st.ns[0], 18000000);
	assert_int_equal(st.waits[1], 3);
	assert_int_equal(st.ns[1], 1000000);
	tally_offcpu_free(o);
	tally_agg_release(&a);
}

/* The record itself: the user chain behind PERF_CONTEXT_USER with -g, one ip
 * without, a kernel thread at its kernel ip with no chain, the counts and
 * the kernel's own counters in the stats, an empty entry counted as dropped. */
static void test_offcpu__bpf_entry_rec(void **state)
{
	(void)state;
	struct tally_offcpu *o = tally_offcpu_new(0, 1, 0);
	struct got g = { .n = 0 };
	uint64_t ips[3] = { 0x1000, 0x2000, 0x3000 };
	struct tally_offcpu_entry e = {
		.tgid = 10, .tid = 11, .chain = true, .ns = 500, .count = 4, .ips = ips, .nips = 3
	};
	tally_offcpu_add(o, &e, 77, collect, &g);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.r[0].event, 0);
	assert_int_equal(g.r[0].pid, 10);
	assert_int_equal(g.r[0].tid, 11);
	assert_int_equal(g.r[0].time, 77);
	assert_int_equal(g.r[0].ip, 0x1000);
	assert_int_equal(g.r[0].weight, 500);
	assert_int_equal(g.r[0].count, 4);
	assert_int_equal(g.r[0].misc & PERF_RECORD_MISC_CPUMODE_MASK, PERF_RECORD_MISC_USER);
	assert_int_equal(g.r[0].nr, 4);
	assert_int_equal(g.chain[0][0], PERF_CONTEXT_USER);
	assert_int_equal(g.chain[0][1], 0x1000);
	assert_int_equal(g.chain[0][3], 0x3000);
	/* without call graphs: the one ip, no chain */
	e.chain = false;
	e.nips = 1;
	e.preempted = true;
	tally_offcpu_add(o, &e, 78, collect, &g);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.r[1].event, 1);
	assert_int_equal(g.r[1].nr, 0);
	assert_int_equal(g.r[1].ip, 0x1000);
	/* a kernel thread: its kernel ip, never a user chain */
	e.kernel = true;
	e.chain = true;
	e.nips = 3;
	e.preempted = false;
	tally_offcpu_add(o, &e, 79, collect, &g);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.r[2].misc & PERF_RECORD_MISC_CPUMODE_MASK, PERF_RECORD_MISC_KERNEL);
	assert_int_equal(g.r[2].nr, 0);
	/* nothing to put it at: dropped, counted */
	struct tally_offcpu_entry none = {
		.tgid = 10, .tid = 11, .ns = 900, .count = 2, .ips = ips, .nips = 0
	};
	tally_offcpu_add(o, &none, 80, collect, &g);
	assert_int_equal(g.n, 3);
	struct tally_offcpu_stats k1 = {
		.dropped = 5, .dropped_ns = 50, .lost = 1, .lost_ns = 10, .nostack = 3
	};
	struct tally_offcpu_stats k2 = {
		.dropped = 6, .dropped_ns = 60, .lost = 1, .lost_ns = 10, .nostack = 4
	};
	tally_offcpu_kernel_counts(o, &k1);
	tally_offcpu_kernel_counts(o, &k2); /* cumulative: replaces */
	struct tally_offcpu_stats st;
	tally_offcpu_stats(o, &st);
	assert_int_equal(st.waits[0], 8);
	assert_int_equal(st.waits[1], 4);
	assert_int_equal(st.dropped, 2 + 6);
	assert_int_equal(st.dropped_ns, 900 + 60);
	assert_int_equal(st.lost, 1);
	assert_int_equal(st.lost_ns, 10);
	assert_int_equal(st.nostack, 4);
	tally_offcpu_free(o);
}

static void test_offcpu__mech(void **state)
{
	(void)state;
	enum tally_offcpu_mech m = TALLY_OFFCPU_AUTO;
	assert_int_equal(tally_offcpu_parse_mech("bpf", &m), 0);
	assert_int_equal(m, TALLY_OFFCPU_BPF);
	assert_int_equal(tally_offcpu_parse_mech("tracepoint", &m), 0);
	assert_int_equal(m, TALLY_OFFCPU_TRACEPOINT);
	assert_int_equal(tally_offcpu_parse_mech("auto", &m), 0);
	assert_int_equal(m, TALLY_OFFCPU_AUTO);
	assert_int_equal(tally_offcpu_parse_mech("ebpf", &m), -EINVAL);
	assert_non_null(strstr(tally_errmsg(), "'ebpf'"));
	assert_int_equal(tally_offcpu_parse_mech("", &m), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offcpu__format),
		cmocka_unit_test(test_offcpu__wait_kind),
		cmocka_unit_test(test_offcpu__intervals),
		cmocka_unit_test(test_offcpu__min),
		cmocka_unit_test(test_offcpu__aggregate_time),
		cmocka_unit_test(test_offcpu__many_tasks),
		cmocka_unit_test(test_offcpu__bpf_entry),
		cmocka_unit_test(test_offcpu__bpf_entry_rec),
		cmocka_unit_test(test_offcpu__mech),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
