-- cairn store schema v11 (PostgreSQL): cancel requests on deployment runs, and long-running operation results.
-- Mirrors crates/store-sqlite/migrations/0011_replicas.sql.
ALTER TABLE deployments ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE operation_results (
    id               TEXT COLLATE "C" PRIMARY KEY,
    subscription_key TEXT COLLATE "C" NOT NULL,
    status           BIGINT,
    body             TEXT,
    owner            TEXT,
    owner_expires_at BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    format_version   BIGINT NOT NULL
);

CREATE INDEX operation_results_expiry ON operation_results (expires_at);
