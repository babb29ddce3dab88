/* Unit tests for the recording engine (lib/record/) as a job harness uses it
 * in-process: a command recorded to its end with its exit status, a command
 * that cannot run, a recording stopped from another thread, a duration,
 * attached processes that exit, the rounds as a non-blocking step, and the
 * database written under another name when its path appeared meanwhile.
 * These sample for real (cpu-clock): without perf events here they skip. */
#define _GNU_SOURCE
#include "unit.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "tally/db.h"
#include "tally/record.h"
#include "tally/sampling.h"

struct fixture {
	char *tmp;
	bool cannot_sample;
	struct tally_sampling smp;
	struct tally_recording *r;
};

static int setup(void **state)
{
	struct fixture *fx = xcalloc(1, sizeof(*fx));
	fx->tmp = unit_tmpdir();
	tally_sampling_init(&fx->smp);
	*state = fx;
	fx->cannot_sample = tally_sampling_resolve(&fx->smp) != 0;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	tally_recording_free(fx->r);
	tally_sampling_release(&fx->smp);
	tally_remove_tree(fx->tmp);
	free(fx->tmp);
	free(fx);
	return 0;
}

/* A recording, or a skip when this machine does not let us open perf events. */
static void new_or_skip(struct fixture *fx, const struct tally_recording_opts *o)
{
	if (fx->cannot_sample) {
		fprintf(stderr, "skipped: cannot sample cpu-clock here\n");
		skip();
	}
	int r = tally_recording_new(&fx->r, o);
	if (r == -EACCES || r == -EPERM || r == -ENOENT || r == -EOPNOTSUPP || r == -ENOSYS) {
		fprintf(stderr, "skipped: %s\n", tally_errmsg());
		skip();
	}
	if (r)
		fail_msg("tally_recording_new: %s", tally_errmsg());
}

static void test_record__bad_options(void **state)
{
	struct fixture *fx = *state;
	struct tally_recording_opts o;
	tally_recording_opts_init(&o);
	struct tally_recording *r = NULL;
	assert_int_equal(tally_recording_new(&r, &o), -EINVAL); /* no sampling settings */
	if (fx->cannot_sample)
		skip();
	o.smp = &fx->smp;
	o.target = TALLY_TARGET_CHILD;
	assert_int_equal(tally_recording_new(&r, &o), -EINVAL);
	assert_errmsg_has("give a command");
	o.target = TALLY_TARGET_PIDS;
	assert_int_equal(tally_recording_new(&r, &o), -EINVAL);
	o.target = TALLY_TARGET_SYSTEM;
	o.duration = -1;
	assert_int_equal(tally_recording_new(&r, &o), -EINVAL);
	assert_null(r);
	tally_recording_free(NULL);
}

static void test_record__command_exit_status(void **state)
{
	struct fixture *fx = *state;
	char *argv[] = { (char *)"sh", (char *)"-c", (char *)"exit 3", NULL };
	struct tally_recording_opts o;
	tally_recording_opts_init(&o);
	o.smp = &fx->smp;
	o.target = TALLY_TARGET_CHILD;
	o.argv = argv;
	new_or_skip(fx, &o);
	assert_true(tally_recording_pid(fx->r) > 0);
	assert_int_equal(tally_recording_exit_code(fx->r), -1);
	assert_int_equal(tally_recording_start(fx->r), 0);
	assert_int_equal(tally_recording_run(fx->r), 0);
	assert_int_equal(tally_recording_end(fx->r), TALLY_RECORDING_CHILD_EXITED);
	assert_int_equal(tally_recording_exit_code(fx->r), 3);
	char *db = unit_path(fx->tmp, "r.db"), *written = NULL;
	assert_int_equal(tally_recording_write(fx->r, db, false, &written), 0);
	assert_string_equal(written, db);
	const struct tally_meta *s = tally_recording_session(fx->r);
	assert_non_null(s);
	assert_string_equal(tally_meta_get(s, "exit-status"), "3");
	assert_string_equal(tally_meta_get(s, "command"), "sh -c exit 3");
	assert_string_equal(tally_meta_get(s, "target"), "command");
	struct tally_db d;
	if (tally_db_open(&d, db))
		fail_msg("reading the recording back: %s", tally_errmsg());
	assert_string_equal(tally_meta_get(&d.session, "exit-status"), "3");
	tally_db_release(&d);
	free(written);
	free(db);
}

static void test_record__command_cannot_run(void **state)
{
	struct fixture *fx = *state;
	char *argv[] = { (char *)"/nonexistent/tally-no-such-program", NULL };
	struct tally_recording_opts o;
	tally_recording_opts_init(&o);
	o.smp = &fx->smp;
	o.target = TALLY_TARGET_CHILD;
	o.argv = argv;
	new_or_skip(fx, &o);
	assert_int_equal(tally_recording_start(fx->r), -ENOENT);
	assert_errmsg_has("cannot run '/nonexistent/tally-no-such-program': ");
	assert_errmsg_has("(check the name and PATH)");
	assert_int_equal(tally_recording_exit_code(fx->r), 127);
	assert_int_equal(tally_recording_step(fx->r, 0), 1);
}

struct stopper {
	struct tally_recording *r;
	unsigned delay_ms;
};

static void *stop_later(void *arg)
{
	struct stopper *s = arg;
	usleep(s->delay_ms * 1000);
	tally_recording_request_stop(s->r);
	return NULL;
}

/* A harness's thread ends a system-wide recording while the owner runs it. */
static void test_record__stop_from_another_thread(void **state)
{
	struct fixture *fx = *state;
	struct tally_recording_opts o;
	tally_recording_opts_init(&o);
	o.smp = &fx->smp;
	new_or_skip(fx, &o);
	assert_int_equal(tally_recording_start(fx->r), 0);
	struct stopper s = { fx->r, 300 };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, stop_later, &s), 0);
	double t0 = tally_now_mono();
	assert_int_equal(tally_recording_run(fx->r), 0);
	double took = tally_now_mono() - t0;
	pthread_join(th, NULL);
	assert_int_equal(tally_recording_end(fx->r), TALLY_RECORDING_REQUESTED);
	if (took < 0.25 || took > 3)
		fail_msg("a stop requested after 0.3 s ended the recording after %.3f s", took);
	assert_int_equal(tally_recording_stop(fx->r), 0);
	assert_true(tally_recording_duration(fx->r) >= 0.25);
	assert_int_equal(tally_recording_exit_code(fx->r), -1);
}

/* A command is stopped as a user would: SIGTERM, then its status is kept. */
static void test_record__stop_command(void **state)
{
	struct fixture *fx = *state;
	char *argv[] = { (char *)"sleep", (char *)"30", NULL };
	struct tally_recording_opts o;
	tally_recording_opts_init(&o);
	o.smp = &fx->smp;
	o.target = TALLY_TARGET_CHILD;
	o.argv = argv;
	new_or_skip(fx, &o);
	assert_int_equal(tally_recording_start(fx->r), 0);
	/* the owner's own loop of non-blocking rounds */
	double t0 = tally_now_mono();
	int n = 0, rounds = 0;
	while ((n = tally_recording_step(fx->r, 0)) == 0 && tally_now_mono() - t0 < 0.2) {
		rounds++;
		usleep(10 * 1000);
	}
	assert_int_equal(n, 0);
	assert_true(rounds >= 5);
	tally_recording_request_stop(fx->r);
	assert_int_equal(tally_recording_run(fx->r), 0);
	assert_true(tally_now_mono() - t0 < 5);
	assert_int_equal(tally_recording_end(fx->r), TALLY_RECORDING_CHILD_EXITED);
	assert_int_equal(tally_recording_exit_code(fx->r), 128 + SIGTERM);
}

static pid_t spawn_sleep(const char *secs)
{
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		execlp("sleep", "sleep", secs, (char *)NULL);
		_exit(127);
	}
	return p;
}

static void test_record__duration(void **state)
{
	struct fixture *fx = *state;
	pid_t p = spawn_sleep("30");
	int pids[] = { p };
	struct tally_recording_opts o;
	tally_recording_opts_init(&o);
	o.smp = &fx->smp;
	o.target = TALLY_TARGET_PIDS;
	o.pids = pids;
	o.npids = 1;
	o.duration = 0.3;
	new_or_skip(fx, &o);
	assert_int_equal(tally_recording_start(fx->r), 0);
	assert_int_equal(tally_recording_run(fx->r), 0);
	assert_int_equal(tally_recording_end(fx->r), TALLY_RECORDING_DURATION);
	assert_int_equal(tally_recording_stop(fx->r), 0);
	double d = tally_recording_duration(fx->r);
	if (d < 0.3 || d > 2)
		fail_msg("--duration 0.3 recorded %.3f s", d);
	char *db = unit_path(fx->tmp, "p.db");
	assert_int_equal(tally_recording_write(fx->r, db, false, NULL), 0);
	struct tally_db rd;
	assert_int_equal(tally_db_open(&rd, db), 0);
	char want[64];
	snprintf(want, sizeof(want), "pids %d", (int)p);
	assert_string_equal(tally_meta_get(&rd.session, "target"), want);
	tally_db_release(&rd);
	free(db);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
}

static void test_record__attached_processes_exit(void **state)
{
	struct fixture *fx = *state;
	pid_t p = spawn_sleep("0.3");
	int pids[] = { p };
	struct tally_recording_opts o;
	tally_recording_opts_init(&o);
	o.smp = &fx->smp;
	o.target = TALLY_TARGET_PIDS;
	o.pids = pids;
	o.npids = 1;
	new_or_skip(fx, &o);
	assert_int_equal(tally_recording_start(fx->r), 0);
	/* the exited child must be reaped for kill(pid, 0) to say it is gone */
	double t0 = tally_now_mono();
	int n;
	while ((n = tally_recording_step(fx->r, -1)) == 0 && tally_now_mono() - t0 < 10)
		waitpid(p, NULL, WNOHANG);
	assert_int_equal(n, 1);
	assert_int_equal(tally_recording_end(fx->r), TALLY_RECORDING_PIDS_EXITED);
}

/* The database's path was free when the recording began and is taken when it
 * is written: the data goes next to it, and the caller learns where. */
static void test_record__path_taken_meanwhile(void **state)
{
	struct fixture *fx = *state;
	char *db = unit_path(fx->tmp, "r.db");
	assert_int_equal(tally_db_check_target(db, false), 0);
	char *argv[] = { (char *)"true", NULL };
	struct tally_recording_opts o;
	tally_recording_opts_init(&o);
	o.smp = &fx->smp;
	o.target = TALLY_TARGET_CHILD;
	o.argv = argv;
	new_or_skip(fx, &o);
	assert_int_equal(tally_recording_start(fx->r), 0);
	assert_int_equal(mkdir(db, 0700), 0); /* someone else's */
	char *mine = unit_path(db, "theirs");
	unit_write_str(mine, "not a database\n");
	assert_int_equal(tally_recording_run(fx->r), 0);
	char *written = NULL;
	assert_int_equal(tally_recording_write(fx->r, db, false, &written), 0);
	char want[4096];
	snprintf(want, sizeof(want), "%s.%d", db, (int)getpid());
	assert_string_equal(written, want);
	char *session = unit_path(written, "session");
	assert_true(unit_exists(session));
	/* theirs is untouched */
	assert_true(unit_exists(mine));
	char *s2 = unit_path(db, "session");
	assert_false(unit_exists(s2));
	free(s2);
	free(session);
	free(written);
	free(mine);
	free(db);
}

/* What the BPF program can count is told from the options alone: the whole
 * system, no call graph, at most 4 sampling events, at most as many CPUs as it
 * has slots for (a machine past that takes the ring, with the reason). */
static void test_record__bpf_fits_what_it_has_room_for(void **state)
{
	(void)state;
	const struct tally_event_desc *ev[5];
	for (int i = 0; i < 5; i++)
		ev[i] = tally_event_find("cpu-clock");
	assert_non_null(ev[0]);
	struct tally_collect_opts o = { .events = ev,
					.nevents = 1,
					.target = TALLY_TARGET_SYSTEM,
					.ncpus = 512,
					.wake_fd = -1 };
	assert_int_equal(tally_sample_bpf_fits(&o), 0);
	o.ncpus = 513;
	assert_int_equal(tally_sample_bpf_fits(&o), -EINVAL);
	assert_non_null(strstr(tally_errmsg(), "more CPUs than it has slots for"));
	assert_non_null(strstr(tally_errmsg(), "--sample-mechanism ring"));
	o.ncpus = 2;
	o.nevents = 4;
	assert_int_equal(tally_sample_bpf_fits(&o), 0);
	o.nevents = 5;
	assert_int_equal(tally_sample_bpf_fits(&o), -EINVAL);
	assert_non_null(strstr(tally_errmsg(), "more than 4 events"));
	o.nevents = 1;
	o.callchain = true;
	assert_int_equal(tally_sample_bpf_fits(&o), -EINVAL);
	assert_non_null(strstr(tally_errmsg(), "call graphs asked"));
	o.callchain = false;
	o.target = TALLY_TARGET_CHILD;
	assert_int_equal(tally_sample_bpf_fits(&o), -EINVAL);
	assert_non_null(strstr(tally_errmsg(), "the whole system only"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_record__bad_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record__command_exit_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record__command_cannot_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record__stop_from_another_thread, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_record__stop_command, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record__duration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record__attached_processes_exit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_record__path_taken_meanwhile, setup, teardown),
		cmocka_unit_test(test_record__bpf_fits_what_it_has_room_for),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
