/* A daemon's answer to peek as `tally top --db` takes it: read in memory
 * (tally_top_db_from_bundle, no temporary directory), then what a tick does
 * with it: weighed, fed into a window without and with call graphs (the
 * feed's image identities, location and range caches, cumulative counts and
 * the symbols of the kernel and of every file it names), and shown as text
 * snapshots of the three views and as a terminal screen.
 * Oracles: a refusal is one line; what is read adds up to the session's
 * totals without wrapping and names only images that exist; where the
 * database reader (tally_db_open_bundle_buf, what report makes of the same
 * bundle) reads it too, both say the same events, totals, profile entries,
 * stacks, tasks and kernel symbols; a feed adds no more than the answer
 * holds, and the window holds what was added; nothing from the answer
 * reaches the output raw (no control byte in a snapshot but its newlines,
 * none in the screen but its own escape sequences). */
#include "fuzz.h"

#include "tally/epoch.h"
#include "tally/top.h"
#include "tally/view.h"

#include <inttypes.h>
#include <math.h>

static void check_read(const struct tally_db *db)
{
	for (int e = 0; e < db->nevents; e++) {
		uint64_t sum = 0;
		bool wrapped = false;
		for (size_t i = 0; i < db->nentries; i++)
			wrapped |= __builtin_add_overflow(
				sum, db->counts[i * (size_t)db->nevents + (size_t)e], &sum);
		FUZZ_CHECK(!wrapped && sum == db->samples[e],
			   "event %d: the profiles hold %" PRIu64 "%s, the session %" PRIu64, e,
			   sum, wrapped ? " (wrapped)" : "", db->samples[e]);
	}
	for (size_t i = 0; i < db->nentries; i++)
		FUZZ_CHECK(db->entries[i].image < db->nimages,
			   "entry %zu names image %" PRIu32 " of %zu", i, db->entries[i].image,
			   db->nimages);
	for (size_t s = 0; s < db->nstacks; s++)
		for (uint32_t k = 0; k < db->stacks[s].len; k++) {
			const struct tally_frame *f = tally_db_frame(db, &db->stacks[s], k);
			FUZZ_CHECK(f->image < db->nimages,
				   "stack %zu frame %" PRIu32 " names image %" PRIu32 " of %zu", s,
				   k, f->image, db->nimages);
		}
}

/* The database reader on the same bytes: where it reads them too, the same. */
static void check_same_as_report(const struct tally_db *db, const uint8_t *data, size_t size)
{
	struct tally_db o;
	if (tally_db_open_bundle_buf(&o, (const char *)data, size, "fuzz.bundle"))
		return; /* it checks more (the JIT and vDSO copies top leaves out) */
	FUZZ_CHECK(
		o.nevents == db->nevents && o.nentries == db->nentries &&
			o.nstacks == db->nstacks && o.ntasks == db->ntasks &&
			o.nksyms == db->nksyms && o.lost == db->lost,
		"top reads %d events, %zu entries, %zu stacks, %zu tasks, %zu kernel symbols, %" PRIu64
		" lost; report %d, %zu, %zu, %zu, %zu, %" PRIu64,
		db->nevents, db->nentries, db->nstacks, db->ntasks, db->nksyms, db->lost, o.nevents,
		o.nentries, o.nstacks, o.ntasks, o.nksyms, o.lost);
	for (int e = 0; e < db->nevents; e++)
		FUZZ_CHECK(!strcmp(o.events[e], db->events[e]) && o.samples[e] == db->samples[e],
			   "event %d: top reads '%s' with %" PRIu64
			   " samples, report '%s' with %" PRIu64,
			   e, db->events[e], db->samples[e], o.events[e], o.samples[e]);
	tally_db_release(&o);
}

/* Only our own escape sequences and line ends in what goes to a terminal. */
static void check_safe(const struct strbuf *out, bool screen)
{
	static const char *const ours[] = { "\033[H", "\033[K", "\033[7m", "\033[0m", "\033[2J" };
	for (size_t i = 0; i < out->len; i++) {
		unsigned char c = (unsigned char)out->buf[i];
		if (c == '\n' ||
		    (screen && c == '\r' && i + 1 < out->len && out->buf[i + 1] == '\n'))
			continue;
		if (screen && c == 033) {
			size_t k = 0;
			while (k < ARRAY_SIZE(ours) &&
			       strncmp(out->buf + i, ours[k], strlen(ours[k])))
				k++;
			FUZZ_CHECK(
				k < ARRAY_SIZE(ours),
				"an escape sequence of the input on the screen at byte %zu: '%.12s'",
				i, out->buf + i);
			i += strlen(ours[k]) - 1;
			continue;
		}
		FUZZ_CHECK(c >= 0x20 && c != 0x7f, "control byte 0x%02x at byte %zu of the %s", c,
			   i, screen ? "screen" : "snapshot");
	}
}

static const char *fuzz_ro_dirs[2];

static void feed_and_show(struct tally_db *db, bool callgraph, const struct tally_resolver_opts *ro)
{
	struct tally_top *win = tally_top_new(callgraph);
	struct tally_top_feed *feed = tally_top_feed_new(ro);
	const char *since = tally_meta_get(&db->session, "memory-since");
	double s = since ? strtod(since, NULL) : 0;
	/* the most a feed may add: the answer's event 0, where the view takes it */
	bool stacks = callgraph && db->has_stacks && db->nstacks;
	double most = 0;
	int ne = db->nevents > 0 ? db->nevents : 1;
	if (stacks)
		for (size_t i = 0; i < db->nstacks; i++)
			most += (double)db->stack_counts[i * (size_t)ne];
	else
		for (size_t i = 0; i < db->nentries; i++)
			most += (double)db->counts[i * (size_t)ne];
	double added = -1;
	if (tally_top_feed_db(feed, win, db, true, s, &added))
		fuzz_check_errmsg();
	FUZZ_CHECK(added >= 0 && added <= most * (1 + 1e-9) + 1,
		   "a feed added %g of an answer of %g", added, most);
	double total = tally_top_total(win);
	FUZZ_CHECK(fabs(total - added) <= 1e-9 * added + 1e-6,
		   "the window holds %g, the feed added %g", total, added);
	/* the next tick: the same answer again (only what grew is added) */
	tally_top_tick(win, TALLY_TOP_DECAY);
	if (tally_top_feed_db(feed, win, db, true, s, NULL))
		fuzz_check_errmsg();

	struct tally_top_status st = { .target = "daemon 'fuzz'",
				       .events = db->nevents > 0 ? db->events[0] : "?",
				       .rate = added,
				       .interval = 1,
				       .unit = tally_view_heading(db, 0) };
	struct tally_top_ui ui;
	tally_top_ui_init(&ui, callgraph);
	struct strbuf out = STRBUF_INIT;
	for (int v = TALLY_TOP_FUNCTIONS; v <= TALLY_TOP_COMMANDS; v++) {
		ui.q.view = (enum tally_top_view)v;
		ui.q.sort = (enum tally_top_sort)(v + (callgraph ? 2 : 0));
		strbuf_reset(&out);
		tally_top_text(win, &ui.q, &st, 0, &out);
		check_safe(&out, false);
		strbuf_reset(&out);
		tally_top_screen(win, &ui, &st, 60, 12, &out);
		check_safe(&out, true);
	}
	strbuf_release(&out);
	tally_top_ui_release(&ui);
	tally_top_feed_free(feed);
	tally_top_free(win);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_dir();
	static struct tally_resolver_opts ro;
	if (!fuzz_ro_dirs[0]) {
		/* the kernel's modules and debug files of this machine stay out:
		 * only what the answer names is looked up */
		static char mods[300], dbg[300];
		snprintf(mods, sizeof(mods), "%s/modules", dir);
		snprintf(dbg, sizeof(dbg), "%s/debug", dir);
		mkdir(mods, 0700);
		mkdir(dbg, 0700);
		fuzz_ro_dirs[0] = dbg;
		ro.modules_dir = mods;
		ro.debug_dirs = fuzz_ro_dirs;
		ro.no_inline = true; /* as tally top asks */
	}
	struct tally_db db;
	int r = tally_top_db_from_bundle(&db, (const char *)data, size,
					 "the answer of 'fuzz/ctl.sock' to peek");
	if (r) {
		fuzz_check_errmsg();
		return 0;
	}
	check_read(&db);
	check_same_as_report(&db, data, size);
	/* as a tick of tally top does */
	tally_view_weigh(&db, false);
	feed_and_show(&db, false, &ro);
	feed_and_show(&db, true, &ro);
	tally_db_release(&db);
	return 0;
}
