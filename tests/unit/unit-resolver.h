/* A database in a temporary directory and a resolver over it, for the unit
 * tests that symbolize (test-report.c, test-symbols.c): each test's setup
 * starts from unit_resolver_fixture, fills db and makes res;
 * unit_resolver_teardown frees all three. */
#ifndef TALLY_UNIT_RESOLVER_H
#define TALLY_UNIT_RESOLVER_H

#include "unit.h"

#include <sys/stat.h>

#include "tally/db.h"
#include "tally/symbols.h"

struct fixture {
	char *dir;
	struct tally_db db;
	struct tally_resolver *res;
};

/* A fixture with its directory and a database there of one event
 * (cpu-clock), no images yet. */
static inline struct fixture *unit_resolver_fixture(void)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	f->dir = unit_tmpdir();
	struct tally_db *db = &f->db;
	db->path = xstrdup(f->dir);
	db->nevents = 1;
	db->events = xcalloc(1, sizeof(char *));
	db->events[0] = xstrdup("cpu-clock");
	db->samples = xcalloc(1, sizeof(uint64_t));
	return f;
}

/* The JIT map of (pid, id) in the database directory dir: its lines, text. */
static inline void unit_write_jit_map(const char *dir, int pid, const char *id, const char *text)
{
	char *jit = unit_path(dir, "jit"), *name = NULL, *path;
	mkdir(jit, 0755);
	assert_true(asprintf(&name, "perf-%d-%s.map", pid, id) > 0);
	path = unit_path(jit, name);
	unit_write_str(path, text);
	free(path);
	free(name);
	free(jit);
}

static inline int unit_resolver_teardown(void **state)
{
	struct fixture *f = *state;
	tally_resolver_free(f->res);
	tally_db_release(&f->db);
	tally_remove_tree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

#endif
