//! The PostgreSql extension (1.0.0): roles, databases, schemas, extensions, grants and default privileges
//! of a real PostgreSQL server, managed through their whole lifecycle over the extension contract.
//!
//! Config `{ host, port?, database?, username, sslMode?, caCertificate?, auth: { password } }` (see
//! [`config`]); `configId` is a hash of the server's identity (host, port, `system_identifier`). The
//! client is sqlx over pooled connections ([`connection`]); every name and value reaches SQL quoted
//! ([`sql`]); role passwords are sent as SCRAM verifiers ([`scram`]).
//!
//! Its types (Bicep's type format, [`types()`]) are served by `GetTypeFiles` and written by `--types DIR`.
//!
//! Serve it in process with [`in_process_transport`], or run the `cairn-ext-postgresql` binary
//! (`--http PORT`, `--listen ADDR`, `--socket PATH`).

pub mod acl;
pub mod config;
pub mod connection;
pub mod databases;
pub mod default_privileges;
pub mod error;
pub mod extensions;
pub mod grants;
pub mod marks;
pub mod preview;
pub mod roles;
pub mod schemas;
pub mod scram;
pub mod sql;
pub mod types;

use cairn_extension_sdk::{Extension, InProcessTransport};

pub use config::PgConfig;
pub use databases::{DATABASE_TYPE, DatabaseHandler};
pub use default_privileges::{DEFAULT_PRIVILEGES_TYPE, DefaultPrivilegesHandler};
pub use extensions::{EXTENSION_TYPE, ExtensionHandler};
pub use grants::{GRANT_TYPE, GrantHandler};
pub use roles::{ROLE_TYPE, RoleHandler};
pub use schemas::{SCHEMA_TYPE, SchemaHandler};
pub use types::types;

/// The extension's name.
pub const NAME: &str = "PostgreSql";
/// The extension's version.
pub const VERSION: &str = "1.0.0";

/// The PostgreSql extension with its resource types.
pub fn extension() -> Extension<PgConfig> {
    Extension::new(NAME, VERSION)
        .handler(RoleHandler)
        .handler(DatabaseHandler)
        .handler(SchemaHandler)
        .handler(ExtensionHandler)
        .handler(GrantHandler)
        .handler(DefaultPrivilegesHandler)
        .types(types())
}

/// The PostgreSql extension as an in-process transport (the same HTTP routes, without sockets).
pub fn in_process_transport() -> InProcessTransport {
    InProcessTransport::from_extension(extension())
}

/// The conformance profile for PostgreSql: a role on the server named by `${host}`, `${port}`,
/// `${username}` and `${password}`.
pub const CONFORMANCE_PROFILE: &str = include_str!("../conformance/postgresql.json");
