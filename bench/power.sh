#!/bin/sh
# Power benchmark (BMC issue):
#  1. power-status sweep of N_IPMI simulated IPMI BMCs (ipmi_sim, fork-free chassis plug-in):
#     rackpilotd's sweep vs freeipmi's ipmipower against the same BMCs, same concurrency (64)
#  2. sweep of N_RF Redfish mock BMCs: cold (logins) and warm (cached sessions), server CPU
#  3. power-on of N_FAKE fake-driver nodes through the API, one bulk request and one request
#     per node: time from the first request to all jobs done
# Usage: bench/power.sh   (env N_IPMI=200 N_RF=500 N_FAKE=200 ROUNDS=3 RP_BIN=). Results: bench/out/power.txt
set -eu
cd "$(dirname "$0")/.."
N_IPMI=${N_IPMI:-200}; N_RF=${N_RF:-500}; N_FAKE=${N_FAKE:-200}; ROUNDS=${ROUNDS:-3}
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
for p in libopenipmi-dev; do
	dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "ok installed" || apt-get install -y -q $p >/dev/null
done
# RP_BIN: run another build (say, of an earlier commit) instead of building this tree.
if [ -n "${RP_BIN:-}" ]; then
	BIN=$(readlink -f "$RP_BIN")
else
	cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd >/dev/null
	BIN="$PWD/$OUT/build/rackpilotd"
fi
TMP=$(mktemp -d /tmp/rp-bench-power-XXXXXX)
SIM="$TMP/sim"; mkdir -p "$SIM"
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	BASE_PORT=26001 sh tests/ipmi/bmcsim.sh stop "$SIM" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

now_ms() { date +%s%3N; }
start_server() { # datadir -> sets ADDR, AUTH, SPID
	"$BIN" --listen 127.0.0.1:0 --data-dir "$1" --power-sync-interval 0 --no-access-log \
		>"$1.out" 2>"$1.log" &
	SPID=$!; PIDS="$PIDS $SPID"
	for _ in $(seq 100); do grep -q listening "$1.out" 2>/dev/null && break; sleep 0.1; done
	ADDR=$(sed -n 's/^listening on //p' "$1.out")
	AUTH="Authorization: Bearer $(cat "$1/admin.token")"
}
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# A sweep: "sweep_ms api_ms ok failed". sweep_ms is the server's own wall time for the
# sweep (first BMC contacted to readings committed); api_ms adds the POST and the polling.
sweep() {
	t0=$(now_ms)
	api -X POST "http://$ADDR/v1/power/sync" >/dev/null
	while api "http://$ADDR/v1/power/sync" | grep -q '"running":true'; do sleep 0.005; done
	t1=$(now_ms)
	api "http://$ADDR/v1/power/sync" |
		sed 's/.*"duration_ms":\([0-9]*\).*"ok":\([0-9]*\),"failed":\([0-9]*\).*/\1 \2 \3/' |
		awk -v w=$((t1 - t0)) '{print $1, w, $2, $3}'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# ---- 1. IPMI: rackpilotd vs ipmipower -------------------------------------------------------
CHASSIS_PLUGIN=1 BASE_PORT=26001 sh tests/ipmi/bmcsim.sh start "$SIM" "$N_IPMI" shared >/dev/null
start_server "$TMP/ipmi"
awk -v n="$N_IPMI" 'BEGIN {
	printf "{\"nodes\":[";
	for (i = 1; i <= n; i++)
		printf "%s{\"name\":\"ipmi%03d\",\"bmc\":{\"driver\":\"ipmi\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"password\",\"options\":{\"workarounds\":[\"opensesspriv\"],\"session_timeout_ms\":5000,\"retransmission_timeout_ms\":1000}}}", (i > 1 ? "," : ""), i, 26000 + i;
	printf "]}" }' >"$TMP/ipmi.json"
api --data-binary @"$TMP/ipmi.json" "http://$ADDR/v1/import" >/dev/null
HOSTS=$(cut -f2 "$SIM/bmcs.tsv" | paste -sd,)
sweep >/dev/null   # warm-up pass (the recipe's advice after starting many simulators)
: >"$TMP/rp.ms"; : >"$TMP/rpapi.ms"; : >"$TMP/ip.ms"
for _ in $(seq "$ROUNDS"); do
	set -- $(sweep); echo "$1" >>"$TMP/rp.ms"; echo "$2" >>"$TMP/rpapi.ms"; RP_OK=$3
	t0=$(now_ms)
	IP_OK=$(ipmipower -h "$HOSTS" -u admin -p password -D LAN_2_0 -W opensesspriv \
		--session-timeout=5000 --retransmission-timeout=1000 --fanout=64 --stat 2>&1 | grep -c ': o[nf]')
	echo $(( $(now_ms) - t0 )) >>"$TMP/ip.ms"
done
RP_MS=$(median <"$TMP/rp.ms"); RP_API=$(median <"$TMP/rpapi.ms"); IP_MS=$(median <"$TMP/ip.ms")
kill "$SPID"; wait "$SPID" 2>/dev/null || true
BASE_PORT=26001 sh tests/ipmi/bmcsim.sh stop "$SIM" >/dev/null

# ---- 2. Redfish mock fleet ------------------------------------------------------------------
python3 tests/redfish/mock_bmc.py --port-base 27000 --count "$N_RF" --ready-file "$TMP/rf.ready" >/dev/null &
PIDS="$PIDS $!"
for _ in $(seq 200); do [ -f "$TMP/rf.ready" ] && break; sleep 0.1; done
start_server "$TMP/rf"
awk -v n="$N_RF" 'BEGIN {
	printf "{\"nodes\":[";
	for (i = 0; i < n; i++)
		printf "%s{\"name\":\"rf%03d\",\"bmc\":{\"driver\":\"redfish\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"secret\",\"options\":{\"scheme\":\"http\"}}}", (i > 0 ? "," : ""), i, 27000 + i;
	printf "]}" }' >"$TMP/rf.json"
api --data-binary @"$TMP/rf.json" "http://$ADDR/v1/import" >/dev/null
c0=$(cpu_ticks "$SPID"); set -- $(sweep); RF_COLD="$1 ms (ok $3, failed $4)"; c1=$(cpu_ticks "$SPID")
set -- $(sweep); RF_WARM="$1 ms (ok $3, failed $4)"; c2=$(cpu_ticks "$SPID")
HZ=$(getconf CLK_TCK)
RF_CPU_COLD=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / hz}')
RF_CPU_WARM=$(awk -v a="$c1" -v b="$c2" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / hz}')
RF_RSS=$(awk '/VmHWM/ {print $2}' "/proc/$SPID/status")
kill "$SPID"; wait "$SPID" 2>/dev/null || true

# ---- 3. Fake nodes: power on through the API ------------------------------------------------
start_server "$TMP/fake"
awk -v n="$N_FAKE" 'BEGIN {
	printf "{\"nodes\":[";
	for (i = 0; i < n; i++) printf "%s{\"name\":\"f%03d\",\"tags\":[\"bench\"],\"bmc\":{\"driver\":\"fake\"}}", (i > 0 ? "," : ""), i;
	printf "]}" }' >"$TMP/fake.json"
api --data-binary @"$TMP/fake.json" "http://$ADDR/v1/import" >/dev/null
wait_idle() { while api "http://$ADDR/v1/jobs?state=queued&limit=1" | grep -q '"id"' ||
	api "http://$ADDR/v1/jobs?state=running&limit=1" | grep -q '"id"'; do sleep 0.01; done; }
t0=$(now_ms)
api -d '{"selector":{"tag":"bench"},"target":"on"}' "http://$ADDR/v1/actions/power" >/dev/null
wait_idle
FAKE_BULK=$(( $(now_ms) - t0 ))
# One transfer per node; "next" keeps curl from merging the bodies of different transfers.
for i in $(seq 0 $((N_FAKE - 1))); do
	[ "$i" -gt 0 ] && echo next
	printf 'url = "http://%s/v1/nodes/f%03d/power"\nrequest = "PUT"\n' "$ADDR" "$i"
	printf 'header = "%s"\nheader = "Content-Type: application/json"\n' "$AUTH"
	printf 'data = "{\\"target\\":\\"off\\"}"\noutput = "/dev/null"\nfail\nsilent\n'
done >"$TMP/curl.cfg"
t0=$(now_ms)
curl --parallel --parallel-max 16 --no-progress-meter -K "$TMP/curl.cfg"
wait_idle
FAKE_EACH=$(( $(now_ms) - t0 ))
FAKE_OK=$(api "http://$ADDR/v1/nodes?power=off&limit=1000" | grep -o '"power_state":"off"' | wc -l)
kill "$SPID"; wait "$SPID" 2>/dev/null || true

{
	echo "rackpilot power benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs"
	echo "1. power-status sweep of $N_IPMI ipmi_sim BMCs (median of $ROUNDS, concurrency 64):"
	echo "   rackpilotd sweep ${RP_MS} ms ($RP_OK answered)   ipmipower ${IP_MS} ms ($IP_OK answered)   ratio $(awk -v a="$RP_MS" -v b="$IP_MS" 'BEGIN {printf "%.2f", a / b}')x"
	echo "   (sweep = the server's own wall time, first BMC contacted to readings committed;"
	echo "    through the API incl. POST and polling: ${RP_API} ms; ipmipower = whole process)"
	echo "   (all runs: rackpilotd $(paste -sd, "$TMP/rp.ms") ms; ipmipower $(paste -sd, "$TMP/ip.ms") ms)"
	echo "2. sweep of $N_RF Redfish mock BMCs: cold $RF_COLD, server CPU ${RF_CPU_COLD} s;"
	echo "   warm $RF_WARM, server CPU ${RF_CPU_WARM} s; server peak RSS ${RF_RSS} kB"
	echo "3. power on $N_FAKE fake nodes: one bulk request ${FAKE_BULK} ms to all done;"
	echo "   $N_FAKE requests (16 in parallel) ${FAKE_EACH} ms to all done ($FAKE_OK nodes off)"
} | tee "$OUT/power.txt"
