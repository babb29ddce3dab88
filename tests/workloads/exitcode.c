/*
 * exitcode N: does a few milliseconds of work (exit_work), then exits with
 * status N (0-255).  A negative N kills itself with signal -N instead, so the
 * parent sees "killed by signal -N".
 */
#include "workload.h"

#include <signal.h>

uint64_t exit_work(uint64_t units);

WL_NOINLINE uint64_t exit_work(uint64_t units)
{
	uint64_t x = 0x4f1bbcdcbfa53e0bu ^ units;

	WL_SPIN(x, units * WL_UNIT, 47);
	return x;
}

int main(int argc, char **argv)
{
	int code;

	if (argc != 2) {
		fprintf(stderr, "usage: %s N\n", argv[0]);
		return 2;
	}
	code = (int)wl_arg(argc, argv, 1, 0);
	wl_sink += exit_work(50);
	fflush(stdout);
	if (code < 0) {
		signal(-code, SIG_DFL);
		raise(-code);
		return 2;	/* the signal is not fatal */
	}
	return code;
}
