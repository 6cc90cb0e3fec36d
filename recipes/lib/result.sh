# recipes/lib/result.sh — the result helpers every shipped recipe uses (docs/recipes.md).
# The build (cmake/embed_recipes.cmake) puts this text in place of a recipe's line
# '. "${0%/*}/lib/result.sh"', so the recipe a node runs is one script; run from the
# tree (tests/recipes/), the line sources this file.
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
