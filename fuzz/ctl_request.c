/* A control request as the daemon takes it from its socket: one line through
 * tally_ctl_parse_line (the first input byte is how many CPUs the machine
 * has, 1 to 256; the line is the rest, up to a NUL). Oracles: an accepted
 * request is one of the commands with arguments in range (a CPU set of the
 * machine's size, at most one of freq and period, each within its bounds), and
 * parsed again from its words it is the same; a refusal is a one-line reply. */
#include "fuzz.h"

#include "tally/ctl.h"

#include <inttypes.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	int ncpus = data[0] + 1;
	char *line = fuzz_cstr(data + 1, size - 1);
	struct tally_ctl_req q;
	int r = tally_ctl_parse_line(line, ncpus, &q);
	if (r) {
		fuzz_check_errmsg();
		FUZZ_CHECK(!q.cpus, "a refused request kept its CPU set");
		free(line);
		return 0;
	}
	FUZZ_CHECK(q.op >= TALLY_CTL_START && q.op <= TALLY_CTL_PEEK, "op %d", (int)q.op);
	if (q.op == TALLY_CTL_CPUS) {
		FUZZ_CHECK(q.cpus && q.ncpus == ncpus, "a cpus request for %d CPUs on %d", q.ncpus,
			   ncpus);
		FUZZ_CHECK(!(q.freq && q.period), "both freq and period");
		FUZZ_CHECK(!q.freq || q.freq <= 1000000, "freq %" PRIu64, q.freq);
		FUZZ_CHECK(!q.period || q.period <= UINT64_MAX >> 2, "period %" PRIu64, q.period);
		/* the same request, written out plainly, parses the same */
		struct strbuf sb = STRBUF_INIT;
		strbuf_addstr(&sb, "cpus ");
		bool any = false;
		for (int i = 0; i < ncpus; i++)
			if (q.cpus[i]) {
				strbuf_addf(&sb, "%s%d", any ? "," : "", i);
				any = true;
			}
		if (!any)
			strbuf_addstr(&sb, "none");
		strbuf_addstr(&sb, q.on ? " on" : " off");
		if (q.freq)
			strbuf_addf(&sb, " freq %" PRIu64, q.freq);
		if (q.period)
			strbuf_addf(&sb, " period %" PRIu64, q.period);
		FUZZ_CHECK(any, "a cpus request that names no CPU was accepted: '%s'", line);
		struct tally_ctl_req q2;
		r = tally_ctl_parse_line(sb.buf, ncpus, &q2);
		FUZZ_CHECK(r == 0 && q2.op == q.op && q2.on == q.on && q2.freq == q.freq &&
				   q2.period == q.period &&
				   !memcmp(q2.cpus, q.cpus, (size_t)ncpus * sizeof(bool)),
			   "'%s' and its plain form '%s' differ", line, sb.buf);
		tally_ctl_req_release(&q2);
		strbuf_release(&sb);
	}
	tally_ctl_req_release(&q);
	free(line);
	return 0;
}
