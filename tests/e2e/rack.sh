#!/bin/bash
# rack.sh - a "rack in a box" for Rackpilot's end-to-end test, in its own network namespace.
#
#   rack.sh up                 build the rack (as root); returns once every BMC answers
#   rack.sh down               stop every recorded process, delete the namespace (logs stay)
#   rack.sh status             namespace, processes, power and boot device of each VM
#   rack.sh ipmi N ARGS...     ipmitool (lanplus, cipher suite 3) against VM N's BMC
#   rack.sh exec CMD...        run CMD inside the namespace (curl, ssh, ...)
#
# What `up` makes, all inside a new namespace (nothing touches the host's interfaces or routes):
#   - bridge br0 10.99.1.1/24 (+ fd99:1::1/64: dnsmasq's IPv6 router advertisements end iPXE's
#     ~16 s wait for IPv6 autoconfiguration), one persistent tap per VM on it;
#   - dnsmasq on br0: DHCP 10.99.1.100-199, TFTP (undionly.kpxe for plain PXE ROMs), and for iPXE
#     the boot URL (E2E_BOOT_URL); dhcp-hostsfile = WORK/dnsmasq.hosts (rackpilotd's
#     `dnsmasq_hosts`), pid file WORK/dnsmasq.pid (rackpilotd's `dnsmasq_pidfile`);
#   - per VM N a BMC: ipmi_sim on the namespace's 127.0.0.1:(E2E_IPMI_BASE+N-1), user
#     admin/password, whose chassis control (chassis-control.sh) starts and stops the VM's QEMU
#     (vm-run.sh) on tapN with the disk WORK/vmN/disk.img. VMs start powered off;
#   - per VM N the serial line: the VM's serial port is its BMC's Serial over LAN console
#     (lan.conf `sol`): sol-relay.py joins a pty (ipmi_sim's end, WORK/vmN/ttySOL-NS-vmN) and
#     the FIFOs WORK/vmN/serial.out/.in that each QEMU of the VM opens; it outlives QEMU's power
#     cycles. Every BMC loads tests/ipmi/mc_plugin.c (built into WORK/mc_plugin.so, state in
#     WORK/vmN/mc/; without it ipmi_sim crashes on libipmiconsole's SOL set-up) and
#     sol_session_plugin.c (WORK/sol_session_plugin.so: SOL traffic keeps the session alive);
#   - with E2E_LLDP_SWITCH=NAME, lldpd on the taps as the top-of-rack switch NAME: tapN is its
#     port "Ethernet1/N" (LLDP port id, subtype local; description e2e-vmN), LLDPDUs every
#     second; control socket WORK/lldpd.socket
#     (`rack.sh exec lldpcli -u WORK/lldpd.socket show neighbors`), log WORK/lldpd.log.
# Processes started later for the rack (rackpilotd, console followers) may be recorded in
# WORK/pids ("PID NAME" lines): `down` stops them too, before the rack's own. `down` only
# signals a recorded pid whose command line names WORK.
#
# Environment (defaults)
#   E2E_WORK=${TMPDIR:-/tmp}/rackpilot-e2e   state and logs; one rack per directory
#   E2E_VMS=2             number of VMs (1-50)
#   E2E_PORT=8080         rackpilotd's API port on 10.99.1.1 (HTTPS: a non-loopback address)
#   E2E_BOOT_PORT=$((E2E_PORT + 1))  its plain-HTTP boot listener (used in the default boot URL)
#   E2E_BOOT_URL=http://10.99.1.1:$E2E_BOOT_PORT/boot/ipxe?mac=${net0/mac}   what dnsmasq gives iPXE
#   E2E_IPMI_BASE=9001    UDP port of VM 1's BMC (the last at most 32767: libipmiconsole's limit)
#   E2E_VM_MEM=512        MiB per VM
#   E2E_VM_MEM_N          MiB of VM N alone (e.g. E2E_VM_MEM_3=768: a VM unlike its order)
#   E2E_LLDP_SWITCH       the switch's LLDP system name (unset: no lldpd)
#   E2E_DISK_SIZE=256M    size of each VM's (blank, sparse) disk
#   E2E_NS=rpe2e-XXXXXX   namespace name (default: random, unique per run)
#
# Per VM N (WORK/vmN/): vm.conf, lan.conf, bmc.emu, fru.bin, sim/ + sim.log (ipmi_sim), mc/
# (mc_plugin's state), ttySOL-NS-vmN + serial.out/.in + sol-relay.log (the serial line), disk.img,
# bootdev, power.log (every power/boot change), console.log (serial output, all boots; QEMU's
# chardev log), qemu.log, qemu.pid, nopxe (create it to make PXE impossible: a fault case).
# VM N: name e2e-vmN, MAC 52:54:00:e2:00:NN (hex), SMBIOS serial RPE2E00NN, UUID =
# BMC system GUID 52504532-4530-4000-8000-0000000000NN, disk serial RPE2E-DISK-N.
set -euo pipefail

HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
W=${E2E_WORK:-${TMPDIR:-/tmp}/rackpilot-e2e}
BR_IP=10.99.1.1
BMC_USER="admin"
BMC_PASSWORD="password"

die() { echo "rack.sh: $*" >&2; exit 1; }
log() { echo "rack.sh: $*" >&2; }

# ---- process bookkeeping --------------------------------------------------------------------
alive() { # pid is alive (not a zombie)
	local st=
	[ -r "/proc/$1/stat" ] || return 1
	read -r _ _ st _ 2> /dev/null < "/proc/$1/stat" || return 1
	[ "$st" != Z ] && [ "$st" != X ]
}
ours() { # pid is alive and its command line names the work directory
	alive "$1" || return 1
	# (grep without -q: with pipefail an early exit of grep -q can fail the pipeline)
	tr '\0' ' ' < "/proc/$1/cmdline" 2> /dev/null | grep -F -- "$W/" > /dev/null
}
record() { echo "$1 $2" >> "$W/pids"; }

vm_mac() { printf '52:54:00:e2:00:%02x' "$1"; }

# ---- up -------------------------------------------------------------------------------------
# FRU device 0 with a product info area (manufacturer, name, model, version, serial, asset tag),
# so a BMC "verify" can compare the serial with the enrolled one.
write_fru() { # FILE SERIAL
	python3 - "$1" "$2" << 'EOF'
import sys
path, serial = sys.argv[1], sys.argv[2]
def field(s):
    b = s.encode("ascii")
    return bytes([0xC0 | len(b)]) + b
body = bytes([1, 0, 0])  # format version, length (patched), language English
body += b"".join(field(s) for s in ("Rackpilot", "e2e-vm", "e2e-vm", "1.0", serial, "E2E")) + bytes([0xC0, 0xC1])
length = (len(body) + 1 + 7) // 8 * 8
area = bytearray(body + bytes(length - len(body) - 1))
area[1] = length // 8
area.append((-sum(area)) & 0xFF)
header = bytearray([1, 0, 0, 0, 1, 0, 0])  # product area at offset 1 (x 8 bytes)
header.append((-sum(header)) & 0xFF)
open(path, "wb").write(bytes(header) + bytes(area))
print(len(header) + len(area))
EOF
}

guid_hex() { # UUID text -> lan.conf guid (the 16 bytes reversed, as IPMI puts them on the wire)
	local s=${1//-/} out='' i
	for ((i = 30; i >= 0; i -= 2)); do out+=${s:i:2}; done
	echo "$out"
}

make_vm() { # N
	local n=$1 d=$W/vm$1 port=$((E2E_IPMI_BASE + $1 - 1)) uuid serial size mem=E2E_VM_MEM_$1
	mem=${!mem:-$E2E_VM_MEM}
	[[ $mem =~ ^[0-9]+$ ]] || die "E2E_VM_MEM_$n must be MiB"
	uuid=$(printf '52504532-4530-4000-8000-%012d' "$n")
	serial=$(printf 'RPE2E%04d' "$n")
	mkdir -p "$d/sim"
	cat > "$d/vm.conf" << EOF
NAME=e2e-vm$n
MAC=$(vm_mac "$n")
TAP=tap$n
MEM=$mem
UUID=$uuid
SERIAL=$serial
DISK_SERIAL=RPE2E-DISK-$n
BMC_PORT=$port
EOF
	rm -f "$d/disk.img" "$d/qemu.pid" "$d/qemu.prev" "$d/nopxe"
	truncate -s "$E2E_DISK_SIZE" "$d/disk.img"
	echo none > "$d/bootdev"
	: > "$d/power.log"
	: > "$d/console.log"
	size=$(write_fru "$d/fru.bin" "$serial")
	cat > "$d/bmc.emu" << EOF
mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x03 1 0x23 0x9f 32473 0x0e2e
mc_add_fru_data 0x20 0 $size file 0 "$d/fru.bin"
mc_enable 0x20
EOF
	cat > "$d/lan.conf" << EOF
name "e2e-vm$n"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 $port
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid $(guid_hex "$uuid")
  endlan
  chassis_control "/bin/sh $HERE/chassis-control.sh $d"
  sol "$d/$(sol_tty "$n")" 115200 nortscts
  user 2 true "$BMC_USER" "$BMC_PASSWORD" admin 10 none md2 md5 straight
loadlib "$W/mc_plugin.so" "$d/mc"
loadlib "$W/sol_session_plugin.so" "e2e"
EOF
	ip -n "$NS" tuntap add dev "tap$n" mode tap
	ip -n "$NS" link set "tap$n" master br0
	ip -n "$NS" link set "tap$n" up
	start_sol_relay "$n"
	ip netns exec "$NS" ipmi_sim -c "$d/lan.conf" -f "$d/bmc.emu" -s "$d/sim" -n \
		< /dev/null > "$d/sim.log" 2>&1 &
	record $! "ipmi_sim-vm$n"
}

# VM N's serial port is its BMC's SOL console: sol-relay.py holds a pty (the BMC's end, lan.conf
# `sol`) and two FIFOs that each QEMU of the VM opens (vm-run.sh); all outlive QEMU's power
# cycles. The pty link's name is unique per rack: ipmi_sim takes the UUCP lock
# /var/lock/LCK..<its basename>, which every rack on the host shares.
sol_tty() { echo "ttySOL-$NS-vm$1"; }
start_sol_relay() { # N
	local d=$W/vm$1 i
	rm -f "$d/$(sol_tty "$1")" "$d/serial.out" "$d/serial.in"
	mkdir -p "$d/mc"
	python3 "$HERE/sol-relay.py" "$d/$(sol_tty "$1")" "$d/serial" \
		< /dev/null > "$d/sol-relay.log" 2>&1 &
	record $! "sol-relay-vm$1"
	# (the relay makes the link last, after the FIFOs)
	for i in $(seq 1 100); do [ -L "$d/$(sol_tty "$1")" ] && return 0; sleep 0.05; done
	die "sol-relay.py of vm$1 did not start: $(tail -n 5 "$d/sol-relay.log")"
}

# ipmi_sim's SOL as libipmiconsole needs it, two plug-ins built into the work directory and
# loaded by every BMC: with `sol` ipmi_sim crashes (SIGSEGV) on libipmiconsole's SOL set-up and
# answers it in ways libipmiconsole refuses, which tests/ipmi/mc_plugin.c fixes (tests/ipmi/
# README.md, "Serial over LAN"; its state files: WORK/vmN/mc/); and it drops a session whose
# console keeps printing 30 s after SOL came up, which sol_session_plugin.c fixes.
build_plugins() {
	local c
	for c in "$HERE/../ipmi/mc_plugin.c" "$HERE/sol_session_plugin.c"; do
		${CC:-cc} -O2 -Wall -fPIC -shared -o "$W/$(basename "$c" .c).so" "$c" \
			> "$W/plugins.build.log" 2>&1 ||
			die "cannot build $(basename "$c" .c).so (needs cc and libopenipmi-dev): $(tail -n 5 "$W/plugins.build.log")"
	done
}

# lldpd as the rack's switch: one port per VM tap (the exact names in -I: lldpd takes them even
# where it would skip such interfaces on its own)
start_switch() { # NAME
	local i ifs=''
	{
		echo "# lldpd as the e2e rack's top-of-rack switch (rack.sh)"
		echo "configure system hostname $1"
		echo "configure lldp tx-interval 1"
		for i in $(seq 1 "$E2E_VMS"); do
			echo "configure ports tap$i lldp portidsubtype local Ethernet1/$i description e2e-vm$i"
			ifs+=${ifs:+,}tap$i
		done
	} > "$W/lldpd-switch.conf"
	ip netns exec "$NS" lldpd -d -u "$W/lldpd.socket" -I "$ifs" -O "$W/lldpd-switch.conf" \
		< /dev/null > "$W/lldpd.log" 2>&1 &
	record $! lldpd-switch
	for i in $(seq 1 50); do
		ip netns exec "$NS" lldpcli -u "$W/lldpd.socket" show configuration 2> /dev/null |
			grep -F "Override system name with: $1" > /dev/null && return 0
		sleep 0.1
	done
	die "lldpd (switch $1) did not start: $(tail -n 5 "$W/lldpd.log")"
}

write_dnsmasq_conf() {
	local url=$1
	cat > "$W/dnsmasq.conf" << EOF
# dnsmasq for the e2e rack (rack.sh): DHCP + TFTP on br0, no DNS
port=0
interface=br0
bind-interfaces
dhcp-authoritative
dhcp-range=10.99.1.100,10.99.1.199,255.255.255.0,1h
# no ICMP probe of a new address (it costs ~3 s before every first offer)
no-ping
dhcp-leasefile=$W/dnsmasq.leases
# rackpilotd's dnsmasq_hosts: "MAC,NAME" lines, re-read on SIGHUP
dhcp-hostsfile=$W/dnsmasq.hosts
dhcp-script=$W/lease-event.sh
# iPXE (every QEMU NIC ROM, and undionly.kpxe) sends user class "iPXE"
dhcp-userclass=set:ipxe,iPXE
# a plain PXE ROM: chain-load iPXE over TFTP
dhcp-boot=tag:!ipxe,undionly.kpxe,,$BR_IP
# iPXE option 175.176 "no-pxedhcp": no ~3 s wait for ProxyDHCP offers
dhcp-option=tag:ipxe,encap:175,176,1b
# iPXE: the boot script over HTTP (iPXE expands \${net0/mac} itself)
dhcp-boot=tag:ipxe,$url
# IPv6 router advertisements only: iPXE waits for IPv6 autoconfiguration too
enable-ra
dhcp-range=fd99:1::,ra-only,64
enable-tftp
tftp-root=$W/tftp
log-dhcp
pid-file=$W/dnsmasq.pid
EOF
	cat > "$W/lease-event.sh" << EOF
#!/bin/sh
# dnsmasq dhcp-script: one line per lease event (add/old/del) and TFTP transfer
echo "\$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) \$1 \$2 \$3 \${4:-} uc=\${DNSMASQ_USER_CLASS0:-none}" >> $W/lease-events.log
EOF
	chmod 755 "$W/lease-event.sh"
}

up() {
	[ "$(id -u)" = 0 ] || die "up needs root (namespaces, taps)"
	[ -c /dev/net/tun ] || die "no /dev/net/tun"
	for t in ip ipmi_sim ipmitool dnsmasq qemu-system-x86_64 python3 ss setsid "${CC:-cc}"; do
		command -v "$t" > /dev/null || die "missing $t (see .ci/deps)"
	done
	[ -f /usr/include/OpenIPMI/serv.h ] || die "missing OpenIPMI/serv.h (apt-get install libopenipmi-dev)"
	[ -f /usr/lib/ipxe/undionly.kpxe ] || die "missing /usr/lib/ipxe/undionly.kpxe (apt-get install ipxe)"
	if [ -n "${E2E_LLDP_SWITCH:-}" ]; then
		for t in lldpd lldpcli; do command -v "$t" > /dev/null || die "missing $t (apt-get install lldpd)"; done
	fi
	E2E_VMS=${E2E_VMS:-2}
	E2E_PORT=${E2E_PORT:-8080}
	E2E_BOOT_PORT=${E2E_BOOT_PORT:-$((E2E_PORT + 1))}
	E2E_IPMI_BASE=${E2E_IPMI_BASE:-9001}
	E2E_VM_MEM=${E2E_VM_MEM:-512}
	E2E_DISK_SIZE=${E2E_DISK_SIZE:-256M}
	# shellcheck disable=SC2016  # ${net0/mac} is for iPXE
	local url='http://'$BR_IP:$E2E_BOOT_PORT'/boot/ipxe?mac=${net0/mac}'
	url=${E2E_BOOT_URL:-$url}
	if ! [[ $E2E_VMS =~ ^[0-9]+$ ]] || ((E2E_VMS < 1 || E2E_VMS > 50)); then die "E2E_VMS must be 1-50"; fi
	# libipmiconsole (rackpilotd's SOL) takes IPMI ports up to 32767 only
	if ! [[ $E2E_IPMI_BASE =~ ^[0-9]+$ ]] || ((E2E_IPMI_BASE < 1024 || E2E_IPMI_BASE + E2E_VMS - 1 > 32767)); then
		die "E2E_IPMI_BASE must be 1024-$((32768 - E2E_VMS)) (libipmiconsole takes ports up to 32767)"
	fi
	NS=${E2E_NS:-rpe2e-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')}
	[[ $NS =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || die "bad namespace name $NS"

	mkdir -p "$W"
	W=$(CDPATH='' cd -- "$W" && pwd)
	# paths go into lan.conf strings and a popen() command line
	[[ $W$HERE =~ ^[A-Za-z0-9_./-]+$ ]] || die "paths may only hold [A-Za-z0-9_./-]: $W $HERE"
	[ ! -f "$W/rack.env" ] || die "a rack is up in $W (rack.sh down first)"
	ip netns list | grep -w -- "$NS" > /dev/null && die "namespace $NS exists"
	# dnsmasq drops to "nobody" and then reads tftp/ and the hosts file
	chmod 755 "$W"
	mkdir -p "$W/tftp"
	chmod 755 "$W/tftp"
	cp /usr/lib/ipxe/undionly.kpxe "$W/tftp/"
	chmod 644 "$W/tftp/undionly.kpxe"
	rm -f "$W/pids" "$W/dnsmasq.pid" "$W/dnsmasq.leases"
	: > "$W/dnsmasq.hosts"
	chmod 644 "$W/dnsmasq.hosts"
	: > "$W/dnsmasq.log"
	: > "$W/lease-events.log"
	: > "$W/pids"

	cat > "$W/rack.env" << EOF
# written by rack.sh up; sourced by e2e.sh (lib.sh) and rack.sh down
NS=$NS
VMS=$E2E_VMS
PORT=$E2E_PORT
BOOT_PORT=$E2E_BOOT_PORT
IPMI_BASE=$E2E_IPMI_BASE
VM_MEM=$E2E_VM_MEM
DISK_SIZE=$E2E_DISK_SIZE
BR_IP=$BR_IP
BOOT_URL='$url'
BMC_USER=$BMC_USER
BMC_PASSWORD=$BMC_PASSWORD
DNSMASQ_HOSTS=$W/dnsmasq.hosts
DNSMASQ_PIDFILE=$W/dnsmasq.pid
LLDP_SWITCH=${E2E_LLDP_SWITCH:-}
EOF
	IPMI_BASE=$E2E_IPMI_BASE
	up_done=0
	trap '[ "$up_done" = 1 ] || { log "up failed; tearing down"; down; }' EXIT

	local t0=$SECONDS
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	ip -n "$NS" link add br0 type bridge stp_state 0 forward_delay 0
	ip -n "$NS" addr add "$BR_IP/24" dev br0
	ip -n "$NS" addr add fd99:1::1/64 dev br0 nodad
	ip -n "$NS" link set br0 up

	write_dnsmasq_conf "$url"
	ip netns exec "$NS" dnsmasq -C "$W/dnsmasq.conf" --log-facility="$W/dnsmasq.log"
	local i
	for i in $(seq 1 50); do [ -s "$W/dnsmasq.pid" ] && break; sleep 0.1; done
	[ -s "$W/dnsmasq.pid" ] || die "dnsmasq did not start: $(tail -n 5 "$W/dnsmasq.log")"
	record "$(cat "$W/dnsmasq.pid")" dnsmasq

	build_plugins
	for i in $(seq 1 "$E2E_VMS"); do make_vm "$i"; done
	[ -z "${E2E_LLDP_SWITCH:-}" ] || start_switch "$E2E_LLDP_SWITCH"

	# every BMC bound and answering
	local want=$E2E_VMS have=0
	for _ in $(seq 1 100); do
		have=$(ip netns exec "$NS" ss -Hlun | awk -v b="$E2E_IPMI_BASE" -v n="$E2E_VMS" '
			{ split($4, a, ":"); p = a[2] + 0 } a[1] == "127.0.0.1" && p >= b && p < b + n { c++ }
			END { print c + 0 }')
		[ "$have" -ge "$want" ] && break
		sleep 0.1
	done
	[ "$have" -ge "$want" ] || die "only $have of $want BMCs bound"
	for i in $(seq 1 "$E2E_VMS"); do
		ipmi "$i" chassis power status > /dev/null || die "BMC of vm$i does not answer"
	done
	up_done=1
	log "up in $((SECONDS - t0)) s: namespace $NS, $E2E_VMS VMs, work dir $W"
	log "boot URL for iPXE: $url"
}

# ---- down -----------------------------------------------------------------------------------
# stop_pids PID...: SIGTERM, 5 s to exit, then SIGKILL to those still ours
stop_pids() {
	(($#)) || return 0
	local p i left=("$@")
	kill -TERM "$@" 2> /dev/null || :
	for i in $(seq 1 50); do
		left=()
		for p in "$@"; do alive "$p" && left+=("$p"); done
		((${#left[@]})) || break
		sleep 0.1
	done
	for p in "${left[@]}"; do
		ours "$p" && { log "pid $p ignored SIGTERM for 5 s: SIGKILL"; kill -KILL "$p" 2> /dev/null || :; }
	done
}

down() {
	[ -f "$W/rack.env" ] || { log "no rack in $W"; return 0; }
	# shellcheck source=/dev/null
	. "$W/rack.env"
	# What was started for the rack later (rackpilotd, console followers) stops first, while the
	# BMCs still answer: rackpilotd closes its SOL sessions on the way out and waits (~45 s)
	# for BMCs that are gone.
	local later=() rack=() p name f
	if [ -f "$W/pids" ]; then
		while read -r p name; do
			[ -n "$p" ] || continue
			# lldpd retitles itself ("lldpd: monitor."): its command line no longer names W
			if ours "$p" || { [ "$name" = lldpd-switch ] && alive "$p" &&
				[ "$(ip netns identify "$p" 2> /dev/null)" = "$NS" ]; }; then
				log "stopping $name (pid $p)"
				case $name in
				dnsmasq | sol-relay-vm* | ipmi_sim-vm* | lldpd-switch) rack+=("$p") ;;
				*) later+=("$p") ;;
				esac
			fi
		done < "$W/pids"
	fi
	stop_pids "${later[@]}"
	for f in "$W"/vm*/qemu.pid "$W"/vm*/qemu.prev; do
		[ -f "$f" ] || continue
		read -r p < "$f" || continue
		[ -n "$p" ] && ours "$p" && rack+=("$p") && log "stopping QEMU of $(basename "$(dirname "$f")") (pid $p)"
	done
	stop_pids "${rack[@]}"
	rm -f "$W"/vm*/qemu.pid "$W"/vm*/qemu.prev
	# ipmi_sim's UUCP locks of the SOL ptys (left behind when it was killed)
	for f in /var/lock/LCK..ttySOL-"$NS"-vm*; do
		[ -f "$f" ] || continue
		p=
		read -r p _ < "$f" 2> /dev/null || :
		if ! [[ $p =~ ^[0-9]+$ ]] || ! alive "$p"; then rm -f "$f"; fi
	done
	if ip netns list | grep -w -- "$NS" > /dev/null; then
		# anything else still inside the namespace was started by the rack: name it, end it
		for p in $(ip netns pids "$NS" 2> /dev/null); do
			log "pid $p ($(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null | cut -c1-80)) still in $NS: SIGKILL"
			kill -KILL "$p" 2> /dev/null || :
		done
		ip netns del "$NS"
		log "namespace $NS deleted"
	fi
	mv "$W/rack.env" "$W/rack.env.down"
}

# ---- helpers --------------------------------------------------------------------------------
load_env() {
	[ -f "$W/rack.env" ] || die "no rack in $W (E2E_WORK?)"
	# shellcheck source=/dev/null
	. "$W/rack.env"
}

ipmi() { # N ARGS...
	local n=$1
	shift
	ip netns exec "$NS" ipmitool -I lanplus -C 3 -H 127.0.0.1 -p $((IPMI_BASE + n - 1)) \
		-U "$BMC_USER" -P "$BMC_PASSWORD" "$@"
}

status() {
	load_env
	echo "namespace $NS ($(ip netns list | grep -cw "$NS") present), work dir $W"
	local p name i
	while read -r p name; do
		echo "  $name pid $p $(alive "$p" && echo alive || echo gone)"
	done < "$W/pids"
	for i in $(seq 1 "$VMS"); do
		echo "  vm$i: $(ipmi "$i" chassis power status 2>&1), bootdev $(cat "$W/vm$i/bootdev")," \
			"qemu pid $(cat "$W/vm$i/qemu.pid" 2> /dev/null || echo none)"
	done
}

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
ipmi)
	load_env
	[ $# -ge 3 ] || die "usage: rack.sh ipmi N ARGS..."
	shift
	ipmi "$@"
	;;
exec)
	load_env
	shift
	exec ip netns exec "$NS" "$@"
	;;
*) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
