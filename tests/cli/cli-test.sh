#!/bin/sh
# cli-test.sh RACKPILOTD RACKPILOT - the rackpilot CLI against the real rackpilotd on loopback
# (ephemeral port, temporary data directory, fake and unreachable BMCs only).
# Every command family, --json against the API's own answer (curl), exit codes 0/1/2/3,
# configuration precedence, roles, and that the token never shows in any output.
# RP_KEEP=1 keeps the work directory.
set -u
RPD=${1:?usage: cli-test.sh RACKPILOTD RACKPILOT}
CLI=${2:?usage: cli-test.sh RACKPILOTD RACKPILOT}
W=$(mktemp -d /tmp/rp-cli-XXXXXX)
RPD_PID=
N=0

cleanup() {
	[ -n "${fpid:-}" ] && kill "$fpid" 2> /dev/null
	[ -n "$RPD_PID" ] && kill "$RPD_PID" 2> /dev/null && wait "$RPD_PID" 2> /dev/null
	if [ "${RP_KEEP:-0}" = 1 ]; then echo "kept $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	echo "--- rackpilotd log" >&2
	tail -n 20 "$W/rpd.log" >&2
	exit 1
}

# rp EXPECTED_EXIT ARGS...: stdout in $W/out, stderr in $W/err, both kept in $W/all.
rp() {
	want=$1
	shift
	N=$((N + 1))
	"$CLI" "$@" > "$W/out" 2> "$W/err" < /dev/null
	got=$?
	cat "$W/out" "$W/err" >> "$W/all"
	[ "$got" = "$want" ] || fail "#$N rackpilot $(echo "$*" | sed "s/$TOKEN/<token>/g"): exit $got," \
		"expected $want; stderr: $(cat "$W/err")"
}
# has FILE PATTERN WHY / hasnt FILE PATTERN WHY: a grep -E on out or err.
has() { grep -Eq -- "$2" "$W/$1" || fail "#$N $3: /$2/ not in $1: $(cat "$W/$1")"; }
hasnt() { ! grep -Eq -- "$2" "$W/$1" || fail "#$N $3: /$2/ in $1: $(cat "$W/$1")"; }
api() { # METHOD PATH [BODY]: the API itself
	curl -sS -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		${3:+--data "$3"} "$URL$2"
}
jget() { # FILE KEY: a member of the JSON object in $W/FILE (python3: jq is not a dependency)
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$W/$1" "$2"
}
same_as_api() { # PATH WHY: $W/out is exactly the API's answer to GET PATH
	printf '%s\n' "$(api GET "$1")" > "$W/api"
	cmp -s "$W/out" "$W/api" || fail "#$N $2: --json differs from GET $1: $(diff "$W/out" "$W/api")"
}

# ---- the server
mkdir -p "$W/home" "$W/xdg"
DB=$(sh "$(dirname "$0")/../pg/newdb.sh")
"$RPD" --listen 127.0.0.1:0 --data-dir "$W/data" ${DB:+--database "$DB"} --threads 2 --power-sync-interval 0 \
	--sensor-sync-interval 0 > "$W/rpd.out" 2> "$W/rpd.log" &
RPD_PID=$!
for _ in $(seq 300); do
	grep -q '^listening on ' "$W/rpd.out" 2> /dev/null && break
	sleep 0.1
done
ADDR=$(sed -n 's/^listening on //p' "$W/rpd.out")
[ -n "$ADDR" ] || fail "rackpilotd did not start"
URL=http://$ADDR
TOKEN=$(cat "$W/data/admin.token")
[ -n "$TOKEN" ] || fail "no admin token"
# No stray configuration from the machine running the test.
export HOME="$W/home"
unset XDG_CONFIG_HOME RACKPILOT_URL RACKPILOT_TOKEN
export RACKPILOT_URL="$URL" RACKPILOT_TOKEN="$TOKEN"

# ---- version, help, usage errors (2)
rp 0 --version
has out '^rackpilot [0-9]+\.[0-9]+\.[0-9]+' "--version"
rp 0 --help
has out '^  node list +list nodes' "--help lists commands"
rp 0 node list --help
has out '^usage: rackpilot node list' "command --help: usage on stdout"
rp 0 power --help
has out '^  power cycle +power cycle' "noun --help lists its verbs"
rp 0 events --help
has out '^usage: rackpilot events' "events --help"
rp 2 nope
has err 'unknown command' "unknown command"
rp 2 node frob
has err 'unknown command' "unknown verb"
rp 2 node list --bogus
has err 'unknown option --bogus' "unknown option"
has err '^usage: rackpilot node list' "usage line on a bad option"
rp 2 node show
has err 'missing argument' "missing argument"
rp 2 node show a b
has err 'too many arguments' "too many arguments"
rp 2 power on
has err 'name one node' "power without a selector"
rp 2 power on n1 --rack r01
has err 'name one node' "power with two selectors"
rp 2 node create x --u seven
has err '--u: expected an integer' "a malformed field value"
rp 2 rollout create
has err '--json is required' "rollout create without a body"
rp 2 token create ci
has err '--role is required' "token create without a role"
rp 1 events --node n1 --rack r01
has err '^rackpilot: BAD_QUERY: ' "events by node and by rack"
rp 2 rack list --site
has err 'needs a value' "an option without its value"

# ---- connection failure (1), naming the URL
rp 1 --url http://127.0.0.1:1 rack list
has err 'cannot connect to http://127\.0\.0\.1:1' "connection failure names the URL"
rp 2 --url ftp://x rack list
has err 'must start with http' "a URL that is not http(s)"

# ---- racks
rp 0 rack create r01 --site dc1 --row A
has out '^created rack r01' "rack create"
rp 0 rack create r02 --site dc2 --height 20
rp 0 rack list
has out '^NAME +SITE +ROW +HEIGHT +NODES' "rack list header"
has out '^r01 +dc1 +A +42 +0' "rack list row r01"
has out '^r02 +dc2 +- +20' "rack list row r02"
rp 0 rack list --site dc1
has out '^r01 ' "rack list --site keeps r01"
hasnt out '^r02 ' "rack list --site drops r02"
rp 0 rack show r02
has out '^height_u +20$' "rack show"
rp 1 rack create r01
has err '^rackpilot: DUPLICATE: ' "a duplicate rack"
rp 1 rack show nosuch
has err '^rackpilot: NOT_FOUND: no such resource \(\{"reason":"no rack .nosuch."\}\)$' "API error: code, message, detail"
[ "$(wc -l < "$W/err")" = 1 ] || fail "an API error is one line"

# ---- nodes
rp 0 node create n1 --rack r01 --u 1 --class gpu --tags bringup,mix --bmc-driver fake
has out '^created node n1 \(version 1\)' "node create"
rp 0 node create n2 --rack r01 --u 2 --class gpu --tags bringup --bmc-driver fake
rp 0 node create n3 --rack r01 --u 3 --u-height 2 --class gpu --bmc-driver fake
printf '{"name":"n4","rack":"r02","u_position":1,"node_class":"cpu","tags":["t2"],"bmc":{"driver":"fake"}}\n' \
	> "$W/n4.json"
rp 0 node create --json "$W/n4.json"
has out '^created node n4' "node create --json FILE"
printf '{"bmc":{"driver":"fake"},"serial":"FROMJSON"}' |
	"$CLI" node create n5 --json - --rack r02 --u 5 --serial FROMFLAG > "$W/out" 2>&1 ||
	fail "node create --json - with flags: $(cat "$W/out")"
cat "$W/out" >> "$W/all"
rp 0 node show n5
has out '^serial +FROMFLAG$' "a flag wins over --json"
has out '^bmc\.driver +fake$' "--json - read from stdin"
rp 0 node list
has out '^NAME +RACK +U +CLASS +STATE +POWER' "node list header"
for n in n1 n2 n3 n4 n5; do has out "^$n " "node list has $n"; done
rp 0 node list --rack r01
has out '^n1 ' "--rack keeps n1"
hasnt out '^n4 ' "--rack drops n4"
rp 0 node list --tag t2
has out '^n4 ' "--tag keeps n4"
hasnt out '^n1 ' "--tag drops n1"
rp 0 node list --class gpu
has out '^n3 ' "--class keeps n3"
hasnt out '^n4 ' "--class drops n4"
rp 0 node list --state enrolled --rack r02
has out '^n4 ' "--state and --rack"
rp 0 node list --state deployed
hasnt out '^n[0-9] ' "--state deployed matches none"
rp 1 node list --rack nosuch
has err '^rackpilot: BAD_QUERY: ' "a filter naming no rack"
rp 0 node update n2 --serial S2 --maintenance true --reason "reseat GPU"
has out '^updated node n2 \(version 2\)' "node update"
rp 0 node show n2
has out '^serial +S2$' "update set serial"
has out '^maintenance_reason +reseat GPU$' "update set reason"
rp 0 node update n2 --maintenance false --serial null
rp 0 node show n2
has out '^serial +-$' "VALUE null clears a field"
rp 1 node create n6 --rack r01 --u 4
has err '^rackpilot: SLOT_OCCUPIED: ' "an occupied slot"
rp 0 node delete n5
has out '^deleted node n5' "node delete"
rp 1 node show n5
has err NOT_FOUND "a deleted node is gone"
rp 0 rack elevation r01
has out '^U +HEIGHT +NODE +CLASS +STATE +POWER +MAINT$' "elevation header"
has out '^3 +2 +n3 +gpu +enrolled' "elevation: n3 at U3, 2 units"
[ "$(sed -n 2p "$W/out" | awk '{print $3}')" = n3 ] || fail "elevation: highest first"
has out '^1 +1 +n1 ' "elevation: n1 at U1"

# ---- rack acceptance: start a run, read the report
api POST /v1/racks '{"name":"acc"}' > /dev/null
api POST /v1/nodes '{"name":"acc-1","rack":"acc","u_position":1,"bmc":{"driver":"fake"}}' > /dev/null
echo '{"checks":["bmc"]}' > "$W/accept.json"
rp 0 rack accept acc --json "$W/accept.json"
has out '^acceptance of rack acc started \(attempt 1\)' "rack accept"
rp 1 rack accept acc --json "$W/accept.json"
has err '^rackpilot: CONFLICT: ' "a second run while one runs"
for _ in $(seq 100); do
	api GET /v1/racks/acc/acceptance | grep -q '"state":"running"' || break
	sleep 0.1
done
rp 0 rack report acc
has out '^acc +1 +passed ' "rack report: the run"
has out '^acc-1 +bmc +skipped +the BMC answers' "rack report: node x check, with the reason"
rp 0 --json rack report acc
same_as_api /v1/racks/acc/acceptance "rack report --json"
rp 1 rack report nope
has err NOT_FOUND "no such rack"

# ---- --json prints the API's JSON unchanged
rp 0 --json node list --rack r01
same_as_api '/v1/nodes?rack=r01' "node list --json"
rp 0 node list --rack r01 --json
same_as_api '/v1/nodes?rack=r01' "--json after the command"
rp 0 --json node show n1
same_as_api /v1/nodes/n1 "node show --json"
rp 0 --json rack list
same_as_api /v1/racks "rack list --json"
rp 0 --json rack elevation r01
same_as_api /v1/racks/r01/elevation "rack elevation --json"

# ---- import: --dry-run writes nothing, then all rows
cat > "$W/import.csv" << 'EOF'
name,rack,u_position,node_class,tags,bmc_driver,rack_site
imp1,r03,1,cpu,imported,fake,dc3
imp2,r03,2,cpu,imported,fake,dc3
EOF
rp 0 rack import "$W/import.csv" --dry-run
has out '^dry run, valid, nothing written: 1 racks, 2 nodes$' "import --dry-run"
rp 1 node show imp1
has err NOT_FOUND "--dry-run created nothing"
rp 1 rack show r03
has err NOT_FOUND "--dry-run created no rack"
rp 0 rack import "$W/import.csv"
has out '^imported: 1 racks, 2 nodes$' "import"
rp 0 node list --rack r03
has out '^imp1 +r03 +1 +cpu' "imported imp1"
has out '^imp2 +r03 +2 ' "imported imp2"
rp 1 rack import "$W/import.csv"
has err '^rackpilot: IMPORT_INVALID: .*DUPLICATE' "importing again: every row invalid"
rp 1 rack import "$W/nosuch.csv"
has err 'nosuch\.csv' "import of a missing file"

# ---- power on one node, then follow its job
rp 0 power on n1
has out '^job [0-9a-f-]{36} queued: power on n1$' "power on queues a job"
JOB=$(sed -n 's/^job \([0-9a-f-]*\) queued.*/\1/p' "$W/out")
rp 0 job watch "$JOB"
has out "^job $JOB: succeeded" "job watch ends in succeeded"
has out '^result: .*"power":"on"' "job watch prints the result"
rp 0 job show "$JOB"
has out '^state +succeeded$' "job show"
rp 0 --json job show "$JOB"
same_as_api "/v1/jobs/$JOB" "job show --json"
rp 0 power status n1
has out '^n1 +on ' "power status NODE"
rp 0 power off n1 --wait
has out 'succeeded' "power off --wait follows the job"
rp 0 power status --rack r01
has out '^n1 +off ' "power status --rack"
rp 0 job list --node n1 --limit 1
has out '^[0-9a-f-]{36} +power +n1 +succeeded' "job list"

# ---- bulk power: all succeed (0); failures (3); skipped (3); nothing to do (1)
rp 0 power on --rack r01
has out '^batch [0-9a-f-]{36}: 3/3 done: 3 succeeded, 0 failed' "bulk power by rack"
rp 0 --json power cycle --rack r01
BATCH=$(jget out id)
same_as_api "/v1/batches/$BATCH" "bulk --json: the finished batch"
# A Redfish BMC that is really rackpilotd itself: the job fails at once (no Redfish there).
printf '{"bmc":{"driver":"redfish","options":{"scheme":"http"}}}' > "$W/redfish-http.json"
rp 0 node create bad1 --json "$W/redfish-http.json" --rack r02 --u 10 --bmc-address 127.0.0.1 \
	--bmc-port "${ADDR##*:}" --bmc-user x --bmc-password not-logged-anywhere
rp 3 power on --rack r02
has out '2/2 done: 1 succeeded, 1 failed' "partial failure: progress lines"
has err '^rackpilot: bad1: bmc_' "partial failure names the node and its error"
rp 1 power on bad1 --wait
has err "failed: bmc_" "job watch of a failed job"
rp 0 node update n2 --maintenance true
rp 3 power off --tag bringup
has err '^rackpilot: skipped n2: ' "a skipped node (maintenance) is reported"
has out '1/1 done: 1 succeeded' "the other node was powered"
rp 0 node update n3 --tags solo --maintenance true
rp 1 power on --tag solo
has err '^rackpilot: CONFLICT: ' "every node skipped: the API refuses"
rp 0 node update n3 --maintenance false
rp 0 node update n2 --maintenance false
rp 0 power on --class gpu --no-wait
has out '^batch [0-9a-f-]{36} queued: 3 jobs$' "bulk --no-wait"

# ---- job cancel: a job queued behind a slow one (fake BMC with a delay)
printf '{"bmc":{"driver":"fake","options":{"delay_ms":1500}}}' > "$W/slow.json"
rp 0 node create slow --json "$W/slow.json"
rp 0 --json power on slow
JOB1=$(jget out id)
rp 0 --json power off slow
JOB2=$(jget out id)
rp 0 job cancel "$JOB2"
has out "^job $JOB2: cancelled" "job cancel"
rp 1 job cancel "$JOB2"
has err '^rackpilot: CONFLICT: ' "cancelling an ended job"
rp 1 job watch "$JOB2"
has err "job $JOB2 cancelled" "job watch of a cancelled job"
# The slow job ends here, not in the middle of a later comparison of event lists.
rp 0 job watch "$JOB1"

# ---- boot, provision
rp 0 boot pxe n1 --wait
has out '^result: .*"device":"pxe"' "boot pxe"
rp 0 boot disk n1
has out '^job [0-9a-f-]{36} queued: boot disk n1' "boot disk"
rp 1 provision commission n4
has err '^rackpilot: INVALID_STATE: .*"allowed":\["manage"\]' "provision from the wrong state"
rp 0 provision manage n4 --wait
has out 'succeeded' "provision manage --wait"
rp 0 node show n4
has out '^provision_state +manageable$' "node is manageable"
rp 1 provision deploy n4 --image nosuch
has err '^rackpilot: ' "deploy of an unknown image"

# ---- BIOS and firmware
api POST /v1/bios/profiles '{"name":"gold","node_class":"gpu","attributes":{"SMT":"Enabled"}}' \
	> /dev/null
rp 0 bios show n1
has out '^desired\.profile +gold$' "bios show: the profile"
has out '^desired\.attributes\.SMT +Enabled$' "bios show: desired values"
has out '^in_sync +no$' "bios show: not in sync"
has out '^SMT +- +Enabled$' "bios show: what differs"
rp 0 bios diff n1
has out '^SMT +- +Enabled$' "bios diff"
rp 0 --json bios show n1
same_as_api /v1/nodes/n1/bios "bios show --json"
rp 0 firmware show n1
has out '^baseline +-$' "firmware show without a baseline"
head -c 4096 /dev/urandom > "$W/bmc.bin"
curl -sS -X PUT -H "Authorization: Bearer $TOKEN" --data-binary @"$W/bmc.bin" \
	"$URL/v1/images/bmc-1.8.2.bin?kind=firmware" > /dev/null
api POST /v1/firmware/baselines \
	'{"name":"fw1","node_class":"gpu","components":{"bmc":{"version":"1.8.2","image":"bmc-1.8.2.bin"}}}' \
	> /dev/null
api POST /v1/nodes/n1/firmware/readings \
	'{"source":"test","components":[{"component":"bmc","version":"1.7.0"},{"component":"cpld","version":"3"}]}'
rp 0 firmware show n1
has out '^baseline +fw1$' "firmware show: the baseline"
has out '^bmc +1\.7\.0 +1\.8\.2 +drift ' "firmware show: drift"
has out '^cpld +3 +- +unmanaged ' "firmware show: unmanaged"
rp 0 firmware drift --class gpu
has out '^nodes_drifted +3$' "firmware drift: count"
has out '^n1 +r01 +gpu +fw1 +bmc 1\.7\.0 1\.8\.2$' "firmware drift: n1"
has out '^n2 +r01 +gpu +fw1 +bmc - 1\.8\.2$' "firmware drift: never read"
rp 0 firmware drift --class cpu
has out '^nodes_drifted +0$' "firmware drift --class filters"
rp 0 --json firmware drift --rack r01
same_as_api '/v1/firmware/drift?rack=r01' "firmware drift --json"
rp 1 firmware drift --rack nosuch
has err '^rackpilot: BAD_QUERY: ' "firmware drift of an unknown rack"

# ---- webhooks: the secret from a file, never on the command line or in an answer
printf '{"name":"ops","url":"http://127.0.0.1:9/hook","events":["rack.*"],"secret":"cli-test-secret-0123"}' > "$W/hook.json"
rp 0 webhook create --json "$W/hook.json"
has out '^created webhook ops \(' "webhook create"
rp 0 webhook list
has out '^ops +yes +[0-9]+ +http://127.0.0.1:9/hook$' "webhook list"
rp 0 webhook show ops
has out '^secret_set +yes$' "webhook show"
hasnt out 'cli-test-secret' "webhook show: no secret"
rp 0 webhook update ops --enabled false
has out '^updated webhook ops \(version 2\)$' "webhook update"
rp 0 webhook deliveries ops --state pending
rp 0 --json webhook deliveries ops
same_as_api '/v1/webhooks/ops/deliveries' "webhook deliveries --json"
rp 1 webhook deliveries ops --state lost
has err '^rackpilot: BAD_QUERY: ' "webhook deliveries: a bad state"
rp 0 webhook delete ops
rp 1 webhook show ops
has err '^rackpilot: NOT_FOUND' "webhook deleted"
hasnt all 'cli-test-secret' "the secret never printed"

# ---- exports: the answer as it is, the selector as a query
rp 0 export hosts --rack r01
same_as_api '/v1/exports/hosts?rack=r01' "export hosts"
has out '^# rackpilot: [0-9]+ node\(s\)$' "export hosts: its head"
rp 0 export prometheus --rack r01 --dcgm-port 0
same_as_api '/v1/exports/prometheus?rack=r01&dcgm_port=0' "export prometheus"
rp 0 export ansible --class gpu
same_as_api '/v1/exports/ansible?class=gpu' "export ansible"
rp 0 export slurm --class gpu
same_as_api '/v1/exports/slurm?class=gpu' "export slurm"
has out '^# slurm.conf node and partition lines from rackpilot: ' "export slurm: its head"
rp 0 export gres --rack r01 --autodetect off
same_as_api '/v1/exports/slurm/gres.conf?rack=r01&autodetect=off' "export gres"
rp 1 export gres --autodetect maybe
has err '^rackpilot: BAD_QUERY: .*autodetect must be nvml' "export gres: a bad autodetect"
rp 1 export hosts --rack nosuch
has err '^rackpilot: BAD_QUERY: .*no rack named' "export of an unknown rack"
# An answer that cannot be written (a full disk) is an error, not an export.
if [ -w /dev/full ]; then
	N=$((N + 1))
	"$CLI" export hosts > /dev/full 2> "$W/err" && fail "#$N export into a full disk: exit 0"
	has err 'writing the answer' "export into a full disk"
fi

# ---- rollouts
printf '{"kind":"bios","selector":{"rack":"r01"},"start_at":"2099-01-01T00:00:00Z"}' > "$W/ro.json"
# Pre-flight: fake BMCs cannot take a BIOS apply by method redfish; each node is named and
# nothing is stored.
rp 1 rollout create --json "$W/ro.json"
has err '^rackpilot: PREFLIGHT_FAILED: .*"node":"n1","need":"unsupported"' "rollout pre-flight"
rp 0 rollout show
hasnt out 'bios +scheduled' "a refused rollout is not stored"
# Through the agent (a vendor tool recipe ending with a bios report) it can.
api POST /v1/recipes '{"name":"bios-tool","steps":[{"id":"read","type":"bios","command":"true","report":true}]}' \
	> /dev/null
api PATCH /v1/bios/profiles/gold '{"method":"agent","recipe":"bios-tool"}' > /dev/null
rp 0 rollout create --json "$W/ro.json"
has out '^rollout [0-9a-f-]{36}: scheduled' "rollout create"
RO=$(sed -n 's/^rollout \([0-9a-f-]*\):.*/\1/p' "$W/out")
rp 0 rollout show
has out "^$RO +bios +scheduled" "rollout list"
rp 0 rollout show "$RO"
has out '^state +scheduled$' "rollout show"
has out '^n1 +r01 +[0-9] +pending' "rollout show: its nodes"
rp 0 rollout pause "$RO"
has out "^rollout $RO: paused" "rollout pause"
rp 0 rollout resume "$RO"
has out "^rollout $RO: (scheduled|running)" "rollout resume"
rp 0 rollout abort "$RO"
has out "^rollout $RO: aborted" "rollout abort"
rp 1 rollout abort "$RO"
has err '^rackpilot: INVALID_STATE: ' "aborting twice"

# ---- events
rp 0 events --node n1 --limit 50
has out '^ID +AT +ACTION +ACTOR +SUMMARY' "events header"
has out ' node\.created +token:admin +' "events --node n1"
hasnt out 'n4' "events --node filters"
rp 0 --json events --limit 5
same_as_api '/v1/events?limit=5' "events --json"
rp 1 events --rack nosuch
has err BAD_QUERY "events of an unknown rack"
# --follow, polling: what happens after it started shows up, oldest first.
follow() { # NAME OPTIONS...: follow for a while, create rack NAME meanwhile
	name=$1
	shift
	"$CLI" --verbose events --follow --limit 1 "$@" > "$W/fout" 2> "$W/ferr" &
	fpid=$!
	sleep 2
	"$CLI" rack create "$name" > /dev/null || fail "rack create $name"
	"$CLI" rack delete "$name" > /dev/null || fail "rack delete $name"
	sleep 3
	kill "$fpid"
	wait "$fpid"
	cat "$W/fout" "$W/ferr" >> "$W/all"
	grep -Eq "rack\.created +token:admin +rack $name created" "$W/fout" ||
		fail "events --follow $*: no rack.created: $(cat "$W/fout" "$W/ferr")"
	c=$(grep -n "rack $name created" "$W/fout" | cut -d: -f1)
	d=$(grep -n "rack $name deleted" "$W/fout" | cut -d: -f1)
	[ -n "$d" ] && [ "$c" -lt "$d" ] || fail "events --follow $*: not oldest first: $(cat "$W/fout")"
	[ "$(grep -c "rack $name created" "$W/fout")" = 1 ] || fail "events --follow $*: repeated"
}
follow evpoll --poll
grep -q '/v1/events?' "$W/ferr" && ! grep -q 'stream' "$W/ferr" ||
	fail "--poll did not poll: $(cat "$W/ferr")"
[ "$(grep -c '^> GET .*/v1/events?' "$W/ferr")" -ge 3 ] || fail "--poll polled once only"
follow evsse
if [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
	"$URL/v1/events/stream")" = 404 ]; then
	echo "note: no /v1/events/stream on this server: --follow fell back to polling"
	grep -q '/v1/events?cursor\|/v1/events?limit=100' "$W/ferr" || fail "no fallback to polling"
else
	grep -q '/v1/events/stream (stream)' "$W/ferr" || fail "--follow did not stream"
	[ "$(grep -c '^> GET .*/v1/events?' "$W/ferr")" = 1 ] || fail "--follow polled while streaming"
fi
"$CLI" --json events --follow --limit 1 --rack r01 > "$W/fout" 2>&1 &
fpid=$!
sleep 2
"$CLI" node update n1 --serial FOLLOWED > /dev/null || fail "node update"
sleep 2
kill "$fpid"
wait "$fpid"
cat "$W/fout" >> "$W/all"
python3 -c '
import json, sys
evs = [json.loads(line) for line in open(sys.argv[1])]
sys.exit(not any(e["action"] == "node.updated" and e["object"]["name"] == "n1" for e in evs))
' "$W/fout" || fail "events --follow --json --rack: one JSON event a line: $(cat "$W/fout")"

# ---- sensors and rack power (docs/power.md): fake BMCs draw options.power_w while on and
# read options.inlet_c at the inlet (warning at 40, critical at 45)
api PUT /v1/node-classes/pwc '{"max_power_w":500,"idle_power_w":100}' > /dev/null
rp 0 rack create pwb --power-kw 2.5 --power-limit-pct 90
has out '^created rack pwb ' "rack create with a budget and a limit"
rp 0 rack show pwb
has out '^power_budget_kw +2\.5$' "--power-kw takes a number"
has out '^power_limit_pct +90$' "--power-limit-pct"
rp 2 rack create pw0 --power-kw lots
has err '\-\-power-kw: expected a number' "--power-kw that is not a number"
# Its budget comes once its nodes are on (their power-ons are not what is tested here).
rp 0 rack create pw
printf '{"bmc":{"driver":"fake","options":{"power_w":500,"inlet_c":41}}}' > "$W/pw.json"
rp 0 node create pw1 --json "$W/pw.json" --rack pw --u 1 --class pwc
rp 0 node create pw2 --json "$W/pw.json" --rack pw --u 3 --class pwc
rp 0 sensors pw1
has out '^node pw1: never read$' "sensors before any sync: no values, no error"
rp 0 power on --rack pw
api PATCH /v1/racks/pw '{"power_budget_kw":1.5,"power_limit_pct":80}' > /dev/null
# Every node with a usable BMC is read; bad1's (a Redfish BMC that is rackpilotd) fails: 3.
rp 3 sensors sync --wait
has out '^sensor sync: [0-9]+ nodes, [0-9]+ answered, 1 failed, [0-9]+ events \([0-9]+ ms\)$' \
	"sensors sync --wait: the sweep's counts"
rp 0 sensors pw1
has out '^node pw1: read [0-9T:.Z-]+, power 500 W$' "sensors: the read line"
has out '^NAME +TYPE +KIND +VALUE +HEALTH +WARN +CRIT$' "sensors: the table's head"
has out '^System Power +power +system +500 W +ok +- +-$' "sensors: the node's draw"
has out '^Inlet Temp +temperature +inlet +41 C +warning +\.\.40 +\.\.45$' \
	"sensors: a sensor in warning, with its thresholds"
rp 0 --json sensors pw1
same_as_api /v1/nodes/pw1/sensors "sensors --json"
rp 0 sensors bad1
has out '^node bad1: never read$' "sensors of a node whose BMC never answered"
has out '^error: .+ \(tried [0-9T:.Z-]+\)$' "sensors: why the latest read failed"
rp 1 sensors nosuch
has err '^rackpilot: NOT_FOUND: no such resource \(\{"reason":"no such node"\}\)$' \
	"sensors of an unknown node: the server's message"
rp 0 events --node pw1 --action sensor.
has out ' sensor\.warning +rackpilotd +pw1: sensor Inlet Temp warning' "the sensor.warning event"
rp 0 sensors history pw1 "Inlet Temp"
has out '^sensor +Inlet Temp$' "sensors history: the sensor"
has out '^unit +Cel$' "sensors history: its unit"
has out '^AT +VALUE$' "sensors history: the samples' head"
has out '^[0-9-]+T[0-9:.]+Z +41$' "sensors history: the sample"
rp 0 --json sensors history pw1 "Inlet Temp" --limit 1
same_as_api '/v1/nodes/pw1/sensors/history?sensor=Inlet%20Temp&limit=1' "sensors history --json"
rp 1 sensors history pw1 "No Such"
has err '^rackpilot: NOT_FOUND: .*no sensor .No Such.' "sensors history of an unknown sensor"
rp 1 sensors history pw1 "Inlet Temp" --since yesterday
has err '^rackpilot: BAD_QUERY: .*since must be RFC 3339' "sensors history: a bad --since"
rp 2 sensors history pw1
has err 'missing argument' "sensors history without its sensor"
# The rack: 2 x 500 W of a 1.5 kW budget at 80 %: 1.2 kW limit, 0.2 kW headroom (13.3 %).
rp 0 power show
has out '^RACK +MEASURED kW +PROJECTED kW +LIMIT kW +BUDGET kW +HEADROOM kW +HEADROOM % +OVER +READ$' \
	"power show: the head"
# Projected: the measured draw, plus the peaks of power-ons not measured yet (pw1 and pw2's,
# unless a read came power_on_settle after them).
has out '^pw +1\.00 +[12]\.00 +1\.20 +1\.50 +0\.20 +13\.3 +no +[0-9-]+T' "power show: the rack"
has out '^r01 +[0-9.]+ +[0-9.]+ +- +- +- +- +no ' "power show: a rack without a budget"
has out '^total: [0-9.]+ kW measured, 4\.00 kW budget$' "power show: the sums"
rp 0 power show pw
has out '^rack +pw$' "power show RACK: the rack"
has out '^budget +1\.50 kW$' "power show RACK: the budget"
has out '^limit +1\.20 kW$' "power show RACK: the limit"
has out '^measured +1\.00 kW$' "power show RACK: the measured draw"
has out '^headroom +0\.20 kW \(13\.3 % of the budget\)$' "power show RACK: the headroom"
has out '^nameplate +1\.00 kW$' "power show RACK: the nameplate"
has out '^projected +[12]\.00 kW$' "power show RACK: the projection"
has out '^admitted +[0-2]$' "power show RACK: the admissions"
has out '^NODE +CLASS +WATTS +MAX W +ADMISSION +READ +ERROR$' "power show RACK: the nodes' head"
has out '^pw1 +pwc +500 +500 +(unmeasured|-) +[0-9-]+T[0-9:.]+Z +-$' "power show RACK: a node's watts"
[ "$(grep -n '^pw2 ' "$W/out" | cut -d: -f1)" -lt "$(grep -n '^pw1 ' "$W/out" | cut -d: -f1)" ] ||
	fail "power show RACK: the nodes from the top of the rack"
rp 0 --json power show pw
same_as_api /v1/racks/pw/power "power show RACK --json"
rp 0 --json power show
same_as_api /v1/power "power show --json"
rp 1 power show nosuch
has err '^rackpilot: NOT_FOUND: .*no such rack' "power show of an unknown rack"
rp 0 power history pw
has out '^step_s +300$' "power history: the step"
has out '^[0-9-]+T[0-9:]+\.000Z +1000 +1000$' "power history: peak and latest"
# Over the limit: one event, and the view says so.
api PATCH /v1/nodes/pw2 '{"bmc":{"options":{"power_w":900}}}' > /dev/null
rp 3 sensors sync --wait
rp 0 power show pw
has out '^measured +1\.40 kW$' "power show RACK: over the limit"
has out '^headroom +-0\.20 kW \(-13\.3 % of the budget\)$' "power show RACK: negative headroom"
has out '^over_limit +yes$' "power show RACK: over_limit"
rp 0 events --rack pw --action rack.power
has out ' rack\.power_over_limit +rackpilotd +rack pw draws 1\.4 kW' "the rack.power_over_limit event"

# ---- power-on admission: a power-on into the full rack waits and says why; --force is an
# admin's (an operator's is refused, 1), and is evented
rp 0 node create pw3 --json "$W/pw.json" --rack pw --u 5 --class pwc
rp 0 --json power on pw3
JOB=$(jget out id)
for _ in $(seq 100); do
	api GET "/v1/jobs/$JOB" | grep -q '"code":"waiting"' && break
	sleep 0.1
done
rp 0 job show "$JOB"
has out '^state +queued$' "a power-on that waits is queued"
has out '^error\.code +waiting$' "a power-on that waits: the code"
has out '^error\.message +waiting: rack pw projected [0-9.]+ kW of 1\.2 kW \(80 % of its 1\.5 kW budget\)$' \
	"a power-on that waits: why"
rp 0 job list --node pw3 --state queued
has out '^[0-9a-f-]{36} +power +pw3 +queued +[0-9T:.Z-]+ +waiting$' "job list: the waiting job"
rp 0 job cancel "$JOB"
rp 0 --json token create op --role operator
OPERATOR=$(jget out token)
rp 1 --token "$OPERATOR" power on pw3 --force
has err '^rackpilot: FORBIDDEN: .*force .*needs an admin token' "an operator cannot force a power-on"
rp 1 --token "$OPERATOR" power on --rack pw --force
has err '^rackpilot: FORBIDDEN: ' "an operator cannot force a bulk power-on"
rp 0 events --action power.admission_forced
hasnt out 'pw3' "a refused --force is not evented"
rp 0 power on pw3 --force --wait
has out 'succeeded' "an admin's --force powers on past the admission"
rp 0 events --action power.admission_forced
has out " power\.admission_forced +token:admin +pw3 powered on by force, past the rack's admission \(rack pw projected " \
	"the forced power-on's event"
rp 0 power show pw
has out '^pw3 +pwc +- +500 +unmeasured, forced +- +-$' "power show RACK: a forced admission"

# ---- power caps (docs/power.md): a rack's limit shared by its nodes' nameplates, set at fake
# BMCs (their limits: 100..100000 W) and read back; drift; the policy off removes them
api PUT /v1/node-classes/pwk '{"max_power_w":1000}' > /dev/null
rp 0 power caps
has out '^no power cap planned$' "power caps before any plan"
rp 0 rack create cap --power-kw 1 --power-limit-pct 90 --power-cap budget
rp 0 rack show cap
has out '^power_cap +budget$' "rack create --power-cap"
rp 0 node create cap1 --rack cap --u 1 --class pwc --bmc-driver fake
rp 0 node create cap2 --rack cap --u 2 --class pwk --bmc-driver fake
rp 0 power cap cap --wait
has out '^power caps of rack cap planned \(policy budget\): 2 node\(s\)$' "power cap: the plan"
has out '^NODE +TARGET W$' "power cap: the targets' head"
has out '^cap1 +300$' "power cap: 900 W shared 500:1000"
has out '^cap2 +600$' "power cap: the larger share"
has out '^batch [0-9a-f-]{36}: 2/2 done: 2 succeeded, 0 failed' "power cap --wait follows the batch"
rp 0 power caps --rack cap
has out '^NODE +RACK +TARGET W +BMC W +ACTIVE +DRIFT +READ +ERROR$' "power caps: the head"
has out '^cap1 +cap +300 +300 +yes +no +[0-9-]+T[0-9:.]+Z +-$' "power caps: set and read back"
has out '^cap2 +cap +600 +600 +yes +no ' "power caps: the other node"
rp 0 --json power caps --rack cap
same_as_api '/v1/power/caps?rack=cap' "power caps --json"
rp 0 power caps --drift
has out '^no node drifts from its planned power cap$' "power caps --drift: none"
rp 0 events --rack cap --action rack.power_cap_planned
has out ' rack\.power_cap_planned +token:admin +power caps of rack cap planned \(policy budget\): 2' \
	"the plan's event"
rp 0 power cap cap
has out '^batch [0-9a-f-]{36} queued: 2 power_cap jobs$' "power cap without --wait"
rp 0 --json power cap cap --wait
BATCH=$(jget out id)
same_as_api "/v1/batches/$BATCH" "power cap --wait --json: the finished batch"
# Drift: a new plan that cap2's BMC does not get (in maintenance, it is skipped: 3).
rp 0 rack update cap --power-kw 0.5
has out '^updated rack cap \(version 2\)$' "rack update"
rp 0 node update cap2 --maintenance true
rp 3 power cap cap --wait
has out '^cap1 +150$' "power cap: a new plan"
has err '^rackpilot: skipped cap2: ' "power cap: a node in maintenance is skipped"
rp 0 power caps --drift
has out '^cap2 +cap +300 +600 +yes +yes ' "power caps --drift: 300 W planned, 600 W at the BMC"
hasnt out '^cap1 ' "power caps --drift: cap1 holds its plan"
rp 0 --json power caps --drift
same_as_api '/v1/power/caps?drift=true' "power caps --drift --json"
rp 0 node update cap2 --maintenance false
# Limits the BMC refuses (30 W and 60 W, under the fake's 100 W): the jobs fail, 3.
rp 0 rack update cap --power-kw 0.1
rp 3 power cap cap --wait
has err '^rackpilot: cap1: power_cap_rejected: ' "power cap: a limit the BMC refuses"
rp 0 power caps --rack cap
has out '^cap1 +cap +30 +150 +yes +yes +[0-9-]+T[0-9:.]+Z +fake BMC: power limit 30 W is outside' \
	"power caps: why the set failed"
# Off: the limits are removed (the BMC keeps the number, not enforced).
rp 0 rack update cap --power-cap off --power-kw 1
rp 0 power cap cap --wait
has out '^power caps of rack cap planned \(policy off\): 2 node\(s\)$' "power cap: policy off"
has out '^cap1 +none$' "power cap off: no limit"
rp 0 power caps --rack cap
has out '^cap1 +cap +- +[0-9]+ +no +no +[0-9-]+T[0-9:.]+Z +-$' "power caps: the limit removed"
rp 1 power cap nosuch
has err '^rackpilot: NOT_FOUND: ' "power cap of an unknown rack"
rp 1 power caps --rack nosuch
has err '^rackpilot: BAD_QUERY: .*no such rack' "power caps of an unknown rack"
rp 0 rack create capless --power-cap budget
rp 1 power cap capless
has err '^rackpilot: CONFLICT: .*no power_budget_kw' "power cap: a budget policy without a budget"
rp 1 power cap pwb
has err '^rackpilot: BAD_REQUEST: .*(no node with a BMC|matches no node)' "power cap of a rack without nodes"
rp 1 rack update cap --power-cap half
has err '^rackpilot: [A-Z_]+: .*power_cap' "rack update: an unknown power_cap policy"
rp 2 power cap
has err 'missing argument' "power cap without its rack"
rp 0 --json sensors sync
has out '"running":true' "sensors sync --json: the sweeper's state"
for _ in $(seq 100); do
	api GET /v1/sensors/sync | grep -q '"running":false' && break
	sleep 0.1
done

# ---- tokens and roles
rp 0 --json token create ci --role viewer
VIEWER=$(jget out token)
VID=$(jget out id)
case "$VIEWER" in rpt_*) ;; *) fail "token create: no token in $(cat "$W/out")" ;; esac
rp 0 token list
has out "^$VID +ci +viewer " "token list"
rp 0 --token "$VIEWER" node list
has out '^n1 ' "a viewer reads"
rp 1 --token "$VIEWER" node create v1
has err '^rackpilot: FORBIDDEN: ' "a viewer cannot create"
rp 1 --token "$VIEWER" power on n1
has err '^rackpilot: FORBIDDEN: ' "a viewer cannot power"
rp 0 --token "$VIEWER" sensors pw1
has out '^node pw1: read ' "a viewer reads sensors"
rp 1 --token "$VIEWER" sensors sync
has err '^rackpilot: FORBIDDEN: ' "a viewer cannot start a sensor sync"
rp 0 --token "$VIEWER" power caps --rack cap
has out '^cap1 ' "a viewer reads the power caps"
rp 1 --token "$VIEWER" power cap cap
has err '^rackpilot: FORBIDDEN: ' "a viewer cannot plan power caps"
rp 0 token revoke "$VID"
has out "^revoked token $VID" "token revoke"
rp 1 --token "$VIEWER" node list
has err '^rackpilot: UNAUTHORIZED: ' "a revoked token"

# ---- the BMC's upkeep (docs/bmc.md) on a fake BMC: identify, BMC reset, credential rotation
rp 0 identify pw1 --wait
has out '^result: .*"lit":true' "identify NODE: the light reads back on"
rp 0 identify off pw1 --wait
has out '^result: .*"lit":false' "identify off NODE"
rp 0 identify pw1 --seconds 30
has out '^job [0-9a-f-]+ queued: identify pw1$' "identify --seconds: the job line"
rp 1 identify pw1 --seconds 0
has err 'INVALID_FIELD' "identify --seconds 0: the server refuses it"
rp 2 identify pw1 --seconds soon
has err '\-\-seconds: expected an integer' "identify --seconds that is not a number"
rp 0 bmc reset pw1 --wait
has out 'succeeded' "bmc reset --wait follows the job"
rp 1 bmc rotate pw1
has err "^rackpilot: CONFLICT: .*no username to rotate" "bmc rotate without a BMC user"
rp 0 node update pw1 --bmc-user admin
rp 0 bmc rotate pw1 --wait
has out 'succeeded' "bmc rotate --wait"
printf '{"password":"not-logged-anywhere-2"}' > "$W/rot.json"
rp 0 bmc rotate pw1 --json "$W/rot.json" --wait
has out 'succeeded' "bmc rotate --json: an admin's explicit password"
rp 0 events --node pw1 --action bmc.
has out ' bmc\.credentials_rotated +rackpilotd +BMC password rotated for pw1' \
	"the rotation's event"

# ---- configuration: flags > environment > file > default
CFG="$W/xdg/rackpilot/config"
mkdir -p "$W/xdg/rackpilot" "$W/home/.config/rackpilot"
unset RACKPILOT_URL RACKPILOT_TOKEN
export XDG_CONFIG_HOME="$W/xdg"
printf '# test\nurl = %s\ntoken = %s\n' "$URL" "$TOKEN" > "$CFG"
chmod 600 "$CFG"
rp 0 rack list
has out '^r01 ' "url and token from the config file"
hasnt err 'warning' "no warning for a private config file"
chmod 644 "$CFG"
rp 0 rack list
has err 'warning: .*readable by group or others' "warning for a readable config file"
chmod 600 "$CFG"
printf 'url = http://127.0.0.1:1\ntoken = rpt_wrong\n' > "$CFG"
rp 1 rack list
has err 'cannot connect to http://127\.0\.0\.1:1' "the file's url is used"
export RACKPILOT_URL="$URL"
rp 1 rack list
has err UNAUTHORIZED "env url over the file, file token used"
export RACKPILOT_TOKEN="$TOKEN"
rp 0 rack list
has out '^r01 ' "env token over the file"
rp 1 --token rpt_wrong rack list
has err UNAUTHORIZED "--token over env"
export RACKPILOT_URL=http://127.0.0.1:1 RACKPILOT_TOKEN=rpt_wrong
rp 0 --url "$URL" --token "$TOKEN" rack list
has out '^r01 ' "flags over env"
unset RACKPILOT_URL RACKPILOT_TOKEN
rm -f "$CFG"
unset XDG_CONFIG_HOME
printf 'url = %s\ntoken = %s\n' "$URL" "$TOKEN" > "$W/home/.config/rackpilot/config"
chmod 600 "$W/home/.config/rackpilot/config"
rp 0 rack list
has out '^r01 ' "HOME/.config/rackpilot/config without XDG_CONFIG_HOME"
rm -f "$W/home/.config/rackpilot/config"
rp 1 --verbose rack list
has err '127\.0\.0\.1:8475' "default url"
has err 'no token configured|UNAUTHORIZED|cannot connect' "no token: a clear error"

# ---- the token never shows: not in errors, not with --verbose
export RACKPILOT_URL="$URL" RACKPILOT_TOKEN="$TOKEN"
rp 0 --verbose node show n1
has err "^> GET $URL/v1/nodes/n1" "--verbose shows the request"
rp 1 --verbose --token "$TOKEN" node show nosuch
rp 1 --url http://127.0.0.1:1 --token "$TOKEN" --verbose node list
if grep -qF "$TOKEN" "$W/all"; then fail "the admin token appears in the CLI's output"; fi
if grep -qF "not-logged-anywhere" "$W/all"; then fail "a BMC password appears in the output"; fi
[ "$(wc -c < "$W/all")" -gt 10000 ] || fail "too little output captured to check for the token"

echo "PASS: rackpilot CLI: $N commands against rackpilotd"
