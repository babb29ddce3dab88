/* Private to lib/aggregate: what agg.c, proc.c and jit.c share. */
#ifndef TALLY_AGGREGATE_INTERNAL_H
#define TALLY_AGGREGATE_INTERNAL_H

#include "tally/agg.h"

/* x86-64 kernel addresses live in the upper half; cpumode says so too, but a
 * callchain entry carries no cpumode of its own */
#define KERNEL_START 0xffff800000000000ULL

/* agg.c */
void agg_proc_free(struct tally_proc *p);

/* proc.c: processes, maps and the mmap/comm/fork/exit records */
struct tally_proc *agg_proc_lookup(struct tally_agg *a, int pid);
void agg_on_mmap2(struct tally_agg *a, const struct tally_rec *r);
void agg_on_comm(struct tally_agg *a, const struct tally_rec *r);
void agg_on_fork(struct tally_agg *a, const struct tally_rec *r);
void agg_on_exit_rec(struct tally_agg *a, const struct tally_rec *r);

/* agg.c: the sample memo (struct tally_agg.memo) forgets every row it knows;
 * called wherever a sample's row could change */
static inline void agg_memo_forget(struct tally_agg *a)
{
	a->memo_gen++;
}
/* agg.c: frees the collected processes (tally_agg.grave) once the memo has
 * forgotten their rows; it keeps the others' */
void agg_free_grave(struct tally_agg *a);

/* jit.c: perf maps and jitdumps */
void agg_snapshot_jit(struct tally_agg *a, struct tally_proc *p);
bool agg_is_jitdump_name(const char *path, int pid);
void agg_check_jitdump(struct tally_agg *a, struct tally_proc *p, const char *name);
void agg_check_jit(struct tally_agg *a, struct tally_proc *p);

#endif
