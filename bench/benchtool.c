/*
 * benchtool: the two small helpers bench/run.sh needs, compiled by it with cc
 * into a temporary directory.
 *
 * benchtool spin ITERS OUT
 *     The benchmark target: a fixed amount of CPU work (ITERS rounds of a
 *     xorshift chain spread over three functions, 5:3:2), so a profiled and
 *     an unprofiled run do exactly the same work.  At exit it writes one line
 *     to the file OUT (not to stdout, which the profiler may share):
 *         cpu_ms=C user_ms=U sys_ms=S wall_ms=W
 *     C is CLOCK_PROCESS_CPUTIME_ID (the scheduler's exact runtime, which
 *     includes the sampling interrupts taken while the target runs), U and S
 *     getrusage(RUSAGE_SELF) (the same runtime split by tick sampling, the
 *     numbers the target's parent sees from wait4), W the wall time of the
 *     work loop itself (the profiler's start-up and shut-down excluded).
 *
 * benchtool run OUT -- CMD [ARGS...]
 *     Runs CMD, waits for it with wait4 and writes to OUT:
 *         wall_ms=W user_ms=U sys_ms=S status=N
 *     W is the wall time from fork to reap, U and S are CMD's CPU time plus
 *     that of every descendant it waited for (for a profiler: itself plus the
 *     target), in microsecond resolution (/usr/bin/time only gives 10 ms).
 *     N is the exit status (128+SIG when killed).  CMD's own output goes
 *     where benchtool's goes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static double clock_ms(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double tv_ms(struct timeval tv)
{
	return (double)tv.tv_sec * 1e3 + (double)tv.tv_usec / 1e3;
}

#define SPIN(x, n, salt)                                                       \
	do {                                                                   \
		for (uint64_t i_ = 0; i_ < (uint64_t)(n); i_++) {              \
			(x) ^= (x) << 13;                                      \
			(x) ^= (x) >> 7;                                       \
			(x) ^= (x) << 17;                                      \
			(x) += (uint64_t)(salt);                               \
		}                                                              \
	} while (0)

#define NOINLINE __attribute__((noinline, noipa, used))

uint64_t bench_hot(uint64_t x, uint64_t n);
uint64_t bench_warm(uint64_t x, uint64_t n);
uint64_t bench_cool(uint64_t x, uint64_t n);

NOINLINE uint64_t bench_hot(uint64_t x, uint64_t n)
{
	SPIN(x, n, 1);
	return x;
}

NOINLINE uint64_t bench_warm(uint64_t x, uint64_t n)
{
	SPIN(x, n, 3);
	return x;
}

NOINLINE uint64_t bench_cool(uint64_t x, uint64_t n)
{
	SPIN(x, n, 5);
	return x;
}

static uint64_t parse_u64(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end) {
		fprintf(stderr, "benchtool: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

static int spin(uint64_t iters, const char *out)
{
	/* rounds of 10000 iterations: 5000 + 3000 + 2000 */
	uint64_t rounds = iters / 10000, x = 0x9e3779b97f4a7c15u;
	double wall0 = clock_ms(CLOCK_MONOTONIC), cpu;
	struct rusage ru;
	FILE *f;

	for (uint64_t r = 0; r < rounds; r++) {
		x = bench_hot(x, 5000);
		x = bench_warm(x, 3000);
		x = bench_cool(x, 2000);
	}
	sink = x;
	cpu = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
	getrusage(RUSAGE_SELF, &ru);
	f = fopen(out, "w");
	if (!f) {
		perror(out);
		return 2;
	}
	fprintf(f, "cpu_ms=%.3f user_ms=%.3f sys_ms=%.3f wall_ms=%.3f\n", cpu,
		tv_ms(ru.ru_utime), tv_ms(ru.ru_stime),
		clock_ms(CLOCK_MONOTONIC) - wall0);
	return fclose(f) == 0 ? 0 : 2;
}

static int run(const char *out, char **argv)
{
	double t0 = clock_ms(CLOCK_MONOTONIC), t1;
	struct rusage ru;
	int status, code;
	pid_t pid;
	FILE *f;

	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "benchtool: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			perror("wait4");
			return 2;
		}
	}
	t1 = clock_ms(CLOCK_MONOTONIC);
	code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	f = fopen(out, "w");
	if (!f) {
		perror(out);
		return 2;
	}
	fprintf(f, "wall_ms=%.3f user_ms=%.3f sys_ms=%.3f status=%d\n", t1 - t0,
		tv_ms(ru.ru_utime), tv_ms(ru.ru_stime), code);
	if (fclose(f) != 0)
		return 2;
	return code;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "spin") == 0)
		return spin(parse_u64(argv[2]), argv[3]);
	if (argc >= 5 && strcmp(argv[1], "run") == 0 &&
	    strcmp(argv[3], "--") == 0)
		return run(argv[2], argv + 4);
	fprintf(stderr, "usage: benchtool spin ITERS OUT\n"
			"       benchtool run OUT -- CMD [ARGS...]\n");
	return 2;
}
