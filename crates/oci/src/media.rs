//! Bicep's media types and platform names for extension artifacts (`BicepMediaTypes.cs`).

/// The OCI image manifest media type.
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The OCI image index media type (an OCI layout's `index.json`).
pub const INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// The manifest's `artifactType`.
pub const ARTIFACT: &str = "application/vnd.ms.bicep.provider.artifact";
/// The config blob.
pub const CONFIG: &str = "application/vnd.ms.bicep.provider.config.v1+json";
/// The types layer (`types.tgz`).
pub const TYPES_LAYER: &str = "application/vnd.ms.bicep.provider.layer.v1.tar+gzip";
/// Binary layers: this prefix, the platform, then [`BINARY_LAYER_SUFFIX`].
pub const BINARY_LAYER_PREFIX: &str = "application/vnd.ms.bicep.provider.layer.v1.";
/// See [`BINARY_LAYER_PREFIX`].
pub const BINARY_LAYER_SUFFIX: &str = ".binary";
/// The layer title annotation.
pub const TITLE: &str = "org.opencontainers.image.title";
/// The manifest's creation time annotation.
pub const CREATED: &str = "org.opencontainers.image.created";
/// Bicep's serialization format annotation (value `v1`).
pub const SERIALIZATION_FORMAT: &str = "bicep.serialization.format";

/// The platforms Bicep publishes binaries for, in its order.
pub const PLATFORMS: &[&str] = &[
    "linux-x64",
    "linux-arm64",
    "osx-x64",
    "osx-arm64",
    "win-x64",
    "win-arm64",
];

/// The media type of the binary layer for `platform`.
pub fn binary_layer(platform: &str) -> String {
    format!("{BINARY_LAYER_PREFIX}{platform}{BINARY_LAYER_SUFFIX}")
}

/// The platform of a binary layer's media type (compared case-insensitively).
pub fn platform_of(media_type: &str) -> Option<String> {
    let lower = media_type.to_ascii_lowercase();
    let rest = lower.strip_prefix(BINARY_LAYER_PREFIX)?;
    let platform = rest.strip_suffix(BINARY_LAYER_SUFFIX)?;
    PLATFORMS
        .iter()
        .find(|known| **known == platform)
        .map(|known| (*known).to_owned())
}

/// This machine's platform name, when Bicep has one for it.
pub fn current_platform() -> Option<&'static str> {
    match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => Some("linux-x64"),
        ("linux", "aarch64") => Some("linux-arm64"),
        ("macos", "x86_64") => Some("osx-x64"),
        ("macos", "aarch64") => Some("osx-arm64"),
        ("windows", "x86_64") => Some("win-x64"),
        ("windows", "aarch64") => Some("win-arm64"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_layers_round_trip_case_insensitively() {
        for platform in PLATFORMS {
            assert_eq!(
                platform_of(&binary_layer(platform)).as_deref(),
                Some(*platform)
            );
        }
        assert_eq!(
            platform_of("Application/Vnd.MS.Bicep.Provider.Layer.V1.Linux-X64.Binary").as_deref(),
            Some("linux-x64")
        );
        assert_eq!(
            platform_of("application/vnd.ms.bicep.provider.layer.v1.bsd-x64.binary"),
            None
        );
        assert!(current_platform().is_some());
    }
}
