#!/bin/sh
# bmcsim.sh - simulated IPMI 2.0 (RMCP+/lanplus) BMCs for Rackpilot tests, on loopback only.
# Each BMC is a real OpenIPMI `ipmi_sim` LAN endpoint with its own power/boot state files.
#
#   bmcsim.sh start RUNDIR COUNT [procs|shared]   start COUNT BMCs (bmc1..bmcCOUNT) under RUNDIR
#   bmcsim.sh stop  RUNDIR                        stop the ipmi_sim processes recorded in RUNDIR
#   bmcsim.sh list  RUNDIR                        print RUNDIR/bmcs.tsv
#   bmcsim.sh sensor-add RUNDIR N 'SPEC'          add a sensor to running BMC N (needs DCMI=1):
#                                                 its SDR changes, as on a hot plug (SPEC: below)
#
# Modes
#   procs  (default) one ipmi_sim process per BMC
#   shared           one ipmi_sim process per group of up to SHARED_PER_PROC BMCs (fleets of 100s)
# BMC N (1-based) listens on 127.0.0.1:(BASE_PORT + N - 1) in both modes.
#
# Environment
#   BASE_PORT=19001        UDP port of bmc1
#   BMC_USER=admin         user name (user 2, privilege ADMINISTRATOR), 1-15 characters, same set
#   BMC_PASSWORD=password  password, characters from [A-Za-z0-9_.@%+=:,-]: 1-19 (lan.conf takes no
#                          more), 1-20 with MC_PLUGIN=1 (it comes from statedir/password), 1-16 with
#                          BMC_PASSWORD_MAX=16. A restarted BMC keeps the password a client set
#                          (README "User passwords")
#   BMC_INITIAL_POWER=0    power state written into a new statedir
#   SHARED_PER_PROC=100    BMCs per ipmi_sim process in shared mode (1-110)
#   CHASSIS_PLUGIN=1       build chassis_plugin.c into RUNDIR/chassis_plugin.so (cc, libopenipmi-dev)
#                          and use it instead of forking chassis_ctl.sh on every chassis request
#   BMCSIM_START_TIMEOUT=60  seconds to wait for all ports to be bound
#   BMC_SEL=               System Event Log: empty (default) keeps ipmi_sim's, which holds no records;
#                          N (1-10000) gives every BMC a SEL of N records (Add SEL Entry, Set SEL Time);
#                          none drops the SEL device (Get SEL Info answers "invalid command")
#   BMC_SENSORS=1          SDR sensors (table below) read from statedir/sensors/KEY; 0: none (the SDR
#                          then holds only the FRU locator)
#   BMC_SENSOR_POLL_MS=1000  how often ipmi_sim re-reads each sensor file (100-60000)
#   DCMI=1                 build dcmi_plugin.c into RUNDIR/dcmi_plugin.so (cc, libopenipmi-dev) and load
#                          it: DCMI power reading and power limit, sdr_reads, sensor-add
#   MC_PLUGIN=1            build mc_plugin.c into RUNDIR/mc_plugin.so (cc, libopenipmi-dev) and load
#                          it: Set User Password done right (16/20 bytes, test password, written to
#                          disk at once, statedir/password), BMC Cold Reset (an outage of
#                          reset_outage seconds, counted in statedir/resets), and fixes of ipmi_sim
#                          bugs that break libfreeipmi/libipmiconsole (Chassis Identify reply, SOL)
#   BMC_PASSWORD_MAX=20    16: BMCs take 16-byte passwords only (Set User Password with the 20-byte
#                          flag answers 0xC7); 20: both sizes (MC_PLUGIN; statedir/password_max)
#   BMC_RESET_OUTAGE=3     seconds a BMC stays silent after a Cold Reset (MC_PLUGIN; per BMC:
#                          statedir/reset_outage)
#   SOL=1                  Serial over LAN: every BMC's serial port is a pty, statedir/serial, that a
#                          test reads (keys typed into the SOL console) and writes (host output shown
#                          on the console). One socat per BMC; implies MC_PLUGIN=1. Needs socat.
#
# Sensors: one SPEC a line, fields separated by blanks, "-" for a threshold the sensor lacks:
#   KEY NUM TYPE READING ENTITY INSTANCE UNIT M B LNR LC LNC UNC UC UNR VALUE NAME...
#   KEY      value file statedir/sensors/KEY, seeded with VALUE on a new statedir. Analog sensors
#            hold the reading in its unit, as a decimal integer (leading zeros read as octal);
#            ipmi_sim stores round((x - B) / M) in the raw byte (0-255). Discrete sensors hold the
#            state bits (PSU: 1 presence, 2 failure, 4 predictive failure, 8 AC lost).
#   NUM      sensor number 1-254; TYPE sensor type (0x01 temperature, 0x04 fan, 0x08 power supply);
#   READING  0x01 threshold (a full SDR, type 1) or a discrete reading type (0x6f: a compact SDR, type 2)
#   ENTITY   IPMI entity id (0x40 air inlet, 0x03 processor, 0x0b add-in card, 0x20 memory device,
#            0x04 drive bay, 0x1d fan, 0x0a power supply, 0x07 system board); INSTANCE 1-127
#   UNIT     base unit (1 degrees C, 6 Watts, 18 RPM); M, B linear factors: x = M * raw + B
#   NAME     the SDR id string, 1-31 bytes (over 16 breaks the IPMI spec: a test of odd peers);
#            \xHH stands for any byte
# Every BMC gets the SENSOR_TABLE below, plus the lines of statedir/sensors.conf when that file exists
# at start (sensor-add appends to it, so a restarted BMC keeps what was added).
#
# RUNDIR layout
#   bmcs.tsv      one line per BMC, tab separated, no header:
#                 name  host:port  port  statedir  serial  guid  guid_hex  pid
#   pids          "pid name" of every ipmi_sim started (what `stop` kills)
#   bmcN/         statedir: power, boot, ops.log, fail, delay (see chassis_ctl.sh), fru.bin,
#                 bootflags (plug-in only); sensors/KEY, sensors.conf; mc (its IPMB address);
#                 DCMI=1: power_watts, power_limit, power_limit_range, no_dcmi, sdr_reads, emu.cmds
#                 (see dcmi_plugin.c); identify (last Chassis Identify: "SECS FORCE");
#                 MC_PLUGIN=1: password, password_max, resets, reset_outage (see mc_plugin.c);
#                 SOL=1: serial (the test's end of the serial port), ttySOL<port> (ipmi_sim's end),
#                 socat.log; procs mode also lan.conf, bmc.emu, sim/, sim.log
#   simK/         shared mode: lan.conf, bmcs.emu, chassis.map, sim/, sim.log of process K
set -eu

HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
CTL=$HERE/chassis_ctl.sh
IPMI_SIM=${IPMI_SIM:-ipmi_sim}
BASE_PORT=${BASE_PORT:-19001}
BMC_USER=${BMC_USER:-admin}
BMC_PASSWORD=${BMC_PASSWORD:-password}
BMC_INITIAL_POWER=${BMC_INITIAL_POWER:-0}
SHARED_PER_PROC=${SHARED_PER_PROC:-100}
CHASSIS_PLUGIN=${CHASSIS_PLUGIN:-0}
BMCSIM_START_TIMEOUT=${BMCSIM_START_TIMEOUT:-60}
BMC_SEL=${BMC_SEL:-}
BMC_SENSORS=${BMC_SENSORS:-1}
BMC_SENSOR_POLL_MS=${BMC_SENSOR_POLL_MS:-1000}
DCMI=${DCMI:-0}
MC_PLUGIN=${MC_PLUGIN:-0}
SOL=${SOL:-0}
BMC_PASSWORD_MAX=${BMC_PASSWORD_MAX:-20}
BMC_RESET_OUTAGE=${BMC_RESET_OUTAGE:-3}
HOST=127.0.0.1

# The sensors of every simulated BMC (format above): an 8-GPU node's usual suspects. Thresholds in
# the reading's unit. The fan reads in steps of 100 RPM, the PSU input in steps of 16 W.
SENSOR_TABLE='inlet   1 0x01 0x01 0x40 1 1  1   0 -   5   10   35   40   45  24   Inlet Temp
exhaust 2 0x01 0x01 0x07 1 1  1   0 -   -   -    60   70   -   35   Exhaust Temp
cpu1    3 0x01 0x01 0x03 1 1  1   0 -   -   -    85   95   100 45   CPU1 Temp
cpu2    4 0x01 0x01 0x03 2 1  1   0 -   -   -    85   95   100 47   CPU2 Temp
gpu1    5 0x01 0x01 0x0b 1 1  1   0 -   -   -    83   90   95  55   GPU1 Temp
dimm1   6 0x01 0x01 0x20 1 1  1   0 -   -   -    80   90   -   40   DIMM1 Temp
nvme0   7 0x01 0x01 0x04 1 1  1   0 -   -   -    70   75   -   38   NVMe0 Temp
fan1    8 0x04 0x01 0x1d 1 18 100 0 300 500 1000 -    -    -   6000 FAN1
psu1    9 0x08 0x6f 0x0a 1 -  -   - -   -   -    -    -    -   1    PSU1 Status
psu1_in 10 0x08 0x01 0x0a 1 6 16  0 -   -   -    1600 2000 -   480  PSU1 Input'

# Identity served by every BMC (Get Device ID / FRU). Manufacturer ID 32473 is the IANA
# enterprise number reserved for documentation (RFC 5612), so it never matches a real vendor.
MFG_ID=32473
PRODUCT_ID=0x0801
FW_MAJOR=1
FW_MINOR=0x23          # BCD: firmware revision 1.23
FRU_MANUFACTURER="Rackpilot Sim"
FRU_PRODUCT="SIM-8GPU"

die() { echo "bmcsim.sh: $*" >&2; exit 1; }

usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

is_uint() { case $1 in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac; }
in_range() { is_uint "$1" && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }

# Start-up cost is dominated by forks, so the per-BMC helpers below use builtins only.
pad4() { _p=$((10000 + $1)); n4=${_p#1}; }              # 3 -> n4=0003 (N <= 9999)
hexdigit() {
    case $1 in
    10) _h=a ;; 11) _h=b ;; 12) _h=c ;; 13) _h=d ;; 14) _h=e ;; 15) _h=f ;; *) _h=$1 ;;
    esac
}
hex2() { hexdigit $(($1 / 16)); _hi=$_h; hexdigit $(($1 % 16)); hex="0x$_hi$_h"; }  # 34 -> 0x22

# ---------------------------------------------------------------------------------------------
# FRU image (IPMI Platform Management FRU Information Storage Definition v1.0), built with shell
# builtins only: common header, chassis info, board info and product info areas, each with
# 8-byte multiple length, type/length bytes (0xC0|len = 8-bit ASCII), 0xC1 end marker and a
# zero checksum. Bytes are collected as decimal numbers in $area.

ASCII=' !"#$%&'"'"'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_`abcdefghijklmnopqrstuvwxyz{|}~'

area=
area_len=0
area_sum=0
add_byte() {
    area="$area $1"
    area_len=$((area_len + 1))
    area_sum=$(((area_sum + $1) & 255))
}
add_field() {    # type/length byte + ASCII bytes; 2..63 characters, or "" for an empty field
    _s=$1
    [ ${#_s} -le 63 ] || die "FRU field too long: $_s"
    [ ${#_s} -ne 1 ] || die "FRU field of one character would read as the end marker: $_s"
    add_byte $((0xC0 | ${#_s}))
    while [ -n "$_s" ]; do
        _rest=${_s#?}
        _c=${_s%"$_rest"}
        _s=$_rest
        _pre=${ASCII%%"$_c"*}
        [ ${#_pre} -lt ${#ASCII} ] || die "FRU field has a non-printable character"
        add_byte $((32 + ${#_pre}))
    done
}
begin_area() { area= ; area_len=0; area_sum=0; }
end_area() {     # end marker, zero padding to a multiple of 8, zero checksum
    add_byte 193
    while [ $(((area_len + 1) % 8)) -ne 0 ]; do add_byte 0; done
    add_byte $(((256 - area_sum) & 255))
}
# build_area "FIXED BYTES" FIELD... -> one info area in $built (decimal bytes), $built_len.
# Fields are encoded first so that the area length byte (covered by the checksum) is known.
build_area() {
    _fixed=$1; shift
    begin_area
    for _f in "$@"; do add_field "$_f"; done
    _body=$area
    _body_len=$area_len
    _nfixed=0
    for _b in $_fixed; do _nfixed=$((_nfixed + 1)); done
    # format version + length byte + fixed bytes + fields + 0xC1 + pad + checksum
    _total=$((2 + _nfixed + _body_len + 2))
    _total=$(((_total + 7) / 8 * 8))
    begin_area
    add_byte 1
    add_byte $((_total / 8))
    for _b in $_fixed; do add_byte "$_b"; done
    for _b in $_body; do add_byte "$_b"; done
    end_area
    built=$area
    built_len=$area_len
}

# write decimal bytes "$1" to file "$2" with one builtin printf (octal escapes)
write_bytes() {
    _fmt=
    for _b in $1; do
        _fmt="$_fmt\\$(((_b >> 6) * 100 + ((_b >> 3) & 7) * 10 + (_b & 7)))"
    done
    # shellcheck disable=SC2059  # the format is the data: octal escapes only
    printf "$_fmt" > "$2"
}

# make_fru N FILE
make_fru() {
    pad4 "$1"
    _n4=$n4
    # Chassis info: type 0x17 (rack mount), part number, serial number
    build_area "23" "SIM-8GPU-CH" "SIMCH$_n4"
    _chassis=$built; _chassis_len=$built_len
    # Board info: language 0 (English), mfg date 2024-01-01 00:00 = 14726880 minutes since 1996
    # (LS byte first), manufacturer, product name, serial, part number, FRU file id
    build_area "0 224 182 224" "$FRU_MANUFACTURER" "SIM-8GPU-MB" "SIMBS$_n4" "SIM-MB-01" ""
    _board=$built; _board_len=$built_len
    # Product info: language 0, manufacturer, name, part/model, version, serial, asset tag, file id
    build_area "0" "$FRU_MANUFACTURER" "$FRU_PRODUCT" "$FRU_PRODUCT" "1.0" "SIMSN$_n4" "SIMAT$_n4" ""
    _product=$built; _product_len=$built_len
    _off_ch=1
    _off_bd=$((_off_ch + _chassis_len / 8))
    _off_pr=$((_off_bd + _board_len / 8))
    begin_area
    add_byte 1; add_byte 0; add_byte $_off_ch; add_byte $_off_bd; add_byte $_off_pr
    add_byte 0; add_byte 0
    add_byte $(((256 - area_sum) & 255))
    write_bytes "$area $_chassis $_board $_product" "$2"
    fru_size=$((8 + _chassis_len + _board_len + _product_len))
}

# ---------------------------------------------------------------------------------------------
# Per-BMC identity

# System GUID, deterministic from N: guid_str is the RFC 4122 text form
# 5253494d-0000-4000-8000-NNNNNNNNNNNN ("RSIM", version 4, N in decimal digits). guid_hex is what
# goes into lan.conf `guid` and onto the wire (Get System GUID): the 16 bytes of guid_str in
# reverse order, which is the IPMI spec encoding (freeipmi and ipmitool both print guid_str).
make_guid() {
    pad4 "$1"
    _node=00000000$n4
    guid_str="5253494d-0000-4000-8000-$_node"
    _s="5253494d000040008000$_node"
    guid_hex=
    while [ -n "$_s" ]; do
        _rest=${_s#??}
        guid_hex="${_s%"$_rest"}$guid_hex"
        _s=$_rest
    done
}

# ---------------------------------------------------------------------------------------------
# Process bookkeeping

# true if $1 is a live (non-zombie) process; builtins only
alive() {
    [ -r "/proc/$1/stat" ] || return 1
    _st=
    read -r _ _ _st _ < "/proc/$1/stat" 2>/dev/null || return 1
    [ "$_st" != Z ] && [ "$_st" != X ]
}

# true if $1 is a live ipmi_sim (or, SOL=1, socat) whose command line contains RUNDIR $2
ours() {
    alive "$1" || return 1
    _cmd=$(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null) || return 1
    case $_cmd in
    *ipmi_sim\ *"$2/"*|socat\ *"$2/"*) return 0 ;;
    *) return 1 ;;
    esac
}

stop_rundir() {
    _run=$1
    [ -f "$_run/pids" ] || return 0
    _mine=
    while read -r _pid _name; do
        [ -n "$_pid" ] || continue
        if ours "$_pid" "$_run"; then
            kill -TERM "$_pid" 2>/dev/null || :
            _mine="$_mine $_pid"
        fi
    done < "$_run/pids"
    _i=0
    while [ $_i -lt 50 ]; do
        _left=
        for _pid in $_mine; do alive "$_pid" && _left="$_left $_pid"; done
        _mine=$_left
        [ -z "$_mine" ] && break
        sleep 0.1
        _i=$((_i + 1))
    done
    for _pid in $_mine; do
        if ours "$_pid" "$_run"; then
            echo "bmcsim.sh: pid $_pid ignored SIGTERM for 5 s, sending SIGKILL" >&2
            kill -KILL "$_pid" 2>/dev/null || :
        fi
    done
    _i=0
    while [ $_i -lt 50 ]; do
        _left=
        for _pid in $_mine; do alive "$_pid" && _left="$_left $_pid"; done
        [ -z "$_left" ] && break
        sleep 0.1
        _i=$((_i + 1))
    done
    rm -f "$_run/pids"
    [ -z "${_left:-}" ] || die "processes still alive after SIGKILL:$_left"
}

# ---------------------------------------------------------------------------------------------
# Config writers

lan_block() {   # $1 = IPMB address, $2 = port, $3 = guid hex, $4 = statedir
    _auth="md2 md5 straight"
    printf '%s\n' "set_working_mc $1" "  startlan 1" "    addr $HOST $2" "    priv_limit admin" \
        "    allowed_auths_callback $_auth" "    allowed_auths_user $_auth" \
        "    allowed_auths_operator $_auth" "    allowed_auths_admin $_auth" \
        "    guid $3" "  endlan"
    # run through /bin/sh so that a lost executable bit does not matter (same cost: one sh either way)
    [ "$CHASSIS_PLUGIN" = 1 ] || printf '%s\n' "  chassis_control \"/bin/sh $CTL $4\""
    # the serial port behind SOL: ipmi_sim opens the pty (a tty: termios, no RTS/CTS lines)
    [ "$SOL" != 1 ] || printf '%s\n' "  sol \"$4/ttySOL$2\" 115200 nortscts"
    printf '%s\n\n' "  user 2 true \"$BMC_USER\" \"$BMC_PASSWORD\" admin 10 $_auth"
}

# One SDR in the main repository: a FRU Device Locator (type 0x11) for logical FRU device 0 behind
# the BMC (access address 0x20), entity 0x17 (system chassis) instance 1, id string "SIM-8GPU FRU".
# Without any SDR, ipmi-fru (which walks the SDR first) fails with "SDR record count invalid".
fru_locator_sdr() {
    begin_area
    add_field "SIM-8GPU FRU"
    _str=$area
    _len=$((10 + area_len))
    fru_sdr="0 0 0x51 0x11 $_len 0x20 0 0x80 0 0 0x10 0 0x17 1 0$_str"
}

# ---------------------------------------------------------------------------------------------
# Sensors: SDR records (IPMI 2.0 section 43) and ipmi_sim emulator lines, with builtins only.

# add the ID string of a sensor: type/length byte (0xC0: 8-bit ASCII) and the bytes of $1, where
# \xHH is any byte
add_id_string() {
    _s=$1; _bytes=; _n=0
    while [ -n "$_s" ]; do
        case $_s in
        \\x[0-9a-fA-F][0-9a-fA-F]*)
            _rest=${_s#????}
            _h=${_s%"$_rest"}
            _bytes="$_bytes $((0x${_h#??}))"
            _s=$_rest ;;
        *)
            _rest=${_s#?}
            _c=${_s%"$_rest"}
            _s=$_rest
            _pre=${ASCII%%"$_c"*}
            [ ${#_pre} -lt ${#ASCII} ] || die "sensor name: a byte that is not printable ASCII; write it as \\xHH"
            _bytes="$_bytes $((32 + ${#_pre}))" ;;
        esac
        _n=$((_n + 1))
    done
    in_range $_n 1 31 || die "sensor name must be 1-31 bytes"
    add_byte $((0xC0 | _n))
    for _b in $_bytes; do add_byte "$_b"; done
}

raw_of() {   # threshold/value $1 of a sensor with factors $2 (M) $3 (B) -> $raw (0-255)
    raw=$((($1 - $3) / $2))
    in_range $raw 0 255 || die "sensor value $1 does not fit a raw byte with M=$2 B=$3"
}

# sensor_spec SPEC...: parse one sensor line into s_* variables and its SDR bytes into $sdr
sensor_spec() {
    [ $# -ge 17 ] || die "sensor spec needs 17 fields or more: $*"
    s_key=$1 s_num=$2 s_type=$3 s_rt=$4 s_ent=$5 s_inst=$6 s_unit=$7 s_m=$8 s_b=$9
    shift 9
    s_lnr=$1 s_lc=$2 s_lnc=$3 s_unc=$4 s_uc=$5 s_unr=$6 s_val=$7
    shift 7
    s_name=$*
    case $s_key in ''|*[!A-Za-z0-9_.-]*) die "sensor key: use [A-Za-z0-9_.-] only: $s_key" ;; esac
    in_range "$s_num" 1 254 || die "sensor number must be 1-254: $s_num"
    begin_area
    if [ $((s_rt)) -eq 1 ]; then
        in_range "$s_m" 1 511 && in_range "$s_b" 0 511 || die "sensor $s_key: M must be 1-511, B 0-511"
        s_mask= s_vals= _readable=0 _lower=0 _upper=0
        # thresholds, raw: UNR UC UNC LNR LC LNC (the order of the SDR and of sensor_set_threshold)
        for _t in unr uc unc lnr lc lnc; do
            eval "_v=\$s_$_t"
            if [ "$_v" = - ]; then _r=0; s_mask="${s_mask}0"; else raw_of "$_v" "$s_m" "$s_b"; _r=$raw; s_mask="${s_mask}1"; fi
            s_vals="$s_vals $_r"
        done
        [ "$s_lnc" = - ] || { _readable=$((_readable | 1)); _lower=$((_lower | 0x10)); }
        [ "$s_lc" = - ] || { _readable=$((_readable | 2)); _lower=$((_lower | 0x20)); }
        [ "$s_lnr" = - ] || { _readable=$((_readable | 4)); _lower=$((_lower | 0x40)); }
        [ "$s_unc" = - ] || { _readable=$((_readable | 8)); _upper=$((_upper | 0x10)); }
        [ "$s_uc" = - ] || { _readable=$((_readable | 16)); _upper=$((_upper | 0x20)); }
        [ "$s_unr" = - ] || { _readable=$((_readable | 32)); _upper=$((_upper | 0x40)); }
        _cap=67                              # auto re-arm, no event messages
        [ $_readable -eq 0 ] || _cap=71      # + thresholds readable (per the reading mask)
        # owner 0x20 LUN 0, number, entity, instance, init (scanning on, events off), capabilities,
        # type, reading type, lower / upper threshold reading masks, readable / settable masks
        for _b in 32 0 "$s_num" $((s_ent)) "$s_inst" 125 $_cap $((s_type)) $((s_rt)) 0 $_lower 0 $_upper $_readable 0; do add_byte "$_b"; done
        # units 1 (unsigned), base unit, modifier unit, linear, M, B (10 bits each), accuracy, exponents
        for _b in 0 "$s_unit" 0 0 $((s_m & 255)) $(((s_m >> 8) << 6)) $((s_b & 255)) $(((s_b >> 8) << 6)) 0 0; do add_byte "$_b"; done
        # analog flags, nominal, normal max / min, sensor max / min, thresholds, hysteresis, reserved, OEM
        for _b in 0 0 0 0 255 0 $s_vals 0 0 0 0 0; do add_byte "$_b"; done
        add_id_string "$s_name"
        _type=1
    else
        # a discrete sensor: owner, LUN, number, entity, instance, init, capabilities (no thresholds,
        # no events), type, reading type, assertion / deassertion / reading masks (offsets 0-14),
        # units, record sharing (one sensor), hysteresis, reserved, OEM
        for _b in 32 0 "$s_num" $((s_ent)) "$s_inst" 125 67 $((s_type)) $((s_rt)) 255 127 0 0 255 127 0 0 0 1 0 0 0 0 0 0 0; do add_byte "$_b"; done
        add_id_string "$s_name"
        _type=2
    fi
    sdr="0 0 81 $_type $area_len$area"
}

# sensor_lines MC FILE: the emulator lines of the parsed sensor; FILE is its value file as an
# emulator string ("/abs/path", or $RP_ST"/sensors/key": ipmi_sim joins variables and quoted parts)
sensor_lines() {
    _opts=
    if [ $((s_rt)) -eq 1 ]; then
        [ "$s_m" -eq 1 ] || _opts=" div=$s_m"
        [ "$s_b" -eq 0 ] || _opts="$_opts sub=$s_b"
    fi
    echo "sensor_add $1 0 $s_num $s_type $s_rt poll $BMC_SENSOR_POLL_MS file $2$_opts"
    [ $((s_rt)) -ne 1 ] || [ "$s_mask" = 000000 ] || echo "sensor_set_threshold $1 0 $s_num readable $s_mask$s_vals"
    echo "sensor_set_event_support $1 0 $s_num disable scanning none 000000000000000 000000000000000 000000000000000 000000000000000"
    echo "main_sdr_add $1 $sdr"
}

# sensor_emu MC STATEDIR: the emulator lines of the parsed sensor; seeds its value file
sensor_emu() {
    [ -f "$2/sensors/$s_key" ] || echo "$s_val" > "$2/sensors/$s_key"
    sensor_lines "$1" "\"$2/sensors/$s_key\""
}

# Parse SENSOR_TABLE once, into the emulator lines every BMC shares ($table_emu, with the
# variables RP_MC and RP_ST that sensors_emu defines per BMC) and "key value" pairs to seed
# ($table_seed): starting hundreds of BMCs costs a printf each, not a parse.
table_emu=
table_seed=
parse_table() {
    _oifs=$IFS
    IFS='
'
    set -f
    for _line in $SENSOR_TABLE; do
        IFS=$_oifs
        # shellcheck disable=SC2086  # fields
        sensor_spec $_line
        table_emu="$table_emu$(sensor_lines '$RP_MC' "\$RP_ST\"/sensors/$s_key\"")
"
        table_seed="$table_seed $s_key $s_val"
        IFS='
'
    done
    IFS=$_oifs
    set +f
}

# sensors_emu MC STATEDIR: the emulator lines of every sensor of one BMC; seeds its value files
sensors_emu() {
    [ "$BMC_SENSORS" = 1 ] || return 0
    set -- "$1" "$2" $table_seed
    _mc=$1 _st=$2
    shift 2
    while [ $# -ge 2 ]; do
        [ -f "$_st/sensors/$1" ] || echo "$2" > "$_st/sensors/$1"
        shift 2
    done
    # persist off: ipmi_sim rewrites its SDR persistence file on every addition (half the start-up
    # time of 200 BMCs), a file nothing reads back here (no mc_add asks for persist_sdr); on again
    # for the SEL, which a restarted BMC keeps.
    printf 'define RP_MC "%s"\ndefine RP_ST "%s"\npersist off\n%spersist on\n' "$_mc" "$_st" "$table_emu"
    [ -f "$_st/sensors.conf" ] || return 0
    while read -r _line; do
        case $_line in ''|'#'*) continue ;; esac
        set -f
        # shellcheck disable=SC2086  # fields
        sensor_spec $_line
        set +f
        sensor_emu "$_mc" "$_st"
    done < "$_st/sensors.conf"
}

emu_block() {   # $1 = IPMB address, $2 = fru file, $3 = fru size, $4 = statedir
    # mc_add: ipmb, device id, no device SDRs, device revision, fw major, fw minor (BCD),
    # device support (0x9f: sensor, SDR repo, SEL, FRU inventory, event receiver, chassis;
    # 0x9b without the SEL), manufacturer id, product id. Numbers are parsed like strtoul(s, 0, 0).
    _devsup=0x9f
    [ "$BMC_SEL" != none ] || _devsup=0x9b
    printf '%s\n' "mc_add $1 0 no-device-sdrs 0x03 $FW_MAJOR $FW_MINOR $_devsup $MFG_ID $PRODUCT_ID" \
        "main_sdr_add $1 $fru_sdr" "mc_add_fru_data $1 0 $3 file 0 \"$2\""
    # each sensor before its SDR record, so that ipmi_sim never initialises a sensor from the SDR
    # (it would in procs mode only): every mode sets thresholds and scanning the same way
    sensors_emu "$1" "$4"
    # sel_enable: ipmb, max records, flags (0x0a: Reserve SEL and Delete SEL Entry supported)
    case $BMC_SEL in ''|none) ;; *) echo "sel_enable $1 $BMC_SEL 0x0a" ;; esac
    echo "mc_enable $1"
}

# prepare statedir of BMC $1 (number) -> sets st, port, serial, guid_str, guid_hex, fru_size
prepare_bmc() {
    st=$RUN/bmc$1
    port=$((BASE_PORT + $1 - 1))
    pad4 "$1"
    serial=SIMSN$n4
    mkdir -p "$st/sensors"
    [ -f "$st/power" ] || echo "$BMC_INITIAL_POWER" > "$st/power"
    [ -f "$st/boot" ] || echo none > "$st/boot"
    [ -f "$st/ops.log" ] || : > "$st/ops.log"
    [ "$DCMI" != 1 ] || [ -f "$st/power_watts" ] || echo 350 > "$st/power_watts"
    [ "$MC_PLUGIN" != 1 ] || [ -f "$st/password" ] || echo "$BMC_PASSWORD" > "$st/password"
    make_fru "$1" "$st/fru.bin"
    make_guid "$1"
}

spawn() {   # $1 = name, $2 = lan.conf, $3 = emu file, $4 = ipmi_sim state dir, $5 = log
    mkdir -p "$4"
    [ -z "$sol_links" ] || wait_sol_links
    BMC_PASSWORD_MAX=$BMC_PASSWORD_MAX BMC_RESET_OUTAGE=$BMC_RESET_OUTAGE \
        "$IPMI_SIM" -c "$2" -f "$3" -s "$4" -n < /dev/null > "$5" 2>&1 &
    echo "$! $1" >> "$RUN/pids"
}

# SOL=1: the serial port of the BMC with statedir $1 and port $2 (name $3) is a pair of ptys that a
# socat joins: ipmi_sim opens $1/ttySOL$2 (lan.conf `sol`), the test $1/serial. socat keeps both
# slaves open itself, so a test may open and close `serial` as often as it likes.
sol_links=
start_sol() {
    rm -f "$1/serial" "$1/ttySOL$2"
    # ipmi_sim takes the UUCP lock /var/lock/LCK..<device basename> (hence the port in the name).
    # One left by a killed ipmi_sim costs the next start 1 s, or, if its pid is in use again by
    # another program, the serial port: remove it unless a live ipmi_sim holds it.
    _lck=/var/lock/LCK..ttySOL$2
    if [ -f "$_lck" ]; then
        _lpid=
        read -r _lpid _ < "$_lck" 2>/dev/null || :
        if ! { is_uint "$_lpid" && alive "$_lpid" && grep -q ipmi_sim "/proc/$_lpid/cmdline" 2>/dev/null; }; then
            rm -f "$_lck"
        fi
    fi
    socat PTY,link="$1/ttySOL$2",rawer PTY,link="$1/serial",rawer < /dev/null > "$1/socat.log" 2>&1 &
    echo "$! sol-$3" >> "$RUN/pids"
    sol_links="$sol_links $1/ttySOL$2 $1/serial"
}
wait_sol_links() {   # before ipmi_sim opens them
    _deadline=$(($(date +%s) + BMCSIM_START_TIMEOUT))
    for _l in $sol_links; do
        while [ ! -L "$_l" ]; do
            [ "$(date +%s)" -lt "$_deadline" ] || die "socat did not create $_l"
            sleep 0.01
        done
    done
    sol_links=
}

wait_bound() {  # every "127.0.0.1:port" in $RUN/.ports bound, every recorded pid alive
    _deadline=$(($(date +%s) + BMCSIM_START_TIMEOUT))
    _want=$(wc -l < "$RUN/.ports")
    while :; do
        while read -r _pid _name; do
            alive "$_pid" || { echo "bmcsim.sh: $_name (pid $_pid) exited during start-up" >&2; return 1; }
        done < "$RUN/pids"
        _have=$(ss -Hlun 2>/dev/null | awk -v f="$RUN/.ports" '
            BEGIN { while ((getline l < f) > 0) want[l] = 1 }
            ($4 in want) && !seen[$4]++ { n++ }
            END { print n + 0 }')
        [ "$_have" -ge "$_want" ] && return 0
        if [ "$(date +%s)" -ge "$_deadline" ]; then
            echo "bmcsim.sh: only $_have of $_want ports bound after ${BMCSIM_START_TIMEOUT}s" >&2
            return 1
        fi
        sleep 0.05
    done
}

start() {
    RUN=$1; count=$2; mode=$3
    in_range "$count" 1 9999 || die "COUNT must be 1..9999"
    in_range "$BASE_PORT" 1024 65535 || die "BASE_PORT must be 1024..65535"
    [ $((BASE_PORT + count - 1)) -le 65535 ] || die "ports beyond 65535"
    in_range "$SHARED_PER_PROC" 1 110 || die "SHARED_PER_PROC must be 1..110 (IPMB addresses 0x20..0xfc)"
    in_range "$BMCSIM_START_TIMEOUT" 1 3600 || die "BMCSIM_START_TIMEOUT must be 1..3600"
    case $BMC_SEL in ''|none) ;; *) in_range "$BMC_SEL" 1 10000 || die "BMC_SEL must be empty, none or 1..10000" ;; esac
    case $BMC_SENSORS in 0|1) ;; *) die "BMC_SENSORS must be 0 or 1" ;; esac
    in_range "$BMC_SENSOR_POLL_MS" 100 60000 || die "BMC_SENSOR_POLL_MS must be 100..60000"
    case $DCMI in 0|1) ;; *) die "DCMI must be 0 or 1" ;; esac
    case $MC_PLUGIN in 0|1) ;; *) die "MC_PLUGIN must be 0 or 1" ;; esac
    case $SOL in 0|1) ;; *) die "SOL must be 0 or 1" ;; esac
    [ "$SOL" != 1 ] || MC_PLUGIN=1     # ipmi_sim crashes on libipmiconsole's SOL set-up without it
    case $BMC_PASSWORD_MAX in 16|20) ;; *) die "BMC_PASSWORD_MAX must be 16 or 20" ;; esac
    case $BMC_RESET_OUTAGE in ''|.|*[!0-9.]*|*.*.*) die "BMC_RESET_OUTAGE must be seconds (e.g. 3 or 0.5)" ;; esac
    case $mode in procs|shared) ;; *) die "MODE must be procs or shared" ;; esac
    case $BMC_INITIAL_POWER in 0|1) ;; *) die "BMC_INITIAL_POWER must be 0 or 1" ;; esac
    case $BMC_USER$BMC_PASSWORD in *[!A-Za-z0-9_.@%+=:,-]*) die "BMC_USER/BMC_PASSWORD: use [A-Za-z0-9_.@%+=:,-] only" ;; esac
    # lan.conf strings hold one byte less than the field (ipmi_sim NUL-terminates them): a user
    # name of 16 characters would silently lose its last one, a password of 20 too (MC_PLUGIN=1
    # sets it whole from statedir/password)
    _pwmax=19
    [ "$MC_PLUGIN" != 1 ] || _pwmax=$BMC_PASSWORD_MAX
    [ "$BMC_PASSWORD_MAX" != 16 ] || _pwmax=16
    in_range ${#BMC_PASSWORD} 1 "$_pwmax" || die "BMC_PASSWORD must be 1-$_pwmax characters here"
    in_range ${#BMC_USER} 1 15 || die "BMC_USER must be 1-15 characters"
    command -v "$IPMI_SIM" > /dev/null || die "$IPMI_SIM not found (apt-get install openipmi)"
    command -v ss > /dev/null || die "ss not found (apt-get install iproute2)"
    [ "$SOL" != 1 ] || command -v socat > /dev/null || die "SOL=1 needs socat (apt-get install socat)"

    mkdir -p "$RUN"
    RUN=$(CDPATH='' cd -- "$RUN" && pwd)
    # paths end up in lan.conf strings and in a popen() command line
    case $RUN in *[!A-Za-z0-9_./-]*) die "RUNDIR may only contain [A-Za-z0-9_./-]: $RUN" ;; esac
    case $HERE in *[!A-Za-z0-9_./-]*) die "fixture path may only contain [A-Za-z0-9_./-]: $HERE" ;; esac

    if [ -f "$RUN/pids" ]; then
        while read -r _pid _name; do
            [ -n "$_pid" ] || continue
            ! ours "$_pid" "$RUN" || die "$RUN is in use ($_name pid $_pid is running); stop it first"
        done < "$RUN/pids"
        rm -f "$RUN/pids"
    fi

    rm -f "$RUN/bmcs.tsv"
    trap 'rm -f "$RUN/.ports" "$RUN/.tsv"' EXIT
    trap 'exit 1' INT TERM HUP

    # refuse ports that something else already holds
    : > "$RUN/.ports"
    i=1
    while [ $i -le "$count" ]; do
        echo "$HOST:$((BASE_PORT + i - 1))" >> "$RUN/.ports"
        i=$((i + 1))
    done
    _busy=$(ss -Hlun 2>/dev/null | awk -v f="$RUN/.ports" '
        BEGIN { while ((getline l < f) > 0) want[l] = 1 }
        ($4 in want) || ($4 ~ /^(0\.0\.0\.0|\*|\[::\]):/ && ("127.0.0.1:" substr($4, index($4, ":") + 1)) in want) { print $4 }' | head -3)
    [ -z "$_busy" ] || die "UDP port(s) already in use: $(printf '%s' "$_busy" | tr '\n' ' ')"

    if [ "$CHASSIS_PLUGIN" = 1 ]; then
        ${CC:-cc} -O2 -Wall -fPIC -shared -o "$RUN/chassis_plugin.so" "$HERE/chassis_plugin.c" ||
            die "cannot build chassis_plugin.so (needs cc and libopenipmi-dev)"
    fi
    if [ "$DCMI" = 1 ]; then
        ${CC:-cc} -O2 -Wall -fPIC -shared -o "$RUN/dcmi_plugin.so" "$HERE/dcmi_plugin.c" ||
            die "cannot build dcmi_plugin.so (needs cc and libopenipmi-dev)"
    fi
    if [ "$MC_PLUGIN" = 1 ]; then
        ${CC:-cc} -O2 -Wall -fPIC -shared -o "$RUN/mc_plugin.so" "$HERE/mc_plugin.c" ||
            die "cannot build mc_plugin.so (needs cc and libopenipmi-dev)"
    fi
    [ "$BMC_SENSORS" != 1 ] || parse_table

    fru_locator_sdr
    : > "$RUN/pids"
    : > "$RUN/.tsv"
    trap 'stop_rundir "$RUN" 2>/dev/null || :; rm -f "$RUN/.ports" "$RUN/.tsv"' EXIT

    i=1
    group=0
    while [ $i -le "$count" ]; do
        prepare_bmc $i
        [ "$SOL" != 1 ] || start_sol "$st" "$port" "bmc$i"
        if [ "$mode" = procs ]; then
            {
                echo "name \"bmc$i\""
                lan_block 0x20 "$port" "$guid_hex" "$st"
                [ "$CHASSIS_PLUGIN" != 1 ] || echo "loadlib \"$RUN/chassis_plugin.so\" \"$st\""
                [ "$DCMI" != 1 ] || echo "loadlib \"$RUN/dcmi_plugin.so\" \"$st\""
                [ "$MC_PLUGIN" != 1 ] || echo "loadlib \"$RUN/mc_plugin.so\" \"$st\""
            } > "$st/lan.conf"
            {
                echo "mc_setbmc 0x20"
                emu_block 0x20 "$st/fru.bin" "$fru_size" "$st"
                [ "$DCMI" != 1 ] || echo "rp_emu_ready"
            } > "$st/bmc.emu"
            echo 0x20 > "$st/mc"
            procname=bmc$i
            spawn "bmc$i" "$st/lan.conf" "$st/bmc.emu" "$st/sim" "$st/sim.log"
        else
            slot=$(((i - 1) % SHARED_PER_PROC))
            if [ $slot -eq 0 ]; then
                group=$((group + 1))
                gd=$RUN/sim$group
                mkdir -p "$gd"
                echo "name \"sim$group\"" > "$gd/lan.conf"
                echo "mc_setbmc 0x20" > "$gd/bmcs.emu"
                : > "$gd/chassis.map"
            fi
            procname=sim$group
            hex2 $((0x20 + 2 * slot))
            ipmb=$hex
            lan_block "$ipmb" "$port" "$guid_hex" "$st" >> "$gd/lan.conf"
            emu_block "$ipmb" "$st/fru.bin" "$fru_size" "$st" >> "$gd/bmcs.emu"
            echo "$ipmb $st" >> "$gd/chassis.map"
            echo "$ipmb" > "$st/mc"
            if [ $slot -eq $((SHARED_PER_PROC - 1)) ] || [ $i -eq "$count" ]; then
                [ "$CHASSIS_PLUGIN" != 1 ] ||
                    echo "loadlib \"$RUN/chassis_plugin.so\" \"$gd/chassis.map\"" >> "$gd/lan.conf"
                if [ "$DCMI" = 1 ]; then
                    echo "loadlib \"$RUN/dcmi_plugin.so\" \"$gd/chassis.map\"" >> "$gd/lan.conf"
                    echo "rp_emu_ready" >> "$gd/bmcs.emu"
                fi
                [ "$MC_PLUGIN" != 1 ] ||
                    echo "loadlib \"$RUN/mc_plugin.so\" \"$gd/chassis.map\"" >> "$gd/lan.conf"
                spawn "sim$group" "$gd/lan.conf" "$gd/bmcs.emu" "$gd/sim" "$gd/sim.log"
            fi
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "bmc$i" "$HOST:$port" "$port" "$st" "$serial" \
            "$guid_str" "$guid_hex" "$procname" >> "$RUN/.tsv"
        i=$((i + 1))
    done

    if ! wait_bound; then
        for f in "$RUN"/bmc*/sim.log "$RUN"/sim*/sim.log; do
            [ -s "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }
        done
        echo "bmcsim.sh: ipmi_sim -n reports no config errors; to see them run it by hand without -n:" >&2
        echo "  ipmi_sim -c <lan.conf> -f <emu file> -s <dir>     (files under $RUN)" >&2
        exit 1
    fi
    trap - EXIT INT TERM HUP
    rm -f "$RUN/.ports"
    # last column: process name -> pid
    awk -F '\t' -v OFS='\t' -v f="$RUN/pids" '
        BEGIN { while ((getline l < f) > 0) { split(l, a, " "); pid[a[2]] = a[1] } }
        { $8 = pid[$8]; print }' "$RUN/.tsv" > "$RUN/bmcs.tsv"
    rm -f "$RUN/.tsv"
    _extras=
    [ "$CHASSIS_PLUGIN" != 1 ] || _extras="$_extras, plug-in"
    [ "$DCMI" != 1 ] || _extras="$_extras, DCMI"
    [ "$MC_PLUGIN" != 1 ] || _extras="$_extras, mc plug-in"
    [ "$SOL" != 1 ] || _extras="$_extras, SOL"
    [ "$BMC_SENSORS" = 1 ] || _extras="$_extras, no sensors"
    echo "bmcsim.sh: $count BMC(s) [$mode$_extras] on $HOST:$BASE_PORT-$((BASE_PORT + count - 1)); see $RUN/bmcs.tsv"
}

# sensor_add RUNDIR N SPEC: hand the emulator lines of one more sensor to BMC N's dcmi_plugin
# (it runs statedir/emu.cmds within 200 ms), wait until it did, and keep SPEC in sensors.conf.
sensor_add() {
    in_range "$2" 1 9999 || die "N must be 1..9999"
    [ -d "$1" ] || die "no RUNDIR $1"
    _run=$(CDPATH='' cd -- "$1" && pwd)
    _st=$_run/bmc$2
    [ -f "$_st/mc" ] || die "no BMC $2 in $1"
    [ -f "$_run/dcmi_plugin.so" ] || die "sensor-add needs a RUNDIR started with DCMI=1"
    read -r _mc < "$_st/mc"
    set -f
    # shellcheck disable=SC2086  # fields
    sensor_spec $3
    set +f
    rm -f "$_st/emu.cmds.done" "$_st/emu.cmds.err"
    sensor_emu "$_mc" "$_st" > "$_st/emu.cmds.new"
    mv "$_st/emu.cmds.new" "$_st/emu.cmds"
    _i=0
    while [ ! -f "$_st/emu.cmds.done" ]; do
        _i=$((_i + 1))
        [ $_i -le 100 ] || die "BMC $2 did not take the sensor within 5 s (is it running, with DCMI=1?)"
        sleep 0.05
    done
    [ ! -s "$_st/emu.cmds.err" ] || die "BMC $2 refused the sensor: $(cat "$_st/emu.cmds.err")"
    printf '%s\n' "$3" >> "$_st/sensors.conf"
}

case ${1:-} in
start)
    in_range $# 3 4 || usage
    start "$2" "$3" "${4:-procs}"
    ;;
stop)
    [ $# -eq 2 ] || usage
    [ -d "$2" ] || exit 0
    stop_rundir "$(CDPATH='' cd -- "$2" && pwd)"
    ;;
list)
    [ $# -eq 2 ] || usage
    cat "$2/bmcs.tsv"
    ;;
sensor-add)
    [ $# -eq 4 ] || usage
    sensor_add "$2" "$3" "$4"
    ;;
*)
    usage
    ;;
esac
