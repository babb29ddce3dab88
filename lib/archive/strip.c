/* --strip-debug-to-sampled (archive.h): placeholder until written. */
#define _GNU_SOURCE
#include "tally/archive.h"

#include <errno.h>

int tally_strip_debug(const char *src, const uint64_t *addrs, size_t naddrs, int fd, struct tally_strip_stats *st)
{
	(void)src, (void)addrs, (void)naddrs, (void)fd, (void)st;
	return -ENOTSUP;
}
