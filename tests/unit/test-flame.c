/* Unit tests for lib/export/flame.c: the flame-graph tree of a call graph
 * (layout, order, folding under the percent limit, the inverted graph), its
 * SVG, and the escaping of text for XML and HTML. */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/flame.h"

/* A call graph by hand: functions of one image "prog", stacks leaf first.
 *   leaf <- a <- main   60
 *   leaf <- b <- main   30
 *   tiny <- a <- main    1
 *   main                 9   (self samples of main)
 */
enum { MAIN, A, B, LEAF, TINY };
static const char *const names[] = { "main", "a", "b", "leaf", "tiny" };

static void make_cg(struct tally_cg *cg)
{
	static const uint32_t stacks[][4] = {
		{ LEAF, A, MAIN }, { LEAF, B, MAIN }, { TINY, A, MAIN }, { MAIN }
	};
	static const uint32_t lens[] = { 3, 3, 3, 1 };
	static const uint64_t counts[] = { 60, 30, 1, 9 };
	memset(cg, 0, sizeof(*cg));
	cg->nfuncs = ARRAY_SIZE(names);
	cg->funcs = xcalloc(cg->nfuncs, sizeof(*cg->funcs));
	for (size_t i = 0; i < cg->nfuncs; i++)
		cg->funcs[i] = (struct tally_cg_func){ .image = 0,
						       .name = xstrdup(names[i]),
						       .addr = 0x1000 * (i + 1),
						       .has_addr = true };
	cg->funcs_of = xcalloc(16, sizeof(uint32_t));
	cg->stacks = xcalloc(ARRAY_SIZE(lens), sizeof(*cg->stacks));
	for (size_t s = 0; s < ARRAY_SIZE(lens); s++) {
		cg->stacks[s] = (struct tally_cg_stack){ .first = (uint32_t)cg->nfuncs_of,
							 .len = lens[s],
							 .count = counts[s] };
		for (uint32_t k = 0; k < lens[s]; k++)
			cg->funcs_of[cg->nfuncs_of++] = stacks[s][k];
		cg->total += counts[s];
	}
	cg->nstacks = ARRAY_SIZE(lens);
}

struct want {
	uint32_t func, depth;
	uint64_t x, count, self;
};

static void assert_frames(const struct tally_flame *fl, const struct want *w, size_t n)
{
	if (fl->nframes != n)
		fail_msg("%zu frames, expected %zu", fl->nframes, n);
	for (size_t i = 0; i < n; i++) {
		const struct tally_flame_frame *f = &fl->frames[i];
		if (f->func != w[i].func || f->depth != w[i].depth || f->x != w[i].x ||
		    f->count != w[i].count || f->self != w[i].self)
			fail_msg(
				"frame %zu: func %u depth %u x %llu count %llu self %llu; expected %u %u %llu %llu %llu",
				i, f->func, f->depth, (unsigned long long)f->x,
				(unsigned long long)f->count, (unsigned long long)f->self,
				w[i].func, w[i].depth, (unsigned long long)w[i].x,
				(unsigned long long)w[i].count, (unsigned long long)w[i].self);
	}
}

static void test_flame__tree_in_preorder_by_name(void **state)
{
	(void)state;
	struct tally_cg cg;
	make_cg(&cg);
	struct tally_flame fl;
	tally_flame_build(&fl, &cg, false, 0);
	/* siblings by name (a before b; leaf before tiny), each frame's callees
	 * right after it, laid side by side from its left edge */
	static const struct want w[] = {
		{ TALLY_FLAME_ALL, 0, 0, 100, 0 },
		{ MAIN, 1, 0, 100, 9 },
		{ A, 2, 0, 61, 0 },
		{ LEAF, 3, 0, 60, 60 },
		{ TINY, 3, 60, 1, 1 },
		{ B, 2, 61, 30, 0 },
		{ LEAF, 3, 61, 30, 30 },
	};
	assert_frames(&fl, w, ARRAY_SIZE(w));
	assert_int_equal(fl.total, 100);
	assert_int_equal(fl.max_depth, 3);
	assert_int_equal(fl.folded_frames, 0);
	tally_flame_release(&fl);
	tally_cg_release(&cg);
}

/* Stacks deeper than TALLY_FLAME_MAX_DEPTH: what lies past the deepest level
 * drawn is one DEEP frame per column, holding its samples and saying how many
 * levels it folds; both the one-stack column and the grouped levels. */
static void test_flame__levels_past_the_deepest_fold(void **state)
{
	(void)state;
	const uint32_t D = TALLY_FLAME_MAX_DEPTH;
	struct tally_cg cg;
	memset(&cg, 0, sizeof(cg));
	cg.nfuncs = 2;
	cg.funcs = xcalloc(2, sizeof(*cg.funcs));
	cg.funcs[0] =
		(struct tally_cg_func){ .name = xstrdup("rec"), .addr = 0x1000, .has_addr = true };
	cg.funcs[1] =
		(struct tally_cg_func){ .name = xstrdup("top"), .addr = 0x2000, .has_addr = true };
	/* two stacks D+10 and D+500 deep sharing every level but the last (grouped
	 * down to level D), and one D+3 deep alone under another root */
	uint32_t lens[] = { D + 10, D + 500, D + 3 };
	uint64_t counts[] = { 5, 7, 2 };
	cg.funcs_of = xcalloc(3 * (D + 500), sizeof(uint32_t));
	cg.stacks = xcalloc(3, sizeof(*cg.stacks));
	for (size_t s = 0; s < 3; s++) {
		cg.stacks[s] = (struct tally_cg_stack){ .first = (uint32_t)cg.nfuncs_of,
							.len = lens[s],
							.count = counts[s] };
		for (uint32_t k = 0; k < lens[s]; k++) /* leaf first; the root is the last */
			cg.funcs_of[cg.nfuncs_of++] = s == 2 && k == lens[s] - 1 ? 1 : 0;
		cg.total += counts[s];
	}
	cg.nstacks = 3;
	struct tally_flame fl;
	tally_flame_build(&fl, &cg, false, 0);
	assert_int_equal(fl.max_depth, D + 1);
	size_t ndeep = 0;
	uint64_t deep = 0;
	for (size_t i = 0; i < fl.nframes; i++) {
		const struct tally_flame_frame *f = &fl.frames[i];
		assert_true(f->depth <= D + 1);
		if (f->func != TALLY_FLAME_DEEP)
			continue;
		ndeep++;
		deep += f->count;
		assert_int_equal(f->depth, D + 1);
		assert_int_equal(f->self, f->count);
		if (f->count == 12)
			assert_int_equal(f->folded, 500); /* the deeper of the two */
		else if (f->count == 2)
			assert_int_equal(f->folded, 3);
		else
			fail_msg("a DEEP frame of %llu samples", (unsigned long long)f->count);
	}
	assert_int_equal(ndeep, 2);
	assert_int_equal(deep, 14);
	/* nothing lost: the samples at the top of the graph add up to the total */
	uint64_t self = 0;
	for (size_t i = 0; i < fl.nframes; i++)
		self += fl.frames[i].self;
	assert_int_equal(self, cg.total);
	tally_flame_release(&fl);
	tally_cg_release(&cg);
}

static void test_flame__small_frames_fold_into_other(void **state)
{
	(void)state;
	struct tally_cg cg;
	make_cg(&cg);
	struct tally_flame fl;
	/* tiny holds 1% (folds); leaf under b holds 30% (stays) */
	tally_flame_build(&fl, &cg, false, 2.0);
	static const struct want w[] = {
		{ TALLY_FLAME_ALL, 0, 0, 100, 0 },
		{ MAIN, 1, 0, 100, 9 },
		{ A, 2, 0, 61, 0 },
		{ LEAF, 3, 0, 60, 60 },
		{ TALLY_FLAME_OTHER, 3, 60, 1, 1 },
		{ B, 2, 61, 30, 0 },
		{ LEAF, 3, 61, 30, 30 },
	};
	assert_frames(&fl, w, ARRAY_SIZE(w));
	assert_int_equal(fl.frames[4].folded, 1);
	assert_int_equal(fl.folded_frames, 1);
	assert_int_equal(fl.folded_samples, 1);
	tally_flame_release(&fl);

	/* at 50%: everything under main but a folds, and what folds is not lost */
	tally_flame_build(&fl, &cg, false, 50.0);
	static const struct want w2[] = {
		{ TALLY_FLAME_ALL, 0, 0, 100, 0 },
		{ MAIN, 1, 0, 100, 9 },
		{ A, 2, 0, 61, 0 },
		{ LEAF, 3, 0, 60, 60 },
		{ TALLY_FLAME_OTHER, 3, 60, 1, 1 },
		{ TALLY_FLAME_OTHER, 2, 61, 30, 30 },
	};
	assert_frames(&fl, w2, ARRAY_SIZE(w2));
	assert_int_equal(fl.folded_samples, 31);
	tally_flame_release(&fl);
	tally_cg_release(&cg);
}

static void test_flame__inverted_starts_at_the_leaves(void **state)
{
	(void)state;
	struct tally_cg cg;
	make_cg(&cg);
	struct tally_flame fl;
	tally_flame_build(&fl, &cg, true, 0);
	/* level 1: where samples landed (leaf, main, tiny); above them their callers */
	static const struct want w[] = {
		{ TALLY_FLAME_ALL, 0, 0, 100, 0 },
		{ LEAF, 1, 0, 90, 0 },
		{ A, 2, 0, 60, 0 },
		{ MAIN, 3, 0, 60, 60 },
		{ B, 2, 60, 30, 0 },
		{ MAIN, 3, 60, 30, 30 },
		{ MAIN, 1, 90, 9, 9 },
		{ TINY, 1, 99, 1, 0 },
		{ A, 2, 99, 1, 0 },
		{ MAIN, 3, 99, 1, 1 },
	};
	assert_frames(&fl, w, ARRAY_SIZE(w));
	assert_true(fl.inverted);
	tally_flame_release(&fl);
	tally_cg_release(&cg);
}

static void test_flame__empty_graph(void **state)
{
	(void)state;
	struct tally_cg cg;
	memset(&cg, 0, sizeof(cg));
	struct tally_flame fl;
	tally_flame_build(&fl, &cg, false, 0.1);
	assert_int_equal(fl.nframes, 1);
	assert_int_equal(fl.frames[0].count, 0);
	struct tally_db_image im = { .name = "prog", .kind = "exec" };
	struct tally_db db = { .images = &im, .nimages = 1 };
	struct strbuf sb = STRBUF_INIT;
	struct tally_flame_svg_opts o = { "t", NULL, "cpu-clock", NULL, true, 0, NULL };
	tally_flame_svg(&sb, &fl, &cg, &db, &o);
	assert_str_has(sb.buf, "</svg>");
	strbuf_release(&sb);
	tally_flame_release(&fl);
}

static size_t count_of(const char *h, const char *n)
{
	size_t c = 0;
	for (const char *p = strstr(h, n); p; p = strstr(p + 1, n))
		c++;
	return c;
}

static void test_flame__svg(void **state)
{
	(void)state;
	struct tally_cg cg;
	make_cg(&cg);
	free(cg.funcs[TINY].name);
	cg.funcs[TINY].name = xstrdup("op<T&>");
	struct tally_flame fl;
	tally_flame_build(&fl, &cg, false, 0);
	struct tally_db_image im = { .name = "prog", .kind = "exec" };
	struct tally_db db = { .images = &im, .nimages = 1 };
	struct strbuf sb = STRBUF_INIT;
	struct tally_flame_svg_opts o = {
		"Flame <graph>", "sub", "cpu-clock", "fg", true, 1200, NULL
	};
	tally_flame_svg(&sb, &fl, &cg, &db, &o);
	assert_true(!strncmp(sb.buf, "<?xml", 5));
	char *script = strstr(sb.buf, "<script");
	assert_non_null(script);
	*script = '\0'; /* (the script's comments show a frame too) */
	assert_int_equal(count_of(sb.buf, "<g class=\"f\" "), fl.nframes);
	*script = '<';
	assert_str_has(sb.buf, "id=\"fg\"");
	assert_str_has(sb.buf, "data-total=\"100\"");
	assert_str_has(sb.buf, "Flame &lt;graph&gt;");
	assert_str_has(sb.buf, "<title>main\nin prog\n100 samples, 100.00%; self 9, 9.00%</title>");
	assert_str_has(sb.buf, "<title>op&lt;T&amp;&gt;\nin prog\n1 sample, 1.00%");
	assert_str_has(sb.buf, "<title>all\n100 samples, 100.00% of cpu-clock</title>");
	/* main spans the graph: 1180 pixels from x 10 */
	assert_str_has(sb.buf, "<rect x=\"10.0\" y=\"");
	assert_str_has(sb.buf, "width=\"1180.0\"");
	/* the script comes along in a standalone SVG, in CDATA */
	assert_str_has(sb.buf, "<script type=\"text/ecmascript\"><![CDATA[");
	assert_str_has(sb.buf, "tallyFlame");
	strbuf_release(&sb);

	/* for a page: the <svg> element alone */
	o.standalone = false;
	tally_flame_svg(&sb, &fl, &cg, &db, &o);
	assert_true(!strncmp(sb.buf, "<svg ", 5));
	assert_null(strstr(sb.buf, "<script"));
	strbuf_release(&sb);
	tally_flame_release(&fl);
	tally_cg_release(&cg);
}

static void xml_is(const char *in, const char *want)
{
	struct strbuf sb = STRBUF_INIT;
	tally_strbuf_add_xml(&sb, in);
	assert_string_equal(sb.buf ? sb.buf : "", want);
	strbuf_release(&sb);
}

static void test_flame__xml_escaping(void **state)
{
	(void)state;
	xml_is("plain", "plain");
	xml_is("a<b&c>\"'", "a&lt;b&amp;c&gt;&quot;&#39;");
	xml_is("\x01x\ty\nz\x7f", "x\ty\nz\x7f");
	xml_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5",
	       "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");
	xml_is("\xff", "\xef\xbf\xbd");
	xml_is("\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd");          /* overlong '/' */
	xml_is("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* a surrogate */
	xml_is("x\xe2\x82", "x\xef\xbf\xbd\xef\xbf\xbd");         /* cut short by the end */
	xml_is("\xef\xbf\xbe", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* U+FFFE, not a character */
	xml_is("", "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flame__tree_in_preorder_by_name),
		cmocka_unit_test(test_flame__small_frames_fold_into_other),
		cmocka_unit_test(test_flame__levels_past_the_deepest_fold),
		cmocka_unit_test(test_flame__inverted_starts_at_the_leaves),
		cmocka_unit_test(test_flame__empty_graph),
		cmocka_unit_test(test_flame__svg),
		cmocka_unit_test(test_flame__xml_escaping),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
