-- cairn store schema v3 (PostgreSQL): named leases with heartbeat. Mirrors crates/store-sqlite/migrations/0003_leases.sql.
-- A released lease keeps its row (owner NULL) so generations never repeat.

CREATE TABLE leases (
    name         TEXT COLLATE "C" PRIMARY KEY,
    owner        TEXT,
    generation   BIGINT NOT NULL,
    acquired_at  BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL
);
