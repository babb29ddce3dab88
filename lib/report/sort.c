/* report --sort: one table grouped by the keys asked (include/tally/sort.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tally/json.h"
#include "tally/select.h"
#include "tally/sort.h"
#include "tally/view.h"

static const char *const key_names[] = { "comm", "pid", "image", "function", "line" };

int tally_sort_parse(struct tally_sort *s, const char *spec)
{
	memset(s, 0, sizeof(*s));
	const char *p = spec;
	for (;;) {
		size_t n = strcspn(p, ",");
		int k = -1;
		for (int i = 0; i < TALLY_SORT_MAX && k < 0; i++)
			if (strlen(key_names[i]) == n && !strncmp(p, key_names[i], n))
				k = i;
		/* perf's names for the same keys */
		if (k < 0 && n == 3 && !strncmp(p, "dso", 3))
			k = TALLY_SORT_IMAGE;
		if (k < 0 && n == 3 && !strncmp(p, "sym", 3))
			k = TALLY_SORT_FUNCTION;
		if (k < 0 && n == 7 && !strncmp(p, "srcline", 7))
			k = TALLY_SORT_LINE;
		if (k < 0) {
			char q[TALLY_EXCERPT_SIZE];
			char *w = xstrndup(p, n);
			tally_seterr(
				-EINVAL,
				"--sort: unknown key '%s' (keys: comm, pid, image, function, line; comma-separated)",
				tally_excerpt(q, w));
			free(w);
			return -EINVAL;
		}
		for (int i = 0; i < s->n; i++)
			if (s->keys[i] == (enum tally_sort_key)k)
				return tally_seterr(-EINVAL, "--sort: key '%s' given twice",
						    key_names[k]);
		s->keys[s->n++] = (enum tally_sort_key)k;
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

bool tally_sort_needs_lines(const struct tally_sort *s)
{
	for (int i = 0; i < s->n; i++)
		if (s->keys[i] == TALLY_SORT_LINE)
			return true;
	return false;
}

static bool has_key(const struct tally_sort *s, enum tally_sort_key k)
{
	for (int i = 0; i < s->n; i++)
		if (s->keys[i] == k)
			return true;
	return false;
}

static bool db_has_comm(const struct tally_db *db)
{
	for (size_t l = 0; l < db->nlabels; l++)
		if (tally_labelset_get(&db->labels[l], "comm"))
			return true;
	return false;
}

int tally_sort_check(const struct tally_sort *s, const struct tally_db *db, const char *input)
{
	if (has_key(s, TALLY_SORT_PID) && !db->per_pid)
		return tally_seterr(
			-EINVAL,
			"--sort pid: '%s' was recorded without --per-pid (sort by comm, or record again with --per-pid)",
			input);
	if (has_key(s, TALLY_SORT_COMM) && !db->per_pid && !db_has_comm(db))
		return tally_seterr(
			-EINVAL,
			"--sort comm: '%s' keeps no command names (recorded by an older tally without --per-pid: record again)",
			input);
	return 0;
}

struct srow {
	char *val[TALLY_SORT_MAX]; /* by key; NULL for pid (in pid) */
	int pid;
	uint64_t n;  /* the value: period-weighted once db is weighed */
	uint64_t ns; /* the samples */
	uint64_t h;
};

struct stab {
	struct srow *v;
	size_t n, alloc;
	const struct tally_sort *s;
};

static bool srow_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct stab *t = ctx;
	const struct srow *a = &t->v[idx], *b = key;
	if (a->h != b->h || a->pid != b->pid)
		return false;
	for (int i = 0; i < t->s->n; i++) {
		const char *x = a->val[i], *y = b->val[i];
		if ((x == NULL) != (y == NULL) || (x && strcmp(x, y)))
			return false;
	}
	return true;
}

static int cmp_srow(const void *pa, const void *pb, void *ctx)
{
	const struct tally_sort *cmp_keys = ctx;
	const struct srow *a = pa, *b = pb;
	if (a->n != b->n)
		return a->n > b->n ? -1 : 1;
	for (int i = 0; i < cmp_keys->n; i++) {
		if (cmp_keys->keys[i] == TALLY_SORT_PID) {
			if (a->pid != b->pid)
				return a->pid < b->pid ? -1 : 1;
			continue;
		}
		int c = strcmp(a->val[i] ? a->val[i] : "", b->val[i] ? b->val[i] : "");
		if (c)
			return c;
	}
	return 0;
}

/* The comm of a profile: the label the recording kept, else the process list's. */
static const char *prof_comm(const struct tally_db *db, const struct tally_db_prof *pf)
{
	const char *c = tally_db_label(db, pf->label, "comm");
	if (!c && db->per_pid)
		c = tally_db_comm(db, pf->pid);
	return c ? c : "-";
}

static void build(struct stab *t, const struct tally_db *db, struct tally_resolver *res,
		  const struct tally_select *sel, int ev, uint64_t *total, uint64_t *ntotal)
{
	/* the samples beside the values once db is weighed */
	const uint64_t *raw = db->weighed ? db->weights : db->counts;
	const struct tally_sort *s = t->s;
	struct tally_hidx idx = { 0 };
	size_t ne = (size_t)db->nevents;
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		if (!tally_select_prof(sel, db, pf))
			continue;
		const struct tally_db_image *im = &db->images[pf->image];
		/* what is the same for every entry of the profile */
		const char *comm = prof_comm(db, pf);
		/* processes apart only when pid is a key */
		int32_t pid = has_key(s, TALLY_SORT_PID) ? pf->pid : 0;
		for (size_t i = pf->first; i < pf->end; i++) {
			uint64_t c = db->counts[i * ne + (size_t)ev];
			if (!c)
				continue;
			uint64_t nc = raw[i * ne + (size_t)ev];
			*total += c;
			*ntotal += nc;
			struct tally_leaf lf = { 0 };
			bool resolved = false;
			struct srow key = { .pid = pid };
			char linebuf[4096];
			for (int k = 0; k < s->n; k++) {
				switch (s->keys[k]) {
				case TALLY_SORT_COMM: key.val[k] = (char *)comm; break;
				case TALLY_SORT_PID: key.val[k] = NULL; break;
				case TALLY_SORT_IMAGE: key.val[k] = im->name; break;
				case TALLY_SORT_FUNCTION:
				case TALLY_SORT_LINE:
					if (!resolved) {
						tally_resolve_leaf(res, pf->image,
								   db->entries[i].offset, &lf);
						resolved = true;
					}
					if (s->keys[k] == TALLY_SORT_FUNCTION) {
						key.val[k] = (char *)lf.name;
					} else {
						if (lf.file)
							snprintf(linebuf, sizeof(linebuf), "%s:%d",
								 lf.file, lf.line);
						else
							snprintf(linebuf, sizeof(linebuf),
								 "[%s+%#" PRIx64 "]", im->name,
								 db->entries[i].offset);
						key.val[k] = linebuf;
					}
					break;
				}
			}
			uint64_t h = tally_hash_u64((uint64_t)(uint32_t)key.pid);
			for (int k = 0; k < s->n; k++)
				if (key.val[k])
					h = tally_hash_bytes(key.val[k], strlen(key.val[k]),
							     h + (uint64_t)k);
			key.h = h;
			uint32_t j = tally_hidx_get(&idx, h, &key, srow_eq, t);
			if (j == TALLY_HIDX_NONE) {
				GROW(t->v, t->alloc, t->n + 1);
				struct srow *r = &t->v[t->n];
				*r = key;
				for (int k = 0; k < s->n; k++)
					r->val[k] = key.val[k] ? xstrdup(key.val[k]) : NULL;
				r->n = 0;
				r->ns = 0;
				tally_hidx_put(&idx, h, (uint32_t)t->n);
				j = (uint32_t)t->n++;
			}
			t->v[j].n += c;
			t->v[j].ns += nc;
		}
	}
	tally_hidx_release(&idx);
	if (t->n)
		qsort_r(t->v, t->n, sizeof(*t->v), cmp_srow, (void *)s);
}

void tally_report_sort(struct strbuf *out, const struct tally_db *db, struct tally_resolver *res,
		       const struct tally_report_opts *o, const struct tally_sort *s, int ev,
		       bool json)
{
	struct stab t = { .s = s };
	uint64_t total = 0, ntotal = 0;
	build(&t, db, res, o->sel, ev, &total, &ntotal);
	size_t shown = 0, width[TALLY_SORT_MAX] = { 0 };
	struct tally_json j;
	if (json) {
		tally_json_init(&j, out);
		tally_json_obj(&j);
		tally_json_kstr(&j, "input", o->input);
		tally_json_kstr(&j, "event", db->events[ev]);
		tally_json_karr(&j, "sort");
		for (int k = 0; k < s->n; k++)
			tally_json_str(&j, key_names[s->keys[k]]);
		tally_json_end(&j);
		tally_json_kstr(&j, "unit", tally_view_unit(db, ev));
		tally_json_ku64(&j, "samples", ntotal);
		if (db->weighed)
			tally_json_ku64(&j, "value", total);
		tally_json_karr(&j, "rows");
	} else {
		strbuf_addf(out, "# %s: event %s, by ", o->input, db->events[ev]);
		for (int k = 0; k < s->n; k++)
			strbuf_addf(out, "%s%s", k ? "," : "", key_names[s->keys[k]]);
		/* columns as wide as their widest shown value (at most 40), the last one free */
		size_t shown_w = 0;
		for (int k = 0; k < s->n; k++)
			width[k] = strlen(key_names[s->keys[k]]);
		for (size_t i = 0; i < t.n; i++) {
			double pct = tally_view_pct(t.v[i].n, total);
			if ((o->percent_limit > 0 && pct < o->percent_limit) ||
			    (o->top && shown_w >= o->top))
				continue;
			shown_w++;
			for (int k = 0; k < s->n; k++) {
				char pb[16];
				size_t w =
					s->keys[k] == TALLY_SORT_PID
						? (size_t)snprintf(pb, sizeof(pb), "%d", t.v[i].pid)
						: strlen(t.v[i].val[k]);
				if (w > width[k])
					width[k] = w > 40 ? 40 : w;
			}
		}
		if (db->weighed) {
			strbuf_addstr(out, "\n# values: ");
			tally_view_values_desc(out, db, ev);
		}
		strbuf_addf(out, "\n%9s %8s", tally_view_heading(db, ev), "%");
		for (int k = 0; k < s->n; k++)
			strbuf_addf(out, "  %-*s", k + 1 < s->n ? (int)width[k] : 0,
				    key_names[s->keys[k]]);
		strbuf_addch(out, '\n');
	}
	for (size_t i = 0; i < t.n; i++) {
		const struct srow *r = &t.v[i];
		double pct = tally_view_pct(r->n, total);
		if ((o->percent_limit > 0 && pct < o->percent_limit) || (o->top && shown >= o->top))
			continue;
		shown++;
		if (json) {
			tally_json_obj(&j);
			for (int k = 0; k < s->n; k++) {
				if (s->keys[k] == TALLY_SORT_PID)
					tally_json_ki64(&j, "pid", r->pid);
				else
					tally_json_kstr(&j, key_names[s->keys[k]], r->val[k]);
			}
			tally_json_ku64(&j, "samples", r->ns);
			if (db->weighed)
				tally_json_ku64(&j, "value", r->n);
			tally_json_knum(&j, "percent", pct, 2);
			tally_json_end(&j);
		} else {
			tally_view_value(out, db, ev, r->n, 9);
			strbuf_addf(out, " %7.2f%%", pct);
			for (int k = 0; k < s->n; k++) {
				size_t at = out->len + 2;
				if (s->keys[k] == TALLY_SORT_PID) {
					strbuf_addf(out, "  %d", r->pid);
				} else {
					strbuf_addstr(out, "  ");
					strbuf_add_excerpt(out, r->val[k], strlen(r->val[k]), 200);
				}
				for (size_t w = out->len - at; k + 1 < s->n && w < width[k]; w++)
					strbuf_addch(out, ' ');
			}
			strbuf_addch(out, '\n');
		}
	}
	if (json) {
		tally_json_end(&j);
		tally_json_end(&j);
		strbuf_addch(out, '\n');
	} else {
		tally_view_value(out, db, ev, total, 9);
		strbuf_addf(out, " %8s  Total\n", "");
	}
	for (size_t i = 0; i < t.n; i++)
		for (int k = 0; k < s->n; k++)
			free(t.v[i].val[k]);
	free(t.v);
}
