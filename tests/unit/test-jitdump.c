/* Unit tests of the jitdump reader and the database's text copy (jitdump.h):
 * dumps built byte by byte here, good and damaged. */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/jitdump.h"

struct dump {
	unsigned char b[8192];
	size_t n;
	bool swap;
	size_t marks[64]; /* where records start */
	size_t nmarks;
};

static void put(struct dump *d, const void *p, size_t n)
{
	assert_true(d->n + n <= sizeof(d->b));
	memcpy(d->b + d->n, p, n);
	d->n += n;
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

static void load(struct dump *d, uint64_t addr, uint64_t index, const char *name, const unsigned char *code, size_t ncode)
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
static void debug(struct dump *d, uint64_t addr, const uint32_t *offs, const uint32_t *lines, size_t n, const char *file)
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
	assert_string_equal(back.files[tally_jitdump_line(f, 0x1006)->file], "dir with space/a\tb.js");
	assert_null(tally_jitdump_find(&back, 0x2000)->code);
	tally_jitdump_release(&back);
	tally_jitdump_release(&jd);
	strbuf_release(&sb);
}

static void test_jitdump__copy_damaged(void **state)
{
	(void)state;
	static const char *bad[] = {
		"source: x\n\nfunc 1000 10 1 f\ncode 00\n",         /* code shorter than the size */
		"source: x\n\nfunc 1000 2 1 f\ncode zz00\n",        /* not hex */
		"source: x\n\nline 1000 3 0 a.js\n",                /* a line before any func */
		"source: x\n\nfunc 1000 2 1\n",                     /* no name */
		"source: x\n\nfunc 1000 2 1 f\nline 1000 x 0 a\n",  /* line number */
		"source: x\nwhat: is this\n\nfunc 1000 2 1 f\n",    /* unknown header */
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char *t = xstrdup(bad[i]);
		struct tally_jitdump jd;
		assert_int_equal(tally_jitdump_read_copy(&jd, t, "jit/jitdump-1-x.txt"), -EINVAL);
		assert_errmsg_has("'jit/jitdump-1-x.txt' line ");
		assert_errmsg_has("record it again");
		tally_jitdump_release(&jd);
		free(t);
	}
	char *t = xstrdup("source: x\n\nfunc 1000 10 1 f\ncode 00\n");
	struct tally_jitdump jd;
	tally_jitdump_read_copy(&jd, t, "c");
	assert_errmsg_has("'c' line 4:");
	free(t);
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
