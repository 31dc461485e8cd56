//! How the process allocates: with glibc, `cairn serve` runs with at most two malloc arenas and every other
//! command with one.
//!
//! glibc's malloc gives each thread that allocates an arena of its own (up to eight per core), and memory freed in
//! one arena serves only that arena's threads: a stack operation that builds and drops sets of thousands of records
//! across the runtime's workers and the store's connection threads leaves each arena holding its own high-water
//! mark, so the process stays resident at several times its live heap (a 5,000-resource stack create: 40 MB of
//! heap, 156 MB resident; see `docs/benchmarks.md`). A command run in process (one user's deployment or stack
//! operation, its concurrency bounded by `--parallelism`) takes one arena: the lowest resident set, for a few per
//! cent more CPU. The server keeps two: with one, its runtime workers, store threads and HTTP connections queue on
//! the arena's lock (twenty concurrent deployments took 1.5x as long). `mallopt` would need `unsafe` (forbidden in
//! this workspace), and glibc reads `MALLOC_ARENA_MAX` only when the process starts: so `cairn` starts itself once
//! more with the variable set, unless its environment already sets it (which is then respected). The variable is
//! inherited by what `cairn` starts.

/// Replaces the process with itself run with `MALLOC_ARENA_MAX` set (2 for a server, else 1), when the variable is
/// not set yet; returns (and the process goes on as it is) when it is set or the binary cannot be run again.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn limit_arenas(serving: bool) {
    use std::os::unix::process::CommandExt as _;

    const ARENA_MAX_VARIABLE: &str = "MALLOC_ARENA_MAX";
    let arena_max = arena_max(serving);

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

/// The arenas a process gets: two for a server, one for any other command.
fn arena_max(serving: bool) -> &'static str {
    if serving { "2" } else { "1" }
}

/// Other allocators bound their arenas themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn limit_arenas(_serving: bool) {}

#[cfg(test)]
mod tests {
    #[test]
    fn a_server_gets_two_arenas_and_any_other_command_one() {
        assert_eq!(super::arena_max(true), "2");
        assert_eq!(super::arena_max(false), "1");
    }
}
