//! The `cairn_store` traits for [`SqliteStore`]: each method boxes the matching inherent async function.

cairn_store::impl_store_traits!(crate::SqliteStore, "sqlite");
