/* A test shim, loaded with LD_PRELOAD into 'tally record': it stretches the
 * final write of a database so that a test can kill the writer inside it at a
 * point it chooses.  syncfs (every file written, nothing published yet) is
 * delayed by TALLY_SLOW_PUBLISH_MS before it runs, and renameat2 (the swap
 * that publishes the new copy) by the same time after it returns.  Nothing
 * else changes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(void)
{
	const char *s = getenv("TALLY_SLOW_PUBLISH_MS");
	long ms = s ? strtol(s, NULL, 10) : 0;
	if (ms <= 0 || ms > 10000)
		return;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

int syncfs(int fd)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "syncfs");
	pause_ms();
	return real ? real(fd) : 0;
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
	      unsigned int flags)
{
	int (*real)(int, const char *, int, const char *, unsigned int) =
		(int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT,
										 "renameat2");
	if (!real)
		return -1;
	int r = real(olddirfd, oldpath, newdirfd, newpath, flags);
	pause_ms();
	return r;
}
