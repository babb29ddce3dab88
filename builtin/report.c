/* tally report: the per-image summary (iprof), per-function breakdown
 * (iprof -f, opreport --symbols), filters and JSON. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/callgraph.h"
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/flame.h"
#include "tally/html.h"
#include "tally/select.h"
#include "tally/imgmap.h"
#include "tally/symbols.h"
#include "tally/util.h"

static const char report_usage[] =
	"usage: tally report [options]\n"
	"\n"
	"  -i, --input DIR          database (default tally.db)\n"
	"  -f, --symbols            functions within each image (inlined functions as their own rows)\n"
	"  -l, --lines              source lines within each image (file:line, function)\n"
	"      --no-inline          count inlined code for the function it was inlined into\n"
	"      --explain [IMAGE]    where tally looked for each image and its debug info, and why\n"
	"                           its functions and lines are or are not named\n"
	TALLY_SELECT_USAGE
	"      --top N              at most N rows per table\n"
	"      --image-path DIR     look for images and modules' .ko files under DIR too (repeatable)\n"
	"      --debug-dir DIR      look for debug files under DIR first (repeatable; DIR/.build-id/..)\n"
	"      --mapfile FILE       find images and debug files by signature ('tally scan -o FILE')\n"
	"      --vmlinux FILE       the kernel image, for kernel source lines (build-id checked)\n"
	"      --debuginfod         fetch missing debug info from DEBUGINFOD_URLS (opt-in)\n"
	"      --debuginfod-timeout SECS  at most this long per image (default 10)\n"
	"      --json               JSON output (docs/report-json.md)\n"
	"      --html FILE          the whole report as one self-contained HTML page (docs/html.md)\n"
	"call graphs (databases recorded with -g):\n"
	"      --children           per function: inclusive %%, self %%, name (sorted by inclusive)\n"
	"      --callgraph          per function: its callers above, its callees below\n"
	"      --tree               top-down call tree\n"
	"      --callers SYM        the tree of SYM's callers\n"
	"      --callees SYM        the tree of SYM's callees\n"
	"      --percent-limit P    leave out tree nodes under P%% (default 0.5); with --html, fold\n"
	"                           flame-graph frames and drop table rows under P%% (default 0.1)\n"
	TALLY_DB_SELECT_USAGE;

enum { OPT_TOP = 256, OPT_JSON, OPT_IMGPATH, OPT_CHILDREN,
       OPT_CALLGRAPH, OPT_TREE, OPT_CALLERS, OPT_CALLEES, OPT_PLIMIT, OPT_NOINLINE, OPT_EXPLAIN, OPT_DEBUGDIR,
       OPT_MAPFILE, OPT_VMLINUX, OPT_DEBUGINFOD, OPT_DFDTIMEOUT, OPT_HTML };

static const struct option report_opts[] = {
	{ "input", required_argument, NULL, 'i' },
	{ "symbols", no_argument, NULL, 'f' },
	{ "lines", no_argument, NULL, 'l' },
	{ "no-inline", no_argument, NULL, OPT_NOINLINE },
	{ "explain", no_argument, NULL, OPT_EXPLAIN },
	{ "debug-dir", required_argument, NULL, OPT_DEBUGDIR },
	{ "mapfile", required_argument, NULL, OPT_MAPFILE },
	{ "vmlinux", required_argument, NULL, OPT_VMLINUX },
	{ "debuginfod", no_argument, NULL, OPT_DEBUGINFOD },
	{ "debuginfod-timeout", required_argument, NULL, OPT_DFDTIMEOUT },
	TALLY_SELECT_OPTIONS,
	{ "top", required_argument, NULL, OPT_TOP },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "image-path", required_argument, NULL, OPT_IMGPATH },
	{ "children", no_argument, NULL, OPT_CHILDREN },
	{ "callgraph", no_argument, NULL, OPT_CALLGRAPH },
	{ "tree", no_argument, NULL, OPT_TREE },
	{ "callers", required_argument, NULL, OPT_CALLERS },
	{ "callees", required_argument, NULL, OPT_CALLEES },
	{ "percent-limit", required_argument, NULL, OPT_PLIMIT },
	{ "html", required_argument, NULL, OPT_HTML },
	TALLY_DB_SELECT_LONGOPTS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct ropts {
	const char *input;
	struct tally_select sel;
	bool symbols, json;
	uint64_t top;
	const char **image_path;
	size_t nimage_path;
	bool children, callgraph, tree;
	const char *callers, *callees;
	double plimit;
	bool plimit_set;
	bool lines, no_inline, explain, debuginfod;
	const char *explain_image;
	const char **debug_dirs;
	size_t ndebug_dirs;
	const char *mapfile, *vmlinux;
	double dfd_timeout;
	const char *html;
};

/* A row of a table: an image (with pid when per-pid) or a function within one. */
struct row {
	uint32_t image;
	int32_t pid;
	size_t prof; /* image rows: the profile (db->profs) */
	char *label;
	uint64_t addr;
	bool has_addr;
	uint64_t samples;
	bool inlined;
	const char *file; /* line rows */
	int line;
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	int c = strcmp(x->label, y->label);
	if (c)
		return c;
	if (x->file != y->file) {
		if (!x->file || !y->file)
			return x->file ? -1 : 1;
		if ((c = strcmp(x->file, y->file)))
			return c;
	}
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* "name", "path", "id" and "id_kind" of an image, the fields every JSON view names it by. */
static void json_image_id(struct strbuf *out, const struct tally_db_image *im)
{
	strbuf_addstr(out, "\"name\":");
	strbuf_add_json_str(out, im->name);
	strbuf_addstr(out, ",\"path\":");
	strbuf_add_json_str(out, im->path);
	strbuf_addstr(out, ",\"id\":");
	strbuf_add_json_str(out, im->id);
	strbuf_addstr(out, ",\"id_kind\":");
	strbuf_add_json_str(out, im->id_kind);
}

static void pct(struct strbuf *sb, uint64_t n, uint64_t total)
{
	strbuf_addf(sb, "%7.2f%%", total ? 100.0 * (double)n / (double)total : 0.0);
}

static char *image_label(const struct tally_db *db, uint32_t image, int pid)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, db->images[image].name);
	if (pid && db->per_pid)
		strbuf_addf(&sb, " [%d]", pid);
	return strbuf_detach(&sb);
}

static bool row_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct row *r = &(*(struct row *const *)ctx)[idx], *k = key;
	return r->addr == k->addr && r->inlined == k->inlined && r->line == k->line && !strcmp(r->label, k->label) &&
	       (r->file == k->file || (r->file && k->file && !strcmp(r->file, k->file)));
}

/* Function rows (or, with lines, file:line rows) of one image (and pid) for one
 * event, sorted. A location's samples go to its innermost frame: an inlined
 * function when DWARF has one there. */
static struct row *function_rows(const struct tally_db *db, struct tally_resolver *res, int ev,
				 const struct tally_db_prof *pf, bool lines, size_t *nrows)
{
	struct row *rows = NULL;
	size_t n = 0, cap = 0;
	struct tally_hidx idx = { 0 };
	uint32_t image = pf->image;
	int32_t pid = pf->pid;
	for (size_t i = pf->first; i < pf->end; i++) {
		const struct tally_db_entry *en = &db->entries[i];
		uint64_t c = db->counts[i * (size_t)db->nevents + (size_t)ev];
		if (!c)
			continue;
		struct tally_leaf lf;
		tally_resolve_leaf(res, image, en->offset, &lf);
		struct row key = { .label = (char *)lf.name, .addr = lf.addr, .has_addr = lf.has_addr, .inlined = lf.inlined };
		if (lines) {
			key.file = lf.file;
			key.line = lf.line;
		}
		uint64_t h = tally_hash_bytes(key.label, strlen(key.label), key.addr ^ (uint64_t)key.line ^ ((uint64_t)key.inlined << 62));
		if (key.file)
			h = tally_hash_bytes(key.file, strlen(key.file), h);
		/* equality on label and address: two local functions may share a name */
		uint32_t j = tally_hidx_get(&idx, h, &key, row_eq, &rows);
		if (j == TALLY_HIDX_NONE) {
			GROW(rows, cap, n + 1);
			rows[n] = (struct row){ image, pid, 0, xstrdup(key.label), key.addr, key.has_addr, 0, key.inlined, key.file, key.line };
			tally_hidx_put(&idx, h, (uint32_t)n);
			j = (uint32_t)n++;
		}
		rows[j].samples += c;
	}
	tally_hidx_release(&idx);
	tally_qsort(rows, n, sizeof(*rows), cmp_row);
	*nrows = n;
	return rows;
}

static void free_rows(struct row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(rows[i].label);
	free(rows);
}

/* Image rows for one event (one per selected profile), sorted; *total gets the
 * selected samples. */
static struct row *image_rows(const struct tally_db *db, const struct ropts *o, int ev, size_t *nrows, uint64_t *total)
{
	struct row *rows = NULL;
	size_t n = 0, cap = 0;
	*total = 0;
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		if (!tally_select_prof(&o->sel, db, pf))
			continue;
		uint64_t c = 0;
		for (size_t i = pf->first; i < pf->end; i++)
			c += db->counts[i * (size_t)db->nevents + (size_t)ev];
		if (!c)
			continue;
		*total += c;
		GROW(rows, cap, n + 1);
		rows[n++] = (struct row){ pf->image, pf->pid, p, image_label(db, pf->image, pf->pid), 0, false, c, false, NULL, 0 };
	}
	tally_qsort(rows, n, sizeof(*rows), cmp_row);
	*nrows = n;
	return rows;
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

static void print_header(const struct tally_db *db, int ev, struct strbuf *out)
{
	const char *target = tally_meta_get(&db->session, "command");
	const char *samp = tally_meta_get(&db->session, "sampling");
	const char *rnd = tally_meta_get(&db->session, "randomized");
	const char *dur = tally_meta_get(&db->session, "duration");
	const char *start = tally_meta_get(&db->session, "start-time");
	if (!target)
		target = tally_meta_get(&db->session, "target");
	strbuf_addf(out, "# %s: %s", db->path, target ? target : "(what ran was not recorded)");
	if (start)
		strbuf_addf(out, ", %s", start);
	if (dur)
		strbuf_addf(out, ", %s s", dur);
	const char *epochs = tally_meta_get(&db->session, "epochs");
	if (epochs)
		strbuf_addf(out, ", epoch%s %s", strchr(epochs, ' ') ? "s" : "", epochs);
	const char *kind = tally_meta_get(&db->session, "period-kind");
	strbuf_addf(out, "\n# event: %s, %s", db->events[ev], samp ? samp : "?");
	if (list_item_is(rnd, ev, "yes"))
		strbuf_addstr(out, " (randomized)");
	else if (list_item_is(kind, ev, "adaptive"))
		strbuf_addstr(out, " (period adapted by the kernel)");
	strbuf_addch(out, '\n');
}

static void lost_line(const struct tally_db *db, struct strbuf *out)
{
	uint64_t all = 0;
	for (int e = 0; e < db->nevents; e++)
		all += db->samples[e];
	strbuf_addf(out, "lost: %" PRIu64 " samples (%.2f%%), throttled: %" PRIu64 " times\n", db->lost,
		    all + db->lost ? 100.0 * (double)db->lost / (double)(all + db->lost) : 0.0, db->throttled);
}

/* One warning per image the report symbolized whose file is wrong or damaged
 * (every note with -v): whatever the view, and once, not once per event. */
static void warn_images(const struct tally_db *db, struct tally_resolver *res)
{
	for (uint32_t i = 0; i < db->nimages; i++) {
		if (!tally_resolver_loaded(res, i))
			continue;
		const char *note = tally_resolver_note(res, i);
		if (note && (tally_resolver_loud(res, i) || tally_verbose))
			tally_warn("image '%s': %s", db->images[i].name, note);
	}
}

static void text_event(const struct tally_db *db, struct tally_resolver *res, const struct ropts *o, int ev,
		       struct strbuf *out)
{
	size_t n;
	uint64_t total;
	struct row *rows = image_rows(db, o, ev, &n, &total);
	print_header(db, ev, out);
	if (!o->symbols && !o->lines) {
		strbuf_addf(out, "%9s %8s %8s  %s\n", "samples", "%", "cum%", "image");
		uint64_t cum = 0;
		for (size_t i = 0; i < n && (!o->top || i < o->top); i++) {
			cum += rows[i].samples;
			strbuf_addf(out, "%9" PRIu64 " ", rows[i].samples);
			pct(out, rows[i].samples, total);
			strbuf_addch(out, ' ');
			pct(out, cum, total);
			strbuf_addf(out, "  %s\n", rows[i].label);
		}
		strbuf_addf(out, "%9" PRIu64 " %17s  Total\n", total, "");
	} else {
		for (size_t i = 0; i < n; i++) {
			const struct tally_db_image *im = &db->images[rows[i].image];
			size_t nf;
			struct row *fr = function_rows(db, res, ev, &db->profs[rows[i].prof], o->lines, &nf);
			strbuf_addf(out, "\n%s (%" PRIu64 " samples, %.2f%% of total)\n", im->path[0] ? im->path : im->name,
				    rows[i].samples,
				    total ? 100.0 * (double)rows[i].samples / (double)total : 0.0);
			if (rows[i].pid && db->per_pid)
				strbuf_addf(out, "pid %d (%s)\n", rows[i].pid,
					    tally_db_comm(db, rows[i].pid) ? tally_db_comm(db, rows[i].pid) : "?");
			bool any_line = false;
			for (size_t k = 0; k < nf && !any_line; k++)
				any_line = fr[k].file != NULL;
			if (o->lines && !any_line && !tally_resolver_has_dwarf(res, rows[i].image))
				strbuf_addstr(out, "(no source lines: no debug info found for this image; see --explain)\n");
			int w = 18;
			struct strbuf loc = STRBUF_INIT;
			if (o->lines)
				for (size_t k = 0; k < nf && (!o->top || k < o->top); k++)
					if (fr[k].file) {
						int len = (int)strlen(tally_basename(fr[k].file)) + 1 + snprintf(NULL, 0, "%d", fr[k].line);
						if (len > w)
							w = len > 48 ? 48 : len;
					}
			strbuf_addf(out, "%9s %8s %8s  %-*s  %s\n", "samples", "%", "cum%", w, o->lines ? "line" : "addr", "function");
			uint64_t cum = 0;
			for (size_t k = 0; k < nf && (!o->top || k < o->top); k++) {
				cum += fr[k].samples;
				strbuf_addf(out, "%9" PRIu64 " ", fr[k].samples);
				pct(out, fr[k].samples, rows[i].samples);
				strbuf_addch(out, ' ');
				pct(out, cum, rows[i].samples);
				strbuf_reset(&loc);
				if (o->lines && fr[k].file)
					strbuf_addf(&loc, "%s:%d", tally_basename(fr[k].file), fr[k].line);
				else if (o->lines)
					strbuf_addstr(&loc, "-");
				else if (fr[k].has_addr)
					strbuf_addf(&loc, "0x%016" PRIx64, fr[k].addr);
				else
					strbuf_addstr(&loc, "-");
				strbuf_addf(out, "  %*s  %s%s\n", o->lines ? -w : w, loc.buf, fr[k].label, fr[k].inlined ? " (inlined)" : "");
			}
			strbuf_release(&loc);
			strbuf_addf(out, "%9" PRIu64 " %17s  Total\n", rows[i].samples, "");
			free_rows(fr, nf);
		}
	}
	free_rows(rows, n);
}

static void json_event(const struct tally_db *db, struct tally_resolver *res, const struct ropts *o, int ev,
		       struct strbuf *out)
{
	size_t n;
	uint64_t total;
	struct row *rows = image_rows(db, o, ev, &n, &total);
	strbuf_addstr(out, "{\"name\":");
	strbuf_add_json_str(out, db->events[ev]);
	strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"images\":[", total);
	for (size_t i = 0; i < n && (!o->top || i < o->top); i++) {
		const struct tally_db_image *im = &db->images[rows[i].image];
		strbuf_addstr(out, i ? ",{" : "{");
		json_image_id(out, im);
		strbuf_addstr(out, ",\"kind\":");
		strbuf_add_json_str(out, im->kind);
		if (rows[i].pid)
			strbuf_addf(out, ",\"pid\":%d", rows[i].pid);
		else
			strbuf_addstr(out, ",\"pid\":null");
		strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"percent\":%.4f", rows[i].samples,
			    total ? 100.0 * (double)rows[i].samples / (double)total : 0.0);
		bool fn = o->symbols || o->lines;
		if (tally_resolver_mismatch(res, rows[i].image) || (fn && tally_resolver_note(res, rows[i].image))) {
			strbuf_addstr(out, ",\"note\":");
			strbuf_add_json_str(out, tally_resolver_note(res, rows[i].image));
		}
		if (fn) {
			size_t nf;
			struct row *fr = function_rows(db, res, ev, &db->profs[rows[i].prof], o->lines, &nf);
			if (o->lines)
				strbuf_addf(out, ",\"debug_info\":%s,\"lines\":[",
					    tally_resolver_has_dwarf(res, rows[i].image) ? "true" : "false");
			else
				strbuf_addstr(out, ",\"functions\":[");
			for (size_t k = 0; k < nf && (!o->top || k < o->top); k++) {
				strbuf_addstr(out, k ? ",{" : "{");
				if (o->lines) {
					strbuf_addstr(out, "\"file\":");
					if (fr[k].file)
						strbuf_add_json_str(out, fr[k].file);
					else
						strbuf_addstr(out, "null");
					if (fr[k].file && fr[k].line)
						strbuf_addf(out, ",\"line\":%d", fr[k].line);
					else
						strbuf_addstr(out, ",\"line\":null");
					strbuf_addstr(out, ",\"function\":");
				} else {
					strbuf_addstr(out, "\"name\":");
				}
				strbuf_add_json_str(out, fr[k].label);
				if (fr[k].inlined)
					strbuf_addstr(out, ",\"inlined\":true");
				if (!o->lines) {
					if (fr[k].has_addr)
						strbuf_addf(out, ",\"addr\":\"0x%" PRIx64 "\"", fr[k].addr);
					else
						strbuf_addstr(out, ",\"addr\":null");
				}
				strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"percent\":%.4f,\"percent_of_total\":%.4f}",
					    fr[k].samples, 100.0 * (double)fr[k].samples / (double)rows[i].samples,
					    total ? 100.0 * (double)fr[k].samples / (double)total : 0.0);
			}
			strbuf_addstr(out, "]");
			free_rows(fr, nf);
		}
		strbuf_addstr(out, "}");
	}
	strbuf_addstr(out, "]}");
	free_rows(rows, n);
}

void tally_warn_jit(const struct tally_db *db)
{
	const char *u = tally_meta_get(&db->session, "jit-untrusted");
	if (u)
		tally_warn("%s JIT map(s) or jitdump(s) belonged to another user than their process's: not trusted, that code counts as nomap",
			   u);
	for (size_t i = 0; i < db->session.n; i++)
		if (!strncmp(db->session.kv[i].key, "jit-warning-", 12))
			tally_warn("%s", db->session.kv[i].value);
}

/* ---- call graphs ---- */

static bool keep_pid(const struct tally_db *db, int pid, const void *ctx)
{
	const struct ropts *o = ctx;
	return tally_select_pid(&o->sel, db, pid);
}

static double pc(uint64_t n, uint64_t d)
{
	return d ? 100.0 * (double)n / (double)d : 0.0;
}

static int cmp_incl(const void *a, const void *b, void *ctx)
{
	const struct tally_cg *cg = ctx;
	const struct tally_cg_func *x = &cg->funcs[*(const uint32_t *)a], *y = &cg->funcs[*(const uint32_t *)b];
	if (x->incl != y->incl)
		return x->incl > y->incl ? -1 : 1;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void fname(struct strbuf *out, const struct tally_db *db, const struct tally_cg *cg, uint32_t f, bool json)
{
	const struct tally_cg_func *fn = &cg->funcs[f];
	if (json) {
		strbuf_addstr(out, "\"name\":");
		strbuf_add_json_str(out, fn->name);
		strbuf_addstr(out, ",\"image\":");
		strbuf_add_json_str(out, db->images[fn->image].name);
		if (fn->inlined)
			strbuf_addstr(out, ",\"inlined\":true");
	} else {
		strbuf_addf(out, "%s%s  [%s]", fn->name, fn->inlined ? " (inlined)" : "", db->images[fn->image].name);
	}
}

static void unwind_line(const struct tally_db *db, const struct tally_cg *cg, struct strbuf *out, bool json)
{
	uint32_t sf[5];
	uint64_t sc[5];
	size_t ns = tally_cg_stops(cg, sf, sc, 5);
	if (json) {
		strbuf_addf(out, ",\"unwind\":{\"samples\":%" PRIu64 ",\"rooted\":%" PRIu64 ",\"rooted_percent\":%.4f,\"truncated\":%" PRIu64 ",\"stops\":[",
			    cg->total, cg->rooted, pc(cg->rooted, cg->total), cg->truncated);
		for (size_t i = 0; i < ns; i++) {
			strbuf_addstr(out, i ? ",{" : "{");
			fname(out, db, cg, sf[i], true);
			strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"percent\":%.4f}", sc[i], pc(sc[i], cg->total));
		}
		strbuf_addstr(out, "]");
		const char *jw = tally_meta_get(&db->session, "dwarf-stop-reasons");
		if (jw) {
			strbuf_addstr(out, ",\"dwarf_stop_reasons\":");
			strbuf_add_json_str(out, jw);
		}
		strbuf_addstr(out, "}");
		return;
	}
	strbuf_addf(out, "unwind: %.2f%% of %" PRIu64 " samples reached a process root (_start, thread start, kernel thread)",
		    pc(cg->rooted, cg->total), cg->total);
	if (cg->rooted < cg->total) {
		strbuf_addf(out, "; %.2f%% stopped early", pc(cg->total - cg->rooted, cg->total));
		if (cg->truncated)
			strbuf_addf(out, " (%.2f%% at the depth limit)", pc(cg->truncated, cg->total));
		strbuf_addstr(out, ", outermost frame:");
		for (size_t i = 0; i < ns; i++) {
			strbuf_addf(out, "%s %.2f%% ", i ? "," : "", pc(sc[i], cg->total));
			fname(out, db, cg, sf[i], false);
		}
		const char *why = tally_meta_get(&db->session, "dwarf-stop-reasons");
		if (why)
			strbuf_addf(out, "; DWARF unwinds stopped early by cause: %s (recording-wide, before the fp chain was joined)", why);
	}
	strbuf_addch(out, '\n');
}

static void tree_print(const struct tally_db *db, const struct tally_cg *cg, const struct tally_cg_node *nodes,
		       uint32_t at, int depth, uint64_t base, double limit, struct strbuf *out, bool json)
{
	const struct tally_cg_node *nd = &nodes[at];
	/* children by count */
	uint32_t *kids = xmalloc((nd->nkids + 1) * sizeof(uint32_t));
	size_t nk = 0;
	for (size_t i = 0; i < nd->nkids; i++)
		if (pc(nodes[nd->kids[i]].count, base) >= limit)
			kids[nk++] = nd->kids[i];
	for (size_t i = 1; i < nk; i++)
		for (size_t j = i; j > 0 && nodes[kids[j]].count > nodes[kids[j - 1]].count; j--) {
			uint32_t t = kids[j];
			kids[j] = kids[j - 1];
			kids[j - 1] = t;
		}
	if (json) {
		if (at) {
			strbuf_addstr(out, "{");
			fname(out, db, cg, nd->func, true);
			strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"percent\":%.4f,\"children\":[", nd->count, pc(nd->count, base));
		}
		for (size_t i = 0; i < nk; i++) {
			if (i)
				strbuf_addch(out, ',');
			tree_print(db, cg, nodes, kids[i], depth + 1, base, limit, out, json);
		}
		if (at)
			strbuf_addstr(out, "]}");
	} else {
		if (at) {
			strbuf_addf(out, "%*s%7.2f%% %9" PRIu64 "  ", depth * 2, "", pc(nd->count, base), nd->count);
			fname(out, db, cg, nd->func, false);
			strbuf_addch(out, '\n');
		}
		for (size_t i = 0; i < nk; i++)
			tree_print(db, cg, nodes, kids[i], at ? depth + 1 : depth, base, limit, out, json);
	}
	free(kids);
}

static void cg_event(const struct tally_db *db, struct tally_resolver *res, const struct ropts *o, int ev,
		     struct strbuf *out, bool json)
{
	struct tally_cg cg;
	/* arcs only for the views that show them */
	tally_cg_build_flags(&cg, db, res, ev, keep_pid, o, o->callgraph || json ? 0 : TALLY_CG_NO_ARCS);
	uint32_t *order = xmalloc((cg.nfuncs + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < cg.nfuncs; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, cg.nfuncs, sizeof(uint32_t), cmp_incl, &cg);
	const char *focus_name = o->callers ? o->callers : o->callees;
	long focus = -1;
	if (focus_name) {
		focus = tally_cg_find(&cg, focus_name);
		if (focus < 0)
			tally_warn("no function '%s' in the stacks of event '%s'", focus_name, db->events[ev]);
	}
	if (json) {
		strbuf_addstr(out, "{\"name\":");
		strbuf_add_json_str(out, db->events[ev]);
		strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"functions\":[", cg.total);
	} else {
		print_header(db, ev, out);
	}
	if (o->children || o->callgraph || json) {
		if (!json && o->children)
			strbuf_addf(out, "%9s %9s %9s  %s\n", "children", "self", "samples", "function  [image]");
		size_t shown = 0;
		for (size_t k = 0; k < cg.nfuncs; k++) {
			const struct tally_cg_func *f = &cg.funcs[order[k]];
			if ((o->top && shown >= o->top) || pc(f->incl, cg.total) < o->plimit)
				break;
			if (json) {
				strbuf_addstr(out, shown ? ",{" : "{");
				fname(out, db, &cg, order[k], true);
				strbuf_addf(out, ",\"self\":%" PRIu64 ",\"inclusive\":%" PRIu64 ",\"self_percent\":%.4f,\"inclusive_percent\":%.4f",
					    f->self, f->incl, pc(f->self, cg.total), pc(f->incl, cg.total));
				for (int dir = 0; dir < 2; dir++) {
					strbuf_addstr(out, dir ? ",\"callees\":[" : ",\"callers\":[");
					bool first = true;
					for (size_t a = 0; a < cg.narcs; a++) {
						const struct tally_cg_arc *arc = &cg.arcs[a];
						uint32_t other = dir ? arc->callee : arc->caller;
						if ((dir ? arc->caller : arc->callee) != order[k])
							continue;
						strbuf_addstr(out, first ? "{" : ",{");
						first = false;
						fname(out, db, &cg, other, true);
						strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"percent\":%.4f}", arc->count, pc(arc->count, f->incl));
					}
					strbuf_addstr(out, "]");
				}
				strbuf_addstr(out, "}");
			} else if (o->children) {
				strbuf_addf(out, "%8.2f%% %8.2f%% %9" PRIu64 "  ", pc(f->incl, cg.total), pc(f->self, cg.total), f->incl);
				fname(out, db, &cg, order[k], false);
				strbuf_addch(out, '\n');
			} else {
				strbuf_addstr(out, "--------------------------------------------------------------------------\n");
				for (int dir = 0; dir < 2; dir++) {
					/* callers above, callees below, each by count */
					if (dir == 1) {
						strbuf_addf(out, "%9" PRIu64 " %7.2f%%  self %" PRIu64 " %.2f%%  ", f->incl, pc(f->incl, cg.total), f->self,
							    pc(f->self, cg.total));
						fname(out, db, &cg, order[k], false);
						strbuf_addch(out, '\n');
					}
					size_t na = 0;
					uint32_t *arcs = xmalloc((cg.narcs + 1) * sizeof(uint32_t));
					for (size_t a = 0; a < cg.narcs; a++)
						if ((dir ? cg.arcs[a].caller : cg.arcs[a].callee) == order[k])
							arcs[na++] = (uint32_t)a;
					for (size_t i = 1; i < na; i++)
						for (size_t j = i; j > 0 && cg.arcs[arcs[j]].count > cg.arcs[arcs[j - 1]].count; j--) {
							uint32_t t = arcs[j];
							arcs[j] = arcs[j - 1];
							arcs[j - 1] = t;
						}
					for (size_t i = 0; i < na; i++) {
						const struct tally_cg_arc *arc = &cg.arcs[arcs[i]];
						strbuf_addf(out, "%20" PRIu64 " %7.2f%%  %s ", arc->count, pc(arc->count, f->incl), dir ? "->" : "<-");
						fname(out, db, &cg, dir ? arc->callee : arc->caller, false);
						strbuf_addch(out, '\n');
					}
					free(arcs);
				}
			}
			shown++;
		}
		if (json)
			strbuf_addstr(out, "]");
	}
	if (o->tree || focus_name) {
		size_t nn = 0;
		struct tally_cg_node *nodes = focus_name && focus < 0 ? NULL : tally_cg_tree(&cg, focus, o->callers != NULL, &nn);
		uint64_t base = nodes ? nodes[0].count : 0;
		if (json) {
			strbuf_addstr(out, ",\"tree\":[");
			if (nodes)
				tree_print(db, &cg, nodes, 0, 0, base, o->plimit, out, true);
			strbuf_addstr(out, "]");
		} else if (nodes) {
			if (focus_name)
				strbuf_addf(out, "# %s of %s: percentages of its %" PRIu64 " inclusive samples\n",
					    o->callers ? "callers" : "callees", focus_name, base);
			tree_print(db, &cg, nodes, 0, 0, base, o->plimit, out, false);
		}
		tally_cg_tree_free(nodes, nn);
	}
	unwind_line(db, &cg, out, json);
	if (json)
		strbuf_addstr(out, "}");
	free(order);
	tally_cg_release(&cg);
}

/* --explain: per image with samples (or the one named), where tally looked for
 * it and its debug info, what it found, and how many samples got names. */
static int explain(const struct tally_db *db, struct tally_resolver *res, const struct ropts *o, int ev,
		   struct strbuf *out)
{
	bool any = false;
	if (o->json)
		strbuf_addstr(out, "{\"format\":\"tally-explain\",\"version\":1,\"images\":[");
	for (uint32_t i = 0; i < db->nimages; i++) {
		const struct tally_db_image *im = &db->images[i];
		if (o->explain_image && !tally_select_image_matches(im, o->explain_image))
			continue;
		uint64_t total = 0, named = 0, lined = 0;
		bool selected = false;
		for (size_t p = 0; p < db->nprofs; p++) {
			const struct tally_db_prof *pf = &db->profs[p];
			if (pf->image != i || !tally_select_prof(&o->sel, db, pf))
				continue;
			selected = true;
			for (size_t e = pf->first; e < pf->end; e++) {
				uint64_t c = db->counts[e * (size_t)db->nevents + (size_t)ev];
				if (!c)
					continue;
				total += c;
				const struct tally_srcframe *fr;
				size_t n = tally_resolver_mismatch(res, i) ? 0 : tally_resolve_frames(res, i, db->entries[e].offset, false, &fr);
				if (n && fr[n - 1].name)
					named += c;
				if (n && fr[0].file)
					lined += c;
			}
		}
		if (!selected || (!total && !o->explain_image))
			continue;
		struct strbuf tx = STRBUF_INIT;
		tally_resolver_explain(res, i, &tx);
		strbuf_addf(&tx, "  samples (%s): %" PRIu64 ", in a named function %" PRIu64 " (%.2f%%), with a source line %" PRIu64 " (%.2f%%)\n",
			    db->events[ev], total, named, total ? 100.0 * (double)named / (double)total : 0.0, lined,
			    total ? 100.0 * (double)lined / (double)total : 0.0);
		if (o->json) {
			strbuf_addstr(out, any ? ",{" : "{");
			json_image_id(out, im);
			strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"named\":%" PRIu64 ",\"with_line\":%" PRIu64 ",\"explain\":[",
				    total, named, lined);
			bool first = true;
			for (char *l = tx.buf, *nl; l && *l; l = nl + 1) {
				nl = strchr(l, '\n');
				if (!nl)
					break;
				*nl = '\0';
				if (!first)
					strbuf_addch(out, ',');
				first = false;
				strbuf_add_json_str(out, l + 2);
			}
			strbuf_addstr(out, "]}");
		} else {
			strbuf_addf(out, "%simage %s\n%s", any ? "\n" : "", im->name, tx.buf);
		}
		strbuf_release(&tx);
		any = true;
	}
	if (o->json)
		strbuf_addstr(out, "]}\n");
	if (!any && o->explain_image) {
		struct strbuf names = STRBUF_INIT;
		for (size_t i = 0; i < db->nimages && i < 20; i++)
			strbuf_addf(&names, "%s%s", i ? ", " : "", db->images[i].name);
		tally_error("no image '%s' in '%s' (it has: %s)", o->explain_image, db->path, names.buf);
		strbuf_release(&names);
		return 1;
	}
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct ropts o;
	memset(&o, 0, sizeof(o));
	o.input = "tally.db";
	tally_select_init(&o.sel);
	int sr;
	size_t aimage_path = 0, adebug = 0;
	optind = 1;
	opterr = 0;
	int opt;
	struct tally_db_select sel = { 0 };
	static const char shortopts[] = "i:flh";
	while ((opt = getopt_long(argc, argv, shortopts, report_opts, NULL)) != -1) {
		int es = tally_db_select_opt(&sel, opt, optarg);
		if (es < 0) {
			free(o.image_path);
			return tally_usage_error("report", "%s", tally_errmsg());
		}
		if (es)
			continue;
		switch (opt) {
		case 'i': o.input = optarg; break;
		case 'f': o.symbols = true; break;
		case 'l': o.lines = true; break;
		case OPT_NOINLINE: o.no_inline = true; break;
		case OPT_EXPLAIN: o.explain = true; break;
		case OPT_DEBUGDIR:
			STRLIST_PUSH(o.debug_dirs, o.ndebug_dirs, adebug, optarg);
			break;
		case OPT_MAPFILE: o.mapfile = optarg; break;
		case OPT_VMLINUX: o.vmlinux = optarg; break;
		case OPT_DEBUGINFOD: o.debuginfod = true; break;
		case OPT_DFDTIMEOUT:
			if (tally_parse_duration(optarg, "--debuginfod-timeout", &o.dfd_timeout) || o.dfd_timeout <= 0 ||
			    o.dfd_timeout > 3600) {
				free(o.image_path);
				free(o.debug_dirs);
				return tally_usage_error("report", "invalid --debuginfod-timeout '%s': expected seconds from 0.1 to 3600", optarg);
			}
			break;
		case OPT_TOP:
			if (tally_parse_u64(optarg, "--top", 1, UINT32_MAX, &o.top))
				return tally_usage_error("report", "%s", tally_errmsg());
			break;
		case OPT_JSON: o.json = true; break;
		case OPT_IMGPATH:
			STRLIST_PUSH(o.image_path, o.nimage_path, aimage_path, optarg);
			break;
		case OPT_CHILDREN: o.children = true; break;
		case OPT_CALLGRAPH: o.callgraph = true; break;
		case OPT_TREE: o.tree = true; break;
		case OPT_CALLERS: o.callers = optarg; break;
		case OPT_CALLEES: o.callees = optarg; break;
		case OPT_PLIMIT: {
			char *end;
			o.plimit = strtod(optarg, &end);
			if (end == optarg || *end || !(o.plimit >= 0 && o.plimit <= 100))
				return tally_usage_error("report", "invalid --percent-limit '%s': expected a percentage from 0 to 100", optarg);
			o.plimit_set = true;
			break;
		}
		case OPT_HTML: o.html = optarg; break;
		case 'h': fputs(report_usage, stdout); return 0;
		default:
			sr = tally_select_getopt(&o.sel, opt, optarg);
			if (sr < 0)
				return tally_usage_error("report", "%s", tally_errmsg());
			if (sr > 0)
				break;
			return tally_getopt_error("report", shortopts, argv);
		}
	}
	if (o.explain && optind < argc)
		o.explain_image = argv[optind++];
	if (optind < argc) {
		free(o.image_path);
		free(o.debug_dirs);
		return tally_usage_error("report", "unexpected argument '%s'", argv[optind]);
	}
	bool cgview = o.children || o.callgraph || o.tree || o.callers || o.callees;
	if (o.html && (o.json || o.symbols || o.lines || o.explain || cgview)) {
		free(o.image_path);
		free(o.debug_dirs);
		return tally_usage_error("report", "--html makes the whole report: leave out --json, --symbols, --lines, --explain and the call-graph views");
	}
	if (o.html && tally_html_check_target(o.html)) {
		tally_error("%s", tally_errmsg());
		free(o.image_path);
		free(o.debug_dirs);
		return 1;
	}
	struct tally_imgmap map;
	bool have_map = false;
	if (o.mapfile) {
		if (tally_imgmap_load(&map, o.mapfile)) {
			tally_error("%s", tally_errmsg());
			free(o.image_path);
			free(o.debug_dirs);
			return 1;
		}
		have_map = true;
	}
	if (o.vmlinux && access(o.vmlinux, R_OK) != 0) {
		tally_error("cannot read --vmlinux '%s': %s", o.vmlinux, strerror(errno));
		if (have_map)
			tally_imgmap_release(&map);
		free(o.image_path);
		free(o.debug_dirs);
		return 1;
	}
	for (size_t i = 0; i < o.ndebug_dirs; i++)
		if (access(o.debug_dirs[i], X_OK) != 0)
			tally_warn("--debug-dir '%s': %s (searched anyway)", o.debug_dirs[i], strerror(errno));
	struct tally_db db;
	/* the stacks are read only for the views that need them */
	if (tally_db_open_flags(&db, o.input, &sel, TALLY_DB_STACKS_LATER)) {
		tally_error("%s", tally_errmsg());
		free(o.image_path);
		return 1;
	}
	int ret = 0;
	if (tally_select_check(&o.sel, &db, o.input)) {
		tally_error("%s", tally_errmsg());
		ret = 1;
		goto out;
	}
	int ev_only = o.sel.ev_only;
	bool cgmode = o.children || o.callgraph || o.tree || o.callers || o.callees;
	if ((int)o.symbols + (int)o.lines + (int)o.explain + (int)o.children + (int)o.callgraph + (int)o.tree + !!o.callers +
		    !!o.callees > 1) {
		tally_error("give one of --symbols, --lines, --explain, --children, --callgraph, --tree, --callers, --callees");
		ret = 2;
		goto out;
	}
	if (cgmode && !db.has_stacks) {
		tally_error("'%s' has no call stacks (record with -g or --call-graph to get them)", o.input);
		ret = 1;
		goto out;
	}
	if ((cgmode || o.html) && tally_db_load_stacks(&db)) {
		tally_error("%s", tally_errmsg());
		ret = 1;
		goto out;
	}
	if (!o.plimit_set)
		o.plimit = (o.tree || o.callers || o.callees) ? 0.5 : 0;
	tally_warn_jit(&db);
	struct tally_resolver_opts ro = {
		.image_path = o.image_path,
		.debug_dirs = o.debug_dirs,
		.map = have_map ? &map : NULL,
		.vmlinux = o.vmlinux,
		.debuginfod = o.debuginfod,
		.debuginfod_timeout = o.dfd_timeout,
		.no_inline = o.no_inline,
		.lines = o.lines || o.explain,
	};
	struct tally_resolver *res;
	tally_resolver_new(&res, &db, &ro);
	if (o.html) {
		struct tally_html_opts ho = { o.input, &o.sel, o.plimit_set ? o.plimit : TALLY_FLAME_DEFAULT_LIMIT,
					      TALLY_HTML_ANNOTATE, o.top };
		if (tally_html_write(o.html, &db, res, &ho)) {
			tally_error("%s", tally_errmsg());
			ret = 1;
		}
		warn_images(&db, res);
		tally_resolver_free(res);
		goto out;
	}
	struct strbuf out = STRBUF_INIT;
	if (o.explain) {
		ret = explain(&db, res, &o, ev_only >= 0 ? ev_only : 0, &out);
	} else if (o.json) {
		strbuf_addstr(&out, "{\"format\":\"tally-report\",\"version\":1,\"database\":");
		strbuf_add_json_str(&out, o.input);
		strbuf_addstr(&out, ",\"session\":{");
		for (size_t i = 0; i < db.session.n; i++) {
			if (i)
				strbuf_addch(&out, ',');
			strbuf_add_json_str(&out, db.session.kv[i].key);
			strbuf_addch(&out, ':');
			strbuf_add_json_str(&out, db.session.kv[i].value);
		}
		strbuf_addf(&out, "},\"lost\":%" PRIu64 ",\"throttled\":%" PRIu64 ",\"events\":[", db.lost, db.throttled);
		bool first = true;
		for (int e = 0; e < db.nevents; e++) {
			if (ev_only >= 0 && e != ev_only)
				continue;
			if (!first)
				strbuf_addch(&out, ',');
			first = false;
			if (cgmode)
				cg_event(&db, res, &o, e, &out, true);
			else
				json_event(&db, res, &o, e, &out);
		}
		strbuf_addstr(&out, "]}\n");
	} else {
		bool first = true;
		for (int e = 0; e < db.nevents; e++) {
			if (ev_only >= 0 && e != ev_only)
				continue;
			if (!first)
				strbuf_addch(&out, '\n');
			first = false;
			if (cgmode)
				cg_event(&db, res, &o, e, &out, false);
			else
				text_event(&db, res, &o, e, &out);
		}
		lost_line(&db, &out);
	}
	warn_images(&db, res);
	if (out.len)
		fwrite(out.buf, 1, out.len, stdout);
	if (fflush(stdout) != 0) {
		tally_error("cannot write the report: %s", strerror(errno));
		ret = 1;
	}
	strbuf_release(&out);
	tally_resolver_free(res);
out:
	tally_db_release(&db);
	if (have_map)
		tally_imgmap_release(&map);
	free(o.image_path);
	free(o.debug_dirs);
	return ret;
}
