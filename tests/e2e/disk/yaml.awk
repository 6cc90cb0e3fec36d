# yaml.awk - the YAML reader of the e2e disk OS's cloud-init stand-in (disk/init), busybox awk.
#
#   awk -f yaml.awk FILE
#
# Prints one "path=value" line per scalar; path is the keys and sequence indexes from the root,
# joined with ".":
#   ethernets.eth0.match.macaddress=52:54:00:e2:00:01
#   ethernets.eth0.routes.0.via=10.99.1.1
#   ssh_authorized_keys.0=ssh-ed25519 AAAA... op@example
# What it reads: block mappings and sequences (also "key:" with its "- " items at the key's own
# indentation, and "- key: value" items), plain, "double" and 'single' quoted scalars, flow
# sequences of scalars on one line ([a, "b"]), block scalars (| >, kept as written). Not:
# anchors, tags, multi-line flow collections or quoted scalars, several documents. A value's
# backslashes and newlines print as \\ and \n: printf '%b' gives the value back.

function qend(s, q,   i, n, ch) { # s starts with quote q: the index of its closing quote (0: none)
	n = length(s)
	for (i = 2; i <= n; i++) {
		ch = substr(s, i, 1)
		if (q == "\"" && ch == "\\") { i++; continue }
		if (ch == q) {
			if (q == "'" && substr(s, i + 1, 1) == "'") { i++; continue }
			return i
		}
	}
	return 0
}

function scalar(s,   q, e, out, i, ch) { # a scalar as written -> its value
	sub(/^[ \t]+/, "", s)
	q = substr(s, 1, 1)
	if (q == "\"" || q == "'") {
		e = qend(s, q)
		if (e == 0) e = length(s) + 1
		out = ""
		for (i = 2; i < e; i++) {
			ch = substr(s, i, 1)
			if (q == "'" && ch == "'") { i++; out = out "'"; continue }
			if (q == "\"" && ch == "\\") {
				i++
				ch = substr(s, i, 1)
				if (ch == "n") ch = "\n"
				else if (ch == "t") ch = "\t"
				else if (ch == "0") ch = ""
				# \" \\ \/ and the rest: the character itself
			}
			out = out ch
		}
		return out
	}
	sub(/[ \t]+#.*$/, "", s)
	sub(/[ \t]+$/, "", s)
	if (s == "~" || s == "null" || s == "Null" || s == "NULL") return ""
	return s
}

function emit(p, v,   n, i, a, out) {
	# (split and join, not gsub: awks differ on backslashes in a replacement)
	n = split(v, a, "\\")
	out = a[1]
	for (i = 2; i <= n; i++) out = out "\\\\" a[i]
	n = split(out, a, "\n")
	out = a[1]
	for (i = 2; i <= n; i++) out = out "\\n" a[i]
	print p "=" out
}

function path(k,   i, p) { # the path of stack level k
	p = ""
	for (i = 1; i <= k; i++) p = (p == "" ? key_[i] : p "." key_[i])
	return p
}

function join(p, k) { return p == "" ? k : p "." k }

function flow(p, s,   n, i, ch, q, item, depth) { # "[a, b]" -> p.0=a p.1=b
	s = substr(s, 2)
	sub(/\][ \t]*(#.*)?$/, "", s)
	n = 0
	item = ""
	q = ""
	for (i = 1; i <= length(s); i++) {
		ch = substr(s, i, 1)
		if (q != "") {
			if (q == "\"" && ch == "\\") { item = item ch substr(s, i + 1, 1); i++; continue }
			if (ch == q) q = ""
			item = item ch
			continue
		}
		if (ch == "\"" || ch == "'") { q = ch; item = item ch; continue }
		if (ch == ",") {
			if (item !~ /^[ \t]*$/) emit(p "." n++, scalar(item))
			item = ""
			continue
		}
		item = item ch
	}
	if (item !~ /^[ \t]*$/) emit(p "." n++, scalar(item))
}

# value P V IND: the value V written after P's key (or dash) at indentation IND
function value(p, v, ind) {
	sub(/^[ \t]+/, "", v)
	if (v ~ /^[|>][-+0-9]*[ \t]*(#.*)?$/) { # a block scalar: the lines indented deeper
		blk = ind
		bpath = p
		bval = ""
		bind = -1
		bn = 0
		return
	}
	if (v ~ /^\[/) { flow(p, v); return }
	if (v ~ /^\{[ \t]*\}/) return
	emit(p, scalar(v))
}

BEGIN { n = 0; blk = -1 }

{
	line = $0
	sub(/\r$/, "", line)
	if (blk >= 0) {
		match(line, /^ */)
		if (line ~ /^[ \t]*$/ || RLENGTH > blk) {
			if (line !~ /^[ \t]*$/ && bind < 0) bind = RLENGTH
			bval = bval (bn++ ? "\n" : "") (bind < 0 ? "" : substr(line, bind + 1))
			next
		}
		sub(/\n+$/, "", bval)
		emit(bpath, bval)
		blk = -1
	}
	if (line ~ /^[ \t]*(#.*)?$/ || line ~ /^(---|\.\.\.)([ \t]|$)/ || line ~ /^%/) next
	match(line, /^ */)
	ind = RLENGTH
	c = substr(line, ind + 1)
	# sequence items: "- x", "- - x", "- key: value"; an item at the indentation of the key
	# above it belongs to that key
	while (c ~ /^-([ \t]|$)/) {
		while (n > 0 && (ind_[n] > ind || (ind_[n] == ind && item_[n]))) n--
		p = path(n)
		k = cnt[p]++
		n++
		ind_[n] = ind
		key_[n] = k
		item_[n] = 1
		c = substr(c, 2)
		match(c, /^[ \t]*/)
		ind = ind + 1 + RLENGTH
		c = substr(c, RLENGTH + 1)
	}
	if (c ~ /^(#.*)?$/) next
	# a key: plain up to ": " (or ":" at the end), or quoted
	key = ""
	rest = ""
	iskey = 0
	q = substr(c, 1, 1)
	if (q == "[" || q == "{") {
		# a flow collection: a value
	} else if (q == "\"" || q == "'") {
		e = qend(c, q)
		if (e > 0 && substr(c, e + 1) ~ /^[ \t]*:([ \t]|$)/) {
			key = scalar(substr(c, 1, e))
			rest = substr(c, e + 1)
			sub(/^[ \t]*:/, "", rest)
			iskey = 1
		}
	} else if (match(c, /:([ \t]|$)/)) {
		key = substr(c, 1, RSTART - 1)
		sub(/[ \t]+$/, "", key)
		rest = substr(c, RSTART + 1)
		iskey = 1
	}
	if (iskey) {
		while (n > 0 && ind_[n] >= ind) n--
		p = join(path(n), key)
		if (rest ~ /^[ \t]*(#.*)?$/) { # a mapping or sequence follows
			n++
			ind_[n] = ind
			key_[n] = key
			item_[n] = 0
			next
		}
		value(p, rest, ind)
		next
	}
	# a scalar: a sequence item's value
	value(path(n), c, n > 0 ? ind_[n] : 0)
}

END {
	if (blk >= 0) {
		sub(/\n+$/, "", bval)
		emit(bpath, bval)
	}
}
