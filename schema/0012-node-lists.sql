-- A node's tags and MACs as the JSON arrays the API shows (sorted, without repeats, as
-- json_group_array writes them), written by the store with every change to node_tags and
-- node_macs (store/nodes.c node_write, store_node_lists). A list page read them with two
-- correlated subqueries per row, about half of its SQLite time; the tables stay the truth
-- for lookups and filters.
ALTER TABLE nodes ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE nodes ADD COLUMN macs TEXT NOT NULL DEFAULT '[]';
UPDATE nodes SET
    tags = (SELECT json_group_array(tag) FROM (SELECT tag FROM node_tags WHERE node_id = nodes.id ORDER BY tag)),
    macs = (SELECT json_group_array(mac) FROM (SELECT mac FROM node_macs WHERE node_id = nodes.id ORDER BY mac));
-- macs_version is bumped by the store, once per transaction that changes a MAC or a node's
-- name (store_macs_changed), instead of by a trigger per row: each MAC insert's trigger
-- made SQLite keep a statement journal, a tenth of an import's time. It also leaves no
-- trigger for a second database to translate.
DROP TRIGGER macs_ins;
DROP TRIGGER macs_del;
DROP TRIGGER macs_name;
