/* The collector's private interface: what the files of lib/collect share
 * behind include/tally/collect.h. Never included outside lib/collect (the
 * unit tests aside). */
#ifndef TALLY_COLLECT_INTERNAL_H
#define TALLY_COLLECT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tally/collect.h"

struct perf_event_attr;

/* events.c */
/* perf_event_open(2) */
long collect_perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group, unsigned long flags);
/* Whether events must leave the kernel out (unprivileged, paranoid >= 2). */
bool collect_exclude_kernel(void);
/* -e with tally_seterr: event ev could not be opened (where: "on CPU 1", "for pid 7"). */
int collect_open_error(const struct tally_event_desc *ev, int e, const char *where);
/* The side-band event (opts.sideband_dummy): no samples, the records of mmaps, comms and tasks. */
extern const struct tally_event_desc collect_dummy_desc;

#endif
