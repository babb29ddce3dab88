/* The printers: everything tally says on stderr goes through here. They live
 * with the builtins, outside libtally, which never prints or exits (it hands
 * errors back through tally_seterr and warnings through struct
 * tally_warnings); the unit tests link libtally without this file, so a call
 * from lib/ to any of these fails to link. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "builtin/builtin.h"
#include "tally/report.h"
#include "tally/util.h"

int tally_verbose;

static void vreport(const char *prefix, const char *fmt, va_list ap)
{
	char line[2048];
	vsnprintf(line, sizeof(line), fmt, ap);
	/* errors are one line by contract */
	for (char *c = line; *c; c++)
		if (*c == '\n')
			*c = ' ';
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
