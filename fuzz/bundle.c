/* A bundle (docs/format.md: a whole database in one file, what 'tally ctl
 * drain' writes) through tally_db_open_bundle_buf: unpacked under $TMPDIR (here a
 * directory in memory) and read by tally_db_open_dir, so every file of a
 * database and the checks across them are reached from one input.
 * Oracles, on what opens: the counts add up without wrapping; the round trip
 * (what tally writes as a bundle from what it read, it reads back to the same
 * profiles, stacks, events, totals, tasks and kernel symbols, whatever the
 * order of the files; and that bundle is a fixed point: read and written
 * again, the same bytes); a merge of it (what the epochs of a daemon's
 * database go through) keeps every event's total. */
#include "fuzz.h"

#include "tally/db.h"
#include "tally/epoch.h"

#include <inttypes.h>

static void check_totals(const struct tally_db *db, const char *what)
{
	for (int e = 0; e < db->nevents; e++) {
		uint64_t sum = 0;
		bool wrapped = false;
		for (size_t i = 0; i < db->nentries; i++)
			wrapped |= __builtin_add_overflow(
				sum, db->counts[i * (size_t)db->nevents + (size_t)e], &sum);
		FUZZ_CHECK((fuzz_known("i5") && wrapped) || (!wrapped && sum == db->samples[e]),
			   "%s: event %d: the profiles hold %" PRIu64 "%s, the session %" PRIu64,
			   what, e, sum, wrapped ? " (wrapped)" : "", db->samples[e]);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* What a database says, independent of the order of its files: one sorted
 * line per profile entry and per stack, with the images by what they are. */
static char **canon(const struct tally_db *db, size_t *n)
{
	size_t cap = 0;
	char **out = NULL;
	*n = 0;
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < db->nentries + db->nstacks; i++) {
		strbuf_reset(&sb);
		const uint64_t *c;
		if (i < db->nentries) {
			const struct tally_db_entry *e = &db->entries[i];
			const struct tally_db_image *im = &db->images[e->image];
			strbuf_addf(&sb, "entry %s %s %s %d %s pid %" PRId32 " %" PRIx64, im->kind,
				    im->id, im->id_kind, im->pid, im->path, e->pid, e->offset);
			c = &db->counts[i * (size_t)db->nevents];
		} else {
			const struct tally_db_stack *st = &db->stacks[i - db->nentries];
			strbuf_addf(&sb, "stack pid %" PRId32, st->pid);
			for (uint32_t k = 0; k < st->len; k++) {
				const struct tally_frame *f = tally_db_frame(db, st, k);
				strbuf_addf(&sb, " %s:%" PRIx64, db->images[f->image].id,
					    f->offset);
			}
			c = &db->stack_counts[(i - db->nentries) * (size_t)db->nevents];
		}
		for (int e = 0; e < db->nevents; e++)
			strbuf_addf(&sb, " %s=%" PRIu64, db->events[e], c[e]);
		GROW(out, cap, *n + 1);
		out[(*n)++] = xstrdup(sb.buf);
	}
	strbuf_release(&sb);
	tally_qsort(out, *n, sizeof(*out), cmp_str);
	return out;
}

static void free_canon(char **c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i]);
	free(c);
}

/* Bundles db and reads that back: the same profiles, stacks, tasks, kernel
 * symbols and totals; and bundled again, a fixed point (the same bytes). */
static void round_trip(const struct tally_db *db, const char *what)
{
	struct strbuf b1 = STRBUF_INIT, b2 = STRBUF_INIT, b3 = STRBUF_INIT;
	if (tally_db_bundle(db, &b1)) {
		/* refused to write: allowed, as long as it says why */
		fuzz_check_errmsg();
		strbuf_release(&b1);
		return;
	}
	struct tally_db back, again;
	int r = tally_db_open_bundle_buf(&back, b1.buf, b1.len, "written.bundle");
	FUZZ_CHECK(r == 0, "%s: tally cannot read back the bundle it wrote: %s", what,
		   tally_errmsg());
	FUZZ_CHECK(
		back.nevents == db->nevents && back.ntasks == db->ntasks &&
			back.nksyms == db->nksyms && back.nimages <= db->nimages &&
			back.lost == db->lost && back.throttled == db->throttled,
		"%s: read back, %d events, %zu tasks, %zu kernel symbols, %zu images; written, %d, %zu, %zu, %zu",
		what, back.nevents, back.ntasks, back.nksyms, back.nimages, db->nevents, db->ntasks,
		db->nksyms, db->nimages);
	for (int e = 0; e < db->nevents; e++)
		FUZZ_CHECK(!strcmp(back.events[e], db->events[e]) &&
				   back.samples[e] == db->samples[e],
			   "%s: event %d reads back as '%s' with %" PRIu64
			   " samples, written '%s' with %" PRIu64,
			   what, e, back.events[e], back.samples[e], db->events[e], db->samples[e]);
	size_t n1, n2;
	char **c1 = canon(db, &n1), **c2 = canon(&back, &n2);
	for (size_t i = 0; i < n1 || i < n2; i++)
		FUZZ_CHECK(i < n1 && i < n2 && !strcmp(c1[i], c2[i]),
			   "%s: written '%s', read back '%s'", what, i < n1 ? c1[i] : "(nothing)",
			   i < n2 ? c2[i] : "(nothing)");
	free_canon(c1, n1);
	free_canon(c2, n2);

	r = tally_db_bundle(&back, &b2);
	FUZZ_CHECK(r == 0, "%s: tally cannot bundle again what it read back: %s", what,
		   tally_errmsg());
	r = tally_db_open_bundle_buf(&again, b2.buf, b2.len, "written-again.bundle");
	FUZZ_CHECK(r == 0, "%s: tally cannot read back its second bundle: %s", what,
		   tally_errmsg());
	r = tally_db_bundle(&again, &b3);
	FUZZ_CHECK(r == 0, "%s: tally cannot bundle a third time: %s", what, tally_errmsg());
	if (b2.len != b3.len || memcmp(b2.buf, b3.buf, b2.len)) {
		size_t i = 0;
		while (i < b2.len && i < b3.len && b2.buf[i] == b3.buf[i])
			i++;
		size_t from = i > 200 ? i - 200 : 0;
		fprintf(stderr,
			"first difference at byte %zu:\n--- second bundle:\n%.300s\n--- third:\n%.300s\n",
			i, b2.buf + from, b3.buf + from);
	}
	FUZZ_CHECK(b2.len == b3.len && !memcmp(b2.buf, b3.buf, b2.len),
		   "%s: bundled, read back and bundled again, the bytes change (%zu and %zu bytes)",
		   what, b2.len, b3.len);
	tally_db_release(&again);
	tally_db_release(&back);
	strbuf_release(&b1);
	strbuf_release(&b2);
	strbuf_release(&b3);
}

static bool unique_events(const struct tally_db *db)
{
	for (int i = 0; i < db->nevents; i++)
		for (int k = 0; k < i; k++)
			if (!strcmp(db->events[i], db->events[k]))
				return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_dir();
	struct tally_db db;
	int r = tally_db_open_bundle_buf(&db, (const char *)data, size, "fuzz.bundle");
	if (r) {
		fuzz_check_errmsg();
		return 0;
	}
	check_totals(&db, "read");
	round_trip(&db, "read");

	struct tally_db_builder *b =
		tally_db_builder_new(db.nevents, db.events, db.per_pid, db.has_stacks);
	tally_db_builder_session(b, &db.session);
	tally_db_builder_add(b, &db);
	struct tally_db merged;
	tally_db_builder_finish(b, &merged);
	check_totals(&merged, "merged");
	if (unique_events(&db))
		for (int e = 0; e < db.nevents; e++)
			FUZZ_CHECK(merged.samples[e] == db.samples[e],
				   "merged: event %d: %" PRIu64 " samples, read %" PRIu64, e,
				   merged.samples[e], db.samples[e]);
	tally_db_release(&merged);
	tally_db_release(&db);
	return 0;
}
