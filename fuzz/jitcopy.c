/* The database's text copy of a jitdump (jit/jitdump-PID-ID.txt, docs/format.md)
 * through tally_jitdump_read_buf, as the report reads it (a damaged line costs
 * what depends on it). Oracles: what is kept is sorted and without overlaps,
 * and is a fixed point of the round trip: written (tally_jitdump_format) and
 * read back, it is the same, without a warning, and written again, the same
 * bytes. */
#include "fuzz.h"

#include "tally/jitdump.h"

#include <inttypes.h>

static void check(const struct tally_jitdump *jd)
{
	for (size_t i = 0; i + 1 < jd->nfuncs; i++) {
		const struct tally_jit_func *f = &jd->funcs[i];
		FUZZ_CHECK(f->addr + (f->size ? f->size : 1) <= jd->funcs[i + 1].addr,
			   "functions at 0x%" PRIx64 " and 0x%" PRIx64 " overlap", f->addr,
			   jd->funcs[i + 1].addr);
	}
	for (size_t i = 0; i < jd->nfuncs; i++)
		for (size_t k = 0; k < jd->funcs[i].nlines; k++)
			FUZZ_CHECK(jd->funcs[i].lines[k].file < jd->nfiles,
				   "a line names a file that is not there");
}

static void check_same(const struct tally_jitdump *a, const struct tally_jitdump *b)
{
	FUZZ_CHECK(a->elf_mach == b->elf_mach && a->pid == b->pid && a->nfuncs == b->nfuncs,
		   "%zu functions read back as %zu", a->nfuncs, b->nfuncs);
	for (size_t i = 0; i < a->nfuncs; i++) {
		const struct tally_jit_func *x = &a->funcs[i], *y = &b->funcs[i];
		FUZZ_CHECK(x->addr == y->addr && x->size == y->size && x->index == y->index &&
				   !strcmp(x->name, y->name) && x->nlines == y->nlines,
			   "function %zu ('%s') reads back as '%s'", i, x->name, y->name);
		bool xc = x->code && x->size, yc = y->code && y->size;
		FUZZ_CHECK(xc == yc && (!xc || !memcmp(x->code, y->code, x->size)),
			   "function %zu: the code differs", i);
		for (size_t k = 0; k < x->nlines; k++)
			FUZZ_CHECK(x->lines[k].addr == y->lines[k].addr &&
					   x->lines[k].line == y->lines[k].line &&
					   x->lines[k].discrim == y->lines[k].discrim &&
					   !strcmp(a->files[x->lines[k].file],
						   b->files[y->lines[k].file]),
				   "function %zu line %zu differs", i, k);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_jitdump jd;
	int r = tally_jitdump_read_buf(&jd, (const char *)data, size, "jit/jitdump-1-x.txt");
	FUZZ_CHECK(r == 0, "read_buf returned %d", r);
	FUZZ_CHECK(!jd.warning || !strchr(jd.warning, '\n'),
		   "a warning of more than one line: '%s'", jd.warning);
	check(&jd);
	struct strbuf t1 = STRBUF_INIT, t2 = STRBUF_INIT;
	tally_jitdump_format(&jd, true, "/tmp/jit-1.dump", &t1);
	struct tally_jitdump back;
	r = tally_jitdump_read_buf(&back, t1.buf, t1.len, "written");
	if (r || back.warning)
		fprintf(stderr, "the copy tally wrote:\n%.4000s\n", t1.buf);
	FUZZ_CHECK(r == 0 && !back.warning, "tally cannot read back the copy it wrote: %s",
		   r ? tally_errmsg() : back.warning);
	check_same(&jd, &back);
	tally_jitdump_format(&back, true, "/tmp/jit-1.dump", &t2);
	FUZZ_CHECK(t1.len == t2.len && !memcmp(t1.buf, t2.buf, t1.len),
		   "the copy written again differs");
	tally_jitdump_release(&back);
	tally_jitdump_release(&jd);
	strbuf_release(&t1);
	strbuf_release(&t2);
	return 0;
}
