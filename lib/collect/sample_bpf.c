/* Samples counted in the kernel (sample-bpf.h, docs/sampling.md): loads
 * sample.bpf.c (embedded as a libbpf skeleton), attaches it to the collector's
 * per-CPU sampling events and reads and clears its map of counts once per
 * round. Built only with libbpf (meson option bpf). */
#define _GNU_SOURCE
#include "tally/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/perf_event.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf-common.h"
#include "sample-bpf.h"
#include "sample.skel.h"

#define BATCH 4096

struct tally_sample_bpf {
	struct sample_skel *skel;
	int prog_fd[SB_MAX_EVENTS];
	struct tally_bpf_drain drain;
	struct sb_key *keys; /* what the last drain took */
	struct sb_val *vals;
	size_t n, alloc;
};

void tally_sample_bpf_free(struct tally_sample_bpf *b)
{
	if (!b)
		return;
	sample_skel__destroy(b->skel);
	tally_bpf_drain_release(&b->drain);
	free(b->keys);
	free(b->vals);
	free(b);
}

int tally_sample_bpf_open(struct tally_sample_bpf **out, const bool *time_based, int nevents)
{
	*out = NULL;
	if (nevents > SB_MAX_EVENTS)
		return tally_seterr(-EINVAL, "the sampling BPF program counts at most %d events", SB_MAX_EVENTS);
	tally_bpf_log_begin();
	struct tally_sample_bpf *b = xcalloc(1, sizeof(*b));
	int ret;
	b->skel = sample_skel__open();
	if (!b->skel) {
		ret = tally_bpf_error(-errno, "open", "sampling");
		goto fail;
	}
	for (int i = 0; i < nevents; i++)
		b->skel->rodata->time_based[i] = time_based[i];
	ret = sample_skel__load(b->skel);
	if (ret) {
		ret = tally_bpf_error(ret, "load", "sampling");
		goto fail;
	}
	tally_bpf_drain_init(&b->drain, bpf_map__fd(b->skel->maps.counts), sizeof(struct sb_key), sizeof(struct sb_val),
			     BATCH, "sampling BPF map");
	struct bpf_program *progs[SB_MAX_EVENTS] = { b->skel->progs.count0, b->skel->progs.count1, b->skel->progs.count2,
						     b->skel->progs.count3 };
	for (int i = 0; i < SB_MAX_EVENTS; i++)
		b->prog_fd[i] = bpf_program__fd(progs[i]);
	*out = b;
	return 0;
fail:
	tally_sample_bpf_free(b);
	return ret;
}

int tally_sample_bpf_attach(struct tally_sample_bpf *b, int perf_fd, int ev)
{
	if (ev < 0 || ev >= SB_MAX_EVENTS)
		return tally_seterr(-EINVAL, "the sampling BPF program counts at most %d events", SB_MAX_EVENTS);
	if (ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, b->prog_fd[ev]) < 0)
		return tally_seterr(-errno, "cannot attach the sampling BPF program to a perf event: %s", strerror(errno));
	return 0;
}

struct sb_slot *tally_sample_bpf_slot(struct tally_sample_bpf *b, int cpu, int ev)
{
	if (cpu < 0 || cpu >= SB_MAX_CPUS || ev < 0 || ev >= SB_MAX_EVENTS)
		return NULL;
	return &b->skel->bss->slots[cpu * SB_MAX_EVENTS + ev];
}

static void take(void *ctx, const void *keys, const void *vals, size_t n)
{
	struct tally_sample_bpf *b = ctx;
	if (b->n + n > b->alloc) {
		size_t a = b->alloc ? b->alloc : BATCH;
		while (a < b->n + n)
			a *= 2;
		b->keys = xrealloc(b->keys, a * sizeof(*b->keys));
		b->vals = xrealloc(b->vals, a * sizeof(*b->vals));
		b->alloc = a;
	}
	memcpy(b->keys + b->n, keys, n * sizeof(*b->keys));
	memcpy(b->vals + b->n, vals, n * sizeof(*b->vals));
	b->n += n;
}

int tally_sample_bpf_drain(struct tally_sample_bpf *b, const struct sb_key **keys, const struct sb_val **vals, size_t *n)
{
	b->n = 0;
	long r = tally_bpf_drain_all(&b->drain, take, b);
	*keys = b->keys;
	*vals = b->vals;
	*n = b->n;
	return r < 0 ? (int)r : 0;
}
