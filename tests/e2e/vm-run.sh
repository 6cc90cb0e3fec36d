#!/bin/bash
# vm-run.sh VMDIR - become the QEMU process of one e2e VM ("power on"). chassis-control.sh starts it
# detached, inside the rack's network namespace (QEMU looks the tap name up in its own namespace;
# started elsewhere it would silently create a new tap there).
#
# VMDIR/vm.conf (written by rack.sh): NAME MAC TAP MEM UUID SERIAL DISK_SERIAL.
# The IPMI boot device (VMDIR/bootdev) becomes the firmware boot order, with -boot strict=on
# (SeaBIOS tries only devices that have a bootindex):
#   pxe          the NIC only
#   default      the disk only ("chassis bootdev disk" arrives as "default")
#   none, other  the disk, then the NIC (a blank disk falls through to PXE, as on real machines)
# Fault: VMDIR/nopxe exists -> the NIC has no option ROM (PXE "disabled in the BIOS"): a PXE boot
# finds nothing to boot.
# The serial port is the BMC's Serial over LAN console: QEMU opens the FIFOs VMDIR/serial.out
# (what the VM prints) and serial.in (what is typed at the BMC) of the VM's sol-relay.py
# (rack.sh), whose pty ipmi_sim serves as SOL. What the VM prints is also appended to
# VMDIR/console.log (the chardev's log) across power cycles, each boot preceded by a
# "=== e2e-rig: ... power on" line.
set -u
d=$1
# shellcheck source=/dev/null
. "$d/vm.conf"

# ipmi_sim's descriptors (its UDP socket) must not live on in QEMU.
for fd in /proc/"$$"/fd/*; do
	fd=${fd##*/}
	[[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)) && eval "exec $fd>&-" 2> /dev/null
done

# The QEMU being stopped still holds the tap: wait for it (at most 10 s).
if [ -f "$d/qemu.prev" ]; then
	read -r old < "$d/qemu.prev"
	for _ in $(seq 1 100); do
		st=
		read -r _ _ st _ 2> /dev/null < "/proc/$old/stat" || break
		[[ $st == [ZX] ]] && break # exited, waiting to be reaped
		sleep 0.1
	done
fi

boot=none
[ -f "$d/bootdev" ] && read -r boot < "$d/bootdev"
case $boot in
pxe) disk_bi='' nic_bi=,bootindex=1 ;;
default) disk_bi=,bootindex=1 nic_bi='' ;;
*) disk_bi=,bootindex=1 nic_bi=,bootindex=2 ;;
esac
rom=
if [ -e "$d/nopxe" ]; then
	rom=,romfile=
	nic_bi=
fi
printf '\n' >> "$d/console.log" # the last boot may have ended mid-line
# what was typed into the SOL console while the VM was off is not for this boot
dd if="$d/serial.in" iflag=nonblock of=/dev/null bs=64k 2> /dev/null
echo "=== e2e-rig: $(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) power on $NAME boot=$boot${rom:+ (NIC without PXE ROM)} ===" >> "$d/console.log"

# -nographic (with -serial and -monitor given) makes SeaBIOS and iPXE print on the serial port
# too. -cpu max offers RDRAND: the kernel's RNG is ready at once (dropbearkey would block ~1 s).
exec qemu-system-x86_64 -name "$NAME" -nodefaults -machine pc -cpu max -smp 1 -m "$MEM" \
	-uuid "$UUID" -smbios "type=1,manufacturer=Rackpilot,product=e2e-vm,serial=$SERIAL" \
	-nographic -vga none -monitor none \
	-chardev "pipe,id=con0,path=$d/serial,logfile=$d/console.log,logappend=on" \
	-serial chardev:con0 \
	-qmp "unix:$d/qmp.sock,server=on,wait=off" \
	-boot strict=on \
	-drive "file=$d/disk.img,format=raw,if=none,id=disk0" \
	-device "virtio-blk-pci,drive=disk0,serial=$DISK_SERIAL$disk_bi" \
	-netdev "tap,id=net0,ifname=$TAP,script=no,downscript=no" \
	-device "virtio-net-pci,netdev=net0,mac=$MAC$nic_bi$rom" < /dev/null
