#!/bin/sh
# The Debian packages (packaging/package.cmake), built and installed the way an ops team
# would: build them from the tree with Debian's hardening flags, check them with lintian, and
# install them into a brand-new Debian 12 root (debootstrap --variant=minbase) with
# `apt-get install ./*.deb`, Debian resolving the Depends dpkg-shlibdeps computed. There:
# `rackpilotd -n` with the packaged configuration, `systemd-analyze verify` on the units, the
# server started as its unit starts it (the rackpilot user, its ExecStart, its UMask) and
# README's curl tour against it, then remove and purge, leaving nothing behind.
#
#   package-test.sh SRC WORK
#
# Needs root (chroot, mounts) and Debian's mirror; 77 (skipped) where a root cannot be made
# (debootstrap or mounting proc refused: a container without those rights), saying why. With
# CI=true a missing tool is a failure. A pristine root from tests/../shared/tools/fresh-check's
# cache (/var/tmp/rp-fresh/base-bookworm) is copied when there is one, which saves a minute.
set -eu
src=$(cd "$1" && pwd)
mkdir -p "$2"
work=$(cd "$2" && pwd -P)
root=$work/root
fail() {
	echo "package-test: FAIL: $*" >&2
	exit 1
}
skip() {
	echo "package-test: SKIPPED: $*" >&2
	exit 77
}
need() {
	command -v "$1" >/dev/null 2>&1 && return 0
	[ "${CI:-}" = true ] && fail "$1 is required (package $2)"
	skip "no $1 (package $2)"
}
[ "$(id -u)" = 0 ] || skip "needs root (chroot and mounts)"
need cpack cmake
need dpkg-shlibdeps dpkg-dev
need lintian lintian
need debootstrap debootstrap

umounts() {
	for m in $(awk -v r="$root" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
}
# Processes in the root killed and its mounts gone before anything is removed: a bind mount
# of /dev left by a run that was killed (ctest's timeout) must never be deleted through.
cleanup() {
	if [ -d "$root" ]; then
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
		done
		umounts
		if awk -v r="$root" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
			echo "package-test: $root still has mounts; not removing it" >&2
			return 1
		fi
	fi
	rm -rf --one-file-system "$work"
}
trap 'cleanup' EXIT
trap 'exit 130' INT TERM
cleanup || exit 1
mkdir -p "$work"

# 1. Build: Release, with dpkg-buildflags (hardening: fortify, stack protector, relro, now).
echo "package-test: building the packages" >&2
eval "$(dpkg-buildflags --export=sh)"
export CFLAGS LDFLAGS CPPFLAGS
CFLAGS="$CFLAGS $CPPFLAGS"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DRP_PG_RUN=OFF >"$work/cmake.log" 2>&1 ||
	{ cat "$work/cmake.log"; fail "cmake"; }
cmake --build "$work/build" -j "$(nproc)" --target rackpilotd rackpilot rackpilot-agent rp_package_files \
	>"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; fail "build"; }
(cd "$work/build" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
debs=$(ls "$work/build"/*.deb)
[ "$(echo "$debs" | wc -l)" = 3 ] || fail "expected 3 packages, got: $debs"
for d in $debs; do
	echo "package-test: $(basename "$d"): $(stat -c %s "$d") bytes; Depends: $(dpkg-deb -f "$d" Depends)" >&2
	dpkg-deb -f "$d" Depends | grep -q 'libc6' || fail "$(basename "$d") has no computed Depends"
done
dpkg-deb -f "$work/build"/rackpilotd_*.deb Depends | grep -q libmicrohttpd ||
	fail "rackpilotd does not depend on libmicrohttpd"

# 2. lintian: no error and no warning (the informational tags are explained in
# docs/deployment.md).
lintian --fail-on error,warning $debs >"$work/lintian.log" 2>&1 ||
	{ cat "$work/lintian.log"; fail "lintian"; }
echo "package-test: lintian: no errors or warnings" >&2

# 3. A brand-new Debian 12 root.
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
if [ -f /var/tmp/rp-fresh/base-bookworm/.complete ]; then
	cp -a /var/tmp/rp-fresh/base-bookworm "$root"
else
	echo "package-test: debootstrap (a minute)" >&2
	debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log"; skip "debootstrap could not make a root here"; }
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/"
		: >"$root/etc/apt/sources.list"
	fi
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$root/proc" || skip "cannot mount proc in a new root here"
mount -t tmpfs tmpfs "$root/tmp"
mount --bind /dev "$root/dev"
mkdir -p "$root/debs"
cp $debs "$root/debs/"
in_root() {
	chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@"
}

# 4. Install: Debian resolves the Depends. systemd for systemd-analyze (and man-db: it
# checks the units' Documentation= man pages), curl for the tour.
echo "package-test: apt-get install ./debs/*.deb" >&2
in_root apt-get update -q >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; fail "apt-get update"; }
in_root sh -c 'apt-get install -y -q --no-install-recommends ./debs/*.deb systemd man-db curl ca-certificates' \
	>>"$work/apt.log" 2>&1 || { tail -40 "$work/apt.log"; fail "apt-get install ./*.deb"; }
in_root getent passwd rackpilot >/dev/null || fail "no rackpilot user"
# Enabled as dh_installsystemd would (the links exist without a running systemd).
for u in rackpilotd.service rackpilot-agent.service; do
	[ -L "$root/etc/systemd/system/multi-user.target.wants/$u" ] || fail "$u is not enabled"
done
[ -L "$root/etc/systemd/system/multi-user.target.wants/rackpilot-dnsmasq.path" ] &&
	fail "rackpilot-dnsmasq.path enabled without dnsmasq set up"
[ "$(in_root stat -c '%U %a' "/var/lib/rackpilot")" = "rackpilot 700" ] ||
	fail "/var/lib/rackpilot: $(in_root stat -c '%U %a' "/var/lib/rackpilot")"
in_root dpkg-query -W -f='${Conffiles}\n' rackpilotd | grep -q /etc/rackpilot/rackpilotd.conf ||
	fail "/etc/rackpilot/rackpilotd.conf is not a conffile"
in_root man -w rackpilotd >/dev/null 2>&1 || [ -f "$root/usr/share/man/man8/rackpilotd.8.gz" ] ||
	fail "no rackpilotd(8)"

# 5. The packaged configuration checks, and says where the data goes.
in_root rackpilotd -n -c /etc/rackpilot/rackpilotd.conf >"$work/check.out" 2>&1 ||
	{ cat "$work/check.out"; fail "rackpilotd -n"; }
grep -q '^data_dir = /var/lib/rackpilot$' "$work/check.out" || fail "data_dir is not /var/lib/rackpilot"

# 6. The units.
for u in rackpilotd.service rackpilot-agent.service rackpilot-dnsmasq.path rackpilot-dnsmasq.service; do
	in_root systemd-analyze verify "/lib/systemd/system/$u" >"$work/verify.log" 2>&1 ||
		{ cat "$work/verify.log"; fail "systemd-analyze verify $u"; }
	# Warnings are printed too (and exit 0): none allowed.
	if grep -v -e '^$' "$work/verify.log" | grep -q .; then
		cat "$work/verify.log"
		fail "systemd-analyze verify $u printed warnings"
	fi
done
echo "package-test: systemd-analyze verify: 4 units clean" >&2

# 7. Started as the unit starts it: its user, its umask, its ExecStart, and its notify socket.
exec_start=$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/rackpilotd.service")
[ -n "$exec_start" ] || fail "no ExecStart"
# (Not through in_root, a function: $! would be a subshell's, and the server would outlive
# the kill.) The pid is the server's own: sh execs it.
chroot "$root" /usr/bin/env -i HOME=/var/lib/rackpilot PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	LANG=C.UTF-8 setpriv --reuid=rackpilot --regid=rackpilot --init-groups \
	sh -c "echo \$\$ > /tmp/server.pid; umask 0077; exec $exec_start" >"$work/server.log" 2>&1 &
i=0
until [ -s "$root/tmp/server.pid" ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "the server did not start"
	sleep 0.1
done
server=$(cat "$root/tmp/server.pid")
port=8475
i=0
until grep -q 'listening on' "$work/server.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] && kill -0 "$server" 2>/dev/null || { cat "$work/server.log"; fail "the server did not start"; }
	sleep 0.1
done
grep -q "listening on 127.0.0.1:$port" "$work/server.log" || { cat "$work/server.log"; fail "not on 127.0.0.1:$port"; }
[ "$(in_root stat -c '%U %a' "/var/lib/rackpilot/admin.token")" = "rackpilot 600" ] ||
	fail "admin.token: $(in_root stat -c '%U %a' "/var/lib/rackpilot/admin.token")"

# 8. README's tour (the first requests of "A first tour with curl"), in the root.
cat >"$root/tmp/tour.sh" <<'EOF'
set -eu
TOKEN=$(cat /var/lib/rackpilot/admin.token)
RP=http://127.0.0.1:8475
auth="Authorization: Bearer $TOKEN"
json="Content-Type: application/json"
code() { curl -s -o /tmp/out -w '%{http_code}' "$@"; }
[ "$(code -H "$auth" $RP/v1)" = 200 ] || { echo "GET /v1"; exit 1; }
[ "$(code -H "$auth" -H "$json" -d '{"name":"r01","site":"dc1","row":"A"}' $RP/v1/racks)" = 201 ] || { echo racks; exit 1; }
[ "$(code -H "$auth" -H "$json" -d '{
  "name": "gpu-r01-u07", "rack": "r01", "u_position": 7, "u_height": 4,
  "serial": "S7X00412", "node_class": "gpu-h100-8x", "tags": ["bringup"],
  "macs": ["0c:42:a1:00:00:07"],
  "bmc": {"driver": "ipmi", "address": "10.10.0.7", "username": "admin", "password": "secret"}
}' $RP/v1/nodes)" = 201 ] || { echo nodes; cat /tmp/out; exit 1; }
grep -q secret /tmp/out && { echo "the BMC password came back"; exit 1; }
[ "$(code -H "$auth" $RP/v1/nodes/gpu-r01-u07)" = 200 ] || { echo node; exit 1; }
[ "$(code -H "$auth" "$RP/v1/nodes?rack=r01&tag=bringup&fields=name,u_position")" = 200 ] || { echo list; exit 1; }
[ "$(code -H "$auth" -H "$json" -X PATCH -d '{"maintenance": true, "maintenance_reason": "reseat GPU 3"}' $RP/v1/nodes/gpu-r01-u07)" = 200 ] || { echo patch; exit 1; }
[ "$(code -H "$auth" $RP/v1/racks/r01/elevation)" = 200 ] || { echo elevation; exit 1; }
[ "$(code -H "$auth" "$RP/v1/events?node=gpu-r01-u07")" = 200 ] || { echo events; exit 1; }
[ "$(code $RP/ui/)" = 200 ] || { echo "web view"; exit 1; }
echo tour ok
EOF
in_root sh /tmp/tour.sh >"$work/tour.log" 2>&1 || { cat "$work/tour.log" "$work/server.log"; fail "README's tour"; }
# The secret key and the database are the rackpilot user's, and nobody else's.
for f in secret.key rackpilot.db; do
	[ "$(in_root stat -c '%U %a' "/var/lib/rackpilot/$f")" = "rackpilot 600" ] ||
		fail "$f: $(in_root stat -c '%U %a' "/var/lib/rackpilot/$f")"
done
# A clean stop, as systemctl stop asks for one.
kill -TERM "$server"
i=0
while kill -0 "$server" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "the server did not stop within 10 s of SIGTERM"
	sleep 0.1
done
grep -q 'shutting down' "$work/server.log" || { cat "$work/server.log"; fail "no clean shutdown"; }
echo "package-test: the server ran as rackpilot from the packaged paths; README's tour passed" >&2

# 9. Remove, then purge (dpkg: the packages came from files, not from a repository apt knows):
# nothing of the packages left.
in_root apt-get remove -y -q rackpilotd rackpilot rackpilot-agent >>"$work/apt.log" 2>&1 || fail "apt-get remove"
[ -f "$root/etc/rackpilot/rackpilotd.conf" ] || fail "remove took the configuration (a conffile stays until purge)"
[ -d "$root/var/lib/rackpilot" ] || fail "remove took the data (it stays until purge)"
in_root dpkg --purge rackpilotd rackpilot rackpilot-agent >>"$work/apt.log" 2>&1 ||
	{ tail -20 "$work/apt.log"; fail "dpkg --purge"; }
for p in /etc/rackpilot /var/lib/rackpilot /var/lib/rackpilot-dhcp /usr/sbin/rackpilotd /usr/bin/rackpilot \
	/usr/sbin/rackpilot-agent /lib/systemd/system/rackpilotd.service /usr/share/doc/rackpilotd; do
	[ -e "$root$p" ] && fail "$p is left after purge"
done
# Nor the units' enablement and masks (deb-systemd-helper's links and state).
left=$(find "$root/etc/systemd" "$root/var/lib/systemd" -name '*rackpilot*' 2>/dev/null || true)
[ -z "$left" ] || fail "left after purge: $left"
for p in rackpilotd rackpilot rackpilot-agent; do
	st=$(in_root dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	case "$st" in
	"" | "un "* | "pn "*) ;;
	*) fail "$p is still known to dpkg as '$st'" ;;
	esac
done
echo "package-test: removed and purged cleanly" >&2
echo "package-test: ok"
