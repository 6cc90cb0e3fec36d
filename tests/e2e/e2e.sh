#!/bin/bash
# e2e.sh - Rackpilot's end-to-end test: a rack in a box, provisioned through the real rackpilotd
# API only.
#
#   e2e.sh            (as root; exit 0 pass, 77 cannot run here, anything else fail)
#
# The rack (rack.sh): a network namespace with bridge 10.99.1.1/24, dnsmasq (DHCP + TFTP, its
# dhcp-hostsfile kept by rackpilotd), and per VM an IPMI BMC (ipmi_sim) whose chassis control
# starts and stops a QEMU VM (TCG) with a blank virtio disk; the VM's serial port is the BMC's
# Serial over LAN console (rackpilotd logs it: console_log). rackpilotd runs inside the
# namespace on 10.99.1.1:8080. Then, for 2 VMs (E2E_VMS), through the API only:
#   1. images: agent kernel + initrd and the OS disk image, raw and as .img.gz, .img.zst and
#      .qcow2, uploaded (PUT /v1/images, sha256 checked), a boot profile "default", a class
#      recipe "commission-e2e-vm";
#   2. enroll (MAC, serial, UUID, IPMI BMC) -> manage (BMC verify: FRU serial + GUID) ->
#      manageable;
#   3. commission: rackpilotd sets one-time PXE and powers on over IPMI; the VM iPXE-boots the
#      script from GET /boot/ipxe, boots the agent ramdisk, registers with its single-use token;
#      rackpilotd SSHes in, runs inventory + the class recipe, powers off -> ready. VM 1 is
#      commissioned alone first: its times are the benchmark (commission request -> ready, and
#      the bare PXE boot = power on -> the ramdisk's init line). Checked: the inventory is the
#      VM (MAC, memory, disk size, SMBIOS serial/UUID), the pinned host key is the one the
#      ramdisk printed, the agent address is its DHCP lease, dnsmasq knew the MAC by name; the
#      node's console log (GET /v1/nodes/N/console/log, from the BMC's SOL) holds the boot's
#      iPXE banner, the script's line and the kernel's boot and command lines;
#   4. deploy, three cases, each ending only with the deployed OS's first-boot report or its
#      timeout (the disk image's /init stands in for cloud-init; seed-check.sh proves it alone):
#      A. VM 1 (and VMs 3+) the raw image with a config (hostname, an SSH key, user data with a
#         runcmd) -> deployed: the job's result holds first_boot (host name, kernel, the VM's
#         DHCP address), the node turned deployed after the OS started its report script, the
#         VM's disk file has the image's partition 1, partition 2 grown up to the NoCloud seed
#         (FAT CIDATA, the disk's last partition, at its end; meta-data names instance
#         rp-JOB), the console (and the node's console log) shows the OS reading the seed,
#         its key and runcmd; the BMC boot device is disk, iPXE did not run on that boot; the
#         deploy boot's token and the first-boot token are refused on reuse;
#      B. VM 2 the zstd image on a static address nobody routes (first_boot_timeout_s 30) ->
#         deploy_failed, error first_boot_timeout with the console's last lines;
#      C. VM 1 (released: 6.) the gzip image, VM 2 (from deploy_failed) the qcow2 one, no
#         config -> both deployed through their reports, partition 1 intact;
#   5. every transition is a node.provision event (an unbroken chain); the token the VM used is
#      refused on reuse ("already used"); GET /boot/ipxe of a ready or deployed node is the
#      local-disk script;
#   6. release VM 1 (metadata wipe; between B and C) -> ready: the first and last MiB of its
#      disk are zeros (boot sector, seed), it is off;
#   7. timings.
#
# Environment: RACKPILOTD, AGENT (binaries; default build/ of this checkout, AGENT next to
# RACKPILOTD), E2E_IMAGES (default BUILD/e2e-images), E2E_CACHE (kernel .deb cache, default
# BUILD/e2e-cache), E2E_WORK (work dir, default a new /tmp/rp-e2e.XXXXXX, removed on success),
# E2E_KEEP=1 (leave the rack up), E2E_VMS (2), E2E_TIMEOUT (s per lifecycle wait, 300),
# E2E_DEADLINE (s for the whole run, 780: then it stops itself and cleans up; see lib.sh),
# E2E_TIMINGS (also write the timings to this file), E2E_CONSOLE_LOG (rackpilotd's console_log,
# default always: see the rackpilotd step).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname -- "$0")/lib.sh"

# shellcheck disable=SC2119  # no extra tools
preflight
VMS_WANTED=${E2E_VMS:-2}
LIMIT=${E2E_TIMEOUT:-300}
CLASS=e2e-vm
DISK_IMAGE=e2e-disk

# ---- helpers ---------------------------------------------------------------------------------
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }
iso2epoch() { date -u -d "$1" +%s.%N; }

# ts_first N SINCE REGEX: epoch of VM N's first console line at or after SINCE matching REGEX
ts_first() {
	awk -v s="$2" -v re="$3" '$1 >= s { l = $0; sub(/^[^ ]+ /, "", l); if (l ~ re) { print $1; f = 1; exit } }
		END { exit !f }' "$W/vm$1/console.ts"
}
# ts_line N SINCE REGEX: that line (without its stamp)
ts_line() {
	awk -v s="$2" -v re="$3" '$1 >= s { l = $0; sub(/^[^ ]+ /, "", l); if (l ~ re) { print l; f = 1; exit } }
		END { exit !f }' "$W/vm$1/console.ts"
}
# power_on_at N SINCE: epoch of VM N's first BMC power on at or after SINCE (chassis-control's log)
power_on_at() {
	local iso rest t
	while read -r iso rest; do
		[[ $rest == "power on"* ]] || continue
		t=$(iso2epoch "$iso")
		awk -v t="$t" -v s="$2" 'BEGIN { exit !(t >= s) }' && { echo "$t"; return 0; }
	done < "$W/vm$1/power.log"
	return 1
}

# sol_lines FILE SINCE UNTIL: the lines of a console log from the API ("STAMP text", GET
# /v1/nodes/N/console/log) stamped from SINCE to UNTIL (epoch seconds), without their stamps
sol_lines() {
	python3 -c '
import datetime, sys
since, until = float(sys.argv[2]), float(sys.argv[3])
for l in open(sys.argv[1], encoding="utf-8", errors="replace"):
    ts, _, text = l.rstrip("\n").partition(" ")
    try:
        t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        continue
    if since <= t.replace(tzinfo=datetime.timezone.utc).timestamp() <= until:
        print(text)
' "$@"
}

# boot_token N SINCE: the bootstrap token VM N booted with after SINCE (the kernel prints its
# command line on the console)
boot_token() {
	ts_line "$1" "$2" 'Command line: .*rackpilot\.token=' | sed -n 's/.*rackpilot\.token=\([^ ]*\).*/\1/p'
}

# token_refused NODE TOKEN: registering with TOKEN again is refused because it was used
token_refused() {
	local st
	[[ $2 == rpb_* ]] || fail "$1: bootstrap token from the console: '$2'"
	st=$(nsx curl -sS "${RP_TLS[@]}" -o "$W/reuse.json" -w '%{http_code}' --max-time 10 -X POST \
		-H "Authorization: Bearer $2" -H 'Content-Type: application/json' \
		--data-binary '{"format":1,"agent_version":"e2e","hostname":"intruder","boot_id":"00000000-0000-4000-8000-000000000000","macs":["02:00:00:00:00:01"],"ssh_host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl e2e"}' \
		"$RP_URL/v1/agent/register") || st=000
	if [ "$st" != 401 ] || ! grep -q "already used" "$W/reuse.json"; then
		fail "$1: reusing its bootstrap token: HTTP $st $(cat "$W/reuse.json")"
	fi
}

# boot_script MAC: GET /boot/ipxe?mac=MAC as iPXE would (no token) into $W/script.last
boot_script() {
	local st
	st=$(nsx curl -sS -o "$W/script.last" -w '%{http_code}' --max-time 10 \
		"$RP_BOOT_URL/boot/ipxe?mac=$1") || st=000
	[ "$st" = 200 ] || fail "GET /boot/ipxe?mac=$1: HTTP $st"
}

# ---- 0. images, rack, rackpilotd --------------------------------------------------------------
phase "build images (cached)"
rc=0
"$E2E_DIR/build-images.sh" "$E2E_IMAGES" "$E2E_CACHE" || rc=$?
[ "$rc" = 3 ] && skip "no kernel package (apt-get download failed and $E2E_CACHE has none)"
[ "$rc" = 0 ] || fail "build-images.sh failed (exit $rc)"

phase "rack up ($VMS_WANTED VMs)"
new_work rp-e2e
E2E_VMS=$VMS_WANTED E2E_PORT=8080 "$E2E_DIR/rack.sh" up
load_rack
for i in $(seq 1 "$VMS"); do
	: > "$W/vm$i/console.ts"
	python3 "$E2E_DIR/console-ts.py" "$W/vm$i/console.log" "$W/vm$i/console.ts" < /dev/null &
	record_pid $! "console-ts-vm$i"
done

phase "rackpilotd up (in the namespace)"
# The nodes' serial consoles (SOL) are logged while they boot through rackpilotd (console_log
# active, the default): the commission job waits for a node's SOL before it powers it on, so
# the log holds the boot from iPXE's banner on. E2E_CONSOLE_LOG=always logs them all along (the
# test then also waits for each node's SOL before it commissions it).
E2E_CONSOLE_LOG=${E2E_CONSOLE_LOG:-active}
rackpilotd_conf "$W/rackpilotd.conf"
start_rackpilotd "$W/rackpilotd.conf"

# ---- 1. images, boot profile, recipe ---------------------------------------------------------
phase "upload images + boot profile"
upload agent-kernel kernel "$E2E_IMAGES/vmlinuz"
upload agent-initrd initrd "$E2E_IMAGES/agent-initrd"
upload "$DISK_IMAGE" os "$E2E_IMAGES/disk.img"
# the same disk compressed and as qcow2: rackpilotd takes the format from the name
upload "$DISK_IMAGE.img.gz" os "$E2E_IMAGES/disk.img.gz"
upload "$DISK_IMAGE.img.zst" os "$E2E_IMAGES/disk.img.zst"
upload "$DISK_IMAGE.qcow2" os "$E2E_IMAGES/disk.qcow2"
[ -f "$W/images/agent-kernel" ] || fail "the image store is not $W/images"
api_expect 201 POST /v1/boot-profiles '{"name":"default","kernel":"agent-kernel",
	"initrd":"agent-initrd","cmdline":"console=ttyS0","description":"e2e agent ramdisk"}' > /dev/null
# Runs after the built-in inventory step of every commission of class e2e-vm: proves the plan
# ran as root on the VM itself. (No ${...} here: recipe placeholders.)
api_expect 201 POST /v1/recipes "{\"name\":\"commission-$CLASS\",\"steps\":[
	{\"id\":\"whoami\",\"type\":\"shell\",\"timeout_s\":60,
	 \"command\":\"echo \\\"e2e-whoami uid=\$(id -u) host=\$(hostname) mac=\$(cat /sys/class/net/eth0/address) kernel=\$(uname -r)\\\"\"}]}" \
	> /dev/null

# ---- 2. enroll + manage ----------------------------------------------------------------------
phase "enroll + manage (BMC verify)"
NODES=()
for i in $(seq 1 "$VMS"); do
	vm "$i"
	NODES+=("$NAME")
	api_expect 201 POST /v1/nodes "{\"name\":\"$NAME\",\"node_class\":\"$CLASS\",\"macs\":[\"$MAC\"],
		\"serial\":\"$SERIAL\",\"system_uuid\":\"$UUID\",\"bmc\":$(bmc_json "$i")}" > /dev/null
done
hosts_listed() {
	local i
	for i in $(seq 1 "$VMS"); do
		vm "$i"
		grep -qx "$MAC,$NAME" "$DNSMASQ_HOSTS" || return 1
	done
}
wait_for 15 "rackpilotd wrote every MAC into dnsmasq's hosts file" hosts_listed
declare -A VERIFY_JOB
for node in "${NODES[@]}"; do VERIFY_JOB[$node]=$(provision "$node" '{"action":"manage"}'); done
wait_states manageable "${NODES[@]}"
for node in "${NODES[@]}"; do
	j=$(wait_job "${VERIFY_JOB[$node]}" 30)
	checks=$(echo "$j" | jpy '" ".join(c["check"] + "=" + c["status"] for c in d["result"]["checks"])')
	[ "$checks" = "serial=ok uuid=ok" ] || fail "$node: BMC verify checks: $checks"
	say "$node: BMC verified ($checks)"
done
# console_log = always: every node's SOL is open from its enrollment on, once rackpilotd (which
# looks for consoles to open every 2 s) has set it up. Wait for that, so that the commission
# boot is logged from its first line: a manage as quick as ours ends within that time.
sol_up() { # NODE: rackpilotd's last word in the node's console log is "SOL connected"
	api GET "/v1/nodes/$1/console/log?tail=200"
	[ "$API_STATUS" = 200 ] &&
		[ "$(grep -F ' [rackpilot] ' "$API_BODY" | tail -n 1 | cut -d' ' -f2-)" = "[rackpilot] SOL connected" ]
}
if [ "$E2E_CONSOLE_LOG" = always ]; then
	for node in "${NODES[@]}"; do wait_for 30 "$node: its console (SOL) is logged" sol_up "$node"; done
fi

# ---- 3. commission ---------------------------------------------------------------------------
declare -A COMMISSION_JOB REQ_AT
commission() { # NODE...
	local node
	for node in "$@"; do
		REQ_AT[$node]=$EPOCHREALTIME
		COMMISSION_JOB[$node]=$(provision "$node" "{\"action\":\"commission\",\"timeout_s\":$LIMIT}")
		[ -n "${COMMISSION_JOB[$node]}" ] || fail "$node: commission made no job"
	done
	wait_states ready "$@"
}
AT=()
phase "commission ${NODES[0]} alone (benchmark)"
commission "${NODES[0]}"
if ((VMS > 1)); then
	phase "commission ${NODES[*]:1} (in parallel)"
	commission "${NODES[@]:1}"
fi

phase "check commissioned nodes (inventory, host key, DHCP, console log)"
declare -A TOKEN SOL_LINES
for i in $(seq 1 "$VMS"); do
	vm "$i"
	nj=$W/$NAME.ready.json
	[ "$(jget .provision_error "$nj" || echo null)" = null ] || fail "$NAME: provision_error $(jget .provision_error "$nj")"
	pon=$(power_on_at "$i" "${REQ_AT[$NAME]}") || fail "$NAME: no BMC power on after the commission request"
	# the ramdisk's lines of this boot
	pinned=$(jget .ssh.host_key.fingerprint "$nj") || fail "$NAME: no pinned host key"
	printed=$(ts_line "$i" "$pon" 'e2e-agent: .*hostkey-fingerprint ' | sed 's/.*hostkey-fingerprint //') ||
		fail "$NAME: the ramdisk printed no host key"
	[ "$pinned" = "$printed" ] || fail "$NAME: pinned host key $pinned, the ramdisk printed $printed"
	addr=$(jget .agent.address "$nj")
	grep -q " $MAC $addr " "$W/dnsmasq.leases" || fail "$NAME: agent address $addr is not its DHCP lease"
	grep -qE "DHCPACK\(br0\) $addr $MAC $NAME\$" "$W/dnsmasq.log" ||
		fail "$NAME: dnsmasq did not hand out $addr under the name from rackpilotd's hosts file"
	ts_line "$i" "$pon" "Rackpilot: $NAME \(commissioning\): agent ramdisk" > /dev/null ||
		fail "$NAME: iPXE did not run rackpilotd's commissioning script"
	# the bootstrap token this boot used: on the kernel command line the console shows
	TOKEN[$NAME]=$(boot_token "$i" "$pon") || fail "$NAME: no kernel command line on the console"
	# The VM's serial port is its BMC's Serial over LAN console, which rackpilotd logs
	# (console_log; see "rackpilotd up"): the log the API serves holds this boot's iPXE and
	# kernel lines, in that order, and its kernel command line with the token masked.
	api_expect 200 GET "/v1/nodes/$NAME/console/log?tail=2000" > "$W/vm$i/sol.log"
	sol_lines "$W/vm$i/sol.log" "$pon" "${AT[$NAME]}" > "$W/vm$i/sol.commission"
	sol_fail() {
		fail "$NAME: its console log (SOL, GET /v1/nodes/$NAME/console/log) $1; rackpilotd:" \
			"$(grep -F "console: $NAME:" "$W/rackpilotd.log" | tail -n 5)" \
			"log: $(grep -v '^[^ ]* \[    ' "$W/vm$i/sol.log" | head -n 40)"
	}
	sol_order=$(awk '/iPXE initialising devices/ && !i { i = NR }
		/Open Source Network Boot Firmware/ && !b { b = NR }
		/Linux version [0-9]/ && !k { k = NR }
		END { print (i && b && k && i < k && b < k) ? "ok" : "i=" i " banner=" b " kernel=" k }' \
		"$W/vm$i/sol.commission")
	[ "$sol_order" = ok ] ||
		sol_fail "lacks the commission boot's iPXE banner and kernel boot lines, in order ($sol_order)"
	# The kernel command line of this boot, its bootstrap token masked: the log is for
	# operators, the token for the node alone (docs/bmc.md).
	grep -E "Command line: .*rackpilot\.token=\*{${#TOKEN[$NAME]}} " "$W/vm$i/sol.commission" \
		> /dev/null || sol_fail "has not the kernel command line of this boot, its token masked"
	! grep -F "${TOKEN[$NAME]}" "$W/vm$i/sol.log" > /dev/null ||
		sol_fail "shows the node's bootstrap token"
	grep -E "Rackpilot: $NAME \(commissioning\): agent ramdisk" "$W/vm$i/sol.commission" > /dev/null ||
		sol_fail "has not the commissioning script's line"
	SOL_LINES[$NAME]=$(wc -l < "$W/vm$i/sol.commission")
	say "$NAME: console log (SOL): ${SOL_LINES[$NAME]} lines of the commission boot" \
		"($(grep -c '' "$W/vm$i/sol.log") in all; console.log: $(awk -v s="$pon" -v u="${AT[$NAME]}" \
		'$1 >= s && $1 <= u' "$W/vm$i/console.ts" | wc -l) lines), iPXE banner + kernel boot lines in it"
	# ... which sent its agent to the HTTPS API, pinned to the server's key: the registration
	# (the pin just checked) went over that.
	ts_line "$i" "$pon" "Command line: .*rackpilot\.url=https://$BR_IP:$PORT .*rackpilot\.tls_sha256=$RP_FINGERPRINT " \
		> /dev/null || fail "$NAME: the ramdisk was not given the HTTPS API and its pin"
	ipmi_status=$("$E2E_DIR/rack.sh" ipmi "$i" chassis power status)
	[ "$ipmi_status" = "Chassis Power is off" ] || fail "$NAME after commissioning: $ipmi_status"
	# The job's final power off is the node's recorded power state at once (not the next sweep).
	ps=$(jget .power_state "$nj")
	[ "$ps" = off ] || fail "$NAME is ready and powered off, yet its power_state is $ps"

	api_expect 200 GET "/v1/nodes/$NAME/inventory" > "$W/vm$i/inventory.json"
	[ "$(jget .source "$W/vm$i/inventory.json")" = agent ] || fail "$NAME: inventory not from the agent"
	got=$(jpy '"%s|%s|%s|%s|%s" % (
		d["data"]["memory"]["total_bytes"],
		json.dumps([x["size_bytes"] for x in d["data"]["disks"]["items"] if x["name"] == "vda"]),
		json.dumps([x["mac"] for x in d["data"]["nics"]["items"]]),
		d["data"]["system"]["serial"], d["data"]["system"]["uuid"])' "$W/vm$i/inventory.json")
	IFS='|' read -r mem disk macs serial uuid <<< "$got"
	mem_mib=$((mem / 1048576))
	# MemTotal is the VM's -m less what firmware and kernel keep: 80-100 %
	((mem_mib <= VM_MEM && mem_mib * 100 >= VM_MEM * 80)) || fail "$NAME: memory $mem_mib MiB vs -m $VM_MEM"
	size=$(stat -c %s "$W/vm$i/disk.img")
	[ "$disk" = "[$size]" ] || fail "$NAME: inventory disk vda $disk, the VM's disk is $size bytes"
	[[ $macs == *"\"$MAC\""* ]] || fail "$NAME: inventory NIC MACs $macs, want $MAC"
	[ "$serial" = "$SERIAL" ] || fail "$NAME: inventory SMBIOS serial $serial, want $SERIAL"
	[ "$uuid" = "$UUID" ] || fail "$NAME: inventory SMBIOS UUID $uuid, want $UUID"

	api_expect 200 GET "/v1/jobs/${COMMISSION_JOB[$NAME]}/log" > "$W/vm$i/commission.log"
	grep -q "e2e-whoami uid=0 host=rp-${MAC//:/} mac=$MAC " "$W/vm$i/commission.log" ||
		fail "$NAME: the class recipe's step did not run on the VM: $(head -c 2000 "$W/vm$i/commission.log")"
	boot_script "$MAC"
	if ! grep -q "booting from the local disk" "$W/script.last" || grep -q rackpilot.token "$W/script.last"; then
		fail "$NAME (ready): boot script is not the local disk: $(cat "$W/script.last")"
	fi
	say "$NAME: agent at $addr, host key $pinned (= console); inventory: $mem_mib MiB," \
		"vda $size bytes, $MAC, serial $serial, uuid $uuid"
done

phase "power sync agrees with the BMCs"
sweep_started() { # POST /v1/power/sync; 409 = one is running already: try again
	t=$EPOCHREALTIME
	api POST /v1/power/sync
	[ "$API_STATUS" = 202 ] && return 0
	[ "$API_STATUS" = 409 ] || fail "POST /v1/power/sync: HTTP $API_STATUS $(cat "$API_BODY")"
	return 1
}
wait_for 30 "a power sweep started" sweep_started
swept() { # the sweep started after t has finished
	api GET /v1/power/sync
	[ "$API_STATUS" = 200 ] && [ "$(jget .running "$API_BODY")" = false ] || return 1
	local at
	at=$(jget .last.started_at "$API_BODY") || return 1
	awk -v a="$(iso2epoch "$at")" -v t="$t" 'BEGIN { exit !(a >= t - 0.01) }'
}
wait_for 30 "a power sweep" swept
for node in "${NODES[@]}"; do
	ps=$(api_expect 200 GET "/v1/nodes/$node" | jget .power_state)
	[ "$ps" = off ] || fail "$node: power_state $ps after a sweep; its BMC says off"
done

phase "bootstrap token reuse"
for node in "${NODES[@]}"; do
	token_refused "$node" "${TOKEN[$node]}"
	say "$node: the token it registered with is refused on reuse (401, already used)"
done

# ---- 4. deploy: an OS that comes up configured -----------------------------------------------
# A deploy writes the image (raw, .gz/.zst decompressed, qcow2 converted as it streams), grows
# the last Linux partition and adds a NoCloud seed (FAT "CIDATA": meta-data, user-data,
# network-config) at the end of the disk; the node then boots its disk, and the job succeeds
# only when the deployed OS reports its first boot (POST /v1/agent/first-boot, single-use
# token), else fails with first_boot_timeout. disk.img's /init is the stand-in for cloud-init
# (disk/init, proven alone by seed-check.sh). Three cases on the two VMs, overlapped:
#   A. VM 1 (and VMs 3+): e2e-disk (raw) with a config (hostname, a key, user data) -> deployed
#      through the report; the job's result, the consoles, the disk file and the token checked;
#   B. VM 2: e2e-disk.img.zst with a static address nobody routes and first_boot_timeout_s 30
#      -> deploy_failed, first_boot_timeout, the console's last lines in the message;
#   C. then VM 1 (released first) e2e-disk.img.gz, VM 2 (from deploy_failed) e2e-disk.qcow2,
#      no config (the defaults: the node's name, DHCP) -> both deployed through the report.
KEY=$( (rm -f "$W/e2e-key" && dropbearkey -t ed25519 -f "$W/e2e-key" > /dev/null 2>&1 &&
	dropbearkey -y -f "$W/e2e-key") | grep '^ssh-ed25519 ' | cut -d' ' -f1,2)" e2e-test"
[[ $KEY == "ssh-ed25519 AAAA"* ]] || fail "no test key from dropbearkey: $KEY"
KVER=$(sed -n 's/^kernel=//p' "$E2E_IMAGES/BUILDINFO")
UNROUTED=10.98.7.5
FIRST_BOOT_TIMEOUT=30
# the image's partitions: 1 (FAT, syslinux) must arrive unchanged, 2 (ext4) grown
read -r IMG_P1_START IMG_P1_SIZE IMG_P2_START IMG_P2_SIZE < <(sfdisk --json "$E2E_IMAGES/disk.img" |
	jpy '" ".join(str(p[k]) for p in d["partitiontable"]["partitions"][:2] for k in ("start", "size"))')

# deploy_config HOST: case A's config (HOST is not the node's name, which is the default)
deploy_config() {
	printf '{"hostname":"%s","ssh_authorized_keys":["%s"],"user_data":"#cloud-config\\nruncmd:\\n  - echo hello\\n"}' "$1" "$KEY"
}
declare -A DEPLOY_JOB DEPLOY_REQ DEPLOY_IMG CASE VM_ADDR DISK_ON_AT DISK_OS_AT REPORT_AT DONE_AT
DEPLOY_ROWS=()
# deploy_rows NODE: the timings of its deploy just checked, for the table at the end
deploy_rows() {
	local n=$1 r
	dt() { if [ -n "$1" ] && [ -n "$2" ]; then fsub "$2" "$1"; else echo "?"; fi; }
	r() { DEPLOY_ROWS+=("$(printf '  %-62s %7s s' "$1" "$2")"); }
	if [ "${CASE[$n]}" = B ]; then
		r "$n ${DEPLOY_IMG[$n]} (B): request -> deploy_failed" "$(dt "${DEPLOY_REQ[$n]}" "${DONE_AT[$n]}")"
	else
		r "$n ${DEPLOY_IMG[$n]} (${CASE[$n]}): request -> deployed" "$(dt "${DEPLOY_REQ[$n]}" "${DONE_AT[$n]}")"
	fi
	r "  request -> disk power on (PXE, agent: write, grow, seed)" "$(dt "${DEPLOY_REQ[$n]}" "${DISK_ON_AT[$n]}")"
	r "  disk power on -> disk OS init line" "$(dt "${DISK_ON_AT[$n]}" "${DISK_OS_AT[$n]}")"
	if [ "${CASE[$n]}" = B ]; then
		r "  disk power on -> first_boot_timeout" "$(dt "${DISK_ON_AT[$n]}" "${DONE_AT[$n]}")"
	else
		r "  init line -> report script starts (seed, network)" "$(dt "${DISK_OS_AT[$n]}" "${REPORT_AT[$n]}")"
		r "  report script starts -> deployed" "$(dt "${REPORT_AT[$n]}" "${DONE_AT[$n]}")"
	fi
}
# deploy N CASE IMAGE [EXTRA JSON MEMBERS]
deploy() {
	vm "$1"
	CASE[$NAME]=$2
	DEPLOY_IMG[$NAME]=$3
	DEPLOY_REQ[$NAME]=$EPOCHREALTIME
	unset "AT[$NAME]"
	DEPLOY_JOB[$NAME]=$(provision "$NAME" "{\"action\":\"deploy\",\"image\":\"$3\",\"disk\":\"/dev/vda\",\"timeout_s\":$LIMIT${4:+,$4}}")
	[ -n "${DEPLOY_JOB[$NAME]}" ] || fail "$NAME: deploy made no job"
	say "$NAME: deploy $3 (case $2): job ${DEPLOY_JOB[$NAME]}"
}

# disk_boot N SINCE: VM N's last power on after SINCE (the switch to its disk) into DISK_ON_AT,
# checked to be a disk boot on which iPXE did not run
disk_boot() {
	local t last
	vm "$1"
	last=$(power_on_at "$1" "$2") || fail "$NAME: no power on after its deploy request"
	while t=$(power_on_at "$1" "$(awk -v t="$last" 'BEGIN { printf "%.3f", t + 0.001 }')"); do last=$t; done
	DISK_ON_AT[$NAME]=$last
	wait_for 120 "$NAME runs the deployed disk" \
		console_has "$1" "rackpilot-e2e: running from disk \(mac $MAC\)"
	console_has "$1" "=== e2e-rig: .* power on $NAME boot=default ===" ||
		fail "$NAME: the last power on was not with boot device disk"
	# (the NIC's option ROM still prints its "iPXE (http://ipxe.org) ..." banner while SeaBIOS
	# scans the PCI bus; iPXE *runs* only when the NIC is booted: "iPXE initialising devices")
	console_has "$1" "iPXE initialising|Rackpilot: " && fail "$NAME: iPXE ran on the disk boot"
	DISK_OS_AT[$NAME]=$(ts_first "$1" "$last" 'rackpilot-e2e: running from disk') || DISK_OS_AT[$NAME]=
}

# seed_checks N JOB HOST: VM N's disk file after a deploy of JOB: partition 1 is the image's,
# byte for byte; partition 2 starts where the image's does and grew to just before the seed;
# the seed (CIDATA) is the last partition, at the disk's end, and says the instance is
# rp-JOB and the host HOST; the disk OS saw partition 2 at that size. Sets SEED_OFF (bytes).
seed_checks() {
	local d=$W/vm$1/disk.img geo p2 p3 total
	vm "$1"
	total=$(($(stat -c %s "$d") / 512))
	geo=$(sfdisk --json "$d" | python3 -c '
import json, sys
p1s, p1n, p2s, p2n, total = map(int, sys.argv[1:])
ps = json.load(sys.stdin)["partitiontable"]["partitions"]
err = []
if len(ps) != 3:
    err.append("%d partitions, want 3 (boot, root, seed)" % len(ps))
else:
    a, b, c = ps
    if (a["start"], a["size"]) != (p1s, p1n):
        err.append("partition 1 at %d+%d, the image has it at %d+%d" % (a["start"], a["size"], p1s, p1n))
    if b["start"] != p2s or b["size"] <= p2n:
        err.append("partition 2 at %d+%d: not the image'"'"'s (%d+%d) grown" % (b["start"], b["size"], p2s, p2n))
    gap = c["start"] - (b["start"] + b["size"])
    if not 0 <= gap < 2048:
        err.append("partition 2 ends %d sectors before the seed, want 0-2047 (alignment)" % gap)
    tail = total - (c["start"] + c["size"])
    if not 0 <= tail < 2048:
        err.append("the seed ends %d sectors before the end of the disk, want 0-2047" % tail)
print("; ".join(err) if err else "ok %d %d %d %d" % (b["size"], c["start"], c["size"], c["type"] if isinstance(c["type"], int) else int(c["type"], 16)))
' "$IMG_P1_START" "$IMG_P1_SIZE" "$IMG_P2_START" "$IMG_P2_SIZE" "$total")
	[[ $geo == ok* ]] || fail "$NAME: its disk after the deploy: $geo ($(sfdisk -d "$d" | grep '^/' | tr -s ' '))"
	read -r _ p2 p3 _ <<< "$geo"
	SEED_OFF=$((p3 * 512))
	cmp -s -i $((IMG_P1_START * 512)):$((IMG_P1_START * 512)) -n $((IMG_P1_SIZE * 512)) \
		"$d" "$E2E_IMAGES/disk.img" || fail "$NAME: partition 1 of its disk is not the image's"
	export MTOOLS_SKIP_CHECK=1
	mlabel -s -i "$d@@$SEED_OFF" :: 2> /dev/null | grep -i 'cidata' > /dev/null ||
		fail "$NAME: the seed partition is not labelled CIDATA: $(mlabel -s -i "$d@@$SEED_OFF" :: 2>&1)"
	for f in meta-data user-data network-config; do
		mtype -i "$d@@$SEED_OFF" "::$f" > "$W/vm$1/seed.$f" 2> "$W/vm$1/seed.err" ||
			fail "$NAME: the seed has no $f: $(cat "$W/vm$1/seed.err")"
	done
	grep -Ex "instance-id: \"?rp-$2\"?" "$W/vm$1/seed.meta-data" > /dev/null ||
		fail "$NAME: seed meta-data does not name instance rp-$2: $(cat "$W/vm$1/seed.meta-data")"
	grep -Ex "local-hostname: \"?$3\"?" "$W/vm$1/seed.meta-data" > /dev/null ||
		fail "$NAME: seed meta-data does not name host $3: $(cat "$W/vm$1/seed.meta-data")"
	grep -iF "$MAC" "$W/vm$1/seed.network-config" > /dev/null ||
		fail "$NAME: seed network-config does not name its MAC: $(cat "$W/vm$1/seed.network-config")"
	# the disk OS saw what the disk file says
	console_has "$1" "rackpilot-e2e: partition vda2 start $IMG_P2_START size $p2 sectors ext4" ||
		fail "$NAME: its console does not show partition 2 grown to $p2 sectors"
	console_has "$1" "rackpilot-e2e: cidata instance-id rp-$2 hostname $3\$" ||
		fail "$NAME: the disk OS did not read the seed (want 'cidata instance-id rp-$2 hostname $3')"
	say "$NAME: disk = image's partition 1, partition 2 grown $IMG_P2_SIZE -> $p2 sectors, seed CIDATA at sector $p3 (the end)"
}

# reported N JOB HOST: the job succeeded through VM N's first-boot report: its result holds
# first_boot with HOST, the kernel and the VM's address (its DHCP lease, as the disk OS
# printed it), the VM POSTed it once (access log), and the node became deployed after the
# disk OS had started its report script, not at power on
reported() {
	local j=$W/job-$2.json addr n start
	vm "$1"
	api_expect 200 GET "/v1/jobs/$2" > "$j"
	[ "$(jget .state "$j")" = succeeded ] || fail "$NAME: deploy job $2 $(jget .state "$j"): $(head -c 3000 "$j")"
	addr=$(console_line "$1" 'rackpilot-e2e: network eth0 dhcp 10\.99\.1\.[0-9]+/24$' |
		sed 's/.* dhcp \(.*\)\/24$/\1/') || fail "$NAME: the disk OS did not configure DHCP on eth0"
	grep -F " $MAC $addr " "$W/dnsmasq.leases" > /dev/null || fail "$NAME: $addr is not its DHCP lease"
	VM_ADDR[$NAME]=$addr
	python3 - "$j" "$3" "$addr" "$KVER" << 'EOF' || fail "$NAME: job $2 result: $(jget .result "$j")"
import json, re, sys
j, host, addr, kernel = sys.argv[1:]
fb = (json.load(open(j)).get("result") or {}).get("first_boot")
assert isinstance(fb, dict), "no first_boot in the result"
assert fb.get("hostname") == host, "first_boot.hostname %r, want %r" % (fb.get("hostname"), host)
assert re.search(r"(^|[^0-9.])%s([^0-9]|$)" % re.escape(addr), json.dumps(fb.get("addresses"))), \
    "first_boot.addresses %r lack %s" % (fb.get("addresses"), addr)
assert fb.get("kernel", kernel) == kernel, "first_boot.kernel %r, want %r" % (fb.get("kernel"), kernel)
EOF
	console_has "$1" '^rackpilot: first boot reported' ||
		fail "$NAME: the report script did not say 'rackpilot: first boot reported'"
	sleep 0.3 # (the access log is written every 250 ms)
	n=$(grep -cE "access $addr \"POST /v1/agent/first-boot\" 2[0-9][0-9] " "$W/rackpilotd.log" || :)
	[ "$n" = $((${REPORTS[$NAME]:-0} + 1)) ] ||
		fail "$NAME: $((n - ${REPORTS[$NAME]:-0})) accepted POST /v1/agent/first-boot from $addr in the access log, want 1"
	REPORTS[$NAME]=$n
	# (the report script is the user-data part whose file name says first-boot)
	start=$(ts_first "$1" "${DISK_ON_AT[$NAME]}" 'rackpilot-e2e: script [^ ]*first-boot[^ ]* start') ||
		fail "$NAME: the disk OS ran no first-boot script (a user-data part named *first-boot*)"
	REPORT_AT[$NAME]=$start
	api_expect 200 GET "/v1/events?node=$NAME&action=node.provision&limit=1" > "$W/vm$1/last-event.json"
	at=$(iso2epoch "$(jget .items.0.at "$W/vm$1/last-event.json")")
	DONE_AT[$NAME]=$at
	[ "$(jget .items.0.detail.to "$W/vm$1/last-event.json")" = deployed ] &&
		awk -v a="$at" -v s="$start" 'BEGIN { exit !(a >= s - 0.1) }' ||
		fail "$NAME: deployed (event at $at) before its disk OS ran the report script ($start)"
	say "$NAME: deployed through its first-boot report: $(jget .result.first_boot "$j" | head -c 300)"
}
declare -A REPORTS

# console_line N REGEX: the first line of VM N's console (this boot) matching REGEX
console_line() {
	awk '/=== e2e-rig: .* power on / { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' \
		"$W/vm$1/console.log" | tr -d '\r' > "$W/vm$1/console.now"
	grep -aE -m 1 -- "$2" "$W/vm$1/console.now"
}

# Cases B and C run in the plain build's SQLite run; the PostgreSQL and sanitizer runs of the
# suite deploy case A only (E2E_DEPLOY_CASES=A: the store and the server's memory are what
# they add, and the timeout and the formats are the integration tests' in every run too).
E2E_DEPLOY_CASES=${E2E_DEPLOY_CASES:-$([ -n "${RP_TEST_PG:-}" ] && echo A || echo ABC)}
FULL=1
[ "$E2E_DEPLOY_CASES" = A ] && FULL=0
((FULL)) || say "deploy cases: A only (E2E_DEPLOY_CASES=A); B and C run in the SQLite run"
phase "deploy: ${NODES[0]} configured (raw)${NODES[1]:+, ${NODES[1]} $( ((FULL)) && echo "unreachable (zst, first boot times out)" || echo "configured (raw)")}"
for i in $(seq 1 "$VMS"); do
	vm "$i"
	if ((i == 2 && FULL)); then
		deploy 2 B "$DISK_IMAGE.img.zst" "\"first_boot_timeout_s\":$FIRST_BOOT_TIMEOUT,\"config\":{\"network\":{\"address\":\"$UNROUTED/24\",\"gateway\":\"10.98.7.1\"}}"
	else
		deploy "$i" A "$DISK_IMAGE" "\"config\":$(deploy_config "$NAME-os")"
	fi
done
CASE_A=()
for node in "${NODES[@]}"; do [ "${CASE[$node]}" = A ] && CASE_A+=("$node"); done
wait_states deployed "${CASE_A[@]}"

phase "case A: configured through the seed, deployed through the first-boot report"
for i in $(seq 1 "$VMS"); do
	((i == 2)) && continue
	vm "$i"
	job=${DEPLOY_JOB[$NAME]}
	[ "$(jget .deployed_image "$W/$NAME.deployed.json")" = "$DISK_IMAGE" ] || fail "$NAME: deployed_image"
	disk_boot "$i" "${DEPLOY_REQ[$NAME]}"
	seed_checks "$i" "$job" "$NAME-os"
	reported "$i" "$job" "$NAME-os"
	# the config reached the OS: the key (and nothing else), the operator's runcmd
	console_has "$i" '^rackpilot-e2e: keys 1: e2e-test$' || fail "$NAME: the disk OS did not install the key"
	console_has "$i" '^hello$' || fail "$NAME: the operator's runcmd did not run"
	grep -F "${KEY% *}" "$W/vm$i/seed.user-data" > /dev/null || fail "$NAME: the key is not in the seed's user-data"
	# ... and the node's console log (rackpilotd's, from SOL) has the disk OS's lines
	api_expect 200 GET "/v1/nodes/$NAME/console/log?tail=2000" > "$W/vm$i/sol.log"
	grep -F "rackpilot-e2e: cidata instance-id rp-$job hostname $NAME-os" "$W/vm$i/sol.log" > /dev/null ||
		fail "$NAME: its console log (GET /v1/nodes/$NAME/console/log) lacks the disk OS's lines:" \
			"$(grep -a 'rackpilot-e2e' "$W/vm$i/sol.log" | tail -n 10)"
	bp=$("$E2E_DIR/rack.sh" ipmi "$i" chassis bootparam get 5)
	grep -q "Force Boot from default Hard-Drive" <<< "$bp" || fail "$NAME BMC boot flags: $bp"
	# rackpilotd's side: the VM fetched its iPXE script twice (commission, deploy), not a third
	# time (the access log names the client address: the VM's lease while in the ramdisk)
	addr=$(jget .agent.address "$W/$NAME.deployed.json")
	n=$(grep -c "access $addr \"GET /boot/ipxe\"" "$W/rackpilotd.log" || :)
	[ "$n" = 2 ] || fail "$NAME: $n GET /boot/ipxe from $addr, want 2 (commission, deploy)"
	# the deploy's ramdisk boot had a token of its own, also used up now
	tok=$(boot_token "$i" "$(power_on_at "$i" "${DEPLOY_REQ[$NAME]}")") ||
		fail "$NAME: no kernel command line on the deploy's boot"
	[ "$tok" != "${TOKEN[$NAME]}" ] || fail "$NAME: the deploy boot reused the commission's token"
	token_refused "$NAME" "$tok"
	# the first-boot token is single-use too: the report again, to the URL and with the token
	# the seed's script carries, is refused
	fbtok=$(sed -n "s/^token='\([^']*\)'\$/\1/p" "$W/vm$i/seed.user-data" | sort -u)
	[ "$(echo "$fbtok" | grep -c .)" = 1 ] ||
		fail "$NAME: want one token='...' line in the seed's report script, found: ${fbtok:-none}"
	fburl=$(grep -m 1 -oE "https?://$BR_IP:[0-9]+/v1/agent/first-boot" "$W/vm$i/seed.user-data") ||
		fail "$NAME: no http(s)://$BR_IP:PORT/v1/agent/first-boot in the seed's report script"
	fburl=${fburl%%$'\n'*}
	st=$(nsx curl -sS "${RP_TLS[@]}" -o "$W/fb-replay.json" -w '%{http_code}' --max-time 10 -X POST \
		-H "Authorization: Bearer $fbtok" -H 'Content-Type: application/json' \
		--data-binary "{\"hostname\":\"intruder\",\"kernel\":\"$KVER\",\"addresses\":[\"10.99.1.2\"],\"instance_id\":\"rp-$job\"}" \
		"$fburl") || st=000
	case $st in 401 | 403 | 409 | 410) ;; *) fail "$NAME: the first-boot token again ($fburl): HTTP $st $(cat "$W/fb-replay.json")" ;; esac
	[ "$(api_expect 200 GET "/v1/jobs/$job" | jget .result.first_boot.hostname)" = "$NAME-os" ] ||
		fail "$NAME: the replayed report changed the job's result"
	deploy_rows "$NAME"
	say "$NAME: key + runcmd applied, BMC boot device disk, no PXE on the disk boot; the deploy" \
		"boot's token and the first-boot token are used up (replay: HTTP $st)"
done

# VM 1's release runs while VM 2 waits out its first boot; VM 2's case C starts when its
# case B has failed, VM 1's when it is released.
if ((FULL)); then
phase "release ${NODES[0]} (metadata wipe)${NODES[1]:+ + case B: ${NODES[1]} unrouted, first_boot_timeout}"
node=${NODES[0]}
vm 1
cmp -s -n 1048576 "$W/vm1/disk.img" /dev/zero && fail "$node: its disk starts with zeros before the release"
unset "AT[$node]"
RELEASE_JOB=$(provision "$node" '{"action":"release","wipe":"metadata"}')
[ -n "$RELEASE_JOB" ] || fail "$node: release queued no job"
if ((VMS > 1)); then
	vm 2
	wait_states deploy_failed "$NAME"
	job=${DEPLOY_JOB[$NAME]}
	api_expect 200 GET "/v1/events?node=$NAME&action=node.provision&limit=1" > "$W/vm2/last-event.json"
	DONE_AT[$NAME]=$(iso2epoch "$(jget .items.0.at "$W/vm2/last-event.json")")
	api_expect 200 GET "/v1/jobs/$job" > "$W/job-$job.json"
	[ "$(jget .state "$W/job-$job.json")" = failed ] || fail "$NAME: job $job $(jget .state "$W/job-$job.json")"
	code=$(jget .error.code "$W/job-$job.json" || :)
	msg=$(jget .error.message "$W/job-$job.json" || :)
	[ "$code" = first_boot_timeout ] || fail "$NAME: job $job error $code, want first_boot_timeout: $msg"
	# the message holds the console's last lines: the disk OS's (or its report script's)
	grep -E 'rackpilot(-e2e)?: ' <<< "$msg" > /dev/null ||
		fail "$NAME: the first_boot_timeout message holds no console line: $msg"
	disk_boot 2 "${DEPLOY_REQ[$NAME]}"
	seed_checks 2 "$job" "$NAME"
	console_has 2 "^rackpilot-e2e: network eth0 static $UNROUTED/24 routes default via 10\.98\.7\.1" ||
		fail "$NAME: the disk OS did not configure $UNROUTED/24 via 10.98.7.1"
	grep -F "$UNROUTED/24" "$W/vm2/seed.network-config" > /dev/null || fail "$NAME: the seed lacks $UNROUTED/24"
	! grep -E "access $UNROUTED \"POST /v1/agent/first-boot\"" "$W/rackpilotd.log" > /dev/null ||
		fail "$NAME: a report arrived from $UNROUTED"
	deploy_rows "$NAME"
	say "$NAME: deploy_failed after ${FIRST_BOOT_TIMEOUT} s without a report: $code: $(tail -c 400 <<< "$msg" | tr '\n' '|')"
	deploy 2 C "$DISK_IMAGE.qcow2"
fi
vm 1
wait_states ready "$node"
api_expect 200 GET "/v1/jobs/$RELEASE_JOB" > "$W/job-$RELEASE_JOB.json"
[ "$(jget .state "$W/job-$RELEASE_JOB.json")" = succeeded ] || fail "$node: release job $RELEASE_JOB"
# VM side: the deployed boot sector and the seed are gone (the first and the last MiB of the
# VM's disk are zeros) and the BMC says the machine is off again.
cmp -s -n 1048576 "$W/vm1/disk.img" /dev/zero || fail "$node: the first MiB of its disk was not wiped"
tail -c 1048576 "$W/vm1/disk.img" | cmp -s -n 1048576 - /dev/zero || fail "$node: the last MiB of its disk (the seed) was not wiped"
[ "$("$E2E_DIR/rack.sh" ipmi 1 chassis power status)" = "Chassis Power is off" ] ||
	fail "$node: not powered off after the release"
say "$node: released (disk ends wiped, powered off), ready again"
deploy 1 C "$DISK_IMAGE.img.gz"

phase "case C: ${NODES[0]} .img.gz${NODES[1]:+, ${NODES[1]} .qcow2}, default config"
CASE_C=("${NODES[0]}")
((VMS > 1)) && CASE_C+=("${NODES[1]}")
for node in "${CASE_C[@]}"; do unset "AT[$node]"; done
wait_states deployed "${CASE_C[@]}"
for i in $(seq 1 "${#CASE_C[@]}"); do
	vm "$i"
	[ "$(jget .deployed_image "$W/$NAME.deployed.json")" = "${DEPLOY_IMG[$NAME]}" ] ||
		fail "$NAME: deployed_image $(jget .deployed_image "$W/$NAME.deployed.json"), want ${DEPLOY_IMG[$NAME]}"
	disk_boot "$i" "${DEPLOY_REQ[$NAME]}"
	seed_checks "$i" "${DEPLOY_JOB[$NAME]}" "$NAME"
	reported "$i" "${DEPLOY_JOB[$NAME]}" "$NAME"
	deploy_rows "$NAME"
done
fi

# ---- 5. events, boot scripts -----------------------------------------------------------------
phase "events + boot scripts"
declare -A EV EVL
for i in $(seq 1 "$VMS"); do
	vm "$i"
	api_expect 200 GET "/v1/events?node=$NAME&action=node.provision&limit=100" > "$W/vm$i/events.json"
	chain=$(jpy '" ".join(
		[it["detail"]["from"] for it in reversed(d["items"])][:1] +
		[it["detail"]["to"] for it in reversed(d["items"])])' "$W/vm$i/events.json")
	case $FULL$i in
	11) want="enrolled verifying manageable commissioning ready deploying deployed releasing ready deploying deployed" ;;
	12) want="enrolled verifying manageable commissioning ready deploying deploy_failed deploying deployed" ;;
	*) want="enrolled verifying manageable commissioning ready deploying deployed" ;;
	esac
	[ "$chain" = "$want" ] || fail "$NAME: provision events $chain, want $want"
	broken=$(jpy 'sum(1 for a, b in zip(list(reversed(d["items"])), list(reversed(d["items"]))[1:])
		if a["detail"]["to"] != b["detail"]["from"])' "$W/vm$i/events.json")
	[ "$broken" = 0 ] || fail "$NAME: the provision events do not chain ($broken gaps)"
	# when rackpilotd first (EV) and last (EVL) entered each state (ms), for the timings
	while read -r to at; do
		[ -n "${EV[$NAME:$to]:-}" ] || EV[$NAME:$to]=$(iso2epoch "$at")
		EVL[$NAME:$to]=$(iso2epoch "$at")
	done < <(jpy '"\n".join(it["detail"]["to"] + " " + it["at"] for it in reversed(d["items"]))' "$W/vm$i/events.json")
	boot_script "$MAC"
	if ! grep -q "^echo Rackpilot: $NAME (deployed): booting from the local disk" "$W/script.last" ||
		! grep -q "^sanboot " "$W/script.last" || grep -q "rackpilot.token" "$W/script.last"; then
		fail "$NAME (deployed): boot script is not the local disk: $(cat "$W/script.last")"
	fi
	say "$NAME: events $chain; /boot/ipxe: local disk"
done
for node in "${NODES[@]}"; do
	api_expect 200 GET "/v1/jobs/${COMMISSION_JOB[$node]}" > "$W/job-c.json"
	[ "$(jget .state "$W/job-c.json")" = succeeded ] || fail "$node: commission job $(jget .state "$W/job-c.json")"
done

# the rack's services lived through it all (dnsmasq re-read the hosts file on every SIGHUP)
alive_pid() { # a live process (an exited child waiting to be reaped is not)
	local st=''
	[ -n "$1" ] && read -r _ _ st _ 2> /dev/null < "/proc/$1/stat" && [ "$st" != Z ] && [ "$st" != X ]
}
alive_pid "$(cat "$DNSMASQ_PIDFILE" 2> /dev/null || :)" || fail "dnsmasq (pid file $DNSMASQ_PIDFILE) is gone"
alive_pid "$(awk '$2 == "rackpilotd" { print $1 }' "$W/pids")" || fail "rackpilotd is gone"
grep -E '^[^ ]+ (warn|error) ' "$W/rackpilotd.log" | sed 's/^/  rackpilotd: /' || :

phase "rackpilotd stops cleanly"
# SIGTERM: exit status 0 within 15 s; under ASan/UBSan (RP_SANITIZE) also no report, leaks
# included (LeakSanitizer reports at exit and changes the status).
rp_pid=$(awk '$2 == "rackpilotd" { print $1 }' "$W/pids")
kill -TERM "$rp_pid"
for _ in $(seq 1 150); do alive_pid "$rp_pid" || break; sleep 0.1; done
alive_pid "$rp_pid" && fail "rackpilotd still runs 15 s after SIGTERM"
rc=0
wait "$rp_pid" || rc=$?
if grep -E 'runtime error:|ERROR: [A-Za-z]*Sanitizer' "$W/rackpilotd.log" > /dev/null; then
	fail "rackpilotd: sanitizer report: $(grep -E -A20 'runtime error:|ERROR: [A-Za-z]*Sanitizer' "$W/rackpilotd.log" | head -n 40)"
fi
[ "$rc" = 0 ] || fail "rackpilotd exited with status $rc on SIGTERM"
say "rackpilotd exited with status 0"

# ---- 6. timings ------------------------------------------------------------------------------
# Host clock throughout: requests (before the PUT), BMC power on (chassis-control's log), console
# lines (console-ts.py, <= 20 ms late), state changes (the node.provision events, ms).
phase ""
vm 1
N1=$NAME
R=${REQ_AT[$N1]}
PON=$(power_on_at 1 "$R")
row() { printf '  %-62s %7s s\n' "$1" "$2"; }
at() { ts_first 1 "$PON" "$1" || echo ""; }
IPXE=$(at 'iPXE initialising')
SCRIPT=$(at "Rackpilot: $N1 \\(commissioning\\)")
KERNEL=$(at 'Linux version')
INIT=$(at 'e2e-agent: .*ramdisk init started')
REG=$(at 'e2e-agent: .*REGISTERED')
d() { if [ -n "$1" ] && [ -n "$2" ]; then fsub "$2" "$1"; else echo "?"; fi; }
{
	timings
	echo "---- $N1 commissioned alone (the benchmark; QEMU TCG, 1 vCPU, $VM_MEM MiB, $(nproc) host CPUs)"
	row "commission request -> ready" "$(d "$R" "${EV[$N1:ready]}")"
	row "  request -> BMC power on (job, IPMI bootdev pxe, power on)" "$(d "$R" "$PON")"
	row "  power on -> agent ramdisk init line = BARE PXE BOOT" "$(d "$PON" "$INIT")"
	row "    power on -> iPXE runs (SeaBIOS, option ROM)" "$(d "$PON" "$IPXE")"
	row "    iPXE -> script from /boot/ipxe (2 s Ctrl-B prompt, DHCP)" "$(d "$IPXE" "$SCRIPT")"
	row "    script -> kernel console (kernel + initrd over HTTP, unpack)" "$(d "$SCRIPT" "$KERNEL")"
	row "    kernel console -> ramdisk init" "$(d "$KERNEL" "$INIT")"
	row "  ramdisk init -> agent registered (modules, DHCP, dropbear)" "$(d "$INIT" "$REG")"
	row "  registered -> ready (SSH plan: inventory + recipe; power off)" "$(d "$REG" "${EV[$N1:ready]}")"
	echo "---- every VM"
	for i in $(seq 1 "$VMS"); do
		vm "$i"
		row "$NAME commission request -> ready" "$(d "${REQ_AT[$NAME]}" "${EV[$NAME:ready]}")"
	done
	echo "---- deploys (A: raw + config; B: zst, unrouted, first_boot_timeout_s $FIRST_BOOT_TIMEOUT; C: gz / qcow2)"
	printf '%s\n' "${DEPLOY_ROWS[@]}"
	printf 'BENCH e2e commission_to_ready_s=%s bare_pxe_boot_s=%s vms=%s host_cpus=%s\n' \
		"$(d "$R" "${EV[$N1:ready]}")" "$(d "$PON" "$INIT")" "$VMS" "$(nproc)"
} | tee "$W/timings.txt"
[ -z "${E2E_TIMINGS:-}" ] || cp "$W/timings.txt" "$E2E_TIMINGS"
pass
echo "PASS: e2e ($VMS VMs): enroll -> manage -> commission (PXE, agent, SSH, inventory) -> deploy" \
	"($( ((FULL)) && echo "raw, zst, gz, qcow2" || echo "raw; cases B and C in the SQLite run"); NoCloud seed) -> disk boot ->" \
	"first-boot report, through the rackpilotd API"
