#!/usr/bin/env python3
"""mutate.py: whole-program mutation test of tally's readers (tests/e2e/t0910).

    mutate.py NAME DB FUNC SEED COUNT KNOWN_FILE

Copies the real database DB (recorded by the test) many times, damages each
copy in one way, and runs every reading command over it: report (plain,
--symbols, --lines, --children, --tree, --json), annotate FUNC --asm and every
export format.  The damage: truncations, flipped bytes, huge, negative and
out-of-range numbers, counts that wrap 2^64 and still add up, duplicated and
10 MB lines, NUL bytes, invalid UTF-8, names with `../`, emptied fields,
symlinks (to a file outside the database, to /dev/zero, to a directory,
dangling, a loop), FIFOs and directories in place of files, and damage aimed
at known weak spots.  The damage aimed at the lines of a binary stacks file
(format version 4) is done to it made text first (tests/e2e/stacks.py; tally
reads a text stacks file in any version); the binary file gets its own:
truncated, a wrong magic, header counts and sizes that disagree (and wrap
2^64), a frame number, image, pid or label set out of range, frames swapped,
a stack without frames, counts that wrap 2^64 and still add up.  COUNT random
mutants (seeded by SEED and NAME: the same plan every run) follow the aimed
ones; half as many under a sanitizer build.

Problems, by class:
  hang       over TALLY_MUTATE_TIMEOUT seconds of CPU (default 2, for commands
             that need well under 0.1 s; 4 times that under a sanitizer
             build), or asleep 1.5 s without using any CPU (blocked)
  memory     out of its 1.5 GB (address space, or ASan's RSS limit)
  crash      killed by a signal;  sanitizer: a sanitizer report
  silent     a failure with nothing on stderr
  secret     printed the content of a file outside the database that a
             symlink or `../` points at
  json-utf8  --json output that is not UTF-8;  output: output that does not parse
  totals     exit 0 with figures that do not add up: in report --json every
             event's images sum to the event's samples (and to the session's),
             functions to their image, every share within 0..100%; the text
             report's Total is the sum of its rows and the JSON total (its
             value, in msec or events, unless the report is in samples); every
             share printed is within 0..100%; --children's self samples add
             up to at most the total and inclusive ones stay within it;
             folded, svg and callgrind hold the report's weighted total
             (value), pprof's samples types its samples
After a hang or running out of memory the mutant's other commands are not run
(they would most likely do the same).

KNOWN_FILE lists failures seen before their fix landed, one a line:
`MUTATION FILE COMMAND PROBLEM` (shell patterns, `|` between alternatives;
COMMAND with `_` for spaces; `#` starts a comment).  A failure matching one
is printed as `known: ...` and does not fail the run; the entries that
matched are appended to the file TALLY_KNOWN_SEEN when it is set.  Prints one
line per failure and a summary; exits 1 on any unknown failure.
TALLY_KEEP_MUTANTS=DIR keeps the failing mutants there;
TALLY_MUTATE_PROFILE=1 prints where the CPU time went.
"""
import fnmatch
import gzip
import json
import os
import random
import re
import resource
import shutil
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stacks as stacksfile  # noqa: E402 (tests/e2e/stacks.py)

TALLY = os.environ["TALLY"]
SECRET = "TALLY-SECRET-4f1c9e"
BIG = 10 * 1024 * 1024
U64 = 1 << 64

HUGE = ["0", "-1", "-2", "-9223372036854775808", "9223372036854775807", "9223372036854775808",
        "18446744073709551615", "18446744073709551616", "4294967295", "4294967296", "2147483648",
        "99999999999999999999999999999999999999", "1e400", "-1e400", "nan", "inf", "0x10", "1.5",
        "+5", "007", "1" + "0" * 308 + "d"]
BAD_UTF8 = [b"\xff", b"\xfe\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82", b"\xf4\x90\x80\x80"]


def sanitized():
    try:
        out = subprocess.run(["ldd", TALLY], capture_output=True, text=True).stdout
    except OSError:
        return False
    return "libasan" in out or "libubsan" in out


SAN = sanitized()
# a small database needs tens of MB: a command over this limit has read what
# it should have refused (e.g. /dev/zero) or let a number choose its memory
MEM_MB = 1536
SLOW = float(os.environ.get("TALLY_MUTATE_SLOW", "1"))
CPU_LIMIT = float(os.environ.get("TALLY_MUTATE_TIMEOUT", "2")) * (4 if SAN else 1)
BLOCKED = 1.5
WALL_LIMIT = 12 * CPU_LIMIT


# ---------------------------------------------------------------- mutations

def rd(path):
    with open(path, "rb") as f:
        return f.read()


def wr(path, data):
    with open(path, "wb") as f:
        f.write(data)


def lines_of(data):
    return data.split(b"\n")


def data_lines(ls):
    """indexes of lines that are not comments, headers' blank line or empty"""
    return [i for i, l in enumerate(ls) if l and not l.startswith(b"#")]


class Mutant:
    def __init__(self, kind, file, what):
        self.kind, self.file, self.what = kind, file, what

    def __str__(self):
        return "%s %s (%s)" % (self.kind, self.file, self.what)


def m_truncate(db, f, rng):
    d = rd(os.path.join(db, f))
    k = rng.randrange(len(d)) if d else 0
    if rng.random() < 0.15:
        k = 0
    wr(os.path.join(db, f), d[:k])
    return "to %d of %d bytes" % (k, len(d))


def m_flip(db, f, rng):
    d = bytearray(rd(os.path.join(db, f)))
    if not d:
        return None
    flips = []
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(d))
        x = 1 << rng.randrange(8)
        d[i] ^= x
        flips.append("byte %d ^0x%02x" % (i, x))
    wr(os.path.join(db, f), bytes(d))
    return ", ".join(flips)


NUM = re.compile(rb"(?<![0-9A-Za-z])[0-9]+(?![0-9A-Za-z])")


def m_number(db, f, rng, values=HUGE):
    d = rd(os.path.join(db, f))
    ms = list(NUM.finditer(d))
    if not ms:
        return None
    m = rng.choice(ms)
    v = rng.choice(values).encode()
    wr(os.path.join(db, f), d[:m.start()] + v + d[m.end():])
    return "number %s at byte %d -> %s" % (m.group().decode(), m.start(), v.decode())


def m_negative(db, f, rng):
    d = rd(os.path.join(db, f))
    ms = list(NUM.finditer(d))
    if not ms:
        return None
    m = rng.choice(ms)
    wr(os.path.join(db, f), d[:m.start()] + b"-" + d[m.start():])
    return "number %s at byte %d made negative" % (m.group().decode(), m.start())


def m_dupline(db, f, rng):
    ls = lines_of(rd(os.path.join(db, f)))
    idx = data_lines(ls)
    if not idx:
        return None
    i = rng.choice(idx)
    n = rng.choice([1, 1, 2, 1000])
    ls[i + 1:i + 1] = [ls[i]] * n
    wr(os.path.join(db, f), b"\n".join(ls))
    return "line %d repeated %d more times" % (i + 1, n)


def m_swaplines(db, f, rng):
    ls = lines_of(rd(os.path.join(db, f)))
    idx = data_lines(ls)
    if len(idx) < 2:
        return None
    i, j = rng.sample(idx, 2)
    ls[i], ls[j] = ls[j], ls[i]
    wr(os.path.join(db, f), b"\n".join(ls))
    return "lines %d and %d swapped" % (i + 1, j + 1)


def m_bigline(db, f, rng):
    ls = lines_of(rd(os.path.join(db, f)))
    idx = data_lines(ls)
    if not idx:
        return None
    i = rng.choice(idx)
    l = ls[i]
    how = rng.choice(["field", "append", "fresh"])
    if how == "field":
        # repeat the line's last field (a frame of a stack, a name, a count)
        sep = b"\t" if b"\t" in l else b" "
        last = l.split(sep)[-1] or b"x"
        l = l + (sep + last) * (BIG // (len(last) + 1))
    elif how == "append":
        l = l + b"a" * BIG
    else:
        l = b"9" * BIG
    ls[i] = l
    wr(os.path.join(db, f), b"\n".join(ls))
    return "line %d made 10 MB (%s)" % (i + 1, how)


def m_nul(db, f, rng):
    d = rd(os.path.join(db, f))
    i = rng.randrange(len(d) + 1)
    repl = rng.random() < 0.5 and i < len(d)
    wr(os.path.join(db, f), d[:i] + b"\0" + d[i + (1 if repl else 0):])
    return "NUL %s byte %d" % ("over" if repl else "inserted at", i)


def m_utf8(db, f, rng):
    d = rd(os.path.join(db, f))
    # inside a word (a name, most often)
    ws = list(re.finditer(rb"[A-Za-z_][A-Za-z_0-9.]{2,}", d))
    b = rng.choice(BAD_UTF8)
    i = rng.choice(ws).start() + 1 if ws else rng.randrange(len(d) + 1)
    wr(os.path.join(db, f), d[:i] + b + d[i:])
    return "bytes %s inserted at %d" % (b.hex(), i)


def m_dotdot(db, f, rng):
    d = rd(os.path.join(db, f))
    ws = list(re.finditer(rb"[A-Za-z_/\[][A-Za-z_0-9./\[\]-]{2,}", d))
    if not ws:
        return None
    m = rng.choice(ws)
    v = rng.choice([b"../../../secret.txt", b"../secret.txt", b"..", b"../", b"a/../../b",
                    b"/../../../../secret.txt"])
    wr(os.path.join(db, f), d[:m.start()] + v + d[m.end():])
    return "%r -> %r" % (m.group().decode(errors="replace")[:40], v.decode())


def m_blank(db, f, rng):
    ls = lines_of(rd(os.path.join(db, f)))
    idx = [i for i in data_lines(ls) if b"\t" in ls[i] or b" " in ls[i] or b":" in ls[i]]
    if not idx:
        return None
    i = rng.choice(idx)
    sep = b"\t" if b"\t" in ls[i] else (b": " if b": " in ls[i] else b" ")
    fs = ls[i].split(sep)
    k = rng.randrange(len(fs))
    fs[k] = b""
    ls[i] = sep.join(fs)
    wr(os.path.join(db, f), b"\n".join(ls))
    return "line %d field %d emptied" % (i + 1, k + 1)


def m_delete(db, f, rng):
    os.unlink(os.path.join(db, f))
    return "removed"


def m_symlink(db, f, rng, to=None):
    p = os.path.join(db, f)
    os.unlink(p)
    to = to or rng.choice(["secret", "zero", "dir", "dangling", "loop"])
    target = {"secret": os.path.abspath(os.path.join(db, "..", "secret.txt")), "zero": "/dev/zero",
              "dir": "/", "dangling": "nothing-here", "loop": os.path.basename(f)}[to]
    os.symlink(target, p)
    return "symlink to %s (%s)" % (target, to)


def m_fifo(db, f, rng):
    p = os.path.join(db, f)
    os.unlink(p)
    os.mkfifo(p)
    return "FIFO"


def m_dir(db, f, rng):
    p = os.path.join(db, f)
    os.unlink(p)
    os.mkdir(p)
    return "directory"


def m_extraprof(db, f, rng):
    if not f.endswith(".prof"):
        return None
    shutil.copy(os.path.join(db, f), os.path.join(db, f[:-5] + ".7.prof"))
    return "copied to %s" % (f[:-5] + ".7.prof")


RANDOM_KINDS = [("truncate", m_truncate, 4), ("flip", m_flip, 5), ("number", m_number, 5),
                ("negative", m_negative, 2), ("dupline", m_dupline, 2), ("swaplines", m_swaplines, 1),
                ("bigline", m_bigline, 1), ("nul", m_nul, 2), ("utf8", m_utf8, 3), ("dotdot", m_dotdot, 2),
                ("blank", m_blank, 2), ("delete", m_delete, 1), ("extraprof", m_extraprof, 1),
                ("dir", m_dir, 1)]


# aimed mutations: (kind, file selector, function(db, file) -> description or None)

def sub_line(db, f, pattern, repl, count=1):
    p = os.path.join(db, f)
    d = rd(p)
    n = re.subn(pattern, repl, d, count=count, flags=re.M)
    if n[1] == 0:
        return False
    wr(p, n[0])
    return True


def a_wrap_prof(db, f):
    """two counts changed so that their sum is unchanged modulo 2^64"""
    p = os.path.join(db, f)
    ls = lines_of(rd(p))
    idx = [i for i, l in enumerate(ls) if re.fullmatch(rb"[0-9a-f]+( [0-9]+)+", l)]
    if len(idx) < 2:
        return None
    i, j = idx[0], idx[1]
    a, b = ls[i].split(b" "), ls[j].split(b" ")
    ca, cb = int(a[1]), int(b[1])
    a[1] = str(U64 - 1).encode()
    b[1] = str(ca + cb + 1).encode()
    ls[i], ls[j] = b" ".join(a), b" ".join(b)
    wr(p, b"\n".join(ls))
    return "counts %d and %d -> 2^64-1 and %d (same sum modulo 2^64)" % (ca, cb, ca + cb + 1)


def stacks_as_text(db, f):
    """a binary stacks file (format version 4) rewritten as text (the version 3
    layout, COUNT:WEIGHT[,...] PID LABEL IMAGE:OFFSET...), for damage aimed at
    its lines; a text one is left as it is.  Returns whether it was binary."""
    path, binary, _, st, _ = stacksfile.load(os.path.join(db, f), False)
    if binary:
        stacksfile.replace(path, stacksfile.write_text(st))
    return binary


# a stack's line: COUNT[:WEIGHT][,...] PID [LABEL] FRAMES (group 1: the counts)
STACK_LINE = rb"([0-9][0-9,:]*) [0-9]+ "


def first_count(field):
    """(the first event's count, the rest of the COUNT[:WEIGHT][,...] field)"""
    c = re.match(rb"[0-9]+", field).group()
    return int(c), field[len(c):]


def a_wrap_stacks(db, f):
    stacks_as_text(db, f)
    p = os.path.join(db, f)
    ls = lines_of(rd(p))
    idx = [i for i, l in enumerate(ls) if re.match(STACK_LINE, l)]
    if len(idx) < 2:
        return None
    i, j = idx[0], idx[1]
    a, b = ls[i].split(b" ", 1), ls[j].split(b" ", 1)
    (ca, ra), (cb, rb_) = first_count(a[0]), first_count(b[0])
    ls[i] = str(U64 - 1).encode() + ra + b" " + a[1]
    ls[j] = str(ca + cb + 1).encode() + rb_ + b" " + b[1]
    wr(p, b"\n".join(ls))
    return "stack counts %d and %d -> 2^64-1 and %d (as text)" % (ca, cb, ca + cb + 1)


def bin_stacks(db, f):
    """the binary stacks file's bytes and where its parts start: (data,
    nevents, nframes, nstacks, nrefs, frames, stacks, values, refs), or None
    when it is not binary"""
    d = bytearray(rd(os.path.join(db, f)))
    if not d.startswith(stacksfile.MAGIC) or len(d) < stacksfile.HEADER.size:
        return None
    _, ne, _, nf, ns, nr = stacksfile.HEADER.unpack_from(d, 0)
    fo = stacksfile.HEADER.size
    so = fo + 16 * nf
    vo = so + 16 * ns
    ro = vo + 16 * ne * ns
    return d, ne, nf, ns, nr, fo, so, vo, ro


def a_bin(how):
    """damage of the binary stacks file (format version 4), in its own terms"""
    def f(db, fn):
        b = bin_stacks(db, fn)
        if b is None:
            return None
        d, ne, nf, ns, nr, fo, so, vo, ro = b
        put32 = lambda at, v: d.__setitem__(slice(at, at + 4), (v & 0xffffffff).to_bytes(4, "little"))
        put64 = lambda at, v: d.__setitem__(slice(at, at + 8), (v % U64).to_bytes(8, "little"))
        get32 = lambda at: int.from_bytes(d[at:at + 4], "little")
        get64 = lambda at: int.from_bytes(d[at:at + 8], "little")
        if how == "truncate":
            del d[-1:]
            what = "1 byte short"
        elif how == "truncate-header":
            del d[20:]
            what = "cut inside the header"
        elif how == "magic":
            d[:8] = b"TALLYSTQ"
            what = "magic TALLYSTQ"
        elif how == "extra":
            d += b"\0" * 16
            what = "16 bytes past its end"
        elif how == "nevents":
            put32(8, ne + 1)
            what = "nevents %d -> %d" % (ne, ne + 1)
        elif how == "nframes-huge":
            put64(16, (1 << 32) + nf)
            what = "nframes %d -> %d" % (nf, (1 << 32) + nf)
        elif how == "nframes-wrap":
            put64(16, nf + (1 << 60))
            what = "nframes %d -> %d (16 x nframes wraps 2^64 to the file's size)" % (nf, nf + (1 << 60))
        elif how == "nstacks-wrap":
            # nstacks x 16 (1 + nevents) bytes wraps 2^64 back to the file's size
            k = 16 * (1 + ne)
            if (1 << 64) % k:
                return None
            put64(24, ns + (1 << 64) // k)
            what = "nstacks %d -> %d (the size wraps 2^64 to the file's)" % (ns, ns + (1 << 64) // k)
        elif how == "nrefs-wrap":
            put64(32, nr + (1 << 62))
            what = "nrefs %d -> %d (4 x nrefs wraps 2^64 to the file's size)" % (nr, nr + (1 << 62))
        elif how == "ref":
            if not nr:
                return None
            put32(len(d) - 4, 0xffffffff)
            what = "the last frame number -> 0xffffffff"
        elif how == "ref-past":
            if not nr:
                return None
            put32(ro, nf)
            what = "the first frame number -> %d, one past the frames" % nf
        elif how == "image":
            if not nf:
                return None
            at = fo + 16 * (nf - 1)
            what = "the last frame's image %d -> 0xfffffff0" % get32(at)
            put32(at, 0xfffffff0)
        elif how == "unsorted":
            if nf < 2:
                return None
            d[fo:fo + 16], d[fo + 16:fo + 32] = d[fo + 16:fo + 32], d[fo:fo + 16]
            what = "frames 0 and 1 swapped"
        elif how == "frame-reserved":
            if not nf:
                return None
            put32(fo + 4, 1)
            what = "frame 0's reserved word -> 1"
        elif how in ("pid", "label", "len0", "len-huge"):
            if ns < 2:
                return None
            if how == "pid":
                put32(so, 0xffffffff)
            elif how == "label":
                put32(so + 4, 0xffffffff)
            elif how == "len0":
                # its frames go to the next stack: the frame numbers still add up
                put32(so + 16 + 8, get32(so + 8) + get32(so + 16 + 8))
                put32(so + 8, 0)
            else:
                put32(so + 8, 0xffffffff)
            what = "the first stack's %s" % {"pid": "pid -> 0xffffffff", "label": "label set -> 0xffffffff",
                                             "len0": "frames -> 0 (the next stack's longer)",
                                             "len-huge": "length -> 0xffffffff"}[how]
        elif how in ("count", "wrap", "weight-no-sample"):
            if ns < 2:
                return None
            a, b = vo, vo + 16 * ne  # the first event's count of stacks 0 and 1
            ca, cb = get64(a), get64(b)
            if how == "count":
                put64(a, ca + 1000)
                what = "the first stack's count %d -> %d" % (ca, ca + 1000)
            elif how == "wrap":
                put64(a, U64 - 1)
                put64(b, ca + cb + 1)
                what = "stack counts %d and %d -> 2^64-1 and %d (same sum modulo 2^64)" % (ca, cb, ca + cb + 1)
            else:
                put64(b, ca + cb)
                put64(a, 0)
                what = "the first stack's count 0 (its weight kept), the second's %d" % (ca + cb)
        else:
            raise ValueError(how)
        wr(os.path.join(db, fn), bytes(d))
        return what
    return f


BIN_KINDS = ["truncate", "truncate-header", "magic", "extra", "nevents", "nframes-huge", "nframes-wrap", "nstacks-wrap",
             "nrefs-wrap",
             "ref", "ref-past", "image", "unsorted", "frame-reserved", "pid", "label", "len0", "len-huge", "count",
             "wrap", "weight-no-sample"]


def a_huge_count(db, f):
    p = os.path.join(db, f)
    ls = lines_of(rd(p))
    idx = [i for i, l in enumerate(ls) if re.fullmatch(rb"[0-9a-f]+( [0-9]+)+", l)]
    if not idx:
        return None
    a = ls[idx[0]].split(b" ")
    a[1] = str(U64 - 1).encode()
    ls[idx[0]] = b" ".join(a)
    d = b"\n".join(ls)
    d = re.sub(rb"^samples: [0-9]+", b"samples: 18446744073709551615", d, count=1, flags=re.M)
    wr(p, d)
    return "a count and the header's samples -> 2^64-1"


def a_pid_wrap(db, f):
    if f == "tasks":
        ok = sub_line(db, f, rb"^[0-9]+\t", b"4294967295\t")
    elif f == "stacks":
        stacks_as_text(db, f)
        ok = sub_line(db, f, rb"^" + STACK_LINE, rb"\1 4294967295 ", count=0)
    else:
        ok = sub_line(db, f, rb"^pid: [0-9]+$", b"pid: 4294967295")
    return "pid -> 4294967295" if ok else None


def a_empty_comm(db, f):
    if f == "tasks":
        ok = sub_line(db, f, rb"^([0-9]+)\t[^\t\n]*\t", rb"\1\t\t", count=0)
    else:
        ok = sub_line(db, f, rb"^comm: .*$", b"comm: ")
    return "comm emptied" if ok else None


def a_session(key, value):
    """(its kind is session:KEY)"""
    def f(db, fn):
        if not sub_line(db, fn, rb"^" + key.encode() + rb": .*$", (key + ": " + value).encode()):
            return None
        return "%s: %s" % (key, value)
    return f


def a_image_field(col, value):
    def f(db, fn):
        p = os.path.join(db, fn)
        ls = lines_of(rd(p))
        idx = [i for i in data_lines(ls) if len(ls[i].split(b"\t")) >= 7 and ls[i].split(b"\t")[1] != b"kernel"]
        if not idx:
            return None
        fs = ls[idx[0]].split(b"\t")
        old = fs[col]
        fs[col] = value
        ls[idx[0]] = b"\t".join(fs)
        wr(p, b"\n".join(ls))
        return "image row %d column %d %r -> %r" % (idx[0], col + 1, old.decode(errors="replace")[:40],
                                                    value.decode(errors="replace")[:40])
    return f


def a_utf8_line(pattern, what):
    """invalid UTF-8 inside the name on the first line matching PATTERN (its group 1)"""
    def f(db, fn):
        p = os.path.join(db, fn)
        d = rd(p)
        m = re.search(pattern, d, re.M)
        if not m:
            return None
        i = m.start(1) + 1
        wr(p, d[:i] + b"\xff\xc3(" + d[i:])
        return "bytes ffc328 inside %s %r" % (what, m.group(1).decode(errors="replace")[:40])
    return f


def a_path_fifo(db, fn):
    """the recorded path of an image is now a FIFO (symbolization opens it)"""
    fifo = os.path.abspath(os.path.join(db, "..", "image.fifo"))
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    return a_image_field(6, fifo.encode())(db, fn)


def a_jit_noname(db, f):
    return "a func line with an empty name" if sub_line(db, f, rb"^(func [0-9a-f]+ [0-9a-f]+ [0-9]+ ).*$", rb"\1") else None


def a_jit_overlap(db, f):
    p = os.path.join(db, f)
    d = rd(p)
    m = re.search(rb"^func ([0-9a-f]+) ", d, re.M)
    if not m:
        return None
    base = int(m.group(1), 16)
    extra = b"".join(b"func %x %x %d f%d\n" % (base + i, 0x100000, 100 + i, i) for i in range(100000))
    wr(p, d.rstrip(b"\n") + b"\n" + extra)
    return "100000 overlapping func entries"


def a_map_overlap(db, f):
    p = os.path.join(db, f)
    d = rd(p)
    m = re.match(rb"([0-9a-f]+) ", d)
    if not m:
        return None
    base = int(m.group(1), 16)
    extra = b"".join(b"%x %x f%d\n" % (base + i, 0x100000, i) for i in range(100000))
    wr(p, d + extra)
    return "100000 overlapping perf map entries"


def a_jit_dotdot(db, f):
    """the JIT image's id leads out of jit/ to a map planted beside the database"""
    p = os.path.join(db, f)
    ls = lines_of(rd(p))
    for i in data_lines(ls):
        fs = ls[i].split(b"\t")
        if len(fs) >= 7 and fs[1] == b"jit":
            pid, old = fs[4].decode(), fs[2].decode()
            fs[2] = b"x/../../../secret"
            ls[i] = b"\t".join(fs)
            wr(p, b"\n".join(ls))
            os.makedirs(os.path.join(db, "jit", "perf-%s-x" % pid), exist_ok=True)
            os.makedirs(os.path.join(db, "jit", "jitdump-%s-x" % pid), exist_ok=True)
            # what the planted files name: a function called like the secret
            for fn in os.listdir(os.path.join(db, "jit")):
                if fn.startswith("perf-") and fn.endswith(old + ".map"):
                    first = rd(os.path.join(db, "jit", fn)).split(b"\n")[0].split(b" ")
                    wr(os.path.join(db, "..", "secret.map"), b"%s %s %s\n" % (first[0], first[1], SECRET.encode()))
            return "jit image id -> x/../../../secret"
    return None


def a_call_graph_none(db, f):
    if not os.path.exists(os.path.join(db, "stacks")):
        return None
    return a_session("call-graph", "none")(db, f)


def a_bigstack(db, f):
    """a stack of 2.5 MB of frames: two callers of the leaf in different images
    (so surely different functions), one after the other, over and over (a
    recursion about 140,000 calls deep: a quarter of the 10 MB of the other
    long lines, so that report --tree, 1 s of CPU at 10 MB, stays well inside
    the hang limit on a busy machine), in the stack with the most samples (so
    that no --percent-limit leaves it out); as text (COUNT:WEIGHT[,...] PID
    LABEL FRAMES, the leaf first)"""
    stacks_as_text(db, f)
    p = os.path.join(db, f)
    ls = lines_of(rd(p))
    best = None
    weight = lambda l: sum(int(c.split(b":")[0]) for c in l.split(b" ")[0].split(b","))
    for i, l in enumerate(ls):
        if not re.match(rb"[0-9,:]+ [0-9]+ [0-9]+ [0-9]+:", l):
            continue
        callers = l.split(b" ")[4:]
        for x in callers:
            y = next((y for y in callers if y.split(b":")[0] != x.split(b":")[0]), None)
            if y and (best is None or weight(l) > weight(ls[best[0]])):
                best = (i, x, y)
            if y:
                break
    if best is None:
        return None
    i, x, y = best
    fs = ls[i].split(b" ")
    ls[i] = b" ".join(fs[:4] + [x, y] * (BIG // 4 // (len(x) + len(y) + 2)) + fs[4:])
    wr(p, b"\n".join(ls))
    return "line %d: frames %s and %s repeated to 2.5 MB" % (i + 1, x.decode(), y.decode())


def aimed(db):
    """the aimed mutations for this database: (kind, file, function)"""
    files = sorted(all_files(db))
    profs = [f for f in files if f.endswith(".prof")]
    main_prof = max(profs, key=lambda f: os.path.getsize(os.path.join(db, f))) if profs else None
    per_pid = re.search(rb"^per-pid: yes$", rd(os.path.join(db, "session")), re.M) is not None
    out = []
    # counts that wrap: in the profiles of three images (the most sampled
    # first), one file each
    names = []
    for f in sorted(profs, key=lambda f: -os.path.getsize(os.path.join(db, f))):
        if f.split("-")[0] not in [n for n, _ in names] and len(names) < 3:
            names.append((f.split("-")[0], f))
    for _, f in names:
        out.append(("wrap", f, a_wrap_prof))
    if main_prof:
        out.append(("hugecount", main_prof, a_huge_count))
        out.append(("extraprof", main_prof, lambda d, f: m_extraprof(d, f, None)))
    if "stacks" in files:
        out += [("wrap", "stacks", a_wrap_stacks), ("bigline", "stacks", a_bigstack),
                ("session:call-graph", "session", a_call_graph_none)]
        if bin_stacks(db, "stacks"):
            out += [("bin-" + k, "stacks", a_bin(k)) for k in BIN_KINDS]
    if per_pid:
        out += [("pidwrap", main_prof, a_pid_wrap), ("pidwrap", "tasks", a_pid_wrap), ("emptycomm", "tasks", a_empty_comm),
                ("emptycomm", main_prof, a_empty_comm)]
        if "stacks" in files:
            out.append(("pidwrap", "stacks", a_pid_wrap))
    for k, v in [("start-time", "9999-99-99T99:99:99Z"), ("period-mean", "1e400"), ("samples", "18446744073709551615"),
                 ("lost", "18446744073709551615"), ("throttled", "-1"), ("format-version", "2"), ("duration", "-1e400"),
                 ("events", "cpu-clock,cpu-clock"), ("per-pid", "maybe")]:
        out.append(("session:" + k, "session", a_session(k, v)))
    out += [
            ("images", "images", a_image_field(1, b"kernel")),
            ("images", "images", a_image_field(2, b"ab/cd")),
            ("images", "images", a_image_field(2, b"ab\x11cd")),
            ("images", "images", a_image_field(5, b"../../../secret.txt")),
            ("images", "images", a_image_field(5, b"n" * BIG)),
            ("pathfifo", "images", a_path_fifo),
            ("utf8", "images", a_utf8_line(rb"^[0-9]+\t(?:exec|lib)\t[^\t]*\t[^\t]*\t[^\t]*\t([^\t\n]+)", "an image name")),
            ("utf8", "kernel.syms", a_utf8_line(rb"^[0-9a-f]+ [0-9a-f]+ [A-Za-z] ([^ \n]+)", "a kernel symbol"))]
    if "tasks" in files:
        out.append(("utf8", "tasks", a_utf8_line(rb"^[0-9]+\t([^\t\n]+)", "a command name")))
    for f in [f for f in files if f.startswith("jit/perf-")]:
        out.append(("utf8", f, a_utf8_line(rb"^[0-9a-f]+ [0-9a-f]+ ([^\n]+)", "a JIT function name")))
    for f in [f for f in files if f.startswith("jit/jitdump-")]:
        out += [("jitnoname", f, a_jit_noname), ("jitoverlap", f, a_jit_overlap)]
    for f in [f for f in files if f.startswith("jit/perf-")]:
        out += [("mapoverlap", f, a_map_overlap)]
    if any(f.startswith("jit/") for f in files):
        out.append(("dotdot", "images", a_jit_dotdot))
    # files that are not files: each kind once, on files chosen in turn
    special = [f for f in ["session", "images", main_prof, "stacks", "tasks", "kernel.syms"] +
               [f for f in files if f.startswith("jit/")] if f in files]
    kinds = [("fifo", m_fifo), ("symlink-secret", lambda d, f, r: m_symlink(d, f, r, "secret")),
             ("symlink-zero", lambda d, f, r: m_symlink(d, f, r, "zero")),
             ("symlink-dir", lambda d, f, r: m_symlink(d, f, r, "dir")),
             ("symlink-dangling", lambda d, f, r: m_symlink(d, f, r, "dangling")),
             ("symlink-loop", lambda d, f, r: m_symlink(d, f, r, "loop"))]
    for i, (k, fn) in enumerate(kinds):
        f = special[i % len(special)]
        out.append((k, f, (lambda fn: lambda d, f: fn(d, f, None))(fn)))
    return out


def all_files(db):
    out = []
    for root, _, fs in os.walk(db):
        for f in fs:
            out.append(os.path.relpath(os.path.join(root, f), db))
    return out


# ---------------------------------------------------------------- commands and oracles

PCT = re.compile(r"(?<![\w.])(-?[0-9]+(?:\.[0-9]+)?)%")


def shares_ok(text):
    bad = [float(x) for x in PCT.findall(text) if not 0 <= float(x) <= 100.005]
    return "a share of %s%%" % bad[0] if bad else None


def check_json_report(out, ctx):
    r = json.loads(out)
    errs = []
    session = r.get("session", {})
    evnames = session.get("events", "").split(",")
    ssamples = session.get("samples", "").split(",")
    totals = {}
    for e in r["events"]:
        n = e["samples"]
        totals[e["name"]] = n
        if not isinstance(n, int) or n < 0:
            errs.append("event %s has %r samples" % (e["name"], n))
            continue
        s = sum(i["samples"] for i in e["images"])
        if s != n:
            errs.append("event %s: the images add up to %d, the event says %d" % (e["name"], s, n))
        if "value" in e and sum(i["value"] for i in e["images"]) != e["value"]:
            errs.append("event %s: the images' values add up to %d, the event says %d" % (e["name"], sum(i["value"] for i in e["images"]), e["value"]))
        if e["name"] in evnames and len(ssamples) == len(evnames):
            want = ssamples[evnames.index(e["name"])]
            if want != str(n):
                errs.append("event %s: %d samples, the session says %s" % (e["name"], n, want))
        for i in e["images"]:
            if not isinstance(i["samples"], int) or i["samples"] < 0:
                errs.append("image %s has %r samples" % (i.get("name"), i["samples"]))
            if not 0 <= i.get("percent", 0) <= 100.005:
                errs.append("image %s: %r%%" % (i.get("name"), i.get("percent")))
            fs = i.get("functions")
            if fs is not None:
                fsum = sum(f["samples"] for f in fs)
                if fsum != i["samples"]:
                    errs.append("image %s: its functions add up to %d, the image says %d" % (i.get("name"), fsum, i["samples"]))
                if "value" in i and sum(f["value"] for f in fs) != i["value"]:
                    errs.append("image %s: its functions' values add up to %d, the image says %d" % (i.get("name"), sum(f["value"] for f in fs), i["value"]))
                for f in fs:
                    for k in ("percent", "percent_of_total"):
                        if not 0 <= f.get(k, 0) <= 100.005:
                            errs.append("function %s: %s %r" % (f.get("name"), k, f.get(k)))
                    if f["samples"] < 0 or f["samples"] > i["samples"]:
                        errs.append("function %s: %d samples of its image's %d" % (f.get("name"), f["samples"], i["samples"]))
    ctx["totals"] = totals
    ctx["first"] = r["events"][0]["samples"] if r["events"] else None
    # the period-weighted totals the exports and the text show by default
    # (the samples when the report is not weighted)
    ctx["vtotals"] = {e["name"]: e.get("value", e["samples"]) for e in r["events"]}
    ctx["vfirst"] = r["events"][0].get("value", r["events"][0]["samples"]) if r["events"] else None
    ctx["unit"] = r["events"][0].get("unit") if r["events"] else None
    return errs


def check_children_json(out, ctx):
    r = json.loads(out)
    errs = []
    for e in r["events"]:
        n = e["samples"]
        if ctx.get("totals", {}).get(e["name"], n) != n:
            errs.append("--children: event %s has %d samples, report --json %d" % (e["name"], n, ctx["totals"][e["name"]]))
        for f in e.get("functions", []):
            if not 0 <= f["self"] <= f["inclusive"] <= n:
                errs.append("--children: %s self %d inclusive %d of %d" % (f["name"], f["self"], f["inclusive"], n))
            for k in ("self_percent", "inclusive_percent"):
                if not 0 <= f.get(k, 0) <= 100.005:
                    errs.append("--children: %s %s %r" % (f["name"], k, f.get(k)))
        if sum(f["self"] for f in e.get("functions", [])) > n:
            errs.append("--children: the self counts add up to more than the %d samples" % n)
    return errs


TEXT_ROW = re.compile(r"^\s*(\d+(?:\.\d)?)\s+(\d+\.\d+)%\s+(\d+\.\d+)%\s+(\S.*?)\s*$")


def check_text_report(out, ctx):
    errs = []
    rows, total, in_images, unit = [], None, False, None
    for l in out.split("\n"):
        m = re.match(r"^\s*(samples|msec|events)\s+%\s+cum%\s+image\s*$", l)
        if m:
            in_images, rows, unit = True, [], m.group(1)
            continue
        if in_images:
            m = re.match(r"^\s*(\d+(?:\.\d)?)\s+Total\s*$", l)
            if m:
                total = float(m.group(1))
                break
            m = TEXT_ROW.match(l)
            if m:
                rows.append((float(m.group(1)), float(m.group(2))))
            else:
                in_images = False
    if total is not None:
        # msec are rounded to a tenth: each row and the total by up to 0.05
        slack = 0.05 * (len(rows) + 1) if unit == "msec" else 0
        if abs(sum(n for n, _ in rows) - total) > slack:
            errs.append("text report: Total %s, the rows add up to %s" % (total, sum(n for n, _ in rows)))
        for n, p in rows:
            # rounded to a tenth of a msec, the row and the total each move its
            # share by up to 100 * 0.05 / total, the total's by n / total of that
            if total and abs(100.0 * n / total - p) > 0.01 + (100.0 * 0.05 * (1 + n / total) / total if unit == "msec" else 0):
                errs.append("text report: a row of %s %s says %.2f%% of %s" % (n, unit, p, total))
                break
        if ctx.get("first") is not None and len(ctx.get("totals", {})) == 1:
            want = ctx["first"] if unit == "samples" else ctx["vfirst"]
            if unit == "msec":
                want = want / 1e6
            if abs(total - want) > (0.05 if unit == "msec" else 0):
                errs.append("text report: Total %s %s, report --json %s" % (total, unit, want))
    return errs


def check_folded(path, ctx):
    s = 0
    for l in open(path, "rb").read().split(b"\n"):
        if l:
            m = re.search(rb" ([0-9]+)$", l)
            if not m:
                return ["folded: a line without a count: %r" % l[:80]]
            s += int(m.group(1))
    if ctx.get("vfirst") is not None and s != ctx["vfirst"]:
        return ["folded: the counts add up to %d, report --json says %d" % (s, ctx["vfirst"])]
    return []


def check_svg(path, ctx):
    d = open(path, "rb").read()
    m = re.search(rb'<g class="f" data-x="0" data-c="(-?[0-9]+)" data-d="0"><title>all', d)
    if not m:
        return ["svg: no 'all' frame"]
    if ctx.get("vfirst") is not None and int(m.group(1)) != ctx["vfirst"]:
        return ["svg: 'all' holds %s, report --json says %d" % (m.group(1).decode(), ctx["vfirst"])]
    return []


def check_callgrind(path, ctx):
    events, sums, after_calls = None, None, False
    for l in open(path, "rb").read().decode("utf-8", "replace").split("\n"):
        if l.startswith("events:"):
            events = l.split()[1:]
            sums = [0] * len(events)
            continue
        if l.startswith("calls="):
            after_calls = True
            continue
        m = re.match(r"^(?:0x[0-9a-fA-F]+|[+-][0-9]+|\*)\s+\S+((?:\s+-?[0-9]+)+)\s*$", l)
        if m and sums is not None:
            if after_calls:
                after_calls = False
                continue
            for i, c in enumerate(m.group(1).split()):
                if i < len(sums):
                    sums[i] += int(c)
    errs = []
    for e, s in zip(events or [], sums or []):
        want = ctx.get("vtotals", {}).get(e)
        if want is not None and s != want:
            errs.append("callgrind: event %s's costs add up to %d, report --json says %d" % (e, s, want))
    return errs


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0:
            v, i = varint(b, i)
        elif t == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise ValueError("field %d runs past the end" % f)
            v, i = b[i:i + n], i + n
        elif t == 1:
            v, i = b[i:i + 8], i + 8
        elif t == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % t)
        yield f, t, v


def check_pprof(path, ctx):
    b = gzip.open(path).read()
    types, samples, strings = [], [], []
    for f, t, v in fields(b):
        if f == 1:
            types.append(dict((g, x) for g, _, x in fields(v)).get(1, 0))
        elif f == 2:
            vals = []
            for g, tt, x in fields(v):
                if g == 2:
                    if tt == 2:
                        j = 0
                        while j < len(x):
                            y, j = varint(x, j)
                            vals.append(y - U64 if y >= 1 << 63 else y)
                    else:
                        vals.append(x - U64 if x >= 1 << 63 else x)
            samples.append(vals)
        elif f == 6:
            strings.append(v.decode("utf-8", "replace"))
    errs = []
    names = [strings[t] if t < len(strings) else "?" for t in types]
    for k, n in enumerate(names):
        if n == "samples" or n.endswith("-samples"):
            ev = n[:-len("-samples")] if n != "samples" else None
            s = sum(v[k] for v in samples if k < len(v))
            want = ctx.get("first") if ev is None else ctx.get("totals", {}).get(ev)
            if want is not None and s != want:
                errs.append("pprof: %s adds up to %d, report --json says %d" % (n, s, want))
            if any(v[k] < 0 for v in samples if k < len(v)):
                errs.append("pprof: a negative %s value" % n)
    return errs


def commands(db, func, per_pid, out):
    """(name, argv, output file or None, checker(stdout or file, ctx) -> errors)"""
    j = lambda s, c: check_json_report(s, c)
    return [
        ("report --json --symbols", ["report", "-i", db, "--json", "--symbols"], None, j),
        ("report", ["report", "-i", db], None, check_text_report),
        ("report --symbols", ["report", "-i", db, "--symbols"], None, None),
        ("report --lines", ["report", "-i", db, "--lines"], None, None),
        ("report --children", ["report", "-i", db, "--children"], None, None),
        ("report --children --json", ["report", "-i", db, "--children", "--json"], None, check_children_json),
        ("report --tree", ["report", "-i", db, "--tree"], None, None),
        ("annotate --asm", ["annotate", "-i", db, func, "--asm"], None, None),
        ("export pprof", ["export", "-i", db, "--format", "pprof", "-o", out + ".pb.gz"], out + ".pb.gz", check_pprof),
        ("export callgrind", ["export", "-i", db, "--format", "callgrind", "-o", out + ".cg"], out + ".cg", check_callgrind),
        ("export gmon", ["export", "-i", db, "--format", "gmon", "-o", out + ".gmon"], out + ".gmon", None),
        ("export folded", ["export", "-i", db, "--format", "folded", "-o", out + ".folded"] +
         (["--comm-root"] if per_pid else []), out + ".folded", check_folded),
        ("export svg", ["export", "-i", db, "--format", "svg", "-o", out + ".svg"], out + ".svg", check_svg),
    ]


def limits():
    """set on this process, for the commands it runs to inherit (a
    preexec_fn would make every spawn a slow fork)"""
    if not SAN:
        resource.setrlimit(resource.RLIMIT_AS, (MEM_MB << 20, MEM_MB << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def env():
    e = dict(os.environ)
    if SAN:
        for k in ("ASAN_OPTIONS",):
            e[k] = (e.get(k, "") + ":" if e.get(k) else "") + "hard_rss_limit_mb=%d:allocator_may_return_null=1" % MEM_MB
    return e


SAN_RE = re.compile(r"(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|MemorySanitizer)")


CLK_TCK = os.sysconf("SC_CLK_TCK")
CPU = {}
MUTANT_CPU = []


def proc_stat(pid):
    """(state, CPU seconds) of a running process, or None"""
    try:
        st = open("/proc/%d/stat" % pid).read()
    except OSError:
        return None
    fs = st[st.rindex(")") + 2:].split()
    return fs[0], (int(fs[11]) + int(fs[12])) / CLK_TCK


def wchan(pid):
    try:
        return open("/proc/%d/wchan" % pid).read().strip() or "?"
    except OSError:
        return "?"


def run_one(argv, work):
    """runs tally ARGV: (exit status or None when it hung, stdout, stderr,
    seconds, hang description).  A hang is CPU_LIMIT seconds of CPU, or
    BLOCKED seconds asleep without using any CPU (a blocking open or read:
    nothing tally reads should block), or WALL_LIMIT seconds in all (the
    machine may be loaded: wall time alone says little)."""
    so_p, se_p = os.path.join(work, "stdout"), os.path.join(work, "stderr")
    with open(so_p, "wb") as so, open(se_p, "wb") as se:
        p = subprocess.Popen([TALLY] + argv, stdin=subprocess.DEVNULL, stdout=so, stderr=se, env=ENV)
    t0 = time.monotonic()
    last_cpu, idle_since, delay, hang = -1.0, t0, 0.001, None
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            CPU["mutant"] = CPU.get("mutant", 0) + ru.ru_utime + ru.ru_stime
            CPU[argv[0] + " " + " ".join(a for a in argv[3:] if a.startswith("--"))] = \
                CPU.get(argv[0] + " " + " ".join(a for a in argv[3:] if a.startswith("--")), 0) + ru.ru_utime + ru.ru_stime
            break
        now = time.monotonic()
        ps = proc_stat(p.pid)
        if ps and hang is None:
            state, cpu = ps
            if cpu > CPU_LIMIT:
                hang = "busy for %.1f s of CPU" % cpu
            elif state == "S" and cpu == last_cpu:
                if now - idle_since > BLOCKED:
                    hang = "blocked for %.1f s without using the CPU (in %s)" % (now - idle_since, wchan(p.pid))
            else:
                idle_since, last_cpu = now, cpu
            if now - t0 > WALL_LIMIT:
                hang = "still running after %.0f s" % (now - t0)
            if hang:
                p.kill()
                os.waitpid(p.pid, 0)
                break
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    p.returncode = 0
    dt = time.monotonic() - t0
    so, se = rd(so_p), rd(se_p)
    if hang:
        return None, so, se, dt, hang
    return os.waitstatus_to_exitcode(status), so, se, dt, None


ENV = env()


def problems_of(name, argv, outfile, checker, ctx, work):
    """runs one command; returns [(problem class, detail)], one per class"""
    if outfile and os.path.lexists(outfile):
        os.unlink(outfile)
    rc, so, se, dt, hang = run_one(argv, work)
    if rc is None:
        return [("hang", hang)]
    set_ = se.decode("utf-8", "replace")
    errline = set_.strip().split("\n")[0][:200]
    if re.search(r"out of memory|Cannot allocate memory|allocation-size-too-big|rss-limit-exceeded|rss limit exhausted", set_, re.I):
        return [("memory", "ran out of its %d MB (exit %d after %.1f s): %s" % (MEM_MB, rc, dt, errline))]
    if dt > SLOW:
        print("note: slow: tally %s took %.1f s (exit %d)" % (name, dt, rc))
    out = []
    m = SAN_RE.search(set_)
    if m:
        out.append(("sanitizer", [l for l in set_.split("\n") if m.group(1) in l][0].strip()[:300]))
    if rc < 0 or rc > 128:
        out.append(("crash", "killed by signal %d; stderr: %s" % (-rc if rc < 0 else rc - 128, errline)))
        return out
    if SECRET.encode() in so + se or b"secret one" in so + se:
        out.append(("secret", "printed the content of a file outside the database"))
    if rc != 0:
        if not se.strip():
            out.append(("silent", "exit %d with nothing on stderr" % rc))
        return out
    try:
        if checker is None:
            errs = []
        elif outfile:
            errs = checker(outfile, ctx) if os.path.exists(outfile) else ["exit 0 but no %s" % outfile]
        elif "--json" in argv:
            # JSON is UTF-8 whatever the names hold (RFC 8259)
            try:
                text = so.decode("utf-8", "strict")
            except UnicodeDecodeError as ex:
                return out + [("json-utf8", "exit 0 with JSON that is not UTF-8: %s" % str(ex)[:160])]
            errs = checker(text, ctx)
        else:
            # text reports print names as they are
            errs = checker(so.decode("utf-8", "replace"), ctx)
    except (ValueError, KeyError, IndexError, TypeError, EOFError, OSError, UnicodeDecodeError) as ex:
        return out + [("output", "exit 0 with output that does not parse: %s: %s" % (type(ex).__name__, str(ex)[:160]))]
    if not outfile:
        bad = shares_ok(so.decode("utf-8", "replace"))
        if bad:
            errs.append(bad)
    if errs:
        out.append(("totals", errs[0] + (" (and %d more)" % (len(errs) - 1) if len(errs) > 1 else "")))
    return out


def match(s, pats):
    """S matches one of the |-separated shell patterns PATS"""
    return any(fnmatch.fnmatchcase(s, p) for p in pats.split("|"))


def load_known(path):
    known = []
    for l in open(path):
        l = l.split("#", 1)[0].strip()
        if l:
            fs = l.split()
            if len(fs) != 4:
                sys.exit("mutate.py: %s: a known failure is MUTATION FILE COMMAND PROBLEM: %r" % (path, l))
            known.append(fs)
    return known


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    name, base, func, seed, count, known_file = sys.argv[1:]
    limits()
    count = int(count)
    known = load_known(known_file)
    used = set()
    work = os.path.abspath("mut-" + name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(work, "secret.txt"), "w") as f:
        f.write("%s secret one\nroot:$6$secret:19000:0:99999:7:::\n" % SECRET)
    keep = os.environ.get("TALLY_KEEP_MUTANTS")
    per_pid = re.search(rb"^per-pid: yes$", rd(os.path.join(base, "session")), re.M) is not None
    # in an order that does not depend on the recording's pids
    base_files = sorted(all_files(base), key=lambda f: (re.sub(r"[0-9]+", "#", f), f))

    plan = [(k, f, fn, None) for k, f, fn in aimed(base)]
    if SAN:
        count = (count + 1) // 2   # each run several times slower: the aimed mutants all, half the random ones
    for i in range(count):
        rng = random.Random("%s:%s:%d" % (seed, name, i))
        kinds = [k for k in RANDOM_KINDS for _ in range(k[2])]
        k, fn, _ = rng.choice(kinds)
        f = rng.choice(base_files)
        plan.append((k, f, lambda d, f, fn=fn, rng=rng: fn(d, f, rng), i))

    t0 = time.monotonic()
    nfail = nknown = nrun = ncmd = naimed = 0
    for n, (kind, f, fn, i) in enumerate(plan):
        db = os.path.join(work, "db")
        shutil.rmtree(db, ignore_errors=True)
        shutil.copytree(base, db, symlinks=True)
        # an aimed mutation of a file this recording does not have (kernel.syms
        # when no sample was in the kernel) has nothing to damage
        if i is None and not os.path.lexists(os.path.join(db, f)):
            continue
        what = fn(db, f)
        if what is None:
            continue
        mid = "%s#%d" % (name, n) + ("" if i is None else " (random %d)" % i)
        mut = Mutant(kind, f, what)
        nrun += 1
        naimed += i is None
        CPU["mutant"] = 0
        ctx = {}
        failed_here = False
        for cname, argv, outfile, checker in commands(db, func, per_pid, os.path.join(work, "out")):
            ncmd += 1
            ps = problems_of(cname, argv, outfile, checker, ctx, work)
            for prob, detail in ps:
                tag = None
                for j, (km, kf, kc, kp) in enumerate(known):
                    if (match(kind, km) and match(f, kf) and match(cname.replace(" ", "_"), kc) and match(prob, kp)):
                        tag = j
                        break
                line = "%s: %s | tally %s | %s: %s" % (mid, mut, cname, prob, detail)
                if tag is not None:
                    used.add(tag)
                    nknown += 1
                    print("known: " + line)
                else:
                    nfail += 1
                    failed_here = True
                    print("FAIL: " + line)
            if any(p in ("hang", "memory") for p, _ in ps):
                print("note: %s: the other commands are not run after a hang or running out of memory" % mid)
                break
        MUTANT_CPU.append((CPU["mutant"], "%s: %s" % (mid, mut)))
        if failed_here and keep:
            dst = os.path.join(keep, "%s-%d" % (name, n))
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(db, dst, symlinks=True)
            with open(dst + ".txt", "w") as w:
                w.write(str(mut) + "\n")
        sys.stdout.flush()
    seen = os.environ.get("TALLY_KNOWN_SEEN")
    if seen:
        with open(seen, "a") as w:
            for j in sorted(used):
                w.write(" ".join(known[j]) + "\n")
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print("%s: %d mutants (%d aimed, %d random; seed %s), %d commands in %.1f s (tally's CPU: %.1f s)%s: %d failures, %d known" %
          (name, nrun, naimed, nrun - naimed, seed, ncmd, time.monotonic() - t0, ru.ru_utime + ru.ru_stime,
           " (sanitizer build)" if SAN else "", nfail, nknown))
    if os.environ.get("TALLY_MUTATE_PROFILE"):
        for k, v in sorted(CPU.items(), key=lambda kv: -kv[1]):
            print("cpu: %6.2f s  %s" % (v, k))
        for v, k in sorted(MUTANT_CPU, reverse=True)[:12]:
            print("cpu: %6.2f s  %s" % (v, k[:150]))
    sys.exit(1 if nfail else 0)


if __name__ == "__main__":
    main()
