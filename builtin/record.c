/* tally record: run or attach, sample, aggregate in memory, write the database. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/agg.h"
#include "tally/collect.h"
#include "tally/db.h"
#include "tally/util.h"

static const char record_usage[] =
	"usage: tally record [options] [--] [COMMAND [ARGS...]]\n"
	"\n"
	"  -o, --output DIR       database directory (default tally.db)\n"
	"      --force            replace an existing database\n"
	"  -F, --freq HZ          samples per second (default 999)\n"
	"  -c, --period N         one sample every N events (instead of -F)\n"
	"      --no-randomize     keep the sampling period fixed\n"
	"  -e, --event LIST       events, comma-separated (default cpu-clock; see 'tally events')\n"
	"  -a, --all-cpus         the whole system, kernel included\n"
	"  -C, --cpu LIST         only these CPUs (e.g. 0,2-3)\n"
	"  -p, --pid LIST         attach to running processes\n"
	"      --duration SECS    stop after this long (also 500ms, 2m, ...)\n"
	"      --per-pid          a separate profile per process\n"
	"  -g                     record call chains (same as --call-graph fp)\n"
	"      --call-graph MODE  fp: frame pointers and kernel chains;\n"
	"                         dwarf[,SIZE]: unwind a SIZE-byte user stack copy (default 16384) with\n"
	"                         the binaries' CFI while recording\n"
	"      --build-id-mmap    take build-ids from the kernel at mmap time (see docs/sampling.md)\n"
	"  -v, --verbose          say what it is doing\n";

enum { OPT_FORCE = 256, OPT_NORAND, OPT_DURATION, OPT_PERPID, OPT_CALLGRAPH, OPT_BUILDID_MMAP };

static const struct option record_opts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "freq", required_argument, NULL, 'F' },
	{ "period", required_argument, NULL, 'c' },
	{ "no-randomize", no_argument, NULL, OPT_NORAND },
	{ "event", required_argument, NULL, 'e' },
	{ "all-cpus", no_argument, NULL, 'a' },
	{ "cpu", required_argument, NULL, 'C' },
	{ "pid", required_argument, NULL, 'p' },
	{ "duration", required_argument, NULL, OPT_DURATION },
	{ "per-pid", no_argument, NULL, OPT_PERPID },
	{ "call-graph", required_argument, NULL, OPT_CALLGRAPH },
	{ "build-id-mmap", no_argument, NULL, OPT_BUILDID_MMAP },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int wake_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_stop, got_child, got_term;

static void on_signal(int sig)
{
	int e = errno;
	if (sig == SIGCHLD)
		got_child = 1;
	else if (sig == SIGTERM)
		got_term = got_stop = 1;
	else
		got_stop = 1;
	char c = 0;
	if (write(wake_pipe[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = e;
}

static void drain_wake(void)
{
	char buf[64];
	while (read(wake_pipe[0], buf, sizeof(buf)) > 0)
		;
}

static void on_record(void *ctx, const struct tally_rec *rec)
{
	tally_agg_record(ctx, rec);
}

static int ncpus_configured(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);
	return n > 0 ? (int)n : 1;
}

static void cpus_string(const bool *set, int n, struct strbuf *sb)
{
	for (int i = 0; i < n; i++) {
		if (!set[i])
			continue;
		int j = i;
		while (j + 1 < n && set[j + 1])
			j++;
		strbuf_addf(sb, "%s%d", sb->len ? "," : "", i);
		if (j > i)
			strbuf_addf(sb, "-%d", j);
		i = j;
	}
}

struct child {
	pid_t pid;
	int go_fd;  /* write a byte: the child may exec */
	int err_fd; /* read: errno of a failed exec, or EOF when exec succeeded */
};

static int spawn_stopped(char **argv, struct child *c)
{
	int go[2], err[2];
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		return tally_seterr(-errno, "cannot create a pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		return tally_seterr(-errno, "cannot fork: %s", strerror(errno));
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		char b;
		if (read(go[0], &b, 1) != 1)
			_exit(127); /* tally gave up before starting us */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		execvp(argv[0], argv);
		int e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	c->pid = pid;
	c->go_fd = go[1];
	c->err_fd = err[0];
	return 0;
}

int cmd_record(int argc, char **argv)
{
	const char *out = "tally.db";
	bool build_id_mmap = false;
	bool force = false, randomize = true, all = false, per_pid = false, callchain = false;
	uint64_t freq = 0, period = 0;
	uint32_t stack_user = 0;
	const char *events_arg = "cpu-clock", *cpu_arg = NULL, *pid_arg = NULL;
	double duration = 0;
	int ncpus = ncpus_configured();
	int ret = 1;
	bool *cpus = NULL;
	int *pids = NULL;
	size_t npids = 0;
	pid_t *tpids = NULL;
	struct strbuf evnames = STRBUF_INIT;

	optind = 1;
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, "+o:F:c:e:aC:p:gvh", record_opts, NULL)) != -1) {
		switch (opt) {
		case 'o': out = optarg; break;
		case OPT_FORCE: force = true; break;
		case 'F':
			if (tally_parse_u64(optarg, "frequency -F", 1, 1000000, &freq))
				return tally_usage_error("record", "%s", tally_errmsg());
			break;
		case 'c':
			if (tally_parse_u64(optarg, "period -c", 1, UINT64_MAX >> 2, &period))
				return tally_usage_error("record", "%s", tally_errmsg());
			break;
		case OPT_NORAND: randomize = false; break;
		case 'e': events_arg = optarg; break;
		case 'a': all = true; break;
		case 'C': cpu_arg = optarg; break;
		case 'p': pid_arg = optarg; break;
		case OPT_DURATION:
			if (tally_parse_duration(optarg, "--duration", &duration))
				return tally_usage_error("record", "%s", tally_errmsg());
			break;
		case OPT_PERPID: per_pid = true; break;
		case 'g': callchain = true; break;
		case OPT_CALLGRAPH:
			if (!strcmp(optarg, "fp")) {
				callchain = true;
			} else if (!strncmp(optarg, "dwarf", 5) && (!optarg[5] || optarg[5] == ',')) {
				callchain = true;
				stack_user = 16384;
				if (optarg[5] == ',') {
					uint64_t sz;
					if (tally_parse_u64(optarg + 6, "dwarf stack size", 64, 65528, &sz))
						return tally_usage_error("record", "%s", tally_errmsg());
					stack_user = (uint32_t)(sz & ~7ULL);
				}
			} else {
				return tally_usage_error("record", "unknown call-graph mode '%s' (known: fp, dwarf[,SIZE])", optarg);
			}
			break;
		case OPT_BUILDID_MMAP: build_id_mmap = true; break;
		case 'v': tally_verbose = 1; break;
		case 'h': fputs(record_usage, stdout); return 0;
		case '?':
		default:
			if (optopt && optopt < 256)
				return tally_usage_error("record", "option '-%c' %s", optopt,
							 strchr("oFcepC", optopt) ? "needs a value" : "is unknown");
			return tally_usage_error("record", "unknown option '%s'", argv[optind - 1]);
		}
	}
	char **cmd = argv + optind;
	int ncmd = argc - optind;
	if (freq && period)
		return tally_usage_error("record", "-F and -c both set the sampling rate: give one");
	if (!freq && !period)
		freq = 999;
	if (ncmd && (all || pid_arg))
		return tally_usage_error("record", "give a COMMAND, or -a, or -p, not several");
	if (all && pid_arg)
		return tally_usage_error("record", "-a and -p cannot be combined");
	if (!ncmd && !all && !pid_arg)
		return tally_usage_error("record", "nothing to profile: give a COMMAND (after --), -a or -p PID");

	/* events */
	const struct tally_event_desc *evs[16];
	int nev = 0;
	{
		char *list = xstrdup(events_arg), *save = NULL;
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			const struct tally_event_desc *e = tally_event_find(t);
			if (!e) {
				tally_error("unknown event '%s' (see 'tally events' for the list)", t);
				free(list);
				ret = 2;
				goto out_early;
			}
			for (int i = 0; i < nev; i++)
				if (evs[i] == e) {
					tally_error("event '%s' is given twice", t);
					free(list);
					ret = 2;
					goto out_early;
				}
			if (nev == (int)ARRAY_SIZE(evs)) {
				tally_error("too many events (at most %zu)", ARRAY_SIZE(evs));
				free(list);
				ret = 2;
				goto out_early;
			}
			if (tally_event_probe(e)) {
				tally_error("%s", tally_errmsg());
				free(list);
				ret = 1;
				goto out_early;
			}
			evs[nev++] = e;
			strbuf_addf(&evnames, "%s%s", evnames.len ? "," : "", e->name);
		}
		free(list);
		if (!nev) {
			ret = tally_usage_error("record", "no event given to -e");
			goto out_early;
		}
	}
	/* rate: the kernel caps sampling frequency */
	{
		FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re");
		unsigned long long maxrate = 0;
		if (f) {
			if (fscanf(f, "%llu", &maxrate) != 1)
				maxrate = 0;
			fclose(f);
		}
		if (freq && maxrate && freq > maxrate) {
			tally_error("-F %" PRIu64 " is above kernel.perf_event_max_sample_rate (%llu) (use a lower -F, or raise the sysctl)",
				    freq, maxrate);
			ret = 2;
			goto out_early;
		}
	}

	cpus = xcalloc((size_t)ncpus, sizeof(bool));
	if (cpu_arg) {
		if (tally_parse_cpulist(cpu_arg, ncpus, cpus)) {
			ret = tally_usage_error("record", "%s", tally_errmsg());
			goto out_early;
		}
	} else {
		for (int i = 0; i < ncpus; i++)
			cpus[i] = true;
	}
	/* offline CPUs cannot be sampled: keep the online ones */
	{
		struct strbuf on = STRBUF_INIT;
		if (strbuf_read_file(&on, "/sys/devices/system/cpu/online", 0) == 0) {
			on.buf[strcspn(on.buf, "\n")] = '\0';
			bool *online = xcalloc((size_t)ncpus, sizeof(bool));
			if (tally_parse_cpulist(on.buf, ncpus, online) == 0) {
				bool any = false;
				for (int i = 0; i < ncpus; i++) {
					if (cpu_arg && cpus[i] && !online[i]) {
						tally_error("CPU %d is offline (choose online CPUs with -C)", i);
						free(online);
						strbuf_release(&on);
						ret = 2;
						goto out_early;
					}
					cpus[i] = cpus[i] && online[i];
					any = any || cpus[i];
				}
				if (!any)
					for (int i = 0; i < ncpus; i++)
						cpus[i] = online[i];
			}
			free(online);
		}
		strbuf_release(&on);
	}
	if (pid_arg) {
		if (tally_parse_intlist(pid_arg, "pid list -p", &pids, &npids)) {
			ret = tally_usage_error("record", "%s", tally_errmsg());
			goto out_early;
		}
		for (size_t i = 0; i < npids; i++)
			if (kill(pids[i], 0) < 0 && errno == ESRCH) {
				tally_error("cannot attach to pid %d: no such process", pids[i]);
				ret = 1;
				goto out_early;
			}
	}
	if (tally_db_check_target(out, force)) {
		tally_error("%s", tally_errmsg());
		ret = 1;
		goto out_early;
	}

	/* signals: a self-pipe wakes the poll loop */
	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		tally_die("cannot create a pipe: %s", strerror(errno));
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (ncmd) {
		/* the terminal's ^C reaches the command itself; tally waits for it to end */
		signal(SIGINT, SIG_IGN);
	} else {
		sigaction(SIGINT, &sa, NULL);
	}

	struct child child = { -1, -1, -1 };
	struct tally_collect_opts co;
	memset(&co, 0, sizeof(co));
	co.events = evs;
	co.nevents = nev;
	co.freq = period ? 0 : freq;
	co.period = period;
	co.randomize = randomize;
	co.callchain = callchain;
	co.stack_user = stack_user;
	co.build_id_mmap = build_id_mmap;
	co.cpus = cpus;
	co.ncpus = ncpus;
	co.wake_fd = wake_pipe[0];
	if (ncmd) {
		if (spawn_stopped(cmd, &child)) {
			tally_error("%s", tally_errmsg());
			goto out_early;
		}
		tpids = xmalloc(sizeof(pid_t));
		tpids[0] = child.pid;
		co.target = TALLY_TARGET_CHILD;
		co.pids = tpids;
		co.npids = 1;
	} else if (pid_arg) {
		tpids = xmalloc(npids * sizeof(pid_t));
		for (size_t i = 0; i < npids; i++)
			tpids[i] = pids[i];
		co.target = TALLY_TARGET_PIDS;
		co.pids = tpids;
		co.npids = npids;
	} else {
		co.target = TALLY_TARGET_SYSTEM;
	}

	struct tally_collector *col = NULL;
	if (tally_collector_open(&col, &co)) {
		tally_error("%s", tally_errmsg());
		if (child.pid > 0) {
			kill(child.pid, SIGKILL);
			waitpid(child.pid, NULL, 0);
		}
		goto out_early;
	}
	struct tally_agg agg;
	tally_agg_init(&agg, nev, per_pid, co.target == TALLY_TARGET_SYSTEM);
	agg.dwarf = stack_user != 0;
	if (co.target == TALLY_TARGET_PIDS)
		for (size_t i = 0; i < npids; i++)
			tally_agg_load_procfs(&agg, pids[i]);

	struct strbuf cpustr = STRBUF_INIT;
	cpus_string(cpus, ncpus, &cpustr);
	for (int e = 0; e < nev; e++) {
		uint64_t mp = tally_collector_mean_period(col, e);
		if (mp)
			tally_info("event %s: period %" PRIu64 "%s%s on CPUs %s", evs[e]->name, mp, evs[e]->time_based ? " ns" : "",
				   randomize ? " (randomized +-12.5%)" : "", cpustr.buf);
		else
			tally_info("event %s: %" PRIu64 " Hz (kernel-adjusted period) on CPUs %s", evs[e]->name, freq, cpustr.buf);
	}

	double wall_start = tally_now_wall(), mono_start = tally_now_mono();
	if (tally_collector_enable(col)) {
		tally_error("%s", tally_errmsg());
		goto out_col;
	}
	int status = 0;
	bool child_done = false;
	if (child.pid > 0) {
		char b = 1;
		if (write(child.go_fd, &b, 1) != 1)
			tally_die("cannot start '%s': %s", cmd[0], strerror(errno));
		close(child.go_fd);
		int e = 0;
		ssize_t n;
		while ((n = read(child.err_fd, &e, sizeof(e))) < 0 && errno == EINTR)
			;
		close(child.err_fd);
		if (n == (ssize_t)sizeof(e)) {
			waitpid(child.pid, NULL, 0);
			tally_error("cannot run '%s': %s%s", cmd[0], strerror(e),
				    e == ENOENT ? " (check the name and PATH)" : "");
			ret = 127;
			goto out_agg;
		}
		tally_info("started '%s' as pid %d", cmd[0], (int)child.pid);
	}
	tally_info("recording into '%s'", out);

	const int tick_ms = randomize ? 50 : 100;
	for (;;) {
		int n = tally_collector_poll(col, tick_ms, on_record, &agg);
		if (n < 0) {
			tally_error("%s", tally_errmsg());
			break;
		}
		drain_wake();
		tally_agg_identify_new(&agg);
		tally_agg_collect_dead(&agg);
		if (child.pid > 0 && got_term && !child_done)
			kill(child.pid, SIGTERM);
		if (child.pid > 0 && !child_done) {
			pid_t w = waitpid(child.pid, &status, WNOHANG);
			if (w == child.pid)
				child_done = true;
		}
		if (child_done)
			break;
		if (!ncmd && got_stop)
			break;
		if (duration > 0 && tally_now_mono() - mono_start >= duration)
			break;
		if (pid_arg) {
			bool alive = false;
			for (size_t i = 0; i < npids; i++)
				alive = alive || kill(pids[i], 0) == 0 || errno != ESRCH;
			if (!alive) {
				tally_info("every attached process has exited");
				break;
			}
		}
	}
	if (child.pid > 0 && !child_done) {
		/* --duration ended a command: stop it as a user would, then collect it */
		kill(child.pid, SIGTERM);
		waitpid(child.pid, &status, 0);
	}
	tally_collector_disable(col);
	tally_collector_poll(col, 0, on_record, &agg);
	tally_agg_identify_new(&agg);
	double mono_stop = tally_now_mono();
	tally_agg_snapshot_jit(&agg);
	tally_agg_tasks(&agg);

	/* session metadata */
	struct tally_meta s = { 0 };
	struct utsname un;
	uname(&un);
	tally_meta_set(&s, "format-version", "%d", TALLY_FORMAT_VERSION);
	tally_meta_set(&s, "tool", "tally %s", TALLY_VERSION);
	tally_meta_set(&s, "host", "%s", un.nodename);
	tally_meta_set(&s, "kernel-release", "%s", un.release);
	tally_meta_set(&s, "arch", "%s", un.machine);
	if (ncmd) {
		struct strbuf cl = STRBUF_INIT;
		for (int i = 0; i < ncmd; i++)
			strbuf_addf(&cl, "%s%s", i ? " " : "", cmd[i]);
		tally_meta_set(&s, "target", "command");
		tally_meta_set(&s, "command", "%s", cl.buf);
		strbuf_release(&cl);
	} else if (pid_arg) {
		tally_meta_set(&s, "target", "pids %s", pid_arg);
	} else {
		tally_meta_set(&s, "target", "system");
	}
	tally_meta_set(&s, "cpus", "%s", cpustr.buf);
	tally_meta_set(&s, "events", "%s", evnames.buf);
	if (period)
		tally_meta_set(&s, "sampling", "period %" PRIu64, period);
	else
		tally_meta_set(&s, "sampling", "frequency %" PRIu64, freq);
	{
		/* only a fixed mean period can be randomized: -F on a counting event lets the kernel adapt it */
		struct strbuf rz = STRBUF_INIT, pk = STRBUF_INIT;
		for (int e = 0; e < nev; e++) {
			bool fixed = tally_collector_mean_period(col, e) != 0;
			strbuf_addf(&rz, "%s%s", e ? "," : "", randomize && fixed ? "yes" : "no");
			strbuf_addf(&pk, "%s%s", e ? "," : "", fixed ? "fixed" : "adaptive");
		}
		tally_meta_set(&s, "randomized", "%s", rz.buf);
		tally_meta_set(&s, "period-kind", "%s", pk.buf);
		strbuf_release(&rz);
		strbuf_release(&pk);
	}
	{
		struct strbuf pm = STRBUF_INIT, pmin = STRBUF_INIT, pmax = STRBUF_INIT;
		for (int e = 0; e < nev; e++) {
			uint64_t mn, mx;
			double mean;
			tally_collector_periods(col, e, &mn, &mx, &mean);
			strbuf_addf(&pm, "%s%.0f", e ? "," : "", mean);
			strbuf_addf(&pmin, "%s%" PRIu64, e ? "," : "", mn);
			strbuf_addf(&pmax, "%s%" PRIu64, e ? "," : "", mx);
		}
		struct strbuf iv = STRBUF_INIT;
		for (int e = 0; e < nev; e++) {
			uint64_t a10, a50, a90;
			tally_collector_intervals(col, e, &a10, &a50, &a90);
			strbuf_addf(&iv, "%s%" PRIu64 "/%" PRIu64 "/%" PRIu64, e ? "," : "", a10, a50, a90);
		}
		tally_meta_set(&s, "interval-p10-p50-p90", "%s", iv.buf);
		strbuf_release(&iv);
		tally_meta_set(&s, "period-mean", "%s", pm.buf);
		tally_meta_set(&s, "period-min", "%s", pmin.buf);
		tally_meta_set(&s, "period-max", "%s", pmax.buf);
		strbuf_release(&pm);
		strbuf_release(&pmin);
		strbuf_release(&pmax);
	}
	tally_meta_set(&s, "per-pid", "%s", per_pid ? "yes" : "no");
	if (stack_user) {
		tally_meta_set(&s, "call-graph", "dwarf");
		tally_meta_set(&s, "stack-size", "%u", stack_user);
		tally_meta_set(&s, "dwarf-unwinds", "%" PRIu64, agg.uw_samples);
		tally_meta_set(&s, "dwarf-stopped-early", "%" PRIu64, agg.uw_short);
		tally_meta_set(&s, "dwarf-joined-fp", "%" PRIu64, agg.uw_joined);
		tally_meta_set(&s, "dwarf-stop-reasons", "stack copy too small %" PRIu64 ", no CFI or unreadable frame %" PRIu64
			       ", depth limit %" PRIu64, agg.uw_why_stack, agg.uw_why_cfi, agg.uw_why_depth);
	} else {
		tally_meta_set(&s, "call-graph", "%s", callchain ? "fp" : "none");
	}
	if (stack_user) {
		/* the DWARF unwinder's own depth limit (user frames) */
		tally_meta_set(&s, "max-stack", "%zu", ARRAY_SIZE(agg.scratch_pcs));
	} else if (callchain) {
		struct strbuf ms = STRBUF_INIT;
		if (strbuf_read_file(&ms, "/proc/sys/kernel/perf_event_max_stack", 64) == 0)
			tally_meta_set(&s, "max-stack", "%d", atoi(ms.buf));
		strbuf_release(&ms);
	}
	char ts[32];
	tally_format_utc(wall_start, ts, sizeof(ts));
	tally_meta_set(&s, "start-time", "%s", ts);
	tally_format_utc(wall_start + (mono_stop - mono_start), ts, sizeof(ts));
	tally_meta_set(&s, "stop-time", "%s", ts);
	tally_meta_set(&s, "duration", "%.3f", mono_stop - mono_start);
	if (agg.jit_untrusted)
		tally_meta_set(&s, "jit-untrusted", "%u", agg.jit_untrusted);
	for (size_t i = 0; i < agg.njit_warnings; i++) {
		/* the report repeats them: the database is where users look later */
		char key[48];
		snprintf(key, sizeof(key), "jit-warning-%zu", i + 1);
		tally_meta_set(&s, key, "%s", agg.jit_warnings[i]);
		tally_warn("%s", agg.jit_warnings[i]);
	}
	if (child.pid > 0)
		tally_meta_set(&s, "exit-status", "%d",
			       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0));

	int wr = tally_db_write(out, force, &agg, &s);
	if (wr == -EEXIST && !force) {
		/* someone created it while we recorded: keep the data under another name */
		struct strbuf alt = STRBUF_INIT;
		strbuf_addf(&alt, "%s.%d", out, (int)getpid());
		tally_warn("'%s' appeared while recording; writing '%s' instead", out, alt.buf);
		wr = tally_db_write(alt.buf, false, &agg, &s);
		strbuf_release(&alt);
	}
	if (wr) {
		tally_error("%s", tally_errmsg());
		ret = 1;
	} else {
		uint64_t total = 0;
		for (int e = 0; e < nev; e++)
			total += agg.samples[e];
		fprintf(stderr, "tally: wrote '%s': %" PRIu64 " samples, %" PRIu64 " lost (see 'tally report -i %s')\n", out,
			total, agg.lost, out);
		if (agg.lost)
			tally_warn("%" PRIu64 " samples were lost: lower -F, or the system is too busy", agg.lost);
		if (child.pid > 0)
			ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		else
			ret = 0;
	}
	tally_meta_release(&s);
out_agg:
	tally_agg_release(&agg);
out_col:
	strbuf_release(&cpustr);
	tally_collector_free(col);
out_early:
	free(tpids);
	free(cpus);
	free(pids);
	strbuf_release(&evnames);
	return ret;
}
