/* Unit tests for lib/collect/rounds.c: when the collector looks at the
 * records waiting in its rings and when it reads them (docs/sampling.md,
 * "Rounds"), driven with a clock of the test's own, as poll.c drives it
 * with CLOCK_MONOTONIC. */
#define _GNU_SOURCE
#include "unit.h"

#include <math.h>

#include "lib/collect/rounds.h"

#define EPS 1e-9

/* A collector's side of the policy: what poll.c does at each step. */
struct sim {
	struct rounds r;
	double now;
	double timeout; /* the caller's, each poll */
	unsigned polls, rounds_seen, looks_seen;
};

static void sim_init(struct sim *s, bool looks, bool watch)
{
	memset(s, 0, sizeof(*s));
	rounds_init(&s->r, looks, watch);
	s->timeout = ROUNDS_CALM;
}

/* A round at s->now, its records asking for it or not; returns whether it
 * was full. The round itself takes a millisecond. */
static bool sim_round(struct sim *s, bool records_ask)
{
	bool asked = rounds_start(&s->r, s->now);
	s->rounds_seen++;
	bool full = rounds_read(&s->r, asked || records_ask, false);
	s->now += 0.001;
	return full;
}

/* A poll whose wait ends at its deadline with a record waiting in the rings
 * since the poll began (pending) or not; a look finds nothing asking (fill:
 * how soon a ring would be full). Returns what the look or the wait decided
 * (true: a round) and moves the clock to then. */
static bool sim_poll(struct sim *s, bool pending, double fill)
{
	s->polls++;
	rounds_begin(&s->r, s->now);
	struct rounds_next n = rounds_plan(&s->r, s->now, s->now + s->timeout, pending);
	assert_int_equal(n.act, ROUNDS_WAIT);
	assert_true(n.rings == !pending);
	s->now = n.deadline;
	n = rounds_woke(&s->r, s->now, false, 0, 0, pending);
	if (n.act == ROUNDS_ROUND)
		return true;
	assert_int_equal(n.act, ROUNDS_LOOK);
	double since;
	if (rounds_look(&s->r, s->now, &since))
		return true;
	s->looks_seen++;
	return rounds_looked(&s->r, false, false, fill, false);
}

/* Through the ring every wake is a round, and a round at once when the caller asks. */
static void test_rounds__ring_every_wake(void **state)
{
	(void)state;
	struct rounds r;
	rounds_init(&r, false, false);
	rounds_begin(&r, 1.0);
	struct rounds_next n = rounds_plan(&r, 1.0, 1.05, true);
	assert_int_equal(n.act, ROUNDS_WAIT);
	assert_true(fabs(n.deadline - 1.05) < EPS);
	assert_true(n.rings); /* records in the rings wake it: no looks */
	n = rounds_woke(&r, 1.01, false, 0, 0, true);
	assert_int_equal(n.act, ROUNDS_ROUND);
	n = rounds_woke(&r, 1.05, false, 0, 0, false);
	assert_int_equal(n.act, ROUNDS_ROUND);
	n = rounds_plan(&r, 2.0, 2.0, false);
	assert_int_equal(n.act, ROUNDS_ROUND);
	assert_false(rounds_start(&r, 2.0));
	assert_true(rounds_read(&r, true, false));
	assert_true(r.busy_until == 0); /* no second of busy rounds through the ring */
	assert_int_equal(r.rounds, 1);
}

/* Counted in the kernel, nothing in the rings: the caller's timeout (4 s)
 * makes the round, which nothing asked for and which takes every place. */
static void test_rounds__quiet_round_every_4s(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s, true, true);
	for (int i = 0; i < 3; i++) {
		double was = s.now;
		assert_true(sim_poll(&s, false, HUGE_VAL));
		assert_true(fabs(s.now - was - ROUNDS_CALM) < EPS);
		assert_true(sim_round(&s, false));
	}
	assert_int_equal(s.r.rounds, 3);
	assert_int_equal(s.r.rounds_asked, 0);
	assert_int_equal(s.r.nlooks, 0);
}

/* A side-band record that asks for nothing waits: it is looked at 200 ms
 * after the last round or look, and without the exec watch every 200 ms
 * after, until the look 4 s or more after the last round makes one. */
static void test_rounds__looks_without_watch(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s, true, false);
	s.now = 10.0;
	sim_round(&s, false);
	/* the caller's fd makes a look at 10.05 that finds nothing */
	s.now = 10.05;
	rounds_begin(&s.r, s.now);
	struct rounds_next n = rounds_woke(&s.r, s.now, true, 0, 0, true);
	assert_int_equal(n.act, ROUNDS_LOOK);
	double since;
	assert_false(rounds_look(&s.r, s.now, &since));
	assert_true(fabs(since - 0.05) < 1e-6);
	assert_false(rounds_looked(&s.r, false, false, HUGE_VAL, true));
	unsigned looks = 0;
	while (!sim_poll(&s, true, HUGE_VAL)) {
		looks++;
		assert_true(fabs(s.r.look_gap - ROUNDS_GAP) < EPS);
		assert_true(fabs(s.now - (10.05 + ROUNDS_GAP * looks)) < 1e-6);
	}
	/* the round: at the first look 4 s or more after the last round, not asked */
	assert_true(fabs(s.now - 14.05) < 1e-6);
	assert_int_equal(looks, 19);
	assert_int_equal(s.r.nlooks, 20);
	assert_false(s.r.round_asked);
}

/* With the exec watch, looks that find nothing back off: 200 ms, then 400,
 * 800, and a second at most; the round still comes 4 s after the last. */
static void test_rounds__watch_backs_off(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s, true, true);
	sim_round(&s, false);
	s.now = 0.01;
	static const double at[] = { 0.2, 0.6, 1.4, 2.4, 3.4 };
	size_t k = 0;
	while (!sim_poll(&s, true, HUGE_VAL)) {
		assert_true(k < ARRAY_SIZE(at));
		assert_true(fabs(s.now - at[k]) < 1e-6);
		k++;
	}
	assert_int_equal(k, ARRAY_SIZE(at));
	assert_true(fabs(s.now - 4.4) < 1e-6);
	assert_true(fabs(s.r.look_gap - ROUNDS_LOOK_MAX) < EPS);
	sim_round(&s, false);
	/* the gap stays backed off after a round that only the time made */
	assert_true(fabs(s.r.look_gap - ROUNDS_LOOK_MAX) < EPS);
}

/* The looks back off no further than half the time a ring would take to
 * fill at the pace it filled since the last look, nor under 200 ms. */
static void test_rounds__half_ring_bound(void **state)
{
	(void)state;
	struct rounds r;
	rounds_init(&r, true, true);
	r.look_gap = 0.4;
	assert_false(rounds_looked(&r, false, false, 1.0, false));
	assert_true(fabs(r.look_gap - 0.5) < EPS); /* 0.8 asked, 1.0 / 2 allowed */
	assert_false(rounds_looked(&r, false, false, 3.0, false));
	assert_true(fabs(r.look_gap - 1.0) < EPS);
	assert_false(rounds_looked(&r, false, false, 0.1, false));
	assert_true(fabs(r.look_gap - ROUNDS_GAP) < EPS);
	/* without the watch the gap does not move */
	rounds_init(&r, true, false);
	assert_false(rounds_looked(&r, false, false, HUGE_VAL, false));
	assert_true(fabs(r.look_gap - ROUNDS_GAP) < EPS);
}

/* A record that asks (a file new to tally, a JIT's memory) makes a round
 * at the look, and rounds every 200 ms for a second after it, records or
 * not, each counted as asked for. */
static void test_rounds__asked_busy_second(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s, true, true);
	sim_round(&s, false);
	s.r.look_gap = ROUNDS_LOOK_MAX; /* backed off */
	s.now = 2.0;
	double since;
	assert_false(rounds_look(&s.r, s.now, &since));
	assert_true(fabs(since - 2.0) < EPS);
	assert_true(rounds_looked(&s.r, true, true, HUGE_VAL, false));
	assert_true(fabs(s.r.look_gap - ROUNDS_GAP) < EPS); /* 200 ms apart again */
	sim_round(&s, false);
	assert_true(fabs(s.r.busy_until - 3.0) < EPS);
	assert_int_equal(s.r.rounds_asked, 1);
	/* nothing comes: still a round every 200 ms until 3.0 */
	unsigned busy = 0;
	while (s.now < 3.0 - EPS) {
		assert_true(sim_poll(&s, false, HUGE_VAL));
		sim_round(&s, false);
		busy++;
	}
	assert_int_equal(busy, 5);
	assert_int_equal(s.r.rounds_asked, 6);
	/* then the 4 s round again, not asked */
	double was = s.now;
	assert_true(sim_poll(&s, false, HUGE_VAL));
	assert_true(fabs(s.now - was - ROUNDS_CALM) < EPS);
	sim_round(&s, false);
	assert_int_equal(s.r.rounds_asked, 6);
}

/* A record no look saw that asks, found by the round itself, makes the
 * busy second too. */
static void test_rounds__asked_found_by_round(void **state)
{
	(void)state;
	struct rounds r;
	rounds_init(&r, true, true);
	assert_false(rounds_start(&r, 5.0));
	rounds_read(&r, true, false);
	assert_true(fabs(r.busy_until - 6.0) < EPS);
	rounds_begin(&r, 5.1);
	struct rounds_next n = rounds_plan(&r, 5.1, 9.1, false);
	assert_true(fabs(n.deadline - 5.2) < EPS);
	assert_true(n.rings);
}

/* A quarter-full ring makes a round at the look, which nothing asked for:
 * the looks stay backed off. */
static void test_rounds__quarter_full(void **state)
{
	(void)state;
	struct rounds r;
	rounds_init(&r, true, true);
	r.look_gap = 0.8;
	double since;
	assert_false(rounds_look(&r, 1.0, &since));
	assert_true(rounds_looked(&r, true, false, 0.5, false));
	assert_false(r.round_asked);
	assert_true(fabs(r.look_gap - 0.8) < EPS);
	assert_false(rounds_start(&r, 1.0));
	assert_int_equal(r.rounds_asked, 0);
}

/* The exec watch tells of a program new to tally: a round 200 ms after the
 * last round or look, asked for, then the busy second; a burst of known
 * programs: one round, asked for, without the busy second. */
static void test_rounds__watch_told(void **state)
{
	(void)state;
	struct rounds r;
	rounds_init(&r, true, true);
	rounds_start(&r, 1.0);
	rounds_read(&r, false, false);
	r.look_gap = ROUNDS_LOOK_MAX;
	rounds_begin(&r, 1.05);
	struct rounds_next n = rounds_woke(&r, 1.1, false, 1, 0, false);
	assert_int_equal(n.act, ROUNDS_ROUND);
	assert_true(fabs(n.deadline - 1.2) < EPS);
	assert_true(fabs(r.look_gap - ROUNDS_GAP) < EPS);
	assert_true(rounds_start(&r, 1.2)); /* the round knows it was asked for */
	assert_int_equal(r.rounds_asked, 1);
	rounds_read(&r, true, false);
	assert_true(fabs(r.busy_until - 2.2) < EPS);

	rounds_init(&r, true, true);
	rounds_start(&r, 1.0);
	rounds_read(&r, false, false);
	n = rounds_woke(&r, 1.5, false, 0, 1, true);
	assert_int_equal(n.act, ROUNDS_ROUND);
	assert_true(n.deadline <= 1.5); /* 200 ms have passed: at once */
	assert_false(rounds_start(&r, 1.5));
	assert_int_equal(r.rounds_asked, 1);
	rounds_read(&r, false, false);
	assert_true(r.busy_until < 1.5);
}

/* The caller's fd ends the wait: a look, not a round, and a look that does
 * not back off (the time did not make it). */
static void test_rounds__caller_look(void **state)
{
	(void)state;
	struct rounds r;
	rounds_init(&r, true, true);
	rounds_start(&r, 0);
	rounds_read(&r, false, false);
	rounds_begin(&r, 0.5);
	struct rounds_next n = rounds_woke(&r, 0.7, true, 0, 0, false);
	assert_int_equal(n.act, ROUNDS_LOOK);
	double since;
	assert_false(rounds_look(&r, 0.7, &since));
	assert_false(rounds_looked(&r, false, false, HUGE_VAL, true));
	assert_true(fabs(r.look_gap - ROUNDS_GAP) < EPS);
	assert_int_equal(r.nlooks, 1);
	assert_true(fabs(r.last_look - 0.7) < EPS);
}

/* A caller's deadline before the look's ends the wait (a --duration ends
 * on time); a timeout of 0 is a round at once, full. */
static void test_rounds__caller_deadline(void **state)
{
	(void)state;
	struct rounds r;
	rounds_init(&r, true, true);
	rounds_start(&r, 0);
	rounds_read(&r, false, false);
	r.look_gap = ROUNDS_LOOK_MAX;
	rounds_begin(&r, 0.1);
	struct rounds_next n = rounds_plan(&r, 0.1, 0.3, true);
	assert_int_equal(n.act, ROUNDS_WAIT);
	assert_true(fabs(n.deadline - 0.3) < EPS);
	n = rounds_plan(&r, 0.3, 0.3, true);
	assert_int_equal(n.act, ROUNDS_ROUND);
	rounds_start(&r, 0.3);
	assert_true(rounds_read(&r, false, true));
}

/* A round takes every place counted in the kernel when asked for now, or
 * 4 s or more after the last full one; the others only some. */
static void test_rounds__full(void **state)
{
	(void)state;
	struct rounds r;
	rounds_init(&r, true, true);
	rounds_start(&r, 4.0);
	assert_true(rounds_read(&r, false, false));
	rounds_start(&r, 4.2);
	assert_false(rounds_read(&r, true, false));
	rounds_start(&r, 4.4);
	assert_true(rounds_read(&r, false, true)); /* a flush, a peek, the end */
	rounds_start(&r, 8.3);
	assert_false(rounds_read(&r, false, false));
	rounds_start(&r, 8.5);
	assert_true(rounds_read(&r, false, false));
}

/* A burst: the execs whose side-band records (2 KiB each, counted
 * generously) fill half a ring; 8 at least. */
static void test_rounds__burst_execs(void **state)
{
	(void)state;
	assert_int_equal(rounds_burst_execs(512 * 1024), 128);
	assert_int_equal(rounds_burst_execs(128 * 4096), 128);
	assert_int_equal(rounds_burst_execs(64 * 1024), 16);
	assert_int_equal(rounds_burst_execs(16 * 1024), 8);
	assert_int_equal(rounds_burst_execs(4096), 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rounds__ring_every_wake),
		cmocka_unit_test(test_rounds__quiet_round_every_4s),
		cmocka_unit_test(test_rounds__looks_without_watch),
		cmocka_unit_test(test_rounds__watch_backs_off),
		cmocka_unit_test(test_rounds__half_ring_bound),
		cmocka_unit_test(test_rounds__asked_busy_second),
		cmocka_unit_test(test_rounds__asked_found_by_round),
		cmocka_unit_test(test_rounds__quarter_full),
		cmocka_unit_test(test_rounds__watch_told),
		cmocka_unit_test(test_rounds__caller_look),
		cmocka_unit_test(test_rounds__caller_deadline),
		cmocka_unit_test(test_rounds__full),
		cmocka_unit_test(test_rounds__burst_execs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
