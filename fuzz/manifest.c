/* An archive's MANIFEST (docs/format.md: what 'tally archive' writes, and
 * every member of an archive is checked against when it is read) through
 * tally_manifest_parse. Oracles: every entry accepted has a name a member may
 * have, and no name twice; the round trip: the MANIFEST tally writes for those
 * entries (tally_manifest_format) it reads back to the same names, roles,
 * sizes and checksums, and writes again byte for byte the same. */
#include "fuzz.h"

#include "tally/archive.h"

#include <inttypes.h>

static void format(const struct tally_manifest *m, struct strbuf *out)
{
	struct tally_archive_member *mem = xcalloc(m->n + 1, sizeof(*mem));
	for (size_t i = 0; i < m->n; i++) {
		mem[i].name = m->e[i].name;
		mem[i].role = m->e[i].role;
		mem[i].size = m->e[i].size;
		memcpy(mem[i].sum, m->e[i].sum, sizeof(mem[i].sum));
		mem[i].have_sum = true;
	}
	tally_manifest_format(mem, m->n, out);
	free(mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_manifest m;
	int r = tally_manifest_parse(&m, (const char *)data, size, "MANIFEST");
	if (r) {
		fuzz_check_errmsg();
		tally_manifest_release(&m);
		return 0;
	}
	for (size_t i = 0; i < m.n; i++) {
		FUZZ_CHECK(tally_archive_name_ok(m.e[i].name), "member name '%s' accepted",
			   m.e[i].name);
		for (size_t k = 0; k < i; k++)
			FUZZ_CHECK(strcmp(m.e[i].name, m.e[k].name), "member '%s' listed twice",
				   m.e[i].name);
	}
	struct strbuf t1 = STRBUF_INIT, t2 = STRBUF_INIT;
	format(&m, &t1);
	struct tally_manifest back;
	r = tally_manifest_parse(&back, t1.buf, t1.len, "written");
	if (r)
		fprintf(stderr, "the MANIFEST tally wrote:\n%.4000s\n", t1.buf);
	FUZZ_CHECK(r == 0, "tally cannot read back the MANIFEST it wrote: %s", tally_errmsg());
	FUZZ_CHECK(back.n == m.n, "%zu entries read back as %zu", m.n, back.n);
	for (size_t i = 0; i < m.n; i++)
		FUZZ_CHECK(!strcmp(back.e[i].name, m.e[i].name) && back.e[i].role == m.e[i].role &&
				   back.e[i].size == m.e[i].size &&
				   !memcmp(back.e[i].sum, m.e[i].sum, sizeof(m.e[i].sum)),
			   "entry '%s' reads back differently", m.e[i].name);
	format(&back, &t2);
	FUZZ_CHECK(t1.len == t2.len && !memcmp(t1.buf, t2.buf, t1.len),
		   "the MANIFEST written again differs");
	strbuf_release(&t1);
	strbuf_release(&t2);
	tally_manifest_release(&back);
	tally_manifest_release(&m);
	return 0;
}
