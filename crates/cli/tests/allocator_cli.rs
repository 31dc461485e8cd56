//! `cairn serve` runs with at most two glibc malloc arenas (`MALLOC_ARENA_MAX=2`; `cairn stack` commands one, see
//! `src/allocator.rs`) unless its environment sets the variable, which is then kept as given.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

mod common;

use common::serve_with;

/// `MALLOC_ARENA_MAX` in the environment of a running `cairn serve` started with `given` (unset when `None`).
fn arena_max_of_serve(given: Option<&str>) -> Option<String> {
    let data_dir = tempfile::tempdir().unwrap();
    let server = serve_with(|command| {
        command
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir.path())
            .env_remove("MALLOC_ARENA_MAX");
        if let Some(value) = given {
            command.env("MALLOC_ARENA_MAX", value);
        }
    });
    // The process that serves is the one started again with the variable (same process ID).
    let address = server.url.trim_start_matches("http://");
    std::net::TcpStream::connect(address).expect("the re-started cairn serves");
    let environ = std::fs::read(format!("/proc/{}/environ", server.child.id())).unwrap();
    environ
        .split(|b| *b == 0)
        .filter_map(|entry| entry.strip_prefix(b"MALLOC_ARENA_MAX="))
        .map(|value| String::from_utf8_lossy(value).into_owned())
        .next()
}

#[test]
fn cairn_serve_runs_with_two_malloc_arenas_unless_told_otherwise() {
    assert_eq!(arena_max_of_serve(None).as_deref(), Some("2"));
    assert_eq!(arena_max_of_serve(Some("4")).as_deref(), Some("4"));
}
