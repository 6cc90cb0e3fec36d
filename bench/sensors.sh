#!/bin/sh
# Sensor benchmark (sensors issue): "A sensor sweep of 500 Redfish mocks and 200 ipmi_sim BMCs:
# wall time against freeipmi's ipmi-sensors + ipmi-dcmi over the same IPMI BMCs (ratio, target
# <= 1.2x) and against a plain sequential Redfish read; server CPU per sweep; database growth per
# day at 10,000 nodes at the default interval."
#  1. sensor sweep of N_IPMI ipmi_sim BMCs (DCMI=1, CHASSIS_PLUGIN=1, shared): rackpilotd's sweep,
#     cold (first: SDR walk) and warm (median of ROUNDS; the driver's SDR cache), against
#     `ipmi-sensors --output-sensor-thresholds` + `ipmi-dcmi --get-system-power-statistics` over
#     the same hosts at the same concurrency (64), with an SDR cache directory of their own (first
#     run cold, later runs warm); server CPU per sweep
#  2. sensor sweep of N_RF Redfish mock BMCs (one mock process): cold (logins, path discovery) and
#     warm, requests per read at the mock, server CPU; against a plain sequential read
#     (bench/sensors_rf.py: one BMC after the other, Sensors collection and each member) and the
#     same with $expand=.($levels=1)
#  3. database growth: bytes per sensor_history row written by the server (the IPMI fleet, every
#     value moved past its dead band before each of MOVES sweeps), and in copies of the two
#     databases at a larger scale with the server's insert pattern (a retention cycle included),
#     bytes per sensors / sensor_reads / rack_power_history row; projected to 10,000 nodes at the
#     default 60 s interval, retention 24 h capped at 15,000,000 rows (pruned hourly; every 5 min past it)
# Usage: bench/sensors.sh   (env N_IPMI=200 N_RF=500 ROUNDS=5 SEQ_ROUNDS=1 MOVES=10 RP_BIN=).
# Results: bench/out/sensors.txt
set -eu
cd "$(dirname "$0")/.."
CMDLINE="$0${*:+ $*}"
for v in N_IPMI N_RF ROUNDS SEQ_ROUNDS MOVES RP_BIN; do
	eval "x=\${$v:-}"
	[ -z "$x" ] || CMDLINE="$v=$x $CMDLINE"
done
N_IPMI=${N_IPMI:-200}; N_RF=${N_RF:-500}; ROUNDS=${ROUNDS:-5}; SEQ_ROUNDS=${SEQ_ROUNDS:-1}
MOVES=${MOVES:-10}
NODES=10000; RACKS=250           # the projection's fleet
IPMI_PORT=26001; RF_PORT=27000   # as power.sh (the two never run at once: same ports)
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
for p in libopenipmi-dev; do
	dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "ok installed" || apt-get install -y -q $p >/dev/null
done
if [ -n "${RP_BIN:-}" ]; then
	BIN=$(readlink -f "$RP_BIN")
else
	cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd >/dev/null
	BIN="$PWD/$OUT/build/rackpilotd"
fi
TMP=$(mktemp -d /tmp/rp-bench-sensors-XXXXXX)
SIM="$TMP/sim"; mkdir -p "$SIM"
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	BASE_PORT=$IPMI_PORT sh tests/ipmi/bmcsim.sh stop "$SIM" >/dev/null 2>&1 || true
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
	[ -n "$ADDR" ] || { echo "sensors.sh: rackpilotd did not start:" >&2; cat "$1.log" >&2; exit 1; }
	AUTH="Authorization: Bearer $(cat "$1/admin.token")"
}
stop_server() { kill "$SPID"; wait "$SPID" 2>/dev/null || true; }
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks_ms() { awk -v t="$1" -v hz="$HZ" 'BEGIN {printf "%.0f", t * 1000 / hz}'; }
# A sweep (power or sensors): "sweep_ms api_ms ok failed cpu_ticks". sweep_ms is the server's own
# wall time (first BMC contacted to readings committed); api_ms adds the POST and the polling;
# cpu_ticks the server's utime+stime over it (polling included).
sweep() {
	c0=$(cpu_ticks "$SPID"); t0=$(now_ms)
	api -X POST "http://$ADDR/v1/$1/sync" >/dev/null
	while api "http://$ADDR/v1/$1/sync" | grep -q '"running":true'; do sleep 0.005; done
	t1=$(now_ms); c1=$(cpu_ticks "$SPID")
	api "http://$ADDR/v1/$1/sync" |
		sed 's/.*"duration_ms":\([0-9]*\).*"ok":\([0-9]*\),"failed":\([0-9]*\).*/\1 \2 \3/' |
		awk -v w=$((t1 - t0)) -v c=$((c1 - c0)) '{print $1, w, $2, $3, c}'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
list() { paste -sd, "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
db_checkpoint() { # db -> its size in bytes once the WAL is folded in (the server may be running)
	for _ in 1 2 3 4 5; do
		sqlite3 -cmd '.timeout 10000' "$1" 'PRAGMA wal_checkpoint(TRUNCATE)' | grep -q '^0|' && break
		sleep 0.2
	done
	stat -c %s "$1"
}
db_rows() { sqlite3 -cmd '.timeout 10000' "$1" "SELECT count(*) FROM $2"; }
# dbstat of a table: "bytes_in_pages payload_bytes rows"
db_stat() {
	sqlite3 -cmd '.timeout 10000' "$1" "SELECT coalesce(sum(pgsize),0), coalesce(sum(payload),0),
		(SELECT count(*) FROM $2) FROM dbstat WHERE name = '$2'"  | tr '|' ' '
}

# ---- 1. IPMI: rackpilotd's sensor sweep vs ipmi-sensors + ipmi-dcmi ------------------------------
DCMI=1 CHASSIS_PLUGIN=1 BMC_INITIAL_POWER=1 BASE_PORT=$IPMI_PORT \
	sh tests/ipmi/bmcsim.sh start "$SIM" "$N_IPMI" shared >/dev/null
start_server "$TMP/ipmi"
awk -v n="$N_IPMI" -v base="$IPMI_PORT" 'BEGIN {
	printf "{\"nodes\":[";
	for (i = 1; i <= n; i++)
		printf "%s{\"name\":\"ipmi%03d\",\"bmc\":{\"driver\":\"ipmi\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"password\",\"options\":{\"workarounds\":[\"opensesspriv\"],\"session_timeout_ms\":5000,\"retransmission_timeout_ms\":1000}}}", (i > 1 ? "," : ""), i, base + i - 1;
	printf "]}" }' >"$TMP/ipmi.json"
api --data-binary @"$TMP/ipmi.json" "http://$ADDR/v1/import" >/dev/null
HOSTS=$(cut -f2 "$SIM/bmcs.tsv" | paste -sd,)
mkdir -p "$TMP/sdr"
FI="-u admin -p password -D LAN_2_0 -W opensesspriv --session-timeout=5000 --retransmission-timeout=1000 --fanout=64"
# freeipmi's read of every BMC: "sensors_ms dcmi_ms hosts_with_sensors sensor_lines hosts_with_power errors"
freeipmi() {
	t0=$(now_ms)
	# shellcheck disable=SC2086
	ipmi-sensors -h "$HOSTS" $FI --output-sensor-thresholds --sdr-cache-directory="$TMP/sdr" \
		>"$TMP/fi.sensors" 2>"$TMP/fi.err" || true
	t1=$(now_ms)
	# shellcheck disable=SC2086
	ipmi-dcmi -h "$HOSTS" $FI --get-system-power-statistics >"$TMP/fi.dcmi" 2>>"$TMP/fi.err" || true
	t2=$(now_ms)
	hs=$(grep ' | ' "$TMP/fi.sensors" | grep -v ' | Name ' | cut -d' ' -f1 | sort -u | wc -l)
	ls=$(grep ' | ' "$TMP/fi.sensors" | grep -vc ' | Name ' || true)
	hp=$(grep -c 'Current Power .*: [0-9]* Watts' "$TMP/fi.dcmi" || true)
	er=$(grep -c . "$TMP/fi.err" || true)
	echo $((t1 - t0)) $((t2 - t1)) "$hs" "$ls" "$hp" "$er"
}
# Warm the simulators up (sessions, ipmi_sim's first contact of each BMC) without touching the SDR.
sweep power >/dev/null
set -- $(sweep sensors); IP_RP_COLD=$1; IP_RP_COLD_API=$2; IP_RP_COLD_OK="$3 ok, $4 failed"
IP_RP_COLD_CPU=$(ticks_ms "$5")
IP_SENSORS_PER_NODE=$(awk -v a="$(db_rows "$TMP/ipmi/rackpilot.db" sensors)" -v n="$N_IPMI" 'BEGIN {printf "%.1f", a / n}')
set -- $(freeipmi); IP_FI_COLD=$(($1 + $2)); IP_FI_COLD_PARTS="$1 + $2"
IP_FI_COLD_OK="$3 hosts, $4 sensor lines; dcmi $5 hosts; $6 error lines"
: >"$TMP/rp.ms"; : >"$TMP/rpapi.ms"; : >"$TMP/rpcpu"; : >"$TMP/fi.ms"; : >"$TMP/fis.ms"; : >"$TMP/fid.ms"
IP_FAIL=0
for _ in $(seq "$ROUNDS"); do
	set -- $(sweep sensors); echo "$1" >>"$TMP/rp.ms"; echo "$2" >>"$TMP/rpapi.ms"; echo "$5" >>"$TMP/rpcpu"
	IP_RP_OK="$3 ok, $4 failed"; IP_FAIL=$((IP_FAIL + $4))
	set -- $(freeipmi); echo $(($1 + $2)) >>"$TMP/fi.ms"; echo "$1" >>"$TMP/fis.ms"; echo "$2" >>"$TMP/fid.ms"
	IP_FI_OK="$3 hosts, $4 sensor lines; dcmi $5 hosts; $6 error lines"
done
IP_RP=$(median <"$TMP/rp.ms"); IP_RP_API=$(median <"$TMP/rpapi.ms"); IP_FI=$(median <"$TMP/fi.ms")
IP_FIS=$(median <"$TMP/fis.ms"); IP_FID=$(median <"$TMP/fid.ms")
IP_CPU_TICKS=$(awk '{s += $1} END {print s}' "$TMP/rpcpu")
IP_CPU=$(awk -v t="$IP_CPU_TICKS" -v n="$ROUNDS" -v hz="$HZ" 'BEGIN {printf "%.0f", t * 1000 / hz / n}')
IP_CPU_MAX=$(ticks_ms "$(sort -n "$TMP/rpcpu" | tail -1)")

# ---- 3a. the server's own writes: every value moves past its dead band before each sweep ---------
DB="$TMP/ipmi/rackpilot.db"
MV_SIZE0=$(db_checkpoint "$DB"); MV_ROWS0=$(db_rows "$DB" sensor_history)
set -- $(db_stat "$DB" sensor_history); MV_PG0=$1; MV_PAY0=$2
set_values() { # 0|1: two sets of readings, each sensor's far enough apart (no threshold crossed)
	if [ "$1" = 0 ]; then set -- 24 35 45 47 55 40 38 6000 480 350; else set -- 28 40 50 52 60 45 42 4000 800 600; fi
	while IFS='	' read -r _ _ _ dir _; do
		echo "$1" >"$dir/sensors/inlet"; echo "$2" >"$dir/sensors/exhaust"
		echo "$3" >"$dir/sensors/cpu1"; echo "$4" >"$dir/sensors/cpu2"
		echo "$5" >"$dir/sensors/gpu1"; echo "$6" >"$dir/sensors/dimm1"
		echo "$7" >"$dir/sensors/nvme0"; echo "$8" >"$dir/sensors/fan1"
		echo "$9" >"$dir/sensors/psu1_in"; echo "${10}" >"$dir/power_watts"
	done <"$SIM/bmcs.tsv"
}
MV_FAIL=0; MV_EVENTS=0
for k in $(seq "$MOVES"); do
	set_values $((k % 2))
	sleep 1.3   # ipmi_sim re-reads the files every BMC_SENSOR_POLL_MS (1 s)
	set -- $(sweep sensors); MV_FAIL=$((MV_FAIL + $4))
	MV_EVENTS=$((MV_EVENTS + $(api "http://$ADDR/v1/sensors/sync" | sed 's/.*"events":\([0-9]*\).*/\1/')))
done
MV_SIZE1=$(db_checkpoint "$DB"); MV_ROWS1=$(db_rows "$DB" sensor_history)
set -- $(db_stat "$DB" sensor_history); MV_PG1=$1; MV_PAY1=$2
MV_ROWS=$((MV_ROWS1 - MV_ROWS0))
MV_PER_SWEEP=$(awk -v r="$MV_ROWS" -v m="$MOVES" -v n="$N_IPMI" 'BEGIN {printf "%.2f", r / m / n}')
MV_BPR=$(awk -v a="$MV_SIZE0" -v b="$MV_SIZE1" -v r="$MV_ROWS" 'BEGIN {printf "%.1f", (b - a) / r}')
MV_BPR_PG=$(awk -v a="$MV_PG0" -v b="$MV_PG1" -v r="$MV_ROWS" 'BEGIN {printf "%.1f", (b - a) / r}')
MV_PAY=$(awk -v a="$MV_PAY0" -v b="$MV_PAY1" -v r="$MV_ROWS" 'BEGIN {printf "%.1f", (b - a) / r}')
stop_server
BASE_PORT=$IPMI_PORT sh tests/ipmi/bmcsim.sh stop "$SIM" >/dev/null
db_checkpoint "$DB" >/dev/null

# ---- 2. Redfish mock fleet: rackpilotd's sweep vs a plain sequential read ---------------------------
python3 tests/redfish/mock_bmc.py --port-base $RF_PORT --count "$N_RF" --ready-file "$TMP/rf.ready" >/dev/null &
MPID=$!; PIDS="$PIDS $MPID"
for _ in $(seq 300); do [ -f "$TMP/rf.ready" ] && break; sleep 0.1; done
[ -f "$TMP/rf.ready" ] || { echo "sensors.sh: the Redfish mock did not start" >&2; exit 1; }
start_server "$TMP/rf"
awk -v n="$N_RF" -v base="$RF_PORT" 'BEGIN {
	printf "{\"nodes\":[";
	for (i = 0; i < n; i++)
		printf "%s{\"name\":\"rf%03d\",\"bmc\":{\"driver\":\"redfish\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"secret\",\"options\":{\"scheme\":\"http\"}}}", (i > 0 ? "," : ""), i, base + i;
	printf "]}" }' >"$TMP/rf.json"
api --data-binary @"$TMP/rf.json" "http://$ADDR/v1/import" >/dev/null
mock() { python3 bench/sensors_rf.py state $RF_PORT "$N_RF"; }  # "requests logins sessions"
per_bmc() { awk -v a="$1" -v b="$2" -v n="$N_RF" 'BEGIN {printf "%.1f", (b - a) / n}'; }
set -- $(mock); q0=$1; l0=$2
m0=$(cpu_ticks "$MPID")
set -- $(sweep sensors); RF_COLD=$1; RF_COLD_API=$2; RF_COLD_OK="$3 ok, $4 failed"; RF_COLD_CPU=$(ticks_ms "$5")
RF_COLD_MOCK=$(ticks_ms $(($(cpu_ticks "$MPID") - m0)))
set -- $(mock); q1=$1; l1=$2
m0=$(cpu_ticks "$MPID")
set -- $(sweep sensors); W1=$1; W1API=$2; W1CPU=$5; RF_OK="$3 ok, $4 failed"
RF_WARM_MOCK=$(ticks_ms $(($(cpu_ticks "$MPID") - m0)))
set -- $(mock); q2=$1; l2=$2; RF_SESSIONS=$3
RF_COLD_REQ=$(per_bmc "$q0" "$q1"); RF_COLD_LOGINS=$(per_bmc "$l0" "$l1")
RF_WARM_REQ=$(per_bmc "$q1" "$q2"); RF_WARM_LOGINS=$(per_bmc "$l1" "$l2")
echo "$W1" >"$TMP/rf.ms"; echo "$W1API" >"$TMP/rfapi.ms"; echo "$W1CPU" >"$TMP/rfcpu"
RF_FAIL=0
for _ in $(seq 2 "$ROUNDS"); do
	set -- $(sweep sensors); echo "$1" >>"$TMP/rf.ms"; echo "$2" >>"$TMP/rfapi.ms"; echo "$5" >>"$TMP/rfcpu"
	RF_OK="$3 ok, $4 failed"; RF_FAIL=$((RF_FAIL + $4))
done
RF_WARM=$(median <"$TMP/rf.ms"); RF_WARM_API=$(median <"$TMP/rfapi.ms")
RF_CPU=$(awk -v n="$ROUNDS" -v hz="$HZ" '{s += $1} END {printf "%.0f", s * 1000 / hz / n}' "$TMP/rfcpu")
RF_CPU_MAX=$(ticks_ms "$(sort -n "$TMP/rfcpu" | tail -1)")
RF_RSS=$(awk '/VmHWM/ {print $2}' "/proc/$SPID/status")
RF_SENSORS_PER_NODE=$(awk -v a="$(db_rows "$TMP/rf/rackpilot.db" sensors)" -v n="$N_RF" 'BEGIN {printf "%.1f", a / n}')
# The plain sequential read, and with $expand: "ms ok failed sensors requests" per run.
seqread() { # [--expand] -> "wall_ms ok failed sensors client_requests mock_requests mock_cpu_ms"
	flag=${1:-}
	set -- $(mock); a=$1; c0=$(cpu_ticks "$MPID"); t0=$(now_ms)
	r=$(python3 bench/sensors_rf.py read $RF_PORT "$N_RF" $flag 2>>"$TMP/seq.err")
	t1=$(now_ms); c1=$(cpu_ticks "$MPID")
	set -- $(mock); echo "$((t1 - t0)) $r $(($1 - a)) $(ticks_ms $((c1 - c0)))"
}
: >"$TMP/seq.plain"; : >"$TMP/seq.exp"
for _ in $(seq "$SEQ_ROUNDS"); do seqread >>"$TMP/seq.plain"; done
for _ in $(seq "$ROUNDS"); do seqread --expand >>"$TMP/seq.exp"; done
SEQ=$(cut -d' ' -f1 "$TMP/seq.plain" | median); SEQX=$(cut -d' ' -f1 "$TMP/seq.exp" | median)
set -- $(tail -1 "$TMP/seq.plain"); SEQ_OK="$2 ok, $3 failed, $4 readings"; SEQ_REQ=$(per_bmc 0 "$6"); SEQ_MOCK=$7
set -- $(tail -1 "$TMP/seq.exp"); SEQX_OK="$2 ok, $3 failed, $4 readings"; SEQX_REQ=$(per_bmc 0 "$6"); SEQX_MOCK=$7
SEQ_ERR=$(grep -c . "$TMP/seq.err" || true)
stop_server
kill "$MPID"; wait "$MPID" 2>/dev/null || true
db_checkpoint "$TMP/rf/rackpilot.db" >/dev/null

# ---- 3b. row sizes at scale, in copies of the two databases -------------------------------------------
# K sweeps' samples of every sensor of every node, as the server writes them (one transaction per
# sweep, node by node, `at` a sweep later each time, values with a fraction: 8-byte reals, the
# conservative case), then a retention cycle: the older half deleted, as many sweeps added again.
# Prints "rows_per_sweep bytes_per_row_growth bytes_per_row_after_cycle payload_per_row fill_pct freelist_pages"
synth() { # db sweeps
	db=$1; k=$2
	sqlite3 "$db" 'PRAGMA journal_mode=WAL' >/dev/null
	s0=$(db_checkpoint "$db")
	per=$(sqlite3 "$db" 'SELECT count(*) FROM sensors WHERE value IS NOT NULL')
	t0=$(sqlite3 "$db" 'SELECT coalesce(max(at), 0) FROM sensor_history')
	gen() { # from to
		for i in $(seq "$1" "$2"); do
			echo "BEGIN; INSERT INTO sensor_history(node_id, at, name, value) SELECT node_id, $t0 + $i * 60000, name, value + 0.37 + ($i % 2) * 5 FROM sensors WHERE value IS NOT NULL ORDER BY node_id, name; COMMIT;"
		done
	}
	{ echo "PRAGMA synchronous=OFF;"; gen 1 "$k"; } | sqlite3 "$db"
	s1=$(db_checkpoint "$db")
	half=$((k / 2))
	{ echo "PRAGMA synchronous=OFF; DELETE FROM sensor_history WHERE at <= $t0 + $half * 60000;"
	  gen $((k + 1)) $((k + half)); } | sqlite3 "$db"
	db_checkpoint "$db" >/dev/null
	set -- $(db_stat "$db" sensor_history)
	fl=$(sqlite3 "$db" 'PRAGMA freelist_count')
	# after the cycle: the table's pages and the free ones (the next deletes' room) per row held
	awk -v per="$per" -v s0="$s0" -v s1="$s1" -v k="$k" -v pg="$1" -v pay="$2" -v rows="$3" \
		-v fl="$fl" 'BEGIN {
		printf "%d %.1f %.1f %.1f %.0f %d %d\n", per, (s1 - s0) / (per * k), (pg + fl * 4096) / rows,
			pay / rows, 100 * pay / pg, fl, rows }'
}
cp "$TMP/ipmi/rackpilot.db" "$TMP/synth-ipmi.db"; cp "$TMP/rf/rackpilot.db" "$TMP/synth-rf.db"
cap_k() { [ "$1" -lt 2 ] && echo 2 || { [ "$1" -gt 400 ] && echo 400 || echo "$1"; }; }
K_IPMI=$(cap_k $(( 600000 / (N_IPMI * 10) ))); K_RF=$(cap_k $(( 1500000 / (N_RF * 30) )))   # ~0.6 M, ~1.5 M rows
set -- $(synth "$TMP/synth-ipmi.db" "$K_IPMI"); SY_IP_PER=$1; SY_IP_G=$2; SY_IP_C=$3; SY_IP_PAY=$4; SY_IP_FILL=$5; SY_IP_FL=$6; SY_IP_ROWS=$7
set -- $(synth "$TMP/synth-rf.db" "$K_RF"); SY_RF_PER=$1; SY_RF_G=$2; SY_RF_C=$3; SY_RF_PAY=$4; SY_RF_FILL=$5; SY_RF_FL=$6; SY_RF_ROWS=$7
# Sensors with a value a node (a sample each when sampled): the projection's S.
S_RF=$(awk -v a="$SY_RF_PER" -v n="$N_RF" 'BEGIN {printf "%g", a / n}')
S_IP=$(awk -v a="$SY_IP_PER" -v n="$N_IPMI" 'BEGIN {printf "%g", a / n}')
# Rack history: RACKS racks, a row per 5-minute step (peak, latest), DAYS days, step by step.
RK_DAYS=10
db="$TMP/synth-rf.db"; s0=$(db_checkpoint "$db")
{ echo "PRAGMA synchronous=OFF;"; for st in $(seq 1 $((288 * RK_DAYS))); do
	echo "BEGIN; WITH RECURSIVE r(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM r WHERE id < $RACKS)
	INSERT INTO rack_power_history(rack_id, at, peak_w, last_w) SELECT id, 1790000000000 + $st * 300000,
	31000.5 + id + $st % 7, 30000.25 + id FROM r; COMMIT;"
done; } | sqlite3 "$db"
s1=$(db_checkpoint "$db")
RK_BPR=$(awk -v a="$s0" -v b="$s1" -v r=$((RACKS * 288 * RK_DAYS)) 'BEGIN {printf "%.1f", (b - a) / r}')
# The fixed part: latest values (sensors) and latest read (sensor_reads), per row, from the server's
# own databases.
set -- $(db_stat "$TMP/rf/rackpilot.db" sensors); SN_RF_BPR=$(awk -v p="$1" -v r="$3" 'BEGIN {printf "%.1f", p / r}')
set -- $(db_stat "$TMP/ipmi/rackpilot.db" sensors); SN_IP_BPR=$(awk -v p="$1" -v r="$3" 'BEGIN {printf "%.1f", p / r}')
set -- $(db_stat "$TMP/rf/rackpilot.db" sensor_reads); RD_BPR=$(awk -v p="$1" -v r="$3" 'BEGIN {printf "%.1f", p / r}')

# ---- 3c. projection: NODES nodes, 60 s interval, default retention ----------------------------------
# kept: 24 h of samples, pruned hourly (so up to 25 h between two prunes); past 15 M rows the prune
# keeps 15 M less an hour's samples (at least 1.5 M) and comes again every 5 minutes.
project() { # label S bytes_per_sample bytes_per_sensor_row per_day sensor_rows_per_node
	awk -v lbl="$1" -v s="$2" -v b="$3" -v bs="$4" -v pd="$5" -v sr="$6" -v n="$NODES" -v racks="$RACKS" \
		-v rk="$RK_BPR" -v rd="$RD_BPR" 'BEGIN {
		MB = 1e6; cap = 15000000;
		day = n * s * pd; hour = day / 24;
		peak = day * 25 / 24; how = "24 h + 1 h until the hourly prune";
		if (peak > cap) {
			kept = cap - hour; if (kept < 0.1 * cap) kept = 0.1 * cap;
			peak = kept + hour / 12; how = "cap: 15 M less an hour, pruned every 5 min"
		}
		fixed = n * sr * bs + n * rd;
		rack = racks * 288 * 30 * rk;
		total = peak * b + fixed + rack;
		printf "   %-36s %6.1f M rows/day  %7.0f MB/day | kept %5.1f M rows (%s) = %5.0f MB; + latest %3.0f MB + racks %2.0f MB = %5.0f MB %s 1 GiB\n",
			lbl, day / 1e6, day * b / MB, peak / 1e6, how, peak * b / MB, fixed / MB, rack / MB, total / MB,
			(total < 1073741824 ? "<" : ">") }'
}
# The share of sensors that may move past their dead band every sweep (the rest: heartbeat only)
# while the peak stays under 1 GiB.
breakeven() { # label S bytes_per_sample bytes_per_sensor_row sensor_rows_per_node
	awk -v lbl="$1" -v s="$2" -v b="$3" -v bs="$4" -v sr="$5" -v n="$NODES" -v racks="$RACKS" \
		-v rk="$RK_BPR" -v rd="$RD_BPR" 'BEGIN {
		cap = 15000000; room = 1073741824 - n * sr * bs - n * rd - racks * 288 * 30 * rk;
		# samples an hour at most: capped regime (peak 0.1 cap + 5 min of samples, or the cap
		# itself), else 25 h of them
		hmax = room / b >= cap ? 12 * (room / b - 0.1 * cap) : 0;
		if (hmax * 25 < cap) hmax = room / b / 25;
		f = (hmax / (n * s) - 1) / 59;
		printf "   %-36s under 1 GiB while at most %.0f M samples/hour: %.0f %% of the sensors moving every sweep\n",
			lbl, hmax / 1e6, (f > 1 ? 100 : f < 0 ? 0 : 100 * f) }'
}

{
	echo "rackpilot sensor benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $(uname -r)"
	echo "command: $CMDLINE   (rackpilotd: $BIN)"
	echo
	echo "1. sensor sweep of $N_IPMI ipmi_sim BMCs (DCMI + chassis plug-ins, shared mode; concurrency 64;"
	echo "   $IP_SENSORS_PER_NODE sensors a node, DCMI power included):"
	echo "                         rackpilotd sweep   freeipmi (ipmi-sensors + ipmi-dcmi)   ratio"
	printf "   cold (SDR read)      %6s ms          %6s ms (%s ms)                   %sx\n" \
		"$IP_RP_COLD" "$IP_FI_COLD" "$IP_FI_COLD_PARTS" "$(ratio "$IP_RP_COLD" "$IP_FI_COLD")"
	printf "   warm (median of %s)   %6s ms          %6s ms (medians %s + %s ms)           %sx   (target <= 1.2x)\n" \
		"$ROUNDS" "$IP_RP" "$IP_FI" "$IP_FIS" "$IP_FID" "$(ratio "$IP_RP" "$IP_FI")"
	echo "   through the API (POST + polling): cold $IP_RP_COLD_API ms, warm $IP_RP_API ms (ratio warm $(ratio "$IP_RP_API" "$IP_FI")x)"
	echo "   read: rackpilotd cold $IP_RP_COLD_OK, warm $IP_RP_OK ($IP_FAIL failed over all warm rounds);"
	echo "         freeipmi cold $IP_FI_COLD_OK; warm $IP_FI_OK"
	echo "   all warm runs: rackpilotd $(list "$TMP/rp.ms") ms; freeipmi $(list "$TMP/fi.ms") ms"
	echo "   server CPU: cold $IP_RP_COLD_CPU ms; warm $IP_CPU ms per sweep (mean of $ROUNDS, max $IP_CPU_MAX; ${HZ} Hz ticks)"
	echo
	echo "2. sensor sweep of $N_RF Redfish mock BMCs (one mock process; concurrency 64; $RF_SENSORS_PER_NODE sensors a node):"
	echo "   rackpilotd cold  $RF_COLD ms (API $RF_COLD_API ms; $RF_COLD_OK): $RF_COLD_REQ requests and $RF_COLD_LOGINS logins per BMC;"
	echo "                    server CPU $RF_COLD_CPU ms, mock CPU $RF_COLD_MOCK ms"
	echo "   rackpilotd warm  $RF_WARM ms (median of $ROUNDS; API $RF_WARM_API ms; last $RF_OK, $RF_FAIL failed in rounds 2..$ROUNDS):"
	echo "                    $RF_WARM_REQ requests and $RF_WARM_LOGINS logins per BMC; server CPU $RF_CPU ms per sweep (mean, max $RF_CPU_MAX);"
	echo "                    mock CPU $RF_WARM_MOCK ms (first warm sweep); sessions open at the mock $RF_SESSIONS; server peak RSS $RF_RSS kB"
	echo "   plain sequential read (bench/sensors_rf.py, 1 BMC at a time, members one by one): $SEQ ms"
	echo "                    ($SEQ_OK; $SEQ_REQ requests per BMC; mock CPU $SEQ_MOCK ms; runs: $(cut -d' ' -f1 "$TMP/seq.plain" | paste -sd,) ms)"
	echo "   sequential with \$expand=.(\$levels=1): $SEQX ms (median of $ROUNDS; $SEQX_OK; $SEQX_REQ requests per BMC; mock CPU $SEQX_MOCK ms)"
	echo "   rackpilotd warm vs plain sequential $(ratio "$RF_WARM" "$SEQ")x ($(ratio "$SEQ" "$RF_WARM")x faster); vs expanded sequential $(ratio "$RF_WARM" "$SEQX")x;"
	echo "   cold vs plain sequential $(ratio "$RF_COLD" "$SEQ")x   (sequential client errors: $SEQ_ERR)"
	echo "   all warm runs: rackpilotd $(list "$TMP/rf.ms") ms; expanded sequential $(cut -d' ' -f1 "$TMP/seq.exp" | paste -sd,) ms"
	echo
	echo "3. database (SQLite, 4 KiB pages; file size after wal_checkpoint(TRUNCATE)):"
	echo "   server-written: $MOVES sweeps of the $N_IPMI IPMI nodes, every value moved past its dead band:"
	echo "     $MV_ROWS sensor_history rows ($MV_PER_SWEEP per node per sweep; $MV_FAIL reads failed, $MV_EVENTS events),"
	echo "     file +$((MV_SIZE1 - MV_SIZE0)) B = $MV_BPR B/row (its pages: $MV_BPR_PG B/row, payload $MV_PAY B/row; integral values)"
	echo "   at scale, the server's insert pattern, fractional values (8-byte reals):"
	echo "     IPMI names ($SY_IP_PER samples a sweep, $K_IPMI sweeps): $SY_IP_G B/row grown; after a retention cycle $SY_IP_C B/row"
	echo "       (table pages + free pages / rows held; payload $SY_IP_PAY B/row = $SY_IP_FILL % of the pages; $SY_IP_FL free pages; $SY_IP_ROWS rows)"
	echo "     Redfish names ($SY_RF_PER samples a sweep, $K_RF sweeps): $SY_RF_G B/row grown; after a retention cycle $SY_RF_C B/row"
	echo "       (table pages + free pages / rows held; payload $SY_RF_PAY B/row = $SY_RF_FILL % of the pages; $SY_RF_FL free pages; $SY_RF_ROWS rows)"
	echo "     rack_power_history ($RACKS racks x 288 steps x $RK_DAYS days): $RK_BPR B/row"
	echo "     latest values: sensors $SN_RF_BPR B/row (Redfish), $SN_IP_BPR B/row (IPMI); sensor_reads $RD_BPR B/row"
	echo "   projection, $NODES nodes, sensor_sync_interval 60 s, sensor_history_hours 24, max_rows 15 M (prune hourly, every 5 min past it),"
	echo "   $RACKS racks x 288 steps/day kept 30 days (rack_history_days); bytes/row: after a retention cycle"
	echo "   (15 M rows = $(awk -v b="$SY_RF_C" 'BEGIN {printf "%.0f", 15e6 * b / 1e6}') MB at the Redfish size, $(awk -v b="$SY_IP_C" 'BEGIN {printf "%.0f", 15e6 * b / 1e6}') MB at the IPMI size):"
	project "GPU server (Redfish, $S_RF/node) steady" "$S_RF" "$SY_RF_C" "$SN_RF_BPR" 24 "$RF_SENSORS_PER_NODE"
	project "GPU server (Redfish) busy" "$S_RF" "$SY_RF_C" "$SN_RF_BPR" 1440 "$RF_SENSORS_PER_NODE"
	project "ipmi_sim node ($S_IP/node) steady" "$S_IP" "$SY_IP_C" "$SN_IP_BPR" 24 "$IP_SENSORS_PER_NODE"
	project "ipmi_sim node busy" "$S_IP" "$SY_IP_C" "$SN_IP_BPR" 1440 "$IP_SENSORS_PER_NODE"
	breakeven "GPU server (Redfish)" "$S_RF" "$SY_RF_C" "$SN_RF_BPR" "$RF_SENSORS_PER_NODE"
	breakeven "ipmi_sim node" "$S_IP" "$SY_IP_C" "$SN_IP_BPR" "$IP_SENSORS_PER_NODE"
	echo "   (steady: only the hourly heartbeat, 24 samples/sensor/day; busy: every sensor past its dead band"
	echo "    every sweep, 1,440/day; racks: $(awk -v b="$RK_BPR" -v r="$RACKS" 'BEGIN {printf "%.1f", r * 288 * b / 1e6}') MB/day)"
} | tee "$OUT/sensors.txt"
