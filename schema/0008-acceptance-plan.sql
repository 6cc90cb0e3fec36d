-- 0008: what rack acceptance compares against: each node class's bill of materials and the
-- cabling plan (docs/acceptance.md).

CREATE TABLE node_classes (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,           -- the value of nodes.node_class
    description TEXT,
    bom         TEXT NOT NULL DEFAULT '{}',     -- JSON, checked by the API (accept/)
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- One planned cable from a node's port to a switch port. A port is an interface (name or
-- MAC) or an InfiniBand port GUID, never both.
CREATE TABLE cabling (
    id          INTEGER PRIMARY KEY,
    node_id     INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    interface   TEXT,
    port_guid   TEXT,
    switch      TEXT NOT NULL,
    port        TEXT NOT NULL,
    CHECK ((interface IS NULL) != (port_guid IS NULL))
);
CREATE UNIQUE INDEX cabling_port ON cabling(node_id, coalesce(interface, port_guid));
