/*
 * split_funcs [MS]: about MS milliseconds of CPU time (default 1000) split
 * 6:3:1 between work_a, work_b and work_c.  The three run the same inner loop
 * for 6, 3 and 1 units a call, the next call one of the three at random
 * (wl_pick: no round for a sampling period to fall into step with), so any
 * window of more than a few milliseconds shows the same split.  Each call is
 * timed with the thread CPU clock and the measured shares are printed as
 * `truth work_a|work_b|work_c PERCENT` (percent of the three together).
 */
#include "workload.h"

uint64_t work_a(uint64_t units);
uint64_t work_b(uint64_t units);
uint64_t work_c(uint64_t units);

WL_NOINLINE uint64_t work_a(uint64_t units)
{
	uint64_t x = 0x9e3779b97f4a7c15u ^ units;

	WL_SPIN(x, units * WL_UNIT, 1);
	return x;
}

WL_NOINLINE uint64_t work_b(uint64_t units)
{
	uint64_t x = 0xbf58476d1ce4e5b9u ^ units;

	WL_SPIN(x, units * WL_UNIT, 3);
	return x;
}

WL_NOINLINE uint64_t work_c(uint64_t units)
{
	uint64_t x = 0x94d049bb133111ebu ^ units;

	WL_SPIN(x, units * WL_UNIT, 5);
	return x;
}

int main(int argc, char **argv)
{
	double target = wl_arg(argc, argv, 1, 1000);
	double t[3] = { 0, 0, 0 }, t0, t1;
	double start = wl_thread_ms();
	long calls = 0;

	wl_print_pid();
	t1 = start;
	do {
		/* work_a, work_b or work_c, as likely each: 6:3:1 of the time */
		unsigned k = wl_pick(3);

		t0 = t1;
		wl_sink += k == 0 ? work_a(6) : k == 1 ? work_b(3) : work_c(1);
		t1 = wl_thread_ms();
		t[k] += t1 - t0;
		calls++;
	} while (t1 - start < target);

	/* a round: three calls, 10 units */
	printf("info rounds %ld cpu_ms %.1f\n", calls / 3, wl_thread_ms() - start);
	wl_truth("work_a", t[0], t[0] + t[1] + t[2]);
	wl_truth("work_b", t[1], t[0] + t[1] + t[2]);
	wl_truth("work_c", t[2], t[0] + t[1] + t[2]);
	return 0;
}
