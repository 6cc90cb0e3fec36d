#!/bin/sh
# build-images.sh - the boot images of the end-to-end rig, built without root tricks.
#
#   build-images.sh OUTDIR [CACHEDIR]
#
# OUTDIR receives
#   vmlinuz       a Debian kernel, downloaded (apt-get download) and extracted (dpkg -x), never installed
#   agent-initrd  the agent ramdisk (cpio newc + gzip): busybox-static, virtio modules, dropbear,
#                 rackpilot-agent and every library they need; /init is ramdisk/init
#   disk.img      a small bootable raw disk, what a deploy writes to a node's disk: an MBR with
#                 (1) a FAT16 partition with syslinux, the same kernel and a tiny initrd whose /init
#                 is disk/init (a stand-in for an OS with cloud-init: it reads the NoCloud seed a
#                 deploy adds) and (2), last, a small ext4 partition (type 83, label rproot, ROOT_MB)
#                 for the deploy to grow
#   disk.img.gz, disk.img.zst, disk.qcow2   the same disk gzip'd (-n), zstd'd and converted to
#                 qcow2 with compressed clusters (qemu-img convert -c): the deploy's other formats.
#                 Made again only when disk.img changed (.variants holds its sha256).
#   disk-initrd   that tiny initrd (also inside disk.img)
#   agent-initrd-lldp  agent-initrd with a second archive appended (the kernel unpacks both):
#                 lldpd, lldpcli/lldpctl and their libraries, which /init starts on the NIC so
#                 that the agent's inventory reports the LLDP neighbour (accept.sh), and what
#                 the Debian packages ACCEPT_DEBS hold (iperf3: the acceptance's fabric check).
#                 Only when lldpd is installed (Debian package lldpd); kept apart because it
#                 adds ~20 MB that every other boot would pay for.
#   SHA256SUMS, BUILDINFO
# CACHEDIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/rackpilot-e2e) keeps the kernel .deb and its
# extracted tree, so a rerun needs no network. When nothing that goes into the images changed
# (the scripts here, the agent binary, busybox, dropbear, the kernel package), OUTDIR is left as
# it is ("up to date").
#
# Environment
#   AGENT=PATH        the agent binary (default: build/agent/rackpilot-agent of this checkout)
#   FLAVOUR=cloud-amd64   kernel flavour: cloud-amd64 (LZ4, virtio only; the default, faster
#                     under TCG) or amd64 (xz, every driver)
#   KERNEL_DEB=FILE   use this linux-image .deb instead of asking apt
#   DISK_MB=36        size of disk.img in MiB (>= ROOT_MB + 24)
#   ROOT_MB=4         size of its last partition (ext4) in MiB (>= 2)
#   LLDPD=/usr/sbin/lldpd, LLDPCLI=/usr/sbin/lldpcli   for agent-initrd-lldp
#   ACCEPT_DEBS="iperf3 libiperf0 libsctp1"   Debian packages for agent-initrd-lldp: downloaded
#                     (apt-get download, never installed) into CACHEDIR/debs once, unpacked
#                     (dpkg -x), their programs (usr/bin, usr/sbin) and shared libraries put in
#                     with whatever else ldd says they need (libcrypto: already there for the
#                     agent). No download to be had: agent-initrd-lldp without them (a note;
#                     BUILDINFO's accept_debs= is then empty). Not with RAMDISK_ONLY=1.
#   FORCE=1           rebuild even when up to date
#   MODULES="..."     kernel modules for the agent ramdisk (default: virtio_pci virtio_net
#                     virtio_blk); their dependencies come along (modinfo). The product
#                     ramdisk (cmake --build build --target ramdisk) names the NIC, HCA and
#                     NVMe drivers of GPU servers.
#   DISK_MODULES="..."  the disk OS's (default: MODULES and vfat with the code pages the Debian
#                     kernel's FAT defaults need, to mount the seed: nls_cp437 nls_ascii, and
#                     nls_utf8 nls_iso8859_1)
#   TOOLS="..."       programs to put into the agent ramdisk with their libraries, each where
#                     this machine has it (command -v); missing ones are listed, not fatal
#   DISK_TOOLS="..."  programs to put into the disk OS with their libraries (default curl: its
#                     first-boot report goes to rackpilotd's https URL with a pinned key, which
#                     busybox wget cannot do; DISK_TOOLS= for busybox alone, see README.md)
#   RAMDISK_ONLY=1    build vmlinuz and agent-initrd only (no disk.img, no disk-initrd)
# Exit status: 0 built or up to date; 3 no kernel package to be had (apt cannot download it and
# the cache has none: e2e.sh then skips); 1 anything else.
set -eu

HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
REPO=$(CDPATH='' cd -- "$HERE/../.." && pwd)
die() { echo "build-images.sh: $*" >&2; exit 1; }
nokernel() { echo "build-images.sh: $*" >&2; exit 3; }
note() { echo "build-images.sh: $*" >&2; }

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: build-images.sh OUTDIR [CACHEDIR]"; fi
OUT=$1
CACHE=${2:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rackpilot-e2e}
AGENT=${AGENT:-$REPO/build/agent/rackpilot-agent}
FLAVOUR=${FLAVOUR:-cloud-amd64}
DISK_MB=${DISK_MB:-36}
ROOT_MB=${ROOT_MB:-4}
BUSYBOX=${BUSYBOX:-/bin/busybox}
DROPBEAR=${DROPBEAR:-/usr/sbin/dropbear}
DROPBEARKEY=${DROPBEARKEY:-/usr/bin/dropbearkey}
SYSLINUX_MBR=${SYSLINUX_MBR:-/usr/lib/syslinux/mbr/mbr.bin}
LLDPD=${LLDPD:-/usr/sbin/lldpd}
LLDPCLI=${LLDPCLI:-/usr/sbin/lldpcli}
WITH_LLDP=0
[ -x "$LLDPD" ] && [ -x "$LLDPCLI" ] && WITH_LLDP=1
# Modules the VMs need (virtio NIC and disk); their dependencies are found with modinfo.
WANT_MODULES=${MODULES:-virtio_pci virtio_net virtio_blk}
# ... and the disk OS's: the seed (CIDATA) is a FAT filesystem
WANT_DISK_MODULES=${DISK_MODULES:-$WANT_MODULES vfat nls_cp437 nls_ascii nls_utf8 nls_iso8859_1}
TOOLS=${TOOLS:-}
DISK_TOOLS=${DISK_TOOLS-curl}
RAMDISK_ONLY=${RAMDISK_ONLY:-0}
ACCEPT_DEBS=${ACCEPT_DEBS-iperf3 libiperf0 libsctp1}

case $DISK_MB$ROOT_MB in ''|*[!0-9]*) die "DISK_MB and ROOT_MB must be numbers" ;; esac
[ "$ROOT_MB" -ge 2 ] || die "ROOT_MB must be at least 2"
[ "$DISK_MB" -ge $((ROOT_MB + 24)) ] || die "DISK_MB must be at least ROOT_MB + 24"
[ -x "$AGENT" ] || die "no agent binary at $AGENT (build it, or set AGENT=)"
for t in "$BUSYBOX" "$DROPBEAR" "$DROPBEARKEY"; do [ -x "$t" ] || die "missing $t"; done
if [ "$RAMDISK_ONLY" != 1 ]; then
	[ -f "$SYSLINUX_MBR" ] || die "missing $SYSLINUX_MBR (apt-get install syslinux-common)"
	for t in sfdisk mkfs.vfat mcopy syslinux mkfs.ext4 zstd qemu-img; do
		command -v "$t" > /dev/null || die "missing $t (see .ci/deps)"
	done
fi
for t in dpkg apt-get ldd modinfo gzip sha256sum; do
	command -v "$t" > /dev/null || die "missing $t (see .ci/deps)"
done
if ldd "$BUSYBOX" > /dev/null 2>&1; then die "$BUSYBOX is not static (apt-get install busybox-static)"; fi

mkdir -p "$OUT" "$CACHE"
OUT=$(CDPATH='' cd -- "$OUT" && pwd)
CACHE=$(CDPATH='' cd -- "$CACHE" && pwd)

# ---- the kernel package ---------------------------------------------------------------------
# (ls | tail picks the newest of our own .deb files, whose names are plain: SC2012 does not apply)
# shellcheck disable=SC2012
# apt names the current kernel; the newest .deb of that flavour in the cache is the fallback when
# apt has no lists (offline CI with a warm cache).
if [ -n "${KERNEL_DEB:-}" ]; then
	deb=$KERNEL_DEB
	[ -f "$deb" ] || die "KERNEL_DEB=$deb does not exist"
else
	pkg=$(apt-cache depends "linux-image-$FLAVOUR" 2> /dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }') || pkg=
	deb=
	if [ -n "$pkg" ]; then
		deb=$(ls -1 "$CACHE/${pkg}"_*.deb 2> /dev/null | tail -n 1) || deb=
		if [ -z "$deb" ]; then
			note "downloading $pkg into $CACHE"
			# the sandbox user _apt cannot write into a root-owned cache: run as root
			(cd "$CACHE" && apt-get download -q -o APT::Sandbox::User=root "$pkg" > /dev/null) ||
				(cd "$CACHE" && apt-get update -q > /dev/null &&
					apt-get download -q -o APT::Sandbox::User=root "$pkg" > /dev/null) ||
				nokernel "apt-get download $pkg failed (no network to the Debian mirrors?)"
			deb=$(ls -1 "$CACHE/${pkg}"_*.deb | tail -n 1)
		fi
	else
		deb=$(ls -1 "$CACHE"/linux-image-*-"$FLAVOUR"_*.deb 2> /dev/null | tail -n 1) || deb=
		[ -n "$deb" ] || nokernel "apt does not know linux-image-$FLAVOUR and $CACHE has no kernel .deb"
		note "apt has no answer; using the cached $(basename "$deb")"
	fi
fi
debname=$(basename "$deb" .deb)

# ---- agent-initrd-lldp's packages (ACCEPT_DEBS) ------------------------------------------------
# accept_debs: the .deb files, from the cache or downloaded into it; empty when one cannot be had
accept_debs=
if [ "$WITH_LLDP" = 1 ] && [ "$RAMDISK_ONLY" != 1 ] && [ -n "$ACCEPT_DEBS" ]; then
	mkdir -p "$CACHE/debs"
	updated=0
	for p in $ACCEPT_DEBS; do
		# shellcheck disable=SC2012  # plain Debian file names
		f=$(ls -1 "$CACHE/debs/${p}"_*.deb 2> /dev/null | tail -n 1) || f=
		if [ -z "$f" ]; then
			note "downloading $p into $CACHE/debs"
			if ! (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "$p" > /dev/null 2>&1); then
				if [ "$updated" = 0 ]; then apt-get update -q > /dev/null 2>&1 || :; updated=1; fi
				(cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "$p" > /dev/null 2>&1) || :
			fi
			# shellcheck disable=SC2012
			f=$(ls -1 "$CACHE/debs/${p}"_*.deb 2> /dev/null | tail -n 1) || f=
		fi
		if [ -z "$f" ]; then
			note "apt-get download $p failed: agent-initrd-lldp without $ACCEPT_DEBS"
			accept_debs=
			break
		fi
		accept_debs="$accept_debs $f"
	done
fi

# ---- disk.img's other formats ---------------------------------------------------------------
# variants: disk.img.gz, disk.img.zst and disk.qcow2 from OUT/disk.img, unless .variants says
# they are of this disk.img already; then SHA256SUMS
variants() {
	_sha=$(sha256sum < "$OUT/disk.img" | cut -c1-64)
	if [ "$(cat "$OUT/.variants" 2> /dev/null)" != "$_sha" ] || [ ! -f "$OUT/disk.img.gz" ] ||
		[ ! -f "$OUT/disk.img.zst" ] || [ ! -f "$OUT/disk.qcow2" ]; then
		rm -f "$OUT/.variants"
		gzip -n -c "$OUT/disk.img" > "$OUT/disk.img.gz.tmp"
		zstd -q -f -c "$OUT/disk.img" > "$OUT/disk.img.zst.tmp"
		# -c: compressed clusters (each deflated on its own), as cloud images are shipped
		qemu-img convert -q -c -f raw -O qcow2 "$OUT/disk.img" "$OUT/disk.qcow2.tmp"
		for _f in disk.img.gz disk.img.zst disk.qcow2; do mv "$OUT/$_f.tmp" "$OUT/$_f"; done
		echo "$_sha" > "$OUT/.variants"
		note "disk.img.gz $(stat -c %s "$OUT/disk.img.gz"), disk.img.zst $(stat -c %s "$OUT/disk.img.zst"), disk.qcow2 $(stat -c %s "$OUT/disk.qcow2") bytes"
	fi
	(cd "$OUT" && sha256sum vmlinuz agent-initrd* disk-initrd disk.img disk.img.gz disk.img.zst \
		disk.qcow2 > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
}

# ---- up to date? ----------------------------------------------------------------------------
stamp=$( {
	echo "flavour=$FLAVOUR disk_mb=$DISK_MB root_mb=$ROOT_MB deb=$debname modules=$WANT_MODULES lldp=$WITH_LLDP"
	echo "disk_modules=$WANT_DISK_MODULES"
	echo "tools=$TOOLS ramdisk_only=$RAMDISK_ONLY disk_tools=$DISK_TOOLS"
	for t in $TOOLS $DISK_TOOLS; do command -v "$t" > /dev/null && sha256sum < "$(command -v "$t")"; done
	cat "$0" "$HERE/ramdisk/init" "$HERE/ramdisk/udhcpc.script" "$HERE/disk/init" \
		"$HERE/disk/yaml.awk" "$HERE/disk/mime.awk" "$HERE/disk/syslinux.cfg" "$AGENT" \
		"$BUSYBOX" "$DROPBEAR" "$DROPBEARKEY" | sha256sum
	[ "$WITH_LLDP" = 0 ] || cat "$LLDPD" "$LLDPCLI" | sha256sum
	for f in $accept_debs; do basename "$f"; done
} | sha256sum | cut -c1-64)
if [ "${FORCE:-0}" != 1 ] && [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$stamp" ] &&
	[ -f "$OUT/vmlinuz" ] && [ -f "$OUT/agent-initrd" ] &&
	{ [ "$RAMDISK_ONLY" = 1 ] || [ -f "$OUT/disk.img" ]; } &&
	{ [ "$WITH_LLDP" = 0 ] || [ -f "$OUT/agent-initrd-lldp" ]; }; then
	[ "$RAMDISK_ONLY" = 1 ] || variants
	note "up to date in $OUT ($debname)"
	exit 0
fi
rm -f "$OUT/.stamp" "$OUT/agent-initrd-lldp"

# ---- extract it once per package version ------------------------------------------------------
K=$CACHE/$debname
if [ ! -f "$K/.done" ]; then
	note "extracting $debname"
	rm -rf "$K" "$K.tmp"
	dpkg -x "$deb" "$K.tmp"
	touch "$K.tmp/.done"
	mv "$K.tmp" "$K"
fi
# shellcheck disable=SC2012  # one plain file name from a Debian package
VMLINUZ=$(ls -1 "$K"/boot/vmlinuz-* | head -n 1)
KVER=${VMLINUZ##*/vmlinuz-}
MODDIR=$K/lib/modules/$KVER/kernel
[ -d "$MODDIR" ] || die "no modules in $K"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rp-e2e-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# ---- modules in dependency order ------------------------------------------------------------
# index: "name path" per module, names with _ where file names may have -
find "$MODDIR" -name '*.ko' |
	awk -F/ '{ n = $NF; sub(/\.ko$/, "", n); gsub(/-/, "_", n); print n, $0 }' > "$WORK/modindex"
modfile() { # module name -> .ko path
	awk -v n="$(echo "$1" | tr '-' '_')" '$1 == n { print $2; f = 1; exit } END { exit !f }' \
		"$WORK/modindex"
}
: > "$WORK/order"
: > "$WORK/order.disk"
ORDER=$WORK/order
add_module() { # depth-first into $ORDER: dependencies first, each module once
	grep -qx "$1" "$ORDER" && return 0
	_f=$(modfile "$1") || { note "module $1 is not in $KVER (built in?), skipped"; return 0; }
	for _d in $(modinfo -F depends "$_f" | tr ',' ' '); do add_module "$_d"; done
	grep -qx "$1" "$ORDER" || echo "$1" >> "$ORDER"
}
for m in $WANT_MODULES; do add_module "$m"; done
note "modules: $(tr '\n' ' ' < "$WORK/order")"
if [ "$RAMDISK_ONLY" != 1 ]; then
	ORDER=$WORK/order.disk
	for m in $WANT_DISK_MODULES; do add_module "$m"; done
	note "disk OS modules: $(tr '\n' ' ' < "$WORK/order.disk")"
fi

# put_modules ROOT [ORDER]: copy the modules (default: the agent ramdisk's) and write
# ROOT/lib/modules/load.order
put_modules() {
	mkdir -p "$1/lib/modules"
	: > "$1/lib/modules/load.order"
	while read -r m; do
		f=$(modfile "$m")
		cp "$f" "$1/lib/modules/$m.ko"
		echo "$m" >> "$1/lib/modules/load.order"
	done < "${2:-$WORK/order}"
}

# put_busybox ROOT: busybox-static with every applet as a link in /bin
put_busybox() {
	mkdir -p "$1/bin" "$1/sbin" "$1/usr/bin" "$1/usr/sbin"
	cp "$BUSYBOX" "$1/bin/busybox"
	for a in $("$BUSYBOX" --list); do
		[ "$a" = busybox ] || ln -sf busybox "$1/bin/$a"
	done
}

# put_with_libs ROOT FILE DEST [BASE]: a dynamic binary at DEST plus what ldd lists, at the same
# paths (a library already in BASE, the archive ROOT is appended to, is left out)
put_with_libs() {
	mkdir -p "$1$(dirname "$3")"
	cp -L "$2" "$1$3"
	chmod 755 "$1$3"
	for lib in $(ldd "$2" | awk '/=> \// { print $3 } /^[ \t]*\/[^ ]+ \(/ { print $1 }'); do
		[ -e "$1$lib" ] && continue
		[ -n "${4:-}" ] && [ -e "$4$lib" ] && continue
		mkdir -p "$1$(dirname "$lib")"
		cp -L "$lib" "$1$lib"
	done
}

# make_cpio ROOT OUT: newc archive, gzip. Owners are whoever builds; /init fixes what must be root's.
make_cpio() {
	(cd "$1" && find . | sort | "$BUSYBOX" cpio -o -H newc 2> /dev/null) | gzip -6 -n > "$2"
}

# ---- agent ramdisk --------------------------------------------------------------------------
R=$WORK/agent
mkdir -p "$R/proc" "$R/sys" "$R/dev" "$R/run" "$R/tmp" "$R/root" "$R/etc/dropbear" \
	"$R/etc/rackpilot" "$R/var/lib" "$R/var/log" "$R/var/run" "$R/etc/udhcpc"
chmod 1777 "$R/tmp"
chmod 700 "$R/root"
put_busybox "$R"
put_modules "$R"
cp "$HERE/ramdisk/init" "$R/init"
chmod 755 "$R/init"
# busybox udhcpc runs /etc/udhcpc/default.script (Debian's build)
cp "$HERE/ramdisk/udhcpc.script" "$R/etc/udhcpc/default.script"
chmod 755 "$R/etc/udhcpc/default.script"
put_with_libs "$R" "$DROPBEAR" /usr/sbin/dropbear
put_with_libs "$R" "$DROPBEARKEY" /usr/bin/dropbearkey
# dropbear sessions get PATH=/usr/bin:/bin, and rackpilotd runs "rackpilot-agent run-steps"
put_with_libs "$R" "$AGENT" /usr/bin/rackpilot-agent
# The tools the inventory and acceptance use, where this machine has them.
tools_in= tools_out=
for t in $TOOLS; do
	p=$(command -v "$t" 2> /dev/null) || { tools_out="$tools_out $t"; continue; }
	put_with_libs "$R" "$p" "/usr/bin/$t"
	tools_in="$tools_in $t"
done
# lspci names devices from pci.ids; smartctl knows drives from its drivedb.
for f in /usr/share/misc/pci.ids /usr/share/smartmontools/drivedb.h; do
	[ -f "$f" ] && case " $tools_in " in *" lspci "* | *" smartctl "*) mkdir -p "$R$(dirname "$f")" && cp "$f" "$R$f" ;; esac
done
[ -z "$TOOLS" ] || note "tools in the ramdisk:${tools_in:- none}; not on this machine:${tools_out:- none}"
# the user database dropbear's getpwnam() reads (glibc's "files" NSS is built into libc);
# _lldpd: lldpd (agent-initrd-lldp) drops to it
printf 'root:x:0:0:root:/root:/bin/sh\n_lldpd:x:100:101::/run/lldpd:/bin/false\n' > "$R/etc/passwd"
printf 'root:x:0:\n_lldpd:x:101:\n' > "$R/etc/group"
echo 'PRETTY_NAME="Rackpilot agent ramdisk (e2e)"' > "$R/etc/os-release"
echo '/bin/sh' > "$R/etc/shells"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n' > "$R/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n' > "$R/etc/hosts"
{
	echo "kernel=$KVER"
	echo "agent=$("$AGENT" version 2> /dev/null || echo unknown) sha256=$(sha256sum < "$AGENT" | cut -c1-16)"
	echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$R/etc/rackpilot-e2e"
make_cpio "$R" "$WORK/agent-initrd"
note "agent-initrd: $(du -sk "$R" | cut -f1) KiB unpacked"

# ---- agent-initrd-lldp: + lldpd ---------------------------------------------------------------
# /init starts lldpd on the NIC when /usr/sbin/lldpd exists; lldpd runs lldpcli on
# /etc/lldpd.d at start (LLDPDUs every second, not 30: the neighbour is known within seconds).
if [ "$WITH_LLDP" = 1 ]; then
	L=$WORK/lldp
	mkdir -p "$L/etc/lldpd.d"
	put_with_libs "$L" "$LLDPD" /usr/sbin/lldpd "$R"
	put_with_libs "$L" "$LLDPCLI" /usr/sbin/lldpcli "$R"
	ln -s lldpcli "$L/usr/sbin/lldpctl"
	echo 'configure lldp tx-interval 1' > "$L/etc/lldpd.d/e2e.conf"
	# ACCEPT_DEBS: their programs and libraries at their paths; the libraries they need from
	# this machine (ldd, the packages' own first) where neither archive has them
	debs_in=
	if [ -n "$accept_debs" ]; then
		X=$WORK/debs
		for f in $accept_debs; do
			dpkg -x "$f" "$X"
			debs_in="$debs_in $(basename "$f" .deb)"
		done
		xlibs=$(find "$X" -name 'lib*.so*' -exec dirname {} \; | sort -u | tr '\n' ':')
		find "$X" -name 'lib*.so*' | while read -r f; do
			mkdir -p "$L$(dirname "${f#"$X"}")"
			cp -a "$f" "$L${f#"$X"}"
		done
		for b in "$X"/usr/bin/* "$X"/usr/sbin/* "$X"/bin/* "$X"/sbin/*; do
			if [ ! -f "$b" ] || [ ! -x "$b" ]; then continue; fi
			mkdir -p "$L$(dirname "${b#"$X"}")"
			cp "$b" "$L${b#"$X"}"
			LD_LIBRARY_PATH=$xlibs ldd "$b" > "$WORK/ldd.out" 2>&1 || die "ldd ${b#"$X"}: $(cat "$WORK/ldd.out")"
			! grep 'not found' "$WORK/ldd.out" > /dev/null ||
				die "${b#"$X"} needs what neither ACCEPT_DEBS nor this machine has: $(grep 'not found' "$WORK/ldd.out" | tr -s '\n\t' '  ')"
			for lib in $(awk '/=> \// { print $3 } /^[ \t]*\/[^ ]+ \(/ { print $1 }' "$WORK/ldd.out"); do
				case $lib in "$X"/*) continue ;; esac
				[ -e "$L$lib" ] || [ -e "$R$lib" ] && continue
				mkdir -p "$L$(dirname "$lib")"
				cp -L "$lib" "$L$lib"
			done
		done
	fi
	make_cpio "$L" "$WORK/lldp.cpio.gz"
	cat "$WORK/agent-initrd" "$WORK/lldp.cpio.gz" > "$WORK/agent-initrd-lldp"
	note "agent-initrd-lldp: + $(du -sk "$L" | cut -f1) KiB unpacked (lldpd${debs_in:+,$debs_in})"
else
	note "no $LLDPD or $LLDPCLI: no agent-initrd-lldp (apt-get install lldpd)"
fi

if [ "$RAMDISK_ONLY" = 1 ]; then
	cp "$VMLINUZ" "$OUT/vmlinuz.tmp" && mv "$OUT/vmlinuz.tmp" "$OUT/vmlinuz"
	# One image: with lldpd when this machine has it (the links check reads LLDP).
	[ -f "$WORK/agent-initrd-lldp" ] && mv "$WORK/agent-initrd-lldp" "$WORK/agent-initrd"
	mv "$WORK/agent-initrd" "$OUT/agent-initrd.tmp" && mv "$OUT/agent-initrd.tmp" "$OUT/agent-initrd"
	(cd "$OUT" && sha256sum vmlinuz agent-initrd > SHA256SUMS)
	{
		echo "kernel_package=$debname"
		echo "modules=$(tr '\n' ' ' < "$WORK/order")"
		echo "tools=$tools_in"
		echo "tools_missing=$tools_out"
		echo "agent_initrd_bytes=$(stat -c %s "$OUT/agent-initrd")"
		echo "agent_initrd_unpacked_kib=$(du -sk "$R" | cut -f1)"
		cat "$R/etc/rackpilot-e2e"
	} > "$OUT/BUILDINFO"
	echo "$stamp" > "$OUT/.stamp"
	note "agent-initrd: $(stat -c %s "$OUT/agent-initrd") bytes ($(du -sk "$R" | cut -f1) KiB unpacked); vmlinuz: $(stat -c %s "$OUT/vmlinuz") bytes"
	exit 0
fi

# ---- disk OS initrd -------------------------------------------------------------------------
D=$WORK/diskos
mkdir -p "$D/proc" "$D/sys" "$D/dev" "$D/tmp" "$D/etc/udhcpc" "$D/run" "$D/root" "$D/var/lib" \
	"$D/lib/rackpilot-e2e"
chmod 1777 "$D/tmp"
chmod 700 "$D/root"
put_busybox "$D"
put_modules "$D" "$WORK/order.disk"
cp "$HERE/disk/init" "$D/init"
chmod 755 "$D/init"
cp "$HERE/disk/yaml.awk" "$HERE/disk/mime.awk" "$D/lib/rackpilot-e2e/"
cp "$HERE/ramdisk/udhcpc.script" "$D/etc/udhcpc/default.script"
chmod 755 "$D/etc/udhcpc/default.script"
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$D/etc/passwd"
printf 'root:x:0:\n' > "$D/etc/group"
printf '127.0.0.1 localhost\n' > "$D/etc/hosts"
echo 'PRETTY_NAME="Rackpilot e2e disk OS"' > "$D/etc/os-release"
cp "$R/etc/rackpilot-e2e" "$D/etc/rackpilot-e2e"
for t in $DISK_TOOLS; do
	p=$(command -v "$t" 2> /dev/null) || die "DISK_TOOLS: no $t on this machine"
	put_with_libs "$D" "$p" "/usr/bin/$t"
done
make_cpio "$D" "$WORK/disk-initrd"
[ -z "$DISK_TOOLS" ] || note "disk-initrd: $(du -sk "$D" | cut -f1) KiB unpacked, with $DISK_TOOLS"

# ---- disk.img: MBR (syslinux), FAT16 partition at 1 MiB with syslinux, kernel, initrd; ext4 last
IMG=$WORK/disk.img
rm -f "$IMG"
truncate -s "${DISK_MB}M" "$IMG"
part_sectors=$(((DISK_MB - 1 - ROOT_MB) * 2048))
root_start=$(((DISK_MB - ROOT_MB) * 2048))
printf '2048,%s,e,*\n%s,%s,83\n' "$part_sectors" "$root_start" $((ROOT_MB * 2048)) |
	sfdisk -q --label dos "$IMG" > /dev/null
dd if="$SYSLINUX_MBR" of="$IMG" bs=440 count=1 conv=notrunc status=none
# The root filesystem the disk OS keeps its cloud-init state on (/var/lib/cloud/instance-id)
mkdir -p "$WORK/rootfs/var/lib/cloud" "$WORK/rootfs/etc"
cp "$D/etc/os-release" "$WORK/rootfs/etc/os-release"
mkfs.ext4 -q -F -L rproot -d "$WORK/rootfs" "$WORK/root.ext4" "${ROOT_MB}M" > /dev/null
dd if="$WORK/root.ext4" of="$IMG" bs=1M seek=$((DISK_MB - ROOT_MB)) conv=notrunc status=none
# mkfs.vfat's last argument counts 1 KiB blocks
# (it warns that the file is larger than the filesystem: the ext4 partition follows)
mkfs.vfat -F 16 -n RPE2E --offset 2048 "$IMG" $((part_sectors / 2)) > /dev/null 2> "$WORK/mkfs.vfat.log" ||
	die "mkfs.vfat: $(cat "$WORK/mkfs.vfat.log")"
export MTOOLS_SKIP_CHECK=1
mcopy -i "$IMG@@1M" "$VMLINUZ" ::/vmlinuz
mcopy -i "$IMG@@1M" "$WORK/disk-initrd" ::/initrd.gz
mcopy -i "$IMG@@1M" "$HERE/disk/syslinux.cfg" ::/syslinux.cfg
syslinux --offset 1048576 --install "$IMG"
mdir -i "$IMG@@1M" -a ::/ | grep -i "^ldlinux *sys" > /dev/null || die "syslinux did not install ldlinux.sys"

# ---- publish --------------------------------------------------------------------------------
cp "$VMLINUZ" "$OUT/vmlinuz.tmp" && mv "$OUT/vmlinuz.tmp" "$OUT/vmlinuz"
for f in agent-initrd agent-initrd-lldp disk-initrd disk.img; do
	[ -f "$WORK/$f" ] || continue
	mv "$WORK/$f" "$OUT/$f.tmp" && mv "$OUT/$f.tmp" "$OUT/$f"
done
variants
{
	echo "kernel_package=$debname"
	echo "modules=$(tr '\n' ' ' < "$WORK/order")"
	echo "disk_modules=$(tr '\n' ' ' < "$WORK/order.disk")"
	[ "$WITH_LLDP" = 0 ] || echo "accept_debs=${debs_in# }"
	cat "$R/etc/rackpilot-e2e"
} > "$OUT/BUILDINFO"
echo "$stamp" > "$OUT/.stamp"
ls -l "$OUT/vmlinuz" "$OUT/agent-initrd" "$OUT/disk.img" "$OUT/disk.img.gz" "$OUT/disk.img.zst" \
	"$OUT/disk.qcow2" >&2
