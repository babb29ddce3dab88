/* The binary stacks file (format version 4): its writer and its reader. */
#define _GNU_SOURCE
#include "stacks.h"
#include "db-private.h"
#include "tally/util.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the binary stacks file (format version 4) ----
 *
 * docs/format.md, "stacks": a header, then the frames (each distinct frame
 * once, in the writer's order), the stacks, their counts and weights, and the stacks' frame
 * numbers, each section an array of little-endian fixed-size records that a
 * reader takes into its arrays as they are, checking them, without parsing. */


/* the records as they are in the file and in memory (a frame is struct
 * tally_frame, its 4 bytes of padding zero in the file) */
struct bin_stack {
	uint32_t pid, label, len, zero;
};
_Static_assert(sizeof(struct tally_frame) == 16 && offsetof(struct tally_frame, offset) == 8,
	       "a frame record is struct tally_frame");
_Static_assert(sizeof(struct bin_stack) == sizeof(struct tally_db_stack),
	       "a stack record is read in place");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the binary stacks file is read and written in place: little-endian hosts");

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

int tally_stacks_write_binary(const struct tally_db *db, const uint64_t *scounts,
			      const uint64_t *sweights, const uint64_t *mean, struct strbuf *out)
{
	/* the frames numbered anew in the order the stacks meet them (each
	 * root first): what a reader does stack after stack then goes through
	 * them about in order, as it went through those of a text file that it
	 * numbered as it read (a frame no stack has is left out) */
	size_t ne = (size_t)db->nevents, nu = 0;
	uint32_t *num = xmalloc((db->nframe_tab + 1) * sizeof(uint32_t));
	memset(num, 0xff, db->nframe_tab * sizeof(uint32_t));
	uint32_t *order = xmalloc((db->nframe_tab + 1) * sizeof(uint32_t));
	uint64_t nrefs = 0;
	for (size_t s = 0; s < db->nstacks; s++) {
		const struct tally_db_stack *st = &db->stacks[s];
		for (uint32_t f = st->len; f-- > 0;) {
			uint32_t id = db->stack_frames[st->first + f];
			if (num[id] == UINT32_MAX) {
				num[id] = (uint32_t)nu;
				order[nu++] = id;
			}
		}
		nrefs += st->len;
	}
	size_t size = BIN_HEAD + 16 * nu + 16 * db->nstacks + 16 * ne * db->nstacks + 4 * nrefs;
	if (strbuf_grow(out, size)) {
		free(num);
		free(order);
		return tally_seterr(-ENOMEM, "no memory for the stacks file (%zu bytes)", size);
	}
	unsigned char *p = (unsigned char *)out->buf + out->len;
	memcpy(p, BIN_MAGIC, 8);
	uint32_t h32[2] = { (uint32_t)ne, 0 };
	uint64_t h64[3] = { nu, db->nstacks, nrefs };
	memcpy(p + 8, h32, sizeof(h32));
	memcpy(p + 16, h64, sizeof(h64));
	p += BIN_HEAD;
	for (size_t i = 0; i < nu; i++) {
		struct tally_frame f;
		memset(&f, 0, sizeof(f)); /* its padding too */
		f.image = db->frame_tab[order[i]].image;
		f.offset = db->frame_tab[order[i]].offset;
		memcpy(p, &f, sizeof(f));
		p += sizeof(f);
	}
	for (size_t s = 0; s < db->nstacks; s++) {
		const struct tally_db_stack *st = &db->stacks[s];
		struct bin_stack b = { (uint32_t)(st->pid > 0 ? st->pid : 0), st->label, st->len,
				       0 };
		memcpy(p, &b, sizeof(b));
		p += sizeof(b);
	}
	for (size_t s = 0; s < db->nstacks; s++) {
		memcpy(p, &scounts[s * ne], ne * sizeof(uint64_t));
		p += ne * sizeof(uint64_t);
		for (size_t e = 0; e < ne; e++) {
			/* a database given weights without stack weights: count x period-mean */
			uint64_t w = sweights ? sweights[s * ne + e]
					      : tally_mul_sat(scounts[s * ne + e], mean[e]);
			memcpy(p, &w, sizeof(w));
			p += sizeof(w);
		}
	}
	for (size_t s = 0; s < db->nstacks; s++) {
		const struct tally_db_stack *st = &db->stacks[s];
		for (uint32_t f = 0; f < st->len; f++) {
			uint32_t v = num[db->stack_frames[st->first + f]];
			memcpy(p, &v, sizeof(v));
			p += sizeof(v);
		}
	}
	out->len += size;
	out->buf[out->len] = '\0';
	free(num);
	free(order);
	return 0;
}


/* n bytes into dst; false when the source ends first (or err, a failed read) */
static bool bs_read(struct bsrc *b, void *dst, size_t n)
{
	if (b->fd < 0) {
		if (b->len - b->pos < n)
			return false;
		memcpy(dst, b->mem + b->pos, n);
		b->pos += n;
		return true;
	}
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(b->fd, (char *)dst + got, n - got, (off_t)(b->pos + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			b->err = -errno;
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	b->pos += n;
	return true;
}

/* The error of a file that ends before its section what, or of a failed read. */
static int bin_short(const struct bsrc *b, const char *what, const char *section)
{
	if (b->err)
		return tally_seterr(b->err, "cannot read '%s': %s", what, strerror(-b->err));
	return tally_seterr(-EINVAL,
			    "'%s' ends in its %s (the file is truncated or damaged: record again)",
			    what, section);
}

/* The binary stacks file into s (its header in h, read), checked as the
 * text is: 0, or the error (s then holds none of it). */
int stacks_read_binary(struct stackset *s, struct bsrc *b, const unsigned char *h, size_t nh,
		       const char *what, const struct stacks_map *m, uint64_t size)
{
	if (!m->binary)
		return tally_seterr(
			-EINVAL,
			"'%s' is a binary stacks file, which only format version 4 has, but its session is of an older version (%s)",
			what, DAMAGED);
	if (m->none)
		return tally_seterr(
			-EINVAL,
			"'%s' holds call stacks, but the session says 'call-graph: none' (%s)",
			what, DAMAGED);
	if (nh < BIN_HEAD)
		return bin_short(b, what, "header");
	uint32_t nev = get32(h + 8);
	uint64_t nf = get64(h + 16), ns = get64(h + 24), nr = get64(h + 32);
	if (get32(h + 12))
		return tally_seterr(-EINVAL, "'%s': its header's reserved bytes are not zero (%s)",
				    what, DAMAGED);
	if (nev != (uint32_t)m->nevents)
		return tally_seterr(-EINVAL,
				    "'%s' holds the counts of %" PRIu32
				    " events, and its session names %d (%s)",
				    what, nev, m->nevents, DAMAGED);
	/* the size the header gives: the file's own, within what a file may be */
	uint64_t want = BIN_HEAD, vals_n;
	bool over = nf >= UINT32_MAX || ns >= UINT32_MAX || nr > UINT32_MAX ||
		    __builtin_mul_overflow(ns, 2 * (uint64_t)nev, &vals_n) ||
		    vals_n > UINT64_MAX / 8 || __builtin_add_overflow(want, 16 * nf, &want) ||
		    __builtin_add_overflow(want, 16 * ns, &want) ||
		    __builtin_add_overflow(want, 8 * vals_n, &want) ||
		    __builtin_add_overflow(want, 4 * nr, &want);
	if (over || want > TALLY_DB_FILE_MAX)
		return tally_seterr(-EINVAL,
				    "'%s': its header gives %" PRIu64 " frames, %" PRIu64
				    " stacks and %" PRIu64
				    " frame numbers, more than a stacks file holds (%s)",
				    what, nf, ns, nr, DAMAGED);
	if (nr > UINT32_MAX - s->nstack_frames)
		return tally_seterr(
			-E2BIG,
			"'%s': its %" PRIu64
			" frames and the %zu of the stacks read before it pass 2^32 (merge fewer databases at once)",
			what, nr, s->nstack_frames);
	if (size != want)
		return tally_seterr(-EINVAL,
				    "'%s' is %" PRIu64 " bytes, and its header says %" PRIu64
				    " (the file is %s: record again)",
				    what, size, want, size < want ? "truncated" : "damaged");
	size_t ne = (size_t)m->nevents, sne = (size_t)s->nevents;
	/* straight into the set when it is empty and takes the file as it is;
	 * else through frame numbers and stacks added one by one */
	bool direct = !s->nstacks && !s->nframe_tab && !s->dedup && !m->img && !m->col && sne == ne;
	int r = 0;
	struct tally_frame *fr = NULL;
	struct tally_db_stack *st = NULL;
	uint64_t *vals = NULL, *sum = xcalloc(ne + 1, sizeof(uint64_t)),
		 *wsum = xcalloc(ne + 1, sizeof(uint64_t));
	uint32_t *refs = NULL, *map = NULL;
	if (direct) {
		GROW(s->frame_tab, s->aframe_tab, nf + 1);
		GROW(s->stacks, s->astacks, ns + 1);
		GROW(s->counts, s->acounts, ns * 2 * ne + 1);
		GROW(s->stack_frames, s->astack_frames, nr + 1);
		fr = s->frame_tab;
		st = s->stacks;
		vals = s->counts;
		refs = s->stack_frames;
	} else {
		fr = xmalloc((nf + 1) * sizeof(*fr));
		st = xmalloc((ns + 1) * sizeof(*st));
		vals = xmalloc((ns * 2 * ne + 1) * sizeof(uint64_t));
		refs = xmalloc((nr + 1) * sizeof(uint32_t));
	}

	/* the frames: each in an image */
	if (!bs_read(b, fr, nf * sizeof(*fr))) {
		r = bin_short(b, what, "frames");
		goto out;
	}
	for (size_t i = 0; i < nf; i++) {
		if (get32((const unsigned char *)&fr[i] + 4)) {
			r = tally_seterr(-EINVAL,
					 "'%s' frame %zu: its reserved bytes are not zero (%s)",
					 what, i + 1, DAMAGED);
			goto out;
		}
		if (fr[i].image >= m->nimages) {
			r = tally_seterr(-EINVAL,
					 "'%s' frame %zu: image %" PRIu32
					 " is not in 'images' (%s)",
					 what, i + 1, fr[i].image, DAMAGED);
			goto out;
		}
	}

	/* the stacks, read over their records: pid, label set and length become
	 * where their frames start, length, pid and label set */
	if (!bs_read(b, st, ns * sizeof(*st))) {
		r = bin_short(b, what, "stacks");
		goto out;
	}
	uint64_t at = 0;
	for (size_t k = 0; k < ns; k++) {
		struct bin_stack bs;
		memcpy(&bs, &st[k], sizeof(bs));
		if (bs.pid > INT32_MAX) {
			r = tally_seterr(-EINVAL,
					 "'%s' stack %zu: pid %" PRIu32
					 " is not a process id (0 to %d) (%s)",
					 what, k + 1, bs.pid, INT32_MAX, DAMAGED);
			goto out;
		}
		if (bs.label > m->nlabels) {
			r = tally_seterr(-EINVAL,
					 "'%s' stack %zu: label set %" PRIu32
					 " is not in 'labels' (%s)",
					 what, k + 1, bs.label, DAMAGED);
			goto out;
		}
		if (bs.zero || !bs.len || bs.len > nr - at) {
			r = tally_seterr(-EINVAL, "'%s' stack %zu: %s (%s)", what, k + 1,
					 bs.zero   ? "its reserved bytes are not zero"
					 : !bs.len ? "it has no frames"
						   : "its frames run past the frame numbers",
					 DAMAGED);
			goto out;
		}
		int32_t pid = (int32_t)bs.pid;
		if (m->merged)
			pid = m->per_pid && pid > 0 ? pid : 0;
		st[k] = (struct tally_db_stack){ (uint32_t)at, bs.len, pid,
						 m->lab ? m->lab[bs.label] : bs.label };
		at += bs.len;
	}
	if (at != nr) {
		r = tally_seterr(-EINVAL,
				 "'%s': its stacks have %" PRIu64
				 " frames in all, and its header says %" PRIu64 " (%s)",
				 what, at, nr, DAMAGED);
		goto out;
	}

	/* the counts and weights, added up as the text's are */
	if (!bs_read(b, vals, ns * 2 * ne * sizeof(uint64_t))) {
		r = bin_short(b, what, "counts");
		goto out;
	}
	for (size_t k = 0; k < ns; k++) {
		const uint64_t *c = &vals[k * 2 * ne];
		for (size_t e = 0; e < ne; e++) {
			if (!c[e] && c[ne + e]) {
				r = tally_seterr(-EINVAL,
						 "'%s' stack %zu: a weight of %" PRIu64
						 " for no sample (%s)",
						 what, k + 1, c[ne + e], DAMAGED);
				goto out;
			}
			if (__builtin_add_overflow(sum[e], c[e], &sum[e]) ||
			    __builtin_add_overflow(wsum[e], c[ne + e], &wsum[e])) {
				r = tally_seterr(
					-EINVAL,
					"'%s' stack %zu: the counts or weights add up past %" PRIu64
					" (%s)",
					what, k + 1, UINT64_MAX, DAMAGED);
				goto out;
			}
		}
	}

	/* the frame numbers: each of a frame */
	if (!bs_read(b, refs, nr * sizeof(uint32_t))) {
		r = bin_short(b, what, "frame numbers");
		goto out;
	}
	/* ... and each frame of a stack (as the text can only give) */
	unsigned char *used = xcalloc(nf + 1, 1);
	for (size_t i = 0, k = 0; i < nr && !r; i++) {
		if (refs[i] < nf) {
			used[refs[i]] = 1;
			continue;
		}
		while (st[k].first + st[k].len <= i)
			k++;
		r = tally_seterr(-EINVAL,
				 "'%s' stack %zu: frame number %" PRIu32 " is past the %" PRIu64
				 " frames (numbered from 0) (%s)",
				 what, k + 1, refs[i], nf, DAMAGED);
	}
	for (size_t i = 0; i < nf && !r; i++)
		if (!used[i])
			r = tally_seterr(-EINVAL, "'%s' frame %zu: no stack has it (%s)", what,
					 i + 1, DAMAGED);
	free(used);
	if (r)
		goto out;
	unsigned char more;
	if (bs_read(b, &more, 1)) {
		r = tally_seterr(
			-EINVAL,
			"'%s' goes on past the size its header says (the file is damaged: record again)",
			what);
		goto out;
	}
	if (b->err) {
		r = bin_short(b, what, "end");
		goto out;
	}

	r = stacks_check_sums(m, what, sum, wsum);
	if (r)
		goto out;
	if (direct) {
		s->nframe_tab = nf;
		s->nstacks = ns;
		s->nstack_frames = nr;
		/* the frame index (and its cache) knew none of them: made anew
		 * by the first lookup, should another part follow */
		free(s->fslot);
		free(s->recent);
		s->fslot = NULL;
		s->recent = NULL;
		s->fmask = 0;
		goto out;
	}
	/* into a set with stacks of its own, or another database's images, label
	 * sets and events: each frame numbered there, each stack added */
	map = xmalloc((nf + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < nf; i++)
		map[i] = tally_stackset_frame(s, m->img ? m->img[fr[i].image] : fr[i].image,
					      fr[i].offset);
	uint32_t *ids = NULL;
	size_t aids = 0;
	uint64_t *mc = xcalloc(2 * sne + 1, sizeof(uint64_t));
	for (size_t k = 0; k < ns; k++) {
		GROW(ids, aids, st[k].len);
		for (uint32_t f = 0; f < st[k].len; f++)
			ids[f] = map[refs[st[k].first + f]];
		stacks_map_counts(m, sne, &vals[k * 2 * ne], mc);
		tally_stackset_add(s, st[k].pid, st[k].label, ids, st[k].len, mc);
	}
	free(ids);
	free(mc);
out:
	if (!direct) {
		free(fr);
		free(st);
		free(vals);
		free(refs);
	}
	free(map);
	free(sum);
	free(wsum);
	return r;
}

