#!/bin/sh
# docs/grafana/rackpilot.json against a real rackpilotd and Prometheus's own checker:
#   - it parses as a dashboard, and every panel's expression names only metrics this server
#     exports (scraped from /metrics after a power and a sensor sweep of a fake node in a
#     rack with a budget, so the sweeps', the sensors' and the rack's are there too);
#   - promtool check metrics accepts the scrape (the exposition format, HELP and TYPE);
#   - promtool check rules accepts every expression (PromQL), each as a recording rule.
# Skips (77) without promtool (package prometheus), unless CI=true.
#   dashboard-test.sh RACKPILOTD
set -eu
BIN=$1
DASH=$(cd "$(dirname "$0")/../../docs/grafana" && pwd)/rackpilot.json
if ! command -v promtool >/dev/null; then
	[ "${CI:-}" = true ] && { echo "dashboard-test: promtool (package prometheus) is required" >&2; exit 1; }
	echo "dashboard-test: skipped: no promtool (package prometheus)" >&2
	exit 77
fi
TMP=$(mktemp -d /tmp/rp-dash-XXXXXX)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null && wait $PID; rm -rf "$TMP"' EXIT
fail() { echo "dashboard-test: $*" >&2; cat "$TMP/log" >&2; exit 1; }
"$BIN" --listen 127.0.0.1:0 --data-dir "$TMP/d" --power-sync-interval 0 --no-access-log \
	>"$TMP/out" 2>"$TMP/log" &
PID=$!
for _ in $(seq 200); do grep -q listening "$TMP/out" 2>/dev/null && break; sleep 0.1; done
grep -q listening "$TMP/out" || fail "rackpilotd did not start"
U=http://$(sed -n 's/^listening on //p' "$TMP/out")
H="Authorization: Bearer $(cat "$TMP/d/admin.token")"
curl -sf -H "$H" -H 'Content-Type: application/json' \
	-d '{"name":"r1","power_budget_kw":2}' "$U/v1/racks" >/dev/null
curl -sf -H "$H" -H 'Content-Type: application/json' \
	-d '{"name":"d1","rack":"r1","bmc":{"driver":"fake"}}' "$U/v1/nodes" >/dev/null
for sweep in power sensors; do
	curl -sf -H "$H" -X POST "$U/v1/$sweep/sync" >/dev/null
	for _ in $(seq 300); do
		curl -sf -H "$H" "$U/v1/$sweep/sync" | grep -q '"last":{' && break
		sleep 0.1
	done
done
curl -sf -H "$H" "$U/v1/nodes?limit=5" >/dev/null
curl -sf -H "$H" "$U/metrics" >"$TMP/metrics"
grep -q '^rackpilot_power_sync_last_seconds ' "$TMP/metrics" ||
	fail "no sweep metrics 30 s after asking for a sweep"
grep -q '^rackpilot_rack_power_watts{rack="r1"} ' "$TMP/metrics" ||
	fail "no rack power metrics 30 s after asking for a sensor sweep"
promtool check metrics <"$TMP/metrics"
python3 - "$DASH" "$TMP/metrics" "$TMP/rules.yml" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
exported = set(re.findall(r'^# TYPE (\S+) ', open(sys.argv[2]).read(), re.M))
assert dash.get("title") and dash.get("uid") and dash.get("schemaVersion"), "not a dashboard"
exprs, bad = [], []
for p in dash["panels"]:
    assert p.get("title") and p.get("gridPos") and p.get("targets"), "panel %r" % p.get("title")
    for t in p["targets"]:
        exprs.append((p["title"], t["expr"]))
        for m in re.findall(r'\brackpilot_[a-z_]+', t["expr"]):
            base = re.sub(r'_(bucket|sum|count)$', '', m)
            if m not in exported and base not in exported:
                bad.append("%s: %s" % (p["title"], m))
if bad:
    sys.exit("dashboard-test: metrics the server does not export: " + ", ".join(bad))
with open(sys.argv[3], "w") as f:
    f.write("groups:\n- name: dashboard\n  rules:\n")
    for i, (title, e) in enumerate(exprs):
        f.write("  - record: dashboard:expr%d\n    expr: %s\n" % (i, json.dumps(e)))
print("dashboard-test: %d panels, %d expressions, %d metrics exported" %
      (len(dash["panels"]), len(exprs), len(exported)))
PY
promtool check rules "$TMP/rules.yml"
