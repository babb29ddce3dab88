/* Record-time aggregation: each process's mappings, the image registry, interned
 * frames (image, offset) and stacks, and the counts per (stack, pid, event).
 * Per sample: a hash lookup or two and an increment; nothing is symbolized here. */
#ifndef TALLY_AGG_H
#define TALLY_AGG_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "tally/collect.h"
#include "tally/frame.h"
#include "tally/fprepair.h"
#include "tally/jitdump.h"
#include "tally/util.h"

enum tally_image_kind {
	TALLY_IMG_FILE,   /* a mapped file: executable or library */
	TALLY_IMG_KERNEL, /* kernel and modules: offsets are kernel addresses */
	TALLY_IMG_NOMAP,  /* executable memory backed by no file: offsets are addresses */
	/* anonymous memory named by /tmp/perf-PID.map or a jitdump: offsets are addresses */
	TALLY_IMG_JIT,
	TALLY_IMG_VDSO,   /* the kernel's vDSO */
};

struct tally_image {
	enum tally_image_kind kind;
	char *path;        /* as the process saw it ("" for nomap) */
	uint8_t build_id[20];
	uint8_t build_id_len; /* 0 when the kernel did not give one */
	uint32_t maj, min;
	uint64_t ino, ino_gen;
	/* JIT: its process; files: a process that mapped it (for /proc/PID/root) */
	int pid;
	char *jit_map;     /* JIT: the map's contents, copied while the process lived */
	size_t jit_map_len;
	/* files: identity decided early by tally_agg_identify (NULL: not yet) */
	char *id, *id_kind;
	struct tally_jitdump *jd; /* JIT: the process's jitdump, parsed while it lived */
	char *jd_source;   /* JIT: the jitdump file as the process named it */
	char *jd_text;     /* JIT: the database's copy of jd (tally_agg_snapshot_jit) */
	size_t jd_text_len;
	/* files mapped by a process in another mount namespace (a container): the
	 * path is the process's own, so the file is identified while the process
	 * lives, through /proc/PID/root (tally_agg_identify_new) */
	bool foreign_ns;
	/* 1 identified while the process lived, -1 could not be, 0 not tried */
	int8_t early;
	uint8_t early_id[20];
	uint8_t early_id_len;  /* 0: early_hash is the id */
	uint64_t early_hash;
	void *leaf_cfi;        /* the file's CFI for the frame-pointer repair (unwind.h), or NULL */
};

struct tally_map {
	uint64_t start, end, pgoff;
	uint32_t image; /* TALLY_MAP_ANON for anonymous executable memory */
};
#define TALLY_MAP_ANON UINT32_MAX

struct tally_proc {
	int pid;
	char comm[16];
	char *exe;           /* path of the executable, from the first exec mapping seen */
	/* that file as its mapping's record named it (device major << 20 | minor,
	 * inode, generation; ino 0: not known), and whether its program was
	 * already said to make JIT code (tally_agg.jit_programs) */
	uint32_t exe_dev, exe_gen;
	uint64_t exe_ino;
	bool exe_jit_said;
	struct tally_map *maps;
	size_t nmaps, amaps;
	size_t last;         /* index of the last map hit: samples cluster */
	int jit;             /* 0 unknown, 1 perf map trusted, -1 none or untrusted */
	/* with jit 0 after a look found no map: anonymous samples until the next look, looks so
	 * far */
	uint32_t jit_wait, jit_tries;
	/* with jit 1: the perf map, opened when it was checked, read from then on */
	int jit_map_fd;
	uint64_t jit_map_dev, jit_map_ino; /* with jit 1: which file that is */
	/* a trusted jit-PID.dump the process mapped, as it named it, or NULL */
	char *jitdump;
	/* with jitdump: the file, opened (and checked) while the process lived */
	int jitdump_fd;
	uint32_t jit_image;  /* the JIT image of a trusted perf map or jitdump */
	uint32_t nomap_image;
	int dead;            /* 0 alive; counts collection rounds since its exit */
	void *uw;            /* DWARF unwinding state (unwind.h), or NULL */
	bool sampled;
	char comm_seen[16];  /* comm when comm_id was found (tally_agg_comm) */
	uint32_t comm_id;
	uint32_t memo_gen;   /* moves when a record changes its maps or name (the sample memo) */
	uint32_t reread_gen; /* the tally_agg.lost_gen its maps were last read again for */
};

/* A process that had samples: kept for the database's task list after it exits. */
struct tally_task {
	int pid;
	char comm[16];
	char *exe;
};

struct tally_stack {
	uint32_t first; /* index into agg.stack_frames */
	uint32_t len;   /* leaf first */
};

struct tally_count_row {
	uint32_t stack;
	int32_t pid;    /* 0 unless per-pid */
	uint32_t comm;  /* the process's command name: a.comms[comm - 1], 0 for none */
};

struct tally_agg {
	int nevents;
	bool per_pid;
	bool lazy_procfs; /* read /proc/PID/maps for processes first seen in a sample */
	bool dwarf;        /* unwind user stacks from the copied stack and registers */

	struct tally_image *images;
	size_t nimages, aimages;
	size_t nidentified; /* images[0..nidentified) went through tally_agg_identify */
	struct tally_hidx image_idx;
	/* programs (their files, as in struct tally_proc) whose processes made JIT
	 * code since the caller last emptied this list: the recording engine asks
	 * the collector to watch their starts (docs/sampling.md, "Rounds") */
	struct tally_file_id {
		uint32_t dev, gen;
		uint64_t ino;
	} *jit_programs;
	size_t njit_programs, ajit_programs;
	/* the images' key hashes, one 64-bit word a slot (TALLY_AGG_IMAGE_MEMO of
	 * them, allocated at the first question): tally_agg_image_known answers a
	 * mapping of a file it has an image of in one probe, where the index costs
	 * a walk to the image and a compare of its path, cold after a wait */
	uint64_t *image_memo;
	uint32_t kernel_image;
	/* images before this index were looked at by tally_agg_identify_new */
	size_t images_checked;
	/* tally_agg_reset calls so far: the recording engine then has the
	 * collector's exec watch forget the programs it told of, whose images
	 * went with the reset (lib/record) */
	uint64_t resets;

	struct tally_frame *frames;
	size_t nframes, aframes;
	struct tally_hidx frame_idx;
	/* per frame: its one-frame stack + 1, 0 until made (a sample without a call
	 * chain then costs one hash lookup, not two) */
	uint32_t *frame_stack1;
	size_t aframe_stack1;
	/* with frame-pointer chains, per frame and kind (2 * frame + 1 for a
	 * return address, 2 * frame for a sampled ip): the CFI rule there
	 * (tally_unwind_fp_rule), asked once per code address */
	struct tally_agg_fp_rule {
		uint8_t known;
		struct tally_fp_rule r;
	} *fp_rules;
	size_t afp_rules;

	uint32_t *stack_frames;
	size_t nstack_frames, astack_frames;
	struct tally_stack *stacks;
	size_t nstacks, astacks;
	struct tally_hidx stack_idx;

	struct tally_count_row *rows;
	size_t nrows, arows;
	/* the command names of the rows (the processes' comm), each once; they
	 * last as long as the aggregate (a daemon's flushes keep them) */
	char (*comms)[16];
	size_t ncomms, acomms;
	struct tally_hidx comm_idx;
	uint64_t *counts; /* nrows * nevents */
	size_t acounts;
	/* nrows * nevents: the summed periods (tally_rec.weight) of the counts */
	uint64_t *weights;
	size_t aweights;
	struct tally_hidx row_idx;

	struct tally_proc **procs;
	size_t nprocs, aprocs;
	struct tally_hidx proc_idx;
	struct tally_proc *last_proc;
	bool dead_pending; /* some process has exited and is not yet collected */
	/* collected processes not yet freed: the memo may still point at one (no
	 * entry of it is used: its memo_gen moved at its exit). They are freed
	 * together once there are TALLY_AGG_GRAVE of them, after one walk of the
	 * memo, not one walk for each round in which some process ended */
	struct tally_proc **grave;
	size_t ngrave, agrave;
#define TALLY_AGG_GRAVE 64
	/* the rows of recent samples without a call chain, by (pid, ip, event,
	 * kernel): a sample seen before is counted without its lookups. Valid for
	 * one memo_gen, which moves at whatever can change any sample's row (a
	 * reset, a process loaded or collected), and one tally_proc.memo_gen of its
	 * process (its maps or name changed by a record) */
	struct tally_sample_memo *memo;
	uint64_t memo_gen;
	/* identities read from files, kept across resets (tally_image_identify):
	 * a file whose device, inode, size and times are the same is not read again */
	struct tally_id_memo *id_memo;
	uint64_t id_reads; /* files read to identify them (the memo's misses) */
	struct tally_task *tasks;
	size_t ntasks, atasks;

	uint64_t *samples; /* per event */
	uint64_t lost, throttled;
	/* moves when a ring lost records (at most once a second): a lost mapping
	 * record leaves a live process's code unmapped, so an address outside its
	 * maps reads /proc/PID/maps again, once per move */
	uint32_t lost_gen;
	double lost_gen_at;
	uint64_t maps_reread; /* processes whose maps were read again so */
	uint64_t sample_time; /* the time of the sample being aggregated (monotonic ns) */
	uint32_t jit_untrusted;
	/* JIT files that were damaged, unusable or refused: one line each, at most 32 */
	char **jit_warnings;
	size_t njit_warnings, ajit_warnings;
	uint64_t jit_warnings_more; /* those past the 32nd line, counted by its last line */
	size_t jit_budget;   /* what one process's JIT sources may cost (TALLY_JIT_BUDGET) */
	uint64_t uw_samples, uw_short, uw_joined;
	uint64_t uw_why_stack, uw_why_cfi, uw_why_depth;
	/* frame-pointer chains (docs/callgraph.md): samples whose top of the stack
	 * was unwound with CFI until the chain rejoined, those where frames were
	 * put back (and how many frames in all), those where it could not finish
	 * (a caller may be missing there) and why (enum tally_fp_stop) */
	uint64_t fp_leaf_checked, fp_leaf_repaired, fp_leaf_unchecked, fp_repair_frames;
	uint64_t fp_repair_stops[TALLY_FP_NSTOPS];

	uint32_t scratch_frames[512];
	uint64_t scratch_pcs[512];
	/* the frame-pointer repair's copy of the chain's frames */
	uint32_t scratch_user[512];
	struct tally_fp_repair scratch_repair; /* ... and its result */
};

/* What one process's JIT sources may cost by default (docs/symbols.md): the copy
 * of its perf map, its jitdump as read and what is parsed from that, together.
 * What would pass it is dropped and said in a JIT warning. */
#define TALLY_JIT_BUDGET ((size_t)256 << 20)

/* Lifecycle: init a struct you own, release frees everything inside. */
void tally_agg_init(struct tally_agg *a, int nevents, bool per_pid, bool lazy_procfs);
void tally_agg_release(struct tally_agg *a);

/* Feeds one record from the collector. */
void tally_agg_record(struct tally_agg *a, const struct tally_rec *rec);
/* Whether a side-band record, not yet fed, asks for a round soon (a collector
 * with samples counted in the kernel, docs/sampling.md "Rounds"): an executable
 * mapping of a file that has no image yet (identified while it exists), or of
 * anonymous memory or a jitdump (a JIT's perf map is checked while it lives).
 * A process that runs files already known waits for the round of the second. */
bool tally_agg_record_prompt(struct tally_agg *a, const struct perf_event_header *h);
/* Frees processes that exited before the previous call (their records are all in). */
void tally_agg_collect_dead(struct tally_agg *a);
/* Moves the sampled live processes into the task list (call once, before writing). */
void tally_agg_tasks(struct tally_agg *a);
/* Reads /proc/PID/maps and comm for a process that was running before recording. */
int tally_agg_load_procfs(struct tally_agg *a, int pid);
/* Identifies the files newly mapped by processes in another mount namespace
 * through /proc/PID/root while the processes live (call between collection
 * rounds: file I/O, once per new image, never per sample). */
void tally_agg_identify_new(struct tally_agg *a);
/* Copies the JIT maps and jitdumps of processes still alive (from the descriptors
 * opened when each file was checked, never again by name), then settles the
 * JIT images (call before writing): samples in anonymous memory that no map or
 * dump names move to nomap, and each jitdump keeps only the functions with
 * samples, in the text form the database stores (jd_text). */
void tally_agg_snapshot_jit(struct tally_agg *a);

/* Decides the identity (build-id, content hash, or replaced) of every file image
 * mapped since the last call, while the processes that mapped it most likely still
 * run and the file is still the one mapped (docs/daemon.md): what a long-running
 * collector does so short-lived programs and deleted files keep their images.
 * The writer identifies the rest when it writes. */
void tally_agg_identify(struct tally_agg *a);
/* The same for one image (a no-op when done or not a file). */
void tally_image_identify(struct tally_image *im);

/* After the aggregate has been written (a daemon flush): drops the counts, stacks,
 * frames, task list and counters, and the images no live process maps any more
 * (their indices change); keeps the processes and their mappings. */
void tally_agg_reset(struct tally_agg *a);
/* Frees the DWARF unwinding state of every process (rebuilt when next needed). */
void tally_agg_release_unwind(struct tally_agg *a);
/* Bytes the aggregate holds (its own arrays, tables and strings; not libdw's). */
size_t tally_agg_memory(const struct tally_agg *a);

/* Lookups used by the writer and by tests. */
uint32_t tally_agg_image(struct tally_agg *a, const struct tally_image *key);
/* The index of the image with that key, or TALLY_HIDX_NONE (never adds one). */
uint32_t tally_agg_image_find(const struct tally_agg *a, const struct tally_image *key);
/* Whether there is an image with that key: tally_agg_image_find != NONE, most
 * often answered by the memo of key hashes (image_memo) without the index. */
#define TALLY_AGG_IMAGE_MEMO 4096
bool tally_agg_image_known(struct tally_agg *a, const struct tally_image *key);
struct tally_proc *tally_agg_proc(struct tally_agg *a, int pid, bool create);
uint32_t tally_agg_frame(struct tally_agg *a, uint32_t image, uint64_t offset);
uint32_t tally_agg_stack(struct tally_agg *a, const uint32_t *frames, uint32_t len);
/* Adds n to the count of (stack, pid, event) and weight to its weight. */
void tally_agg_count_w(struct tally_agg *a, uint32_t stack, int pid, int event, uint64_t n,
		       uint64_t weight);
/* The same for the processes called comm (a row of its own; NULL or "": none). */
void tally_agg_count_comm(struct tally_agg *a, uint32_t stack, int pid, const char *comm, int event,
			  uint64_t n, uint64_t weight);
/* The id of a command name (0 for NULL or ""; else 1 + its index in comms). */
uint32_t tally_agg_comm(struct tally_agg *a, const char *comm);
/* The same with a weight of n (a period of 1). */
void tally_agg_count(struct tally_agg *a, uint32_t stack, int pid, int event, uint64_t n);
/* The frame-pointer repair's rule at code address pc of process pid (ra: a
 * return address), as the aggregate's repair uses it (docs/callgraph.md):
 * false when there is none (no such process or mapping, no CFI). For a
 * collector that unwinds in the kernel (the BPF off-CPU program). */
bool tally_agg_fp_rule(struct tally_agg *a, uint32_t pid, uint64_t pc, bool ra,
		       struct tally_fp_rule *out);
/* Counts n samples of a repair done elsewhere (the collector's) as the
 * aggregate's own: frames put back, and why it stopped. */
void tally_agg_fp_count(struct tally_agg *a, size_t frames, enum tally_fp_stop stop, uint64_t n);
/* Adds a mapping to a process, replacing what it overlaps. */
void tally_proc_add_map(struct tally_proc *p, uint64_t start, uint64_t end, uint64_t pgoff,
			uint32_t image);
/* The map containing addr, or NULL. */
const struct tally_map *tally_proc_find_map(struct tally_proc *p, uint64_t addr);

#endif
