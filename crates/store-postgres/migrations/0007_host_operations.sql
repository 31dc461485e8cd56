-- cairn store schema v7 (PostgreSQL): pending operations of the extension host's API, the polling state sealed
-- (cairn_store::sealed::HOST_OPERATION_STATE), each row alive until expires_at.
-- Mirrors crates/store-sqlite/migrations/0007_host_operations.sql.

CREATE TABLE host_operations (
    id                TEXT COLLATE "C" PRIMARY KEY,
    extension_name    TEXT NOT NULL,
    extension_version TEXT NOT NULL,
    state             BYTEA NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    expires_at        BIGINT NOT NULL,
    format_version    BIGINT NOT NULL
);

CREATE INDEX host_operations_expiry ON host_operations (expires_at);
