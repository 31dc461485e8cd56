//! The progress view of `deployment ... create`, on stderr: on a terminal a live table (resource, status,
//! duration) redrawn as events arrive, nested deployments indented under the module that started them; elsewhere
//! one line per change (written together at most every 200 ms and at the end). Built from the engine's events in process, or from polled operations with `--server`.
//! Events carry no secrets, and neither does anything shown here.

use std::collections::HashMap;
use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

use cairn_engine::{DeploymentEvent, EventKind};
use serde_json::Value;

/// The least time between two listings of a deployment's operations for the line-by-line view in `--server` mode.
const LINES_LISTING_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Nothing is shown.
    Off,
    /// One line per change (stderr is not a terminal: logs, CI, tests).
    Lines,
    /// A table redrawn in place (stderr is a terminal).
    Live,
}

#[derive(Debug)]
struct Row {
    depth: usize,
    resource: String,
    label: String,
    status: String,
    started: Instant,
    duration: Option<Duration>,
}

impl Drop for Progress {
    /// A command that ends early (an error) still shows the lines it queued.
    fn drop(&mut self) {
        self.write_lines();
    }
}

/// A row's identity: depth, deployment and resource (case-insensitive, as ARM names are).
type RowKey = (usize, String, String);

/// The progress view of one deployment command.
#[derive(Debug)]
pub(crate) struct Progress {
    mode: Mode,
    title: String,
    /// Every row, in the order it first appeared.
    rows: Vec<Row>,
    /// Where each row is in `rows`: an event finds its row at once, however many rows there are (a scan per
    /// event made a 20,000-resource deployment quadratic).
    index: HashMap<RowKey, usize>,
    /// The rows of each deployment (by depth and lower-case name), in the order they appeared: the live table
    /// shows a nested deployment's rows under the module row that started it.
    groups: HashMap<(usize, String), Vec<usize>>,
    /// Lines the live view drew last time (to move the cursor back over them).
    drawn: usize,
    color: bool,
    /// Line-by-line output not yet written: written at most once per tick (200 ms) and at the end, in one write,
    /// not two system calls per line (with thousands of resources those writes were a tenth of the command's CPU).
    pending: String,
}

impl Progress {
    /// A view on stderr: live on a terminal (unless `TERM=dumb`), else line by line.
    pub(crate) fn for_stderr(enabled: bool) -> Self {
        let terminal =
            std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb");
        let mode = match (enabled, terminal) {
            (false, _) => Mode::Off,
            (true, true) => Mode::Live,
            (true, false) => Mode::Lines,
        };
        Progress {
            mode,
            title: String::new(),
            rows: Vec::new(),
            index: HashMap::new(),
            groups: HashMap::new(),
            drawn: 0,
            color: terminal && crate::output::color_stderr(),
            pending: String::new(),
        }
    }

    /// A view that shows nothing.
    pub(crate) fn off() -> Self {
        Progress {
            mode: Mode::Off,
            title: String::new(),
            rows: Vec::new(),
            index: HashMap::new(),
            groups: HashMap::new(),
            drawn: 0,
            color: false,
            pending: String::new(),
        }
    }

    /// How often `--server` mode lists the operations it shows: at every poll for the live view, about once a
    /// second line by line (a log wants each change, not each fifth of a second, and each listing is the whole
    /// deployment's operations on the server and here), never when nothing is shown.
    pub(crate) fn operations_interval(&self) -> Option<Duration> {
        match self.mode {
            Mode::Off => None,
            Mode::Lines => Some(LINES_LISTING_INTERVAL),
            Mode::Live => Some(Duration::ZERO),
        }
    }

    pub(crate) fn start(&mut self, deployment: &str) {
        self.title = format!("Deployment '{deployment}'");
        if self.mode == Mode::Lines {
            self.line(&format!("{}: Running", self.title));
        }
        self.redraw();
    }

    /// One engine event.
    pub(crate) fn event(&mut self, event: &DeploymentEvent) {
        match event.kind {
            // Deployment rows come from the module resource in the parent; the root has the title line.
            EventKind::DeploymentStarted => {}
            EventKind::DeploymentFinished if event.depth == 0 => {
                self.done(&event.status, event.duration);
            }
            EventKind::DeploymentFinished => {}
            EventKind::ResourceStarted
            | EventKind::ResourceFinished
            | EventKind::ResourceSkipped => self.update(
                &event.deployment,
                event.depth,
                &event.resource,
                &event.resource_type,
                &event.status,
                event.duration,
                event.error.as_ref(),
            ),
        }
    }

    /// The root deployment ended: its status (and duration) on the title line.
    pub(crate) fn done(&mut self, status: &str, duration: Option<Duration>) {
        let duration = duration.map(format_duration).unwrap_or_default();
        match self.mode {
            Mode::Lines => {
                self.line(format!("{}: {status} {duration}", self.title).trim_end());
                self.write_lines();
            }
            Mode::Live => {
                self.title = format!("{}: {status} {duration}", self.title);
                self.redraw();
            }
            Mode::Off => {}
        }
    }

    /// The operations of a deployment as the server lists them (`--server` mode polls them).
    pub(crate) fn operations(&mut self, deployment: &str, depth: usize, operations: &[Value]) {
        for op in operations {
            let p = &op["properties"];
            let target = &p["targetResource"];
            let resource = target["id"]
                .as_str()
                .map(str::to_string)
                .or_else(|| {
                    target["symbolicName"].as_str().map(|s| {
                        let alias = target
                            .pointer("/extension/alias")
                            .and_then(Value::as_str)
                            .unwrap_or("extension");
                        format!("{alias}:{s}")
                    })
                })
                .unwrap_or_default();
            if resource.is_empty() {
                continue;
            }
            let status = p["provisioningState"].as_str().unwrap_or("Running");
            let duration = p["duration"].as_str().and_then(parse_iso_duration);
            let error: Option<cairn_arm::ErrorDetail> = p
                .pointer("/statusMessage/error")
                .and_then(|e| serde_json::from_value(e.clone()).ok());
            let resource_type = target["resourceType"].as_str().unwrap_or_default();
            self.update(
                deployment,
                depth,
                &resource,
                resource_type,
                status,
                duration,
                error.as_ref(),
            );
        }
        // Polled operations come at most every 200 ms: each poll's lines are written together.
        self.write_lines();
    }

    #[allow(clippy::too_many_arguments)]
    fn update(
        &mut self,
        deployment: &str,
        depth: usize,
        resource: &str,
        resource_type: &str,
        status: &str,
        duration: Option<Duration>,
        error: Option<&cairn_arm::ErrorDetail>,
    ) {
        if self.mode == Mode::Off {
            return;
        }
        let key = (
            depth,
            deployment.to_ascii_lowercase(),
            resource.to_ascii_lowercase(),
        );
        let index = match self.index.get(&key) {
            Some(&i) => {
                if self.rows[i].status == status && self.rows[i].duration == duration {
                    return;
                }
                i
            }
            None => {
                let i = self.rows.len();
                self.groups
                    .entry((depth, key.1.clone()))
                    .or_default()
                    .push(i);
                self.rows.push(Row {
                    depth,
                    resource: resource.to_string(),
                    label: label(resource, resource_type),
                    status: String::new(),
                    started: Instant::now(),
                    duration: None,
                });
                self.index.insert(key, i);
                i
            }
        };
        let row = &mut self.rows[index];
        row.status = status.to_string();
        row.duration = duration;
        if self.mode == Mode::Lines {
            let indent = "  ".repeat(row.depth + 1);
            let time = duration.map(format_duration).unwrap_or_default();
            let text = format!("{indent}{}: {status} {time}", row.label);
            self.line(text.trim_end());
            if let Some(error) = error {
                self.line(&format!(
                    "{indent}  {}: {}",
                    error.code.as_deref().unwrap_or("Error"),
                    error.message.as_deref().unwrap_or_default()
                ));
            }
        }
        self.redraw();
    }

    /// The rows in the live table's order: each deployment's rows as they appeared, a nested deployment's rows
    /// right after the module row that started it (its `.../deployments/{name}` row one level up); rows whose
    /// module row is not shown (yet) at the end.
    fn display_order(&self) -> Vec<usize> {
        let mut order = Vec::with_capacity(self.rows.len());
        let mut shown = vec![false; self.rows.len()];
        let mut roots: Vec<&Vec<usize>> = self
            .groups
            .iter()
            .filter(|((depth, _), _)| *depth == 0)
            .map(|(_, rows)| rows)
            .collect();
        roots.sort_by_key(|rows| rows.first().copied());
        for rows in roots {
            self.walk(rows, &mut order, &mut shown);
        }
        for (i, seen) in shown.iter().enumerate() {
            if !seen {
                order.push(i);
            }
        }
        order
    }

    fn walk(&self, rows: &[usize], order: &mut Vec<usize>, shown: &mut [bool]) {
        for &i in rows {
            if shown[i] {
                continue;
            }
            shown[i] = true;
            order.push(i);
            let row = &self.rows[i];
            let module = row
                .resource
                .rsplit_once("/deployments/")
                .map(|(_, name)| name.to_ascii_lowercase());
            if let Some(children) = module.and_then(|m| self.groups.get(&(row.depth + 1, m))) {
                self.walk(children, order, shown);
            }
        }
    }

    /// Refreshes running rows' durations on the live view.
    pub(crate) fn tick(&mut self) {
        self.write_lines();
        if self.mode == Mode::Live && self.rows.iter().any(|r| r.duration.is_none()) {
            self.redraw();
        }
    }

    /// Leaves the final table (live view) on screen.
    pub(crate) fn finish(&mut self) {
        self.write_lines();
        self.redraw();
        self.drawn = 0;
    }

    /// Queues one line of line-by-line output (see `pending`).
    fn line(&mut self, text: &str) {
        self.pending.push_str(text);
        self.pending.push('\n');
    }

    /// Writes the queued lines, in one write.
    fn write_lines(&mut self) {
        if !self.pending.is_empty() {
            let _ = std::io::stderr().write_all(self.pending.as_bytes());
            self.pending.clear();
        }
    }

    fn redraw(&mut self) {
        if self.mode != Mode::Live {
            return;
        }
        let width = terminal_width().saturating_sub(1).max(20);
        let lines = self.render(width);
        let mut err = std::io::stderr().lock();
        let mut text = String::new();
        if self.drawn > 0 {
            // Back to the first line drawn last time, then clear everything below.
            text.push_str(&format!("\r\x1b[{}A\x1b[J", self.drawn));
        }
        for line in &lines {
            text.push_str(line);
            text.push('\n');
        }
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
        self.drawn = lines.len();
    }

    /// The live table's lines, each at most `width` columns (a wrapped line would break the redraw).
    fn render(&self, width: usize) -> Vec<String> {
        let label_width = self
            .rows
            .iter()
            .map(|r| r.depth * 2 + r.label.chars().count())
            .max()
            .unwrap_or(8)
            .clamp(8, width.saturating_sub(24).max(8));
        let mut lines = vec![truncate(&self.title, width)];
        lines.push(truncate(
            &format!(
                "  {:<label_width$}  {:<10}  {:>8}",
                "RESOURCE", "STATUS", "DURATION"
            ),
            width,
        ));
        for r in self.display_order().into_iter().map(|i| &self.rows[i]) {
            // Names keep their end (the resource's own name) when cut.
            let indent = "  ".repeat(r.depth);
            let name = format!(
                "{indent}{}",
                truncate_start(&r.label, label_width.saturating_sub(indent.len()))
            );
            let elapsed = r.duration.unwrap_or_else(|| r.started.elapsed());
            let status = format!("{:<10}", r.status);
            let status = if self.color {
                paint(&r.status, &status)
            } else {
                status
            };
            let line = format!(
                "  {name:<label_width$}  {status}  {:>8}",
                format_duration(elapsed)
            );
            // Colour codes take no columns: truncate on the plain text when the line is too long.
            if 2 + label_width + 2 + 10 + 2 + 8 > width {
                lines.push(truncate(
                    &format!(
                        "  {name:<label_width$}  {:<10}  {:>8}",
                        r.status,
                        format_duration(elapsed)
                    ),
                    width,
                ));
            } else {
                lines.push(line);
            }
        }
        lines
    }
}

/// How a resource is named in the view: the type and names of an ARM id (after its last `/providers/`), or
/// `alias:symbolicName (Type)` for an extension resource.
fn label(resource: &str, resource_type: &str) -> String {
    if resource.starts_with('/') {
        let lower = resource.to_ascii_lowercase();
        match lower.rfind("/providers/") {
            Some(i) => resource[i + "/providers/".len()..].to_string(),
            None => resource.to_string(),
        }
    } else if resource_type.is_empty() {
        resource.to_string()
    } else {
        format!("{resource} ({resource_type})")
    }
}

fn paint(status: &str, text: &str) -> String {
    let code = match status {
        "Succeeded" => "32",
        "Failed" => "31",
        "Canceled" => "33",
        "Skipped" => "2",
        _ => "36",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `text` cut to `width` columns from the left, with `…` in front.
fn truncate_start(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    let kept: String = text.chars().skip(count + 1 - width.max(1)).collect();
    format!("…{kept}")
}

/// `0.4s`, `12.3s`, `2m05s`.
pub(crate) fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

/// An ARM duration (`PT1.234S`, `PT2M3.5S`, `PT1H`) as a `Duration`.
pub(crate) fn parse_iso_duration(text: &str) -> Option<Duration> {
    let rest = text.strip_prefix("PT")?;
    let mut total = 0.0f64;
    let mut number = String::new();
    for c in rest.chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'H' | 'M' | 'S' => {
                let n: f64 = number.parse().ok()?;
                number.clear();
                total += n * match c {
                    'H' => 3600.0,
                    'M' => 60.0,
                    _ => 1.0,
                };
            }
            _ => return None,
        }
    }
    (number.is_empty() && total.is_finite() && total >= 0.0).then(|| Duration::from_secs_f64(total))
}

/// The terminal's width in columns: `COLUMNS`, else the tty's size, else 100.
fn terminal_width() -> usize {
    if let Some(columns) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return columns;
    }
    #[cfg(unix)]
    if let Ok(size) = rustix::termios::tcgetwinsize(std::io::stderr())
        && size.ws_col > 0
    {
        return size.ws_col as usize;
    }
    100
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> Progress {
        Progress {
            mode: Mode::Live,
            title: "Deployment 'main'".into(),
            rows: Vec::new(),
            index: HashMap::new(),
            groups: HashMap::new(),
            drawn: 0,
            color: false,
            pending: String::new(),
        }
    }

    fn event(
        kind: EventKind,
        deployment: &str,
        depth: usize,
        resource: &str,
        status: &str,
    ) -> DeploymentEvent {
        DeploymentEvent {
            kind,
            deployment: deployment.into(),
            depth,
            resource: resource.into(),
            resource_type: "File".into(),
            status: status.into(),
            duration: (status != "Running").then(|| Duration::from_millis(1500)),
            error: None,
        }
    }

    #[test]
    fn nested_rows_go_under_their_module_and_indent() {
        let mut p = live();
        p.mode = Mode::Off; // rows only; nothing drawn in the test
        p.mode = Mode::Lines;
        let rg = "/subscriptions/0/resourceGroups/rg/providers";
        p.event(&event(
            EventKind::ResourceStarted,
            "main",
            0,
            &format!("{rg}/Microsoft.Resources/deployments/child"),
            "Running",
        ));
        p.event(&event(
            EventKind::ResourceStarted,
            "main",
            0,
            "local:readme",
            "Running",
        ));
        p.event(&event(
            EventKind::ResourceStarted,
            "child",
            1,
            "local:inner",
            "Running",
        ));
        p.event(&event(
            EventKind::ResourceFinished,
            "child",
            1,
            "local:inner",
            "Succeeded",
        ));
        let order: Vec<(&str, usize, &str)> = p
            .display_order()
            .into_iter()
            .map(|i| &p.rows[i])
            .map(|r| (r.label.as_str(), r.depth, r.status.as_str()))
            .collect();
        assert_eq!(
            order,
            vec![
                ("Microsoft.Resources/deployments/child", 0, "Running"),
                ("local:inner (File)", 1, "Succeeded"),
                ("local:readme (File)", 0, "Running"),
            ]
        );
        let lines = p.render(80);
        assert_eq!(
            lines[3],
            "    local:inner (File)                   Succeeded       1.5s"
        );
    }

    /// Line-by-line output is queued per event and written per tick (and at the end), not per line.
    #[test]
    fn lines_are_written_per_tick_not_per_event() {
        let mut p = live();
        p.mode = Mode::Lines;
        p.start("main");
        p.event(&event(
            EventKind::ResourceStarted,
            "main",
            0,
            "local:a",
            "Running",
        ));
        p.event(&event(
            EventKind::ResourceFinished,
            "main",
            0,
            "local:a",
            "Succeeded",
        ));
        assert_eq!(
            p.pending,
            "Deployment 'main': Running\n  local:a (File): Running\n  local:a (File): Succeeded 1.5s\n"
        );
        p.tick();
        assert_eq!(p.pending, "", "written at the tick");
        p.event(&event(
            EventKind::ResourceStarted,
            "main",
            0,
            "local:b",
            "Running",
        ));
        p.done("Succeeded", None);
        assert_eq!(p.pending, "", "written when the deployment ends");
    }

    #[test]
    fn lines_never_exceed_the_width() {
        let mut p = live();
        p.mode = Mode::Lines;
        p.event(&event(
            EventKind::ResourceStarted,
            "main",
            0,
            &"x".repeat(200),
            "Running",
        ));
        for line in p.render(40) {
            assert!(line.chars().count() <= 40, "{line}");
        }
    }

    #[test]
    fn iso_durations() {
        assert_eq!(
            parse_iso_duration("PT1.5S"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_iso_duration("PT2M3S"), Some(Duration::from_secs(123)));
        assert_eq!(parse_iso_duration("PT1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_iso_duration("P1D"), None);
        assert_eq!(parse_iso_duration("PT5"), None);
        assert_eq!(format_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(
            truncate_start("Microsoft.KeyVault/vaults/kv", 10),
            "…vaults/kv"
        );
        assert_eq!(truncate("Microsoft.KeyVault/vaults/kv", 10), "Microsoft…");
    }
}
