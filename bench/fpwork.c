/* Benchmark target for frame-pointer call graphs: a program built with frame
 * pointers whose time is mostly in libc, which is not (Debian's libc, as most
 * distributions' before 2024): each of its use_* functions calls a libc
 * function that calls others without frame pointers, so a chain read from
 * rbp skips the libc functions' callers, or is cut where libc used rbp as a
 * general register. Runs for SECONDS of CPU time, each use_* in turn, and
 * prints the CPU time each took: `truth NAME PERCENT`, then `cpu_ms N` (the
 * process's). With ROUNDS it runs that many rounds instead (a fixed amount of
 * work, whose CPU time a profiler's cost shows in).
 *   fpwork SECONDS [ROUNDS] */
#define _GNU_SOURCE
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, used))

static volatile uint64_t sink;

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

NOINLINE void use_printf(int n)
{
	char buf[128];
	for (int i = 0; i < n; i++)
		sink += (uint64_t)snprintf(buf, sizeof(buf), "%d %.3f %s %x", i, i * 0.37, "frame",
					   i * 7);
}

NOINLINE void use_malloc(int n)
{
	void *p[64];
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 64; k++)
			p[k] = malloc((size_t)(16 + (k * 37 + i) % 4000));
		for (int k = 0; k < 64; k++)
			free(p[(k * 17) % 64]);
	}
}

NOINLINE void use_strtod(int n)
{
	static const char *s[] = { "3.14159265358979", "1e-300", "123456789.987654321", "0x1.8p3",
				   "2.5e+17" };
	for (int i = 0; i < n; i++)
		sink += (uint64_t)strtod(s[i % 5], NULL);
}

static int cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

NOINLINE void use_qsort(int n)
{
	int v[200];
	uint32_t s = 12345;
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 200; k++)
			v[k] = (int)(s = s * 1103515245 + 12345);
		qsort(v, 200, sizeof(int), cmp);
		sink += (uint64_t)v[0];
	}
}

NOINLINE void use_regex(int n, regex_t *re)
{
	regmatch_t m[2];
	for (int i = 0; i < n; i++)
		sink += (uint64_t)regexec(
			re, "the quick brown fox jumps over the lazy dog 12345 times", 2, m, 0);
}

NOINLINE void use_stdio(int n, FILE *f)
{
	for (int i = 0; i < n; i++)
		fprintf(f, "line %d of %s\n", i, "output");
	fflush(f);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2;
	long rounds = argc > 2 ? atol(argv[2]) : 0;
	double t[6] = { 0 };
	static const char *names[6] = { "use_printf", "use_malloc", "use_strtod",
					"use_qsort",  "use_regex",  "use_stdio" };
	regex_t re;
	if (regcomp(&re, "([a-z]+) ([0-9]+)", REG_EXTENDED))
		return 2;
	FILE *f = fopen("/dev/null", "w");
	if (!f)
		return 2;
	double start = cpu_ms(), now = start;
	for (long n = 0; rounds ? n < rounds : now - start < secs * 1000; n++) {
		for (int k = 0; k < 6; k++) {
			double t0 = cpu_ms();
			switch (k) {
			case 0: use_printf(2000); break;
			case 1: use_malloc(60); break;
			case 2: use_strtod(4000); break;
			case 3: use_qsort(40); break;
			case 4: use_regex(300, &re); break;
			case 5: use_stdio(3000, f); break;
			}
			now = cpu_ms();
			t[k] += now - t0;
		}
	}
	double all = 0;
	for (int k = 0; k < 6; k++)
		all += t[k];
	for (int k = 0; k < 6; k++)
		printf("truth %s %.2f\n", names[k], 100 * t[k] / all);
	printf("cpu_ms %.1f\n", now - start);
	regfree(&re);
	fclose(f);
	return 0;
}
