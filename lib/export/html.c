/* The HTML report (see html.h): static markup for everything (tables,
 * flame graphs as inline SVG) so the page shows without its scripts, and two
 * small inline scripts for sorting, zoom and search. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tally/callgraph.h"
#include "tally/diff.h"
#include "tally/export.h"
#include "tally/flame.h"
#include "tally/html.h"
#include "tally/annotate.h"
#include "tally/view.h"

extern const char tally_report_css[], tally_report_js[];

static double pc(uint64_t n, uint64_t d)
{
	return d ? 100.0 * (double)n / (double)d : 0.0;
}

static void esc(struct strbuf *out, const char *s)
{
	tally_strbuf_add_xml(out, s ? s : "");
}

/* A numeric cell: the sort key in data-v, the text shown. */
static void num_cell(struct strbuf *out, const char *cls, uint64_t v)
{
	strbuf_addf(out, "<td class=\"n %s\" data-v=\"%" PRIu64 "\">%" PRIu64 "</td>", cls, v, v);
}

static void pct_cell(struct strbuf *out, const char *cls, uint64_t v, uint64_t total, bool bar)
{
	double p = pc(v, total);
	strbuf_addf(out, "<td class=\"n %s\" data-v=\"%.4f\">", cls, p);
	if (bar)
		strbuf_addf(out, "<span class=\"bar\" style=\"width:%.0fpx\"></span>",
			    p * 0.6 + 0.5);
	strbuf_addf(out, "%.2f%%</td>", p);
}

/* ---- sections ---- */

static const char *meta(const struct tally_db *db, const char *key)
{
	return tally_meta_get(&db->session, key);
}

/* Item i of a comma-separated list, into buf. */
static const char *list_item(const char *list, int i, char *buf, size_t n)
{
	if (!list)
		return NULL;
	const char *p = list;
	for (int k = 0; k < i && p; k++) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	if (!p)
		return NULL;
	size_t len = strcspn(p, ",");
	snprintf(buf, n, "%.*s", (int)len, p);
	return buf;
}

/* The image rows of the view model (the report's summary). */
static void image_table(struct strbuf *out, const struct tally_db *db, int ev,
			const struct tally_view_rows *t)
{
	/* the numbers' heading: what they count (ns, events or samples) */
	const char *unit = tally_view_unit(db, ev);
	strbuf_addstr(out,
		      "<table class=\"sortable images\"><thead><tr><th data-t=\"s\">image</th>");
	if (db->per_pid)
		strbuf_addstr(out,
			      "<th data-t=\"n\" class=\"n\">pid</th><th data-t=\"s\">command</th>");
	strbuf_addf(
		out,
		"<th data-t=\"n\" class=\"n\">%s</th><th data-t=\"n\" class=\"n\">%%</th><th data-t=\"s\">kind</th><th data-t=\"s\">path</th><th data-t=\"s\">id</th></tr></thead><tbody>\n",
		unit);
	for (size_t k = 0; k < t->n; k++) {
		const struct tally_view_row *r = &t->v[k];
		const struct tally_db_image *im = &db->images[r->image];
		strbuf_addstr(out, "<tr><td class=\"img\">");
		esc(out, im->name);
		strbuf_addstr(out, "</td>");
		if (db->per_pid) {
			num_cell(out, "pid", (uint64_t)r->pid);
			strbuf_addstr(out, "<td>");
			esc(out, tally_db_comm(db, r->pid));
			strbuf_addstr(out, "</td>");
		}
		num_cell(out, "samples", r->samples);
		pct_cell(out, "pct", r->samples, t->total, true);
		strbuf_addstr(out, "<td>");
		esc(out, im->kind);
		strbuf_addstr(out, "</td><td class=\"fn\">");
		esc(out, im->path);
		strbuf_addstr(out, "</td><td class=\"fn\" title=\"");
		esc(out, im->id_kind);
		strbuf_addstr(out, "\">");
		esc(out, im->id);
		strbuf_addstr(out, "</td></tr>\n");
	}
	strbuf_addf(
		out,
		"</tbody><tfoot><tr><th>total</th>%s<th class=\"n\">%" PRIu64
		"</th><th class=\"n\">100.00%%</th><th colspan=\"3\"></th></tr></tfoot></table>\n",
		db->per_pid ? "<th></th><th></th>" : "", t->total);
}

/* By self samples, then name; the table's order among equals. */
static int cmp_by_self(const void *a, const void *b)
{
	const struct tally_view_row *x = *(const struct tally_view_row *const *)a,
				    *y = *(const struct tally_view_row *const *)b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x < y ? -1 : x > y;
}

/* The rows of t by self samples (an array of pointers the caller frees). */
static const struct tally_view_row **by_self(const struct tally_view_rows *t)
{
	const struct tally_view_row **v = xmalloc((t->n + 1) * sizeof(*v));
	for (size_t i = 0; i < t->n; i++)
		v[i] = &t->v[i];
	tally_qsort(v, t->n, sizeof(*v), cmp_by_self);
	return v;
}

/* The function rows of the view model (sorted by inclusive samples, or self
 * without stacks): those of the top max_rows by inclusive and the top
 * max_rows by self, among those of at least limit %, so that sorting the
 * page's table either way shows the top. */
static void function_table(struct strbuf *out, const struct tally_db *db,
			   const struct tally_view_rows *t, bool incl, double limit,
			   uint64_t max_rows, const char *graph)
{
	const struct tally_view_row *rows = t->v;
	size_t n = t->n;
	uint64_t total = t->total;
	bool *show = xcalloc(n + 1, sizeof(bool));
	const struct tally_view_row **byself = by_self(t);
	for (size_t i = 0, k = 0; i < n && k < max_rows; i++)
		if (pc(incl ? rows[i].incl : rows[i].samples, total) >= limit) {
			show[i] = true;
			k++;
		}
	for (size_t i = 0; i < n && i < max_rows && pc(byself[i]->samples, total) >= limit; i++)
		show[byself[i] - rows] = true;
	free(byself);
	size_t under = 0;
	strbuf_addstr(
		out,
		"<div class=\"scroll\"><table class=\"sortable functions\"><thead><tr><th data-t=\"s\">function</th><th data-t=\"s\">image</th>"
		"<th data-t=\"n\" class=\"n\">self</th><th data-t=\"n\" class=\"n\">self %</th>");
	if (incl)
		strbuf_addstr(
			out,
			"<th data-t=\"n\" class=\"n\">inclusive</th><th data-t=\"n\" class=\"n\">inclusive %</th>");
	strbuf_addstr(out, "</tr></thead><tbody>\n");
	for (size_t i = 0; i < n; i++) {
		const struct tally_view_row *r = &rows[i];
		if (!show[i]) {
			under++;
			continue;
		}
		strbuf_addstr(out,
			      r->inlined ? "<tr><td class=\"fn inlined\"" : "<tr><td class=\"fn\"");
		if (r->has_addr)
			strbuf_addf(out, " title=\"0x%" PRIx64 "\"", r->addr);
		strbuf_addstr(out, ">");
		if (graph) {
			/* to the function in the flame graph (the script shows its sandwich) */
			strbuf_addf(
				out,
				"<a class=\"tograph\" href=\"#%s\" title=\"show it in the flame graph: its callers and callees\" data-image=\"",
				graph);
			esc(out, db->images[r->image].name);
			strbuf_addstr(out, "\">");
			esc(out, r->name);
			strbuf_addstr(out, "</a>");
		} else {
			esc(out, r->name);
		}
		strbuf_addstr(out, "</td><td class=\"img\">");
		esc(out, db->images[r->image].name);
		strbuf_addstr(out, "</td>");
		num_cell(out, "self", r->samples);
		pct_cell(out, "selfp", r->samples, total, !incl);
		if (incl) {
			num_cell(out, "incl", r->incl);
			pct_cell(out, "inclp", r->incl, total, true);
		}
		strbuf_addstr(out, "</tr>\n");
	}
	strbuf_addstr(out, "</tbody></table></div>\n");
	if (under)
		strbuf_addf(
			out,
			"<p class=\"note\">%zu more function%s not listed: under %g%%, or past the first %" PRIu64
			" by %s.</p>\n",
			under, under == 1 ? "" : "s", limit, max_rows,
			incl ? "inclusive and by self samples" : "samples");
	free(show);
}

static void flame_section(struct strbuf *out, const struct tally_db *db, const struct tally_cg *cg,
			  int ev, const struct tally_html_opts *o, bool invert)
{
	struct tally_flame fl;
	tally_flame_build(&fl, cg, invert, o->percent_limit);
	char id[32];
	snprintf(id, sizeof(id), "%s-%d", invert ? "callers" : "flame", ev);
	strbuf_addf(
		out,
		"<div class=\"tools\" data-for=\"%s\"><input type=\"search\" placeholder=\"search functions (regular expression)\"> <button class=\"clear\">clear search</button><button class=\"reset\">reset view</button><span class=\"matched\"></span></div>\n",
		id);
	struct strbuf title = STRBUF_INIT, sub = STRBUF_INIT;
	strbuf_addf(&title, "%s: %s", invert ? "Callers (inverted flame graph)" : "Flame graph",
		    db->events[ev]);
	tally_view_value_unit(&sub, db, ev, cg->total);
	strbuf_addstr(&sub, "; click a frame to zoom and select it (sandwich, focus, ignore)");
	if (fl.folded_frames)
		strbuf_addf(&sub, "; %u frames under %g%% folded into \"other\"", fl.folded_frames,
			    fl.limit);
	struct tally_flame_svg_opts so = { title.buf, sub.buf, db->events[ev], id, false, 0, NULL };
	strbuf_addstr(out, "<div class=\"graph\">\n");
	tally_flame_svg(out, &fl, cg, db, &so);
	strbuf_addstr(out, "</div>\n");
	strbuf_release(&title);
	strbuf_release(&sub);
	tally_flame_release(&fl);
}

static void unwind_figures(struct strbuf *out, const struct tally_db *db, const struct tally_cg *cg)
{
	/* in samples, as the report's unwind line: how well stacks were unwound */
	uint32_t sf[5];
	uint64_t sc[5], sn[5];
	size_t ns = tally_cg_stops_n(cg, sf, sc, sn, 5);
	strbuf_addf(out,
		    "<p class=\"unwind\">Unwinding: <b>%.2f%%</b> of %" PRIu64
		    " sample%s reached a process root (_start, thread start, kernel thread)",
		    pc(cg->nrooted, cg->ntotal), cg->ntotal, cg->ntotal == 1 ? "" : "s");
	if (cg->nrooted < cg->ntotal) {
		strbuf_addf(out, "; %.2f%% stopped early",
			    pc(cg->ntotal - cg->nrooted, cg->ntotal));
		if (cg->ntruncated)
			strbuf_addf(out, " (%.2f%% at the depth limit)",
				    pc(cg->ntruncated, cg->ntotal));
	}
	strbuf_addstr(out, ".</p>\n");
	if (ns) {
		strbuf_addstr(
			out,
			"<table class=\"stops\"><thead><tr><th>outermost frame of the stacks that stopped early</th><th>image</th><th class=\"n\">samples</th><th class=\"n\">%</th></tr></thead><tbody>\n");
		for (size_t i = 0; i < ns; i++) {
			strbuf_addstr(out, "<tr><td class=\"fn\">");
			esc(out, cg->funcs[sf[i]].name);
			strbuf_addstr(out, "</td><td>");
			esc(out, db->images[cg->funcs[sf[i]].image].name);
			strbuf_addstr(out, "</td>");
			num_cell(out, "samples", sn[i]);
			pct_cell(out, "pct", sn[i], cg->ntotal, false);
			strbuf_addstr(out, "</tr>\n");
		}
		strbuf_addstr(out, "</tbody></table>\n");
	}
	const char *why = meta(db, "dwarf-stop-reasons");
	if (why) {
		strbuf_addstr(
			out,
			"<p class=\"note\">DWARF unwinds stopped early, by cause (whole recording): ");
		esc(out, why);
		strbuf_addstr(out, "</p>\n");
	}
}

/* The source of one function (tally annotate's model): the lines of its
 * extent in its file with their samples (or, when the extent is long, a few
 * lines around each sampled one), then samples at lines of other files
 * (inlined code), or per instruction when there are no lines. */
enum { WHOLE_SPAN = 120, CONTEXT = 2 };

static void source_row(struct strbuf *out, uint32_t line, uint64_t n, uint64_t total,
		       const char *text)
{
	strbuf_addf(out, "<tr%s><td class=\"ln\">%u</td>", n ? " class=\"hot\"" : "", line);
	if (n)
		strbuf_addf(out, "<td class=\"n\" data-v=\"%" PRIu64 "\">%" PRIu64 " (%.1f%%)</td>",
			    n, n, pc(n, total));
	else
		strbuf_addstr(out, "<td class=\"n\"></td>");
	strbuf_addstr(out, "<td class=\"code\">");
	esc(out, text);
	strbuf_addstr(out, "</td></tr>\n");
}

static void annotated_function(struct strbuf *out, const struct tally_db *db, int ev,
			       const struct tally_annot_func *f, uint64_t total)
{
	const struct tally_db_image *im = &db->images[f->image];
	strbuf_addstr(out, "<h4 class=\"annotated\">");
	esc(out, f->name);
	strbuf_addstr(out, " <small>[");
	esc(out, im->name);
	strbuf_addstr(out, "]: ");
	tally_view_value_unit(out, db, ev, f->samples);
	strbuf_addf(out, ", %.2f%%", pc(f->samples, total));
	char *text = NULL, **lines = NULL, *found = NULL;
	size_t nl = 0;
	bool have =
		f->main_file != TALLY_ANNOT_NONE &&
		tally_annot_source(f->files[f->main_file], NULL, &text, &lines, &nl, &found) == 0;
	if (have) {
		strbuf_addstr(out, "; ");
		esc(out, found);
	}
	strbuf_addstr(out, "</small></h4>\n");
	if (f->line_note) {
		strbuf_addstr(out, "<p class=\"note\">No source lines: ");
		esc(out, f->line_note);
		strbuf_addstr(out, ".</p>\n");
	} else if (!have) {
		strbuf_addstr(out, "<p class=\"note\">Source file ");
		esc(out, f->main_file != TALLY_ANNOT_NONE ? f->files[f->main_file] : "?");
		strbuf_addstr(
			out,
			" is not readable here: samples per line without the text (<code>tally annotate --source-dir</code> finds moved sources).</p>\n");
	}
	bool *shown = xcalloc(f->nlines + 1, sizeof(bool));
	if (have) {
		uint32_t lo = f->first_line ? f->first_line : UINT32_MAX, hi = f->last_line;
		for (size_t k = 0; k < f->nlines; k++)
			if (f->lines[k].file == f->main_file && f->lines[k].samples) {
				if (f->lines[k].line < lo)
					lo = f->lines[k].line;
				if (f->lines[k].line > hi)
					hi = f->lines[k].line;
			}
		if (hi > nl)
			hi = (uint32_t)nl;
		strbuf_addstr(out, "<table class=\"src\"><tbody>\n");
		uint32_t prev = 0;
		for (uint32_t ln = lo ? lo : 1; ln <= hi; ln++) {
			bool near = hi - lo <= WHOLE_SPAN;
			for (uint32_t d = 0; !near && d <= 2 * CONTEXT; d++) {
				uint32_t k = ln + CONTEXT >= d
						     ? tally_annot_line_find(f, f->main_file,
									     ln + CONTEXT - d)
						     : TALLY_ANNOT_NONE;
				near = k != TALLY_ANNOT_NONE && f->lines[k].samples;
			}
			if (!near)
				continue;
			if (prev && ln > prev + 1)
				strbuf_addstr(
					out,
					"<tr><td class=\"ln\">&#8942;</td><td></td><td></td></tr>\n");
			prev = ln;
			uint32_t k = tally_annot_line_find(f, f->main_file, ln);
			if (k != TALLY_ANNOT_NONE)
				shown[k] = true;
			source_row(out, ln, k == TALLY_ANNOT_NONE ? 0 : f->lines[k].samples,
				   f->samples, lines[ln - 1]);
		}
		strbuf_addstr(out, "</tbody></table>\n");
	}
	/* sampled lines not listed above: other files (inlined code), or all of
	 * them without the text; a file's path once, above its lines (not at all
	 * for the main file, which the note above names) */
	bool head = false;
	uint32_t file = have ? TALLY_ANNOT_NONE : f->main_file;
	for (size_t k = 0; k < f->nlines; k++) {
		const struct tally_annot_line *l = &f->lines[k];
		if (!l->samples || shown[k])
			continue;
		if (!head) {
			strbuf_addf(
				out, "%s<table class=\"src lines\"><tbody>\n",
				have ? "<p class=\"note\">Samples at lines of other files (inlined code):</p>\n"
				     : "");
			head = true;
		}
		if (l->file != file) {
			strbuf_addstr(out, "<tr class=\"file\"><td colspan=\"3\">");
			esc(out, f->files[l->file]);
			strbuf_addstr(out, "</td></tr>\n");
			file = l->file;
		}
		strbuf_addf(
			out,
			"<tr class=\"hot\"><td class=\"ln\">%u</td><td class=\"n\" data-v=\"%" PRIu64
			"\">%" PRIu64 " (%.1f%%)</td><td class=\"code\"></td></tr>\n",
			l->line, l->samples, l->samples, pc(l->samples, f->samples));
	}
	if (head)
		strbuf_addstr(out, "</tbody></table>\n");
	free(shown);
	if (f->line_note && f->ninsns) {
		/* no lines: the instructions that have samples */
		strbuf_addstr(out, "<table class=\"src asm\"><tbody>\n");
		for (size_t i = 0; i < f->ninsns; i++) {
			const struct tally_annot_insn *in = &f->insns[i];
			if (!in->samples)
				continue;
			strbuf_addf(out,
				    "<tr class=\"hot\"><td class=\"ln\">%" PRIx64
				    "</td><td class=\"n\" data-v=\"%" PRIu64 "\">%" PRIu64
				    " (%.1f%%)</td><td class=\"code\">",
				    in->addr, in->samples, in->samples,
				    pc(in->samples, f->samples));
			esc(out, in->text);
			strbuf_addstr(out, "</td></tr>\n");
		}
		strbuf_addstr(out, "</tbody></table>\n");
	}
	if (f->no_line && !f->line_note)
	{
		strbuf_addstr(out, "<p class=\"note\">");
		tally_view_value_unit(out, db, ev, f->no_line);
		strbuf_addf(out, " (%.2f%%) at addresses without line information.</p>\n",
			    pc(f->no_line, f->samples));
	}
	free(text);
	free(lines);
	free(found);
}

/* The hottest functions by self samples, through tally annotate's model
 * (lib/report/annotate.c): DWARF lines through the resolver, jitdump lines
 * for JIT code. */
static void source_section(struct strbuf *out, const struct tally_db *db,
			   struct tally_resolver *res, const struct tally_html_opts *o, int ev,
			   const struct tally_view_rows *t)
{
	unsigned done = 0;
	uint64_t total = t->total;
	const struct tally_view_row **hot = by_self(t);
	for (size_t i = 0; i < t->n && done < o->annotate; i++) {
		const struct tally_view_row *r = hot[i];
		/* by self samples, so the rest are colder */
		if (pc(r->samples, total) < TALLY_HTML_ANNOTATE_MIN)
			break;
		if (!r->has_addr)
			continue;
		const struct tally_db_image *im = &db->images[r->image];
		struct tally_annotate_opts ao = { r->name, im->path[0] ? im->path : im->name, ev };
		struct tally_annot_func *fs = NULL;
		size_t nf = 0;
		if (tally_annotate(db, res, &ao, &fs, &nf))
			continue;
		for (size_t k = 0; k < nf; k++)
			if (fs[k].image == r->image && fs[k].addr == r->addr &&
			    (!fs[k].line_note || fs[k].ninsns)) {
				annotated_function(out, db, ev, &fs[k], total);
				done++;
				break;
			}
		tally_annotate_free(fs, nf);
	}
	free(hot);
	if (!done)
		strbuf_addf(
			out,
			"<p class=\"note\">No function with %g%% or more of the samples has source lines or code to show (build with -g, or install the debug package).</p>\n",
			TALLY_HTML_ANNOTATE_MIN);
}

static void event_section(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
			  const struct tally_html_opts *o, int ev)
{
	char buf[64];
	strbuf_addf(out, "<section class=\"event\" id=\"event-%d\">\n<h2>Event ", ev);
	esc(out, db->events[ev]);
	strbuf_addstr(out, "</h2>\n<p class=\"note\">");
	esc(out, meta(db, "sampling"));
	if (list_item(meta(db, "randomized"), ev, buf, sizeof(buf)) && !strcmp(buf, "yes"))
		strbuf_addstr(out, ", randomized period");
	else if (list_item(meta(db, "period-kind"), ev, buf, sizeof(buf)) &&
		 !strcmp(buf, "adaptive"))
		strbuf_addstr(out, ", period adapted by the kernel");
	/* what the numbers are (docs/html.md) */
	if (db->weighed)
		strbuf_addf(
			out,
			". Values: %s, each sample weighted by its period (<code>--samples</code> for sample counts)",
			tally_db_unit_time(db, ev) ? "nanoseconds" : "events");
	else
		strbuf_addstr(out, ". Values: samples");
	strbuf_addstr(out, "</p>\n");

	/* the view model's rows, as the report lists them */
	struct tally_view_rows images;
	tally_view_images(&images, db, o->sel, ev);
	if (!images.total)
		strbuf_addstr(
			out,
			"<p class=\"warn nosamples\">No samples of this event in the selection.</p>\n");

	struct tally_view_cg v;
	struct tally_view_rows flat;
	const struct tally_view_rows *rows;
	bool stacks = db->has_stacks;
	memset(&v, 0, sizeof(v));
	memset(&flat, 0, sizeof(flat));
	if (stacks) {
		/* the page shows no arcs */
		tally_view_cg_build_flags(&v, db, res, o->sel, ev, TALLY_CG_NO_ARCS);
		rows = &v.funcs;
	} else {
		tally_view_functions(&flat, db, res, ev, images.v, images.n, false);
		rows = &flat;
	}
	const struct tally_cg *cg = &v.cg;
	bool graph = stacks && cg->total;
	char gid[32];
	snprintf(gid, sizeof(gid), "flame-%d", ev);

	/* the flame graph first: where the eye lands on the page */
	strbuf_addstr(out, "<h3>Flame graph</h3>\n");
	if (graph) {
		strbuf_addstr(
			out,
			"<p class=\"note\">Each box is a function, as wide as its share of the samples; the functions it called hang under it. Click to zoom and select a function (then <i>Sandwich</i>: its callers above it and callees below it, merged over every place it appears; <i>Focus</i>: only the stacks through it; <i>Ignore</i>: without them), search to highlight, a function's name in the table below shows its sandwich. <span class=\"legend\">"
			"<span style=\"background:rgb(230,125,25)\"></span>the program<span style=\"background:rgb(222,202,62)\"></span>libraries"
			"<span style=\"background:rgb(120,177,235)\"></span>kernel<span style=\"background:rgb(100,212,92)\"></span>JIT"
			"<span style=\"background:rgb(200,200,200)\"></span>other</span></p>\n");
		flame_section(out, db, cg, ev, o, false);
	} else if (stacks) {
		strbuf_addstr(
			out,
			"<p class=\"note nostacks\">No stacks for this event in the selection.</p>\n");
	} else {
		strbuf_addstr(
			out,
			"<p class=\"note nostacks\">This database has no call stacks, so there is no flame graph and no callers' graph: record with <code>-g</code> or <code>--call-graph dwarf</code> to get them.</p>\n");
	}

	strbuf_addstr(out, "<h3>Functions</h3>\n");
	if (stacks)
		strbuf_addstr(
			out,
			"<p class=\"note\">Self: samples in the function itself; inclusive: samples with the function anywhere on the stack. Percentages of the event's samples. Click a column to sort, a name to see the function in the flame graph.</p>\n");
	else
		strbuf_addstr(
			out,
			"<p class=\"note\">Samples in each function (no call stacks were recorded, so no inclusive figures). Click a column to sort.</p>\n");
	function_table(out, db, rows, stacks, o->percent_limit,
		       o->max_rows ? o->max_rows : TALLY_HTML_MAX_ROWS, graph ? gid : NULL);

	strbuf_addstr(out, "<h3>Images</h3>\n");
	image_table(out, db, ev, &images);

	if (graph) {
		strbuf_addstr(
			out,
			"<h3>Callers</h3>\n<p class=\"note\">The inverted flame graph: the functions where samples landed along the top, their callers below them.</p>\n");
		flame_section(out, db, cg, ev, o, true);
		strbuf_addstr(out, "<h3>Unwinding</h3>\n");
		unwind_figures(out, db, cg);
	}

	strbuf_addstr(out, "<h3>Annotated source</h3>\n");
	if (o->annotate)
		source_section(out, db, res, o, ev, rows);
	strbuf_addstr(out, "</section>\n");
	tally_view_rows_release(&flat);
	tally_view_rows_release(&images);
	tally_view_cg_release(&v);
}

static void session_section(struct strbuf *out, const struct tally_db *db)
{
	strbuf_addstr(out, "<section id=\"session\">\n<h2>Session</h2>\n");
	strbuf_addf(out,
		    "<p class=\"lost\">Lost: <b>%" PRIu64
		    "</b> sample%s (%.2f%%), throttled: <b>%" PRIu64 "</b> time%s.</p>\n",
		    db->lost, db->lost == 1 ? "" : "s", tally_view_lost_pct(db), db->throttled,
		    db->throttled == 1 ? "" : "s");
	strbuf_addstr(out, "<dl class=\"meta\">\n<dt>database</dt><dd>");
	esc(out, db->path);
	strbuf_addstr(out, "</dd>\n");
	for (size_t i = 0; i < db->session.n; i++) {
		strbuf_addstr(out, "<dt>");
		esc(out, db->session.kv[i].key);
		strbuf_addstr(out, "</dt><dd>");
		esc(out, db->session.kv[i].value);
		strbuf_addstr(out, "</dd>\n");
	}
	strbuf_addstr(out, "</dl>\n</section>\n");
}

/* The page up to its header's subtitle: head, style, title. */
static void page_start(struct strbuf *out, const char *what)
{
	strbuf_addstr(
		out,
		"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		/* nothing may come from anywhere: the page is the whole report */
		"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"tally " TALLY_VERSION
		"\">\n<title>tally: ");
	esc(out, what);
	strbuf_addstr(out, "</title>\n<style>\n");
	strbuf_addstr(out, tally_report_css);
	strbuf_addstr(out, "</style>\n</head><body>\n<header><h1>tally: ");
	esc(out, what);
	strbuf_addstr(out, "</h1><div class=\"sub\">");
}

/* The page's scripts and its end. */
static void page_end(struct strbuf *out)
{
	strbuf_addstr(out, "</main>\n<script>\n");
	strbuf_addstr(out, tally_flame_js);
	strbuf_addstr(out, "</script>\n<script>\n");
	strbuf_addstr(out, tally_report_js);
	strbuf_addstr(out, "</script>\n</body></html>\n");
}

void tally_html_report(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_html_opts *o)
{
	const char *what = meta(db, "command");
	if (!what)
		what = meta(db, "target");
	page_start(out, what);
	esc(out, o->input ? o->input : db->path);
	const char *start = meta(db, "start-time"), *dur = meta(db, "duration"),
		   *host = meta(db, "host");
	if (host) {
		strbuf_addstr(out, " &middot; ");
		esc(out, host);
	}
	if (start) {
		strbuf_addstr(out, " &middot; ");
		esc(out, start);
	}
	if (dur) {
		strbuf_addstr(out, " &middot; ");
		esc(out, dur);
		strbuf_addstr(out, " s");
	}
	const char *cgm = meta(db, "call-graph");
	strbuf_addstr(out, " &middot; call graphs: ");
	esc(out, cgm ? cgm : "none");
	strbuf_addstr(out, "</div></header>\n<nav>");
	for (int e = 0; e < db->nevents; e++) {
		if (!tally_select_event(o->sel, e))
			continue;
		strbuf_addf(out, "<a href=\"#event-%d\">", e);
		esc(out, db->events[e]);
		strbuf_addstr(out, "</a>");
	}
	strbuf_addstr(out, "<a href=\"#session\">session</a></nav>\n<main>\n");
	const struct tally_select *s = o->sel;
	if (s->image || s->pid || s->comm || s->excl) {
		strbuf_addstr(out, "<p class=\"note selection\">Selection:");
		if (s->image) {
			strbuf_addstr(out, " image ");
			esc(out, s->image);
		}
		if (s->pid)
			strbuf_addf(out, " pid %d", s->pid);
		if (s->comm) {
			strbuf_addstr(out, " command ");
			esc(out, s->comm);
		}
		if (s->excl)
			strbuf_addstr(out, " the programs' own executables only");
		if (db->has_stacks && (s->image || s->excl))
			strbuf_addstr(
				out,
				" (stacks are kept when the function they were sampled in is in the selected images, and show all their callers)");
		strbuf_addstr(out, "</p>\n");
	}
	if (db->lost)
		strbuf_addf(out,
			    "<p class=\"warn\">%" PRIu64
			    " sample%s lost while recording (see the session below).</p>\n",
			    db->lost, db->lost == 1 ? " was" : "s were");
	for (int e = 0; e < db->nevents; e++)
		if (tally_select_event(o->sel, e))
			event_section(out, db, res, o, e);
	session_section(out, db);
	page_end(out);
}

/* ---- tally diff --html ---- */

static void diff_pct_cell(struct strbuf *out, double p, bool none)
{
	if (none)
		strbuf_addstr(out, "<td class=\"n\" data-v=\"-1\">-</td>");
	else
		strbuf_addf(out, "<td class=\"n\" data-v=\"%.4f\">%.2f%%</td>", p, p);
}

void tally_html_diff(struct strbuf *out, const struct tally_diff *d, const struct tally_cg *base_cg,
		     const struct tally_db *base_db, const struct tally_cg *new_cg,
		     const struct tally_db *new_db, const struct tally_html_diff_opts *o)
{
	struct strbuf title = STRBUF_INIT;
	strbuf_addf(&title, "diff %s -> %s", d->base_input, d->new_input);
	page_start(out, title.buf);
	esc(out, d->event);
	strbuf_addstr(out, " &middot; base ");
	tally_view_value_unit(out, d->db, d->ev, d->base_total);
	strbuf_addstr(out, " &middot; new ");
	tally_view_value_unit(out, d->db, d->ev, d->new_total);
	strbuf_addf(out, " &middot; %s</div></header>\n<main>\n",
		    d->view == TALLY_DIFF_LINES	     ? "source lines, self"
		    : d->view == TALLY_DIFF_CHILDREN ? "functions, inclusive"
						     : "functions, self");
	if (new_cg && base_cg) {
		strbuf_addstr(
			out,
			"<section id=\"flame\">\n<h2>Differential flame graph</h2>\n<p class=\"note\">The shape of the new profile; each frame red where its self share grew, blue where it shrank, white where it did not change (Brendan Gregg's differential flame graphs). Frames are matched by the names of the functions on their path.</p>\n");
		strbuf_addstr(
			out,
			"<div class=\"tools\" data-for=\"diff-flame\"><input type=\"search\" placeholder=\"search functions (regular expression)\"> <button class=\"clear\">clear search</button><button class=\"reset\">reset view</button><span class=\"matched\"></span></div>\n<div class=\"graph\">\n");
		struct strbuf sub = STRBUF_INIT;
		tally_view_value_unit(&sub, d->db, d->ev, new_cg->total);
		strbuf_addstr(&sub, " (base ");
		tally_view_value(&sub, d->db, d->ev, base_cg->total, 0);
		strbuf_addstr(&sub, "); click a frame to zoom and select it");
		struct tally_flame_svg_opts so = {
			"Differential flame graph", sub.buf, d->event, "diff-flame", false, 0, NULL
		};
		tally_flame_diff_svg(out, base_cg, base_db, new_cg, new_db, o->percent_limit, &so);
		strbuf_release(&sub);
		strbuf_addstr(out, "</div>\n</section>\n");
	}
	strbuf_addstr(out, "<section id=\"rows\">\n<h2>Changes</h2>\n");
	strbuf_addf(
		out,
		"<p class=\"note\">%s, largest change first; rows are matched by image and function name%s.</p>\n",
		d->absolute ? "Samples of each side"
			    : "Share of each side's samples, change in points",
		d->view == TALLY_DIFF_LINES ? ", source file and line" : "");
	strbuf_addstr(
		out,
		"<table class=\"sortable diff\"><thead><tr><th data-t=\"n\" class=\"n\">base %</th><th data-t=\"n\" class=\"n\">new %</th><th data-t=\"n\" class=\"n\">change</th><th data-t=\"n\" class=\"n\">base</th><th data-t=\"n\" class=\"n\">new</th>");
	if (d->view == TALLY_DIFF_LINES)
		strbuf_addstr(out, "<th data-t=\"s\">line</th>");
	strbuf_addstr(
		out,
		"<th data-t=\"s\">function</th><th data-t=\"s\">image</th><th data-t=\"s\">only in</th></tr></thead><tbody>\n");
	uint64_t max = o->max_rows ? o->max_rows : TALLY_HTML_MAX_ROWS;
	for (size_t i = 0; i < d->n && i < max; i++) {
		const struct tally_diff_row *r = &d->v[i];
		strbuf_addf(out, "<tr class=\"%s\">",
			    r->points > 0   ? "grew"
			    : r->points < 0 ? "shrank"
					    : "same");
		diff_pct_cell(out, r->base_pct, r->only == TALLY_DIFF_NEW_ONLY);
		diff_pct_cell(out, r->new_pct, r->only == TALLY_DIFF_BASE_ONLY);
		if (d->absolute)
			strbuf_addf(out, "<td class=\"n change\" data-v=\"%.0f\">%+.0f</td>",
				    r->delta, r->delta);
		else
			strbuf_addf(out, "<td class=\"n change\" data-v=\"%.4f\">%+.2f</td>",
				    r->points, r->points);
		num_cell(out, "samples", r->base);
		num_cell(out, "samples", r->new_);
		if (d->view == TALLY_DIFF_LINES) {
			strbuf_addstr(out, "<td class=\"fn\">");
			if (r->file)
				strbuf_addf(out, "%s:%d", tally_basename(r->file), r->line);
			strbuf_addstr(out, "</td>");
		}
		strbuf_addstr(out, "<td class=\"fn\">");
		esc(out, r->name);
		strbuf_addstr(out, "</td><td class=\"img\">");
		esc(out, r->image);
		strbuf_addf(out, "</td><td>%s</td></tr>\n",
			    r->only == TALLY_DIFF_NEW_ONLY    ? "new"
			    : r->only == TALLY_DIFF_BASE_ONLY ? "base"
							      : "");
	}
	strbuf_addstr(out, "</tbody></table>\n");
	if (d->n > max)
		strbuf_addf(
			out,
			"<p class=\"note\">%zu more rows with smaller changes are left out.</p>\n",
			d->n - (size_t)max);
	strbuf_addstr(out, "</section>\n");
	strbuf_release(&title);
	page_end(out);
}

int tally_html_check_target(const char *path)
{
	struct stat st;
	if (!*path)
		return tally_seterr(-EINVAL, "no file name for the HTML report");
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return tally_seterr(-EISDIR, "cannot write '%s': it is a directory (name a file)",
				    path);
	char *dir = tally_dirname(path);
	const char *d = dir;
	int r = 0;
	if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode))
		r = tally_seterr(-ENOENT, "cannot write '%s': no directory '%s'", path, d);
	else if (access(d, W_OK | X_OK) != 0)
		r = tally_seterr(-EACCES, "cannot write '%s': directory '%s' is not writable", path,
				 d);
	free(dir);
	return r;
}

int tally_html_write(const char *path, struct tally_db *db, struct tally_resolver *res,
		     const struct tally_html_opts *o)
{
	struct strbuf out = STRBUF_INIT;
	tally_view_select(db, o->sel);
	tally_html_report(&out, db, res, o);
	int r = tally_write_file_atomic(path, out.buf, out.len);
	strbuf_release(&out);
	return r;
}
