/*
 * waitpaths [N] [LEVELS] [BATCH PAUSE_MS]: N short waits off the CPU (a 1 us
 * clock_nanosleep each), every one from its own call path: wait number i goes
 * down LEVELS calls (default 15), each to path_0 or path_1 as bit k of i says,
 * so the first 2^LEVELS waits all have distinct stacks; with BATCH, a pause of
 * PAUSE_MS (from main, not counted) after every BATCH waits. For the kernel's
 * stack maps of `record --off-cpu --off-cpu-mechanism bpf -g`, which keep a
 * stack once, in a slot by its hash, until tally turns them over: a wait whose
 * slot is taken keeps one frame.
 * Prints `info waits N`, `info blocked_ns N` (the waits' total, measured
 * with the monotonic clock around each) and `info paused_ns N` (the pauses').
 */
#include "workload.h"

static double blocked_ms, paused_ms;

void path_0(unsigned i, int level);
void path_1(unsigned i, int level);

static WL_NOINLINE void wait_here(void)
{
	struct timespec ts = { 0, 1000 };
	double t0 = wl_wall_ms();
	nanosleep(&ts, NULL);
	blocked_ms += wl_wall_ms() - t0;
}

static void down(unsigned i, int level)
{
	if (level <= 0)
		wait_here();
	else if ((i >> (level - 1)) & 1)
		path_1(i, level - 1);
	else
		path_0(i, level - 1);
}

/* two functions, so that each level's caller differs by the path's bit; the
 * asm after the call keeps it from being a tail call (one frame per level) */
WL_NOINLINE void path_0(unsigned i, int level)
{
	down(i, level);
	__asm__ volatile("" ::: "memory");
}

WL_NOINLINE void path_1(unsigned i, int level)
{
	down(i, level);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	unsigned n = (unsigned)wl_arg(argc, argv, 1, 40000);
	int levels = (int)wl_arg(argc, argv, 2, 15);
	unsigned batch = (unsigned)wl_arg(argc, argv, 3, 0);
	long pause_ms = wl_arg(argc, argv, 4, 0);
	for (unsigned i = 0; i < n; i++) {
		down(i, levels);
		if (batch && (i + 1) % batch == 0 && i + 1 < n) {
			struct timespec ts = { pause_ms / 1000, pause_ms % 1000 * 1000000 };
			double t0 = wl_wall_ms();
			nanosleep(&ts, NULL);
			paused_ms += wl_wall_ms() - t0;
		}
	}
	printf("info waits %u\n", n);
	printf("info blocked_ns %.0f\n", blocked_ms * 1e6);
	printf("info paused_ns %.0f\n", paused_ms * 1e6);
	return 0;
}
