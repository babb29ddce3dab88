/* A function whose CFI is only in .debug_frame (built with
 * -fno-asynchronous-unwind-tables and -g: tests/unit/meson.build), for
 * test-unwind.c's look at where the repair reads that section. */
#include "unwind-frames.h"

volatile int nounwind_sink;

void nounwind_fn(void)
{
	nounwind_sink++;
}
