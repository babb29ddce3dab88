/* Unit tests for lib/db: the line parsers, a write/read round trip of a
 * hand-built aggregate, the refusal and replacement rules of the writer, and
 * the reader's diagnosis of damaged databases (file and line named). */
#define _GNU_SOURCE
#include "unit.h"

#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "tally/agg.h"
#include "tally/db.h"
#include "tally/snapshot.h"
#include "tally/elfinfo.h"
#include "tally/jitdump.h"
#include "tally/symbols.h"

#include "lib/db/stacks.h" /* the reader itself, for a set near 2^32 frames */

/* ---- tally_parse_header_line ---- */

static void test_db__header_line_good(void **state)
{
	(void)state;
	static const struct {
		const char *line, *key, *value;
	} ok[] = {
		{ "format-version: 1", "format-version", "1" },
		{ "key:", "key", "" },
		{ "key: ", "key", "" },
		{ "a.b-c_D9: x: y", "a.b-c_D9", "x: y" },
		{ "path: /usr/lib/x86_64-linux-gnu/libc.so.6", "path",
		  "/usr/lib/x86_64-linux-gnu/libc.so.6" },
		{ "k:  two spaces", "k", " two spaces" },
		{ "samples: 1,2,3", "samples", "1,2,3" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		char *k = NULL, *v = NULL;
		int r = tally_parse_header_line(ok[i].line, "f", 1, &k, &v);
		if (r)
			fail_msg("'%s' rejected: %s", ok[i].line, tally_errmsg());
		assert_string_equal(k, ok[i].key);
		assert_string_equal(v, ok[i].value);
		free(k);
		free(v);
	}
}

static void test_db__header_line_bad(void **state)
{
	(void)state;
	const char *bad[] = { "",         "novalue", ": value",     "key:value", "bad key: v",
			      "key\t: v", "k=v: x",  "\xc3\xa9: v", NULL };
	for (int i = 0; bad[i]; i++) {
		char *k = (char *)"unset", *v = (char *)"unset";
		int r = tally_parse_header_line(bad[i], "/db/x.prof", 12, &k, &v);
		if (r != -EINVAL)
			fail_msg("header line '%s' returned %d, want -EINVAL", bad[i], r);
		assert_errmsg_has("'/db/x.prof'");
		assert_errmsg_has("line 12");
		/* nothing allocated on failure */
		assert_string_equal(k, "unset");
		assert_string_equal(v, "unset");
	}
}

/* ---- tally_parse_prof_line ---- */

static void test_db__prof_line_good(void **state)
{
	(void)state;
	uint64_t off = 0, c[3] = { 0, 0, 0 };
	assert_int_equal(tally_parse_prof_line("1010 5", "f", 1, 1, &off, c), 0);
	assert_int_equal(off, 0x1010);
	assert_int_equal(c[0], 5);
	assert_int_equal(tally_parse_prof_line("0 0", "f", 1, 1, &off, c), 0);
	assert_int_equal(off, 0);
	assert_int_equal(c[0], 0);
	assert_int_equal(
		tally_parse_prof_line("ffffffffffffffff 18446744073709551615", "f", 1, 1, &off, c),
		0);
	assert_int_equal(off, UINT64_MAX);
	assert_int_equal(c[0], UINT64_MAX);
	assert_int_equal(tally_parse_prof_line("ABCdef 7", "f", 1, 1, &off, c), 0);
	assert_int_equal(off, 0xabcdef);
	assert_int_equal(tally_parse_prof_line("0000000000000010 1", "f", 1, 1, &off, c), 0); /* 16 digits */
	assert_int_equal(off, 0x10);
	assert_int_equal(tally_parse_prof_line("7f 1 0 300", "f", 1, 3, &off, c), 0);
	assert_int_equal(off, 0x7f);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], 0);
	assert_int_equal(c[2], 300);
}

static void test_db__prof_line_bad(void **state)
{
	(void)state;
	static const struct {
		const char *line;
		int nevents;
	} bad[] = {
		{ "1010", 1 },                        /* missing count */
		{ "1010 ", 1 },                       /* missing count after the space */
		{ "1010 5 6", 1 },                    /* extra column */
		{ "xyz 5", 1 },                       /* non-hex offset */
		{ "10g0 5", 1 },                      /* non-hex inside the offset */
		{ "10000000000000000 1", 1 },         /* 17 hex digits */
		{ "10 18446744073709551616", 1 },     /* count beyond uint64 */
		{ "10 99999999999999999999999", 1 },  /* far beyond */
		{ "10 1", 2 },                        /* one count, two events */
		{ "10 1 2 3", 2 },                    /* three counts, two events */
		{ "10 5 ", 1 },                       /* trailing space */
		{ " 10 5", 1 },                       /* leading space */
		{ "10  5", 1 },                       /* two spaces */
		{ "10\t5", 1 },                       /* tab */
		{ "", 1 },                            /* empty line */
		{ "-1 5", 1 },
		{ "10 -5", 1 },
		{ "10 +5", 1 },
		{ "0x10 5", 1 },
		{ "10 5\r", 1 },                      /* CRLF damage */
		{ "10 5.0", 1 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		uint64_t off = 0, c[3] = { 0, 0, 0 };
		int r = tally_parse_prof_line(bad[i].line, "/db/libc.so.6-abc.prof", 42,
					      bad[i].nevents, &off, c);
		if (r != -EINVAL)
			fail_msg("prof line '%s' (%d events) returned %d, want -EINVAL",
				 bad[i].line, bad[i].nevents, r);
		assert_errmsg_has("'/db/libc.so.6-abc.prof'");
		assert_errmsg_has("line 42");
	}
}

/* ---- building and writing an aggregate ---- */

struct fixture {
	char *tmp;  /* a scratch directory */
	char *db;   /* tmp/db */
	char true_id[160];
	char *extra; /* one more path a test wants freed whatever happens */
};

/* setup/teardown: teardown runs even when an assertion fails, so a failing
 * test leaves neither its directory nor a leak behind. */
static int fx_setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	fx->tmp = unit_tmpdir();
	fx->db = unit_path(fx->tmp, "db");
	struct tally_elf_info info;
	if (tally_elf_info("/bin/true", 1, &info) || !info.build_id_len) {
		fprintf(stderr, "/bin/true has no build-id: %s\n", tally_errmsg());
		return -1;
	}
	tally_hex(info.build_id, info.build_id_len, fx->true_id);
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fixture *fx = *state;
	int r = tally_remove_tree(fx->tmp);
	free(fx->extra);
	free(fx->db);
	free(fx->tmp);
	free(fx);
	return r;
}

static void session_init(struct tally_meta *m, const char *events, const char *cg, bool per_pid)
{
	memset(m, 0, sizeof(*m));
	tally_meta_set(m, "format-version", "%d", TALLY_FORMAT_VERSION);
	tally_meta_set(m, "events", "%s", events);
	tally_meta_set(m, "call-graph", "%s", cg);
	tally_meta_set(m, "per-pid", "%s", per_pid ? "yes" : "no");
}

static uint32_t file_image(struct tally_agg *a, const char *path)
{
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_FILE;
	k.path = (char *)path;
	return tally_agg_image(a, &k);
}

static uint32_t nomap_image(struct tally_agg *a, int pid)
{
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_NOMAP;
	k.path = (char *)"";
	k.pid = pid;
	return tally_agg_image(a, &k);
}

/* Counts n for event e on a stack, keeping a->samples consistent the way
 * on_sample does (tally_agg_count alone does not count samples). */
static void add(struct tally_agg *a, const uint32_t *frames, uint32_t len, int pid, int e,
		uint64_t n)
{
	uint32_t st = tally_agg_stack(a, frames, len);
	/* each sample weighs 1000 (the format 3 tests tell weights from counts) */
	tally_agg_count_w(a, st, pid, e, n, n * 1000);
	a->samples[e] += n;
}

/* The standard aggregate of the round-trip tests:
 *   /bin/true+0x1010: 5 (alone) + 4 (called from 0x2000) = 9 self
 *   /bin/true+0x2000: 3 self
 *   nomap+0x7f0000001000: 2 self
 * With two events, event 1 gets 10 on /bin/true+0x2000. */
static void build_std(struct tally_agg *a, int nevents)
{
	tally_agg_init(a, nevents, false, false);
	uint32_t t = file_image(a, "/bin/true");
	uint32_t nm = nomap_image(a, 0);
	uint32_t f1 = tally_agg_frame(a, t, 0x1010);
	uint32_t f2 = tally_agg_frame(a, t, 0x2000);
	uint32_t f3 = tally_agg_frame(a, nm, 0x7f0000001000);
	uint32_t s1[] = { f1 }, s2[] = { f1, f2 }, s3[] = { f2 }, s4[] = { f3 };
	add(a, s1, 1, 0, 0, 5);
	add(a, s2, 2, 0, 0, 4);
	add(a, s3, 1, 0, 0, 3);
	add(a, s4, 1, 0, 0, 2);
	if (nevents > 1)
		add(a, s3, 1, 0, 1, 10);
	a->lost = 7;
	/* a sampled process whose executable is /bin/true: that makes it "exec" */
	struct tally_proc *p = tally_agg_proc(a, 100, true);
	strcpy(p->comm, "true");
	p->exe = xstrdup("/bin/true");
	p->sampled = true;
	tally_agg_tasks(a);
}

static int db_image_by_kind(const struct tally_db *db, const char *kind)
{
	int found = -1;
	for (size_t i = 0; i < db->nimages; i++)
		if (!strcmp(db->images[i].kind, kind)) {
			assert_int_equal(found, -1); /* exactly one */
			found = (int)i;
		}
	return found;
}

static uint64_t db_count(const struct tally_db *db, int image, int pid, uint64_t offset, int e)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < db->nentries; i++)
		if ((int)db->entries[i].image == image && db->entries[i].pid == pid &&
		    db->entries[i].offset == offset)
			sum += db->counts[i * (size_t)db->nevents + (size_t)e];
	return sum;
}

/* The name of the only file in dir starting with prefix (malloc'd), or NULL. */
static char *find_file(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	char *found = NULL;
	struct dirent *de;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix))) {
			assert_null(found);
			found = unit_path(dir, de->d_name);
		}
	closedir(d);
	return found;
}

/* The database at path written again without its weights: format 1 (the
 * tests that write damaged files by hand write format 1 lines). */
static void to_v1(const char *path)
{
	struct tally_db db;
	if (tally_db_open(&db, path))
		fail_msg("tally_db_open: %s", tally_errmsg());
	assert_true(db.has_weights);
	free(db.weights);
	free(db.stack_weights);
	db.weights = db.stack_weights = NULL;
	db.has_weights = false;
	if (tally_db_save(&db, path, true))
		fail_msg("tally_db_save: %s", tally_errmsg());
	tally_db_release(&db);
}

/* The standard database as tally writes it: format 4, with weights (and
 * with call graphs, binary stacks). */
static void write_std3(struct fixture *fx, int nevents, const char *cg)
{
	struct tally_agg a;
	struct tally_meta m;
	build_std(&a, nevents);
	session_init(&m, nevents > 1 ? "cpu-clock,page-faults" : "cpu-clock", cg, false);
	int r = tally_db_write(fx->db, false, &a, &m);
	if (r)
		fail_msg("tally_db_write: %s", tally_errmsg());
	tally_meta_release(&m);
	tally_agg_release(&a);
}

static void write_std(struct fixture *fx, int nevents, const char *cg)
{
	write_std3(fx, nevents, cg);
	to_v1(fx->db);
}

/* The standard database written again over fx->db (force). */
static void write_std_force(struct fixture *fx)
{
	struct tally_agg a;
	struct tally_meta m;
	build_std(&a, 1);
	session_init(&m, "cpu-clock", "none", false);
	int r = tally_db_write(fx->db, true, &a, &m);
	if (r)
		fail_msg("tally_db_write --force: %s", tally_errmsg());
	tally_meta_release(&m);
	tally_agg_release(&a);
	to_v1(fx->db);
}

/* ---- round trips ---- */

static void test_db__roundtrip(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	/* nothing left over next to the database */
	assert_int_equal(unit_dir_entries(fx->tmp), 1);

	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("tally_db_open: %s", tally_errmsg());
	assert_string_equal(db.path, fx->db);
	assert_int_equal(db.nevents, 1);
	assert_string_equal(db.events[0], "cpu-clock");
	assert_int_equal(tally_db_event(&db, "cpu-clock"), 0);
	assert_int_equal(tally_db_event(&db, "page-faults"), -1);
	assert_int_equal(db.samples[0], 14);
	assert_int_equal(db.lost, 7);
	assert_false(db.per_pid);
	assert_false(db.has_stacks);
	assert_int_equal(db.nstacks, 0);
	assert_string_equal(tally_meta_get(&db.session, "format-version"), "1");
	assert_string_equal(tally_meta_get(&db.session, "images"), "2");

	/* the kernel image had no samples: only two images */
	assert_int_equal(db.nimages, 2);
	int t = db_image_by_kind(&db, "exec");
	int nm = db_image_by_kind(&db, "nomap");
	assert_true(t >= 0 && nm >= 0);
	assert_string_equal(db.images[t].name, "true");
	assert_string_equal(db.images[t].path, "/bin/true");
	assert_string_equal(db.images[t].id_kind, "build-id");
	assert_string_equal(db.images[t].id, fx->true_id);
	assert_string_equal(db.images[nm].name, "nomap");
	assert_string_equal(db.images[nm].path, "");
	assert_string_equal(db.images[nm].id_kind, "none");
	assert_int_equal(db.ntasks, 1);
	assert_string_equal(tally_db_comm(&db, 100), "true");
	assert_string_equal(db.tasks[0].exe, "/bin/true");

	/* self counts: the leaf of each stack */
	assert_int_equal(db.nentries, 3);
	assert_int_equal(db_count(&db, t, 0, 0x1010, 0), 9);
	assert_int_equal(db_count(&db, t, 0, 0x2000, 0), 3);
	assert_int_equal(db_count(&db, nm, 0, 0x7f0000001000, 0), 2);
	uint64_t sum = 0;
	for (size_t i = 0; i < db.nentries; i++)
		sum += db.counts[i];
	assert_int_equal(sum, db.samples[0]);

	/* the files are named by image and id */
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/true-%s.prof", fx->db, fx->true_id);
	assert_true(unit_exists(sb.buf));
	char *prof = unit_read(sb.buf, NULL);
	assert_str_has(prof, "\nsamples: 12\n");
	assert_str_has(prof, "\nkind: exec\n");
	free(prof);
	strbuf_release(&sb);
	tally_db_release(&db);
	tally_db_release(&db); /* twice: harmless */
}

static void test_db__roundtrip_two_events_stacks(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 2, "fp");
	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("tally_db_open: %s", tally_errmsg());
	assert_int_equal(db.nevents, 2);
	assert_string_equal(db.events[1], "page-faults");
	assert_int_equal(tally_db_event(&db, "page-faults"), 1);
	assert_int_equal(db.samples[0], 14);
	assert_int_equal(db.samples[1], 10);
	int t = db_image_by_kind(&db, "exec");
	int nm = db_image_by_kind(&db, "nomap");
	assert_int_equal(db_count(&db, t, 0, 0x1010, 0), 9);
	assert_int_equal(db_count(&db, t, 0, 0x1010, 1), 0);
	assert_int_equal(db_count(&db, t, 0, 0x2000, 0), 3);
	assert_int_equal(db_count(&db, t, 0, 0x2000, 1), 10);
	assert_int_equal(db_count(&db, nm, 0, 0x7f0000001000, 0), 2);

	/* the stacks: four distinct ones, totals per event preserved */
	assert_true(db.has_stacks);
	assert_int_equal(db.nstacks, 4);
	uint64_t tot[2] = { 0, 0 };
	bool saw_pair = false;
	for (size_t s = 0; s < db.nstacks; s++) {
		const struct tally_db_stack *st = &db.stacks[s];
		tot[0] += db.stack_counts[s * 2];
		tot[1] += db.stack_counts[s * 2 + 1];
		assert_int_equal(st->pid, 0);
		for (uint32_t i = 0; i < st->len; i++)
			assert_true(tally_db_frame(&db, st, i)->image < db.nimages);
		if (st->len == 2) {
			const struct tally_frame *leaf = tally_db_frame(&db, st, 0),
						 *caller = tally_db_frame(&db, st, 1);
			assert_int_equal(leaf->image, t);
			assert_int_equal(leaf->offset, 0x1010);
			assert_int_equal(caller->image, t);
			assert_int_equal(caller->offset, 0x2000);
			assert_int_equal(db.stack_counts[s * 2], 4);
			saw_pair = true;
		}
	}
	assert_true(saw_pair);
	assert_int_equal(tot[0], 14);
	assert_int_equal(tot[1], 10);
	tally_db_release(&db);
}

static void test_db__roundtrip_per_pid(void **state)
{
	struct fixture *fx = *state;
	struct tally_agg a;
	tally_agg_init(&a, 1, true, false);
	uint32_t t = file_image(&a, "/bin/true");
	uint32_t f = tally_agg_frame(&a, t, 0x1010);
	add(&a, &f, 1, 100, 0, 6);
	add(&a, &f, 1, 200, 0, 4);
	struct tally_proc *p = tally_agg_proc(&a, 100, true);
	strcpy(p->comm, "hundred");
	p->exe = xstrdup("/bin/true");
	p->sampled = true;
	p = tally_agg_proc(&a, 200, true);
	strcpy(p->comm, "two-hundred");
	p->sampled = true;
	tally_agg_tasks(&a);
	struct tally_meta m;
	session_init(&m, "cpu-clock", "none", true);
	assert_int_equal(tally_db_write(fx->db, false, &a, &m), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);

	/* one file per (image, pid) */
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/true-%s-100.prof", fx->db, fx->true_id);
	char *prof = unit_read(sb.buf, NULL);
	assert_non_null(prof);
	assert_str_has(prof, "\npid: 100\n");
	assert_str_has(prof, "\ncomm: hundred\n");
	free(prof);
	strbuf_reset(&sb);
	strbuf_addf(&sb, "%s/true-%s-200.prof", fx->db, fx->true_id);
	assert_true(unit_exists(sb.buf));
	strbuf_release(&sb);

	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("tally_db_open: %s", tally_errmsg());
	assert_true(db.per_pid);
	assert_int_equal(db.nimages, 1);
	assert_int_equal(db.nentries, 2);
	assert_int_equal(db_count(&db, 0, 100, 0x1010, 0), 6);
	assert_int_equal(db_count(&db, 0, 200, 0x1010, 0), 4);
	assert_int_equal(db.samples[0], 10);
	assert_int_equal(db.ntasks, 2);
	assert_string_equal(tally_db_comm(&db, 100), "hundred");
	assert_string_equal(tally_db_comm(&db, 200), "two-hundred");
	assert_null(tally_db_comm(&db, 300));
	for (size_t i = 0; i < db.ntasks; i++)
		if (db.tasks[i].pid == 100)
			assert_string_equal(db.tasks[i].exe, "/bin/true");
	tally_db_release(&db);
}

static void test_db__roundtrip_empty(void **state)
{
	struct fixture *fx = *state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_meta m;
	session_init(&m, "cpu-clock", "none", false);
	assert_int_equal(tally_db_write(fx->db, false, &a, &m), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);
	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("tally_db_open: %s", tally_errmsg());
	assert_int_equal(db.nimages, 0);
	assert_int_equal(db.nentries, 0);
	assert_int_equal(db.samples[0], 0);
	tally_db_release(&db);
}

/* The address of some kernel text symbol, or 0 when /proc/kallsyms hides them. */
static uint64_t some_kernel_text(void)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	if (!f)
		return 0;
	char line[512];
	uint64_t found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long addr;
		char type;
		if (sscanf(line, "%llx %c", &addr, &type) == 2 && addr &&
		    (type == 'T' || type == 't') && !strchr(line, '\t'))
			found = addr;
	}
	fclose(f);
	return found;
}

static void test_db__roundtrip_kernel(void **state)
{
	struct fixture *fx = *state;
	uint64_t k = some_kernel_text();
	if (!k) {
		fprintf(stderr, "skip: kernel addresses are hidden in /proc/kallsyms\n");
		skip();
	}
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	uint32_t kf = tally_agg_frame(&a, a.kernel_image, k);
	add(&a, &kf, 1, 0, 0, 3);
	struct tally_meta m;
	session_init(&m, "cpu-clock", "none", false);
	assert_int_equal(tally_db_write(fx->db, false, &a, &m), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);
	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("tally_db_open: %s", tally_errmsg());
	int ki = db_image_by_kind(&db, "kernel");
	assert_true(ki >= 0);
	assert_string_equal(db.images[ki].name, "kernel");
	assert_int_equal(db_count(&db, ki, 0, k, 0), 3);
	/* the symbol the sample needs was snapshotted */
	assert_true(db.nksyms >= 1);
	const struct tally_ksym *s = tally_ksym_find(db.ksyms, db.nksyms, k);
	assert_non_null(s);
	assert_int_equal(s->addr, k);
	assert_true(s->size > 0);
	char *mods = unit_path(fx->db, "modules");
	assert_true(unit_exists(mods));
	free(mods);
	tally_db_release(&db);
}

/* An image that only ever appears as a caller (no self samples) is still an
 * image of the database: the stacks name it. */
static void test_db__roundtrip_caller_only_image(void **state)
{
	struct fixture *fx = *state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	uint32_t nm = nomap_image(&a, 0);
	uint32_t t = file_image(&a, "/bin/true");
	uint32_t fr[] = { tally_agg_frame(&a, nm, 0x5000), tally_agg_frame(&a, t, 0x1234) };
	add(&a, fr, 2, 0, 0, 8);
	struct tally_meta m;
	session_init(&m, "cpu-clock", "fp", false);
	assert_int_equal(tally_db_write(fx->db, false, &a, &m), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);
	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("tally_db_open: %s", tally_errmsg());
	assert_int_equal(db.nimages, 2);
	int ti = db_image_by_kind(&db, "lib");
	int ni = db_image_by_kind(&db, "nomap");
	assert_true(ti >= 0 && ni >= 0);
	assert_string_equal(db.images[ti].path, "/bin/true");
	assert_int_equal(db.nentries, 1); /* self samples: the leaf only */
	assert_int_equal(db_count(&db, ni, 0, 0x5000, 0), 8);
	assert_int_equal(db.nstacks, 1);
	assert_int_equal(db.stacks[0].len, 2);
	assert_int_equal(tally_db_frame(&db, &db.stacks[0], 0)->image, ni);
	assert_int_equal(tally_db_frame(&db, &db.stacks[0], 1)->image, ti);
	assert_int_equal(tally_db_frame(&db, &db.stacks[0], 1)->offset, 0x1234);
	assert_int_equal(db.stack_counts[0], 8);
	tally_db_release(&db);
}

/* Files deleted or replaced since they were mapped, JIT code and the vDSO:
 * each identified and copied the way the format says. */
static void test_db__roundtrip_special_images(void **state)
{
	struct fixture *fx = *state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	/* the kernel's name for a mapped file that was deleted: the same file when
	 * it is back, so identified through the path without the suffix */
	uint32_t del = file_image(&a, "/bin/true (deleted)");
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_JIT;
	k.path = (char *)"/tmp/perf-4242.map";
	k.pid = 4242;
	uint32_t jit = tally_agg_image(&a, &k);
	static const char jit_map[] = "7f0000001000 40 jitted_function\n";
	a.images[jit].jit_map = xstrdup(jit_map);
	a.images[jit].jit_map_len = strlen(jit_map);
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_VDSO;
	k.path = (char *)"[vdso]";
	uint32_t vdso = tally_agg_image(&a, &k);
	uint32_t f1 = tally_agg_frame(&a, del, 0x1010);
	uint32_t f2 = tally_agg_frame(&a, jit, 0x7f0000001010);
	uint32_t f3 = tally_agg_frame(&a, vdso, 0x800);
	add(&a, &f1, 1, 0, 0, 1);
	add(&a, &f2, 1, 0, 0, 2);
	add(&a, &f3, 1, 0, 0, 3);
	struct tally_meta m;
	session_init(&m, "cpu-clock", "none", false);
	assert_int_equal(tally_db_write(fx->db, false, &a, &m), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);

	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("tally_db_open: %s", tally_errmsg());
	assert_int_equal(db.nimages, 3);
	int d = db_image_by_kind(&db, "lib");
	assert_true(d >= 0);
	assert_string_equal(db.images[d].name, "true");
	assert_string_equal(db.images[d].id_kind, "build-id");
	assert_string_equal(db.images[d].id, fx->true_id);
	assert_int_equal(db_count(&db, d, 0, 0x1010, 0), 1);

	int j = db_image_by_kind(&db, "jit");
	assert_true(j >= 0);
	assert_int_equal(db.images[j].pid, 4242);
	assert_string_equal(db.images[j].id_kind, "xxh64");
	/* not per-pid: entries carry pid 0, the image carries its process */
	assert_int_equal(db_count(&db, j, 0, 0x7f0000001010, 0), 2);
	/* the map is copied into the database: the process and its /tmp file are gone later */
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/jit/perf-4242-%s.map", fx->db, db.images[j].id);
	char *copy = unit_read(sb.buf, NULL);
	if (!copy)
		fail_msg("no JIT map copy at '%s'", sb.buf);
	assert_string_equal(copy, jit_map);
	free(copy);

	int v = db_image_by_kind(&db, "vdso");
	assert_true(v >= 0);
	assert_int_equal(db_count(&db, v, 0, 0x800, 0), 3);
	strbuf_reset(&sb);
	strbuf_addf(&sb, "%s/vdso.so", fx->db);
	struct tally_elf_info info;
	assert_int_equal(tally_elf_info(sb.buf, 2, &info), 0);
	assert_true(info.is_elf);
	char hex[32];
	snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
	assert_string_equal(db.images[v].id, hex); /* the id is the hash of the copy */
	strbuf_release(&sb);
	tally_db_release(&db);
}


/* A JIT image named by a perf map and a jitdump: samples neither names go to
 * nomap (stacks included), the database keeps the dump's sampled functions with
 * their lines and code, and the resolver gives names and lines from the copies. */
static void test_db__jit_settle(void **state)
{
	struct fixture *fx = *state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_JIT;
	k.path = (char *)"/tmp/jit-4242.dump";
	k.pid = 4242;
	uint32_t jit = tally_agg_image(&a, &k);
	static const char jit_map[] = "7f0000001000 40 from_map\n";
	a.images[jit].jit_map = xstrdup(jit_map);
	a.images[jit].jit_map_len = strlen(jit_map);
	char *dump = xstrdup(
		"source: /tmp/jit-4242.dump\nelf-mach: 62\npid: 4242\n\n"
		"func 7f0000002000 4 7 from_dump\nline 7f0000002000 3 0 f.js\nline 7f0000002002 4 0 f.js\ncode 4889f8c3\n"
		"func 7f0000003000 4 8 never_ran\ncode 4889f8c3\n");
	a.images[jit].jd = xcalloc(1, sizeof(struct tally_jitdump));
	assert_int_equal(tally_jitdump_read_copy(a.images[jit].jd, dump, "dump"), 0);
	free(dump);
	a.images[jit].jd_source = xstrdup("/tmp/jit-4242.dump");
	uint32_t fr[2];
	fr[0] = tally_agg_frame(&a, jit, 0x7f0000001010);
	add(&a, fr, 1, 0, 0, 5);
	fr[0] = tally_agg_frame(&a, jit, 0x7f0000002003);
	add(&a, fr, 1, 0, 0, 6);
	fr[0] = tally_agg_frame(&a, jit, 0x7f0000009000); /* named by neither */
	fr[1] = tally_agg_frame(&a, jit, 0x7f0000001020);
	add(&a, fr, 2, 0, 0, 7);
	tally_agg_snapshot_jit(&a);
	/* the frame index follows the move: the same key finds the same frame */
	uint32_t nomap_img = a.frames[fr[0]].image;
	assert_int_not_equal(nomap_img, jit);
	assert_int_equal(a.images[nomap_img].kind, TALLY_IMG_NOMAP);
	assert_int_equal(tally_agg_frame(&a, nomap_img, 0x7f0000009000), fr[0]);
	struct tally_meta m;
	session_init(&m, "cpu-clock", "fp", false);
	assert_int_equal(tally_db_write(fx->db, false, &a, &m), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);

	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("tally_db_open: %s", tally_errmsg());
	int j = db_image_by_kind(&db, "jit"), n = db_image_by_kind(&db, "nomap");
	assert_true(j >= 0 && n >= 0);
	assert_int_equal(db_count(&db, j, 0, 0x7f0000001010, 0), 5);
	assert_int_equal(db_count(&db, j, 0, 0x7f0000002003, 0), 6);
	assert_int_equal(db_count(&db, n, 0, 0x7f0000009000, 0), 7);
	bool seen = false;
	for (size_t i = 0; i < db.nstacks; i++)
		if (db.stacks[i].len == 2) {
			assert_int_equal(tally_db_frame(&db, &db.stacks[i], 0)->image, n);
			assert_int_equal(tally_db_frame(&db, &db.stacks[i], 1)->image, j);
			seen = true;
		}
	assert_true(seen);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/jit/jitdump-4242-%s.txt", fx->db, db.images[j].id);
	char *copy = unit_read(sb.buf, NULL);
	if (!copy)
		fail_msg("no jitdump copy at '%s'", sb.buf);
	assert_str_has(copy, "func 7f0000002000 4 7 from_dump\n");
	assert_str_has(copy, "code 4889f8c3\n");
	assert_null(strstr(copy, "never_ran"));
	free(copy);
	strbuf_release(&sb);

	struct tally_resolver *res;
	tally_resolver_new(&res, &db, NULL);
	assert_string_equal(tally_resolve(res, (uint32_t)j, 0x7f0000001010)->name, "from_map");
	assert_string_equal(tally_resolve(res, (uint32_t)j, 0x7f0000002003)->name, "from_dump");
	const char *file;
	unsigned line;
	assert_int_equal(tally_resolver_jit_line(res, (uint32_t)j, 0x7f0000002003, &file, &line),
			 0);
	assert_string_equal(file, "f.js");
	assert_int_equal(line, 4);
	assert_int_equal(tally_resolver_jit_line(res, (uint32_t)j, 0x7f0000001010, &file, &line),
			 -1);
	uint32_t mach = 0;
	const struct tally_jit_func *jf =
		tally_resolver_jit_func(res, (uint32_t)j, 0x7f0000002001, &mach);
	assert_non_null(jf);
	assert_int_equal(mach, 62);
	assert_int_equal(jf->code[3], 0xc3);
	assert_null(tally_resolver_note(res, (uint32_t)j));
	tally_resolver_free(res);
	tally_db_release(&db);
}

/* ---- writer rules ---- */

static void test_db__write_refuses_existing(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	struct tally_agg a;
	struct tally_meta m;
	tally_agg_init(&a, 1, false, false);
	uint32_t t = file_image(&a, "/bin/true");
	uint32_t f = tally_agg_frame(&a, t, 0x4242);
	add(&a, &f, 1, 0, 0, 1);
	session_init(&m, "cpu-clock", "none", false);

	int r = tally_db_write(fx->db, false, &a, &m);
	assert_int_equal(r, -EEXIST);
	assert_errmsg_has(fx->db);
	assert_errmsg_has("--force");
	/* the old database is intact */
	struct tally_db db;
	assert_int_equal(tally_db_open(&db, fx->db), 0);
	assert_int_equal(db.samples[0], 14);
	tally_db_release(&db);

	/* with force: replaced, and no staging or old directory left behind */
	r = tally_db_write(fx->db, true, &a, &m);
	if (r)
		fail_msg("forced write: %s", tally_errmsg());
	assert_int_equal(unit_dir_entries(fx->tmp), 1);
	assert_int_equal(tally_db_open(&db, fx->db), 0);
	assert_int_equal(db.samples[0], 1);
	assert_int_equal(db.nentries, 1);
	assert_int_equal(db.entries[0].offset, 0x4242);
	assert_int_equal(db.nimages, 1);
	/* no task ran /bin/true this time: it is only a library-like file */
	assert_string_equal(db.images[0].kind, "lib");
	assert_string_equal(db.images[0].id, fx->true_id);
	assert_int_equal(db.ntasks, 0);
	tally_db_release(&db);
	/* the files of the old database are gone, not merged */
	char *nomap = find_file(fx->db, "nomap-");
	assert_null(nomap);

	tally_meta_release(&m);
	tally_agg_release(&a);
}

static void test_db__write_target_checks(void **state)
{
	struct fixture *fx = *state;
	struct tally_agg a;
	struct tally_meta m;
	tally_agg_init(&a, 1, false, false);
	session_init(&m, "cpu-clock", "none", false);

	/* force never replaces a directory that is not a database */
	char *other = unit_path(fx->tmp, "notadb");
	assert_int_equal(mkdir(other, 0755), 0);
	char *keep = unit_path(other, "keep");
	unit_write_str(keep, "x");
	assert_true(tally_db_write(other, true, &a, &m) < 0);
	assert_errmsg_has(other);
	assert_true(unit_exists(keep));
	/* nor a file */
	assert_true(tally_db_write(keep, true, &a, &m) < 0);
	assert_errmsg_has(keep);
	/* a parent that does not exist */
	char *deep = unit_path(fx->tmp, "missing/db");
	assert_true(tally_db_write(deep, false, &a, &m) < 0);
	assert_errmsg_has(deep);
	assert_false(unit_exists(deep));
	/* an empty path */
	assert_true(tally_db_check_target("", false) < 0);
	/* a fresh path in an existing directory is fine */
	assert_int_equal(tally_db_check_target(fx->db, false), 0);
	assert_int_equal(unit_dir_entries(fx->tmp), 1); /* only notadb */

	free(deep);
	free(keep);
	free(other);
	tally_meta_release(&m);
	tally_agg_release(&a);
}

/* A file path with a newline (legal on Linux, and reported as-is by the
 * kernel's MMAP2 record) must not make the database unreadable. */
static void test_db__roundtrip_path_with_newline(void **state)
{
	struct fixture *fx = *state;
	char *odd = fx->extra = unit_path(fx->tmp, "odd\nname");
	size_t len = 0;
	char *bytes = unit_read("/bin/true", &len);
	unit_write(odd, bytes, len);
	free(bytes);
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	uint32_t t = file_image(&a, odd);
	uint32_t f = tally_agg_frame(&a, t, 0x1010);
	add(&a, &f, 1, 0, 0, 5);
	struct tally_meta m;
	session_init(&m, "cpu-clock", "none", false);
	assert_int_equal(tally_db_write(fx->db, false, &a, &m), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);
	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("database with a newline in an image path is unreadable: %s",
			 tally_errmsg());
	assert_int_equal(db.nimages, 1);
	assert_int_equal(db.samples[0], 5);
	assert_int_equal(db_count(&db, 0, 0, 0x1010, 0), 5);
	/* read back as it was, and still identified by its build-id */
	assert_string_equal(db.images[0].path, odd);
	assert_string_equal(db.images[0].id, fx->true_id);
	assert_null(strchr(db.images[0].name, '\n'));
	tally_db_release(&db);
}

/* A process may name itself anything (prctl PR_SET_NAME), newlines included:
 * that must not make a per-pid database unreadable. */
static void test_db__roundtrip_comm_with_newline(void **state)
{
	struct fixture *fx = *state;
	struct tally_agg a;
	tally_agg_init(&a, 1, true, false);
	uint32_t t = file_image(&a, "/bin/true");
	uint32_t f = tally_agg_frame(&a, t, 0x1010);
	add(&a, &f, 1, 100, 0, 5);
	struct tally_proc *p = tally_agg_proc(&a, 100, true);
	strcpy(p->comm, "evil\nname\tx");
	p->sampled = true;
	tally_agg_tasks(&a);
	struct tally_meta m;
	session_init(&m, "cpu-clock", "none", true);
	assert_int_equal(tally_db_write(fx->db, false, &a, &m), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);
	struct tally_db db;
	int r = tally_db_open(&db, fx->db);
	if (r)
		fail_msg("database with a newline in a comm is unreadable: %s", tally_errmsg());
	assert_int_equal(db.samples[0], 5);
	assert_int_equal(db.ntasks, 1);
	assert_int_equal(db.tasks[0].pid, 100);
	assert_string_equal(tally_db_comm(&db, 100), "evil\nname\tx");
	assert_int_equal(db_count(&db, 0, 100, 0x1010, 0), 5);
	tally_db_release(&db);
}

/* ---- damaged databases ---- */

/* Opens a database expected to be damaged: fails, db is left released, and the
 * message names `what`. */
static void expect_open_fails(const char *path, const char *what)
{
	struct tally_db db;
	memset(&db, 0xab, sizeof(db));
	int r = tally_db_open(&db, path);
	if (r >= 0) {
		tally_db_release(&db);
		fail_msg("tally_db_open('%s') succeeded, expected an error naming '%s'", path,
			 what);
	}
	assert_errmsg_has(what);
	assert_null(db.path);
	assert_int_equal(db.nentries, 0);
	assert_null(db.images);
}

static void test_db__open_missing(void **state)
{
	struct fixture *fx = *state;
	expect_open_fails(fx->db, fx->db);
	assert_errmsg_has("tally record");
}

static void test_db__open_not_a_db(void **state)
{
	struct fixture *fx = *state;
	/* a directory without a session */
	assert_int_equal(mkdir(fx->db, 0755), 0);
	expect_open_fails(fx->db, fx->db);
	assert_errmsg_has("session");
	/* a file */
	char *file = unit_path(fx->tmp, "file");
	unit_write_str(file, "format-version: 1\n");
	expect_open_fails(file, file);
	assert_errmsg_has("not a tally database");
	free(file);
}

static void test_db__open_future_version(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	char *session = unit_path(fx->db, "session");
	unit_write_str(
		session,
		"format-version: 999\nevents: cpu-clock\ncall-graph: none\nper-pid: no\nsamples: 14\n");
	expect_open_fails(fx->db, session);
	assert_errmsg_has("999");
	/* no version at all */
	unit_write_str(session, "events: cpu-clock\ncall-graph: none\nper-pid: no\nsamples: 14\n");
	expect_open_fails(fx->db, session);
	assert_errmsg_has("format-version");
	/* a damaged session line */
	unit_write_str(session, "format-version: 1\nevents cpu-clock\nsamples: 14\n");
	expect_open_fails(fx->db, session);
	assert_errmsg_has("line 2");
	/* samples must have one count per event */
	unit_write_str(session, "format-version: 1\nevents: cpu-clock\nsamples: 14,3\n");
	expect_open_fails(fx->db, session);
	assert_errmsg_has("samples");
	free(session);
}

/* Path of the /bin/true .prof of the standard database, and its text. */
static char *std_prof(struct fixture *fx, char **text)
{
	char *p = find_file(fx->db, "true-");
	assert_non_null(p);
	*text = unit_read(p, NULL);
	assert_non_null(*text);
	return p;
}

/* Writes the standard .prof with the line starting at `from` (a header line such
 * as "\nsamples: ") replaced by `line`, and expects the database to be refused
 * naming that file and each of the words; then puts the original back. */
static void spoil_std_prof(struct fixture *fx, const char *from, const char *line, const char *w1,
			   const char *w2)
{
	char *text;
	char *prof = std_prof(fx, &text);
	char *s = strstr(text, from);
	assert_non_null(s);
	struct strbuf sb = STRBUF_INIT;
	strbuf_add(&sb, text, (size_t)(s - text));
	strbuf_addf(&sb, "\n%s", line);
	strbuf_addstr(&sb, strchr(s + 1, '\n'));
	unit_write(prof, sb.buf, sb.len);
	expect_open_fails(fx->db, prof);
	assert_errmsg_has(w1);
	if (w2)
		assert_errmsg_has(w2);
	unit_write_str(prof, text);
	strbuf_release(&sb);
	free(text);
	free(prof);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void test_db__open_prof_garbage_line(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	char *text;
	char *prof = std_prof(fx, &text);
	size_t lines = count_lines(text);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, text);
	strbuf_addstr(&sb, "this is not a profile line\n");
	unit_write(prof, sb.buf, sb.len);
	expect_open_fails(fx->db, prof);
	char want[64];
	snprintf(want, sizeof(want), "line %zu", lines + 1);
	assert_errmsg_has(want);
	strbuf_release(&sb);
	free(text);
	free(prof);
}

static void test_db__open_prof_truncated(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	char *text;
	char *prof = std_prof(fx, &text);
	size_t len = strlen(text);
	/* cut in the middle of the last line, as a crash mid-write would */
	assert_true(len > 4);
	unit_write(prof, text, len - 3);
	expect_open_fails(fx->db, prof);
	assert_errmsg_has("middle of the line");
	free(text);
	free(prof);
}

static void test_db__open_prof_sum_mismatch(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	/* the lines add up to 12; the header claims 13 */
	spoil_std_prof(fx, "\nsamples: 12\n", "samples: 13", "12", "13");
}

static void test_db__open_prof_bad_header(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	/* an index naming no image */
	spoil_std_prof(fx, "\nindex: ", "index: 99", "index", NULL);
	/* another format version */
	char *text;
	char *prof = std_prof(fx, &text);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "format-version: 2\n%s", strchr(text, '\n') + 1);
	unit_write(prof, sb.buf, sb.len);
	expect_open_fails(fx->db, prof);
	assert_errmsg_has("format-version");
	/* binary data */
	strbuf_reset(&sb);
	strbuf_add(&sb, text, strlen(text));
	strbuf_add(&sb, "0\0 1\n", 5);
	unit_write(prof, sb.buf, sb.len);
	expect_open_fails(fx->db, prof);
	strbuf_release(&sb);
	free(text);
	free(prof);
}

static void test_db__open_duplicate_prof(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	/* a second file for the same image would be counted twice: refused, not summed */
	char *text;
	char *prof = std_prof(fx, &text);
	char *copy = unit_path(fx->db, "true-copy.prof");
	unit_write_str(copy, text);
	expect_open_fails(fx->db, copy);
	assert_errmsg_has("again");
	free(copy);
	free(text);
	free(prof);
}

static void test_db__open_missing_prof(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	/* the session counted 14 samples; without the nomap file only 12 remain */
	char *nomap = find_file(fx->db, "nomap-");
	assert_non_null(nomap);
	assert_int_equal(unlink(nomap), 0);
	expect_open_fails(fx->db, fx->db);
	assert_errmsg_has("14");
	assert_errmsg_has("12");
	free(nomap);
}

static void test_db__open_damaged_images_stacks(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "fp");
	char *images = unit_path(fx->db, "images");
	char *text = unit_read(images, NULL);
	/* the image registry is required */
	assert_int_equal(unlink(images), 0);
	expect_open_fails(fx->db, images);
	/* out of order indices */
	unit_write_str(images, "1\texec\tab\tbuild-id\t0\ttrue\t/bin/true\n");
	expect_open_fails(fx->db, images);
	assert_errmsg_has("line 1");
	unit_write_str(images, text);
	struct tally_db db;
	assert_int_equal(tally_db_open(&db, fx->db), 0);
	tally_db_release(&db);

	/* call graphs were recorded: the stacks file is required and checked */
	char *stacks = unit_path(fx->db, "stacks");
	char *st = unit_read(stacks, NULL);
	assert_int_equal(unlink(stacks), 0);
	expect_open_fails(fx->db, stacks);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, st);
	strbuf_addstr(&sb, "1 0 99:10\n"); /* image 99 does not exist */
	unit_write(stacks, sb.buf, sb.len);
	expect_open_fails(fx->db, stacks);
	char want[32];
	snprintf(want, sizeof(want), "line %zu", count_lines(st) + 1);
	assert_errmsg_has(want);
	strbuf_release(&sb);
	free(st);
	free(stacks);
	free(text);
	free(images);
}

/* ---- stacks read later ---- */

/* a and b hold the same stacks, in the same order */
static void assert_same_stacks(const struct tally_db *a, const struct tally_db *b)
{
	assert_int_equal(a->nstacks, b->nstacks);
	assert_int_equal(a->nevents, b->nevents);
	for (size_t s = 0; s < a->nstacks; s++) {
		const struct tally_db_stack *x = &a->stacks[s], *y = &b->stacks[s];
		assert_int_equal(x->len, y->len);
		assert_int_equal(x->pid, y->pid);
		for (uint32_t f = 0; f < x->len; f++) {
			assert_int_equal(tally_db_frame(a, x, f)->image,
					 tally_db_frame(b, y, f)->image);
			assert_int_equal(tally_db_frame(a, x, f)->offset,
					 tally_db_frame(b, y, f)->offset);
		}
		for (int e = 0; e < a->nevents; e++)
			assert_int_equal(a->stack_counts[s * (size_t)a->nevents + (size_t)e],
					 b->stack_counts[s * (size_t)b->nevents + (size_t)e]);
	}
}

/* A reader that keeps the stacks to read later holds its copy of a daemon's
 * epoch: the save after next (which writes over the copy the save before
 * swapped out, the spare) does not take that copy, and the reader reads the
 * stacks it opened, not what was written since. */
static void test_db__stacks_later_not_written_over(void **state)
{
	struct fixture *fx = *state;
	struct tally_db eager, other, later;
	write_std3(fx, 1, "fp");
	assert_int_equal(tally_db_open(&other, fx->db), 0);
	assert_int_equal(tally_remove_tree(fx->db), 0);
	write_std(fx, 2, "fp");
	assert_int_equal(tally_db_open(&eager, fx->db), 0);
	struct tally_db_spare sp = { NULL, -1, -1 };
	/* a flush: the copy swapped out is kept as the spare */
	assert_int_equal(tally_db_save_checked(&eager, fx->db, true, NULL, NULL, &sp), 0);
	assert_non_null(sp.path);

	assert_int_equal(tally_db_open_dir_flags(&later, fx->db, TALLY_DB_STACKS_LATER), 0);
	assert_non_null(later.lazy);
	/* the next flush writes over the spare and swaps out the reader's copy:
	 * not kept (removed as it was before spares), the reader keeps its files */
	assert_int_equal(tally_db_save_checked(&other, fx->db, true, NULL, NULL, &sp), 0);
	assert_null(sp.path);
	/* so the one after has no spare to write over: the reader's copy is untouched */
	assert_int_equal(tally_db_save_checked(&other, fx->db, true, NULL, NULL, &sp), 0);
	assert_non_null(sp.path);
	assert_int_equal(tally_db_load_stacks(&later), 0);
	assert_same_stacks(&later, &eager);
	tally_db_release(&later);

	/* once the reader is done, the copies are spares in turn again */
	assert_int_equal(tally_db_save_checked(&eager, fx->db, true, NULL, NULL, &sp), 0);
	assert_non_null(sp.path);
	tally_db_spare_drop(&sp);
	tally_db_release(&eager);
	tally_db_release(&other);
}

static void test_db__stacks_later(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 2, "fp");
	struct tally_db eager, db;
	assert_int_equal(tally_db_open(&eager, fx->db), 0);
	assert_null(eager.lazy);
	assert_int_equal(eager.nstacks, 4);

	/* opened, not read: the flat profile is there, the stacks come when asked */
	assert_int_equal(tally_db_open_dir_flags(&db, fx->db, TALLY_DB_STACKS_LATER), 0);
	assert_non_null(db.lazy);
	assert_int_equal(db.nstacks, 0);
	assert_int_equal(db.nentries, eager.nentries);
	assert_int_equal(tally_db_load_stacks(&db), 0);
	assert_null(db.lazy);
	assert_same_stacks(&db, &eager);
	assert_int_equal(tally_db_load_stacks(&db), 0); /* nothing left to read */
	assert_int_equal(db.nstacks, 4);
	tally_db_release(&db);

	/* damaged after the open, in place: the load says where, at every call,
	 * and what needs no stacks is still there */
	char *stacks = unit_path(fx->db, "stacks");
	char *text = unit_read(stacks, NULL);
	assert_int_equal(tally_db_open_dir_flags(&db, fx->db, TALLY_DB_STACKS_LATER), 0);
	unit_write_str(stacks, "# stacks\nthis is not a stack\n");
	assert_int_not_equal(tally_db_load_stacks(&db), 0);
	assert_errmsg_has("stacks' line 2: expected 'COUNT PID IMAGE:OFFSET");
	tally_seterr(-EINVAL, "something else");
	assert_int_not_equal(tally_db_load_stacks(&db), 0);
	assert_errmsg_has("stacks' line 2");
	assert_int_equal(db.nstacks, 0);
	int t = db_image_by_kind(&db, "exec");
	assert_int_equal(db_count(&db, t, 0, 0x1010, 0), 9);
	tally_db_release(&db);

	/* a missing file: the open works, the load fails as an eager open does */
	assert_int_equal(unlink(stacks), 0);
	assert_int_equal(tally_db_open_dir_flags(&db, fx->db, TALLY_DB_STACKS_LATER), 0);
	assert_int_equal(tally_db_load_stacks(&db), -ENOENT);
	assert_errmsg_has("is missing though the session recorded call graphs");
	tally_db_release(&db);
	unit_write_str(stacks, text);

	/* a database that was never loaded is not written without its stacks */
	assert_int_equal(tally_db_open_dir_flags(&db, fx->db, TALLY_DB_STACKS_LATER), 0);
	char *copy = unit_path(fx->tmp, "copy");
	assert_int_not_equal(tally_db_save(&db, copy, false), 0);
	assert_errmsg_has("stacks were not read");
	tally_db_release(&db);
	tally_db_release(&eager);
	free(copy);
	free(text);
	free(stacks);
}

/* A database in memory for tally_parse_stacks: two events, two images. */
static void parse_db(struct tally_db *db, uint64_t a, uint64_t b)
{
	memset(db, 0, sizeof(*db));
	db->nevents = 2;
	db->events = xcalloc(2, sizeof(char *));
	db->events[0] = xstrdup("cpu-clock");
	db->events[1] = xstrdup("page-faults");
	db->samples = xcalloc(2, sizeof(uint64_t));
	db->samples[0] = a;
	db->samples[1] = b;
	db->nimages = 2;
	db->images = xcalloc(2, sizeof(*db->images));
	db->has_stacks = true;
}

static void expect_stacks_bad(const char *text, size_t len, const char *msg)
{
	struct tally_db db;
	parse_db(&db, 3, 1);
	if (tally_db_parse_stacks(&db, text, len, "st") == 0)
		fail_msg("'%.*s' was taken as stacks", (int)len, text);
	assert_errmsg_has(msg);
	tally_db_release(&db);
}

static void test_db__parse_stacks(void **state)
{
	(void)state;
	struct tally_db db;
	parse_db(&db, 7, 1);
	static const char good[] =
		"# count[,count...] pid frames\n3,1 0 0:10 1:20\n\n2,0 7 1:FF 1:20\n2,0 0 0:10\n";
	assert_int_equal(tally_db_parse_stacks(&db, good, strlen(good), "st"), 0);
	assert_int_equal(db.nstacks, 3);
	assert_int_equal(db.nstack_frames, 5);
	assert_int_equal(db.nframe_tab, 3); /* each distinct frame once */
	assert_int_equal(db.stacks[1].pid, 7);
	assert_int_equal(tally_db_frame(&db, &db.stacks[1], 0)->offset, 0xff);
	assert_int_equal(tally_db_frame(&db, &db.stacks[1], 1)->image, 1);
	assert_ptr_equal(tally_db_frame(&db, &db.stacks[0], 0),
			 tally_db_frame(&db, &db.stacks[2], 0));
	assert_int_equal(db.stack_counts[0], 3);
	assert_int_equal(db.stack_counts[1], 1);
	tally_db_release(&db);
	/* 16 hex digits, either case, and zeros */
	parse_db(&db, 3, 1);
	static const char wide[] = "3,1 0 0:FfFfFfFfFfFfFf0A 1:0 0:00a0\n";
	assert_int_equal(tally_db_parse_stacks(&db, wide, strlen(wide), "st"), 0);
	assert_int_equal(tally_db_frame(&db, &db.stacks[0], 0)->offset, 0xffffffffffffff0aULL);
	assert_int_equal(tally_db_frame(&db, &db.stacks[0], 1)->offset, 0);
	assert_int_equal(tally_db_frame(&db, &db.stacks[0], 2)->offset, 0xa0);
	tally_db_release(&db);

	expect_stacks_bad("3,1 0 0:10", 10, "'st' line 1: the file ends in the middle of the line");
	expect_stacks_bad("3,1 0 0:10\n\0\n", 13,
			  "'st' line 2: binary data (a NUL byte) in a text file");
	expect_stacks_bad("3,1 0 0:10\n3,1 0 0:1x\n", 22,
			  "'st' line 2: expected 'COUNT PID IMAGE:OFFSET");
	static const char *const bad[] = {
		"3,1 0 2:10\n",                     /* no image 2 */
		"3 0 0:10\n",                       /* one count for two events */
		"3,1 0\n",                          /* no frame */
		"3,1 0 0:10000000000000000\n",      /* 17 hex digits */
		"3,1 0 0:\n",                       /* no hex digit */
		"3,1 0 0:g\n",
		"18446744073709551616,1 0 0:10\n",  /* past 64 bits */
		"3,1 0 0:10 \n",
		"3,1 x 0:10\n",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		expect_stacks_bad(bad[i], strlen(bad[i]),
				  "'st' line 1: expected 'COUNT PID IMAGE:OFFSET");
	expect_stacks_bad("2,1 0 0:10\n", 11,
			  "'st': its stacks hold 2 'cpu-clock' samples but the session counted 3");
}

/* The callers a stack shares with the line before it (from the root) are
 * that line's frames; a frame at the same offset in another image is another
 * frame, and the rest of the stack is looked up as usual. */
static void test_db__parse_stacks_shared_callers(void **state)
{
	(void)state;
	struct tally_db db;
	parse_db(&db, 6, 0);
	static const char text[] = "1,0 0 0:10 0:20 0:30\n"
				   "1,0 0 0:11 1:20 0:30\n"
				   "1,0 0 0:12 1:20 0:30\n"
				   "1,0 0 0:30\n"
				   "1,0 0 1:10 0:10 0:20 0:30\n"
				   "1,0 0 0:20 0:30 0:30\n";
	assert_int_equal(tally_db_parse_stacks(&db, text, strlen(text), "st"), 0);
	static const struct {
		uint32_t n;
		uint32_t image[4];
		uint64_t offset[4];
	} want[] = {
		{ 3, { 0, 0, 0 }, { 0x10, 0x20, 0x30 } },
		{ 3, { 0, 1, 0 }, { 0x11, 0x20, 0x30 } },
		{ 3, { 0, 1, 0 }, { 0x12, 0x20, 0x30 } },
		{ 1, { 0 }, { 0x30 } },
		{ 4, { 1, 0, 0, 0 }, { 0x10, 0x10, 0x20, 0x30 } },
		{ 3, { 0, 0, 0 }, { 0x20, 0x30, 0x30 } },
	};
	assert_int_equal(db.nstacks, ARRAY_SIZE(want));
	for (size_t k = 0; k < ARRAY_SIZE(want); k++) {
		assert_int_equal(db.stacks[k].len, want[k].n);
		for (uint32_t f = 0; f < want[k].n; f++) {
			const struct tally_frame *fr = tally_db_frame(&db, &db.stacks[k], f);
			if (fr->image != want[k].image[f] || fr->offset != want[k].offset[f])
				fail_msg("stack %zu frame %u: %u:%" PRIx64 ", not %u:%" PRIx64, k,
					 f, fr->image, fr->offset, want[k].image[f],
					 want[k].offset[f]);
		}
	}
	/* each distinct frame once: 0:10 0:11 0:12 0:20 0:30 1:10 1:20 */
	assert_int_equal(db.nframe_tab, 7);
	assert_ptr_equal(tally_db_frame(&db, &db.stacks[0], 2),
			 tally_db_frame(&db, &db.stacks[4], 3));
	assert_ptr_equal(tally_db_frame(&db, &db.stacks[0], 0),
			 tally_db_frame(&db, &db.stacks[4], 1));
	assert_ptr_equal(tally_db_frame(&db, &db.stacks[5], 1),
			 tally_db_frame(&db, &db.stacks[5], 2));
	tally_db_release(&db);
}

/* Lines across the reader's buffer (1 MiB): a file read later holds what the
 * same text parsed whole holds. */
static void test_db__stacks_later_long_file(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "fp");
	struct tally_db db;
	assert_int_equal(tally_db_open_dir_flags(&db, fx->db, TALLY_DB_STACKS_LATER), 0);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "# count[,count...] pid frames (image-index:hex-offset, leaf first)\n");
	uint64_t total = db.samples[0]; /* the stacks must hold the session's samples */
	for (unsigned i = 0; sb.len < (3u << 20); i++) {
		strbuf_addf(&sb, "%" PRIu64 " 0", i ? 0 : total);
		for (unsigned f = 0; f < 3 + i % 17; f++)
			strbuf_addf(&sb, " 0:%x", 0x1000 + (i * 7919u + f * 104729u) % 5000);
		strbuf_addch(&sb, '\n');
	}
	char *stacks = unit_path(fx->db, "stacks");
	unit_write(stacks, sb.buf, sb.len);
	if (tally_db_load_stacks(&db))
		fail_msg("%s", tally_errmsg());
	struct tally_db whole;
	parse_db(&whole, total, 0);
	free(whole.events[1]);
	whole.nevents = 1;
	assert_int_equal(tally_db_parse_stacks(&whole, sb.buf, sb.len, "whole"), 0);
	assert_true(db.nstacks > 20000);
	assert_same_stacks(&db, &whole);
	tally_db_release(&whole);
	tally_db_release(&db);
	strbuf_release(&sb);
	free(stacks);
}

/* ---- damage that used to be accepted ---- */

/* text with the first occurrence of from replaced by to (malloc'd). */
static char *replaced(const char *text, const char *from, const char *to)
{
	const char *s = strstr(text, from);
	if (!s)
		fail_msg("'%s' not found in '%s'", from, text);
	struct strbuf sb = STRBUF_INIT;
	strbuf_add(&sb, text, (size_t)(s - text));
	strbuf_addstr(&sb, to);
	strbuf_addstr(&sb, s + strlen(from));
	return strbuf_detach(&sb);
}

/* The 1-based number of the line of text that starts with prefix. */
static size_t line_of(const char *text, const char *prefix)
{
	size_t ln = 1;
	for (const char *p = text; *p; ln++) {
		if (!strncmp(p, prefix, strlen(prefix)))
			return ln;
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	fail_msg("no line starting with '%s'", prefix);
	return 0;
}

static void assert_errmsg_line(size_t ln)
{
	char want[32];
	snprintf(want, sizeof(want), "line %zu", ln);
	assert_errmsg_has(want);
}

static void test_db__open_counts_wrap(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	char *text;
	char *prof = std_prof(fx, &text);
	/* 2^64-1 and 13 wrap to the 12 the header says (and the session's 14 still holds) */
	char *a = replaced(text, "\n1010 9\n", "\n1010 18446744073709551615\n");
	char *b = replaced(a, "\n2000 3\n", "\n2000 13\n");
	unit_write_str(prof, b);
	expect_open_fails(fx->db, prof);
	assert_errmsg_has("add up past 18446744073709551615");
	assert_errmsg_line(line_of(b, "2000 "));
	unit_write_str(prof, text);
	free(a);
	free(b);

	/* each file adds up, but together the files wrap around to the session's count */
	a = replaced(text, "\nsamples: 12\n", "\nsamples: 18446744073709551615\n");
	b = replaced(a, "\n1010 9\n", "\n1010 18446744073709551612\n");
	unit_write_str(prof, b);
	char *session = unit_path(fx->db, "session");
	char *st = unit_read(session, NULL);
	char *st2 = replaced(st, "\nsamples: 14\n", "\nsamples: 1\n"); /* 2^64 - 1 + 2 */
	unit_write_str(session, st2);
	expect_open_fails(fx->db, fx->db);
	assert_errmsg_has("more than 18446744073709551615 'cpu-clock' samples together");
	free(a);
	free(b);
	free(st);
	free(st2);
	free(session);
	free(text);
	free(prof);
}

/* The standard database's index of /bin/true in 'images'. */
static int true_index(struct fixture *fx)
{
	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("the standard database does not open: %s", tally_errmsg());
	int i = db_image_by_kind(&db, "exec");
	tally_db_release(&db);
	assert_true(i >= 0);
	return i;
}

/* ---- format 3: weights ---- */

/* The standard database as recorded (format 4: version 3's weights, binary
 * stacks): the weights come back as the
 * aggregate summed them (tally_agg_count: a period of 1), in the flat
 * profile, the stacks and the session's weight-total; damaged weights are
 * refused with their file and line. */
static void test_db__v3_weights(void **state)
{
	struct fixture *fx = *state;
	write_std3(fx, 2, "fp");
	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("tally_db_open: %s", tally_errmsg());
	assert_string_equal(tally_meta_get(&db.session, "format-version"), "4");
	assert_true(db.has_weights);
	assert_non_null(db.weights);
	assert_non_null(db.stack_weights);
	assert_string_equal(tally_meta_get(&db.session, "weight-unit"), "ns,events");
	assert_string_equal(tally_meta_get(&db.session, "weight-total"), "14000,10000");
	uint64_t w = 0, sw = 0;
	for (size_t i = 0; i < db.nentries; i++)
		w += db.weights[i * 2];
	for (size_t i = 0; i < db.nstacks; i++)
		sw += db.stack_weights[i * 2];
	assert_int_equal(w, 14000);
	assert_int_equal(sw, 14000);
	/* read later, the stacks come with the same weights; weighed before the
	 * load, the stacks loaded are weighed too */
	struct tally_db later;
	assert_int_equal(tally_db_open_dir_flags(&later, fx->db, TALLY_DB_STACKS_LATER), 0);
	tally_db_weigh(&later);
	assert_int_equal(tally_db_load_stacks(&later), 0);
	assert_int_equal(later.nstacks, db.nstacks);
	uint64_t lw = 0, lc = 0;
	for (size_t i = 0; i < later.nstacks; i++) {
		lw += later.stack_counts[i * 2];  /* weighed: the weights */
		lc += later.stack_weights[i * 2]; /* ... and the counts beside them */
	}
	assert_int_equal(lw, 14000);
	assert_int_equal(lc, 14);
	tally_db_release(&later);
	tally_db_release(&db);

	int t = true_index(fx);
	char *prof = find_file(fx->db, "true-");
	char *text = unit_read(prof, NULL);
	/* a weight for no sample */
	char *bad = replaced(text, "\n2000 3 3000 10 10000\n", "\n2000 3 3000 0 10000\n");
	unit_write_str(prof, bad);
	expect_open_fails(fx->db, "a weight of 10000 for no sample");
	free(bad);
	/* weights that do not add up to the header's */
	bad = replaced(text, "\n2000 3 3000 10 10000\n", "\n2000 3 3001 10 10000\n");
	unit_write_str(prof, bad);
	expect_open_fails(fx->db, "its lines weigh");
	free(bad);
	/* a format 1 line in a format 3 file */
	bad = replaced(text, "\n2000 3 3000 10 10000\n", "\n2000 3 10\n");
	unit_write_str(prof, bad);
	expect_open_fails(fx->db, "expected 'OFFSET COUNT WEIGHT'");
	free(bad);
	unit_write_str(prof, text);
	/* stacks: a weight that wraps, and one without its count */
	char *stacks = unit_path(fx->db, "stacks");
	size_t stlen;
	char *st = unit_read(stacks, &stlen);
	char buf[256];
	/* (text stacks, as version 3's, in a version 4 database: read as text) */
	snprintf(buf, sizeof(buf),
		 "# damaged\n14:18446744073709551615,10:10000 0 0 %d:1010\n1:1,0:0 0 0 %d:2000\n",
		 t, t);
	unit_write_str(stacks, buf);
	expect_open_fails(fx->db, "stacks' line 3: the weights add up past");
	snprintf(buf, sizeof(buf),
		 "# damaged\n14:14000,10:10000 0 0 %d:1010\n0:1,0:0 0 0 %d:2000\n", t, t);
	unit_write_str(stacks, buf);
	expect_open_fails(fx->db, "stacks' line 3: a weight of 1 for no sample");
	unit_write(stacks, st, stlen);
	assert_int_equal(tally_db_open(&db, fx->db), 0);
	tally_db_release(&db);
	/* the session's weight keys: a total the files do not add up to, a unit
	 * that is none, and lists of the wrong length */
	char *sess = unit_path(fx->db, "session");
	char *se = unit_read(sess, NULL);
	const char *wt = strstr(se, "\nweight-total: ");
	assert_non_null(wt);
	unsigned long long wsum = strtoull(wt + 15, NULL, 10);
	char from[64], to[64];
	snprintf(from, sizeof(from), "\nweight-total: %llu", wsum);
	snprintf(to, sizeof(to), "\nweight-total: %llu", wsum + 1);
	char *bad2 = replaced(se, from, to);
	unit_write_str(sess, bad2);
	expect_open_fails(fx->db, "but the session's weight-total is");
	free(bad2);
	snprintf(to, sizeof(to), "\nweight-total: %llu,%llu", wsum, wsum);
	bad2 = replaced(se, from, to);
	unit_write_str(sess, bad2);
	expect_open_fails(fx->db, "'weight-total' must hold one count per event");
	free(bad2);
	const char *wu = strstr(se, "\nweight-unit: ");
	assert_non_null(wu);
	size_t ul = strcspn(wu + 1, "\n") + 1;
	char unit_line[64];
	snprintf(unit_line, sizeof(unit_line), "%.*s", (int)ul, wu);
	bad2 = replaced(se, unit_line, "\nweight-unit: ms");
	unit_write_str(sess, bad2);
	expect_open_fails(fx->db, "weight-unit");
	free(bad2);
	unit_write_str(sess, se);
	assert_int_equal(tally_db_open(&db, fx->db), 0);
	tally_db_release(&db);
	free(se);
	free(sess);
	free(st);
	free(stacks);
	free(text);
	free(prof);
}

/* ---- format 4: binary stacks ---- */

/* bin with the n bytes at off replaced by v's, written to path */
static void bin_put(const char *path, const char *bin, size_t len, size_t off, const void *v,
		    size_t n)
{
	char *c = xmalloc(len);
	memcpy(c, bin, len);
	memcpy(c + off, v, n);
	unit_write(path, c, len);
	free(c);
}
#define bin_put32(path, bin, len, off, v) bin_put(path, bin, len, off, &(uint32_t){ (v) }, 4)
#define bin_put64(path, bin, len, off, v) bin_put(path, bin, len, off, &(uint64_t){ (v) }, 8)

/* The standard database as recorded (format 4) holds its stacks binary: read
 * now or later, they are the stacks that the same database written as text
 * (format 1) holds; each kind of damage is refused with the file named, and
 * a binary file in an older database too. */
static void test_db__binary_stacks(void **state)
{
	struct fixture *fx = *state;
	write_std3(fx, 2, "fp");
	char *stacks = unit_path(fx->db, "stacks");
	size_t len;
	char *bin = unit_read(stacks, &len);
	assert_true(len >= 40);
	assert_memory_equal(bin, "TALLYSTK", 8);
	uint32_t nev;
	uint64_t nf, ns, nr;
	memcpy(&nev, bin + 8, 4);
	memcpy(&nf, bin + 16, 8);
	memcpy(&ns, bin + 24, 8);
	memcpy(&nr, bin + 32, 8);
	assert_int_equal(nev, 2);
	assert_int_equal(len, 40 + 16 * nf + 16 * ns + 16 * nev * ns + 4 * nr);
	struct tally_db db, later;
	assert_int_equal(tally_db_open(&db, fx->db), 0);
	assert_int_equal(db.nstacks, ns);
	assert_int_equal(tally_db_open_dir_flags(&later, fx->db, TALLY_DB_STACKS_LATER), 0);
	assert_int_equal(later.nstacks, 0);
	assert_int_equal(tally_db_load_stacks(&later), 0);
	assert_same_stacks(&later, &db);
	tally_db_release(&later);

	/* damage: each named, with the file */
	size_t frames = 40, stk = frames + 16 * nf, vals = stk + 16 * ns,
	       refs = vals + 16 * nev * ns;
	unit_write(stacks, bin, len - 1);
	expect_open_fails(fx->db, "stacks' is ");
	assert_errmsg_has("truncated");
	char *more = xmalloc(len + 1);
	memcpy(more, bin, len);
	more[len] = 0;
	unit_write(stacks, more, len + 1);
	expect_open_fails(fx->db, "and its header says");
	free(more);
	bin_put32(stacks, bin, len, len - 4, UINT32_MAX);
	expect_open_fails(fx->db, "stacks' stack");
	assert_errmsg_has("frame number 4294967295 is past the");
	bin_put32(stacks, bin, len, frames, 999);
	expect_open_fails(fx->db, "stacks' frame 1: image 999 is not in 'images'");
	bin_put32(stacks, bin, len, frames + 4, 1);
	expect_open_fails(fx->db, "stacks' frame 1: its reserved bytes are not zero");
	bin_put32(stacks, bin, len, stk + 8, 0);
	expect_open_fails(fx->db, "stacks' stack 1: it has no frames");
	bin_put32(stacks, bin, len, stk, 0x80000000u);
	expect_open_fails(fx->db,
			  "stacks' stack 1: pid 2147483648 is not a process id (0 to 2147483647)");
	bin_put32(stacks, bin, len, stk + 4, 7);
	expect_open_fails(fx->db, "stacks' stack 1: label set 7 is not in 'labels'");
	uint64_t c0;
	memcpy(&c0, bin + vals, 8);
	bin_put64(stacks, bin, len, vals, c0 + 1);
	expect_open_fails(fx->db, "stacks': its stacks hold");
	bin_put64(stacks, bin, len, vals, 0); /* its weight stays */
	expect_open_fails(fx->db, "stacks' stack 1: a weight of");
	bin_put32(stacks, bin, len, 8, 3);
	expect_open_fails(fx->db, "stacks' holds the counts of 3 events, and its session names 2");
	bin_put32(stacks, bin, len, 12, 1);
	expect_open_fails(fx->db, "its header's reserved bytes are not zero");
	bin_put64(stacks, bin, len, 16, UINT64_MAX / 8);
	expect_open_fails(fx->db, "more than a stacks file holds");
	/* a frame record no stack has (one more, after the others) */
	char *extra = xmalloc(len + 16);
	memcpy(extra, bin, stk);
	/* the first frame's bytes again: no frame number names it */
	memcpy(extra + stk, bin + frames, 16);
	memcpy(extra + stk + 16, bin + stk, len - stk);
	uint64_t nf1 = nf + 1;
	memcpy(extra + 16, &nf1, 8);
	unit_write(stacks, extra, len + 16);
	char want[96];
	snprintf(want, sizeof(want), "stacks' frame %" PRIu64 ": no stack has it", nf + 1);
	expect_open_fails(fx->db, want);
	free(extra);
	bin_put32(stacks, bin, len, 0, 0x4c4c4158); /* the magic gone: text, with NUL bytes */
	expect_open_fails(fx->db, "stacks' line 1: binary data");
	/* a stack longer than the frame numbers left, and stacks shorter in all
	 * than the header's frame numbers (the last stack of 2 frames or more one
	 * shorter) */
	bin_put32(stacks, bin, len, stk + 8, (uint32_t)nr + 1);
	expect_open_fails(fx->db, "stacks' stack 1: its frames run past the frame numbers");
	size_t longer = ns;
	for (size_t k = 0; k < ns; k++) {
		uint32_t l;
		memcpy(&l, bin + stk + 16 * k + 8, 4);
		if (l >= 2)
			longer = k;
	}
	assert_true(longer < ns);
	uint32_t l;
	memcpy(&l, bin + stk + 16 * longer + 8, 4);
	bin_put32(stacks, bin, len, stk + 16 * longer + 8, l - 1);
	snprintf(want, sizeof(want),
		 "stacks': its stacks have %" PRIu64 " frames in all, and its header says %" PRIu64,
		 nr - 1, nr);
	expect_open_fails(fx->db, want);
	/* a file that ends in its header */
	unit_write(stacks, bin, 20);
	expect_open_fails(fx->db, "stacks' ends in its header (the file is truncated or damaged");
	(void)refs;
	unit_write(stacks, bin, len);
	struct tally_db again;
	assert_int_equal(tally_db_open(&again, fx->db), 0);
	assert_same_stacks(&again, &db);
	tally_db_release(&again);

	/* the same database written as text (format 1): the same stacks */
	to_v1(fx->db);
	char *text = unit_read(stacks, NULL);
	assert_int_equal(text[0], '#');
	struct tally_db v1;
	assert_int_equal(tally_db_open(&v1, fx->db), 0);
	assert_string_equal(tally_meta_get(&v1.session, "format-version"), "1");
	assert_same_stacks(&v1, &db);
	tally_db_release(&v1);
	/* ... where a binary file does not belong */
	unit_write(stacks, bin, len);
	expect_open_fails(fx->db,
			  "stacks' is a binary stacks file, which only format version 4 has");
	tally_db_release(&db);
	free(text);
	free(bin);
	free(stacks);
}

static void test_db__open_stacks_damage(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "fp");
	int t = true_index(fx);
	char *stacks = unit_path(fx->db, "stacks");
	char buf[256];
	/* counts that wrap to the session's 14 */
	snprintf(buf, sizeof(buf), "# damaged\n18446744073709551615 0 %d:1010\n15 0 %d:2000\n", t,
		 t);
	unit_write_str(stacks, buf);
	expect_open_fails(fx->db, stacks);
	assert_errmsg_has("add up past");
	assert_errmsg_line(3);
	/* a pid past int: it was read as -1 */
	snprintf(buf, sizeof(buf), "14 4294967295 %d:1010\n", t);
	unit_write_str(stacks, buf);
	expect_open_fails(fx->db, stacks);
	assert_errmsg_has("pid 4294967295");
	assert_errmsg_line(1);
	snprintf(buf, sizeof(buf), "14 2147483648 %d:1010\n", t);
	unit_write_str(stacks, buf);
	expect_open_fails(fx->db, stacks);
	assert_errmsg_has("pid 2147483648");
	free(stacks);
}

/* A merge whose stacks would pass 2^32 frame numbers (the set's own and a
 * binary file's) says so, not that the file is damaged; the set is left as
 * it was. (A set that large is only pretended: its count, before any read.) */
static void test_db__binary_stacks_past_2_32(void **state)
{
	struct fixture *fx = *state;
	write_std3(fx, 2, "fp");
	char *stacks = unit_path(fx->db, "stacks");
	int fd = open(stacks, O_RDONLY);
	assert_true(fd >= 0);
	char *names[] = { (char *)"cpu-clock", (char *)"page-faults" };
	uint64_t samples[2] = { 0, 0 };
	struct stacks_map m = { .nevents = 2,
				.events = names,
				.samples = samples,
				.nimages = 64,
				.weighted = true,
				.binary = true };
	struct stackset set = { .nevents = 2, .dedup = true };
	set.nstack_frames = UINT32_MAX - 1;
	assert_int_equal(tally_stacks_read_fd(&set, fd, "st", &m), -E2BIG);
	assert_errmsg_has("'st': its ");
	assert_errmsg_has("pass 2^32 (merge fewer databases at once)");
	assert_int_equal(set.nstacks, 0);
	assert_int_equal(set.nframe_tab, 0);
	set.nstack_frames = 0;
	tally_stackset_release(&set);
	close(fd);
	free(stacks);
}

static void test_db__open_stacks_without_call_graph(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	int t = true_index(fx);
	/* a stacks file the session does not announce: it was read, then dropped at the next write
	 */
	char *stacks = unit_path(fx->db, "stacks");
	char buf[128];
	snprintf(buf, sizeof(buf), "14 0 %d:1010\n", t);
	unit_write_str(stacks, buf);
	expect_open_fails(fx->db, stacks);
	assert_errmsg_has("call-graph: none");
	free(stacks);
}

static void test_db__open_images_damage(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	char *images = unit_path(fx->db, "images");
	char *text = unit_read(images, NULL);
	char prefix[16];
	snprintf(prefix, sizeof(prefix), "%d\texec\t", true_index(fx));
	size_t ln = line_of(text, prefix);
	char good[512], bad[512];
	/* the line as written, to vary one field at a time */
	const char *s = strstr(text, prefix);
	snprintf(good, sizeof(good), "%.*s", (int)(strchr(s, '\n') - s + 1), s);
	static const struct {
		const char *from, *to, *why;
	} cases[] = {
		{ "\texec\t", "\tkernel\t", "kernel" },          /* the kernel's kind on an executable */
		{ "\texec\t", "\tweird\t", "kind" },
		{ "\tbuild-id\t", "\tsha1\t", "id kind" },
		{ "\tbuild-id\t0\t", "\tbuild-id\t4242\t", "pid" }, /* a process on a file image */
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *line = replaced(good, cases[i].from, cases[i].to);
		char *all = replaced(text, good, line);
		unit_write_str(images, all);
		expect_open_fails(fx->db, images);
		assert_errmsg_line(ln);
		assert_errmsg_has(cases[i].why);
		free(line);
		free(all);
	}
	/* ids go into file names: a control character, a slash, or not hex */
	const char *ids[] = { "ab\021cd", "ab/cd", "../../etc", "ABCD", "abc", "" };
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		char from[200];
		snprintf(from, sizeof(from), "\t%s\t", fx->true_id);
		snprintf(bad, sizeof(bad), "\t%s\t", ids[i]);
		char *line = replaced(good, from, bad);
		char *all = replaced(text, good, line);
		unit_write_str(images, all);
		expect_open_fails(fx->db, images);
		assert_errmsg_line(ln);
		assert_errmsg_has("build-id");
		if (strchr(tally_errmsg(), 0x11))
			fail_msg("raw control character in '%s'", tally_errmsg());
		free(line);
		free(all);
	}
	unit_write_str(images, text);
	free(text);
	free(images);
}

static void test_db__open_session_values(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	char *session = unit_path(fx->db, "session");
	char *text = unit_read(session, NULL);
	char big[420];
	strcpy(big, "period-mean: 1");
	memset(big + 14, '0', 400);
	big[414] = '\0';
	const char *lines[] = {
		"start-time: 9999-99-99T99:99:99Z",
		"stop-time: 2026-02-30T12:00:00Z",
		"start-time: 2026-11-21 13:07:00",
		"period-mean: 1e400",
		big,
		"period-min: 12,-3",
		"duration: inf",
		"duration: 1e9",
		"duration: 4000000000",
		"dwarf-unwinds: -1",
		"jit-untrusted: 18446744073709551616",
		"call-graph: sometimes",
		"per-pid: maybe",
		"interval-p10-p50-p90: 1/2",
		"dwarf-stop-reasons: stack copy too small 1, no CFI or unreadable frame 2",
		"fp-repair-stops: no CFI 1, stack copy too small 2, chain not rejoined 3",
		"fp-repair-stops: no CFI 1, stack copy too small -2, chain not rejoined 3, depth limit 0",
		"fp-repair-stops: no CFI 1, stack copy too small 2, chain not rejoined 3, depth limit 0, more 1",
		"fp-repair-frames: 1.5",
		"lost: 3", /* given twice: the session has one */
	};
	for (size_t i = 0; i < ARRAY_SIZE(lines); i++) {
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s%s\n", text, lines[i]);
		unit_write(session, sb.buf, sb.len);
		expect_open_fails(fx->db, session);
		assert_errmsg_line(count_lines(text) + 1);
		char key[32];
		snprintf(key, sizeof(key), "'%.*s'", (int)strcspn(lines[i], ":"), lines[i]);
		assert_errmsg_has(key);
		strbuf_release(&sb);
	}
	/* what tally writes is accepted */
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(
		&sb,
		"%sstart-time: 2026-11-21T13:07:00Z\nstop-time: 2026-11-21T13:07:02Z\nduration: 2.004\n"
		"period-mean: 1001123\nperiod-min: 876002\nperiod-max: 1126120\ninterval-p10-p50-p90: 911040/983481/1104164\n"
		"dwarf-stop-reasons: stack copy too small 0, no CFI or unreadable frame 1, depth limit 0\n"
		"fp-repair-frames: 12\nfp-repair-stops: no CFI 1, stack copy too small 2, chain not rejoined 3, depth limit 18446744073709551615\n",
		text);
	unit_write(session, sb.buf, sb.len);
	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("a good session was refused: %s", tally_errmsg());
	tally_db_release(&db);
	strbuf_release(&sb);
	free(text);
	free(session);
}

static void test_db__error_quotes_escaped(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	char *session = unit_path(fx->db, "session");
	char *text = unit_read(session, NULL);
	struct strbuf sb = STRBUF_INIT;
	/* a terminal title and screen-clearing sequence, and a byte that is not UTF-8 */
	strbuf_addf(&sb, "%s\x1b]0;owned\x07\x1b[2J\xff\n", text);
	unit_write(session, sb.buf, sb.len);
	expect_open_fails(fx->db, session);
	assert_errmsg_has("got '\\x1b]0;owned\\x07\\x1b[2J\\xff'");
	for (const char *c = tally_errmsg(); *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			fail_msg("raw byte 0x%02x in '%s'", (unsigned char)*c, tally_errmsg());
	/* a .prof line, the same way */
	char *prof_text;
	char *prof = std_prof(fx, &prof_text);
	unit_write_str(session, text);
	strbuf_reset(&sb);
	strbuf_addf(&sb, "%s1 \x1b[31m\n", prof_text);
	unit_write(prof, sb.buf, sb.len);
	expect_open_fails(fx->db, prof);
	assert_errmsg_has("got '1 \\x1b[31m'");
	strbuf_release(&sb);
	free(prof_text);
	free(prof);
	free(text);
	free(session);
}

/* A copy of a file's bytes in a buffer of exactly that size: no NUL after it,
 * so that a parser reading past len is caught (ASan). */
static char *exact(const char *dir, const char *name, size_t *len)
{
	char *p = unit_path(dir, name);
	char *t = unit_read(p, len);
	assert_non_null(t);
	char *b = malloc(*len ? *len : 1);
	assert_non_null(b);
	memcpy(b, t, *len);
	free(t);
	free(p);
	return b;
}

static void test_db__parse_buffers(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "fp");
	struct tally_db want;
	assert_int_equal(tally_db_open(&want, fx->db), 0);
	/* the whole database from memory, through the entry points the fuzzers use */
	struct tally_db db;
	memset(&db, 0, sizeof(db));
	size_t len;
	char *b = exact(fx->db, "session", &len);
	assert_int_equal(tally_db_parse_session(&db, b, len, "session"), 0);
	free(b);
	b = exact(fx->db, "images", &len);
	assert_int_equal(tally_db_parse_images(&db, b, len, "images"), 0);
	free(b);
	DIR *d = opendir(fx->db);
	struct dirent *de;
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".prof")) {
			b = exact(fx->db, de->d_name, &len);
			if (tally_db_parse_prof(&db, b, len, de->d_name))
				fail_msg("%s", tally_errmsg());
			free(b);
		}
	closedir(d);
	b = exact(fx->db, "stacks", &len);
	assert_int_equal(tally_db_parse_stacks(&db, b, len, "stacks"), 0);
	free(b);
	b = exact(fx->db, "tasks", &len);
	assert_int_equal(tally_db_parse_tasks(&db, b, len, "tasks"), 0);
	free(b);
	assert_int_equal(tally_db_check_totals(&db, "mem"), 0);
	assert_int_equal(db.nimages, want.nimages);
	assert_int_equal(db.nentries, want.nentries);
	assert_int_equal(db.nstacks, want.nstacks);
	assert_int_equal(db.ntasks, want.ntasks);
	assert_int_equal(db.samples[0], 14);
	/* a profile refused halfway leaves nothing of itself */
	size_t before = db.nentries;
	const char bad[] = "format-version: 1\nindex: 0\nsamples: 5\n\n10 5\n20 x\n";
	assert_int_equal(tally_db_parse_prof(&db, bad, sizeof(bad) - 1, "bad.prof"), -EINVAL);
	assert_errmsg_has("'bad.prof' line 6");
	assert_int_equal(db.nentries, before);
	tally_db_release(&db);
	tally_db_release(&want);

	/* binary data and an unfinished last line, with their line, from every entry point */
	int (*const parsers[])(struct tally_db *, const char *, size_t, const char *) = {
		tally_db_parse_session, tally_db_parse_images, tally_db_parse_prof,
		tally_db_parse_stacks,  tally_db_parse_ksyms,  tally_db_parse_tasks,
		tally_db_parse_modules, tally_db_parse_mntns,
	};
	for (size_t i = 0; i < ARRAY_SIZE(parsers); i++) {
		memset(&db, 0, sizeof(db));
		assert_int_equal(parsers[i](&db, "# a\n# b\nx\0y\n", 12, "f"), -EINVAL);
		assert_errmsg_has("'f' line 3: binary data");
		assert_int_equal(parsers[i](&db, "# a\n# b", 7, "f"), -EINVAL);
		assert_errmsg_has("'f' line 2: the file ends in the middle of the line");
		tally_db_release(&db);
	}
}

/* ---- files that are not what a database holds ---- */

/* A session that is a FIFO (a plain open would wait for a writer forever), a
 * link to /dev/zero (read until memory runs out) or a link to a secret file
 * (its first bytes quoted in the error): each is refused at once, naming the
 * file and what it is, never quoting the secret. */
static void test_db__open_not_regular(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	char *session = unit_path(fx->db, "session");
	char *keep = unit_path(fx->tmp, "session.keep");
	assert_int_equal(rename(session, keep), 0);
	char *secret = unit_path(fx->tmp, "secret");
	unit_write_str(secret, "root:SECRET-HASH-abcdef:19000:0:99999:7:::\n");

	double t0 = tally_now_mono();
	assert_int_equal(mkfifo(session, 0600), 0);
	expect_open_fails(fx->db, session);
	assert_errmsg_has("is a FIFO, not a regular file");
	assert_errmsg_has("record it again");
	assert_int_equal(unlink(session), 0);

	assert_int_equal(symlink("/dev/zero", session), 0);
	expect_open_fails(fx->db, session);
	assert_errmsg_has("is a symbolic link, not a regular file");
	assert_int_equal(unlink(session), 0);

	assert_int_equal(symlink(secret, session), 0);
	expect_open_fails(fx->db, session);
	assert_errmsg_has("is a symbolic link");
	if (strstr(tally_errmsg(), "SECRET"))
		fail_msg("the error quotes the linked file: %s", tally_errmsg());
	assert_int_equal(unlink(session), 0);
	assert_true(tally_now_mono() - t0 < 5.0);

	/* a .prof file as a link: the same */
	assert_int_equal(rename(keep, session), 0);
	char *text;
	char *prof = std_prof(fx, &text);
	assert_int_equal(unlink(prof), 0);
	assert_int_equal(symlink(secret, prof), 0);
	expect_open_fails(fx->db, prof);
	assert_errmsg_has("is a symbolic link");
	assert_int_equal(unlink(prof), 0);
	assert_int_equal(mkfifo(prof, 0600), 0);
	expect_open_fails(fx->db, prof);
	assert_errmsg_has("is a FIFO");
	free(text);
	free(prof);
	free(secret);
	free(keep);
	free(session);
}

/* ---- temporaries and their recovery ---- */

/* A pid that ran and is gone (a child that exited and was reaped). */
static int dead_pid(void)
{
	pid_t p = fork();
	assert_true(p >= 0);
	if (!p)
		_exit(0);
	assert_int_equal(waitpid(p, NULL, 0), p);
	return (int)p;
}

/* A child that lives until stop_child. */
static pid_t live_child(void)
{
	pid_t p = fork();
	assert_true(p >= 0);
	if (!p) {
		for (;;)
			pause();
	}
	return p;
}

static void stop_child(pid_t p)
{
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
}

/* fx->tmp/.NAME.KIND-PID as a directory holding one file (a half-written copy). */
static char *make_temp(struct fixture *fx, const char *name, enum tally_db_temp kind, int pid)
{
	char *db = unit_path(fx->tmp, name);
	char *t = tally_db_temp_path(db, kind, pid);
	free(db);
	assert_int_equal(mkdir(t, 0700), 0);
	char *f = unit_path(t, "half.prof");
	unit_write_str(f, "format-version: 1\n");
	free(f);
	return t;
}

static void test_db__temp_names(void **state)
{
	(void)state;
	char *t = tally_db_temp_path("a/b/my.db", TALLY_DB_STAGE, 12);
	assert_string_equal(t, "a/b/.my.db.tmp-12");
	free(t);
	t = tally_db_temp_path("my.db/", TALLY_DB_OLD, 7);
	assert_string_equal(t, "./.my.db.old-7");
	free(t);
	t = tally_db_temp_path("/x", TALLY_DB_GONE, 99);
	assert_string_equal(t, "//.x.gone-99");
	free(t);
	static const struct {
		const char *name, *target;
		enum tally_db_temp kind;
		int pid;
	} good[] = {
		{ ".my.db.tmp-12", "my.db", TALLY_DB_STAGE, 12 },
		{ ".202611211307-2.old-4242", "202611211307-2", TALLY_DB_OLD, 4242 },
		{ ".drain.gone-1", "drain", TALLY_DB_GONE, 1 },
		{ ".a.tmp-1", "a", TALLY_DB_STAGE, 1 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		enum tally_db_temp k;
		char *target = NULL;
		int pid = 0;
		if (!tally_db_temp_parse(good[i].name, &k, &target, &pid))
			fail_msg("'%s' not taken for a temporary", good[i].name);
		assert_string_equal(target, good[i].target);
		assert_int_equal(k, good[i].kind);
		assert_int_equal(pid, good[i].pid);
		free(target);
	}
	const char *bad[] = { "db",          ".db",     ".db.tmp-",           ".db.tmp-0",
			      ".db.tmp-12x", "..tmp-1", "db.tmp-12",          ".db.tmp.12",
			      ".db.new-12",  ".tmp-12", ".db.tmp-1234567890", ".db.damaged-12",
			      NULL };
	for (int i = 0; bad[i]; i++) {
		enum tally_db_temp k;
		int pid;
		if (tally_db_temp_parse(bad[i], &k, NULL, &pid))
			fail_msg("'%s' taken for a temporary", bad[i]);
	}
}

/* A killed writer's staging copy (and a half-removed database) are removed by
 * the next open; the database itself is untouched. */
static void test_db__recover_stale_stage(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	int dead = dead_pid();
	char *stage = make_temp(fx, "db", TALLY_DB_STAGE, dead);
	char *gone = make_temp(fx, "db", TALLY_DB_GONE, dead);
	/* another database's temporaries are not this one's business */
	char *other = make_temp(fx, "other", TALLY_DB_STAGE, dead);
	assert_int_equal(unit_dir_entries(fx->tmp), 4);
	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("open: %s", tally_errmsg());
	assert_int_equal(db.samples[0], 14);
	tally_db_release(&db);
	assert_false(unit_exists(stage));
	assert_false(unit_exists(gone));
	assert_true(unit_exists(other));

	/* the same through tally_db_recover, which says what it did */
	char *stage2 = make_temp(fx, "db", TALLY_DB_STAGE, dead);
	/* this process is not saving: its own pid's leftovers are stale too */
	char *mine = make_temp(fx, "db", TALLY_DB_STAGE, (int)getpid());
	struct tally_db_recovery rv;
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.removed, 2);
	assert_int_equal(rv.restored, 0);
	assert_int_equal(rv.kept, 0);
	assert_false(unit_exists(stage2));
	assert_false(unit_exists(mine));
	assert_int_equal(unit_dir_entries(fx->tmp), 2); /* db and other's */
	/* a save recovers too */
	char *stage3 = make_temp(fx, "db", TALLY_DB_STAGE, dead);
	write_std_force(fx);
	assert_false(unit_exists(stage3));
	assert_int_equal(unit_dir_entries(fx->tmp), 2);
	free(stage3);
	free(mine);
	free(stage2);
	free(other);
	free(gone);
	free(stage);
}

/* A writer killed but not reaped yet (a zombie: kill(pid, 0) still finds it)
 * is gone: its staging copy is removed. */
static void test_db__recover_zombie_writer(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	pid_t z = fork();
	assert_true(z >= 0);
	if (!z)
		_exit(0);
	/* exited, not reaped */
	siginfo_t si;
	assert_int_equal(waitid(P_PID, (id_t)z, &si, WEXITED | WNOWAIT), 0);
	assert_int_equal(kill(z, 0), 0);
	char *stage = make_temp(fx, "db", TALLY_DB_STAGE, (int)z);
	struct tally_db_recovery rv;
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.removed, 1);
	assert_false(unit_exists(stage));
	assert_int_equal(waitpid(z, NULL, 0), z);
	free(stage);
}

/* A writer at work: its staging copy and its old copy stay, whether its pid
 * is running, or (in another pid namespace, where the pid means nothing
 * here) it holds the staging directory's lock. */
static void test_db__recover_live_stage(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	pid_t live = live_child();
	char *stage = make_temp(fx, "db", TALLY_DB_STAGE, (int)live);
	char *old = make_temp(fx, "db", TALLY_DB_OLD, (int)live);
	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("open: %s", tally_errmsg());
	tally_db_release(&db);
	assert_true(unit_exists(stage));
	assert_true(unit_exists(old));
	struct tally_db_recovery rv;
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.kept, 2);
	assert_int_equal(rv.removed, 0);
	/* once it is gone, they go */
	stop_child(live);
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.removed, 2);
	assert_false(unit_exists(stage));
	assert_false(unit_exists(old));

	/* a dead pid, but the lock is held: kept, with the old copy of that pid */
	int dead = dead_pid();
	char *lstage = make_temp(fx, "db", TALLY_DB_STAGE, dead);
	char *lold = make_temp(fx, "db", TALLY_DB_OLD, dead);
	int fd = open(lstage, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.kept, 2);
	assert_true(unit_exists(lstage));
	assert_true(unit_exists(lold));
	close(fd);
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.removed, 2);
	assert_int_equal(unit_dir_entries(fx->tmp), 1);
	free(lold);
	free(lstage);
	free(old);
	free(stage);
}

/* A replacement cut between its two renames: the database is missing and its
 * old copy is .db.old-PID. The next open puts it back (and drops the staging
 * copy); with the database there, the old copy is only removed. */
static void test_db__recover_old_without_db(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	int dead = dead_pid();
	char *old = tally_db_temp_path(fx->db, TALLY_DB_OLD, dead);
	assert_int_equal(rename(fx->db, old), 0);
	char *stage = make_temp(fx, "db", TALLY_DB_STAGE, dead);
	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("open after a cut replacement: %s", tally_errmsg());
	assert_int_equal(db.samples[0], 14);
	tally_db_release(&db);
	assert_false(unit_exists(old));
	assert_false(unit_exists(stage));
	assert_int_equal(unit_dir_entries(fx->tmp), 1);

	/* through tally_db_recover: counted as restored */
	assert_int_equal(rename(fx->db, old), 0);
	struct tally_db_recovery rv;
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.restored, 1);
	assert_int_equal(rv.removed, 0);
	assert_true(unit_exists(fx->db));
	assert_false(unit_exists(old));

	/* and before a save: the old database counts as existing (--force needed) */
	assert_int_equal(rename(fx->db, old), 0);
	assert_int_equal(tally_db_check_target(fx->db, false), -EEXIST);
	assert_true(unit_exists(fx->db));
	free(stage);
	free(old);
}

static void test_db__recover_old_with_db(void **state)
{
	struct fixture *fx = *state;
	write_std(fx, 1, "none");
	int dead = dead_pid();
	char *old = make_temp(fx, "db", TALLY_DB_OLD, dead);
	struct tally_db_recovery rv;
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.removed, 1);
	assert_int_equal(rv.restored, 0);
	assert_false(unit_exists(old));
	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("open: %s", tally_errmsg());
	assert_int_equal(db.samples[0], 14);
	tally_db_release(&db);
	assert_int_equal(unit_dir_entries(fx->tmp), 1);
	free(old);
}

/* Inside a daemon's directory: its epochs' and drain's temporaries. */
static void test_db__recover_daemon_dir(void **state)
{
	struct fixture *fx = *state;
	/* fx->db as a daemon directory with one epoch, written by tally_db_save */
	assert_int_equal(mkdir(fx->db, 0700), 0);
	char *marker = unit_path(fx->db, "tally-daemon");
	unit_write_str(marker, "format-version: 1\nlayout: epochs\n");
	char *epoch = unit_path(fx->db, "202601010000");
	struct tally_agg a;
	struct tally_meta m;
	build_std(&a, 1);
	session_init(&m, "cpu-clock", "none", false);
	if (tally_db_write(epoch, false, &a, &m))
		fail_msg("write: %s", tally_errmsg());
	tally_meta_release(&m);
	tally_agg_release(&a);
	int dead = dead_pid();
	char *old = tally_db_temp_path(epoch, TALLY_DB_OLD, dead);
	assert_int_equal(rename(epoch, old), 0);
	char *stage = tally_db_temp_path(epoch, TALLY_DB_STAGE, dead);
	assert_int_equal(mkdir(stage, 0700), 0);
	char *drain = unit_path(fx->db, "drain");
	char *gone = tally_db_temp_path(drain, TALLY_DB_GONE, dead);
	assert_int_equal(mkdir(gone, 0700), 0);
	struct tally_db_recovery rv;
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.restored, 1);
	assert_int_equal(rv.removed, 2);
	assert_true(unit_exists(epoch));
	assert_int_equal(unit_dir_entries(fx->db), 2); /* the marker and the epoch */
	/* a reader of the daemon's directory recovers the same way */
	assert_int_equal(rename(epoch, old), 0);
	struct tally_db db;
	if (tally_db_open(&db, fx->db))
		fail_msg("open: %s", tally_errmsg());
	assert_int_equal(db.samples[0], 14);
	tally_db_release(&db);
	assert_int_equal(unit_dir_entries(fx->db), 2);
	free(gone);
	free(drain);
	free(stage);
	free(old);
	free(epoch);
	free(marker);
}

/* Another user's directory with a temporary's name is never touched. */
static void test_db__recover_other_owner(void **state)
{
	struct fixture *fx = *state;
	if (geteuid() != 0)
		skip();
	write_std(fx, 1, "none");
	int dead = dead_pid();
	char *stage = make_temp(fx, "db", TALLY_DB_STAGE, dead);
	assert_int_equal(chown(stage, 65534, 65534), 0);
	struct tally_db_recovery rv;
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_int_equal(rv.removed + rv.kept + rv.restored, 0);
	assert_true(unit_exists(stage));
	free(stage);
}

/* A write that fails (here: a file size limit, as a full disk would) names the
 * database, not the hidden staging directory, and leaves nothing behind. */
static void test_db__save_error_names_db(void **state)
{
	struct fixture *fx = *state;
	struct rlimit old, small = { 64, 64 };
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small.rlim_max = old.rlim_max;
	void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
	struct tally_agg a;
	struct tally_meta m;
	build_std(&a, 1);
	session_init(&m, "cpu-clock", "none", false);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	int r = tally_db_write(fx->db, false, &a, &m);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, prev);
	assert_int_equal(r, -EFBIG);
	assert_errmsg_has(fx->db);
	assert_errmsg_has("cannot write database");
	if (strstr(tally_errmsg(), ".tmp-"))
		fail_msg("the error names the staging directory: %s", tally_errmsg());
	assert_int_equal(unit_dir_entries(fx->tmp), 0);
	tally_meta_release(&m);
	tally_agg_release(&a);
}

/* A database is private: its directory 0700, its files 0600, whatever the umask. */
static void test_db__save_modes(void **state)
{
	struct fixture *fx = *state;
	mode_t um = umask(0);
	struct tally_agg a;
	struct tally_meta m;
	tally_agg_init(&a, 1, false, false);
	uint32_t t = file_image(&a, "/bin/true");
	uint32_t f = tally_agg_frame(&a, t, 0x4242);
	add(&a, &f, 1, 0, 0, 1);
	session_init(&m, "cpu-clock", "none", false);
	int r = tally_db_write(fx->db, false, &a, &m);
	umask(um);
	if (r)
		fail_msg("write: %s", tally_errmsg());
	struct stat st;
	assert_int_equal(stat(fx->db, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	DIR *d = opendir(fx->db);
	assert_non_null(d);
	struct dirent *de;
	size_t files = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char *p = unit_path(fx->db, de->d_name);
		assert_int_equal(lstat(p, &st), 0);
		if ((st.st_mode & 07777) != (S_ISDIR(st.st_mode) ? 0700 : 0600))
			fail_msg("'%s' has mode %o", p, st.st_mode & 07777);
		free(p);
		files++;
	}
	closedir(d);
	assert_true(files >= 3);
	tally_meta_release(&m);
	tally_agg_release(&a);
}

/* ---- metadata ---- */

static void test_db__meta(void **state)
{
	(void)state;
	struct tally_meta m = { 0 };
	assert_null(tally_meta_get(&m, "x"));
	tally_meta_set(&m, "a", "%d", 1);
	tally_meta_set(&m, "b", "%s", "two");
	tally_meta_set(&m, "a", "%s", "replaced");
	assert_int_equal(m.n, 2);
	assert_string_equal(m.kv[0].key, "a"); /* order kept, value replaced in place */
	assert_string_equal(tally_meta_get(&m, "a"), "replaced");
	assert_string_equal(tally_meta_get(&m, "b"), "two");
	/* a value may hold any character: the file format escapes it (docs/format.md) */
	tally_meta_set(&m, "c", "%s", "x\ny\rz");
	assert_string_equal(tally_meta_get(&m, "c"), "x\ny\rz"); /* kept whole: the writer escapes it */
	tally_meta_set(&m, "empty", "%s", "");
	assert_string_equal(tally_meta_get(&m, "empty"), "");
	tally_meta_release(&m);
	assert_int_equal(m.n, 0);
	assert_null(m.kv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_db__header_line_good),
		cmocka_unit_test(test_db__header_line_bad),
		cmocka_unit_test(test_db__prof_line_good),
		cmocka_unit_test(test_db__prof_line_bad),
		cmocka_unit_test_setup_teardown(test_db__roundtrip, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__v3_weights, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__binary_stacks, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__binary_stacks_past_2_32, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__roundtrip_two_events_stacks, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__roundtrip_per_pid, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__roundtrip_empty, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__roundtrip_kernel, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__roundtrip_caller_only_image, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__roundtrip_special_images, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__jit_settle, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__write_refuses_existing, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__write_target_checks, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__roundtrip_path_with_newline, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__roundtrip_comm_with_newline, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__stacks_later_not_written_over, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__stacks_later, fx_setup, fx_teardown),
		cmocka_unit_test(test_db__parse_stacks),
		cmocka_unit_test(test_db__parse_stacks_shared_callers),
		cmocka_unit_test_setup_teardown(test_db__stacks_later_long_file, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_missing, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_not_a_db, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_future_version, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_prof_garbage_line, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_prof_truncated, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_prof_sum_mismatch, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_prof_bad_header, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_duplicate_prof, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_missing_prof, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_damaged_images_stacks, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_counts_wrap, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_stacks_damage, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_stacks_without_call_graph, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_images_damage, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_session_values, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__error_quotes_escaped, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__parse_buffers, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__open_not_regular, fx_setup, fx_teardown),
		cmocka_unit_test(test_db__temp_names),
		cmocka_unit_test_setup_teardown(test_db__recover_stale_stage, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__recover_zombie_writer, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__recover_live_stage, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__recover_old_without_db, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__recover_old_with_db, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__recover_daemon_dir, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__recover_other_owner, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__save_error_names_db, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_db__save_modes, fx_setup, fx_teardown),
		cmocka_unit_test(test_db__meta),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
