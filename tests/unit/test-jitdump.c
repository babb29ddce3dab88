/* Unit tests of the jitdump reader and the database's text copy (jitdump.h):
 * dumps built byte by byte here, good and damaged. */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/jitdump.h"

#include <malloc.h>
#include <time.h>

struct dump {
	unsigned char *b; /* grows; dump_free releases it */
	size_t n, cap;
	bool swap;
	size_t marks[64]; /* where records start */
	size_t nmarks;
};

static void put(struct dump *d, const void *p, size_t n)
{
	GROW(d->b, d->cap, d->n + n);
	memcpy(d->b + d->n, p, n);
	d->n += n;
}

static void dump_free(struct dump *d)
{
	free(d->b);
	d->b = NULL;
	d->n = d->cap = 0;
}

static void put32(struct dump *d, uint32_t v)
{
	if (d->swap)
		v = __builtin_bswap32(v);
	put(d, &v, 4);
}

static void put64(struct dump *d, uint64_t v)
{
	if (d->swap)
		v = __builtin_bswap64(v);
	put(d, &v, 8);
}

static void header(struct dump *d, uint32_t magic, uint32_t version)
{
	put32(d, magic);
	put32(d, version);
	put32(d, 40);
	put32(d, 62);
	put32(d, 0);
	put32(d, 4242);
	put64(d, 1);
	put64(d, 0);
}

static void rec_head(struct dump *d, uint32_t id, uint32_t size)
{
	if (d->nmarks < ARRAY_SIZE(d->marks))
		d->marks[d->nmarks++] = d->n;
	put32(d, id);
	put32(d, size);
	put64(d, 2);
}

static void load(struct dump *d, uint64_t addr, uint64_t index, const char *name,
		 const unsigned char *code, size_t ncode)
{
	rec_head(d, 0, (uint32_t)(16 + 40 + strlen(name) + 1 + ncode));
	put32(d, 4242);
	put32(d, 4243);
	put64(d, addr);
	put64(d, addr);
	put64(d, ncode);
	put64(d, index);
	put(d, name, strlen(name) + 1);
	put(d, code, ncode);
}

/* Debug info for the function at addr: lines[i] applies from addr + offs[i]. */
static void debug(struct dump *d, uint64_t addr, const uint32_t *offs, const uint32_t *lines,
		  size_t n, const char *file)
{
	rec_head(d, 2, (uint32_t)(16 + 16 + n * (16 + strlen(file) + 1)));
	put64(d, addr);
	put64(d, n);
	for (size_t i = 0; i < n; i++) {
		put64(d, addr + offs[i]);
		put32(d, lines[i]);
		put32(d, 0);
		put(d, file, strlen(file) + 1);
	}
}

static void move(struct dump *d, uint64_t from, uint64_t to, uint64_t size, uint64_t index)
{
	rec_head(d, 1, 16 + 48);
	put32(d, 4242);
	put32(d, 4243);
	put64(d, to);
	put64(d, from);
	put64(d, to);
	put64(d, size);
	put64(d, index);
}

static const unsigned char code16[16] = { 0x48, 0x89, 0xf8, 0x31, 0xd2, 0x48, 0x01, 0xc2,
					  0x48, 0xff, 0xc8, 0x75, 0xf8, 0x48, 0x89, 0xc3 };
static const uint32_t offs[] = { 0, 5, 8 };
static const uint32_t lines[] = { 10, 11, 12 };

static void good(struct dump *d)
{
	header(d, 0x4A695444u, 1);
	debug(d, 0x1000, offs, lines, 3, "prog.js");
	load(d, 0x1000, 1, "hot loop", code16, sizeof(code16));
	load(d, 0x2000, 2, "cold", code16, 4);
	rec_head(d, 4, 16 + 24); /* unwinding info: skipped */
	put64(d, 0);
	put64(d, 0);
	put64(d, 0);
	rec_head(d, 77, 16); /* a record type from the future: skipped */
}

static void check_good(const struct tally_jitdump *jd)
{
	assert_int_equal(jd->elf_mach, 62);
	assert_int_equal(jd->pid, 4242);
	assert_int_equal(jd->nfuncs, 2);
	const struct tally_jit_func *f = tally_jitdump_find(jd, 0x100a);
	assert_non_null(f);
	assert_string_equal(f->name, "hot loop");
	assert_int_equal(f->size, 16);
	assert_memory_equal(f->code, code16, 16);
	assert_int_equal(f->nlines, 3);
	const struct tally_jit_line *l = tally_jitdump_line(f, 0x1009);
	assert_non_null(l);
	assert_int_equal(l->line, 12);
	assert_string_equal(jd->files[l->file], "prog.js");
	assert_int_equal(tally_jitdump_line(f, 0x1004)->line, 10);
	assert_null(tally_jitdump_find(jd, 0x1010));
	assert_string_equal(tally_jitdump_find(jd, 0x2003)->name, "cold");
	assert_int_equal(tally_jitdump_find(jd, 0x2003)->nlines, 0);
	assert_null(jd->warning);
}

static void test_jitdump__load_and_lines(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	good(&d);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	check_good(&jd);
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__other_byte_order(void **state)
{
	(void)state;
	struct dump d = { .n = 0, .swap = true };
	good(&d);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	check_good(&jd);
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__bad_magic(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x7f454c46u, 1);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), -EINVAL);
	assert_errmsg_has("bad magic 0x7f454c46");
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__wrong_version(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 2);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), -EINVAL);
	assert_errmsg_has("jitdump version 2, and tally reads version 1");
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__short_header(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, 39), -EINVAL);
	assert_errmsg_has("too short for a jitdump header");
	/* a header that claims to be longer than the file */
	d.b[8] = 0xff;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), -EINVAL);
	assert_errmsg_has("header size");
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__truncated_record(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	good(&d);
	size_t cut = d.n;
	load(&d, 0x3000, 3, "lost", code16, sizeof(code16));
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n - 5), 0);
	assert_int_equal(jd.nfuncs, 2);
	assert_non_null(jd.warning);
	char want[64];
	snprintf(want, sizeof(want), "truncated record at byte %zu", cut);
	assert_str_has(jd.warning, want);
	tally_jitdump_release(&jd);
	/* cut inside a record header */
	assert_int_equal(tally_jitdump_parse(&jd, d.b, cut + 7), 0);
	assert_int_equal(jd.nfuncs, 2);
	assert_str_has(jd.warning, "a record header needs 16");
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__damaged_record(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	size_t bad_at = d.n;
	/* a load whose code size runs past its record */
	rec_head(&d, 0, 16 + 40 + 4);
	put32(&d, 1);
	put32(&d, 1);
	put64(&d, 0x5000);
	put64(&d, 0x5000);
	put64(&d, 1000);
	put64(&d, 9);
	put(&d, "bad", 4);
	load(&d, 0x6000, 10, "fine", code16, 8);
	/* a record smaller than its own header ends the file */
	rec_head(&d, 0, 8);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	assert_int_equal(jd.nfuncs, 1);
	assert_string_equal(jd.funcs[0].name, "fine");
	assert_non_null(jd.warning);
	/* both problems, the skipped record first */
	char want[80];
	snprintf(want, sizeof(want), "1 damaged record skipped (the first at byte %zu)", bad_at);
	assert_str_has(jd.warning, want);
	snprintf(want, sizeof(want), "record at byte %zu has size 8", d.n - 16);
	assert_str_has(jd.warning, want);
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__damaged_record_counted(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	size_t bad_at = d.n;
	rec_head(&d, 2, 16 + 16 + 4); /* debug info with one entry cut short */
	put64(&d, 0x1000);
	put64(&d, 1);
	put32(&d, 0);
	load(&d, 0x1000, 1, "named", code16, 4);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	assert_int_equal(jd.nfuncs, 1);
	assert_int_equal(jd.funcs[0].nlines, 0);
	char want[80];
	snprintf(want, sizeof(want), "1 damaged record skipped (the first at byte %zu)", bad_at);
	assert_str_has(jd.warning, want);
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__move(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	debug(&d, 0x1000, offs, lines, 3, "m.js");
	load(&d, 0x1000, 5, "mover", code16, sizeof(code16));
	move(&d, 0x1000, 0x9000, sizeof(code16), 5);
	move(&d, 0x4444, 0xa000, sizeof(code16), 77); /* of nothing: ignored */
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	assert_int_equal(jd.nfuncs, 2);
	const struct tally_jit_func *f = tally_jitdump_find(&jd, 0x9009);
	assert_non_null(f);
	assert_string_equal(f->name, "mover");
	assert_memory_equal(f->code, code16, sizeof(code16));
	assert_int_equal(tally_jitdump_line(f, 0x9009)->line, 12);
	assert_int_equal(tally_jitdump_line(f, 0x9005)->line, 11);
	assert_non_null(tally_jitdump_find(&jd, 0x1000));
	assert_null(jd.warning);
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__reused_memory(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	load(&d, 0x1000, 1, "old", code16, 16);
	load(&d, 0x1008, 2, "new", code16, 16);
	load(&d, 0x0ff8, 3, "older-looking", code16, 4);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	/* the last loaded names the memory: "old" overlaps "new" and is gone */
	assert_int_equal(jd.nfuncs, 2);
	assert_null(tally_jitdump_find(&jd, 0x1000));
	assert_string_equal(tally_jitdump_find(&jd, 0x1010)->name, "new");
	assert_string_equal(tally_jitdump_find(&jd, 0x0ff9)->name, "older-looking");
	tally_jitdump_release(&jd);
	dump_free(&d);
}

static void test_jitdump__every_truncation(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	good(&d);
	move(&d, 0x1000, 0x8000, 16, 1);
	/* no cut may crash or read past the end (ASan checks the latter) */
	for (size_t n = 0; n <= d.n; n++) {
		unsigned char *copy = xmalloc(n + 1);
		memcpy(copy, d.b, n);
		struct tally_jitdump jd;
		int r = tally_jitdump_parse(&jd, copy, n);
		if (n < 40)
			assert_int_equal(r, -EINVAL);
		else
			assert_int_equal(r, 0);
		bool boundary = n <= 40 || n == d.n;
		for (size_t k = 0; k < d.nmarks; k++)
			boundary = boundary || n == d.marks[k];
		if (boundary)
			assert_null(jd.warning);
		else
			assert_non_null(jd.warning);
		tally_jitdump_release(&jd);
		free(copy);
	}
	dump_free(&d);
}

static void test_jitdump__copy_round_trip(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	debug(&d, 0x1000, offs, lines, 3, "dir with space/a\tb.js");
	load(&d, 0x1000, 1, "name with\nnewline", code16, sizeof(code16));
	load(&d, 0x2000, 2, "no code", code16, 0);
	load(&d, 0x3000, 3, "unsampled", code16, 4);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	tally_jitdump_find(&jd, 0x1000)->keep = true;
	tally_jitdump_find(&jd, 0x2000)->keep = true;
	struct strbuf sb = STRBUF_INIT;
	tally_jitdump_format(&jd, false, "/tmp/jit-4242.dump", &sb);
	assert_null(strstr(sb.buf, "unsampled"));
	struct tally_jitdump back;
	assert_int_equal(tally_jitdump_read_copy(&back, sb.buf, "copy"), 0);
	assert_int_equal(back.elf_mach, 62);
	assert_int_equal(back.pid, 4242);
	assert_int_equal(back.nfuncs, 2);
	const struct tally_jit_func *f = tally_jitdump_find(&back, 0x100f);
	assert_string_equal(f->name, "name with\nnewline");
	assert_memory_equal(f->code, code16, 16);
	assert_int_equal(f->nlines, 3);
	assert_int_equal(tally_jitdump_line(f, 0x1006)->line, 11);
	assert_string_equal(back.files[tally_jitdump_line(f, 0x1006)->file],
			    "dir with space/a\tb.js");
	assert_null(tally_jitdump_find(&back, 0x2000)->code);
	tally_jitdump_release(&back);
	tally_jitdump_release(&jd);
	strbuf_release(&sb);
	dump_free(&d);
}

/* A damaged line of a copy costs what depends on it only, and the warning says
 * which line and what was wrong with it. */
static void test_jitdump__copy_damaged(void **state)
{
	(void)state;
	static const struct {
		const char *text, *why;
		size_t nfuncs;   /* functions read */
		bool f_lines;    /* 'f' (at 0x1000) keeps its line table */
		bool f_code;     /* and its code */
	} cases[] = {
		{ "source: x\n\nfunc 1000 2 1 f\nline 1000 3 0 a.js\ncode 0000\nfunc 2000 2 2 g\ncode 00\n",
		  "line 7: the code of the function at 0x2000 has 2 hex digits, its size 0x2 needs 4: its code is dropped",
		  2, true, true },
		{ "source: x\n\nfunc 1000 2 1 f\ncode zz00\nfunc 2000 2 2 g\n",
		  "line 4: the code of the function at 0x1000 is not hex digits", 2, false, false },
		{ "source: x\n\nline 1000 3 0 a.js\nfunc 1000 2 1 f\n",
		  "line 3: a 'line' line before any 'func' line", 1, false, false },
		{ "source: x\n\nfunc 1000 2 1\nline 1000 3 0 a.js\ncode 0000\nfunc 2000 2 2 g\n",
		  "line 3: expected 'func ADDR SIZE INDEX NAME'", 1, false, false },
		{ "source: x\n\nfunc 1000 2 1 f\nline 1000 x 0 a\nline 1001 4 0 a\ncode 0000\n",
		  "line 4: expected 'line ADDR LINE DISCRIM FILE' (hex, decimal, decimal, a file name): the line table of the function at 0x1000 is dropped",
		  1, false, true },
		{ "source: x\nwhat: is this\n\nfunc 1000 2 1 f\nline 1000 3 0 a.js\ncode 0000\n",
		  "line 2: expected a header line", 1, true, true },
		{ "source: x\n\nfunc 1000 2 1 f\nline 1000 3 0 a.js\ncode 0000\nfunc ffffffffffffffff 10 2 g\n",
		  "line 6: size 0x10 at 0xffffffffffffffff is over 256 MiB or past the end", 1,
		  true, true },
		{ "source: x\n\nfunc 1000 2 1 f\nline 1000 3 0 a.js\ncode 0000\ncode 0000\nwhat 1\n",
		  "line 6: a second 'code' line for the function at 0x1000 (the first is kept) (2 damaged lines in all;",
		  1, true, true },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct tally_jitdump jd;
		assert_int_equal(tally_jitdump_read_copy(&jd, cases[i].text, "jit/jitdump-1-x.txt"),
				 0);
		if (jd.nfuncs != cases[i].nfuncs)
			fail_msg("case %zu: %zu functions read, expected %zu", i, jd.nfuncs,
				 cases[i].nfuncs);
		assert_non_null(jd.warning);
		assert_str_has(jd.warning, "'jit/jitdump-1-x.txt' ");
		assert_str_has(jd.warning, cases[i].why);
		assert_str_has(jd.warning, "the rest of the copy is used");
		const struct tally_jit_func *f = tally_jitdump_find(&jd, 0x1000);
		if (cases[i].f_lines || cases[i].f_code)
			assert_non_null(f);
		if (f) {
			assert_string_equal(f->name, "f");
			assert_int_equal(f->nlines, cases[i].f_lines ? 1 : 0);
			assert_true((f->code != NULL) == cases[i].f_code);
		}
		tally_jitdump_release(&jd);
	}
	/* a NUL byte costs its line only: the reader is given the length */
	static const char nul[] =
		"source: x\n\nfunc 1000 2 1 f\ncode 0000\nfunc 2000 2 2 g\0h\nfunc 3000 2 3 k\n";
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_read_buf(&jd, nul, sizeof(nul) - 1, "c"), 0);
	assert_int_equal(jd.nfuncs, 2);
	assert_string_equal(tally_jitdump_find(&jd, 0x3000)->name, "k");
	assert_null(tally_jitdump_find(&jd, 0x2000));
	assert_str_has(jd.warning, "'c' line 5: a 'func' line holds a NUL byte");
	tally_jitdump_release(&jd);
	/* a whole copy without damage: no warning */
	assert_int_equal(
		tally_jitdump_read_copy(&jd, "source: x\n\nfunc 1000 2 1 f\ncode 0000\n", "c"), 0);
	assert_null(jd.warning);
	tally_jitdump_release(&jd);
}

/* A JIT_CODE_LOAD with an empty name costs that record only, and what the
 * parser keeps always reads back from the copy tally writes. */
static void test_jitdump__empty_name(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	load(&d, 0x1000, 1, "before", code16, 4);
	size_t bad_at = d.n;
	load(&d, 0x2000, 2, "", code16, 4);
	load(&d, 0x3000, 3, "after", code16, 4);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	assert_int_equal(jd.nfuncs, 2);
	assert_null(tally_jitdump_find(&jd, 0x2000));
	char want[80];
	snprintf(want, sizeof(want), "1 damaged record skipped (the first at byte %zu)", bad_at);
	assert_str_has(jd.warning, want);
	struct strbuf sb = STRBUF_INIT;
	tally_jitdump_format(&jd, true, "/tmp/jit-1.dump", &sb);
	struct tally_jitdump back;
	assert_int_equal(tally_jitdump_read_buf(&back, sb.buf, sb.len, "copy"), 0);
	assert_null(back.warning);
	assert_int_equal(back.nfuncs, 2);
	assert_string_equal(tally_jitdump_find(&back, 0x1000)->name, "before");
	assert_string_equal(tally_jitdump_find(&back, 0x3000)->name, "after");
	tally_jitdump_release(&back);
	tally_jitdump_release(&jd);
	strbuf_release(&sb);
	dump_free(&d);
}

/* Names and file names with the bytes runtimes really write (node's debug
 * entries hold garbage): control bytes, invalid UTF-8, C1 controls, newlines,
 * backslashes, spaces; the copy is readable text, one line per entry, and
 * reads back byte for byte. */
static void test_jitdump__copy_hostile_names(void **state)
{
	(void)state;
	static const char *names[] = {
		"ctl\x01\x02\x1b[31mred\x7f",      /* control bytes, a terminal escape */
		"bad utf8 \xc5z \x9c\x1e\x7f \xff", /* what node wrote */
		"c1 \xc2\x9b\063\061m and overlong \xc0\xaf and surrogate \xed\xa0\x80",
		"good utf8 f\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80",
		"new\nline\r\tand \\x41 \\ back\\slash",
		"  leading and trailing spaces  ",
		"\\x00 is not a byte",
	};
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		uint64_t addr = 0x1000 * (i + 1);
		debug(&d, addr, offs, lines, 3, names[ARRAY_SIZE(names) - 1 - i]);
		load(&d, addr, i + 1, names[i], code16, sizeof(code16));
	}
	/* a debug entry with an empty file name (node's garbage) is not kept */
	uint32_t one = 0, l7 = 7;
	debug(&d, 0x9000, &one, &l7, 1, "");
	load(&d, 0x9000, 99, "no file", code16, 4);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	assert_null(jd.warning);
	assert_int_equal(jd.nfuncs, ARRAY_SIZE(names) + 1);
	assert_int_equal(tally_jitdump_find(&jd, 0x9000)->nlines, 0);
	struct strbuf sb = STRBUF_INIT;
	tally_jitdump_format(&jd, true, "/tmp/dir with\nnewline/jit-1.dump", &sb);
	/* text: no control byte but the line ends, every line a known kind */
	size_t nlines = 0;
	for (size_t k = 0; k < sb.len; k++) {
		unsigned char c = (unsigned char)sb.buf[k];
		if ((c < 0x20 && c != '\n') || c == 0x7f)
			fail_msg("the copy holds byte 0x%02x at %zu: %s", c, k, sb.buf);
		nlines += c == '\n';
	}
	assert_int_equal(nlines, 4 + 1 + ARRAY_SIZE(names) * (1 + 3 + 1) + 2);
	/* valid UTF-8 stays as it is, the rest is escaped */
	assert_non_null(
		strstr(sb.buf, "good utf8 f\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80"));
	assert_non_null(strstr(sb.buf, "bad utf8 \\xc5z \\x9c\\x1e\\x7f \\xff"));
	assert_non_null(strstr(
		sb.buf, "c1 \\xc2\\x9b31m and overlong \\xc0\\xaf and surrogate \\xed\\xa0\\x80"));
	assert_non_null(strstr(sb.buf, "new\\nline\\r\\tand \\\\x41 \\\\ back\\\\slash"));
	struct tally_jitdump back;
	assert_int_equal(tally_jitdump_read_buf(&back, sb.buf, sb.len, "copy"), 0);
	if (back.warning)
		fail_msg("the copy tally wrote does not read back: %s", back.warning);
	assert_int_equal(back.nfuncs, jd.nfuncs);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		const struct tally_jit_func *f = tally_jitdump_find(&back, 0x1000 * (i + 1));
		assert_non_null(f);
		assert_string_equal(f->name, names[i]);
		assert_int_equal(f->nlines, 3);
		assert_string_equal(back.files[f->lines[0].file], names[ARRAY_SIZE(names) - 1 - i]);
		assert_memory_equal(f->code, code16, sizeof(code16));
	}
	tally_jitdump_release(&back);
	/* what older versions wrote (only \\ \n \t \r escaped) reads the same */
	const char *old =
		"source: x\n\nfunc 1000 2 1 a\\\\x41\\n\\tb\nline 1000 3 0 d\\\\x\\q.js\nline 1001 4 0 \n";
	assert_int_equal(tally_jitdump_read_copy(&back, old, "old"), 0);
	assert_null(back.warning);
	assert_string_equal(back.funcs[0].name, "a\\x41\n\tb");
	assert_int_equal(back.funcs[0].nlines, 1);
	assert_string_equal(back.files[back.funcs[0].lines[0].file], "d\\x\\q.js");
	tally_jitdump_release(&back);
	tally_jitdump_release(&jd);
	strbuf_release(&sb);
	dump_free(&d);
}

/* What parsing keeps, the copy keeps: parse, write the copy, read it back,
 * over thousands of damaged variants of a dump (bytes flipped, cut short),
 * and the two agree field by field, with no warning. */
static void check_same(const struct tally_jitdump *a, const struct tally_jitdump *b,
		       const char *ctx)
{
	if (b->warning)
		fail_msg("%s: the copy tally wrote does not read back: %s", ctx, b->warning);
	if (a->nfuncs != b->nfuncs || a->elf_mach != b->elf_mach || a->pid != b->pid)
		fail_msg("%s: %zu functions (mach %u, pid %u) became %zu (%u, %u)", ctx, a->nfuncs,
			 a->elf_mach, a->pid, b->nfuncs, b->elf_mach, b->pid);
	for (size_t i = 0; i < a->nfuncs; i++) {
		const struct tally_jit_func *x = &a->funcs[i], *y = &b->funcs[i];
		if (x->addr != y->addr || x->size != y->size || x->index != y->index ||
		    strcmp(x->name, y->name) || x->nlines != y->nlines || !x->code != !y->code ||
		    (x->code && memcmp(x->code, y->code, x->size)))
			fail_msg(
				"%s: function %zu differs: %#llx+%llu '%s' (%zu lines) became %#llx+%llu '%s' (%zu lines)",
				ctx, i, (unsigned long long)x->addr, (unsigned long long)x->size,
				x->name, x->nlines, (unsigned long long)y->addr,
				(unsigned long long)y->size, y->name, y->nlines);
		for (size_t k = 0; k < x->nlines; k++) {
			const struct tally_jit_line *l = &x->lines[k], *m = &y->lines[k];
			if (l->addr != m->addr || l->line != m->line || l->discrim != m->discrim ||
			    strcmp(a->files[l->file], b->files[m->file]))
				fail_msg("%s: function %zu line %zu differs", ctx, i, k);
		}
	}
}

static void test_jitdump__copy_reads_back(void **state)
{
	(void)state;
	struct dump d = { .n = 0 };
	good(&d);
	debug(&d, 0x4000, offs, lines, 3, "w\x01rd \xff.js");
	load(&d, 0x4000, 4, "\x1b[2Jodd \xc3\xa9\\", code16, sizeof(code16));
	move(&d, 0x4000, 0x5000, sizeof(code16), 4);
	uint32_t same[] = { 4, 4, 9 }, ls[] = { 1, 2, 3 };
	debug(&d, 0x6000, same, ls, 3, "same.js"); /* three entries at one address */
	load(&d, 0x6000, 6, "same", code16, sizeof(code16));
	load(&d, 0x1008, 7, "reuses hot loop", code16, 2);
	uint64_t seed = 99;
	unsigned char *m = xmalloc(d.n);
	for (int round = 0; round < 3000; round++) {
		memcpy(m, d.b, d.n);
		size_t n = d.n;
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		int flips = 1 + (int)(seed >> 61);
		for (int k = 0; k < flips && round; k++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			size_t at = 40 + (size_t)(seed >> 33) % (d.n - 40);
			m[at] ^= (unsigned char)(1u << ((seed >> 20) & 7));
		}
		if (round % 7 == 3)
			n = 40 + (size_t)(seed >> 40) % (d.n - 40);
		struct tally_jitdump jd, back;
		if (tally_jitdump_parse(&jd, m, n)) {
			tally_jitdump_release(&jd);
			continue;
		}
		if (!round)
			assert_int_equal(jd.nfuncs, 5); /* the hot loop is reused */
		struct strbuf sb = STRBUF_INIT;
		tally_jitdump_format(&jd, true, "src", &sb);
		assert_int_equal(tally_jitdump_read_buf(&back, sb.buf, sb.len, "copy"), 0);
		char ctx[32];
		snprintf(ctx, sizeof(ctx), "round %d", round);
		check_same(&jd, &back, ctx);
		tally_jitdump_release(&back);
		tally_jitdump_release(&jd);
		strbuf_release(&sb);
	}
	free(m);
	/* of entries at one address the last one wins, in the dump and its copy */
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	const struct tally_jit_func *f = tally_jitdump_find(&jd, 0x6004);
	assert_int_equal(tally_jitdump_line(f, 0x6004)->line, 2);
	assert_int_equal(tally_jitdump_line(f, 0x6009)->line, 3);
	tally_jitdump_release(&jd);
	dump_free(&d);
}

/* The escaping itself: what it writes, and its inverse. */
static void test_jitdump__escape(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "plain name", "plain name" },
		{ "a\\b", "a\\\\b" },
		{ "\x01\x1f\x7f", "\\x01\\x1f\\x7f" },
		{ "\xe2\x82", "\\xe2\\x82" },          /* cut short */
		{ "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80" }, /* past U+10FFFF */
		{ "\xc2\xa0", "\xc2\xa0" },             /* U+00A0: printable */
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct strbuf sb = STRBUF_INIT;
		tally_jit_escape(&sb, cases[i].in);
		assert_string_equal(sb.buf ? sb.buf : "", cases[i].out);
		tally_unescape_bytes(sb.buf);
		assert_string_equal(sb.buf, cases[i].in);
		strbuf_release(&sb);
	}
	char s[] = "\\x4G \\x4 \\x41\\X41\\";
	tally_unescape_bytes(s);
	assert_string_equal(s, "\\x4G \\x4 A\\X41\\");
}

/* A dump of many JIT_CODE_MOVE records of one big function: each would copy
 * its code. What the parse keeps is bounded by the dump's budget, the rest is
 * counted and said, and the moves within it are all there. */
static void test_jitdump__move_budget(void **state)
{
	(void)state;
	enum { BIG = 256 << 10, MOVES = 2000 };
	unsigned char *code = xcalloc(BIG, 1);
	struct dump d = { .n = 0 };
	header(&d, 0x4A695444u, 1);
	load(&d, 0x10000000, 7, "big", code, BIG);
	for (size_t i = 0; i < MOVES; i++)
		move(&d, 0x10000000, 0x20000000 + (uint64_t)i * BIG, BIG, 7);
	struct tally_jitdump jd;
	assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
	size_t budget = tally_jitdump_budget(d.n);
	assert_int_equal(budget, 4 * d.n + (1 << 20));
	assert_true(jd.bytes <= budget);
	/* each copy costs about BIG: as many as fit, the rest dropped */
	size_t kept = jd.nfuncs - 1;
	assert_true(kept >= budget / BIG - 3 && kept <= budget / BIG);
	assert_int_equal(jd.dropped, MOVES - kept);
	assert_int_equal(jd.dropped_moves, MOVES - kept);
	char want[120];
	snprintf(
		want, sizeof(want),
		"%zu records dropped (%zu JIT_CODE_MOVE): they would have taken the dump past its memory budget of",
		MOVES - kept, MOVES - kept);
	assert_str_has(jd.warning, want);
	/* the moves that were kept are the first ones, with the code */
	for (size_t i = 0; i < kept; i++) {
		const struct tally_jit_func *f =
			tally_jitdump_find(&jd, 0x20000000 + (uint64_t)i * BIG + 5);
		assert_non_null(f);
		assert_string_equal(f->name, "big");
		assert_non_null(f->code);
	}
	assert_null(tally_jitdump_find(&jd, 0x20000000 + (uint64_t)kept * BIG));
	tally_jitdump_release(&jd);
	/* with a budget of its own: nothing but what fits */
	assert_int_equal(tally_jitdump_parse_budget(&jd, d.b, d.n, BIG / 2), 0);
	assert_int_equal(jd.nfuncs, 0);
	assert_int_equal(jd.dropped, 1); /* the load; its moves then find nothing to move */
	tally_jitdump_release(&jd);
	free(code);
	dump_free(&d);
}

/* The original semantics of finishing, pair by pair: of two overlapping
 * functions the one loaded last is kept. The reference the fast version is
 * checked against. */
static void reference_finish(const uint64_t *addr, const uint64_t *size, size_t n, bool *keep)
{
	for (size_t i = 0; i < n; i++)
		keep[i] = true;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			if (i == j)
				continue;
			uint64_t ei = addr[i] + (size[i] ? size[i] : 1),
				 ej = addr[j] + (size[j] ? size[j] : 1);
			if (addr[i] < ej && addr[j] < ei)
				keep[i < j ? i : j] = false; /* load order is index order */
		}
}

static void test_jitdump__overlaps_like_reference(void **state)
{
	(void)state;
	uint64_t seed = 12345;
	for (int round = 0; round < 200; round++) {
		size_t n = 1 + (size_t)(round % 40);
		uint64_t addr[40], size[40];
		bool keep[40];
		struct dump d = { .n = 0 };
		header(&d, 0x4A695444u, 1);
		for (size_t i = 0; i < n; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			addr[i] = 0x1000 + (seed >> 33) % 200;
			size[i] = (seed >> 20) % (round % 3 ? 12 : 60);
			static const unsigned char zero[64];
			char name[16];
			snprintf(name, sizeof(name), "f%zu", i);
			load(&d, addr[i], i, name, zero, size[i]);
		}
		reference_finish(addr, size, n, keep);
		struct tally_jitdump jd;
		assert_int_equal(tally_jitdump_parse(&jd, d.b, d.n), 0);
		size_t want = 0;
		for (size_t i = 0; i < n; i++)
			want += keep[i];
		if (jd.nfuncs != want)
			fail_msg("round %d: %zu functions kept, the pairwise rule keeps %zu", round,
				 jd.nfuncs, want);
		for (size_t k = 0; k < jd.nfuncs; k++) {
			size_t i = (size_t)atoi(jd.funcs[k].name + 1);
			assert_true(keep[i]);
			assert_int_equal(jd.funcs[k].addr, addr[i]);
		}
		tally_jitdump_release(&jd);
		dump_free(&d);
	}
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The CPU time of one parse of a dump (text NULL) or a copy. */
static double parse_time(const struct dump *d, const struct strbuf *text, size_t want_funcs)
{
	struct tally_jitdump jd;
	double t0 = cpu_now();
	if (text)
		assert_int_equal(tally_jitdump_read_buf(&jd, text->buf, text->len, "copy"), 0);
	else
		assert_int_equal(tally_jitdump_parse(&jd, d->b, d->n), 0);
	double t = cpu_now() - t0;
	assert_int_equal(jd.nfuncs, want_funcs);
	tally_jitdump_release(&jd);
	return t;
}

/* Reading scales as n log n, not n^2: a copy of n functions that all overlap
 * (finishing compared each with every later one that starts inside it), and a
 * dump of n moves of one function (each looked for its source among all the
 * functions before it): four times the entries take well under sixteen times the
 * time (n log n gives about 4.5). Small enough to stay in the caches, whose
 * sizes would otherwise weigh on the ratio. */
static void test_jitdump__scales(void **state)
{
	(void)state;
	enum { N = 5000 };
	/* the memory freed stays in the heap: the best of five runs does not count
	 * the kernel handing pages over again */
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	/* the least CPU time of seven parses of each size, the sizes taken in
	 * turn: a burst of other work on a shared machine (the sanitizer suite
	 * runs tests side by side) falls on both alike */
	double t[2][2];
	for (int kind = 0; kind < 2; kind++) {
		struct dump d[2] = { { .n = 0 }, { .n = 0 } };
		struct strbuf text[2] = { STRBUF_INIT, STRBUF_INIT };
		for (int k = 0; k < 2; k++) {
			size_t n = (size_t)N << (2 * k);
			if (kind == 0) {
				/* each function covers all that follow: the last one is kept */
				strbuf_addstr(&text[k], "source: x\n\n");
				for (size_t i = 0; i < n; i++)
					strbuf_addf(&text[k], "func %zx %zx %zu f%zu\n",
						    0x100000 + i, n, i, i);
			} else {
				header(&d[k], 0x4A695444u, 1);
				load(&d[k], 0x100000, 1, "moved", code16, 16);
				for (size_t i = 0; i < n; i++)
					move(&d[k], 0x100000, 0x200000 + 16 * (uint64_t)i, 16, 1);
			}
			t[kind][k] = 1e9;
		}
		for (int rep = 0; rep < 7; rep++)
			for (int k = 0; k < 2; k++) {
				size_t n = (size_t)N << (2 * k);
				double s = parse_time(&d[k], kind == 0 ? &text[k] : NULL,
						      kind == 0 ? 1 : n + 1);
				t[kind][k] = s < t[kind][k] ? s : t[kind][k];
			}
		for (int k = 0; k < 2; k++) {
			strbuf_release(&text[k]);
			dump_free(&d[k]);
		}
	}
	for (int kind = 0; kind < 2; kind++) {
		double r = t[kind][1] / (t[kind][0] > 1e-6 ? t[kind][0] : 1e-6);
		printf("# %s: %d entries %.4f s, %d entries %.4f s: x%.2f\n",
		       kind ? "moves" : "overlaps", N, t[kind][0], 4 * N, t[kind][1], r);
		if (r >= 10.0)
			fail_msg(
				"%s: four times the entries took %.2f times the time (n^2 gives 16)",
				kind ? "moves" : "overlaps", r);
	}
}

/* Perf maps: what is a symbol, what is a malformed line. */
static void test_jitdump__perfmap_parse(void **state)
{
	(void)state;
	static const char map[] = "7f0000001000 40 jit_one\n"
				  "0x7f0000002000\t0x10\tname with  spaces \n"
				  "\n"
				  "7f0000003000 0 zero size\n"
				  "no hex 10 x\n"
				  "7f0000004000 10\n"
				  "7f0000004000 10 \n"
				  "7f0000005000 -1 minus\n"
				  "1ffffffffffffffff 1 too wide\n"
				  "ffffffffffffffff 2 wraps\n"
				  "7f0000006000 10 nul\0inside\n"
				  "0000000000000000000000007f0000007000 8 leading zeros\n"
				  "7f0000008000 8 last, no newline";
	struct tally_perfmap_sym *s;
	size_t n, bad;
	assert_int_equal(tally_perfmap_parse(map, sizeof(map) - 1, &s, &n, &bad), 0);
	assert_int_equal(n, 5);
	assert_int_equal(bad, 7);
	static const struct {
		uint64_t start, size;
		const char *name;
	} want[] = {
		{ 0x7f0000001000, 0x40, "jit_one" },
		{ 0x7f0000002000, 0x10, "name with  spaces " },
		{ 0x7f0000003000, 0, "zero size" },
		{ 0x7f0000007000, 8, "leading zeros" },
		{ 0x7f0000008000, 8, "last, no newline" },
	};
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(s[i].start, want[i].start);
		assert_int_equal(s[i].size, want[i].size);
		assert_int_equal(s[i].name_len, strlen(want[i].name));
		assert_memory_equal(map + s[i].name, want[i].name, s[i].name_len);
	}
	free(s);
	assert_int_equal(tally_perfmap_parse("", 0, &s, &n, &bad), 0);
	assert_int_equal(n, 0);
	assert_int_equal(bad, 0);
	assert_null(s);
}

/* What was wrong with the first malformed line, and its number. */
static void test_jitdump__perfmap_why(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
		{ "7f00 10 ok\nnext.js:1:10\n7f10 10 ok2\n",
		  "line 2: START is not a hex number of at most 16 digits, in 'next.js:1:10' (expected 'START SIZE NAME')" },
		{ "\n7f00 zz name\n",
		  "line 2: SIZE is not a hex number of at most 16 digits, in '7f00 zz name'" },
		{ "7f00 10\n", "line 1: no NAME after SIZE" },
		{ "7f00\tname\n", "line 1: SIZE is not a hex number" },
		{ "7f00 10 \x1b[31m\n7f00\n", "line 2: no space or tab after START, in '7f00'" },
		{ "ffffffffffffffff 2 wraps\n",
		  "line 1: START + SIZE is past the end of the address space" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tally_perfmap_sym *s;
		size_t n, bad;
		struct strbuf why = STRBUF_INIT;
		assert_int_equal(tally_perfmap_parse_why(cases[i][0], strlen(cases[i][0]), &s, &n,
							 &bad, &why),
				 0);
		assert_true(bad >= 1);
		assert_str_has(why.buf, cases[i][1]);
		free(s);
		strbuf_release(&why);
	}
	/* a good map says nothing */
	struct tally_perfmap_sym *s;
	size_t n, bad;
	struct strbuf why = STRBUF_INIT;
	assert_int_equal(tally_perfmap_parse_why("7f00 10 a\n", 10, &s, &n, &bad, &why), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(why.len, 0);
	free(s);
	strbuf_release(&why);
}

/* JIT names fit to print: control bytes and bytes that are not UTF-8 escaped,
 * printable names (UTF-8 included) left alone. */
static void test_jitdump__display_name(void **state)
{
	(void)state;
	assert_null(tally_jit_display_name("JS:*hot /tmp/app.js:1:10"));
	assert_null(tally_jit_display_name("JS:*h\xc3\xa9t path\\with\\backslash"));
	char *e = tally_jit_display_name("JS:*hot /tmp/odd\x1b[31m\x01\nnext.js");
	assert_non_null(e);
	assert_string_equal(e, "JS:*hot /tmp/odd\\x1b[31m\\x01\\nnext.js");
	free(e);
	e = tally_jit_display_name("bad \xff utf8 \\");
	assert_non_null(e);
	assert_string_equal(e, "bad \\xff utf8 \\\\");
	free(e);
}

/* ---- record time: tally_jitdump_scan over a dump as it grows ---- */

static void unwinding(struct dump *d, const unsigned char *data, size_t len, size_t hdr)
{
	size_t pad = (8 - (16 + 24 + len) % 8) % 8;
	rec_head(d, 4, (uint32_t)(16 + 24 + len + pad));
	put64(d, len);
	put64(d, hdr);
	put64(d, (len + 15) & ~(size_t)15);
	put(d, data, len);
	for (size_t i = 0; i < pad; i++)
		put(d, "", 1);
}

struct seen {
	struct tally_jit_code_event ev[16];
	unsigned char unwind[16][64];
	size_t n;
};

static void on_ev(void *arg, const struct tally_jit_code_event *ev)
{
	struct seen *s = arg;
	assert_true(s->n < ARRAY_SIZE(s->ev));
	s->ev[s->n] = *ev;
	if (ev->unwind) {
		assert_true(ev->unwind_len <= sizeof(s->unwind[0]));
		memcpy(s->unwind[s->n], ev->unwind, ev->unwind_len);
		s->ev[s->n].unwind = s->unwind[s->n];
	}
	s->n++;
}

/* Reads the first file_len bytes of d as the recorder does: from the
 * cursor, want bytes at a time (more when the scan asks for more). */
static void scan_prefix(struct tally_jitdump_cursor *cur, const struct dump *d, size_t file_len,
			size_t want, struct seen *s)
{
	while (!cur->done && cur->off < file_len) {
		size_t n = file_len - cur->off < want ? file_len - cur->off : want;
		uint64_t before = cur->off;
		size_t need = tally_jitdump_scan(cur, d->b + cur->off, n, file_len, on_ev, s);
		if (cur->off != before)
			continue;
		if (need > n && n == want) {
			want = need;
			continue;
		}
		break;
	}
}

static const unsigned char eh[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
				    13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24 };

static void scan_dump(struct dump *d)
{
	header(d, 0x4A695444u, 1);
	unwinding(d, eh, sizeof(eh), 20);
	debug(d, 0x1000, offs, lines, 3, "prog.js");
	load(d, 0x1000, 1, "hot loop", code16, sizeof(code16));
	load(d, 0x2000, 2, "cold", code16, 4);
	move(d, 0x1000, 0x3000, sizeof(code16), 1);
	unwinding(d, eh, 20, 20); /* only a header: no .eh_frame, not kept */
	load(d, 0x4000, 3, "empty unwind", code16, 8);
	rec_head(d, 77, 16);
}

static void check_scan(const struct seen *s)
{
	assert_int_equal(s->n, 4);
	assert_false(s->ev[0].move);
	assert_int_equal(s->ev[0].addr, 0x1000);
	assert_int_equal(s->ev[0].size, sizeof(code16));
	assert_int_equal(s->ev[0].index, 1);
	assert_non_null(s->ev[0].unwind);
	assert_int_equal(s->ev[0].unwind_len, sizeof(eh));
	assert_int_equal(s->ev[0].eh_frame_hdr_len, 20);
	assert_memory_equal(s->ev[0].unwind, eh, sizeof(eh));
	/* the unwinding info was the first load's only */
	assert_int_equal(s->ev[1].addr, 0x2000);
	assert_null(s->ev[1].unwind);
	assert_true(s->ev[2].move);
	assert_int_equal(s->ev[2].old_addr, 0x1000);
	assert_int_equal(s->ev[2].addr, 0x3000);
	assert_int_equal(s->ev[3].addr, 0x4000);
	assert_null(s->ev[3].unwind);
}

static void test_jitdump__scan_whole(void **state)
{
	(void)state;
	struct dump d = { 0 };
	scan_dump(&d);
	struct tally_jitdump_cursor cur = { 0 };
	struct seen s = { .n = 0 };
	scan_prefix(&cur, &d, d.n, 1 << 16, &s);
	check_scan(&s);
	assert_int_equal(cur.off, d.n);
	assert_int_equal(cur.elf_mach, 62);
	tally_jitdump_cursor_release(&cur);
	dump_free(&d);
}

/* The runtime writes as the recorder reads: every prefix of the file, read
 * a few bytes at a time, gives each record once, whole, in order. */
static void test_jitdump__scan_growing(void **state)
{
	(void)state;
	struct dump d = { 0 };
	scan_dump(&d);
	for (size_t want = 1; want <= 64; want = want * 2 + 1) {
		struct tally_jitdump_cursor cur = { 0 };
		struct seen s = { .n = 0 };
		for (size_t len = 0; len <= d.n; len++)
			scan_prefix(&cur, &d, len, want, &s);
		check_scan(&s);
		assert_int_equal(cur.off, d.n);
		tally_jitdump_cursor_release(&cur);
	}
	dump_free(&d);
}

static void test_jitdump__scan_damaged(void **state)
{
	(void)state;
	struct dump d = { 0 };
	header(&d, 0x12345678u, 1);
	struct tally_jitdump_cursor cur = { 0 };
	struct seen s = { .n = 0 };
	scan_prefix(&cur, &d, d.n, 4096, &s);
	assert_true(cur.done);
	dump_free(&d);
	/* a record shorter than its own header ends the reading; JIT_CODE_CLOSE too */
	d = (struct dump){ 0 };
	header(&d, 0x4A695444u, 1);
	load(&d, 0x1000, 1, "f", code16, 4);
	rec_head(&d, 0, 8);
	load(&d, 0x2000, 2, "g", code16, 4);
	cur = (struct tally_jitdump_cursor){ 0 };
	s.n = 0;
	scan_prefix(&cur, &d, d.n, 4096, &s);
	assert_true(cur.done);
	assert_int_equal(s.n, 1);
	dump_free(&d);
	d = (struct dump){ 0 };
	header(&d, 0x4A695444u, 1);
	rec_head(&d, 3, 16);
	load(&d, 0x2000, 2, "g", code16, 4);
	cur = (struct tally_jitdump_cursor){ 0 };
	s.n = 0;
	scan_prefix(&cur, &d, d.n, 4096, &s);
	assert_true(cur.done);
	assert_int_equal(s.n, 0);
	/* unwinding data that claims more than its record: not kept */
	dump_free(&d);
	d = (struct dump){ 0 };
	header(&d, 0x4A695444u, 1);
	rec_head(&d, 4, 16 + 24 + 8);
	put64(&d, 4096);
	put64(&d, 20);
	put64(&d, 4096);
	put64(&d, 0);
	load(&d, 0x2000, 2, "g", code16, 4);
	cur = (struct tally_jitdump_cursor){ 0 };
	s.n = 0;
	scan_prefix(&cur, &d, d.n, 4096, &s);
	assert_int_equal(s.n, 1);
	assert_null(s.ev[0].unwind);
	tally_jitdump_cursor_release(&cur);
	dump_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jitdump__load_and_lines),
		cmocka_unit_test(test_jitdump__other_byte_order),
		cmocka_unit_test(test_jitdump__bad_magic),
		cmocka_unit_test(test_jitdump__wrong_version),
		cmocka_unit_test(test_jitdump__short_header),
		cmocka_unit_test(test_jitdump__truncated_record),
		cmocka_unit_test(test_jitdump__damaged_record),
		cmocka_unit_test(test_jitdump__damaged_record_counted),
		cmocka_unit_test(test_jitdump__move),
		cmocka_unit_test(test_jitdump__reused_memory),
		cmocka_unit_test(test_jitdump__every_truncation),
		cmocka_unit_test(test_jitdump__copy_round_trip),
		cmocka_unit_test(test_jitdump__copy_damaged),
		cmocka_unit_test(test_jitdump__empty_name),
		cmocka_unit_test(test_jitdump__copy_hostile_names),
		cmocka_unit_test(test_jitdump__copy_reads_back),
		cmocka_unit_test(test_jitdump__escape),
		cmocka_unit_test(test_jitdump__move_budget),
		cmocka_unit_test(test_jitdump__overlaps_like_reference),
		cmocka_unit_test(test_jitdump__scales),
		cmocka_unit_test(test_jitdump__perfmap_parse),
		cmocka_unit_test(test_jitdump__perfmap_why),
		cmocka_unit_test(test_jitdump__display_name),
		cmocka_unit_test(test_jitdump__scan_whole),
		cmocka_unit_test(test_jitdump__scan_growing),
		cmocka_unit_test(test_jitdump__scan_damaged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
