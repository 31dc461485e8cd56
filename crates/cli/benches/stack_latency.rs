//! Stack latency benchmark (a bench binary, not a timed test): `cairn stack group create` run as a user runs it
//! (the `cairn` binary, in-process engine on its own `CAIRN_HOME`) against a loopback HTTP v2 extension that
//! answers every call after a fixed latency, compared with the ideal the engine's parallelism allows.
//!
//! `cargo bench -p cairn --bench stack_latency -- [--runs 3] [--count 800] [--update-to 400] [--latency-ms 20]
//! [--baseline PATH] [--calls PATH]`
//!
//! With `--baseline PATH` (another build of the `cairn` binary, e.g. of an earlier commit), every run measures both
//! binaries, alternating which goes first, so a before/after comparison shares the machine's load of the moment.
//! With `--calls PATH`, every call the extension answered is appended to PATH, a phase at a time (a `#` line naming
//! the binary and the phase, then one line a call: operation, connection, start and end in microseconds since the
//! extension started), for a closer look at how the calls were spaced.
//!
//! Per run, on a fresh data directory with one resource group:
//! 1. **create**: a stack of `count` independent extension resources (`--action-on-unmanage deleteAll`);
//! 2. **update**: the same stack with the first `update-to` of them: those are applied again, the rest deleted;
//! 3. **deployment** (the reference the stack is held to): `cairn deployment group create` of `count` other
//!    independent resources on the same extension.
//!
//! Each phase is timed from spawning the command to its exit (process start, opening the store, the operation,
//! following it to its end, printing the result). The ideal is the extension's latency times the waves the
//! deployment parallelism (16, the engine's default) needs: create ⌈count/16⌉ × latency; update ⌈kept/16⌉ ×
//! latency to apply the kept resources again plus ⌈deleted/16⌉ × latency to delete the rest (the deletes can only
//! start once the deployment has ended, since the stack's diff needs its result). With 800 → 400 at 20 ms both
//! are 1.0 s. Since each extension create also asks `preview` (and a stack's new resource `get`) first, each phase
//! is also held to what the calls the extension saw allow: those lookups run in stages of their own that overlap
//! the creates before them, so the creates take the waves of the slowest stage, the deletes theirs after. The extension records every call, so each phase is also split into: before the first call (process
//! start, store, template, records), the calls themselves (first start to last end; with the busiest concurrency
//! seen), the pause between the update's last apply and its first delete, and after the last call (recording the
//! outcome, the CLI noticing it, printing, exiting).
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it runs once with 24 resources updated to 12, as a smoke
//! test of the same path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

mod loopback;
use loopback::{Call, Extension, Home, cairn_timed, seconds, stdout_json, template};

/// The engine's default parallelism, which the ideal assumes (the CLI runs with the defaults).
const PARALLELISM: usize = 16;
const STACK: &str = "bench";
const GROUP: &str = "rg";

struct Options {
    runs: usize,
    count: usize,
    update_to: usize,
    latency: Duration,
    /// Another `cairn` binary measured in the same runs.
    baseline: Option<PathBuf>,
    /// Where to append every call the extension answered.
    calls: Option<PathBuf>,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs the binary without it: one small run.
    let measuring = args.iter().any(|a| a == "--bench");
    let (runs, count) = if measuring { (3, 800) } else { (1, 24) };
    let count = value("--count").unwrap_or(count).max(1);
    Options {
        runs: value("--runs").unwrap_or(runs).max(1),
        count,
        update_to: value("--update-to").unwrap_or(count / 2).min(count),
        latency: Duration::from_millis(value("--latency-ms").unwrap_or(20) as u64),
        baseline: args
            .iter()
            .position(|a| a == "--baseline")
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from),
        calls: args
            .iter()
            .position(|a| a == "--calls")
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from),
    }
}

fn waves(resources: usize) -> u32 {
    resources.div_ceil(PARALLELISM) as u32
}

/// One timed command and where its time went, from the extension's record of its calls.
struct Phase {
    wall: Duration,
    ideal: Duration,
    /// Process start to the first call.
    before: Duration,
    /// First call start to last call end.
    calls: Duration,
    /// The update's last apply end to its first delete start.
    pause: Option<Duration>,
    /// Last call end to the command's exit.
    after: Duration,
    busiest: usize,
    /// The mean time the extension took per call (its latency, as its timer delivered it).
    mean_call: Duration,
    /// The share of the calls' span the `PARALLELISM` slots spent inside calls (1.0: never idle between them).
    occupancy: f64,
    /// The mean time from the extension's answer to the next request on the same connection (under 5 ms: the
    /// client's turnaround, not a pause of the operation): what cairn takes per call beyond the latency.
    turnaround: Duration,
    counts: BTreeMap<&'static str, usize>,
    /// The least time the calls the extension saw allow, at `latency` each: an extension create's lookups
    /// (`preview`, then a stack's existence `get`) each run in a stage of their own, `parallelism` wide, that
    /// overlaps the creates before it, so the creates take the waves of the slowest stage, and the deletes their
    /// own waves after them.
    bound: Duration,
}

/// What the calls in `counts` allow at best (see [`Phase::bound`]).
fn bound_of(counts: &BTreeMap<&'static str, usize>, latency: Duration) -> Duration {
    let count = |op: &str| counts.get(op).copied().unwrap_or(0);
    let creates = count("createOrUpdate");
    let slowest_stage = if creates == 0 {
        0
    } else {
        waves(creates)
            .max(waves(count("preview")))
            .max(waves(count("get")))
    };
    latency * (slowest_stage + waves(count("delete")))
}

impl Phase {
    fn of(
        wall: Duration,
        ideal: Duration,
        latency: Duration,
        origin: Duration,
        calls: &[Call],
        busiest: usize,
    ) -> Phase {
        let first = calls.iter().map(|c| c.start).min().unwrap_or(origin);
        let last = calls.iter().map(|c| c.end).max().unwrap_or(origin);
        let last_apply = calls
            .iter()
            .filter(|c| c.operation == "createOrUpdate")
            .map(|c| c.end)
            .max();
        let first_delete = calls
            .iter()
            .filter(|c| c.operation == "delete")
            .map(|c| c.start)
            .min();
        let mut counts = BTreeMap::new();
        for call in calls {
            *counts.entry(call.operation).or_default() += 1;
        }
        let inside: Duration = calls.iter().map(|c| c.end.saturating_sub(c.start)).sum();
        let mut by_connection: BTreeMap<u16, Vec<&Call>> = BTreeMap::new();
        for call in calls {
            by_connection.entry(call.connection).or_default().push(call);
        }
        let gaps: Vec<Duration> = by_connection
            .values_mut()
            .flat_map(|calls| {
                calls.sort_by_key(|c| c.start);
                calls
                    .windows(2)
                    .map(|pair| pair[1].start.saturating_sub(pair[0].end))
                    .collect::<Vec<_>>()
            })
            .filter(|gap| *gap < Duration::from_millis(5))
            .collect();
        let turnaround =
            gaps.iter().sum::<Duration>() / u32::try_from(gaps.len().max(1)).unwrap_or(u32::MAX);
        let span = last.saturating_sub(first);
        Phase {
            wall,
            ideal,
            before: first.saturating_sub(origin),
            calls: span,
            pause: last_apply
                .zip(first_delete)
                .map(|(apply, delete)| delete.saturating_sub(apply)),
            after: (origin + wall).saturating_sub(last),
            busiest,
            mean_call: inside / u32::try_from(calls.len().max(1)).unwrap_or(u32::MAX),
            turnaround,
            occupancy: inside.as_secs_f64()
                / (span.as_secs_f64() * PARALLELISM as f64).max(f64::MIN_POSITIVE),
            bound: bound_of(&counts, latency),
            counts,
        }
    }

    fn ratio(&self) -> f64 {
        self.wall.as_secs_f64() / self.ideal.as_secs_f64()
    }

    fn line(&self, what: &str) -> String {
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(op, n)| format!("{op} x{n}"))
            .collect();
        format!(
            "{what}: {} ({:.2}x of {}; {:.2}x of {}, what its calls allow); before the first call {}, calls {}{}, \
             after the last {}; busiest {} at once, {:.1} ms per call, {:.2} ms turnaround, slots {:.0}% busy; {}",
            seconds(self.wall),
            self.ratio(),
            seconds(self.ideal),
            self.wall.as_secs_f64() / self.bound.as_secs_f64().max(f64::MIN_POSITIVE),
            seconds(self.bound),
            seconds(self.before),
            seconds(self.calls),
            self.pause
                .map(|p| format!(" (pause between applies and deletes {})", seconds(p)))
                .unwrap_or_default(),
            seconds(self.after),
            self.busiest,
            self.mean_call.as_secs_f64() * 1000.0,
            self.turnaround.as_secs_f64() * 1000.0,
            self.occupancy * 100.0,
            counts.join(", ")
        )
    }
}

/// Runs `cairn args` and accounts for it against the extension's calls (appended to `log` when given, under
/// `label`).
#[allow(clippy::too_many_arguments)]
fn timed(
    binary: &Path,
    home: &Path,
    args: &[&str],
    extension: &Extension,
    ideal: Duration,
    latency: Duration,
    log: Option<&Path>,
    label: &str,
) -> (Output, Phase) {
    extension.take();
    let origin = extension.origin.elapsed();
    let ran = cairn_timed(binary, home, args);
    let (calls, busiest) = extension.take();
    if let Some(log) = log {
        log_calls(log, &format!("{} {label}", binary.display()), &calls);
    }
    (
        ran.output,
        Phase::of(ran.wall, ideal, latency, origin, &calls, busiest),
    )
}

/// Appends `calls` to the file at `log`, under a `# heading` line.
fn log_calls(log: &Path, heading: &str, calls: &[Call]) {
    use std::fmt::Write as _;
    use std::io::Write as _;
    let mut text = format!("# {heading}\n");
    for call in calls {
        let _ = writeln!(
            text,
            "{} {} {} {}",
            call.operation,
            call.connection,
            call.start.as_micros(),
            call.end.as_micros()
        );
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .expect("the call log is written");
}

struct Run {
    create: Phase,
    update: Phase,
    deployment: Phase,
}

fn run(options: &Options, binary: &Path, extension: &Extension, url: &str) -> Run {
    let bench_home = Home::new(url);
    let home = bench_home.home.clone();
    let (count, kept) = (options.count, options.update_to);
    let full = bench_home.file("full.json", &template("r", count));
    let smaller = bench_home.file("smaller.json", &template("r", kept));
    let deployment = bench_home.file("deployment.json", &template("d", count));
    cairn_timed(
        binary,
        &home,
        &["group", "create", "-n", GROUP, "-l", "local"],
    );

    let latency = options.latency;
    let stack = |template: &str| {
        [
            "stack",
            "group",
            "create",
            "-n",
            STACK,
            "-g",
            GROUP,
            "-f",
            template,
            "--aou",
            "deleteAll",
            "--yes",
        ]
        .map(str::to_owned)
    };
    let (out, create) = timed(
        binary,
        &home,
        &stack(&full).each_ref().map(String::as_str),
        extension,
        latency * waves(count),
        latency,
        options.calls.as_deref(),
        "stack create",
    );
    check_stack(&out, count);
    assert_eq!(extension.existing().len(), count, "every item was created");
    assert_eq!(create.counts.get("createOrUpdate"), Some(&count));

    let ideal = latency * (waves(kept) + waves(count - kept));
    let (out, update) = timed(
        binary,
        &home,
        &stack(&smaller).each_ref().map(String::as_str),
        extension,
        ideal,
        latency,
        options.calls.as_deref(),
        "stack update",
    );
    check_stack(&out, kept);
    let left = extension.existing();
    assert_eq!(
        left.len(),
        kept,
        "the items that left the stack were deleted"
    );
    assert!(left.iter().all(|name| name.starts_with('r') && name[1..].parse::<usize>().is_ok_and(|i| i < kept)));
    assert_eq!(update.counts.get("createOrUpdate"), Some(&kept));
    assert_eq!(
        update.counts.get("delete").copied().unwrap_or(0),
        count - kept
    );

    let (out, deployment) = timed(
        binary,
        &home,
        &[
            "deployment",
            "group",
            "create",
            "-n",
            "reference",
            "-g",
            GROUP,
            "-f",
            &deployment,
        ],
        extension,
        latency * waves(count),
        latency,
        options.calls.as_deref(),
        "deployment",
    );
    let deployed = stdout_json(&out);
    assert_eq!(
        deployed["properties"]["provisioningState"], "Succeeded",
        "{deployed:#}"
    );
    // The next run starts from an empty extension.
    extension.clear();
    Run {
        create,
        update,
        deployment,
    }
}

fn check_stack(out: &Output, managed: usize) {
    let stack = stdout_json(out);
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );
    assert_eq!(
        stack["properties"]["resources"].as_array().map(Vec::len),
        Some(managed),
        "the stack manages what its template declares"
    );
}

/// Best and median of the phases' wall times, with their ratios.
fn summary(what: &str, phases: &[&Phase]) -> String {
    let mut walls: Vec<Duration> = phases.iter().map(|p| p.wall).collect();
    walls.sort();
    let ideal = phases[0].ideal;
    let ratio = |d: Duration| d.as_secs_f64() / ideal.as_secs_f64();
    let (best, median) = (walls[0], walls[walls.len() / 2]);
    let bound = phases[0].bound;
    let of_bound = |d: Duration| d.as_secs_f64() / bound.as_secs_f64().max(f64::MIN_POSITIVE);
    format!(
        "{what}: ideal {}, best {} ({:.2}x), median {} ({:.2}x); what its calls allow {}, best {:.2}x, median {:.2}x",
        seconds(ideal),
        seconds(best),
        ratio(best),
        seconds(median),
        ratio(median),
        seconds(bound),
        of_bound(best),
        of_bound(median)
    )
}

fn main() {
    let options = options();
    let runtime = loopback::runtime();
    let extension = Extension::new(options.latency);
    let url = loopback::serve(&runtime, extension.clone());
    println!(
        "stack of {} independent extension resources, updated to {}; extension latency {} ms; {} runs",
        options.count,
        options.update_to,
        options.latency.as_millis(),
        options.runs
    );
    let mut binaries = vec![("cairn", PathBuf::from(env!("CARGO_BIN_EXE_cairn")))];
    if let Some(baseline) = &options.baseline {
        binaries.insert(0, ("baseline", baseline.clone()));
    }
    let mut runs: Vec<Vec<Run>> = binaries.iter().map(|_| Vec::new()).collect();
    for round in 1..=options.runs {
        // Alternate which binary goes first, so neither always meets the machine in the same state.
        let mut order: Vec<usize> = (0..binaries.len()).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        for which in order {
            let (label, binary) = &binaries[which];
            let run = run(&options, binary, &extension, &url);
            println!("run {round}, {label}");
            println!("  {}", run.create.line("stack create"));
            println!("  {}", run.update.line("stack update"));
            println!("  {}", run.deployment.line("deployment"));
            runs[which].push(run);
        }
    }
    for ((label, binary), runs) in binaries.iter().zip(&runs) {
        println!(
            "{label} ({}), best and median of {} runs:",
            binary.display(),
            options.runs
        );
        let all = |pick: fn(&Run) -> &Phase| runs.iter().map(pick).collect::<Vec<_>>();
        println!("  {}", summary("stack create", &all(|r| &r.create)));
        println!("  {}", summary("stack update", &all(|r| &r.update)));
        println!("  {}", summary("deployment", &all(|r| &r.deployment)));
    }
}
