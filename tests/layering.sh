#!/bin/sh
# Module boundaries (see DEVELOPERS.md): fail when a module includes what it must not.
src=${1:-.}
fail=0
check() { # dir pattern message
	hits=$(grep -rlE "$2" "$src/server/$1" 2>/dev/null)
	if [ -n "$hits" ]; then
		echo "layering: $3:" $hits >&2
		fail=1
	fi
}
check store '#include *<microhttpd.h>' "store/ includes microhttpd"
check http '#include *<sqlite3.h>' "http/ includes sqlite3"
check api '#include *<(microhttpd|sqlite3).h>' "api/ includes microhttpd or sqlite3"
check api '#include *"(\.\./)?http/' "api/ includes http/"
check store '#include *"(\.\./)?(api|http)/' "store/ includes api/ or http/"
check util '#include *"(\.\./)?(api|http|store)/' "util/ includes a higher module"
check ssh '#include *"(\.\./)?(api|http|store|jobs|bmc)/' "ssh/ includes a higher module"
check boot '#include *"(\.\./)?(api|http|store|jobs|bmc|ssh)/' "boot/ includes a higher module"
# The deploy seed is pure (deploy -> util): what it renders comes in as JSON.
check deploy '#include *"(\.\./)?(api|http|store|jobs|bmc|ssh|boot|rollout)/' "deploy/ includes a higher module"
# ... and libyaml is its alone (operator YAML is checked there).
if grep -rlE '#include *<yaml.h>' "$src/server" "$src/agent" "$src/cli" 2>/dev/null | grep -v '/server/deploy/' >/dev/null; then
	echo "layering: yaml.h included outside server/deploy/" >&2
	fail=1
fi
check bmc '#include *"(\.\./)?(api|http|store|jobs|ssh)/' "bmc/ includes a higher module"
check api '#include *"(\.\./)?ssh/' "api/ includes ssh/ (it goes through jobs/)"
# BMC options are data, not BMC actions: bmc/options.h (which includes nothing but jansson) is
# all of bmc/ that api/ may include; everything else goes through jobs/.
if grep -rhE '#include *"(\.\./)?bmc/' "$src/server/api" | grep -vE '"(\.\./)?bmc/options\.h"' >/dev/null; then
	echo "layering: api/ includes bmc/ beyond bmc/options.h (it goes through jobs/)" >&2
	fail=1
fi
if grep -E '^#include' "$src/server/bmc/options.h" | grep -vE '<jansson.h>' >/dev/null; then
	echo "layering: bmc/options.h includes more than <jansson.h> (it is pure data)" >&2
	fail=1
fi
check rollout '#include *<(microhttpd|sqlite3).h>' "rollout/ includes microhttpd or sqlite3"
check rollout '#include *"(\.\./)?(api|http|bmc|ssh|boot)/' "rollout/ includes a module it must not (it drives jobs/ and store/)"
# The database is reached through store/sql.h: only its SQLite driver includes sqlite3.h.
if grep -rlE '#include *<sqlite3.h>' "$src/server" "$src/agent" "$src/cli" 2>/dev/null | grep -v '/server/store/sqlite.c$' >/dev/null; then
	echo "layering: sqlite3.h included outside store/sqlite.c:" $(grep -rlE '#include *<sqlite3.h>' "$src/server" "$src/agent" "$src/cli" | grep -v '/server/store/sqlite.c$') >&2
	fail=1
fi
# ... and only its PostgreSQL driver includes libpq-fe.h.
if grep -rlE '#include *<libpq-fe.h>' "$src/server" "$src/agent" "$src/cli" 2>/dev/null | grep -v '/server/store/pg.c$' >/dev/null; then
	echo "layering: libpq-fe.h included outside store/pg.c:" $(grep -rlE '#include *<libpq-fe.h>' "$src/server" "$src/agent" "$src/cli" | grep -v '/server/store/pg.c$') >&2
	fail=1
fi
# The engine's pure decisions (rollout/plan.[ch]) are all store/ may use of rollout/, and they
# include no other module.
if grep -rhE '#include *"(\.\./)?rollout/' "$src/server/store" | grep -vE '"(\.\./)?rollout/plan\.h"' >/dev/null; then
	echo "layering: store/ includes rollout/ beyond rollout/plan.h" >&2
	fail=1
fi
if grep -lE '#include *"(\.\./)?[a-z]+/|#include *<(microhttpd|sqlite3)\.h>' "$src/server/rollout/plan.h" "$src/server/rollout/plan.c" >/dev/null 2>&1; then
	echo "layering: rollout/plan.[ch] include another module (they are pure)" >&2
	fail=1
fi
# Job types live in one table (include/rackpilot/jobtypes.h, pure data that store/, jobs/ and
# api/ all read): no hand-written lists of type names in SQL, no includes in the table.
check store "type IN \\('" "store/ lists job types by hand (use STORE_SSH_TYPES_SQL, from rackpilot/jobtypes.h)"
if grep -E '^#include' "$src/include/rackpilot/jobtypes.h" | grep -vE '<string.h>' >/dev/null; then
	echo "layering: include/rackpilot/jobtypes.h includes more than <string.h> (it is pure data)" >&2
	fail=1
fi
# What all three programs share is common/ (declared in include/rackpilot/common.h): it
# includes no program's code, and the agent and the CLI include nothing of server/ (their
# build gives them only include/ as a root; this catches a relative path around that).
if grep -rhE '^#include *"' "$src/common" "$src/include/rackpilot/common.h" | grep -vE '"rackpilot/[a-z]+\.h"' >/dev/null; then
	echo "layering: common/ includes something beyond rackpilot/*.h:" $(grep -rnE '^#include *"' "$src/common" "$src/include/rackpilot/common.h" | grep -vE '"rackpilot/[a-z]+\.h"') >&2
	fail=1
fi
for d in agent cli; do
	if grep -rlE '#include *"(\.\./)*(server|util|store|api|http|jobs|bmc|ssh|boot|rollout|accept)/' "$src/$d" >/dev/null; then
		echo "layering: $d/ includes server code:" $(grep -rlE '#include *"(\.\./)*(server|util|store|api|http|jobs|bmc|ssh|boot|rollout|accept)/' "$src/$d") >&2
		fail=1
	fi
done
# One owner per library: TLS (GnuTLS) is http/'s, libsodium util/'s (secret.c).
if grep -rlE '#include *<gnutls/' "$src/server" | grep -v '/server/http/' >/dev/null; then
	echo "layering: GnuTLS included outside http/:" $(grep -rlE '#include *<gnutls/' "$src/server" | grep -v '/server/http/') >&2
	fail=1
fi
if grep -rlE '#include *<sodium' "$src/server" | grep -v '/server/util/' >/dev/null; then
	echo "layering: libsodium included outside util/:" $(grep -rlE '#include *<sodium' "$src/server" | grep -v '/server/util/') >&2
	fail=1
fi
for m in store jobs; do
	if grep -rlE "#include *\"(\\.\\./)?$m/internal.h\"" "$src/server" | grep -v "/$m/" >/dev/null; then
		echo "layering: $m/internal.h used outside $m/" >&2
		fail=1
	fi
done
[ $fail -eq 0 ] && echo "layering: ok"
exit $fail
