/*
 * A tiny JIT runtime: copies two hand-assembled x86-64 loops into anonymous
 * memory (written, then made executable), names one in /tmp/perf-PID.map and
 * the other in a jitdump (DIR/jit-PID.dump, perf's format, with line records),
 * and splits its CPU time between them.
 *
 *   jitwork [MS] [DIR] [MODE [ARGS]]
 *     MODE ok (default), or a damaged jitdump: badmagic, badversion, truncated
 *     (a last record cut short), or foreign (both files handed to another user,
 *     so a profiler must not trust them), or hostile:
 *     bigmove SIZE N  the jitdump also loads a function of SIZE bytes of code
 *                     and moves it N times (each move would copy its code)
 *     swaplink FILE   no jitdump; after MS of work prints `ready`, waits for
 *                     SIGUSR1, then replaces its perf map by a symbolic link to
 *                     FILE and exits (a profiler that reads the map by name
 *                     after checking it reads FILE)
 *     swapfifo        the same with a FIFO in place of the map (an open by
 *                     name blocks)
 *
 * jit_beta's line records say it comes from "jitbeta.src": line 10 sets up,
 * lines 11 and 12 are the loop (where its time goes), line 13 returns.
 * Prints `pid N`, `info alpha 0xADDR beta 0xADDR`, `truth jit_alpha P`,
 * `truth jit_beta P`. Other architectures: prints `skip: ...`, exits 77.
 */
#include "workload.h"
#include "jitdump-write.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>

#if defined(__x86_64__)

typedef uint64_t (*spin_fn)(uint64_t);

/* mov rax,rdi; 1: dec rax; jnz 1b; ret */
static const unsigned char alpha_code[] = { 0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3 };
/* mov rax,rdi; xor edx,edx; 1: add rdx,rax; dec rax; jnz 1b; mov rax,rdx; ret */
static const unsigned char beta_code[] = { 0x48, 0x89, 0xf8, 0x31, 0xd2, 0x48, 0x01, 0xc2, 0x48,
					   0xff, 0xc8, 0x75, 0xf8, 0x48, 0x89, 0xd0, 0xc3 };
/* (offset in beta_code, line) */
static const struct {
	uint32_t off, line;
} beta_lines[] = { { 0, 10 }, { 5, 11 }, { 8, 12 }, { 13, 13 } };

/* A function of size bytes of code (int3s) that never runs, at an address no
 * code has, then n JIT_CODE_MOVE records of it, each from where it was loaded
 * (so a reader looks for that one every time) to a place of its own. */
static void write_bigmove(int fd, uint64_t size, uint64_t n)
{
	const uint64_t at = 0x100000000000ull;
	struct buf p = { .n = 0 };
	put32(&p, (uint32_t)getpid());
	put32(&p, (uint32_t)getpid());
	put64(&p, at);
	put64(&p, at);
	put64(&p, size);
	put64(&p, 3);
	put(&p, "jit_big", 8);
	struct buf r = { .n = 0 };
	put32(&r, 0);
	put32(&r, (uint32_t)(16 + p.n + size));
	put64(&r, now_ns());
	put(&r, p.b, p.n);
	wr(fd, &r);
	unsigned char *code = malloc(size);
	if (!code) {
		perror("malloc");
		exit(1);
	}
	memset(code, 0xcc, size);
	if (write(fd, code, size) != (ssize_t)size) {
		perror("write jitdump");
		exit(1);
	}
	free(code);
	for (uint64_t i = 0; i < n; i++) {
		p.n = 0;
		put32(&p, (uint32_t)getpid());
		put32(&p, (uint32_t)getpid());
		put64(&p, at + (i + 1) * size);
		put64(&p, at);
		put64(&p, at + (i + 1) * size);
		put64(&p, size);
		put64(&p, 3);
		record(fd, 1, &p, 0);
	}
}

static uint64_t big_size, big_moves;

static void write_jitdump(const char *dir, const char *mode, unsigned char *beta,
			  unsigned char *unused)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/jit-%d.dump", dir, (int)getpid());
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	/* before the marker mapping: a profiler checks the owner when it sees it */
	if (!strcmp(mode, "foreign") && fchown(fd, 65534, 65534) < 0) {
		perror("fchown");
		exit(1);
	}
	struct buf h = { .n = 0 };
	put32(&h, !strcmp(mode, "badmagic") ? 0x12345678u : 0x4A695444u);
	put32(&h, !strcmp(mode, "badversion") ? 99 : 1);
	put32(&h, 40);
	put32(&h, 62); /* EM_X86_64 */
	put32(&h, 0);
	put32(&h, (uint32_t)getpid());
	put64(&h, now_ns());
	put64(&h, 0);
	wr(fd, &h);
	/* the marker a profiler sees: an executable mapping of the dump */
	if (mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) ==
	    MAP_FAILED) {
		perror("mmap jitdump");
		exit(1);
	}
	struct buf p = { .n = 0 };
	/* debug info first, as the specification asks */
	put64(&p, (uint64_t)(uintptr_t)beta);
	put64(&p, sizeof(beta_lines) / sizeof(beta_lines[0]));
	for (size_t i = 0; i < sizeof(beta_lines) / sizeof(beta_lines[0]); i++) {
		put64(&p, (uint64_t)(uintptr_t)beta + beta_lines[i].off);
		put32(&p, beta_lines[i].line);
		put32(&p, 0);
		put(&p, "jitbeta.src", 12);
	}
	record(fd, 2, &p, 0);
	/* a function that never runs: the database keeps only what has samples */
	p.n = 0;
	put32(&p, (uint32_t)getpid());
	put32(&p, (uint32_t)getpid());
	put64(&p, (uint64_t)(uintptr_t)unused);
	put64(&p, (uint64_t)(uintptr_t)unused);
	put64(&p, sizeof(alpha_code));
	put64(&p, 1);
	put(&p, "jit_unused", 11);
	put(&p, alpha_code, sizeof(alpha_code));
	record(fd, 0, &p, 0);
	p.n = 0;
	put32(&p, (uint32_t)getpid());
	put32(&p, (uint32_t)getpid());
	put64(&p, (uint64_t)(uintptr_t)beta);
	put64(&p, (uint64_t)(uintptr_t)beta);
	put64(&p, sizeof(beta_code));
	put64(&p, 2);
	put(&p, "jit_beta", 9);
	put(&p, beta_code, sizeof(beta_code));
	record(fd, 0, &p, 0);
	if (!strcmp(mode, "bigmove"))
		write_bigmove(fd, big_size, big_moves);
	if (!strcmp(mode, "truncated")) {
		/* a load record that claims more bytes than the file holds */
		p.n = 0;
		put32(&p, (uint32_t)getpid());
		put32(&p, (uint32_t)getpid());
		record(fd, 0, &p, 4096);
	} else {
		p.n = 0;
		record(fd, 3, &p, 0); /* JIT_CODE_CLOSE */
	}
	close(fd);
}

int main(int argc, char **argv)
{
	double total_ms = wl_arg(argc, argv, 1, 600);
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	const char *mode = argc > 3 ? argv[3] : "ok";
	if (strcmp(mode, "ok") && strcmp(mode, "badmagic") && strcmp(mode, "badversion") &&
	    strcmp(mode, "truncated") && strcmp(mode, "foreign") && strcmp(mode, "bigmove") &&
	    strcmp(mode, "swaplink") && strcmp(mode, "swapfifo")) {
		fprintf(stderr, "jitwork: unknown mode '%s'\n", mode);
		return 2;
	}
	bool swap = !strncmp(mode, "swap", 4);
	if ((!strcmp(mode, "bigmove") && argc != 6) || (!strcmp(mode, "swaplink") && argc != 5)) {
		fprintf(stderr, "jitwork: mode '%s' needs %s\n", mode,
			argc < 5 ? "its arguments" : "fewer arguments");
		return 2;
	}
	if (!strcmp(mode, "bigmove")) {
		big_size = strtoull(argv[4], NULL, 0);
		big_moves = strtoull(argv[5], NULL, 0);
	}
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (swap)
		sigprocmask(SIG_BLOCK, &usr1, NULL); /* taken by sigwait below */
	long pg = sysconf(_SC_PAGESIZE);
	/* written while writable, then executable: never both at once */
	unsigned char *mem =
		mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	unsigned char *alpha = mem, *beta = mem + 256, *unused = mem + 512;
	memcpy(alpha, alpha_code, sizeof(alpha_code));
	memcpy(beta, beta_code, sizeof(beta_code));
	memcpy(unused, alpha_code, sizeof(alpha_code));
	if (mprotect(mem, (size_t)pg, PROT_READ | PROT_EXEC) < 0) {
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
	fprintf(f, "%lx %zx jit_alpha\n", (unsigned long)(uintptr_t)alpha, sizeof(alpha_code));
	fclose(f);
	if (!strcmp(mode, "foreign") && chown(path, 65534, 65534) < 0) {
		perror("chown");
		return 1;
	}
	if (!swap)
		write_jitdump(dir, mode, beta, unused);
	wl_print_pid();
	printf("info alpha 0x%lx beta 0x%lx\n", (unsigned long)(uintptr_t)alpha,
	       (unsigned long)(uintptr_t)beta);
	fflush(stdout);
	spin_fn fa = (spin_fn)(uintptr_t)alpha, fb = (spin_fn)(uintptr_t)beta;
	double a_ms = 0, b_ms = 0;
	/* Each call runs about 10 to 20 ms, many sampling periods at the tests'
	 * rates: calls shorter than a period (they were a tenth of a millisecond)
	 * let a steady loop fall into step with the sampling clock and put more
	 * samples on one function than its time (a share 7 points off was seen). */
	while (a_ms + b_ms < total_ms) {
		double t0 = wl_thread_ms();
		wl_sink += fa(30000000);
		double t1 = wl_thread_ms();
		wl_sink += fb(40000000);
		double t2 = wl_thread_ms();
		a_ms += t1 - t0;
		b_ms += t2 - t1;
	}
	wl_truth("jit_alpha", a_ms, a_ms + b_ms);
	wl_truth("jit_beta", b_ms, a_ms + b_ms);
	if (swap) {
		/* the profiler has seen the map (the test makes sure) when the signal comes */
		printf("ready\n");
		fflush(stdout);
		int sig;
		sigwait(&usr1, &sig);
		if (unlink(path) < 0 ||
		    (!strcmp(mode, "swaplink") ? symlink(argv[4], path) : mkfifo(path, 0600)) < 0) {
			perror(path);
			return 1;
		}
		printf("swapped\n");
	}
	return 0;
}

#else

int main(void)
{
	printf("skip: jitwork emits x86-64 machine code only\n");
	return 77;
}

#endif
