/* tally top's core (lib/top): the decaying window and its views, the feed's
 * cumulative counts (a daemon's memory), the keys and the screen. */
#define _GNU_SOURCE
#include "unit.h"

#include <math.h>

#include "tally/top.h"

static void add1(struct tally_top *t, const char *comm, const char *image, const char *func,
		 double n)
{
	struct tally_top_frame f = { image, func };
	tally_top_add(t, comm, &f, 1, n);
}

static const struct tally_top_row *find(const struct tally_top_row *rows, size_t n,
					const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	fail_msg("no row '%s'", name);
	return NULL;
}

static void test_top__decay_weights_recent_ticks(void **state)
{
	(void)state;
	struct tally_top *t = tally_top_new(false);
	add1(t, "a", "img", "old", 100);
	tally_top_tick(t, 0.5);
	tally_top_tick(t, 0.5);
	add1(t, "a", "img", "new", 100);
	/* old: 100 * 0.5 * 0.5 = 25, new: 100 */
	assert_true(fabs(tally_top_total(t) - 125) < 1e-9);
	struct tally_top_query q = { TALLY_TOP_FUNCTIONS, TALLY_TOP_BY_SHARE, NULL, NULL };
	struct tally_top_row *rows;
	size_t n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].name, "new");
	assert_true(fabs(rows[1].self - 25) < 1e-9);
	free(rows);
	/* what decays below a hundredth of a sample is forgotten */
	for (int i = 0; i < 20; i++)
		tally_top_tick(t, 0.5);
	n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 0);
	assert_true(tally_top_total(t) < 0.01);
	free(rows);
	tally_top_free(t);
}

static void test_top__views_group_and_filter(void **state)
{
	(void)state;
	struct tally_top *t = tally_top_new(false);
	add1(t, "make", "libc.so.6", "memcpy", 30);
	add1(t, "cc1", "libc.so.6", "memcpy", 10);
	add1(t, "cc1", "cc1", "parse", 60);
	struct tally_top_row *rows;
	struct tally_top_query q = { TALLY_TOP_FUNCTIONS, TALLY_TOP_BY_SHARE, NULL, NULL };
	size_t n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 2);
	const struct tally_top_row *m = find(rows, n, "memcpy");
	assert_true(fabs(m->self - 40) < 1e-9);
	assert_string_equal(m->comm, "make"); /* the command with the most */
	assert_int_equal(m->ncomms, 2);
	free(rows);

	q.view = TALLY_TOP_IMAGES;
	n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].name, "cc1");
	assert_true(fabs(find(rows, n, "libc.so.6")->self - 40) < 1e-9);
	free(rows);

	q.view = TALLY_TOP_COMMANDS;
	n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].name, "cc1");
	assert_true(fabs(rows[0].self - 70) < 1e-9);
	free(rows);

	/* filters: parts of names; the shares stay of everything */
	q.view = TALLY_TOP_FUNCTIONS;
	q.comm_filter = "cc";
	n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 2);
	assert_true(fabs(find(rows, n, "memcpy")->self - 10) < 1e-9);
	free(rows);
	q.image_filter = "libc";
	n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].name, "memcpy");
	free(rows);
	q.comm_filter = NULL;
	q.image_filter = "nothing";
	n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 0);
	free(rows);
	assert_true(fabs(tally_top_total(t) - 100) < 1e-9);

	/* orders */
	q.image_filter = NULL;
	q.sort = TALLY_TOP_BY_NAME;
	n = tally_top_rows(t, &q, &rows);
	assert_string_equal(rows[0].name, "memcpy");
	assert_string_equal(rows[1].name, "parse");
	free(rows);
	q.sort = TALLY_TOP_BY_IMAGE;
	n = tally_top_rows(t, &q, &rows);
	assert_string_equal(rows[0].image, "cc1");
	free(rows);
	tally_top_free(t);
}

static void test_top__inclusive_counts_a_stack_once(void **state)
{
	(void)state;
	struct tally_top *t = tally_top_new(true);
	/* leaf first: rec calls rec calls leaf */
	struct tally_top_frame s1[] = {
		{ "x", "leaf" }, { "x", "rec" }, { "x", "rec" }, { "x", "main" }
	};
	struct tally_top_frame s2[] = { { "libc.so.6", "write" }, { "x", "main" } };
	tally_top_add(t, "x", s1, 4, 3);
	tally_top_add(t, "x", s2, 2, 1);
	struct tally_top_row *rows;
	struct tally_top_query q = { TALLY_TOP_FUNCTIONS, TALLY_TOP_BY_SHARE, NULL, NULL };
	size_t n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 4);
	assert_string_equal(rows[0].name, "main");
	assert_true(fabs(rows[0].total - 4) < 1e-9 && rows[0].self == 0);
	assert_true(fabs(find(rows, n, "rec")->total - 3) < 1e-9); /* not 6 */
	assert_true(fabs(find(rows, n, "leaf")->self - 3) < 1e-9);
	free(rows);
	q.view = TALLY_TOP_IMAGES;
	n = tally_top_rows(t, &q, &rows);
	assert_true(fabs(find(rows, n, "x")->total - 4) < 1e-9); /* not 3 + 3 + 3 + 3 + 1 */
	assert_true(fabs(find(rows, n, "x")->self - 3) < 1e-9);
	assert_true(fabs(find(rows, n, "libc.so.6")->total - 1) < 1e-9);
	free(rows);
	q.sort = TALLY_TOP_BY_SELF;
	q.view = TALLY_TOP_FUNCTIONS;
	n = tally_top_rows(t, &q, &rows);
	assert_string_equal(rows[0].name, "leaf");
	free(rows);
	tally_top_free(t);
}

/* A database in memory with one image and counts at two offsets. */
static void small_db(struct tally_db *db, uint64_t c1, uint64_t c2)
{
	char *ev[] = { "cpu-clock" };
	struct tally_db_builder *b = tally_db_builder_new(1, ev, true, false);
	struct tally_db_image im = { .name = "prog",
				     .path = "/nonexistent/prog",
				     .id = "0123456789abcdef0123456789abcdef01234567",
				     .id_kind = "build-id",
				     .kind = "exec" };
	uint32_t i = tally_db_builder_image(b, &im);
	if (c1)
		tally_db_builder_entry(b, i, 7, 0x100, &c1);
	if (c2)
		tally_db_builder_entry(b, i, 8, 0x200, &c2);
	tally_db_builder_task(b, 7, "seven", "/nonexistent/prog");
	tally_db_builder_task(b, 8, "eight", "/nonexistent/prog");
	tally_db_builder_finish(b, db);
}

static void test_top__feed_takes_what_grew(void **state)
{
	(void)state;
	struct tally_top *t = tally_top_new(false);
	struct tally_top_feed *f = tally_top_feed_new(NULL);
	struct tally_db db;
	double added;
	small_db(&db, 10, 5);
	tally_top_feed_db(f, t, &db, true, 1.0, &added);
	tally_db_release(&db);
	assert_true(added == 15);
	/* the same memory, grown: only the growth is new */
	small_db(&db, 12, 5);
	tally_top_feed_db(f, t, &db, true, 1.0, &added);
	tally_db_release(&db);
	assert_true(added == 2);
	/* the daemon began again (another since): everything is new */
	small_db(&db, 3, 0);
	tally_top_feed_db(f, t, &db, true, 2.0, &added);
	tally_db_release(&db);
	assert_true(added == 3);
	/* not cumulative: every tick's database is new samples */
	small_db(&db, 3, 1);
	tally_top_feed_db(f, t, &db, false, 0, &added);
	tally_db_release(&db);
	assert_true(added == 4);
	assert_true(fabs(tally_top_total(t) - 24) < 1e-9);
	/* commands come from the task list; an image without symbols: [unknown] */
	struct tally_top_row *rows;
	struct tally_top_query q = { TALLY_TOP_COMMANDS, TALLY_TOP_BY_SHARE, NULL, NULL };
	size_t n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].name, "seven");
	assert_true(fabs(rows[0].self - 18) < 1e-9);
	free(rows);
	q.view = TALLY_TOP_FUNCTIONS;
	n = tally_top_rows(t, &q, &rows);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].name, "[unknown]");
	assert_string_equal(rows[0].image, "prog");
	free(rows);
	tally_top_feed_free(f);
	tally_top_free(t);
}

static void test_top__bundle_read_in_memory(void **state)
{
	(void)state;
	struct tally_db db, back;
	small_db(&db, 10, 5);
	struct strbuf b = STRBUF_INIT;
	assert_int_equal(tally_db_bundle(&db, &b), 0);
	if (tally_top_db_from_bundle(&back, b.buf, b.len, "reply"))
		fail_msg("%s", tally_errmsg());
	assert_int_equal(back.nentries, 2);
	assert_int_equal(back.nimages, 1);
	assert_string_equal(back.images[0].name, "prog");
	assert_int_equal(back.ntasks, 2);
	assert_null(back.tmpdir); /* nothing unpacked on disk */
	uint64_t sum = 0;
	for (size_t i = 0; i < back.nentries; i++)
		sum += back.counts[i];
	assert_true(sum == 15);
	tally_db_release(&back);
	/* damaged: cut short, or counts that do not add up to the session's */
	assert_true(tally_top_db_from_bundle(&back, b.buf, b.len / 2, "reply") < 0);
	assert_errmsg_has("reply");
	char *bad = xstrdup(b.buf);
	char *p = strstr(bad, "samples: 15");
	assert_non_null(p);
	p[10] = '6';
	assert_true(tally_top_db_from_bundle(&back, bad, b.len, "reply") < 0);
	assert_errmsg_has("16");
	free(bad);
	strbuf_release(&b);
	tally_db_release(&db);
}

static void keys(struct tally_top_ui *ui, const char *s)
{
	for (; *s; s++)
		tally_top_key(ui, (unsigned char)*s);
}

static void test_top__keys(void **state)
{
	(void)state;
	struct tally_top_ui ui;
	tally_top_ui_init(&ui, false);
	assert_int_equal(ui.q.view, TALLY_TOP_FUNCTIONS);
	keys(&ui, "v");
	assert_int_equal(ui.q.view, TALLY_TOP_IMAGES);
	keys(&ui, "\t");
	assert_int_equal(ui.q.view, TALLY_TOP_COMMANDS);
	keys(&ui, "1");
	assert_int_equal(ui.q.view, TALLY_TOP_FUNCTIONS);
	keys(&ui, "ss");
	assert_int_equal(ui.q.sort, TALLY_TOP_BY_NAME);
	keys(&ui, "S");
	assert_int_equal(ui.q.sort, TALLY_TOP_BY_SHARE);
	/* a filter is typed, edited, entered */
	keys(&ui, "cmakx\x7f" "e\r");
	assert_string_equal(ui.q.comm_filter, "make");
	assert_int_equal(ui.prompt, 0);
	/* Escape leaves it as it was; an empty one clears it */
	keys(&ui, "cxyz\033");
	assert_string_equal(ui.q.comm_filter, "make");
	keys(&ui, "ilibc\r");
	assert_string_equal(ui.q.image_filter, "libc");
	/* while typing, keys are letters: q does not quit */
	keys(&ui, "c\x7f\x7f\x7f\x7fq\x7f\r");
	assert_false(ui.quit);
	assert_null(ui.q.comm_filter);
	keys(&ui, "=");
	assert_null(ui.q.image_filter);
	keys(&ui, " ");
	assert_true(ui.frozen);
	keys(&ui, "p");
	assert_false(ui.frozen);
	assert_int_equal(tally_top_key(&ui, 'Z'), 0); /* nothing */
	keys(&ui, "q");
	assert_true(ui.quit);
	tally_top_ui_release(&ui);
}

static void test_top__screen_fits_and_is_safe(void **state)
{
	(void)state;
	struct tally_top *t = tally_top_new(false);
	add1(t, "evil\033]0;x\007", "img", "f\033[2J\x01", 10);
	for (int i = 0; i < 50; i++) {
		char name[64];
		snprintf(name, sizeof(name), "func_%02d_with_a_rather_long_name_indeed", i);
		add1(t, "cmd", "libthing.so", name, 1 + i);
	}
	struct tally_top_ui ui;
	tally_top_ui_init(&ui, false);
	struct tally_top_status st = { .target = "system", .events = "cpu-clock", .rate = 999 };
	struct strbuf out = STRBUF_INIT;
	tally_top_screen(t, &ui, &st, 40, 10, &out);
	/* no escape but ours: ESC only before '[' and our codes; no BEL */
	for (size_t i = 0; i < out.len; i++) {
		assert_true(out.buf[i] != '\007' && out.buf[i] != '\x01');
		if (out.buf[i] == '\033')
			assert_true(out.buf[i + 1] == '[');
		assert_false(out.buf[i] == '\033' && !strncmp(out.buf + i, "\033[2J", 4));
	}
	/* 10 lines: 9 line ends; each visible line at most 40 columns */
	size_t lines = 0, col = 0, maxcol = 0;
	for (size_t i = 0; i < out.len; i++) {
		if (out.buf[i] == '\033') {
			while (i < out.len &&
			       !(out.buf[i] >= 0x40 && out.buf[i] <= 0x7e && out.buf[i] != '['))
				i++;
			continue;
		}
		if (out.buf[i] == '\n') {
			lines++;
			col = 0;
			continue;
		}
		if (out.buf[i] != '\r' && ++col > maxcol)
			maxcol = col;
	}
	assert_int_equal(lines, 9);
	assert_true(maxcol <= 40);
	assert_str_has(out.buf, "func_49");
	/* the text snapshot: one row a line, share first, the name last */
	strbuf_reset(&out);
	tally_top_text(t, &ui.q, &st, 3, &out);
	assert_str_has(out.buf, "# tally top: functions by share");
	assert_str_has(out.buf, "func_49_with_a_rather_long_name_indeed\n");
	size_t nl = 0;
	for (size_t i = 0; i < out.len; i++)
		nl += out.buf[i] == '\n';
	assert_int_equal(nl, 2 + 3);
	assert_null(strchr(out.buf, '\033'));
	strbuf_release(&out);
	tally_top_ui_release(&ui);
	tally_top_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_top__decay_weights_recent_ticks),
		cmocka_unit_test(test_top__views_group_and_filter),
		cmocka_unit_test(test_top__inclusive_counts_a_stack_once),
		cmocka_unit_test(test_top__feed_takes_what_grew),
		cmocka_unit_test(test_top__bundle_read_in_memory),
		cmocka_unit_test(test_top__keys),
		cmocka_unit_test(test_top__screen_fits_and_is_safe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
