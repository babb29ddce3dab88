/* libtallywork.so: lib_work, CPU work that lives in a shared library of the tests' own. */
#include "workload.h"
#include "libtallywork.h"

WL_NOINLINE uint64_t lib_work(uint64_t units)
{
	uint64_t x = 0xd6e8feb86659fd93u ^ units;

	WL_SPIN(x, units * WL_UNIT, 7);
	wl_sink = x;
	return x;
}
