#!/bin/sh
# Rollout benchmark (firmware issue):
#  1. a firmware rollout (one component, redfish-push) to N_RF Redfish mock BMCs in one mock
#     process: canary 1, then batches of BATCH; wall time from POST to completed vs the ideal
#     (waves x the mean per-node update time the rollout itself measured), per-wave times,
#     server CPU and peak RSS. job_workers is set to BATCH so a wave runs at once.
#  2. drift over N_DRIFT nodes (40 racks; 12 firmware components each, a third drifted):
#     GET /v1/firmware/drift for the whole fleet and for one rack (median of ROUNDS), and the
#     planning of a rollout over all of them (POST /v1/rollouts, then aborted).
# The server runs on CPU 0, the mock BMCs and the clients on the others (as bench/foundation.sh).
# Usage: bench/rollout.sh   (env N_RF=500 BATCH=50 N_DRIFT=10000 ROUNDS=5 RP_BIN=).
# Results: bench/out/rollout.txt
set -eu
cd "$(dirname "$0")/.."
N_RF=${N_RF:-500}; BATCH=${BATCH:-50}; N_DRIFT=${N_DRIFT:-10000}; ROUNDS=${ROUNDS:-5}
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
# RP_BIN: run another build (say, of an earlier commit) instead of building this tree.
if [ -n "${RP_BIN:-}" ]; then
	BIN=$(readlink -f "$RP_BIN")
else
	cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd >/dev/null
	BIN="$PWD/$OUT/build/rackpilotd"
fi
TMP=$(mktemp -d /tmp/rp-bench-rollout-XXXXXX)
NCPU=$(nproc)
OTHER="1-$((NCPU - 1))"
[ "$NCPU" -ge 2 ] || OTHER=0
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

now_ms() { date +%s%3N; }
start_server() { # datadir [config] -> sets ADDR, AUTH, SPID
	taskset -c 0 "$BIN" --listen 127.0.0.1:0 --data-dir "$1" --power-sync-interval 0 \
		--no-access-log ${2:+--config "$2"} >"$1.out" 2>"$1.log" &
	SPID=$!; PIDS="$PIDS $SPID"
	for _ in $(seq 100); do grep -q listening "$1.out" 2>/dev/null && break; sleep 0.1; done
	ADDR=$(sed -n 's/^listening on //p' "$1.out")
	AUTH="Authorization: Bearer $(cat "$1/admin.token")"
}
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
HZ=$(getconf CLK_TCK)

# ---- 1. Rollout to N_RF mock BMCs -----------------------------------------------------------
taskset -c "$OTHER" python3 tests/redfish/mock_bmc.py --port-base 28000 --count "$N_RF" \
	--ready-file "$TMP/rf.ready" >/dev/null &
PIDS="$PIDS $!"
for _ in $(seq 300); do [ -f "$TMP/rf.ready" ] && break; sleep 0.1; done
for i in $(seq 0 $((N_RF - 1))); do
	echo "url = \"http://127.0.0.1:$((28000 + i))/__mock/config\""
	echo 'data = "{\"power_delay_s\": 0, \"bmc_reboot_requests\": 0}"'
	echo 'output = "/dev/null"'
done >"$TMP/knobs.cfg"
curl -s --parallel --parallel-max 16 -K "$TMP/knobs.cfg"
printf '[server]\njob_workers = %d\n' "$BATCH" >"$TMP/rp.conf"
start_server "$TMP/rf" "$TMP/rp.conf"
awk -v n="$N_RF" 'BEGIN {
	printf "{\"racks\":[";
	for (r = 0; r < 10; r++) printf "%s{\"name\":\"r%02d\"}", (r ? "," : ""), r;
	printf "],\"nodes\":[";
	for (i = 0; i < n; i++)
		printf "%s{\"name\":\"rf%03d\",\"rack\":\"r%02d\",\"node_class\":\"gpu-a\",\"bmc\":{\"driver\":\"redfish\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"secret\",\"options\":{\"scheme\":\"http\"}}}", (i > 0 ? "," : ""), i, i % 10, 28000 + i;
	printf "]}" }' >"$TMP/rf.json"
api --data-binary @"$TMP/rf.json" "http://$ADDR/v1/import" >/dev/null
echo "firmware image nic 3.0.0" >"$TMP/nic_3.0.0.bin"
curl -sf -X PUT -H "$AUTH" -H 'Content-Type: application/octet-stream' \
	--data-binary @"$TMP/nic_3.0.0.bin" "http://$ADDR/v1/images/nic_3.0.0.bin?kind=firmware" >/dev/null
api -d '{"name":"a","node_class":"gpu-a","components":{"nic0":{"version":"3.0.0","image":"nic_3.0.0.bin","method":"redfish-push"}}}' \
	"http://$ADDR/v1/firmware/baselines" >/dev/null
c0=$(cpu_ticks "$SPID"); t0=$(now_ms)
ID=$(api -d "{\"kind\":\"firmware\",\"selector\":{\"class\":\"gpu-a\"},\"waves\":{\"canary\":1,\"batch\":$BATCH},\"gate\":{\"require\":[\"version_match\"]}}" \
	"http://$ADDR/v1/rollouts" | jget 'd["id"]')
while :; do
	api "http://$ADDR/v1/rollouts/$ID" >"$TMP/ro.json"
	ST=$(jget 'd["state"]' <"$TMP/ro.json")
	[ "$ST" = running ] || break
	sleep 0.2
done
WALL=$(( $(now_ms) - t0 )); c1=$(cpu_ticks "$SPID")
RF_CPU=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / hz}')
RF_RSS=$(awk '/VmHWM/ {print $2}' "/proc/$SPID/status")
python3 - "$TMP/ro.json" "$WALL" >"$TMP/ro.txt" <<'EOF'
import json, sys
from datetime import datetime
d = json.load(open(sys.argv[1])); wall = int(sys.argv[2])
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() * 1000
waves = d["waves"]; mean = d["mean_node_ms"] or 0
durs = [t(w["gate_done_at"]) - t(w["started_at"]) for w in waves if w["gate_done_at"]]
ideal = len(waves) * mean
print("   state %s: %d succeeded, %d failed, %d skipped, %d waves" % (d["state"], d["counts"]["succeeded"],
      d["counts"]["failed"], d["counts"]["skipped"], len(waves)))
print("   wall %.1f s, ideal %.1f s (%d waves x mean node update %.2f s): %.2fx the ideal" %
      (wall / 1000, ideal / 1000, len(waves), mean / 1000, wall / ideal if ideal else 0))
print("   per wave (start to gate done), s: " + ", ".join("%.1f" % (x / 1000) for x in durs))
print("   time between waves (gate done to next start), ms: " + ", ".join(
      "%d" % (t(waves[i + 1]["started_at"]) - t(waves[i]["gate_done_at"])) for i in range(len(waves) - 1)))
EOF
UPD=0
for i in $(seq 0 $((N_RF - 1))); do
	n=$(curl -s "http://127.0.0.1:$((28000 + i))/__mock/state" | jget 'd["update_count"]["NIC0"]')
	UPD=$((UPD + n))
done
kill "$SPID"; wait "$SPID" 2>/dev/null || true

# ---- 2. Drift over N_DRIFT nodes --------------------------------------------------------------
start_server "$TMP/drift"
awk -v n="$N_DRIFT" 'BEGIN {
	printf "{\"racks\":[";
	for (r = 1; r <= 40; r++) printf "%s{\"name\":\"r%02d\"}", (r > 1 ? "," : ""), r;
	printf "],\"nodes\":[";
	for (i = 0; i < n; i++)
		printf "%s{\"name\":\"n%05d\",\"rack\":\"r%02d\",\"node_class\":\"gpu-h100-8x\",\"bmc\":{\"driver\":\"redfish\",\"address\":\"127.%d.%d.%d\",\"username\":\"admin\",\"password\":\"pw\"}}",
			(i > 0 ? "," : ""), i, int(i * 40 / n) + 1, 100 + int(i / 65536), int(i / 256) % 256, i % 256;
	printf "]}" }' >"$TMP/drift.json"
api --data-binary @"$TMP/drift.json" "http://$ADDR/v1/import" >/dev/null
COMPS="bmc bios nic0 nic1 gpu0 gpu1 gpu2 gpu3 gpu4 gpu5 gpu6 gpu7"
BL=$(for c in $COMPS; do printf '"%s":{"version":"2.0","image":"fw.bin","method":"redfish-push"},' "$c"; done)
echo "firmware" >"$TMP/fw.bin"
curl -sf -X PUT -H "$AUTH" -H 'Content-Type: application/octet-stream' \
	--data-binary @"$TMP/fw.bin" "http://$ADDR/v1/images/fw.bin?kind=firmware" >/dev/null
api -d "{\"name\":\"h100\",\"node_class\":\"gpu-h100-8x\",\"components\":{${BL%,}}}" \
	"http://$ADDR/v1/firmware/baselines" >/dev/null
# Readings: every node reports 12 components; one node in three has one component behind.
t0=$(now_ms)
taskset -c "$OTHER" python3 - "$ADDR" "$(cat "$TMP/drift/admin.token")" "$N_DRIFT" "$COMPS" <<'EOF'
import http.client, json, sys, threading
addr, token, n, comps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
host, port = addr.rsplit(":", 1)
def work(k):
    c = http.client.HTTPConnection(host, int(port))
    for i in range(k, n, 4):
        body = {"source": "bench", "components": [{"component": x, "version": "1.0" if (i % 3 == 0 and x == "nic0") else "2.0"} for x in comps]}
        c.request("POST", "/v1/nodes/n%05d/firmware/readings" % i, json.dumps(body),
                  {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        assert r.status == 204, r.status
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
EOF
SEED_MS=$(( $(now_ms) - t0 ))
timed() { # url -> ms
	t0=$(now_ms); api "$1" >"$TMP/drift.out"; echo $(( $(now_ms) - t0 ))
}
: >"$TMP/fleet.ms"; : >"$TMP/rack.ms"
for _ in $(seq "$ROUNDS"); do
	timed "http://$ADDR/v1/firmware/drift" >>"$TMP/fleet.ms"
	timed "http://$ADDR/v1/firmware/drift?rack=r07" >>"$TMP/rack.ms"
done
api "http://$ADDR/v1/firmware/drift" >"$TMP/drift.out"
DRIFTED=$(jget 'd["nodes_drifted"]' <"$TMP/drift.out"); CHECKED=$(jget 'd["nodes_checked"]' <"$TMP/drift.out")
DRIFT_BYTES=$(wc -c <"$TMP/drift.out")
FLEET_MS=$(median <"$TMP/fleet.ms"); RACK_MS=$(median <"$TMP/rack.ms")
# Planning a rollout over the whole fleet (the drifted third takes part), then abort it
# before its canary (an IPMI address nobody answers) gets anywhere.
t0=$(now_ms)
api -d '{"kind":"firmware","selector":{"class":"gpu-h100-8x"},"waves":{"canary":1,"batch":"2%","max_per_rack":5},"start_at":"2099-01-01T00:00:00Z"}' \
	"http://$ADDR/v1/rollouts" >"$TMP/plan.json"
PLAN_MS=$(( $(now_ms) - t0 ))
PID_=$(jget 'd["id"]' <"$TMP/plan.json")
PLAN=$(jget '"%d nodes in %d waves, %d skipped" % (d["counts"]["pending"], d["wave_count"], d["counts"]["skipped"])' <"$TMP/plan.json")
t0=$(now_ms); api "http://$ADDR/v1/rollouts/$PID_" >/dev/null; GET_MS=$(( $(now_ms) - t0 ))
api -X POST "http://$ADDR/v1/rollouts/$PID_/abort" >/dev/null
DRIFT_RSS=$(awk '/VmHWM/ {print $2}' "/proc/$SPID/status")
kill "$SPID"; wait "$SPID" 2>/dev/null || true

{
	echo "rackpilot rollout benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $NCPU CPUs (server on CPU 0)"
	echo "1. firmware rollout (nic0, redfish-push) to $N_RF Redfish mock BMCs in one mock process,"
	echo "   canary 1 then batches of $BATCH, gate version_match, job_workers $BATCH:"
	cat "$TMP/ro.txt"
	echo "   server CPU ${RF_CPU} s over the rollout, peak RSS ${RF_RSS} kB; BMC update counts: $UPD updates for $N_RF nodes"
	echo "2. drift over $N_DRIFT nodes (12 components each, baseline per class; readings seeded in ${SEED_MS} ms):"
	echo "   GET /v1/firmware/drift, whole fleet: median ${FLEET_MS} ms ($CHECKED checked, $DRIFTED drifted, $DRIFT_BYTES bytes)"
	echo "   GET /v1/firmware/drift?rack=r07: median ${RACK_MS} ms   (all runs: fleet $(paste -sd, "$TMP/fleet.ms"), rack $(paste -sd, "$TMP/rack.ms") ms)"
	echo "   POST /v1/rollouts over all $N_DRIFT (plan: $PLAN): ${PLAN_MS} ms; GET of that rollout ${GET_MS} ms"
	echo "   server peak RSS ${DRIFT_RSS} kB"
} | tee "$OUT/rollout.txt"
