/*
 * A tiny "JIT": copies a countdown loop into anonymous executable memory,
 * names it in /tmp/perf-PID.map (perf's map format), and splits its CPU time
 * between that code (jit_spin) and a native function (native_spin).
 *
 *   jitter [MS] [foreign]   foreign: hand the map to another user, so a
 *                           profiler must not trust it
 * Prints `pid N`, `truth jit_spin P`, `truth native_spin P`.
 */
#include "workload.h"

#include <sys/mman.h>
#include <sys/stat.h>

typedef uint64_t (*spin_fn)(uint64_t);

WL_NOINLINE uint64_t native_spin(uint64_t n)
{
	uint64_t x = n | 1;
	WL_SPIN(x, n, 7);
	return x;
}

int main(int argc, char **argv)
{
	double total_ms = wl_arg(argc, argv, 1, 600);
	int foreign = argc > 2 && !strcmp(argv[2], "foreign");
	/* mov rax,rdi; 1: dec rax; jnz 1b; ret */
	static const unsigned char code[] = {
		0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3
	};
	unsigned char *mem =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(mem, code, sizeof(code));
	if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) < 0) {
		perror("mprotect");
		return 1;
	}
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, "%lx %zx jit_spin\n", (unsigned long)(uintptr_t)mem, sizeof(code));
	fprintf(f, "this line is malformed\n");
	fclose(f);
	if (foreign && chown(path, 65534, 65534) < 0) {
		perror("chown");
		return 1;
	}
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	spin_fn jit = (spin_fn)(uintptr_t)mem;
	double jit_ms = 0, nat_ms = 0;
	/* the JIT code or native_spin, as likely each (wl_pick: no round for
	 * a sampling period to fall into step with) */
	while (jit_ms + nat_ms < total_ms) {
		int j = wl_pick(2) == 0;
		double t0 = wl_clock_ms(CLOCK_THREAD_CPUTIME_ID);
		wl_sink += j ? jit(400000) : native_spin(WL_UNIT);
		*(j ? &jit_ms : &nat_ms) += wl_clock_ms(CLOCK_THREAD_CPUTIME_ID) - t0;
	}
	printf("truth jit_spin %.2f\n", 100.0 * jit_ms / (jit_ms + nat_ms));
	printf("truth native_spin %.2f\n", 100.0 * nat_ms / (jit_ms + nat_ms));
	return 0;
}
