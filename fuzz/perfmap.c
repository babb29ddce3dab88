/* A perf map (/tmp/perf-PID.map: 'START SIZE NAME' lines, hex): first through
 * tally_perfmap_parse, the parser of the recorder and the report, then as the
 * database keeps its copy (jit/perf-PID-ID.map) and the report reads it: the
 * input is written there in a database in memory with one JIT image, and the
 * resolver names addresses with it (tally_resolve, tally_resolve_leaf, the
 * --explain text). Oracles: each entry parsed is a range that does not wrap
 * with a name inside the buffer, not empty, without a newline or NUL; the
 * function found for an address contains it; every address gets a name or
 * none, without a crash; notes are one line. */
#include "fuzz.h"

#include "tally/db.h"
#include "tally/jitdump.h"
#include "tally/symbols.h"

#include <inttypes.h>

#define PID 4242
#define ID "deadbeef"

static void probe(struct tally_resolver *r, uint64_t addr)
{
	const struct tally_sym *y = tally_resolve(r, 0, addr);
	if (y) {
		FUZZ_CHECK(addr >= y->addr && addr - y->addr < (y->size ? y->size : 1),
			   "0x%" PRIx64 " resolved to '%s' at 0x%" PRIx64 " size 0x%" PRIx64, addr,
			   y->name, y->addr, y->size);
		FUZZ_CHECK(y->name, "a function without a name");
	}
	struct tally_leaf leaf;
	tally_resolve_leaf(r, 0, addr, &leaf);
	FUZZ_CHECK(leaf.name, "no name, not even '[unknown]', for 0x%" PRIx64, addr);
}

static void parse(const uint8_t *data, size_t size)
{
	struct tally_perfmap_sym *ps = NULL;
	size_t n = 0, bad = 0;
	int r = tally_perfmap_parse((const char *)data, size, &ps, &n, &bad);
	FUZZ_CHECK(r == 0, "tally_perfmap_parse returned %d", r);
	for (size_t i = 0; i < n; i++) {
		const struct tally_perfmap_sym *y = &ps[i];
		FUZZ_CHECK(y->start + y->size >= y->start,
			   "entry %zu wraps: 0x%" PRIx64 "+0x%" PRIx64, i, y->start, y->size);
		FUZZ_CHECK(y->name_len > 0 && y->name <= size && y->name_len <= size - y->name,
			   "entry %zu: name at %zu+%zu of %zu", i, y->name, y->name_len, size);
		FUZZ_CHECK(!memchr(data + y->name, '\n', y->name_len) &&
				   !memchr(data + y->name, '\0', y->name_len),
			   "entry %zu: a name with a newline or NUL", i);
	}
	free(ps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parse(data, size);
	char dir[512], jit[600];
	snprintf(dir, sizeof(dir), "%s/db", fuzz_dir());
	snprintf(jit, sizeof(jit), "%s/jit", dir);
	mkdir(dir, 0700);
	mkdir(jit, 0700);
	fuzz_write(jit, "perf-4242-" ID ".map", data, size);

	struct tally_db db;
	memset(&db, 0, sizeof(db));
	db.path = dir;
	struct tally_db_image im = { .name = "jit", .path = "//anon", .id = ID, .id_kind = "none", .kind = "jit", .pid = PID };
	db.images = &im;
	db.nimages = 1;
	struct tally_resolver *r;
	if (tally_resolver_new(&r, &db, NULL))
		abort();

	/* where to look: every line's start and the bytes around it, and its end */
	probe(r, 0);
	char *text = fuzz_cstr(data, size);
	int n = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < 64;
	     l = strtok_r(NULL, "\n", &save), n++) {
		char *e;
		uint64_t a = strtoull(l, &e, 16),
			 s = e && *e == ' ' ? strtoull(e + 1, NULL, 16) : 0;
		probe(r, a);
		probe(r, a - 1);
		probe(r, a + 1);
		probe(r, a + s);
		probe(r, a + s - 1);
	}
	free(text);
	const char *note = tally_resolver_note(r, 0);
	FUZZ_CHECK(!note || !strchr(note, '\n'), "a note of more than one line: '%s'", note);
	struct strbuf ex = STRBUF_INIT;
	tally_resolver_explain(r, 0, &ex);
	strbuf_release(&ex);
	tally_resolver_free(r);
	return 0;
}
