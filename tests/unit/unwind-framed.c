/* top_fn of unwind-frames.h: built with -fno-omit-frame-pointer
 * (tests/unit/meson.build). */
#include "unwind-frames.h"

__attribute__((noinline, used)) void top_fn(void)
{
	mid_fn();
	__asm__ volatile("" ::: "memory");
}
