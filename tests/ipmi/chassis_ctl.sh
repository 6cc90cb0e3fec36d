#!/bin/sh
# chassis_ctl.sh - power/boot model of one simulated BMC, for ipmi_sim's `chassis_control` hook.
#
# bmcsim.sh writes   chassis_control "/bin/sh <this script> <statedir>"   into lan.conf; ipmi_sim runs,
# through popen() (so via /bin/sh -c), for EVERY chassis request:
#   <this> <statedir> get power          print "power:0" or "power:1"  (Get Chassis Status)
#   <this> <statedir> get boot           print "boot:<dev>"            (Get Boot Options param 5,
#                                                                        and Set param 4)
#   <this> <statedir> set power "0|1"    power off / on; a power cycle is "set power 0" and, 1 s
#                                        later from an ipmi_sim timer, "set power 1"
#   <this> <statedir> set reset "1"      hard reset (fails while powered off)
#   <this> <statedir> set shutdown "1"   soft (ACPI) shutdown: modelled as an immediate power off
#   <this> <statedir> set boot "<dev>"   Set Boot Options param 5; dev is what ipmi_sim decoded
#                                        from the device selector: none pxe default cdrom bios
#   <this> <statedir> set identify "<secs> <force>"
# Exit 0 = success. Non-zero (message on stdout) makes ipmi_sim answer completion code 0xFF.
#
# State, plain files in <statedir> (a test may seed or read them at any time):
#   power    "0" or "1"
#   boot     none|pxe|default|cdrom|bios   ("default" is the IPMI "force boot from hard drive")
#   ops.log  one line per successful set: "set power 1", "set reset 1", "set shutdown 1",
#            "set boot pxe", "set identify 15 0"
#   identify the last Chassis Identify: "<interval seconds> <force 0|1>" (ipmi_sim sends 15 when
#            the request has no data byte, force 0 when it has no second byte; 0 = identify off)
# Fault injection (create or remove while the BMC runs):
#   fail     exists        -> every chassis request fails (completion code 0xFF), nothing logged
#   delay    "<seconds>"   -> sleep that long before answering (blocks the whole ipmi_sim process)
#
# The `get power` path runs on every status poll, so it uses shell builtins only (no fork/exec
# beyond the /bin/sh that popen starts): no cat, no date, no mkdir.

dir=$1
op=$2
if [ -z "$dir" ] || [ -z "$op" ]; then
    echo "usage: chassis_ctl.sh STATEDIR get|set NAME [VALUE] ..."
    exit 2
fi
shift 2
if [ ! -d "$dir" ]; then
    echo "no state directory $dir"
    exit 1
fi

if [ -f "$dir/delay" ]; then
    secs=
    read -r secs < "$dir/delay" || :
    [ -n "$secs" ] && sleep "$secs"
fi
if [ -f "$dir/fail" ]; then
    echo "injected failure ($dir/fail)"
    exit 1
fi

power=0
boot=none
[ -f "$dir/power" ] && { read -r power < "$dir/power" || :; }
[ -f "$dir/boot" ] && { read -r boot < "$dir/boot" || :; }

case $op in
get)
    for name in "$@"; do
        case $name in
        power) echo "power:$power" ;;
        boot)  echo "boot:$boot" ;;
        *)     echo "unknown parameter: $name"; exit 1 ;;
        esac
    done
    ;;
set)
    while [ $# -gt 0 ]; do
        if [ $# -lt 2 ]; then
            echo "no value for $1"
            exit 1
        fi
        name=$1
        value=$2
        shift 2
        case $name in
        power)
            case $value in
            0|1) echo "$value" > "$dir/power"; power=$value ;;
            *)   echo "bad power value: $value"; exit 1 ;;
            esac
            ;;
        reset)
            if [ "$power" != 1 ]; then
                echo "reset while powered off"
                exit 1
            fi
            ;;
        shutdown)
            echo 0 > "$dir/power"
            power=0
            ;;
        boot)
            case $value in
            none|pxe|default|cdrom|bios) echo "$value" > "$dir/boot" ;;
            *) echo "unsupported boot device: $value"; exit 1 ;;
            esac
            ;;
        identify) echo "$value" > "$dir/identify" ;;
        *)
            echo "unknown parameter: $name"
            exit 1
            ;;
        esac
        echo "set $name $value" >> "$dir/ops.log"
    done
    ;;
*)
    echo "unsupported operation: $op"
    exit 1
    ;;
esac
exit 0
