//! Where a nested deployment's extension config values come from: a value produced by a `list*()` call — with a
//! property path after it (`listClusterAdminCredential(id, v).kubeconfigs[0].value`), possibly as the taken branch
//! of an `if`, inside `createObject(...)`, a `{value: ...}` item or the reserved `auth` object — is recorded as an
//! `apiReference` directive (`POST {id}/{function}` with the call's body and the path) instead of its value.
//!
//! Why: a `list*()` output is a credential by ARM convention (seed 000 allows it in `auth` because it can be
//! re-fetched). The plan, the deployment records and a stack then hold how to fetch it again, never the value;
//! the engine resolves the directive when it calls the extension, and a stack re-runs it when it deletes.
//!
//! The recognition is a walk over the expression tree of `properties.extensionConfigs` next to the evaluation
//! proper: it evaluates only what decides the shape (`createObject` keys, `if` conditions, `list*` arguments and
//! index expressions) with the same evaluator, so copy loops and parameters mean what they mean in the body.

use std::rc::Rc;

use cairn_eval::{Evaluator, Object, Value};
use cairn_expr::{Expr, ExprKind};
use cairn_json::{Node, NodeKind};

/// A config value that came from a `list*()` call.
#[derive(Clone, Debug, PartialEq)]
pub struct ListSource {
    /// Where in `extensionConfigs` the value sits: alias first (`["k8s", "auth", "kubeConfig"]`).
    pub path: Vec<String>,
    /// The resource the action is called on (full ID).
    pub resource_id: String,
    pub api_version: String,
    /// The function name, which is the action (`listClusterAdminCredential`).
    pub action: String,
    /// The call's third argument.
    pub request_body: Option<serde_json::Value>,
    /// The property path after the call (`kubeconfigs[0].value`; `$` for the whole response).
    pub response_value_path: String,
}

impl ListSource {
    /// The `apiReference` item that replaces the value.
    pub fn api_reference(&self) -> Value {
        let mut reference = serde_json::json!({
            "method": "POST",
            "armResourceId": self.resource_id,
            "apiVersion": self.api_version,
            "action": self.action,
            "responseValuePath": self.response_value_path,
        });
        if let Some(body) = &self.request_body {
            reference["requestBody"] = body.clone();
        }
        Value::from_json(&serde_json::json!({ "apiReference": reference }))
    }
}

/// Finds the `list*()` sources in `extension_configs` (the raw `properties.extensionConfigs` node).
/// `resource_id` turns a `list*` call's first argument (an ID, or a symbolic name) into the resource's ID.
pub fn list_sources(
    ev: &mut Evaluator<'_>,
    extension_configs: &Node,
    resource_id: &dyn Fn(&str) -> String,
) -> Vec<ListSource> {
    let mut walk = Walk {
        ev,
        resource_id,
        path: Vec::new(),
        out: Vec::new(),
    };
    walk.node(extension_configs);
    walk.out
}

/// Replaces, in the evaluated `extensionConfigs` object, each value a source names with its `apiReference` item.
/// A `{value: list...()}` item becomes the `apiReference` item itself (keeping a `type`).
pub fn record_directives(extension_configs: &mut Value, sources: &[ListSource]) {
    for source in sources {
        let Some((last, parents)) = source.path.split_last() else {
            continue;
        };
        let Some(parent) = object_at(extension_configs, parents) else {
            continue;
        };
        let is_value_item = last.eq_ignore_ascii_case("value")
            && parent
                .keys()
                .all(|k| k.eq_ignore_ascii_case("value") || k.eq_ignore_ascii_case("type"));
        let reference = source.api_reference();
        if is_value_item {
            parent.remove("value");
            if let Value::Object(item) = reference {
                for (k, v) in item.iter() {
                    parent.insert(k.clone(), v.clone());
                }
            }
        } else if let Some(slot) = parent.get_mut(last) {
            *slot = reference;
        }
    }
}

fn object_at<'v>(value: &'v mut Value, path: &[String]) -> Option<&'v mut Object> {
    let mut current = value;
    for key in path {
        current = match current {
            Value::Object(o) => o.get_mut(key)?,
            _ => return None,
        };
    }
    match current {
        Value::Object(o) => Some(o),
        _ => None,
    }
}

struct Walk<'w, 'e> {
    ev: &'w mut Evaluator<'e>,
    resource_id: &'w dyn Fn(&str) -> String,
    path: Vec<String>,
    out: Vec<ListSource>,
}

/// One step of the property path after a `list*()` call.
enum Step {
    Member(String),
    Index(i64),
}

impl Walk<'_, '_> {
    fn node(&mut self, node: &Node) {
        match &node.kind {
            NodeKind::Object(members) => {
                for m in members {
                    // A computed key names nothing we can place a directive at.
                    if m.key.starts_with('[') && !m.key.starts_with("[[") {
                        continue;
                    }
                    self.path.push(m.key.clone());
                    self.node(&m.value);
                    self.path.pop();
                }
            }
            NodeKind::String(s) => {
                if let Ok(Some(expr)) = cairn_expr::parse_template_string(s) {
                    let source: Rc<str> = Rc::from(s.as_str());
                    self.expr(&expr, &source);
                }
            }
            _ => {}
        }
    }

    fn expr(&mut self, expr: &Expr, source: &Rc<str>) {
        if let ExprKind::Call {
            namespace: None,
            name,
            args,
        } = &expr.kind
        {
            if name.name.eq_ignore_ascii_case("createObject") {
                for pair in args.chunks(2) {
                    let [key, value] = pair else { continue };
                    if let Ok(Value::String(key)) = self.ev.eval_expr(key, source) {
                        self.path.push(key);
                        self.expr(value, source);
                        self.path.pop();
                    }
                }
                return;
            }
            if name.name.eq_ignore_ascii_case("if") && args.len() == 3 {
                // Only the branch the deployment takes is recorded; the other is never evaluated.
                if let Ok(Value::Bool(taken)) = self.ev.eval_expr(&args[0], source) {
                    self.expr(if taken { &args[1] } else { &args[2] }, source);
                }
                return;
            }
        }
        if let Some(found) = self.list_call(expr, source) {
            self.out.push(found);
        }
    }

    /// `list*(id, apiVersion[, body])` followed by property and index accessors.
    fn list_call(&mut self, expr: &Expr, source: &Rc<str>) -> Option<ListSource> {
        let mut steps = Vec::new();
        let mut current = expr;
        let (name, args) = loop {
            match &current.kind {
                ExprKind::Property { target, name } => {
                    steps.push(Step::Member(name.name.clone()));
                    current = target;
                }
                ExprKind::Index { target, index } => {
                    steps.push(match self.ev.eval_expr(index, source).ok()? {
                        Value::Int(i) => Step::Index(i),
                        Value::String(s) => Step::Member(s),
                        _ => return None,
                    });
                    current = target;
                }
                ExprKind::Call {
                    namespace: None,
                    name,
                    args,
                } => break (name, args),
                _ => return None,
            }
        };
        let is_list = cairn_eval::functions::lookup(&name.name)
            .is_some_and(cairn_eval::functions::is_list_function);
        if !is_list || !(2..=3).contains(&args.len()) {
            return None;
        }
        let target = match self.ev.eval_expr(&args[0], source).ok()? {
            Value::String(s) => s,
            _ => return None,
        };
        let api_version = match self.ev.eval_expr(&args[1], source).ok()? {
            Value::String(s) => s,
            _ => return None,
        };
        let request_body = match args.get(2) {
            Some(body) => {
                let body = self.ev.eval_expr(body, source).ok()?;
                if body.contains_unevaluated() {
                    return None;
                }
                Some(body.to_json())
            }
            None => None,
        };
        steps.reverse();
        Some(ListSource {
            path: self.path.clone(),
            resource_id: (self.resource_id)(&target),
            api_version,
            action: name.name.clone(),
            request_body,
            response_value_path: value_path(&steps),
        })
    }
}

/// `a.b[0]['c.d']`; `$` when there are no steps.
fn value_path(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Member(m) if m.contains(['.', '[', ']', '\'', '"']) || m.is_empty() => {
                out.push_str(&format!(
                    "['{}']",
                    m.replace('\\', "\\\\").replace('\'', "\\'")
                ));
            }
            Step::Member(m) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(m);
            }
        }
    }
    if out.is_empty() { "$".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_eval::SimpleEnvironment;
    use serde_json::json;

    const AKS: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks";

    /// Walks `configs` with `params` as parameters; runtime functions are unavailable (as offline), which the walk
    /// must not need. Symbolic names resolve to `{AKS}-{name}`.
    fn sources(params: serde_json::Value, configs: serde_json::Value) -> Vec<ListSource> {
        let env = SimpleEnvironment {
            parameters: Value::from_json(&params)
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ..SimpleEnvironment::default()
        };
        let mut ev = Evaluator::new(&env);
        let node = cairn_json::parse(&configs.to_string()).expect("json");
        list_sources(&mut ev, &node, &|t: &str| {
            if t.starts_with('/') {
                t.to_string()
            } else {
                format!("{AKS}-{t}")
            }
        })
    }

    fn seed_000_flagship() -> serde_json::Value {
        json!({"k8s": "[createObject('namespace', parameters('namespace'), 'auth', createObject('kubeConfig', listClusterAdminCredential(parameters('aks'), '2024-02-01').kubeconfigs[0].value))]"})
    }

    #[test]
    fn seed_000_flagship_becomes_an_api_reference_under_auth() {
        let found = sources(
            json!({"namespace": "apps", "aks": AKS}),
            seed_000_flagship(),
        );
        assert_eq!(
            found,
            [ListSource {
                path: vec!["k8s".into(), "auth".into(), "kubeConfig".into()],
                resource_id: AKS.into(),
                api_version: "2024-02-01".into(),
                action: "listClusterAdminCredential".into(),
                request_body: None,
                response_value_path: "kubeconfigs[0].value".into(),
            }]
        );
        let mut evaluated = Value::from_json(
            &json!({"k8s": {"namespace": "apps", "auth": {"kubeConfig": "c2VjcmV0"}}}),
        );
        record_directives(&mut evaluated, &found);
        assert_eq!(
            evaluated.to_json(),
            json!({"k8s": {"namespace": "apps", "auth": {"kubeConfig": {"apiReference": {
                "method": "POST", "armResourceId": AKS, "apiVersion": "2024-02-01",
                "action": "listClusterAdminCredential", "responseValuePath": "kubeconfigs[0].value"}}}}})
        );
    }

    #[test]
    fn the_taken_if_branch_is_recorded_with_its_body() {
        let configs = json!({"k8s": {"kubeConfig": {"type": "secureString", "value":
            "[if(parameters('admin'), listClusterAdminCredential(parameters('aks'), '2024-02-01').kubeconfigs[0].value, listClusterUserCredential(parameters('aks'), '2024-02-01', createObject('format', 'exec'))['kubeconfigs'][1]['value'])]"}}});
        for (admin, action, body, path) in [
            (
                true,
                "listClusterAdminCredential",
                None,
                "kubeconfigs[0].value",
            ),
            (
                false,
                "listClusterUserCredential",
                Some(json!({"format": "exec"})),
                "kubeconfigs[1].value",
            ),
        ] {
            let found = sources(json!({"admin": admin, "aks": AKS}), configs.clone());
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].action, action);
            assert_eq!(found[0].request_body, body);
            assert_eq!(found[0].response_value_path, path);
            let mut evaluated = Value::from_json(
                &json!({"k8s": {"kubeConfig": {"type": "secureString", "value": "c2VjcmV0"}}}),
            );
            record_directives(&mut evaluated, &found);
            let item = evaluated.to_json()["k8s"]["kubeConfig"].clone();
            assert_eq!(item["type"], "secureString");
            assert_eq!(item["apiReference"]["action"], action);
            assert!(item.get("value").is_none(), "{item}");
        }
    }

    #[test]
    fn other_values_and_untaken_branches_stay_values() {
        let found = sources(
            json!({"aks": AKS, "token": "t"}),
            json!({"k8s": {
                "namespace": {"value": "apps"},
                "token": "[parameters('token')]",
                "picked": "[if(equals(1, 1), parameters('token'), listKeys(parameters('aks'), 'v').keys[0].value)]",
                "whole": "[listKeys('store', '2023-01-01')]",
                "quoted": "[listKeys(parameters('aks'), 'v').keys[0]['a.b']]",
            }}),
        );
        let paths: Vec<(String, String)> = found
            .iter()
            .map(|s| (s.path.join("."), s.response_value_path.clone()))
            .collect();
        assert_eq!(
            paths,
            [
                ("k8s.whole".to_string(), "$".to_string()),
                ("k8s.quoted".to_string(), "keys[0]['a.b']".to_string())
            ]
        );
        assert_eq!(
            found[0].resource_id,
            format!("{AKS}-store"),
            "symbolic names resolve"
        );
    }
}
