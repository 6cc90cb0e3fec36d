#!/bin/sh
# A throwaway PostgreSQL for the test suite's PostgreSQL run (ctest -L pg): no system service,
# no TCP, a cluster in DIR listening on a Unix socket in DIR (../shared/docs/postgres-peer.md).
#   cluster.sh start DIR   initdb (once) and start; DIR/url is then libpq's base connection string
#   cluster.sh stop DIR    stop it at once and remove DIR
# Tests read RP_TEST_PG=DIR and make a database of their own in it (tests/pg/newdb.sh, the
# harness's server_start). initdb refuses root: as root the cluster belongs to the postgres
# user. Byte-order collation (C), as SQLite compares text.
set -eu
cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
	echo "cluster.sh: PostgreSQL's server binaries are missing (apt-get install postgresql)" >&2
	exit 1
fi
as() {
	if [ "$(id -u)" = 0 ]; then
		su postgres -s /bin/sh -c "$*"
	else
		sh -c "$*"
	fi
}
case $cmd in
start)
	if [ -f "$dir/data/postmaster.pid" ]; then
		as "$bin/pg_ctl -D '$dir/data' -m immediate stop" >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	[ "$(id -u)" = 0 ] && chown postgres "$dir"
	as "$bin/initdb -D '$dir/data' -A trust -U rp --locale=C -E UTF8" >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	# Many test servers at once, each with a few connections.
	as "$bin/pg_ctl -D '$dir/data' -o \"-c listen_addresses='' -k '$dir' -c max_connections=400 -c fsync=off -c full_page_writes=off\" -l '$dir/pg.log' -w start" >/dev/null ||
		{ cat "$dir/pg.log" >&2; exit 1; }
	echo "host=$dir user=rp" >"$dir/url"
	echo "cluster.sh: PostgreSQL in $dir ($("$bin/postgres" --version))"
	;;
stop)
	[ -f "$dir/data/postmaster.pid" ] && as "$bin/pg_ctl -D '$dir/data' -m immediate stop" >/dev/null 2>&1
	rm -rf "$dir"
	;;
*)
	echo "usage: cluster.sh start|stop DIR" >&2
	exit 2
	;;
esac
