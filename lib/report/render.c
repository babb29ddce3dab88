/* The report's text and JSON renderers (see report.h): the per-image summary
 * (iprof), functions and lines per image (iprof -f, opreport --symbols and
 * --debug-info), the call-graph views and --explain, from the view model's
 * rows (view.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/demangle.h"
#include "tally/diff.h"
#include "tally/json.h"
#include "tally/report.h"
#include "tally/view.h"

#define pc tally_view_pct

bool tally_report_is_cg(const struct tally_report_opts *o)
{
	return o->children || o->callgraph || o->tree || o->callers || o->callees;
}

/* "name", "path", "id" and "id_kind" of an image, the fields every JSON view names it by. */
static void json_image_id(struct tally_json *j, const struct tally_db_image *im)
{
	tally_json_kstr(j, "name", im->name);
	tally_json_kstr(j, "path", im->path);
	tally_json_kstr(j, "id", im->id);
	tally_json_kstr(j, "id_kind", im->id_kind);
}

static void pct(struct strbuf *sb, uint64_t n, uint64_t total)
{
	strbuf_addf(sb, "%7.2f%%", pc(n, total));
}

static bool shown(const struct tally_report_opts *o, size_t i)
{
	return !o->top || i < o->top;
}

/* A row of a flat table (rows by samples): within --top and --percent-limit
 * (of what its % column shows). */
static bool shown_flat(const struct tally_report_opts *o, size_t i, uint64_t n, uint64_t of)
{
	return shown(o, i) && pc(n, of) >= o->percent_limit;
}

/* Whether item i of a comma-separated list equals want. */
static bool list_item_is(const char *list, int i, const char *want)
{
	const char *p = list;
	for (int k = 0; k < i && p; k++) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	size_t n = strlen(want);
	return p && !strncmp(p, want, n) && (p[n] == ',' || !p[n]);
}

/* What the numbers are: time or events weighted by each sample's period,
 * off-CPU waits weighed by their time, or (--samples) their counts; of a
 * label selection, its samples. */
static void values_line(const struct tally_db *db, int ev, const struct tally_view_labelspan *span,
			struct strbuf *out)
{
	strbuf_addstr(out, "# values: ");
	tally_view_values_desc_sel(out, db, ev, span->samples,
				   span->active ? span->what.buf : NULL);
	strbuf_addch(out, '\n');
}

/* The header: what ran, when and for how long, the event, the values. Of a
 * label selection (--label, a --by-label group): the recordings its samples
 * came from (the merge's sources), not the whole merge. */
static void text_header(const struct tally_db *db, const struct tally_select *sel, int ev,
			struct strbuf *out)
{
	struct tally_view_labelspan span;
	tally_view_labelspan(&span, db, sel, ev);
	const char *target = tally_meta_get(&db->session, "command");
	const char *rnd = tally_meta_get(&db->session, "randomized");
	const char *dur = tally_meta_get(&db->session, "duration");
	const char *start = tally_meta_get(&db->session, "start-time");
	char secs[32];
	if (span.nsources) {
		target = span.command ? span.command : tally_meta_get(&db->session, "target");
		start = span.start;
		dur = NULL;
		if (span.duration >= 0) {
			snprintf(secs, sizeof(secs), "%.3f", span.duration);
			dur = secs;
		}
	}
	if (!target)
		target = tally_meta_get(&db->session, "target");
	strbuf_addf(out, "# %s", db->path);
	if (span.active) {
		strbuf_addstr(out, " [");
		strbuf_add_excerpt(out, span.what.buf, span.what.len, span.what.len);
		strbuf_addch(out, ']');
	}
	strbuf_addstr(out, ": ");
	if (target) /* the command line as typed: its control bytes never reach the terminal raw */
		strbuf_add_excerpt(out, target, strlen(target), strlen(target));
	else
		strbuf_addstr(out, "(what ran was not recorded)");
	if (start)
		strbuf_addf(out, ", %s", start);
	if (dur)
		strbuf_addf(out, ", %s s", dur);
	if (span.nsources > 1)
		strbuf_addf(out, " (%zu recordings)", span.nsources);
	else if (span.active && !span.nsources && dur)
		strbuf_addstr(out, " (the whole merge's: it keeps no times per recording)");
	const char *epochs = tally_meta_get(&db->session, "epochs");
	if (epochs)
		strbuf_addf(out, ", epoch%s %s", strchr(epochs, ' ') ? "s" : "", epochs);
	const char *kind = tally_meta_get(&db->session, "period-kind");
	strbuf_addstr(out, "\n# event: ");
	tally_view_event_desc(out, db, ev);
	if (db->walled && ev == db->wall[0]) {
		/* said in the event's description */
	} else if (list_item_is(rnd, ev, "yes")) {
		/* say when the redraws did not reach every long-sampled task (docs/sampling.md) */
		const char *rt = tally_meta_get(&db->session, "randomized-samples");
		for (int i = 0; rt && i < ev; i++) {
			rt = strchr(rt, ',');
			rt = rt ? rt + 1 : NULL;
		}
		unsigned long long reached, total;
		if (rt && sscanf(rt, "%llu/%llu", &reached, &total) == 2 && reached < total)
			strbuf_addf(
				out,
				" (randomized for %.2f%% of the samples; the threads and children started later kept one period each)",
				100.0 * (double)reached / (double)total);
		else
			strbuf_addstr(out, " (randomized)");
	}
	else if (list_item_is(kind, ev, "adaptive"))
		strbuf_addstr(out, " (period adapted by the kernel)");
	strbuf_addch(out, '\n');
	values_line(db, ev, &span, out);
	tally_view_labelspan_release(&span);
}

static void lost_line(const struct tally_db *db, struct strbuf *out)
{
	strbuf_addf(out, "lost: %" PRIu64 " sample%s (%.2f%%), throttled: %" PRIu64 " time%s\n",
		    db->lost, db->lost == 1 ? "" : "s", tally_view_lost_pct(db), db->throttled,
		    db->throttled == 1 ? "" : "s");
}

/* A function's name in a text column: short (demangle.h) unless full. */
static void add_name(struct strbuf *out, const char *name, bool full)
{
	if (full)
		strbuf_addstr(out, name);
	else
		tally_name_short(out, name);
}

/* ---- the flat views: images, functions, lines ---- */

static void text_functions(struct strbuf *out, const struct tally_db *db,
			   struct tally_resolver *res, const struct tally_report_opts *o, int ev,
			   const struct tally_view_row *img, uint64_t total)
{
	const struct tally_db_image *im = &db->images[img->image];
	struct tally_view_rows fr;
	tally_view_functions(&fr, db, res, ev, img, 1, o->lines);
	strbuf_addf(out, "\n%s (", im->path[0] ? im->path : im->name);
	tally_view_value_unit(out, db, ev, img->samples);
	strbuf_addf(out, ", %.2f%% of total)\n", pc(img->samples, total));
	if (img->pid && db->per_pid)
		strbuf_addf(out, "pid %d (%s)\n", img->pid,
			    tally_db_comm(db, img->pid) ? tally_db_comm(db, img->pid) : "?");
	bool any_line = false;
	for (size_t k = 0; k < fr.n && !any_line; k++)
		any_line = fr.v[k].file != NULL;
	if (o->lines && !any_line && !tally_resolver_has_dwarf(res, img->image))
		strbuf_addstr(
			out,
			"(no source lines: no debug info found for this image; see --explain)\n");
	int w = 18;
	if (o->lines)
		for (size_t k = 0; k < fr.n && shown_flat(o, k, fr.v[k].samples, img->samples); k++)
			if (fr.v[k].file) {
				int len = (int)strlen(tally_basename(fr.v[k].file)) + 1 +
					  snprintf(NULL, 0, "%d", fr.v[k].line);
				if (len > w)
					w = len > 48 ? 48 : len;
			}
	strbuf_addf(out, "%9s %8s %8s  %-*s  %s\n", tally_view_heading(db, ev), "%", "cum%", w,
		    o->lines ? "line" : "addr", "function");
	struct strbuf loc = STRBUF_INIT;
	uint64_t cum = 0;
	for (size_t k = 0; k < fr.n && shown_flat(o, k, fr.v[k].samples, img->samples); k++) {
		const struct tally_view_row *r = &fr.v[k];
		cum += r->samples;
		tally_view_value(out, db, ev, r->samples, 9);
		strbuf_addch(out, ' ');
		pct(out, r->samples, img->samples);
		strbuf_addch(out, ' ');
		pct(out, cum, img->samples);
		strbuf_reset(&loc);
		if (o->lines && r->file)
			strbuf_addf(&loc, "%s:%d", tally_basename(r->file), r->line);
		else if (o->lines)
			strbuf_addstr(&loc, "-");
		else if (r->has_addr)
			strbuf_addf(&loc, "0x%016" PRIx64, r->addr);
		else
			strbuf_addstr(&loc, "-");
		strbuf_addf(out, "  %*s  ", o->lines ? -w : w, loc.buf);
		add_name(out, r->name, o->full_names);
		strbuf_addstr(out, r->inlined ? " (inlined)\n" : "\n");
	}
	strbuf_release(&loc);
	tally_view_value(out, db, ev, img->samples, 9);
	strbuf_addf(out, " %17s  Total\n", "");
	tally_view_rows_release(&fr);
}

/* --flat: one table of the functions (or lines) of every selected image, by
 * samples (perf report's default view, pprof -top). */
static void text_flat(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		      const struct tally_report_opts *o, int ev, const struct tally_view_rows *t)
{
	struct tally_view_rows fr;
	tally_view_functions(&fr, db, res, ev, t->v, t->n, o->lines);
	strbuf_addf(out, "%9s %8s %8s  %s\n", tally_view_heading(db, ev), "%", "cum%",
		    o->lines ? "line  function  [image]" : "function  [image]");
	uint64_t cum = 0;
	for (size_t k = 0; k < fr.n && shown_flat(o, k, fr.v[k].samples, t->total); k++) {
		const struct tally_view_row *r = &fr.v[k];
		cum += r->samples;
		tally_view_value(out, db, ev, r->samples, 9);
		strbuf_addch(out, ' ');
		pct(out, r->samples, t->total);
		strbuf_addch(out, ' ');
		pct(out, cum, t->total);
		strbuf_addstr(out, "  ");
		if (o->lines)
			strbuf_addf(out, r->file ? "%s:%d  " : "-  ",
				    r->file ? tally_basename(r->file) : "", r->line);
		add_name(out, r->name, o->full_names);
		strbuf_addf(out, "%s  [%s]\n", r->inlined ? " (inlined)" : "",
			    db->images[r->image].name);
	}
	tally_view_value(out, db, ev, t->total, 9);
	strbuf_addf(out, " %17s  Total\n", "");
	tally_view_rows_release(&fr);
}

static void text_event(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_report_opts *o, int ev)
{
	struct tally_view_rows t;
	tally_view_images(&t, db, o->sel, ev);
	text_header(db, o->sel, ev, out);
	if (!o->symbols && !o->lines) {
		strbuf_addf(out, "%9s %8s %8s  %s\n", tally_view_heading(db, ev), "%", "cum%",
			    "image");
		uint64_t cum = 0;
		for (size_t i = 0; i < t.n && shown_flat(o, i, t.v[i].samples, t.total); i++) {
			cum += t.v[i].samples;
			tally_view_value(out, db, ev, t.v[i].samples, 9);
			strbuf_addch(out, ' ');
			pct(out, t.v[i].samples, t.total);
			strbuf_addch(out, ' ');
			pct(out, cum, t.total);
			strbuf_addf(out, "  %s\n", t.v[i].name);
		}
		tally_view_value(out, db, ev, t.total, 9);
		strbuf_addf(out, " %17s  Total\n", "");
	} else if (o->flat) {
		text_flat(out, db, res, o, ev, &t);
	} else {
		/* the images JSON lists: the top N, at least the limit */
		for (size_t i = 0; i < t.n && shown_flat(o, i, t.v[i].samples, t.total); i++)
			text_functions(out, db, res, o, ev, &t.v[i], t.total);
	}
	tally_view_rows_release(&t);
}

/* A flat row's numbers: its samples, and its value (in the event's unit)
 * when db is period-weighted. */
static void json_values(struct tally_json *j, const struct tally_db *db, uint64_t samples,
			uint64_t value)
{
	tally_json_ku64(j, "samples", samples);
	if (db->weighed)
		tally_json_ku64(j, "value", value);
}

/* The functions (or lines, --lines) of one image (img) with their share of
 * its samples and of the total, or with img NULL the flat list (--flat) of
 * every image of t, each naming its image, with their share of the total. */
static void json_functions(struct tally_json *j, const struct tally_db *db,
			   struct tally_resolver *res, const struct tally_report_opts *o, int ev,
			   const struct tally_view_rows *t, const struct tally_view_row *img)
{
	uint64_t base = img ? img->samples : t->total;
	struct tally_view_rows fr;
	tally_view_functions(&fr, db, res, ev, img ? img : t->v, img ? 1 : t->n, o->lines);
	if (img && o->lines)
		tally_json_kbool(j, "debug_info", tally_resolver_has_dwarf(res, img->image));
	tally_json_karr(j, o->lines ? "lines" : "functions");
	for (size_t k = 0; k < fr.n && shown_flat(o, k, fr.v[k].samples, base); k++) {
		const struct tally_view_row *r = &fr.v[k];
		tally_json_obj(j);
		if (o->lines) {
			tally_json_kstr(j, "file", r->file);
			if (r->file && r->line)
				tally_json_ki64(j, "line", r->line);
			else
				tally_json_knull(j, "line");
			tally_json_kstr(j, "function", r->name);
		} else {
			tally_json_kstr(j, "name", r->name);
		}
		if (!img)
			tally_json_kstr(j, "image", db->images[r->image].name);
		if (r->inlined)
			tally_json_kbool(j, "inlined", true);
		if (!o->lines) {
			tally_json_key(j, "addr");
			if (r->has_addr)
				tally_json_strf(j, "0x%" PRIx64, r->addr);
			else
				tally_json_null(j);
		}
		json_values(j, db, r->nsamples, r->samples);
		tally_json_knum(j, "percent", pc(r->samples, base), 4);
		if (img)
			tally_json_knum(j, "percent_of_total", pc(r->samples, t->total), 4);
		tally_json_end(j);
	}
	tally_json_end(j);
	tally_view_rows_release(&fr);
}

static void json_event(struct tally_json *j, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_report_opts *o, int ev)
{
	struct tally_view_rows t;
	tally_view_images(&t, db, o->sel, ev);
	tally_json_obj(j);
	tally_json_kstr(j, "name", db->events[ev]);
	tally_json_kstr(j, "unit", tally_view_unit(db, ev));
	json_values(j, db, t.ntotal, t.total);
	if (o->flat) {
		json_functions(j, db, res, o, ev, &t, NULL);
		tally_json_end(j);
		tally_view_rows_release(&t);
		return;
	}
	tally_json_karr(j, "images");
	bool fn = o->symbols || o->lines;
	for (size_t i = 0; i < t.n && shown_flat(o, i, t.v[i].samples, t.total); i++) {
		const struct tally_view_row *r = &t.v[i];
		const struct tally_db_image *im = &db->images[r->image];
		tally_json_obj(j);
		json_image_id(j, im);
		tally_json_kstr(j, "kind", im->kind);
		if (r->pid)
			tally_json_ki64(j, "pid", r->pid);
		else
			tally_json_knull(j, "pid");
		json_values(j, db, r->nsamples, r->samples);
		tally_json_knum(j, "percent", pc(r->samples, t.total), 4);
		if (tally_resolver_mismatch(res, r->image) ||
		    (fn && tally_resolver_note(res, r->image)))
			tally_json_kstr(j, "note", tally_resolver_note(res, r->image));
		if (fn)
			json_functions(j, db, res, o, ev, &t, r);
		tally_json_end(j);
	}
	tally_json_end(j);
	tally_json_end(j);
	tally_view_rows_release(&t);
}

/* ---- call graphs ---- */

static void fname(struct strbuf *out, const struct tally_db *db, const struct tally_cg *cg,
		  uint32_t f, bool full)
{
	const struct tally_cg_func *fn = &cg->funcs[f];
	add_name(out, fn->name, full);
	strbuf_addf(out, "%s  [%s]", fn->inlined ? " (inlined)" : "", db->images[fn->image].name);
}

/* Frame-pointer chains and the functions without a frame pointer at the top
 * of the stack (docs/callgraph.md): what the recording unwound with CFI and
 * put back, and where it could not finish. A recording from before the
 * repair went past the first frame says only the leaf's part. */
static void fp_leaf_part(const struct tally_db *db, struct strbuf *out, struct tally_json *j)
{
	static const char *const stop_keys[TALLY_FP_NSTOPS_SAID] = {
		"no_cfi", "stack_copy_too_small", "chain_not_rejoined", "depth_limit"
	};
	static const char *const stop_says[TALLY_FP_NSTOPS_SAID] = {
		"no CFI", "stack copy too small", "chain not rejoined", "depth limit"
	};
	const char *cgm = tally_meta_get(&db->session, "call-graph");
	if (!cgm || strcmp(cgm, "fp"))
		return;
	const char *ck = tally_meta_get(&db->session, "fp-leaf-checked");
	const char *rp = tally_meta_get(&db->session, "fp-leaf-repaired");
	const char *un = tally_meta_get(&db->session, "fp-leaf-unchecked");
	const char *fs = tally_meta_get(&db->session, "fp-repair-stops");
	const char *fr = tally_meta_get(&db->session, "fp-repair-frames");
	const char *copy = tally_meta_get(&db->session, "fp-leaf-stack");
	unsigned long long c = 0, r = 0, u = 0, nf = 0;
	uint64_t stops[TALLY_FP_NSTOPS_SAID];
	bool known = ck && rp && un && sscanf(ck, "%llu", &c) == 1 && sscanf(rp, "%llu", &r) == 1 &&
		     sscanf(un, "%llu", &u) == 1;
	bool deep = known && fs && fr && tally_fp_stops_parse(fs, stops) &&
		    sscanf(fr, "%llu", &nf) == 1;
	if (j) {
		if (known) {
			tally_json_kobj(j, "fp_leaf");
			tally_json_ku64(j, "checked", c);
			tally_json_ku64(j, "repaired", r);
			tally_json_ku64(j, "unchecked", u);
			if (deep) {
				tally_json_ku64(j, "frames", nf);
				tally_json_kobj(j, "stops");
				for (size_t i = 0; i < TALLY_FP_NSTOPS_SAID; i++)
					tally_json_ku64(j, stop_keys[i], stops[i]);
				tally_json_end(j);
			}
			tally_json_end(j);
		} else {
			tally_json_knull(j, "fp_leaf");
		}
		return;
	}
	if (!known) {
		strbuf_addstr(
			out,
			"; frame-pointer chains skip the caller of a function that set up no frame (a leaf at -O2), and this recording did not check for it");
		return;
	}
	if (!deep) {
		strbuf_addf(
			out,
			"; frame pointers: the caller of a function without a frame was put back from the stack in %.2f%% of the stacks",
			c ? 100.0 * (double)r / (double)c : 0.0);
		if (u)
			strbuf_addf(
				out,
				", and %.2f%% could not be checked (no CFI, or the return address beyond the %s-byte stack copy): a caller may be missing there",
				c ? 100.0 * (double)u / (double)c : 0.0, copy ? copy : "?");
		return;
	}
	strbuf_addf(
		out,
		"; frame pointers: functions without a frame pointer at the top of the stack were unwound with CFI in %.2f%% of the stacks (%.1f frames put back in each)",
		c ? 100.0 * (double)r / (double)c : 0.0, r ? (double)nf / (double)r : 0.0);
	if (u) {
		strbuf_addf(out, ", and the chain could not be rejoined in %.2f%% (",
			    c ? 100.0 * (double)u / (double)c : 0.0);
		bool first = true;
		for (size_t i = 0; i < TALLY_FP_NSTOPS_SAID; i++) {
			if (!stops[i])
				continue;
			strbuf_addf(out, "%s%s %.2f%%", first ? "" : ", ", stop_says[i],
				    100.0 * (double)stops[i] / (double)c);
			if (i == 1)
				strbuf_addf(out, " of %s bytes", copy ? copy : "?");
			first = false;
		}
		strbuf_addstr(out, "): a caller may be missing there");
		/* a copy too small for the program's frames (sqlite3's shell has
		 * frames of 2 and 5 KiB) is the user's to raise: say how */
		unsigned long long have = copy ? strtoull(copy, NULL, 10) : 0;
		if (stops[1] * 100 >= c && have && have < 65528)
			strbuf_addf(out,
				    "; a larger stack copy reaches further (--call-graph fp,%llu, or dwarf)",
				    have < 16384 ? 16384ULL : 65528ULL);
	}
}

/* the same as keys of the JSON object at hand */
static void json_fname(struct tally_json *j, const struct tally_db *db, const struct tally_cg *cg,
		       uint32_t f)
{
	const struct tally_cg_func *fn = &cg->funcs[f];
	tally_json_kstr(j, "name", fn->name);
	tally_json_kstr(j, "image", db->images[fn->image].name);
	if (fn->inlined)
		tally_json_kbool(j, "inlined", true);
}

static void unwind_line(const struct tally_db *db, const struct tally_cg *cg, struct strbuf *out,
			struct tally_json *j, bool full)
{
	uint32_t sf[5];
	uint64_t sc[5], sn[5];
	size_t ns = tally_cg_stops_n(cg, sf, sc, sn, 5);
	if (j) {
		tally_json_kobj(j, "unwind");
		json_values(j, db, cg->ntotal, cg->total);
		tally_json_ku64(j, "rooted", cg->nrooted);
		if (db->weighed)
			tally_json_ku64(j, "rooted_value", cg->rooted);
		tally_json_knum(j, "rooted_percent", pc(cg->nrooted, cg->ntotal), 4);
		tally_json_ku64(j, "truncated", cg->ntruncated);
		if (db->weighed)
			tally_json_ku64(j, "truncated_value", cg->truncated);
		tally_json_karr(j, "stops");
		for (size_t i = 0; i < ns; i++) {
			tally_json_obj(j);
			json_fname(j, db, cg, sf[i]);
			json_values(j, db, sn[i], sc[i]);
			tally_json_knum(j, "percent", pc(sn[i], cg->ntotal), 4);
			tally_json_end(j);
		}
		tally_json_end(j);
		const char *jw = tally_meta_get(&db->session, "dwarf-stop-reasons");
		if (jw)
			tally_json_kstr(j, "dwarf_stop_reasons", jw);
		fp_leaf_part(db, out, j);
		tally_json_end(j);
		return;
	}
	/* how well stacks were unwound: a matter of samples, whatever they weigh */
	strbuf_addf(out,
		    "unwind: %.2f%% of %" PRIu64
		    " samples reached a process root (_start, thread start, kernel thread)",
		    pc(cg->nrooted, cg->ntotal), cg->ntotal);
	if (cg->nrooted < cg->ntotal) {
		strbuf_addf(out, "; %.2f%% stopped early",
			    pc(cg->ntotal - cg->nrooted, cg->ntotal));
		if (cg->truncated)
			strbuf_addf(out, " (%.2f%% at the depth limit)",
				    pc(cg->ntruncated, cg->ntotal));
		strbuf_addstr(out, ", outermost frame:");
		for (size_t i = 0; i < ns; i++) {
			strbuf_addf(out, "%s %.2f%% ", i ? "," : "", pc(sn[i], cg->ntotal));
			fname(out, db, cg, sf[i], full);
		}
		const char *why = tally_meta_get(&db->session, "dwarf-stop-reasons");
		if (why)
			strbuf_addf(
				out,
				"; DWARF unwinds stopped early by cause: %s (recording-wide, before the fp chain was joined)",
				why);
	}
	fp_leaf_part(db, out, NULL);
	strbuf_addch(out, '\n');
}

/* The text tree indents two spaces a level up to this depth; deeper levels
 * (a recursion thousands of calls deep) keep that indent and say their depth,
 * so the output grows with the number of nodes, not with its square. */
#define TREE_INDENT_MAX 40

static void tree_line(const struct tally_db *db, int ev, const struct tally_cg *cg,
		      const struct tally_cg_node *nd, int depth, uint64_t base, struct strbuf *out,
		      bool full)
{
	int ind = depth < TREE_INDENT_MAX ? depth : TREE_INDENT_MAX;
	strbuf_addf(out, "%*s", ind * 2, "");
	if (depth > TREE_INDENT_MAX)
		strbuf_addf(out, "[depth %d] ", depth);
	strbuf_addf(out, "%7.2f%% ", pc(nd->count, base));
	tally_view_value(out, db, ev, nd->count, 9);
	strbuf_addstr(out, "  ");
	fname(out, db, cg, nd->func, full);
	strbuf_addch(out, '\n');
}

/* The tree under node 0 (not printed itself), depth first, children by count:
 * text (j NULL) or nested JSON objects. A loop with its own stack, not a
 * recursion: a stack can be 500,000 frames deep. */
static void tree_print(const struct tally_db *db, int ev, const struct tally_cg *cg,
		       const struct tally_cg_node *nodes, uint64_t base, double limit,
		       struct strbuf *out, struct tally_json *j, bool full)
{
	struct level {
		uint32_t *kids;
		size_t nk, next;
	} *st = NULL;
	size_t n = 0, alloc = 0;
	GROW(st, alloc, 1);
	st[0].kids = tally_view_tree_kids(nodes, 0, base, limit, &st[0].nk);
	st[0].next = 0;
	n = 1;
	while (n) {
		struct level *lv = &st[n - 1];
		if (lv->next == lv->nk) {
			free(lv->kids);
			n--;
			if (n && j) {
				tally_json_end(j); /* children */
				tally_json_end(j); /* the node */
			}
			continue;
		}
		uint32_t at = lv->kids[lv->next++];
		const struct tally_cg_node *nd = &nodes[at];
		int depth = (int)n; /* node 0's children are at depth 1 in JSON, 0 in text */
		if (j) {
			tally_json_obj(j);
			json_fname(j, db, cg, nd->func);
			json_values(j, db, nd->nsamples, nd->count);
			tally_json_knum(j, "percent", pc(nd->count, base), 4);
			tally_json_karr(j, "children");
		} else {
			tree_line(db, ev, cg, nd, depth - 1, base, out, full);
		}
		GROW(st, alloc, n + 1);
		st[n].kids = tally_view_tree_kids(nodes, at, base, limit, &st[n].nk);
		st[n].next = 0;
		n++;
	}
	free(st);
}

static int cmp_arc_count(const void *a, const void *b, void *ctx)
{
	const struct tally_cg_arc *arcs = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (arcs[x].count != arcs[y].count)
		return arcs[x].count > arcs[y].count ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* --callgraph, one function: callers above, callees below, each by count. */
static void text_callgraph_entry(struct strbuf *out, const struct tally_db *db, int ev,
				 const struct tally_view_cg *v, const struct tally_view_row *f,
				 bool full)
{
	const struct tally_cg *cg = &v->cg;
	strbuf_addstr(
		out,
		"--------------------------------------------------------------------------\n");
	for (int dir = 0; dir < 2; dir++) {
		if (dir == 1) {
			tally_view_value(out, db, ev, f->incl, 9);
			strbuf_addf(out, " %7.2f%%  self ", pc(f->incl, cg->total));
			tally_view_value(out, db, ev, f->samples, 0);
			strbuf_addf(out, " %.2f%%  ", pc(f->samples, cg->total));
			fname(out, db, cg, f->func, full);
			strbuf_addch(out, '\n');
		}
		size_t na;
		const uint32_t *group = tally_view_cg_arcs(v, f->func, dir, &na);
		uint32_t *arcs = xmalloc((na + 1) * sizeof(uint32_t));
		memcpy(arcs, group, na * sizeof(uint32_t));
		qsort_r(arcs, na, sizeof(uint32_t), cmp_arc_count, cg->arcs);
		for (size_t i = 0; i < na; i++) {
			const struct tally_cg_arc *arc = &cg->arcs[arcs[i]];
			tally_view_value(out, db, ev, arc->count, 20);
			strbuf_addf(out, " %7.2f%%  %s ", pc(arc->count, f->incl),
				    dir ? "->" : "<-");
			fname(out, db, cg, dir ? arc->callee : arc->caller, full);
			strbuf_addch(out, '\n');
		}
		free(arcs);
	}
}

static void json_cg_function(struct tally_json *j, const struct tally_db *db,
			     const struct tally_view_cg *v, const struct tally_view_row *f)
{
	const struct tally_cg *cg = &v->cg;
	json_fname(j, db, cg, f->func);
	const struct tally_cg_func *cf = &cg->funcs[f->func];
	tally_json_ku64(j, "self", cf->nself);
	tally_json_ku64(j, "inclusive", cf->nincl);
	if (db->weighed) {
		tally_json_ku64(j, "self_value", f->samples);
		tally_json_ku64(j, "inclusive_value", f->incl);
	}
	tally_json_knum(j, "self_percent", pc(f->samples, cg->total), 4);
	tally_json_knum(j, "inclusive_percent", pc(f->incl, cg->total), 4);
	for (int dir = 0; dir < 2; dir++) {
		tally_json_karr(j, dir ? "callees" : "callers");
		size_t na;
		const uint32_t *arcs = tally_view_cg_arcs(v, f->func, dir, &na);
		for (size_t i = 0; i < na; i++) {
			const struct tally_cg_arc *arc = &cg->arcs[arcs[i]];
			tally_json_obj(j);
			json_fname(j, db, cg, dir ? arc->callee : arc->caller);
			json_values(j, db, arc->nsamples, arc->count);
			tally_json_knum(j, "percent", pc(arc->count, f->incl), 4);
			tally_json_end(j);
		}
		tally_json_end(j);
	}
}

static void cg_event(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		     const struct tally_report_opts *o, int ev, struct tally_json *j,
		     struct tally_warnings *w)
{
	bool json = j != NULL, full = o->full_names;
	struct tally_view_cg v;
	/* arcs only for the views that show them */
	tally_view_cg_build_flags(&v, db, res, o->sel, ev,
				  o->callgraph || json ? 0 : TALLY_CG_NO_ARCS);
	const struct tally_cg *cg = &v.cg;
	const char *focus_name = o->callers ? o->callers : o->callees;
	long focus = -1;
	if (focus_name) {
		focus = tally_cg_find(cg, focus_name);
		if (focus < 0)
			tally_warnings_add(w, "no function '%s' in the stacks of event '%s'",
					   focus_name, db->events[ev]);
	}
	if (json) {
		tally_json_obj(j);
		tally_json_kstr(j, "name", db->events[ev]);
		tally_json_kstr(j, "unit", tally_view_unit(db, ev));
		json_values(j, db, cg->ntotal, cg->total);
		tally_json_karr(j, "functions");
	} else {
		text_header(db, o->sel, ev, out);
	}
	if (o->children || o->callgraph || json) {
		if (!json && o->children)
			strbuf_addf(out, "%9s %9s %9s  %s\n", "children", "self",
				    tally_view_heading(db, ev), "function  [image]");
		for (size_t k = 0; k < v.funcs.n; k++) {
			const struct tally_view_row *f = &v.funcs.v[k];
			if (!shown(o, k) || pc(f->incl, cg->total) < o->percent_limit)
				break;
			if (json) {
				tally_json_obj(j);
				json_cg_function(j, db, &v, f);
				tally_json_end(j);
			} else if (o->children) {
				strbuf_addf(out, "%8.2f%% %8.2f%% ", pc(f->incl, cg->total),
					    pc(f->samples, cg->total));
				tally_view_value(out, db, ev, f->incl, 9);
				strbuf_addstr(out, "  ");
				fname(out, db, cg, f->func, full);
				strbuf_addch(out, '\n');
			} else {
				text_callgraph_entry(out, db, ev, &v, f, full);
			}
		}
		if (json)
			tally_json_end(j);
	}
	if (o->tree || focus_name) {
		size_t nn = 0;
		struct tally_cg_node *nodes =
			focus_name && focus < 0 ? NULL
						: tally_cg_tree(cg, focus, o->callers != NULL, &nn);
		uint64_t base = nodes ? nodes[0].count : 0;
		if (json) {
			tally_json_karr(j, "tree");
			if (nodes)
				tree_print(db, ev, cg, nodes, base, o->percent_limit, out, j, full);
			tally_json_end(j);
		} else if (nodes) {
			if (focus_name) {
				strbuf_addf(out, "# %s of %s: percentages of its ",
					    o->callers ? "callers" : "callees", focus_name);
				tally_view_value(out, db, ev, base, 0);
				strbuf_addf(out, " inclusive %s\n", tally_view_heading(db, ev));
			}
			tree_print(db, ev, cg, nodes, base, o->percent_limit, out, NULL, full);
		}
		tally_cg_tree_free(nodes, nn);
	}
	unwind_line(db, cg, out, j, full);
	if (json)
		tally_json_end(j);
	tally_view_cg_release(&v);
}

/* ---- the report ---- */

void tally_report_text(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_report_opts *o, struct tally_warnings *w)
{
	bool cg = tally_report_is_cg(o), first = true;
	for (int e = 0; e < db->nevents; e++) {
		if (!tally_select_event(o->sel, e))
			continue;
		if (!first)
			strbuf_addch(out, '\n');
		first = false;
		if (cg)
			cg_event(out, db, res, o, e, NULL, w);
		else
			text_event(out, db, res, o, e);
	}
	lost_line(db, out);
}

void tally_report_json(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_report_opts *o, struct tally_warnings *w)
{
	struct tally_json j;
	tally_json_init(&j, out);
	tally_json_obj(&j);
	tally_json_kstr(&j, "format", "tally-report");
	tally_json_ki64(&j, "version", 1);
	tally_json_kstr(&j, "database", o->input);
	tally_json_kobj(&j, "session");
	for (size_t i = 0; i < db->session.n; i++)
		tally_json_kstr(&j, db->session.kv[i].key, db->session.kv[i].value);
	tally_json_end(&j);
	tally_json_ku64(&j, "lost", db->lost);
	tally_json_ku64(&j, "throttled", db->throttled);
	struct tally_view_labelspan span;
	tally_view_labelspan(&span, db, o->sel,
			     o->sel && o->sel->ev_only >= 0 ? o->sel->ev_only : 0);
	if (span.active) {
		/* a label selection's own times: the session above is the whole merge's */
		tally_json_kobj(&j, "selection");
		tally_json_kstr(&j, "labels", span.what.buf);
		tally_json_ku64(&j, "recordings", span.nsources);
		if (span.duration >= 0)
			tally_json_knum(&j, "duration", span.duration, 3);
		else
			tally_json_knull(&j, "duration");
		tally_json_kstr(&j, "start_time", span.start);
		tally_json_kstr(&j, "stop_time", span.stop);
		tally_json_kstr(&j, "command", span.command);
		tally_json_end(&j);
	}
	tally_view_labelspan_release(&span);
	tally_json_karr(&j, "events");
	bool cg = tally_report_is_cg(o);
	for (int e = 0; e < db->nevents; e++) {
		if (!tally_select_event(o->sel, e))
			continue;
		if (cg)
			cg_event(out, db, res, o, e, &j, w);
		else
			json_event(&j, db, res, o, e);
	}
	tally_json_end(&j);
	tally_json_end(&j);
	strbuf_addch(out, '\n');
}

int tally_report_explain(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
			 const struct tally_report_opts *o, int ev, bool json)
{
	bool any = false;
	struct tally_json j;
	tally_json_init(&j, out);
	if (json) {
		tally_json_obj(&j);
		tally_json_kstr(&j, "format", "tally-explain");
		tally_json_ki64(&j, "version", 1);
		tally_json_karr(&j, "images");
	}
	for (uint32_t i = 0; i < db->nimages; i++) {
		const struct tally_db_image *im = &db->images[i];
		if (o->explain_image && !tally_select_image_matches(im, o->explain_image))
			continue;
		uint64_t total = 0, named = 0, lined = 0, by_addr = 0, in_sec = 0;
		bool selected = false;
		for (size_t p = 0; p < db->nprofs; p++) {
			const struct tally_db_prof *pf = &db->profs[p];
			if (pf->image != i || !tally_select_prof(o->sel, db, pf))
				continue;
			selected = true;
			for (size_t e = pf->first; e < pf->end; e++) {
				uint64_t c = db->counts[e * (size_t)db->nevents + (size_t)ev];
				if (!c)
					continue;
				total += c;
				const struct tally_srcframe *fr;
				size_t n = tally_resolver_mismatch(res, i)
						   ? 0
						   : tally_resolve_frames(res, i,
									  db->entries[e].offset,
									  false, &fr);
				if (n && fr[n - 1].name) {
					/* a function named by its address (.eh_frame bounds, no
					 * symbol) is found, not named; code in no function ([.plt])
					 * is in a section */
					const struct tally_sym *sy =
						fr[0].file ? NULL
							   : tally_resolve(res, i,
									   db->entries[e].offset);
					if (sy && sy->prio == TALLY_SYM_FDE)
						by_addr += c;
					else if (sy && sy->prio == TALLY_SYM_SECTION)
						in_sec += c;
					else
						named += c;
				}
				if (n && fr[0].file)
					lined += c;
			}
		}
		if (!selected || (!total && !o->explain_image))
			continue;
		struct strbuf tx = STRBUF_INIT;
		tally_resolver_explain(res, i, &tx);
		strbuf_addf(&tx,
			    "  samples (%s): %" PRIu64 ", in a named function %" PRIu64
			    " (%.2f%%), with a source line %" PRIu64 " (%.2f%%)",
			    db->events[ev], total, named, pc(named, total), lined,
			    pc(lined, total));
		if (by_addr)
			strbuf_addf(&tx,
				    ", in a function known only by its address (.eh_frame) %" PRIu64
				    " (%.2f%%)",
				    by_addr, pc(by_addr, total));
		if (in_sec)
			strbuf_addf(
				&tx,
				", in code of no function, named by its section ([.plt]) %" PRIu64
				" (%.2f%%)",
				in_sec, pc(in_sec, total));
		strbuf_addch(&tx, '\n');
		/* a file was used, and yet it names nothing: say so, not only "used" and 0% */
		struct tally_resolver_file used[8];
		size_t nused = total && !named ? tally_resolver_files(res, i, used, 8) : 0;
		for (size_t k = 0; k < nused; k++)
			strbuf_addf(
				&tx,
				"  used but nothing named: %s '%s' was used, and none of the %" PRIu64
				" samples is in a function it names (%s)\n",
				used[k].role == TALLY_RFILE_DEBUG ? "debug file" : "file",
				used[k].path, total,
				used[k].role == TALLY_RFILE_DEBUG
					? "its symbols do not cover the sampled code"
					: "a stripped file without debug info, or not the code that ran: find the unstripped file or its debug file with --debug-dir or --mapfile");
		if (json) {
			tally_json_obj(&j);
			json_image_id(&j, im);
			tally_json_ku64(&j, "samples", total);
			tally_json_ku64(&j, "named", named);
			tally_json_ku64(&j, "with_line", lined);
			tally_json_ku64(&j, "by_address", by_addr);
			tally_json_ku64(&j, "in_section", in_sec);
			if (nused)
				tally_json_kbool(&j, "used_but_nothing_named", true);
			tally_json_karr(&j, "explain");
			for (char *l = tx.buf, *nl; l && *l; l = nl + 1) {
				nl = strchr(l, '\n');
				if (!nl)
					break;
				*nl = '\0';
				tally_json_str(&j, l + 2);
			}
			tally_json_end(&j);
			tally_json_end(&j);
		} else {
			strbuf_addf(out, "%simage %s\n%s", any ? "\n" : "", im->name, tx.buf);
		}
		strbuf_release(&tx);
		any = true;
	}
	if (json) {
		tally_json_end(&j);
		tally_json_end(&j);
		strbuf_addch(out, '\n');
	}
	if (!any && o->explain_image) {
		struct strbuf names = STRBUF_INIT;
		for (size_t i = 0; i < db->nimages && i < 20; i++)
			strbuf_addf(&names, "%s%s", i ? ", " : "", db->images[i].name);
		int r = db->nimages
				? tally_seterr(-ENOENT, "no image '%s' in '%s' (it has: %s)",
					       o->explain_image, db->path, names.buf)
				: tally_seterr(-ENOENT, "no image '%s' in '%s' (it has no samples)",
					       o->explain_image, db->path);
		strbuf_release(&names);
		return r;
	}
	return 0;
}

void tally_report_image_warnings(const struct tally_db *db, struct tally_resolver *res, bool all,
				 struct tally_warnings *w)
{
	tally_report_image_warnings_skip(db, res, all, NULL, w);
}

void tally_report_image_warnings_skip(const struct tally_db *db, struct tally_resolver *res,
				      bool all, const bool *skip, struct tally_warnings *w)
{
	for (uint32_t i = 0; i < db->nimages; i++) {
		if (!tally_resolver_loaded(res, i) || (skip && skip[i]))
			continue;
		const char *note = tally_resolver_note(res, i);
		if (note && (all || tally_resolver_loud(res, i)))
			tally_warnings_add(w, "image '%s': %s", db->images[i].name, note);
	}
}

void tally_report_jit_warnings(const struct tally_db *db, struct tally_warnings *w)
{
	const char *u = tally_meta_get(&db->session, "jit-untrusted");
	if (u)
		tally_warnings_add(
			w,
			"%s JIT map(s) or jitdump(s) belonged to another user than their process's: not trusted, that code counts as nomap",
			u);
	for (size_t i = 0; i < db->session.n; i++)
		if (!strncmp(db->session.kv[i].key, "jit-warning-", 12))
			tally_warnings_add(w, "%s", db->session.kv[i].value);
}

/* ---- tally diff (tally/diff.h) ---- */

static const char *diff_view_name(const struct tally_diff *d)
{
	return d->view == TALLY_DIFF_LINES      ? "lines"
	       : d->view == TALLY_DIFF_CHILDREN ? "children"
						: "functions";
}

void tally_diff_text(struct strbuf *out, const struct tally_diff *d, uint64_t top)
{
	const char *h = tally_view_heading(d->db, d->ev);
	strbuf_addf(out, "# diff of %s, %s: '%s' (", d->event,
		    d->view == TALLY_DIFF_LINES	   ? "source lines (self)"
		    : d->view == TALLY_DIFF_CHILDREN ? "functions (inclusive)"
						     : "functions (self)",
		    d->base_input);
	tally_view_value_unit(out, d->db, d->ev, d->base_total);
	strbuf_addf(out, ") -> '%s' (", d->new_input);
	tally_view_value_unit(out, d->db, d->ev, d->new_total);
	strbuf_addstr(out, ")\n");
	if (d->absolute)
		strbuf_addf(out, "# %s on each side; change in %s, largest first\n", h, h);
	else
		strbuf_addf(out, "# share of each side's %s; change in points, largest first\n", h);
	if (d->db->weighed)
		strbuf_addstr(out, "# weighted by period: --samples compares sample counts\n");
	/* the name columns as wide as their longest shown value (within reason) */
	struct strbuf cell = STRBUF_INIT;
	int wloc = 4, wname = 8;
	for (size_t i = 0; i < d->n && (!top || i < top); i++) {
		const struct tally_diff_row *r = &d->v[i];
		int l = (int)strlen(r->name) + (r->inlined ? 10 : 0);
		if (l > wname)
			wname = l > 48 ? 48 : l;
		if (d->view == TALLY_DIFF_LINES && r->file) {
			l = (int)strlen(tally_basename(r->file)) + 1 +
			    snprintf(NULL, 0, "%d", r->line);
			if (l > wloc)
				wloc = l > 48 ? 48 : l;
		}
	}
	if (d->absolute)
		strbuf_addf(out, "%10s %10s %10s  ", "base", "new", "change");
	else
		strbuf_addf(out, "%8s %8s %8s  ", "base%", "new%", "change");
	if (d->view == TALLY_DIFF_LINES)
		strbuf_addf(out, "%-*s  ", wloc, "line");
	strbuf_addf(out, "%-*s  image\n", wname, "function");
	for (size_t i = 0; i < d->n && (!top || i < top); i++) {
		const struct tally_diff_row *r = &d->v[i];
		if (d->absolute) {
			if (r->only == TALLY_DIFF_NEW_ONLY)
				strbuf_addf(out, "%10s ", "-");
			else
			{
				tally_view_value(out, d->db, d->ev, r->base, 10);
				strbuf_addch(out, ' ');
			}
			if (r->only == TALLY_DIFF_BASE_ONLY)
				strbuf_addf(out, "%10s ", "-");
			else
			{
				tally_view_value(out, d->db, d->ev, r->new_, 10);
				strbuf_addch(out, ' ');
			}
			if (!strcmp(h, "msec"))
				strbuf_addf(out, "%+10.1f  ", r->delta / 1e6);
			else
				strbuf_addf(out, "%+10.0f  ", r->delta);
		} else {
			if (r->only == TALLY_DIFF_NEW_ONLY)
				strbuf_addf(out, "%8s ", "-");
			else
				strbuf_addf(out, "%7.2f%% ", r->base_pct);
			if (r->only == TALLY_DIFF_BASE_ONLY)
				strbuf_addf(out, "%8s ", "-");
			else
				strbuf_addf(out, "%7.2f%% ", r->new_pct);
			strbuf_addf(out, "%+8.2f  ", r->points);
		}
		if (d->view == TALLY_DIFF_LINES) {
			strbuf_reset(&cell);
			if (r->file)
				strbuf_addf(&cell, "%s:%d", tally_basename(r->file), r->line);
			else
				strbuf_addstr(&cell, "-");
			strbuf_addf(out, "%-*s  ", wloc, cell.buf);
		}
		strbuf_reset(&cell);
		strbuf_addf(&cell, "%s%s", r->name, r->inlined ? " (inlined)" : "");
		strbuf_addf(out, "%-*s  %s%s\n", wname, cell.buf, r->image,
			    r->only == TALLY_DIFF_NEW_ONLY    ? "  (new only)"
			    : r->only == TALLY_DIFF_BASE_ONLY ? "  (base only)"
							      : "");
	}
	strbuf_release(&cell);
	if (top && d->n > top)
		strbuf_addf(out, "(%zu more rows: leave out --top to see them)\n",
			    d->n - (size_t)top);
}

void tally_diff_json(struct strbuf *out, const struct tally_diff *d, uint64_t top)
{
	/* weighted: the values are named value, in unit; else samples */
	const char *k = d->db->weighed ? "value" : "samples";
	strbuf_addstr(out, "{\"event\":");
	strbuf_add_json_str(out, d->event);
	strbuf_addf(out, ",\"unit\":\"%s\"", tally_view_unit(d->db, d->ev));
	strbuf_addf(out,
		    ",\"view\":\"%s\",\"normalized\":%s,\"base\":{\"input\":", diff_view_name(d),
		    d->absolute ? "false" : "true");
	strbuf_add_json_str(out, d->base_input);
	strbuf_addf(out, ",\"%s\":%" PRIu64 "},\"new\":{\"input\":", k, d->base_total);
	strbuf_add_json_str(out, d->new_input);
	strbuf_addf(out, ",\"%s\":%" PRIu64 "},\"rows\":[", k, d->new_total);
	for (size_t i = 0; i < d->n && (!top || i < top); i++) {
		const struct tally_diff_row *r = &d->v[i];
		strbuf_addstr(out, i ? ",{\"image\":" : "{\"image\":");
		strbuf_add_json_str(out, r->image);
		strbuf_addstr(out, ",\"function\":");
		strbuf_add_json_str(out, r->name);
		if (d->view == TALLY_DIFF_LINES) {
			strbuf_addstr(out, ",\"file\":");
			if (r->file)
				strbuf_add_json_str(out, r->file);
			else
				strbuf_addstr(out, "null");
			strbuf_addf(out, ",\"line\":%d", r->line);
		}
		strbuf_addf(
			out,
			",\"inlined\":%s,\"base_%s\":%" PRIu64 ",\"new_%s\":%" PRIu64
			",\"base_pct\":%.4f,\"new_pct\":%.4f,\"change_points\":%.4f,\"change_%s\":%.0f,\"only\":%s}",
			r->inlined ? "true" : "false", k, r->base, k, r->new_, r->base_pct,
			r->new_pct, r->points, k, r->delta,
			r->only == TALLY_DIFF_NEW_ONLY    ? "\"new\""
			: r->only == TALLY_DIFF_BASE_ONLY ? "\"base\""
							  : "null");
	}
	strbuf_addstr(out, "]}\n");
}
