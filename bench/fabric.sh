#!/bin/sh
# Fabric scheduling benchmark (rack acceptance across nodes, docs/acceptance.md "Across nodes:
# fabric and nccl"): a rack of NODES simulated nodes, each a real OpenSSH sshd on its own
# loopback address running the real rackpilot-agent (tests/ssh/sshnode.sh) with the GPU
# server fixture cut to one InfiniBand rail, no cabling plan (so no iperf3 test) and stand-in
# tools that answer at once (tests/integration/fabric-standin.py: ib_write_bw listens, serves
# one client, prints the real output). What is left of a round's time is the scheduling:
# rackpilotd's driver (server/jobs/cross.c), the jobs, SSH and the agent. Measures, per run:
#  - rounds and pairs; the fabric phase's wall time (first pair's started_at to the last
#    pair's finished_at, from the report's pairs)
#  - per round: its wall time (last finished_at - first started_at of its pairs) = overhead,
#    the tools take ~0; per pair: its wall time and that per test
#  - rackpilotd's CPU time (utime+stime, /proc/PID/stat) over the run and over the fabric phase
#  - the sshd sessions' CPU (agents and stand-ins included): the sshd listeners' cutime+cstime,
#    i.e. sessions that ended and were reaped
# The script plays each node's firmware as tests/integration/test_fabric.c does: when a node's
# commission waits for its agent, it fetches /boot/ipxe?mac=..., takes rackpilot.token=... and
# registers the agent (the sshd is started beforehand, outside the measured run).
# Builds nothing: Usage: bench/fabric.sh [RACKPILOTD [AGENT]]
#   (defaults build/rackpilotd build/agent/rackpilot-agent; env NODES=32 ALL_PAIRS=0 PORT=27023
#    KEEP=1 keeps the temp dir). ALL_PAIRS=1 adds an all-pairs run (NODES <= 32 only).
# Results: bench/out/fabric.txt
set -eu
cd "$(dirname "$0")/.."
NODES=${NODES:-32}; ALL_PAIRS=${ALL_PAIRS:-0}
BIN=$(readlink -f "${1:-build/rackpilotd}")
AGENT=$(readlink -f "${2:-build/agent/rackpilot-agent}")
[ -x "$BIN" ] || { echo "fabric bench: no rackpilotd at $BIN (build it first)" >&2; exit 2; }
[ -x "$AGENT" ] || { echo "fabric bench: no rackpilot-agent at $AGENT (build it first)" >&2; exit 2; }
[ "$NODES" -ge 2 ] && [ "$NODES" -le 200 ] || { echo "fabric bench: NODES must be 2..200" >&2; exit 2; }
OUT=bench/out
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/rp-bench-fabric-XXXXXX)
PORT=${PORT:-27023}
FIXTURE="$PWD/tests/fixtures/inventory/gpu-h100-8x"
STANDIN="$PWD/tests/integration/fabric-standin.py"
RACK=fab
SPID=""
cleanup() {
	if [ -n "${KEEP:-}" ]; then echo "kept $TMP (server $SPID)"; return; fi
	for d in "$TMP"/n*; do [ -d "$d" ] && sh tests/ssh/sshnode.sh stop "$d" >/dev/null 2>&1; done
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null
	# Agents and stand-ins left from a cut-short run: only those started with this dir's paths.
	pkill -f "$TMP/n[0-9]*/agent.conf" 2>/dev/null || true
	pkill -f "fabric-standin.py [a-z_-]* $TMP/" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

now_ms() { date +%s%3N; }
api() { curl -sf -H "$AUTH" -H 'Content-Type: application/json' "$@"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Children's CPU of every node's sshd listener: its sessions (agents, stand-ins) once reaped.
child_ticks() {
	for d in "$TMP"/n*; do awk '{print $16 + $17}' "/proc/$(cat "$d/sshd.pid")/stat"; done |
		awk '{s += $1} END {print s + 0}'
}
TCK=$(getconf CLK_TCK)
name_of() { printf 'n%02d' "$1"; }
# The last byte stays 00: sshnode.sh derives the node's other NICs' MACs from it.
mac_of() { printf '02:fb:00:%02x:%02x:00' $(($1 / 256)) $(($1 % 256)); }
addr_of() { echo "127.0.2.$(($1 + 10))"; }

"$BIN" --listen 127.0.0.1:0 --data-dir "$TMP/data" --power-sync-interval 0 --no-access-log \
	>"$TMP/server.out" 2>"$TMP/server.log" &
SPID=$!
for _ in $(seq 100); do grep -q listening "$TMP/server.out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$TMP/server.out")
[ -n "$ADDR" ] || { echo "fabric bench: rackpilotd did not start" >&2; cat "$TMP/server.log" >&2; exit 1; }
AUTH="Authorization: Bearer $(cat "$TMP/data/admin.token")"
URL="http://$ADDR"

# ---- Setup: images, boot profile, rack, class, nodes (fake BMCs), managed --------------------
head -c 1000 /dev/urandom >"$TMP/kernel.bin"
curl -sf -o /dev/null -X PUT -H "$AUTH" --data-binary @"$TMP/kernel.bin" "$URL/v1/images/k?kind=kernel"
curl -sf -o /dev/null -X PUT -H "$AUTH" --data-binary @"$TMP/kernel.bin" "$URL/v1/images/i?kind=initrd"
api -X POST "$URL/v1/boot-profiles" -d '{"name":"default","kernel":"k","initrd":"i"}' >/dev/null
api -X POST "$URL/v1/racks" -d "{\"name\":\"$RACK\"}" >/dev/null
api -X PUT "$URL/v1/node-classes/hgx" \
	-d '{"bom":{"hcas":{"link_layer":"InfiniBand","rate_gbps":400},"fabric":{"envelope_pct":90}}}' >/dev/null
i=0
while [ $i -lt "$NODES" ]; do
	name=$(name_of $i); d="$TMP/$name"; addr=$(addr_of $i)
	api -X POST "$URL/v1/nodes" -d "{\"name\":\"$name\",\"rack\":\"$RACK\",\"u_position\":$((i + 1)),\"u_height\":1,\"node_class\":\"hgx\",\"macs\":[\"$(mac_of $i)\"],\"bmc\":{\"driver\":\"fake\",\"options\":{\"delay_ms\":0}}}" >/dev/null
	api -X PUT "$URL/v1/nodes/$name/provision" -d '{"action":"manage"}' >/dev/null
	# The node's sshd now (a placeholder token; the firmware's token replaces it at boot), one
	# InfiniBand rail (mlx5_0), and stand-in tools first on its agent's PATH.
	mkdir -p "$d/bin"
	sh tests/ssh/sshnode.sh start "$d" "$addr" "$PORT" "$URL" placeholder "$(mac_of $i)" "$AGENT" \
		"$FIXTURE" >/dev/null
	(cd "$d/root/sys/class/infiniband" && rm -rf mlx5_1 mlx5_2 mlx5_3 mlx5_4 mlx5_5 mlx5_6 mlx5_7 mlx5_8)
	for t in ib_write_bw ib_read_bw; do
		printf '#!/bin/sh\nexec python3 %s %s %s "$@"\n' "$STANDIN" "$t" "$d" >"$d/bin/$t"
		chmod 755 "$d/bin/$t"
	done
	printf '{"addr":"%s"}' "$addr" >"$d/standin.json"
	i=$((i + 1))
done
for _ in $(seq 300); do
	m=$(api "$URL/v1/nodes?rack=$RACK&limit=1000" | grep -o '"provision_state":"manageable"' | wc -l)
	[ "$m" -ge "$NODES" ] && break
	sleep 0.1
done
[ "$m" -ge "$NODES" ] || { echo "fabric bench: only $m of $NODES nodes manageable" >&2; exit 1; }

# ---- One acceptance run: play the firmware, wait for the end, keep the report -----------------
# The firmware of node I: fetch the boot script, take its token, register the agent.
boot() {
	d="$TMP/$(name_of "$1")"
	tok=$(curl -sf "$URL/boot/ipxe?mac=$(mac_of "$1")" | grep -o 'rackpilot\.token=[^ ]*' | head -1 | cut -d= -f2)
	[ -n "$tok" ] || { echo "fabric bench: $(name_of "$1") got no ramdisk" >&2; return 1; }
	sed -i "s/^bootstrap_token = .*/bootstrap_token = $tok/" "$d/agent.conf"
	"$AGENT" -c "$d/agent.conf" register >>"$d/agent.log" 2>&1 ||
		{ echo "fabric bench: $(name_of "$1") did not register" >&2; return 1; }
}
waits_for_agent() {
	j=$(api "$URL/v1/nodes/$(name_of "$1")" | grep -o '"provision_job":"[0-9a-f-]*"' | cut -d'"' -f4) || return 1
	[ -n "$j" ] && api "$URL/v1/jobs/$j" | grep -q '"phase":"wait_agent"'
}
# run BODY TAG: the report in $TMP/TAG.json, samples "ms rackpilotd_ticks" in $TMP/TAG.cpu
run() {
	body=$1 tag=$2
	: >"$TMP/$tag.booted"; : >"$TMP/$tag.regs"
	c0=$(cpu_ticks "$SPID"); k0=$(child_ticks); t0=$(now_ms)
	echo "$t0 $c0" >"$TMP/$tag.cpu"
	api -X POST "$URL/v1/racks/$RACK/acceptance" -d "$body" >/dev/null ||
		{ echo "fabric bench: POST acceptance $body failed" >&2; exit 1; }
	nb=0 n=0
	while :; do
		api "$URL/v1/racks/$RACK/acceptance" >"$TMP/$tag.json"
		echo "$(now_ms) $(cpu_ticks "$SPID")" >>"$TMP/$tag.cpu"
		grep -q '"state":"running"' "$TMP/$tag.json" || head -c 300 "$TMP/$tag.json" | grep -q '"state":"queued"' || break
		if [ "$nb" -lt "$NODES" ]; then
			# The nodes whose commission waits for the agent boot together (in parallel, as
			# a rack's firmware would), each registration's time noted.
			BOOTS=""
			for i in $(api "$URL/v1/nodes?rack=$RACK&limit=1000" | grep -o '"name":"n[0-9]*"' | cut -d'"' -f4 | sed 's/^n0*//; s/^$/0/'); do
				if ! grep -qx $i "$TMP/$tag.booted" && waits_for_agent $i; then
					echo $i >>"$TMP/$tag.booted"
					( boot $i && echo "$(now_ms)" >>"$TMP/$tag.regs" ) &
					BOOTS="$BOOTS $!"
					nb=$((nb + 1))
				fi
			done
			for p in $BOOTS; do wait "$p" || { echo "fabric bench: a boot failed" >&2; exit 1; }; done
			sleep 0.2
		else
			sleep 0.5
		fi
		n=$((n + 1))
		[ $n -lt 7200 ] || { echo "fabric bench: the $tag run did not end" >&2; exit 1; }
	done
	t1=$(now_ms); c1=$(cpu_ticks "$SPID")
	# The sessions end as the nodes power off: give the last ones a moment to be reaped.
	sleep 2
	k1=$(child_ticks)
	echo "$((t1 - t0)) $(((c1 - c0) * 1000 / TCK)) $(((k1 - k0) * 1000 / TCK)) $nb" >"$TMP/$tag.totals"
}

# The figures of a run, from its report and samples.
figures() {
	tag=$1 label=$2
	python3 - "$TMP/$tag.json" "$TMP/$tag.cpu" "$TMP/$tag.totals" "$TCK" "$label" "$TMP/$tag.regs" <<'PY'
import json, sys
from datetime import datetime
rep = json.load(open(sys.argv[1]))
samples = [tuple(map(int, l.split())) for l in open(sys.argv[2]) if l.strip()]
wall_ms, cpu_ms, sess_ms, booted = map(int, open(sys.argv[3]).read().split())
tck, label = int(sys.argv[4]), sys.argv[5]
ts = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
pairs = [p for p in rep.get("pairs", []) if p.get("kind") == "fabric"]
done = [p for p in pairs if p.get("started_at") and p.get("finished_at")]
states, tstates, ntests = {}, {}, 0
for p in pairs:
    states[p["state"]] = states.get(p["state"], 0) + 1
    for t in p.get("tests") or []:
        ntests += 1
        tstates[t["state"]] = tstates.get(t["state"], 0) + 1
rounds = sorted({p["round"] for p in pairs})
fmt = lambda d: " ".join("%s %d" % kv for kv in sorted(d.items()))
print("%s: run %s, %d nodes booted; %d rounds, %d pairs (%s), %d tests (%s)" % (
    label, rep.get("state"), booted, len(rounds), len(pairs), fmt(states), ntests, fmt(tstates)))
if not done:
    print("  no pair started and finished: no timings"); sys.exit(0)
f0 = min(ts(p["started_at"]) for p in done); f1 = max(ts(p["finished_at"]) for p in done)
def cpu_at(ms):  # rackpilotd ticks at the sample nearest a time
    return min(samples, key=lambda s: abs(s[0] - ms))[1]
fcpu = (cpu_at(f1 * 1000) - cpu_at(f0 * 1000)) * 1000 // tck
print("  whole run (POST to end, pxe boots included): %d ms wall, rackpilotd CPU %d ms, sshd sessions (agents, stand-ins) CPU %d ms" % (wall_ms, cpu_ms, sess_ms))
print("  fabric phase (first pair started to last finished): %.0f ms wall, rackpilotd CPU ~%d ms (samples every 0.5 s)" % ((f1 - f0) * 1000, fcpu))
regs = sorted(int(l) for l in open(sys.argv[6]) if l.strip())
if regs:
    print("  agents registered (firmware played) over %d ms, first to last; the last registration to the fabric phase's end: %.0f ms" % (regs[-1] - regs[0], f1 * 1000 - regs[-1]))
print("  per round (wall = overhead; the stand-ins take ~0; round 0 waits for the nodes' boots: see start_spread):")
print("    round pairs  start_ms  wall_ms  start_spread_ms  pair_ms(min/median/max)  per_test_ms(median)  gap_ms")
prev = None
for r in rounds:
    rp = [p for p in done if p["round"] == r]
    if not rp:
        print("    %5d  (no pair ran)" % r); continue
    s = min(ts(p["started_at"]) for p in rp); e = max(ts(p["finished_at"]) for p in rp)
    pw = sorted((ts(p["finished_at"]) - ts(p["started_at"])) * 1000 for p in rp)
    pt = sorted(w / max(1, len(p.get("tests") or [])) for w, p in
                zip([(ts(p["finished_at"]) - ts(p["started_at"])) * 1000 for p in rp], rp))
    gap = "" if prev is None else "%.0f" % ((s - prev) * 1000)
    spread = (max(ts(p["started_at"]) for p in rp) - s) * 1000
    print("    %5d %5d  %8.0f  %7.0f  %15.0f  %6.0f / %6.0f / %6.0f  %19.0f  %6s" % (
        r, len(rp), (s - f0) * 1000, (e - s) * 1000, spread, pw[0], pw[len(pw) // 2], pw[-1],
        pt[len(pt) // 2], gap))
    prev = e
# Where a pair's time goes (its tests' own stamps, ms since the epoch): pair start to the
# server side's job, server start to the client's (listening seen), client start to the end.
a, b, c = [], [], []
for p in done:
    for t in p.get("tests") or []:
        if isinstance(t.get("started"), int) and isinstance(t.get("client_started"), int):
            a.append(t["started"] - ts(p["started_at"]) * 1000)
            b.append(t["client_started"] - t["started"])
            c.append(ts(p["finished_at"]) * 1000 - t["client_started"])
med = lambda v: sorted(v)[len(v) // 2] if v else float("nan")
if a:
    print("  a test's time (medians, single-test pairs): pair start to server job %.0f ms, server start to client start (listen seen) %.0f ms, client start to pair finished %.0f ms" % (med(a), med(b), med(c)))
allw = sorted((ts(p["finished_at"]) - ts(p["started_at"])) * 1000 for p in done)
print("  per pair over the run: wall min %.0f / median %.0f / max %.0f ms; %.0f ms per test (median)" % (
    allw[0], allw[len(allw) // 2], allw[-1],
    sorted(((ts(p["finished_at"]) - ts(p["started_at"])) * 1000) / max(1, len(p.get("tests") or [])) for p in done)[len(done) // 2]))
PY
}

# Figures go out as each run ends (an all-pairs run cut short keeps the ring's).
{
	echo "fabric benchmark $(date -u +%FT%TZ), $(nproc) CPUs, $NODES nodes, 1 InfiniBand rail each, no cabling (no iperf3), instant stand-ins"
	echo "rackpilotd $BIN, agent $AGENT"
} | tee "$OUT/fabric.txt"
run '{"checks":["pxe","fabric"],"fabric":{"duration_s":1}}' ring
figures ring "ring" | tee -a "$OUT/fabric.txt"
if [ "$ALL_PAIRS" = 1 ] && [ "$NODES" -le 32 ]; then
	# A POST on the same rack re-runs only what did not pass (nothing): the nodes move to a
	# fresh rack, same U positions, for a run of their own.
	RACK=fab2
	api -X POST "$URL/v1/racks" -d "{\"name\":\"$RACK\"}" >/dev/null
	i=0
	while [ $i -lt "$NODES" ]; do
		api -X PATCH "$URL/v1/nodes/$(name_of $i)" -d "{\"rack\":\"$RACK\"}" >/dev/null ||
			{ echo "fabric bench: moving $(name_of $i) to $RACK failed" >&2; exit 1; }
		i=$((i + 1))
	done
	run '{"checks":["pxe","fabric"],"fabric":{"duration_s":1,"all_pairs":true}}' all
	figures all "all pairs" | tee -a "$OUT/fabric.txt"
else
	echo "all pairs: not run (ALL_PAIRS=$ALL_PAIRS, NODES=$NODES; it runs with ALL_PAIRS=1 and NODES <= 32)" | tee -a "$OUT/fabric.txt"
fi
echo "rackpilotd peak RSS: $(($(awk '/^VmHWM/ {print $2}' "/proc/$SPID/status") / 1024)) MiB" | tee -a "$OUT/fabric.txt"
