/* Unit tests of merging: label sets and the 'labels' file (lib/db/labels.c),
 * the builder's labels and canonical order (lib/db/build.c), format version 2
 * written and read back, and the diff's count scaling (lib/report/diff.c). */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/db.h"
#include "tally/diff.h"
#include "tally/util.h"

/* ---- label sets ---- */

static void test_merge__label_parse(void **state)
{
	(void)state;
	char *k, *v;
	assert_int_equal(tally_label_parse("host=web1", "--label", &k, &v), 0);
	assert_string_equal(k, "host");
	assert_string_equal(v, "web1");
	free(k);
	free(v);
	/* a value may hold '=' and be empty (no such label) */
	assert_int_equal(tally_label_parse("run=a=b", "--label", &k, &v), 0);
	assert_string_equal(v, "a=b");
	free(k);
	free(v);
	assert_int_equal(tally_label_parse("run=", "--label", &k, &v), 0);
	assert_string_equal(v, "");
	free(k);
	free(v);
	static const char *const bad[] = { "host",  "=x",        "ho st=x",
					   "h/x=y", "host=a\tb", "host=\x1b[2J" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(tally_label_parse(bad[i], "--label", &k, &v), -EINVAL);
		assert_errmsg_has("invalid --label");
	}
	/* a key of 65 characters is one too many */
	char longkey[80];
	memset(longkey, 'k', 65);
	strcpy(longkey + 65, "=v");
	assert_int_equal(tally_label_parse(longkey, "--label", &k, &v), -EINVAL);
}

static void test_merge__labelset(void **state)
{
	(void)state;
	struct tally_labelset a = { 0 }, b = { 0 };
	tally_labelset_set(&a, "run", "x");
	tally_labelset_set(&a, "host", "h");
	tally_labelset_set(&a, "zone", "z");
	/* kept sorted by key */
	assert_int_equal(a.n, 3);
	assert_string_equal(a.v[0].key, "host");
	assert_string_equal(a.v[2].key, "zone");
	tally_labelset_set(&a, "run", "y");
	assert_string_equal(tally_labelset_get(&a, "run"), "y");
	tally_labelset_set(&a, "zone", "");
	assert_null(tally_labelset_get(&a, "zone"));
	assert_int_equal(a.n, 2);
	tally_labelset_copy(&b, &a);
	assert_int_equal(tally_labelset_cmp(&a, &b), 0);
	assert_int_equal(tally_labelset_hash(&a), tally_labelset_hash(&b));
	tally_labelset_set(&b, "run", "z");
	assert_true(tally_labelset_cmp(&a, &b) < 0);
	tally_labelset_set(&b, "run", "y");
	tally_labelset_set(&b, "a", "1");
	assert_true(tally_labelset_cmp(&a, &b) != 0);
	struct strbuf sb = STRBUF_INIT;
	tally_labelset_format(&sb, &b);
	assert_string_equal(sb.buf, "a=1,host=h,run=y");
	strbuf_release(&sb);
	tally_labelset_release(&a);
	tally_labelset_release(&b);
}

static void test_merge__labels_file(void **state)
{
	(void)state;
	struct tally_db db;
	memset(&db, 0, sizeof(db));
	const char good[] = "# id\tlabels\n1\thost=a\trun=x\\\\y\n2\thost=b\n";
	assert_int_equal(tally_db_parse_labels(&db, good, strlen(good), "labels"), 0);
	assert_int_equal(db.nlabels, 2);
	assert_string_equal(tally_db_label(&db, 1, "run"), "x\\y");
	assert_string_equal(tally_db_label(&db, 2, "host"), "b");
	assert_null(tally_db_label(&db, 0, "host"));
	assert_null(tally_db_label(&db, 3, "host"));
	/* written back the same */
	struct strbuf sb = STRBUF_INIT;
	tally_db_format_labels(&db, &sb);
	assert_string_equal(strchr(sb.buf, '\n') + 1, strchr(good, '\n') + 1);
	strbuf_release(&sb);
	tally_db_release(&db);

	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "2\thost=a\n", "expected label set 1" },
		{ "1\thost=a\n1\thost=b\n", "expected label set 2" },
		{ "1\thost\n", "is not a label" },
		{ "1\tho st=a\n", "is not a label" },
		{ "1\trun=a\thost=b\n", "not sorted" },
		{ "1\thost=a\thost=b\n", "given twice" },
		{ "1\n", "is empty" },
		{ "1\thost=a\n2\thost=a\n", "label set 1 again" },
		{ "1\thost=a\\tb\n", "is not a label" },
		{ "1\thost=a", "middle of a line" },
		{ "\t\t\n", "expected label set 1" },
		{ "x\thost=a\n", "expected label set 1" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&db, 0, sizeof(db));
		assert_int_equal(
			tally_db_parse_labels(&db, bad[i].text, strlen(bad[i].text), "labels"),
			-EINVAL);
		assert_errmsg_has(bad[i].why);
		assert_errmsg_has("'labels'");
		tally_db_release(&db);
	}
	memset(&db, 0, sizeof(db));
	assert_int_equal(tally_db_parse_labels(&db, "1\th=a\0\n", 7, "labels"), -EINVAL);
	assert_errmsg_has("binary data");
	tally_db_release(&db);
}

/* ---- databases built in memory ---- */

static struct tally_db_image image(const char *name, const char *id)
{
	struct tally_db_image im;
	memset(&im, 0, sizeof(im));
	im.name = (char *)name;
	im.path = (char *)name;
	im.id = (char *)id;
	im.id_kind = (char *)"xxh64";
	im.kind = (char *)"lib";
	return im;
}

/* A small database with call stacks: two images, a few entries and stacks,
 * its counts depending on seed, a session naming host. */
static void small_db(struct tally_db *out, unsigned seed, const char *host)
{
	char *ev[] = { (char *)"cpu-clock" };
	struct tally_db_builder *b = tally_db_builder_new(1, ev, false, true);
	struct tally_meta m = { 0 };
	tally_meta_set(&m, "format-version", "1");
	tally_meta_set(&m, "host", "%s", host);
	tally_meta_set(&m, "name", "r%u", seed);
	tally_meta_set(&m, "sampling", "frequency 999");
	tally_meta_set(&m, "call-graph", "fp");
	tally_meta_set(&m, "duration", "%u.%03u", seed, seed * 7 % 1000);
	tally_meta_set(&m, "start-time", "2026-11-2%uT10:00:00Z", seed % 10);
	tally_meta_set(&m, "stop-time", "2026-11-2%uT10:00:0%uZ", seed % 10, seed % 10);
	tally_db_builder_session(b, &m);
	tally_meta_release(&m);
	struct tally_db_image x = image(seed % 2 ? "libb.so" : "liba.so",
					seed % 2 ? "bbbbbbbbbbbbbbbb" : "aaaaaaaaaaaaaaaa");
	struct tally_db_image y = image("libc.so.6", "cccccccccccccccc");
	uint32_t ix = tally_db_builder_image(b, &x), iy = tally_db_builder_image(b, &y);
	for (unsigned k = 0; k < 4; k++) {
		uint64_t c = seed * 10 + k + 1;
		uint64_t off = 0x1000 + 0x10 * ((k + seed) % 4);
		tally_db_builder_entry(b, ix, 0, off, &c);
		struct tally_frame fr[2] = { { ix, off }, { iy, 0x500 + k } };
		tally_db_builder_stack(b, 0, fr, 2, &c);
	}
	struct tally_ksym ks = { 0xffffffff81000000ull, 0x100, 'T',
				 (char *)(seed % 2 ? "b_sym" : "a_sym"), NULL };
	tally_db_builder_ksym(b, &ks);
	tally_db_builder_task(b, (int)(100 + seed), "prog", "/bin/prog");
	tally_db_builder_finish(b, out);
}

/* The bytes of a merge of dbs[order[0..n)] (canonical unless told). */
static char *merged(struct tally_db *const *dbs, const int *order, size_t n, bool canonical,
		    struct tally_db *keep)
{
	char *ev[] = { (char *)"cpu-clock" };
	struct tally_db_builder *b = tally_db_builder_new(1, ev, false, true);
	if (canonical)
		tally_db_builder_canonical(b);
	for (size_t i = 0; i < n; i++) {
		const struct tally_db *src = dbs[order[i]];
		struct tally_labelset set = { 0 };
		tally_labelset_set(&set, "run", tally_meta_get(&src->session, "name"));
		tally_labelset_set(&set, "host", tally_meta_get(&src->session, "host"));
		tally_db_builder_source(b, &set);
		tally_labelset_release(&set);
		assert_int_equal(tally_db_builder_fits(b, src, "src"), 0);
		tally_db_builder_add(b, src);
	}
	struct tally_db out;
	tally_db_builder_finish(b, &out);
	struct strbuf sb = STRBUF_INIT;
	assert_int_equal(tally_db_bundle(&out, &sb), 0);
	if (keep)
		*keep = out;
	else
		tally_db_release(&out);
	return strbuf_detach(&sb);
}

static void test_merge__canonical(void **state)
{
	(void)state;
	struct tally_db a, b, c;
	small_db(&a, 1, "h1");
	small_db(&b, 2, "h2");
	small_db(&c, 3, "h1");
	struct tally_db *all[] = { &a, &b, &c };
	int abc[] = { 0, 1, 2 }, cba[] = { 2, 1, 0 }, bca[] = { 1, 2, 0 };
	char *x = merged(all, abc, 3, true, NULL);
	char *y = merged(all, cba, 3, true, NULL);
	char *z = merged(all, bca, 3, true, NULL);
	assert_string_equal(x, y);
	assert_string_equal(x, z);
	/* grouping: merge(merge(a, b), c) */
	struct tally_db ab;
	int two[] = { 0, 1 };
	free(merged(all, two, 2, true, &ab));
	struct tally_db *grouped[] = { &ab, &c };
	int gi[] = { 0, 1 };
	char *w = merged(grouped, gi, 2, true, NULL);
	assert_string_equal(x, w);
	/* the order of the adds shows without the canonical order */
	char *u = merged(all, abc, 3, false, NULL);
	char *v = merged(all, cba, 3, false, NULL);
	assert_string_not_equal(u, v);
	/* the session: what all agree on, what varies, the durations summed exactly */
	struct tally_db m;
	free(merged(all, abc, 3, true, &m));
	assert_string_equal(tally_meta_get(&m.session, "sampling"), "frequency 999");
	assert_null(tally_meta_get(&m.session, "host"));
	assert_string_equal(tally_meta_get(&m.session, "varies"), "host,name");
	assert_string_equal(tally_meta_get(&m.session, "duration"), "6.042");
	/* labels, and weights (a merge weighs every input's samples) */
	assert_string_equal(tally_meta_get(&m.session, "format-version"), "4");
	assert_int_equal(m.nlabels, 3);
	/* one kernel symbol, the same whichever came first */
	assert_int_equal(m.nksyms, 1);
	assert_string_equal(m.ksyms[0].name, "a_sym");
	tally_db_release(&m);
	free(u);
	free(v);
	free(w);
	free(x);
	free(y);
	free(z);
	tally_db_release(&ab);
	tally_db_release(&a);
	tally_db_release(&b);
	tally_db_release(&c);
}

static void test_merge__source_labels(void **state)
{
	(void)state;
	struct tally_db a, m;
	small_db(&a, 1, "h1");
	struct tally_db *one[] = { &a };
	int i0[] = { 0 };
	free(merged(one, i0, 1, true, &m));
	/* a merge merged again keeps its labels: the new source fills no key it has */
	struct tally_db *again[] = { &m };
	struct tally_db m2;
	free(merged(again, i0, 1, true, &m2));
	assert_int_equal(m2.nlabels, 1);
	assert_string_equal(tally_db_label(&m2, 1, "run"), "r1");
	assert_string_equal(tally_db_label(&m2, 1, "host"), "h1");
	for (size_t p = 0; p < m2.nprofs; p++)
		assert_int_equal(m2.profs[p].label, 1);
	for (size_t s = 0; s < m2.nstacks; s++)
		assert_int_equal(m2.stacks[s].label, 1);
	tally_db_release(&m2);
	tally_db_release(&m);
	tally_db_release(&a);
}

static void test_merge__fits(void **state)
{
	(void)state;
	struct tally_db a;
	small_db(&a, 1, "h1");
	char *ev[] = { (char *)"cpu-clock" };
	struct tally_db_builder *b = tally_db_builder_new(1, ev, false, true);
	assert_int_equal(tally_db_builder_fits(b, &a, "a.db"), 0);
	tally_db_builder_add(b, &a);
	/* a second database whose samples would wrap the sum */
	uint64_t keep = a.samples[0];
	a.samples[0] = UINT64_MAX - keep + 1;
	assert_int_equal(tally_db_builder_fits(b, &a, "big.db"), -EOVERFLOW);
	assert_errmsg_has("'big.db': its 'cpu-clock' samples");
	a.samples[0] = UINT64_MAX - keep;
	assert_int_equal(tally_db_builder_fits(b, &a, "big.db"), 0);
	a.samples[0] = keep;
	a.lost = UINT64_MAX;
	tally_db_builder_counters(b, 1, 0);
	assert_int_equal(tally_db_builder_fits(b, &a, "lost.db"), -EOVERFLOW);
	assert_errmsg_has("counters");
	tally_db_builder_free(b);
	tally_db_release(&a);
}

/* ---- format version 2 on disk ---- */

/* The small databases of hosts h1 and h2, and their merge (with labels). */
static void two_merged(struct tally_db *a, struct tally_db *b, struct tally_db *m)
{
	small_db(a, 1, "h1");
	small_db(b, 2, "h2");
	struct tally_db *all[] = { a, b };
	int ab[] = { 0, 1 };
	free(merged(all, ab, 2, true, m));
}

static void test_merge__version2_round_trip(void **state)
{
	(void)state;
	struct tally_db a, b, m;
	two_merged(&a, &b, &m);
	/* labels without weights: version 2 (a merge has weights: dropped here) */
	free(m.weights);
	free(m.stack_weights);
	m.weights = m.stack_weights = NULL;
	m.has_weights = false;
	char *tmp = unit_tmpdir();
	char *dir = unit_path(tmp, "m.db");
	assert_int_equal(tally_db_save(&m, dir, false), 0);
	char *sess = unit_path(dir, "session");
	char *text = unit_read(sess, NULL);
	assert_str_has(text, "format-version: 2\n");
	free(text);
	struct tally_db r;
	assert_int_equal(tally_db_open(&r, dir), 0);
	assert_int_equal(r.nlabels, 2);
	assert_int_equal(r.nprofs, m.nprofs);
	assert_int_equal(r.nstacks, m.nstacks);
	uint64_t per[3] = { 0 };
	for (size_t p = 0; p < r.nprofs; p++)
		for (size_t i = r.profs[p].first; i < r.profs[p].end; i++)
			per[r.profs[p].label] += r.counts[i];
	assert_int_equal(per[0], 0);
	assert_int_equal(per[1] + per[2], a.samples[0] + b.samples[0]);
	assert_true(per[1] == a.samples[0] || per[1] == b.samples[0]);
	uint64_t sper[3] = { 0 };
	for (size_t s = 0; s < r.nstacks; s++)
		sper[r.stacks[s].label] += r.stack_counts[s];
	assert_int_equal(sper[1], per[1]);
	assert_int_equal(sper[2], per[2]);
	tally_db_release(&r);

	/* a stack naming a label set the file lacks */
	char *stacks = unit_path(dir, "stacks");
	size_t len;
	char *orig = unit_read(stacks, &len);
	char *line = strchr(orig, '\n') + 1;
	struct strbuf sb = STRBUF_INIT;
	strbuf_add(&sb, orig, (size_t)(line - orig));
	const char *sp = strchr(strchr(line, ' ') + 1, ' ');
	strbuf_add(&sb, line, (size_t)(strchr(line, ' ') - line));
	strbuf_addstr(&sb, " 0 9");
	strbuf_addstr(&sb, strchr(sp + 1, ' '));
	unit_write(stacks, sb.buf, sb.len);
	assert_int_not_equal(tally_db_open(&r, dir), 0);
	assert_errmsg_has("label set 9 is not in 'labels'");
	unit_write(stacks, orig, len);
	strbuf_release(&sb);
	free(orig);
	/* the labels file gone: its ids name nothing */
	char *labels = unit_path(dir, "labels");
	char *ltext = unit_read(labels, &len);
	unlink(labels);
	assert_int_not_equal(tally_db_open(&r, dir), 0);
	assert_errmsg_has("label");
	/* in a version 1 database a labels file means nothing (and breaks nothing) */
	tally_db_release(&m);
	small_db(&m, 5, "h5");
	char *v1 = unit_path(tmp, "v1.db");
	assert_int_equal(tally_db_save(&m, v1, false), 0);
	char *v1labels = unit_path(v1, "labels");
	unit_write(v1labels, ltext, len);
	assert_int_equal(tally_db_open(&r, v1), 0);
	assert_int_equal(r.nlabels, 0);
	tally_db_release(&r);
	free(v1labels);
	free(v1);
	free(ltext);
	free(labels);
	free(stacks);
	free(sess);
	tally_remove_tree(tmp);
	free(dir);
	free(tmp);
	tally_db_release(&m);
	tally_db_release(&a);
	tally_db_release(&b);
}

/* The bytes of a canonical merge of the databases at paths, opened with
 * flags: with TALLY_DB_STACKS_LATER each one's stacks go straight from its
 * file into the merge's (tally_db_builder_load_stacks). */
static char *merged_dirs(char *const *paths, size_t n, unsigned flags, size_t *len)
{
	char *ev[] = { (char *)"cpu-clock" };
	struct tally_db_builder *b = tally_db_builder_new(1, ev, false, true);
	tally_db_builder_canonical(b);
	for (size_t i = 0; i < n; i++) {
		struct tally_db src;
		assert_int_equal(tally_db_open_dir_flags(&src, paths[i], flags), 0);
		assert_int_equal(src.nstacks == 0, (flags & TALLY_DB_STACKS_LATER) != 0);
		struct tally_labelset set = { 0 };
		tally_labelset_set(&set, "run", tally_meta_get(&src.session, "name"));
		tally_labelset_set(&set, "host", tally_meta_get(&src.session, "host"));
		tally_labelset_set(&set, "zone", i ? "z1" : "z0");
		tally_db_builder_source(b, &set);
		tally_labelset_release(&set);
		tally_db_builder_add(b, &src);
		assert_int_equal(tally_db_builder_load_stacks(b), 0);
		tally_db_release(&src);
	}
	struct tally_db out;
	tally_db_builder_finish(b, &out);
	assert_null(out.lazy);
	struct strbuf sb = STRBUF_INIT;
	assert_int_equal(tally_db_bundle(&out, &sb), 0);
	tally_db_release(&out);
	*len = sb.len;
	return strbuf_detach(&sb);
}

/* A merge that takes a database's unread stacks reads the same open file as
 * the database (a duplicate of its descriptor, one file offset): whichever of
 * the two reads first, the other still reads the whole file. */
static void test_merge__lazy_shared_file(void **state)
{
	(void)state;
	/* a (format 1: text stacks) and the merge of a and b (format 4: binary) */
	struct tally_db a, b, m;
	two_merged(&a, &b, &m);
	char *tmp = unit_tmpdir();
	for (int k = 0; k < 4; k++) {
		int binary = k / 2, merge_first = k % 2;
		char *dir = unit_path(tmp, binary ? "m.db" : "a.db");
		if (!merge_first)
			assert_int_equal(tally_db_save(binary ? &m : &a, dir, false), 0);
		char *stacks = unit_path(dir, "stacks");
		char *head = unit_read(stacks, NULL);
		assert_int_equal(!memcmp(head, "TALLYSTK", 8), binary);
		free(head);
		free(stacks);
		struct tally_db src, out;
		assert_int_equal(tally_db_open_dir_flags(&src, dir, TALLY_DB_STACKS_LATER), 0);
		char *ev[] = { (char *)"cpu-clock" };
		struct tally_db_builder *bl = tally_db_builder_new(1, ev, false, true);
		tally_db_builder_add(bl, &src);
		if (merge_first)
			assert_int_equal(tally_db_builder_load_stacks(bl), 0);
		if (tally_db_load_stacks(&src))
			fail_msg("the database after the merge took its stacks: %s",
				 tally_errmsg());
		if (!merge_first && tally_db_builder_load_stacks(bl))
			fail_msg("the merge after the database read its stacks: %s",
				 tally_errmsg());
		tally_db_builder_finish(bl, &out);
		uint64_t got = 0, want = 0;
		for (size_t s = 0; s < out.nstacks; s++)
			got += out.stack_counts[s];
		for (size_t s = 0; s < src.nstacks; s++)
			want += src.stack_counts[s];
		assert_true(want > 0);
		assert_int_equal(got, want);
		assert_int_equal(src.nstacks, binary ? m.nstacks : a.nstacks);
		tally_db_release(&out);
		tally_db_release(&src);
		free(dir);
	}
	tally_remove_tree(tmp);
	free(tmp);
	tally_db_release(&a);
	tally_db_release(&b);
	tally_db_release(&m);
}

static void test_merge__lazy_labels(void **state)
{
	(void)state;
	struct tally_db a, b, c, m;
	small_db(&a, 1, "h1");
	small_db(&b, 2, "h2");
	small_db(&c, 3, "h3");
	struct tally_db *all[] = { &a, &b };
	int ab[] = { 0, 1 };
	free(merged(all, ab, 2, true, &m));
	char *tmp = unit_tmpdir();
	char *mdir = unit_path(tmp, "m.db"), *cdir = unit_path(tmp, "c.db");
	assert_int_equal(tally_db_save(&m, mdir, false), 0);
	assert_int_equal(tally_db_save(&c, cdir, false), 0);

	/* a version 2 database's stacks read later keep their label sets */
	struct tally_db r;
	assert_int_equal(tally_db_open_dir_flags(&r, mdir, TALLY_DB_STACKS_LATER), 0);
	assert_int_equal(r.nstacks, 0);
	assert_int_equal(tally_db_load_stacks(&r), 0);
	assert_int_equal(r.nstacks, m.nstacks);
	uint64_t per[3] = { 0 }, sper[3] = { 0 };
	for (size_t p = 0; p < r.nprofs; p++)
		for (size_t i = r.profs[p].first; i < r.profs[p].end; i++)
			per[r.profs[p].label] += r.counts[i];
	for (size_t s = 0; s < r.nstacks; s++)
		sper[r.stacks[s].label] += r.stack_counts[s];
	assert_int_equal(per[0], 0);
	assert_int_equal(sper[0], 0);
	assert_int_equal(sper[1], per[1]);
	assert_int_equal(sper[2], per[2]);
	tally_db_release(&r);

	/* merged from the files (a version 1 and a version 2 database), their
	 * stacks read straight into the merge's: the same bytes as read first */
	char *dirs[] = { cdir, mdir };
	size_t nnow, nlater;
	char *now = merged_dirs(dirs, 2, 0, &nnow);
	char *later = merged_dirs(dirs, 2, TALLY_DB_STACKS_LATER, &nlater);
	/* (a bundle holds the binary stacks file: bytes, not a string) */
	assert_int_equal(nnow, nlater);
	assert_memory_equal(now, later, nnow);
	/* c's stacks took its source's labels, m's kept theirs and got zone=z1 */
	static const char *const want[] = { "1\thost=h1\trun=r1\tzone=z1\n",
					    "2\thost=h2\trun=r2\tzone=z1\n",
					    "3\thost=h3\trun=r3\tzone=z0\n" };
	for (size_t i = 0; i < 3; i++)
		if (!memmem(later, nlater, want[i], strlen(want[i])))
			fail_msg("the merge's labels have no '%s'", want[i]);
	free(now);
	free(later);
	tally_remove_tree(tmp);
	free(mdir);
	free(cdir);
	free(tmp);
	tally_db_release(&m);
	tally_db_release(&a);
	tally_db_release(&b);
	tally_db_release(&c);
}

/* ---- the diff's scaling ---- */

static void test_merge__scale_counts(void **state)
{
	(void)state;
	uint64_t v[] = { 1, 1, 1 };
	/* 3 -> 10: 3.33 each, the first (lowest index) gets the extra one */
	tally_scale_counts(v, 3, 3, 10);
	assert_int_equal(v[0], 4);
	assert_int_equal(v[1], 3);
	assert_int_equal(v[2], 3);
	uint64_t w[] = { 7, 2, 1 };
	/* 10 -> 3: 2.1, 0.6, 0.3: the largest remainders first */
	tally_scale_counts(w, 3, 10, 3);
	assert_int_equal(w[0], 2);
	assert_int_equal(w[1], 1);
	assert_int_equal(w[2], 0);
	/* no overflow on large counts */
	uint64_t x[] = { UINT64_MAX / 2, UINT64_MAX / 2 };
	tally_scale_counts(x, 2, UINT64_MAX - 1, 1000);
	assert_int_equal(x[0] + x[1], 1000);
	assert_int_equal(x[0], 500);
}

/* ---- weights ---- */

/* A database of one event made by hand: 0x10 gets c10 samples, a stack of two
 * frames too; weights (NULL: none, as format 1) beside them; the session's
 * period-mean and counters. */
static void weighed_db(struct tally_db *out, uint64_t c10, const uint64_t *w10,
		       const char *period_mean, const char *fp_checked, const char *rs,
		       const char *fp_stops)
{
	char *ev[] = { (char *)"cpu-clock" };
	struct tally_db_builder *b = tally_db_builder_new(1, ev, false, true);
	struct tally_meta m = { 0 };
	tally_meta_set(&m, "period-mean", "%s", period_mean);
	tally_meta_set(&m, "call-graph", "fp");
	tally_meta_set(&m, "fp-leaf-checked", "%s", fp_checked);
	tally_meta_set(&m, "randomized-samples", "%s", rs);
	if (fp_stops) {
		tally_meta_set(&m, "fp-repair-stops", "%s", fp_stops);
		tally_meta_set(&m, "fp-repair-frames", "3");
	}
	tally_db_builder_session(b, &m);
	tally_meta_release(&m);
	struct tally_db_image x = image("liba.so", "aaaaaaaaaaaaaaaa");
	uint32_t ix = tally_db_builder_image(b, &x);
	struct tally_frame fr[2] = { { ix, 0x10 }, { ix, 0x500 } };
	if (w10) {
		tally_db_builder_entry_w(b, ix, 0, 0, 0x10, &c10, w10);
		tally_db_builder_stack_w(b, 0, 0, fr, 2, &c10, w10);
	} else {
		tally_db_builder_entry(b, ix, 0, 0x10, &c10);
		tally_db_builder_stack(b, 0, fr, 2, &c10);
	}
	tally_db_builder_finish(b, out);
}

static void test_merge__weights(void **state)
{
	(void)state;
	struct tally_db a, b, c, m;
	uint64_t wc = 7777;
	/* (a recorded before the repair said why it stopped: no fp-repair-*) */
	weighed_db(&a, 10, NULL, "1000", "5", "10/10", NULL); /* format 1: each sample 1000 */
	weighed_db(&b, 4, NULL, "3000", "2", "3/4",         /* format 1 at another period: 3000 */
		   "no CFI 1, stack copy too small 2, chain not rejoined 3, depth limit 4");
	weighed_db(&c, 2, &wc, "1", "1", "2/2",             /* its own weights */
		   "no CFI 10, stack copy too small 20, chain not rejoined 30, depth limit 40");
	assert_false(a.has_weights);
	assert_null(a.weights);
	assert_true(c.has_weights);
	assert_string_equal(tally_meta_get(&c.session, "format-version"), "4");
	char *ev[] = { (char *)"cpu-clock" };
	struct tally_db_builder *bl = tally_db_builder_new(1, ev, false, true);
	struct tally_db *in[] = { &a, &b, &c };
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(tally_db_builder_fits(bl, in[i], "in"), 0);
		tally_db_builder_add(bl, in[i]);
	}
	tally_db_builder_finish(bl, &m);
	assert_true(m.has_weights);
	assert_string_equal(tally_meta_get(&m.session, "format-version"), "4");
	assert_int_equal(m.nentries, 1);
	assert_int_equal(m.counts[0], 16);
	/* each input weighed by its own period-mean, the weighted one as it is */
	assert_int_equal(m.weights[0], 10 * 1000 + 4 * 3000 + 7777);
	assert_int_equal(m.nstacks, 1);
	assert_int_equal(m.stack_counts[0], 16);
	assert_int_equal(m.stack_weights[0], 10 * 1000 + 4 * 3000 + 7777);
	assert_string_equal(tally_meta_get(&m.session, "weight-total"), "29777");
	assert_string_equal(tally_meta_get(&m.session, "weight-unit"), "ns");
	/* the counters add up */
	assert_string_equal(tally_meta_get(&m.session, "fp-leaf-checked"), "8");
	assert_string_equal(tally_meta_get(&m.session, "fp-repair-frames"), "6");
	assert_string_equal(
		tally_meta_get(&m.session, "fp-repair-stops"),
		"no CFI 11, stack copy too small 22, chain not rejoined 33, depth limit 44");
	assert_string_equal(tally_meta_get(&m.session, "randomized-samples"), "15/16");
	/* written and read back: the same weights */
	char *tmp = unit_tmpdir();
	char *dir = unit_path(tmp, "m.db");
	assert_int_equal(tally_db_save(&m, dir, false), 0);
	struct tally_db r;
	if (tally_db_open(&r, dir))
		fail_msg("%s", tally_errmsg());
	assert_int_equal(r.weights[0], 29777);
	assert_int_equal(r.stack_weights[0], 29777);
	tally_db_release(&r);
	/* weights that would pass 2^64 together are refused */
	struct tally_db_builder *b2 = tally_db_builder_new(1, ev, false, true);
	tally_db_builder_add(b2, &m);
	m.weights[0] = UINT64_MAX - 100;
	assert_int_equal(tally_db_builder_fits(b2, &m, "big.db"), -EOVERFLOW);
	assert_errmsg_has("'big.db': its 'cpu-clock' weights");
	tally_db_builder_free(b2);
	assert_int_equal(tally_remove_tree(tmp), 0);
	free(dir);
	free(tmp);
	tally_db_release(&m);
	tally_db_release(&a);
	tally_db_release(&b);
	tally_db_release(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge__label_parse),
		cmocka_unit_test(test_merge__labelset),
		cmocka_unit_test(test_merge__labels_file),
		cmocka_unit_test(test_merge__canonical),
		cmocka_unit_test(test_merge__source_labels),
		cmocka_unit_test(test_merge__fits),
		cmocka_unit_test(test_merge__weights),
		cmocka_unit_test(test_merge__version2_round_trip),
		cmocka_unit_test(test_merge__lazy_labels),
		cmocka_unit_test(test_merge__lazy_shared_file),
		cmocka_unit_test(test_merge__scale_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
