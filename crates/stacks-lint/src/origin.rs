//! The abstract values of the source-tracing interpretation: where a value comes from ([`Origin`]) and how it is
//! shaped ([`AVal`]: objects with known keys, arrays, alternatives of `if` branches, opaque leaves).

use cairn_json::Span;

/// Index of a template scope (the root template, or a nested deployment's inline template).
pub type ScopeId = usize;

/// Which file a source position is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    Template,
    Parameters,
}

/// The expression value types of seed 000's tables, plus what inheritance and the older seeds add.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OriginKind {
    /// A literal in the template or parameters file (also `loadFileContent` output, which Bicep inlines).
    Literal,
    /// `parameters('name')`; `secure` from the declared type (incl. `$ref`) or a Key Vault reference in the
    /// parameters file.
    Parameter {
        name: String,
        secure: bool,
        from_key_vault: bool,
    },
    /// `{ keyVaultReference }`, `{ reference: { keyVault } }` (seed 001), `type: KeyVaultSecret` auth (seed 003).
    KeyVaultReference,
    /// A `list*()` call's output.
    ListOutput { function: String },
    /// `{ apiReference }`, `runtimeReference` (seed 001) or `armApiCall` (seed 002): a re-fetch directive.
    ApiReference,
    /// `reference()`, `references()`, `resourceInfo()` output.
    ReferenceOutput { function: String },
    /// `extensions('alias').config...` / `extensionConfigs('alias')...` read in `scope`; `path` is the property
    /// path below the config (empty = the whole config).
    Inherited {
        scope: ScopeId,
        alias: String,
        path: Vec<String>,
    },
    /// A deployment-time fact: `resourceGroup()`, `deployment()`, `utcNow()`, ... ("all other" in the tables).
    Runtime { function: String },
    /// Something the analysis cannot follow. `limit`: it gave up (too deep, too large), so the value may hold
    /// anything, a secret included.
    Unknown { reason: String, limit: bool },
}

/// One source a value derives from, with the route it took.
#[derive(Clone, PartialEq, Eq)]
pub struct Origin {
    pub kind: OriginKind,
    /// The first function that computed a new value from this source (`concat()`, a user-defined function), if any.
    /// Property access and pass-through functions (`if`, `createObject`, `union`, ...) do not count.
    pub transformed_by: Option<String>,
    /// The route, outermost first: `variable 'x'`, `the 'false' branch of if()`, ...
    pub via: Vec<String>,
    /// Where the source is written.
    pub site: Option<(FileKind, Span)>,
    /// For a string literal: its text (read only for discriminators such as `type: 'UserProvided'` and alias names,
    /// never put into messages, since a literal may be a secret).
    pub text: Option<Box<str>>,
}

/// Debug output never shows a literal's text: it may be a secret written into a template.
impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin")
            .field("kind", &self.kind)
            .field("transformed_by", &self.transformed_by)
            .field("via", &self.via)
            .field("site", &self.site)
            .field("text", &self.text.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Origin {
    pub fn new(kind: OriginKind, site: Option<(FileKind, Span)>) -> Origin {
        Origin {
            kind,
            transformed_by: None,
            via: Vec::new(),
            site,
            text: None,
        }
    }

    pub fn unknown(reason: impl Into<String>, site: Option<(FileKind, Span)>) -> Origin {
        Origin::new(
            OriginKind::Unknown {
                reason: reason.into(),
                limit: false,
            },
            site,
        )
    }

    /// Adds outer route steps. Long routes keep their outer and inner ends; the middle becomes one
    /// `… N more steps …` step, so deep chains cost neither memory nor unreadable messages.
    pub fn prepend_via(&mut self, steps: &[String]) {
        if steps.is_empty() {
            return;
        }
        self.via.splice(0..0, steps.iter().cloned());
        if self.via.len() > MAX_VIA {
            let back = MAX_VIA - VIA_FRONT - 1;
            let end = self.via.len() - back;
            let hidden: usize = self
                .via
                .drain(VIA_FRONT..end)
                .map(|s| elided_steps(&s).unwrap_or(1))
                .sum();
            self.via
                .insert(VIA_FRONT, format!("… {hidden} more steps …"));
        }
    }

    /// A coarse class: origins of one class lead to the same kind of finding.
    fn class(&self) -> (u8, bool, bool) {
        let (kind, flag) = match &self.kind {
            OriginKind::Literal => (0, false),
            OriginKind::Parameter { secure, .. } => (1, *secure),
            OriginKind::KeyVaultReference => (2, false),
            OriginKind::ListOutput { .. } => (3, false),
            OriginKind::ApiReference => (4, false),
            OriginKind::ReferenceOutput { .. } => (5, false),
            OriginKind::Inherited { path, .. } => (
                6,
                path.first().is_some_and(|p| p.eq_ignore_ascii_case("auth")),
            ),
            OriginKind::Runtime { .. } => (7, false),
            OriginKind::Unknown { limit, .. } => (9, *limit),
        };
        (kind, flag, self.transformed_by.is_some())
    }

    /// Two origins that say the same thing to the user (the route may differ).
    fn same_source(&self, other: &Origin) -> bool {
        self.kind == other.kind
            && self.transformed_by.is_some() == other.transformed_by.is_some()
            && self.site == other.site
    }
}

/// Longest route kept per origin, and how many of its outermost steps stay when it is shortened.
const MAX_VIA: usize = 8;
const VIA_FRONT: usize = 3;

/// The count in a `… N more steps …` route step.
fn elided_steps(step: &str) -> Option<usize> {
    step.strip_prefix("… ")?
        .strip_suffix(" more steps …")?
        .parse()
        .ok()
}

/// Most origins one leaf keeps; more only repeat what the first ones say.
pub const MAX_ORIGINS: usize = 48;
/// Most alternatives one value keeps before they are merged.
pub const MAX_ALTERNATIVES: usize = 32;
/// Most nodes one abstract value holds before it is collapsed into a leaf.
pub const MAX_NODES: usize = 4096;

/// A member of an abstract object.
#[derive(Clone, Debug)]
pub struct AMember {
    pub key: String,
    pub value: AVal,
    /// Where the member is written (its value node or `createObject` argument).
    pub site: Option<(FileKind, Span)>,
}

/// A member whose name is only known at deployment time.
#[derive(Clone, Debug)]
pub struct ComputedKey {
    /// The key expression as written.
    pub text: String,
    /// The key depends on a runtime value (`reference`, `list*`): unknowable before deployment.
    pub runtime: bool,
    pub value: AVal,
    pub site: Option<(FileKind, Span)>,
}

#[derive(Clone, Debug, Default)]
pub struct AObject {
    pub members: Vec<AMember>,
    pub computed: Vec<ComputedKey>,
    /// Values spread in whose keys are not known here (`union(x, parameters('o'))`, inherited configs).
    pub tail: Vec<Origin>,
}

impl AObject {
    pub fn get(&self, key: &str) -> Option<&AMember> {
        self.members
            .iter()
            .rev()
            .find(|m| m.key.eq_ignore_ascii_case(key))
    }

    /// Sets a member, replacing one with the same (case-insensitive) key, as `union` does.
    pub fn set(&mut self, member: AMember) {
        match self
            .members
            .iter_mut()
            .find(|m| m.key.eq_ignore_ascii_case(&member.key))
        {
            Some(existing) => *existing = member,
            None => self.members.push(member),
        }
    }
}

/// An abstract value.
#[derive(Clone, Debug)]
pub enum AVal {
    /// A value of unknown shape, with its sources.
    Leaf(Vec<Origin>),
    Object(AObject),
    Array(Vec<AVal>),
    /// One of several values, each with a label saying which branch it is.
    Alt(Vec<(String, AVal)>),
}

impl AVal {
    pub fn leaf(origin: Origin) -> AVal {
        AVal::Leaf(vec![origin])
    }

    pub fn literal(site: Option<(FileKind, Span)>) -> AVal {
        AVal::leaf(Origin::new(OriginKind::Literal, site))
    }

    /// A string literal, keeping its text for discriminators (up to a bound; longer texts are never discriminators).
    pub fn string_literal(text: &str, site: Option<(FileKind, Span)>) -> AVal {
        let mut o = Origin::new(OriginKind::Literal, site);
        if text.len() <= 256 {
            o.text = Some(text.into());
        }
        AVal::leaf(o)
    }

    /// The text of a plain string literal.
    pub fn as_literal_str(&self) -> Option<&str> {
        match self {
            AVal::Leaf(origins) => match origins.as_slice() {
                [o] if o.kind == OriginKind::Literal && o.transformed_by.is_none() => {
                    o.text.as_deref()
                }
                _ => None,
            },
            _ => None,
        }
    }

    pub fn unknown(reason: impl Into<String>, site: Option<(FileKind, Span)>) -> AVal {
        AVal::leaf(Origin::unknown(reason, site))
    }

    /// The analysis gave up here (depth or size budget): the value may be anything.
    pub fn beyond_limits(reason: impl Into<String>, site: Option<(FileKind, Span)>) -> AVal {
        AVal::leaf(Origin::new(
            OriginKind::Unknown {
                reason: reason.into(),
                limit: true,
            },
            site,
        ))
    }

    /// Alternatives, flattened and capped: beyond [`MAX_ALTERNATIVES`] they are merged into one value.
    pub fn alternatives(branches: Vec<(String, AVal)>) -> AVal {
        let mut flat = Vec::new();
        for (label, value) in branches {
            match value {
                AVal::Alt(inner) => {
                    for (inner_label, v) in inner {
                        flat.push((format!("{label}, {inner_label}"), v));
                    }
                }
                other => flat.push((label, other)),
            }
        }
        if flat.len() == 1 {
            let (label, value) = flat.remove(0);
            return value.with_via(&label);
        }
        if flat.len() > MAX_ALTERNATIVES {
            return merge(flat);
        }
        AVal::Alt(flat).bounded()
    }

    /// Adds a route step to every origin below (as the outermost step).
    pub fn with_via(mut self, step: &str) -> AVal {
        self.for_each_origin_mut(&mut |o| o.prepend_via(std::slice::from_ref(&step.to_string())));
        self
    }

    /// Marks every origin below as computed by `function` (keeping an earlier mark).
    pub fn transformed(self, function: &str) -> AVal {
        let mut origins = self.origins();
        for o in &mut origins {
            o.transformed_by.get_or_insert_with(|| function.to_string());
        }
        AVal::Leaf(dedup(origins))
    }

    fn for_each_origin_mut(&mut self, f: &mut dyn FnMut(&mut Origin)) {
        match self {
            AVal::Leaf(origins) => origins.iter_mut().for_each(f),
            AVal::Object(o) => {
                for m in &mut o.members {
                    m.value.for_each_origin_mut(f);
                }
                for c in &mut o.computed {
                    c.value.for_each_origin_mut(f);
                }
                o.tail.iter_mut().for_each(f);
            }
            AVal::Array(items) => items.iter_mut().for_each(|i| i.for_each_origin_mut(f)),
            AVal::Alt(branches) => branches
                .iter_mut()
                .for_each(|(_, v)| v.for_each_origin_mut(f)),
        }
    }

    /// Every origin below, with branch labels added to the route.
    pub fn origins(&self) -> Vec<Origin> {
        let mut out = Vec::new();
        self.collect_origins(&mut Vec::new(), &mut out);
        dedup(out)
    }

    fn collect_origins(&self, labels: &mut Vec<String>, out: &mut Vec<Origin>) {
        match self {
            AVal::Leaf(origins) => {
                for o in origins {
                    let mut o = o.clone();
                    o.prepend_via(labels);
                    out.push(o);
                }
            }
            AVal::Object(obj) => {
                for m in &obj.members {
                    m.value.collect_origins(labels, out);
                }
                for c in &obj.computed {
                    c.value.collect_origins(labels, out);
                }
                for o in &obj.tail {
                    AVal::leaf(o.clone()).collect_origins(labels, out);
                }
            }
            AVal::Array(items) => items.iter().for_each(|i| i.collect_origins(labels, out)),
            AVal::Alt(branches) => {
                for (label, value) in branches {
                    labels.push(label.clone());
                    value.collect_origins(labels, out);
                    labels.pop();
                }
            }
        }
    }

    /// Number of nodes, counting up to `limit`.
    pub fn size(&self, limit: usize) -> usize {
        let mut n = 0;
        self.count(&mut n, limit);
        n
    }

    fn count(&self, n: &mut usize, limit: usize) {
        *n += 1;
        if *n > limit {
            return;
        }
        match self {
            AVal::Leaf(o) => *n += o.len(),
            AVal::Object(o) => {
                for m in &o.members {
                    m.value.count(n, limit);
                }
                for c in &o.computed {
                    c.value.count(n, limit);
                }
                *n += o.tail.len();
            }
            AVal::Array(items) => items.iter().for_each(|i| i.count(n, limit)),
            AVal::Alt(b) => b.iter().for_each(|(_, v)| v.count(n, limit)),
        }
    }

    /// Collapses a value that grew too large into one leaf with its origins (sound: no source is lost).
    pub fn bounded(self) -> AVal {
        if self.size(MAX_NODES) > MAX_NODES {
            AVal::Leaf(self.origins())
        } else {
            self
        }
    }

    /// `target.name`
    pub fn property(&self, name: &str) -> AVal {
        match self {
            AVal::Object(o) => {
                if let Some(m) = o.get(name) {
                    return m.value.clone();
                }
                let mut branches: Vec<(String, AVal)> = o
                    .computed
                    .iter()
                    .map(|c| (format!("the computed key '{}'", c.text), c.value.clone()))
                    .collect();
                if !o.tail.is_empty() {
                    branches.push((
                        "a spread-in value".to_string(),
                        AVal::Leaf(o.tail.iter().map(|t| refine(t, name)).collect()),
                    ));
                }
                if branches.is_empty() {
                    AVal::unknown(format!("the property '{name}' does not exist"), None)
                } else {
                    AVal::alternatives(branches)
                }
            }
            AVal::Leaf(origins) => AVal::Leaf(origins.iter().map(|o| refine(o, name)).collect()),
            AVal::Array(_) => {
                AVal::unknown(format!("the property '{name}' is read from an array"), None)
            }
            AVal::Alt(branches) => AVal::alternatives(
                branches
                    .iter()
                    .map(|(l, v)| (l.clone(), v.property(name)))
                    .collect(),
            ),
        }
    }

    /// `target[index]` with a known index, or `None` for an index known only at deployment.
    pub fn index(&self, index: Option<&IndexKey>) -> AVal {
        match (self, index) {
            (AVal::Array(items), Some(IndexKey::Int(i))) => {
                match usize::try_from(*i).ok().and_then(|i| items.get(i)) {
                    Some(item) => item.clone(),
                    None => self.index(None),
                }
            }
            (_, Some(IndexKey::Str(key))) => self.property(key),
            (AVal::Array(items), _) => {
                if items.is_empty() {
                    AVal::unknown("an element of an empty array", None)
                } else {
                    AVal::alternatives(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, v)| (format!("element {i}"), v.clone()))
                            .collect(),
                    )
                }
            }
            (AVal::Object(o), _) => {
                let mut branches: Vec<(String, AVal)> = o
                    .members
                    .iter()
                    .map(|m| (format!("the property '{}'", m.key), m.value.clone()))
                    .collect();
                branches.extend(
                    o.computed
                        .iter()
                        .map(|c| (format!("the computed key '{}'", c.text), c.value.clone())),
                );
                if !o.tail.is_empty() {
                    branches.push(("a spread-in value".into(), AVal::Leaf(o.tail.clone())));
                }
                if branches.is_empty() {
                    AVal::unknown("a property of an empty object", None)
                } else {
                    AVal::alternatives(branches)
                }
            }
            (AVal::Leaf(_), _) => self.clone(),
            (AVal::Alt(branches), index) => AVal::alternatives(
                branches
                    .iter()
                    .map(|(l, v)| (l.clone(), v.index(index)))
                    .collect(),
            ),
        }
    }
}

/// A constant index: `[0]` or `['name']`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexKey {
    Int(i64),
    Str(String),
}

/// Property access into an opaque value keeps its sources; an inherited config gets the property added to its path.
fn refine(origin: &Origin, name: &str) -> Origin {
    let mut o = origin.clone();
    if let OriginKind::Inherited { path, .. } = &mut o.kind
        && path.len() < 16
    {
        path.push(name.to_string());
    }
    o
}

/// Removes origins that repeat an earlier one, and caps the count. Past the cap an origin is still kept when it is
/// of a class not seen yet, so no kind of finding is lost to the cap.
pub fn dedup(origins: Vec<Origin>) -> Vec<Origin> {
    let mut out: Vec<Origin> = Vec::with_capacity(origins.len().min(MAX_ORIGINS));
    for o in origins {
        if out.iter().any(|e| e.same_source(&o)) {
            continue;
        }
        if out.len() >= MAX_ORIGINS && out.iter().any(|e| e.class() == o.class()) {
            continue;
        }
        out.push(o);
    }
    out
}

/// Merges many alternatives into one value: objects key by key, everything else into a leaf.
fn merge(branches: Vec<(String, AVal)>) -> AVal {
    if branches.iter().all(|(_, v)| matches!(v, AVal::Object(_))) {
        let mut obj = AObject::default();
        for (label, value) in branches {
            let AVal::Object(o) = value else { continue };
            for m in o.members {
                let value = m.value.with_via(&label);
                let merged = match obj.get(&m.key) {
                    Some(existing) => AVal::Leaf(dedup(
                        existing
                            .value
                            .origins()
                            .into_iter()
                            .chain(value.origins())
                            .collect(),
                    )),
                    None => value,
                };
                obj.set(AMember {
                    key: m.key,
                    value: merged,
                    site: m.site,
                });
            }
            obj.computed.extend(o.computed);
            obj.tail.extend(o.tail);
        }
        obj.tail = dedup(obj.tail);
        return AVal::Object(obj).bounded();
    }
    let mut origins = Vec::new();
    for (label, value) in branches {
        origins.extend(value.with_via(&label).origins());
    }
    AVal::Leaf(dedup(origins))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str) -> AVal {
        AVal::leaf(Origin::new(
            OriginKind::Parameter {
                name: name.into(),
                secure: false,
                from_key_vault: false,
            },
            None,
        ))
    }

    #[test]
    fn alternatives_label_routes() {
        let v = AVal::alternatives(vec![
            ("the 'true' branch of if()".into(), param("a")),
            ("the 'false' branch of if()".into(), AVal::literal(None)),
        ]);
        let origins = v.origins();
        assert_eq!(origins.len(), 2);
        assert_eq!(origins[0].via, vec!["the 'true' branch of if()"]);
    }

    #[test]
    fn inherited_paths_grow_with_property_access() {
        let v = AVal::leaf(Origin::new(
            OriginKind::Inherited {
                scope: 0,
                alias: "k8s".into(),
                path: vec![],
            },
            None,
        ));
        let got = v.property("auth").property("kubeConfig").origins();
        assert!(
            matches!(&got[0].kind, OriginKind::Inherited { path, .. } if path == &["auth", "kubeConfig"])
        );
    }

    #[test]
    fn too_many_alternatives_merge_without_losing_sources() {
        let branches = (0..100)
            .map(|i| (format!("b{i}"), param(&format!("p{i}"))))
            .collect();
        let v = AVal::alternatives(branches);
        assert!(matches!(v, AVal::Leaf(_)));
        assert_eq!(v.origins().len(), MAX_ORIGINS);
    }

    #[test]
    fn long_routes_keep_their_ends() {
        let mut v = param("a");
        for i in 0..40 {
            v = v.with_via(&format!("variable 'v{i}'"));
        }
        let via = &v.origins()[0].via;
        assert_eq!(via.len(), MAX_VIA);
        assert_eq!(via[0], "variable 'v39'");
        assert_eq!(via[VIA_FRONT], "… 33 more steps …");
        assert_eq!(via[MAX_VIA - 1], "variable 'v0'");
    }

    #[test]
    fn debug_output_hides_literal_text() {
        let v = AVal::string_literal("super-secret-kubeconfig", None);
        assert_eq!(v.as_literal_str(), Some("super-secret-kubeconfig"));
        assert!(!format!("{v:?}").contains("super-secret"));
    }

    #[test]
    fn transformed_marks_once() {
        let v = param("a").transformed("concat()").transformed("base64()");
        assert_eq!(v.origins()[0].transformed_by.as_deref(), Some("concat()"));
    }
}
