//! Test helper: a throwaway OCI registry for tests that need a real one.
//!
//! [`TestRegistry::start`] runs Debian's `docker-registry` (the CNCF distribution registry) with filesystem
//! storage in a fresh temporary directory, listening on `127.0.0.1` at a free port, and stops it again when the
//! value is dropped, also when the test panics. [`TestRegistry::start_with_basic_auth`] adds an htpasswd file
//! (bcrypt, generated here) so every request needs the user and password it returns.
//!
//! Without the registry installed the start fails with a message naming the fix: tests that need it fail
//! rather than pass silently.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable naming the registry binary (overrides the default path and the PATH search).
pub const BINARY_VARIABLE: &str = "CAIRN_TEST_REGISTRY_BIN";

const INSTALL_HINT: &str = "an OCI registry is needed by this test but `docker-registry` was not found \
(searched $CAIRN_TEST_REGISTRY_BIN, /usr/bin/docker-registry and PATH). Install it: `bash scripts/test.sh` \
does, or run `apt-get install -y docker-registry`.";

/// The user the basic-auth registry accepts.
pub const USER: &str = "cairn";

/// A running throwaway registry; stopped (and its directory removed) on drop.
pub struct TestRegistry {
    // `Drop` stops the process first; the directory is removed when `dir` drops afterwards.
    dir: tempfile::TempDir,
    child: Child,
    port: u16,
    password: Option<String>,
}

impl TestRegistry {
    /// Starts an anonymous registry. Panics with the reason (naming the fix when the binary is missing).
    pub fn start() -> TestRegistry {
        Self::try_start(None).unwrap_or_else(|message| panic!("{message}"))
    }

    /// Starts a registry that requires basic auth as [`USER`] with a random password ([`Self::password`]).
    pub fn start_with_basic_auth() -> TestRegistry {
        let password = format!("pw-{:016x}", random_u64());
        Self::try_start(Some(password)).unwrap_or_else(|message| panic!("{message}"))
    }

    /// Like [`TestRegistry::start`] (or with basic auth when `password` is given), returning the reason
    /// instead of panicking.
    pub fn try_start(password: Option<String>) -> Result<TestRegistry, String> {
        let binary = locate_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("cairn-testregistry-")
            .tempdir()
            .map_err(|err| format!("cannot create a temporary directory: {err}"))?;
        let storage = dir.path().join("storage");
        std::fs::create_dir(&storage).map_err(|err| format!("cannot create the storage: {err}"))?;
        let auth = match &password {
            Some(password) => {
                // A low cost keeps each request cheap: the registry checks the hash on every call.
                let hash = bcrypt::hash(password, 5)
                    .map_err(|err| format!("cannot hash the password: {err}"))?;
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(&htpasswd, format!("{USER}:{hash}\n"))
                    .map_err(|err| format!("cannot write the htpasswd file: {err}"))?;
                format!(
                    "auth:\n  htpasswd:\n    realm: cairn-test\n    path: {}\n",
                    htpasswd.display()
                )
            }
            None => String::new(),
        };
        let mut last_error = String::new();
        // A free port may be taken between the probe and the registry's bind: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            let config = format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n{auth}",
                storage.display()
            );
            let config_path = dir.path().join("config.yml");
            std::fs::write(&config_path, config)
                .map_err(|err| format!("cannot write the registry config: {err}"))?;
            let log = std::fs::File::create(dir.path().join("registry.log"))
                .map_err(|err| format!("cannot create the registry log: {err}"))?;
            let log_err = log
                .try_clone()
                .map_err(|err| format!("cannot open the registry log: {err}"))?;
            let child = Command::new(&binary)
                .arg("serve")
                .arg(&config_path)
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err)
                .spawn()
                .map_err(|err| format!("cannot start {}: {err}", binary.display()))?;
            let mut child = child;
            match wait_ready(&mut child, port) {
                Ok(()) => {
                    return Ok(TestRegistry {
                        dir,
                        child,
                        port,
                        password,
                    });
                }
                Err(message) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let log = std::fs::read_to_string(dir.path().join("registry.log"))
                        .unwrap_or_default();
                    last_error = format!("{message}; log: {log}");
                }
            }
        }
        Err(format!("the test registry did not start: {last_error}"))
    }

    /// `127.0.0.1:PORT`, the registry part of a reference.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The password of [`USER`], for a registry started with basic auth.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The directory the registry stores its blobs and manifests in.
    pub fn storage_dir(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// The file holding a blob (`sha256:HEX`) in the registry's storage, for tests that tamper with it.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        let prefix = hex.get(..2).unwrap_or(hex);
        self.storage_dir()
            .join("docker/registry/v2/blobs/sha256")
            .join(prefix)
            .join(hex)
            .join("data")
    }

    /// What the registry has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until `GET /v2/` answers (200, or 401 when auth is on).
fn wait_ready(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the registry exited with {status}"));
        }
        if let Some(code) = probe(port)
            && (code == 200 || code == 401)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the registry did not answer /v2/ within 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The status code of `GET /v2/`, over a plain socket (no HTTP client needed for one line).
fn probe(port: u16) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

fn locate_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(BINARY_VARIABLE).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let default = Path::new("/usr/bin/docker-registry");
    if default.is_file() {
        return Ok(default.to_path_buf());
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("docker-registry"))
                .find(|candidate| candidate.is_file())
        })
        .ok_or_else(|| INSTALL_HINT.to_owned())
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|err| format!("cannot find a free port: {err}"))
}

/// Random enough for a test password, without a dependency: std's per-process random hash keys.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
}
