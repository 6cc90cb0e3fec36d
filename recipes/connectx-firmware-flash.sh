#!/bin/sh
# recipe: connectx-firmware-flash
# description: Flash a ConnectX HCA (firmware_update method agent): check the image's PSID against the device's, burn with mstflint, reset the device, then inventory
# param: component required (the firmware component, hca.mlx5_N)
# param: version required (the target FW version)
# param: image_url required (where the agent downloads the image)
# param: sha256 required (the image's digest, checked by the agent)
# timeout_s: 1800
# steps: [{"id": "target", "type": "shell", "command": "@script", "env": "@env", "timeout_s": 300}, {"id": "flash", "type": "firmware", "image_url": "${image_url}", "sha256": "${sha256}", "command": "RP_IMAGE=${image}\n@script", "timeout_s": @timeout_s}, {"id": "inventory", "type": "inventory"}]
#
# Two steps run this script. "target" (a shell step: the arguments come in its environment)
# finds the device the component names and records it; "flash" (a firmware step: the agent
# has downloaded and checked the image, RP_IMAGE is its path, and a firmware step has no
# environment of its own) reads that record, checks the PSID, burns and resets.
set -u
RECIPE='connectx-firmware-flash'
# shellcheck source=lib/result.sh
. "${0%/*}/lib/result.sh"
SYS=${RACKPILOT_SYSFS:-/sys}
STATE=${RACKPILOT_RECIPE_STATE:-/run/rackpilot-recipes}
record=$STATE/connectx-firmware-flash.target
image=${RP_IMAGE:-}
need mstflint "NVIDIA mstflint"
psid_of() { printf '%s\n' "$1" | awk -F ': *' '/^PSID:/ { print $2; exit }' | tr -d ' '; }
fw_of() { printf '%s\n' "$1" | awk -F ': *' '/^FW Version:/ { print $2; exit }' | tr -d ' '; }

if [ -z "$image" ]; then
	component=${RP_COMPONENT:-}
	version=${RP_VERSION:-}
	dev=${component#hca.}
	case $component in
	hca.*) ;;
	*) dev="" ;;
	esac
	case $dev in '' | *[!A-Za-z0-9_]*)
		finding component "hca.<device>, e.g. hca.mlx5_0" "$component" "the component does not name an HCA" "name the component after the agent's inventory: hca.mlx5_0"
		result ", \"phase\": \"target\""
		exit 1
		;;
	esac
	link=$(readlink "$SYS/class/infiniband/$dev/device" 2>/dev/null) || link=""
	pci=$(basename "${link:-none}")
	if ! printf '%s\n' "$pci" | grep -Eq '^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$'; then
		finding "$component" "a PCI device" "none" "no RDMA device $dev on this node" "check ibstat and lspci -d 15b3: for the device's name"
		result ", \"phase\": \"target\""
		exit 1
	fi
	q=$(mstflint -d "$pci" q 2>&1)
	psid=$(psid_of "$q")
	fw=$(fw_of "$q")
	if [ -z "$psid" ]; then
		printf '%s\n' "$q"
		finding "$component" "a PSID" "none" "mstflint could not query $dev ($pci)" "run mstflint -d $pci q by hand"
		result ", \"phase\": \"target\""
		exit 1
	fi
	if ! { mkdir -p "$STATE" && chmod 700 "$STATE" &&
		printf '%s\n%s\n%s\n%s\n%s\n' "$component" "$dev" "$pci" "$psid" "$version" >"$record.tmp" &&
		mv "$record.tmp" "$record"; }; then
		echo "cannot write $record"
		exit 1
	fi
	echo "$component is $dev at $pci: PSID $psid, FW $fw; target version $version"
	result ", \"phase\": \"target\", \"device\": {\"pci\": $(js "$pci"), \"device\": $(js "$dev"), \"psid\": $(js "$psid"), \"fw_version\": $(js "$fw")}, \"version\": $(js "$version")"
	exit $?
fi

# The flash step: the record the target step wrote, then the image.
if [ ! -r "$record" ]; then
	echo "no $record: the target step did not run"
	exit 1
fi
component=$(sed -n 1p "$record")
dev=$(sed -n 2p "$record")
pci=$(sed -n 3p "$record")
psid=$(sed -n 4p "$record")
version=$(sed -n 5p "$record")
iq=$(mstflint -i "$image" q 2>&1)
ipsid=$(psid_of "$iq")
ifw=$(fw_of "$iq")
members=", \"phase\": \"flash\", \"device\": {\"pci\": $(js "$pci"), \"device\": $(js "$dev"), \"psid\": $(js "$psid")}, \"image\": {\"psid\": $(js "$ipsid"), \"fw_version\": $(js "$ifw")}"
if [ -z "$ipsid" ]; then
	printf '%s\n' "$iq"
	finding image "a ConnectX firmware image" "no PSID" "mstflint cannot read a PSID from the image: nothing was burnt" "check that the image is a ConnectX .bin for this card"
	result "$members"
	exit 1
fi
if [ "$ipsid" != "$psid" ]; then
	finding "$component" "$psid" "$ipsid" "the image is for PSID $ipsid but $dev ($pci) is PSID $psid: nothing was burnt" \
		"upload the image built for PSID $psid (an OEM card needs its vendor's image)"
	result "$members"
	exit 1
fi
[ -z "$version" ] || [ "$ifw" = "$version" ] || echo "note: the image is FW $ifw, the baseline says $version"
echo "burning FW $ifw onto $dev ($pci), PSID $psid"
if ! mstflint -d "$pci" -i "$image" -y burn; then
	finding "$component" "burnt" "burn failed" "mstflint could not burn $dev ($pci)" "read mstflint's message above; run mstflint -d $pci q to see what the flash holds"
	result "$members"
	exit 1
fi
reset=""
if command -v mstfwreset >/dev/null 2>&1; then
	reset=mstfwreset
elif command -v mlxfwreset >/dev/null 2>&1; then
	reset=mlxfwreset
fi
if [ -z "$reset" ]; then
	echo "burnt; neither mstfwreset nor mlxfwreset is installed: the new firmware runs after a reboot"
	result "$members, \"reset\": \"reboot needed\""
	exit $?
fi
if ! "$reset" -d "$pci" -y reset; then
	finding "$component" "reset" "$reset failed" "burnt, but $reset could not reset $dev ($pci): the new firmware runs after a reboot" "reboot the node"
	result "$members, \"reset\": \"failed\""
	exit 1
fi
result "$members, \"reset\": \"$reset\""
