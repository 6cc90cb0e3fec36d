#!/bin/sh
# recipe: ib-fabric
# description: InfiniBand fabric check (ibdiagnet): its summary's errors and warnings per stage - any error fails
# timeout_s: 1800
set -u
RECIPE='ib-fabric'
# shellcheck source=lib/result.sh
. "${0%/*}/lib/result.sh"
need ibdiagnet "NVIDIA ibdiagnet (ibutils2 / MFT)"
dir=$(mktemp -d "${TMPDIR:-/tmp}/ibdiagnet.XXXXXX") || {
	echo "cannot make a temporary directory"
	exit 1
}
trap 'rm -rf "$dir"' EXIT
out=$(ibdiagnet -o "$dir" 2>&1)
rc=$?
printf '%s\n' "$out"
# The summary: after a "Summary" line, "-I- STAGE  WARNINGS  ERRORS  [COMMENT]" rows.
rows=$(printf '%s\n' "$out" | awk '
	/^ *Summary *$/ { on = 1; next }
	on && /^-I- / {
		for (k = 2; k < NF; k++) if ($k ~ /^[0-9]+$/ && $(k + 1) ~ /^[0-9]+$/) break
		if (k >= NF || k == 2) next
		s = $2; for (i = 3; i < k; i++) s = s " " $i
		printf "%s\t%s\t%s\n", s, $k, $(k + 1)
	}')
if [ -z "$rows" ]; then
	finding ibdiagnet "a summary" "exit status $rc, no summary" "ibdiagnet printed no summary of its stages" \
		"run ibdiagnet by hand: is the port Active (ibstat) and a subnet manager running?"
	result ""
	exit 1
fi
tab=$(printf '\t')
stages="" errors=0 warnings=0
while IFS=$tab read -r stage w e; do
	stages="$stages${stages:+, }{\"stage\": $(js "$stage"), \"warnings\": $w, \"errors\": $e}"
	errors=$((errors + e))
	warnings=$((warnings + w))
	if [ "$e" -gt 0 ]; then
		finding "$stage" "0 errors" "$e" "ibdiagnet's $stage stage reports $e errors" \
			"read the -E- lines above (ibdiagnet2.log), fix the links or nodes named, and run it again"
	fi
done <<ROWS
$rows
ROWS
result ", \"errors\": $errors, \"warnings\": $warnings, \"stages\": [$stages]"
