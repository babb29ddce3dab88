/* The filters shared by report and export (include/tally/select.h). */
#include <errno.h>
#include <string.h>

#include "tally/select.h"
#include "tally/util.h"

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
	default: return 0;
	}
}

int tally_select_check(struct tally_select *s, const struct tally_db *db, const char *input, struct tally_warnings *w)
{
	if ((s->pid || s->comm) && !db->per_pid)
		return tally_seterr(-EINVAL, "'%s' was recorded without --per-pid, so it cannot be filtered by %s (record again with --per-pid)",
				    input, s->pid ? "--pid" : "--comm");
	s->ev_only = -1;
	if (s->event) {
		s->ev_only = tally_db_event(db, s->event);
		if (s->ev_only < 0) {
			struct strbuf names = STRBUF_INIT;
			for (int e = 0; e < db->nevents; e++)
				strbuf_addf(&names, "%s%s", e ? ", " : "", db->events[e]);
			tally_seterr(-EINVAL, "event '%s' is not in '%s' (it has: %s)", s->event, input, names.buf);
			strbuf_release(&names);
			return -EINVAL;
		}
	}
	if (s->pid) {
		bool found = false;
		for (size_t i = 0; i < db->nentries && !found; i++)
			found = db->entries[i].pid == s->pid;
		if (!found)
			tally_warnings_add(w, "no samples for pid %d in '%s'", s->pid, input);
	}
	return 0;
}

bool tally_select_image_matches(const struct tally_db_image *im, const char *want)
{
	return !strcmp(im->name, want) || !strcmp(im->path, want) || !strcmp(tally_basename(im->path), want);
}

bool tally_select_pid(const struct tally_select *s, const struct tally_db *db, int pid)
{
	if (s->pid && pid != s->pid)
		return false;
	if (s->comm) {
		const char *c = tally_db_comm(db, pid);
		if (!c || strcmp(c, s->comm))
			return false;
	}
	return true;
}

bool tally_select_prof(const struct tally_select *s, const struct tally_db *db, const struct tally_db_prof *pf)
{
	const struct tally_db_image *im = &db->images[pf->image];
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
	{ 0, "exclude-dependent", TALLY_ARG_NONE, NULL, "only the profiled programs' own executables", TALLY_OPT_SEL_EXCL },
	{ 0, "image", TALLY_ARG_REQUIRED, "NAME", "only this image (file name or full path)", TALLY_OPT_SEL_IMAGE },
	{ 0, "pid", TALLY_ARG_REQUIRED, "PID", "only this process (needs a --per-pid database)", TALLY_OPT_SEL_PID },
	{ 0, "comm", TALLY_ARG_REQUIRED, "NAME", "only processes with this name (needs --per-pid)", TALLY_OPT_SEL_COMM },
	{ 0, "event", TALLY_ARG_REQUIRED, "NAME", "only this event", TALLY_OPT_SEL_EVENT },
	TALLY_OPTION_END,
};

const struct tally_optgroup tally_select_group = { "selection", select_options, select_handle };
