/* Unit tests for lib/aggregate: process mappings, the image registry, frame and
 * stack interning, counts, and synthetic perf records fed through
 * tally_agg_record the way the collector would hand them over. */
#define _GNU_SOURCE
#include "unit.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "tally/agg.h"

/* ---- building kernel records (layouts from linux/perf_event.h) ---- */

/* Every record lives in an 8-byte aligned buffer, as in the ring. */
struct recbuf {
	union {
		struct perf_event_header h;
		uint64_t align;
		unsigned char bytes[4096 + 128];
	} u;
	struct tally_rec rec;
};

/* PERF_RECORD_MMAP2 as documented in perf_event.h (sample_id omitted). */
struct mmap2_body {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	union {
		struct {
			uint32_t maj, min;
			uint64_t ino, ino_generation;
		} f;
		struct {
			uint8_t build_id_size, reserved1;
			uint16_t reserved2;
			uint8_t build_id[20];
		} b;
	} u;
	uint32_t prot, flags;
	char filename[];
};

static const struct tally_rec *mk_mmap2(struct recbuf *b, uint32_t pid, uint64_t addr, uint64_t len,
					uint64_t pgoff, uint32_t prot, const char *name,
					const uint8_t *build_id, uint8_t bid_len, uint64_t ino)
{
	memset(b, 0, sizeof(*b));
	struct mmap2_body *m = (struct mmap2_body *)(&b->u.h + 1);
	m->pid = m->tid = pid;
	m->addr = addr;
	m->len = len;
	m->pgoff = pgoff;
	m->prot = prot;
	m->flags = MAP_PRIVATE;
	uint16_t misc = PERF_RECORD_MISC_USER;
	if (build_id) {
		misc |= PERF_RECORD_MISC_MMAP_BUILD_ID;
		m->u.b.build_id_size = bid_len;
		memcpy(m->u.b.build_id, build_id, bid_len);
	} else {
		m->u.f.maj = 8;
		m->u.f.min = 1;
		m->u.f.ino = ino;
		m->u.f.ino_generation = 0;
	}
	size_t nl = strlen(name) + 1;
	memcpy(m->filename, name, nl);
	size_t size = sizeof(b->u.h) + sizeof(*m) + ((nl + 7) & ~(size_t)7);
	b->u.h.type = PERF_RECORD_MMAP2;
	b->u.h.misc = misc;
	b->u.h.size = (uint16_t)size;
	b->rec = (struct tally_rec){ .raw = &b->u.h,
				     .type = PERF_RECORD_MMAP2,
				     .misc = misc,
				     .event = -1,
				     .pid = pid,
				     .tid = pid };
	return &b->rec;
}

static const struct tally_rec *mk_comm(struct recbuf *b, uint32_t pid, uint32_t tid,
				       const char *comm, bool exec)
{
	memset(b, 0, sizeof(*b));
	uint32_t *ids = (uint32_t *)(&b->u.h + 1);
	ids[0] = pid;
	ids[1] = tid;
	char *c = (char *)(ids + 2);
	size_t nl = strlen(comm) + 1;
	memcpy(c, comm, nl);
	uint16_t misc = PERF_RECORD_MISC_USER | (exec ? PERF_RECORD_MISC_COMM_EXEC : 0);
	b->u.h.type = PERF_RECORD_COMM;
	b->u.h.misc = misc;
	b->u.h.size = (uint16_t)(sizeof(b->u.h) + 8 + ((nl + 7) & ~(size_t)7));
	b->rec = (struct tally_rec){ .raw = &b->u.h,
				     .type = PERF_RECORD_COMM,
				     .misc = misc,
				     .event = -1,
				     .pid = pid,
				     .tid = tid };
	return &b->rec;
}

/* FORK and EXIT share a layout: pid, ppid, tid, ptid, time. */
static const struct tally_rec *mk_task(struct recbuf *b, uint32_t type, uint32_t pid, uint32_t ppid,
				       uint32_t tid, uint32_t ptid)
{
	memset(b, 0, sizeof(*b));
	uint32_t *f = (uint32_t *)(&b->u.h + 1);
	f[0] = pid;
	f[1] = ppid;
	f[2] = tid;
	f[3] = ptid;
	b->u.h.type = type;
	b->u.h.size = (uint16_t)(sizeof(b->u.h) + 16 + 8);
	b->rec = (struct tally_rec){
		.raw = &b->u.h, .type = type, .event = -1, .pid = pid, .tid = tid
	};
	return &b->rec;
}

static const struct tally_rec *mk_lost(struct recbuf *b, uint64_t n)
{
	memset(b, 0, sizeof(*b));
	uint64_t *p = (uint64_t *)(&b->u.h + 1);
	p[0] = 1234; /* id */
	p[1] = n;
	b->u.h.type = PERF_RECORD_LOST;
	b->u.h.size = (uint16_t)(sizeof(b->u.h) + 16);
	b->rec = (struct tally_rec){ .raw = &b->u.h, .type = PERF_RECORD_LOST, .event = -1 };
	return &b->rec;
}

static const struct tally_rec *mk_lost_samples(struct recbuf *b, uint64_t n)
{
	memset(b, 0, sizeof(*b));
	uint64_t *p = (uint64_t *)(&b->u.h + 1);
	p[0] = n;
	b->u.h.type = PERF_RECORD_LOST_SAMPLES;
	b->u.h.size = (uint16_t)(sizeof(b->u.h) + 8);
	b->rec =
		(struct tally_rec){ .raw = &b->u.h, .type = PERF_RECORD_LOST_SAMPLES, .event = -1 };
	return &b->rec;
}

static const struct tally_rec *mk_sample(struct recbuf *b, uint32_t pid, uint64_t ip, bool kernel,
					 int event, const uint64_t *chain, uint64_t nr)
{
	memset(b, 0, sizeof(*b));
	uint16_t misc = kernel ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER;
	b->u.h.type = PERF_RECORD_SAMPLE;
	b->u.h.misc = misc;
	b->u.h.size = sizeof(b->u.h);
	b->rec = (struct tally_rec){ .raw = &b->u.h,
				     .type = PERF_RECORD_SAMPLE,
				     .misc = misc,
				     .event = event,
				     .pid = pid,
				     .tid = pid,
				     .cpu = 0,
				     .time = 1,
				     .ip = ip,
				     .period = 1,
				     .nr = nr,
				     .chain = chain };
	return &b->rec;
}

#define PROT_RX (PROT_READ | PROT_EXEC)
#define KADDR 0xffffffff81000010ULL

/* The single frame of the stack counted in row r. */
static const struct tally_frame *row_leaf(const struct tally_agg *a, size_t r)
{
	assert_true(r < a->nrows);
	const struct tally_stack *st = &a->stacks[a->rows[r].stack];
	assert_true(st->len >= 1);
	return &a->frames[a->stack_frames[st->first]];
}

/* The count of the row whose stack is exactly [image:offset], pid, event. */
static uint64_t count_of(const struct tally_agg *a, uint32_t image, uint64_t offset, int pid,
			 int event)
{
	uint64_t sum = 0;
	for (size_t r = 0; r < a->nrows; r++) {
		const struct tally_stack *st = &a->stacks[a->rows[r].stack];
		const struct tally_frame *f = &a->frames[a->stack_frames[st->first]];
		if (st->len == 1 && f->image == image && f->offset == offset &&
		    a->rows[r].pid == pid)
			sum += a->counts[r * (size_t)a->nevents + (size_t)event];
	}
	return sum;
}

/* ---- maps ---- */

static void check_map(const struct tally_map *m, uint64_t start, uint64_t end, uint64_t pgoff,
		      uint32_t image)
{
	if (m->start != start || m->end != end || m->pgoff != pgoff || m->image != image)
		fail_msg(
			"map [%#llx,%#llx) pgoff %#llx image %u, want [%#llx,%#llx) pgoff %#llx image %u",
			(unsigned long long)m->start, (unsigned long long)m->end,
			(unsigned long long)m->pgoff, m->image, (unsigned long long)start,
			(unsigned long long)end, (unsigned long long)pgoff, image);
}

static void check_sorted(const struct tally_proc *p)
{
	for (size_t i = 0; i < p->nmaps; i++) {
		assert_true(p->maps[i].start < p->maps[i].end);
		if (i)
			assert_true(p->maps[i - 1].end <= p->maps[i].start);
	}
}

static void test_agg__map_add_disjoint_sorted(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_proc *p = tally_agg_proc(&a, 7, true);
	/* inserted out of order: kept sorted */
	tally_proc_add_map(p, 0x5000, 0x6000, 0x0, 3);
	tally_proc_add_map(p, 0x1000, 0x2000, 0x10, 1);
	tally_proc_add_map(p, 0x3000, 0x4000, 0x20, 2);
	tally_proc_add_map(p, 0x2000, 0x3000, 0x30, 4); /* adjacent on both sides: no overlap */
	assert_int_equal(p->nmaps, 4);
	check_sorted(p);
	check_map(&p->maps[0], 0x1000, 0x2000, 0x10, 1);
	check_map(&p->maps[1], 0x2000, 0x3000, 0x30, 4);
	check_map(&p->maps[2], 0x3000, 0x4000, 0x20, 2);
	check_map(&p->maps[3], 0x5000, 0x6000, 0x0, 3);
	/* an empty or inverted range is ignored */
	tally_proc_add_map(p, 0x8000, 0x8000, 0, 9);
	tally_proc_add_map(p, 0x9000, 0x8000, 0, 9);
	assert_int_equal(p->nmaps, 4);
	tally_agg_release(&a);
}

static void test_agg__map_split_middle(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_proc *p = tally_agg_proc(&a, 7, true);
	tally_proc_add_map(p, 0x10000, 0x20000, 0x1000, 1);
	tally_proc_add_map(p, 0x14000, 0x15000, 0x0, 2);
	assert_int_equal(p->nmaps, 3);
	check_sorted(p);
	check_map(&p->maps[0], 0x10000, 0x14000, 0x1000, 1);
	check_map(&p->maps[1], 0x14000, 0x15000, 0x0, 2);
	/* the tail keeps mapping the same file bytes it did before */
	check_map(&p->maps[2], 0x15000, 0x20000, 0x1000 + 0x5000, 1);
	tally_agg_release(&a);
}

static void test_agg__map_trim_ends(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_proc *p = tally_agg_proc(&a, 7, true);
	/* new map over the end of an old one */
	tally_proc_add_map(p, 0x1000, 0x3000, 0x0, 1);
	tally_proc_add_map(p, 0x2000, 0x4000, 0x500, 2);
	assert_int_equal(p->nmaps, 2);
	check_map(&p->maps[0], 0x1000, 0x2000, 0x0, 1);
	check_map(&p->maps[1], 0x2000, 0x4000, 0x500, 2);

	/* new map over the start of an old one: the rest moves its pgoff */
	struct tally_proc *q = tally_agg_proc(&a, 8, true);
	tally_proc_add_map(q, 0x2000, 0x4000, 0x10000, 1);
	tally_proc_add_map(q, 0x1000, 0x3000, 0x0, 2);
	assert_int_equal(q->nmaps, 2);
	check_map(&q->maps[0], 0x1000, 0x3000, 0x0, 2);
	check_map(&q->maps[1], 0x3000, 0x4000, 0x11000, 1);

	/* new map bridging two old ones, trimming the end of one and the start of the other */
	struct tally_proc *r = tally_agg_proc(&a, 9, true);
	tally_proc_add_map(r, 0x1000, 0x3000, 0x0, 1);
	tally_proc_add_map(r, 0x3000, 0x6000, 0x0, 2);
	tally_proc_add_map(r, 0x2000, 0x4000, 0x0, 3);
	assert_int_equal(r->nmaps, 3);
	check_map(&r->maps[0], 0x1000, 0x2000, 0x0, 1);
	check_map(&r->maps[1], 0x2000, 0x4000, 0x0, 3);
	check_map(&r->maps[2], 0x4000, 0x6000, 0x1000, 2);
	tally_agg_release(&a);
}

static void test_agg__map_replace(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_proc *p = tally_agg_proc(&a, 7, true);
	tally_proc_add_map(p, 0x1000, 0x2000, 0x0, 1);
	tally_proc_add_map(p, 0x1000, 0x2000, 0x3000, 2);
	assert_int_equal(p->nmaps, 1);
	check_map(&p->maps[0], 0x1000, 0x2000, 0x3000, 2);

	/* one new map swallowing several old ones, keeping those outside */
	tally_proc_add_map(p, 0x2000, 0x3000, 0x0, 3);
	tally_proc_add_map(p, 0x3000, 0x4000, 0x0, 4);
	tally_proc_add_map(p, 0x5000, 0x6000, 0x0, 5);
	tally_proc_add_map(p, 0x8000, 0x9000, 0x0, 6);
	tally_proc_add_map(p, 0x1000, 0x7000, 0x0, 7);
	assert_int_equal(p->nmaps, 2);
	check_map(&p->maps[0], 0x1000, 0x7000, 0x0, 7);
	check_map(&p->maps[1], 0x8000, 0x9000, 0x0, 6);
	tally_agg_release(&a);
}

static void test_agg__map_find(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_proc *p = tally_agg_proc(&a, 7, true);
	assert_null(tally_proc_find_map(p, 0x1000)); /* no maps at all */
	/* 100 maps with gaps, inserted in a scrambled order */
	for (uint64_t k = 0; k < 100; k++) {
		uint64_t i = (k * 37) % 100;
		tally_proc_add_map(p, 0x100000 + i * 0x2000, 0x100000 + i * 0x2000 + 0x1000, i,
				   (uint32_t)i);
	}
	assert_int_equal(p->nmaps, 100);
	check_sorted(p);
	for (uint64_t i = 0; i < 100; i++) {
		uint64_t s = 0x100000 + i * 0x2000;
		const struct tally_map *m = tally_proc_find_map(p, s);
		assert_non_null(m);
		assert_int_equal(m->image, i);
		m = tally_proc_find_map(p, s + 0xfff);
		assert_non_null(m);
		assert_int_equal(m->image, i);
		assert_null(tally_proc_find_map(p, s + 0x1000)); /* end is exclusive: a gap */
		assert_null(tally_proc_find_map(p, s - 1));
	}
	assert_null(tally_proc_find_map(p, 0));
	assert_null(tally_proc_find_map(p, UINT64_MAX));
	/* the last-hit cache must not answer for an address it does not contain */
	const struct tally_map *m = tally_proc_find_map(p, 0x100000 + 50 * 0x2000);
	assert_int_equal(m->image, 50);
	m = tally_proc_find_map(p, 0x100000 + 51 * 0x2000 + 5);
	assert_int_equal(m->image, 51);
	/* a change to the maps invalidates the cache */
	tally_proc_add_map(p, 0x100000 + 51 * 0x2000, 0x100000 + 51 * 0x2000 + 0x1000, 0, 999);
	m = tally_proc_find_map(p, 0x100000 + 51 * 0x2000 + 5);
	assert_int_equal(m->image, 999);
	tally_agg_release(&a);
}

/* ---- registry and interning ---- */

static void test_agg__init(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 3, true, false);
	assert_int_equal(a.nevents, 3);
	assert_true(a.per_pid);
	assert_int_equal(a.nimages, 1);
	assert_int_equal(a.images[a.kernel_image].kind, TALLY_IMG_KERNEL);
	for (int e = 0; e < 3; e++)
		assert_int_equal(a.samples[e], 0);
	assert_int_equal(a.nrows, 0);
	tally_agg_release(&a);
	tally_agg_release(&a); /* released twice: harmless */
}

static void test_agg__image_dedupe(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	uint8_t id1[20], id2[20];
	for (int i = 0; i < 20; i++) {
		id1[i] = (uint8_t)i;
		id2[i] = (uint8_t)(i + 1);
	}
	char path[] = "/usr/bin/thing";
	struct tally_image k = { .kind = TALLY_IMG_FILE, .path = path, .build_id_len = 20 };
	memcpy(k.build_id, id1, 20);
	uint32_t i1 = tally_agg_image(&a, &k);
	assert_int_not_equal(i1, a.kernel_image);
	/* the registry copies the path */
	path[1] = 'X';
	assert_string_equal(a.images[i1].path, "/usr/bin/thing");
	path[1] = 'u';
	struct tally_image k2 = k;
	char path2[] = "/usr/bin/thing";
	k2.path = path2;
	assert_int_equal(tally_agg_image(&a, &k2), i1);
	/* another build-id: another image */
	memcpy(k2.build_id, id2, 20);
	uint32_t i2 = tally_agg_image(&a, &k2);
	assert_int_not_equal(i2, i1);
	assert_int_equal(tally_agg_image(&a, &k2), i2);
	/* a shorter build-id prefix is another id too */
	k2.build_id_len = 8;
	memcpy(k2.build_id, id1, 8);
	uint32_t i3 = tally_agg_image(&a, &k2);
	assert_int_not_equal(i3, i1);
	/* same build-id, other path: another image */
	char path3[] = "/usr/bin/other";
	k.path = path3;
	uint32_t i4 = tally_agg_image(&a, &k);
	assert_true(i4 != i1 && i4 != i2 && i4 != i3);
	assert_int_equal(a.nimages, 5);
	tally_agg_release(&a);
}

static void test_agg__image_no_build_id(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_image k = {
		.kind = TALLY_IMG_FILE, .path = (char *)"/lib/x.so", .maj = 8, .min = 1, .ino = 42
	};
	uint32_t i1 = tally_agg_image(&a, &k);
	assert_int_equal(tally_agg_image(&a, &k), i1);
	k.ino = 43; /* the file was replaced */
	uint32_t i2 = tally_agg_image(&a, &k);
	assert_int_not_equal(i1, i2);
	k.ino = 42;
	k.ino_gen = 1;
	assert_int_not_equal(tally_agg_image(&a, &k), i1);
	k.ino_gen = 0;
	k.min = 2;
	assert_int_not_equal(tally_agg_image(&a, &k), i1);
	/* the pid a file was seen in does not split it */
	k.min = 1;
	k.pid = 999;
	assert_int_equal(tally_agg_image(&a, &k), i1);
	tally_agg_release(&a);
}

static void test_agg__image_nomap_per_pid(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct tally_image k = { .kind = TALLY_IMG_NOMAP, .path = (char *)"", .pid = 10 };
	uint32_t n10 = tally_agg_image(&a, &k);
	k.pid = 11;
	uint32_t n11 = tally_agg_image(&a, &k);
	assert_int_not_equal(n10, n11);
	k.pid = 10;
	assert_int_equal(tally_agg_image(&a, &k), n10);
	/* kinds are distinct even with equal paths */
	struct tally_image j = { .kind = TALLY_IMG_JIT, .path = (char *)"", .pid = 10 };
	assert_int_not_equal(tally_agg_image(&a, &j), n10);
	tally_agg_release(&a);
}

static void test_agg__frame_stack_interning(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	uint32_t f1 = tally_agg_frame(&a, 1, 0x10);
	uint32_t f2 = tally_agg_frame(&a, 1, 0x20);
	uint32_t f3 = tally_agg_frame(&a, 2, 0x10);
	assert_int_equal(tally_agg_frame(&a, 1, 0x10), f1);
	assert_true(f1 != f2 && f1 != f3 && f2 != f3);
	assert_int_equal(a.nframes, 3);
	assert_int_equal(a.frames[f3].image, 2);
	assert_int_equal(a.frames[f3].offset, 0x10);

	uint32_t s_a[] = { f1, f2, f3 };
	uint32_t s_b[] = { f1, f2, f3 };
	uint32_t s_c[] = { f1, f2 };
	uint32_t s_d[] = { f2, f1, f3 };
	uint32_t st1 = tally_agg_stack(&a, s_a, 3);
	assert_int_equal(tally_agg_stack(&a, s_b, 3), st1);
	uint32_t st2 = tally_agg_stack(&a, s_c, 2);
	assert_int_not_equal(st2, st1);
	uint32_t st3 = tally_agg_stack(&a, s_d, 3);
	assert_true(st3 != st1 && st3 != st2);
	assert_int_equal(tally_agg_stack(&a, s_c, 2), st2);
	assert_int_equal(a.nstacks, 3);
	assert_int_equal(a.stacks[st1].len, 3);
	assert_memory_equal(&a.stack_frames[a.stacks[st1].first], s_a, sizeof(s_a));
	assert_memory_equal(&a.stack_frames[a.stacks[st2].first], s_c, sizeof(s_c));
	assert_memory_equal(&a.stack_frames[a.stacks[st3].first], s_d, sizeof(s_d));

	/* many of each, through several table resizes */
	for (uint32_t i = 0; i < 5000; i++)
		assert_int_equal(tally_agg_frame(&a, i % 7, 0x1000 + i), 3 + i);
	for (uint32_t i = 0; i < 5000; i++)
		assert_int_equal(tally_agg_frame(&a, i % 7, 0x1000 + i), 3 + i);
	for (uint32_t i = 0; i < 3000; i++) {
		uint32_t fr[4] = { i, i + 1, i + 2, i + 3 };
		assert_int_equal(tally_agg_stack(&a, fr, 4), 3 + i);
	}
	for (uint32_t i = 0; i < 3000; i++) {
		uint32_t fr[4] = { i, i + 1, i + 2, i + 3 };
		assert_int_equal(tally_agg_stack(&a, fr, 4), 3 + i);
	}
	/* earlier stacks survived the reallocation of stack_frames */
	assert_int_equal(tally_agg_stack(&a, s_a, 3), st1);
	assert_memory_equal(&a.stack_frames[a.stacks[st1].first], s_a, sizeof(s_a));
	tally_agg_release(&a);
}

static void test_agg__count(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 2, true, false);
	uint32_t f = tally_agg_frame(&a, 0, 0x1);
	uint32_t g = tally_agg_frame(&a, 0, 0x2);
	uint32_t s1 = tally_agg_stack(&a, &f, 1);
	uint32_t s2 = tally_agg_stack(&a, &g, 1);
	tally_agg_count(&a, s1, 100, 0, 1);
	tally_agg_count(&a, s1, 100, 0, 2);
	tally_agg_count(&a, s1, 100, 1, 5);
	tally_agg_count(&a, s1, 200, 0, 7);
	tally_agg_count(&a, s2, 100, 1, 11);
	assert_int_equal(a.nrows, 3);
	for (size_t r = 0; r < a.nrows; r++) {
		const uint64_t *c = &a.counts[r * 2];
		if (a.rows[r].stack == s1 && a.rows[r].pid == 100) {
			assert_int_equal(c[0], 3);
			assert_int_equal(c[1], 5);
		} else if (a.rows[r].stack == s1 && a.rows[r].pid == 200) {
			assert_int_equal(c[0], 7);
			assert_int_equal(c[1], 0);
		} else if (a.rows[r].stack == s2 && a.rows[r].pid == 100) {
			assert_int_equal(c[0], 0);
			assert_int_equal(c[1], 11);
		} else {
			fail_msg("unexpected row stack %u pid %d", a.rows[r].stack, a.rows[r].pid);
		}
	}
	/* many rows: counts stay zeroed for new rows after the arrays grow */
	for (uint32_t i = 0; i < 2000; i++) {
		uint32_t fr = tally_agg_frame(&a, 1, i);
		uint32_t st = tally_agg_stack(&a, &fr, 1);
		tally_agg_count(&a, st, 1, (int)(i % 2), i + 1);
	}
	assert_int_equal(a.nrows, 2003);
	uint64_t tot[2] = { 0, 0 };
	for (size_t r = 0; r < a.nrows; r++) {
		tot[0] += a.counts[r * 2];
		tot[1] += a.counts[r * 2 + 1];
	}
	/* sum over i of (i+1): odd i+1 for even i go to event 0 */
	uint64_t want0 = 0, want1 = 0;
	for (uint32_t i = 0; i < 2000; i++)
		if (i % 2)
			want1 += i + 1;
		else
			want0 += i + 1;
	assert_int_equal(tot[0], want0 + 3 + 7);
	assert_int_equal(tot[1], want1 + 5 + 11);
	tally_agg_release(&a);
}

static void test_agg__proc_lookup(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	assert_null(tally_agg_proc(&a, 5, false));
	struct tally_proc *p5 = tally_agg_proc(&a, 5, true);
	assert_non_null(p5);
	assert_int_equal(p5->pid, 5);
	assert_ptr_equal(tally_agg_proc(&a, 5, true), p5);
	for (int pid = 1000; pid < 3000; pid++)
		tally_agg_proc(&a, pid, true);
	assert_int_equal(a.nprocs, 2001);
	assert_ptr_equal(tally_agg_proc(&a, 5, false), p5);
	for (int pid = 1000; pid < 3000; pid++)
		assert_int_equal(tally_agg_proc(&a, pid, false)->pid, pid);
	assert_null(tally_agg_proc(&a, 3000, false));
	tally_agg_release(&a);
}

/* ---- records ---- */

static void test_agg__record_mmap2_sample(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	struct tally_proc *p = tally_agg_proc(&a, 100, false);
	assert_non_null(p);
	assert_int_equal(p->nmaps, 1);
	assert_string_equal(p->exe, "/bin/true");

	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	assert_int_equal(a.samples[0], 1);
	assert_int_equal(a.nrows, 1);
	const struct tally_frame *f = row_leaf(&a, 0);
	const uint32_t img = f->image;
	assert_int_equal(a.stacks[a.rows[0].stack].len, 1);
	assert_int_equal(a.images[img].kind, TALLY_IMG_FILE);
	assert_string_equal(a.images[img].path, "/bin/true");
	assert_int_equal(a.images[img].ino, 77);
	assert_int_equal(f->offset, 0x1010);
	assert_int_equal(a.counts[0], 1);
	assert_int_equal(a.rows[0].pid, 0); /* not per-pid */
	assert_true(p->sampled);

	/* the same place again: the same row, counted twice */
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	assert_int_equal(a.nrows, 1);
	assert_int_equal(a.counts[0], 2);
	/* the last byte of the mapping */
	tally_agg_record(&a, mk_sample(&b, 100, 0x401fff, false, 0, NULL, 0));
	assert_int_equal(count_of(&a, img, 0x2fff, 0, 0), 1);
	assert_int_equal(a.samples[0], 3);
	tally_agg_release(&a);
}

/* A ring that lost records may have lost a mapping's: an address outside a
 * live process's maps reads /proc/PID/maps again, once for each loss, so its
 * code is named (here this test's own libc, which no record mapped), unless
 * the process there now started after the sample (a reused pid). */
static void test_agg__lost_rereads_maps(void **state)
{
	(void)state;
	uint64_t ip = 0;
	char line[4608];
	FILE *f = fopen("/proc/self/maps", "re");
	assert_non_null(f);
	while (!ip && fgets(line, sizeof(line), f)) {
		unsigned long long start, end;
		char perms[8];
		if (sscanf(line, "%llx-%llx %7s", &start, &end, perms) == 3 && perms[2] == 'x' &&
		    strstr(line, "/libc.so"))
			ip = start + 0x10;
	}
	fclose(f);
	if (!ip)
		skip(); /* no libc.so mapped: a static build */
	uint32_t pid = (uint32_t)getpid();
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(&a, mk_comm(&b, pid, pid, "unit", false));
	tally_agg_record(&a, mk_sample(&b, pid, ip, false, 0, NULL, 0));
	assert_int_equal(a.images[row_leaf(&a, 0)->image].kind, TALLY_IMG_NOMAP);
	assert_int_equal(a.maps_reread, 0); /* nothing lost: the records are the truth */

	tally_agg_record(&a, mk_lost(&b, 3));
	/* a sample from before this process started (mk_sample's time is 1 ns
	 * after boot): the pid's process now is another one, a reused pid,
	 * whose maps are not this sample's; its code stays nomap */
	tally_agg_record(&a, mk_sample(&b, pid, ip, false, 0, NULL, 0));
	assert_int_equal(a.maps_reread, 0);
	assert_int_equal(a.images[row_leaf(&a, 0)->image].kind, TALLY_IMG_NOMAP);
	assert_int_equal(a.nrows, 1);

	/* the next loss, a second later, and a sample of this process's life */
	a.lost_gen_at -= 2;
	tally_agg_record(&a, mk_lost(&b, 3));
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	mk_sample(&b, pid, ip, false, 0, NULL, 0);
	b.rec.time = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	tally_agg_record(&a, &b.rec);
	assert_int_equal(a.maps_reread, 1);
	assert_int_equal(a.nrows, 2);
	const struct tally_image *im = &a.images[row_leaf(&a, 1)->image];
	assert_int_equal(im->kind, TALLY_IMG_FILE);
	assert_non_null(strstr(im->path, "/libc.so"));
	/* an address no mapping holds, after the same loss: not read again */
	mk_sample(&b, pid, 0x1000, false, 0, NULL, 0);
	b.rec.time = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	tally_agg_record(&a, &b.rec);
	assert_int_equal(a.maps_reread, 1);
	/* nor for a process that exited */
	tally_agg_record(&a, mk_comm(&b, 999999, 999999, "gone", false));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_EXIT, 999999, 1, 999999, 1));
	a.lost_gen_at -= 2; /* the next loss a second later */
	tally_agg_record(&a, mk_lost(&b, 1));
	tally_agg_record(&a, mk_sample(&b, 999999, ip, false, 0, NULL, 0));
	assert_int_equal(a.maps_reread, 1);
	tally_agg_release(&a);
}

/* Each count keeps the sum of its samples' weights: tally_rec.weight where the
 * collector set one (the period really in effect), else the reported period. */
static void test_agg__record_weights(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	struct tally_rec *r = (struct tally_rec *)mk_sample(&b, 100, 0x400010, false, 0, NULL, 0);
	r->period = 1000000;
	r->weight = 1090000;
	tally_agg_record(&a, r);
	r = (struct tally_rec *)mk_sample(&b, 100, 0x400010, false, 0, NULL, 0);
	r->period = 1000000;
	r->weight = 0; /* none set: the period */
	tally_agg_record(&a, r);
	assert_int_equal(a.nrows, 1);
	assert_int_equal(a.counts[0], 2);
	assert_int_equal(a.weights[0], 2090000);
	tally_agg_release(&a);
}

/* The process's command name is in the key without --per-pid: two programs
 * at the same place are two rows; a rename (exec) starts a new one; the idle
 * task is swapper. */
static void test_agg__comm_in_key(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	for (uint32_t pid = 100; pid <= 102; pid++) {
		tally_agg_record(&a, mk_mmap2(&b, pid, 0x400000, 0x2000, 0x1000, PROT_RX,
					      "/bin/true", NULL, 0, 77));
		tally_agg_record(&a, mk_comm(&b, pid, pid, pid == 102 ? "beta" : "alpha", false));
	}
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	/* another alpha: the same row */
	tally_agg_record(&a, mk_sample(&b, 101, 0x400010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 102, 0x400010, false, 0, NULL, 0));
	assert_int_equal(a.nrows, 2);
	assert_int_equal(a.ncomms, 2);
	for (size_t r = 0; r < a.nrows; r++) {
		assert_int_equal(a.rows[r].pid, 0);
		assert_true(a.rows[r].comm >= 1 && a.rows[r].comm <= a.ncomms);
		const char *c = a.comms[a.rows[r].comm - 1];
		assert_int_equal(a.counts[r], !strcmp(c, "alpha") ? 2 : 1);
	}
	/* a new name (prctl, exec): later samples go to it */
	tally_agg_record(&a, mk_comm(&b, 100, 100, "gamma", true));
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	assert_int_equal(a.nrows, 3);
	assert_int_equal(tally_agg_comm(&a, "gamma"), a.rows[2].comm);
	/* the idle task (pid 0, in the kernel) */
	tally_agg_record(&a, mk_sample(&b, 0, KADDR, true, 0, NULL, 0));
	assert_int_equal(a.rows[3].comm, tally_agg_comm(&a, "swapper"));
	/* no name: none */
	assert_int_equal(tally_agg_comm(&a, ""), 0);
	assert_int_equal(tally_agg_comm(&a, NULL), 0);
	tally_agg_release(&a);
}

static void test_agg__record_mmap2_ignored(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	/* not executable: not a code mapping */
	tally_agg_record(&a, mk_mmap2(&b, 100, 0x600000, 0x1000, 0, PROT_READ | PROT_WRITE,
				      "/bin/true", NULL, 0, 1));
	struct tally_proc *p = tally_agg_proc(&a, 100, false);
	assert_true(!p || p->nmaps == 0);
	assert_int_equal(a.nimages, 1);
	/* a record too short to hold a file name is ignored, not read past */
	const struct tally_rec *r =
		mk_mmap2(&b, 101, 0x400000, 0x1000, 0, PROT_RX, "/bin/true", NULL, 0, 1);
	b.u.h.size = (uint16_t)(sizeof(b.u.h) + sizeof(struct mmap2_body));
	tally_agg_record(&a, r);
	p = tally_agg_proc(&a, 101, false);
	assert_true(!p || p->nmaps == 0);
	tally_agg_release(&a);
}

static void test_agg__record_mmap2_build_id(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	uint8_t id[20];
	for (int i = 0; i < 20; i++)
		id[i] = (uint8_t)(0xa0 + i);
	tally_agg_record(&a, mk_mmap2(&b, 100, 0x7f0000000000, 0x10000, 0x2000, PROT_RX,
				      "/usr/lib/libz.so.1", id, 20, 0));
	/* the same file in another process: one image */
	tally_agg_record(&a, mk_mmap2(&b, 200, 0x7f1000000000, 0x10000, 0x2000, PROT_RX,
				      "/usr/lib/libz.so.1", id, 20, 0));
	assert_int_equal(a.nimages, 2);
	const struct tally_image *im = &a.images[1];
	assert_int_equal(im->kind, TALLY_IMG_FILE);
	assert_int_equal(im->build_id_len, 20);
	assert_memory_equal(im->build_id, id, 20);
	tally_agg_record(&a, mk_sample(&b, 200, 0x7f1000000100, false, 0, NULL, 0));
	assert_int_equal(count_of(&a, 1, 0x2100, 0, 0), 1);
	/* a rebuilt library with the same path: another image */
	id[0] ^= 0xff;
	tally_agg_record(&a, mk_mmap2(&b, 300, 0x7f2000000000, 0x10000, 0, PROT_RX,
				      "/usr/lib/libz.so.1", id, 20, 0));
	assert_int_equal(a.nimages, 3);
	tally_agg_release(&a);
}

static void test_agg__record_anon_and_vdso(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(&a, mk_mmap2(&b, 100, 0x10000, 0x1000, 0, PROT_RX, "//anon", NULL, 0, 0));
	tally_agg_record(&a, mk_mmap2(&b, 100, 0x20000, 0x1000, 0, PROT_RX, "[vdso]", NULL, 0, 0));
	struct tally_proc *p = tally_agg_proc(&a, 100, false);
	assert_int_equal(p->nmaps, 2);
	assert_int_equal(p->maps[0].image, TALLY_MAP_ANON);
	assert_int_equal(a.images[p->maps[1].image].kind, TALLY_IMG_VDSO);
	assert_null(p->exe); /* neither names an executable */
	tally_agg_record(&a, mk_sample(&b, 100, 0x20040, false, 0, NULL, 0));
	assert_int_equal(count_of(&a, p->maps[1].image, 0x40, 0, 0), 1);
	tally_agg_release(&a);
}

static void test_agg__record_fork_copies_maps(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(&a, mk_comm(&b, 100, 100, "parent", false));
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_FORK, 101, 100, 101, 100));
	struct tally_proc *c = tally_agg_proc(&a, 101, false);
	assert_non_null(c);
	assert_int_equal(c->nmaps, 1);
	assert_string_equal(c->comm, "parent");
	assert_string_equal(c->exe, "/bin/true");
	tally_agg_record(&a, mk_sample(&b, 101, 0x400010, false, 0, NULL, 0));
	const struct tally_frame *f = row_leaf(&a, 0);
	assert_string_equal(a.images[f->image].path, "/bin/true");
	assert_int_equal(f->offset, 0x1010);

	/* the child's maps are its own: a change in the parent does not leak into it */
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0, PROT_RX, "/bin/false", NULL, 0, 78));
	struct tally_proc *p = tally_agg_proc(&a, 100, false);
	assert_string_equal(a.images[p->maps[0].image].path, "/bin/false");
	c = tally_agg_proc(&a, 101, false);
	assert_string_equal(a.images[c->maps[0].image].path, "/bin/true");

	/* a new thread (pid == ppid) creates no process */
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_FORK, 100, 100, 150, 100));
	assert_null(tally_agg_proc(&a, 150, false));
	tally_agg_release(&a);
}

static void test_agg__record_fork_parent_without_maps(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	/* the parent is known (by its comm) but has no mappings yet */
	tally_agg_record(&a, mk_comm(&b, 100, 100, "sh", false));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_FORK, 101, 100, 101, 100));
	struct tally_proc *c = tally_agg_proc(&a, 101, false);
	assert_non_null(c);
	assert_int_equal(c->nmaps, 0);
	assert_string_equal(c->comm, "sh");
	/* an unknown parent: the child exists, empty */
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_FORK, 301, 300, 301, 300));
	c = tally_agg_proc(&a, 301, false);
	assert_non_null(c);
	assert_int_equal(c->nmaps, 0);
	tally_agg_release(&a);
}

static void test_agg__record_comm_exec_clears_maps(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	/* a plain comm change (prctl) keeps the maps */
	tally_agg_record(&a, mk_comm(&b, 100, 100, "renamed", false));
	struct tally_proc *p = tally_agg_proc(&a, 100, false);
	assert_int_equal(p->nmaps, 1);
	assert_string_equal(p->comm, "renamed");
	/* a thread's comm does not rename the process */
	tally_agg_record(&a, mk_comm(&b, 100, 105, "worker", false));
	assert_string_equal(p->comm, "renamed");
	/* exec: a new program, the old maps are gone */
	tally_agg_record(&a, mk_comm(&b, 100, 100, "a-very-long-command-name", true));
	p = tally_agg_proc(&a, 100, false);
	assert_int_equal(p->nmaps, 0);
	assert_null(p->exe);
	assert_string_equal(p->comm, "a-very-long-com"); /* 15 characters, like the kernel */
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	const struct tally_frame *f = row_leaf(&a, 0);
	assert_int_equal(a.images[f->image].kind, TALLY_IMG_NOMAP);
	assert_int_equal(f->offset, 0x400010);
	/* the new program's mapping is used from then on */
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x1000, 0, PROT_RX, "/bin/false", NULL, 0, 78));
	assert_string_equal(p->exe, "/bin/false");
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	assert_int_equal(a.nrows, 2);
	f = row_leaf(&a, 1);
	assert_string_equal(a.images[f->image].path, "/bin/false");
	assert_int_equal(f->offset, 0x10);
	tally_agg_release(&a);
}

static void test_agg__record_kernel_sample(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_sample(&b, 100, KADDR, true, 0, NULL, 0));
	const struct tally_frame *f = row_leaf(&a, 0);
	assert_int_equal(f->image, a.kernel_image);
	assert_int_equal(f->offset, KADDR);
	/* kernel mode even at an address a user mapping covers */
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, true, 0, NULL, 0));
	assert_int_equal(count_of(&a, a.kernel_image, 0x400010, 0, 0), 1);
	/* the idle task (pid 0) in the kernel */
	tally_agg_record(&a, mk_sample(&b, 0, KADDR, true, 0, NULL, 0));
	assert_int_equal(count_of(&a, a.kernel_image, KADDR, 0, 0), 2);
	assert_int_equal(a.samples[0], 3);
	tally_agg_release(&a);
}

static void test_agg__record_nomap_sample(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_sample(&b, 100, 0x900000, false, 0, NULL, 0));
	const struct tally_frame *f = row_leaf(&a, 0);
	const uint32_t nomap = f->image;
	assert_int_equal(a.images[nomap].kind, TALLY_IMG_NOMAP);
	assert_int_equal(f->offset, 0x900000);
	/* a sample from a process never seen before: nomap too (no procfs lookups) */
	tally_agg_record(&a, mk_sample(&b, 4000000, 0x123456, false, 0, NULL, 0));
	assert_int_equal(count_of(&a, nomap, 0x123456, 0, 0), 1);
	assert_int_equal(a.images[nomap].pid, 0); /* not per-pid: one shared nomap image */
	/* anonymous executable memory (no JIT map) */
	tally_agg_record(&a, mk_mmap2(&b, 100, 0x10000, 0x1000, 0, PROT_RX, "//anon", NULL, 0, 0));
	tally_agg_record(&a, mk_sample(&b, 100, 0x10010, false, 0, NULL, 0));
	assert_int_equal(count_of(&a, nomap, 0x10010, 0, 0), 1);
	tally_agg_release(&a);
}

static void test_agg__record_per_pid(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 2, true, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_FORK, 101, 100, 101, 100));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 101, 0x400010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 101, 0x400010, false, 1, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 101, 0x400010, false, 1, NULL, 0));
	uint32_t img = row_leaf(&a, 0)->image;
	assert_int_equal(a.nrows, 2);
	assert_int_equal(count_of(&a, img, 0x1010, 100, 0), 1);
	assert_int_equal(count_of(&a, img, 0x1010, 100, 1), 0);
	assert_int_equal(count_of(&a, img, 0x1010, 101, 0), 1);
	assert_int_equal(count_of(&a, img, 0x1010, 101, 1), 2);
	assert_int_equal(a.samples[0], 2);
	assert_int_equal(a.samples[1], 2);
	/* per-pid nomap images are per process */
	tally_agg_record(&a, mk_sample(&b, 100, 0x900000, false, 0, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 101, 0x900000, false, 0, NULL, 0));
	struct tally_proc *p100 = tally_agg_proc(&a, 100, false),
			  *p101 = tally_agg_proc(&a, 101, false);
	assert_int_not_equal(p100->nomap_image, p101->nomap_image);
	assert_int_equal(a.images[p100->nomap_image].pid, 100);
	assert_int_equal(a.images[p101->nomap_image].pid, 101);
	/* an event index out of range is dropped, not counted anywhere */
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 2, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, -1, NULL, 0));
	assert_int_equal(a.samples[0] + a.samples[1], 6);
	tally_agg_release(&a);
}

static void test_agg__record_callchain(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	uint64_t chain[] = { PERF_CONTEXT_KERNEL, KADDR,    KADDR + 0x100,
			     PERF_CONTEXT_USER,   0x400010, 0x400200 };
	tally_agg_record(&a, mk_sample(&b, 100, KADDR, true, 0, chain, ARRAY_SIZE(chain)));
	assert_int_equal(a.nrows, 1);
	const struct tally_stack *st = &a.stacks[a.rows[0].stack];
	assert_int_equal(st->len, 4); /* context markers are not frames */
	const struct tally_frame *fr[4];
	for (int i = 0; i < 4; i++)
		fr[i] = &a.frames[a.stack_frames[st->first + (uint32_t)i]];
	assert_int_equal(fr[0]->image, a.kernel_image);
	assert_int_equal(fr[0]->offset, KADDR);
	assert_int_equal(fr[1]->image, a.kernel_image);
	assert_int_equal(fr[1]->offset, KADDR + 0x100);
	assert_string_equal(a.images[fr[2]->image].path, "/bin/true");
	assert_int_equal(fr[2]->offset, 0x1010);
	assert_int_equal(fr[3]->image, fr[2]->image);
	assert_int_equal(fr[3]->offset, 0x1200);
	const uint32_t true_img = fr[2]->image;
	/* the same chain again: the same interned stack */
	tally_agg_record(&a, mk_sample(&b, 100, KADDR, true, 0, chain, ARRAY_SIZE(chain)));
	assert_int_equal(a.nrows, 1);
	assert_int_equal(a.nstacks, 1);
	assert_int_equal(a.counts[0], 2);
	/* a chain of only markers falls back to the sample ip */
	uint64_t only[] = { PERF_CONTEXT_USER };
	tally_agg_record(&a, mk_sample(&b, 100, 0x400020, false, 0, only, 1));
	assert_int_equal(count_of(&a, true_img, 0x1020, 0, 0), 1);
	tally_agg_release(&a);
}

static void test_agg__record_deep_callchain(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x100000, 0, PROT_RX, "/bin/true", NULL, 0, 77));
	enum { DEPTH = 600 };
	uint64_t *chain = calloc(DEPTH + 1, sizeof(uint64_t));
	chain[0] = PERF_CONTEXT_USER;
	for (int i = 1; i <= DEPTH; i++)
		chain[i] = 0x400000 + (uint64_t)i * 16;
	tally_agg_record(&a, mk_sample(&b, 100, chain[1], false, 0, chain, DEPTH + 1));
	assert_int_equal(a.nrows, 1);
	assert_int_equal(a.stacks[a.rows[0].stack].len, ARRAY_SIZE(a.scratch_frames));
	assert_int_equal(a.samples[0], 1);
	free(chain);
	tally_agg_release(&a);
}

static void test_agg__record_lost_throttle(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(&a, mk_lost(&b, 17));
	tally_agg_record(&a, mk_lost(&b, 3));
	assert_int_equal(a.lost, 20);
	tally_agg_record(&a, mk_lost_samples(&b, 5));
	assert_int_equal(a.lost, 25);
	/* a truncated LOST record adds nothing */
	const struct tally_rec *r = mk_lost(&b, 1000);
	b.u.h.size = sizeof(b.u.h) + 8;
	tally_agg_record(&a, r);
	assert_int_equal(a.lost, 25);
	struct perf_event_header h = { .type = PERF_RECORD_THROTTLE,
				       .misc = 0,
				       .size = sizeof(h) + 24 };
	struct tally_rec t = { .raw = &h, .type = PERF_RECORD_THROTTLE, .event = -1 };
	tally_agg_record(&a, &t);
	tally_agg_record(&a, &t);
	h.type = PERF_RECORD_UNTHROTTLE;
	t.type = PERF_RECORD_UNTHROTTLE;
	tally_agg_record(&a, &t);
	assert_int_equal(a.throttled, 2);
	assert_int_equal(a.nrows, 0);
	assert_int_equal(a.samples[0], 0);
	tally_agg_release(&a);
}

static void test_agg__record_exit_and_tasks(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(&a, mk_comm(&b, 100, 100, "worker", true));
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_comm(&b, 200, 200, "idle", true)); /* never sampled */
	tally_agg_record(&a, mk_comm(&b, 300, 300, "alive", true));
	tally_agg_record(&a, mk_sample(&b, 300, 0x1000, false, 0, NULL, 0));
	/* a thread's exit does not end the process */
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_EXIT, 100, 1, 101, 1));
	tally_agg_collect_dead(&a);
	tally_agg_collect_dead(&a);
	tally_agg_collect_dead(&a);
	assert_non_null(tally_agg_proc(&a, 100, false));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_EXIT, 100, 1, 100, 1));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_EXIT, 200, 1, 200, 1));
	/* records of the exiting process may still be in flight: kept one more round */
	tally_agg_collect_dead(&a);
	assert_non_null(tally_agg_proc(&a, 100, false));
	tally_agg_collect_dead(&a);
	assert_null(tally_agg_proc(&a, 100, false));
	assert_null(tally_agg_proc(&a, 200, false));
	assert_non_null(tally_agg_proc(&a, 300, false));
	assert_int_equal(a.ntasks, 1); /* only sampled processes are remembered */
	assert_int_equal(a.tasks[0].pid, 100);
	assert_string_equal(a.tasks[0].comm, "worker");
	assert_string_equal(a.tasks[0].exe, "/bin/true");
	tally_agg_tasks(&a);
	assert_int_equal(a.ntasks, 2);
	assert_int_equal(a.tasks[1].pid, 300);
	assert_string_equal(a.tasks[1].comm, "alive");
	assert_null(a.tasks[1].exe);
	tally_agg_release(&a);
}

/* After a daemon's flush: counts, stacks, tasks and counters go, images only a
 * dead process mapped go (indices change), live processes keep resolving. */
static void test_agg__reset_after_flush(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	/* 100 maps /bin/true and lives; 200 maps /bin/sh and exits */
	tally_agg_record(&a,
			 mk_mmap2(&b, 200, 0x500000, 0x1000, 0, PROT_RX, "/bin/sh", NULL, 0, 99));
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_sample(&b, 200, 0x500010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 0, KADDR, true, 0, NULL, 0));
	tally_agg_record(&a, mk_lost(&b, 3));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_EXIT, 200, 1, 200, 1));
	tally_agg_collect_dead(&a);
	tally_agg_collect_dead(&a);
	assert_null(tally_agg_proc(&a, 200, false));
	assert_int_equal(a.ntasks, 1);
	assert_int_equal(a.nimages, 3); /* kernel, /bin/sh, /bin/true */
	size_t before = tally_agg_memory(&a);
	assert_true(before > sizeof(a));

	tally_agg_reset(&a);
	assert_int_equal(a.nrows, 0);
	assert_int_equal(a.nstacks, 0);
	assert_int_equal(a.nframes, 0);
	assert_int_equal(a.ntasks, 0);
	assert_int_equal(a.samples[0], 0);
	assert_int_equal(a.lost, 0);
	assert_true(tally_agg_memory(&a) < before);
	/* /bin/sh is gone, the kernel and /bin/true stay, at new indices */
	assert_int_equal(a.nimages, 2);
	assert_int_equal(a.images[a.kernel_image].kind, TALLY_IMG_KERNEL);
	struct tally_proc *p = tally_agg_proc(&a, 100, false);
	assert_non_null(p);
	assert_false(p->sampled);
	assert_int_equal(p->nmaps, 1);
	assert_true(p->maps[0].image < a.nimages);
	assert_string_equal(a.images[p->maps[0].image].path, "/bin/true");
	/* and a new sample resolves through the remapped mapping */
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	const struct tally_frame *f = row_leaf(&a, 0);
	assert_string_equal(a.images[f->image].path, "/bin/true");
	assert_int_equal(f->offset, 0x1010);
	assert_int_equal(a.counts[0], 1);
	/* the same file mapped again is found, not added */
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x600000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	assert_int_equal(a.nimages, 2);
	tally_agg_release(&a);
}

static uint32_t image_named(const struct tally_agg *a, const char *path)
{
	for (size_t i = 0; i < a->nimages; i++)
		if (!strcmp(a->images[i].path, path))
			return (uint32_t)i;
	fail_msg("no image '%s'", path);
	return 0;
}

/* Collected processes are freed in batches, not one walk of the memo per round
 * in which one ended: while one waits, its memo entries are not used (a pid
 * reused resolves in its new program) and a live process's go on counting. */
static void test_agg__collected_freed_in_batches(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, true, false);
	struct recbuf b;
	tally_agg_record(&a, mk_comm(&b, 300, 300, "alive", true));
	tally_agg_record(&a,
			 mk_mmap2(&b, 300, 0x400000, 0x2000, 0, PROT_RX, "/bin/sh", NULL, 0, 5));
	uint32_t n = TALLY_AGG_GRAVE * 2 + 3, most = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t pid = 1000 + i % 4; /* pids reused, as on a busy machine */
		tally_agg_record(&a, mk_comm(&b, pid, pid, "short", true));
		tally_agg_record(&a, mk_mmap2(&b, pid, 0x400000, 0x2000, 0, PROT_RX,
					      i % 2 ? "/bin/true" : "/bin/ls", NULL, 0,
					      i % 2 ? 77 : 78));
		tally_agg_record(&a, mk_sample(&b, pid, 0x400010, false, 0, NULL, 0));
		tally_agg_record(&a, mk_sample(&b, pid, 0x400010, false, 0, NULL, 0));
		tally_agg_record(&a, mk_sample(&b, 300, 0x400020, false, 0, NULL, 0));
		tally_agg_record(&a, mk_task(&b, PERF_RECORD_EXIT, pid, 1, pid, 1));
		for (int round = 0; round < 3; round++) {
			tally_agg_collect_dead(&a);
			assert_true(a.ngrave < TALLY_AGG_GRAVE);
			most = a.ngrave > most ? a.ngrave : most;
		}
		assert_null(tally_agg_proc(&a, (int)pid, false));
	}
	assert_true(most > 1); /* they did wait, to be freed together */
	assert_int_equal(a.ntasks, n);
	uint32_t ls = image_named(&a, "/bin/ls"), tr = image_named(&a, "/bin/true"),
		 sh = image_named(&a, "/bin/sh");
	uint64_t in_ls = 0, in_true = 0;
	for (uint32_t p = 1000; p < 1004; p++) {
		in_ls += count_of(&a, ls, 0x10, (int)p, 0);
		in_true += count_of(&a, tr, 0x10, (int)p, 0);
	}
	assert_int_equal(in_ls, 2 * ((n + 1) / 2));
	assert_int_equal(in_true, 2 * (n / 2));
	assert_int_equal(count_of(&a, sh, 0x20, 300, 0), n);
	tally_agg_release(&a);
}

/* The same (pid, address) again is counted from the sample memo: whatever a
 * side-band record, a reset or the end of a process changes, the next sample
 * there lands where a first sample would. */
static void test_agg__sample_memo_follows_changes(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 2, false, false);
	struct recbuf b;
	tally_agg_record(
		&a, mk_mmap2(&b, 100, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_comm(&b, 100, 100, "alpha", false));
	for (int i = 0; i < 3; i++) {
		struct tally_rec *r =
			(struct tally_rec *)mk_sample(&b, 100, 0x400010, false, 0, NULL, 0);
		r->weight = 10;
		tally_agg_record(&a, r);
	}
	uint32_t tru = image_named(&a, "/bin/true");
	assert_int_equal(count_of(&a, tru, 0x1010, 0, 0), 3);
	assert_int_equal(a.weights[0], 30);
	/* another event at the same place: its own count */
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 1, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 1, NULL, 0));
	assert_int_equal(count_of(&a, tru, 0x1010, 0, 1), 2);
	assert_int_equal(count_of(&a, tru, 0x1010, 0, 0), 3);
	/* the same address in user and kernel mode, and in another process */
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, true, 0, NULL, 0));
	assert_int_equal(count_of(&a, a.kernel_image, 0x400010, 0, 0), 1);
	tally_agg_record(&a, mk_sample(&b, 101, 0x400010, false, 0, NULL, 0));
	assert_int_equal(count_of(&a, tru, 0x1010, 0, 0), 3);

	/* a new mapping over the address: the next sample is in the new file */
	tally_agg_record(&a,
			 mk_mmap2(&b, 100, 0x400000, 0x2000, 0, PROT_RX, "/bin/sh", NULL, 0, 99));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	uint32_t sh = image_named(&a, "/bin/sh");
	assert_int_equal(count_of(&a, sh, 0x10, 0, 0), 2);
	assert_int_equal(count_of(&a, tru, 0x1010, 0, 0), 3);
	/* a pid taken again by a fork of 100: the parent's maps and name */
	tally_agg_record(
		&a, mk_mmap2(&b, 300, 0x400000, 0x2000, 0x1000, PROT_RX, "/bin/true", NULL, 0, 77));
	tally_agg_record(&a, mk_sample(&b, 300, 0x400010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_FORK, 300, 100, 300, 100));
	tally_agg_record(&a, mk_sample(&b, 300, 0x400010, false, 0, NULL, 0));
	assert_int_equal(count_of(&a, sh, 0x10, 0, 0), 3);

	/* a new name: a new row */
	tally_agg_record(&a, mk_comm(&b, 100, 100, "beta", false));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	size_t rows = a.nrows;
	assert_int_equal(a.comms[a.rows[rows - 1].comm - 1][0], 'b');
	assert_int_equal(a.counts[(rows - 1) * 2], 1);

	/* a flush's reset renumbers everything: counted afresh */
	tally_agg_reset(&a);
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	assert_int_equal(a.nrows, 1);
	assert_int_equal(a.counts[0], 2);
	assert_int_equal(a.samples[0], 2);
	assert_true(tally_agg_proc(&a, 100, false)->sampled);
	assert_int_equal(a.rows[0].stack,
			 a.frame_stack1[a.stack_frames[a.stacks[a.rows[0].stack].first]] - 1);
	assert_int_equal(count_of(&a, image_named(&a, "/bin/sh"), 0x10, 0, 0), 2);

	/* the process ends and is collected; a new one takes its pid, without maps */
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_EXIT, 100, 1, 100, 1));
	tally_agg_collect_dead(&a);
	tally_agg_collect_dead(&a);
	assert_null(tally_agg_proc(&a, 100, false));
	tally_agg_collect_dead(&a); /* nothing left to collect */
	tally_agg_record(&a, mk_sample(&b, 100, 0x400010, false, 0, NULL, 0));
	struct tally_proc *p = tally_agg_proc(&a, 100, false);
	assert_non_null(p);
	assert_true(p->sampled);
	assert_int_equal(p->nmaps, 0);
	assert_int_equal(a.images[row_leaf(&a, a.nrows - 1)->image].kind, TALLY_IMG_NOMAP);
	tally_agg_release(&a);
}

/* Early identity: a file image gets its id when it is identified, not later. */
static void test_agg__identify_early(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	struct stat st;
	assert_int_equal(stat("/bin/true", &st), 0);
	/* the real device and inode: the file is the one mapped */
	struct mmap2_body *m;
	const struct tally_rec *r =
		mk_mmap2(&b, 100, 0x400000, 0x2000, 0, PROT_RX, "/bin/true", NULL, 0, st.st_ino);
	m = (struct mmap2_body *)(&b.u.h + 1);
	m->u.f.maj = major(st.st_dev);
	m->u.f.min = minor(st.st_dev);
	tally_agg_record(&a, r);
	/* and one whose inode does not match: replaced since it was mapped */
	tally_agg_record(&a,
			 mk_mmap2(&b, 100, 0x800000, 0x2000, 0, PROT_RX, "/bin/sh", NULL, 0, 1));
	tally_agg_identify(&a);
	assert_int_equal(a.nidentified, a.nimages);
	for (size_t i = 0; i < a.nimages; i++) {
		const struct tally_image *im = &a.images[i];
		if (im->kind != TALLY_IMG_FILE) {
			assert_null(im->id);
			continue;
		}
		assert_non_null(im->id);
		if (!strcmp(im->path, "/bin/true"))
			assert_string_equal(im->id_kind, "build-id");
		else
			assert_string_equal(im->id_kind, "replaced");
	}
	tally_agg_release(&a);
}

/* pid maps the file at path, with the device and inode stat gives now */
static void map_file(struct tally_agg *a, struct recbuf *b, uint32_t pid, const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	const struct tally_rec *r =
		mk_mmap2(b, pid, 0x400000, 0x2000, 0, PROT_RX, path, NULL, 0, st.st_ino);
	struct mmap2_body *m = (struct mmap2_body *)(&b->u.h + 1);
	m->u.f.maj = major(st.st_dev);
	m->u.f.min = minor(st.st_dev);
	tally_agg_record(a, r);
}

static void end_process(struct tally_agg *a, struct recbuf *b, uint32_t pid)
{
	tally_agg_record(a, mk_task(b, PERF_RECORD_EXIT, pid, 1, pid, 1));
	tally_agg_collect_dead(a);
	tally_agg_collect_dead(a);
	tally_agg_reset(a); /* a flush: the images no live process maps go */
}

/* A daemon meets the same files again after each flush: a file whose stat is
 * the same is not read again (a file without a build-id is hashed whole), one
 * changed since is. */
static void test_agg__identify_memo(void **state)
{
	(void)state;
	char path[] = "/tmp/tally-idmemo-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	char buf[4096];
	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < 16; i++)
		assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;

	map_file(&a, &b, 100, path);
	tally_agg_identify(&a);
	assert_int_equal(a.id_reads, 1);
	const struct tally_image *im = &a.images[image_named(&a, path)];
	assert_string_equal(im->id_kind, "xxh64");
	char *first = xstrdup(im->id);
	end_process(&a, &b, 100);
	for (size_t i = 0; i < a.nimages; i++)
		assert_string_not_equal(a.images[i].path, path); /* dropped with its process */

	/* the same file again: its identity from the memo */
	map_file(&a, &b, 101, path);
	tally_agg_identify(&a);
	assert_int_equal(a.id_reads, 1);
	im = &a.images[image_named(&a, path)];
	assert_string_equal(im->id_kind, "xxh64");
	assert_string_equal(im->id, first);
	end_process(&a, &b, 101);

	/* written since: read again, and a new identity */
	assert_int_equal(write(fd, "y", 1), 1);
	map_file(&a, &b, 102, path);
	tally_agg_identify(&a);
	assert_int_equal(a.id_reads, 2);
	im = &a.images[image_named(&a, path)];
	assert_string_equal(im->id_kind, "xxh64");
	assert_string_not_equal(im->id, first);

	free(first);
	close(fd);
	unlink(path);
	tally_agg_release(&a);
}

static void test_agg__load_procfs_self(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	int pid = (int)getpid();
	assert_int_equal(tally_agg_load_procfs(&a, pid), 0);
	struct tally_proc *p = tally_agg_proc(&a, pid, false);
	assert_non_null(p);
	assert_true(p->nmaps >= 2);
	check_sorted(p);
	assert_non_null(p->exe);
	assert_str_has(p->exe, "test-agg");
	assert_str_has(p->comm, "test-agg");
	/* this very function's code is in a mapping of our executable */
	const struct tally_map *m =
		tally_proc_find_map(p, (uint64_t)(uintptr_t)&test_agg__load_procfs_self);
	assert_non_null(m);
	assert_int_not_equal(m->image, TALLY_MAP_ANON);
	assert_str_has(a.images[m->image].path, "test-agg");
	/* a process that does not exist */
	assert_true(tally_agg_load_procfs(&a, 0x3fffffff) < 0);
	assert_errmsg_has("/proc/1073741823/maps");
	tally_agg_release(&a);
}

/* ---- JIT files: opened once as they are checked, read from what was opened ---- */

#define ANON 0x7f0000000000ULL

/* This test process as a JIT runtime: anonymous code at ANON. */
static void jit_setup(struct tally_agg *a, struct recbuf *b, int pid)
{
	tally_agg_init(a, 1, false, false);
	tally_agg_record(a, mk_mmap2(b, (uint32_t)pid, ANON, 0x10000, 0, PROT_RX, "//anon", NULL, 0, 0));
}

/* A sample in the anonymous code: the first one checks the perf map. */
static void jit_sample(struct tally_agg *a, struct recbuf *b, int pid)
{
	tally_agg_record(a, mk_sample(b, (uint32_t)pid, ANON + 0x1010, false, 0, NULL, 0));
}

static const char *jit_warning(const struct tally_agg *a, const char *needle)
{
	for (size_t i = 0; i < a->njit_warnings; i++)
		if (strstr(a->jit_warnings[i], needle))
			return a->jit_warnings[i];
	return NULL;
}

#define assert_jit_warning(a, needle)                                                      \
	do {                                                                               \
		if (!jit_warning((a), (needle)))                                           \
			fail_msg("no JIT warning says '%s' (%zu warnings, the first: %s)", \
				 (needle), (a)->njit_warnings,                             \
				 (a)->njit_warnings ? (a)->jit_warnings[0] : "none");      \
	} while (0)

/* The owner of a JIT process points its perf map's name at another file (a
 * root-only one) or a FIFO after the recorder checked it: the copy is still
 * the map that was checked, nothing blocks, and a warning says so. */
static void test_agg__jit_map_swapped_after_check(void **state)
{
	(void)state;
	int pid = (int)getpid();
	char map[64];
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", pid);
	char *dir = unit_tmpdir(), *secret = unit_path(dir, "secret");
	unit_write_str(secret, "7f0000001000 40 secret_name\n");
	assert_int_equal(chmod(secret, 0600), 0);
	for (int mode = 0; mode < 3; mode++) {
		unlink(map);
		unit_write_str(map, "7f0000001000 40 good_name\n");
		struct tally_agg a;
		struct recbuf b;
		jit_setup(&a, &b, pid);
		jit_sample(&a, &b, pid);
		struct tally_proc *p = tally_agg_proc(&a, pid, false);
		assert_int_equal(p->jit, 1);
		assert_int_equal(unlink(map), 0);
		if (mode == 0)
			assert_int_equal(symlink(secret, map), 0);
		else if (mode == 1)
			assert_int_equal(mkfifo(map, 0600), 0);
		else
			unit_write_str(map, "7f0000001000 40 other_name\n");
		/* an open by name would block on the FIFO for ever */
		alarm(20);
		tally_agg_snapshot_jit(&a);
		alarm(0);
		const struct tally_image *im = &a.images[p->jit_image];
		assert_non_null(im->jit_map);
		assert_string_equal(im->jit_map, "7f0000001000 40 good_name\n");
		assert_jit_warning(
			&a, mode == 0   ? "was replaced by a symbolic link after tally opened it"
			    : mode == 1 ? "was replaced by a FIFO after tally opened it"
					: "was replaced by another file after tally opened it");
		assert_str_has(a.jit_warnings[0], map);
		tally_agg_release(&a);
	}
	/* removed (a runtime may clean up as it exits): the copy, and nothing to say */
	unlink(map);
	unit_write_str(map, "7f0000001000 40 good_name\n");
	struct tally_agg a;
	struct recbuf b;
	jit_setup(&a, &b, pid);
	jit_sample(&a, &b, pid);
	unlink(map);
	tally_agg_snapshot_jit(&a);
	assert_string_equal(a.images[tally_agg_proc(&a, pid, false)->jit_image].jit_map,
			    "7f0000001000 40 good_name\n");
	assert_int_equal(a.njit_warnings, 0);
	tally_agg_release(&a);
	unlink(secret);
	rmdir(dir);
	free(secret);
	free(dir);
}

/* A perf map that is a symbolic link or a FIFO when it is checked is not used,
 * and a warning says why; the check does not block. */
static void test_agg__jit_map_not_regular(void **state)
{
	(void)state;
	int pid = (int)getpid();
	char map[64];
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", pid);
	char *dir = unit_tmpdir(), *target = unit_path(dir, "target");
	unit_write_str(target, "7f0000001000 40 via_link\n");
	for (int mode = 0; mode < 2; mode++) {
		unlink(map);
		if (mode == 0)
			assert_int_equal(symlink(target, map), 0);
		else
			assert_int_equal(mkfifo(map, 0600), 0);
		struct tally_agg a;
		struct recbuf b;
		jit_setup(&a, &b, pid);
		alarm(20);
		jit_sample(&a, &b, pid);
		tally_agg_snapshot_jit(&a);
		alarm(0);
		struct tally_proc *p = tally_agg_proc(&a, pid, false);
		assert_int_equal(p->jit, -1);
		assert_int_equal(p->jit_image, TALLY_HIDX_NONE);
		char want[192];
		snprintf(want, sizeof(want), "perf map '%s' of pid %d is %s", map, pid,
			 mode == 0 ? "a symbolic link: not used"
				   : "a FIFO, not a regular file: not used");
		assert_jit_warning(&a, want);
		for (size_t i = 0; i < a.nimages; i++)
			assert_null(a.images[i].jit_map);
		tally_agg_release(&a);
	}
	unlink(map);
	unlink(target);
	rmdir(dir);
	free(target);
	free(dir);
}

/* A jitdump header and one JIT_CODE_LOAD of 4 bytes named name, at addr. */
static size_t mini_dump(unsigned char *buf, int pid, uint64_t addr, const char *name)
{
	size_t n = 0, nl = strlen(name) + 1;
	uint32_t h[6] = { 0x4A695444u, 1, 40, 62, 0, (uint32_t)pid };
	memcpy(buf, h, 24);
	memset(buf + 24, 0, 16);
	n = 40;
	uint32_t rh[2] = { 0, (uint32_t)(16 + 40 + nl + 4) };
	memcpy(buf + n, rh, 8);
	memset(buf + n + 8, 0, 8);
	n += 16;
	uint32_t ids[2] = { (uint32_t)pid, (uint32_t)pid };
	uint64_t f[4] = { addr, addr, 4, 1 };
	memcpy(buf + n, ids, 8);
	memcpy(buf + n + 8, f, 32);
	n += 40;
	memcpy(buf + n, name, nl);
	n += nl;
	memset(buf + n, 0x90, 4);
	return n + 4;
}

/* A jitdump is opened as its mapping is seen, the same way: a symbolic link or
 * a FIFO is refused with a warning, a regular file is read from the descriptor
 * however its name changes later. */
static void test_agg__jit_dump_checked_once(void **state)
{
	(void)state;
	int pid = (int)getpid();
	char *dir = unit_tmpdir(), *target = unit_path(dir, "target"), name[64];
	snprintf(name, sizeof(name), "jit-%d.dump", pid);
	char *dump = unit_path(dir, name);
	unsigned char buf[256];
	unit_write(target, buf, mini_dump(buf, pid, ANON + 0x1000, "via_link"));
	for (int mode = 0; mode < 3; mode++) {
		unlink(dump);
		if (mode == 0)
			assert_int_equal(symlink(target, dump), 0);
		else if (mode == 1)
			assert_int_equal(mkfifo(dump, 0600), 0);
		else
			unit_write(dump, buf, mini_dump(buf, pid, ANON + 0x1000, "checked"));
		struct tally_agg a;
		struct recbuf b;
		jit_setup(&a, &b, pid);
		alarm(20);
		tally_agg_record(&a, mk_mmap2(&b, (uint32_t)pid, 0x10000000, 0x1000, 0, PROT_RX,
					      dump, NULL, 0, 1));
		jit_sample(&a, &b, pid);
		if (mode == 2) {
			/* its name now leads to the other file */
			assert_int_equal(unlink(dump), 0);
			assert_int_equal(symlink(target, dump), 0);
		}
		tally_agg_snapshot_jit(&a);
		alarm(0);
		struct tally_proc *p = tally_agg_proc(&a, pid, false);
		if (mode < 2) {
			assert_null(p->jitdump);
			char want[160];
			snprintf(want, sizeof(want), "jitdump '%s' of pid %d is %s", dump, pid,
				 mode == 0 ? "a symbolic link: not used"
					   : "a FIFO, not a regular file: not used");
			assert_jit_warning(&a, want);
			for (size_t i = 0; i < a.nimages; i++)
				assert_null(a.images[i].jd);
		} else {
			assert_non_null(p->jitdump);
			const struct tally_image *im = &a.images[p->jit_image];
			assert_non_null(im->jd);
			assert_int_equal(im->jd->nfuncs, 1);
			assert_string_equal(im->jd->funcs[0].name, "checked");
			assert_int_equal(a.njit_warnings, 0);
		}
		tally_agg_release(&a);
	}
	unlink(dump);
	unlink(target);
	rmdir(dir);
	free(dump);
	free(target);
	free(dir);
}

/* Only a mapping named jit-PID.dump, PID the process's own, is a jitdump's
 * marker (nothing runs in it); any other name is a mapping like another. */
static void test_agg__jitdump_marker_name(void **state)
{
	(void)state;
	const int pid = 4321;
	const struct {
		const char *name;
		bool marker;
	} cases[] = {
		{ "/tmp/d/jit-4321.dump", true },       { "jit-4321.dump", true },
		{ "/tmp/d/jit-432.dump", false },       { "/tmp/d/jit-43210.dump", false },
		{ "/tmp/d/jit-04321.dump", false },     { "/tmp/d/jit-4321.dumps", false },
		{ "/tmp/d/jit-4321.dum", false },       { "/tmp/d/jit-.dump", false },
		{ "/tmp/jit-4321.dump/lib.so", false }, { "/tmp/d/xjit-4321.dump", false },
		{ "/tmp/d/jit-4321x.dump", false },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct tally_agg a;
		tally_agg_init(&a, 1, true, false);
		struct recbuf b;
		tally_agg_record(&a, mk_mmap2(&b, pid, 0x10000000, 0x1000, 0, PROT_RX,
					      cases[i].name, NULL, 0, 9));
		const struct tally_proc *p = tally_agg_proc(&a, pid, false);
		assert_non_null(p);
		if (p->nmaps != (cases[i].marker ? 0u : 1u))
			fail_msg("'%s' of pid %d: %zu maps", cases[i].name, pid, p->nmaps);
		tally_agg_release(&a);
	}
}

/* Which side-band records ask a collector counting in the kernel for a round
 * soon: an executable mapping of a file with no image yet (by device and inode,
 * or by the build-id the record carries), of anonymous memory or a jitdump;
 * not the same file mapped again by another process, memory that cannot run,
 * nor the other records. */
static void test_agg__record_prompt(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, true, false);
	struct recbuf b;
	const uint8_t bid[20] = { 0xab, 0xcd, 1, 2, 3 };
	const struct tally_rec *r =
		mk_mmap2(&b, 100, 0x400000, 0x2000, 0, PROT_RX, "/usr/bin/prog", NULL, 0, 42);
	assert_true(tally_agg_record_prompt(&a, r->raw));
	tally_agg_record(&a, r);
	/* another process, the same file */
	assert_false(tally_agg_record_prompt(
		&a, mk_mmap2(&b, 200, 0x500000, 0x2000, 0, PROT_RX, "/usr/bin/prog", NULL, 0, 42)
			    ->raw));
	/* the same path, another file (replaced since) */
	assert_true(tally_agg_record_prompt(
		&a, mk_mmap2(&b, 200, 0x500000, 0x2000, 0, PROT_RX, "/usr/bin/prog", NULL, 0, 43)
			    ->raw));
	/* data, not code */
	assert_false(tally_agg_record_prompt(
		&a, mk_mmap2(&b, 200, 0x600000, 0x2000, 0, PROT_READ, "/usr/lib/data", NULL, 0, 44)
			    ->raw));
	/* a build-id from the record: known once fed */
	r = mk_mmap2(&b, 300, 0x400000, 0x2000, 0, PROT_RX, "/opt/lib.so", bid, 20, 0);
	assert_true(tally_agg_record_prompt(&a, r->raw));
	tally_agg_record(&a, r);
	assert_false(tally_agg_record_prompt(
		&a,
		mk_mmap2(&b, 301, 0x700000, 0x2000, 0, PROT_RX, "/opt/lib.so", bid, 20, 0)->raw));
	/* a JIT's code, each time */
	r = mk_mmap2(&b, 300, 0x7f0000000000, 0x1000, 0, PROT_RX, "//anon", NULL, 0, 0);
	assert_true(tally_agg_record_prompt(&a, r->raw));
	tally_agg_record(&a, r);
	assert_true(tally_agg_record_prompt(&a, r->raw));
	assert_true(tally_agg_record_prompt(
		&a, mk_mmap2(&b, 300, 0x10000, 0x1000, 0, PROT_RX, "/tmp/jit-300.dump", NULL, 0, 9)
			    ->raw));
	/* the others */
	assert_false(tally_agg_record_prompt(&a, mk_comm(&b, 400, 400, "prog", true)->raw));
	assert_false(tally_agg_record_prompt(
		&a, mk_task(&b, PERF_RECORD_FORK, 401, 400, 401, 400)->raw));
	assert_false(tally_agg_record_prompt(
		&a, mk_task(&b, PERF_RECORD_EXIT, 401, 400, 401, 400)->raw));
	/* an old-style MMAP (not asked for): looked at soon, whatever it is */
	struct perf_event_header old = { .type = PERF_RECORD_MMAP,
					 .misc = PERF_RECORD_MISC_USER,
					 .size = sizeof(old) };
	assert_true(tally_agg_record_prompt(&a, &old));

	/* more files than the memo of key hashes has slots: every one known, exactly */
	enum { NFILES = TALLY_AGG_IMAGE_MEMO + 904 };
	char path[64];
	for (int i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "/usr/lib/many/lib%d.so", i);
		tally_agg_record(&a, mk_mmap2(&b, 500, 0x10000000 + 0x10000 * (uint64_t)i, 0x1000,
					      0, PROT_RX, path, NULL, 0, 1000 + (uint64_t)i));
	}
	for (int i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "/usr/lib/many/lib%d.so", i);
		assert_false(
			tally_agg_record_prompt(&a, mk_mmap2(&b, 501, 0x10000, 0x1000, 0, PROT_RX,
							     path, NULL, 0, 1000 + (uint64_t)i)
							    ->raw));
		/* the same path, another inode: not known, whatever the memo holds */
		assert_true(
			tally_agg_record_prompt(&a, mk_mmap2(&b, 501, 0x10000, 0x1000, 0, PROT_RX,
							     path, NULL, 0, 90000 + (uint64_t)i)
							    ->raw));
	}
	/* the files of a process gone are forgotten at a reset: asked for again */
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_EXIT, 500, 1, 500, 1));
	for (int i = 0; i < 3; i++)
		tally_agg_collect_dead(&a);
	tally_agg_reset(&a);
	assert_true(tally_agg_record_prompt(&a, mk_mmap2(&b, 501, 0x10000, 0x1000, 0, PROT_RX,
							 "/usr/lib/many/lib7.so", NULL, 0, 1007)
							->raw));
	/* while a file a live process maps is still known */
	assert_false(tally_agg_record_prompt(
		&a, mk_mmap2(&b, 200, 0x500000, 0x2000, 0, PROT_RX, "/usr/bin/prog", NULL, 0, 42)
			    ->raw));
	tally_agg_release(&a);
}

/* A program whose process maps a JIT's code (anonymous memory, a jitdump) is
 * put once in the list of programs whose starts the exec watch tells of: its
 * file as the record of its first mapping named it. */
static void test_agg__jit_programs(void **state)
{
	(void)state;
	struct tally_agg a;
	tally_agg_init(&a, 1, false, false);
	struct recbuf b;
	tally_agg_record(&a, mk_comm(&b, 700, 700, "node", true));
	tally_agg_record(
		&a, mk_mmap2(&b, 700, 0x400000, 0x2000, 0, PROT_RX, "/usr/bin/node", NULL, 0, 77));
	tally_agg_record(&a, mk_mmap2(&b, 700, 0x7f0000000000, 0x1000, 0, PROT_RX,
				      "/usr/lib/libc.so.6", NULL, 0, 78));
	assert_int_equal(a.njit_programs, 0);
	tally_agg_record(&a, mk_mmap2(&b, 700, 0x7e0000000000, 0x1000, 0, PROT_RX, "//anon", NULL, 0, 0));
	assert_int_equal(a.njit_programs, 1);
	assert_int_equal(a.jit_programs[0].ino, 77); /* the program's file, not the library's */
	assert_int_equal(a.jit_programs[0].dev, (8u << 20) | 1u);
	/* more JIT code, a forked child: said once */
	tally_agg_record(&a, mk_mmap2(&b, 700, 0x7e0000100000, 0x1000, 0, PROT_RX, "//anon", NULL, 0, 0));
	tally_agg_record(&a, mk_task(&b, PERF_RECORD_FORK, 701, 700, 701, 700));
	tally_agg_record(&a, mk_mmap2(&b, 701, 0x7e0000200000, 0x1000, 0, PROT_RX, "//anon", NULL, 0, 0));
	assert_int_equal(a.njit_programs, 1);
	/* the child execs another program, which maps a jitdump: said too */
	tally_agg_record(&a, mk_comm(&b, 701, 701, "java", true));
	tally_agg_record(
		&a, mk_mmap2(&b, 701, 0x400000, 0x2000, 0, PROT_RX, "/usr/bin/java", NULL, 0, 79));
	tally_agg_record(&a, mk_mmap2(&b, 701, 0x10000, 0x1000, 0, PROT_RX, "/tmp/jit-701.dump",
				      NULL, 0, 80));
	assert_int_equal(a.njit_programs, 2);
	assert_int_equal(a.jit_programs[1].ino, 79);
	/* a program named by a build-id, not an inode (--build-id-mmap): its
	 * file is what /proc/PID/exe is, when that is the file it names (this
	 * test's own process) ... */
	int self = (int)getpid();
	char *exe = realpath("/proc/self/exe", NULL);
	assert_non_null(exe);
	struct stat st;
	assert_int_equal(stat(exe, &st), 0);
	tally_agg_record(&a, mk_comm(&b, self, self, "test-agg", true));
	const uint8_t bid[20] = { 1, 2, 3 };
	tally_agg_record(&a, mk_mmap2(&b, self, 0x400000, 0x2000, 0, PROT_RX, exe, bid, 20, 0));
	tally_agg_record(&a, mk_mmap2(&b, self, 0x7e0000000000, 0x1000, 0, PROT_RX, "//anon", NULL, 0, 0));
	assert_int_equal(a.njit_programs, 3);
	assert_int_equal(a.jit_programs[2].ino, st.st_ino);
	assert_int_equal(a.jit_programs[2].dev, (major(st.st_dev) << 20) | minor(st.st_dev));
	/* ... and nothing when it is not (another file, or the process gone) */
	tally_agg_record(&a, mk_comm(&b, 999999999, 999999999, "x", true));
	tally_agg_record(&a, mk_mmap2(&b, 999999999, 0x400000, 0x2000, 0, PROT_RX, "/usr/bin/x",
				      bid, 20, 0));
	tally_agg_record(&a, mk_mmap2(&b, 999999999, 0x7e0000000000, 0x1000, 0, PROT_RX, "//anon", NULL, 0, 0));
	assert_int_equal(a.njit_programs, 3);
	free(exe);
	tally_agg_release(&a);
}

/* What one process's JIT sources may cost: a perf map past the budget keeps its
 * whole lines within it, the jitdump gets what is left, and warnings say so. */
static void test_agg__jit_budget(void **state)
{
	(void)state;
	int pid = (int)getpid();
	char map[64];
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", pid);
	char *dir = unit_tmpdir(), name[64];
	snprintf(name, sizeof(name), "jit-%d.dump", pid);
	char *dump = unit_path(dir, name);
	struct strbuf m = STRBUF_INIT;
	for (int i = 0; i < 100; i++)
		strbuf_addf(&m, "%llx 10 function_number_%03d\n",
			    (unsigned long long)(ANON + 0x100 * (unsigned)i), i);
	unlink(map);
	unit_write_str(map, m.buf);
	unsigned char buf[256];
	unit_write(dump, buf, mini_dump(buf, pid, ANON + 0x20000, "in_the_dump"));
	struct tally_agg a;
	struct recbuf b;
	jit_setup(&a, &b, pid);
	a.jit_budget = 1000;
	tally_agg_record(
		&a, mk_mmap2(&b, (uint32_t)pid, 0x10000000, 0x1000, 0, PROT_RX, dump, NULL, 0, 1));
	jit_sample(&a, &b, pid);
	tally_agg_snapshot_jit(&a);
	const struct tally_image *im = &a.images[tally_agg_proc(&a, pid, false)->jit_image];
	size_t line = strlen("7f0000000000 10 function_number_000\n");
	assert_int_equal(im->jit_map_len, 1000 / line * line);
	assert_memory_equal(im->jit_map, m.buf, im->jit_map_len);
	char want[192];
	snprintf(want, sizeof(want),
		 "perf map '%s' of pid %d is larger than the per-process JIT budget of", map, pid);
	assert_jit_warning(&a, want);
	assert_jit_warning(&a, "only its first 972 bytes are used");
	/* nothing left for the dump: 28 bytes of it, not even its header */
	assert_null(im->jd);
	assert_jit_warning(
		&a,
		"is larger than the per-process JIT budget of 1000 B: only its first 28 bytes are read");
	assert_jit_warning(&a, "28 bytes, too short for a jitdump header: not used");
	tally_agg_release(&a);
	unlink(map);
	unlink(dump);
	rmdir(dir);
	free(dump);
	free(dir);
	strbuf_release(&m);
}

/* Refusals of many processes' files (a user who makes many) fill the session
 * with no more than 32 lines, the last counting the rest. */
static void test_agg__jit_warnings_bounded(void **state)
{
	(void)state;
	struct tally_agg a;
	struct recbuf b;
	tally_agg_init(&a, 1, false, false);
	char *dir = unit_tmpdir(), *target = unit_path(dir, "t");
	unit_write_str(target, "1 1 x\n");
	enum { N = 40, BASE = 2000000000 }; /* pids no process has */
	for (int i = 0; i < N; i++) {
		char map[64];
		snprintf(map, sizeof(map), "/tmp/perf-%d.map", BASE + i);
		unlink(map);
		assert_int_equal(symlink(target, map), 0);
		tally_agg_record(&a, mk_sample(&b, (uint32_t)(BASE + i), ANON, false, 0, NULL, 0));
		unlink(map);
	}
	assert_int_equal(a.njit_warnings, 32);
	assert_str_has(a.jit_warnings[30], "perf-2000000030.map");
	assert_string_equal(a.jit_warnings[31],
			    "9 more JIT warnings not listed (only the first 31 are)");
	tally_agg_release(&a);
	unlink(target);
	rmdir(dir);
	free(target);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agg__map_add_disjoint_sorted),
		cmocka_unit_test(test_agg__map_split_middle),
		cmocka_unit_test(test_agg__map_trim_ends),
		cmocka_unit_test(test_agg__map_replace),
		cmocka_unit_test(test_agg__map_find),
		cmocka_unit_test(test_agg__init),
		cmocka_unit_test(test_agg__identify_memo),
		cmocka_unit_test(test_agg__image_dedupe),
		cmocka_unit_test(test_agg__image_no_build_id),
		cmocka_unit_test(test_agg__image_nomap_per_pid),
		cmocka_unit_test(test_agg__frame_stack_interning),
		cmocka_unit_test(test_agg__count),
		cmocka_unit_test(test_agg__proc_lookup),
		cmocka_unit_test(test_agg__record_mmap2_sample),
		cmocka_unit_test(test_agg__lost_rereads_maps),
		cmocka_unit_test(test_agg__record_weights),
		cmocka_unit_test(test_agg__comm_in_key),
		cmocka_unit_test(test_agg__record_mmap2_ignored),
		cmocka_unit_test(test_agg__record_mmap2_build_id),
		cmocka_unit_test(test_agg__record_anon_and_vdso),
		cmocka_unit_test(test_agg__record_fork_copies_maps),
		cmocka_unit_test(test_agg__record_fork_parent_without_maps),
		cmocka_unit_test(test_agg__record_comm_exec_clears_maps),
		cmocka_unit_test(test_agg__record_kernel_sample),
		cmocka_unit_test(test_agg__record_nomap_sample),
		cmocka_unit_test(test_agg__record_per_pid),
		cmocka_unit_test(test_agg__record_callchain),
		cmocka_unit_test(test_agg__record_deep_callchain),
		cmocka_unit_test(test_agg__record_lost_throttle),
		cmocka_unit_test(test_agg__record_exit_and_tasks),
		cmocka_unit_test(test_agg__collected_freed_in_batches),
		cmocka_unit_test(test_agg__reset_after_flush),
		cmocka_unit_test(test_agg__sample_memo_follows_changes),
		cmocka_unit_test(test_agg__identify_early),
		cmocka_unit_test(test_agg__load_procfs_self),
		cmocka_unit_test(test_agg__jit_map_swapped_after_check),
		cmocka_unit_test(test_agg__jit_map_not_regular),
		cmocka_unit_test(test_agg__jit_dump_checked_once),
		cmocka_unit_test(test_agg__jitdump_marker_name),
		cmocka_unit_test(test_agg__record_prompt),
		cmocka_unit_test(test_agg__jit_programs),
		cmocka_unit_test(test_agg__jit_budget),
		cmocka_unit_test(test_agg__jit_warnings_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
