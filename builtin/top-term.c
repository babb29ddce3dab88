/* tally top's terminal and signals: the alternate screen and raw keys,
 * restored at exit and around ^Z; signals and keys as wake-ups of one epoll
 * set (a pipe the handler writes to). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "builtin/top.h"

static int sig_pipe[2] = { -1, -1 };
volatile sig_atomic_t top_got_quit, top_got_winch, top_got_tstp;

static void on_signal(int sig)
{
	int e = errno;
	if (sig == SIGWINCH)
		top_got_winch = 1;
	else if (sig == SIGTSTP)
		top_got_tstp = 1;
	else if (sig != SIGCHLD)
		top_got_quit = 1;
	char c = 0;
	if (sig_pipe[1] >= 0 && write(sig_pipe[1], &c, 1) < 0) {
		/* full: a wake-up is pending */
	}
	errno = e;
}

static struct termios saved_tio;
static bool tio_saved;
static int tty_out = -1;
static int stdin_flags = -1; /* stdin's file status flags before top made it non-blocking */

void top_term_restore(void)
{
	if (tty_out >= 0) {
		static const char leave[] = "\033[0m\033[?25h\033[?1049l";
		if (write(tty_out, leave, sizeof(leave) - 1) < 0) {
			/* nothing to do: the terminal is gone */
		}
	}
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
		tio_saved = false;
	}
	/* the open file is the shell's too: the next program must not find it non-blocking */
	if (stdin_flags >= 0) {
		fcntl(STDIN_FILENO, F_SETFL, stdin_flags);
		stdin_flags = -1;
	}
}

void top_term_enter(int in_fd, int out_fd)
{
	tty_out = out_fd;
	if (in_fd >= 0 && tcgetattr(in_fd, &saved_tio) == 0) {
		struct termios t = saved_tio;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		if (tcsetattr(in_fd, TCSANOW, &t) == 0)
			tio_saved = true;
	}
	static const char enter[] = "\033[?1049h\033[?25l\033[2J";
	if (write(out_fd, enter, sizeof(enter) - 1) < 0) {
		/* the screen is drawn anyway */
	}
	static bool registered;
	if (!registered)
		atexit(top_term_restore);
	registered = true;
}

/* ^Z: the shell gets its screen and terminal back while tally top is
 * stopped (sampling stops with it), and the view comes back on SIGCONT. */
void top_suspend(bool keys, int out_fd)
{
	top_got_tstp = 0;
	top_term_restore();
	signal(SIGTSTP, SIG_DFL);
	raise(SIGTSTP);
	/* continued */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTSTP, &sa, NULL);
	top_term_enter(keys ? STDIN_FILENO : -1, out_fd);
	top_got_winch = 1; /* the size may have changed meanwhile: redraw whole */
}

void top_term_size(int fd, int *w, int *h)
{
	struct winsize ws;
	*w = 80;
	*h = 24;
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*w = ws.ws_col;
		*h = ws.ws_row;
	}
}

void top_drain_wakeups(void)
{
	char buf[64];
	while (sig_pipe[0] >= 0 && read(sig_pipe[0], buf, sizeof(buf)) > 0)
		;
}


int top_wakeups_open(bool keys, bool interactive)
{
	int epfd;
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    (epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return tally_seterr(-errno, "cannot make a pipe: %s", strerror(errno));
	struct epoll_event ev = { .events = EPOLLIN };
	epoll_ctl(epfd, EPOLL_CTL_ADD, sig_pipe[0], &ev);
	if (keys) {
		stdin_flags = fcntl(STDIN_FILENO, F_GETFL);
		if (stdin_flags >= 0)
			fcntl(STDIN_FILENO, F_SETFL, stdin_flags | O_NONBLOCK);
		epoll_ctl(epfd, EPOLL_CTL_ADD, STDIN_FILENO, &ev);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (interactive)
		sigaction(SIGTSTP, &sa, NULL);
	return epfd;
}

void top_wakeups_close(int epfd)
{
	if (epfd >= 0)
		close(epfd);
	for (int i = 0; i < 2; i++)
		if (sig_pipe[i] >= 0) {
			close(sig_pipe[i]);
			sig_pipe[i] = -1;
		}
}
