/* Per-line samples of a function with its source text (see source.h). */
#define _GNU_SOURCE
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>

#include "tally/source.h"
#include "tally/util.h"

/* Show a function's lines from its first line to its last sampled one when
 * that span is at most this long; else each sampled line with CONTEXT lines. */
enum { WHOLE_SPAN = 80, CONTEXT = 2, MAX_SOURCE = 16 << 20 };

struct lc {
	const char *file; /* libdw's string, lives with the module */
	int line;
	uint64_t samples;
};

static int cmp_line(const void *a, const void *b)
{
	const struct tally_source_line *x = a, *y = b;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* Source paths, made absolute with the compilation directory: each once. */
struct paths {
	char **v;
	size_t n, alloc;
};

static const char *intern_path(struct paths *ps, const char *dir, const char *file)
{
	struct strbuf sb = STRBUF_INIT;
	if (file[0] != '/' && dir && *dir)
		strbuf_addf(&sb, "%s/", dir);
	strbuf_addstr(&sb, file);
	char *real = realpath(sb.buf, NULL);
	if (real) {
		strbuf_reset(&sb);
		strbuf_addstr(&sb, real);
		free(real);
	}
	for (size_t i = 0; i < ps->n; i++)
		if (!strcmp(ps->v[i], sb.buf)) {
			strbuf_release(&sb);
			return ps->v[i];
		}
	GROW(ps->v, ps->alloc, ps->n + 1);
	return ps->v[ps->n++] = strbuf_detach(&sb);
}

static const char *line_at(Dwfl_Module *mod, GElf_Addr a, int *line, struct paths *ps)
{
	Dwfl_Line *l = dwfl_module_getsrc(mod, a);
	if (!l)
		return NULL;
	const char *f = dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL);
	if (!f || *line <= 0)
		return NULL;
	return intern_path(ps, dwfl_line_comp_dir(l), f);
}

/* Appends; duplicates merge after sorting (merge_lines). */
static void add_line(struct tally_source *src, uint32_t line, uint64_t samples)
{
	GROW(src->lines, src->alines, src->nlines + 1);
	src->lines[src->nlines++] = (struct tally_source_line){ line, samples, NULL };
}

int tally_source_build(struct tally_source *src, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_select *sel, int ev, uint32_t image, uint64_t addr, const char *name)
{
	memset(src, 0, sizeof(*src));
	GElf_Addr bias = 0;
	Dwfl_Module *mod = tally_resolver_module(res, image, &bias);
	if (!mod)
		return -1;
	struct lc *lcs = NULL;
	size_t n = 0, alc = 0;
	struct paths ps = { 0 };
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		if (pf->image != image || !tally_select_prof(sel, db, pf))
			continue;
		for (size_t i = pf->first; i < pf->end; i++) {
			uint64_t c = db->counts[i * (size_t)db->nevents + (size_t)ev], a;
			if (!c)
				continue;
			const struct tally_sym *s = tally_resolve(res, image, db->entries[i].offset);
			if (!s || s->addr != addr || strcmp(s->name, name))
				continue;
			src->samples += c;
			int line = 0;
			const char *f = NULL;
			if (!tally_resolver_addr(res, image, db->entries[i].offset, &a))
				f = line_at(mod, a + bias, &line, &ps);
			if (!f) {
				src->unlocated += c;
				continue;
			}
			size_t k = 0;
			while (k < n && !(lcs[k].line == line && !strcmp(lcs[k].file, f)))
				k++;
			if (k == n) {
				GROW(lcs, alc, n + 1);
				lcs[n++] = (struct lc){ f, line, 0 };
			}
			lcs[k].samples += c;
		}
	}
	if (!n) {
		free(lcs);
		for (size_t i = 0; i < ps.n; i++)
			free(ps.v[i]);
		free(ps.v);
		return -1;
	}
	/* the file with most samples is the function's (the others: inlined code) */
	const char *best = NULL;
	uint64_t bestc = 0;
	for (size_t k = 0; k < n; k++) {
		uint64_t in = 0;
		for (size_t j = 0; j < n; j++)
			if (!strcmp(lcs[j].file, lcs[k].file))
				in += lcs[j].samples;
		if (in > bestc) {
			bestc = in;
			best = lcs[k].file;
		}
	}
	src->file = xstrdup(best);
	src->elsewhere = src->samples - src->unlocated - bestc;
	uint32_t lo = UINT32_MAX, hi = 0;
	for (size_t k = 0; k < n; k++) {
		if (strcmp(lcs[k].file, best))
			continue;
		add_line(src, (uint32_t)lcs[k].line, lcs[k].samples);
		if ((uint32_t)lcs[k].line < lo)
			lo = (uint32_t)lcs[k].line;
		if ((uint32_t)lcs[k].line > hi)
			hi = (uint32_t)lcs[k].line;
	}
	free(lcs);
	/* the function's own first line, when it is in the same file */
	int first = 0;
	const char *ff = line_at(mod, addr + bias, &first, &ps);
	if (ff && !strcmp(ff, best) && (uint32_t)first < lo && hi - (uint32_t)first <= WHOLE_SPAN)
		lo = (uint32_t)first;

	struct strbuf text = STRBUF_INIT;
	char **lines = NULL;
	size_t nl = 0, anl = 0;
	if (strbuf_read_file(&text, best, MAX_SOURCE) == 0) {
		for (char *p = text.buf; p < text.buf + text.len;) {
			char *e = memchr(p, '\n', (size_t)(text.buf + text.len - p));
			if (!e)
				e = text.buf + text.len;
			*e = '\0';
			GROW(lines, anl, nl + 1);
			lines[nl++] = p;
			p = e + 1;
		}
	} else {
		struct strbuf m = STRBUF_INIT;
		strbuf_addf(&m, "source file '%s' is not readable here: per-line samples without the text", best);
		src->note = strbuf_detach(&m);
	}
	/* context: the whole span when short, else a few lines around each;
	 * none without the text (empty numbered lines say nothing) */
	size_t nsampled = src->nlines;
	if (!lines) {
	} else if (hi - lo <= WHOLE_SPAN) {
		for (uint32_t l = lo > CONTEXT ? lo - CONTEXT : 1; l <= hi + CONTEXT; l++)
			if (l <= nl)
				add_line(src, l, 0);
	} else {
		for (size_t k = 0; k < nsampled; k++) {
			uint32_t c = src->lines[k].line;
			for (uint32_t l = c > CONTEXT ? c - CONTEXT : 1; l <= c + CONTEXT; l++)
				if (l <= nl)
					add_line(src, l, 0);
		}
	}
	tally_qsort(src->lines, src->nlines, sizeof(*src->lines), cmp_line);
	size_t w = 0;
	for (size_t k = 0; k < src->nlines; k++) {
		if (w && src->lines[w - 1].line == src->lines[k].line)
			src->lines[w - 1].samples += src->lines[k].samples;
		else
			src->lines[w++] = src->lines[k];
	}
	src->nlines = w;
	for (size_t k = 0; k < src->nlines && lines; k++)
		if (src->lines[k].line >= 1 && src->lines[k].line <= nl)
			src->lines[k].text = xstrdup(lines[src->lines[k].line - 1]);
	if (lines && hi > nl) {
		struct strbuf m = STRBUF_INIT;
		strbuf_addf(&m, "source file '%s' has %zu lines but samples point at line %u: it changed since the build", best,
			    nl, hi);
		src->note = strbuf_detach(&m);
	}
	free(lines);
	strbuf_release(&text);
	for (size_t i = 0; i < ps.n; i++)
		free(ps.v[i]);
	free(ps.v);
	return 0;
}

void tally_source_release(struct tally_source *src)
{
	for (size_t i = 0; i < src->nlines; i++)
		free(src->lines[i].text);
	free(src->lines);
	free(src->file);
	free(src->note);
	memset(src, 0, sizeof(*src));
}
