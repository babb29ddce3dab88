/* The printers: everything tally says on stderr goes through here. They live
 * with the builtins, outside libtally, which never prints or exits (it hands
 * errors back through tally_seterr and warnings through struct
 * tally_warnings); the unit tests link libtally without this file, so a call
 * from lib/ to any of these fails to link. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "tally/report.h"
#include "tally/symbols.h"
#include "tally/util.h"

int tally_verbose;

/* ---- progress: one line on a terminal's stderr, rewritten in place ---- */

static struct {
	bool on;       /* attached: stderr is a terminal */
	bool shown;    /* a progress line is on the screen */
	double start, last;
} progress;

static void progress_clear(void)
{
	if (progress.shown) {
		fputs("\r\033[K", stderr);
		progress.shown = false;
	}
}

/* What the core is doing (NULL: done). Quiet for the first half second, so a
 * quick command shows nothing, then at most ten times a second. */
static void progress_cb(void *ctx, const char *what)
{
	(void)ctx;
	double now = tally_now_mono();
	if (!what) {
		progress_clear();
		return;
	}
	if (now - progress.start < 0.5 || (progress.shown && now - progress.last < 0.1))
		return;
	progress.last = now;
	char line[160];
	snprintf(line, sizeof(line), "tally: %s ... %.0f s", what, now - progress.start);
	fprintf(stderr, "\r\033[K%s", line);
	fflush(stderr);
	progress.shown = true;
}

void tally_progress_attach(struct tally_resolver_opts *ro)
{
	if (!isatty(STDERR_FILENO))
		return;
	progress.on = true;
	progress.start = tally_now_mono();
	ro->progress = progress_cb;
	ro->progress_ctx = NULL;
}

void tally_progress_done(void)
{
	progress_clear();
}

static void vreport(const char *prefix, const char *fmt, va_list ap)
{
	char line[2048];
	vsnprintf(line, sizeof(line), fmt, ap);
	/* errors are one line by contract */
	for (char *c = line; *c; c++)
		if (*c == '\n')
			*c = ' ';
	progress_clear();
	fprintf(stderr, "tally: %s%s\n", prefix, line);
}

void tally_error(const char *fmt, ...)
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
	fputs("tally: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
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
