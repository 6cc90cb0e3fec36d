# mime.awk - splits cloud-init user-data into its parts for the e2e disk OS's cloud-init
# stand-in (disk/init), busybox awk.
#
#   awk -v dir=DIR -f mime.awk USER-DATA
#
# Writes each part's body to DIR/N (N = 1, 2, ...) and prints one line per part:
#   N<TAB>content type<TAB>file name<TAB>transfer encoding
# (type lower case; file name from Content-Disposition; encoding e.g. base64, which the caller
# decodes; a field that is not there is "-", so that sh's read keeps the columns apart). User data that is not MIME (no Content-Type header on
# its first line) is one part. As cloud-init does, a part of type text/plain (or none) takes
# its type from its first line: "#cloud-config" text/cloud-config, "#!" text/x-shellscript.
# A part that is itself multipart is listed, not opened.

function param(h, name,   l, v) { # the value of parameter name in header value h
	l = tolower(h)
	if (!match(l, ";[ \t]*" name "=")) return ""
	v = substr(h, RSTART + RLENGTH)
	if (substr(v, 1, 1) == "\"") {
		v = substr(v, 2)
		sub(/".*$/, "", v)
	} else
		sub(/[; \t].*$/, "", v)
	return v
}

function mtype(h) { # media type of a Content-Type value, lower case
	h = tolower(h)
	sub(/;.*$/, "", h)
	gsub(/[ \t]/, "", h)
	return h
}

function header(l,   name) { # one header line (continuations joined before)
	name = tolower(l)
	sub(/:.*$/, "", name)
	sub(/^[^:]*:[ \t]*/, "", l)
	hdr[name] = l
}

function sniff(t, first) {
	if (t != "" && t != "text/plain" && t != "text/x-not-multipart") return t
	if (first ~ /^#cloud-config/) return "text/cloud-config"
	if (first ~ /^#!/) return "text/x-shellscript"
	if (first ~ /^#include/) return "text/x-include-url"
	if (first ~ /^## template: jinja/) return "text/jinja2"
	return t == "" ? "text/plain" : t
}

function start_part() {
	parts++
	file = dir "/" parts
	printf "" > file
	pfirst = ""
	plines = 0
	split("", hdr)
	last = ""
}

function dash(v) { return v == "" ? "-" : v }

function end_part() {
	if (parts == 0) return
	close(file)
	printf "%d\t%s\t%s\t%s\n", parts, sniff(mtype(hdr["content-type"]), pfirst),
		dash(param(";" hdr["content-disposition"], "filename")),
		dash(tolower(hdr["content-transfer-encoding"]))
}

function body(l) {
	if (plines++ == 0) pfirst = l
	print l > file
}

BEGIN { state = "top"; parts = 0; last = ""; boundary = "" }

{
	l = $0
	sub(/\r$/, "", l)
	if (state == "top") { # the headers of the whole, or the first line of plain user data
		if (NR == 1 && l !~ /^[A-Za-z][A-Za-z0-9-]*:/) {
			state = "single"
			start_part()
			body(l)
			next
		}
		if (l ~ /^[ \t]/ && last != "") { hdr[last] = hdr[last] " " l; next }
		if (l != "") {
			header(l)
			last = tolower(l)
			sub(/:.*$/, "", last)
			next
		}
		# the end of the headers
		if (mtype(hdr["content-type"]) ~ /^multipart\//) {
			boundary = param(hdr["content-type"], "boundary")
			state = "preamble"
		} else {
			state = "single"
			t = hdr["content-type"]
			d = hdr["content-disposition"]
			e = hdr["content-transfer-encoding"]
			start_part()
			hdr["content-type"] = t
			hdr["content-disposition"] = d
			hdr["content-transfer-encoding"] = e
		}
		next
	}
	if (state == "single") { body(l); next }
	if (boundary != "" && l == "--" boundary "--") { end_part(); state = "epilogue"; next }
	if (boundary != "" && l == "--" boundary) { end_part(); start_part(); state = "headers"; next }
	if (state == "headers") {
		if (l ~ /^[ \t]/ && last != "") { hdr[last] = hdr[last] " " l; next }
		if (l != "") {
			header(l)
			last = tolower(l)
			sub(/:.*$/, "", last)
			next
		}
		state = "body"
		next
	}
	if (state == "body") body(l)
}

END {
	if (state == "single" || state == "body" || state == "headers") end_part()
}
