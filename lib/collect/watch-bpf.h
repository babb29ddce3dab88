/* What the exec watch (watch.bpf.c) and tally share (docs/sampling.md,
 * "Rounds"): the identity of an executed file as the kernel has it, and the
 * event that tells tally a program it must look at has started. Included by
 * the BPF object and by watch_bpf.c. */
#ifndef TALLY_WATCH_BPF_H
#define TALLY_WATCH_BPF_H

#ifdef __bpf__
typedef __u32 wb_u32;
typedef __u64 wb_u64;
#else
#include <stdint.h>
typedef uint32_t wb_u32;
typedef uint64_t wb_u64;
#endif

/* A file: its filesystem's device (the kernel's encoding: major << 20 |
 * minor, as MMAP2 records give them apart), inode and inode generation. */
struct wb_file {
	wb_u64 ino;
	wb_u32 dev, gen;
};

/* told: an exec of a file not told of since tally last forgot (a program new
 * to it), or of a program it asked to be told of at each start (its processes
 * made JIT code), or the exec that makes a burst: as many execs since tally
 * last looked at its rings as would fill a good part of one with their
 * side-band records (half of one: tally_watch_bpf_mark, mech_counted.c) */
enum { WB_EV_NEW, WB_EV_CLOSE, WB_EV_BURST };
struct wb_event {
	wb_u32 kind;
};

/* files told of, at most (least recently told make room: told again) */
#define WB_TOLD 4096
/* programs tally asked to be told of at each start */
#define WB_CLOSE 1024

#ifndef __bpf__
#include <stdbool.h>

struct tally_watch_bpf;
/* Loads and attaches the watch to every exec of the machine. 0, or -errno
 * with tally_seterr naming libbpf's reason (then there is none). */
int tally_watch_bpf_open(struct tally_watch_bpf **out);
void tally_watch_bpf_free(struct tally_watch_bpf *w);
/* The descriptor that becomes readable when the watch told of an exec. */
int tally_watch_bpf_fd(const struct tally_watch_bpf *w);
/* Takes what the watch told since the last call: how many execs of programs
 * new to tally or watched, and (*bursts) how many bursts. */
unsigned tally_watch_bpf_take(struct tally_watch_bpf *w, unsigned *bursts);
/* Forgets every file told of (each is told of again at its next exec). */
void tally_watch_bpf_forget(struct tally_watch_bpf *w);
/* Tells of every start of the program in file f from now on. 0 or -errno. */
int tally_watch_bpf_close(struct tally_watch_bpf *w, const struct wb_file *f);
/* Tally has looked at its rings: the exec that comes `every` execs from now
 * (of the whole machine) tells of a burst, once. */
void tally_watch_bpf_mark(struct tally_watch_bpf *w, uint64_t every);
#endif

#endif
