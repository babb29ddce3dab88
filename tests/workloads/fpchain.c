/*
 * fpchain [SECONDS] [MODE]: the user's functions reached only through chains
 * of libc functions without frame pointers, with their own measured share.
 *
 *   (default) off-CPU: waiter() calls wait_long and wait_other through one
 *             function pointer (one call site: the frame-pointer chain is
 *             the same for both), 3 calls of wait_long for 1 of
 *             wait_other, each one nanosleep() of 2 ms: libc's nanosleep
 *             (no frame pointer) calls clock_nanosleep (none either), and
 *             a chain from rbp goes from clock_nanosleep to waiter, with
 *             neither function in it. Prints `truth wait_long P` and
 *             `truth wait_other P` (their shares of the time both waited,
 *             measured around each call), `info waits N`.
 *   qsort     on-CPU: sort_a and sort_b sort small arrays with qsort()
 *             (libc's merge sort, no frame pointers, a few levels deep)
 *             and a comparator, 2 arrays of sort_a for 1 of sort_b, called
 *             through one function pointer. Prints `truth sort_a P` and
 *             `truth sort_b P` (their shares of the thread's CPU time).
 */
#include "workload.h"

void wait_long(void);
void wait_other(void);
void waiter(double seconds, double *t, long *waits);
int cmp_u32(const void *x, const void *y);
void sort_a(uint32_t *v, size_t n, uint64_t *s);
void sort_b(uint32_t *v, size_t n, uint64_t *s);
void sorter(double ms, double *t);

WL_NOINLINE void wait_long(void)
{
	struct timespec ts = { 0, 2 * 1000 * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	__asm__ volatile("" ::: "memory"); /* a call, never a tail jump */
}

WL_NOINLINE void wait_other(void)
{
	struct timespec ts = { 0, 2 * 1000 * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	__asm__ volatile("" ::: "memory");
}

static void (*volatile wait_fn[4])(void) = { wait_long, wait_other, wait_long, wait_long };

WL_NOINLINE void waiter(double seconds, double *t, long *waits)
{
	double start = wl_wall_ms();

	for (long i = 0; wl_wall_ms() - start < seconds * 1000; i++) {
		void (*f)(void) = wait_fn[i % 4];
		double t0 = wl_wall_ms();

		f();
		t[f == wait_other] += wl_wall_ms() - t0;
		(*waits)++;
	}
}

WL_NOINLINE int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return (a > b) - (a < b);
}

static inline void fill(uint32_t *v, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		*s ^= *s << 13;
		*s ^= *s >> 7;
		*s ^= *s << 17;
		v[i] = (uint32_t)*s;
	}
}

/* fills v anew and sorts it: all of it in sort_a's (sort_b's) time */
WL_NOINLINE void sort_a(uint32_t *v, size_t n, uint64_t *s)
{
	fill(v, n, s);
	qsort(v, n, sizeof(*v), cmp_u32);
	__asm__ volatile("" ::: "memory");
}

WL_NOINLINE void sort_b(uint32_t *v, size_t n, uint64_t *s)
{
	fill(v, n, s);
	qsort(v, n, sizeof(*v), cmp_u32);
	__asm__ volatile("" ::: "memory");
}

static void (*volatile sort_fn[3])(uint32_t *, size_t, uint64_t *) = { sort_a, sort_b, sort_a };

WL_NOINLINE void sorter(double ms, double *t)
{
	uint32_t v[128];
	uint64_t s = 0x9e3779b97f4a7c15u;
	double start = wl_thread_ms();

	for (long i = 0; wl_thread_ms() - start < ms; i++) {
		void (*f)(uint32_t *, size_t, uint64_t *) = sort_fn[i % 3];
		double t0 = wl_thread_ms();

		/* many sorts per clock read: the clock costs a system call */
		for (int k = 0; k < 200; k++)
			f(v, sizeof(v) / sizeof(v[0]), &s);
		t[f == sort_b] += wl_thread_ms() - t0;
	}
	wl_sink = v[0];
}

int main(int argc, char **argv)
{
	double seconds = wl_arg(argc, argv, 1, 2);
	const char *mode = argc > 2 ? argv[2] : "off";
	double t[2] = { 0, 0 };

	wl_print_pid();
	if (!strcmp(mode, "off")) {
		long waits = 0;

		waiter(seconds, t, &waits);
		printf("info waits %ld\n", waits);
		wl_truth("wait_long", t[0], t[0] + t[1]);
		wl_truth("wait_other", t[1], t[0] + t[1]);
	} else if (!strcmp(mode, "qsort")) {
		sorter(seconds * 1000, t);
		wl_truth("sort_a", t[0], t[0] + t[1]);
		wl_truth("sort_b", t[1], t[0] + t[1]);
	} else {
		fprintf(stderr, "%s: unknown mode '%s' (off or qsort)\n", argv[0], mode);
		return 2;
	}
	return 0;
}
