#!/bin/sh
# chassis-control.sh - the power and boot-device model of one e2e VM, for ipmi_sim's
# `chassis_control` hook (rack.sh writes  chassis_control "/bin/sh <this> <vmdir>"  into the VM's
# lan.conf). ipmi_sim runs it through popen() for EVERY chassis request and blocks until its
# stdout closes, so QEMU is started fully detached and every answer comes at once:
#   <this> VMDIR get power|boot ...     print "power:0|1" / "boot:<dev>"
#   <this> VMDIR set power 0|1          pull the plug (SIGTERM to QEMU) / start QEMU (vm-run.sh)
#   <this> VMDIR set reset 1            power cycle in the background (the boot device is read
#                                       again, as a real firmware would at reset)
#   <this> VMDIR set shutdown 1         soft off: modelled as an immediate power off
#   <this> VMDIR set boot DEV           none|pxe|default|cdrom|bios ("default" = force disk)
#   <this> VMDIR set identify "S F"     nothing
# ipmi_sim turns a power cycle into "set power 0" and, 1 s later, "set power 1".
# Exit status other than 0 (message on stdout) makes ipmi_sim answer completion code 0xFF.
#
# VMDIR files: qemu.pid (the running QEMU), qemu.prev (the one being stopped), bootdev,
# power.log (one line per set, with the time), console.log, qemu.log. `get power` uses shell
# builtins only: it runs on every status poll.
d=$1
op=$2
if [ -z "$d" ] || [ -z "$op" ]; then echo "usage: chassis-control.sh VMDIR get|set ..."; exit 2; fi
[ -d "$d" ] || { echo "no VM directory $d"; exit 1; }
shift 2

running() { # pid is a live process; an exited one counts as dead while it waits to be reaped
	[ -r "/proc/$1/stat" ] || return 1
	_st=
	read -r _ _ _st _ 2> /dev/null < "/proc/$1/stat" || return 1
	[ "$_st" != Z ] && [ "$_st" != X ]
}

pid=
alive() { # QEMU of this VM running? sets pid
	pid=
	[ -f "$d/qemu.pid" ] && read -r pid < "$d/qemu.pid"
	[ -n "$pid" ] && running "$pid"
}

note() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) $*" >> "$d/power.log"; }

power_on() {
	alive && return 0
	# setsid + every fd redirected: ipmi_sim's popen() must see EOF now, and QEMU must not
	# die with this script's session. $! is QEMU itself (vm-run.sh execs it).
	setsid /bin/bash "${0%/*}/vm-run.sh" "$d" < /dev/null >> "$d/qemu.log" 2>&1 &
	echo $! > "$d/qemu.pid"
	note "power on (pid $!, boot $(cat "$d/bootdev" 2> /dev/null || echo none))"
}

power_off() {
	alive || { rm -f "$d/qemu.pid"; return 0; }
	kill -TERM "$pid" 2> /dev/null
	# QEMU exits on SIGTERM within a few ms; wait a little so a following power on finds the
	# tap free, but never long: ipmitool retransmits after 1 s and would send the command twice.
	_i=0
	while [ $_i -lt 8 ] && running "$pid"; do
		sleep 0.1
		_i=$((_i + 1))
	done
	if running "$pid"; then
		setsid sh -c "sleep 3; kill -KILL $pid 2>/dev/null" < /dev/null > /dev/null 2>&1 &
	fi
	echo "$pid" > "$d/qemu.prev"
	rm -f "$d/qemu.pid"
	note "power off (pid $pid)"
}

case $op in
get)
	for p in "$@"; do
		case $p in
		power) if alive; then echo "power:1"; else echo "power:0"; fi ;;
		boot)
			b=none
			[ -f "$d/bootdev" ] && read -r b < "$d/bootdev"
			echo "boot:$b"
			;;
		*) echo "unknown parameter: $p"; exit 1 ;;
		esac
	done
	;;
set)
	while [ $# -gt 0 ]; do
		[ $# -ge 2 ] || { echo "no value for $1"; exit 1; }
		p=$1
		v=$2
		shift 2
		case $p in
		power)
			case $v in
			1) power_on ;;
			0) power_off ;;
			*) echo "bad power value: $v"; exit 1 ;;
			esac
			;;
		reset)
			alive || { echo "reset while powered off"; exit 1; }
			note "reset (power cycle)"
			setsid /bin/sh "$0" "$d" set power 0 power 1 < /dev/null > /dev/null 2>&1 &
			;;
		shutdown) power_off ;;
		boot)
			case $v in
			none | pxe | default | cdrom | bios) echo "$v" > "$d/bootdev" ;;
			*) echo "unsupported boot device: $v"; exit 1 ;;
			esac
			note "boot device $v"
			;;
		identify) ;;
		*) echo "unknown parameter: $p"; exit 1 ;;
		esac
	done
	;;
*)
	echo "unsupported operation: $op"
	exit 1
	;;
esac
exit 0
