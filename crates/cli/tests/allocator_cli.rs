//! `cairn serve` runs with mimalloc set to give freed memory back soon (`MIMALLOC_PURGE_DELAY=10`,
//! `MIMALLOC_ALLOW_THP=0`, `MIMALLOC_PAGE_FULL_RETAIN=0`), at most two glibc malloc arenas for its C code
//! (`MALLOC_ARENA_MAX=2`; `cairn stack` commands one, see `src/allocator.rs`) and a fixed mmap threshold
//! (`MALLOC_MMAP_THRESHOLD_`) unless its environment sets the variables, which are then kept as given.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

mod common;

use common::serve_with;

/// `MALLOC_ARENA_MAX` and `MALLOC_MMAP_THRESHOLD_` in the environment of a running `cairn serve` started with
/// `given` (arena count, threshold; both unset when `None`).
fn malloc_variables_of_serve(given: Option<(&str, &str)>) -> (Option<String>, Option<String>) {
    let data_dir = tempfile::tempdir().unwrap();
    let server = serve_with(|command| {
        command
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir.path())
            .env_remove("MALLOC_ARENA_MAX")
            .env_remove("MALLOC_MMAP_THRESHOLD_")
            .env_remove("MIMALLOC_PURGE_DELAY")
            .env_remove("MIMALLOC_ALLOW_THP")
            .env_remove("MIMALLOC_PAGE_FULL_RETAIN");
        if let Some((arena_max, mmap_threshold)) = given {
            command
                .env("MALLOC_ARENA_MAX", arena_max)
                .env("MALLOC_MMAP_THRESHOLD_", mmap_threshold);
        }
    });
    // The process that serves is the one started again with the variable (same process ID).
    let address = server.url.trim_start_matches("http://");
    std::net::TcpStream::connect(address).expect("the re-started cairn serves");
    let environ = std::fs::read(format!("/proc/{}/environ", server.child.id())).unwrap();
    let variable = |name: &str| {
        let prefix = format!("{name}=");
        environ
            .split(|b| *b == 0)
            .filter_map(|entry| entry.strip_prefix(prefix.as_bytes()))
            .map(|value| String::from_utf8_lossy(value).into_owned())
            .next()
    };
    assert_eq!(variable("MIMALLOC_PURGE_DELAY").as_deref(), Some("10"));
    for mimalloc_setting in ["MIMALLOC_ALLOW_THP", "MIMALLOC_PAGE_FULL_RETAIN"] {
        assert_eq!(
            variable(mimalloc_setting).as_deref(),
            Some("0"),
            "{mimalloc_setting}"
        );
    }
    (
        variable("MALLOC_ARENA_MAX"),
        variable("MALLOC_MMAP_THRESHOLD_"),
    )
}

#[test]
fn cairn_serve_runs_with_its_allocator_settings_and_two_malloc_arenas_unless_told_otherwise() {
    assert_eq!(
        malloc_variables_of_serve(None),
        (Some("2".to_owned()), Some("131072".to_owned()))
    );
    assert_eq!(
        malloc_variables_of_serve(Some(("4", "1048576"))),
        (Some("4".to_owned()), Some("1048576".to_owned()))
    );
}
