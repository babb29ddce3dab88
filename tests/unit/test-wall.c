/* Unit tests for lib/db/wall.c: tally_db_wall adds the off-CPU times into the
 * on-CPU column (flat and stacks), and refuses databases that cannot say
 * them. */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/db.h"

/* events: cpu-clock, page-faults, off-cpu, off-cpu-preempted (the last two
 * left out without off) */
static void build(struct tally_db *db, bool off, bool weights)
{
	char *events[] = { "cpu-clock", "page-faults", "off-cpu", "off-cpu-preempted" };
	int ne = off ? 4 : 2;
	struct tally_db_builder *b = tally_db_builder_new(ne, events, false, true);
	struct tally_meta m = { 0 };
	tally_meta_set(&m, "period-mean", "1000000,1,0,0");
	tally_db_builder_session(b, &m);
	tally_meta_release(&m);
	struct tally_db_image im = {
		.name = "nomap", .path = "", .id = "00000000", .id_kind = "none", .kind = "nomap"
	};
	uint32_t i = tally_db_builder_image(b, &im);
	/* 0x10 computes 3 samples and waits twice; 0x20 waits once, preempted once */
	uint64_t c1[] = { 3, 4, 2, 0 }, c2[] = { 0, 0, 1, 1 };
	tally_db_builder_entry(b, i, 0, 0x10, c1);
	tally_db_builder_entry(b, i, 0, 0x20, c2);
	struct tally_frame fr[] = { { i, 0x10 }, { i, 0x20 } };
	tally_db_builder_stack(b, 0, fr, 1, c1);
	tally_db_builder_stack(b, 0, fr + 1, 1, c2);
	tally_db_builder_finish(b, db);
	if (!weights)
		return;
	/* what a recording stores: ns for the times, the events for page-faults */
	size_t n = (size_t)db->nevents;
	db->has_weights = true;
	free(db->weights);
	db->weights = xcalloc(db->nentries * n, sizeof *db->weights);
	free(db->stack_weights);
	db->stack_weights = xcalloc(db->nstacks * n, sizeof *db->stack_weights);
	for (size_t r = 0; r < db->nentries; r++) {
		bool a = db->entries[r].offset == 0x10;
		uint64_t w[] = { a ? 3000000 : 0, a ? 4 : 0, a ? 50000000 : 20000000,
				 a ? 0 : 7000000 };
		memcpy(db->weights + r * n, w, n * sizeof *w);
	}
	for (size_t s = 0; s < db->nstacks; s++) {
		bool a = db->frame_tab[db->stack_frames[db->stacks[s].first]].offset == 0x10;
		uint64_t w[] = { a ? 3000000 : 0, a ? 4 : 0, a ? 50000000 : 20000000,
				 a ? 0 : 7000000 };
		memcpy(db->stack_weights + s * n, w, n * sizeof *w);
	}
}

static uint64_t stack(const struct tally_db *db, uint64_t off, int ev)
{
	for (size_t s = 0; s < db->nstacks; s++)
		if (db->frame_tab[db->stack_frames[db->stacks[s].first]].offset == off)
			return db->stack_counts[s * (size_t)db->nevents + (size_t)ev];
	fail_msg("no stack at %#llx", (unsigned long long)off);
	return 0;
}

static void test_wall__adds_off_cpu(void **state)
{
	(void)state;
	struct tally_db db;
	build(&db, true, true);
	assert_int_equal(tally_db_wall(&db), 0);
	assert_string_equal(db.events[0], "wall");
	assert_string_equal(tally_db_unit(&db, 0), "ns");
	/* on + blocked + preempted, per place */
	assert_int_equal(unit_entry_count(&db, 0x10, 0), 3000000 + 50000000);
	assert_int_equal(unit_entry_count(&db, 0x20, 0), 20000000 + 7000000);
	assert_int_equal(stack(&db, 0x10, 0), 53000000);
	assert_int_equal(stack(&db, 0x20, 0), 27000000);
	/* the others stay as they were: off-CPU alone, and events that are no time */
	assert_int_equal(unit_entry_count(&db, 0x10, 2), 50000000);
	assert_int_equal(unit_entry_count(&db, 0x10, 1), 4);
	assert_int_equal(db.samples[0], 3 + 3 + 1);
	/* the sample counts beside the weights: on-CPU samples and waits */
	for (size_t i = 0; i < db.nentries; i++)
		if (db.entries[i].offset == 0x10)
			assert_int_equal(db.weights[i * (size_t)db.nevents], 3 + 2);
	for (size_t i = 0; i < db.nstacks; i++)
		if (db.frame_tab[db.stack_frames[db.stacks[i].first]].offset == 0x20)
			assert_int_equal(db.stack_weights[i * (size_t)db.nevents], 0 + 1 + 1);
	/* twice is once */
	assert_int_equal(tally_db_wall(&db), 0);
	assert_int_equal(unit_entry_count(&db, 0x10, 0), 53000000);
	/* stacks taken out of wall-clock time before more are read into them
	 * (tally_db_load_stacks), then added again: the same, never twice */
	tally_db_unwall_stacks(&db);
	assert_int_equal(stack(&db, 0x10, 0), 3000000);
	tally_db_wall_loaded_stacks(&db);
	assert_int_equal(stack(&db, 0x10, 0), 53000000);
	assert_int_equal(stack(&db, 0x20, 0), 27000000);
	tally_db_release(&db);
}

static void test_wall__refused(void **state)
{
	(void)state;
	struct tally_db db;
	build(&db, false, true);
	assert_int_equal(tally_db_wall(&db), -EINVAL);
	assert_errmsg_has("--off-cpu");
	assert_string_equal(db.events[0], "cpu-clock");
	tally_db_release(&db);
	/* counts of waits without their times: no wall-clock profile from them */
	build(&db, true, false);
	assert_int_equal(tally_db_wall(&db), -EINVAL);
	assert_errmsg_has("no sample weights");
	assert_false(db.weighed);
	tally_db_release(&db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wall__adds_off_cpu),
		cmocka_unit_test(test_wall__refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
