#!/bin/sh
# recipe: gpu-topology
# description: GPU topology (nvidia-smi topo -m): GPU count, NVLinks between every GPU pair, each GPU's nearest NIC/HCA
# param: gpus default= (expected GPU count - empty: not checked)
# param: nvlinks default= (least NVLinks between every GPU pair, e.g. 18 for H100 SXM - empty: not checked)
# param: hca_affinity default=PXB (the worst relation a GPU may have to its nearest NIC/HCA: PIX PXB PHB NODE SYS)
# timeout_s: 300
set -u
RECIPE='gpu-topology'
# shellcheck source=lib/result.sh
. "${0%/*}/lib/result.sh"
need nvidia-smi "NVIDIA driver"
want_gpus=${RP_GPUS:-}
want_nv=${RP_NVLINKS:-}
affinity=${RP_HCA_AFFINITY:-PXB}
case $want_gpus in *[!0-9]*) finding gpus "a count" "$want_gpus" "gpus must be a number" "give gpus as digits" ;; esac
case $want_nv in *[!0-9]*) finding nvlinks "a count" "$want_nv" "nvlinks must be a number" "give nvlinks as digits" ;; esac
case $affinity in PIX | PXB | PHB | NODE | SYS) ;; *)
	finding hca_affinity "PIX, PXB, PHB, NODE or SYS" "$affinity" "hca_affinity is not a relation nvidia-smi prints" "give one of PIX PXB PHB NODE SYS"
	;;
esac
if [ "$nfindings" -gt 0 ]; then
	result ""
	exit 1
fi
out=$(nvidia-smi topo -m 2>&1) || {
	printf '%s\n' "$out"
	finding "nvidia-smi topo -m" "the topology matrix" "failed" "nvidia-smi topo -m failed" "check the driver (nvidia-smi alone)"
	result ""
	exit 1
}
printf '%s\n' "$out"
# The matrix: a header of device columns (GPUn, NICn or mlx5_n) up to "CPU Affinity", one row
# per GPU; "NIC Legend" lines (NIC0: mlx5_0) name the NICs. Relations from near to far: PIX PXB
# PHB NODE SYS (NV# is NVLink). Output: "gpu NAME", "nic NAME", "pair A B VALUE",
# "near GPU NIC RELATION".
rows=$(printf '%s\n' "$out" | awk '
	function rank(v) { return v == "PIX" ? 1 : v == "PXB" ? 2 : v == "PHB" ? 3 : v == "NODE" ? 4 : v == "SYS" ? 5 : v ~ /^NV[0-9]+$/ ? 0 : 9 }
	!ncol && $1 ~ /^GPU[0-9]+$/ {
		for (i = 1; i <= NF && $i != "CPU" && $i != "NUMA"; i++) { col[i] = $i; ncol = i }
		next
	}
	ncol && $1 ~ /^GPU[0-9]+$/ && !($1 in seen) { seen[$1] = 1; row[++nrow] = $0; next }
	/^ *NIC[0-9]+: / { sub(/^ */, ""); n = $1; sub(/:$/, "", n); legend[n] = $2 }
	END {
		for (i = 1; i <= ncol; i++) if (col[i] ~ /^GPU[0-9]+$/) printf "gpu\t%s\n", col[i]; else printf "nic\t%s\n", (col[i] in legend) ? legend[col[i]] : col[i]
		for (r = 1; r <= nrow; r++) {
			split(row[r], f, /[ \t]+/)
			g = f[1]; best = ""; bestn = ""
			for (i = 1; i <= ncol; i++) {
				v = f[i + 1]
				if (col[i] ~ /^GPU[0-9]+$/) { if (col[i] != g) printf "pair\t%s\t%s\t%s\n", g, col[i], v; continue }
				if (best == "" || rank(v) < rank(best)) { best = v; bestn = (col[i] in legend) ? legend[col[i]] : col[i] }
			}
			if (best != "") printf "near\t%s\t%s\t%s\n", g, bestn, best
		}
	}')
rank() { case $1 in PIX) echo 1 ;; PXB) echo 2 ;; PHB) echo 3 ;; NODE) echo 4 ;; SYS) echo 5 ;; NV[0-9]*) echo 0 ;; *) echo 9 ;; esac }
tab=$(printf '\t')
ngpu=0 nics="" near="" minnv=""
while IFS=$tab read -r kind a b c; do
	case $kind in
	gpu) ngpu=$((ngpu + 1)) ;;
	nic) nics="$nics${nics:+, }$(js "$a")" ;;
	pair)
		nv=0
		case $c in NV[0-9]*) nv=${c#NV} ;; esac
		if [ -z "$minnv" ] || [ "$nv" -lt "$minnv" ]; then minnv=$nv; fi
		# Each pair once: the row of the lower GPU.
		if [ -n "$want_nv" ] && [ "${a#GPU}" -lt "${b#GPU}" ] && [ "$nv" -lt "$want_nv" ]; then
			finding "$a-$b" "NV$want_nv" "$c" "$a and $b are joined by $nv NVLinks, not $want_nv" \
				"check the baseboard's NVLink/NVSwitch state (nvidia-smi nvlink -s, fabric manager) and reseat the GPU tray"
		fi
		;;
	near)
		near="$near${near:+, }{\"gpu\": $(js "$a"), \"nic\": $(js "$b"), \"relation\": $(js "$c")}"
		if [ "$(rank "$c")" -gt "$(rank "$affinity")" ]; then
			finding "$a" "$affinity or nearer" "$c" "$a's nearest NIC/HCA ($b) is $c, farther than $affinity" \
				"check the NIC placement in the riser and PCIe switch configuration (and the BIOS PCIe settings)"
		fi
		;;
	esac
done <<ROWS
$rows
ROWS
if [ -n "$want_gpus" ] && [ "$ngpu" -ne "$want_gpus" ]; then
	finding gpus "$want_gpus" "$ngpu" "nvidia-smi topo -m shows $ngpu GPUs, not $want_gpus" "check lspci for missing GPUs and the driver's messages (dmesg | grep NVRM)"
fi
result ", \"gpu_count\": $ngpu, \"nvlinks_min\": ${minnv:-null}, \"nics\": [$nics], \"nearest_hca\": [$near]"
