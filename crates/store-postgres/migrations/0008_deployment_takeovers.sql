-- cairn store schema v8 (PostgreSQL): takeover counting for crash recovery.
-- Mirrors crates/store-sqlite/migrations/0008_deployment_takeovers.sql.
ALTER TABLE deployments ADD COLUMN takeovers BIGINT NOT NULL DEFAULT 0;
-- Succeeded journal steps when the deployment was last taken over.
ALTER TABLE deployments ADD COLUMN takeover_progress BIGINT NOT NULL DEFAULT 0;
