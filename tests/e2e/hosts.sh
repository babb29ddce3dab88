# Test hosts for the remote tests (t15xx), sourced after lib.sh.
#
# make_hosts N makes N hosts h1..hN on this machine, each one a network
# namespace of its own with only a loopback, running OpenSSH's sshd on its
# 127.0.0.1:22, in a mount namespace of its own where /tmp is a fresh tmpfs
# (what a host installs there is its own), the home directory (root's, where sshd logs in) is
# an empty tmpfs of its own (a fresh host's: this machine's own shell startup
# files, which every ssh command runs, are not the host's) and
# /proc/sys/kernel/random/boot_id
# reads a file of the test's ($HOSTS/hN/boot_id: write a new id there and kill
# the host's agent, and the host looks rebooted). The hosts are reached through
# $HOSTS/ssh_config, whose ProxyCommand enters the namespace (ip netns exec NS
# nc 127.0.0.1 22): no address outside loopback is ever used, nothing leaves
# the machine. TALLY_SSH is set to use it. Everything is removed when the test
# ends. Needs root, ip, unshare, sshd and nc (scripts/deps.sh --test); skips
# with the reason otherwise.

HOSTS=
HOST_NS=()

make_hosts() {
	local n=$1 i ns dir
	((EUID == 0)) || skip "test hosts need root (network namespaces)"
	need_tool ip iproute2
	need_tool unshare util-linux
	need_tool nc netcat-openbsd
	need_tool ssh openssh-client
	[[ -x /usr/sbin/sshd ]] || skip "sshd is not installed (Debian package openssh-server; scripts/deps.sh --test)"
	# outside /tmp: each host mounts a tmpfs of its own there
	HOSTS=$(mktemp -d /run/tally-hosts-$$.XXXXXX) || skip "cannot make a directory under /run"
	at_exit 'remove_hosts'
	mkdir -p /run/sshd
	local rhome
	rhome=$(getent passwd root | cut -d: -f6)
	[[ -d $rhome ]] || skip "root's home directory '$rhome' is missing"
	ssh-keygen -q -t ed25519 -N '' -f "$HOSTS/client_key" -C tally-test || fail "ssh-keygen failed"
	cp "$HOSTS/client_key.pub" "$HOSTS/authorized_keys"
	: >"$HOSTS/ssh_config"
	for ((i = 1; i <= n; i++)); do
		ns=tally-$$-h$i
		dir=$HOSTS/h$i
		mkdir -p "$dir"
		ip netns add "$ns" 2>"$dir/netns.err" || skip "cannot create a network namespace: $(cat "$dir/netns.err")"
		HOST_NS+=("$ns")
		ip -n "$ns" link set lo up || fail "cannot bring up the loopback of $ns"
		ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key" -C "h$i" || fail "ssh-keygen failed"
		cat /proc/sys/kernel/random/boot_id >"$dir/boot_id"
		cat >"$dir/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port 22
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $HOSTS/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
EOF
		ip netns exec "$ns" unshare -m --propagation private sh -c \
			'mount -t tmpfs -o mode=1777 tmpfs /tmp && mount -t tmpfs -o mode=0700 tmpfs "$2" && mount --bind "$1/boot_id" /proc/sys/kernel/random/boot_id &&
			 exec /usr/sbin/sshd -D -f "$1/sshd_config" -E "$1/sshd.log"' sh "$dir" "$rhome" >"$dir/start.err" 2>&1 &
		track_pid $!
		cat >>"$HOSTS/ssh_config" <<EOF
Host h$i
  HostName h$i
  User root
  IdentityFile $HOSTS/client_key
  IdentitiesOnly yes
  UserKnownHostsFile $HOSTS/known_hosts
  StrictHostKeyChecking accept-new
  BatchMode yes
  ConnectTimeout 10
  ProxyCommand ip netns exec $ns nc 127.0.0.1 22
EOF
	done
	export TALLY_SSH="ssh -F $HOSTS/ssh_config"
	# each sshd listens before the test goes on
	for ((i = 1; i <= n; i++)); do
		local k
		for ((k = 0; k < 100; k++)); do
			ssh -F "$HOSTS/ssh_config" "h$i" true 2>/dev/null && break
			sleep 0.1
		done
		((k < 100)) || fail "test host h$i does not answer: $(cat "$HOSTS/h$i/start.err" "$HOSTS/h$i/sshd.log" 2>/dev/null | head -5)"
	done
}

# host_sh HOST CMD: runs CMD on the host (through the test's ssh config).
host_sh() {
	ssh -F "$HOSTS/ssh_config" "$1" "$2"
}

# host_as_other HOST CMD: runs CMD on the host as another local user of it
# ('nobody', uid 65534, through setpriv): the unprivileged user of a host who
# plants things there for the ssh user (root) to run.
host_as_other() {
	need_tool setpriv util-linux
	local q=${2//\'/\'\\\'\'}
	host_sh "$1" "setpriv --reuid=65534 --regid=65534 --clear-groups -- sh -c '$q'"
}

remove_hosts() {
	local i ns
	for ((i = 1; i <= ${#HOST_NS[@]}; i++)); do
		[[ -s $HOSTS/h$i/sshd.pid ]] && kill "$(cat "$HOSTS/h$i/sshd.pid")" 2>/dev/null
	done
	for ns in "${HOST_NS[@]}"; do
		# whatever still runs in it (agents) goes with it
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
		ip netns del "$ns" 2>/dev/null
	done
	[[ -n $HOSTS ]] && rm -rf "$HOSTS"
}
