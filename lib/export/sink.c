/* Where an export's files go (tally/export.h): each to OUTPUT + its suffix
 * through a temporary beside it, renamed when whole (big ones written as
 * the writer goes), a device or pipe written into, or stdout ("-"). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "tally/export.h"
#include "tally/util.h"

/* Outputs as they are written: big ones go on to their file while the writer
 * works (a temporary beside it, renamed when it is whole), or to stdout. */

static void tmp_name(struct strbuf *sb, const struct tally_export_sink *k,
		     const struct tally_export_out *out, size_t i)
{
	strbuf_reset(sb);
	strbuf_addf(sb, "%s%s.tmp.%d.%016" PRIx64, k->output, out->files[i].suffix, (int)getpid(),
		    k->token);
}

static int sink_put(void *ctx, size_t file, const void *data, size_t len)
{
	struct tally_export_sink *k = ctx;
	if (!strcmp(k->output, "-")) {
		int r = tally_write_all(STDOUT_FILENO, data, len);
		return r ? tally_seterr(r, "cannot write the export to stdout: %s", strerror(-r))
			 : 0;
	}
	while (k->nfd <= file) {
		k->fd = xrealloc(k->fd, (k->nfd + 1) * sizeof(int));
		k->stream = xrealloc(k->stream, (k->nfd + 1) * sizeof(bool));
		k->stream[k->nfd] = false;
		k->fd[k->nfd++] = -1;
	}
	struct strbuf path = STRBUF_INIT;
	tmp_name(&path, k, k->out, file);
	if (k->fd[file] < 0) {
		/* a device, pipe or socket (/dev/null, a FIFO) is written into, never replaced */
		struct strbuf real = STRBUF_INIT;
		strbuf_addf(&real, "%s%s", k->output, k->out->files[file].suffix);
		k->stream[file] = tally_path_is_stream(real.buf);
		if (k->stream[file]) {
			int fd = tally_open_stream(real.buf);
			strbuf_release(&real);
			if (fd < 0) {
				strbuf_release(&path);
				return fd;
			}
			k->fd[file] = fd;
		} else {
			/* an unpredictable name, made here and now (in /tmp another user
			 * could have made a predictable one first), 0600 as
			 * tally_write_file_atomic makes the small ones */
			k->fd[file] =
				open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				     0600);
			strbuf_release(&real);
		}
	}
	int r = k->fd[file] < 0 ? -errno : tally_write_all(k->fd[file], data, len);
	if (r)
		tally_seterr(r, "cannot write '%s%s': %s", k->output, k->out->files[file].suffix,
			     strerror(-r));
	strbuf_release(&path);
	return r;
}

/* Writes every output file atomically; on a failure removes those already
 * written (and the temporaries of those that were being written). */
int tally_export_sink_finish(struct tally_export_sink *k)
{
	const char *output = k->output;
	const struct tally_export_out *out = k->out;
	if (!strcmp(output, "-")) {
		for (size_t i = 0; i < out->n; i++) {
			int r = tally_write_all(
				STDOUT_FILENO, out->files[i].data.buf ? out->files[i].data.buf : "",
				out->files[i].data.len);
			if (r)
				return tally_seterr(r, "cannot write the export to stdout: %s",
						    strerror(-r));
		}
		return 0;
	}
	int r = 0;
	size_t i;
	struct strbuf path = STRBUF_INIT, tmp = STRBUF_INIT;
	for (i = 0; i < out->n && !r; i++) {
		strbuf_reset(&path);
		strbuf_addf(&path, "%s%s", output, out->files[i].suffix);
		const struct tally_export_file *f = &out->files[i];
		if (i < k->nfd && k->fd[i] >= 0) {
			/* written as it went: the rest, then in place */
			tmp_name(&tmp, k, out, i);
			r = tally_write_all(k->fd[i], f->data.buf ? f->data.buf : "", f->data.len);
			if (!r && !k->stream[i] && fsync(k->fd[i]) < 0)
				r = -errno;
			if (close(k->fd[i]) < 0 && !r && !k->stream[i])
				r = -errno;
			k->fd[i] = -1;
			if (!r && !k->stream[i] && rename(tmp.buf, path.buf) < 0)
				r = -errno;
			if (r) {
				if (!k->stream[i])
					unlink(tmp.buf);
				tally_seterr(r, "cannot write '%s': %s", path.buf, strerror(-r));
			}
		} else {
			r = tally_write_file_atomic(path.buf, f->data.buf ? f->data.buf : "",
						    f->data.len);
		}
	}
	if (r) {
		char keep[1024];
		snprintf(keep, sizeof(keep), "%s", tally_errmsg());
		for (size_t j = 0; j + 1 < i; j++) {
			strbuf_reset(&path);
			strbuf_addf(&path, "%s%s", output, out->files[j].suffix);
			if (!tally_path_is_stream(path.buf))
				unlink(path.buf);
		}
		tally_seterr(r, "%s", keep);
	}
	strbuf_release(&path);
	strbuf_release(&tmp);
	return r;
}

void tally_export_sink_release(struct tally_export_sink *k)
{
	const struct tally_export_out *out = k->out;
	struct strbuf tmp = STRBUF_INIT;
	for (size_t i = 0; i < k->nfd; i++)
		if (k->fd[i] >= 0) {
			close(k->fd[i]);
			tmp_name(&tmp, k, out, i);
			if (!k->stream[i])
				unlink(tmp.buf);
		}
	strbuf_release(&tmp);
	free(k->fd);
	free(k->stream);
	k->fd = NULL;
	k->stream = NULL;
	k->nfd = 0;
}

void tally_export_sink_attach(struct tally_export_sink *k, const char *output,
			      struct tally_export_out *out)
{
	*k = (struct tally_export_sink){ .output = output, .out = out };
	if (getrandom(&k->token, sizeof(k->token), GRND_NONBLOCK) != (ssize_t)sizeof(k->token))
		k->token = (uint64_t)tally_now_mono() * 1000003u ^ (uint64_t)getpid();
	out->put = sink_put;
	out->ctx = k;
}
