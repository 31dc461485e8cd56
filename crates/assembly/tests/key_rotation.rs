//! Rotating a data directory's master key, and a rotation stopped half way: whichever step it stopped after, the
//! directory opens again with a key that opens its secrets, and no key the store needs is lost.

use std::path::Path;

use cairn_assembly::{NEXT_KEY_FILE_NAME, RotatedKey, StoreLocation};
use cairn_store::crypto::{MasterKey, read_master_key_file, write_key_file};
use cairn_store::{ExposeSecret as _, SecretOwner, SecretRef, SecretString, Store, Timestamp};
use cairn_store_sqlite::{SqliteOptions, SqliteStore};

fn owner() -> SecretOwner {
    SecretOwner::Other {
        kind: "test".into(),
        id: "rotation".into(),
    }
}

/// A data directory holding one secret; returns its reference.
async fn directory_with_a_secret(dir: &Path) -> SecretRef {
    let store = StoreLocation::data_dir(dir).open().await.expect("open");
    let reference = store
        .put_secret(
            &owner(),
            "token",
            &SecretString::from("s3cret".to_owned()),
            Timestamp::now(),
        )
        .await
        .expect("put");
    store.close().await.unwrap();
    reference
}

/// Opens the directory as every command does and reads the secret back.
async fn secret_opens(dir: &Path, reference: &SecretRef) {
    let store = StoreLocation::data_dir(dir).open().await.expect("open");
    let value = store.get_secret(reference).await.expect("the secret opens");
    assert_eq!(value.expose_secret(), "s3cret");
    store.close().await.unwrap();
}

fn key_in(dir: &Path) -> MasterKey {
    read_master_key_file(&dir.join("cairn.key"))
        .unwrap()
        .expect("cairn.key")
}

fn same(a: &MasterKey, b: &MasterKey) -> bool {
    a.to_base64().expose_secret() == b.to_base64().expose_secret()
}

#[tokio::test]
async fn a_rotation_puts_a_fresh_key_in_cairn_key_and_the_old_one_stops_opening() {
    let dir = tempfile::tempdir().unwrap();
    let reference = directory_with_a_secret(dir.path()).await;
    let old = key_in(dir.path());

    let rotated = StoreLocation::data_dir(dir.path())
        .rotate_master_key(None)
        .await
        .expect("rotate");
    assert_eq!(rotated, RotatedKey::KeyFile(dir.path().join("cairn.key")));
    assert!(!same(&old, &key_in(dir.path())));
    assert!(!dir.path().join(NEXT_KEY_FILE_NAME).exists());
    secret_opens(dir.path(), &reference).await;
    let refused = SqliteStore::open_with(dir.path(), &old, SqliteOptions::default()).await;
    assert!(
        matches!(refused, Err(cairn_store::StoreError::Crypto(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_rotation_stopped_after_the_rewrap_is_finished_when_the_directory_opens() {
    let dir = tempfile::tempdir().unwrap();
    let reference = directory_with_a_secret(dir.path()).await;
    let old = key_in(dir.path());
    // What a rotation leaves when its process dies between rewrapping and renaming: the store wrapped by the next
    // key, which is only in cairn.key.next.
    let next = MasterKey::generate().unwrap();
    write_key_file(&dir.path().join(NEXT_KEY_FILE_NAME), &next).unwrap();
    let store = SqliteStore::open_with(dir.path(), &old, SqliteOptions::default())
        .await
        .unwrap();
    store.rotate_master_key(&old, &next).await.unwrap();
    store.close().await.unwrap();

    secret_opens(dir.path(), &reference).await;
    assert!(
        same(&next, &key_in(dir.path())),
        "cairn.key is the next key"
    );
    assert!(!dir.path().join(NEXT_KEY_FILE_NAME).exists());
}

#[tokio::test]
async fn a_rotation_stopped_before_the_rewrap_leaves_the_old_key_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let reference = directory_with_a_secret(dir.path()).await;
    let old = key_in(dir.path());
    // Died after writing cairn.key.next, before the rewrap: the next key opens nothing and is dropped.
    write_key_file(
        &dir.path().join(NEXT_KEY_FILE_NAME),
        &MasterKey::generate().unwrap(),
    )
    .unwrap();

    secret_opens(dir.path(), &reference).await;
    assert!(same(&old, &key_in(dir.path())));
    assert!(!dir.path().join(NEXT_KEY_FILE_NAME).exists());

    // And rotating again works from there.
    StoreLocation::data_dir(dir.path())
        .rotate_master_key(None)
        .await
        .expect("rotate");
    secret_opens(dir.path(), &reference).await;
}
