/*
 * offcpu_split [SECONDS] [MODE]: waits off the CPU for known times, measured
 * here with the monotonic clock around each wait, for `tally record --off-cpu`.
 *
 *   (default) block_a sleeps 6 ms in one clock_nanosleep per round, block_b waits
 *             3 x 1 ms in poll on a pipe nobody writes to: time 2:1, number of
 *             waits 1:3 (a profile that counts waits instead of timing them
 *             gets the split the wrong way round). Prints `truth block_a P`,
 *             `truth block_b P` (of the time both waited) and
 *             `info blocked_ns N` (their total) and `info rounds N` (of
 *             block_a once and block_b once each).
 *   short     block_a as above; block_b waits 40 x 50 us: with
 *             --off-cpu-min 1ms only block_a is left. Prints
 *             `info short_waits N` (block_b's waits), and
 *             `info short_long_waits N` and `info short_long_ns N`: those
 *             of them that lasted 1 ms or more all the same (a busy CPU).
 *   preempt   two threads on CPU 0 spin in spin_a for SECONDS: each is
 *             runnable but preempted about half the time. Prints
 *             `info preempted_ns N` (wall time minus CPU time of both
 *             threads), `info cpu_ns N` and `info join_ns N` (the main
 *             thread's wait for them: blocked).
 *   pid       like the default, but prints `pid N` first and runs until
 *             killed when SECONDS is 0 (for -p).
 */
#include "workload.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>

void block_a(void);
void block_b(int fd, int n, int usec);
uint64_t spin_a(double ms);

static double measured_a, measured_b;
static long short_waits, short_long;
/* short waits that lasted 1 ms or more all the same (a loaded machine) */
static double short_long_ms;

WL_NOINLINE void block_a(void)
{
	struct timespec ts = { 0, 6 * 1000 * 1000 };
	double t0 = wl_wall_ms();

	/* clock_nanosleep, not nanosleep: libc's nanosleep calls it, and two
	 * functions without frame pointers in a row hide block_a from -g */
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
	measured_a += wl_wall_ms() - t0;
}

WL_NOINLINE void block_b(int fd, int n, int usec)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct timespec ts = { 0, usec * 1000L };

	for (int i = 0; i < n; i++) {
		double t0 = wl_wall_ms();

		/* poll has millisecond timeouts: ppoll takes the exact wait */
		if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR) {
			perror("ppoll");
			exit(2);
		}
		double d = wl_wall_ms() - t0;
		measured_b += d;
		if (usec < 1000 && d >= 1.0) {
			short_long++;
			short_long_ms += d;
		}
	}
}

WL_NOINLINE uint64_t spin_a(double ms)
{
	uint64_t x = 0x9e3779b97f4a7c15u;
	double end = wl_wall_ms() + ms;

	while (wl_wall_ms() < end)
		WL_SPIN(x, WL_UNIT / 4, 61);
	return x;
}

static double spin_ms;
static double thread_cpu[2];

static void *spinner(void *arg)
{
	double c0 = wl_thread_ms();

	wl_sink += spin_a(spin_ms);
	thread_cpu[(long)arg] = wl_thread_ms() - c0;
	return NULL;
}

static int preempt(double seconds)
{
	cpu_set_t one;
	pthread_t t[2];

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof(one), &one) < 0) {
		perror("sched_setaffinity");
		return 2;
	}
	spin_ms = seconds * 1e3;
	double w0 = wl_wall_ms();
	for (long i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, spinner, (void *)i)) {
			fprintf(stderr, "pthread_create failed\n");
			return 2;
		}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	double wall = wl_wall_ms() - w0;
	double cpu = thread_cpu[0] + thread_cpu[1];
	printf("info preempted_ns %.0f\n", (2 * wall - cpu) * 1e6);
	printf("info cpu_ns %.0f\n", cpu * 1e6);
	/* the main thread meanwhile waits for them in pthread_join: blocked */
	printf("info join_ns %.0f\n", wall * 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = wl_arg(argc, argv, 1, 2);
	const char *mode = argc > 2 ? argv[2] : "split";
	int pfd[2];

	if (strcmp(mode, "split") && strcmp(mode, "short") && strcmp(mode, "preempt") &&
	    strcmp(mode, "pid")) {
		fprintf(stderr, "usage: %s [SECONDS] [split|short|preempt|pid]\n", argv[0]);
		return 2;
	}
	if (!strcmp(mode, "preempt"))
		return preempt(seconds);
	if (!strcmp(mode, "pid"))
		wl_print_pid();
	if (pipe(pfd) < 0) {
		perror("pipe");
		return 2;
	}
	double start = wl_wall_ms();
	double cpu0 = wl_process_ms();
	long rounds = 0;
	while ((!strcmp(mode, "pid") && seconds <= 0) || wl_wall_ms() - start < seconds * 1e3) {
		block_a();
		if (!strcmp(mode, "short")) {
			block_b(pfd[0], 40, 50);
			short_waits += 40;
		} else {
			block_b(pfd[0], 3, 1000);
		}
		rounds++;
	}
	double both = measured_a + measured_b;
	wl_truth("block_a", measured_a, both);
	wl_truth("block_b", measured_b, both);
	printf("info blocked_ns %.0f\n", both * 1e6);
	printf("info block_a_ns %.0f\n", measured_a * 1e6);
	printf("info short_waits %ld\n", short_waits);
	printf("info short_long_waits %ld\n", short_long);
	printf("info short_long_ns %.0f\n", short_long_ms * 1e6);
	/* the loop's wall time and the CPU time in it: wall = on + off the CPU */
	printf("info loop_ns %.0f\n", (wl_wall_ms() - start) * 1e6);
	printf("info rounds %ld\n", rounds);
	printf("info loop_cpu_ns %.0f\n", (wl_process_ms() - cpu0) * 1e6);
	return 0;
}
