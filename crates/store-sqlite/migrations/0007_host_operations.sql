-- cairn store schema v7: pending operations of the extension host's API (a delete an extension is still running,
-- polled through the host's Location), so the Location keeps answering across a restart. The polling state can
-- hold the extension config's secrets, so it is sealed with the data key (bound to the row's id); each row lives
-- until expires_at (Unix milliseconds, the host's operation deadline).

CREATE TABLE host_operations (
    id                TEXT PRIMARY KEY,
    extension_name    TEXT NOT NULL,
    extension_version TEXT NOT NULL,
    state             BLOB NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    expires_at        INTEGER NOT NULL,
    format_version    INTEGER NOT NULL
);

CREATE INDEX host_operations_expiry ON host_operations (expires_at);
