/* The control protocol between tally ctl and tally daemon (docs/daemon.md):
 * one request line over a Unix stream socket, one framed reply. The parser is
 * shared, so the client refuses what the daemon would and the daemon refuses
 * whatever reaches its socket, whoever sent it. */
#ifndef TALLY_CTL_H
#define TALLY_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include "tally/util.h"

/* The longest request, newline included. */
#define TALLY_CTL_MAX_REQUEST 4096
/* The longest reply body a client takes: an ok reply (a drain's bundle: 4 GiB)
 * and an error's one-line message. A header announcing more is refused before
 * anything is allocated; the daemon refuses to send a larger drain. */
#define TALLY_CTL_MAX_REPLY (4ULL << 30)
#define TALLY_CTL_MAX_ERROR 65536ULL
/* The answer to anything that is not a command. */
#define TALLY_CTL_USAGE "usage: start|stop|clear|startclr|flush|epoch|status|cpus|drain|peek"
#define TALLY_CTL_CPUS_USAGE "usage: cpus LIST|all on|off [freq HZ|period N]"
/* The socket's name inside the daemon's database directory. */
#define TALLY_CTL_SOCKET_NAME "ctl.sock"

enum tally_ctl_op {
	TALLY_CTL_START,
	TALLY_CTL_STOP,
	TALLY_CTL_CLEAR,
	TALLY_CTL_STARTCLR,
	TALLY_CTL_FLUSH,
	TALLY_CTL_EPOCH,
	TALLY_CTL_STATUS,
	TALLY_CTL_CPUS,
	TALLY_CTL_DRAIN,
	TALLY_CTL_PEEK, /* the samples in memory, as a bundle; nothing flushed or forgotten */
};

struct tally_ctl_req {
	enum tally_ctl_op op;
	/* cpus */
	bool *cpus;  /* ncpus entries */
	int ncpus;
	bool on;
	uint64_t freq, period; /* at most one set */
};

/* Parses a request's words (argv[0] is the command). ncpus: the CPUs this
 * machine has. 0, or -EINVAL with tally_seterr holding the reply: the command
 * list for an unknown command, that command's usage (and why) for bad
 * arguments. req->cpus is the caller's (tally_ctl_req_release). */
int tally_ctl_parse(int argc, char *const *argv, int ncpus, struct tally_ctl_req *req);
/* The same for one line of text as it came from the socket (no newline):
 * printable ASCII words separated by blanks. */
int tally_ctl_parse_line(const char *line, int ncpus, struct tally_ctl_req *req);
void tally_ctl_req_release(struct tally_ctl_req *req);

/* A reply: "ok LEN\n" or "error LEN\n", then LEN bytes of body. */
void tally_ctl_frame(struct strbuf *out, bool ok, const char *body, size_t len);

/* A reply's header line at the start of buf (len bytes, need not be
 * NUL-terminated): 0 with *ok (ok or error), *hdr (the header's length, its
 * newline included) and *body_len (at most TALLY_CTL_MAX_REPLY, or
 * TALLY_CTL_MAX_ERROR for an error) set; 1 when the line is not whole yet;
 * -EPROTO with tally_seterr naming what when it is not a reply's header. */
int tally_ctl_reply_header(const char *buf, size_t len, const char *what, bool *ok, size_t *hdr,
			   size_t *body_len);

/* The client side: connects to the socket, sends the request line, reads the
 * whole reply (at most timeout seconds without progress). *ok tells the kind;
 * body gets its bytes. 0 or -errno with tally_seterr saying what to do: a
 * reply that is not one or is longer than its bound is -EPROTO, memory
 * running short -ENOMEM (never an exit). */
int tally_ctl_call(const char *socket_path, const char *request, double timeout, bool *ok,
		   struct strbuf *body);

#endif
