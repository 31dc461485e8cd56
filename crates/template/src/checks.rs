//! Static checks on a raw template tree, before any evaluation: header, section shapes, duplicate names, ARM
//! limits, expression syntax and symbol references, lambda placement, copy counts and literal `dependsOn` entries.
//!
//! Everything here is decided from the JSON alone, so the rules stay on the safe side: a check that depends on a
//! value only known after evaluation (a resource name built by an expression, a `dependsOn` resource ID) is
//! skipped rather than guessed. Nested deployments with `expressionEvaluationOptions.scope: inner` (Bicep modules)
//! are checked as templates of their own; outer-scope nested templates are checked with the parent's symbols.
//!
//! Codes: ARM reports all of these as `InvalidTemplate` ("Deployment template validation failed: ..."), except
//! that a literal copy count out of range keeps the evaluator's `InvalidCopyCount`. Header findings that ARM does
//! not enforce (a `contentVersion` that is not four numbers) are warnings.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use cairn_expr::{Expr, ExprKind};
use cairn_json::{Member, Node, NodeKind, Span};

use crate::diagnostics::{Diagnostic, join_index, join_path};
use crate::types;

/// ARM's limits (reference `template-language.md` §4).
pub const MAX_PARAMETERS: usize = 256;
pub const MAX_VARIABLES: usize = 256;
pub const MAX_OUTPUTS: usize = 64;
/// Resource declarations in one template, before copy expansion (the expanded count is checked by `expand`).
pub const MAX_DECLARED_RESOURCES: usize = 800;
/// Characters (UTF-16 units, as .NET counts) in one template expression string.
pub const MAX_EXPRESSION_LENGTH: usize = 24_576;
/// Bytes of template text. Newer ARM measures the compressed template against this limit; the raw text is a
/// stricter, predictable stand-in.
pub const MAX_TEMPLATE_BYTES: usize = 4 * 1024 * 1024;

/// `languageVersion` values ARM and Bicep use.
pub const LANGUAGE_VERSIONS: [&str; 4] = ["1.0", "2.0", "2.1-experimental", "2.2-experimental"];

/// The deployment template schema files (`$schema` must name one of them).
const SCHEMA_FILES: [&str; 4] = [
    "deploymenttemplate.json",
    "subscriptiondeploymenttemplate.json",
    "managementgroupdeploymenttemplate.json",
    "tenantdeploymenttemplate.json",
];

/// Functions whose arguments may be `lambda(...)` (reference §2.3).
const LAMBDA_TAKERS: [&str; 7] = [
    "filter",
    "map",
    "reduce",
    "sort",
    "toObject",
    "mapValues",
    "groupBy",
];

/// Functions ARM allows only in a parameter's `defaultValue`.
const DEFAULT_VALUE_ONLY: [&str; 2] = ["utcNow", "newGuid"];

/// Functions ARM refuses in a parameter's `defaultValue` (besides `variables`), reference §1.2/§1.4.
const NOT_IN_DEFAULT_VALUE: [&str; 2] = ["reference", "references"];

/// ARM's documented built-in functions (reference §3). The evaluator's table
/// ([`cairn_eval::functions::lookup`]) is consulted first; this list keeps the static check independent of how
/// complete that table is at any moment, so a template is never refused here for calling a real ARM function.
#[rustfmt::skip]
const ARM_FUNCTIONS: &[&str] = &[
    // array and object
    "array", "concat", "contains", "createArray", "createObject", "distinct", "empty", "first", "flatten", "indexOf",
    "indexFromEnd", "tryIndexFromEnd", "intersection", "items", "json", "last", "lastIndexOf", "length", "max",
    "min", "null", "objectKeys", "range", "shallowMerge", "skip", "take", "tryGet", "union",
    // lambdas
    "filter", "groupBy", "lambda", "lambdaVariables", "map", "mapValues", "reduce", "sort", "toObject",
    // comparison and logic
    "coalesce", "equals", "greater", "greaterOrEquals", "less", "lessOrEquals", "and", "bool", "false", "if", "not",
    "or", "true",
    // numeric
    "add", "copyIndex", "div", "float", "int", "mod", "mul", "sub",
    // date
    "dateTimeAdd", "dateTimeFromEpoch", "dateTimeToEpoch", "utcNow",
    // deployment and scope
    "deployment", "deployer", "environment", "parameters", "variables", "managementGroup", "resourceGroup",
    "subscription", "tenant",
    // resource
    "extensionResourceId", "managementGroupResourceId", "pickZones", "providers", "reference", "references",
    "resourceId", "resourceInfo", "roleDefinitions", "subscriptionResourceId", "tenantResourceId", "toLogicalZone",
    "toLogicalZones",
    "toPhysicalZone", "toPhysicalZones",
    // string
    "base64", "base64ToJson", "base64ToString", "buildUri", "dataUri", "dataUriToString", "endsWith", "format",
    "guid", "join", "like", "newGuid", "padLeft", "parseUri", "replace", "split", "startsWith", "string",
    "substring", "toLower", "toUpper", "trim", "uniqueString", "uri", "uriComponent", "uriComponentToString",
    // CIDR
    "cidrHost", "cidrSubnet", "parseCidr",
    // Bicep-emitted extras
    "fail", "externalInputs", "extensions", "extensionConfigs",
];

fn is_known_function(name: &str) -> bool {
    cairn_eval::functions::lookup(name).is_some()
        || ARM_FUNCTIONS.iter().any(|f| f.eq_ignore_ascii_case(name))
        || name.len() > 4
            && name
                .get(..4)
                .is_some_and(|p| p.eq_ignore_ascii_case("list"))
}

/// ` Did you mean 'x'?` for the built-in or user-defined function closest to `name`, or nothing.
fn known_function_hint(name: &str, scope: &Scope) -> String {
    let mut names: Vec<&str> = cairn_eval::functions::names();
    names.extend(ARM_FUNCTIONS.iter().copied());
    let user: Vec<&str> = scope.functions.0.values().map(String::as_str).collect();
    names.extend(user.iter().copied());
    cairn_eval::suggest::did_you_mean(name, names)
}

fn one_of(list: &[&str], name: &str) -> bool {
    list.iter().any(|f| f.eq_ignore_ascii_case(name))
}

/// JSON nesting deeper than this is not walked (the JSON parser already refuses deeper input).
const MAX_WALK_DEPTH: usize = 512;

/// Longest expression text quoted in a message.
const MAX_QUOTED_EXPRESSION: usize = 120;

const CODE: &str = "InvalidTemplate";

/// Checks the size of the template text (in bytes) against ARM's 4 MB limit.
pub fn check_size(len: usize) -> Option<Diagnostic> {
    (len > MAX_TEMPLATE_BYTES).then(|| {
        Diagnostic::error(
            CODE,
            format!(
                "The template is {len} bytes long, which exceeds the limit of {MAX_TEMPLATE_BYTES} bytes (4 MB)."
            ),
            "",
        )
    })
}

/// Runs every static check on a parsed template (the root of the JSON document).
pub fn check_template(root: &Node) -> Vec<Diagnostic> {
    let mut checker = Checker { diags: Vec::new() };
    checker.template(root, "", None);
    checker.diags
}

/// The names expressions may refer to, lower-cased (ARM compares them ignoring case).
#[derive(Clone, Debug, Default)]
struct Scope {
    parameters: Names,
    variables: Names,
    functions: Names,
}

/// Declared names, matched ignoring case, kept as written for "did you mean" suggestions.
#[derive(Clone, Debug, Default)]
struct Names(HashMap<String, String>);

impl Names {
    /// Declares `name`; `false` when it was declared already (in any case).
    fn insert(&mut self, name: &str) -> bool {
        match self.0.entry(name.to_ascii_lowercase()) {
            Entry::Occupied(_) => false,
            Entry::Vacant(slot) => {
                slot.insert(name.to_string());
                true
            }
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.0.contains_key(&name.to_ascii_lowercase())
    }

    fn extend(&mut self, other: &Names) {
        for (key, name) in &other.0 {
            self.0.entry(key.clone()).or_insert_with(|| name.clone());
        }
    }

    /// ` Did you mean 'x'?` for the declared name closest to `name`, or nothing.
    fn did_you_mean(&self, name: &str) -> String {
        let mut names: Vec<&str> = self.0.values().map(String::as_str).collect();
        // Sorted, so equally close names suggest the same one on every run.
        names.sort_unstable();
        cairn_eval::suggest::did_you_mean(name, names)
    }
}

impl Scope {
    fn merge(&mut self, other: &Scope) {
        self.parameters.extend(&other.parameters);
        self.variables.extend(&other.variables);
        self.functions.extend(&other.functions);
    }
}

/// Where an expression is written; decides what it may refer to.
#[derive(Clone, Copy)]
enum Place<'s> {
    /// Resources, variables, outputs and everything else evaluated in the template's scope.
    Body,
    /// A parameter's `defaultValue`: other parameters, `utcNow()`/`newGuid()`, no variables or `reference()`.
    ParameterDefault,
    /// A user-defined function's `output.value`: `parameters()` names the function's own parameters.
    Function { parameters: &'s Names },
}

/// Everything an expression check needs to know about its surroundings.
struct Site<'a> {
    scope: &'a Scope,
    place: Place<'a>,
    /// The JSON path of the string (for the diagnostic target).
    path: &'a str,
    /// The JSON string node's span.
    span: Span,
    /// The whole string, for messages.
    text: &'a str,
}

/// One resource declaration, as far as `dependsOn` checks need it.
struct ResourceFacts {
    symbolic_name: Option<String>,
    /// Full type (`Ns/parent/child`), when literal.
    full_type: Option<String>,
    /// Full name (`parent/child`), when literal.
    full_name: Option<String>,
    copy_name: Option<String>,
}

struct Checker {
    diags: Vec<Diagnostic>,
}

impl Checker {
    fn error(&mut self, node_span: Span, path: &str, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(CODE, message, path).with_span(node_span));
    }

    fn warning(&mut self, node_span: Span, path: &str, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::warning(CODE, message, path).with_span(node_span));
    }

    /// Checks one template: the root, or a nested deployment's `properties.template` at `base`. `inherited` is
    /// the parent's scope for an outer-scope nested template.
    fn template(&mut self, root: &Node, base: &str, inherited: Option<&Scope>) {
        let Some(members) = root.as_object() else {
            self.error(
                root.span,
                base,
                format!(
                    "The template must be a JSON object, not {}.",
                    root.type_name()
                ),
            );
            return;
        };
        let symbolic = self.header(root, base);
        self.section_shapes(root, members, base);
        let definitions = root
            .get_ci("definitions")
            .filter(|d| d.as_object().is_some());

        let mut scope = Scope::default();
        self.declare_parameters(root, base, definitions, &mut scope);
        self.declare_variables(root, base, &mut scope);
        let functions = self.declare_functions(root, base, definitions, &mut scope);
        self.check_definitions(definitions, base);
        if let Some(parent) = inherited {
            scope.merge(parent);
        }

        // Expressions, section by section.
        if let Some(params) = root.get_ci("parameters").and_then(Node::as_object) {
            for p in params {
                if let Some(default) = p.value.get_ci("defaultValue") {
                    let path = join_path(
                        &join_path(&join_path(base, "parameters"), &p.key),
                        "defaultValue",
                    );
                    self.walk(default, &path, &scope, Place::ParameterDefault, 0);
                }
            }
        }
        if let Some(vars) = root.get_ci("variables").and_then(Node::as_object) {
            for v in vars {
                let path = join_path(&join_path(base, "variables"), &v.key);
                self.walk(&v.value, &path, &scope, Place::Body, 0);
            }
        }
        for (parameters, value, path) in &functions {
            self.walk(value, path, &scope, Place::Function { parameters }, 0);
        }
        self.resources(root, base, &scope, symbolic);
        self.outputs(root, base, definitions, &scope);
        for section in ["asserts", "imports", "extensions", "providers"] {
            if let Some(node) = root.get_ci(section) {
                self.walk(node, &join_path(base, section), &scope, Place::Body, 0);
            }
        }
    }

    /// `$schema`, `contentVersion`, `languageVersion`; returns whether resources use symbolic names (2.x).
    fn header(&mut self, root: &Node, base: &str) -> bool {
        for required in ["$schema", "contentVersion", "resources"] {
            if root.get_ci(required).is_none() {
                self.error(
                    root.span,
                    &join_path(base, required),
                    format!("Required property '{required}' not found in JSON."),
                );
            }
        }
        if let Some(schema) = root.get_ci("$schema") {
            let path = join_path(base, "$schema");
            match schema.as_str() {
                Some(url) if is_template_schema(url) => {}
                Some(url) => self.error(
                    schema.span,
                    &path,
                    format!(
                        "The template schema '{url}' is not supported. It must be a deployment template schema such as 'https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#'."
                    ),
                ),
                None => self.error(schema.span, &path, "The template '$schema' must be a string."),
            }
        }
        if let Some(version) = root.get_ci("contentVersion") {
            let path = join_path(base, "contentVersion");
            match version.as_str() {
                Some(v) if is_four_part_version(v) => {}
                Some(v) => self.warning(
                    version.span,
                    &path,
                    format!(
                        "The template content version '{v}' is not of the form 'major.minor.build.revision' (such as '1.0.0.0')."
                    ),
                ),
                None => self.error(
                    version.span,
                    &path,
                    "The template 'contentVersion' must be a string such as '1.0.0.0'.",
                ),
            }
        }
        let Some(language) = root.get_ci("languageVersion") else {
            return false;
        };
        let path = join_path(base, "languageVersion");
        match language.as_str() {
            Some(v) if LANGUAGE_VERSIONS.iter().any(|k| k.eq_ignore_ascii_case(v)) => v != "1.0",
            Some(v) => {
                self.error(
                    language.span,
                    &path,
                    format!(
                        "The template language version '{v}' is not supported. Supported versions are '{}'.",
                        LANGUAGE_VERSIONS.join(", ")
                    ),
                );
                // Still check the rest in the shape the resources section has.
                root.get_ci("resources")
                    .is_some_and(|r| r.as_object().is_some())
            }
            None => {
                self.error(
                    language.span,
                    &path,
                    "The template 'languageVersion' must be a string.",
                );
                false
            }
        }
    }

    /// Sections of the wrong JSON kind.
    fn section_shapes(&mut self, root: &Node, members: &[Member], base: &str) {
        let expected: [(&str, &str); 7] = [
            ("parameters", "object"),
            ("variables", "object"),
            ("definitions", "object"),
            ("outputs", "object"),
            ("functions", "array"),
            ("metadata", "object"),
            ("asserts", "object"),
        ];
        for (name, kind) in expected {
            let Some(node) = root.get_ci(name) else {
                continue;
            };
            let ok = match kind {
                "object" => node.as_object().is_some(),
                _ => node.as_array().is_some(),
            };
            if !ok {
                self.error(
                    node.span,
                    &join_path(base, name),
                    format!(
                        "The template '{name}' section must be a JSON {kind}, not {}.",
                        node.type_name()
                    ),
                );
            }
        }
        if let Some(resources) = root.get_ci("resources")
            && resources.as_array().is_none()
            && resources.as_object().is_none()
        {
            self.error(
                resources.span,
                &join_path(base, "resources"),
                format!(
                    "The template 'resources' section must be a JSON array (or an object of symbolic names with languageVersion 2.0), not {}.",
                    resources.type_name()
                ),
            );
        }
        // A section spelled twice (possibly in different case) is ambiguous.
        self.duplicates(members, base, "template section");
    }

    /// Reports members whose names repeat, ignoring case (the span is the repeated key's).
    fn duplicates(&mut self, members: &[Member], base: &str, what: &str) {
        let mut seen: HashMap<String, &str> = HashMap::with_capacity(members.len());
        for m in members {
            match seen.entry(m.key.to_ascii_lowercase()) {
                Entry::Occupied(first) => {
                    let first = *first.get();
                    self.error(
                        m.key_span,
                        &join_path(base, &m.key),
                        format!(
                            "The {what} '{}' is declared more than once (names are not case-sensitive; first declared as '{first}').",
                            m.key
                        ),
                    );
                }
                Entry::Vacant(slot) => {
                    slot.insert(&m.key);
                }
            }
        }
    }

    fn declare_parameters(
        &mut self,
        root: &Node,
        base: &str,
        definitions: Option<&Node>,
        scope: &mut Scope,
    ) {
        let Some(params) = root.get_ci("parameters").and_then(Node::as_object) else {
            return;
        };
        let section = join_path(base, "parameters");
        self.duplicates(params, &section, "template parameter");
        if params.len() > MAX_PARAMETERS {
            let span = root
                .get_ci("parameters")
                .map(|n| n.span)
                .unwrap_or_default();
            self.error(
                span,
                &section,
                format!(
                    "The number of template parameters ({}) exceeds the limit of {MAX_PARAMETERS}.",
                    params.len()
                ),
            );
        }
        for p in params {
            scope.parameters.insert(&p.key);
            let path = join_path(&section, &p.key);
            self.declaration(&p.value, &path, definitions, "template parameter", &p.key);
        }
    }

    /// A parameter or output declaration: an object with `type` or `$ref`, and a well-formed type.
    fn declaration(
        &mut self,
        node: &Node,
        path: &str,
        definitions: Option<&Node>,
        what: &str,
        name: &str,
    ) {
        if node.as_object().is_none() {
            self.error(
                node.span,
                path,
                format!(
                    "The {what} '{name}' must be a JSON object, not {}.",
                    node.type_name()
                ),
            );
            return;
        }
        // A declaration with neither `type` nor `$ref` takes any value: Bicep's resource-derived types
        // (`resourceInput<'Ns/type@version'>.properties...`) compile to `metadata` alone, and ARM deploys them.
        self.diags
            .extend(types::check_schema(node, definitions, path));
    }

    fn declare_variables(&mut self, root: &Node, base: &str, scope: &mut Scope) {
        let Some(vars) = root.get_ci("variables").and_then(Node::as_object) else {
            return;
        };
        let section = join_path(base, "variables");
        // Plain variables and the names of top-level copy loops share one namespace.
        let mut declared: Vec<(String, Span, String)> = Vec::new();
        for v in vars {
            if !v.key.eq_ignore_ascii_case("copy") {
                declared.push((v.key.clone(), v.key_span, join_path(&section, &v.key)));
                continue;
            }
            let copy_path = join_path(&section, &v.key);
            let Some(loops) = v.value.as_array() else {
                self.error(
                    v.value.span,
                    &copy_path,
                    format!(
                        "The variables 'copy' property must be a JSON array, not {}.",
                        v.value.type_name()
                    ),
                );
                continue;
            };
            for (i, item) in loops.iter().enumerate() {
                let path = join_index(&copy_path, i);
                match item.get_ci("name").and_then(Node::as_str) {
                    Some(name) => declared.push((name.to_string(), item.span, path.clone())),
                    None => self.error(
                        item.span,
                        &path,
                        "A variable copy loop must have a string 'name'.",
                    ),
                }
                for key in ["count", "input"] {
                    if item.get_ci(key).is_none() {
                        self.error(
                            item.span,
                            &join_path(&path, key),
                            format!("A variable copy loop must have '{key}'."),
                        );
                    }
                }
                if let (Some(count), Some(name)) = (
                    item.get_ci("count"),
                    item.get_ci("name").and_then(Node::as_str),
                ) {
                    self.copy_count(name, count, &join_path(&path, "count"));
                }
            }
        }
        let mut seen: HashMap<String, &str> = HashMap::with_capacity(declared.len());
        for (name, span, path) in &declared {
            match seen.entry(name.to_ascii_lowercase()) {
                Entry::Occupied(first) => {
                    let first = *first.get();
                    self.error(
                        *span,
                        path,
                        format!(
                            "The template variable '{name}' is declared more than once (names are not case-sensitive; first declared as '{first}')."
                        ),
                    );
                }
                Entry::Vacant(slot) => {
                    slot.insert(name);
                }
            }
            scope.variables.insert(name);
        }
        if declared.len() > MAX_VARIABLES {
            let span = root.get_ci("variables").map(|n| n.span).unwrap_or_default();
            self.error(
                span,
                &section,
                format!(
                    "The number of template variables ({}) exceeds the limit of {MAX_VARIABLES}.",
                    declared.len()
                ),
            );
        }
    }

    /// Declares the user-defined functions; returns each function's parameter names, output value and its path.
    fn declare_functions<'n>(
        &mut self,
        root: &'n Node,
        base: &str,
        definitions: Option<&Node>,
        scope: &mut Scope,
    ) -> Vec<(Names, &'n Node, String)> {
        let mut bodies = Vec::new();
        let Some(namespaces) = root.get_ci("functions").and_then(Node::as_array) else {
            return bodies;
        };
        let section = join_path(base, "functions");
        for (i, ns) in namespaces.iter().enumerate() {
            let ns_path = join_index(&section, i);
            let Some(namespace) = ns.get_ci("namespace").and_then(Node::as_str) else {
                self.error(
                    ns.span,
                    &join_path(&ns_path, "namespace"),
                    "A function namespace must have a string 'namespace'.",
                );
                continue;
            };
            let members_path = join_path(&ns_path, "members");
            let Some(members) = ns.get_ci("members").and_then(Node::as_object) else {
                self.error(
                    ns.span,
                    &members_path,
                    format!("The function namespace '{namespace}' must have a 'members' object."),
                );
                continue;
            };
            for m in members {
                let fpath = join_path(&members_path, &m.key);
                let full_name = format!("{namespace}.{}", m.key);
                // Several entries may share a namespace; a function name must still be unique.
                if !scope.functions.insert(&full_name) {
                    self.error(
                        m.key_span,
                        &fpath,
                        format!(
                            "The function '{full_name}' is declared more than once (names are not case-sensitive)."
                        ),
                    );
                }
                let mut parameters = Names::default();
                match m.value.get_ci("parameters") {
                    None => {}
                    Some(ps) => match ps.as_array() {
                        Some(ps) => {
                            for (j, p) in ps.iter().enumerate() {
                                let ppath = join_index(&join_path(&fpath, "parameters"), j);
                                let Some(name) = p.get_ci("name").and_then(Node::as_str) else {
                                    self.error(
                                        p.span,
                                        &join_path(&ppath, "name"),
                                        "A function parameter must have a string 'name'.",
                                    );
                                    continue;
                                };
                                if !parameters.insert(name) {
                                    self.error(
                                        p.span,
                                        &ppath,
                                        format!("The function parameter '{name}' is declared more than once (names are not case-sensitive)."),
                                    );
                                }
                                self.declaration(
                                    p,
                                    &ppath,
                                    definitions,
                                    "function parameter",
                                    name,
                                );
                            }
                        }
                        None => self.error(
                            ps.span,
                            &join_path(&fpath, "parameters"),
                            "The function 'parameters' must be a JSON array.",
                        ),
                    },
                }
                let opath = join_path(&fpath, "output");
                match m.value.get_ci("output") {
                    Some(output) => {
                        self.declaration(output, &opath, definitions, "function output of", &m.key);
                        match output.get_ci("value") {
                            Some(value) => {
                                bodies.push((parameters, value, join_path(&opath, "value")))
                            }
                            None => self.error(
                                output.span,
                                &join_path(&opath, "value"),
                                "A user-defined function must have 'output.value'.",
                            ),
                        }
                    }
                    None => self.error(
                        m.value.span,
                        &opath,
                        "A user-defined function must have an 'output'.",
                    ),
                }
            }
        }
        bodies
    }

    fn check_definitions(&mut self, definitions: Option<&Node>, base: &str) {
        let Some(members) = definitions.and_then(Node::as_object) else {
            return;
        };
        let section = join_path(base, "definitions");
        self.duplicates(members, &section, "type definition");
        for d in members {
            self.diags.extend(types::check_schema(
                &d.value,
                definitions,
                &join_path(&section, &d.key),
            ));
        }
    }

    fn outputs(&mut self, root: &Node, base: &str, definitions: Option<&Node>, scope: &Scope) {
        let Some(outputs) = root.get_ci("outputs").and_then(Node::as_object) else {
            return;
        };
        let section = join_path(base, "outputs");
        self.duplicates(outputs, &section, "template output");
        if outputs.len() > MAX_OUTPUTS {
            let span = root.get_ci("outputs").map(|n| n.span).unwrap_or_default();
            self.error(
                span,
                &section,
                format!(
                    "The number of template outputs ({}) exceeds the limit of {MAX_OUTPUTS}.",
                    outputs.len()
                ),
            );
        }
        for o in outputs {
            let path = join_path(&section, &o.key);
            self.declaration(&o.value, &path, definitions, "template output", &o.key);
            if o.value.as_object().is_none() {
                continue;
            }
            let value = o.value.get_ci("value");
            let copy = o.value.get_ci("copy");
            if value.is_none() && copy.is_none() {
                self.error(
                    o.value.span,
                    &path,
                    format!(
                        "The template output '{}' must have a 'value' or a 'copy'.",
                        o.key
                    ),
                );
            }
            if let Some(copy) = copy {
                let cpath = join_path(&path, "copy");
                match copy.get_ci("count") {
                    Some(count) => self.copy_count(&o.key, count, &join_path(&cpath, "count")),
                    None => self.error(
                        copy.span,
                        &join_path(&cpath, "count"),
                        "An output copy loop must have a 'count'.",
                    ),
                }
                if copy.get_ci("input").is_none() {
                    self.error(
                        copy.span,
                        &join_path(&cpath, "input"),
                        "An output copy loop must have an 'input'.",
                    );
                }
            }
            for key in ["value", "copy", "condition"] {
                if let Some(node) = o.value.get_ci(key) {
                    self.walk(node, &join_path(&path, key), scope, Place::Body, 0);
                }
            }
        }
    }

    /// A literal copy count must be an integer in 0..=800 (an expression is checked when evaluated).
    fn copy_count(&mut self, name: &str, count: &Node, path: &str) {
        if count.as_str().is_some_and(|s| {
            matches!(
                cairn_expr::classify(s),
                cairn_expr::TemplateString::Expression { .. }
            )
        }) {
            return;
        }
        if let Err(e) = cairn_eval::copy_count(name, &cairn_eval::Value::from_node(count)) {
            let d = Diagnostic::error(e.code(), e.to_string(), path).with_span(count.span);
            self.diags.push(d);
        }
    }

    fn resources(&mut self, root: &Node, base: &str, scope: &Scope, symbolic: bool) {
        let Some(section) = root.get_ci("resources") else {
            return;
        };
        let section_path = join_path(base, "resources");
        let mut facts = Vec::new();
        let mut depends = Vec::new();
        match &section.kind {
            NodeKind::Array(items) => {
                if symbolic {
                    self.error(
                        section.span,
                        &section_path,
                        "With languageVersion 2.0 the 'resources' section must be an object of symbolic names, not an array.",
                    );
                }
                for (i, item) in items.iter().enumerate() {
                    let path = join_index(&section_path, i);
                    self.resource(item, &path, None, scope, &mut facts, &mut depends);
                }
            }
            NodeKind::Object(members) => {
                if !symbolic {
                    self.error(
                        section.span,
                        &section_path,
                        "Resources keyed by symbolic names (an object) need \"languageVersion\": \"2.0\"; without it 'resources' must be an array.",
                    );
                }
                self.duplicates(members, &section_path, "resource symbolic name");
                for m in members {
                    let path = join_path(&section_path, &m.key);
                    let first = facts.len();
                    self.resource(&m.value, &path, None, scope, &mut facts, &mut depends);
                    if let Some(f) = facts.get_mut(first) {
                        f.symbolic_name = Some(m.key.clone());
                    }
                }
            }
            _ => return,
        }
        if facts.len() > MAX_DECLARED_RESOURCES {
            self.error(
                section.span,
                &section_path,
                format!(
                    "The template declares {} resources, which exceeds the limit of {MAX_DECLARED_RESOURCES}.",
                    facts.len()
                ),
            );
        }
        let symbolic_names = matches!(section.kind, NodeKind::Object(_));
        for (entry, path) in depends {
            self.depends_on_entry(entry, &path, &facts, symbolic_names);
        }
    }

    /// One resource declaration (and its 1.0 child resources).
    fn resource<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        parent: Option<(&Option<String>, &Option<String>)>,
        scope: &Scope,
        facts: &mut Vec<ResourceFacts>,
        depends: &mut Vec<(&'n Node, String)>,
    ) {
        let Some(members) = node.as_object() else {
            self.error(
                node.span,
                path,
                format!(
                    "A resource must be a JSON object, not {}.",
                    node.type_name()
                ),
            );
            return;
        };
        let type_node = node.get_ci("type");
        let ty = type_node.and_then(Node::as_str);
        match type_node {
            None => self.error(
                node.span,
                &join_path(path, "type"),
                "Required property 'type' not found in the resource.",
            ),
            Some(t) if t.as_str().is_none() => self.error(
                t.span,
                &join_path(path, "type"),
                "The resource 'type' must be a string.",
            ),
            _ => {}
        }
        let literal = |n: Option<&Node>| {
            n.and_then(Node::as_str)
                .filter(|s| {
                    matches!(
                        cairn_expr::classify(s),
                        cairn_expr::TemplateString::Literal(_)
                    )
                })
                .map(|s| cairn_expr::classify(s).literal_text())
        };
        let own_type = literal(type_node);
        let own_name = literal(node.get_ci("name"));
        let (full_type, full_name) = match parent {
            None => (own_type, own_name),
            Some((parent_type, parent_name)) => (
                match (parent_type, own_type) {
                    // A child's type is relative unless it is written in full.
                    (Some(p), Some(c)) if !c.contains('/') => Some(format!("{p}/{c}")),
                    (_, Some(c)) if c.contains('/') => Some(c),
                    _ => None,
                },
                match (parent_name, own_name) {
                    (Some(p), Some(c)) if !c.contains('/') => Some(format!("{p}/{c}")),
                    (_, Some(c)) if c.contains('/') => Some(c),
                    _ => None,
                },
            ),
        };
        let copy = node.get_ci("copy");
        let copy_name = copy
            .and_then(|c| c.get_ci("name"))
            .and_then(Node::as_str)
            .map(str::to_string);
        facts.push(ResourceFacts {
            symbolic_name: None,
            full_type: full_type.clone(),
            full_name: full_name.clone(),
            copy_name,
        });

        if let Some(copy) = copy {
            let cpath = join_path(path, "copy");
            if parent.is_some() {
                self.error(
                    copy.span,
                    &cpath,
                    "Copying nested resources is not supported: move the child resource to the top level (with a full type and name) to use 'copy'.",
                );
            }
            match copy.as_object() {
                Some(_) => {
                    let name = copy.get_ci("name").and_then(Node::as_str).unwrap_or("copy");
                    if copy.get_ci("name").and_then(Node::as_str).is_none() {
                        self.error(
                            copy.span,
                            &join_path(&cpath, "name"),
                            "A resource copy loop must have a string 'name'.",
                        );
                    }
                    match copy.get_ci("count") {
                        Some(count) => self.copy_count(name, count, &join_path(&cpath, "count")),
                        None => self.error(
                            copy.span,
                            &join_path(&cpath, "count"),
                            "A resource copy loop must have a 'count'.",
                        ),
                    }
                }
                None => self.error(
                    copy.span,
                    &cpath,
                    "The resource 'copy' property must be a JSON object.",
                ),
            }
        }

        if let Some(deps) = node.get_ci("dependsOn") {
            let dpath = join_path(path, "dependsOn");
            match deps.as_array() {
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        depends.push((item, join_index(&dpath, i)));
                    }
                }
                None => self.error(
                    deps.span,
                    &dpath,
                    "The resource 'dependsOn' property must be a JSON array.",
                ),
            }
        }

        let is_deployment =
            ty.is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
        for m in members {
            let mpath = join_path(path, &m.key);
            let key = m.key.to_ascii_lowercase();
            match key.as_str() {
                // Free text, never evaluated.
                "comments" => {}
                // Children are declarations of their own.
                "resources" => {}
                "properties" if is_deployment => {
                    self.deployment_properties(&m.value, &mpath, scope)
                }
                _ => self.walk(&m.value, &mpath, scope, Place::Body, 0),
            }
        }

        if let Some(children) = node.get_ci("resources") {
            let cpath = join_path(path, "resources");
            match children.as_array() {
                Some(items) => {
                    for (i, child) in items.iter().enumerate() {
                        self.resource(
                            child,
                            &join_index(&cpath, i),
                            Some((&full_type, &full_name)),
                            scope,
                            facts,
                            depends,
                        );
                    }
                }
                None => self.error(
                    children.span,
                    &cpath,
                    "Nested 'resources' must be a JSON array.",
                ),
            }
        }
    }

    /// `properties` of a nested deployment: the inline template is a template of its own.
    fn deployment_properties(&mut self, props: &Node, path: &str, scope: &Scope) {
        let Some(members) = props.as_object() else {
            self.walk(props, path, scope, Place::Body, 0);
            return;
        };
        let inner = props
            .get_ci("expressionEvaluationOptions")
            .and_then(|o| o.get_ci("scope"))
            .and_then(Node::as_str)
            .is_some_and(|s| s.eq_ignore_ascii_case("inner"));
        for m in members {
            let mpath = join_path(path, &m.key);
            if m.key.eq_ignore_ascii_case("template") && m.value.as_object().is_some() {
                if inner {
                    self.template(&m.value, &mpath, None);
                } else {
                    self.template(&m.value, &mpath, Some(scope));
                }
            } else {
                self.walk(&m.value, &mpath, scope, Place::Body, 0);
            }
        }
    }

    /// A literal `dependsOn` entry must name a resource of this template. Anything that cannot be decided without
    /// evaluation (expressions, resource IDs, resources whose names are expressions) is accepted.
    fn depends_on_entry(
        &mut self,
        entry: &Node,
        path: &str,
        facts: &[ResourceFacts],
        symbolic: bool,
    ) {
        let Some(text) = entry.as_str() else {
            self.error(
                entry.span,
                path,
                format!(
                    "A 'dependsOn' entry must be a string, not {}.",
                    entry.type_name()
                ),
            );
            return;
        };
        let target = match cairn_expr::classify(text) {
            cairn_expr::TemplateString::Expression { .. } => return,
            literal => literal.literal_text(),
        };
        if target.is_empty() || target.starts_with('/') {
            return;
        }
        let missing = if symbolic {
            // `sym` or `sym[index]`; anything with a slash may be a resource ID.
            let name = target.split('[').next().unwrap_or_default();
            !target.contains('/')
                && !facts.iter().any(|f| {
                    f.symbolic_name
                        .as_deref()
                        .is_some_and(|s| s.eq_ignore_ascii_case(name))
                })
        } else if !target.contains('/') {
            // A resource name (last segment or full) or a copy loop name.
            let undecidable = facts.iter().any(|f| f.full_name.is_none());
            !undecidable
                && !facts.iter().any(|f| {
                    f.copy_name
                        .as_deref()
                        .is_some_and(|c| c.eq_ignore_ascii_case(&target))
                        || f.full_name.as_deref().is_some_and(|n| {
                            n.eq_ignore_ascii_case(&target)
                                || n.rsplit('/')
                                    .next()
                                    .is_some_and(|last| last.eq_ignore_ascii_case(&target))
                        })
                })
        } else {
            // `Ns.Provider/type/name[/childType/childName...]`.
            match split_type_and_name(&target) {
                Some((ty, name)) => {
                    let same_type: Vec<&ResourceFacts> = facts
                        .iter()
                        .filter(|f| {
                            f.full_type
                                .as_deref()
                                .is_some_and(|t| t.eq_ignore_ascii_case(&ty))
                        })
                        .collect();
                    let undecidable = facts.iter().any(|f| f.full_type.is_none())
                        || same_type.iter().any(|f| f.full_name.is_none());
                    !undecidable
                        && !same_type.iter().any(|f| {
                            f.full_name
                                .as_deref()
                                .is_some_and(|n| n.eq_ignore_ascii_case(&name))
                        })
                }
                None => false,
            }
        };
        if missing {
            // The names this entry could have meant: symbolic names, else resource and copy loop names.
            let candidates: Vec<&str> = facts
                .iter()
                .flat_map(|f| {
                    if symbolic {
                        [f.symbolic_name.as_deref(), None, None]
                    } else {
                        [
                            f.full_name.as_deref(),
                            f.full_name
                                .as_deref()
                                .and_then(|n| n.rsplit('/').next())
                                .filter(|last| Some(*last) != f.full_name.as_deref()),
                            f.copy_name.as_deref(),
                        ]
                    }
                })
                .flatten()
                .collect();
            let lookup = if symbolic {
                target.split('[').next().unwrap_or_default()
            } else {
                target.as_str()
            };
            self.error(
                entry.span,
                path,
                format!(
                    "The resource '{target}' is not defined in the template.{}",
                    cairn_eval::suggest::did_you_mean(lookup, candidates)
                ),
            );
        }
    }

    /// Checks every string (values and property names) below `node` as a possible expression.
    fn walk(&mut self, node: &Node, path: &str, scope: &Scope, place: Place<'_>, depth: usize) {
        if depth > MAX_WALK_DEPTH {
            return;
        }
        match &node.kind {
            NodeKind::String(s) => self.string(s, node.span, path, scope, place),
            NodeKind::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.walk(item, &join_index(path, i), scope, place, depth + 1);
                }
            }
            NodeKind::Object(members) => {
                for m in members {
                    let mpath = join_path(path, &m.key);
                    self.string(&m.key, m.key_span, &mpath, scope, place);
                    if m.key.eq_ignore_ascii_case("copy")
                        && let Some(loops) = m.value.as_array()
                    {
                        // A property copy loop: `copy: [{ name, count, input }]`.
                        for (i, lp) in loops.iter().enumerate() {
                            if let (Some(name), Some(count), Some(_)) = (
                                lp.get_ci("name").and_then(Node::as_str),
                                lp.get_ci("count"),
                                lp.get_ci("input"),
                            ) {
                                self.copy_count(
                                    name,
                                    count,
                                    &join_path(&join_index(&mpath, i), "count"),
                                );
                            }
                        }
                    }
                    self.walk(&m.value, &mpath, scope, place, depth + 1);
                }
            }
            _ => {}
        }
    }

    /// One JSON string: if it is an expression, check length, syntax and references.
    fn string(&mut self, s: &str, span: Span, path: &str, scope: &Scope, place: Place<'_>) {
        if !matches!(
            cairn_expr::classify(s),
            cairn_expr::TemplateString::Expression { .. }
        ) {
            return;
        }
        let units = s.encode_utf16().count();
        if units > MAX_EXPRESSION_LENGTH {
            self.error(
                span,
                path,
                format!(
                    "The template language expression is {units} characters long, which exceeds the limit of {MAX_EXPRESSION_LENGTH} characters."
                ),
            );
        }
        let expr = match cairn_expr::parse_template_string(s) {
            Ok(Some(expr)) => expr,
            Ok(None) => return,
            Err(e) => {
                let position = s
                    .get(..e.span.start as usize)
                    .map_or(e.span.start as usize, |before| before.chars().count())
                    + 1;
                let message = format!(
                    "Unable to parse language expression '{}': {} at character {position}.",
                    quote_expression(s),
                    e.kind
                );
                self.diags.push(
                    Diagnostic::error(CODE, message, path)
                        .with_span(span)
                        .with_token(Span::new(e.span.start as usize, e.span.end as usize)),
                );
                return;
            }
        };
        let site = Site {
            scope,
            place,
            path,
            span,
            text: s,
        };
        let mut lambda_variables = Vec::new();
        self.expression(&expr, &site, false, &mut lambda_variables);
    }

    fn expression(
        &mut self,
        e: &Expr,
        site: &Site<'_>,
        lambda_allowed: bool,
        lambda_variables: &mut Vec<String>,
    ) {
        match &e.kind {
            ExprKind::String(_) | ExprKind::Int(_) => {}
            ExprKind::Property { target, .. } => {
                self.expression(target, site, false, lambda_variables)
            }
            ExprKind::Index { target, index } => {
                self.expression(target, site, false, lambda_variables);
                self.expression(index, site, false, lambda_variables);
            }
            ExprKind::Call {
                namespace: Some(ns),
                name,
                args,
            } => {
                let full = format!("{}.{}", ns.name, name.name);
                if !site.scope.functions.contains(&full) {
                    let hint = site.scope.functions.did_you_mean(&full);
                    self.unknown_function(&full, &hint, ns.span.to(name.span), site);
                }
                for a in args {
                    self.expression(a, site, false, lambda_variables);
                }
            }
            ExprKind::Call {
                namespace: None,
                name,
                args,
            } => {
                self.call(name, args, site, lambda_allowed, lambda_variables);
            }
        }
    }

    fn call(
        &mut self,
        ident: &cairn_expr::Ident,
        args: &[Expr],
        site: &Site<'_>,
        lambda_allowed: bool,
        lambda_variables: &mut Vec<String>,
    ) {
        let name = ident.name.as_str();
        if !is_known_function(name) {
            let hint = known_function_hint(name, site.scope);
            self.unknown_function(name, &hint, ident.span, site);
        }
        let literal_arg = || match args.first().map(|a| &a.kind) {
            Some(ExprKind::String(s)) => Some(s.as_str()),
            _ => None,
        };
        // The first argument's literal, where a finding about the name it gives is shown.
        let arg_span = args.first().map(|a| a.span);
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "parameters" => {
                if let Some(p) = literal_arg() {
                    let (declared, what) = match site.place {
                        Place::Function { parameters } => (parameters, "function parameter"),
                        _ => (&site.scope.parameters, "template parameter"),
                    };
                    if !declared.contains(p) {
                        self.site_error(
                            site,
                            arg_span,
                            format!(
                                "The {what} '{p}' is not found.{} Please see https://aka.ms/arm-syntax-parameters for usage details.",
                                declared.did_you_mean(p)
                            ),
                        );
                    }
                }
            }
            "variables" => {
                if matches!(site.place, Place::ParameterDefault) {
                    self.not_expected(
                        ident,
                        site,
                        "Parameter default values cannot refer to variables.",
                    );
                } else if let Some(v) = literal_arg()
                    && !site.scope.variables.contains(v)
                {
                    self.site_error(
                        site,
                        arg_span,
                        format!(
                            "The template variable '{v}' is not found.{} Please see https://aka.ms/arm-syntax-variables for usage details.",
                            site.scope.variables.did_you_mean(v)
                        ),
                    );
                }
            }
            "lambda" => {
                if !lambda_allowed {
                    self.not_expected(
                        ident,
                        site,
                        "A lambda can only be a direct argument of filter, map, reduce, sort, toObject, mapValues or groupBy.",
                    );
                }
                let (body, params) = args
                    .split_last()
                    .map_or((None, &[][..]), |(b, p)| (Some(b), p));
                let before = lambda_variables.len();
                for p in params {
                    match &p.kind {
                        ExprKind::String(s) => lambda_variables.push(s.clone()),
                        _ => self.site_error(site, Some(p.span), "The parameters of a lambda must be string literals naming its variables."),
                    }
                }
                if let Some(body) = body {
                    self.expression(body, site, false, lambda_variables);
                }
                lambda_variables.truncate(before);
                return;
            }
            "lambdavariables" => {
                if let Some(v) = literal_arg()
                    && !lambda_variables.iter().any(|l| l.eq_ignore_ascii_case(v))
                {
                    self.site_error(
                        site,
                        arg_span,
                        format!(
                            "The lambda variable '{v}' is not defined: lambdaVariables() must name a parameter of an enclosing lambda.{}",
                            cairn_eval::suggest::did_you_mean(v, lambda_variables.iter().map(String::as_str))
                        ),
                    );
                }
            }
            _ => {}
        }
        if one_of(&DEFAULT_VALUE_ONLY, name) && !matches!(site.place, Place::ParameterDefault) {
            self.not_expected(
                ident,
                site,
                "The function can only be used in parameter default values.",
            );
        }
        if matches!(site.place, Place::ParameterDefault)
            && (one_of(&NOT_IN_DEFAULT_VALUE, name)
                || (lower.starts_with("list") && lower.len() > 4))
        {
            self.not_expected(
                ident,
                site,
                "Parameter default values cannot refer to resources.",
            );
        }
        let takes_lambdas = one_of(&LAMBDA_TAKERS, name);
        for a in args {
            self.expression(a, site, takes_lambdas, lambda_variables);
        }
    }

    /// An error about the expression at `site`; `token` (a span of the string's text) is the part it is about.
    fn site_error(
        &mut self,
        site: &Site<'_>,
        token: Option<cairn_expr::Span>,
        message: impl Into<String>,
    ) {
        let message = format!("{} (in '{}')", message.into(), quote_expression(site.text));
        let mut d = Diagnostic::error(CODE, message, site.path).with_span(site.span);
        if let Some(token) = token {
            d = d.with_token(Span::new(token.start as usize, token.end as usize));
        }
        self.diags.push(d);
    }

    fn unknown_function(
        &mut self,
        name: &str,
        hint: &str,
        token: cairn_expr::Span,
        site: &Site<'_>,
    ) {
        self.site_error(
            site,
            Some(token),
            format!("The template function '{name}' is not valid.{hint} Please see https://aka.ms/arm-functions for usage details."),
        );
    }

    fn not_expected(&mut self, ident: &cairn_expr::Ident, site: &Site<'_>, why: &str) {
        self.site_error(
            site,
            Some(ident.span),
            format!(
                "The template function '{}' is not expected at this location. {why}",
                ident.name
            ),
        );
    }
}

/// The text of a literal template string (the `[[` escape removed).
trait LiteralText {
    fn literal_text(&self) -> String;
}

impl LiteralText for cairn_expr::TemplateString<'_> {
    fn literal_text(&self) -> String {
        match self {
            cairn_expr::TemplateString::Literal(s) => s.to_string(),
            cairn_expr::TemplateString::Expression { text, .. } => format!("[{text}]"),
        }
    }
}

/// `Ns.Provider/type/name/childType/childName` → (`Ns.Provider/type/childType`, `name/childName`).
fn split_type_and_name(s: &str) -> Option<(String, String)> {
    let segments: Vec<&str> = s.split('/').collect();
    if segments.len() < 3 || segments.len().is_multiple_of(2) || !segments[0].contains('.') {
        return None;
    }
    if segments.iter().any(|seg| seg.is_empty()) {
        return None;
    }
    let mut ty = segments[0].to_string();
    let mut name = String::new();
    for pair in segments[1..].chunks(2) {
        ty.push('/');
        ty.push_str(pair[0]);
        if !name.is_empty() {
            name.push('/');
        }
        name.push_str(pair[1]);
    }
    Some((ty, name))
}

fn quote_expression(s: &str) -> String {
    if s.chars().count() > MAX_QUOTED_EXPRESSION {
        let cut: String = s.chars().take(MAX_QUOTED_EXPRESSION).collect();
        format!("{cut}...")
    } else {
        s.to_string()
    }
}

/// `http(s)://schema.management.azure.com/schemas/<version>/<kind>Template.json[#]`, ignoring case.
fn is_template_schema(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    else {
        return false;
    };
    let Some(rest) = rest.strip_prefix("schema.management.azure.com/schemas/") else {
        return false;
    };
    let Some((version, file)) = rest.split_once('/') else {
        return false;
    };
    let file = file.strip_suffix('#').unwrap_or(file);
    !version.is_empty() && SCHEMA_FILES.contains(&file)
}

fn is_four_part_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Severity;

    const SCHEMA: &str =
        "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

    /// A 1.0 template with the given top-level members (plus an empty `resources` unless given).
    fn t1(body: &str) -> String {
        let resources = if body.contains("\"resources\"") {
            ""
        } else {
            "\"resources\": [], "
        };
        format!(r#"{{"$schema": "{SCHEMA}", "contentVersion": "1.0.0.0", {resources}{body}}}"#)
    }

    /// A 2.0 template with the given top-level members (plus an empty `resources` object unless given).
    fn t2(body: &str) -> String {
        let resources = if body.contains("\"resources\"") {
            ""
        } else {
            "\"resources\": {}, "
        };
        format!(
            r#"{{"$schema": "{SCHEMA}", "languageVersion": "2.0", "contentVersion": "1.0.0.0", {resources}{body}}}"#
        )
    }

    fn run(text: &str) -> Vec<Diagnostic> {
        check_template(&cairn_json::parse(text).expect("test template parses"))
    }

    /// Errors as "target: message".
    fn errors(text: &str) -> Vec<String> {
        run(text)
            .into_iter()
            .filter(Diagnostic::is_error)
            .map(|d| format!("{}: {}", d.target, d.message))
            .collect()
    }

    fn clean(text: &str) {
        let found = errors(text);
        assert!(found.is_empty(), "unexpected errors: {found:#?}");
    }

    /// Exactly one error, whose "target: message" contains `fragment`.
    fn one_error(text: &str, fragment: &str) {
        let found = errors(text);
        assert_eq!(
            found.len(),
            1,
            "expected one error containing '{fragment}', got {found:#?}"
        );
        assert!(
            found[0].contains(fragment),
            "expected '{fragment}' in {found:#?}"
        );
    }

    // ----- header -----

    #[test]
    fn minimal_templates_are_clean() {
        clean(&t1(""));
        clean(&t2(""));
        for v in LANGUAGE_VERSIONS {
            let resources = if v == "1.0" { "[]" } else { "{}" };
            clean(&format!(
                r#"{{"$schema": "{SCHEMA}", "languageVersion": "{v}", "contentVersion": "1.0.0.0", "resources": {resources}}}"#
            ));
        }
    }

    #[test]
    fn required_header_properties() {
        one_error(
            r#"{"contentVersion": "1.0.0.0", "resources": []}"#,
            "$schema: Required property '$schema' not found in JSON.",
        );
        one_error(
            &format!(r#"{{"$schema": "{SCHEMA}", "resources": []}}"#),
            "contentVersion: Required property 'contentVersion'",
        );
        one_error(
            &format!(r#"{{"$schema": "{SCHEMA}", "contentVersion": "1.0.0.0"}}"#),
            "resources: Required property 'resources'",
        );
        one_error("[]", "The template must be a JSON object, not array.");
    }

    #[test]
    fn schema_url() {
        for ok in [
            "http://schema.management.azure.com/schemas/2015-01-01/deploymentTemplate.json#",
            "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#",
            "https://schema.management.azure.com/schemas/2019-08-01/managementGroupDeploymentTemplate.json#",
            "https://schema.management.azure.com/schemas/2019-08-01/TENANTDeploymentTemplate.json",
        ] {
            clean(&format!(
                r#"{{"$schema": "{ok}", "contentVersion": "1.0.0.0", "resources": []}}"#
            ));
        }
        one_error(
            r#"{"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#", "contentVersion": "1.0.0.0", "resources": []}"#,
            "$schema: The template schema 'https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#' is not supported.",
        );
        one_error(
            r#"{"$schema": 1, "contentVersion": "1.0.0.0", "resources": []}"#,
            "must be a string",
        );
    }

    #[test]
    fn content_version() {
        let odd = format!(r#"{{"$schema": "{SCHEMA}", "contentVersion": "1.0", "resources": []}}"#);
        clean(&odd);
        let found = run(&odd);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Warning);
        assert_eq!(found[0].target, "contentVersion");
        one_error(
            &format!(r#"{{"$schema": "{SCHEMA}", "contentVersion": 1, "resources": []}}"#),
            "contentVersion: ",
        );
    }

    #[test]
    fn language_version() {
        one_error(
            &format!(
                r#"{{"$schema": "{SCHEMA}", "languageVersion": "3.0", "contentVersion": "1.0.0.0", "resources": {{}}}}"#
            ),
            "languageVersion: The template language version '3.0' is not supported. Supported versions are '1.0, 2.0, 2.1-experimental, 2.2-experimental'.",
        );
    }

    #[test]
    fn spans_point_at_the_offending_node() {
        let text =
            t1(r#""parameters": {"p": {"type": "string", "defaultValue": "[concat('a',]"}}"#);
        let found = run(&text);
        assert_eq!(found.len(), 1, "{found:?}");
        let span = found[0].span.expect("span");
        assert_eq!(&text[span.range()], r#""[concat('a',]""#);
    }

    // ----- section shapes -----

    #[test]
    fn section_shapes() {
        one_error(
            &t1(r#""parameters": []"#),
            "parameters: The template 'parameters' section must be a JSON object, not array.",
        );
        one_error(&t1(r#""variables": 1"#), "variables: ");
        one_error(&t1(r#""outputs": "x""#), "outputs: ");
        one_error(
            &t1(r#""functions": {}"#),
            "functions: The template 'functions' section must be a JSON array, not object.",
        );
        one_error(&t2(r#""definitions": []"#), "definitions: ");
        one_error(
            &t1(r#""resources": "x""#),
            "resources: The template 'resources' section must be a JSON array",
        );
        one_error(
            &t1(r#""resources": {}"#),
            "need \"languageVersion\": \"2.0\"",
        );
        one_error(
            &t2(r#""resources": []"#),
            "With languageVersion 2.0 the 'resources' section must be an object",
        );
        one_error(
            &t1(r#""parameters": {"p": "string"}"#),
            "parameters.p: The template parameter 'p' must be a JSON object, not string.",
        );
        one_error(
            &t1(r#""resources": [1]"#),
            "resources[0]: A resource must be a JSON object",
        );
        one_error(
            &t1(r#""resources": [{"name": "x"}]"#),
            "resources[0].type: Required property 'type'",
        );
        one_error(
            &t1(r#""resources": [{"type": "A.B/c", "name": "x", "dependsOn": "y"}]"#),
            "resources[0].dependsOn: ",
        );
    }

    #[test]
    fn declarations_need_a_well_formed_type() {
        // No type at all is Bicep's resource-derived type: any value.
        clean(&t1(r#""parameters": {"p": {"defaultValue": 1}}"#));
        clean(&t1(r#""outputs": {"o": {"value": 1}}"#));
        clean(&t2(
            r#""parameters": {"p": {"metadata": {"__bicep_resource_derived_type!": {"source": "Microsoft.Network/virtualNetworks@2023-04-01#properties/properties"}}, "nullable": true}}"#,
        ));
        one_error(
            &t1(r#""parameters": {"p": {"type": "text"}}"#),
            "parameters.p.type: The type 'text'",
        );
        one_error(
            &t1(r#""outputs": {"o": {"type": "string"}}"#),
            "must have a 'value' or a 'copy'",
        );
        one_error(
            &t2(r##""parameters": {"p": {"$ref": "#/definitions/nope"}}"##),
            "parameters.p.$ref: ",
        );
        one_error(
            &t2(r#""definitions": {"t": {"type": "int", "minValue": 3, "maxValue": 1}}"#),
            "definitions.t.minValue: ",
        );
        clean(&t2(
            r##""definitions": {"t": {"type": "int"}}, "parameters": {"p": {"$ref": "#/definitions/t"}}"##,
        ));
    }

    // ----- duplicates -----

    #[test]
    fn duplicate_names_ignore_case() {
        one_error(
            &t1(r#""parameters": {"name": {"type": "string"}, "Name": {"type": "string"}}"#),
            "parameters.Name: The template parameter 'Name' is declared more than once (names are not case-sensitive; first declared as 'name').",
        );
        one_error(&t1(r#""variables": {"v": 1, "V": 2}"#), "variables.V: ");
        one_error(
            &t1(
                r#""variables": {"items": 1, "copy": [{"name": "ITEMS", "count": 1, "input": 1}]}"#,
            ),
            "variables.copy[0]: The template variable 'ITEMS' is declared more than once",
        );
        one_error(
            &t1(
                r#""outputs": {"o": {"type": "int", "value": 1}, "O": {"type": "int", "value": 2}}"#,
            ),
            "outputs.O: ",
        );
        one_error(
            &t2(r#""definitions": {"t": {"type": "int"}, "T": {"type": "int"}}"#),
            "definitions.T: ",
        );
        one_error(
            &t2(
                r#""resources": {"res": {"type": "A.B/c", "apiVersion": "1", "name": "a"}, "RES": {"type": "A.B/c", "apiVersion": "1", "name": "b"}}"#,
            ),
            "resources.RES: The resource symbolic name 'RES' is declared more than once",
        );
        one_error(
            &t1(r#""Outputs": {}, "outputs": {}"#),
            "outputs: The template section 'outputs' is declared more than once",
        );
        one_error(
            &t1(
                r#""functions": [{"namespace": "ns", "members": {"f": {"output": {"type": "int", "value": 1}}, "F": {"output": {"type": "int", "value": 2}}}}]"#,
            ),
            "functions[0].members.F: ",
        );
        clean(&t1(
            r#""functions": [{"namespace": "ns", "members": {"f": {"output": {"type": "int", "value": 1}}}}, {"namespace": "NS", "members": {"g": {"output": {"type": "int", "value": 2}}}}], "variables": {"v": "[add(ns.f(), ns.g())]"}"#,
        ));
        one_error(
            &t1(
                r#""functions": [{"namespace": "ns", "members": {"f": {"output": {"type": "int", "value": 1}}}}, {"namespace": "NS", "members": {"F": {"output": {"type": "int", "value": 2}}}}]"#,
            ),
            "functions[1].members.F: The function 'NS.F' is declared more than once",
        );
        clean(&t1(
            r#""parameters": {"a": {"type": "string"}, "b": {"type": "string"}}, "variables": {"a": 1}"#,
        ));
    }

    // ----- limits -----

    fn many(n: usize, item: impl Fn(usize) -> String) -> String {
        (0..n).map(item).collect::<Vec<_>>().join(", ")
    }

    #[test]
    fn limits_on_counts() {
        let params = |n| {
            t1(&format!(
                r#""parameters": {{{}}}"#,
                many(n, |i| format!(r#""p{i}": {{"type": "int"}}"#))
            ))
        };
        clean(&params(MAX_PARAMETERS));
        one_error(
            &params(MAX_PARAMETERS + 1),
            "parameters: The number of template parameters (257) exceeds the limit of 256.",
        );
        let vars = |n| {
            t1(&format!(
                r#""variables": {{{}}}"#,
                many(n, |i| format!(r#""v{i}": {i}"#))
            ))
        };
        clean(&vars(MAX_VARIABLES));
        one_error(
            &vars(MAX_VARIABLES + 1),
            "variables: The number of template variables (257)",
        );
        let outputs = |n| {
            t1(&format!(
                r#""outputs": {{{}}}"#,
                many(n, |i| format!(r#""o{i}": {{"type": "int", "value": {i}}}"#))
            ))
        };
        clean(&outputs(MAX_OUTPUTS));
        one_error(
            &outputs(MAX_OUTPUTS + 1),
            "outputs: The number of template outputs (65)",
        );
        let resources = |n| {
            t1(&format!(
                r#""resources": [{}]"#,
                many(n, |i| format!(
                    r#"{{"type": "A.B/c", "apiVersion": "1", "name": "r{i}"}}"#
                ))
            ))
        };
        clean(&resources(MAX_DECLARED_RESOURCES));
        one_error(
            &resources(MAX_DECLARED_RESOURCES + 1),
            "resources: The template declares 801 resources",
        );
    }

    #[test]
    fn limit_on_expression_length() {
        let expr = |n: usize| format!("[concat('{}')]", "a".repeat(n - 12));
        assert_eq!(expr(MAX_EXPRESSION_LENGTH).len(), MAX_EXPRESSION_LENGTH);
        clean(&t1(&format!(
            r#""variables": {{"v": "{}"}}"#,
            expr(MAX_EXPRESSION_LENGTH)
        )));
        one_error(
            &t1(&format!(
                r#""variables": {{"v": "{}"}}"#,
                expr(MAX_EXPRESSION_LENGTH + 1)
            )),
            "variables.v: The template language expression is 24577 characters long, which exceeds the limit of 24576 characters.",
        );
        // Literal strings are not expressions, whatever their length.
        clean(&t1(&format!(
            r#""variables": {{"v": "{}"}}"#,
            "a".repeat(MAX_EXPRESSION_LENGTH * 2)
        )));
    }

    #[test]
    fn limit_on_template_size() {
        assert!(check_size(MAX_TEMPLATE_BYTES).is_none());
        let d = check_size(MAX_TEMPLATE_BYTES + 1).expect("too big");
        assert_eq!(d.code, "InvalidTemplate");
        assert!(d.message.contains("4194305 bytes"), "{}", d.message);
    }

    // ----- copy loops -----

    #[test]
    fn literal_copy_counts() {
        let res = |count: &str| {
            t1(&format!(
                r#""resources": [{{"type": "A.B/c", "apiVersion": "1", "name": "[concat('r', copyIndex())]", "copy": {{"name": "loop", "count": {count}}}}}]"#
            ))
        };
        clean(&res("0"));
        clean(&res("800"));
        clean(&res(r#""[length(createArray(1, 2))]""#));
        one_error(
            &res("801"),
            "resources[0].copy.count: The copy count of 'loop' is 801; it must be between 0 and 800.",
        );
        one_error(&res("-1"), "resources[0].copy.count: ");
        one_error(&res(r#""three""#), "must be an integer");
        let found = run(&res("801"));
        assert_eq!(found[0].code, "InvalidCopyCount");
        one_error(
            &t1(
                r#""variables": {"copy": [{"name": "v", "count": 900, "input": "[copyIndex('v')]"}]}"#,
            ),
            "variables.copy[0].count: ",
        );
        one_error(
            &t1(r#""variables": {"o": {"copy": [{"name": "disks", "count": 1000, "input": {}}]}}"#),
            "variables.o.copy[0].count: ",
        );
        one_error(
            &t1(r#""outputs": {"o": {"type": "array", "copy": {"count": -5, "input": 1}}}"#),
            "outputs.o.copy.count: ",
        );
    }

    #[test]
    fn no_copy_on_nested_children() {
        let child = |copy: &str| {
            t1(&format!(
                r#""resources": [{{"type": "A.B/c", "apiVersion": "1", "name": "p", "resources": [{{"type": "d", "apiVersion": "1", "name": "[concat('c', copyIndex())]"{copy}}}]}}]"#
            ))
        };
        clean(&child(""));
        one_error(
            &child(r#", "copy": {"name": "l", "count": 2}"#),
            "resources[0].resources[0].copy: Copying nested resources is not supported",
        );
    }

    // ----- expressions -----

    #[test]
    fn syntax_errors_carry_the_position() {
        one_error(
            &t1(r#""variables": {"v": "[concat('a', )]"}"#),
            "variables.v: Unable to parse language expression '[concat('a', )]': expected",
        );
        let found = errors(&t1(r#""variables": {"v": "[concat('a', )]"}"#));
        assert!(found[0].contains("at character 14."), "{found:?}");
        one_error(
            &t1(r#""variables": {"v": "[]"}"#),
            "the expression is empty",
        );
        clean(&t1(
            r#""variables": {"v": "[[not an expression]", "w": "[abc] def", "x": "plain"}"#,
        ));
    }

    #[test]
    fn references_to_parameters_and_variables() {
        let body = r#""parameters": {"Location": {"type": "string"}}, "variables": {"Name": "[parameters('location')]", "copy": [{"name": "list", "count": 2, "input": "[copyIndex('list')]"}]}, "outputs": {"o": {"type": "array", "value": "[concat(createArray(variables('NAME')), variables('List'))]"}}"#;
        clean(&t1(body));
        one_error(
            &t1(r#""variables": {"v": "[parameters('missing')]"}"#),
            "variables.v: The template parameter 'missing' is not found.",
        );
        one_error(
            &t1(r#""outputs": {"o": {"type": "string", "value": "[variables('missing')]"}}"#),
            "outputs.o.value: The template variable 'missing' is not found.",
        );
        // Names computed by an expression cannot be checked statically.
        clean(&t1(
            r#""variables": {"v": "[parameters(concat('a', 'b'))]"}"#,
        ));
    }

    #[test]
    fn unknown_functions() {
        one_error(
            &t1(r#""variables": {"v": "[concatenate('a')]"}"#),
            "variables.v: The template function 'concatenate' is not valid.",
        );
        clean(&t1(
            r#""variables": {"v": "[toUpper(concat('a', string(1)))]", "k": "[listKeys('id', '2020-01-01')]"}"#,
        ));
        one_error(
            &t1(r#""variables": {"v": "[ns.f()]"}"#),
            "The template function 'ns.f' is not valid.",
        );
    }

    /// The one error of `text`, located in it: (message, the text its position points at).
    fn located(text: &str) -> (String, String) {
        let source = crate::SourceFile::new("t.json", text);
        let found: Vec<Diagnostic> = run(text).into_iter().filter(Diagnostic::is_error).collect();
        assert_eq!(found.len(), 1, "{found:#?}");
        let d = source.locate(found[0].clone());
        (d.message.clone(), text[d.span.unwrap().range()].to_string())
    }

    #[test]
    fn misspelt_names_are_suggested_and_pointed_at() {
        let (message, at) = located(&t1(
            r#""parameters": {"siteName": {"type": "string"}}, "variables": {"v": "[concat('a', parameters('siteNme'))]"}"#,
        ));
        assert!(
            message.starts_with(
                "The template parameter 'siteNme' is not found. Did you mean 'siteName'? Please see"
            ),
            "{message}"
        );
        assert_eq!(at, "'siteNme'");
        let (message, at) = located(&t1(
            r#""variables": {"prefix": "a", "v": "[variables('prefx')]"}"#,
        ));
        assert!(message.contains("Did you mean 'prefix'?"), "{message}");
        assert_eq!(at, "'prefx'");
        // The caret goes past escapes as they are written.
        let (message, at) = located(&t1(
            r#""variables": {"v": "[concat('\"q\u00e9\"', toUppr('a'))]"}"#,
        ));
        assert!(
            message
                .contains("The template function 'toUppr' is not valid. Did you mean 'toUpper'?"),
            "{message}"
        );
        assert_eq!(at, "toUppr");
        let udf = r#""functions": [{"namespace": "util", "members": {"tag": {"parameters": [{"name": "env", "type": "string"}], "output": {"type": "string", "value": "[parameters('env')]"}}}}]"#;
        let (message, at) = located(&t1(&format!(
            r#"{udf}, "variables": {{"v": "[util.tga('x')]"}}"#
        )));
        assert!(
            message.contains("'util.tga' is not valid. Did you mean 'util.tag'?"),
            "{message}"
        );
        assert_eq!(at, "util.tga");
        let (message, _) = located(&t1(
            r#""functions": [{"namespace": "util", "members": {"tag": {"parameters": [{"name": "env", "type": "string"}], "output": {"type": "string", "value": "[parameters('envv')]"}}}}]"#,
        ));
        assert!(
            message.contains("The function parameter 'envv' is not found. Did you mean 'env'?"),
            "{message}"
        );
        // Nothing close: no suggestion.
        let (message, _) = located(&t1(r#""variables": {"v": "[variables('zzzzzz')]"}"#));
        assert!(!message.contains("Did you mean"), "{message}");
    }

    #[test]
    fn misspelt_resources_are_suggested() {
        one_error(
            &t2(
                r#""resources": {"vnet": {"type": "A.B/c", "apiVersion": "1", "name": "n"}, "sub": {"type": "A.B/d", "apiVersion": "1", "name": "s", "dependsOn": ["vnte"]}}"#,
            ),
            "The resource 'vnte' is not defined in the template. Did you mean 'vnet'?",
        );
        one_error(
            &t1(
                r#""resources": [{"type": "A.B/c", "apiVersion": "1", "name": "network"}, {"type": "A.B/d", "apiVersion": "1", "name": "s", "dependsOn": ["netwrk"]}]"#,
            ),
            "The resource 'netwrk' is not defined in the template. Did you mean 'network'?",
        );
    }

    #[test]
    fn syntax_errors_point_at_where_parsing_stops() {
        let (message, at) = located(&t1(r#""variables": {"v": "[concat('a' 'b')]"}"#));
        assert!(
            message.starts_with("Unable to parse language expression"),
            "{message}"
        );
        assert!(at.starts_with("'b'"), "{at}");
    }

    #[test]
    fn user_defined_functions() {
        let udf = r#""functions": [{"namespace": "Util", "members": {"tag": {"parameters": [{"name": "env", "type": "string"}], "output": {"type": "string", "value": "[concat(parameters('ENV'), util.other())]"}}, "other": {"parameters": [], "output": {"type": "object", "value": {"k": "[toLower('X')]"}}}}}]"#;
        clean(&t1(&format!(
            r#"{udf}, "variables": {{"v": "[UTIL.tag('dev')]"}}"#
        )));
        // Inside a function, parameters() names the function's own parameters, not the template's.
        one_error(
            &t1(
                r#""parameters": {"p": {"type": "string"}}, "functions": [{"namespace": "u", "members": {"f": {"parameters": [], "output": {"type": "string", "value": "[parameters('p')]"}}}}]"#,
            ),
            "functions[0].members.f.output.value: The function parameter 'p' is not found.",
        );
        one_error(
            &t1(
                r#""functions": [{"namespace": "u", "members": {"f": {"parameters": [{"name": "a", "type": "string"}, {"name": "A", "type": "int"}], "output": {"type": "string", "value": "x"}}}}]"#,
            ),
            "functions[0].members.f.parameters[1]: The function parameter 'A' is declared more than once",
        );
        one_error(
            &t1(
                r#""functions": [{"namespace": "u", "members": {"f": {"parameters": [], "output": {"type": "string"}}}}]"#,
            ),
            "functions[0].members.f.output.value: ",
        );
        one_error(
            &t1(r#""functions": [{"members": {}}]"#),
            "functions[0].namespace: ",
        );
    }

    #[test]
    fn lambda_placement() {
        clean(&t1(
            r#""variables": {"v": "[map(range(0, 3), lambda('i', mul(lambdaVariables('i'), 2)))]", "w": "[reduce(createArray(1), 0, lambda('acc', 'cur', add(lambdaVariables('acc'), length(filter(createArray(1), lambda('x', equals(lambdaVariables('x'), lambdaVariables('cur'))))))))]"}"#,
        ));
        one_error(
            &t1(r#""variables": {"v": "[lambda('x', lambdaVariables('x'))]"}"#),
            "variables.v: The template function 'lambda' is not expected at this location.",
        );
        // Wrapped in if(), neither lambda is a direct argument of map().
        let found = errors(&t1(
            r#""variables": {"v": "[map(createArray(1), if(true(), lambda('x', 1), lambda('y', 2)))]"}"#,
        ));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found
                .iter()
                .all(|m| m.contains("'lambda' is not expected at this location")),
            "{found:?}"
        );
    }

    #[test]
    fn lambda_variables_must_be_in_scope() {
        one_error(
            &t1(
                r#""variables": {"v": "[map(createArray(1), lambda('x', lambdaVariables('y')))]"}"#,
            ),
            "The lambda variable 'y' is not defined",
        );
        one_error(
            &t1(r#""variables": {"v": "[lambdaVariables('x')]"}"#),
            "The lambda variable 'x' is not defined",
        );
    }

    #[test]
    fn functions_only_allowed_in_parameter_defaults() {
        clean(&t1(
            r#""parameters": {"t": {"type": "string", "defaultValue": "[utcNow()]"}, "g": {"type": "array", "defaultValue": ["[newGuid()]"]}}"#,
        ));
        one_error(
            &t1(r#""variables": {"v": "[utcNow()]"}"#),
            "variables.v: The template function 'utcNow' is not expected at this location. The function can only be used in parameter default values.",
        );
        one_error(
            &t1(r#""outputs": {"o": {"type": "string", "value": "[newGuid()]"}}"#),
            "outputs.o.value: ",
        );
    }

    #[test]
    fn parameter_defaults_cannot_use_variables_or_resources() {
        clean(&t1(
            r#""parameters": {"a": {"type": "string"}, "b": {"type": "string", "defaultValue": "[parameters('a')]"}}"#,
        ));
        one_error(
            &t1(
                r#""variables": {"v": 1}, "parameters": {"b": {"type": "int", "defaultValue": "[variables('v')]"}}"#,
            ),
            "parameters.b.defaultValue: The template function 'variables' is not expected at this location.",
        );
        one_error(
            &t1(r#""parameters": {"b": {"type": "object", "defaultValue": "[reference('x')]"}}"#),
            "parameters.b.defaultValue: The template function 'reference' is not expected",
        );
        one_error(
            &t1(
                r#""parameters": {"b": {"type": "object", "defaultValue": "[listKeys('x', '1')]"}}"#,
            ),
            "'listKeys' is not expected",
        );
    }

    #[test]
    fn property_names_are_expressions_too() {
        clean(&t1(
            r#""variables": {"v": {"[parameters('p')]": 1}}, "parameters": {"p": {"type": "string"}}"#,
        ));
        one_error(
            &t1(r#""variables": {"v": {"[parameters('q')]": 1}}"#),
            "variables.v['[parameters(''q'')]']: The template parameter 'q' is not found.",
        );
    }

    #[test]
    fn free_text_is_not_evaluated() {
        clean(&t1(
            r#""metadata": {"note": "[not an expression"}, "parameters": {"p": {"type": "string", "metadata": {"description": "[unknownFn()]"}, "allowedValues": ["[x(]"]}}, "resources": [{"type": "A.B/c", "apiVersion": "1", "name": "n", "comments": "[broken("}]"#,
        ));
    }

    // ----- nested deployments -----

    fn nested(scope: &str, inner_body: &str) -> String {
        let options = if scope.is_empty() {
            String::new()
        } else {
            format!(r#""expressionEvaluationOptions": {{"scope": "{scope}"}}, "#)
        };
        t1(&format!(
            r#""parameters": {{"outerParam": {{"type": "string"}}}}, "resources": [{{"type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": "nested", "properties": {{{options}"mode": "Incremental", "parameters": {{"innerParam": {{"value": "[parameters('outerParam')]"}}}}, "template": {inner}}}}}]"#,
            inner = t1(inner_body)
        ))
    }

    #[test]
    fn inner_scope_templates_have_their_own_symbols() {
        let uses_inner = r#""parameters": {"innerParam": {"type": "string"}}, "outputs": {"o": {"type": "string", "value": "[parameters('innerParam')]"}}"#;
        clean(&nested("inner", uses_inner));
        clean(&nested("Inner", uses_inner));
        let uses_outer =
            r#""outputs": {"o": {"type": "string", "value": "[parameters('outerParam')]"}}"#;
        one_error(
            &nested("inner", uses_outer),
            "resources[0].properties.template.outputs.o.value: The template parameter 'outerParam' is not found.",
        );
        one_error(
            &nested("inner", r#""outputs": {"o": {"type": "string"}}"#),
            "resources[0].properties.template.outputs.o: ",
        );
    }

    #[test]
    fn outer_scope_templates_see_the_parent() {
        let uses_outer =
            r#""outputs": {"o": {"type": "string", "value": "[parameters('outerParam')]"}}"#;
        clean(&nested("outer", uses_outer));
        clean(&nested("", uses_outer));
        one_error(
            &nested(
                "",
                r#""outputs": {"o": {"type": "string", "value": "[parameters('nowhere')]"}}"#,
            ),
            "resources[0].properties.template.outputs.o.value: The template parameter 'nowhere' is not found.",
        );
    }

    // ----- dependsOn -----

    fn deps_1(resources: &str) -> String {
        t1(&format!(
            r#""parameters": {{"n": {{"type": "string"}}}}, "resources": [{resources}]"#
        ))
    }

    #[test]
    fn depends_on_names_in_1_0() {
        let base = r#"{"type": "Microsoft.Network/virtualNetworks", "apiVersion": "1", "name": "vnet", "resources": [{"type": "subnets", "apiVersion": "1", "name": "sub", "dependsOn": ["vnet"]}]},
                      {"type": "A.B/c", "apiVersion": "1", "name": "[concat('x', copyIndex())]", "copy": {"name": "loop", "count": 2}}"#;
        // Any resource named by an expression makes plain names undecidable; give all literal names here.
        let literal = r#"{"type": "Microsoft.Network/virtualNetworks", "apiVersion": "1", "name": "vnet", "resources": [{"type": "subnets", "apiVersion": "1", "name": "sub", "dependsOn": ["vnet"]}]},
                         {"type": "A.B/c", "apiVersion": "1", "name": "x", "copy": {"name": "loop", "count": 2}}"#;
        for ok in [
            "vnet",
            "VNET",
            "sub",
            "vnet/sub",
            "loop",
            "Microsoft.Network/virtualNetworks/vnet",
            "Microsoft.Network/virtualNetworks/vnet/subnets/sub",
            "/subscriptions/x/resourceGroups/y/providers/A.B/c/z",
            "[resourceId('A.B/c', 'nope')]",
        ] {
            clean(&deps_1(&format!(
                r#"{literal}, {{"type": "D.E/f", "apiVersion": "1", "name": "d", "dependsOn": ["{ok}"]}}"#
            )));
        }
        one_error(
            &deps_1(&format!(
                r#"{literal}, {{"type": "D.E/f", "apiVersion": "1", "name": "d", "dependsOn": ["vnett"]}}"#
            )),
            "resources[2].dependsOn[0]: The resource 'vnett' is not defined in the template.",
        );
        one_error(
            &deps_1(&format!(
                r#"{literal}, {{"type": "D.E/f", "apiVersion": "1", "name": "d", "dependsOn": ["Microsoft.Network/virtualNetworks/other"]}}"#
            )),
            "The resource 'Microsoft.Network/virtualNetworks/other' is not defined",
        );
        one_error(
            &deps_1(&format!(
                r#"{literal}, {{"type": "D.E/f", "apiVersion": "1", "name": "d", "dependsOn": ["Microsoft.Compute/virtualMachines/vnet"]}}"#
            )),
            "is not defined",
        );
        one_error(
            &deps_1(&format!(
                r#"{literal}, {{"type": "D.E/f", "apiVersion": "1", "name": "d", "dependsOn": [3]}}"#
            )),
            "A 'dependsOn' entry must be a string",
        );
        // With an expression-named resource a plain name may match it after evaluation: not reported.
        clean(&deps_1(&format!(
            r#"{base}, {{"type": "D.E/f", "apiVersion": "1", "name": "d", "dependsOn": ["vnett"]}}"#
        )));
        // Only the type with expression names is undecidable.
        one_error(
            &deps_1(&format!(
                r#"{base}, {{"type": "D.E/f", "apiVersion": "1", "name": "d", "dependsOn": ["Microsoft.Network/virtualNetworks/other"]}}"#
            )),
            "is not defined",
        );
        clean(&deps_1(&format!(
            r#"{base}, {{"type": "D.E/f", "apiVersion": "1", "name": "d", "dependsOn": ["A.B/c/anything"]}}"#
        )));
    }

    #[test]
    fn depends_on_symbolic_names_in_2_0() {
        let res = |dep: &str| {
            t2(&format!(
                r#""resources": {{"parent": {{"type": "A.B/c", "apiVersion": "1", "name": "p"}}, "parent::child": {{"type": "A.B/c/d", "apiVersion": "1", "name": "p/c", "dependsOn": ["{dep}"]}}}}"#
            ))
        };
        clean(&res("parent"));
        clean(&res("PARENT"));
        clean(&res("parent[0]"));
        clean(&res("[resourceId('A.B/c', 'p')]"));
        one_error(
            &res("p"),
            "resources['parent::child'].dependsOn[0]: The resource 'p' is not defined in the template.",
        );
    }

    // ----- robustness -----

    mod arbitrary {
        use proptest::prelude::*;

        /// Keys that steer the checkers into their interesting branches.
        const KEYS: &[&str] = &[
            "$schema",
            "contentVersion",
            "languageVersion",
            "parameters",
            "variables",
            "functions",
            "resources",
            "outputs",
            "definitions",
            "type",
            "name",
            "copy",
            "count",
            "input",
            "dependsOn",
            "properties",
            "template",
            "expressionEvaluationOptions",
            "scope",
            "value",
            "defaultValue",
            "$ref",
            "items",
            "prefixItems",
            "additionalProperties",
            "discriminator",
            "mapping",
            "propertyName",
            "namespace",
            "members",
            "output",
            "allowedValues",
            "minLength",
            "maxLength",
            "minValue",
            "maxValue",
            "nullable",
            "sealed",
            "[parameters('x')]",
            "x",
        ];

        const STRINGS: &[&str] = &[
            "[parameters('x')]",
            "[variables('x')]",
            "[lambda('a', lambdaVariables('a'))]",
            "[map(createArray(1), lambda('a', 1))]",
            "[u.f(1)]",
            "[utcNow()]",
            "[concat(",
            "[]",
            "[[x]",
            "inner",
            "Microsoft.Resources/deployments",
            "A.B/c/d",
            "#/definitions/x",
            "#/definitions/x/items",
            "string",
            "int",
            "array",
            "object",
            "securestring",
            "2.0",
            "1.0",
            "x",
            "",
        ];

        fn json() -> impl Strategy<Value = serde_json::Value> {
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::Bool),
                (-1000i64..1000).prop_map(serde_json::Value::from),
                prop::sample::select(STRINGS).prop_map(serde_json::Value::from),
                "\\PC{0,6}".prop_map(serde_json::Value::from),
            ];
            leaf.prop_recursive(6, 64, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
                    prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(
                        |members| {
                            serde_json::Value::Object(
                                members
                                    .into_iter()
                                    .map(|(k, v)| (k.to_string(), v))
                                    .collect(),
                            )
                        }
                    ),
                ]
            })
        }

        proptest! {
            #[test]
            fn checkers_never_panic(template in json(), value in json(), schema in json(), defs in json()) {
                let template = cairn_json::Node::from_json(&template);
                let _ = super::check_template(&template);
                let schema = cairn_json::Node::from_json(&schema);
                let defs = cairn_json::Node::from_json(&defs);
                let value = cairn_eval::Value::from_json(&value);
                let _ = crate::types::check_value(&value, &schema, Some(&defs), "parameters.p.value");
                let _ = crate::types::check_schema(&schema, Some(&defs), "parameters.p");
                let _ = crate::types::is_secure(&schema, Some(&defs));
            }
        }
    }

    // ----- the conformance corpus -----

    /// Conformance templates that trip a rule on purpose, with the reason. (None so far.)
    const EXPECTED_FAILURES: &[(&str, &str)] = &[];

    fn corpus_templates() -> Vec<(String, Node)> {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/conformance");
        let mut out = Vec::new();
        let mut files = Vec::new();
        collect_json(&root, &mut files);
        files.sort();
        for file in files {
            let rel = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let node = cairn_json::parse(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
            if rel.starts_with("functions/") || rel.starts_with("evaluation/") {
                let template = node
                    .get("template")
                    .unwrap_or_else(|| panic!("{rel}: no template"));
                out.push((rel, template.clone()));
            } else if rel.starts_with("differential/") {
                let name = file.file_name().unwrap_or_default().to_string_lossy();
                if name.starts_with("main") && !name.contains("parameters") {
                    out.push((rel, node));
                }
            } else if rel.starts_with("extensibility/") {
                let is_template = node
                    .get("$schema")
                    .and_then(Node::as_str)
                    .is_some_and(|s| s.to_ascii_lowercase().contains("deploymenttemplate.json"));
                if is_template {
                    out.push((rel, node));
                }
            }
        }
        out
    }

    fn has_expression(node: &Node) -> bool {
        let is_expr = |s: &str| {
            matches!(
                cairn_expr::classify(s),
                cairn_expr::TemplateString::Expression { .. }
            )
        };
        match &node.kind {
            NodeKind::String(s) => is_expr(s),
            NodeKind::Array(items) => items.iter().any(has_expression),
            NodeKind::Object(members) => members
                .iter()
                .any(|m| is_expr(&m.key) || has_expression(&m.value)),
            _ => false,
        }
    }

    /// Literal parameter defaults and output values of the corpus, and the invented parameter values of the
    /// differential set, all satisfy their declarations (a positive test of `types::check_value` on real types).
    #[test]
    fn corpus_values_match_their_declarations() {
        let mut checked = 0;
        let mut failures = Vec::new();
        let mut check = |name: &str, value: &Node, decl: &Node, template: &Node, target: String| {
            let defs = template.get_ci("definitions");
            let value = cairn_eval::Value::from_node(value);
            for d in types::check_value(&value, decl, defs, &target) {
                failures.push(format!("{name}: {}: {}", d.target, d.message));
            }
            checked += 1;
        };
        for (name, template) in corpus_templates() {
            for (section, key) in [("parameters", "defaultValue"), ("outputs", "value")] {
                let Some(decls) = template.get_ci(section).and_then(Node::as_object) else {
                    continue;
                };
                for m in decls {
                    if let Some(v) = m.value.get_ci(key).filter(|v| !has_expression(v)) {
                        let target = join_path(&join_path(section, &m.key), key);
                        check(&name, v, &m.value, &template, target);
                    }
                }
            }
            let params_file = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/conformance")
                .join(&name)
                .with_file_name("params.json");
            if !name.starts_with("differential/") || !params_file.exists() {
                continue;
            }
            let text = std::fs::read_to_string(&params_file).expect("params.json is readable");
            let params = cairn_json::parse(&text).expect("params.json parses");
            let Some(values) = params.get("parameters").and_then(Node::as_object) else {
                continue;
            };
            for p in values {
                let decl = template
                    .get_ci("parameters")
                    .and_then(|ps| ps.get_ci(&p.key))
                    .unwrap_or_else(|| panic!("{name}: parameter {} is not declared", p.key));
                if let Some(v) = p.value.get("value") {
                    let target = join_path(&join_path("parameters", &p.key), "value");
                    check(&name, v, decl, &template, target);
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(checked > 200, "only {checked} values checked");
    }

    fn collect_json(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                collect_json(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }

    #[test]
    fn conformance_templates_have_no_errors() {
        let templates = corpus_templates();
        // 90 functions + 21 evaluation + 32 differential + 6 extensibility templates.
        assert!(
            templates.len() >= 140,
            "only {} templates found",
            templates.len()
        );
        let mut failures = Vec::new();
        for (name, template) in &templates {
            let found: Vec<String> = check_template(template)
                .into_iter()
                .filter(Diagnostic::is_error)
                .map(|d| format!("  {}: {}", d.target, d.message))
                .collect();
            let expected = EXPECTED_FAILURES.iter().any(|(n, _)| n == name);
            match (found.is_empty(), expected) {
                (true, false) | (false, true) => {}
                (false, false) => failures.push(format!("{name}:\n{}", found.join("\n"))),
                (true, true) => failures.push(format!(
                    "{name}: listed as an expected failure but has no errors"
                )),
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
