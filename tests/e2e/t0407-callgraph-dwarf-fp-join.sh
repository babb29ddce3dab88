#!/bin/bash
# --call-graph dwarf with a stack copy too small for the whole stack
# (dwarf,64): the DWARF unwind stops early, the session counts it
# (dwarf-stopped-early), and on a frame-pointer build the frame-pointer chain,
# which goes further, is joined to it (docs/cli.md), so the stacks still reach
# a process root (dwarf-joined-fp counts them).
. "$SRCDIR/tests/e2e/lib.sh"

# frame pointers: the join makes up for the short copy
tally_ok record --call-graph dwarf,64 -F 2000 -o fp64 -- "$WORKLOADS/callsplit_fp" 300
tally_ok record -g -F 2000 -o fp -- "$WORKLOADS/callsplit_fp" 300
report_json fp.json -i fp --children
report_json fp64.json -i fp64 --children
rooted() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["events"][0]["unwind"]["rooted_percent"])' "$1" ||
		fail "no events[0].unwind.rooted_percent in $1"
}
rfp=$(rooted fp.json)
r64=$(rooted fp64.json)
fcmp "$rfp" '>' 95 || fail "-g on callsplit_fp: only $rfp% of the samples reached a process root"
unw=$(session_key fp64 dwarf-unwinds)
early=$(session_key fp64 dwarf-stopped-early)
joined=$(session_key fp64 dwarf-joined-fp)
[[ $unw =~ ^[0-9]+$ && $early =~ ^[0-9]+$ && $joined =~ ^[0-9]+$ ]] ||
	fail "dwarf,64: session dwarf-unwinds '$unw', dwarf-stopped-early '$early', dwarf-joined-fp '$joined' are not numbers"
fcmp "$r64" '>' 95 ||
	fail "--call-graph dwarf,64 on callsplit_fp: $r64% of the samples reached a process root (with -g: $rfp%); the frame-pointer chain should extend the short DWARF unwinds (session: dwarf-unwinds $unw, dwarf-stopped-early $early, dwarf-joined-fp $joined)"
((early * 10 >= unw * 9)) ||
	fail "--call-graph dwarf,64 on callsplit_fp: the session counts $early of $unw DWARF unwinds as stopped early; 64 bytes cannot hold leaf's stack"
((joined * 10 >= unw * 9)) ||
	fail "--call-graph dwarf,64 on callsplit_fp: the session counts $joined of $unw unwinds joined with the frame-pointer chain"
note "dwarf,64 with frame pointers: $r64% rooted; $early of $unw unwinds stopped early, $joined joined"

# no frame pointers: nothing to join, but the stops are counted
tally_ok record --call-graph dwarf,64 -F 2000 -o nofp64 -- "$WORKLOADS/callsplit_nofp" 300
unw=$(session_key nofp64 dwarf-unwinds)
early=$(session_key nofp64 dwarf-stopped-early)
[[ $unw =~ ^[0-9]+$ && $early =~ ^[0-9]+$ ]] || fail "dwarf,64: session dwarf-unwinds '$unw', dwarf-stopped-early '$early' are not numbers"
((early * 10 >= unw * 9)) ||
	fail "--call-graph dwarf,64 on callsplit_nofp: the session counts $early of $unw DWARF unwinds as stopped early; 64 bytes cannot hold leaf's stack"
note "dwarf,64 without frame pointers: $early of $unw unwinds stopped early"
