-- cairn store schema v10 (PostgreSQL twin of SQLite's): the managed-resource inventory records what the last
-- deployment applied to each resource (JSON text: the declared members of its properties with the answered values;
-- never a write-only value), the baseline stack drift detection compares the live resource with. NULL for rows
-- written before this version or outside a deployment.
ALTER TABLE managed_resources ADD COLUMN applied TEXT;
