/* Unit tests for lib/export: the --percent-limit cut, names for line formats,
 * the selection applied to a database, and a pprof profile decoded back with
 * protobuf-c from a database built in memory. */
#define _GNU_SOURCE
#include "unit.h"

#include <zlib.h>

#include "profile.pb-c.h"
#include "tally/export.h"

typedef Perftools__Profiles__Profile PProfile_t;

/* ---- the cut ---- */

static void test_export__trim_cuts_small_paths(void **state)
{
	(void)state;
	/* A;B;C 90, A;B;D 5, A;E 5 */
	const uint32_t keys[] = { 1, 2, 3, 1, 2, 4, 1, 5 };
	const struct tally_trim_stack st[] = { { 0, 3 }, { 3, 3 }, { 6, 2 } };
	const uint64_t counts[] = { 90, 5, 5 };
	uint32_t keep[3];
	uint64_t min = 10;
	tally_export_trim(keys, st, 3, counts, 1, &min, keep);
	assert_int_equal(keep[0], 3); /* whole */
	assert_int_equal(keep[1], 2); /* A;B (95) kept, D (5) cut */
	assert_int_equal(keep[2], 1); /* A kept, E cut */
	min = 0;
	tally_export_trim(keys, st, 3, counts, 1, &min, keep);
	assert_int_equal(keep[0], 3);
	assert_int_equal(keep[1], 3);
	assert_int_equal(keep[2], 2);
	min = 101; /* even the root is too small */
	tally_export_trim(keys, st, 3, counts, 1, &min, keep);
	assert_int_equal(keep[0], 0);
	assert_int_equal(keep[2], 0);
}

static void test_export__trim_any_event_keeps(void **state)
{
	(void)state;
	/* two events: A;B big in event 0, A;C big only in event 1 */
	const uint32_t keys[] = { 1, 2, 1, 3 };
	const struct tally_trim_stack st[] = { { 0, 2 }, { 2, 2 } };
	const uint64_t counts[] = { 100, 0, 1, 50 };
	const uint64_t min[] = { 10, 10 };
	uint32_t keep[2];
	tally_export_trim(keys, st, 2, counts, 2, min, keep);
	assert_int_equal(keep[0], 2);
	assert_int_equal(keep[1], 2);
}

static void test_export__trim_min_rounds_up(void **state)
{
	(void)state;
	int ev[] = { 0, 1 };
	struct tally_export x = { .events = ev, .nevents = 2, .percent_limit = 0.5 };
	uint64_t totals[] = { 1001, 0 }, min[2];
	tally_export_trim_min(&x, totals, min);
	assert_int_equal(min[0], 6); /* 5.005 rounds up */
	assert_int_equal(min[1], 0);
	x.percent_limit = 0;
	tally_export_trim_min(&x, totals, min);
	assert_int_equal(min[0], 0);
}

static void test_export__add_name(void **state)
{
	(void)state;
	struct strbuf sb = STRBUF_INIT;
	tally_export_add_name(&sb, "a;b\nc\td e", ";");
	assert_string_equal(sb.buf, "a_b?c?d e");
	strbuf_release(&sb);
}

/* ---- a database in memory ---- */

/* One image (a file that is not on this machine), two processes, three
 * stacks: main;work 60 (pid 10), main;work;inner 30 (pid 10), main;other 10
 * (pid 20); per-pid, one event. */
static void memdb_init(struct tally_db *db)
{
	memset(db, 0, sizeof(*db));
	db->path = xstrdup("mem.db");
	tally_meta_set(&db->session, "period-mean", "1000000");
	tally_meta_set(&db->session, "duration", "1.5");
	tally_meta_set(&db->session, "start-time", "2026-01-02T03:04:05Z");
	db->nevents = 1;
	db->events = xcalloc(1, sizeof(char *));
	db->events[0] = xstrdup("cpu-clock");
	db->samples = xcalloc(1, sizeof(uint64_t));
	db->samples[0] = 100;
	db->per_pid = true;
	db->has_stacks = true;
	db->nimages = 1;
	db->images = xcalloc(1, sizeof(*db->images));
	db->images[0] =
		(struct tally_db_image){ .name = xstrdup("prog"),
					 .path = xstrdup("/nonexistent/tally-unit/prog"),
					 .id = xstrdup("00112233445566778899aabbccddeeff00112233"),
					 .id_kind = xstrdup("build-id"),
					 .kind = xstrdup("exec") };
	/* frames: 0 work+0x10, 1 main ret 0x101, 2 inner 0x20, 3 work ret 0x15, 4 other 0x30 */
	static const uint64_t offs[] = { 0x1010, 0x1101, 0x1020, 0x1015, 0x1030 };
	db->nframe_tab = 5;
	db->frame_tab = xcalloc(5, sizeof(*db->frame_tab));
	for (size_t i = 0; i < 5; i++)
		db->frame_tab[i] = (struct tally_frame){ 0, offs[i] };
	static const uint32_t order[] = { 0, 1, 2, 3, 1, 4, 1 };
	db->stack_frames = xcalloc(7, sizeof(uint32_t));
	memcpy(db->stack_frames, order, sizeof(order));
	db->nstack_frames = 7;
	db->nstacks = 3;
	db->stacks = xcalloc(3, sizeof(*db->stacks));
	db->stacks[0] = (struct tally_db_stack){ 0, 2, 10, 0 };
	db->stacks[1] = (struct tally_db_stack){ 2, 3, 10, 0 };
	db->stacks[2] = (struct tally_db_stack){ 5, 2, 20, 0 };
	db->stack_counts = xcalloc(3, sizeof(uint64_t));
	db->stack_counts[0] = 60;
	db->stack_counts[1] = 30;
	db->stack_counts[2] = 10;
	/* the flat profile: the leaves */
	db->nentries = 3;
	db->entries = xcalloc(3, sizeof(*db->entries));
	db->entries[0] = (struct tally_db_entry){ 0, 10, 0x1010 };
	db->entries[1] = (struct tally_db_entry){ 0, 10, 0x1020 };
	db->entries[2] = (struct tally_db_entry){ 0, 20, 0x1030 };
	db->counts = xcalloc(3, sizeof(uint64_t));
	db->counts[0] = 60;
	db->counts[1] = 30;
	db->counts[2] = 10;
	db->nprofs = 2;
	db->profs = xcalloc(2, sizeof(*db->profs));
	db->profs[0] = (struct tally_db_prof){ 0, 10, 0, 2, 0 };
	db->profs[1] = (struct tally_db_prof){ 0, 20, 2, 3, 0 };
	db->ntasks = 2;
	db->tasks = xcalloc(2, sizeof(*db->tasks));
	db->tasks[0] = (struct tally_db_task){ 10, xstrdup("ten"),
					       xstrdup("/nonexistent/tally-unit/prog") };
	db->tasks[1] = (struct tally_db_task){ 20, xstrdup("twenty"),
					       xstrdup("/nonexistent/tally-unit/prog") };
}

static void test_export__select_zeroes(void **state)
{
	(void)state;
	struct tally_db db;
	memdb_init(&db);
	struct tally_select sel;
	tally_select_init(&sel);
	sel.comm = "twenty";
	sel.samples = true; /* the counts as sampled: what is selected, not weighed */
	assert_int_equal(tally_select_check(&sel, &db, "mem.db", NULL), 0);
	assert_false(db.weighed);
	tally_select_apply(&db, &sel, true);
	assert_int_equal(tally_select_total(&db, 0, false), 10);
	assert_int_equal(tally_select_total(&db, 0, true), 10);
	assert_int_equal(db.stack_counts[2], 10);
	tally_db_release(&db);
}

static PProfile_t *unpack(const struct strbuf *gz)
{
	uint8_t *raw = xmalloc(1 << 20);
	z_stream z;
	memset(&z, 0, sizeof(z));
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)gz->buf;
	z.avail_in = (uInt)gz->len;
	z.next_out = raw;
	z.avail_out = 1 << 20;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	size_t n = (1 << 20) - z.avail_out;
	inflateEnd(&z);
	PProfile_t *p = perftools__profiles__profile__unpack(NULL, n, raw);
	free(raw);
	assert_non_null(p);
	return p;
}

static const char *pstr(const Perftools__Profiles__Profile *p, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

/* What tally export does to a database in memory: the selection check (which
 * weighs it), a resolver, pprof of event 0, unpacked; pprof_done frees it
 * all, the database too. */
struct pprof_run {
	struct tally_resolver *res;
	int ev;
	struct tally_export x;
	struct tally_export_out out;
	PProfile_t *p;
};

static PProfile_t *pprof_of(struct pprof_run *r, struct tally_db *db)
{
	struct tally_select sel;
	tally_select_init(&sel);
	assert_int_equal(tally_select_check(&sel, db, "mem.db", NULL), 0);
	memset(r, 0, sizeof(*r));
	tally_resolver_new(&r->res, db, NULL);
	r->x = (struct tally_export){
		.db = db, .res = r->res, .input = "mem.db", .events = &r->ev, .nevents = 1
	};
	assert_int_equal(tally_export_pprof(&r->x, &r->out), 0);
	r->p = unpack(&r->out.files[0].data);
	return r->p;
}

static void pprof_done(struct pprof_run *r, struct tally_db *db)
{
	perftools__profiles__profile__free_unpacked(r->p, NULL);
	tally_export_out_release(&r->out);
	tally_resolver_free(r->res);
	tally_db_release(db);
}

static void test_export__pprof_roundtrip(void **state)
{
	(void)state;
	struct tally_db db;
	memdb_init(&db);
	/* what tally export does: the selection check weighs the database (here
	 * without weights of its own: count x period-mean) */
	struct tally_select sel;
	tally_select_init(&sel);
	assert_int_equal(tally_select_check(&sel, &db, "mem.db", NULL), 0);
	assert_true(db.weighed);
	struct tally_resolver *res;
	tally_resolver_new(&res, &db, NULL);
	int ev = 0;
	struct tally_export x = {
		.db = &db, .res = res, .input = "mem.db", .events = &ev, .nevents = 1
	};
	struct tally_export_out out = { 0 };
	assert_int_equal(tally_export_pprof(&x, &out), 0);
	assert_int_equal(out.n, 1);
	PProfile_t *p = unpack(&out.files[0].data);
	assert_string_equal(pstr(p, 0), "");
	/* samples and cpu nanoseconds */
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(pstr(p, p->sample_type[0]->type), "samples");
	assert_string_equal(pstr(p, p->sample_type[1]->type), "cpu");
	assert_string_equal(pstr(p, p->sample_type[1]->unit), "nanoseconds");
	assert_int_equal(p->period, 1000000);
	assert_int_equal(p->duration_nanos, 1500000000);
	assert_int_equal(p->time_nanos, 1767323045LL * 1000000000LL);
	assert_int_equal(p->n_sample, 3);
	int64_t sum = 0, ns = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		Perftools__Profiles__Sample *s = p->sample[i];
		assert_int_equal(s->n_value, 2);
		sum += s->value[0];
		ns += s->value[1];
		assert_int_equal(s->value[1], s->value[0] * 1000000);
		/* labels: pid and comm */
		assert_int_equal(s->n_label, 2);
		assert_string_equal(pstr(p, s->label[0]->key), "pid");
		assert_string_equal(pstr(p, s->label[1]->key), "comm");
		assert_string_equal(pstr(p, s->label[1]->str),
				    s->label[0]->num == 10 ? "ten" : "twenty");
		/* leaf first: the leaf's address is its offset (no file here), callers' are return
		 * address - 1 */
		assert_true(s->n_location_id >= 2);
		Perftools__Profiles__Location *leaf = p->location[s->location_id[0] - 1];
		assert_int_equal(leaf->id, s->location_id[0]);
		Perftools__Profiles__Location *root =
			p->location[s->location_id[s->n_location_id - 1] - 1];
		assert_int_equal(root->address, 0x1100);
		if (s->value[0] == 60)
			assert_int_equal(leaf->address, 0x1010);
	}
	assert_int_equal(sum, 100);
	assert_int_equal(ns, 100000000);
	/* one mapping, the program, with its build-id, holding every address */
	assert_int_equal(p->n_mapping, 1);
	assert_string_equal(pstr(p, p->mapping[0]->filename), "/nonexistent/tally-unit/prog");
	assert_string_equal(pstr(p, p->mapping[0]->build_id),
			    "00112233445566778899aabbccddeeff00112233");
	for (size_t i = 0; i < p->n_location; i++) {
		assert_int_equal(p->location[i]->mapping_id, 1);
		assert_true(p->location[i]->address >= p->mapping[0]->memory_start);
		assert_true(p->location[i]->address < p->mapping[0]->memory_limit);
		/* the file offset of an address, by the mapping, is the recorded offset */
		assert_int_equal(p->location[i]->address - p->mapping[0]->memory_start +
					 p->mapping[0]->file_offset,
				 p->location[i]->address);
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	tally_export_out_release(&out);

	/* --percent-limit 20: main;other (10) and inner (30 of 100 stays) */
	x.percent_limit = 20;
	assert_int_equal(tally_export_pprof(&x, &out), 0);
	p = unpack(&out.files[0].data);
	sum = 0;
	bool other = false;
	for (size_t i = 0; i < p->n_sample; i++) {
		sum += p->sample[i]->value[0];
		Perftools__Profiles__Location *leaf = p->location[p->sample[i]->location_id[0] - 1];
		if (leaf->n_line &&
		    !strcmp(pstr(p, p->function[leaf->line[0]->function_id - 1]->name),
			    "[other]")) {
			other = true;
			assert_int_equal(p->sample[i]->value[0], 10);
			assert_int_equal(p->sample[i]->n_location_id, 2); /* [other] under main */
		}
	}
	assert_int_equal(sum, 100);
	assert_true(other);
	perftools__profiles__profile__free_unpacked(p, NULL);
	tally_export_out_release(&out);
	tally_resolver_free(res);
	tally_db_release(&db);
}

/* Stacks that differ in the database but not in pprof are one sample, their
 * values added up, and frames that are one instruction one location: callers
 * at offsets 0 and 1 (both the byte before a return address: 0), equal
 * frames of two pids in a database that is not per-pid; a caller whose call
 * instruction is another stack's leaf shares that leaf's location. */
static void test_export__pprof_equal_locations_add_up(void **state)
{
	(void)state;
	struct tally_db db;
	memdb_init(&db);
	db.per_pid = false;
	/* frames: 0 leaf 0x1010, 1 caller 0x0, 2 caller 0x1, 3 leaf 0x1011,
	 * 4 caller 0x1012 (calls from 0x1011), 5 leaf 0x1020, 6 leaf 0x1030 */
	static const uint64_t offs[] = { 0x1010, 0x0, 0x1, 0x1011, 0x1012, 0x1020, 0x1030 };
	free(db.frame_tab);
	db.nframe_tab = 7;
	db.frame_tab = xcalloc(7, sizeof(*db.frame_tab));
	for (size_t i = 0; i < 7; i++)
		db.frame_tab[i] = (struct tally_frame){ 0, offs[i] };
	/* 0;1 60, 0;2 20, 3 5, 5;4 5, 6;1 6 (pid 10), 6;1 4 (pid 20) */
	static const uint32_t frames[] = { 0, 1, 0, 2, 3, 5, 4, 6, 1, 6, 1 };
	free(db.stack_frames);
	db.stack_frames = xcalloc(ARRAY_SIZE(frames), sizeof(uint32_t));
	memcpy(db.stack_frames, frames, sizeof(frames));
	db.nstack_frames = ARRAY_SIZE(frames);
	free(db.stacks);
	db.nstacks = 6;
	db.stacks = xcalloc(6, sizeof(*db.stacks));
	db.stacks[0] = (struct tally_db_stack){ 0, 2, 0, 0 };
	db.stacks[1] = (struct tally_db_stack){ 2, 2, 0, 0 };
	db.stacks[2] = (struct tally_db_stack){ 4, 1, 0, 0 };
	db.stacks[3] = (struct tally_db_stack){ 5, 2, 0, 0 };
	db.stacks[4] = (struct tally_db_stack){ 7, 2, 10, 0 };
	db.stacks[5] = (struct tally_db_stack){ 9, 2, 20, 0 };
	static const uint64_t sc[] = { 60, 20, 5, 5, 6, 4 };
	free(db.stack_counts);
	db.stack_counts = xcalloc(6, sizeof(uint64_t));
	memcpy(db.stack_counts, sc, sizeof(sc));
	/* the flat profile: the leaves */
	static const uint64_t leaves[] = { 0x1010, 0x1011, 0x1020, 0x1030 };
	static const uint64_t lc[] = { 80, 5, 5, 10 };
	for (size_t i = 0; i < 3; i++)
		db.entries[i] = (struct tally_db_entry){ 0, 0, leaves[i] };
	db.entries = xrealloc(db.entries, 4 * sizeof(*db.entries));
	db.entries[3] = (struct tally_db_entry){ 0, 0, leaves[3] };
	db.nentries = 4;
	db.counts = xrealloc(db.counts, 4 * sizeof(uint64_t));
	memcpy(db.counts, lc, sizeof(lc));
	db.nprofs = 1;
	db.profs[0] = (struct tally_db_prof){ 0, 0, 0, 4, 0 };

	struct pprof_run run;
	PProfile_t *p = pprof_of(&run, &db);
	/* locations: 0x1010, 0x0 (callers 0x0 and 0x1), 0x1011 (leaf 0x1011 and
	 * caller 0x1012), 0x1020, 0x1030 */
	assert_int_equal(p->n_location, 5);
	assert_int_equal(p->n_sample, 4);
	int64_t sum = 0;
	uint64_t leaf_1011 = 0, caller_of_1020 = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		Perftools__Profiles__Sample *s = p->sample[i];
		uint64_t leaf = p->location[s->location_id[0] - 1]->address;
		sum += s->value[0];
		assert_int_equal(s->n_label, 0); /* not per-pid: no pid */
		if (leaf == 0x1010) {
			assert_int_equal(s->value[0], 80); /* 60 + 20 */
			assert_int_equal(s->n_location_id, 2);
			assert_int_equal(p->location[s->location_id[1] - 1]->address, 0);
		} else if (leaf == 0x1011) {
			assert_int_equal(s->value[0], 5);
			leaf_1011 = s->location_id[0];
		} else if (leaf == 0x1020) {
			assert_int_equal(s->value[0], 5);
			assert_int_equal(s->n_location_id, 2);
			caller_of_1020 = s->location_id[1];
		} else {
			assert_int_equal(leaf, 0x1030);
			assert_int_equal(s->value[0], 10); /* 6 (pid 10) + 4 (pid 20) */
		}
	}
	assert_int_equal(sum, 100);
	assert_true(leaf_1011 != 0);
	assert_int_equal(caller_of_1020, leaf_1011);
	pprof_done(&run, &db);
}

/* Many stacks, each equal (in pprof) to one far from it in the database:
 * stack i and i + 50 have the same frames and pids 10 and 20 in a database
 * that is not per-pid, so 100 stacks are 50 samples of twice the count. */
static void test_export__pprof_far_equal_stacks_add_up(void **state)
{
	(void)state;
	struct tally_db db;
	memdb_init(&db);
	db.per_pid = false;
	enum { N = 100, HALF = N / 2 };
	free(db.frame_tab);
	db.nframe_tab = HALF + 1; /* a leaf per pair, and a caller */
	db.frame_tab = xcalloc(db.nframe_tab, sizeof(*db.frame_tab));
	for (size_t i = 0; i < HALF; i++)
		db.frame_tab[i] = (struct tally_frame){ 0, 0x2000 + i * 4 };
	db.frame_tab[HALF] = (struct tally_frame){ 0, 0x1101 };
	free(db.stack_frames);
	db.nstack_frames = 2 * N;
	db.stack_frames = xcalloc(db.nstack_frames, sizeof(uint32_t));
	free(db.stacks);
	db.nstacks = N;
	db.stacks = xcalloc(N, sizeof(*db.stacks));
	free(db.stack_counts);
	db.stack_counts = xcalloc(N, sizeof(uint64_t));
	for (uint32_t i = 0; i < N; i++) {
		db.stack_frames[2 * i] = i % HALF;
		db.stack_frames[2 * i + 1] = HALF;
		db.stacks[i] = (struct tally_db_stack){ 2 * i, 2, i < HALF ? 10 : 20, 0 };
		db.stack_counts[i] = 1 + i % HALF; /* pair i: 2 * (1 + i) */
	}
	uint64_t total = 0;
	for (uint32_t i = 0; i < N; i++)
		total += db.stack_counts[i];
	db.samples[0] = total;
	free(db.entries);
	free(db.counts);
	db.nentries = HALF;
	db.entries = xcalloc(HALF, sizeof(*db.entries));
	db.counts = xcalloc(HALF, sizeof(uint64_t));
	for (uint32_t i = 0; i < HALF; i++) {
		db.entries[i] = (struct tally_db_entry){ 0, 0, 0x2000 + i * 4 };
		db.counts[i] = 2 * (1 + i);
	}
	db.nprofs = 1;
	db.profs[0] = (struct tally_db_prof){ 0, 0, 0, HALF, 0 };

	struct pprof_run run;
	PProfile_t *p = pprof_of(&run, &db);
	assert_int_equal(p->n_sample, HALF);
	assert_int_equal(p->n_location, HALF + 1);
	for (size_t k = 0; k < p->n_sample; k++) {
		Perftools__Profiles__Sample *s = p->sample[k];
		uint64_t i = (p->location[s->location_id[0] - 1]->address - 0x2000) / 4;
		assert_int_equal(s->value[0], 2 * (1 + i));
		assert_int_equal(i, k); /* in the order first met */
	}
	pprof_done(&run, &db);
}

/* A database with weights of its own: pprof's cpu values are each stack's
 * summed periods (never its count times one mean period), its samples the
 * counts, and the period the mean of the periods; --samples leaves one type. */
static void test_export__pprof_own_weights(void **state)
{
	(void)state;
	struct tally_db db;
	memdb_init(&db);
	static const uint64_t sw[] = { 59000000, 31500000, 9000000 };
	db.stack_weights = xcalloc(3, sizeof(uint64_t));
	memcpy(db.stack_weights, sw, sizeof(sw));
	db.weights = xcalloc(3, sizeof(uint64_t));
	memcpy(db.weights, sw, sizeof(sw)); /* the leaves of the three stacks */
	tally_db_weigh(&db);
	struct tally_resolver *res;
	tally_resolver_new(&res, &db, NULL);
	int ev = 0;
	struct tally_export x = {
		.db = &db, .res = res, .input = "mem.db", .events = &ev, .nevents = 1
	};
	struct tally_export_out out = { 0 };
	assert_int_equal(tally_export_pprof(&x, &out), 0);
	PProfile_t *p = unpack(&out.files[0].data);
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(pstr(p, p->sample_type[0]->type), "samples");
	assert_string_equal(pstr(p, p->sample_type[0]->unit), "count");
	assert_string_equal(pstr(p, p->sample_type[1]->type), "cpu");
	assert_string_equal(pstr(p, p->sample_type[1]->unit), "nanoseconds");
	assert_string_equal(pstr(p, p->period_type->type), "cpu");
	assert_int_equal(p->period, 995000); /* 99.5 ms over 100 samples */
	int64_t n = 0, ns = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		Perftools__Profiles__Sample *s = p->sample[i];
		n += s->value[0];
		ns += s->value[1];
		if (s->value[0] == 60)
			assert_int_equal(s->value[1], 59000000);
		else if (s->value[0] == 30)
			assert_int_equal(s->value[1], 31500000);
		else
			assert_int_equal(s->value[1], 9000000);
	}
	assert_int_equal(n, 100);
	assert_int_equal(ns, 99500000);
	perftools__profiles__profile__free_unpacked(p, NULL);
	tally_export_out_release(&out);
	tally_resolver_free(res);
	tally_db_release(&db);

	/* --samples: the counts alone */
	memdb_init(&db);
	tally_resolver_new(&res, &db, NULL);
	x.db = &db;
	x.res = res;
	memset(&out, 0, sizeof(out));
	assert_int_equal(tally_export_pprof(&x, &out), 0);
	p = unpack(&out.files[0].data);
	assert_int_equal(p->n_sample_type, 1);
	assert_string_equal(pstr(p, p->sample_type[0]->type), "samples");
	assert_int_equal(p->period, 1);
	perftools__profiles__profile__free_unpacked(p, NULL);
	tally_export_out_release(&out);
	tally_resolver_free(res);
	tally_db_release(&db);
}

static void test_export__folded_lines(void **state)
{
	(void)state;
	struct tally_db db;
	memdb_init(&db);
	struct tally_resolver *res;
	tally_resolver_new(&res, &db, NULL);
	int ev = 0;
	struct tally_export x = { .db = &db,
				  .res = res,
				  .input = "mem.db",
				  .events = &ev,
				  .nevents = 1,
				  .comm_root = true };
	struct tally_export_out out = { 0 };
	assert_int_equal(tally_export_folded(&x, &out), 0);
	/* no symbols for a file that is not here: [prog] frames, one function per
	 * image, its consecutive frames one; the comm as root */
	assert_string_equal(out.files[0].data.buf, "ten;[prog] 90\ntwenty;[prog] 10\n");
	tally_export_out_release(&out);
	tally_resolver_free(res);
	tally_db_release(&db);
}

static void test_export__folded_empty_comm(void **state)
{
	(void)state;
	struct tally_db db;
	memdb_init(&db);
	/* a sampled process with an empty command name (seen in a daemon's epoch):
	 * the root label was left NULL and dereferenced */
	free(db.tasks[0].comm);
	db.tasks[0].comm = xstrdup("");
	struct tally_resolver *res;
	tally_resolver_new(&res, &db, NULL);
	int ev = 0;
	struct tally_export x = { .db = &db,
				  .res = res,
				  .input = "mem.db",
				  .events = &ev,
				  .nevents = 1,
				  .comm_root = true };
	struct tally_export_out out = { 0 };
	assert_int_equal(tally_export_folded(&x, &out), 0);
	/* named as a process missing from the task list is */
	assert_string_equal(out.files[0].data.buf, "[pid 10];[prog] 90\ntwenty;[prog] 10\n");
	tally_export_out_release(&out);
	tally_resolver_free(res);
	tally_db_release(&db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_export__trim_cuts_small_paths),
		cmocka_unit_test(test_export__trim_any_event_keeps),
		cmocka_unit_test(test_export__trim_min_rounds_up),
		cmocka_unit_test(test_export__add_name),
		cmocka_unit_test(test_export__select_zeroes),
		cmocka_unit_test(test_export__pprof_roundtrip),
		cmocka_unit_test(test_export__pprof_own_weights),
		cmocka_unit_test(test_export__pprof_equal_locations_add_up),
		cmocka_unit_test(test_export__pprof_far_equal_stacks_add_up),
		cmocka_unit_test(test_export__folded_lines),
		cmocka_unit_test(test_export__folded_empty_comm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
