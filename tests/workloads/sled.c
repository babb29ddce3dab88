/*
 * sled [MS]: runs for MS milliseconds of CPU time (default 1000) through one
 * function of 32768 no-op instructions, so that its samples fall on as many
 * addresses as a profile of it can have: far more places in a second than
 * the BPF map of `--sample-mechanism bpf` holds (docs/sampling.md).
 *
 * Output: `pid N`, then `info cpu_ms T` (its CPU time, measured).
 */
#include "workload.h"

void sled(void);
WL_NOINLINE void sled(void)
{
	__asm__ volatile(".rept 32768\n\tnop\n\t.endr");
}

int main(int argc, char **argv)
{
	double ms = wl_arg(argc, argv, 1, 1000), start, now;
	wl_print_pid();
	start = wl_thread_ms();
	do {
		for (int i = 0; i < 64; i++)
			sled();
		now = wl_thread_ms();
	} while (now - start < ms);
	printf("info cpu_ms %.1f\n", now - start);
	return 0;
}
