/* Record-time aggregation (see agg.h): the per-sample hot path of tally record
 * (images, frames, stacks, counts, on_sample, record dispatch), identity, reset and size. */
#define _GNU_SOURCE
#include "tally/agg.h"
#include "internal.h"
#include "tally/elfinfo.h"
#include "tally/unwind.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

void tally_agg_init(struct tally_agg *a, int nevents, bool per_pid, bool lazy_procfs)
{
	memset(a, 0, sizeof(*a));
	a->nevents = nevents;
	a->per_pid = per_pid;
	a->lazy_procfs = lazy_procfs;
	a->samples = xcalloc((size_t)nevents, sizeof(uint64_t));
	a->jit_budget = TALLY_JIT_BUDGET;
	struct tally_image k = { .kind = TALLY_IMG_KERNEL, .path = (char *)"[kernel]" };
	a->kernel_image = tally_agg_image(a, &k);
	a->memo_gen = 1; /* a memo entry's 0 is empty */
}

void agg_proc_free(struct tally_proc *p)
{
	if (!p)
		return;
	tally_unwind_proc_release(p);
	free(p->maps);
	free(p->exe);
	if (p->jit == 1)
		close(p->jit_map_fd);
	if (p->jitdump)
		close(p->jitdump_fd);
	free(p->jitdump);
	free(p);
}

static void id_memo_release(struct tally_agg *a);

void tally_agg_release(struct tally_agg *a)
{
	free(a->memo);
	id_memo_release(a);
	for (size_t i = 0; i < a->nimages; i++) {
		free(a->images[i].path);
		free(a->images[i].jit_map);
		free(a->images[i].id);
		free(a->images[i].id_kind);
		tally_jitdump_release(a->images[i].jd);
		free(a->images[i].jd);
		free(a->images[i].jd_source);
		free(a->images[i].jd_text);
		tally_unwind_image_release(&a->images[i]);
	}
	free(a->images);
	tally_hidx_release(&a->image_idx);
	free(a->image_memo);
	free(a->jit_programs);
	free(a->frames);
	free(a->frame_stack1);
	free(a->fp_rules);
	tally_hidx_release(&a->frame_idx);
	free(a->stack_frames);
	free(a->stacks);
	tally_hidx_release(&a->stack_idx);
	free(a->rows);
	free(a->counts);
	free(a->weights);
	tally_hidx_release(&a->row_idx);
	free(a->comms);
	tally_hidx_release(&a->comm_idx);
	for (size_t i = 0; i < a->nprocs; i++)
		agg_proc_free(a->procs[i]);
	free(a->procs);
	for (size_t i = 0; i < a->ngrave; i++)
		agg_proc_free(a->grave[i]);
	free(a->grave);
	for (size_t i = 0; i < a->ntasks; i++)
		free(a->tasks[i].exe);
	free(a->tasks);
	tally_hidx_release(&a->proc_idx);
	free(a->samples);
	for (size_t i = 0; i < a->njit_warnings; i++)
		free(a->jit_warnings[i]);
	free(a->jit_warnings);
	memset(a, 0, sizeof(*a));
}

/* ---- images ---- */

static uint64_t image_hash(const struct tally_image *k)
{
	uint64_t h = tally_hash_bytes(k->path, strlen(k->path), (uint64_t)k->kind);
	if (k->build_id_len)
		h = tally_hash_bytes(k->build_id, k->build_id_len, h);
	else
		h = tally_hash_u64(h ^ k->ino ^ ((uint64_t)k->maj << 40) ^
				   ((uint64_t)k->min << 20) ^ k->ino_gen);
	return tally_hash_u64(
		h ^
		(uint64_t)(k->kind == TALLY_IMG_JIT || k->kind == TALLY_IMG_NOMAP ? k->pid : 0));
}

static bool image_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	const struct tally_image *x = &a->images[idx], *k = key;
	if (x->kind != k->kind || strcmp(x->path, k->path))
		return false;
	if ((x->kind == TALLY_IMG_JIT || x->kind == TALLY_IMG_NOMAP) && x->pid != k->pid)
		return false;
	if (x->build_id_len != k->build_id_len)
		return false;
	if (k->build_id_len)
		return !memcmp(x->build_id, k->build_id, k->build_id_len);
	return x->maj == k->maj && x->min == k->min && x->ino == k->ino && x->ino_gen == k->ino_gen;
}

uint32_t tally_agg_image_find(const struct tally_agg *a, const struct tally_image *key)
{
	return tally_hidx_get(&a->image_idx, image_hash(key), key, image_eq, a);
}

/* The memo's word for a key hash (never 0: an empty slot). */
static uint64_t memo_word(uint64_t h)
{
	return h ? h : 1;
}

static void image_memo_note(struct tally_agg *a, uint64_t h)
{
	if (a->image_memo)
		a->image_memo[h & (TALLY_AGG_IMAGE_MEMO - 1)] = memo_word(h);
}

bool tally_agg_image_known(struct tally_agg *a, const struct tally_image *key)
{
	uint64_t h = image_hash(key);
	if (!a->image_memo)
		a->image_memo = xcalloc(TALLY_AGG_IMAGE_MEMO, sizeof(uint64_t));
	/* an equal 64-bit hash in its slot: the same key (or a collision of 2^-64) */
	if (a->image_memo[h & (TALLY_AGG_IMAGE_MEMO - 1)] == memo_word(h))
		return true;
	if (tally_hidx_get(&a->image_idx, h, key, image_eq, a) == TALLY_HIDX_NONE)
		return false;
	image_memo_note(a, h);
	return true;
}

uint32_t tally_agg_image(struct tally_agg *a, const struct tally_image *key)
{
	uint64_t h = image_hash(key);
	uint32_t i = tally_hidx_get(&a->image_idx, h, key, image_eq, a);
	if (i != TALLY_HIDX_NONE)
		return i;
	image_memo_note(a, h);
	GROW(a->images, a->aimages, a->nimages + 1);
	struct tally_image *im = &a->images[a->nimages];
	*im = *key;
	im->path = xstrdup(key->path);
	im->jit_map = NULL;
	im->jit_map_len = 0;
	im->id = im->id_kind = NULL;
	im->jd = NULL;
	im->jd_source = NULL;
	im->jd_text = NULL;
	im->jd_text_len = 0;
	tally_hidx_put(&a->image_idx, h, (uint32_t)a->nimages);
	return (uint32_t)a->nimages++;
}

/* A ring lost records: the processes' maps may lack a mapping (a second
 * between moves bounds the reading of /proc under a flood of losses). */
static void agg_note_lost(struct tally_agg *a)
{
	double now = tally_now_mono();
	if (a->lost_gen && now - a->lost_gen_at < 1.0)
		return;
	a->lost_gen++;
	a->lost_gen_at = now;
	/* the whole memo forgotten: a sample it answers never reaches
	 * resolve_mapped, so its unmapped answers would never be asked again */
	a->memo_gen++;
}

/* p's maps read again, if p is still the process that was sampled: a pid
 * reused since is another program, whose maps would name the sample's code
 * wrongly (a lost record may be the old one's exit), so it stays nomap. Its
 * start is in boot time, never behind the samples' monotonic clock: when
 * unsure, it is not read. */
static bool reread_maps(struct tally_agg *a, struct tally_proc *p)
{
	struct tally_pstat st;
	uint64_t start;
	if (!a->sample_time || tally_pstat_read(p->pid, &st) ||
	    !(start = tally_pstat_start_ns(&st)) || start > a->sample_time)
		return false;
	if (tally_agg_load_procfs(a, p->pid))
		return false;
	a->maps_reread++;
	return true;
}

/* *mapped (may be NULL): true when the answer is the kernel's or a file
 * mapping's, which only a side-band record can change (anonymous memory asks
 * the JIT sources, which count such samples: see agg_check_jit) */
static uint32_t resolve_mapped(struct tally_agg *a, struct tally_proc *p, uint64_t ip, bool kernel,
			       uint64_t *off, bool *mapped)
{
	if (mapped)
		*mapped = true;
	if (kernel || ip >= KERNEL_START) {
		*off = ip;
		return a->kernel_image;
	}
	const struct tally_map *m = p ? tally_proc_find_map(p, ip) : NULL;
	if (!m && p && a->lost_gen != p->reread_gen && !p->dead) {
		/* records were lost since its maps were last read: perhaps the
		 * one that mapped this address */
		p->reread_gen = a->lost_gen;
		if (reread_maps(a, p))
			m = tally_proc_find_map(p, ip);
	}
	if (m && m->image != TALLY_MAP_ANON) {
		*off = ip - m->start + m->pgoff;
		return m->image;
	}
	if (mapped)
		*mapped = false;
	*off = ip;
	if (p) {
		if (p->jit == 0)
			agg_check_jit(a, p);
		if (p->jit_image != TALLY_HIDX_NONE)
			return p->jit_image;
		if (p->nomap_image == TALLY_HIDX_NONE) {
			struct tally_image k;
			memset(&k, 0, sizeof(k));
			k.kind = TALLY_IMG_NOMAP;
			k.path = (char *)"";
			k.pid = a->per_pid ? p->pid : 0;
			p->nomap_image = tally_agg_image(a, &k);
		}
		return p->nomap_image;
	}
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_NOMAP;
	k.path = (char *)"";
	return tally_agg_image(a, &k);
}

static uint32_t resolve(struct tally_agg *a, struct tally_proc *p, uint64_t ip, bool kernel,
			uint64_t *off)
{
	return resolve_mapped(a, p, ip, kernel, off, NULL);
}

/* ---- frames, stacks, counts ---- */

static bool frame_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	const struct tally_frame *f = &a->frames[idx], *k = key;
	return f->image == k->image && f->offset == k->offset;
}

uint32_t tally_agg_frame(struct tally_agg *a, uint32_t image, uint64_t offset)
{
	struct tally_frame k = { image, offset };
	uint64_t h = tally_hash_u64(offset ^ ((uint64_t)image << 48) ^ image);
	uint32_t i = tally_hidx_get(&a->frame_idx, h, &k, frame_eq, a);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(a->frames, a->aframes, a->nframes + 1);
	GROW(a->frame_stack1, a->aframe_stack1, a->nframes + 1);
	a->frames[a->nframes] = k;
	a->frame_stack1[a->nframes] = 0;
	tally_hidx_put(&a->frame_idx, h, (uint32_t)a->nframes);
	return (uint32_t)a->nframes++;
}

struct stack_key {
	const uint32_t *f;
	uint32_t len;
};

static bool stack_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	const struct stack_key *k = key;
	const struct tally_stack *s = &a->stacks[idx];
	return s->len == k->len &&
	       !memcmp(&a->stack_frames[s->first], k->f, k->len * sizeof(uint32_t));
}

uint32_t tally_agg_stack(struct tally_agg *a, const uint32_t *frames, uint32_t len)
{
	struct stack_key k = { frames, len };
	uint64_t h = tally_hash_bytes(frames, len * sizeof(uint32_t), len);
	uint32_t i = tally_hidx_get(&a->stack_idx, h, &k, stack_eq, a);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(a->stack_frames, a->astack_frames, a->nstack_frames + len);
	memcpy(&a->stack_frames[a->nstack_frames], frames, len * sizeof(uint32_t));
	GROW(a->stacks, a->astacks, a->nstacks + 1);
	a->stacks[a->nstacks] = (struct tally_stack){ (uint32_t)a->nstack_frames, len };
	a->nstack_frames += len;
	tally_hidx_put(&a->stack_idx, h, (uint32_t)a->nstacks);
	return (uint32_t)a->nstacks++;
}

struct row_key {
	uint32_t stack;
	int32_t pid;
	uint32_t comm;
};

static bool row_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	const struct row_key *k = key;
	return a->rows[idx].stack == k->stack && a->rows[idx].pid == k->pid &&
	       a->rows[idx].comm == k->comm;
}

static bool comm_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_agg *a = ctx;
	return !strncmp(a->comms[idx], key, 16);
}

uint32_t tally_agg_comm(struct tally_agg *a, const char *comm)
{
	if (!comm || !*comm)
		return 0;
	char k[16] = { 0 };
	strncpy(k, comm, sizeof(k) - 1);
	uint64_t h = tally_hash_bytes(k, strlen(k), 0x636f6d6d);
	uint32_t i = tally_hidx_get(&a->comm_idx, h, k, comm_eq, a);
	if (i == TALLY_HIDX_NONE) {
		GROW(a->comms, a->acomms, a->ncomms + 1);
		memcpy(a->comms[a->ncomms], k, sizeof(k));
		tally_hidx_put(&a->comm_idx, h, (uint32_t)a->ncomms);
		i = (uint32_t)a->ncomms++;
	}
	return i + 1;
}

static void add_count(struct tally_agg *a, uint32_t row, int event, uint64_t n, uint64_t weight)
{
	size_t at = (size_t)row * (size_t)a->nevents + (size_t)event;
	a->counts[at] += n;
	/* a weight that would pass 2^64 stays at the top (the writer refuses such sums) */
	a->weights[at] =
		a->weights[at] + weight < a->weights[at] ? UINT64_MAX : a->weights[at] + weight;
}

/* The row of (stack, pid, comm), made if new, and n samples of weight added to it. */
static uint32_t count_row(struct tally_agg *a, uint32_t stack, int pid, uint32_t comm, int event,
			  uint64_t n, uint64_t weight)
{
	struct row_key k = { stack, pid, comm };
	uint64_t h =
		tally_hash_u64(((uint64_t)stack << 32) ^ (uint32_t)pid ^ ((uint64_t)comm << 44));
	uint32_t i = tally_hidx_get(&a->row_idx, h, &k, row_eq, a);
	if (i == TALLY_HIDX_NONE) {
		GROW(a->rows, a->arows, a->nrows + 1);
		a->rows[a->nrows] = (struct tally_count_row){ stack, pid, comm };
		size_t want = (a->nrows + 1) * (size_t)a->nevents;
		if (want > a->acounts) {
			size_t old = a->acounts;
			GROW(a->counts, a->acounts, want);
			memset(a->counts + old, 0, (a->acounts - old) * sizeof(uint64_t));
		}
		if (want > a->aweights) {
			size_t old = a->aweights;
			GROW(a->weights, a->aweights, want);
			memset(a->weights + old, 0, (a->aweights - old) * sizeof(uint64_t));
		}
		tally_hidx_put(&a->row_idx, h, (uint32_t)a->nrows);
		i = (uint32_t)a->nrows++;
	}
	add_count(a, i, event, n, weight);
	return i;
}

void tally_agg_count_w(struct tally_agg *a, uint32_t stack, int pid, int event, uint64_t n,
		       uint64_t weight)
{
	count_row(a, stack, pid, 0, event, n, weight);
}

void tally_agg_count_comm(struct tally_agg *a, uint32_t stack, int pid, const char *comm, int event,
			  uint64_t n, uint64_t weight)
{
	count_row(a, stack, pid, tally_agg_comm(a, comm), event, n, weight);
}

void tally_agg_count(struct tally_agg *a, uint32_t stack, int pid, int event, uint64_t n)
{
	tally_agg_count_w(a, stack, pid, event, n, n);
}

/* The rule at code address pc of process p (rule of tally_unwind_fp_repair),
 * asked of the image's CFI once per (frame, kind) and kept. */
struct fp_ctx {
	struct tally_agg *a;
	struct tally_proc *p;
	const uint32_t *chain_frames; /* the chain's frames, or NULL */
	size_t nchain;
};

static void fp_rule_frame(struct tally_agg *a, struct tally_proc *p, uint32_t frame, bool ra,
			  struct tally_fp_rule *out)
{
	size_t at = 2 * (size_t)frame + ra;
	if (at >= a->afp_rules) {
		size_t old = a->afp_rules;
		GROW(a->fp_rules, a->afp_rules, at + 1);
		memset(a->fp_rules + old, 0, (a->afp_rules - old) * sizeof(*a->fp_rules));
	}
	struct tally_agg_fp_rule *k = &a->fp_rules[at];
	if (!k->known) {
		/* once per code address: the CFI lookup allocates */
		const struct tally_frame *f = &a->frames[frame];
		tally_unwind_fp_rule(a, p, f->image, f->offset, ra, &k->r);
		k->known = 1;
	}
	*out = k->r;
}

/* False where pc is in no executable mapping of the process (a chain read
 * from an rbp that was no frame pointer); true with TALLY_FP_CFA_NONE in
 * code without CFI (anonymous: JIT code). */
static bool fp_rule(void *ctx, uint64_t pc, bool ra, size_t chain_at, struct tally_fp_rule *out)
{
	struct fp_ctx *c = ctx;
	memset(out, 0, sizeof(*out));
	const struct tally_map *m = pc < KERNEL_START ? tally_proc_find_map(c->p, pc) : NULL;
	if (!m)
		return false;
	if (m->image == TALLY_MAP_ANON)
		return true;
	if (c->chain_frames && chain_at < c->nchain)
		fp_rule_frame(c->a, c->p, c->chain_frames[chain_at], ra, out);
	else
		fp_rule_frame(c->a, c->p, tally_agg_frame(c->a, m->image, pc - m->start + m->pgoff),
			      ra, out);
	return true;
}

bool tally_agg_fp_rule(struct tally_agg *a, uint32_t pid, uint64_t pc, bool ra,
		       struct tally_fp_rule *out)
{
	struct fp_ctx c = { a, agg_proc_lookup(a, (int)pid), NULL, 0 };
	memset(out, 0, sizeof(*out));
	return c.p && fp_rule(&c, pc, ra, SIZE_MAX, out);
}

void tally_agg_fp_count(struct tally_agg *a, size_t frames, enum tally_fp_stop stop, uint64_t n)
{
	a->fp_leaf_checked += n;
	if (frames) {
		a->fp_leaf_repaired += n;
		a->fp_repair_frames += frames * n;
	}
	if (stop != TALLY_FP_JOINED && stop < TALLY_FP_NSTOPS) {
		a->fp_leaf_unchecked += n;
		a->fp_repair_stops[stop] += n;
	}
}

/* A frame-pointer chain reads each caller from the frame of its callee: the
 * functions between the sampled one and the first with its frame on the
 * chain (a leaf at -O2, a prologue or an epilogue, a chain of libc functions
 * without frame pointers), and the callers of those in the chain that had no
 * frame, are not on it. Their CFI unwinds them over the stack copy, the
 * chain's entries checked against it (unwind.h): the stack is rebuilt from
 * the sampled ip on. raw: the chain's user addresses; fr[user_at..*n) their
 * frames. */
static void fp_repair(struct tally_agg *a, struct tally_proc *p, const struct tally_rec *r,
		      size_t user_at, const uint64_t *raw, size_t nuser, uint32_t *n, uint64_t n1)
{
	uint64_t ip = 0, sp = 0, bp = 0;
	if (!tally_unwind_regs_ipspbp(r->regs, r->nregs,
				      r->regs_mask ? r->regs_mask : tally_unwind_regs_mask(), &ip,
				      &sp, &bp)) {
		tally_agg_fp_count(a, 0, TALLY_FP_LOST, n1);
		return;
	}
	uint32_t *fr = a->scratch_frames;
	uint32_t *user = a->scratch_user;
	memcpy(user, fr + user_at, nuser * sizeof(*fr));
	struct fp_ctx c = { a, p, user, nuser };
	struct tally_fp_repair *rp = &a->scratch_repair;
	tally_unwind_fp_repair(ip, sp, bp, r->stack, r->stack ? r->stack_len : 0, raw, nuser,
			       fp_rule, &c, rp);
	tally_agg_fp_count(a, rp->walked, rp->stop, n1);
	size_t k = user_at + 1; /* after the sampled ip */
	for (size_t i = 0; i < rp->n && k < ARRAY_SIZE(a->scratch_frames); i++) {
		if (rp->from[i] >= 0) {
			fr[k++] = user[rp->from[i]];
		} else {
			uint64_t off;
			uint32_t img = resolve(a, p, rp->pcs[i], false, &off);
			fr[k++] = tally_agg_frame(a, img, off);
		}
	}
	*n = (uint32_t)k;
}

/* The sample memo: a whole-system daemon's samples mostly fall on places seen
 * a moment before, and each full count is a process lookup, a map search and
 * two hash lookups, most of them cache misses after the daemon slept. */
struct tally_sample_memo {
	uint64_t ip, gen;
	struct tally_proc *p; /* alive while gen is the aggregate's */
	uint32_t pid, row, pgen;
	int32_t event;
	bool kernel;
};
#define MEMO_SIZE 4096 /* a power of two: room for a busy machine's places of a second */

static struct tally_sample_memo *memo_slot(struct tally_agg *a, const struct tally_rec *r,
					   bool kernel)
{
	if (!a->memo)
		a->memo = xcalloc(MEMO_SIZE, sizeof(*a->memo));
	uint64_t h = tally_hash_u64(r->ip ^ ((uint64_t)r->pid << 32) ^
				    ((uint64_t)(uint32_t)r->event << 20) ^ kernel);
	return &a->memo[h & (MEMO_SIZE - 1)];
}

void agg_free_grave(struct tally_agg *a)
{
	if (!a->ngrave)
		return;
	for (size_t i = 0; a->memo && i < MEMO_SIZE; i++) {
		struct tally_sample_memo *m = &a->memo[i];
		/* an entry of an older generation is never used, nor its process
		 * read; the buried are the only processes with dead > 2 */
		if (m->gen == a->memo_gen && m->p && m->p->dead > 2)
			m->gen = 0;
	}
	for (size_t i = 0; i < a->ngrave; i++)
		agg_proc_free(a->grave[i]);
	a->ngrave = 0;
}

static void on_sample(struct tally_agg *a, const struct tally_rec *r)
{
	a->sample_time = r->time;
	bool kernel = (r->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
	uint64_t weight = r->weight ? r->weight : r->period;
	/* the samples it stands for (a BPF map entry: its waits) */
	uint64_t n1 = r->count ? r->count : 1;
	struct tally_sample_memo *memo = NULL;
	if (!r->nr) {
		memo = memo_slot(a, r, kernel);
		if (memo->gen == a->memo_gen && memo->ip == r->ip && memo->pid == r->pid &&
		    memo->event == r->event && memo->kernel == kernel &&
		    (!memo->p || memo->p->memo_gen == memo->pgen)) {
			if (memo->p)
				memo->p->sampled = true;
			add_count(a, memo->row, r->event, n1, weight);
			a->samples[r->event] += n1;
			return;
		}
	}
	bool mapped = false;
	struct tally_proc *p = NULL;
	if (r->pid != 0 && r->pid != UINT32_MAX) {
		p = agg_proc_lookup(a, (int)r->pid);
		if (!p && a->lazy_procfs)
			tally_agg_load_procfs(a, (int)r->pid); /* best effort: it may be gone */
		if (!p)
			p = tally_agg_proc(a, (int)r->pid, true);
		p->sampled = true;
	}
	uint32_t *fr = a->scratch_frames;
	uint32_t n = 0;
	uint64_t off;
	if (!r->nr) {
		uint32_t img = resolve_mapped(a, p, r->ip, kernel, &off, &mapped);
		fr[n++] = tally_agg_frame(a, img, off);
	} else {
		bool in_kernel = kernel;
		size_t user_at = SIZE_MAX; /* index in fr where user frames begin */
		/* the chain's user addresses (unused by DWARF until below) */
		uint64_t *user_raw = a->scratch_pcs;
		size_t nuser = 0;
		for (uint64_t i = 0; i < r->nr; i++) {
			uint64_t ip = r->chain[i];
			if (ip >= PERF_CONTEXT_MAX) {
				if (ip == PERF_CONTEXT_KERNEL)
					in_kernel = true;
				else if (ip == PERF_CONTEXT_USER)
					in_kernel = false;
				continue;
			}
			if (n == ARRAY_SIZE(a->scratch_frames))
				/* kept as far as it goes: reports count it as stopped early */
				break;
			if (!in_kernel && user_at == SIZE_MAX)
				user_at = n;
			if (!in_kernel)
				user_raw[nuser++] = ip;
			uint32_t img = resolve(a, in_kernel ? NULL : p, ip, in_kernel, &off);
			fr[n++] = tally_agg_frame(a, img, off);
		}
		if (a->dwarf && r->regs && p) {
			/* the user part from DWARF CFI; the frame-pointer chain only extends it */
			const char *why;
			size_t room = ARRAY_SIZE(a->scratch_pcs);
			size_t nu = tally_unwind_sample(a, p, r->regs, r->nregs, r->stack,
							r->stack_len, a->scratch_pcs, room, &why);
			a->uw_samples++;
			size_t kn = user_at == SIZE_MAX ? n : user_at;
			uint32_t fpu[ARRAY_SIZE(a->scratch_frames)];
			size_t nfp = n - kn;
			memcpy(fpu, fr + kn, nfp * sizeof(uint32_t));
			n = kn;
			for (size_t i = 0; i < nu && n < ARRAY_SIZE(a->scratch_frames); i++) {
				uint32_t img = resolve(a, p, a->scratch_pcs[i], false, &off);
				fr[n++] = tally_agg_frame(a, img, off);
			}
			if (why) {
				a->uw_short++;
				if (!strcmp(why, "stack copy too small"))
					a->uw_why_stack++;
				else if (!strcmp(why, "depth limit"))
					a->uw_why_depth++;
				else
					a->uw_why_cfi++;
				/* join: the fp chain starts at the same sampled ip, so where it
				 * agrees with the last DWARF frame at the same depth it can
				 * continue it; a match elsewhere counts only if the address is
				 * unique in the chain (recursion repeats return addresses) */
				size_t j = SIZE_MAX;
				if (nu && nu - 1 < nfp && fpu[nu - 1] == fr[n - 1]) {
					j = nu - 1;
				} else if (nu) {
					size_t hits = 0;
					for (size_t k = 0; k < nfp; k++)
						if (fpu[k] == fr[n - 1]) {
							j = k;
							hits++;
						}
					if (hits != 1)
						j = SIZE_MAX;
				}
				if (j != SIZE_MAX && j + 1 < nfp) {
					for (size_t k = j + 1;
					     k < nfp && n < ARRAY_SIZE(a->scratch_frames); k++)
						fr[n++] = fpu[k];
					a->uw_joined++;
				} else if (nu <= 1 && nfp > 1) {
					n = kn;
					for (size_t k = 0; k < nfp; k++)
						fr[n++] = fpu[k];
					a->uw_joined++;
				}
			}
		}
		if (!a->dwarf && r->regs && p && user_at != SIZE_MAX && user_at + nuser == n)
			fp_repair(a, p, r, user_at, user_raw, nuser, &n, n1);
		if (!n) {
			uint32_t img = resolve(a, p, r->ip, kernel, &off);
			fr[n++] = tally_agg_frame(a, img, off);
		}
	}
	uint32_t st;
	if (n == 1) {
		if (!a->frame_stack1[fr[0]])
			a->frame_stack1[fr[0]] = tally_agg_stack(a, fr, 1) + 1;
		st = a->frame_stack1[fr[0]] - 1;
	} else {
		st = tally_agg_stack(a, fr, n);
	}
	/* the kernel reports pid -1 for a task it can no longer name (exiting): no process */
	/* the process's name in the key: which program used the CPU, without a row per pid */
	uint32_t comm = 0;
	if (p) {
		if (memcmp(p->comm_seen, p->comm, sizeof(p->comm))) {
			memcpy(p->comm_seen, p->comm, sizeof(p->comm));
			p->comm_id = tally_agg_comm(a, p->comm);
		}
		comm = p->comm_id;
	} else if (r->pid == 0 && kernel) {
		comm = tally_agg_comm(a, "swapper"); /* the idle task, as perf names it */
	}
	uint32_t row = count_row(a, st, a->per_pid && r->pid != UINT32_MAX ? (int)r->pid : 0, comm,
				 r->event, n1, weight);
	a->samples[r->event] += n1;
	if (memo && mapped)
		*memo = (struct tally_sample_memo){ r->ip, a->memo_gen,         p,        r->pid,
						    row,   p ? p->memo_gen : 0, r->event, kernel };
}

void tally_agg_record(struct tally_agg *a, const struct tally_rec *r)
{
	switch (r->type) {
	case PERF_RECORD_SAMPLE:
		if (r->event >= 0 && r->event < a->nevents)
			on_sample(a, r);
		break;
	case PERF_RECORD_MMAP2:
		agg_on_mmap2(a, r);
		break;
	case PERF_RECORD_COMM:
		agg_on_comm(a, r);
		break;
	case PERF_RECORD_FORK:
		agg_on_fork(a, r);
		break;
	case PERF_RECORD_EXIT:
		agg_on_exit_rec(a, r);
		break;
	case PERF_RECORD_LOST:
		if (r->raw->size >= sizeof(*r->raw) + 16)
			a->lost += ((const uint64_t *)(r->raw + 1))[1];
		agg_note_lost(a);
		break;
	case PERF_RECORD_LOST_SAMPLES:
		if (r->raw->size >= sizeof(*r->raw) + 8)
			a->lost += ((const uint64_t *)(r->raw + 1))[0];
		break;
	case PERF_RECORD_THROTTLE:
		a->throttled++;
		break;
	default:
		break;
	}
}

/* ---- identity, reset and size (the daemon's needs) ---- */

/* The identity memo: a daemon meets the same files again after every flush
 * (the images no live process maps are dropped then), and reading one is an
 * open, its ELF notes, and for a file without a build-id a hash of all of it
 * (a Go toolchain's binaries: tens of MB). What stat says of a file (device,
 * inode, size, modification and change times: any write moves the change
 * time) keys what was read of it; one entry per slot, the newest kept. */
struct tally_id_memo {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
	char *id, *kind; /* NULL: an empty slot */
};
#define ID_MEMO_SIZE 1024 /* a power of two */

static void id_memo_release(struct tally_agg *a)
{
	for (size_t i = 0; a->id_memo && i < ID_MEMO_SIZE; i++) {
		free(a->id_memo[i].id);
		free(a->id_memo[i].kind);
	}
	free(a->id_memo);
	a->id_memo = NULL;
}

static struct tally_id_memo *id_memo_slot(struct tally_agg *a, const struct stat *st)
{
	if (!a->id_memo)
		a->id_memo = xcalloc(ID_MEMO_SIZE, sizeof(*a->id_memo));
	return &a->id_memo[tally_hash_u64((uint64_t)st->st_ino ^ ((uint64_t)st->st_dev << 40)) &
			   (ID_MEMO_SIZE - 1)];
}

static bool same_stat(const struct stat *x, const struct stat *y)
{
	return x->st_dev == y->st_dev && x->st_ino == y->st_ino && x->st_size == y->st_size &&
	       x->st_mtim.tv_sec == y->st_mtim.tv_sec && x->st_mtim.tv_nsec == y->st_mtim.tv_nsec &&
	       x->st_ctim.tv_sec == y->st_ctim.tv_sec && x->st_ctim.tv_nsec == y->st_ctim.tv_nsec;
}

static bool id_memo_same(const struct tally_id_memo *m, const struct stat *st)
{
	return m->id && m->dev == st->st_dev && m->ino == st->st_ino && m->size == st->st_size &&
	       m->mtim.tv_sec == st->st_mtim.tv_sec && m->mtim.tv_nsec == st->st_mtim.tv_nsec &&
	       m->ctim.tv_sec == st->st_ctim.tv_sec && m->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

static void id_memo_put(struct tally_id_memo *m, const struct stat *st, const char *id,
			const char *kind)
{
	free(m->id);
	free(m->kind);
	*m = (struct tally_id_memo){ st->st_dev,  st->st_ino,  st->st_size,  st->st_mtim,
				     st->st_ctim, xstrdup(id), xstrdup(kind) };
}

static void identify_image(struct tally_agg *a, struct tally_image *im)
{
	if (im->id || im->kind != TALLY_IMG_FILE)
		return;
	char hex[160];
	if (im->build_id_len) {
		/* the kernel read it at mmap time: authoritative even if the file changed since */
		tally_hex(im->build_id, im->build_id_len, hex);
		im->id = xstrdup(hex);
		im->id_kind = xstrdup("build-id");
		return;
	}
	if (im->early == 1) {
		/* read through /proc/PID/root while the process (in a container) lived */
		if (im->early_id_len) {
			tally_hex(im->early_id, im->early_id_len, hex);
			im->id = xstrdup(hex);
			im->id_kind = xstrdup("build-id");
		} else {
			snprintf(hex, sizeof(hex), "%016" PRIx64, im->early_hash);
			im->id = xstrdup(hex);
			im->id_kind = xstrdup("xxh64");
		}
		return;
	}
	struct tally_elf_info info;
	struct strbuf p = STRBUF_INIT;
	const char *path = im->path;
	bool via_root = false;
	/* a process in another mount namespace sees its own files: use its root while it lives */
	if (im->pid > 0) {
		strbuf_addf(&p, "/proc/%d/root%s", im->pid, im->path);
		if (access(p.buf, R_OK) == 0) {
			path = p.buf;
			via_root = true;
		}
	}
	char *clean = NULL;
	const char *del = strstr(path, " (deleted)");
	if (del) {
		clean = xstrndup(path, (size_t)(del - path));
		path = clean;
	}
	/* without a build-id from the kernel, the file must still be the one that was
	 * mapped: same device and inode (the kernel gave them in MMAP2 or /proc maps) */
	struct stat st;
	bool have_st = stat(path, &st) == 0;
	bool replaced = have_st && im->ino &&
			(st.st_ino != im->ino || major(st.st_dev) != im->maj ||
			 minor(st.st_dev) != im->min);
	struct tally_id_memo *memo = a && have_st && !replaced ? id_memo_slot(a, &st) : NULL;
	if (memo && id_memo_same(memo, &st) && !(im->foreign_ns && !via_root)) {
		im->id = xstrdup(memo->id);
		im->id_kind = xstrdup(memo->kind);
		free(clean);
		strbuf_release(&p);
		return;
	}
	if (a)
		a->id_reads++;
	int r = tally_elf_info(path, 1, &info);
	/* and still after the read (the file may have been replaced meanwhile) */
	struct stat after;
	bool have_after = stat(path, &after) == 0;
	if (have_after && im->ino &&
	    (after.st_ino != im->ino || major(after.st_dev) != im->maj ||
	     minor(after.st_dev) != im->min))
		replaced = true;
	if (im->ino && r != 0)
		replaced = true;
	if (im->foreign_ns && !via_root) {
		/* its own root is gone and this machine's file at that path may be
		 * another: unknown, never symbolized */
		im->id = xstrdup("00000000");
		im->id_kind = xstrdup("unreachable");
	} else if (replaced) {
		im->id = xstrdup("00000000");
		im->id_kind = xstrdup("replaced");
	} else if (r == 0 && info.build_id_len) {
		tally_hex(info.build_id, info.build_id_len, hex);
		im->id = xstrdup(hex);
		im->id_kind = xstrdup("build-id");
	} else if (r == 0 && info.have_hash) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
		im->id = xstrdup(hex);
		im->id_kind = xstrdup("xxh64");
	} else {
		im->id = xstrdup("00000000");
		im->id_kind = xstrdup("none");
	}
	/* what the file said of itself, if it is still what stat saw before the read */
	if (memo && r == 0 && !replaced && (info.build_id_len || info.have_hash) && have_after &&
	    same_stat(&st, &after))
		id_memo_put(memo, &st, im->id, im->id_kind);
	free(clean);
	strbuf_release(&p);
}

void tally_image_identify(struct tally_image *im)
{
	identify_image(NULL, im);
}

void tally_agg_identify(struct tally_agg *a)
{
	tally_agg_identify_new(a); /* containers' files first: through the process's root */
	for (size_t i = a->nidentified; i < a->nimages; i++)
		identify_image(a, &a->images[i]);
	a->nidentified = a->nimages;
}

void tally_agg_release_unwind(struct tally_agg *a)
{
	for (size_t i = 0; i < a->nprocs; i++)
		tally_unwind_proc_release(a->procs[i]);
	for (size_t i = 0; i < a->nimages; i++)
		tally_unwind_image_release(&a->images[i]);
	/* the rules cached per frame stay right: they depend on the code only */
}

static uint32_t remap_image(const uint32_t *map, uint32_t i)
{
	return i == TALLY_MAP_ANON || i == TALLY_HIDX_NONE ? i : map[i];
}

void tally_agg_reset(struct tally_agg *a)
{
	a->resets++;
	agg_memo_forget(a); /* rows, stacks, frames and images renumbered */
	/* the counts and what only they referenced: freed, so memory goes back */
	free(a->frames);
	a->frames = NULL;
	a->nframes = a->aframes = 0;
	free(a->frame_stack1);
	a->frame_stack1 = NULL;
	a->aframe_stack1 = 0;
	free(a->fp_rules);
	a->fp_rules = NULL;
	a->afp_rules = 0;
	tally_hidx_release(&a->frame_idx);
	free(a->stack_frames);
	a->stack_frames = NULL;
	a->nstack_frames = a->astack_frames = 0;
	free(a->stacks);
	a->stacks = NULL;
	a->nstacks = a->astacks = 0;
	tally_hidx_release(&a->stack_idx);
	free(a->rows);
	a->rows = NULL;
	a->nrows = a->arows = 0;
	free(a->counts);
	a->counts = NULL;
	a->acounts = 0;
	free(a->weights);
	a->weights = NULL;
	a->aweights = 0;
	tally_hidx_release(&a->row_idx);
	for (size_t i = 0; i < a->ntasks; i++)
		free(a->tasks[i].exe);
	free(a->tasks);
	a->tasks = NULL;
	a->ntasks = a->atasks = 0;
	memset(a->samples, 0, (size_t)a->nevents * sizeof(uint64_t));
	a->lost = a->throttled = 0;
	a->jit_untrusted = 0;
	for (size_t i = 0; i < a->njit_warnings; i++)
		free(a->jit_warnings[i]);
	a->njit_warnings = 0;
	a->jit_warnings_more = 0;
	a->uw_samples = a->uw_short = a->uw_joined = 0;
	a->uw_why_stack = a->uw_why_cfi = a->uw_why_depth = 0;
	a->fp_leaf_checked = a->fp_leaf_repaired = a->fp_leaf_unchecked = a->fp_repair_frames = 0;
	memset(a->fp_repair_stops, 0, sizeof(a->fp_repair_stops));
	for (size_t i = 0; i < a->nprocs; i++)
		a->procs[i]->sampled = false;

	/* images: the kernel and what some process still maps */
	bool *keep = xcalloc(a->nimages + 1, sizeof(bool));
	keep[a->kernel_image] = true;
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct tally_proc *p = a->procs[i];
		for (size_t m = 0; m < p->nmaps; m++)
			if (p->maps[m].image != TALLY_MAP_ANON)
				keep[p->maps[m].image] = true;
		if (p->jit_image != TALLY_HIDX_NONE)
			keep[p->jit_image] = true;
		if (p->nomap_image != TALLY_HIDX_NONE)
			keep[p->nomap_image] = true;
	}
	uint32_t *map = xmalloc((a->nimages + 1) * sizeof(uint32_t));
	size_t n = 0;
	bool all_identified = a->nidentified == a->nimages;
	for (size_t i = 0; i < a->nimages; i++) {
		if (!keep[i]) {
			free(a->images[i].path);
			free(a->images[i].jit_map);
			free(a->images[i].id);
			free(a->images[i].id_kind);
			tally_jitdump_release(a->images[i].jd);
			free(a->images[i].jd);
			free(a->images[i].jd_source);
			free(a->images[i].jd_text);
			tally_unwind_image_release(&a->images[i]);
			map[i] = TALLY_HIDX_NONE;
			continue;
		}
		map[i] = (uint32_t)n;
		a->images[n++] = a->images[i];
	}
	bool all_checked = a->images_checked == a->nimages;
	a->nimages = n;
	a->nidentified = all_identified ? n : 0; /* identification skips images already done */
	a->images_checked = all_checked ? n : 0;
	tally_hidx_release(&a->image_idx);
	/* the memo forgets the images gone (and those it had noted: noted again when asked) */
	if (a->image_memo)
		memset(a->image_memo, 0, TALLY_AGG_IMAGE_MEMO * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++) {
		uint64_t h = image_hash(&a->images[i]);
		tally_hidx_put(&a->image_idx, h, (uint32_t)i);
		image_memo_note(a, h);
	}
	a->kernel_image = map[a->kernel_image];
	for (size_t i = 0; i < a->nprocs; i++) {
		struct tally_proc *p = a->procs[i];
		for (size_t m = 0; m < p->nmaps; m++)
			p->maps[m].image = remap_image(map, p->maps[m].image);
		p->jit_image = remap_image(map, p->jit_image);
		p->nomap_image = remap_image(map, p->nomap_image);
	}
	free(map);
	free(keep);
}

static size_t hidx_bytes(const struct tally_hidx *h)
{
	return h->mask ? (h->mask + 1) * sizeof(struct tally_hslot) : 0;
}

size_t tally_agg_memory(const struct tally_agg *a)
{
	size_t m = sizeof(*a) + (size_t)a->nevents * sizeof(uint64_t);
	m += a->aimages * sizeof(struct tally_image);
	for (size_t i = 0; i < a->nimages; i++) {
		const struct tally_image *im = &a->images[i];
		m += strlen(im->path) + 1 + im->jit_map_len + im->jd_text_len;
		if (im->jd) /* kept until written: counted, so --max-memory sees it */
			m += sizeof(*im->jd) + im->jd->bytes;
		if (im->id)
			m += strlen(im->id) + strlen(im->id_kind) + 2;
	}
	m += a->aframes * sizeof(*a->frames) + a->astack_frames * sizeof(*a->stack_frames) +
	     a->aframe_stack1 * sizeof(*a->frame_stack1) + a->afp_rules * sizeof(*a->fp_rules) +
	     a->astacks * sizeof(*a->stacks) + a->arows * sizeof(*a->rows) +
	     a->acounts * sizeof(*a->counts) + a->aweights * sizeof(*a->weights) +
	     a->acomms * sizeof(*a->comms);
	m += hidx_bytes(&a->image_idx) + hidx_bytes(&a->frame_idx) + hidx_bytes(&a->stack_idx) +
	     hidx_bytes(&a->row_idx) + hidx_bytes(&a->proc_idx);
	m += a->aprocs * sizeof(*a->procs) + (a->memo ? MEMO_SIZE * sizeof(*a->memo) : 0);
	m += a->image_memo ? TALLY_AGG_IMAGE_MEMO * sizeof(*a->image_memo) : 0;
	m += a->ajit_programs * sizeof(*a->jit_programs);
	m += a->agrave * sizeof(*a->grave);
	for (size_t i = 0; i < a->nprocs + a->ngrave; i++) {
		const struct tally_proc *p = i < a->nprocs ? a->procs[i] : a->grave[i - a->nprocs];
		m += sizeof(*p) + p->amaps * sizeof(*p->maps) + (p->exe ? strlen(p->exe) + 1 : 0);
	}
	m += a->atasks * sizeof(*a->tasks);
	for (size_t i = 0; i < a->ntasks; i++)
		m += a->tasks[i].exe ? strlen(a->tasks[i].exe) + 1 : 0;
	return m;
}
