//! Pulling an extension artifact: cairn's first, uncached pull of a 30 MB binary against `skopeo copy` of the
//! same artifact from the same registry in the same run, and what a cached extension costs (the tag check
//! against the registry, then the cache). Run with `cargo bench -p cairn-oci --bench pull`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use cairn_oci::lock::{Pin, resolve_pin};
use cairn_oci::{Artifact, ArtifactRef, Cache, OciClient, RegistryPolicy, TypesPackage};
use cairn_testregistry::TestRegistry;

const BINARY_BYTES: usize = 30 * 1024 * 1024;
const ROUNDS: usize = 5;

/// Incompressible bytes (xorshift), so neither side gains from compression.
fn noise(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn client(cache: &std::path::Path) -> OciClient {
    OciClient::new(Cache::new(cache), RegistryPolicy::default())
        .with_env(std::sync::Arc::new(|_: &str| None))
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let registry = TestRegistry::start();
    let work = tempfile::tempdir()?;
    let types = TypesPackage {
        files: BTreeMap::from([(
            "index.json".to_owned(),
            br#"{"resources":{},"settings":{"name":"Bench","version":"1.0.0","isSingleton":false}}"#.to_vec(),
        )]),
    };
    let artifact = Artifact::build(
        &types,
        &[("linux-x64".into(), noise(BINARY_BYTES))],
        &cairn_oci::artifact::now(),
    )?;
    let reference =
        ArtifactRef::parse(&format!("br:{}/bench/ext:1.0.0", registry.address()), None)?;
    runtime.block_on(client(&work.path().join("publisher")).push(&artifact, &reference, false))?;

    let mut cairn = Vec::new();
    let mut skopeo = Vec::new();
    for round in 0..ROUNDS {
        let cache = work.path().join(format!("cache-{round}"));
        let started = Instant::now();
        let pulled = runtime.block_on(client(&cache).pull(&reference, "linux-x64"))?;
        cairn.push(started.elapsed());
        anyhow::ensure!(pulled.binary.is_some(), "no binary pulled");

        let target = work.path().join(format!("skopeo-{round}"));
        let started = Instant::now();
        let status = Command::new("skopeo")
            .args(["copy", "--quiet", "--src-tls-verify=false"])
            .arg(format!("docker://{}/bench/ext:1.0.0", registry.address()))
            .arg(format!("oci:{}:1.0.0", target.display()))
            .status()?;
        skopeo.push(started.elapsed());
        anyhow::ensure!(status.success(), "skopeo copy failed");
    }

    // A cached extension: the lock file's tag check (one HEAD) and the pull from the cache.
    let cache = work.path().join("cache-0");
    let lock = work.path().join("cairn.lock.json");
    let pin = Pin::LockFile(lock);
    let warm = client(&cache);
    runtime.block_on(resolve_pin(
        &warm, "Bench", "1.0.0", &reference, &pin, false,
    ))?;
    let mut cached = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let digest = runtime.block_on(resolve_pin(
            &warm, "Bench", "1.0.0", &reference, &pin, false,
        ))?;
        runtime.block_on(warm.pull(&reference.with_digest(&digest), "linux-x64"))?;
        cached.push(started.elapsed());
    }

    let (cairn, skopeo, cached) = (median(cairn), median(skopeo), median(cached));
    println!(
        "artifact: {} MB binary, {ROUNDS} rounds, medians",
        BINARY_BYTES / (1024 * 1024)
    );
    println!(
        "cairn pull, uncached      {:>9.1} ms",
        cairn.as_secs_f64() * 1e3
    );
    println!(
        "skopeo copy (same blobs)  {:>9.1} ms",
        skopeo.as_secs_f64() * 1e3
    );
    println!(
        "ratio cairn / skopeo      {:>9.2}",
        cairn.as_secs_f64() / skopeo.as_secs_f64()
    );
    println!(
        "cached: tag check + cache {:>9.1} ms",
        cached.as_secs_f64() * 1e3
    );
    Ok(())
}
