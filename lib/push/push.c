/* One database pushed as one profile (tally push, the job profiler's
 * --push): weighed, symbolized, made into the format's request, sent. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally/push.h"
#include "tally/symbols.h"
#include "tally/view.h"

int tally_push_db(const struct tally_push_opts *o, struct tally_db *db,
		  const struct tally_resolver_opts *ro, struct tally_push_sent *sent)
{
	if (sent)
		memset(sent, 0, sizeof(*sent));
	double start = 0, stop = 0;
	if (!tally_db_utc_time(tally_meta_get(&db->session, "start-time"), &start))
		start = tally_now_wall();
	if (!tally_db_utc_time(tally_meta_get(&db->session, "stop-time"), &stop)) {
		const char *d = tally_meta_get(&db->session, "duration");
		stop = start + (d ? strtod(d, NULL) : 0);
	}
	if (stop < start)
		stop = start;
	tally_view_weigh(db, false);
	int *events = xcalloc((size_t)db->nevents + 1, sizeof(int));
	for (int e = 0; e < db->nevents; e++)
		events[e] = e;
	struct tally_resolver *res = NULL;
	struct tally_resolver_opts none = { 0 };
	int r = tally_resolver_new(&res, db, ro ? ro : &none);
	struct tally_push_payload p = { 0 };
	if (!r) {
		struct tally_export x = { .db = db,
					  .res = res,
					  .input = db->path,
					  .events = events,
					  .nevents = db->nevents };
		r = tally_push_payload_build(o, &x, start, stop, &p);
	}
	if (!r && !p.samples)
		r = tally_seterr(-ENODATA, "'%s' holds no sample to push",
				 db->path ? db->path : "the database");
	double ra;
	if (!r)
		r = tally_push_send(o, &p, &ra);
	if (!r && sent) {
		sent->samples = p.samples;
		sent->bytes = p.body.len;
		sent->profile_bytes = p.profile_bytes;
	}
	tally_push_payload_release(&p);
	tally_resolver_free(res);
	free(events);
	return r;
}
