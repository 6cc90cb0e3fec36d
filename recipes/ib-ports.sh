#!/bin/sh
# recipe: ib-ports
# description: InfiniBand/RoCE ports (ibstat): each port of the link layer Active, LinkUp, at least the rate - the count
# param: ports default= (expected count of ports of link_layer - empty: not checked)
# param: rate default= (Gb/s every port must run at least at, e.g. 400 - empty: not checked)
# param: link_layer default=InfiniBand (InfiniBand, or Ethernet for RoCE)
# timeout_s: 120
set -u
RECIPE='ib-ports'
# shellcheck source=lib/result.sh
. "${0%/*}/lib/result.sh"
need ibstat infiniband-diags
want_ports=${RP_PORTS:-}
want_rate=${RP_RATE:-}
layer=${RP_LINK_LAYER:-InfiniBand}
case $want_ports in *[!0-9]*) finding ports "a count" "$want_ports" "ports must be a number" "give ports as digits" ;; esac
case $want_rate in *[!0-9]*) finding rate "Gb/s" "$want_rate" "rate must be a number of Gb/s" "give rate as digits, e.g. 400" ;; esac
case $layer in InfiniBand | Ethernet) ;; *) finding link_layer "InfiniBand or Ethernet" "$layer" "link_layer is InfiniBand or Ethernet" "give InfiniBand or Ethernet" ;; esac
if [ "$nfindings" -gt 0 ]; then
	result ""
	exit 1
fi
out=$(ibstat 2>&1) || {
	printf '%s\n' "$out"
	finding ibstat "the HCAs' ports" "failed" "ibstat failed (no HCA, or the ib_umad module is not loaded)" "modprobe ib_umad; check lspci for the HCAs"
	result ""
	exit 1
}
printf '%s\n' "$out"
# One line per port: CA, port, state, physical state, rate, link layer.
rows=$(printf '%s\n' "$out" | awk '
	function flush() { if (port != "") printf "%s\t%s\t%s\t%s\t%s\t%s\n", ca, port, st, phys, rate, ll; port = "" }
	/^CA \047/ { flush(); ca = $0; sub(/^CA \047/, "", ca); sub(/\047 *$/, "", ca); gsub(/\t/, " ", ca); next }
	/^[ \t]*Port [0-9]+:/ { flush(); port = $2; sub(/:$/, "", port); st = phys = rate = ll = ""; next }
	function val() { v = $0; sub(/^[^:]*: */, "", v); gsub(/\t/, " ", v); return v }
	/^[ \t]*State:/ { st = val() }
	/^[ \t]*Physical state:/ { phys = val() }
	/^[ \t]*Rate:/ { rate = val() }
	/^[ \t]*Link layer:/ { ll = val() }
	END { flush() }')
tab=$(printf '\t')
n=0 list=""
while IFS=$tab read -r ca port st phys rate ll; do
	[ -n "$ca" ] || continue
	[ "$ll" = "$layer" ] || continue
	n=$((n + 1))
	list="$list${list:+, }{\"ca\": $(js "$ca"), \"port\": $(js "$port"), \"state\": $(js "$st"), \"physical_state\": $(js "$phys"), \"rate\": $(js "$rate"), \"link_layer\": $(js "$ll")}"
	[ "$st" = Active ] || finding "$ca/$port" Active "$st" "port $port of $ca is $st" \
		"Down/Polling: check the cable and the switch port; Initializing: is a subnet manager running?"
	[ "$phys" = LinkUp ] || finding "$ca/$port" LinkUp "$phys" "port $port of $ca has physical state $phys" "check the cable and the switch port"
	r=${rate%% *}
	r=${r%%.*}
	case $r in '' | *[!0-9]*) r=0 ;; esac
	if [ -n "$want_rate" ] && [ "$r" -lt "$want_rate" ]; then
		finding "$ca/$port" "$want_rate Gb/s" "$rate" "port $port of $ca runs at $rate, below $want_rate Gb/s" \
			"check the cable's rating and the switch port's speed (ibportstate), then reseat the cable"
	fi
done <<ROWS
$rows
ROWS
if [ -n "$want_ports" ] && [ "$n" -ne "$want_ports" ]; then
	finding ports "$want_ports" "$n" "$n $layer ports, not $want_ports" "check lspci for missing HCAs and each port's link layer (mlxconfig LINK_TYPE_P1)"
fi
result ", \"link_layer\": $(js "$layer"), \"port_count\": $n, \"ports\": [$list]"
