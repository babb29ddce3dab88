/*
 * rusage COMMAND [ARGS...]: runs COMMAND as its child and prints, after it
 * ends, the CPU time the kernel accounted to it and to itself:
 *
 *   info rusage_ns N child_ns C self_ns S
 *
 * N = C + S, each user plus system time (getrusage: RUSAGE_CHILDREN, the
 * waited-for child and its own waited-for descendants, and RUSAGE_SELF), in
 * nanoseconds (the kernel keeps microseconds).  What a profiler of this
 * command should measure as its CPU time.  Exits with the child's status.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static long long ns(const struct rusage *ru)
{
	return (ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000000LL +
	       (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1000LL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s COMMAND [ARGS...]\n", argv[0]);
		return 2;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		perror(argv[1]);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0) {
		perror("waitpid");
		return 2;
	}
	struct rusage child, self;
	getrusage(RUSAGE_CHILDREN, &child);
	getrusage(RUSAGE_SELF, &self);
	printf("info rusage_ns %lld child_ns %lld self_ns %lld\n", ns(&child) + ns(&self), ns(&child), ns(&self));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
