/* Scale benchmark target for perf: many distinct call stacks, as a long-running
 * daemon collects them. 256 small functions call one another through a table,
 * each choice a hash of the path so far, 8 to 18 frames deep (the shape of
 * tests/e2e/gen-bigdb.py's synthetic stacks), built with frame pointers so
 * that `perf record -g` unwinds them. Runs for SECONDS of CPU time, then prints
 * how many leaves it reached: `leaves N`.
 *   stackwork SECONDS */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef uint64_t (*fn_t)(uint64_t path, int depth, int stop);
static fn_t table[256];
static volatile uint64_t sink;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* each function: a little work, then the next one the path chooses, until the
 * stack is as deep as it was meant to be */
#define F(n)                                                                                \
	__attribute__((noinline)) static uint64_t f##n(uint64_t path, int depth, int stop)  \
	{                                                                                   \
		uint64_t h = mix(path * 257 + n);                                           \
		for (int i = 0; i < 40; i++)                                                \
			h = mix(h + (uint64_t)i);                                           \
		if (depth >= stop)                                                          \
			return h;                                                           \
		return table[h & 255](h, depth + 1, stop) + 1;                              \
	}
#define F8(a) F(a##0) F(a##1) F(a##2) F(a##3) F(a##4) F(a##5) F(a##6) F(a##7)
#define F64(a) F8(a##0) F8(a##1) F8(a##2) F8(a##3) F8(a##4) F8(a##5) F8(a##6) F8(a##7)
F64(1) F64(2) F64(3) F64(4)
#define T(n) table[i++] = f##n;
#define T8(a) T(a##0) T(a##1) T(a##2) T(a##3) T(a##4) T(a##5) T(a##6) T(a##7)
#define T64(a) T8(a##0) T8(a##1) T8(a##2) T8(a##3) T8(a##4) T8(a##5) T8(a##6) T8(a##7)

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	int i = 0;
	T64(1) T64(2) T64(3) T64(4)
	uint64_t leaves = 0, path = 1;
	double end = cpu_now() + seconds;
	while (cpu_now() < end) {
		for (int k = 0; k < 1000; k++) {
			path = mix(path + 1);
			sink = table[path & 255](path, 0, 8 + (int)(path >> 60) % 11);
			leaves++;
		}
	}
	printf("leaves %llu\n", (unsigned long long)leaves);
	return 0;
}
