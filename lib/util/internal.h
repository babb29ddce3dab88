/* What lib/util's files share and nothing else uses. */
#ifndef TALLY_UTIL_INTERNAL_H
#define TALLY_UTIL_INTERNAL_H
#include <stddef.h>

/* Out of memory: the program's handler (tally_set_oom_handler), else abort. */
_Noreturn void util_oom(size_t n);
/* The capacity to grow to: doubling from have (min when empty) until want,
 * want itself when doubling would pass max. 0 when want is over max. */
size_t util_grown_size(size_t have, size_t want, size_t min, size_t max);

#endif
