#!/bin/bash
# seed-check.sh - the e2e disk OS's cloud-init stand-in (disk/init) against NoCloud seeds made
# by hand, on the rig but without rackpilotd: what a deploy will do to a node's disk, done here
# with sfdisk and mtools, then the disk booted.
#
#   seed-check.sh     (as root; exit 0 pass, 77 cannot run here, anything else fail)
#
# The rig (rack.sh) with 4 VMs; a listener on the bridge (10.99.1.1:8099, python3) records every
# POST. Each VM's disk is disk.img on a 256 MiB disk with partition 2 grown (sfdisk -N 2 ", +")
# up to an 8 MiB CIDATA partition (FAT, label CIDATA, type c; as the agent makes it: aligned
# to 1 MiB, up to the disk's last sector) holding
# meta-data, user-data (MIME multipart as rackpilotd writes it: the operator's part, a
# cloud-config part with the keys, the first-boot script) and network-config:
#   vm1  DHCP; operator cloud-config (a key, runcmd); the script POSTs its report (curl where
#        the disk OS has it, else busybox wget): hostname, kernel, addresses, instance id, with
#        a bearer token
#   vm2  static 10.99.1.50/24 (route, nameserver, mtu 9000); operator user data a #! script;
#        its report goes out with busybox wget (vm1's with curl where the disk OS has it)
#   vm3  static 10.98.7.5/24 via 10.98.7.1, a subnet nobody serves: the report cannot go out
#   vm4  no seed partition at all
# Checked from the consoles and the listener: every VM reports its partitions (vda2 grown,
# vda3 the seed), vm1-3 their instance, host name, network and keys lines, the scripts' lines
# (runcmd's "hello", the operator's script, "rackpilot: first boot reported" or why not); the
# listener got exactly vm1's and vm2's reports, from their addresses, with their tokens and
# what each VM is; vm4 says it has no CIDATA. Then vm1 is power cycled: the same instance
# again, so its scripts do not run (no second report). Also: disk.img.gz, .zst and .qcow2 hold
# disk.img.
#
# Environment: as e2e.sh (AGENT for build-images.sh, E2E_IMAGES, E2E_CACHE, E2E_WORK,
# E2E_KEEP, E2E_DEADLINE); RACKPILOTD only to find the defaults of those (not run).
set -euo pipefail
E2E_NO_RACKPILOTD=1
# shellcheck source=lib.sh
. "$(dirname -- "$0")/lib.sh"

preflight
LISTEN_PORT=8099
# the seed as the agent makes it: 8 MiB, aligned to 1 MiB, up to the disk's last sector, type c
SEED_SECTORS=16384

# ---- helpers ---------------------------------------------------------------------------------
# seed_disk N [SEEDDIR]: VM N's disk = disk.img on a disk of the rack's size, partition 2 grown;
# with SEEDDIR, a CIDATA partition at the disk's end holding SEEDDIR's files (what a deploy does)
seed_disk() {
	local d=$W/vm$1/disk.img total start
	cp --sparse=always "$E2E_IMAGES/disk.img" "$d"
	truncate -s "$DISK_SIZE" "$d"
	total=$(($(stat -c %s "$d") / 512))
	if [ -n "${2:-}" ]; then
		start=$(((total - SEED_SECTORS) / 2048 * 2048))
		echo "$start,$((total - start)),c" | sfdisk -q --append "$d" > /dev/null
		rm -f "$W/vm$1/seed.fat"
		mkfs.vfat -n CIDATA -C "$W/vm$1/seed.fat" $(((total - start) / 2)) > /dev/null
		MTOOLS_SKIP_CHECK=1 mcopy -i "$W/vm$1/seed.fat" "$2/meta-data" "$2/user-data" "$2/network-config" ::
		dd if="$W/vm$1/seed.fat" of="$d" bs=512 seek="$start" conv=notrunc status=none
	fi
	echo ', +' | sfdisk -q -N 2 "$d" > /dev/null 2>&1
}

# part SIZE|START N DISK: a partition's size or start in sectors (sfdisk --json)
part() {
	sfdisk --json "$3" | python3 -c '
import json, sys
p = json.load(sys.stdin)["partitiontable"]["partitions"]
print(p[int(sys.argv[2]) - 1][sys.argv[1]])' "$1" "$2"
}

# report_script URL TOKEN INSTANCE TRIES [wget]: a first-boot script as rackpilotd writes one
# (POSIX sh, curl else busybox/GNU wget, retries, one line on stderr); with "wget", wget even
# where curl is (the disk OS has curl: DISK_TOOLS)
report_script() {
	cat << EOF
#!/bin/sh
# the first-boot report (seed-check.sh's stand-in for rackpilotd's)
url='$1'
token='$2'
iid='$3'
addrs=\$(ip -o addr show scope global 2> /dev/null | awk '{ sub(/\/.*/, "", \$4); printf "%s\"%s\"", n++ ? "," : "", \$4 }')
body="{\"hostname\":\"\$(hostname)\",\"kernel\":\"\$(uname -r)\",\"addresses\":[\$addrs],\"instance_id\":\"\$iid\"}"
n=0
while [ \$n -lt $4 ]; do
	if [ "$5" != wget ] && command -v curl > /dev/null 2>&1; then
		curl -fsS -m 10 -o /dev/null -H "Authorization: Bearer \$token" \\
			-H 'Content-Type: application/json' --data-binary "\$body" "\$url" 2> /tmp/report.err && ok=1
	else
		# (not wget -T: Debian 12's busybox is built without it, and -T makes it crash)
		timeout 15 wget -q -O /dev/null --header "Authorization: Bearer \$token" \\
			--header 'Content-Type: application/json' --post-data "\$body" "\$url" 2> /tmp/report.err && ok=1
	fi
	if [ -n "\${ok:-}" ]; then
		echo "rackpilot: first boot reported" >&2
		exit 0
	fi
	n=\$((n + 1))
	sleep 1
done
echo "rackpilot: first boot not reported: \$url: \$(tail -n 1 /tmp/report.err)" >&2
exit 1
EOF
}

# user_data OPERATOR-PART KEY SCRIPT: the multipart user-data (rackpilotd's format); the
# operator's part is a file ("" for none), its type from its first line
user_data() {
	local b=rackpilot-0123456789abcdef
	printf 'Content-Type: multipart/mixed; boundary="%s"\nMIME-Version: 1.0\n\n' "$b"
	if [ -n "$1" ]; then
		if head -n 1 "$1" | grep '^#!' > /dev/null; then
			printf -- '--%s\nContent-Type: text/x-shellscript; charset="utf-8"\nContent-Disposition: attachment; filename="operator.sh"\n\n' "$b"
		else
			printf -- '--%s\nContent-Type: text/cloud-config; charset="utf-8"\nContent-Disposition: attachment; filename="operator.cfg"\n\n' "$b"
		fi
		cat "$1"
	fi
	printf -- '--%s\nContent-Type: text/cloud-config; charset="utf-8"\nContent-Disposition: attachment; filename="rackpilot.cfg"\nMerge-Type: list(append)+dict(no_replace,recurse_list)+str()\n\n' "$b"
	printf '#cloud-config\nssh_authorized_keys:\n  - "%s"\n' "$2"
	printf -- '--%s\nContent-Type: text/x-shellscript; charset="us-ascii"\nContent-Disposition: attachment; filename="rackpilot-first-boot.sh"\n\n' "$b"
	cat "$3"
	printf -- '--%s--\n' "$b"
}

# cloudinit_check N SEEDDIR: where this machine has cloud-init, what it makes of the seed:
# every cloud-config part of the user-data must pass its schema check (python's email parser
# splits the parts, as cloud-init's does); its network-config parser's verdict is shown
# (a NOTE: the renderers other than netplan of cloud-init 22.4, Debian 12's, refuse a route
# "to: default", which vm2 and vm3 have; rackpilotd writes 0.0.0.0/0)
cloudinit_check() {
	command -v cloud-init > /dev/null || return 0
	local f
	rm -rf "$2/parts"
	mkdir -p "$2/parts"
	python3 - "$2/user-data" "$2/parts" << 'EOF' || fail "vm$1: user-data is not MIME as cloud-init reads it"
import email, sys
msg = email.message_from_file(open(sys.argv[1]))
assert msg.is_multipart(), "not multipart"
for n, part in enumerate(msg.walk()):
    if part.is_multipart():
        continue
    ext = {"text/cloud-config": "cfg", "text/x-shellscript": "sh"}[part.get_content_type()]
    open("%s/%d.%s" % (sys.argv[2], n, ext), "w").write(part.get_payload(decode=True).decode())
EOF
	for f in "$2"/parts/*.cfg; do
		cloud-init schema -c "$f" > "$2/schema.log" 2>&1 ||
			fail "vm$1: cloud-init's schema refuses a cloud-config part: $(cat "$2/schema.log") $(cat "$f")"
	done
	rm -rf "$2/net"
	if ! cloud-init devel net-convert -p "$2/network-config" -k yaml -d "$2/net" -D debian -O networkd \
		> "$2/net.log" 2>&1; then
		say "NOTE vm$1: cloud-init $(cloud-init --version 2>&1 | awk '{ print $2 }') (networkd renderer) refuses this network-config: $(tail -n 1 "$2/net.log")"
	fi
}

# console N: VM N's console since its last power on, without CRs
console() {
	awk '/=== e2e-rig: .* power on / { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' \
		"$W/vm$1/console.log" | tr -d '\r'
}
# want N REGEX: VM N's console (this boot) has a line matching REGEX; prints it
want() {
	# (into a file first: under pipefail, grep -m 1 ending a pipeline early fails it)
	console "$1" > "$W/vm$1/console.now"
	grep -aE -m 1 -- "$2" "$W/vm$1/console.now" || fail "vm$1: no console line matching /$2/; console:
$(console "$1" | grep -a 'rackpilot' | tail -n 30)"
}

# ---- images, rack, listener ------------------------------------------------------------------
phase "build images (cached)"
rc=0
"$E2E_DIR/build-images.sh" "$E2E_IMAGES" "$E2E_CACHE" || rc=$?
[ "$rc" = 3 ] && skip "no kernel package (apt-get download failed and $E2E_CACHE has none)"
[ "$rc" = 0 ] || fail "build-images.sh failed (exit $rc)"

phase "disk.img.gz, .zst, .qcow2 hold disk.img"
zcat "$E2E_IMAGES/disk.img.gz" | cmp - "$E2E_IMAGES/disk.img" || fail "disk.img.gz is not disk.img"
zstd -q -d -c "$E2E_IMAGES/disk.img.zst" | cmp - "$E2E_IMAGES/disk.img" || fail "disk.img.zst is not disk.img"
qemu-img compare -q -f raw -F qcow2 "$E2E_IMAGES/disk.img" "$E2E_IMAGES/disk.qcow2" ||
	fail "disk.qcow2 is not disk.img"
qemu-img info "$E2E_IMAGES/disk.qcow2" | grep -F 'compression type: zlib' > /dev/null ||
	fail "disk.qcow2: $(qemu-img info "$E2E_IMAGES/disk.qcow2")"
(cd "$E2E_IMAGES" && grep -E ' disk\.(img|img\.gz|img\.zst|qcow2)$' SHA256SUMS | sha256sum -c --quiet) ||
	fail "SHA256SUMS does not match the disk images"
say "$(for f in disk.img disk.img.gz disk.img.zst disk.qcow2; do printf '%s %s bytes; ' "$f" "$(stat -c %s "$E2E_IMAGES/$f")"; done)"
IMG_P2_START=$(part start 2 "$E2E_IMAGES/disk.img")
IMG_P2_SIZE=$(part size 2 "$E2E_IMAGES/disk.img")
[ "$(sfdisk --json "$E2E_IMAGES/disk.img" | jpy 'd["partitiontable"]["partitions"][-1]["type"]')" = 83 ] ||
	fail "disk.img: the last partition is not of type 83"

phase "rack up (4 VMs) + listener on the bridge (:$LISTEN_PORT)"
new_work rp-seed
E2E_VMS=4 E2E_VM_MEM=256 "$E2E_DIR/rack.sh" up
load_rack
cat > "$W/listener.py" << 'EOF'
# records every POST as one JSON line; answers 200 {}; writes its pid to argv[4]
import http.server, json, os, sys, time
addr, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
open(sys.argv[4], "w").write("%d\n" % os.getpid())
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        rec = {"at": time.time(), "client": self.client_address[0], "path": self.path,
               "authorization": self.headers.get("Authorization"),
               "content_type": self.headers.get("Content-Type"),
               "user_agent": self.headers.get("User-Agent"),
               "body": body.decode("utf-8", "replace")}
        with open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer((addr, port), H).serve_forever()
EOF
: > "$W/posts.jsonl"
nsx python3 "$W/listener.py" "$BR_IP" "$LISTEN_PORT" "$W/posts.jsonl" "$W/listener.pid" \
	< /dev/null > "$W/listener.log" 2>&1 &
# (its own pid: python3 may be a wrapper that forks)
record_pid $! listener-launcher
wait_for 10 "the listener answers" nsx curl -fs -o /dev/null -X POST --data-binary x "http://$BR_IP:$LISTEN_PORT/probe"
record_pid "$(cat "$W/listener.pid")" listener
: > "$W/posts.jsonl"

phase "seed the disks (grow partition 2, append CIDATA)"
URL=http://$BR_IP:$LISTEN_PORT/v1/agent/first-boot
pubkey() { # COMMENT: a new ed25519 public key
	rm -f "$W/key"
	dropbearkey -t ed25519 -f "$W/key" > /dev/null 2>&1
	echo "$(dropbearkey -y -f "$W/key" | grep '^ssh-ed25519 ' | cut -d' ' -f1,2) $1"
}
KEY_OP=$(pubkey op@example)
KEY_RP=$(pubkey e2e-test)
declare -A IID TOKEN
for i in 1 2 3; do
	vm "$i"
	s=$W/seed$i
	mkdir -p "$s"
	IID[$i]=rp-$(cat /proc/sys/kernel/random/uuid)
	TOKEN[$i]=rpf_seedcheck_${i}_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	printf 'instance-id: "%s"\nlocal-hostname: "%s"\nrackpilot-node: "%s"\n' "${IID[$i]}" "$NAME" "$NAME" > "$s/meta-data"
	report_script "$URL" "${TOKEN[$i]}" "${IID[$i]}" 5 "$([ "$i" = 2 ] && echo wget)" > "$s/report.sh"
	case $i in
	1)
		printf '#cloud-config\nssh_authorized_keys:\n  - "%s"\nruncmd:\n  - echo hello\n  - [ sh, -c, "echo runcmd list: $(printf %%s ok)" ]\n' "$KEY_OP" > "$s/operator"
		printf 'version: 2\nethernets:\n  eth0:\n    match:\n      macaddress: "%s"\n    dhcp4: true\n' "$MAC" > "$s/network-config"
		;;
	2)
		printf '#!/bin/sh\necho "operator script on $(hostname)"\n' > "$s/operator"
		printf 'version: 2\nethernets:\n  eth0:\n    match:\n      macaddress: "%s"\n    addresses:\n      - "10.99.1.50/24"\n    routes:\n      - to: "default"\n        via: "10.99.1.1"\n    nameservers:\n      addresses:\n        - "10.99.1.1"\n    mtu: 9000\n' "$MAC" > "$s/network-config"
		;;
	3)
		: > "$s/operator"
		printf 'version: 2\nethernets:\n  eth0:\n    match:\n      macaddress: "%s"\n    addresses:\n      - "10.98.7.5/24"\n    routes:\n      - to: "default"\n        via: "10.98.7.1"\n' "$MAC" > "$s/network-config"
		;;
	esac
	user_data "$([ -s "$s/operator" ] && echo "$s/operator")" "$KEY_RP" "$s/report.sh" > "$s/user-data"
	cloudinit_check "$i" "$s"
	seed_disk "$i" "$s"
done
seed_disk 4
for i in 1 2 3 4; do
	say "vm$i: $(sfdisk -d "$W/vm$i/disk.img" | grep '^/' | sed 's|.*/disk.img||' | tr -s ' ' | tr '\n' ';')"
done

phase "boot the disks"
for i in 1 2 3 4; do
	"$E2E_DIR/rack.sh" ipmi "$i" chassis bootdev disk > /dev/null
	"$E2E_DIR/rack.sh" ipmi "$i" chassis power on > /dev/null
done
booted() { console_has "$1" 'rackpilot-e2e: boot finished'; }
for i in 1 2 3 4; do wait_for 180 "vm$i: boot finished" booted "$i"; done

phase "check consoles + reports"
TOTAL=$(($(stat -c %s "$W/vm1/disk.img") / 512))
SEED_START=$(((TOTAL - SEED_SECTORS) / 2048 * 2048))
P2=$((SEED_START - IMG_P2_START))
for i in 1 2 3 4; do
	vm "$i"
	want "$i" "rackpilot-e2e: running from disk \(mac $MAC\)" > /dev/null
	want "$i" "rackpilot-e2e: partition vda1 start 2048 size [0-9]+ sectors vfat RPE2E" > /dev/null
	if ((i < 4)); then
		want "$i" "rackpilot-e2e: partition vda2 start $IMG_P2_START size $P2 sectors ext4 rproot" > /dev/null
		want "$i" "rackpilot-e2e: partition vda3 start $SEED_START size $((TOTAL - SEED_START)) sectors vfat CIDATA" > /dev/null
		want "$i" "rackpilot-e2e: cidata /dev/vda3 \(findfs\): meta-data network-config user-data" > /dev/null
		want "$i" "rackpilot-e2e: cidata instance-id ${IID[$i]} hostname $NAME\$" > /dev/null
		want "$i" "rackpilot-e2e: keys $((i == 1 ? 2 : 1)):( op@example)? e2e-test\$" > /dev/null
		want "$i" "rackpilot-e2e: script rackpilot-first-boot.sh exit $((i == 3 ? 1 : 0))\$" > /dev/null
	else
		want "$i" "rackpilot-e2e: partition vda2 start $IMG_P2_START size $((($(stat -c %s "$W/vm4/disk.img") / 512) - IMG_P2_START)) sectors ext4" > /dev/null
		want "$i" "rackpilot-e2e: no CIDATA filesystem" > /dev/null
		! console "$i" | grep -a 'rackpilot-e2e: \(cidata\|network\|keys\|script\)' ||
			fail "vm4 (no seed) configured something"
	fi
	say "vm$i: $(console "$i" | grep -a 'rackpilot-e2e: \(cidata instance\|network\|keys\|no CIDATA\)' | sed 's/rackpilot-e2e: //' | tr '\n' ';')"
done
want 1 '^hello$' > /dev/null
want 1 '^runcmd list: ok$' > /dev/null
want 1 'rackpilot-e2e: script runcmd exit 0' > /dev/null
A1=$(want 1 'rackpilot-e2e: network eth0 dhcp 10\.99\.1\.[0-9]+/24$' | sed 's/.* dhcp \(.*\)\/24$/\1/')
vm 1
grep -F " $MAC $A1 " "$W/dnsmasq.leases" > /dev/null || fail "vm1: $A1 is not its DHCP lease: $(cat "$W/dnsmasq.leases")"
want 2 'rackpilot-e2e: network eth0 static 10\.99\.1\.50/24 routes default via 10\.99\.1\.1 mtu 9000$' > /dev/null
want 2 '^operator script on e2e-vm2$' > /dev/null
want 3 'rackpilot-e2e: network eth0 static 10\.98\.7\.5/24 routes default via 10\.98\.7\.1$' > /dev/null
want 3 '^rackpilot: first boot not reported: ' > /dev/null
for i in 1 2; do want "$i" '^rackpilot: first boot reported$' > /dev/null; done
# the listener: vm1's and vm2's reports, nothing else
python3 - "$W/posts.jsonl" "$A1" "${TOKEN[1]}" "${IID[1]}" "${TOKEN[2]}" "${IID[2]}" \
	"$(sed -n 's/^kernel=//p' "$E2E_IMAGES/BUILDINFO")" << 'EOF' || fail "the reports: $(cat "$W/posts.jsonl")"
import json, sys
posts, a1, t1, i1, t2, i2, kernel = sys.argv[1:]
got = [json.loads(l) for l in open(posts)]
want = {a1: ("e2e-vm1", t1, i1), "10.99.1.50": ("e2e-vm2", t2, i2)}
assert sorted(p["client"] for p in got) == sorted(want), "clients %s" % [p["client"] for p in got]
for p in got:
    host, token, iid = want[p["client"]]
    b = json.loads(p["body"])
    assert p["path"] == "/v1/agent/first-boot", p
    assert p["authorization"] == "Bearer " + token, p
    assert p["content_type"] == "application/json", p
    assert b["hostname"] == host and b["kernel"] == kernel and b["instance_id"] == iid, b
    assert p["client"] in b["addresses"], b
    # vm2's script uses wget even where the disk OS has curl
    assert p["client"] != "10.99.1.50" or p["user_agent"] == "Wget", p
    print("report from %s (%s): %s" % (p["client"], p["user_agent"], p["body"]))
EOF

phase "power cycle vm1: the same instance again"
: > "$W/posts.before"
cp "$W/posts.jsonl" "$W/posts.before"
"$E2E_DIR/rack.sh" ipmi 1 chassis power cycle > /dev/null
cycled() { [ "$(grep -c '=== e2e-rig: .* power on' "$W/vm1/console.log")" -ge 2 ] && booted 1; }
wait_for 180 "vm1: boot finished again" cycled
want 1 "rackpilot-e2e: instance ${IID[1]} seen before on /dev/vda2: scripts not run" > /dev/null
want 1 "rackpilot-e2e: network eth0 dhcp $A1/24" > /dev/null
want 1 "rackpilot-e2e: keys 2:" > /dev/null
! console 1 | grep -a 'rackpilot-e2e: script ' || fail "vm1 ran scripts on its second boot"
cmp -s "$W/posts.before" "$W/posts.jsonl" || fail "vm1 reported again: $(cat "$W/posts.jsonl")"
say "vm1: second boot configured again (network, keys), ran no script, sent no report"

timings
pass
echo "PASS: seed-check: the disk OS reads its NoCloud seed (hostname, network, keys, scripts, once per instance)"
