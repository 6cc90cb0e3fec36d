#!/bin/sh
# recipe: ib-fabric
# description: InfiniBand fabric check (ibdiagnet): its summary's errors and warnings per stage - any error fails
# timeout_s: 1800
set -u
RECIPE='ib-fabric'
# ---- result helpers (the same in every shipped recipe) ----
# $1 as a JSON string: \ " escaped, tabs as spaces, lines joined by \n, other control and
# non-ASCII bytes as '?' (the line must stay valid JSON whatever a tool prints).
js() {
	printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | LC_ALL=C awk 'BEGIN { printf "\"" }
		{ gsub(/\t/, " "); gsub(/[\001-\037\177-\377]/, "?")
		  if (NR > 1) printf "\\n"; printf "%s", $0 }
		END { printf "\"" }'
}
findings=""
nfindings=0
# finding ITEM EXPECTED ACTUAL MESSAGE FIX
finding() {
	f="{\"item\": $(js "$1"), \"expected\": $(js "$2"), \"actual\": $(js "$3"), \"message\": $(js "$4"), \"fix\": $(js "$5")}"
	findings="$findings${findings:+, }$f"
	nfindings=$((nfindings + 1))
	echo "FINDING: $1: $4" >&2
}
# result EXTRA: the last stdout line; EXTRA is ", \"member\": value ..." (JSON) or empty.
result() {
	ok=true
	[ "$nfindings" -eq 0 ] || ok=false
	printf 'RACKPILOT_RESULT {"recipe": "%s", "ok": %s, "findings": [%s]%s}\n' "$RECIPE" "$ok" "$findings" "$1"
	[ "$ok" = true ]
}
need() { # need TOOL WHAT: exit 77 naming the tool when it is absent
	command -v "$1" >/dev/null 2>&1 || {
		echo "$1 ($2) is not installed"
		exit 77
	}
}
# ---- end of the result helpers ----
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
