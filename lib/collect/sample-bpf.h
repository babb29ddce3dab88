/* What the sampling BPF program (sample.bpf.c) and tally share: its places
 * (key and counts), and the per (CPU, event) slot through which tally
 * hands it the period in effect and reads back what the timer did
 * (docs/sampling.md, "Counting in the kernel"). Included by the BPF object and
 * by sample_bpf.c. */
#ifndef TALLY_SAMPLE_BPF_H
#define TALLY_SAMPLE_BPF_H

#ifdef __bpf__
typedef __u16 sb_u16;
typedef __u32 sb_u32;
typedef __u64 sb_u64;
#else
#include <stdint.h>
typedef uint16_t sb_u16;
typedef uint32_t sb_u32;
typedef uint64_t sb_u64;
#endif

/* events counted by the program (one entry point each), CPUs it has a slot for */
#define SB_MAX_EVENTS 4
#define SB_MAX_CPUS 512
/* intervals between consecutive samples of one thread kept per slot, newest last */
#define SB_IVALS 16

/* one place: a process, an event, an address in user or kernel mode */
struct sb_key {
	sb_u32 tgid;
	sb_u16 event, kernel;
	sb_u64 ip;
};

/* the samples at that place: how many, their summed weight (the period each
 * stood for), the last one's time (CLOCK_MONOTONIC ns: where tally puts the
 * place among the ring's records). In the table they only grow; what a drain
 * returns is what they grew by since the last. */
struct sb_val {
	sb_u64 count, weight, last;
};

/* places a table holds (a power of two); two tables */
#define SB_PLACES 8192

/* a slot of a table: ready once its key is written; count and weight only grow */
struct sb_place {
	struct sb_key key;
	sb_u64 weight, count, last;
	sb_u32 ready, pad;
};

/* One per (CPU, event), index cpu * SB_MAX_EVENTS + event. tally writes period
 * (0: take the sample's own period) and adds to carry; the program takes the
 * carry into the next sample's weight and keeps the rest. */
struct sb_slot {
	sb_u64 period;   /* the period tally set last (time-based events) */
	sb_u64 carry;    /* time a period change cut short, for the next sample */
	sb_u64 weighed;  /* the weights of the samples counted here so far */
	sb_u64 last_time;
	sb_u64 nivals;   /* intervals measured so far; the last SB_IVALS in ivals */
	sb_u32 last_tid, pad;
	sb_u64 ivals[SB_IVALS];
	sb_u64 ring;     /* samples left to the ring buffer (the map was full) */
};

#ifndef __bpf__
/* The loader (sample_bpf.c; absent from a build without libbpf). */
#include <stdbool.h>
#include <stddef.h>

struct tally_sample_bpf;
/* Loads the program for nevents events (at most SB_MAX_EVENTS), time_based[i]
 * for each. 0, or -errno with tally_seterr naming libbpf's reason. */
int tally_sample_bpf_open(struct tally_sample_bpf **out, const bool *time_based, int nevents);
/* Counts the samples of a perf event fd of event ev from now on. */
int tally_sample_bpf_attach(struct tally_sample_bpf *b, int perf_fd, int ev);
/* The slot of (cpu, ev), shared with the program. */
struct sb_slot *tally_sample_bpf_slot(struct tally_sample_bpf *b, int cpu, int ev);
/* What the places counted since what was last taken of them: *n entries in
 * *keys and *vals (owned by b, valid until tally_sample_bpf_commit), each
 * place whose count grew, by how much. Reads the tables in tally's memory,
 * without a system call. 0, or -errno with tally_seterr (the entries read so
 * far are in *n). */
int tally_sample_bpf_drain(struct tally_sample_bpf *b, const struct sb_key **keys,
			   const struct sb_val **vals, size_t *n);
/* Ends a drain: the entries taken[k] (all when taken is NULL) are taken, the
 * others left in the tables for a later drain (their counts grow on there).
 * A table about to be emptied is taken whole: its entries are set in taken.
 * Turns new places to the other table when one fills, and empties the first
 * (a system call) once no program can still be counting into it. */
void tally_sample_bpf_commit(struct tally_sample_bpf *b, bool *taken);
/* How many times a full table was emptied (its places read a last time). */
uint64_t tally_sample_bpf_emptied(const struct tally_sample_bpf *b);
void tally_sample_bpf_free(struct tally_sample_bpf *b);
#endif

#endif
