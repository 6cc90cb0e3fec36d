#!/bin/sh
# The shipped recipes (recipes/*.sh) against stand-in tools that print captured output
# (tests/fixtures/recipes/, sources in its README.md): exit codes (0 as expected, 1 not,
# 77 tool absent), and the RACKPILOT_RESULT line each prints last, checked as JSON.
# Usage: recipes-test.sh [SOURCE_DIR]. Exit 77 (skip) without python3, except under CI=true.
set -u
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
fx=$src/tests/fixtures/recipes
rdir=$src/recipes
if ! command -v python3 >/dev/null 2>&1; then
	echo "python3 is not installed: the RACKPILOT_RESULT lines cannot be checked as JSON"
	[ "${CI:-}" = true ] && exit 1
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/recipes-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# A PATH of the basic tools only, so that the node's real nvidia-smi or ibstat (CI installs
# infiniband-diags) never answers: stand-ins are added per case in $tmp/stub.
mkdir -p "$tmp/base" "$tmp/stub"
for t in sh awk sed tr cat mktemp rm mkdir chmod mv basename readlink grep tail printf sleep env; do
	p=$(command -v "$t") || continue
	case $p in /*) ln -s "$p" "$tmp/base/$t" ;; esac
done
stub() { # stub NAME SCRIPT-BODY
	printf '#!/bin/sh\n%s\n' "$2" >"$tmp/stub/$1"
	chmod 755 "$tmp/stub/$1"
}
clear_stubs() { rm -f "$tmp/stub/"*; }

# run RECIPE [VAR=value...]: runs it with the stand-ins; sets rc, out, res (the JSON of the
# last line, or "" when it is not a RACKPILOT_RESULT line).
run() {
	r=$1
	shift
	out=$(env -i PATH="$tmp/stub:$tmp/base" TMPDIR="$tmp" RACKPILOT_SYSFS="$tmp/sys" \
		RACKPILOT_RECIPE_STATE="$tmp/state" "$@" sh "$rdir/$r.sh" 2>"$tmp/stderr")
	rc=$?
	last=$(printf '%s\n' "$out" | tail -n 1)
	res=""
	case $last in "RACKPILOT_RESULT "*) res=${last#RACKPILOT_RESULT } ;; esac
}
bad() {
	echo "FAIL: $*"
	printf '%s\n' "$out" | tail -n 15 | sed 's/^/    /'
	fail=1
}
# expect NAME RC [PYTHON-ASSERTION...]: the exit status, a valid JSON result (for 0 and 1),
# and each assertion over it (r: the parsed object, f: its findings).
expect() {
	name=$1 want=$2
	shift 2
	if [ "$rc" != "$want" ]; then
		bad "$name: exit $rc, expected $want"
		return
	fi
	[ "$want" = 77 ] && return
	if [ -z "$res" ]; then
		bad "$name: the last line is not RACKPILOT_RESULT"
		return
	fi
	if ! printf '%s' "$res" | python3 -m json.tool >/dev/null 2>"$tmp/json.err"; then
		bad "$name: RACKPILOT_RESULT is not JSON: $(cat "$tmp/json.err")"
		return
	fi
	for a in "$@"; do
		if ! printf '%s' "$res" | python3 -c "import json, sys
r = json.load(sys.stdin); f = r['findings']
assert all(set(x) == {'item', 'expected', 'actual', 'message', 'fix'} for x in f), f
assert r['ok'] == (len(f) == 0), r
assert $a, r" 2>"$tmp/py.err"; then
			bad "$name: $a: $(tail -n 1 "$tmp/py.err")"
		fi
	done
	echo "ok: $name"
}
absent() { # absent RECIPE TOOL-WORD
	clear_stubs
	run "$1"
	expect "$1 without its tool" 77
	case $out in *"$2"*"not installed"*) ;; *) bad "$1: the 77 message does not name $2: $out" ;; esac
}

# ---- dcgm-diag ----
absent dcgm-diag dcgmi
stub dcgmi "case \"\$*\" in 'diag -r 1 -j') cat '$fx/dcgmi-diag-r1.json' ;; 'diag -r 3 -j') cat '$fx/dcgmi-diag-r3-fail.json'; exit 226 ;; *) exit 2 ;; esac"
run dcgm-diag RP_LEVEL=1
expect "dcgm-diag level 1" 0 "r['recipe'] == 'dcgm-diag'" "r['level'] == 1" "r['warned'] == 1" "r['failed'] == 0" \
	"any(t['status'] == 'WARN' and 'Persistence' in t['message'] for t in r['tests'])"
run dcgm-diag RP_LEVEL=3
expect "dcgm-diag level 3 with failures" 1 "len(f) == 2" "r['failed'] == 2" \
	"f[0]['item'] == 'sm_stress (GPU 0)' and f[1]['item'] == 'sm_stress (GPU 2)'" \
	"'3000.0 for GPU 2' in f[1]['message']" "r['skipped'] >= 5" "r['passed'] >= 3"
run dcgm-diag "RP_LEVEL=1; rm -rf /"
expect "dcgm-diag refuses a bad level" 1 "f[0]['item'] == 'level'"

# ---- gpu-topology ----
absent gpu-topology nvidia-smi
stub nvidia-smi "[ \"\$*\" = 'topo -m' ] && cat \"\$TOPO\""
run gpu-topology TOPO="$fx/nvidia-smi-topo-hgx-h100.txt" RP_GPUS=8 RP_NVLINKS=18 RP_HCA_AFFINITY=PXB
expect "gpu-topology HGX H100" 0 "r['gpu_count'] == 8" "r['nvlinks_min'] == 18" "len(r['nics']) == 8" \
	"r['nearest_hca'][3] == {'gpu': 'GPU3', 'nic': 'mlx5_3', 'relation': 'PIX'}"
run gpu-topology TOPO="$fx/nvidia-smi-topo-missing-nvlink.txt" RP_GPUS=8 RP_NVLINKS=18
expect "gpu-topology missing NVLinks, a far NIC, a hostile NIC name" 1 \
	"[x['item'] for x in f] == ['GPU3-GPU5', 'GPU6']" "f[0]['actual'] == 'NV12'" "f[1]['actual'] == 'NODE'" \
	"'mlx5_5\"\\\\evil' in r['nics']" "r['nvlinks_min'] == 12"
run gpu-topology TOPO="$fx/nvidia-smi-topo-hgx-h100.txt" RP_GPUS=4
expect "gpu-topology GPU count" 1 "f[0]['item'] == 'gpus' and f[0]['actual'] == '8'"
run gpu-topology TOPO="$fx/nvidia-smi-topo-hgx-h100.txt" RP_HCA_AFFINITY=NONE
expect "gpu-topology refuses a bad relation" 1 "f[0]['item'] == 'hca_affinity'"

# ---- gpu-health ----
absent gpu-health nvidia-smi
stub nvidia-smi "case \"\$*\" in --query-gpu=*) cat \"\$GPUS\" ;; --query-remapped-rows=*) [ -n \"\${REMAP:-}\" ] || exit 2; cat \"\$REMAP\" ;; *) exit 2 ;; esac"
stub dmesg "[ -n \"\${DMESG:-}\" ] || { echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1; }; cat \"\$DMESG\""
run gpu-health GPUS="$fx/nvidia-smi-query-gpu-clean.csv" DMESG="$fx/dmesg-clean.txt"
expect "gpu-health clean" 0 "len(r['gpus']) == 2" "r['remapped_rows_supported'] is False" "r['dmesg_readable'] is True" "r['xid'] == []"
run gpu-health GPUS="$fx/nvidia-smi-query-gpu.csv" REMAP="$fx/nvidia-smi-query-remapped-rows.csv" DMESG="$fx/dmesg-xid.txt"
expect "gpu-health ECC, pending pages, remaps, Xid" 1 \
	"[x['item'] for x in f] == ['GPU 1', 'GPU 2', 'GPU 2', 'GPU 3', 'GPU 0', 'GPU 2']" \
	"'row remappings pending' in f[0]['message']" "f[1]['actual'] == '2'" "'retired pages' in f[2]['message']" \
	"'spare rows' in f[3]['message']" "f[4]['actual'] == 'Xid 79'" \
	"r['xid'][1] == dict(r['xid'][1], gpu='2', xid=48, count=2)" "r['dmesg_readable'] is True"
run gpu-health GPUS="$fx/nvidia-smi-query-gpu-clean.csv"
expect "gpu-health, dmesg unreadable" 0 "r['dmesg_readable'] is False"

# ---- ib-ports ----
absent ib-ports ibstat
stub ibstat "cat \"\$IBSTAT\""
run ib-ports IBSTAT="$fx/ibstat-ndr.txt" RP_PORTS=4 RP_RATE=400
expect "ib-ports NDR" 0 "r['port_count'] == 4" "r['ports'][0]['rate'] == '400'" "r['link_layer'] == 'InfiniBand'"
run ib-ports IBSTAT="$fx/ibstat-ndr-down.txt" RP_PORTS=4 RP_RATE=400
expect "ib-ports one Down/Polling, one at 200" 1 \
	"[x['item'] for x in f] == ['mlx5_1/1', 'mlx5_1/1', 'mlx5_1/1', 'mlx5_2/1']" \
	"f[0]['actual'] == 'Down' and f[1]['actual'] == 'Polling'" "f[3]['actual'] == '200'" "r['port_count'] == 4"
run ib-ports IBSTAT="$fx/ibstat-ndr-down.txt" RP_LINK_LAYER=Ethernet RP_PORTS=1 RP_RATE=100
expect "ib-ports RoCE" 0 "r['ports'][0]['ca'] == 'mlx5_4'"

# ---- ib-fabric ----
absent ib-fabric ibdiagnet
stub ibdiagnet "[ \"\$1\" = -o ] && [ -d \"\$2\" ] || exit 2; cat \"\$IBDIAG\""
run ib-fabric IBDIAG="$fx/ibdiagnet-clean.txt"
expect "ib-fabric clean" 0 "r['errors'] == 0" "len(r['stages']) == 10" "r['stages'][6]['stage'] == 'Speed / Width checks'"
run ib-fabric IBDIAG="$fx/ibdiagnet-errors.txt"
expect "ib-fabric link errors" 1 "f[0]['item'] == 'Links Check'" "r['errors'] == 2" "r['warnings'] == 5"
ls "$tmp"/ibdiagnet.* >/dev/null 2>&1 && bad "ib-fabric left its output directory behind"

# ---- connectx-firmware and connectx-firmware-flash: a sysfs of two ConnectX devices ----
for d in 0000:18:00.0 0000:2a:00.0; do
	mkdir -p "$tmp/sys/devices/pci0000:00/$d"
	echo 0x15b3 >"$tmp/sys/devices/pci0000:00/$d/vendor"
done
mkdir -p "$tmp/sys/class/infiniband"
ln -s "../../../devices/pci0000:00/0000:18:00.0" "$tmp/sys/class/infiniband/mlx5_0/" 2>/dev/null ||
	{ mkdir -p "$tmp/sys/class/infiniband/mlx5_0" && ln -s "$tmp/sys/devices/pci0000:00/0000:18:00.0" "$tmp/sys/class/infiniband/mlx5_0/device"; }
mkdir -p "$tmp/sys/class/infiniband/mlx5_1"
ln -s "$tmp/sys/devices/pci0000:00/0000:2a:00.0" "$tmp/sys/class/infiniband/mlx5_1/device"
[ -e "$tmp/sys/class/infiniband/mlx5_0/device" ] || ln -s "$tmp/sys/devices/pci0000:00/0000:18:00.0" "$tmp/sys/class/infiniband/mlx5_0/device"
absent connectx-firmware mstflint
stub mstflint "case \"\$*\" in '-d 0000:18:00.0 q') cat '$fx/mstflint-q-cx7.txt' ;; '-d 0000:2a:00.0 q') sed 's/28.39.1002/28.38.1900/' '$fx/mstflint-q-cx7.txt' ;; *) exit 1 ;; esac"
run connectx-firmware
expect "connectx-firmware with mstflint" 0 "r['tool'] == 'mstflint'" \
	"r['devices'] == [{'pci': '0000:18:00.0', 'device': 'mlx5_0', 'psid': 'MT_0000000838', 'fw_version': '28.39.1002'}, {'pci': '0000:2a:00.0', 'device': 'mlx5_1', 'psid': 'MT_0000000838', 'fw_version': '28.38.1900'}]"
clear_stubs
stub mlxfwmanager "[ \"\$*\" = --query ] && cat '$fx/mlxfwmanager-query.txt'"
run connectx-firmware
expect "connectx-firmware with mlxfwmanager" 0 "r['tool'] == 'mlxfwmanager'" \
	"[(d['device'], d['psid'], d['fw_version']) for d in r['devices']] == [('mlx5_0', 'MT_0000000838', '28.39.1002'), ('mlx5_1', 'MT_0000000838', '28.38.1900')]"

absent connectx-firmware-flash mstflint
: >"$tmp/image.bin"
: >"$tmp/other.bin"
stub mstflint "echo \"mstflint \$*\" >>\"\$TMPDIR/calls\"
case \"\$*\" in
'-d 0000:18:00.0 q') cat '$fx/mstflint-q-cx7.txt' ;;
*'image.bin q') cat '$fx/mstflint-image-q-cx7.txt' ;;
*'other.bin q') cat '$fx/mstflint-image-q-other-psid.txt' ;;
'-d 0000:18:00.0 -i '*' -y burn') echo 'Burning FW image without signatures - OK' ;;
*) exit 1 ;;
esac"
run connectx-firmware-flash RP_COMPONENT=hca.mlx5_0 RP_VERSION=28.40.1000
expect "connectx-firmware-flash target" 0 "r['phase'] == 'target'" "r['device']['pci'] == '0000:18:00.0'" "r['device']['psid'] == 'MT_0000000838'"
run connectx-firmware-flash RP_IMAGE="$tmp/other.bin"
expect "connectx-firmware-flash refuses another PSID" 1 "f[0]['expected'] == 'MT_0000000838' and f[0]['actual'] == 'DEL0000000037'" \
	"'nothing was burnt' in f[0]['message']"
grep -q burn "$tmp/calls" && bad "connectx-firmware-flash burnt an image of another PSID"
run connectx-firmware-flash RP_IMAGE="$tmp/image.bin"
expect "connectx-firmware-flash burns, no reset tool" 0 "r['reset'] == 'reboot needed'" "r['image']['fw_version'] == '28.40.1000'"
case $out in *"reboot"*) ;; *) bad "connectx-firmware-flash does not say a reboot is needed" ;; esac
stub mstfwreset "echo \"mstfwreset \$*\" >>\"\$TMPDIR/calls\""
run connectx-firmware-flash RP_IMAGE="$tmp/image.bin"
expect "connectx-firmware-flash burns and resets" 0 "r['reset'] == 'mstfwreset'"
grep -q 'mstfwreset -d 0000:18:00.0 -y reset' "$tmp/calls" || bad "mstfwreset was not run on the device"
run connectx-firmware-flash "RP_COMPONENT=hca.mlx5_0;reboot"
expect "connectx-firmware-flash refuses an odd component" 1 "f[0]['item'] == 'component'"
run connectx-firmware-flash RP_COMPONENT=hca.mlx5_9
expect "connectx-firmware-flash, no such device" 1 "'no RDMA device mlx5_9' in f[0]['message']"

[ "$fail" = 0 ] && echo "all recipe checks passed"
exit "$fail"
