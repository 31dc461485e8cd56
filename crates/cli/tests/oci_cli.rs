//! Extensions as OCI artifacts through the `cairn` binary, against a real registry (Debian's docker-registry):
//! publish the `cairn-ext-local` binary as a Bicep extension artifact, deploy a template that names it through
//! `bicepconfig.json` (pinned in `cairn.lock.json`), refuse the deployment when the tag moved until `cairn
//! extension lock --upgrade`, run a stack create, update and delete through a registry `oci` entry, and publish
//! and pull with basic auth (right and wrong credentials).
//!
//! The extension is named `LocalOci` in the templates so that no built-in can serve it: every deployment below
//! succeeds only through the pulled binary. Needs the `cairn-ext-local` binary built beside `cairn`
//! (`cargo build -p cairn-ext-local`; `cargo test --workspace` builds it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cairn_testregistry::TestRegistry;
use serde_json::{Value, json};

fn cairn_in(home: &Path, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .current_dir(cwd)
        .env("CAIRN_HOME", home)
        // Never the user's Docker login or registry settings.
        .env("DOCKER_CONFIG", home.join("no-docker"))
        .env_remove("CAIRN_SERVER")
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_EXTENSIONS")
        .env_remove("CAIRN_REGISTRY_USERNAME")
        .env_remove("CAIRN_REGISTRY_PASSWORD")
        .env_remove("CAIRN_TRUSTED_REGISTRIES")
        .env_remove("CAIRN_INSECURE_REGISTRIES")
        .args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn ok(out: Output, what: &str) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// The `cairn-ext-local` binary next to `cairn`.
fn local_extension_binary() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_cairn")).with_file_name("cairn-ext-local");
    assert!(
        path.is_file(),
        "{} is missing: build it first (`cargo build -p cairn-ext-local`)",
        path.display()
    );
    path
}

/// Types for the artifact (the types layer is carried as files; this index names one resource type).
fn write_types(dir: &Path, revision: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("index.json"),
        format!(
            r##"{{ "resources": {{ "File@1.0.0": {{ "$ref": "types.json#/2" }} }},
                  "settings": {{ "name": "LocalOci", "version": "1.0.0", "isSingleton": false, "revision": "{revision}" }} }}"##
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("types.json"),
        r##"[ { "$type": "StringType" },
              { "$type": "ObjectType", "name": "File", "properties": { "path": { "type": { "$ref": "#/0" }, "flags": 17 },
                "content": { "type": { "$ref": "#/0" }, "flags": 0 } } },
              { "$type": "ResourceType", "name": "File@1.0.0", "body": { "$ref": "#/1" }, "readableScopes": 0, "writableScopes": 0 } ]"##,
    )
    .unwrap();
    dir.join("index.json")
}

fn template(files: &[&str]) -> Value {
    let mut resources = serde_json::Map::new();
    for f in files {
        resources.insert(
            (*f).to_string(),
            json!({ "extension": "local", "type": "File", "apiVersion": "1.0.0",
                    "properties": { "path": format!("{f}.txt"), "content": format!("{f}\n") } }),
        );
    }
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "extensions": { "local": { "name": "LocalOci", "version": "1.0.0" } },
        "resources": resources
    })
}

fn params(dir: &Path, root: &Path) -> PathBuf {
    let path = dir.join("params.json");
    std::fs::write(
        &path,
        json!({ "parameters": {}, "extensionConfigs": { "local": { "rootDirectory": { "value": root } } } })
            .to_string(),
    )
    .unwrap();
    path
}

fn publish(
    home: &Path,
    cwd: &Path,
    index: &Path,
    target: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let binary = local_extension_binary();
    let mut args = vec![
        "extension",
        "publish",
        index.to_str().unwrap(),
        "--bin-linux-x64",
        binary.to_str().unwrap(),
        "--target",
        target,
    ];
    args.extend_from_slice(extra);
    cairn_in(home, cwd, &args, env)
}

#[test]
fn deploy_an_extension_by_br_reference_and_refuse_a_moved_tag() {
    let registry = TestRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    let root = dir.path().join("files");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let reference = format!("br:{}/ext/local:1.0.0", registry.address());

    let index = write_types(&dir.path().join("types"), "1");
    let published = ok(
        publish(&home, dir.path(), &index, &reference, &[], &[]),
        "publish",
    );
    let first_digest = published["digest"].as_str().unwrap().to_owned();
    assert!(first_digest.starts_with("sha256:"), "{published}");

    let shown = ok(
        cairn_in(&home, dir.path(), &["extension", "show", &reference], &[]),
        "show",
    );
    assert_eq!(shown["digest"], first_digest.as_str());
    assert_eq!(shown["platforms"], json!(["linux-x64"]));
    assert_eq!(shown["types"]["settings"]["name"], "LocalOci");

    // Without index.json the binary for this platform is asked for its types, as `bicep publish-extension` does.
    let from_binary = format!("br:{}/ext/local-types:1.0.0", registry.address());
    let binary = local_extension_binary();
    ok(
        cairn_in(
            &home,
            dir.path(),
            &[
                "extension",
                "publish",
                "--bin-linux-x64",
                binary.to_str().unwrap(),
                "--target",
                &from_binary,
            ],
            &[],
        ),
        "publish without index.json",
    );
    let shown = ok(
        cairn_in(&home, dir.path(), &["extension", "show", &from_binary], &[]),
        "show",
    );
    assert_eq!(shown["types"]["settings"]["name"], "Local", "{shown:#}");

    std::fs::write(
        project.join("bicepconfig.json"),
        json!({ "extensions": { "local": reference } }).to_string(),
    )
    .unwrap();
    std::fs::write(project.join("main.json"), template(&["a"]).to_string()).unwrap();
    let params = params(&project, &root);
    ok(
        cairn_in(
            &home,
            &project,
            &["group", "create", "-n", "rg", "-l", "local"],
            &[],
        ),
        "group create",
    );
    let deploy = |name: &str| {
        cairn_in(
            &home,
            &project,
            &[
                "deployment",
                "group",
                "create",
                "-g",
                "rg",
                "-n",
                name,
                "-f",
                "main.json",
                "-p",
                params.to_str().unwrap(),
                "--no-progress",
            ],
            &[],
        )
    };
    let deployed = ok(deploy("first"), "first deployment");
    assert_eq!(
        deployed["properties"]["provisioningState"], "Succeeded",
        "{deployed:#}"
    );
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
    let lock: Value =
        serde_json::from_slice(&std::fs::read(project.join("cairn.lock.json")).unwrap()).unwrap();
    assert_eq!(
        lock["extensions"]["LocalOci@1.0.0"]["digest"],
        first_digest.as_str(),
        "{lock:#}"
    );
    assert_eq!(
        lock["extensions"]["LocalOci@1.0.0"]["reference"],
        reference.as_str()
    );
    let hex = first_digest.strip_prefix("sha256:").unwrap();
    assert!(
        home.join("oci/blobs/sha256").join(hex).is_file(),
        "the manifest is cached by digest"
    );

    // The same tag, republished with other types: a new manifest digest.
    let index = write_types(&dir.path().join("types"), "2");
    let refused = publish(&home, dir.path(), &index, &reference, &[], &[]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--force"),
        "{refused:?}"
    );
    let moved = ok(
        publish(&home, dir.path(), &index, &reference, &["--force"], &[]),
        "republish",
    );
    let second_digest = moved["digest"].as_str().unwrap().to_owned();
    assert_ne!(second_digest, first_digest);

    let out = deploy("second");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_ne!(
        out.status.code(),
        Some(0),
        "a moved tag must be refused: {stdout}"
    );
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains("has moved")
            && said.contains(&first_digest)
            && said.contains("cairn extension lock --upgrade"),
        "{said}"
    );

    let relocked = ok(
        cairn_in(
            &home,
            &project,
            &[
                "extension",
                "lock",
                "-f",
                "main.json",
                "--upgrade",
                "-o",
                "json",
            ],
            &[],
        ),
        "lock --upgrade",
    );
    assert_eq!(relocked[0]["digest"], second_digest.as_str(), "{relocked}");
    let deployed = ok(deploy("third"), "deployment after re-lock");
    assert_eq!(
        deployed["properties"]["provisioningState"], "Succeeded",
        "{deployed:#}"
    );

    // The artifact's types layer checks bodies before anything runs: a misspelt property is named with a
    // suggestion by `template validate` and refuses the deployment; no file is written.
    let mut misspelt = template(&["typo"]);
    let body = &mut misspelt["resources"]["typo"]["properties"];
    body["contnet"] = body["content"].take();
    body.as_object_mut().unwrap().remove("content");
    std::fs::write(project.join("main.json"), misspelt.to_string()).unwrap();
    let validated = cairn_in(
        &home,
        &project,
        &["template", "validate", "-f", "main.json"],
        &[],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&validated.stdout),
        String::from_utf8_lossy(&validated.stderr)
    );
    assert_ne!(validated.status.code(), Some(0), "{said}");
    assert!(
        said.contains("contnet") && said.contains("content"),
        "{said}"
    );
    let refused = deploy("fourth");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_ne!(refused.status.code(), Some(0), "{said}");
    assert!(said.contains("contnet"), "{said}");
    assert!(!root.join("typo.txt").exists(), "nothing ran");
}

#[test]
fn stack_create_update_delete_through_a_registry_oci_entry() {
    let registry = TestRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let root = dir.path().join("files");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let reference = format!("br:{}/ext/local:1.0.0", registry.address());
    let index = write_types(&dir.path().join("types"), "1");
    ok(
        publish(&home, dir.path(), &index, &reference, &[], &[]),
        "publish",
    );
    std::fs::write(
        home.join("extensions.json"),
        json!({ "extensions": [ { "name": "LocalOci", "version": "1.0.0",
                                  "transport": { "kind": "oci", "reference": reference } } ] })
        .to_string(),
    )
    .unwrap();
    let listed = ok(
        cairn_in(&home, dir.path(), &["extension", "list", "-o", "json"], &[]),
        "list",
    );
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["transport"] == "oci" && row["target"] == reference.as_str()),
        "{listed:#}"
    );

    let full = dir.path().join("full.json");
    std::fs::write(&full, template(&["a", "b"]).to_string()).unwrap();
    let smaller = dir.path().join("smaller.json");
    std::fs::write(&smaller, template(&["a"]).to_string()).unwrap();
    let params = params(dir.path(), &root);
    ok(
        cairn_in(
            &home,
            dir.path(),
            &["group", "create", "-n", "rg", "-l", "local"],
            &[],
        ),
        "group create",
    );
    let stack = |file: &Path| {
        cairn_in(
            &home,
            dir.path(),
            &[
                "stack",
                "group",
                "create",
                "-n",
                "st",
                "-g",
                "rg",
                "-f",
                file.to_str().unwrap(),
                "-p",
                params.to_str().unwrap(),
                "--action-on-unmanage",
                "deleteAll",
                "--yes",
                "-o",
                "json",
            ],
            &[],
        )
    };
    let created = ok(stack(&full), "stack create");
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    assert!(root.join("a.txt").is_file() && root.join("b.txt").is_file());
    let updated = ok(stack(&smaller), "stack update");
    assert_eq!(
        updated["properties"]["provisioningState"], "succeeded",
        "{updated:#}"
    );
    assert!(
        root.join("a.txt").is_file() && !root.join("b.txt").exists(),
        "the update deletes b"
    );
    ok(
        cairn_in(
            &home,
            dir.path(),
            &[
                "stack",
                "group",
                "delete",
                "-n",
                "st",
                "-g",
                "rg",
                "--action-on-unmanage",
                "deleteAll",
                "--yes",
            ],
            &[],
        ),
        "stack delete",
    );
    assert!(!root.join("a.txt").exists(), "the delete removes a");
}

#[test]
fn basic_auth_with_right_and_wrong_credentials() {
    let registry = TestRegistry::start_with_basic_auth();
    let password = registry.password().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let reference = format!("br:{}/ext/local:1.0.0", registry.address());
    let index = write_types(&dir.path().join("types"), "1");

    let anonymous = publish(&home, dir.path(), &index, &reference, &[], &[]);
    assert_ne!(anonymous.status.code(), Some(0));
    let message = String::from_utf8_lossy(&anonymous.stderr);
    assert!(
        message.contains("refused access") && message.contains("without credentials"),
        "{message}"
    );

    let wrong = [
        ("CAIRN_REGISTRY_USERNAME", cairn_testregistry::USER),
        ("CAIRN_REGISTRY_PASSWORD", "wrong-pass"),
    ];
    let out = publish(&home, dir.path(), &index, &reference, &[], &wrong);
    assert_ne!(out.status.code(), Some(0));
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(
        message.contains("refused access") && message.contains("CAIRN_REGISTRY_USERNAME"),
        "{message}"
    );
    assert!(!message.contains("wrong-pass"), "{message}");

    let right = [
        ("CAIRN_REGISTRY_USERNAME", cairn_testregistry::USER),
        ("CAIRN_REGISTRY_PASSWORD", password.as_str()),
    ];
    let published = ok(
        publish(&home, dir.path(), &index, &reference, &[], &right),
        "publish with credentials",
    );
    let pulled = ok(
        cairn_in(
            &home,
            dir.path(),
            &["extension", "pull", &reference],
            &right,
        ),
        "pull",
    );
    assert_eq!(pulled["digest"], published["digest"]);
    let binary = pulled["binary"].as_str().unwrap();
    assert_eq!(
        std::fs::read(binary).unwrap(),
        std::fs::read(local_extension_binary()).unwrap()
    );
    let printed = format!("{published}{pulled}");
    assert!(!printed.contains(&password));
}
