/* Unit tests for the daemon's database layer: time and size parsing, epoch
 * names, listing and pruning, merging databases with the builder, bundles
 * (round trip and damage), the epoch selection of readers, and the control
 * protocol's parser. */
#define _GNU_SOURCE
#include "unit.h"

#include <inttypes.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "tally/agg.h"
#include "tally/ctl.h"
#include "tally/db.h"
#include "tally/snapshot.h"
#include "tally/epoch.h"

/* ---- times and sizes ---- */

static void test_epoch__parse_time(void **state)
{
	(void)state;
	double now = 1800000000.0, t = 0;
	assert_int_equal(tally_parse_time("2h", "--since", now, &t), 0);
	assert_true(t == now - 7200);
	assert_int_equal(tally_parse_time("200ms", "--since", now, &t), 0);
	assert_true(t == now - 0.2);
	assert_int_equal(tally_parse_time("202611211307", "--since", now, &t), 0);
	assert_true(t == 1795266420.0); /* 2026-11-21T13:07:00Z */
	assert_int_equal(tally_parse_time("2026-11-21T13:07", "--since", now, &t), 0);
	assert_true(t == 1795266420.0);
	assert_int_equal(tally_parse_time("2026-11-21 13:07:30Z", "--since", now, &t), 0);
	assert_true(t == 1795266450.0);
	assert_int_equal(tally_parse_time("2026-11-21", "--until", now, &t), 0);
	assert_true(t == 1795219200.0);
	const char *bad[] = {
		"",    "x",    "-2h", "2026-02-30", "202613011200", "2026-11-21T25:00",
		"1e3", "2h30", NULL
	};
	for (int i = 0; bad[i]; i++) {
		if (tally_parse_time(bad[i], "--until", now, &t) != -EINVAL)
			fail_msg("'%s' was accepted as a time", bad[i]);
		assert_errmsg_has("--until");
	}
}

static void test_epoch__parse_size(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(tally_parse_size("4096", "--max-db-size", 0, &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(tally_parse_size("64M", "--max-db-size", 0, &v), 0);
	assert_int_equal(v, 64ull << 20);
	assert_int_equal(tally_parse_size("2GiB", "--max-db-size", 0, &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(tally_parse_size("512k", "--max-db-size", 0, &v), 0);
	assert_int_equal(v, 512ull << 10);
	const char *bad[] = { "",          "M", "-1", "1.5M", "10X", "99999999999999999999",
			      "20000000T", NULL };
	for (int i = 0; bad[i]; i++) {
		if (tally_parse_size(bad[i], "--max-memory", 0, &v) != -EINVAL)
			fail_msg("'%s' was accepted as a size", bad[i]);
		assert_errmsg_has("--max-memory");
	}
	assert_int_equal(tally_parse_size("1k", "--max-memory", 4096, &v), -EINVAL);
	assert_errmsg_has("at least");
}

/* ---- epochs ---- */

static void test_epoch__names(void **state)
{
	(void)state;
	const char *ok[] = { "202611211307", "202611211307-2", "202611211307-10", "199901010000",
			     NULL };
	const char *bad[] = {
		"", "2026112113", "202611211307-", "202611211307-1x", "202611211307-0",
		"202613211307",
		/* the first epoch of a minute has no number: "-1" would sort equal to it */
		"202611211307-1", "x02611211307", "202611211307-2-3", "202611211307 ",
		".202611211307", NULL
	};
	for (int i = 0; ok[i]; i++)
		if (!tally_epoch_name_ok(ok[i]))
			fail_msg("'%s' refused as an epoch name", ok[i]);
	for (int i = 0; bad[i]; i++)
		if (tally_epoch_name_ok(bad[i]))
			fail_msg("'%s' accepted as an epoch name", bad[i]);
}

/* A database with n samples of cpu-clock at /bin/true+off, session times as given. */
static void make_db(const char *path, uint64_t off, uint64_t n, const char *start, const char *stop)
{
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_FILE;
	k.path = (char *)"/bin/true";
	uint32_t im = tally_agg_image(&a, &k);
	uint32_t f = tally_agg_frame(&a, im, off);
	uint32_t st = tally_agg_stack(&a, &f, 1);
	tally_agg_count(&a, st, 0, 0, n);
	a.samples[0] += n;
	struct tally_meta m = { 0 };
	tally_meta_set(&m, "format-version", "1");
	tally_meta_set(&m, "events", "cpu-clock");
	tally_meta_set(&m, "call-graph", "none");
	tally_meta_set(&m, "target", "system");
	tally_meta_set(&m, "start-time", "%s", start);
	tally_meta_set(&m, "stop-time", "%s", stop);
	tally_meta_set(&m, "duration", "60.000");
	if (tally_db_write(path, false, &a, &m))
		fail_msg("tally_db_write '%s': %s", path, tally_errmsg());
	tally_meta_release(&m);
	tally_agg_release(&a);
}

static char *daemon_dir(const char *tmp)
{
	char *dir = unit_path(tmp, "d");
	assert_int_equal(mkdir(dir, 0700), 0);
	char *marker = unit_path(dir, TALLY_DAEMON_MARKER);
	unit_write_str(marker, "format-version: 1\n");
	free(marker);
	return dir;
}

static void add_epoch(const char *dir, const char *name, uint64_t off, uint64_t n,
		      const char *start, const char *stop)
{
	char *p = unit_path(dir, name);
	make_db(p, off, n, start, stop);
	free(p);
}

static void test_epoch__list_and_new_name(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dir = daemon_dir(tmp);
	add_epoch(dir, "202611211307-10", 0x10, 1, "2026-11-21T13:07:50Z", "2026-11-21T13:07:55Z");
	add_epoch(dir, "202611211307", 0x10, 1, "2026-11-21T13:07:00Z", "2026-11-21T13:07:20Z");
	add_epoch(dir, "202611211307-2", 0x10, 1, "2026-11-21T13:07:20Z", "2026-11-21T13:07:50Z");
	add_epoch(dir, "202611201200", 0x10, 1, "2026-11-20T12:00:00Z", "2026-11-20T13:00:00Z");
	/* things that are not epochs are ignored */
	char *junk = unit_path(dir, ".202611211308.tmp-1");
	assert_int_equal(mkdir(junk, 0700), 0);
	free(junk);
	junk = unit_path(dir, "202611211309");
	unit_write_str(junk, "a file, not an epoch");
	free(junk);
	assert_true(tally_db_is_daemon(dir));

	struct tally_epoch *e;
	size_t n;
	assert_int_equal(tally_epochs_list(dir, &e, &n), 0);
	assert_int_equal(n, 4);
	assert_string_equal(e[0].name, "202611201200");
	assert_string_equal(e[1].name, "202611211307");
	assert_string_equal(e[2].name, "202611211307-2");
	assert_string_equal(e[3].name, "202611211307-10"); /* by number, not by text */
	assert_true(e[1].start == 1795266420.0 && e[1].stop == 1795266440.0);
	tally_epochs_free(e, n);

	/* a fourth epoch in that minute is -11; another minute has no suffix */
	char *nm = tally_epoch_new_name(dir, 1795266420.0 + 30);
	assert_string_equal(nm, "202611211307-11");
	free(nm);
	nm = tally_epoch_new_name(dir, 1795266420.0 + 60);
	assert_string_equal(nm, "202611211308");
	free(nm);
	tally_remove_tree(tmp);
	free(dir);
	free(tmp);
}

static void test_epoch__prune(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dir = daemon_dir(tmp);
	/* five epochs an hour apart, the last ending at 17:00 */
	add_epoch(dir, "202611211200", 1, 1, "2026-11-21T12:00:00Z", "2026-11-21T13:00:00Z");
	add_epoch(dir, "202611211300", 1, 1, "2026-11-21T13:00:00Z", "2026-11-21T14:00:00Z");
	add_epoch(dir, "202611211400", 1, 1, "2026-11-21T14:00:00Z", "2026-11-21T15:00:00Z");
	add_epoch(dir, "202611211500", 1, 1, "2026-11-21T15:00:00Z", "2026-11-21T16:00:00Z");
	add_epoch(dir, "202611211600", 1, 1, "2026-11-21T16:00:00Z", "2026-11-21T17:00:00Z");
	double now = 1795284000.0; /* 2026-11-21T17:00:00Z */
	/* keep 90 minutes: only 16:00 qualifies, but the newest three always stay */
	assert_int_equal(tally_epochs_prune(dir, 5400, now, 3, NULL), 2);
	struct tally_epoch *e;
	size_t n;
	assert_int_equal(tally_epochs_list(dir, &e, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(e[0].name, "202611211400");
	tally_epochs_free(e, n);
	/* nothing older is left that may go */
	assert_int_equal(tally_epochs_prune(dir, 60, now, 3, NULL), 0);
	/* with keep_min 0 the current one still stays */
	assert_int_equal(tally_epochs_prune(dir, 60, now, 0, "202611211400"), 2);
	assert_int_equal(tally_epochs_list(dir, &e, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(e[0].name, "202611211400");
	tally_epochs_free(e, n);
	/* no leftovers of the deletions */
	assert_int_equal(unit_dir_entries(dir), 2);
	tally_remove_tree(tmp);
	free(dir);
	free(tmp);
}

/* ---- the builder: merging ---- */

static uint64_t count_at(const struct tally_db *db, const char *kind, uint64_t off, int e)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < db->nentries; i++)
		if (!strcmp(db->images[db->entries[i].image].kind, kind) &&
		    db->entries[i].offset == off)
			sum += db->counts[i * (size_t)db->nevents + (size_t)e];
	return sum;
}

static void test_epoch__merge(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	/* a: cpu-clock only, no stacks, /bin/true is a library there */
	char *pa = unit_path(tmp, "a");
	make_db(pa, 0x10, 5, "2026-11-21T13:00:00Z", "2026-11-21T13:01:00Z");
	/* b: two events with stacks, /bin/true the executable of a task */
	struct tally_agg ag;
	tally_agg_init(&ag, 2, false, false);
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_FILE;
	k.path = (char *)"/bin/true";
	uint32_t im = tally_agg_image(&ag, &k);
	uint32_t f1 = tally_agg_frame(&ag, im, 0x10), f2 = tally_agg_frame(&ag, im, 0x20);
	uint32_t fr[] = { f1, f2 };
	uint32_t st = tally_agg_stack(&ag, fr, 2);
	tally_agg_count(&ag, st, 0, 0, 3);
	tally_agg_count_w(&ag, st, 0, 1, 7, 7000000); /* 7 samples of 1 ms */
	ag.samples[0] += 3;
	ag.samples[1] += 7;
	ag.lost = 2;
	struct tally_proc *p = tally_agg_proc(&ag, 42, true);
	strcpy(p->comm, "true");
	p->exe = xstrdup("/bin/true");
	p->sampled = true;
	tally_agg_tasks(&ag);
	struct tally_meta m = { 0 };
	tally_meta_set(&m, "format-version", "1");
	tally_meta_set(&m, "events", "page-faults,cpu-clock");
	tally_meta_set(&m, "call-graph", "fp");
	tally_meta_set(&m, "start-time", "2026-11-21T13:01:00Z");
	tally_meta_set(&m, "stop-time", "2026-11-21T13:02:00Z");
	tally_meta_set(&m, "duration", "60.000");
	struct tally_db b;
	assert_int_equal(tally_db_from_agg(&b, &ag, &m, NULL), 0);
	tally_meta_release(&m);
	tally_agg_release(&ag);

	struct tally_db a;
	assert_int_equal(tally_db_open(&a, pa), 0);
	char *ev[] = { (char *)"cpu-clock", (char *)"page-faults" };
	struct tally_db_builder *bl = tally_db_builder_new(2, ev, false, true);
	tally_db_builder_add(bl, &a);
	tally_db_builder_add(bl, &b);
	struct tally_db out;
	tally_db_builder_finish(bl, &out);

	/* one image (exec wins over lib), events matched by name, counts summed */
	assert_int_equal(out.nimages, 1);
	assert_string_equal(out.images[0].kind, "exec");
	assert_int_equal(out.samples[0], 5 + 7);
	assert_int_equal(out.samples[1], 3);
	assert_int_equal(count_at(&out, "exec", 0x10, 0), 5 + 7);
	assert_int_equal(count_at(&out, "exec", 0x10, 1), 3);
	assert_int_equal(out.lost, 2);
	/* a's samples got one-frame stacks: the stacks still hold every sample */
	assert_true(out.has_stacks);
	assert_int_equal(out.nstacks, 2);
	uint64_t sum0 = 0;
	for (size_t s = 0; s < out.nstacks; s++)
		sum0 += out.stack_counts[s * 2];
	assert_int_equal(sum0, out.samples[0]);
	/* the session spans both, durations add up */
	assert_string_equal(tally_meta_get(&out.session, "start-time"), "2026-11-21T13:00:00Z");
	assert_string_equal(tally_meta_get(&out.session, "stop-time"), "2026-11-21T13:02:00Z");
	assert_string_equal(tally_meta_get(&out.session, "duration"), "120.000");
	assert_string_equal(tally_meta_get(&out.session, "events"), "cpu-clock,page-faults");
	assert_string_equal(tally_meta_get(&out.session, "samples"), "12,3");
	assert_int_equal(out.ntasks, 1);
	/* the weights add up beside the counts (a's: 1 a sample, its tally_agg_count) */
	assert_true(out.has_weights);
	assert_string_equal(tally_meta_get(&out.session, "format-version"), "4");
	assert_string_equal(tally_meta_get(&out.session, "weight-total"), "7000005,3");
	uint64_t w0 = 0;
	for (size_t s = 0; s < out.nstacks; s++)
		w0 += out.stack_weights[s * 2];
	assert_int_equal(w0, 7000005);

	/* and what it makes is a valid database */
	char *po = unit_path(tmp, "out");
	assert_int_equal(tally_db_save(&out, po, false), 0);
	struct tally_db back;
	if (tally_db_open(&back, po))
		fail_msg("the merged database does not read back: %s", tally_errmsg());
	assert_int_equal(back.samples[0], 12);
	assert_int_equal(back.nstacks, 2);
	assert_true(back.has_weights);
	uint64_t bw = 0;
	for (size_t i = 0; i < back.nentries; i++)
		bw += back.weights[i * 2];
	assert_int_equal(bw, 7000005);
	tally_db_release(&back);
	/* saved again over itself: replaced, nothing left next to it */
	assert_int_equal(tally_db_save(&out, po, true), 0);
	assert_int_equal(unit_dir_entries(tmp), 2);

	tally_db_release(&out);
	tally_db_release(&a);
	tally_db_release(&b);
	tally_remove_tree(tmp);
	free(po);
	free(pa);
	free(tmp);
}

/* An epoch with call stacks of /bin/true: stack i is frames offs[i][0..2) with n[i] samples. */
static void make_cg_epoch(const char *dir, const char *name, const uint64_t (*offs)[2],
			  const uint64_t *n, size_t k, const char *start)
{
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_image img;
	memset(&img, 0, sizeof(img));
	img.kind = TALLY_IMG_FILE;
	img.path = (char *)"/bin/true";
	uint32_t im = tally_agg_image(&a, &img);
	for (size_t i = 0; i < k; i++) {
		uint32_t fr[2] = { tally_agg_frame(&a, im, offs[i][0]),
				   tally_agg_frame(&a, im, offs[i][1]) };
		tally_agg_count(&a, tally_agg_stack(&a, fr, 2), 0, 0, n[i]);
		a.samples[0] += n[i];
	}
	struct tally_meta m = { 0 };
	tally_meta_set(&m, "format-version", "1");
	tally_meta_set(&m, "events", "cpu-clock");
	tally_meta_set(&m, "call-graph", "fp");
	tally_meta_set(&m, "target", "system");
	tally_meta_set(&m, "start-time", "%s", start);
	tally_meta_set(&m, "stop-time", "%s", start);
	tally_meta_set(&m, "duration", "60.000");
	char *p = unit_path(dir, name);
	if (tally_db_write(p, false, &a, &m))
		fail_msg("tally_db_write '%s': %s", p, tally_errmsg());
	free(p);
	tally_meta_release(&m);
	tally_agg_release(&a);
}

/* A daemon's epochs opened with their stacks left unread, then read: the same
 * stacks, in the same order, as when they are merged at once: equal stacks of
 * two epochs summed, the one-frame stacks of an epoch without stacks in their
 * place between them. A damaged epoch fails the load, not the open. */
static void test_epoch__merge_stacks_later(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dir = daemon_dir(tmp);
	static const uint64_t s1[][2] = { { 0x10, 0x100 }, { 0x20, 0x100 } },
			      s3[][2] = { { 0x30, 0x200 }, { 0x10, 0x100 } };
	static const uint64_t n1[] = { 4, 5 }, n3[] = { 6, 7 };
	make_cg_epoch(dir, "202611211300", s1, n1, 2, "2026-11-21T13:00:00Z");
	add_epoch(dir, "202611211301", 0x40, 3, "2026-11-21T13:01:00Z", "2026-11-21T13:02:00Z");
	make_cg_epoch(dir, "202611211302", s3, n3, 2, "2026-11-21T13:02:00Z");
	struct tally_db now, later;
	if (tally_db_open_select(&now, dir, NULL))
		fail_msg("%s", tally_errmsg());
	assert_int_equal(tally_db_open_flags(&later, dir, NULL, TALLY_DB_STACKS_LATER), 0);
	assert_int_equal(later.nstacks, 0);
	assert_non_null(later.lazy);
	assert_int_equal(later.nentries, now.nentries);
	if (tally_db_load_stacks(&later))
		fail_msg("%s", tally_errmsg());
	/* 0x10<-0x100 (4 + 7), 0x20<-0x100, the stack-less epoch's 0x40, 0x30<-0x200 */
	assert_int_equal(now.nstacks, 4);
	assert_int_equal(later.nstacks, now.nstacks);
	static const uint64_t leaf[] = { 0x10, 0x20, 0x40, 0x30 }, count[] = { 11, 5, 3, 6 };
	for (size_t i = 0; i < now.nstacks; i++) {
		const struct tally_db_stack *a = &now.stacks[i], *b = &later.stacks[i];
		assert_int_equal(a->len, b->len);
		for (uint32_t f = 0; f < a->len; f++) {
			assert_int_equal(tally_db_frame(&now, a, f)->offset,
					 tally_db_frame(&later, b, f)->offset);
			assert_int_equal(tally_db_frame(&now, a, f)->image,
					 tally_db_frame(&later, b, f)->image);
		}
		assert_int_equal(tally_db_frame(&later, b, 0)->offset, leaf[i]);
		assert_int_equal(now.stack_counts[i], count[i]);
		assert_int_equal(later.stack_counts[i], count[i]);
	}
	tally_db_release(&now);
	tally_db_release(&later);

	/* one epoch's stacks damaged: its name is in the load's error */
	char *st = unit_path(dir, "202611211302/stacks");
	unit_write_str(st, "1 0 0:zz\n");
	assert_int_equal(tally_db_open_flags(&later, dir, NULL, TALLY_DB_STACKS_LATER), 0);
	assert_int_not_equal(tally_db_load_stacks(&later), 0);
	assert_errmsg_has("202611211302/stacks' line 1");
	tally_db_release(&later);
	assert_int_not_equal(tally_db_open_select(&now, dir, NULL), 0);
	assert_errmsg_has("202611211302/stacks' line 1");
	free(st);
	tally_remove_tree(tmp);
	free(dir);
	free(tmp);
}

/* ---- bundles ---- */

static char *write_bundle(const char *tmp, const char *name, const char *text, size_t len)
{
	char *p = unit_path(tmp, name);
	unit_write(p, text, len);
	return p;
}

static void test_epoch__bundle(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *pa = unit_path(tmp, "a");
	make_db(pa, 0x30, 9, "2026-11-21T13:00:00Z", "2026-11-21T13:01:00Z");
	struct tally_db a;
	assert_int_equal(tally_db_open(&a, pa), 0);
	struct strbuf sb = STRBUF_INIT;
	assert_int_equal(tally_db_bundle(&a, &sb), 0);
	assert_true(!strncmp(sb.buf, "tally-bundle: 1\n", 16));
	size_t nf = 0;
	assert_true(tally_db_bytes(&a, &nf) > 0);
	assert_true(nf >= 3); /* a .prof, images, tasks, session at least */
	char *pb = write_bundle(tmp, "x.bundle", sb.buf, sb.len);
	struct tally_db b;
	if (tally_db_open(&b, pb))
		fail_msg("bundle does not read back: %s", tally_errmsg());
	assert_string_equal(b.path, pb);
	assert_int_equal(b.samples[0], 9);
	assert_int_equal(count_at(&b, "lib", 0x30, 0), 9);
	assert_non_null(b.tmpdir);
	char *unpacked = xstrdup(b.tmpdir);
	assert_true(unit_exists(unpacked));
	tally_db_release(&b);
	assert_false(unit_exists(unpacked)); /* removed with the database */
	free(unpacked);

	/* damage: each is refused with the bundle's name, and nothing stays unpacked */
	struct {
		const char *what;
		char *text;
	} bad[8];
	size_t nb = 0;
	bad[nb].what = "truncated";
	bad[nb++].text = xstrndup(sb.buf, sb.len - 20);
	bad[nb].what = "no end";
	bad[nb++].text = xstrndup(sb.buf, (size_t)(strstr(sb.buf, "end: ") - sb.buf));
	struct strbuf t = STRBUF_INIT;
	strbuf_add(&t, sb.buf, sb.len);
	strbuf_addstr(&t, "extra\n");
	bad[nb].what = "trailing garbage";
	bad[nb++].text = strbuf_detach(&t);
	bad[nb].what = "escaping name";
	bad[nb++].text = xstrdup("tally-bundle: 1\nfile: 1 ../evil\nx\nend: 1 files\n");
	bad[nb].what = "duplicate";
	bad[nb++].text =
		xstrdup("tally-bundle: 1\nfile: 1 session\nx\nfile: 1 session\nx\nend: 2 files\n");
	bad[nb].what = "wrong count";
	bad[nb++].text = xstrdup("tally-bundle: 1\nfile: 1 tasks\nx\nend: 3 files\n");
	bad[nb].what = "bad length";
	bad[nb++].text = xstrdup("tally-bundle: 1\nfile: 99 tasks\nx\nend: 1 files\n");
	bad[nb].what = "no session";
	bad[nb++].text = xstrdup("tally-bundle: 1\nend: 0 files\n");
	for (size_t i = 0; i < nb; i++) {
		char *p = write_bundle(tmp, "bad.bundle", bad[i].text, strlen(bad[i].text));
		struct tally_db d;
		if (tally_db_open(&d, p) >= 0)
			fail_msg("%s bundle accepted", bad[i].what);
		assert_errmsg_has("bad.bundle");
		if (strstr(tally_errmsg(), "/tmp/tally-bundle."))
			fail_msg("%s: the error names the unpacked directory: %s", bad[i].what,
				 tally_errmsg());
		free(p);
		free(bad[i].text);
	}
	char *p = write_bundle(tmp, "future.bundle", "tally-bundle: 7\n", 16);
	struct tally_db d;
	assert_true(tally_db_open(&d, p) < 0);
	assert_errmsg_has("newer tally");
	free(p);
	p = write_bundle(tmp, "perf.data", "PERFILE2", 8);
	assert_true(tally_db_open(&d, p) < 0);
	assert_errmsg_has("not a tally database");
	free(p);
	/* the bundles left no directory behind in TMPDIR: all unpacked ones are gone
	 * (this test's own directory holds only what it wrote) */
	assert_int_equal(unit_dir_entries(tmp), 5);

	strbuf_release(&sb);
	tally_db_release(&a);
	tally_remove_tree(tmp);
	free(pb);
	free(pa);
	free(tmp);
}

/* ---- selection ---- */

static int count_files(void *ctx, const char *name, const char *data, size_t len)
{
	(void)name;
	(void)data;
	(void)len;
	(*(size_t *)ctx)++;
	return 0;
}

static void test_epoch__bundle_damaged_header(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	/* exactly 'tally-bundle:': the version was read into a buffer sscanf never filled */
	char *p = write_bundle(tmp, "short.bundle", "tally-bundle:", 13);
	struct tally_db d;
	memset(&d, 0xab, sizeof(d));
	assert_true(tally_db_open(&d, p) < 0);
	char want[512];
	snprintf(
		want, sizeof(want),
		"'%s' is a damaged bundle: its first line names no format-version (drain it again)",
		p);
	assert_string_equal(tally_errmsg(), want);
	assert_null(d.path);
	free(p);
	p = write_bundle(tmp, "blank.bundle", "tally-bundle:   \nend: 0 files\n", 30);
	assert_true(tally_db_open(&d, p) < 0);
	assert_errmsg_has("names no format-version");
	free(p);
	/* the version as written, escaped */
	p = write_bundle(tmp, "esc.bundle", "tally-bundle: \x1b[2J9\n", 20);
	assert_true(tally_db_open(&d, p) < 0);
	assert_errmsg_has("format-version \\x1b[2J9, and this tally reads version 1");
	free(p);

	/* the (buffer, length) parser: bytes with no NUL after them, no file system */
	char *pa = unit_path(tmp, "a");
	make_db(pa, 0x30, 9, "2026-11-21T13:00:00Z", "2026-11-21T13:01:00Z");
	struct tally_db a;
	assert_int_equal(tally_db_open(&a, pa), 0);
	struct strbuf sb = STRBUF_INIT;
	assert_int_equal(tally_db_bundle(&a, &sb), 0);
	size_t nf = 0;
	tally_db_bytes(&a, &nf);
	char *exact = malloc(sb.len);
	assert_non_null(exact);
	memcpy(exact, sb.buf, sb.len);
	size_t seen = 0;
	assert_int_equal(tally_bundle_parse(exact, sb.len, "mem", count_files, &seen), 0);
	assert_int_equal(seen, nf);
	/* every prefix is refused, none read past its end */
	for (size_t cut = 0; cut < sb.len; cut++) {
		int r = tally_bundle_parse(exact, cut, "mem", NULL, NULL);
		if (r != -EINVAL && r != -ENOTDIR)
			fail_msg("a bundle cut at byte %zu: %d", cut, r);
	}
	free(exact);
	const char dup[] = "tally-bundle: 1\nfile: 1 tasks\nx\nfile: 1 tasks\ny\nend: 2 files\n";
	assert_int_equal(tally_bundle_parse(dup, sizeof(dup) - 1, "mem", NULL, NULL), -EINVAL);
	assert_errmsg_has("holds the file 'tasks' twice");
	const char nul[] = "tally-bundle: 1\nfile: 1 ta\0ks\nx\nend: 1 files\n";
	assert_int_equal(tally_bundle_parse(nul, sizeof(nul) - 1, "mem", NULL, NULL), -EINVAL);
	const char huge[] =
		"tally-bundle: 1\nfile: 99999999999999999999999 tasks\nx\nend: 1 files\n";
	assert_int_equal(tally_bundle_parse(huge, sizeof(huge) - 1, "mem", NULL, NULL), -EINVAL);
	/* the database from memory */
	struct tally_db m;
	assert_int_equal(tally_db_open_bundle_buf(&m, sb.buf, sb.len, "drained"), 0);
	assert_string_equal(m.path, "drained");
	assert_int_equal(m.samples[0], 9);
	tally_db_release(&m);
	strbuf_release(&sb);
	tally_db_release(&a);
	tally_remove_tree(tmp);
	free(pa);
	free(tmp);
}

static void test_epoch__merge_overflow(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dir = daemon_dir(tmp);
	/* each epoch adds up; merged, 2^63 + 2^63 wrapped to 0 */
	add_epoch(dir, "202611211300", 0x10, 1ull << 63, "2026-11-21T13:00:00Z",
		  "2026-11-21T13:59:00Z");
	add_epoch(dir, "202611211400", 0x10, 1ull << 63, "2026-11-21T14:00:00Z",
		  "2026-11-21T14:59:00Z");
	struct tally_db db;
	memset(&db, 0xab, sizeof(db));
	assert_int_equal(tally_db_open(&db, dir), -EINVAL);
	assert_errmsg_has(
		"its epochs together hold more than 18446744073709551615 'cpu-clock' samples");
	assert_errmsg_has(dir);
	/* one at a time they read */
	struct tally_db_select sel = { 0 };
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_EPOCH, "202611211400"), 1);
	assert_int_equal(tally_db_open_select(&db, dir, &sel), 0);
	assert_true(db.samples[0] == 1ull << 63);
	tally_db_release(&db);
	tally_remove_tree(tmp);
	free(dir);
	free(tmp);
}

/* Appends line to the session of epoch name. */
static void epoch_session_add(const char *dir, const char *name, const char *line)
{
	char *p = unit_path(dir, name);
	char *sp = unit_path(p, "session");
	char *text = unit_read(sp, NULL);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s%s\n", text, line);
	unit_write(sp, sb.buf, sb.len);
	strbuf_release(&sb);
	free(text);
	free(sp);
	free(p);
}

/* The frame-pointer repair's stop reasons add up over epochs, as the DWARF
 * ones do; an epoch from before the repair said them adds nothing; sums that
 * would wrap are refused. */
static void test_epoch__fp_repair_sums(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dir = daemon_dir(tmp);
	add_epoch(dir, "202611211300", 0x10, 1, "2026-11-21T13:00:00Z", "2026-11-21T13:59:00Z");
	add_epoch(dir, "202611211400", 0x10, 10, "2026-11-21T14:00:00Z", "2026-11-21T14:59:00Z");
	add_epoch(dir, "202611211500", 0x10, 100, "2026-11-21T15:00:00Z", "2026-11-21T15:30:00Z");
	epoch_session_add(
		dir, "202611211300",
		"fp-repair-stops: no CFI 1, stack copy too small 2, chain not rejoined 3, depth limit 4");
	epoch_session_add(dir, "202611211300", "fp-repair-frames: 7");
	epoch_session_add(
		dir, "202611211400",
		"fp-repair-stops: no CFI 10, stack copy too small 20, chain not rejoined 30, depth limit 40");
	epoch_session_add(dir, "202611211400", "fp-repair-frames: 70");
	struct tally_db db;
	if (tally_db_open(&db, dir))
		fail_msg("%s", tally_errmsg());
	assert_string_equal(
		tally_meta_get(&db.session, "fp-repair-stops"),
		"no CFI 11, stack copy too small 22, chain not rejoined 33, depth limit 44");
	assert_string_equal(tally_meta_get(&db.session, "fp-repair-frames"), "77");
	tally_db_release(&db);
	/* two halves of 2^64 in one cause */
	epoch_session_add(
		dir, "202611211500",
		"fp-repair-stops: no CFI 0, stack copy too small 18446744073709551615, chain not rejoined 0, depth limit 0");
	memset(&db, 0xab, sizeof(db));
	assert_int_equal(tally_db_open(&db, dir), -EINVAL);
	assert_errmsg_has("fp-repair-*");
	tally_remove_tree(tmp);
	free(dir);
	free(tmp);
}

static void test_epoch__select(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *dir = daemon_dir(tmp);
	add_epoch(dir, "202611211300", 0x10, 1, "2026-11-21T13:00:00Z", "2026-11-21T13:59:00Z");
	add_epoch(dir, "202611211400", 0x10, 10, "2026-11-21T14:00:00Z", "2026-11-21T14:59:00Z");
	add_epoch(dir, "202611211500", 0x20, 100, "2026-11-21T15:00:00Z", "2026-11-21T15:30:00Z");
	struct tally_db db;
	/* all, merged */
	assert_int_equal(tally_db_open(&db, dir), 0);
	assert_int_equal(db.samples[0], 111);
	assert_int_equal(db.nepochs, 3);
	assert_string_equal(db.path, dir);
	assert_str_has(tally_meta_get(&db.session, "epochs"), "202611211300 to 202611211500 (3)");
	tally_db_release(&db);

	struct tally_db_select sel = { 0 };
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_EPOCH, "202611211400"), 1);
	assert_int_equal(tally_db_open_select(&db, dir, &sel), 0);
	assert_int_equal(db.samples[0], 10);
	assert_int_equal(db.nepochs, 1);
	tally_db_release(&db);

	memset(&sel, 0, sizeof(sel));
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_SINCE, "2026-11-21T14:30"), 1);
	assert_int_equal(tally_db_open_select(&db, dir, &sel), 0);
	assert_int_equal(db.samples[0], 110);
	tally_db_release(&db);
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_UNTIL, "2026-11-21T15:00"), 1);
	assert_int_equal(tally_db_open_select(&db, dir, &sel), 0);
	assert_int_equal(db.samples[0], 10); /* the 15:00 epoch began at the end of the range */
	tally_db_release(&db);

	/* nothing selected: the error says what there is */
	memset(&sel, 0, sizeof(sel));
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_SINCE, "2026-11-22"), 1);
	assert_true(tally_db_open_select(&db, dir, &sel) < 0);
	assert_errmsg_has("no epoch");
	assert_errmsg_has("202611211300");
	memset(&sel, 0, sizeof(sel));
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_EPOCH, "202611211401"), 1);
	assert_true(tally_db_open_select(&db, dir, &sel) < 0);
	assert_errmsg_has("no epoch '202611211401'");
	assert_errmsg_has("202611211500");

	/* option conflicts and bad values */
	memset(&sel, 0, sizeof(sel));
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_EPOCH, "202611211400"), 1);
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_SINCE, "1h"), -EINVAL);
	assert_errmsg_has("--epoch");
	memset(&sel, 0, sizeof(sel));
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_SINCE, "2026-11-21T15:00"), 1);
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_UNTIL, "2026-11-21T14:00"), -EINVAL);
	assert_errmsg_has("after --until");
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_EPOCH, "nope"), -EINVAL);
	assert_int_equal(tally_db_select_opt(&sel, 'i', "x"), 0);

	/* a plain database is one epoch: in or out as a whole; --epoch makes no sense */
	char *plain = unit_path(tmp, "plain");
	make_db(plain, 0x10, 4, "2026-11-21T13:00:00Z", "2026-11-21T13:01:00Z");
	memset(&sel, 0, sizeof(sel));
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_SINCE, "2026-11-21T12:00"), 1);
	assert_int_equal(tally_db_open_select(&db, plain, &sel), 0);
	assert_int_equal(db.samples[0], 4);
	tally_db_release(&db);
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_UNTIL, "2026-11-21T12:30"), 1);
	assert_true(tally_db_open_select(&db, plain, &sel) < 0);
	assert_errmsg_has("outside the range");
	memset(&sel, 0, sizeof(sel));
	assert_int_equal(tally_db_select_opt(&sel, TALLY_OPT_EPOCH, "202611211300"), 1);
	assert_true(tally_db_open_select(&db, plain, &sel) < 0);
	assert_errmsg_has("not a daemon database");

	/* a daemon database without epochs yet */
	char *empty = unit_path(tmp, "empty");
	assert_int_equal(mkdir(empty, 0700), 0);
	char *mk = unit_path(empty, TALLY_DAEMON_MARKER);
	unit_write_str(mk, "format-version: 1\n");
	assert_true(tally_db_open(&db, empty) < 0);
	assert_errmsg_has("no epoch yet");

	free(mk);
	free(empty);
	free(plain);
	tally_remove_tree(tmp);
	free(dir);
	free(tmp);
}

/* ---- the control protocol ---- */

static void test_epoch__ctl_parse(void **state)
{
	(void)state;
	struct tally_ctl_req q;
	const char *ok[] = { "start",
			     "stop",
			     "clear",
			     "startclr",
			     "flush",
			     "epoch",
			     "status",
			     "drain",
			     " status ",
			     "cpus all on",
			     "cpus 0 off",
			     "cpus 0-1 on freq 99",
			     "cpus 1 on period 250000",
			     NULL };
	for (int i = 0; ok[i]; i++) {
		if (tally_ctl_parse_line(ok[i], 2, &q))
			fail_msg("'%s' refused: %s", ok[i], tally_errmsg());
		tally_ctl_req_release(&q);
	}
	assert_int_equal(tally_ctl_parse_line("cpus 1 off freq 99", 2, &q), 0);
	assert_int_equal(q.op, TALLY_CTL_CPUS);
	assert_false(q.cpus[0]);
	assert_true(q.cpus[1]);
	assert_false(q.on);
	assert_int_equal(q.freq, 99);
	tally_ctl_req_release(&q);

	/* anything that is not a command gets the command list */
	const char *garbage[] = { "",         "   ",        "bogus",   "STATUS", "status\x01",
				  "\xff\xfe", "start;stop", "statusx", NULL };
	for (int i = 0; garbage[i]; i++) {
		if (tally_ctl_parse_line(garbage[i], 2, &q) != -EINVAL)
			fail_msg("'%s' accepted", garbage[i]);
		assert_string_equal(tally_errmsg(), TALLY_CTL_USAGE);
	}
	/* a command with bad arguments gets its own usage */
	const char *badargs[] = { "start now", "flush 1", "drain -o x", "status all" };
	for (size_t i = 0; i < ARRAY_SIZE(badargs); i++) {
		assert_int_equal(tally_ctl_parse_line(badargs[i], 2, &q), -EINVAL);
		char want[32];
		snprintf(want, sizeof(want), "usage: %.*s", (int)strcspn(badargs[i], " "),
			 badargs[i]);
		assert_true(!strncmp(tally_errmsg(), want, strlen(want)));
	}
	const char *badcpus[] = { "cpus",
				  "cpus 0",
				  "cpus 9 on",
				  "cpus 0 maybe",
				  "cpus 0 on freq",
				  "cpus 0 on freq 0",
				  "cpus 0 on speed 9",
				  "cpus 0 on freq x",
				  "cpus 0 on period 1 2",
				  "cpus a b c d e f g h i j" };
	for (size_t i = 0; i < ARRAY_SIZE(badcpus); i++) {
		if (tally_ctl_parse_line(badcpus[i], 2, &q) != -EINVAL)
			fail_msg("'%s' accepted", badcpus[i]);
		assert_true(!strncmp(tally_errmsg(), TALLY_CTL_CPUS_USAGE,
				     strlen(TALLY_CTL_CPUS_USAGE)));
	}
	/* the reply frame */
	struct strbuf sb = STRBUF_INIT;
	tally_ctl_frame(&sb, true, "abc", 3);
	tally_ctl_frame(&sb, false, "", 0);
	assert_string_equal(sb.buf, "ok 3\nabcerror 0\n");
	strbuf_release(&sb);
}

/* ---- the client's reading of a reply ---- */

/* A peer on a fresh socket in dir that answers any connection with reply
 * (len bytes) and then keeps the connection open; returns its pid. */
static pid_t fake_daemon(const char *sock, const char *reply, size_t len)
{
	int ls = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(ls >= 0);
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ls, 4), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(30);
		for (;;) {
			int c = accept(ls, NULL, NULL);
			if (c < 0)
				_exit(1);
			char req[256];
			if (read(c, req, sizeof(req)) < 0)
				_exit(1);
			if (write(c, reply, len) != (ssize_t)len)
				_exit(1);
			/* stays open: the client must decide from what it got */
		}
	}
	close(ls);
	return pid;
}

static void test_epoch__ctl_reply_bounded(void **state)
{
	(void)state;
	char *tmp = unit_tmpdir();
	char *sock = unit_path(tmp, "s");
	static const struct {
		const char *reply;
		int want;
		const char *msg;
	} cases[] = {
		/* a length near 2^64 wrapped hdr + want, and the buffer's doubling spun forever */
		{ "ok 18446744073709551615\n", -EPROTO,
		  "announced a reply of 18446744073709551615 bytes" },
		{ "ok 18446744073709551000\nabc", -EPROTO, "more than the 4294967296" },
		{ "ok 99999999999999999999999\n", -EPROTO, "announced a reply" },
		{ "ok 4294967297\n", -EPROTO, "announced a reply" },
		{ "error 65537\n", -EPROTO, "an error reply may hold" },
	};
	alarm(60); /* the hang this guards against: fail rather than spin */
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		unlink(sock);
		pid_t pid = fake_daemon(sock, cases[i].reply, strlen(cases[i].reply));
		bool ok = true;
		struct strbuf body = STRBUF_INIT;
		double t0 = tally_now_mono();
		int r = tally_ctl_call(sock, "status", 5, &ok, &body);
		double took = tally_now_mono() - t0;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (r != cases[i].want)
			fail_msg("reply '%s': %d (%s), want %d", cases[i].reply, r,
				 r ? tally_errmsg() : "ok", cases[i].want);
		assert_errmsg_has(cases[i].msg);
		assert_errmsg_has(sock);
		assert_true(took < 2); /* refused at the header, not after the timeout */
		assert_int_equal(body.len, 0);
		strbuf_release(&body);
	}
	/* the header parser alone, over exact-size buffers */
	static const struct {
		const char *in;
		int want;
		bool ok;
		size_t hdr, len;
	} hs[] = {
		{ "ok 5\nhello", 0, true, 5, 5 },
		{ "error 0\n", 0, false, 8, 0 },
		{ "ok 4294967296\n", 0, true, 14, 4294967296ull },
		{ "ok 12", 1, false, 0, 0 }, /* not whole yet */
		{ "", 1, false, 0, 0 },
		{ "ok \n", -EPROTO, false, 0, 0 },
		{ "ok -1\n", -EPROTO, false, 0, 0 },
		{ "ok 1 \n", -EPROTO, false, 0, 0 },
		{ "yes 1\n", -EPROTO, false, 0, 0 },
		{ "ok 4294967297\n", -EPROTO, false, 0, 0 },
		{ "error 65537\n", -EPROTO, false, 0, 0 },
		{ "ok 18446744073709551616\n", -EPROTO, false, 0, 0 },
		{ "ok 00000000000000000000000000000000000000000000000000000000000001\n", -EPROTO,
		  false, 0, 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(hs); i++) {
		size_t n = strlen(hs[i].in);
		char *b = malloc(n ? n : 1);
		assert_non_null(b);
		memcpy(b, hs[i].in, n);
		bool hok = !hs[i].ok;
		size_t hdr = 77, blen = 77;
		int r = tally_ctl_reply_header(b, n, "peer", &hok, &hdr, &blen);
		if (r != hs[i].want)
			fail_msg("header '%s': %d, want %d", hs[i].in, r, hs[i].want);
		if (!r) {
			assert_int_equal(hok, hs[i].ok);
			assert_int_equal(hdr, hs[i].hdr);
			assert_int_equal(blen, hs[i].len);
		}
		free(b);
	}
	/* what is in bounds still works */
	unlink(sock);
	pid_t pid = fake_daemon(sock, "ok 5\nhello", 10);
	bool ok = false;
	struct strbuf body = STRBUF_INIT;
	assert_int_equal(tally_ctl_call(sock, "status", 5, &ok, &body), 0);
	assert_true(ok);
	assert_int_equal(body.len, 5);
	assert_memory_equal(body.buf, "hello", 5);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	strbuf_release(&body);
	alarm(0);
	unlink(sock);
	rmdir(tmp);
	free(sock);
	free(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_epoch__parse_time),
		cmocka_unit_test(test_epoch__parse_size),
		cmocka_unit_test(test_epoch__names),
		cmocka_unit_test(test_epoch__list_and_new_name),
		cmocka_unit_test(test_epoch__prune),
		cmocka_unit_test(test_epoch__merge),
		cmocka_unit_test(test_epoch__merge_stacks_later),
		cmocka_unit_test(test_epoch__bundle),
		cmocka_unit_test(test_epoch__bundle_damaged_header),
		cmocka_unit_test(test_epoch__merge_overflow),
		cmocka_unit_test(test_epoch__select),
		cmocka_unit_test(test_epoch__fp_repair_sums),
		cmocka_unit_test(test_epoch__ctl_parse),
		cmocka_unit_test(test_epoch__ctl_reply_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
