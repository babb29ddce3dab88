/* report --by-label KEY (report.h): the report once per value of a label
 * (and once for the samples without it), each under a heading; in JSON one
 * object of them all. */
#define _GNU_SOURCE
#include "tally/report.h"
#include "tally/view.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The values of label key on the profiles of db, sorted, and whether some
 * profile has no such label (*none). A new array; the strings are db's. */
static const char **label_values(const struct tally_db *db, const char *key, size_t *n, bool *none)
{
	const char **v = NULL;
	size_t cap = 0;
	*n = 0;
	*none = false;
	bool *seen = xcalloc(db->nlabels + 1, sizeof(bool));
	for (size_t p = 0; p < db->nprofs; p++) {
		uint32_t l = db->profs[p].label;
		if (seen[l])
			continue;
		seen[l] = true;
		const char *val = tally_db_label(db, l, key);
		if (!val) {
			*none = true;
			continue;
		}
		bool have = false;
		for (size_t i = 0; i < *n && !have; i++)
			have = !strcmp(v[i], val);
		if (!have) {
			GROW(v, cap, *n + 1);
			v[(*n)++] = val;
		}
	}
	free(seen);
	tally_qsort(v, *n, sizeof(*v), cmp_str);
	return v;
}

int tally_report_by_label(struct strbuf *out, struct tally_db *db, struct tally_resolver *res,
			  const struct tally_report_opts *ro, const char *key, bool json,
			  struct tally_warnings *w)
{
	size_t n;
	bool none;
	const char **vals = label_values(db, key, &n, &none);
	if (!n) {
		struct strbuf keys = STRBUF_INIT;
		tally_db_label_keys(db, &keys);
		tally_seterr(
			-EINVAL, "--by-label %s: '%s' has no label '%s' (%s)", key, ro->input, key,
			keys.len
				? keys.buf
				: "it has no labels: 'tally merge' adds host and run, a recording comm");
		strbuf_release(&keys);
		free(vals);
		return -EINVAL;
	}
	if (ro->sel->nlabels == TALLY_SELECT_LABELS) {
		free(vals);
		return tally_seterr(-EINVAL,
				    "too many --label options with --by-label (at most %d)",
				    TALLY_SELECT_LABELS - 1);
	}
	/* the call-graph views zero what they do not select: each group starts from the whole */
	size_t ne = (size_t)db->nevents;
	uint64_t *counts = xmalloc((db->nentries * ne + 1) * sizeof(uint64_t));
	uint64_t *scounts = xmalloc((db->nstacks * ne + 1) * sizeof(uint64_t));
	if (db->nentries)
		memcpy(counts, db->counts, db->nentries * ne * sizeof(uint64_t));
	if (db->nstacks)
		memcpy(scounts, db->stack_counts, db->nstacks * ne * sizeof(uint64_t));
	bool cg = tally_report_is_cg(ro);
	struct strbuf one = STRBUF_INIT, filter = STRBUF_INIT;
	if (json) {
		strbuf_addstr(out, "{\"by_label\":");
		strbuf_add_json_str(out, key);
		strbuf_addstr(out, ",\"groups\":[");
	}
	for (size_t g = 0; g < n + none; g++) {
		const char *val = g < n ? vals[g] : NULL;
		strbuf_reset(&filter);
		strbuf_addf(&filter, "%s=%s", key, val ? val : "");
		struct tally_select sel = *ro->sel;
		sel.labels[sel.nlabels++] = filter.buf;
		struct tally_report_opts r = *ro;
		r.sel = &sel;
		if (db->nentries)
			memcpy(db->counts, counts, db->nentries * ne * sizeof(uint64_t));
		if (db->nstacks)
			memcpy(db->stack_counts, scounts, db->nstacks * ne * sizeof(uint64_t));
		if (cg)
			tally_view_select(db, &sel);
		strbuf_reset(&one);
		if (json) {
			tally_report_json(&one, db, res, &r, w);
			if (one.len && one.buf[one.len - 1] == '\n')
				one.buf[--one.len] = '\0';
			strbuf_addstr(out, g ? ",{\"value\":" : "{\"value\":");
			if (val)
				strbuf_add_json_str(out, val);
			else
				strbuf_addstr(out, "null");
			strbuf_addf(out, ",\"report\":%s}", one.buf ? one.buf : "{}");
		} else {
			if (val)
				strbuf_addf(out, "%s## %s=%s\n", g ? "\n" : "", key, val);
			else
				strbuf_addf(out, "%s## no label '%s'\n", g ? "\n" : "", key);
			tally_report_text(out, db, res, &r, w);
		}
	}
	if (json)
		strbuf_addstr(out, "]}\n");
	if (db->nentries)
		memcpy(db->counts, counts, db->nentries * ne * sizeof(uint64_t));
	if (db->nstacks)
		memcpy(db->stack_counts, scounts, db->nstacks * ne * sizeof(uint64_t));
	strbuf_release(&one);
	strbuf_release(&filter);
	free(counts);
	free(scounts);
	free(vals);
	return 0;
}
