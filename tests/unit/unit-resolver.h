/* A database in a temporary directory and a resolver over it, for the unit
 * tests that symbolize (test-report.c, test-symbols.c): each test's setup
 * fills db and makes res; unit_resolver_teardown frees all three. */
#ifndef TALLY_UNIT_RESOLVER_H
#define TALLY_UNIT_RESOLVER_H

#include "unit.h"

#include "tally/db.h"
#include "tally/symbols.h"

struct fixture {
	char *dir;
	struct tally_db db;
	struct tally_resolver *res;
};

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
