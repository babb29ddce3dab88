/*
 * recurse [DEPTH] [MS]: about MS milliseconds of CPU time (default 1000) with
 * the hot work at the bottom of deep recursion, for call-graph tests.  Calls
 * of three kinds, about 2:2:1 in time, the next one at random (wl_pick):
 *   - self_rec(DEPTH): calls itself DEPTH levels deep (default 300), then spins;
 *   - ping(DEPTH): ping and pong call each other DEPTH levels deep, the one at
 *     the bottom spins;
 *   - flat_work: spins, no recursion (called from main).
 * Every level keeps six words on the stack (64 bytes a frame with the return
 * address and the saved frame pointer), so 300 levels need more than a 16 KiB
 * stack copy.  Each call is timed with the thread CPU clock:
 * `truth self_rec|ping|flat_work PERCENT` (percent of the three together).
 */
#include "workload.h"

uint64_t rec_done(uint64_t x);
uint64_t self_rec(unsigned depth, uint64_t seed);
uint64_t ping(unsigned depth, uint64_t seed);
uint64_t pong(unsigned depth, uint64_t seed);
uint64_t flat_work(uint64_t seed);

WL_NOINLINE uint64_t rec_done(uint64_t x)
{
	return x ^ (x >> 31);
}

/*
 * The spin ends with a call (as in callsplit.c): a function that calls
 * nothing may lose its frame-pointer setup, and the frame-pointer unwinder
 * would then skip its caller.  The volatile array keeps each level's frame
 * on the stack, and the work after each recursive call keeps it a real call.
 */
WL_NOINLINE uint64_t self_rec(unsigned depth, uint64_t seed)
{
	volatile uint64_t pad[6];
	uint64_t x = seed;

	pad[0] = seed;
	pad[5] = depth;
	if (depth == 0) {
		WL_SPIN(x, WL_UNIT, 23);
		return rec_done(x) + pad[0];
	}
	x = self_rec(depth - 1, seed * 3 + 1);
	return x * 5 + pad[5] + pad[0];
}

WL_NOINLINE uint64_t ping(unsigned depth, uint64_t seed)
{
	volatile uint64_t pad[6];
	uint64_t x = seed;

	pad[0] = seed;
	pad[5] = depth;
	if (depth == 0) {
		WL_SPIN(x, WL_UNIT, 29);
		return rec_done(x) + pad[0];
	}
	x = pong(depth - 1, seed * 7 + 1);
	return x * 3 + pad[5] + pad[0];
}

WL_NOINLINE uint64_t pong(unsigned depth, uint64_t seed)
{
	volatile uint64_t pad[6];
	uint64_t x = seed;

	pad[0] = seed;
	pad[5] = depth;
	if (depth == 0) {
		WL_SPIN(x, WL_UNIT, 31);
		return rec_done(x) + pad[0];
	}
	x = ping(depth - 1, seed * 11 + 1);
	return x * 9 + pad[5] + pad[0];
}

WL_NOINLINE uint64_t flat_work(uint64_t seed)
{
	uint64_t x = seed ^ 0x9e3779b97f4a7c15u;

	WL_SPIN(x, WL_UNIT, 37);
	return rec_done(x) + 1;
}

int main(int argc, char **argv)
{
	unsigned depth = (unsigned)wl_arg(argc, argv, 1, 300);
	double target = wl_arg(argc, argv, 2, 1000);
	double ts = 0, tp = 0, tf = 0, t0, t1, start;
	uint64_t acc = 1;

	if (depth > 100000) {
		fprintf(stderr, "%s: depth must be at most 100000\n", argv[0]);
		return 2;
	}
	wl_print_pid();
	start = wl_thread_ms();
	t1 = start;
	do {
		/* self_rec, ping or flat_work, 2:2:1 in number and so in time
		 * (wl_pick: no round for a sampling period to fall into step
		 * with) */
		unsigned k = wl_pick(5);

		t0 = t1;
		if (k < 2)
			acc += self_rec(depth, acc);
		else if (k < 4)
			acc += ping(depth, acc);
		else
			acc += flat_work(acc);
		t1 = wl_thread_ms();
		*(k < 2 ? &ts : k < 4 ? &tp : &tf) += t1 - t0;
	} while (t1 - start < target);
	wl_sink = acc;

	printf("info cpu_ms %.1f depth %u\n", wl_thread_ms() - start, depth);
	wl_truth("self_rec", ts, ts + tp + tf);
	wl_truth("ping", tp, ts + tp + tf);
	wl_truth("flat_work", tf, ts + tp + tf);
	return 0;
}
