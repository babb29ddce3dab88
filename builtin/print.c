/* The printers: everything tally says on stderr goes through here. They live
 * with the builtins, outside libtally, which never prints or exits (it hands
 * errors back through tally_seterr and warnings through struct
 * tally_warnings); the unit tests link libtally without this file, so a call
 * from lib/ to any of these fails to link. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/report.h"
#include "tally/symbols.h"
#include "tally/symopts.h"
#include "tally/util.h"

int tally_verbose;

/* ---- progress: one line on a terminal's stderr, rewritten in place ----
 *
 * What the command is doing (the resolver's symbol work, or a phase the
 * builtin names) with the seconds it has taken: quiet for the first half
 * second, so a quick command shows nothing, then redrawn by a ticker thread
 * twice a second, so the seconds go on while the core works without a word
 * (a big flame graph, a pprof file). Every line on stderr goes through the
 * lock, so an error never lands in the middle of a progress line. */

static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress_cond = PTHREAD_COND_INITIALIZER;
static struct {
	bool on;       /* attached: stderr is a terminal */
	bool shown;    /* a progress line is on the screen */
	bool ticking, stop;
	pthread_t ticker;
	double start, last, said; /* said: when the core last named what it does */
	double after;             /* quiet for this long (0.5 s; TALLY_PROGRESS_AFTER) */
	char what[160];           /* what the core does (symbol work) */
	char phase[96];           /* the phase the builtin named */
} progress;

/* (with the lock held) */
static void progress_clear(void)
{
	if (progress.shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		progress.shown = false;
	}
}

/* (with the lock held) */
static void progress_draw(double now)
{
	/* the core's words while they are fresh, else the phase */
	const char *w = progress.what[0] && (!progress.phase[0] || now - progress.said < 1.0)
				? progress.what
				: progress.phase;
	if (!w[0] || now - progress.start < progress.after)
		return;
	progress.last = now;
	fprintf(stderr, "\r\033[Ktally: %s ... %.0f s", w, now - progress.start);
	fflush(stderr);
	progress.shown = true;
}

static void *progress_tick(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&progress_lock);
	while (!progress.stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 500 * 1000 * 1000;
		if (ts.tv_nsec >= 1000 * 1000 * 1000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000 * 1000 * 1000;
		}
		pthread_cond_timedwait(&progress_cond, &progress_lock, &ts);
		if (!progress.stop)
			progress_draw(tally_now_mono());
	}
	pthread_mutex_unlock(&progress_lock);
	return NULL;
}

static void progress_set(const char *what, bool phase)
{
	pthread_mutex_lock(&progress_lock);
	if (phase)
		progress.what[0] = '\0';
	if (!what) {
		progress.what[0] = '\0';
		if (phase)
			progress.phase[0] = '\0';
		progress_clear();
	} else {
		double now = tally_now_mono();
		if (phase) {
			snprintf(progress.phase, sizeof(progress.phase), "%s", what);
		} else {
			snprintf(progress.what, sizeof(progress.what), "%s", what);
			progress.said = now;
		}
		/* at most ten times a second from the core's calls */
		if (!progress.shown || now - progress.last >= 0.1)
			progress_draw(now);
	}
	pthread_mutex_unlock(&progress_lock);
}

static void progress_cb(void *ctx, const char *what)
{
	(void)ctx;
	progress_set(what, false);
}

void tally_progress_start(void)
{
	if (progress.on || !isatty(STDERR_FILENO))
		return;
	progress.on = true;
	progress.stop = false;
	/* (the tests shorten the quiet time, to see the line of work that is quick) */
	const char *a = getenv("TALLY_PROGRESS_AFTER");
	char *end = NULL;
	progress.after = a && *a ? strtod(a, &end) : 0.5;
	if (!a || !*a || *end || !(progress.after >= 0) || progress.after > 3600)
		progress.after = 0.5;
	progress.start = tally_now_mono();
	progress.what[0] = progress.phase[0] = '\0';
	/* without the ticker the line still shows, when the core speaks */
	progress.ticking = pthread_create(&progress.ticker, NULL, progress_tick, NULL) == 0;
}

void tally_progress_attach(struct tally_resolver_opts *ro)
{
	tally_progress_start();
	if (!progress.on)
		return;
	ro->progress = progress_cb;
	ro->progress_ctx = NULL;
}

void tally_progress_say(const char *what)
{
	if (progress.on)
		progress_set(what, true);
}

void tally_progress_done(void)
{
	if (!progress.on)
		return;
	pthread_mutex_lock(&progress_lock);
	progress.stop = true;
	progress.what[0] = progress.phase[0] = '\0';
	progress_clear();
	pthread_cond_signal(&progress_cond);
	pthread_mutex_unlock(&progress_lock);
	if (progress.ticking)
		pthread_join(progress.ticker, NULL);
	progress.ticking = false;
	progress.on = false;
}

static void vreport(const char *prefix, const char *fmt, va_list ap)
{
	char line[2048];
	vsnprintf(line, sizeof(line), fmt, ap);
	/* errors are one line by contract */
	for (char *c = line; *c; c++)
		if (*c == '\n')
			*c = ' ';
	pthread_mutex_lock(&progress_lock);
	progress_clear();
	fprintf(stderr, "tally: %s%s\n", prefix, line);
	pthread_mutex_unlock(&progress_lock);
}

void tally_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap);
	va_end(ap);
}

void tally_error_last(void)
{
	tally_error("%s", tally_errmsg());
}

int tally_symopts_ready(struct tally_symopts *so, struct tally_resolver_opts *ro)
{
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	int r = tally_symopts_prepare(so, ro, &w);
	tally_print_warnings(&w);
	if (r) {
		tally_error_last();
		return 1;
	}
	return 0;
}

void tally_say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap);
	va_end(ap);
}

void tally_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("warning: ", fmt, ap);
	va_end(ap);
}

void tally_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap);
	va_end(ap);
	exit(1);
}

void tally_info(const char *fmt, ...)
{
	if (!tally_verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&progress_lock);
	progress_clear();
	fputs("tally: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	pthread_mutex_unlock(&progress_lock);
	va_end(ap);
}

void tally_print_warnings(struct tally_warnings *w)
{
	for (size_t i = 0; i < w->n; i++)
		tally_warn("%s", w->v[i]);
	tally_warnings_release(w);
}

_Noreturn static void out_of_memory(size_t n)
{
	fprintf(stderr, "tally: out of memory allocating %zu bytes\n", n);
	exit(1);
}

void tally_print_init(void)
{
	tally_set_oom_handler(out_of_memory);
}

void tally_warn_jit(const struct tally_db *db)
{
	struct tally_warnings w = TALLY_WARNINGS_INIT;
	tally_report_jit_warnings(db, &w);
	tally_print_warnings(&w);
}
