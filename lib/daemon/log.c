/* The daemon's log writer (include/tally/daemon.h): lines with the time and
 * the pid, to a stream its caller chose (stderr in the foreground) or to a
 * file that is rotated at 1 MiB, one old copy kept, so the log never grows
 * without bound. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tally/daemon.h"

#define LOG_MAX (1u << 20)

void tally_daemon_logfile_init(struct tally_daemon_logfile *lg, FILE *stream)
{
	memset(lg, 0, sizeof(*lg));
	lg->f = stream;
}

int tally_daemon_logfile_open(struct tally_daemon_logfile *lg, const char *path)
{
	FILE *f = fopen(path, "ae");
	if (!f)
		return tally_seterr(-errno, "cannot open the log '%s': %s", path, strerror(errno));
	if (lg->path)
		fclose(lg->f);
	free(lg->path);
	lg->path = xstrdup(path);
	lg->f = f;
	return 0;
}

void tally_daemon_logfile_reopen(struct tally_daemon_logfile *lg)
{
	if (!lg->path)
		return;
	FILE *f = fopen(lg->path, "ae");
	if (f) {
		fclose(lg->f);
		lg->f = f;
	}
}

void tally_daemon_logfile_line(void *ctx, const char *line)
{
	struct tally_daemon_logfile *lg = ctx;
	if (!lg->f)
		return;
	if (lg->path && ftell(lg->f) > (long)LOG_MAX) {
		struct strbuf old = STRBUF_INIT;
		strbuf_addf(&old, "%s.1", lg->path);
		rename(lg->path, old.buf);
		strbuf_release(&old);
		tally_daemon_logfile_reopen(lg);
	}
	char ts[32];
	tally_format_utc(tally_now_wall(), ts, sizeof(ts));
	fprintf(lg->f, "%s tally daemon[%d]: %s\n", ts, (int)getpid(), line);
	fflush(lg->f);
}

void tally_daemon_logfile_printf(struct tally_daemon_logfile *lg, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	tally_daemon_logfile_line(lg, sb.buf ? sb.buf : "");
	strbuf_release(&sb);
}

void tally_daemon_logfile_release(struct tally_daemon_logfile *lg)
{
	if (lg->path && lg->f)
		fclose(lg->f);
	free(lg->path);
	memset(lg, 0, sizeof(*lg));
}
