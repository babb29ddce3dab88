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

/* lib/db/weigh.c: the stacks of a weighed database back to sample counts
 * (before more are read into them), and weighed again (after). */
void tally_db_unweigh_stacks(struct tally_db *db);
void tally_db_weigh_loaded_stacks(struct tally_db *db);

#endif
