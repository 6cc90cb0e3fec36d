#!/bin/sh
# Soak benchmark: rackpilotd under mixed load for DURATION seconds on loopback.
#  - AGENTS simulated agents (bench/soak_load.c): the agent's own register + heartbeat requests,
#    bootstrap tokens minted through the API, heartbeat period agent_heartbeat (HB_S, 5 s);
#  - CLIENTS API clients (operator tokens minted through the API): reads, PATCH with If-Match,
#    bulk power on tags of 10 mock BMC nodes, SSE event streams;
#  - power sweeps over N_BMC Redfish mock BMCs (one tests/redfish/mock_bmc.py process),
#    power_sync_interval SYNC_S (10 s);
#  - one firmware rollout (nic0, redfish-push) over the last 100 of those BMCs, canary 1 then
#    batches of 10, started 30 s into the load.
# Sampled every 10 s: rackpilotd's RSS, WAL size and CPU time. Reports requests, errors and
# p50/p99 per route class, RSS slope (KiB/min), WAL bound, CPU s/min, jobs, rollout outcome.
# Usage: bench/soak.sh   (BIN=path/to/rackpilotd LOAD=path/to/rp_soak_load: use those, build
#                         nothing; env DURATION=600 AGENTS=1000 CLIENTS=50 N_BMC=500 HB_S=5 SYNC_S=10
#                         THINK_MS=200 PORT_BASE=24000 BUILD=bench/out/build-soak, a Release
#                         build of rackpilotd and rp_soak_load, made here)
# Results: bench/out/soak.txt
set -eu
cd "$(dirname "$0")/.."
DURATION=${DURATION:-600}; AGENTS=${AGENTS:-1000}; CLIENTS=${CLIENTS:-50}; N_BMC=${N_BMC:-500}
HB_S=${HB_S:-5}; SYNC_S=${SYNC_S:-10}; PORT_BASE=${PORT_BASE:-24000}
export THINK_MS=${THINK_MS:-200}
N_FW=100; N_PW=$((N_BMC - N_FW))
export POWER_TAGS=$((N_PW / 10))
BUILD=${BUILD:-bench/out/build-soak}
OUT=bench/out
mkdir -p "$OUT"
[ -x .ci/deps ] && sh .ci/deps
if [ -z "${BIN:-}" ]; then
	cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$BUILD" -j "$(nproc)" --target rackpilotd rp_soak_load >/dev/null
	BIN="$PWD/$BUILD/rackpilotd"
fi
LOAD=${LOAD:-$PWD/$BUILD/bench/rp_soak_load}
TMP=$(mktemp -d /tmp/rp-bench-soak-XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
HZ=$(getconf CLK_TCK)
now_ms() { date +%s%3N; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

python3 tests/redfish/mock_bmc.py --port-base "$PORT_BASE" --count "$N_BMC" \
	--ready-file "$TMP/rf.ready" >/dev/null 2>"$TMP/mock.log" &
PIDS="$PIDS $!"
for _ in $(seq 300); do [ -f "$TMP/rf.ready" ] && break; sleep 0.1; done
[ -f "$TMP/rf.ready" ] || { echo "soak: the mock BMCs did not start" >&2; cat "$TMP/mock.log" >&2; exit 1; }
for i in $(seq 0 $((N_BMC - 1))); do
	echo "url = \"http://127.0.0.1:$((PORT_BASE + i))/__mock/config\""
	echo 'data = "{\"power_delay_s\": 0, \"bmc_reboot_requests\": 0}"'
	echo 'output = "/dev/null"'
done >"$TMP/knobs.cfg"
curl -s --parallel --parallel-max 16 -K "$TMP/knobs.cfg" 2>/dev/null

cat >"$TMP/rp.conf" <<EOF
[server]
job_workers = 32
power_sync_interval = $SYNC_S
agent_heartbeat = $HB_S
# $AGENTS registrations from one loopback address in the first 10 s
boot_rate = 1000
boot_burst = 1000
EOF
D="$TMP/data"
"$BIN" --listen 127.0.0.1:0 --data-dir "$D" --no-access-log --config "$TMP/rp.conf" \
	>"$D.out" 2>"$D.log" &
SPID=$!; PIDS="$PIDS $SPID"
for _ in $(seq 100); do grep -q listening "$D.out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$D.out")
TOKEN=$(cat "$D/admin.token")
AUTH="Authorization: Bearer $TOKEN"
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }

awk -v n="$N_BMC" -v pw="$N_PW" -v pb="$PORT_BASE" -v na="$AGENTS" -v nc="$CLIENTS" 'BEGIN {
	printf "{\"racks\":[";
	for (r = 0; r < 10; r++) printf "%s{\"name\":\"s%02d\"}", (r ? "," : ""), r;
	printf "],\"nodes\":[";
	sep = "";
	for (i = 0; i < n; i++) {
		if (i < pw)
			printf "%s{\"name\":\"bm%03d\",\"rack\":\"s%02d\",\"node_class\":\"soak-pw\",\"tags\":[\"pw%02d\"],", sep, i, i % 10, int(i / 10);
		else
			printf "%s{\"name\":\"fw%03d\",\"rack\":\"s%02d\",\"node_class\":\"soak-fw\",", sep, i - pw, i % 10;
		printf "\"bmc\":{\"driver\":\"redfish\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"secret\",\"options\":{\"scheme\":\"http\"}}}", pb + i;
		sep = ",";
	}
	for (i = 0; i < nc; i++) printf ",{\"name\":\"pa%02d\",\"tags\":[\"patch\"]}", i;
	for (i = 0; i < na; i++) printf ",{\"name\":\"ag%04d\",\"tags\":[\"agent\"]}", i;
	printf "]}" }' >"$TMP/nodes.json"
api --data-binary @"$TMP/nodes.json" "http://$ADDR/v1/import" >/dev/null
echo "firmware image nic 3.0.0" >"$TMP/nic_3.0.0.bin"
curl -sf -X PUT -H "$AUTH" -H 'Content-Type: application/octet-stream' \
	--data-binary @"$TMP/nic_3.0.0.bin" "http://$ADDR/v1/images/nic_3.0.0.bin?kind=firmware" >/dev/null
api -d '{"name":"soak","node_class":"soak-fw","components":{"nic0":{"version":"3.0.0","image":"nic_3.0.0.bin","method":"redfish-push"}}}' \
	"http://$ADDR/v1/firmware/baselines" >/dev/null

# The load, in the background; the rollout starts 30 s into it; samples every 10 s.
"$LOAD" "http://$ADDR" "$TOKEN" "$DURATION" "$AGENTS" "$CLIENTS" "$TMP/load.txt" 2>"$TMP/load.log" &
LPID=$!; PIDS="$PIDS $LPID"
while ! grep -q "load for" "$TMP/load.log" 2>/dev/null; do
	kill -0 "$LPID" 2>/dev/null || { cat "$TMP/load.log" >&2; exit 1; }
	sleep 0.2
done
T0=$(now_ms)
: >"$TMP/samples"
ID=""
while kill -0 "$LPID" 2>/dev/null; do
	t=$(( ($(now_ms) - T0) / 1000 ))
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$SPID/status")
	wal=$(stat -c %s "$D/rackpilot.db-wal" 2>/dev/null || echo 0)
	cpu=$(awk '{print $14 + $15}' "/proc/$SPID/stat")
	db=$(stat -c %s "$D/rackpilot.db" 2>/dev/null || echo 0)
	thr=$(awk '/^Threads/ {print $2}' "/proc/$SPID/status")
	echo "$t $rss $wal $cpu $db $thr" >>"$TMP/samples"
	if [ -z "$ID" ] && [ "$t" -ge 30 ]; then
		ID=$(api -d '{"kind":"firmware","selector":{"class":"soak-fw"},"waves":{"canary":1,"batch":10},"gate":{"wait_s":0,"require":["version_match"]}}' \
			"http://$ADDR/v1/rollouts" | jget 'd["id"]')
	fi
	sleep 10
done
wait "$LPID" || { echo "soak: the load driver failed" >&2; cat "$TMP/load.log" >&2; exit 1; }
RO=$( [ -n "$ID" ] && api "http://$ADDR/v1/rollouts/$ID" | jget '"%s%s: %d succeeded, %d failed, %d skipped, %d waves; mean node %s ms" % (d["state"], " (" + d["reason"] + ")" if d.get("reason") else "", d["counts"]["succeeded"], d["counts"]["failed"], d["counts"]["skipped"], len(d["waves"]), d["mean_node_ms"])' || echo "not started")
python3 - "http://$ADDR" "$TOKEN" >"$TMP/jobs.txt" <<'EOF'
import json, sys, urllib.request
base, tok = sys.argv[1], sys.argv[2]
def count(q):
    n, cur = 0, None
    while True:
        url = "%s/v1/jobs?%slimit=1000%s" % (base, q, "&cursor=" + cur if cur else "")
        d = json.load(urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + tok})))
        n += len(d["items"]); cur = d.get("next_cursor")
        if not cur: return n
print("jobs: %d succeeded, %d failed, %d cancelled, %d still queued, %d running" % tuple(
      count("state=%s&" % s) for s in ("succeeded", "failed", "cancelled", "queued", "running")))
EOF
python3 - "$TMP/samples" "$HZ" >"$TMP/samples.txt" <<'EOF'
import sys
rows = [list(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
hz = int(sys.argv[2])
def slope(pts):
    n = len(pts)
    if n < 2: return 0.0
    mx = sum(p[0] for p in pts) / n; my = sum(p[1] for p in pts) / n
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den * 60 if den else 0.0
rss = [(r[0], r[1]) for r in rows]
warm = [p for p in rss if p[0] >= 60]
print("RSS KiB every 10 s: " + " ".join(str(r[1]) for r in rows))
print("RSS: first %d KiB, last %d KiB, max %d KiB; slope %.1f KiB/min over the run, %.1f KiB/min after the first minute" %
      (rss[0][1], rss[-1][1], max(p[1] for p in rss), slope(rss), slope(warm)))
print("WAL bytes every 10 s: " + " ".join(str(r[2]) for r in rows))
print("WAL: max %d bytes, last %d bytes" % (max(r[2] for r in rows), rows[-1][2]))
print("database file: %d KiB at the start, %d KiB at the end; threads: %d to %d" %
      (rows[0][4] // 1024, rows[-1][4] // 1024, min(r[5] for r in rows), max(r[5] for r in rows)))
print("DB KiB every 10 s: " + " ".join(str(r[4] // 1024) for r in rows))
span = (rows[-1][0] - rows[0][0]) / 60
cpu = (rows[-1][3] - rows[0][3]) / hz
per = [((b[3] - a[3]) / hz) / ((b[0] - a[0]) / 60) for a, b in zip(rows, rows[1:]) if b[0] > a[0]]
print("CPU: %.1f s over %.1f min = %.1f CPU s/min (per 10 s sample, as s/min: min %.1f, max %.1f)" %
      (cpu, span, cpu / span if span else 0, min(per) if per else 0, max(per) if per else 0))
EOF
# A clean stop: SIGTERM, exit status 0 (an ASan build, BIN=..., reports leaks here).
kill -TERM "$SPID"
RC=0; wait "$SPID" || RC=$?
LEAKS=$(grep -c 'ERROR: LeakSanitizer\|ERROR: AddressSanitizer' "$D.log" || true)
[ "$LEAKS" = 0 ] || grep -A3 'SUMMARY\|ERROR: ' "$D.log" >"$OUT/soak-sanitizer.txt" || true
{
	echo "rackpilot soak — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "command: DURATION=$DURATION AGENTS=$AGENTS CLIENTS=$CLIENTS N_BMC=$N_BMC HB_S=$HB_S SYNC_S=$SYNC_S THINK_MS=$THINK_MS bench/soak.sh"
	echo "power sweeps every $SYNC_S s over $N_BMC mock BMCs; job_workers 32"
	cat "$TMP/load.txt"
	cat "$TMP/samples.txt"
	cat "$TMP/jobs.txt"
	echo "rollout (nic0 to $N_FW nodes, canary 1 + batches of 10, started at +30 s): $RO"
	echo "rackpilotd stopped with SIGTERM: exit $RC; sanitizer reports: $LEAKS"
	echo "server log: $(grep -c . "$D.log") lines, $(grep -ci 'error' "$D.log" || true) with 'error', $(grep -ci 'warn' "$D.log" || true) with 'warn'"
} | tee "$OUT/soak.txt"
grep -i 'error\|warn' "$D.log" | sed 's/^[^ ]* //' | sort | uniq -c | sort -rn | head -20 >"$OUT/soak-serverlog.txt" || true
