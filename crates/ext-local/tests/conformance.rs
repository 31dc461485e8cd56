//! The conformance kit passes against the Local extension in process, over HTTP (loopback) and over gRPC
//! (the `cairn-ext-local` binary started with `--socket`).

mod common;

use cairn_conformance::{Options, Outcome, Protocol, run};
use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};

fn assert_passed(report: &cairn_conformance::Report, expected_passes: &[&str]) {
    assert!(
        report.passed(),
        "conformance failed:\n{}",
        report.render_table()
    );
    for name in expected_passes {
        let result = report
            .result(name)
            .unwrap_or_else(|| panic!("no check {name}"));
        assert_eq!(
            result.outcome,
            Outcome::Pass,
            "{name} did not pass:\n{}",
            report.render_table()
        );
    }
}

const LIFECYCLE: &[&str] = &[
    "unknown-version",
    "unknown-type",
    "error-shape",
    "preview",
    "preview-unevaluated",
    "create",
    "get",
    "idempotent-repeat",
    "update",
    "delete",
    "get-after-delete",
    "delete-missing",
];

#[tokio::test]
async fn conformance_in_process() {
    let root = tempfile::tempdir().unwrap();
    let transport = cairn_ext_local::in_process_transport();
    let report = run(
        &transport,
        &common::profile(root.path()),
        &Options::new(Protocol::Http),
    )
    .await;
    assert_passed(&report, LIFECYCLE);
    assert_passed(
        &report,
        &[
            "header-echo",
            "config-echo",
            "configId-stability",
            "configId-mismatch",
        ],
    );
}

#[tokio::test]
async fn conformance_over_http() {
    let root = tempfile::tempdir().unwrap();
    let server = common::start_http_server().await;
    let transport = common::LoopbackHttp {
        client: reqwest::Client::new(),
        base: server.base.clone(),
    };
    let report = run(
        &transport,
        &common::profile(root.path()),
        &Options::new(Protocol::Http),
    )
    .await;
    assert_passed(&report, LIFECYCLE);
    assert_passed(
        &report,
        &[
            "header-echo",
            "config-echo",
            "configId-stability",
            "configId-mismatch",
        ],
    );
    // The sample file really went through the filesystem and was deleted again.
    assert!(root.path().join("conformance").is_dir());
    assert!(!root.path().join("conformance/sample.txt").exists());
}

#[tokio::test]
async fn conformance_over_grpc() {
    let root = tempfile::tempdir().unwrap();
    let transport = LocalProcessTransport::new(LaunchSpec::new(common::BINARY));
    let report = run(
        &transport,
        &common::profile(root.path()),
        &Options::new(Protocol::Grpc),
    )
    .await;
    transport.shutdown().await;
    // gRPC carries no extension version, so that check is skipped.
    assert_passed(&report, &LIFECYCLE[1..]);
    assert_eq!(
        report.result("header-echo").map(|r| r.outcome),
        Some(Outcome::Skip)
    );
}
