/* Wall-clock profiles: on-CPU time (the time-weighted samples of cpu-clock or
 * task-clock) and off-CPU time (off-cpu, off-cpu-preempted) added into one
 * column, so that the shares of a task add up to all of its time
 * (docs/offcpu.md). A view of a database read into memory, never written. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally/db.h"
#include "tally/util.h"

/* the inverse: what add_columns added taken back out */
static void sub_columns(const struct tally_db *db, uint64_t *v, size_t rows)
{
	size_t ne = (size_t)db->nevents;
	for (size_t i = 0; v && i < rows; i++)
		for (int k = 1; k < 3; k++)
			if (db->wall[k] >= 0) {
				uint64_t *w = &v[i * ne + (size_t)db->wall[0]],
					 o = v[i * ne + (size_t)db->wall[k]];
				*w = *w >= o ? *w - o : 0;
			}
}

static void add_columns(const struct tally_db *db, uint64_t *v, size_t rows)
{
	size_t ne = (size_t)db->nevents;
	for (size_t i = 0; v && i < rows; i++)
		for (int k = 1; k < 3; k++)
			if (db->wall[k] >= 0)
				v[i * ne + (size_t)db->wall[0]] =
					tally_add_sat(v[i * ne + (size_t)db->wall[0]],
						      v[i * ne + (size_t)db->wall[k]]);
}

int tally_db_wall(struct tally_db *db)
{
	if (db->walled)
		return 0;
	int on = tally_db_event(db, "cpu-clock");
	if (on < 0)
		on = tally_db_event(db, "task-clock");
	int off = tally_db_event(db, "off-cpu"), pre = tally_db_event(db, "off-cpu-preempted");
	if (on < 0 || off < 0)
		return tally_seterr(
			-EINVAL,
			"'%s' has no %s time for --wall (record with --off-cpu, which samples cpu-clock too)",
			db->path ? db->path : "database",
			on < 0 ? "on-CPU (cpu-clock)" : "off-CPU");
	/* without stored weights an off-CPU count is a number of waits, not their time */
	if (!db->has_weights)
		return tally_seterr(
			-EINVAL,
			"'%s' keeps no sample weights, so no off-CPU times for --wall (record it again with this tally)",
			db->path ? db->path : "database");
	tally_db_weigh(db);
	db->wall[0] = on;
	db->wall[1] = off;
	db->wall[2] = pre;
	/* the weights (in counts once weighed) and the sample counts beside them */
	add_columns(db, db->counts, db->nentries);
	add_columns(db, db->weights, db->nentries);
	if (db->samples) {
		db->samples[on] = tally_add_sat(db->samples[on], db->samples[off]);
		if (pre >= 0)
			db->samples[on] = tally_add_sat(db->samples[on], db->samples[pre]);
	}
	free(db->events[on]);
	db->events[on] = xstrdup("wall");
	db->walled = true;
	/* the stacks read so far; those read later get the same at their load */
	tally_db_wall_loaded_stacks(db);
	return 0;
}

void tally_db_wall_loaded_stacks(struct tally_db *db)
{
	if (!db->walled)
		return;
	add_columns(db, db->stack_counts, db->nstacks);
	add_columns(db, db->stack_weights, db->nstacks);
}

void tally_db_unwall_stacks(struct tally_db *db)
{
	if (!db->walled)
		return;
	sub_columns(db, db->stack_counts, db->nstacks);
	sub_columns(db, db->stack_weights, db->nstacks);
}
