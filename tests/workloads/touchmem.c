/*
 * touchmem [PAGES] [ROUNDS]: page faults on demand.  Each round maps PAGES
 * (default 4096) fresh anonymous pages without transparent huge pages,
 * writes one byte in each (touch_pages: one minor fault per page) and unmaps
 * them; ROUNDS rounds (default 8).  Prints `truth faults N`, the minor faults
 * counted by getrusage across all the rounds, and `info pages_touched N`.
 */
#include "workload.h"

#include <sys/mman.h>

void touch_pages(volatile char *mem, size_t pages, size_t page_size);

WL_NOINLINE void touch_pages(volatile char *mem, size_t pages, size_t page_size)
{
	for (size_t i = 0; i < pages; i++)
		mem[i * page_size] = (char)i;
}

int main(int argc, char **argv)
{
	size_t pages = (size_t)wl_arg(argc, argv, 1, 4096);
	long rounds = (long)wl_arg(argc, argv, 2, 8);
	size_t page_size = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = pages * page_size;
	struct rusage r0, r1;
	long faults = 0;

	wl_print_pid();
	for (long r = 0; r < rounds; r++) {
		char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (mem == MAP_FAILED) {
			perror("mmap");
			return 2;
		}
#ifdef MADV_NOHUGEPAGE
		madvise(mem, len, MADV_NOHUGEPAGE);
#endif
		getrusage(RUSAGE_SELF, &r0);
		touch_pages(mem, pages, page_size);
		getrusage(RUSAGE_SELF, &r1);
		faults += r1.ru_minflt - r0.ru_minflt;
		munmap(mem, len);
	}
	printf("info pages_touched %zu\n", pages * (size_t)rounds);
	printf("truth faults %ld\n", faults);
	return 0;
}
