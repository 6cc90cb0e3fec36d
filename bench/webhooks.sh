#!/bin/sh
# Webhook delivery benchmark: N racks imported at once (one rack.created event each) with W
# webhooks subscribed to rack.*, each to its own loopback receiver (tests/webhooks/receiver.py,
# which checks every signature): the time from the first event to the last delivery recorded,
# deliveries per second, and the latency of one event to its POST on an idle server. The data
# directory is on the disk, so every recorded attempt and outcome is a real flush.
# Usage: bench/webhooks.sh   (env N=1000 W=2). Results: bench/out/webhooks.txt
set -eu
cd "$(dirname "$0")/.."
N=${N:-1000}; W=${W:-2}
OUT=bench/out
mkdir -p "$OUT"
cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd >/dev/null
BIN="$PWD/$OUT/build/rackpilotd"
TMP=$(mktemp -d "$PWD/$OUT/webhooks-XXXXXX")
chmod 700 "$TMP"
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
now_ms() { date +%s%3N; }
"$BIN" --listen 127.0.0.1:0 --data-dir "$TMP/d" --power-sync-interval 0 --no-access-log \
	>"$TMP/out" 2>"$TMP/log" &
PIDS="$!"
for _ in $(seq 100); do grep -q listening "$TMP/out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$TMP/out")
AUTH="Authorization: Bearer $(cat "$TMP/d/admin.token")"
api() { curl -sf --noproxy '*' -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for w in $(seq "$W"); do
	p=$((port + w))
	python3 tests/webhooks/receiver.py "$p" "$TMP/recv$w.log" bench-webhook-secret-0123 >"$TMP/recv$w.out" 2>&1 &
	PIDS="$PIDS $!"
	for _ in $(seq 50); do grep -q ready "$TMP/recv$w.out" 2>/dev/null && break; sleep 0.1; done
	api -d "{\"name\":\"b$w\",\"url\":\"http://127.0.0.1:$p/hook\",\"events\":[\"rack.*\"],\"secret\":\"bench-webhook-secret-0123\"}" \
		"http://$ADDR/v1/webhooks" >/dev/null
done
pending() { curl -sf --noproxy '*' -H "$AUTH" "http://$ADDR/metrics" | sed -n 's/^rackpilot_webhook_deliveries_pending //p'; }
# Latency: one event on an idle server, from the POST's answer to the receiver's log line.
lat=""
for i in $(seq 5); do
	before=$(cat "$TMP/recv1.log" 2>/dev/null | wc -l)
	t0=$(now_ms)
	api -d "{\"name\":\"lat$i\"}" "http://$ADDR/v1/racks" >/dev/null
	while [ "$(cat "$TMP/recv1.log" 2>/dev/null | wc -l)" -le "$before" ]; do sleep 0.005; done
	lat="$lat $(($(now_ms) - t0))"
done
# Throughput: N events in one transaction (an import of N racks), then until nothing is
# pending: the deliverer's own pace.
python3 -c 'import json,sys; n=int(sys.argv[1]); print(json.dumps({"racks":[{"name":"r%d" % i} for i in range(n)]}))' "$N" >"$TMP/import.json"
t0=$(now_ms)
api --data-binary @"$TMP/import.json" "http://$ADDR/v1/import" >/dev/null
t1=$(now_ms)
while [ "$(pending)" != 0 ]; do sleep 0.05; done
t2=$(now_ms)
got=$(cat "$TMP"/recv*.log | grep -c '"sig_ok": true' || true)
bad=$(cat "$TMP"/recv*.log | grep -c '"sig_ok": false' || true)
{
	echo "# bench/webhooks.sh $(date -u +%FT%TZ) on $(nproc) CPUs; N=$N racks, W=$W webhooks"
	echo "latency, event to POST (idle server, 5 events): ms:$lat"
	echo "$N events made in one import ($((t1 - t0)) ms); all $((N * W)) deliveries recorded $((t2 - t0)) ms after it began"
	echo "deliveries per second: $((N * W * 1000 / (t2 - t0)))"
	echo "requests received with a valid signature: $got, with a bad one: $bad"
} | tee "$OUT/webhooks.txt"
