//! The one parser of extension config values: every form the seed designs and the shipped API give a config
//! property, read once into a [`ConfigValue`], from whatever holds it — a parameters file's nodes, a request's
//! or record's JSON, or a module's evaluated config (through [`ConfigSource`]).
//!
//! | Form (source) | Becomes |
//! |---|---|
//! | `{"value": v}`, optionally with a non-secure `"type"` (shipped API) | literal `v` |
//! | bare `v` (seed 003: `"cluster": "myCluster"`; a module's `createObject(...)`), any object that is not an item | literal `v` |
//! | `{"type": "SecureString" \| "SecureObject", "value": v}` | secure literal |
//! | `{"keyVaultReference": {keyVault: {id}, secretName, secretVersion?}}` (shipped, seed 000/002) | Key Vault directive |
//! | `{"reference": {...same...}}` (seed 001), `{"type": "keyVaultReference", "value": {...}}` (seed 002) | Key Vault directive |
//! | `{"type": "KeyVaultSecret", keyVaultId, secretName, secretVersion?}` (seed 003 `auth`) | Key Vault directive |
//! | `{"type": "UserProvided", "value": v}` (seed 003 `auth`) | secure literal, user-provided |
//! | `{"apiReference": {method, armResourceId, apiVersion?, action?, query?, requestBody?, responseValuePath}}` (seed 000; a recorded `list*()` call) | API directive |
//! | `{"runtimeReference": {resourceId, action, propertyPath, apiVersion?}}` (seed 001; action `reference` = GET of the resource) | API directive |
//! | `{"type": "armApiCall", "apiCall" \| "value": {method, resourceId, apiVersion, path, query?, valueJsonPath}}` (seed 002) | API directive |
//! | `{"type": "armApiCall", "value": "[list...()]"}` (seed 002's input form) read through [`InputJson`] | deferred: the deployment evaluates the call and records it as an API directive |
//! | a value known only when the deployment runs | deferred |
//! | under the reserved `auth`: an object of items (REP 0006) | group; `auth: null` is refused |
//! | alias level `{"type": "object", "value": {...}}` / `{"type": "inherit", "value": "k8s"}` (seed 002) | properties / inherited ([`ConfigInput`]) |
//!
//! An API directive without `apiVersion` (seed 001 names none) calls with the version the resource was deployed
//! with; the resolver looks it up each time, at deployment and at delete alike.
//!
//! An item names exactly one of `value`, `keyVaultReference` and `apiReference` (seed spellings included). API
//! directives must be `GET` or `POST` (fetching a value must never change anything; a `GET` sends no body), name
//! a resource ID and have a parsable value path; Key Vault directives name a vault ID and a secret. Errors name
//! the property path and the fix and never quote a value.

use cairn_arm::ResourceId;
use cairn_arm::models::common::{KeyVaultParameterReference, KeyVaultReference};
use cairn_arm::models::extension::ApiReference;
use cairn_json::Node;
use serde_json::Value;

use crate::path::ValuePath;
use crate::value::{
    AUTH, Config, ConfigInput, ConfigValue, Directive, SecureLiteral, SecureOrigin, is_item_keys,
    wrapper_kinds,
};

/// How deep config groups may nest; deeper input is refused rather than recursed into.
const MAX_GROUP_DEPTH: usize = 16;

/// A value that is known only when the deployment runs: its template expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown(pub String);

/// Something holding a config value: JSON, a parameters file's node, or (in the template crate) an evaluated
/// value that may be known only when the deployment runs.
pub trait ConfigSource<'s>: Copy {
    /// The members, when this is an object.
    fn members(self) -> Option<Vec<(&'s str, Self)>>;
    fn as_str(self) -> Option<&'s str>;
    fn is_null(self) -> bool;
    /// The expression, when this value as a whole is known only when the deployment runs.
    fn unknown(self) -> Option<&'s str>;
    /// The value as JSON, or the expression of its first part known only when the deployment runs.
    fn to_json(self) -> Result<Value, Unknown>;
}

impl<'s> ConfigSource<'s> for &'s Value {
    fn members(self) -> Option<Vec<(&'s str, Self)>> {
        self.as_object()
            .map(|map| map.iter().map(|(k, v)| (k.as_str(), v)).collect())
    }

    fn as_str(self) -> Option<&'s str> {
        Value::as_str(self)
    }

    fn is_null(self) -> bool {
        Value::is_null(self)
    }

    fn unknown(self) -> Option<&'s str> {
        None
    }

    fn to_json(self) -> Result<Value, Unknown> {
        Ok(self.clone())
    }
}

impl<'s> ConfigSource<'s> for &'s Node {
    fn members(self) -> Option<Vec<(&'s str, Self)>> {
        self.as_object()
            .map(|members| members.iter().map(|m| (m.key.as_str(), &m.value)).collect())
    }

    fn as_str(self) -> Option<&'s str> {
        Node::as_str(self)
    }

    fn is_null(self) -> bool {
        Node::is_null(self)
    }

    fn unknown(self) -> Option<&'s str> {
        None
    }

    fn to_json(self) -> Result<Value, Unknown> {
        Ok(Node::to_json(self))
    }
}

/// Seed 002's input form `{"type": "armApiCall" | "apiCall", "value": "[list...()]"}`: the expression, when
/// `item` is one (exactly those two members, the value a template expression).
pub fn arm_api_call_expression(item: &Value) -> Option<&str> {
    call_expression(item)
}

/// [`arm_api_call_expression`] of any config source.
fn call_expression<'s, S: ConfigSource<'s>>(item: S) -> Option<&'s str> {
    let members = item.members()?;
    if members.len() != 2 {
        return None;
    }
    let member = |key: &str| {
        members
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
    };
    let declared = member("type")?.as_str()?;
    if !declared.eq_ignore_ascii_case("armApiCall") && !declared.eq_ignore_ascii_case("apiCall") {
        return None;
    }
    let expression = member("value")?.as_str()?;
    (expression.starts_with('[') && !expression.starts_with("[[") && expression.ends_with(']'))
        .then_some(expression)
}

/// A deployment input (a request's `extensionConfigs` as JSON, a parameters file's as nodes): read as its source
/// reads, except that the expression of seed 002's `{"type": "armApiCall", "value": "[list...()]"}` is known only
/// when the deployment runs, so the item reads as deferred instead of being refused. The deployment evaluates the
/// call against its own template and records it as an `apiReference`; nothing else may read input this way, so a
/// deferred value in an input's config is always such a call ([`crate::Config::to_input_wire`]).
#[derive(Clone, Copy, Debug)]
pub struct Input<S> {
    source: S,
    /// This is the `value` of an `armApiCall` item.
    call: bool,
}

/// A request's `extensionConfigs` read as deployment input.
pub type InputJson<'s> = Input<&'s Value>;

impl<S> Input<S> {
    pub fn new(source: S) -> Self {
        Self {
            source,
            call: false,
        }
    }
}

impl<'s, S: ConfigSource<'s>> ConfigSource<'s> for Input<S> {
    fn members(self) -> Option<Vec<(&'s str, Self)>> {
        let is_call = call_expression(self.source).is_some();
        self.source.members().map(|members| {
            members
                .into_iter()
                .map(|(k, v)| {
                    let call = is_call && k.eq_ignore_ascii_case("value");
                    (k, Input { source: v, call })
                })
                .collect()
        })
    }

    fn as_str(self) -> Option<&'s str> {
        (!self.call).then(|| self.source.as_str()).flatten()
    }

    fn is_null(self) -> bool {
        self.source.is_null()
    }

    fn unknown(self) -> Option<&'s str> {
        if self.call {
            self.source.as_str()
        } else {
            self.source.unknown()
        }
    }

    fn to_json(self) -> Result<Value, Unknown> {
        match self.unknown() {
            Some(expression) => Err(Unknown(expression.to_owned())),
            None => self.source.to_json(),
        }
    }
}

/// A config that cannot be read: the property path (dotted, `auth.kubeConfig`; empty for the config as a whole)
/// and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub property: String,
    pub kind: ConfigErrorKind,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.property.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "config property '{}': {}", self.property, self.kind)
        }
    }
}

impl ConfigError {
    pub fn new(kind: ConfigErrorKind) -> Self {
        Self {
            property: String::new(),
            kind,
        }
    }

    /// The same error one property further out.
    pub fn under(mut self, property: &str) -> Self {
        self.property = if self.property.is_empty() {
            property.to_owned()
        } else {
            format!("{property}.{}", self.property)
        };
        self
    }
}

/// Why a config value is refused. Messages end with the fix and never quote a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigErrorKind {
    #[error(
        "the value is secure ('{declared_type}') and was given literally; a stack never stores secrets, so it could \
         not supply it again when deleting resources. Fix: give it as a 'keyVaultReference' (or an 'apiReference' \
         to the ARM action that returns it)"
    )]
    SecureLiteral { declared_type: String },
    #[error(
        "the value is secure but has no 'keyVaultReference' or 'apiReference' to fetch it again, so the stack could \
         not supply it when deleting resources. Fix: give it as a 'keyVaultReference' (or an 'apiReference')"
    )]
    SecureWithoutDirective,
    #[error(
        "auth type 'UserProvided' carries a raw credential, which a stack can neither store nor fetch again when it \
         deletes resources. Fix: store the credential in a Key Vault secret and use auth type 'KeyVaultSecret' (or a \
         'keyVaultReference')"
    )]
    UserProvidedAuth,
    #[error(
        "auth type '{auth_type}' is not supported. Fix: use 'KeyVaultSecret', a 'keyVaultReference' or an \
         'apiReference'"
    )]
    UnknownAuthType { auth_type: String },
    #[error(
        "'{form}' holds an unevaluated template expression. Fix: deploy through the stack so the deployment engine \
         evaluates it and records an 'apiReference'"
    )]
    UnevaluatedExpression { form: &'static str },
    #[error("'{form}' needs '{field}'. Fix: {fix}")]
    MissingField {
        form: &'static str,
        field: &'static str,
        fix: &'static str,
    },
    #[error("'{form}.{field}' must be {expected}")]
    InvalidField {
        form: &'static str,
        field: &'static str,
        expected: &'static str,
    },
    #[error(
        "'apiReference.method' is '{method}'; only GET and POST are evaluated, because fetching a config value must \
         never change anything. Fix: use the ARM action that returns the value (e.g. POST listClusterAdminCredential)"
    )]
    UnsupportedMethod { method: String },
    #[error(
        "the item names more than one of 'value', 'keyVaultReference' and 'apiReference' (or their seed spellings \
         'reference', 'runtimeReference', 'apiCall'), but a config item holds exactly one. Fix: keep the one you mean"
    )]
    Ambiguous,
    #[error(
        "expected a config item such as {{\"value\": ...}}, {{\"keyVaultReference\": ...}} or \
         {{\"apiReference\": ...}}"
    )]
    NotAnItem,
    #[error("the config nests more than {MAX_GROUP_DEPTH} levels deep")]
    TooDeep,
    #[error(
        "the reserved config property 'auth' may not be null. Fix: give its secure properties as an object (such as \
         {{\"kubeConfig\": {{\"keyVaultReference\": ...}}}}), or leave 'auth' out"
    )]
    AuthNull,
    #[error(
        "the config inherits from extension alias '{from}', which has no config here. Fix: pass the config of an \
         alias declared by the parent deployment"
    )]
    UnknownInheritance { from: String },
    #[error("an extension config must be a JSON object of properties")]
    NotAnObject,
}

/// Why an item did not become a value: refused, or known only when the deployment runs.
enum Fail {
    Invalid(ConfigErrorKind),
    Unknown(String),
}

impl From<ConfigErrorKind> for Fail {
    fn from(kind: ConfigErrorKind) -> Self {
        Self::Invalid(kind)
    }
}

impl From<Unknown> for Fail {
    fn from(unknown: Unknown) -> Self {
        Self::Unknown(unknown.0)
    }
}

type Parsed<T> = Result<T, Fail>;

type Members<'s, S> = [(&'s str, S)];

fn get<'s, S: ConfigSource<'s>>(members: &Members<'s, S>, key: &str) -> Option<S> {
    members
        .iter()
        .find(|(k, _)| *k == key)
        .or_else(|| members.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)))
        .map(|(_, v)| *v)
}

fn keys<'a, 's, S>(members: &'a Members<'s, S>) -> impl Iterator<Item = &'s str> + 'a {
    members.iter().map(|(k, _)| *k)
}

fn is_secure_type(declared: &str) -> bool {
    declared.eq_ignore_ascii_case("securestring") || declared.eq_ignore_ascii_case("secureobject")
}

/// Seed 003's discriminated auth (`{"type": "KeyVaultSecret" | "UserProvided", ...}`, or any `type` beside a
/// `keyVaultId`): the type.
fn seed003_type<'s, S: ConfigSource<'s>>(members: &Members<'s, S>) -> Option<&'s str> {
    let declared = get(members, "type")?.as_str()?;
    (declared.eq_ignore_ascii_case("KeyVaultSecret")
        || declared.eq_ignore_ascii_case("UserProvided")
        || get(members, "keyVaultId").is_some())
    .then_some(declared)
}

/// Whether an object is a group of properties rather than an item (only `auth` holds groups).
fn is_group<'s, S: ConfigSource<'s>>(members: &Members<'s, S>) -> bool {
    seed003_type(members).is_none() && !is_item_keys(keys(members))
}

impl Config {
    /// Reads an alias's properties (a JSON object); the first property that cannot be read refuses the config.
    pub fn parse<'s, S: ConfigSource<'s>>(properties: S) -> Result<Config, ConfigError> {
        let members = properties
            .members()
            .ok_or_else(|| ConfigError::new(ConfigErrorKind::NotAnObject))?;
        let mut config = Config::default();
        for (name, value) in members {
            config.insert(name, ConfigValue::parse_property(name, value)?);
        }
        Ok(config)
    }

    /// Reads each property on its own: the config of those that can be read, and an error for each other.
    pub fn read<'s, S: ConfigSource<'s>>(
        properties: impl IntoIterator<Item = (&'s str, S)>,
    ) -> (Config, Vec<ConfigError>) {
        let mut config = Config::default();
        let mut errors = Vec::new();
        for (name, value) in properties {
            match ConfigValue::parse_property(name, value) {
                Ok(parsed) => config.insert(name, parsed),
                Err(error) => errors.push(error),
            }
        }
        (config, errors)
    }
}

impl ConfigValue {
    /// Reads one top-level property: the reserved `auth` (a group, or seed 003's one credential) or any other
    /// item. Errors name the property path.
    pub fn parse_property<'s, S: ConfigSource<'s>>(
        name: &str,
        value: S,
    ) -> Result<ConfigValue, ConfigError> {
        let parsed = if name.eq_ignore_ascii_case(AUTH) {
            auth(value)
        } else {
            ConfigValue::parse(value)
        };
        parsed.map_err(|error| error.under(name))
    }

    /// Reads one config item (see the module docs); anything that is not an item is a literal.
    pub fn parse<'s, S: ConfigSource<'s>>(value: S) -> Result<ConfigValue, ConfigError> {
        match item(value) {
            Ok(parsed) => Ok(parsed),
            Err(Fail::Unknown(expression)) => Ok(ConfigValue::Deferred(expression)),
            Err(Fail::Invalid(kind)) => Err(ConfigError::new(kind)),
        }
    }

    /// A literal of `value` as it is (a declaration's default), or deferred when it is known only when the
    /// deployment runs.
    pub fn literal<'s, S: ConfigSource<'s>>(value: S) -> ConfigValue {
        match value.to_json() {
            Ok(json) => ConfigValue::Literal(json),
            Err(Unknown(expression)) => ConfigValue::Deferred(expression),
        }
    }
}

impl ConfigInput {
    /// Reads what a deployment gives one alias: an object of properties, seed 002's `{"type": "object", "value":
    /// {...}}` or `{"type": "inherit", "value": "<alias>"}`, or a value known only when the deployment runs.
    pub fn parse<'s, S: ConfigSource<'s>>(value: S) -> Result<ConfigInput, ConfigError> {
        if let Some(expression) = value.unknown() {
            return Ok(ConfigInput::Deferred(expression.to_owned()));
        }
        let members = value
            .members()
            .ok_or_else(|| ConfigError::new(ConfigErrorKind::NotAnObject))?;
        let declared = get(&members, "type").and_then(S::as_str);
        if let (Some(declared), Some(wrapped), 2) =
            (declared, get(&members, "value"), members.len())
        {
            if let Some(expression) = wrapped.unknown() {
                return Ok(ConfigInput::Deferred(expression.to_owned()));
            }
            if declared.eq_ignore_ascii_case("inherit") {
                return wrapped
                    .as_str()
                    .map(|alias| ConfigInput::Inherit(alias.to_owned()))
                    .ok_or_else(|| {
                        ConfigError::new(ConfigErrorKind::InvalidField {
                            form: "inherit",
                            field: "value",
                            expected: "the parent deployment's extension alias",
                        })
                    });
            }
            if declared.eq_ignore_ascii_case("object") {
                return Config::parse(wrapped).map(ConfigInput::Properties);
            }
        }
        Config::parse(value).map(ConfigInput::Properties)
    }
}

/// The reserved `auth`: a group of secure properties (REP 0006: nested groups, items, bare values) or one
/// credential (an item, or seed 003's discriminated form). `null` is refused.
fn auth<'s, S: ConfigSource<'s>>(value: S) -> Result<ConfigValue, ConfigError> {
    if value.is_null() {
        return Err(ConfigError::new(ConfigErrorKind::AuthNull));
    }
    match value.members() {
        Some(members) if is_group(&members) => group(&members, 1).map(ConfigValue::Group),
        _ => ConfigValue::parse(value),
    }
}

fn group<'s, S: ConfigSource<'s>>(
    members: &Members<'s, S>,
    depth: usize,
) -> Result<Config, ConfigError> {
    if depth > MAX_GROUP_DEPTH {
        return Err(ConfigError::new(ConfigErrorKind::TooDeep));
    }
    let mut config = Config::default();
    for (name, member) in members {
        let parsed = match member.members() {
            Some(inner) if is_group(&inner) => group(&inner, depth + 1).map(ConfigValue::Group),
            _ => ConfigValue::parse(*member),
        };
        config.insert(*name, parsed.map_err(|error| error.under(name))?);
    }
    Ok(config)
}

fn item<'s, S: ConfigSource<'s>>(value: S) -> Parsed<ConfigValue> {
    let Some(members) = value.members() else {
        return literal(value);
    };
    if let Some(declared) = seed003_type(&members) {
        return auth_credential(&members, declared);
    }
    if !is_item_keys(keys(&members)) {
        return literal(value);
    }
    if wrapper_kinds(keys(&members)).len() > 1 {
        return Err(ConfigErrorKind::Ambiguous.into());
    }
    if let Some(reference) = get(&members, "keyVaultReference") {
        return key_vault_reference("keyVaultReference", reference);
    }
    if let Some(reference) = get(&members, "reference") {
        return key_vault_reference("reference", reference);
    }
    if let Some(reference) = get(&members, "apiReference") {
        return api_reference(reference);
    }
    if let Some(reference) = get(&members, "runtimeReference") {
        return runtime_reference(reference);
    }
    if let Some(call) = get(&members, "apiCall").or_else(|| get(&members, "armApiCall")) {
        return api_call(call);
    }
    // An item with no other wrapper holds `value` (see `is_item_keys`).
    let Some(inner) = get(&members, "value") else {
        return literal(value);
    };
    match get(&members, "type").and_then(S::as_str) {
        Some(declared) if is_secure_type(declared) => {
            Ok(ConfigValue::SecureLiteral(SecureLiteral::new(
                SecureOrigin::Declared(declared.to_owned()),
                inner.to_json()?,
            )))
        }
        Some(declared) if declared.eq_ignore_ascii_case("keyVaultReference") => {
            key_vault_reference("keyVaultReference", inner)
        }
        Some(declared)
            if declared.eq_ignore_ascii_case("armApiCall")
                || declared.eq_ignore_ascii_case("apiCall") =>
        {
            if let Some(expression) = inner.unknown() {
                // The call is made when the deployment runs (see `InputJson`).
                Err(Fail::Unknown(expression.to_owned()))
            } else if inner.members().is_some() {
                api_call(inner)
            } else {
                // Seed 002's input form `{"type": "armApiCall", "value": "[list...()]"}`: the call's result, not
                // how to make it (a module's `list*()` value is recorded as an `apiReference` instead).
                Err(ConfigErrorKind::UnevaluatedExpression { form: "armApiCall" }.into())
            }
        }
        _ => literal(inner),
    }
}

fn literal<'s, S: ConfigSource<'s>>(value: S) -> Parsed<ConfigValue> {
    Ok(ConfigValue::Literal(value.to_json()?))
}

/// Seed 003's `{"type": "KeyVaultSecret", keyVaultId, secretName, secretVersion?}` or `{"type": "UserProvided",
/// "value": ...}`.
fn auth_credential<'s, S: ConfigSource<'s>>(
    members: &Members<'s, S>,
    declared: &str,
) -> Parsed<ConfigValue> {
    if declared.eq_ignore_ascii_case("UserProvided") {
        let value = match get(members, "value") {
            Some(value) => value.to_json()?,
            None => Value::Null,
        };
        return Ok(ConfigValue::SecureLiteral(SecureLiteral::new(
            SecureOrigin::UserProvided,
            value,
        )));
    }
    if !declared.eq_ignore_ascii_case("KeyVaultSecret") {
        return Err(ConfigErrorKind::UnknownAuthType {
            auth_type: declared.to_owned(),
        }
        .into());
    }
    const FORM: &str = "KeyVaultSecret";
    const FIX: &str = "give 'keyVaultId' and 'secretName'";
    let vault_id = resource_id(
        required(members, FORM, "keyVaultId", FIX)?,
        FORM,
        "keyVaultId",
    )?;
    Ok(ConfigValue::Directive(Directive::KeyVaultReference(
        KeyVaultParameterReference {
            key_vault: KeyVaultReference { id: vault_id },
            secret_name: required(members, FORM, "secretName", FIX)?.to_owned(),
            secret_version: optional(members, FORM, "secretVersion")?,
        },
    )))
}

/// The members of a directive object.
fn object<'s, S: ConfigSource<'s>>(value: S, form: &'static str) -> Parsed<Vec<(&'s str, S)>> {
    if let Some(expression) = value.unknown() {
        return Err(Fail::Unknown(expression.to_owned()));
    }
    value
        .members()
        .ok_or(Fail::Invalid(ConfigErrorKind::InvalidField {
            form,
            field: "",
            expected: "an object",
        }))
}

/// A required, non-empty string field of a directive object.
fn required<'s, S: ConfigSource<'s>>(
    members: &Members<'s, S>,
    form: &'static str,
    field: &'static str,
    fix: &'static str,
) -> Parsed<&'s str> {
    let missing = ConfigErrorKind::MissingField { form, field, fix };
    let Some(value) = get(members, field).filter(|v| !v.is_null()) else {
        return Err(missing.into());
    };
    if let Some(expression) = value.unknown() {
        return Err(Fail::Unknown(expression.to_owned()));
    }
    match value.as_str() {
        Some(text) if !text.trim().is_empty() => Ok(text),
        _ => Err(ConfigErrorKind::InvalidField {
            form,
            field,
            expected: "a non-empty string",
        }
        .into()),
    }
}

/// An optional string field; an empty string counts as absent.
fn optional<'s, S: ConfigSource<'s>>(
    members: &Members<'s, S>,
    form: &'static str,
    field: &'static str,
) -> Parsed<Option<String>> {
    let Some(value) = get(members, field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    if let Some(expression) = value.unknown() {
        return Err(Fail::Unknown(expression.to_owned()));
    }
    match value.as_str() {
        Some("") => Ok(None),
        Some(text) => Ok(Some(text.to_owned())),
        None => Err(ConfigErrorKind::InvalidField {
            form,
            field,
            expected: "a string",
        }
        .into()),
    }
}

fn resource_id(id: &str, form: &'static str, field: &'static str) -> Parsed<String> {
    ResourceId::parse(id).map(|_| id.to_owned()).map_err(|_| {
        ConfigErrorKind::InvalidField {
            form,
            field,
            expected: "an ARM resource ID",
        }
        .into()
    })
}

const KV_FIX: &str = "name the vault and the secret: {\"keyVault\": {\"id\": \"<vault id>\"}, \"secretName\": \"<name>\"}";

fn key_vault_reference<'s, S: ConfigSource<'s>>(
    form: &'static str,
    value: S,
) -> Parsed<ConfigValue> {
    let members = object(value, form)?;
    let vault = match get(&members, "keyVault").filter(|v| !v.is_null()) {
        None => {
            return Err(ConfigErrorKind::MissingField {
                form,
                field: "keyVault",
                fix: KV_FIX,
            }
            .into());
        }
        Some(vault) => object(vault, form)?,
    };
    let vault_id = resource_id(required(&vault, form, "id", KV_FIX)?, form, "keyVault.id")?;
    Ok(ConfigValue::Directive(Directive::KeyVaultReference(
        KeyVaultParameterReference {
            key_vault: KeyVaultReference { id: vault_id },
            secret_name: required(&members, form, "secretName", KV_FIX)?.to_owned(),
            secret_version: optional(&members, form, "secretVersion")?,
        },
    )))
}

/// An optional JSON request body (`requestBody`; a `list*()` call's third argument).
fn request_body<'s, S: ConfigSource<'s>>(
    members: &Members<'s, S>,
    form: &'static str,
) -> Parsed<Option<Value>> {
    let Some(body) = get(members, "requestBody").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match body.to_json()? {
        body @ (Value::Object(_) | Value::Array(_)) => Ok(Some(body)),
        _ => Err(ConfigErrorKind::InvalidField {
            form,
            field: "requestBody",
            expected: "a JSON object or array",
        }
        .into()),
    }
}

/// A query string without its leading `?`; empty counts as absent.
fn query<'s, S: ConfigSource<'s>>(
    members: &Members<'s, S>,
    form: &'static str,
) -> Parsed<Option<String>> {
    Ok(optional(members, form, "query")?
        .map(|q| q.trim_start_matches('?').to_owned())
        .filter(|q| !q.is_empty()))
}

/// Checks an API directive: `GET` or `POST` (a `GET` sends no body), a resource ID, a parsable value path.
fn api_directive(reference: ApiReference, form: &'static str) -> Parsed<ConfigValue> {
    let method = reference.method.to_ascii_uppercase();
    if method != "GET" && method != "POST" {
        return Err(ConfigErrorKind::UnsupportedMethod {
            method: reference.method,
        }
        .into());
    }
    if method == "GET" && reference.request_body.is_some() {
        return Err(ConfigErrorKind::InvalidField {
            form,
            field: "requestBody",
            expected: "absent for a GET (only a POST action sends a body)",
        }
        .into());
    }
    resource_id(&reference.arm_resource_id, form, "armResourceId")?;
    ValuePath::parse(&reference.response_value_path).map_err(|_| {
        ConfigErrorKind::InvalidField {
            form,
            field: "responseValuePath",
            expected: "a value path such as 'kubeconfigs[0].value'",
        }
    })?;
    Ok(ConfigValue::Directive(Directive::ApiReference(
        ApiReference {
            method,
            ..reference
        },
    )))
}

const API_FIX: &str = "give method, armResourceId, action and responseValuePath (and apiVersion)";

fn api_reference<'s, S: ConfigSource<'s>>(value: S) -> Parsed<ConfigValue> {
    const FORM: &str = "apiReference";
    let members = object(value, FORM)?;
    let reference = ApiReference {
        method: required(&members, FORM, "method", API_FIX)?.to_owned(),
        arm_resource_id: required(&members, FORM, "armResourceId", API_FIX)?.to_owned(),
        // Absent: the version the resource was deployed with (a persisted seed 001 `runtimeReference`).
        api_version: optional(&members, FORM, "apiVersion")?.unwrap_or_default(),
        // An empty action means a GET of the resource itself.
        action: optional(&members, FORM, "action")?.unwrap_or_default(),
        query: query(&members, FORM)?,
        request_body: request_body(&members, FORM)?,
        response_value_path: required(&members, FORM, "responseValuePath", API_FIX)?.to_owned(),
    };
    api_directive(reference, FORM)
}

fn runtime_reference<'s, S: ConfigSource<'s>>(value: S) -> Parsed<ConfigValue> {
    const FORM: &str = "runtimeReference";
    const FIX: &str = "give resourceId, action and propertyPath";
    let members = object(value, FORM)?;
    let action = required(&members, FORM, "action", FIX)?;
    // Seed 001: "reference" reads the resource itself; anything else is a POST action (`list*`).
    let (method, action) = if action.eq_ignore_ascii_case("reference") {
        ("GET", String::new())
    } else {
        ("POST", action.to_owned())
    };
    let reference = ApiReference {
        method: method.to_owned(),
        arm_resource_id: required(&members, FORM, "resourceId", FIX)?.to_owned(),
        // Seed 001 names no version: the one the resource was deployed with (see the module docs).
        api_version: optional(&members, FORM, "apiVersion")?.unwrap_or_default(),
        action,
        query: None,
        request_body: None,
        response_value_path: required(&members, FORM, "propertyPath", FIX)?.to_owned(),
    };
    api_directive(reference, FORM)
}

fn api_call<'s, S: ConfigSource<'s>>(value: S) -> Parsed<ConfigValue> {
    const FORM: &str = "apiCall";
    const FIX: &str = "give method, resourceId, apiVersion, path and valueJsonPath";
    let members = object(value, FORM)?;
    let path = optional(&members, FORM, "path")?.unwrap_or_default();
    let reference = ApiReference {
        method: required(&members, FORM, "method", FIX)?.to_owned(),
        arm_resource_id: required(&members, FORM, "resourceId", FIX)?.to_owned(),
        api_version: required(&members, FORM, "apiVersion", FIX)?.to_owned(),
        action: path.trim_start_matches('/').to_owned(),
        query: query(&members, FORM)?,
        request_body: request_body(&members, FORM)?,
        response_value_path: required(&members, FORM, "valueJsonPath", FIX)?.to_owned(),
    };
    api_directive(reference, FORM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VAULT: &str =
        "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv";
    const AKS: &str = "/subscriptions/s/resourceGroups/app/providers/Microsoft.ContainerService/managedClusters/aks";

    fn kv(secret: &str) -> ConfigValue {
        ConfigValue::Directive(Directive::KeyVaultReference(KeyVaultParameterReference {
            key_vault: KeyVaultReference { id: VAULT.into() },
            secret_name: secret.into(),
            secret_version: None,
        }))
    }

    fn aks_credentials(path: &str) -> ConfigValue {
        ConfigValue::Directive(Directive::ApiReference(ApiReference {
            method: "POST".into(),
            arm_resource_id: AKS.into(),
            api_version: "2024-02-01".into(),
            action: "listClusterAdminCredential".into(),
            query: None,
            request_body: None,
            response_value_path: path.into(),
        }))
    }

    fn one(item: Value) -> Result<ConfigValue, ConfigError> {
        ConfigValue::parse_property("kubeConfig", &item)
    }

    fn refused(item: Value) -> ConfigErrorKind {
        one(item).unwrap_err().kind
    }

    #[test]
    fn literal_forms() {
        for (form, value) in [
            (json!({"value": "apps"}), json!("apps")),
            (json!({"type": "String", "value": "apps"}), json!("apps")),
            (json!("apps"), json!("apps")),
            (json!(3), json!(3)),
            (json!(null), json!(null)),
            // Any object that is not an item is a bare value (seed 003, a module's createObject).
            (json!({"a": 1}), json!({"a": 1})),
            (json!({"type": "aks"}), json!({"type": "aks"})),
            (
                json!({"value": 1, "extra": 2}),
                json!({"value": 1, "extra": 2}),
            ),
            (json!({"value": {"nested": [1]}}), json!({"nested": [1]})),
        ] {
            assert_eq!(
                one(form.clone()).unwrap(),
                ConfigValue::Literal(value),
                "{form}"
            );
        }
    }

    #[test]
    fn secure_literal_forms() {
        let declared = one(json!({"type": "SecureString", "value": "s3cr3t"})).unwrap();
        let ConfigValue::SecureLiteral(secure) = &declared else {
            panic!("a declared secure value is a secure literal: {declared:?}");
        };
        assert_eq!(
            secure.origin(),
            &SecureOrigin::Declared("SecureString".into())
        );
        assert_eq!(secure.expose(), &json!("s3cr3t"));
        assert_eq!(
            declared.to_wire(),
            json!({"type": "SecureString", "value": "s3cr3t"}),
            "the wire form keeps it secure"
        );
        let user =
            ConfigValue::parse_property("auth", &json!({"type": "UserProvided", "value": "raw"}))
                .unwrap();
        let ConfigValue::SecureLiteral(secure) = &user else {
            panic!("seed 003's user-provided auth is a secure literal: {user:?}");
        };
        assert!(secure.is_user_provided());
        assert_eq!(
            user.to_wire(),
            json!({"type": "UserProvided", "value": "raw"})
        );
        for value in [declared, user] {
            let shown = format!("{value:?}");
            assert!(
                !shown.contains("s3cr3t") && !shown.contains("raw"),
                "{shown}"
            );
        }
    }

    #[test]
    fn key_vault_forms_normalise_alike() {
        let reference = json!({"keyVault": {"id": VAULT}, "secretName": "kc"});
        for form in [
            json!({"keyVaultReference": reference}),
            json!({"type": "SecureString", "keyVaultReference": reference}),
            json!({"reference": reference}),
            json!({"type": "keyVaultReference", "keyVaultReference": reference}),
            json!({"type": "keyVaultReference", "value": reference}),
            json!({"type": "KeyVaultSecret", "keyVaultId": VAULT, "secretName": "kc"}),
        ] {
            assert_eq!(one(form.clone()).unwrap(), kv("kc"), "{form}");
        }
        let versioned = one(json!({"type": "KeyVaultSecret", "keyVaultId": VAULT,
            "secretName": "kc", "secretVersion": "v2"}))
        .unwrap();
        assert_eq!(
            versioned.to_wire(),
            json!({"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc", "secretVersion": "v2"}})
        );
    }

    #[test]
    fn api_forms_normalise_alike() {
        let seed_000 = json!({"type": "securestring", "apiReference": {"method": "post", "armResourceId": AKS,
            "apiVersion": "2024-02-01", "action": "listClusterAdminCredential", "responseValuePath": "kubeconfigs[0].value"}});
        let seed_001 = json!({"runtimeReference": {"resourceId": AKS, "apiVersion": "2024-02-01",
            "action": "listClusterAdminCredential", "propertyPath": "kubeconfigs[0].value"}});
        let call = json!({"method": "POST", "resourceId": AKS, "apiVersion": "2024-02-01",
            "path": "/listClusterAdminCredential", "query": "?", "valueJsonPath": "kubeconfigs[0].value"});
        let seed_002 = json!({"type": "armApiCall", "apiCall": call});
        let seed_002_key = json!({"type": "armApiCall", "armApiCall": call});
        let seed_002_value = json!({"type": "apiCall", "value": call});
        for form in [seed_000, seed_001, seed_002, seed_002_key, seed_002_value] {
            assert_eq!(
                one(form.clone()).unwrap(),
                aks_credentials("kubeconfigs[0].value"),
                "{form}"
            );
        }
        // A recorded `list*()` value keeps its query and body.
        let recorded = one(json!({"apiReference": {"method": "POST", "armResourceId": AKS, "apiVersion": "2024-02-01",
            "action": "listCredential", "query": "?format=exec", "requestBody": {"scope": "admin"},
            "responseValuePath": "$"}}))
        .unwrap();
        assert_eq!(
            recorded.to_wire()["apiReference"],
            json!({"method": "POST", "armResourceId": AKS, "apiVersion": "2024-02-01", "action": "listCredential",
                   "query": "format=exec", "requestBody": {"scope": "admin"}, "responseValuePath": "$"})
        );
    }

    #[test]
    fn runtime_reference_to_reference_is_a_get() {
        let ConfigValue::Directive(Directive::ApiReference(api)) = one(json!({"runtimeReference": {
            "resourceId": AKS, "apiVersion": "2024-02-01", "action": "reference", "propertyPath": "properties.fqdn"}}))
        .unwrap() else {
            panic!("expected an API directive")
        };
        assert_eq!((api.method.as_str(), api.action.as_str()), ("GET", ""));
    }

    /// Seed 001 records `{resourceId, action, propertyPath}` and no API version: the directive calls with the
    /// version the resource was deployed with, and keeps saying so (no `apiVersion`) through every round trip.
    #[test]
    fn runtime_reference_without_api_version_round_trips() {
        let cases = [
            (
                json!({"runtimeReference": {"resourceId": AKS, "action": "listClusterAdminCredential",
                    "propertyPath": "$.kubeconfigs[0].value"}}),
                json!({"apiReference": {"method": "POST", "armResourceId": AKS,
                    "action": "listClusterAdminCredential", "responseValuePath": "$.kubeconfigs[0].value"}}),
            ),
            (
                json!({"runtimeReference": {"resourceId": AKS, "action": "reference",
                    "propertyPath": "properties.fqdn", "apiVersion": ""}}),
                json!({"apiReference": {"method": "GET", "armResourceId": AKS,
                    "responseValuePath": "properties.fqdn"}}),
            ),
            // The persisted form reads back as itself.
            (
                json!({"apiReference": {"method": "POST", "armResourceId": AKS, "action": "listX",
                    "responseValuePath": "a"}}),
                json!({"apiReference": {"method": "POST", "armResourceId": AKS, "action": "listX",
                    "responseValuePath": "a"}}),
            ),
        ];
        for (form, wire) in cases {
            let parsed = one(form.clone()).unwrap();
            let ConfigValue::Directive(Directive::ApiReference(api)) = &parsed else {
                panic!("an API directive: {parsed:?}");
            };
            assert_eq!(api.api_version, "", "{form}");
            assert_eq!(parsed.to_wire(), wire, "{form}");
            assert_eq!(one(wire.clone()).unwrap(), parsed, "{form}");
            let config: Config =
                serde_json::from_value(json!({ "kubeConfig": form.clone() })).unwrap();
            let stored = serde_json::to_string(&config).unwrap();
            let read: Config = serde_json::from_str(&stored).unwrap();
            assert_eq!(read, config, "{form}");
            let arm = serde_json::to_value(config.to_arm()).unwrap();
            assert_eq!(arm["kubeConfig"], wire, "{form}");
        }
    }

    /// Seed 002's `{"type": "armApiCall", "value": "[list...()]"}` is deferred to the deployment when read as a
    /// deployment's input, and refused anywhere else (a record or a stack must hold the recorded call).
    #[test]
    fn arm_api_call_expressions_are_deferred_only_in_deployment_input() {
        const CALL: &str = "[listClusterAdminCredential(resourceId('Microsoft.ContainerService/managedClusters', parameters('clusterName')), '2024-02-01').kubeconfigs[0].value]";
        let item = json!({"type": "armApiCall", "value": CALL});
        for (name, value) in [
            ("kubeConfig", item.clone()),
            ("kubeConfig", json!({"type": "apiCall", "value": CALL})),
        ] {
            assert_eq!(
                ConfigValue::parse_property(name, InputJson::new(&value)).unwrap(),
                ConfigValue::Deferred(CALL.into()),
                "{value}"
            );
            assert_eq!(
                refused(value),
                ConfigErrorKind::UnevaluatedExpression { form: "armApiCall" }
            );
        }
        let config =
            json!({"namespace": {"value": "[not-evaluated]"}, "auth": {"kubeConfig": item}});
        let read = Config::parse(InputJson::new(&config)).unwrap();
        assert_eq!(
            read.first_deferred(),
            Some((vec!["auth".to_owned(), "kubeConfig".to_owned()], CALL))
        );
        assert_eq!(
            read.get("namespace"),
            Some(&ConfigValue::Literal(json!("[not-evaluated]"))),
            "only an armApiCall item's value is an expression"
        );
        for not_a_call in [
            json!({"type": "armApiCall", "value": "[[escaped]"}),
            json!({"type": "string", "value": CALL}),
            json!({"type": "armApiCall", "value": CALL, "extra": 1}),
        ] {
            assert_eq!(arm_api_call_expression(&not_a_call), None, "{not_a_call}");
        }
        assert_eq!(arm_api_call_expression(&item), Some(CALL));
    }

    #[test]
    fn malformed_items_are_refused() {
        assert_eq!(
            refused(json!({"type": "armApiCall", "value": "[listClusterAdminCredential(...)]"})),
            ConfigErrorKind::UnevaluatedExpression { form: "armApiCall" }
        );
        assert!(matches!(
            refused(
                json!({"runtimeReference": {"resourceId": AKS, "action": "listX", "apiVersion": "1"}})
            ),
            ConfigErrorKind::MissingField {
                form: "runtimeReference",
                field: "propertyPath",
                ..
            }
        ));
        assert!(matches!(
            refused(
                json!({"apiReference": {"method": "DELETE", "armResourceId": AKS, "apiVersion": "1",
                "action": "x", "responseValuePath": "a"}})
            ),
            ConfigErrorKind::UnsupportedMethod { .. }
        ));
        assert!(matches!(
            refused(
                json!({"apiReference": {"method": "GET", "armResourceId": AKS, "apiVersion": "1",
                "requestBody": {}, "responseValuePath": "a"}})
            ),
            ConfigErrorKind::InvalidField {
                field: "requestBody",
                ..
            }
        ));
        assert!(matches!(
            refused(
                json!({"keyVaultReference": {"keyVault": {"id": "not-an-id"}, "secretName": "kc"}})
            ),
            ConfigErrorKind::InvalidField {
                field: "keyVault.id",
                ..
            }
        ));
        assert!(matches!(
            refused(json!({"keyVaultReference": {}})),
            ConfigErrorKind::MissingField {
                field: "keyVault",
                ..
            }
        ));
        assert!(matches!(
            refused(
                json!({"apiReference": {"method": "POST", "armResourceId": AKS, "apiVersion": "1",
                "action": "x", "responseValuePath": "a..b"}})
            ),
            ConfigErrorKind::InvalidField {
                field: "responseValuePath",
                ..
            }
        ));
        assert!(matches!(
            refused(json!({"type": "KeyVaultSecret", "secretName": "s"})),
            ConfigErrorKind::MissingField {
                form: "KeyVaultSecret",
                field: "keyVaultId",
                ..
            }
        ));
        assert_eq!(
            refused(json!({"type": "Kerberos", "keyVaultId": VAULT})),
            ConfigErrorKind::UnknownAuthType {
                auth_type: "Kerberos".into()
            }
        );
    }

    #[test]
    fn wrappers_are_mutually_exclusive() {
        let reference = json!({"keyVault": {"id": VAULT}, "secretName": "s"});
        for item in [
            json!({"value": "x", "keyVaultReference": reference}),
            json!({"value": "x", "apiReference": {"armResourceId": AKS}}),
            json!({"reference": reference, "runtimeReference": {}}),
        ] {
            let error = one(item).unwrap_err();
            assert_eq!(error.kind, ConfigErrorKind::Ambiguous);
            assert!(error.to_string().contains("exactly one"), "{error}");
        }
    }

    #[test]
    fn errors_never_quote_values() {
        for item in [
            json!({"type": "SecureString", "value": "s3cr3t", "keyVaultReference": {}}),
            json!({"keyVaultReference": {"keyVault": {"id": "s3cr3t"}, "secretName": "kc"}}),
            json!({"apiReference": {"method": "POST", "armResourceId": "s3cr3t", "apiVersion": "1",
                "action": "x", "responseValuePath": "a"}}),
        ] {
            let error = one(item).unwrap_err().to_string();
            assert!(
                error.starts_with("config property 'kubeConfig': "),
                "{error}"
            );
            assert!(!error.contains("s3cr3t"), "{error}");
        }
    }

    #[test]
    fn auth_groups_nest_and_null_is_refused() {
        let config = Config::parse(&json!({
            "auth": {"kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}},
                     "inner": {"token": "t", "deeper": {}}},
            "namespace": {"value": "default"},
            "cluster": "myCluster"
        }))
        .unwrap();
        let ConfigValue::Group(auth) = config.get("AUTH").unwrap() else {
            panic!("auth is a group: {config:?}");
        };
        assert_eq!(auth.get("kubeConfig"), Some(&kv("kc")));
        let ConfigValue::Group(inner) = auth.get("inner").unwrap() else {
            panic!("a nested group: {auth:?}");
        };
        assert_eq!(inner.get("token"), Some(&ConfigValue::Literal(json!("t"))));
        assert_eq!(
            config
                .directives()
                .into_iter()
                .map(|(path, _)| path)
                .collect::<Vec<_>>(),
            vec![vec!["auth".to_owned(), "kubeConfig".to_owned()]]
        );
        // Seed 003: `auth` is the one credential.
        assert_eq!(
            ConfigValue::parse_property(
                "auth",
                &json!({"type": "KeyVaultSecret", "keyVaultId": VAULT, "secretName": "kc"})
            )
            .unwrap(),
            kv("kc")
        );
        let error = Config::parse(&json!({"auth": null})).unwrap_err();
        assert_eq!(
            (error.property.as_str(), &error.kind),
            ("auth", &ConfigErrorKind::AuthNull)
        );
        assert!(error.to_string().contains("null"), "{error}");
        let error =
            Config::parse(&json!({"auth": {"kubeConfig": {"value": 1, "apiReference": {}}}}))
                .unwrap_err();
        assert_eq!(error.property, "auth.kubeConfig");
        let mut deep = json!({"leaf": 1});
        for level in 0..20 {
            deep = json!({ format!("g{level}"): deep });
        }
        assert_eq!(
            Config::parse(&json!({"auth": deep})).unwrap_err().kind,
            ConfigErrorKind::TooDeep
        );
    }

    #[test]
    fn parameters_file_nodes_parse_like_json() {
        let text = r#"{"namespace": {"value": "apps"}, // a comment
            "kubeConfig": {"reference": {"keyVault": {"id": "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv"}, "secretName": "kc"}}}"#;
        let node = cairn_json::parse(text).unwrap();
        let from_node = Config::parse(&node).unwrap();
        let from_json = Config::parse(&node.to_json()).unwrap();
        assert_eq!(from_node, from_json);
        assert_eq!(from_node.get("kubeConfig"), Some(&kv("kc")));
        let (read, errors) = Config::read(
            node.as_object()
                .unwrap()
                .iter()
                .map(|m| (m.key.as_str(), &m.value))
                .chain([(
                    "bad",
                    &cairn_json::Node::from_json(&json!({"keyVaultReference": 1})),
                )]),
        );
        assert_eq!(
            read, from_node,
            "the bad property is left out, the others kept"
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].property, "bad");
    }

    #[test]
    fn alias_inputs() {
        let properties = json!({"namespace": {"type": "string", "value": "apps"}});
        let plain = ConfigInput::parse(&properties).unwrap();
        assert_eq!(
            ConfigInput::parse(&json!({"type": "object", "value": properties})).unwrap(),
            plain
        );
        assert_eq!(
            ConfigInput::parse(&json!({"type": "inherit", "value": "k8s"})).unwrap(),
            ConfigInput::Inherit("k8s".into())
        );
        assert!(ConfigInput::parse(&json!({"type": "inherit", "value": 1})).is_err());
        assert_eq!(
            ConfigInput::parse(&json!([1])).unwrap_err().kind,
            ConfigErrorKind::NotAnObject
        );
    }

    /// A source with parts known only when the deployment runs, as the template's evaluated values have.
    #[derive(Debug)]
    enum Evaluated {
        Known(Value),
        Unknown(&'static str),
        Object(Vec<(&'static str, Evaluated)>),
    }

    impl<'s> ConfigSource<'s> for &'s Evaluated {
        fn members(self) -> Option<Vec<(&'s str, Self)>> {
            match self {
                Evaluated::Object(members) => Some(members.iter().map(|(k, v)| (*k, v)).collect()),
                _ => None,
            }
        }

        fn as_str(self) -> Option<&'s str> {
            match self {
                Evaluated::Known(value) => value.as_str(),
                _ => None,
            }
        }

        fn is_null(self) -> bool {
            matches!(self, Evaluated::Known(Value::Null))
        }

        fn unknown(self) -> Option<&'s str> {
            match self {
                Evaluated::Unknown(expression) => Some(expression),
                _ => None,
            }
        }

        fn to_json(self) -> Result<Value, Unknown> {
            match self {
                Evaluated::Known(value) => Ok(value.clone()),
                Evaluated::Unknown(expression) => Err(Unknown((*expression).to_owned())),
                Evaluated::Object(members) => members
                    .iter()
                    .map(|(k, v)| v.to_json().map(|v| ((*k).to_owned(), v)))
                    .collect::<Result<serde_json::Map<_, _>, _>>()
                    .map(Value::Object),
            }
        }
    }

    #[test]
    fn values_known_only_at_deployment_are_deferred_item_by_item() {
        const REF: &str = "[reference('cluster').fqdn]";
        let config = Evaluated::Object(vec![
            ("whole", Evaluated::Unknown(REF)),
            (
                "wrapped",
                Evaluated::Object(vec![("value", Evaluated::Unknown(REF))]),
            ),
            (
                "inside",
                Evaluated::Object(vec![(
                    "value",
                    Evaluated::Object(vec![
                        ("a", Evaluated::Known(json!(1))),
                        ("b", Evaluated::Unknown(REF)),
                    ]),
                )]),
            ),
            (
                "vault",
                Evaluated::Object(vec![(
                    "keyVaultReference",
                    Evaluated::Object(vec![
                        (
                            "keyVault",
                            Evaluated::Object(vec![("id", Evaluated::Unknown(REF))]),
                        ),
                        ("secretName", Evaluated::Known(json!("kc"))),
                    ]),
                )]),
            ),
            (
                "auth",
                Evaluated::Object(vec![
                    ("token", Evaluated::Unknown(REF)),
                    ("kind", Evaluated::Known(json!("static"))),
                ]),
            ),
        ]);
        let parsed = Config::parse(&config).unwrap();
        let deferred = ConfigValue::Deferred(REF.into());
        for name in ["whole", "wrapped", "inside", "vault"] {
            assert_eq!(parsed.get(name), Some(&deferred), "{name}");
        }
        let ConfigValue::Group(auth) = parsed.get("auth").unwrap() else {
            panic!("auth stays a group: {parsed:?}");
        };
        assert_eq!(auth.get("token"), Some(&deferred));
        assert_eq!(
            auth.get("kind"),
            Some(&ConfigValue::Literal(json!("static")))
        );
        assert_eq!(
            parsed.first_deferred(),
            Some((vec!["whole".to_owned()], REF))
        );
        assert_eq!(
            ConfigInput::parse(&Evaluated::Unknown(REF)).unwrap(),
            ConfigInput::Deferred(REF.into())
        );
        assert_eq!(ConfigValue::literal(&Evaluated::Unknown(REF)), deferred);
    }
}
