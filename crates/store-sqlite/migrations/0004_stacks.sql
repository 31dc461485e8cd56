-- cairn store schema v4: deployment stacks (the stack resource and its managed set), keyed by folded scope + name.

CREATE TABLE deployment_stacks (
    scope_key      TEXT NOT NULL,
    name_key       TEXT NOT NULL,
    scope          TEXT NOT NULL,
    name           TEXT NOT NULL,
    stack          TEXT NOT NULL,
    managed_set    TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    version        INTEGER NOT NULL,
    format_version INTEGER NOT NULL,
    PRIMARY KEY (scope_key, name_key)
);
