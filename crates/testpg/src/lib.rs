//! Test helper: a throwaway PostgreSQL cluster for tests that need a real server.
//!
//! [`TestPostgres::start`] runs `initdb` into a fresh temporary directory, starts the server with
//! `pg_ctl` on `127.0.0.1` at a free port (its unix socket in the same directory), with a superuser
//! `postgres` whose random password is required over TCP (`scram-sha-256`), and stops it again when the
//! value is dropped, also when the test panics. PostgreSQL refuses to run as root, so under root the
//! cluster belongs to an unprivileged user: `cairn-test` when it exists (`scripts/test.sh` creates it),
//! otherwise `nobody`.
//!
//! Without PostgreSQL installed the start fails with a message naming the fix: tests that need it fail
//! rather than pass silently.

use std::fmt;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rand::Rng;
use rand::distr::Alphanumeric;

/// The superuser every test cluster is created with.
pub const SUPERUSER: &str = "postgres";

/// Environment variable naming the directory holding `initdb` and `pg_ctl` (overrides the search).
pub const BIN_DIR_VARIABLE: &str = "CAIRN_TEST_PG_BIN";

/// The account test clusters run as when the tests run as root; created by `scripts/test.sh`.
pub const TEST_USER: &str = "cairn-test";

const INSTALL_HINT: &str = "PostgreSQL is needed by this test but `initdb`/`pg_ctl` were not found \
(searched $CAIRN_TEST_PG_BIN, /usr/lib/postgresql/*/bin and PATH). Install it: `bash scripts/test.sh` \
does, or run `apt-get install -y postgresql`.";

/// A running throwaway cluster; stopped (and its directory removed) on drop.
pub struct TestPostgres {
    // `Drop` stops the server first; the directory is removed when `dir` drops afterwards.
    dir: tempfile::TempDir,
    bin_dir: PathBuf,
    owner: Option<Account>,
    port: u16,
    password: String,
    major_version: u32,
}

/// An unprivileged account the cluster runs as when the tests run as root.
#[derive(Debug, Clone)]
struct Account {
    name: String,
    uid: u32,
    gid: u32,
}

impl TestPostgres {
    /// Creates and starts a cluster. Panics with a message naming the fix when PostgreSQL is missing, and
    /// with the server's own output when it cannot be created or started.
    pub fn start() -> TestPostgres {
        Self::start_with(&[])
    }

    /// [`TestPostgres::start`] with server settings (`name`, `value`) given on the command line after the
    /// defaults, so they override them (e.g. `("full_page_writes", "on")` for a benchmark of WAL volume).
    pub fn start_with(settings: &[(&str, &str)]) -> TestPostgres {
        match Self::try_start_with(settings) {
            Ok(cluster) => cluster,
            Err(message) => panic!("{message}"),
        }
    }

    /// Like [`TestPostgres::start`], returning the reason instead of panicking.
    pub fn try_start() -> Result<TestPostgres, String> {
        Self::try_start_with(&[])
    }

    /// Like [`TestPostgres::start_with`], returning the reason instead of panicking.
    pub fn try_start_with(settings: &[(&str, &str)]) -> Result<TestPostgres, String> {
        let bin_dir = locate_binaries(
            std::env::var_os(BIN_DIR_VARIABLE).map(PathBuf::from),
            Path::new("/usr/lib/postgresql"),
            std::env::var_os("PATH"),
        )?;
        let owner = if rustix::process::geteuid().is_root() {
            Some(unprivileged_account()?)
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix("cairn-testpg-")
            .tempdir()
            .map_err(|err| format!("cannot create a temporary directory: {err}"))?;
        if let Some(account) = &owner {
            std::os::unix::fs::chown(dir.path(), Some(account.uid), Some(account.gid)).map_err(
                |err| {
                    format!(
                        "cannot hand the cluster directory to {}: {err}",
                        account.name
                    )
                },
            )?;
        }
        let password: String = rand::rng()
            .sample_iter(Alphanumeric)
            .take(32)
            .map(char::from)
            .collect();
        let mut cluster = TestPostgres {
            dir,
            bin_dir,
            owner,
            port: 0,
            password,
            major_version: 0,
        };
        cluster.init()?;
        cluster.major_version = cluster.read_major_version();
        cluster.launch(settings)?;
        Ok(cluster)
    }

    /// The loopback address the server listens on.
    pub fn host(&self) -> &str {
        "127.0.0.1"
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's name ([`SUPERUSER`]).
    pub fn superuser(&self) -> &str {
        SUPERUSER
    }

    /// The superuser's password (random per cluster).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The server's major version (e.g. 15).
    pub fn major_version(&self) -> u32 {
        self.major_version
    }

    /// The directory holding the unix socket (`.s.PGSQL.<port>`).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// A `postgres://` URL for the superuser over TCP to the `postgres` database.
    pub fn url(&self) -> String {
        self.url_for_database("postgres")
    }

    /// A `postgres://` URL for the superuser over TCP to `database` (a plain identifier).
    pub fn url_for_database(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{}@{}:{}/{database}?sslmode=disable",
            self.password,
            self.host(),
            self.port
        )
    }

    /// The server log so far (for diagnosing a failing test).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// A command running `program` from the PostgreSQL binaries, as the cluster's owner.
    fn command(&self, program: &str) -> Command {
        let program = self.bin_dir.join(program);
        let mut command = match &self.owner {
            Some(account) => {
                let mut command = Command::new("runuser");
                command.args(["-u", &account.name, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        };
        // The owner must be able to stat its working directory; the caller's may be private to root.
        command.current_dir(self.dir.path());
        command.env_remove("PGDATA").env("LC_ALL", "C");
        command
    }

    fn init(&self) -> Result<(), String> {
        let password_file = self.dir.path().join("password");
        std::fs::write(&password_file, format!("{}\n", self.password))
            .map_err(|err| format!("cannot write the password file: {err}"))?;
        if let Some(account) = &self.owner {
            std::os::unix::fs::chown(&password_file, Some(account.uid), Some(account.gid))
                .map_err(|err| {
                    format!("cannot hand the password file to {}: {err}", account.name)
                })?;
        }
        let output = self
            .command("initdb")
            .arg("--pgdata")
            .arg(self.data_dir())
            .args(["--username", SUPERUSER])
            .arg(format!("--pwfile={}", password_file.display()))
            .args([
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ])
            .output();
        let _ = std::fs::remove_file(&password_file);
        expect_success("initdb", output)
    }

    fn read_major_version(&self) -> u32 {
        std::fs::read_to_string(self.data_dir().join("PG_VERSION"))
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Starts the server on a free port; retries when another process takes the port in between.
    fn launch(&mut self, settings: &[(&str, &str)]) -> Result<(), String> {
        let mut last_error = String::new();
        for _ in 0..5 {
            self.port = free_port()?;
            let mut options = format!(
                "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c synchronous_commit=off \
                 -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB",
                self.port,
                self.dir.path().display()
            );
            for (name, value) in settings {
                options.push_str(&format!(" -c {name}={value}"));
            }
            let output = self
                .command("pg_ctl")
                .arg("--pgdata")
                .arg(self.data_dir())
                .arg("--log")
                .arg(self.log_path())
                .args(["--wait", "--timeout=60", "--options"])
                .arg(options)
                .arg("start")
                .output();
            match expect_success("pg_ctl start", output) {
                Ok(()) => return Ok(()),
                Err(message) => {
                    let log = self.log();
                    if !log.contains("could not bind") && !log.contains("already in use") {
                        return Err(format!("{message}\nserver log:\n{log}"));
                    }
                    last_error = message;
                }
            }
        }
        Err(format!(
            "no free port for PostgreSQL after 5 tries: {last_error}"
        ))
    }

    fn stop(&self) {
        let _ = self
            .command("pg_ctl")
            .arg("--pgdata")
            .arg(self.data_dir())
            .args(["--mode=immediate", "--wait", "--timeout=30", "stop"])
            .output();
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for TestPostgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestPostgres")
            .field("dir", &self.dir.path())
            .field("port", &self.port)
            .field("major_version", &self.major_version)
            .finish_non_exhaustive()
    }
}

/// The directory holding `initdb` and `pg_ctl`: `explicit` (from `$CAIRN_TEST_PG_BIN`) when given, else
/// the newest `<debian_root>/<major>/bin`, else the first `PATH` entry with both; the install hint when
/// none has them.
fn locate_binaries(
    explicit: Option<PathBuf>,
    debian_root: &Path,
    path: Option<std::ffi::OsString>,
) -> Result<PathBuf, String> {
    find_bin_dir(explicit, debian_root, path).ok_or_else(|| INSTALL_HINT.to_owned())
}

fn find_bin_dir(
    explicit: Option<PathBuf>,
    debian_root: &Path,
    path: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let has_tools = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = explicit {
        return has_tools(&dir).then_some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(debian_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((major, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_tools(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    std::env::split_paths(&path?).find(|dir| has_tools(dir))
}

/// [`TEST_USER`] when it exists, otherwise `nobody`.
fn unprivileged_account() -> Result<Account, String> {
    for name in [TEST_USER, "nobody"] {
        if let (Some(uid), Some(gid)) = (id_of(name, "-u"), id_of(name, "-g")) {
            return Ok(Account {
                name: name.to_owned(),
                uid,
                gid,
            });
        }
    }
    Err(format!(
        "running as root, PostgreSQL needs an unprivileged account but neither '{TEST_USER}' nor \
         'nobody' exists (`bash scripts/test.sh` creates '{TEST_USER}')"
    ))
}

fn id_of(name: &str, flag: &str) -> Option<u32> {
    let output = Command::new("id").args([flag, name]).output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout).ok()?.trim().parse().ok()
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|err| format!("cannot find a free loopback port: {err}"))
}

fn expect_success(what: &str, output: std::io::Result<Output>) -> Result<(), String> {
    let output = output.map_err(|err| format!("cannot run {what}: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tools(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("initdb"), "").unwrap();
        std::fs::write(dir.join("pg_ctl"), "").unwrap();
    }

    #[test]
    fn missing_postgresql_names_the_fix() {
        let empty = tempfile::tempdir().unwrap();
        let message = locate_binaries(None, &empty.path().join("none"), None).unwrap_err();
        assert!(
            message.contains("apt-get install -y postgresql"),
            "{message}"
        );
        assert!(message.contains("bash scripts/test.sh"), "{message}");
        let message =
            locate_binaries(Some(empty.path().to_owned()), empty.path(), None).unwrap_err();
        assert!(
            message.contains("apt-get install -y postgresql"),
            "{message}"
        );
    }

    #[test]
    fn the_newest_debian_version_wins_over_path() {
        let root = tempfile::tempdir().unwrap();
        fake_tools(&root.path().join("lib/13/bin"));
        fake_tools(&root.path().join("lib/16/bin"));
        fake_tools(&root.path().join("lib/9/bin"));
        std::fs::create_dir_all(root.path().join("lib/17/bin")).unwrap(); // no tools: skipped
        fake_tools(&root.path().join("usr/bin"));
        let path = std::env::join_paths([root.path().join("usr/bin")]).unwrap();
        assert_eq!(
            locate_binaries(None, &root.path().join("lib"), Some(path.clone())).unwrap(),
            root.path().join("lib/16/bin")
        );
        assert_eq!(
            locate_binaries(None, &root.path().join("nothing"), Some(path)).unwrap(),
            root.path().join("usr/bin")
        );
        assert_eq!(
            locate_binaries(Some(root.path().join("lib/13/bin")), root.path(), None).unwrap(),
            root.path().join("lib/13/bin")
        );
    }
}
