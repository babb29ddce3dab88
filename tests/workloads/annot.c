/*
 * One function, hot_function, whose time goes to one loop: the source lines
 * marked HOT below. Tests annotate it and expect those lines (and the
 * instructions they compiled to) to carry most of its samples.
 *
 *   annot [MS]
 * Prints `pid N` and `info calls N`.
 */
#include "workload.h"

WL_NOINLINE uint64_t hot_function(uint64_t n)
{
	uint64_t x = n | 1;
	uint64_t y = 0;
	for (uint64_t i = 0; i < n; i++) { /* HOT */
		x ^= x << 13;              /* HOT */
		x ^= x >> 7;               /* HOT */
		x ^= x << 17;              /* HOT */
		y += x & 0xff;             /* HOT */
	}
	return x + y;
}

int main(int argc, char **argv)
{
	double total_ms = wl_arg(argc, argv, 1, 600);
	wl_print_pid();
	double t0 = wl_thread_ms();
	uint64_t calls = 0;
	while (wl_thread_ms() - t0 < total_ms) {
		wl_sink += hot_function(WL_UNIT);
		calls++;
	}
	printf("info calls %llu\n", (unsigned long long)calls);
	return 0;
}
