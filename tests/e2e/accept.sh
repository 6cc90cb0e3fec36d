#!/bin/bash
# accept.sh - rack acceptance end to end: a QEMU rack of 3 VMs behind ipmi_sim BMCs (rack.sh)
# with two deliberate defects, accepted through the real rackpilotd API only.
#
#   accept.sh         (as root; exit 0 pass, 77 cannot run here, anything else fail)
#
# The rig is e2e.sh's (rack.sh, lib.sh), plus lldpd on the bridge's taps as the top-of-rack
# switch "leaf-e2e" (tapN = port Ethernet1/N) and lldpd in the agent ramdisk
# (agent-initrd-lldp), so the agent's inventory (lldpctl -f json) names the switch port each
# VM is cabled to. The manifest (POST /v1/import) declares a rack r-e2e, the 3 nodes in it, the
# class e2e-vm whose BOM says 512 MiB (memory.total_gib 0.5, 20 % tolerance: the kernel's
# MemTotal of a VM is 80-100 % of -m and the ramdisk has no dmidecode) and the cabling plan.
# The defects:
#   - e2e-vm3 runs with -m 768 (E2E_VM_MEM_3): its inventory check must fail on memory;
#   - the plan puts e2e-vm2's eth0 on Ethernet1/7, but it is on Ethernet1/2: its links check
#     must fail naming the interface and both ports.
#   - e2e-vm1's tap is throttled to THROTTLE_MBIT (5) Mbit/s in both directions for the fabric
#     check's iperf3 traffic (TCP ports 5200-5215; tc: htb on the tap's egress, traffic to the VM, and
#     its ingress redirected to an ifb shaped by tbf, traffic from the VM): its fabric check must fail, the two pairs
#     it is in failed with their figures below the class's least acceptable rate, and the
#     other two nodes' fabric checks pass, explained by e2e-vm1. (Port 5201 only: the whole tap
#     at 5 Mbit/s would make vm1's PXE boot fetch the ~29 MB agent-initrd-lldp for ~50 s.)
#     e2e-vm1 because vm2 and vm3 already carry a defect each.
# Then: manage the nodes, POST /v1/racks/r-e2e/acceptance (every check: the body names none)
# with a burn-in recipe (one step that passes, one that exits 77 because stress-ng is absent)
# and a 3 s fabric test per pair (iperf3 from the Debian packages build-images.sh puts into
# agent-initrd-lldp), wait for the run, and check the report: the run failed, exactly those
# three checks failed with their evidence, every other check of every node passed or was
# skipped with a reason (nccl: no all_reduce_perf), the fabric pairs are the ring of 3 in 3
# rounds. The CSV and the fabric pairs' figures are printed; the HTML report is kept as
# E2E_ARTIFACTS/acceptance-report.html (default BUILD/e2e-artifacts).
#
# Environment: as e2e.sh (RACKPILOTD, AGENT, E2E_IMAGES, E2E_CACHE, E2E_WORK, E2E_KEEP,
# E2E_TIMEOUT, E2E_DEADLINE), and E2E_ARTIFACTS.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname -- "$0")/lib.sh"

preflight lldpd lldpcli
LIMIT=${E2E_TIMEOUT:-300}
RACK=r-e2e
CLASS=e2e-vm
SWITCH=leaf-e2e
VM_MEM=512
BAD_MEM=768 # e2e-vm3
BAD_PORT=Ethernet1/7 # the plan's port for e2e-vm2 (it is on Ethernet1/2)
SLOW_VM=1            # e2e-vm1: its tap throttled for the fabric check's traffic
THROTTLE_MBIT=5
# The fabric check's iperf3 ports: 5201 + the server's index in the run (server/jobs/cross.c),
# 5201-5203 here; the throttle matches 5200-5215 (a u32 value/mask)
IPERF_PORT=5200 IPERF_MASK=0xfff0
# The class's fabric line rate and envelope: least acceptable = ETH_GBPS * ENVELOPE_PCT / 100
ETH_GBPS=1
ENVELOPE_PCT=5
ARTIFACTS=${E2E_ARTIFACTS:-$E2E_BUILD/e2e-artifacts}

phase "build images (cached)"
rc=0
"$E2E_DIR/build-images.sh" "$E2E_IMAGES" "$E2E_CACHE" || rc=$?
[ "$rc" = 3 ] && skip "no kernel package (apt-get download failed and $E2E_CACHE has none)"
[ "$rc" = 0 ] || fail "build-images.sh failed (exit $rc)"
[ -f "$E2E_IMAGES/agent-initrd-lldp" ] || fail "build-images.sh made no agent-initrd-lldp"
grep '^accept_debs=.*iperf3' "$E2E_IMAGES/BUILDINFO" > /dev/null ||
	missing "agent-initrd-lldp has no iperf3 (build-images.sh could not apt-get download iperf3 libiperf0 libsctp1)"
command -v tc > /dev/null || missing "missing tc; apt-get install iproute2"

phase "rack up (3 VMs, switch $SWITCH)"
new_work rp-accept
E2E_VMS=3 E2E_PORT=8080 E2E_VM_MEM=$VM_MEM E2E_VM_MEM_3=$BAD_MEM E2E_LLDP_SWITCH=$SWITCH \
	"$E2E_DIR/rack.sh" up
load_rack

# e2e-vm1's link, slow for the fabric check's iperf3 flows only (TCP ports 5200-5215 either way),
# so that its PXE boot and SSH stay at full speed. Traffic to the VM (the tap's egress): an htb
# class at THROTTLE_MBIT with a short pfifo (iperf3's control connection is then not stuck
# behind seconds of data). Traffic from the VM (the tap's ingress): an ingress qdisc whose u32
# filters redirect those flows to an ifb device shaped by tbf at the same rate. (Not a police
# filter: kernels without CONFIG_NET_ACT_POLICE, this one among them, refuse it.) Removed
# again at the exit; the namespace's deletion would take tap and ifb with it anyway.
vm "$SLOW_VM"
SLOW_TAP=$TAP SLOW_NAME=$NAME SLOW_IFB=ifb$SLOW_VM
unthrottle() {
	nsx tc qdisc del dev "$SLOW_TAP" root 2> /dev/null
	nsx tc qdisc del dev "$SLOW_TAP" ingress 2> /dev/null
	nsx ip link del "$SLOW_IFB" 2> /dev/null
	:
}
trap 'rc=$?; set +e; unthrottle; (exit $rc); on_exit' EXIT
throttle() { # ARGS...: a command of the throttle in the namespace; fail on error
	nsx "$@" >> "$W/tc.log" 2>&1 || fail "could not throttle $SLOW_TAP: $*: $(tail -n 3 "$W/tc.log")"
}
throttle ip link add "$SLOW_IFB" type ifb
throttle ip link set "$SLOW_IFB" up
throttle tc qdisc add dev "$SLOW_IFB" root tbf rate "${THROTTLE_MBIT}mbit" burst 16k latency 50ms
throttle tc qdisc add dev "$SLOW_TAP" root handle 1: htb default 10
throttle tc class add dev "$SLOW_TAP" parent 1: classid 1:10 htb rate 10gbit quantum 60000
throttle tc class add dev "$SLOW_TAP" parent 1: classid 1:20 htb rate "${THROTTLE_MBIT}mbit" ceil "${THROTTLE_MBIT}mbit"
throttle tc qdisc add dev "$SLOW_TAP" parent 1:20 handle 20: pfifo limit 20
throttle tc qdisc add dev "$SLOW_TAP" handle ffff: ingress
for dir in sport dport; do
	throttle tc filter add dev "$SLOW_TAP" parent 1: protocol ip prio 1 u32 \
		match ip protocol 6 0xff match ip "$dir" "$IPERF_PORT" "$IPERF_MASK" flowid 1:20
	throttle tc filter add dev "$SLOW_TAP" parent ffff: protocol ip prio 1 u32 \
		match ip protocol 6 0xff match ip "$dir" "$IPERF_PORT" "$IPERF_MASK" \
		action mirred egress redirect dev "$SLOW_IFB"
done
say "$SLOW_NAME ($SLOW_TAP): TCP ports $IPERF_PORT-$((IPERF_PORT + 15)) throttled to $THROTTLE_MBIT Mbit/s both ways (egress htb; ingress via $SLOW_IFB, tbf)"

rackpilotd_conf "$W/rackpilotd.conf"
start_rackpilotd "$W/rackpilotd.conf"

phase "images, boot profile, recipes, manifest"
upload agent-kernel kernel "$E2E_IMAGES/vmlinuz"
upload agent-initrd initrd "$E2E_IMAGES/agent-initrd-lldp"
api_expect 201 POST /v1/boot-profiles '{"name":"default","kernel":"agent-kernel",
	"initrd":"agent-initrd","cmdline":"console=ttyS0","description":"e2e agent ramdisk + lldpd"}' > /dev/null
# The commission plan (recipe "commission" replaces the built-in inventory step): wait until
# lldpd has heard the switch (it sends every second; lldpd in the ramdisk starts with the NIC,
# so this is normally at once; at most 30 s), then the inventory. Only a wait: what the
# inventory reports is lldpctl's own output. ($(...) runs on the node.)
# shellcheck disable=SC2016
api_expect 201 POST /v1/recipes '{"name":"commission","steps":[
	{"id":"lldp-wait","type":"shell","timeout_s":60,
	 "command":"for i in $(seq 30); do lldpctl -f keyvalue | grep chassis.name && exit 0; sleep 1; done; echo no LLDP neighbour after 30 s"},
	{"id":"inventory","type":"inventory"}]}' > /dev/null
# Burn-in: a step that passes, and one whose tool the ramdisk lacks (exit 77: skipped, with why)
api_expect 201 POST /v1/recipes '{"name":"burn-e2e","steps":[
	{"id":"meminfo","type":"shell","timeout_s":60,"command":"head -n 1 /proc/meminfo; echo burn-ok"},
	{"id":"stress","type":"shell","timeout_s":60,
	 "command":"command -v stress-ng || { echo stress-ng is not installed; exit 77; }"}]}' > /dev/null

NODES=()
nodes='' cabling=''
for i in 1 2 3; do
	vm "$i"
	NODES+=("$NAME")
	port=Ethernet1/$i
	[ "$i" = 2 ] && port=$BAD_PORT
	nodes+="${nodes:+,}{\"name\":\"$NAME\",\"rack\":\"$RACK\",\"u_position\":$((i * 2)),
		\"node_class\":\"$CLASS\",\"macs\":[\"$MAC\"],\"serial\":\"$SERIAL\",
		\"system_uuid\":\"$UUID\",\"bmc\":$(bmc_json "$i")}"
	cabling+="${cabling:+,}{\"node\":\"$NAME\",\"interface\":\"eth0\",\"switch\":\"$SWITCH\",\"port\":\"$port\"}"
done
api_expect 200,201 POST /v1/import "{\"racks\":[{\"name\":\"$RACK\",\"height_u\":42}],
	\"nodes\":[$nodes],
	\"classes\":[{\"name\":\"$CLASS\",\"description\":\"e2e VM, $VM_MEM MiB\",
		\"bom\":{\"memory\":{\"total_gib\":0.5,\"tolerance_pct\":20},\"cpu\":{\"sockets\":1},
		\"disks\":{\"count\":1},\"nics\":{\"count\":1},
		\"fabric\":{\"ethernet_gbps\":$ETH_GBPS,\"envelope_pct\":$ENVELOPE_PCT}}}],
	\"cabling\":[$cabling]}" > "$W/import.json"
say "imported rack $RACK: ${NODES[*]}, class $CLASS, 3 cabling entries"

phase "manage (BMC verify)"
for node in "${NODES[@]}"; do provision "$node" '{"action":"manage"}' > /dev/null; done
wait_states manageable "${NODES[@]}"

phase "acceptance run"
# every check (the body names none), fabric included: 3 s of iperf3 per pair
api_expect 202 POST "/v1/racks/$RACK/acceptance" \
	'{"burn_in":{"recipes":["burn-e2e"]},"fabric":{"duration_s":3}}' > "$W/run.json"
run_ended() {
	api GET "/v1/racks/$RACK/acceptance"
	[ "$API_STATUS" = 200 ] || return 1
	case $(jget .state "$API_BODY") in passed | failed) cp "$API_BODY" "$W/report.json" ;; *) return 1 ;; esac
}
wait_for $((LIMIT * 2)) "the acceptance run ended" run_ended
# what the throttle did (sent and dropped), then off
echo "---- the throttle: to $SLOW_NAME ($SLOW_TAP egress, class 1:20), from it ($SLOW_IFB)"
{ nsx tc -s class show dev "$SLOW_TAP" classid 1:20; nsx tc -s qdisc show dev "$SLOW_IFB"; } | grep -E '^ *Sent' || :
unthrottle

phase "the report"
api_expect 200 GET "/v1/racks/$RACK/acceptance?format=csv" > "$W/report.csv"
echo "---- report (CSV)"
cat "$W/report.csv"
mkdir -p "$ARTIFACTS"
api_expect 200 GET "/v1/racks/$RACK/acceptance?format=html" > "$ARTIFACTS/acceptance-report.html"
cp "$W/report.json" "$ARTIFACTS/acceptance-report.json"
say "HTML report: $ARTIFACTS/acceptance-report.html"
# The run failed; e2e-vm3's inventory (memory) and e2e-vm2's links (cabling) failed, with
# their findings; nothing else failed and every skip says why.
python3 - "$W/report.json" "$VM_MEM" "$BAD_MEM" "$SWITCH" "$BAD_PORT" "$SLOW_NAME" "$ETH_GBPS" "$ENVELOPE_PCT" << 'EOF' || fail "the report is not what the rack is"
import json, re, sys
rep = json.load(open(sys.argv[1]))
vm_mem, bad_mem, switch, bad_port = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
slow, eth_gbps, env_pct = sys.argv[6], float(sys.argv[7]), float(sys.argv[8])
nodes = ("e2e-vm1", "e2e-vm2", "e2e-vm3")
bad = []
def check(ok, what):
    if not ok:
        bad.append(what)
check(rep["state"] == "failed", "run state %s, want failed" % rep["state"])
res = {(r["node"], r["check"]): r for r in rep["results"]}
checks = sorted({c for _, c in res})
check({"fabric", "nccl"} <= set(checks), "no fabric or nccl results: checks %s" % checks)
check(len(res) == 3 * len(checks) and len(rep["results"]) == len(res),
      "%d results, want %d (3 nodes x %d checks)" % (len(rep["results"]), 3 * len(checks), len(checks)))
for (node, c), r in sorted(res.items()):
    st, msg = r["state"], r.get("message") or ""
    if (node, c) in (("e2e-vm3", "inventory"), ("e2e-vm2", "links"), (slow, "fabric")):
        continue
    check(st in ("passed", "skipped"), "%s %s: %s: %s" % (node, c, st, msg))
    check(st != "skipped" or msg, "%s %s: skipped without a reason" % (node, c))
for node in ("e2e-vm1", "e2e-vm2", "e2e-vm3"):
    for c in ("bmc", "power", "pxe"):
        check(res[(node, c)]["state"] == "passed", "%s %s: %s" % (node, c, res[(node, c)]["state"]))
for node in ("e2e-vm1", "e2e-vm2"):
    check(res[(node, "inventory")]["state"] == "passed", node + " inventory not passed")
for node in ("e2e-vm1", "e2e-vm3"):
    check(res[(node, "links")]["state"] == "passed", node + " links not passed: %s" % res[(node, "links")].get("message"))
inv = res[("e2e-vm3", "inventory")]
m = re.fullmatch(r"memory (\d+) MiB, expected 512 MiB \(kernel total, 20 % tolerance; dmidecode absent\)", inv["message"] or "")
check(inv["state"] == "failed" and m is not None, "e2e-vm3 inventory: %s: %s" % (inv["state"], inv["message"]))
if m:
    check(bad_mem * 0.8 <= int(m.group(1)) <= bad_mem, "e2e-vm3: %s MiB is not its -m %d" % (m.group(1), bad_mem))
check([f["item"] for f in inv.get("findings") or []] == ["memory.total_gib"], "e2e-vm3 findings: %s" % inv.get("findings"))
lk = res[("e2e-vm2", "links")]
want = "eth0: cabled to %s Ethernet1/2, plan says %s %s" % (switch, switch, bad_port)
check(lk["state"] == "failed" and lk["message"] == want, "e2e-vm2 links: %s: %s (want %s)" % (lk["state"], lk["message"], want))
f = (lk.get("findings") or [{}])[0]
check(f.get("item") == "cabling.eth0" and f.get("expected") == {"switch": switch, "port": bad_port}
      and f.get("actual") == {"switch": switch, "port": "Ethernet1/2"}, "e2e-vm2 findings: %s" % lk.get("findings"))
bi = res[("e2e-vm1", "burn_in")]
check(bi["state"] == "passed" and "1 skipped" in (bi["message"] or ""), "burn_in: %s: %s" % (bi["state"], bi["message"]))
check("stress-ng is not installed" in json.dumps(bi.get("evidence")), "burn_in evidence: %s" % bi.get("evidence"))
# nccl: skipped everywhere, the tool absent
for node in nodes:
    r = res.get((node, "nccl"), {})
    check(r.get("state") == "skipped" and "not installed" in (r.get("message") or ""),
          "%s nccl: %s: %s (want skipped: all_reduce_perf not installed)" % (node, r.get("state"), r.get("message")))
# fabric: the ring of 3 in 3 rounds, one pair a round; the two pairs with the slow node failed
# below the least acceptable rate, the third passed at or above it
least = eth_gbps * env_pct / 100
fab = [p for p in rep.get("pairs") or [] if p.get("kind") == "fabric"]
check(sorted(p["round"] for p in fab) == [0, 1, 2], "fabric rounds %s, want 0, 1, 2 one pair each" % [p.get("round") for p in fab])
check(sorted(tuple(sorted((p["server"], p["client"]))) for p in fab) ==
      [("e2e-vm1", "e2e-vm2"), ("e2e-vm1", "e2e-vm3"), ("e2e-vm2", "e2e-vm3")],
      "fabric pairs %s, want the ring of e2e-vm1..3" % [(p.get("server"), p.get("client")) for p in fab])
for p in fab:
    who = "fabric round %s %s <- %s" % (p["round"], p["server"], p["client"])
    tests = p.get("tests") or []
    check(len(tests) >= 1, who + ": no tests")
    want = "failed" if slow in (p["server"], p["client"]) else "passed"
    check(p["state"] == want, "%s: %s (want %s): %s" % (who, p["state"], want, p.get("message")))
    for t in tests:
        m, lo = t.get("measured_gbps"), t.get("min_gbps")
        check(t.get("tool") == "iperf3" and isinstance(m, (int, float)) and isinstance(lo, (int, float)),
              "%s %s: no measured_gbps/min_gbps (%s: %s)" % (who, t.get("port"), t.get("state"), t.get("message")))
        if not isinstance(m, (int, float)) or not isinstance(lo, (int, float)):
            continue
        check(abs(lo - least) < 1e-6, "%s: min_gbps %s, want %s" % (who, lo, least))
        check(t.get("state") == want and ((m < lo) if want == "failed" else (m >= lo)),
              "%s %s: %s at %.4f Gb/s, least %.4f (want %s)" % (who, t.get("port"), t.get("state"), m, lo, want))
    if want == "failed":
        check(p["server"] in (p.get("message") or "") and p["client"] in (p.get("message") or ""),
              "%s: the message does not name both nodes: %s" % (who, p.get("message")))
fr = res.get((slow, "fabric"), {})
check(fr.get("state") == "failed", "%s fabric: %s: %s (want failed)" % (slow, fr.get("state"), fr.get("message")))
for node in nodes:
    if node == slow:
        continue
    r = res.get((node, "fabric"), {})
    check(r.get("state") == "passed" and slow in (r.get("message") or "") + json.dumps(r.get("evidence")),
          "%s fabric: %s: %s (want passed, explained by %s)" % (node, r.get("state"), r.get("message"), slow))
print("fabric pairs (least acceptable %.0f Mbit/s = %g Gb/s x %g %%):" % (least * 1000, eth_gbps, env_pct))
for p in sorted(fab, key=lambda p: p["round"]):
    for t in p.get("tests") or []:
        m = t.get("measured_gbps")
        print("  round %d: %s -> %s (server) on %s: %s Mbit/s, %s" % (p["round"], p["client"], p["server"], t.get("port"),
              "%.1f" % (m * 1000) if isinstance(m, (int, float)) else "-", t.get("state")))
for b in bad:
    print("  report: " + b, file=sys.stderr)
print("FAILED (as built):")
for (node, c), r in sorted(res.items()):
    if r["state"] == "failed":
        print("  %s %s: %s" % (node, c, r["message"]))
print("skipped: " + "; ".join(sorted({"%s (%s)" % (c, r["message"]) for (n, c), r in res.items() if r["state"] == "skipped"})))
sys.exit(1 if bad else 0)
EOF
# the neighbour the passing links checks read is lldpd's: the switch port of each VM's tap
for i in 1 3; do
	vm "$i"
	api_expect 200 GET "/v1/nodes/$NAME/inventory" > "$W/vm$i/inventory.json"
	nb=$(jpy '" ".join("%s/%s/%s" % (n["interface"], n["chassis"], n["port"]) for n in d["data"]["lldp"]["neighbors"])' \
		"$W/vm$i/inventory.json")
	[ "$nb" = "eth0/$SWITCH/Ethernet1/$i" ] || fail "$NAME: LLDP neighbours $nb, want eth0/$SWITCH/Ethernet1/$i"
	say "$NAME: LLDP neighbour on eth0: $SWITCH Ethernet1/$i (lldpd)"
done
grep -c 'e2e-lldpd: ' "$W/vm1/console.log" > /dev/null || fail "no lldpd output on e2e-vm1's console"

timings
pass
echo "PASS: e2e_acceptance: 3 VMs accepted through rackpilotd; the report fails e2e-vm3 inventory" \
	"(memory), e2e-vm2 links (cabling) and $SLOW_NAME fabric (its throttled tap) and nothing else"
