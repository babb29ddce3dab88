/*
 * split_weights [MS]: split_funcs with its weights chosen at build time, for
 * the tests of `tally diff`, which build it twice with different weights:
 *
 *   cc -DW_A=6 -DW_B=3 -DW_C=1 [-DW_OLD=N] [-DW_NEW=N] -o prog split_weights.c
 *
 * About MS milliseconds of CPU time (default 1000) split W_A:W_B:W_C between
 * work_a, work_b and work_c, and W_OLD / W_NEW units to old_work / new_work,
 * functions that exist only when their weight is given (one side of a diff
 * has them, the other does not). The next call is one of them at random
 * (wl_pick: no round for a sampling period to fall into step with); each
 * call is timed and the measured shares are printed as
 * `truth NAME PERCENT` (percent of all the work functions together).
 */
#include "workload.h"

#ifndef W_A
#define W_A 6
#endif
#ifndef W_B
#define W_B 3
#endif
#ifndef W_C
#define W_C 1
#endif

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

#ifdef W_OLD
uint64_t old_work(uint64_t units);
WL_NOINLINE uint64_t old_work(uint64_t units)
{
	uint64_t x = 0x2545f4914f6cdd1du ^ units;

	WL_SPIN(x, units * WL_UNIT, 7);
	return x;
}
#endif

#ifdef W_NEW
uint64_t new_work(uint64_t units);
WL_NOINLINE uint64_t new_work(uint64_t units)
{
	uint64_t x = 0x5851f42d4c957f2du ^ units;

	WL_SPIN(x, units * WL_UNIT, 11);
	return x;
}
#endif

/* Runs f(units) and adds the thread CPU time it took to *acc. */
static void timed(uint64_t (*f)(uint64_t), uint64_t units, double *acc)
{
	double t0 = wl_thread_ms();

	if (units)
		wl_sink += f(units);
	*acc += wl_thread_ms() - t0;
}

int main(int argc, char **argv)
{
	double target = wl_arg(argc, argv, 1, 1000);
	double ta = 0, tb = 0, tc = 0, told = 0, tnew = 0;
	double start = wl_thread_ms();
	long calls = 0;

	wl_print_pid();
	do {
		/* one of the work functions, as likely each (wl_pick: no round
		 * for a sampling period to fall into step with) */
		switch (wl_pick(5)) {
		case 0: timed(work_a, W_A, &ta); break;
		case 1: timed(work_b, W_B, &tb); break;
		case 2: timed(work_c, W_C, &tc); break;
#ifdef W_OLD
		case 3: timed(old_work, W_OLD, &told); break;
#endif
#ifdef W_NEW
		case 4: timed(new_work, W_NEW, &tnew); break;
#endif
		default: continue;
		}
		calls++;
	} while (wl_thread_ms() - start < target);

	double all = ta + tb + tc + told + tnew;
	printf("info calls %ld cpu_ms %.1f\n", calls, wl_thread_ms() - start);
	wl_truth("work_a", ta, all);
	wl_truth("work_b", tb, all);
	wl_truth("work_c", tc, all);
	wl_truth("old_work", told, all);
	wl_truth("new_work", tnew, all);
	return 0;
}
