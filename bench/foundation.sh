#!/bin/sh
# Foundation benchmark: 10,000 nodes in 40 racks.
#   - bulk import of the 10,000-node manifest (one POST /v1/import)
#   - GET one node with wrk at 4 and 64 connections (req/s, p50, p99), and the same against
#     the ceiling: a minimal libmicrohttpd program with rackpilotd's daemon options that
#     answers the same bytes without auth, SQLite or JSON work
#   - listing all nodes in 1,000-node pages
#   - server RSS
# Usage: bench/foundation.sh [SECONDS_PER_WRK_RUN]   (default 10; env ROUNDS=3 RP_BIN=).
# Results: bench/out/foundation.txt
# RP_BIN: measure another build of rackpilotd (say, of an earlier commit) instead of this
# tree's; the ceiling is always this tree's.
# RP_DATABASE: a PostgreSQL connection string to an empty database (rackpilotd --database)
# instead of SQLite in the data directory; the PostgreSQL server is not pinned.
set -eu
cd "$(dirname "$0")/.."
DUR=${1:-10}
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
command -v wrk >/dev/null || { [ "$(id -u)" = 0 ] && apt-get install -y -q wrk >/dev/null || sudo apt-get install -y -q wrk >/dev/null; }
cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd rp_ceiling >/dev/null
BIN=$(readlink -f "${RP_BIN:-$OUT/build/rackpilotd}")
DATA=$(mktemp -d /tmp/rp-bench-XXXXXX)
# Servers run on CPU 0 with one thread, wrk on the other CPUs: on a 2-core machine, letting
# the scheduler mix them makes single runs differ by 2-4x.
THREADS=1
NCPU=$(nproc)
WRK_CPUS="1-$((NCPU - 1))"
[ "$NCPU" -ge 2 ] || WRK_CPUS=0
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$DATA"; }
trap cleanup EXIT INT TERM

# No power sweep: the manifest's BMC addresses (10.x) are not on this machine, and a sweep
# would send IPMI to them (and compete with what is measured).
taskset -c 0 "$BIN" --listen 127.0.0.1:0 --data-dir "$DATA" --threads "$THREADS" \
	${RP_DATABASE:+--database "$RP_DATABASE"} --power-sync-interval 0 >"$DATA/out" 2>"$OUT/server.log" &
SPID=$!
PIDS="$SPID"
for _ in $(seq 50); do grep -q listening "$DATA/out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$DATA/out")
TOKEN=$(cat "$DATA/admin.token")
AUTH="Authorization: Bearer $TOKEN"

# The manifest: 40 racks of 42U; the first 42 nodes of each rack sit in U1..U42, the rest
# (a site-wide spare pool per rack) have no position. Each node has a BMC and two MACs.
awk 'BEGIN {
	printf "{\"racks\":[";
	for (r = 1; r <= 40; r++) printf "%s{\"name\":\"r%02d\",\"site\":\"bench\",\"row\":\"%s\"}", (r > 1 ? "," : ""), r, (r <= 20 ? "A" : "B");
	printf "],\"nodes\":[";
	for (i = 0; i < 10000; i++) {
		r = int(i / 250) + 1; k = i % 250;
		pos = (k < 42) ? sprintf(",\"u_position\":%d", k + 1) : "";
		printf "%s{\"name\":\"n%05d\",\"rack\":\"r%02d\"%s,\"serial\":\"SN%05d\",\"node_class\":\"gpu-h100-8x\",\"tags\":[\"bench\",\"row-%s\"],\"macs\":[\"02:00:%02x:%02x:00:01\",\"02:00:%02x:%02x:00:02\"],\"bmc\":{\"driver\":\"ipmi\",\"address\":\"10.%d.%d.%d\",\"username\":\"admin\",\"password\":\"pw\"}}",
			(i > 0 ? "," : ""), i, r, pos, i, (r <= 20 ? "A" : "B"), int(i / 256), i % 256, int(i / 256), i % 256, 100 + int(i / 65536), int(i / 256) % 256, i % 256;
	}
	printf "]}";
}' >"$DATA/manifest.json"

IMPORT=$(curl -s -o "$DATA/import.out" -w '%{http_code} %{time_total}' -H "$AUTH" \
	-H 'Content-Type: application/json' --data-binary @"$DATA/manifest.json" "http://$ADDR/v1/import")
case "$IMPORT" in 200*) ;; *) echo "import failed: $IMPORT"; cat "$DATA/import.out"; exit 1;; esac
IMPORT_S=${IMPORT#* }

curl -s -H "$AUTH" "http://$ADDR/v1/nodes/n04242" >"$DATA/node.json"
NODE_BYTES=$(wc -c <"$DATA/node.json")

wrkrun() { # url conns [auth] -> "rps p50 p99"
	if [ -n "${3:-}" ]; then
		taskset -c "$WRK_CPUS" wrk -t1 -c"$2" -d"${DUR}s" --latency -H "$3" "$1" >"$DATA/wrk.out"
	else
		taskset -c "$WRK_CPUS" wrk -t1 -c"$2" -d"${DUR}s" --latency "$1" >"$DATA/wrk.out"
	fi
	awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$4}
		END {printf "%.0f %s %s%s\n", rps, p50, p99, (bad ? " NON-2xx:" bad : "")}' "$DATA/wrk.out"
}

# Paging through all nodes, 1,000 per page.
CUR=""; PAGES=0; TOTAL=0; MAXP=0
while :; do
	URL="http://$ADDR/v1/nodes?limit=1000${CUR:+&cursor=$CUR}"
	T=$(curl -s -o "$DATA/page.json" -w '%{time_total}' -H "$AUTH" "$URL")
	PAGES=$((PAGES + 1))
	TOTAL=$(awk -v a="$TOTAL" -v b="$T" 'BEGIN {print a + b}')
	MAXP=$(awk -v a="$MAXP" -v b="$T" 'BEGIN {print (b > a ? b : a)}')
	CUR=$(sed -n 's/.*"next_cursor":"\([^"]*\)".*/\1/p' "$DATA/page.json")
	[ -n "$CUR" ] || break
done
RSS=$(awk '/VmRSS/ {print $2}' /proc/"$SPID"/status)
HWM=$(awk '/VmHWM/ {print $2}' /proc/"$SPID"/status)
# The database's size as the server sees it (the SQLite file, or pg_database_size).
DBSZ=$(( $(curl -sf -H "$AUTH" "http://$ADDR/metrics" | sed -n 's/^rackpilot_db_size_bytes //p') / 1024 ))

# The ceiling, serving the same node bytes with the same daemon options. Runs alternate
# between the two servers, ROUNDS times per connection count, and the medians are compared:
# on a small shared machine single runs vary by a factor of two.
PORT=$(( ${ADDR##*:} + 1 ))
taskset -c 0 "$OUT/build/bench/rp_ceiling" "$PORT" "$THREADS" "$DATA/node.json" >"$DATA/ceil.out" &
PIDS="$PIDS $!"
for _ in $(seq 50); do grep -q listening "$DATA/ceil.out" 2>/dev/null && break; sleep 0.1; done
ROUNDS=${ROUNDS:-3}
median() { sort -n | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}'; }
for c in 4 8 64; do
	: >"$DATA/rp.$c"; : >"$DATA/ce.$c"
	for _ in $(seq "$ROUNDS"); do
		wrkrun "http://$ADDR/v1/nodes/n04242" "$c" "$AUTH" >>"$DATA/rp.$c"
		wrkrun "http://127.0.0.1:$PORT/" "$c" >>"$DATA/ce.$c"
	done
done
pick() { # file -> the run with the median req/s: "rps p50 p99"
	m=$(cut -d' ' -f1 "$1" | median)
	grep -m1 "^$m " "$1"
}
ratio() { awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN {printf "%.0f%%", 100 * a / b}'; }
{
	echo "rackpilot foundation benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $NCPU CPUs; servers pinned to CPU 0 ($THREADS thread), wrk to CPU $WRK_CPUS"
	echo "rackpilotd: $BIN, database: $([ -n "${RP_DATABASE:-}" ] && echo PostgreSQL || echo SQLite)"
	echo "import 10,000 nodes / 40 racks:        ${IMPORT_S} s"
	echo "GET /v1/nodes/{name} (${NODE_BYTES} B), median req/s p50 p99:"
	for c in 4 8 64; do
		G=$(pick "$DATA/rp.$c"); C=$(pick "$DATA/ce.$c")
		printf "  %2s conns  rackpilotd %-28s ceiling %-28s ratio %s\n" "$c" "$G" "$C" "$(ratio "$G" "$C")"
	done
	echo "  (median of $ROUNDS alternating ${DUR}s wrk runs each; all runs: $(for c in 4 8 64; do printf '%s: rp %s / ceil %s; ' "$c" "$(cut -d' ' -f1 "$DATA/rp.$c" | paste -sd,)" "$(cut -d' ' -f1 "$DATA/ce.$c" | paste -sd,)"; done))"
	echo "list all nodes, limit=1000: $PAGES pages, total ${TOTAL} s, slowest page ${MAXP} s"
	echo "server RSS ${RSS} kB (peak ${HWM} kB); database ${DBSZ} kB"
} | tee "$OUT/foundation.txt"
