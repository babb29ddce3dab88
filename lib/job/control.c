/* Control files (tally_job_control_parse, job.h): one command a line, checked
 * whole before anything runs, every error "'PATH' line N: ..." on one line. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tally/remote.h"

static const char *const builtin_tests[] = { "sleeptest", NULL };

bool tally_job_builtin_test(const char *name)
{
	for (size_t i = 0; builtin_tests[i]; i++)
		if (!strcmp(builtin_tests[i], name))
			return true;
	return false;
}

void tally_job_control_release(struct tally_job_control *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->steps[i].name);
		free(c->steps[i].tag);
		tally_job_argv_free(c->steps[i].args);
	}
	free(c->steps);
	free(c->path);
	memset(c, 0, sizeof(*c));
}

/* "'PATH' line N: " + msg, as the error of the whole parse. */
static int line_error(const struct tally_job_control *c, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int line_error(const struct tally_job_control *c, unsigned line, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	char q[JOB_QPATH_SIZE];
	tally_seterr(-EINVAL, "'%s' line %u: %s", job_qpath_buf(q, c->path), line, sb.buf);
	strbuf_release(&sb);
	return -EINVAL;
}

/* Whether the host w[k] of a 'hosts' line is named before it, there or on an
 * earlier 'hosts' line. */
static bool job_host_listed(const struct tally_job_control *c, char **w, size_t k)
{
	for (size_t i = 1; i < k; i++)
		if (!strcmp(w[i], w[k]))
			return true;
	for (size_t i = 0; i < c->n; i++)
		for (size_t a = 0;
		     c->steps[i].cmd == TALLY_JOB_HOSTS && c->steps[i].args && c->steps[i].args[a];
		     a++)
			if (!strcmp(c->steps[i].args[a], w[k]))
				return true;
	return false;
}

/* Profiler names become directory names on the path: no '/', no "..". */
static bool valid_name(const char *s)
{
	if (!*s || *s == '.' || strlen(s) > 64)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			return false;
	return true;
}

/* Tags become directory names under RESULTS: the same characters, and not the
 * job's own files. */
static bool reserved_tag(const char *s)
{
	return !strcmp(s, "status.json") || !strcmp(s, "control");
}

static char *default_tag(const char *word)
{
	const char *b = tally_basename(word);
	char *t = xstrdup(*b ? b : "test");
	for (char *p = t; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.' || *p == '+'))
			*p = '_';
	if (*t == '.')
		*t = '_';
	return t;
}

static bool tag_taken(const struct tally_job_control *c, const char *tag)
{
	if (reserved_tag(tag))
		return true;
	for (size_t i = 0; i < c->n; i++)
		if (c->steps[i].tag && !strcmp(c->steps[i].tag, tag))
			return true;
	return false;
}

static char *unique_tag(const struct tally_job_control *c, const char *base)
{
	if (!tag_taken(c, base))
		return xstrdup(base);
	struct strbuf sb = STRBUF_INIT;
	for (unsigned k = 2;; k++) {
		strbuf_reset(&sb);
		strbuf_addf(&sb, "%s.%u", base, k);
		if (!tag_taken(c, sb.buf))
			return strbuf_detach(&sb);
	}
}

/* The profilers added at this point of the file (for delete and add checks). */
struct added {
	char **names;
	unsigned *lines;
	size_t n, alloc;
};

static ssize_t added_find(const struct added *a, const char *name)
{
	for (size_t i = 0; i < a->n; i++)
		if (!strcmp(a->names[i], name))
			return (ssize_t)i;
	return -1;
}

static int parse_profilers(struct tally_job_control *c, struct tally_job_step *s, char **w,
			   size_t n, struct added *a)
{
	if (n < 2)
		return line_error(
			c, s->line,
			"'profilers' needs add, delete or only (e.g. 'profilers add tally -g')");
	const char *sub = w[1];
	if (!strcmp(sub, "only")) {
		if (n != 3 || (strcmp(w[2], "on") && strcmp(w[2], "off")))
			return line_error(c, s->line, "'profilers only' takes on or off");
		s->cmd = TALLY_JOB_ONLY;
		s->only = !strcmp(w[2], "on");
		return 0;
	}
	bool add = !strcmp(sub, "add");
	if (!add && strcmp(sub, "delete"))
		return line_error(
			c, s->line,
			"unknown 'profilers %s' (profilers add NAME [ARGS...], profilers delete NAME, profilers only on|off)",
			sub);
	if (n < 3)
		return line_error(
			c, s->line,
			"'profilers %s' needs a profiler's name (see 'tally job profilers')", sub);
	if (!valid_name(w[2])) {
		char q[TALLY_EXCERPT_SIZE];
		return line_error(
			c, s->line,
			"'%s' is not a profiler's name (letters, digits, '_', '-' and '.', not first)",
			tally_excerpt(q, w[2]));
	}
	s->name = xstrdup(w[2]);
	ssize_t at = added_find(a, w[2]);
	if (add) {
		s->cmd = TALLY_JOB_ADD;
		s->args = tally_job_argv_dup(w + 3);
		if (at >= 0 && strcmp(w[2], "cmd"))
			return line_error(
				c, s->line,
				"profiler '%s' is already added (line %u): 'profilers delete %s' first",
				w[2], a->lines[at], w[2]);
		/* a built-in's arguments, with the rest of the file: before
		 * anything is made or run */
		if (job_builtin_check(w[2], s->args)) {
			char msg[1024];
			snprintf(msg, sizeof(msg), "%s", tally_errmsg());
			return line_error(c, s->line, "%s", msg);
		}
		GROW(a->names, a->alloc, a->n + 1);
		a->lines = xrealloc(a->lines, a->alloc * sizeof(*a->lines));
		a->names[a->n] = s->name;
		a->lines[a->n++] = s->line;
		return 0;
	}
	s->cmd = TALLY_JOB_DELETE;
	if (n > 3)
		return line_error(c, s->line, "'profilers delete' takes one name, not arguments");
	if (at < 0)
		return line_error(c, s->line, "profiler '%s' is not added here, nothing to delete",
				  w[2]);
	/* every instance of the name goes (several cmd) */
	size_t k = 0;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->names[i], w[2])) {
			a->names[k] = a->names[i];
			a->lines[k++] = a->lines[i];
		}
	a->n = k;
	return 0;
}

static int parse_run(struct tally_job_control *c, struct tally_job_step *s, char **w, size_t n)
{
	s->cmd = TALLY_JOB_RUN;
	s->iterations = 1;
	const char *tag = NULL;
	size_t i = 1;
	for (; i < n && w[i][0] == '-' && w[i][1] == '-' && w[i][2]; i++) {
		const char *opt = w[i], *val = NULL, *eq = strchr(opt, '=');
		size_t len = eq ? (size_t)(eq - opt) : strlen(opt);
		const char *names[] = { "--iterations", "--tag", "--timeout" };
		int which = -1;
		for (int k = 0; k < 3; k++)
			if (strlen(names[k]) == len && !strncmp(opt, names[k], len))
				which = k;
		if (which < 0) {
			char q[TALLY_EXCERPT_SIZE];
			return line_error(
				c, s->line,
				"unknown run option '%s' (--iterations N, --tag TAG, --timeout D)",
				tally_excerpt(q, opt));
		}
		if (eq)
			val = eq + 1;
		else if (i + 1 < n)
			val = w[++i];
		else
			return line_error(c, s->line, "'%s' needs a value", names[which]);
		if (which == 0) {
			uint64_t it;
			if (tally_parse_u64(val, "--iterations", 1, 100000, &it))
				return line_error(c, s->line, "%s", tally_errmsg());
			s->iterations = (unsigned)it;
		} else if (which == 1) {
			if (!valid_name(val) || reserved_tag(val)) {
				char q[TALLY_EXCERPT_SIZE];
				return line_error(
					c, s->line,
					"'%s' cannot be a tag (letters, digits, '_', '-' and '.', not first; not status.json or control)",
					tally_excerpt(q, val));
			}
			tag = val;
		} else if (tally_parse_duration(val, "--timeout", &s->timeout)) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%s", tally_errmsg());
			return line_error(c, s->line, "%s", msg);
		}
	}
	if (i < n && !strcmp(w[i], "--")) {
		i++;
		if (i >= n)
			return line_error(c, s->line, "'run --' needs a command");
		s->command = true;
	} else if (i >= n) {
		return line_error(c, s->line,
				  "'run' needs a test (built-in: sleeptest) or '-- COMMAND'");
	} else if (!tally_job_builtin_test(w[i])) {
		char q[TALLY_EXCERPT_SIZE];
		return line_error(
			c, s->line,
			"unknown test '%s' (built-in tests: sleeptest; a command goes after '--': run -- %s)",
			tally_excerpt(q, w[i]), tally_excerpt(q, w[i]));
	} else {
		/* sleeptest SECONDS */
		double d = 0;
		if (i + 2 != n ||
		    (strcmp(w[i + 1], "0") && tally_parse_duration(w[i + 1], "sleeptest", &d)))
			return line_error(
				c, s->line,
				"sleeptest takes one duration in seconds (e.g. 'run sleeptest 1', '500ms')");
	}
	s->args = tally_job_argv_dup(w + i);
	if (tag) {
		/* a tag given is never renamed: the automatic ones (given at the
		 * end of the file) step aside for it, and another run giving it
		 * is refused */
		for (size_t k = 0; k < c->n; k++)
			if (c->steps[k].tag && !strcmp(c->steps[k].tag, tag))
				return line_error(
					c, s->line,
					"tag '%s' is already given on line %u (each run's results need a tag of their own)",
					tag, c->steps[k].line);
		s->tag = xstrdup(tag);
	}
	return 0;
}

/* A line of autotest's Python control files (job.profilers.add("tally"),
 * job.run_test(...)): the error says what to write here instead. */
static int python_hint(const struct tally_job_control *c, unsigned line, char **w, size_t n)
{
	static const char *const forms[][2] = { { "job.profilers.add(", "profilers add" },
						{ "job.profilers.delete(", "profilers delete" } };
	struct strbuf all = STRBUF_INIT, q = STRBUF_INIT, fix = STRBUF_INIT;
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&all, "%s%s", i ? " " : "", w[i]);
	strbuf_add_excerpt(&q, all.buf, all.len, 80);
	for (size_t f = 0; f < ARRAY_SIZE(forms) && !fix.len; f++) {
		size_t pl = strlen(forms[f][0]);
		if (strncmp(all.buf, forms[f][0], pl) || all.buf[all.len - 1] != ')' ||
		    strchr(all.buf, '='))
			continue;
		/* its arguments, the quotes already gone: NAME, ARG, ... */
		strbuf_addstr(&fix, forms[f][1]);
		for (char *a = all.buf + pl; a < all.buf + all.len - 1;) {
			a += strspn(a, ", ");
			size_t len = strcspn(a, ", ");
			if (a + len > all.buf + all.len - 1)
				len = (size_t)(all.buf + all.len - 1 - a);
			if (len)
				strbuf_addf(&fix, " %.*s", (int)len, a);
			a += len;
		}
	}
	int ret;
	if (fix.len) {
		struct strbuf fq = STRBUF_INIT;
		strbuf_add_excerpt(&fq, fix.buf, fix.len, 80);
		ret = line_error(c, line,
				 "unknown command '%s': a control file is not Python, write '%s'",
				 q.buf, fq.buf);
		strbuf_release(&fq);
	} else {
		ret = line_error(
			c, line,
			"unknown command '%s': a control file is not Python (profilers add NAME [ARGS...], profilers delete NAME, run TEST [ARGS...]; docs/job.md)",
			q.buf);
	}
	strbuf_release(&all);
	strbuf_release(&q);
	strbuf_release(&fix);
	return ret;
}

int tally_job_control_parse(struct tally_job_control *c, const char *path, const char *text)
{
	memset(c, 0, sizeof(*c));
	c->path = xstrdup(path);
	struct added a = { 0 };
	int ret = 0;
	bool any_run = false;
	unsigned lineno = 0;
	const char *p = text;
	while (*p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char *line = xstrndup(p, len);
		p += len + (e ? 1 : 0);
		lineno++;
		if (memchr(line, '\0', len) || strlen(line) != len) {
			free(line);
			ret = line_error(c, lineno, "a NUL byte: this is not a control file");
			goto out;
		}
		char **w;
		size_t n;
		if (tally_job_split(line, &w, &n)) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%s", tally_errmsg());
			free(line);
			ret = line_error(c, lineno, "%s", msg);
			goto out;
		}
		free(line);
		if (!n) {
			tally_job_argv_free(w);
			continue;
		}
		GROW(c->steps, c->alloc, c->n + 1);
		struct tally_job_step *s = &c->steps[c->n];
		memset(s, 0, sizeof(*s));
		s->line = lineno;
		if (!strcmp(w[0], "profilers")) {
			ret = parse_profilers(c, s, w, n, &a);
		} else if (!strcmp(w[0], "run")) {
			ret = parse_run(c, s, w, n);
			any_run = true;
		} else if (!strcmp(w[0], "hosts")) {
			s->cmd = TALLY_JOB_HOSTS;
			if (n < 2)
				ret = line_error(
					c, lineno,
					"'hosts' needs at least one host (as ssh takes it)");
			else if (any_run)
				ret = line_error(
					c, lineno,
					"'hosts' must come before the first 'run' (the hosts are the whole job's)");
			for (size_t k = 1; !ret && k < n; k++) {
				char q[TALLY_EXCERPT_SIZE];
				if (tally_remote_host_ok(w[k]))
					ret = line_error(c, lineno, "%s", tally_errmsg());
				else if (job_host_listed(c, w, k))
					ret = line_error(
						c, lineno,
						"host '%s' is named twice (a host is one of the job's hosts once)",
						tally_excerpt(q, w[k]));
			}
			if (!ret)
				s->args = tally_job_argv_dup(w + 1);
		} else if (!strncmp(w[0], "job.", 4)) {
			ret = python_hint(c, lineno, w, n);
		} else {
			char q[TALLY_EXCERPT_SIZE];
			ret = line_error(
				c, lineno,
				"unknown command '%s' (commands: profilers add|delete|only, run, hosts)",
				tally_excerpt(q, w[0]));
		}
		c->n++; /* kept even when bad: release frees what it holds */
		tally_job_argv_free(w);
		if (ret)
			goto out;
	}
	/* the tags not given: the test's name, unless a run has it already
	 * (given anywhere in the file, or an earlier automatic one): .2, .3 */
	for (size_t i = 0; i < c->n && !ret; i++) {
		struct tally_job_step *s = &c->steps[i];
		if (s->cmd != TALLY_JOB_RUN || s->tag)
			continue;
		char *base = default_tag(s->args[0]);
		s->tag = unique_tag(c, base);
		free(base);
	}
	if (!any_run) {
		char q[JOB_QPATH_SIZE];
		ret = tally_seterr(-EINVAL,
				   "'%s' has no 'run' line: nothing to do (e.g. 'run sleeptest 1')",
				   job_qpath_buf(q, c->path));
	}
out:
	free(a.names);
	free(a.lines);
	return ret;
}

int tally_job_control_read(struct tally_job_control *c, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	memset(c, 0, sizeof(*c));
	int r = tally_read_regular(&sb, AT_FDCWD, path, TALLY_OPEN_FOLLOW, 1 << 20);
	if (r) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", tally_errmsg());
		tally_seterr(r, "%s (the control file)", msg);
		strbuf_release(&sb);
		c->path = xstrdup(path);
		return r;
	}
	if (memchr(sb.buf, '\0', sb.len)) {
		char q[JOB_QPATH_SIZE];
		strbuf_release(&sb);
		c->path = xstrdup(path);
		return tally_seterr(-EINVAL, "'%s' holds NUL bytes: it is not a control file",
				    job_qpath_buf(q, path));
	}
	r = tally_job_control_parse(c, path, sb.buf ? sb.buf : "");
	strbuf_release(&sb);
	return r;
}
