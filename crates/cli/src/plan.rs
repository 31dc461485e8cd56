//! What-if results as plans for people, the way `az deployment ... what-if` (and Terraform's plan) shows them: a
//! legend of the symbols used, the scope, one line per resource with its change symbol (`+` create, `~` modify
//! with the property changes below it, `-` delete, ...), and a summary line. Azure resources are named by their
//! id after `/providers/`, extension resources by extension, type and identifiers (with the template's symbolic
//! name). Colours only when asked for (a terminal without `NO_COLOR`).
//!
//! Deployments keep az's symbols (`!` deploy, `x` unsupported, `*` ignore); stacks add `↷` detach and show an
//! unsupported change as `!`. The same results as rows for `-o table`/`tsv` come from [`deployment_rows`] and
//! [`stack_rows`].

use serde_json::{Value, json};

/// ANSI colours of the plan.
const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const BLUE: &str = "\x1b[34m";
const CYAN: &str = "\x1b[36m";
const GREY: &str = "\x1b[90m";
const RESET: &str = "\x1b[0m";

/// A kind of change: its symbol, its name in the legend and in the summary, and its colour.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    symbol: &'static str,
    legend: &'static str,
    summary: &'static str,
    color: &'static str,
}

pub(crate) const CREATE: Mark = Mark {
    symbol: "+",
    legend: "Create",
    summary: "to create",
    color: GREEN,
};
pub(crate) const MODIFY: Mark = Mark {
    symbol: "~",
    legend: "Modify",
    summary: "to modify",
    color: YELLOW,
};
pub(crate) const DELETE: Mark = Mark {
    symbol: "-",
    legend: "Delete",
    summary: "to delete",
    color: RED,
};
pub(crate) const DETACH: Mark = Mark {
    symbol: "↷",
    legend: "Detach",
    summary: "to detach",
    color: CYAN,
};
pub(crate) const DEPLOY: Mark = Mark {
    symbol: "!",
    legend: "Deploy",
    summary: "to deploy",
    color: BLUE,
};
pub(crate) const NO_CHANGE: Mark = Mark {
    symbol: "=",
    legend: "Nochange",
    summary: "no change",
    color: "",
};
pub(crate) const IGNORE: Mark = Mark {
    symbol: "*",
    legend: "Ignore",
    summary: "to ignore",
    color: GREY,
};
/// A deployment's unsupported change (az's `x`).
pub(crate) const UNSUPPORTED: Mark = Mark {
    symbol: "x",
    legend: "Unsupported",
    summary: "unsupported",
    color: GREY,
};
/// A stack's unsupported change.
pub(crate) const STACK_UNSUPPORTED: Mark = Mark {
    symbol: "!",
    legend: "Unsupported",
    summary: "unsupported",
    color: GREY,
};

/// The order of the legend and the summary: what destroys first, as az lists it.
const ORDER: [&Mark; 9] = [
    &DELETE,
    &DETACH,
    &CREATE,
    &DEPLOY,
    &MODIFY,
    &UNSUPPORTED,
    &STACK_UNSUPPORTED,
    &NO_CHANGE,
    &IGNORE,
];

/// One property change below a modified resource (children for arrays and objects).
#[derive(Debug, PartialEq)]
pub(crate) struct PropertyChange {
    kind: PropertyKind,
    path: String,
    before: Option<Value>,
    after: Option<Value>,
    children: Vec<PropertyChange>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PropertyKind {
    Create,
    Delete,
    Modify,
    Array,
    NoEffect,
}

impl PropertyKind {
    fn parse(kind: &str) -> PropertyKind {
        match kind.to_ascii_lowercase().as_str() {
            "create" => PropertyKind::Create,
            "delete" => PropertyKind::Delete,
            "array" => PropertyKind::Array,
            "noeffect" => PropertyKind::NoEffect,
            _ => PropertyKind::Modify,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            PropertyKind::Create => "+",
            PropertyKind::Delete => "-",
            PropertyKind::Modify | PropertyKind::Array => "~",
            PropertyKind::NoEffect => "x",
        }
    }

    fn color(self) -> &'static str {
        match self {
            PropertyKind::Create => GREEN,
            PropertyKind::Delete => RED,
            PropertyKind::Modify | PropertyKind::Array => YELLOW,
            PropertyKind::NoEffect => GREY,
        }
    }
}

/// One resource of a plan.
#[derive(Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) mark: &'static Mark,
    pub(crate) label: String,
    /// Said below the resource line (why a change is unsupported, that it is only potential, ...).
    notes: Vec<String>,
    properties: Vec<PropertyChange>,
}

/// What a plan shows.
pub(crate) struct Plan {
    /// `deployment` or `stack 'NAME'`: "The {subject} will update the following scope:".
    pub(crate) subject: String,
    pub(crate) scope: String,
    pub(crate) entries: Vec<Entry>,
    /// Lines after the resources (deny settings, deployment scope, diagnostics).
    pub(crate) footer: Vec<String>,
}

impl Plan {
    /// Whether any resource would be deleted.
    pub(crate) fn deletes(&self) -> usize {
        self.entries.iter().filter(|e| *e.mark == DELETE).count()
    }

    /// Whether anything would change (not only `NoChange` and `Ignore`).
    pub(crate) fn changes_anything(&self) -> bool {
        self.entries
            .iter()
            .any(|e| *e.mark != NO_CHANGE && *e.mark != IGNORE)
    }

    /// The plan without the entries whose change `excluded` names (`--exclude-change-types`).
    pub(crate) fn excluding(mut self, excluded: &[&Mark]) -> Plan {
        self.entries.retain(|e| !excluded.contains(&e.mark));
        self
    }

    /// The plan as text, with colours when `color`.
    pub(crate) fn render(&self, color: bool) -> String {
        let paint = |mark_color: &str, text: &str| {
            if color && !mark_color.is_empty() {
                format!("{mark_color}{text}{RESET}")
            } else {
                text.to_string()
            }
        };
        let mut out =
            vec!["Resource and property changes are indicated with these symbols:".to_string()];
        for mark in ORDER {
            if self.entries.iter().any(|e| e.mark == mark) {
                out.push(format!(
                    "  {} {}",
                    paint(mark.color, mark.symbol),
                    mark.legend
                ));
            }
        }
        out.push(String::new());
        out.push(format!(
            "The {} will update the following scope:",
            self.subject
        ));
        out.push(String::new());
        out.push(format!("Scope: {}", self.scope));
        out.push(String::new());
        for entry in &self.entries {
            out.push(format!(
                "  {}",
                paint(
                    entry.mark.color,
                    &format!("{} {}", entry.mark.symbol, entry.label)
                )
            ));
            for note in &entry.notes {
                out.push(format!("      {note}"));
            }
            for change in &entry.properties {
                property_lines(change, 6, &paint, &mut out);
            }
            if !entry.properties.is_empty() {
                out.push(String::new());
            }
        }
        if out.last().is_some_and(|l| !l.is_empty()) {
            out.push(String::new());
        }
        if !self.footer.is_empty() {
            out.extend(self.footer.iter().cloned());
            out.push(String::new());
        }
        out.push(self.summary());
        out.join("\n")
    }

    /// `Resource changes: 1 to delete, 2 to create, 3 no change.`
    pub(crate) fn summary(&self) -> String {
        let counts: Vec<String> = ORDER
            .iter()
            .filter_map(|mark| {
                let n = self.entries.iter().filter(|e| e.mark == *mark).count();
                (n > 0).then(|| format!("{n} {}", mark.summary))
            })
            .collect();
        if counts.is_empty() {
            "Resource changes: none.".to_string()
        } else {
            format!("Resource changes: {}.", counts.join(", "))
        }
    }
}

/// A property change as az writes it: `~ path: before => after`, `+ path: after`, `- path: before`, an array's
/// element changes indented under `~ path: [` ... `]`.
fn property_lines(
    change: &PropertyChange,
    indent: usize,
    paint: &dyn Fn(&str, &str) -> String,
    out: &mut Vec<String>,
) {
    let pad = " ".repeat(indent);
    let symbol = paint(change.kind.color(), change.kind.symbol());
    let show = |v: &Option<Value>| {
        v.as_ref()
            .map_or_else(|| "null".to_string(), Value::to_string)
    };
    match change.kind {
        PropertyKind::Array if !change.children.is_empty() => {
            out.push(format!("{pad}{symbol} {}: [", change.path));
            for child in &change.children {
                property_lines(child, indent + 2, paint, out);
            }
            out.push(format!("{pad}  ]"));
        }
        PropertyKind::Create => out.push(format!(
            "{pad}{symbol} {}: {}",
            change.path,
            show(&change.after)
        )),
        PropertyKind::Delete => out.push(format!(
            "{pad}{symbol} {}: {}",
            change.path,
            show(&change.before)
        )),
        PropertyKind::NoEffect => out.push(format!(
            "{pad}{symbol} {}: {} (no effect)",
            change.path,
            show(&change.after)
        )),
        _ => out.push(format!(
            "{pad}{symbol} {}: {} => {}",
            change.path,
            show(&change.before),
            show(&change.after)
        )),
    }
}

/// A property change of either what-if shape: deployments' `propertyChangeType`, stacks' `changeType`.
fn property_change(delta: &Value) -> PropertyChange {
    let kind = delta["propertyChangeType"]
        .as_str()
        .or_else(|| delta["changeType"].as_str())
        .unwrap_or("Modify");
    PropertyChange {
        kind: PropertyKind::parse(kind),
        path: delta["path"].as_str().unwrap_or_default().to_string(),
        before: delta.get("before").cloned(),
        after: delta.get("after").cloned(),
        children: delta["children"]
            .as_array()
            .into_iter()
            .flatten()
            .map(property_change)
            .collect(),
    }
}

/// How a plan line names a resource: [`resource_name`], with the template's symbolic name after an extension
/// resource's.
fn resource_label(change: &Value) -> String {
    let name = resource_name(change);
    let by_id = change["resourceId"].is_string() || change["id"].is_string();
    match change["symbolicName"].as_str() {
        Some(symbolic) if name.is_empty() => symbolic.to_string(),
        Some(symbolic) if !by_id => format!("{name} ({symbolic})"),
        _ => name,
    }
}

/// A resource as its provider knows it: an Azure resource by its id after `/providers/`, an extension resource by
/// extension, type and identifiers.
fn resource_name(change: &Value) -> String {
    if let Some(id) = change["resourceId"]
        .as_str()
        .or_else(|| change["id"].as_str())
    {
        return short_id(id).to_string();
    }
    let mut parts: Vec<String> = [
        change.pointer("/extension/name").and_then(Value::as_str),
        change["resourceType"]
            .as_str()
            .or_else(|| change["type"].as_str()),
    ]
    .into_iter()
    .flatten()
    .map(str::to_string)
    .collect();
    if let Some(identifiers) = change.get("identifiers").filter(|i| !i.is_null()) {
        parts.push(identifiers.to_string());
    }
    parts.join(" ")
}

/// The part of an ARM id after its last `/providers/`.
pub(crate) fn short_id(id: &str) -> &str {
    let lower = id.to_ascii_lowercase();
    match lower.rfind("/providers/") {
        Some(i) => &id[i + "/providers/".len()..],
        None => id,
    }
}

/// The list at `pointer` of a what-if result (deployments' changes: `properties.changes`; stacks':
/// `properties.changes.resourceChanges`; stacks' `properties.diagnostics`).
fn changes<'v>(result: &'v Value, pointer: &str) -> &'v [Value] {
    result
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A deployment's what-if result as a plan of `scope`.
pub(crate) fn deployment_plan(scope: &str, result: &Value) -> Plan {
    let entries = changes(result, "/properties/changes")
        .iter()
        .map(|change| {
            let mark = match change["changeType"].as_str().unwrap_or("") {
                "Create" => &CREATE,
                "Delete" => &DELETE,
                "Modify" => &MODIFY,
                "Deploy" => &DEPLOY,
                "NoChange" => &NO_CHANGE,
                "Ignore" => &IGNORE,
                _ => &UNSUPPORTED,
            };
            Entry {
                mark,
                label: resource_label(change),
                notes: change["unsupportedReason"]
                    .as_str()
                    .map(str::to_string)
                    .into_iter()
                    .collect(),
                properties: change["delta"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(property_change)
                    .collect(),
            }
        })
        .collect();
    Plan {
        subject: "deployment".to_string(),
        scope: scope.to_string(),
        entries,
        footer: Vec::new(),
    }
}

/// A stack's what-if result as a plan of the scope its deployment runs in.
pub(crate) fn stack_plan(stack: &str, scope: &str, result: &Value) -> Plan {
    let entries = changes(result, "/properties/changes/resourceChanges")
        .iter()
        .map(|change| {
            let mark = match change["changeType"]
                .as_str()
                .unwrap_or("")
                .to_ascii_lowercase()
                .as_str()
            {
                "create" => &CREATE,
                "delete" => &DELETE,
                "detach" => &DETACH,
                "modify" => &MODIFY,
                "nochange" => &NO_CHANGE,
                _ => &STACK_UNSUPPORTED,
            };
            let mut notes: Vec<String> = change["unsupportedReason"]
                .as_str()
                .map(str::to_string)
                .into_iter()
                .collect();
            if change["changeCertainty"]
                .as_str()
                .is_some_and(|c| c.eq_ignore_ascii_case("potential"))
            {
                notes.push(
                    "(potential change: it depends on values known only at deployment)".to_string(),
                );
            }
            let management = (
                change
                    .pointer("/managementStatusChange/before")
                    .and_then(Value::as_str),
                change
                    .pointer("/managementStatusChange/after")
                    .and_then(Value::as_str),
            );
            // A resource the stack starts (or stops) managing without other change; detaching says it already.
            if let (Some(before), Some(after)) = management
                && !before.eq_ignore_ascii_case(after)
                && (*mark == MODIFY || *mark == NO_CHANGE)
            {
                notes.push(format!("(management: {before} => {after})"));
            }
            Entry {
                mark,
                label: resource_label(change),
                notes,
                properties: change
                    .pointer("/resourceConfigurationChanges/delta")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(property_change)
                    .collect(),
            }
        })
        .collect();
    let scope = result
        .pointer("/properties/deploymentScope")
        .and_then(Value::as_str)
        .unwrap_or(scope);
    let mut footer = Vec::new();
    let before_after = |pointer: &str| {
        let before = result.pointer(&format!("{pointer}/before"));
        let after = result.pointer(&format!("{pointer}/after"));
        match (before, after) {
            (Some(b), Some(a)) if b != a => Some(format!("{} => {}", compact(b), compact(a))),
            (None, Some(a)) => Some(format!("(none) => {}", compact(a))),
            (Some(b), None) => Some(format!("{} => (none)", compact(b))),
            _ => None,
        }
    };
    if let Some(change) = before_after("/properties/changes/denySettingsChange") {
        footer.push(format!("Deny settings: {change}"));
    }
    if let Some(change) = before_after("/properties/changes/deploymentScopeChange") {
        footer.push(format!("Deployment scope: {change}"));
    }
    for d in changes(result, "/properties/diagnostics") {
        let level = d["level"].as_str().unwrap_or("info");
        let code = d["code"].as_str().unwrap_or("");
        let message = d["message"].as_str().unwrap_or("");
        footer.push(format!("{level}[{code}]: {message}"));
    }
    Plan {
        subject: format!("stack '{stack}'"),
        scope: scope.to_string(),
        entries,
        footer,
    }
}

/// A value on one line: strings bare, the rest as JSON.
fn compact(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Columns of a what-if `-o table` (and `tsv`), over [`deployment_rows`] or [`stack_rows`].
pub(crate) const ROW_COLUMNS: &[(&str, &str)] = &[
    ("Change", "/change"),
    ("Resource", "/resource"),
    ("Symbolic name", "/symbolicName"),
    ("Type", "/type"),
];

/// A resource's type: as the change gives it, else from its id.
fn resource_type(change: &Value) -> Option<String> {
    if let Some(t) = change["resourceType"]
        .as_str()
        .or_else(|| change["type"].as_str())
    {
        return Some(t.to_string());
    }
    let id = change["resourceId"]
        .as_str()
        .or_else(|| change["id"].as_str())?;
    Some(cairn_arm::ResourceId::parse(id).ok()?.resource_type())
}

/// One row per change at `pointer` of a what-if result.
fn rows(result: &Value, pointer: &str) -> Vec<Value> {
    changes(result, pointer)
        .iter()
        .map(|change| {
            json!({
                "change": change["changeType"],
                "resource": resource_name(change),
                "symbolicName": change["symbolicName"],
                "type": resource_type(change),
            })
        })
        .collect()
}

/// One row per resource of a deployment what-if: its change, name, symbolic name and type.
pub(crate) fn deployment_rows(result: &Value) -> Vec<Value> {
    rows(result, "/properties/changes")
}

/// One row per resource of a stack what-if.
pub(crate) fn stack_rows(result: &Value) -> Vec<Value> {
    rows(result, "/properties/changes/resourceChanges")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_resources_are_named_by_extension_type_and_identifiers() {
        let result = json!({"properties": {"changes": [
            {"changeType": "Ignore", "resourceType": "File",
             "extension": {"name": "Local", "version": "1.0.0"}, "identifiers": {"path": "old.txt"}},
            {"changeType": "Unsupported", "symbolicName": "note", "resourceType": "File",
             "extension": {"name": "Local", "version": "1.0.0"}, "identifiers": {"path": "note.txt"},
             "unsupportedReason": "no config"},
            {"changeType": "Create", "symbolicName": "vault",
             "resourceId": "/subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/v"}
        ]}});
        let text = deployment_plan("/subscriptions/s/resourceGroups/g", &result).render(false);
        assert!(
            text.contains(r#"  * Local File {"path":"old.txt"}"#),
            "{text}"
        );
        assert!(
            text.contains("  x Local File {\"path\":\"note.txt\"} (note)\n      no config"),
            "{text}"
        );
        assert!(text.contains("  + Microsoft.KeyVault/vaults/v\n"), "{text}");
        assert!(text.ends_with("Resource changes: 1 to create, 1 unsupported, 1 to ignore."));
    }

    #[test]
    fn colours_only_when_asked() {
        let result = json!({"properties": {"changes": [
            {"changeType": "Delete", "resourceId": "/subscriptions/s/resourceGroups/g/providers/A.B/c/d"}]}});
        let plan = deployment_plan("/s", &result);
        assert!(!plan.render(false).contains('\x1b'));
        let colored = plan.render(true);
        assert!(
            colored.contains(&format!("  {RED}- A.B/c/d{RESET}")),
            "{colored}"
        );
        assert_eq!(plan.deletes(), 1);
        assert!(plan.changes_anything());
    }

    #[test]
    fn exclusions_leave_changes_out() {
        let result = json!({"properties": {"changes": [
            {"changeType": "NoChange", "resourceId": "/subscriptions/s/providers/A.B/c/d"},
            {"changeType": "Create", "resourceId": "/subscriptions/s/providers/A.B/c/e"}]}});
        let plan = deployment_plan("/s", &result).excluding(&[&NO_CHANGE]);
        assert_eq!(plan.summary(), "Resource changes: 1 to create.");
        let unchanged = deployment_plan("/s", &result).excluding(&[&CREATE]);
        assert!(!unchanged.changes_anything());
    }
}
