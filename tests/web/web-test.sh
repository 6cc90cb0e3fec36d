#!/bin/bash
# web-test.sh - the web view (/ui/) in a real headless browser (Debian's Chromium, driven by
# playwright-core) against the real rackpilotd, seeded over the API with curl.
#
#   web-test.sh RACKPILOTD AGENT BUILD_DIR     (exit 77 when node, npm, chromium, python3 or
#                                              the npm registry is missing)
#
# playwright-core comes from the npm registry (package-lock.json, npm ci) into
# BUILD_DIR/web-test-node, never into the source tree; no browser is ever downloaded.
# Screenshots of every page go to BUILD_DIR/web-artifacts/. RP_KEEP=1 keeps the data dir.
set -euo pipefail

RPD=${1:?usage: web-test.sh RACKPILOTD AGENT BUILD_DIR}
AGENT=${2:?usage: web-test.sh RACKPILOTD AGENT BUILD_DIR}
BUILD=${3:?usage: web-test.sh RACKPILOTD AGENT BUILD_DIR}
SRC=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd)
HERE=$SRC/tests/web
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
skip() { echo "SKIP: $*"; exit 77; }
# A package that is not installed: a skip on a developer's machine, a failure in CI (CI=true:
# .ci/deps installs them all).
missing() {
	[ "${CI:-}" != true ] || { echo "FAIL: $* (CI=true: .ci/deps should have installed it)"; exit 1; }
	skip "$@"
}
for t in node npm curl ssh-keygen python3 sqlite3; do command -v "$t" > /dev/null || missing "no $t"; done
[ -x "$CHROMIUM" ] || missing "no $CHROMIUM (apt-get install chromium)"
[ "$(node -p 'process.versions.node.split(".")[0] >= 18')" = true ] || skip "node $(node -v) is older than 18"

# playwright-core, installed once per lock file.
NM=$BUILD/web-test-node
mkdir -p "$NM"
if ! cmp -s "$HERE/package-lock.json" "$NM/package-lock.json" || [ ! -d "$NM/node_modules/playwright-core" ]; then
	cp "$HERE/package.json" "$HERE/package-lock.json" "$NM/"
	if ! (cd "$NM" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) > "$NM/npm.log" 2>&1; then
		rm -f "$NM/package-lock.json"
		cat "$NM/npm.log" >&2
		# The registry out of reach (no route, DNS, a TLS proxy whose CA this machine lacks) is
		# a missing peer, like a missing chromium; any other npm failure is ours.
		if grep -Eq 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_HAS_EXPIRED' "$NM/npm.log"; then
			skip "the npm registry is out of reach from this machine (see npm's error above)"
		fi
		echo "FAIL: npm ci" >&2
		exit 1
	fi
fi

W=$(mktemp -d /tmp/rp-web.XXXXXX)
ART=$BUILD/web-artifacts
mkdir -p "$ART"
rm -f "$ART"/*.png
RPD_PID=
DEMO_PID=
MOCK_PID=
cleanup() {
	[ -n "$RPD_PID" ] && kill "$RPD_PID" 2> /dev/null && wait "$RPD_PID" 2> /dev/null
	[ -n "$DEMO_PID" ] && kill "$DEMO_PID" 2> /dev/null && wait "$DEMO_PID" 2> /dev/null
	[ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2> /dev/null && wait "$MOCK_PID" 2> /dev/null
	[ -n "${RP_KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	echo "--- rackpilotd log" >&2
	tail -n 30 "$W/rackpilotd.log" >&2 || true
	exit 1
}

port_of() { # OUTFILE PID: the port rackpilotd --listen 127.0.0.1:0 printed
	local port
	for _ in $(seq 100); do
		port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$1")
		[ -n "$port" ] && echo "$port" && return 0
		kill -0 "$2" 2> /dev/null || fail "rackpilotd exited"
		sleep 0.1
	done
	fail "rackpilotd did not say where it listens"
}
# boot_url: the rollout below is pre-flighted, and its agent recipe downloads the images from
# there (nothing runs: it starts tomorrow).
printf '[server]\nboot_url = http://127.0.0.1:9\n' > "$W/rackpilotd.conf"
DB=$(sh "$(dirname "$0")/../pg/newdb.sh")
DEMODB=$(sh "$(dirname "$0")/../pg/newdb.sh")
# No periodic sweeps: the seed reads power and sensors when it means to (sensor_sync below).
"$RPD" -c "$W/rackpilotd.conf" --data-dir "$W/data" ${DB:+--database "$DB"} --listen 127.0.0.1:0 --power-sync-interval 0 \
	--sensor-sync-interval 0 --no-access-log > "$W/rackpilotd.out" 2> "$W/rackpilotd.log" &
RPD_PID=$!
RP=http://127.0.0.1:$(port_of "$W/rackpilotd.out" "$RPD_PID")
# A second server with its own demo site (rackpilotd --demo): GET /v1 says demo: true.
"$RPD" --demo --data-dir "$W/demo" ${DEMODB:+--database "$DEMODB"} --listen 127.0.0.1:0 --power-sync-interval 0 \
	--sensor-sync-interval 0 --no-access-log > "$W/demo.out" 2> "$W/demo.log" &
DEMO_PID=$!
DEMO=http://127.0.0.1:$(port_of "$W/demo.out" "$DEMO_PID")
ADMIN=$(cat "$W/data/admin.token")

# api METHOD PATH [BODY]: prints the body; fails the test on a status >= 400.
api() {
	local out code
	out=$(curl -sS -X "$1" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
		${3:+--data-binary "$3"} -w '\n%{http_code}' "$RP$2") || fail "curl $1 $2"
	code=${out##*$'\n'}
	[ "$code" -lt 400 ] || fail "$1 $2 -> $code: ${out%$'\n'*}"
	printf '%s' "${out%$'\n'*}"
}
jget() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{let v=JSON.parse(s);for(const k of process.argv[1].split("."))v=v?.[k];console.log(v??"")})' "$1"; }

# Two racks in two rows of one site; 8-GPU nodes in their U slots on fake BMCs (the power
# calls take 300 ms, so a job is seen running). seed.json tells the browser test what to expect.
api POST /v1/racks '{"name":"r01","site":"dc1","row":"A","height_u":42}' > /dev/null
api POST /v1/racks '{"name":"r02","site":"dc1","row":"B","height_u":42}' > /dev/null
SEED="["
node_json() { # NAME RACK U HEIGHT CLASS TAG MAC
	printf '{"name":"%s","rack":"%s","u_position":%s,"u_height":%s,"node_class":"%s","tags":["%s"],"serial":"SN-%s","macs":["%s"],"bmc":{"driver":"fake","options":{"delay_ms":300}}}' \
		"$1" "$2" "$3" "$4" "$5" "$6" "$1" "$7"
}
add() { # NAME RACK U HEIGHT CLASS TAG
	local mac
	mac=$(printf '02:00:00:00:%02x:%02x' "${2#r}" "$3")
	api POST /v1/nodes "$(node_json "$1" "$2" "$3" "$4" "$5" "$6" "$mac")" > /dev/null
	SEED="$SEED{\"name\":\"$1\",\"rack\":\"$2\",\"u\":$3,\"uh\":$4,\"class\":\"$5\",\"tag\":\"$6\",\"mac\":\"$mac\"},"
}
for i in 0 1 2 3 4 5 6 7; do
	u=$((1 + i * 5))
	add "$(printf 'gpu-r01-u%02d' $u)" r01 $u 4 gpu-h100-8x $([ $i -lt 4 ] && echo prod || echo bringup)
done
for i in 0 1 2 3 4; do
	u=$((1 + i * 8))
	add "$(printf 'gpu-r02-u%02d' $u)" r02 $u 8 gpu-h200-8x prod
done
# A node whose BMC does not answer (nothing listens on port 1): three failed contacts make a
# BMC fault. Its password must never reach the page.
api POST /v1/nodes '{"name":"mgmt-r02-u41","rack":"r02","u_position":41,"u_height":1,"node_class":"mgmt","tags":["infra"],
  "bmc":{"driver":"redfish","address":"127.0.0.1","port":1,"username":"root","password":"pw-NEVER-SHOWN-7f3a","options":{"scheme":"http","timeout_ms":500}}}' > /dev/null
SEED="$SEED{\"name\":\"mgmt-r02-u41\",\"rack\":\"r02\",\"u\":41,\"uh\":1,\"class\":\"mgmt\",\"tag\":\"infra\"}"

# A lab rack without a power budget, with one node on a Redfish mock BMC
# (tests/redfish/mock_bmc.py) whose inlet sensor has a hostile name and reads 44 °C, past its
# warning (40): the hottest sensor, and text on the page, never markup. The fake driver's
# sensor names are fixed; the mock's POST /__mock/sensor names them anything.
MOCK_PORT=
for attempt in 1 2 3 4 5 6 7 8; do
	port=$((52000 + (RANDOM % 4000) * 2))
	rm -f "$W/mock.ready"
	python3 "$SRC/tests/redfish/mock_bmc.py" --port-base "$port" --count 1 --ready-file "$W/mock.ready" \
		> "$W/mock.log" 2>&1 &
	MOCK_PID=$!
	for _ in $(seq 100); do
		[ -f "$W/mock.ready" ] && break
		kill -0 "$MOCK_PID" 2> /dev/null || break
		sleep 0.1
	done
	if [ -f "$W/mock.ready" ]; then
		MOCK_PORT=$port
		break
	fi
	kill "$MOCK_PID" 2> /dev/null
	wait "$MOCK_PID" 2> /dev/null || true
	MOCK_PID=
done
[ -n "$MOCK_PORT" ] || { cat "$W/mock.log" >&2; fail "the Redfish mock BMC did not start"; }
HOSTILE='<script>__xss=1</script>"q" '"'"'a'"'"'<img src=x onerror=__xss=2>' # under 64 bytes: kept whole
curl -fsS -X POST --data-binary "$(node -e 'console.log(JSON.stringify({id:"Inlet_Temp",name:process.argv[1],reading:44}))' "$HOSTILE")" \
	"http://127.0.0.1:$MOCK_PORT/__mock/sensor" > /dev/null || fail "mock sensor"
api POST /v1/racks '{"name":"r03","site":"dc1","row":"C","height_u":42}' > /dev/null
api POST /v1/nodes "{\"name\":\"rf-r03-u20\",\"rack\":\"r03\",\"u_position\":20,\"u_height\":2,\"node_class\":\"lab\",\"tags\":[\"lab\"],
  \"bmc\":{\"driver\":\"redfish\",\"address\":\"127.0.0.1\",\"port\":$MOCK_PORT,\"username\":\"admin\",\"password\":\"secret\",\"options\":{\"scheme\":\"http\",\"timeout_ms\":5000}}}" > /dev/null
SEED="$SEED,{\"name\":\"rf-r03-u20\",\"rack\":\"r03\",\"u\":20,\"uh\":2,\"class\":\"lab\",\"tag\":\"lab\"}]"
printf '%s\n' "$SEED" > "$W/seed.json"

for _ in 1 2 3; do
	api POST /v1/power/sync '{}' > /dev/null
	for _ in $(seq 50); do
		[ "$(api GET /v1/power/sync | jget running)" = false ] && break
		sleep 0.1
	done
done
[ -n "$(api GET /v1/nodes/mgmt-r02-u41 | jget bmc.fault.message)" ] || fail "no BMC fault after three failed syncs"

# Power on half of r01 and all of r02 (jobs and events; mgmt-r02-u41's job fails after its
# retries: its latest job failed).
for n in gpu-r01-u01 gpu-r01-u06 gpu-r01-u11 gpu-r01-u16 gpu-r01-u21; do
	api PUT "/v1/nodes/$n/power" '{"target":"on"}' > /dev/null
done
api POST /v1/actions/power '{"selector":{"rack":"r02"},"target":"on"}' > /dev/null
# The fake BMC passes verify: these nodes become manageable.
for n in gpu-r01-u01 gpu-r01-u06 gpu-r01-u11 gpu-r02-u01 gpu-r02-u09; do
	api PUT "/v1/nodes/$n/provision" '{"action":"manage"}' > /dev/null
done
api PATCH /v1/nodes/gpu-r02-u17 '{"maintenance":true,"maintenance_reason":"reseat GPU 3"}' > /dev/null

# Inventory through the agent protocol: the real agent reads a modelled HGX H100 tree, and a
# bootstrap token registers it for the node (as rackpilot-agent register would).
ssh-keygen -q -t ed25519 -N '' -f "$W/hostkey" > /dev/null
register() { # NODE MAC FIXTURE
	local boot inv
	boot=$(api POST /v1/bootstrap-tokens "{\"node\":\"$1\",\"expires_in_s\":600}" | jget token)
	"$AGENT" --root "$SRC/tests/fixtures/inventory/$3" inventory > "$W/inv-$1.json" 2> /dev/null ||
		fail "rackpilot-agent inventory ($3)"
	inv=$(node -e 'const i=JSON.parse(require("fs").readFileSync(process.argv[1]));
		console.log(JSON.stringify({format:1,hostname:process.argv[2],macs:[process.argv[3]],
			ssh_host_key:require("fs").readFileSync(process.argv[4],"utf8").trim(),
			ssh:{address:"127.0.0.1",port:22},inventory:i}))' "$W/inv-$1.json" "$1" "$2" "$W/hostkey.pub")
	curl -fsS -H "Authorization: Bearer $boot" -H 'Content-Type: application/json' --data-binary "$inv" \
		"$RP/v1/agent/register" > /dev/null || fail "register $1"
}
register gpu-r01-u06 02:00:00:00:01:06 gpu-h100-8x
register gpu-r01-u11 02:00:00:00:01:0b gpu-h100-7x-missing

# Desired state and drift: a firmware baseline and a BIOS profile for the H100 class, with
# readings that differ on some nodes.
for img in bmc-1.8.2.bin bios-2.4.bin; do
	printf 'firmware image %s\n' "$img" > "$W/$img"
	curl -fsS -X PUT -H "Authorization: Bearer $ADMIN" --data-binary "@$W/$img" \
		"$RP/v1/images/$img?kind=firmware" > /dev/null || fail "upload $img"
done
# The nodes have fake BMCs, which flash nothing: the baseline's components go through an agent
# recipe, as a vendor flasher would.
api POST /v1/recipes '{"name":"fw-flash","params":{"version":{"required":true},"image_url":{"required":true},"sha256":{"required":true}},"steps":[{"id":"flash","type":"firmware","image_url":"${image_url}","sha256":"${sha256}","command":"true ${image}"},{"id":"inv","type":"inventory"}]}' > /dev/null ||
	fail "recipe"
api POST /v1/firmware/baselines '{"name":"h100-2026q4","node_class":"gpu-h100-8x","components":{"bmc":{"version":"1.8.2","image":"bmc-1.8.2.bin","method":"agent","recipe":"fw-flash"},"bios":{"version":"2.4","image":"bios-2.4.bin","method":"agent","recipe":"fw-flash"}}}' > /dev/null ||
	fail "baseline"
api POST /v1/bios/profiles '{"name":"h100-golden","node_class":"gpu-h100-8x","attributes":{"Above4GDecoding":"Enabled","NumaPerSocket":"NPS1","SMT":"Enabled"}}' > /dev/null
for n in gpu-r01-u01 gpu-r01-u06 gpu-r01-u11 gpu-r01-u16 gpu-r01-u21 gpu-r01-u26 gpu-r01-u31 gpu-r01-u36; do
	case $n in
	*u06 | *u26) bmcv=1.8.1 ;;
	*) bmcv=1.8.2 ;;
	esac
	api POST "/v1/nodes/$n/firmware/readings" "{\"source\":\"seed\",\"components\":[{\"component\":\"bmc\",\"version\":\"$bmcv\",\"updateable\":true},{\"component\":\"bios\",\"version\":\"2.4\",\"updateable\":true}]}" > /dev/null
	case $n in
	*u06) nps=NPS4 ;;
	*) nps=NPS1 ;;
	esac
	api POST "/v1/nodes/$n/bios/readings" "{\"source\":\"seed\",\"attributes\":{\"Above4GDecoding\":\"Enabled\",\"NumaPerSocket\":\"$nps\",\"SMT\":\"Enabled\"}}" > /dev/null
done
# A firmware rollout scheduled for tomorrow: planned waves, nothing started.
start=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
api POST /v1/rollouts "{\"kind\":\"firmware\",\"selector\":{\"class\":\"gpu-h100-8x\"},\"waves\":{\"canary\":1,\"batch\":1},\"start_at\":\"$start\"}" > "$W/rollout.json" ||
	fail "rollout"

# An acceptance run of r01's BMC identity (the fake BMCs report no serial: skipped, with why).
api POST /v1/racks/r01/acceptance '{"checks":["bmc"]}' > /dev/null || fail "acceptance"

# A settled acceptance run of r02 across nodes (fabric pairs, NCCL): these need agents on
# nodes that reach each other, so fabric-seed.mjs writes its rows as the jobs would have left
# them, straight into the database (sqlite3, or psql on the suite's PostgreSQL run).
node "$HERE/fabric-seed.mjs" "$HOSTILE" > "$W/fabric.sql" || fail "fabric seed SQL"
if [ -n "$DB" ]; then
	psql -qX -v ON_ERROR_STOP=1 "$DB" -f "$W/fabric.sql" > /dev/null || fail "fabric seed (psql)"
else
	sqlite3 -bail -cmd '.timeout 10000' "$W/data/rackpilot.db" < "$W/fabric.sql" || fail "fabric seed (sqlite3)"
fi
[ "$(api GET /v1/racks/r02/acceptance | jget pairs.2.tests.0.busbw_gbytes_s)" = 301.2 ] || fail "the fabric seed is not in r02's acceptance report"

VIEWER=$(api POST /v1/tokens '{"name":"wall","role":"viewer"}' | jget token)
OPERATOR=$(api POST /v1/tokens '{"name":"ops","role":"operator"}' | jget token)

# Let the seed's jobs end before the browser looks (one snapshot of all jobs each time: a job
# backing off goes from queued to running and back).
settled=
for _ in $(seq 300); do
	if api GET '/v1/jobs?limit=1000&fields=state' |
		node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.exit(JSON.parse(s).items.some(j=>j.state==="queued"||j.state==="running")?1:0))'; then
		settled=1
		break
	fi
	sleep 0.2
done
[ -n "$settled" ] || fail "the seed's jobs did not end"

# Power: nameplates for r02's classes (every node's class has one: the rack has a nameplate),
# budgets for r01 (5 kW, limit 4 kW) and r02 (3.2 kW, limit 2.56 kW; the tighter), none for
# r03; then one sensor sweep (the demo server too): draws, history steps and the hottest sensors.
api PUT /v1/node-classes/gpu-h200-8x '{"max_power_w":700}' > /dev/null
api PUT /v1/node-classes/mgmt '{"max_power_w":300}' > /dev/null
api PATCH /v1/racks/r01 '{"power_budget_kw":5}' > /dev/null
api PATCH /v1/racks/r02 '{"power_budget_kw":3.2}' > /dev/null
sensor_sync() { # URL TOKEN: one sweep, to its end
	local before st
	before=$(curl -fsS -H "Authorization: Bearer $2" "$1/v1/sensors/sync" | jget last.finished_at) || fail "sensor sync state"
	curl -fsS -X POST -H "Authorization: Bearer $2" -H 'Content-Type: application/json' --data-binary '{}' \
		"$1/v1/sensors/sync" > /dev/null || fail "POST /v1/sensors/sync"
	for _ in $(seq 150); do
		st=$(curl -fsS -H "Authorization: Bearer $2" "$1/v1/sensors/sync")
		[ "$(printf '%s' "$st" | jget running)" = false ] && [ "$(printf '%s' "$st" | jget last.finished_at)" != "$before" ] && return 0
		sleep 0.1
	done
	fail "the sensor sweep did not end"
}
sensor_sync "$RP" "$ADMIN"
sensor_sync "$DEMO" "$(cat "$W/demo/admin.token")"
[ "$(api GET /v1/nodes/rf-r03-u20/sensors | jget read_at)" != "" ] || fail "the mock BMC's sensors were not read"

RP_HOSTILE_SENSOR=$HOSTILE RP_DEMO_URL=$DEMO RP_DEMO_ADMIN=$(cat "$W/demo/admin.token") RP_URL=$RP RP_ADMIN=$ADMIN RP_VIEWER=$VIEWER RP_OPERATOR=$OPERATOR RP_SEED=$W/seed.json \
	RP_ARTIFACTS=$ART RP_NODE_MODULES=$NM/node_modules CHROMIUM=$CHROMIUM \
	node "$HERE/ui.test.mjs" || fail "browser test"
echo "screenshots: $ART"
kill "$MOCK_PID" 2> /dev/null
wait "$MOCK_PID" 2> /dev/null || true
MOCK_PID=
# Clean exits on SIGTERM (under the sanitizers: no leak, no error).
for v in RPD_PID DEMO_PID; do
	kill "${!v}"
	st=0
	wait "${!v}" || st=$?
	eval "$v="
	[ "$st" = 0 ] || fail "rackpilotd ($v) exited with status $st on SIGTERM"
done
