/* A runtime's jitdump (perf's binary format) through tally_jitdump_parse, as
 * the recorder reads jit-PID.dump, then the copy the database keeps of it;
 * and through tally_jitdump_scan as the unwinder reads it while it grows, a
 * few bytes at a time, each load's unwinding data made into CFI (jit.c) and
 * a frame unwound by it over a stack made of the input.
 * Oracles: the functions are sorted and do not overlap, each line table is
 * sorted and lies where lookups find it; and the round trip: the text tally
 * writes from the parsed dump (tally_jitdump_format) it reads back
 * (tally_jitdump_read_buf) to the same functions, names, line tables and
 * code, without a warning, and writes again byte for byte the same. */
#include "fuzz.h"

#include "tally/jitdump.h"
#include "../lib/unwind/internal.h"

#include <inttypes.h>

static void check_sorted(const struct tally_jitdump *jd, const char *what)
{
	for (size_t i = 0; i < jd->nfuncs; i++) {
		const struct tally_jit_func *f = &jd->funcs[i];
		uint64_t end = f->addr + (f->size ? f->size : 1);
		FUZZ_CHECK(f->name, "%s: a function without a name", what);
		if (i + 1 < jd->nfuncs)
			FUZZ_CHECK(end <= jd->funcs[i + 1].addr && f->addr < jd->funcs[i + 1].addr,
				   "%s: functions at 0x%" PRIx64 " and 0x%" PRIx64 " overlap", what,
				   f->addr, jd->funcs[i + 1].addr);
		FUZZ_CHECK(tally_jitdump_find(jd, f->addr) == f,
			   "%s: the function at 0x%" PRIx64 " is not found there", what, f->addr);
		for (size_t k = 0; k < f->nlines; k++) {
			FUZZ_CHECK(f->lines[k].file < jd->nfiles, "%s: a line names file %" PRIu32,
				   what, f->lines[k].file);
			if (k)
				FUZZ_CHECK(f->lines[k - 1].addr <= f->lines[k].addr,
					   "%s: line table out of order", what);
		}
		if (f->nlines)
			FUZZ_CHECK(tally_jitdump_line(f, f->lines[f->nlines - 1].addr) != NULL,
				   "%s: the last line is not found", what);
	}
}

static void check_same(const struct tally_jitdump *a, const struct tally_jitdump *b)
{
	FUZZ_CHECK(a->elf_mach == b->elf_mach && a->pid == b->pid, "the copy's header differs");
	FUZZ_CHECK(a->nfuncs == b->nfuncs, "the dump has %zu functions, its copy reads back %zu",
		   a->nfuncs, b->nfuncs);
	for (size_t i = 0; i < a->nfuncs; i++) {
		const struct tally_jit_func *x = &a->funcs[i], *y = &b->funcs[i];
		FUZZ_CHECK(x->addr == y->addr && x->size == y->size && x->index == y->index,
			   "function %zu: 0x%" PRIx64 "+%" PRIu64 " reads back as 0x%" PRIx64
			   "+%" PRIu64,
			   i, x->addr, x->size, y->addr, y->size);
		FUZZ_CHECK(!strcmp(x->name, y->name), "function %zu: name '%s' reads back as '%s'",
			   i, x->name, y->name);
		bool xc = x->code && x->size, yc = y->code && y->size;
		FUZZ_CHECK(xc == yc && (!xc || !memcmp(x->code, y->code, x->size)),
			   "function %zu: the code differs", i);
		FUZZ_CHECK(x->nlines == y->nlines, "function %zu: %zu lines read back as %zu", i,
			   x->nlines, y->nlines);
		for (size_t k = 0; k < x->nlines; k++) {
			const struct tally_jit_line *p = &x->lines[k], *q = &y->lines[k];
			FUZZ_CHECK(p->addr == q->addr && p->line == q->line &&
					   p->discrim == q->discrim &&
					   !strcmp(a->files[p->file], b->files[q->file]),
				   "function %zu line %zu differs", i, k);
		}
	}
}

/* The unwinder's reading: the input as a file that grows by step bytes, read
 * want bytes at a time as the recorder does; every load's unwinding data is
 * made into CFI and a frame at each load's start and end unwound with it.
 * Oracles: a load or move is never given twice (each record is read once),
 * the scan always progresses or stops, a step never yields a caller whose
 * stack pointer is not above its callee's. */
struct scan_seen {
	struct uw_jit *j;
	size_t n;
	uint64_t pcs[64]; /* where the first loads start and end */
	size_t npcs;
};

static void on_scan(void *arg, const struct tally_jit_code_event *ev)
{
	struct scan_seen *s = arg;
	s->n++;
	FUZZ_CHECK(!ev->unwind || (ev->eh_frame_hdr_len < ev->unwind_len &&
				   ev->unwind_len <= TALLY_JIT_UNWIND_MAX),
		   "unwinding data of %zu bytes with a header of %zu", ev->unwind_len,
		   ev->eh_frame_hdr_len);
	uw_jit_feed(&s->j, ev, 1 << 20);
	if (s->npcs + 2 <= ARRAY_SIZE(s->pcs)) {
		s->pcs[s->npcs++] = ev->addr;
		s->pcs[s->npcs++] = ev->addr + (ev->size ? ev->size - 1 : 0);
	}
}

static void scan(const uint8_t *data, size_t size)
{
	size_t step = size ? 1 + data[0] % 97 : 1, want = size > 1 ? 1 + data[1] % 200 : 64;
	struct tally_jitdump_cursor cur = { 0 };
	struct scan_seen s = { .j = NULL };
	for (size_t len = 0;; len += step) {
		if (len > size)
			len = size;
		size_t w = want;
		while (!cur.done && cur.off < len) {
			size_t n = len - cur.off < w ? (size_t)(len - cur.off) : w;
			uint64_t before = cur.off;
			size_t need = tally_jitdump_scan(&cur, data + cur.off, n, len, on_scan, &s);
			FUZZ_CHECK(cur.off >= before,
				   "the cursor went back from %" PRIu64 " to %" PRIu64, before,
				   cur.off);
			if (cur.off != before)
				continue;
			if (need > n && n == w) {
				FUZZ_CHECK(need <= 16 + 24 + TALLY_JIT_UNWIND_MAX + 8 || need == 40,
					   "the scan asks for %zu bytes at once", need);
				w = need;
				continue;
			}
			break;
		}
		if (len == size)
			break;
	}
	tally_jitdump_cursor_release(&cur);
	/* every range's CFI, over a stack of the input's bytes */
	uint8_t stack[256] = { 0 };
	memcpy(stack, data, size < sizeof(stack) ? size : sizeof(stack));
	struct uw_stack st = { 0x7000000000ull, stack, sizeof(stack) };
	struct uw_regs in = { .valid = (1u << UW_NREGS) - 1 };
	for (int i = 0; i < UW_NREGS; i++)
		in.r[i] = 0x7000000000ull + 8 * (uint64_t)i;
	for (size_t k = 0; k < s.npcs; k++) {
		uint64_t pc = s.pcs[k] + 1; /* a return address there: pc - 1 is looked up */
		struct uw_jit_where w;
		for (int act = 0; act < 2; act++) {
			if (!uw_jit_lookup_dump(s.j, pc, act, &w))
				continue;
			struct uw_regs out;
			if (uw_jit_step(&w, &in, &st, &out) == UW_STEP_OK)
				FUZZ_CHECK(out.r[UW_RSP] > in.r[UW_RSP],
					   "a caller's rsp 0x%" PRIx64 " is not above 0x%" PRIx64,
					   out.r[UW_RSP], in.r[UW_RSP]);
		}
	}
	uw_jit_free(s.j);
}

/* A function or a source file without a name (issue 17, item 9). */
static bool nameless(const struct tally_jitdump *jd)
{
	for (size_t i = 0; i < jd->nfuncs; i++)
		if (!jd->funcs[i].name[0])
			return true;
	for (size_t i = 0; i < jd->nfiles; i++)
		if (!jd->files[i][0])
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	scan(data, size);
	struct tally_jitdump jd;
	int r = tally_jitdump_parse(&jd, data, size);
	if (r) {
		fuzz_check_errmsg();
		tally_jitdump_release(&jd);
		return 0;
	}
	check_sorted(&jd, "dump");
	if (fuzz_known("i9") && nameless(&jd)) {
		tally_jitdump_release(&jd);
		return 0;
	}
	struct strbuf t1 = STRBUF_INIT, t2 = STRBUF_INIT;
	tally_jitdump_format(&jd, true, "/tmp/jit-1.dump", &t1);
	struct tally_jitdump back;
	r = tally_jitdump_read_buf(&back, t1.buf, t1.len, "jitdump-1-x.txt");
	if (r || back.warning)
		fprintf(stderr, "the copy tally wrote:\n%.4000s\n", t1.buf);
	FUZZ_CHECK(r == 0 && !back.warning,
		   "tally cannot read back the copy it wrote of a dump it accepted: %s",
		   r ? tally_errmsg() : back.warning);
	check_sorted(&back, "copy");
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
