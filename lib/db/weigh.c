/* Period weights: every count beside the sum of its samples' periods, and the
 * switch that makes the views and exports period-weighted (docs/format.md,
 * "weights"; docs/sampling.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally/collect.h"
#include "tally/db.h"
#include "tally/util.h"
#include "db-private.h"

/* Field ev of a comma-separated session value, or NULL (s is copied into buf). */
static const char *field(const char *s, int ev, char *buf, size_t len)
{
	if (!s)
		return NULL;
	for (int i = 0; i < ev; i++) {
		s = strchr(s, ',');
		if (!s)
			return NULL;
		s++;
	}
	size_t n = strcspn(s, ",");
	if (n == 0 || n >= len)
		return NULL;
	memcpy(buf, s, n);
	buf[n] = 0;
	return buf;
}

const char *tally_db_unit(const struct tally_db *db, int ev)
{
	char buf[32];
	const char *u = field(tally_meta_get(&db->session, "weight-unit"), ev, buf, sizeof buf);
	if (u && !strcmp(u, "ns"))
		return "ns";
	if (u && !strcmp(u, "events"))
		return "events";
	if (ev < 0 || ev >= db->nevents)
		return "events";
	const char *name = db->events[ev];
	if (!strcmp(name, "off-cpu") || (db->walled && ev == db->wall[0]))
		return "ns";
	const struct tally_event_desc *d = tally_event_find(name);
	return d && (d->time_based || d->offcpu) ? "ns" : "events";
}

bool tally_db_unit_time(const struct tally_db *db, int ev)
{
	return !strcmp(tally_db_unit(db, ev), "ns");
}

uint64_t tally_db_mean_period(const struct tally_db *db, int ev)
{
	char buf[32];
	const char *s = field(tally_meta_get(&db->session, "period-mean"), ev, buf, sizeof buf);
	if (!s)
		return 1;
	char *end;
	errno = 0;
	/* the reader checked it: decimal, at most 2^62 */
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v == 0)
		return 1;
	return (uint64_t)v;
}

/* w (allocated when NULL) = counts x period-mean, n rows. */
static uint64_t *synth(const struct tally_db *db, const uint64_t *counts, size_t n)
{
	size_t ne = (size_t)db->nevents;
	uint64_t *w = xcalloc(n * ne + 1, sizeof *w);
	for (int e = 0; e < db->nevents; e++) {
		uint64_t p = tally_db_mean_period(db, e);
		for (size_t i = 0; i < n; i++)
			w[i * ne + (size_t)e] = tally_mul_sat(counts[i * ne + (size_t)e], p);
	}
	return w;
}

static void swap(uint64_t **a, size_t *aa, uint64_t **b, size_t *ab)
{
	uint64_t *t = *a;
	*a = *b;
	*b = t;
	size_t s = *aa;
	*aa = *ab;
	*ab = s;
}

static void weigh_stacks(struct tally_db *db)
{
	if (!db->stack_weights) {
		db->stack_weights = synth(db, db->stack_counts, db->nstacks);
		db->astack_weights = db->nstacks * (size_t)db->nevents + 1;
	}
	swap(&db->stack_counts, &db->astack_counts, &db->stack_weights, &db->astack_weights);
}

void tally_db_weigh(struct tally_db *db)
{
	if (db->weighed)
		return;
	if (!db->weights) {
		db->weights = synth(db, db->counts, db->nentries);
		db->aweights = db->nentries * (size_t)db->nevents + 1;
	}
	swap(&db->counts, &db->acounts, &db->weights, &db->aweights);
	weigh_stacks(db);
	db->weighed = true;
}

void tally_db_weigh_loaded_stacks(struct tally_db *db)
{
	if (db->weighed)
		weigh_stacks(db);
	tally_db_wall_loaded_stacks(db);
}

void tally_db_unweigh_stacks(struct tally_db *db)
{
	if (db->weighed)
		swap(&db->stack_counts, &db->astack_counts, &db->stack_weights,
		     &db->astack_weights);
}

uint64_t tally_db_weight_total(const struct tally_db *db, int ev)
{
	if (ev < 0 || ev >= db->nevents)
		return 0;
	const uint64_t *w = db->weighed ? db->counts : db->weights;
	size_t ne = (size_t)db->nevents;
	uint64_t t = 0, p = w ? 1 : tally_db_mean_period(db, ev);
	const uint64_t *v = w ? w : db->counts;
	for (size_t i = 0; i < db->nentries; i++) {
		uint64_t x = tally_mul_sat(v[i * ne + (size_t)ev], p);
		t = t + x < t ? UINT64_MAX : t + x;
	}
	return t;
}
