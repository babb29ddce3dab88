/* The protobuf writer and the deflate of pieces that lib/export's pprof
 * writer shares with nothing else (pbwrite.c). */
#ifndef TALLY_EXPORT_PBWRITE_H
#define TALLY_EXPORT_PBWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#include "tally/util.h"

/* protobuf's encoding of a message field by field, as protobuf-c would pack
 * it whole (fields in number order, each repeated element a tag, a length
 * and the element), each element packed as it is made. err is the first
 * failure (-ENOMEM, said with tally_seterr); what follows it is dropped. */
struct pbout {
	struct strbuf msg;
	int err;
};
void pb_put(struct pbout *pb, const void *p, size_t n);
void pb_varint(struct pbout *pb, uint64_t v);
/* A message: as a repeated element of field (tag, length, bytes), or with
 * field 0 the bytes alone (a Profile holding some of its fields). */
void pb_msg(struct pbout *pb, uint32_t field, const ProtobufCMessage *m);

/* One element of a repeated message field, encoded by hand as protobuf-c
 * would pack it (proto3: a scalar field that is 0 is left out, repeated
 * scalars are packed), into b before it goes out behind its tag and length. */
struct pbel {
	uint8_t *b;
	size_t n, alloc;
};
size_t varint_len(uint64_t v);
/* Room for at most room more bytes, from empty. */
void el_reset(struct pbel *e, size_t room);
static inline void el_varint(struct pbel *e, uint64_t v)
{
	while (v >= 0x80) {
		e->b[e->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	e->b[e->n++] = (uint8_t)v;
}

static inline void el_tag(struct pbel *e, uint32_t field, uint32_t wire)
{
	el_varint(e, (uint64_t)field << 3 | wire);
}

/* An int64 or uint64 field, left out when 0 (a negative one takes 10 bytes). */
static inline void el_int(struct pbel *e, uint32_t field, int64_t v)
{
	if (!v)
		return;
	el_tag(e, field, 0);
	el_varint(e, (uint64_t)v);
}
/* The element e as a repeated element of field. */
void pb_el(struct pbout *pb, uint32_t field, const struct pbel *e);

/* Raw deflate of in at the fastest level, appended to out: the last piece
 * ends the stream, any other ends on a byte, so that pieces deflated on
 * their own, one after the other, are one deflate stream. Z_OK, or zlib's
 * error. */
int deflate_piece(const unsigned char *in, size_t len, bool last, struct strbuf *out);

#endif
