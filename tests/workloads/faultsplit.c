/*
 * faultsplit [ROUNDS]: page faults in two functions at two rates, so that
 * under -F the kernel's adapted sampling period differs between them.
 * Each round (default 4), fault_a touches 3 * 4096 fresh pages as fast as it
 * can, then fault_b touches 4096 pages with a spin of some 25-50 us between
 * two, for about as long again: fault_a takes 75% of the faults in far less
 * time than fault_b's 25%. Sample counts follow the time (the kernel aims at
 * the same number of samples per second in both), the events do not. The
 * minor faults of each function, counted by getrusage, are printed as
 * `truth fault_a PERCENT` and `truth fault_b PERCENT`.
 */
#include "workload.h"

#include <sys/mman.h>
#include <sys/resource.h>

#define PAGES_B 4096

void fault_a(volatile char *mem, size_t pages, size_t page_size);
void fault_b(volatile char *mem, size_t pages, size_t page_size);

WL_NOINLINE void fault_a(volatile char *mem, size_t pages, size_t page_size)
{
	for (size_t i = 0; i < pages; i++)
		mem[i * page_size] = (char)i;
}

WL_NOINLINE void fault_b(volatile char *mem, size_t pages, size_t page_size)
{
	for (size_t i = 0; i < pages; i++) {
		mem[i * page_size] = (char)i;
		uint64_t x = i + 1;
		WL_SPIN(x, WL_UNIT / 2, 7);
		wl_sink += x;
	}
}

static long faults_in(void (*fn)(volatile char *, size_t, size_t), size_t pages, size_t page_size)
{
	size_t len = pages * page_size;
	char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
#ifdef MADV_NOHUGEPAGE
	madvise(mem, len, MADV_NOHUGEPAGE);
#endif
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	fn(mem, pages, page_size);
	getrusage(RUSAGE_SELF, &r1);
	munmap(mem, len);
	return r1.ru_minflt - r0.ru_minflt;
}

int main(int argc, char **argv)
{
	long rounds = (long)wl_arg(argc, argv, 1, 4);
	size_t page_size = (size_t)sysconf(_SC_PAGESIZE);
	long fa = 0, fb = 0;
	wl_print_pid();
	for (long r = 0; r < rounds; r++) {
		fa += faults_in(fault_a, 3 * PAGES_B, page_size);
		fb += faults_in(fault_b, PAGES_B, page_size);
	}
	printf("info faults_a %ld faults_b %ld\n", fa, fb);
	wl_truth("fault_a", (double)fa, (double)(fa + fb));
	wl_truth("fault_b", (double)fb, (double)(fa + fb));
	return 0;
}
