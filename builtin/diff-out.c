/* tally diff's outputs: text, JSON, an HTML page, folded stacks, a
 * differential flame graph or a pair of pprof profiles, and the --fail-above
 * gate's verdicts (builtin/diff.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin/builtin.h"
#include "builtin/diff.h"
#include "tally/export.h"
#include "tally/flame.h"
#include "tally/html.h"
#include "tally/util.h"
#include "tally/view.h"

static void side_cg(struct side *s)
{
	if (!s->have_cg) {
		tally_cg_build(&s->cg, &s->db, s->res, s->ev, NULL, NULL);
		s->have_cg = true;
	}
}

/* FILE's base: x.pb.gz -> x.base.pb.gz, else FILE.base. */
static char *base_name(const char *out)
{
	size_t n = strlen(out);
	struct strbuf sb = STRBUF_INIT;
	if (n > 6 && !strcmp(out + n - 6, ".pb.gz"))
		strbuf_addf(&sb, "%.*s.base.pb.gz", (int)(n - 6), out);
	else
		strbuf_addf(&sb, "%s.base", out);
	return strbuf_detach(&sb);
}

static int write_pprof(struct side *base, struct side *new_, const struct dopts *o)
{
	if (!o->absolute)
		tally_diff_normalize(&base->db, base->ev, &new_->db, new_->ev);
	struct tally_export_out outs[2];
	memset(outs, 0, sizeof(outs));
	struct side *sides[2] = { base, new_ };
	int r = 0;
	for (int i = 0; i < 2 && !r; i++) {
		struct tally_export x = { 0 };
		x.db = &sides[i]->db;
		x.res = sides[i]->res;
		x.input = sides[i]->input;
		x.events = &sides[i]->ev;
		x.nevents = 1;
		r = tally_export_pprof(&x, &outs[i]);
		tally_print_warnings(&outs[i].warnings);
	}
	char *bname = base_name(o->output);
	if (!r)
		r = tally_write_file_atomic(bname, outs[0].files[0].data.buf,
					    outs[0].files[0].data.len);
	if (!r) {
		r = tally_write_file_atomic(o->output, outs[1].files[0].data.buf,
					    outs[1].files[0].data.len);
		if (r)
			unlink(bname);
	}
	if (r)
		tally_error_last();
	else
		tally_say("wrote '%s' (new) and '%s' (base%s): go tool pprof -diff_base '%s' '%s'",
			  o->output, bname, o->absolute ? "" : ", scaled to the new total", bname,
			  o->output);
	free(bname);
	tally_export_out_release(&outs[0]);
	tally_export_out_release(&outs[1]);
	return r ? 1 : 0;
}

static int write_text_out(const char *output, const char *what, struct strbuf *sb)
{
	int r;
	if (!strcmp(output, "-")) {
		r = fwrite(sb->buf ? sb->buf : "", 1, sb->len, stdout) == sb->len &&
				    fflush(stdout) == 0
			    ? 0
			    : -EIO;
		if (r)
			tally_seterr(r, "cannot write to standard output");
	} else {
		r = tally_write_file_atomic(output, sb->buf ? sb->buf : "", sb->len);
	}
	if (r) {
		tally_error_last();
		return 1;
	}
	if (strcmp(output, "-"))
		tally_say("wrote '%s' (%s, %zu bytes)", output, what, sb->len);
	return 0;
}

int check_named(const struct tally_diff *d, const struct side *base, const struct side *new_)
{
	if (!d->nunnamed)
		return 0;
	const struct tally_diff_unnamed *u = &d->unnamed[0];
	const struct side *s = u->new_side ? new_ : base;
	const struct tally_db_image *di = &s->db.images[u->image];
	uint64_t total = u->new_side ? d->new_total : d->base_total;
	struct strbuf why = STRBUF_INIT;
	if (tally_resolver_mismatch(s->res, u->image) && strcmp(di->id_kind, "build-id") &&
	    strcmp(di->id_kind, "xxh64"))
		strbuf_addf(&why, "which file ran is unknown (%s)", di->id_kind);
	else if (tally_resolver_mismatch(s->res, u->image))
		strbuf_addf(
			&why,
			"'%s' is another build than the one recorded, %s %s, and no copy of that was found",
			di->path, di->id_kind, di->id);
	else if (di->path[0] == '/' && access(di->path, F_OK) != 0 && errno == ENOENT)
		strbuf_addf(&why, "'%s' is gone, and no copy of it was found", di->path);
	else
		strbuf_addf(&why, "%s", u->why ? u->why : "its file was not found");
	size_t same = 0;
	bool other = false;
	for (size_t i = 1; i < d->nunnamed; i++) {
		same += d->unnamed[i].new_side == u->new_side;
		other = other || d->unnamed[i].new_side != u->new_side;
	}
	if (same)
		strbuf_addf(&why, "; and %zu more image%s there", same, same == 1 ? "" : "s");
	if (other)
		strbuf_addf(&why, "; '%s' has such code too",
			    u->new_side ? base->input : new_->input);
	tally_error(
		"--fail-above cannot judge '%s': %.2f%% of its samples are in image '%s', whose code it cannot name (%s): "
		"record with the build-id cache on ('tally cache'), or 'tally archive' the base before rebuilding, "
		"or give the file with --image-path",
		s->input, tally_view_pct(u->value, total), u->name, why.buf);
	strbuf_release(&why);
	return 2;
}

int check_growth(const struct tally_diff *d, double limit)
{
	size_t n;
	const struct tally_diff_row **g = tally_diff_grew(d, limit, &n);
	if (!n) {
		free(g);
		return 0;
	}
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < n && i < 5; i++) {
		const struct tally_diff_row *r = g[i];
		strbuf_addf(&sb, "%s'%s' in '%s'", i ? ", " : "", r->name, r->image);
		if (d->view == TALLY_DIFF_LINES && r->file)
			strbuf_addf(&sb, " at %s:%d", tally_basename(r->file), r->line);
		strbuf_addf(&sb, " %+.2f", r->points);
	}
	if (n > 5)
		strbuf_addf(&sb, " and %zu more", n - 5);
	tally_error("%zu %s grew by more than %g points (--fail-above): %s", n,
		    d->view == TALLY_DIFF_LINES ? (n == 1 ? "line" : "lines")
						: (n == 1 ? "function" : "functions"),
		    limit, sb.buf);
	strbuf_release(&sb);
	free(g);
	return EXIT_GREW;
}

int write_diff(const struct tally_diff *d, struct side *base, struct side *new_,
	       const struct dopts *o, bool stacks)
{
	double limit = o->plimit_set ? o->percent_limit : TALLY_FLAME_DEFAULT_LIMIT;
	int wr = 0;
	if (o->html) {
		struct strbuf page = STRBUF_INIT;
		if (stacks) {
			side_cg(base);
			side_cg(new_);
		}
		struct tally_html_diff_opts ho = { limit, o->top };
		tally_html_diff(&page, d, stacks ? &base->cg : NULL, &base->db,
				stacks ? &new_->cg : NULL, &new_->db, &ho);
		if (tally_write_file_atomic(o->html, page.buf, page.len)) {
			tally_error_last();
			wr = 1;
		} else {
			tally_say("wrote '%s' (%zu bytes)", o->html, page.len);
		}
		strbuf_release(&page);
	} else if (o->format && !strcmp(o->format, "pprof")) {
		wr = write_pprof(base, new_, o);
	} else if (o->format) {
		side_cg(base);
		side_cg(new_);
		struct strbuf sb = STRBUF_INIT;
		if (!strcmp(o->format, "folded")) {
			tally_diff_folded(&sb, &base->cg, &base->db, &new_->cg, &new_->db,
					  !o->absolute);
		} else {
			struct strbuf title = STRBUF_INIT, sub = STRBUF_INIT;
			strbuf_addf(&title, "Differential flame graph: %s -> %s", base->input,
				    new_->input);
			strbuf_addf(&sub, "%s, %" PRIu64 " samples (base %" PRIu64 ")",
				    new_->db.events[new_->ev], new_->cg.total, base->cg.total);
			struct tally_flame_svg_opts fo = {
				title.buf, sub.buf, new_->db.events[new_->ev], NULL, true, 0, NULL
			};
			tally_flame_diff_svg(&sb, &base->cg, &base->db, &new_->cg, &new_->db, limit,
					     &fo);
			strbuf_release(&title);
			strbuf_release(&sub);
		}
		wr = write_text_out(o->output, o->format, &sb);
		strbuf_release(&sb);
	} else {
		struct strbuf out = STRBUF_INIT;
		if (o->json)
			tally_diff_json(&out, d, o->top);
		else
			tally_diff_text(&out, d, o->top);
		wr = write_text_out("-", "diff", &out);
		strbuf_release(&out);
	}
	return wr;
}
