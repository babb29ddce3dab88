/* Remote hosts over OpenSSH (docs/remote.md): every connection and transfer is
 * one run of the ssh command line (`ssh`, or TALLY_SSH as the user's shell
 * reads it, as git's GIT_SSH_COMMAND), with the remote command built so that
 * nothing a host name, a path or an argument holds is ever interpreted by a
 * remote shell: each word is single-quoted. Nothing listens on the network.
 *
 * The core never prints: results and reasons are in the structures and in
 * tally_errmsg(). */
#ifndef TALLY_REMOTE_H
#define TALLY_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/util.h"

/* The default root on a host, under the ssh user's home there (a "~/" that
 * begins a remote word is the remote shell's): a directory no other user can
 * make first. Its private directory of this version is ROOT/VERSION. */
#define TALLY_REMOTE_ROOT "~/.cache/tally-profilers"

struct tally_remote {
	const char *host;    /* as ssh takes it: NAME, user@NAME, an alias */
	const char *ssh;     /* the ssh command line: TALLY_SSH, else "ssh -o BatchMode=yes" */
	/* TALLY_REMOTE_ROOT unless set: absolute, or "~/..." (the user's home there) */
	const char *root;
	double timeout;      /* seconds a command may take (0: 60) */
	/* A private directory (0700) for ssh's connection sharing: set, every
	 * command after the first reuses one connection to the host (ssh -o
	 * ControlMaster=auto), with no new handshake; NULL: a connection each. */
	const char *mux_dir;
};

/* Whether host (as the user gives it: --host, a 'hosts' line) may name the
 * host's directories: its results (RESULTS/TAG/profiling/HOST/) and its
 * agent's. 1 to 200 bytes; no '/', blank or control character; not beginning
 * with '.' ('.', '..', hidden) or '-'; not all-hosts.db or all-hosts.txt (the
 * job's files beside them). 0, or -EINVAL with tally_seterr saying why. */
#define TALLY_HOST_NAME_MAX 200
int tally_remote_host_ok(const char *host);
/* Every one of the n hosts of a job so (tally_remote_host_ok), and none named
 * twice: two agents of one job would share a directory. 0 or -EINVAL. */
int tally_remote_hosts_check(char *const *hosts, size_t n);

/* s as one word of a POSIX shell command line: 'like this', with each ' as '\''. */
void tally_sh_quote(struct strbuf *out, const char *s);

/* The local argv that runs the remote command words on r->host (NULL-terminated,
 * the caller frees it with tally_remote_argv_free): /bin/sh -c 'SSH "$@"' with
 * the arguments "--", the host and the quoted command. A word that begins
 * with "~/" keeps that tilde unquoted: the ssh user's home on the host. */
char **tally_remote_argv(const struct tally_remote *r, char *const words[]);
void tally_remote_argv_free(char **argv);
/* Ends the shared connection to the host, if any (ssh -O exit). */
void tally_remote_mux_close(const struct tally_remote *r);

/* Runs words on the host: stdin from in (len bytes; NULL: nothing), stdout into
 * out (at most max bytes; NULL: discarded), stderr kept for errors. *status is
 * the remote command's exit status (ssh's 255: the host could not be reached).
 * 0 when it ran (whatever its status), or -errno with tally_seterr (cannot
 * start ssh; -ETIMEDOUT after r->timeout, the command killed). err (may be
 * NULL) gets ssh's and the command's stderr. */
int tally_remote_run(const struct tally_remote *r, char *const words[], const void *in, size_t len,
		     struct strbuf *out, size_t max, struct strbuf *err, int *status);

/* What a host says about itself and tally on it (tally_remote_probe). */
struct tally_remote_facts {
	char *arch;        /* uname -m */
	char *boot_id;     /* /proc/sys/kernel/random/boot_id */
	char *tally;       /* the installed tally's --version line, NULL when none */
	double clock_offset; /* the host's wall clock minus ours, seconds (midpoint estimate) */
	double rtt;        /* seconds the probe took */
};
void tally_remote_facts_release(struct tally_remote_facts *f);

/* One ssh round trip: architecture, boot id, clock, and the tally under the
 * host's private directory, if any. The root is checked first, every
 * component of it (none a link; the root and what is under it the user's and
 * writable by no one else; the directories above it the user's or root's, and
 * writable by others only when sticky): nothing under it runs before. 0, or
 * -errno with tally_seterr naming the host and why (unreachable: ssh's own
 * message; -EPERM: the root is not private, naming the component). */
int tally_remote_probe(const struct tally_remote *r, struct tally_remote_facts *f);

/* The probe's answer (out: what the host printed, changed in place) into *f:
 * four or five lines, "end" last: an architecture (a word of at most 64
 * letters, digits, '_', '-'), a boot id (a UUID, or '-' where the host has
 * none), its clock (seconds since 1970, finite), the installed tally's version
 * line when there is one (printable, at most 200 bytes), "end". t0 is our wall
 * clock when the probe was sent, rtt what it took. 0, or -EPROTO with
 * tally_seterr naming the host and quoting the answer. */
int tally_remote_parse_probe(char *out, const char *host, double t0, double rtt,
			     struct tally_remote_facts *f);

/* The host's clock against ours, timed on a session already open: the host
 * says it is there, then reads its clock when told to, and the offset is its
 * clock minus the midpoint of that exchange (the shortest of three), whose
 * time is *rtt. With a shared connection (mux_dir), no handshake is in it.
 * 0, or -errno with tally_seterr naming the host. */
int tally_remote_clock(const struct tally_remote *r, double *offset, double *rtt);

/* The private directory of this version on the host: ROOT/VERSION. */
char *tally_remote_dir(const struct tally_remote *r);

/* Installs this tally (the running executable and the shared libraries it
 * loaded, with their loader, so a host without them runs it) under the host's
 * private directory unless a working one of the same version is there;
 * *installed says whether it copied. The directory and ROOT are the user's
 * own, mode 0700, never through a link (checked on the host as the probe
 * does, before and after what is missing is made). 0, or -errno
 * with tally_seterr naming the host and the reason (another architecture, a
 * ROOT that is not the user's, the installed copy does not run). */
int tally_remote_install(const struct tally_remote *r, bool *installed, size_t *bytes);

/* Sends the local directories dirs (plugins' directories: regular files, links
 * to them followed, and directories; at most 64 MiB in all) to the host, each
 * as rdir/NAME (names[i]), rdir made 0700. 0, or -errno with tally_seterr. */
int tally_remote_send_dirs(const struct tally_remote *r, char *const *dirs, char *const *names,
			   size_t n, const char *rdir);

/* Copies the host's directory rdir (absolute) into the local directory ldir
 * (made, mode 0700): regular files and directories only, every name checked
 * (no '..', no absolute path, no link, device or FIFO), sizes checked against
 * the host's own listing before anything is trusted. 0, or -errno with
 * tally_seterr naming the host and the member. files and bytes: what came. */
int tally_remote_pull(const struct tally_remote *r, const char *rdir, const char *ldir,
		      size_t *files, uint64_t *bytes);

/* The extraction of a tar stream (a pull) into ldir, with the checks above;
 * sizes (NULL: none) is the listing "SIZE NAME\n" each file must match: at
 * most TALLY_PULL_MAX_FILES lines, each name once, parsed once (a pull costs
 * n log n in its files, whatever a host sends). A member whose declared size
 * is not its listed one is refused before anything is written for it; a
 * member refused while it is written is removed. Exposed for the unit tests. */
#define TALLY_PULL_MAX_FILES 100000
int tally_remote_untar(const void *tar, size_t len, const char *ldir, const char *sizes,
		       const char *what, size_t *files, uint64_t *bytes);

#endif
