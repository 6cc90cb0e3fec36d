#!/bin/sh
# Boot-service benchmark (issue 5):
#   - GET /boot/ipxe requests per second with wrk: a ready node (local-disk script, a read), a
#     node being commissioned (its live bootstrap token handed out again: a read and a key
#     derivation), and an unknown MAC past the discovery cap (the flood case); the per-address
#     rate limit is off here (boot_rate = 0): it is what a real boot network gets, not the
#     code path measured
#   - 100 concurrent clients each downloading a 64 MB initrd once (curl, 100 processes), and wrk
#     with 100 connections re-downloading it: aggregate throughput of rackpilotd's
#     /boot/images/ against nginx (sendfile on) serving the same file, in one run
# Servers run on CPU 0 with one thread / worker, clients on the other CPUs.
# Usage: bench/boot.sh [SECONDS_PER_WRK_RUN] (default 10). Results: bench/out/boot.txt
# The third figure of the issue, commission time of a QEMU VM against its bare PXE-boot time,
# comes from tests/e2e/e2e.sh (it prints both).
set -eu
cd "$(dirname "$0")/.."
DUR=${1:-10}
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
for p in wrk nginx; do
	command -v "$p" > /dev/null && continue
	pkg=$p
	[ "$p" = nginx ] && pkg=nginx-light
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "$pkg" > /dev/null
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd > /dev/null
BIN="$OUT/build/rackpilotd"
DATA=$(mktemp -d /tmp/rp-bench-XXXXXX)
chmod 755 "$DATA"
NCPU=$(nproc)
CL_CPUS="1-$((NCPU - 1))"
[ "$NCPU" -ge 2 ] || CL_CPUS=0
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2> /dev/null || true; done
	[ -s "$DATA/nginx.pid" ] && kill "$(cat "$DATA/nginx.pid")" 2> /dev/null
	rm -rf "$DATA"
}
trap cleanup EXIT INT TERM

cat > "$DATA/rackpilotd.conf" << EOF
[server]
power_sync_interval = 0
discovery_max_tokens = 64
discovery_max_per_source = 0
boot_rate = 0
access_log = false
EOF
taskset -c 0 "$BIN" -c "$DATA/rackpilotd.conf" --listen 127.0.0.1:0 --data-dir "$DATA/rp" \
	--threads 1 > "$DATA/out" 2> "$OUT/boot-server.log" &
PIDS=$!
for _ in $(seq 50); do grep -q listening "$DATA/out" 2> /dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$DATA/out")
AUTH="Authorization: Bearer $(cat "$DATA/rp/admin.token")"
api() { curl -fsS -H "$AUTH" -H 'Content-Type: application/json' "$@"; }

# The image store: a 64 MB initrd, a kernel, a profile; a ready node and a commissioning one.
head -c 67108864 /dev/urandom > "$DATA/initrd.img"
head -c 8000000 /dev/urandom > "$DATA/kernel.img"
api -T "$DATA/initrd.img" "http://$ADDR/v1/images/initrd?kind=initrd" > /dev/null
api -T "$DATA/kernel.img" "http://$ADDR/v1/images/kernel?kind=kernel" > /dev/null
api -d '{"name":"default","kernel":"kernel","initrd":"initrd"}' "http://$ADDR/v1/boot-profiles" > /dev/null
# Commissioning a node needs a BMC: the fake driver answers at once.
api -d '{"name":"ready1","macs":["02:be:00:00:00:01"]}' "http://$ADDR/v1/nodes" > /dev/null
api -d '{"name":"comm1","macs":["02:be:00:00:00:02"],"bmc":{"driver":"fake"}}' "http://$ADDR/v1/nodes" > /dev/null
api -X PUT -d '{"action":"manage"}' "http://$ADDR/v1/nodes/comm1/provision" > /dev/null
for _ in $(seq 100); do
	api "http://$ADDR/v1/nodes/comm1" | grep -q '"provision_state": *"manageable"' && break
	sleep 0.1
done
api -X PUT -d '{"action":"commission","timeout_s":3600}' "http://$ADDR/v1/nodes/comm1/provision" > /dev/null
for _ in $(seq 100); do
	curl -fsS "http://$ADDR/boot/ipxe?mac=02:be:00:00:00:02" | grep -q rackpilot.token= && break
	sleep 0.1
done
curl -fsS "http://$ADDR/boot/ipxe?mac=02:be:00:00:00:02" | grep -q rackpilot.token= ||
	{ echo "comm1 does not get the ramdisk" >&2; exit 1; }

wrkrun() { # url conns [lua script] -> "rps p50 p99 [NON-2xx]"
	taskset -c "$CL_CPUS" wrk -t1 -c"$2" -d"${DUR}s" --latency ${3:+-s "$3"} "$1" > "$DATA/wrk.out"
	awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$4}
		END {printf "%.0f %s %s%s\n", rps, p50, p99, (bad ? " NON-2xx:" bad : "")}' "$DATA/wrk.out"
}
wrkmb() { # url conns -> "MB/s"
	taskset -c "$CL_CPUS" wrk -t1 -c"$2" -d"${DUR}s" "$1" > "$DATA/wrk.out"
	awk '/Transfer\/sec/ {v=$2; u=substr(v, length(v)-1); n=v+0;
		if (u=="GB") n*=1024; if (u=="KB") n/=1024; printf "%.0f\n", n}' "$DATA/wrk.out"
}
# 100 curl processes at once, each fetching the file once: "seconds MB/s ok"
curl100() { # url
	s=$(date +%s.%N)
	# xargs waits for the curls only (a bare wait would wait for rackpilotd too)
	seq 100 | xargs -P 100 -I{} taskset -c "$CL_CPUS" \
		curl -fsS -o /dev/null -w '%{size_download}\n' "$1" >> "$DATA/c100.out"
	e=$(date +%s.%N)
	ok=$(grep -c '^67108864$' "$DATA/c100.out")
	: > "$DATA/c100.out"
	echo "$s $e $ok" | awk '{t=$2-$1; printf "%.2f %.0f %d\n", t, 100*64/t, $3}'
}

READY=$(wrkrun "http://$ADDR/boot/ipxe?mac=02:be:00:00:00:01" 8)
COMM=$(wrkrun "http://$ADDR/boot/ipxe?mac=02:be:00:00:00:02" 8)
# One unknown MAC asking again and again (the same live token each time);
# then a flood of distinct unknown MACs: the first 64 get discovery tokens, the rest are told
# to boot locally (no write).
cat > "$DATA/flood.lua" << 'EOF'
local n = 0
request = function()
	n = n + 1
	return wrk.format(nil, string.format("/boot/ipxe?mac=02:ff:%02x:%02x:%02x:%02x",
		math.random(0, 255), math.random(0, 255), math.random(0, 255), n % 256))
end
EOF
ONEMAC=$(wrkrun "http://$ADDR/boot/ipxe?mac=02:fe:00:00:00:01" 8)
FLOOD=$(wrkrun "http://$ADDR" 64 "$DATA/flood.lua")
TOKENS=$(sqlite3 "$DATA/rp/rackpilot.db" "SELECT count(DISTINCT mac) FROM bootstrap_tokens WHERE node_id IS NULL AND mac IS NOT NULL AND used_at IS NULL AND revoked_at IS NULL" 2> /dev/null || echo "?")

# nginx: one worker on CPU 0, sendfile, the same file.
mkdir -p "$DATA/www/boot/images"
# A copy: the store's file is private to rackpilotd, nginx's worker runs as www-data.
cp "$DATA/rp/images/initrd" "$DATA/www/boot/images/initrd"
chmod -R a+rX "$DATA/www"
NPORT=$((20000 + $$ % 10000))
cat > "$DATA/nginx.conf" << EOF
daemon on;
worker_processes 1;
worker_cpu_affinity 1;
pid $DATA/nginx.pid;
error_log $DATA/nginx.err;
events { worker_connections 1024; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	keepalive_requests 100000;
	server { listen 127.0.0.1:$NPORT; root $DATA/www; }
}
EOF
"$NGINX" -c "$DATA/nginx.conf" -p "$DATA"
sleep 0.3
RP_URL="http://$ADDR/boot/images/initrd"
NG_URL="http://127.0.0.1:$NPORT/boot/images/initrd"
cmp -s "$DATA/initrd.img" "$DATA/www/boot/images/initrd" || { echo "nginx file differs" >&2; exit 1; }
# Alternate the two servers, 3 rounds, and keep every run.
: > "$DATA/rp.c"
: > "$DATA/ng.c"
: > "$DATA/rp.w"
: > "$DATA/ng.w"
for _ in 1 2 3; do
	curl100 "$RP_URL" >> "$DATA/rp.c"
	curl100 "$NG_URL" >> "$DATA/ng.c"
	wrkmb "$RP_URL" 100 >> "$DATA/rp.w"
	wrkmb "$NG_URL" 100 >> "$DATA/ng.w"
done
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
RP_C=$(cut -d' ' -f2 "$DATA/rp.c" | med)
NG_C=$(cut -d' ' -f2 "$DATA/ng.c" | med)
RP_W=$(med < "$DATA/rp.w")
NG_W=$(med < "$DATA/ng.w")
RSS=$(awk '/VmHWM/ {print $2}' "/proc/$PIDS/status")
{
	echo "rackpilot boot benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ), $NCPU CPUs; servers pinned to CPU 0 (1 thread / 1 worker), clients to CPU $CL_CPUS"
	echo "GET /boot/ipxe, wrk ${DUR}s (req/s p50 p99):"
	echo "  ready node (local-disk script):            $READY"
	echo "  commissioning node (a new token each time): $COMM"
	echo "  unknown-MAC flood, random MACs, 64 conns:  $FLOOD   live discovery tokens after: $TOKENS (cap 64)"
	echo "  one unknown MAC again and again:           $ONEMAC"
	echo "64 MB initrd, 100 concurrent curl downloads (s MB/s complete), 3 rounds:"
	echo "  rackpilotd: $(paste -sd';' "$DATA/rp.c")   median $RP_C MB/s"
	echo "  nginx:      $(paste -sd';' "$DATA/ng.c")   median $NG_C MB/s"
	echo "64 MB initrd, wrk 100 connections ${DUR}s (MB/s): rackpilotd $(paste -sd, "$DATA/rp.w") (median $RP_W), nginx $(paste -sd, "$DATA/ng.w") (median $NG_W)"
	echo "  ratio rackpilotd/nginx: curl $(echo "$RP_C $NG_C" | awk '{printf "%.2f", $1/$2}'), wrk $(echo "$RP_W $NG_W" | awk '{printf "%.2f", $1/$2}')"
	echo "rackpilotd peak RSS: $((RSS / 1024)) MiB"
} | tee "$OUT/boot.txt"
