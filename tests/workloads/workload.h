/*
 * Shared helpers for tally's test workloads: CPU clocks, argument parsing and
 * a spin loop the compiler cannot delete or fold.
 *
 * Every workload measures its own split of CPU time and prints it as lines
 * `truth <name> <percent>` so the end-to-end tests compare tally's report with
 * a measurement instead of a guess.  Clocks are read around whole chunks of
 * work, never inside the hot loops, and the chunks come in a random order
 * (wl_pick), never in a round a sampling period could fall into step with.  Other lines (`pid N`,
 * `info ...`) are for the tests and for humans.
 */
#ifndef TALLY_WORKLOAD_H
#define TALLY_WORKLOAD_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * Functions whose names the tests look for: never inlined, never cloned
 * (no work_a.constprop.0) and never merged with an identical twin (-fipa-icf).
 */
#if defined(__clang__)
#define WL_NOINLINE __attribute__((noinline, used))
#else
#define WL_NOINLINE __attribute__((noinline, noipa, used))
#endif

/* Sink the results of the spin loops so no work can be dropped. */
static volatile uint64_t wl_sink;

/*
 * Spin N rounds of xorshift on X: a serial dependency chain with no closed
 * form, so the cost is linear in N.  SALT makes each expansion's code differ,
 * so functions built from it are never identical (identical code folding).
 */
#define WL_SPIN(x, n, salt)                                                    \
	do {                                                                   \
		for (uint64_t wl_i_ = 0; wl_i_ < (uint64_t)(n); wl_i_++) {     \
			(x) ^= (x) << 13;                                      \
			(x) ^= (x) >> 7;                                       \
			(x) ^= (x) << 17;                                      \
			(x) += (uint64_t)(salt);                               \
		}                                                              \
	} while (0)

/* Spin iterations in one work unit: roughly 50-100 microseconds. */
#define WL_UNIT 40000u

/*
 * wl_pick(N): a pseudo-random number below N, the same sequence every run
 * (xorshift64).  A workload that splits its time between calls takes the next
 * call with it instead of running them in a fixed round: a round of fixed
 * length is a period, and a sampler whose period is near a multiple of it
 * sees the same point of the round for hundreds of samples on end.  Split
 * into rounds of about 1 ms, split_funcs sampled at 999 Hz (a period of
 * 1.001 ms) gave work_a 52 to 69% where it measured 60% (1000 samples, whose
 * binomial error is 1.5 points), worst on a busy machine, whose preemptions
 * move the phase in jumps; at 731 Hz, the same runs were within a point.
 * Calls taken at random have no period: a sample lands in a call with the
 * probability of its share of the time, whatever the sampling period, and
 * the samples' scatter is the binomial one the tests allow for.
 */
static inline unsigned wl_pick(unsigned n)
{
	static uint64_t s = 0x853c49e6748fea9bu;

	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return (unsigned)((s >> 32) % n);
}

/*
 * Read CLK through the raw system call, not the vDSO: a workload's profile
 * then never has a sample in [vdso] by chance, which would make the image
 * list (and the database's contents) differ from run to run.
 */
static inline double wl_clock_ms(clockid_t clk)
{
	struct timespec ts;

	if (syscall(SYS_clock_gettime, clk, &ts) != 0) {
		perror("clock_gettime");
		exit(2);
	}
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU time of the calling thread (user + system), in milliseconds. */
static inline double wl_thread_ms(void)
{
	return wl_clock_ms(CLOCK_THREAD_CPUTIME_ID);
}

/* CPU time of the whole process (all threads), in milliseconds. */
static inline double wl_process_ms(void)
{
	return wl_clock_ms(CLOCK_PROCESS_CPUTIME_ID);
}

static inline double wl_wall_ms(void)
{
	return wl_clock_ms(CLOCK_MONOTONIC);
}

static inline double wl_tv_ms(struct timeval tv)
{
	return (double)tv.tv_sec * 1e3 + (double)tv.tv_usec / 1e3;
}

/* Argument I of ARGV as a number, DEF when absent; exits 2 on garbage. */
static inline double wl_arg(int argc, char **argv, int i, double def)
{
	char *end;
	double v;

	if (i >= argc)
		return def;
	errno = 0;
	v = strtod(argv[i], &end);
	if (errno || end == argv[i] || *end) {
		fprintf(stderr, "%s: bad number '%s'\n", argv[0], argv[i]);
		exit(2);
	}
	return v;
}

static inline void wl_print_pid(void)
{
	printf("pid %ld\n", (long)getpid());
	fflush(stdout);
}

static inline void wl_truth(const char *name, double part, double whole)
{
	printf("truth %s %.2f\n", name, whole > 0 ? 100.0 * part / whole : 0.0);
}

#endif
