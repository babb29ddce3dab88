/* The symbol-search options every command that names code takes (report,
 * annotate, export): where images and debug files are looked for, whether
 * debuginfod may be asked, how inlined code counts. One group, so the commands
 * cannot differ. */
#ifndef TALLY_SYMOPTS_H
#define TALLY_SYMOPTS_H

#include <stdbool.h>

#include "tally/imgmap.h"
#include "tally/options.h"
#include "tally/symbols.h"
#include "tally/util.h"

struct tally_symopts {
	const char **image_path; /* NULL-terminated once prepared */
	size_t nimage_path, aimage_path;
	const char **debug_dirs;
	size_t ndebug_dirs, adebug_dirs;
	const char *mapfile, *vmlinux;
	bool debuginfod, no_inline, no_demangle, no_cache;
	double debuginfod_timeout;
	struct tally_imgmap map;
	bool have_map;
};

void tally_symopts_init(struct tally_symopts *s);
void tally_symopts_release(struct tally_symopts *s);

/* The options as an option group, for a struct tally_symopts context. */
extern const struct tally_optgroup tally_symopts_group;

/* Loads the --mapfile and checks --vmlinux, then fills ro's symbol-search
 * fields (ro->lines is the caller's); a --debug-dir that cannot be read is
 * searched anyway, with a warning in w. 0, or a negative errno with
 * tally_seterr naming the file. The resolver options point into s: keep s
 * until the resolver is freed. */
int tally_symopts_prepare(struct tally_symopts *s, struct tally_resolver_opts *ro,
			  struct tally_warnings *w);

#endif
