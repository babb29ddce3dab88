/*
 * forker [N] [MS] [EXEC_MS]: a process tree.  The parent forks N children
 * (1-4, default 3); child i runs child_fn_i for MS milliseconds of CPU time
 * (default 200) and the last child also forks a grandchild that runs
 * grandchild_fn for MS.  One more child execs split_funcs (from this
 * program's own directory) for EXEC_MS (default 200; 0 = no exec).  The
 * parent waits for all of them.
 *
 * Output: `pid`, `child child_fn_I PID`, `child grandchild_fn PID`, `exec PID`,
 * the exec'd split_funcs's own `truth work_*` lines, then
 * `truth child_fn_I|grandchild_fn PERCENT` (percent of the forked functions
 * together, each timed by its own process's CPU clock and sent up a pipe) and
 * `truth exec_split_funcs PERCENT` (the exec'd process's CPU time from wait4,
 * percent of that plus the forked functions).
 */
#include "workload.h"

#include <limits.h>
#include <sys/wait.h>

#define MAX_CHILDREN 4

static double target_ms;

#define CHILD_FN(name, salt)                                                   \
	double name(void);                                                     \
	WL_NOINLINE double name(void)                                          \
	{                                                                      \
		uint64_t x = 0x8ebc6af09c88c6e3u + (salt);                     \
		double start = wl_thread_ms(), now;                            \
                                                                               \
		do {                                                           \
			WL_SPIN(x, 4 * WL_UNIT, 31 + 2 * (salt));              \
			now = wl_thread_ms();                                  \
		} while (now - start < target_ms);                             \
		wl_sink += x;                                                  \
		return now - start;                                            \
	}

CHILD_FN(child_fn_0, 0)
CHILD_FN(child_fn_1, 1)
CHILD_FN(child_fn_2, 2)
CHILD_FN(child_fn_3, 3)
CHILD_FN(grandchild_fn, 4)

static double (*const child_fns[MAX_CHILDREN])(void) = {
	child_fn_0, child_fn_1, child_fn_2, child_fn_3,
};

/* A measurement sent from a descendant to the parent. */
struct report {
	int index;	/* 0..MAX_CHILDREN-1, MAX_CHILDREN for the grandchild */
	double ms;
};

static void send(int fd, int index, double ms)
{
	struct report r = { index, ms };

	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(3);
}

static pid_t start_child(int fd, int index, int with_grandchild)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid > 0) {
		printf("child child_fn_%d %ld\n", index, (long)pid);
		return pid;
	}
	if (with_grandchild) {
		pid_t g = fork();

		if (g < 0)
			_exit(3);
		if (g == 0) {
			send(fd, MAX_CHILDREN, grandchild_fn());
			_exit(0);
		}
		printf("child grandchild_fn %ld\n", (long)g);
		fflush(stdout);
		send(fd, index, child_fns[index]());
		waitpid(g, NULL, 0);
		_exit(0);
	}
	send(fd, index, child_fns[index]());
	_exit(0);
}

static pid_t start_exec(double exec_ms)
{
	char self[PATH_MAX], prog[PATH_MAX + 16], arg[32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;
	pid_t pid;

	if (n < 0) {
		perror("readlink /proc/self/exe");
		exit(2);
	}
	self[n] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	snprintf(prog, sizeof(prog), "%s/split_funcs", self);
	snprintf(arg, sizeof(arg), "%g", exec_ms);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		execl(prog, "split_funcs", arg, (char *)NULL);
		perror(prog);
		_exit(127);
	}
	printf("exec %ld\n", (long)pid);
	return pid;
}

int main(int argc, char **argv)
{
	int n = (int)wl_arg(argc, argv, 1, 3);
	double exec_ms = wl_arg(argc, argv, 3, 200);
	double spent[MAX_CHILDREN + 1] = { 0 }, sum = 0, exec_cpu = 0;
	pid_t exec_pid = 0;
	struct report r;
	struct rusage ru;
	int fds[2], status, failed = 0;
	char name[32];
	pid_t pid;

	target_ms = wl_arg(argc, argv, 2, 200);
	if (n < 1 || n > MAX_CHILDREN) {
		fprintf(stderr, "%s: child count must be 1-%d\n", argv[0], MAX_CHILDREN);
		return 2;
	}
	if (pipe(fds)) {
		perror("pipe");
		return 2;
	}
	wl_print_pid();
	for (int i = 0; i < n; i++)
		start_child(fds[1], i, i == n - 1);
	if (exec_ms > 0)
		exec_pid = start_exec(exec_ms);
	fflush(stdout);
	close(fds[1]);
	while (read(fds[0], &r, sizeof(r)) == (ssize_t)sizeof(r))
		spent[r.index] = r.ms;
	while ((pid = wait4(-1, &status, 0, &ru)) > 0) {
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
		if (pid == exec_pid)
			exec_cpu = wl_tv_ms(ru.ru_utime) + wl_tv_ms(ru.ru_stime);
	}
	if (failed) {
		fprintf(stderr, "%s: a child failed\n", argv[0]);
		return 1;
	}
	for (int i = 0; i <= MAX_CHILDREN; i++)
		sum += spent[i];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "child_fn_%d", i);
		wl_truth(name, spent[i], sum);
	}
	wl_truth("grandchild_fn", spent[MAX_CHILDREN], sum);
	if (exec_pid)
		wl_truth("exec_split_funcs", exec_cpu, exec_cpu + sum);
	return 0;
}
