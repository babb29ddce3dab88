/* libcurl loaded on first use (lib/push/curl.h). */
#define _GNU_SOURCE
#include "lib/push/curl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tally/util.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct tally_curl fns;
static const struct tally_curl *loaded;
static char why[512];

static void load(void)
{
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
		{ "curl_global_init", offsetof(struct tally_curl, global_init) },
		{ "curl_easy_init", offsetof(struct tally_curl, easy_init) },
		{ "curl_easy_setopt", offsetof(struct tally_curl, easy_setopt) },
		{ "curl_easy_perform", offsetof(struct tally_curl, easy_perform) },
		{ "curl_easy_getinfo", offsetof(struct tally_curl, easy_getinfo) },
		{ "curl_easy_cleanup", offsetof(struct tally_curl, easy_cleanup) },
		{ "curl_easy_strerror", offsetof(struct tally_curl, easy_strerror) },
		{ "curl_slist_append", offsetof(struct tally_curl, slist_append) },
		{ "curl_slist_free_all", offsetof(struct tally_curl, slist_free_all) },
		{ "curl_mime_init", offsetof(struct tally_curl, mime_init) },
		{ "curl_mime_addpart", offsetof(struct tally_curl, mime_addpart) },
		{ "curl_mime_name", offsetof(struct tally_curl, mime_name) },
		{ "curl_mime_filename", offsetof(struct tally_curl, mime_filename) },
		{ "curl_mime_type", offsetof(struct tally_curl, mime_type) },
		{ "curl_mime_data", offsetof(struct tally_curl, mime_data) },
		{ "curl_mime_free", offsetof(struct tally_curl, mime_free) },
	};
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, sizeof(why), "cannot load libcurl (install Debian's libcurl4): %s",
			 dlerror());
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(syms); i++) {
		void *f = dlsym(h, syms[i].name);
		if (!f) {
			snprintf(why, sizeof(why),
				 "libcurl.so.4 has no %s (libcurl 7.56 or later is needed)",
				 syms[i].name);
			return;
		}
		memcpy((char *)&fns + syms[i].off, &f, sizeof(f));
	}
	CURLcode rc = fns.global_init(CURL_GLOBAL_DEFAULT);
	if (rc != CURLE_OK) {
		snprintf(why, sizeof(why), "cannot set up libcurl: %s", fns.easy_strerror(rc));
		return;
	}
	loaded = &fns;
}

const struct tally_curl *tally_curl(void)
{
	pthread_once(&once, load);
	if (!loaded)
		tally_seterr(-EAGAIN, "%s", why);
	return loaded;
}
