#!/bin/sh
# recipe: connectx-firmware
# description: ConnectX firmware query (mstflint, else mlxfwmanager): each device's PSID and FW version, then an inventory so the versions reach the firmware inventory (hca.mlx5_N)
# timeout_s: 600
# steps: [{"id": "connectx-firmware", "type": "shell", "command": "@script", "timeout_s": @timeout_s}, {"id": "inventory", "type": "inventory"}]
set -u
RECIPE='connectx-firmware'
# shellcheck source=lib/result.sh
. "${0%/*}/lib/result.sh"
SYS=${RACKPILOT_SYSFS:-/sys}
tool=""
if command -v mstflint >/dev/null 2>&1; then
	tool=mstflint
elif command -v mlxfwmanager >/dev/null 2>&1; then
	tool=mlxfwmanager
else
	echo "mstflint (or mlxfwmanager, NVIDIA MFT) is not installed"
	exit 77
fi
# RDMA devices of Mellanox/NVIDIA (PCI vendor 0x15b3) and their PCI addresses.
devs=""
for d in "$SYS"/class/infiniband/*; do
	[ -e "$d/device" ] || continue
	[ "$(cat "$d/device/vendor" 2>/dev/null)" = 0x15b3 ] || continue
	pci=$(basename "$(readlink "$d/device")")
	devs="$devs$(basename "$d") $pci
"
done
if [ -z "$devs" ]; then
	finding ConnectX "at least one device" "none" "no ConnectX device under $SYS/class/infiniband" "check lspci -d 15b3: and that mlx5_core/mlx5_ib are loaded"
	result ", \"tool\": \"$tool\", \"devices\": []"
	exit 1
fi
fwm=""
[ "$tool" = mlxfwmanager ] && fwm=$(mlxfwmanager --query 2>&1)
list=""
while read -r dev pci; do
	[ -n "$dev" ] || continue
	if [ "$tool" = mstflint ]; then
		q=$(mstflint -d "$pci" q 2>&1)
		psid=$(printf '%s\n' "$q" | awk -F ': *' '/^PSID:/ { print $2; exit }' | tr -d ' ')
		fw=$(printf '%s\n' "$q" | awk -F ': *' '/^FW Version:/ { print $2; exit }' | tr -d ' ')
	else
		# mlxfwmanager: a block per device, "PCI Device Name: 0000:18:00.0" (or /dev/mst/...),
		# "PSID:", and under "Versions:" a "FW  <current>  <available>" line.
		q=$(printf '%s\n' "$fwm" | awk -v p="$pci" '
			function flush() { if (hit) printf "psid %s\nfw %s\n", psid, fw; hit = 0; psid = fw = "" }
			/^Device #/ { flush() }
			/PCI Device Name:/ { hit = index($0, p) > 0 || index(p, $NF) > 0 }
			/PSID:/ { psid = $NF }
			$1 == "FW" { fw = $2 }
			END { flush() }')
		psid=$(printf '%s\n' "$q" | awk '$1 == "psid" { print $2; exit }')
		fw=$(printf '%s\n' "$q" | awk '$1 == "fw" { print $2; exit }')
	fi
	echo "$dev ($pci): PSID ${psid:-?}, FW ${fw:-?}"
	if [ -z "$fw" ]; then
		printf '%s\n' "$q"
		finding "hca.$dev" "a FW version" "none" "$tool could not query $dev ($pci)" "run $tool by hand; a device in livefish mode needs a recovery burn"
	fi
	list="$list${list:+, }{\"pci\": $(js "$pci"), \"device\": $(js "$dev"), \"psid\": $(js "$psid"), \"fw_version\": $(js "$fw")}"
done <<DEVS
$devs
DEVS
result ", \"tool\": \"$tool\", \"devices\": [$list]"
