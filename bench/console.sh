#!/bin/sh
# Console benchmark (BMC issue): "Benchmark (bench/, not a test): 50 simultaneous SOL sessions
# logging (ipmi_sim fleet): server CPU and RSS, bytes/s sustained per session, latency from the
# serial side to an SSE reader (p50/p99)."
#  N+1 ipmi_sim BMCs with SOL=1 (tests/ipmi/bmcsim.sh, shared mode, SHARED_PER_PROC BMCs per
#  ipmi_sim; a pty per BMC is its serial port), a Release rackpilotd with console_log = always, N
#  nodes (ipmi): every node's console is open and logged once each log says "[rackpilot] SOL
#  connected". The fixture runs from a copy whose mc_plugin.c counts SOL packets as session
#  activity (SIM_PATCH=1, the default): ipmi_sim ends a session 30 s after the last IPMI message it
#  got, SOL packets are none, and libipmiconsole sends its keepalive only after 20 s without any
#  packet, so on the fixture as it is a console that prints something more than 10 s after the
#  last keepalive is dropped at keepalive + 30 s, silently, and libipmiconsole notices 60 s later
#  (measured: solprobe, a line every 50 ms: nothing after 29.7 s, EOF "session timeout" at 89.7 s;
#  with the patch, 48 s of it arrive whole). A real BMC counts SOL traffic as activity.
#  Then
#  0. idle: server CPU over IDLE_S s and RSS with the N sessions open and idle
#  a. throughput (bench/console_rx.py burst): printable 100-byte lines written into serial ptys as
#     fast as they take them, until the node's log (DATA_DIR/console/UUID.log, read directly)
#     holds the last line, every line checked: BYTES into each of the N sessions at once, with the
#     peer (tests/ipmi/solprobe.c: libipmiconsole as rackpilotd uses it) reading BMC N+1, which is
#     no node, at the same time; server CPU over it, ipmi_sim's, the machine's; RSS after. Bytes/s
#     per session: its bytes over the time from the first write to its last line's log timestamp.
#     Last of all (after b), one session alone and the peer alone, ALONE_BYTES each, ALONE_ROUNDS
#     times taking turns (medians): at MB/s, a reader that falls behind has libipmiconsole end its
#     session ("internal error"), and on ipmi_sim a SOL session lost with output pending leaves
#     that BMC's console mute for good (its serial port is no longer read), so nothing else may
#     come after it. A burst without progress for 20 s is given up and counted.
#  b. latency (bench/console_rx.py latency): an SSE reader (GET /v1/nodes/{n}/console/stream) on
#     each of LAT_NODES nodes; "MARK <ns>" lines written into their serial ptys at RATE lines/s
#     each while the other N - LAT_NODES sessions carry BG_BPS bytes/s each; write -> SSE arrival,
#     p50/p99/max, split at the log line's own timestamp (write -> logged, logged -> SSE), for
#     LAT_S seconds.
#  Every log is checked for "SOL closed" (a session that dropped) at the end.
# Usage: bench/console.sh   (env N=50 BYTES=262144 ALONE_BYTES=4*BYTES ALONE_ROUNDS=3 LAT_NODES=10
#        LAT_S=30 RATE=20 BG_BPS=2000 IDLE_S=30 SHARED_PER_PROC=51 SIM_PATCH=1 RP_BIN=).
# Results: bench/out/console.txt
set -eu
cd "$(dirname "$0")/.."
CMDLINE="$0${*:+ $*}"
for v in N BYTES ALONE_BYTES ALONE_ROUNDS LAT_NODES LAT_S RATE BG_BPS IDLE_S SHARED_PER_PROC SIM_PATCH RP_BIN; do
	eval "x=\${$v:-}"
	[ -z "$x" ] || CMDLINE="$v=$x $CMDLINE"
done
N=${N:-50}; BYTES=${BYTES:-262144}; LAT_NODES=${LAT_NODES:-10}; LAT_S=${LAT_S:-30}
RATE=${RATE:-20}; BG_BPS=${BG_BPS:-2000}; IDLE_S=${IDLE_S:-30}; SIM_PATCH=${SIM_PATCH:-1}
ALONE_BYTES=${ALONE_BYTES:-$((4 * BYTES))}; ALONE_ROUNDS=${ALONE_ROUNDS:-3}
NB=$((N + 1))                      # BMC N+1: the peer's (solprobe), not a node
PER_PROC=${SHARED_PER_PROC:-$NB}   # default: one ipmi_sim for the whole fleet
[ "$PER_PROC" -le 110 ] || PER_PROC=110
SOL_PORT=24001                     # libipmiconsole takes IPMI ports up to 32767 only
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
TMP=$(mktemp -d /tmp/rp-bench-console-XXXXXX)
SIM="$TMP/sim"; mkdir -p "$SIM"
FX=tests/ipmi
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	BASE_PORT=$SOL_PORT sh "$FX/bmcsim.sh" stop "$SIM" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }
start_server() { # datadir config -> sets ADDR, AUTH, SPID
	"$BIN" --listen 127.0.0.1:0 --data-dir "$1" -c "$2" --power-sync-interval 0 \
		--sensor-sync-interval 0 --no-access-log >"$1.out" 2>"$1.log" &
	SPID=$!; PIDS="$PIDS $SPID"
	for _ in $(seq 100); do grep -q listening "$1.out" 2>/dev/null && break; sleep 0.1; done
	ADDR=$(sed -n 's/^listening on //p' "$1.out")
	[ -n "$ADDR" ] || { echo "console.sh: rackpilotd did not start:" >&2; cat "$1.log" >&2; exit 1; }
	TOKEN=$(cat "$1/admin.token")
	AUTH="Authorization: Bearer $TOKEN"
}
stop_server() { kill "$SPID"; wait "$SPID" 2>/dev/null || true; }
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks_ms() { awk -v t="$1" -v hz="$HZ" 'BEGIN {printf "%.0f", t * 1000 / hz}'; }
rss_kb() { awk -v k="${2:-VmRSS}:" '$1 == k {print $2}' "/proc/$1/status"; }
SIM_PIDS=""
sim_ticks() { s=0; for p in $SIM_PIDS; do s=$((s + $(cpu_ticks "$p"))); done; echo "$s"; }
# the machine: "busy total" jiffies, all CPUs
machine() { awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t}' /proc/stat; }
pct_of() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f", b ? 100 * a / b : 0}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 == 0) print "-"; else printf "%.2f", a / b}'; }
kbs() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1024}'; }
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the fleet, the server, the nodes ------------------------------------------------------------
cc -O2 -o "$TMP/solprobe" tests/ipmi/solprobe.c -lipmiconsole -lfreeipmi -lpthread
if [ "$SIM_PATCH" = 1 ]; then
	# the fixture's copy, SOL packets refreshing their session's timeout as IPMI messages do
	mkdir -p "$TMP/fixture"; cp tests/ipmi/* "$TMP/fixture/"; FX=$TMP/fixture
	python3 - "$FX/mc_plugin.c" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
old = "\torig_sol_payload(lan, msg);\n}"
new = """\t{ /* bench/console.sh: SOL packets are session activity, as on a real BMC */
\t\tunsigned int i;
\t\tfor (i = 1; i <= MAX_SESSIONS; i++)
\t\t\tif (lan->sessions[i].active && lan->sessions[i].sid == msg->sid)
\t\t\t\tlan->sessions[i].time_left = lan->default_session_timeout;
\t}
""" + old
if s.count(old) != 1:
    sys.exit("console.sh: mc_plugin.c changed; cannot patch sol_payload (SIM_PATCH=0 runs without)")
open(p, "w").write(s.replace(old, new))
EOF
fi
SOL=1 SHARED_PER_PROC=$PER_PROC BASE_PORT=$SOL_PORT sh "$FX/bmcsim.sh" start "$SIM" "$NB" shared >/dev/null
SIM_PIDS=$(cut -f8 "$SIM/bmcs.tsv" | sort -u | tr '\n' ' ')
NPROC=$(echo "$SIM_PIDS" | wc -w)
MAXS=$((N > 64 ? N : 64))
printf '[server]\nconsole_log = always\nconsole_max_sessions = %d\n' "$MAXS" >"$TMP/rp.conf"
start_server "$TMP/rp" "$TMP/rp.conf"
awk -v n="$N" -v base="$SOL_PORT" 'BEGIN {
	printf "{\"racks\":[{\"name\":\"con\"}],\"nodes\":[";
	for (i = 1; i <= n; i++)
		printf "%s{\"name\":\"sol%03d\",\"rack\":\"con\",\"bmc\":{\"driver\":\"ipmi\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"password\",\"options\":{\"workarounds\":[\"opensesspriv\"]}}}", (i > 1 ? "," : ""), i, base + i - 1;
	printf "]}" }' >"$TMP/nodes.json"
RSS0=$(rss_kb "$SPID")
T0=$(now_ms)
api --data-binary @"$TMP/nodes.json" "http://$ADDR/v1/import" >/dev/null
# every node's log says SOL is up (through the API)
UP=0
for _ in $(seq 240); do
	UP=0
	for i in $(seq "$N"); do
		api "http://$ADDR/v1/nodes/$(printf sol%03d "$i")/console/log?tail=5" |
			grep -q '\[rackpilot\] SOL connected' && UP=$((UP + 1))
	done
	[ "$UP" -lt "$N" ] || break
	sleep 0.5
done
[ "$UP" -eq "$N" ] || { echo "console.sh: only $UP of $N consoles connected" >&2; exit 1; }
T_UP=$(($(now_ms) - T0))
# node -> uuid, and the serial port of each (sol001 is bmc1)
api "http://$ADDR/v1/nodes?limit=1000" |
	python3 -c 'import json, sys
for n in json.load(sys.stdin)["items"]: print(n["name"], n["id"])' | sort >"$TMP/uuids"
[ "$(wc -l <"$TMP/uuids")" -eq "$N" ] || { echo "console.sh: node list incomplete" >&2; exit 1; }
TARGETS=$(awk -v sim="$SIM" '{i = substr($1, 4) + 0; printf "%s/bmc%d/serial=%s ", sim, i, $2}' "$TMP/uuids")
ONE=$(echo "$TARGETS" | cut -d' ' -f1)
PEER="$TMP/solprobe 127.0.0.1:$((SOL_PORT + N)) $SIM/bmc$NB/serial"

# ---- 0. idle ---------------------------------------------------------------------------------------
sleep 5
RSS_IDLE=$(rss_kb "$SPID")
c0=$(cpu_ticks "$SPID"); s0=$(sim_ticks); set -- $(machine); m0=$1; mt0=$2
sleep "$IDLE_S"
IDLE_CPU=$(ticks_ms $(($(cpu_ticks "$SPID") - c0))); IDLE_SIM=$(ticks_ms $(($(sim_ticks) - s0)))
set -- $(machine); IDLE_MACH=$(pct_of $(($1 - m0)) $(($2 - mt0)))
THREADS=$(awk '/^Threads:/ {print $2}' "/proc/$SPID/status")
FDS=$(ls "/proc/$SPID/fd" | wc -l)

# ---- a. throughput ---------------------------------------------------------------------------------
burst() { # name bytes args... -> $TMP/name.json; sets B_CPU B_SIM B_MACH (ms, ms, % of all CPUs)
	_n=$1; _b=$2; shift 2
	c0=$(cpu_ticks "$SPID"); s0=$(sim_ticks); _m=$(machine)
	python3 bench/console_rx.py burst --bytes "$_b" --logdir "$TMP/rp/console" --tag "$_n" "$@" >"$TMP/$_n.json"
	B_CPU=$(ticks_ms $(($(cpu_ticks "$SPID") - c0))); B_SIM=$(ticks_ms $(($(sim_ticks) - s0)))
	set -- $_m $(machine); B_MACH=$(pct_of $(($3 - $1)) $(($4 - $2)))
}
# "sessions complete missing out_of_order median_Bps min_Bps max_Bps total_Bps last_ms probe_Bps probe_ms"
# shellcheck disable=SC2086
burst A3 "$BYTES" --probe $PEER $TARGETS
set -- $(python3 bench/console_rx.py burst-stats "$TMP/A3.json")
ALL_OK=$2; ALL_MISS=$3; ALL_OOO=$4; ALL_MED=$5; ALL_MIN=$6; ALL_MAX=$7; ALL_TOT=$8; ALL_MS=$9
ALL_PEER_BPS=${10}; ALL_PEER_MS=${11}; ALL_PEER_CPU=$(ticks_ms "${12}")
ALL_CPU=$B_CPU; ALL_SIM=$B_SIM; ALL_MACH=$B_MACH
RSS_AFTER=$(rss_kb "$SPID")
ALL_MB=$(awk -v n="$N" -v b="$BYTES" 'BEGIN {printf "%.1f", n * int(b / 100) * 100 / 1048576}')
CPU_PER_MB=$(awk -v c="$ALL_CPU" -v m="$ALL_MB" 'BEGIN {printf "%.0f", c / m}')

# ---- b. latency ------------------------------------------------------------------------------------
sleep 2
MARKS=""; BGS=""
i=0
for t in $TARGETS; do
	i=$((i + 1))
	serial=${t%%=*}
	if [ "$i" -le "$LAT_NODES" ]; then MARKS="$MARKS $serial=$(printf sol%03d "$i")"; else BGS="$BGS $serial"; fi
done
c0=$(cpu_ticks "$SPID"); s0=$(sim_ticks); m=$(machine)
# shellcheck disable=SC2086
python3 bench/console_rx.py latency --addr "$ADDR" --token "$TOKEN" --duration "$LAT_S" \
	--rate "$RATE" --bg-bps "$BG_BPS" $MARKS -- $BGS >"$TMP/lat.json"
LAT_CPU=$(ticks_ms $(($(cpu_ticks "$SPID") - c0))); LAT_SIM=$(ticks_ms $(($(sim_ticks) - s0)))
set -- $m $(machine); LAT_MACH=$(pct_of $(($3 - $1)) $(($4 - $2)))
set -- $(python3 bench/console_rx.py latency-stats "$TMP/lat.json")
L_SENT=$1; L_RECV=$2; L_LOST=$3; L_P50=$4; L_P99=$5; L_MAX=$6; L_LOG50=$7; L_LOG99=$8
L_SSE50=$9; L_SSE99=${10}; L_RATE=${11}; L_BG=${12}; L_SHORT=${13}

# ---- a, alone: one session, then the peer -----------------------------------------------------------
# Last: a single session at MB/s is the run most likely to lose its SOL session (libipmiconsole ends
# it with "internal error" when the reader falls behind), and a session lost with output pending
# leaves ipmi_sim's console of that BMC stuck (see the result's note); nothing after it depends on it.
# alone, ALONE_ROUNDS times each, taking turns: "bytes/s ms cpu_ms ipmi_sim_ms" a line for each
# complete run; a run that stalled (no progress for 20 s) counts in *_STALLED with its lost lines
: >"$TMP/one"; : >"$TMP/peer"; ONE_STALLED=0; ONE_LOST=0; PEER_STALLED=0
for r in $(seq "$ALONE_ROUNDS"); do
	burst "O$r" "$ALONE_BYTES" "$ONE"
	set -- $(python3 bench/console_rx.py burst-stats "$TMP/O$r.json")
	if [ "$2" = 1 ]; then echo "$5 $9 $B_CPU $B_SIM" >>"$TMP/one"
	else ONE_STALLED=$((ONE_STALLED + 1)); ONE_LOST=$((ONE_LOST + $3)); fi
	# shellcheck disable=SC2086
	burst "P$r" "$ALONE_BYTES" --probe $PEER
	set -- $(python3 bench/console_rx.py burst-stats "$TMP/P$r.json")
	if [ "${10}" != - ]; then echo "${10} ${11} $(ticks_ms "${12}") $B_SIM" >>"$TMP/peer"
	else PEER_STALLED=$((PEER_STALLED + 1)); fi
done
[ -s "$TMP/one" ] || echo "0 0 0 0" >"$TMP/one"
[ -s "$TMP/peer" ] || echo "1 0 0 0" >"$TMP/peer"
set -- $(sort -n "$TMP/one" | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}')
ONE_BPS=$1; ONE_MS=$2; ONE_CPU=$3; ONE_SIM=$4
set -- $(sort -n "$TMP/peer" | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}')
PEER_BPS=$1; PEER_MS=$2; PEER_CPU=$3; PEER_SIM=$4
ONE_ALL=$(awk '{printf "%s%.0f", (NR > 1 ? ", " : ""), $1 / 1024}' "$TMP/one")
PEER_ALL=$(awk '{printf "%s%.0f", (NR > 1 ? ", " : ""), $1 / 1024}' "$TMP/peer")
CLOSED=$(cat "$TMP"/rp/console/*.log* | grep -c '\[rackpilot\] SOL closed' || true)
# why, and which console: "count reason" lines
cat "$TMP"/rp/console/*.log* | sed -n 's/^[^ ]* \[rackpilot\] SOL closed: \(.*\); trying again.*/\1/p' |
	sort | uniq -c >"$TMP/closed"
for f in "$TMP"/rp/console/*.log; do
	u=$(basename "$f" .log)
	cat "$f"* | grep -q '\[rackpilot\] SOL closed' && awk -v u="$u" '$2 == u {printf "%s ", $1}' "$TMP/uuids"
done >"$TMP/closed.nodes"
RSS_END=$(rss_kb "$SPID"); HWM=$(rss_kb "$SPID" VmHWM)
LOG_BYTES=$(cat "$TMP"/rp/console/*.log* | wc -c)
stop_server
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

{
	echo "rackpilot console benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $(uname -r)"
	echo "command: $CMDLINE   (rackpilotd: $BIN)"
	echo "load average before $LOAD0, after $LOAD1 (other work on the machine shows there)"
	echo
	echo "fleet: $NB ipmi_sim BMCs with SOL=1 (shared mode, $PER_PROC per ipmi_sim: $NPROC process(es); a socat pty"
	echo "   pair per serial port), $N nodes (ipmi, lanplus); BMC $NB is the peer's. rackpilotd: console_log = always,"
	echo "   console_max_sessions $MAXS; all $N consoles \"SOL connected\" $T_UP ms after the import (log via the API)"
	if [ "$SIM_PATCH" = 1 ]; then
		echo "   fixture: a copy of tests/ipmi whose mc_plugin.c counts SOL packets as session activity (else"
		echo "   ipmi_sim drops a console that prints >10 s after libipmiconsole's last keepalive: see the header)"
	else
		echo "   fixture: tests/ipmi as it is (SIM_PATCH=0): sessions that print are dropped by ipmi_sim (see the header)"
	fi
	echo
	echo "0. idle, $N sessions open: server CPU $IDLE_CPU ms over $IDLE_S s ($(awk -v c="$IDLE_CPU" -v s="$IDLE_S" 'BEGIN {printf "%.2f", c / s / 10}') % of a CPU);"
	echo "   ipmi_sim $IDLE_SIM ms; the machine ${IDLE_MACH} % busy (all CPUs, other work included)"
	echo "   server RSS: $RSS0 kB before the nodes, $RSS_IDLE kB with $N sessions idle; $THREADS threads, $FDS fds"
	echo
	echo "a. throughput: 100-byte lines written into the serial ptys as fast as they take them; bytes/s per"
	echo "   session = its bytes / (first write -> its last line's log timestamp); every line checked"
	echo "   all $N at once, $BYTES bytes each:"
	echo "      median $(kbs "$ALL_MED") KiB/s per session, min $(kbs "$ALL_MIN"), max $(kbs "$ALL_MAX"); total $(kbs "$ALL_TOT") KiB/s"
	echo "      ($ALL_MB MiB in $ALL_MS ms); $ALL_OK/$N complete, $ALL_MISS lines missing, $ALL_OOO out of order"
	[ "$ALL_OK" = "$N" ] || echo "      (incomplete sessions: the burst stalled, no progress for 20 s; the figures are the complete ones)"
	echo "      peer at the same time (solprobe on BMC $NB, same ipmi_sim): $(kbs "$ALL_PEER_BPS") KiB/s ($ALL_PEER_MS ms; its CPU $ALL_PEER_CPU ms)"
	echo "      -> rackpilotd median session vs the peer under the same load: $(ratio "$ALL_MED" "$ALL_PEER_BPS")x"
	echo "   c. server CPU over it: $ALL_CPU ms ($CPU_PER_MB ms per MiB logged); ipmi_sim $ALL_SIM ms; the machine ${ALL_MACH} % busy"
	echo "      server RSS after: $RSS_AFTER kB"
	echo "   alone (run last, after b), $ALONE_BYTES bytes, median of $ALONE_ROUNDS runs taking turns:"
	echo "      one session (the other $((N - 1)) idle): $(kbs "$ONE_BPS") KiB/s ($ONE_MS ms; server CPU $ONE_CPU ms, ipmi_sim $ONE_SIM ms;"
	echo "         runs $ONE_ALL KiB/s; runs that stalled: $ONE_STALLED, $ONE_LOST lines lost in them)"
	echo "      peer (solprobe, libipmiconsole, BMC $NB): $(kbs "$PEER_BPS") KiB/s ($PEER_MS ms; its CPU $PEER_CPU ms with its set-up,"
	echo "         ipmi_sim $PEER_SIM ms; runs $PEER_ALL KiB/s; runs that stalled: $PEER_STALLED)"
	echo "      -> rackpilotd one session vs the peer: $(ratio "$ONE_BPS" "$PEER_BPS")x"
	echo
	echo "b. latency, serial write -> SSE arrival: $LAT_NODES SSE readers, MARK lines at $RATE/s per node"
	echo "   (measured $L_RATE/s), the other $((N - LAT_NODES)) sessions at $BG_BPS B/s each (measured $L_BG B/s), $LAT_S s"
	echo "   p50 $L_P50 ms, p99 $L_P99 ms, max $L_MAX ms   ($L_RECV of $L_SENT marks arrived, $L_LOST lost; $L_SHORT short pty writes)"
	echo "   split at the log line's timestamp (ms): write -> logged p50 $L_LOG50 / p99 $L_LOG99, logged -> SSE p50 $L_SSE50 / p99 $L_SSE99"
	echo "   (SSE streams are parked and woken by a 20 ms poll of the change counter: STREAM_POLL_MS)"
	echo "   server CPU over the run: $LAT_CPU ms ($(awk -v c="$LAT_CPU" -v s="$LAT_S" 'BEGIN {printf "%.1f", c / s / 10}') % of a CPU); ipmi_sim $LAT_SIM ms; the machine ${LAT_MACH} % busy"
	echo
	echo "sessions that dropped during the run (\"SOL closed\" in the logs): $CLOSED; logs $LOG_BYTES bytes;"
	if [ "$CLOSED" -gt 0 ]; then
		echo "   nodes: $(cat "$TMP/closed.nodes")"
		sed 's/^/   /' "$TMP/closed"
		echo "   (\"internal error\": libipmiconsole ends a session whose reader falls behind (a short write to its"
		echo "   socket); after one lost with output pending, ipmi_sim sends that BMC's console nothing more)"
	fi
	echo "server RSS at the end $RSS_END kB, peak $HWM kB"
} | tee "$OUT/console.txt"
