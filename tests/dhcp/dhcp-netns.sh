#!/bin/bash
# dhcp-netns.sh - docs/dnsmasq.conf, run by the real dnsmasq, with the host file rackpilotd
# keeps, answering real DHCP clients (busybox udhcpc) across a veth pair between two network
# namespaces this test creates (nothing touches the host's interfaces).
#
#   dhcp-netns.sh RACKPILOTD        (as root; exit 77 when this machine cannot run it)
#
# Checked: a PXE ROM is told to chainload iPXE over TFTP (BIOS: undionly.kpxe, UEFI: ipxe.efi)
# and the file it fetches is Debian's; iPXE is told rackpilotd's script URL; an unknown MAC gets
# the boot options only while discovery is on; enrolling a MAC reaches dnsmasq (SIGHUP) within
# a second and the lease carries the node's name; the proxy-DHCP variant of the same file offers
# no address but the boot options.
set -euo pipefail

RPD=${1:?usage: dhcp-netns.sh RACKPILOTD}
SRC=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }
# A package that is not installed: a skip on a developer's machine, a failure in CI (CI=true:
# .ci/deps installs them all).
missing() {
	[ "${CI:-}" != true ] || { echo "FAIL: $* (CI=true: .ci/deps should have installed it)"; exit 1; }
	skip "$@"
}
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
for t in dnsmasq busybox ip curl python3; do command -v "$t" > /dev/null || missing "no $t"; done
if ! [ -r /usr/lib/ipxe/undionly.kpxe ] || ! [ -r /usr/lib/ipxe/ipxe.efi ]; then missing "no ipxe package"; fi

# A chroot without its own mount namespace cannot hold network namespaces ("mount
# --make-rslave /" fails): that machine cannot run this test.
if ! { ip netns add "rpdhcp-probe-$$" && ip netns exec "rpdhcp-probe-$$" true &&
	ip netns del "rpdhcp-probe-$$"; } 2> /dev/null; then
	ip netns del "rpdhcp-probe-$$" 2> /dev/null || true
	skip "cannot create network namespaces here"
fi

W=$(mktemp -d /tmp/rp-dhcp.XXXXXX)
DB=$(sh "$(dirname "$0")/../pg/newdb.sh")
chmod 755 "$W" # dnsmasq drops privileges and must read its files
NS_S=rpdhcp-s-$$
NS_N=rpdhcp-n-$$
NET=10.99.7
PORT=$((30000 + $$ % 2000))
RPD_PID=
fail() {
	echo "dnsmasq alive: $(kill -0 "$(cat "$W/dnsmasq.pid" 2>/dev/null)" 2>&1 && echo yes)" >&2
	echo "FAIL: $*" >&2
	echo "--- dnsmasq log" >&2
	tail -n 40 "$W/dnsmasq.log" >&2 || true
	echo "--- rackpilotd log" >&2
	tail -n 20 "$W/rackpilotd.log" >&2 || true
	exit 1
}
cleanup() {
	[ -n "$RPD_PID" ] && kill "$RPD_PID" 2> /dev/null && wait "$RPD_PID" 2> /dev/null
	[ -s "$W/dnsmasq.pid" ] && kill "$(cat "$W/dnsmasq.pid")" 2> /dev/null
	ip netns del "$NS_S" 2> /dev/null
	ip netns del "$NS_N" 2> /dev/null
	[ -n "${RP_KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT

ip netns add "$NS_S"
ip netns add "$NS_N"
ip link add rpd-s$$ type veth peer name rpd-n$$
ip link set rpd-s$$ netns "$NS_S"
ip link set rpd-n$$ netns "$NS_N"
ip -n "$NS_S" link set rpd-s$$ name veth-s
ip -n "$NS_N" link set rpd-n$$ name veth-n
ip -n "$NS_S" addr add $NET.1/24 dev veth-s
ip -n "$NS_S" link set veth-s up
ip -n "$NS_S" link set lo up
ip -n "$NS_N" link set veth-n up
ip -n "$NS_N" link set lo up

# The documented file, with this test's interface, addresses and paths.
conf() { # MODE (full|nodiscovery|proxy)
	sed -e "s/10\.99\.1\./$NET./g" -e 's/\bbr0\b/veth-s/' -e "s|/var/lib/rackpilot/|$W/|" \
		-e "s|/run/rackpilot-dnsmasq.pid|$W/dnsmasq.pid|" "$SRC/docs/dnsmasq.conf" |
		if [ "$1" = nodiscovery ]; then
			sed '/^# discovery$/,+1 d'
		elif [ "$1" = proxy ]; then
			sed -e '/full DHCP (begin)/,/full DHCP (end)/ s/^\([a-z]\)/#\1/' \
				-e '/proxy-DHCP (begin)/,/proxy-DHCP (end)/ s/^#\([a-z]\)/\1/'
		else
			cat
		fi
}
start_dnsmasq() { # MODE
	[ -s "$W/dnsmasq.pid" ] && kill "$(cat "$W/dnsmasq.pid")" 2> /dev/null && sleep 0.3
	conf "$1" > "$W/dnsmasq.conf"
	dnsmasq --test -C "$W/dnsmasq.conf" 2>&1 | grep -q "syntax check OK" ||
		fail "docs/dnsmasq.conf ($1) does not pass dnsmasq --test"
	: > "$W/dnsmasq.log"
	ip netns exec "$NS_S" dnsmasq -k -C "$W/dnsmasq.conf" --log-facility="$W/dnsmasq.log" 2> "$W/dnsmasq.err" &
	sleep 0.3
}
# rackpilotd writes the host file and signals dnsmasq; it listens on the host's loopback.
start_rpd() { # DISCOVERY (true|false)
	if [ -n "$RPD_PID" ]; then
		kill "$RPD_PID"
		wait "$RPD_PID" || true
	fi
	cat > "$W/rackpilotd.conf" << EOF
[server]
discovery = $1
dnsmasq_hosts = $W/dnsmasq.hosts
dnsmasq_pidfile = $W/dnsmasq.pid
power_sync_interval = 0
EOF
	"$RPD" -c "$W/rackpilotd.conf" --data-dir "$W/data" ${DB:+--database "$DB"} --listen "127.0.0.1:$PORT" \
		>> "$W/rackpilotd.log" 2>&1 &
	RPD_PID=$!
	for _ in $(seq 50); do
		curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2> /dev/null && return 0
		sleep 0.1
	done
	fail "rackpilotd did not start"
}
api() { # METHOD PATH [BODY]
	curl -sS -X "$1" -H "Authorization: Bearer $(cat "$W/data/admin.token")" \
		-H 'Content-Type: application/json' ${3:+--data "$3"} "http://127.0.0.1:$PORT$2"
}
wait_hosts() { # PATTERN present|absent: rackpilotd's file and dnsmasq's re-read of it
	for _ in $(seq 30); do
		if [ "$2" = present ]; then grep -q -- "$1" "$W/dnsmasq.hosts" 2> /dev/null && return 0; else
			[ -e "$W/dnsmasq.hosts" ] && ! grep -q -- "$1" "$W/dnsmasq.hosts" && return 0
		fi
		sleep 0.1
	done
	fail "host file: '$1' not $2 after 3 s: $(cat "$W/dnsmasq.hosts" 2> /dev/null)"
}

cat > "$W/udhcpc.sh" << 'EOF'
#!/bin/sh
[ "$1" = bound ] && echo "BOUND ip=$ip boot_file=$boot_file siaddr=$siaddr hostname=$hostname"
exit 0
EOF
chmod 755 "$W/udhcpc.sh"
# A DHCP exchange as a PXE ROM (bios|efi) or as iPXE; prints the BOUND line.
dhcp() { # KIND
	local x=()
	case $1 in
	bios) x=(-V PXEClient:Arch:00000:UNDI:002001 -x 0x5d:0000) ;;
	efi) x=(-V PXEClient:Arch:00007:UNDI:003016 -x 0x5d:0007) ;;
	ipxe) x=(-V PXEClient:Arch:00000:UNDI:002001 -x 0x5d:0000 -x 0x4d:69505845) ;;
	esac
	ip netns exec "$NS_N" busybox udhcpc -i veth-n -n -q -f -s "$W/udhcpc.sh" -t 8 -T 1 \
		-A 1 "${x[@]}" 2> /dev/null | grep BOUND || fail "no DHCP lease ($1)"
}
expect() { # LINE PATTERN WHAT
	[[ $1 =~ $2 ]] || fail "$3: got '$1', want /$2/"
	echo "ok: $3"
}
setmac() { ip -n "$NS_N" link set veth-n address "$1"; }

: > "$W/dnsmasq.hosts"
start_rpd true
start_dnsmasq full
URL="http://$NET.1:8476/boot/ipxe\?mac=\\$\{net0/mac\}"

# --- an unknown MAC is sent to rackpilotd (discovery)
setmac 52:54:00:07:00:01
expect "$(dhcp bios)" "ip=$NET\.1[0-9][0-9] boot_file=undionly.kpxe siaddr=$NET\.1 " \
	"unknown MAC, BIOS PXE ROM, discovery on: chainload undionly.kpxe"
expect "$(dhcp efi)" "boot_file=ipxe.efi siaddr=$NET\.1 " "unknown MAC, UEFI PXE ROM: ipxe.efi"
expect "$(dhcp ipxe)" "boot_file=$URL " "unknown MAC, iPXE: rackpilotd's script URL"
# The ROM's next move, with the address it was offered (udhcpc -q leaves the link bare).
ip -n "$NS_N" addr add $NET.50/24 dev veth-n
ip netns exec "$NS_N" busybox tftp -g -r undionly.kpxe -l "$W/fetched.kpxe" $NET.1 ||
	fail "TFTP fetch of undionly.kpxe"
ip -n "$NS_N" addr flush dev veth-n
cmp -s "$W/fetched.kpxe" /usr/lib/ipxe/undionly.kpxe || fail "TFTP: undionly.kpxe differs"
echo "ok: TFTP serves Debian's undionly.kpxe byte for byte"

# --- enroll: the exact line reaches dnsmasq, and the lease carries the node's name
reads() { grep -c "read $W/dnsmasq.hosts" "$W/dnsmasq.log"; }
before=$(reads)
api POST /v1/nodes '{"name":"dhcp-n1","macs":["52:54:00:07:00:02"]}' > /dev/null
wait_hosts '^52:54:00:07:00:02,dhcp-n1$' present
for _ in $(seq 30); do
	[ "$(reads)" -gt "$before" ] && break
	sleep 0.1
done
[ "$(reads)" -gt "$before" ] ||
	fail "dnsmasq did not re-read the host file after the enrollment (SIGHUP)"
echo "ok: enrolling a MAC rewrote the host file and dnsmasq re-read it"
setmac 52:54:00:07:00:02
expect "$(dhcp ipxe)" "boot_file=$URL " "known MAC, iPXE: script URL"
for _ in $(seq 20); do grep -q " 52:54:00:07:00:02 .* dhcp-n1 " "$W/dnsmasq.leases" && break; sleep 0.1; done
grep -q " 52:54:00:07:00:02 .* dhcp-n1 " "$W/dnsmasq.leases" ||
	fail "lease file has no dhcp-n1: $(cat "$W/dnsmasq.leases")"
echo "ok: the lease carries the node's name"

# --- discovery off in rackpilotd: an unknown iPXE gets the URL, and the script boots locally
start_rpd false
setmac 52:54:00:07:00:03
expect "$(dhcp ipxe)" "boot_file=$URL " "unknown MAC, iPXE: still the script URL"
script=$(curl -fsS "http://127.0.0.1:$PORT/boot/ipxe?mac=52:54:00:07:00:03")
[[ $script == *"local disk"* && $script != *rackpilot.token* ]] ||
	fail "discovery off: the script for an unknown MAC is not a local boot: $script"
echo "ok: discovery off: rackpilotd tells an unknown machine to boot from its disk"
# --- the documented way to keep unknown machines off PXE: no discovery tag-if line
start_dnsmasq nodiscovery
expect "$(dhcp bios)" "ip=$NET\.1[0-9][0-9] boot_file= siaddr=" "no discovery line: unknown MAC, no boot file"
expect "$(dhcp ipxe)" "ip=$NET\.1[0-9][0-9] boot_file= siaddr=" "no discovery line: unknown iPXE, no URL"
setmac 52:54:00:07:00:02
expect "$(dhcp bios)" "boot_file=undionly.kpxe " "no discovery line: a known MAC still chainloads"

# --- a MAC removed from its node stops booting (after the signal)
api PATCH /v1/nodes/dhcp-n1 '{"macs":["52:54:00:07:00:04"]}' > /dev/null
wait_hosts '52:54:00:07:00:02' absent
sleep 0.3
expect "$(dhcp ipxe)" "boot_file= siaddr=" "a MAC moved off its node no longer boots"

# --- proxy-DHCP: the same file's proxy block; dnsmasq offers no address, only PXE options
start_dnsmasq proxy
setmac 52:54:00:07:00:04
cat > "$W/pxeclient.py" << 'EOF'
import os, socket, struct, sys, time, subprocess
# A PXE ROM's DISCOVER (vendor class PXEClient, arch 0; with argument "ipxe" iPXE's: user
# class iPXE), then print what the proxy offers. (udhcpc cannot: it wants an address.)
mac = bytes.fromhex("525400070004")
xid = os.urandom(4)
opts = bytes([53, 1, 1]) + bytes([60, 32]) + b"PXEClient:Arch:00000:UNDI:002001" + \
    bytes([93, 2, 0, 0, 94, 3, 1, 2, 1, 97, 17, 0]) + bytes(16) + \
    (bytes([77, 4]) + b"iPXE" if sys.argv[1:] == ["ipxe"] else b"") + bytes([255])
pkt = struct.pack("!BBBB4sHH4s4s4s4s16s64s128s4s", 1, 1, 6, 0, xid, 0, 0x8000, bytes(4),
                  bytes(4), bytes(4), bytes(4), mac + bytes(10), bytes(64), bytes(128),
                  bytes([99, 130, 83, 99])) + opts
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"veth-n")
s.bind(("0.0.0.0", 68))
s.settimeout(1)
for attempt in range(5):
    s.sendto(pkt, ("255.255.255.255", 67))
    end = time.time() + 1
    while time.time() < end:
        try:
            data = s.recv(2048)
        except socket.timeout:
            break
        if len(data) < 240 or data[4:8] != xid:
            continue
        yiaddr = socket.inet_ntoa(data[16:20])
        siaddr = socket.inet_ntoa(data[20:24])
        file = data[108:236].split(b"\0")[0].decode()
        o, i, found = data[240:], 0, {}
        while i < len(o) and o[i] != 255:
            if o[i] == 0:
                i += 1
                continue
            found[o[i]] = o[i + 2:i + 2 + o[i + 1]]
            i += 2 + o[i + 1]
        print(f"OFFER yiaddr={yiaddr} siaddr={siaddr} file={file} "
              f"vendor={found.get(60, b'').decode()} pxe43={found.get(43, b'').hex()}")
        sys.exit(0)
print("no proxy offer")
sys.exit(1)
EOF
proxy() { # KIND (rom|ipxe): the proxy's offer
	ip netns exec "$NS_N" python3 "$W/pxeclient.py" "$1" 2>&1 || fail "proxy-DHCP ($1): no offer"
}
out=$(proxy rom)
expect "$out" "^OFFER yiaddr=0\.0\.0\.0 siaddr=$NET\.1 file=undionly.kpxe vendor=PXEClient" \
	"proxy-DHCP, PXE ROM: no address, chainload undionly.kpxe from this host"
menu=$(printf 'Rackpilot' | od -An -tx1 | tr -d ' \n')
[[ $out == *"$menu"* ]] || fail "proxy-DHCP: no Rackpilot PXE menu entry: $out"
out=$(proxy ipxe)
expect "$out" "^OFFER yiaddr=0\.0\.0\.0 .*file=$URL " "proxy-DHCP, iPXE: rackpilotd's script URL"
echo "PASS: dnsmasq + rackpilotd host file: full DHCP, discovery on/off, reload, proxy-DHCP"
