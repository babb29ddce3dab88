# The profile of known shape the flame-graph tests share (t1340, t1341),
# sourced after lib.sh.

# shape_db DB: writes stacks.txt, the folded stacks of a known shape (main
# calls parse, eval and emit; hash is called from all three and calls mix
# from two of them; one 1-sample stack is 195 frames deep), and the database
# DB holding exactly them (gen-stacksdb.py)
shape_db() {
	local deep="_start;main;deep" i
	cat >stacks.txt <<'EOF'
_start;main;parse;lex 750
_start;main;parse;hash 150
_start;main;parse;hash;mix 100
_start;main;eval;hash 300
_start;main;eval;hash;mix 200
_start;main;eval;work 1250
_start;main;emit;hash 125
_start;main;emit 125
EOF
	for i in $(seq -w 0 191); do deep+=";rec_$i"; done
	echo "$deep 1" >>stacks.txt
	python3 "$SRCDIR/tests/e2e/gen-stacksdb.py" "$1" <stacks.txt >gen.out || fail "gen-stacksdb.py: $(cat gen.out)"
}
