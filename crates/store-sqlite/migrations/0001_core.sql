-- cairn store schema v1: store keys, resource groups, deployments, the operation journal, secrets.
-- Timestamps are Unix milliseconds (INTEGER). *_key columns hold the case-folded form used for lookups.
-- Rows holding JSON carry format_version (see cairn_store::format).

CREATE TABLE store_keys (
    key_id      TEXT PRIMARY KEY,
    wrapped_key BLOB NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE resource_groups (
    subscription_key   TEXT NOT NULL,
    name_key           TEXT NOT NULL,
    subscription_id    TEXT NOT NULL,
    name               TEXT NOT NULL,
    location           TEXT NOT NULL,
    tags               TEXT NOT NULL,
    managed_by         TEXT,
    provisioning_state TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    version            INTEGER NOT NULL,
    format_version     INTEGER NOT NULL,
    PRIMARY KEY (subscription_key, name_key)
);

-- One row per deployment run. Kept small: the request lives in deployment_requests (written once), so status
-- updates and claim renewals rewrite only this row.
CREATE TABLE deployments (
    id               TEXT PRIMARY KEY,
    scope_key        TEXT NOT NULL,
    name_key         TEXT NOT NULL,
    scope            TEXT NOT NULL,
    name             TEXT NOT NULL,
    parent_id        TEXT REFERENCES deployments (id) ON DELETE SET NULL,
    location         TEXT,
    tags             TEXT NOT NULL,
    status           TEXT NOT NULL,
    correlation_id   TEXT NOT NULL,
    stack_initiated  INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER,
    outputs          TEXT,
    error            TEXT,
    output_resources TEXT,
    extensions       TEXT,
    owner            TEXT,
    owner_expires_at INTEGER,
    version          INTEGER NOT NULL,
    format_version   INTEGER NOT NULL,
    UNIQUE (scope_key, name_key)
);
CREATE INDEX deployments_by_parent ON deployments (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX deployments_active ON deployments (created_at) WHERE status IN ('Accepted', 'Running');

CREATE TABLE deployment_requests (
    deployment_id  TEXT PRIMARY KEY REFERENCES deployments (id) ON DELETE CASCADE,
    request        TEXT NOT NULL,
    format_version INTEGER NOT NULL
);

-- The journal: append-only, one row per operation step; seq counts 1, 2, ... per run. Clustered on
-- (deployment_id, seq) (WITHOUT ROWID) with no secondary index, so an append writes at the right edge of its
-- run's range only; per-operation reads scan the run's range.
CREATE TABLE deployment_operations (
    deployment_id          TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    seq                    INTEGER NOT NULL,
    operation_id           TEXT NOT NULL,
    provisioning_operation TEXT NOT NULL,
    provisioning_state     TEXT NOT NULL,
    status_code            TEXT,
    status_message         TEXT,
    target_resource        TEXT,
    service_request_id     TEXT,
    timestamp              INTEGER NOT NULL,
    duration_ms            INTEGER,
    extension              TEXT,
    request_content        TEXT,
    response_content       TEXT,
    format_version         INTEGER NOT NULL,
    PRIMARY KEY (deployment_id, seq)
) WITHOUT ROWID;

-- Sealed secret values (cairn_store::crypto); associated data = ('secrets', id, 'value').
CREATE TABLE secrets (
    id         TEXT PRIMARY KEY,
    owner_kind TEXT NOT NULL,
    owner_id   TEXT NOT NULL,
    name       TEXT NOT NULL,
    value      BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (owner_kind, owner_id, name)
);
