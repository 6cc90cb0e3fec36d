-- 0012 on PostgreSQL: the same columns, filled with json_agg (SQLite's json_group_array is
-- 0014's); no triggers to drop (0004's variant made none).
ALTER TABLE nodes ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE nodes ADD COLUMN macs TEXT NOT NULL DEFAULT '[]';
UPDATE nodes SET
    tags = coalesce((SELECT json_agg(tag ORDER BY tag)::text FROM node_tags WHERE node_id = nodes.id), '[]'),
    macs = coalesce((SELECT json_agg(mac ORDER BY mac)::text FROM node_macs WHERE node_id = nodes.id), '[]');
