-- cairn store schema v2: the managed-resource inventory and the local Key Vault.
-- managed_resources is a rowid table (new rows append at the right edge) with a unique index on key; listing by
-- type scans, listing by deployment uses its index.

CREATE TABLE managed_resources (
    key                  TEXT NOT NULL UNIQUE,
    resource_id          TEXT,
    resource_id_key      TEXT,
    resource_type        TEXT NOT NULL,
    resource_type_key    TEXT NOT NULL,
    api_version          TEXT,
    properties           TEXT NOT NULL,
    deployment_scope     TEXT,
    deployment_name      TEXT,
    deployment_scope_key TEXT,
    deployment_name_key  TEXT,
    extension            TEXT,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    version              INTEGER NOT NULL,
    format_version       INTEGER NOT NULL
);
CREATE INDEX managed_resources_by_deployment ON managed_resources (deployment_scope_key, deployment_name_key, key)
    WHERE deployment_scope_key IS NOT NULL;

CREATE TABLE key_vaults (
    id_key         TEXT PRIMARY KEY,
    id             TEXT NOT NULL,
    name           TEXT NOT NULL,
    location       TEXT NOT NULL,
    tags           TEXT NOT NULL,
    properties     TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    version        INTEGER NOT NULL,
    format_version INTEGER NOT NULL
);

-- One row per secret version; value is sealed with associated data
-- ('key_vault_secret_versions', '["<vault_key>","<name_key>","<version>"]', 'value').
CREATE TABLE key_vault_secret_versions (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    vault_key      TEXT NOT NULL REFERENCES key_vaults (id_key) ON DELETE CASCADE,
    name_key       TEXT NOT NULL,
    name           TEXT NOT NULL,
    version        TEXT NOT NULL,
    value          BLOB NOT NULL,
    content_type   TEXT,
    enabled        INTEGER NOT NULL,
    not_before     INTEGER,
    expires        INTEGER,
    tags           TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    format_version INTEGER NOT NULL,
    UNIQUE (vault_key, name_key, version)
);
CREATE INDEX key_vault_secret_versions_latest ON key_vault_secret_versions (vault_key, name_key, seq);
