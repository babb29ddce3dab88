/* tally top's screen (top.h): the rows as a text snapshot or as a terminal
 * screen in ANSI escapes, and the keys that change the view. Names come from
 * the profiled programs' symbol tables: a control byte in one is shown as '?',
 * never sent to the terminal. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/top.h"

static const char *const view_names[] = { "functions", "images", "commands" };
static const char *const sort_names[] = { "share", "self", "name", "image", "command" };

/* ---- the keys ---- */

void tally_top_ui_init(struct tally_top_ui *ui, bool callgraph)
{
	(void)callgraph;
	memset(ui, 0, sizeof(*ui));
	ui->q.view = TALLY_TOP_FUNCTIONS;
	ui->q.sort = TALLY_TOP_BY_SHARE;
	strbuf_init(&ui->input);
}

void tally_top_ui_release(struct tally_top_ui *ui)
{
	strbuf_release(&ui->input);
	free(ui->comm_filter);
	free(ui->image_filter);
	ui->comm_filter = ui->image_filter = NULL;
	ui->q.comm_filter = ui->q.image_filter = NULL;
}

static void set_filter(struct tally_top_ui *ui, int which, const char *s)
{
	char **slot = which == 'c' ? &ui->comm_filter : &ui->image_filter;
	free(*slot);
	*slot = s && *s ? xstrdup(s) : NULL;
	ui->q.comm_filter = ui->comm_filter;
	ui->q.image_filter = ui->image_filter;
}

int tally_top_key(struct tally_top_ui *ui, int key)
{
	if (key == 3) { /* ^C */
		ui->quit = true;
		return 1;
	}
	if (ui->prompt) {
		if (key == '\r' || key == '\n') {
			set_filter(ui, ui->prompt, ui->input.buf);
			ui->prompt = 0;
		} else if (key == 27) {
			ui->prompt = 0;
		} else if (key == 127 || key == 8) {
			if (ui->input.len)
				ui->input.buf[--ui->input.len] = 0;
		} else if (key >= 0x20 && key < 0x7f) {
			if (ui->input.len < 64)
				strbuf_addch(&ui->input, (char)key);
		} else {
			return 0;
		}
		return 1;
	}
	switch (key) {
	case 'q':
	case 'Q':
		ui->quit = true;
		return 1;
	case 'v':
	case '\t':
		ui->q.view = (enum tally_top_view)((ui->q.view + 1) % 3);
		break;
	case '1':
	case '2':
	case '3':
		ui->q.view = (enum tally_top_view)(key - '1');
		break;
	case 's':
		ui->q.sort = (enum tally_top_sort)((ui->q.sort + 1) % TALLY_TOP_NSORTS);
		break;
	case 'S':
		ui->q.sort = TALLY_TOP_BY_SHARE;
		break;
	case 'c':
	case 'i':
		ui->prompt = key;
		strbuf_reset(&ui->input);
		strbuf_addstr(&ui->input, key == 'c' ? (ui->comm_filter ? ui->comm_filter : "")
						     : (ui->image_filter ? ui->image_filter : ""));
		break;
	case '=':
		set_filter(ui, 'c', NULL);
		set_filter(ui, 'i', NULL);
		break;
	case ' ':
	case 'p':
		ui->frozen = !ui->frozen;
		break;
	case 'h':
	case '?':
		ui->help = !ui->help;
		break;
	default:
		if (ui->help) { /* any key leaves the help */
			ui->help = false;
			break;
		}
		return 0;
	}
	return 1;
}

/* ---- text ---- */

/* s with control bytes (and, in the screen, bytes past the width) made safe:
 * at most width columns (a UTF-8 sequence counts one, and is never cut). */
static void add_safe(struct strbuf *out, const char *s, size_t width, bool pad)
{
	size_t cols = 0;
	if (!s)
		s = "";
	for (const unsigned char *p = (const unsigned char *)s; *p && cols < width; cols++) {
		if (*p < 0x20 || *p == 0x7f) {
			strbuf_addch(out, '?');
			p++;
			continue;
		}
		if (*p < 0x80) {
			strbuf_addch(out, (char)*p++);
			continue;
		}
		/* a multi-byte sequence, whole; a stray byte is '?' */
		size_t n = (*p & 0xe0) == 0xc0   ? 2
			   : (*p & 0xf0) == 0xe0 ? 3
			   : (*p & 0xf8) == 0xf0 ? 4
						 : 0;
		size_t k = 1;
		while (n && k < n && (p[k] & 0xc0) == 0x80)
			k++;
		if (!n || k != n) {
			strbuf_addch(out, '?');
			p++;
			continue;
		}
		strbuf_add(out, p, n);
		p += n;
	}
	if (pad)
		for (; cols < width; cols++)
			strbuf_addch(out, ' ');
}

static size_t safe_len(const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
		if ((*p & 0xc0) != 0x80)
			n++;
	return n;
}

static void comm_label(const struct tally_top_row *r, char *buf, size_t n)
{
	if (r->ncomms > 1)
		snprintf(buf, n, "%s +%zu", r->comm, r->ncomms - 1);
	else
		snprintf(buf, n, "%s", r->comm ? r->comm : "?");
}

static void status_line(const struct tally_top_status *st, const struct tally_top_query *q,
			bool frozen, struct strbuf *out)
{
	/* what the view is first: a narrow terminal cuts the end */
	strbuf_addf(out, "%s by %s", view_names[q->view], sort_names[q->sort]);
	if (q->comm_filter && *q->comm_filter) {
		strbuf_addstr(out, ", command '");
		add_safe(out, q->comm_filter, 64, false);
		strbuf_addch(out, '\'');
	}
	if (q->image_filter && *q->image_filter) {
		strbuf_addstr(out, ", image '");
		add_safe(out, q->image_filter, 64, false);
		strbuf_addch(out, '\'');
	}
	if (frozen)
		strbuf_addstr(out, " [frozen]");
	strbuf_addf(out, ", %s, %s, %.0f samples/s, %llu samples, %llu lost",
		    st->target ? st->target : "?", st->events ? st->events : "?", st->rate,
		    (unsigned long long)st->samples, (unsigned long long)st->lost);
}

void tally_top_text(struct tally_top *t, const struct tally_top_query *q,
		    const struct tally_top_status *st, size_t max, struct strbuf *out)
{
	struct tally_top_row *rows;
	size_t n = tally_top_rows(t, q, &rows);
	if (max && n > max)
		n = max;
	double all = tally_top_total(t);
	bool cg = tally_top_callgraph(t) && q->view != TALLY_TOP_COMMANDS;
	size_t wi = 5, wc = 7;
	char cl[64];
	for (size_t i = 0; i < n; i++) {
		size_t l = safe_len(rows[i].image);
		wi = l > wi ? l : wi;
		comm_label(&rows[i], cl, sizeof(cl));
		l = safe_len(cl);
		wc = l > wc ? l : wc;
	}
	strbuf_addstr(out, "# tally top: ");
	status_line(st, q, false, out);
	strbuf_addch(out, '\n');
	const char *unit = st->unit ? st->unit : "samples";
	double scale = !strcmp(unit, "msec") ? 1e-6 : 1;
	/* the columns of the screen's view: the image beside a function only,
	 * the command beside a function or an image; the name last */
	bool show_image = q->view == TALLY_TOP_FUNCTIONS;
	bool show_comm = q->view != TALLY_TOP_COMMANDS;
	strbuf_addf(out, "%8s %s%10s  ", "share", cg ? "    self " : "", unit);
	if (show_image) {
		add_safe(out, "image", wi, true);
		strbuf_addstr(out, "  ");
	}
	if (show_comm) {
		add_safe(out, "command", wc, true);
		strbuf_addstr(out, "  ");
	}
	strbuf_addf(out, "%s\n",
		    q->view == TALLY_TOP_FUNCTIONS ? "function"
		    : q->view == TALLY_TOP_IMAGES  ? "image"
						   : "command");
	for (size_t i = 0; i < n; i++) {
		const struct tally_top_row *r = &rows[i];
		strbuf_addf(out, "%7.2f%%", all > 0 ? 100 * r->total / all : 0.0);
		if (cg)
			strbuf_addf(out, " %7.2f%%", all > 0 ? 100 * r->self / all : 0.0);
		strbuf_addf(out, " %10.1f  ", r->total * scale);
		if (show_image) {
			add_safe(out, r->image, wi, true);
			strbuf_addstr(out, "  ");
		}
		if (show_comm) {
			comm_label(r, cl, sizeof(cl));
			add_safe(out, cl, wc, true);
			strbuf_addstr(out, "  ");
		}
		add_safe(out, r->name, 4096, false);
		strbuf_addch(out, '\n');
	}
	free(rows);
}

/* ---- the terminal ---- */

static void line_end(struct strbuf *out)
{
	strbuf_addstr(out, "\033[K\r\n");
}

static const char *const help_text[] = {
	"keys:",
	"  v, Tab   next view: functions, images, commands (1, 2, 3: that view)",
	"  s        next order: share, self, name, image, command (S: share)",
	"  c        filter by command (a part of its name; empty: none)",
	"  i        filter by image (a part of its name; empty: none)",
	"  =        no filters",
	"  Space, p freeze the screen (sampling goes on), and again to thaw",
	"  h, ?     this help (any key leaves it)",
	"  q, ^C    quit",
};

void tally_top_screen(struct tally_top *t, const struct tally_top_ui *ui,
		      const struct tally_top_status *st, int width, int height, struct strbuf *out)
{
	if (width < 20)
		width = 20;
	if (height < 4)
		height = 4;
	size_t w = (size_t)width;
	struct strbuf line = STRBUF_INIT;
	strbuf_addstr(out, "\033[H");
	/* the status, cut to the width */
	strbuf_addstr(&line, "tally top: ");
	status_line(st, &ui->q, ui->frozen, &line);
	add_safe(out, line.buf, w, false);
	line_end(out);
	strbuf_reset(&line);
	if (st->message)
		add_safe(out, st->message, w, false);
	line_end(out);
	int used = 2;
	if (ui->help) {
		for (size_t i = 0; i < ARRAY_SIZE(help_text) && used < height - 1; i++, used++) {
			add_safe(out, help_text[i], w, false);
			line_end(out);
		}
	} else {
		struct tally_top_row *rows;
		size_t n = tally_top_rows(t, &ui->q, &rows);
		double all = tally_top_total(t);
		bool cg = tally_top_callgraph(t) && ui->q.view != TALLY_TOP_COMMANDS;
		/* columns: shares, then image and command as wide as they need up
		 * to a bound, the name gets the rest */
		size_t wi = 5, wc = 7;
		char cl[64];
		for (size_t i = 0; i < n && (int)i < height; i++) {
			size_t l = safe_len(rows[i].image);
			wi = l > wi ? l : wi;
			comm_label(&rows[i], cl, sizeof(cl));
			l = safe_len(cl);
			wc = l > wc ? l : wc;
		}
		wi = wi > 24 ? 24 : wi;
		wc = wc > 20 ? 20 : wc;
		bool show_image = ui->q.view == TALLY_TOP_FUNCTIONS;
		bool show_comm = ui->q.view != TALLY_TOP_COMMANDS;
		strbuf_addf(&line, "%8s%s  ", "share", cg ? "     self" : "");
		if (show_image) {
			add_safe(&line, "image", wi, true);
			strbuf_addstr(&line, "  ");
		}
		if (show_comm) {
			add_safe(&line, "command", wc, true);
			strbuf_addstr(&line, "  ");
		}
		strbuf_addstr(&line, ui->q.view == TALLY_TOP_FUNCTIONS ? "function"
				     : ui->q.view == TALLY_TOP_IMAGES  ? "image"
								       : "command");
		strbuf_addstr(out, "\033[7m");
		add_safe(out, line.buf, w, true);
		strbuf_addstr(out, "\033[0m");
		line_end(out);
		used++;
		strbuf_reset(&line);
		for (size_t i = 0; i < n && used < height - 1; i++, used++) {
			const struct tally_top_row *r = &rows[i];
			strbuf_addf(&line, "%7.2f%%", all > 0 ? 100 * r->total / all : 0.0);
			if (cg)
				strbuf_addf(&line, " %7.2f%%", all > 0 ? 100 * r->self / all : 0.0);
			strbuf_addstr(&line, "  ");
			if (show_image) {
				add_safe(&line, r->image, wi, true);
				strbuf_addstr(&line, "  ");
			}
			if (show_comm) {
				comm_label(r, cl, sizeof(cl));
				add_safe(&line, cl, wc, true);
				strbuf_addstr(&line, "  ");
			}
			add_safe(&line, r->name, 4096, false);
			/* line holds only safe bytes now: cut it to the width */
			add_safe(out, line.buf, w, false);
			line_end(out);
			strbuf_reset(&line);
		}
		free(rows);
	}
	for (; used < height - 1; used++)
		line_end(out);
	/* the bottom line: the prompt, or the keys */
	if (ui->prompt) {
		strbuf_addstr(&line, ui->prompt == 'c' ? "command filter: " : "image filter: ");
		add_safe(&line, ui->input.buf, 64, false);
		add_safe(out, line.buf, w, false);
		strbuf_addstr(out, "\033[K");
	} else {
		strbuf_addstr(out, "\033[7m");
		add_safe(
			out,
			"q quit  v view  s sort  c command  i image  = no filter  space freeze  h help",
			w, true);
		strbuf_addstr(out, "\033[0m\033[K");
	}
	strbuf_release(&line);
}
