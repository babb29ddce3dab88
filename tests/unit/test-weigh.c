/* Unit tests for lib/db/weigh.c: the units of events, and tally_db_weigh
 * making every count its weight (flat and stacks), from period-mean where a
 * database has no weights of its own. */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/db.h"

static void build(struct tally_db *db, const char *period_mean)
{
	char *events[] = { "cpu-clock", "page-faults" };
	struct tally_db_builder *b = tally_db_builder_new(2, events, false, true);
	struct tally_meta m = { 0 };
	tally_meta_set(&m, "period-mean", "%s", period_mean);
	tally_db_builder_session(b, &m);
	tally_meta_release(&m);
	struct tally_db_image im = {
		.name = "nomap", .path = "", .id = "00000000", .id_kind = "none", .kind = "nomap"
	};
	uint32_t i = tally_db_builder_image(b, &im);
	uint64_t c1[] = { 3, 1 }, c2[] = { 5, 0 };
	tally_db_builder_entry(b, i, 0, 0x10, c1);
	tally_db_builder_entry(b, i, 0, 0x20, c2);
	struct tally_frame fr[] = { { i, 0x10 }, { i, 0x20 } };
	tally_db_builder_stack(b, 0, fr, 2, c1);
	tally_db_builder_stack(b, 0, fr + 1, 1, c2);
	tally_db_builder_finish(b, db);
}

static void test_weigh__units(void **state)
{
	(void)state;
	struct tally_db db;
	build(&db, "1000,7");
	assert_string_equal(tally_db_unit(&db, 0), "ns");
	assert_true(tally_db_unit_time(&db, 0));
	assert_string_equal(tally_db_unit(&db, 1), "events");
	assert_false(tally_db_unit_time(&db, 1));
	/* the session's weight-unit wins over the event's kind */
	tally_meta_set(&db.session, "weight-unit", "events,ns");
	assert_string_equal(tally_db_unit(&db, 0), "events");
	assert_string_equal(tally_db_unit(&db, 1), "ns");
	tally_db_release(&db);
}

static void test_weigh__from_period_mean(void **state)
{
	(void)state;
	struct tally_db db;
	build(&db, "1000,7");
	assert_int_equal(tally_db_weight_total(&db, 0), 8000);
	assert_int_equal(tally_db_weight_total(&db, 1), 7);
	tally_db_weigh(&db);
	assert_true(db.weighed);
	assert_int_equal(unit_entry_count(&db, 0x10, 0), 3000);
	assert_int_equal(unit_entry_count(&db, 0x20, 0), 5000);
	assert_int_equal(unit_entry_count(&db, 0x10, 1), 7);
	assert_int_equal(tally_db_weight_total(&db, 0), 8000);
	uint64_t st = 0;
	for (size_t i = 0; i < db.nstacks; i++)
		st += db.stack_counts[i * 2];
	assert_int_equal(st, 8000);
	/* the samples stay where they were counted */
	assert_int_equal(db.samples[0], 8);
	/* twice is once */
	tally_db_weigh(&db);
	assert_int_equal(unit_entry_count(&db, 0x10, 0), 3000);
	tally_db_release(&db);
}

static void test_weigh__own_weights(void **state)
{
	(void)state;
	struct tally_db db;
	build(&db, "1000,7");
	/* a database with weights of its own: they are taken as they are */
	free(db.weights);
	db.weights = xcalloc(db.nentries * 2, sizeof *db.weights);
	for (size_t i = 0; i < db.nentries; i++)
		db.weights[i * 2] = db.entries[i].offset == 0x10 ? 2900 : 5300;
	tally_db_weigh(&db);
	assert_int_equal(unit_entry_count(&db, 0x10, 0), 2900);
	assert_int_equal(unit_entry_count(&db, 0x20, 0), 5300);
	assert_int_equal(tally_db_weight_total(&db, 0), 8200);
	tally_db_release(&db);
}

static void test_weigh__no_period_mean(void **state)
{
	(void)state;
	struct tally_db db;
	build(&db, "x");
	tally_db_weigh(&db);
	/* nothing to weigh by: a sample is one */
	assert_int_equal(unit_entry_count(&db, 0x20, 0), 5);
	tally_db_release(&db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_weigh__units),
		cmocka_unit_test(test_weigh__from_period_mean),
		cmocka_unit_test(test_weigh__own_weights),
		cmocka_unit_test(test_weigh__no_period_mean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
