//! Test helper: a real, throwaway Kubernetes control plane for tests that need an API server.
//!
//! [`TestKube::start`] runs the official `etcd`, `kube-apiserver` and `kube-controller-manager` binaries
//! (built from their Go modules by `scripts/kube-binaries.sh`) on free `127.0.0.1` ports, with their data,
//! certificates, keys and logs in a fresh temporary directory, and kills them again when the value is
//! dropped, also when the test panics. Nothing is mocked: requests go to the same API server a cluster
//! runs, with TLS, client-certificate and service-account-token authentication, `Node,RBAC`
//! authorization and the default admission plugins. There are no nodes: pods are stored but never run.
//!
//! The controller-manager is there for the controllers the API alone cannot stand in for: the namespace
//! controller (a deleted namespace stays `Terminating` without it), the service-account and token
//! controllers, the garbage collector, and the workload controllers (a Deployment gets its ReplicaSet).
//!
//! Unlike PostgreSQL, none of the three refuses to run as root, so the processes run as whoever runs
//! the tests. Without the binaries the start fails with a message naming the fix: tests that need them
//! fail rather than pass silently.

mod http;
mod pki;

use std::fmt;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pki::ClusterPki;

/// The `k8s.io/kubernetes` release `scripts/kube-binaries.sh` builds (kept equal by a unit test).
pub const KUBE_VERSION: &str = "v1.37.2";

/// The `go.etcd.io/etcd/server/v3` release `scripts/kube-binaries.sh` builds (kept equal by a unit test).
pub const ETCD_VERSION: &str = "v3.7.3";

/// Environment variable naming the directory holding the three binaries (overrides the cache path).
pub const BIN_DIR_VARIABLE: &str = "CAIRN_TEST_KUBE_BIN";

/// Environment variable naming the cache `scripts/kube-binaries.sh` builds into (default
/// `$HOME/.cache/cairn-test`).
pub const CACHE_VARIABLE: &str = "CAIRN_TEST_CACHE";

/// The user name of the admin client certificate; its organization is `system:masters`.
pub const ADMIN_USER: &str = "cairn-admin";

/// The programs [`TestKube::start`] runs, all from one directory.
pub const PROGRAMS: [&str; 3] = ["etcd", "kube-apiserver", "kube-controller-manager"];

/// How long the API server may take to report ready. Generous: on a 2-core machine shared with a
/// compiling workspace its cold start alone has taken over 30 seconds.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// How many lines of a component's log an error carries.
const LOG_TAIL_LINES: usize = 60;

/// Why the control plane could not be started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The binaries are not where they were looked for; the message names the fix.
    #[error(
        "kube-apiserver, kube-controller-manager and etcd {KUBE_VERSION}/{ETCD_VERSION} are needed by this \
         test but {location} has {missing}. Build them once (10 to 30 minutes on 2 cores, 1 GB of Go modules): \
         `bash scripts/kube-binaries.sh` prints the directory to export as ${BIN_DIR_VARIABLE}; \
         `bash scripts/test.sh` does both"
    )]
    BinariesMissing {
        /// Where they were looked for, and why there.
        location: String,
        /// What is not there.
        missing: String,
    },
    /// A file or directory of the control plane could not be written.
    #[error("cannot {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A certificate or key could not be generated.
    #[error("cannot generate the {what}: {source}")]
    Pki {
        /// Which certificate or key.
        what: &'static str,
        /// The underlying error.
        source: rcgen::Error,
    },
    /// A component exited during start-up.
    #[error("{component} exited during start-up ({status}); the end of its log:\n{log_tail}")]
    Exited {
        /// `etcd`, `kube-apiserver` or `kube-controller-manager`.
        component: &'static str,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The last lines of its log.
        log_tail: String,
    },
    /// A component did not become ready in time.
    #[error(
        "{component} was not ready after {waited:?} ({condition}); the end of its log:\n{log_tail}"
    )]
    NotReady {
        /// `etcd`, `kube-apiserver` or `kube-controller-manager`.
        component: &'static str,
        /// How long start-up waited.
        waited: Duration,
        /// What was waited for, and the last answer.
        condition: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// The ports picked were taken by another process each time.
    #[error("no free loopback ports after {tries} tries; the last failure: {last}")]
    NoFreePorts {
        /// How many times the whole start was tried.
        tries: u32,
        /// The last failure.
        last: Box<Error>,
    },
}

/// A running control plane; its processes are killed and its directory removed on drop.
pub struct TestKube {
    // `Drop` kills the processes first; the directory is removed when `dir` drops afterwards.
    dir: tempfile::TempDir,
    processes: Vec<Process>,
    pki: ClusterPki,
    etcd_port: u16,
    apiserver_port: u16,
    kubeconfig: String,
}

/// A started component and where its output goes.
struct Process {
    name: &'static str,
    child: Child,
}

impl TestKube {
    /// Starts etcd, the API server and the controller-manager, and waits until the API server is ready
    /// and the controller-manager has created the `default` service account. Panics with a message
    /// naming the fix when the binaries are missing, and with the end of a component's log when it fails.
    pub fn start() -> TestKube {
        match Self::try_start() {
            Ok(kube) => kube,
            Err(err) => panic!("{err}"),
        }
    }

    /// Like [`TestKube::start`], returning the reason instead of panicking.
    pub fn try_start() -> Result<TestKube, Error> {
        let bin_dir = locate_binaries(
            std::env::var_os(BIN_DIR_VARIABLE).map(PathBuf::from),
            std::env::var_os(CACHE_VARIABLE).map(PathBuf::from),
            std::env::var_os("HOME").map(PathBuf::from),
        )?;
        // Three tries: a port picked as free can be taken by another test before a component binds it.
        const TRIES: u32 = 3;
        let mut last = None;
        for _ in 0..TRIES {
            match Self::launch(&bin_dir) {
                Err(err) if err.is_port_clash() => last = Some(err),
                other => return other,
            }
        }
        Err(Error::NoFreePorts {
            tries: TRIES,
            last: Box::new(last.expect("at least one try")),
        })
    }

    fn launch(bin_dir: &Path) -> Result<TestKube, Error> {
        let dir = tempfile::Builder::new()
            .prefix("cairn-testkube-")
            .tempdir()
            .map_err(|source| io("create a temporary directory", source))?;
        let pki = ClusterPki::generate()?;
        let [etcd_port, etcd_peer_port, apiserver_port] = free_ports()?;
        let mut kube = TestKube {
            dir,
            processes: Vec::new(),
            pki,
            etcd_port,
            apiserver_port,
            kubeconfig: String::new(),
        };
        kube.kubeconfig =
            kube.pki
                .kubeconfig(&kube.server_url(), "cairn-testkube-admin", &kube.pki.admin);
        kube.write_files()?;
        kube.spawn(bin_dir, "etcd", kube.etcd_args(etcd_peer_port))?;
        kube.wait_for_etcd()?;
        kube.spawn(bin_dir, "kube-apiserver", kube.apiserver_args())?;
        kube.wait_until("kube-apiserver", "GET /readyz answers 200 ok", |kube| {
            kube.admin_get("/readyz")
                .map(|(status, body)| (status == 200, format!("{status} {}", body.trim())))
        })?;
        kube.spawn(
            bin_dir,
            "kube-controller-manager",
            kube.controller_manager_args(),
        )?;
        // The service-account controller creates `default` in every namespace; pods cannot be created
        // in a namespace without it, and its arrival shows the controller-manager is working.
        kube.wait_until(
            "kube-controller-manager",
            "the service account default/default exists",
            |kube| {
                kube.admin_get("/api/v1/namespaces/default/serviceaccounts/default")
                    .map(|(status, _)| (status == 200, format!("last answer {status}")))
            },
        )?;
        Ok(kube)
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// The API server's port.
    pub fn port(&self) -> u16 {
        self.apiserver_port
    }

    /// A kubeconfig for the admin user ([`ADMIN_USER`] in `system:masters`), certificates inline.
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    /// The file holding [`TestKube::kubeconfig`] (for a `KUBECONFIG` variable or `--kubeconfig`).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// The cluster CA certificate (PEM) that signed the server's and the clients' certificates.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca.cert_pem
    }

    /// The admin client certificate (PEM).
    pub fn admin_cert_pem(&self) -> &str {
        &self.pki.admin.cert_pem
    }

    /// The admin client certificate's private key (PEM, PKCS #8).
    pub fn admin_key_pem(&self) -> &str {
        &self.pki.admin.key_pem
    }

    /// The temporary directory holding data, certificates and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The log of `component` (`etcd`, `kube-apiserver` or `kube-controller-manager`) so far.
    pub fn log(&self, component: &str) -> String {
        std::fs::read_to_string(self.log_path(component)).unwrap_or_default()
    }

    /// The process ids of etcd, the API server and the controller-manager, in that order (to check that
    /// they are gone after a stop).
    pub fn process_ids(&self) -> Vec<u32> {
        self.processes
            .iter()
            .map(|process| process.child.id())
            .collect()
    }

    /// Stops the control plane and removes its directory (what dropping it does).
    pub fn stop(self) {
        drop(self);
    }

    fn log_path(&self, component: &str) -> PathBuf {
        self.dir.path().join(format!("{component}.log"))
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write_files(&self) -> Result<(), Error> {
        let files = [
            ("ca.crt", self.pki.ca.cert_pem.as_str()),
            ("ca.key", self.pki.ca.key_pem.as_str()),
            ("apiserver.crt", self.pki.apiserver.cert_pem.as_str()),
            ("apiserver.key", self.pki.apiserver.key_pem.as_str()),
            ("sa.pub", self.pki.service_account_public_pem.as_str()),
            ("sa.key", self.pki.service_account_key_pem.as_str()),
            ("admin.kubeconfig", self.kubeconfig.as_str()),
        ];
        for (name, contents) in files {
            write_private(&self.file(name), contents)?;
        }
        let controller_manager = self.pki.kubeconfig(
            &self.server_url(),
            "system:kube-controller-manager",
            &self.pki.controller_manager,
        );
        write_private(
            &self.file("controller-manager.kubeconfig"),
            &controller_manager,
        )
    }

    fn etcd_args(&self, peer_port: u16) -> Vec<String> {
        let client = format!("http://127.0.0.1:{}", self.etcd_port);
        let peer = format!("http://127.0.0.1:{peer_port}");
        vec![
            "--name=cairn".into(),
            format!("--data-dir={}", self.file("etcd").display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=cairn={peer}"),
            // A throwaway store: an fsync per write only slows the tests down.
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ]
    }

    fn apiserver_args(&self) -> Vec<String> {
        let file = |name: &str| self.file(name).display().to_string();
        vec![
            format!("--etcd-servers=http://127.0.0.1:{}", self.etcd_port),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={}", self.apiserver_port),
            format!("--tls-cert-file={}", file("apiserver.crt")),
            format!("--tls-private-key-file={}", file("apiserver.key")),
            format!("--client-ca-file={}", file("ca.crt")),
            "--authorization-mode=Node,RBAC".into(),
            format!("--service-account-issuer={}", pki::SERVICE_ACCOUNT_ISSUER),
            format!("--service-account-key-file={}", file("sa.pub")),
            format!("--service-account-signing-key-file={}", file("sa.key")),
            format!("--service-cluster-ip-range={}", pki::SERVICE_CIDR),
            // The `kubernetes` service's endpoints would name 127.0.0.1, which Endpoints reject: the
            // reconciler would log that error every few seconds to no purpose.
            "--endpoint-reconciler-type=none".into(),
            "--profiling=false".into(),
        ]
    }

    fn controller_manager_args(&self) -> Vec<String> {
        let file = |name: &str| self.file(name).display().to_string();
        let kubeconfig = file("controller-manager.kubeconfig");
        vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            // Its own HTTPS endpoint (health, metrics) is not used; 0 turns it off, so it needs no
            // port and writes no self-signed certificate.
            "--secure-port=0".into(),
            "--leader-elect=false".into(),
            // Each controller acts as its own service account, as in kubeadm's clusters: RBAC's
            // bootstrap roles are written for that.
            "--use-service-account-credentials=true".into(),
            format!("--service-account-private-key-file={}", file("sa.key")),
            format!("--root-ca-file={}", file("ca.crt")),
            format!("--cluster-signing-cert-file={}", file("ca.crt")),
            format!("--cluster-signing-key-file={}", file("ca.key")),
            format!("--service-cluster-ip-range={}", pki::SERVICE_CIDR),
        ]
    }

    fn spawn(
        &mut self,
        bin_dir: &Path,
        name: &'static str,
        args: Vec<String>,
    ) -> Result<(), Error> {
        let log = std::fs::File::create(self.log_path(name))
            .map_err(|source| io(&format!("create the log of {name}"), source))?;
        let log_err = log
            .try_clone()
            .map_err(|source| io(&format!("open the log of {name}"), source))?;
        let child = Command::new(bin_dir.join(name))
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // The caller's kubeconfig or etcd settings must not leak into the components.
            .env_remove("KUBECONFIG")
            .env_remove("ETCDCTL_API")
            .spawn()
            .map_err(|source| io(&format!("run {}", bin_dir.join(name).display()), source))?;
        self.processes.push(Process { name, child });
        Ok(())
    }

    fn wait_for_etcd(&mut self) -> Result<(), Error> {
        let address = format!("127.0.0.1:{}", self.etcd_port);
        self.wait_until("etcd", "its client port accepts connections", |_| {
            Ok((
                std::net::TcpStream::connect(&address).is_ok(),
                "connection refused".to_owned(),
            ))
        })
    }

    /// Polls `probe` until it reports success, failing when the process of `component` exits or
    /// [`READY_TIMEOUT`] passes. A probe's error (say, a TLS handshake before the server has its
    /// listener up) counts as not yet.
    fn wait_until(
        &mut self,
        component: &'static str,
        condition: &str,
        mut probe: impl FnMut(&Self) -> std::io::Result<(bool, String)>,
    ) -> Result<(), Error> {
        let started = Instant::now();
        let mut last;
        loop {
            self.check_alive()?;
            match probe(self) {
                Ok((true, _)) => return Ok(()),
                Ok((false, answer)) => last = answer,
                Err(err) => last = err.to_string(),
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(Error::NotReady {
                    component,
                    waited: started.elapsed(),
                    condition: format!("{condition}; last: {last}"),
                    log_tail: self.log_tail(component),
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// An error for the first component that has exited.
    fn check_alive(&mut self) -> Result<(), Error> {
        let mut exited = None;
        for process in &mut self.processes {
            if let Ok(Some(status)) = process.child.try_wait() {
                exited = Some((process.name, status));
                break;
            }
        }
        match exited {
            None => Ok(()),
            Some((component, status)) => Err(Error::Exited {
                component,
                status,
                log_tail: self.log_tail(component),
            }),
        }
    }

    fn log_tail(&self, component: &str) -> String {
        tail(&self.log(component), LOG_TAIL_LINES)
    }

    /// `GET path` as the admin: the status code and the body.
    fn admin_get(&self, path: &str) -> std::io::Result<(u16, String)> {
        http::get(&self.pki, self.apiserver_port, path)
    }

    fn kill_all(&mut self) {
        // The controller-manager first, etcd last, so that none spends its last moments logging
        // connection errors about the others.
        while let Some(mut process) = self.processes.pop() {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
    }
}

impl Error {
    /// Whether a component failed because a port picked as free was taken meanwhile.
    fn is_port_clash(&self) -> bool {
        match self {
            Error::Exited { log_tail, .. } | Error::NotReady { log_tail, .. } => {
                log_tail.contains("address already in use")
            }
            _ => false,
        }
    }
}

impl Drop for TestKube {
    fn drop(&mut self) {
        self.kill_all();
    }
}

impl fmt::Debug for TestKube {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestKube")
            .field("dir", &self.dir.path())
            .field("server_url", &self.server_url())
            .field("etcd_port", &self.etcd_port)
            .finish_non_exhaustive()
    }
}

/// The directory holding the three programs: `explicit` (from `$CAIRN_TEST_KUBE_BIN`) when given,
/// else where `scripts/kube-binaries.sh` builds this version set under `cache` (from
/// `$CAIRN_TEST_CACHE`) or `$HOME/.cache/cairn-test`.
fn locate_binaries(
    explicit: Option<PathBuf>,
    cache: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Result<PathBuf, Error> {
    let (dir, location) = match (explicit, cache, home) {
        (Some(dir), _, _) => {
            let location = format!("${BIN_DIR_VARIABLE} ({})", dir.display());
            (dir, location)
        }
        (None, cache, home) => {
            let cache = cache.or_else(|| home.map(|home| home.join(".cache/cairn-test")));
            let Some(cache) = cache else {
                return Err(Error::BinariesMissing {
                    location: format!("neither ${BIN_DIR_VARIABLE}, ${CACHE_VARIABLE} nor $HOME"),
                    missing: "is set".into(),
                });
            };
            let dir = cache
                .join(format!("kube-{KUBE_VERSION}-etcd-{ETCD_VERSION}"))
                .join("bin");
            let location = format!(
                "the build cache {} (${BIN_DIR_VARIABLE} is not set)",
                dir.display()
            );
            (dir, location)
        }
    };
    let missing: Vec<&str> = PROGRAMS
        .into_iter()
        .filter(|program| !dir.join(program).is_file())
        .collect();
    if missing.is_empty() {
        Ok(dir)
    } else {
        Err(Error::BinariesMissing {
            location,
            missing: format!("no {}", missing.join(", no ")),
        })
    }
}

/// Three distinct free loopback ports.
fn free_ports() -> Result<[u16; 3], Error> {
    // All three listeners are open at once, so the kernel hands out three different ports.
    let listeners = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|source| io("find free loopback ports", source))?;
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(|source| io("find free loopback ports", source))?
            .port();
    }
    Ok(ports)
}

/// Writes a file only its owner can read: it may hold a private key.
fn write_private(path: &Path, contents: &str) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(contents.as_bytes()))
        .map_err(|source| io(&format!("write {}", path.display()), source))
}

fn io(what: &str, source: std::io::Error) -> Error {
    Error::Io {
        what: what.to_owned(),
        source,
    }
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_programs(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for program in PROGRAMS {
            std::fs::write(dir.join(program), "").unwrap();
        }
    }

    #[test]
    fn missing_binaries_name_the_fix() {
        let empty = tempfile::tempdir().unwrap();
        let message = locate_binaries(Some(empty.path().to_owned()), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("bash scripts/kube-binaries.sh"),
            "{message}"
        );
        assert!(message.contains("CAIRN_TEST_KUBE_BIN"), "{message}");
        assert!(message.contains("no etcd, no kube-apiserver"), "{message}");
        let message = locate_binaries(None, None, Some(empty.path().to_owned()))
            .unwrap_err()
            .to_string();
        assert!(message.contains(".cache/cairn-test/kube-v"), "{message}");
        assert!(message.contains("bash scripts/test.sh"), "{message}");
    }

    #[test]
    fn the_variable_wins_over_the_cache_and_the_cache_over_home() {
        let root = tempfile::tempdir().unwrap();
        let cached = |base: &Path| {
            base.join(format!("kube-{KUBE_VERSION}-etcd-{ETCD_VERSION}"))
                .join("bin")
        };
        fake_programs(&root.path().join("explicit"));
        fake_programs(&cached(&root.path().join("cache")));
        fake_programs(&cached(&root.path().join("home/.cache/cairn-test")));
        let home = Some(root.path().join("home"));
        assert_eq!(
            locate_binaries(
                Some(root.path().join("explicit")),
                Some(root.path().join("cache")),
                home.clone()
            )
            .unwrap(),
            root.path().join("explicit")
        );
        assert_eq!(
            locate_binaries(None, Some(root.path().join("cache")), home.clone()).unwrap(),
            cached(&root.path().join("cache"))
        );
        assert_eq!(
            locate_binaries(None, None, home).unwrap(),
            cached(&root.path().join("home/.cache/cairn-test"))
        );
    }

    #[test]
    fn versions_match_the_build_script() {
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kube-binaries.sh"),
        )
        .unwrap();
        assert!(
            script.contains(&format!("\nKUBE_VERSION={KUBE_VERSION}\n")),
            "scripts/kube-binaries.sh builds another Kubernetes than {KUBE_VERSION}"
        );
        assert!(
            script.contains(&format!("\nETCD_VERSION={ETCD_VERSION}\n")),
            "scripts/kube-binaries.sh builds another etcd than {ETCD_VERSION}"
        );
    }

    #[test]
    fn free_ports_are_distinct() {
        let [a, b, c] = free_ports().unwrap();
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
