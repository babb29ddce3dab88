/* A daemon's reply as the client takes it: its header through
 * tally_ctl_reply_header, then the whole exchange, tally_ctl_call against a
 * fake daemon (a thread on a Unix socket in memory) that reads the request
 * line, answers with the input's bytes and closes. Oracles: the call ends (no
 * hang: libFuzzer's -timeout); when it succeeds the reply was 'ok N' or
 * 'error N', a newline and at least N bytes, the body is exactly those N bytes,
 * and the header parser agrees; a header the parser takes, followed by its
 * whole body, is a call that succeeds; when it fails, the error is one line. */
#include "fuzz.h"

#include "tally/ctl.h"

#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>

static char sock_path[600];
static int listen_fd = -1;
static const uint8_t *reply;
static size_t reply_len;
static sem_t served; /* the server is done with reply: the input may go */

static void *server(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		/* the request line, then the answer, then the end */
		char buf[256];
		size_t got = 0;
		for (;;) {
			ssize_t n = recv(fd, buf, sizeof(buf), 0);
			if (n <= 0)
				break;
			got += (size_t)n;
			if (memchr(buf, '\n', (size_t)n) || got > 8192)
				break;
		}
		size_t off = 0;
		while (off < reply_len) {
			ssize_t n = send(fd, reply + off, reply_len - off, MSG_NOSIGNAL);
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		close(fd);
		sem_post(&served);
	}
	return NULL;
}

static void start_server(void)
{
	snprintf(sock_path, sizeof(sock_path), "%s/ctl.sock", fuzz_dir());
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(sock_path) >= sizeof(sa.sun_path))
		abort();
	strcpy(sa.sun_path, sock_path);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(listen_fd, 4) < 0)
		abort();
	sem_init(&served, 0, 0);
	pthread_t t;
	if (pthread_create(&t, NULL, server, NULL))
		abort();
	pthread_detach(t);
}

/* A header whose length is far more than any reply (issue 17, item 6). */
static bool huge_length(const uint8_t *data, size_t size)
{
	const uint8_t *sp = memchr(data, ' ', size < 16 ? size : 16);
	if (!sp)
		return false;
	size_t digits = 0;
	while (sp + 1 + digits < data + size && sp[1 + digits] >= '0' && sp[1 + digits] <= '9')
		digits++;
	return digits > 9;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (listen_fd < 0)
		start_server();
	if (fuzz_known("i6") && huge_length(data, size))
		return 0;
	reply = data;
	reply_len = size;
	bool hok = false;
	size_t hdr_len = 0, body_len = 0;
	int h = tally_ctl_reply_header((const char *)data, size, "reply", &hok, &hdr_len,
				       &body_len);
	FUZZ_CHECK(h == 0 || h == 1 || h == -EPROTO, "tally_ctl_reply_header returned %d", h);
	if (h == 0)
		FUZZ_CHECK(hdr_len > 0 && hdr_len <= size && data[hdr_len - 1] == '\n',
			   "a header of %zu bytes", hdr_len);
	bool ok = false;
	struct strbuf body = STRBUF_INIT;
	int r = tally_ctl_call(sock_path, "status", 5, &ok, &body);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	FUZZ_CHECK(sem_timedwait(&served, &until) == 0, "the fake daemon was never asked");
	if (r) {
		fuzz_check_errmsg();
		FUZZ_CHECK(h != 0 || body_len > size - hdr_len,
			   "a reply whose header parses, with its whole body, failed: %s",
			   tally_errmsg());
		strbuf_release(&body);
		return 0;
	}
	FUZZ_CHECK(h == 0 && hok == ok && body_len == body.len,
		   "the call took a reply the header parser does not (%d)", h);
	const uint8_t *nl = memchr(data, '\n', size);
	FUZZ_CHECK(nl, "a reply without a header line was accepted");
	size_t hdr = (size_t)(nl - data) + 1;
	bool isok = size >= 3 && !memcmp(data, "ok ", 3),
	     iserr = size >= 6 && !memcmp(data, "error ", 6);
	FUZZ_CHECK(isok || iserr, "a reply that is neither 'ok N' nor 'error N' was accepted");
	FUZZ_CHECK(ok == isok, "an '%s' reply taken as %s", isok ? "ok" : "error",
		   ok ? "ok" : "error");
	/* the length: digits (leading zeros allowed), a value that fits */
	const uint8_t *d = data + (isok ? 3 : 6);
	size_t nd = (size_t)(nl - d);
	FUZZ_CHECK(nd > 0, "an empty length was accepted");
	uint64_t want = 0;
	for (size_t i = 0; i < nd; i++) {
		FUZZ_CHECK(d[i] >= '0' && d[i] <= '9', "a length with '%c' was accepted", d[i]);
		FUZZ_CHECK(!__builtin_mul_overflow(want, 10, &want) &&
				   !__builtin_add_overflow(want, (uint64_t)(d[i] - '0'), &want),
			   "a length beyond 2^64 was accepted");
	}
	char num[24];
	snprintf(num, sizeof(num), "%" PRIu64, want);
	FUZZ_CHECK(body.len == want && want <= size - hdr &&
			   !memcmp(body.buf, data + hdr, body.len),
		   "reply 'LEN %s': a body of %zu bytes, the reply had %zu after its header", num,
		   body.len, size - hdr);
	strbuf_release(&body);
	return 0;
}
