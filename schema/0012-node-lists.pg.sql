-- 0012 on PostgreSQL: the same columns, filled with json_agg (the json_group_array stand-in
-- comes with 0014); no triggers to drop (store/pg.c left 0004's out).
ALTER TABLE nodes ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE nodes ADD COLUMN macs TEXT NOT NULL DEFAULT '[]';
UPDATE nodes SET
    tags = coalesce((SELECT json_agg(tag ORDER BY tag)::text FROM node_tags WHERE node_id = nodes.id), '[]'),
    macs = coalesce((SELECT json_agg(mac ORDER BY mac)::text FROM node_macs WHERE node_id = nodes.id), '[]');
