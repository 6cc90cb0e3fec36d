#!/bin/sh
# selftest.sh - end-to-end check of the simulated BMC fixture (bmcsim.sh) with real clients:
# ipmitool (-I lanplus -C 3), freeipmi tools (-D LAN_2_0 -W opensesspriv) and, when a C compiler
# and the headers are present, the libfreeipmi probe (probe.c) and the ipmi_sim plug-in.
#
#   tests/ipmi/selftest.sh            exit 0 = all checks passed
#
# env: SELFTEST_BASE_PORT=19301  first UDP port used (uses BASE..BASE+79)
#      SELFTEST_REQUIRE_ALL=1    treat a missing compiler/header (skipped parts) as a failure
#      SELFTEST_KEEP=1           keep the work directory
# Needs: openipmi ipmitool freeipmi-tools iproute2; optional cc libfreeipmi-dev libopenipmi-dev,
# socat and libipmiconsole-dev (the mc plug-in and SOL part).
set -u

HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
SIM=$HERE/bmcsim.sh
BASE=${SELFTEST_BASE_PORT:-19301}
PW=selftest-pw
export BMC_PASSWORD=$PW
unset CHASSIS_PLUGIN BMC_INITIAL_POWER SHARED_PER_PROC BMC_SEL BMC_SENSORS BMC_SENSOR_POLL_MS DCMI \
    MC_PLUGIN SOL BMC_PASSWORD_MAX BMC_RESET_OUTAGE 2>/dev/null || :

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bmcsim-selftest.XXXXXX") || exit 1
passed=0
failed=0
skipped=0
RUNDIRS=

cleanup() {
    for r in $RUNDIRS; do "$SIM" stop "$r" > /dev/null 2>&1; done
    [ "${SELFTEST_KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ok()   { passed=$((passed + 1)); echo "ok   $*"; }
bad()  { failed=$((failed + 1)); echo "FAIL $*"; }
skip() {
    if [ "${SELFTEST_REQUIRE_ALL:-0}" = 1 ]; then bad "$* (required)"; else skipped=$((skipped + 1)); echo "skip $*"; fi
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# expect DESC REGEX CMD...      CMD exits 0 and its output matches REGEX (grep -E)
expect() {
    _d=$1; _re=$2; shift 2
    _out=$("$@" 2>&1); _rc=$?
    if [ $_rc -eq 0 ] && printf '%s\n' "$_out" | grep -Eq -- "$_re"; then ok "$_d"
    else bad "$_d: rc=$_rc, wanted /$_re/, got: $(printf '%s' "$_out" | tail -n 3 | tr '\n' '|')"; fi
}
# expect_fail DESC REGEX CMD... CMD exits non-zero and its output matches REGEX
expect_fail() {
    _d=$1; _re=$2; shift 2
    _out=$("$@" 2>&1); _rc=$?
    if [ $_rc -ne 0 ] && printf '%s\n' "$_out" | grep -Eq -- "$_re"; then ok "$_d"
    else bad "$_d: rc=$_rc (wanted non-zero), wanted /$_re/, got: $(printf '%s' "$_out" | tail -n 3 | tr '\n' '|')"; fi
}
# file_is DESC FILE CONTENT      (multi-line content compared exactly)
file_is() {
    _got=$(cat "$2" 2>/dev/null)
    if [ "$_got" = "$3" ]; then ok "$1"; else bad "$1: $2 is '$(printf '%s' "$_got" | tr '\n' '|')', wanted '$(printf '%s' "$3" | tr '\n' '|')'"; fi
}
# wait_file FILE CONTENT SECONDS
wait_file() {
    _end=$(($(now_ms) + $3 * 1000))
    while [ "$(now_ms)" -lt $_end ]; do
        [ "$(cat "$1" 2>/dev/null)" = "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

itool() { _p=$1; shift; ipmitool -I lanplus -C 3 -H 127.0.0.1 -p "$_p" -U admin -P "$PW" "$@"; }
FI_OPTS="-u admin -p $PW -D LAN_2_0 -W opensesspriv --session-timeout=5000 --retransmission-timeout=500"
# shellcheck disable=SC2086  # FI_OPTS is a word list
ftool() { _tool=$1; _p=$2; shift 2; "$_tool" -h "127.0.0.1:$_p" $FI_OPTS "$@"; }
field() { awk -F '\t' -v n="$1" -v c="$2" '$1 == n { print $c }' "$3/bmcs.tsv"; }

for t in ipmi_sim ipmitool ipmipower ipmi-chassis ipmi-config ipmi-fru bmc-info ss; do
    command -v $t > /dev/null || { echo "selftest: $t not installed" >&2; exit 1; }
done

# ---- optional compiled helpers ---------------------------------------------------------------
PROBE=
if command -v "${CC:-cc}" > /dev/null && [ -f /usr/include/freeipmi/freeipmi.h ]; then
    if "${CC:-cc}" -O2 -Wall -o "$WORK/probe" "$HERE/probe.c" -lfreeipmi 2> "$WORK/probe.err"; then
        PROBE=$WORK/probe
    else
        bad "probe.c does not compile: $(head -3 "$WORK/probe.err")"
    fi
fi
HAVE_PLUGIN=0
command -v "${CC:-cc}" > /dev/null && [ -f /usr/include/OpenIPMI/serv.h ] && HAVE_PLUGIN=1
SOLPROBE=
if command -v "${CC:-cc}" > /dev/null && [ -f /usr/include/ipmiconsole.h ]; then
    if "${CC:-cc}" -O2 -Wall -o "$WORK/solprobe" "$HERE/solprobe.c" -lipmiconsole -lfreeipmi -lpthread 2> "$WORK/solprobe.err"; then
        SOLPROBE=$WORK/solprobe
    else
        bad "solprobe.c does not compile: $(head -3 "$WORK/solprobe.err")"
    fi
fi
PR() { _p=$1; shift; "$PROBE" "127.0.0.1:$_p" admin "$PW" "$@"; }

# ---- identity checks shared by all modes -------------------------------------------------------
check_identity() {   # RUNDIR NAME
    _port=$(field "$2" 3 "$1"); _serial=$(field "$2" 5 "$1"); _guid=$(field "$2" 6 "$1")
    expect "$2 ipmitool fru print 0: serial $_serial" "Product Serial +: $_serial\$" itool "$_port" fru print 0
    expect "$2 ipmitool mc guid: $_guid" "System GUID +: $_guid\$" itool "$_port" mc guid
    expect "$2 bmc-info --get-system-guid" "^$_guid\$" ftool bmc-info "$_port" --get-system-guid
    mkdir -p "$1/sdr-cache"          # ipmi-fru walks the SDR first and caches it per host:port
    expect "$2 ipmi-fru serial" "FRU Product Serial Number: $_serial\$" \
        ftool ipmi-fru "$_port" --sdr-cache-directory="$1/sdr-cache"
    expect "$2 ipmi-fru --ignore-sdr-cache, device 0" "FRU Product Manufacturer Name: Rackpilot Sim\$" \
        ftool ipmi-fru "$_port" --ignore-sdr-cache
    if [ -n "$PROBE" ]; then
        expect "$2 libfreeipmi Get System GUID" "^guid=$_guid raw=$(field "$2" 7 "$1")\$" PR "$_port" guid
        expect "$2 libfreeipmi FRU product_serial" "^product_serial=$_serial\$" PR "$_port" fru
    fi
}

# ---- power / boot checks (one BMC) ---------------------------------------------------------------
check_power_boot() {   # RUNDIR NAME PLUGIN(0|1)
    _port=$(field "$2" 3 "$1"); _st=$(field "$2" 4 "$1")
    : > "$_st/ops.log"
    expect "$2 status off initially" "Chassis Power is off" itool "$_port" chassis power status
    expect "$2 ipmitool power on" "Up/On" itool "$_port" chassis power on
    expect "$2 ipmitool status on" "Chassis Power is on" itool "$_port" chassis power status
    file_is "$2 power file after on" "$_st/power" 1
    expect "$2 ipmipower --stat on" "127.0.0.1: on" ftool ipmipower "$_port" --stat
    expect "$2 ipmipower --off" "127.0.0.1: ok" ftool ipmipower "$_port" --off
    expect "$2 ipmi-chassis status off" "System Power +: off" ftool ipmi-chassis "$_port" --get-chassis-status
    file_is "$2 ops.log after on/off" "$_st/ops.log" "set power 1
set power 0"

    : > "$_st/ops.log"
    expect "$2 ipmitool power cycle (from off)" "Cycle" itool "$_port" chassis power cycle
    if wait_file "$_st/power" 1 4; then ok "$2 power back on after cycle"; else bad "$2 power not back on within 4 s of cycle"; fi
    expect "$2 status on after cycle" "Chassis Power is on" itool "$_port" chassis power status
    file_is "$2 ops.log after cycle" "$_st/ops.log" "set power 0
set power 1"

    : > "$_st/ops.log"
    expect "$2 ipmitool power reset (on)" "Reset" itool "$_port" chassis power reset
    expect "$2 ipmi-chassis HARD-RESET" "" ftool ipmi-chassis "$_port" --chassis-control=HARD-RESET
    expect "$2 ipmi-chassis SOFT-SHUTDOWN" "" ftool ipmi-chassis "$_port" --chassis-control=SOFT-SHUTDOWN
    file_is "$2 power file after soft" "$_st/power" 0
    expect_fail "$2 reset while off fails" "Unspecified error" itool "$_port" chassis power reset
    expect "$2 ipmitool power soft (off already)" "Soft" itool "$_port" chassis power soft
    file_is "$2 ops.log after reset/reset/soft/failed reset/soft" "$_st/ops.log" "set reset 1
set reset 1
set shutdown 1
set shutdown 1"

    : > "$_st/ops.log"
    expect "$2 ipmitool bootdev pxe" "Set Boot Device to pxe" itool "$_port" chassis bootdev pxe
    file_is "$2 boot file pxe" "$_st/boot" pxe
    expect "$2 bootparam get 5: Force PXE" "Boot Device Selector : Force PXE" itool "$_port" chassis bootparam get 5
    expect "$2 ipmitool bootdev disk" "Set Boot Device to disk" itool "$_port" chassis bootdev disk
    file_is "$2 boot file default (disk)" "$_st/boot" default
    expect "$2 bootparam get 5: hard drive" "Boot Device Selector : Force Boot from default Hard-Drive" \
        itool "$_port" chassis bootparam get 5
    expect "$2 ipmi-config Boot_Device=PXE" "" ftool ipmi-config "$_port" --category=chassis --commit \
        --key-pair=Chassis_Boot_Flags:Boot_Device=PXE
    expect "$2 ipmi-config checkout PXE" "Boot_Device +PXE" ftool ipmi-config "$_port" --category=chassis \
        --checkout --key-pair=Chassis_Boot_Flags:Boot_Device
    file_is "$2 ops.log after pxe/disk/pxe" "$_st/ops.log" "set boot pxe
set boot default
set boot pxe"
    if [ "$3" = 1 ]; then
        expect "$2 bootdev pxe options=persistent,efiboot" "Set Boot Device to pxe" \
            itool "$_port" chassis bootdev pxe options=persistent,efiboot
        file_is "$2 bootflags persistent+efi" "$_st/bootflags" "e0 04 00 00 00"
        expect "$2 bootparam get 5 reads back persistent+EFI" "Options apply to all future boots" \
            itool "$_port" chassis bootparam get 5
    fi

    if [ -n "$PROBE" ]; then
        : > "$_st/ops.log"
        expect "$2 libfreeipmi chassis control on" "" PR "$_port" on
        expect "$2 libfreeipmi status on" "^power=on\$" PR "$_port" status
        expect "$2 libfreeipmi chassis control soft" "" PR "$_port" soft
        expect "$2 libfreeipmi boot pxe (next boot)" "" PR "$_port" boot pxe
        if [ "$3" = 1 ]; then
            expect "$2 libfreeipmi getboot exact" "^boot_device=0x01 valid=1 persistent=0 efi=0\$" PR "$_port" getboot
            expect "$2 libfreeipmi boot disk persistent efi" "" PR "$_port" boot disk persistent efi
            expect "$2 libfreeipmi getboot persistent efi" "^boot_device=0x02 valid=1 persistent=1 efi=1\$" PR "$_port" getboot
            file_is "$2 bootflags from libfreeipmi" "$_st/bootflags" "e0 08 00 00 00"
        else
            expect "$2 libfreeipmi getboot (device only)" "^boot_device=0x01 " PR "$_port" getboot
            expect "$2 libfreeipmi boot disk persistent efi" "" PR "$_port" boot disk persistent efi
        fi
        expect "$2 libfreeipmi devid" "firmware=1\\.23 ipmi=2\\.0 manufacturer_id=32473 product_id=0x0801" PR "$_port" devid
        file_is "$2 ops.log after libfreeipmi on/soft/pxe/disk" "$_st/ops.log" "set power 1
set shutdown 1
set boot pxe
set boot default"
    fi
}

# ---- faults -------------------------------------------------------------------------------------
check_faults() {   # RUNDIR NAME
    _port=$(field "$2" 3 "$1"); _st=$(field "$2" 4 "$1")
    _t0=$(now_ms)
    itool "$_port" -P wrong-password chassis power status > "$WORK/out" 2>&1 </dev/null
    _rc=$?; _dt=$(($(now_ms) - _t0))
    if [ $_rc -ne 0 ] && [ $_dt -lt 3000 ]; then ok "$2 wrong password: ipmitool rc=$_rc in ${_dt} ms"
    else bad "$2 wrong password: ipmitool rc=$_rc in ${_dt} ms"; fi
    expect_fail "$2 wrong password: ipmipower" "password invalid" \
        ipmipower -h "127.0.0.1:$_port" -u admin -p wrong-password -D LAN_2_0 -W opensesspriv --stat
    if [ -n "$PROBE" ]; then
        expect_fail "$2 wrong password: libfreeipmi errnum 5" "errnum 5\\)" \
            "$PROBE" "127.0.0.1:$_port" admin wrong-password status
        expect_fail "$2 no OPEN_SESSION_PRIVILEGE workaround: errnum 8" "errnum 8\\)" \
            env PROBE_NO_WORKAROUND=1 "$PROBE" "127.0.0.1:$_port" admin "$PW" status
    fi

    : > "$_st/ops.log"
    touch "$_st/fail"
    expect_fail "$2 fail file: ipmitool status" "Unspecified error" itool "$_port" chassis power status
    expect_fail "$2 fail file: ipmitool power on" "Unspecified error" itool "$_port" chassis power on
    expect_fail "$2 fail file: ipmi-chassis" "bad completion code" ftool ipmi-chassis "$_port" --get-chassis-status
    [ -z "$PROBE" ] || expect_fail "$2 fail file: libfreeipmi errnum 24" "errnum 24\\)" PR "$_port" on
    rm -f "$_st/fail"
    file_is "$2 nothing logged while failing" "$_st/ops.log" ""
    expect "$2 fail removed: status works" "Chassis Power is" itool "$_port" chassis power status

    echo 0.4 > "$_st/delay"
    _t0=$(now_ms)
    _out=$(itool "$_port" chassis power status 2>&1); _rc=$?
    _dt=$(($(now_ms) - _t0))
    if [ $_rc -eq 0 ] && [ $_dt -ge 400 ]; then ok "$2 delay 0.4: status took ${_dt} ms"
    else bad "$2 delay 0.4: rc=$_rc after ${_dt} ms: $_out"; fi
    rm -f "$_st/delay"
    sleep 0.5                       # let any retransmitted request drain
    _t0=$(now_ms)
    itool "$_port" chassis power status > /dev/null 2>&1
    _dt=$(($(now_ms) - _t0))
    if [ $_dt -lt 400 ]; then ok "$2 delay removed: status took ${_dt} ms"; else bad "$2 still slow after delay removed: ${_dt} ms"; fi
}

# ---- a run directory ----------------------------------------------------------------------------
start_run() {   # RUNDIR COUNT MODE [VAR=value...]; sets $start_ms
    _r=$1; _n=$2; _m=$3; shift 3
    RUNDIRS="$RUNDIRS $_r"
    _t0=$(now_ms)
    if env "$@" "$SIM" start "$_r" "$_n" "$_m" > "$WORK/start.out" 2>&1; then
        start_ms=$(($(now_ms) - _t0))
        ok "start $_n BMC(s) [$_m $*] in ${start_ms} ms"
        return 0
    fi
    bad "start $_n [$_m $*]: $(tail -n 5 "$WORK/start.out" | tr '\n' '|')"
    return 1
}

stop_run() {
    _pids=$(cut -d' ' -f1 "$1/pids" 2>/dev/null)
    _t0=$(now_ms)
    if "$SIM" stop "$1" > "$WORK/stop.out" 2>&1; then ok "stop $1 in $(($(now_ms) - _t0)) ms"
    else bad "stop $1: $(cat "$WORK/stop.out")"; fi
    for _p in $_pids; do
        if [ -r "/proc/$_p/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$_p/stat" 2>/dev/null; then
            bad "pid $_p still running after stop"
        fi
    done
}

latency() {   # RUNDIR NAME LABEL -> Get Chassis Status median over 50 queries on one session
    [ -n "$PROBE" ] || return 0
    if _r=$(PR "$(field "$2" 3 "$1")" loop 50 2>&1); then ok "latency $3: $_r"; else bad "latency $3: $_r"; fi
    LAT="$LAT
  $3: $_r"
}
LAT=

echo "# selftest work dir: $WORK"

# ---- 1. procs mode, 3 BMCs, chassis_ctl.sh -----------------------------------------------------
R1=$WORK/procs
if start_run "$R1" 3 procs BASE_PORT="$BASE"; then
    T_PROCS3=$start_ms
    n=$(wc -l < "$R1/bmcs.tsv")
    if [ "$n" -eq 3 ]; then ok "bmcs.tsv has 3 lines"; else bad "bmcs.tsv has $n lines"; fi
    expect "list prints bmc3 line" "^bmc3	127\\.0\\.0\\.1:$((BASE + 2))	$((BASE + 2))	$R1/bmc3	SIMSN0003	5253494d-0000-4000-8000-000000000003	" "$SIM" list "$R1"
    expect_fail "second start on a live RUNDIR is refused" "in use" env BASE_PORT=$((BASE + 50)) "$SIM" start "$R1" 3
    expect "BMCs still up after refused start" "Chassis Power is off" itool "$BASE" chassis power status
    for b in bmc1 bmc2 bmc3; do check_identity "$R1" $b; done
    check_power_boot "$R1" bmc1 0
    file_is "bmc2 untouched: power" "$R1/bmc2/power" 0
    file_is "bmc2 untouched: ops.log" "$R1/bmc2/ops.log" ""
    check_faults "$R1" bmc2
    latency "$R1" bmc3 "procs, chassis_ctl.sh"
    stop_run "$R1"
fi

# ---- 2. shared mode, 20 BMCs in 2 processes, chassis_ctl.sh ----------------------------------------
R2=$WORK/shared
if start_run "$R2" 20 shared BASE_PORT=$((BASE + 10)) SHARED_PER_PROC=10; then
    T_SHARED20=$start_ms
    np=$(wc -l < "$R2/pids")
    if [ "$np" -eq 2 ]; then ok "shared: 20 BMCs in 2 processes"; else bad "shared: $np processes"; fi
    for b in bmc1 bmc10 bmc11 bmc20; do check_identity "$R2" $b; done
    # every BMC has its own GUID and serial (one libfreeipmi/ipmitool call each)
    bad_ids=0
    i=1
    while [ $i -le 20 ]; do
        p=$((BASE + 9 + i))
        g=$(itool $p mc guid 2>/dev/null | sed -n 's/^System GUID *: //p')
        [ "$g" = "$(field bmc$i 6 "$R2")" ] || bad_ids=$((bad_ids + 1))
        i=$((i + 1))
    done
    if [ $bad_ids -eq 0 ]; then ok "shared: all 20 GUIDs as listed"; else bad "shared: $bad_ids GUIDs wrong"; fi
    check_power_boot "$R2" bmc12 0
    file_is "shared: bmc11 untouched" "$R2/bmc11/power" 0
    file_is "shared: bmc13 untouched" "$R2/bmc13/ops.log" ""
    check_faults "$R2" bmc20
    latency "$R2" bmc19 "shared, chassis_ctl.sh"
    stop_run "$R2"
fi

# ---- 3. shared mode, 20 BMCs, fork-free plug-in ------------------------------------------------------
R3=$WORK/plugin
if [ $HAVE_PLUGIN = 1 ]; then
    if start_run "$R3" 20 shared BASE_PORT=$((BASE + 40)) CHASSIS_PLUGIN=1; then
        for b in bmc1 bmc20; do check_identity "$R3" $b; done
        check_power_boot "$R3" bmc5 1
        file_is "plug-in: bmc6 untouched" "$R3/bmc6/ops.log" ""
        check_faults "$R3" bmc7
        latency "$R3" bmc9 "shared, plug-in"
        stop_run "$R3"
    fi
else
    skip "plug-in tests (need cc and libopenipmi-dev)"
fi
[ -n "$PROBE" ] || skip "libfreeipmi probe tests (need cc and libfreeipmi-dev)"

# ---- 4. System Event Log: BMC_SEL=N and BMC_SEL=none -------------------------------------------
R4=$WORK/sel
if start_run "$R4" 2 procs BASE_PORT=$((BASE + 30)) BMC_SEL=50; then
    p=$((BASE + 30))
    expect "SEL: empty with room" "Free Space +: [1-9][0-9]* bytes" itool $p sel info
    printf '0x04 0x07 0x20 0x6f 0x00 0x00 0x00 # Processor IERR\n' > "$WORK/sel.txt"
    # Set SEL Time to 2020-01-01T00:00:00Z (0x5e0be100, least significant byte first)
    expect "SEL: Set SEL Time" "" itool $p raw 0x0a 0x49 0x00 0xe1 0x0b 0x5e
    expect "SEL: Add SEL Entry" "" itool $p sel add "$WORK/sel.txt"
    expect "SEL: the record has the SEL clock's date" "01/01/20.*IERR" itool $p sel list
    expect "SEL: ipmi-sel interprets it as Critical" "Critical +\| IERR" \
        ftool ipmi-sel $p --output-event-state --ignore-sdr-cache
    expect "SEL: bmc2 has its own, empty" "Entries +: 0" itool $((p + 1)) sel info
    stop_run "$R4"
    if start_run "$R4" 2 procs BASE_PORT=$((BASE + 30)) BMC_SEL=50; then
        expect "SEL: a restarted BMC keeps its records" "Entries +: 1$" itool $p sel info
        stop_run "$R4"
    fi
fi
R5=$WORK/nosel
if start_run "$R5" 1 procs BASE_PORT=$((BASE + 35)) BMC_SEL=none; then
    expect_fail "no SEL device: Get SEL Info is an invalid command" "Invalid command" itool $((BASE + 35)) sel info
    expect "no SEL device: chassis still works" "Chassis Power is off" itool $((BASE + 35)) chassis power status
    stop_run "$R5"
fi
expect_fail "BMC_SEL=0 is refused" "BMC_SEL must be" env BMC_SEL=0 BASE_PORT=$((BASE + 36)) "$SIM" start "$WORK/selbad" 1

# ---- 5. SDR sensors and DCMI (the dcmi_plugin), checked with ipmi-sensors and ipmi-dcmi ----------
# sensors_csv PORT STATEDIR: ipmi-sensors in CSV, with a new SDR cache each time (freeipmi takes a
# cache for current while the SDR's timestamps stay, even when a record was added)
sensors_csv() {
    rm -rf "$2/fi-cache" && mkdir -p "$2/fi-cache"
    ftool ipmi-sensors "$1" --sdr-cache-directory="$2/fi-cache" --quiet-cache \
        --output-sensor-thresholds --output-sensor-state --comma-separated-output --no-header-output
}
# wait_sensor PORT STATEDIR REGEX: ipmi_sim re-reads sensor files every BMC_SENSOR_POLL_MS (200 here)
wait_sensor() {
    _end=$(($(now_ms) + 3000))
    while [ "$(now_ms)" -lt $_end ]; do
        sensors_csv "$1" "$2" 2>&1 | grep -Eq -- "$3" && return 0
        sleep 0.1
    done
    return 1
}
check_sensors_dcmi() {   # RUNDIR NAME
    _port=$(field "$2" 3 "$1"); _st=$(field "$2" 4 "$1")
    expect "$2 ipmi-sensors: 10 sensors" "^11,PSU1 Input," sensors_csv "$_port" "$_st"
    expect "$2 Inlet Temp with 5 thresholds" "^2,Inlet Temp,Temperature,Nominal,24.00,C,N/A,5.00,10.00,35.00,40.00,45.00,'OK'\$" \
        sensors_csv "$_port" "$_st"
    expect "$2 FAN1 in RPM, lower thresholds" "^9,FAN1,Fan,Nominal,6000.00,RPM,300.00,500.00,1000.00,N/A,N/A,N/A,'OK'\$" \
        sensors_csv "$_port" "$_st"
    expect "$2 PSU1 Status: discrete, present" "^10,PSU1 Status,Power Supply,Nominal,N/A,N/A,.*'Presence detected'\$" \
        sensors_csv "$_port" "$_st"
    echo 88 > "$_st/sensors/cpu1"
    if wait_sensor "$_port" "$_st" "^4,CPU1 Temp,Temperature,Nominal,88.00,C,.*'At or Above \(>=\) Upper Non-Critical Threshold'\$"; then
        ok "$2 CPU1 Temp file 88: upper non-critical"; else bad "$2 CPU1 Temp file 88: $(sensors_csv "$_port" "$_st" 2>&1 | grep CPU1)"; fi
    echo 45 > "$_st/sensors/cpu1"
    echo 3 > "$_st/sensors/psu1"
    if wait_sensor "$_port" "$_st" "^10,PSU1 Status,Power Supply,Critical,.*Power Supply Failure detected"; then
        ok "$2 PSU1 failure bit: Critical"; else bad "$2 PSU1 failure bit: $(sensors_csv "$_port" "$_st" 2>&1 | grep PSU1)"; fi
    echo 1 > "$_st/sensors/psu1"
    expect "$2 ipmi-dcmi capabilities: power management" "Power Management / Monitoring Support +: Available" \
        ftool ipmi-dcmi "$_port" --get-dcmi-capability-info
    echo 0 > "$_st/power"
    expect "$2 ipmi-dcmi power while off: 0 W" "^Current Power +: 0 Watts" ftool ipmi-dcmi "$_port" --get-system-power-statistics
    echo 1 > "$_st/power"
    echo 612 > "$_st/power_watts"
    expect "$2 ipmi-dcmi power: power_watts" "^Current Power +: 612 Watts" ftool ipmi-dcmi "$_port" --get-system-power-statistics
    expect_fail "$2 ipmi-dcmi: no limit set yet (0x80)" "No Set Power Limit" ftool ipmi-dcmi "$_port" --get-power-limit
    expect "$2 ipmi-dcmi set power limit 450" "" ftool ipmi-dcmi "$_port" --set-power-limit --power-limit-requested=450 \
        --exception-actions=0x11 --correction-time-limit=1000 --statistics-sampling-period=1
    file_is "$2 power_limit set, not active" "$_st/power_limit" "450 0 0x11 1000 1"
    expect "$2 ipmi-dcmi activate" "" ftool ipmi-dcmi "$_port" --activate-deactivate-power-limit=activate
    expect "$2 ipmi-dcmi get power limit 450" "Power Limit Requested +: 450 watts" ftool ipmi-dcmi "$_port" --get-power-limit
    expect_fail "$2 ipmi-dcmi 5000 W: out of range (0x84)" "Power Limit out of range" \
        ftool ipmi-dcmi "$_port" --set-power-limit --power-limit-requested=5000
    file_is "$2 power_limit unchanged" "$_st/power_limit" "450 1 0x11 1000 1"
    echo "700 1" > "$_st/power_limit"
    expect "$2 power_limit written by hand" "Power Limit Requested +: 700 watts" ftool ipmi-dcmi "$_port" --get-power-limit
    rm -f "$_st/power_limit"
    touch "$_st/no_dcmi"
    expect_fail "$2 no_dcmi: invalid command" "invalid command|unsupported" ftool ipmi-dcmi "$_port" --get-system-power-statistics
    rm -f "$_st/no_dcmi"
    : > "$_st/sdr_reads"
    sensors_csv "$_port" "$_st" > /dev/null 2>&1
    _n=$(cat "$_st/sdr_reads")
    if [ "${_n:-0}" -gt 0 ]; then ok "$2 sdr_reads counts Get SDR: $_n"; else bad "$2 sdr_reads: '$_n'"; fi
    expect "$2 sensor-add (SDR changes)" "" "$SIM" sensor-add "$1" "${2#bmc}" 'hot 30 0x01 0x01 0x0b 3 1 1 0 - - - 83 90 - 61 GPU3 Temp'
    expect "$2 the new sensor in the SDR" "^12,GPU3 Temp,Temperature,Nominal,61.00,C,N/A,N/A,N/A,83.00,90.00,N/A,'OK'\$" \
        sensors_csv "$_port" "$_st"
    expect "$2 sensors.conf keeps it" "GPU3 Temp" cat "$_st/sensors.conf"
    expect_fail "$2 sensor-add of a bad spec" "sensor number must be" "$SIM" sensor-add "$1" "${2#bmc}" 'bad 300 0x01 0x01 0x07 1 1 1 0 - - - - - - 1 X'
}

R6=$WORK/dcmi
if [ $HAVE_PLUGIN = 1 ]; then
    if start_run "$R6" 2 procs BASE_PORT=$((BASE + 60)) DCMI=1 BMC_SENSOR_POLL_MS=200; then
        check_sensors_dcmi "$R6" bmc2
        expect "dcmi: bmc1 untouched by bmc2's power" "^Current Power +: 0 Watts" \
            ftool ipmi-dcmi $((BASE + 60)) --get-system-power-statistics
        stop_run "$R6"
    fi
    R7=$WORK/dcmi-shared
    if start_run "$R7" 4 shared BASE_PORT=$((BASE + 64)) SHARED_PER_PROC=2 DCMI=1 CHASSIS_PLUGIN=1 BMC_SENSOR_POLL_MS=200; then
        check_sensors_dcmi "$R7" bmc4
        check_power_boot "$R7" bmc3 1
        echo "800 1" > "$R7/bmc4/power_limit"
        expect_fail "dcmi shared: bmc3 has its own power_limit state" "No Set Power Limit" \
            ftool ipmi-dcmi $((BASE + 66)) --get-power-limit
        stop_run "$R7"
    fi
else
    skip "DCMI plug-in tests (need cc and libopenipmi-dev)"
fi
R8=$WORK/nosensors
if start_run "$R8" 1 procs BASE_PORT=$((BASE + 70)) BMC_SENSORS=0; then
    mkdir -p "$R8/fi-cache"
    expect "BMC_SENSORS=0: ipmi-sensors lists nothing" "^\$" \
        ftool ipmi-sensors $((BASE + 70)) --sdr-cache-directory="$R8/fi-cache" --quiet-cache --comma-separated-output --no-header-output
    expect_fail "no DCMI plug-in: ipmi-dcmi fails" "invalid command|unsupported" \
        ftool ipmi-dcmi $((BASE + 70)) --get-system-power-statistics
    stop_run "$R8"
fi

# ---- 6. mc plug-in: passwords, cold reset, identify; SOL=1 (procs, then shared) ------------------
# itoolp PORT PASSWORD ARGS...: ipmitool with another password than $PW
itoolp() { _p=$1; _w=$2; shift 2; ipmitool -I lanplus -C 3 -H 127.0.0.1 -p "$_p" -U admin -P "$_w" "$@"; }
# silent DESC PORT: the BMC does not answer at all (a session open times out, in 0.6 s with the probe)
silent() {
    if [ -n "$PROBE" ]; then
        expect_fail "$1" "connection timeout" env PROBE_TIMEOUTS="600 200" "$PROBE" "127.0.0.1:$2" admin "$PW" devid
    else
        expect_fail "$1" "Unable to establish" itool "$2" -N 1 -R 1 mc info
    fi
}
# wait_answer PORT SECONDS: until the BMC answers Get Device ID again
wait_answer() {
    _end=$(($(now_ms) + $2 * 1000))
    while [ "$(now_ms)" -lt $_end ]; do
        itool "$1" -N 1 -R 1 mc info > /dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}
check_passwords() {   # RUNDIR NAME
    _port=$(field "$2" 3 "$1"); _st=$(field "$2" 4 "$1")
    : > "$_st/ops.log"
    file_is "$2 password file at start" "$_st/password" "$PW"
    expect "$2 ipmitool user set password (16)" "successful" itool "$_port" user set password 2 newpw-sixteen 16
    file_is "$2 password file follows" "$_st/password" newpw-sixteen
    expect "$2 new password works at once" "Device ID" itoolp "$_port" newpw-sixteen mc info
    expect_fail "$2 old password refused" "Unable to establish" itool "$_port" mc info
    expect "$2 ipmitool user set password (20)" "successful" itoolp "$_port" newpw-sixteen user set password 2 twenty-chars-exactly 20
    expect "$2 20-byte password works" "Device ID" itoolp "$_port" twenty-chars-exactly mc info
    expect_fail "$2 its first 16 bytes don't" "Unable to establish" itoolp "$_port" twenty-chars-exa mc info
    expect_fail "$2 test password, 16-byte test of a 20-byte one" "wrong password size" itoolp "$_port" twenty-chars-exactly user test 2 16 twenty-chars-exa
    expect_fail "$2 test password, wrong" "password incorrect" itoolp "$_port" twenty-chars-exactly user test 2 20 twenty-chars-wrong!!
    expect "$2 test password, right" "Success" itoolp "$_port" twenty-chars-exactly user test 2 20 twenty-chars-exactly
    echo 16 > "$_st/password_max"
    expect_fail "$2 password_max 16: 20-byte set refused (0xC7)" "Request data length invalid" \
        itoolp "$_port" twenty-chars-exactly user set password 2 abcdefghijklmnopqrst 20
    rm -f "$_st/password_max"
    expect "$2 ipmi-config User2:Password (16)" "" ipmi-config -h "127.0.0.1:$_port" -u admin -p twenty-chars-exactly \
        -D LAN_2_0 -W opensesspriv --category=core --commit --key-pair="User2:Password=$PW"
    file_is "$2 ops.log of the password changes" "$_st/ops.log" "set password 2 16
set password 2 20
set password 2 16"
}
R9=$WORK/mc
HAVE_SOCAT=0
command -v socat > /dev/null && HAVE_SOCAT=1
MC_ENV="MC_PLUGIN=1 SOL=$HAVE_SOCAT"
[ -n "$SOLPROBE" ] && [ $HAVE_SOCAT = 1 ] || SOLPROBE=     # libipmiconsole tests need SOL=1
if [ $HAVE_PLUGIN = 1 ]; then
    p=$((BASE + 74))
    # shellcheck disable=SC2086  # MC_ENV is a word list
    if start_run "$R9" 2 procs BASE_PORT=$p $MC_ENV BMC_RESET_OUTAGE=2; then
        st=$R9/bmc1
        check_passwords "$R9" bmc1
        # a password set right before a stop survives the restart (written at once)
        itool $p user set password 2 after-restart > /dev/null 2>&1
        stop_run "$R9"
        # shellcheck disable=SC2086
        if start_run "$R9" 2 procs BASE_PORT=$p $MC_ENV BMC_RESET_OUTAGE=2; then
            expect "a restarted BMC keeps the new password" "Device ID" itoolp $p after-restart mc info
            expect "set it back" "successful" itoolp $p after-restart user set password 2 "$PW" 16
            # Chassis Identify: ipmi_sim's reply is fixed, so libfreeipmi takes it (one request, one line)
            : > "$st/ops.log"
            expect "ipmi-chassis --chassis-identify=20" "" ftool ipmi-chassis $p --chassis-identify=20
            file_is "identify: interval and force flag" "$st/identify" "20 0"
            expect "ipmitool chassis identify force" "indefinite" itool $p chassis identify force
            file_is "identify: ops.log" "$st/ops.log" "set identify 20 0
set identify 0 1"
            # SOL with ipmitool: host output reaches the console, keys reach the serial port
            if [ $HAVE_SOCAT = 1 ]; then
                timeout 8 cat "$st/serial" > "$WORK/serial.ipmitool" 2> /dev/null &
                rpid=$!
                ( sleep 0.8; printf 'typed-by-ipmitool\r'; sleep 0.8; printf '~.' ) |
                    timeout 8 ipmitool -I lanplus -C 3 -H 127.0.0.1 -p $p -U admin -P "$PW" sol activate > "$WORK/sol.ipmitool" 2>&1 &
                ipid=$!
                sleep 1
                printf 'HOST-OUTPUT-1\r\n' > "$st/serial"
                wait $ipid
                sleep 0.2
                { kill $rpid; wait $rpid; } 2> /dev/null
                expect "SOL: ipmitool shows the host output" "HOST-OUTPUT-1" cat "$WORK/sol.ipmitool"
                expect "SOL: ipmitool keys reach the serial port" "typed-by-ipmitool" cat "$WORK/serial.ipmitool"
            else
                skip "SOL=1 tests (need socat)"
            fi
            if [ -n "$SOLPROBE" ]; then
                timeout 8 cat "$st/serial" > "$WORK/serial.lib" 2> /dev/null &
                rpid=$!
                ( sleep 0.5; printf 'login: ' > "$st/serial" ) &
                wpid=$!
                expect "SOL: libipmiconsole reads host output" "saw \"login:\"" \
                    "$SOLPROBE" -d 5 -u login: -s 'root\r' -S 0 127.0.0.1:$p admin "$PW"
                wait $wpid
                expect "SOL: a second session types too (ipmi_sim sequence fix)" "typed 7 bytes" \
                    "$SOLPROBE" -x -s 'second\r' 127.0.0.1:$p admin "$PW"
                sleep 0.2
                { kill $rpid; wait $rpid; } 2> /dev/null
                expect "SOL: libipmiconsole keys reach the serial port" "rootsecond" tr -d '\r' < "$WORK/serial.lib"
                "$SOLPROBE" -d 1.2 127.0.0.1:$p admin "$PW" > "$WORK/sol.holder" 2>&1 &
                hpid=$!
                sleep 0.6
                expect_fail "SOL in use: ERROR_ON_SOL_INUSE gives errnum 17" "errnum=17 " \
                    "$SOLPROBE" -x -b error_on_inuse 127.0.0.1:$p admin "$PW"
                wait $hpid
                "$SOLPROBE" -d 0 -t 2000 -k 1000 -K 500 127.0.0.1:$p admin "$PW" > "$WORK/sol.reset" 2>&1 &
                solpid=$!
                sleep 0.5
            fi
            # Cold Reset: answered, then 2 s of silence, sessions gone, state kept
            echo 1 > "$st/power"
            PROBE_TIMEOUTS="1500 250" "${PROBE:-true}" 127.0.0.1:$p admin "$PW" watch 3 400 > "$WORK/watch" 2>&1 &
            watchpid=$!
            sleep 0.5
            expect "cold reset: answered" "Sent cold reset" itool $p mc reset cold
            silent "cold reset: silent right after" $p
            if wait_answer $p 4; then ok "cold reset: answers again"; else bad "cold reset: still silent 4 s later"; fi
            expect "cold reset: power state kept" "Chassis Power is on" itool $p chassis power status
            file_is "cold reset: resets count" "$st/resets" 1
            expect "cold reset: ops.log" "^set cold_reset 1\$" cat "$st/ops.log"
            file_is "cold reset: bmc2 untouched" "$R9/bmc2/ops.log" ""
            wait $watchpid
            [ -z "$PROBE" ] ||
                expect "cold reset: an open libfreeipmi session dies (errnum 14)" "ok.*errnum=14" tr '\n' ' ' < "$WORK/watch"
            if [ -n "$SOLPROBE" ]; then
                wait "$solpid"
                expect "cold reset: the SOL fd reports EOF, errnum 25" "read\\(\\) EOF: .*errnum=25 " cat "$WORK/sol.reset"
            fi
            stop_run "$R9"
        fi
    fi
    R10=$WORK/mc-shared
    p=$((BASE + 76))
    # shellcheck disable=SC2086
    if start_run "$R10" 3 shared BASE_PORT=$p $MC_ENV CHASSIS_PLUGIN=1 BMC_RESET_OUTAGE=2; then
        expect "shared: cold reset of bmc2" "Sent cold reset" itool $((p + 1)) mc reset cold
        silent "shared: bmc2 is silent" $((p + 1))
        expect "shared: bmc1 answers during bmc2's outage" "Device ID" itool $p mc info
        expect "shared: bmc3 answers during bmc2's outage" "Device ID" itool $((p + 2)) mc info
        if [ -n "$SOLPROBE" ]; then
            ( sleep 0.5; printf 'BMC3-CONSOLE\r\n' > "$R10/bmc3/serial"; printf 'BMC1-CONSOLE\r\n' > "$R10/bmc1/serial" ) &
            wpid=$!
            "$SOLPROBE" -d 1 127.0.0.1:$((p + 2)) admin "$PW" > "$WORK/sol.shared" 2>&1
            wait $wpid
            expect "shared: SOL of bmc3 shows bmc3's serial port" "BMC3-CONSOLE" cat "$WORK/sol.shared"
            if grep -q BMC1-CONSOLE "$WORK/sol.shared"; then bad "shared: bmc1's serial port on bmc3's console"
            else ok "shared: ... and not bmc1's"; fi
        fi
        if wait_answer $((p + 1)) 5; then ok "shared: bmc2 back after the outage"; else bad "shared: bmc2 still silent"; fi
        expect "shared: Identify fixed with the chassis plug-in too" "" ftool ipmi-chassis $p --chassis-identify=5
        stop_run "$R10"
    fi
else
    skip "mc plug-in and SOL tests (need cc and libopenipmi-dev)"
fi
[ -n "$SOLPROBE" ] || skip "libipmiconsole SOL tests (need cc, libipmiconsole-dev and socat)"

# ---- nothing left behind --------------------------------------------------------------------------
left=
for d in /proc/[0-9]*; do
    [ -r "$d/cmdline" ] || continue
    c=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null) || continue
    case $c in *ipmi_sim*"$WORK"*|socat*"$WORK"*) left="$left ${d#/proc/}" ;; esac
done
if [ -z "$left" ]; then ok "no ipmi_sim of this selftest left running"; else bad "ipmi_sim left running:$left"; fi

echo "# start: 3 procs ${T_PROCS3:-?} ms, 20 shared ${T_SHARED20:-?} ms"
[ -z "$LAT" ] || echo "# Get Chassis Status latency (one session, 50 queries):$LAT"
echo "# $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
