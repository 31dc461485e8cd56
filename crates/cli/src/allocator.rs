//! How the process allocates: with glibc, a `cairn stack` command runs with one malloc arena and every other
//! command (`serve` included) with at most two.
//!
//! glibc's malloc gives each thread that allocates an arena of its own (up to eight per core), and memory freed in
//! one arena serves only that arena's threads: a stack operation that builds and drops sets of thousands of records
//! across the runtime's workers and the store's connection threads leaves each arena holding its own high-water
//! mark, so the process stays resident at several times its live heap (a 5,000-resource stack create: 40 MB of
//! heap, 156 MB resident; see `docs/benchmarks.md`). Two arenas keep it close to the heap; one closer still, which
//! is what a stack command gets: it holds managed sets of thousands of records, and one arena costs it no
//! measurable time. Every other command keeps two: a deployment allocates faster than it holds (one arena cost a
//! 20,000-resource deployment 14% more time) and a server's threads would queue on the one arena's lock. `mallopt`
//! would need `unsafe` (forbidden in this workspace), and glibc reads `MALLOC_ARENA_MAX` only when the process
//! starts: so `cairn` starts itself once more with the variable set, unless its environment already sets it (which
//! is then respected). The variable is inherited by what `cairn` starts.

/// What a command allocates most: sets it holds (a stack's managed set) or data it passes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload {
    HoldsLargeSets,
    PassesThrough,
}

/// Replaces the process with itself run with `MALLOC_ARENA_MAX` set for its workload, when the variable is not set
/// yet; returns (and the process goes on as it is) when it is set or the binary cannot be run again.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn limit_arenas(workload: Workload) {
    use std::os::unix::process::CommandExt as _;

    const ARENA_MAX_VARIABLE: &str = "MALLOC_ARENA_MAX";
    let arena_max = arena_max(workload);

    if std::env::var_os(ARENA_MAX_VARIABLE).is_some() {
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
    // `exec` returns only when it failed (the binary was replaced or removed since): run with the default arenas.
    let _failed = command.args(args).env(ARENA_MAX_VARIABLE, arena_max).exec();
}

/// The arenas a process gets for its workload.
fn arena_max(workload: Workload) -> &'static str {
    match workload {
        Workload::HoldsLargeSets => "1",
        Workload::PassesThrough => "2",
    }
}

/// Other allocators bound their arenas themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn limit_arenas(_workload: Workload) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_holding_large_sets_gets_one_arena_any_other_two() {
        assert_eq!(arena_max(Workload::HoldsLargeSets), "1");
        assert_eq!(arena_max(Workload::PassesThrough), "2");
    }
}
