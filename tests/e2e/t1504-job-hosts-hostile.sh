#!/bin/bash
# A hostile host (docs/remote.md), one that runs what it likes in place of
# the agent and of tar: what its agent says reaches the test's status file
# and the terminal as one escaped line (no forged status lines, no escape
# sequences); a pull stream whose member declares more than the host's
# listing said (a sparse one: a few KiB that read as 64 MiB and a byte) is refused
# before anything is written for it, and nothing of it stays here.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 1
ver=$("$TALLY" --version)
inst="~/.cache/tally-profilers/${ver#tally }"
tally_ok job hosts --host h1

# no byte of a terminal escape, no BEL, in FILE
no_escapes() {
	if LC_ALL=C grep -q $'[\x1b\x07]' "$1"; then
		fail "$2: an escape sequence reached '$1': $(od -c "$1" | head -20)"
	fi
}

forged_answers() {
	# the host's 'tally' forges its answer to stop: an error on stdout with
	# two status lines of its own and escape sequences (title, clear screen)
	host_sh h1 "mv $inst/tally $inst/tally.real && cat >$inst/tally && chmod 700 $inst/tally" <<'EOF'
#!/bin/sh
case " $* " in
*" ctl "*" stop "*)
	"$(dirname "$0")/tally.real" "$@" >/dev/null 2>&1
	printf 'error forged\nGOOD exit 0 time 0.000 s\nprofiling complete\n\033]0;owned\007\033[2J'
	exit 1 ;;
esac
exec "$(dirname "$0")/tally.real" "$@"
EOF
	printf '%s\n' "profilers add cmd uptime" "run --tag forged -- true" >f.ctl
	job_rc f.ctl --host h1
	host_sh h1 "mv $inst/tally.real $inst/tally"
	local st=results/f/forged/status
	[[ -f $st ]] || fail "no status for the test: $(cat job.out job.err)"
	(($(wc -l <$st) == 2)) || fail "the test's status has $(wc -l <$st) lines, not its own 2: $(cat -A $st)"
	grep -q '^FAIL\|^GOOD' $st && head -1 $st | grep -q '^GOOD exit 0' || fail "the status line is not the job's: $(cat -A $st)"
	grep -q "host 'h1': .*\\\\x1b\]0;owned\\\\x07\\\\x1b\[2J" $st || fail "the host's answer is not quoted escaped: $(cat -A $st)"
	! grep -q '^profiling complete' $st || fail "the host forged 'profiling complete': $(cat -A $st)"
	no_escapes $st "the status file"
	no_escapes job.out "the job's output"
	no_escapes job.err "the job's errors"
	no_escapes results/f/status.json "status.json"
	note "$(tail -1 $st)"
}

sparse_member() {
	need_tool tar tar
	# a 64 MiB hole and one byte after it, in a few KiB of tar
	truncate -s 64M big
	printf x >>big
	tar --sparse -cf evil.tar big
	(($(stat -c %s evil.tar) < 65536)) || skip "this tar makes no small sparse stream"
	host_sh h1 'cat >/tmp/evil.tar' <evil.tar
	# the host's tar sends it for any results; its listing says 'big' has 1 byte
	host_sh h1 'mount -t tmpfs tmpfs /usr/local/bin && cat >/usr/local/bin/tar && chmod 755 /usr/local/bin/tar' <<'EOF'
#!/bin/sh
case " $* " in *" -c "*) exec cat /tmp/evil.tar ;; esac
exec /usr/bin/tar "$@"
EOF
	[[ $(host_sh h1 'command -v tar') == /usr/local/bin/tar ]] || skip "the test host's PATH does not put /usr/local/bin first"
	cat >plant.sh <<EOF
#!/bin/bash
ssh -F $HOSTS/ssh_config h1 'for d in ~/.cache/tally-profilers/agents/*/results/sp/iteration.*; do [ -d "\$d" ] && printf x >"\$d/big"; done; true'
EOF
	chmod +x plant.sh
	printf '%s\n' "profilers add cmd uptime" "run --tag sp -- $TMP/plant.sh" >s.ctl
	job_rc s.ctl --host h1
	host_sh h1 'umount /usr/local/bin'
	grep -q "host 'h1': refused 'big': the stream declares 67108865 bytes and the host listed 1 (nothing written)" results/s/sp/status ||
		fail "the sparse member is not refused by name: $(cat results/s/sp/status job.err)"
	[[ ! -e results/s/sp/profiling/h1/big ]] || fail "the refused member was written: $(ls -ls results/s/sp/profiling/h1)"
	local used
	used=$(du -sk results | cut -f1)
	((used < 8192)) || fail "the results take $used KiB after a refused pull"
	note "$(grep -o "refused 'big'.*written)" results/s/sp/status)"
}

subtest "what a host's agent says is quoted, escaped, on one line" forged_answers
subtest "a sparse member larger than the listing is refused before writing" sparse_member
