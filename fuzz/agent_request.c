/* A request line to a host's agent (tally_agent_parse: docs/remote.md), for
 * an agent of 0 to 7 profilers (the first byte). Oracles: an error is one
 * line; what is accepted names a tag that is a safe directory name, profilers
 * that exist, each once, and, written back as a line, parses to the same. */
#include "fuzz.h"

#include "tally/job.h"

static void same(const struct tally_agent_req *a, size_t nprof)
{
	static const char *names[] = { "status", "quit", "start", "stop", "clean" };
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, names[a->op]);
	if (a->tag)
		strbuf_addf(&sb, "\t%s", a->tag);
	if (a->op == TALLY_AGENT_START) {
		strbuf_addf(&sb, "\t%u\t", a->iter);
		for (size_t i = 0; i < a->nidx; i++)
			strbuf_addf(&sb, "%s%zu", i ? "," : "", a->idx[i]);
		if (!a->nidx)
			strbuf_addch(&sb, '-');
	}
	struct tally_agent_req b;
	FUZZ_CHECK(!tally_agent_parse(sb.buf, nprof, &b),
		   "written back, the request is refused: %s", tally_errmsg());
	FUZZ_CHECK(b.op == a->op && b.iter == a->iter && b.nidx == a->nidx,
		   "the request parsed back differs");
	FUZZ_CHECK(!a->tag == !b.tag && (!a->tag || !strcmp(a->tag, b.tag)),
		   "the tag parsed back differs");
	for (size_t i = 0; i < a->nidx; i++)
		FUZZ_CHECK(a->idx[i] == b.idx[i], "profiler %zu parsed back differs", i);
	tally_agent_req_release(&b);
	strbuf_release(&sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	size_t nprof = data[0] % 8;
	char *line = fuzz_cstr(data + 1, size - 1);
	struct tally_agent_req r;
	if (tally_agent_parse(line, nprof, &r)) {
		fuzz_check_errmsg();
		FUZZ_CHECK(!r.idx && !r.nidx, "profilers left after an error");
	} else {
		if (r.tag)
			FUZZ_CHECK(r.tag[0] && r.tag[0] != '.' && !strchr(r.tag, '/') &&
					   !strchr(r.tag, '\t'),
				   "tag '%s' is not a safe directory name", r.tag);
		for (size_t i = 0; i < r.nidx; i++) {
			FUZZ_CHECK(r.idx[i] < nprof, "profiler %zu of %zu", r.idx[i], nprof);
			for (size_t k = 0; k < i; k++)
				FUZZ_CHECK(r.idx[k] != r.idx[i], "profiler %zu twice", r.idx[i]);
		}
		same(&r, nprof);
		tally_agent_req_release(&r);
	}
	free(line);
	return 0;
}
