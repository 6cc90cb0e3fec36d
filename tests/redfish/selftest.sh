#!/usr/bin/env bash
# Self-test of mock_bmc.py: starts the mock in each mode and checks its behaviour with curl.
# Exits non-zero if any check fails.  Needs python3, curl and openssl.
#   PORT_BASE  first port to use (default 18000; uses PORT_BASE .. PORT_BASE+599)
#   MOCKUPS    the DMTF mockup folder (default /work/shared/redfish-mockups)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
MOCK="$HERE/mock_bmc.py"
PB=${PORT_BASE:-18000}
MOCKUPS=${MOCKUPS:-/work/shared/redfish-mockups}
T=$(mktemp -d)
PIDS=()
CHECKS=0
FAILS=0

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
section() { echo "== $*"; }

# start NAME PORT ARGS...: run the mock in the background and wait for its ready file.
start() {
    local name=$1 port=$2 i
    shift 2
    python3 "$MOCK" --port-base "$port" --ready-file "$T/$name.ready" "$@" >"$T/$name.out" 2>"$T/$name.err" &
    PIDS+=($!)
    for i in $(seq 1200); do
        [ -f "$T/$name.ready" ] && return 0
        kill -0 "${PIDS[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    echo "mock '$name' did not start:" >&2
    cat "$T/$name.err" >&2
    exit 1
}

# req METHOD URL [curl args...]: status -> $CODE, body -> $T/body, headers -> $T/hdr.
req() {
    local method=$1 url=$2
    shift 2
    CODE=$(curl -sS -k -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$method" "$@" "$url" 2>"$T/curlerr") || CODE=000
}
AUTH=(-u admin:secret)
JSON=(-H 'Content-Type: application/json')
get() { req GET "$B$1" "${AUTH[@]}" "${@:2}"; }
post() { req POST "$B$1" "${AUTH[@]}" "${JSON[@]}" -d "$2" "${@:3}"; }
patch() { req PATCH "$B$1" "${AUTH[@]}" "${JSON[@]}" -d "$2" "${@:3}"; }
mock() { # METHOD NAME [JSON]: the /__mock/ control API
    if [ $# -gt 2 ]; then req "$1" "$B/__mock/$2" "${JSON[@]}" -d "$3"; else req "$1" "$B/__mock/$2"; fi
}
config() { mock POST config "$1"; expect 200 "config $1"; }
reset() { post "$RESET" "{\"ResetType\":\"$1\"}"; expect 204 "reset $1"; }
login() {
    req POST "$B/redfish/v1/SessionService/Sessions" "${JSON[@]}" -d "{\"UserName\":\"admin\",\"Password\":\"$1\"}"
    TOKEN=$(header X-Auth-Token)
}
header() { grep -i "^$1:" "$T/hdr" | tail -n 1 | cut -d' ' -f2- | tr -d '\r'; }

expect() {
    CHECKS=$((CHECKS + 1))
    [ "$CODE" = "$1" ] || fail "$2: HTTP $CODE, wanted $1: $(head -c 300 "$T/body") $(cat "$T/curlerr")"
}
# check 'PYTHON EXPRESSION over d (the last body)' DESCRIPTION
check() {
    CHECKS=$((CHECKS + 1))
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)' \
        "$T/body" "$1" 2>/dev/null || fail "$2: false: $1; body: $(head -c 400 "$T/body")"
}
val() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/body" "$1"; }
msgid() { check "d['error']['@Message.ExtendedInfo'][0]['MessageId'].endswith('.$1')" "$2 -> $1"; }
truth() { CHECKS=$((CHECKS + 1)); [ "$1" = "$2" ] || fail "$3: got '$1', wanted '$2'"; }
# poll MONITOR: GET it until it stops answering 202; POLLED = "code:TaskState:PercentComplete ...".
poll() {
    local i
    POLLED=""
    for i in $(seq 20); do
        get "$1"
        POLLED="$POLLED $CODE:$(val 'd["TaskState"]'):$(val 'd.get("PercentComplete")')"
        [ "$CODE" = 202 ] || break
    done
    POLLED=${POLLED# }
}

# ---------------------------------------------------------------------------------------------
section "built-in tree, 3 BMCs"
start builtin "$PB" --count 3
B=http://127.0.0.1:$PB
INV=/redfish/v1/UpdateService/FirmwareInventory

section "authentication"
req GET "$B/redfish/v1/"; expect 200 "service root without auth"
req GET "$B/redfish/v1/odata"; expect 200 "odata without auth"
req GET "$B/redfish/v1/\$metadata"; expect 200 "\$metadata without auth"
grep -q "edmx:Edmx" "$T/body" || fail "\$metadata is not CSDL"
req GET "$B/redfish/v1/Systems"; expect 401 "Systems without auth"
msgid NoValidSession "Systems without auth"
[ -n "$(header WWW-Authenticate)" ] || fail "401 without WWW-Authenticate"
req GET "$B/redfish/v1/Systems" -u admin:wrong; expect 401 "Basic with a bad password"
get /redfish/v1/Systems; expect 200 "Systems with Basic"
SYS=$(val 'd["Members"][0]["@odata.id"]')
truth "$SYS" /redfish/v1/Systems/System.Embedded.1 "system discovered"
get "$SYS"; check 'd["SerialNumber"] == "MOCK0000"' "serial of BMC 0"
UUID0=$(val 'd["UUID"]')
RESET=$(val 'd["Actions"]["#ComputerSystem.Reset"]["target"]')
CHASSIS=$(val 'd["Links"]["Chassis"][0]["@odata.id"]')
BIOS=$(val 'd["Bios"]["@odata.id"]')
req GET "http://127.0.0.1:$((PB + 1))$SYS" "${AUTH[@]}"
check "d['SerialNumber'] == 'MOCK0001' and d['UUID'] != '$UUID0'" "BMC 1 has its own identity"
req GET "http://127.0.0.1:$((PB + 1))$SYS/EthernetInterfaces/NIC.Slot.1-1" "${AUTH[@]}"
check 'd["MACAddress"] == "02:00:01:1A:01:01"' "per-BMC MAC address"

login wrong; expect 401 "session login with a bad password"
login secret; expect 201 "session login"
LOC=$(header Location)
[ -n "$TOKEN" ] || fail "no X-Auth-Token"
check "d['@odata.id'] == '$LOC' and d['UserName'] == 'admin'" "session body"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 200 "GET with the session token"
get /redfish/v1/SessionService/Sessions; check "d['Members'] == [{'@odata.id': '$LOC'}]" "Sessions lists it"
req DELETE "$B$LOC" -H "X-Auth-Token: $TOKEN"; expect 204 "logout"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 401 "token after logout"

config '{"session_expire_after": 2}'
login secret; expect 201 "login (expiring session)"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 200 "expiring session, request 1"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 200 "expiring session, request 2"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 401 "expiring session, request 3"
login secret; expect 201 "re-login after 401"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 200 "new session works"
config '{"session_expire_after": 0}'

config '{"sessions": false}'
login secret; expect 405 "login with sessions disabled"
case "$(header Allow)" in *POST*|"") fail "Allow of Sessions when disabled: '$(header Allow)'" ;; esac
get "$SYS"; expect 200 "Basic fallback when sessions are disabled"
config '{"basic_auth": false}'
get "$SYS"; expect 401 "Basic when basic_auth is off"
config '{"sessions": true, "basic_auth": true}'

mock GET state
N=$(val 'd["sessions"]')
config "{\"session_limit\": $((N + 1))}"
login secret; expect 201 "login up to the limit"
login secret; expect 503 "login beyond the session limit"
msgid SessionLimitExceeded "session limit"
config '{"session_limit": 16}'

section "ETags"
get "$SYS"; ETAG=$(header ETag)
check "d['@odata.etag'] == '$ETAG'" "@odata.etag equals the ETag header"
case "$ETAG" in W/*|"") fail "ETag not strong: '$ETAG'" ;; esac
get "$CHASSIS"; [ "$(header ETag)" != "$ETAG" ] || fail "two resources share an ETag"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Hdd"}}' -H 'If-Match: "stale"'
expect 412 "PATCH with a wrong If-Match"; msgid PreconditionFailed "wrong If-Match"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Hdd"}}' -H "If-Match: $ETAG"; expect 200 "PATCH with the right If-Match"
[ "$(header ETag)" != "$ETAG" ] || fail "ETag unchanged by a PATCH"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Hdd"}}' -H "If-Match: $ETAG"; expect 412 "PATCH with the old ETag"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"None"}}' -H 'If-Match: *'; expect 200 "PATCH with If-Match: *"
post "$RESET" '{"ResetType":"Nmi"}' -H 'If-Match: "stale"'; expect 412 "action with a wrong If-Match"
config '{"require_if_match": true}'
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"None"}}'; expect 428 "PATCH without If-Match in strict mode"
msgid PreconditionRequired "strict mode"
config '{"require_if_match": false}'

section "power"
mock GET state; check 'd["power"] == "Off" and d["boots"] == []' "initial power Off, no boots"
get "$SYS"; ETAG=$(header ETag)
config '{"power_delay_s": 1.0}'
reset On
mock GET state; check 'd["power"] == "PoweringOn"' "PoweringOn during the delay"
get "$SYS"; check 'd["PowerState"] == "PoweringOn"' "system shows PoweringOn"
[ "$(header ETag)" != "$ETAG" ] || fail "ETag unchanged by a power change"
sleep 1.3
mock GET state; check 'd["power"] == "On" and len(d["boots"]) == 1' "On after the delay, one boot"
get "$CHASSIS"; check 'd["PowerState"] == "On"' "chassis follows the system"
config '{"power_delay_s": 0}'
post "$RESET" '{"ResetType":"Explode"}'; expect 400 "bad ResetType"; msgid ActionParameterValueNotInList "bad ResetType"
post "$RESET" '{}'; expect 400 "no ResetType"; msgid ActionParameterMissing "no ResetType"
get "$SYS"; check '"PowerCycle" in d["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"]' "PowerCycle offered"
reset ForceRestart
mock GET state; check 'd["power"] == "On" and len(d["boots"]) == 2' "ForceRestart = one boot event"
reset PowerCycle
mock GET state; check 'len(d["boots"]) == 3' "PowerCycle = one boot event"
config '{"ignore_acpi": true}'
reset GracefulShutdown
mock GET state; check 'd["power"] == "On"' "GracefulShutdown ignored by the OS"
config '{"ignore_acpi": false}'
reset GracefulShutdown
mock GET state; check 'd["power"] == "Off" and len(d["boots"]) == 3' "GracefulShutdown -> Off"
reset GracefulRestart
mock GET state; check 'd["power"] == "On" and len(d["boots"]) == 4' "restart of an Off system powers it on"
reset ForceOff
mock GET state; check 'd["power"] == "Off"' "ForceOff"
config '{"conflict_when_same": true}'
post "$RESET" '{"ResetType":"ForceOff"}'; expect 409 "ForceOff when Off in conflict mode"
config '{"conflict_when_same": false}'
reset ForceOff
mock POST power '{"state":"On"}'; expect 200 "__mock/power"
check 'd["power"] == "On" and len(d["boots"]) == 4' "__mock/power is no boot event"
mock POST power '{"state":"Off"}'
mock GET state
check '[a.get("reset_type") for a in d["actions"] if a["path"].endswith("ComputerSystem.Reset")] ==
       ["Nmi", "On", "Explode", None, "ForceRestart", "PowerCycle", "GracefulShutdown", "GracefulShutdown",
        "GracefulRestart", "ForceOff", "ForceOff", "ForceOff"]' "action log of resets"
check '[a["status"] for a in d["actions"] if a["path"].endswith("ComputerSystem.Reset")][:3] == [412, 204, 400]' \
    "action log statuses"
check 'all(set(a) >= {"method", "path", "at", "status"} and "Session" not in a["path"] for a in d["actions"])' \
    "action log entries"

section "boot override"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once","BootSourceOverrideMode":"UEFI"}}'
expect 200 "PATCH Boot Pxe/Once/UEFI"
check 'd["Boot"]["BootSourceOverrideTarget"] == "Pxe" and d["Boot"]["BootSourceOverrideEnabled"] == "Once"' "PATCH answer"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Floppy"}}'; expect 400 "bad boot target"
msgid PropertyValueNotInList "bad boot target"
check 'd["error"]["@Message.ExtendedInfo"][0]["RelatedProperties"] == ["/Boot/BootSourceOverrideTarget"]' "RelatedProperties"
patch "$SYS" '{"Boot":{"BootSourceOverrideEnabled":"Always","BootSourceOverrideMode":"UEFI"}}'; expect 400 "bad Enabled"
patch "$SYS" '{"PowerState":"On"}'; expect 400 "read-only property"; msgid PropertyNotWritable "PATCH PowerState"
get "$SYS"; check 'd["Boot"]["BootSourceOverrideTarget"] == "Pxe" and d["Boot"]["BootSourceOverrideEnabled"] == "Once"' \
    "bad PATCHes changed nothing"
reset On
mock GET state
check 'd["boots"][-1]["booted_from"] == "Pxe" and d["boots"][-1]["mode"] == "UEFI"' "booted from Pxe"
check 'd["boot"]["enabled"] == "Disabled"' "Once consumed by the boot"
reset ForceRestart
mock GET state; check 'd["boots"][-1]["booted_from"] == "Hdd"' "next boot from the disk"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"UefiHttp","BootSourceOverrideEnabled":"Continuous"}}'
reset ForceRestart
reset ForceRestart
mock GET state
check '[b["booted_from"] for b in d["boots"][-2:]] == ["UefiHttp", "UefiHttp"] and d["boot"]["enabled"] == "Continuous"' \
    "Continuous stays"
patch "$SYS" '{"Boot":{"BootSourceOverrideEnabled":"Disabled"}}'
config '{"quirk_legacy": true}'
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once","BootSourceOverrideMode":"UEFI"}}'
expect 200 "PATCH in quirk_legacy mode"
get "$SYS"; check 'd["Boot"]["BootSourceOverrideMode"] == "Legacy"' "quirk_legacy stored Legacy"
config '{"quirk_legacy": false}'
patch "$SYS" '{"Boot":{"BootSourceOverrideMode":"UEFI","BootSourceOverrideEnabled":"Disabled"}}'; expect 200 "restore UEFI"

section "BIOS"
get "$BIOS"
check 'd["Attributes"]["SriovSupport"] == "Disabled" and d["Attributes"]["ProcCoreDisable"] == 0' "Bios attributes"
check 'd["@Redfish.Settings"]["SupportedApplyTimes"] == ["OnReset", "Immediate"]' "SupportedApplyTimes"
SETTINGS=$(val 'd["@Redfish.Settings"]["SettingsObject"]["@odata.id"]')
REGID=$(val 'd["AttributeRegistry"]')
get /redfish/v1/Registries
REGFILE=$(val "[m['@odata.id'] for m in d['Members'] if m['@odata.id'].endswith('/$REGID')][0]")
get "$REGFILE"; REGBODY=$(val 'd["Location"][0]["Uri"]')
get "$REGBODY"
check '{a["AttributeName"]: a for a in d["RegistryEntries"]["Attributes"]}["ProcCoreDisable"]["UpperBound"] == 64' "registry bounds"
check '[v["ValueName"] for a in d["RegistryEntries"]["Attributes"] if a["AttributeName"] == "NumaNodesPerSocket" for v in a["Value"]] == ["NPS1", "NPS2", "NPS4"]' \
    "registry enum values"
patch "$BIOS" '{"Attributes":{"SriovSupport":"Enabled"}}'; expect 405 "PATCH Bios"
case "$(header Allow)" in *PATCH*|"") fail "Allow of Bios: '$(header Allow)'" ;; esac
patch "$SETTINGS" '{"Attributes":{"Bogus":1}}'; expect 400 "unknown attribute"; msgid PropertyUnknown "unknown attribute"
check 'd["error"]["@Message.ExtendedInfo"][0]["RelatedProperties"] == ["/Attributes/Bogus"]' "RelatedProperties of attribute"
patch "$SETTINGS" '{"Attributes":{"NumaNodesPerSocket":"NPS3"}}'; expect 400 "bad enum"; msgid PropertyValueNotInList "bad enum"
patch "$SETTINGS" '{"Attributes":{"ProcCoreDisable":"4"}}'; expect 400 "wrong type"; msgid PropertyValueTypeError "wrong type"
patch "$SETTINGS" '{"Attributes":{"ProcCoreDisable":65}}'; expect 400 "out of range"; msgid PropertyValueOutOfRange "out of range"
patch "$SETTINGS" '{"Attributes":{"SysMemSize":"4096 GB"}}'; expect 400 "read-only"; msgid PropertyNotWritable "read-only"
patch "$SETTINGS" '{"Attributes":{"SriovSupport":"Enabled","Above4GDecoding":"Maybe"}}'; expect 400 "valid + invalid"
patch "$SETTINGS" '{"Attributes":{"SriovSupport":"Enabled"},"@Redfish.SettingsApplyTime":{"ApplyTime":"AtMaintenanceWindowStart"}}'
expect 400 "unsupported ApplyTime"
mock GET state; check 'd["bios"]["pending"] == {}' "rejected PATCHes left nothing pending"
patch "$SETTINGS" '{"Attributes":{"SriovSupport":"Enabled","NumaNodesPerSocket":"NPS4","ProcCoreDisable":8},"@Redfish.SettingsApplyTime":{"ApplyTime":"OnReset"}}'
expect 200 "valid BIOS PATCH"
get "$SETTINGS"; check 'd["Attributes"]["SriovSupport"] == "Enabled" and d["Attributes"]["ProcCoreDisable"] == 8' "pending visible"
get "$BIOS"; check 'd["Attributes"]["SriovSupport"] == "Disabled"' "Bios unchanged while pending"
reset ForceOff
mock GET state; check 'd["bios"]["pending"]["NumaNodesPerSocket"] == "NPS4"' "ForceOff alone applies nothing"
reset On
get "$BIOS"
check 'd["Attributes"]["SriovSupport"] == "Enabled" and d["Attributes"]["NumaNodesPerSocket"] == "NPS4" and d["Attributes"]["ProcCoreDisable"] == 8' \
    "applied at the boot"
check 'd["@Redfish.Settings"]["Time"] and d["@Redfish.Settings"]["Messages"][0]["MessageId"].endswith(".Success")' "Settings Time/Messages"
mock GET state; check 'd["bios"]["pending"] == {}' "nothing pending after the boot"
mock POST config '{"bios_ignore": "SriovSupport"}'; expect 400 "bios_ignore not a list"
config '{"bios_ignore": ["SriovSupport"]}'
patch "$SETTINGS" '{"Attributes":{"SriovSupport":"Disabled","NumaNodesPerSocket":"NPS2"}}'
expect 200 "BIOS PATCH with an ignored attribute"
reset ForceRestart
get "$BIOS"
check 'd["Attributes"]["SriovSupport"] == "Enabled" and d["Attributes"]["NumaNodesPerSocket"] == "NPS2"' \
    "bios_ignore: the ignored attribute did not take, the other did"
mock GET state; check 'd["bios"]["pending"] == {}' "bios_ignore: dropped, not left pending"
config '{"bios_ignore": []}'
patch "$SETTINGS" '{"Attributes":{"AdminPhone":"555-0100"},"@Redfish.SettingsApplyTime":{"ApplyTime":"Immediate"}}'
expect 200 "Immediate BIOS PATCH"
get "$BIOS"; check 'd["Attributes"]["AdminPhone"] == "555-0100"' "Immediate applies at once"
post "$BIOS/Actions/Bios.ResetBios" '{}'; expect 204 "ResetBios"
get "$BIOS"; check 'd["ResetBiosToDefaultsPending"] is True and d["Attributes"]["SriovSupport"] == "Enabled"' "defaults pending"
reset ForceRestart
get "$BIOS"
check 'd["ResetBiosToDefaultsPending"] is False and d["Attributes"]["SriovSupport"] == "Disabled" and d["Attributes"]["AdminPhone"] == ""' \
    "defaults applied at the boot"

section "firmware"
get /redfish/v1/UpdateService
SIMPLE=$(val 'd["Actions"]["#UpdateService.SimpleUpdate"]["target"]')
PUSH=$(val 'd["MultipartHttpPushUri"]')
get "$INV"
check 'sorted(m["@odata.id"].rsplit("/", 1)[1] for m in d["Members"]) == sorted(["BMC", "BIOS", "NIC0", "CPLD"] + ["GPU%d" % n for n in range(8)])' \
    "inventory members"
get "$INV/CPLD"; check 'd["Updateable"] is False' "CPLD not updateable"
post "$SIMPLE" '{"TransferProtocol":"HTTP"}'; expect 400 "SimpleUpdate without ImageURI"; msgid ActionParameterMissing "no ImageURI"
post "$SIMPLE" "{\"ImageURI\":\"http://10.0.0.5/fw/nic_1.bin\",\"Targets\":[\"$INV/Nope\"]}"; expect 400 "unknown target"
post "$SIMPLE" "{\"ImageURI\":\"http://10.0.0.5/fw/cpld_2.bin\",\"Targets\":[\"$INV/CPLD\"]}"; expect 400 "non-updateable target"
post "$SIMPLE" '{"ImageURI":"http://10.0.0.5/fw/nic_1.bin","TransferProtocol":"GOPHER"}'; expect 400 "bad TransferProtocol"
post "$SIMPLE" '{"ImageURI":"http://10.0.0.5/fw/mystery.bin"}'; expect 400 "no Targets, image names no component"
post "$SIMPLE" "{\"ImageURI\":\"http://10.0.0.5/fw/nic_22.36.1.bin\",\"TransferProtocol\":\"HTTP\",\"Targets\":[\"$INV/NIC0\"]}"
expect 202 "SimpleUpdate NIC0"
MON=$(header Location)
check "d['TaskState'] == 'New' and d['TaskMonitor'] == '$MON'" "202 body is the Task"
TASK=$(val 'd["@odata.id"]')
case "$MON" in /redfish/v1/TaskService/TaskMonitors/*) ;; *) fail "monitor URI '$MON'" ;; esac
post "$SIMPLE" "{\"ImageURI\":\"http://10.0.0.5/fw/nic_22.36.2.bin\",\"Targets\":[\"$INV/NIC0\"]}"
expect 503 "second update while one runs"; msgid UpdateInProgress "second update"
get "$INV/NIC0"; check 'd["Version"] == "22.31.6"' "version unchanged while running"
poll "$MON"
truth "$POLLED" "202:Running:0 202:Running:25 202:Running:50 202:Running:75 202:Running:100 200:Completed:100" "task progression"
get "$TASK"
check 'd["TaskState"] == "Completed" and d["TaskStatus"] == "OK" and any(m["MessageId"].endswith(".UpdateSuccessful") for m in d["Messages"])' \
    "completed task"
get /redfish/v1/TaskService/Tasks; check "{'@odata.id': '$TASK'} in d['Members']" "task listed"
get "$INV/NIC0"; check 'd["Version"] == "22.36.1"' "new NIC version"
post "$SIMPLE" "{\"ImageURI\":\"http://10.0.0.5/fw/nic_bad_22.40.0.bin\",\"Targets\":[\"$INV/NIC0\"]}"; expect 202 "bad image"
poll "$(header Location)"
check 'd["TaskState"] == "Exception" and d["TaskStatus"] == "Critical" and any(m["MessageId"].endswith(".VerificationFailed") for m in d["Messages"])' \
    "bad image fails"
get "$INV/NIC0"; check 'd["Version"] == "22.36.1"' "version unchanged by the bad image"
post "$SIMPLE" '{"ImageURI":"http://10.0.0.5/fw/gpu_96.00.99.00.01.bin"}'; expect 202 "GPU image without Targets"
poll "$(header Location)"
mock GET state
check 'all(d["firmware"]["GPU%d" % n] == "96.00.99.00.01" and d["update_count"]["GPU%d" % n] == 1 for n in range(8))' \
    "all GPUs updated once"
check 'd["update_count"]["NIC0"] == 1 and d["update_count"]["BMC"] == 0' "update counts"
post "$SIMPLE" "{\"ImageURI\":\"https://10.0.0.5/fw/bios_1.1.0.bin\",\"Targets\":[\"$INV/BIOS\"]}"; expect 202 "BIOS update"
poll "$(header Location)"
check 'd["TaskState"] == "Completed" and {"AwaitToActivate", "ResetRequired"} <= {m["MessageId"].rsplit(".", 1)[1] for m in d["Messages"]}' \
    "BIOS task asks for a reset"
get "$INV/BIOS"; check 'd["Version"] == "1.0.0"' "BIOS version waits for the boot"
reset ForceRestart
get "$INV/BIOS"; check 'd["Version"] == "1.1.0"' "BIOS version after the boot"
get "$SYS"; check 'd["BiosVersion"] == "1.1.0"' "BiosVersion after the boot"
login secret; BMCTOKEN=$TOKEN
post "$SIMPLE" "{\"ImageURI\":\"http://10.0.0.5/fw/bmc_2.1.0.bin\",\"Targets\":[\"$INV/BMC\"]}"; expect 202 "BMC update"
poll "$(header Location)"
truth "${POLLED##* }" "200:Completed:100" "BMC task completes"
for i in 1 2 3; do
    get /redfish/v1/; expect 503 "BMC rebooting, request $i"
    truth "$(header Retry-After)" 1 "Retry-After while rebooting"
done
get /redfish/v1/Managers/BMC.Embedded.1; expect 200 "BMC back"
check 'd["FirmwareVersion"] == "2.1.0"' "Manager FirmwareVersion"
req GET "$B$SYS" -H "X-Auth-Token: $BMCTOKEN"; expect 401 "sessions dropped by the BMC reboot"

section "multipart push"
printf 'not really firmware\n' >"$T/image"
printf '{"Targets":["%s/GPU3"],"@Redfish.OperationApplyTime":"Immediate"}' "$INV" >"$T/params.json"
req POST "$B$PUSH" "${AUTH[@]}" -F "UpdateParameters=<$T/params.json;type=application/json" \
    -F "UpdateFile=@$T/image;filename=gpu_97.00.01.bin;type=application/octet-stream"
expect 202 "multipart push"
poll "$(header Location)"
get "$INV/GPU3"; check 'd["Version"] == "97.00.01"' "pushed GPU3 version"
mock GET state; check 'd["update_count"]["GPU3"] == 2 and d["update_count"]["GPU2"] == 1' "push counted for GPU3 only"
req POST "$B$PUSH" "${AUTH[@]}" -F "UpdateParameters=<$T/params.json;type=application/json"
expect 400 "push without UpdateFile"; msgid MissingOrMalformedPart "no UpdateFile"
req POST "$B$PUSH" "${AUTH[@]}" -F "UpdateFile=@$T/image;filename=gpu_1.bin"
expect 400 "push without UpdateParameters"; msgid MissingOrMalformedPart "no UpdateParameters"
post "$PUSH" '{"Targets":[]}'; expect 415 "JSON to the push URI"
config '{"max_image_bytes": 8}'
get /redfish/v1/UpdateService; check 'd["MaxImageSizeBytes"] == 8' "MaxImageSizeBytes"
req POST "$B$PUSH" "${AUTH[@]}" -F "UpdateParameters=<$T/params.json;type=application/json" \
    -F "UpdateFile=@$T/image;filename=gpu_98.bin"
expect 413 "image over MaxImageSizeBytes"
config '{"max_image_bytes": 16777216}'

section "general"
get /redfish/v1/Nope; expect 404 "unknown URI"; msgid ResourceNotFound "unknown URI"
req DELETE "$B$SYS" "${AUTH[@]}"; expect 405 "DELETE a system"
case "$(header Allow)" in *PATCH*) ;; *) fail "Allow of the system: '$(header Allow)'" ;; esac
get "$RESET"; expect 405 "GET an action"
req POST "$B$RESET" "${AUTH[@]}" -H 'Content-Type: text/plain' -d '{"ResetType":"On"}'; expect 415 "non-JSON body"
post "$RESET" '{"ResetType":'; expect 400 "malformed JSON"; msgid MalformedJSON "malformed JSON"
config '{"fail_next_503": 2}'
get /redfish/v1/; expect 503 "fail_next_503 #1"
truth "$(header Retry-After)" 1 "Retry-After"
req GET "$B/redfish/v1/"; expect 503 "fail_next_503 #2"
get /redfish/v1/; expect 200 "after fail_next_503"
mock POST config '{"no_such_knob": 1}'; expect 400 "unknown knob"
mock POST config '{"power_delay_s": "fast"}'; expect 400 "knob of the wrong type"
config '{"delay_ms": 300}'
START=$(date +%s%N); get /redfish/v1/; END=$(date +%s%N)
[ $(((END - START) / 1000000)) -ge 300 ] || fail "delay_ms not applied"
config '{"delay_ms": 0}'
mock GET state; check 'd["requests"] > 100' "request counter"
B=http://127.0.0.1:$((PB + 2))
mock GET state
check 'd["serial"] == "MOCK0002" and d["power"] == "Off" and d["boots"] == [] and d["actions"] == [] and d["update_count"]["BMC"] == 0' \
    "BMC 2 untouched by the tests on BMC 0"

section "event logs"
B=http://127.0.0.1:$((PB + 1))
MGR=/redfish/v1/Managers/BMC.Embedded.1
SEL=$SYS/LogServices/SEL/Entries
get "$SYS"; check "d['LogServices']['@odata.id'] == '$SYS/LogServices'" "system LogServices"
get "$SYS/LogServices"; check "d['Members'] == [{'@odata.id': '$SYS/LogServices/SEL'}]" "system log services"
get "$SYS/LogServices/SEL"; check "d['LogEntryType'] == 'SEL' and d['Entries']['@odata.id'] == '$SEL'" "SEL service"
get "$MGR/LogServices/EventLog"; check "d['Id'] == 'EventLog'" "manager EventLog service"
get "$SEL"; check 'd["Members"] == [] and d["Members@odata.count"] == 0' "SEL starts empty"
mock POST log '{"severity":"Critical","message":"DIMM A1 uncorrectable ECC","created":"2024-06-01T12:00:00Z"}'
expect 200 "add a SEL entry"
check "d['@odata.id'] == '$SEL/1' and d['EntryType'] == 'SEL' and d['Created'] == '2024-06-01T12:00:00Z'" "the new entry"
mock POST log '{"service":"SEL","severity":"Warning","message":"fan slow","created":null}'
check '"Created" not in d and d["Id"] == "2"' "an entry without Created"
mock POST log '{"service":"SEL","message":"boot"}'; check 'd["Severity"] == "OK" and d["Created"]' "defaults"
mock POST log '{"service":"EventLog","severity":"OK","message":"BMC up"}'
check "d['@odata.id'] == '$MGR/LogServices/EventLog/Entries/1' and d['EntryType'] == 'Event'" "manager log entry"
mock POST log '{"severity":"Fatal"}'; expect 400 "unknown severity"
mock POST log '{"service":"Nope"}'; expect 400 "unknown log service"
mock GET state; check 'd["logs"] == {"SEL": 3, "EventLog": 1}' "state counts log entries"
get "$SEL"; check 'len(d["Members"]) == 3 and d["Members"][0]["Message"] == "DIMM A1 uncorrectable ECC"' "entries inline"
check '"Members@odata.nextLink" not in d' "one page"
config '{"log_page_size": 2}'
get "$SEL"; check "len(d['Members']) == 2 and d['Members@odata.nextLink'] == '$SEL?\$skip=2' and d['Members@odata.count'] == 3" "page 1 of 2"
get "$SEL?\$skip=2"; check 'len(d["Members"]) == 1 and d["Members"][0]["Id"] == "3" and "Members@odata.nextLink" not in d' "page 2 of 2"
get "$SEL?\$skip=1&\$top=1"; check 'd["Members"][0]["Id"] == "2" and d["Members@odata.nextLink"].endswith("skip=2")' "\$skip and \$top"
get "$SEL?\$skip=x"; expect 400 "bad \$skip"; msgid QueryParameterValueTypeError "bad \$skip"
config '{"log_expand": false, "log_page_size": 0}'
get "$SEL"; check "d['Members'] == [{'@odata.id': '$SEL/' + n} for n in '123']" "links only"
get "$SEL/2"; check 'd["Message"] == "fan slow" and d["Severity"] == "Warning"' "an entry by its link"
get "$SEL/9"; expect 404 "no such entry"
post "$SYS/LogServices/SEL/Actions/LogService.ClearLog" '{}'; expect 204 "ClearLog"
get "$SEL"; check 'd["Members"] == []' "cleared"
get "$SEL/2"; expect 404 "a cleared entry"
mock POST log '{"message":"after clear"}'; check 'd["Id"] == "4"' "ids go on after a clear"
config '{"log_services": false}'
get "$SYS"; check '"LogServices" not in d' "system without LogServices"
get "$MGR"; check '"LogServices" not in d' "manager without LogServices"
get "$SYS/LogServices"; expect 404 "LogServices hidden"
get "$SEL"; expect 404 "entries hidden"
config '{"log_services": true, "log_expand": true, "log_page_size": 50}'

section "absolute links (link_origins)"
B=http://127.0.0.1:$((PB + 2))
O=http://127.0.0.1:9
REG=/redfish/v1/Registries/BiosAttributeRegistryGX8.v1_0_0
mock POST config '{"link_origins": {"nope": "http://x"}}'; expect 400 "unknown link kind"
mock POST config '{"link_origins": {"sessions": 9}}'; expect 400 "link origin not a string"
mock POST config '{"link_origins": "http://x"}'; expect 400 "link_origins not an object"
config "{\"link_origins\": {\"sessions\": \"$O\", \"session_location\": \"$O\", \"push_uri\": \"$O\", \"task_monitor\": \"$O\", \"reset_target\": \"$O\", \"registry\": \"$O\"}}"
get /redfish/v1/; check "d['Links']['Sessions']['@odata.id'] == '$O/redfish/v1/SessionService/Sessions'" "root Links.Sessions elsewhere"
get /redfish/v1/SessionService; check "d['Sessions']['@odata.id'] == '$O/redfish/v1/SessionService/Sessions'" "SessionService.Sessions elsewhere"
login secret; expect 201 "login at the real Sessions path"
case "$(header Location)" in "$O/redfish/v1/SessionService/Sessions/"*) ;; *) fail "session Location '$(header Location)'" ;; esac
get /redfish/v1/UpdateService; check "d['MultipartHttpPushUri'] == '$O/redfish/v1/UpdateService/upload'" "push URI elsewhere"
get "$SYS"; check "d['Actions']['#ComputerSystem.Reset']['target'] == '$O$RESET'" "reset target elsewhere"
get "$REG"; check "d['Location'][0]['Uri'] == '$O$REG.json'" "registry Location Uri elsewhere"
post /redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate "{\"ImageURI\":\"http://10.0.0.5/fw/nic_22.50.0.bin\",\"Targets\":[\"$INV/NIC0\"]}"
expect 202 "SimpleUpdate with the monitor elsewhere"
MON=$(header Location)
check "d['TaskMonitor'] == '$MON'" "Task's TaskMonitor elsewhere too"
case "$MON" in "$O/redfish/v1/TaskService/TaskMonitors/"*) ;; *) fail "monitor Location '$MON'" ;; esac
poll "${MON#"$O"}"
truth "${POLLED##* }" "200:Completed:100" "the task runs at its real path"
config '{"link_origins": {"sessions": "'"$B"'"}}'
get /redfish/v1/; check "d['Links']['Sessions']['@odata.id'] == '$B/redfish/v1/SessionService/Sessions'" "a link on the BMC's own origin"
get /redfish/v1/UpdateService; check "d['MultipartHttpPushUri'] == '/redfish/v1/UpdateService/upload'" "other links stay paths"
config '{"link_origins": {}}'
get /redfish/v1/; check "d['Links']['Sessions']['@odata.id'] == '/redfish/v1/SessionService/Sessions'" "links back to paths"

section "sensors and power limits"
start sensors $((PB + 60)) --count 2
B=http://127.0.0.1:$((PB + 60))
MAIN=/redfish/v1/Chassis/Chassis.Embedded.1
GPUB=/redfish/v1/Chassis/GPU_Baseboard
DRV=$SYS/Storage/NVMe/Drives/NVMe1
req GET "$B/redfish/v1/"
check 'd["ProtocolFeaturesSupported"]["ExpandQuery"] == {"ExpandAll": True, "Levels": True, "MaxLevels": 6, "Links": True, "NoLinks": True}' \
    "root advertises \$expand"
get "$SYS"; check "d['Links']['Chassis'] == [{'@odata.id': '$MAIN'}, {'@odata.id': '$GPUB'}]" "system's chassis: rack + GPU baseboard"
get "$MAIN"
check 'all(d[k]["@odata.id"].endswith("/" + k) for k in ("Sensors", "EnvironmentMetrics", "PowerSubsystem", "ThermalSubsystem", "Power", "Thermal"))' \
    "main chassis links every shape (both)"
check 'len(d["Links"]["Drives"]) == 4' "main chassis links its drives"
get "$GPUB"; check 'd["ChassisType"] == "Module" and "PowerSubsystem" not in d and "Sensors" in d' "GPU baseboard"
get "$MAIN/Sensors"; check 'len(d["Members"]) == 22 and all(len(m) == 1 for m in d["Members"])' "Sensors: 22 links"
get "$MAIN/Sensors/CPU0_Temp"
check 'd["ReadingType"] == "Temperature" and d["ReadingUnits"] == "Cel" and d["PhysicalContext"] == "CPU" and d["Reading"] == 52.0' \
    "a Sensor"
check 'd["Thresholds"] == {"UpperCaution": {"Reading": 90}, "UpperCritical": {"Reading": 95}} and d["Status"]["Health"] == "OK"' \
    "its thresholds and health"
ETAG=$(header ETag)
get "$MAIN/Sensors?\$expand=.(\$levels=1)"
check 'len(d["Members"]) == 22 and all("Reading" in m for m in d["Members"])' "\$expand=.(\$levels=1) expands the members"
get "$MAIN/Sensors?\$expand=*"; check 'all("Reading" in m for m in d["Members"])' "\$expand=*"
get "$MAIN/PowerSubsystem?\$expand=.(\$levels=3)"
check 'd["PowerSupplies"]["Members"][1]["Metrics"]["InputPowerWatts"]["Reading"] == 1502' "\$levels=3 reaches the PSU metrics"
get "$MAIN/PowerSubsystem?\$expand=.(\$levels=1)"
check '"Members" in d["PowerSupplies"] and len(d["PowerSupplies"]["Members"][0]) == 1' "\$levels=1 stops at one level"
get "$MAIN?\$expand=."; check 'len(d["Links"]["Drives"][0]) == 1 and len(d["Sensors"]["Members"][0]) == 1' "'.' leaves Links alone, one level"
get "$MAIN?\$expand=~"; check '"Name" in d["Links"]["Drives"][0] and len(d["Sensors"]) == 1' "'~' expands only Links"
get "$MAIN/Sensors?\$expand=.(\$levels=7)"; expect 400 "\$levels over MaxLevels"; msgid QueryParameterValueFormatError "\$levels=7"
get "$MAIN/Sensors?\$expand=all"; expect 400 "bad \$expand"
mock POST sensor '{"id":"CPU0_Temp","reading":71.5,"health":"Warning","thresholds":{"UpperCaution":70,"UpperCritical":null}}'
expect 200 "__mock/sensor"; check 'd["reading"] == 71.5 and d["thresholds"] == {"UpperCaution": 70}' "its answer"
get "$MAIN/Sensors/CPU0_Temp"
check 'd["Reading"] == 71.5 and d["Status"]["Health"] == "Warning" and d["Thresholds"] == {"UpperCaution": {"Reading": 70}}' "Sensor changed"
[ "$(header ETag)" != "$ETAG" ] || fail "ETag unchanged by a sensor change"
get "$MAIN/Thermal"
check '[(t["Name"], t["ReadingCelsius"], t["Status"]["Health"], t.get("UpperThresholdNonCritical"), "UpperThresholdCritical" in t) for t in d["Temperatures"] if t["MemberId"] == "CPU0_Temp"] == [("CPU0 Temp", 71.5, "Warning", 70, False)]' \
    "deprecated Thermal shows it"
check 'len(d["Temperatures"]) == 6 and len(d["Fans"]) == 6 and d["Fans"][0]["ReadingUnits"] == "RPM"' "Thermal: 6 temperatures (no drives), 6 fans"
get "$MAIN/ThermalSubsystem/ThermalMetrics"
check '[t["Reading"] for t in d["TemperatureReadingsCelsius"] if t["DeviceName"] == "CPU0 Temp"] == [71.5] and len(d["TemperatureReadingsCelsius"]) == 10' \
    "ThermalMetrics excerpts show it (drives included)"
mock POST sensor '{"id":"Fan2","reading":8000,"health":"Critical"}'
get "$MAIN/ThermalSubsystem/Fans/Fan2"; check 'd["SpeedPercent"] == {"SpeedRPM": 8000, "Reading": 50.0, "DataSourceUri": "'"$MAIN"'/Sensors/Fan2"} and d["Status"]["Health"] == "Critical"' "Fan"
mock POST sensor '{"id":"PSU3_Input_Power","reading":1777,"health":"Warning"}'
get "$MAIN/PowerSubsystem/PowerSupplies/PSU3"; check 'd["Status"]["Health"] == "Warning"' "PowerSupply health"
get "$MAIN/PowerSubsystem/PowerSupplies/PSU3/Metrics"; check 'd["InputPowerWatts"]["Reading"] == 1777' "PowerSupplyMetrics"
get "$MAIN/Power"; check '[p["PowerInputWatts"] for p in d["PowerSupplies"] if p["Name"] == "PSU3"] == [1777] and d["PowerControl"][0]["PowerConsumedWatts"] == 6200' \
    "deprecated Power"
mock POST sensor '{"id":"NVMe1_Temp","reading":"hot"}'
get "$DRV"; check "d['EnvironmentMetrics']['@odata.id'] == '$DRV/EnvironmentMetrics'" "a drive links its metrics"
get "$DRV/EnvironmentMetrics"; check 'd["TemperatureCelsius"]["Reading"] == "hot"' "absurd values are served as set"
mock POST sensor '{"id":"CPU0_Temp","name":"Hot \u00e9 CPU"}'
get "$MAIN/Sensors/CPU0_Temp"; check 'd["Name"] == "Hot \u00e9 CPU"' "a sensor's name"
get "$GPUB/Thermal"; check 'len(d["Temperatures"]) == 8 and d["Fans"] == []' "GPU baseboard Thermal"
get "$GPUB/EnvironmentMetrics"; check 'd["PowerWatts"]["Reading"] == 4200 and "PowerLimitWatts" not in d' "GPU baseboard draw"
mock POST sensor '{"id":"Nope"}'; expect 400 "unknown sensor"
mock POST sensor '{"id":"Fan1","health":"Hot"}'; expect 400 "unknown health"
mock POST sensor '{"id":"Fan1","thresholds":{"UpperFatal":1}}'; expect 400 "unknown threshold"
mock GET state; check 'd["sensors"]["PSU3_Input_Power"] == 1777 and d["power_limit"] == {"set_point": None, "control_mode": "Disabled", "allowable_min": 2000, "allowable_max": 12000, "exception": "LogEventOnly"}' \
    "state: sensors and power limit"
mock GET sensors; check 'd["Fan2"]["health"] == "Critical"' "__mock/sensors"

# Shapes.
shape() { config "{\"sensor_shapes\": \"$1\"}"; get "$MAIN"; }
shape modern; check '"Power" not in d and "Thermal" not in d and "Power@Redfish.Deprecated" not in d and "Sensors" in d' "modern: no Power/Thermal"
get "$MAIN/Thermal"; expect 404 "modern: Thermal hidden"
shape subsystems; check '"Sensors" not in d and "EnvironmentMetrics" in d' "subsystems: no Sensors"
get "$MAIN/Sensors/Fan1"; expect 404 "subsystems: a Sensor hidden"
shape sensors; check '"Sensors" in d and "EnvironmentMetrics" not in d and "Power" not in d' "sensors: the collection only"
shape deprecated; check '"Power" in d and "Thermal" in d and "Sensors" not in d and "ThermalSubsystem" not in d' "deprecated: Power/Thermal only"
get "$MAIN/EnvironmentMetrics"; expect 404 "deprecated: EnvironmentMetrics hidden"
get "$DRV"; check '"EnvironmentMetrics" not in d' "deprecated: drives without metrics"
get "$DRV/EnvironmentMetrics"; expect 404 "deprecated: drive metrics hidden"
shape none; check 'not {"Sensors", "Power", "Thermal", "EnvironmentMetrics", "PowerSubsystem", "ThermalSubsystem"} & set(d)' "none: nothing"
mock POST config '{"sensor_shapes": "some"}'; expect 400 "unknown shape"
shape both
config '{"expand_query": "ignored"}'
get /redfish/v1/; check '"ExpandQuery" in d["ProtocolFeaturesSupported"]' "ignored: still advertised"
get "$MAIN/Sensors?\$expand=.(\$levels=1)"; check 'all(len(m) == 1 for m in d["Members"])' "ignored: links only"
config '{"expand_query": "none"}'
get /redfish/v1/; check '"ExpandQuery" not in d["ProtocolFeaturesSupported"]' "none: not advertised"
get "$MAIN/Sensors?\$expand=."; expect 501 "none: \$expand answers 501"; msgid QueryNotSupported "\$expand not supported"
mock POST config '{"expand_query": "sometimes"}'; expect 400 "unknown expand_query"
config '{"expand_query": "refused"}'
get /redfish/v1/; check '"ExpandQuery" in d["ProtocolFeaturesSupported"]' "refused: still advertised"
get "$MAIN/Sensors?\$expand=."; expect 400 "refused: \$expand answers 400"
get "$MAIN/Sensors"; expect 200 "refused: without \$expand"
config '{"expand_query": "full"}'

# The power limit.
get "$MAIN/EnvironmentMetrics"; ETAG=$(header ETag)
check 'd["PowerLimitWatts"]["SetPoint"] is None and d["PowerLimitWatts"]["ControlMode"] == "Disabled" and d["PowerLimitWatts"]["AllowableMax"] == 12000' \
    "PowerLimitWatts: none set"
patch "$MAIN/EnvironmentMetrics" '{"PowerLimitWatts":{"SetPoint":9000,"ControlMode":"Automatic"}}' -H 'If-Match: "stale"'
expect 412 "limit PATCH with a stale If-Match"
patch "$MAIN/EnvironmentMetrics" '{"PowerLimitWatts":{"ControlMode":"Automatic"}}' -H "If-Match: $ETAG"
expect 400 "enabling without a set point"; msgid PropertyMissing "no SetPoint"
patch "$MAIN/EnvironmentMetrics" '{"PowerLimitWatts":{"SetPoint":50000,"ControlMode":"Automatic"}}' -H "If-Match: $ETAG"
expect 400 "SetPoint out of range"; msgid PropertyValueOutOfRange "SetPoint out of range"
check 'd["error"]["@Message.ExtendedInfo"][0]["RelatedProperties"] == ["/PowerLimitWatts/SetPoint"]' "RelatedProperties of SetPoint"
patch "$MAIN/EnvironmentMetrics" '{"PowerLimitWatts":{"SetPoint":9000,"ControlMode":"Sometimes"}}' -H "If-Match: $ETAG"
expect 400 "bad ControlMode"; msgid PropertyValueNotInList "bad ControlMode"
patch "$MAIN/EnvironmentMetrics" '{"PowerWatts":{"Reading":1}}' -H "If-Match: $ETAG"; expect 400 "read-only property"
patch "$MAIN/EnvironmentMetrics" '{"PowerLimitWatts":{"SetPoint":9000,"ControlMode":"Automatic"}}' -H "If-Match: $ETAG"
expect 200 "limit PATCH"; check 'd["PowerLimitWatts"]["SetPoint"] == 9000 and d["PowerLimitWatts"]["ControlMode"] == "Automatic"' "limit set"
[ "$(header ETag)" != "$ETAG" ] || fail "ETag unchanged by a limit PATCH"
get "$MAIN/Power"; check 'd["PowerControl"][0]["PowerLimit"]["LimitInWatts"] == 9000' "the deprecated view agrees"
patch "$MAIN/Power" '{"PowerControl":[{"PowerLimit":{"LimitInWatts":100}}]}'; expect 400 "LimitInWatts out of range"
msgid PropertyValueOutOfRange "LimitInWatts out of range"
patch "$MAIN/Power" '{"PowerControl":[{"PowerLimit":{"LimitInWatts":null}}]}'; expect 200 "remove the limit (deprecated)"
check 'd["PowerControl"][0]["PowerLimit"]["LimitInWatts"] is None' "LimitInWatts null"
get "$MAIN/EnvironmentMetrics"; check 'd["PowerLimitWatts"]["ControlMode"] == "Disabled" and d["PowerLimitWatts"]["SetPoint"] == 9000' \
    "removed: Disabled, the set point kept"
patch "$MAIN/Power" '{"PowerControl":[{"PowerLimit":{"LimitInWatts":8000}}]}'; expect 200 "set the limit (deprecated)"
mock GET state; check 'd["power_limit"]["set_point"] == 8000 and d["power_limit"]["control_mode"] == "Automatic"' "set again, on"
mock POST power_limit '{"exception": "HardPowerOff"}'; expect 200 "__mock/power_limit: exception"
get "$MAIN/Power"; check 'd["PowerControl"][0]["PowerLimit"]["LimitException"] == "HardPowerOff" and "LimitException@Redfish.AllowableValues" not in d["PowerControl"][0]["PowerLimit"]' \
    "LimitException from the state"
patch "$MAIN/Power" '{"PowerControl":[{"PowerLimit":{"LimitInWatts":8000,"LimitException":"Sometimes"}}]}'; expect 400 "unknown LimitException"
config '{"limit_exceptions": ["NoAction", "HardPowerOff"]}'
get "$MAIN/Power"; check 'd["PowerControl"][0]["PowerLimit"]["LimitException@Redfish.AllowableValues"] == ["NoAction", "HardPowerOff"]' \
    "limit_exceptions: AllowableValues"
patch "$MAIN/Power" '{"PowerControl":[{"PowerLimit":{"LimitInWatts":8000,"LimitException":"LogEventOnly"}}]}'
expect 400 "LimitException not allowed"; msgid PropertyValueNotInList "LimitException not in the AllowableValues"
patch "$MAIN/Power" '{"PowerControl":[{"PowerLimit":{"LimitInWatts":8000,"LimitException":"NoAction"}}]}'; expect 200 "LimitException set"
mock GET state; check 'd["power_limit"]["exception"] == "NoAction"' "state: the exception"
mock POST config '{"limit_exceptions": ["Sometimes"]}'; expect 400 "limit_exceptions: unknown value"
config '{"limit_exceptions": []}'
mock POST power_limit '{"exception": "LogEventOnly"}'
mock POST power_limit '{"exception": "Sometimes"}'; expect 400 "__mock/power_limit: bad exception"
mock POST power_limit '{"set_point": 7000, "allowable_max": 7500}'; expect 200 "__mock/power_limit"
get "$MAIN/EnvironmentMetrics"; check 'd["PowerLimitWatts"]["SetPoint"] == 7000 and d["PowerLimitWatts"]["AllowableMax"] == 7500' "changed behind the client's back"
mock POST power_limit '{"control_mode": "Sometimes"}'; expect 400 "__mock/power_limit: bad mode"
mock POST power_limit '{"allowable_max": 12000}'
patch "$GPUB/EnvironmentMetrics" '{"PowerLimitWatts":{"SetPoint":3000}}'; expect 405 "no limit on the GPU baseboard"
config '{"sensor_shapes": "deprecated"}'
patch "$MAIN/EnvironmentMetrics" '{"PowerLimitWatts":{"SetPoint":3000}}'; expect 404 "hidden EnvironmentMetrics: no PATCH"
config '{"sensor_shapes": "both"}'

# Bad days.
config '{"fail_sensor_503": 2, "retry_after": 2}'
get "$SYS"; expect 200 "fail_sensor_503: other resources answer"
get "$MAIN/Sensors"; expect 503 "fail_sensor_503 #1"; truth "$(header Retry-After)" 2 "its Retry-After"
get "$MAIN/Power"; expect 503 "fail_sensor_503 #2"
get "$MAIN/Power"; expect 200 "after fail_sensor_503"
config '{"retry_after": 1}'
O=http://127.0.0.1:9
config "{\"link_origins\": {\"sensor_member\": \"$O\", \"sensor_link\": \"$O\", \"chassis\": \"$O\"}}"
get "$SYS"; check "d['Links']['Chassis'][0]['@odata.id'] == '$O$MAIN'" "chassis links elsewhere"
get "$MAIN"; check "d['Sensors']['@odata.id'] == '$O$MAIN/Sensors' and d['Links']['Drives'][0]['@odata.id'].startswith('$O/')" \
    "the chassis' sensor links and drives elsewhere"
get "$MAIN/Sensors?\$expand=.(\$levels=1)"; check "all(len(m) == 1 and m['@odata.id'].startswith('$O/') for m in d['Members'])" \
    "members elsewhere are not expanded"
get "$MAIN/ThermalSubsystem"; check "d['Fans']['@odata.id'] == '$O$MAIN/ThermalSubsystem/Fans'" "parts elsewhere"
get "$DRV"; check "d['EnvironmentMetrics']['@odata.id'] == '$O$DRV/EnvironmentMetrics'" "drive metrics elsewhere"
config '{"link_origins": {}}'
config '{"extra_sensors": 3000}'
get "$MAIN/Sensors"; check 'len(d["Members"]) == 3022 and d["Members@odata.count"] == 3022' "extra_sensors 3000"
get "$MAIN/Sensors/Extra2999"; check 'd["Name"] == "Extra 2999 Temp" and d["ReadingUnits"] == "Cel"' "an extra sensor"
get "$MAIN/Sensors/Extra3000"; expect 404 "past the extra sensors"
get "$MAIN/Sensors?\$expand=.(\$levels=1)"; check 'len(d["Members"]) == 3022 and all("Reading" in m for m in d["Members"])' "expanded, all 3022"
mock POST config '{"extra_sensors": 20001}'; expect 400 "extra_sensors over 20000"
config '{"extra_sensors": 0}'
config '{"extra_chassis": 2, "chassis_padding_kb": 64}'
get "$SYS"; check 'len(d["Links"]["Chassis"]) == 4 and d["Links"]["Chassis"][3]["@odata.id"] == "/redfish/v1/Chassis/Extra1"' \
    "extra_chassis: listed"
get /redfish/v1/Chassis/Extra1; check 'd["ChassisType"] == "Module" and len(d["Oem"]["Padding"]) == 16384' "an extra chassis, padded"
[ "$(stat -c %s "$T/body")" -gt 65536 ] || fail "chassis_padding_kb: body under 64 KiB"
get /redfish/v1/Chassis/Extra2; expect 404 "past the extra chassis"
mock POST config '{"extra_chassis": 31}'; expect 400 "extra_chassis over 30"
config '{"extra_chassis": 0, "chassis_padding_kb": 0}'
config '{"broken_paths": {"/redfish/v1/Chassis/GPU_Baseboard/Sensors/GPU1_Temp": "garbage", "/secret": "garbage", "/redfish/v1/Chassis/GPU_Baseboard/Thermal": "500", "/redfish/v1/Chassis/GPU_Baseboard/Sensors/GPU2_Temp": "huge"}}'
get "$GPUB/Sensors/GPU1_Temp"; expect 200 "broken_paths garbage: 200"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/body" 2>/dev/null && fail "broken_paths garbage: the body is JSON"
get /secret/redfish/v1/Chassis/X; expect 200 "broken_paths: under a prefix"
get "$GPUB/Thermal"; expect 500 "broken_paths 500"
get "$GPUB/Sensors/GPU2_Temp"; expect 200 "broken_paths huge"; grep -q '"Reading": 1e400' "$T/body" || fail "broken_paths huge: no 1e400"
req GET "$B$GPUB/Sensors/GPU1_Temp"; expect 401 "broken_paths: after authentication"
get "$GPUB/Sensors/GPU3_Temp"; expect 200 "broken_paths: other paths answer"
mock POST config '{"broken_paths": {"/x": "sometimes"}}'; expect 400 "broken_paths: unknown kind"
mock POST config '{"broken_paths": {"x": "500"}}'; expect 400 "broken_paths: not a path"
config '{"broken_paths": {}}'
req GET "http://127.0.0.1:$((PB + 61))$MAIN/Sensors/CPU0_Temp" "${AUTH[@]}"
check 'd["Reading"] == 52.0 and d["Name"] == "CPU0 Temp"' "BMC 1 has its own sensor values"

section "fault injection"
start faults $((PB + 50)) --count 2
B=http://127.0.0.1:$((PB + 50))
mock POST config '{"fail_rate_503": 1.5}'; expect 400 "a rate above 1"
mock POST config '{"unreachable_mode": "sometimes"}'; expect 400 "unknown unreachable_mode"
mock POST config '{"fault_seed": "x"}'; expect 400 "fault_seed not an integer"
# draws SEED: the statuses of 40 GETs of the service root at 50 % 503s, seeded.
draws() {
    local i out=""
    config "{\"fail_rate_503\": 0.5, \"fault_seed\": $1, \"retry_after\": 0}"
    for i in $(seq 40); do req GET "$B/redfish/v1/"; out+="$CODE "; done
    DRAWS=$out
}
draws 11; FIRST=$DRAWS
N503=$(echo "$FIRST" | tr ' ' '\n' | grep -c 503)
CHECKS=$((CHECKS + 1)); [ "$N503" -ge 8 ] && [ "$N503" -le 32 ] || fail "fail_rate_503 0.5: $N503 of 40"
truth "$(echo "$FIRST" | tr ' ' '\n' | sort -u | tr '\n' ' ')" " 200 503 " "only 200s and 503s"
draws 11; truth "$DRAWS" "$FIRST" "the same fault_seed replays the same faults"
mock GET state; check "d['faults']['503'] == 2 * $N503 and d['requests'] == 80" "faults and requests counted"
config '{"fail_rate_503": 1.0, "retry_after": 0}'
get /redfish/v1/; expect 503 "fail_rate_503 1.0"; truth "$(header Retry-After)" 0 "retry_after 0"
for i in 1 2 3; do mock GET state; expect 200 "the control API is never faulted ($i)"; done
config '{"retry_after": 4, "retry_after_date": true}'
get /redfish/v1/; expect 503 "fail_rate_503 with an HTTP-date"
python3 - "$(header Retry-After)" "$(header Date)" <<'PY' || fail "Retry-After date is not Date + 4 s"
import sys
from email.utils import parsedate_to_datetime as p
sys.exit(0 if (p(sys.argv[1]) - p(sys.argv[2])).total_seconds() in (4, 5) else 1)
PY
CHECKS=$((CHECKS + 1))
config '{"fail_rate_503": 0, "fail_rate_429": 1.0, "retry_after": 1, "retry_after_date": false}'
get "$SYS"; expect 429 "fail_rate_429"; truth "$(header Retry-After)" 1 "429 Retry-After"
config '{"fail_rate_429": 0, "drop_rate": 1.0}'
get "$SYS"; expect 000 "drop_rate 1.0: no answer"
case "$(cat "$T/curlerr")" in *"Empty reply"*) ;; *) fail "drop: $(cat "$T/curlerr")" ;; esac
CHECKS=$((CHECKS + 1))
config '{"drop_rate": 0}'
mock GET state; check "d['faults']['dropped'] == 1 and d['actions'] == []" "a dropped request counted, no effect"
config '{"lose_next_answers": 1}'
post "$RESET" '{"ResetType":"On"}'; expect 000 "lose_next_answers: the answer is lost"
mock GET state
check "d['faults']['lost_answers'] == 1 and [a['reset_type'] for a in d['actions']] == ['On'] and d['actions'][0]['status'] == 204" \
    "the lost answer's reset was carried out"
post "$RESET" '{"ResetType":"ForceOff"}'; expect 204 "the next answer is not lost"
# Slow answers: the change is made at once, only the answer comes slow_answer_s later.
mock POST config '{"slow_answer_s": -1}'; expect 400 "slow_answer_s below 0"
mock POST config '{"slow_next_answers": 0.5}'; expect 400 "slow_next_answers not an integer"
config '{"slow_next_answers": 1, "slow_answer_s": 2}'
check 'd["slow_next_answers"] == 1 and d["slow_answer_s"] == 2' "slow_next_answers set"
curl -sS -o "$T/slowbody" -w '%{http_code} %{time_total}' -X PATCH "${AUTH[@]}" "${JSON[@]}" \
    -d '{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}' "$B$SYS" >"$T/slow" 2>&1 &
SLOW=$!
sleep 0.5
HELD_AT=$(date +%s%N)
mock GET state; expect 200 "slow answer: the control API answers while it is held"
check 'd["boot"]["target"] == "Pxe" and d["boot"]["enabled"] == "Once" and d["faults"]["slow_answers"] == 1' \
    "slow answer: the PATCH took effect before its answer"
mock GET config; check 'd["slow_next_answers"] == 0' "slow_next_answers counts down"
get "$SYS"; expect 200 "slow answer: the BMC answers its other requests meanwhile"
req GET "http://127.0.0.1:$((PB + 51))$SYS" "${AUTH[@]}"; expect 200 "slow answer: another BMC answers meanwhile"
CHECKS=$((CHECKS + 1))
[ $(( ($(date +%s%N) - HELD_AT) / 1000000 )) -lt 1200 ] || fail "slow answer: requests waited for the held answer"
CHECKS=$((CHECKS + 1))
kill -0 "$SLOW" 2>/dev/null && [ ! -s "$T/slow" ] || fail "slow answer: the PATCH answered early: $(cat "$T/slow")"
wait "$SLOW"
read -r SLOW_CODE SLOW_TIME <"$T/slow"
truth "$SLOW_CODE" 200 "slow answer: the PATCH answers 200 in the end"
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 2 else 1)' "$SLOW_TIME" || fail "slow answer after $SLOW_TIME s"
CHECKS=$((CHECKS + 1))
python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["Boot"]["BootSourceOverrideTarget"] == "Pxe" else 1)' \
    "$T/slowbody" || fail "slow answer: body $(head -c 300 "$T/slowbody")"
CHECKS=$((CHECKS + 1))
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Hdd"}}'; expect 200 "the next answer is not slow"
config '{"slow_next_answers": 1, "slow_answer_s": 2}'
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Cd"}}' --max-time 1; expect 000 "slow answer: the client gives up"
mock GET state; check 'd["boot"]["target"] == "Cd" and d["faults"]["slow_answers"] == 2' "slow answer: the change stays made"
mock GET config; check 'd["slow_next_answers"] == 0' "slow_next_answers back to 0"
sleep 1.3
get "$SYS"; expect 200 "slow answer: the BMC answers after the abandoned hold"
check 'd["Boot"]["BootSourceOverrideTarget"] == "Cd"' "slow answer: still applied"
CHECKS=$((CHECKS + 1))
! grep -q Traceback "$T/faults.err" || fail "slow answer: the mock crashed: $(cat "$T/faults.err")"
# Sessions.
login secret; expect 201 "login"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 200 "token works"
config '{"drop_sessions": true}'; check 'd["drop_sessions"] is False' "drop_sessions reads back false"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 401 "drop_sessions: the token is gone"
login secret
config '{"drop_sessions_after": 2}'
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 200 "drop_sessions_after 2: request 1"
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 401 "drop_sessions_after 2: request 2"
login secret
config '{"drop_sessions_rate": 1.0}'
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 401 "drop_sessions_rate 1.0"
config '{"drop_sessions_rate": 0}'
mock GET state; check "d['logins'] == 3 and d['faults']['sessions_dropped'] == 3 and d['sessions'] == 0" \
    "logins and dropped sessions counted"
# Outages.
config '{"unreachable_s": 1.5}'
sleep 0.2; get "$SYS"; expect 000 "unreachable (refuse)"
case "$(cat "$T/curlerr")" in *"onnect"*) ;; *) fail "refuse: $(cat "$T/curlerr")" ;; esac
CHECKS=$((CHECKS + 1))
sleep 1.6; get "$SYS"; expect 200 "back after unreachable_s"
config '{"unreachable_mode": "drop", "unreachable_s": 60}'
get "$SYS"; expect 000 "unreachable (drop)"
mock GET state; expect 200 "the control API answers during a drop outage"
check 'd["unreachable_for_s"] > 50' "unreachable_for_s"
config '{"unreachable_s": 0, "unreachable_mode": "refuse"}'
get "$SYS"; expect 200 "unreachable_s 0 ends it"
# A reboot mid-update.
login secret
config '{"reboot_during_update_s": 1.5, "bmc_reboot_requests": 0}'
post "$SIMPLE" "{\"ImageURI\":\"http://10.0.0.5/fw/bmc_2.7.0.bin\",\"Targets\":[\"$INV/BMC\"]}"; expect 202 "update to reboot in"
MON=$(header Location)
get "$MON"; expect 000 "the first poll reboots the BMC"
sleep 0.2; get "$MON"; expect 000 "the BMC is down meanwhile"
sleep 1.6
req GET "$B$SYS" -H "X-Auth-Token: $TOKEN"; expect 401 "back: the sessions are gone"
get "$MON"; expect 200 "back: the task is done"; check 'd["TaskState"] == "Completed"' "task completed"
mock GET state; check 'd["firmware"]["BMC"] == "2.7.0" and d["update_count"]["BMC"] == 1' "flashed once, new version"
config '{"reboot_during_update_s": 0, "bmc_reboot_requests": 3}'
# Clock skew.
config '{"clock_skew_s": -7200}'
get /redfish/v1/
python3 - "$(header Date)" <<'PY' || fail "Date is not 2 h behind"
import sys, time
from email.utils import parsedate_to_datetime as p
sys.exit(0 if abs(p(sys.argv[1]).timestamp() - (time.time() - 7200)) < 5 else 1)
PY
CHECKS=$((CHECKS + 1))
post "$SIMPLE" "{\"ImageURI\":\"http://10.0.0.5/fw/nic_22.60.0.bin\",\"Targets\":[\"$INV/NIC0\"]}"; expect 202 "update on a skewed clock"
MON=$(header Location); poll "$MON"
python3 - "$T/body" <<'PY' || fail "task times are not 2 h behind: $POLLED $(head -c 300 "$T/body")"
import json, sys, time
from datetime import datetime
d = json.load(open(sys.argv[1]))
behind = [time.time() - datetime.fromisoformat(d[k]).timestamp() for k in ("StartTime", "EndTime")]
sys.exit(0 if all(7195 <= b <= 7200 + 600 for b in behind) and d["TaskState"] == "Completed" else 1)
PY
CHECKS=$((CHECKS + 1))
config '{"clock_skew_s": 0}'

# ---------------------------------------------------------------------------------------------
section "accounts and passwords"
start accounts $((PB + 70)) --count 2
B=http://127.0.0.1:$((PB + 70))
B1=http://127.0.0.1:$((PB + 71))
ACCTS=/redfish/v1/AccountService/Accounts
ACCT=$ACCTS/1
config '{"power_delay_s": 0}'
get /redfish/v1/AccountService
check "d['Accounts']['@odata.id'] == '$ACCTS' and d['MinPasswordLength'] == 8 and d['MaxPasswordLength'] == 20" \
    "AccountService: Accounts and the password policy"
get "$ACCTS"; check "d['Members'] == [{'@odata.id': '$ACCT'}] and d['Members@odata.count'] == 1" "Accounts lists account 1"
get "$ACCT"
check 'd["Id"] == "1" and d["UserName"] == "admin" and d["RoleId"] == "Administrator" and d["Enabled"] is True and d["Locked"] is False' \
    "account 1 is the mock's user"
check '"Password" in d and d["Password"] is None and d["PasswordChangeRequired"] is False' "Password null, no change required"
grep -q secret "$T/body" && fail "the account shows the password"
ETAG=$(header ETag)
post "$ACCTS" '{"UserName":"ops","Password":"Operator123","RoleId":"Operator"}'; expect 405 "no new accounts"
login secret; expect 201 "login before the change"; OLDTOKEN=$TOKEN
patch "$ACCT" '{"Password":"Rackpilot2024"}' -H 'If-Match: "stale"'; expect 412 "password PATCH with a stale If-Match"
config '{"require_if_match": true}'
patch "$ACCT" '{"Password":"Rackpilot2024"}'; expect 428 "password PATCH without If-Match in strict mode"
config '{"require_if_match": false}'
patch "$ACCT" '{"Password":"short1"}' -H "If-Match: $ETAG"; expect 400 "password too short"
msgid PropertyValueFormatError "password too short"
check '"must be 8 to 20 characters" in d["error"]["@Message.ExtendedInfo"][0]["Message"] and d["error"]["@Message.ExtendedInfo"][0]["MessageArgs"] == ["******", "Password"]' \
    "the length limit stated, the password masked"
check 'd["error"]["@Message.ExtendedInfo"][0]["RelatedProperties"] == ["/Password"]' "RelatedProperties of Password"
grep -q short1 "$T/body" && fail "a refused password is echoed"
patch "$ACCT" '{"Password":"Waytoolongpassword12345"}'; expect 400 "password too long"; msgid PropertyValueFormatError "too long"
grep -q Waytoolong "$T/body" && fail "a too long password is echoed"
patch "$ACCT" '{"Password":12345678}'; expect 400 "password not a string"; msgid PropertyValueTypeError "password not a string"
grep -q 12345678 "$T/body" && fail "a password of the wrong type is echoed"
patch "$ACCT" '{"Password":"Rackpilot2024","UserName":"root"}'; expect 400 "UserName is not writable"
msgid PropertyNotWritable "UserName"
patch "$ACCT" '{}'; expect 400 "empty account PATCH"; msgid NoOperation "empty account PATCH"
mock GET state; check 'd["password_changes"] == 0' "refused PATCHes changed nothing"
get "$SYS"; expect 200 "the old password still works"
patch "$ACCT" '{"Password":"Rackpilot2024"}' -H "If-Match: $ETAG"; expect 200 "password PATCH"
check 'd["Password"] is None and d["UserName"] == "admin"' "the answer is the account, Password null"
[ "$(header ETag)" != "$ETAG" ] || fail "account ETag unchanged by a password change"
grep -q Rackpilot2024 "$T/body" && fail "the new password is echoed"
get "$SYS"; expect 401 "Basic with the old password"
login secret; expect 401 "login with the old password"
AUTH=(-u admin:Rackpilot2024)
get "$SYS"; expect 200 "Basic with the new password"
login Rackpilot2024; expect 201 "login with the new password"; NEWTOKEN=$TOKEN
req GET "$B$SYS" -H "X-Auth-Token: $OLDTOKEN"; expect 200 "an existing session stays valid by default"
mock GET state; check 'd["password_changes"] == 1 and d["sessions"] == 2' "one password change counted"
mock GET config; check 'd["password"] == "Rackpilot2024"' "config shows the BMC's password"
req GET "$B1$SYS" -u admin:secret; expect 200 "BMC 1 keeps its own password"
config '{"drop_sessions_on_password": true}'
req PATCH "$B$ACCT" -H "X-Auth-Token: $NEWTOKEN" "${JSON[@]}" -d '{"Password":"Rackpilot2025"}'
expect 200 "password PATCH with a session, drop_sessions_on_password"
req GET "$B$SYS" -H "X-Auth-Token: $NEWTOKEN"; expect 401 "drop_sessions_on_password: the changing session is gone"
req GET "$B$SYS" -H "X-Auth-Token: $OLDTOKEN"; expect 401 "drop_sessions_on_password: every session is gone"
AUTH=(-u admin:Rackpilot2025)
mock GET state; check 'd["password_changes"] == 2 and d["sessions"] == 0' "second change counted, no sessions"
config '{"drop_sessions_on_password": false}'
# The policy.
config '{"password_min": 10, "password_max": 16, "password_charset": "alnum"}'
get /redfish/v1/AccountService; check 'd["MinPasswordLength"] == 10 and d["MaxPasswordLength"] == 16' "policy knobs shown"
patch "$ACCT" '{"Password":"Abc1234567890xyz9"}'; expect 400 "17 characters over 16"
check '"must be 10 to 16 characters" in d["error"]["message"]' "the new limit stated"
patch "$ACCT" '{"Password":"Rack-pilot#2026"}'; expect 400 "a symbol under alnum"; msgid PropertyValueIncorrect "symbol under alnum"
check '"letters and digits only" in d["error"]["@Message.ExtendedInfo"][0]["Message"] and d["error"]["@Message.ExtendedInfo"][0]["MessageArgs"] == ["Password", "******"]' \
    "the charset stated, the password masked"
grep -q 'pilot#' "$T/body" && fail "a refused password is echoed (charset)"
mock GET config; check 'd["password"] == "Rackpilot2025"' "refused policy PATCHes changed nothing"
patch "$ACCT" '{"Password":"Rackpilot2026"}'; expect 200 "a password within the policy"
AUTH=(-u admin:Rackpilot2026)
mock POST config '{"password_charset": "symbols"}'; expect 400 "unknown password_charset"
mock POST config '{"password_min": 17}'; expect 400 "password_min over password_max"
mock POST config '{"password_max": 8, "password_min": 4}'; expect 200 "min and max changed together"
config '{"password_min": 8, "password_max": 20, "password_charset": "any"}'
patch "$ACCT" '{"Password":"R@ck-pilot 2026!"}'; expect 200 "symbols under any"
AUTH=(-u 'admin:R@ck-pilot 2026!')
get "$SYS"; expect 200 "Basic with a password of symbols"

section "password change required"
config '{"password_change_required": true}'
get "$ACCT"; expect 200 "GET of the account"; check 'd["PasswordChangeRequired"] is True' "the account says so"
get "$SYS"; expect 403 "Basic: other resources refused"; msgid PasswordChangeRequired "Basic while a change is required"
check "'$ACCT' in d['error']['@Message.ExtendedInfo'][0]['Message'] and d['error']['@Message.ExtendedInfo'][0]['MessageArgs'] == ['$ACCT']" \
    "the message names the account"
get /redfish/v1/AccountService; expect 403 "AccountService refused"
req GET "$B/redfish/v1/"; expect 200 "the service root needs no authentication"
login 'R@ck-pilot 2026!'; expect 201 "login succeeds"
check 'd["@Message.ExtendedInfo"][0]["MessageId"].endswith(".PasswordChangeRequired")' "login body carries PasswordChangeRequired"
PCRTOKEN=$TOKEN PCRLOC=$(header Location)
req GET "$B$SYS" -H "X-Auth-Token: $PCRTOKEN"; expect 403 "session: GET refused"; msgid PasswordChangeRequired "session GET"
req PATCH "$B$SYS" -H "X-Auth-Token: $PCRTOKEN" "${JSON[@]}" -d '{"Boot":{"BootSourceOverrideTarget":"Pxe"}}'
expect 403 "session: PATCH refused"
req POST "$B$RESET" -H "X-Auth-Token: $PCRTOKEN" "${JSON[@]}" -d '{"ResetType":"On"}'; expect 403 "session: action refused"
mock GET state; check 'd["power"] == "Off" and d["actions"][-1]["path"] == "'"$ACCT"'"' "refused requests did nothing"
req HEAD "$B$ACCT" -I -H "X-Auth-Token: $PCRTOKEN"; expect 200 "session: HEAD of the account"
login 'R@ck-pilot 2026!'; OTHERTOKEN=$TOKEN OTHERLOC=$(header Location)
req DELETE "$B$PCRLOC" -H "X-Auth-Token: $OTHERTOKEN"; expect 403 "DELETE of another session refused"
req DELETE "$B$OTHERLOC" -H "X-Auth-Token: $OTHERTOKEN"; expect 204 "DELETE of the own session"
req PATCH "$B$ACCT" -H "X-Auth-Token: $PCRTOKEN" "${JSON[@]}" -d '{"Password":"tiny"}'; expect 400 "the policy still applies"
req PATCH "$B$ACCT" -H "X-Auth-Token: $PCRTOKEN" "${JSON[@]}" -d '{"Password":"Changed2027"}'; expect 200 "the password PATCH"
check 'd["PasswordChangeRequired"] is False' "the change clears it"
mock GET config; check 'd["password_change_required"] is False and d["password"] == "Changed2027"' "the knob reads back false"
req GET "$B$SYS" -H "X-Auth-Token: $PCRTOKEN"; expect 200 "the session is free after the change"
config '{"password": "secret"}'
AUTH=(-u admin:secret)
get "$SYS"; expect 200 "the password knob restores secret"
login secret; check '"@Message.ExtendedInfo" not in d' "a login without a required change has no message"

section "identify LED"
RACK=/redfish/v1/Chassis/Chassis.Embedded.1
get "$SYS"; check 'd["LocationIndicatorActive"] is False and d["IndicatorLED"] == "Off"' "system: LED off"
ETAG=$(header ETag)
get "$RACK"; check 'd["LocationIndicatorActive"] is False and d["IndicatorLED"] == "Off"' "rack chassis: LED off"
RETAG=$(header ETag)
get /redfish/v1/Chassis/GPU_Baseboard; check '"IndicatorLED" not in d and "LocationIndicatorActive" not in d' "GPU baseboard: no LED"
patch "$SYS" '{"LocationIndicatorActive":true}' -H "If-Match: $ETAG"; expect 200 "PATCH LocationIndicatorActive true"
check 'd["LocationIndicatorActive"] is True and d["IndicatorLED"] == "Blinking"' "on: IndicatorLED Blinking"
[ "$(header ETag)" != "$ETAG" ] || fail "system ETag unchanged by the LED"
get "$RACK"; check 'd["LocationIndicatorActive"] is True and d["IndicatorLED"] == "Blinking"' "the chassis shows the same LED"
[ "$(header ETag)" != "$RETAG" ] || fail "chassis ETag unchanged by the LED"
patch "$RACK" '{"IndicatorLED":"Lit"}' -H "If-Match: $RETAG"; expect 412 "chassis PATCH with a stale If-Match"
patch "$RACK" '{"IndicatorLED":"Lit"}'; expect 200 "PATCH the chassis IndicatorLED Lit"
check 'd["IndicatorLED"] == "Lit" and d["LocationIndicatorActive"] is True' "Lit: active"
patch "$RACK" '{"LocationIndicatorActive":true}'; expect 200 "LocationIndicatorActive true when lit"
check 'd["IndicatorLED"] == "Lit"' "a lit LED stays Lit"
patch "$SYS" '{"IndicatorLED":"Off"}'; expect 200 "PATCH IndicatorLED Off"
check 'd["LocationIndicatorActive"] is False' "Off: not active"
patch "$SYS" '{"LocationIndicatorActive":"yes"}'; expect 400 "LocationIndicatorActive not a bool"
msgid PropertyValueTypeError "LocationIndicatorActive not a bool"
patch "$SYS" '{"IndicatorLED":"Flashing"}'; expect 400 "unknown IndicatorLED"; msgid PropertyValueNotInList "IndicatorLED Flashing"
patch "$SYS" '{"IndicatorLED":"Off","LocationIndicatorActive":true}'; expect 400 "conflicting LED properties"
msgid PropertyValueConflict "IndicatorLED Off with LocationIndicatorActive true"
patch "$RACK" '{"ChassisType":"Blade","IndicatorLED":"Lit"}'; expect 400 "chassis PATCH with a read-only property"
msgid PropertyNotWritable "ChassisType"
patch "$RACK" '{}'; expect 400 "empty chassis PATCH"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Pxe"},"IndicatorLED":"Blinking","LocationIndicatorActive":true}'
expect 200 "Boot and LED in one PATCH"
check 'd["Boot"]["BootSourceOverrideTarget"] == "Pxe" and d["IndicatorLED"] == "Blinking"' "both applied"
mock GET state
check 'd["indicator"] == {"led": "Blinking", "active": True, "changes": 4, "patches": 5}' "state: the LED and its changes"
config '{"indicator": "legacy"}'
get "$SYS"; check '"LocationIndicatorActive" not in d and d["IndicatorLED"] == "Blinking"' "legacy: IndicatorLED only"
get "$RACK"; check '"LocationIndicatorActive" not in d and d["IndicatorLED"] == "Blinking"' "legacy: the chassis too"
patch "$SYS" '{"LocationIndicatorActive":false}'; expect 400 "legacy: LocationIndicatorActive refused"
msgid PropertyUnknown "legacy LocationIndicatorActive"
patch "$RACK" '{"IndicatorLED":"Off"}'; expect 200 "legacy: IndicatorLED PATCH"
config '{"indicator": "none"}'
get "$SYS"; check '"LocationIndicatorActive" not in d and "IndicatorLED" not in d' "none: no LED"
get "$RACK"; check '"LocationIndicatorActive" not in d and "IndicatorLED" not in d' "none: nor on the chassis"
patch "$SYS" '{"IndicatorLED":"Lit"}'; expect 400 "none: IndicatorLED refused"; msgid PropertyUnknown "none IndicatorLED"
patch "$RACK" '{"LocationIndicatorActive":true}'; expect 400 "none: LocationIndicatorActive refused"
mock POST config '{"indicator": "blinkenlights"}'; expect 400 "unknown indicator mode"
config '{"indicator": "location"}'
mock GET state; check 'd["indicator"] == {"led": "Off", "active": False, "changes": 5, "patches": 6}' "refused PATCHes left the LED alone"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"None"}}'

section "manager reset"
MGR=/redfish/v1/Managers/BMC.Embedded.1
get "$MGR"
check "d['Actions']['#Manager.Reset'] == {'target': '$MGR/Actions/Manager.Reset', 'ResetType@Redfish.AllowableValues': ['GracefulRestart', 'ForceRestart']}" \
    "Manager.Reset offered"
MRESET=$(val 'd["Actions"]["#Manager.Reset"]["target"]')
LRT=$(val 'd["LastResetTime"]')
post "$MRESET" '{"ResetType":"On"}'; expect 400 "manager ResetType On"; msgid ActionParameterValueNotInList "manager ResetType On"
post "$MRESET" '{}'; expect 400 "manager reset without ResetType"; msgid ActionParameterMissing "manager reset without ResetType"
post "$MRESET" '{"ResetType":"ForceRestart"}' -H 'If-Match: "stale"'; expect 412 "manager reset with a stale If-Match"
get "$MRESET"; expect 405 "GET of the manager reset"
reset On
login secret; MTOKEN=$TOKEN
mock GET state; check 'd["manager_resets"] == 0 and d["power"] == "On"' "no manager reset yet"
config '{"bmc_reset_s": 1.5}'
sleep 1   # LastResetTime has a resolution of seconds
post "$MRESET" '{"ResetType":"GracefulRestart"}'; expect 204 "Manager.Reset GracefulRestart"
truth "$(header Connection)" close "the 204 closes the connection"
sleep 0.2
get /redfish/v1/; expect 000 "the resetting BMC does not answer"
case "$(cat "$T/curlerr")" in *"onnect"*) ;; *) fail "manager reset, refuse: $(cat "$T/curlerr")" ;; esac
CHECKS=$((CHECKS + 1))
mock GET state; expect 000 "nor does its control API (refuse)"
req GET "$B1$SYS" -u admin:secret; expect 200 "the other BMC answers during the reset"
sleep 1.7
get /redfish/v1/; expect 200 "back after bmc_reset_s"
req GET "$B$SYS" -H "X-Auth-Token: $MTOKEN"; expect 401 "the sessions are gone"
get "$SYS"; check 'd["PowerState"] == "On"' "the host kept its power"
get "$MGR"; check "d['LastResetTime'] != '$LRT'" "LastResetTime updated"
LRT=$(val 'd["LastResetTime"]')
mock GET state
check 'd["manager_resets"] == 1 and d["power"] == "On" and d["sessions"] == 0 and len(d["boots"]) == 1' "one manager reset counted"
check "d['manager_last_reset'] == '$LRT'" "state shows the LastResetTime"
check '[a.get("reset_type") for a in d["actions"] if a["path"].endswith("Manager.Reset")] == ["On", None, "ForceRestart", "GracefulRestart"]' \
    "manager resets in the action log"
config '{"bmc_reset_s": 0}'
post "$MRESET" '{"ResetType":"ForceRestart"}'; expect 204 "Manager.Reset with bmc_reset_s 0"
get /redfish/v1/; expect 200 "bmc_reset_s 0: answers at once"
config '{"bmc_reset_s": 1, "unreachable_mode": "drop"}'
post "$MRESET" '{"ResetType":"ForceRestart"}'; expect 204 "Manager.Reset (drop mode)"
get /redfish/v1/; expect 000 "drop mode: no answer"
mock GET state; expect 200 "drop mode: the control API answers"
check 'd["manager_resets"] == 3 and d["unreachable_for_s"] > 0' "drop mode: counted, unreachable_for_s"
sleep 1.1
get /redfish/v1/; expect 200 "back after the drop-mode reset"
config '{"unreachable_mode": "refuse", "bmc_reset_s": 3}'
mock POST config '{"bmc_reset_s": -1}'; expect 400 "negative bmc_reset_s"
req GET "$B1/__mock/state"; check 'd["manager_resets"] == 0 and d["password_changes"] == 0' "BMC 1 untouched"

# ---------------------------------------------------------------------------------------------
section "TLS"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1 || fail "openssl"
start tls $((PB + 10)) --tls "$T/cert.pem" "$T/key.pem"
B=https://127.0.0.1:$((PB + 10))
req GET "$B/redfish/v1/"; expect 200 "HTTPS service root"
login secret; expect 201 "HTTPS session login"
req GET "$B/redfish/v1/Systems/System.Embedded.1" -H "X-Auth-Token: $TOKEN"; expect 200 "HTTPS GET with the token"
req GET "http://127.0.0.1:$((PB + 10))/redfish/v1/"; [ "$CODE" != 200 ] || fail "plain HTTP accepted on the TLS port"

# ---------------------------------------------------------------------------------------------
for tree in public-rackmount1 public-tower; do
    section "--static $tree"
    PORT=$((PB + 20))
    [ $tree = public-tower ] && PORT=$((PB + 21))
    start "static-$tree" $PORT --static "$MOCKUPS/$tree"
    B=http://127.0.0.1:$PORT
    req GET "$B/redfish/v1/Systems" -u anyone:anything; expect 200 "static Systems, any credentials"
    SYSTEM=$(val 'd["Members"][0]["@odata.id"]')
    req GET "$B$SYSTEM"; expect 200 "static system, no credentials"
    check 'd["PowerState"] == "On"' "static PowerState"
    if [ -d "$MOCKUPS/$tree/\$metadata" ]; then    # public-tower has none
        req GET "$B/redfish/v1/\$metadata"; expect 200 "static \$metadata"
        truth "$(header Content-Type)" application/xml "\$metadata content type"
    fi
    req GET "$B/redfish/v1/Registries/Base.1.5.0.json"; expect 200 "static non-index JSON file"
    req GET "$B/redfish/v1/Nope"; expect 404 "static unknown URI"
    req POST "$B$SYSTEM/Actions/ComputerSystem.Reset" "${JSON[@]}" -d '{"ResetType":"On"}'; expect 405 "static POST"
    req PATCH "$B$SYSTEM" "${JSON[@]}" -d '{}'; expect 405 "static PATCH"
done

# ---------------------------------------------------------------------------------------------
section "--tree public-rackmount1"
start tree $((PB + 30)) --count 2 --tree "$MOCKUPS/public-rackmount1"
B=http://127.0.0.1:$((PB + 30))
config '{"power_delay_s": 0}'
get /redfish/v1/Systems; SYS=$(val 'd["Members"][0]["@odata.id"]')
truth "$SYS" /redfish/v1/Systems/437XR1138R2 "tree system discovered"
get "$SYS"
check 'd["SerialNumber"] == "MOCK0000" and "PowerCycle" in d["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"]' \
    "tree system identity and PowerCycle"
check 'd["Boot"]["BootSourceOverrideMode@Redfish.AllowableValues"] and d["Boot"]["BootSourceOverrideEnabled@Redfish.AllowableValues"]' \
    "tree Boot AllowableValues added"
RESET=$(val 'd["Actions"]["#ComputerSystem.Reset"]["target"]')
get /redfish/v1/UpdateService
check 'd["MultipartHttpPushUri"] and d["HttpPushUri"] == "/FWUpdate"' "tree UpdateService push URIs"
SIMPLE=$(val 'd["Actions"]["#UpdateService.SimpleUpdate"]["target"]')
PUSH=$(val 'd["MultipartHttpPushUri"]')
get "$SYS/Bios"; check 'd["@Redfish.Settings"]["SupportedApplyTimes"] == ["OnReset", "Immediate"]' "tree SupportedApplyTimes"
get /redfish/v1/Registries/BiosAttributeRegistryP89.v1_0_0; expect 200 "synthesised registry file"
get "$(val 'd["Location"][0]["Uri"]')"
check '[v["ValueName"] for a in d["RegistryEntries"]["Attributes"] if a["AttributeName"] == "ProcTurboMode" for v in a["Value"]] == ["Enabled", "Disabled"]' \
    "synthesised enum"
mock GET state; check 'd["bios"]["pending"]["EmbeddedSata"] == "Ahci"' "the tree's pending settings"
patch "$SYS/Bios/Settings" '{"Attributes":{"ProcTurboMode":"Sometimes"}}'; expect 400 "tree bad enum"
patch "$SYS/Bios/Settings" '{"Attributes":{"ProcHyperthreading":"Disabled"}}'; expect 200 "tree BIOS PATCH"
patch "$SYS" '{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}'; expect 200 "tree boot PATCH"
reset PowerCycle
get "$SYS/Bios"
check 'd["Attributes"]["ProcHyperthreading"] == "Disabled" and d["Attributes"]["EmbeddedSata"] == "Ahci"' "tree BIOS applied"
mock GET state; check 'd["boots"][-1]["booted_from"] == "Cd" and d["power"] == "On"' "tree boot event"
post "$SIMPLE" '{"ImageURI":"http://10.0.0.5/fw/bmc_1.46.0.bin","Targets":["/redfish/v1/UpdateService/FirmwareInventory/BMC"]}'
expect 202 "tree SimpleUpdate"
TASK_MON=$(header Location)
case "$TASK_MON" in */688) ;; *) fail "tree task id after the tree's 545 and 687: $TASK_MON" ;; esac
poll "$TASK_MON"
for i in 1 2 3; do get /redfish/v1/; expect 503 "tree BMC reboot $i"; done
get /redfish/v1/Managers/BMC; check 'd["FirmwareVersion"] == "1.46.0"' "tree Manager FirmwareVersion"
get /redfish/v1/TaskService/Tasks; check 'len(d["Members"]) == 3 and d["Members@odata.count"] == 3' "tree tasks"
req POST "$B$PUSH" "${AUTH[@]}" -F "UpdateParameters={\"Targets\":[\"/redfish/v1/UpdateService/FirmwareInventory/BIOS\"]};type=application/json" \
    -F "UpdateFile=@$T/image;filename=bios_P79 v1.50.bin"
expect 202 "tree multipart push"
poll "$(header Location)"
check 'any(m["MessageId"].endswith(".AwaitToActivate") for m in d["Messages"])' "tree BIOS push awaits a reset"
mock GET state; check 'd["staged_firmware"] == {"BIOS": "P79 v1.50"}' "tree BIOS staged"
LOG1=$SYS/LogServices/Log1/Entries
get "$LOG1"
check 'd["Members@odata.count"] == 2 and [m["Created"] for m in d["Members"]] == ["2012-03-07T14:44:00Z", "2012-03-07T14:45:00Z"]' \
    "tree log entries"
check '"@odata.nextLink" not in d and "Members@odata.nextLink" not in d' "tree log: the dangling nextLink is gone"
get "$LOG1/2"; check 'd["Severity"] == "Critical"' "tree log entry"
mock POST log '{"service":"Log","severity":"Warning","message":"added"}'
check 'd["@odata.id"] == "/redfish/v1/Managers/BMC/LogServices/Log/Entries/2"' "tree log entry added after the tree's"

C1=/redfish/v1/Chassis/1U
config '{"sensor_shapes": "modern"}'
get "$C1"; check '"Power" not in d and "Sensors" in d' "tree: sensor_shapes hides Power"
get "$C1/Power"; expect 404 "tree: Power hidden"
get "$C1/Sensors?\$expand=.(\$levels=1)"; check 'len(d["Members"]) == 41 and all("Name" in m for m in d["Members"])' "tree: Sensors expanded"
get "$C1/EnvironmentMetrics"; ETAG=$(header ETag)
check 'd["PowerLimitWatts"]["SetPoint"] == 500 and d["PowerLimitWatts"]["AllowableMax"] == 1000' "tree: the limit as published"
patch "$C1/EnvironmentMetrics" '{"PowerLimitWatts":{"SetPoint":1200}}' -H "If-Match: $ETAG"; expect 400 "tree: limit over AllowableMax"
patch "$C1/EnvironmentMetrics" '{"PowerLimitWatts":{"SetPoint":600}}' -H "If-Match: $ETAG"; expect 200 "tree: limit PATCH"
config '{"sensor_shapes": "both"}'
get "$C1/Power"; check 'd["PowerControl"][0]["PowerLimit"]["LimitInWatts"] == 600' "tree: Power shows the new limit"
get /redfish/v1/AccountService/Accounts/1
check 'd["UserName"] == "admin" and d["Password"] is None and d["PasswordChangeRequired"] is False and "Actions" not in d' \
    "tree: account 1 is the mock's user"
get /redfish/v1/AccountService; check 'd["MinPasswordLength"] == 8 and d["MaxPasswordLength"] == 20' "tree: the password policy"
patch /redfish/v1/AccountService/Accounts/1 '{"Password":"Contoso2024"}'; expect 200 "tree: password PATCH"
req GET "$B$SYS" -u admin:Contoso2024; expect 200 "tree: the new password"
config '{"password": "secret"}'
patch "$C1" '{"LocationIndicatorActive":true}'; expect 200 "tree: chassis LED PATCH"
get "$SYS"; check 'd["IndicatorLED"] == "Blinking" and d["LocationIndicatorActive"] is True' "tree: the system shows the chassis' LED"
get /redfish/v1/Managers/BMC
check 'd["Actions"]["#Manager.Reset"]["ResetType@Redfish.AllowableValues"] == ["ForceRestart", "GracefulRestart"] and d["LastResetTime"]' \
    "tree: Manager.Reset as published"
config '{"bmc_reset_s": 0}'
post /redfish/v1/Managers/BMC/Actions/Manager.Reset '{"ResetType":"GracefulRestart"}'; expect 204 "tree: Manager.Reset"
mock GET state; check 'd["manager_resets"] == 1 and d["power"] == "On"' "tree: manager reset counted"

section "--tree public-tower"
start tower $((PB + 40)) --tree "$MOCKUPS/public-tower" --serial-prefix TWR
B=http://127.0.0.1:$((PB + 40))
get /redfish/v1/Systems/437XR1238R2; check 'd["SerialNumber"] == "TWR0000"' "tower system"
get /redfish/v1/Systems/437XR1238R2/EthernetInterfaces/Network1; check 'd["MACAddress"].startswith("02:00:00:")' "tower MAC"

# ---------------------------------------------------------------------------------------------
section "500 BMCs"
STARTED=$(date +%s%N)
start many $((PB + 100)) --count 500
READY_MS=$((($(date +%s%N) - STARTED) / 1000000))
B=http://127.0.0.1:$((PB + 599))
mock GET state; check 'd["serial"] == "MOCK0499"' "BMC 499"
URL="http://127.0.0.1:$((PB + 100))/redfish/v1/Systems/System.Embedded.1"
SAME=() EACH=()
for i in $(seq 0 499); do
    [ "$i" -lt 300 ] && SAME+=(-o /dev/null "$URL")
    EACH+=(-o /dev/null "http://127.0.0.1:$((PB + 100 + i))/redfish/v1/Systems/System.Embedded.1")
done
curl -s -w '%{time_total}\n' "${AUTH[@]}" "${SAME[@]}" >"$T/keepalive"
curl -s -w '%{time_total}\n' "${AUTH[@]}" "${EACH[@]}" >"$T/fresh"
RSS=$(ps -o rss= -p "${PIDS[-1]}")
python3 - "$T/keepalive" "$T/fresh" "$READY_MS" "$RSS" <<'EOF'
import statistics, sys
def ms(path):
    return sorted(1000 * float(x) for x in open(path))
keep, fresh = ms(sys.argv[1]), ms(sys.argv[2])
print(f"   start-up of 500 BMCs: {sys.argv[3]} ms (launch to ready file); RSS {int(sys.argv[4]) // 1024} MiB")
print(f"   GET system, one kept-alive connection: median {statistics.median(keep):.2f} ms, p95 {keep[int(.95 * len(keep))]:.2f} ms")
print(f"   GET system on each of the 500 BMCs (new connection each): median {statistics.median(fresh):.2f} ms, "
      f"p95 {fresh[int(.95 * len(fresh))]:.2f} ms")
EOF
CHECKS=$((CHECKS + 1))
[ "$(wc -l <"$T/fresh")" = 500 ] || fail "not every one of the 500 BMCs answered"

echo "$CHECKS checks, $FAILS failed"
[ "$FAILS" = 0 ]
