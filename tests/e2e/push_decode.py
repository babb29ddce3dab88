#!/usr/bin/env python3
"""Decodes what tally push sent as OTLP (t16xx), with the real protobuf
runtime (Debian's python3-protobuf) over the module protoc makes from
lib/push/otlp.proto, the field numbers of opentelemetry-proto v1.11.0:

    push_decode.py otlp PROTO_DIR FILE

prints one JSON object: each Profile's type, unit, summed values and sample
count; the resource's attributes; the mappings' files and build-ids; the
summed first-profile values per sample attribute (key=value) and per leaf
function. It fails (exit 1, the reason on stderr) when the message breaks
the format's rules: a dictionary table without its zero value at index 0,
an index out of range, a Sample without exactly one value, the link table's
zero not 16 and 8 zero bytes.
"""
import json
import os
import subprocess
import sys
import tempfile


def load(proto_dir):
    out = tempfile.mkdtemp(prefix="tally-otlp-py-")
    subprocess.run(["protoc", "--python_out=" + out, "--proto_path=" + proto_dir,
                    os.path.join(proto_dir, "otlp.proto")], check=True)
    sys.path.insert(0, out)
    import otlp_pb2  # noqa: E402
    return otlp_pb2


def die(msg):
    sys.stderr.write("otlp: %s\n" % msg)
    sys.exit(1)


def main():
    if len(sys.argv) != 4 or sys.argv[1] != "otlp":
        die("usage: push_decode.py otlp PROTO_DIR FILE")
    pb = load(sys.argv[2])
    req = pb.ExportProfilesServiceRequest()
    req.ParseFromString(open(sys.argv[3], "rb").read())
    d = req.dictionary
    for name in ("mapping_table", "location_table", "function_table", "string_table",
                 "attribute_table", "stack_table", "link_table"):
        t = getattr(d, name)
        if not len(t):
            die("%s is empty: index 0 must hold the zero value" % name)
    if d.string_table[0] != "":
        die("string_table[0] is %r, not ''" % d.string_table[0])
    for name, zero in (("mapping_table", pb.Mapping()), ("location_table", pb.Location()),
                       ("function_table", pb.Function()), ("attribute_table", pb.KeyValueAndUnit()),
                       ("stack_table", pb.Stack())):
        if getattr(d, name)[0] != zero:
            die("%s[0] is not the zero value" % name)
    if d.link_table[0].trace_id != b"\0" * 16 or d.link_table[0].span_id != b"\0" * 8:
        die("link_table[0] is not 16 and 8 zero bytes")

    def s(i):
        if not 0 <= i < len(d.string_table):
            die("string index %d out of range" % i)
        return d.string_table[i]

    def attr(i):
        if not 0 < i < len(d.attribute_table):
            die("attribute index %d out of range" % i)
        a = d.attribute_table[i]
        v = a.value
        return s(a.key_strindex), (v.string_value if v.WhichOneof("value") == "string_value" else v.int_value)

    maps = []
    for m in d.mapping_table[1:]:
        b = [val for key, val in (attr(i) for i in m.attribute_indices) if key == "process.executable.build_id.gnu"]
        maps.append({"file": s(m.filename_strindex), "build_id": b[0] if b else ""})
    for loc in d.location_table[1:]:
        if not 0 <= loc.mapping_index < len(d.mapping_table):
            die("mapping index %d out of range" % loc.mapping_index)
        for ln in loc.lines:
            if not 0 < ln.function_index < len(d.function_table):
                die("function index %d out of range" % ln.function_index)
    for st in d.stack_table[1:]:
        for li in st.location_indices:
            if not 0 < li < len(d.location_table):
                die("location index %d out of range" % li)
    if len(req.resource_profiles) != 1:
        die("%d ResourceProfiles, tally sends one" % len(req.resource_profiles))
    rp = req.resource_profiles[0]
    res = {kv.key: kv.value.string_value for kv in rp.resource.attributes}
    profiles, by_attr, by_leaf = [], {}, {}
    for sp in rp.scope_profiles:
        for p in sp.profiles:
            total = 0
            for smp in p.samples:
                if len(smp.values) != 1:
                    die("a sample with %d values (one per Profile)" % len(smp.values))
                if not 0 < smp.stack_index < len(d.stack_table):
                    die("stack index %d out of range" % smp.stack_index)
                total += smp.values[0]
                if not profiles:
                    for i in smp.attribute_indices:
                        k, v = attr(i)
                        key = "%s=%s" % (k, v)
                        by_attr[key] = by_attr.get(key, 0) + smp.values[0]
                    locs = d.stack_table[smp.stack_index].location_indices
                    leaf = d.location_table[locs[0]] if locs else None
                    name = s(d.function_table[leaf.lines[0].function_index].name_strindex) if leaf and leaf.lines else "?"
                    by_leaf[name] = by_leaf.get(name, 0) + smp.values[0]
            profiles.append({"type": s(p.sample_type.type_strindex), "unit": s(p.sample_type.unit_strindex),
                             "sum": total, "samples": len(p.samples), "time": p.time_unix_nano,
                             "duration": p.duration_nano, "period": p.period,
                             "period_type": s(p.period_type.type_strindex)})
    print(json.dumps({"profiles": profiles, "resource": res, "mappings": maps, "attrs": by_attr, "leaves": by_leaf,
                      "scope": rp.scope_profiles[0].scope.name if rp.scope_profiles else ""}))


if __name__ == "__main__":
    main()
