#!/usr/bin/env python3
"""libtally never prints or exits: no object of the archive may refer to
stdout or stderr, to a function that prints on them (printf, puts, perror,
err, warn, error, syslog, ...), to one that ends the process (exit, _exit,
quick_exit), or to tally's printers (builtin/print.c: tally_warn,
tally_error, tally_die, tally_info).  The core returns codes, sets its
error message (tally_seterr) and hands warnings back (struct
tally_warnings); only builtin/ prints.  The exceptions, each in one object:
abort() in lib/util/util.c, where allocation fails with no out-of-memory
handler set (tally.c sets one), the assertions protoc-c generates in
profile.pb-c.c and otlp.pb-c.c, and _exit() in lib/record/record.c, in the child it forks to
run the recorded command when its exec fails (never in the caller), and
_exit() in lib/job/proc.c, likewise in the child it forks for a test or a
profiler's command, _exit() in lib/remote/remote.c, likewise in the child it
forks for ssh, _exit() in lib/job/agent.c, where the agent it detaches
on a remote host ends (never the caller, which returns), and _exit() in
lib/cache/fill.c, in the detached process that finishes filling the
build-id cache after tally record (never the caller).

    core-silent.py LIBTALLY.a
"""
import re
import shutil
import subprocess
import sys

FORBIDDEN = {
    "stdout", "stderr", "printf", "vprintf", "puts", "putchar", "putchar_unlocked", "perror",
    "__printf_chk", "__vprintf_chk", "exit", "_exit", "_Exit", "quick_exit", "abort",
    "__assert_fail", "err", "errx", "verr", "verrx", "warn", "warnx", "vwarn", "vwarnx",
    "error", "error_at_line", "syslog", "vsyslog", "psignal", "psiginfo",
    "tally_warn", "tally_error", "tally_die", "tally_info", "tally_verbose", "tally_print_warnings",
}
ALLOWED = {
    ("abort", "lib_util_util.c.o"),
    ("__assert_fail", "profile.pb-c.c.o"),
    ("__assert_fail", "otlp.pb-c.c.o"),
    ("_exit", "lib_record_record.c.o"),
    ("_exit", "lib_job_proc.c.o"),
    ("_exit", "lib_remote_remote.c.o"),
    ("_exit", "lib_job_agent.c.o"),
    ("_exit", "lib_cache_fill.c.o"),
}


def main():
    lib = sys.argv[1]
    nm = shutil.which("nm")
    if not nm:
        print("SKIP: no nm (binutils; scripts/deps.sh --test installs it)")
        sys.exit(77)
    out = subprocess.run([nm, "-A", "-u", lib], check=True, capture_output=True, text=True).stdout
    bad = []
    for line in out.splitlines():
        # "lib.a:member.o:                 U name"
        m = re.match(r"^(.*?):([^:]+):\s+U\s+(\S+)$", line)
        if not m:
            continue
        member, sym = m.group(2), m.group(3).split("@")[0]
        if sym in FORBIDDEN and not any(sym == s and member.endswith(o) for s, o in ALLOWED):
            bad.append("%s uses %s" % (member, sym))
    if bad:
        print("libtally prints or exits (the core must return codes and hand warnings back):")
        for b in sorted(set(bad)):
            print("  " + b)
        sys.exit(1)
    print("ok: no object of %s prints or exits" % lib)


if __name__ == "__main__":
    main()
