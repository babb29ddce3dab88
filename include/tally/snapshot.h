/* A recording's aggregate made into a database: what lib/record hands to the
 * database writer (lib/db), to tally top and to the daemon's peek. */
#ifndef TALLY_SNAPSHOT_H
#define TALLY_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/agg.h"
#include "tally/db.h"

/* The kernel's symbols kept between writes by a long-running writer, so that
 * /proc/kallsyms is read once (and again when the module list changes), not at
 * every write. Zero-initialize; release frees. */
struct tally_ksym_cache {
	struct tally_kallsyms *table; /* every text symbol, read once */
	char *modules;                /* /proc/modules when it was read */
	uint64_t reads;               /* how many times /proc/kallsyms was read */
};
void tally_ksym_cache_release(struct tally_ksym_cache *kc);

/* The kernel's text symbols for one write that needs addrs (lib/record/kcache.c):
 * the copy kept in the build-id cache when it was read on this boot with these
 * modules (read_modules' list) and covers every address (*from_cache), else
 * /proc/kallsyms read now (and the copy made again). *out is the caller's
 * (tally_kallsyms_free). 0 or -errno with tally_seterr. */
int tally_kernel_symbols_for(const uint64_t *addrs, size_t n, const char *modules,
			     struct tally_kallsyms **out, bool *from_cache);

/* The database an aggregate makes, in memory: images identified, self counts per
 * (image, pid, offset), stacks, the kernel symbols the samples need (through kc
 * when not NULL), the module list, tasks, JIT maps and the vDSO copied, and the
 * session (the caller's keys; counts set here). 0 or -errno. */
int tally_db_from_agg(struct tally_db *out, struct tally_agg *a, const struct tally_meta *session,
		      struct tally_ksym_cache *kc);

/* The same as a live view needs it (tally top, the daemon's peek): with every
 * live process that has samples in the task list too (so that it has a
 * command name), not only those that exited. 0 or -errno. */
int tally_db_from_agg_live(struct tally_db *out, struct tally_agg *a,
			   const struct tally_meta *session, struct tally_ksym_cache *kc);

/* Writes the aggregate and the session metadata (the caller's keys; counts are
 * added here) as a database at path, atomically. */
int tally_db_write(const char *path, bool force, struct tally_agg *a, struct tally_meta *session);

#endif
