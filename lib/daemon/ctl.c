/* The control protocol (see ctl.h): request parsing, reply framing, and the
 * client's side of a call. */
#define _GNU_SOURCE
#include "tally/ctl.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const struct {
	const char *name;
	enum tally_ctl_op op;
} commands[] = {
	{ "start", TALLY_CTL_START },   { "stop", TALLY_CTL_STOP },
	{ "clear", TALLY_CTL_CLEAR },   { "startclr", TALLY_CTL_STARTCLR },
	{ "flush", TALLY_CTL_FLUSH },   { "epoch", TALLY_CTL_EPOCH },
	{ "status", TALLY_CTL_STATUS }, { "cpus", TALLY_CTL_CPUS },
	{ "drain", TALLY_CTL_DRAIN },   { "peek", TALLY_CTL_PEEK },
};

void tally_ctl_req_release(struct tally_ctl_req *req)
{
	free(req->cpus);
	req->cpus = NULL;
}

static int cpus_usage(const char *why)
{
	return tally_seterr(-EINVAL, "%s (%s)", TALLY_CTL_CPUS_USAGE, why);
}

int tally_ctl_parse(int argc, char *const *argv, int ncpus, struct tally_ctl_req *req)
{
	memset(req, 0, sizeof(*req));
	if (argc < 1)
		return tally_seterr(-EINVAL, "%s", TALLY_CTL_USAGE);
	size_t i;
	for (i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[0], commands[i].name))
			break;
	if (i == ARRAY_SIZE(commands))
		return tally_seterr(-EINVAL, "%s", TALLY_CTL_USAGE);
	req->op = commands[i].op;
	if (req->op != TALLY_CTL_CPUS) {
		if (argc > 1)
			return tally_seterr(-EINVAL, "usage: %s (it takes no arguments)",
					    commands[i].name);
		return 0;
	}
	/* cpus LIST|all on|off [freq HZ|period N] */
	if (argc != 3 && argc != 5)
		return cpus_usage(argc < 3 ? "too few arguments" : "wrong number of arguments");
	req->ncpus = ncpus;
	req->cpus = xcalloc((size_t)ncpus + 1, sizeof(bool));
	if (tally_parse_cpulist(argv[1], ncpus, req->cpus)) {
		int r = cpus_usage(tally_errmsg());
		tally_ctl_req_release(req);
		return r;
	}
	if (!strcmp(argv[2], "on"))
		req->on = true;
	else if (!strcmp(argv[2], "off"))
		req->on = false;
	else {
		tally_ctl_req_release(req);
		return cpus_usage("the second word is on or off");
	}
	if (argc == 5) {
		int r = 0;
		if (!strcmp(argv[3], "freq"))
			r = tally_parse_u64(argv[4], "freq", 1, 1000000, &req->freq);
		else if (!strcmp(argv[3], "period"))
			r = tally_parse_u64(argv[4], "period", 1, UINT64_MAX >> 2, &req->period);
		else
			r = tally_seterr(-EINVAL, "then freq HZ or period N");
		if (r) {
			r = cpus_usage(tally_errmsg());
			tally_ctl_req_release(req);
			return r;
		}
	}
	return 0;
}

int tally_ctl_parse_line(const char *line, int ncpus, struct tally_ctl_req *req)
{
	memset(req, 0, sizeof(*req));
	/* printable ASCII and blanks only: anything else is garbage, not a command */
	for (const char *c = line; *c; c++)
		if (!((*c >= 0x20 && *c < 0x7f) || *c == '\t'))
			return tally_seterr(-EINVAL, "%s", TALLY_CTL_USAGE);
	char *copy = xstrdup(line), *save = NULL;
	char *argv[8];
	int argc = 0;
	for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (argc == (int)ARRAY_SIZE(argv)) {
			/* too many words: the command decides which usage applies */
			argc++;
			break;
		}
		argv[argc++] = w;
	}
	int r;
	if (argc > (int)ARRAY_SIZE(argv)) {
		char *one[6] = { argv[0], argv[1], argv[2], argv[3], argv[4], argv[5] };
		r = tally_ctl_parse(6, one, ncpus, req); /* a wrong count for every command */
	} else {
		r = tally_ctl_parse(argc, argv, ncpus, req);
	}
	free(copy);
	return r;
}

void tally_ctl_frame(struct strbuf *out, bool ok, const char *body, size_t len)
{
	strbuf_addf(out, "%s %zu\n", ok ? "ok" : "error", len);
	strbuf_add(out, body, len);
}

int tally_ctl_reply_header(const char *buf, size_t len, const char *what, bool *ok, size_t *hdr,
			   size_t *body_len)
{
	const char *nl = memchr(buf, '\n', len > 64 ? 64 : len);
	if (!nl)
		return len > 64
			       ? tally_seterr(
					 -EPROTO,
					 "'%s' answered something that is not a tally daemon's reply",
					 what)
			       : 1;
	bool isok = (size_t)(nl - buf) > 3 && !memcmp(buf, "ok ", 3);
	bool iserr = (size_t)(nl - buf) > 6 && !memcmp(buf, "error ", 6);
	const char *num = isok ? buf + 3 : buf + 6;
	if (!isok && !iserr)
		return tally_seterr(-EPROTO,
				    "'%s' answered something that is not a tally daemon's reply",
				    what);
	uint64_t l = 0;
	bool huge = false;
	for (const char *d = num; d < nl; d++) {
		if (!isdigit((unsigned char)*d))
			return tally_seterr(
				-EPROTO,
				"'%s' answered something that is not a tally daemon's reply", what);
		if (l > (UINT64_MAX - 9) / 10)
			huge = true;
		else
			l = l * 10 + (uint64_t)(*d - '0');
	}
	unsigned long long max = isok ? TALLY_CTL_MAX_REPLY : TALLY_CTL_MAX_ERROR;
	if (huge || l > max) {
		/* the number as sent (digits only, checked above) */
		int nd = (int)(nl - num) > 40 ? 40 : (int)(nl - num);
		return tally_seterr(
			-EPROTO,
			"'%s' announced a reply of %.*s%s bytes, more than the %llu a%s reply may hold: it is not a tally daemon's reply",
			what, nd, num, nl - num > 40 ? "..." : "", max, isok ? "" : "n error");
	}
	*ok = isok;
	*hdr = (size_t)(nl - buf) + 1;
	*body_len = (size_t)l;
	return 0;
}

/* Waits for fd to be ready for events, at most timeout seconds (any length:
 * poll's milliseconds are an int, so a long wait is several polls). */
static int wait_fd(int fd, short events, double timeout)
{
	struct pollfd p = { .fd = fd, .events = events };
	double deadline = tally_now_mono() + (timeout > 0 ? timeout : 0);
	for (;;) {
		int ms = -1;
		if (timeout > 0) {
			double left = (deadline - tally_now_mono()) * 1000;
			if (left <= 0)
				return 0;
			ms = left >= INT_MAX ? INT_MAX : (int)left + 1;
		}
		int r = poll(&p, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 && timeout > 0)
			continue; /* the deadline decides */
		return r;
	}
}

int tally_ctl_call(const char *path, const char *request, double timeout, bool *ok,
		   struct strbuf *body)
{
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path))
		return tally_seterr(
			-ENAMETOOLONG,
			"socket path '%s' is longer than %zu bytes (use a shorter --socket)", path,
			sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path));
	struct stat st;
	if (stat(path, &st) < 0) {
		if (errno == ENOENT)
			return tally_seterr(
				-ENOENT,
				"no daemon socket at '%s' (start one with 'tally daemon --db DIR', or name it with --db or --socket)",
				path);
		if (errno == EACCES)
			return tally_seterr(
				-EACCES,
				"permission denied on '%s': the daemon belongs to another user",
				path);
		return tally_seterr(-errno, "cannot reach '%s': %s", path, strerror(errno));
	}
	if (!S_ISSOCK(st.st_mode))
		return tally_seterr(-ENOTSOCK,
				    "'%s' is not a socket (name the daemon's socket with --socket)",
				    path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return tally_seterr(-errno, "cannot create a socket: %s", strerror(errno));
	int ret = 0;
	double give_up = tally_now_mono() + (timeout > 0 ? timeout : 1e9);
	for (unsigned attempt = 0;; attempt++) {
		int e = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0;
		if (e == EISCONN)
			e = 0;
		if (e == EINTR)
			continue;
		if (e == EAGAIN || e == EINPROGRESS || e == EALREADY) {
			/* the daemon's backlog is full (a Unix socket says so at once and
			 * never tells when there is room): try again, at uneven intervals */
			if (tally_now_mono() >= give_up) {
				ret = tally_seterr(
					-ETIMEDOUT,
					"the daemon at '%s' did not accept the connection within %.0f s",
					path, timeout);
				goto out;
			}
			usleep(1000 * (2 + attempt % 7));
			continue;
		}
		if (e == ECONNREFUSED)
			ret = tally_seterr(
				-e,
				"no daemon listens on '%s' (it is not running: start it with 'tally daemon')",
				path);
		else if (e == EACCES || e == EPERM)
			ret = tally_seterr(
				-e, "permission denied on '%s': the daemon belongs to another user",
				path);
		else if (e)
			ret = tally_seterr(-e, "cannot connect to '%s': %s", path, strerror(e));
		if (ret)
			goto out;
		break;
	}
	struct strbuf req = STRBUF_INIT;
	strbuf_addf(&req, "%s\n", request);
	size_t off = 0;
	int send_err = 0;
	while (off < req.len) {
		ssize_t n = send(fd, req.buf + off, req.len - off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (errno == EAGAIN && wait_fd(fd, POLLOUT, timeout) <= 0) {
				ret = tally_seterr(
					-ETIMEDOUT,
					"the daemon at '%s' did not take the request within %.0f s",
					path, timeout);
				break;
			}
			continue;
		}
		if (n < 0) {
			/* the daemon may have answered and closed already (a refusal): read it */
			send_err = errno;
			break;
		}
		off += (size_t)n;
	}
	strbuf_release(&req);
	if (ret)
		goto out;
	/* the reply: a header line, then exactly LEN bytes (LEN bounded: it comes from the peer) */
	struct strbuf in = STRBUF_INIT;
	bool closed = false;
	size_t want = SIZE_MAX, hdr = 0;
	while (!closed && (want == SIZE_MAX || in.len < hdr + want)) {
		int w = wait_fd(fd, POLLIN, timeout);
		if (w <= 0) {
			ret = tally_seterr(-ETIMEDOUT,
					   "the daemon at '%s' did not answer within %.0f s", path,
					   timeout);
			break;
		}
		/* no more than the rest of the reply, so that a reply never grows past its bound */
		size_t room = want == SIZE_MAX ? 65536 : hdr + want - in.len;
		if (room > 65536)
			room = 65536;
		int g = strbuf_grow(&in, room);
		if (g) {
			ret = tally_seterr(g, "cannot read the answer of '%s': %s", path,
					   strerror(-g));
			break;
		}
		ssize_t n = recv(fd, in.buf + in.len, room, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0) {
			ret = tally_seterr(-errno, "cannot read from '%s': %s", path,
					   strerror(errno));
			break;
		}
		if (n == 0)
			closed = true;
		in.len += (size_t)n;
		in.buf[in.len] = '\0';
		if (want == SIZE_MAX) {
			int h = tally_ctl_reply_header(in.buf, in.len, path, ok, &hdr, &want);
			if (h < 0) {
				ret = h;
				break;
			}
			if (h == 1)
				want = SIZE_MAX; /* not yet whole */
		}
	}
	if (!ret && (want == SIZE_MAX || in.len < hdr + want)) {
		if (send_err)
			ret = tally_seterr(-send_err, "cannot send to '%s': %s", path,
					   strerror(send_err));
		else
			ret = tally_seterr(
				-EPROTO,
				"the daemon at '%s' closed the connection before its whole answer (see its log)",
				path);
	}
	if (!ret)
		strbuf_add(body, in.buf + hdr, want);
	strbuf_release(&in);
out:
	close(fd);
	return ret;
}
