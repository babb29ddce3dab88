/* Remote hosts over OpenSSH (tally/remote.h, docs/remote.md): the ssh command
 * line, remote commands quoted word by word, the probe, the install of this
 * tally with the libraries it runs on, and pulls that cannot write outside
 * their directory. */
#define _GNU_SOURCE
#include "tally/remote.h"
#include "lib/remote/internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>


#define DEFAULT_SSH "ssh -o BatchMode=yes"

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
	bool ok = n && n <= TALLY_HOST_NAME_MAX && host[0] != '.' && host[0] != '-' &&
		  strcmp(host, "all-hosts.db") && strcmp(host, "all-hosts.txt");
	for (size_t i = 0; ok && i < n; i++)
		ok = (unsigned char)host[i] > 0x20 && host[i] != 0x7f && host[i] != '/';
	if (ok)
		return 0;
	char q[TALLY_EXCERPT_SIZE];
	return tally_seterr(
		-EINVAL,
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
				return tally_seterr(
					-EINVAL,
					"host '%s' is named twice (--host and 'hosts' lines name each host once)",
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

/* The last non-empty line of err, for a message: escaped as
 * strbuf_add_excerpt does, at most 1000 bytes of it (a path is not cut). */
void rmt_last_line(const struct strbuf *err, char q[LAST_LINE_SIZE])
{
	const char *t = err->buf ? err->buf : "";
	size_t len = err->len;
	while (len && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' ' ||
		       t[len - 1] == '\t'))
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
const char *rmt_qname(char out[QNAME_SIZE], const char *s)
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
	double limit = r->timeout > 0 ? r->timeout : 60, t0 = tally_now_mono();
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
		double left = limit - (tally_now_mono() - t0);
		if (left <= 0) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			ret = tally_seterr(-ETIMEDOUT,
					   "host '%s': no answer within %.0f s (ssh killed)",
					   r->host, limit);
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
		ret = tally_seterr(-EFBIG, "host '%s': its answer is larger than %s (stopped)",
				   r->host, m);
	}
	if (!ret)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	strbuf_release(&ebuf);
	return ret;
}

/* An error for a command that ran and failed: ssh's 255 is the connection. */
int rmt_run_failed(const struct tally_remote *r, const char *doing, int status,
		   const struct strbuf *err)
{
	char q[LAST_LINE_SIZE];
	rmt_last_line(err, q);
	if (status == 255)
		return tally_seterr(
			-EHOSTUNREACH, "host '%s': cannot connect (%s)%s", r->host,
			q[0] ? q : "ssh exited 255",
			getenv("TALLY_SSH") ? "" : "; set TALLY_SSH for another ssh command line");
	return tally_seterr(-EIO, "host '%s': %s failed (exit %d)%s%s%s", r->host, doing, status,
			    q[0] ? ": '" : "", q, q[0] ? "'" : "");
}

const char *rmt_root_of(const struct tally_remote *r)
{
	return r->root && *r->root ? r->root : TALLY_REMOTE_ROOT;
}

char *tally_remote_dir(const struct tally_remote *r)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s", rmt_root_of(r), TALLY_VERSION);
	return strbuf_detach(&sb);
}

/* The root check's refusal (exit 3 of a script, its line on stderr). */
int rmt_root_refused(const struct tally_remote *r, const struct strbuf *err)
{
	char q[LAST_LINE_SIZE];
	rmt_last_line(err, q);
	return tally_seterr(
		-EPERM,
		"host '%s': %s (tally needs a private directory there: choose another root)",
		r->host, q[0] ? q : "its root is not private");
}

void tally_remote_facts_release(struct tally_remote_facts *f)
{
	free(f->arch);
	free(f->boot_id);
	free(f->tally);
	memset(f, 0, sizeof(*f));
}

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
	return n && n <= max &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

static bool uuid_ok(const char *s)
{
	if (strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-'
							    : !isxdigit((unsigned char)s[i]))
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

int tally_remote_parse_probe(char *out, const char *host, double t0, double rtt,
			     struct tally_remote_facts *f)
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
		/* seconds, a '.' and nanoseconds; a date without %N (busybox) prints it, or N,
		 * after the '.' */
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
		return tally_seterr(
			-EPROTO,
			"host '%s': the probe's answer is not what a Linux host says: '%s'", host,
			q);
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
	char *words[] = { "sh", "-c", (char *)probe_sh, "sh", (char *)rmt_root_of(r), dir, NULL };
	struct strbuf out = STRBUF_INIT, err = STRBUF_INIT;
	int status;
	double t0 = tally_now_wall(), m0 = tally_now_mono();
	int ret = tally_remote_run(r, words, NULL, 0, &out, 1 << 16, &err, &status);
	double m1 = tally_now_mono();
	free(dir);
	if (!ret && status == 3)
		ret = rmt_root_refused(r, &err);
	else if (!ret && status)
		ret = rmt_run_failed(r, "the probe", status, &err);
	if (!ret)
		ret = tally_remote_parse_probe(out.buf ? out.buf : (char *)"", r->host, t0, m1 - m0,
					       f);
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
	double limit = r->timeout > 0 ? r->timeout : 60, start = tally_now_mono();
	char buf[256];
	size_t len = 0;
	int stage = 0; /* 0: waiting for "r", 1: for the clock */
	while (!ret && stage < 2) {
		double left = limit - (tally_now_mono() - start);
		struct pollfd p = { .fd = pout[0], .events = POLLIN };
		int k = left > 0 ? poll(&p, 1, (int)(left * 1000) + 1) : 0;
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			ret = tally_seterr(-ETIMEDOUT,
					   "host '%s': no answer within %.0f s (ssh killed)",
					   r->host, limit);
			break;
		}
		ssize_t n = read(pout[0], buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = tally_seterr(-EIO, "host '%s': the clock's answer is cut short",
					   r->host);
			break;
		}
		len += (size_t)n;
		buf[len] = '\0';
		char *nl;
		while (!ret && (nl = strchr(buf, '\n'))) {
			*nl = '\0';
			if (stage == 0) {
				if (strcmp(buf, "r")) {
					ret = tally_seterr(
						-EPROTO,
						"host '%s': the clock's answer is not what a Linux host says",
						r->host);
					break;
				}
				*t0 = tally_now_wall();
				if (write(pin[1], "\n", 1) != 1)
					ret = tally_seterr(-EIO,
							   "host '%s': cannot send the clock's go",
							   r->host);
				stage = 1;
			} else {
				*t1 = tally_now_wall();
				char *e;
				errno = 0;
				*remote = strtod(buf, &e);
				if (errno || *e || !isfinite(*remote) || *remote <= 0)
					ret = tally_seterr(
						-EPROTO,
						"host '%s': the clock's answer is not a time",
						r->host);
				stage = 2;
				break;
			}
			size_t used = (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len - used + 1);
			len -= used;
		}
		if (len >= sizeof(buf) - 1)
			ret = tally_seterr(-EPROTO, "host '%s': the clock's answer is too long",
					   r->host);
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
