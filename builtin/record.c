/* tally record: run or attach, sample, aggregate in memory, write the database. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/agg.h"
#include "tally/collect.h"
#include "tally/db.h"
#include "tally/record.h"
#include "tally/offcpu.h"
#include "tally/sampling.h"
#include "tally/util.h"

struct recopts {
	const char *out, *pid_arg;
	bool force, all, no_cache;
	double duration;
};

enum { OPT_VERBOSE };

/* -v sets the process's tally_verbose: the handler's; the rest are one row each */
static int record_handle(void *ctx, int code, const char *arg)
{
	(void)ctx;
	(void)arg;
	if (code == OPT_VERBOSE)
		tally_verbose = 1;
	return 0;
}

static const struct tally_option record_options[] = {
	TALLY_OPT_STRING('o', "output", "DIR", "database directory (default tally.db)",
			 struct recopts, out),
	TALLY_OPT_FLAG(0, "force", "replace an existing database", struct recopts, force),
	TALLY_OPT_FLAG('a', "all-cpus", "the whole system, kernel included", struct recopts, all),
	TALLY_OPT_STRING('p', "pid", "LIST", "attach to running processes", struct recopts,
			 pid_arg),
	TALLY_OPT_DURATION(
		0, "duration", "SECS",
		"stop after this long (also 500ms, 2m, ...); a COMMAND then gets SIGTERM",
		struct recopts, duration),
	TALLY_OPT_FLAG(
		'N', "no-buildid-cache",
		"do not copy the sampled images into the build-id cache (reports of\nthe database then name code only while its files are unchanged)",
		struct recopts, no_cache),
	TALLY_OPT('v', "verbose", TALLY_ARG_NONE, NULL, "say what it is doing", OPT_VERBOSE),
	TALLY_OPTION_END,
};
static const struct tally_optgroup record_group = { NULL, record_options, record_handle };

const struct tally_cmdopts record_cmdopts = {
	.name = "record",
	.summary = "profile a command, processes or the whole system into a database",
	.usage = "[options] [--] [COMMAND [ARGS...]]",
	.stop_at_nonopt = true,
	.groups = { &record_group, &tally_sampling_group, &tally_offcpu_group },
};

static struct tally_recording *rec; /* for the signal handlers */
static volatile sig_atomic_t stop_on_hup_int;

static void on_signal(int sig)
{
	if (!rec)
		return;
	if (sig == SIGTERM || (sig != SIGCHLD && stop_on_hup_int))
		tally_recording_request_stop(rec);
	else
		tally_recording_wake(rec);
}

int cmd_record(int argc, char **argv)
{
	struct recopts o = { .out = "tally.db" };
	int ret = 1;
	int *pids = NULL;
	size_t npids = 0;
	struct tally_sampling smp;
	tally_sampling_init(&smp);

	void *ctx[] = { &o, &smp, &smp };
	int first;
	ret = tally_cmd_options(&record_cmdopts, ctx, argc, argv, &first);
	if (ret >= 0)
		goto out;
	ret = 1;
	const char *out = o.out, *pid_arg = o.pid_arg;
	bool force = o.force, all = o.all;
	double duration = o.duration;
	char **cmd = argv + first;
	int ncmd = argc - first;
	if (smp.freq && smp.period) {
		ret = tally_usage_error("record", "-F and -c both set the sampling rate: give one");
		goto out;
	}
	if (ncmd && (all || pid_arg)) {
		ret = tally_usage_error("record", "give a COMMAND, or -a, or -p, not several");
		goto out;
	}
	if (all && pid_arg) {
		ret = tally_usage_error("record", "-a and -p cannot be combined");
		goto out;
	}
	if (!ncmd && !all && !pid_arg) {
		ret = tally_usage_error(
			"record", "nothing to profile: give a COMMAND (after --), -a or -p PID");
		goto out;
	}
	{
		int r = tally_sampling_resolve(&smp);
		if (r) {
			tally_error_last();
			ret = r == -EINVAL ? 2 : 1;
			goto out;
		}
	}
	if (pid_arg) {
		if (tally_parse_intlist(pid_arg, "pid list -p", &pids, &npids)) {
			ret = tally_usage_error("record", "%s", tally_errmsg());
			goto out;
		}
		for (size_t i = 0; i < npids; i++)
			if (kill(pids[i], 0) < 0 && errno == ESRCH) {
				tally_error("cannot attach to pid %d: no such process", pids[i]);
				ret = 1;
				goto out;
			}
	}
	if (tally_db_check_target(out, force)) {
		tally_error_last();
		ret = 1;
		goto out;
	}

	struct tally_recording_opts ro;
	tally_recording_opts_init(&ro);
	ro.smp = &smp;
	ro.duration = duration;
	ro.buildid_cache = !o.no_cache;
	if (ncmd) {
		ro.target = TALLY_TARGET_CHILD;
		ro.argv = cmd;
	} else if (pid_arg) {
		ro.target = TALLY_TARGET_PIDS;
		ro.pids = pids;
		ro.npids = npids;
	}
	if (tally_recording_new(&rec, &ro)) {
		tally_error_last();
		goto out;
	}
	/* signals end the recording; with a command, the terminal's ^C reaches the
	 * command itself and tally waits for it to end */
	stop_on_hup_int = !ncmd;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (ncmd)
		signal(SIGINT, SIG_IGN);
	else
		sigaction(SIGINT, &sa, NULL);

	struct tally_collector *col = tally_recording_collector(rec);
	struct strbuf cpustr = STRBUF_INIT;
	tally_cpus_string(smp.cpus, smp.ncpus, &cpustr);
	for (int e = 0; e < smp.nev; e++) {
		const struct tally_event_desc *ev = smp.evs[e];
		uint64_t mp = tally_collector_mean_period(col, e);
		if (mp)
			tally_info("event %s: period %" PRIu64 "%s%s on CPUs %s", ev->name, mp,
				   ev->time_based ? " ns" : "",
				   smp.randomize ? " (randomized +-12.5%)" : "", cpustr.buf);
		else
			tally_info("event %s: %" PRIu64 " Hz (kernel-adjusted period) on CPUs %s",
				   ev->name, smp.freq, cpustr.buf);
	}
	strbuf_release(&cpustr);
	{
		const char *why, *mech = tally_collector_offcpu_mech(col, &why);
		if (mech)
			tally_info("off-CPU time from %s%s%s%s",
				   !strcmp(mech, "bpf") ? "the BPF program (summed in the kernel)"
							: "the sched_switch tracepoint",
				   why ? " (" : "", why ? why : "", why ? ")" : "");
	}

	if (tally_recording_start(rec)) {
		tally_error_last();
		ret = tally_recording_exit_code(rec) == 127 ? 127 : 1;
		goto out;
	}
	if (ncmd)
		tally_info("started '%s' as pid %d", cmd[0], tally_recording_pid(rec));
	tally_info("recording into '%s'", out);
	if (tally_recording_run(rec))
		tally_error_last();
	if (tally_recording_end(rec) == TALLY_RECORDING_PIDS_EXITED)
		tally_info("every attached process has exited");
	tally_recording_finish(rec);
	const struct tally_agg *agg = tally_recording_agg(rec);
	for (size_t i = 0; i < agg->njit_warnings; i++)
		tally_warn("%s", agg->jit_warnings[i]); /* in the session too (jit-warning-N) */

	char *written = NULL;
	if (tally_recording_write(rec, out, force, &written)) {
		tally_error_last();
		ret = 1;
		goto out;
	}
	/* what the build-id cache still lacks is copied by a process of its own:
	 * the end never waits for it */
	tally_recording_cache_handoff(rec);
	if (tally_recording_cache_warning(rec))
		tally_warn("%s (the database names its code only while its files are unchanged)",
			   tally_recording_cache_warning(rec));
	if (strcmp(written, out))
		tally_warn("'%s' appeared while recording; wrote '%s' instead", out, written);
	tally_say("wrote '%s': %" PRIu64 " sample%s, %" PRIu64 " lost (see 'tally report -i %s')",
		  written, tally_recording_samples(rec),
		  tally_recording_samples(rec) == 1 ? "" : "s", tally_recording_lost(rec), written);
	if (tally_recording_lost(rec))
		tally_warn("%" PRIu64 " sample%s lost: lower -F, or the system is too busy",
			   tally_recording_lost(rec),
			   tally_recording_lost(rec) == 1 ? " was" : "s were");
	{
		struct tally_offcpu_stats os;
		if (tally_collector_offcpu_stats(col, &os) && os.nostack)
			tally_warn(
				"%" PRIu64
				" off-CPU wait%s kept one frame: the kernel's stack map had no room "
				"(off-cpu-no-stack in the session; --off-cpu-mechanism tracepoint keeps every stack)",
				os.nostack, os.nostack == 1 ? "" : "s");
	}
	free(written);
	ret = ncmd ? tally_recording_exit_code(rec) : 0;
out:
	signal(SIGCHLD, SIG_DFL);
	{
		struct tally_recording *r = rec;
		rec = NULL;
		tally_recording_free(r);
	}
	free(pids);
	tally_sampling_release(&smp);
	return ret;
}
