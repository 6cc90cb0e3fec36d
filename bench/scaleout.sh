#!/bin/sh
# Scale-out benchmark (PostgreSQL issue): 10,000 nodes on one PostgreSQL database, served by
# one rackpilotd and then by two.
#   - GET one node and list 1,000-node pages with wrk: one server (CPU 0, wrk on CPU 1), then
#     two servers (a on CPU 0, b on CPU 1, a wrk per server on the other CPU: on a 2-core
#     machine each CPU runs one server and the other server's load); the ratio of the sums
#   - job claim rate: 1,000 power-ons of fake-driver nodes (no BMC time: claims, records and
#     their transactions), one server and two, from the batch's POST to its last job
# PostgreSQL is a throwaway cluster (tests/pg/cluster.sh), not pinned.
# Usage: bench/scaleout.sh [SECONDS_PER_WRK_RUN]   (default 10; env ROUNDS=3 RP_BIN=)
# Results: bench/out/scaleout.txt
set -eu
cd "$(dirname "$0")/.."
DUR=${1:-10}
ROUNDS=${ROUNDS:-3}
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
command -v wrk >/dev/null || apt-get install -y -q wrk >/dev/null
if [ -n "${RP_BIN:-}" ]; then
	BIN=$(readlink -f "$RP_BIN")
else
	cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd >/dev/null
	BIN="$PWD/$OUT/build/rackpilotd"
fi
TMP=$(mktemp -d /tmp/rp-bench-scaleout-XXXXXX)
chmod 755 "$TMP"
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	sh tests/pg/cluster.sh stop "$TMP/pg" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
sh tests/pg/cluster.sh start "$TMP/pg" >/dev/null
export RP_TEST_PG="$TMP/pg"
DB=$(sh tests/pg/newdb.sh)

start_server() { # name cpu -> sets ADDR_<name>, SPID
	mkdir -p -m 700 "$TMP/$1"
	[ -f "$TMP/a/secret.key" ] && cp -p "$TMP/a/secret.key" "$TMP/a/admin.token" "$TMP/$1/" 2>/dev/null || true
	: >"$TMP/$1.out"
	taskset -c "$2" "$BIN" --listen 127.0.0.1:0 --data-dir "$TMP/$1" --threads 1 --no-access-log \
		--server-name "$1" --database "$DB" --power-sync-interval 0 >"$TMP/$1.out" 2>"$TMP/$1.log" &
	SPID=$!; PIDS="$PIDS $SPID"
	for _ in $(seq 100); do grep -q listening "$TMP/$1.out" 2>/dev/null && break; sleep 0.1; done
	eval "ADDR_$1=$(sed -n 's/^listening on //p' "$TMP/$1.out")"
}
start_server a 0
APID=$SPID
AUTH="Authorization: Bearer $(cat "$TMP/a/admin.token")"

# 10,000 nodes in 40 racks (IPMI BMCs at unroutable addresses: nothing is swept), and 1,000
# fake-driver nodes tagged "claim" for the claim rate.
awk 'BEGIN {
	printf "{\"racks\":[";
	for (r = 1; r <= 40; r++) printf "%s{\"name\":\"r%02d\"}", (r > 1 ? "," : ""), r;
	printf "],\"nodes\":[";
	for (i = 0; i < 10000; i++)
		printf "%s{\"name\":\"n%05d\",\"rack\":\"r%02d\",\"serial\":\"SN%05d\",\"tags\":[\"bench\"],\"macs\":[\"02:00:%02x:%02x:00:01\"],\"bmc\":{\"driver\":\"ipmi\",\"address\":\"10.%d.%d.%d\",\"username\":\"admin\",\"password\":\"pw\"}}",
			(i > 0 ? "," : ""), i, int(i / 250) + 1, i, int(i / 256), i % 256, 100 + int(i / 65536), int(i / 256) % 256, i % 256;
	for (i = 0; i < 1000; i++)
		printf ",{\"name\":\"f%04d\",\"tags\":[\"claim\"],\"bmc\":{\"driver\":\"fake\",\"address\":\"fake\",\"username\":\"u\",\"password\":\"p\"}}", i;
	printf "]}";
}' >"$TMP/manifest.json"
CODE=$(curl -s -o "$TMP/import.out" -w '%{http_code}' -H "$AUTH" -H 'Content-Type: application/json' \
	--data-binary @"$TMP/manifest.json" "http://$ADDR_a/v1/import")
[ "$CODE" = 200 ] || { echo "import failed: $CODE"; cat "$TMP/import.out"; exit 1; }

wrkrun() { # url cpu -> rps
	taskset -c "$2" wrk -t1 -c8 -d"${DUR}s" -H "$AUTH" "$1" | awk '/Requests\/sec/ {printf "%.0f\n", $2}'
}
median() { sort -n | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}'; }
GET=/v1/nodes/n04242
LIST="/v1/nodes?limit=1000"

# The claim rate: power on the 1,000 fake nodes, then off (so the next run has work).
claim() { # target -> seconds from the POST to the batch's end
	t0=$(date +%s.%N)
	B=$(curl -sf -H "$AUTH" -H 'Content-Type: application/json' \
		-d "{\"selector\":{\"tag\":\"claim\"},\"target\":\"$1\"}" "http://$ADDR_a/v1/actions/power" |
		sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | head -n1)
	while ! curl -sf -H "$AUTH" "http://$ADDR_a/v1/batches/$B" | grep -q '"done":true'; do sleep 0.05; done
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f\n", b - a}'
}

for _ in $(seq "$ROUNDS"); do
	wrkrun "http://$ADDR_a$GET" 1 >>"$TMP/get1"
	wrkrun "http://$ADDR_a$LIST" 1 >>"$TMP/list1"
done
CLAIM1=$(claim on); claim off >/dev/null

start_server b 1
sleep 2
for _ in $(seq "$ROUNDS"); do
	for what in GET LIST; do
		eval "P=\$$what"
		wrkrun "http://$ADDR_a$P" 1 >"$TMP/wa" &
		W1=$!
		wrkrun "http://$ADDR_b$P" 0 >"$TMP/wb"
		wait "$W1"
		echo $(( $(cat "$TMP/wa") + $(cat "$TMP/wb") )) >>"$TMP/$(echo "$what" | tr A-Z a-z)2"
		echo "$(cat "$TMP/wa")+$(cat "$TMP/wb")" >>"$TMP/$(echo "$what" | tr A-Z a-z)2.parts"
	done
done
CLAIM2=$(claim on); claim off >/dev/null

G1=$(median <"$TMP/get1"); G2=$(median <"$TMP/get2")
L1=$(median <"$TMP/list1"); L2=$(median <"$TMP/list2")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", b / a}'; }
{
	echo "rackpilot scale-out benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, PostgreSQL $(psql -qAtX "$DB" -c 'SHOW server_version'), 11,000 nodes"
	echo "rackpilotd: $BIN, 1 HTTP thread per server; wrk -t1 -c8 ${DUR}s, median of $ROUNDS"
	echo "GET $GET req/s:       one server $G1, two servers $G2 ($(paste -sd' ' "$TMP/get2.parts")), ratio $(ratio "$G1" "$G2")"
	echo "GET $LIST req/s: one server $L1, two servers $L2 ($(paste -sd' ' "$TMP/list2.parts")), ratio $(ratio "$L1" "$L2")"
	echo "1,000 fake power-ons (POST to the batch's end): one server ${CLAIM1} s ($(awk -v s="$CLAIM1" 'BEGIN {printf "%.0f", 1000 / s}') jobs/s), two servers ${CLAIM2} s ($(awk -v s="$CLAIM2" 'BEGIN {printf "%.0f", 1000 / s}') jobs/s)"
} | tee "$OUT/scaleout.txt"
