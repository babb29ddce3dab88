#!/bin/bash
# export --format folded --comm-root on a per-pid database where a sampled
# process has an empty command name (a real daemon epoch had one) crashed on
# a NULL root label.  That process's stacks are now rooted at '[pid N]', as a
# process missing from the task list is, and every sample is still there.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g --per-pid -F 2000 -o good -- "$WORKLOADS/split_funcs" 300
pid=$(awk -F'\t' '$3 ~ /split_funcs$/ { print $1; exit }' good/tasks)
[[ -n $pid ]] || fail "split_funcs is not in the task list: $(cat good/tasks)"
cp -a good blank.db
awk -F'\t' -v OFS='\t' -v pid="$pid" '$1 == pid { $2 = "" } { print }' good/tasks >blank.db/tasks
grep -qP "^$pid\t\t" blank.db/tasks || fail "could not blank the comm of $pid: $(cat blank.db/tasks)"

tally_ok export -i blank.db --format folded --comm-root -o "$TMP/blank.folded"
grep -q "^\[pid $pid\];" blank.folded || fail "no stack rooted at '[pid $pid]': $(head -5 blank.folded)"
grep -q '^;' blank.folded && fail "a stack with an empty root frame: $(grep '^;' blank.folded | head -3)"
# the same samples as the intact database, only the root's name differs
tally_ok export -i good --format folded --comm-root -o "$TMP/good.folded"
sum() { awk '{ s += $NF } END { print s + 0 }' "$1"; }
[[ $(sum blank.folded) == $(sum good.folded) && $(sum good.folded) -gt 0 ]] ||
	fail "blank.db's stacks hold $(sum blank.folded) samples, good's $(sum good.folded)"
note "$(sum blank.folded) samples, rooted at [pid $pid]"
