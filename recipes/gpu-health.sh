#!/bin/sh
# recipe: gpu-health
# description: GPU memory health (nvidia-smi): uncorrectable ECC errors, retired pages pending, remapped rows pending or failed, and Xid events since boot (dmesg)
# timeout_s: 300
set -u
RECIPE='gpu-health'
# shellcheck source=lib/result.sh
. "${0%/*}/lib/result.sh"
need nvidia-smi "NVIDIA driver"
tab=$(printf '\t')
# "00000000:18:00.0" and dmesg's "0000:18:00" name the same GPU: domain (4 digits), bus, device.
pcikey() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | sed -e 's/^ *//' -e 's/^0*\([0-9a-f]\{4\}:\)/\1/' -e 's/\.[0-7]$//'; }
yes_like() { case $(printf '%s' "$1" | tr '[:upper:]' '[:lower:]') in yes | true | 1) return 0 ;; esac; return 1; }
count_like() { case $1 in '' | *[!0-9]*) return 1 ;; esac; return 0; }
gpus=$(nvidia-smi --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending --format=csv,noheader 2>&1) || {
	printf '%s\n' "$gpus"
	finding "nvidia-smi" "the GPUs' ECC counters" "failed" "nvidia-smi --query-gpu failed" "check the driver (nvidia-smi alone)"
	result ""
	exit 1
}
printf '%s\n' "$gpus"
# Remapped rows exist from Ampere on; older GPUs (and drivers) do not know the query.
remap=$(nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure --format=csv,noheader 2>/dev/null) || remap=""
remap_supported=true
[ -n "$remap" ] || remap_supported=false
printf '%s\n' "$remap"
list="" map=""
while IFS=, read -r idx bus ecc pend; do
	[ -n "$idx" ] || continue
	idx=$(echo "$idx" | tr -d ' ')
	ecc=$(echo "$ecc" | sed 's/^ *//')
	pend=$(echo "$pend" | sed 's/^ *//')
	key=$(pcikey "$bus")
	map="$map$key$tab$idx
"
	rpend="" rfail=""
	if [ -n "$remap" ]; then
		line=$(printf '%s\n' "$remap" | while IFS=, read -r rb rp rf; do
			[ "$(pcikey "$rb")" = "$key" ] && printf '%s,%s\n' "$(echo "$rp" | tr -d ' ')" "$(echo "$rf" | tr -d ' ')"
		done)
		rpend=${line%%,*}
		rfail=${line#*,}
		[ -n "$line" ] || rfail=""
	fi
	if count_like "$ecc" && [ "$ecc" -gt 0 ]; then
		finding "GPU $idx" "0 uncorrectable ECC errors" "$ecc" "GPU $idx ($bus) has $ecc uncorrectable ECC errors since the driver loaded" \
			"reset the GPU or reboot; errors that come back mean the GPU goes back to the vendor"
	fi
	if yes_like "$pend"; then
		finding "GPU $idx" "no retired pages pending" "$pend" "GPU $idx ($bus) has retired pages pending" "reboot (or reset the GPU) to retire them"
	fi
	if yes_like "$rpend"; then
		finding "GPU $idx" "no remapped rows pending" "$rpend" "GPU $idx ($bus) has row remappings pending" "reset the GPU (nvidia-smi -r -i $idx) or reboot to apply them"
	fi
	if yes_like "$rfail"; then
		finding "GPU $idx" "no row remapping failure" "$rfail" "GPU $idx ($bus) failed to remap a row: its memory has run out of spare rows" \
			"the GPU goes back to the vendor (RMA)"
	fi
	list="$list${list:+, }{\"index\": $(js "$idx"), \"bus_id\": $(js "$(echo "$bus" | sed 's/^ *//')"), \"ecc_uncorrected\": $(js "$ecc"), \"retired_pages_pending\": $(js "$pend"), \"remapped_rows_pending\": $(js "$rpend"), \"remapped_rows_failure\": $(js "$rfail")}"
done <<GPUS
$gpus
GPUS
# Xid events since boot: "NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus."
xids="" readable=true
if command -v dmesg >/dev/null 2>&1 && kernel=$(dmesg 2>/dev/null); then
	xidrows=$(printf '%s\n' "$kernel" | awk '
		{ p = index($0, "NVRM: Xid (PCI:"); if (!p) next
		  s = substr($0, p + 15); q = index(s, "): "); if (!q) next
		  pci = substr(s, 1, q - 1); r = substr(s, q + 3); code = r; sub(/[^0-9].*$/, "", code)
		  if (code == "") next
		  m = r; sub(/^[0-9]+,? */, "", m); gsub(/\t/, " ", m); k = pci "\t" code
		  if (!(k in n)) { order[++cnt] = k; msg[k] = m } n[k]++ }
		END { for (i = 1; i <= cnt; i++) printf "%s\t%d\t%s\n", order[i], n[order[i]], msg[order[i]] }')
	while IFS=$tab read -r pci code count msg; do
		[ -n "$pci" ] || continue
		gpu=$(printf '%s' "$map" | awk -F '\t' -v k="$(pcikey "$pci")" '$1 == k { print $2 }')
		echo "Xid $code on PCI $pci (GPU ${gpu:-?}) x$count: $msg"
		xids="$xids${xids:+, }{\"pci\": $(js "$pci"), \"gpu\": $(js "$gpu"), \"xid\": $code, \"count\": $count, \"message\": $(js "$msg")}"
		finding "GPU ${gpu:-$pci}" "no Xid events" "Xid $code" "GPU ${gpu:-?} (PCI $pci) logged Xid $code $count times since boot: $msg" \
			"look Xid $code up in NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors); 48, 63, 64, 74, 79, 92, 94, 95 point at hardware"
	done <<XIDS
$xidrows
XIDS
else
	readable=false
	echo "dmesg is not readable here: Xid events were not checked"
fi
result ", \"gpus\": [$list], \"remapped_rows_supported\": $remap_supported, \"dmesg_readable\": $readable, \"xid\": [$xids]"
