//! The `cairn_store` traits for [`PostgresStore`](crate::PostgresStore): each method boxes the matching inherent
//! async function.

cairn_store::impl_store_traits!(crate::PostgresStore, "postgres");
