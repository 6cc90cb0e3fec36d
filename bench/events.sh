#!/bin/sh
# Event stream benchmark (operator-surfaces issue): STREAMS clients follow
# GET /v1/events/stream while events are made one at a time (latency from the POST's answer
# to the event on every stream) and then in a burst (deliveries per second); server CPU and RSS.
# The server runs on CPU 0, the clients on the others (as bench/foundation.sh).
# Usage: bench/events.sh   (env STREAMS=100 N_LAT=100 N_BURST=1000). Results: bench/out/events.txt
set -eu
cd "$(dirname "$0")/.."
STREAMS=${STREAMS:-100}; N_LAT=${N_LAT:-100}; N_BURST=${N_BURST:-1000}
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd >/dev/null
BIN="$PWD/$OUT/build/rackpilotd"
TMP=$(mktemp -d /tmp/rp-bench-events-XXXXXX)
NCPU=$(nproc)
OTHER="1-$((NCPU - 1))"
[ "$NCPU" -ge 2 ] || OTHER=0
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
taskset -c 0 "$BIN" --listen 127.0.0.1:0 --data-dir "$TMP/d" --power-sync-interval 0 \
	--no-access-log >"$TMP/out" 2>"$TMP/log" &
SPID=$!
for _ in $(seq 100); do grep -q listening "$TMP/out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$TMP/out")
t0=$(awk '{print $14 + $15}' "/proc/$SPID/stat")
{
	echo "# bench/events.sh $(date -u +%FT%TZ) on $(nproc) CPUs: rackpilotd on CPU 0"
	taskset -c "$OTHER" python3 bench/events.py "$ADDR" "$(cat "$TMP/d/admin.token")" \
		"$STREAMS" "$N_LAT" "$N_BURST"
	t1=$(awk '{print $14 + $15}' "/proc/$SPID/stat")
	echo "server CPU for all of it: $(( (t1 - t0) * 1000 / $(getconf CLK_TCK) )) ms;" \
		"peak RSS $(awk '/VmHWM/ {printf "%.1f MiB", $2 / 1024}' "/proc/$SPID/status")"
} | tee "$OUT/events.txt"
