/* Call-graph benchmark target: a fixed amount of work through a few levels of
 * calls, half of it under libc's qsort (libc has no frame pointers), built
 * without frame pointers. Prints its own CPU time: `cpu_ms N`. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t mix(uint64_t x, int n)
{
	for (int i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = mix(*(const uint64_t *)a, 40), y = mix(*(const uint64_t *)b, 40);
	return x < y ? -1 : x > y;
}

__attribute__((noinline)) static void sort_phase(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp);
}

__attribute__((noinline)) static uint64_t compute_phase(uint64_t seed, int rounds)
{
	for (int i = 0; i < rounds; i++)
		seed = mix(seed + (uint64_t)i, 2000);
	return seed;
}

__attribute__((noinline)) static uint64_t step(uint64_t *v, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		v[i] = mix(seed + i, 3);
	sort_phase(v, n);
	return compute_phase(v[0], 1500);
}

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) : 200;
	static uint64_t v[4096];
	struct timespec a, b;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	uint64_t s = 1;
	for (long i = 0; i < steps; i++)
		s = step(v, 4096, s);
	sink = s;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	printf("cpu_ms %.1f\n",
	       (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6);
	return 0;
}
