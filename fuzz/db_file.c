/* One file of a database (docs/format.md) through its tally_db_parse_*, the
 * parser tally_db_open_dir runs on each file it reads. Built once per file
 * kind: DB_FILE is "session", "images", "x.prof", "stacks", "kernel.syms",
 * "tasks", "modules", "mntns" or "sources". The files a kind needs parsed before it (the
 * session, the image list) are made here, fitting the input: as many events as
 * the input's counts have columns, and 64 images (for "images" itself, the
 * session only), of format 3 when the input is (a .prof that says so, stacks
 * whose first counts have a ':WEIGHT'), of format 4 for binary stacks (its
 * header's events), else 1. Oracles: what is accepted
 * holds what the format promises (counts and weights that add up without
 * wrapping, no weight without a sample, pids in
 * range, images that exist, sorted kernel symbols), errors are one line. */
#include "fuzz.h"

#include "tally/db.h"

#include <inttypes.h>

#ifndef DB_FILE
#error "DB_FILE names the file kind"
#endif

#define NIMAGES 64

/* The parser of a file kind, by its name. */
static int parse_file(struct tally_db *db, const char *name, const void *buf, size_t len)
{
	static const struct {
		const char *name;
		int (*parse)(struct tally_db *, const char *, size_t, const char *);
	} kinds[] = {
		{ "session", tally_db_parse_session },   { "images", tally_db_parse_images },
		{ "x.prof", tally_db_parse_prof },       { "stacks", tally_db_parse_stacks },
		{ "kernel.syms", tally_db_parse_ksyms }, { "tasks", tally_db_parse_tasks },
		{ "modules", tally_db_parse_modules },   { "mntns", tally_db_parse_mntns },
		{ "sources", tally_db_parse_sources },
	};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(kinds[i].name, name))
			return kinds[i].parse(db, buf, len, name);
	abort();
}

/* How many count columns the input's first counts have: the 'samples:' header
 * of a .prof, the first line of a stacks file (1 when it says nothing). */
static int input_events(const char *s)
{
	const char *p = NULL;
	if (!strcmp(DB_FILE, "x.prof")) {
		for (const char *l = s; l && *l && *l != '\n';
		     l = strchr(l, '\n'), l = l ? l + 1 : NULL)
			if (!strncmp(l, "samples: ", 9)) {
				p = l + 9;
				break;
			}
	} else if (!strcmp(DB_FILE, "stacks")) {
		p = s;
		while (*p == '#') {
			const char *nl = strchr(p, '\n');
			p = nl ? nl + 1 : p + strlen(p);
		}
	}
	int n = 1;
	for (; p && *p && *p != ' ' && *p != '\n'; p++)
		n += *p == ',';
	return n > 16 ? 16 : n;
}

/* Whether the input is of format 3 (weights beside the counts). */
static bool input_weighted(const char *s)
{
	if (!strcmp(DB_FILE, "x.prof"))
		return !strncmp(s, "format-version: 3\n", 18) || strstr(s, "\nformat-version: 3\n");
	if (!strcmp(DB_FILE, "stacks")) {
		const char *p = s;
		while (*p == '#') {
			const char *nl = strchr(p, '\n');
			p = nl ? nl + 1 : p + strlen(p);
		}
		size_t n = strcspn(p, " \n");
		return memchr(p, ':', n) != NULL;
	}
	return false;
}

/* Whether the input is a binary stacks file (format 4); its events in *n. */
static bool input_binary(const uint8_t *data, size_t size, int *n)
{
	if (strcmp(DB_FILE, "stacks") || size < 12 || memcmp(data, "TALLYSTK", 8))
		return false;
	uint32_t ne;
	memcpy(&ne, data + 8, sizeof(ne));
	*n = ne < 1 ? 1 : ne > 16 ? 16 : (int)ne;
	return true;
}

/* version: 1, 3 (weights) or 4 (weights, binary stacks) */
static void prerequisites(struct tally_db *db, int nevents, int version)
{
	bool weighted = version > 1;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "format-version: %d\nevents: ", version);
	for (int e = 0; e < nevents; e++)
		strbuf_addf(&sb, "%sev%d", e ? "," : "", e);
	strbuf_addstr(&sb, "\nsamples: ");
	for (int e = 0; e < nevents; e++)
		strbuf_addf(&sb, "%s0", e ? "," : "");
	if (weighted) {
		strbuf_addstr(&sb, "\nweight-total: ");
		for (int e = 0; e < nevents; e++)
			strbuf_addf(&sb, "%s0", e ? "," : "");
		strbuf_addstr(&sb, "\nweight-unit: ");
		for (int e = 0; e < nevents; e++)
			strbuf_addf(&sb, "%sevents", e ? "," : "");
	}
	strbuf_addstr(&sb, "\ncall-graph: fp\nper-pid: yes\n");
	int r = parse_file(db, "session", sb.buf, sb.len);
	FUZZ_CHECK(r == 0, "the harness's session: %s", tally_errmsg());
	strbuf_reset(&sb);
	if (!strcmp(DB_FILE, "images")) {
		strbuf_release(&sb);
		return;
	}
	for (int i = 0; i < NIMAGES; i++)
		strbuf_addf(&sb, "%d\texec\t%016x\tbuild-id\t0\timage%d\t/usr/bin/image%d\n", i, i,
			    i, i);
	r = parse_file(db, "images", sb.buf, sb.len);
	FUZZ_CHECK(r == 0, "the harness's images: %s", tally_errmsg());
	strbuf_release(&sb);
}

static void check_prof(const struct tally_db *db, const char *text)
{
	FUZZ_CHECK(db->nprofs == 1, "%zu profiles", db->nprofs);
	const struct tally_db_prof *p = &db->profs[0];
	FUZZ_CHECK(p->image < db->nimages && p->pid >= 0, "image %" PRIu32 " pid %" PRId32,
		   p->image, p->pid);
	/* the header's counts, as the parser read them, are the sums of the lines */
	const char *h = strstr(text, "samples: ");
	FUZZ_CHECK(h, "accepted without a samples header");
	for (int e = 0; e < db->nevents; e++) {
		uint64_t sum = 0;
		bool wrapped = false;
		for (size_t i = p->first; i < p->end; i++)
			wrapped |= __builtin_add_overflow(
				sum, db->counts[i * (size_t)db->nevents + (size_t)e], &sum);
		FUZZ_CHECK(fuzz_known("i5") || !wrapped,
			   "the counts of event %d wrap around 2^64 and were accepted", e);
		if (!db->weights)
			continue;
		sum = 0;
		for (size_t i = p->first; i < p->end; i++) {
			size_t at = i * (size_t)db->nevents + (size_t)e;
			wrapped |= __builtin_add_overflow(sum, db->weights[at], &sum);
			FUZZ_CHECK(db->counts[at] || !db->weights[at],
				   "a weight without a sample was accepted");
		}
		FUZZ_CHECK(!wrapped, "the weights of event %d wrap around 2^64 and were accepted",
			   e);
	}
}

static void check_stacks(const struct tally_db *db)
{
	for (int e = 0; e < db->nevents; e++) {
		uint64_t sum = 0;
		bool wrapped = false;
		for (size_t i = 0; i < db->nstacks; i++)
			wrapped |= __builtin_add_overflow(
				sum, db->stack_counts[i * (size_t)db->nevents + (size_t)e], &sum);
		FUZZ_CHECK(fuzz_known("i5") || !wrapped,
			   "the stack counts of event %d wrap around 2^64 and were accepted", e);
		if (!db->stack_weights)
			continue;
		sum = 0;
		for (size_t i = 0; i < db->nstacks; i++) {
			size_t at = i * (size_t)db->nevents + (size_t)e;
			wrapped |= __builtin_add_overflow(sum, db->stack_weights[at], &sum);
			FUZZ_CHECK(db->stack_counts[at] || !db->stack_weights[at],
				   "a stack weight without a sample was accepted");
		}
		FUZZ_CHECK(!wrapped,
			   "the stack weights of event %d wrap around 2^64 and were accepted", e);
	}
	for (size_t i = 0; i < db->nstacks; i++) {
		const struct tally_db_stack *s = &db->stacks[i];
		FUZZ_CHECK(fuzz_known("i5") || s->pid >= 0, "stack %zu has pid %" PRId32, i,
			   s->pid);
		FUZZ_CHECK(s->len > 0 && s->first + s->len <= db->nstack_frames,
			   "stack %zu out of the frames", i);
		for (uint32_t k = 0; k < s->len; k++) {
			FUZZ_CHECK(db->stack_frames[s->first + k] < db->nframe_tab,
				   "stack %zu names frame %" PRIu32, i,
				   db->stack_frames[s->first + k]);
			FUZZ_CHECK(tally_db_frame(db, s, k)->image < db->nimages,
				   "a frame names image %" PRIu32, tally_db_frame(db, s, k)->image);
		}
	}
}

/* The made session and images, once per number of events: each input's parse
 * starts from a copy of the struct (what the file kinds that need them add is
 * their own arrays, freed after each input; the images are only read, but for
 * mntns's mark, which is cleared). */
static struct tally_db *made[5][17];

static void start_from(struct tally_db *db, int nevents, int version)
{
	if (!made[version][nevents]) {
		made[version][nevents] = xcalloc(1, sizeof(*made[version][nevents]));
		prerequisites(made[version][nevents], nevents, version);
	}
	*db = *made[version][nevents];
	for (size_t i = 0; i < db->nimages; i++)
		db->images[i].foreign_ns = false;
}

static void release_own(struct tally_db *db)
{
	if (!strcmp(DB_FILE, "images")) {
		for (size_t i = 0; i < db->nimages; i++) {
			free(db->images[i].name);
			free(db->images[i].path);
			free(db->images[i].id);
			free(db->images[i].id_kind);
			free(db->images[i].kind);
		}
		free(db->images);
	}
	free(db->entries);
	free(db->counts);
	free(db->weights);
	free(db->profs);
	free(db->frame_tab);
	free(db->stack_frames);
	free(db->stacks);
	free(db->stack_counts);
	free(db->stack_weights);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	struct tally_db db;
	memset(&db, 0, sizeof(db));
	bool needs = strcmp(DB_FILE, "session") && strcmp(DB_FILE, "kernel.syms") &&
		     strcmp(DB_FILE, "tasks") && strcmp(DB_FILE, "modules") &&
		     strcmp(DB_FILE, "sources");
	int nbin = 0;
	if (needs && input_binary(data, size, &nbin))
		start_from(&db, nbin, 4);
	else if (needs)
		start_from(&db, input_events(text), input_weighted(text) ? 3 : 1);
	int r = parse_file(&db, DB_FILE, data, size);
	if (r) {
		fuzz_check_errmsg();
	} else if (!strcmp(DB_FILE, "session")) {
		FUZZ_CHECK(db.nevents > 0 && db.events && db.samples,
			   "a session without events was accepted");
	} else if (!strcmp(DB_FILE, "images")) {
		for (size_t i = 0; i < db.nimages; i++)
			FUZZ_CHECK(db.images[i].pid >= 0 && db.images[i].kind && db.images[i].id &&
					   db.images[i].path,
				   "image %zu", i);
	} else if (!strcmp(DB_FILE, "x.prof")) {
		check_prof(&db, text);
	} else if (!strcmp(DB_FILE, "stacks")) {
		check_stacks(&db);
	} else if (!strcmp(DB_FILE, "kernel.syms")) {
		for (size_t i = 1; i < db.nksyms; i++)
			FUZZ_CHECK(db.ksyms[i - 1].addr <= db.ksyms[i].addr,
				   "kernel symbols out of order");
		for (size_t i = 0; i < db.nksyms; i++)
			FUZZ_CHECK(db.ksyms[i].name, "a kernel symbol without a name");
	} else if (!strcmp(DB_FILE, "tasks")) {
		for (size_t i = 0; i < db.ntasks; i++)
			FUZZ_CHECK(db.tasks[i].pid > 0 && db.tasks[i].comm && db.tasks[i].exe,
				   "task %zu", i);
	} else if (!strcmp(DB_FILE, "modules")) {
		for (size_t i = 0; i < db.nmods; i++)
			FUZZ_CHECK(db.mods[i].name && *db.mods[i].name, "module %zu", i);
	} else if (!strcmp(DB_FILE, "sources")) {
		for (size_t i = 0; i < db.nsources; i++) {
			const struct tally_db_source *src = &db.sources[i];
			FUZZ_CHECK(src->duration == -1 || src->duration >= 0,
				   "source %zu lasted %g s", i, src->duration);
			for (size_t k = 0; k < src->labels.n; k++)
				FUZZ_CHECK(tally_label_key_ok(src->labels.v[k].key,
							      strlen(src->labels.v[k].key)) &&
						   tally_label_value_ok(src->labels.v[k].value) &&
						   (!k || strcmp(src->labels.v[k - 1].key,
								 src->labels.v[k].key) < 0),
					   "source %zu: a bad label or keys out of order", i);
		}
	}
	if (needs)
		release_own(&db);
	else
		tally_db_release(&db);
	free(text);
	return 0;
}
