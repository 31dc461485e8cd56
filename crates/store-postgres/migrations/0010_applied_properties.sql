-- cairn store schema v10 (PostgreSQL): what the last deployment applied to each inventoried resource.
-- Mirrors crates/store-sqlite/migrations/0010_applied_properties.sql.
ALTER TABLE managed_resources ADD COLUMN applied TEXT;
