#!/usr/bin/env python3
"""stacks.py: a database's `stacks` file, binary (format version 4) or text.

    stacks.py text DB        print DB/stacks as text (the version 3 layout)
    stacks.py to-text DB     rewrite DB/stacks in place as that text
    stacks.py to-binary DB   rewrite DB/stacks (text, version 3 layout) as binary

A reading of docs/format.md written apart from tally's C, for the tests: they
read a stacks file through it, or turn it into text before damaging its lines
with sed or awk (tally reads a text stacks file in any format version), or
build a binary file from text.  DB is the database directory (a file path
names the stacks file itself; the session is the one beside it).  The
session's format-version is left as it is.

The text layout (version 3), one line per distinct stack:

    # count:weight[,count:weight...] pid label frames (image-index:hex-offset, leaf first)
    120:120371002 0 0 0:15c3 0:1702 2:29d8f

The binary layout (version 4), every integer little-endian:

    0   8 bytes  b"TALLYSTK"
    8   u32      nevents (the session's events)
    12  u32      0
    16  u64      nframes
    24  u64      nstacks
    32  u64      nrefs (the frames of all stacks)
    40  frames   nframes x (u32 image, u32 0, u64 offset)
        stacks   nstacks x (u32 pid, u32 label, u32 len > 0, u32 0)
        values   nstacks x (nevents u64 counts, then nevents u64 weights)
        refs     nrefs x u32 frame number, stack after stack, each leaf first
    the file is exactly 40 + 16 nframes + 16 nstacks + 16 nevents nstacks + 4 nrefs bytes

The frames may come in any order, and one may be there twice (docs/format.md:
tally numbers them in the order the stacks meet them, each once, and a reader
may rely on neither); to-binary writes them sorted by (image, offset), each
once.

A text file is printed or left as it is (text and to-text: tally reads the
text layouts of every version), and parsed, in the version 3 layout, only to
be made binary.  Whatever else it reads is checked (the magic, the sizes, every
reference, the reserved words, the text's every line): anything
malformed is one line on stderr naming the file, and exit 1.  Writing goes to
a temporary file renamed over the old one."""
import array
import os
import re
import struct
import sys

MAGIC = b"TALLYSTK"
HEADER = struct.Struct("<8sIIQQQ")
HEADER_TEXT = "# count:weight[,count:weight...] pid label frames (image-index:hex-offset, leaf first)\n"
U32 = (1 << 32) - 1
U64 = (1 << 64) - 1


class Bad(Exception):
    pass


def paths(arg):
    """(the stacks file, the session file beside it)"""
    if not os.path.isfile(arg):
        return os.path.join(arg, "stacks"), os.path.join(arg, "session")
    return arg, os.path.join(os.path.dirname(arg) or ".", "session")


def session_events(session):
    """the number of events the session names, or None without one"""
    try:
        with open(session, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("events:"):
                    ev = line.split(":", 1)[1].strip()
                    return len(ev.split(",")) if ev else None
    except OSError:
        return None
    return None


def ints(data, off, n, code, what):
    """n little-endian integers (array code I or Q) of data from off"""
    a = array.array(code)
    size = a.itemsize
    if size != (4 if code == "I" else 8):
        raise Bad("no %d-byte array type for %s on this machine" % (4 if code == "I" else 8, what))
    a.frombytes(data[off:off + n * size])
    if sys.byteorder != "little":
        a.byteswap()
    return a


def read_binary(path, data, nevents_session):
    """the stacks of a binary file: (nevents, [(counts, weights, pid, label, frames)])"""
    if len(data) < HEADER.size:
        raise Bad("'%s': %d bytes, shorter than the %d-byte header" % (path, len(data), HEADER.size))
    magic, nevents, res, nframes, nstacks, nrefs = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise Bad("'%s': magic %r, not %r" % (path, magic, MAGIC))
    if res != 0:
        raise Bad("'%s': the header's reserved word is %d, not 0" % (path, res))
    if nevents == 0:
        raise Bad("'%s': the header says 0 events" % path)
    if nevents_session is not None and nevents != nevents_session:
        raise Bad("'%s': the header says %d events, the session names %d" % (path, nevents, nevents_session))
    want = HEADER.size + 16 * nframes + 16 * nstacks + 16 * nevents * nstacks + 4 * nrefs
    if want != len(data):
        raise Bad("'%s': %d bytes, but its header (%d frames, %d stacks, %d events, %d refs) makes %d"
                  % (path, len(data), nframes, nstacks, nevents, nrefs, want))
    off = HEADER.size
    fw = ints(data, off, 4 * nframes, "I", path)
    off += 16 * nframes
    frames = []
    for i in range(nframes):
        img, res = fw[4 * i], fw[4 * i + 1]
        o = fw[4 * i + 2] | (fw[4 * i + 3] << 32)
        if res != 0:
            raise Bad("'%s': frame %d's reserved word is %d, not 0" % (path, i, res))
        frames.append((img, o))
    sw = ints(data, off, 4 * nstacks, "I", path)
    off += 16 * nstacks
    vals = ints(data, off, 2 * nevents * nstacks, "Q", path)
    off += 16 * nevents * nstacks
    refs = ints(data, off, nrefs, "I", path)
    out = []
    r = 0
    for s in range(nstacks):
        pid, label, n, res = sw[4 * s:4 * s + 4]
        if res != 0:
            raise Bad("'%s': stack %d's reserved word is %d, not 0" % (path, s, res))
        if n == 0:
            raise Bad("'%s': stack %d has no frames" % (path, s))
        if r + n > nrefs:
            raise Bad("'%s': stack %d's %d frames run past the %d refs" % (path, s, n, nrefs))
        fr = []
        for k in range(r, r + n):
            if refs[k] >= nframes:
                raise Bad("'%s': stack %d refers to frame %d of %d" % (path, s, refs[k], nframes))
            fr.append(frames[refs[k]])
        r += n
        v = vals[2 * nevents * s:2 * nevents * (s + 1)]
        out.append((list(v[:nevents]), list(v[nevents:]), pid, label, fr))
    if r != nrefs:
        raise Bad("'%s': its stacks use %d of the %d refs" % (path, r, nrefs))
    return nevents, out


LINE = re.compile(r"([0-9]+:[0-9]+(?:,[0-9]+:[0-9]+)*) ([0-9]+) ([0-9]+)((?: [0-9]+:[0-9a-fA-F]{1,16})+)")


def read_text(path, data, nevents_session):
    """the stacks of a text file in the version 3 layout"""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as ex:
        raise Bad("'%s': not ASCII text (byte %d)" % (path, ex.start))
    if text and not text.endswith("\n"):
        raise Bad("'%s': the last line has no newline" % path)
    nevents = nevents_session
    out = []
    for no, line in enumerate(text.split("\n")[:-1], 1):
        if not line or line.startswith("#"):
            continue
        m = LINE.fullmatch(line)
        if not m:
            raise Bad("'%s' line %d: expected 'COUNT:WEIGHT[,COUNT:WEIGHT...] PID LABEL IMAGE:OFFSET...': %r"
                      % (path, no, line[:200]))
        cw = [tuple(int(x) for x in p.split(":")) for p in m.group(1).split(",")]
        if nevents is None:
            nevents = len(cw)
        if len(cw) != nevents:
            raise Bad("'%s' line %d: %d counts, for %d events" % (path, no, len(cw), nevents))
        pid, label = int(m.group(2)), int(m.group(3))
        fr = []
        for f in m.group(4).split():
            img, o = f.split(":")
            fr.append((int(img), int(o, 16)))
        if (any(c > U64 or w > U64 for c, w in cw) or pid > U32 or label > U32
                or any(img > U32 for img, _ in fr)):
            raise Bad("'%s' line %d: a number too large for the binary layout" % (path, no))
        out.append(([c for c, _ in cw], [w for _, w in cw], pid, label, fr))
    if nevents is None:
        raise Bad("'%s': no stacks, and the session names no events" % path)
    return nevents, out


def write_text(stacks):
    parts = [HEADER_TEXT]
    for counts, weights, pid, label, fr in stacks:
        parts.append("%s %d %d %s\n" % (",".join("%d:%d" % cw for cw in zip(counts, weights)), pid, label,
                                        " ".join("%d:%x" % f for f in fr)))
    return "".join(parts).encode("ascii")


def write_binary(nevents, stacks):
    frames = sorted(set(f for s in stacks for f in s[4]))
    num = {f: i for i, f in enumerate(frames)}
    nrefs = sum(len(s[4]) for s in stacks)
    out = [HEADER.pack(MAGIC, nevents, 0, len(frames), len(stacks), nrefs)]
    out += [struct.pack("<IIQ", img, 0, o) for img, o in frames]
    out += [struct.pack("<IIII", pid, label, len(fr), 0) for _, _, pid, label, fr in stacks]
    out += [struct.pack("<%dQ" % (2 * nevents), *(c + w)) for c, w, _, _, _ in stacks]
    refs = array.array("I", [num[f] for s in stacks for f in s[4]])
    if sys.byteorder != "little":
        refs.byteswap()
    out.append(refs.tobytes())
    return b"".join(out)


def load(arg, parse_text):
    """(stacks path, is binary, nevents, stacks, raw bytes); a text file's
    stacks only when parse_text (else None: it is taken as it is)"""
    path, session = paths(arg)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as ex:
        raise Bad("cannot read '%s': %s" % (path, ex.strerror))
    nev = session_events(session)
    if data.startswith(MAGIC):
        return (path, True) + read_binary(path, data, nev) + (data,)
    if b"\0" in data:
        raise Bad("'%s': neither binary (its first bytes %r are not the magic %r) nor text (a NUL byte at %d)"
                  % (path, data[:8], MAGIC, data.index(b"\0")))
    if not parse_text:
        return path, False, nev, None, data
    return (path, False) + read_text(path, data, nev) + (data,)


def replace(path, data):
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        mode = os.stat(path).st_mode & 0o7777
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except OSError as ex:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise Bad("cannot write '%s': %s" % (path, ex.strerror))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("text", "to-text", "to-binary"):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        sys.exit(2)
    cmd, arg = sys.argv[1], sys.argv[2]
    try:
        # a text file is printed or left as it is (tally reads it, in any
        # layout); it is parsed only to be made binary
        path, binary, nevents, stacks, data = load(arg, cmd == "to-binary")
        if cmd == "text":
            out = write_text(stacks) if binary else data
            sys.stdout.buffer.write(out)
        elif cmd == "to-text":
            if binary:
                replace(path, write_text(stacks))
        elif not binary:
            replace(path, write_binary(nevents, stacks))
    except Bad as ex:
        sys.stderr.write("stacks.py: %s\n" % ex)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(1)


if __name__ == "__main__":
    main()
