//! Secrets at rest in a SQLite data directory: no plaintext secret in any file, the key file and directory
//! permissions, wrong keys, tampered and swapped ciphertexts, and master-key rotation.

use std::path::Path;

use cairn_store::conformance::{read_canary_everywhere, write_canary_everywhere};
use cairn_store::crypto::{KEY_FILE_NAME, MasterKey};
use cairn_store::{
    ExposeSecret, KeyVaultStore, SecretOwner, SecretStore, SecretString, Store, StoreError,
    Timestamp,
};
use cairn_store_sqlite::{DATABASE_FILE_NAME, SqliteOptions, SqliteStore};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

const CANARY: &str = "canary-5f3e9a1c-never-on-disk";

/// Every file under `dir` whose bytes contain `needle`, as paths.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        for entry in std::fs::read_dir(&path).expect("read dir") {
            let entry = entry.expect("dir entry");
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                // SQLite may remove a transient file (a rollback journal) between listing and reading.
                let bytes = match std::fs::read(&path) {
                    Ok(bytes) => bytes,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => panic!("read {}: {e}", path.display()),
                };
                if bytes.windows(needle.len()).any(|window| window == needle) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

/// The canary in the encodings a careless implementation might write: plain, base64 and hex.
fn canary_encodings() -> Vec<Vec<u8>> {
    vec![
        CANARY.as_bytes().to_vec(),
        data_encoding::BASE64.encode(CANARY.as_bytes()).into_bytes(),
        data_encoding::HEXLOWER
            .encode(CANARY.as_bytes())
            .into_bytes(),
    ]
}

fn assert_no_canary_in(dir: &Path) {
    for encoding in canary_encodings() {
        let found = files_containing(dir, &encoding);
        assert!(found.is_empty(), "canary found in {found:?}");
    }
}

/// Opens the raw database beside the store, for tampering.
async fn raw_pool(data_dir: &Path) -> sqlx::SqlitePool {
    let options = SqliteConnectOptions::new().filename(data_dir.join(DATABASE_FILE_NAME));
    SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .expect("raw open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_plaintext_secret_in_any_file_of_the_data_dir() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("data");
    let store = SqliteStore::open(&data_dir).await?;
    let refs = write_canary_everywhere(&store, CANARY).await;
    read_canary_everywhere(&store, &refs, CANARY).await;
    // The control: the scan does find text the store keeps in plaintext (the scope of the canary deployment).
    assert!(
        !files_containing(&data_dir, b"rg-conformance").is_empty(),
        "the scan sees the database files"
    );
    let wal = data_dir.join(format!("{DATABASE_FILE_NAME}-wal"));
    assert!(
        wal.exists() && std::fs::metadata(&wal)?.len() > 0,
        "writes are still in the WAL"
    );
    assert_no_canary_in(&data_dir);

    // Dropped without closing: the WAL stays behind and still holds no plaintext.
    drop(store);
    assert_no_canary_in(&data_dir);

    // Checkpointed into the main file and closed.
    let store = SqliteStore::open(&data_dir).await?;
    read_canary_everywhere(&store, &refs, CANARY).await;
    store.close().await?;
    assert_no_canary_in(&data_dir);
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn data_dir_is_0700_and_key_file_0600() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("nested").join("data");
    let store = SqliteStore::open(&data_dir).await?;
    store.close().await?;
    assert_eq!(
        std::fs::metadata(&data_dir)?.permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(data_dir.join(KEY_FILE_NAME))?
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    Ok(())
}

#[tokio::test]
async fn reopening_with_the_key_file_reads_secrets_back() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let owner = SecretOwner::Other {
        kind: "test".into(),
        id: "1".into(),
    };
    let store = SqliteStore::open(dir.path()).await?;
    let reference = store
        .put_secret(
            &owner,
            "s",
            &SecretString::from(CANARY.to_owned()),
            Timestamp::from_unix_millis(1),
        )
        .await?;
    store.close().await?;
    let store = SqliteStore::open(dir.path()).await?;
    assert_eq!(store.get_secret(&reference).await?.expose_secret(), CANARY);
    Ok(())
}

#[tokio::test]
async fn a_wrong_master_key_is_refused_at_open() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let right = MasterKey::generate()?;
    let store = SqliteStore::open_with(dir.path(), &right, SqliteOptions::default()).await?;
    store.close().await?;
    let wrong = MasterKey::generate()?;
    let error = SqliteStore::open_with(dir.path(), &wrong, SqliteOptions::default())
        .await
        .expect_err("wrong key");
    assert!(matches!(error, StoreError::Crypto(_)), "{error:?}");
    assert_eq!(error.arm_code(), "StoreEncryptionFailure");
    Ok(())
}

#[tokio::test]
async fn tampered_and_swapped_ciphertexts_fail_to_decrypt() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let key = MasterKey::generate()?;
    let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;
    let owner = SecretOwner::Other {
        kind: "test".into(),
        id: "1".into(),
    };
    let now = Timestamp::from_unix_millis(1);
    let first = store
        .put_secret(&owner, "a", &SecretString::from(CANARY.to_owned()), now)
        .await?;
    let second = store
        .put_secret(&owner, "b", &SecretString::from("other".to_owned()), now)
        .await?;
    let refs = write_canary_everywhere(&store, CANARY).await;
    store.close().await?;

    let raw = raw_pool(dir.path()).await;
    // Flip one ciphertext byte of the first secret.
    let tampered: Vec<u8> = sqlx::query_scalar("SELECT value FROM secrets WHERE id = ?1")
        .bind(first.as_str())
        .fetch_one(&raw)
        .await?;
    let mut flipped: Vec<u8> = tampered.clone();
    flipped[30] ^= 0x5a;
    sqlx::query("UPDATE secrets SET value = ?2 WHERE id = ?1")
        .bind(first.as_str())
        .bind(flipped)
        .execute(&raw)
        .await?;
    // Move the second secret's ciphertext onto the config secret's row: valid ciphertext, wrong place.
    let moved: Vec<u8> = sqlx::query_scalar("SELECT value FROM secrets WHERE id = ?1")
        .bind(second.as_str())
        .fetch_one(&raw)
        .await?;
    sqlx::query("UPDATE secrets SET value = ?2 WHERE id = ?1")
        .bind(refs.config_secret.as_str())
        .bind(moved)
        .execute(&raw)
        .await?;
    // Swap the vault secret's two versions.
    let versions: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT seq, value FROM key_vault_secret_versions ORDER BY seq")
            .fetch_all(&raw)
            .await?;
    assert_eq!(versions.len(), 2);
    for (index, (seq, _)) in versions.iter().enumerate() {
        sqlx::query("UPDATE key_vault_secret_versions SET value = ?2 WHERE seq = ?1")
            .bind(seq)
            .bind(&versions[1 - index].1)
            .execute(&raw)
            .await?;
    }
    raw.close().await;

    let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;
    for (what, result) in [
        ("flipped byte", store.get_secret(&first).await),
        ("moved row", store.get_secret(&refs.config_secret).await),
    ] {
        let error = result.expect_err(what);
        assert!(matches!(error, StoreError::Crypto(_)), "{what}: {error:?}");
        assert!(
            !error.to_string().contains(CANARY),
            "{what}: the error leaks the secret"
        );
    }
    let error = store
        .get_vault_secret(&refs.vault_id, &refs.vault_secret_name, None)
        .await
        .expect_err("swapped versions");
    assert!(matches!(error, StoreError::Crypto(_)), "{error:?}");
    assert_eq!(
        store.get_secret(&second).await?.expose_secret(),
        "other",
        "untouched rows still open"
    );
    assert_eq!(
        store
            .get_secret(&refs.secure_parameter)
            .await?
            .expose_secret(),
        CANARY
    );
    Ok(())
}

#[tokio::test]
async fn master_key_rotation_keeps_secrets_readable() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let old = MasterKey::generate()?;
    let store = SqliteStore::open_with(dir.path(), &old, SqliteOptions::default()).await?;
    let owner = SecretOwner::Other {
        kind: "test".into(),
        id: "1".into(),
    };
    let reference = store
        .put_secret(
            &owner,
            "s",
            &SecretString::from(CANARY.to_owned()),
            Timestamp::from_unix_millis(1),
        )
        .await?;
    let new = MasterKey::generate()?;
    let wrong = MasterKey::generate()?;
    assert!(matches!(
        store.rotate_master_key(&wrong, &new).await,
        Err(StoreError::Crypto(_))
    ));
    store.rotate_master_key(&old, &new).await?;
    store.close().await?;
    assert!(matches!(
        SqliteStore::open_with(dir.path(), &old, SqliteOptions::default()).await,
        Err(StoreError::Crypto(_))
    ));
    let store = SqliteStore::open_with(dir.path(), &new, SqliteOptions::default()).await?;
    assert_eq!(store.get_secret(&reference).await?.expose_secret(), CANARY);
    Ok(())
}

#[tokio::test]
async fn store_debug_output_shows_no_key_material() -> anyhow::Result<()> {
    let key = MasterKey::from_bytes([0x41; 32]);
    let store = SqliteStore::open_in_memory(&key).await?;
    let debug = format!("{store:?}");
    assert!(debug.starts_with("SqliteStore"), "{debug}");
    assert!(
        !debug.contains("AAAA") && !debug.contains("65, 65"),
        "{debug}"
    );
    Ok(())
}
