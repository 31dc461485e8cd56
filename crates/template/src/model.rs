//! The template model: a parsed ARM JSON template, section by section, keeping the source nodes for evaluation.
//!
//! Parsing never stops at the first problem: [`Template::parse`] returns the model plus diagnostics. Values stay
//! as [`Node`]s (with spans) because almost everything in a template may be an expression evaluated later.

use std::rc::Rc;

use cairn_eval::{ScopeKind, UserFunction, UserFunctionParameter};
use cairn_json::{Node, NodeKind, Span};

use crate::diagnostics::{Diagnostic, join_index, join_path};

/// `languageVersion`: absent = 1.0 (resources array), 2.x = symbolic names (resources object).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LanguageVersion {
    V1,
    V2(String),
}

impl LanguageVersion {
    pub fn symbolic(&self) -> bool {
        matches!(self, LanguageVersion::V2(_))
    }
}

#[derive(Clone, Debug)]
pub struct ParameterDecl {
    pub name: String,
    /// The whole declaration (`type`, `defaultValue`, constraints, ...).
    pub node: Node,
    pub path: String,
}

#[derive(Clone, Debug)]
pub struct VariableDecl {
    pub name: String,
    pub value: VariableValue,
    pub path: String,
}

#[derive(Clone, Debug)]
pub enum VariableValue {
    Plain(Node),
    /// A top-level `copy` entry: `{ name, count, input }`.
    Copy {
        count: Node,
        input: Node,
    },
}

/// How an extension was declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ExtensionEncoding {
    /// v1 `imports: { alias: { provider, version, config } }`.
    Imports,
    /// v2 `extensions: { alias: { name, version, config: { p: { defaultValue } } } }`.
    Extensions,
    /// REP 0004 `providers: { alias: { name, version, config: { p: { type } } } }`.
    Providers,
}

#[derive(Clone, Debug)]
pub struct ExtensionDecl {
    pub alias: String,
    pub name: String,
    pub version: String,
    pub encoding: ExtensionEncoding,
    /// Config defaults: property name → value node (may be an expression).
    pub config_defaults: Vec<(String, Node)>,
    /// Properties the declaration marks secure (`type: secureString`/`secureObject`).
    pub secure_properties: Vec<String>,
    /// Typed config entries with neither `defaultValue` nor `nullable: true` (seed 000/001 declarations): a
    /// deployment must supply them, at the top level or under `auth`.
    pub required_properties: Vec<String>,
    /// Every config property the declaration names, when it declares a schema (at least one typed entry);
    /// `None` for value-only declarations (v1 `imports`, v2 `defaultValue`-only), which may list only some.
    pub declared_properties: Option<Vec<String>>,
    pub path: String,
    pub span: Span,
}

impl ExtensionDecl {
    /// `az` / `AzureResourceManager`: resources under it are ordinary Azure resources.
    pub fn is_azure(&self) -> bool {
        self.name.eq_ignore_ascii_case("AzureResourceManager")
    }
}

#[derive(Clone, Debug)]
pub struct ResourceDecl {
    /// The key in a 2.0 `resources` object.
    pub symbolic_name: Option<String>,
    pub node: Node,
    pub path: String,
    /// Index of the parent declaration for 1.0 nested child resources.
    pub parent: Option<usize>,
    /// The extension alias from `extension`, `import` or `provider`.
    pub extension_alias: Option<String>,
    pub existing: bool,
}

#[derive(Clone, Debug)]
pub struct OutputDecl {
    pub name: String,
    pub node: Node,
    pub path: String,
}

/// A parsed template.
#[derive(Clone, Debug)]
pub struct Template {
    pub root: Node,
    pub schema: Option<String>,
    pub scope: ScopeKind,
    pub content_version: Option<String>,
    pub language_version: LanguageVersion,
    pub parameters: Vec<ParameterDecl>,
    pub definitions: Option<Node>,
    pub variables: Vec<VariableDecl>,
    pub functions: Vec<Rc<UserFunction>>,
    pub resources: Vec<ResourceDecl>,
    pub outputs: Vec<OutputDecl>,
    pub extensions: Vec<ExtensionDecl>,
    /// [`Template::text_hash`], once asked for.
    text_hash: std::cell::OnceCell<String>,
}

impl Template {
    /// A stable hash of the template's text, shaped like ARM's `templateHash` (a decimal u64): FNV-1a over its
    /// compact JSON. Computed once per parsed template: a deployment's preflight and its run both expand it, and
    /// each turned the whole template into text again for it.
    pub fn text_hash(&self) -> &str {
        self.text_hash.get_or_init(|| {
            let text = self.root.to_json().to_string();
            // FNV-1a: stable across runs and platforms.
            let mut h: u64 = 0xcbf29ce484222325;
            for b in text.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x100000001b3);
            }
            h.to_string()
        })
    }
}

/// The deployment scope named by a `$schema` URL; `None` when it is not a deployment template schema.
pub fn scope_from_schema(schema: &str) -> Option<ScopeKind> {
    let lower = schema.to_ascii_lowercase();
    let file = lower.rsplit('/').next()?.trim_end_matches('#');
    match file {
        "deploymenttemplate.json" => Some(ScopeKind::ResourceGroup),
        "subscriptiondeploymenttemplate.json" => Some(ScopeKind::Subscription),
        "managementgroupdeploymenttemplate.json" => Some(ScopeKind::ManagementGroup),
        "tenantdeploymenttemplate.json" => Some(ScopeKind::Tenant),
        _ => None,
    }
}

fn string_of(node: Option<&Node>) -> Option<String> {
    node.and_then(Node::as_str).map(str::to_string)
}

impl Template {
    /// Builds the model from a parsed JSON tree. Problems become diagnostics; the model holds what could be read.
    pub fn parse(root: Node) -> (Template, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let schema = string_of(root.get_ci("$schema"));
        let scope = schema
            .as_deref()
            .and_then(scope_from_schema)
            .unwrap_or_default();
        let language_version = match root.get_ci("languageVersion").and_then(Node::as_str) {
            None | Some("1.0") => LanguageVersion::V1,
            Some(v) => LanguageVersion::V2(v.to_string()),
        };
        let mut t = Template {
            schema,
            scope,
            content_version: string_of(root.get_ci("contentVersion")),
            language_version,
            parameters: Vec::new(),
            definitions: root.get_ci("definitions").cloned(),
            variables: Vec::new(),
            functions: Vec::new(),
            resources: Vec::new(),
            outputs: Vec::new(),
            extensions: Vec::new(),
            root: Node::synthetic(NodeKind::Null),
            text_hash: std::cell::OnceCell::new(),
        };
        if root.as_object().is_none() {
            diags.push(
                Diagnostic::error("InvalidTemplate", "The template must be a JSON object.", "")
                    .with_span(root.span),
            );
        }
        if let Some(params) = object_section(&root, "parameters", &mut diags) {
            for m in params {
                t.parameters.push(ParameterDecl {
                    name: m.key.clone(),
                    node: m.value.clone(),
                    path: join_path("parameters", &m.key),
                });
            }
        }
        if let Some(vars) = object_section(&root, "variables", &mut diags) {
            for m in vars {
                if m.key.eq_ignore_ascii_case("copy") {
                    t.parse_variable_copies(&m.value, &mut diags);
                    continue;
                }
                t.variables.push(VariableDecl {
                    name: m.key.clone(),
                    value: VariableValue::Plain(m.value.clone()),
                    path: join_path("variables", &m.key),
                });
            }
        }
        t.parse_functions(&root, &mut diags);
        t.parse_extensions(&root, &mut diags);
        t.parse_resources(&root, &mut diags);
        if let Some(outputs) = object_section(&root, "outputs", &mut diags) {
            for m in outputs {
                t.outputs.push(OutputDecl {
                    name: m.key.clone(),
                    node: m.value.clone(),
                    path: join_path("outputs", &m.key),
                });
            }
        }
        t.root = root;
        (t, diags)
    }

    fn parse_variable_copies(&mut self, node: &Node, diags: &mut Vec<Diagnostic>) {
        let Some(items) = node.as_array() else {
            diags.push(
                Diagnostic::error(
                    "InvalidTemplate",
                    "The variables 'copy' property must be an array.",
                    "variables.copy",
                )
                .with_span(node.span),
            );
            return;
        };
        for (i, item) in items.iter().enumerate() {
            let path = join_index("variables.copy", i);
            let name = item.get_ci("name").and_then(Node::as_str);
            let count = item.get_ci("count");
            let input = item.get_ci("input");
            match (name, count, input) {
                (Some(name), Some(count), Some(input)) => self.variables.push(VariableDecl {
                    name: name.to_string(),
                    value: VariableValue::Copy {
                        count: count.clone(),
                        input: input.clone(),
                    },
                    path,
                }),
                _ => diags.push(
                    Diagnostic::error(
                        "InvalidTemplate",
                        "A variable copy loop needs 'name', 'count' and 'input'.",
                        path,
                    )
                    .with_span(item.span),
                ),
            }
        }
    }

    fn parse_functions(&mut self, root: &Node, diags: &mut Vec<Diagnostic>) {
        let Some(section) = root.get_ci("functions") else {
            return;
        };
        let Some(namespaces) = section.as_array() else {
            diags.push(
                Diagnostic::error(
                    "InvalidTemplate",
                    "The 'functions' section must be an array.",
                    "functions",
                )
                .with_span(section.span),
            );
            return;
        };
        for (i, ns) in namespaces.iter().enumerate() {
            let path = join_index("functions", i);
            let Some(namespace) = ns.get_ci("namespace").and_then(Node::as_str) else {
                diags.push(
                    Diagnostic::error(
                        "InvalidTemplate",
                        "A function namespace needs a 'namespace' name.",
                        &path,
                    )
                    .with_span(ns.span),
                );
                continue;
            };
            let Some(members) = ns.get_ci("members").and_then(Node::as_object) else {
                continue;
            };
            for m in members {
                let fpath = join_path(&join_path(&path, "members"), &m.key);
                let mut parameters = Vec::new();
                if let Some(ps) = m.value.get_ci("parameters").and_then(Node::as_array) {
                    for p in ps {
                        match p.get_ci("name").and_then(Node::as_str) {
                            Some(name) => parameters.push(UserFunctionParameter {
                                name: name.to_string(),
                                param_type: string_of(p.get_ci("type")),
                            }),
                            None => diags.push(
                                Diagnostic::error(
                                    "InvalidTemplate",
                                    "A function parameter needs a 'name'.",
                                    &fpath,
                                )
                                .with_span(p.span),
                            ),
                        }
                    }
                }
                let output = m.value.get_ci("output");
                let Some(value) = output.and_then(|o| o.get_ci("value")) else {
                    diags.push(
                        Diagnostic::error(
                            "InvalidTemplate",
                            "A user-defined function needs 'output.value'.",
                            &fpath,
                        )
                        .with_span(m.value.span),
                    );
                    continue;
                };
                self.functions.push(Rc::new(UserFunction {
                    namespace: namespace.to_string(),
                    name: m.key.clone(),
                    parameters,
                    output_type: string_of(output.and_then(|o| o.get_ci("type"))),
                    output: value.clone(),
                }));
            }
        }
    }

    fn parse_extensions(&mut self, root: &Node, diags: &mut Vec<Diagnostic>) {
        for (section, encoding) in [
            ("imports", ExtensionEncoding::Imports),
            ("extensions", ExtensionEncoding::Extensions),
            ("providers", ExtensionEncoding::Providers),
        ] {
            let Some(members) = object_section(root, section, diags) else {
                continue;
            };
            for m in members {
                let path = join_path(section, &m.key);
                let decl = &m.value;
                let name = match encoding {
                    ExtensionEncoding::Imports => {
                        decl.get_ci("provider").or_else(|| decl.get_ci("name"))
                    }
                    // The earliest REP 0006 revision spells it `extension`.
                    _ => decl.get_ci("name").or_else(|| decl.get_ci("extension")),
                };
                let Some(name) = name.and_then(Node::as_str) else {
                    diags.push(
                        Diagnostic::error(
                            "InvalidExtension",
                            format!("The extension '{}' must name its extension.", m.key),
                            &path,
                        )
                        .with_span(decl.span),
                    );
                    continue;
                };
                let version = string_of(decl.get_ci("version")).unwrap_or_default();
                let mut config_defaults = Vec::new();
                let mut secure_properties = Vec::new();
                let mut required_properties = Vec::new();
                let mut declared_properties = None;
                if let Some(config) = decl.get_ci("config").and_then(Node::as_object) {
                    if encoding != ExtensionEncoding::Imports
                        && config.iter().any(|c| c.value.get_ci("type").is_some())
                    {
                        declared_properties = Some(config.iter().map(|c| c.key.clone()).collect());
                    }
                    for c in config {
                        match encoding {
                            ExtensionEncoding::Imports => {
                                config_defaults.push((c.key.clone(), c.value.clone()))
                            }
                            ExtensionEncoding::Extensions | ExtensionEncoding::Providers => {
                                if let Some(default) = c.value.get_ci("defaultValue") {
                                    config_defaults.push((c.key.clone(), default.clone()));
                                }
                                let typed = c.value.get_ci("type");
                                if typed.is_some()
                                    && c.value.get_ci("defaultValue").is_none()
                                    && c.value.get_ci("nullable").and_then(Node::as_bool)
                                        != Some(true)
                                {
                                    required_properties.push(c.key.clone());
                                }
                                let ty = typed.and_then(Node::as_str).unwrap_or("");
                                if ty.eq_ignore_ascii_case("secureString")
                                    || ty.eq_ignore_ascii_case("secureObject")
                                {
                                    secure_properties.push(c.key.clone());
                                }
                            }
                        }
                    }
                }
                self.extensions.push(ExtensionDecl {
                    alias: m.key.clone(),
                    name: name.to_string(),
                    version,
                    encoding,
                    config_defaults,
                    secure_properties,
                    required_properties,
                    declared_properties,
                    path,
                    span: decl.span,
                });
            }
        }
    }

    fn parse_resources(&mut self, root: &Node, diags: &mut Vec<Diagnostic>) {
        let Some(section) = root.get_ci("resources") else {
            return;
        };
        match &section.kind {
            NodeKind::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.push_resource(None, item, join_index("resources", i), None, diags);
                }
            }
            NodeKind::Object(members) => {
                for m in members {
                    let path = join_path("resources", &m.key);
                    self.push_resource(Some(m.key.clone()), &m.value, path, None, diags);
                }
            }
            _ => diags.push(
                Diagnostic::error(
                    "InvalidTemplate",
                    "The 'resources' section must be an array or an object.",
                    "resources",
                )
                .with_span(section.span),
            ),
        }
    }

    fn push_resource(
        &mut self,
        symbolic_name: Option<String>,
        node: &Node,
        path: String,
        parent: Option<usize>,
        diags: &mut Vec<Diagnostic>,
    ) {
        if node.as_object().is_none() {
            diags.push(
                Diagnostic::error(
                    "InvalidTemplate",
                    "A resource must be a JSON object.",
                    &path,
                )
                .with_span(node.span),
            );
            return;
        }
        if node.get_ci("type").and_then(Node::as_str).is_none() {
            diags.push(
                Diagnostic::error(
                    "InvalidTemplate",
                    "The resource must have a string 'type'.",
                    &path,
                )
                .with_span(node.span),
            );
            return;
        }
        let extension_alias = ["extension", "import", "provider"]
            .iter()
            .find_map(|k| node.get_ci(k).and_then(Node::as_str))
            .map(str::to_string);
        let existing = node
            .get_ci("existing")
            .and_then(Node::as_bool)
            .unwrap_or(false);
        let index = self.resources.len();
        self.resources.push(ResourceDecl {
            symbolic_name,
            node: node.clone(),
            path: path.clone(),
            parent,
            extension_alias,
            existing,
        });
        if let Some(children) = node.get_ci("resources").and_then(Node::as_array) {
            for (i, child) in children.iter().enumerate() {
                let child_path = join_index(&join_path(&path, "resources"), i);
                self.push_resource(None, child, child_path, Some(index), diags);
            }
        }
    }

    pub fn parameter(&self, name: &str) -> Option<&ParameterDecl> {
        self.parameters
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    }

    pub fn variable(&self, name: &str) -> Option<&VariableDecl> {
        self.variables
            .iter()
            .find(|v| v.name.eq_ignore_ascii_case(name))
    }

    pub fn extension(&self, alias: &str) -> Option<&ExtensionDecl> {
        self.extensions
            .iter()
            .find(|e| e.alias.eq_ignore_ascii_case(alias))
    }
}

fn object_section<'n>(
    root: &'n Node,
    name: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<&'n [cairn_json::Member]> {
    let section = root.get_ci(name)?;
    match section.as_object() {
        Some(members) => Some(members),
        None if section.is_null() => None,
        None => {
            diags.push(
                Diagnostic::error(
                    "InvalidTemplate",
                    format!("The '{name}' section must be a JSON object."),
                    name,
                )
                .with_span(section.span),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_templates_text_hash_is_its_compact_texts_and_kept() {
        let parse = |text: &str| Template::parse(cairn_json::parse(text).unwrap()).0;
        let template = parse(r#"{ "contentVersion": "1.0.0.0", "resources": [] }"#);
        // FNV-1a of `{"contentVersion":"1.0.0.0","resources":[]}`: the value ARM-shaped `templateHash` shows.
        let mut expected: u64 = 0xcbf29ce484222325;
        for b in br#"{"contentVersion":"1.0.0.0","resources":[]}"# {
            expected ^= u64::from(*b);
            expected = expected.wrapping_mul(0x100000001b3);
        }
        assert_eq!(template.text_hash(), expected.to_string());
        assert!(std::ptr::eq(template.text_hash(), template.text_hash()));
        assert_eq!(
            template.clone().text_hash(),
            parse(r#"{"contentVersion":"1.0.0.0","resources":[]}"#).text_hash()
        );
        assert_ne!(
            template.text_hash(),
            parse(r#"{ "contentVersion": "1.0.0.1", "resources": [] }"#).text_hash()
        );
    }

    #[test]
    fn scopes_from_schema() {
        let s = |u: &str| scope_from_schema(u);
        assert_eq!(
            s("https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"),
            Some(ScopeKind::ResourceGroup)
        );
        assert_eq!(
            s(
                "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#"
            ),
            Some(ScopeKind::Subscription)
        );
        assert_eq!(
            s(
                "https://schema.management.azure.com/schemas/2019-08-01/tenantDeploymentTemplate.json#"
            ),
            Some(ScopeKind::Tenant)
        );
        assert_eq!(s("https://example.com/x.json"), None);
    }

    #[test]
    fn sections() {
        let text = r#"{
          "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
          "contentVersion": "1.0.0.0",
          "parameters": { "p": { "type": "string" } },
          "variables": { "v": 1, "copy": [ { "name": "c", "count": 2, "input": "[copyIndex('c')]" } ] },
          "imports": { "k8s": { "provider": "Kubernetes", "version": "1.0.0", "config": { "namespace": "default" } } },
          "resources": [ { "type": "A.B/c", "name": "x", "resources": [ { "type": "d", "name": "y" } ] } ],
          "outputs": { "o": { "type": "int", "value": 1 } }
        }"#;
        let (t, diags) = Template::parse(cairn_json::parse(text).unwrap());
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(t.parameters.len(), 1);
        assert_eq!(t.variables.len(), 2);
        assert_eq!(t.resources.len(), 2);
        assert_eq!(t.resources[1].parent, Some(0));
        assert_eq!(t.resources[1].path, "resources[0].resources[0]");
        assert_eq!(t.extensions[0].name, "Kubernetes");
        assert_eq!(t.outputs[0].name, "o");
    }
}
