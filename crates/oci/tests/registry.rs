//! Against a real registry (Debian's docker-registry, started per test): publish and pull round trip with
//! every blob cached by digest, a tampered blob refused, basic auth with right and wrong credentials, a moved
//! tag refused until re-locked, and an untrusted registry refused before any request.

use std::path::Path;

use cairn_oci::lock::{LockFile, Pin, resolve_pin};
use cairn_oci::{
    Artifact, ArtifactRef, Cache, Credentials, OciClient, OciError, RegistryPolicy, TypesPackage,
};
use cairn_testregistry::TestRegistry;

fn types(dir: &Path, version: &str) -> TypesPackage {
    std::fs::write(
        dir.join("index.json"),
        format!(
            r##"{{ "resources": {{ "File@1.0.0": {{ "$ref": "types.json#/1" }} }},
                  "settings": {{ "name": "Widgets", "version": "{version}", "isSingleton": false }} }}"##
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("types.json"),
        r##"[ { "$type": "StringType" }, { "$type": "ResourceType", "name": "File@1.0.0", "body": { "$ref": "#/0" } } ]"##,
    )
    .unwrap();
    TypesPackage::from_index(&dir.join("index.json")).unwrap()
}

fn artifact(dir: &Path, version: &str, binary: &[u8]) -> Artifact {
    Artifact::build(
        &types(dir, version),
        &[
            ("linux-x64".into(), binary.to_vec()),
            ("osx-arm64".into(), b"macho".to_vec()),
        ],
        "2026-01-01T00:00:00Z",
    )
    .unwrap()
}

fn client(cache: &Path) -> OciClient {
    OciClient::new(Cache::new(cache), RegistryPolicy::default())
        .with_env(std::sync::Arc::new(|_: &str| None))
}

#[tokio::test]
async fn publish_then_pull_checks_and_caches_every_blob() {
    let registry = TestRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let artifact = artifact(dir.path(), "1.0.0", b"#!/bin/sh\necho linux\n");
    let target = ArtifactRef::parse(
        &format!("br:{}/ext/widgets:1.0.0", registry.address()),
        None,
    )
    .unwrap();
    let cache_dir = dir.path().join("cache");
    let client = client(&cache_dir);
    let digest = client.push(&artifact, &target, false).await.unwrap();
    assert_eq!(digest, artifact.digest);
    let again = client.push(&artifact, &target, false).await.unwrap_err();
    assert!(matches!(again, OciError::Exists { .. }), "{again}");
    client.push(&artifact, &target, true).await.unwrap();

    assert_eq!(client.resolve(&target).await.unwrap(), artifact.digest);
    let pulled = client.pull(&target, "linux-x64").await.unwrap();
    assert_eq!(pulled.digest, artifact.digest);
    assert_eq!(
        pulled.config.supported_architectures.as_deref().unwrap(),
        ["linux-x64", "osx-arm64"]
    );
    assert_eq!(pulled.types.settings().unwrap()["name"], "Widgets");
    let binary = pulled.binary.unwrap();
    assert_eq!(std::fs::read(&binary).unwrap(), b"#!/bin/sh\necho linux\n");
    // Only this platform's binary was fetched.
    let mac = &pulled.manifest.binaries["osx-arm64"];
    assert!(!Cache::new(&cache_dir).contains(&mac.digest));

    // Pinned by digest and cached: no registry needed at all.
    let pinned = pulled.reference.clone();
    drop(registry);
    let cached = client.pull(&pinned, "linux-x64").await.unwrap();
    assert_eq!(cached.binary.unwrap(), binary);
    let error = client.pull(&target, "linux-x64").await.unwrap_err();
    assert!(matches!(error, OciError::Registry { .. }), "{error}");
}

#[tokio::test]
async fn a_tampered_layer_is_refused() {
    let registry = TestRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let artifact = artifact(dir.path(), "1.0.0", b"the real binary");
    let target = ArtifactRef::parse(
        &format!("br:{}/ext/widgets:1.0.0", registry.address()),
        None,
    )
    .unwrap();
    client(&dir.path().join("publisher"))
        .push(&artifact, &target, false)
        .await
        .unwrap();
    let binary = &artifact.layers[1];
    let stored = registry.blob_path(&binary.descriptor.digest);
    assert_eq!(std::fs::read(&stored).unwrap(), binary.data);
    // Same size, other bytes: only the digest can tell.
    std::fs::write(&stored, b"the evil binary").unwrap();
    let cache_dir = dir.path().join("cache");
    let error = client(&cache_dir)
        .pull(&target, "linux-x64")
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::DigestMismatch { .. }), "{error}");
    assert!(error.to_string().contains("refusing"), "{error}");
    assert!(!Cache::new(&cache_dir).contains(&binary.descriptor.digest));
}

#[tokio::test]
async fn basic_auth_needs_the_right_credentials() {
    let registry = TestRegistry::start_with_basic_auth();
    let password = registry.password().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let artifact = artifact(dir.path(), "1.0.0", b"bin");
    let target = ArtifactRef::parse(
        &format!("br:{}/ext/widgets:1.0.0", registry.address()),
        None,
    )
    .unwrap();

    let anonymous = client(&dir.path().join("a"))
        .push(&artifact, &target, false)
        .await
        .unwrap_err();
    assert!(
        matches!(anonymous, OciError::Unauthorized { .. }),
        "{anonymous}"
    );
    assert!(
        anonymous.to_string().contains("without credentials"),
        "{anonymous}"
    );

    let wrong = client(&dir.path().join("w"))
        .with_credentials(Credentials::new(
            cairn_testregistry::USER,
            "not-the-password",
            "the test",
        ))
        .pull(&target, "linux-x64")
        .await
        .unwrap_err();
    assert!(matches!(wrong, OciError::Unauthorized { .. }), "{wrong}");
    let message = wrong.to_string();
    assert!(message.contains("credentials from the test"), "{message}");
    assert!(!message.contains("not-the-password"), "{message}");

    // Right credentials, from a Docker config file as `docker login` writes it.
    let docker = dir.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    let auth = data_encoding_base64(&format!("{}:{password}", cairn_testregistry::USER));
    std::fs::write(
        docker.join("config.json"),
        format!(
            r#"{{ "auths": {{ "{}": {{ "auth": "{auth}" }} }} }}"#,
            registry.address()
        ),
    )
    .unwrap();
    let docker_dir = docker.display().to_string();
    let with_docker_config = |cache: &Path| {
        let docker_dir = docker_dir.clone();
        client(cache).with_env(std::sync::Arc::new(move |name: &str| {
            (name == "DOCKER_CONFIG").then(|| docker_dir.clone())
        }))
    };
    with_docker_config(&dir.path().join("p"))
        .push(&artifact, &target, false)
        .await
        .unwrap();
    let pulled = with_docker_config(&dir.path().join("r"))
        .pull(&target, "linux-x64")
        .await
        .unwrap();
    assert_eq!(pulled.digest, artifact.digest);
}

fn data_encoding_base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = text.as_bytes();
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test]
async fn a_moved_tag_is_refused_until_relocked() {
    let registry = TestRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let target = ArtifactRef::parse(
        &format!("br:{}/ext/widgets:1.0.0", registry.address()),
        None,
    )
    .unwrap();
    let client = client(&dir.path().join("cache"));
    let first = artifact(dir.path(), "1.0.0", b"first");
    client.push(&first, &target, false).await.unwrap();
    let lock = dir.path().join("cairn.lock.json");
    let pin = Pin::LockFile(lock.clone());
    let locked = resolve_pin(&client, "Widgets", "1.0.0", &target, &pin, false)
        .await
        .unwrap();
    assert_eq!(locked, first.digest);
    assert_eq!(
        LockFile::load(&lock)
            .unwrap()
            .get("widgets", "1.0.0")
            .unwrap()
            .digest,
        first.digest
    );
    // Same tag, new content.
    let second = artifact(dir.path(), "1.0.0", b"second");
    client.push(&second, &target, true).await.unwrap();
    let error = resolve_pin(&client, "Widgets", "1.0.0", &target, &pin, false)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::TagMoved { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&first.digest)
            && message.contains(&second.digest)
            && message.contains("--upgrade"),
        "{message}"
    );
    let upgraded = resolve_pin(&client, "Widgets", "1.0.0", &target, &pin, true)
        .await
        .unwrap();
    assert_eq!(upgraded, second.digest);
    assert_eq!(
        resolve_pin(&client, "Widgets", "1.0.0", &target, &pin, false)
            .await
            .unwrap(),
        second.digest
    );
    // A digest pin from a registry entry is used as given.
    let pinned = Pin::Digest(first.digest.clone());
    assert_eq!(
        resolve_pin(&client, "Widgets", "1.0.0", &target, &pinned, false)
            .await
            .unwrap(),
        first.digest
    );
}

#[tokio::test]
async fn untrusted_registries_and_other_artifacts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let client = client(&dir.path().join("cache"));
    let untrusted = ArtifactRef::parse("br:registry.invalid/ext/w:1.0.0", None).unwrap();
    let error = client.pull(&untrusted, "linux-x64").await.unwrap_err();
    assert!(matches!(error, OciError::Untrusted { .. }), "{error}");

    let registry = TestRegistry::start();
    let target =
        ArtifactRef::parse(&format!("br:{}/ext/none:1.0.0", registry.address()), None).unwrap();
    let error = client.pull(&target, "linux-x64").await.unwrap_err();
    assert!(matches!(error, OciError::NotFound { .. }), "{error}");
}
