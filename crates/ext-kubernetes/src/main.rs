//! `cairn-ext-kubernetes`: serves the Kubernetes extension over HTTP v2 and gRPC (`--http PORT`,
//! `--listen ADDR`, `--socket PATH`).

use std::process::ExitCode;

fn main() -> ExitCode {
    cairn_extension_sdk::serve_main(cairn_ext_kubernetes::extension())
}
