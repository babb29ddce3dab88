/*
 * callsplit [MS]: about MS milliseconds of CPU time (default 1000), nearly all
 * of it in leaf(), which is reached through caller_a and caller_b in a 3:1
 * ratio (caller_a calls it three times a call, caller_b once; the next call is
 * either, at random).  Built twice: callsplit_fp (-fno-omit-frame-pointer)
 * and callsplit_nofp (-fomit-frame-pointer), for call-graph tests.  Each caller's calls are timed
 * with the thread CPU clock: `truth caller_a|caller_b PERCENT` (percent of the
 * two together).
 */
#include "workload.h"

uint64_t leaf_done(uint64_t x);
uint64_t leaf(uint64_t seed);
uint64_t caller_a(uint64_t seed);
uint64_t caller_b(uint64_t seed);

WL_NOINLINE uint64_t leaf_done(uint64_t x)
{
	return x ^ (x >> 29);
}

/*
 * The hot function.  It ends with a call, because GCC drops the frame pointer
 * setup of a function that calls nothing even under -fno-omit-frame-pointer,
 * and a frame-pointer unwinder would then skip leaf's caller.
 */
WL_NOINLINE uint64_t leaf(uint64_t seed)
{
	uint64_t x = 0x5851f42d4c957f2du ^ seed;

	WL_SPIN(x, WL_UNIT, 41);
	return leaf_done(x) + 1;
}

/* Work after each call keeps it a real call, never a tail jump. */
WL_NOINLINE uint64_t caller_a(uint64_t seed)
{
	uint64_t acc = seed;

	for (int i = 0; i < 3; i++)
		acc = acc * 31 + leaf(acc + (uint64_t)i);
	return acc + 1;
}

WL_NOINLINE uint64_t caller_b(uint64_t seed)
{
	uint64_t acc = seed;

	acc = acc * 37 + leaf(acc);
	return acc + 1;
}

int main(int argc, char **argv)
{
	double target = wl_arg(argc, argv, 1, 1000);
	double ta = 0, tb = 0, t0, t1, start;
	uint64_t acc = 1;
	long calls = 0;

	wl_print_pid();
	start = wl_thread_ms();
	t1 = start;
	do {
		/* caller_a or caller_b, as likely each (wl_pick: no round for
		 * a sampling period to fall into step with): 3:1 of the time */
		int a = wl_pick(2) == 0;

		t0 = t1;
		acc = a ? caller_a(acc) : caller_b(acc);
		t1 = wl_thread_ms();
		*(a ? &ta : &tb) += t1 - t0;
		calls++;
	} while (t1 - start < target);
	wl_sink = acc;

	printf("info cpu_ms %.1f calls %ld\n", wl_thread_ms() - start, calls);
	wl_truth("caller_a", ta, ta + tb);
	wl_truth("caller_b", tb, ta + tb);
	return 0;
}
