-- cairn store schema v4 (PostgreSQL): deployment stacks, keyed by folded scope + name.
-- Mirrors crates/store-sqlite/migrations/0004_stacks.sql.

CREATE TABLE deployment_stacks (
    scope_key      TEXT COLLATE "C" NOT NULL,
    name_key       TEXT COLLATE "C" NOT NULL,
    scope          TEXT NOT NULL,
    name           TEXT NOT NULL,
    stack          TEXT NOT NULL,
    managed_set    TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    version        BIGINT NOT NULL,
    format_version BIGINT NOT NULL,
    PRIMARY KEY (scope_key, name_key)
);
