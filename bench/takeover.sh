#!/bin/sh
# Takeover benchmark (scale-out issue): server "a" powers on N Redfish mock BMCs (each BMC
# request takes DELAY_MS, so jobs are in flight) and is killed -9 as soon as the first BMC has
# logged its power-on. Server "b" (another server_name) takes over: on PostgreSQL it runs
# beside a from the start (the two share the jobs until a dies); on SQLite, which has one
# server, it starts on a's data directory after the kill. Reported, from the database's times:
# when the leases a left behind ran out (the latest lease_until of its running jobs), how
# long after that b took the first one over (its first job.interrupted event) and when every
# job had ended; and that no BMC saw two power-ons (counted by the mock BMCs).
# Usage: bench/takeover.sh   (env N=200 LEASE=10 DELAY_MS=300 RP_BIN= RP_DATABASE=)
# RP_DATABASE: a PostgreSQL connection string to an empty database instead of SQLite in the
# data directory. Results: bench/out/takeover.txt
set -eu
cd "$(dirname "$0")/.."
N=${N:-200}; LEASE=${LEASE:-10}; DELAY_MS=${DELAY_MS:-300}
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
TMP=$(mktemp -d /tmp/rp-bench-takeover-XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

start_server() { # name data-dir -> sets ADDR, AUTH, SPID
	printf '[server]\nserver_name = %s\njob_lease = %d\npower_sync_interval = 0\n' "$1" "$LEASE" \
		>"$TMP/$1.conf"
	: >"$TMP/$1.out"
	"$BIN" --listen 127.0.0.1:0 --data-dir "$2" --no-access-log --config "$TMP/$1.conf" \
		${RP_DATABASE:+--database "$RP_DATABASE"} >"$TMP/$1.out" 2>"$TMP/$1.log" &
	SPID=$!; PIDS="$PIDS $SPID"
	for _ in $(seq 100); do grep -q listening "$TMP/$1.out" 2>/dev/null && break; sleep 0.1; done
	ADDR=$(sed -n 's/^listening on //p' "$TMP/$1.out")
	AUTH="Authorization: Bearer $(cat "$2/admin.token")"
}
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
sql() {
	if [ -n "${RP_DATABASE:-}" ]; then psql -qAtX "$RP_DATABASE" -c "$1"
	else sqlite3 "$TMP/data/rackpilot.db" "$1"; fi
}

python3 tests/redfish/mock_bmc.py --port-base 29000 --count "$N" \
	--ready-file "$TMP/rf.ready" >/dev/null &
PIDS="$PIDS $!"
for _ in $(seq 300); do [ -f "$TMP/rf.ready" ] && break; sleep 0.1; done
for i in $(seq 0 $((N - 1))); do
	echo "url = \"http://127.0.0.1:$((29000 + i))/__mock/config\""
	echo "data = \"{\\\"delay_ms\\\": $DELAY_MS}\""
	echo 'output = "/dev/null"'
done >"$TMP/knobs.cfg"
curl -s --parallel --parallel-max 16 -K "$TMP/knobs.cfg" 2>/dev/null

start_server a "$TMP/data"
APID=$SPID; AADDR=$ADDR
if [ -n "${RP_DATABASE:-}" ]; then
	# b: a data directory of its own with a's secret key and admin token.
	mkdir -m 700 "$TMP/data-b"
	cp -p "$TMP/data/secret.key" "$TMP/data/admin.token" "$TMP/data-b/"
	start_server b "$TMP/data-b"
fi
ADDR=$AADDR
awk -v n="$N" 'BEGIN {
	printf "{\"nodes\":[";
	for (i = 0; i < n; i++)
		printf "%s{\"name\":\"t%03d\",\"tags\":[\"takeover\"],\"bmc\":{\"driver\":\"redfish\",\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"admin\",\"password\":\"secret\",\"options\":{\"scheme\":\"http\",\"timeout_ms\":10000}}}", (i > 0 ? "," : ""), i, 29000 + i;
	printf "]}" }' >"$TMP/nodes.json"
api --data-binary @"$TMP/nodes.json" "http://$ADDR/v1/import" >/dev/null
api -d '{"selector":{"tag":"takeover"},"target":"on"}' "http://$ADDR/v1/actions/power" >/dev/null
# Kill -9 once the first BMC has logged a power-on: the first wave is then mid-send.
for _ in $(seq 500); do
	curl -s "http://127.0.0.1:29000/__mock/state" | grep -q '"reset_type"' && break
	for i in 1 2 3 4 5 6 7; do
		curl -s "http://127.0.0.1:$((29000 + i))/__mock/state" | grep -q '"reset_type"' && break 2
	done
	sleep 0.02
done
kill -9 "$APID"
wait "$APID" 2>/dev/null || true
RUNNING=$(sql "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_owner = 'a'")
EXPIRY=$(sql "SELECT max(lease_until) FROM jobs WHERE state = 'running' AND lease_owner = 'a'")
KILLED=$(date +%s%3N)

[ -n "${RP_DATABASE:-}" ] || start_server b "$TMP/data"
while [ "$(sql "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')")" != 0 ]; do
	sleep 0.2
done
FIRST=$(sql "SELECT min(at) FROM events WHERE action = 'job.interrupted'")
TAKEN=$(sql "SELECT count(*) FROM events WHERE action = 'job.interrupted'")
DONE=$(sql "SELECT max(finished_at) FROM jobs")
STATES=$(sql "SELECT state || ' ' || count(*) FROM jobs GROUP BY state ORDER BY state" | tr '\n' ' ')
TWICE=0
for i in $(seq 0 $((N - 1))); do
	ons=$(curl -s "http://127.0.0.1:$((29000 + i))/__mock/state" |
		python3 -c 'import json,sys; print(sum(1 for a in json.load(sys.stdin)["actions"] if a.get("reset_type") == "On"))')
	[ "$ons" -le 1 ] || TWICE=$((TWICE + 1))
done
{
	echo "rackpilot takeover benchmark — $(date -u +%FT%TZ), $(nproc) CPUs, database: $([ -n "${RP_DATABASE:-}" ] && echo PostgreSQL || echo SQLite)"
	echo "$N power-ons over Redfish mock BMCs ($DELAY_MS ms a request), job_lease $LEASE s; a killed -9 with $RUNNING job(s) running"
	[ -n "${RP_DATABASE:-}" ] && echo "b ran beside a from the start" || echo "b started after the kill (SQLite: one server at a time)"
	echo "leases ran out $((EXPIRY - KILLED)) ms after the kill (a claimed them at most $LEASE s before)"
	echo "b's first takeover: $((FIRST - EXPIRY)) ms after the leases ran out; $TAKEN job(s) taken over"
	echo "all $N jobs ended $((DONE - EXPIRY)) ms after the leases ran out: $STATES"
	echo "BMCs that saw two power-ons: $TWICE"
} | tee "$OUT/takeover.txt"
