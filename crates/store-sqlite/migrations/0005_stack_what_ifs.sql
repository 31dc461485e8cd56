-- cairn store schema v5: deployment stack what-if results, keyed by folded scope + name. The request they were
-- computed from holds the template and parameter values (secure ones too), so it is sealed with the data key
-- (bound to the row's key); each row lives until expires_at (Unix milliseconds, the request's retentionInterval).

CREATE TABLE stack_what_ifs (
    scope_key      TEXT NOT NULL,
    name_key       TEXT NOT NULL,
    scope          TEXT NOT NULL,
    name           TEXT NOT NULL,
    result         TEXT NOT NULL,
    request        BLOB NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    format_version INTEGER NOT NULL,
    PRIMARY KEY (scope_key, name_key)
);

CREATE INDEX stack_what_ifs_expiry ON stack_what_ifs (expires_at);
