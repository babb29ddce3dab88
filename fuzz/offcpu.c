/* The off-CPU collector's parsers and state machine (lib/collect/offcpu.c,
 * docs/offcpu.md): the sched_switch format file as tracefs gives it
 * (tally_offcpu_parse_format), the raw data of its records
 * (tally_offcpu_parse_raw), and the switches they describe fed to the
 * interval machine (tally_offcpu_out / _in / _exit / _flush).
 *
 * Input: the format file's text, a NUL, then a program of steps, each an
 * opcode byte, a length byte L and L bytes: a switch (its L bytes are a raw
 * record, parsed with the format read, or with the real kernel's layout when
 * the text was refused), the time moving on, a task's exit, or a flush.
 *
 * Oracles: an error is one line; an accepted format has its fields inside
 * the first 4 KiB, a prev_state of 4 or 8 bytes and a minimum size that holds
 * every field; a raw record is refused exactly when it is shorter than that
 * minimum (ASan sees any read past it); every interval delivered is positive,
 * at least the minimum, of the event of its kind, of a task that switched out,
 * and ends no later than now; the counters add up to what was delivered, and
 * no more tasks are pending than have slots. */
#include "fuzz.h"

#include <linux/perf_event.h>

#include "tally/offcpu.h"

struct seen {
	uint64_t waits[2], ns[2], now, min_ns;
	uint32_t out_tids[256]; /* how many switch-outs of tid & 0xff */
};

static void got(void *ctx, const struct tally_rec *r)
{
	struct seen *s = ctx;
	FUZZ_CHECK(r->type == PERF_RECORD_SAMPLE, "record type %u", r->type);
	FUZZ_CHECK(r->event == 0 || r->event == 1, "event %d", r->event);
	FUZZ_CHECK(r->weight > 0 && r->weight >= s->min_ns && r->weight == r->period,
		   "weight %llu, minimum %llu", (unsigned long long)r->weight,
		   (unsigned long long)s->min_ns);
	FUZZ_CHECK(r->time + r->weight <= s->now,
		   "an interval from %llu of %llu ns ends after now %llu",
		   (unsigned long long)r->time, (unsigned long long)r->weight,
		   (unsigned long long)s->now);
	FUZZ_CHECK(s->out_tids[r->tid & 0xff], "an interval of task %u, which never switched out",
		   r->tid);
	FUZZ_CHECK(r->nr <= 4 && (!r->nr || r->chain), "a chain of %llu",
		   (unsigned long long)r->nr);
	for (uint64_t i = 0; i < r->nr; i++)
		FUZZ_CHECK(r->chain[i] == r->ip + i, "chain[%llu] is not what was given",
			   (unsigned long long)i);
	for (uint64_t i = 0; i < r->stack_len; i++)
		FUZZ_CHECK(r->stack[i] == (uint8_t)(r->ip + i),
			   "stack byte %llu is not what was given", (unsigned long long)i);
	s->waits[r->event]++;
	s->ns[r->event] += r->weight;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t tlen = nul ? (size_t)(nul - data) : size;
	char *text = fuzz_cstr(data, tlen);
	struct tally_offcpu_fmt f;
	if (tally_offcpu_parse_format(text, &f)) {
		fuzz_check_errmsg();
		/* the layout of this kernel's sched_switch (prev_state a long) */
		f = (struct tally_offcpu_fmt){ .id = 1,
					       .prev_pid_off = 24,
					       .prev_state_off = 32,
					       .prev_state_size = 8,
					       .next_pid_off = 56,
					       .min_size = 60 };
	} else {
		FUZZ_CHECK(f.prev_pid_off <= 4096 && f.prev_state_off <= 4096 &&
				   f.next_pid_off <= 4096,
			   "offsets %u %u %u", f.prev_pid_off, f.prev_state_off, f.next_pid_off);
		FUZZ_CHECK(f.prev_state_size == 4 || f.prev_state_size == 8,
			   "prev_state of %u bytes", f.prev_state_size);
		FUZZ_CHECK(f.min_size >= f.prev_pid_off + 4 && f.min_size >= f.next_pid_off + 4 &&
				   f.min_size >= f.prev_state_off + f.prev_state_size,
			   "minimum size %u does not hold the fields", f.min_size);
	}
	free(text);

	const uint8_t *p = nul ? nul + 1 : data + size, *end = data + size;
	struct seen s = { .now = 1 };
	s.min_ns = p < end ? (uint64_t)*p++ * 1000 : 0;
	struct tally_offcpu *o = tally_offcpu_new(0, 1, s.min_ns);
	uint64_t chain[4];
	uint8_t stack[64];
	while (end - p >= 2) {
		uint8_t op = p[0], len = p[1];
		p += 2;
		if ((size_t)(end - p) < len)
			len = (uint8_t)(end - p);
		/* exactly len bytes of its own, so that ASan sees a read past them */
		uint8_t *raw = xmalloc(len + 1u);
		memcpy(raw, p, len);
		p += len;
		switch (op & 3) {
		case 0: {
			struct tally_switch sw;
			int r = tally_offcpu_parse_raw(&f, raw, len, &sw);
			FUZZ_CHECK((r == 0) == (len >= f.min_size),
				   "raw record of %u bytes: %d (minimum %u)", len, r, f.min_size);
			if (r)
				break;
			uint32_t out = (uint32_t)sw.prev_pid & 0x3ff,
				 in = (uint32_t)sw.next_pid & 0x3ff;
			struct tally_rec rec = { .type = PERF_RECORD_SAMPLE,
						 .pid = out >> 2,
						 .tid = out,
						 .time = s.now,
						 .cpu = op >> 2,
						 .ip = op };
			rec.nr = (op >> 2) & 3;
			for (uint64_t i = 0; i < rec.nr; i++)
				chain[i] = rec.ip + i;
			rec.chain = rec.nr ? chain : NULL;
			rec.stack_len = op >> 4 & 3 ? (uint64_t)(op & 0x3f) : 0;
			for (uint64_t i = 0; i < rec.stack_len; i++)
				stack[i] = (uint8_t)(rec.ip + i);
			rec.stack = rec.stack_len ? stack : NULL;
			if (out && tally_offcpu_wait_kind(sw.prev_state) != TALLY_WAIT_EXIT)
				s.out_tids[out & 0xff]++;
			tally_offcpu_out(o, &rec, sw.prev_state);
			tally_offcpu_in(o, in, s.now, op >> 2, got, &s);
			break;
		}
		case 1: /* the time moves on */
			for (uint8_t i = 0; i < len && i < 4; i++)
				s.now += (uint64_t)raw[i] << (8 * i);
			break;
		case 2: /* a task ends */
			tally_offcpu_exit(o, len ? raw[0] | (uint32_t)(op >> 2 & 3) << 8 : 0);
			break;
		case 3:
			tally_offcpu_flush(o, s.now, got, &s);
			break;
		}
		free(raw);
	}
	tally_offcpu_flush(o, s.now, got, &s);
	struct tally_offcpu_stats st;
	tally_offcpu_stats(o, &st);
	for (int k = 0; k < 2; k++) {
		FUZZ_CHECK(st.waits[k] == s.waits[k], "%s: %llu waits counted, %llu delivered",
			   k ? "preempted" : "blocked", (unsigned long long)st.waits[k],
			   (unsigned long long)s.waits[k]);
		FUZZ_CHECK(st.ns[k] == s.ns[k], "%s: %llu ns counted, %llu delivered",
			   k ? "preempted" : "blocked", (unsigned long long)st.ns[k],
			   (unsigned long long)s.ns[k]);
	}
	FUZZ_CHECK(st.pending == 0, "%llu tasks still pending after a flush",
		   (unsigned long long)st.pending);
	FUZZ_CHECK(tally_offcpu_slots(o) <= 1024 + 2 * 1024, "%zu slots for at most 1024 tasks",
		   tally_offcpu_slots(o));
	tally_offcpu_free(o);
	return 0;
}
