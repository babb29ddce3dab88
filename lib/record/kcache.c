/* The kernel's symbols for a recording, without reading /proc/kallsyms each
 * time (tally/snapshot.h): the kernel makes that file's 120,000 lines anew at
 * every read, 60 ms of its time here, which a recording of a short command
 * would otherwise spend at its end whenever one sample fell in the kernel.
 *
 * The table read from it is kept in the user's build-id cache as one file,
 * kernel-symbols, tagged with what makes the addresses it holds true: the
 * boot (its id: the kernel and where KASLR put it) and the loaded modules
 * (name, size, address, build-id). It serves only for addresses it covers:
 * the core kernel's text and the modules' own ranges. Code made after it was
 * read (BPF programs, ftrace trampolines) lies outside both, and an address
 * there is looked up in /proc/kallsyms as before. */
#define _GNU_SOURCE
#include "tally/cache.h"
#include "tally/elfinfo.h"
#include "tally/snapshot.h"
#include "tally/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KCACHE_FILE "kernel-symbols"
#define KCACHE_MAX (UINT64_C(64) << 20)

/* Whether every address lies in the core kernel's symbols or a module's
 * range (modules: the snapshot's list, "name size address build-id"). */
static bool covered(const struct tally_kallsyms *t, const char *modules, const uint64_t *addrs,
		    size_t n)
{
	uint64_t lo = 0, hi = 0;
	bool core = tally_kallsyms_core_range(t, &lo, &hi);
	for (size_t i = 0; i < n; i++) {
		uint64_t a = addrs[i];
		if (core && a >= lo && a - lo < hi - lo + 4096)
			continue;
		bool in = false;
		for (const char *l = modules; l && *l && !in;) {
			unsigned long long size, base;
			if (*l != '#' && sscanf(l, "%*s %llu %llx", &size, &base) == 2 && base &&
			    a >= base && a - base < size)
				in = true;
			l = strchr(l, '\n');
			l = l ? l + 1 : NULL;
		}
		if (!in)
			return false;
	}
	return true;
}

int tally_kernel_symbols_for(const uint64_t *addrs, size_t n, const char *modules,
			     struct tally_kallsyms **out, bool *from_cache)
{
	*out = NULL;
	*from_cache = false;
	struct strbuf tag = STRBUF_INIT, boot = STRBUF_INIT, bytes = STRBUF_INIT;
	char kid[160];
	tally_kernel_build_id(kid, sizeof(kid));
	struct tally_cache c = { .fd = -1 };
	/* without a boot id there is nothing to tie the copy to */
	bool usable = !strbuf_read_file(&boot, "/proc/sys/kernel/random/boot_id", 128) &&
		      boot.len && !tally_cache_open(&c, true);
	if (usable) {
		strbuf_addf(&tag, "boot %s", boot.buf);
		strbuf_addf(&tag, "kernel %s\n%s", kid[0] ? kid : "-", modules ? modules : "");
		int fd = tally_cache_open_file(&c, KCACHE_FILE, KCACHE_MAX);
		if (fd >= 0 && !tally_kallsyms_load_fd(fd, tag.buf, out) &&
		    covered(*out, modules, addrs, n))
			*from_cache = true;
		if (fd >= 0)
			close(fd);
		}
	if (!*from_cache) {
		bool had = *out != NULL; /* the copy fits this boot but not these addresses: kept */
		tally_kallsyms_free(*out);
		*out = NULL;
		int r = tally_kallsyms_open(NULL, out);
		if (!r && usable && !had) {
			strbuf_reset(&bytes);
			tally_kallsyms_save(*out, tag.buf, &bytes);
			(void)tally_cache_write_file(&c, KCACHE_FILE, bytes.buf, bytes.len);
				}
		if (r) {
			tally_cache_close(&c);
			strbuf_release(&tag);
			strbuf_release(&boot);
			strbuf_release(&bytes);
			return r;
		}
	}
	tally_cache_close(&c);
	strbuf_release(&tag);
	strbuf_release(&boot);
	strbuf_release(&bytes);
	return 0;
}
