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
# Then: manage the nodes, POST /v1/racks/r-e2e/acceptance with a burn-in recipe (one step that
# passes, one that exits 77 because stress-ng is absent), wait for the run, and check the
# report: the run failed, exactly those two checks failed with their evidence, every other check
# of every node passed or was skipped with a reason. The CSV is printed; the HTML report is kept
# as E2E_ARTIFACTS/acceptance-report.html (default BUILD/e2e-artifacts).
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
ARTIFACTS=${E2E_ARTIFACTS:-$E2E_BUILD/e2e-artifacts}

phase "build images (cached)"
rc=0
"$E2E_DIR/build-images.sh" "$E2E_IMAGES" "$E2E_CACHE" || rc=$?
[ "$rc" = 3 ] && skip "no kernel package (apt-get download failed and $E2E_CACHE has none)"
[ "$rc" = 0 ] || fail "build-images.sh failed (exit $rc)"
[ -f "$E2E_IMAGES/agent-initrd-lldp" ] || fail "build-images.sh made no agent-initrd-lldp"

phase "rack up (3 VMs, switch $SWITCH)"
new_work rp-accept
E2E_VMS=3 E2E_PORT=8080 E2E_VM_MEM=$VM_MEM E2E_VM_MEM_3=$BAD_MEM E2E_LLDP_SWITCH=$SWITCH \
	"$E2E_DIR/rack.sh" up
load_rack
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
		\"disks\":{\"count\":1},\"nics\":{\"count\":1}}}],
	\"cabling\":[$cabling]}" > "$W/import.json"
say "imported rack $RACK: ${NODES[*]}, class $CLASS, 3 cabling entries"

phase "manage (BMC verify)"
for node in "${NODES[@]}"; do provision "$node" '{"action":"manage"}' > /dev/null; done
wait_states manageable "${NODES[@]}"

phase "acceptance run"
api_expect 202 POST "/v1/racks/$RACK/acceptance" '{"burn_in":{"recipes":["burn-e2e"]}}' > "$W/run.json"
run_ended() {
	api GET "/v1/racks/$RACK/acceptance"
	[ "$API_STATUS" = 200 ] || return 1
	case $(jget .state "$API_BODY") in passed | failed) cp "$API_BODY" "$W/report.json" ;; *) return 1 ;; esac
}
wait_for $((LIMIT * 2)) "the acceptance run ended" run_ended

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
python3 - "$W/report.json" "$VM_MEM" "$BAD_MEM" "$SWITCH" "$BAD_PORT" << 'EOF' || fail "the report is not what the rack is"
import json, re, sys
rep = json.load(open(sys.argv[1]))
vm_mem, bad_mem, switch, bad_port = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
bad = []
def check(ok, what):
    if not ok:
        bad.append(what)
check(rep["state"] == "failed", "run state %s, want failed" % rep["state"])
res = {(r["node"], r["check"]): r for r in rep["results"]}
checks = sorted({c for _, c in res})
check(len(res) == 3 * 10, "%d results, want 30 (3 nodes x 10 checks)" % len(res))
for (node, c), r in sorted(res.items()):
    st, msg = r["state"], r.get("message") or ""
    if (node, c) in (("e2e-vm3", "inventory"), ("e2e-vm2", "links")):
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
	"(memory) and e2e-vm2 links (cabling) and nothing else"
