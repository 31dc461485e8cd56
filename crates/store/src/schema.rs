//! The rules every backend's migrations follow: a migration is applied once and recorded with a checksum of its
//! text, an edited migration is noticed rather than skipped, and a database whose schema is newer than the build is
//! refused. Each backend keeps its own migration files (numbered alike) and its own `schema_migrations` table.

use crate::error::{Entity, StoreError, StoreResult};

/// What a migration run did: the schema version before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migrated {
    pub from: u32,
    pub to: u32,
}

/// FNV-1a (64 bit) of a migration's text: enough to notice an edited migration, no cryptography needed.
pub fn checksum(sql: &str) -> String {
    let hash = sql.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Refuses a database whose newest applied migration is above `latest`, the newest this build knows.
pub fn refuse_newer(newest_applied: Option<i64>, latest: u32) -> StoreResult<()> {
    match newest_applied {
        Some(newest) if newest > i64::from(latest) => Err(StoreError::corrupt(
            Entity::Schema,
            format!(
                "the database has schema version {newest}, newer than this build's {latest}; upgrade cairn"
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether migration `version` (`name`, text `sql`) is among `applied` (`(version, checksum)` rows); one applied
/// with another checksum is [`StoreError::Corrupt`].
pub fn is_applied(
    applied: &[(i64, String)],
    version: u32,
    name: &str,
    sql: &str,
) -> StoreResult<bool> {
    match applied.iter().find(|(v, _)| *v == i64::from(version)) {
        None => Ok(false),
        Some((_, stored)) if *stored == checksum(sql) => Ok(true),
        Some(_) => Err(StoreError::corrupt(
            Entity::Schema,
            format!("migration {version} ({name}) differs from the one applied to this database"),
        )),
    }
}

/// The schema version a database is at: its newest applied migration (0 when none).
pub fn version_of(newest_applied: Option<i64>) -> StoreResult<u32> {
    u32::try_from(newest_applied.unwrap_or(0))
        .map_err(|_| StoreError::corrupt(Entity::Schema, "negative schema version"))
}

/// Readiness as far as the schema goes: a database at `version` serves this build (whose newest migration is
/// `latest`) only at exactly that version; otherwise [`StoreError::NotReady`] says which way it is off.
pub fn check_ready(version: u32, latest: u32) -> StoreResult<()> {
    match version.cmp(&latest) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(StoreError::NotReady(format!(
            "the database has schema version {version}, older than this build's {latest}: its migrations have not \
             been applied (restart cairn to apply them)"
        ))),
        std::cmp::Ordering::Greater => Err(StoreError::NotReady(format!(
            "the database has schema version {version}, newer than this build's {latest}: upgrade cairn"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_notices_edits() {
        assert_eq!(checksum("a"), checksum("a"));
        assert_ne!(
            checksum("CREATE TABLE a (x)"),
            checksum("CREATE TABLE a (y)")
        );
        assert_eq!(checksum(""), "cbf29ce484222325");
    }

    #[test]
    fn newer_databases_and_edited_migrations_are_refused() {
        assert!(refuse_newer(Some(8), 8).is_ok());
        assert!(refuse_newer(None, 8).is_ok());
        let error = refuse_newer(Some(9), 8).expect_err("newer");
        assert!(
            error.to_string().contains("newer than this build"),
            "{error}"
        );
        let applied = [(1, checksum("one"))];
        assert!(is_applied(&applied, 1, "one", "one").unwrap());
        assert!(!is_applied(&applied, 2, "two", "two").unwrap());
        let error = is_applied(&applied, 1, "one", "edited").expect_err("edited");
        assert!(error.to_string().contains("migration 1 (one)"), "{error}");
        assert_eq!(version_of(None).unwrap(), 0);
        assert_eq!(version_of(Some(3)).unwrap(), 3);
        assert!(version_of(Some(-1)).is_err());
    }
}
