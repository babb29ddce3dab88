/* The call stacks of a database (docs/format.md, "stacks"): held with each
 * distinct frame once and the stacks as runs of frame numbers (a frame is 4
 * bytes a use, not 16); the stacks file read as a stream, in one pass, with the
 * same checks as every other file; and the stacks left unread by
 * TALLY_DB_STACKS_LATER until a view asks for them, so that what needs no
 * stacks never pays for millions of them. */
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

#define SWAP(a, b)                          \
	do {                                \
		__typeof__(a) swap_ = (a); \
		(a) = (b);                  \
		(b) = swap_;                \
	} while (0)

/* ---- the set ---- */

static uint64_t frame_hash(uint32_t image, uint64_t offset)
{
	return tally_hash_u64(offset ^ ((uint64_t)image << 40) ^ ((uint64_t)image >> 24));
}

static void frame_rehash(struct stackset *s, size_t cap)
{
	struct frame_slot *ns = xcalloc(cap, sizeof(*ns));
	size_t mask = cap - 1;
	for (size_t i = 0; i < s->nframe_tab; i++) {
		const struct tally_frame *f = &s->frame_tab[i];
		size_t k = frame_hash(f->image, f->offset) & mask;
		while (ns[k].id1)
			k = (k + 1) & mask;
		ns[k] = (struct frame_slot){ f->offset, f->image, (uint32_t)i + 1 };
	}
	free(s->fslot);
	s->fslot = ns;
	s->fmask = mask;
}

#define RECENT 65536 /* 1 MiB: within a core's L2, where the index (32 MiB at 700,000 frames) is not */

static inline uint32_t frame_number(struct stackset *s, uint32_t image, uint64_t offset)
{
	uint64_t h = frame_hash(image, offset);
	struct frame_slot *r = s->recent ? &s->recent[(h >> 40) & (RECENT - 1)] : NULL;
	if (r && r->id1 && r->offset == offset && r->image == image)
		return r->id1 - 1;
	if ((s->nframe_tab + 1) * 2 > s->fmask + 1 || !s->fslot || !r) {
		if ((s->nframe_tab + 1) * 2 > s->fmask + 1 || !s->fslot) {
			/* (made anew: room for the frames already there, which the
			 * binary reader may have taken in without it) */
			size_t cap = s->fslot ? (s->fmask + 1) * 2 : 1024;
			while (cap < (s->nframe_tab + 1) * 2)
				cap *= 2;
			frame_rehash(s, cap);
		}
		if (!s->recent)
			s->recent = xcalloc(RECENT, sizeof(*s->recent));
		r = &s->recent[(h >> 40) & (RECENT - 1)];
	}
	size_t k = h & s->fmask;
	for (;; k = (k + 1) & s->fmask) {
		struct frame_slot *sl = &s->fslot[k];
		if (!sl->id1)
			break;
		if (sl->offset == offset && sl->image == image) {
			*r = *sl;
			return sl->id1 - 1;
		}
	}
	GROW(s->frame_tab, s->aframe_tab, s->nframe_tab + 1);
	s->frame_tab[s->nframe_tab] = (struct tally_frame){ image, offset };
	s->fslot[k] = (struct frame_slot){ offset, image, (uint32_t)++s->nframe_tab };
	*r = s->fslot[k];
	return (uint32_t)s->nframe_tab - 1;
}

uint32_t tally_stackset_frame(struct stackset *s, uint32_t image, uint64_t offset)
{
	return frame_number(s, image, offset);
}

static uint64_t stack_hash(int32_t pid, uint32_t label, const uint32_t *f, uint32_t n)
{
	return tally_hash_bytes(f, n * sizeof(*f),
				(((uint64_t)(uint32_t)pid << 32) | n) ^
					((uint64_t)label * 0x9e3779b97f4a7c15ULL));
}

/* The stacks' index: a slot is the low 32 bits of the stack's hash (where
 * it goes, and what a lookup compares before it reads the stack) above the
 * stack's number + 1. Growing it reads the hashes from the slots; built anew
 * (no slots yet), it hashes every stack. */
static void stack_rehash(struct stackset *s, size_t cap)
{
	uint64_t *ns = xcalloc(cap, sizeof(*ns));
	size_t mask = cap - 1;
	if (s->sslot) {
		for (size_t j = 0; j <= s->smask; j++) {
			uint64_t v = s->sslot[j];
			if (!v)
				continue;
			size_t k = (v >> 32) & mask;
			while (ns[k])
				k = (k + 1) & mask;
			ns[k] = v;
		}
	} else {
		for (size_t i = 0; i < s->nstacks; i++) {
			const struct tally_db_stack *st = &s->stacks[i];
			uint32_t h = (uint32_t)stack_hash(st->pid, st->label,
							  &s->stack_frames[st->first], st->len);
			size_t k = h & mask;
			while (ns[k])
				k = (k + 1) & mask;
			ns[k] = (uint64_t)h << 32 | (uint32_t)(i + 1);
		}
	}
	free(s->sslot);
	s->sslot = ns;
	s->smask = mask;
}

void tally_stackset_add(struct stackset *s, int32_t pid, uint32_t label, const uint32_t *frames,
			uint32_t n, const uint64_t *counts)
{
	size_t ne = 2 * (size_t)s->nevents; /* the counts, then the weights */
	size_t k = 0;
	uint32_t h = 0;
	if (s->dedup) {
		if ((s->nstacks + 1) * 2 > s->smask + 1 || !s->sslot)
			stack_rehash(s, s->sslot ? (s->smask + 1) * 2 : 1024);
		h = (uint32_t)stack_hash(pid, label, frames, n);
		for (k = h & s->smask; s->sslot[k]; k = (k + 1) & s->smask) {
			if ((uint32_t)(s->sslot[k] >> 32) != h)
				continue;
			uint32_t i = (uint32_t)s->sslot[k] - 1;
			const struct tally_db_stack *st = &s->stacks[i];
			if (st->pid == pid && st->label == label && st->len == n &&
			    !memcmp(&s->stack_frames[st->first], frames, n * sizeof(*frames))) {
				for (size_t e = 0; e < ne; e++)
					s->counts[i * ne + e] += counts[e];
				return;
			}
		}
	}
	if (s->nstack_frames + n > s->astack_frames)
		GROW(s->stack_frames, s->astack_frames, s->nstack_frames + n);
	memcpy(&s->stack_frames[s->nstack_frames], frames, n * sizeof(*frames));
	if (s->nstacks == s->astacks)
		GROW(s->stacks, s->astacks, s->nstacks + 1);
	s->stacks[s->nstacks] =
		(struct tally_db_stack){ (uint32_t)s->nstack_frames, n, pid, label };
	s->nstack_frames += n;
	if ((s->nstacks + 1) * ne > s->acounts)
		GROW(s->counts, s->acounts, (s->nstacks + 1) * ne);
	memcpy(&s->counts[s->nstacks * ne], counts, ne * sizeof(*counts));
	s->nstacks++;
	if (s->dedup)
		s->sslot[k] = (uint64_t)h << 32 | (uint32_t)s->nstacks;
}

void tally_stackset_release(struct stackset *s)
{
	free(s->frame_tab);
	free(s->fslot);
	free(s->recent);
	free(s->stack_frames);
	free(s->stacks);
	free(s->counts);
	free(s->sslot);
	int ne = s->nevents;
	bool dedup = s->dedup;
	memset(s, 0, sizeof(*s));
	s->nevents = ne;
	s->dedup = dedup;
}

void tally_stackset_to_db(struct stackset *s, struct tally_db *db)
{
	free(db->frame_tab);
	free(db->stack_frames);
	free(db->stacks);
	free(db->stack_counts);
	free(db->stack_weights);
	/* never NULL: readers may copy zero bytes from them */
	GROW(s->frame_tab, s->aframe_tab, 1);
	GROW(s->stack_frames, s->astack_frames, 1);
	GROW(s->stacks, s->astacks, 1);
	/* the counts and the weights apart, each stack's in place */
	size_t ne = (size_t)s->nevents;
	uint64_t *w = xcalloc(s->nstacks * ne + 1, sizeof(uint64_t));
	uint64_t *c = xcalloc(s->nstacks * ne + 1, sizeof(uint64_t));
	for (size_t i = 0; i < s->nstacks; i++) {
		memcpy(&c[i * ne], &s->counts[i * 2 * ne], ne * sizeof(uint64_t));
		memcpy(&w[i * ne], &s->counts[i * 2 * ne + ne], ne * sizeof(uint64_t));
	}
	free(s->counts);
	s->counts = c;
	s->acounts = s->nstacks * ne + 1;
	db->stack_weights = w;
	db->astack_weights = s->nstacks * ne + 1;
	db->frame_tab = s->frame_tab;
	db->nframe_tab = s->nframe_tab;
	db->aframe_tab = s->aframe_tab;
	db->stack_frames = s->stack_frames;
	db->nstack_frames = s->nstack_frames;
	db->astack_frames = s->astack_frames;
	db->stacks = s->stacks;
	db->nstacks = s->nstacks;
	db->astacks = s->astacks;
	db->stack_counts = s->counts;
	db->astack_counts = s->acounts;
	s->frame_tab = NULL;
	s->stack_frames = NULL;
	s->stacks = NULL;
	s->counts = NULL;
	tally_stackset_release(s);
}

void tally_stackset_from_db(struct stackset *s, struct tally_db *db)
{
	tally_stackset_release(s);
	s->frame_tab = db->frame_tab;
	s->nframe_tab = db->nframe_tab;
	s->aframe_tab = db->aframe_tab;
	s->stack_frames = db->stack_frames;
	s->nstack_frames = db->nstack_frames;
	s->astack_frames = db->astack_frames;
	s->stacks = db->stacks;
	s->nstacks = db->nstacks;
	s->astacks = db->astacks;
	/* counts then weights, per stack: the weights of a database without
	 * them are its counts x period-mean */
	size_t ne = (size_t)s->nevents;
	s->counts = xcalloc(2 * s->nstacks * ne + 1, sizeof(uint64_t));
	s->acounts = 2 * s->nstacks * ne + 1;
	for (size_t i = 0; i < s->nstacks; i++)
		for (size_t e = 0; e < ne; e++) {
			uint64_t c = db->stack_counts[i * ne + e], w;
			if (db->stack_weights)
				w = db->stack_weights[i * ne + e];
			else
				w = tally_mul_sat(c, tally_db_mean_period(db, (int)e));
			s->counts[i * 2 * ne + e] = c;
			s->counts[i * 2 * ne + ne + e] = w;
		}
	free(db->stack_counts);
	free(db->stack_weights);
	db->frame_tab = NULL;
	db->stack_frames = NULL;
	db->stacks = NULL;
	db->stack_counts = NULL;
	db->stack_weights = NULL;
	db->nframe_tab = db->aframe_tab = db->nstack_frames = db->astack_frames = 0;
	db->nstacks = db->astacks = db->astack_counts = db->astack_weights = 0;
	size_t cap = 1024;
	while (cap < (s->nframe_tab + 1) * 2)
		cap *= 2;
	frame_rehash(s, cap);
	if (s->dedup) {
		for (cap = 1024; cap < (s->nstacks + 1) * 2;)
			cap *= 2;
		stack_rehash(s, cap);
	}
}

/* ---- the stacks file ---- */

/* As read.c's parse_dec and parse_hex: a decimal that fits 64 bits; 1 to 16
 * hex digits (a 17th is an error). */
static inline bool dec(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	unsigned d;
	if ((d = (unsigned)(unsigned char)*s - '0') > 9)
		return false;
	do {
		/* UINT64_MAX is 18446744073709551615 */
		if (v >= 1844674407370955161ULL && (v > 1844674407370955161ULL || d > 5))
			return false;
		v = v * 10 + d;
		s++;
	} while ((d = (unsigned)(unsigned char)*s - '0') <= 9);
	*p = s;
	*out = v;
	return true;
}

/* hex digit values + 1; 0 for anything that is not a hex digit */
static const unsigned char hexval1[256] = {
	['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
	['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
	['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16, ['A'] = 11, ['B'] = 12,
	['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

static inline bool hex(const char **p, uint64_t *out)
{
	const unsigned char *s = (const unsigned char *)*p, *start = s;
	uint64_t v = 0;
	unsigned d;
	/* the digits counted once they end (a line ends in a NUL, never a digit);
	 * past 16 the value has lost its first ones, and is refused */
	while ((d = hexval1[*s])) {
		v = (v << 4) | (d - 1);
		s++;
	}
	if (s == start || s - start > 16)
		return false;
	*p = (const char *)s;
	*out = v;
	return true;
}

struct sparser {
	struct stackset *s;
	const struct stacks_map *m;
	bool skip;          /* in a line too long to be a stack: up to its end */
	const char *what;
	size_t ln;          /* lines so far */
	int bad;            /* the first line that is not a stack: its error (msg), 0: none */
	char msg[512];
	size_t nul;         /* the line of a NUL byte (binary data), 0: none */
	uint64_t *sum;      /* per column of the file */
	uint64_t *wsum;     /* ... of the weights */
	uint64_t *c;        /* the line's counts, per column, then its weights */
	uint64_t *mc;       /* ... per event of s (counts, then weights) */
	uint32_t *ids;
	size_t aids;
	struct tally_frame *fr;
	size_t afr;
	/* the last stack's frames and their numbers (npfr of them): the callers
	 * a stack shares with the one before it, root first, need no lookup */
	uint32_t *pids;
	size_t apids;
	struct tally_frame *pfr;
	size_t apfr, npfr;
	/* the stack read last, added to the set once the next is read (its leaf,
	 * seldom seen before, fetched from the index meanwhile) */
	bool queued;
	struct tally_frame *qfr;
	size_t aqfr;
	uint32_t qn, qlabel;
	int32_t qpid;
	uint64_t *qc; /* its counts then weights, per event of s */
};

/* The first error of a line, kept until the whole file is known to be text. */
static bool line_error(struct sparser *P, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static bool line_error(struct sparser *P, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(P->msg, sizeof(P->msg), fmt, ap);
	va_end(ap);
	P->bad = -EINVAL;
	return false;
}

static bool not_a_stack(struct sparser *P)
{
	return line_error(P, "'%s' line %zu: expected '%s PID %sIMAGE:OFFSET...' (%s)", P->what,
			  P->ln, P->m->weighted ? "COUNT:WEIGHT" : "COUNT",
			  P->m->labelled ? "LABEL " : "", DAMAGED);
}

/* The stack read last into the set, if any: its frames' numbers (the callers
 * it shares with the stack before it: that stack's), then the stack. */
static void add_queued(struct sparser *P)
{
	if (!P->queued)
		return;
	P->queued = false;
	uint32_t n = P->qn;
	if (n > P->aids)
		GROW(P->ids, P->aids, (size_t)n);
	uint32_t i = n;
	for (size_t j = P->npfr; i > 0 && j > 0 && P->qfr[i - 1].offset == P->pfr[j - 1].offset &&
				 P->qfr[i - 1].image == P->pfr[j - 1].image;
	     i--, j--)
		P->ids[i - 1] = P->pids[j - 1];
	while (i-- > 0)
		P->ids[i] = frame_number(P->s, P->qfr[i].image, P->qfr[i].offset);
	/* this stack's frames are the last one's for the next (swapped, not copied) */
	SWAP(P->ids, P->pids);
	SWAP(P->aids, P->apids);
	SWAP(P->qfr, P->pfr);
	SWAP(P->aqfr, P->apfr);
	P->npfr = n;
	tally_stackset_add(P->s, P->qpid, P->qlabel, P->pids, n, P->qc);
}

/* A stack's counts and weights as the file gives them (c: its events'
 * counts, then their weights) as the set's sne events take them (mc: the
 * same halves), through m's event map. */
void stacks_map_counts(const struct stacks_map *m, size_t sne, const uint64_t *c, uint64_t *mc)
{
	size_t ne = (size_t)m->nevents;
	memset(mc, 0, 2 * sne * sizeof(uint64_t));
	for (size_t e = 0; e < ne; e++) {
		int to = m->col ? m->col[e] : (int)e;
		if (to >= 0 && (size_t)to < sne) {
			mc[to] = c[e];
			mc[sne + (size_t)to] = c[ne + e];
		}
	}
}

/* Every sample has a stack: the stacks' counts (sum) must add up to the
 * session's samples, and their weights (wsum; NULL: not weighed) to its
 * weight-total when it has one. 0, or the error. */
int stacks_check_sums(const struct stacks_map *m, const char *what, const uint64_t *sum,
		      const uint64_t *wsum)
{
	for (int e = 0; e < m->nevents; e++)
		if (sum[e] != m->samples[e])
			return tally_seterr(-EINVAL,
					    "'%s': its stacks hold %" PRIu64
					    " '%s' samples but the session counted %" PRIu64
					    " (the file is truncated or damaged: record again)",
					    what, sum[e], m->events[e], m->samples[e]);
	for (int e = 0; e < m->nevents && wsum && m->wtotals; e++)
		if (wsum[e] != m->wtotals[e])
			return tally_seterr(-EINVAL,
					    "'%s': its stacks weigh %" PRIu64
					    " of '%s' but the session's weight-total is %" PRIu64
					    " (the file is truncated or damaged: record again)",
					    what, wsum[e], m->events[e], m->wtotals[e]);
	return 0;
}

/* One line (NUL-terminated in place of its newline); false when it is not a
 * stack (P->bad and P->msg say why). */
static bool parse_line(struct sparser *P, const char *line)
{
	const struct stacks_map *m = P->m;
	if (!*line || line[0] == '#')
		return true;
	const char *p = line;
	size_t fne = (size_t)m->nevents;
	for (int e = 0; e < m->nevents; e++) {
		if (e && *p++ != ',')
			return not_a_stack(P);
		if (!dec(&p, &P->c[e]))
			return not_a_stack(P);
		if (m->weighted) {
			if (*p++ != ':' || !dec(&p, &P->c[fne + (size_t)e]))
				return not_a_stack(P);
			if (!P->c[e] && P->c[fne + (size_t)e])
				return line_error(P,
						  "'%s' line %zu: a weight of %" PRIu64
						  " for no sample (%s)",
						  P->what, P->ln, P->c[fne + (size_t)e], DAMAGED);
		} else {
			P->c[fne + (size_t)e] = tally_mul_sat(P->c[e], m->mean ? m->mean[e] : 1);
		}
	}
	if (*p++ != ' ')
		return not_a_stack(P);
	uint64_t pid;
	if (!dec(&p, &pid))
		return not_a_stack(P);
	if (pid > INT32_MAX)
		return line_error(
			P, "'%s' line %zu: pid %" PRIu64 " is not a process id (0 to %d) (%s)",
			P->what, P->ln, pid, INT32_MAX, DAMAGED);
	uint64_t label = 0;
	if (m->labelled) {
		if (*p++ != ' ' || !dec(&p, &label))
			return not_a_stack(P);
		if (label > m->nlabels)
			return line_error(
				P, "'%s' line %zu: label set %" PRIu64 " is not in 'labels' (%s)",
				P->what, P->ln, label, DAMAGED);
	}
	if (m->lab) /* a version 1 file's stacks are of set 0, mapped too */
		label = m->lab[label];
	/* the frames first, the index once the next line is read: the leaf,
	 * the one frame seldom seen before, is fetched from memory meanwhile */
	uint32_t n = 0;
	while (*p == ' ') {
		p++;
		uint64_t img, off;
		if (!dec(&p, &img) || *p++ != ':' || !hex(&p, &off) || img >= m->nimages ||
		    n == UINT32_MAX)
			return not_a_stack(P);
		if (n == P->afr)
			GROW(P->fr, P->afr, (size_t)n + 1);
		P->fr[n] = (struct tally_frame){ m->img ? m->img[img] : (uint32_t)img, off };
		n++;
	}
	if (*p || !n || P->s->nstack_frames + (P->queued ? P->qn : 0) + n > UINT32_MAX)
		return not_a_stack(P);
	for (int e = 0; e < m->nevents; e++)
		if (P->c[e] > UINT64_MAX - P->sum[e] ||
		    (m->weighted && P->c[fne + (size_t)e] > UINT64_MAX - P->wsum[e]))
			return line_error(P, "'%s' line %zu: the %s add up past %" PRIu64 " (%s)",
					  P->what, P->ln,
					  P->c[e] > UINT64_MAX - P->sum[e] ? "counts" : "weights",
					  UINT64_MAX, DAMAGED);
	int32_t spid = (int32_t)pid;
	if (m->merged)
		spid = m->per_pid && spid > 0 ? spid : 0;
	const uint64_t *counts = P->c;
	for (int e = 0; e < m->nevents; e++) {
		P->sum[e] += P->c[e];
		P->wsum[e] += P->c[fne + (size_t)e];
	}
	if (m->col || P->s->nevents != m->nevents) {
		stacks_map_counts(m, (size_t)P->s->nevents, P->c, P->mc);
		counts = P->mc;
	}
	/* the stack before goes into the set, this one waits for the next */
	add_queued(P);
	SWAP(P->fr, P->qfr);
	SWAP(P->afr, P->aqfr);
	P->qn = n;
	P->qpid = spid;
	P->qlabel = (uint32_t)label;
	memcpy(P->qc, counts, 2 * (size_t)P->s->nevents * sizeof(uint64_t));
	P->queued = true;
	uint64_t h = frame_hash(P->qfr[0].image, P->qfr[0].offset);
	if (P->s->recent)
		__builtin_prefetch(&P->s->recent[(h >> 40) & (RECENT - 1)]);
	if (P->s->fslot)
		__builtin_prefetch(&P->s->fslot[h & P->s->fmask]);
	return true;
}

/* The lines of buf[0..len) that end in a newline; returns the bytes used. */
static size_t parse_lines(struct sparser *P, char *buf, size_t len)
{
	char *p = buf, *end = buf + len, *nl;
	while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
		*nl = '\0';
		P->ln++;
		if (!P->bad && !P->m->none && !P->skip)
			parse_line(P, p);
		P->skip = false;
		p = nl + 1;
	}
	return (size_t)(p - buf);
}

static void parser_init(struct sparser *P, struct stackset *s, const struct stacks_map *m,
			const char *what)
{
	memset(P, 0, sizeof(*P));
	P->s = s;
	P->m = m;
	P->what = what;
	P->sum = xcalloc((size_t)m->nevents + 1, sizeof(uint64_t));
	P->wsum = xcalloc((size_t)m->nevents + 1, sizeof(uint64_t));
	P->c = xcalloc(2 * (size_t)m->nevents + 1, sizeof(uint64_t));
	P->mc = xcalloc(2 * (size_t)s->nevents + 1, sizeof(uint64_t));
	P->qc = xcalloc(2 * (size_t)s->nevents + 1, sizeof(uint64_t));
}

/* The checks in the order read.c makes them of every file: binary data, a
 * last line without its newline (partial bytes left); then a stacks file where
 * the session says there are none; then the first bad line, and the sums. */
static int parser_finish(struct sparser *P, size_t partial)
{
	add_queued(P);
	int r = 0;
	const char *what = P->what;
	if (P->nul)
		r = tally_seterr(-EINVAL,
				 "'%s' line %zu: binary data (a NUL byte) in a text file (%s)",
				 what, P->nul, DAMAGED);
	else if (partial)
		r = tally_seterr(-EINVAL,
				 "'%s' line %zu: the file ends in the middle of the line (%s)",
				 what, P->ln + 1, DAMAGED);
	else if (P->m->none)
		r = tally_seterr(
			-EINVAL,
			"'%s' holds call stacks, but the session says 'call-graph: none' (%s)",
			what, DAMAGED);
	else if (P->bad)
		r = tally_seterr(P->bad, "%s", P->msg);
	if (!r)
		r = stacks_check_sums(P->m, what, P->sum, P->m->weighted ? P->wsum : NULL);
	free(P->sum);
	free(P->wsum);
	free(P->c);
	free(P->mc);
	free(P->ids);
	free(P->fr);
	free(P->pids);
	free(P->pfr);
	free(P->qfr);
	free(P->qc);
	return r;
}

/* The line of the first NUL byte of buf[0..n), lines before counted in ln;
 * 0 when there is none. */
static size_t nul_line(const char *buf, size_t n, size_t ln)
{
	const char *nul = memchr(buf, '\0', n);
	if (!nul)
		return 0;
	for (const char *c = buf; (c = memchr(c, '\n', (size_t)(nul - c))); c++)
		ln++;
	return ln + 1;
}

int tally_stacks_read_fd(struct stackset *s, int fd, const char *what, const struct stacks_map *m)
{
	/* binary (format version 4) or text: the first bytes say. Read from
	 * the file's start whatever the descriptor's offset (a merge reads the
	 * same open file as the database it came from: pread, never read) */
	unsigned char head[BIN_HEAD];
	struct bsrc b = { .fd = fd };
	size_t nh = 0;
	for (ssize_t n; nh < BIN_HEAD; nh += (size_t)n)
		if ((n = pread(fd, head + nh, BIN_HEAD - nh, (off_t)nh)) <= 0) {
			if (n < 0 && errno == EINTR) {
				n = 0;
				continue;
			}
			if (n < 0)
				return tally_seterr(-errno, "cannot read '%s': %s", what,
						    strerror(errno));
			break;
		}
	if (nh >= 8 && !memcmp(head, BIN_MAGIC, 8)) {
		struct stat st;
		if (fstat(fd, &st))
			return tally_seterr(-errno, "cannot read '%s': %s", what, strerror(errno));
		b.pos = nh;
		return stacks_read_binary(s, &b, head, nh, what, m, (uint64_t)st.st_size);
	}
	struct sparser P;
	parser_init(&P, s, m, what);
	size_t cap = 1 << 20, have = 0;
	uint64_t total = 0;
	char *buf = xmalloc(cap + 1);
	int r = 0;
	/* the text's first bytes, read above, as if read in the loop */
	size_t first = nh;
	memcpy(buf, head, nh);
	for (;;) {
		if (have == cap && cap >= LONGEST) {
			/* no stack is that long (127 frames is the usual limit, 65535 the
			 * kernel's): the line is not one, and is not kept in memory */
			if (!P.bad) {
				P.ln++;
				not_a_stack(&P);
				P.ln--;
			}
			P.skip = true;
			have = 0;
		} else if (have == cap) {
			cap *= 2; /* a line longer than the buffer */
			buf = xrealloc(buf, cap + 1);
		}
		ssize_t n =
			first ? (ssize_t)first : pread(fd, buf + have, cap - have, (off_t)total);
		first = 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = tally_seterr(-errno, "cannot read '%s': %s", what, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		if ((total += (uint64_t)n) > TALLY_DB_FILE_MAX) {
			char mx[32];
			tally_format_size(TALLY_DB_FILE_MAX, mx, sizeof(mx));
			r = tally_seterr(-EFBIG, "'%s' is larger than %s (%s)", what, mx, DAMAGED);
			break;
		}
		/* binary data: said before anything else, so the rest need not be read
		 * (what is in the buffer before the new bytes holds no newline) */
		if ((P.nul = nul_line(buf + have, (size_t)n, P.ln))) {
			have = 0;
			break;
		}
		have += (size_t)n;
		/* what is left is the start of a line that goes on in the next read */
		size_t used = parse_lines(&P, buf, have);
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	free(buf);
	int f = parser_finish(&P, r ? 0 : have + P.skip);
	return r ? r : f;
}

/* What a sample of each event of db weighs when its file has no weights
 * (caller frees). */
static uint64_t *db_means(const struct tally_db *db)
{
	uint64_t *m = xcalloc((size_t)db->nevents + 1, sizeof(uint64_t));
	for (int e = 0; e < db->nevents; e++)
		m[e] = tally_db_mean_period(db, e);
	return m;
}

/* A format 3 database's weight-total per event (caller frees), or NULL. */
static uint64_t *db_wtotals(const struct tally_db *db)
{
	uint64_t *w = xcalloc((size_t)db->nevents + 1, sizeof(uint64_t));
	if (tally_db_weighted(db) && tally_db_weight_totals(db, w) == 0)
		return w;
	free(w);
	return NULL;
}

int tally_db_parse_stacks(struct tally_db *db, const char *text, size_t len, const char *what)
{
	struct stackset s = { .nevents = db->nevents };
	tally_stackset_from_db(&s, db);
	uint64_t *mean = db_means(db), *wt = db_wtotals(db);
	struct stacks_map m = { db->nevents,
				db->events,
				db->samples,
				NULL,
				db->nimages,
				NULL,
				false,
				false,
				!db->has_stacks,
				tally_db_labelled(db),
				db->nlabels,
				NULL,
				tally_db_weighted(db),
				mean,
				wt,
				tally_db_binary_stacks(db) };
	int r;
	if (len >= 8 && !memcmp(text, BIN_MAGIC, 8)) {
		struct bsrc b = { .fd = -1,
				  .mem = (const unsigned char *)text,
				  .len = len,
				  .pos = len < BIN_HEAD ? len : BIN_HEAD };
		r = stacks_read_binary(&s, &b, (const unsigned char *)text, b.pos, what, &m, len);
	} else {
		struct sparser P;
		parser_init(&P, &s, &m, what);
		size_t used = len;
		if (!(P.nul = nul_line(text, len, 0))) {
			char *copy = xmalloc(len + 1);
			memcpy(copy, text, len);
			used = parse_lines(&P, copy, len);
			free(copy);
		}
		r = parser_finish(&P, len - used);
	}
	tally_stackset_to_db(&s, db);
	if (!db->has_weights) {
		free(db->stack_weights);
		db->stack_weights = NULL;
		db->astack_weights = 0;
	}
	free(mean);
	free(wt);
	return r;
}

/* ---- stacks read later ---- */

static void part_release(struct lazy_part *p)
{
	if (p->fd >= 0)
		close(p->fd);
	free(p->what);
	free(p->msg);
	for (int e = 0; p->events && e < p->nevents; e++)
		free(p->events[e]);
	free(p->events);
	free(p->samples);
	free(p->col);
	free(p->img);
	free(p->lab);
	free(p->mean);
	free(p->wtotals);
	free(p->mframes);
	free(p->mstacks);
	free(p->mcounts);
}

void lazy_free(struct tally_db_lazy *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nparts; i++)
		part_release(&l->parts[i]);
	free(l->parts);
	free(l->msg);
	free(l);
}

static struct lazy_part *new_part(struct tally_db_lazy **into)
{
	if (!*into)
		*into = xcalloc(1, sizeof(**into));
	struct tally_db_lazy *l = *into;
	GROW(l->parts, l->aparts, l->nparts + 1);
	struct lazy_part *p = &l->parts[l->nparts++];
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	return p;
}

static char **copy_names(char *const *v, int n)
{
	char **c = xcalloc((size_t)n + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		c[i] = xstrdup(v[i]);
	return c;
}

int tally_stacks_open(struct tally_db *db, unsigned flags)
{
	struct strbuf path = STRBUF_INIT;
	strbuf_addf(&path, "%s/stacks", db->path);
	/* as read.c reads every file: never through a link, never a FIFO or a device */
	int fd = tally_open_regular(AT_FDCWD, path.buf, 0, TALLY_DB_FILE_MAX, NULL);
	int r = 0;
	if (fd == -ENOENT && !db->has_stacks) {
		strbuf_release(&path);
		return 0; /* no stacks, none expected */
	}
	/* A daemon writes its next flush over the older copy of an epoch in
	 * place (docs/daemon.md, "Two copies in turn"), but never one whose
	 * 'stacks' a reader share-locks: held while the file is read, or kept
	 * to read later. Where the lock cannot be had (the file is already a
	 * spare's, locked alone: the epoch was swapped since it was opened), the
	 * stacks are read at once, and the epoch's reader sees the swap and
	 * reads it again (epoch.c). */
	if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0)
		flags &= ~TALLY_DB_STACKS_LATER;
	struct lazy_part *p = new_part(&db->lazy);
	p->fd = fd < 0 ? -1 : fd;
	p->what = strbuf_detach(&path);
	if (fd < 0) {
		if (fd == -ENOENT)
			p->err = tally_seterr(
				-ENOENT,
				"'%s/stacks' is missing though the session recorded call graphs (%s)",
				db->path, DAMAGED);
		else if (fd == -ELOOP || fd == -EINVAL || fd == -EISDIR)
			p->err = tally_seterr(
				fd,
				"%s (a database holds only the regular files tally wrote: record it again)",
				tally_errmsg());
		else if (fd == -EFBIG)
			p->err = tally_seterr(fd, "%s (%s)", tally_errmsg(), DAMAGED);
		else
			p->err = fd;
		p->msg = xstrdup(tally_errmsg());
	}
	p->nevents = db->nevents;
	p->events = copy_names(db->events, db->nevents);
	p->samples = xcalloc((size_t)db->nevents + 1, sizeof(uint64_t));
	memcpy(p->samples, db->samples, (size_t)db->nevents * sizeof(uint64_t));
	p->nimages = db->nimages;
	p->none = !db->has_stacks;
	p->labelled = tally_db_labelled(db);
	p->nlabels = db->nlabels;
	p->weighted = tally_db_weighted(db);
	p->binary = tally_db_binary_stacks(db);
	p->mean = db_means(db);
	p->wtotals = db_wtotals(db);
	if (!(flags & TALLY_DB_STACKS_LATER))
		r = tally_db_load_stacks(db);
	return r;
}

void lazy_take(struct tally_db_lazy **into, const struct tally_db *src, const uint32_t *img,
	       const uint32_t *lab, const int *col, int nevents, bool per_pid)
{
	size_t ne = (size_t)nevents, sne = (size_t)src->nevents;
	for (size_t i = 0; src->lazy && i < src->lazy->nparts; i++) {
		const struct lazy_part *q = &src->lazy->parts[i];
		if (!q->what) {
			/* stacks in memory of a merge that src is */
			uint64_t *c = xcalloc(2 * ne + 1, sizeof(uint64_t));
			struct tally_frame *fr = NULL;
			size_t afr = 0;
			for (size_t k = 0; k < q->nmstacks; k++) {
				const struct tally_db_stack *st = &q->mstacks[k];
				GROW(fr, afr, st->len);
				for (uint32_t f = 0; f < st->len; f++)
					fr[f] = (struct tally_frame){
						img[q->mframes[st->first + f].image],
						q->mframes[st->first + f].offset
					};
				memset(c, 0, 2 * ne * sizeof(uint64_t));
				for (size_t e = 0; e < sne; e++)
					if (col[e] >= 0) {
						c[col[e]] = q->mcounts[k * 2 * sne + e];
						c[ne + (size_t)col[e]] =
							q->mcounts[k * 2 * sne + sne + e];
					}
				lazy_stack(into, per_pid && st->pid > 0 ? st->pid : 0,
					   lab[st->label], fr, st->len, c, nevents);
			}
			free(fr);
			free(c);
			continue;
		}
		struct lazy_part *p = new_part(into);
		p->what = xstrdup(q->what);
		p->err = q->err;
		p->msg = q->msg ? xstrdup(q->msg) : NULL;
		if (q->fd >= 0 && (p->fd = fcntl(q->fd, F_DUPFD_CLOEXEC, 0)) < 0 && !p->err) {
			p->err = tally_seterr(-errno, "cannot read '%s': %s", q->what,
					      strerror(errno));
			p->msg = xstrdup(tally_errmsg());
		}
		p->nevents = q->nevents;
		p->events = copy_names(q->events, q->nevents);
		p->samples = xcalloc((size_t)q->nevents + 1, sizeof(uint64_t));
		memcpy(p->samples, q->samples, (size_t)q->nevents * sizeof(uint64_t));
		p->col = xcalloc((size_t)q->nevents + 1, sizeof(int));
		for (int e = 0; e < q->nevents; e++) {
			int c = q->col ? q->col[e] : e;
			p->col[e] = c >= 0 ? col[c] : -1;
		}
		p->nimages = q->nimages;
		p->img = xcalloc(q->nimages + 1, sizeof(uint32_t));
		for (size_t k = 0; k < q->nimages; k++)
			p->img[k] = img[q->img ? q->img[k] : k];
		p->merged = true;
		p->per_pid = q->merged ? q->per_pid && per_pid : per_pid;
		p->none = q->none;
		p->labelled = q->labelled;
		p->nlabels = q->nlabels;
		p->lab = xcalloc(q->nlabels + 1, sizeof(uint32_t));
		for (size_t k = 0; k <= q->nlabels; k++)
			p->lab[k] = lab[q->lab ? q->lab[k] : k];
		p->weighted = q->weighted;
		p->binary = q->binary;
		p->mean = xcalloc((size_t)q->nevents + 1, sizeof(uint64_t));
		if (q->mean)
			memcpy(p->mean, q->mean, (size_t)q->nevents * sizeof(uint64_t));
		if (q->wtotals) {
			p->wtotals = xcalloc((size_t)q->nevents + 1, sizeof(uint64_t));
			memcpy(p->wtotals, q->wtotals, (size_t)q->nevents * sizeof(uint64_t));
		}
	}
}

void lazy_stack(struct tally_db_lazy **into, int32_t pid, uint32_t label,
		const struct tally_frame *frames, uint32_t n, const uint64_t *counts, int nevents)
{
	struct tally_db_lazy *l = *into;
	struct lazy_part *p = l && l->nparts && !l->parts[l->nparts - 1].what
				      ? &l->parts[l->nparts - 1]
				      : new_part(into);
	size_t ne = 2 * (size_t)nevents; /* counts, then weights */
	GROW(p->mframes, p->amframes, p->nmframes + n);
	memcpy(&p->mframes[p->nmframes], frames, n * sizeof(*frames));
	GROW(p->mstacks, p->amstacks, p->nmstacks + 1);
	p->mstacks[p->nmstacks] = (struct tally_db_stack){ (uint32_t)p->nmframes, n, pid, label };
	p->nmframes += n;
	GROW(p->mcounts, p->amcounts, (p->nmstacks + 1) * ne);
	memcpy(&p->mcounts[p->nmstacks * ne], counts, ne * sizeof(uint64_t));
	p->nmstacks++;
}

int lazy_read(struct stackset *s, struct tally_db_lazy **lp)
{
	struct tally_db_lazy *l = *lp;
	if (!l)
		return 0;
	if (l->err)
		return tally_seterr(l->err, "%s", l->msg);
	int r = 0;
	for (size_t i = 0; i < l->nparts && !r; i++) {
		struct lazy_part *p = &l->parts[i];
		if (p->err) {
			r = tally_seterr(p->err, "%s", p->msg);
		} else if (p->what) {
			struct stacks_map m = { p->nevents,  p->events,   p->samples, p->col,
						p->nimages,  p->img,      p->merged,  p->per_pid,
						p->none,     p->labelled, p->nlabels, p->lab,
						p->weighted, p->mean,     p->wtotals, p->binary };
			r = tally_stacks_read_fd(s, p->fd, p->what, &m);
		} else {
			uint32_t *ids = NULL;
			size_t aids = 0;
			for (size_t k = 0; k < p->nmstacks; k++) {
				const struct tally_db_stack *st = &p->mstacks[k];
				GROW(ids, aids, st->len);
				for (uint32_t f = 0; f < st->len; f++)
					ids[f] = tally_stackset_frame(
						s, p->mframes[st->first + f].image,
						p->mframes[st->first + f].offset);
				tally_stackset_add(s, st->pid, st->label, ids, st->len,
						   &p->mcounts[k * 2 * (size_t)s->nevents]);
			}
			free(ids);
		}
	}
	if (r) {
		for (size_t i = 0; i < l->nparts; i++)
			part_release(&l->parts[i]);
		l->nparts = 0;
		l->err = r;
		l->msg = xstrdup(tally_errmsg());
		return r;
	}
	lazy_free(l);
	*lp = NULL;
	return 0;
}

int tally_db_load_stacks(struct tally_db *db)
{
	struct tally_db_lazy *l = db->lazy;
	if (!l)
		return 0;
	if (l->err)
		return tally_seterr(l->err, "%s", l->msg);
	/* the stacks read are sample counts and weights: those already here are
	 * taken back to theirs first, and the whole set weighed again after */
	/* (and those already here out of wall-clock time: added again after) */
	tally_db_unwall_stacks(db);
	tally_db_unweigh_stacks(db);
	struct stackset s = { .nevents = db->nevents, .dedup = l->dedup };
	tally_stackset_from_db(&s, db);
	int r = lazy_read(&s, &db->lazy);
	if (r)
		s.nstacks = 0; /* db keeps no stacks: the views that need them fail */
	tally_stackset_to_db(&s, db);
	if (!db->has_weights) {
		/* a database without weights of its own makes them when weighed */
		free(db->stack_weights);
		db->stack_weights = NULL;
		db->astack_weights = 0;
	}
	tally_db_weigh_loaded_stacks(db);
	return r;
}
