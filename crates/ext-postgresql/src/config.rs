//! The PostgreSql extension's config (`host`, `port`, `database`, `username`, `sslMode`, `caCertificate`,
//! secure `auth: { password }`) and its `configId`: a hash of the server's identity.
//!
//! The engine delivers config items flat today, so the password is also accepted as a top-level secure
//! `password`; both `auth` and `password` are secret (never echoed).

use std::fmt;

use cairn_extension_sdk::{ExtensionConfig, ExtensionError, Validator, codes};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgSslMode};

use crate::connection::{Pools, ServerKey};
use crate::error::sql_error;

/// The default port.
pub const DEFAULT_PORT: u16 = 5432;
/// The default maintenance database.
pub const DEFAULT_DATABASE: &str = "postgres";

const KNOWN: &[&str] = &[
    "host",
    "port",
    "database",
    "username",
    "sslMode",
    "caCertificate",
    "auth",
    "password",
];

/// `sslMode`: how the connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it, unverified.
    Prefer,
    /// TLS required, certificate not verified.
    Require,
    /// TLS required, certificate verified against `caCertificate` (or the system roots) and the host name.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Option<SslMode> {
        match text {
            "disable" => Some(SslMode::Disable),
            "prefer" => Some(SslMode::Prefer),
            "require" => Some(SslMode::Require),
            "verify-full" => Some(SslMode::VerifyFull),
            _ => None,
        }
    }

    fn to_sqlx(self) -> PgSslMode {
        match self {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require => PgSslMode::Require,
            SslMode::VerifyFull => PgSslMode::VerifyFull,
        }
    }
}

/// The parsed config; after [`ExtensionConfig::resolve`] it also knows the server's `system_identifier`.
#[derive(Clone)]
pub struct PgConfig {
    host: String,
    port: u16,
    database: String,
    username: String,
    ssl_mode: SslMode,
    ca_certificate: Option<String>,
    password: SecretString,
    system_identifier: Option<String>,
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("username", &self.username)
            .field("ssl_mode", &self.ssl_mode)
            .field("password", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

impl PgConfig {
    /// The server host.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The server port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The maintenance database the extension connects to for server-wide work.
    pub fn maintenance_database(&self) -> &str {
        &self.database
    }

    /// The admin user.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// What identifies the server and credentials of a connection pool (never the password itself).
    pub fn server_key(&self) -> ServerKey {
        let mut password_digest = Sha256::new();
        password_digest.update(self.password.expose_secret().as_bytes());
        let ca_digest = self
            .ca_certificate
            .as_deref()
            .map(|pem| data_encoding::HEXLOWER.encode(&Sha256::digest(pem.as_bytes())));
        ServerKey {
            host: self.host.to_ascii_lowercase(),
            port: self.port,
            username: self.username.clone(),
            ssl_mode: self.ssl_mode,
            ca_digest,
            password_digest: data_encoding::HEXLOWER.encode(&password_digest.finalize()),
        }
    }

    /// Connect options for `database` (sqlx's own statement logging off: statements can carry secrets).
    pub fn connect_options(&self, database: &str) -> PgConnectOptions {
        use sqlx::ConnectOptions;
        let mut options = PgConnectOptions::new_without_pgpass()
            .host(&self.host)
            .port(self.port)
            .username(&self.username)
            .password(self.password.expose_secret())
            .database(database)
            .ssl_mode(self.ssl_mode.to_sqlx())
            .application_name("cairn-ext-postgresql");
        if let Some(pem) = &self.ca_certificate {
            options = options.ssl_root_cert_from_pem(pem.as_bytes().to_vec());
        }
        options.disable_statement_logging()
    }

    /// The server's `system_identifier`, once resolved.
    pub fn system_identifier(&self) -> Option<&str> {
        self.system_identifier.as_deref()
    }

    fn parse(object: &Map<String, Value>) -> Result<PgConfig, ExtensionError> {
        let mut validator = Validator::new();
        for key in object.keys() {
            validator.check(
                KNOWN.contains(&key.as_str()),
                codes::INVALID_CONFIG,
                format!("/config/{key}"),
                format!(
                    "'{key}' is not a PostgreSql config property (known: {}).",
                    KNOWN.join(", ")
                ),
            );
        }
        let text = |validator: &mut Validator, key: &str, required: bool| -> Option<String> {
            match object.get(key) {
                Some(Value::String(value)) if !value.trim().is_empty() && !value.contains('\0') => {
                    Some(value.clone())
                }
                Some(Value::String(_)) => {
                    validator.error(
                        codes::INVALID_CONFIG,
                        format!("/config/{key}"),
                        format!("'{key}' must be a non-empty string."),
                    );
                    None
                }
                Some(_) => {
                    validator.error(
                        codes::INVALID_CONFIG,
                        format!("/config/{key}"),
                        format!("'{key}' must be a string."),
                    );
                    None
                }
                None => {
                    validator.check(
                        !required,
                        codes::INVALID_CONFIG,
                        format!("/config/{key}"),
                        format!("The PostgreSql config needs '{key}'."),
                    );
                    None
                }
            }
        };
        let host = text(&mut validator, "host", true);
        let username = text(&mut validator, "username", true);
        let database = text(&mut validator, "database", false);
        let ca_certificate = text(&mut validator, "caCertificate", false);
        let ssl_mode = match text(&mut validator, "sslMode", false) {
            None => Some(SslMode::Prefer),
            Some(mode) => {
                let parsed = SslMode::parse(&mode);
                validator.check(
                    parsed.is_some(),
                    codes::INVALID_CONFIG,
                    "/config/sslMode",
                    "'sslMode' must be one of disable, prefer, require, verify-full.",
                );
                parsed
            }
        };
        validator.check(
            ca_certificate.is_none()
                || matches!(ssl_mode, Some(SslMode::Require | SslMode::VerifyFull)),
            codes::INVALID_CONFIG,
            "/config/caCertificate",
            "'caCertificate' needs sslMode 'require' or 'verify-full'.",
        );
        let port = match object.get("port") {
            None => Some(DEFAULT_PORT),
            Some(value) => {
                let port = match value {
                    Value::Number(number) => number.as_u64(),
                    Value::String(text) => text.parse::<u64>().ok(),
                    _ => None,
                }
                .and_then(|port| u16::try_from(port).ok())
                .filter(|port| *port != 0);
                validator.check(
                    port.is_some(),
                    codes::INVALID_CONFIG,
                    "/config/port",
                    "'port' must be a port number (1-65535).",
                );
                port
            }
        };
        let password = password(object, &mut validator);
        validator.finish()?;
        let (Some(host), Some(username), Some(ssl_mode), Some(port), Some(password)) =
            (host, username, ssl_mode, port, password)
        else {
            return Err(ExtensionError::internal("The config could not be parsed."));
        };
        Ok(PgConfig {
            host,
            port,
            database: database.unwrap_or_else(|| DEFAULT_DATABASE.to_owned()),
            username,
            ssl_mode,
            ca_certificate,
            password,
            system_identifier: None,
        })
    }
}

/// `auth.password`, or the flat `password` the engine delivers today; exactly one of them.
fn password(object: &Map<String, Value>, validator: &mut Validator) -> Option<SecretString> {
    let nested = match object.get("auth") {
        None => None,
        Some(Value::Object(auth)) => {
            for key in auth.keys().filter(|key| *key != "password") {
                validator.error(
                    codes::INVALID_CONFIG,
                    format!("/config/auth/{key}"),
                    format!("'auth.{key}' is not known; 'auth' holds 'password'."),
                );
            }
            match auth.get("password") {
                Some(Value::String(password)) => Some(("/config/auth/password", password)),
                _ => {
                    validator.error(
                        codes::INVALID_CONFIG,
                        "/config/auth/password",
                        "'auth.password' must be a string.",
                    );
                    return None;
                }
            }
        }
        Some(_) => {
            validator.error(
                codes::INVALID_CONFIG,
                "/config/auth",
                "'auth' must be an object { password }.",
            );
            return None;
        }
    };
    let flat = match object.get("password") {
        None => None,
        Some(Value::String(password)) => Some(("/config/password", password)),
        Some(_) => {
            validator.error(
                codes::INVALID_CONFIG,
                "/config/password",
                "'password' must be a string.",
            );
            return None;
        }
    };
    match (nested, flat) {
        (Some(_), Some(_)) => {
            validator.error(
                codes::INVALID_CONFIG,
                "/config/password",
                "Give the password once: as 'auth.password' or as 'password', not both.",
            );
            None
        }
        (None, None) => {
            validator.error(
                codes::INVALID_CONFIG,
                "/config/auth/password",
                "The PostgreSql config needs the secure 'auth.password' (or 'password').",
            );
            None
        }
        (Some((target, password)), None) | (None, Some((target, password))) => {
            if password.contains('\0') {
                validator.error(
                    codes::INVALID_CONFIG,
                    target,
                    "The password must not contain the NUL character.",
                );
                return None;
            }
            Some(SecretString::from(password.clone()))
        }
    }
}

impl ExtensionConfig for PgConfig {
    const SECRET_PROPERTIES: &'static [&'static str] = &["auth", "password"];

    fn from_request(config: Option<&Value>) -> Result<Self, ExtensionError> {
        match config {
            Some(Value::Object(object)) => PgConfig::parse(object),
            Some(_) => Err(ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config",
                "The config must be an object.",
            )),
            None => Err(ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config",
                "The PostgreSql extension needs a config with 'host', 'username' and 'auth.password'.",
            )),
        }
    }

    /// Connects (through the shared pool) and reads the cluster's `system_identifier`.
    async fn resolve(&mut self) -> Result<(), ExtensionError> {
        let pool = Pools::global().maintenance(self);
        let identifier: String =
            sqlx::query_scalar("SELECT system_identifier::text FROM pg_control_system()")
                .fetch_one(&pool)
                .await
                .map_err(|err| sql_error(&err, "read the server's identity"))?;
        self.system_identifier = Some(identifier);
        Ok(())
    }

    /// Lower-case hex SHA-256 of `host`, `port` and the cluster's `system_identifier`: another server
    /// behind the same address (or the same server under another config) is told apart.
    fn config_id(&self) -> Option<String> {
        let identifier = self.system_identifier.as_deref()?;
        let text = format!(
            "{}\n{}\n{identifier}",
            self.host.to_ascii_lowercase(),
            self.port
        );
        Some(data_encoding::HEXLOWER.encode(&Sha256::digest(text.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(config: Value) -> Result<PgConfig, ExtensionError> {
        PgConfig::from_request(Some(&config))
    }

    fn targets(err: &ExtensionError) -> Vec<String> {
        match &err.error().details {
            Some(details) => details.iter().filter_map(|d| d.target.clone()).collect(),
            None => err.error().target.clone().into_iter().collect(),
        }
    }

    #[test]
    fn defaults_and_both_password_spellings() {
        let nested =
            parse(json!({ "host": "db", "username": "admin", "auth": { "password": "pw" } }))
                .unwrap();
        assert_eq!(
            (nested.port(), nested.maintenance_database()),
            (5432, "postgres")
        );
        let flat = parse(
            json!({ "host": "db", "username": "admin", "password": "pw", "port": "6543",
                                 "database": "ops", "sslMode": "disable" }),
        )
        .unwrap();
        assert_eq!((flat.port(), flat.maintenance_database()), (6543, "ops"));
        assert_eq!(
            nested.server_key().password_digest,
            flat.server_key().password_digest
        );
    }

    #[test]
    fn bad_configs_point_at_each_property_without_quoting_the_password() {
        let err = parse(
            json!({ "port": 70000, "sslMode": "sometimes", "auth": { "password": 5 },
                                "caCertificate": "pem", "color": "red" }),
        )
        .unwrap_err();
        let mut got = targets(&err);
        got.sort();
        assert_eq!(
            got,
            [
                "/config/auth/password",
                "/config/caCertificate",
                "/config/color",
                "/config/host",
                "/config/port",
                "/config/sslMode",
                "/config/username",
            ]
        );
        let err = parse(json!({ "host": "h", "username": "u", "password": "hunter2",
                                "auth": { "password": "hunter2" } }))
        .unwrap_err();
        assert_eq!(targets(&err), ["/config/password"]);
        assert!(!format!("{err:?}").contains("hunter2"));
        let err = parse(json!({ "host": "h", "username": "u" })).unwrap_err();
        assert_eq!(targets(&err), ["/config/auth/password"]);
        assert!(PgConfig::from_request(None).is_err());
    }

    #[test]
    fn debug_and_keys_never_show_the_password() {
        let config =
            parse(json!({ "host": "h", "username": "u", "auth": { "password": "hunter2" } }))
                .unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
        assert!(!format!("{:?}", config.server_key()).contains("hunter2"));
    }

    #[test]
    fn config_id_hashes_host_port_and_system_identifier() {
        let mut config =
            parse(json!({ "host": "DB.example", "username": "u", "password": "p" })).unwrap();
        assert_eq!(config.config_id(), None);
        config.system_identifier = Some("7300000000000000001".into());
        let id = config.config_id().unwrap();
        assert_eq!(id.len(), 64);
        let mut same =
            parse(json!({ "host": "db.example", "username": "other", "password": "q" })).unwrap();
        same.system_identifier = Some("7300000000000000001".into());
        assert_eq!(same.config_id().unwrap(), id);
        same.system_identifier = Some("7300000000000000002".into());
        assert_ne!(same.config_id().unwrap(), id);
    }
}
