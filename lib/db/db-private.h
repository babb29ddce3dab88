/* What the files of lib/db share and nobody else uses. */
#ifndef TALLY_DB_PRIVATE_H
#define TALLY_DB_PRIVATE_H

#include "tally/db.h"

/* tally_db_open_dir without the recovery step: for directories whose
 * temporaries were recovered already (a daemon's epochs) or that no other
 * writer knows (an unpacked bundle). */
int tally_db_read_dir(struct tally_db *db, const char *path);

#endif
