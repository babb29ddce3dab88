/* gmon (opgprof): a gmon.out for one image, as glibc's profiling runtime writes
 * it, for `gprof IMAGE gmon.out`: a histogram of the samples over the image's
 * sampled code (link-time addresses, as gprof reads the image's symbols) and,
 * from the stacks, the call arcs between its functions. docs/export.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/export.h"
#include "tally/view.h"

enum { TAG_TIME_HIST = 0, TAG_CG_ARC = 1 };
#define HIST_MAX_BINS (1u << 20)
#define BIN_COUNT_MAX 65535u /* bins are 16-bit: larger counts take more records */
#define HIST_MAX_BYTES (256u << 20) /* all the records of the histogram (docs/export.md) */
#define GMON_RATE 10000u /* ticks per second of a time histogram: 100 us each */

static void put_u32(struct strbuf *o, uint32_t v)
{
	strbuf_add(o, &v, sizeof(v));
}

static void put_addr(struct strbuf *o, uint64_t v)
{
	/* gprof reads addresses in the size of the machine's pointers */
	if (sizeof(void *) == 8) {
		strbuf_add(o, &v, 8);
	} else {
		uint32_t w = (uint32_t)v;
		strbuf_add(o, &w, 4);
	}
}

struct arc {
	uint64_t from, self;
	uint64_t count;
	uint32_t mark;
};

static bool arc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct arc *a = &(*(struct arc *const *)ctx)[idx], *b = key;
	return a->from == b->from && a->self == b->self;
}

/* The image a gmon.out is for: the one --image selected, else the profiled
 * program's executable with the most samples. */
static int pick_image(const struct tally_export *x, uint32_t *out)
{
	const struct tally_db *db = x->db;
	size_t dbne = (size_t)db->nevents;
	int ev = x->events[0];
	uint64_t *per = xcalloc(db->nimages + 1, sizeof(uint64_t));
	for (size_t k = 0; k < db->nentries; k++)
		per[db->entries[k].image] += db->counts[k * dbne + (size_t)ev];
	uint32_t best = UINT32_MAX;
	size_t matches = 0;
	struct strbuf names = STRBUF_INIT;
	for (uint32_t i = 0; i < db->nimages; i++) {
		if (!per[i])
			continue;
		if (x->image) {
			if (!tally_select_image_matches(&db->images[i], x->image))
				continue;
			strbuf_addf(&names, "%s%s", matches ? ", " : "", db->images[i].path);
			matches++;
			best = i;
		} else if (!strcmp(db->images[i].kind, "exec") &&
			   (best == UINT32_MAX || per[i] > per[best])) {
			best = i;
		}
	}
	free(per);
	int r = 0;
	if (x->image && matches > 1)
		r = tally_seterr(
			-EINVAL,
			"a gmon.out holds one image, and --image '%s' matches %zu with samples: %s (give the full path)",
			x->image, matches, names.buf);
	else if (best == UINT32_MAX)
		r = tally_seterr(
			-EINVAL,
			"no executable of '%s' has samples of event '%s' (give --image NAME for a library)",
			x->input, db->events[ev]);
	else if (!tally_export_is_file(&db->images[best]))
		r = tally_seterr(
			-EINVAL,
			"image '%s' is not a file gprof can read (gmon.out is for an executable or a library)",
			db->images[best].name);
	strbuf_release(&names);
	*out = best;
	return r;
}

int tally_export_gmon(const struct tally_export *x, struct tally_export_out *out)
{
	const struct tally_db *db = x->db;
	size_t dbne = (size_t)db->nevents;
	int ev = x->events[0];
	uint32_t image;
	int pr = pick_image(x, &image);
	if (pr < 0)
		return pr;
	{
		/* which image, said: without --image it was chosen (the executable
		 * with the most samples), and gprof needs that very file */
		const struct tally_db_image *im = &db->images[image];
		struct strbuf n = STRBUF_INIT;
		strbuf_addf(&n, "of image '%s'%s", im->path,
			    x->image ? "" : ", the executable with the most samples");
		free(out->note);
		out->note = strbuf_detach(&n);
	}
	/* gprof needs link-time addresses, which need the image's file */
	bool placed = false;
	for (size_t k = 0; k < db->nentries && !placed; k++) {
		uint64_t a;
		placed = db->entries[k].image == image && db->counts[k * dbne + (size_t)ev] &&
			 !tally_resolver_addr(x->res, image, db->entries[k].offset, &a);
	}
	if (!placed) {
		const char *note = tally_resolver_note(x->res, image);
		return tally_seterr(
			-EINVAL, "cannot place the samples of '%s' at its link-time addresses: %s",
			db->images[image].path,
			note ? note : "they are in no loadable segment of the file");
	}

	/* the histogram's range: the functions that hold samples */
	uint64_t lo = UINT64_MAX, hi = 0, unplaced = 0;
	for (size_t k = 0; k < db->nentries; k++) {
		const struct tally_db_entry *en = &db->entries[k];
		uint64_t c = db->counts[k * dbne + (size_t)ev];
		if (en->image != image || !c)
			continue;
		uint64_t a;
		if (tally_resolver_addr(x->res, image, en->offset, &a) < 0) {
			unplaced += c;
			continue;
		}
		uint64_t fl = a, fh = a + 1;
		const struct tally_sym *s = tally_resolve(x->res, image, en->offset);
		if (s && s->addr <= a) {
			fl = s->addr;
			fh = s->addr + (s->size ? s->size : 1);
		}
		if (fl < lo)
			lo = fl;
		if (fh > hi)
			hi = fh;
	}
	/* the unit of the bins: time in ticks of GMON_RATE when db is weighted
	 * (each sample its own period), events, or (--samples) samples */
	bool timed = db->weighed && tally_db_unit_time(db, ev);
	const char *dimen_name = timed ? "seconds" : db->weighed ? "events" : "samples";
	{
		/* what a bin counts, said beside the image */
		struct strbuf n = STRBUF_INIT;
		strbuf_addstr(&n, out->note ? out->note : "");
		if (timed)
			strbuf_addf(
				&n,
				"; time in ticks of %g s (rate %u Hz), each sample weighted by its period",
				1.0 / GMON_RATE, GMON_RATE);
		else
			strbuf_addf(&n, "; bins count %s",
				    db->weighed ? "events, each sample weighted by its period"
						: "samples");
		free(out->note);
		out->note = strbuf_detach(&n);
	}
	if (unplaced) {
		struct strbuf v = STRBUF_INIT;
		tally_view_value_unit(&v, db, ev, unplaced);
		tally_warnings_add(
			&out->warnings,
			"%s of '%s' are outside its loadable segments: not in the gmon.out histogram",
			v.buf, db->images[image].name);
		strbuf_release(&v);
	}
	uint64_t bin = 2;
	while ((hi - lo + bin - 1) / bin > HIST_MAX_BINS)
		bin *= 2;
	lo -= lo % bin;
	hi += (bin - hi % bin) % bin;
	size_t nbins = (size_t)((hi - lo) / bin);
	uint64_t *hist = xcalloc(nbins + 1, sizeof(uint64_t));
	uint64_t maxbin = 0;
	for (size_t k = 0; k < db->nentries; k++) {
		const struct tally_db_entry *en = &db->entries[k];
		uint64_t c = db->counts[k * dbne + (size_t)ev], a;
		if (en->image != image || !c ||
		    tally_resolver_addr(x->res, image, en->offset, &a) < 0)
			continue;
		size_t b = (size_t)((a - lo) / bin);
		hist[b] = hist[b] + c < hist[b] ? UINT64_MAX : hist[b] + c;
	}
	/* time: nanoseconds into ticks, rounded on the running sum so that the
	 * ticks add up to the total time to within half a tick */
	uint32_t rate = timed ? GMON_RATE : 1;
	uint64_t per_tick = 1000000000u / GMON_RATE, sum = 0, done_ticks = 0;
	for (size_t b = 0; b < nbins; b++) {
		if (timed) {
			sum = sum + hist[b] < sum ? UINT64_MAX : sum + hist[b];
			uint64_t upto = sum / per_tick + (sum % per_tick >= per_tick / 2);
			hist[b] = upto - done_ticks;
			done_ticks = upto;
		}
		if (hist[b] > maxbin)
			maxbin = hist[b];
	}

	/* a bin holding more than 65535 samples repeats the whole range: bounded,
	 * so that no count (however it came) makes the file grow without end */
	uint64_t records = maxbin / BIN_COUNT_MAX + (maxbin % BIN_COUNT_MAX != 0);
	uint64_t rec_bytes = 1 + 2 * sizeof(void *) + 4 + 4 + 15 + 1 + (uint64_t)nbins * 2;
	if (records > HIST_MAX_BYTES / rec_bytes) {
		free(hist);
		return tally_seterr(
			-EINVAL,
			"a gmon.out histogram of '%s' would take %" PRIu64 " records of %" PRIu64
			" bytes (a bin holds %" PRIu64
			" %s, 65535 a record), more than %u MiB (use --format pprof or callgrind%s)",
			db->images[image].name, records, rec_bytes, maxbin,
			timed ? "ticks" : dimen_name, HIST_MAX_BYTES >> 20,
			db->weighed ? ", or --samples" : "");
	}

	struct strbuf *o = tally_export_out_file(out, "");
	strbuf_add(o, "gmon", 4);
	put_u32(o, 1);
	strbuf_add(o, "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
	uint16_t *bins = xcalloc(nbins + 1, sizeof(uint16_t));
	/* the same range repeated adds up in gprof: one record per 65535 samples a bin */
	for (uint64_t done = 0; done < maxbin; done += BIN_COUNT_MAX) {
		for (size_t b = 0; b < nbins; b++) {
			uint64_t left = hist[b] > done ? hist[b] - done : 0;
			bins[b] = (uint16_t)(left > BIN_COUNT_MAX ? BIN_COUNT_MAX : left);
		}
		strbuf_addch(o, TAG_TIME_HIST);
		put_addr(o, lo);
		put_addr(o, hi);
		put_u32(o, (uint32_t)nbins);
		put_u32(o, rate);
		char dimen[15] = { 0 };
		memcpy(dimen, dimen_name, strlen(dimen_name));
		strbuf_add(o, dimen, sizeof(dimen));
		strbuf_addch(o, timed ? 's' : 'n');
		strbuf_add(o, bins, nbins * sizeof(uint16_t));
	}
	free(bins);
	free(hist);

	/* arcs: adjacent frames of a stack both in the image, caller's call site
	 * to the callee function; the count is the samples whose stacks hold the
	 * call, once per stack (gprof uses counts to share a callee's time among
	 * its callers: sample counts, which fit its 32 bits, even when the
	 * histogram is weighted) */
	const uint64_t *stc = db->weighed ? db->stack_weights : db->stack_counts;
	const uint64_t *flc = db->weighed ? db->weights : db->counts;
	struct arc *arcs = NULL;
	size_t narcs = 0, aarcs = 0;
	struct tally_hidx idx = { 0 };
	for (size_t k = 0; k < db->nstacks; k++) {
		const struct tally_db_stack *st = &db->stacks[k];
		uint64_t c = stc[k * dbne + (size_t)ev];
		if (!c)
			continue;
		for (uint32_t f = 0; f + 1 < st->len; f++) {
			const struct tally_frame *callee = tally_db_frame(db, st, f),
						 *caller = tally_db_frame(db, st, f + 1);
			if (callee->image != image || caller->image != image || !caller->offset)
				continue;
			uint64_t coff = callee->offset - (f == 0 || !callee->offset ? 0 : 1);
			uint64_t from, self;
			if (tally_resolver_addr(x->res, image, caller->offset - 1, &from) < 0 ||
			    tally_resolver_addr(x->res, image, coff, &self) < 0)
				continue;
			const struct tally_sym *cs = tally_resolve(x->res, image, coff);
			const struct tally_sym *fs =
				tally_resolve(x->res, image, caller->offset - 1);
			if (cs)
				self = cs->addr;
			if (cs && fs && cs->addr == fs->addr)
				/* a function's consecutive frames are one (as in tally report) */
				continue;
			struct arc key = { from, self, 0, 0 };
			uint64_t h = tally_hash_u64(from ^ tally_hash_u64(self));
			uint32_t i = tally_hidx_get(&idx, h, &key, arc_eq, &arcs);
			if (i == TALLY_HIDX_NONE) {
				GROW(arcs, aarcs, narcs + 1);
				arcs[narcs] = key;
				tally_hidx_put(&idx, h, (uint32_t)narcs);
				i = (uint32_t)narcs++;
			}
			if (arcs[i].mark != (uint32_t)k + 1) {
				arcs[i].mark = (uint32_t)k + 1;
				arcs[i].count += c;
			}
		}
	}
	/* --percent-limit: arcs under P% of the image's samples are left out (the
	 * histogram stays whole: it is the flat profile) */
	uint64_t image_total = 0;
	for (size_t k = 0; k < db->nentries; k++)
		if (db->entries[k].image == image)
			image_total += flc[k * dbne + (size_t)ev];
	for (size_t i = 0; i < narcs; i++) {
		if (x->percent_limit > 0 &&
		    (double)arcs[i].count * 100.0 < x->percent_limit * (double)image_total)
			continue;
		strbuf_addch(o, TAG_CG_ARC);
		put_addr(o, arcs[i].from);
		put_addr(o, arcs[i].self);
		put_u32(o, arcs[i].count > UINT32_MAX ? UINT32_MAX : (uint32_t)arcs[i].count);
	}
	free(arcs);
	tally_hidx_release(&idx);
	return 0;
}
