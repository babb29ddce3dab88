# Helpers of the off-CPU tests (t1320, t1330), sourced after lib.sh.

# session_field DB KEY N: field N (1-based) of a comma-separated session value
session_field() {
	session_key "$1" "$2" | cut -d, -f"$3"
}

# within A B PCT WHAT: |A - B| <= PCT% of B
within() {
	awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b * p / 100) }' ||
		fail "$4: tally says $1, the workload measured $2 (+/- $3%)"
	note "$4: tally $1, measured $2 (+/- $3%)"
}
