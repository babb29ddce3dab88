/* The filters shared by report and export (include/tally/select.h). */
#define _GNU_SOURCE /* strverscmp */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally/select.h"
#include "tally/util.h"
#include "tally/view.h"

void tally_select_init(struct tally_select *s)
{
	memset(s, 0, sizeof(*s));
	s->ev_only = -1;
}

int tally_select_getopt(struct tally_select *s, int opt, const char *arg)
{
	uint64_t v;
	int r;
	switch (opt) {
	case TALLY_OPT_SEL_IMAGE: s->image = arg; return 1;
	case TALLY_OPT_SEL_PID:
		if ((r = tally_parse_u64(arg, "--pid", 1, 0x7fffffff, &v)) < 0)
			return r;
		s->pid = (int)v;
		return 1;
	case TALLY_OPT_SEL_COMM: s->comm = arg; return 1;
	case TALLY_OPT_SEL_EVENT: s->event = arg; return 1;
	case TALLY_OPT_SEL_EXCL: s->excl = true; return 1;
	case TALLY_OPT_SEL_SAMPLES: s->samples = true; return 1;
	case TALLY_OPT_SEL_LABEL: {
		char *k, *v;
		if (tally_label_parse(arg, "--label", &k, &v))
			return -1;
		free(k);
		free(v);
		if (s->nlabels == TALLY_SELECT_LABELS) {
			tally_seterr(-EINVAL, "too many --label options (at most %d)",
				     TALLY_SELECT_LABELS);
			return -1;
		}
		s->labels[s->nlabels++] = arg;
		return 1;
	}
	default: return 0;
	}
}

int tally_select_check(struct tally_select *s, struct tally_db *db, const char *input,
		       struct tally_warnings *w)
{
	/* the command name is a label of every sample since it was kept in the key */
	s->comm_by_label = false;
	for (size_t l = 0; s->comm && l < db->nlabels && !s->comm_by_label; l++)
		s->comm_by_label = tally_labelset_get(&db->labels[l], "comm") != NULL;
	if (s->pid && !db->per_pid)
		return tally_seterr(
			-EINVAL,
			"'%s' was recorded without --per-pid, so it cannot be filtered by --pid (record again with --per-pid)",
			input);
	if (s->comm && !s->comm_by_label && !db->per_pid)
		return tally_seterr(
			-EINVAL,
			"'%s' keeps no command names (recorded by an older tally without --per-pid), so it cannot be filtered by --comm (record again)",
			input);
	s->ev_only = -1;
	if (s->event) {
		s->ev_only = tally_db_event(db, s->event);
		if (s->ev_only < 0) {
			struct strbuf names = STRBUF_INIT;
			for (int e = 0; e < db->nevents; e++)
				strbuf_addf(&names, "%s%s", e ? ", " : "", db->events[e]);
			tally_seterr(-EINVAL, "event '%s' is not in '%s' (it has: %s)", s->event,
				     input, names.buf);
			strbuf_release(&names);
			return -EINVAL;
		}
	}
	if (s->nlabels) {
		/* a key no label set has is a mistake, not an empty selection */
		for (int i = 0; i < s->nlabels; i++) {
			size_t kl = strcspn(s->labels[i], "=");
			bool known = false;
			for (size_t l = 0; l < db->nlabels && !known; l++)
				for (size_t k = 0; k < db->labels[l].n && !known; k++)
					known = strlen(db->labels[l].v[k].key) == kl &&
						!strncmp(db->labels[l].v[k].key, s->labels[i], kl);
			if (!known) {
				struct strbuf keys = STRBUF_INIT;
				tally_db_label_keys(db, &keys);
				tally_seterr(
					-1, "--label %.*s: '%s' has no label '%.*s' (%s)", (int)kl,
					s->labels[i], input, (int)kl, s->labels[i],
					keys.len
						? keys.buf
						: "it has no labels: 'tally merge' adds host and run, a recording comm");
				strbuf_release(&keys);
				return -1;
			}
		}
		bool any = false;
		for (size_t p = 0; p < db->nprofs && !any; p++)
			any = tally_select_label(s, db, db->profs[p].label);
		if (!any)
			tally_warnings_add(w, "no samples in '%s' have the labels asked (--label)",
					   input);
	}
	if (s->pid) {
		bool found = false;
		for (size_t i = 0; i < db->nentries && !found; i++)
			found = db->entries[i].pid == s->pid;
		if (!found)
			tally_warnings_add(w, "no samples for pid %d in '%s'", s->pid, input);
	}
	tally_view_weigh(db, s->samples);
	return 0;
}

/* The samples of profile p in the selected events. */
static uint64_t prof_samples(const struct tally_select *s, const struct tally_db *db, size_t p)
{
	uint64_t n = 0;
	for (size_t i = db->profs[p].first; i < db->profs[p].end; i++)
		for (int e = 0; e < db->nevents; e++)
			if (tally_select_event(s, e))
				n += db->counts[i * (size_t)db->nevents + (size_t)e];
	return n;
}

/* The names a refusal lists: collected, then sorted (numbers in order),
 * each once, at most LIST_MAX of them. */
enum { LIST_MAX = 8 };
struct names {
	char **v;
	size_t n, alloc;
};

static void names_add(struct names *l, const char *item)
{
	GROW(l->v, l->alloc, l->n + 1);
	l->v[l->n++] = xstrdup(item);
}

static int cmp_name(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* The list as "a, b, c[, ...]" into sb; l is emptied. */
static void names_join(struct names *l, struct strbuf *sb)
{
	if (l->n)
		qsort(l->v, l->n, sizeof(*l->v), cmp_name);
	size_t shown = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (i && !strcmp(l->v[i], l->v[i - 1]))
			continue;
		if (shown == LIST_MAX) {
			strbuf_addstr(sb, ", ...");
			break;
		}
		strbuf_addf(sb, "%s%s", shown++ ? ", " : "", l->v[i]);
	}
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int tally_select_nonempty(const struct tally_select *s, const struct tally_db *db,
			  const char *input)
{
	if (!s->image && !s->pid && !s->comm && !s->excl && !s->nlabels)
		return 0; /* no filter: an empty database is reported as such */
	bool all = false, image = !s->image, pid = !s->pid, comm = !s->comm, excl = !s->excl,
	     label = !s->nlabels;
	struct tally_select labels_only = *s; /* --label alone (not the comm label) */
	labels_only.comm_by_label = false;
	struct names nimages = { 0 }, npids = { 0 }, ncomms = { 0 }, nlabels = { 0 };
	struct strbuf images = STRBUF_INIT, pids = STRBUF_INIT, comms = STRBUF_INIT,
		      labels = STRBUF_INIT, t = STRBUF_INIT;
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		if (!prof_samples(s, db, p))
			continue;
		const struct tally_db_image *im = &db->images[pf->image];
		all = all || tally_select_prof(s, db, pf);
		image = image || tally_select_image_matches(im, s->image);
		pid = pid || pf->pid == s->pid;
		/* the command name: the comm label the recording kept, else the process's */
		const char *c = s->comm_by_label ? tally_db_label(db, pf->label, "comm")
						 : tally_db_comm(db, pf->pid);
		comm = comm || (c && !strcmp(c, s->comm));
		excl = excl || !strcmp(im->kind, "exec");
		label = label || tally_select_label(&labels_only, db, pf->label);
		names_add(&nimages, im->name);
		if (c)
			names_add(&ncomms, c);
		if (db->per_pid) {
			const char *pc = tally_db_comm(db, pf->pid);
			strbuf_reset(&t);
			strbuf_addf(&t, "%d (%s)", pf->pid, pc ? pc : c ? c : "?");
			names_add(&npids, t.buf);
		}
		for (int i = 0; i < s->nlabels; i++) {
			size_t kl = strcspn(s->labels[i], "=");
			char *key = xstrndup(s->labels[i], kl);
			const char *v = tally_db_label(db, pf->label, key);
			strbuf_reset(&t);
			strbuf_addf(&t, "%s=%s", key, v ? v : "");
			names_add(&nlabels, t.buf);
			free(key);
		}
	}
	bool none = !nimages.n;
	names_join(&nimages, &images);
	names_join(&npids, &pids);
	names_join(&ncomms, &comms);
	names_join(&nlabels, &labels);
	int r = 0;
	if (!all) {
		const char *what = s->event ? " of the event" : "";
		if (none)
			r = tally_seterr(-ENOENT, "'%s' has no samples%s at all", input, what);
		else if (!image)
			r = tally_seterr(
				-ENOENT,
				"'%s' has no samples in the selection: --image '%s' matches no image with samples%s (images with samples: %s)",
				input, s->image, what, images.buf);
		else if (!pid)
			r = tally_seterr(
				-ENOENT,
				"'%s' has no samples in the selection: --pid %d has no samples%s (processes with samples: %s)",
				input, s->pid, what, pids.buf);
		else if (!comm)
			r = tally_seterr(
				-ENOENT,
				"'%s' has no samples in the selection: --comm '%s' matches no process with samples%s (commands with samples: %s)",
				input, s->comm, what, comms.buf);
		else if (!label)
			r = tally_seterr(
				-ENOENT,
				"'%s' has no samples in the selection: no samples%s have the --label values asked (the values with samples: %s)",
				input, what, labels.buf);
		else if (!excl)
			r = tally_seterr(
				-ENOENT,
				"'%s' has no samples in the selection: --exclude-dependent keeps no image (no samples%s in the programs' own executables)",
				input, what);
		else
			r = tally_seterr(
				-ENOENT,
				"'%s' has no samples in the selection: each filter matches samples, but not together (drop one of them)",
				input);
	}
	strbuf_release(&images);
	strbuf_release(&pids);
	strbuf_release(&comms);
	strbuf_release(&labels);
	strbuf_release(&t);
	return r;
}

bool tally_select_image_matches(const struct tally_db_image *im, const char *want)
{
	return !strcmp(im->name, want) || !strcmp(im->path, want) ||
	       !strcmp(tally_basename(im->path), want);
}

bool tally_select_pid(const struct tally_select *s, const struct tally_db *db, int pid)
{
	if (s->pid && pid != s->pid)
		return false;
	if (s->comm && !s->comm_by_label) {
		const char *c = tally_db_comm(db, pid);
		if (!c || strcmp(c, s->comm))
			return false;
	}
	return true;
}

bool tally_select_label(const struct tally_select *s, const struct tally_db *db, uint32_t label)
{
	if (s->comm_by_label) {
		const char *c = tally_db_label(db, label, "comm");
		if (!c || strcmp(c, s->comm))
			return false;
	}
	for (int i = 0; i < s->nlabels; i++) {
		size_t kl = strcspn(s->labels[i], "=");
		/* each key once: its values are the choices */
		bool seen = false;
		for (int j = 0; j < i && !seen; j++)
			seen = strcspn(s->labels[j], "=") == kl &&
			       !strncmp(s->labels[j], s->labels[i], kl);
		if (seen)
			continue;
		char *key = xstrndup(s->labels[i], kl);
		const char *have = tally_db_label(db, label, key);
		free(key);
		bool ok = false;
		for (int j = i; j < s->nlabels && !ok; j++) {
			if (strcspn(s->labels[j], "=") != kl ||
			    strncmp(s->labels[j], s->labels[i], kl))
				continue;
			const char *want = s->labels[j] + kl + 1;
			ok = *want ? have && !strcmp(have, want) : !have;
		}
		if (!ok)
			return false;
	}
	return true;
}

bool tally_select_prof(const struct tally_select *s, const struct tally_db *db,
		       const struct tally_db_prof *pf)
{
	const struct tally_db_image *im = &db->images[pf->image];
	if ((s->nlabels || s->comm_by_label) && !tally_select_label(s, db, pf->label))
		return false;
	if (s->excl && strcmp(im->kind, "exec"))
		return false;
	if (s->image && !tally_select_image_matches(im, s->image))
		return false;
	return tally_select_pid(s, db, pf->pid);
}

static int select_handle(void *ctx, int code, const char *arg)
{
	int r = tally_select_getopt(ctx, code, arg);
	return r < 0 ? r : 0;
}

static const struct tally_option select_options[] = {
	TALLY_OPT(0, "exclude-dependent", TALLY_ARG_NONE, NULL,
		  "only the profiled programs' own executables", TALLY_OPT_SEL_EXCL),
	TALLY_OPT(0, "image", TALLY_ARG_REQUIRED, "NAME",
		  "only this image (file name or full path)", TALLY_OPT_SEL_IMAGE),
	TALLY_OPT(0, "pid", TALLY_ARG_REQUIRED, "PID",
		  "only this process (needs a --per-pid database)", TALLY_OPT_SEL_PID),
	TALLY_OPT(0, "comm", TALLY_ARG_REQUIRED, "NAME",
		  "only processes with this command name (comm)", TALLY_OPT_SEL_COMM),
	TALLY_OPT(0, "event", TALLY_ARG_REQUIRED, "NAME", "only this event", TALLY_OPT_SEL_EVENT),
	TALLY_OPT(
		0, "label", TALLY_ARG_REQUIRED, "KEY=VALUE",
		"only samples with this label (tally merge keeps host and run);\nrepeated: each KEY must match one of its VALUEs",
		TALLY_OPT_SEL_LABEL),
	TALLY_OPT(
		0, "samples", TALLY_ARG_NONE, NULL,
		"raw sample counts instead of the default, time or events with each\nsample weighted by its period (as perf's)",
		TALLY_OPT_SEL_SAMPLES),
	TALLY_OPTION_END,
};

const struct tally_optgroup tally_select_group = { "selection", select_options, select_handle };

void tally_select_apply(struct tally_db *db, const struct tally_select *sel, bool stacks_by_image)
{
	size_t ne = (size_t)db->nevents;
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		bool keep = tally_select_prof(sel, db, pf);
		for (size_t i = pf->first; i < pf->end; i++)
			for (size_t e = 0; e < ne; e++)
				if (!keep || !tally_select_event(sel, (int)e))
					db->counts[i * ne + e] = 0;
	}
	/* a stack's leaf is a frame read from all over memory, a cache miss a
	 * stack: only looked at when its image can change the choice */
	bool leaf_image = sel->image || sel->excl;
	for (size_t s = 0; s < db->nstacks; s++) {
		const struct tally_db_stack *st = &db->stacks[s];
		bool keep = tally_select_pid(sel, db, st->pid) &&
			    tally_select_label(sel, db, st->label);
		if (keep && st->len && stacks_by_image) {
			/* the leaf's profile decides, as for the flat profile */
			struct tally_db_prof pf = { leaf_image ? tally_db_frame(db, st, 0)->image
							       : 0,
						    db->per_pid ? st->pid : 0, 0, 0, st->label };
			keep = tally_select_prof(sel, db, &pf);
		}
		for (size_t e = 0; e < ne; e++)
			if (!keep || !tally_select_event(sel, (int)e))
				db->stack_counts[s * ne + e] = 0;
	}
}

uint64_t tally_select_total(const struct tally_db *db, int event, bool stacks)
{
	uint64_t t = 0;
	size_t ne = (size_t)db->nevents;
	if (stacks) {
		for (size_t s = 0; s < db->nstacks; s++)
			t += db->stack_counts[s * ne + (size_t)event];
	} else {
		for (size_t i = 0; i < db->nentries; i++)
			t += db->counts[i * ne + (size_t)event];
	}
	return t;
}
