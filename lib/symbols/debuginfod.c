/* The debuginfod client (libdebuginfod, opened with dlopen): a download with a
 * deadline, logged for --explain. */
#define _GNU_SOURCE
#include "internal.h"

#include <time.h>

static struct tally_resolver *dfd_resolver; /* for the progress callback's lookups */

struct dfd_deadline {
	double until;
};

static int dfd_progress(debuginfod_client *c, long a, long b)
{
	const struct dfd_deadline *d = dfd_resolver ? dfd_resolver->dfd_get_user_data(c) : NULL;
	if (d) {
		struct tally_resolver *r = dfd_resolver;
		const char *name = r->db->images[r->dfd_image].name;
		double left = d->until - tally_now_mono();
		if (b > 0)
			sym_progress(r, "debuginfod: %s: %ld of %ld KiB (%.0f s left)", name,
				     a / 1024, b / 1024, left > 0 ? left : 0);
		else
			sym_progress(r, "debuginfod: asking for %s's debug info (%.0f s left)",
				     name, left > 0 ? left : 0);
	}
	/* non-zero cancels the download: the report never waits longer than the limit */
	return d && tally_now_mono() > d->until;
}

/* libdebuginfod's cache directory, as it chooses it. */
static void dfd_cache_dir(struct strbuf *out)
{
	const char *p = getenv("DEBUGINFOD_CACHE_PATH"), *x = getenv("XDG_CACHE_HOME"),
		   *h = getenv("HOME");
	if (p && *p)
		strbuf_addstr(out, p);
	else if (x && *x)
		strbuf_addf(out, "%s/debuginfod_client", x);
	else if (h && *h)
		strbuf_addf(out, "%s/.cache/debuginfod_client", h);
}

/* Whether libdebuginfod has a failure cached for build-id id (an empty file
 * where the debug file would be: elfutils' negative cache, made with no
 * permissions by older versions); *age gets how old it is, in seconds. */
static bool dfd_cached_failure(const char *id, struct strbuf *where, double *age)
{
	dfd_cache_dir(where);
	if (!where->len)
		return false;
	strbuf_addf(where, "/%s/debuginfo", id);
	struct stat st;
	if (lstat(where->buf, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 0)
		return false;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	*age = (double)(now.tv_sec - st.st_mtim.tv_sec);
	return true;
}

/* The debug file from DEBUGINFOD_URLS, or -1. Logged. */
int sym_try_debuginfod(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
		       char **path)
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
			sym_logf_(
				s,
				"debuginfod: cannot sym_load libdebuginfod.so.1: %s (install libdebuginfod1)",
				dlerror());
			return -1;
		}
		*(void **)&r->dfd_begin = dlsym(r->dfd_lib, "debuginfod_begin");
		*(void **)&r->dfd_find = dlsym(r->dfd_lib, "debuginfod_find_debuginfo");
		*(void **)&r->dfd_set_progressfn = dlsym(r->dfd_lib, "debuginfod_set_progressfn");
		*(void **)&r->dfd_set_user_data = dlsym(r->dfd_lib, "debuginfod_set_user_data");
		*(void **)&r->dfd_get_user_data = dlsym(r->dfd_lib, "debuginfod_get_user_data");
		*(void **)&r->dfd_end = dlsym(r->dfd_lib, "debuginfod_end");
		if (!r->dfd_begin || !r->dfd_find || !r->dfd_set_progressfn ||
		    !r->dfd_set_user_data || !r->dfd_get_user_data || !r->dfd_end) {
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
	/* one limit for the whole report, not one per image: the first download
	 * starts the clock, and what it leaves is what the others may take */
	double t0 = tally_now_mono();
	if (!r->dfd_until)
		r->dfd_until = t0 + r->o.debuginfod_timeout;
	if (t0 >= r->dfd_until) {
		sym_logf_(
			s,
			"debuginfod (%s): not asked: the report's --debuginfod-timeout of %.1f s was spent on other images",
			urls, r->o.debuginfod_timeout);
		return -1;
	}
	struct strbuf cached = STRBUF_INIT;
	double age = 0;
	bool was_cached = dfd_cached_failure(di->id, &cached, &age);
	struct dfd_deadline d = { r->dfd_until };
	r->dfd_image = (uint32_t)(di - r->db->images);
	r->dfd_set_user_data(r->dfd, &d);
	dfd_resolver = r;
	sym_progress(r, "debuginfod: asking for %s's debug info", di->name);
	char *p = NULL;
	int fd = r->dfd_find(r->dfd, id, (int)len, &p);
	r->dfd_set_user_data(r->dfd, NULL);
	dfd_resolver = NULL;
	if (fd < 0) {
		double took = tally_now_mono() - t0;
		if (was_cached && fd == -ENOENT)
			sym_logf_(
				s,
				"debuginfod (%s): a failure cached by libdebuginfod %.0f s ago ('%s'), not asked again until it expires (cache_miss_s in the cache directory, default 600 s; remove that file to ask now)",
				urls, age, cached.buf);
		else
			sym_logf_(s, "debuginfod (%s): %s after %.1f s", urls,
				  tally_now_mono() >= r->dfd_until ? "gave up at the time limit"
								   : strerror(-fd),
				  took);
		strbuf_release(&cached);
		free(p);
		return -1;
	}
	strbuf_release(&cached);
	*path = p;
	return fd;
}
