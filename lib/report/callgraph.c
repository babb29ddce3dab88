/* Report-time call graphs (see callgraph.h). */
#define _GNU_SOURCE
#include "tally/callgraph.h"
#include "tally/demangle.h"
#include "tally/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const root_names[] = {
	/* user space: the main thread and thread starts */
	"_start",
	"__libc_start_main",
	"__libc_start_call_main",
	"start_thread",
	"__clone",
	"__clone3",
	"clone",
	"clone3",
	"thread_start",
	/* the kernel's own threads and idle loops */
	"ret_from_fork",
	"ret_from_fork_asm",
	"secondary_startup_64",
	"secondary_startup_64_no_verify",
	"common_startup_64",
	"x86_64_start_kernel",
	"start_kernel",
	"rest_init",
	"kthread",
};

static bool is_root_name(const char *n)
{
	for (size_t i = 0; i < ARRAY_SIZE(root_names); i++)
		if (!strcmp(n, root_names[i]))
			return true;
	return false;
}

struct fkey {
	uint32_t image;
	const char *name;
	uint64_t addr;
	bool inlined;
};

static bool func_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_cg *cg = ctx;
	const struct fkey *k = key;
	const struct tally_cg_func *f = &cg->funcs[idx];
	return f->image == k->image && f->addr == k->addr && f->inlined == k->inlined &&
	       !strcmp(f->name, k->name);
}

static uint32_t intern_key(struct tally_cg *cg, const struct fkey *k, bool has_addr)
{
	uint64_t h = tally_hash_bytes(k->name, strlen(k->name),
				      k->addr ^ ((uint64_t)k->image << 32) ^ (uint64_t)k->inlined);
	uint32_t i = tally_hidx_get(&cg->func_idx, h, k, func_eq, cg);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(cg->funcs, cg->afuncs, cg->nfuncs + 1);
	cg->funcs[cg->nfuncs] = (struct tally_cg_func){ k->image,
							xstrdup(k->name),
							k->addr,
							has_addr,
							0,
							0,
							!k->inlined && is_root_name(k->name),
							k->inlined,
							0,
							0 };
	tally_hidx_put(&cg->func_idx, h, (uint32_t)cg->nfuncs);
	return (uint32_t)cg->nfuncs++;
}

/* intern_key for a name the resolver owns, whose address stays: a small
 * cache by address, in front of hashing and comparing the name's text */
struct tally_cg_name_slot {
	const char *name;
	uint64_t addr;
	uint32_t image;
	uint32_t fn;
	bool inlined;
};
#define NAME_SLOTS 16384

static uint32_t intern_resolved(struct tally_cg *cg, const struct fkey *k, bool has_addr)
{
	uint64_t h = tally_hash_u64((uintptr_t)k->name ^ k->addr ^ ((uint64_t)k->image << 40) ^
				    k->inlined);
	struct tally_cg_name_slot *sl = &cg->name_cache[h & (NAME_SLOTS - 1)];
	if (sl->name == k->name && sl->addr == k->addr && sl->image == k->image &&
	    sl->inlined == k->inlined)
		return sl->fn;
	uint32_t fn = intern_key(cg, k, has_addr);
	*sl = (struct tally_cg_name_slot){ k->name, k->addr, k->image, fn, k->inlined };
	return fn;
}

/* The functions of one frame, innermost first: its inlined functions (when
 * DWARF has them), then the function itself. Returns how many (at most max). */
static size_t intern_frame(struct tally_cg *cg, struct tally_resolver *res,
			   const struct tally_frame *fr, bool leaf, uint32_t *out, size_t max)
{
	/* callers' frames are return addresses: the resolver looks up the call instruction */
	bool raw = tally_resolver_mismatch(res, fr->image);
	char buf[64];
	if (raw) {
		snprintf(buf, sizeof(buf), "[offset 0x%" PRIx64 "]", fr->offset);
		struct fkey k = { fr->image, buf, fr->offset, false };
		out[0] = intern_key(cg, &k, true);
		return 1;
	}
	const struct tally_srcframe *sf;
	size_t n = tally_resolve_frames(res, fr->image, fr->offset, !leaf, &sf);
	size_t k = 0;
	for (size_t i = 0; i < n && k < max; i++) {
		if (!sf[i].name && sf[i].inlined)
			continue;
		struct fkey key = { fr->image, sf[i].name ? sf[i].name : "[unknown]",
				    sf[i].name ? sf[i].addr : 0, sf[i].inlined };
		out[k++] = intern_resolved(cg, &key, sf[i].name && !sf[i].inlined);
		if (!sf[i].inlined)
			break;
	}
	if (!k) {
		struct fkey key = { fr->image, "[unknown]", 0, false };
		out[k++] = intern_key(cg, &key, false);
	}
	return k;
}

/* intern_frame, once per distinct frame of the database and role (a leaf, or a
 * caller's return address): frames repeat across stacks, and a frame's number
 * indexes what it gave. fc_of holds a single function as (fn << 1 | 1) (the
 * rule), several as (fcache entry + 1) << 1, nothing yet as 0. */
static size_t frame_funcs(struct tally_cg *cg, struct tally_resolver *res,
			  const struct tally_db *db, uint32_t id, bool leaf, const uint32_t **out,
			  uint32_t *one)
{
	uint32_t *slot = &cg->fc_of[(size_t)id * 2 + !leaf];
	if (*slot & 1) {
		*one = *slot >> 1;
		*out = one;
		return 1;
	}
	if (!*slot) {
		const struct tally_frame *fr = &db->frame_tab[id];
		uint32_t fns[32];
		size_t n = intern_frame(cg, res, fr, leaf, fns, ARRAY_SIZE(fns));
		if (n == 1) {
			*slot = fns[0] << 1 | 1;
			*one = fns[0];
			*out = one;
			return 1;
		}
		GROW(cg->fc_funcs, cg->afc_funcs, cg->nfc_funcs + n);
		memcpy(cg->fc_funcs + cg->nfc_funcs, fns, n * sizeof(*fns));
		GROW(cg->fcache, cg->afcache, cg->nfcache + 1);
		cg->fcache[cg->nfcache] =
			(struct tally_cg_frame){ fr->image, leaf, fr->offset,
						 (uint32_t)cg->nfc_funcs, (uint32_t)n };
		cg->nfc_funcs += n;
		*slot = (uint32_t)++cg->nfcache << 1;
	}
	const struct tally_cg_frame *c = &cg->fcache[(*slot >> 1) - 1];
	*out = cg->fc_funcs + c->first;
	return c->n;
}

static bool arc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_cg *cg = ctx;
	const uint32_t *k = key;
	return cg->arcs[idx].caller == k[0] && cg->arcs[idx].callee == k[1];
}

static uint32_t arc_id(struct tally_cg *cg, uint32_t caller, uint32_t callee)
{
	uint32_t k[2] = { caller, callee };
	uint64_t h = tally_hash_u64(((uint64_t)caller << 32) | callee);
	uint32_t i = tally_hidx_get(&cg->arc_idx, h, k, arc_eq, cg);
	if (i == TALLY_HIDX_NONE) {
		GROW(cg->arcs, cg->aarcs, cg->narcs + 1);
		cg->arcs[cg->narcs] = (struct tally_cg_arc){ caller, callee, 0, 0 };
		tally_hidx_put(&cg->arc_idx, h, (uint32_t)cg->narcs);
		i = (uint32_t)cg->narcs++;
	}
	return i;
}

void tally_cg_build(struct tally_cg *cg, const struct tally_db *db, struct tally_resolver *res,
		    int event, bool (*keep)(const struct tally_db *db, int pid, const void *ctx),
		    const void *ctx)
{
	tally_cg_build_flags(cg, db, res, event, keep, ctx, 0);
}

void tally_cg_build_flags(struct tally_cg *cg, const struct tally_db *db,
			  struct tally_resolver *res, int event,
			  bool (*keep)(const struct tally_db *db, int pid, const void *ctx),
			  const void *ctx, unsigned flags)
{
	memset(cg, 0, sizeof(*cg));
	/* per function, its sums in an array of their own (the functions' records
	 * are larger than the cache these sums run in), each function's in one
	 * cache line: the stack (1-based) that last counted it, its inclusive
	 * and self samples */
	struct fsum {
		uint64_t incl, nincl, self, nself;
		uint32_t seen;
	} *sum = NULL;
	size_t asum = 0;
	/* the sample counts: beside the weights once db is weighed */
	const uint64_t *raw = db->weighed ? db->stack_weights : db->stack_counts;
	uint64_t depth_limit = 127;
	const char *mx = tally_meta_get(&db->session, "max-stack");
	if (mx)
		depth_limit = strtoull(mx, NULL, 10);
	cg->fc_of = xcalloc(db->nframe_tab * 2 + 1, sizeof(uint32_t));
	cg->name_cache = xcalloc(NAME_SLOTS, sizeof(*cg->name_cache));
	/* one function a frame is the rule (inlines add more): room for that */
	GROW(cg->funcs_of, cg->afuncs_of, db->nstack_frames + 1);
	for (size_t s = 0; s < db->nstacks; s++) {
		const struct tally_db_stack *st = &db->stacks[s];
		uint64_t c = db->stack_counts[s * (size_t)db->nevents + (size_t)event];
		if (!c || (keep && !keep(db, st->pid, ctx)))
			continue;
		uint64_t nc = raw[s * (size_t)db->nevents + (size_t)event];
		struct tally_cg_stack cs = { (uint32_t)cg->nfuncs_of, 0, c, (uint32_t)s, nc };
		const uint32_t *ids = &db->stack_frames[st->first];
		/* a leaf is seldom met twice: its entry is fetched a few stacks ahead */
		if (s + 4 < db->nstacks)
			__builtin_prefetch(
				&cg->fc_of[(size_t)db->stack_frames[db->stacks[s + 4].first] * 2]);
		for (uint32_t f = 0; f < st->len; f++) {
			const uint32_t *fns;
			uint32_t one;
			size_t nfn = frame_funcs(cg, res, db, ids[f], f == 0, &fns, &one);
			if (cg->nfuncs_of + nfn > cg->afuncs_of)
				GROW(cg->funcs_of, cg->afuncs_of, cg->nfuncs_of + nfn);
			for (size_t j = 0; j < nfn; j++) {
				uint32_t fn = fns[j];
				/* consecutive frames in one function (inlined-away recursion, or a
				 * kernel sample whose user part starts in the same function) are
				 * one */
				if (cs.len && cg->funcs_of[cg->nfuncs_of - 1] == fn)
					continue;
				cg->funcs_of[cg->nfuncs_of++] = fn;
				cs.len++;
			}
		}
		if (cg->nstacks == cg->astacks)
			GROW(cg->stacks, cg->astacks, cg->nstacks + 1);
		cg->stacks[cg->nstacks++] = cs;
		cg->total += c;
		cg->ntotal += nc;
		const uint32_t *fs = &cg->funcs_of[cs.first];
		if (cg->funcs[fs[cs.len - 1]].root) {
			cg->rooted += c;
			cg->nrooted += nc;
		} else if (st->len >= depth_limit) {
			cg->truncated += c;
			cg->ntruncated += nc;
		}
		if (asum < cg->nfuncs) {
			size_t old = asum;
			GROW(sum, asum, cg->nfuncs);
			memset(sum + old, 0, (asum - old) * sizeof(*sum));
		}
		sum[fs[0]].self += c;
		sum[fs[0]].nself += nc;
		/* marks per function: recursion counts once per stack, in linear time */
		uint32_t mark = (uint32_t)cg->nstacks;
		for (uint32_t i = 0; i < cs.len; i++)
			if (sum[fs[i]].seen != mark) {
				sum[fs[i]].seen = mark;
				sum[fs[i]].incl += c;
				sum[fs[i]].nincl += nc;
			}
	}
	for (size_t f = 0; f < cg->nfuncs && sum; f++) {
		cg->funcs[f].self = sum[f].self;
		cg->funcs[f].nself = sum[f].nself;
		cg->funcs[f].incl = sum[f].incl;
		cg->funcs[f].nincl = sum[f].nincl;
	}
	free(sum);
	free(cg->name_cache);
	cg->name_cache = NULL;
	if (!(flags & TALLY_CG_NO_ARCS))
		tally_cg_arcs(cg);
}

void tally_cg_arcs(struct tally_cg *cg)
{
	uint32_t *arcmark = NULL; /* the stack (1-based) that last counted each arc */
	size_t aarcmark = 0;
	for (size_t s = 0; s < cg->nstacks; s++) {
		const struct tally_cg_stack *cs = &cg->stacks[s];
		const uint32_t *fs = &cg->funcs_of[cs->first];
		uint32_t mark = (uint32_t)s + 1;
		for (uint32_t i = 0; i + 1 < cs->len; i++) {
			uint32_t a = arc_id(cg, fs[i + 1], fs[i]);
			if (aarcmark < cg->narcs) {
				size_t old = aarcmark;
				GROW(arcmark, aarcmark, cg->narcs);
				memset(arcmark + old, 0, (aarcmark - old) * sizeof(*arcmark));
			}
			if (arcmark[a] != mark) {
				arcmark[a] = mark;
				cg->arcs[a].count += cs->count;
				cg->arcs[a].nsamples += cs->nsamples;
			}
		}
	}
	free(arcmark);
}

void tally_cg_release(struct tally_cg *cg)
{
	for (size_t i = 0; i < cg->nfuncs; i++)
		free(cg->funcs[i].name);
	free(cg->funcs);
	free(cg->funcs_of);
	free(cg->stacks);
	free(cg->arcs);
	tally_hidx_release(&cg->func_idx);
	tally_hidx_release(&cg->arc_idx);
	free(cg->fcache);
	free(cg->fc_funcs);
	free(cg->fc_of);
	memset(cg, 0, sizeof(*cg));
}

long tally_cg_find(const struct tally_cg *cg, const char *name)
{
	long best = -1;
	for (size_t i = 0; i < cg->nfuncs; i++)
		if (tally_name_matches(cg->funcs[i].name, name) &&
		    (best < 0 || cg->funcs[i].incl > cg->funcs[best].incl))
			best = (long)i;
	return best;
}

static uint32_t child_of(struct tally_cg_node **nodes, size_t *n, size_t *alloc, uint32_t parent,
			 uint32_t func)
{
	struct tally_cg_node *p = &(*nodes)[parent];
	for (size_t i = 0; i < p->nkids; i++)
		if ((*nodes)[p->kids[i]].func == func)
			return p->kids[i];
	GROW(*nodes, *alloc, *n + 1);
	p = &(*nodes)[parent];
	uint32_t id = (uint32_t)*n;
	(*nodes)[*n] = (struct tally_cg_node){ func, parent, 0, NULL, 0, 0, 0 };
	(*n)++;
	GROW(p->kids, p->akids, p->nkids + 1);
	p->kids[p->nkids++] = id;
	return id;
}

struct tally_cg_node *tally_cg_tree(const struct tally_cg *cg, long focus, bool invert,
				    size_t *nnodes)
{
	struct tally_cg_node *nodes = NULL;
	size_t n = 0, alloc = 0;
	GROW(nodes, alloc, 1);
	nodes[n++] = (struct tally_cg_node){ UINT32_MAX, UINT32_MAX, 0, NULL, 0, 0, 0 };
	for (size_t s = 0; s < cg->nstacks; s++) {
		const struct tally_cg_stack *st = &cg->stacks[s];
		const uint32_t *fs = &cg->funcs_of[st->first];
		long start = (long)st->len - 1, end = -1, step = -1; /* root to leaf */
		if (focus >= 0) {
			long at = -1;
			if (invert) {
				/* callers: from the innermost occurrence up to the root */
				for (long i = 0; i < (long)st->len && at < 0; i++)
					if (fs[i] == (uint32_t)focus)
						at = i;
				if (at < 0)
					continue;
				start = at;
				end = (long)st->len;
				step = 1;
			} else {
				/* callees: from the outermost occurrence down to the leaf */
				for (long i = (long)st->len - 1; i >= 0 && at < 0; i--)
					if (fs[i] == (uint32_t)focus)
						at = i;
				if (at < 0)
					continue;
				start = at;
			}
		}
		nodes[0].count += st->count;
		nodes[0].nsamples += st->nsamples;
		uint32_t cur = 0;
		for (long i = start; i != end; i += step) {
			cur = child_of(&nodes, &n, &alloc, cur, fs[i]);
			nodes[cur].count += st->count;
			nodes[cur].nsamples += st->nsamples;
		}
	}
	*nnodes = n;
	return nodes;
}

void tally_cg_tree_free(struct tally_cg_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(nodes[i].kids);
	free(nodes);
}

size_t tally_cg_stops(const struct tally_cg *cg, uint32_t *funcs, uint64_t *counts, size_t max)
{
	return tally_cg_stops_n(cg, funcs, counts, NULL, max);
}

size_t tally_cg_stops_n(const struct tally_cg *cg, uint32_t *funcs, uint64_t *counts,
			uint64_t *nsamples, size_t max)
{
	uint64_t *per = xcalloc(cg->nfuncs + 1, sizeof(uint64_t));
	uint64_t *nper = xcalloc(cg->nfuncs + 1, sizeof(uint64_t));
	for (size_t s = 0; s < cg->nstacks; s++) {
		const struct tally_cg_stack *st = &cg->stacks[s];
		uint32_t outer = cg->funcs_of[st->first + st->len - 1];
		if (!cg->funcs[outer].root) {
			per[outer] += st->count;
			nper[outer] += st->nsamples;
		}
	}
	/* by samples when they are asked for (the unwind line counts samples), else by count */
	uint64_t *by = nsamples ? nper : per;
	size_t n = 0;
	for (size_t k = 0; k < max; k++) {
		uint64_t best = 0;
		size_t bi = 0;
		for (size_t i = 0; i < cg->nfuncs; i++)
			if (by[i] > best) {
				best = by[i];
				bi = i;
			}
		if (!best)
			break;
		funcs[n] = (uint32_t)bi;
		if (nsamples)
			nsamples[n] = nper[bi];
		counts[n++] = per[bi];
		by[bi] = 0;
	}
	free(per);
	free(nper);
	return n;
}
