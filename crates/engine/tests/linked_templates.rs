//! Linked templates: template specs (the provider, deployments by `templateLink.id`, nested `relativePath` links
//! into `linkedTemplates` with `../` and ARM's case-insensitive paths), URIs downloaded from a local HTTP server
//! (query strings kept out of records and errors, `parametersLink`, relative links, 404, size cap, refused
//! redirects) and an in-process fetcher for what-if, validate, exportTemplate and `resolve_template`.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use cairn_arm::ResourceId;
use cairn_arm::models::deployment::{Deployment, DeploymentWhatIf};
use cairn_engine::provider::{TEMPLATE_SPEC_VERSIONS_TYPE, TEMPLATE_SPECS_TYPE, VAULTS_TYPE};
use cairn_engine::{Engine, EngineSettings, FetchError, FetchFuture, Providers, TemplateFetcher};
use common::*;
use serde_json::{Value, json};

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";
const SECRET: &str = "sig=S3CR3T-SAS";

fn spec_id(name: &str) -> String {
    format!("{RG}/providers/Microsoft.Resources/templateSpecs/{name}")
}

fn version_id(spec: &str, version: &str) -> String {
    format!("{}/versions/{version}", spec_id(spec))
}

fn template(parameters: Value, resources: Value, outputs: Value) -> Value {
    json!({ "$schema": SCHEMA, "contentVersion": "1.0.0.0", "parameters": parameters,
            "resources": resources, "outputs": outputs })
}

fn vault(name: &str) -> Value {
    json!({ "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": name, "location": "westus",
            "properties": { "sku": { "family": "A", "name": "standard" } } })
}

fn linked(name: &str, link: Value, parameters: Value) -> Value {
    json!({ "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": name,
            "properties": { "mode": "Incremental", "templateLink": link, "parameters": parameters } })
}

fn string_param() -> Value {
    json!({ "type": "string" })
}

/// A spec version: main deploys `modules/vault.json` (named in another case), which deploys a vault and nests
/// `../shared/echo.json`.
fn spec_version_body() -> Value {
    let main = template(
        json!({ "prefix": string_param() }),
        json!([linked(
            "vaults",
            json!({ "relativePath": "Modules/Vault.json" }),
            json!({ "name": { "value": "[concat(parameters('prefix'), '-kv')]" } })
        )]),
        json!({
            "vaultId": { "type": "string", "value": "[reference('vaults').outputs.id.value]" },
            "echo": { "type": "string", "value": "[reference('vaults').outputs.echo.value]" }
        }),
    );
    let vault_module = template(
        json!({ "name": string_param() }),
        json!([
            vault("[parameters('name')]"),
            linked(
                "echo",
                json!({ "relativePath": "../shared/echo.json" }),
                json!({ "v": { "value": "[parameters('name')]" } })
            )
        ]),
        json!({
            "id": { "type": "string", "value": "[resourceId('Microsoft.KeyVault/vaults', parameters('name'))]" },
            "echo": { "type": "string", "value": "[reference('echo').outputs.v.value]" }
        }),
    );
    let echo = template(
        json!({ "v": string_param() }),
        json!([]),
        json!({ "v": { "type": "string", "value": "[parameters('v')]" } }),
    );
    json!({
        "location": "westus",
        "properties": {
            "description": "a vault with an echo",
            "mainTemplate": main,
            "linkedTemplates": [
                { "path": "modules/vault.json", "template": vault_module },
                { "path": "shared/echo.json", "template": echo }
            ]
        }
    })
}

async fn put(engine: &Engine, id: &str, body: Value) -> Result<Value, cairn_engine::ProviderError> {
    let id = ResourceId::parse(id).unwrap();
    let provider = engine.providers().get(&id.resource_type()).unwrap().clone();
    provider
        .put(&id, "2022-02-01", &body)
        .await
        .map(|o| o.resource)
}

async fn get(engine: &Engine, id: &str) -> Option<Value> {
    let id = ResourceId::parse(id).unwrap();
    let provider = engine.providers().get(&id.resource_type()).unwrap().clone();
    provider.get(&id, "2022-02-01").await.unwrap()
}

async fn create_spec(engine: &Engine, name: &str, version: &str, body: Value) {
    put(
        engine,
        &spec_id(name),
        json!({ "location": "westus", "properties": { "description": "d" } }),
    )
    .await
    .expect("spec");
    put(engine, &version_id(name, version), body)
        .await
        .expect("version");
}

fn linked_request(link: Value, parameters: Value) -> Deployment {
    serde_json::from_value(json!({
        "properties": { "mode": "Incremental", "templateLink": link, "parameters": parameters }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_spec_deploys_with_relative_links_into_its_linked_templates() {
    let env = setup().await;
    create_spec(&env.engine, "spec1", "1.0", spec_version_body()).await;
    let id = version_id("spec1", "1.0");
    let record = deploy(
        &env.engine,
        RG,
        "fromspec",
        linked_request(json!({ "id": id }), json!({ "prefix": { "value": "p" } })),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record}");
    let outputs = &record["properties"]["outputs"];
    assert_eq!(outputs["echo"]["value"], "p-kv");
    assert!(
        outputs["vaultId"]["value"]
            .as_str()
            .unwrap()
            .ends_with("/providers/Microsoft.KeyVault/vaults/p-kv")
    );
    assert_eq!(record["properties"]["templateLink"]["id"], json!(id));
    assert!(record["properties"]["templateHash"].is_string());
    assert!(
        get(&env.engine, &format!("{RG}/providers/{VAULTS_TYPE}/p-kv"))
            .await
            .is_some()
    );
    // exportTemplate returns the template the deployment ran: the spec version's main template.
    let exported = env.engine.export_template(RG, "fromspec").await.unwrap();
    assert_eq!(
        exported.template.unwrap(),
        spec_version_body()["properties"]["mainTemplate"]
    );
    // The nested records show their links; the grandchild resolved `../shared/echo.json` from `modules/`.
    let child = serde_json::to_value(env.engine.get(RG, "vaults").await.unwrap()).unwrap();
    assert_eq!(
        child["properties"]["templateLink"]["relativePath"],
        "Modules/Vault.json"
    );
    assert_eq!(child["properties"]["templateLink"]["id"], json!(id));
    assert!(child["properties"]["templateHash"].is_string());
    let grandchild = serde_json::to_value(env.engine.get(RG, "echo").await.unwrap()).unwrap();
    assert_eq!(state(&grandchild), "Succeeded");
    assert_eq!(grandchild["properties"]["outputs"]["v"]["value"], "p-kv");
    let exported_child = env.engine.export_template(RG, "echo").await.unwrap();
    assert_eq!(
        exported_child.template.unwrap()["outputs"]["v"]["value"],
        "[parameters('v')]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_links_outside_or_missing_from_the_spec_fail_the_nested_deployment() {
    let env = setup().await;
    for (version, path) in [
        ("1.0", "modules/missing.json"),
        ("2.0", "../../escape.json"),
    ] {
        let body = json!({ "location": "westus", "properties": {
            "mainTemplate": template(json!({}), json!([linked("m", json!({ "relativePath": path }), json!({}))]), json!({}))
        }});
        create_spec(&env.engine, "broken", version, body).await;
        let name = format!("broken{}", version.replace('.', ""));
        let record = deploy(
            &env.engine,
            RG,
            &name,
            linked_request(json!({ "id": version_id("broken", version) }), json!({})),
        )
        .await;
        assert_eq!(state(&record), "Failed");
        let text = record["properties"]["error"].to_string();
        assert!(text.contains("InvalidContentLink"), "{text}");
        assert!(text.contains(path.trim_start_matches("../")), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_spec_version_and_conflicting_properties_are_refused() {
    let env = setup().await;
    let id = version_id("nope", "1.0");
    let err = env
        .engine
        .create_or_update(
            RG,
            "d",
            linked_request(json!({ "id": id }), json!({})),
            Default::default(),
        )
        .await
        .unwrap_err()
        .to_arm();
    assert_eq!(err.status(), 404);
    assert_eq!(err.detail().code(), "TemplateSpecVersionNotFound");
    assert!(err.detail().message().contains(&id));

    let both: Deployment = serde_json::from_value(json!({ "properties": {
        "mode": "Incremental", "template": template(json!({}), json!([]), json!({})),
        "templateLink": { "id": id } } }))
    .unwrap();
    let err = env
        .engine
        .validate(RG, "d", both)
        .await
        .unwrap_err()
        .to_arm();
    assert_eq!(
        (err.status(), err.detail().code()),
        (400, "InvalidRequestContent")
    );

    let both: Deployment = serde_json::from_value(json!({ "properties": {
        "mode": "Incremental", "template": template(json!({}), json!([]), json!({})),
        "parameters": {}, "parametersLink": { "uri": "https://h.invalid/p.json" } } }))
    .unwrap();
    let err = env
        .engine
        .validate(RG, "d", both)
        .await
        .unwrap_err()
        .to_arm();
    assert_eq!(
        (err.status(), err.detail().code()),
        (400, "InvalidRequestContent")
    );

    let relative = linked_request(json!({ "relativePath": "x.json" }), json!({}));
    let err = env
        .engine
        .validate(RG, "d", relative)
        .await
        .unwrap_err()
        .to_arm();
    assert_eq!(err.detail().code(), "InvalidContentLink");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_template_spec_provider_lists_versions_and_deletes_them_with_the_spec() {
    let env = setup().await;
    create_spec(&env.engine, "s", "1.0", spec_version_body()).await;
    put(&env.engine, &version_id("s", "2.0"), spec_version_body())
        .await
        .unwrap();
    let spec = get(&env.engine, &spec_id("s")).await.unwrap();
    assert_eq!(spec["type"], TEMPLATE_SPECS_TYPE);
    let versions = spec["properties"]["versions"].as_object().unwrap();
    assert_eq!(versions.len(), 2, "{spec}");
    assert!(versions["1.0"]["timeCreated"].is_string());
    let version = get(&env.engine, &version_id("s", "1.0")).await.unwrap();
    assert_eq!(version["name"], "1.0");
    assert_eq!(version["type"], TEMPLATE_SPEC_VERSIONS_TYPE);
    assert_eq!(
        version["properties"]["linkedTemplates"][0]["path"],
        "modules/vault.json"
    );
    assert!(version["systemData"]["createdAt"].is_string());

    let provider = env
        .engine
        .providers()
        .get(TEMPLATE_SPEC_VERSIONS_TYPE)
        .unwrap()
        .clone();
    let spec_resource = ResourceId::parse(&spec_id("s")).unwrap();
    let listed = provider
        .list(&spec_resource, TEMPLATE_SPEC_VERSIONS_TYPE, "2022-02-01")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(listed.len(), 2);
    // A spec whose name extends this one's is not its parent.
    create_spec(&env.engine, "s2", "1.0", spec_version_body()).await;
    let listed = provider
        .list(&spec_resource, TEMPLATE_SPEC_VERSIONS_TYPE, "2022-02-01")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(listed.len(), 2);
    let group = ResourceId::parse(RG).unwrap();
    let specs = provider
        .list(&group, TEMPLATE_SPECS_TYPE, "2022-02-01")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(specs.len(), 2);

    assert!(provider.delete(&spec_resource, "2022-02-01").await.unwrap());
    assert!(get(&env.engine, &version_id("s", "1.0")).await.is_none());
    assert!(get(&env.engine, &spec_id("s")).await.is_none());
    assert!(get(&env.engine, &version_id("s2", "1.0")).await.is_some());
    assert!(!provider.delete(&spec_resource, "2022-02-01").await.unwrap());

    let orphan = put(&env.engine, &version_id("gone", "1.0"), spec_version_body())
        .await
        .unwrap_err();
    assert_eq!(
        (orphan.status, orphan.error.code()),
        (404, "ParentResourceNotFound")
    );
    let mut elsewhere = spec_version_body();
    elsewhere["location"] = json!("eastus");
    let moved = put(&env.engine, &version_id("s2", "3.0"), elsewhere)
        .await
        .unwrap_err();
    assert_eq!(moved.status, 400);
    let mut climbing = spec_version_body();
    climbing["properties"]["linkedTemplates"][0]["path"] = json!("../x.json");
    let bad = put(&env.engine, &version_id("s2", "4.0"), climbing)
        .await
        .unwrap_err();
    assert_eq!(bad.error.code(), "InvalidRequestContent");
    let mut no_main = spec_version_body();
    no_main["properties"]
        .as_object_mut()
        .unwrap()
        .remove("mainTemplate");
    let bad = put(&env.engine, &version_id("s2", "5.0"), no_main)
        .await
        .unwrap_err();
    assert!(bad.error.message().contains("mainTemplate"));
}

/// A local HTTP server: files under `/private/` need the SAS query, `/big.json` is `big` bytes of JSON,
/// `/redirect` redirects to a `file:` URI.
async fn serve_templates(files: HashMap<String, Value>, big: usize) -> String {
    let files = Arc::new(files);
    let app = Router::new().fallback(move |uri: Uri| {
        let files = files.clone();
        async move {
            let path = uri.path().to_string();
            if path == "/redirect" {
                return (
                    StatusCode::FOUND,
                    [(header::LOCATION, "file:///etc/passwd")],
                )
                    .into_response();
            }
            if path == "/big.json" {
                let padding = "x".repeat(big);
                return json!({ "padding": padding }).to_string().into_response();
            }
            if path.starts_with("/private/") && uri.query() != Some(SECRET) {
                return StatusCode::FORBIDDEN.into_response();
            }
            match files.get(&path) {
                Some(body) => Response::new(body.to_string().into()),
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

fn uri_files() -> HashMap<String, Value> {
    let main = template(
        json!({ "who": string_param() }),
        json!([linked(
            "child",
            json!({ "relativePath": "nested/child.json" }),
            json!({ "who": { "value": "[parameters('who')]" } })
        )]),
        json!({ "greeting": { "type": "string", "value": "[reference('child').outputs.greeting.value]" } }),
    );
    let child = template(
        json!({ "who": string_param() }),
        json!([vault("uri-kv")]),
        json!({ "greeting": { "type": "string", "value": "[concat('hello ', parameters('who'))]" } }),
    );
    let params = json!({ "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#",
                         "contentVersion": "1.0.0.0", "parameters": { "who": { "value": "world" } } });
    HashMap::from([
        ("/private/main.json".to_string(), main),
        ("/private/nested/child.json".to_string(), child),
        ("/private/params.json".to_string(), params),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uri_links_download_with_their_query_and_never_show_it() {
    let env = setup().await;
    let base = serve_templates(uri_files(), 0).await;
    let request: Deployment = serde_json::from_value(json!({ "properties": {
        "mode": "Incremental",
        "templateLink": { "uri": format!("{base}/private/main.json"), "queryString": SECRET },
        "parametersLink": { "uri": format!("{base}/private/params.json?{SECRET}") }
    }}))
    .unwrap();
    let record = deploy(&env.engine, RG, "fromuri", request).await;
    assert_eq!(state(&record), "Succeeded", "{record}");
    assert_eq!(
        record["properties"]["outputs"]["greeting"]["value"],
        "hello world"
    );
    assert_eq!(
        record["properties"]["templateLink"]["uri"],
        json!(format!("{base}/private/main.json"))
    );
    assert_eq!(
        record["properties"]["parametersLink"]["uri"],
        json!(format!("{base}/private/params.json"))
    );
    assert!(!record.to_string().contains("S3CR3T"), "{record}");
    let child = serde_json::to_value(env.engine.get(RG, "child").await.unwrap()).unwrap();
    assert_eq!(
        child["properties"]["templateLink"]["uri"],
        json!(format!("{base}/private/nested/child.json"))
    );
    // Nothing stored holds the SAS token in the clear: the root request keeps it sealed.
    for name in ["fromuri", "child"] {
        let stored = env
            .store
            .get_deployment(&cairn_store::DeploymentKey::new(RG, name))
            .await
            .unwrap()
            .unwrap();
        assert!(!stored.request.to_string().contains("S3CR3T"), "{name}");
    }
    let operations = env.engine.operations(RG, "fromuri").await.unwrap();
    assert!(!format!("{operations:?}").contains("S3CR3T"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_failures_are_invalid_content_links_without_the_query() {
    let env = setup_with(
        EngineSettings {
            max_linked_template_bytes: 1024,
            ..settings()
        },
        Duration::from_millis(5),
        Providers::empty(),
    )
    .await;
    let base = serve_templates(uri_files(), 4096).await;
    let cases = [
        (format!("{base}/private/absent.json"), Some(SECRET), "404"),
        (format!("{base}/private/main.json"), None, "403"),
        (format!("{base}/big.json"), Some(SECRET), "1024"),
        (format!("{base}/redirect"), Some(SECRET), "redirect"),
        ("file:///etc/passwd".to_string(), None, "http or https"),
    ];
    for (uri, query, expected) in cases {
        let mut link = json!({ "uri": uri });
        if let Some(q) = query {
            link["queryString"] = json!(q);
        }
        let err = env
            .engine
            .create_or_update(
                RG,
                "bad",
                linked_request(link, json!({})),
                Default::default(),
            )
            .await
            .unwrap_err()
            .to_arm();
        let message = err.detail().message().to_string();
        assert_eq!(
            (err.status(), err.detail().code()),
            (400, "InvalidContentLink"),
            "{message}"
        );
        assert!(message.contains(expected), "{message}");
        assert!(!message.contains("S3CR3T"), "{message}");
        assert!(
            message.contains(uri.split('?').next().unwrap()),
            "{message}"
        );
    }
    // The same limits apply to nested links: the deployment fails, naming the link without its query.
    let nested = template(
        json!({}),
        json!([linked(
            "n",
            json!({ "uri": format!("{base}/private/absent.json"), "queryString": SECRET }),
            json!({})
        )]),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "nestedbad", request(nested, json!({}))).await;
    assert_eq!(state(&record), "Failed");
    let text = record["properties"]["error"].to_string();
    assert!(
        text.contains("InvalidContentLink") && text.contains("absent.json"),
        "{text}"
    );
    assert!(!text.contains("S3CR3T"));
}

/// Templates by URI from a map, with no network.
struct MapFetcher {
    files: HashMap<String, Value>,
    fetched: Mutex<Vec<String>>,
}

impl TemplateFetcher for MapFetcher {
    fn fetch<'a>(&'a self, uri: &'a reqwest::Url, max_bytes: usize) -> FetchFuture<'a> {
        Box::pin(async move {
            self.fetched.lock().unwrap().push(uri.to_string());
            let body = self
                .files
                .get(uri.path())
                .ok_or(FetchError::Status(404))?
                .to_string()
                .into_bytes();
            if body.len() > max_bytes {
                return Err(FetchError::TooLarge(max_bytes));
            }
            Ok(body)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_fetcher_serves_what_if_validate_export_and_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path()).await;
    create_group(&store, "rg1").await;
    let fetcher = Arc::new(MapFetcher {
        files: uri_files(),
        fetched: Mutex::new(Vec::new()),
    });
    let fake = cairn_engine_fake();
    let engine = Engine::with_template_fetcher(
        store.clone(),
        host_with(&fake),
        Providers::empty(),
        settings(),
        fetcher.clone(),
    )
    .unwrap();
    let link = json!({ "uri": "https://templates.example.invalid/private/main.json", "queryString": SECRET });
    let parameters = json!({ "who": { "value": "fetcher" } });

    let (template, resolved_parameters) = engine
        .resolve_template(&linked_request(link.clone(), parameters.clone()).properties)
        .await
        .unwrap();
    assert_eq!(template, uri_files()["/private/main.json"]);
    assert_eq!(resolved_parameters.unwrap().0["who"]["value"], "fetcher");
    assert!(
        fetcher
            .fetched
            .lock()
            .unwrap()
            .iter()
            .all(|u| u.ends_with(SECRET))
    );

    let validated = engine
        .validate(RG, "v", linked_request(link.clone(), parameters.clone()))
        .await
        .unwrap();
    let validated = serde_json::to_value(validated).unwrap();
    assert!(validated["properties"]["templateHash"].is_string());
    assert_eq!(
        validated["properties"]["templateLink"]["uri"],
        "https://templates.example.invalid/private/main.json"
    );
    assert!(!validated.to_string().contains("S3CR3T"));

    let what_if: DeploymentWhatIf = serde_json::from_value(json!({ "properties": {
        "mode": "Incremental", "templateLink": link, "parameters": parameters } }))
    .unwrap();
    let result = serde_json::to_value(engine.what_if(RG, "w", what_if).await.unwrap()).unwrap();
    let changes = result["properties"]["changes"].as_array().unwrap();
    let vault_change = changes
        .iter()
        .find(|c| {
            c["resourceId"]
                .as_str()
                .is_some_and(|id| id.ends_with("/vaults/uri-kv"))
        })
        .unwrap_or_else(|| panic!("the nested vault is predicted: {result}"));
    assert_eq!(vault_change["changeType"], "Create");

    let record = deploy(&engine, RG, "mapped", linked_request(link, parameters)).await;
    assert_eq!(state(&record), "Succeeded", "{record}");
    assert_eq!(
        record["properties"]["outputs"]["greeting"]["value"],
        "hello fetcher"
    );
    let exported = engine.export_template(RG, "mapped").await.unwrap();
    assert_eq!(
        exported.template.unwrap(),
        uri_files()["/private/main.json"]
    );
}

fn cairn_engine_fake() -> Arc<FakeExtension> {
    FakeExtension::new(Duration::from_millis(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_uri_deployment_downloads_its_relative_links_with_the_sealed_query() {
    let crash_settings = EngineSettings {
        parallelism: 2,
        claim_ttl: Duration::from_millis(400),
        heartbeat_interval: Duration::from_millis(100),
        ..EngineSettings::default()
    };
    let env = setup_with(
        crash_settings.clone(),
        Duration::from_millis(300),
        Providers::empty(),
    )
    .await;
    let mut chain = serde_json::Map::new();
    for i in 0..4 {
        let mut w = widget(&format!("slow{i}"), json!({}));
        if i > 0 {
            w["dependsOn"] = json!([format!("r{}", i - 1)]);
        }
        chain.insert(format!("r{i}"), w);
    }
    let mut files = HashMap::new();
    files.insert(
        "/private/slow/main.json".to_string(),
        template(
            json!({}),
            json!([linked(
                "slowchild",
                json!({ "relativePath": "child.json" }),
                json!({})
            )]),
            json!({}),
        ),
    );
    files.insert(
        "/private/slow/child.json".to_string(),
        fake_template(Value::Object(chain), json!({})),
    );
    let base = serve_templates(files, 0).await;
    let link = json!({ "uri": format!("{base}/private/slow/main.json"), "queryString": SECRET });
    let handle = env
        .engine
        .create_or_update(
            RG,
            "slow",
            linked_request(link, json!({})),
            Default::default(),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while env.fake.count() < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deployment did not progress"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(handle);
    let TestEnv {
        dir,
        store,
        engine,
        fake,
    } = env;
    drop(engine);
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(store);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let store = open_store(dir.path()).await;
    let engine = Engine::new(
        store.clone(),
        host_with(&fake),
        Providers::empty(),
        crash_settings,
    )
    .unwrap();
    let report = engine.recover().await.unwrap();
    assert_eq!(report.resumed.len(), 1, "{report:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let record = loop {
        let record = serde_json::to_value(engine.get(RG, "slow").await.unwrap()).unwrap();
        if !matches!(state(&record), "Running" | "Accepted") {
            break record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {record:#}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The child template is behind the SAS query: the resumed run could only download it with the unsealed query.
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(fake.count(), 4);
    assert!(!record.to_string().contains("S3CR3T"));
}
