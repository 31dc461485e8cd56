//! Where the store lives, and opening it: the only code outside the store crates (and their tests) that names
//! a store backend.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use cairn_store::Store;
use cairn_store_sqlite::SqliteStore;

use crate::AssemblyError;

/// Where cairn keeps its state. Today a data directory (the embedded SQLite store: `cairn.db`, `cairn.key`);
/// a store reached by URL (e.g. `postgres://…`) becomes one more variant, chosen in [`StoreLocation::open`] and
/// nowhere else.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreLocation {
    /// The embedded SQLite store in this directory, created (mode 0700 on Unix) when missing.
    DataDir(PathBuf),
}

impl StoreLocation {
    /// The embedded store in `path`.
    pub fn data_dir(path: impl Into<PathBuf>) -> Self {
        StoreLocation::DataDir(path.into())
    }

    /// Reads a location as a flag or environment variable gives it: a URL (`scheme://…`) names a store server,
    /// which is refused with [`AssemblyError::UnsupportedStore`] until one is supported; anything else is a data
    /// directory.
    pub fn parse(text: &str) -> Result<Self, AssemblyError> {
        match url_scheme(text) {
            Some(scheme) => Err(AssemblyError::UnsupportedStore {
                scheme: scheme.to_ascii_lowercase(),
            }),
            None => Ok(StoreLocation::DataDir(PathBuf::from(text))),
        }
    }

    /// The data directory, when the store lives in one (an extension registry file may sit beside it).
    pub fn as_data_dir(&self) -> Option<&Path> {
        match self {
            StoreLocation::DataDir(path) => Some(path),
        }
    }

    /// Opens the store (creating and migrating it when new).
    pub async fn open(&self) -> Result<Arc<dyn Store>, AssemblyError> {
        match self {
            StoreLocation::DataDir(path) => match SqliteStore::open(path).await {
                Ok(store) => Ok(Arc::new(store)),
                Err(source) => Err(AssemblyError::OpenStore {
                    location: self.clone(),
                    source,
                }),
            },
        }
    }
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
    fn store_urls_are_not_supported_yet_and_their_credentials_are_not_repeated() {
        let error = StoreLocation::parse("Postgres://cairn:hunter2@db.example/cairn").unwrap_err();
        assert!(
            matches!(&error, AssemblyError::UnsupportedStore { scheme } if scheme == "postgres"),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("not supported yet"), "{message}");
        assert!(message.contains("postgres://"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
        assert!(!format!("{error:?}").contains("hunter2"));
        assert!("sqlite://x".parse::<StoreLocation>().is_err());
    }

    #[test]
    fn a_data_dir_is_shown_as_one() {
        let location = StoreLocation::data_dir("/srv/cairn");
        assert_eq!(location.to_string(), "data directory /srv/cairn");
        assert_eq!(location.as_data_dir(), Some(Path::new("/srv/cairn")));
    }
}
