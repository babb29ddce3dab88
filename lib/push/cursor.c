/* The daemon's push backlog (docs/push.md): the epochs on disk are what was
 * recorded, the cursor DIR/push.cursor what was sent of each, so that what a
 * flush added (or what an outage held back, or what a killed daemon had not
 * sent) is an epoch less its cursor, whenever it is looked at.
 *
 * Per epoch the cursor keeps the counts and weights pushed so far of each
 * of its stacks and of each place of its flat profile, under a 64-bit hash
 * of what the stack (place) is: its process, its label set, and each
 * frame's image (by build-id or content hash, kind and path) and offset, so
 * that the numbering of an epoch's images and stacks, which each merge may
 * change, does not matter. An epoch that is complete (a newer one began)
 * and sent whole keeps only its totals. The file is text:
 *
 *   tally push cursor 1
 *   target: FORMAT URL
 *   dropped: N
 *   rejected: N
 *   epoch NAME pushed P recorded R until T [done]
 *   events EV,EV...
 *   s|e HASH COUNT WEIGHT [COUNT WEIGHT ...]
 *
 * written whole and atomically after every push the server took: a push
 * whose answer came but whose cursor was not written (kill -9 between) is
 * sent again, once. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tally/epoch.h"
#include "tally/push.h"

#define CURSOR_NAME "push.cursor"
#define CURSOR_MAGIC "tally push cursor 1"

/* pushed counts per key: v holds per key, per event, count then weight */
struct ctab {
	uint64_t *h;
	uint64_t *v;
	size_t n, ah, av;
	int nev;
	struct tally_hidx idx;
};

struct cep {
	char *name;
	bool done;
	uint64_t pushed, recorded;
	double until; /* what the last push covered up to (0: nothing pushed) */
	char **events;
	int nev;
	struct ctab t;
};

struct tally_push_cursor {
	char *dir, *path, *target;
	struct cep *ep;
	size_t n, alloc;
	uint64_t dropped, rejected;
	/* the delta the last next made, for done */
	char *pend;
	struct ctab pend_t;
	char **pend_events;
	int pend_nev;
	uint64_t pend_delta, pend_recorded;
	double pend_until;
};

static bool key_eq(const void *ctx, uint32_t i, const void *key)
{
	return ((const struct ctab *)ctx)->h[i] == *(const uint64_t *)key;
}

static void ctab_release(struct ctab *t)
{
	free(t->h);
	free(t->v);
	tally_hidx_release(&t->idx);
	memset(t, 0, sizeof(*t));
}

/* The row of hash h, added (zeros) when new; equal keys of one epoch (a
 * 64-bit collision, or the same stack twice) share it. */
static uint64_t *ctab_row(struct ctab *t, uint64_t h)
{
	uint32_t i = tally_hidx_get(&t->idx, h, &h, key_eq, t);
	size_t w = (size_t)t->nev * 2;
	if (i == TALLY_HIDX_NONE) {
		GROW(t->h, t->ah, t->n + 1);
		GROW(t->v, t->av, (t->n + 1) * w);
		t->h[t->n] = h;
		memset(&t->v[t->n * w], 0, w * sizeof(uint64_t));
		i = (uint32_t)t->n++;
		tally_hidx_put(&t->idx, h, i);
	}
	return &t->v[(size_t)i * w];
}

static const uint64_t *ctab_find(const struct ctab *t, uint64_t h)
{
	uint32_t i = tally_hidx_get(&t->idx, h, &h, key_eq, t);
	return i == TALLY_HIDX_NONE ? NULL : &t->v[(size_t)i * (size_t)t->nev * 2];
}

static void free_names(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void cep_release(struct cep *e)
{
	free(e->name);
	free_names(e->events, e->nev);
	ctab_release(&e->t);
}

static void pend_release(struct tally_push_cursor *c)
{
	free(c->pend);
	c->pend = NULL;
	ctab_release(&c->pend_t);
	free_names(c->pend_events, c->pend_nev);
	c->pend_events = NULL;
	c->pend_nev = 0;
}

void tally_push_cursor_free(struct tally_push_cursor *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		cep_release(&c->ep[i]);
	free(c->ep);
	pend_release(c);
	free(c->dir);
	free(c->path);
	free(c->target);
	free(c);
}

static struct cep *find_ep(struct tally_push_cursor *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->ep[i].name, name))
			return &c->ep[i];
	return NULL;
}

static struct cep *add_ep(struct tally_push_cursor *c, const char *name)
{
	GROW(c->ep, c->alloc, c->n + 1);
	struct cep *e = &c->ep[c->n++];
	memset(e, 0, sizeof(*e));
	e->name = xstrdup(name);
	return e;
}

static char **split_events(const char *s, int *n)
{
	char **v = NULL;
	size_t k = 0, a = 0;
	char *dup = xstrdup(s), *save = NULL;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
		STRLIST_PUSH(v, k, a, xstrdup(t));
	free(dup);
	*n = (int)k;
	return v;
}

/* ---- the file ---- */

int tally_push_cursor_save(struct tally_push_cursor *c)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s\ntarget: %s\ndropped: %" PRIu64 "\nrejected: %" PRIu64 "\n",
		    CURSOR_MAGIC, c->target, c->dropped, c->rejected);
	for (size_t i = 0; i < c->n; i++) {
		const struct cep *e = &c->ep[i];
		strbuf_addf(&sb, "epoch %s pushed %" PRIu64 " recorded %" PRIu64 " until %.3f%s\n",
			    e->name, e->pushed, e->recorded, e->until, e->done ? " done" : "");
		if (e->done || !e->nev)
			continue;
		strbuf_addstr(&sb, "events ");
		for (int k = 0; k < e->nev; k++)
			strbuf_addf(&sb, "%s%s", k ? "," : "", e->events[k]);
		strbuf_addch(&sb, '\n');
		size_t w = (size_t)e->t.nev * 2;
		for (size_t k = 0; k < e->t.n; k++) {
			strbuf_addf(&sb, "k %016" PRIx64, e->t.h[k]);
			for (size_t j = 0; j < w; j++)
				strbuf_addf(&sb, " %" PRIu64, e->t.v[k * w + j]);
			strbuf_addch(&sb, '\n');
		}
	}
	int r = tally_write_file_atomic(c->path, sb.buf, sb.len);
	strbuf_release(&sb);
	return r;
}

/* Reads the file: 0, or -EINVAL when it is damaged or another target's
 * (the caller starts afresh). */
static int load(struct tally_push_cursor *c)
{
	struct strbuf sb = STRBUF_INIT;
	int r = tally_read_regular(&sb, AT_FDCWD, c->path, 0, (uint64_t)1 << 32);
	if (r) {
		strbuf_release(&sb);
		return r;
	}
	struct tally_lines L;
	tally_lines_init(&L, sb.buf, c->path);
	char *l = tally_lines_next(&L);
	r = l && !strcmp(l, CURSOR_MAGIC) ? 0 : -EINVAL;
	struct cep *e = NULL;
	while (!r && (l = tally_lines_next(&L))) {
		char name[64], done[8] = "";
		uint64_t a, b;
		double until;
		if (!strncmp(l, "target: ", 8)) {
			if (strcmp(l + 8, c->target))
				r = -ESTALE;
		} else if (sscanf(l, "dropped: %" SCNu64, &a) == 1) {
			c->dropped = a;
		} else if (sscanf(l, "rejected: %" SCNu64, &a) == 1) {
			c->rejected = a;
		} else if (sscanf(l,
				  "epoch %63s pushed %" SCNu64 " recorded %" SCNu64
				  " until %lf %7s",
				  name, &a, &b, &until, done) >= 4 &&
			   tally_epoch_name_ok(name) && !find_ep(c, name)) {
			e = add_ep(c, name);
			e->pushed = a;
			e->recorded = b;
			e->until = until;
			e->done = !strcmp(done, "done");
		} else if (e && !e->done && !e->nev && !strncmp(l, "events ", 7)) {
			e->events = split_events(l + 7, &e->nev);
			e->t.nev = e->nev;
			r = e->nev > 0 && e->nev <= 64 ? 0 : -EINVAL;
		} else if (e && e->nev && l[0] == 'k' && l[1] == ' ') {
			char *p = l + 2, *end;
			uint64_t h = strtoull(p, &end, 16);
			if (end == p) {
				r = -EINVAL;
				break;
			}
			uint64_t *row = ctab_row(&e->t, h);
			for (int j = 0; j < e->nev * 2 && !r; j++) {
				p = end;
				uint64_t v = strtoull(p, &end, 10);
				if (end == p)
					r = -EINVAL;
				row[j] = tally_add_sat(row[j], v);
			}
			if (*end)
				r = -EINVAL;
		} else {
			r = -EINVAL;
		}
	}
	strbuf_release(&sb);
	return r;
}

/* The sample totals of the epoch at path: its session's 'samples' (every event). */
static uint64_t session_samples(const char *path, bool *ok)
{
	struct strbuf p = STRBUF_INIT, sb = STRBUF_INIT;
	strbuf_addf(&p, "%s/session", path);
	uint64_t n = 0;
	*ok = false;
	if (tally_read_regular(&sb, AT_FDCWD, p.buf, 0, 1 << 20) == 0) {
		for (char *l = sb.buf; l && *l;) {
			char *nl = strchr(l, '\n');
			if (!strncmp(l, "samples: ", 9)) {
				*ok = true;
				for (char *q = l + 9; q && *q && *q != '\n';) {
					char *end;
					n = tally_add_sat(n, strtoull(q, &end, 10));
					q = end == q ? NULL : (*end == ',' ? end + 1 : end);
				}
				break;
			}
			l = nl ? nl + 1 : NULL;
		}
	}
	strbuf_release(&p);
	strbuf_release(&sb);
	return n;
}

/* Leftovers of a write cut short: the atomic write's temporaries. */
static void remove_temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, CURSOR_NAME ".tmp-", strlen(CURSOR_NAME ".tmp-")))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

int tally_push_cursor_open(struct tally_push_cursor **out, const char *dir, const char *target,
			   bool *fresh)
{
	struct tally_push_cursor *c = xcalloc(1, sizeof(*c));
	c->dir = xstrdup(dir);
	c->target = xstrdup(target);
	struct strbuf p = STRBUF_INIT;
	strbuf_addf(&p, "%s/%s", dir, CURSOR_NAME);
	c->path = strbuf_detach(&p);
	remove_temporaries(dir);
	int r = load(c);
	if (fresh)
		*fresh = r != 0;
	if (r) {
		/* afresh: what the epochs hold now counts as pushed */
		for (size_t i = 0; i < c->n; i++)
			cep_release(&c->ep[i]);
		c->n = 0;
		c->dropped = c->rejected = 0;
		struct tally_epoch *ep;
		size_t n;
		r = tally_epochs_list(dir, &ep, &n);
		if (r) {
			tally_push_cursor_free(c);
			return r;
		}
		for (size_t i = 0; i < n; i++) {
			struct cep *e = add_ep(c, ep[i].name);
			bool ok;
			e->recorded = e->pushed = session_samples(ep[i].path, &ok);
			e->until = ep[i].stop;
			e->done = i + 1 < n;
		}
		tally_epochs_free(ep, n);
		if (c->n) {
			/* the newest may grow: its counts now, to tell what comes after
			 * (a delta over nothing, taken as pushed) */
			struct cep *e = &c->ep[c->n - 1];
			e->pushed = 0;
			struct tally_db db;
			const char *name;
			double from, until;
			r = tally_push_cursor_next(c, &db, &name, &from, &until);
			if (r == 1) {
				tally_db_release(&db);
				tally_push_cursor_done(c, false);
			}
			if (r < 0) {
				tally_push_cursor_free(c);
				return r;
			}
		}
		r = tally_push_cursor_save(c);
		if (r) {
			tally_push_cursor_free(c);
			return r;
		}
	}
	*out = c;
	return 0;
}

/* ---- the epochs ---- */

int tally_push_cursor_scan(struct tally_push_cursor *c, struct tally_push_backlog *bl)
{
	memset(bl, 0, sizeof(*bl));
	struct tally_epoch *ep;
	size_t n;
	int r = tally_epochs_list(c->dir, &ep, &n);
	if (r)
		return r;
	struct strbuf gone = STRBUF_INIT;
	/* the cursor's epochs in the order of those on disk (oldest first), new
	 * ones all to push; those gone forgotten, what was not pushed of them dropped */
	struct cep *now = xcalloc(n + 1, sizeof(*now));
	bool *kept = xcalloc(c->n + 1, sizeof(bool));
	for (size_t k = 0; k < n; k++) {
		struct cep *e = find_ep(c, ep[k].name);
		if (e) {
			kept[e - c->ep] = true;
			now[k] = *e;
		} else {
			now[k].name = xstrdup(ep[k].name);
		}
	}
	for (size_t i = 0; i < c->n; i++) {
		if (kept[i])
			continue;
		struct cep *e = &c->ep[i];
		if (!e->done && e->recorded > e->pushed) {
			bl->dropped_now += e->recorded - e->pushed;
			strbuf_addf(&gone, "%s%s", gone.len ? ", " : "", e->name);
		}
		cep_release(e);
	}
	free(kept);
	free(c->ep);
	c->ep = now;
	c->n = n;
	c->alloc = n + 1;
	c->dropped = tally_add_sat(c->dropped, bl->dropped_now);
	for (size_t k = 0; k < n; k++) {
		struct cep *e = &c->ep[k];
		if (e->done)
			continue;
		bool ok;
		uint64_t rec = session_samples(ep[k].path, &ok);
		if (ok)
			e->recorded = rec;
		if (e->recorded > e->pushed) {
			bl->samples += e->recorded - e->pushed;
			bl->epochs++;
		}
	}
	tally_epochs_free(ep, n);
	bl->dropped = c->dropped;
	bl->rejected = c->rejected;
	bl->dropped_epochs = gone.len ? strbuf_detach(&gone) : NULL;
	strbuf_release(&gone);
	return 0;
}

/* What a stack or a place is, whatever its numbers in this copy of the epoch. */
static uint64_t image_key(const struct tally_db_image *im)
{
	bool lib = !strcmp(im->kind, "lib") || !strcmp(im->kind, "exec");
	uint64_t h = tally_hash_bytes(im->id, strlen(im->id), lib ? 1 : 2);
	h = tally_hash_bytes(lib ? "file" : im->kind, strlen(lib ? "file" : im->kind), h);
	h = tally_hash_bytes(im->path, strlen(im->path), h);
	return tally_hash_bytes(&im->pid, sizeof(im->pid), h);
}

static uint64_t stack_key(const struct tally_db *db, const uint64_t *ik, const uint64_t *lk,
			  size_t k)
{
	const struct tally_db_stack *st = &db->stacks[k];
	uint64_t h = tally_hash_u64(0x5374616b ^ (uint64_t)(uint32_t)st->pid);
	h = tally_hash_u64(h ^ lk[st->label <= db->nlabels ? st->label : 0]);
	for (uint32_t f = 0; f < st->len; f++) {
		const struct tally_frame *fr = tally_db_frame(db, st, f);
		h = tally_hash_u64(h ^ ik[fr->image] ^ tally_hash_u64(fr->offset + f));
	}
	return h;
}

static uint64_t entry_key(const struct tally_db *db, const uint64_t *ik, const uint64_t *lk,
			  size_t k, uint32_t label)
{
	const struct tally_db_entry *en = &db->entries[k];
	uint64_t h = tally_hash_u64(0x456e7472 ^ (uint64_t)(uint32_t)en->pid);
	h = tally_hash_u64(h ^ lk[label <= db->nlabels ? label : 0]);
	return tally_hash_u64(h ^ ik[en->image] ^ tally_hash_u64(en->offset));
}

/* Takes out of counts (and weights, may be NULL) what row (the pushed, in
 * the cursor's event order through map) says was sent; adds the full counts
 * to the new table's row. The samples left, summed over events. */
static uint64_t subtract(uint64_t *counts, uint64_t *weights, int ne, const uint64_t *pushed,
			 const int *map, uint64_t *newrow)
{
	uint64_t left = 0;
	for (int e = 0; e < ne; e++) {
		uint64_t c = counts[e], w = weights ? weights[e] : 0;
		newrow[2 * e] = tally_add_sat(newrow[2 * e], c);
		newrow[2 * e + 1] = tally_add_sat(newrow[2 * e + 1], w);
		if (pushed && map[e] >= 0) {
			uint64_t pc = pushed[2 * map[e]], pw = pushed[2 * map[e] + 1];
			c -= pc < c ? pc : c;
			w -= pw < w ? pw : w;
		}
		counts[e] = c;
		if (weights)
			weights[e] = c ? w : 0;
		left += c;
	}
	return left;
}

int tally_push_cursor_next(struct tally_push_cursor *c, struct tally_db *db, const char **epoch,
			   double *from, double *until)
{
	pend_release(c);
	for (size_t i = 0; i < c->n; i++) {
		struct cep *e = &c->ep[i];
		if (e->done)
			continue;
		bool newest = i + 1 == c->n;
		struct strbuf path = STRBUF_INIT;
		strbuf_addf(&path, "%s/%s", c->dir, e->name);
		int r = tally_epoch_read(db, path.buf);
		strbuf_release(&path);
		if (r == -ENOENT)
			continue; /* deleted meanwhile: the next scan counts it */
		if (r)
			return r;
		int ne = db->nevents;
		/* the cursor's events, by name */
		int *map = xcalloc((size_t)ne + 1, sizeof(int));
		for (int k = 0; k < ne; k++) {
			map[k] = -1;
			for (int j = 0; j < e->nev; j++)
				if (!strcmp(db->events[k], e->events[j]))
					map[k] = j;
		}
		uint64_t *ik = xcalloc(db->nimages + 1, sizeof(uint64_t));
		for (size_t k = 0; k < db->nimages; k++)
			ik[k] = image_key(&db->images[k]);
		uint64_t *lk = xcalloc(db->nlabels + 1, sizeof(uint64_t));
		for (size_t k = 0; k < db->nlabels; k++)
			lk[k + 1] = tally_labelset_hash(&db->labels[k]);
		struct ctab nt = { .nev = ne };
		size_t dne = (size_t)ne;
		uint64_t delta = 0, recorded = 0;
		const struct ctab *old = e->nev ? &e->t : NULL;
		for (size_t k = 0; k < db->nstacks; k++) {
			uint64_t h = stack_key(db, ik, lk, k) ^ 1;
			const uint64_t *pushed = old ? ctab_find(old, h) : NULL;
			subtract(&db->stack_counts[k * dne],
				 db->stack_weights ? &db->stack_weights[k * dne] : NULL, ne, pushed,
				 map, ctab_row(&nt, h));
		}
		/* the flat profile: the sample totals and the delta's */
		uint64_t *samples = xcalloc(dne + 1, sizeof(uint64_t));
		for (size_t q = 0; q < db->nprofs; q++) {
			const struct tally_db_prof *pf = &db->profs[q];
			for (size_t k = pf->first; k < pf->end && k < db->nentries; k++) {
				uint64_t h = entry_key(db, ik, lk, k, pf->label) ^ 2;
				const uint64_t *pushed = old ? ctab_find(old, h) : NULL;
				uint64_t *row = ctab_row(&nt, h);
				for (int ev = 0; ev < ne; ev++)
					recorded += db->counts[k * dne + (size_t)ev];
				delta += subtract(&db->counts[k * dne],
						  db->weights ? &db->weights[k * dne] : NULL, ne,
						  pushed, map, row);
				for (int ev = 0; ev < ne; ev++)
					samples[ev] += db->counts[k * dne + (size_t)ev];
			}
		}
		for (int ev = 0; ev < ne; ev++)
			db->samples[ev] = samples[ev];
		free(samples);
		free(ik);
		free(lk);
		free(map);
		double start = 0, stop = 0;
		if (!tally_db_utc_time(tally_meta_get(&db->session, "start-time"), &start))
			start = 0;
		if (!tally_db_utc_time(tally_meta_get(&db->session, "stop-time"), &stop))
			stop = start;
		e->recorded = recorded;
		if (!delta) {
			ctab_release(&nt);
			tally_db_release(db);
			if (!newest) {
				e->done = true;
				ctab_release(&e->t);
				free_names(e->events, e->nev);
				e->events = NULL;
				e->nev = 0;
				continue;
			}
			return 0;
		}
		c->pend = xstrdup(e->name);
		c->pend_t = nt;
		c->pend_events = xcalloc(dne + 1, sizeof(char *));
		for (int k = 0; k < ne; k++)
			c->pend_events[k] = xstrdup(db->events[k]);
		c->pend_nev = ne;
		c->pend_delta = delta;
		c->pend_recorded = recorded;
		c->pend_until = stop;
		*epoch = e->name;
		*from = e->until > start ? e->until : start;
		*until = stop > *from ? stop : *from;
		return 1;
	}
	return 0;
}

void tally_push_cursor_done(struct tally_push_cursor *c, bool rejected)
{
	struct cep *e = c->pend ? find_ep(c, c->pend) : NULL;
	if (!e) {
		pend_release(c);
		return;
	}
	ctab_release(&e->t);
	e->t = c->pend_t;
	memset(&c->pend_t, 0, sizeof(c->pend_t));
	free_names(e->events, e->nev);
	e->events = c->pend_events;
	e->nev = c->pend_nev;
	c->pend_events = NULL;
	c->pend_nev = 0;
	e->pushed = tally_add_sat(e->pushed, c->pend_delta);
	e->recorded = c->pend_recorded;
	if (e->pushed > e->recorded)
		e->pushed = e->recorded;
	e->until = c->pend_until;
	if (rejected)
		c->rejected = tally_add_sat(c->rejected, c->pend_delta);
	pend_release(c);
}
