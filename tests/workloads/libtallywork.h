/* libtallywork.so: a shared library of the tests' own, so a workload can split its time between
 * images. */
#ifndef TALLY_LIBTALLYWORK_H
#define TALLY_LIBTALLYWORK_H

#include <stdint.h>

/* Spin UNITS work units (the same loop as the workloads' own functions) and return the result. */
uint64_t lib_work(uint64_t units);

#endif
