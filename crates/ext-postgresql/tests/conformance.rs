//! The conformance kit passes against the PostgreSql extension in process, over HTTP (the binary with
//! `--http 0`) and over gRPC (the binary with `--socket`), each against a real server.

mod common;

use std::process::Stdio;

use cairn_conformance::{Options, Outcome, Protocol, Report, run};
use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};
use cairn_testpg::TestPostgres;
use tokio::io::{AsyncBufReadExt, BufReader};

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

fn assert_passed(report: &Report, names: &[&str]) {
    assert!(
        report.passed(),
        "conformance failed:\n{}",
        report.render_table()
    );
    for name in names {
        assert_eq!(
            report.result(name).map(|r| r.outcome),
            Some(Outcome::Pass),
            "{name}:\n{}",
            report.render_table()
        );
    }
}

const HTTP_ONLY: &[&str] = &[
    "header-echo",
    "config-echo",
    "configId-stability",
    "configId-mismatch",
];

#[tokio::test]
async fn conformance_in_process() {
    let cluster = TestPostgres::start();
    let transport = cairn_ext_postgresql::in_process_transport();
    let report = run(
        &transport,
        &common::profile(&cluster),
        &Options::new(Protocol::Http),
    )
    .await;
    assert_passed(&report, LIFECYCLE);
    assert_passed(&report, HTTP_ONLY);
}

#[tokio::test]
async fn conformance_over_http() {
    let cluster = TestPostgres::start();
    let mut child = tokio::process::Command::new(common::BINARY)
        .args(["--http", "0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().unwrap();
    let base = line.strip_prefix("listening on ").unwrap().to_owned();
    let transport =
        cairn_host::http_transport::HttpV2Transport::new(reqwest::Client::new(), &base, None)
            .unwrap();
    let report = run(
        &transport,
        &common::profile(&cluster),
        &Options::new(Protocol::Http),
    )
    .await;
    assert_passed(&report, LIFECYCLE);
    assert_passed(&report, HTTP_ONLY);
}

#[tokio::test]
async fn conformance_over_grpc() {
    let cluster = TestPostgres::start();
    let transport = LocalProcessTransport::new(LaunchSpec::new(common::BINARY));
    let report = run(
        &transport,
        &common::profile(&cluster),
        &Options::new(Protocol::Grpc),
    )
    .await;
    transport.shutdown().await;
    assert_passed(&report, &LIFECYCLE[1..]);
}
