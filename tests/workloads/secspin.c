/*
 * secspin [SECONDS]: spins for SECONDS of wall time (default 1) in code that
 * belongs to no function: a loop in an executable section of its own,
 * `.hotsec`, with a symbol that `strip` removes and no .eh_frame entry (no
 * CFI). A profile of the stripped binary names those samples by the section,
 * `[.hotsec]`, never by a function (t1393). x86-64 only (the loop is
 * assembly).
 */
#include "workload.h"

__asm__(".pushsection .hotsec,\"ax\",@progbits\n"
	".globl secspin_loop\n"
	"secspin_loop:\n"
	"1:	dec %rdi\n"
	"	jnz 1b\n"
	"	ret\n"
	".popsection\n");
void secspin_loop(unsigned long n);

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		secspin_loop(1000000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < secs);
	printf("done\n");
	return 0;
}
