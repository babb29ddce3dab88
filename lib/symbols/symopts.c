/* The symbol-search option group (symopts.h) and what it hands the resolver. */
#define _GNU_SOURCE
#include "tally/symopts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	SO_IMGPATH = 1,
	SO_DEBUGDIR,
	SO_MAPFILE,
	SO_VMLINUX,
	SO_DEBUGINFOD,
	SO_DFDTIMEOUT,
	SO_NOINLINE,
	SO_NODEMANGLE,
	SO_NOCACHE
};

void tally_symopts_init(struct tally_symopts *s)
{
	memset(s, 0, sizeof(*s));
}

void tally_symopts_release(struct tally_symopts *s)
{
	free(s->image_path);
	free(s->debug_dirs);
	if (s->have_map)
		tally_imgmap_release(&s->map);
	memset(s, 0, sizeof(*s));
}

static int symopts_handle(void *ctx, int code, const char *arg)
{
	struct tally_symopts *s = ctx;
	switch (code) {
	case SO_IMGPATH:
		STRLIST_PUSH(s->image_path, s->nimage_path, s->aimage_path, arg);
		return 0;
	case SO_DEBUGDIR:
		STRLIST_PUSH(s->debug_dirs, s->ndebug_dirs, s->adebug_dirs, arg);
		return 0;
	case SO_MAPFILE: s->mapfile = arg; return 0;
	case SO_VMLINUX: s->vmlinux = arg; return 0;
	case SO_DEBUGINFOD: s->debuginfod = true; return 0;
	case SO_NOINLINE: s->no_inline = true; return 0;
	case SO_NODEMANGLE: s->no_demangle = true; return 0;
	case SO_NOCACHE: s->no_cache = true; return 0;
	case SO_DFDTIMEOUT:
		if (tally_parse_duration(arg, "--debuginfod-timeout", &s->debuginfod_timeout) ||
		    !(s->debuginfod_timeout > 0) || s->debuginfod_timeout > 3600)
			return tally_seterr(
				-EINVAL,
				"invalid --debuginfod-timeout '%s': expected seconds from 0.1 to 3600",
				arg);
		return 0;
	}
	return -EINVAL;
}

static const struct tally_option symopts_options[] = {
	TALLY_OPT(0, "image-path", TALLY_ARG_REQUIRED, "DIR",
		  "look for images and modules' .ko files under DIR too (repeatable)", SO_IMGPATH),
	TALLY_OPT(0, "debug-dir", TALLY_ARG_REQUIRED, "DIR",
		  "look for debug files under DIR first (repeatable; DIR/.build-id/..)",
		  SO_DEBUGDIR),
	TALLY_OPT(0, "mapfile", TALLY_ARG_REQUIRED, "FILE",
		  "find images and debug files by signature ('tally scan -o FILE')", SO_MAPFILE),
	TALLY_OPT(0, "vmlinux", TALLY_ARG_REQUIRED, "FILE",
		  "the kernel image, for kernel source lines (build-id checked)", SO_VMLINUX),
	TALLY_OPT(0, "debuginfod", TALLY_ARG_NONE, NULL,
		  "fetch missing debug info from DEBUGINFOD_URLS (opt-in)", SO_DEBUGINFOD),
	TALLY_OPT(0, "debuginfod-timeout", TALLY_ARG_REQUIRED, "SECS",
		  "at most this long for all the downloads of one command (default 10)",
		  SO_DFDTIMEOUT),
	TALLY_OPT(0, "no-inline", TALLY_ARG_NONE, NULL,
		  "count inlined code for the function it was inlined into", SO_NOINLINE),
	TALLY_OPT(0, "no-demangle", TALLY_ARG_NONE, NULL,
		  "C++ and Rust names as the symbol table has them (mangled)", SO_NODEMANGLE),
	TALLY_OPT(0, "no-buildid-cache", TALLY_ARG_NONE, NULL,
		  "never name code from the copies kept in the build-id cache", SO_NOCACHE),
	TALLY_OPTION_END,
};

const struct tally_optgroup tally_symopts_group = { "symbol search", symopts_options,
						    symopts_handle };

int tally_symopts_prepare(struct tally_symopts *s, struct tally_resolver_opts *ro,
			  struct tally_warnings *w)
{
	if (s->mapfile && !s->have_map) {
		if (tally_imgmap_load(&s->map, s->mapfile))
			return -EINVAL;
		s->have_map = true;
	}
	if (s->vmlinux && access(s->vmlinux, R_OK) != 0)
		return tally_seterr(-errno, "cannot read --vmlinux '%s': %s", s->vmlinux,
				    strerror(errno));
	for (size_t i = 0; i < s->ndebug_dirs; i++)
		if (access(s->debug_dirs[i], X_OK) != 0)
			tally_warnings_add(w, "--debug-dir '%s': %s (searched anyway)",
					   s->debug_dirs[i], strerror(errno));
	ro->image_path = s->image_path;
	ro->debug_dirs = s->debug_dirs;
	ro->map = s->have_map ? &s->map : NULL;
	ro->vmlinux = s->vmlinux;
	ro->debuginfod = s->debuginfod;
	ro->debuginfod_timeout = s->debuginfod_timeout;
	ro->no_inline = s->no_inline;
	ro->no_demangle = s->no_demangle;
	ro->no_cache = s->no_cache;
	return 0;
}
