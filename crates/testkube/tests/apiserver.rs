//! The real control plane end to end, over plain HTTPS: the admin creates a namespace and a ConfigMap
//! and reads it back; a ServiceAccount gets a token through the TokenRequest API, which authenticates,
//! and RBAC denies it until a RoleBinding grants access; the namespace's deletion completes (the
//! controller-manager's namespace controller at work); and stopping it, or a panic, leaves nothing behind.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use cairn_testkube::{ADMIN_USER, KUBE_VERSION, TestKube};
use reqwest::{Certificate, Client, Identity, Method, StatusCode};
use serde_json::{Value, json};

/// A client that trusts only the cluster CA, optionally presenting the admin's certificate.
fn client(kube: &TestKube, admin: bool) -> Result<Client> {
    let mut builder = Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(Certificate::from_pem(kube.ca_pem().as_bytes())?)
        .timeout(Duration::from_secs(30));
    if admin {
        let pem = format!("{}{}", kube.admin_cert_pem(), kube.admin_key_pem());
        builder = builder.identity(Identity::from_pem(pem.as_bytes())?);
    }
    Ok(builder.build()?)
}

/// Sends `body` (if any) to `path` and returns the status and the JSON answer (`Null` when empty).
async fn call(
    client: &Client,
    kube: &TestKube,
    method: Method,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> Result<(StatusCode, Value)> {
    let mut request = client.request(method.clone(), format!("{}{path}", kube.server_url()));
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("{method} {path}"))?;
    let status = response.status();
    let text = response.text().await?;
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).with_context(|| format!("{method} {path}: {text}"))?
    };
    Ok((status, value))
}

/// Like [`call`], failing unless the status is `expected`.
async fn expect(
    client: &Client,
    kube: &TestKube,
    method: Method,
    path: &str,
    body: Option<Value>,
    expected: StatusCode,
) -> Result<Value> {
    let (status, value) = call(client, kube, method.clone(), path, None, body).await?;
    ensure!(
        status == expected,
        "{method} {path}: {status} (expected {expected}): {value}"
    );
    Ok(value)
}

/// Polls `condition` every 200 ms until it holds or `limit` passes.
async fn eventually<F, Fut>(what: &str, limit: Duration, mut condition: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let started = Instant::now();
    loop {
        if condition().await? {
            return Ok(());
        }
        if started.elapsed() > limit {
            bail!("{what}: still not so after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_api_server_authenticates_authorizes_and_deletes_namespaces() -> Result<()> {
    let kube = TestKube::start();
    let outcome = exercise(&kube).await;
    if outcome.is_err() {
        // The components' own words are what explains a failure here.
        for component in ["kube-apiserver", "kube-controller-manager"] {
            let log = kube.log(component);
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- end of the {component} log ---");
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
    outcome?;

    let port = kube.port();
    let dir = kube.dir().to_owned();
    let pids = kube.process_ids();
    ensure!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    kube.stop();
    ensure_gone(port, &dir, &pids)
}

#[test]
fn a_panicking_test_still_stops_its_control_plane() -> Result<()> {
    let (sender, receiver) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let kube = TestKube::start();
        sender
            .send((kube.port(), kube.dir().to_owned(), kube.process_ids()))
            .unwrap();
        panic!("the test fails while the control plane runs");
    })
    .join();
    ensure!(outcome.is_err(), "the thread did not panic");
    let (port, dir, pids) = receiver.recv()?;
    ensure!(pids.len() == 3, "{pids:?}");
    ensure_gone(port, &dir, &pids)
}

/// Nothing is left of a stopped control plane: no listener, no process, no directory.
fn ensure_gone(port: u16, dir: &std::path::Path, pids: &[u32]) -> Result<()> {
    ensure!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the API server still listens after stop"
    );
    for pid in pids {
        ensure!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} still runs after stop"
        );
    }
    ensure!(!dir.exists(), "{} is still there after stop", dir.display());
    Ok(())
}

async fn exercise(kube: &TestKube) -> Result<()> {
    let admin = client(kube, true)?;
    let anonymous = client(kube, false)?;
    let ns = format!("cairn-test-{:08x}", rand::random::<u32>());
    let configmaps = format!("/api/v1/namespaces/{ns}/configmaps");

    // The kubeconfig names the same server, CA and client as the accessors.
    ensure!(kube.kubeconfig().contains(&kube.server_url()));
    ensure!(std::fs::read_to_string(kube.kubeconfig_path())? == kube.kubeconfig());

    // The server is the pinned release the binaries were built from.
    let version = expect(&admin, kube, Method::GET, "/version", None, StatusCode::OK).await?;
    ensure!(version["gitVersion"] == KUBE_VERSION, "{version}");

    // The admin is who its certificate says, in system:masters.
    let review = expect(
        &admin,
        kube,
        Method::POST,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        StatusCode::CREATED,
    )
    .await?;
    ensure!(
        review["status"]["userInfo"]["username"] == ADMIN_USER,
        "{review}"
    );
    ensure!(
        review["status"]["userInfo"]["groups"]
            .as_array()
            .is_some_and(|groups| groups.contains(&json!("system:masters"))),
        "{review}"
    );

    // Namespace and ConfigMap, written and read back.
    expect(
        &admin,
        kube,
        Method::POST,
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
        StatusCode::CREATED,
    )
    .await?;
    expect(
        &admin,
        kube,
        Method::POST,
        &configmaps,
        Some(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings"},
            "data": {"greeting": "hello", "answer": "42"},
        })),
        StatusCode::CREATED,
    )
    .await?;
    let read = expect(
        &admin,
        kube,
        Method::GET,
        &format!("{configmaps}/settings"),
        None,
        StatusCode::OK,
    )
    .await?;
    ensure!(
        read["data"] == json!({"greeting": "hello", "answer": "42"}),
        "{read}"
    );

    // A ServiceAccount and a token for it from the TokenRequest API.
    expect(
        &admin,
        kube,
        Method::POST,
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        Some(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "deployer"}}),
        ),
        StatusCode::CREATED,
    )
    .await?;
    let token_request = expect(
        &admin,
        kube,
        Method::POST,
        &format!("/api/v1/namespaces/{ns}/serviceaccounts/deployer/token"),
        Some(json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        })),
        StatusCode::CREATED,
    )
    .await?;
    let token = token_request["status"]["token"]
        .as_str()
        .with_context(|| format!("no token in {token_request}"))?
        .to_owned();

    // The token authenticates as the service account...
    let (status, review) = call(
        &anonymous,
        kube,
        Method::POST,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(&token),
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
    )
    .await?;
    ensure!(status == StatusCode::CREATED, "{status}: {review}");
    ensure!(
        review["status"]["userInfo"]["username"] == format!("system:serviceaccount:{ns}:deployer"),
        "{review}"
    );
    // ...a forged one does not...
    let (status, _) = call(
        &anonymous,
        kube,
        Method::GET,
        &configmaps,
        Some("not-a-token"),
        None,
    )
    .await?;
    ensure!(
        status == StatusCode::UNAUTHORIZED,
        "a forged token got {status}"
    );
    // ...and RBAC denies the real one until a RoleBinding grants access.
    let (status, denied) = call(
        &anonymous,
        kube,
        Method::GET,
        &configmaps,
        Some(&token),
        None,
    )
    .await?;
    ensure!(status == StatusCode::FORBIDDEN, "{status}: {denied}");
    expect(
        &admin,
        kube,
        Method::POST,
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "configmap-reader"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        })),
        StatusCode::CREATED,
    )
    .await?;
    expect(
        &admin,
        kube,
        Method::POST,
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "deployer-reads-configmaps"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": ns}],
        })),
        StatusCode::CREATED,
    )
    .await?;
    // The authorizer reads RBAC objects from an informer cache: the grant takes effect shortly after.
    eventually(
        "the RoleBinding lets the token list ConfigMaps",
        Duration::from_secs(30),
        || async {
            let (status, list) = call(
                &anonymous,
                kube,
                Method::GET,
                &configmaps,
                Some(&token),
                None,
            )
            .await?;
            match status {
                StatusCode::FORBIDDEN => Ok(false),
                StatusCode::OK => {
                    ensure!(
                        list["items"].as_array().is_some_and(|items| items
                            .iter()
                            .any(|item| item["metadata"]["name"] == "settings")),
                        "{list}"
                    );
                    Ok(true)
                }
                other => bail!("{other}: {list}"),
            }
        },
    )
    .await?;
    // The grant is for reading only.
    let (status, denied) = call(
        &anonymous,
        kube,
        Method::DELETE,
        &format!("{configmaps}/settings"),
        Some(&token),
        None,
    )
    .await?;
    ensure!(status == StatusCode::FORBIDDEN, "{status}: {denied}");

    // Deleting the namespace only marks it Terminating; the controller-manager's namespace
    // controller empties it and removes it.
    expect(
        &admin,
        kube,
        Method::DELETE,
        &format!("/api/v1/namespaces/{ns}"),
        None,
        StatusCode::OK,
    )
    .await?;
    eventually(
        "the namespace is gone",
        Duration::from_secs(120),
        || async {
            let (status, value) = call(
                &admin,
                kube,
                Method::GET,
                &format!("/api/v1/namespaces/{ns}"),
                None,
                None,
            )
            .await?;
            match status {
                StatusCode::NOT_FOUND => Ok(true),
                StatusCode::OK => Ok(false),
                other => bail!("{other}: {value}"),
            }
        },
    )
    .await?;
    Ok(())
}
