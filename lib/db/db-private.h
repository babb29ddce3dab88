/* What the files of lib/db share and nobody else uses. */
#ifndef TALLY_DB_PRIVATE_H
#define TALLY_DB_PRIVATE_H

#include "tally/db.h"

/* tally_db_open_dir without the recovery step: for directories whose
 * temporaries were recovered already (a daemon's epochs) or that no other
 * writer knows (an unpacked bundle). */
int tally_db_read_dir(struct tally_db *db, const char *path);
/* The same with tally_db_open_dir_flags' flags (no recovery). */
int tally_db_read_dir_flags(struct tally_db *db, const char *path, unsigned flags);
/* Whether db (its session read) is of the format version with labels (2):
 * its profiles may name a label set, its stacks name one after the pid. */
bool tally_db_labelled(const struct tally_db *db);
/* Whether it is format version 3 or 4: counts come with weights. */
bool tally_db_weighted(const struct tally_db *db);
/* Whether it is format version 4: its stacks file is binary (or text, as
 * version 3's: either is read). */
bool tally_db_binary_stacks(const struct tally_db *db);
/* The session's weight-total, one per event, into out: 0, or -1 when it has
 * none (the reader checked its form). */
int tally_db_weight_totals(const struct tally_db *db, uint64_t *out);

/* The sample counts and their weights whether tally_db_weigh ran or not
 * (weights: NULL when the database has none). */
static inline const uint64_t *tally_db_raw_counts(const struct tally_db *db)
{
	return db->weighed ? db->weights : db->counts;
}
static inline const uint64_t *tally_db_raw_weights(const struct tally_db *db)
{
	return db->weighed ? db->counts : db->weights;
}
static inline const uint64_t *tally_db_raw_stack_counts(const struct tally_db *db)
{
	return db->weighed ? db->stack_weights : db->stack_counts;
}
static inline const uint64_t *tally_db_raw_stack_weights(const struct tally_db *db)
{
	return db->weighed ? db->stack_counts : db->stack_weights;
}
/* lib/db/weigh.c: what one sample of event ev weighs in a database without
 * weights (its session's period-mean; 1 when it has none). */
uint64_t tally_db_mean_period(const struct tally_db *db, int ev);

/* lib/db/weigh.c: the stacks of a weighed database back to sample counts
 * (before more are read into them), and weighed again (after). */
void tally_db_unweigh_stacks(struct tally_db *db);
void tally_db_weigh_loaded_stacks(struct tally_db *db);

#endif
