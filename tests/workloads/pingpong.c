/*
 * pingpong [ROUNDS]: two threads pass a byte back and forth over two pipes
 * ROUNDS times (default 200000): every pass is a context switch on each side,
 * for the off-CPU overhead bench (bench/offcpu.sh). Prints `info seconds S`
 * and `info switches_per_s N` (two switches per round trip).
 */
#include "workload.h"

#include <pthread.h>

static int ab[2], ba[2];
static long rounds;

static void *pong(void *arg)
{
	char c;

	(void)arg;
	for (long i = 0; i < rounds; i++) {
		if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
			exit(2);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	char c = 'x';

	rounds = (long)wl_arg(argc, argv, 1, 200000);
	if (pipe(ab) < 0 || pipe(ba) < 0) {
		perror("pipe");
		return 2;
	}
	double t0 = wl_wall_ms();
	if (pthread_create(&t, NULL, pong, NULL))
		return 2;
	for (long i = 0; i < rounds; i++) {
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 2;
	}
	pthread_join(t, NULL);
	double s = (wl_wall_ms() - t0) / 1e3;
	printf("info seconds %.3f\n", s);
	printf("info switches_per_s %.0f\n", s > 0 ? 2.0 * (double)rounds / s : 0.0);
	return 0;
}
