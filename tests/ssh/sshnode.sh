#!/bin/sh
# A simulated node for tests and benchmarks: a real OpenSSH sshd on a loopback address, whose
# only command is rackpilot-agent, with its own host key, agent config and a fake /proc+/sys
# tree (a captured fixture with this node's MAC and boot id). Recipe: ../shared/docs/sshd-peer.md.
#
#   sshnode.sh start  DIR ADDR PORT URL BOOTSTRAP_TOKEN MAC AGENT [FIXTURE]
#   sshnode.sh stop   DIR           # the listener and its sessions' sshd processes, not the agent
#   sshnode.sh restart DIR          # stop, then start again with the same host key
#   sshnode.sh rekey  DIR           # stop, make a new host key, start (an impostor at the address)
#
# DIR gets: hostkey(.pub), authorized_keys (filled by the agent's registration), sshd_config,
# sshd.pid, sshd.log, agent.conf, agent-cmd (the ForceCommand), reboot.sh, root/, state/; the
# agent's steps find DIR/bin first on their PATH (a test's stand-in tools).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:?usage: sshnode.sh start|stop|restart|rekey DIR ...}
dir=${2:?DIR}

launch() {
	mkdir -p /run/sshd
	/usr/sbin/sshd -t -f "$dir/sshd_config"
	/usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
	# sshd writes its pid file once it listens.
	i=0
	while [ ! -s "$dir/sshd.pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	[ -s "$dir/sshd.pid" ] || { echo "sshnode: sshd did not start" >&2; cat "$dir/sshd.log" >&2; exit 1; }
}

# Every sshd below the listener (per-connection monitors and session processes), then the
# listener: the sessions' commands lose their channel but keep running, as after a network drop.
halt() {
	[ -s "$dir/sshd.pid" ] || return 0
	top=$(cat "$dir/sshd.pid")
	pids=$top
	todo=$top
	while [ -n "$todo" ]; do
		next=""
		for p in $todo; do
			for c in $(pgrep -P "$p" 2>/dev/null || true); do
				next="$next $c"
			done
		done
		for c in $next; do
			[ "$(cat /proc/$c/comm 2>/dev/null)" = sshd ] && pids="$pids $c"
		done
		todo=$next
	done
	kill $pids 2>/dev/null || true
	i=0
	while kill -0 "$top" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	rm -f "$dir/sshd.pid"
}

case "$cmd" in
start)
	addr=${3:?ADDR} port=${4:?PORT} url=${5:?URL} token=${6:?TOKEN} mac=${7:?MAC}
	agent=${8:?AGENT} fixture=${9:-$here/../fixtures/inventory/vm}
	mkdir -p "$dir/state"
	dir=$(cd "$dir" && pwd)
	[ -f "$dir/hostkey" ] || ssh-keygen -q -t ed25519 -N '' -C "$(basename "$dir")" -f "$dir/hostkey"
	: > "$dir/authorized_keys"
	chmod 600 "$dir/authorized_keys"
	rm -rf "$dir/root"
	cp -a "$fixture" "$dir/root"
	# Only the first physical NIC's address is this node's; others get derived ones.
	n=0
	for a in "$dir"/root/sys/class/net/*/address; do
		[ -f "$a" ] || continue
		case "$(readlink "$(dirname "$a")" 2>/dev/null || true)" in */virtual/*) continue ;; esac
		if [ $n -eq 0 ]; then echo "$mac" > "$a"; else printf '%s:%02x\n' "${mac%:*}" $((0x${mac##*:} ^ (n * 16))) > "$a"; fi
		n=$((n + 1))
	done
	# Simulated disks must never name a device of this machine (a deploy or release would
	# write to it): sda, vda, nvme0n1 become rpsim0, rpsim1...
	n=0
	for b in "$dir"/root/sys/block/*; do
		[ -e "$b" ] || [ -L "$b" ] || continue
		mv "$b" "$dir/root/sys/block/rpsim$n"
		n=$((n + 1))
	done
	mkdir -p "$dir/root/proc/sys/kernel/random"
	cat /proc/sys/kernel/random/uuid > "$dir/root/proc/sys/kernel/random/boot_id"
	basename "$dir" > "$dir/root/proc/sys/kernel/hostname"
	: > "$dir/root/proc/cmdline"
	# The sockets are this machine's: a shell step's ready_port watches them.
	[ -e "$dir/root/proc/net" ] || ln -s /proc/net "$dir/root/proc/net"
	cat > "$dir/agent.conf" <<CONF
url = $url
bootstrap_token = $token
state_dir = $dir/state
root = $dir/root
ssh_host_key = $dir/hostkey.pub
ssh_address = $addr
ssh_port = $port
authorized_keys = $dir/authorized_keys
reboot_command = $dir/reboot.sh
CONF
	# What rackpilotd asks for is "rackpilot-agent run-steps --job ID"; this node runs its
	# agent with its own config instead of a system-wide one.
	cat > "$dir/agent-cmd" <<CMD
#!/bin/sh
set -- \$SSH_ORIGINAL_COMMAND
[ "\$1" = rackpilot-agent ] || { echo "only rackpilot-agent runs here" >&2; exit 126; }
shift
# Stand-in tools a test puts in DIR/bin (ib_write_bw, all_reduce_perf) come first.
PATH=$dir/bin:\$PATH
export PATH
exec $agent -c $dir/agent.conf "\$@"
CMD
	# A reboot: the machine comes back with a new boot id and its agent heartbeats.
	cat > "$dir/reboot.sh" <<CMD
#!/bin/sh
sleep 1
cat /proc/sys/kernel/random/uuid > $dir/root/proc/sys/kernel/random/boot_id
echo rebooted >> $dir/reboots
exec $agent -c $dir/agent.conf heartbeat > $dir/reboot-heartbeat.log 2>&1
CMD
	chmod 755 "$dir/agent-cmd" "$dir/reboot.sh"
	cat > "$dir/sshd_config" <<CONF
Port $port
ListenAddress $addr
HostKey $dir/hostkey
AuthorizedKeysFile $dir/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
ForceCommand $dir/agent-cmd
PidFile $dir/sshd.pid
LogLevel ERROR
MaxStartups 100:30:200
CONF
	launch
	;;
stop)
	halt
	;;
restart)
	halt
	launch
	;;
rekey)
	halt
	rm -f "$dir/hostkey" "$dir/hostkey.pub"
	ssh-keygen -q -t ed25519 -N '' -C impostor -f "$dir/hostkey"
	launch
	;;
*)
	echo "sshnode: unknown command $cmd" >&2
	exit 2
	;;
esac
