#!/bin/sh
# For the suite's PostgreSQL run: with RP_TEST_PG set (tests/pg/cluster.sh), make a new empty
# database and print its URL for rackpilotd's --database; without it print nothing (SQLite in
# the data directory). A test script does DB=$(sh tests/pg/newdb.sh) once and puts
# ${DB:+--database "$DB"} on rackpilotd's command line.
set -eu
[ -n "${RP_TEST_PG:-}" ] || exit 0
name=rp_$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
psql -qX "host=$RP_TEST_PG user=rp dbname=postgres" -c "CREATE DATABASE $name" >/dev/null
echo "postgresql:///$name?host=$RP_TEST_PG&user=rp"
