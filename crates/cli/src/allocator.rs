//! How the process allocates: with glibc, `cairn` runs with at most two malloc arenas.
//!
//! glibc's malloc gives each thread that allocates an arena of its own (up to eight per core), and memory freed in
//! one arena serves only that arena's threads: a stack operation that builds and drops sets of thousands of records
//! across the runtime's workers and the store's connection threads leaves each arena holding its own high-water
//! mark, so the process stays resident at several times its live heap (a 5,000-resource stack create: 40 MB of
//! heap, 156 MB resident; see `docs/benchmarks.md`). Two arenas keep it close to the heap at no measurable cost in
//! time. `mallopt` would need `unsafe` (forbidden in this workspace), and glibc reads `MALLOC_ARENA_MAX` only when
//! the process starts: so `cairn` starts itself once more with the variable set, unless its environment already
//! sets it (which is then respected). The variable is inherited by what `cairn` starts.

/// Replaces the process with itself run with `MALLOC_ARENA_MAX=2`, when the variable is not set yet; returns (and
/// the process goes on as it is) when it is set or the binary cannot be run again.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn limit_arenas() {
    use std::os::unix::process::CommandExt as _;

    const ARENA_MAX_VARIABLE: &str = "MALLOC_ARENA_MAX";
    const ARENA_MAX: &str = "2";

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
    let _failed = command.args(args).env(ARENA_MAX_VARIABLE, ARENA_MAX).exec();
}

/// Other allocators bound their arenas themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn limit_arenas() {}
