/*
 * cxxsplit [MS]: about MS milliseconds of CPU time (default 1000) in C++ code
 * whose names are mangled in its symbol table, split 2:1:2:1 between
 *   ns_a::Grid<int>::sweep(int)     a member of a class template (noinline)
 *   ns_b::churn(double)             a function in a namespace (noinline)
 *   ns_a::compare(...), ns_b::compare(...)
 *                                   two functions with one bare name, always
 *                                   inlined into ns_b::mix(int); ns_a::compare
 *                                   into ns_b::again(int) too (two places)
 * each part measured with the thread CPU clock and printed as
 * `truth NAME PERCENT`, NAME as the report's short names are (pprof's):
 * ns_a::Grid::sweep, ns_b::churn, ns_a::compare, ns_b::compare.
 */
#include "workload.h"

namespace ns_a {
template <typename T> struct Grid {
	T seed;
	WL_NOINLINE uint64_t sweep(int units);
};

template <typename T> uint64_t Grid<T>::sweep(int units)
{
	uint64_t x = (uint64_t)seed | 1;
	WL_SPIN(x, (uint64_t)units * WL_UNIT, 3);
	return x;
}

static inline __attribute__((always_inline)) uint64_t compare(uint64_t x, uint64_t units)
{
	WL_SPIN(x, units * WL_UNIT, 5);
	return x;
}
} // namespace ns_a

namespace ns_b {
WL_NOINLINE uint64_t churn(double units)
{
	uint64_t x = 0x9e3779b97f4a7c15u;
	WL_SPIN(x, (uint64_t)units * WL_UNIT, 7);
	return x;
}

static inline __attribute__((always_inline)) uint64_t compare(uint64_t x, uint64_t units)
{
	WL_SPIN(x, units * WL_UNIT, 11);
	return x;
}

WL_NOINLINE uint64_t mix(int units, double *ta, double *tb)
{
	uint64_t x = (uint64_t)units;
	double t0 = wl_thread_ms();
	x = ns_a::compare(x, (uint64_t)units);
	double t1 = wl_thread_ms();
	x = ns_b::compare(x, (uint64_t)units);
	*ta += t1 - t0;
	*tb += wl_thread_ms() - t1;
	return x;
}

WL_NOINLINE uint64_t again(int units, double *ta)
{
	uint64_t x = (uint64_t)units ^ 0x5555;
	double t0 = wl_thread_ms();
	x = ns_a::compare(x, (uint64_t)units);
	*ta += wl_thread_ms() - t0;
	return x;
}
} // namespace ns_b

int main(int argc, char **argv)
{
	double target = wl_arg(argc, argv, 1, 1000);
	double tg = 0, tc = 0, ta = 0, tb = 0;
	double start = wl_thread_ms();
	ns_a::Grid<int> g{ 42 };

	wl_print_pid();
	do {
		/* one of the four calls, as likely each (wl_pick: no round for a
		 * sampling period to fall into step with) */
		double t0 = wl_thread_ms();
		switch (wl_pick(4)) {
		case 0: wl_sink += g.sweep(2); tg += wl_thread_ms() - t0; break;
		case 1: wl_sink += ns_b::churn(1); tc += wl_thread_ms() - t0; break;
		case 2: wl_sink += ns_b::mix(1, &ta, &tb); break;
		default: wl_sink += ns_b::again(1, &ta); break;
		}
	} while (wl_thread_ms() - start < target);

	double all = tg + tc + ta + tb;
	wl_truth("ns_a::Grid::sweep", tg, all);
	wl_truth("ns_b::churn", tc, all);
	wl_truth("ns_a::compare", ta, all);
	wl_truth("ns_b::compare", tb, all);
	return 0;
}
