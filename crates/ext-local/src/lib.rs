//! The built-in Local extension (1.0.0): `File` and `Directory` resources under a configured root directory.
//!
//! Config `{ "rootDirectory": "/abs/or/relative/dir" }`; `configId` is the lower-case hex SHA-256 of the
//! normalised root. Paths are relative to the root and can never leave it (`..`, absolute paths and
//! symbolic links pointing outside are refused with a validation error on `/properties/path`).
//!
//! Its types (Bicep's type format, [`types()`]) are served by `GetTypeFiles` and written by `--types DIR`.
//!
//! Serve it in process with [`in_process_transport`], or run the `cairn-ext-local` binary
//! (`--http PORT`, `--listen ADDR`, `--socket PATH`). A server running it for API callers uses
//! [`confined_in_process_transport`]: the root must then lie in one of the operator's roots and paths never
//! reach the server's own files (see [`Confinement`]).

pub mod config;
pub mod confine;
pub mod paths;
pub mod resources;
pub mod types;

use cairn_extension_sdk::{Extension, InProcessTransport};

use std::sync::Arc;

pub use config::LocalConfig;
pub use confine::{Confinement, ConfinementError};
pub use resources::{DIRECTORY_TYPE, DirectoryHandler, FILE_TYPE, FileHandler};
pub use types::types;

/// The extension's name.
pub const NAME: &str = "Local";
/// The extension's version.
pub const VERSION: &str = "1.0.0";

/// The Local extension with its two resource types.
pub fn extension() -> Extension<LocalConfig> {
    Extension::new(NAME, VERSION)
        .handler(FileHandler)
        .handler(DirectoryHandler)
        .types(types())
}

/// The Local extension as an in-process transport (the same HTTP routes, without sockets).
pub fn in_process_transport() -> InProcessTransport {
    InProcessTransport::from_extension(extension())
}

/// The Local extension refusing every config `confinement` does not allow.
pub fn confined_extension(confinement: Arc<Confinement>) -> Extension<LocalConfig> {
    extension().config_guard(move |config: LocalConfig| config.confined(&confinement))
}

/// [`confined_extension`] as an in-process transport.
pub fn confined_in_process_transport(confinement: Arc<Confinement>) -> InProcessTransport {
    InProcessTransport::from_extension(confined_extension(confinement))
}

/// The conformance profile for Local (`${tempDir}` is replaced by a fresh directory by the kit).
pub const CONFORMANCE_PROFILE: &str = include_str!("../conformance/local.json");
