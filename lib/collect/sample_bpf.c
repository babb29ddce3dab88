/* Samples counted in the kernel (sample-bpf.h, docs/sampling.md): loads
 * sample.bpf.c (embedded as a libbpf skeleton), attaches it to the collector's
 * per-CPU sampling events and reads and clears its map of counts once per
 * round. Built only with libbpf (meson option bpf). */
#define _GNU_SOURCE
#include "tally/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/perf_event.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sample-bpf.h"
#include "sample.skel.h"

#define BATCH 4096

struct tally_sample_bpf {
	struct sample_skel *skel;
	int counts_fd;
	int prog_fd[SB_MAX_EVENTS];
	bool batch_ok;
	struct sb_key *keys;
	struct sb_val *vals;
	size_t n, alloc;
};

/* libbpf's first warning since the load began: the reason it failed */
static char last_msg[256];

static int on_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	char buf[sizeof(last_msg)];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	if (buf[0] && !last_msg[0])
		memcpy(last_msg, buf, sizeof(buf));
	return 0;
}

void tally_sample_bpf_free(struct tally_sample_bpf *b)
{
	if (!b)
		return;
	sample_skel__destroy(b->skel);
	free(b->keys);
	free(b->vals);
	free(b);
}

static int load_error(int e, const char *what)
{
	return tally_seterr(e < 0 ? e : -EINVAL, "cannot %s the sampling BPF program: %s%s%s", what, strerror(e < 0 ? -e : e),
			    last_msg[0] ? ": " : "", last_msg);
}

int tally_sample_bpf_open(struct tally_sample_bpf **out, const bool *time_based, int nevents)
{
	*out = NULL;
	if (nevents > SB_MAX_EVENTS)
		return tally_seterr(-EINVAL, "the sampling BPF program counts at most %d events", SB_MAX_EVENTS);
	last_msg[0] = 0;
	libbpf_set_print(on_libbpf_print);
	struct tally_sample_bpf *b = xcalloc(1, sizeof(*b));
	int ret;
	b->skel = sample_skel__open();
	if (!b->skel) {
		ret = load_error(-errno, "open");
		goto fail;
	}
	for (int i = 0; i < nevents; i++)
		b->skel->rodata->time_based[i] = time_based[i];
	ret = sample_skel__load(b->skel);
	if (ret) {
		ret = load_error(ret, "load");
		goto fail;
	}
	b->counts_fd = bpf_map__fd(b->skel->maps.counts);
	struct bpf_program *progs[SB_MAX_EVENTS] = { b->skel->progs.count0, b->skel->progs.count1, b->skel->progs.count2,
						     b->skel->progs.count3 };
	for (int i = 0; i < SB_MAX_EVENTS; i++)
		b->prog_fd[i] = bpf_program__fd(progs[i]);
	b->batch_ok = true;
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

static void room(struct tally_sample_bpf *b, size_t more)
{
	if (b->n + more <= b->alloc)
		return;
	size_t a = b->alloc ? b->alloc : BATCH;
	while (a < b->n + more)
		a *= 2;
	b->keys = xrealloc(b->keys, a * sizeof(*b->keys));
	b->vals = xrealloc(b->vals, a * sizeof(*b->vals));
	b->alloc = a;
}

/* One entry at a time: a kernel without batch operations on hash maps. */
static int drain_slow(struct tally_sample_bpf *b)
{
	struct sb_key k;
	while (!bpf_map_get_next_key(b->counts_fd, NULL, &k)) {
		room(b, 1);
		if (!bpf_map_lookup_and_delete_elem(b->counts_fd, &k, &b->vals[b->n]) ||
		    (!bpf_map_lookup_elem(b->counts_fd, &k, &b->vals[b->n]) && !bpf_map_delete_elem(b->counts_fd, &k)))
			b->keys[b->n++] = k;
		else
			return tally_seterr(-errno, "cannot read the sampling BPF map: %s", strerror(errno));
	}
	return 0;
}

int tally_sample_bpf_drain(struct tally_sample_bpf *b, const struct sb_key **keys, const struct sb_val **vals, size_t *n)
{
	b->n = 0;
	int ret = 0;
	if (!b->batch_ok) {
		ret = drain_slow(b);
	} else {
		sb_u64 token = 0;
		bool first = true;
		for (;;) {
			room(b, BATCH);
			__u32 count = BATCH;
			int r = bpf_map_lookup_and_delete_batch(b->counts_fd, first ? NULL : &token, &token, b->keys + b->n,
								b->vals + b->n, &count, NULL);
			int e = r ? -errno : 0;
			if (r && e != -ENOENT && !count) {
				if (first && (e == -EINVAL || e == -ENOTSUP || e == -EOPNOTSUPP)) {
					b->batch_ok = false;
					ret = drain_slow(b);
				} else {
					ret = tally_seterr(e, "cannot read the sampling BPF map: %s", strerror(-e));
				}
				break;
			}
			first = false;
			b->n += count;
			if (r)
				break; /* -ENOENT: the end */
		}
	}
	*keys = b->keys;
	*vals = b->vals;
	*n = b->n;
	return ret;
}
