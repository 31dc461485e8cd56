//! Where the store lives, and opening, migrating and copying it: the only code outside the store crates (and their
//! tests) that names a store backend.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use cairn_store::crypto::{load_existing_master_key, load_server_master_key};
use cairn_store::schema::Migrated;
use cairn_store::transfer::CopyReport;
use cairn_store::{Store, StoreError};
use cairn_store_postgres::PostgresStore;
use cairn_store_sqlite::{DATABASE_FILE_NAME, SqliteOptions, SqliteStore};

use crate::AssemblyError;

/// Where cairn keeps its state: a data directory (the embedded SQLite store: `cairn.db`, `cairn.key`) or a
/// PostgreSQL database shared by several servers. The backend is chosen here and nowhere else.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreLocation {
    /// The embedded SQLite store in this directory, created (mode 0700 on Unix) when missing.
    DataDir(PathBuf),
    /// A PostgreSQL database (`postgres://…` or `postgresql://…`).
    Postgres(PostgresLocation),
}

/// A PostgreSQL database by URL, and where its master key comes from. The key is never kept in the database: it is
/// the key file given here, else `CAIRN_STORE_KEY`, else the key file `CAIRN_STORE_KEY_FILE` names; with none of
/// them opening fails (nothing is generated, so replicas cannot end up with different keys). `Debug` and `Display`
/// show the URL without its password or query.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresLocation {
    url: String,
    key_file: Option<PathBuf>,
}

impl PostgresLocation {
    pub fn new(url: impl Into<String>) -> Self {
        PostgresLocation {
            url: url.into(),
            key_file: None,
        }
    }

    /// Takes the master key from this file (standard base64 of 32 bytes, mode 0600).
    pub fn with_key_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.key_file = Some(path.into());
        self
    }

    /// The URL as given, credentials included: for connecting, never for printing.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn key_file(&self) -> Option<&Path> {
        self.key_file.as_deref()
    }

    /// The URL without the password, query or fragment: `postgres://user@host:port/database`.
    pub fn redacted_url(&self) -> String {
        let Some((scheme, rest)) = self.url.split_once("://") else {
            return "<a PostgreSQL URL>".to_owned();
        };
        let end = rest.find(['?', '#']).unwrap_or(rest.len());
        let rest = &rest[..end];
        let authority_end = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        let authority = match authority.rsplit_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                format!("{user}@{host}")
            }
            None => authority.to_owned(),
        };
        format!("{scheme}://{authority}{path}")
    }

    async fn open(&self) -> Result<PostgresStore, StoreError> {
        let (key, _origin) = load_server_master_key(self.key_file())?;
        PostgresStore::open(self.url(), &key).await
    }
}

impl fmt::Debug for PostgresLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLocation")
            .field("url", &self.redacted_url())
            .field("key_file", &self.key_file)
            .finish()
    }
}

impl StoreLocation {
    /// The embedded store in `path`.
    pub fn data_dir(path: impl Into<PathBuf>) -> Self {
        StoreLocation::DataDir(path.into())
    }

    /// Reads a location as a flag or environment variable gives it: a `postgres://` or `postgresql://` URL names a
    /// PostgreSQL database (its master key from the environment unless [`PostgresLocation::with_key_file`] says
    /// otherwise); another URL scheme is refused with [`AssemblyError::UnsupportedStore`]; anything else is a data
    /// directory.
    pub fn parse(text: &str) -> Result<Self, AssemblyError> {
        match url_scheme(text) {
            Some(scheme)
                if scheme.eq_ignore_ascii_case("postgres")
                    || scheme.eq_ignore_ascii_case("postgresql") =>
            {
                Ok(StoreLocation::Postgres(PostgresLocation::new(text)))
            }
            Some(scheme) => Err(AssemblyError::UnsupportedStore {
                scheme: scheme.to_ascii_lowercase(),
            }),
            None => Ok(StoreLocation::DataDir(PathBuf::from(text))),
        }
    }

    /// The same location with the master key taken from `path` when it is a PostgreSQL database (a data directory
    /// keeps its key beside its database).
    pub fn with_key_file(self, path: Option<PathBuf>) -> Self {
        match (self, path) {
            (StoreLocation::Postgres(location), Some(path)) => {
                StoreLocation::Postgres(location.with_key_file(path))
            }
            (location, _) => location,
        }
    }

    /// The data directory, when the store lives in one (an extension registry file may sit beside it).
    pub fn as_data_dir(&self) -> Option<&Path> {
        match self {
            StoreLocation::DataDir(path) => Some(path),
            StoreLocation::Postgres(_) => None,
        }
    }

    /// Opens the store (creating and migrating it when new).
    pub async fn open(&self) -> Result<Arc<dyn Store>, AssemblyError> {
        let opened: Result<Arc<dyn Store>, StoreError> = match self {
            StoreLocation::DataDir(path) => {
                // A key rotation stopped half way is finished (or undone) before the key is read.
                match crate::key_rotation::settle_next_key(path).await {
                    Ok(()) => SqliteStore::open(path)
                        .await
                        .map(|s| Arc::new(s) as Arc<dyn Store>),
                    Err(error) => Err(error),
                }
            }
            StoreLocation::Postgres(location) => {
                location.open().await.map(|s| Arc::new(s) as Arc<dyn Store>)
            }
        };
        opened.map_err(|source| self.failed(source))
    }

    /// Applies the schema migrations this build has and the store lacks, without opening it (no master key is
    /// needed), and says from which schema version to which. A data directory must exist.
    pub async fn migrate(&self) -> Result<Migrated, AssemblyError> {
        let migrated = match self {
            StoreLocation::DataDir(path) => SqliteStore::migrate(path).await,
            StoreLocation::Postgres(location) => PostgresStore::migrate(location.url()).await,
        };
        migrated.map_err(|source| AssemblyError::MigrateStore {
            location: self.clone(),
            source,
        })
    }

    fn failed(&self, source: StoreError) -> AssemblyError {
        AssemblyError::OpenStore {
            location: self.clone(),
            source,
        }
    }
}

/// Copies every record of the SQLite store in `from` (an existing data directory, its key from `CAIRN_STORE_KEY` or
/// its `cairn.key`) into the PostgreSQL database `to`, which must hold no record unless `replace` (then its records
/// are replaced): resource groups, deployments with their requests and journals, secrets, the inventory, Key Vault
/// vaults and secret versions, stacks, stack what-if results and extension host operations. Leases are not copied.
/// Secrets are opened with the source's data key and sealed again with the target's. All or nothing: the copy is
/// one transaction on the target. Returns how many rows each table received.
pub async fn copy_store(
    from: &StoreLocation,
    to: &StoreLocation,
    replace: bool,
) -> Result<CopyReport, AssemblyError> {
    let (StoreLocation::DataDir(dir), StoreLocation::Postgres(target)) = (from, to) else {
        return Err(AssemblyError::UnsupportedCopy);
    };
    if !dir.join(DATABASE_FILE_NAME).is_file() {
        return Err(from.failed(StoreError::not_found(
            cairn_store::Entity::Schema,
            format!("a cairn database in {}", dir.display()),
        )));
    }
    let source = async {
        let (key, _origin) = load_existing_master_key(dir)?;
        SqliteStore::open_with(dir, &key, SqliteOptions::default()).await
    }
    .await
    .map_err(|source| from.failed(source))?;
    let copied = async {
        let target = target.open().await?;
        let report = target.import_from(&source, replace).await;
        let _ = Store::close(&target).await;
        report
    }
    .await
    .map_err(|source| AssemblyError::CopyStore {
        to: to.clone(),
        source,
    });
    let _ = Store::close(&source).await;
    copied
}

impl FromStr for StoreLocation {
    type Err = AssemblyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        StoreLocation::parse(text)
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::DataDir(path) => write!(f, "data directory {}", path.display()),
            StoreLocation::Postgres(location) => {
                write!(f, "PostgreSQL database {}", location.redacted_url())
            }
        }
    }
}

/// The scheme of `text` when it starts like a URL (`scheme://`, RFC 3986's scheme syntax). A Windows path such
/// as `C:\data` has no `//` and stays a path.
fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_data_directories() {
        for path in [
            "/var/lib/cairn",
            "relative/dir",
            "C:\\cairn",
            "dir with://inside/it",
        ] {
            assert_eq!(
                StoreLocation::parse(path).unwrap(),
                StoreLocation::DataDir(PathBuf::from(path)),
                "{path}"
            );
        }
    }

    #[test]
    fn postgres_urls_select_postgresql_and_are_shown_without_credentials() {
        for url in [
            "postgres://cairn:hunter2@db.example:5432/cairn?sslmode=require&password=hunter2",
            "PostgreSQL://cairn:hunter2@db.example:5432/cairn",
        ] {
            let location = StoreLocation::parse(url).unwrap();
            let StoreLocation::Postgres(postgres) = &location else {
                panic!("{location:?}");
            };
            assert_eq!(postgres.url(), url);
            let shown = location.to_string();
            assert!(shown.ends_with("://cairn@db.example:5432/cairn"), "{shown}");
            assert!(shown.starts_with("PostgreSQL database "), "{shown}");
            for text in [shown, format!("{location:?}")] {
                assert!(!text.contains("hunter2"), "{text}");
            }
            assert_eq!(location.as_data_dir(), None);
        }
        let keyed = StoreLocation::parse("postgres://db/cairn")
            .unwrap()
            .with_key_file(Some("/etc/cairn/key".into()));
        let StoreLocation::Postgres(postgres) = &keyed else {
            panic!("{keyed:?}");
        };
        assert_eq!(postgres.key_file(), Some(Path::new("/etc/cairn/key")));
        assert_eq!(postgres.redacted_url(), "postgres://db/cairn");
        assert_eq!(
            StoreLocation::data_dir("/d").with_key_file(Some("/k".into())),
            StoreLocation::data_dir("/d"),
            "a data directory keeps its own key"
        );
    }

    #[test]
    fn other_store_urls_are_refused_and_their_credentials_are_not_repeated() {
        let error = StoreLocation::parse("MySQL://cairn:hunter2@db.example/cairn").unwrap_err();
        assert!(
            matches!(&error, AssemblyError::UnsupportedStore { scheme } if scheme == "mysql"),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("mysql://"), "{message}");
        assert!(message.contains("postgres://"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
        assert!(!format!("{error:?}").contains("hunter2"));
        assert!("sqlite://x".parse::<StoreLocation>().is_err());
    }

    #[tokio::test]
    async fn a_copy_goes_from_an_existing_data_dir_with_its_key_into_postgres() {
        let dir = tempfile::tempdir().unwrap();
        let postgres = StoreLocation::parse("postgres://u:hunter2@127.0.0.1:1/cairn").unwrap();
        let data_dir = StoreLocation::data_dir(dir.path());
        assert!(matches!(
            copy_store(&postgres, &data_dir, false).await,
            Err(AssemblyError::UnsupportedCopy)
        ));
        let error = copy_store(&data_dir, &postgres, false)
            .await
            .expect_err("no database in the directory");
        assert!(
            matches!(&error, AssemblyError::OpenStore { source, .. } if source.is_not_found()),
            "{error:?}"
        );

        SqliteStore::migrate(dir.path()).await.unwrap();
        let error = copy_store(&data_dir, &postgres, false)
            .await
            .expect_err("no key for the database");
        let message = format!("{:?}", std::error::Error::source(&error));
        assert!(message.contains("cairn.key"), "{message}");
        assert!(
            !dir.path().join(cairn_store::crypto::KEY_FILE_NAME).exists(),
            "a copy never makes up the source's key"
        );
    }

    #[test]
    fn a_data_dir_is_shown_as_one() {
        let location = StoreLocation::data_dir("/srv/cairn");
        assert_eq!(location.to_string(), "data directory /srv/cairn");
        assert_eq!(location.as_data_dir(), Some(Path::new("/srv/cairn")));
    }
}
