/* The debuginfod client (libdebuginfod, opened with dlopen): a download with a
 * deadline, logged for --explain. */
#define _GNU_SOURCE
#include "internal.h"

static struct tally_resolver *dfd_resolver; /* for the progress callback's lookups */

struct dfd_deadline {
	double until;
};

static int dfd_progress(debuginfod_client *c, long a, long b)
{
	(void)a, (void)b;
	const struct dfd_deadline *d = dfd_resolver ? dfd_resolver->dfd_get_user_data(c) : NULL;
	/* non-zero cancels the download: the report never waits longer than the limit */
	return d && tally_now_mono() > d->until;
}

/* The debug file from DEBUGINFOD_URLS, or -1. Logged. */
int sym_try_debuginfod(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di, char **path)
{
	if (!r->o.debuginfod)
		return -1;
	if (strcmp(di->id_kind, "build-id")) {
		sym_logf_(s, "debuginfod: not asked (no build-id recorded)");
		return -1;
	}
	const char *urls = getenv("DEBUGINFOD_URLS");
	if (!urls || !*urls) {
		sym_logf_(s, "debuginfod: not asked (DEBUGINFOD_URLS is empty)");
		return -1;
	}
	if (!r->dfd_lib) {
		r->dfd_lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!r->dfd_lib) {
			sym_logf_(s, "debuginfod: cannot sym_load libdebuginfod.so.1: %s (install libdebuginfod1)", dlerror());
			return -1;
		}
		*(void **)&r->dfd_begin = dlsym(r->dfd_lib, "debuginfod_begin");
		*(void **)&r->dfd_find = dlsym(r->dfd_lib, "debuginfod_find_debuginfo");
		*(void **)&r->dfd_set_progressfn = dlsym(r->dfd_lib, "debuginfod_set_progressfn");
		*(void **)&r->dfd_set_user_data = dlsym(r->dfd_lib, "debuginfod_set_user_data");
		*(void **)&r->dfd_get_user_data = dlsym(r->dfd_lib, "debuginfod_get_user_data");
		*(void **)&r->dfd_end = dlsym(r->dfd_lib, "debuginfod_end");
		if (!r->dfd_begin || !r->dfd_find || !r->dfd_set_progressfn || !r->dfd_set_user_data ||
		    !r->dfd_get_user_data || !r->dfd_end) {
			sym_logf_(s, "debuginfod: libdebuginfod.so.1 lacks a function tally needs");
			dlclose(r->dfd_lib);
			r->dfd_lib = NULL;
			return -1;
		}
	}
	if (!r->dfd) {
		char t[32];
		/* the library's own limits, then ours in the progress callback */
		snprintf(t, sizeof(t), "%d", (int)(r->o.debuginfod_timeout + 0.999));
		setenv("DEBUGINFOD_TIMEOUT", t, 0);
		setenv("DEBUGINFOD_MAXTIME", t, 0);
		r->dfd = r->dfd_begin();
		if (!r->dfd) {
			sym_logf_(s, "debuginfod: the client could not start");
			return -1;
		}
		r->dfd_set_progressfn(r->dfd, dfd_progress);
	}
	unsigned char id[64];
	size_t len = strlen(di->id) / 2;
	if (len > sizeof(id))
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned v;
		if (sscanf(di->id + 2 * i, "%2x", &v) != 1)
			return -1;
		id[i] = (unsigned char)v;
	}
	struct dfd_deadline d = { tally_now_mono() + r->o.debuginfod_timeout };
	r->dfd_set_user_data(r->dfd, &d);
	dfd_resolver = r;
	char *p = NULL;
	double t0 = tally_now_mono();
	int fd = r->dfd_find(r->dfd, id, (int)len, &p);
	r->dfd_set_user_data(r->dfd, NULL);
	dfd_resolver = NULL;
	if (fd < 0) {
		sym_logf_(s, "debuginfod (%s): %s after %.1f s", urls,
		      tally_now_mono() - t0 >= r->o.debuginfod_timeout ? "gave up at the time limit" : strerror(-fd),
		      tally_now_mono() - t0);
		free(p);
		return -1;
	}
	*path = p;
	return fd;
}
