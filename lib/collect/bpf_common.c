/* The BPF loaders' shared parts (bpf-common.h). */
#define _GNU_SOURCE
#include "bpf-common.h"
#include "tally/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* libbpf's first warning since the load began: the reason it failed (the
 * later ones repeat the failure one level up) */
static char last_msg[256];

static int on_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	char buf[sizeof(last_msg)];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	if (buf[0] && !last_msg[0])
		memcpy(last_msg, buf, sizeof(buf));
	return 0;
}

void tally_bpf_log_begin(void)
{
	last_msg[0] = 0;
	libbpf_set_print(on_libbpf_print);
}

int tally_bpf_error(int e, const char *what, const char *prog)
{
	return tally_seterr(e < 0 ? e : -EINVAL, "cannot %s the %s BPF program: %s%s%s", what, prog,
			    strerror(e < 0 ? -e : e), last_msg[0] ? ": " : "", last_msg);
}

void tally_bpf_drain_init(struct tally_bpf_drain *d, int fd, size_t ksz, size_t vsz, size_t batch,
			  const char *what)
{
	*d = (struct tally_bpf_drain){
		.fd = fd, .ksz = ksz, .vsz = vsz, .batch = batch, .batch_ok = true, .what = what
	};
	d->keys = xcalloc(batch, ksz);
	d->vals = xcalloc(batch, vsz);
}

void tally_bpf_drain_release(struct tally_bpf_drain *d)
{
	free(d->keys);
	free(d->vals);
	d->keys = d->vals = NULL;
}

/* One entry at a time: a kernel without batch operations on hash maps. */
static long drain_slow(struct tally_bpf_drain *d,
		       void (*each)(void *, const void *, const void *, size_t), void *ctx)
{
	long n = 0;
	while (!bpf_map_get_next_key(d->fd, NULL, d->keys)) {
		if (bpf_map_lookup_and_delete_elem(d->fd, d->keys, d->vals) &&
		    (bpf_map_lookup_elem(d->fd, d->keys, d->vals) ||
		     bpf_map_delete_elem(d->fd, d->keys)))
			return tally_seterr(-errno, "cannot read the %s: %s", d->what,
					    strerror(errno));
		each(ctx, d->keys, d->vals, 1);
		n++;
	}
	return n;
}

long tally_bpf_drain_all(struct tally_bpf_drain *d,
			 void (*each)(void *ctx, const void *keys, const void *vals, size_t n),
			 void *ctx)
{
	if (!d->batch_ok)
		return drain_slow(d, each, ctx);
	long n = 0;
	uint64_t token = 0;
	bool first = true;
	for (;;) {
		__u32 count = (__u32)d->batch;
		int r = bpf_map_lookup_and_delete_batch(d->fd, first ? NULL : &token, &token,
							d->keys, d->vals, &count, NULL);
		int e = r ? -errno : 0;
		if (r && e != -ENOENT && !count) {
			if (first && (e == -EINVAL || e == -ENOTSUP || e == -EOPNOTSUPP)) {
				d->batch_ok = false;
				return drain_slow(d, each, ctx);
			}
			return tally_seterr(e, "cannot read the %s: %s", d->what, strerror(-e));
		}
		first = false;
		if (count)
			each(ctx, d->keys, d->vals, count);
		n += count;
		if (r)
			break; /* -ENOENT: the end */
	}
	return n;
}
