/* Unit tests for lib/symbols: the resolver's answers for code that only a
 * symbol table names (a JIT image's perf map, in a temporary directory), in
 * whatever order the addresses come: a lookup that starts from the symbol
 * found last, and the one frame kept per symbol rather than per address. */
#define _GNU_SOURCE
#include "unit-resolver.h"


/* one JIT image (pid 10) of three functions with gaps between them */
static int setup(void **state)
{
	struct fixture *f = unit_resolver_fixture();
	unit_write_jit_map(f->dir, 10, "a1", "1000 100 main_a\n2000 100 work\n3000 100 leaf\n");
	struct tally_db *db = &f->db;
	db->nimages = 1;
	db->images = xcalloc(1, sizeof(*db->images));
	db->images[0] = (struct tally_db_image){ .name = xstrdup("jitA"),
						 .path = xstrdup(""),
						 .id = xstrdup("a1"),
						 .id_kind = xstrdup("none"),
						 .kind = xstrdup("jit"),
						 .pid = 10 };
	assert_int_equal(tally_resolver_new(&f->res, db, NULL), 0);
	*state = f;
	return 0;
}


/* offsets and the function at each (NULL: none), in address order */
static const struct {
	uint64_t off;
	const char *name;
	uint64_t addr;
} at[] = {
	{ 0x500, NULL, 0 },           { 0x1000, "main_a", 0x1000 }, { 0x1050, "main_a", 0x1000 },
	{ 0x10ff, "main_a", 0x1000 }, { 0x1100, NULL, 0 },          { 0x1fff, NULL, 0 },
	{ 0x2000, "work", 0x2000 },   { 0x2080, "work", 0x2000 },   { 0x2100, NULL, 0 },
	{ 0x3000, "leaf", 0x3000 },   { 0x30ff, "leaf", 0x3000 },   { 0x3100, NULL, 0 },
	{ 0x100000, NULL, 0 },
};

/* the order of the lookups: ascending, descending, then jumping about */
static size_t order_of(int pass, size_t i)
{
	size_t n = ARRAY_SIZE(at);
	if (pass == 0)
		return i;
	if (pass == 1)
		return n - 1 - i;
	return (i * 5 + 3) % n; /* 5 and 13 are coprime: every offset once */
}

static void test_symbols__lookup_in_any_order(void **state)
{
	struct fixture *f = *state;
	for (int pass = 0; pass < 3; pass++)
		for (size_t i = 0; i < ARRAY_SIZE(at); i++) {
			size_t k = order_of(pass, i);
			const struct tally_sym *y = tally_resolve(f->res, 0, at[k].off);
			if (!at[k].name) {
				assert_null(y);
				continue;
			}
			assert_non_null(y);
			assert_string_equal(y->name, at[k].name);
			assert_int_equal(y->addr, at[k].addr);
		}
}

static void test_symbols__frames_of_symbol_only_code(void **state)
{
	struct fixture *f = *state;
	for (int pass = 0; pass < 3; pass++)
		for (size_t i = 0; i < ARRAY_SIZE(at); i++) {
			size_t k = order_of(pass, i);
			const struct tally_srcframe *fr;
			size_t n = tally_resolve_frames(f->res, 0, at[k].off, false, &fr);
			if (!at[k].name) {
				assert_int_equal(n, 0);
				continue;
			}
			/* the symbol's name and address, no source line: the same
			 * frame for every address of the function */
			assert_int_equal(n, 1);
			assert_string_equal(fr[0].name, at[k].name);
			assert_int_equal(fr[0].addr, at[k].addr);
			assert_null(fr[0].file);
			assert_int_equal(fr[0].line, 0);
			assert_false(fr[0].inlined);
		}
	/* a return address names the call before it: the byte before */
	const struct tally_srcframe *fr;
	assert_int_equal(tally_resolve_frames(f->res, 0, 0x2001, true, &fr), 1);
	assert_string_equal(fr[0].name, "work");
	assert_int_equal(tally_resolve_frames(f->res, 0, 0x2000, true, &fr), 0);
	assert_int_equal(tally_resolve_frames(f->res, 0, 0x1100, true, &fr), 1);
	assert_string_equal(fr[0].name, "main_a");
	/* an image the database does not have */
	assert_int_equal(tally_resolve_frames(f->res, 7, 0x2000, false, &fr), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_symbols__lookup_in_any_order, setup,
						unit_resolver_teardown),
		cmocka_unit_test_setup_teardown(test_symbols__frames_of_symbol_only_code, setup,
						unit_resolver_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
