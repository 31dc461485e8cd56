//! Throughput benchmark (a bench binary, not a timed test): cairn's own cost per resource, measured through the CLI
//! against a loopback HTTP v2 extension that answers every call at once, so nearly all of the time is cairn's —
//! process start, store, template, scheduling, host calls, journal and inventory writes.
//!
//! `cargo bench -p cairn --bench throughput -- [--runs 3] [--sizes 1000,5000,20000] [--module 500]
//! [--concurrent 20] [--each 250] [--stack 5000] [--parallelism N] [--baseline PATH]`
//!
//! Per run, each on a fresh `CAIRN_HOME` with one resource group:
//! 1. **deployment of N** for each size: `cairn deployment group create` (in process) of N independent items in
//!    modules (nested deployments) of `--module`; engine cost per resource = time from spawn to exit / N;
//! 2. **concurrent**: `cairn serve` on the home, then `--concurrent` clients at once, each `cairn deployment group
//!    create --server` of `--each` items; resource operations per second = all items / (first spawn to last exit).
//!    The clients poll at the client's shortest interval (200 ms, with `--retry-after 0`);
//! 3. **stack**: `cairn stack group create` (in process) of `--stack` items in modules, then the same command again
//!    (every item applied again); each with the `cairn` process's peak resident set, per managed resource.
//!
//! `--parallelism N` is passed to the deployment and stack commands (and `cairn serve`), so a `--baseline` binary
//! without the flag must be run without it. With `--baseline PATH` (another build of `cairn`), every run measures
//! both binaries, alternating which goes first, so a before/after comparison shares the machine's load.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it runs once at small sizes, as a smoke test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod loopback;
use loopback::{Extension, Home, Ran, cairn, seconds, stdout_json};

const GROUP: &str = "rg";

struct Options {
    runs: usize,
    sizes: Vec<usize>,
    module: usize,
    concurrent: usize,
    each: usize,
    stack: usize,
    parallelism: Option<usize>,
    baseline: Option<PathBuf>,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let text = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let number = |flag: &str| text(flag).and_then(|v| v.parse::<usize>().ok());
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs the binary without it: one small run.
    let measuring = args.iter().any(|a| a == "--bench");
    let (runs, sizes, module, concurrent, each, stack) = if measuring {
        (3, vec![1_000, 5_000, 20_000], 500, 20, 250, 5_000)
    } else {
        (1, vec![20, 60], 20, 3, 10, 30)
    };
    Options {
        runs: number("--runs").unwrap_or(runs).max(1),
        sizes: text("--sizes")
            .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
            .unwrap_or(sizes),
        module: number("--module").unwrap_or(module).max(1),
        concurrent: number("--concurrent").unwrap_or(concurrent),
        each: number("--each").unwrap_or(each).max(1),
        stack: number("--stack").unwrap_or(stack),
        parallelism: number("--parallelism"),
        baseline: text("--baseline").map(PathBuf::from),
    }
}

/// One measured command (or group of concurrent commands).
struct Measure {
    resources: usize,
    wall: Duration,
    peak_rss_kib: u64,
    /// CPU time of the `cairn` process doing the work (the server for the concurrent scenario).
    cpu: Duration,
}

impl Measure {
    fn per_resource_ms(&self) -> f64 {
        self.wall.as_secs_f64() * 1000.0 / self.resources as f64
    }

    fn rss_per_resource_kib(&self) -> f64 {
        self.peak_rss_kib as f64 / self.resources as f64
    }

    fn line(&self, what: &str) -> String {
        format!(
            "{what}: {} for {} resources = {:.3} ms per resource ({:.0} per second); CPU {} ({:.3} ms per \
             resource); peak RSS {} MiB ({:.1} KiB per resource)",
            seconds(self.wall),
            self.resources,
            self.per_resource_ms(),
            self.resources as f64 / self.wall.as_secs_f64(),
            seconds(self.cpu),
            self.cpu.as_secs_f64() * 1000.0 / self.resources as f64,
            self.peak_rss_kib / 1024,
            self.rss_per_resource_kib()
        )
    }
}

/// The figures of one run of one binary, by scenario name.
type Run = Vec<(String, Measure)>;

struct Bench<'a> {
    options: &'a Options,
    binary: &'a Path,
    extension: &'a Extension,
    url: &'a str,
}

impl Bench<'_> {
    fn home(&self) -> Home {
        let home = Home::new(self.url);
        cairn(
            self.binary,
            &home.home,
            &["group", "create", "-n", GROUP, "-l", "local"],
        );
        home
    }

    fn parallelism(&self) -> Vec<String> {
        self.options
            .parallelism
            .map(|n| vec!["--parallelism".to_owned(), n.to_string()])
            .unwrap_or_default()
    }

    fn run(&self) -> Run {
        let mut run = Vec::new();
        for &size in &self.options.sizes {
            run.push((format!("deployment of {size}"), self.deployment(size)));
        }
        if self.options.concurrent > 0 {
            let what = format!(
                "{} concurrent deployments of {} (server)",
                self.options.concurrent, self.options.each
            );
            run.push((what, self.concurrent()));
        }
        if self.options.stack > 0 {
            let (create, update) = self.stack();
            run.push((format!("stack create of {}", self.options.stack), create));
            run.push((format!("stack update of {}", self.options.stack), update));
        }
        run
    }

    fn deployment(&self, size: usize) -> Measure {
        let home = self.home();
        let file = home.file(
            "template.json",
            &loopback::modules_template("d", size, self.options.module),
        );
        self.extension.take();
        let mut args = vec![
            "deployment",
            "group",
            "create",
            "-n",
            "bench",
            "-g",
            GROUP,
            "-f",
            &file,
        ];
        let parallelism = self.parallelism();
        args.extend(parallelism.iter().map(String::as_str));
        let ran = cairn(self.binary, &home.home, &args);
        let deployed = stdout_json(&ran.output);
        assert_eq!(
            deployed["properties"]["provisioningState"], "Succeeded",
            "{deployed:#}"
        );
        self.check_created(size);
        measure(size, &ran)
    }

    /// Every call the extension answered since the last take, and `count` items created.
    fn check_created(&self, count: usize) {
        let (calls, _) = self.extension.take();
        let creates = calls
            .iter()
            .filter(|c| c.operation == "createOrUpdate")
            .count();
        assert_eq!(creates, count, "every item was created once");
        assert_eq!(self.extension.existing().len(), count);
        self.extension.clear();
    }

    fn concurrent(&self) -> Measure {
        let home = self.home();
        let parallelism = self.parallelism();
        let mut server = Command::new(self.binary);
        server
            .env("CAIRN_HOME", &home.home)
            .env_remove("CAIRN_EXTENSIONS")
            .args(["serve", "--listen", "127.0.0.1:0", "--retry-after", "0"])
            .args(&parallelism)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut server = server.spawn().expect("cairn serve starts");
        let url = BufReader::new(server.stdout.take().expect("piped stdout"))
            .lines()
            .map_while(Result::ok)
            .find_map(|line| {
                line.split("listening on ")
                    .nth(1)
                    .map(|u| u.trim().to_owned())
            })
            .expect("cairn serve prints its address");
        let files: Vec<String> = (0..self.options.concurrent)
            .map(|i| {
                home.file(
                    &format!("c{i}.json"),
                    &loopback::template(&format!("c{i}-"), self.options.each),
                )
            })
            .collect();
        self.extension.take();
        let started = Instant::now();
        let clients: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, file)| {
                let name = format!("c{i}");
                loopback::spawn(
                    self.binary,
                    &home.home,
                    &[
                        "deployment",
                        "group",
                        "create",
                        "--server",
                        &url,
                        "-n",
                        &name,
                        "-g",
                        GROUP,
                        "-f",
                        file,
                    ],
                )
            })
            .collect();
        for client in clients {
            let ran = client.finish();
            assert_eq!(
                ran.output.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&ran.output.stderr)
            );
            let deployed = stdout_json(&ran.output);
            assert_eq!(
                deployed["properties"]["provisioningState"], "Succeeded",
                "{deployed:#}"
            );
        }
        let wall = started.elapsed();
        let peak_rss_kib = loopback::peak_rss_kib(server.id()).unwrap_or(0);
        let cpu = loopback::cpu_time(server.id()).unwrap_or_default();
        // Our own child, ended by its id.
        server.kill().expect("the server stops");
        server.wait().expect("the server's status");
        let total = self.options.concurrent * self.options.each;
        self.check_created(total);
        Measure {
            resources: total,
            wall,
            peak_rss_kib,
            cpu,
        }
    }

    fn stack(&self) -> (Measure, Measure) {
        let home = self.home();
        let count = self.options.stack;
        let file = home.file(
            "stack.json",
            &loopback::modules_template("s", count, self.options.module),
        );
        let parallelism = self.parallelism();
        let mut args = vec![
            "stack",
            "group",
            "create",
            "-n",
            "bench",
            "-g",
            GROUP,
            "-f",
            &file,
            "--aou",
            "deleteAll",
            "--yes",
        ];
        args.extend(parallelism.iter().map(String::as_str));
        self.extension.take();
        let create = cairn(self.binary, &home.home, &args);
        check_stack(&create, count);
        self.extension.take();
        let update = cairn(self.binary, &home.home, &args);
        check_stack(&update, count);
        let (calls, _) = self.extension.take();
        assert!(
            calls.iter().all(|c| c.operation != "delete"),
            "nothing left the stack"
        );
        assert_eq!(self.extension.existing().len(), count);
        self.extension.clear();
        (measure(count, &create), measure(count, &update))
    }
}

fn measure(resources: usize, ran: &Ran) -> Measure {
    Measure {
        resources,
        wall: ran.wall,
        peak_rss_kib: ran.peak_rss_kib,
        cpu: ran.cpu,
    }
}

fn check_stack(ran: &Ran, managed: usize) {
    let stack = stdout_json(&ran.output);
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );
    // The modules are managed too (deployments, detached on unmanage like any resource).
    let resources = stack["properties"]["resources"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert!(
        resources >= managed,
        "the stack manages what its template declares: {resources} of {managed}"
    );
}

/// Best and median of one scenario across runs.
fn summary(what: &str, measures: &[&Measure]) -> String {
    let mut sorted: Vec<&&Measure> = measures.iter().collect();
    sorted.sort_by_key(|m| m.wall);
    let (best, median) = (sorted[0], sorted[sorted.len() / 2]);
    let mut rss: Vec<u64> = measures.iter().map(|m| m.peak_rss_kib).collect();
    rss.sort_unstable();
    let resources = best.resources as f64;
    format!(
        "{what}: best {} ({:.3} ms/resource), median {} ({:.3} ms/resource); peak RSS min {:.1} / median {:.1} \
         KiB per resource",
        seconds(best.wall),
        best.per_resource_ms(),
        seconds(median.wall),
        median.per_resource_ms(),
        rss[0] as f64 / resources,
        rss[rss.len() / 2] as f64 / resources,
    )
}

/// Per-resource cost of the largest deployment over the smallest's (best runs): 1.0 is linear.
fn linearity(runs: &[Run], sizes: &[usize]) -> Option<String> {
    let (small, large) = (sizes.iter().min()?, sizes.iter().max()?);
    if small == large {
        return None;
    }
    let best = |size: usize| {
        runs.iter()
            .flat_map(|run| run.iter())
            .filter(|(what, _)| *what == format!("deployment of {size}"))
            .map(|(_, m)| m.per_resource_ms())
            .fold(f64::INFINITY, f64::min)
    };
    let (a, b) = (best(*small), best(*large));
    Some(format!(
        "per-resource cost, {large} vs {small} (best runs): {b:.3} / {a:.3} ms = {:.2}",
        b / a
    ))
}

fn main() {
    let options = options();
    let runtime = loopback::runtime();
    let extension = Extension::new(Duration::ZERO);
    let url = loopback::serve(&runtime, extension.clone());
    println!(
        "zero-latency extension; deployments of {:?} in modules of {}, {} concurrent of {}, stack of {}; {} runs",
        options.sizes,
        options.module,
        options.concurrent,
        options.each,
        options.stack,
        options.runs
    );
    let mut binaries = vec![("cairn", PathBuf::from(env!("CARGO_BIN_EXE_cairn")))];
    if let Some(baseline) = &options.baseline {
        binaries.insert(0, ("baseline", baseline.clone()));
    }
    let mut runs: Vec<Vec<Run>> = binaries.iter().map(|_| Vec::new()).collect();
    for round in 1..=options.runs {
        let mut order: Vec<usize> = (0..binaries.len()).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        for which in order {
            let (label, binary) = &binaries[which];
            let bench = Bench {
                options: &options,
                binary,
                extension: &extension,
                url: &url,
            };
            let run = bench.run();
            println!("run {round}, {label}");
            for (what, measure) in &run {
                println!("  {}", measure.line(what));
            }
            runs[which].push(run);
        }
    }
    for ((label, binary), runs) in binaries.iter().zip(&runs) {
        println!(
            "{label} ({}), best and median of {} runs:",
            binary.display(),
            options.runs
        );
        for (i, (what, _)) in runs[0].iter().enumerate() {
            let measures: Vec<&Measure> = runs.iter().map(|run| &run[i].1).collect();
            println!("  {}", summary(what, &measures));
        }
        if let Some(line) = linearity(runs, &options.sizes) {
            println!("  {line}");
        }
    }
}
