//! How the process allocates: with glibc, a `cairn stack` command runs with one malloc arena and every other
//! command (`serve` included) with at most two, and every command with a fixed mmap threshold.
//!
//! glibc's malloc gives each thread that allocates an arena of its own (up to eight per core), and memory freed in
//! one arena serves only that arena's threads: a stack operation that builds and drops sets of thousands of records
//! across the runtime's workers and the store's connection threads leaves each arena holding its own high-water
//! mark, so the process stays resident at several times its live heap (a 5,000-resource stack create: 40 MB of
//! heap, 156 MB resident; see `docs/benchmarks.md`). Two arenas keep it close to the heap; one closer still, which
//! is what a stack command gets: it holds managed sets of thousands of records, and one arena costs it no
//! measurable time. Every other command keeps two: a deployment allocates faster than it holds (one arena cost a
//! 20,000-resource deployment 14% more time) and a server's threads would queue on the one arena's lock.
//!
//! glibc also raises its mmap threshold (from 128 KiB up to 32 MiB) each time it frees a mapped block, after which
//! blocks of that size come from the heap instead and leave holes there when freed: the buffers a stack operation
//! builds once per operation (the managed set as text, rows read in bulk) then keep the heap high. Setting the
//! threshold fixes it at glibc's starting value, so such blocks go back to the system when freed (about 1 KiB less
//! resident per managed resource of a 5,000-resource stack, at no measurable cost in time).
//!
//! A stack command's heap also asks for transparent huge pages (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`: glibc
//! advises the kernel to back its heap with 2 MiB pages where the kernel leaves that to `madvise`): a stack
//! operation grows its heap by tens of megabytes in a second, and touching each new 4 KiB page was a page fault (a
//! quarter of the CPU time of a stack create before its first extension call). The stack create of 800 resources
//! is about 25 ms faster with it and its peak resident memory within the memory target (`docs/benchmarks.md`).
//! Other commands keep 4 KiB pages: `serve` runs for long, where huge pages keep freed memory resident, and a
//! deployment measured no gain.
//!
//! `mallopt` would need `unsafe` (forbidden in this workspace), and glibc reads `MALLOC_ARENA_MAX`,
//! `MALLOC_MMAP_THRESHOLD_` and `GLIBC_TUNABLES` only when the process starts: so `cairn` starts itself once more
//! with the variables set, unless its environment already sets them (a value set there is respected). The variables
//! are inherited by what `cairn` starts.

/// What a command allocates most: sets it holds (a stack's managed set) or data it passes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload {
    HoldsLargeSets,
    PassesThrough,
}

/// Replaces the process with itself run with its workload's [`malloc_settings`], when any of those variables is not
/// set yet; returns (and the process goes on as it is) when all are set or the binary cannot be run again.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn tune_malloc(workload: Workload) {
    use std::os::unix::process::CommandExt as _;

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
    // `exec` returns only when it failed (the binary was replaced or removed since): run with glibc's defaults.
    let _failed = command.args(args).envs(unset).exec();
}

/// The environment variables a workload runs with: the arena count, the mmap threshold, and for a stack command the
/// huge-page tunable.
fn malloc_settings(workload: Workload) -> Vec<(&'static str, &'static str)> {
    let mut settings = vec![
        (ARENA_MAX_VARIABLE, arena_max(workload)),
        (MMAP_THRESHOLD_VARIABLE, MMAP_THRESHOLD_BYTES),
    ];
    if workload == Workload::HoldsLargeSets {
        settings.push((TUNABLES_VARIABLE, HUGE_PAGE_HEAP));
    }
    settings
}

const ARENA_MAX_VARIABLE: &str = "MALLOC_ARENA_MAX";
/// glibc's name for it ends with an underscore.
const MMAP_THRESHOLD_VARIABLE: &str = "MALLOC_MMAP_THRESHOLD_";
/// glibc's starting threshold (128 KiB); set, it no longer rises.
const MMAP_THRESHOLD_BYTES: &str = "131072";
const TUNABLES_VARIABLE: &str = "GLIBC_TUNABLES";
/// `madvise(MADV_HUGEPAGE)` on the heap (glibc 2.35 and later; older versions ignore the tunable).
const HUGE_PAGE_HEAP: &str = "glibc.malloc.hugetlb=1";

/// The arenas a process gets for its workload.
fn arena_max(workload: Workload) -> &'static str {
    match workload {
        Workload::HoldsLargeSets => "1",
        Workload::PassesThrough => "2",
    }
}

/// Other allocators bound their arenas themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn tune_malloc(_workload: Workload) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_holding_large_sets_gets_one_arena_any_other_two() {
        assert_eq!(arena_max(Workload::HoldsLargeSets), "1");
        assert_eq!(arena_max(Workload::PassesThrough), "2");
    }

    #[test]
    fn only_a_command_holding_large_sets_asks_for_huge_pages() {
        let tunables = |workload| {
            malloc_settings(workload)
                .into_iter()
                .find(|(variable, _)| *variable == "GLIBC_TUNABLES")
                .map(|(_, value)| value)
        };
        assert_eq!(
            tunables(Workload::HoldsLargeSets),
            Some("glibc.malloc.hugetlb=1")
        );
        assert_eq!(tunables(Workload::PassesThrough), None);
        for workload in [Workload::HoldsLargeSets, Workload::PassesThrough] {
            let names: Vec<&str> = malloc_settings(workload).iter().map(|(v, _)| *v).collect();
            assert!(names.starts_with(&["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_"]));
        }
    }
}
