/*
 * sleeper [SECONDS] [burn]: a process to attach to with `tally record -p`.
 * Prints `pid N` at once, then runs for SECONDS of wall time (default 30;
 * 0 = until killed).  By default it mostly sleeps: sleeper_burn for about a
 * millisecond, then 50 ms of sleep.  With `burn` it runs sleeper_burn
 * without a pause, so an attached profiler sees a steady 100% of one CPU.
 */
#include "workload.h"

#include <signal.h>

uint64_t sleeper_burn(uint64_t units);

WL_NOINLINE uint64_t sleeper_burn(uint64_t units)
{
	uint64_t x = 0x1d8e4e27c47d124fu ^ units;

	WL_SPIN(x, units * WL_UNIT, 43);
	return x;
}

int main(int argc, char **argv)
{
	double seconds = wl_arg(argc, argv, 1, 30);
	int burn = argc > 2 && strcmp(argv[2], "burn") == 0;
	struct timespec nap = { 0, 50 * 1000 * 1000 };
	double start = wl_wall_ms();

	if (argc > 2 && !burn) {
		fprintf(stderr, "usage: %s [SECONDS] [burn]\n", argv[0]);
		return 2;
	}
	wl_print_pid();
	while (seconds <= 0 || wl_wall_ms() - start < seconds * 1e3) {
		if (burn) {
			wl_sink += sleeper_burn(10);
		} else {
			wl_sink += sleeper_burn(10);
			nanosleep(&nap, NULL);
		}
	}
	return 0;
}
