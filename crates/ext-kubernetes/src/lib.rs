//! The Kubernetes extension: any object of a real Kubernetes API server, managed through its whole
//! lifecycle over the extension contract.
//!
//! - Config: the built-in `Kubernetes` 1.0.0 form `{ kubeConfig, namespace, context? }` and the OCI
//!   types' form `{ clusterType: 'Custom', kubeconfig, namespace?, context? }`, the kubeconfig base64 or
//!   YAML, also in the reserved `auth` group ([`config`]); `configId` hashes the server URL and the
//!   `kube-system` namespace's UID.
//! - Types `<group>/<Kind>` with apiVersion `<version>` (`core/ConfigMap` + `v1`, `apps/Deployment` +
//!   `v1`, custom resources of any installed CRD), resolved by discovery ([`discovery`]); the body is the
//!   manifest ([`manifest`]).
//! - Operations ([`objects`]): server-side apply as field manager `cairn`, get without server noise,
//!   delete with a propagation policy that waits for finalizers, preview by server-side dry run, and
//!   readiness (`waitFor`) opted into per resource ([`readiness`]); the fields an apply shares with
//!   `kubectl apply`'s client-side manager become cairn's alone ([`ownership`]).
//!
//! - Types ([`types()`], Bicep's type format): the manifest as a fallback type open to any kind, and a few core
//!   kinds with a closed top level; served by `GetTypeFiles` and written by `--types DIR`.
//!
//! The client is kube-rs over rustls ([`cluster`]); nothing shells out to `kubectl`. Serve it in process
//! with [`in_process_transport`], or run the `cairn-ext-kubernetes` binary (`--http PORT`,
//! `--listen ADDR`, `--socket PATH`).

pub mod api;
pub mod cluster;
pub mod config;
pub mod discovery;
pub mod error;
pub mod kubeconfig;
pub mod manifest;
pub mod objects;
pub mod ownership;
pub mod readiness;
pub mod types;

use cairn_extension_sdk::{Extension, InProcessTransport};

pub use config::K8sConfig;
pub use objects::ObjectHandler;
pub use types::types;

/// The extension's name.
pub const NAME: &str = "Kubernetes";

/// The built-in extension's version (Bicep's `extension kubernetes`).
pub const VERSION: &str = "1.0.0";

/// The versions of the OCI Kubernetes types packages (`br:.../kubernetes:1.33.0`, one per Kubernetes
/// minor release) served besides [`VERSION`]: the version names the types' API release, not a
/// different contract.
pub const OCI_VERSIONS: &[&str] = &[
    "1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0", "1.35.0", "1.36.0", "1.37.0",
];

/// [`OCI_VERSIONS`] as a registry's version range (what a host registers the extension under).
pub const OCI_VERSION_RANGE: &str = ">=1.30.0, <=1.37.0";

/// The Kubernetes extension: one handler serving every type the cluster discovers.
pub fn extension() -> Extension<K8sConfig> {
    OCI_VERSIONS
        .iter()
        .fold(Extension::new(NAME, VERSION), |extension, version| {
            extension.also_version(*version)
        })
        .fallback(ObjectHandler)
        .types(types())
}

/// The Kubernetes extension as an in-process transport (the same HTTP routes, without sockets).
pub fn in_process_transport() -> InProcessTransport {
    InProcessTransport::from_extension(extension())
}

/// The conformance profile for Kubernetes: a ConfigMap in the namespace `${namespace}` of the cluster
/// whose kubeconfig is `${kubeconfig}` (base64).
pub const CONFORMANCE_PROFILE: &str = include_str!("../conformance/kubernetes.json");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_spans_the_oci_versions() {
        let first = OCI_VERSIONS.first().unwrap();
        let last = OCI_VERSIONS.last().unwrap();
        assert_eq!(OCI_VERSION_RANGE, format!(">={first}, <={last}"));
    }
}
