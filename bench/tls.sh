#!/bin/sh
# TLS benchmark (issue 13), one run, same binary, same machine:
#   - GET /v1/nodes/{name} with keep-alive over HTTPS (rackpilotd's own ECDSA P-256 certificate,
#     TLS 1.3) against the same over plain HTTP: requests per second and the ratio (target:
#     HTTPS >= 80 % of plain)
#   - new connections per second (Connection: close on every request): TLS handshakes + one
#     request each, against plain TCP connections
#   - the bootstrap path per second: a boot script fetch for a new unknown MAC, then the
#     registration with the token it carried (a new discovered node each), over plain HTTP and
#     over HTTPS
# Servers run on CPU 0 with one HTTP thread, wrk on the other CPUs; rate limits are off (the
# limiter is not what is measured), rounds alternate plain/TLS (ROUNDS=3, medians).
# Usage: bench/tls.sh [SECONDS_PER_WRK_RUN] (default 10). Results: bench/out/tls.txt
set -eu
cd "$(dirname "$0")/.."
DUR=${1:-10}
ROUNDS=${ROUNDS:-3}
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
command -v wrk > /dev/null || {
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends wrk > /dev/null
}
cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd > /dev/null
BIN="$OUT/build/rackpilotd"
DATA=$(mktemp -d /tmp/rp-bench-XXXXXX)
NCPU=$(nproc)
CL_CPUS="1-$((NCPU - 1))"
[ "$NCPU" -ge 2 ] || CL_CPUS=0
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2> /dev/null || true; done
	rm -rf "$DATA"
}
trap cleanup EXIT INT TERM

start() { # NAME TLS(on|off) -> ADDR in $DATA/NAME.addr
	cat > "$DATA/$1.conf" << EOF
[server]
tls = $2
power_sync_interval = 0
access_log = false
boot_rate = 0
discovery_max_tokens = 100000
discovery_max_per_source = 0
discovery_max_nodes = 0
EOF
	taskset -c 0 "$BIN" -c "$DATA/$1.conf" --listen 127.0.0.1:0 --data-dir "$DATA/$1" \
		--threads 1 > "$DATA/$1.out" 2> "$OUT/tls-$1-server.log" &
	PIDS="$PIDS $!"
	echo $! > "$DATA/$1.pid"
	for _ in $(seq 100); do grep -q '^listening' "$DATA/$1.out" 2> /dev/null && break; sleep 0.1; done
	sed -n 's/^listening on //p' "$DATA/$1.out" > "$DATA/$1.addr"
}
start plain off
start tls on
PLAIN=http://$(cat "$DATA/plain.addr")
TLS=https://$(cat "$DATA/tls.addr")
FP=$(sed -n 's/.*public-key SHA-256 fingerprint \([0-9a-f]\{64\}\).*/\1/p' "$OUT/tls-tls-server.log")
PIN="sha256//$(printf '%s' "$FP" | xxd -r -p | base64)"
curlx() { # URL-BASE DATADIR ARGS...
	base=$1 dir=$2
	shift 2
	curl -fsS --pinnedpubkey "$PIN" -k -H "Authorization: Bearer $(cat "$DATA/$dir/admin.token")" \
		-H 'Content-Type: application/json' "$@"
}
# The same small site on both: a profile (discovery needs one) and one node to GET.
head -c 100000 /dev/urandom > "$DATA/img"
for s in plain tls; do
	base=$PLAIN
	[ $s = tls ] && base=$TLS
	curlx "$base" $s -T "$DATA/img" "$base/v1/images/k?kind=kernel" > /dev/null
	curlx "$base" $s -T "$DATA/img" "$base/v1/images/i?kind=initrd" > /dev/null
	curlx "$base" $s -d '{"name":"default","kernel":"k","initrd":"i"}' "$base/v1/boot-profiles" > /dev/null
	curlx "$base" $s -d '{"name":"gpu-r01-u07","macs":["02:be:00:00:00:07"],"tags":["bench"],"bmc":{"driver":"fake"}}' \
		"$base/v1/nodes" > /dev/null
done

wrkrun() { # url conns [lua script] [header] [threads] -> "rps p50 p99 [NON-2xx]"
	taskset -c "$CL_CPUS" wrk -t"${5:-1}" -c"$2" -d"${DUR}s" --latency ${3:+-s "$3"} \
		${4:+-H "$4"} "$1" > "$DATA/wrk.out"
	awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$4}
		END {printf "%.0f %s %s%s\n", rps, p50, p99, (bad ? " NON-2xx:" bad : "")}' "$DATA/wrk.out"
}
# GETs with the admin token of each server.
mklua() { # DATADIR -> lua that GETs the node with that server's token
	cat > "$DATA/get-$1.lua" << EOF
wrk.headers["Authorization"] = "Bearer $(cat "$DATA/$1/admin.token")"
request = function() return wrk.format("GET", "/v1/nodes/gpu-r01-u07") end
EOF
}
mklua plain
mklua tls
# The bootstrap path: wrk threads of one connection each (a thread's Lua state is its own),
# alternating a script fetch for a new MAC and the registration with the token it carried (a
# pair counts 2 requests).
cat > "$DATA/boot.lua" << 'EOF'
-- Each wrk thread gets its own MAC range (their random generators start alike), and each
-- run another (runs repeat on the same server).
local threads = 0
setup = function(thread)
	threads = threads + 1
	thread:set("id", threads + 16 * tonumber(os.getenv("RUN") or "0"))
end
local n, tok, mac = 0, nil, nil
local key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bench"
request = function()
	if tok then
		local body = string.format('{"format":1,"hostname":"b","boot_id":"x","macs":["%s"],"ssh_host_key":"%s"}', mac, key)
		local t = tok
		tok = nil
		return wrk.format("POST", "/v1/agent/register",
			{["Authorization"] = "Bearer " .. t, ["Content-Type"] = "application/json"}, body)
	end
	n = n + 1
	mac = string.format("02:%02x:%02x:%02x:%02x:%02x", math.floor(id / 256), id % 256,
		math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
	return wrk.format("GET", "/boot/ipxe?mac=" .. mac)
end
response = function(status, headers, body)
	local t = body:match("rackpilot%.token=(rpb_[%w_%-]+)")
	if t then tok = t end
end
EOF

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ticks() { awk '{print $14 + $15}' "/proc/$(cat "$DATA/$1.pid")/stat"; }
# keepalive NAME URL LUA: rps and the server's CPU microseconds per request (clock ticks of
# its process over the run / requests)
keepalive() {
	t0=$(ticks "$1")
	res=$(wrkrun "$2" 8 "$3")
	t1=$(ticks "$1")
	reqs=$(awk '/requests in/ {print $1}' "$DATA/wrk.out")
	echo "$res $(echo "$t0 $t1 $reqs $(getconf CLK_TCK)" | awk '{printf "%.1fus/req", ($2-$1)/$4*1e6/$3}')"
}
: > "$DATA/r.txt"
for r in $(seq "$ROUNDS"); do
	echo "keep_plain $(keepalive plain "$PLAIN" "$DATA/get-plain.lua")" >> "$DATA/r.txt"
	echo "keep_tls $(keepalive tls "$TLS" "$DATA/get-tls.lua")" >> "$DATA/r.txt"
	echo "new_plain $(wrkrun "$PLAIN" 8 "$DATA/get-plain.lua" "Connection: close")" >> "$DATA/r.txt"
	echo "new_tls $(wrkrun "$TLS" 8 "$DATA/get-tls.lua" "Connection: close")" >> "$DATA/r.txt"
	echo "boot_plain $(RUN=$r wrkrun "$PLAIN" 4 "$DATA/boot.lua" "" 4)" >> "$DATA/r.txt"
	echo "boot_tls $(RUN=$r wrkrun "$TLS" 4 "$DATA/boot.lua" "" 4)" >> "$DATA/r.txt"
done
m() { awk -v k="$1" '$1 == k {print $2}' "$DATA/r.txt" | median; }
bad=$(grep -c NON-2xx "$DATA/r.txt" || true)
NODES=$(curlx "$TLS" tls "$TLS/v1/nodes?limit=1&fields=name" > /dev/null && echo ok)
DISC=$(curlx "$TLS" tls "$TLS/v1/nodes?limit=1000&fields=provision_state" | grep -o discovered | wc -l)
{
	echo "# bench/tls.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), $NCPU CPUs, ${DUR}s x $ROUNDS rounds, medians"
	echo "# server: rackpilotd on CPU 0, 1 HTTP thread; wrk on CPUs $CL_CPUS; TLS: its own ECDSA P-256 certificate"
	printf 'GET /v1/nodes/{name} keep-alive  plain %s req/s  tls %s req/s  tls/plain %s\n' \
		"$(m keep_plain)" "$(m keep_tls)" "$(echo "$(m keep_tls) $(m keep_plain)" | awk '{printf "%.2f", $1/$2}')"
	printf '  server CPU per request (median)  plain %s us  tls %s us\n' \
		"$(awk '$1 == "keep_plain" {print $5+0}' "$DATA/r.txt" | median)" \
		"$(awk '$1 == "keep_tls" {print $5+0}' "$DATA/r.txt" | median)"
	printf 'new connection per request      plain %s conn/s tls %s handshakes/s  tls/plain %s\n' \
		"$(m new_plain)" "$(m new_tls)" "$(echo "$(m new_tls) $(m new_plain)" | awk '{printf "%.2f", $1/$2}')"
	printf 'bootstrap (script + register)   plain %s pairs/s tls %s pairs/s\n' \
		"$(echo "$(m boot_plain)" | awk '{printf "%.0f", $1/2}')" "$(echo "$(m boot_tls)" | awk '{printf "%.0f", $1/2}')"
	echo "rounds with non-2xx answers: $bad ${NODES:+(server still answering)}; discovered nodes on the TLS server (first 1000): $DISC"
	echo "# raw: name rps p50 p99"
	cat "$DATA/r.txt"
} | tee "$OUT/tls.txt"
