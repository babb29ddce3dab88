/* tally top's feed (top.h): one tick's database into the window. Each tick's
 * database numbers its images afresh, so images are known here by identity
 * (kind, id, path, pid) and each distinct (image, offset) is symbolized once:
 * through a cache of locations, then of the functions' offset ranges found so
 * far, and only then through a resolver over the tick's database (made when
 * something is new, so a steady workload opens no file after its first ticks). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally/epoch.h"
#include "tally/top.h"

struct range {
	uint64_t start, end;
	uint32_t name;
};

struct fimage {
	char *key;
	bool jit; /* JIT code moves: never cached */
	bool file; /* an executable or library: symbolized through the lasting resolver */
	struct tally_db_image copy; /* file: what the lasting resolvers' databases say of it */
	/* file: its resolver and its index there; sym UINT32_MAX while it has none */
	uint32_t gen, sym;
	struct range *r; /* sorted by start, disjoint */
	size_t nr, ar;
};

struct loc {
	uint32_t image;
	uint64_t offset;
	uint32_t name;
};

/* cumulative databases: what each (location or stack, pid) had last time */
struct prev {
	uint32_t first, len; /* into pframes */
	int32_t pid;
	uint64_t count;
	bool seen;
};

#define TOP_MAX_GENS 32

struct tally_top_feed {
	struct tally_resolver_opts ro;
	bool have_ro;
	/* the files' symbols last from tick to tick, so that an image's symbol
	 * table is read once, not every tick: the file images that a tick brings
	 * go into a database of their own with a resolver (a generation); past
	 * TOP_MAX_GENS generations they are made again as one. The kernel, JIT
	 * code and the vDSO go through each tick's own database (its kernel
	 * symbols are those the tick's samples need). A resolver keeps the
	 * address of its database: the generations never move (an array that
	 * grew by realloc left the older resolvers reading freed memory). */
	struct gen {
		struct tally_db db;
		struct tally_resolver *res;
	} gens[TOP_MAX_GENS];
	size_t ngens;
	struct fimage *im;
	size_t nim, aim;
	struct tally_hidx im_idx;
	struct loc *loc;
	size_t nloc, aloc;
	struct tally_hidx loc_idx;
	char **names;
	size_t nnames, anames;
	struct tally_hidx name_idx;

	double since;
	bool have_since;
	struct prev *prev;
	size_t nprev, aprev;
	struct tally_hidx prev_idx;
	uint32_t *pframes;
	size_t npframes, apframes;
};

static void gens_free(struct tally_top_feed *f);

struct tally_top_feed *tally_top_feed_new(const struct tally_resolver_opts *ro)
{
	struct tally_top_feed *f = xcalloc(1, sizeof(*f));
	if (ro) {
		f->ro = *ro;
		f->have_ro = true;
	}
	return f;
}

static void prev_reset(struct tally_top_feed *f)
{
	f->nprev = 0;
	f->npframes = 0;
	tally_hidx_release(&f->prev_idx);
}

void tally_top_feed_free(struct tally_top_feed *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nim; i++) {
		free(f->im[i].key);
		free(f->im[i].r);
		tally_db_image_release(&f->im[i].copy);
	}
	gens_free(f);
	free(f->im);
	tally_hidx_release(&f->im_idx);
	free(f->loc);
	tally_hidx_release(&f->loc_idx);
	for (size_t i = 0; i < f->nnames; i++)
		free(f->names[i]);
	free(f->names);
	tally_hidx_release(&f->name_idx);
	prev_reset(f);
	free(f->prev);
	free(f->pframes);
	free(f);
}

static char *dup0(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/* The name, path, identity and kind of an image (no copied files). */
static void db_image_copy(struct tally_db_image *to, const struct tally_db_image *from)
{
	memset(to, 0, sizeof(*to));
	to->name = dup0(from->name);
	to->path = dup0(from->path);
	to->id = dup0(from->id);
	to->id_kind = dup0(from->id_kind);
	to->kind = dup0(from->kind);
	to->pid = from->pid;
	to->foreign_ns = from->foreign_ns;
}

static void gens_free(struct tally_top_feed *f)
{
	for (size_t g = 0; g < f->ngens; g++) {
		tally_resolver_free(f->gens[g].res);
		tally_db_release(&f->gens[g].db);
	}
	f->ngens = 0;
	for (size_t i = 0; i < f->nim; i++)
		f->im[i].sym = UINT32_MAX;
}

/* A generation for the file images that have none (all of them again, as
 * one, when there are too many generations). */
static void gen_add(struct tally_top_feed *f, const struct tally_db *tick)
{
	if (f->ngens >= TOP_MAX_GENS)
		gens_free(f);
	struct gen *g = &f->gens[f->ngens];
	memset(g, 0, sizeof(*g));
	struct tally_db *d = &g->db;
	const char *rel = tally_meta_get(&tick->session, "kernel-release");
	if (rel)
		tally_meta_set(&d->session, "kernel-release", "%s", rel);
	d->path = xstrdup(tick->path ? tick->path : "tally top");
	size_t n = 0;
	for (size_t i = 0; i < f->nim; i++)
		n += f->im[i].file && f->im[i].sym == UINT32_MAX;
	d->images = xcalloc(n + 1, sizeof(*d->images));
	for (size_t i = 0; i < f->nim; i++) {
		if (!f->im[i].file || f->im[i].sym != UINT32_MAX)
			continue;
		f->im[i].gen = (uint32_t)f->ngens;
		f->im[i].sym = (uint32_t)d->nimages;
		db_image_copy(&d->images[d->nimages++], &f->im[i].copy);
	}
	if (tally_resolver_new(&g->res, d, f->have_ro ? &f->ro : NULL))
		g->res = NULL;
	f->ngens++;
}

static bool str_eq(const void *ctx, uint32_t i, const void *key)
{
	char *const *v = ctx;
	return !strcmp(v[i], key);
}

static bool im_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct fimage *v = ctx;
	return !strcmp(v[i].key, key);
}

static uint32_t name_id(struct tally_top_feed *f, const char *s)
{
	uint64_t h = tally_hash_bytes(s, strlen(s), 0x6e);
	uint32_t i = tally_hidx_get(&f->name_idx, h, s, str_eq, f->names);
	if (i != TALLY_HIDX_NONE)
		return i;
	GROW(f->names, f->anames, f->nnames + 1);
	f->names[f->nnames] = xstrdup(s);
	tally_hidx_put(&f->name_idx, h, (uint32_t)f->nnames);
	return (uint32_t)f->nnames++;
}

static uint32_t image_id(struct tally_top_feed *f, const struct tally_db_image *di)
{
	struct strbuf k = STRBUF_INIT;
	strbuf_addf(&k, "%s\t%s:%s\t%s\t%d", di->kind ? di->kind : "",
		    di->id_kind ? di->id_kind : "", di->id ? di->id : "", di->path ? di->path : "",
		    di->pid);
	uint64_t h = tally_hash_bytes(k.buf, k.len, 0x1a);
	uint32_t i = tally_hidx_get(&f->im_idx, h, k.buf, im_eq, f->im);
	if (i != TALLY_HIDX_NONE) {
		strbuf_release(&k);
		return i;
	}
	GROW(f->im, f->aim, f->nim + 1);
	struct fimage *im = &f->im[f->nim];
	*im = (struct fimage){ .key = strbuf_detach(&k), .jit = di->kind && !strcmp(di->kind, "jit"), .sym = UINT32_MAX };
	im->file = di->kind && (!strcmp(di->kind, "exec") || !strcmp(di->kind, "lib"));
	if (im->file)
		db_image_copy(&im->copy, di);
	tally_hidx_put(&f->im_idx, h, (uint32_t)f->nim);
	return (uint32_t)f->nim++;
}

static bool loc_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct loc *v = ctx, *k = key;
	return v[i].image == k->image && v[i].offset == k->offset;
}

static bool range_before(const void *ctx, size_t i)
{
	const uint64_t *c = ctx; /* [0]: the array, [1]: the offset */
	const struct range *r = (const struct range *)(uintptr_t)c[0];
	return r[i].start <= c[1];
}

static const struct range *range_find(const struct fimage *im, uint64_t off)
{
	uint64_t c[2] = { (uint64_t)(uintptr_t)im->r, off };
	size_t k = tally_partition(im->nr, range_before, c);
	if (k && off < im->r[k - 1].end)
		return &im->r[k - 1];
	return NULL;
}

static void range_add(struct fimage *im, uint64_t start, uint64_t end, uint32_t name)
{
	uint64_t c[2] = { (uint64_t)(uintptr_t)im->r, start };
	size_t k = tally_partition(im->nr, range_before, c);
	/* only where it overlaps nothing (aliases and odd symbol tables: the
	 * location cache still has the answer) */
	if ((k && im->r[k - 1].end > start) || (k < im->nr && im->r[k].start < end))
		return;
	GROW(im->r, im->ar, im->nr + 1);
	memmove(&im->r[k + 1], &im->r[k], (im->nr - k) * sizeof(*im->r));
	im->r[k] = (struct range){ start, end, name };
	im->nr++;
}

/* A tick's state: its database, its images' ids, its resolver when needed. */
struct tick {
	struct tally_top_feed *f;
	const struct tally_db *db;
	uint32_t *sid;
	struct tally_resolver *res;
	int err;
};

/* The name (a feed name id) of what is at (db image, offset). */
static uint32_t locate(struct tick *k, uint32_t dbimage, uint64_t off)
{
	struct tally_top_feed *f = k->f;
	if (dbimage >= k->db->nimages)
		return name_id(f, "[unknown]");
	uint32_t sid = k->sid[dbimage];
	struct fimage *im = &f->im[sid];
	struct loc key = { sid, off, 0 };
	uint64_t h = tally_hash_u64(off ^ ((uint64_t)sid << 48) ^ sid);
	if (!im->jit) {
		uint32_t i = tally_hidx_get(&f->loc_idx, h, &key, loc_eq, f->loc);
		if (i != TALLY_HIDX_NONE)
			return f->loc[i].name;
		const struct range *r = range_find(im, off);
		if (r) {
			key.name = r->name;
			goto remember;
		}
	}
	struct tally_resolver *res;
	uint32_t ri;
	if (im->file && im->sym != UINT32_MAX && f->gens[im->gen].res) {
		res = f->gens[im->gen].res;
		ri = im->sym;
	} else {
		if (!k->res && !k->err) {
			int r = tally_resolver_new(&k->res, k->db, f->have_ro ? &f->ro : NULL);
			if (r)
				k->err = r;
		}
		res = k->res;
		ri = dbimage;
	}
	const struct tally_sym *s = res ? tally_resolve(res, ri, off) : NULL;
	key.name = name_id(f, s && s->name ? s->name : "[unknown]");
	uint64_t a;
	if (s && s->size && !im->jit && tally_resolver_addr(res, ri, off, &a) == 0 &&
	    a >= s->addr && a - s->addr < s->size && off >= a - s->addr)
		range_add(im, off - (a - s->addr), off - (a - s->addr) + s->size, key.name);
	if (im->jit)
		return key.name;
remember:
	GROW(f->loc, f->aloc, f->nloc + 1);
	f->loc[f->nloc] = key;
	tally_hidx_put(&f->loc_idx, h, (uint32_t)f->nloc++);
	return key.name;
}

static bool prev_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct tally_top_feed *f = ctx;
	const struct prev *k = key;
	const struct prev *p = &f->prev[i];
	if (p->pid != k->pid || p->len != k->len)
		return false;
	const uint32_t *kf = (const uint32_t *)(uintptr_t)k->count; /* the key's frames */
	return !memcmp(&f->pframes[p->first], kf, k->len * sizeof(uint32_t));
}

/* For a cumulative database: how much of count is new since the last tick. */
static uint64_t grown(struct tally_top_feed *f, int32_t pid, const uint32_t *ids, uint32_t len,
		      uint64_t count)
{
	uint64_t h = tally_hash_bytes(ids, len * sizeof(uint32_t), (uint64_t)(uint32_t)pid);
	struct prev key = { .pid = pid, .len = len, .count = (uint64_t)(uintptr_t)ids };
	uint32_t i = tally_hidx_get(&f->prev_idx, h, &key, prev_eq, f);
	if (i == TALLY_HIDX_NONE) {
		GROW(f->pframes, f->apframes, f->npframes + len);
		memcpy(&f->pframes[f->npframes], ids, len * sizeof(uint32_t));
		GROW(f->prev, f->aprev, f->nprev + 1);
		f->prev[f->nprev] = (struct prev){ (uint32_t)f->npframes, len, pid, count, true };
		f->npframes += len;
		tally_hidx_put(&f->prev_idx, h, (uint32_t)f->nprev++);
		return count;
	}
	struct prev *p = &f->prev[i];
	/* less than before: the daemon started again from nothing in between */
	uint64_t d = count >= p->count ? count - p->count : count;
	p->count = count;
	return d;
}

/* pid to command, for the tick's database */
struct comms {
	struct tally_hidx idx;
	const struct tally_db *db;
};

static bool task_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct tally_db *db = ctx;
	return db->tasks[i].pid == *(const int *)key;
}

static const char *comm_of(struct comms *c, int pid)
{
	uint32_t i = tally_hidx_get(&c->idx, tally_hash_u64((uint64_t)(uint32_t)pid), &pid, task_eq,
				    c->db);
	return i == TALLY_HIDX_NONE ? NULL : c->db->tasks[i].comm;
}

int tally_top_feed_db(struct tally_top_feed *f, struct tally_top *t, const struct tally_db *db,
		      bool cumulative, double since, double *added)
{
	double sum = 0;
	if (cumulative && (!f->have_since || since != f->since)) {
		prev_reset(f);
		f->since = since;
		f->have_since = true;
	}
	struct tick k = { .f = f, .db = db };
	k.sid = xcalloc(db->nimages + 1, sizeof(uint32_t));
	bool new_files = false;
	for (size_t i = 0; i < db->nimages; i++) {
		k.sid[i] = image_id(f, &db->images[i]);
		new_files |= f->im[k.sid[i]].file && f->im[k.sid[i]].sym == UINT32_MAX;
	}
	if (new_files)
		gen_add(f, db);
	struct comms cm = { .db = db };
	/* a pid listed twice (reused): the last one wins, as in tally_db_comm */
	for (size_t i = db->ntasks; i-- > 0;) {
		int pid = db->tasks[i].pid;
		uint64_t h = tally_hash_u64((uint64_t)(uint32_t)pid);
		if (tally_hidx_get(&cm.idx, h, &pid, task_eq, db) == TALLY_HIDX_NONE)
			tally_hidx_put(&cm.idx, h, (uint32_t)i);
	}
	bool stacks = tally_top_callgraph(t) && db->has_stacks && db->nstacks;
	int ne = db->nevents > 0 ? db->nevents : 1;
	struct tally_top_frame *fr = NULL;
	size_t afr = 0;
	uint32_t *ids = NULL;
	size_t aids = 0;
	if (stacks) {
		for (size_t s = 0; s < db->nstacks; s++) {
			const struct tally_db_stack *st = &db->stacks[s];
			uint64_t c = db->stack_counts[s * (size_t)ne];
			if (!c || !st->len)
				continue;
			GROW(fr, afr, st->len);
			GROW(ids, aids, st->len);
			for (uint32_t j = 0; j < st->len; j++) {
				const struct tally_frame *x = tally_db_frame(db, st, j);
				/* callers' frames are return addresses: the call is before */
				uint64_t off = j && x->offset ? x->offset - 1 : x->offset;
				ids[j] = locate(&k, x->image, off);
				fr[j].func = f->names[ids[j]];
				fr[j].image =
					x->image < db->nimages ? db->images[x->image].name : "?";
			}
			if (cumulative) {
				/* the stack's identity: its images and names */
				uint32_t *key = NULL;
				size_t akey = 0;
				GROW(key, akey, 2 * (size_t)st->len + 2);
				for (uint32_t j = 0; j < st->len; j++) {
					const struct tally_frame *x = tally_db_frame(db, st, j);
					key[2 * j] = x->image < db->nimages ? k.sid[x->image]
									    : UINT32_MAX;
					key[2 * j + 1] = ids[j];
				}
				/* and its command name: two programs' equal stacks are two */
				const char *lc = tally_db_label(db, st->label, "comm");
				uint64_t ch = lc ? tally_hash_bytes(lc, strlen(lc), 0x636f6d6d) : 0;
				key[2 * st->len] = (uint32_t)(ch >> 32);
				key[2 * st->len + 1] = (uint32_t)ch;
				c = grown(f, st->pid, key, 2 * st->len + 2, c);
				free(key);
			}
			if (!c)
				continue;
			const char *lcomm = tally_db_label(db, st->label, "comm");
			tally_top_add(t, lcomm ? lcomm : comm_of(&cm, st->pid), fr, st->len,
				      (double)c);
			sum += (double)c;
		}
	} else {
		for (size_t p = 0; p < db->nprofs; p++) {
			const struct tally_db_prof *pf = &db->profs[p];
			/* the command name the recording kept (comm=NAME), else the task list's */
			const char *lc = tally_db_label(db, pf->label, "comm");
			const char *comm = lc ? lc : comm_of(&cm, pf->pid);
			uint64_t ch = lc ? tally_hash_bytes(lc, strlen(lc), 0x636f6d6d) : 0;
			for (size_t i = pf->first; i < pf->end; i++) {
				const struct tally_db_entry *e = &db->entries[i];
				uint64_t c = db->counts[i * (size_t)ne];
				if (!c)
					continue;
				uint32_t id = locate(&k, e->image, e->offset);
				if (cumulative) {
					/* one row per (image, offset, pid, command name): two
					 * programs at one place are two rows to follow */
					uint32_t key[5] = { e->image < db->nimages ? k.sid[e->image]
										   : UINT32_MAX,
							    (uint32_t)(e->offset >> 32),
							    (uint32_t)e->offset,
							    (uint32_t)(ch >> 32), (uint32_t)ch };
					c = grown(f, e->pid, key, 5, c);
					if (!c)
						continue;
				}
				struct tally_top_frame one = { e->image < db->nimages
								       ? db->images[e->image].name
								       : "?",
							       f->names[id] };
				tally_top_add(t, comm, &one, 1, (double)c);
				sum += (double)c;
			}
		}
	}
	free(fr);
	free(ids);
	tally_hidx_release(&cm.idx);
	tally_resolver_free(k.res);
	free(k.sid);
	if (added)
		*added = sum;
	return k.err;
}

/* ---- a daemon's reply ---- */

struct bfile {
	const char *name, *data;
	size_t len;
};
struct bfiles {
	struct bfile *v;
	size_t n, a;
};

static int take_file(void *ctx, const char *name, const char *data, size_t len)
{
	struct bfiles *b = ctx;
	GROW(b->v, b->a, b->n + 1);
	/* name belongs to the parser only during the call: data points into the bundle */
	b->v[b->n++] = (struct bfile){ xstrdup(name), data, len };
	return 0;
}

static const struct bfile *bundle_file(const struct bfiles *b, const char *name)
{
	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->v[i].name, name))
			return &b->v[i];
	return NULL;
}

static int cmp_bfile(const void *x, const void *y)
{
	return strcmp(((const struct bfile *)x)->name, ((const struct bfile *)y)->name);
}

int tally_top_db_from_bundle(struct tally_db *db, const char *buf, size_t len, const char *what)
{
	memset(db, 0, sizeof(*db));
	struct bfiles b = { 0 };
	int r = tally_bundle_parse(buf, len, what, take_file, &b);
	if (r == -ENOTDIR)
		r = tally_seterr(-EPROTO, "%s is not a profile (is the socket a tally daemon's?)",
				 what);
	if (r)
		goto out;
	tally_qsort(b.v, b.n, sizeof(*b.v), cmp_bfile);
	db->path = xstrdup(what);
	const struct bfile *f = bundle_file(&b, "session");
	if (!f) {
		r = tally_seterr(-EINVAL,
				 "'%s' has no session file (is it a tally daemon's reply?)", what);
		goto out;
	}
	if ((r = tally_db_parse_session(db, f->data, f->len, "session")))
		goto out;
	if ((f = bundle_file(&b, "images")) &&
	    (r = tally_db_parse_images(db, f->data, f->len, "images")))
		goto out;
	/* the command names (comm=NAME) the profiles name by label set */
	if ((f = bundle_file(&b, "labels")) &&
	    (r = tally_db_parse_labels(db, f->data, f->len, "labels")))
		goto out;
	for (size_t i = 0; i < b.n; i++) {
		size_t l = strlen(b.v[i].name);
		if (l > 5 && !strcmp(b.v[i].name + l - 5, ".prof") && !strchr(b.v[i].name, '/') &&
		    (r = tally_db_parse_prof(db, b.v[i].data, b.v[i].len, b.v[i].name)))
			goto out;
	}
	if ((f = bundle_file(&b, "stacks")) &&
	    (r = tally_db_parse_stacks(db, f->data, f->len, "stacks")))
		goto out;
	if ((f = bundle_file(&b, "kernel.syms")) &&
	    (r = tally_db_parse_ksyms(db, f->data, f->len, "kernel.syms")))
		goto out;
	if ((f = bundle_file(&b, "tasks")) &&
	    (r = tally_db_parse_tasks(db, f->data, f->len, "tasks")))
		goto out;
	if ((f = bundle_file(&b, "modules"))) {
		if ((r = tally_db_parse_modules(db, f->data, f->len, "modules")))
			goto out;
		db->modules = xstrndup(f->data, f->len);
	}
	if ((f = bundle_file(&b, "mntns")) &&
	    (r = tally_db_parse_mntns(db, f->data, f->len, "mntns")))
		goto out;
	r = tally_db_check_totals(db, what);
out:
	for (size_t i = 0; i < b.n; i++)
		free((char *)b.v[i].name);
	free(b.v);
	if (r)
		tally_db_release(db);
	return r;
}
