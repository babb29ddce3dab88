#!/usr/bin/env bash
# Every command's help, man page and completion come from the option table that
# parses its options: each command listed by --list-cmds has --help (the same
# as 'tally help CMD'), a man page that groff reads without a warning, a
# section in docs/cli.md that names each of its options, and completion.
. "$(dirname "$0")/lib.sh"

cmds=$("$TALLY" --list-cmds)
[[ -n $cmds ]] || fail "--list-cmds printed nothing"
for c in $cmds; do
	"$TALLY" "$c" --help >h1 2>h1.err || fail "'tally $c --help' exited non-zero: $(cat h1.err)"
	[[ ! -s h1.err ]] || fail "'tally $c --help' wrote to stderr: $(cat h1.err)"
	head -n1 h1 | grep -Eq "^usage: tally $c( |$)" || fail "'tally $c --help' does not start with its usage: $(head -n1 h1)"
	grep -q '%%' h1 && fail "'tally $c --help' prints a literal %%"
	"$TALLY" help "$c" >h2 || fail "'tally help $c' exited non-zero"
	cmp -s h1 h2 || fail "'tally help $c' differs from 'tally $c --help'"
	grep -Eq "^## tally $c( |$)" "$SRCDIR/docs/cli.md" || fail "docs/cli.md has no section '## tally $c'"
	"$TALLY" help --man "$c" >"tally-$c.1" || fail "'tally help --man $c' exited non-zero"
	grep -q "^.TH TALLY-${c^^} 1" "tally-$c.1" || fail "the man page of $c has no .TH line"
	if command -v groff >/dev/null; then
		groff -man -Tutf8 -ww -z "tally-$c.1" 2>groff.err || fail "groff refused the man page of $c"
		[[ ! -s groff.err ]] || fail "groff warns on the man page of $c: $(head -c 500 groff.err)"
	fi
	# docs/cli.md's section of the command names every long option its help shows
	awk -v h="## tally $c" 'index($0, h) == 1 { on = 1; next } /^## / { on = 0 } on' "$SRCDIR/docs/cli.md" >section
	for o in $(grep -Eo -- '--[a-z][a-z0-9-]*' h1 | grep -vx -- --help | sort -u); do
		grep -q -- "$o" section || fail "docs/cli.md's section of $c does not mention $o (its --help does)"
	done
done
note "every command: --help, help CMD, man page, docs/cli.md section naming every option"

"$TALLY" help --man >tally.1 || fail "'tally help --man' exited non-zero"
for c in $cmds; do
	grep -q "tally\\\\-$c" tally.1 || fail "tally(1) does not list $c"
done
"$TALLY" help nosuch >/dev/null 2>err && fail "'tally help nosuch' exited 0"
grep -q "unknown command 'nosuch'" err || fail "'tally help nosuch': $(cat err)"

# bash completion: commands, then options, a file after an option with a value
"$TALLY" help --completion >tally.bash || fail "'tally help --completion' exited non-zero"
complete_words() {
	bash -c '. ./tally.bash; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tally; printf "%s\n" "${COMPREPLY[@]}"' _ "$@"
}
[[ $(complete_words tally rec) == record ]] || fail "completion of 'tally rec': $(complete_words tally rec)"
[[ $(complete_words tally record --fr) == --freq ]] || fail "completion of 'tally record --fr': $(complete_words tally record --fr)"
# (grep -q would stop reading at the first line, and under pipefail the
# printf that writes the rest would fail the pipeline with SIGPIPE)
complete_words tally export --debug | grep -x -- --debug-dir >/dev/null || fail "export does not complete --debug-dir"
touch some-output.db
[[ $(complete_words tally record -o some-out) == some-output.db ]] || fail "completion after -o is not a file name"
note "completion: commands, options, file names after a valued option"

# ctl's help names every control command the daemon's parser knows
for w in start stop clear startclr flush epoch status cpus drain; do
	"$TALLY" ctl --help | grep -E "^  $w( |$)" >/dev/null || fail "'tally ctl --help' does not list '$w'"
	"$TALLY" --help | grep "^  ctl " >/dev/null || fail "'tally --help' does not list ctl"
done
note "ctl's help lists every control command"
