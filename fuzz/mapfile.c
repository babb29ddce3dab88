/* An image map (what 'tally scan' writes and 'report --mapfile' reads,
 * docs/format.md) through tally_imgmap_parse, the parser of
 * tally_imgmap_load. Oracles: what is accepted has only known id kinds, hex
 * ids, known flags and a path; the entries are sorted so that
 * tally_imgmap_find finds every one of them by its id; a NUL byte is damage,
 * not the end of the map (issue 17, item 12). */
#include "fuzz.h"

#include "tally/imgmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_imgmap m;
	int r = tally_imgmap_parse(&m, (const char *)data, size, "fuzz.map");
	if (r) {
		fuzz_check_errmsg();
		return 0;
	}
	FUZZ_CHECK(fuzz_known("i12") || !memchr(data, '\0', size),
		   "a map with a NUL byte was accepted (%zu entries kept)", m.n);
	for (size_t i = 0; i < m.n; i++) {
		const struct tally_imgmap_entry *e = &m.e[i];
		FUZZ_CHECK(!strcmp(e->id_kind, "build-id") || !strcmp(e->id_kind, "xxh64"),
			   "id kind '%s'", e->id_kind);
		FUZZ_CHECK(*e->id && strspn(e->id, "0123456789abcdef") == strlen(e->id), "id '%s'",
			   e->id);
		FUZZ_CHECK(!(e->flags & ~(TALLY_IMGMAP_SYMTAB | TALLY_IMGMAP_DEBUG)), "flags %u",
			   e->flags);
		FUZZ_CHECK(e->path && *e->path, "entry %zu has no path", i);
		if (i)
			FUZZ_CHECK(strcmp(m.e[i - 1].id, e->id) <= 0, "entries out of order");
		size_t first, n = tally_imgmap_find(&m, e->id, &first);
		FUZZ_CHECK(n && first <= i && i < first + n,
			   "entry %zu is not found by its id '%s'", i, e->id);
	}
	tally_imgmap_release(&m);
	return 0;
}
