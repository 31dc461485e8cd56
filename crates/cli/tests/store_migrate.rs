//! `cairn store migrate` on a data directory and on a real PostgreSQL database, and how `cairn serve --store URL`
//! finds (or refuses to invent) the PostgreSQL store's master key.

use cairn_testpg::TestPostgres;
use sqlx::PgPool;
use std::path::Path;
use std::process::Command;
use store_cli::{cairn, database, text};

mod store_cli;

/// The migrations of this build (both backends have the same, a store test checks): their numbers.
fn migration_numbers() -> Vec<u32> {
    std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../store-sqlite/migrations"
    ))
    .expect("the migrations")
    .filter_map(|entry| {
        let name = entry.ok()?.file_name().to_string_lossy().into_owned();
        name.strip_suffix(".sql")?.split('_').next()?.parse().ok()
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_migrate_applies_the_schema_and_says_from_which_version_to_which() {
    let numbers = migration_numbers();
    let latest = numbers.iter().max().copied().expect("migrations");
    let cluster = TestPostgres::start();
    let url = database(&cluster, "migrated").await;
    let out = cairn(&["store", "migrate", "--store", &url], &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("migrated the cairn PostgreSQL database postgres://postgres@")
            && stdout.contains(&format!("from schema version 0 to {latest}")),
        "{stdout}"
    );
    assert!(!stdout.contains(cluster.password()), "{stdout}");

    // Through $CAIRN_STORE, a second time: nothing to do.
    let out = cairn(&["store", "migrate"], &[("CAIRN_STORE", url.as_str())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!(
            "is at schema version {latest}: nothing to migrate"
        )),
        "{stdout}"
    );
    let pool = PgPool::connect(&url).await.expect("connect");
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM schema_migrations")
        .fetch_one(&pool)
        .await
        .expect("schema_migrations");
    assert_eq!(applied, i64::try_from(numbers.len()).expect("a count"));
    pool.close().await;

    // A data directory: the embedded store's schema, and a mistyped directory is not created.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = cairn(
        &["store", "migrate", "--store", dir.path().to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("from schema version 0 to {latest}")),
        "{}",
        text(&out.stdout)
    );
    assert!(dir.path().join("cairn.db").is_file());
    assert!(
        !dir.path().join("cairn.key").exists(),
        "migrating needs no key"
    );
    let missing = dir.path().join("missing");
    let out = cairn(
        &["store", "migrate", "--store", missing.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!missing.exists());

    // A wrong password fails without being repeated.
    let wrong = url.replace(cluster.password(), "not-the-password-42");
    let out = cairn(&["store", "migrate", "--store", &wrong], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot migrate the cairn PostgreSQL database"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-the-password-42"), "{stderr}");
}

/// Without a master key a PostgreSQL store is refused with a message saying how to give one, and the database gets
/// no key; with a key file (flag or `$CAIRN_STORE_KEY_FILE`) or `$CAIRN_STORE_KEY` the server starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_postgres_needs_a_master_key_and_never_invents_one() {
    let cluster = TestPostgres::start();
    let url = database(&cluster, "keyless").await;
    let out = cairn(&["serve", "--listen", "127.0.0.1:0", "--store", &url], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot open the cairn PostgreSQL database")
            && stderr.contains("CAIRN_STORE_KEY")
            && stderr.contains("CAIRN_STORE_KEY_FILE"),
        "{stderr}"
    );
    assert!(!stderr.contains(cluster.password()), "{stderr}");
    let pool = PgPool::connect(&url).await.expect("connect");
    let key_table: Option<String> = sqlx::query_scalar("SELECT to_regclass('store_keys')::text")
        .fetch_one(&pool)
        .await
        .expect("catalog");
    assert_eq!(key_table, None, "nothing was written, least of all a key");

    let missing = Path::new("/nonexistent/cairn.key");
    let out = cairn(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            &url,
            "--store-key-file",
            missing.to_str().unwrap(),
        ],
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent/cairn.key"), "{stderr}");

    // A key file through the environment: the server opens the store (and creates its data key there, wrapped).
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("cairn.key");
    std::fs::write(&key_file, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n").expect("key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let mut server = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env_remove("CAIRN_STORE_KEY")
        .env("CAIRN_STORE_KEY_FILE", &key_file)
        .env("CAIRN_STORE", &url)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let stdout = server.stdout.take().expect("stdout");
    let line = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .next()
        .expect("a line")
        .expect("utf-8");
    let _ = server.kill();
    let _ = server.wait();
    assert!(line.contains("listening on"), "{line}");
    let keys: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM store_keys")
        .fetch_one(&pool)
        .await
        .expect("store_keys");
    assert_eq!(keys, 1, "one wrapped data key");
    let wrapped: Vec<u8> = sqlx::query_scalar("SELECT wrapped_key FROM store_keys")
        .fetch_one(&pool)
        .await
        .expect("wrapped");
    let master = [
        0_u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
        24, 25, 26, 27, 28, 29, 30, 31,
    ];
    assert!(
        !wrapped.windows(master.len()).any(|w| w == master),
        "the master key is not in the database"
    );
    pool.close().await;
}
