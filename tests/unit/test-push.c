/* Unit tests for lib/push and what it asks of the pprof export: labels the
 * caller adds to every sample (and those it adds only where a sample lacks
 * the key), the endpoints and headers of the options, the request of each
 * format decoded back (the pprof inside Parca's JSON, Pyroscope's series
 * name, the OTLP message through protobuf-c), and the daemon's backlog
 * cursor: deltas of an epoch, kept across a reopen, epochs deleted before
 * they were pushed counted as dropped. */
#define _GNU_SOURCE
#include "unit.h"

#include <inttypes.h>
#include <zlib.h>

#include "otlp.pb-c.h"
#include "profile.pb-c.h"
#include "tally/epoch.h"
#include "tally/export.h"
#include "tally/push.h"
#include "tally/symbols.h"

typedef Perftools__Profiles__Profile PProfile_t;

/* A database in memory, not per-pid, one event, stacks (leaf first):
 *   s0 work;main   60  label set 1 {comm=alpha, host=web1}
 *   s1 inner;main  30  label set 2 {comm=beta}
 *   s2 other;main  10  no label set */
static void memdb_init(struct tally_db *db)
{
	memset(db, 0, sizeof(*db));
	db->path = xstrdup("mem.db");
	tally_meta_set(&db->session, "period-mean", "1000000");
	tally_meta_set(&db->session, "duration", "1.5");
	tally_meta_set(&db->session, "start-time", "2026-01-02T03:04:05Z");
	tally_meta_set(&db->session, "host", "recorder");
	db->nevents = 1;
	db->events = xcalloc(1, sizeof(char *));
	db->events[0] = xstrdup("cpu-clock");
	db->samples = xcalloc(1, sizeof(uint64_t));
	db->samples[0] = 100;
	db->has_stacks = true;
	db->nimages = 1;
	db->images = xcalloc(1, sizeof(*db->images));
	db->images[0] =
		(struct tally_db_image){ .name = xstrdup("prog"),
					 .path = xstrdup("/nonexistent/tally-unit/prog"),
					 .id = xstrdup("00112233445566778899aabbccddeeff00112233"),
					 .id_kind = xstrdup("build-id"),
					 .kind = xstrdup("exec") };
	static const uint64_t offs[] = { 0x1010, 0x1101, 0x1020, 0x1030 };
	db->nframe_tab = 4;
	db->frame_tab = xcalloc(4, sizeof(*db->frame_tab));
	for (size_t i = 0; i < 4; i++)
		db->frame_tab[i] = (struct tally_frame){ 0, offs[i] };
	static const uint32_t order[] = { 0, 1, 2, 1, 3, 1 };
	db->stack_frames = xcalloc(6, sizeof(uint32_t));
	memcpy(db->stack_frames, order, sizeof(order));
	db->nstack_frames = 6;
	db->nstacks = 3;
	db->stacks = xcalloc(3, sizeof(*db->stacks));
	db->stacks[0] = (struct tally_db_stack){ 0, 2, 0, 1 };
	db->stacks[1] = (struct tally_db_stack){ 2, 2, 0, 2 };
	db->stacks[2] = (struct tally_db_stack){ 4, 2, 0, 0 };
	db->stack_counts = xcalloc(3, sizeof(uint64_t));
	db->stack_counts[0] = 60;
	db->stack_counts[1] = 30;
	db->stack_counts[2] = 10;
	db->nentries = 3;
	db->entries = xcalloc(3, sizeof(*db->entries));
	db->entries[0] = (struct tally_db_entry){ 0, 0, 0x1010 };
	db->entries[1] = (struct tally_db_entry){ 0, 0, 0x1020 };
	db->entries[2] = (struct tally_db_entry){ 0, 0, 0x1030 };
	db->counts = xcalloc(3, sizeof(uint64_t));
	db->counts[0] = 60;
	db->counts[1] = 30;
	db->counts[2] = 10;
	db->nprofs = 1;
	db->profs = xcalloc(1, sizeof(*db->profs));
	db->profs[0] = (struct tally_db_prof){ 0, 0, 0, 3, 0 };
	db->nlabels = 2;
	db->labels = xcalloc(2, sizeof(*db->labels));
	tally_labelset_set(&db->labels[0], "comm", "alpha");
	tally_labelset_set(&db->labels[0], "host", "web1");
	tally_labelset_set(&db->labels[1], "comm", "beta");
}

static void gunzip(const struct strbuf *gz, struct strbuf *raw)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	assert_int_equal(strbuf_grow(raw, 1 << 20), 0);
	z.next_in = (Bytef *)gz->buf;
	z.avail_in = (uInt)gz->len;
	z.next_out = (Bytef *)raw->buf;
	z.avail_out = 1 << 20;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	raw->len = (1 << 20) - z.avail_out;
	inflateEnd(&z);
}

static PProfile_t *unpack(const struct strbuf *gz)
{
	struct strbuf raw = STRBUF_INIT;
	gunzip(gz, &raw);
	PProfile_t *p = perftools__profiles__profile__unpack(NULL, raw.len, (uint8_t *)raw.buf);
	strbuf_release(&raw);
	assert_non_null(p);
	return p;
}

/* The value of label key of sample s ("" when none; fails when twice). */
static const char *label_of(const PProfile_t *p, const Perftools__Profiles__Sample *s,
			    const char *key)
{
	const char *v = "";
	int seen = 0;
	for (size_t i = 0; i < s->n_label; i++)
		if (!strcmp(p->string_table[s->label[i]->key], key)) {
			v = p->string_table[s->label[i]->str];
			seen++;
		}
	if (seen > 1)
		fail_msg("label '%s' is on a sample %d times", key, seen);
	return v;
}

/* The sample whose leaf function is named fn. */
static const Perftools__Profiles__Sample *sample_at(const PProfile_t *p, uint64_t leaf_addr)
{
	for (size_t i = 0; i < p->n_sample; i++)
		if (p->location[p->sample[i]->location_id[0] - 1]->address == leaf_addr)
			return p->sample[i];
	fail_msg("no sample with its leaf at %#" PRIx64, leaf_addr);
	return NULL;
}

static void test_push__pprof_caller_labels(void **state)
{
	(void)state;
	struct tally_db db;
	memdb_init(&db);
	struct tally_resolver *res;
	tally_resolver_new(&res, &db, NULL);
	int ev = 0;
	struct tally_labelset labels = { 0 }, dflt = { 0 };
	tally_labelset_set(&labels, "team", "blue");
	tally_labelset_set(&dflt, "host", "here");
	struct tally_export x = { .db = &db,
				  .res = res,
				  .input = "mem.db",
				  .events = &ev,
				  .nevents = 1,
				  .labels = &labels,
				  .label_defaults = &dflt };
	struct strbuf gz = STRBUF_INIT;
	assert_int_equal(tally_export_pprof_buf(&x, &gz), 0);
	PProfile_t *p = unpack(&gz);
	assert_int_equal(p->n_sample, 3);
	/* a set with its own host keeps it; the others get the default */
	const Perftools__Profiles__Sample *s0 = sample_at(p, 0x1010), *s1 = sample_at(p, 0x1020),
					  *s2 = sample_at(p, 0x1030);
	assert_string_equal(label_of(p, s0, "host"), "web1");
	assert_string_equal(label_of(p, s1, "host"), "here");
	assert_string_equal(label_of(p, s2, "host"), "here");
	assert_string_equal(label_of(p, s0, "comm"), "alpha");
	assert_string_equal(label_of(p, s1, "comm"), "beta");
	assert_string_equal(label_of(p, s2, "comm"), "");
	for (size_t i = 0; i < p->n_sample; i++)
		assert_string_equal(label_of(p, p->sample[i], "team"), "blue");
	perftools__profiles__profile__free_unpacked(p, NULL);
	strbuf_reset(&gz);

	/* the caller's own labels take the place of the set's */
	tally_labelset_set(&labels, "host", "forced");
	assert_int_equal(tally_export_pprof_buf(&x, &gz), 0);
	p = unpack(&gz);
	for (size_t i = 0; i < p->n_sample; i++)
		assert_string_equal(label_of(p, p->sample[i], "host"), "forced");
	assert_string_equal(label_of(p, sample_at(p, 0x1010), "comm"), "alpha");
	perftools__profiles__profile__free_unpacked(p, NULL);
	strbuf_release(&gz);
	tally_labelset_release(&labels);
	tally_labelset_release(&dflt);
	tally_resolver_free(res);
	tally_db_release(&db);
}

/* ---- options ---- */

static void test_push__endpoint(void **state)
{
	(void)state;
	static const struct {
		const char *url;
		enum tally_push_format f;
		const char *want;
	} cases[] = {
		{ "http://h:4040", TALLY_PUSH_PYROSCOPE, "http://h:4040/ingest" },
		{ "http://h:4040/", TALLY_PUSH_PYROSCOPE, "http://h:4040/ingest" },
		{ "https://h/pyroscope/", TALLY_PUSH_PYROSCOPE, "https://h/pyroscope/ingest" },
		{ "http://h:4040/ingest", TALLY_PUSH_PYROSCOPE, "http://h:4040/ingest" },
		{ "http://h:7070", TALLY_PUSH_PARCA, "http://h:7070/profiles/writeraw" },
		{ "http://h:4318", TALLY_PUSH_OTLP, "http://h:4318/v1development/profiles" },
		{ "http://h:4318/v1development/profiles", TALLY_PUSH_OTLP, "http://h:4318/v1development/profiles" },
		{ "http://h:4318?tenant=a", TALLY_PUSH_OTLP, "http://h:4318/v1development/profiles?tenant=a" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct tally_push_opts o;
		tally_push_opts_init(&o);
		o.url = xstrdup(cases[i].url);
		o.format = cases[i].f;
		char *e = tally_push_endpoint(&o);
		assert_string_equal(e, cases[i].want);
		free(e);
		tally_push_opts_release(&o);
	}
}

static const struct tally_cmdopts test_cmd = {
	.name = "test",
	.summary = "s",
	.usage = "u",
	.groups = { &tally_push_group },
};

static int parse(struct tally_push_opts *o, int argc, const char **argv)
{
	void *ctx[] = { o };
	int first;
	return tally_opts_parse(&test_cmd, ctx, argc, (char **)argv, &first);
}

static void test_push__options(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *hf = unit_path(dir, "headers");
	unit_write_str(hf,
		       "# tokens\r\nAuthorization: Bearer s3cret\r\n\r\nX-Scope-OrgID: tenant-1\n");
	struct tally_push_opts o;
	tally_push_opts_init(&o);
	const char *argv[] = { "test", "--to", "http://127.0.0.1:1", "--format", "otlp", "--label", "team=blue",
			       "--header", "X-One: 1", "--header-file", hf, NULL };
	assert_int_equal(parse(&o, 11, argv), 0);
	assert_int_equal(tally_push_opts_check(&o, "--to", "--format"), 0);
	char **h;
	size_t n;
	assert_int_equal(tally_push_headers(&o, &h, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(h[0], "X-One: 1");
	assert_string_equal(h[1], "Authorization: Bearer s3cret");
	assert_string_equal(h[2], "X-Scope-OrgID: tenant-1");
	tally_push_headers_free(h, n);
	assert_string_equal(tally_labelset_get(&o.labels, "team"), "blue");

	/* the file is read again at every request: a bad line is an error naming it */
	unit_write_str(hf, "Authorization: Bearer s3cret\nno colon here\n");
	assert_int_equal(tally_push_headers(&o, &h, &n), -EINVAL);
	assert_errmsg_has("line 2");
	tally_push_opts_release(&o);

	/* refusals, each one line naming the option */
	static const struct {
		const char *a, *b, *msg;
	} bad[] = {
		{ "--format", "jaeger", "unknown --format 'jaeger'" },
		{ "--header", "Authorization Bearer x", "invalid --header" },
		{ "--label", "=x", "--label" },
		{ "--label", "k=", "has no value" },
		{ "--app", "my app", "invalid --app" },
		{ "--timeout", "0", "--timeout" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		tally_push_opts_init(&o);
		const char *av[] = { "test", bad[i].a, bad[i].b, NULL };
		assert_true(parse(&o, 3, av) < 0);
		assert_errmsg_has(bad[i].msg);
		tally_push_opts_release(&o);
	}
	/* checks before anything is sent */
	tally_push_opts_init(&o);
	const char *nofmt[] = { "test", "--to", "http://h", NULL };
	assert_int_equal(parse(&o, 3, nofmt), 0);
	assert_int_equal(tally_push_opts_check(&o, "--to", "--format"), -EINVAL);
	assert_errmsg_has("needs --format");
	o.format = TALLY_PUSH_PARCA;
	free(o.url);
	o.url = xstrdup("ftp://h");
	assert_int_equal(tally_push_opts_check(&o, "--to", "--format"), -EINVAL);
	assert_errmsg_has("not an http:// or https:// URL");
	free(o.url);
	o.url = xstrdup("http://h");
	o.header_file = xstrdup(dir); /* a directory */
	assert_true(tally_push_opts_check(&o, "--to", "--format") < 0);
	assert_errmsg_has("header file");
	tally_push_opts_release(&o);
	unlink(hf);
	rmdir(dir);
	free(hf);
	free(dir);
}

/* ---- the daemon's backlog ---- */

static uint64_t stack_total(const struct tally_db *db)
{
	uint64_t n = 0;
	for (size_t k = 0; k < db->nstacks; k++)
		n += db->stack_counts[k];
	return n;
}

/* db as the epoch dir/name: through the builder, which makes its session whole */
static void save_epoch(const char *dir, const char *name, struct tally_db *db)
{
	char *p = unit_path(dir, name);
	struct tally_db_builder *b =
		tally_db_builder_new(db->nevents, db->events, db->per_pid, true);
	tally_meta_set(&db->session, "call-graph", "fp");
	tally_meta_set(&db->session, "stop-time", "2026-01-02T03:05:05Z");
	tally_db_builder_session(b, &db->session);
	tally_db_builder_add(b, db);
	struct tally_db out;
	tally_db_builder_finish(b, &out);
	if (tally_db_save(&out, p, true))
		fail_msg("tally_db_save: %s", tally_errmsg());
	tally_db_release(&out);
	free(p);
}

static void test_push__cursor_deltas(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *marker = unit_path(dir, TALLY_DAEMON_MARKER);
	unit_write_str(marker, "format-version: 1\nlayout: epochs\n");
	struct tally_db db;
	memdb_init(&db);
	save_epoch(dir, "202601010000", &db);

	/* a new cursor: what is there counts as pushed */
	struct tally_push_cursor *c;
	bool fresh = false;
	if (tally_push_cursor_open(&c, dir, "otlp http://h/x", &fresh))
		fail_msg("%s", tally_errmsg());
	assert_true(fresh);
	struct tally_db d;
	const char *ep;
	double from, until;
	assert_int_equal(tally_push_cursor_next(c, &d, &ep, &from, &until), 0);

	/* a flush adds 10 to one stack: the delta is those 10 */
	db.stack_counts[0] += 10;
	db.counts[0] += 10;
	db.samples[0] += 10;
	save_epoch(dir, "202601010000", &db);
	struct tally_push_backlog bl;
	assert_int_equal(tally_push_cursor_scan(c, &bl), 0);
	assert_int_equal(bl.samples, 10);
	assert_int_equal(bl.epochs, 1);
	assert_int_equal(tally_push_cursor_next(c, &d, &ep, &from, &until), 1);
	assert_string_equal(ep, "202601010000");
	assert_int_equal(stack_total(&d), 10);
	assert_int_equal(d.samples[0], 10);
	tally_db_release(&d);
	/* not taken: made again the same */
	assert_int_equal(tally_push_cursor_next(c, &d, &ep, &from, &until), 1);
	assert_int_equal(stack_total(&d), 10);
	tally_db_release(&d);
	tally_push_cursor_done(c, false);
	assert_int_equal(tally_push_cursor_save(c), 0);
	assert_int_equal(tally_push_cursor_next(c, &d, &ep, &from, &until), 0);
	tally_push_cursor_free(c);

	/* kept across a reopen; another target starts afresh */
	assert_int_equal(tally_push_cursor_open(&c, dir, "otlp http://h/x", &fresh), 0);
	assert_false(fresh);
	assert_int_equal(tally_push_cursor_next(c, &d, &ep, &from, &until), 0);
	/* a newer epoch: the old one (nothing new) is done, the new one goes whole */
	save_epoch(dir, "202601010100", &db);
	assert_int_equal(tally_push_cursor_scan(c, &bl), 0);
	assert_int_equal(bl.samples, 110);
	assert_int_equal(tally_push_cursor_next(c, &d, &ep, &from, &until), 1);
	assert_string_equal(ep, "202601010100");
	assert_int_equal(stack_total(&d), 110);
	tally_db_release(&d);
	/* deleted before it was taken: dropped, and said */
	char *p = unit_path(dir, "202601010100");
	assert_int_equal(tally_db_remove(p), 0);
	free(p);
	assert_int_equal(tally_push_cursor_scan(c, &bl), 0);
	assert_int_equal(bl.dropped_now, 110);
	assert_int_equal(bl.dropped, 110);
	assert_string_equal(bl.dropped_epochs, "202601010100");
	free(bl.dropped_epochs);
	assert_int_equal(bl.samples, 0);
	assert_int_equal(tally_push_cursor_save(c), 0);
	tally_push_cursor_free(c);
	assert_int_equal(tally_push_cursor_open(&c, dir, "pyroscope http://other/ingest", &fresh), 0);
	assert_true(fresh);
	assert_int_equal(tally_push_cursor_scan(c, &bl), 0);
	assert_int_equal(bl.dropped, 0);
	tally_push_cursor_free(c);

	tally_db_release(&db);
	tally_remove_tree(dir);
	free(marker);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_push__pprof_caller_labels),
		cmocka_unit_test(test_push__endpoint),
		cmocka_unit_test(test_push__options),
		cmocka_unit_test(test_push__cursor_deltas),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
