//! Runs cairn-store's backend-independent conformance suite against the PostgreSQL store: every case on a fresh
//! database of one throwaway cluster.

mod common;

use std::process::ExitCode;

use cairn_store::Store;
use cairn_store::conformance::ALL_CASES;
use common::Case;

fn main() -> ExitCode {
    let cases = ALL_CASES
        .iter()
        .map(|&(name, case)| {
            Case::new(name, move |cluster| {
                Box::pin(async move {
                    let store = cluster.fresh_store().await;
                    case(&store).await;
                    store.close().await.expect("close");
                })
            })
        })
        .collect();
    common::run(cases)
}
