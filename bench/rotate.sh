#!/bin/sh
# Credential rotation benchmark (BMC issue): "credential rotation of 200 BMCs as a rollout: wall
# time. Report the figures."
#  For N Redfish mock BMCs (one tests/redfish/mock_bmc.py process; nodes driver redfish, http) and
#  for N ipmi_sim BMCs (tests/ipmi/bmcsim.sh, MC_PLUGIN=1: passwords as a real BMC keeps them;
#  shared mode, 100 per ipmi_sim), each on a fresh fleet and a fresh Release rackpilotd (default
#  settings: job_workers 32):
#  Each of the two timed runs below is done ROUNDS times (medians; all runs listed): the baseline
#  from each round's password to the next, the rollout again over the same nodes.
#  1. the peer baseline: a plain sequential client rotates every BMC's password, one BMC after the
#     other, and proves the new one: Redfish, curl PATCH of /redfish/v1/AccountService/Accounts/1
#     {"Password"} (Basic auth, old password), then a GET of it with the new one; IPMI, `ipmitool
#     -I lanplus -C 3 ... -P OLD user set password 2 NEW 20` then `ipmitool ... -P NEW mc info`
#     (-C 3: without it ipmitool probes cipher suites first, +10 s against ipmi_sim). Then the
#     fleet is started afresh (new state, counters at 0).
#  2. the rollout: POST /v1/rollouts {"kind":"bmc_credentials","selector":{"rack":RACK},
#     "waves":{"canary":1,"batch":"25%"},"max_failures":0}; wall time from the POST to state
#     completed (polled every 100 ms), per wave, the rollout's own mean per node, server CPU and
#     peak RSS.
#  3. checks: every node's stored password works (POST /v1/nodes/{n}/verify for all N, after the
#     last rollout: a job that reads the BMC's identity with it), and each BMC's own counter says
#     its password changed exactly once per rollout (the mock's /__mock/state password_changes;
#     ipmi_sim's bmcN/ops.log "set password" lines).
# Usage: bench/rotate.sh   (env N=200 ROUNDS=3 RP_BIN=).
# Results: bench/out/rotate.txt
set -eu
cd "$(dirname "$0")/.."
CMDLINE="$0${*:+ $*}"
for v in N ROUNDS RP_BIN; do
	eval "x=\${$v:-}"
	[ -z "$x" ] || CMDLINE="$v=$x $CMDLINE"
done
N=${N:-200}; ROUNDS=${ROUNDS:-3}
RF_PORT=30000; IPMI_PORT=24301   # console.sh has 24001-24051
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
if [ -n "${RP_BIN:-}" ]; then
	BIN=$(readlink -f "$RP_BIN")
else
	cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd >/dev/null
	BIN="$PWD/$OUT/build/rackpilotd"
fi
TMP=$(mktemp -d /tmp/rp-bench-rotate-XXXXXX)
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	for d in "$TMP"/sim*; do
		[ -d "$d" ] && BASE_PORT=$IPMI_PORT sh tests/ipmi/bmcsim.sh stop "$d" >/dev/null 2>&1 || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }
start_server() { # datadir -> sets ADDR, AUTH, SPID
	"$BIN" --listen 127.0.0.1:0 --data-dir "$1" --power-sync-interval 0 --sensor-sync-interval 0 \
		--no-access-log >"$1.out" 2>"$1.log" &
	SPID=$!; PIDS="$PIDS $SPID"
	for _ in $(seq 100); do grep -q listening "$1.out" 2>/dev/null && break; sleep 0.1; done
	ADDR=$(sed -n 's/^listening on //p' "$1.out")
	[ -n "$ADDR" ] || { echo "rotate.sh: rackpilotd did not start:" >&2; cat "$1.log" >&2; exit 1; }
	AUTH="Authorization: Bearer $(cat "$1/admin.token")"
}
stop_server() { kill "$SPID"; wait "$SPID" 2>/dev/null || true; }
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks_ms() { awk -v t="$1" -v hz="$HZ" 'BEGIN {printf "%.0f", t * 1000 / hz}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
per() { awk -v a="$1" -v n="$2" 'BEGIN {printf "%.1f", a / n}'; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
# the baseline's password for BMC i after round r (0: the fleet's own): 20 characters, upper,
# lower, digit, a symbol
newpw() { if [ "$2" = 0 ]; then echo "$3"; else printf 'Bench_%03d_%dRotAbcdef' "$1" "$2"; fi; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
list() { paste -sd, "$1" | sed 's/,/, /g'; }
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# nodes: driver, rack, port base, password, options -> $TMP/nodes-<rack>.json
nodes_json() {
	awk -v n="$N" -v drv="$1" -v rack="$2" -v base="$3" -v pw="$4" -v opt="$5" 'BEGIN {
		printf "{\"racks\":[{\"name\":\"%s\"}],\"nodes\":[", rack;
		for (i = 1; i <= n; i++)
			printf "%s{\"name\":\"%s%03d\",\"rack\":\"%s\",\"bmc\":{\"driver\":\"%s\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"%s\",\"options\":%s}}", (i > 1 ? "," : ""), rack, i, rack, drv, base + i - 1, pw, opt;
		printf "]}" }' >"$TMP/nodes-$2.json"
}

# The rollout over rack $1: sets RO_WALL (ms), RO_CPU (ms), RO_RSS (kB), RO_TXT (its summary)
rollout() {
	c0=$(cpu_ticks "$SPID"); t0=$(now_ms)
	ID=$(api -d "{\"kind\":\"bmc_credentials\",\"selector\":{\"rack\":\"$1\"},\"waves\":{\"canary\":1,\"batch\":\"25%\"},\"max_failures\":0}" \
		"http://$ADDR/v1/rollouts" | jget 'd["id"]')
	while :; do
		api "http://$ADDR/v1/rollouts/$ID" >"$TMP/ro.json"
		ST=$(jget 'd["state"]' <"$TMP/ro.json")
		case $ST in completed|aborted|paused) break ;; esac
		sleep 0.1
	done
	RO_WALL=$(($(now_ms) - t0)); RO_CPU=$(ticks_ms $(($(cpu_ticks "$SPID") - c0)))
	RO_RSS=$(awk '/VmHWM/ {print $2}' "/proc/$SPID/status")
	RO_STATE=$ST
	RO_TXT=$(python3 - "$TMP/ro.json" "$RO_WALL" <<'EOF'
import json, sys
from datetime import datetime
d = json.load(open(sys.argv[1])); wall = int(sys.argv[2])
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() * 1000
waves = d["waves"]; c = d["counts"]
sizes = [sum(v for k, v in w.get("counts", {}).items()) if isinstance(w.get("counts"), dict) else "?"
         for w in waves]
durs = ["%.1f" % ((t(w["gate_done_at"]) - t(w["started_at"])) / 1000) if w.get("gate_done_at") and
        w.get("started_at") else "-" for w in waves]
gaps = ["%d" % (t(waves[i + 1]["started_at"]) - t(waves[i]["gate_done_at"]))
        for i in range(len(waves) - 1) if waves[i].get("gate_done_at") and waves[i + 1].get("started_at")]
print("      state %s%s: %d succeeded, %d failed, %d skipped; %d waves (nodes: %s)" % (
    d["state"], " (%s)" % d["reason"] if d.get("reason") else "", c.get("succeeded", 0),
    c.get("failed", 0), c.get("skipped", 0), len(waves), ", ".join(str(s) for s in sizes)))
print("      per wave, start to done, s: %s; between waves, ms: %s" % (", ".join(durs), ", ".join(gaps)))
print("      the rollout's mean per node (job start to end): %.0f ms" % (d.get("mean_node_ms") or 0))
for f in d.get("failed") or []:
    print("      failed: %s" % json.dumps(f)[:300])
EOF
)
}

# POST /v1/nodes/{n}/verify for every node of rack $1 (curl, 8 at a time), then wait for the jobs:
# sets VER_OK VER_FAIL VER_MS (the POSTs to the last job ended, 200 ms polls) VER_ERR
verify_all() {
	for i in $(seq "$N"); do
		echo "url = \"http://$ADDR/v1/nodes/$(printf '%s%03d' "$1" "$i")/verify\""
		printf '%s\n' 'request = "POST"' 'output = "/dev/null"' 'write-out = "%{http_code}\n"'
	done >"$TMP/verify.cfg"
	t0=$(now_ms)
	curl -s --no-progress-meter -H "$AUTH" --parallel --parallel-max 8 -K "$TMP/verify.cfg" >"$TMP/verify.codes"
	VER_QUEUED=$(grep -c '^202$' "$TMP/verify.codes" || true)
	while :; do
		set -- $(api "http://$ADDR/v1/jobs?type=verify&limit=1000" | python3 -c 'import json, sys
s = [j["state"] for j in json.load(sys.stdin)["items"]]
print(s.count("succeeded"), s.count("failed") + s.count("cancelled"))')
		VER_OK=$1; VER_FAIL=$2
		[ $((VER_OK + VER_FAIL)) -lt "$VER_QUEUED" ] || break
		[ $(($(now_ms) - t0)) -lt 300000 ] || break
		sleep 0.2
	done
	VER_MS=$(($(now_ms) - t0))
	VER_ERR=$(api "http://$ADDR/v1/jobs?type=verify&state=failed&limit=3" |
		python3 -c 'import json, sys
for j in json.load(sys.stdin)["items"]: print(json.dumps(j.get("error") or j.get("result"))[:200])')
}

# ---- 1. Redfish -----------------------------------------------------------------------------------
start_mock() { # -> MPID
	rm -f "$TMP/rf.ready"
	python3 tests/redfish/mock_bmc.py --port-base $RF_PORT --count "$N" --ready-file "$TMP/rf.ready" >/dev/null 2>"$TMP/mock.err" &
	MPID=$!; PIDS="$PIDS $MPID"
	for _ in $(seq 600); do [ -f "$TMP/rf.ready" ] && break; sleep 0.1; done
	[ -f "$TMP/rf.ready" ] || { echo "rotate.sh: the Redfish mock did not start" >&2; cat "$TMP/mock.err" >&2; exit 1; }
}
stop_mock() { kill "$MPID"; wait "$MPID" 2>/dev/null || true; }
mock_changes() { # "sum min max" of password_changes over the fleet
	for i in $(seq 0 $((N - 1))); do
		curl -sf "http://127.0.0.1:$((RF_PORT + i))/__mock/state" | jget 'd["password_changes"]'
	done | awk 'NR == 1 {mn = mx = $1} {s += $1; if ($1 < mn) mn = $1; if ($1 > mx) mx = $1} END {print s, mn, mx}'
}
start_mock
# the plain sequential client
RF_SEQ_OK=0; RF_SEQ_FAIL=0; : >"$TMP/rf.seq"
for r in $(seq "$ROUNDS"); do
	t0=$(now_ms)
	for i in $(seq 0 $((N - 1))); do
		u="http://127.0.0.1:$((RF_PORT + i))/redfish/v1/AccountService/Accounts/1"
		old=$(newpw "$i" $((r - 1)) secret); pw=$(newpw "$i" "$r")
		if curl -sf -o /dev/null -u "admin:$old" -X PATCH -H 'Content-Type: application/json' \
			-d "{\"Password\":\"$pw\"}" "$u" && curl -sf -o /dev/null -u "admin:$pw" "$u"; then
			RF_SEQ_OK=$((RF_SEQ_OK + 1))
		else
			RF_SEQ_FAIL=$((RF_SEQ_FAIL + 1))
		fi
	done
	echo $(($(now_ms) - t0)) >>"$TMP/rf.seq"
done
RF_SEQ=$(median <"$TMP/rf.seq")
set -- $(mock_changes); RF_SEQ_CH="$1 (per BMC $2..$3)"
stop_mock
# the rollout, on a fresh fleet
start_mock
start_server "$TMP/rf"
# mock_bmc.py numbers its BMCs from 0: node rf001 is port RF_PORT
nodes_json redfish rf "$RF_PORT" secret '{"scheme":"http"}'
api --data-binary @"$TMP/nodes-rf.json" "http://$ADDR/v1/import" >/dev/null
# "wall_ms cpu_ms state" a line
: >"$TMP/rf.ro"
for r in $(seq "$ROUNDS"); do
	rollout rf
	echo "$RO_WALL $RO_CPU $RO_STATE" >>"$TMP/rf.ro"
done
RF_WALL=$(median <"$TMP/rf.ro"); RF_CPU=$(cut -d' ' -f2 "$TMP/rf.ro" | median); RF_RSS=$RO_RSS; RF_TXT=$RO_TXT
RF_STATE=$(cut -d' ' -f3 "$TMP/rf.ro" | sort | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
verify_all rf
RF_VER="$VER_QUEUED queued, $VER_OK ok, $VER_FAIL failed, in $VER_MS ms"; RF_VER_ERR=$VER_ERR
set -- $(mock_changes); RF_CH_SUM=$1; RF_CH_MIN=$2; RF_CH_MAX=$3
stop_server
stop_mock

# ---- 2. IPMI (ipmi_sim, MC_PLUGIN=1) -------------------------------------------------------------------
start_sim() { # dir
	MC_PLUGIN=1 BASE_PORT=$IPMI_PORT sh tests/ipmi/bmcsim.sh start "$1" "$N" shared >/dev/null
}
stop_sim() { BASE_PORT=$IPMI_PORT sh tests/ipmi/bmcsim.sh stop "$1" >/dev/null; }
sim_changes() { # dir -> "sum min max sizes" of "set password" lines per BMC's ops.log
	for i in $(seq "$N"); do grep -c '^set password' "$1/bmc$i/ops.log" || true; done |
		awk 'NR == 1 {mn = mx = $1} {s += $1; if ($1 < mn) mn = $1; if ($1 > mx) mx = $1} END {printf "%d %d %d", s, mn, mx}'
	echo " $(cat "$1"/bmc*/ops.log | sed -n 's/^set password [0-9]* \([0-9]*\)$/\1-byte/p' | sort | uniq -c | awk '{printf "%s%s:%s", (NR > 1 ? "," : ""), $2, $1}')"
}
mkdir -p "$TMP/sim1" "$TMP/sim2"
start_sim "$TMP/sim1"
IP_SEQ_OK=0; IP_SEQ_FAIL=0; : >"$TMP/ip.seq"
IPT="ipmitool -I lanplus -C 3 -H 127.0.0.1 -U admin"
for r in $(seq "$ROUNDS"); do
	t0=$(now_ms)
	for i in $(seq "$N"); do
		p=$((IPMI_PORT + i - 1)); old=$(newpw "$i" $((r - 1)) password); pw=$(newpw "$i" "$r")
		if $IPT -p "$p" -P "$old" user set password 2 "$pw" 20 >/dev/null 2>>"$TMP/ipmitool.err" &&
			$IPT -p "$p" -P "$pw" mc info >/dev/null 2>>"$TMP/ipmitool.err"; then
			IP_SEQ_OK=$((IP_SEQ_OK + 1))
		else
			IP_SEQ_FAIL=$((IP_SEQ_FAIL + 1))
		fi
	done
	echo $(($(now_ms) - t0)) >>"$TMP/ip.seq"
done
IP_SEQ=$(median <"$TMP/ip.seq")
set -- $(sim_changes "$TMP/sim1"); IP_SEQ_CH="$1 (per BMC $2..$3; $4)"
stop_sim "$TMP/sim1"
# the rollout, on a fresh fleet
start_sim "$TMP/sim2"
start_server "$TMP/ip"
nodes_json ipmi ip "$IPMI_PORT" password '{"workarounds":["opensesspriv"]}'
api --data-binary @"$TMP/nodes-ip.json" "http://$ADDR/v1/import" >/dev/null
: >"$TMP/ip.ro"
for r in $(seq "$ROUNDS"); do
	rollout ip
	echo "$RO_WALL $RO_CPU $RO_STATE" >>"$TMP/ip.ro"
done
IP_WALL=$(median <"$TMP/ip.ro"); IP_CPU=$(cut -d' ' -f2 "$TMP/ip.ro" | median); IP_RSS=$RO_RSS; IP_TXT=$RO_TXT
IP_STATE=$(cut -d' ' -f3 "$TMP/ip.ro" | sort | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
verify_all ip
IP_VER="$VER_QUEUED queued, $VER_OK ok, $VER_FAIL failed, in $VER_MS ms"; IP_VER_ERR=$VER_ERR
set -- $(sim_changes "$TMP/sim2"); IP_CH_SUM=$1; IP_CH_MIN=$2; IP_CH_MAX=$3; IP_CH_SIZES=$4
stop_server
stop_sim "$TMP/sim2"
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

{
	echo "rackpilot credential rotation benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $(uname -r)"
	echo "command: $CMDLINE   (rackpilotd: $BIN)"
	echo "load average before $LOAD0, after $LOAD1 (other work on the machine shows there)"
	echo "rollout: {\"kind\":\"bmc_credentials\",\"selector\":{\"rack\":RACK},\"waves\":{\"canary\":1,\"batch\":\"25%\"},\"max_failures\":0};"
	echo "rackpilotd's defaults (job_workers 32: a wave of 50 runs in two turns); wall = POST to completed (100 ms polls);"
	echo "medians of $ROUNDS runs (the rollout again over the same nodes; the baseline from each round's password on)"
	echo
	echo "1. $N Redfish mock BMCs (one mock_bmc.py process, http, admin/secret)"
	echo "   rollout:    $RF_WALL ms wall, $(per "$RF_WALL" "$N") ms per node; server CPU $RF_CPU ms; peak RSS $RF_RSS kB"
	echo "               (runs: $(cut -d' ' -f1 "$TMP/rf.ro" | paste -sd, | sed 's/,/, /g') ms; $RF_STATE); the last one:"
	echo "$RF_TXT"
	echo "   sequential: $RF_SEQ ms ($(per "$RF_SEQ" "$N") ms per BMC: curl PATCH + GET with the new password;"
	echo "               runs: $(list "$TMP/rf.seq") ms; $RF_SEQ_OK ok, $RF_SEQ_FAIL failed; the mock counted $RF_SEQ_CH changes)"
	echo "   -> rollout / sequential: $(ratio "$RF_WALL" "$RF_SEQ")x the time ($(ratio "$RF_SEQ" "$RF_WALL")x faster)"
	echo "   checks: verify of every node with its stored password: $RF_VER"
	[ -z "$RF_VER_ERR" ] || echo "      e.g. $RF_VER_ERR"
	echo "      password_changes at the mock: $RF_CH_SUM in all, per BMC min $RF_CH_MIN max $RF_CH_MAX (want exactly $ROUNDS each: 1 per rollout)"
	echo
	echo "2. $N ipmi_sim BMCs (MC_PLUGIN=1, shared mode: 100 per ipmi_sim; lanplus, admin/password, user 2)"
	echo "   rollout:    $IP_WALL ms wall, $(per "$IP_WALL" "$N") ms per node; server CPU $IP_CPU ms; peak RSS $IP_RSS kB"
	echo "               (runs: $(cut -d' ' -f1 "$TMP/ip.ro" | paste -sd, | sed 's/,/, /g') ms; $IP_STATE); the last one:"
	echo "$IP_TXT"
	echo "   sequential: $IP_SEQ ms ($(per "$IP_SEQ" "$N") ms per BMC: ipmitool user set password 2 NEW 20 + mc info with NEW;"
	echo "               runs: $(list "$TMP/ip.seq") ms; $IP_SEQ_OK ok, $IP_SEQ_FAIL failed; ops.log: $IP_SEQ_CH)"
	echo "   -> rollout / sequential: $(ratio "$IP_WALL" "$IP_SEQ")x the time ($(ratio "$IP_SEQ" "$IP_WALL")x faster)"
	echo "   checks: verify of every node with its stored password: $IP_VER"
	[ -z "$IP_VER_ERR" ] || echo "      e.g. $IP_VER_ERR"
	echo "      \"set password\" lines in the BMCs' ops.log: $IP_CH_SUM in all, per BMC min $IP_CH_MIN max $IP_CH_MAX (want exactly $ROUNDS each: 1 per rollout;"
	echo "      $IP_CH_SIZES)"
} | tee "$OUT/rotate.txt"
