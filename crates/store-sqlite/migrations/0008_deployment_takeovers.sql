-- cairn store schema v8: takeover counting for crash recovery.
-- Recovery counts how often it took over a deployment without progress, so a deployment that keeps killing the
-- server is abandoned instead of resumed forever.
ALTER TABLE deployments ADD COLUMN takeovers INTEGER NOT NULL DEFAULT 0;
-- Succeeded journal steps when the deployment was last taken over.
ALTER TABLE deployments ADD COLUMN takeover_progress INTEGER NOT NULL DEFAULT 0;
