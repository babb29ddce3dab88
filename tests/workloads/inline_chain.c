/*
 * inline_chain [MS]: about MS milliseconds of CPU time (default 1000) in
 * hot_loop, a real function whose loop calls mid_mix, always inlined, which
 * calls leaf_mix, always inlined too: the inline chain leaf_mix -> mid_mix ->
 * hot_loop. The split is 1:1:2 between hot_loop's own spin, mid_mix's and
 * leaf_mix's, each measured with the thread CPU clock and printed as
 * `truth hot_loop|mid_mix|leaf_mix PERCENT`. The source line of each spin is
 * printed as `info line_hot N line_mid N line_leaf N`, so tests can check
 * `tally report --lines` without knowing this file's layout.
 */
#include "workload.h"

uint64_t hot_loop(uint64_t units, double *th, double *tm, double *tl);

static int line_hot, line_mid, line_leaf;

static inline __attribute__((always_inline)) uint64_t leaf_mix(uint64_t x, uint64_t units)
{
	WL_SPIN(x, units * WL_UNIT, 7); line_leaf = __LINE__;
	return x;
}

static inline __attribute__((always_inline)) uint64_t mid_mix(uint64_t x, uint64_t units,
							      double *tm, double *tl)
{
	double t0 = wl_thread_ms();
	WL_SPIN(x, units * WL_UNIT, 9); line_mid = __LINE__;
	double t1 = wl_thread_ms();
	x = leaf_mix(x, 2 * units);
	*tl += wl_thread_ms() - t1;
	*tm += t1 - t0;
	return x;
}

WL_NOINLINE uint64_t hot_loop(uint64_t units, double *th, double *tm, double *tl)
{
	uint64_t x = 0x9e3779b97f4a7c15u ^ units;
	double t0 = wl_thread_ms();
	WL_SPIN(x, units * WL_UNIT, 11); line_hot = __LINE__;
	*th += wl_thread_ms() - t0;
	return mid_mix(x, units, tm, tl);
}

int main(int argc, char **argv)
{
	double target = wl_arg(argc, argv, 1, 1000);
	double th = 0, tm = 0, tl = 0;
	double start = wl_thread_ms();
	long rounds = 0;

	wl_print_pid();
	do {
		/* the chain's three spins come in a fixed order, so the round's
		 * length is drawn (1, 2 or 3 units a spin, 1:1:2 of the time
		 * whatever the draw): rounds of one length would be a period a
		 * sampler could fall into step with (wl_pick) */
		wl_sink += hot_loop(1 + wl_pick(3), &th, &tm, &tl);
		rounds++;
	} while (wl_thread_ms() - start < target);

	printf("info rounds %ld cpu_ms %.1f\n", rounds, wl_thread_ms() - start);
	printf("info line_hot %d line_mid %d line_leaf %d\n", line_hot, line_mid, line_leaf);
	wl_truth("hot_loop", th, th + tm + tl);
	wl_truth("mid_mix", tm, th + tm + tl);
	wl_truth("leaf_mix", tl, th + tm + tl);
	return 0;
}
