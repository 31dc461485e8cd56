-- cairn store schema v9 (PostgreSQL): detached inventory rows.
-- Mirrors crates/store-sqlite/migrations/0009_inventory_detached.sql.
ALTER TABLE managed_resources ADD COLUMN detached BOOLEAN NOT NULL DEFAULT FALSE;
