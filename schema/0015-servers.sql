-- The servers that share this database (several on PostgreSQL; on SQLite, one). Each keeps
-- its row alive with a heartbeat: the others learn who is live (the power sweep is shared out
-- over the live set), and a server cannot start under a name a live one uses.
CREATE TABLE servers (
    name        TEXT PRIMARY KEY,       -- server_name: the owner its job leases carry
    instance    TEXT NOT NULL,          -- random per process start
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    seen_until  INTEGER NOT NULL,       -- live until then (ms); each heartbeat moves it on
    leader      INTEGER NOT NULL DEFAULT 0
);
