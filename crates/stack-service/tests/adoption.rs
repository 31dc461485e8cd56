//! Adoption end to end: a stack PUT that finds an extension resource already existing that no stack manages leaves
//! it unchanged and unmanaged and reports it (`DeploymentStackResourceExistsUnmanaged`), unless the request sets
//! `adoptExistingResources` — then the stack takes it over and manages it from then on; stack what-if shows such a
//! resource as "exists, unmanaged". A resource another stack manages is never taken over, adoption or not. And what
//! a stack finds its deployment created when the lookups before the creates are slow (the deployment's operations
//! read while it runs).

mod common;
use common::gadgets::{GadgetTransport, Gadgets};
use common::*;

use std::sync::Arc;

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;
use cairn_arm::query::Query;
use cairn_engine::RESOURCE_EXISTS_UNMANAGED;
use cairn_stack_service::StackService;
use cairn_store::{ManagedResourceFilter, Store};
use serde_json::{Value, json};

const TOKEN: &str = "adoption-token";

struct Env {
    _dir: tempfile::TempDir,
    root: tempfile::TempDir,
    store: Arc<dyn Store>,
    service: StackService,
    gadgets: Arc<Gadgets>,
}

async fn setup() -> Env {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = tempfile::tempdir().expect("root dir");
    let store = store_with_group_and_vault(dir.path()).await;
    set_secret(&store, "gadget-token", TOKEN).await;
    let gadgets = Gadgets::new(TOKEN);
    let service = stack_service(
        store.clone(),
        vec![(
            "Gadgets",
            "1.0.0",
            Arc::new(GadgetTransport(gadgets.clone())),
        )],
        fast_settings(),
    );
    Env {
        _dir: dir,
        root,
        store,
        service,
        gadgets,
    }
}

/// A stack over Local files (`path → content`) and gadgets (`name → size`).
fn stack(
    root: &str,
    files: &[(&str, &str)],
    gadgets: &[(&str, u64)],
    adopt: bool,
) -> DeploymentStack {
    let mut resources = serde_json::Map::new();
    for (path, content) in files {
        resources.insert(
            format!("file_{}", path.replace('.', "_")),
            json!({"extension": "local", "type": "File", "apiVersion": "1.0.0",
                   "properties": {"path": path, "content": content}}),
        );
    }
    for (name, size) in gadgets {
        resources.insert(
            format!("gadget_{name}"),
            json!({"extension": "gadgets", "type": "gadget", "apiVersion": "v1",
                   "properties": {"name": name, "size": size}}),
        );
    }
    let mut body = json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "extensions": {
                    "local": {"name": "Local", "version": "1.0.0",
                              "config": {"rootDirectory": {"type": "string"}}},
                    "gadgets": {"name": "Gadgets", "version": "1.0.0",
                                "config": {"token": {"type": "secureString"}}}
                },
                "resources": resources
            },
            "extensionConfigs": {
                "local": {"rootDirectory": {"value": root}},
                "gadgets": {"token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "gadget-token"}}}
            },
            "actionOnUnmanage": {"resources": "delete"},
            "denySettings": {"mode": "none"}
        }
    });
    if adopt {
        body["properties"]["adoptExistingResources"] = json!(true);
    }
    serde_json::from_value(body).expect("a stack body")
}

async fn put(service: &StackService, name: &str, stack: DeploymentStack) -> Value {
    service
        .create_or_update(RG, name, stack, None)
        .await
        .expect("accepted");
    settle(service, name).await
}

fn managed_names(stack: &Value) -> Vec<String> {
    let mut names: Vec<String> = stack["properties"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            r["identifiers"]
                .get("path")
                .or_else(|| r["identifiers"].get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

async fn what_if(service: &StackService, name: &str, stack: DeploymentStack) -> Value {
    let mut body = serde_json::to_value(stack).unwrap();
    body["properties"]["deploymentStackResourceId"] = json!(format!(
        "{RG}/providers/Microsoft.Resources/deploymentStacks/{name}"
    ));
    body["properties"]["retentionInterval"] = json!("PT1H");
    let request: DeploymentStacksWhatIfResult = serde_json::from_value(body).unwrap();
    let accepted = service
        .what_if(RG, &format!("{name}-whatif"), request)
        .await
        .expect("what-if");
    serde_json::to_value(accepted.result).unwrap()
}

/// Pairs of strings: `(resource, managementStatusChange.after)`, `(code, level)`.
type Pairs = Vec<(String, String)>;

/// `(resource, managementStatusChange.after)` of a what-if and its diagnostics' `(code, level)`.
fn what_if_view(result: &Value) -> (Pairs, Pairs) {
    let mut changes: Pairs = result["properties"]["changes"]["resourceChanges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["identifiers"]
                    .get("path")
                    .or_else(|| c["identifiers"].get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                c["managementStatusChange"]["after"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    changes.sort();
    let diagnostics = result["properties"]["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or_default().to_owned(),
                d["level"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (changes, diagnostics)
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_resource_is_reported_and_taken_over_only_when_asked() {
    let env = setup().await;
    let root = env.root.path();
    let root_text = root.to_string_lossy().into_owned();
    std::fs::write(root.join("existing.txt"), "mine\n").expect("a file made by hand");
    env.gadgets.plant("found", json!({"size": 7}));
    let files = [("existing.txt", "the stack's\n"), ("new.txt", "new\n")];
    let gadgets = [("found", 1), ("fresh", 2)];

    // What-if: the two existing resources are "exists, unmanaged" and stay unmanaged.
    let predicted = what_if(
        &env.service,
        "app",
        stack(&root_text, &files, &gadgets, false),
    )
    .await;
    assert_eq!(
        what_if_view(&predicted),
        (
            vec![
                pair("existing.txt", "unmanaged"),
                pair("found", "unmanaged"),
                pair("fresh", "managed"),
                pair("new.txt", "managed"),
            ],
            vec![
                pair(RESOURCE_EXISTS_UNMANAGED, "warning"),
                pair(RESOURCE_EXISTS_UNMANAGED, "warning"),
            ]
        ),
        "{predicted:#}"
    );
    assert!(
        predicted.to_string().contains("exists, unmanaged"),
        "{predicted:#}"
    );

    // Without adoption the PUT leaves them alone, reports them, and manages only what it created.
    let refused = put(
        &env.service,
        "app",
        stack(&root_text, &files, &gadgets, false),
    )
    .await;
    assert_eq!(
        refused["properties"]["provisioningState"], "failed",
        "{refused:#}"
    );
    let report = refused["properties"]["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == RESOURCE_EXISTS_UNMANAGED)
        .unwrap_or_else(|| panic!("reported: {refused:#}"))
        .clone();
    let named = report["details"].to_string();
    assert!(
        named.contains("existing.txt") && named.contains("found"),
        "{report:#}"
    );
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("adoptExistingResources"),
        "the fix is named: {report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("existing.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(env.gadgets.get("found").unwrap()["size"], 7);
    assert_eq!(managed_names(&refused), ["fresh", "new.txt"]);
    assert!(
        refused["properties"]
            .get("adoptExistingResources")
            .is_none(),
        "the flag is per request"
    );

    // With adoption they are written and managed; the what-if says so first.
    let predicted = what_if(
        &env.service,
        "app",
        stack(&root_text, &files, &gadgets, true),
    )
    .await;
    let (changes, diagnostics) = what_if_view(&predicted);
    assert!(
        changes.contains(&pair("existing.txt", "managed")),
        "{predicted:#}"
    );
    assert_eq!(
        diagnostics,
        [
            pair(RESOURCE_EXISTS_UNMANAGED, "info"),
            pair(RESOURCE_EXISTS_UNMANAGED, "info")
        ]
    );
    let adopted = put(
        &env.service,
        "app",
        stack(&root_text, &files, &gadgets, true),
    )
    .await;
    assert_eq!(
        adopted["properties"]["provisioningState"], "succeeded",
        "{adopted:#}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("existing.txt")).unwrap(),
        "the stack's\n"
    );
    assert_eq!(env.gadgets.get("found").unwrap()["size"], 1);
    assert_eq!(
        managed_names(&adopted),
        ["existing.txt", "found", "fresh", "new.txt"]
    );

    // From now on they are the stack's like any other: updated without asking, deleted with the stack.
    let again = put(
        &env.service,
        "app",
        stack(&root_text, &files, &gadgets, false),
    )
    .await;
    assert_eq!(
        again["properties"]["provisioningState"], "succeeded",
        "{again:#}"
    );
    env.service
        .delete(
            RG,
            "app",
            StackDeleteOptions::from_query(&Query::parse("unmanageAction.Resources=delete"))
                .unwrap(),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(settle(&env.service, "app").await, Value::Null);
    assert!(!root.join("existing.txt").exists());
    assert!(env.gadgets.get("found").is_none());
}

/// The gadgets the inventory holds rows of, by name.
async fn inventoried_gadgets(store: &Arc<dyn Store>) -> Vec<String> {
    let mut names: Vec<String> = store
        .list_managed_resources(ManagedResourceFilter::default())
        .await
        .expect("list the inventory")
        .items
        .into_iter()
        .filter(|r| r.resource.resource_type == "gadget")
        .filter_map(|r| {
            r.resource
                .extension
                .and_then(|e| e.identifiers)
                .and_then(|i| i["name"].as_str().map(str::to_owned))
        })
        .collect();
    names.sort();
    names
}

/// The extension's reads since the last call, sorted (creates run in parallel).
fn reads_since(gadgets: &Gadgets, from: &mut usize) -> Vec<String> {
    let reads = gadgets.reads.lock().unwrap();
    let mut since = reads[*from..].to_vec();
    *from = reads.len();
    since.sort();
    since
}

/// Each create previews its resource once: that preview names the target of its `Running` step and, for a
/// resource no stack manages, what the existence check looks up with one `get`; a resource the stack manages is
/// written without the `get`. A resource refused as existing and unmanaged is not inventoried (it was never the
/// stack's), and is once the stack adopts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_create_previews_once_and_a_refused_existing_resource_is_not_inventoried() {
    let env = setup().await;
    let root_text = env.root.path().to_string_lossy().into_owned();
    env.gadgets.plant("found", json!({"size": 7}));
    let gadgets = [("found", 1), ("fresh", 2)];
    let mut seen = 0;

    let refused = put(&env.service, "app", stack(&root_text, &[], &gadgets, false)).await;
    assert_eq!(
        refused["properties"]["provisioningState"], "failed",
        "{refused:#}"
    );
    assert_eq!(
        reads_since(&env.gadgets, &mut seen),
        ["get found", "get fresh", "preview found", "preview fresh"]
    );
    assert_eq!(*env.gadgets.writes.lock().unwrap(), ["fresh"]);
    assert_eq!(inventoried_gadgets(&env.store).await, ["fresh"]);

    let again = put(&env.service, "app", stack(&root_text, &[], &gadgets, false)).await;
    assert_eq!(
        again["properties"]["provisioningState"], "failed",
        "{again:#}"
    );
    assert_eq!(
        reads_since(&env.gadgets, &mut seen),
        ["get found", "preview found", "preview fresh"],
        "the managed gadget is not looked up"
    );
    assert_eq!(inventoried_gadgets(&env.store).await, ["fresh"]);

    let adopted = put(&env.service, "app", stack(&root_text, &[], &gadgets, true)).await;
    assert_eq!(
        adopted["properties"]["provisioningState"], "succeeded",
        "{adopted:#}"
    );
    assert_eq!(
        reads_since(&env.gadgets, &mut seen),
        ["preview found", "preview fresh"],
        "a stack that adopts what exists does not ask whether it exists"
    );
    assert_eq!(inventoried_gadgets(&env.store).await, ["found", "fresh"]);
    let row = env
        .store
        .list_managed_resources(ManagedResourceFilter::default())
        .await
        .expect("list the inventory")
        .items
        .into_iter()
        .find(|r| r.resource.properties["name"] == "found")
        .expect("the adopted gadget's row");
    assert_eq!(
        row.resource.applied,
        Some(json!({"name": "found", "size": 1})),
        "an adopted resource's row records what the stack applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_another_stack_manages_is_never_taken_over() {
    let env = setup().await;
    let root_text = env.root.path().to_string_lossy().into_owned();
    let owner = put(
        &env.service,
        "owner",
        stack(&root_text, &[], &[("shared", 1)], false),
    )
    .await;
    assert_eq!(
        owner["properties"]["provisioningState"], "succeeded",
        "{owner:#}"
    );

    // What-if of a second stack: the resource is another stack's, not "exists, unmanaged".
    let predicted = what_if(
        &env.service,
        "thief",
        stack(&root_text, &[], &[("shared", 5)], true),
    )
    .await;
    let (_, diagnostics) = what_if_view(&predicted);
    assert_eq!(
        diagnostics,
        [pair(
            "DeploymentStackResourceManagedByAnotherStack",
            "error"
        )],
        "{predicted:#}"
    );

    // Adoption or not, the second stack is refused it as before.
    for adopt in [true, false] {
        let thief = put(
            &env.service,
            "thief",
            stack(&root_text, &[], &[("shared", 5)], adopt),
        )
        .await;
        assert_eq!(
            thief["properties"]["provisioningState"], "failed",
            "{thief:#}"
        );
        let error = thief["properties"]["error"].to_string();
        assert!(
            error.contains("DeploymentStackResourceManagedByAnotherStack"),
            "{error}"
        );
        assert!(!error.contains(RESOURCE_EXISTS_UNMANAGED), "{error}");
        assert_eq!(managed_names(&thief), Vec::<String>::new());
    }
    let owner = env.service.get(RG, "owner").await.unwrap();
    assert_eq!(
        managed_names(&serde_json::to_value(owner).unwrap()),
        ["shared"],
        "the owner keeps it"
    );
}

/// A stack's deployment that outlasts several of the reads that follow its operations while it runs (one every 100
/// ms; each lookup here takes 250 ms) and fails: what a failed deployment manages is read from its operations, so the
/// resources whose steps came only after the last read while it ran are managed too (the read at its end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_followed_while_it_runs_gives_the_whole_managed_set() {
    let env = setup().await;
    let root_text = env.root.path().to_string_lossy().into_owned();
    env.gadgets
        .get_latency_ms
        .store(250, std::sync::atomic::Ordering::SeqCst);
    let gadgets = [("one", 1), ("two", 2), ("three", 3)];
    // The Local extension refuses a path outside its root: that create fails, the others go on.
    let files = [("a.txt", "A"), ("a/../../outside.txt", "B")];
    let started = std::time::Instant::now();
    let stack = put(
        &env.service,
        "followed",
        stack(&root_text, &files, &gadgets, false),
    )
    .await;
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(250),
        "the deployment ran past several follow reads"
    );
    assert_eq!(
        stack["properties"]["provisioningState"], "failed",
        "{stack:#}"
    );
    assert_eq!(
        managed_names(&stack),
        ["a.txt", "one", "three", "two"],
        "{stack:#}"
    );
}
