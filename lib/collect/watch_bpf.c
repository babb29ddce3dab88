/* The exec watch (watch-bpf.h, docs/sampling.md "Rounds"): loads watch.bpf.c
 * (embedded as a libbpf skeleton), attaches it to the sched_process_exec
 * tracepoint and takes what it tells through its ring buffer. Built only with
 * libbpf (meson option bpf). */
#define _GNU_SOURCE
#include "tally/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf-common.h"
#include "watch-bpf.h"
#include "watch.skel.h"

struct tally_watch_bpf {
	struct watch_skel *skel;
	struct ring_buffer *rb;
	unsigned taken, bursts;
};

void tally_watch_bpf_free(struct tally_watch_bpf *w)
{
	if (!w)
		return;
	ring_buffer__free(w->rb);
	watch_skel__destroy(w->skel);
	free(w);
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct tally_watch_bpf *w = ctx;
	const struct wb_event *e = data;
	if (size >= sizeof(*e) && e->kind == WB_EV_BURST)
		w->bursts++;
	else
		w->taken++;
	return 0;
}

int tally_watch_bpf_open(struct tally_watch_bpf **out)
{
	*out = NULL;
	tally_bpf_log_begin();
	struct tally_watch_bpf *w = xcalloc(1, sizeof(*w));
	int ret;
	w->skel = watch_skel__open_and_load();
	if (!w->skel) {
		ret = tally_bpf_error(-errno, "load", "exec watch");
		goto fail;
	}
	ret = watch_skel__attach(w->skel);
	if (ret) {
		ret = tally_bpf_error(ret, "attach", "exec watch");
		goto fail;
	}
	w->rb = ring_buffer__new(bpf_map__fd(w->skel->maps.events), on_event, w, NULL);
	if (!w->rb) {
		ret = tally_bpf_error(-errno, "read", "exec watch");
		goto fail;
	}
	*out = w;
	return 0;
fail:
	tally_watch_bpf_free(w);
	return ret;
}

int tally_watch_bpf_fd(const struct tally_watch_bpf *w)
{
	return bpf_map__fd(w->skel->maps.events);
}

unsigned tally_watch_bpf_take(struct tally_watch_bpf *w, unsigned *bursts)
{
	w->taken = w->bursts = 0;
	ring_buffer__consume(w->rb);
	*bursts = w->bursts;
	return w->taken;
}

void tally_watch_bpf_forget(struct tally_watch_bpf *w)
{
	__atomic_add_fetch(&w->skel->data->generation, 1, __ATOMIC_RELEASE);
}

int tally_watch_bpf_close(struct tally_watch_bpf *w, const struct wb_file *f)
{
	wb_u32 one = 1;
	if (bpf_map__update_elem(w->skel->maps.close_watch, f, sizeof(*f), &one, sizeof(one),
				 BPF_ANY) < 0)
		return tally_seterr(-errno, "cannot ask the exec watch to tell of a program: %s",
				    strerror(errno));
	return 0;
}

void tally_watch_bpf_mark(struct tally_watch_bpf *w, uint64_t every)
{
	uint64_t now = __atomic_load_n(&w->skel->bss->execs, __ATOMIC_RELAXED);
	__atomic_store_n(&w->skel->data->burst_at, now + every, __ATOMIC_RELEASE);
}
