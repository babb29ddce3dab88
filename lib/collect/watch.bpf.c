/* The exec watch (docs/sampling.md, "Rounds"): at every exec of the machine,
 * tells tally (one event in a ring buffer, which wakes its wait) when the file
 * executed is one it has not been told of since it last forgot (a program new
 * to it: its files must be identified while they exist), or one it asked to be
 * told of at each start (a runtime whose processes made JIT code: their perf
 * maps are read while they live). Any other exec wakes nobody: its side-band
 * records wait in the perf rings for tally's next round. Built with clang
 * -target bpf; the kernel fields it reads are declared here and relocated
 * against the running kernel's BTF (CO-RE). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "watch-bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct super_block {
	unsigned int s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
	unsigned int i_generation;
	struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct linux_binprm {
	struct file *file;
} __attribute__((preserve_access_index));

/* set by tally: what was told of under an older generation counts as untold */
volatile wb_u32 generation = 1;
/* set by tally when it looks at its rings: the count of execs that is a burst */
volatile wb_u64 burst_at = ~0ULL;
wb_u64 execs = 0; /* every exec of the machine */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, WB_TOLD);
	__type(key, struct wb_file);
	__type(value, wb_u32);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WB_CLOSE);
	__type(key, struct wb_file);
	__type(value, wb_u32);
} close_watch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

SEC("tp_btf/sched_process_exec")
int tally_exec(unsigned long long *ctx)
{
	struct linux_binprm *bprm = (struct linux_binprm *)ctx[2];
	struct inode *in = BPF_CORE_READ(bprm, file, f_inode);
	if (!in)
		return 0;
	struct wb_file k = {
		.ino = BPF_CORE_READ(in, i_ino),
		.dev = BPF_CORE_READ(in, i_sb, s_dev),
		.gen = BPF_CORE_READ(in, i_generation),
	};
	__sync_fetch_and_add(&execs, 1);
	wb_u32 kind = WB_EV_NEW;
	if (bpf_map_lookup_elem(&close_watch, &k)) {
		kind = WB_EV_CLOSE;
	} else {
		wb_u32 g = generation;
		wb_u32 *v = bpf_map_lookup_elem(&seen, &k);
		if (v && *v == g) {
			/* a known program: its records wait for tally's next look,
			 * unless so many came since the last that they could fill a ring */
			if (execs < burst_at)
				return 0;
			burst_at = ~0ULL; /* once, until tally looks again */
			kind = WB_EV_BURST;
		} else {
			bpf_map_update_elem(&seen, &k, &g, BPF_ANY);
		}
	}
	struct wb_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0; /* full: tally has not taken what is there, and will wake for it */
	e->kind = kind;
	bpf_ringbuf_submit(e, 0);
	return 0;
}
