//! `cairn store rotate-key` on a data directory and on a real PostgreSQL database: a secret set before the rotation
//! reads back after it with the new key, the old key no longer opens the store, and the new key is kept where the
//! servers find it (the directory's `cairn.key`, or the file the operator names, mode 0600).

use std::path::Path;
use std::process::Output;

use cairn_store::ExposeSecret as _;
use cairn_testpg::TestPostgres;
use store_cli::{cairn, database, text};

mod store_cli;

/// Runs `args` and expects exit code 0; returns stdout.
fn ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = cairn(args, env);
    assert_eq!(
        out.status.code(),
        Some(0),
        "cairn {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A vault `kv` in group `app` holding the secret `pw`.
fn set_secret(env: &[(&str, &str)], value: &str) {
    ok(&["group", "create", "-n", "app", "-l", "local"], env);
    ok(&["keyvault", "create", "-n", "kv", "-g", "app"], env);
    ok(
        &[
            "keyvault",
            "secret",
            "set",
            "--vault-name",
            "kv",
            "-n",
            "pw",
            "--value",
            value,
        ],
        env,
    );
}

fn show_secret(env: &[(&str, &str)]) -> Output {
    cairn(
        &[
            "keyvault",
            "secret",
            "show",
            "--vault-name",
            "kv",
            "-n",
            "pw",
            "--query",
            "value",
            "-o",
            "tsv",
        ],
        env,
    )
}

fn assert_refused_as_the_wrong_key(out: &Output) {
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("the master key does not match"),
        "{}",
        text(&out.stderr)
    );
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_data_directory_gets_a_fresh_key_in_its_key_file() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().to_str().unwrap();
    let env = [("CAIRN_HOME", dir)];
    set_secret(&env, "before-rotation");
    let old_key = std::fs::read_to_string(home.path().join("cairn.key")).unwrap();

    let stdout = ok(&["store", "rotate-key"], &env);
    assert!(
        stdout.contains("rotated the master key of the cairn data directory")
            && stdout.contains("cairn.key"),
        "{stdout}"
    );
    let new_key = std::fs::read_to_string(home.path().join("cairn.key")).unwrap();
    assert_ne!(old_key, new_key);
    assert!(!home.path().join("cairn.key.next").exists());
    #[cfg(unix)]
    assert_eq!(mode(&home.path().join("cairn.key")), 0o600);
    assert!(!stdout.contains(new_key.trim()) && !stdout.contains(old_key.trim()));

    let out = show_secret(&env);
    assert_eq!(
        text(&out.stdout).trim(),
        "before-rotation",
        "{}",
        text(&out.stderr)
    );
    // The old key, given the way an operator would, no longer opens the store.
    assert_refused_as_the_wrong_key(&show_secret(&[
        ("CAIRN_HOME", dir),
        ("CAIRN_STORE_KEY", old_key.trim()),
    ]));
}

#[test]
fn a_data_directory_keyed_from_the_environment_needs_a_file_for_the_new_key() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().to_str().unwrap();
    let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let env = [("CAIRN_HOME", dir), ("CAIRN_STORE_KEY", key)];
    set_secret(&env, "from-env");

    let out = cairn(&["store", "rotate-key"], &env);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("comes from CAIRN_STORE_KEY: name the file for the new key"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&show_secret(&env).stdout).trim(), "from-env");

    let new_file = home.path().join("next.key");
    let stdout = ok(
        &[
            "store",
            "rotate-key",
            "--new-key-file",
            new_file.to_str().unwrap(),
        ],
        &env,
    );
    assert!(stdout.contains("give it to every server"), "{stdout}");
    let new_key = std::fs::read_to_string(&new_file).unwrap();
    assert_refused_as_the_wrong_key(&show_secret(&env));
    let out = show_secret(&[("CAIRN_HOME", dir), ("CAIRN_STORE_KEY", new_key.trim())]);
    assert_eq!(
        text(&out.stdout).trim(),
        "from-env",
        "{}",
        text(&out.stderr)
    );
}

/// `cairn store rotate-key` on the PostgreSQL store at `url` with the current key in `key_file`.
fn rotate_postgres(url: &str, key_file: &Path, new_key_file: Option<&Path>) -> Output {
    let mut args = vec!["store", "rotate-key", "--store", url];
    args.extend(["--key-file", key_file.to_str().unwrap()]);
    if let Some(new) = new_key_file {
        args.extend(["--new-key-file", new.to_str().unwrap()]);
    }
    cairn(&args, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_store_gets_the_key_in_the_file_named_and_the_old_key_stops_working() {
    let cluster = TestPostgres::start();
    let url = database(&cluster, "rotated").await;
    // A data directory with a secret, copied into the database with its key (as docs/operations.md moves one).
    let home = tempfile::tempdir().unwrap();
    let env = [("CAIRN_HOME", home.path().to_str().unwrap())];
    set_secret(&env, "on-postgres");
    let old_file = home.path().join("cairn.key");
    ok(
        &[
            "store",
            "copy",
            "--from",
            home.path().to_str().unwrap(),
            "--to",
            &url,
            "--to-key-file",
            old_file.to_str().unwrap(),
        ],
        &[],
    );
    let keys = tempfile::tempdir().unwrap();
    let new_file = keys.path().join("cairn-2.key");

    // A PostgreSQL store keeps no key: without a file for the new one, nothing changes.
    let out = rotate_postgres(&url, &old_file, None);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        text(&out.stderr).contains("name the file for the new key"),
        "{}",
        text(&out.stderr)
    );

    let out = rotate_postgres(&url, &old_file, Some(&new_file));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("PostgreSQL database postgres://postgres@")
            && stdout.contains("give it to every server"),
        "{stdout}"
    );
    assert!(!stdout.contains(cluster.password()), "{stdout}");
    #[cfg(unix)]
    assert_eq!(mode(&new_file), 0o600);

    // The old key no longer opens the store; the new one does, and the copied secret opens with it.
    assert_refused_as_the_wrong_key(&rotate_postgres(
        &url,
        &old_file,
        Some(&keys.path().join("unused.key")),
    ));
    let store = cairn_assembly::StoreLocation::parse(&url)
        .unwrap()
        .with_key_file(Some(new_file.clone()))
        .open()
        .await
        .expect("the new key opens the store");
    let secret = store
        .get_vault_secret(
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/app/providers/Microsoft.KeyVault/vaults/kv",
            "pw",
            None,
        )
        .await
        .expect("read")
        .expect("the copied secret");
    assert_eq!(secret.value.expose_secret(), "on-postgres");
    store.close().await.unwrap();
}
