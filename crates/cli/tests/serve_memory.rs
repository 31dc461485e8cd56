//! Memory is bounded per server, not only per deployment: concurrent deployments that each stay within their own
//! evaluation limits (nested `createObject` doubling, every value under the value limit) end `Failed` with a limit
//! error, the server stays up, and its peak memory stays near the server-wide budget. docs/limits.md gives the
//! full-size figures (24 deployments under a 3 GiB cap).

mod common;

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const DV: &str = "api-version=2025-04-01";
const MIB: u64 = 1024 * 1024;

/// A template whose outputs copy a doubled object many times: each value is small enough, their total is not.
fn doubling(levels: usize, copies: usize) -> Value {
    let mut variables = serde_json::Map::new();
    variables.insert(
        "l0".into(),
        json!("[createObject('a', 'xxxxxxxx', 'b', 'yyyyyyyy')]"),
    );
    for k in 1..=levels {
        variables.insert(
            format!("l{k}"),
            json!(format!(
                "[createObject('a', variables('l{0}'), 'b', variables('l{0}'))]",
                k - 1
            )),
        );
    }
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {"seed": {"type": "string"}},
        "variables": variables,
        "resources": [],
        "outputs": {"many": {"type": "array", "copy": {"count": copies,
            "input": format!("[createObject('i', copyIndex(), 's', parameters('seed'), 'v', variables('l{levels}'))]")}}}
    })
}

/// The peak resident memory of a process (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_deployments_within_their_limits_cannot_exhaust_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let per_deployment = 24 * MIB;
    let server_wide = 64 * MIB;
    let server = common::start_serve(
        &[
            OsStr::new("--data-dir"),
            data_dir.as_os_str(),
            OsStr::new("--max-eval-total-bytes"),
            OsStr::new(&per_deployment.to_string()),
            OsStr::new("--max-eval-server-bytes"),
            OsStr::new(&server_wide.to_string()),
        ],
        &[],
    );
    let client = reqwest::Client::new();
    let put = client
        .put(format!("{}{SUB}/resourcegroups/probe?{DV}", server.url))
        .json(&json!({"location": "local"}))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success());
    let baseline = peak_rss(server.child.id());

    // Eight hostile deployments at once, and one small one that fits its own budget.
    let template = doubling(12, 40);
    let mut runs = Vec::new();
    for i in 0..9 {
        let client = client.clone();
        let url = server.url.clone();
        let body = if i == 8 {
            json!({"properties": {"mode": "Incremental", "template": doubling(2, 2),
                                  "parameters": {"seed": {"value": "small"}}}})
        } else {
            json!({"properties": {"mode": "Incremental", "template": template.clone(),
                                  "parameters": {"seed": {"value": i.to_string()}}}})
        };
        runs.push(tokio::spawn(async move {
            let path = format!("{url}{SUB}/resourcegroups/probe/providers/Microsoft.Resources/deployments/d{i}?{DV}");
            let put = client.put(&path).json(&body).send().await.unwrap();
            let status = put.status().as_u16();
            let text = put.text().await.unwrap();
            if status != 201 {
                return (i, status.to_string(), text);
            }
            let started = Instant::now();
            loop {
                let got: Value = client.get(&path).send().await.unwrap().json().await.unwrap();
                let state = got["properties"]["provisioningState"].as_str().unwrap_or_default().to_owned();
                if ["Succeeded", "Failed", "Canceled"].contains(&state.as_str()) {
                    return (i, state, got["properties"]["error"].to_string());
                }
                assert!(started.elapsed() < Duration::from_secs(120), "d{i} did not end");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    for run in runs {
        let (i, state, error) = run.await.unwrap();
        if i == 8 {
            // It fits its own budget; it may still find the server's spent by the others at that moment.
            assert!(
                state == "Succeeded" || (state == "Failed" && error.contains("maxServerBytes")),
                "the small deployment ended {state}: {error}"
            );
        } else {
            assert!(
                (state == "Failed" || state == "400") && error.contains("EvaluationLimitExceeded"),
                "d{i} ended {state}: {error}"
            );
        }
    }
    let health = client
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200, "the server went down");
    // Eight deployments each allowed 24 MiB would hold 192 MiB of values at once; the server holds at most 64 MiB
    // of them. Allow for the records and JSON copies of what was evaluated, and for the allocator.
    let grown = peak_rss(server.child.id()).saturating_sub(baseline);
    assert!(
        grown < 3 * server_wide,
        "the server grew by {} MiB for a server-wide budget of {} MiB",
        grown / MIB,
        server_wide / MIB
    );
}
