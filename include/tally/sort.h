/* `tally report --sort KEY[,KEY...]`: one table of the selected samples
 * grouped by the keys, as perf report --sort: comm (the command name the
 * recording kept), pid (--per-pid databases), image, function, line
 * (file:line). Rows by samples (after tally_db_weigh: by weight), then by
 * the keys' values. */
#ifndef TALLY_SORT_H
#define TALLY_SORT_H

#include <stdbool.h>

#include "tally/db.h"
#include "tally/report.h"
#include "tally/symbols.h"
#include "tally/util.h"

enum tally_sort_key {
	TALLY_SORT_COMM,
	TALLY_SORT_PID,
	TALLY_SORT_IMAGE,
	TALLY_SORT_FUNCTION,
	TALLY_SORT_LINE
};
#define TALLY_SORT_MAX 5

struct tally_sort {
	enum tally_sort_key keys[TALLY_SORT_MAX];
	int n;
};

/* "comm,image,function" into *s: each key once, at least one. -EINVAL with
 * tally_seterr naming the key and the keys there are. */
int tally_sort_parse(struct tally_sort *s, const char *spec);
/* Whether the keys need source lines from the resolver. */
bool tally_sort_needs_lines(const struct tally_sort *s);
/* Whether db can be grouped by every key: -EINVAL with tally_seterr naming
 * what is missing (pid without --per-pid, comm in an older database without
 * --per-pid) and the fix. */
int tally_sort_check(const struct tally_sort *s, const struct tally_db *db, const char *input);
/* The table of event ev (o->sel selects; o->percent_limit and o->top apply),
 * text or JSON, appended to out. */
void tally_report_sort(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_report_opts *o, const struct tally_sort *s, int ev,
		       bool json);

#endif
