#!/bin/sh
# Steps benchmark (agent issue): N simulated nodes, each a real OpenSSH sshd on its own loopback
# address running the real rackpilot-agent (tests/ssh/sshnode.sh). Measures
#  1. registration of N agents (bootstrap token, inventory, host key pin): wall time
#  2. a 5-step plan pushed to all N at once (one POST /v1/actions/steps): wall time from the
#     request to every job ended, rackpilotd's CPU time over the run, its peak RSS
#  3. the agent: binary size, and its peak RSS while running steps (sampled every 20 ms)
# Usage: bench/steps.sh   (env N=50 ROUNDS=3). Results: bench/out/steps.txt
set -eu
cd "$(dirname "$0")/.."
N=${N:-50}; ROUNDS=${ROUNDS:-3}
OUT=bench/out
mkdir -p "$OUT"
sh .ci/deps
cmake -S . -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$OUT/build" -j "$(nproc)" --target rackpilotd rackpilot-agent >/dev/null
BIN="$PWD/$OUT/build/rackpilotd"
AGENT="$PWD/$OUT/build/agent/rackpilot-agent"
TMP=$(mktemp -d /tmp/rp-bench-steps-XXXXXX)
PORT=${PORT:-27022}
SPID=""
cleanup() {
	if [ -n "${KEEP:-}" ]; then echo "kept $TMP (server $SPID)"; return; fi
	for d in "$TMP"/n*; do [ -d "$d" ] && sh tests/ssh/sshnode.sh stop "$d" >/dev/null 2>&1; done
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null
	pkill -f "$TMP/n[0-9]*/agent.conf" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

now_ms() { date +%s%3N; }
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

"$BIN" --listen 127.0.0.1:0 --data-dir "$TMP/data" --power-sync-interval 0 --no-access-log \
	>"$TMP/server.out" 2>"$TMP/server.log" &
SPID=$!
for _ in $(seq 100); do grep -q listening "$TMP/server.out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$TMP/server.out")
AUTH="Authorization: Bearer $(cat "$TMP/data/admin.token")"

# ---- 1. Nodes: enroll, start sshd, register -------------------------------------------------
i=0
while [ $i -lt "$N" ]; do
	name=$(printf 'n%03d' $i)
	mac=$(printf '02:62:00:00:%02x:%02x' $((i / 256)) $((i % 256)))
	api -X POST "http://$ADDR/v1/nodes" -d "{\"name\":\"$name\",\"macs\":[\"$mac\"],\"tags\":[\"bench\"]}" >/dev/null
	tok=$(api -X POST "http://$ADDR/v1/bootstrap-tokens" -d "{\"node\":\"$name\"}" |
		sed 's/.*"token":"\([^"]*\)".*/\1/')
	sh tests/ssh/sshnode.sh start "$TMP/$name" "127.0.2.$((i + 10))" "$PORT" "http://$ADDR" \
		"$tok" "$mac" "$AGENT" >/dev/null
	i=$((i + 1))
done
t0=$(now_ms)
REGS=""
for d in "$TMP"/n*; do
	"$AGENT" -c "$d/agent.conf" register >"$d/register.log" 2>&1 &
	REGS="$REGS $!"
done
for p in $REGS; do wait "$p" || true; done
t1=$(now_ms)
REG_MS=$((t1 - t0))
registered=$(api "http://$ADDR/v1/nodes?tag=bench&limit=1000" | grep -o '"registered_at":"' | wc -l)

# ---- 2. A 5-step plan on every node at once -------------------------------------------------
# What a bring-up plan looks like: look around, write a config file, take an inventory,
# check a 16 MiB download's worth of hashing, report done.
PLAN='{"selector":{"tag":"bench"},"steps":[
 {"id":"uname","type":"shell","command":"uname -a; id -u"},
 {"id":"conf","type":"file","path":"/tmp/RPDIR/rackpilot.conf","content":"managed = true\n","mode":"0644"},
 {"id":"inv","type":"inventory"},
 {"id":"hash","type":"shell","command":"head -c 16777216 /dev/zero | sha256sum"},
 {"id":"done","type":"shell","command":"echo done"}]}'
PLAN=$(printf '%s' "$PLAN" | sed "s|/tmp/RPDIR|$TMP|")
results="$TMP/results"
: >"$results"
r=0
while [ $r -lt "$ROUNDS" ]; do
	# Peak agent RSS: sample every agent process while the round runs.
	( while :; do
		for p in $(pgrep -f "$TMP/n[0-9]*/agent.conf [r]un-steps" 2>/dev/null); do
			awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null
		done
		sleep 0.02
	done ) >"$TMP/agent-rss.$r" 2>/dev/null &
	SAMPLER=$!
	c0=$(cpu_ticks "$SPID")
	t0=$(now_ms)
	batch=$(api -X POST "http://$ADDR/v1/actions/steps" -d "$PLAN" | head -c 50 | sed 's/^{"id":"\([^"]*\)".*/\1/')
	[ ${#batch} -eq 36 ] || { echo "steps bench: POST /v1/actions/steps failed" >&2; exit 1; }
	while ! api "http://$ADDR/v1/batches/$batch" | grep -q '"done":true'; do sleep 0.01; done
	t1=$(now_ms)
	c1=$(cpu_ticks "$SPID")
	kill "$SAMPLER" 2>/dev/null || true
	wait "$SAMPLER" 2>/dev/null || true
	ok=$(api "http://$ADDR/v1/batches/$batch" | sed 's/.*"succeeded":\([0-9]*\).*/\1/')
	agent_kb=$(sort -n "$TMP/agent-rss.$r" | tail -1)
	echo "$((t1 - t0)) $(((c1 - c0) * 1000 / $(getconf CLK_TCK))) $ok ${agent_kb:-0}" >>"$results"
	r=$((r + 1))
done
# Where the time of the last round went: the steps themselves (as the agents timed them),
# summed over nodes, and the slowest node's share.
api "http://$ADDR/v1/jobs?batch=$batch&limit=1000" | grep -o '"id":"[0-9a-f-]\{36\}","type"' |
	cut -d'"' -f4 >"$TMP/jobs"
STEP_MS=0; NODE_MAX=0
while read -r j; do
	t=$(api "http://$ADDR/v1/jobs/$j" | grep -o '"duration_ms":[0-9]*' | cut -d: -f2 |
		awk '{s += $1} END {print s + 0}')
	STEP_MS=$((STEP_MS + t))
	[ "$t" -gt "$NODE_MAX" ] && NODE_MAX=$t
done <"$TMP/jobs"
# The floor on this machine: the same N sshd instances, N OpenSSH clients at once, each
# running nothing (the forced command refuses anything but the agent at once).
ssh-keygen -q -t ed25519 -N '' -f "$TMP/client"
for d in "$TMP"/n*; do cat "$TMP/client.pub" >>"$d/authorized_keys"; done
: >"$TMP/floor"
r=0
while [ $r -lt "$ROUNDS" ]; do
	t0=$(now_ms)
	SSHS=""
	i=0
	while [ $i -lt "$N" ]; do
		ssh -q -i "$TMP/client" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
			-o BatchMode=yes -p "$PORT" "root@127.0.2.$((i + 10))" true >/dev/null 2>&1 &
		SSHS="$SSHS $!"
		i=$((i + 1))
	done
	for p in $SSHS; do wait "$p" || true; done
	echo $(($(now_ms) - t0)) >>"$TMP/floor"
	r=$((r + 1))
done
FLOOR=$(median <"$TMP/floor")
WALL=$(cut -d' ' -f1 "$results" | median)
CPU=$(cut -d' ' -f2 "$results" | median)
OK=$(cut -d' ' -f3 "$results" | sort -n | head -1)
AGENT_RSS=$(cut -d' ' -f4 "$results" | sort -n | tail -1)
HWM=$(hwm_kb "$SPID")
SIZE=$(stat -c %s "$AGENT")
STRIPPED=$(strip -o "$TMP/agent.stripped" "$AGENT" && stat -c %s "$TMP/agent.stripped")

{
	echo "steps benchmark $(date -u +%FT%TZ), $(nproc) CPUs, N=$N nodes, $ROUNDS rounds (medians)"
	echo "registration of $N agents (parallel):  ${REG_MS} ms  ($registered registered)"
	echo "5-step plan on $N nodes, one request:  wall ${WALL} ms, rackpilotd CPU ${CPU} ms, $OK/$N succeeded in the worst round"
	echo "  floor: $N parallel OpenSSH sessions running nothing, same sshds: ${FLOOR} ms (plan/floor $(awk -v a="$WALL" -v b="$FLOOR" 'BEGIN {printf "%.2f", a / b}'))"
	echo "  of which step run time (agent-timed): ${STEP_MS} ms summed over nodes, ${NODE_MAX} ms on the slowest node (last round)"
	echo "rackpilotd peak RSS:                   $((HWM / 1024)) MiB"
	echo "rounds (wall_ms cpu_ms succeeded agent_rss_kb):"
	sed 's/^/  /' "$results"
	echo "rackpilot-agent binary:                $SIZE bytes ($STRIPPED stripped)"
	echo "rackpilot-agent peak RSS running steps: ${AGENT_RSS} KiB"
} | tee "$OUT/steps.txt"
