#!/bin/bash
# a database whose files are not what tally wrote (another user prepared it):
# its session (or a .prof, or an epoch's session) a FIFO, a link to /dev/zero
# or a link to a secret file. Every reading command (report, --symbols,
# --html, annotate, export) returns at once with one line naming the file,
# what it is and the fix, and never prints a byte of the secret.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 999 -g -o db -- "$WORKLOADS/split_funcs" 200
mv db/session session.keep
echo 'root:$6$SECRETSALT$SECRETHASH:19000:0:99999:7:::' >secret
chmod 600 secret
prof=$(cd db && ls -- split_funcs-*.prof)

readers=(
	"report -i DB"
	"report -i DB --symbols"
	"report -i DB --html out.html"
	"annotate -i DB work_a"
	"export -i DB --format folded -o -"
	"export -i DB --format pprof -o out.pb.gz"
)

# refused DB FILE REGEX: every reader of DB fails within 10 s with one line
# naming FILE and matching REGEX; nothing it prints holds the secret
refused() {
	local db=$1 file=$2 regex=$3 r rc
	for r in "${readers[@]}"; do
		# shellcheck disable=SC2086 # the words of a reader's command line
		set -- ${r//DB/$db}
		rc=0
		timeout 10 "$TALLY" "$@" >r.out 2>r.err </dev/null || rc=$?
		((rc != 124)) || fail "'tally $*' still ran after 10 s with '$file' in the database"
		((rc != 0)) || fail "'tally $*' succeeded with '$file' in the database"
		grep -q SECRET r.out r.err && fail "'tally $*' printed the secret the link leads to: $(cat r.err)"
		(($(wc -l <r.err) == 1)) || fail "'tally $*' wrote $(wc -l <r.err) lines on stderr, expected one: $(head -c 1000 r.err)"
		grep -qF "'$file'" r.err || fail "'tally $*': the error does not name '$file': $(cat r.err)"
		grep -Eq -- "$regex" r.err || fail "'tally $*': '$(cat r.err)' does not match /$regex/"
	done
	note "$file: ${#readers[@]} readers refuse it: $(cat r.err)"
}

mkfifo db/session
refused db db/session "is a FIFO, not a regular file \(a database holds only the regular files tally wrote: record it again\)"
rm db/session
ln -s /dev/zero db/session
refused db db/session "is a symbolic link, not a regular file \(.*record it again\)"
rm db/session
ln -s "$TMP/secret" db/session
refused db db/session "is a symbolic link, not a regular file"
rm db/session

mv session.keep db/session
tally_ok report -i db
mv "db/$prof" prof.keep
ln -s "$TMP/secret" "db/$prof"
refused db "db/$prof" "is a symbolic link, not a regular file"
rm "db/$prof"
mkfifo "db/$prof"
refused db "db/$prof" "is a FIFO, not a regular file"
rm "db/$prof"
mv prof.keep "db/$prof"
tally_ok report -i db

# a daemon's database: an epoch whose session is a FIFO
mkdir ddb
printf 'format-version: 1\nlayout: epochs\n' >ddb/tally-daemon
cp -a db ddb/202601010000
rm ddb/202601010000/session
mkfifo ddb/202601010000/session
refused ddb ddb/202601010000/session "is a FIFO, not a regular file"

# what is named with -i: a FIFO or a link to /dev/zero is no database
mkfifo fifo.db
ln -s /dev/zero zero.db
for d in fifo.db zero.db; do
	readers=("report -i DB" "export -i DB --format folded -o -")
	refused "$d" "$d" "is not a tally database: it is a (FIFO|character device), not a directory"
done
