#!/bin/sh
# One test of the suite again, on PostgreSQL: ctest runs test NAME of BUILD_DIR with RP_TEST_PG
# set to the cluster tests/pg/cluster.sh started (the pg fixture). The inner run's skip (77) is
# passed on as a skip, not turned into a pass.
#   run.sh BUILD_DIR PG_DIR NAME
set -eu
build=$1 pg=$2 name=$3
[ -f "$pg/url" ] || { echo "run.sh: no PostgreSQL cluster in $pg (the pg_cluster_start fixture)" >&2; exit 1; }
out=$(mktemp)
rc=0
RP_TEST_PG=$pg ctest --test-dir "$build" -R "^$name\$" --output-on-failure --timeout 900 >"$out" 2>&1 || rc=$?
cat "$out"
if grep -q "Not Run\|No tests were found" "$out"; then
	rm -f "$out"
	exit 1
fi
if grep -qE "\*\*\*Skipped" "$out"; then
	rm -f "$out"
	exit 77
fi
rm -f "$out"
exit $rc
