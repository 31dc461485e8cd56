//! Interop with an independent OCI client, skopeo: what cairn publishes reads back with Bicep's media types and
//! annotations, and an artifact skopeo pushes (built here by hand as an OCI layout, not by cairn) is pulled and
//! checked by cairn.

use std::path::Path;
use std::process::Command;

use cairn_oci::{Artifact, ArtifactRef, Cache, OciClient, RegistryPolicy, TypesPackage, media};
use cairn_testregistry::TestRegistry;
use serde_json::{Value, json};
use sha2::Digest as _;

fn skopeo(args: &[&str]) -> Vec<u8> {
    let out = Command::new("skopeo").args(args).output().unwrap_or_else(|error| {
        panic!("skopeo is needed by this test ({error}): `bash scripts/test.sh` installs it, or apt-get install -y skopeo")
    });
    assert!(
        out.status.success(),
        "skopeo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn client(cache: &Path) -> OciClient {
    OciClient::new(Cache::new(cache), RegistryPolicy::default())
        .with_env(std::sync::Arc::new(|_: &str| None))
}

#[tokio::test]
async fn skopeo_reads_what_cairn_publishes() {
    let registry = TestRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("index.json"),
        r#"{ "resources": {}, "settings": { "name": "Widgets", "version": "1.0.0", "isSingleton": false } }"#,
    )
    .unwrap();
    let types = TypesPackage::from_index(&dir.path().join("index.json")).unwrap();
    let artifact = Artifact::build(
        &types,
        &[("linux-x64".into(), b"binary".to_vec())],
        &cairn_oci::artifact::now(),
    )
    .unwrap();
    let target = ArtifactRef::parse(
        &format!("br:{}/ext/widgets:1.0.0", registry.address()),
        None,
    )
    .unwrap();
    client(&dir.path().join("cache"))
        .push(&artifact, &target, false)
        .await
        .unwrap();

    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{}/ext/widgets:1.0.0", registry.address()),
    ]);
    let manifest: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(manifest["mediaType"], media::MANIFEST);
    assert_eq!(
        manifest["artifactType"],
        "application/vnd.ms.bicep.provider.artifact"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.ms.bicep.provider.config.v1+json"
    );
    assert_eq!(
        manifest["layers"][0]["mediaType"],
        "application/vnd.ms.bicep.provider.layer.v1.tar+gzip"
    );
    assert_eq!(
        manifest["layers"][0]["annotations"]["org.opencontainers.image.title"],
        "types.tgz"
    );
    assert_eq!(
        manifest["layers"][1]["mediaType"],
        "application/vnd.ms.bicep.provider.layer.v1.linux-x64.binary"
    );
    assert_eq!(
        manifest["layers"][1]["annotations"]["org.opencontainers.image.title"],
        "extension.bin"
    );
    assert_eq!(manifest["annotations"]["bicep.serialization.format"], "v1");
    let created = manifest["annotations"]["org.opencontainers.image.created"]
        .as_str()
        .unwrap();
    assert!(
        created.starts_with("20") && created.ends_with('Z'),
        "{created}"
    );
    let digest = format!(
        "sha256:{}",
        data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(&raw))
    );
    assert_eq!(
        digest, artifact.digest,
        "skopeo read other bytes than cairn pushed"
    );
}

fn put_blob(layout: &Path, data: &[u8]) -> (String, usize) {
    let hex = data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(data));
    std::fs::write(layout.join("blobs/sha256").join(&hex), data).unwrap();
    (format!("sha256:{hex}"), data.len())
}

#[tokio::test]
async fn cairn_pulls_what_skopeo_pushes() {
    let registry = TestRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    // The types layer made with the system's tar and gzip, not cairn's code.
    let types_dir = dir.path().join("types");
    std::fs::create_dir_all(&types_dir).unwrap();
    std::fs::write(
        types_dir.join("index.json"),
        r##"{ "resources": { "Thing@1.0.0": { "$ref": "types.json#/0" } }, "settings": { "name": "Things", "version": "2.0.0", "isSingleton": false } }"##,
    )
    .unwrap();
    std::fs::write(
        types_dir.join("types.json"),
        r#"[ { "$type": "AnyType" } ]"#,
    )
    .unwrap();
    let tgz = dir.path().join("types.tgz");
    let status = Command::new("tar")
        .arg("czf")
        .arg(&tgz)
        .arg("-C")
        .arg(&types_dir)
        .args(["index.json", "types.json"])
        .status()
        .unwrap();
    assert!(status.success());

    let layout = dir.path().join("layout");
    std::fs::create_dir_all(layout.join("blobs/sha256")).unwrap();
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    let config = put_blob(
        &layout,
        br#"{"localDeployEnabled":true,"supportedArchitectures":["linux-x64"]}"#,
    );
    let types = put_blob(&layout, &std::fs::read(&tgz).unwrap());
    let binary = put_blob(&layout, b"#!/bin/sh\nexit 0\n");
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.ms.bicep.provider.artifact",
        "config": { "mediaType": "application/vnd.ms.bicep.provider.config.v1+json", "digest": config.0, "size": config.1 },
        "layers": [
            { "mediaType": "application/vnd.ms.bicep.provider.layer.v1.tar+gzip", "digest": types.0, "size": types.1,
              "annotations": { "org.opencontainers.image.title": "types.tgz" } },
            { "mediaType": "application/vnd.ms.bicep.provider.layer.v1.linux-x64.binary", "digest": binary.0, "size": binary.1,
              "annotations": { "org.opencontainers.image.title": "extension.bin" } }
        ],
        "annotations": { "bicep.serialization.format": "v1", "org.opencontainers.image.created": "2026-01-01T00:00:00Z" }
    }))
    .unwrap();
    let manifest_blob = put_blob(&layout, &manifest);
    std::fs::write(
        layout.join("index.json"),
        json!({ "schemaVersion": 2, "manifests": [ {
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_blob.0, "size": manifest_blob.1,
            "annotations": { "org.opencontainers.image.ref.name": "2.0.0" } } ] })
        .to_string(),
    )
    .unwrap();
    skopeo(&[
        "copy",
        "--dest-tls-verify=false",
        &format!("oci:{}:2.0.0", layout.display()),
        &format!("docker://{}/ext/things:2.0.0", registry.address()),
    ]);

    let reference =
        ArtifactRef::parse(&format!("br:{}/ext/things:2.0.0", registry.address()), None).unwrap();
    let pulled = client(&dir.path().join("cache"))
        .pull(&reference, "linux-x64")
        .await
        .unwrap();
    assert_eq!(
        pulled.digest, manifest_blob.0,
        "skopeo changed the manifest"
    );
    assert_eq!(pulled.types.settings().unwrap()["name"], "Things");
    assert_eq!(
        std::fs::read(pulled.binary.unwrap()).unwrap(),
        b"#!/bin/sh\nexit 0\n"
    );
}
