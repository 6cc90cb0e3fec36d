-- 0010: a batch keeps the nodes it skipped and why, for whoever follows it later.
ALTER TABLE batches ADD COLUMN skipped TEXT NOT NULL DEFAULT '[]';  -- JSON [{node, reason}]
