//! Rotating a store's master key: the data key that encrypts the records is rewrapped (one row changes), and the
//! new master key is put where the store's servers find it, without a moment in which no kept key opens the store.
//!
//! A data directory whose key is its `cairn.key` gets the new key through `cairn.key.next`: written and synced
//! before the data key is rewrapped, renamed over `cairn.key` after. A process stopped between the two leaves a
//! store wrapped by the next key; opening the directory (or rotating again) finishes the rename, and a next key the
//! store is not wrapped by (stopped before the rewrap) is removed. A store whose key comes from outside the
//! directory (`CAIRN_STORE_KEY`, or any PostgreSQL store) gets its new key in a file the operator names, which is
//! written before the rewrap when it does not exist yet.

use std::path::{Path, PathBuf};

use cairn_store::crypto::{
    KEY_ENV_VAR, KEY_FILE_NAME, KeyOrigin, MasterKey, load_existing_master_key,
    load_server_master_key, read_master_key_file, write_key_file,
};
use cairn_store::{Store, StoreError, StoreResult};
use cairn_store_postgres::PostgresStore;
use cairn_store_sqlite::{DATABASE_FILE_NAME, SqliteOptions, SqliteStore};

use crate::{AssemblyError, PostgresLocation, StoreLocation};

/// Where a data directory keeps its new master key while a rotation is under way.
pub const NEXT_KEY_FILE_NAME: &str = "cairn.key.next";

/// Where the new master key is after a rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RotatedKey {
    /// In the data directory's `cairn.key`, where the store finds it by itself.
    KeyFile(PathBuf),
    /// In this file, and every server of the store must now be given it (a key-file option, `CAIRN_STORE_KEY` or
    /// `CAIRN_STORE_KEY_FILE`): servers running keep working (they hold the data key), a server started with the
    /// old key is refused.
    GiveToServers(PathBuf),
}

impl StoreLocation {
    /// Rewraps the store's data key with a new master key: the key in `new_key_file` (a fresh one written there
    /// when the file does not exist), or for a data directory keyed by its `cairn.key` and no file given, a fresh
    /// key. The current key comes from where opening the store takes it. Records are not rewritten.
    pub async fn rotate_master_key(
        &self,
        new_key_file: Option<&Path>,
    ) -> Result<RotatedKey, AssemblyError> {
        let rotated = match self {
            StoreLocation::DataDir(dir) => rotate_data_dir(dir, new_key_file).await,
            StoreLocation::Postgres(location) => rotate_postgres(location, new_key_file).await,
        };
        rotated.map_err(|source| AssemblyError::RotateKey {
            location: self.clone(),
            source,
        })
    }
}

async fn rotate_postgres(
    location: &PostgresLocation,
    new_key_file: Option<&Path>,
) -> StoreResult<RotatedKey> {
    let path = key_file_required(
        new_key_file,
        "a PostgreSQL store's master key is kept outside the database",
    )?;
    let (current, _origin) = load_server_master_key(location.key_file())?;
    let new = new_key(path)?;
    let store = PostgresStore::open(location.url(), &current).await?;
    let rotated = store.rotate_master_key(&current, &new).await;
    let closed = Store::close(&store).await;
    rotated.and(closed)?;
    Ok(RotatedKey::GiveToServers(path.to_owned()))
}

async fn rotate_data_dir(dir: &Path, new_key_file: Option<&Path>) -> StoreResult<RotatedKey> {
    if !dir.join(DATABASE_FILE_NAME).is_file() {
        return Err(StoreError::not_found(
            cairn_store::Entity::Schema,
            format!("a cairn database in {}", dir.display()),
        ));
    }
    settle_next_key(dir).await?;
    let (current, origin) = load_existing_master_key(dir)?;
    if origin == KeyOrigin::Environment {
        // The key is not the directory's to replace: the new one goes where the operator says.
        let path = key_file_required(
            new_key_file,
            &format!("the store's master key comes from {KEY_ENV_VAR}"),
        )?;
        let new = new_key(path)?;
        rewrap_data_dir(dir, &current, &new).await?;
        return Ok(RotatedKey::GiveToServers(path.to_owned()));
    }
    let new = match new_key_file {
        Some(path) => new_key(path)?,
        None => MasterKey::generate()?,
    };
    let next = dir.join(NEXT_KEY_FILE_NAME);
    write_key_file(&next, &new)?;
    sync_dir(dir)?;
    rewrap_data_dir(dir, &current, &new).await?;
    let key_file = dir.join(KEY_FILE_NAME);
    install_next_key(dir)?;
    Ok(RotatedKey::KeyFile(key_file))
}

/// The file for the new key of a store whose key is kept outside it (`why`).
fn key_file_required<'a>(new_key_file: Option<&'a Path>, why: &str) -> StoreResult<&'a Path> {
    new_key_file.ok_or_else(|| {
        StoreError::Crypto(format!(
            "{why}: name the file for the new key (a fresh key is written there when it does not exist)"
        ))
    })
}

/// The key in `path`, or a fresh one written there (mode 0600, synced) when there is no such file.
fn new_key(path: &Path) -> StoreResult<MasterKey> {
    if let Some(key) = read_master_key_file(path)? {
        return Ok(key);
    }
    let key = MasterKey::generate()?;
    write_key_file(path, &key)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(key)
}

async fn rewrap_data_dir(dir: &Path, current: &MasterKey, new: &MasterKey) -> StoreResult<()> {
    let store = SqliteStore::open_with(dir, current, SqliteOptions::default()).await?;
    let rotated = store.rotate_master_key(current, new).await;
    let closed = Store::close(&store).await;
    rotated.and(closed)
}

/// Finishes or undoes a rotation of the data directory `dir` that stopped half way (see the module docs). Nothing
/// to do when the directory's key comes from `CAIRN_STORE_KEY` or no rotation was under way.
pub(crate) async fn settle_next_key(dir: &Path) -> StoreResult<()> {
    let next_path = dir.join(NEXT_KEY_FILE_NAME);
    if std::env::var_os(KEY_ENV_VAR).is_some() || !dir.join(DATABASE_FILE_NAME).is_file() {
        return Ok(());
    }
    let Some(next) = read_master_key_file(&next_path)? else {
        return Ok(());
    };
    match SqliteStore::open_with(dir, &next, SqliteOptions::default()).await {
        Ok(store) => {
            Store::close(&store).await?;
            install_next_key(dir)
        }
        Err(StoreError::Crypto(_)) => {
            std::fs::remove_file(&next_path).map_err(|e| io_error(&next_path, e))?;
            sync_dir(dir)
        }
        Err(error) => Err(error),
    }
}

fn install_next_key(dir: &Path) -> StoreResult<()> {
    let next = dir.join(NEXT_KEY_FILE_NAME);
    std::fs::rename(&next, dir.join(KEY_FILE_NAME)).map_err(|e| io_error(&next, e))?;
    sync_dir(dir)
}

/// Makes a directory's entries (a created, renamed or removed key file) durable.
fn sync_dir(dir: &Path) -> StoreResult<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

fn io_error(path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Crypto(format!("{}: {error}", path.display()))
}
