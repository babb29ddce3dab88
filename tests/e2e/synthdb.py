"""What gen-bigdb.py and gen-stacksdb.py share: the files of a synthetic
format 1 database around its stacks file, for one JIT image of process pid
whose perf map (written by the caller) names every function."""
import os


def write_rest(out, pid, image_id, leaf, total, tool, command, randomized, max_stack, duration):
    """The image's .prof (leaf: offset -> samples, total of them), images,
    tasks and session."""
    with open(os.path.join(out, "jit-%s-%d.prof" % (image_id, pid)), "w") as f:
        f.write("format-version: 1\nimage: jit\npath: /tmp/perf-%d.map\nimage-id: %s\nid-kind: xxh64\n"
                "kind: jit\nindex: 0\nevents: cpu-clock\nsamples: %d\n\n" % (pid, image_id, total))
        for off in sorted(leaf):
            f.write("%x %d\n" % (off, leaf[off]))
    with open(os.path.join(out, "images"), "w") as f:
        f.write("# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n")
        f.write("0\tjit\t%s\txxh64\t%d\tjit\t/tmp/perf-%d.map\n" % (image_id, pid, pid))
    with open(os.path.join(out, "tasks"), "w") as f:
        f.write("%d\tsynthetic\t/usr/bin/synthetic\n" % pid)
    with open(os.path.join(out, "session"), "w") as f:
        f.write("format-version: 1\ntool: %s\nhost: synthetic\ntarget: command\n"
                "command: %s\nevents: cpu-clock\nsampling: frequency 999\nrandomized: %s\n"
                "per-pid: no\ncall-graph: fp\nmax-stack: %d\nstart-time: 2026-01-01T00:00:00Z\n"
                "duration: %s\nsamples: %d\nlost: 0\nthrottled: 0\nimages: 1\n"
                % (tool, command, "yes" if randomized else "no", max_stack, duration, total))
