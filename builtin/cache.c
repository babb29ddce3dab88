/* tally cache: the build-id cache that recordings fill (lib/cache,
 * docs/symbols.md "The build-id cache"): its entries, its size against its
 * limit, and pruning it, least recently used first (perf buildid-cache). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/cache.h"
#include "tally/util.h"

struct copts {
	uint64_t max_size;
	bool max_set;
};

enum { OPT_MAX_SIZE = 1 };

static int cache_handle(void *ctx, int code, const char *arg)
{
	struct copts *o = ctx;
	if (code == OPT_MAX_SIZE) {
		o->max_set = true;
		return tally_parse_size(arg, "--max-size", 0, &o->max_size);
	}
	return 0;
}

static const struct tally_option cache_options[] = {
	TALLY_OPT(0, "max-size", TALLY_ARG_REQUIRED, "SIZE",
		  "prune: down to SIZE (e.g. 500M, 2G; 0 empties it; default: the limit)",
		  OPT_MAX_SIZE),
	TALLY_OPTION_END,
};
static const struct tally_optgroup cache_group = { NULL, cache_options, cache_handle };

const struct tally_cmdopts cache_cmdopts = {
	.name = "cache",
	.summary = "list, size or prune the build-id cache of sampled images (perf buildid-cache)",
	.usage = "list | size | prune [--max-size SIZE]",
	.footer =
		"commands:\n"
		"  list    one line per image kept: when it was last used, its size, its id and\n"
		"          the path it was recorded at; '+debug' when its debug file is kept too\n"
		"  size    where the cache is, its size and its limit\n"
		"  prune   remove the least recently used images until the cache holds at most\n"
		"          --max-size (default its limit)\n"
		"tally record (and the daemon, at each flush) copies every image it samples, and\n"
		"its debug file, into $XDG_CACHE_HOME/tally/buildid (~/.cache/tally/buildid),\n"
		"so reports name the code after a rebuild, an upgrade or a removal. Its limit is\n"
		"4 GiB or a tenth of its file system, whichever is less (TALLY_BUILDID_CACHE_SIZE\n"
		"sets it); past it the least recently used go. TALLY_BUILDID_CACHE=off turns it\n"
		"off, TALLY_BUILDID_CACHE=DIR puts it elsewhere.\n",
	.groups = { &cache_group },
};

/* 0: open; 1: an error (said); -1: there is no cache yet (nothing in it). */
static int open_cache(struct tally_cache *c)
{
	int r = tally_cache_open(c, false);
	if (!r)
		return 0;
	struct strbuf p = STRBUF_INIT;
	if (r == -ENOENT && !tally_cache_path(&p)) {
		strbuf_release(&p);
		return -1;
	}
	strbuf_release(&p);
	tally_error_last();
	return 1;
}

static int cache_list(void)
{
	struct tally_cache c;
	int o = open_cache(&c);
	if (o)
		return o > 0 ? 1 : 0;
	struct tally_cache_list l;
	if (tally_cache_list(&c, &l)) {
		tally_error_last();
		tally_cache_close(&c);
		return 1;
	}
	for (size_t i = 0; i < l.n; i++) {
		const struct tally_cache_entry *e = &l.v[i];
		char when[32], size[32];
		tally_format_utc(e->used, when, sizeof(when));
		tally_format_size(e->bytes, size, sizeof(size));
		struct strbuf path = STRBUF_INIT;
		strbuf_add_excerpt(&path, e->path ? e->path : "?", e->path ? strlen(e->path) : 1,
				   4096);
		printf("%s %10s  %s  %s%s\n", when, size, e->key, path.buf,
		       e->debug ? (e->image ? " +debug" : " (debug only)") : "");
		strbuf_release(&path);
	}
	tally_cache_list_release(&l);
	tally_cache_close(&c);
	return fflush(stdout) ? 1 : 0;
}

static int cache_size(void)
{
	struct tally_cache c;
	int o = open_cache(&c);
	if (o < 0) {
		struct strbuf p = STRBUF_INIT;
		tally_cache_path(&p);
		printf("%s: 0 images (not made yet: tally record makes it)\n", p.buf);
		strbuf_release(&p);
		return fflush(stdout) ? 1 : 0;
	}
	if (o)
		return 1;
	struct tally_cache_list l;
	uint64_t limit;
	if (tally_cache_list(&c, &l) || tally_cache_limit(&c, &limit)) {
		tally_error_last();
		tally_cache_close(&c);
		return 1;
	}
	char have[32], max[32];
	tally_format_size(l.bytes, have, sizeof(have));
	tally_format_size(limit, max, sizeof(max));
	printf("%s: %zu image%s, %s (%" PRIu64 " bytes) of %s (%" PRIu64 " bytes)\n", c.path, l.n,
	       l.n == 1 ? "" : "s", have, l.bytes, max, limit);
	tally_cache_list_release(&l);
	tally_cache_close(&c);
	return fflush(stdout) ? 1 : 0;
}

static int cache_prune(const struct copts *o)
{
	struct tally_cache c;
	int oc = open_cache(&c);
	if (oc < 0) {
		printf("removed 0 images: there is no build-id cache yet\n");
		return fflush(stdout) ? 1 : 0;
	}
	if (oc)
		return 1;
	uint64_t max = o->max_size;
	if (!o->max_set && tally_cache_limit(&c, &max)) {
		tally_error_last();
		tally_cache_close(&c);
		return 1;
	}
	size_t removed;
	uint64_t freed;
	int r = tally_cache_prune(&c, max, &removed, &freed);
	if (r)
		tally_error_last();
	else {
		char sz[32], lim[32];
		tally_format_size(freed, sz, sizeof(sz));
		tally_format_size(max, lim, sizeof(lim));
		printf("removed %zu image%s (%s): the cache is within %s\n", removed,
		       removed == 1 ? "" : "s", sz, lim);
	}
	tally_cache_close(&c);
	return r ? 1 : fflush(stdout) ? 1 : 0;
}

int cmd_cache(int argc, char **argv)
{
	struct copts o = { 0 };
	void *ctx[] = { &o };
	int first, r = tally_cmd_options(&cache_cmdopts, ctx, argc, argv, &first);
	if (r >= 0)
		return r;
	char **ops = argv + first;
	int nops = argc - first;
	if (!nops)
		return tally_usage_error("cache", "give a command: list, size or prune");
	if (nops > 1)
		return tally_usage_error("cache", "unexpected argument '%s'", ops[1]);
	if (o.max_set && strcmp(ops[0], "prune"))
		return tally_usage_error("cache", "--max-size is for 'cache prune'");
	if (!strcmp(ops[0], "list"))
		return cache_list();
	if (!strcmp(ops[0], "size"))
		return cache_size();
	if (!strcmp(ops[0], "prune"))
		return cache_prune(&o);
	return tally_usage_error("cache", "unknown command '%s' (list, size or prune)", ops[0]);
}
