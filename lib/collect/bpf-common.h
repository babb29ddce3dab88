/* What the two BPF loaders (offcpu_bpf.c, sample_bpf.c) share: libbpf's
 * reason for a failed load kept for the error message (libtally never
 * prints), and reading and clearing a hash map in batches, one entry at a
 * time on a kernel without batch operations. Built only with libbpf. */
#ifndef TALLY_BPF_COMMON_H
#define TALLY_BPF_COMMON_H

#include <stdbool.h>
#include <stddef.h>

/* Starts keeping libbpf's first warning (the reason a load fails). */
void tally_bpf_log_begin(void);
/* -errno with tally_seterr: "cannot WHAT the PROG BPF program: reason: libbpf's". */
int tally_bpf_error(int e, const char *what, const char *prog);

/* Takes every entry out of the hash map fd (keys of ksz bytes, values of vsz)
 * and hands them to each, up to batch at a time, through buffers of its own.
 * *batch_ok starts true and turns false on a kernel without batch reads.
 * Returns the entries taken, or -errno with tally_seterr naming the map (what). */
struct tally_bpf_drain {
	int fd;
	size_t ksz, vsz, batch;
	bool batch_ok;
	const char *what;
	void *keys, *vals;
};
void tally_bpf_drain_init(struct tally_bpf_drain *d, int fd, size_t ksz, size_t vsz, size_t batch,
			  const char *what);
void tally_bpf_drain_release(struct tally_bpf_drain *d);
long tally_bpf_drain_all(struct tally_bpf_drain *d,
			 void (*each)(void *ctx, const void *keys, const void *vals, size_t n),
			 void *ctx);

#endif
