//! How the process allocates: Rust's allocations through mimalloc, set to give memory back as soon as it is free;
//! the C code's (SQLite's page caches and statements) through glibc's malloc, with a bounded arena count and a fixed
//! mmap threshold.
//!
//! mimalloc serves each thread from pages of its own without a lock, where glibc's malloc took an arena lock shared
//! by the runtime's workers and the store's threads and spent a fifth of a deployment's CPU in `malloc`/`free` (a
//! 5,000-resource deployment took about 1.5 times as long; `docs/benchmarks.md`). By default it keeps what is freed
//! for a second before returning it (`purge_delay`), backs its memory with transparent huge pages where the kernel
//! allows (`allow_thp`: a 2 MiB page stays resident while any of it is used) and retains free pages per size class
//! (`page_full_retain`); with those defaults a 5,000-resource stack was resident at twice its glibc size (about 30
//! KiB per managed resource). Set to zero, it is resident at what glibc's malloc was, and the time gain stays: every
//! command runs with them but a client of a server (`--server`), which holds little and lives briefly, except that
//! only a stack command returns freed memory at once; the others keep it 10 ms for their next allocations
//! (`purge_delay`).
//!
//! glibc's malloc still serves C code: it gives each thread that allocates an arena of its own (up to eight per
//! core), and memory freed in one arena serves only that arena's threads, so a process's SQLite connections would
//! each keep a high-water mark. A stack command runs with one arena (it holds managed sets of thousands of records,
//! and its page caches are the C heap's largest part), every other command with at most two. glibc also raises its
//! mmap threshold (from 128 KiB up to 32 MiB) each time it frees a mapped block, after which blocks of that size come
//! from the heap and leave holes there when freed; setting the threshold fixes it at glibc's starting value.
//!
//! mimalloc and glibc read their settings only when the process starts (`mi_option_set` and `mallopt` would need
//! `unsafe`, forbidden in this workspace): so `cairn` starts itself once more with the variables set, unless its
//! environment already sets them (a value set there is respected) or it is a server's client. The variables are
//! inherited by what `cairn` starts.

/// Not with the `system-allocator` feature, for heap profilers that intercept `malloc`.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What a command allocates most: sets it holds (a stack's managed set) or data it passes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload {
    HoldsLargeSets,
    PassesThrough,
    /// A client of a server (`--server`): it holds little and lives briefly, so the allocators' defaults serve it
    /// but for huge pages (see `keep_off_huge_pages`), and starting it again for settings would cost it a tenth of
    /// its time.
    Client,
}

/// Replaces the process with itself run with its workload's [`malloc_settings`], when any of those variables is not
/// set yet; returns (and the process goes on as it is) when all are set or the binary cannot be run again.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn tune_malloc(workload: Workload) {
    use std::os::unix::process::CommandExt as _;

    if workload == Workload::Client {
        keep_off_huge_pages();
        return;
    }
    let unset: Vec<(&str, &str)> = malloc_settings(workload)
        .into_iter()
        .filter(|(variable, _)| std::env::var_os(variable).is_none())
        .collect();
    if unset.is_empty() {
        return;
    }
    // `/proc/self/exe`: the binary itself, even when started through a symlink or a relative path.
    let Ok(binary) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(binary);
    if let Some(name) = args.next() {
        command.arg0(name);
    }
    // `exec` returns only when it failed (the binary was replaced or removed since): run with the allocators' defaults.
    let _failed = command.args(args).envs(unset).exec();
}

/// A client is not started again for mimalloc's settings, but one of them matters to it: mimalloc backs its memory
/// with transparent huge pages by default (`allow_thp`), and the kernel clears 2 MiB at each first touch of one,
/// which made a client following a deployment spend three quarters of its time in the kernel. mimalloc is built
/// not to ask for them (the `no_thp` feature: it would otherwise do so before `main`, in every process), and where
/// the kernel hands them out unasked (`transparent_hugepage=always`) the process asks it for none
/// (`PR_SET_THP_DISABLE`, what `MIMALLOC_ALLOW_THP=0` does in the commands started again), unless its environment
/// sets `MIMALLOC_ALLOW_THP`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_off_huge_pages() {
    if std::env::var_os(ALLOW_THP_VARIABLE).is_none() {
        // Without it the client runs as before, only slower.
        let _ = rustix::thread::disable_transparent_huge_pages(true);
    }
}

/// The environment variables a workload runs with: mimalloc's memory settings, glibc's arena count and mmap threshold.
fn malloc_settings(workload: Workload) -> Vec<(&'static str, &'static str)> {
    let Some(arenas) = arena_max(workload) else {
        return Vec::new();
    };
    vec![
        ("MIMALLOC_PURGE_DELAY", purge_delay(workload)),
        (ALLOW_THP_VARIABLE, "0"),
        ("MIMALLOC_PAGE_FULL_RETAIN", "0"),
        (ARENA_MAX_VARIABLE, arenas),
        (MMAP_THRESHOLD_VARIABLE, MMAP_THRESHOLD_BYTES),
    ]
}

const ALLOW_THP_VARIABLE: &str = "MIMALLOC_ALLOW_THP";
const ARENA_MAX_VARIABLE: &str = "MALLOC_ARENA_MAX";
/// glibc's name for it ends with an underscore.
const MMAP_THRESHOLD_VARIABLE: &str = "MALLOC_MMAP_THRESHOLD_";
/// glibc's starting threshold (128 KiB); set, it no longer rises.
const MMAP_THRESHOLD_BYTES: &str = "131072";

/// How long mimalloc keeps freed memory before it returns it to the kernel, in milliseconds. A stack command returns
/// it at once: its peak is its managed sets. Anything else keeps it for 10 ms, enough to serve the next allocations
/// without the kernel: returned at once, `cairn serve` under twenty concurrent deployments took a third more page
/// faults, faulted pages the kernel clears again, and about 10% more CPU, at the same peak memory
/// (`docs/benchmarks.md`).
fn purge_delay(workload: Workload) -> &'static str {
    match workload {
        Workload::HoldsLargeSets => "0",
        Workload::PassesThrough | Workload::Client => "10",
    }
}

/// The arenas a process gets for its workload; none set for a client, which runs with the defaults.
fn arena_max(workload: Workload) -> Option<&'static str> {
    match workload {
        Workload::HoldsLargeSets => Some("1"),
        Workload::PassesThrough => Some("2"),
        Workload::Client => None,
    }
}

/// Without glibc, mimalloc runs with its defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn tune_malloc(_workload: Workload) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_holding_large_sets_gets_one_arena_any_other_two() {
        assert_eq!(arena_max(Workload::HoldsLargeSets), Some("1"));
        assert_eq!(arena_max(Workload::PassesThrough), Some("2"));
    }

    #[test]
    fn a_client_of_a_server_is_not_started_again() {
        assert!(malloc_settings(Workload::Client).is_empty());
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_client_asks_the_kernel_for_no_huge_pages() {
        assert!(
            std::env::var_os(ALLOW_THP_VARIABLE).is_none(),
            "run without {ALLOW_THP_VARIABLE}"
        );
        keep_off_huge_pages();
        assert_eq!(
            rustix::thread::transparent_huge_pages_are_disabled().ok(),
            Some(true)
        );
    }

    #[test]
    fn every_command_returns_freed_memory_soon_and_takes_no_huge_pages() {
        for (workload, purge_delay) in [
            (Workload::HoldsLargeSets, "0"),
            (Workload::PassesThrough, "10"),
        ] {
            let settings = malloc_settings(workload);
            assert!(
                settings.contains(&("MIMALLOC_PURGE_DELAY", purge_delay)),
                "{workload:?}"
            );
            for variable in ["MIMALLOC_ALLOW_THP", "MIMALLOC_PAGE_FULL_RETAIN"] {
                assert!(settings.contains(&(variable, "0")), "{variable}");
            }
            let names: Vec<&str> = settings.iter().map(|(v, _)| *v).collect();
            assert!(names.ends_with(&["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_"]));
            assert!(!names.contains(&"GLIBC_TUNABLES"));
        }
    }
}
