-- cairn store schema v5 (PostgreSQL): deployment stack what-if results, keyed by folded scope + name, the request
-- sealed (cairn_store::sealed::STACK_WHAT_IF_REQUEST), each row alive until expires_at.
-- Mirrors crates/store-sqlite/migrations/0005_stack_what_ifs.sql.

CREATE TABLE stack_what_ifs (
    scope_key      TEXT COLLATE "C" NOT NULL,
    name_key       TEXT COLLATE "C" NOT NULL,
    scope          TEXT NOT NULL,
    name           TEXT NOT NULL,
    result         TEXT NOT NULL,
    request        BYTEA NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    format_version BIGINT NOT NULL,
    PRIMARY KEY (scope_key, name_key)
);

CREATE INDEX stack_what_ifs_expiry ON stack_what_ifs (expires_at);
