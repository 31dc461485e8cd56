-- cairn store schema v3: named leases with heartbeat.
-- A released lease keeps its row (owner NULL) so generations never repeat.

CREATE TABLE leases (
    name         TEXT PRIMARY KEY,
    owner        TEXT,
    generation   INTEGER NOT NULL,
    acquired_at  INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);
