#!/bin/sh
# Circles between files of different concerns inside server/ (issue 20; layering.sh checks
# which includes each module may have, this checks that no two pieces lean on each other).
#
# Method (grep-level, no compiler needed):
#  - Every .c file under server/ is read with comments, string and character literals
#    removed.
#  - A definition is a line that starts at column 0 with `name(` (house style puts the
#    return type on the line before) whose previous line does not start with `static`:
#    the file defines that external function.
#  - A file uses a function when the function's name appears in it as an identifier (a
#    call, or a pointer passed as an argument, as api/ passes store views to rp_api_drift).
#    File A leans on file B when A uses a function defined in B.
#  - Files are grouped into modules by their folder (server/*.c is `main`); a quoted
#    `#include "x/..."` or `"../x/..."` of another folder, and every use across folders,
#    is an edge between modules.
# It fails on:
#  1. two files that each use a function the other defines (a call circle between files;
#     every file of store/ is a concern of its own, as is every file elsewhere), unless the
#     pair is listed in KNOWN below, which documents what is still to be cut;
#  2. a circle of any length between modules (by includes or uses).
# Longer file circles (A → B → C → A) are reported, not failed.
# `sh tests/circles.sh [SRC] -v` also prints every file edge.
src=${1:-.}
verbose=${2:-}

# Pairs still to be cut (sorted "a b" separated by spaces, paths relative to server/), each
# with why it may stay. None now: jobs.c reaches provisioning through its "on job end" hook
# table, and what provision.c needs of a job row is in jobrow.c.
KNOWN=

files=$(find "$src/server" -name '*.c' | LC_ALL=C sort)
[ -n "$files" ] || {
	echo "circles: no C files under $src/server" >&2
	exit 1
}

# shellcheck disable=SC2086
awk -v root="$src/server/" -v known="$KNOWN" -v verbose="$verbose" '
function rel(f) { return substr(f, length(root) + 1) }
# rollout/plan.[ch] is pure planning that store/ calls, a module of its own inside rollout/.
function module(r) {
	if (r ~ /^rollout\/plan\./)
		return "rollout/plan"
	return index(r, "/") ? substr(r, 1, index(r, "/") - 1) : "main"
}
# The line without comments and literals; `incomment` carries a block comment over lines.
function strip(line,    out, ch, nx, i, n, q) {
	out = ""
	n = length(line)
	for (i = 1; i <= n; i++) {
		ch = substr(line, i, 1)
		nx = substr(line, i + 1, 1)
		if (incomment) {
			if (ch == "*" && nx == "/") {
				incomment = 0
				i++
			}
			continue
		}
		if (ch == "/" && nx == "*") {
			incomment = 1
			i++
			out = out " "
			continue
		}
		if (ch == "/" && nx == "/")
			break
		if (ch == "\"" || ch == "\047") {
			q = ch
			for (i++; i <= n; i++) {
				ch = substr(line, i, 1)
				if (ch == "\\")
					i++
				else if (ch == q)
					break
			}
			out = out " "
			continue
		}
		out = out ch
	}
	return out
}
FNR == 1 {
	cur = rel(FILENAME)
	incomment = 0
	prev = ""
	nfiles++
	order[nfiles] = cur
}
{
	raw = $0
	if (raw ~ /^#[ \t]*include[ \t]*"/) {
		inc = raw
		sub(/^#[ \t]*include[ \t]*"/, "", inc)
		sub(/".*/, "", inc)
		sub(/^(\.\.\/)+/, "", inc)
		if (index(inc, "/")) {
			m = module(inc)
			if (m != module(cur) && m != "rackpilot")
				medge[module(cur), m] = medge[module(cur), m] " " cur " includes " inc ";"
		}
		next
	}
	line = strip(raw)
	if (line ~ /^[A-Za-z_][A-Za-z0-9_]*\(/ && prev !~ /^static([ \t]|$)/) {
		name = line
		sub(/\(.*/, "", name)
		if (!(name in def))
			def[name] = cur
		line = substr(line, length(name) + 1)
	}
	if (line !~ /^[ \t]*$/)
		prev = line
	while (match(line, /[A-Za-z_][A-Za-z0-9_]*/)) {
		uses[cur, substr(line, RSTART, RLENGTH)] = 1
		line = substr(line, RSTART + RLENGTH)
	}
}
END {
	for (k in uses) {
		split(k, p, SUBSEP)
		if (!(p[2] in def) || def[p[2]] == p[1])
			continue
		a = p[1]
		b = def[p[2]]
		via[a, b] = via[a, b] " " p[2]
		edge[a, b] = 1
		if (module(a) != module(b))
			medge[module(a), module(b)] = medge[module(a), module(b)] " " a " uses " p[2] ";"
	}
	nk = split(known, kw, " ")
	for (i = 1; i <= nk; i += 2)
		isknown[kw[i], kw[i + 1]] = 1
	fail = 0
	for (i = 1; i <= nfiles; i++) {
		a = order[i]
		for (j = i + 1; j <= nfiles; j++) {
			b = order[j]
			if (verbose != "") {
				if ((a, b) in edge)
					printf "circles: edge %s ->%s\n", a, via[a, b]
				if ((b, a) in edge)
					printf "circles: edge %s ->%s\n", b, via[b, a]
			}
			if (!((a, b) in edge) || !((b, a) in edge))
				continue
			if ((a, b) in isknown) {
				printf "circles: known, still to cut: %s (%s) <-> %s (%s)\n", a, \
				       substr(via[a, b], 2), b, substr(via[b, a], 2)
				seenknown[a, b] = 1
				continue
			}
			printf "circles: %s uses%s of %s, which uses%s of it\n", a, via[a, b], b, \
			       via[b, a] > "/dev/stderr"
			fail = 1
		}
	}
	for (k in isknown)
		if (!(k in seenknown)) {
			split(k, p, SUBSEP)
			printf "circles: %s <-> %s is cut: remove it from KNOWN\n", p[1], p[2] > "/dev/stderr"
			fail = 1
		}
	# Longer file circles: transitive closure, then every file that reaches itself.
	for (k in edge)
		reach[k] = 1
	for (m = 1; m <= nfiles; m++)
		for (i = 1; i <= nfiles; i++) {
			if (!((order[i], order[m]) in reach))
				continue
			for (j = 1; j <= nfiles; j++)
				if ((order[m], order[j]) in reach)
					reach[order[i], order[j]] = 1
		}
	for (i = 1; i <= nfiles; i++) {
		a = order[i]
		if (!((a, a) in reach) || (a in incycle))
			continue
		list = a
		incycle[a] = 1
		for (j = i + 1; j <= nfiles; j++)
			if (((a, order[j]) in reach) && ((order[j], a) in reach)) {
				list = list " " order[j]
				incycle[order[j]] = 1
			}
		if (split(list, tmp, " ") > 2)
			printf "circles: note: files that reach each other through others: %s\n", list
	}
	# Modules: any circle, however long.
	for (k in medge) {
		split(k, p, SUBSEP)
		mods[p[1]] = 1
		mods[p[2]] = 1
		mreach[k] = 1
	}
	for (m in mods)
		for (a in mods)
			if ((a, m) in mreach)
				for (b in mods)
					if ((m, b) in mreach)
						mreach[a, b] = 1
	if (verbose != "")
		for (k in medge) {
			split(k, p, SUBSEP)
			printf "circles: module %s -> %s\n", p[1], p[2]
		}
	for (a in mods)
		for (b in mods)
			if (a < b && ((a, b) in mreach) && ((b, a) in mreach)) {
				printf "circles: modules %s and %s reach each other\n", a, b > "/dev/stderr"
				if ((a, b) in medge)
					printf "  %s -> %s:%s\n", a, b, medge[a, b] > "/dev/stderr"
				if ((b, a) in medge)
					printf "  %s -> %s:%s\n", b, a, medge[b, a] > "/dev/stderr"
				fail = 1
			}
	if (!fail)
		printf "circles: ok (%d files)\n", nfiles
	exit fail
}' $files
