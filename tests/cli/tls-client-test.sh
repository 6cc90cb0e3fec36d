#!/bin/sh
# tls-client-test.sh RACKPILOT RACKPILOT_AGENT [RACKPILOTD] - how the CLI (--cacert, --fingerprint, their
# environment variables and config keys) and the agent (ca_file, tls_verify,
# server_fingerprint, rackpilot.tls_sha256=) verify the server, against a real TLS peer:
# openssl s_server on loopback, with throwaway ECDSA P-256 keys, a self-signed certificate,
# a small CA and certificates it signed.
#
# The peer runs in s_server's echo mode: every byte a client sends after the handshake goes
# to its log, and what the test writes to its standard input (a FIFO) goes back to the client.
# So a client that must get through is seen sending its request, with its token, and is then
# given a JSON answer (admit); a client that must be stopped at the handshake has to exit on
# its own with the right message (refuse).
#
# How "nothing was sent" is proved: s_server serves one connection at a time, to its end. Every
# refused client carries a token of its own, and the next admitted client (the control) makes
# its request to the same peer; once the control's token is in the log, everything the refused
# client could have sent is in it too, and its token must not be. admit checks that for every
# refusal before it, and each peer's checks end with an admit.
#
# The last section runs the CLI and the agent against the real rackpilotd with TLS (given as
# RACKPILOTD): its own certificate and the pin it logs; there the server's access log proves
# that a refused client sent nothing.
#
# Exit 77 (skipped) without openssl, unless CI=true (.ci/deps installs it): then it fails.
# RP_KEEP=1 keeps the work directory.
set -eu
CLI=${1:?usage: tls-client-test.sh RACKPILOT RACKPILOT_AGENT}
AGENT=${2:?usage: tls-client-test.sh RACKPILOT RACKPILOT_AGENT}
RPD=${3:-}
case $CLI in /*) ;; *) CLI=$PWD/$CLI ;; esac # the test works in its own directory
case $AGENT in /*) ;; *) AGENT=$PWD/$AGENT ;; esac
case $RPD in /* | '') ;; *) RPD=$PWD/$RPD ;; esac
RPD_PID=

if ! command -v openssl > /dev/null 2>&1; then
	if [ "${CI:-}" = true ]; then
		echo "FAIL: openssl is not installed (CI=true: .ci/deps installs it)" >&2
		exit 1
	fi
	echo "SKIP: openssl is not installed" >&2
	exit 77
fi

W=$(mktemp -d /tmp/rp-tlsc-XXXXXX)
PEER=sink # or rackpilotd: see above
TLS_PID=
TLS_LOG=/dev/null
TLS_N=0
CPID=
PENDING= # tokens of refused clients, until an admit proves they never reached the peer
CASES=0

tls_stop() {
	if [ -n "$TLS_PID" ]; then
		exec 3>&-
		kill "$TLS_PID" 2> /dev/null || true
		wait "$TLS_PID" 2> /dev/null || true
	fi
	TLS_PID=
}
cleanup() {
	set +e # everything below is attempted
	[ -z "$CPID" ] || kill "$CPID" 2> /dev/null
	[ -z "$RPD_PID" ] || kill "$RPD_PID" 2> /dev/null
	tls_stop
	if [ "${RP_KEEP:-0}" = 1 ]; then echo "kept $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	echo "--- peer log ($TLS_LOG)" >&2
	tail -n 30 "$TLS_LOG" >&2 || true
	exit 1
}
has() { grep -aEq -- "$2" "$W/$1" || fail "$3: /$2/ not in $1: $(cat "$W/$1")"; }
hasnt() { ! grep -aEq -- "$2" "$W/$1" || fail "$3: /$2/ in $1: $(cat "$W/$1")"; }

# ---- keys and certificates (all throwaway, valid for 2 days)
cd "$W"
SERIAL=1000
mkcert() { # NAME SAN [CA]: NAME.key and NAME.pem, self-signed or signed by CA
	if [ $# -eq 2 ]; then
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
			-out "$1.pem" -days 2 -subj "/CN=rp-test-$1" -addext "subjectAltName=$2" \
			2> "$1.err" || fail "openssl req $1: $(cat "$1.err")"
		return
	fi
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
		-out "$1.csr" -subj "/CN=rp-test-$1" 2> "$1.err" || fail "openssl req $1: $(cat "$1.err")"
	printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$2" \
		> "$1.ext"
	openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -set_serial "$((SERIAL += 1))" \
		-days 2 -extfile "$1.ext" -out "$1.pem" 2> "$1.err" || fail "openssl x509 $1: $(cat "$1.err")"
}
fp_of() { # KEYFILE: the fingerprint, as the contract defines it, lowercase hex
	openssl pkey -in "$1" -pubout -outform DER | openssl dgst -sha256 -r | cut -c1-64
}
colons() { # HEX: AB:CD:... (upper case)
	echo "$1" | tr a-f A-F | sed 's/../&:/g; s/:$//'
}
# self: the server's own self-signed certificate; other.key: an unrelated key (the wrong
# fingerprint); ca: a small CA (req -x509 makes it CA:TRUE); ca2: another, unrelated; leaf:
# signed by ca for 127.0.0.1; elsewhere: signed by ca for another name.
mkcert self IP:127.0.0.1
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out other.key 2> /dev/null ||
	fail "openssl genpkey"
mkcert ca IP:127.0.0.1
mkcert ca2 IP:127.0.0.1
mkcert leaf IP:127.0.0.1 ca
mkcert elsewhere DNS:elsewhere.example ca
FP_SELF=$(fp_of self.key)
FP_OTHER=$(fp_of other.key)
FP_LEAF=$(fp_of leaf.key)
FP_ELSEWHERE=$(fp_of elsewhere.key)
# The contract's own command gives the same (from the certificate, not the key).
[ "$(openssl x509 -in self.pem -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum |
	cut -c1-64)" = "$FP_SELF" ] || fail "fingerprint of self.pem"
[ "$FP_SELF" != "$FP_OTHER" ] || fail "two keys with one fingerprint"

# ---- the peer
tls_start() { # CERT KEY [S_SERVER OPTIONS]: an echo-mode s_server on a free loopback port; sets URL
	cert=$1 key=$2
	shift 2
	tls_stop
	tries=0
	while :; do
		tries=$((tries + 1))
		[ $tries -le 20 ] || fail "openssl s_server did not start"
		port=$(($(od -An -N2 -tu2 /dev/urandom) % 30000 + 20000))
		TLS_N=$((TLS_N + 1))
		TLS_LOG=$W/peer$TLS_N.log
		rm -f "$W/peer.in"
		mkfifo "$W/peer.in"
		openssl s_server -accept "127.0.0.1:$port" -cert "$cert" -key "$key" "$@" \
			< "$W/peer.in" > "$TLS_LOG" 2>&1 &
		TLS_PID=$!
		exec 3> "$W/peer.in" # held open: an EOF on its stdin would end s_server
		for _ in $(seq 100); do
			grep -q '^ACCEPT' "$TLS_LOG" && break
			kill -0 "$TLS_PID" 2> /dev/null || break # the port was taken
			sleep 0.1
		done
		grep -q '^ACCEPT' "$TLS_LOG" && break
		tls_stop
	done
	URL=https://127.0.0.1:$port
}
reply() { # BODY: a 200 JSON answer to the request in progress
	printf 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
		"${#1}" "$1" >&3
}

# ---- clients
# start NAME CMD...: CMD in the background; stdout, stderr, exit status in $W/NAME.{out,err,rc}
start() {
	name=$1
	shift
	CASES=$((CASES + 1))
	rm -f "$W/$name.rc"
	(
		set +e
		"$@" > "$W/$name.out" 2> "$W/$name.err" < /dev/null
		echo $? > "$W/$name.rc"
	) &
	CPID=$!
}
finish() { # NAME WANT WHY
	wait "$CPID" || true
	CPID=
	got=$(cat "$W/$1.rc")
	[ "$got" = "$2" ] || fail "$3: exit $got, expected $2; stderr: $(cat "$W/$1.err")"
}
sent() { grep -aqF -- "$1" "$TLS_LOG"; }

# admit NAME TOKEN BODY WHY CMD...: CMD must get through: its request reaches the peer with
# TOKEN, gets BODY back, and CMD exits 0. Then no refused client's token may be in the log.
admit() {
	name=$1 tok=$2 body=$3 why=$4
	shift 4
	start "$name" "$@"
	if [ "$PEER" = sink ]; then
		for _ in $(seq 200); do
			sent "$tok" && break
			[ -f "$W/$name.rc" ] && break
			sleep 0.1
		done
		if ! sent "$tok"; then
			[ ! -f "$W/$name.rc" ] || finish "$name" 0 "$why" # says why it ended
			fail "$why: its request did not reach the peer"
		fi
		reply "$body"
	fi
	finish "$name" 0 "$why"
	if [ "$PEER" = sink ]; then
		for t in $PENDING; do
			! sent "$t" || fail "a refused client's request reached the peer (token $t)"
		done
	fi
	PENDING=
}

# refuse NAME TOKEN RC PATTERN WHY CMD...: CMD must stop before sending anything: it exits RC
# on its own with PATTERN on stderr (and not the token). The next admit settles that the peer
# never saw TOKEN.
refuse() {
	name=$1 tok=$2 want=$3 pat=$4 why=$5
	shift 5
	start "$name" "$@"
	for _ in $(seq 300); do
		[ -f "$W/$name.rc" ] && break
		if [ "$PEER" = sink ] && sent "$tok"; then
			kill "$CPID" 2> /dev/null || true
			fail "$why: the request was sent"
		fi
		sleep 0.1
	done
	[ -f "$W/$name.rc" ] || fail "$why: still running after 30 s"
	finish "$name" "$want" "$why"
	has "$name.err" "$pat" "$why"
	hasnt "$name.err" "$tok" "$why: the token in a message"
	PENDING="$PENDING $tok"
}

# No stray configuration from the machine running the test.
unset XDG_CONFIG_HOME RACKPILOT_URL RACKPILOT_TOKEN RACKPILOT_CACERT RACKPILOT_FINGERPRINT
export HOME="$W/home"
mkdir -p "$HOME/.config/rackpilot"
CFG=$HOME/.config/rackpilot/config
LIST='{"items": [], "next_cursor": null}'
N=0
newtok() { N=$((N + 1)); TOK=rpt_tlscase${N}x; } # a token of its own per case

# ---- CLI checks (URL: a server whose key is FP; OTHER: any other fingerprint)
cli_pin_checks() { # URL FP OTHER
	u=$1 fp=$2 other=$3
	: > "$CFG"
	chmod 600 "$CFG"
	newtok
	admit pin "$TOK" "$LIST" "--fingerprint (lower case) with a self-signed certificate" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" --fingerprint "$fp" --json rack list
	[ "$(cat "$W/pin.out")" = "$LIST" ] || fail "--fingerprint: output $(cat "$W/pin.out")"
	newtok
	refuse wrongpin "$TOK" 1 "does not match the pinned fingerprint $other \\(the server's is $fp\\); nothing was sent" \
		"a wrong --fingerprint" env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" --fingerprint "$other" rack list
	has wrongpin.err "^rackpilot: $u: the server's TLS public key" "the mismatch names the URL"
	newtok
	admit envpin "$TOK" "$LIST" "RACKPILOT_FINGERPRINT in the colon form, upper case" \
		env RACKPILOT_TOKEN="$TOK" RACKPILOT_FINGERPRINT="$(colons "$fp")" "$CLI" --url "$u" rack list
	newtok
	refuse nopin "$TOK" 1 "SSL certificate problem" "no fingerprint: the system's CAs do not know it" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" rack list
	printf 'url = %s\nfingerprint = %s\n' "$u" "$(colons "$fp" | tr A-F a-f)" > "$CFG"
	newtok
	admit cfgpin "$TOK" "$LIST" "fingerprint in the config file" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" rack list
	# Precedence, key by key: flags > environment > file.
	printf 'url = %s\nfingerprint = %s\n' "$u" "$other" > "$CFG"
	newtok
	refuse cfgwrong "$TOK" 1 "does not match the pinned fingerprint $other" "a wrong fingerprint in the file" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" rack list
	newtok
	admit envbeatscfg "$TOK" "$LIST" "RACKPILOT_FINGERPRINT beats the file" \
		env RACKPILOT_TOKEN="$TOK" RACKPILOT_FINGERPRINT="$fp" "$CLI" rack list
	newtok
	refuse envwrong "$TOK" 1 "does not match the pinned fingerprint $other" "a wrong RACKPILOT_FINGERPRINT beats a right file" \
		env RACKPILOT_TOKEN="$TOK" RACKPILOT_FINGERPRINT="$other" "$CLI" --url "$u" rack list
	newtok
	admit flagbeatsenv "$TOK" "$LIST" "--fingerprint beats RACKPILOT_FINGERPRINT" \
		env RACKPILOT_TOKEN="$TOK" RACKPILOT_FINGERPRINT="$other" "$CLI" rack list --fingerprint="$fp"
	newtok
	refuse flagwrong "$TOK" 1 "does not match the pinned fingerprint $other" "a wrong --fingerprint beats a right environment" \
		env RACKPILOT_TOKEN="$TOK" RACKPILOT_FINGERPRINT="$fp" "$CLI" --fingerprint "$other" rack list
	# Plain HTTP with a pin or a CA file is refused before any connection.
	: > "$CFG"
	newtok
	refuse http "$TOK" 2 "^rackpilot: --fingerprint needs an https:// URL" "http:// and --fingerprint" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "http${u#https}" --fingerprint "$fp" rack list
	newtok
	refuse httpenv "$TOK" 2 "^rackpilot: RACKPILOT_CACERT needs an https:// URL" "http:// and RACKPILOT_CACERT" \
		env RACKPILOT_TOKEN="$TOK" RACKPILOT_CACERT="$W/ca.pem" "$CLI" --url "http${u#https}" rack list
	printf 'url = %s\nfingerprint = %s\n' "$u" "$other" > "$CFG"
	newtok
	refuse httpcfg "$TOK" 2 "^rackpilot: fingerprint in $CFG needs an https:// URL" "http:// and the file's fingerprint" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "http${u#https}" rack list
	# Malformed fingerprints are usage errors.
	for bad in "${fp}0" "$(echo "$fp" | cut -c2-)" "$(echo "$fp" | sed 's/^./g/')" "$(colons "$fp" | sed 's/:/-/g')" "sha256//x"; do
		newtok
		refuse badfp "$TOK" 2 "^rackpilot: --fingerprint: '.*' is not a fingerprint: expected 64 hex digits" \
			"a malformed --fingerprint ($bad)" env RACKPILOT_TOKEN="$TOK" "$CLI" --fingerprint "$bad" rack list
	done
	newtok
	refuse badfpenv "$TOK" 2 "^rackpilot: RACKPILOT_FINGERPRINT: 'abc' is not a fingerprint" "a malformed RACKPILOT_FINGERPRINT" \
		env RACKPILOT_TOKEN="$TOK" RACKPILOT_FINGERPRINT=abc "$CLI" rack list
	newtok
	refuse nocacert "$TOK" 2 "^rackpilot: --cacert $W/missing.pem: No such file" "a missing --cacert" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --cacert "$W/missing.pem" rack list
	# An empty --fingerprint clears the file's.
	newtok
	refuse cleared "$TOK" 1 "SSL certificate problem" "--fingerprint '' clears the file's pin" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --fingerprint "" rack list
	newtok
	admit ok "$TOK" "$LIST" "control" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --fingerprint "$fp" rack list
	: > "$CFG"
}

# cli_ca_checks URL CA OTHER_CA FP OTHER: a server with a certificate from CA, for 127.0.0.1
cli_ca_checks() {
	u=$1 ca=$2 ca2=$3 fp=$4 other=$5
	newtok
	admit cacert "$TOK" "$LIST" "--cacert with the server's CA" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" --cacert "$ca" rack list
	newtok
	refuse cacert2 "$TOK" 1 "SSL certificate problem" "--cacert with another CA" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" --cacert "$ca2" rack list
	newtok
	admit cacertenv "$TOK" "$LIST" "RACKPILOT_CACERT" \
		env RACKPILOT_TOKEN="$TOK" RACKPILOT_CACERT="$ca" "$CLI" --url "$u" rack list
	printf 'url = %s\ncacert = %s\n' "$u" "$ca2" > "$CFG"
	newtok
	refuse cacertcfg "$TOK" 1 "SSL certificate problem" "cacert in the file, another CA" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" rack list
	newtok
	admit cacertflag "$TOK" "$LIST" "--cacert beats the file" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --cacert "$ca" rack list
	: > "$CFG"
	newtok
	admit both "$TOK" "$LIST" "--cacert and --fingerprint, both right" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" --cacert "$ca" --fingerprint "$fp" rack list
	newtok
	refuse bothwrongpin "$TOK" 1 "does not match the pinned fingerprint $other" "--cacert right, --fingerprint wrong" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" --cacert "$ca" --fingerprint "$other" rack list
	newtok
	refuse bothwrongca "$TOK" 1 "SSL certificate problem" "--fingerprint right, --cacert wrong" \
		env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" --cacert "$ca2" --fingerprint "$fp" rack list
	newtok
	admit ok "$TOK" "$LIST" "control" env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$u" --cacert "$ca" rack list
}

# ---- agent checks
mkdir -p "$W/node/proc/sys/kernel/random" "$W/node/sys/class/net/eth0" "$W/state"
echo 6f1c0e2a-7d55-4c1e-9b2a-3c4d5e6f7a80 > "$W/node/proc/sys/kernel/random/boot_id"
echo tls-node > "$W/node/proc/sys/kernel/hostname"
echo 52:54:00:7e:57:01 > "$W/node/sys/class/net/eth0/address"
echo "12345.6 0.0" > "$W/node/proc/uptime"
: > "$W/node/proc/cmdline"
echo "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKp0dE0ZtT9j2u6u2V9gH1r7Yb1o1eP9e8r2oQw3cXmA node" \
	> "$W/hostkey.pub"
AC=$W/agent.conf
REG='{"token": "rpa_fromtheserver", "node": {"name": "tls-node", "id": "nd_tls"}, "heartbeat_s": 30}'
HB='{"heartbeat_s": 30}'
aconf() { # URL LINES...: agent.conf with the common keys (url unless "") and LINES
	printf 'state_dir = %s/state\nroot = %s/node\nssh_host_key = %s/hostkey.pub\n' \
		"$W" "$W" "$W" > "$AC"
	[ -z "$1" ] || printf 'url = %s\n' "$1" >> "$AC"
	shift
	for l in "$@"; do printf '%s\n' "$l" >> "$AC"; done
}
btok() { N=$((N + 1)); TOK=rpb_tlscase${N}x; }
atok() { # an agent token of its own in the token file
	N=$((N + 1))
	TOK=rpa_tlscase${N}x
	printf '%s\n' "$TOK" > "$W/state/token"
	chmod 600 "$W/state/token"
}

agent_pin_checks() { # URL FP OTHER
	u=$1 fp=$2 other=$3
	btok
	aconf "$u" "bootstrap_token = $TOK" "server_fingerprint = $other"
	refuse aregwrong "$TOK" 1 "register: POST /v1/agent/register: the server's TLS public key does not match the pinned fingerprint $other .*the server's is $fp; nothing was sent" \
		"register with a wrong server_fingerprint" "$AGENT" -c "$AC" register
	btok
	aconf "$u" "bootstrap_token = $TOK" "server_fingerprint = $(colons "$fp")"
	admit areg "$TOK" "$REG" "register with server_fingerprint (colon form) and a self-signed certificate" \
		"$AGENT" -c "$AC" register
	has areg.out "registered as node tls-node \\(nd_tls\\)" "register's answer"
	[ "$(cat "$W/state/token")" = rpa_fromtheserver ] || fail "register did not save the agent token"
	# The kernel command line, and the file beating it.
	echo "quiet rackpilot.tls_sha256=$(colons "$fp" | tr A-F a-f) ro" > "$W/node/proc/cmdline"
	atok
	aconf "$u"
	admit ahbcmd "$TOK" "$HB" "heartbeat pinned by rackpilot.tls_sha256= alone" "$AGENT" -c "$AC" heartbeat
	atok
	aconf "$u" "server_fingerprint = $other"
	refuse ahbfile "$TOK" 1 "heartbeat: POST /v1/agent/heartbeat: the server's TLS public key does not match the pinned fingerprint $other" \
		"server_fingerprint in the file beats rackpilot.tls_sha256=" "$AGENT" -c "$AC" heartbeat
	echo "rackpilot.tls_sha256=$other" > "$W/node/proc/cmdline"
	atok
	aconf "$u"
	refuse ahbcmdwrong "$TOK" 1 "does not match the pinned fingerprint $other" \
		"a wrong rackpilot.tls_sha256=" "$AGENT" -c "$AC" heartbeat
	atok
	aconf "$u" "server_fingerprint = $fp"
	admit ahbfileright "$TOK" "$HB" "a right server_fingerprint beats a wrong rackpilot.tls_sha256=" \
		"$AGENT" -c "$AC" heartbeat
	: > "$W/node/proc/cmdline"
	atok
	aconf "$u" "server_fingerprint = $other" "tls_verify = false"
	refuse ahbnoverify "$TOK" 1 "does not match the pinned fingerprint $other" \
		"tls_verify = false does not turn the pin off" "$AGENT" -c "$AC" heartbeat
	atok
	aconf "$u"
	refuse ahbnopin "$TOK" 4 "SSL certificate problem" "no pin: the self-signed certificate fails" \
		"$AGENT" -c "$AC" heartbeat
	btok
	aconf "http${u#https}" "bootstrap_token = $TOK" "server_fingerprint = $fp"
	refuse aregplain "$TOK" 2 "server_fingerprint is set but the server url http://.* is not https://" \
		"server_fingerprint with an http:// url" "$AGENT" -c "$AC" register
	echo "rackpilot.url=http${u#https} rackpilot.tls_sha256=$fp" > "$W/node/proc/cmdline"
	atok
	aconf ""
	refuse ahbplaincmd "$TOK" 2 "is not https://" "rackpilot.tls_sha256= with an http:// rackpilot.url=" \
		"$AGENT" -c "$AC" heartbeat
	: > "$W/node/proc/cmdline"
	atok
	aconf "$u" "server_fingerprint = $fp"
	admit ahbok "$TOK" "$HB" "control" "$AGENT" -c "$AC" heartbeat
}

agent_ca_checks() { # URL CA OTHER_CA FP OTHER
	u=$1 ca=$2 ca2=$3 fp=$4 other=$5
	atok
	aconf "$u" "ca_file = $ca"
	admit aca "$TOK" "$HB" "ca_file with the server's CA" "$AGENT" -c "$AC" heartbeat
	atok
	aconf "$u" "ca_file = $ca2"
	refuse aca2 "$TOK" 4 "SSL certificate problem" "ca_file with another CA" "$AGENT" -c "$AC" heartbeat
	atok
	aconf "$u" "ca_file = $ca" "server_fingerprint = $fp"
	admit acaboth "$TOK" "$HB" "ca_file and server_fingerprint, both right" "$AGENT" -c "$AC" heartbeat
	atok
	aconf "$u" "ca_file = $ca" "server_fingerprint = $other"
	refuse acabothpin "$TOK" 1 "does not match the pinned fingerprint" "ca_file right, server_fingerprint wrong" \
		"$AGENT" -c "$AC" heartbeat
	atok
	aconf "$u" "ca_file = $ca2" "server_fingerprint = $fp"
	refuse acabothca "$TOK" 4 "SSL certificate problem" "server_fingerprint right, ca_file wrong" \
		"$AGENT" -c "$AC" heartbeat
	atok
	aconf "$u" "ca_file = $ca"
	admit acaok "$TOK" "$HB" "control" "$AGENT" -c "$AC" heartbeat
}

# ---- against s_server with the self-signed certificate
tls_start "$W/self.pem" "$W/self.key"
cli_pin_checks "$URL" "$FP_SELF" "$FP_OTHER"
# The self-signed certificate is its own CA file.
newtok
admit selfca "$TOK" "$LIST" "--cacert with the self-signed certificate itself" \
	env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$URL" --cacert "$W/self.pem" rack list
agent_pin_checks "$URL" "$FP_SELF" "$FP_OTHER"

# ---- against s_server with a certificate from the CA
tls_start "$W/leaf.pem" "$W/leaf.key"
cli_ca_checks "$URL" "$W/ca.pem" "$W/ca2.pem" "$FP_LEAF" "$FP_OTHER"
agent_ca_checks "$URL" "$W/ca.pem" "$W/ca2.pem" "$FP_LEAF" "$FP_OTHER"

# ---- a certificate from the CA for another name: the host name check, and a pin instead of it
tls_start "$W/elsewhere.pem" "$W/elsewhere.key"
newtok
refuse hostname "$TOK" 1 "SSL: no alternative certificate subject name matches target host name '127.0.0.1'" \
	"--cacert checks the host name" env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$URL" --cacert "$W/ca.pem" rack list
newtok
refuse hostnamepin "$TOK" 1 "no alternative certificate subject name" "--cacert with --fingerprint still checks the host name" \
	env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$URL" --cacert "$W/ca.pem" --fingerprint "$FP_ELSEWHERE" rack list
newtok
admit hostnameok "$TOK" "$LIST" "--fingerprint alone stands in for the host name check" \
	env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$URL" --fingerprint "$FP_ELSEWHERE" rack list

# ---- TLS 1.2: the pin holds there too (curl checks it after the handshake, before writing)
tls_start "$W/self.pem" "$W/self.key" -tls1_2
grep -q '^ACCEPT' "$TLS_LOG" || fail "s_server -tls1_2"
newtok
refuse tls12 "$TOK" 1 "does not match the pinned fingerprint $FP_OTHER" "TLS 1.2, a wrong --fingerprint" \
	env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$URL" --fingerprint "$FP_OTHER" rack list
btok
aconf "$URL" "bootstrap_token = $TOK" "server_fingerprint = $FP_OTHER"
refuse tls12agent "$TOK" 1 "does not match the pinned fingerprint $FP_OTHER" "TLS 1.2, a wrong server_fingerprint" \
	"$AGENT" -c "$AC" register
newtok
admit tls12ok "$TOK" "$LIST" "TLS 1.2, the right --fingerprint" \
	env RACKPILOT_TOKEN="$TOK" "$CLI" --url "$URL" --fingerprint "$FP_SELF" rack list
if ! grep -aq '^CIPHER is ECDHE' "$TLS_LOG" || grep -aq '^CIPHER is TLS_' "$TLS_LOG"; then
	fail "the peer did not speak TLS 1.2 only"
fi
tls_stop

[ -z "$PENDING" ] || fail "refusals without a control: $PENDING"
echo "ok: $CASES cases (CLI and agent against openssl s_server)"

# ---- against the real rackpilotd: tls = on, its own certificate, the pin it logs
[ -n "$RPD" ] || exit 0
printf '[server]\ntls = on\npower_sync_interval = 0\n' > "$W/rpd.conf"
DB=$(sh "$(dirname "$0")/../pg/newdb.sh")
"$RPD" -c "$W/rpd.conf" --listen 127.0.0.1:0 --data-dir "$W/rpd" ${DB:+--database "$DB"} --threads 2 \
	> "$W/rpd.out" 2> "$W/rpd.log" < /dev/null &
RPD_PID=$!
for _ in $(seq 200); do
	grep -q '^listening on ' "$W/rpd.out" 2> /dev/null && break
	sleep 0.1
done
RURL=https://$(sed -n 's/^listening on //p' "$W/rpd.out")
[ "$RURL" != https:// ] || fail "rackpilotd did not start: $(tail -n 5 "$W/rpd.log")"
RFP=$(sed -n 's/.*public-key SHA-256 fingerprint \([0-9a-f]\{64\}\).*/\1/p' "$W/rpd.log")
[ "$RFP" = "$(fp_of "$W/rpd/tls/key.pem")" ] ||
	fail "rackpilotd logs the fingerprint $RFP, its key is $(fp_of "$W/rpd/tls/key.pem")"
ADMIN=$(cat "$W/rpd/admin.token")
accesses() { sleep 0.6; grep -c ' access ' "$W/rpd.log" || true; } # flushed every 250 ms
CASES=$((CASES + 1))
env RACKPILOT_TOKEN="$ADMIN" "$CLI" --url "$RURL" --fingerprint "$RFP" rack list > "$W/r1.out" 2>&1 ||
	fail "the CLI with rackpilotd's own pin: $(cat "$W/r1.out")"
CASES=$((CASES + 1))
before=$(accesses)
if env RACKPILOT_TOKEN="$ADMIN" "$CLI" --url "$RURL" --fingerprint "$FP_OTHER" rack list \
	> "$W/r2.out" 2>&1; then
	fail "the CLI took another key for rackpilotd's"
fi
has r2.out "does not match the pinned fingerprint $FP_OTHER \\(the server's is $RFP\\); nothing was sent" \
	"the CLI, a wrong pin for rackpilotd"
[ "$(accesses)" = "$before" ] || fail "a request reached rackpilotd through a wrong pin"
# The agent: a token bound to a node; a wrong pin sends nothing and leaves the token unused.
RPIN="sha256//$(printf '%s' "$RFP" | xxd -r -p | base64)"
rcurl() { curl -sf --cacert "$W/rpd/tls/cert.pem" --pinnedpubkey "$RPIN" \
	-H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' "$@"; }
rcurl -d '{"name":"tls-agent","macs":["52:54:00:7e:57:01"]}' "$RURL/v1/nodes" > /dev/null ||
	fail "cannot enroll a node on rackpilotd"
BT=$(rcurl -d '{"node":"tls-agent"}' "$RURL/v1/bootstrap-tokens" |
	sed -n 's/.*"token": *"\(rpb_[^"]*\)".*/\1/p')
[ -n "$BT" ] || fail "no bootstrap token from rackpilotd"
rm -f "$W/hostkey" "$W/hostkey.pub"
ssh-keygen -q -t ed25519 -N '' -C tls-agent -f "$W/hostkey" < /dev/null > /dev/null ||
	fail "ssh-keygen"
: > "$W/node/proc/cmdline"
rm -f "$W/state/token"
CASES=$((CASES + 1))
before=$(accesses)
aconf "$RURL" "bootstrap_token = $BT" "server_fingerprint = $FP_OTHER"
if "$AGENT" -c "$AC" register > "$W/r3.out" 2>&1; then fail "the agent registered through a wrong pin"; fi
has r3.out "does not match the pinned fingerprint $FP_OTHER" "the agent, a wrong pin for rackpilotd"
[ "$(accesses)" = "$before" ] || fail "the agent's request reached rackpilotd through a wrong pin"
CASES=$((CASES + 1))
aconf "$RURL" "bootstrap_token = $BT" "server_fingerprint = $RFP"
"$AGENT" -c "$AC" register > "$W/r4.out" 2>&1 ||
	fail "the agent with rackpilotd's pin: $(cat "$W/r4.out")"
has r4.out "registered as node tls-agent" "the agent registers with rackpilotd's pin"
accesses > /dev/null
grep -q 'POST /v1/agent/register" 200' "$W/rpd.log" || fail "rackpilotd did not log the registration"
echo "ok: $CASES cases (with rackpilotd)"
