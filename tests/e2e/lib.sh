# shellcheck shell=bash
# lib.sh - helpers for e2e.sh and accept.sh (sourced, bash).
#
# Expects before sourcing: nothing. Provides: E2E_DIR, REPO, RACKPILOTD, AGENT, E2E_IMAGES,
# E2E_CACHE (defaults: next to RACKPILOTD, i.e. in its build directory), W (work dir),
# phase timing, namespace exec (nsx), the API client (api, api_expect, jget), waits with
# timeouts, log dumps on failure, the rack's nodes (vm, bmc_json, provision, wait_states,
# upload), rackpilotd's configuration and start, and the EXIT trap that tears the rack down.
# Everything that talks to the rack network runs inside the namespace: nothing here addresses
# 10.99.1.0/24 from the root namespace (it would leave through the host's default route).

E2E_DIR=$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO=$(CDPATH='' cd -- "$E2E_DIR/../.." && pwd)
RACKPILOTD=${RACKPILOTD:-$REPO/build/rackpilotd}
E2E_BUILD=$(dirname -- "$RACKPILOTD")
# The suite's PostgreSQL run (RP_TEST_PG): a database of the run's own, which rackpilotd in
# the namespace reaches through its Unix socket; empty: SQLite in the data directory.
E2E_DB=${E2E_DB:-$(sh "$REPO/tests/pg/newdb.sh")}
AGENT=${AGENT:-$E2E_BUILD/agent/rackpilot-agent}
# the images and the kernel download are cached in the build directory
E2E_IMAGES=${E2E_IMAGES:-$E2E_BUILD/e2e-images}
E2E_CACHE=${E2E_CACHE:-$E2E_BUILD/e2e-cache}
export AGENT

T0=$(date +%s.%N)
PHASE=
PHASE_T=$T0
PHASE_LINES=()

elapsed() { echo "$(date +%s.%N) $1" | awk '{ printf "%.1f", $1 - $2 }'; }
say() { echo "[$(elapsed "$T0")s] $*"; }

# phase NAME: end the running phase (its duration goes into the timing table), start NAME
phase() {
	local now
	now=$(date +%s.%N)
	if [ -n "$PHASE" ]; then
		PHASE_LINES+=("$(printf '%-44s %7.1f s' "$PHASE" "$(echo "$now $PHASE_T" | awk '{ print $1 - $2 }')")")
	fi
	PHASE=${1:-}
	PHASE_T=$now
	[ -n "$PHASE" ] && echo "==== [$(elapsed "$T0")s] $PHASE"
	return 0
}

timings() {
	phase ""
	echo "---- timings (wall clock, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
	printf '%s\n' "${PHASE_LINES[@]}"
	printf '%-44s %7.1f s\n' total "$(elapsed "$T0")"
}

# skip WHY: exit 77 (ctest SKIP_RETURN_CODE) when this machine cannot run the rig at all
skip() { echo "SKIP: $*"; exit 77; }
# missing WHY: a package is not installed: a skip on a developer's machine, a failure in CI
# (CI=true: .ci/deps installs everything, so a missing tool is a broken setup, not a pass)
missing() {
	if [ "${CI:-}" = true ]; then
		echo "FAIL: $* (CI=true: .ci/deps should have installed it)"
		exit 1
	fi
	skip "$@"
}

# The Debian packages the rig needs beyond the build's (.ci/deps).
E2E_PACKAGES="qemu-system-x86 ipxe-qemu ipxe dnsmasq-base busybox-static dropbear-bin syslinux"
E2E_PACKAGES+=" syslinux-common mtools dosfstools fdisk openipmi ipmitool iproute2 curl python3"
E2E_PACKAGES+=" kmod openssl xxd gcc libopenipmi-dev e2fsprogs qemu-utils zstd"

# preflight [TOOL...]: skip (77) unless the rig can run here; TOOLs: what the test needs beyond
# the rig, each a command of the Debian package of the same name (lldpd). E2E_NO_RACKPILOTD=1:
# a script that runs no rackpilotd (seed-check.sh) does not need one built.
preflight() {
	[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, taps)"
	[ -c /dev/net/tun ] || skip "no /dev/net/tun"
	local t f
	for t in qemu-system-x86_64 ipmi_sim ipmitool dnsmasq dropbear dropbearkey busybox curl \
		python3 sfdisk mkfs.vfat mcopy mtype syslinux mkfs.ext4 qemu-img zstd ip ss setsid apt-get \
		dpkg modinfo openssl xxd; do
		command -v "$t" > /dev/null || missing "missing $t; apt-get install $E2E_PACKAGES"
	done
	for t in "$@"; do
		command -v "$t" > /dev/null || missing "missing $t; apt-get install $t"
	done
	# (cc + OpenIPMI's headers: the BMCs' plug-in for Serial over LAN, tests/ipmi/mc_plugin.c)
	command -v "${CC:-cc}" > /dev/null || missing "missing ${CC:-cc}; apt-get install $E2E_PACKAGES"
	for f in /usr/lib/ipxe/undionly.kpxe /usr/lib/ipxe/qemu/efi-virtio.rom /usr/lib/syslinux/mbr/mbr.bin \
		/usr/include/OpenIPMI/serv.h; do
		[ -f "$f" ] || missing "missing $f; apt-get install $E2E_PACKAGES"
	done
	[ "${E2E_NO_RACKPILOTD:-0}" = 1 ] || [ -x "$RACKPILOTD" ] ||
		skip "no rackpilotd at $RACKPILOTD (build first, or set RACKPILOTD)"
	[ -x "$AGENT" ] || skip "no agent at $AGENT (build first, or set AGENT)"
	# root in a container may still be refused namespaces
	local probe=rpe2e-probe-$$
	# (in a bare chroot `ip netns add` can half-succeed: probe the whole round trip)
	if ! { ip netns add "$probe" && ip netns exec "$probe" true && ip netns del "$probe"; } 2> /dev/null; then
		ip netns del "$probe" 2> /dev/null || true
		skip "cannot create network namespaces here"
	fi
}

# ---- the work directory and the rack -------------------------------------------------------
# new_work PREFIX: a fresh work directory (E2E_WORK, else mktemp); exported for rack.sh
# The rack outlives a SIGKILLed script (QEMU, ipmi_sim, dnsmasq and rackpilotd run detached),
# and ctest ends a test that overruns its TIMEOUT with SIGKILL. So the script keeps its own
# deadline, E2E_DEADLINE seconds from its start (default 780, below the 900 s ctest TIMEOUT),
# after which a watchdog sends it SIGTERM: the EXIT trap then dumps the logs and takes the
# rack down.
E2E_DEADLINE=${E2E_DEADLINE:-780}
WATCHDOG=

new_work() {
	W=${E2E_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")}
	mkdir -p "$W"
	W=$(CDPATH='' cd -- "$W" && pwd)
	export E2E_WORK=$W
	FAILED=1
	trap on_exit EXIT
	trap 'exit 130' INT TERM HUP
	# stdout gone (a reader that quit): still clean up, logging to the work directory
	trap 'exit 141' PIPE
	start_watchdog
}

# The watchdog waits in bash's read builtin on a FIFO nobody writes (no sleep process left
# behind when it is killed), then sends SIGTERM to this script.
start_watchdog() {
	local main=$$ left
	left=$(awk -v d="$E2E_DEADLINE" -v e="$(elapsed "$T0")" 'BEGIN { l = d - e; print (l < 1 ? 1 : int(l)) }')
	rm -f "$W/.watchdog"
	mkfifo "$W/.watchdog"
	(
		trap - EXIT INT TERM HUP PIPE
		exec 3<> "$W/.watchdog"
		read -r -t "$left" _ <&3 && exit 0
		echo "e2e: not done after E2E_DEADLINE=$E2E_DEADLINE s: stopping" >&2
		kill -TERM "$main"
	) < /dev/null &
	WATCHDOG=$!
}

on_exit() {
	local rc=$?
	set +e
	[ -z "$WATCHDOG" ] || kill "$WATCHDOG" 2> /dev/null
	[ "$rc" = 141 ] && exec >> "$W/teardown.log" 2>&1
	if [ "$FAILED" = 1 ] && [ "$rc" != 77 ]; then
		sleep 0.3 # rackpilotd writes its access log every 250 ms
		echo "FAILED (exit $rc); logs follow" >&2
		dump_logs >&2
	fi
	if [ "${E2E_KEEP:-0}" = 1 ]; then
		echo "E2E_KEEP=1: the rack stays up; stop it with: E2E_WORK=$W $E2E_DIR/rack.sh down" >&2
		return
	fi
	"$E2E_DIR/rack.sh" down 2>&1 | sed 's/^/  /'
	rm -f "$W/.watchdog"
	if [ "$FAILED" = 1 ]; then
		echo "work directory kept for inspection: $W" >&2
	else
		rm -rf "$W"
	fi
}

# pass: mark success (the EXIT trap then removes the work directory)
pass() { FAILED=0; }

load_rack() {
	# shellcheck source=/dev/null
	. "$W/rack.env"
}

nsx() { ip netns exec "$NS" "$@"; }

record_pid() { echo "$1 $2" >> "$W/pids"; }

# ---- failure and logs ----------------------------------------------------------------------
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

dump_file() { # FILE [LINES]
	[ -f "$1" ] || return 0
	echo "----- ${1#"$W"/} (last ${2:-60} lines)"
	tail -n "${2:-60}" "$1" | tr -d '\r' | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g'
}

dump_logs() {
	[ -n "${W:-}" ] && [ -d "$W" ] || return 0
	local f
	dump_file "$W/rackpilotd.log" 120
	for f in "$W"/vm*/; do
		dump_file "$f/power.log" 20
		dump_file "$f/console.log" 80
		dump_file "$f/qemu.log" 10
		dump_file "$f/sim.log" 10
		dump_file "$f/sol-relay.log" 10
	done
	for f in "$W"/rp/console/*.log; do dump_file "$f" 40; done
	dump_file "$W/dnsmasq.log" 60
	dump_file "$W/lease-events.log" 20
	dump_file "$W/lldpd.log" 20
	dump_file "$W/api.log" 30
}

# ---- JSON and the API ----------------------------------------------------------------------
# jget PATH [FILE]: a value out of JSON (stdin or FILE). PATH is dotted: .a.b.0.c ; strings print
# raw, other values as JSON, a missing value as nothing (status 1).
jget() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[2]) if len(sys.argv) > 2 else sys.stdin)
for k in [k for k in sys.argv[1].split(".") if k]:
    if isinstance(d, list):
        d = d[int(k)] if k.lstrip("-").isdigit() and -len(d) <= int(k) < len(d) else None
    elif isinstance(d, dict):
        d = d.get(k)
    else:
        d = None
    if d is None:
        sys.exit(1)
print(d if isinstance(d, str) else json.dumps(d))
' "$@"
}

# jpy EXPR [FILE]: evaluate a Python expression over the JSON document `d` and print it
jpy() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[2]) if len(sys.argv) > 2 else sys.stdin)
r = eval(sys.argv[1])
print(r if isinstance(r, str) else json.dumps(r))
' "$@"
}

RP_URL=
RP_TOKEN=
RP_BOOT_URL=
API_STATUS=
API_BODY=
# How curl reaches the API: HTTPS, checked against rackpilotd's own certificate (its SAN is
# the bridge address) and pinned to its public key, as an operator's client would.
RP_TLS=()

# api METHOD PATH [JSON | @FILE [CONTENT-TYPE]]: sets API_STATUS and API_BODY (a file)
api() {
	local m=$1 p=$2 args=()
	API_BODY=$W/api.last
	if [ $# -ge 3 ]; then
		if [[ $3 == @* ]]; then
			args=(-H "Content-Type: ${4:-application/octet-stream}" --data-binary "$3")
		else
			args=(-H "Content-Type: application/json" --data-binary "$3")
		fi
	fi
	API_STATUS=$(nsx curl -sS "${RP_TLS[@]}" -o "$API_BODY" -w '%{http_code}' -X "$m" \
		--max-time 120 -H "Authorization: Bearer $RP_TOKEN" "${args[@]}" "$RP_URL$p") ||
		API_STATUS=000
	echo "$m $p -> $API_STATUS" >> "$W/api.log"
}

# api_expect CODES METHOD PATH [BODY...]: api, fail unless the status is one of CODES (a,b,..);
# prints the body
api_expect() {
	local codes=$1
	shift
	api "$@"
	[[ ,$codes, == *,$API_STATUS,* ]] ||
		fail "$1 $2: HTTP $API_STATUS (wanted $codes): $(head -c 2000 "$API_BODY")"
	cat "$API_BODY"
}

# wait_for SECONDS WHAT CMD...: run CMD every 0.5 s until it succeeds; fail after SECONDS
wait_for() {
	local limit=$1 what=$2 start=$SECONDS
	shift 2
	until "$@"; do
		((SECONDS - start < limit)) || fail "timed out after ${limit} s waiting for $what"
		sleep 0.5
	done
	say "$what ($((SECONDS - start)) s)"
}

# wait_job ID SECONDS: wait until the job has ended; prints its final JSON
job_ended() {
	api GET "/v1/jobs/$1"
	[ "$API_STATUS" = 200 ] || return 1
	case $(jget .state "$API_BODY") in queued | running) return 1 ;; esac
	cp "$API_BODY" "$W/job-$1.json"
}
wait_job() {
	wait_for "$2" "job $1 ended" job_ended "$1" >&2
	cat "$W/job-$1.json"
}

# expect_job_ok ID SECONDS WHAT
expect_job_ok() {
	local j state
	j=$(wait_job "$1" "$2")
	state=$(echo "$j" | jget .state)
	[ "$state" = succeeded ] || fail "$3: job $1 $state: $(echo "$j" | head -c 3000)"
}

# ---- the rack's nodes (e2e.sh, accept.sh) ----------------------------------------------------
# VM N's vm.conf (rack.sh) sets these (for the scripts that source this file)
# shellcheck disable=SC2034
NAME='' MAC='' SERIAL='' UUID='' BMC_PORT=''
vm() { # N: load VM N's vm.conf
	# shellcheck source=/dev/null
	. "$W/vm$1/vm.conf"
}

# wait_states WANT NODE...: poll the nodes until every one is in WANT; fails at once when one
# lands in a *_failed state, or after LIMIT s. Sets AT[node] = epoch when WANT was first seen.
declare -A AT
wait_states() {
	local want=$1 start=$SECONDS node st left
	shift
	while :; do
		left=0
		for node in "$@"; do
			[ -n "${AT[$node]:-}" ] && continue
			api GET "/v1/nodes/$node"
			[ "$API_STATUS" = 200 ] || fail "GET node $node: HTTP $API_STATUS"
			st=$(jget .provision_state "$API_BODY")
			if [ "$st" = "$want" ]; then
				AT[$node]=$EPOCHREALTIME
				cp "$API_BODY" "$W/$node.$want.json"
				say "$node is $want"
				continue
			fi
			case $st in *_failed)
				fail "$node is $st ($(jget .provision_error "$API_BODY" || echo 'no reason')) instead of $want" ;;
			esac
			left=$((left + 1))
		done
		((left)) || return 0
		((SECONDS - start < ${LIMIT:-300})) || fail "timed out after ${LIMIT:-300} s waiting for $want ($*)"
		sleep 0.25
	done
}

# provision NODE BODY: PUT /v1/nodes/NODE/provision; prints the job id ("" when none)
provision() {
	api_expect 200,202 PUT "/v1/nodes/$1/provision" "$2" | jpy 'd.get("job", {}).get("id", "") if isinstance(d.get("job"), dict) else ""'
}

# upload NAME KIND FILE: PUT /v1/images/NAME streamed (curl -T), with its sha256
upload() {
	local sha size
	sha=$(sha256sum < "$3" | cut -c1-64)
	size=$(stat -c %s "$3")
	API_BODY=$W/api.last
	API_STATUS=$(nsx curl -sS "${RP_TLS[@]}" -o "$API_BODY" -w '%{http_code}' -X PUT -T "$3" \
		--max-time 300 \
		-H "Authorization: Bearer $RP_TOKEN" -H "Content-Type: application/octet-stream" \
		"$RP_URL/v1/images/$1?kind=$2&sha256=$sha") || API_STATUS=000
	echo "PUT /v1/images/$1 -> $API_STATUS" >> "$W/api.log"
	[ "$API_STATUS" = 201 ] || fail "upload $1: HTTP $API_STATUS: $(head -c 2000 "$API_BODY")"
	if [ "$(jget .sha256 "$API_BODY")" != "$sha" ] || [ "$(jget .size "$API_BODY")" != "$size" ]; then
		fail "upload $1: stored as $(cat "$API_BODY"), sent $size bytes sha256 $sha"
	fi
	say "image $1 ($2): $size bytes, sha256 ${sha:0:16}..."
}

# bmc_json N: the "bmc" member of VM N's node (its ipmi_sim; see README's pitfalls: -C 3)
bmc_json() {
	vm "$1"
	printf '{"driver":"ipmi","address":"127.0.0.1","port":%s,"username":"%s","password":"%s",%s}' \
		"$BMC_PORT" "$BMC_USER" "$BMC_PASSWORD" \
		'"options":{"cipher_suite":3,"workarounds":["opensesspriv"],"session_timeout_ms":3000,"retransmission_timeout_ms":500}'
}

# ---- rackpilotd ------------------------------------------------------------------------------
# rackpilotd_conf FILE: the rig's configuration (images in W/images, dnsmasq's hosts file, the
# agent heartbeat every 5 s, provisioning timeout LIMIT, console_log = E2E_CONSOLE_LOG when set);
# checked with rackpilotd -n
rackpilotd_conf() {
	cat > "$1" << EOF
[server]
log_level = info
power_sync_interval = 30
agent_heartbeat = 5
image_dir = $W/images
boot_url = http://$BR_IP:$BOOT_PORT
boot_listen = $BR_IP:$BOOT_PORT
dnsmasq_hosts = $DNSMASQ_HOSTS
dnsmasq_pidfile = $DNSMASQ_PIDFILE
discovery = false
provision_timeout = ${LIMIT:-300}
${E2E_CONSOLE_LOG:+console_log = $E2E_CONSOLE_LOG}
EOF
	"$RACKPILOTD" -n -c "$1" > "$W/rackpilotd.effective.conf" 2>&1 ||
		fail "rackpilotd -n rejects the configuration: $(cat "$W/rackpilotd.effective.conf")"
}

# start_rackpilotd CONF: in the namespace, on $BR_IP:$PORT; sets RP_URL and RP_TOKEN
start_rackpilotd() {
	local conf=$1
	mkdir -p "$W" && mkdir -p -m 700 "$W/rp"
	# `ip netns exec` execs rackpilotd: $! is rackpilotd
	ip netns exec "$NS" "$RACKPILOTD" -c "$conf" --listen "$BR_IP:$PORT" --data-dir "$W/rp" \
		${E2E_DB:+--database "$E2E_DB"} \
		> "$W/rackpilotd.log" 2>&1 < /dev/null &
	record_pid $! rackpilotd
	RP_URL=https://$BR_IP:$PORT
	RP_BOOT_URL=http://$BR_IP:$BOOT_PORT
	# Not on loopback: TLS on by default, with a certificate rackpilotd makes for the address
	# and whose key fingerprint it logs. The boot scripts carry the same pin to the agent.
	wait_for 30 "rackpilotd logs its TLS fingerprint" \
		grep -q 'public-key SHA-256 fingerprint [0-9a-f]\{64\}' "$W/rackpilotd.log"
	RP_FINGERPRINT=$(sed -n 's/.*public-key SHA-256 fingerprint \([0-9a-f]\{64\}\).*/\1/p' \
		"$W/rackpilotd.log" | head -n 1)
	RP_TLS=(--cacert "$W/rp/tls/cert.pem"
		--pinnedpubkey "sha256//$(printf '%s' "$RP_FINGERPRINT" | xxd -r -p | base64)")
	wait_for 30 "rackpilotd answers on $RP_URL (TLS, pinned)" \
		nsx curl -fs "${RP_TLS[@]}" -o /dev/null --max-time 2 "$RP_URL/healthz"
	# The key the server pins to matches what openssl sees in the certificate.
	[ "$(openssl x509 -in "$W/rp/tls/cert.pem" -noout -pubkey | openssl pkey -pubin -outform DER |
		sha256sum | cut -c1-64)" = "$RP_FINGERPRINT" ] ||
		fail "the logged fingerprint is not the certificate's public key"
	# Plain HTTP to the API port is refused; the boot listener serves nothing but /boot/.
	if nsx curl -fs -o /dev/null --max-time 2 "http://$BR_IP:$PORT/healthz"; then
		fail "plain HTTP answered on the TLS port"
	fi
	[ "$(nsx curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$RP_BOOT_URL/v1")" = 404 ] ||
		fail "the boot listener serves /v1"
	RP_TOKEN=$(cat "$W/rp/admin.token")
}

# console_has N PATTERN: VM N's console log (since its last power on) has PATTERN (grep -E).
# (Not grep -q: with pipefail, grep -q quitting at an early match makes the writers die of
# SIGPIPE and the pipeline "fail".)
console_has() {
	awk '/=== e2e-rig: .* power on / { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' \
		"$W/vm$1/console.log" | tr -d '\r' | grep -aE -- "$2" > /dev/null
}
