/*
 * split_funcs [MS]: about MS milliseconds of CPU time (default 1000) split
 * 6:3:1 between work_a, work_b and work_c.  The three run the same inner loop
 * for 6, 3 and 1 units per round, interleaved in rounds of a few milliseconds,
 * so any window of the run shows the same split.  Each call is timed with the
 * thread CPU clock and the measured shares are printed as
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
	double ta = 0, tb = 0, tc = 0, t0, t1;
	double start = wl_thread_ms();
	long rounds = 0;

	wl_print_pid();
	do {
		t0 = wl_thread_ms();
		wl_sink += work_a(6);
		t1 = wl_thread_ms();
		ta += t1 - t0;
		wl_sink += work_b(3);
		t0 = wl_thread_ms();
		tb += t0 - t1;
		wl_sink += work_c(1);
		t1 = wl_thread_ms();
		tc += t1 - t0;
		rounds++;
	} while (t1 - start < target);

	printf("info rounds %ld cpu_ms %.1f\n", rounds, wl_thread_ms() - start);
	wl_truth("work_a", ta, ta + tb + tc);
	wl_truth("work_b", tb, ta + tb + tc);
	wl_truth("work_c", tc, ta + tb + tc);
	return 0;
}
