-- cairn store schema v10: the managed-resource inventory records what the last deployment applied to each resource
-- (JSON: the members of its properties the request declared, with the values its provider answered; never a
-- write-only value), the baseline deployment stack drift detection compares the live resource with. NULL for rows
-- written before this version or outside a deployment.
ALTER TABLE managed_resources ADD COLUMN applied TEXT;
