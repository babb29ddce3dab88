# Helpers for the tests of names kept through a rebuild, a merge and a
# compare (t17xx-names-*.sh), sourced after lib.sh (and lib-diff.sh for
# build_split, build_id, record_split and diff_row).

# The suite runs with the build-id cache off (tests/e2e/meson.build: no test
# reads or fills the user's own); these tests give themselves a fresh one.
use_cache() {
	export TALLY_BUILDID_CACHE="$TMP/cache"
	unset TALLY_BUILDID_CACHE_SIZE
}

# cached ID: whether the build-id cache has the image of that id (its key).
cached() {
	[[ -f $TALLY_BUILDID_CACHE/$1/image ]]
}

# wait_cached ID [SECONDS]: wait (default at most 60 s) until the build-id
# cache has the image of that id: what a recording left to copy is copied
# after it ends. Fails with the cache's listing when the bound is hit.
wait_cached() {
	local i
	for ((i = 0; i < ${2:-60} * 20; i++)); do
		cached "$1" && return 0
		sleep 0.05
	done
	fail "the build-id cache has no copy of $1 after ${2:-60} s: $("$TALLY" cache list 2>&1 | head -20)"
}
