//! The listener over real sockets: TLS with a self-signed certificate, HTTP/2 by ALPN and HTTP/1.1,
//! h2c by prior knowledge, bad key files, and graceful shutdown.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use cairn_server::{Listener, TlsFiles};
use common::TestApp;
use tokio_util::sync::CancellationToken;

struct Served {
    url: String,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<std::time::Instant>,
}

async fn start(tls: Option<&TlsFiles>) -> Served {
    let app = TestApp::with_tokens("tls-token\n").await;
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let listener = Listener::bind(addr, tls)
        .await
        .unwrap()
        .with_grace_period(Duration::from_secs(5));
    let scheme = if listener.is_tls() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(listener.serve(app.router, shutdown.clone()));
    Served {
        url,
        shutdown,
        task,
    }
}

fn write_certificate(dir: &Path) -> (TlsFiles, String) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert_pem = certified.cert.pem();
    let files = TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&files.cert, &cert_pem).unwrap();
    std::fs::write(&files.key, certified.signing_key.serialize_pem()).unwrap();
    (files, cert_pem)
}

#[tokio::test]
async fn tls_serves_h2_by_alpn_and_http1_and_absolute_urls_use_https() {
    let dir = tempfile::tempdir().unwrap();
    let (files, cert_pem) = write_certificate(dir.path());
    let served = start(Some(&files)).await;
    let root = reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap();

    let h2 = reqwest::Client::builder()
        .add_root_certificate(root.clone())
        .build()
        .unwrap();
    let health = h2
        .get(format!("{}/healthz", served.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.version(), reqwest::Version::HTTP_2);

    let http1 = reqwest::Client::builder()
        .add_root_certificate(root)
        .http1_only()
        .build()
        .unwrap();
    let unauthenticated = http1
        .get(format!(
            "{}/subscriptions/s/resourcegroups?api-version=2025-04-01",
            served.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.version(), reqwest::Version::HTTP_11);
    assert_eq!(unauthenticated.status(), 401);

    // nextLink and Location are built from the request's scheme and authority.
    for i in 0..3 {
        let response = h2
            .put(format!(
                "{}/subscriptions/s/resourcegroups/rg{i}?api-version=2025-04-01",
                served.url
            ))
            .bearer_auth("tls-token")
            .json(&serde_json::json!({"location": "westus"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
    }
    let groups: serde_json::Value = h2
        .get(format!(
            "{}/subscriptions/s/resourcegroups?api-version=2025-04-01",
            served.url
        ))
        .bearer_auth("tls-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(groups["value"].as_array().unwrap().len(), 3);

    served.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), served.task)
        .await
        .expect("the server stops after the shutdown signal")
        .unwrap();
}

#[tokio::test]
async fn plain_http_serves_h2c_by_prior_knowledge() {
    let served = start(None).await;
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let health = client
        .get(format!("{}/healthz", served.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.version(), reqwest::Version::HTTP_2);
    assert_eq!(health.status(), 200);
    served.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), served.task)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn unusable_key_files_are_reported_without_their_content() {
    let dir = tempfile::tempdir().unwrap();
    let (mut files, _) = write_certificate(dir.path());
    std::fs::write(dir.path().join("bad.pem"), "not a key SECRETMATERIAL").unwrap();
    files.key = dir.path().join("bad.pem");
    let Err(error) = Listener::bind("127.0.0.1:0".parse().unwrap(), Some(&files)).await else {
        panic!("a file without a key must be refused");
    };
    let message = error.to_string();
    assert!(message.contains("bad.pem"), "{message}");
    assert!(!message.contains("SECRETMATERIAL"), "{message}");
    files.key = dir.path().join("missing.pem");
    assert!(
        Listener::bind("127.0.0.1:0".parse().unwrap(), Some(&files))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn serving_without_tokens_beyond_loopback_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = cairn_server::serve::ServeConfig {
        engine: cairn_engine::EngineSettings::default(),
        shutdown_grace: cairn_server::serve::DEFAULT_SHUTDOWN_GRACE,
        listen: "0.0.0.0:0".parse().unwrap(),
        tls: None,
        tokens: None,
        insecure_no_auth: false,
        store: cairn_assembly::StoreLocation::data_dir(dir.path().join("data")),
        registry: std::sync::Arc::new(cairn_host::Registry::new()),
        options: cairn_server::ServerOptions::default(),
    };
    let result = cairn_server::serve::run(config, CancellationToken::new(), |_| {
        panic!("must not start listening")
    })
    .await;
    assert!(matches!(
        result,
        Err(cairn_server::serve::ServeError::UnauthenticatedNonLoopback(
            _
        ))
    ));
    assert!(
        !dir.path().join("data").exists(),
        "nothing is created before the check"
    );
}

#[tokio::test]
async fn serve_runs_until_shutdown_and_reports_its_address() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "serve-token\n").unwrap();
    let config = cairn_server::serve::ServeConfig {
        engine: cairn_engine::EngineSettings::default(),
        shutdown_grace: cairn_server::serve::DEFAULT_SHUTDOWN_GRACE,
        listen: "127.0.0.1:0".parse().unwrap(),
        tls: None,
        tokens: Some(dir.path().join("tokens")),
        insecure_no_auth: false,
        store: cairn_assembly::StoreLocation::data_dir(dir.path().join("data")),
        registry: std::sync::Arc::new(cairn_host::Registry::new()),
        options: cairn_server::ServerOptions::default(),
    };
    let shutdown = CancellationToken::new();
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(cairn_server::serve::run(
        config,
        shutdown.clone(),
        move |bound| {
            let _ = bound_tx.send(bound);
        },
    ));
    let bound = bound_rx.await.unwrap();
    assert!(bound.authenticated && !bound.tls);
    let client = reqwest::Client::new();
    let group = client
        .put(format!(
            "{}/subscriptions/s/resourcegroups/rg?api-version=2025-04-01",
            bound.url()
        ))
        .bearer_auth("serve-token")
        .json(&serde_json::json!({"location": "westus"}))
        .send()
        .await
        .unwrap();
    assert_eq!(group.status(), 201);
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(dir.path().join("data/cairn.db").exists());
    // The store creates the data directory, private to its owner, as the in-process CLI's is.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("data"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
