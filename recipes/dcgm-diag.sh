#!/bin/sh
# recipe: dcgm-diag
# description: DCGM diagnostics (dcgmi diag -r LEVEL -j): every test's result per GPU - a Fail fails, a Warn is reported
# param: level default=1 (1 quick, 2 medium, 3 long, 4 extended)
# timeout_s: 7200
set -u
RECIPE='dcgm-diag'
# shellcheck source=lib/result.sh
. "${0%/*}/lib/result.sh"
need dcgmi DCGM
level=${RP_LEVEL:-1}
case $level in
1 | 2 | 3 | 4) ;;
*)
	finding level "1, 2, 3 or 4" "$level" "level must be 1, 2, 3 or 4" "give level 1 (quick) to 4 (extended)"
	result ""
	exit 1
	;;
esac
out=$(dcgmi diag -r "$level" -j 2>&1)
rc=$?
# One line per result object: test, GPU, status, first warning. A small JSON walker: the
# document is DCGM's (DCGM GPU Diagnostic > test_categories > tests > results), and keys are
# read wherever they are, so 3.x and 4.x spellings (gpu_ids, gpu_id, entity_id) all work.
rows=$(printf '%s\n' "$out" | awk '
	{ text = text $0 "\n" }
	function handle(k, v) {
		if (k == "name") test = v
		else if (k == "gpu_ids" || k == "gpu_id" || k == "entity_id") gpu[depth] = v
		else if (k == "status") st[depth] = v
		else if ((k == "warning" || k == "warnings" || k == "error") && warn[depth] == "") warn[depth] = v
		else if (k == "runtime_error") printf "runtime\t-\tFail\t%s\n", v
	}
	END {
		n = length(text); depth = 0; key = ""
		for (i = 1; i <= n; i++) {
			c = substr(text, i, 1)
			if (c == "\"") {
				s = ""
				for (i++; i <= n; i++) {
					c = substr(text, i, 1)
					if (c == "\\") { i++; c = substr(text, i, 1); if (c == "n" || c == "t") c = " "; s = s c; continue }
					if (c == "\"") break
					s = s c
				}
				j = i + 1
				while (substr(text, j, 1) ~ /[ \t\n\r]/) j++
				if (substr(text, j, 1) == ":") { key = s; i = j } else handle(key, s)
			} else if (c ~ /[-0-9A-Za-z.]/) {
				s = c
				while (substr(text, i + 1, 1) ~ /[-0-9A-Za-z.]/) { i++; s = s substr(text, i, 1) }
				handle(key, s)
			} else if (c == "{") {
				depth++; gpu[depth] = ""; st[depth] = ""; warn[depth] = ""
			} else if (c == "}") {
				if (st[depth] != "") {
					g = gpu[depth]; gsub(/[\t\n]/, " ", g); w = warn[depth]; gsub(/[\t\n]/, " ", w)
					printf "%s\t%s\t%s\t%s\n", test, g, st[depth], w
				} else if (warn[depth] != "" && depth > 1 && warn[depth - 1] == "")
					warn[depth - 1] = warn[depth]
				if (depth > 0) depth--
			}
		}
	}')
if [ -z "$rows" ]; then
	printf '%s\n' "$out" | tail -n 20
	finding "dcgmi diag" "a JSON report" "exit status $rc, no test results" \
		"dcgmi diag -r $level -j printed no test results" \
		"check that nv-hostengine runs (systemctl status nvidia-dcgm) and dcgmi discovery -l lists the GPUs"
	result ", \"level\": $level"
	exit 1
fi
tab=$(printf '\t')
tests=""
pass=0 fail=0 warnc=0 skip=0
while IFS=$tab read -r test gpu status warn; do
	s=$(printf '%s' "$status" | tr '[:upper:]' '[:lower:]')
	case $s in
	pass) pass=$((pass + 1)) ;;
	fail) fail=$((fail + 1)) ;;
	warn) warnc=$((warnc + 1)) ;;
	*) skip=$((skip + 1)) ;;
	esac
	echo "$test GPU $gpu: $status${warn:+ ($warn)}"
	tests="$tests${tests:+, }{\"test\": $(js "$test"), \"gpu\": $(js "$gpu"), \"status\": $(js "$status"), \"message\": $(js "$warn")}"
	if [ "$s" = fail ]; then
		finding "$test (GPU $gpu)" Pass "$status" "${warn:-DCGM test $test failed on GPU $gpu}" \
			"run dcgmi diag -r $level again on this GPU; a repeated failure is a hardware fault for the vendor (RMA)"
	fi
done <<ROWS
$rows
ROWS
result ", \"level\": $level, \"passed\": $pass, \"failed\": $fail, \"warned\": $warnc, \"skipped\": $skip, \"tests\": [$tests]"
