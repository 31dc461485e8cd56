//! Applies seed 000's two tables to every extension config in the deployment tree: declarations' own config,
//! the parameters file's `extensionConfigs`, and each nested deployment's `properties.extensionConfigs`; checks
//! property names, aliases, inheritance and required properties on the way.

use std::cell::RefCell;
use std::rc::Rc;

use cairn_eval::Evaluator;
use cairn_json::{Node, NodeKind, Span};
use cairn_template::catalogue;
use cairn_template::config::{AUTH, is_item_keys, wrapper_kinds};
use cairn_template::config_source::{Names, trace_config};
use cairn_template::model::{ExtensionDecl, ExtensionEncoding, ResourceDecl, VariableValue};
use cairn_template::{Template, join_path};

use crate::origin::{AMember, AObject, AVal, FileKind, Origin, OriginKind, ScopeId};
use crate::rules::Rules;
use crate::trace::{Ctx, Scope, Tracer};

/// Deepest nesting of deployments followed.
const MAX_DEPLOYMENT_DEPTH: usize = 32;
/// Most nested auth objects followed.
const MAX_AUTH_DEPTH: usize = 8;

/// One problem found, before its level is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub file: FileKind,
    pub target: String,
    pub span: Option<Span>,
    pub message: String,
}

/// What the linter knows about the extension a config is for.
#[derive(Clone, Debug)]
pub struct ExtInfo {
    pub alias: String,
    pub name: String,
    pub version: String,
    pub secure: Vec<String>,
    pub required: Vec<String>,
    pub defaults: Vec<String>,
    /// The declared schema's property names (see `ExtensionDecl::declared_properties`): others are dangling.
    pub schema: Option<Vec<String>>,
    /// Found in a template declaration (rather than guessed from the alias).
    pub declared: bool,
}

impl ExtInfo {
    pub fn is_secure(&self, property: &str) -> bool {
        property.eq_ignore_ascii_case("auth")
            || self.secure.iter().any(|s| s.eq_ignore_ascii_case(property))
    }

    fn label(&self) -> String {
        if self.declared {
            format!("'{}' ({} {})", self.alias, self.name, self.version)
        } else {
            format!("'{}'", self.alias)
        }
    }
}

/// Where a config is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    ParametersFile,
    /// The root deployment with no parameters file: its configs come with the deployment request.
    Deployment,
    Module,
    Declaration,
}

impl Source {
    fn describe(self) -> &'static str {
        match self {
            Source::ParametersFile => "the parameters file's extensionConfigs",
            Source::Deployment => "the deployment (no parameters file gives extensionConfigs)",
            Source::Module => "the module's extensionConfigs",
            Source::Declaration => "the extension declaration",
        }
    }
}

/// One alias of a module's extensionConfigs: alias, traced value, where the value and the key are written.
type ModuleEntry = (
    String,
    AVal,
    Option<(FileKind, Span)>,
    Option<(FileKind, Span)>,
);

/// One config under check.
struct ConfigSite<'s> {
    ext: &'s ExtInfo,
    /// JSON path of the alias value.
    target: String,
    /// The alias value as written: findings point inside it when they can.
    block: Option<(FileKind, Span)>,
    /// The deployment the config is evaluated in (the parent, for a module).
    eval_scope: ScopeId,
    source: Source,
}

/// What a config supplies: top-level property names (auth members count under their own names too).
#[derive(Clone, Debug, Default)]
struct Supplied {
    /// `None`: the names are not known here.
    names: Option<Vec<String>>,
    /// The config (or part of it) is inherited whole: the source's own checks cover required properties.
    inherited: bool,
}

impl Supplied {
    fn known(names: Vec<String>) -> Supplied {
        Supplied {
            names: Some(names),
            inherited: false,
        }
    }

    /// Names every branch supplies.
    fn intersect(branches: Vec<Supplied>) -> Supplied {
        let inherited = branches.iter().any(|b| b.inherited);
        let mut names: Option<Vec<String>> = None;
        for b in branches {
            let Some(b_names) = b.names else {
                return Supplied {
                    names: None,
                    inherited,
                };
            };
            names = Some(match names {
                None => b_names,
                Some(prev) => prev
                    .into_iter()
                    .filter(|n| b_names.iter().any(|m| m.eq_ignore_ascii_case(n)))
                    .collect(),
            });
        }
        Supplied {
            names: Some(names.unwrap_or_default()),
            inherited,
        }
    }
}

/// The analysis of one lint run.
pub struct Checker<'a> {
    pub tracer: Tracer<'a>,
    pub rules: &'a Rules,
    pub findings: RefCell<Vec<Finding>>,
}

impl<'a> Checker<'a> {
    fn scope(&self, id: ScopeId) -> &Scope {
        &self.tracer.scopes[id]
    }

    fn push(&self, finding: Finding) {
        let mut findings = self.findings.borrow_mut();
        if !findings
            .iter()
            .any(|f| f.target == finding.target && f.message == finding.message)
        {
            findings.push(finding);
        }
    }

    fn report(
        &self,
        target: String,
        at: Option<(FileKind, Span)>,
        fallback: Option<(FileKind, Span)>,
        message: String,
    ) {
        let (file, span) = match at.or(fallback) {
            Some((file, span)) => (file, Some(span)),
            None => (FileKind::Template, None),
        };
        self.push(Finding {
            file,
            target,
            span,
            message,
        });
    }

    // ----- extension facts -----

    pub fn ext_info(&self, _template: &Template, decl: &ExtensionDecl) -> ExtInfo {
        let mut secure = decl.secure_properties.clone();
        secure.extend(
            catalogue::secure_properties(&decl.name)
                .iter()
                .map(|s| s.to_string()),
        );
        secure.extend(
            self.rules
                .secure_properties_for(&decl.name)
                .map(str::to_string),
        );
        let mut required = decl.required_properties.clone();
        required.extend(
            catalogue::required_properties(&decl.name, &decl.version)
                .iter()
                .map(|s| s.to_string()),
        );
        required.extend(
            self.rules
                .required_properties_for(&decl.name)
                .map(str::to_string),
        );
        dedup_names(&mut required);
        ExtInfo {
            alias: decl.alias.clone(),
            name: decl.name.clone(),
            version: decl.version.clone(),
            secure,
            required,
            defaults: decl
                .config_defaults
                .iter()
                .map(|(k, _)| k.clone())
                .collect(),
            schema: decl.declared_properties.clone(),
            declared: true,
        }
    }

    /// For a config whose extension is not declared where the linter can see it: guess by the alias (an
    /// un-aliased extension's alias is its name).
    fn guessed_ext(&self, alias: &str) -> ExtInfo {
        let mut secure: Vec<String> = catalogue::secure_properties(alias)
            .iter()
            .map(|s| s.to_string())
            .collect();
        secure.extend(self.rules.secure_properties_for(alias).map(str::to_string));
        ExtInfo {
            alias: alias.to_string(),
            name: alias.to_string(),
            version: String::new(),
            secure,
            required: Vec::new(),
            defaults: Vec::new(),
            schema: None,
            declared: false,
        }
    }

    /// Whether an inherited config property is secure in the deployment it comes from (`None`: the whole config).
    fn inherited_secure(&self, scope: ScopeId, alias: &str, path: &[String]) -> Option<bool> {
        let first = path.first()?;
        if first.eq_ignore_ascii_case("auth") {
            return Some(true);
        }
        let template = &self.scope(scope).template;
        let decl = template.extension(alias)?;
        Some(self.ext_info(template, decl).is_secure(first))
    }

    fn effective(&self, scope: ScopeId, alias: &str) -> Option<Vec<String>> {
        self.scope(scope)
            .effective
            .borrow()
            .iter()
            .find(|(a, _)| a.eq_ignore_ascii_case(alias))
            .and_then(|(_, names)| names.clone())
    }

    fn set_effective(&self, scope: ScopeId, alias: &str, names: Option<Vec<String>>) {
        let mut effective = self.scope(scope).effective.borrow_mut();
        effective.retain(|(a, _)| !a.eq_ignore_ascii_case(alias));
        effective.push((alias.to_string(), names));
    }

    // ----- the deployment tree -----

    /// Checks the parameters file's extension configs for the root deployment.
    pub fn check_parameters_file(&self, root: &Node) {
        let template = self.scope(0).template.clone();
        let mut seen = Vec::new();
        for key in [
            "extensionConfigs",
            "deploymentProviderConfigs",
            "deploymentProviderConfigurations",
        ] {
            let Some(configs) = root.get_ci(key) else {
                continue;
            };
            let Some(members) = configs.as_object() else {
                continue;
            };
            for m in members {
                let target = join_path(key, &m.key);
                let ext = match template.extension(&m.key) {
                    Some(decl) => self.ext_info(&template, decl),
                    None => {
                        // The deployment would fail on the alias itself: its values are not checked further.
                        self.report_unknown_alias(
                            &template,
                            &m.key,
                            target.clone(),
                            Some((FileKind::Parameters, m.key_span)),
                            Source::ParametersFile,
                        );
                        continue;
                    }
                };
                let value = self.tracer.trace_parameters_node(&m.value);
                let site = ConfigSite {
                    ext: &ext,
                    target,
                    block: self.tracer.node_site(&m.value, FileKind::Parameters),
                    eval_scope: 0,
                    source: Source::ParametersFile,
                };
                let supplied = self.check_alias(&value, &site, 0);
                self.record_and_require(0, &ext, Some(supplied), &site.target, site.block);
                seen.push(m.key.clone());
            }
        }
        for decl in &template.extensions {
            if seen.iter().any(|a| a.eq_ignore_ascii_case(&decl.alias)) {
                continue;
            }
            let ext = self.ext_info(&template, decl);
            self.record_and_require(
                0,
                &ext,
                Some(Supplied::known(Vec::new())),
                &join_path("extensionConfigs", &decl.alias),
                root.get_ci("extensionConfigs")
                    .and_then(|n| self.tracer.node_site(n, FileKind::Parameters))
                    .or_else(|| self.tracer.node_site(root, FileKind::Parameters)),
            );
        }
    }

    /// The root deployment's configs when no parameters file is given: nothing beyond the declarations' defaults,
    /// so required properties without one are reported (the deployment would be refused for them).
    pub fn check_root_without_parameters(&self) {
        let template = self.scope(0).template.clone();
        for decl in &template.extensions {
            let ext = self.ext_info(&template, decl);
            self.record_and_require(
                0,
                &ext,
                Some(Supplied::known(Vec::new())),
                &join_path("extensionConfigs", &decl.alias),
                Some((FileKind::Template, decl.span)),
            );
        }
    }

    /// Records what an alias receives and reports required properties nobody supplies.
    fn record_and_require(
        &self,
        scope: ScopeId,
        ext: &ExtInfo,
        supplied: Option<Supplied>,
        target: &str,
        at: Option<(FileKind, Span)>,
    ) {
        let Some(supplied) = supplied else {
            self.set_effective(scope, &ext.alias, None);
            return;
        };
        let names = supplied.names.map(|mut names| {
            names.extend(ext.defaults.iter().cloned());
            if ext.defaults.iter().any(|d| d.eq_ignore_ascii_case(AUTH)) {
                // The declaration's own `auth` (seed 003) is where its secure properties come from.
                names.extend(credential_properties(ext));
            }
            dedup_names(&mut names);
            names
        });
        self.set_effective(scope, &ext.alias, names.clone());
        let Some(names) = names else { return };
        if supplied.inherited {
            return;
        }
        let source = match (scope, at) {
            (_, Some((FileKind::Parameters, _))) => Source::ParametersFile,
            (0, _) => Source::Deployment,
            _ => Source::Module,
        };
        for required in &ext.required {
            if names.iter().any(|n| n.eq_ignore_ascii_case(required)) {
                continue;
            }
            let how = if ext.is_secure(required) {
                "under 'auth' as a Key Vault reference ({ \"keyVaultReference\": { \"keyVault\": { \"id\": ... }, \"secretName\": ... } }) or a list* output".to_string()
            } else {
                "as { \"value\": ... }, or give it a defaultValue in the extension declaration"
                    .to_string()
            };
            self.report(
                target.to_string(),
                at,
                None,
                format!(
                    "Extension alias {} requires the config property '{required}', which {} does not supply and the template does not default; supply it {how}.",
                    ext.label(),
                    source.describe(),
                ),
            );
        }
    }

    fn report_unknown_alias(
        &self,
        template: &Template,
        alias: &str,
        target: String,
        at: Option<(FileKind, Span)>,
        source: Source,
    ) {
        let declared: Vec<&str> = template
            .extensions
            .iter()
            .map(|e| e.alias.as_str())
            .collect();
        let choice = if declared.is_empty() {
            "the template declares no extensions".to_string()
        } else {
            format!("use one of: {}", declared.join(", "))
        };
        let whose = if source == Source::ParametersFile {
            "template"
        } else {
            "nested template"
        };
        self.report(
            target,
            at,
            None,
            format!(
                "The extension alias '{alias}' in {} is not declared by the {whose}; {choice}.",
                source.describe()
            ),
        );
    }

    /// Checks a deployment's own extension declarations and then its nested deployments.
    pub fn check_scope(&mut self, scope: ScopeId, depth: usize) {
        let template = self.scope(scope).template.clone();
        self.tracer.warm_variables(scope);
        for decl in &template.extensions {
            self.check_declaration(scope, &template, decl);
        }
        if depth >= MAX_DEPLOYMENT_DEPTH {
            return;
        }
        for resource in &template.resources {
            let is_deployment = resource
                .node
                .get_ci("type")
                .and_then(Node::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
            if is_deployment && let Some(child) = self.check_module(scope, resource) {
                self.check_scope(child, depth + 1);
            }
        }
    }

    /// A declaration's own config: v1 `imports.<a>.config` values, v2 `config.<p>.defaultValue`.
    fn check_declaration(&self, scope: ScopeId, template: &Template, decl: &ExtensionDecl) {
        let ext = self.ext_info(template, decl);
        let config_path = join_path(&decl.path, "config");
        for (prop, node) in &decl.config_defaults {
            let mut relative = join_path(&config_path, prop);
            if decl.encoding != ExtensionEncoding::Imports {
                relative = join_path(&relative, "defaultValue");
            }
            let block = self.tracer.node_site(node, FileKind::Template);
            let value = self.tracer.trace_node(
                node,
                Ctx {
                    scope,
                    file: FileKind::Template,
                },
            );
            let site = ConfigSite {
                ext: &ext,
                target: self.scope(scope).path(&config_path),
                block,
                eval_scope: scope,
                source: Source::Declaration,
            };
            let target = self.scope(scope).path(&relative);
            if prop.eq_ignore_ascii_case("auth") {
                let _ = self.check_auth(&value, "auth", &target, &site, block, 0);
            } else {
                self.check_item(&value, ext.is_secure(prop), prop, &target, &site, block);
            }
        }
    }

    /// A nested deployment: its `extensionConfigs` (evaluated in `scope`), then a scope for its inline template.
    fn check_module(&mut self, scope: ScopeId, resource: &ResourceDecl) -> Option<ScopeId> {
        let properties = resource.node.get_ci("properties")?;
        properties.as_object()?;
        let module_path = self
            .scope(scope)
            .path(&join_path(&resource.path, "properties"));
        let ctx = Ctx {
            scope,
            file: FileKind::Template,
        };
        let child = match properties.get_ci("template") {
            Some(node) if node.as_object().is_some() => {
                let (template, _) = Template::parse(node.clone());
                Some(Rc::new(template))
            }
            _ => None,
        };
        let inner = properties
            .get_ci("expressionEvaluationOptions")
            .and_then(|o| o.get_ci("scope"))
            .and_then(Node::as_str)
            .is_some_and(|s| s.eq_ignore_ascii_case("inner"));
        let child_id = child.as_ref().map(|template| {
            let bindings = if inner {
                self.module_parameters(properties, ctx)
            } else {
                Vec::new()
            };
            let id = self.tracer.scopes.len();
            let names = (!inner).then(|| self.scope(scope).names);
            let mut child_scope = Scope::new(
                template.clone(),
                names,
                id,
                join_path(&module_path, "template"),
                Rc::new(Vec::new()),
            );
            child_scope.bindings = bindings;
            self.tracer.scopes.push(child_scope);
            id
        });

        let configs_path = join_path(&module_path, "extensionConfigs");
        let configs = properties.get_ci("extensionConfigs");
        let mut entries: Vec<ModuleEntry> = Vec::new();
        match configs.map(|c| &c.kind) {
            Some(NodeKind::Object(members)) => {
                for m in members {
                    entries.push((
                        m.key.clone(),
                        self.tracer.trace_node(&m.value, ctx),
                        self.tracer.node_site(&m.value, FileKind::Template),
                        Some((FileKind::Template, m.key_span)),
                    ));
                }
            }
            Some(_) => {
                let node = configs?;
                match self.tracer.trace_node(node, ctx) {
                    AVal::Object(obj) => {
                        self.check_computed_keys(&obj, "the module's extensionConfigs", &configs_path);
                        for m in obj.members {
                            entries.push((m.key, m.value, m.site, m.site));
                        }
                    }
                    _ => self.report(
                        configs_path.clone(),
                        self.tracer.node_site(node, FileKind::Template),
                        None,
                        "A module's extensionConfigs must be an object keyed by the nested template's extension aliases; write it as an object (or createObject(...)).".to_string(),
                    ),
                }
            }
            None => {}
        }
        for (alias, value, block, key_site) in &entries {
            let target = join_path(&configs_path, alias);
            let ext = match (&child, child_id) {
                (Some(template), Some(_)) => match template.extension(alias) {
                    Some(decl) => self.ext_info(template, decl),
                    None => {
                        self.report_unknown_alias(
                            template,
                            alias,
                            target.clone(),
                            *key_site,
                            Source::Module,
                        );
                        continue;
                    }
                },
                _ => self.guessed_ext(alias),
            };
            let site = ConfigSite {
                ext: &ext,
                target: target.clone(),
                block: *block,
                eval_scope: scope,
                source: Source::Module,
            };
            let supplied = self.check_alias(value, &site, 0);
            if let Some(id) = child_id
                && ext.declared
            {
                self.record_and_require(id, &ext, Some(supplied), &target, *block);
            }
        }
        if let Some(node) = configs {
            self.check_list_sources(scope, node, &configs_path);
        }
        if let (Some(template), Some(id)) = (&child, child_id) {
            for decl in &template.extensions {
                if entries
                    .iter()
                    .any(|(a, ..)| a.eq_ignore_ascii_case(&decl.alias))
                {
                    continue;
                }
                let ext = self.ext_info(template, decl);
                let at = configs
                    .and_then(|c| self.tracer.node_site(c, FileKind::Template))
                    .or_else(|| self.tracer.node_site(&resource.node, FileKind::Template));
                self.record_and_require(
                    id,
                    &ext,
                    Some(Supplied::known(Vec::new())),
                    &join_path(&configs_path, &decl.alias),
                    at,
                );
            }
        }
        child_id
    }

    /// The engine's rule for `list*()` outputs (`cairn_template::config_source`), run over the same module configs:
    /// a `list*()` output no directive can stand for, or a value reading a secure parameter, is refused with the
    /// engine's own message, so the linter and the engine give one verdict.
    fn check_list_sources(&self, scope: ScopeId, configs: &Node, configs_path: &str) {
        let names = &self.tracer.scopes[self.scope(scope).names];
        let variable = |name: &str| match names.template.variable(name).map(|v| &v.value) {
            Some(VariableValue::Plain(node)) => Some(node.clone()),
            _ => None,
        };
        let mut ev = Evaluator::new(&names.with_parameters);
        let traced = trace_config(
            &mut ev,
            configs,
            &Names {
                variable: &variable,
                resource_id: &|target: &str| target.to_string(),
                secure_parameter: &|name: &str| {
                    names.template.parameter(name).is_some_and(|d| {
                        cairn_template::types::is_secure(
                            &d.node,
                            names.template.definitions.as_ref(),
                        )
                    })
                },
            },
        );
        for t in traced {
            let Some(message) = t.refusal() else {
                continue;
            };
            // A `{ value: ... }` item is reported at its property, as the tables do.
            let mut path = t.path.as_slice();
            if path.len() > 2 && path.last().is_some_and(|p| p.eq_ignore_ascii_case("value")) {
                path = &path[..path.len() - 1];
            }
            let target = path
                .iter()
                .fold(configs_path.to_string(), |p, s| join_path(&p, s));
            // The tables' findings name the alias's properties their own way (seed 002's typed entries unwrap):
            // an alias already refused is not reported twice.
            let alias = join_path(
                configs_path,
                t.path.first().map(String::as_str).unwrap_or(""),
            );
            let reported = self.findings.borrow().iter().any(|f| {
                f.target == alias
                    || f.target.starts_with(&format!("{alias}."))
                    || f.target.starts_with(&format!("{alias}["))
            });
            if !reported {
                self.report(
                    target,
                    self.tracer.node_site(configs, FileKind::Template),
                    None,
                    message,
                );
            }
        }
    }

    /// The values a module passes to its (inner-scope) template's parameters, traced in the parent.
    fn module_parameters(&self, properties: &Node, ctx: Ctx) -> Vec<(String, AVal)> {
        let Some(members) = properties.get_ci("parameters").and_then(Node::as_object) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for m in members {
            if let Some(value) = m.value.get_ci("value") {
                out.push((m.key.clone(), self.tracer.trace_node(value, ctx)));
            } else if m.value.get_ci("reference").is_some() {
                out.push((
                    m.key.clone(),
                    AVal::leaf(Origin::new(
                        OriginKind::KeyVaultReference,
                        self.tracer.node_site(&m.value, FileKind::Template),
                    )),
                ));
            }
        }
        out
    }

    // ----- one alias's config -----

    /// Checks a whole alias value; returns the property names it supplies.
    fn check_alias(&self, value: &AVal, site: &ConfigSite, depth: usize) -> Supplied {
        let alias = &site.ext.alias;
        match value {
            AVal::Alt(branches) if depth < 8 => Supplied::intersect(
                branches
                    .iter()
                    .map(|(label, v)| self.check_alias(&v.clone().with_via(label), site, depth + 1))
                    .collect(),
            ),
            AVal::Alt(_) => {
                self.check_whole(value.origins(), site);
                Supplied::default()
            }
            AVal::Object(obj) => {
                // Seed 002: `{ "type": "object", "value": {...} }` and `{ "type": "inherit", "value": "alias" }`.
                if let Some(kind) = typed_alias_entry(obj) {
                    let inner = obj
                        .get("value")
                        .map(|m| m.value.clone())
                        .unwrap_or(AVal::Leaf(vec![]));
                    if kind.eq_ignore_ascii_case("object") {
                        return self.check_alias(&inner, site, depth + 1);
                    }
                    return self.check_inherit_entry(&inner, site);
                }
                let mut names = Vec::new();
                let mut auth = Supplied::known(Vec::new());
                for m in &obj.members {
                    let target = join_path(&site.target, &m.key);
                    names.push(m.key.clone());
                    if m.key.eq_ignore_ascii_case(AUTH) {
                        if self.is_null_literal(&m.value) {
                            self.report(
                                target,
                                m.site,
                                site.block,
                                format!(
                                    "The reserved config property 'auth' of extension alias '{alias}' is null, which is never valid; give its secure properties as an object (such as {{ \"kubeConfig\": {{ \"keyVaultReference\": ... }} }}), or leave 'auth' out."
                                ),
                            );
                            continue;
                        }
                        auth = self.check_auth(&m.value, AUTH, &target, site, m.site, 0);
                    } else {
                        self.check_declared(&m.key, &target, site, m.site);
                        if self.check_exclusive(&m.value, &m.key, &target, site, m.site) {
                            continue;
                        }
                        let value = unwrap_item(&m.value);
                        self.check_item(
                            &value,
                            site.ext.is_secure(&m.key),
                            &m.key,
                            &target,
                            site,
                            m.site,
                        );
                    }
                }
                self.check_computed_keys(
                    obj,
                    &format!("the config of extension alias '{alias}'"),
                    &site.target,
                );
                let mut supplied = Supplied::known(names);
                match auth.names {
                    Some(auth_names) => {
                        if let Some(names) = supplied.names.as_mut() {
                            names.extend(auth_names);
                        }
                    }
                    None => supplied.names = None,
                }
                supplied.inherited |= auth.inherited;
                if !obj.computed.is_empty() {
                    supplied.names = None;
                }
                for origin in &obj.tail {
                    match &origin.kind {
                        OriginKind::Inherited { scope, alias: from, path } if path.is_empty() => {
                            self.check_same_extension(*scope, from, site, origin);
                            supplied.inherited = true;
                            match (supplied.names.as_mut(), self.effective(*scope, from)) {
                                (Some(names), Some(more)) => names.extend(more),
                                _ => supplied.names = None,
                            }
                        }
                        _ => self.report(
                            site.target.clone(),
                            origin.site.filter(|s| contains(site.block, *s)),
                            site.block,
                            format!(
                                "The config for extension alias '{alias}' spreads in {}, whose property names are not known before deployment; write each property out (spreading in a parent's config with extensions('{alias}').config is fine).",
                                self.describe(origin)
                            ),
                        ),
                    }
                }
                supplied
            }
            AVal::Leaf(origins) => {
                self.check_whole(origins.clone(), site);
                let inherited: Vec<&Origin> = origins
                    .iter()
                    .filter(|o| matches!(&o.kind, OriginKind::Inherited { path, .. } if path.is_empty()))
                    .collect();
                if inherited.len() == origins.len() && !inherited.is_empty() {
                    let mut names = Some(Vec::new());
                    for o in inherited {
                        if let OriginKind::Inherited { scope, alias, .. } = &o.kind {
                            match (names.as_mut(), self.effective(*scope, alias)) {
                                (Some(n), Some(more)) => n.extend(more),
                                _ => names = None,
                            }
                        }
                    }
                    Supplied {
                        names,
                        inherited: true,
                    }
                } else {
                    Supplied::default()
                }
            }
            AVal::Array(_) => {
                self.report(
                    site.target.clone(),
                    None,
                    site.block,
                    format!(
                        "The config for extension alias '{alias}' must be an object of config properties, not an array; write it as an object (or createObject(...)) with one entry per property."
                    ),
                );
                Supplied::default()
            }
        }
    }

    /// A whole alias value that is not an object literal: only whole inheritance is fine.
    fn check_whole(&self, origins: Vec<Origin>, site: &ConfigSite) {
        let alias = &site.ext.alias;
        for origin in origins {
            match &origin.kind {
                OriginKind::Inherited { scope, alias: from, path }
                    if path.is_empty() && origin.transformed_by.is_none() =>
                {
                    self.check_same_extension(*scope, from, site, &origin);
                }
                _ => self.report(
                    site.target.clone(),
                    origin.site.filter(|s| contains(site.block, *s)),
                    site.block,
                    format!(
                        "The config for extension alias '{alias}' comes from {} as a whole, so its property names and secure values cannot be checked before deployment; write it as an object (or createObject(...)) with one entry per property, or inherit a parent's config with extensions('{alias}').config.",
                        self.describe(&origin)
                    ),
                ),
            }
        }
    }

    /// Seed 002 `{ "type": "inherit", "value": "<alias>" }`: the parent deployment's config for that alias.
    fn check_inherit_entry(&self, value: &AVal, site: &ConfigSite) -> Supplied {
        let alias = &site.ext.alias;
        let from = value.as_literal_str().map(str::to_string);
        let declared = match (&from, site.source) {
            (Some(from), Source::Module) => self
                .scope(site.eval_scope)
                .template
                .extension(from)
                .map(|d| d.alias.clone()),
            _ => None,
        };
        match declared {
            Some(from) => {
                let origin = Origin::new(
                    OriginKind::Inherited {
                        scope: site.eval_scope,
                        alias: from.clone(),
                        path: Vec::new(),
                    },
                    None,
                );
                self.check_same_extension(site.eval_scope, &from, site, &origin);
                Supplied {
                    names: self.effective(site.eval_scope, &from),
                    inherited: true,
                }
            }
            None => {
                let what = match (&from, site.source) {
                    (_, Source::ParametersFile) => {
                        "a root deployment has no parent config to inherit".to_string()
                    }
                    (Some(from), _) => {
                        format!("the deployment does not declare the extension alias '{from}'")
                    }
                    (None, _) => "the alias to inherit must be a literal string".to_string(),
                };
                self.report(
                    site.target.clone(),
                    None,
                    site.block,
                    format!(
                        "The config for extension alias '{alias}' inherits with type 'inherit', but {what}; name an alias the parent deployment declares, or write the config out."
                    ),
                );
                Supplied::default()
            }
        }
    }

    fn check_same_extension(&self, scope: ScopeId, from: &str, site: &ConfigSite, origin: &Origin) {
        let template = &self.scope(scope).template;
        let Some(source) = template.extension(from) else {
            return;
        };
        let ext = site.ext;
        if !ext.declared {
            return;
        }
        if source.name.eq_ignore_ascii_case(&ext.name) && source.version == ext.version {
            return;
        }
        self.report(
            site.target.clone(),
            origin.site.filter(|s| contains(site.block, *s)),
            site.block,
            format!(
                "Extension alias {} inherits the config of alias '{}' ({} {}); inherit only from an extension with the same name and version, or write the config out.",
                ext.label(),
                source.alias,
                source.name,
                source.version
            ),
        );
    }

    fn check_computed_keys(&self, obj: &AObject, whose: &str, target: &str) {
        for key in obj.computed.iter().filter(|k| k.runtime) {
            self.report(
                target.to_string(),
                key.site,
                None,
                format!(
                    "A property name in {whose} ('{}') depends on a runtime value (reference() or list*()); property names must be known before deployment: use a literal property name.",
                    key.text
                ),
            );
        }
    }

    /// The reserved `auth` object (and objects nested in it): every value in it is secure. Returns the property
    /// names it supplies.
    fn check_auth(
        &self,
        value: &AVal,
        path: &str,
        target: &str,
        site: &ConfigSite,
        member_site: Option<(FileKind, Span)>,
        depth: usize,
    ) -> Supplied {
        let alias = &site.ext.alias;
        match value {
            AVal::Object(obj)
                if depth < MAX_AUTH_DEPTH
                    && (seed003_auth_type(obj).is_some() || !is_wrapper(obj)) =>
            {
                // Seed 003: `auth: { type: 'UserProvided' | 'KeyVaultSecret', ... }`.
                if let Some(kind) = seed003_auth_type(obj) {
                    if kind.eq_ignore_ascii_case("UserProvided") {
                        self.report(
                            target.to_string(),
                            obj.get("type").and_then(|m| m.site).filter(|s| contains(site.block, *s)),
                            member_site.or(site.block),
                            format!(
                                "The auth of extension alias '{alias}' has type 'UserProvided': a stack cannot store user-provided credentials or ask for them when it deletes resources; put the secret in Key Vault and use auth type 'KeyVaultSecret' (or a keyVaultReference)."
                            ),
                        );
                    }
                    return Supplied::known(credential_properties(site.ext));
                }
                let mut names = Vec::new();
                for m in &obj.members {
                    names.push(m.key.clone());
                    let sub_path = format!("{path}.{}", m.key);
                    let sub_target = join_path(target, &m.key);
                    match &m.value {
                        AVal::Object(inner) if !is_wrapper(inner) => {
                            self.check_auth(
                                &m.value,
                                &sub_path,
                                &sub_target,
                                site,
                                m.site,
                                depth + 1,
                            );
                        }
                        _ => {
                            if !self.check_exclusive(&m.value, &sub_path, &sub_target, site, m.site)
                            {
                                let value = unwrap_item(&m.value);
                                self.check_item(&value, true, &sub_path, &sub_target, site, m.site);
                            }
                        }
                    }
                    if depth == 0 {
                        self.check_declared(&sub_path, &sub_target, site, m.site);
                    }
                }
                self.check_computed_keys(
                    obj,
                    &format!("the auth of extension alias '{alias}'"),
                    target,
                );
                for origin in &obj.tail {
                    self.check_origin(origin, true, path, target, site, member_site);
                }
                Supplied::known(names)
            }
            AVal::Alt(branches) => Supplied::intersect(
                branches
                    .iter()
                    .map(|(label, v)| {
                        self.check_auth(
                            &v.clone().with_via(label),
                            path,
                            target,
                            site,
                            member_site,
                            depth + 1,
                        )
                    })
                    .collect(),
            ),
            other => {
                if self.check_exclusive(other, path, target, site, member_site) {
                    return Supplied::known(credential_properties(site.ext));
                }
                let value = unwrap_item(other);
                self.check_item(&value, true, path, target, site, member_site);
                let origins = value.origins();
                // An inherited auth object brings the source's secure properties along.
                let inherited = !origins.is_empty()
                    && origins.iter().all(|o| {
                        matches!(&o.kind, OriginKind::Inherited { path, .. }
                            if path.first().is_some_and(|p| p.eq_ignore_ascii_case("auth")))
                    });
                if inherited {
                    Supplied {
                        names: None,
                        inherited: true,
                    }
                } else {
                    Supplied::known(credential_properties(site.ext))
                }
            }
        }
    }

    /// A property the extension's declared schema does not name (`path`: `name` or `auth.name`), seed 000's
    /// "dangling" config property. Only a typed schema is authoritative (see `ExtInfo::schema`).
    fn check_declared(
        &self,
        path: &str,
        target: &str,
        site: &ConfigSite,
        member_site: Option<(FileKind, Span)>,
    ) {
        let Some(schema) = &site.ext.schema else {
            return;
        };
        let name = path.rsplit('.').next().unwrap_or(path);
        if schema.iter().any(|p| p.eq_ignore_ascii_case(name)) {
            return;
        }
        self.report(
            target.to_string(),
            member_site,
            site.block,
            format!(
                "Extension alias {} declares no config property '{path}' (declared: {}); remove it or correct its name.",
                site.ext.label(),
                schema.join(", ")
            ),
        );
    }

    /// A config item naming more than one of `value`, `keyVaultReference` and `apiReference` (seed 000: mutually
    /// exclusive): reported, and `true` so its sources are not judged as well.
    fn check_exclusive(
        &self,
        value: &AVal,
        path: &str,
        target: &str,
        site: &ConfigSite,
        member_site: Option<(FileKind, Span)>,
    ) -> bool {
        let AVal::Object(obj) = value else {
            return false;
        };
        if !is_wrapper(obj) {
            return false;
        }
        let kinds = wrapper_kinds(obj.members.iter().map(|m| m.key.as_str()));
        if kinds.len() < 2 {
            return false;
        }
        self.report(
            target.to_string(),
            member_site,
            site.block,
            format!(
                "Config property '{path}' of extension alias '{}' holds {} at once; a config item holds exactly one of 'value', 'keyVaultReference' and 'apiReference': keep the one you mean.",
                site.ext.alias,
                kinds
                    .iter()
                    .map(|k| format!("'{k}'"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        );
        true
    }

    /// A literal `null` as written (`"auth": null`).
    fn is_null_literal(&self, value: &AVal) -> bool {
        let AVal::Leaf(origins) = value else {
            return false;
        };
        let [origin] = origins.as_slice() else {
            return false;
        };
        if origin.kind != OriginKind::Literal || origin.transformed_by.is_some() {
            return false;
        }
        let Some((file, span)) = origin.site else {
            return false;
        };
        let text = match file {
            FileKind::Template => Some(self.tracer.template_text),
            FileKind::Parameters => self.tracer.parameters_text,
        };
        text.and_then(|t| t.get(span.start as usize..span.end as usize))
            .is_some_and(|t| t.trim() == "null")
    }

    /// One config property value (already unwrapped).
    fn check_item(
        &self,
        value: &AVal,
        secure: bool,
        path: &str,
        target: &str,
        site: &ConfigSite,
        member_site: Option<(FileKind, Span)>,
    ) {
        for origin in value.origins() {
            self.check_origin(&origin, secure, path, target, site, member_site);
        }
    }

    fn check_origin(
        &self,
        origin: &Origin,
        secure: bool,
        path: &str,
        target: &str,
        site: &ConfigSite,
        member_site: Option<(FileKind, Span)>,
    ) {
        let Some(why) = self.judge(origin, secure) else {
            return;
        };
        let subject = if secure {
            format!(
                "Secure config property '{path}' of extension alias '{}'",
                site.ext.alias
            )
        } else {
            format!(
                "Config property '{path}' of extension alias '{}'",
                site.ext.alias
            )
        };
        let at = origin
            .site
            .filter(|s| contains(member_site.or(site.block), *s));
        self.report(
            target.to_string(),
            at,
            member_site.or(site.block),
            format!(
                "{subject} gets its value from {}; {why}",
                self.describe(origin)
            ),
        );
    }

    /// The tables: `None` when the origin is allowed for a stack deployment, else why not and what to use instead.
    fn judge(&self, origin: &Origin, secure: bool) -> Option<String> {
        const SECURE_FIX: &str = "for stacks use a Key Vault reference (keyVaultReference) or a list* output (such as listClusterAdminCredential(...).kubeconfigs[0].value) so cairn can store a directive instead of the secret.";
        const PLAIN_FIX: &str = "a stack stores non-secure config values and returns them from deployment GET, so use a literal, a non-secure parameter or a reference() output here, or move the property under 'auth' (or declare it secure) so cairn stores a directive instead.";
        let inherited = match &origin.kind {
            OriginKind::Inherited { scope, alias, path } => {
                Some((self.inherited_secure(*scope, alias, path), path.is_empty()))
            }
            _ => None,
        };
        if secure {
            if origin.transformed_by.is_some() {
                return Some(format!(
                    "only a direct Key Vault reference or list* output property can be stored as a directive; {SECURE_FIX}"
                ));
            }
            let why = match &origin.kind {
                OriginKind::KeyVaultReference
                | OriginKind::ListOutput { .. }
                | OriginKind::ApiReference => return None,
                OriginKind::Inherited { .. } => match inherited {
                    Some((Some(true), _)) => return None,
                    Some((_, true)) => "a whole config is not a property value;",
                    _ => "a non-secure inherited property is stored as a value, not re-fetched;",
                },
                OriginKind::Literal => "a stack would have to store the secret itself;",
                OriginKind::Parameter {
                    from_key_vault: true,
                    ..
                } => {
                    "a stack cannot re-read a parameter; give the Key Vault reference to the config property itself instead of through a parameter:"
                }
                OriginKind::Parameter { secure: true, .. } => {
                    "a stack can neither store a secure parameter nor ask for it again when it deletes resources;"
                }
                OriginKind::Parameter { .. } => {
                    "a parameter is resolved once and would be stored as plain text;"
                }
                OriginKind::ReferenceOutput { .. } => {
                    "a stack re-fetches secure values only through Key Vault references or list* calls;"
                }
                OriginKind::Runtime { .. } => {
                    "a deployment-time value is not a directive a stack can re-fetch;"
                }
                OriginKind::Unknown { .. } => "the value cannot be traced to a directive;",
            };
            return Some(format!("{why} {SECURE_FIX}"));
        }
        let why = match &origin.kind {
            OriginKind::Parameter { secure: true, .. } => {
                "a secure value must not reach a non-secure property:"
            }
            OriginKind::KeyVaultReference => {
                "stacks re-fetch only secure ('auth') properties, so the secret would be resolved and stored:"
            }
            OriginKind::ListOutput { .. } | OriginKind::ApiReference => {
                "stacks re-fetch only secure ('auth') properties, so the list* output would be resolved and stored:"
            }
            OriginKind::Unknown { limit: true, .. } => {
                "the analysis could not follow the value all the way, so it may hold a secret; simplify the expression so cairn can see where it comes from, then:"
            }
            OriginKind::Inherited { .. } => match inherited {
                Some((Some(true), _)) => {
                    "non-secure properties may not read secure ('auth') config:"
                }
                Some((_, true)) => "a whole config is not a property value:",
                _ => return None,
            },
            _ => return None,
        };
        Some(format!("{why} {PLAIN_FIX}"))
    }

    /// What an origin is, in words; never the value itself.
    fn describe(&self, origin: &Origin) -> String {
        let base = match &origin.kind {
            OriginKind::Literal => "a literal value".to_string(),
            OriginKind::Parameter {
                name,
                from_key_vault: true,
                ..
            } => format!(
                "the parameter '{name}' (a Key Vault reference in the parameters file, so secret)"
            ),
            OriginKind::Parameter {
                name, secure: true, ..
            } => format!("the secure parameter '{name}'"),
            OriginKind::Parameter { name, .. } => format!("the non-secure parameter '{name}'"),
            OriginKind::KeyVaultReference => "a Key Vault reference".to_string(),
            OriginKind::ListOutput { function } => format!("the output of {function}()"),
            OriginKind::ApiReference => "an apiReference directive".to_string(),
            OriginKind::ReferenceOutput { function } => format!("a {function}() output"),
            OriginKind::Inherited { alias, path, .. } => {
                let shown: Vec<&str> = path
                    .iter()
                    .map(String::as_str)
                    .filter(|p| {
                        !["value", "keyVaultReference"]
                            .iter()
                            .any(|w| w.eq_ignore_ascii_case(p))
                    })
                    .collect();
                if shown.is_empty() {
                    format!("the whole inherited config of extension alias '{alias}'")
                } else {
                    format!(
                        "the inherited config property '{}' of extension alias '{alias}'",
                        shown.join(".")
                    )
                }
            }
            OriginKind::Runtime { function } => format!("the deployment-time value {function}()"),
            OriginKind::Unknown { reason, .. } => {
                format!("a value the analysis cannot follow ({reason})")
            }
        };
        let base = match &origin.transformed_by {
            Some(f) => format!("a value computed by {f} from {base}"),
            None => base,
        };
        if origin.via.is_empty() {
            base
        } else {
            format!("{base}, via {}", origin.via.join(" → "))
        }
    }
}

/// A wrapper item (`{value}`, `{keyVaultReference}`, `{apiReference}` and the seed forms) rather than a raw object:
/// the engine's rule (`cairn_template::config::is_item_keys`).
fn is_wrapper(obj: &AObject) -> bool {
    obj.computed.is_empty()
        && obj.tail.is_empty()
        && is_item_keys(obj.members.iter().map(|m| m.key.as_str()))
}

/// Replaces wrapper items by what they carry: the value, or a directive origin.
fn unwrap_item(value: &AVal) -> AVal {
    match value {
        AVal::Object(obj) if is_wrapper(obj) => {
            let member = |k: &str| obj.get(k);
            let directive = |kind: OriginKind, m: &AMember| AVal::leaf(Origin::new(kind, m.site));
            if let Some(m) = member("keyVaultReference").or_else(|| member("reference")) {
                return directive(OriginKind::KeyVaultReference, m);
            }
            if let Some(m) = member("apiReference")
                .or_else(|| member("runtimeReference"))
                .or_else(|| member("apiCall"))
                .or_else(|| member("armApiCall"))
            {
                return directive(OriginKind::ApiReference, m);
            }
            let kind = member("type").and_then(|m| m.value.as_literal_str());
            match (kind, member("value")) {
                (Some(k), Some(m)) if k.eq_ignore_ascii_case("keyVaultReference") => {
                    directive(OriginKind::KeyVaultReference, m)
                }
                (_, Some(m)) => m.value.clone(),
                (_, None) => value.clone(),
            }
        }
        AVal::Alt(branches) => AVal::Alt(
            branches
                .iter()
                .map(|(l, v)| (l.clone(), unwrap_item(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Seed 003 `auth: { "type": "UserProvided" | "KeyVaultSecret", ... }`: the type.
fn seed003_auth_type(obj: &AObject) -> Option<&str> {
    let kind = obj.get("type")?.value.as_literal_str()?;
    (kind.eq_ignore_ascii_case("UserProvided") || kind.eq_ignore_ascii_case("KeyVaultSecret"))
        .then_some(kind)
}

/// `{ "type": "object" | "inherit", "value": ... }` (seed 002): the type.
fn typed_alias_entry(obj: &AObject) -> Option<&str> {
    if obj.members.len() != 2 || obj.get("value").is_none() {
        return None;
    }
    let kind = obj.get("type")?.value.as_literal_str()?;
    (kind.eq_ignore_ascii_case("object") || kind.eq_ignore_ascii_case("inherit")).then_some(kind)
}

/// What an `auth` given as one credential (seed 003's form, or a single item) supplies: the extension's required
/// secure properties, as the engine counts them.
fn credential_properties(ext: &ExtInfo) -> Vec<String> {
    ext.required
        .iter()
        .filter(|r| ext.is_secure(r))
        .cloned()
        .collect()
}

fn dedup_names(names: &mut Vec<String>) {
    let mut seen: Vec<String> = Vec::new();
    names.retain(|n| {
        let lower = n.to_ascii_lowercase();
        if seen.contains(&lower) {
            false
        } else {
            seen.push(lower);
            true
        }
    });
}

/// True when `inner` lies within `outer` (same file).
fn contains(outer: Option<(FileKind, Span)>, inner: (FileKind, Span)) -> bool {
    outer.is_some_and(|(file, span)| {
        file == inner.0 && span.start <= inner.1.start && inner.1.end <= span.end
    })
}
