/* The workload `make demo` profiles: a toy log indexer whose time splits
 * between its own code (hashing and parsing), libc (sorting and copying) and the
 * kernel (writing its output), so the first report a user sees has all three. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINES 20000

static char lines[LINES][64];

__attribute__((noinline)) static void make_lines(unsigned seed)
{
	for (int i = 0; i < LINES; i++) {
		seed = seed * 1103515245u + 12345u;
		snprintf(lines[i], sizeof(lines[i]), "GET /item/%u?user=%u HTTP/1.1", seed % 100000,
			 (seed >> 8) % 977);
	}
}

__attribute__((noinline)) static uint64_t hash_line(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (int round = 0; round < 10; round++)
		for (const char *p = s; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return h;
}

__attribute__((noinline)) static uint64_t index_lines(void)
{
	uint64_t acc = 0;
	for (int i = 0; i < LINES; i++)
		acc += hash_line(lines[i]);
	return acc;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(a, b);
}

__attribute__((noinline)) static void sort_lines(void)
{
	qsort(lines, LINES, sizeof(lines[0]), cmp_line);
}

__attribute__((noinline)) static void write_out(int fd)
{
	for (int rep = 0; rep < 40; rep++)
		for (int i = 0; i < LINES; i += 16)
			if (write(fd, lines[i],
				  64 * 16 < (LINES - i) * 64 ? 64 * 16 : (LINES - i) * 64) < 0)
				return;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 12;
	int fd = open("/dev/null", O_WRONLY);
	uint64_t acc = 0;
	for (int r = 0; r < rounds; r++) {
		make_lines((unsigned)r + 1);
		acc += index_lines();
		sort_lines();
		write_out(fd);
	}
	close(fd);
	printf("indexed %d x %d lines (checksum %016llx)\n", rounds, LINES,
	       (unsigned long long)acc);
	return 0;
}
