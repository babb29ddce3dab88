/*
 * split_images [MS]: about MS milliseconds of CPU time (default 1000) split
 * between three images: this program (own_work), libtallywork.so (lib_work)
 * and libc.so.6 (memset over a buffer that stays resident, so no page faults).
 * The phases are interleaved in rounds of a few milliseconds; each is timed
 * with the thread CPU clock and printed as `truth split_images|libtallywork.so|
 * libc.so.6 PERCENT` (percent of the three together; roughly 50:30:20).
 */
#include "workload.h"
#include "libtallywork.h"

#define BUF_SIZE (256u * 1024u)

static unsigned char buf[BUF_SIZE];
/* Not a constant, so the compiler must call memset rather than inline it. */
static volatile size_t buf_size = BUF_SIZE;

uint64_t own_work(uint64_t units);
void libc_work(unsigned reps);

WL_NOINLINE uint64_t own_work(uint64_t units)
{
	uint64_t x = 0xa0761d6478bd642fu ^ units;

	WL_SPIN(x, units * WL_UNIT, 11);
	return x;
}

/* REPS memsets of the buffer; the time is in libc's memset, not here. */
WL_NOINLINE void libc_work(unsigned reps)
{
	for (unsigned i = 0; i < reps; i++) {
		memset(buf, (int)i, buf_size);
		wl_sink += buf[i % BUF_SIZE];
	}
}

int main(int argc, char **argv)
{
	double target = wl_arg(argc, argv, 1, 1000);
	double t_own = 0, t_lib = 0, t_libc = 0, t0, t1;
	double start;
	unsigned reps = 8;

	wl_print_pid();
	libc_work(1);	/* fault the buffer in before timing */
	start = wl_thread_ms();
	t1 = start;
	do {
		/* own_work, lib_work or libc_work, as likely each (wl_pick: no
		 * round for a sampling period to fall into step with) */
		unsigned k = wl_pick(3);

		t0 = t1;
		if (k == 0)
			wl_sink += own_work(5);
		else if (k == 1)
			wl_sink += lib_work(3);
		else
			libc_work(reps);
		t1 = wl_thread_ms();
		*(k == 0 ? &t_own : k == 1 ? &t_lib : &t_libc) += t1 - t0;
		/* aim libc at about 2/3 of lib_work's time: ~20% of the total */
		if (t_libc < t_lib * 0.6 && reps < 100000)
			reps++;
		else if (t_libc > t_lib * 0.73 && reps > 1)
			reps--;
	} while (t1 - start < target);

	printf("info cpu_ms %.1f memset_reps %u\n", wl_thread_ms() - start, reps);
	wl_truth("split_images", t_own, t_own + t_lib + t_libc);
	wl_truth("libtallywork.so", t_lib, t_own + t_lib + t_libc);
	wl_truth("libc.so.6", t_libc, t_own + t_lib + t_libc);
	return 0;
}
