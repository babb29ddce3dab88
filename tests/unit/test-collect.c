/* Unit tests for the collector (lib/collect): the rings' reading, looks and
 * time-ordered merge over rings the test writes itself (ring.c), and a
 * collector opened on a software event of the test's own process
 * (tally_collector_*), which skips where perf events cannot be opened. */
#define _GNU_SOURCE
#include "unit.h"

#include <linux/perf_event.h>
#include <math.h>
#include <sys/mman.h>
#include <time.h>

#include "tally/collect.h"
#include "lib/collect/ring.h"

#define DATA 4096 /* bytes of data per test ring: small, so records wrap */

/* A ring of the kernel's layout: the metadata page, then DATA bytes. */
static void *fake_ring(size_t pagesz)
{
	void *m = mmap(NULL, pagesz + DATA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	assert_true(m != MAP_FAILED);
	return m;
}

/* Writes a record at the ring's head, across the end of the data if it
 * must, as the kernel does. */
static void ring_write(void *base, size_t pagesz, const void *rec, size_t len)
{
	struct perf_event_mmap_page *meta = base;
	char *data = (char *)base + pagesz;
	uint64_t head = meta->data_head;
	for (size_t i = 0; i < len; i++)
		data[(head + i) % DATA] = ((const char *)rec)[i];
	meta->data_head = head + len;
}

/* A sample record as a ring holds it (sample_type IDENTIFIER, IP, TID,
 * TIME, CPU, PERIOD): ip marks it. */
struct fake_sample {
	struct perf_event_header h;
	uint64_t id, ip;
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu, res;
	uint64_t period;
};

/* A side-band record (a comm) with its sample_id trailer: pid/tid, time,
 * cpu, id. */
struct fake_comm {
	struct perf_event_header h;
	uint32_t pid, tid;
	char comm[16];
	uint32_t tpid, ttid;
	uint64_t time;
	uint32_t cpu, res;
	uint64_t id;
};

static void put_sample(void *base, size_t pagesz, uint64_t time, uint64_t ip)
{
	struct fake_sample s = { .h = { PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, sizeof(s) },
				 .id = 1, .ip = ip, .pid = 7, .tid = 7, .time = time,
				 .period = 1000 };
	ring_write(base, pagesz, &s, sizeof(s));
}

static void put_comm(void *base, size_t pagesz, uint64_t time, uint32_t pid)
{
	struct fake_comm c = { .h = { PERF_RECORD_COMM, 0, sizeof(c) }, .pid = pid, .tid = pid,
			       .comm = "work", .tpid = pid, .ttid = pid, .time = time };
	ring_write(base, pagesz, &c, sizeof(c));
}

/* The time of staged record i. */
static uint64_t rec_time(const struct rings *rs, size_t i)
{
	const struct perf_event_header *h = rings_rec(rs, i);
	if (h->type == PERF_RECORD_SAMPLE)
		return ((const struct fake_sample *)h)->time;
	return ((const struct fake_comm *)h)->time;
}

/* Two CPUs' rings, each in time order but for a side-band record written
 * after a sample it precedes, one record across the end of a ring: a round
 * takes every record once, frees the rings and hands them over in one
 * time order. */
static void test_collect__ring_merge(void **state)
{
	(void)state;
	size_t pagesz = (size_t)sysconf(_SC_PAGESIZE);
	struct rings rs;
	rings_init(&rs, pagesz, DATA, 32);
	void *a = fake_ring(pagesz), *b = fake_ring(pagesz);
	rings_add(&rs, -1, 0, a);
	rings_add(&rs, -1, 1, b);
	/* ring a starts near the end of its data: its third record wraps */
	struct perf_event_mmap_page *ma = a;
	ma->data_head = ma->data_tail = 10 * DATA - 2 * sizeof(struct fake_sample) - 8;
	put_sample(a, pagesz, 100, 0xa1);
	put_sample(a, pagesz, 300, 0xa3);
	put_sample(a, pagesz, 500, 0xa5);
	put_comm(a, pagesz, 450, 42); /* its time is before the sample written ahead of it */
	put_sample(a, pagesz, 700, 0xa7);
	put_sample(b, pagesz, 200, 0xb2);
	put_comm(b, pagesz, 400, 43);
	put_sample(b, pagesz, 600, 0xb6);
	assert_true(rings_pending(&rs));
	assert_false(rings_read(&rs, NULL, NULL));
	assert_false(rings_pending(&rs));
	assert_int_equal(ma->data_tail, ma->data_head);
	assert_int_equal(rs.nrefs, 8);
	assert_int_equal(rs.nruns, 2);
	rings_merge(&rs);
	static const uint64_t want[] = { 100, 200, 300, 400, 450, 500, 600, 700 };
	for (size_t i = 0; i < rs.nrefs; i++)
		assert_int_equal(rec_time(&rs, i), want[i]);
	/* the wrapped sample is whole */
	const struct fake_sample *s = (const void *)rings_rec(&rs, 5);
	assert_int_equal(s->ip, 0xa5);
	assert_int_equal(s->h.size, sizeof(*s));
	/* a round with nothing new takes nothing */
	assert_false(rings_read(&rs, NULL, NULL));
	assert_int_equal(rs.nrefs, 0);
	rings_release(&rs);
}

/* Records a mechanism stages among the rings' are one more run, sorted
 * when asked to be. */
static void test_collect__ring_staged_run(void **state)
{
	(void)state;
	size_t pagesz = (size_t)sysconf(_SC_PAGESIZE);
	struct rings rs;
	rings_init(&rs, pagesz, DATA, 32);
	void *a = fake_ring(pagesz);
	rings_add(&rs, -1, 0, a);
	put_sample(a, pagesz, 100, 1);
	put_comm(a, pagesz, 300, 9);
	rings_read(&rs, NULL, NULL);
	size_t first = rs.nrefs;
	rings_reserve(&rs, 2, sizeof(struct fake_sample));
	struct fake_sample x = { .h = { PERF_RECORD_SAMPLE, 0, sizeof(x) }, .time = 400, .ip = 4 };
	struct fake_sample y = { .h = { PERF_RECORD_SAMPLE, 0, sizeof(y) }, .time = 200, .ip = 2 };
	rings_put(&rs, &x, sizeof(x), x.time);
	rings_put(&rs, &y, sizeof(y), y.time);
	rings_end_run(&rs, first, true);
	rings_merge(&rs);
	static const uint64_t want[] = { 100, 200, 300, 400 };
	assert_int_equal(rs.nrefs, 4);
	for (size_t i = 0; i < rs.nrefs; i++)
		assert_int_equal(rec_time(&rs, i), want[i]);
	rings_release(&rs);
}

static bool ask_pid42(void *ctx, const struct perf_event_header *h)
{
	(*(int *)ctx)++;
	return h->type == PERF_RECORD_COMM && ((const struct fake_comm *)h)->pid == 42;
}

/* A look walks the records waiting once, without taking them: a record
 * that asks says so, one it saw is not asked again (by the next look or
 * the round), and a quarter-full ring makes a round. */
static void test_collect__ring_look(void **state)
{
	(void)state;
	size_t pagesz = (size_t)sysconf(_SC_PAGESIZE);
	struct rings rs;
	rings_init(&rs, pagesz, DATA, 32);
	void *a = fake_ring(pagesz);
	rings_add(&rs, -1, 0, a);
	int asks = 0;
	bool asked = false;
	double fill;
	put_sample(a, pagesz, 100, 1);
	put_comm(a, pagesz, 200, 41);
	assert_false(rings_look(&rs, 0.5, ask_pid42, &asks, &asked, &fill));
	assert_false(asked);
	assert_int_equal(asks, 1); /* the comm only: a sample never asks */
	/* 120 bytes in 0.5 s, the ring 4096 bytes: full in about 16.6 s more */
	size_t used = sizeof(struct fake_sample) + sizeof(struct fake_comm);
	assert_true(fabs(fill - (double)(DATA - used) * 0.5 / (double)used) < 1e-6);
	put_comm(a, pagesz, 300, 42);
	assert_true(rings_look(&rs, 0.5, ask_pid42, &asks, &asked, &fill));
	assert_true(asked);
	assert_int_equal(asks, 2); /* the first comm was not asked again */
	assert_true(rings_pending(&rs)); /* looked at, not taken */
	/* the round asks only what no look saw: here the comm of pid 42 again
	 * (the look that found it stopped there), not the first */
	asks = 0;
	assert_true(rings_read(&rs, ask_pid42, &asks));
	assert_int_equal(asks, 1);
	assert_int_equal(rs.nrefs, 3);
	/* a quarter full: a round, whatever the records */
	struct perf_event_mmap_page *meta = a;
	while (meta->data_head - meta->data_tail < DATA / 4)
		put_sample(a, pagesz, 400, 1);
	asked = false;
	asks = 0;
	assert_true(rings_look(&rs, 0.5, ask_pid42, &asks, &asked, &fill));
	assert_false(asked);
	assert_int_equal(asks, 0);
	rings_release(&rs);
}

struct got {
	size_t samples, others, foreign;
	uint64_t weight;
	int bad_event;
};

static void on_rec(void *ctx, const struct tally_rec *r)
{
	struct got *g = ctx;
	if (r->type != PERF_RECORD_SAMPLE) {
		g->others++;
		return;
	}
	g->samples++;
	g->weight += r->weight;
	if (r->event != 0)
		g->bad_event = r->event;
	if (r->pid != (uint32_t)getpid())
		g->foreign++;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A collector on task-clock of this process, every 1 ms of its CPU time:
 * enabled, it samples the test's own loop, each sample weighs the period,
 * the rounds are counted; paused, it samples nothing. */
static void test_collect__own_process(void **state)
{
	(void)state;
	const struct tally_event_desc *ev = tally_event_find("task-clock");
	assert_non_null(ev);
	if (tally_event_probe(ev)) {
		fprintf(stderr, "skipped: perf events cannot be opened here: %s\n", tally_errmsg());
		skip();
	}
	int ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	bool *cpus = xcalloc((size_t)ncpus, sizeof(bool));
	for (int i = 0; i < ncpus; i++)
		cpus[i] = true;
	pid_t me = getpid();
	struct tally_collect_opts o = {
		.events = &ev, .nevents = 1, .period = 1000000, .target = TALLY_TARGET_PIDS,
		.pids = &me, .npids = 1, .cpus = cpus, .ncpus = ncpus, .wake_fd = -1,
		.sample_mech = TALLY_SAMPLE_AUTO,
	};
	struct tally_collector *c = NULL;
	int r = tally_collector_open(&c, &o);
	if (r == -EACCES || r == -EPERM) {
		fprintf(stderr, "skipped: %s\n", tally_errmsg());
		free(cpus);
		skip();
	}
	assert_int_equal(r, 0);
	/* auto takes the ring for a process: the program counts the whole system */
	assert_int_equal(tally_collector_sample_mech(c), TALLY_SAMPLE_RING);
	assert_str_has(tally_collector_sample_mech_why(c), "whole system");
	assert_null(tally_collector_offcpu_mech(c, NULL));
	assert_int_equal(tally_collector_mean_period(c, 0), 1000000);
	assert_int_equal(tally_collector_enable(c), 0);
	struct tally_cpu_state st;
	tally_collector_cpu_state(c, 0, &st);
	assert_true(st.sampling);

	/* 100 ms of this process's CPU time: about 100 samples */
	struct got g = { 0 };
	double t0 = cpu_s(), w0 = tally_now_mono();
	volatile uint64_t spin = 0;
	while (cpu_s() - t0 < 0.1) {
		for (int i = 0; i < 100000; i++)
			spin += (uint64_t)i;
		if (tally_now_mono() - w0 > 20)
			fail_msg("100 ms of CPU time took over 20 s here (%.3f s of it)",
				 cpu_s() - t0);
	}
	(void)spin; /* read once: clang counts a volatile only written as unused */
	assert_true(tally_collector_poll(c, 0, on_rec, &g) >= 0);
	if (g.samples < 20)
		fail_msg("%zu samples in 100 ms of CPU time at one a ms (%zu other records)",
			 g.samples, g.others);
	assert_int_equal(g.foreign, 0);
	assert_int_equal(g.bad_event, 0);
	assert_int_equal(g.weight, g.samples * 1000000); /* a fixed period, not randomized */
	uint64_t min, max, rounds, looks;
	double mean;
	tally_collector_periods(c, 0, &min, &max, &mean);
	assert_int_equal(min, 1000000);
	assert_int_equal(max, 1000000);
	tally_collector_rounds(c, &rounds, &looks, NULL);
	assert_int_equal(rounds, 1);
	assert_int_equal(looks, 0);

	/* paused: nothing more is sampled (what came before the pause is read first) */
	assert_int_equal(tally_collector_pause(c, true), 0);
	assert_true(tally_collector_paused(c));
	tally_collector_cpu_state(c, 0, &st);
	assert_false(st.sampling);
	assert_true(tally_collector_poll(c, 0, on_rec, &g) >= 0);
	memset(&g, 0, sizeof(g));
	t0 = cpu_s();
	while (cpu_s() - t0 < 0.02)
		spin += 1;
	assert_true(tally_collector_poll(c, 0, on_rec, &g) >= 0);
	assert_int_equal(g.samples, 0);
	assert_int_equal(tally_collector_disable(c), 0);
	tally_collector_free(c);
	free(cpus);
}

/* Counting in the kernel asked for a process: refused with the way out,
 * before any event is opened. */
static void test_collect__bpf_refused_for_process(void **state)
{
	(void)state;
	const struct tally_event_desc *ev = tally_event_find("cpu-clock");
	bool cpus[1] = { true };
	pid_t me = getpid();
	struct tally_collect_opts o = {
		.events = &ev, .nevents = 1, .freq = 99, .target = TALLY_TARGET_PIDS,
		.pids = &me, .npids = 1,
		.cpus = cpus, .ncpus = 1, .wake_fd = -1, .sample_mech = TALLY_SAMPLE_BPF,
	};
	struct tally_collector *c = NULL;
	assert_int_equal(tally_collector_open(&c, &o), -EINVAL);
	assert_null(c);
	assert_errmsg_has("whole system only");
	assert_errmsg_has("--sample-mechanism ring");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collect__ring_merge),
		cmocka_unit_test(test_collect__ring_staged_run),
		cmocka_unit_test(test_collect__ring_look),
		cmocka_unit_test(test_collect__own_process),
		cmocka_unit_test(test_collect__bpf_refused_for_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
