/* The daemon's control server (docs/daemon.md): the socket, the connections
 * (each read until its request is complete, then answered as fast as the peer
 * reads, never waited on), who may connect, the limits that keep stallers from
 * holding the slots, and what each request does. The protocol itself is
 * lib/daemon/ctl.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/daemon/internal.h"
#include "tally/ctl.h"
#include "tally/epoch.h"
#include "tally/offcpu.h"

/* ---- requests ---- */

static uint64_t rss_bytes(void)
{
	struct strbuf sb = STRBUF_INIT;
	uint64_t rss = 0;
	if (strbuf_read_file(&sb, "/proc/self/statm", 256) == 0) {
		unsigned long long pages = 0;
		if (sscanf(sb.buf, "%*u %llu", &pages) == 1)
			rss = pages * (uint64_t)sysconf(_SC_PAGESIZE);
	}
	strbuf_release(&sb);
	return rss;
}

/* "KEY: NAME", with " (auto: WHY)" when auto chose it for a reason */
static void add_mech(struct strbuf *o, const char *key, const char *name, const char *why)
{
	strbuf_addf(o, "%s: %s", key, name);
	if (why)
		strbuf_addf(o, " (auto: %s)", why);
}

void tally_daemon_status(struct tally_daemon *d, struct strbuf *o)
{
	double up = tally_now_mono() - d->mono_start;
	bool paused = d->col && tally_collector_paused(d->col);
	char a[32], b[32], c[32];
	strbuf_addf(o, "state: %s\n", paused ? "stopped" : "running");
	strbuf_addf(o, "pid: %d\n", (int)getpid());
	strbuf_addf(o, "database: %s\n", d->db);
	strbuf_addf(o, "socket: %s\n", d->sock);
	strbuf_addf(o, "uptime: %.1f s\n", up);
	strbuf_addf(o, "events: %s\n", d->smp->evnames.buf);
	if (d->smp->period)
		strbuf_addf(o, "sampling: period %" PRIu64 "%s\n", d->smp->period,
			    d->smp->randomize ? ", randomized" : "");
	else
		strbuf_addf(o, "sampling: frequency %" PRIu64 " Hz%s\n", d->smp->freq,
			    d->smp->randomize ? ", randomized" : "");
	if (d->col) {
		add_mech(o, "sample-mechanism",
			 tally_sample_mech_name(tally_collector_sample_mech(d->col)),
			 tally_collector_sample_mech_why(d->col));
		strbuf_addch(o, '\n');
		uint64_t rounds, looks, asked;
		tally_collector_rounds(d->col, &rounds, &looks, &asked);
		if (tally_collector_sample_mech(d->col) == TALLY_SAMPLE_BPF) {
			strbuf_addf(
				o,
				"rounds: %" PRIu64 " (%" PRIu64
				" asked for: a program, file or JIT code new to the daemon, or a burst of starts), and %" PRIu64
				" look%s that left the records for a later one\n",
				rounds, asked, looks, looks == 1 ? "" : "s");
			uint64_t told, bursts;
			const char *why;
			if (tally_collector_watch(d->col, &told, &bursts, &why))
				strbuf_addf(
					o,
					"exec-watch: on (%" PRIu64
					" start%s told of: programs new to the daemon or making JIT code; %" PRIu64
					" burst%s of starts)\n",
					told, told == 1 ? "" : "s", bursts, bursts == 1 ? "" : "s");
			else
				strbuf_addf(
					o,
					"exec-watch: off (%s; side-band records looked at every 200 ms)\n",
					why ? why : "not loaded");
		}
	}
	strbuf_addf(o, "call-graph: %s\n",
		    d->smp->stack_user  ? "dwarf"
		    : d->smp->callchain ? "fp"
					: "none");
	strbuf_addf(o, "per-pid: %s\n", d->smp->per_pid ? "yes" : "no");
	struct tally_offcpu_stats os;
	if (d->col && tally_collector_offcpu_stats(d->col, &os)) {
		/* how, and what the BPF program could not keep (docs/offcpu.md) */
		const char *why = NULL, *mech = tally_collector_offcpu_mech(d->col, &why);
		bool bpf = mech && !strcmp(mech, "bpf");
		add_mech(o, "off-cpu", mech ? mech : "?", why);
		strbuf_addf(o,
			    ", %" PRIu64 " waits blocked, %" PRIu64 " preempted, %" PRIu64
			    " dropped",
			    os.waits[0], os.waits[1], os.dropped);
		if (bpf)
			strbuf_addf(o, ", %" PRIu64 " lost", os.lost);
		if (bpf && d->smp->callchain)
			strbuf_addf(o,
				    ", %" PRIu64 " without their stack, %" PRIu64
				    " stack map turnovers",
				    os.nostack, os.turnovers);
		strbuf_addch(o, '\n');
	}
	for (int cpu = 0; cpu < d->smp->ncpus; cpu++) {
		struct tally_cpu_state st;
		dmn_cpu_state(d, cpu, &st);
		if (!st.opened) {
			strbuf_addf(o, "cpu %d: not sampled\n", cpu);
			continue;
		}
		strbuf_addf(o, "cpu %d: %s, ", cpu,
			    st.sampling ? "on"
			    : st.on     ? "on (collection stopped)"
					: "off");
		if (st.freq)
			strbuf_addf(o, "%" PRIu64 " Hz\n", st.freq);
		else
			strbuf_addf(o, "period %" PRIu64 "\n", st.period);
	}
	uint64_t inmem = dmn_agg_samples(d);
	strbuf_addf(o, "samples: %" PRIu64 "\n", d->samples_total + inmem);
	strbuf_addf(o, "lost: %" PRIu64 "\n", d->lost_total + d->agg->lost);
	strbuf_addf(o, "in-memory: %" PRIu64 " sample%s not yet flushed\n", inmem,
		    inmem == 1 ? "" : "s");
	if (d->cleared || d->dropped)
		strbuf_addf(o,
			    "discarded: %" PRIu64 " sample%s cleared, %" PRIu64
			    " dropped while writing was stopped\n",
			    d->cleared, d->cleared == 1 ? "" : "s", d->dropped);
	tally_format_size(dmn_memory_used(d), a, sizeof(a));
	tally_format_size(tally_agg_memory(d->agg), b, sizeof(b));
	tally_format_size(d->max_memory, c, sizeof(c));
	strbuf_addf(o, "memory: %s in use (aggregate %s), limit %s", a, b, c);
	tally_format_size(rss_bytes(), a, sizeof(a));
	strbuf_addf(o, "; resident %s\n", a);
	tally_format_size(d->db_bytes, a, sizeof(a));
	strbuf_addf(o, "db-size: %s", a);
	if (d->max_db_size) {
		tally_format_size(d->max_db_size, b, sizeof(b));
		strbuf_addf(o, ", limit %s", b);
	}
	struct statvfs vs;
	if (statvfs(d->db, &vs) == 0) {
		tally_format_size((uint64_t)vs.f_bavail * (uint64_t)vs.f_frsize, b, sizeof(b));
		strbuf_addf(o, ", %s free", b);
	}
	strbuf_addch(o, '\n');
	tally_format_utc(d->epoch_start, a, sizeof(a));
	struct tally_epoch *ep;
	size_t nep = 0;
	if (tally_epochs_list(d->db, &ep, &nep) == 0)
		tally_epochs_free(ep, nep);
	strbuf_addf(o, "epoch: %s (began %s; %zu on disk)\n", d->epoch, a, nep);
	char dur[48];
	strbuf_addf(o, "flush: every %s; %" PRIu64 " flush%s (%" PRIu64 " early for memory)",
		    tally_format_duration(d->flush_interval, dur, sizeof(dur)), d->flushes,
		    d->flushes == 1 ? "" : "es", d->early_flushes);
	if (d->flushes) {
		tally_format_utc(d->last_flush_wall, a, sizeof(a));
		strbuf_addf(o, ", last %s taking %.0f ms", a, d->last_flush_ms);
	}
	strbuf_addf(o, ", next in %.1f s\n",
		    d->next_flush - tally_now_mono() > 0 ? d->next_flush - tally_now_mono() : 0.0);
	if (d->epoch_every > 0)
		strbuf_addf(o, "epoch-every: %s\n",
			    tally_format_duration(d->epoch_every, dur, sizeof(dur)));
	if (d->keep > 0)
		strbuf_addf(o, "keep: %s (the newest %d epochs always)\n",
			    tally_format_duration(d->keep, dur, sizeof(dur)),
			    TALLY_DAEMON_KEEP_NEWEST);
	strbuf_addf(o, "writing: %s%s\n", d->write_error ? "stopped: " : "ok",
		    d->write_error ? d->write_error : "");
	strbuf_addf(o, "drains: %" PRIu64 "\n", d->drains);
	tally_pusher_status(d->pusher, o);
	strbuf_addf(o,
		    "control: %d of %d connections; %" PRIu64 " served, %" PRIu64
		    " evicted, %" PRIu64 " busy, %" PRIu64 " refused (not the owner), %" PRIu64
		    " timed out\n",
		    tally_daemon_clients(d), TALLY_DAEMON_MAX_CLIENTS, d->ctl_served,
		    d->ctl_evicted, d->ctl_busy, d->ctl_refused, d->ctl_dropped);
}

static int do_cpus(struct tally_daemon *d, const struct tally_ctl_req *q, struct strbuf *out)
{
	if (!d->col)
		return tally_seterr(-ENOTSUP,
				    "this daemon has no collector of its own: its caller samples");
	uint64_t maxrate = tally_max_sample_rate();
	uint64_t eff = q->freq                                   ? q->freq
		       : q->period && d->smp->evs[0]->time_based ? 1000000000ULL / q->period
								 : 0;
	if (maxrate && eff > maxrate)
		return tally_seterr(
			-EINVAL,
			"%s (%" PRIu64
			" samples per second is above kernel.perf_event_max_sample_rate %" PRIu64
			")",
			TALLY_CTL_CPUS_USAGE, eff, maxrate);
	for (int c = 0; c < q->ncpus; c++)
		if (q->cpus[c] && (c >= d->smp->ncpus || !d->smp->cpus[c])) {
			struct strbuf have = STRBUF_INIT;
			tally_cpus_string(d->smp->cpus, d->smp->ncpus, &have);
			int r = tally_seterr(
				-EINVAL, "%s (CPU %d is not sampled by this daemon: it samples %s)",
				TALLY_CTL_CPUS_USAGE, c, have.buf);
			strbuf_release(&have);
			return r;
		}
	for (int c = 0; c < q->ncpus; c++) {
		if (!q->cpus[c] || !(q->freq || q->period))
			continue;
		if (tally_collector_cpu_rate(d->col, c, q->freq, q->period))
			return tally_seterr(-EINVAL, "%s (%s)", TALLY_CTL_CPUS_USAGE,
					    tally_errmsg());
	}
	for (int c = 0; c < q->ncpus; c++) {
		if (!q->cpus[c])
			continue;
		if (tally_collector_cpu_set(d->col, c, q->on))
			return -EIO;
		struct tally_cpu_state st;
		dmn_cpu_state(d, c, &st);
		strbuf_addf(out, "cpu %d: %s, ", c, st.on ? "on" : "off");
		if (st.freq)
			strbuf_addf(out, "%" PRIu64 " Hz\n", st.freq);
		else
			strbuf_addf(out, "period %" PRIu64 "\n", st.period);
	}
	return 0;
}

static const char *op_name(enum tally_ctl_op op)
{
	static const char *const names[] = { "start", "stop",   "clear", "startclr", "flush",
					     "epoch", "status", "cpus",  "drain",    "peek" };
	return (size_t)op < ARRAY_SIZE(names) ? names[op] : "?";
}

static int pause_collector(struct tally_daemon *d, bool paused)
{
	if (!d->col)
		return tally_seterr(-ENOTSUP,
				    "this daemon has no collector of its own: its caller samples");
	return tally_collector_pause(d->col, paused);
}

/* peek: what is in memory now (since the last flush or clear), as a bundle,
 * for tally top --db; the aggregate is read, never emptied. Its session says
 * since when (memory-since, seconds with their fraction) so that a reader
 * that peeks again knows when the daemon began again from nothing. */
static int peek(struct tally_daemon *d, struct strbuf *out)
{
	dmn_sync(d);
	double now = tally_now_wall();
	struct tally_meta s;
	dmn_session(d, d->agg, &s, now);
	tally_meta_set(&s, "memory-since", "%.6f", d->delta_start);
	tally_meta_set(&s, "target", "system (in the memory of tally daemon pid %d)",
		       (int)getpid());
	struct tally_db db;
	int r = tally_db_from_agg_live(&db, d->agg, &s, &d->kc);
	tally_meta_release(&s);
	if (r)
		return r;
	r = tally_db_bundle(&db, out);
	tally_db_release(&db);
	if (!r && out->len > TALLY_CTL_MAX_REPLY)
		r = tally_seterr(
			-EMSGSIZE,
			"cannot peek: the samples in memory take %zu bytes, more than a reply may hold (flush them: 'tally ctl flush')",
			out->len);
	return r;
}

/* Runs one request; the reply goes to out. */
void tally_daemon_control(struct tally_daemon *d, const char *line, uid_t uid, struct strbuf *out)
{
	struct tally_ctl_req q;
	struct strbuf body = STRBUF_INIT;
	int r = tally_ctl_parse_line(line, d->smp->ncpus, &q);
	if (r) {
		tally_ctl_frame(out, false, tally_errmsg(), strlen(tally_errmsg()));
		dmn_log(d, "ctl (uid %d): refused '%.60s': %s", (int)uid, line, tally_errmsg());
		return;
	}
	switch (q.op) {
	case TALLY_CTL_START:
		r = pause_collector(d, false);
		if (!r)
			strbuf_addstr(&body, "collection on\n");
		break;
	case TALLY_CTL_STOP:
		r = pause_collector(d, true);
		if (!r)
			strbuf_addstr(
				&body,
				"collection off (what is in memory stays: 'tally ctl flush' writes it)\n");
		break;
	case TALLY_CTL_CLEAR:
	case TALLY_CTL_STARTCLR: {
		/* everything sampled until now goes, what the rings and the
		 * BPF tables still hold too (else it came back at the next round) */
		dmn_sync(d);
		uint64_t n = dmn_agg_samples(d);
		d->samples_total += n;
		d->lost_total += d->agg->lost;
		d->cleared += n;
		tally_agg_reset(d->agg);
		d->delta_start = tally_now_wall();
		strbuf_addf(&body, "cleared %" PRIu64 " sample%s from memory\n", n,
			    n == 1 ? "" : "s");
		if (q.op == TALLY_CTL_STARTCLR) {
			r = pause_collector(d, false);
			if (!r)
				strbuf_addstr(&body, "collection on\n");
		}
		break;
	}
	case TALLY_CTL_FLUSH:
		r = tally_daemon_flush(d, "ctl", &body);
		if (!r)
			strbuf_addch(&body, '\n');
		break;
	case TALLY_CTL_EPOCH:
		r = tally_daemon_new_epoch(d, &body);
		if (!r)
			strbuf_addch(&body, '\n');
		break;
	case TALLY_CTL_STATUS:
		dmn_sync(d); /* the samples counted until now (bpf: a round may be 4 s) */
		tally_daemon_status(d, &body);
		break;
	case TALLY_CTL_CPUS:
		r = do_cpus(d, &q, &body);
		break;
	case TALLY_CTL_DRAIN:
		r = tally_daemon_drain(d, &body);
		break;
	case TALLY_CTL_PEEK:
		r = peek(d, &body);
		break;
	}
	if (r) {
		const char *m = tally_errmsg();
		tally_ctl_frame(out, false, m, strlen(m));
		dmn_log(d, "ctl (uid %d): %s failed: %s", (int)uid, op_name(q.op), m);
	} else {
		tally_ctl_frame(out, true, body.buf ? body.buf : "", body.len);
		/* asked every second by tally top */
		if (d->verbose || (q.op != TALLY_CTL_STATUS && q.op != TALLY_CTL_PEEK))
			dmn_log(d, "ctl (uid %d): %s", (int)uid, op_name(q.op));
	}
	strbuf_release(&body);
	tally_ctl_req_release(&q);
}

/* ---- connections ---- */

static void listen_resume(struct tally_daemon *d)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &d->listenfd };
	if (d->listen_paused && epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->listenfd, &ev) == 0)
		d->listen_paused = false;
}

/* Connections are waiting and no slot can take one before `until`: leave
 * them in the kernel's backlog (first come, first served) and stop watching
 * the socket until then, so that the loop does not spin. */
static void listen_pause(struct tally_daemon *d, double until)
{
	struct epoll_event ev = { .events = 0, .data.ptr = &d->listenfd };
	if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->listenfd, &ev) == 0) {
		d->listen_paused = true;
		d->listen_resume = until;
	}
}

int dmn_ctl_due_ms(const struct tally_daemon *d)
{
	if (!d->listen_paused)
		return -1;
	double left = d->listen_resume - tally_now_mono();
	return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

static void client_close(struct tally_daemon *d, struct client *c)
{
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	strbuf_release(&c->in);
	strbuf_release(&c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	listen_resume(d); /* a slot is free */
}

/* A short answer to a connection that gets no slot (refused, busy, evicted),
 * then closed. What it sent is read first, so that the close does not reset
 * the connection before it reads the answer. Never waits. */
static void answer_and_close(int fd, const char *msg)
{
	struct strbuf f = STRBUF_INIT;
	tally_ctl_frame(&f, false, msg, strlen(msg));
	char buf[4096];
	for (int i = 0; i < 16 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; i++)
		;
	if (send(fd, f.buf, f.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* it will see the connection closed */
	}
	strbuf_release(&f);
	close(fd);
}

static void client_write(struct tally_daemon *d, struct client *c)
{
	while (c->out_off < c->out.len) {
		ssize_t n = send(c->fd, c->out.buf + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* a slow reader: the rest when it has room, within its deadline */
		if (n <= 0) {
			client_close(d, c);
			return;
		}
		c->out_off += (size_t)n;
		c->deadline = tally_now_mono() + d->ctl_timeout;
	}
	client_close(d, c);
}

/* The reply is in c->out (msg, when given, is framed as one): written now as
 * far as the socket takes it, the rest as the client reads. */
static void client_reply(struct tally_daemon *d, struct client *c, bool ok, const char *msg)
{
	if (msg)
		tally_ctl_frame(&c->out, ok, msg, strlen(msg));
	c->replying = true;
	c->out_off = 0;
	c->deadline = tally_now_mono() + d->ctl_timeout;
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
	epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	client_write(d, c);
}

static void too_long(struct tally_daemon *d, struct client *c)
{
	char m[128];
	snprintf(m, sizeof(m), "request longer than %d bytes: %s", TALLY_CTL_MAX_REQUEST,
		 TALLY_CTL_USAGE);
	dmn_log(d, "ctl (uid %d): refused a request of over %d bytes", (int)c->uid,
		TALLY_CTL_MAX_REQUEST);
	client_reply(d, c, false, m);
}

/* Reads what the client sent; runs its request once it is complete. */
static void client_read(struct tally_daemon *d, struct client *c)
{
	for (;;) {
		char buf[1024];
		ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			client_close(d, c);
			return;
		}
		if (n == 0) {
			/* the peer is done sending: what it sent is the request, if anything */
			if (!c->in.len) {
				client_close(d, c);
				return;
			}
			break;
		}
		strbuf_add(&c->in, buf, (size_t)n);
		if (memchr(c->in.buf, '\n', c->in.len))
			break;
		if (c->in.len >= TALLY_CTL_MAX_REQUEST) {
			too_long(d, c);
			return;
		}
	}
	char *nl = memchr(c->in.buf, '\n', c->in.len);
	size_t len = nl ? (size_t)(nl - c->in.buf) : c->in.len;
	if (len >= TALLY_CTL_MAX_REQUEST) {
		too_long(d, c);
		return;
	}
	if (memchr(c->in.buf, '\0', len)) {
		/* NUL bytes: garbage, whatever follows them */
		client_reply(d, c, false, TALLY_CTL_USAGE);
		return;
	}
	if (len && c->in.buf[len - 1] == '\r')
		len--;
	char *line = xstrndup(c->in.buf, len);
	tally_daemon_control(d, line, c->uid, &c->out);
	free(line);
	d->ctl_served++;
	client_reply(d, c, true, NULL);
}

static void refuse(struct tally_daemon *d, int fd, uid_t uid)
{
	char m[128];
	snprintf(m, sizeof(m), "permission denied: this daemon belongs to uid %d", (int)geteuid());
	answer_and_close(fd, m);
	d->ctl_refused++;
	/* a crowd of refused peers must not fill the log: one line a second */
	double now = tally_now_mono();
	if (now - d->refused_logged >= 1.0) {
		if (d->refused_quiet)
			dmn_log(d,
				"ctl: refused a connection from uid %d (not the owner; %" PRIu64
				" more refused since the last line)",
				(int)uid, d->refused_quiet);
		else
			dmn_log(d, "ctl: refused a connection from uid %d (not the owner)",
				(int)uid);
		d->refused_logged = now;
		d->refused_quiet = 0;
	} else {
		d->refused_quiet++;
	}
}

static const char busy_msg[] = "busy: too many control connections at once (try again)";

/* A free slot, or the connection to evict for a new one: the oldest still
 * short of its request and past its grace. NULL when there is none; then
 * *until (may be NULL) is when one will be. */
static struct client *room(struct tally_daemon *d, double now, double *until)
{
	struct client *victim = NULL;
	double soonest = now + d->ctl_timeout;
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++) {
		struct client *k = &d->clients[i];
		if (k->fd < 0)
			return k;
		if (k->replying)
			continue;
		if (now - k->since < TALLY_DAEMON_CTL_GRACE) {
			if (k->since + TALLY_DAEMON_CTL_GRACE < soonest)
				soonest = k->since + TALLY_DAEMON_CTL_GRACE;
		} else if (!victim || k->serial < victim->serial) {
			victim = k;
		}
	}
	if (!victim && until)
		*until = soonest;
	return victim;
}

int tally_daemon_add_client(struct tally_daemon *d, int fd, uid_t uid)
{
	if (uid != geteuid() && uid != 0) {
		/* the socket's mode keeps others out; this is the second lock. A refused
		 * peer never takes a slot: it gets its answer now, and is closed */
		refuse(d, fd, uid);
		return -EPERM;
	}
	double now = tally_now_mono();
	struct client *c = room(d, now, NULL);
	if (!c) {
		/* every slot is new or answering a request */
		answer_and_close(fd, busy_msg);
		d->ctl_busy++;
		return -EBUSY;
	}
	if (c->fd >= 0) {
		/* full: the connection that has waited longest for its request to be
		 * complete makes room (stallers cannot hold the slots) */
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		answer_and_close(c->fd, busy_msg);
		strbuf_release(&c->in);
		strbuf_release(&c->out);
		d->ctl_evicted++;
	}
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->uid = uid;
	c->since = now;
	c->deadline = now + d->ctl_timeout;
	c->serial = ++d->serial;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;
		close(fd);
		c->fd = -1;
		return tally_seterr(-e, "cannot watch a control connection: %s", strerror(e));
	}
	/* its request is most likely there already: served at once */
	client_read(d, c);
	return 0;
}

int tally_daemon_clients(const struct tally_daemon *d)
{
	int n = 0;
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++)
		n += d->clients[i].fd >= 0;
	return n;
}

static void accept_clients(struct tally_daemon *d)
{
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++) {
		double until;
		if (!room(d, tally_now_mono(), &until)) {
			listen_pause(d, until);
			return;
		}
		int fd = accept4(d->listenfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0)
			cr.uid = (uid_t)-1;
		tally_daemon_add_client(d, fd, cr.uid);
	}
}

void tally_daemon_serve(struct tally_daemon *d)
{
	if (d->listen_paused && tally_now_mono() >= d->listen_resume)
		listen_resume(d);
	struct epoll_event evs[TALLY_DAEMON_MAX_CLIENTS + 2];
	int n = epoll_wait(d->epfd, evs, (int)ARRAY_SIZE(evs), 0);
	bool listen_ready = false;
	for (int i = 0; i < n; i++) {
		void *p = evs[i].data.ptr;
		if (p == &d->listenfd) {
			listen_ready = true;
		} else if (p == &d->wake[0]) {
			char buf[64];
			while (read(d->wake[0], buf, sizeof(buf)) > 0)
				;
		} else {
			struct client *c = p;
			if (c->fd < 0)
				continue;
			if (c->replying)
				client_write(d, c);
			else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				client_read(d, c);
		}
	}
	/* new connections after the requests that are there: none is evicted
	 * while its complete request waits to be read */
	if (listen_ready)
		accept_clients(d);
	/* a client that hangs is dropped: the daemon never waits on one */
	double now = tally_now_mono();
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++) {
		struct client *c = &d->clients[i];
		if (c->fd >= 0 && now > c->deadline) {
			dmn_log(d, "ctl (uid %d): dropped a connection %s within %.3g s",
				(int)c->uid,
				c->replying ? "that took no part of its reply"
					    : "that did not complete its request",
				d->ctl_timeout);
			d->ctl_dropped++;
			client_close(d, c);
		}
	}
}

void dmn_close_clients(struct tally_daemon *d)
{
	for (int i = 0; i < TALLY_DAEMON_MAX_CLIENTS; i++)
		if (d->clients[i].fd >= 0)
			client_close(d, &d->clients[i]);
}

/* ---- the socket ---- */

int dmn_listen(struct tally_daemon *d)
{
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(d->sock) >= sizeof(sa.sun_path))
		return tally_seterr(
			-ENAMETOOLONG,
			"socket path '%s' is longer than %zu bytes (use a shorter --socket or --db)",
			d->sock, sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, d->sock, strlen(d->sock));
	struct stat st;
	if (lstat(d->sock, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return tally_seterr(
				-EEXIST,
				"'%s' exists and is not a socket (remove it, or choose another --socket)",
				d->sock);
		/* a socket someone answers on belongs to another daemon; a dead one is ours to
		 * replace */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			return tally_seterr(
				-EADDRINUSE,
				"'%s' is the socket of another running daemon (choose another --socket)",
				d->sock);
		}
		if (probe >= 0)
			close(probe);
		unlink(d->sock);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return tally_seterr(-errno, "cannot create a socket: %s", strerror(errno));
	mode_t old = umask(0077);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(d->sock, 0600) < 0 || listen(fd, TALLY_DAEMON_MAX_CLIENTS) < 0) {
		int e = errno;
		close(fd);
		return tally_seterr(-e, "cannot listen on '%s': %s", d->sock, strerror(e));
	}
	d->listenfd = fd;
	return 0;
}
