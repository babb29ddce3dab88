# func_weights.py DB BINARY FUNC...: per function of BINARY (its range from nm), the
# samples and the weights its format 3 or 4 .prof files in DB hold: "FUNC SAMPLES WEIGHT".
import struct, sys, glob, subprocess
# usage: fw.py DB BINARY FUNC... -> per function: samples weight
db, binary, funcs = sys.argv[1], sys.argv[2], sys.argv[3:]
data = open(binary, 'rb').read()
phoff, = struct.unpack_from('<Q', data, 0x20)
phentsize, phnum = struct.unpack_from('<HH', data, 0x36)
loads = []
for i in range(phnum):
    p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz = struct.unpack_from('<IIQQQQ', data, phoff + i * phentsize)
    if p_type == 1:
        loads.append((p_offset, p_vaddr, p_filesz))
syms = {}
for line in subprocess.run(['nm', '--defined-only', binary], capture_output=True, text=True).stdout.splitlines():
    a, t, n = line.split()[:3]
    if t in 'tT':
        syms[n] = int(a, 16)
addrs = sorted(syms.values())
ranges = {}
for f in funcs:
    lo = syms[f]
    hi = min([a for a in addrs if a > lo] or [lo + 4096])
    ranges[f] = (lo, hi)
name = binary.rsplit('/', 1)[1]
out = {f: [0, 0] for f in funcs}
for path in glob.glob(db + '/' + name + '-*.prof'):
    lines = open(path).read().split('\n')
    hdr = {}
    i = 0
    while lines[i]:
        k, v = lines[i].split(': ', 1)
        hdr[k] = v
        i += 1
    # format 3 and 4 (4: the same .prof files, binary stacks)
    assert hdr.get('format-version') in ('3', '4'), path + ': not format 3 or 4'
    for l in lines[i + 1:]:
        if not l:
            continue
        c = l.split()
        off, n, w = int(c[0], 16), int(c[1]), int(c[2])
        va = next((off - o + v for o, v, s in loads if o <= off < o + s), off)
        for f, (lo, hi) in ranges.items():
            if lo <= va < hi:
                out[f][0] += n
                out[f][1] += w
for f in funcs:
    print(f, out[f][0], out[f][1])
