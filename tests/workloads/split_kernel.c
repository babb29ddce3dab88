/*
 * split_kernel [MS]: about MS milliseconds of CPU time (default 1000) split
 * roughly 50:50 between user space (user_spin) and the kernel (read() of 1 MiB
 * blocks from /dev/zero: the kernel clears the buffer).  Phases alternate in
 * rounds of a few milliseconds.  Each phase is timed with the thread CPU
 * clock (the scheduler's exact runtime) and printed as `truth user PERCENT`
 * and `truth kernel PERCENT`.  getrusage's user/system split is printed as
 * `info rusage ...` only: the kernel divides that runtime between user and
 * system by tick sampling, which is off by a few points in a one-second run.
 */
#include "workload.h"

#include <fcntl.h>

#define BLOCK (1u << 20)

static char block[BLOCK];

uint64_t user_spin(uint64_t units);
void kernel_read(int fd, unsigned reads);

WL_NOINLINE uint64_t user_spin(uint64_t units)
{
	uint64_t x = 0xe7037ed1a0b428dbu ^ units;

	WL_SPIN(x, units * WL_UNIT, 13);
	return x;
}

/* READS reads of a whole block: nearly all the time is kernel time. */
WL_NOINLINE void kernel_read(int fd, unsigned reads)
{
	for (unsigned i = 0; i < reads; i++) {
		ssize_t n = read(fd, block, BLOCK);

		if (n != (ssize_t)BLOCK) {
			perror("read /dev/zero");
			exit(2);
		}
		wl_sink += (uint64_t)block[i % BLOCK];
	}
}

int main(int argc, char **argv)
{
	double target = wl_arg(argc, argv, 1, 1000);
	double t_user = 0, t_kern = 0, t0, t1, start;
	struct rusage r0, r1;
	unsigned reads = 4;
	int fd = open("/dev/zero", O_RDONLY);

	if (fd < 0) {
		perror("open /dev/zero");
		return 2;
	}
	wl_print_pid();
	kernel_read(fd, 1);	/* fault the block in before measuring */
	getrusage(RUSAGE_SELF, &r0);
	start = wl_thread_ms();
	t1 = start;
	do {
		/* user_spin or kernel_read, as likely each (wl_pick: no round
		 * for a sampling period to fall into step with) */
		int user = wl_pick(2) == 0;

		t0 = t1;
		if (user)
			wl_sink += user_spin(10);
		else
			kernel_read(fd, reads);
		t1 = wl_thread_ms();
		*(user ? &t_user : &t_kern) += t1 - t0;
		/* aim the kernel phase at the user phase's length */
		if (t_kern < t_user * 0.95)
			reads++;
		else if (t_kern > t_user * 1.05 && reads > 1)
			reads--;
	} while (t1 - start < target);
	getrusage(RUSAGE_SELF, &r1);

	double u = wl_tv_ms(r1.ru_utime) - wl_tv_ms(r0.ru_utime);
	double s = wl_tv_ms(r1.ru_stime) - wl_tv_ms(r0.ru_stime);

	printf("info cpu_ms %.1f reads_per_round %u\n", wl_thread_ms() - start, reads);
	printf("info rusage user %.2f kernel %.2f\n", 100 * u / (u + s), 100 * s / (u + s));
	wl_truth("user", t_user, t_user + t_kern);
	wl_truth("kernel", t_kern, t_user + t_kern);
	return 0;
}
