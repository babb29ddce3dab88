/* Writing a jitdump (perf's binary format, as a runtime does) in the JIT
 * workloads: a byte buffer, records with their header, and writes that end
 * the workload when they fail. */
#ifndef JITDUMP_WRITE_H
#define JITDUMP_WRITE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct buf {
	unsigned char b[4096];
	size_t n;
};

static inline void put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static inline void put8(struct buf *b, uint8_t v) { put(b, &v, 1); }
static inline void put32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static inline void put64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static inline void set32(struct buf *b, size_t at, uint32_t v) { memcpy(b->b + at, &v, 4); }

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The header and then the payload, in one write (a reader never sees half a
 * header). */
static inline void wr2(int fd, const void *a, size_t an, const void *p, size_t pn)
{
	struct iovec v[2] = { { (void *)a, an }, { (void *)p, pn } };
	if (writev(fd, v, 2) != (ssize_t)(an + pn)) {
		perror("write jitdump");
		exit(1);
	}
}

static inline void wr(int fd, const struct buf *b) { wr2(fd, b->b, b->n, "", 0); }

/* A record: id, total size (claim when not 0: a record that lies about its
 * size), timestamp, then the payload. */
static inline void record(int fd, uint32_t id, const struct buf *payload, uint32_t claim)
{
	unsigned char h[16];
	uint32_t size = claim ? claim : (uint32_t)(16 + payload->n);
	uint64_t ts = now_ns();
	memcpy(h, &id, 4);
	memcpy(h + 4, &size, 4);
	memcpy(h + 8, &ts, 8);
	wr2(fd, h, sizeof(h), payload->b, payload->n);
}

#endif
