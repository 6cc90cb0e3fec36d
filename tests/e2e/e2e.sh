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
#   1. images: agent kernel + initrd and the OS disk image uploaded (PUT /v1/images, sha256
#      checked), a boot profile "default", a class recipe "commission-e2e-vm";
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
#   4. deploy {"image": disk image, "disk": "/dev/vda"} -> deployed; on the VM side: the console
#      shows the deployed disk booting, the BMC boot device is disk, iPXE did not run on that
#      boot, the VM's disk holds the image;
#   5. every transition is a node.provision event (an unbroken chain); the token the VM used is
#      refused on reuse ("already used"); GET /boot/ipxe of a ready or deployed node is the
#      local-disk script;
#   6. release VM 1 (metadata wipe) -> ready: the first MiB of its disk is zeros, it is off;
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
DISK_SHA=$(sha256sum < "$E2E_IMAGES/disk.img" | cut -c1-64)
DISK_BYTES=$(stat -c %s "$E2E_IMAGES/disk.img")
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

# ---- 4. deploy -------------------------------------------------------------------------------
phase "deploy $DISK_IMAGE to /dev/vda (all in parallel)"
declare -A DEPLOY_JOB DEPLOY_REQ
AT=()
for node in "${NODES[@]}"; do
	DEPLOY_REQ[$node]=$EPOCHREALTIME
	DEPLOY_JOB[$node]=$(provision "$node" "{\"action\":\"deploy\",\"image\":\"$DISK_IMAGE\",\"disk\":\"/dev/vda\",\"timeout_s\":$LIMIT}")
done
wait_states deployed "${NODES[@]}"

phase "deployed disk boots (VM side)"
declare -A DISK_OS_AT
for i in $(seq 1 "$VMS"); do
	vm "$i"
	[ "$(jget .deployed_image "$W/$NAME.deployed.json")" = "$DISK_IMAGE" ] || fail "$NAME: deployed_image"
	wait_for 120 "$NAME runs the deployed disk" \
		console_has "$i" "rackpilot-e2e: running from disk \(mac $MAC\)"
	console_has "$i" "=== e2e-rig: .* power on $NAME boot=default ===" ||
		fail "$NAME: the last power on was not with boot device disk"
	# (the NIC's option ROM still prints its "iPXE (http://ipxe.org) ..." banner while SeaBIOS
	# scans the PCI bus; iPXE *runs* only when the NIC is booted: "iPXE initialising devices")
	console_has "$i" "iPXE initialising|Rackpilot: " && fail "$NAME: iPXE ran on the disk boot"
	bp=$("$E2E_DIR/rack.sh" ipmi "$i" chassis bootparam get 5)
	grep -q "Force Boot from default Hard-Drive" <<< "$bp" || fail "$NAME BMC boot flags: $bp"
	# rackpilotd's side: the VM fetched its iPXE script twice (commission, deploy), not a third
	# time (the access log names the client address: the VM's lease while in the ramdisk)
	addr=$(jget .agent.address "$W/$NAME.deployed.json")
	n=$(grep -c "access $addr \"GET /boot/ipxe\"" "$W/rackpilotd.log" || :)
	[ "$n" = 2 ] || fail "$NAME: $n GET /boot/ipxe from $addr, want 2 (commission, deploy)"
	[ "$(head -c "$DISK_BYTES" "$W/vm$i/disk.img" | sha256sum | cut -c1-64)" = "$DISK_SHA" ] ||
		fail "$NAME: the VM's disk does not hold $DISK_IMAGE"
	last_on=$(power_on_at "$i" "${DEPLOY_REQ[$NAME]}")
	# the deploy's ramdisk boot had a token of its own, also used up now
	tok=$(boot_token "$i" "$last_on") || fail "$NAME: no kernel command line on the deploy's boot"
	[ "$tok" != "${TOKEN[$NAME]}" ] || fail "$NAME: the deploy boot reused the commission's token"
	token_refused "$NAME" "$tok"
	# the last power on: the deploy's switch to the disk
	while t=$(power_on_at "$i" "$(awk -v t="$last_on" 'BEGIN { printf "%.3f", t + 0.001 }')"); do last_on=$t; done
	DISK_OS_AT[$NAME]=$(ts_first "$i" "$last_on" 'rackpilot-e2e: running from disk')
	DISK_ON_AT[i]=$last_on
	say "$NAME: BMC boot device disk, booted the deployed disk without PXE, disk = $DISK_IMAGE;" \
		"the deploy boot's own token is used up too"
done

# ---- 5. events, boot scripts -----------------------------------------------------------------
phase "events + boot scripts"
declare -A EV
for i in $(seq 1 "$VMS"); do
	vm "$i"
	api_expect 200 GET "/v1/events?node=$NAME&action=node.provision&limit=100" > "$W/vm$i/events.json"
	chain=$(jpy '" ".join(
		[it["detail"]["from"] for it in reversed(d["items"])][:1] +
		[it["detail"]["to"] for it in reversed(d["items"])])' "$W/vm$i/events.json")
	want="enrolled verifying manageable commissioning ready deploying deployed"
	[ "$chain" = "$want" ] || fail "$NAME: provision events $chain, want $want"
	broken=$(jpy 'sum(1 for a, b in zip(list(reversed(d["items"])), list(reversed(d["items"]))[1:])
		if a["detail"]["to"] != b["detail"]["from"])' "$W/vm$i/events.json")
	[ "$broken" = 0 ] || fail "$NAME: the provision events do not chain ($broken gaps)"
	# when rackpilotd entered each state (ms), for the timings
	while read -r to at; do EV[$NAME:$to]=$(iso2epoch "$at"); done < <(jpy '"\n".join(
		it["detail"]["to"] + " " + it["at"] for it in d["items"])' "$W/vm$i/events.json")
	boot_script "$MAC"
	if ! grep -q "^echo Rackpilot: $NAME (deployed): booting from the local disk" "$W/script.last" ||
		! grep -q "^sanboot " "$W/script.last" || grep -q "rackpilot.token" "$W/script.last"; then
		fail "$NAME (deployed): boot script is not the local disk: $(cat "$W/script.last")"
	fi
	say "$NAME: events $chain; /boot/ipxe: local disk"
done
for node in "${NODES[@]}"; do
	for j in "${COMMISSION_JOB[$node]}" "${DEPLOY_JOB[$node]}"; do
		api_expect 200 GET "/v1/jobs/$j" > "$W/job-$j.json"
		[ "$(jget .state "$W/job-$j.json")" = succeeded ] || fail "$node: job $j $(jget .state "$W/job-$j.json")"
	done
done

phase "release ${NODES[0]} (metadata wipe) -> ready"
node=${NODES[0]}
vm 1
cmp -s -n 1048576 "$W/vm1/disk.img" /dev/zero && fail "$node: its disk starts with zeros before the release"
unset "AT[$node]"
RELEASE_JOB=$(provision "$node" '{"action":"release","wipe":"metadata"}')
[ -n "$RELEASE_JOB" ] || fail "$node: release queued no job"
wait_states ready "$node"
api_expect 200 GET "/v1/jobs/$RELEASE_JOB" > "$W/job-$RELEASE_JOB.json"
[ "$(jget .state "$W/job-$RELEASE_JOB.json")" = succeeded ] || fail "$node: release job $RELEASE_JOB"
# VM side: the deployed boot sector is gone (the first MiB of the VM's disk is zeros) and the
# BMC says the machine is off again.
cmp -s -n 1048576 "$W/vm1/disk.img" /dev/zero || fail "$node: the first MiB of its disk was not wiped"
[ "$("$E2E_DIR/rack.sh" ipmi 1 chassis power status)" = "Chassis Power is off" ] ||
	fail "$node: not powered off after the release"
say "$node: released (disk ends wiped, powered off), ready again"

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
		row "$NAME deploy request -> deployed (powered on from disk)" \
			"$(d "${DEPLOY_REQ[$NAME]}" "${EV[$NAME:deployed]}")"
		row "$NAME   disk power on -> deployed OS init line" "$(d "${DISK_ON_AT[i]}" "${DISK_OS_AT[$NAME]}")"
	done
	printf 'BENCH e2e commission_to_ready_s=%s bare_pxe_boot_s=%s vms=%s host_cpus=%s\n' \
		"$(d "$R" "${EV[$N1:ready]}")" "$(d "$PON" "$INIT")" "$VMS" "$(nproc)"
} | tee "$W/timings.txt"
[ -z "${E2E_TIMINGS:-}" ] || cp "$W/timings.txt" "$E2E_TIMINGS"
pass
echo "PASS: e2e ($VMS VMs): enroll -> manage -> commission (PXE, agent, SSH, inventory) -> deploy" \
	"-> disk boot, through the rackpilotd API"
