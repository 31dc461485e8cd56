-- cairn store schema v1 (PostgreSQL): store keys, resource groups, deployments, the operation journal, secrets.
-- Mirrors crates/store-sqlite/migrations/0001_core.sql: same tables, columns and forms, so rows read alike in both
-- (cairn_store::codec) and copy between them (cairn_store::transfer). Timestamps are Unix milliseconds (BIGINT);
-- *_key columns hold the case-folded form used for lookups; rows holding JSON (TEXT, kept byte for byte) carry
-- format_version. Key columns are COLLATE "C": listings compare and order them bytewise, as SQLite does, whatever
-- the database's collation. Foreign keys are DEFERRABLE so a copy may load rows in any order within its
-- transaction; they are checked per statement otherwise.

CREATE TABLE store_keys (
    key_id      TEXT COLLATE "C" PRIMARY KEY,
    wrapped_key BYTEA NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE resource_groups (
    subscription_key   TEXT COLLATE "C" NOT NULL,
    name_key           TEXT COLLATE "C" NOT NULL,
    subscription_id    TEXT NOT NULL,
    name               TEXT NOT NULL,
    location           TEXT NOT NULL,
    tags               TEXT NOT NULL,
    managed_by         TEXT,
    provisioning_state TEXT NOT NULL,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    version            BIGINT NOT NULL,
    format_version     BIGINT NOT NULL,
    PRIMARY KEY (subscription_key, name_key)
);

-- One row per deployment run. Kept small: the request lives in deployment_requests (written once), so status
-- updates and claim renewals rewrite only this row.
CREATE TABLE deployments (
    id               TEXT COLLATE "C" PRIMARY KEY,
    scope_key        TEXT COLLATE "C" NOT NULL,
    name_key         TEXT COLLATE "C" NOT NULL,
    scope            TEXT NOT NULL,
    name             TEXT NOT NULL,
    parent_id        TEXT COLLATE "C" REFERENCES deployments (id) ON DELETE SET NULL DEFERRABLE,
    location         TEXT,
    tags             TEXT NOT NULL,
    status           TEXT NOT NULL,
    correlation_id   TEXT NOT NULL,
    stack_initiated  BOOLEAN NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    started_at       BIGINT,
    finished_at      BIGINT,
    outputs          TEXT,
    error            TEXT,
    output_resources TEXT,
    extensions       TEXT,
    owner            TEXT,
    owner_expires_at BIGINT,
    version          BIGINT NOT NULL,
    format_version   BIGINT NOT NULL,
    UNIQUE (scope_key, name_key)
);
CREATE INDEX deployments_by_parent ON deployments (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX deployments_active ON deployments (created_at) WHERE status IN ('Accepted', 'Running');

CREATE TABLE deployment_requests (
    deployment_id  TEXT COLLATE "C" PRIMARY KEY REFERENCES deployments (id) ON DELETE CASCADE DEFERRABLE,
    request        TEXT NOT NULL,
    format_version BIGINT NOT NULL
);

-- The journal: append-only, one row per operation step; seq counts 1, 2, ... per run.
CREATE TABLE deployment_operations (
    deployment_id          TEXT COLLATE "C" NOT NULL REFERENCES deployments (id) ON DELETE CASCADE DEFERRABLE,
    seq                    BIGINT NOT NULL,
    operation_id           TEXT NOT NULL,
    provisioning_operation TEXT NOT NULL,
    provisioning_state     TEXT NOT NULL,
    status_code            TEXT,
    status_message         TEXT,
    target_resource        TEXT,
    service_request_id     TEXT,
    timestamp              BIGINT NOT NULL,
    duration_ms            BIGINT,
    extension              TEXT,
    request_content        TEXT,
    response_content       TEXT,
    format_version         BIGINT NOT NULL,
    PRIMARY KEY (deployment_id, seq)
);

-- Sealed secret values (cairn_store::sealed::SECRET_VALUE).
CREATE TABLE secrets (
    id         TEXT COLLATE "C" PRIMARY KEY,
    owner_kind TEXT COLLATE "C" NOT NULL,
    owner_id   TEXT COLLATE "C" NOT NULL,
    name       TEXT COLLATE "C" NOT NULL,
    value      BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (owner_kind, owner_id, name)
);
