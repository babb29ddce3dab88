/* What a remote host answers to the job (tally_agent_answer: docs/remote.md):
 * the stdout and stderr of `tally job agent start|ctl` there, as ssh hands
 * them back, and its exit status. The input is a byte (bit 0: the word,
 * "ok" or "ready"; bits 1-2: the exit status, 0, 1, 3 or 255), the stdout, a
 * NUL, then the stderr. Oracles: an error is one line naming the host, with
 * no control character (what the host said is escaped: no forged status
 * line, no terminal escape) and bounded, of the kind its status says; what
 * is accepted exited 0 and is the word, then printable ASCII, on one line. */
#include "fuzz.h"

#include "tally/job.h"

static void printable(const char *s, size_t max, const char *what)
{
	size_t n = strlen(s);
	FUZZ_CHECK(n <= max, "%s of %zu bytes", what, n);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK((unsigned char)s[i] >= 0x20 && s[i] != 0x7f,
			   "a control character (0x%02x) in %s: '%s'", (unsigned char)s[i], what,
			   s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	static const int statuses[] = { 0, 1, 3, 255 };
	const char *word = data[0] & 1 ? "ready" : "ok";
	int status = statuses[(data[0] >> 1) & 3];
	const uint8_t *out = data + 1, *nul = memchr(out, 0, size - 1);
	size_t olen = nul ? (size_t)(nul - out) : size - 1;
	/* stdout as the job holds it: a strbuf (NUL after it; a NUL inside it counts) */
	char *o = fuzz_cstr(out, olen);
	char *err = nul ? fuzz_cstr(nul + 1, size - 1 - olen - 1) : NULL;
	struct strbuf rest = STRBUF_INIT;
	int r = tally_agent_answer("fuzz-host", word, o, olen, status, err, &rest);
	if (r) {
		fuzz_check_errmsg();
		const char *m = tally_errmsg();
		FUZZ_CHECK(strstr(m, "host 'fuzz-host'") == m,
			   "the error does not begin with the host: '%s'", m);
		/* the host's text escaped: at most 4 bytes for each of its 1000, and ours */
		printable(m, 4 * TALLY_AGENT_ANSWER_MAX + 200, "the error");
		FUZZ_CHECK(status == 255 ? r == -EHOSTUNREACH
			   : status == 3 ? r == -ENOTCONN
			   : status ? r == -EIO
				    : r == -EPROTO,
			   "error %d for exit %d", r, status);
	} else {
		FUZZ_CHECK(!status, "accepted with exit %d", status);
		size_t wl = strlen(word);
		FUZZ_CHECK(olen >= wl && !memcmp(o, word, wl), "accepted without '%s'", word);
		printable(rest.buf ? rest.buf : "", TALLY_AGENT_ANSWER_MAX, "the answer");
		FUZZ_CHECK(!memchr(o, 0, olen), "a NUL in an accepted answer");
	}
	strbuf_release(&rest);
	free(o);
	free(err);
	return 0;
}
