/* The annotation's renderers: a function's source lines and instructions
 * with their samples, as text (opannotate's columns) or JSON
 * (docs/report-json.md), the sources read from where the debug information
 * says or from the directories given. The data is tally_annotate's. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tally/annotate.h"
#include "tally/json.h"
#include "tally/util.h"
#include "tally/view.h"

/* One source file of a function: its text when found. */
struct src {
	bool tried;
	char *text, *found;
	char **lines;
	size_t nlines;
};

struct ctx {
	const char **source_dirs;
	struct src *srcs;
	const struct tally_annot_func *f;
	const struct tally_db *db;
	int ev;
};

static struct src *source(struct ctx *c, uint32_t file)
{
	if (file == TALLY_ANNOT_NONE || file >= c->f->nfiles)
		return NULL;
	struct src *s = &c->srcs[file];
	if (!s->tried) {
		s->tried = true;
		tally_annot_source(c->f->files[file], c->source_dirs, &s->text, &s->lines,
				   &s->nlines, &s->found);
	}
	return s->found ? s : NULL;
}

static const char *line_text(struct ctx *c, uint32_t file, uint32_t line)
{
	struct src *s = source(c, file);
	return s && line >= 1 && line <= s->nlines ? s->lines[line - 1] : NULL;
}

static double pc(uint64_t n, uint64_t d)
{
	return d ? 100.0 * (double)n / (double)d : 0.0;
}

/* The value column (in the event's unit: tally/view.h) and its share. */
static void count_cols(const struct ctx *c, struct strbuf *out, uint64_t n, uint64_t total)
{
	if (n) {
		tally_view_value(out, c->db, c->ev, n, 9);
		strbuf_addf(out, " %7.2f%%", pc(n, total));
	} else
		strbuf_addf(out, "%9s %8s", "", "");
}

static void text_asm(struct ctx *c, struct strbuf *out)
{
	const struct tally_annot_func *f = c->f;
	strbuf_addf(out, "%9s %8s  %-16s  %s\n", tally_view_heading(c->db, c->ev), "%", "address",
		    "instruction  (source lines above their code)");
	uint32_t last = TALLY_ANNOT_NONE - 1;
	for (size_t i = 0; i < f->ninsns; i++) {
		const struct tally_annot_insn *in = &f->insns[i];
		if (in->src != last) {
			last = in->src;
			if (in->src != TALLY_ANNOT_NONE) {
				const struct tally_annot_line *l = &f->lines[in->src];
				const char *t = line_text(c, l->file, l->line);
				strbuf_addf(out, "%18s  %s:%" PRIu32 "%s%s\n", "",
					    tally_basename(f->files[l->file]), l->line,
					    t ? "  " : "", t ? t : "");
			} else {
				strbuf_addf(out, "%18s  (no line information)\n", "");
			}
		}
		count_cols(c, out, in->samples, f->samples);
		strbuf_addf(out, "  %16" PRIx64 "  %s\n", in->addr, in->text);
	}
}

static void text_func(struct ctx *c, const struct tally_db *db, int ev, bool want_asm,
		      struct strbuf *out)
{
	const struct tally_annot_func *f = c->f;
	const struct tally_db_image *im = &db->images[f->image];
	if (f->inlined) {
		strbuf_addf(out, "# %s (inlined)  [%s]  %s, inlined into ", f->name, im->name,
			    im->path[0] ? im->path : im->name);
		for (size_t i = 0; i < f->ninlined_into && i < 5; i++)
			strbuf_addf(out, "%s%s", i ? ", " : "", f->inlined_into[i]);
		if (f->ninlined_into > 5)
			strbuf_addf(out, " and %zu more", f->ninlined_into - 5);
		strbuf_addch(out, '\n');
	} else {
		strbuf_addf(out, "# %s  [%s]  %s, address 0x%" PRIx64 ", %" PRIu64 " bytes\n",
			    f->name, im->name, im->path[0] ? im->path : im->name, f->addr, f->size);
	}
	strbuf_addf(out, "# %s: ", db->events[ev]);
	tally_view_value_unit(out, db, ev, f->samples);
	strbuf_addf(out, ", %.2f%% of the image's, %.2f%% of all", pc(f->samples, f->image_samples),
		    pc(f->samples, tally_view_event_total(db, ev)));
	if (db->weighed)
		strbuf_addstr(out, " (weighted by period: --samples for sample counts)");
	strbuf_addch(out, '\n');
	struct src *main = source(c, f->main_file);
	bool show_asm = want_asm;
	if (f->line_note) {
		strbuf_addf(out, "# no source lines: %s\n", f->line_note);
		show_asm = true;
	} else if (!main) {
		strbuf_addf(
			out,
			"# source '%s' not found (point --source-dir at its tree); samples per line, then the disassembly\n",
			f->main_file != TALLY_ANNOT_NONE ? f->files[f->main_file] : "?");
		show_asm = true;
	} else {
		strbuf_addf(out, "# source: %s\n", main->found);
	}
	if (main && !want_asm) {
		strbuf_addf(out, "%9s %8s  %5s  %s\n", tally_view_heading(db, ev), "%", "line",
			    "source");
		uint32_t lo = f->first_line ? f->first_line : 1, hi = f->last_line;
		if (hi > main->nlines)
			hi = (uint32_t)main->nlines;
		for (uint32_t ln = lo; ln <= hi; ln++) {
			uint32_t k = tally_annot_line_find(f, f->main_file, ln);
			count_cols(c, out, k == TALLY_ANNOT_NONE ? 0 : f->lines[k].samples,
				   f->samples);
			strbuf_addf(out, "  %5" PRIu32 "  %s\n", ln, main->lines[ln - 1]);
		}
	}
	/* lines with samples the listing above did not show, a file's path said
	 * once above its lines (the main file's, when the header named it, not
	 * at all) */
	bool head = false;
	uint32_t file = main ? TALLY_ANNOT_NONE : f->main_file;
	for (size_t k = 0; k < f->nlines; k++) {
		const struct tally_annot_line *l = &f->lines[k];
		if (!l->samples)
			continue;
		if (main && !want_asm && l->file == f->main_file && l->line >= f->first_line &&
		    l->line <= f->last_line && l->line <= main->nlines)
			continue;
		if (!head) {
			strbuf_addf(out, "%s%9s %8s  %5s\n",
				    main && !want_asm ? "# samples in other files (inlined code):\n"
						      : "",
				    tally_view_heading(db, ev), "%", "line");
			head = true;
		}
		if (l->file != file) {
			strbuf_addf(out, "# %s\n", f->files[l->file]);
			file = l->file;
		}
		count_cols(c, out, l->samples, f->samples);
		strbuf_addf(out, "  %5" PRIu32 "\n", l->line);
	}
	if (f->no_line && !f->line_note)
	{
		strbuf_addstr(out, "# ");
		tally_view_value_unit(out, db, ev, f->no_line);
		strbuf_addf(out, " (%.2f%%) at addresses without line information\n",
			    pc(f->no_line, f->samples));
	}
	if (!show_asm)
		return;
	if (f->code_note || !f->ninsns) {
		strbuf_addf(out, "# no disassembly: %s; samples per address:\n",
			    f->code_note ? f->code_note : "no code");
		strbuf_addf(out, "%9s %8s  %s\n", tally_view_heading(db, ev), "%", "address");
		for (size_t i = 0; i < f->npts; i++) {
			count_cols(c, out, f->pt_samples[i], f->samples);
			strbuf_addf(out, "  %" PRIx64 "\n", f->pt_addr[i]);
		}
		return;
	}
	text_asm(c, out);
}

static void json_func(struct ctx *c, const struct tally_db *db, bool want_asm, struct tally_json *j)
{
	const struct tally_annot_func *f = c->f;
	const struct tally_db_image *im = &db->images[f->image];
	tally_json_obj(j);
	tally_json_kstr(j, "name", f->name);
	tally_json_kstr(j, "image", im->name);
	tally_json_kstr(j, "path", im->path);
	tally_json_key(j, "addr");
	if (f->inlined)
		tally_json_null(j);
	else
		tally_json_strf(j, "0x%" PRIx64, f->addr);
	tally_json_ku64(j, "size", f->size);
	if (f->inlined) {
		tally_json_kbool(j, "inlined", true);
		tally_json_karr(j, "inlined_into");
		for (size_t i = 0; i < f->ninlined_into; i++)
			tally_json_str(j, f->inlined_into[i]);
		tally_json_end(j);
	}
	/* "samples" is always the number of samples; "value" their weight beside
	 * it when weighted (as report's JSON: docs/report-json.md) */
	bool w = db->weighed;
#define SAMPLES_VALUE(raw, val)                      \
	do {                                         \
		tally_json_ku64(j, "samples", w ? (raw) : (val)); \
		if (w)                               \
			tally_json_ku64(j, "value", (val)); \
	} while (0)
	SAMPLES_VALUE(f->raw, f->samples);
	tally_json_knum(j, "percent_of_image", pc(f->samples, f->image_samples), 4);
	struct src *main = source(c, f->main_file);
	if (f->main_file != TALLY_ANNOT_NONE) {
		tally_json_kobj(j, "source");
		tally_json_kstr(j, "file", f->files[f->main_file]);
		tally_json_kstr(j, "found", main ? main->found : NULL);
		tally_json_ku64(j, "first_line", f->first_line);
		tally_json_ku64(j, "last_line", f->last_line);
		tally_json_end(j);
	} else {
		tally_json_knull(j, "source");
	}
	tally_json_ku64(j, "no_line_samples", w ? f->no_line_raw : f->no_line);
	if (w)
		tally_json_ku64(j, "no_line_value", f->no_line);
	if (f->line_note)
		tally_json_kstr(j, "line_note", f->line_note);
	if (f->code_note)
		tally_json_kstr(j, "code_note", f->code_note);
	tally_json_karr(j, "lines");
	for (size_t k = 0; k < f->nlines; k++) {
		const struct tally_annot_line *l = &f->lines[k];
		if (!l->samples)
			continue;
		tally_json_obj(j);
		tally_json_kstr(j, "file", f->files[l->file]);
		tally_json_ku64(j, "line", l->line);
		SAMPLES_VALUE(l->raw, l->samples);
		tally_json_knum(j, "percent", pc(l->samples, f->samples), 4);
		tally_json_kstr(j, "text", line_text(c, l->file, l->line));
		tally_json_end(j);
	}
	tally_json_end(j);
	if (!f->ninsns) {
		/* no code to show: where in the function the samples were */
		tally_json_karr(j, "addresses");
		for (size_t i = 0; i < f->npts; i++) {
			tally_json_obj(j);
			tally_json_key(j, "addr");
			tally_json_strf(j, "0x%" PRIx64, f->pt_addr[i]);
			SAMPLES_VALUE(f->pt_raw[i], f->pt_samples[i]);
			tally_json_knum(j, "percent", pc(f->pt_samples[i], f->samples), 4);
			tally_json_end(j);
		}
		tally_json_end(j);
	}
	if (want_asm) {
		tally_json_karr(j, "instructions");
		for (size_t i = 0; i < f->ninsns; i++) {
			const struct tally_annot_insn *in = &f->insns[i];
			tally_json_obj(j);
			tally_json_key(j, "addr");
			tally_json_strf(j, "0x%" PRIx64, in->addr);
			tally_json_ku64(j, "size", in->size);
			SAMPLES_VALUE(in->raw, in->samples);
			tally_json_knum(j, "percent", pc(in->samples, f->samples), 4);
			tally_json_kstr(j, "asm", in->text);
			if (in->src != TALLY_ANNOT_NONE) {
				tally_json_kstr(j, "file", f->files[f->lines[in->src].file]);
				tally_json_ku64(j, "line", f->lines[in->src].line);
			} else {
				tally_json_knull(j, "file");
				tally_json_knull(j, "line");
			}
			tally_json_end(j);
		}
		tally_json_end(j);
	}
	tally_json_end(j);
#undef SAMPLES_VALUE
}

static void release_srcs(struct ctx *c)
{
	for (size_t i = 0; c->f && i < c->f->nfiles; i++) {
		free(c->srcs[i].text);
		free(c->srcs[i].found);
		free(c->srcs[i].lines);
	}
	free(c->srcs);
	c->srcs = NULL;
}

void tally_annotate_render(const struct tally_db *db, int ev, const struct tally_annot_func *funcs,
			   size_t n, const struct tally_annotate_render_opts *o, struct strbuf *out)
{
	struct tally_json j;
	tally_json_init(&j, out);
	if (o->json) {
		tally_json_obj(&j);
		tally_json_kstr(&j, "format", "tally-annotate");
		tally_json_ki64(&j, "version", 1);
		tally_json_kstr(&j, "database", o->input);
		tally_json_kstr(&j, "event", db->events[ev]);
		tally_json_kstr(&j, "unit", tally_view_unit(db, ev));
		tally_json_karr(&j, "functions");
	}
	for (size_t i = 0; i < n; i++) {
		struct ctx c = { o->source_dirs, xcalloc(funcs[i].nfiles + 1, sizeof(struct src)),
				 &funcs[i], db, ev };
		if (o->json) {
			json_func(&c, db, o->want_asm, &j);
		} else {
			if (i)
				strbuf_addch(out, '\n');
			text_func(&c, db, ev, o->want_asm, out);
		}
		release_srcs(&c);
	}
	if (o->json) {
		tally_json_end(&j);
		tally_json_end(&j);
		strbuf_addch(out, '\n');
	}
}
