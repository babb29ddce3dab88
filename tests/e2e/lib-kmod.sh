# The kernel-module fixture of t0508 and t1007, sourced after lib.sh: this
# machine's kernel has no loadable modules (no /proc/modules), so sourcing
# builds one here as the kernel builds one (gcc -c, ld -r --build-id) into
# src/tallymod.ko, or skips the test when it cannot; it sets where each
# function is (A, B, C and their sizes), the sampled offsets (AOFF: inside the
# inlined mix of hot_a; BOFF, COFF), the source lines binutils' addr2line gives
# for them (LA, LB, LC, LA_OUTER: the expected answers, never tally's), and
# defines write_db DIR MODULE-BUILD-ID [B-SHIFT], which writes a database by
# hand in the documented format (docs/format.md) with the module's samples.
command -v addr2line >/dev/null || skip "addr2line (binutils) is not installed"
REL=tally-test-$$
ID=5e1f00d0c0ffee0123456789abcdef0123456789
KID=1111111111111111111111111111111111111111

mkdir src
cat >src/tallymod.c <<EOF
static inline __attribute__((always_inline)) unsigned long mix(unsigned long x)
{
	x ^= x >> 7;
	x *= 2654435761u;
	return x ^ (x >> 13);
}
__attribute__((noinline)) unsigned long hot_a(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += mix(i);
	return s;
}
__attribute__((noinline)) unsigned long hot_b(unsigned long n)
{
	unsigned long s = 1;
	for (unsigned long i = 0; i < n; i++)
		s = s * 31 + i;
	return s;
}
__attribute__((noinline, section(".text.unlikely"))) unsigned long cold_c(unsigned long n)
{
	return n * 3 + 1;
}
__attribute__((section(".modinfo"), used)) static const char vermagic[] = "vermagic=$REL SMP preempt mod_unload";
EOF
build_ko() { # OUT BUILD-ID
	gcc -g -O2 -mcmodel=kernel -fno-pie -fno-pic -ffreestanding -fno-stack-protector -nostdlib \
		-fno-asynchronous-unwind-tables -c src/tallymod.c -o src/tallymod.o &&
		ld -r --build-id=0x"$2" src/tallymod.o -o "$1"
}
build_ko src/tallymod.ko "$ID" 2>build.err || skip "cannot build a kernel-style module here: $(head -c 300 build.err)"

# where each function is in the .ko: section-relative (ET_REL)
sym() { nm -S src/tallymod.ko | awk -v n="$1" '$4 == n { print $'"$2"' }'; }
A=$((16#$(sym hot_a 1))) AS=$((16#$(sym hot_a 2)))
B=$((16#$(sym hot_b 1))) BS=$((16#$(sym hot_b 2)))
C=$((16#$(sym cold_c 1))) CS=$((16#$(sym cold_c 2)))
# an instruction of hot_a inside the inlined mix (addr2line -i shows two frames)
a2l() { addr2line -f -i -j "$1" -e src/tallymod.ko "$(printf '0x%x' "$2")"; }
AOFF=
for ((o = A; o < A + AS; o++)); do
	if a2l .text "$o" | head -1 | grep -qx mix; then AOFF=$o; break; fi
done
[[ -n $AOFF ]] || skip "the compiler left no instruction of the inlined helper in hot_a"
BOFF=$((B + BS / 2)) COFF=$((C + CS / 2))
# a source line as addr2line gives it (innermost frame), discriminator cut
line_of() { a2l "$1" "$2" | sed -n 2p | sed 's/ (discriminator.*//'; }
LA=$(line_of .text "$AOFF") LB=$(line_of .text "$BOFF") LC=$(line_of .text.unlikely "$COFF")
LA_OUTER=$(a2l .text "$AOFF" | sed -n 4p | sed 's/ (discriminator.*//')
note "expected: hot_a+$((AOFF - A)) $LA (inlined mix, called at $LA_OUTER), hot_b $LB, cold_c $LC"

# the running kernel put .text and .text.unlikely apart
TEXT=$((16#ffffffffc0a04000)) UNLIKELY=$((16#ffffffffc0a09000))
hex() { printf '%x' "$1"; }
write_db() { # DIR MODULE-BUILD-ID ('-' for none) [B-SHIFT]
	local d=$1 bid=$2 shift=${3:-0}
	mkdir -p "$d"
	printf 'format-version: 1\ntool: tally 0.1.0\nkernel-release: %s\narch: x86_64\nevents: cpu-clock\nsampling: frequency 1000\nper-pid: no\ncall-graph: none\nsamples: 100\nlost: 0\n' "$REL" >"$d/session"
	printf '# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n0\tkernel\t%s\tbuild-id\t0\tkernel\t[kernel]\n' $KID >"$d/images"
	{
		printf 'format-version: 1\nimage: kernel\npath: [kernel]\nimage-id: %s\nid-kind: build-id\nkind: kernel\nindex: 0\nevents: cpu-clock\nsamples: 100\n\n' $KID
		printf '%s 50\n%s 30\n%s 20\n' "$(hex $((TEXT + AOFF)))" "$(hex $((TEXT + BOFF + shift)))" "$(hex $((UNLIKELY + COFF)))" | sort
	} >"$d/kernel-$KID.prof"
	{
		echo '# address size type name [module]'
		printf '%s %x t hot_a [tallymod]\n' "$(hex $((TEXT + A)))" "$AS"
		printf '%s %x t hot_b [tallymod]\n' "$(hex $((TEXT + B + shift)))" "$BS"
		printf '%s %x t cold_c [tallymod]\n' "$(hex $((UNLIKELY + C)))" "$CS"
	} | sort >"$d/kernel.syms"
	printf '# name size address build-id\ntallymod 16384 0x%s %s\n' "$(hex $TEXT)" "$bid" >"$d/modules"
	printf '# pid\tcomm\texe\n' >"$d/tasks"
}
