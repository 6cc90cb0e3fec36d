#!/bin/sh
# Commit throughput: single enrolls (POST /v1/nodes, one node each) at 8 connections, and
# 200 fake-driver nodes powered on by one bulk request, every job transition a durable commit.
# The data directory is on the disk (not /tmp's tmpfs), so every acknowledged commit waits
# for a real flush.
# Usage: bench/commit.sh [BIN [OTHER_BIN]]   (default: a Release build of this tree). With
# OTHER_BIN (e.g. a build of an earlier commit) both run in the same session, alternating,
# and the ratio is printed. Results: bench/out/commit.txt
set -eu
cd "$(dirname "$0")/.."
OUT=bench/out
mkdir -p "$OUT"
N_ENROLL=${N_ENROLL:-4000}
N_FAKE=${N_FAKE:-200}
ROUNDS=${ROUNDS:-3}
if [ $# -ge 1 ]; then
	BIN=$1
else
	cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd >/dev/null
	BIN="$OUT/build/rackpilotd"
fi
OTHER=${2:-}
TMP=$(mktemp -d "$PWD/$OUT/commit-XXXXXX")
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
now_ms() { date +%s%3N; }
start_server() { # bin datadir -> sets ADDR, AUTH, SPID
	"$1" --listen 127.0.0.1:0 --data-dir "$2" --power-sync-interval 0 --no-access-log \
		>"$2.out" 2>"$2.log" &
	SPID=$!; PIDS="$PIDS $SPID"
	for _ in $(seq 100); do grep -q listening "$2.out" 2>/dev/null && break; sleep 0.1; done
	ADDR=$(sed -n 's/^listening on //p' "$2.out")
	AUTH="Authorization: Bearer $(cat "$2/admin.token")"
}
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
wait_idle() { while api "http://$ADDR/v1/jobs?state=queued&limit=1" | grep -q '"id"' ||
	api "http://$ADDR/v1/jobs?state=running&limit=1" | grep -q '"id"'; do sleep 0.005; done; }

# One run of bin: "enrolls_per_s power_on_ms".
run() {
	d="$TMP/d$$-$(now_ms)"
	start_server "$1" "$d"
	for i in $(seq 1 "$N_ENROLL"); do
		[ "$i" -gt 1 ] && echo next
		printf 'url = "http://%s/v1/nodes"\nrequest = "POST"\n' "$ADDR"
		printf 'header = "%s"\nheader = "Content-Type: application/json"\n' "$AUTH"
		printf 'data = "{\\"name\\":\\"e%05d\\"}"\noutput = "/dev/null"\nfail\nsilent\n' "$i"
	done >"$d.cfg"
	t0=$(now_ms)
	curl --parallel --parallel-max 8 --no-progress-meter -K "$d.cfg"
	t1=$(now_ms)
	n=$(api "http://$ADDR/v1/nodes?limit=1" -o /dev/null -w '%{http_code}')
	[ "$n" = 200 ] || { echo "server failed" >&2; exit 1; }
	awk -v n="$N_FAKE" 'BEGIN {
		printf "{\"nodes\":[";
		for (i = 0; i < n; i++) printf "%s{\"name\":\"f%03d\",\"tags\":[\"bench\"],\"bmc\":{\"driver\":\"fake\"}}", (i > 0 ? "," : ""), i;
		printf "]}" }' >"$d.json"
	api --data-binary @"$d.json" "http://$ADDR/v1/import" >/dev/null
	t2=$(now_ms)
	api -d '{"selector":{"tag":"bench"},"target":"on"}' "http://$ADDR/v1/actions/power" >/dev/null
	wait_idle
	t3=$(now_ms)
	on=$(api "http://$ADDR/v1/nodes?power=on&limit=1000" | grep -o '"power_state":"on"' | wc -l)
	[ "$on" = "$N_FAKE" ] || { echo "only $on of $N_FAKE nodes on" >&2; exit 1; }
	kill "$SPID"; wait "$SPID" 2>/dev/null || true
	echo "$(awk -v n="$N_ENROLL" -v ms=$((t1 - t0)) 'BEGIN {printf "%d", n * 1000 / ms}') $((t3 - t2))"
}

: >"$TMP/a"; : >"$TMP/b"
for _ in $(seq "$ROUNDS"); do
	run "$BIN" >>"$TMP/a"
	[ -z "$OTHER" ] || run "$OTHER" >>"$TMP/b"
done
med() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
A_EN=$(cut -d' ' -f1 "$TMP/a" | med); A_ON=$(cut -d' ' -f2 "$TMP/a" | med)
{
	echo "rackpilot commit benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, median of $ROUNDS"
	echo "$BIN: $A_EN single enrolls/s at 8 connections; $N_FAKE power-ons in $A_ON ms"
	echo "   (all runs: $(paste -sd, "$TMP/a"))"
	if [ -n "$OTHER" ]; then
		B_EN=$(cut -d' ' -f1 "$TMP/b" | med); B_ON=$(cut -d' ' -f2 "$TMP/b" | med)
		echo "$OTHER: $B_EN single enrolls/s at 8 connections; $N_FAKE power-ons in $B_ON ms"
		echo "   (all runs: $(paste -sd, "$TMP/b"))"
		echo "ratio: enrolls $(awk -v a="$A_EN" -v b="$B_EN" 'BEGIN {printf "%.2f", a / b}')x, power-on $(awk -v a="$A_ON" -v b="$B_ON" 'BEGIN {printf "%.2f", b / a}')x faster"
	fi
} | tee "$OUT/commit.txt"
