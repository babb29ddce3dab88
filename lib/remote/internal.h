/* What lib/remote's files share and nothing else uses. */
#ifndef TALLY_REMOTE_INTERNAL_H
#define TALLY_REMOTE_INTERNAL_H

#include "tally/remote.h"
#include "tally/util.h"

/* The last line of what a host's command said on stderr, escaped and cut to
 * LAST_LINE_MAX bytes, for an error. */
#define LAST_LINE_MAX 1000
#define LAST_LINE_SIZE (LAST_LINE_MAX * 4 + 4)
void rmt_last_line(const struct strbuf *err, char q[LAST_LINE_SIZE]);
/* A name a host gave (a file, a member), escaped and cut, for an error. */
#define QNAME_MAX 300
#define QNAME_SIZE (QNAME_MAX * 4 + 4)
const char *rmt_qname(char out[QNAME_SIZE], const char *s);
/* The error of a remote command that failed: ssh's (255) says the host
 * cannot be reached, any other exit what was being done. */
int rmt_run_failed(const struct tally_remote *r, const char *doing, int status,
		   const struct strbuf *err);
/* The root on the host (--remote-root, or the default). */
const char *rmt_root_of(const struct tally_remote *r);
/* The error of a root the check refused (exit 3), with the check's words. */
int rmt_root_refused(const struct tally_remote *r, const struct strbuf *err);

/* what a pull may bring back in all: results, never a disk's worth */
#define PULL_MAX ((size_t)4 << 30)

/* The check of the private directory, for the probe's and the install's
 * scripts: $1 ROOT, $2 ROOT/VERSION. Nothing under ROOT runs, and nothing
 * there is trusted, before every component of the path is seen (find -printf
 * reads each without following it): none a symbolic link; ROOT, ROOT/VERSION
 * and what the install put there owned by the ssh user and writable by no one
 * else; every directory above ROOT owned by the user or by root, and writable
 * by no one else unless sticky (/tmp: others cannot rename or remove what is
 * the user's there). A component that does not exist yet is nothing to trust.
 * A failure: one line "'PATH' WHY" on stderr and exit 3. */
#define ROOT_CHECK_SH                                                                                            \
	"bad() { printf \"'%s' %s\\n\" \"$1\" \"$2\" >&2; exit 3; }; "                                           \
	"c() { [ -e \"$1\" ] || [ -L \"$1\" ] || return 0; "                                                     \
	"s=$(find \"$1\" -maxdepth 0 -printf '%y %U %m') && [ -n \"$s\" ] || bad \"$1\" 'cannot be examined'; "  \
	"set -- \"$1\" \"$2\" $s; "                                                                              \
	"[ \"$3\" != l ] || bad \"$1\" 'is a symbolic link'; "                                                   \
	"[ \"$4\" = \"$u\" ] || { [ \"$2\" = 0 ] && [ \"$4\" = 0 ]; } || bad \"$1\" 'belongs to another user'; " \
	"[ $((0$5 & 022)) = 0 ] || { [ \"$2\" = 0 ] && [ $((0$5 & 01000)) != 0 ]; } || "                         \
	"bad \"$1\" 'is writable by other users (group or others may write there)'; }; "                         \
	"chk() { u=$(id -u) || exit 3; case $1 in /*) ;; *) bad \"$1\" 'is not an absolute path'; esac; "        \
	"p=$1; while [ \"$p\" != / ] && [ \"$p\" != . ]; do p=$(dirname -- \"$p\"); c \"$p\" 0; done; "          \
	"for f in \"$1\" \"$2\" \"$2/tally\" \"$2/tally.bin\" \"$2/lib\"; do c \"$f\" 1; done; }; "

#endif
