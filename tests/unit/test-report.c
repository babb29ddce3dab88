/* Unit tests for lib/report: the view model (image, function and call-graph
 * rows, the selection of stacks, tree children, arcs per function), the
 * renderers' warnings handed back instead of printed, and the selection's
 * warnings. The database is built in memory: two JIT images whose perf maps
 * (in a temporary directory) name the functions. */
#define _GNU_SOURCE
#include "unit-resolver.h"

#include "tally/sort.h"
#include "tally/report.h"
#include "tally/select.h"
#include "tally/view.h"

static void add_stack(struct tally_db *db, int pid, uint64_t count, const uint32_t *images,
		      const uint64_t *offs, uint32_t len)
{
	GROW(db->stacks, db->astacks, db->nstacks + 1);
	GROW(db->stack_counts, db->astack_counts, db->nstacks + 1);
	db->stacks[db->nstacks] =
		(struct tally_db_stack){ (uint32_t)db->nstack_frames, len, pid, 0 };
	db->stack_counts[db->nstacks++] = count;
	for (uint32_t i = 0; i < len; i++) {
		GROW(db->frame_tab, db->aframe_tab, db->nframe_tab + 1);
		GROW(db->stack_frames, db->astack_frames, db->nstack_frames + 1);
		db->stack_frames[db->nstack_frames++] = (uint32_t)db->nframe_tab;
		db->frame_tab[db->nframe_tab++] = (struct tally_frame){ images[i], offs[i] };
	}
}

/* jitA (pid 10): main_a calls work (which calls leaf) and two local
 * functions both named dup; jitB (pid 20): main_b calls work. Flat samples:
 * leaf 50, work 10, dup 5 + 5 in jitA; work 30 in jitB. */
static int setup(void **state)
{
	struct fixture *f = unit_resolver_fixture();
	unit_write_jit_map(
		f->dir, 10, "a1",
		"1000 100 main_a\n2000 100 work\n3000 100 leaf\n4000 10 dup\n5000 10 dup\n");
	unit_write_jit_map(f->dir, 20, "b2", "1000 100 main_b\n2000 100 work\n");
	struct tally_db *db = &f->db;
	db->samples[0] = 100;
	db->per_pid = true;
	db->has_stacks = true;
	db->nimages = 2;
	db->images = xcalloc(2, sizeof(*db->images));
	db->images[0] = (struct tally_db_image){ .name = xstrdup("jitA"),
						 .path = xstrdup(""),
						 .id = xstrdup("a1"),
						 .id_kind = xstrdup("none"),
						 .kind = xstrdup("jit"),
						 .pid = 10 };
	db->images[1] = (struct tally_db_image){ .name = xstrdup("jitB"),
						 .path = xstrdup(""),
						 .id = xstrdup("b2"),
						 .id_kind = xstrdup("none"),
						 .kind = xstrdup("jit"),
						 .pid = 20 };
	static const struct tally_db_entry entries[] = {
		{ 0, 10, 0x3010 }, { 0, 10, 0x2010 }, { 0, 10, 0x4001 },
		{ 0, 10, 0x5001 }, { 1, 20, 0x2010 },
	};
	static const uint64_t counts[] = { 50, 10, 5, 5, 30 };
	db->nentries = 5;
	db->entries = xmalloc(sizeof(entries));
	memcpy(db->entries, entries, sizeof(entries));
	db->counts = xmalloc(sizeof(counts));
	memcpy(db->counts, counts, sizeof(counts));
	db->nprofs = 2;
	db->profs = xcalloc(2, sizeof(*db->profs));
	db->profs[0] = (struct tally_db_prof){ 0, 10, 0, 4, 0 };
	db->profs[1] = (struct tally_db_prof){ 1, 20, 4, 5, 0 };
	db->ntasks = 2;
	db->tasks = xcalloc(2, sizeof(*db->tasks));
	db->tasks[0] = (struct tally_db_task){ 10, xstrdup("ten"), xstrdup("/nonexistent/ten") };
	db->tasks[1] =
		(struct tally_db_task){ 20, xstrdup("twenty"), xstrdup("/nonexistent/twenty") };
	/* leaf first; callers' frames are return addresses */
	add_stack(db, 10, 50, (const uint32_t[]){ 0, 0, 0 },
		  (const uint64_t[]){ 0x3010, 0x2020, 0x1020 }, 3);
	add_stack(db, 10, 10, (const uint32_t[]){ 0, 0 }, (const uint64_t[]){ 0x2010, 0x1030 }, 2);
	add_stack(db, 10, 5, (const uint32_t[]){ 0, 0 }, (const uint64_t[]){ 0x4001, 0x1040 }, 2);
	add_stack(db, 10, 5, (const uint32_t[]){ 0, 0 }, (const uint64_t[]){ 0x5001, 0x1050 }, 2);
	add_stack(db, 20, 30, (const uint32_t[]){ 1, 1 }, (const uint64_t[]){ 0x2010, 0x1010 }, 2);
	assert_int_equal(tally_resolver_new(&f->res, db, NULL), 0);
	*state = f;
	return 0;
}

static const struct tally_view_row *find_row(const struct tally_view_rows *t, const char *name,
					     uint32_t image)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].name, name) && t->v[i].image == image)
			return &t->v[i];
	return NULL;
}

static void test_report__image_rows(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_view_rows t;
	tally_view_images(&t, &f->db, &sel, 0);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.total, 100);
	assert_string_equal(t.v[0].name, "jitA [10]");
	assert_int_equal(t.v[0].samples, 70);
	assert_int_equal(t.v[0].prof, 0);
	assert_string_equal(t.v[1].name, "jitB [20]");
	assert_int_equal(t.v[1].samples, 30);
	assert_int_equal(t.v[1].pid, 20);
	tally_view_rows_release(&t);
	sel.comm = "twenty";
	tally_view_images(&t, &f->db, &sel, 0);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.total, 30);
	assert_int_equal(t.v[0].image, 1);
	tally_view_rows_release(&t);
}

static void test_report__function_rows(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_view_rows img, fn;
	tally_view_images(&img, &f->db, &sel, 0);
	/* one image row, as report --symbols takes them */
	tally_view_functions(&fn, &f->db, f->res, 0, &img.v[0], 1, false);
	assert_int_equal(fn.total, 70);
	assert_int_equal(fn.n, 4);
	assert_string_equal(fn.v[0].name, "leaf");
	assert_int_equal(fn.v[0].samples, 50);
	assert_true(fn.v[0].has_addr);
	assert_int_equal(fn.v[0].addr, 0x3000);
	assert_string_equal(fn.v[1].name, "work");
	/* two local functions of one name stay two rows, in the order found */
	assert_string_equal(fn.v[2].name, "dup");
	assert_int_equal(fn.v[2].addr, 0x4000);
	assert_string_equal(fn.v[3].name, "dup");
	assert_int_equal(fn.v[3].addr, 0x5000);
	tally_view_rows_release(&fn);
	/* every image row at once, as the HTML table takes them: work in each image is its own row
	 */
	tally_view_functions(&fn, &f->db, f->res, 0, img.v, img.n, false);
	assert_int_equal(fn.total, img.total);
	assert_int_equal(fn.n, 5);
	assert_int_equal(find_row(&fn, "work", 0)->samples, 10);
	assert_int_equal(find_row(&fn, "work", 1)->samples, 30);
	assert_string_equal(fn.v[1].name, "work");
	assert_int_equal(fn.v[1].image, 1);
	uint64_t sum = 0;
	for (size_t i = 0; i < fn.n; i++)
		sum += fn.v[i].samples;
	assert_int_equal(sum, 100);
	tally_view_rows_release(&fn);
	tally_view_rows_release(&img);
}

static void test_report__cg_rows_and_arcs(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_view_cg v;
	tally_view_cg_build(&v, &f->db, f->res, &sel, 0);
	assert_int_equal(v.cg.total, 100);
	const struct tally_view_rows *t = &v.funcs;
	static const char *const order[] = { "main_a", "work", "leaf", "work",
					     "main_b", "dup",  "dup" };
	static const uint64_t incl[] = { 70, 60, 50, 30, 30, 5, 5 },
			      self[] = { 0, 10, 50, 30, 0, 5, 5 };
	assert_int_equal(t->n, 7);
	for (size_t i = 0; i < 7; i++) {
		assert_string_equal(t->v[i].name, order[i]);
		assert_int_equal(t->v[i].incl, incl[i]);
		assert_int_equal(t->v[i].samples, self[i]);
		assert_string_equal(v.cg.funcs[t->v[i].func].name, order[i]);
	}
	/* equal inclusive: more self first (work of jitB before main_b) */
	assert_int_equal(t->v[3].image, 1);
	/* main_a's callees, and work's one caller */
	size_t n;
	const uint32_t *arcs = tally_view_cg_arcs(&v, t->v[0].func, true, &n);
	assert_int_equal(n, 3);
	uint64_t out = 0;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(v.cg.arcs[arcs[i]].caller, t->v[0].func);
		out += v.cg.arcs[arcs[i]].count;
	}
	assert_int_equal(out, 70);
	arcs = tally_view_cg_arcs(&v, t->v[1].func, false, &n);
	assert_int_equal(n, 1);
	assert_int_equal(v.cg.arcs[arcs[0]].caller, t->v[0].func);
	assert_int_equal(v.cg.arcs[arcs[0]].count, 60);
	arcs = tally_view_cg_arcs(&v, t->v[0].func, false, &n);
	assert_int_equal(n, 0);
	tally_view_cg_release(&v);
}

/* Weights of their own, not in proportion to the counts: the rows, the call
 * graph and the trees go by the weights and keep the samples beside them;
 * the values are shown in msec. */
static void test_report__weighted_rows(void **state)
{
	struct fixture *f = *state;
	struct tally_db *db = &f->db;
	/* flat: leaf 50, work 10, dup 5 + 5 (jitA), work 30 (jitB); stacks alike */
	static const uint64_t w[] = { 5000000, 1000000, 500000, 500000, 93000000 };
	db->weights = xmalloc(sizeof(w));
	memcpy(db->weights, w, sizeof(w));
	db->stack_weights = xmalloc(sizeof(w));
	memcpy(db->stack_weights, w, sizeof(w));
	assert_true(tally_view_can_weigh(db));
	assert_string_equal(tally_view_heading(db, 0), "samples");
	tally_view_weigh(db, false);
	assert_true(db->weighed);
	assert_string_equal(tally_view_heading(db, 0), "msec");
	assert_string_equal(tally_view_unit(db, 0), "ns");
	assert_int_equal(tally_view_event_total(db, 0), 100000000);
	struct strbuf sb = STRBUF_INIT;
	tally_view_value(&sb, db, 0, 93000000, 9);
	assert_string_equal(sb.buf, "     93.0");
	strbuf_reset(&sb);
	tally_view_value_unit(&sb, db, 0, 1500000);
	assert_string_equal(sb.buf, "1.5 msec");
	strbuf_release(&sb);

	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_view_rows t;
	tally_view_images(&t, db, &sel, 0);
	/* jitB's 30 samples weigh more than jitA's 70 */
	assert_int_equal(t.n, 2);
	assert_string_equal(t.v[0].name, "jitB [20]");
	assert_int_equal(t.v[0].samples, 93000000);
	assert_int_equal(t.v[0].nsamples, 30);
	assert_int_equal(t.v[1].samples, 7000000);
	assert_int_equal(t.v[1].nsamples, 70);
	assert_int_equal(t.total, 100000000);
	assert_int_equal(t.ntotal, 100);
	tally_view_rows_release(&t);

	struct tally_view_cg v;
	tally_view_cg_build(&v, db, f->res, &sel, 0);
	assert_int_equal(v.cg.total, 100000000);
	assert_int_equal(v.cg.ntotal, 100);
	/* by inclusive weight: work and main_b of jitB first */
	assert_string_equal(v.funcs.v[0].name, "work");
	assert_int_equal(v.funcs.v[0].image, 1);
	const struct tally_cg_func *leaf = NULL;
	for (size_t i = 0; i < v.cg.nfuncs; i++)
		if (!strcmp(v.cg.funcs[i].name, "leaf"))
			leaf = &v.cg.funcs[i];
	assert_non_null(leaf);
	assert_int_equal(leaf->self, 5000000);
	assert_int_equal(leaf->nself, 50);
	assert_int_equal(leaf->nincl, 50);
	size_t nn;
	struct tally_cg_node *nodes = tally_cg_tree(&v.cg, -1, false, &nn);
	assert_int_equal(nodes[0].count, 100000000);
	assert_int_equal(nodes[0].nsamples, 100);
	tally_cg_tree_free(nodes, nn);
	uint32_t sf[5];
	uint64_t sc[5], sn[5];
	/* no roots here: every stack stops early; by samples, main_a's 70 first */
	size_t ns = tally_cg_stops_n(&v.cg, sf, sc, sn, 5);
	assert_int_equal(ns, 2);
	assert_string_equal(v.cg.funcs[sf[0]].name, "main_a");
	assert_int_equal(sn[0], 70);
	assert_int_equal(sc[0], 7000000);
	tally_view_cg_release(&v);
}

/* A database with neither weights nor a period-mean stays in samples. */
static void test_report__no_periods_no_weights(void **state)
{
	struct fixture *f = *state;
	assert_false(tally_view_can_weigh(&f->db));
	tally_view_weigh(&f->db, false);
	assert_false(f->db.weighed);
	assert_string_equal(tally_view_unit(&f->db, 0), "samples");
	tally_meta_set(&f->db.session, "period-mean", "1000000");
	assert_true(tally_view_can_weigh(&f->db));
	tally_view_weigh(&f->db, true); /* --samples */
	assert_false(f->db.weighed);
	tally_view_weigh(&f->db, false);
	assert_true(f->db.weighed);
	assert_int_equal(f->db.counts[0], 50000000);
}

static void test_report__tree_kids(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_view_cg v;
	tally_view_cg_build(&v, &f->db, f->res, &sel, 0);
	size_t nn, nk;
	struct tally_cg_node *nodes = tally_cg_tree(&v.cg, -1, false, &nn);
	uint64_t base = nodes[0].count;
	assert_int_equal(base, 100);
	uint32_t *kids = tally_view_tree_kids(nodes, 0, base, 0, &nk);
	assert_int_equal(nk, 2);
	assert_string_equal(v.cg.funcs[nodes[kids[0]].func].name, "main_a");
	assert_int_equal(nodes[kids[0]].count, 70);
	assert_string_equal(v.cg.funcs[nodes[kids[1]].func].name, "main_b");
	free(kids);
	/* at 50%, main_b (30%) is left out */
	kids = tally_view_tree_kids(nodes, 0, base, 50, &nk);
	assert_int_equal(nk, 1);
	assert_int_equal(nodes[kids[0]].count, 70);
	free(kids);
	tally_cg_tree_free(nodes, nn);
	tally_view_cg_release(&v);
}

/* The call-graph views select stacks as the flat views select samples:
 * --image keeps the stacks sampled in that image. */
static void test_report__cg_selection_by_image(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	sel.image = "jitB";
	assert_int_equal(tally_select_check(&sel, &f->db, "mem.db", NULL), 0);
	tally_view_select(&f->db, &sel);
	struct tally_view_cg v;
	tally_view_cg_build(&v, &f->db, f->res, &sel, 0);
	struct tally_view_rows img;
	tally_view_images(&img, &f->db, &sel, 0);
	assert_int_equal(v.cg.total, img.total);
	assert_int_equal(v.cg.total, 30);
	for (size_t i = 0; i < v.funcs.n; i++)
		if (v.funcs.v[i].incl)
			assert_int_equal(v.funcs.v[i].image, 1);
	tally_view_rows_release(&img);
	tally_view_cg_release(&v);
}

/* A selection that matches nothing says which filter and what there is;
 * filters that match each alone but not together say that. */
static void test_report__empty_selection_named(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	assert_int_equal(tally_select_nonempty(&sel, &f->db, "mem.db"), 0);
	sel.image = "jitA";
	sel.pid = 10;
	assert_int_equal(tally_select_nonempty(&sel, &f->db, "mem.db"), 0);
	sel.pid = 20;
	assert_int_equal(tally_select_nonempty(&sel, &f->db, "mem.db"), -ENOENT);
	assert_str_has(
		tally_errmsg(),
		"'mem.db' has no samples in the selection: each filter matches samples, but not together");
	tally_select_init(&sel);
	sel.image = "nosuch";
	assert_int_equal(tally_select_nonempty(&sel, &f->db, "mem.db"), -ENOENT);
	assert_str_has(
		tally_errmsg(),
		"--image 'nosuch' matches no image with samples (images with samples: jitA, jitB)");
	tally_select_init(&sel);
	sel.pid = 99;
	assert_int_equal(tally_select_nonempty(&sel, &f->db, "mem.db"), -ENOENT);
	assert_str_has(tally_errmsg(),
		       "--pid 99 has no samples (processes with samples: 10 (ten), 20 (twenty))");
	tally_select_init(&sel);
	sel.comm = "eleven";
	assert_int_equal(tally_select_nonempty(&sel, &f->db, "mem.db"), -ENOENT);
	assert_str_has(
		tally_errmsg(),
		"--comm 'eleven' matches no process with samples (commands with samples: ten, twenty)");
}

/* The core hands warnings back; nothing is printed. */
static void test_report__warnings_handed_back(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	sel.pid = 99;
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	assert_int_equal(tally_select_check(&sel, &f->db, "mem.db", &w), 0);
	assert_int_equal(w.n, 1);
	assert_string_equal(w.v[0], "no samples for pid 99 in 'mem.db'");
	tally_warnings_release(&w);

	tally_select_init(&sel);
	assert_int_equal(tally_select_check(&sel, &f->db, "mem.db", &w), 0);
	struct tally_report_opts o = {
		.input = "mem.db", .sel = &sel, .callers = "nosuch", .percent_limit = 0.5
	};
	struct strbuf out = STRBUF_INIT;
	tally_report_text(&out, &f->db, f->res, &o, &w);
	assert_int_equal(w.n, 1);
	assert_string_equal(w.v[0], "no function 'nosuch' in the stacks of event 'cpu-clock'");
	assert_str_has(out.buf, "unwind:");
	tally_warnings_release(&w);
	/* one line each, whatever the message */
	tally_warnings_add(&w, "a\nb %d", 1);
	assert_string_equal(w.v[0], "a b 1");
	tally_warnings_release(&w);
	assert_int_equal(w.n, 0);
	strbuf_release(&out);
}

/* The text and the JSON renderers list the view's rows with its counts. */
static void test_report__text_and_json_rows(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_report_opts o = { .input = "mem.db", .sel = &sel, .symbols = true };
	struct strbuf text = STRBUF_INIT, json = STRBUF_INIT;
	tally_report_text(&text, &f->db, f->res, &o, NULL);
	tally_report_json(&json, &f->db, f->res, &o, NULL);
	assert_str_has(text.buf, "       50   71.43%   71.43%  0x0000000000003000  leaf\n");
	assert_str_has(text.buf, "       30  100.00%  100.00");
	assert_str_has(
		json.buf,
		"{\"name\":\"leaf\",\"addr\":\"0x3000\",\"samples\":50,\"percent\":71.4286,\"percent_of_total\":50.0000}");
	assert_str_has(
		json.buf,
		"\"name\":\"jitB\",\"path\":\"\",\"id\":\"b2\",\"id_kind\":\"none\",\"kind\":\"jit\",\"pid\":20,\"samples\":30");
	strbuf_release(&text);
	strbuf_release(&json);
	o.symbols = false;
	o.children = true;
	tally_report_json(&json, &f->db, f->res, &o, NULL);
	assert_str_has(json.buf,
		       "{\"name\":\"work\",\"image\":\"jitA\",\"self\":10,\"inclusive\":60,");
	assert_str_has(
		json.buf,
		"\"callers\":[{\"name\":\"main_a\",\"image\":\"jitA\",\"samples\":60,\"percent\":100.0000}],\"callees\":[{\"name\":\"leaf\"");
	strbuf_release(&json);
}

static void test_report__explain_no_image(void **state)
{
	struct fixture *f = *state;
	struct tally_select sel;
	tally_select_init(&sel);
	struct tally_report_opts o = { .input = "mem.db", .sel = &sel, .explain_image = "nosuch" };
	struct strbuf out = STRBUF_INIT;
	assert_int_equal(tally_report_explain(&out, &f->db, f->res, &o, 0, false), -ENOENT);
	assert_errmsg_has("no image 'nosuch' in");
	assert_errmsg_has("(it has: jitA, jitB)");
	strbuf_release(&out);
	/* a database without images says so, not "(null)" */
	struct tally_db empty = { .path = xstrdup("empty.db"), .nevents = 1 };
	struct tally_resolver *res;
	assert_int_equal(tally_resolver_new(&res, &empty, NULL), 0);
	assert_int_equal(tally_report_explain(&out, &empty, res, &o, 0, false), -ENOENT);
	assert_errmsg_has("(it has no samples)");
	tally_resolver_free(res);
	free(empty.path);
	strbuf_release(&out);
}

static void test_report__sort_keys(void **state)
{
	(void)state;
	struct tally_sort st;
	assert_int_equal(tally_sort_parse(&st, "comm,image,function"), 0);
	assert_int_equal(st.n, 3);
	assert_int_equal(st.keys[0], TALLY_SORT_COMM);
	assert_int_equal(st.keys[2], TALLY_SORT_FUNCTION);
	assert_false(tally_sort_needs_lines(&st));
	/* perf's names */
	assert_int_equal(tally_sort_parse(&st, "dso,sym,srcline"), 0);
	assert_int_equal(st.keys[0], TALLY_SORT_IMAGE);
	assert_int_equal(st.keys[1], TALLY_SORT_FUNCTION);
	assert_true(tally_sort_needs_lines(&st));
	static const struct {
		const char *spec, *msg;
	} bad[] = {
		{ "", "unknown key ''" },
		{ "comm,", "unknown key ''" },
		{ "comm,comm", "key 'comm' given twice" },
		{ "image,dso", "key 'image' given twice" },
		{ "cpu", "unknown key 'cpu' (keys: comm, pid, image, function, line" },
		{ "comm\n", "unknown key 'comm\\n'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(tally_sort_parse(&st, bad[i].spec), -EINVAL);
		if (!strstr(tally_errmsg(), bad[i].msg))
			fail_msg("--sort '%s': '%s', expected '%s'", bad[i].spec, tally_errmsg(),
				 bad[i].msg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_report__image_rows, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__function_rows, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__cg_rows_and_arcs, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__weighted_rows, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__no_periods_no_weights, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__tree_kids, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__cg_selection_by_image, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__warnings_handed_back, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__empty_selection_named, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__text_and_json_rows, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_report__explain_no_image, setup,
						unit_resolver_teardown),
		cmocka_unit_test(test_report__sort_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
