#!/usr/bin/env python3
"""Write the seed corpora and dictionaries of tests/fuzz (run from anywhere; idempotent).

Seeds are small real examples: requests as the integration tests send them, manifests from
tests/integration/test_import.c, agent messages from docs/agent-protocol.md. The Redfish
seeds are recorded from the DMTF mockups by the harness itself (README.md); regression
inputs (corpus/*/regress-*) are written by hand and never by this script.
"""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
C = os.path.join(HERE, "corpus")


def put(harness, name, data):
    d = os.path.join(C, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def req(method, target, body="", if_match="", rng="", ctype=""):
    return "%s\n%s\n%s\n%s\n%s\n%s" % (method, target, if_match, rng, ctype, body)


RACK = '{"name":"r01","site":"dc1","row":"A","height_u":42}'
NODE = ('{"name":"gpu-r01-u07","rack":"r01","u_position":7,"u_height":2,"serial":"SN1",'
        '"tags":["gpu"],"macs":["3c:ec:ef:00:00:07"],"bmc":{"driver":"redfish",'
        '"address":"127.0.0.1","port":1,"username":"root","password":"pw",'
        '"options":{"scheme":"http","timeout_ms":500,"retry_tries":1}},'
        '"ssh":{"address":"127.0.0.1","port":1,"user":"root"}}')
FAKE = '{"name":"fake-1","bmc":{"driver":"fake","options":{"delay_ms":0}}}'
PLAN = ('{"steps":[{"id":"hostname","type":"shell","command":"hostname","timeout_s":60},'
        '{"id":"motd","type":"file","path":"/etc/motd","content":"managed\\n","mode":"0644"},'
        '{"id":"inv","type":"inventory"}]}')

API = {
    "healthz": [req("GET", "/healthz")],
    "root": [req("GET", "/v1")],
    "metrics": [req("GET", "/metrics")],
    "ui": [req("GET", "/ui"), req("GET", "/ui/app.js")],
    "tokens": [req("POST", "/v1/tokens", '{"name":"ci","role":"operator"}'),
               req("GET", "/v1/tokens"), req("DELETE", "/v1/tokens/nope")],
    "racks": [req("POST", "/v1/racks", RACK), req("GET", "/v1/racks?site=dc1&limit=2"),
              req("GET", "/v1/racks/r01"), req("PATCH", "/v1/racks/r01", '{"row":"B"}', '"1"'),
              req("GET", "/v1/racks/r01/elevation"), req("GET", "/v1/racks/r01/cabling"),
              req("PUT", "/v1/racks/r01/cabling", '{"links":[]}'),
              req("POST", "/v1/racks/r01/acceptance", '{}'), req("GET", "/v1/racks/r01/acceptance"),
              req("POST", "/v1/racks/r01/acceptance/signoff", '{"note":"ok"}'),
              req("DELETE", "/v1/racks/r01", "", '"1"')],
    "classes": [req("PUT", "/v1/node-classes/gpu-h100-8x",
                    '{"description":"8x H100","expect":{"gpus":8}}'),
                req("GET", "/v1/node-classes"), req("GET", "/v1/node-classes/gpu-h100-8x"),
                req("DELETE", "/v1/node-classes/gpu-h100-8x")],
    "nodes": [req("POST", "/v1/nodes", NODE), req("POST", "/v1/nodes", FAKE),
              req("GET", "/v1/nodes?rack=r01&sort=name&fields=name,rack"),
              req("GET", "/v1/nodes/gpu-r01-u07"),
              req("PATCH", "/v1/nodes/gpu-r01-u07", '{"tags":["a","b"],"bmc":{"password":null}}',
                  '"1"', "", "application/merge-patch+json"),
              req("GET", "/v1/nodes/gpu-r01-u07/inventory"), req("GET", "/v1/nodes/gpu-r01-u07/bios"),
              req("POST", "/v1/nodes/gpu-r01-u07/bios/readings",
                  '{"source":"redfish","attributes":{"BootMode":"Uefi"}}'),
              req("GET", "/v1/nodes/gpu-r01-u07/firmware"),
              req("POST", "/v1/nodes/gpu-r01-u07/firmware/readings",
                  '{"source":"redfish","components":{"bmc":{"version":"1.2"}}}'),
              req("POST", "/v1/nodes/gpu-r01-u07/firmware/refresh", '{}'),
              req("POST", "/v1/nodes/gpu-r01-u07/firmware/update", '{"components":["bmc"]}'),
              req("POST", "/v1/nodes/gpu-r01-u07/bios/apply", '{"profile":"h100-golden"}'),
              req("POST", "/v1/nodes/gpu-r01-u07/steps", PLAN),
              req("PUT", "/v1/nodes/gpu-r01-u07/ssh-host-key",
                  '{"host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx0WbZxLKlBY0oRf3ZbOwHV5ehvCqE5Ng3dFbrN1N4O"}'),
              req("DELETE", "/v1/nodes/gpu-r01-u07/ssh-host-key"),
              req("PUT", "/v1/nodes/gpu-r01-u07/provision", '{"action":"commission"}'),
              req("PUT", "/v1/nodes/fake-1/power", '{"state":"on"}'),
              req("PUT", "/v1/nodes/fake-1/boot", '{"device":"pxe","persistent":false}'),
              req("POST", "/v1/nodes/fake-1/verify", '{}'),
              req("DELETE", "/v1/nodes/fake-1")],
    "bios": [req("POST", "/v1/bios/profiles",
                 '{"name":"h100-golden","node_class":"gpu-h100-8x","attributes":'
                 '{"Above4GDecoding":"Enabled","NumaPerSocket":"NPS1","PcieSlots":8,"SriovSupport":true}}'),
             req("GET", "/v1/bios/profiles"), req("GET", "/v1/bios/profiles/h100-golden"),
             req("PATCH", "/v1/bios/profiles/h100-golden", '{"attributes":{"PcieSlots":4}}'),
             req("GET", "/v1/bios/drift?rack=r01"), req("DELETE", "/v1/bios/profiles/h100-golden")],
    "firmware": [req("POST", "/v1/firmware/baselines",
                     '{"name":"r-2026","node_class":"gpu-r","components":{"nic0":{"version":"2.0",'
                     '"image":"nic_2.0.bin","method":"redfish-push"}}}'),
                 req("GET", "/v1/firmware/baselines"), req("GET", "/v1/firmware/baselines/r-2026"),
                 req("PATCH", "/v1/firmware/baselines/r-2026", '{"components":{}}'),
                 req("GET", "/v1/firmware/drift"), req("DELETE", "/v1/firmware/baselines/r-2026")],
    "jobs": [req("GET", "/v1/jobs?state=queued"), req("GET", "/v1/jobs/0b9f0000-0000-4000-8000-000000000000"),
             req("GET", "/v1/jobs/x/log"), req("DELETE", "/v1/jobs/x"), req("GET", "/v1/batches/x"),
             req("POST", "/v1/actions/power", '{"selector":{"rack":"r01"},"state":"off"}'),
             req("POST", "/v1/actions/steps", '{"selector":{"tags":["gpu"]},' + PLAN[1:]),
             req("GET", "/v1/power/sync"), req("POST", "/v1/power/sync", "")],
    "rollouts": [req("POST", "/v1/rollouts",
                     '{"name":"fw-2026","kind":"firmware","baseline":"r-2026","selector":{"rack":"r01"},'
                     '"waves":[{"percent":10}],"max_failures":1}'),
                 req("GET", "/v1/rollouts"), req("GET", "/v1/rollouts/x"),
                 req("POST", "/v1/rollouts/x/pause", ""), req("POST", "/v1/rollouts/x/resume", ""),
                 req("POST", "/v1/rollouts/x/abort", "")],
    "recipes": [req("POST", "/v1/recipes", '{"name":"burn","description":"burn-in",' + PLAN[1:]),
                req("GET", "/v1/recipes"), req("GET", "/v1/recipes/burn"),
                req("PATCH", "/v1/recipes/burn", '{"description":"x"}'), req("DELETE", "/v1/recipes/burn")],
    "images": [req("POST", "/v1/images", '{"name":"vmlinuz","kind":"kernel","url":"http://127.0.0.1:1/vmlinuz",'
                   '"sha256":"' + "a" * 64 + '"}'),
               req("GET", "/v1/images?kind=kernel"), req("GET", "/v1/images/vmlinuz"),
               req("PUT", "/v1/images/vmlinuz", "kernel bytes", "", "", "application/octet-stream"),
               req("DELETE", "/v1/images/vmlinuz"),
               req("GET", "/boot/images/vmlinuz", "", "", "bytes=0-3")],
    "boot": [req("POST", "/v1/boot-profiles",
                 '{"name":"default","kernel":"vmlinuz","initrd":"initrd.img","cmdline":"console=ttyS0"}'),
             req("GET", "/v1/boot-profiles"), req("GET", "/v1/boot-profiles/default"),
             req("PATCH", "/v1/boot-profiles/default", '{"cmdline":"quiet"}'),
             req("DELETE", "/v1/boot-profiles/default"),
             req("GET", "/boot/ipxe?mac=3c:ec:ef:00:00:07&uuid=x&arch=x86_64")],
    "bootstrap": [req("GET", "/v1/ssh-key"), req("GET", "/v1/bootstrap-tokens"),
                  req("POST", "/v1/bootstrap-tokens", '{"node":"gpu-r01-u07","ttl_s":600}'),
                  req("DELETE", "/v1/bootstrap-tokens/x")],
    "events": [req("GET", "/v1/events?limit=5&type=node.created"), req("GET", "/v1/events/stream")],
    "import": [req("POST", "/v1/import?dry_run=true", '{"racks":[' + RACK + '],"nodes":[' + NODE + ']}'),
               req("POST", "/v1/import", "name,rack,u_position\ncpu-y01-u01,y01,1\n", "", "", "text/csv")],
    "webhooks": [req("POST", "/v1/webhooks", '{"name":"ops","url":"https://hooks.example/x?t=1",'
                     '"events":["rollout.*","node.created","*"],"secret":"0123456789abcdef0123"}'),
                 req("GET", "/v1/webhooks?sort=name"), req("GET", "/v1/webhooks/ops"),
                 req("PATCH", "/v1/webhooks/ops", '{"enabled":false,"events":["rack.acceptance_*"]}'),
                 req("GET", "/v1/webhooks/ops/deliveries?state=pending&limit=3"),
                 req("DELETE", "/v1/webhooks/ops")],
    "exports": [req("GET", "/v1/exports/slurm?rack=r01&default=gpu-h100-8x"),
                req("GET", "/v1/exports/slurm/gres.conf?class=gpu-h100-8x&autodetect=off"),
                req("GET", "/v1/exports/prometheus?tag=gpu&dcgm_port=0"),
                req("GET", "/v1/exports/ansible"), req("GET", "/v1/exports/hosts?rack=r01")],
    "power": [req("GET", "/v1/power"), req("GET", "/v1/racks/r01/power"),
              req("GET", "/v1/racks/r01/power/history?since=1700000000&until=1700003600"),
              req("GET", "/v1/nodes/gpu-r01-u07/sensors"),
              req("GET", "/v1/nodes/gpu-r01-u07/sensors/history?sensor=Inlet%20Temp&limit=5"),
              req("POST", "/v1/sensors/sync"), req("GET", "/v1/sensors/sync"),
              req("PATCH", "/v1/racks/r01", '{"power_limit_pct":90,"power_cap":"budget"}'),
              req("POST", "/v1/racks/r01/power-cap"), req("GET", "/v1/power/caps?drift=true"),
              req("PUT", "/v1/nodes/gpu-r01-u07/power", '{"target":"on","force":true}')],
    "errors": [req("GET", "/v1/nope"), req("PUT", "/v1/racks"), req("POST", "/v1/racks", "{bad json"),
               req("POST", "/v1/racks", "x=1", "", "", "application/x-www-form-urlencoded"),
               req("GET", "/v1/racks?limit=0&cursor=%%%"), req("GET", "/v1/racks/r01", "", "W/\"x\"")],
}

for group, reqs in API.items():
    for i, r in enumerate(reqs):
        put("fuzz_api", "%s-%02d" % (group, i), r)
# Sequences: create, then work on what was created (one input, several requests).
put("fuzz_api", "seq-rack-node", "\n%%\n".join(
    [req("POST", "/v1/racks", RACK), req("POST", "/v1/nodes", NODE),
     req("PATCH", "/v1/nodes/gpu-r01-u07", '{"u_position":9}', '"1"'),
     req("GET", "/v1/racks/r01/elevation")]))
put("fuzz_api", "seq-fake-power", "\n%%\n".join(
    [req("POST", "/v1/nodes", FAKE), req("PUT", "/v1/nodes/fake-1/power", '{"state":"cycle"}'),
     req("GET", "/v1/jobs?node=fake-1"), req("DELETE", "/v1/nodes/fake-1", "", '"1"')]))
put("fuzz_api", "seq-boot", "\n%%\n".join(
    [req("POST", "/v1/boot-profiles", '{"name":"default","kernel":"k","initrd":"i"}'),
     req("POST", "/v1/nodes", NODE), req("PUT", "/v1/nodes/gpu-r01-u07/provision", '{"action":"commission"}'),
     req("GET", "/boot/ipxe?mac=3c-ec-ef-00-00-07")]))
put("fuzz_api", "seq-webhook-event", "\n%%\n".join(
    [req("POST", "/v1/webhooks", '{"url":"http://127.0.0.1:1/x","events":["*"],"secret":"0123456789abcdef"}'),
     req("POST", "/v1/racks", RACK), req("GET", "/v1/webhooks"), req("GET", "/metrics")]))
put("fuzz_api", "seq-slurm", "\n%%\n".join(
    [req("POST", "/v1/racks", RACK), req("PUT", "/v1/node-classes/gpu-h100-8x", '{"bom":{}}'),
     req("POST", "/v1/nodes", NODE), req("GET", "/v1/exports/slurm?rack=r01"),
     req("GET", "/v1/exports/slurm/gres.conf")]))
put("fuzz_api", "seq-rack-power", "\n%%\n".join(
    [req("POST", "/v1/racks", RACK), req("PUT", "/v1/node-classes/gpu-h100-8x", '{"max_power_w":700}'),
     req("POST", "/v1/nodes", FAKE), req("POST", "/v1/sensors/sync"),
     req("POST", "/v1/racks/r01/power-cap"), req("GET", "/v1/racks/r01/power"), req("GET", "/metrics")]))
put("fuzz_api", "route-mode", "\n~\x1a/gpu-r01-u07\n\n\n\n{}")

# Dictionary: every field name the validators know, route segments, enum values.
words = set()
for fn in os.listdir(os.path.join(ROOT, "server", "api")):
    if fn.endswith(".c"):
        src = open(os.path.join(ROOT, "server", "api", fn)).read()
        words.update(re.findall(r'\{"([a-z_0-9.]+)", RP_F_', src))
        for arr in re.findall(r'const char \*const [a-z_]+\[\] = \{([^}]*)\}', src):
            words.update(re.findall(r'"([^"\\]+)"', arr))
routes = open(os.path.join(ROOT, "server", "api", "routes.c")).read()
for pat in re.findall(r'\{"[A-Z]+", "([^"]+)"', routes):
    words.update(s for s in pat.split("/") if s and not s.startswith("{"))
words.update(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "application/json", "text/csv",
              "application/merge-patch+json", "bytes=", "null", "true", "false", "%%"])
with open(os.path.join(HERE, "fuzz_api.dict"), "w") as f:
    f.write("# Written by make_corpus.py: field names, enum values, route segments.\n")
    for w in sorted(words):
        f.write('"%s"\n' % w.replace("\\", "\\\\").replace('"', '\\"'))

# Import: CSV and JSON manifests (byte 0: bit 0 JSON, bit 1 dry_run).
CSV = ("name,rack,u_position,u_height,serial,node_class,tags,macs,bmc_driver,bmc_address,"
       "bmc_username,bmc_password,rack_site\r\n"
       "cpu-x01-u01,x01,1,1,SNX1,cpu-2s,cpu;edge,02:aa:00:00:00:01,redfish,10.20.0.1,root,"
       "\"pa,ss\",dc2\r\n"
       "cpu-x01-u02,x01,2,1,SNX2,cpu-2s,cpu,02:aa:00:00:00:02,redfish,10.20.0.2,root,pw,dc2\r\n"
       "\r\n"
       "cpu-x02-u01,x02,1,1,\"SN \"\"X3\"\"\",cpu-2s,,02:aa:00:00:00:03,fake,,,,\n")
put("fuzz_import", "csv-test-import", "\x00" + CSV)
put("fuzz_import", "csv-dry-run", "\x02" + CSV)
put("fuzz_import", "csv-bad-rows", "\x00name,rack,u_position\ncpu-y01-u01,y01,1\ncpu-y01-u02,y01,one\n"
    "cpu-y01-u03,y01,1\n")
put("fuzz_import", "csv-unknown-column", "\x00name,colour\nx,red\n")
put("fuzz_import", "csv-unterminated", "\x00name\n\"x\n")
put("fuzz_import", "json-manifest", "\x01" + '{"racks":[' + RACK + '],"nodes":[' + NODE + '],'
    '"node_classes":{"cpu-2s":{"description":"2 sockets"}}}')
put("fuzz_import", "json-dry-run", "\x03" + '{"nodes":[' + FAKE + ']}')
with open(os.path.join(HERE, "fuzz_import.dict"), "w") as f:
    f.write("# Written by make_corpus.py: manifest columns and members.\n")
    for w in ["name", "rack", "u_position", "u_height", "serial", "node_class", "tags", "macs",
              "bmc_driver", "bmc_address", "bmc_username", "bmc_password", "rack_site", "racks",
              "nodes", "node_classes", "redfish", "ipmi", "fake", "\\x0d\\x0a", "\\x22\\x22", ";"]:
        f.write('"%s"\n' % w)

# Boot: RANGE, SIZE, QUERY, HOST, script fields.
put("fuzz_boot", "range-suffix", "bytes=-500\n10000\nmac=3c:ec:ef:00:00:07\n10.99.1.1:8080\n"
    "http://10.99.1.1:8080|gpu-r01-u07|commissioning|vmlinuz|initrd.img|console=ttyS0|rpb_x|"
    "https://10.99.1.1:8443|" + "ab" * 32)
put("fuzz_boot", "range-open", "bytes=100-\n4096\nmac=3C-EC-EF-00-00-07&uuid=4c4c4544-0000-1000-8000-000000000000&arch=arm64\n"
    "[::1]:8080\n\x01http://[::1]:8080|unknown machine|not enrolled")
put("fuzz_boot", "range-multi", "bytes=0-1,5-6\n100\nmac=zz\n\n")
put("fuzz_boot", "range-unsat", "bytes=200-300\n100\nmac=3c:ec:ef:00:00:07&mac=x\nhost\"bad\n"
    "\x02http://h|who\nline|why\"q|k|i|quiet \"x\"|t")

# Agent messages (docs/agent-protocol.md): byte 0 picks the route.
REG = ('{"format":1,"agent_version":"0.1.0","hostname":"gpu-r01-u07","boot_id":"5c6f0a2e-0000-4000-8000-00000000000a",'
       '"macs":["3c:ec:ef:00:00:01","3c:ec:ef:00:00:02"],"ssh_host_key":"ssh-ed25519 '
       'AAAAC3NzaC1lZDI1NTE5AAAAIHx0WbZxLKlBY0oRf3ZbOwHV5ehvCqE5Ng3dFbrN1N4O root@host",'
       '"ssh":{"address":"10.0.0.7","port":22},"inventory":{"format":1,"cpus":[{"model":"x"}]}}')
put("fuzz_agent", "register", "\x00\x00" + REG)
put("fuzz_agent", "heartbeat", "\x01\x00" + '{"boot_id":"5c6f0a2e-0000-4000-8000-000000000001",'
    '"agent_version":"0.1.0","status":"idle","uptime_s":5120}')
put("fuzz_agent", "heartbeat-reboot", "\x01\x00" + '{"boot_id":"5c6f0a2e-0000-4000-8000-0000000000ff",'
    '"agent_version":"0.1.0","status":"busy","uptime_s":3}')
put("fuzz_agent", "inventory", "\x02\x00" + '{"format":1,"system":{"serial":"SN1"},"cpus":[],"memory":[],'
    '"disks":[{"name":"nvme0n1","size_bytes":1000}],"nics":[{"name":"eth0","mac":"3c:ec:ef:00:00:01"}]}')
put("fuzz_agent", "bios", "\x03\x00" + '{"attributes":{"BootMode":"Uefi","SriovSupport":true,"PcieSlots":8}}')
put("fuzz_agent", "config", "\x04\x00")
put("fuzz_agent", "job", "\x05\x00a\n")
put("fuzz_agent", "step-running", "\x06\x00a\n\n" + '{"state":"running","boot_id":"5c6f0a2e-0000-4000-8000-000000000001"}')
put("fuzz_agent", "step-succeeded", "\x06\x00a\n\n" + '{"state":"succeeded","exit_status":0,"output":"host\\n",'
    '"output_truncated":false,"result":{"attributes":3}}')
put("fuzz_agent", "step-failed", "\x06\x00b\n\n" + '{"state":"failed","error":"interrupted","exit_status":1}')
put("fuzz_agent", "plan", "\x07\x00" + '{"format":1,"job":"0b9f0000-0000-4000-8000-000000000000",'
    + PLAN[1:])
put("fuzz_agent", "plan-all-types", "\x07\x00" + '{"format":1,"job":"0b9f0000-0000-4000-8000-000000000000","steps":['
    '{"id":"r","type":"reboot","timeout_s":900},{"id":"fw","type":"firmware","command":"flash ${image}",'
    '"image_url":"http://h/fw.bin","sha256":"' + "b" * 64 + '"},{"id":"bi","type":"bios","command":"x",'
    '"report":true},{"id":"im","type":"image","url":"http://h/os.img","sha256":"' + "c" * 64 +
    '","device":"/dev/sda"},{"id":"e","type":"shell","command":"env","env":{"A":"1"},"cwd":"/",'
    '"continue_on_error":true,"rerun_interrupted":false}]}')

# Steps output: byte 0 seeds the chunking.
put("fuzz_steps", "agent-output", "\x07== step hostname (shell)\nnode1\n== step hostname: succeeded\n"
    "== step motd (file)\n== step motd: failed: EACCES\r\n")
put("fuzz_steps", "long-line", "\x03" + "x" * 2000 + "\n\n")
put("fuzz_steps", "no-newline", "\x20" + "only one line")
