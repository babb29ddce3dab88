/* Remote hosts over OpenSSH (tally/remote.h, docs/remote.md): the ssh command
 * line, remote commands quoted word by word, the probe, the install of this
 * tally with the libraries it runs on, and pulls that cannot write outside
 * their directory. */
#define _GNU_SOURCE
#include "tally/remote.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <math.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define DEFAULT_SSH "ssh -o BatchMode=yes"
/* what a pull may bring back in all: results, never a disk's worth */
#define PULL_MAX ((size_t)4 << 30)

void tally_sh_quote(struct strbuf *out, const char *s)
{
	strbuf_addch(out, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			strbuf_addstr(out, "'\\''");
		else
			strbuf_addch(out, *s);
	}
	strbuf_addch(out, '\'');
}

int tally_remote_host_ok(const char *host)
{
	size_t n = strlen(host);
	bool ok = n && n <= TALLY_HOST_NAME_MAX && host[0] != '.' && host[0] != '-' && strcmp(host, "all-hosts.db") &&
		  strcmp(host, "all-hosts.txt");
	for (size_t i = 0; ok && i < n; i++)
		ok = (unsigned char)host[i] > 0x20 && host[i] != 0x7f && host[i] != '/';
	if (ok)
		return 0;
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(-EINVAL,
			    "host name '%s' cannot name its directory of results (1 to %d bytes, no '/', blank or control character, "
			    "not beginning with '.' or '-', not all-hosts.db or all-hosts.txt)",
			    tally_excerpt(q, host), TALLY_HOST_NAME_MAX);
}

int tally_remote_hosts_check(char *const *hosts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = tally_remote_host_ok(hosts[i]);
		if (r)
			return r;
		for (size_t k = 0; k < i; k++)
			if (!strcmp(hosts[k], hosts[i])) {
				char q[TALLY_EXCERPT_SIZE];
				return tally_seterr(-EINVAL, "host '%s' is named twice (--host and 'hosts' lines name each host once)",
						    tally_excerpt(q, hosts[i]));
			}
	}
	return 0;
}

static const char *ssh_cmd(const struct tally_remote *r)
{
	if (r->ssh && *r->ssh)
		return r->ssh;
	const char *e = getenv("TALLY_SSH");
	return e && *e ? e : DEFAULT_SSH;
}

char **tally_remote_argv(const struct tally_remote *r, char *const words[])
{
	struct strbuf cmd = STRBUF_INIT, remote = STRBUF_INIT;
	/* the ssh command line is the user's own, read by the local shell (as git
	 * reads GIT_SSH_COMMAND); host and command are its arguments, never text */
	strbuf_addstr(&cmd, ssh_cmd(r));
	if (r->mux_dir) {
		/* one connection per host for the whole job: the user's command line
		 * comes first, so its own -o options win */
		strbuf_addstr(&cmd, " -o ControlMaster=auto -o ControlPersist=60 -o ControlPath=");
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/%%C", r->mux_dir);
		tally_sh_quote(&cmd, p.buf);
		strbuf_release(&p);
	}
	strbuf_addstr(&cmd, " \"$@\"");
	for (size_t i = 0; words[i]; i++) {
		if (i)
			strbuf_addch(&remote, ' ');
		/* "~/..." is the ssh user's home on the host: the tilde alone is
		 * left to the remote shell, the rest quoted as any word */
		if (words[i][0] == '~' && words[i][1] == '/') {
			strbuf_addstr(&remote, "~/");
			tally_sh_quote(&remote, words[i] + 2);
		} else {
			tally_sh_quote(&remote, words[i]);
		}
	}
	char **argv = xcalloc(8, sizeof(char *));
	argv[0] = xstrdup("/bin/sh");
	argv[1] = xstrdup("-c");
	argv[2] = strbuf_detach(&cmd);
	argv[3] = xstrdup("tally-ssh");
	argv[4] = xstrdup("--");
	argv[5] = xstrdup(r->host);
	if (words[0])
		argv[6] = strbuf_detach(&remote);
	else
		strbuf_release(&remote);
	return argv;
}

void tally_remote_mux_close(const struct tally_remote *r)
{
	if (!r->mux_dir)
		return;
	/* ssh -O exit HOST through the same command line: "-O exit" before "--" */
	struct tally_remote q = *r;
	struct strbuf cmd = STRBUF_INIT;
	strbuf_addf(&cmd, "%s -O exit", ssh_cmd(r));
	q.ssh = cmd.buf;
	char **argv = tally_remote_argv(&q, (char *[]){ NULL });
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	tally_remote_argv_free(argv);
	strbuf_release(&cmd);
}

void tally_remote_argv_free(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The last non-empty line of err, for a message: escaped as
 * strbuf_add_excerpt does, at most 1000 bytes of it (a path is not cut). */
#define LAST_LINE_MAX 1000
#define LAST_LINE_SIZE (LAST_LINE_MAX * 4 + 4)
static void last_line(const struct strbuf *err, char q[LAST_LINE_SIZE])
{
	const char *t = err->buf ? err->buf : "";
	size_t len = err->len;
	while (len && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' ' || t[len - 1] == '\t'))
		len--;
	size_t start = len;
	while (start && t[start - 1] != '\n')
		start--;
	struct strbuf sb = STRBUF_INIT;
	strbuf_add_excerpt(&sb, t + start, len - start, LAST_LINE_MAX);
	snprintf(q, LAST_LINE_SIZE, "%s", sb.buf ? sb.buf : "");
	strbuf_release(&sb);
}

/* A name a host sent, for a message: escaped, at most 300 bytes (a path in
 * the results is not cut where a shorter excerpt would). */
#define QNAME_MAX 300
#define QNAME_SIZE (QNAME_MAX * 4 + 4)
static const char *qname(char out[QNAME_SIZE], const char *s)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_add_excerpt(&sb, s, strlen(s), QNAME_MAX);
	snprintf(out, QNAME_SIZE, "%s", sb.buf ? sb.buf : "");
	strbuf_release(&sb);
	return out;
}

int tally_remote_run(const struct tally_remote *r, char *const words[], const void *in, size_t len,
		     struct strbuf *out, size_t max, struct strbuf *err, int *status)
{
	int pin[2], pout[2], perr[2];
	*status = -1;
	if (pipe2(pin, O_CLOEXEC) < 0)
		return tally_seterr(-errno, "cannot run ssh: %s", strerror(errno));
	if (pipe2(pout, O_CLOEXEC) < 0) {
		int e = errno;
		close(pin[0]);
		close(pin[1]);
		return tally_seterr(-e, "cannot run ssh: %s", strerror(e));
	}
	if (pipe2(perr, O_CLOEXEC) < 0) {
		int e = errno;
		close(pin[0]);
		close(pin[1]);
		close(pout[0]);
		close(pout[1]);
		return tally_seterr(-e, "cannot run ssh: %s", strerror(e));
	}
	char **argv = tally_remote_argv(r, words);
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0); /* the shell and ssh: killed together on a timeout */
		signal(SIGPIPE, SIG_DFL);
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(perr[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	int e = errno;
	tally_remote_argv_free(argv);
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	if (pid < 0) {
		close(pin[1]);
		close(pout[0]);
		close(perr[0]);
		return tally_seterr(-e, "cannot run ssh: %s", strerror(e));
	}
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	/* a command that exits before reading all its input must not kill us with
	 * SIGPIPE: blocked in this thread while writing, and any pending one taken */
	sigset_t pipe_set, old_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
	struct strbuf ebuf = STRBUF_INIT;
	struct strbuf *eb = err ? err : &ebuf;
	size_t done = 0;
	int fin = in && len ? pin[1] : -1;
	if (fin < 0)
		close(pin[1]);
	int fo = pout[0], fe = perr[0];
	double limit = r->timeout > 0 ? r->timeout : 60, t0 = mono();
	int ret = 0;
	bool over = false;
	while (fo >= 0 || fe >= 0) {
		struct pollfd p[3];
		int np = 0;
		if (fo >= 0)
			p[np++] = (struct pollfd){ .fd = fo, .events = POLLIN };
		if (fe >= 0)
			p[np++] = (struct pollfd){ .fd = fe, .events = POLLIN };
		if (fin >= 0)
			p[np++] = (struct pollfd){ .fd = fin, .events = POLLOUT };
		double left = limit - (mono() - t0);
		if (left <= 0) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			ret = tally_seterr(-ETIMEDOUT, "host '%s': no answer within %.0f s (ssh killed)", r->host, limit);
			break;
		}
		int k = poll(p, (nfds_t)np, (int)(left * 1000) + 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			ret = tally_seterr(-errno, "host '%s': poll: %s", r->host, strerror(errno));
			kill(-pid, SIGKILL);
			break;
		}
		for (int i = 0; i < np; i++) {
			if (!p[i].revents)
				continue;
			if (p[i].fd == fin) {
				ssize_t n = write(fin, (const char *)in + done, len - done);
				if (n > 0)
					done += (size_t)n;
				if ((n < 0 && errno != EAGAIN && errno != EINTR) || done == len) {
					close(fin);
					fin = -1;
				}
				continue;
			}
			char buf[65536];
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				close(p[i].fd);
				if (p[i].fd == fo)
					fo = -1;
				else
					fe = -1;
				continue;
			}
			if (p[i].fd == fo) {
				if (out && !over) {
					if (out->len + (size_t)n > max) {
						over = true;
						kill(-pid, SIGKILL);
					} else {
						strbuf_add(out, buf, (size_t)n);
					}
				}
			} else if (eb->len < 65536) {
				strbuf_add(eb, buf, (size_t)n);
			}
		}
	}
	if (fin >= 0)
		close(fin);
	if (fo >= 0)
		close(fo);
	if (fe >= 0)
		close(fe);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	struct timespec zero = { 0, 0 };
	while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
		;
	pthread_sigmask(SIG_SETMASK, &old_set, NULL);
	if (!ret && over) {
		char m[32];
		tally_format_size(max, m, sizeof(m));
		ret = tally_seterr(-EFBIG, "host '%s': its answer is larger than %s (stopped)", r->host, m);
	}
	if (!ret)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	strbuf_release(&ebuf);
	return ret;
}

/* An error for a command that ran and failed: ssh's 255 is the connection. */
static int run_failed(const struct tally_remote *r, const char *doing, int status, const struct strbuf *err)
{
	char q[LAST_LINE_SIZE];
	last_line(err, q);
	if (status == 255)
		return tally_seterr(-EHOSTUNREACH, "host '%s': cannot connect (%s)%s", r->host, q[0] ? q : "ssh exited 255",
				    getenv("TALLY_SSH") ? "" : "; set TALLY_SSH for another ssh command line");
	return tally_seterr(-EIO, "host '%s': %s failed (exit %d)%s%s%s", r->host, doing, status, q[0] ? ": '" : "", q,
			    q[0] ? "'" : "");
}

static const char *root_of(const struct tally_remote *r)
{
	return r->root && *r->root ? r->root : TALLY_REMOTE_ROOT;
}

char *tally_remote_dir(const struct tally_remote *r)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s", root_of(r), TALLY_VERSION);
	return strbuf_detach(&sb);
}

/* The root check's refusal (exit 3 of a script, its line on stderr). */
static int root_refused(const struct tally_remote *r, const struct strbuf *err)
{
	char q[LAST_LINE_SIZE];
	last_line(err, q);
	return tally_seterr(-EPERM, "host '%s': %s (tally needs a private directory there: choose another root)", r->host,
			    q[0] ? q : "its root is not private");
}

void tally_remote_facts_release(struct tally_remote_facts *f)
{
	free(f->arch);
	free(f->boot_id);
	free(f->tally);
	memset(f, 0, sizeof(*f));
}

/* The check of the private directory, for the probe's and the install's
 * scripts: $1 ROOT, $2 ROOT/VERSION. Nothing under ROOT runs, and nothing
 * there is trusted, before every component of the path is seen (find -printf
 * reads each without following it): none a symbolic link; ROOT, ROOT/VERSION
 * and what the install put there owned by the ssh user and writable by no one
 * else; every directory above ROOT owned by the user or by root, and writable
 * by no one else unless sticky (/tmp: others cannot rename or remove what is
 * the user's there). A component that does not exist yet is nothing to trust.
 * A failure: one line "'PATH' WHY" on stderr and exit 3. */
#define ROOT_CHECK_SH \
	"bad() { printf \"'%s' %s\\n\" \"$1\" \"$2\" >&2; exit 3; }; " \
	"c() { [ -e \"$1\" ] || [ -L \"$1\" ] || return 0; " \
	"s=$(find \"$1\" -maxdepth 0 -printf '%y %U %m') && [ -n \"$s\" ] || bad \"$1\" 'cannot be examined'; " \
	"set -- \"$1\" \"$2\" $s; " \
	"[ \"$3\" != l ] || bad \"$1\" 'is a symbolic link'; " \
	"[ \"$4\" = \"$u\" ] || { [ \"$2\" = 0 ] && [ \"$4\" = 0 ]; } || bad \"$1\" 'belongs to another user'; " \
	"[ $((0$5 & 022)) = 0 ] || { [ \"$2\" = 0 ] && [ $((0$5 & 01000)) != 0 ]; } || " \
	"bad \"$1\" 'is writable by other users (group or others may write there)'; }; " \
	"chk() { u=$(id -u) || exit 3; case $1 in /*) ;; *) bad \"$1\" 'is not an absolute path'; esac; " \
	"p=$1; while [ \"$p\" != / ] && [ \"$p\" != . ]; do p=$(dirname -- \"$p\"); c \"$p\" 0; done; " \
	"for f in \"$1\" \"$2\" \"$2/tally\" \"$2/tally.bin\" \"$2/lib\"; do c \"$f\" 1; done; }; "

/* The probe's script: its arguments are data ($1 the root, $2 the private
 * directory). tally there is run only once the root is checked. */
static const char probe_sh[] = ROOT_CHECK_SH
			       "chk \"$1\" \"$2\"; "
			       "uname -m; "
			       "cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo -; "
			       "date +%s.%N; "
			       "if [ -x \"$2/tally\" ]; then \"$2/tally\" --version 2>/dev/null | head -n 1; fi; "
			       "echo end";

static char *next_line(char **cur)
{
	char *s = *cur;
	if (!s || !*s)
		return NULL;
	char *nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		*cur = nl + 1;
	} else {
		*cur = s + strlen(s);
	}
	return s;
}

static bool word_ok(const char *s, size_t max)
{
	size_t n = strlen(s);
	return n && n <= max && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

static bool uuid_ok(const char *s)
{
	if (strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

static bool printable(const char *s, size_t max)
{
	size_t n = 0;
	for (; s[n]; n++)
		if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f)
			return false;
	return n && n <= max;
}

int tally_remote_parse_probe(char *out, const char *host, double t0, double rtt, struct tally_remote_facts *f)
{
	memset(f, 0, sizeof(*f));
	char q[TALLY_EXCERPT_SIZE];
	tally_excerpt(q, out);
	char *cur = out, *l[6] = { 0 };
	int n = 0;
	for (char *s; n < 6 && (s = next_line(&cur));)
		l[n++] = s;
	/* the version line may be absent: four or five lines, "end" last, nothing after */
	double clock = 0;
	bool ok = n >= 4 && n <= 5 && !strcmp(l[n - 1], "end") && !*cur && word_ok(l[0], 64) &&
		  (!strcmp(l[1], "-") || uuid_ok(l[1])) && (n == 4 || printable(l[3], 200));
	if (ok) {
		/* seconds, a '.' and nanoseconds; a date without %N (busybox) prints it, or N, after the '.' */
		size_t num = strspn(l[2], "0123456789.");
		const char *rest = l[2] + num;
		ok = num > 0 && num < 40 && (!*rest || !strcmp(rest, "%N") || !strcmp(rest, "N"));
		if (ok) {
			char b[40], *e;
			memcpy(b, l[2], num);
			b[num] = '\0';
			errno = 0;
			clock = strtod(b, &e);
			ok = !errno && !*e && isfinite(clock) && clock > 0;
		}
	}
	if (!ok)
		return tally_seterr(-EPROTO, "host '%s': the probe's answer is not what a Linux host says: '%s'", host, q);
	f->arch = xstrdup(l[0]);
	f->boot_id = xstrdup(l[1]);
	f->rtt = rtt;
	f->clock_offset = clock - (t0 + rtt / 2);
	f->tally = n == 5 ? xstrdup(l[3]) : NULL;
	return 0;
}

int tally_remote_probe(const struct tally_remote *r, struct tally_remote_facts *f)
{
	memset(f, 0, sizeof(*f));
	char *dir = tally_remote_dir(r);
	char *words[] = { "sh", "-c", (char *)probe_sh, "sh", (char *)root_of(r), dir, NULL };
	struct strbuf out = STRBUF_INIT, err = STRBUF_INIT;
	int status;
	double t0 = wall(), m0 = mono();
	int ret = tally_remote_run(r, words, NULL, 0, &out, 1 << 16, &err, &status);
	double m1 = mono();
	free(dir);
	if (!ret && status == 3)
		ret = root_refused(r, &err);
	else if (!ret && status)
		ret = run_failed(r, "the probe", status, &err);
	if (!ret)
		ret = tally_remote_parse_probe(out.buf ? out.buf : (char *)"", r->host, t0, m1 - m0, f);
	strbuf_release(&out);
	strbuf_release(&err);
	return ret;
}

/* ---- the clock ---- */

/* The clock's script: says it is there, waits for the go (a line on its
 * input), then reads the clock. */
static const char clock_sh[] = "echo r; read x; date +%s.%N";

/* One exchange: the command started, its "r" read (the session is open),
 * then the go written at t0 and the clock read back at t1. */
static int clock_once(const struct tally_remote *r, double *remote, double *t0, double *t1)
{
	int pin[2], pout[2];
	if (pipe2(pin, O_CLOEXEC) < 0)
		return tally_seterr(-errno, "cannot run ssh: %s", strerror(errno));
	if (pipe2(pout, O_CLOEXEC) < 0) {
		int e = errno;
		close(pin[0]);
		close(pin[1]);
		return tally_seterr(-e, "cannot run ssh: %s", strerror(e));
	}
	char *words[] = { "sh", "-c", (char *)clock_sh, NULL };
	char **argv = tally_remote_argv(r, words);
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		int nul = open("/dev/null", O_WRONLY);
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(nul, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	tally_remote_argv_free(argv);
	close(pin[0]);
	close(pout[1]);
	int ret = pid < 0 ? tally_seterr(-errno, "cannot run ssh: %s", strerror(errno)) : 0;
	double limit = r->timeout > 0 ? r->timeout : 60, start = mono();
	char buf[256];
	size_t len = 0;
	int stage = 0; /* 0: waiting for "r", 1: for the clock */
	while (!ret && stage < 2) {
		double left = limit - (mono() - start);
		struct pollfd p = { .fd = pout[0], .events = POLLIN };
		int k = left > 0 ? poll(&p, 1, (int)(left * 1000) + 1) : 0;
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			ret = tally_seterr(-ETIMEDOUT, "host '%s': no answer within %.0f s (ssh killed)", r->host, limit);
			break;
		}
		ssize_t n = read(pout[0], buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = tally_seterr(-EIO, "host '%s': the clock's answer is cut short", r->host);
			break;
		}
		len += (size_t)n;
		buf[len] = '\0';
		char *nl;
		while (!ret && (nl = strchr(buf, '\n'))) {
			*nl = '\0';
			if (stage == 0) {
				if (strcmp(buf, "r")) {
					ret = tally_seterr(-EPROTO, "host '%s': the clock's answer is not what a Linux host says", r->host);
					break;
				}
				*t0 = wall();
				if (write(pin[1], "\n", 1) != 1)
					ret = tally_seterr(-EIO, "host '%s': cannot send the clock's go", r->host);
				stage = 1;
			} else {
				*t1 = wall();
				char *e;
				errno = 0;
				*remote = strtod(buf, &e);
				if (errno || *e || !isfinite(*remote) || *remote <= 0)
					ret = tally_seterr(-EPROTO, "host '%s': the clock's answer is not a time", r->host);
				stage = 2;
				break;
			}
			size_t used = (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len - used + 1);
			len -= used;
		}
		if (len >= sizeof(buf) - 1)
			ret = tally_seterr(-EPROTO, "host '%s': the clock's answer is too long", r->host);
	}
	close(pin[1]);
	close(pout[0]);
	if (pid > 0) {
		if (ret) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
		}
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	return ret;
}

int tally_remote_clock(const struct tally_remote *r, double *offset, double *rtt)
{
	/* the exchange of the shortest round trip of three: its midpoint is
	 * the closest to when the host read its clock */
	double best = -1;
	for (int i = 0; i < 3; i++) {
		double remote, t0, t1;
		int ret = clock_once(r, &remote, &t0, &t1);
		if (ret)
			return ret;
		if (best < 0 || t1 - t0 < best) {
			best = t1 - t0;
			*offset = remote - (t0 + t1) / 2;
			*rtt = best;
		}
	}
	return 0;
}

/* ---- install ---- */

struct objs {
	char **v;
	size_t n, a;
};

static int add_obj(struct dl_phdr_info *info, size_t size, void *ctx)
{
	(void)size;
	struct objs *o = ctx;
	if (info->dlpi_name && info->dlpi_name[0] == '/') {
		GROW(o->v, o->a, o->n + 1);
		o->v[o->n++] = xstrdup(info->dlpi_name);
	}
	return 0;
}

/* The ELF interpreter of the running executable (its loader). */
static char *interp_of_self(void)
{
	char *found = NULL;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t nph = 0;
	if (e && elf_getphdrnum(e, &nph) == 0) {
		for (size_t k = 0; k < nph && !found; k++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)k, &ph) || ph.p_type != PT_INTERP || ph.p_filesz < 2 || ph.p_filesz >= PATH_MAX)
				continue;
			size_t n = 0;
			const char *raw = elf_rawfile(e, &n);
			if (raw && ph.p_offset <= n && ph.p_filesz <= n - ph.p_offset && raw[ph.p_offset] == '/')
				found = xstrndup(raw + ph.p_offset, ph.p_filesz);
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return found;
}

struct tarbuf {
	struct strbuf sb;
};

static la_ssize_t tar_write_cb(struct archive *a, void *ctx, const void *p, size_t n)
{
	(void)a;
	struct tarbuf *t = ctx;
	strbuf_add(&t->sb, p, n);
	return (la_ssize_t)n;
}

static int tar_add(struct archive *a, const char *name, const void *data, size_t n, unsigned mode)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, (la_int64_t)n);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, mode);
	int r = archive_write_header(a, e) == ARCHIVE_OK && (!n || archive_write_data(a, data, n) == (la_ssize_t)n) ? 0 : -EIO;
	archive_entry_free(e);
	return r;
}

static int tar_add_file(struct archive *a, const char *name, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	int r = tally_read_regular(&sb, AT_FDCWD, path, TALLY_OPEN_FOLLOW, (uint64_t)1 << 30);
	if (!r && tar_add(a, name, sb.buf ? sb.buf : "", sb.len, 0700))
		r = tally_seterr(-EIO, "cannot pack '%s' for the hosts: %s", path, archive_error_string(a));
	strbuf_release(&sb);
	return r;
}

/* The bundle: tally.bin, lib/ (every shared object the process loaded, the
 * loader among them) and the tally script that runs tally.bin with them. */
static int make_bundle(struct strbuf *out)
{
	struct objs o = { 0 };
	dl_iterate_phdr(add_obj, &o);
	char *interp = interp_of_self();
	int r = 0;
	struct tarbuf t = { STRBUF_INIT };
	struct archive *a = archive_write_new();
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_open(a, &t, NULL, tar_write_cb, NULL) != ARCHIVE_OK)
		r = tally_seterr(-EIO, "cannot pack tally for the hosts: %s", archive_error_string(a));
	if (!r)
		r = tar_add_file(a, "tally.bin", "/proc/self/exe");
	bool have_interp = false;
	for (size_t i = 0; i < o.n && !r; i++) {
		const char *base = tally_basename(o.v[i]);
		bool dup = false;
		for (size_t k = 0; k < i && !dup; k++)
			dup = !strcmp(tally_basename(o.v[k]), base);
		if (dup)
			continue;
		struct strbuf name = STRBUF_INIT;
		strbuf_addf(&name, "lib/%s", base);
		r = tar_add_file(a, name.buf, o.v[i]);
		strbuf_release(&name);
		if (interp && !strcmp(base, tally_basename(interp)))
			have_interp = true;
	}
	if (!r && interp && !have_interp) {
		struct strbuf name = STRBUF_INIT;
		strbuf_addf(&name, "lib/%s", tally_basename(interp));
		r = tar_add_file(a, name.buf, interp);
		strbuf_release(&name);
	}
	if (!r && !interp)
		r = tally_seterr(-ENOEXEC, "cannot pack tally for the hosts: the running executable names no ELF interpreter");
	if (!r) {
		struct strbuf sh = STRBUF_INIT;
		/* the loader and libraries of this machine, whatever the host has */
		strbuf_addf(&sh, "#!/bin/sh\nd=$(dirname \"$0\")\nexec \"$d/lib/%s\" --library-path \"$d/lib\" \"$d/tally.bin\" \"$@\"\n",
			    tally_basename(interp));
		if (tar_add(a, "tally", sh.buf, sh.len, 0700))
			r = tally_seterr(-EIO, "cannot pack tally for the hosts: %s", archive_error_string(a));
		strbuf_release(&sh);
	}
	if (archive_write_close(a) != ARCHIVE_OK && !r)
		r = tally_seterr(-EIO, "cannot pack tally for the hosts: %s", archive_error_string(a));
	archive_write_free(a);
	for (size_t i = 0; i < o.n; i++)
		free(o.v[i]);
	free(o.v);
	free(interp);
	if (!r)
		*out = t.sb;
	else
		strbuf_release(&t.sb);
	return r;
}

/* The install's script: $1 the root, $2 its directory for this version, $3
 * the version line it must print. The root is checked before and after it is
 * made (what is missing of it made 0700), then it is the user's own and
 * private; the copy lands whole or not at all: unpacked beside, then renamed
 * into place, an outdated one moved aside first; when another install (a
 * second name of the host, another job) put a working one there meanwhile,
 * that one stays. */
static const char install_sh[] = ROOT_CHECK_SH
	"umask 077; "
	"chk \"$1\" \"$2\"; "
	"[ -d \"$1\" ] || mkdir -p -m 700 -- \"$1\" || exit 3; "
	"chk \"$1\" \"$2\"; "
	"chmod 700 \"$1\" || exit 3; "
	"t=$(mktemp -d \"$1/.install.XXXXXX\") || exit 3; "
	"if ! tar -x -f - -C \"$t\"; then rm -rf \"$t\"; exit 4; fi; "
	"o=; "
	"if [ \"$(\"$2/tally\" --version 2>/dev/null)\" != \"$3\" ]; then "
	"if [ -e \"$2\" ]; then o=$(mktemp -d \"$1/.old.XXXXXX\") && mv -T \"$2\" \"$o/v\" || exit 4; fi; "
	"mv -T \"$t\" \"$2\" || [ \"$(\"$2/tally\" --version 2>/dev/null)\" = \"$3\" ] || { rm -rf \"$t\" ${o:+\"$o\"}; exit 4; }; "
	"fi; "
	"rm -rf \"$t\" ${o:+\"$o\"}; "
	"\"$2/tally\" --version";

int tally_remote_install(const struct tally_remote *r, bool *installed, size_t *bytes)
{
	*installed = false;
	if (bytes)
		*bytes = 0;
	struct tally_remote_facts f;
	int ret = tally_remote_probe(r, &f);
	if (ret)
		return ret;
	struct utsname u;
	uname(&u);
	char want[64];
	snprintf(want, sizeof(want), "tally %s", TALLY_VERSION);
	if (strcmp(f.arch, u.machine)) {
		char q[TALLY_EXCERPT_SIZE];
		ret = tally_seterr(-ENOEXEC, "host '%s' is %s, and this tally is built for %s (install a tally built for it)",
				   r->host, tally_excerpt(q, f.arch), u.machine);
	} else if (f.tally && !strcmp(f.tally, want)) {
		ret = 0; /* a working one of this version: it answered */
	} else {
		struct strbuf bundle = STRBUF_INIT;
		ret = make_bundle(&bundle);
		if (!ret) {
			char *dir = tally_remote_dir(r);
			char *words[] = { "sh", "-c", (char *)install_sh, "sh", (char *)root_of(r), dir, want, NULL };
			struct strbuf out = STRBUF_INIT, err = STRBUF_INIT;
			int status;
			ret = tally_remote_run(r, words, bundle.buf, bundle.len, &out, 4096, &err, &status);
			if (!ret && status == 3) {
				ret = root_refused(r, &err);
			} else if (!ret && status) {
				ret = run_failed(r, "installing tally", status, &err);
			} else if (!ret) {
				while (out.len && out.buf[out.len - 1] == '\n')
					out.buf[--out.len] = '\0';
				if (!out.buf || strcmp(out.buf, want)) {
					char q[LAST_LINE_SIZE];
					last_line(&err, q);
					ret = tally_seterr(-ENOEXEC, "host '%s': the tally installed in '%s' does not run (%s)", r->host, dir,
							   q[0] ? q : "no version printed");
				} else {
					*installed = true;
					if (bytes)
						*bytes = bundle.len;
				}
			}
			strbuf_release(&out);
			strbuf_release(&err);
			free(dir);
		}
		strbuf_release(&bundle);
	}
	tally_remote_facts_release(&f);
	return ret;
}

/* ---- profilers sent along ---- */

/* dir (a plugin's directory) into the tar as NAME/...: regular files (links
 * to them followed) and directories, at most 16 deep and max bytes in all. */
static int tar_add_tree(struct archive *a, const char *name, const char *dir, int depth, size_t *left)
{
	if (depth > 16)
		return tally_seterr(-ELOOP, "'%s' is more than 16 directories deep", dir);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFDIR);
	archive_entry_set_perm(e, 0700);
	int r = archive_write_header(a, e) == ARCHIVE_OK ? 0 : tally_seterr(-EIO, "cannot pack '%s': %s", dir, archive_error_string(a));
	archive_entry_free(e);
	DIR *d = r ? NULL : opendir(dir);
	if (!r && !d)
		r = tally_seterr(-errno, "cannot read '%s': %s", dir, strerror(errno));
	for (struct dirent *de; !r && d && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct strbuf path = STRBUF_INIT, sub = STRBUF_INIT;
		strbuf_addf(&path, "%s/%s", dir, de->d_name);
		strbuf_addf(&sub, "%s/%s", name, de->d_name);
		struct stat st;
		if (stat(path.buf, &st) == 0 && S_ISDIR(st.st_mode)) {
			r = tar_add_tree(a, sub.buf, path.buf, depth + 1, left);
		} else if (stat(path.buf, &st) == 0 && S_ISREG(st.st_mode)) {
			struct strbuf data = STRBUF_INIT;
			r = tally_read_regular(&data, AT_FDCWD, path.buf, TALLY_OPEN_FOLLOW, *left);
			if (!r) {
				*left -= data.len;
				if (tar_add(a, sub.buf, data.buf ? data.buf : "", data.len, st.st_mode & 0100 ? 0700 : 0600))
					r = tally_seterr(-EIO, "cannot pack '%s': %s", path.buf, archive_error_string(a));
			}
			strbuf_release(&data);
		}
		strbuf_release(&path);
		strbuf_release(&sub);
	}
	if (d)
		closedir(d);
	return r;
}

static const char unpack_sh[] = "umask 077; mkdir -p -m 700 -- \"$1\" && exec tar -x -f - -C \"$1\"";

int tally_remote_send_dirs(const struct tally_remote *r, char *const *dirs, char *const *names, size_t n, const char *rdir)
{
	struct tarbuf t = { STRBUF_INIT };
	struct archive *a = archive_write_new();
	int ret = 0;
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK || archive_write_open(a, &t, NULL, tar_write_cb, NULL) != ARCHIVE_OK)
		ret = tally_seterr(-EIO, "cannot pack the profilers: %s", archive_error_string(a));
	size_t left = (size_t)64 << 20;
	for (size_t i = 0; i < n && !ret; i++)
		ret = tar_add_tree(a, names[i], dirs[i], 0, &left);
	if (archive_write_close(a) != ARCHIVE_OK && !ret)
		ret = tally_seterr(-EIO, "cannot pack the profilers: %s", archive_error_string(a));
	archive_write_free(a);
	if (!ret) {
		char *words[] = { "sh", "-c", (char *)unpack_sh, "sh", (char *)rdir, NULL };
		struct strbuf err = STRBUF_INIT;
		int status;
		ret = tally_remote_run(r, words, t.sb.buf, t.sb.len, NULL, 0, &err, &status);
		if (!ret && status)
			ret = run_failed(r, "sending the profilers", status, &err);
		strbuf_release(&err);
	}
	strbuf_release(&t.sb);
	return ret;
}

/* ---- pull ---- */

/* The host's listing "SIZE NAME\n..." of a pull, parsed once: its names
 * sorted, each looked up by a binary search (a pull of n files costs n log n,
 * whatever the host sends), each marked when it came. */
struct listing {
	struct lent {
		const char *name; /* into the listing's text */
		size_t len;
		long long size;
		bool came;
	} *v;
	size_t n;
};

static int lent_cmp(const void *a, const void *b)
{
	const struct lent *x = a, *y = b;
	int c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
	return c ? c : x->len < y->len ? -1 : x->len > y->len;
}

static int listing_parse(struct listing *L, const char *sizes, const char *what)
{
	memset(L, 0, sizeof(*L));
	size_t lines = 0;
	for (const char *p = sizes; *p; p++)
		lines += *p == '\n';
	if (lines > TALLY_PULL_MAX_FILES)
		return tally_seterr(-EFBIG, "%s: its listing has more than %d files (refused before any is read)", what,
				    TALLY_PULL_MAX_FILES);
	L->v = xcalloc(lines + 1, sizeof(*L->v));
	char q[QNAME_SIZE];
	for (const char *p = sizes; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		size_t num = 0;
		while (num < len && p[num] >= '0' && p[num] <= '9')
			num++;
		struct lent *l = &L->v[L->n];
		if (!num || num > 18 || num + 1 >= len || p[num] != ' ' || !e) {
			char *line = xstrndup(p, len);
			int r = tally_seterr(-EPROTO, "%s: its listing has a line that is not 'SIZE NAME': '%s'", what,
					     qname(q, line));
			free(line);
			return r;
		}
		l->size = strtoll(p, NULL, 10);
		l->name = p + num + 1;
		l->len = len - num - 1;
		L->n++;
		p = e + 1;
	}
	qsort(L->v, L->n, sizeof(*L->v), lent_cmp);
	for (size_t i = 1; i < L->n; i++)
		if (!lent_cmp(&L->v[i - 1], &L->v[i])) {
			char *name = xstrndup(L->v[i].name, L->v[i].len);
			int r = tally_seterr(-EPROTO, "%s: its listing names '%s' twice", what, qname(q, name));
			free(name);
			return r;
		}
	return 0;
}

static struct lent *listing_find(const struct listing *L, const char *name)
{
	struct lent key = { .name = name, .len = strlen(name) };
	return L->n ? bsearch(&key, L->v, L->n, sizeof(*L->v), lent_cmp) : NULL;
}

static int mkdirs(const char *base, const char *rel)
{
	/* each component made under base, none a link (O_NOFOLLOW on the way down) */
	int dfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	char *tmp = xstrdup(rel);
	int r = 0;
	for (char *s = tmp, *slash; s && *s && !r; s = slash ? slash + 1 : NULL) {
		slash = strchr(s, '/');
		if (slash)
			*slash = '\0';
		if (mkdirat(dfd, s, 0700) < 0 && errno != EEXIST)
			r = -errno;
		int nfd = r ? -1 : openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (!r && nfd < 0)
			r = -errno;
		close(dfd);
		dfd = nfd;
	}
	free(tmp);
	if (r) {
		if (dfd >= 0)
			close(dfd);
		return r;
	}
	return dfd;
}

int tally_remote_untar(const void *tar, size_t len, const char *ldir, const char *sizes, const char *what,
		       size_t *files, uint64_t *bytes)
{
	*files = 0;
	*bytes = 0;
	struct listing L = { 0 };
	int ret = sizes ? listing_parse(&L, sizes, what) : 0;
	if (ret) {
		free(L.v);
		return ret;
	}
	if (mkdir(ldir, 0700) < 0 && errno != EEXIST) {
		free(L.v);
		return tally_seterr(-errno, "cannot create '%s': %s", ldir, strerror(errno));
	}
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tar, len) != ARCHIVE_OK)
		ret = tally_seterr(-EIO, "%s: not a tar stream: %s", what, archive_error_string(a));
	struct archive_entry *e;
	char q[QNAME_SIZE];
	while (!ret) {
		int k = archive_read_next_header(a, &e);
		if (k == ARCHIVE_EOF)
			break;
		if (k != ARCHIVE_OK) {
			ret = tally_seterr(-EIO, "%s: a damaged tar stream: %s", what, archive_error_string(a));
			break;
		}
		const char *name = archive_entry_pathname(e);
		if (!name)
			name = "";
		while (name[0] == '.' && name[1] == '/')
			name += 2;
		if (!name[0] || !strcmp(name, "."))
			continue;
		char *n = xstrdup(name);
		size_t nl = strlen(n);
		while (nl && n[nl - 1] == '/')
			n[--nl] = '\0';
		mode_t type = archive_entry_filetype(e);
		/* at most 1 KiB: the pulled tree stays within PATH_MAX under any
		 * results directory, for every tool that removes or reads it by path */
		if (!tally_relpath_ok(n, 1024)) {
			ret = tally_seterr(-EPERM, "%s: refused '%s': a name that leads out of '%s' (absolute, with '..', or over 1 KiB)", what,
					   qname(q, name), ldir);
		} else if (type == AE_IFDIR) {
			int d = mkdirs(ldir, n);
			if (d < 0)
				ret = tally_seterr(d, "%s: cannot make '%s' in '%s': %s (a link in the way?)", what, qname(q, n),
						   ldir, strerror(-d));
			else
				close(d);
		} else if (type != AE_IFREG) {
			ret = tally_seterr(-EPERM, "%s: refused '%s': %s, not a regular file or a directory", what,
					   qname(q, n),
					   type == AE_IFLNK ? "a symbolic link" : archive_entry_hardlink(e) ? "a hard link" : "a special file");
		} else {
			/* what the stream declares, checked against the listing before
			 * anything is created for it: a member is never larger than
			 * the host said (a sparse one is all holes here) */
			struct lent *l = sizes ? listing_find(&L, n) : NULL;
			long long declared = archive_entry_size_is_set(e) ? (long long)archive_entry_size(e) : -1;
			long long want = sizes ? (l ? l->size : -1) : declared;
			int fd = -1, dfd = -1;
			const char *base = n;
			if (sizes && !l) {
				ret = tally_seterr(-EPROTO, "%s: '%s' came, but the host's listing has no such file", what,
						   qname(q, n));
			} else if (l && l->came) {
				ret = tally_seterr(-EPROTO, "%s: '%s' came twice", what, qname(q, n));
			} else if (want < 0 || declared != want) {
				ret = tally_seterr(-EFBIG, "%s: refused '%s': the stream declares %lld bytes and the host listed %lld (nothing written)",
						   what, qname(q, n), declared, want);
			} else if ((uint64_t)want > PULL_MAX - *bytes) {
				ret = tally_seterr(-EFBIG, "%s: more than 4 GiB of results (stopped)", what);
			} else {
				if (l)
					l->came = true;
				char *slash = strrchr(n, '/');
				if (slash) {
					*slash = '\0';
					dfd = mkdirs(ldir, n);
					*slash = '/';
				} else {
					dfd = open(ldir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
					if (dfd < 0)
						dfd = -errno;
				}
				base = slash ? slash + 1 : n;
				fd = dfd < 0 ? dfd : openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
				if (dfd >= 0 && fd < 0)
					fd = -errno;
				if (fd < 0)
					ret = tally_seterr(fd, "%s: cannot write '%s' in '%s': %s", what, qname(q, n), ldir,
							   strerror(-fd));
			}
			if (!ret) {
				uint64_t got = 0;
				for (;;) {
					char buf[65536];
					la_ssize_t m = archive_read_data(a, buf, sizeof(buf));
					if (m == 0)
						break;
					if (m < 0) {
						ret = tally_seterr(-EIO, "%s: '%s' is cut short: %s", what, qname(q, n),
								   archive_error_string(a));
						break;
					}
					if ((uint64_t)m > (uint64_t)want - got) {
						ret = tally_seterr(-EFBIG, "%s: refused '%s': more than the %lld bytes the host listed", what,
								   qname(q, n), want);
						break;
					}
					if (tally_write_all(fd, buf, (size_t)m)) {
						ret = tally_seterr(-errno, "cannot write '%s/%s': %s", ldir, n, strerror(errno));
						break;
					}
					got += (uint64_t)m;
				}
				if (close(fd) < 0 && !ret)
					ret = tally_seterr(-errno, "cannot write '%s/%s': %s", ldir, n, strerror(errno));
				if (!ret && got != (uint64_t)want)
					ret = tally_seterr(-EIO, "%s: '%s' has %llu bytes here and %lld on the host", what,
							   qname(q, n), (unsigned long long)got, want);
				if (ret)
					unlinkat(dfd, base, 0); /* nothing of a refused member stays */
				else {
					(*files)++;
					*bytes += got;
				}
			}
			if (dfd >= 0)
				close(dfd);
		}
		free(n);
	}
	archive_read_free(a);
	/* every file of the listing came */
	for (size_t i = 0; !ret && i < L.n; i++)
		if (!L.v[i].came) {
			char *name = xstrndup(L.v[i].name, L.v[i].len);
			ret = tally_seterr(-EIO, "%s: %zu files came of the %zu the host listed ('%s' did not)", what, *files, L.n,
					   qname(q, name));
			free(name);
		}
	free(L.v);
	return ret;
}

/* The pull's script: $1 the directory; a listing of its regular files
 * (SIZE NAME, NUL-free names without newlines), an end line, then the tar. */
static const char list_sh[] = "cd \"$1\" || exit 3; find . -type f -printf '%s %P\\n'";
static const char tar_sh[] = "cd \"$1\" || exit 3; exec tar -c -f - --no-xattrs --no-acls .";

int tally_remote_pull(const struct tally_remote *r, const char *rdir, const char *ldir, size_t *files, uint64_t *bytes)
{
	*files = 0;
	*bytes = 0;
	struct strbuf list = STRBUF_INIT, tar = STRBUF_INIT, err = STRBUF_INIT;
	int status;
	char *lw[] = { "sh", "-c", (char *)list_sh, "sh", (char *)rdir, NULL };
	int ret = tally_remote_run(r, lw, NULL, 0, &list, 16 << 20, &err, &status);
	if (!ret && status)
		ret = run_failed(r, "listing the results", status, &err);
	if (!ret) {
		char *tw[] = { "sh", "-c", (char *)tar_sh, "sh", (char *)rdir, NULL };
		strbuf_reset(&err);
		ret = tally_remote_run(r, tw, NULL, 0, &tar, PULL_MAX, &err, &status);
		if (!ret && status)
			ret = run_failed(r, "sending the results", status, &err);
	}
	if (!ret) {
		struct strbuf what = STRBUF_INIT;
		strbuf_addf(&what, "host '%s'", r->host);
		ret = tally_remote_untar(tar.buf ? tar.buf : "", tar.len, ldir, list.buf ? list.buf : "", what.buf, files, bytes);
		strbuf_release(&what);
	}
	strbuf_release(&list);
	strbuf_release(&tar);
	strbuf_release(&err);
	return ret;
}
