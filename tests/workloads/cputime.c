/*
 * cputime CMD [ARG...]: runs CMD and prints the CPU time the kernel accounted
 * to it and its descendants (getrusage RUSAGE_CHILDREN, user + system) as
 * `info cpu_ns N`, so that a profile of the whole run can be compared with
 * what the kernel measured, and how often the kernel took the CPU from it
 * (involuntary context switches) as `info preempted N`. Exits with CMD's
 * status.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: cputime CMD [ARG...]\n");
		return 2;
	}
	pid_t p = fork();
	if (p < 0)
		return 1;
	if (!p) {
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	int st;
	if (waitpid(p, &st, 0) < 0)
		return 1;
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	long long ns = ((long long)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
		       ((long long)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
	printf("info cpu_ns %lld\n", ns);
	printf("info preempted %ld\n", ru.ru_nivcsw);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
