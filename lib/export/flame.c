/* Flame graphs (see flame.h): the tree of one event's stacks, folded under a
 * percent limit, and its SVG. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/export.h"
#include "tally/flame.h"
#include "tally/view.h"

/* ---- markup text ---- */

/* Length of the character at s (1-4) as XML takes it: ASCII, or valid UTF-8
 * but XML's two non-characters U+FFFE and U+FFFF; 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	size_t n = tally_utf8_seq(s, strnlen((const char *)s, 4), true);
	if (n == 3 && s[0] == 0xef && s[1] == 0xbf && (s[2] == 0xbe || s[2] == 0xbf))
		return 0;
	return n;
}

void tally_strbuf_add_xml(struct strbuf *sb, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		switch (*p) {
		case '&': strbuf_addstr(sb, "&amp;"); p++; continue;
		case '<': strbuf_addstr(sb, "&lt;"); p++; continue;
		case '>': strbuf_addstr(sb, "&gt;"); p++; continue;
		case '"': strbuf_addstr(sb, "&quot;"); p++; continue;
		case '\'': strbuf_addstr(sb, "&#39;"); p++; continue;
		default: break;
		}
		if (*p < 0x20 && *p != '\t' && *p != '\n') {
			p++;
			continue;
		}
		size_t n = utf8_len(p);
		if (!n) {
			strbuf_addstr(sb, "\xef\xbf\xbd");
			p++;
			continue;
		}
		strbuf_add(sb, p, n);
		p += n;
	}
}

/* ---- the tree ---- */

/* The stacks are grouped level by level (a most-significant-digit radix sort
 * on each stack's functions from the graph's bottom, in name order): a group
 * is a frame, its stacks that end there are its self samples, and only a group
 * that stays a frame is split further. Groups under the limit fold at once, so
 * the work is the frames of the stacks down to where they fold (linear, no
 * sorting of the stacks), and the memory a few words a stack. */
struct build {
	const struct tally_cg *cg;
	struct tally_flame *fl;
	uint32_t *order;  /* stack numbers, grouped */
	uint32_t *tmp;    /* as many, to regroup into */
	uint32_t *key;    /* per stack: its key at the level being grouped */
	uint32_t *rank;   /* per function: its place in name order */
	uint32_t *cnt;    /* per key (rank + 1; 0: the stack ends): stacks, zero between uses */
	double min_count; /* frames with fewer samples fold */
};

/* Function at level d (0 = the bottom level of the graph) of stack s. */
static inline uint32_t level_func(const struct tally_cg *cg, bool inv, uint32_t s, uint32_t d)
{
	const struct tally_cg_stack *st = &cg->stacks[s];
	return cg->funcs_of[st->first + (inv ? d : st->len - 1 - d)];
}

static int cmp_func_name(const void *a, const void *b, void *ctx)
{
	const struct tally_cg *cg = ctx;
	const struct tally_cg_func *x = &cg->funcs[*(const uint32_t *)a],
				   *y = &cg->funcs[*(const uint32_t *)b];
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	if (x->image != y->image)
		return x->image < y->image ? -1 : 1;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return 0;
}

static size_t push(struct tally_flame *fl, struct tally_flame_frame f)
{
	GROW(fl->frames, fl->aframes, fl->nframes + 1);
	fl->frames[fl->nframes] = f;
	if (f.depth > fl->max_depth)
		fl->max_depth = f.depth;
	return fl->nframes++;
}

struct group {
	uint32_t key;
	size_t start, end; /* into order */
	uint64_t count;
};

/* The frames above frame `at` (depth d), from the stacks order[i..j) that go
 * through it: the stacks that end at it are its self samples, the others
 * group by their function at level d, in name order. */
static void grow_above(struct build *B, size_t at, size_t i, size_t j, uint32_t d)
{
	const struct tally_cg *cg = B->cg;
	struct tally_flame *fl = B->fl;
	bool inv = fl->inverted;
	uint64_t x = fl->frames[at].x;
	if (d == TALLY_FLAME_MAX_DEPTH) {
		/* the levels past the deepest drawn: one frame for all of them */
		uint32_t deepest = 0;
		uint64_t c = 0;
		for (size_t k = i; k < j; k++) {
			const struct tally_cg_stack *st = &cg->stacks[B->order[k]];
			if (st->len > d) {
				c += st->count;
				if (st->len - d > deepest)
					deepest = st->len - d;
			}
		}
		if (c) {
			fl->frames[at].self = fl->frames[at].count - c;
			push(fl, (struct tally_flame_frame){ TALLY_FLAME_DEEP, d + 1, x, c, c,
							     deepest });
		} else {
			fl->frames[at].self = fl->frames[at].count;
		}
		return;
	}
	if (j - i == 1) {
		/* one stack: a column of frames up to its end (all as big as this one) */
		const struct tally_cg_stack *st = &cg->stacks[B->order[i]];
		uint32_t end = st->len < TALLY_FLAME_MAX_DEPTH ? st->len : TALLY_FLAME_MAX_DEPTH;
		for (uint32_t k = d; k < end; k++) {
			fl->frames[at].self = 0;
			at = push(fl,
				  (struct tally_flame_frame){ level_func(cg, inv, B->order[i], k),
							      k + 1, x, st->count, 0, 0 });
		}
		fl->frames[at].self = st->count;
		if (st->len > end) {
			fl->frames[at].self = 0;
			push(fl, (struct tally_flame_frame){ TALLY_FLAME_DEEP, end + 1, x,
							     st->count, st->count, st->len - end });
		}
		return;
	}
	/* each stack's key, fetching ahead: the stacks' functions are all over memory */
	struct group gbuf[16], *g = gbuf;
	size_t ng = 0, ag = ARRAY_SIZE(gbuf);
	for (size_t k = i; k < j; k++) {
		if (k + 8 < j) {
			const struct tally_cg_stack *ahead = &cg->stacks[B->order[k + 8]];
			__builtin_prefetch(
				&cg->funcs_of[ahead->first + (inv ? d : ahead->len - 1 - d)]);
		}
		uint32_t s = B->order[k];
		uint32_t key = cg->stacks[s].len == d ? 0 : B->rank[level_func(cg, inv, s, d)] + 1;
		B->key[s] = key;
		if (!B->cnt[key]++) {
			if (ng == ag) {
				ag *= 2;
				g = g == gbuf ? memcpy(xmalloc(ag * sizeof(*g)), gbuf, sizeof(gbuf))
					      : xrealloc(g, ag * sizeof(*g));
			}
			g[ng++] = (struct group){ key, 0, 0, 0 };
		}
	}
	/* the groups in key order, then the stacks regrouped in place */
	if (ng > 1)
		qsort(g, ng, sizeof(*g), tally_cmp_u32);
	size_t pos = i;
	for (size_t k = 0; k < ng; k++) {
		g[k].start = g[k].end = pos;
		pos += B->cnt[g[k].key];
		B->cnt[g[k].key] = (uint32_t)k; /* now: the group of the key */
	}
	if (ng > 1) {
		for (size_t k = i; k < j; k++) {
			uint32_t s = B->order[k];
			struct group *q = &g[B->cnt[B->key[s]]];
			B->tmp[q->end++] = s;
			q->count += cg->stacks[s].count;
		}
		memcpy(B->order + i, B->tmp + i, (j - i) * sizeof(uint32_t));
	} else {
		g[0].end = j;
		for (size_t k = i; k < j; k++)
			g[0].count += cg->stacks[B->order[k]].count;
	}
	for (size_t k = 0; k < ng; k++)
		B->cnt[g[k].key] = 0;
	size_t k = 0;
	fl->frames[at].self = 0;
	if (ng && g[0].key == 0)
		fl->frames[at].self = g[k++].count;
	uint64_t other = 0;
	uint32_t nother = 0;
	for (; k < ng; k++) {
		uint64_t c = g[k].count;
		if ((double)c < B->min_count) {
			other += c;
			nother++;
		} else {
			uint32_t f = level_func(cg, inv, B->order[g[k].start], d);
			size_t me = push(fl, (struct tally_flame_frame){ f, d + 1, x, c, 0, 0 });
			x += c;
			grow_above(B, me, g[k].start, g[k].end, d + 1);
		}
	}
	if (other) {
		push(fl, (struct tally_flame_frame){ TALLY_FLAME_OTHER, d + 1, x, other, other,
						     nother });
		fl->folded_samples += other;
		fl->folded_frames += nother;
	}
	if (g != gbuf)
		free(g);
}

void tally_flame_build(struct tally_flame *fl, const struct tally_cg *cg, bool invert,
		       double percent_limit)
{
	memset(fl, 0, sizeof(*fl));
	fl->inverted = invert;
	fl->limit = percent_limit;
	fl->total = cg->total;
	struct build B = { .cg = cg, .fl = fl };
	B.min_count = percent_limit / 100.0 * (double)cg->total;
	/* names in order, so that siblings come out sorted and a graph looks the
	 * same from one profile to the next */
	uint32_t *byname = xmalloc((cg->nfuncs + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < cg->nfuncs; i++)
		byname[i] = (uint32_t)i;
	if (cg->nfuncs)
		qsort_r(byname, cg->nfuncs, sizeof(uint32_t), cmp_func_name, (void *)cg);
	B.rank = xmalloc((cg->nfuncs + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < cg->nfuncs; i++)
		B.rank[byname[i]] = (uint32_t)i;
	free(byname);
	B.cnt = xcalloc(cg->nfuncs + 2, sizeof(uint32_t));
	B.order = xmalloc((cg->nstacks + 1) * sizeof(uint32_t));
	B.tmp = xmalloc((cg->nstacks + 1) * sizeof(uint32_t));
	B.key = xmalloc((cg->nstacks + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < cg->nstacks; i++)
		B.order[i] = (uint32_t)i;
	push(fl, (struct tally_flame_frame){ TALLY_FLAME_ALL, 0, 0, cg->total, 0, 0 });
	if (cg->nstacks)
		grow_above(&B, 0, 0, cg->nstacks, 0);
	free(B.key);
	free(B.tmp);
	free(B.order);
	free(B.cnt);
	free(B.rank);
}

void tally_flame_release(struct tally_flame *fl)
{
	free(fl->frames);
	memset(fl, 0, sizeof(*fl));
}

/* ---- SVG ---- */

/* The graph hangs from its root under four lines of title, buttons and
 * details (root at the top: a deep stack grows down, never pushing the graph
 * off the first screen), with the legend under it. */
enum { FRAME_H = 16, TOP = 96, BOTTOM = 30, PAD = 10, CHAR_W = 7, SVG_WIDTH = 1200 };

static uint64_t mix(const char *s, uint64_t seed)
{
	return tally_hash_u64(tally_hash_bytes(s, strlen(s), seed));
}

/* A colour per function name, in a range per kind of image: the program
 * red to orange, libraries yellow, the kernel blue, JIT code green, the rest
 * grey. The same name gets the same colour in every graph. */
static void frame_fill(struct strbuf *out, const char *name, const char *kind)
{
	uint64_t h = mix(name, 0x7a11);
	double a = (double)(h & 0xff) / 255.0, b = (double)((h >> 8) & 0xff) / 255.0,
	       c = (double)((h >> 16) & 0xff) / 255.0;
	int r, g, bl;
	if (!strcmp(kind, "exec")) {
		r = 205 + (int)(50 * a);
		g = 60 + (int)(130 * b);
		bl = (int)(50 * c);
	} else if (!strcmp(kind, "lib")) {
		r = 200 + (int)(45 * a);
		g = 175 + (int)(55 * b);
		bl = 40 + (int)(45 * c);
	} else if (!strcmp(kind, "kernel")) {
		r = 90 + (int)(60 * a);
		g = 150 + (int)(55 * b);
		bl = 215 + (int)(40 * c);
	} else if (!strcmp(kind, "jit")) {
		r = 70 + (int)(60 * a);
		g = 185 + (int)(55 * b);
		bl = 70 + (int)(45 * c);
	} else {
		r = g = bl = 165 + (int)(50 * a);
	}
	strbuf_addf(out, "rgb(%d,%d,%d)", r, g, bl);
}

static double pct(uint64_t n, uint64_t d)
{
	return d ? 100.0 * (double)n / (double)d : 0.0;
}

/* Brendan Gregg's differential colours: red for growth, blue for a loss,
 * deeper the closer to the largest change of the graph, white for none. */
static void diff_fill(struct strbuf *out, double d, double maxd)
{
	int x = maxd > 0 ? (int)(210.0 * (d < 0 ? -d : d) / maxd + 0.5) : 0;
	if (d > 0)
		strbuf_addf(out, "rgb(255,%d,%d)", 255 - x, 255 - x);
	else if (d < 0)
		strbuf_addf(out, "rgb(%d,%d,255)", 255 - x, 255 - x);
	else
		strbuf_addstr(out, "rgb(255,255,255)");
}

/* The visible label of a frame w pixels wide: the name, or as much of it as
 * fits followed by "..", or nothing. The script redoes this on zoom. */
static void add_label(struct strbuf *out, const char *name, double w)
{
	long fit = (long)((w - 6) / CHAR_W);
	size_t n = strlen(name);
	if (fit < 3)
		return;
	if ((size_t)fit >= n) {
		tally_strbuf_add_xml(out, name);
		return;
	}
	/* cut on a character boundary */
	size_t cut = (size_t)fit - 2;
	while (cut > 0 && ((unsigned char)name[cut] & 0xc0) == 0x80)
		cut--;
	char *t = xstrndup(name, cut);
	tally_strbuf_add_xml(out, t);
	free(t);
	strbuf_addstr(out, "..");
}

static const char svg_style[] =
	"svg.tally-flame{font-family:\"DejaVu Sans\",Verdana,Arial,sans-serif;font-size:12px;background:#fff}\n"
	".tally-flame .bg{fill:#f8f8f4}\n"
	".tally-flame .title{font-size:17px;fill:#000}\n"
	".tally-flame .sub{fill:#555}\n"
	".tally-flame .btn{fill:#2255aa;cursor:pointer}\n"
	".tally-flame .btn:hover{text-decoration:underline}\n"
	".tally-flame .hide{display:none}\n"
	".tally-flame .f{cursor:pointer}\n"
	".tally-flame .f rect{stroke:#f8f8f4;stroke-width:0.5}\n"
	".tally-flame .f:hover rect{stroke:#000;stroke-width:1}\n"
	".tally-flame .f text{fill:#000;pointer-events:none}\n"
	".tally-flame .f.dim{opacity:0.55}\n"
	".tally-flame .f.tiny{display:none}\n"
	".tally-flame .selbar .name{font-weight:bold}\n"
	".tally-flame .state{fill:#a05000}\n"
	".tally-flame .f.match rect{fill:rgb(225,60,225)}\n";

void tally_flame_svg(struct strbuf *out, const struct tally_flame *fl, const struct tally_cg *cg,
		     const struct tally_db *db, const struct tally_flame_svg_opts *o)
{
	/* the values' unit (tally/view.h): the event's, when it is named */
	int ev = db && o->event ? tally_db_event(db, o->event) : -1;
	unsigned width = o->width ? o->width : SVG_WIDTH;
	double scale = fl->total ? (double)(width - 2 * PAD) / (double)fl->total : 0;
	/* frames narrower than a pixel are hidden (their samples are in their
	 * parent's width): the picture is as tall as what can be seen */
	uint32_t depth = 0, tiny = 0;
	for (size_t i = 0; i < fl->nframes; i++) {
		if ((double)fl->frames[i].count * scale >= 1.0 ||
		    fl->frames[i].func == TALLY_FLAME_ALL) {
			if (fl->frames[i].depth > depth)
				depth = fl->frames[i].depth;
		} else {
			tiny++;
		}
	}
	unsigned height = TOP + (depth + 1) * FRAME_H + BOTTOM;
	if (o->standalone)
		strbuf_addstr(out,
			      "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	strbuf_addf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" class=\"tally-flame\" width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\"",
		    width, height, width, height);
	if (o->id) {
		strbuf_addstr(out, " id=\"");
		tally_strbuf_add_xml(out, o->id);
		strbuf_addch(out, '"');
	}
	/* what the script's lines say the values are: "msec" (ns shown as ms),
	 * "events" or "samples" */
	strbuf_addf(out, " data-unit=\"%s\"", ev >= 0 ? tally_view_heading(db, ev) : "samples");
	strbuf_addf(
		out,
		" data-total=\"%" PRIu64
		"\" data-inverted=\"%d\" data-width=\"%u\" data-pad=\"%d\" data-char=\"%d\" data-fh=\"%d\" data-top=\"%d\" data-bottom=\"%d\">\n",
		fl->total, fl->inverted, width, PAD, CHAR_W, FRAME_H, TOP, BOTTOM);
	strbuf_addstr(out, "<style>\n");
	strbuf_addstr(out, svg_style);
	strbuf_addstr(out, "</style>\n");
	strbuf_addf(out, "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"%u\" height=\"%u\"/>\n", width,
		    height);
	strbuf_addf(out, "<text class=\"title\" x=\"%u\" y=\"24\" text-anchor=\"middle\">",
		    width / 2);
	tally_strbuf_add_xml(out, o->title ? o->title : "Flame graph");
	strbuf_addstr(out, "</text>\n");
	if (o->subtitle) {
		strbuf_addf(out, "<text class=\"sub\" x=\"%u\" y=\"44\" text-anchor=\"middle\">",
			    width / 2);
		tally_strbuf_add_xml(out, o->subtitle);
		strbuf_addstr(out, "</text>\n");
	}
	/* the controls (the script shows the ones that apply) */
	strbuf_addf(out, "<text class=\"btn reset hide\" x=\"%d\" y=\"24\">Reset view</text>\n",
		    PAD);
	strbuf_addf(
		out,
		"<text class=\"btn search\" x=\"%u\" y=\"24\" text-anchor=\"end\">Search</text>\n",
		width - PAD);
	strbuf_addf(
		out,
		"<text class=\"btn clear hide\" x=\"%u\" y=\"44\" text-anchor=\"end\">Clear search</text>\n",
		width - PAD);
	strbuf_addf(
		out,
		"<text class=\"btn tinies%s\" x=\"%d\" y=\"44\" data-n=\"%u\">Show %u frame%s under a pixel</text>\n",
		tiny ? "" : " hide", PAD, tiny, tiny, tiny == 1 ? "" : "s");
	strbuf_addf(out, "<text class=\"details\" x=\"%d\" y=\"64\"> </text>\n", PAD);
	strbuf_addf(out, "<text class=\"matched\" x=\"%u\" y=\"64\" text-anchor=\"end\"> </text>\n",
		    width - PAD);
	strbuf_addf(
		out,
		"<text class=\"selbar hide\" x=\"%d\" y=\"84\"><tspan class=\"name\"> </tspan>"
		"<tspan class=\"btn sandwich\" dx=\"14\">Sandwich</tspan><tspan dx=\"6\">\xc2\xb7</tspan>"
		"<tspan class=\"btn focus\" dx=\"6\">Focus</tspan><tspan dx=\"6\">\xc2\xb7</tspan>"
		"<tspan class=\"btn ignore\" dx=\"6\">Ignore</tspan></text>\n",
		PAD);
	strbuf_addf(out, "<text class=\"state\" x=\"%u\" y=\"84\" text-anchor=\"end\"> </text>\n",
		    width - PAD);
	const struct tally_flame_diff *df = o->diff;
	if (o->standalone && df)
		strbuf_addf(
			out,
			"<text class=\"sub legend\" x=\"%d\" y=\"%u\">the shape of the new profile; red: grew, blue: shrank, white: unchanged (self share of each profile's samples)</text>\n",
			PAD, height - 10);
	else if (o->standalone)
		strbuf_addf(
			out,
			"<text class=\"sub legend\" x=\"%d\" y=\"%u\">red: the program, yellow: libraries, blue: kernel, green: JIT, grey: other; click a frame to zoom and select it</text>\n",
			PAD, height - 10);
	/* the largest change of a self share: the deepest colour */
	double maxd = 0;
	for (size_t i = 0; df && i < fl->nframes; i++)
		if (fl->frames[i].func < TALLY_FLAME_OTHER) {
			double d = pct(fl->frames[i].self, fl->total) -
				   pct(df->base_self[i], df->base_total);
			if (d > maxd || -d > maxd)
				maxd = d < 0 ? -d : d;
		}
	strbuf_addstr(out, "<g class=\"frames\">\n");
	struct strbuf name = STRBUF_INIT;
	for (size_t i = 0; i < fl->nframes; i++) {
		const struct tally_flame_frame *f = &fl->frames[i];
		double x = PAD + (double)f->x * scale, w = (double)f->count * scale;
		unsigned y = TOP + f->depth * FRAME_H;
		const char *kind = "other", *image = NULL;
		bool inlined = false;
		strbuf_reset(&name);
		if (f->func == TALLY_FLAME_ALL) {
			strbuf_addf(&name, "all");
		} else if (f->func == TALLY_FLAME_OTHER) {
			strbuf_addstr(&name, "other");
		} else if (f->func == TALLY_FLAME_DEEP) {
			strbuf_addf(&name, "[deeper: up to %u more levels]", f->folded);
		} else {
			const struct tally_cg_func *fn = &cg->funcs[f->func];
			kind = db->images[fn->image].kind;
			image = db->images[fn->image].name;
			inlined = fn->inlined;
			/* as in folded stacks: code with no symbol is named by its image */
			if (!strcmp(fn->name, "[unknown]"))
				strbuf_addf(&name, "[%s]", image);
			else
				strbuf_addstr(&name, fn->name);
		}
		double dself = 0;
		if (df)
			dself = pct(f->self, fl->total) - pct(df->base_self[i], df->base_total);
		bool small = w < 1.0 && f->func != TALLY_FLAME_ALL;
		strbuf_addf(out,
			    "<g class=\"f%s\" data-x=\"%" PRIu64 "\" data-c=\"%" PRIu64
			    "\" data-d=\"%u\"",
			    small ? " tiny" : "", f->x, f->count, f->depth);
		if (df && f->func < TALLY_FLAME_OTHER)
			strbuf_addf(out, " data-base=\"%" PRIu64 "\" data-change=\"%.4f\"",
				    df->base_incl[i], dself);
		strbuf_addstr(out, "><title>");
		tally_strbuf_add_xml(out, name.buf);
		if (image) {
			strbuf_addstr(out, "\nin ");
			tally_strbuf_add_xml(out, image);
			if (inlined)
				strbuf_addstr(out, " (inlined)");
		}
		strbuf_addch(out, '\n');
		if (ev >= 0)
			tally_view_value_unit(out, db, ev, f->count);
		else
			strbuf_addf(out, "%" PRIu64 " sample%s", f->count,
				    f->count == 1 ? "" : "s");
		strbuf_addf(out, ", %.2f%%", pct(f->count, fl->total));
		if (f->func == TALLY_FLAME_ALL) {
			strbuf_addstr(out, " of ");
			tally_strbuf_add_xml(out, o->event ? o->event : "the event");
		} else if (f->func == TALLY_FLAME_OTHER) {
			strbuf_addf(out, "; %u %s under %g%% each, folded", f->folded,
				    f->folded == 1 ? "frame" : "frames", fl->limit);
		} else if (f->func == TALLY_FLAME_DEEP) {
			strbuf_addf(
				out,
				"; the stacks' frames past level %d, folded (use the folded export for all of them)",
				TALLY_FLAME_MAX_DEPTH);
		} else if (f->self) {
		{
			strbuf_addstr(out, "; self ");
			if (ev >= 0)
				tally_view_value(out, db, ev, f->self, 0);
			else
				strbuf_addf(out, "%" PRIu64, f->self);
			strbuf_addf(out, ", %.2f%%", pct(f->self, fl->total));
		}
		}
		if (df && f->func != TALLY_FLAME_OTHER)
			strbuf_addf(out,
				    "\nbase: %" PRIu64
				    " samples, %.2f%%; self %.2f%% -> %.2f%% (%+.2f points)",
				    df->base_incl[i], pct(df->base_incl[i], df->base_total),
				    pct(df->base_self[i], df->base_total), pct(f->self, fl->total),
				    dself);
		strbuf_addf(
			out,
			"</title><rect x=\"%.1f\" y=\"%u\" width=\"%.1f\" height=\"%d\" rx=\"2\" fill=\"",
			x, y, w, FRAME_H - 1);
		if (f->func == TALLY_FLAME_ALL)
			strbuf_addstr(out, "rgb(215,215,205)");
		else if (f->func == TALLY_FLAME_OTHER || f->func == TALLY_FLAME_DEEP)
			strbuf_addstr(out, "rgb(200,200,200)");
		else if (df)
			diff_fill(out, dself, maxd);
		else
			frame_fill(out, name.buf, kind);
		strbuf_addf(out, "\"/><text x=\"%.1f\" y=\"%u\">", x + 3, y + FRAME_H - 4);
		add_label(out, name.buf, w);
		strbuf_addstr(out, "</text></g>\n");
	}
	strbuf_release(&name);
	strbuf_addstr(out, "</g>\n");
	if (o->standalone) {
		strbuf_addstr(out, "<script type=\"text/ecmascript\"><![CDATA[\n");
		strbuf_addstr(out, tally_flame_js);
		strbuf_addstr(out, "]]></script>\n");
	}
	strbuf_addstr(out, "</svg>\n");
}

/* ---- tally export --format svg ---- */

int tally_export_svg(const struct tally_export *x, struct tally_export_out *out)
{
	const struct tally_db *db = x->db;
	int ev = x->events[0];
	struct tally_cg cg;
	tally_cg_build_flags(&cg, db, x->res, ev, NULL, NULL, TALLY_CG_NO_ARCS);
	/* as flamegraph.pl's --minwidth 0.1 (pixels): what could not be seen folds */
	double limit = x->percent_limit, floor = 100.0 / (SVG_WIDTH * 10.0);
	if (limit < floor)
		limit = floor;
	struct tally_flame fl;
	tally_flame_build(&fl, &cg, false, limit);
	const char *what = tally_meta_get(&db->session, "command");
	if (!what)
		what = tally_meta_get(&db->session, "target");
	struct strbuf title = STRBUF_INIT, sub = STRBUF_INIT;
	strbuf_addf(&title, "Flame graph: %s", what ? what : x->input);
	strbuf_addf(&sub, "%s, %" PRIu64 " sample%s", db->events[ev], cg.total,
		    cg.total == 1 ? "" : "s");
	const char *start = tally_meta_get(&db->session, "start-time");
	if (start)
		strbuf_addf(&sub, ", %s", start);
	if (fl.folded_frames)
		strbuf_addf(&sub, "; %u frames under %.2g%% folded into \"other\"",
			    fl.folded_frames, limit);
	struct tally_flame_svg_opts so = { title.buf, sub.buf, db->events[ev], NULL, true,
					   SVG_WIDTH, NULL };
	tally_flame_svg(tally_export_out_file(out, ""), &fl, &cg, db, &so);
	strbuf_release(&title);
	strbuf_release(&sub);
	tally_flame_release(&fl);
	tally_cg_release(&cg);
	return 0;
}

/* ---- differential flame graphs ---- */

/* The names frames are matched by: "IMAGE\001FUNCTION". */
struct fnames {
	char **v;
	size_t n, alloc;
	struct tally_hidx idx;
};

static bool fname_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !strcmp(((const struct fnames *)ctx)->v[idx], key);
}

static uint32_t fname_id(struct fnames *t, const struct tally_db *db, const struct tally_cg_func *f,
			 bool add)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s\001%s", db->images[f->image].name, f->name);
	uint64_t h = tally_hash_bytes(sb.buf, sb.len, 11);
	uint32_t i = tally_hidx_get(&t->idx, h, sb.buf, fname_eq, t);
	if (i == TALLY_HIDX_NONE && add) {
		GROW(t->v, t->alloc, t->n + 1);
		t->v[t->n] = strbuf_detach(&sb);
		tally_hidx_put(&t->idx, h, (uint32_t)t->n);
		i = (uint32_t)t->n++;
	}
	strbuf_release(&sb);
	return i;
}

#define TRIE_TOP (UINT32_MAX - 1) /* the parent of the bottom level */

struct tnode {
	uint32_t parent, name;
	uint64_t incl, self;
};

struct ftrie {
	struct tnode *v;
	size_t n, alloc;
	struct tally_hidx idx;
};

static bool tnode_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tnode *a = &((const struct ftrie *)ctx)->v[idx], *k = key;
	return a->parent == k->parent && a->name == k->name;
}

static uint32_t tnode_get(struct ftrie *t, uint32_t parent, uint32_t name, bool add)
{
	struct tnode k = { parent, name, 0, 0 };
	uint64_t h = tally_hash_u64(((uint64_t)parent << 32 | name) ^ 0x5eed);
	uint32_t i = tally_hidx_get(&t->idx, h, &k, tnode_eq, t);
	if (i == TALLY_HIDX_NONE && add) {
		GROW(t->v, t->alloc, t->n + 1);
		t->v[t->n] = k;
		tally_hidx_put(&t->idx, h, (uint32_t)t->n);
		i = (uint32_t)t->n++;
	}
	return i;
}

void tally_flame_diff_counts(const struct tally_flame *fl, const struct tally_cg *cg,
			     const struct tally_db *db, const struct tally_cg *base_cg,
			     const struct tally_db *base_db, uint64_t *base_incl,
			     uint64_t *base_self)
{
	struct fnames names = { 0 };
	struct ftrie trie = { 0 };
	uint32_t *bid = xmalloc((base_cg->nfuncs + 1) * sizeof(uint32_t));
	for (size_t f = 0; f < base_cg->nfuncs; f++)
		bid[f] = fname_id(&names, base_db, &base_cg->funcs[f], true);
	/* the base's paths from the bottom, with their samples */
	for (size_t s = 0; s < base_cg->nstacks; s++) {
		const struct tally_cg_stack *st = &base_cg->stacks[s];
		uint32_t at = TRIE_TOP;
		for (uint32_t d = st->len; d-- > 0;) {
			at = tnode_get(&trie, at, bid[base_cg->funcs_of[st->first + d]], true);
			trie.v[at].incl += st->count;
		}
		if (st->len)
			trie.v[at].self += st->count;
	}
	uint32_t *nid = xmalloc((cg->nfuncs + 1) * sizeof(uint32_t));
	for (size_t f = 0; f < cg->nfuncs; f++)
		nid[f] = fname_id(&names, db, &cg->funcs[f], false);
	/* the frames in preorder: the node of each level's last frame */
	uint32_t *level = xmalloc(((size_t)fl->max_depth + 2) * sizeof(uint32_t));
	for (size_t i = 0; i < fl->nframes; i++) {
		const struct tally_flame_frame *f = &fl->frames[i];
		uint32_t node = TALLY_HIDX_NONE;
		if (f->func == TALLY_FLAME_ALL) {
			node = TRIE_TOP;
			base_incl[i] = base_cg->total;
			base_self[i] = 0;
		} else {
			uint32_t parent = level[f->depth - 1];
			if (f->func != TALLY_FLAME_OTHER && parent != TALLY_HIDX_NONE &&
			    nid[f->func] != TALLY_HIDX_NONE)
				node = tnode_get(&trie, parent, nid[f->func], false);
			base_incl[i] = node != TALLY_HIDX_NONE ? trie.v[node].incl : 0;
			base_self[i] = node != TALLY_HIDX_NONE ? trie.v[node].self : 0;
		}
		level[f->depth] = node;
	}
	free(level);
	free(nid);
	free(bid);
	for (size_t i = 0; i < names.n; i++)
		free(names.v[i]);
	free(names.v);
	tally_hidx_release(&names.idx);
	free(trie.v);
	tally_hidx_release(&trie.idx);
}

void tally_flame_diff_svg(struct strbuf *out, const struct tally_cg *base_cg,
			  const struct tally_db *base_db, const struct tally_cg *new_cg,
			  const struct tally_db *new_db, double percent_limit,
			  const struct tally_flame_svg_opts *o)
{
	struct tally_flame fl;
	tally_flame_build(&fl, new_cg, false, percent_limit);
	uint64_t *incl = xcalloc(fl.nframes + 1, sizeof(uint64_t));
	uint64_t *self = xcalloc(fl.nframes + 1, sizeof(uint64_t));
	tally_flame_diff_counts(&fl, new_cg, new_db, base_cg, base_db, incl, self);
	struct tally_flame_diff df = { incl, self, base_cg->total };
	struct tally_flame_svg_opts so = *o;
	so.diff = &df;
	tally_flame_svg(out, &fl, new_cg, new_db, &so);
	free(incl);
	free(self);
	tally_flame_release(&fl);
}
