/* A protobuf message written field by field, as protobuf-c would pack it,
 * and raw deflate in pieces (lib/export/pbwrite.h): what the pprof writer
 * uses to encode a profile of millions of samples without a structure per
 * sample, and to compress its pieces side by side. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <zlib.h>

#include "lib/export/pbwrite.h"

void pb_put(struct pbout *pb, const void *p, size_t n)
{
	if (!n || pb->err)
		return;
	if (strbuf_grow(&pb->msg, n)) {
		pb->err = tally_seterr(
			-ENOMEM, "no memory for the pprof profile (%zu bytes so far)", pb->msg.len);
		return;
	}
	memcpy(pb->msg.buf + pb->msg.len, p, n);
	pb->msg.len += n;
}

void pb_varint(struct pbout *pb, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;
	do {
		b[n] = v & 0x7f;
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	pb_put(pb, b, n);
}

/* A message: as a repeated element of field (tag, length, bytes), or with
 * field 0 the bytes alone (a Profile holding some of its fields). */
void pb_msg(struct pbout *pb, uint32_t field, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	if (field) {
		pb_varint(pb, (uint64_t)field << 3 | 2);
		pb_varint(pb, n);
	}
	if (pb->err || strbuf_grow(&pb->msg, n)) {
		if (!pb->err)
			pb->err = tally_seterr(-ENOMEM,
					       "no memory for the pprof profile (%zu bytes so far)",
					       pb->msg.len);
		return;
	}
	pb->msg.len += protobuf_c_message_pack(m, (uint8_t *)pb->msg.buf + pb->msg.len);
}



size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Room for at most room more bytes, from empty. */
void el_reset(struct pbel *e, size_t room)
{
	e->n = 0;
	GROW(e->b, e->alloc, room);
}

void pb_el(struct pbout *pb, uint32_t field, const struct pbel *e)
{
	pb_varint(pb, (uint64_t)field << 3 | 2);
	pb_varint(pb, e->n);
	pb_put(pb, e->b, e->n);
}

/* Raw deflate of in at the fastest level (as Go's runtime/pprof writes its
 * profiles), with zlib's largest hash table (memLevel 9: 8% less time than
 * its default 8 on a profile of a million stacks, 0.1% larger), appended to
 * out: the last piece of the stream ends with the final block, any other on
 * a byte (Z_SYNC_FLUSH), so that pieces deflated on their own, one after the
 * other, are one deflate stream. Z_OK, or zlib's error. */
int deflate_piece(const unsigned char *in, size_t len, bool last, struct strbuf *out)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	int zr = deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY);
	if (zr != Z_OK)
		return zr;
	/* zlib's bound for len bytes at these settings, and a sync flush's marker */
	_Static_assert(sizeof(uLong) >= sizeof(size_t), "deflateBound takes any size");
	size_t room = deflateBound(&z, (uLong)len) + 16;
	if (strbuf_grow(out, room)) {
		deflateEnd(&z);
		return Z_MEM_ERROR;
	}
	/* zlib counts in uInt: a piece past 4 GiB goes in parts */
	unsigned char *o = (unsigned char *)out->buf + out->len;
	size_t left = len;
	int flush = Z_NO_FLUSH;
	while (zr == Z_OK && flush != (last ? Z_FINISH : Z_SYNC_FLUSH)) {
		uInt nin = left > UINT_MAX ? UINT_MAX : (uInt)left;
		uInt nout = room > UINT_MAX ? UINT_MAX : (uInt)room;
		flush = (size_t)nin == left ? (last ? Z_FINISH : Z_SYNC_FLUSH) : Z_NO_FLUSH;
		z.next_in = (Bytef *)in;
		z.avail_in = nin;
		z.next_out = o;
		z.avail_out = nout;
		zr = deflate(&z, flush);
		in += nin - z.avail_in;
		left -= nin - z.avail_in;
		o += nout - z.avail_out;
		room -= nout - z.avail_out;
		if (zr == Z_OK && (z.avail_in || !z.avail_out))
			zr = Z_BUF_ERROR; /* the room was deflateBound's: cannot happen */
		if (zr == Z_STREAM_END)
			zr = Z_OK;
	}
	deflateEnd(&z);
	out->len = (size_t)((char *)o - out->buf);
	out->buf[out->len] = '\0';
	return zr;
}
