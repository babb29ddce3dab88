/*
 * leafsplit [MS]: about MS milliseconds of CPU time (default 1000), nearly all
 * of it in work(), a true leaf (it calls nothing, so GCC at -O2 sets up no
 * frame in it even under -fno-omit-frame-pointer), reached through hot_a,
 * hot_b and hot_c in a 6:3:1 ratio, all called from driver().  A frame-pointer
 * unwinder reading the chain from work's sample sees driver as work's caller
 * and loses hot_a/hot_b/hot_c.  Each caller's calls are timed with the thread
 * CPU clock: `truth hot_a|hot_b|hot_c PERCENT` (percent of the three).
 */
#include "workload.h"

uint64_t work(uint64_t seed);
uint64_t hot_a(uint64_t seed);
uint64_t hot_b(uint64_t seed);
uint64_t hot_c(uint64_t seed);
void driver(double target, double *t);

WL_NOINLINE uint64_t work(uint64_t seed)
{
	uint64_t x = 0x2545f4914f6cdd1du ^ seed;

	WL_SPIN(x, WL_UNIT, 23);
	return x;
}

/* Work after each call keeps it a real call, never a tail jump. */
#define HOT(name, calls)                                                       \
	WL_NOINLINE uint64_t name(uint64_t seed)                              \
	{                                                                      \
		uint64_t acc = seed;                                           \
		for (int i = 0; i < (calls); i++)                              \
			acc = acc * 31 + work(acc + (uint64_t)i);              \
		return acc + 1;                                                \
	}
HOT(hot_a, 6)
HOT(hot_b, 3)
HOT(hot_c, 1)

WL_NOINLINE void driver(double target, double *t)
{
	uint64_t acc = 1;
	double start = wl_thread_ms(), t0, t1 = start;

	do {
		/* hot_a, hot_b or hot_c, as likely each (wl_pick: no round for a
		 * sampling period to fall into step with): 6:3:1 of the time */
		unsigned k = wl_pick(3);

		t0 = t1;
		acc = k == 0 ? hot_a(acc) : k == 1 ? hot_b(acc) : hot_c(acc);
		t1 = wl_thread_ms();
		t[k] += t1 - t0;
	} while (t1 - start < target);
	wl_sink = acc;
}

int main(int argc, char **argv)
{
	double t[3] = { 0, 0, 0 }, start;

	wl_print_pid();
	start = wl_thread_ms();
	driver(wl_arg(argc, argv, 1, 1000), t);
	printf("info cpu_ms %.1f\n", wl_thread_ms() - start);
	wl_truth("hot_a", t[0], t[0] + t[1] + t[2]);
	wl_truth("hot_b", t[1], t[0] + t[1] + t[2]);
	wl_truth("hot_c", t[2], t[0] + t[1] + t[2]);
	return 0;
}
