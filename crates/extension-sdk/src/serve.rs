//! Serving an extension: command-line handling (`--socket PATH`, `--http PORT`, `--listen ADDR`) and one
//! listener that answers both the v2 HTTP routes and the local-deploy gRPC service.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use cairn_extension_grpc::proto::TypeFilesResponse;
use cairn_extension_grpc::{BicepExtensionServer, TransportBridge};

use crate::config::ExtensionConfig;
use crate::extension::Extension;
use crate::in_process::InProcessTransport;

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A Unix domain socket (`--socket PATH`), as Bicep local-deploy starts extensions.
    Socket(PathBuf),
    /// A TCP address (`--http PORT` binds `127.0.0.1:PORT`; `--listen ADDR` any address).
    Tcp(SocketAddr),
}

/// The usage text of [`parse_listen_args`].
pub const USAGE: &str = "\
options (exactly one):
  --socket PATH   serve gRPC (and HTTP v2) on a Unix domain socket
  --http PORT     serve HTTP v2 and gRPC (h2c) on 127.0.0.1:PORT (0 = any free port)
  --listen ADDR   serve HTTP v2 and gRPC on ADDR, e.g. 0.0.0.0:8080
  --types DIR     write the extension's type files (index.json, types.json) into DIR and exit";

/// Parses the serving options. `--wait-for-debugger` is accepted and ignored (Bicep documents it);
/// `--pipe` is Windows-only and rejected here.
pub fn parse_listen_args<I: IntoIterator<Item = String>>(args: I) -> Result<Listen, String> {
    let mut args = args.into_iter();
    let mut listen = Vec::new();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "--socket" => listen.push(Listen::Socket(PathBuf::from(value("--socket")?))),
            "--http" => {
                let port = value("--http")?;
                let port: u16 = port
                    .parse()
                    .map_err(|_| format!("--http: '{port}' is not a port number"))?;
                listen.push(Listen::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port))));
            }
            "--listen" => {
                let addr = value("--listen")?;
                listen.push(Listen::Tcp(addr.parse().map_err(|_| {
                    format!("--listen: '{addr}' is not an address like 127.0.0.1:8080")
                })?));
            }
            "--pipe" => {
                return Err(
                    "--pipe (Windows named pipes) is not supported on this platform; use --socket"
                        .into(),
                );
            }
            "--wait-for-debugger" => {}
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unexpected argument '{other}'\n{USAGE}")),
        }
    }
    match listen.len() {
        1 => Ok(listen.remove(0)),
        0 => Err(format!("no listener given\n{USAGE}")),
        _ => Err(format!(
            "give exactly one of --socket, --http, --listen\n{USAGE}"
        )),
    }
}

/// The extension's full router: the v2 HTTP routes plus the gRPC service `extension.BicepExtension`,
/// which bridges every gRPC call to the same v2 routes (as the extension's primary version).
pub fn full_router<C: ExtensionConfig>(extension: Extension<C>) -> Router {
    let version = extension.primary_version().to_owned();
    let type_files = extension.type_files();
    let v2 = extension.router();
    let mut bridge = TransportBridge::new(Arc::new(InProcessTransport::new(v2.clone())), version);
    if let Some(files) = type_files {
        bridge = bridge.with_type_files(type_files_response(files));
    }
    let grpc = BicepExtensionServer::new(Arc::new(bridge));
    v2.route_service("/extension.BicepExtension/{*method}", grpc)
}

/// `GetTypeFiles`' answer: the content of `index.json`, and every other file by the name `index.json` uses.
pub fn type_files_response(mut files: BTreeMap<String, String>) -> TypeFilesResponse {
    let index_file = files.remove("index.json").unwrap_or_default();
    TypeFilesResponse {
        index_file,
        type_files: files.into_iter().collect(),
    }
}

/// Writes the extension's type files into `dir` (created if missing): what `--types DIR` does.
pub fn write_type_files<C: ExtensionConfig>(
    extension: &Extension<C>,
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    let files = extension
        .type_files()
        .ok_or_else(|| format!("{} declares no types", extension.name()))?;
    std::fs::create_dir_all(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(&name);
        std::fs::write(&path, text + "\n")
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The directory of `--types DIR` (or `--types=DIR`) among `args`, if given: such a run writes the type files and
/// exits instead of serving.
pub fn types_arg(args: &[String]) -> Result<Option<PathBuf>, String> {
    let mut found = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--types" {
            let dir = iter.next().ok_or("--types needs a directory")?;
            found = Some(PathBuf::from(dir));
        } else if let Some(dir) = arg.strip_prefix("--types=") {
            found = Some(PathBuf::from(dir));
        }
    }
    Ok(found)
}

/// Serves `router` on `listen` until `shutdown` completes. `on_ready` receives the bound address text
/// (useful with `--http 0`).
pub async fn serve(
    router: Router,
    listen: &Listen,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(String),
) -> std::io::Result<()> {
    match listen {
        Listen::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            on_ready(format!("http://{}", listener.local_addr()?));
            axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Listen::Socket(path) => {
            // A socket file left by a previous run would make bind fail.
            if std::fs::symlink_metadata(path).is_ok_and(|m| {
                use std::os::unix::fs::FileTypeExt;
                m.file_type().is_socket()
            }) {
                std::fs::remove_file(path)?;
            }
            let listener = tokio::net::UnixListener::bind(path)?;
            on_ready(format!("unix:{}", path.display()));
            let result = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await;
            let _ = std::fs::remove_file(path);
            result
        }
    }
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn termination_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// A complete `main` for an extension binary: parses the process arguments, serves until SIGTERM or
/// Ctrl-C, and prints `listening on <address>` to stdout once ready.
pub fn serve_main<C: ExtensionConfig>(extension: Extension<C>) -> ExitCode {
    serve_main_with_args(extension, std::env::args().skip(1))
}

/// [`serve_main`] with explicit arguments (without the program name).
pub fn serve_main_with_args<C: ExtensionConfig, I: IntoIterator<Item = String>>(
    extension: Extension<C>,
    args: I,
) -> ExitCode {
    let args: Vec<String> = args.into_iter().collect();
    match types_arg(&args) {
        Ok(Some(dir)) => {
            return match write_type_files(&extension, &dir) {
                Ok(written) => {
                    for path in written {
                        println!("wrote {}", path.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("{}: {message}", extension.name());
                    ExitCode::FAILURE
                }
            };
        }
        Ok(None) => {}
        Err(message) => {
            eprintln!("{}: {message}", extension.name());
            return ExitCode::from(2);
        }
    }
    let listen = match parse_listen_args(args) {
        Ok(listen) => listen,
        Err(message) => {
            eprintln!("{}: {message}", extension.name());
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!(
                "{}: could not start the async runtime: {err}",
                extension.name()
            );
            return ExitCode::FAILURE;
        }
    };
    let name = extension.name().to_owned();
    let router = full_router(extension);
    let result = runtime.block_on(serve(router, &listen, termination_signal(), |address| {
        println!("listening on {address}");
    }));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{name}: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Listen, String> {
        parse_listen_args(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn listen_options() {
        assert_eq!(
            parse(&["--socket", "/tmp/x.sock"]),
            Ok(Listen::Socket("/tmp/x.sock".into()))
        );
        assert_eq!(
            parse(&["--http", "8080"]),
            Ok(Listen::Tcp("127.0.0.1:8080".parse().unwrap()))
        );
        assert_eq!(
            parse(&["--http=0"]),
            Ok(Listen::Tcp("127.0.0.1:0".parse().unwrap()))
        );
        assert_eq!(
            parse(&["--listen", "0.0.0.0:9"]),
            Ok(Listen::Tcp("0.0.0.0:9".parse().unwrap()))
        );
        assert_eq!(
            parse(&["--wait-for-debugger", "--socket", "s"]),
            Ok(Listen::Socket("s".into()))
        );
    }

    #[test]
    fn bad_listen_options() {
        for args in [
            &[][..],
            &["--http", "x"],
            &["--socket"],
            &["--socket", "a", "--http", "1"],
            &["--pipe", "p"],
            &["--nope"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
