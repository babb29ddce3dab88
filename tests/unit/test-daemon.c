/* Unit tests for the daemon's engine (lib/daemon/): the database directory it
 * prepares and locks, flushes merged into the current epoch, the disk quotas,
 * epochs begun and pruned, the recovery of a killed daemon's leftovers, the
 * drain stream, the status text, and the control server's state machine
 * driven through socketpairs. No perf events: the engine is fed an aggregate
 * the test fills (tally_daemon_begin). */
#define _GNU_SOURCE
#include "unit.h"

#include <sys/wait.h>

#include <inttypes.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include "tally/agg.h"
#include "tally/daemon.h"
#include "tally/db.h"
#include "tally/snapshot.h"
#include "tally/epoch.h"
#include "tally/sampling.h"
#include "lib/daemon/internal.h"

struct fixture {
	char *tmp, *db;
	struct tally_sampling smp;
	struct tally_daemon_opts o;
	struct tally_agg agg;
	struct strbuf log; /* every line the engine logged */
	struct tally_daemon *d;
};

static void log_cb(void *ctx, const char *line)
{
	struct strbuf *sb = ctx;
	strbuf_addf(sb, "%s\n", line);
}

/* Sampling settings as tally_sampling_resolve leaves them, without asking the
 * machine: cpu-clock at 999 Hz on one CPU. */
static void fake_sampling(struct tally_sampling *s)
{
	tally_sampling_init(s);
	s->freq = 999;
	s->evs[0] = tally_event_find("cpu-clock");
	assert_non_null(s->evs[0]);
	s->nev = 1;
	strbuf_addstr(&s->evnames, "cpu-clock");
	s->ncpus = 1;
	s->cpus = xcalloc(1, sizeof(bool));
	s->cpus[0] = true;
}

static int setup(void **state)
{
	struct fixture *fx = xcalloc(1, sizeof(*fx));
	fx->tmp = unit_tmpdir();
	fx->db = unit_path(fx->tmp, "db");
	fake_sampling(&fx->smp);
	tally_daemon_opts_init(&fx->o);
	fx->o.db = fx->db;
	fx->o.smp = &fx->smp;
	fx->o.log = log_cb;
	fx->o.log_ctx = &fx->log;
	fx->o.flush_interval = 3600; /* flushes only when a test asks */
	fx->o.min_free = 0;
	tally_agg_init(&fx->agg, 1, false, false);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	tally_daemon_free(fx->d);
	tally_agg_release(&fx->agg);
	tally_sampling_release(&fx->smp);
	strbuf_release(&fx->log);
	tally_remove_tree(fx->tmp);
	free(fx->db);
	free(fx->tmp);
	free(fx);
	return 0;
}

/* A daemon on fx->db, begun over fx->agg. */
static void start(struct fixture *fx)
{
	if (tally_daemon_new(&fx->d, &fx->o))
		fail_msg("tally_daemon_new: %s", tally_errmsg());
	char *warn = NULL;
	if (tally_daemon_begin(fx->d, &fx->agg, NULL, &warn))
		fail_msg("tally_daemon_begin: %s", tally_errmsg());
	assert_null(warn);
}

/* n samples at path+offset, the way the collector's samples count. */
static void add_samples_in(struct tally_agg *a, const char *path, uint64_t offset, uint64_t n)
{
	struct tally_image k;
	memset(&k, 0, sizeof(k));
	k.kind = TALLY_IMG_FILE;
	k.path = (char *)path;
	uint32_t im = tally_agg_image(a, &k);
	uint32_t f = tally_agg_frame(a, im, offset);
	uint32_t st = tally_agg_stack(a, &f, 1);
	tally_agg_count(a, st, 0, 0, n);
	a->samples[0] += n;
}

/* n samples at /bin/true+offset. */
static void add_samples(struct tally_agg *a, uint64_t offset, uint64_t n)
{
	add_samples_in(a, "/bin/true", offset, n);
}

/* Samples in the database (or bundle) at path: what its .prof files hold. */
static uint64_t db_samples(const char *path, uint64_t offset_or_all)
{
	struct tally_db db;
	if (tally_db_open(&db, path))
		fail_msg("cannot read '%s': %s", path, tally_errmsg());
	uint64_t sum = 0;
	for (size_t i = 0; i < db.nentries; i++)
		if (offset_or_all == UINT64_MAX || db.entries[i].offset == offset_or_all)
			sum += db.counts[i * (size_t)db.nevents];
	tally_db_release(&db);
	return sum;
}

/* The current epoch's name, from the status text. */
static char *current_epoch(struct tally_daemon *d)
{
	struct strbuf st = STRBUF_INIT;
	tally_daemon_status(d, &st);
	const char *p = strstr(st.buf, "\nepoch: ");
	assert_non_null(p);
	p += strlen("\nepoch: ");
	char *name = xstrndup(p, strcspn(p, " \n"));
	strbuf_release(&st);
	return name;
}

static size_t count_epochs(const char *db)
{
	struct tally_epoch *e;
	size_t n = 0;
	if (tally_epochs_list(db, &e, &n))
		fail_msg("tally_epochs_list: %s", tally_errmsg());
	tally_epochs_free(e, n);
	return n;
}

/* ---- the directory ---- */

static void test_daemon__new_private_locked(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct stat st;
	assert_int_equal(stat(fx->db, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	char *marker = unit_path(fx->db, TALLY_DAEMON_MARKER);
	char *sock = unit_path(fx->db, "ctl.sock");
	assert_true(unit_exists(marker));
	assert_int_equal(lstat(sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_string_equal(tally_daemon_socket(fx->d), sock);
	/* the first epoch is on disk at once, empty */
	assert_int_equal(count_epochs(fx->db), 1);
	assert_int_equal(db_samples(fx->db, UINT64_MAX), 0);
	/* one daemon per database */
	struct tally_daemon *second = NULL;
	assert_int_equal(tally_daemon_new(&second, &fx->o), -EBUSY);
	assert_errmsg_has("is in use by tally daemon pid");
	assert_null(second);
	/* the socket goes with the daemon */
	tally_daemon_free(fx->d);
	fx->d = NULL;
	assert_false(unit_exists(sock));
	assert_true(unit_exists(marker));
	free(marker);
	free(sock);
}

static void test_daemon__new_refuses_other_dirs(void **state)
{
	struct fixture *fx = *state;
	/* a directory with files that is no daemon database */
	assert_int_equal(mkdir(fx->db, 0755), 0);
	char *f = unit_path(fx->db, "notes.txt");
	unit_write_str(f, "mine\n");
	assert_int_equal(tally_daemon_new(&fx->d, &fx->o), -EEXIST);
	assert_errmsg_has("is not empty and not a daemon database");
	assert_true(unit_exists(f));
	unlink(f);
	free(f);
	/* a database written by tally record */
	f = unit_path(fx->db, "session");
	unit_write_str(f, "format-version: 1\n");
	assert_int_equal(tally_daemon_new(&fx->d, &fx->o), -EEXIST);
	assert_errmsg_has("written by 'tally record'");
	unlink(f);
	free(f);
	/* a file */
	rmdir(fx->db);
	unit_write_str(fx->db, "x");
	assert_int_equal(tally_daemon_new(&fx->d, &fx->o), -ENOTDIR);
	unlink(fx->db);
	/* made here and never started: removed again */
	assert_int_equal(tally_daemon_new(&fx->d, &fx->o), 0);
	assert_true(unit_exists(fx->db));
	tally_daemon_free(fx->d);
	fx->d = NULL;
	assert_false(unit_exists(fx->db));
}

/* What a killed daemon leaves is cleaned up by the next one. */
static void test_daemon__recovers_leftovers(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	char *ep = current_epoch(fx->d);
	tally_daemon_free(fx->d);
	fx->d = NULL;
	/* a staging copy, a pruned epoch half removed, and a swap cut between its
	 * renames, by a writer that is gone (a child that exited and was reaped) */
	pid_t dead = fork();
	assert_true(dead >= 0);
	if (!dead)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);
	char *tmpname = NULL, *gone = NULL, *old = NULL, *epath = unit_path(fx->db, ep);
	assert_true(asprintf(&tmpname, "%s/.%s.tmp-%d", fx->db, ep, (int)dead) > 0);
	assert_true(asprintf(&gone, "%s/.202001010000.gone-%d", fx->db, (int)dead) > 0);
	assert_true(asprintf(&old, "%s/.%s.old-%d", fx->db, ep, (int)dead) > 0);
	assert_int_equal(mkdir(tmpname, 0700), 0);
	assert_int_equal(mkdir(gone, 0700), 0);
	assert_int_equal(rename(epath, old), 0);
	start(fx);
	assert_false(unit_exists(tmpname));
	assert_false(unit_exists(gone));
	assert_false(unit_exists(old));
	assert_true(unit_exists(epath));
	assert_str_has(fx->log.buf, "restored 1 database from writes that were cut short");
	free(tmpname);
	free(gone);
	free(old);
	free(epath);
	free(ep);
}

/* ---- flushes ---- */

/* Where the daemon keeps the spare copy of epoch ep (lib/db's staging name). */
static char *spare_path(struct fixture *fx, const char *ep)
{
	char *p = NULL;
	if (asprintf(&p, "%s/.%s.tmp-%d", fx->db, ep, (int)getpid()) < 0)
		fail_msg("asprintf");
	return p;
}

/* How many of lib/db's temporaries (staging, old or half-removed copies) db holds. */
static size_t temporaries(const char *db)
{
	DIR *dir = opendir(db);
	assert_non_null(dir);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		enum tally_db_temp kind;
		int pid;
		n += tally_db_temp_parse(de->d_name, &kind, NULL, &pid);
	}
	closedir(dir);
	return n;
}

static void test_daemon__flush_merges_into_epoch(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	char *ep = current_epoch(fx->d);
	char *epath = unit_path(fx->db, ep);
	struct strbuf msg = STRBUF_INIT;
	assert_int_equal(tally_daemon_flush(fx->d, "test", &msg), 0);
	assert_str_has(msg.buf, "nothing to flush into epoch");
	strbuf_reset(&msg);

	add_samples(&fx->agg, 0x1010, 7);
	add_samples(&fx->agg, 0x2020, 3);
	assert_int_equal(tally_daemon_flush(fx->d, "test", &msg), 0);
	assert_str_has(msg.buf, "flushed 10 samples into epoch");
	strbuf_reset(&msg);
	assert_int_equal(db_samples(epath, 0x1010), 7);
	assert_int_equal(db_samples(epath, 0x2020), 3);
	/* the aggregate is empty again */
	assert_int_equal(fx->agg.samples[0], 0);

	/* the next flush adds up with what is there */
	add_samples(&fx->agg, 0x1010, 5);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	assert_int_equal(db_samples(epath, 0x1010), 12);
	assert_int_equal(db_samples(epath, 0x2020), 3);
	/* one sample is singular */
	add_samples(&fx->agg, 0x2020, 1);
	assert_int_equal(tally_daemon_flush(fx->d, "test", &msg), 0);
	assert_str_has(msg.buf, "flushed 1 sample into epoch");
	strbuf_reset(&msg);
	assert_int_equal(db_samples(epath, 0x2020), 4);
	/* readers of the whole directory see the same */
	assert_int_equal(db_samples(fx->db, UINT64_MAX), 16);
	/* one copy is kept beside the epoch, for the next flush to write over;
	 * nothing else is left behind, and nothing once the daemon ends */
	char *spare = spare_path(fx, ep);
	assert_int_equal(temporaries(fx->db), 1);
	assert_true(unit_exists(spare));
	tally_daemon_free(fx->d);
	fx->d = NULL;
	assert_int_equal(temporaries(fx->db), 0);
	assert_int_equal(db_samples(fx->db, UINT64_MAX), 16);
	free(spare);
	strbuf_release(&msg);
	free(epath);
	free(ep);
}

/* A process the aggregate saw (as the collector's side-band records make one). */
static void add_task(struct tally_agg *a, int pid, const char *comm, const char *exe)
{
	GROW(a->tasks, a->atasks, a->ntasks + 1);
	struct tally_task *t = &a->tasks[a->ntasks++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	snprintf(t->comm, sizeof(t->comm), "%s", comm);
	t->exe = xstrdup(exe);
}

static int cmp_task_pid(const void *x, const void *y)
{
	const struct tally_db_task *a = x, *b = y;
	return (a->pid > b->pid) - (a->pid < b->pid);
}

/* The epoch's tasks as "pid comm exe" lines, by pid. */
static char *epoch_tasks(const char *path)
{
	struct tally_db db;
	if (tally_db_open(&db, path))
		fail_msg("cannot read '%s': %s", path, tally_errmsg());
	struct strbuf sb = STRBUF_INIT;
	qsort(db.tasks, db.ntasks, sizeof(*db.tasks), cmp_task_pid);
	for (size_t i = 0; i < db.ntasks; i++)
		strbuf_addf(&sb, "%d %s %s\n", db.tasks[i].pid, db.tasks[i].comm, db.tasks[i].exe);
	tally_db_release(&db);
	return strbuf_detach(&sb);
}

/* Without --per-pid no pid joins an epoch's profiles to its tasks: the epoch
 * lists each program once, with the newest pid, however many processes ran
 * it (a busy machine starts millions, and every flush rewrites the list);
 * with --per-pid every process stays. */
static void test_daemon__epoch_lists_programs_not_processes(void **state)
{
	struct fixture *fx = *state;
	for (int per_pid = 0; per_pid <= 1; per_pid++) {
		if (per_pid) {
			tally_daemon_free(fx->d);
			tally_agg_release(&fx->agg);
			tally_remove_tree(fx->db);
			fx->smp.per_pid = true;
			tally_agg_init(&fx->agg, 1, true, false);
		}
		start(fx);
		char *ep = current_epoch(fx->d);
		char *epath = unit_path(fx->db, ep);
		add_samples(&fx->agg, 0x1010, 3);
		add_task(&fx->agg, 100, "ls", "/usr/bin/ls");
		add_task(&fx->agg, 101, "sleep", "/usr/bin/sleep");
		add_task(&fx->agg, 102, "ls", "/usr/bin/ls");
		assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
		char *t = epoch_tasks(epath);
		assert_string_equal(
			t,
			per_pid ? "100 ls /usr/bin/ls\n101 sleep /usr/bin/sleep\n102 ls /usr/bin/ls\n"
				: "101 sleep /usr/bin/sleep\n102 ls /usr/bin/ls\n");
		free(t);
		/* the next flush: a later ls, and a program of the same name elsewhere */
		add_samples(&fx->agg, 0x1010, 1);
		add_task(&fx->agg, 200, "ls", "/usr/bin/ls");
		add_task(&fx->agg, 201, "ls", "/opt/ls");
		assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
		t = epoch_tasks(epath);
		assert_string_equal(
			t,
			per_pid ? "100 ls /usr/bin/ls\n101 sleep /usr/bin/sleep\n102 ls /usr/bin/ls\n"
				  "200 ls /usr/bin/ls\n201 ls /opt/ls\n"
				: "101 sleep /usr/bin/sleep\n200 ls /usr/bin/ls\n201 ls /opt/ls\n");
		free(t);
		assert_int_equal(db_samples(epath, 0x1010), 4);
		free(epath);
		free(ep);
	}
}

/* The inode of path (0 when there is none). */
static ino_t ino_of(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 ? st.st_ino : 0;
}

/* A flush writes over the copy the flush before swapped out, in place: the
 * files keep their inodes (none created or deleted), what the spare held
 * beyond the new content or besides it is gone, and a link planted in it is
 * replaced, never written through. */
static void test_daemon__flush_writes_over_the_spare(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	char *ep = current_epoch(fx->d);
	char *epath = unit_path(fx->db, ep), *spare = spare_path(fx, ep);
	char *session = unit_path(epath, "session"), *images = unit_path(epath, "images");
	ino_t ino[4];
	for (int i = 0; i < 4; i++) {
		add_samples(&fx->agg, 0x1010, 1 + (uint64_t)i);
		assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
		ino[i] = ino_of(session);
		assert_true(unit_exists(spare));
	}
	assert_int_equal(db_samples(epath, 0x1010), 1 + 2 + 3 + 4);
	/* two copies in turn: the third flush wrote the first one's files again */
	assert_int_not_equal(ino[0], ino[1]);
	assert_int_equal(ino[0], ino[2]);
	assert_int_equal(ino[1], ino[3]);

	/* a name new to the spare (an image sampled for the first time) is
	 * written after the names it has: it never takes the inode of a file the
	 * same flush writes later (which would then be made anew) */
	char *ssess = unit_path(spare, "session"), *simg = unit_path(spare, "images");
	ino_t had_session = ino_of(ssess), had_images = ino_of(simg);
	add_samples_in(&fx->agg, "/bin/false", 0x3030, 2);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	assert_int_equal(db_samples(epath, 0x3030), 2);
	assert_int_equal(ino_of(session), had_session);
	assert_int_equal(ino_of(images), had_images);
	free(ssess);
	free(simg);

	/* a reader's recovery (here, in the daemon itself) leaves the locked spare alone */
	struct tally_db_recovery rv;
	assert_int_equal(tally_db_recover(fx->db, &rv), 0);
	assert_true(unit_exists(spare));
	assert_true(rv.kept >= 1);

	/* a file whose name the next flush will not find (a label numbered
	 * otherwise) is renamed to serve a name it writes: its inode is kept */
	char *prof = NULL;
	DIR *dir = opendir(spare);
	assert_non_null(dir);
	for (struct dirent *de; (de = readdir(dir));)
		if (strstr(de->d_name, "true-") == de->d_name && !prof)
			prof = xstrdup(de->d_name);
	closedir(dir);
	assert_non_null(prof);
	char *sprof = unit_path(spare, prof), *moved = unit_path(spare, "true-0123-l9.prof");
	char *ppub = unit_path(epath, prof), *mpub = unit_path(epath, "true-0123-l9.prof");
	assert_int_equal(rename(sprof, moved), 0);
	ino_t reused = ino_of(moved);
	add_samples(&fx->agg, 0x1010, 5);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	assert_int_equal(db_samples(epath, 0x1010), 15);
	assert_int_equal(ino_of(ppub), reused);
	assert_false(unit_exists(mpub));

	/* what the spare holds besides or beyond what the next flush writes goes */
	char *junk = unit_path(spare, "junk"), *simages = unit_path(spare, "images");
	mkdir(junk, 0700); /* a directory: never renamed to serve a file */
	FILE *f = fopen(simages, "a");
	assert_non_null(f);
	for (int i = 0; i < 200; i++)
		fputs("trailing bytes of an older, longer copy\n", f);
	fclose(f);
	ino_t img = ino_of(simages);
	/* a link in place of one of its files is replaced, not written through */
	char *victim = unit_path(fx->tmp, "victim"), *ssession = unit_path(spare, "session");
	unit_write_str(victim, "untouched\n");
	assert_int_equal(unlink(ssession), 0);
	assert_int_equal(symlink(victim, ssession), 0);
	add_samples(&fx->agg, 0x1010, 6);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	assert_int_equal(db_samples(epath, 0x1010), 21);
	char *jpub = unit_path(epath, "junk");
	assert_false(unit_exists(jpub));
	struct stat st;
	assert_int_equal(lstat(session, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	char *v = unit_read(victim, NULL);
	assert_string_equal(v, "untouched\n");
	free(v);
	/* the images file was written over in place, and lost the older copy's tail */
	assert_int_equal(ino_of(images), img);
	v = unit_read(images, NULL);
	assert_null(strstr(v, "trailing bytes"));
	free(v);

	free(prof);
	free(sprof);
	free(moved);
	free(ppub);
	free(mpub);
	free(junk);
	free(simages);
	free(victim);
	free(ssession);
	free(jpub);
	free(session);
	free(images);
	free(spare);
	free(epath);
	free(ep);
}

/* One process's JIT sources may take at most a quarter of --max-memory: the
 * 256 MiB of a recording would be twice the daemon's default bound. */
static void test_daemon__jit_budget_within_max_memory(void **state)
{
	struct fixture *fx = *state;
	assert_int_equal(fx->agg.jit_budget, TALLY_JIT_BUDGET);
	fx->o.max_memory = 64ull << 20;
	start(fx);
	assert_int_equal(fx->agg.jit_budget, 16ull << 20);
}

static void test_daemon__jit_budget_kept_when_memory_is_large(void **state)
{
	struct fixture *fx = *state;
	fx->o.max_memory = 4ull << 30;
	start(fx);
	assert_int_equal(fx->agg.jit_budget, TALLY_JIT_BUDGET);
}

/* What du counts of the directory, without the daemon's log. */
static uint64_t du_bytes(const char *path, bool top)
{
	struct stat st;
	if (lstat(path, &st))
		return 0;
	uint64_t sum = (uint64_t)st.st_blocks * 512;
	DIR *dir = S_ISDIR(st.st_mode) ? opendir(path) : NULL;
	struct dirent *de;
	while (dir && (de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (top &&
		     (!strcmp(de->d_name, "daemon.log") || !strcmp(de->d_name, "daemon.log.1"))))
			continue;
		char *p = unit_path(path, de->d_name);
		sum += du_bytes(p, false);
		free(p);
	}
	if (dir)
		closedir(dir);
	return sum;
}

/* The database's size (what --max-db-size and the status count) follows each
 * flush by what the epoch it rewrote took before and takes now, without a
 * walk of the whole directory each time: after flushes of a growing epoch,
 * and across the walk that comes every 16th, it is what du says. */
static void test_daemon__db_size_counted_by_flush(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	assert_int_equal(fx->d->db_bytes, du_bytes(fx->db, true));
	for (int i = 0; i < 20; i++) {
		for (int k = 0; k <= i; k++)
			add_samples(&fx->agg, 0x1000 + 16 * (uint64_t)(i * 64 + k),
				    1 + (uint64_t)k);
		assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
		uint64_t du = du_bytes(fx->db, true);
		if (fx->d->db_bytes != du)
			fail_msg("after flush %d: db_bytes %" PRIu64 ", du %" PRIu64, i + 1,
				 fx->d->db_bytes, du);
	}
}

/* The spare moves to the next epoch (its files serve the new one's), and is
 * given up, never the flush, when --max-db-size has no room for two copies. */
static void test_daemon__spare_follows_epochs_and_quota(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	char *ep1 = current_epoch(fx->d), *sp1 = spare_path(fx, ep1);
	for (int i = 0; i < 2; i++) {
		add_samples(&fx->agg, 0x1010, 3);
		assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	}
	assert_true(unit_exists(sp1));
	ino_t kept = ino_of(sp1);
	assert_int_equal(tally_daemon_new_epoch(fx->d, NULL), 0);
	char *ep2 = current_epoch(fx->d), *sp2 = spare_path(fx, ep2);
	assert_string_not_equal(ep1, ep2);
	add_samples(&fx->agg, 0x2020, 4);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	/* the old epoch's spare was written over as the new epoch's copy */
	assert_false(unit_exists(sp1));
	char *ep2path = unit_path(fx->db, ep2);
	assert_int_equal(ino_of(ep2path), kept);
	assert_true(unit_exists(sp2));
	assert_int_equal(temporaries(fx->db), 1);
	assert_int_equal(db_samples(ep2path, 0x2020), 4);
	assert_int_equal(fx->d->db_bytes, du_bytes(fx->db, true));

	/* a limit with room for one copy and the flush's growth, not two: no spare */
	fx->d->max_db_size = fx->d->db_bytes - fx->d->spare_bytes + 4096;
	add_samples(&fx->agg, 0x2020, 1);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	assert_int_equal(temporaries(fx->db), 0);
	assert_int_equal(db_samples(ep2path, 0x2020), 5);
	assert_int_equal(fx->d->db_bytes, du_bytes(fx->db, true));
	/* and room again: kept again */
	fx->d->max_db_size = 0;
	add_samples(&fx->agg, 0x2020, 1);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	assert_int_equal(temporaries(fx->db), 1);
	assert_int_equal(fx->d->db_bytes, du_bytes(fx->db, true));
	free(ep2path);
	free(sp1);
	free(sp2);
	free(ep1);
	free(ep2);
}

static void test_daemon__quota_stops_writing(void **state)
{
	struct fixture *fx = *state;
	fx->o.max_db_size = 4096; /* less than any epoch takes */
	if (tally_daemon_new(&fx->d, &fx->o))
		fail_msg("tally_daemon_new: %s", tally_errmsg());
	char *warn = NULL;
	/* the first epoch cannot be written: the daemon begins all the same */
	assert_int_equal(tally_daemon_begin(fx->d, &fx->agg, NULL, &warn), 0);
	assert_non_null(warn);
	assert_str_has(warn, "over --max-db-size 4.0 KiB");
	assert_str_has(warn, "collecting all the same");
	free(warn);
	add_samples(&fx->agg, 0x1010, 9);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), -EFBIG);
	assert_errmsg_has("over --max-db-size");
	/* nothing lost: the samples wait in memory; nothing written */
	assert_int_equal(fx->agg.samples[0], 9);
	assert_int_equal(count_epochs(fx->db), 0);
	struct strbuf st = STRBUF_INIT;
	tally_daemon_status(fx->d, &st);
	assert_str_has(st.buf, "\nwriting: stopped: writing epoch ");
	assert_str_has(st.buf, "\nin-memory: 9 samples not yet flushed\n");
	assert_str_has(fx->log.buf, "writing stopped, collection goes on: ");
	strbuf_release(&st);
	/* the drain needs a flush: refused with the reason */
	struct strbuf out = STRBUF_INIT;
	assert_int_equal(tally_daemon_drain(fx->d, &out), -EFBIG);
	assert_errmsg_has("cannot drain: writing is stopped");
	assert_int_equal(out.len, 0);
	strbuf_release(&out);
}

static void test_daemon__min_free_stops_writing(void **state)
{
	struct fixture *fx = *state;
	fx->o.min_free = UINT64_MAX / 4; /* no filesystem has that much free */
	if (tally_daemon_new(&fx->d, &fx->o))
		fail_msg("tally_daemon_new: %s", tally_errmsg());
	char *warn = NULL;
	/* the first epoch cannot be written: the daemon begins all the same */
	assert_int_equal(tally_daemon_begin(fx->d, &fx->agg, NULL, &warn), 0);
	assert_non_null(warn);
	assert_str_has(warn, "--min-free");
	assert_str_has(warn, "collecting all the same");
	free(warn);
	add_samples(&fx->agg, 0x1010, 4);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), -ENOSPC);
	assert_int_equal(fx->agg.samples[0], 4);
}

/* ---- epochs ---- */

/* An epoch directory as an earlier daemon wrote it, its last flush at `when`. */
static void old_epoch(struct fixture *fx, const char *name, double when)
{
	struct tally_agg empty;
	tally_agg_init(&empty, 1, false, true);
	struct tally_meta s = { 0 };
	tally_sampling_session(&fx->smp, NULL, &empty, "system", NULL, &s);
	char ts[32];
	tally_format_utc(when, ts, sizeof(ts));
	tally_meta_set(&s, "start-time", "%s", ts);
	tally_meta_set(&s, "stop-time", "%s", ts);
	tally_meta_set(&s, "duration", "0.000");
	tally_meta_set(&s, "epoch", "%s", name);
	struct tally_db db;
	assert_int_equal(tally_db_from_agg(&db, &empty, &s, NULL), 0);
	char *p = unit_path(fx->db, name);
	if (tally_db_save(&db, p, false))
		fail_msg("tally_db_save: %s", tally_errmsg());
	free(p);
	tally_db_release(&db);
	tally_meta_release(&s);
	tally_agg_release(&empty);
}

static void test_daemon__keep_prunes_old_epochs(void **state)
{
	struct fixture *fx = *state;
	/* an earlier daemon's database with five epochs of 2020 */
	start(fx);
	tally_daemon_free(fx->d);
	fx->d = NULL;
	char *first = NULL;
	{
		struct tally_epoch *e;
		size_t n;
		assert_int_equal(tally_epochs_list(fx->db, &e, &n), 0);
		assert_int_equal(n, 1);
		first = xstrdup(e[0].name);
		tally_epochs_free(e, n);
	}
	const char *names[] = { "202001010000", "202001010001", "202001010002", "202001010003",
				"202001010004" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		old_epoch(fx, names[i], 1577836800.0 + 60.0 * (double)i);
	assert_int_equal(count_epochs(fx->db), 6);
	/* --keep 1h: everything older goes, but never the newest three nor the current one */
	fx->o.keep = 3600;
	start(fx);
	char *cur = current_epoch(fx->d);
	struct tally_epoch *e;
	size_t n;
	assert_int_equal(tally_epochs_list(fx->db, &e, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(e[0].name, "202001010004");
	assert_string_equal(e[1].name, first);
	assert_string_equal(e[2].name, cur);
	tally_epochs_free(e, n);
	assert_str_has(fx->log.buf, "deleted 4 epochs older than --keep");
	free(cur);
	free(first);
}

static void test_daemon__new_epoch(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	char *first = current_epoch(fx->d);
	add_samples(&fx->agg, 0x1010, 6);
	struct strbuf msg = STRBUF_INIT;
	assert_int_equal(tally_daemon_new_epoch(fx->d, &msg), 0);
	char *second = current_epoch(fx->d);
	assert_string_not_equal(first, second);
	assert_str_has(msg.buf, "is complete");
	assert_int_equal(count_epochs(fx->db), 2);
	/* the old epoch got what was in memory; the new one begins empty */
	char *p1 = unit_path(fx->db, first), *p2 = unit_path(fx->db, second);
	assert_int_equal(db_samples(p1, UINT64_MAX), 6);
	assert_int_equal(db_samples(p2, UINT64_MAX), 0);
	add_samples(&fx->agg, 0x1010, 2);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	assert_int_equal(db_samples(p2, UINT64_MAX), 2);
	assert_int_equal(db_samples(fx->db, UINT64_MAX), 8);
	strbuf_release(&msg);
	free(p1);
	free(p2);
	free(first);
	free(second);
}

/* ---- the drain stream ---- */

static uint64_t drain_samples(struct fixture *fx, const char *name)
{
	struct strbuf out = STRBUF_INIT;
	if (tally_daemon_drain(fx->d, &out))
		fail_msg("tally_daemon_drain: %s", tally_errmsg());
	char *p = unit_path(fx->tmp, name);
	unit_write(p, out.buf, out.len);
	uint64_t n = db_samples(p, UINT64_MAX);
	free(p);
	strbuf_release(&out);
	return n;
}

static void test_daemon__drain_disjoint(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	add_samples(&fx->agg, 0x1010, 5);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	add_samples(&fx->agg, 0x2020, 4);
	/* the first drain: everything this daemon wrote, in memory included */
	assert_int_equal(drain_samples(fx, "d1"), 9);
	/* from now on a pile of flushes is kept */
	char *pile = unit_path(fx->db, "drain");
	add_samples(&fx->agg, 0x1010, 3);
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	assert_true(unit_exists(pile));
	add_samples(&fx->agg, 0x3030, 1);
	assert_int_equal(drain_samples(fx, "d2"), 4);
	assert_false(unit_exists(pile));
	/* nothing since: an empty profile all the same */
	assert_int_equal(drain_samples(fx, "d3"), 0);
	/* the database keeps everything */
	assert_int_equal(db_samples(fx->db, UINT64_MAX), 13);
	free(pile);
}

/* ---- status ---- */

static void test_daemon__status_text(void **state)
{
	struct fixture *fx = *state;
	fx->o.epoch_every = 3600;
	fx->o.keep = 7 * 86400;
	start(fx);
	add_samples(&fx->agg, 0x1010, 11);
	fx->agg.lost = 2;
	assert_int_equal(tally_daemon_flush(fx->d, "test", NULL), 0);
	add_samples(&fx->agg, 0x1010, 4);
	struct strbuf st = STRBUF_INIT;
	tally_daemon_status(fx->d, &st);
	char *want = NULL;
	assert_true(asprintf(&want, "state: running\npid: %d\ndatabase: %s\n", (int)getpid(),
			     tally_daemon_db(fx->d)) > 0);
	if (strncmp(st.buf, want, strlen(want)))
		fail_msg("status begins '%.200s', expected '%s'", st.buf, want);
	free(want);
	assert_str_has(st.buf, "\nevents: cpu-clock\n");
	assert_str_has(st.buf, "\nsampling: frequency 999 Hz, randomized\n");
	assert_str_has(st.buf, "\ncall-graph: none\n");
	assert_str_has(st.buf, "\ncpu 0: not sampled\n"); /* no collector */
	assert_str_has(st.buf, "\nsamples: 15\n");
	assert_str_has(st.buf, "\nlost: 2\n");
	assert_str_has(st.buf, "\nin-memory: 4 samples not yet flushed\n");
	assert_str_has(st.buf, "\nwriting: ok\n");
	assert_str_has(st.buf, "\ndrains: 0\n");
	/* durations as they were given (--epoch-every 1h, not 3.6e+03 s); one is singular */
	assert_str_has(st.buf, "\nflush: every 1h; 1 flush (0 early for memory), last ");
	assert_str_has(st.buf, "\nepoch-every: 1h\n");
	assert_str_has(st.buf, "\nkeep: 7d (the newest 3 epochs always)\n");
	assert_str_has(
		st.buf,
		"\ncontrol: 0 of 16 connections; 0 served, 0 evicted, 0 busy, 0 refused (not the owner), 0 timed out\n");
	/* every line is `key: value` */
	for (char *l = st.buf; *l;) {
		char *nl = strchr(l, '\n');
		assert_non_null(nl);
		char *colon = memchr(l, ':', (size_t)(nl - l));
		if (!colon || colon == l || colon[1] != ' ')
			fail_msg("status line '%.*s' is not 'key: value'", (int)(nl - l), l);
		l = nl + 1;
	}
	strbuf_release(&st);
}

/* ---- the control server ---- */

/* A connected pair: [0] for the daemon, [1] the client's end (non-blocking). */
static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
}

static void say(int fd, const char *s)
{
	assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Everything the daemon sent on fd until it closed its end (waiting at most
 * 2 s): "EOF" last when it closed, "OPEN" when it still holds it. */
static char *hear(int fd)
{
	struct strbuf sb = STRBUF_INIT;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 2000) <= 0) {
			strbuf_addstr(&sb, "OPEN");
			break;
		}
		char buf[4096];
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n <= 0) {
			strbuf_addstr(&sb, "EOF");
			break;
		}
		strbuf_add(&sb, buf, (size_t)n);
	}
	return strbuf_detach(&sb);
}

/* Whether the daemon has written or closed fd's peer yet (no waiting). */
static bool heard(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) > 0;
}

static void test_daemon__ctl_request_in_parts(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	add_samples(&fx->agg, 0x1010, 3);
	int sv[2];
	pair(sv);
	say(sv[1], "sta");
	assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
	assert_int_equal(tally_daemon_clients(fx->d), 1);
	tally_daemon_serve(fx->d);
	assert_false(heard(sv[1])); /* half a request: nothing yet */
	say(sv[1], "tus\r\n");
	tally_daemon_serve(fx->d);
	char *got = hear(sv[1]);
	if (strncmp(got, "ok ", 3))
		fail_msg("reply '%.200s'", got);
	/* the header's length is the body's */
	char *nl = strchr(got, '\n');
	assert_non_null(nl);
	size_t len = strtoul(got + 3, NULL, 10);
	assert_int_equal(strlen(nl + 1), len + strlen("EOF"));
	assert_str_has(got, "\nstate: running\n");
	assert_str_has(got, "\nin-memory: 3 samples not yet flushed\n");
	assert_int_equal(tally_daemon_clients(fx->d), 0);
	free(got);
	close(sv[1]);

	/* a request ended by the peer's end of sending */
	pair(sv);
	say(sv[1], "flush");
	shutdown(sv[1], SHUT_WR);
	assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
	got = hear(sv[1]);
	assert_str_has(got, "\nflushed 3 samples into epoch ");
	free(got);
	close(sv[1]);
	assert_str_has(fx->log.buf, "ctl (uid ");
}

static void test_daemon__ctl_bad_requests(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct {
		const char *req;
		const char *want;
	} cases[] = {
		{ "bogus\n",
		  "error 67\nusage: start|stop|clear|startclr|flush|epoch|status|cpus|drain|peek" },
		{ "status\0status\n", "error 67\nusage: " },
		{ "cpus 0\n", "error " },
		{ "start\n", "this daemon has no collector of its own" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int sv[2];
		pair(sv);
		size_t len = strlen(cases[i].req);
		if (i == 1)
			len = sizeof("status\0status\n") - 1;
		assert_int_equal(send(sv[1], cases[i].req, len, MSG_NOSIGNAL), (ssize_t)len);
		assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
		char *got = hear(sv[1]);
		assert_str_has(got, cases[i].want);
		assert_str_has(got, "EOF");
		if (strncmp(got, "error ", 6))
			fail_msg("'%s' got '%s'", cases[i].req, got);
		free(got);
		close(sv[1]);
	}
	/* over 4096 bytes without a newline */
	int sv[2];
	pair(sv);
	assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
	char big[5000];
	memset(big, 's', sizeof(big));
	assert_int_equal(send(sv[1], big, sizeof(big), MSG_NOSIGNAL), (ssize_t)sizeof(big));
	tally_daemon_serve(fx->d);
	char *got = hear(sv[1]);
	assert_str_has(got, "request longer than 4096 bytes");
	free(got);
	close(sv[1]);
	assert_str_has(fx->log.buf, "refused a request of over 4096 bytes");
}

static void test_daemon__ctl_not_owner_refused_at_once(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	uid_t other = geteuid() == 0 ? 65534 : geteuid() + 1;
	for (int i = 0; i < 40; i++) {
		int sv[2];
		pair(sv);
		say(sv[1], "drain\n");
		assert_int_equal(tally_daemon_add_client(fx->d, sv[0], other), -EPERM);
		char *got = hear(sv[1]);
		assert_str_has(got, "permission denied: this daemon belongs to uid ");
		assert_str_has(got, "EOF");
		assert_true(!strncmp(got, "error ", 6));
		free(got);
		close(sv[1]);
	}
	/* none of them took a slot, and the log did not get forty lines */
	assert_int_equal(tally_daemon_clients(fx->d), 0);
	size_t lines = 0;
	for (const char *p = fx->log.buf; (p = strstr(p, "refused a connection from uid")); p++)
		lines++;
	assert_true(lines >= 1 && lines <= 2);
	struct strbuf st = STRBUF_INIT;
	tally_daemon_status(fx->d, &st);
	assert_str_has(st.buf, " 40 refused (not the owner)");
	strbuf_release(&st);
	/* nothing was drained */
	assert_int_equal(db_samples(fx->db, UINT64_MAX), 0);
	char *pile = unit_path(fx->db, "drain");
	assert_false(unit_exists(pile));
	free(pile);
}

static void test_daemon__ctl_stallers_evicted(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	/* sixteen connections that never finish their request hold every slot */
	int silent[TALLY_DAEMON_MAX_CLIENTS];
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++) {
		int sv[2];
		pair(sv);
		if (i % 2)
			say(sv[1], "sta"); /* half a request */
		assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
		silent[i] = sv[1];
	}
	assert_int_equal(tally_daemon_clients(fx->d), TALLY_DAEMON_MAX_CLIENTS);
	usleep((useconds_t)(TALLY_DAEMON_CTL_GRACE * 1e6) + 20000);
	tally_daemon_serve(fx->d);
	/* the owner gets through: the oldest staller makes room */
	int sv[2];
	pair(sv);
	say(sv[1], "status\n");
	assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
	char *got = hear(sv[1]);
	if (strncmp(got, "ok ", 3))
		fail_msg("the owner's request while stallers held the slots: '%.200s'", got);
	free(got);
	close(sv[1]);
	got = hear(silent[0]);
	assert_str_has(got, "busy: too many control connections at once");
	assert_str_has(got, "EOF");
	free(got);
	/* the slot it used is free again: the next one evicts nobody */
	pair(sv);
	say(sv[1], "status\n");
	assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
	got = hear(sv[1]);
	assert_true(!strncmp(got, "ok ", 3));
	free(got);
	close(sv[1]);
	for (int i = 1; i < TALLY_DAEMON_MAX_CLIENTS; i++)
		assert_false(heard(silent[i]));
	assert_int_equal(tally_daemon_clients(fx->d), TALLY_DAEMON_MAX_CLIENTS - 1);
	struct strbuf st = STRBUF_INIT;
	tally_daemon_status(fx->d, &st);
	assert_str_has(st.buf, "; 2 served, 1 evicted, 0 busy");
	strbuf_release(&st);
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++)
		close(silent[i]);
}

static void test_daemon__ctl_grace_for_new(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	/* sixteen new connections: none can be evicted before its client had the
	 * time to send its request, so a seventeenth is told busy */
	int cl[TALLY_DAEMON_MAX_CLIENTS];
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++) {
		int sv[2];
		pair(sv);
		assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
		cl[i] = sv[1];
	}
	int sv[2];
	pair(sv);
	say(sv[1], "status\n");
	assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), -EBUSY);
	char *got = hear(sv[1]);
	assert_str_has(got, "error ");
	assert_str_has(got, "busy");
	free(got);
	close(sv[1]);
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++)
		assert_false(heard(cl[i]));
	/* past their grace the oldest makes room */
	usleep((useconds_t)(TALLY_DAEMON_CTL_GRACE * 1e6) + 20000);
	pair(sv);
	say(sv[1], "status\n");
	assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
	got = hear(sv[1]);
	assert_true(!strncmp(got, "ok ", 3));
	free(got);
	close(sv[1]);
	got = hear(cl[0]);
	assert_str_has(got, "busy");
	free(got);
	for (int i = 1; i < TALLY_DAEMON_MAX_CLIENTS; i++)
		assert_false(heard(cl[i]));
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++)
		close(cl[i]);
}

static void test_daemon__ctl_deadline_whole_request(void **state)
{
	struct fixture *fx = *state;
	fx->o.ctl_timeout = 0.3;
	start(fx);
	int sv[2];
	pair(sv);
	assert_int_equal(tally_daemon_add_client(fx->d, sv[0], geteuid()), 0);
	/* a byte now and then does not keep the connection: its whole request is due */
	const char *drip = "sta";
	for (int i = 0; i < 3; i++) {
		assert_int_equal(send(sv[1], drip + i, 1, MSG_NOSIGNAL), 1);
		tally_daemon_serve(fx->d);
		usleep(90 * 1000);
	}
	tally_daemon_serve(fx->d);
	assert_false(heard(sv[1])); /* 0.27 s: still within its time */
	usleep(150 * 1000);
	tally_daemon_serve(fx->d);
	char *got = hear(sv[1]);
	assert_string_equal(got, "EOF");
	free(got);
	close(sv[1]);
	assert_int_equal(tally_daemon_clients(fx->d), 0);
	assert_str_has(fx->log.buf,
		       "dropped a connection that did not complete its request within 0.3 s");
	struct strbuf st = STRBUF_INIT;
	tally_daemon_status(fx->d, &st);
	assert_str_has(st.buf, " 1 timed out\n");
	strbuf_release(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_daemon__new_private_locked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__new_refuses_other_dirs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__recovers_leftovers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__flush_merges_into_epoch, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__epoch_lists_programs_not_processes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__flush_writes_over_the_spare, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__jit_budget_within_max_memory, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__jit_budget_kept_when_memory_is_large,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__db_size_counted_by_flush, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__spare_follows_epochs_and_quota, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__quota_stops_writing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__min_free_stops_writing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__keep_prunes_old_epochs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__new_epoch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__drain_disjoint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__status_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__ctl_request_in_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__ctl_bad_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__ctl_not_owner_refused_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_daemon__ctl_stallers_evicted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__ctl_grace_for_new, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon__ctl_deadline_whole_request, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
