/* tally report: the per-image summary (iprof), per-function breakdown
 * (iprof -f, opreport --symbols), filters and JSON. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/callgraph.h"
#include "tally/db.h"
#include "tally/epoch.h"
#include "tally/symbols.h"
#include "tally/util.h"

static const char report_usage[] =
	"usage: tally report [options]\n"
	"\n"
	"  -i, --input DIR          database (default tally.db)\n"
	"  -f, --symbols            functions within each image\n"
	"      --exclude-dependent  only the profiled programs' own executables\n"
	"      --image NAME         only this image (file name or full path)\n"
	"      --pid PID            only this process (needs a --per-pid database)\n"
	"      --comm NAME          only processes with this name (needs --per-pid)\n"
	"      --event NAME         only this event\n"
	"      --top N              at most N rows per table\n"
	"      --image-path DIR     look for the images under DIR too (repeatable)\n"
	"      --json               JSON output (docs/report-json.md)\n"
	"call graphs (databases recorded with -g):\n"
	"      --children           per function: inclusive %%, self %%, name (sorted by inclusive)\n"
	"      --callgraph          per function: its callers above, its callees below\n"
	"      --tree               top-down call tree\n"
	"      --callers SYM        the tree of SYM's callers\n"
	"      --callees SYM        the tree of SYM's callees\n"
	"      --percent-limit P    leave out tree nodes under P%% (default 0.5)\n"
	TALLY_DB_SELECT_USAGE;

enum { OPT_EXCL = 256, OPT_IMAGE, OPT_PID, OPT_COMM, OPT_EVENT, OPT_TOP, OPT_JSON, OPT_IMGPATH, OPT_CHILDREN,
       OPT_CALLGRAPH, OPT_TREE, OPT_CALLERS, OPT_CALLEES, OPT_PLIMIT };

static const struct option report_opts[] = {
	{ "input", required_argument, NULL, 'i' },
	{ "symbols", no_argument, NULL, 'f' },
	{ "exclude-dependent", no_argument, NULL, OPT_EXCL },
	{ "image", required_argument, NULL, OPT_IMAGE },
	{ "pid", required_argument, NULL, OPT_PID },
	{ "comm", required_argument, NULL, OPT_COMM },
	{ "event", required_argument, NULL, OPT_EVENT },
	{ "top", required_argument, NULL, OPT_TOP },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "image-path", required_argument, NULL, OPT_IMGPATH },
	{ "children", no_argument, NULL, OPT_CHILDREN },
	{ "callgraph", no_argument, NULL, OPT_CALLGRAPH },
	{ "tree", no_argument, NULL, OPT_TREE },
	{ "callers", required_argument, NULL, OPT_CALLERS },
	{ "callees", required_argument, NULL, OPT_CALLEES },
	{ "percent-limit", required_argument, NULL, OPT_PLIMIT },
	TALLY_DB_SELECT_LONGOPTS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct ropts {
	const char *input;
	bool symbols, excl, json;
	const char *image, *comm, *event;
	int pid;
	uint64_t top;
	const char **image_path;
	size_t nimage_path;
	bool children, callgraph, tree;
	const char *callers, *callees;
	double plimit;
	bool plimit_set;
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
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	int c = strcmp(x->label, y->label);
	if (c)
		return c;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static bool image_matches(const struct tally_db_image *im, const char *want)
{
	return !strcmp(im->name, want) || !strcmp(im->path, want) || !strcmp(tally_basename(im->path), want);
}

static bool prof_selected(const struct tally_db *db, const struct ropts *o, const struct tally_db_prof *en)
{
	const struct tally_db_image *im = &db->images[en->image];
	if (o->excl && strcmp(im->kind, "exec"))
		return false;
	if (o->image && !image_matches(im, o->image))
		return false;
	if (o->pid && en->pid != o->pid)
		return false;
	if (o->comm) {
		const char *c = tally_db_comm(db, en->pid);
		if (!c || strcmp(c, o->comm))
			return false;
	}
	return true;
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
	return r->addr == k->addr && !strcmp(r->label, k->label);
}

/* Function rows of one image (and pid) for one event, sorted. */
static struct row *function_rows(const struct tally_db *db, struct tally_resolver *res, int ev,
				 const struct tally_db_prof *pf, size_t *nrows)
{
	struct row *rows = NULL;
	size_t n = 0, cap = 0;
	struct tally_hidx idx = { 0 };
	uint32_t image = pf->image;
	int32_t pid = pf->pid;
	bool raw = tally_resolver_mismatch(res, image);
	for (size_t i = pf->first; i < pf->end; i++) {
		const struct tally_db_entry *en = &db->entries[i];
		uint64_t c = db->counts[i * (size_t)db->nevents + (size_t)ev];
		if (!c)
			continue;
		const struct tally_sym *sym = raw ? NULL : tally_resolve(res, image, en->offset);
		char buf[64];
		const char *label;
		uint64_t addr = 0;
		bool has_addr = false;
		if (sym) {
			label = sym->name;
			addr = sym->addr;
			has_addr = true;
		} else if (raw) {
			/* a changed file: raw offsets are the only honest answer */
			snprintf(buf, sizeof(buf), "[offset 0x%" PRIx64 "]", en->offset);
			label = buf;
			addr = en->offset;
			has_addr = true;
		} else {
			label = "[unknown]";
		}
		uint64_t h = tally_hash_bytes(label, strlen(label), addr);
		/* equality on label and address: two local functions may share a name */
		struct row key = { .label = (char *)label, .addr = addr };
		uint32_t j = tally_hidx_get(&idx, h, &key, row_eq, &rows);
		if (j == TALLY_HIDX_NONE) {
			GROW(rows, cap, n + 1);
			rows[n] = (struct row){ image, pid, 0, xstrdup(label), addr, has_addr, 0 };
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
		if (!prof_selected(db, o, pf))
			continue;
		uint64_t c = 0;
		for (size_t i = pf->first; i < pf->end; i++)
			c += db->counts[i * (size_t)db->nevents + (size_t)ev];
		if (!c)
			continue;
		*total += c;
		GROW(rows, cap, n + 1);
		rows[n++] = (struct row){ pf->image, pf->pid, p, image_label(db, pf->image, pf->pid), 0, false, c };
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
	strbuf_addf(out, "# %s: %s", db->path, target ? target : tally_meta_get(&db->session, "target"));
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
	if (!o->symbols) {
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
			struct row *fr = function_rows(db, res, ev, &db->profs[rows[i].prof], &nf);
			strbuf_addf(out, "\n%s (%" PRIu64 " samples, %.2f%% of total)\n", im->path[0] ? im->path : im->name,
				    rows[i].samples,
				    total ? 100.0 * (double)rows[i].samples / (double)total : 0.0);
			if (rows[i].pid && db->per_pid)
				strbuf_addf(out, "pid %d (%s)\n", rows[i].pid,
					    tally_db_comm(db, rows[i].pid) ? tally_db_comm(db, rows[i].pid) : "?");
			strbuf_addf(out, "%9s %8s %8s  %18s  %s\n", "samples", "%", "cum%", "addr", "function");
			uint64_t cum = 0;
			for (size_t k = 0; k < nf && (!o->top || k < o->top); k++) {
				cum += fr[k].samples;
				strbuf_addf(out, "%9" PRIu64 " ", fr[k].samples);
				pct(out, fr[k].samples, rows[i].samples);
				strbuf_addch(out, ' ');
				pct(out, cum, rows[i].samples);
				if (fr[k].has_addr)
					strbuf_addf(out, "  0x%016" PRIx64 "  %s\n", fr[k].addr, fr[k].label);
				else
					strbuf_addf(out, "  %18s  %s\n", "-", fr[k].label);
			}
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
		strbuf_addstr(out, "\"name\":");
		strbuf_add_json_str(out, im->name);
		strbuf_addstr(out, ",\"path\":");
		strbuf_add_json_str(out, im->path);
		strbuf_addstr(out, ",\"id\":");
		strbuf_add_json_str(out, im->id);
		strbuf_addstr(out, ",\"id_kind\":");
		strbuf_add_json_str(out, im->id_kind);
		strbuf_addstr(out, ",\"kind\":");
		strbuf_add_json_str(out, im->kind);
		if (rows[i].pid)
			strbuf_addf(out, ",\"pid\":%d", rows[i].pid);
		else
			strbuf_addstr(out, ",\"pid\":null");
		strbuf_addf(out, ",\"samples\":%" PRIu64 ",\"percent\":%.4f", rows[i].samples,
			    total ? 100.0 * (double)rows[i].samples / (double)total : 0.0);
		if (tally_resolver_mismatch(res, rows[i].image) || (o->symbols && tally_resolver_note(res, rows[i].image))) {
			strbuf_addstr(out, ",\"note\":");
			strbuf_add_json_str(out, tally_resolver_note(res, rows[i].image));
		}
		if (o->symbols) {
			size_t nf;
			struct row *fr = function_rows(db, res, ev, &db->profs[rows[i].prof], &nf);
			strbuf_addstr(out, ",\"functions\":[");
			for (size_t k = 0; k < nf && (!o->top || k < o->top); k++) {
				strbuf_addstr(out, k ? ",{\"name\":" : "{\"name\":");
				strbuf_add_json_str(out, fr[k].label);
				if (fr[k].has_addr)
					strbuf_addf(out, ",\"addr\":\"0x%" PRIx64 "\"", fr[k].addr);
				else
					strbuf_addstr(out, ",\"addr\":null");
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

/* ---- call graphs ---- */

static bool keep_pid(const struct tally_db *db, int pid, const void *ctx)
{
	const struct ropts *o = ctx;
	if (o->pid && pid != o->pid)
		return false;
	if (o->comm) {
		const char *c = tally_db_comm(db, pid);
		if (!c || strcmp(c, o->comm))
			return false;
	}
	return true;
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
	} else {
		strbuf_addf(out, "%s  [%s]", fn->name, db->images[fn->image].name);
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
	tally_cg_build(&cg, db, res, ev, keep_pid, o);
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

int cmd_report(int argc, char **argv)
{
	struct ropts o;
	memset(&o, 0, sizeof(o));
	o.input = "tally.db";
	size_t aimage_path = 0;
	optind = 1;
	opterr = 0;
	int opt;
	uint64_t v;
	struct tally_db_select sel = { 0 };
	while ((opt = getopt_long(argc, argv, "i:fh", report_opts, NULL)) != -1) {
		int sr = tally_db_select_opt(&sel, opt, optarg);
		if (sr < 0) {
			free(o.image_path);
			return tally_usage_error("report", "%s", tally_errmsg());
		}
		if (sr)
			continue;
		switch (opt) {
		case 'i': o.input = optarg; break;
		case 'f': o.symbols = true; break;
		case OPT_EXCL: o.excl = true; break;
		case OPT_IMAGE: o.image = optarg; break;
		case OPT_PID:
			if (tally_parse_u64(optarg, "--pid", 1, 0x7fffffff, &v))
				return tally_usage_error("report", "%s", tally_errmsg());
			o.pid = (int)v;
			break;
		case OPT_COMM: o.comm = optarg; break;
		case OPT_EVENT: o.event = optarg; break;
		case OPT_TOP:
			if (tally_parse_u64(optarg, "--top", 1, UINT32_MAX, &o.top))
				return tally_usage_error("report", "%s", tally_errmsg());
			break;
		case OPT_JSON: o.json = true; break;
		case OPT_IMGPATH:
			GROW(o.image_path, aimage_path, o.nimage_path + 2);
			o.image_path[o.nimage_path++] = optarg;
			o.image_path[o.nimage_path] = NULL;
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
		case 'h': fputs(report_usage, stdout); return 0;
		default:
			if (optopt && optopt < 256)
				return tally_usage_error("report", "option '-%c' %s", optopt, optopt == 'i' ? "needs a value" : "is unknown");
			return tally_usage_error("report", "unknown option or missing value '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc) {
		free(o.image_path);
		return tally_usage_error("report", "unexpected argument '%s'", argv[optind]);
	}
	struct tally_db db;
	if (tally_db_open_select(&db, o.input, &sel)) {
		tally_error("%s", tally_errmsg());
		free(o.image_path);
		return 1;
	}
	int ret = 0;
	if ((o.pid || o.comm) && !db.per_pid) {
		tally_error("'%s' was recorded without --per-pid, so it cannot be filtered by %s (record again with --per-pid)",
			    o.input, o.pid ? "--pid" : "--comm");
		ret = 1;
		goto out;
	}
	int ev_only = -1;
	if (o.event) {
		ev_only = tally_db_event(&db, o.event);
		if (ev_only < 0) {
			struct strbuf names = STRBUF_INIT;
			for (int e = 0; e < db.nevents; e++)
				strbuf_addf(&names, "%s%s", e ? ", " : "", db.events[e]);
			tally_error("event '%s' is not in '%s' (it has: %s)", o.event, o.input, names.buf);
			strbuf_release(&names);
			ret = 1;
			goto out;
		}
	}
	if (o.pid) {
		bool found = false;
		for (size_t i = 0; i < db.nentries && !found; i++)
			found = db.entries[i].pid == o.pid;
		if (!found)
			tally_warn("no samples for pid %d in '%s'", o.pid, o.input);
	}
	bool cgmode = o.children || o.callgraph || o.tree || o.callers || o.callees;
	if (cgmode && (int)o.symbols + (int)o.children + (int)o.callgraph + (int)o.tree + !!o.callers + !!o.callees > 1) {
		tally_error("give one of --symbols, --children, --callgraph, --tree, --callers, --callees");
		ret = 2;
		goto out;
	}
	if (cgmode && !db.has_stacks) {
		tally_error("'%s' has no call stacks (record with -g or --call-graph to get them)", o.input);
		ret = 1;
		goto out;
	}
	if (!o.plimit_set)
		o.plimit = (o.tree || o.callers || o.callees) ? 0.5 : 0;
	if (tally_meta_get(&db.session, "jit-untrusted"))
		tally_warn("%s process(es) had a /tmp/perf-PID.map owned by another user: not trusted, their code counts as nomap",
			   tally_meta_get(&db.session, "jit-untrusted"));
	struct tally_resolver_opts ro = { .image_path = o.image_path };
	struct tally_resolver *res;
	tally_resolver_new(&res, &db, &ro);
	struct strbuf out = STRBUF_INIT;
	if (o.json) {
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
	fwrite(out.buf, 1, out.len, stdout);
	if (fflush(stdout) != 0) {
		tally_error("cannot write the report: %s", strerror(errno));
		ret = 1;
	}
	strbuf_release(&out);
	tally_resolver_free(res);
out:
	tally_db_release(&db);
	free(o.image_path);
	return ret;
}
