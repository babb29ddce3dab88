/*
 * threads [N] [MS]: N threads (1-8, default 4), thread i running thread_fn_i
 * for MS milliseconds of its own CPU time (default 250), all at once.  Each
 * thread times its function with its thread CPU clock; the shares are printed
 * as `truth thread_fn_I PERCENT` (percent of all N functions together).
 */
#include "workload.h"

#include <pthread.h>

#define MAX_THREADS 8

static double target_ms;
static double spent_ms[MAX_THREADS];

/* Thread function I: spins in chunks until its thread has used target_ms. */
#define THREAD_FN(i)                                                           \
	void *thread_fn_##i(void *arg);                                        \
	WL_NOINLINE void *thread_fn_##i(void *arg)                            \
	{                                                                      \
		uint64_t x = 0x2545f4914f6cdd1du + (i);                        \
		double start = wl_thread_ms(), now;                            \
                                                                               \
		(void)arg;                                                     \
		do {                                                           \
			WL_SPIN(x, 4 * WL_UNIT, 17 + 2 * (i));                 \
			now = wl_thread_ms();                                  \
		} while (now - start < target_ms);                             \
		wl_sink += x;                                                  \
		spent_ms[i] = now - start;                                     \
		return NULL;                                                   \
	}

THREAD_FN(0)
THREAD_FN(1)
THREAD_FN(2)
THREAD_FN(3)
THREAD_FN(4)
THREAD_FN(5)
THREAD_FN(6)
THREAD_FN(7)

static void *(*const thread_fns[MAX_THREADS])(void *) = {
	thread_fn_0, thread_fn_1, thread_fn_2, thread_fn_3,
	thread_fn_4, thread_fn_5, thread_fn_6, thread_fn_7,
};

int main(int argc, char **argv)
{
	int n = (int)wl_arg(argc, argv, 1, 4);
	pthread_t tid[MAX_THREADS];
	double sum = 0;
	char name[32];

	target_ms = wl_arg(argc, argv, 2, 250);
	if (n < 1 || n > MAX_THREADS) {
		fprintf(stderr, "%s: thread count must be 1-%d\n", argv[0], MAX_THREADS);
		return 2;
	}
	wl_print_pid();
	for (int i = 0; i < n; i++) {
		int err = pthread_create(&tid[i], NULL, thread_fns[i], NULL);

		if (err) {
			fprintf(stderr, "pthread_create: %s\n", strerror(err));
			return 2;
		}
	}
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	for (int i = 0; i < n; i++)
		sum += spent_ms[i];
	printf("info cpu_ms %.1f\n", wl_process_ms());
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "thread_fn_%d", i);
		wl_truth(name, spent_ms[i], sum);
	}
	return 0;
}
