//! Crash recovery: a child process writes a running deployment through the store and aborts without closing it
//! (no destructor runs, no checkpoint); the parent reopens the data directory and finds everything a resumed run
//! needs. Runs as its own binary (`harness = false`) because it re-executes itself as the child.

use std::path::Path;
use std::process::{Command, ExitCode};

use cairn_store::conformance::{at, new_deployment, step};
use cairn_store::{
    DeploymentKey, DeploymentOwner, DeploymentStatus, DeploymentStore, DeploymentUpdate,
    ExposeSecret, OperationJournal, Precondition, SecretOwner, SecretRef, SecretStore,
    SecretString,
};
use cairn_store_sqlite::SqliteStore;

const CHILD_FLAG: &str = "--crash-child";
const SCOPE: &str = "/subscriptions/s/resourceGroups/rg";
const SECRET: &str = "crash-secret-value";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(position) = args.iter().position(|a| a == CHILD_FLAG) {
        let Some(dir) = args.get(position + 1) else {
            eprintln!("{CHILD_FLAG} needs a directory");
            return ExitCode::FAILURE;
        };
        child(Path::new(dir));
    }
    match parent() {
        Ok(()) => {
            println!("test crash_recovery::writes_survive_an_abort ... ok");
            println!("1 passed, 0 failed");
            ExitCode::SUCCESS
        }
        Err(error) => {
            println!("test crash_recovery::writes_survive_an_abort ... FAILED: {error:#}");
            println!("0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}

/// Writes, reports the secret reference on stdout, and aborts with the store still open.
fn child(dir: &Path) -> ! {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let reference = runtime.block_on(async {
        let store = SqliteStore::open(dir).await.expect("open");
        let mut new = new_deployment(SCOPE, "crashing", None);
        let owner = SecretOwner::Deployment(new.id.clone());
        let reference = store
            .put_secret(
                &owner,
                "parameters.adminPassword",
                &SecretString::from(SECRET.to_owned()),
                at(0),
            )
            .await
            .expect("secret");
        new.request =
            serde_json::json!({"parameters": {"adminPassword": {"value": reference.to_marker()}}});
        new.owner = Some(DeploymentOwner {
            owner: "replica-that-crashes".into(),
            expires_at: at(60_000),
        });
        let run = store
            .put_deployment(new, Precondition::MustNotExist)
            .await
            .expect("create");
        let running = DeploymentUpdate {
            status: Some(DeploymentStatus::Running),
            ..DeploymentUpdate::at(at(1))
        };
        store
            .update_deployment(&run.id, run.version, running)
            .await
            .expect("running");
        for (op, state, millis) in [
            ("a", "Running", 2),
            ("a", "Succeeded", 3),
            ("b", "Running", 4),
        ] {
            store
                .append_operation(step(&run.id, op, state, millis), None)
                .await
                .expect("append");
        }
        std::mem::forget(store);
        reference
    });
    println!("{}", reference.as_str());
    std::process::abort();
}

fn parent() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let output = Command::new(std::env::current_exe()?)
        .arg(CHILD_FLAG)
        .arg(dir.path())
        .output()?;
    anyhow::ensure!(!output.status.success(), "the child was expected to abort");
    let reference = SecretRef::from_string(String::from_utf8(output.stdout)?.trim());
    anyhow::ensure!(
        !reference.as_str().is_empty(),
        "the child reported no reference: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = SqliteStore::open(dir.path()).await?;
        let run = store
            .get_deployment(&DeploymentKey::new(SCOPE, "crashing"))
            .await?
            .ok_or_else(|| anyhow::anyhow!("the deployment is gone"))?;
        anyhow::ensure!(
            run.status == DeploymentStatus::Running && run.version == 2,
            "state lost: {run:?}"
        );
        anyhow::ensure!(
            store
                .list_orphaned_deployments(at(30_000), 10)
                .await?
                .is_empty(),
            "claim still live"
        );
        let orphans = store.list_orphaned_deployments(at(60_000), 10).await?;
        anyhow::ensure!(
            orphans.len() == 1 && orphans[0].id == run.id,
            "not offered for resumption: {orphans:?}"
        );
        store
            .claim_deployment(&run.id, "replica-that-resumes", at(120_000), at(60_000))
            .await?;
        let latest: Vec<_> = store
            .latest_operations(&run.id)
            .await?
            .into_iter()
            .map(|r| (r.step.operation_id, r.step.provisioning_state))
            .collect();
        anyhow::ensure!(
            latest
                == [
                    ("a".to_owned(), "Succeeded".to_owned()),
                    ("b".to_owned(), "Running".to_owned())
                ],
            "journal lost: {latest:?}"
        );
        let marker = &run.request["parameters"]["adminPassword"]["value"];
        anyhow::ensure!(
            SecretRef::from_marker(marker).as_ref() == Some(&reference),
            "reference lost: {marker}"
        );
        anyhow::ensure!(
            store.get_secret(&reference).await?.expose_secret() == SECRET,
            "secret lost"
        );
        Ok(())
    })
}
