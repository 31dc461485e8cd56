//! Reference IDs `{flags}-{uniqueId}` and cairn's stable derivation of them for its own resources.
//!
//! # Format
//!
//! A reference ID is `{flags}-{uniqueId}`, at most 2,000 characters:
//! - `flags` is `00` (self-contained: get/delete need nothing else) or `01` (get/delete also need the
//!   extension config: `getWithConfig` / `deleteWithConfig`).
//! - `uniqueId` is a URL-encoded, non-empty free-form string. Parsing accepts upper- and lower-case
//!   percent escapes (`%3A` and `%3a`) and `+` for a space (as .NET `HttpUtility.UrlEncode` writes it), and
//!   stores the **decoded** string; two ids that differ only in escape case are equal. Formatting
//!   percent-encodes every byte of the UTF-8 string except the RFC 3986 unreserved characters
//!   `A-Z a-z 0-9 - . _ ~`, with upper-case hex, so the id fits in one URL path segment.
//!
//! # cairn's derivation (stable across cairn versions; do not change)
//!
//! For a resource served by a v2 extension cairn derives the id from what identifies the resource:
//!
//! ```text
//! uniqueId     = "cairn1" ":" esc(extensionName) ":" esc(type) ":" esc(apiVersion) ":" esc(configId)
//!                ":" canonical(identifiers)
//! referenceId  = flags "-" urlencode(uniqueId)
//! flags        = "01" if get/delete need the config (the resource was deployed with a config), else "00"
//! ```
//!
//! - `esc(s)` replaces `%` with `%25` and then `:` with `%3A`, so the first five fields contain no `:`;
//!   a missing `apiVersion` or `configId` is the empty string.
//! - `canonical(identifiers)` is [`crate::canonical::to_canonical_string`]: keys sorted recursively by code
//!   point, compact serde_json text. It is the last field, so it may contain `:`.
//! - `urlencode` is the formatting rule above.
//! - The extension **version** is not part of the id: a resource keeps its id when the extension is upgraded.
//!
//! Example: extension `acme`, type `Acme.Queue/queues`, API version `2025-01-01`, config id `9F2C41D0`,
//! identifiers `{"name":"orders"}`, deployed with a config:
//! `01-cairn1%3Aacme%3AAcme.Queue%2Fqueues%3A2025-01-01%3A9F2C41D0%3A%7B%22name%22%3A%22orders%22%7D`.
//!
//! The derivation is reversible ([`ReferenceIdParts::from_reference_id`]), so the host can turn an id back
//! into a v2 `ResourceReference` without storing anything.

use crate::canonical::to_canonical_string;
use crate::v2::{Resource, ResourceReference};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// Everything except RFC 3986 unreserved characters is encoded.
const ENCODE_SET: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Prefix of the unique ids cairn derives (version 1 of the derivation).
pub const CAIRN_UNIQUE_ID_PREFIX: &str = "cairn1";

/// Why a reference ID is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceIdError {
    /// Longer than 2,000 characters.
    #[error("reference id is {length} characters long, more than the maximum of {max}")]
    TooLong { length: usize, max: usize },
    /// Not `00-` or `01-` followed by a unique id.
    #[error("reference id must start with the flags '00-' or '01-'")]
    InvalidFlags,
    /// The unique id is empty.
    #[error("reference id has an empty unique id")]
    EmptyUniqueId,
    /// A `%` not followed by two hex digits.
    #[error("reference id has an invalid percent escape at offset {offset}")]
    InvalidEscape { offset: usize },
    /// A character that cannot appear in a URL path segment.
    #[error("reference id contains the character {character:?}, which must be percent-encoded")]
    InvalidCharacter { character: char },
    /// The decoded unique id is not UTF-8.
    #[error("reference id's unique id does not decode to UTF-8 text")]
    InvalidUtf8,
    /// The id was not derived by cairn (no `cairn1:` prefix or wrong field count).
    #[error("reference id was not derived by cairn: {reason}")]
    NotCairnDerived { reason: String },
}

/// The two-digit flags of a reference ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReferenceFlags {
    /// `00`: get and delete need nothing but the id.
    SelfContained,
    /// `01`: get and delete also need the extension config.
    NeedsConfig,
}

impl ReferenceFlags {
    /// `"00"` or `"01"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SelfContained => "00",
            Self::NeedsConfig => "01",
        }
    }

    /// `01` when `needs_config`, else `00`.
    pub fn from_needs_config(needs_config: bool) -> Self {
        if needs_config {
            Self::NeedsConfig
        } else {
            Self::SelfContained
        }
    }
}

/// A parsed reference ID; `unique_id` is held decoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReferenceId {
    flags: ReferenceFlags,
    unique_id: String,
}

impl ReferenceId {
    /// Maximum length of the formatted id.
    pub const MAX_LEN: usize = 2000;

    /// Builds an id from flags and a decoded unique id, checking that it is non-empty and that the
    /// formatted id fits in [`Self::MAX_LEN`].
    pub fn new(
        flags: ReferenceFlags,
        unique_id: impl Into<String>,
    ) -> Result<Self, ReferenceIdError> {
        let unique_id = unique_id.into();
        if unique_id.is_empty() {
            return Err(ReferenceIdError::EmptyUniqueId);
        }
        let length = 3 + utf8_percent_encode(&unique_id, ENCODE_SET)
            .map(str::len)
            .sum::<usize>();
        let id = Self { flags, unique_id };
        if length > Self::MAX_LEN {
            return Err(ReferenceIdError::TooLong {
                length,
                max: Self::MAX_LEN,
            });
        }
        Ok(id)
    }

    /// Parses `{flags}-{uniqueId}`.
    pub fn parse(text: &str) -> Result<Self, ReferenceIdError> {
        if text.len() > Self::MAX_LEN {
            return Err(ReferenceIdError::TooLong {
                length: text.len(),
                max: Self::MAX_LEN,
            });
        }
        let flags = match text.get(..3) {
            Some("00-") => ReferenceFlags::SelfContained,
            Some("01-") => ReferenceFlags::NeedsConfig,
            _ => return Err(ReferenceIdError::InvalidFlags),
        };
        let encoded = &text[3..];
        if encoded.is_empty() {
            return Err(ReferenceIdError::EmptyUniqueId);
        }
        let unique_id = decode_unique_id(encoded, 3)?;
        if unique_id.is_empty() {
            return Err(ReferenceIdError::EmptyUniqueId);
        }
        Ok(Self { flags, unique_id })
    }

    /// The flags.
    pub fn flags(&self) -> ReferenceFlags {
        self.flags
    }

    /// True for `01` ids.
    pub fn needs_config(&self) -> bool {
        self.flags == ReferenceFlags::NeedsConfig
    }

    /// The decoded unique id.
    pub fn unique_id(&self) -> &str {
        &self.unique_id
    }
}

fn decode_unique_id(encoded: &str, base_offset: usize) -> Result<String, ReferenceIdError> {
    let bytes = encoded.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'%' => {
                let high = bytes.get(index + 1).and_then(|b| (*b as char).to_digit(16));
                let low = bytes.get(index + 2).and_then(|b| (*b as char).to_digit(16));
                match (high, low) {
                    (Some(high), Some(low)) => {
                        // Two hex digits always fit in a byte.
                        decoded.push((high * 16 + low) as u8);
                        index += 3;
                    }
                    _ => {
                        return Err(ReferenceIdError::InvalidEscape {
                            offset: base_offset + index,
                        });
                    }
                }
            }
            b'+' => {
                decoded.push(b' ');
                index += 1;
            }
            byte if byte.is_ascii_control()
                || matches!(byte, b' ' | b'/' | b'?' | b'#' | b'\\') =>
            {
                return Err(ReferenceIdError::InvalidCharacter {
                    character: byte as char,
                });
            }
            byte => {
                decoded.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8(decoded).map_err(|_| ReferenceIdError::InvalidUtf8)
}

impl fmt::Display for ReferenceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}",
            self.flags.as_str(),
            utf8_percent_encode(&self.unique_id, ENCODE_SET)
        )
    }
}

impl FromStr for ReferenceId {
    type Err = ReferenceIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl Serialize for ReferenceId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ReferenceId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What cairn's derivation encodes into a reference ID (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceIdParts {
    /// Registered extension name (e.g. `Kubernetes`).
    pub extension_name: String,
    /// Resource type.
    pub resource_type: String,
    /// API version, if any.
    pub api_version: Option<String>,
    /// Control plane id the extension reported, if any.
    pub config_id: Option<String>,
    /// The extension's identifiers object.
    pub identifiers: Value,
    /// Whether get/delete need the config (`01`).
    pub needs_config: bool,
}

impl ReferenceIdParts {
    /// The parts of a resource an extension returned; `needs_config` is whether it was deployed with a
    /// non-empty config.
    pub fn for_resource(extension_name: &str, resource: &Resource, needs_config: bool) -> Self {
        Self {
            extension_name: extension_name.to_owned(),
            resource_type: resource.resource_type.clone(),
            api_version: resource.api_version.clone(),
            config_id: resource.config_id.clone(),
            identifiers: resource.identifiers.clone(),
            needs_config,
        }
    }

    /// Derives the reference ID.
    pub fn to_reference_id(&self) -> Result<ReferenceId, ReferenceIdError> {
        let unique_id = format!(
            "{CAIRN_UNIQUE_ID_PREFIX}:{}:{}:{}:{}:{}",
            escape_field(&self.extension_name),
            escape_field(&self.resource_type),
            escape_field(self.api_version.as_deref().unwrap_or("")),
            escape_field(self.config_id.as_deref().unwrap_or("")),
            to_canonical_string(&self.identifiers),
        );
        ReferenceId::new(
            ReferenceFlags::from_needs_config(self.needs_config),
            unique_id,
        )
    }

    /// Reverses [`Self::to_reference_id`].
    pub fn from_reference_id(id: &ReferenceId) -> Result<Self, ReferenceIdError> {
        let not_cairn = |reason: &str| ReferenceIdError::NotCairnDerived {
            reason: reason.to_owned(),
        };
        let rest = id
            .unique_id()
            .strip_prefix(CAIRN_UNIQUE_ID_PREFIX)
            .and_then(|rest| rest.strip_prefix(':'))
            .ok_or_else(|| not_cairn("missing the 'cairn1:' prefix"))?;
        let fields: Vec<&str> = rest.splitn(5, ':').collect();
        let [name, resource_type, api_version, config_id, identifiers] = fields.as_slice() else {
            return Err(not_cairn("expected five fields"));
        };
        let extension_name =
            unescape_field(name).ok_or_else(|| not_cairn("bad escape in the extension name"))?;
        let resource_type =
            unescape_field(resource_type).ok_or_else(|| not_cairn("bad escape in the type"))?;
        let api_version = unescape_field(api_version)
            .ok_or_else(|| not_cairn("bad escape in the API version"))?;
        let config_id =
            unescape_field(config_id).ok_or_else(|| not_cairn("bad escape in the config id"))?;
        if extension_name.is_empty() || resource_type.is_empty() {
            return Err(not_cairn("empty extension name or type"));
        }
        let identifiers: Value =
            serde_json::from_str(identifiers).map_err(|_| not_cairn("identifiers are not JSON"))?;
        if !identifiers.is_object() {
            return Err(not_cairn("identifiers are not a JSON object"));
        }
        Ok(Self {
            extension_name,
            resource_type,
            api_version: (!api_version.is_empty()).then_some(api_version),
            config_id: (!config_id.is_empty()).then_some(config_id),
            identifiers,
            needs_config: id.needs_config(),
        })
    }

    /// The v2 `ResourceReference` for get/delete, with the given config (only for `01` ids).
    pub fn to_resource_reference(&self, config: Option<Value>) -> ResourceReference {
        ResourceReference {
            resource_type: self.resource_type.clone(),
            api_version: self.api_version.clone(),
            identifiers: self.identifiers.clone(),
            config,
            config_id: self.config_id.clone(),
        }
    }
}

fn escape_field(field: &str) -> String {
    field.replace('%', "%25").replace(':', "%3A")
}

fn unescape_field(field: &str) -> Option<String> {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(position) = rest.find('%') {
        out.push_str(&rest[..position]);
        let escape = rest.get(position..position + 3)?;
        match escape {
            "%25" => out.push('%'),
            "%3A" | "%3a" => out.push(':'),
            _ => return None,
        }
        rest = &rest[position + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn parses_kubernetes_style_ids_in_either_escape_case() {
        let lower =
            ReferenceId::parse("01-apps%3av1%3adeployments%3aDeployment%3adefault%3aweb%3aAB")
                .unwrap();
        let upper =
            ReferenceId::parse("01-apps%3Av1%3Adeployments%3ADeployment%3Adefault%3Aweb%3AAB")
                .unwrap();
        assert_eq!(lower, upper);
        assert!(lower.needs_config());
        assert_eq!(
            lower.unique_id(),
            "apps:v1:deployments:Deployment:default:web:AB"
        );
        assert_eq!(
            lower.to_string(),
            "01-apps%3Av1%3Adeployments%3ADeployment%3Adefault%3Aweb%3AAB"
        );
    }

    #[test]
    fn plus_decodes_to_space() {
        assert_eq!(ReferenceId::parse("00-a+b").unwrap().unique_id(), "a b");
    }

    #[test]
    fn rejects_invalid_ids() {
        let too_long = format!("00-{}", "a".repeat(1998));
        let cases: [(&str, ReferenceIdError); 8] = [
            ("", ReferenceIdError::InvalidFlags),
            ("02-abc", ReferenceIdError::InvalidFlags),
            ("00abc", ReferenceIdError::InvalidFlags),
            ("00-", ReferenceIdError::EmptyUniqueId),
            ("00-a%2", ReferenceIdError::InvalidEscape { offset: 4 }),
            ("00-a%zz", ReferenceIdError::InvalidEscape { offset: 4 }),
            (
                "00-a/b",
                ReferenceIdError::InvalidCharacter { character: '/' },
            ),
            ("00-%FF", ReferenceIdError::InvalidUtf8),
        ];
        for (text, expected) in cases {
            assert_eq!(ReferenceId::parse(text), Err(expected), "{text:?}");
        }
        assert_eq!(
            ReferenceId::parse(&too_long),
            Err(ReferenceIdError::TooLong {
                length: 2001,
                max: 2000
            })
        );
        assert!(ReferenceId::parse(&too_long[..2000]).is_ok());
    }

    #[test]
    fn new_checks_encoded_length() {
        // 700 colons encode to 2,100 characters.
        let result = ReferenceId::new(ReferenceFlags::SelfContained, ":".repeat(700));
        assert!(matches!(result, Err(ReferenceIdError::TooLong { .. })));
    }

    fn queue_parts(needs_config: bool) -> ReferenceIdParts {
        ReferenceIdParts {
            extension_name: "acme".into(),
            resource_type: "Acme.Queue/queues".into(),
            api_version: Some("2025-01-01".into()),
            config_id: Some("9F2C41D0".into()),
            identifiers: json!({ "name": "orders" }),
            needs_config,
        }
    }

    #[test]
    fn golden_derivations() {
        let cases = [
            (
                queue_parts(true),
                "01-cairn1%3Aacme%3AAcme.Queue%2Fqueues%3A2025-01-01%3A9F2C41D0%3A%7B%22name%22%3A%22orders%22%7D",
            ),
            (
                ReferenceIdParts {
                    extension_name: "Kubernetes".into(),
                    resource_type: "apps/Deployment".into(),
                    api_version: Some("v1".into()),
                    config_id: None,
                    identifiers: json!({ "metadata": { "namespace": "default", "name": "web" } }),
                    needs_config: false,
                },
                "00-cairn1%3AKubernetes%3Aapps%2FDeployment%3Av1%3A%3A%7B%22metadata%22%3A%7B%22name%22%3A%22web%22%2C%22namespace%22%3A%22default%22%7D%7D",
            ),
            (
                ReferenceIdParts {
                    extension_name: "odd:name%".into(),
                    resource_type: "T".into(),
                    api_version: None,
                    config_id: Some("a:b".into()),
                    identifiers: json!({ "k": "é" }),
                    needs_config: true,
                },
                "01-cairn1%3Aodd%253Aname%2525%3AT%3A%3Aa%253Ab%3A%7B%22k%22%3A%22%C3%A9%22%7D",
            ),
        ];
        for (parts, expected) in cases {
            let id = parts.to_reference_id().unwrap();
            assert_eq!(id.to_string(), expected);
            let parsed = ReferenceId::parse(expected).unwrap();
            assert_eq!(ReferenceIdParts::from_reference_id(&parsed).unwrap(), parts);
        }
    }

    #[test]
    fn identifier_key_order_does_not_matter() {
        let a = ReferenceIdParts {
            identifiers: json!({ "b": 1, "a": 2 }),
            ..queue_parts(false)
        };
        let b = ReferenceIdParts {
            identifiers: json!({ "a": 2, "b": 1 }),
            ..queue_parts(false)
        };
        assert_eq!(a.to_reference_id().unwrap(), b.to_reference_id().unwrap());
    }

    #[test]
    fn foreign_ids_are_not_cairn_derived() {
        for text in [
            "01-apps%3Av1",
            "00-cairn1%3Aa%3Ab",
            "00-cairn1%3Aa%3AT%3A%3A%3A%5B1%5D",
        ] {
            let id = ReferenceId::parse(text).unwrap();
            assert!(
                matches!(
                    ReferenceIdParts::from_reference_id(&id),
                    Err(ReferenceIdError::NotCairnDerived { .. })
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn serde_as_string() {
        let id: ReferenceId = serde_json::from_str("\"00-a%3ab\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"00-a%3Ab\"");
        assert!(serde_json::from_str::<ReferenceId>("\"zz\"").is_err());
    }

    proptest! {
        #[test]
        fn format_parse_round_trip(unique in "\\PC{1,150}", config in any::<bool>()) {
            let id = ReferenceId::new(ReferenceFlags::from_needs_config(config), unique).unwrap();
            let text = id.to_string();
            prop_assert_eq!(ReferenceId::parse(&text).unwrap(), id);
        }

        #[test]
        fn parse_format_parse_is_stable(text in "0[01]-[A-Za-z0-9%+._~:-]{1,60}") {
            if let Ok(id) = ReferenceId::parse(&text) {
                prop_assert_eq!(ReferenceId::parse(&id.to_string()).unwrap(), id);
            }
        }

        #[test]
        fn derivation_round_trip(
            name in "[^\\u{0}]{1,20}", resource_type in "\\PC{1,30}", api in proptest::option::of("\\PC{1,12}"),
            config_id in proptest::option::of("\\PC{1,12}"), key in "\\PC{0,10}", value in "\\PC{0,20}",
            needs_config in any::<bool>(),
        ) {
            let parts = ReferenceIdParts {
                extension_name: name, resource_type, api_version: api, config_id,
                identifiers: json!({ key: value }), needs_config,
            };
            let id = parts.to_reference_id().unwrap();
            let reparsed = ReferenceId::parse(&id.to_string()).unwrap();
            prop_assert_eq!(ReferenceIdParts::from_reference_id(&reparsed).unwrap(), parts);
        }
    }
}
