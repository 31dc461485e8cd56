//! The messages of Bicep's `extension.proto` (package `extension`), written by hand with `prost` derives.
//!
//! Field numbers and types follow `src/Bicep.Local.Rpc/extension.proto` exactly; `config`, `properties`,
//! `identifiers` and `innerError` carry JSON serialised into strings. Hand-written so the build needs no
//! `protoc`; the wire format is all that matters and the tests below pin it byte for byte.
//!
//! One addition of cairn's: `configId` ([`CONFIG_ID_FIELD`]) on `ResourceSpecification`,
//! `ResourceReference` and `Resource`, so that an extension served over gRPC can name the system its
//! config reaches and refuse a request meant for another, as over HTTP. proto3 readers skip fields they
//! do not know, so Bicep and other gRPC peers are unaffected: they neither send nor read it.

use std::collections::HashMap;
use std::fmt;

/// The largest gRPC message either side sends or accepts: above the contract's 20 MB single-resource
/// response limit (tonic's default of 4 MB would cut a legal 4 MB request once framed).
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

/// The field number of cairn's `configId` addition: far above Bicep's own numbers (1 to 5), so a field
/// Bicep adds later cannot take it.
pub const CONFIG_ID_FIELD: u32 = 1001;

/// The gRPC service name, `package.Service`.
pub const SERVICE_NAME: &str = "extension.BicepExtension";

/// The methods of `BicepExtension`, with their HTTP/2 paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `CreateOrUpdate(ResourceSpecification) -> LocalExtensibilityOperationResponse`.
    CreateOrUpdate,
    /// `Preview(ResourceSpecification) -> LocalExtensibilityOperationResponse`.
    Preview,
    /// `Get(ResourceReference) -> LocalExtensibilityOperationResponse`.
    Get,
    /// `Delete(ResourceReference) -> LocalExtensibilityOperationResponse`.
    Delete,
    /// `GetTypeFiles(Empty) -> TypeFilesResponse`.
    GetTypeFiles,
    /// `Ping(Empty) -> Empty`.
    Ping,
}

impl Method {
    /// Every method, in proto order.
    pub const ALL: [Method; 6] = [
        Method::CreateOrUpdate,
        Method::Preview,
        Method::Get,
        Method::Delete,
        Method::GetTypeFiles,
        Method::Ping,
    ];

    /// The request path, `/extension.BicepExtension/{Method}`.
    pub fn path(self) -> &'static str {
        match self {
            Method::CreateOrUpdate => "/extension.BicepExtension/CreateOrUpdate",
            Method::Preview => "/extension.BicepExtension/Preview",
            Method::Get => "/extension.BicepExtension/Get",
            Method::Delete => "/extension.BicepExtension/Delete",
            Method::GetTypeFiles => "/extension.BicepExtension/GetTypeFiles",
            Method::Ping => "/extension.BicepExtension/Ping",
        }
    }

    /// The method a request path names, if any.
    pub fn from_path(path: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.path() == path)
    }
}

/// `ResourceSpecification`: the body of `CreateOrUpdate` and `Preview`.
#[derive(Clone, PartialEq, prost::Message)]
#[prost(skip_debug)]
pub struct ResourceSpecification {
    /// JSON object (may hold secrets: never printed).
    #[prost(string, optional, tag = "1")]
    pub config: Option<String>,
    #[prost(string, tag = "2")]
    pub r#type: String,
    #[prost(string, optional, tag = "3")]
    pub api_version: Option<String>,
    /// JSON object.
    #[prost(string, tag = "4")]
    pub properties: String,
    /// cairn's addition ([`CONFIG_ID_FIELD`]): the `configId` the caller expects.
    #[prost(string, optional, tag = "1001")]
    pub config_id: Option<String>,
}

/// `ResourceReference`: the body of `Get` and `Delete`.
#[derive(Clone, PartialEq, prost::Message)]
#[prost(skip_debug)]
pub struct ResourceReference {
    /// JSON object.
    #[prost(string, tag = "1")]
    pub identifiers: String,
    /// JSON object (may hold secrets: never printed).
    #[prost(string, optional, tag = "2")]
    pub config: Option<String>,
    #[prost(string, tag = "3")]
    pub r#type: String,
    #[prost(string, optional, tag = "4")]
    pub api_version: Option<String>,
    /// cairn's addition ([`CONFIG_ID_FIELD`]): the `configId` the caller expects.
    #[prost(string, optional, tag = "1001")]
    pub config_id: Option<String>,
}

/// `LocalExtensibilityOperationResponse`: exactly one of `resource` and `error_data` must be set.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LocalExtensibilityOperationResponse {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub error_data: Option<ErrorData>,
}

/// `Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(string, optional, tag = "2")]
    pub api_version: Option<String>,
    /// JSON object.
    #[prost(string, tag = "3")]
    pub identifiers: String,
    /// JSON object.
    #[prost(string, tag = "4")]
    pub properties: String,
    #[prost(string, optional, tag = "5")]
    pub status: Option<String>,
    /// cairn's addition ([`CONFIG_ID_FIELD`]): the `configId` of the config the answer was made with.
    #[prost(string, optional, tag = "1001")]
    pub config_id: Option<String>,
}

/// `ErrorData`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorData {
    #[prost(message, optional, tag = "1")]
    pub error: Option<Error>,
}

/// `Error`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Error {
    #[prost(string, tag = "1")]
    pub code: String,
    #[prost(string, optional, tag = "2")]
    pub target: Option<String>,
    #[prost(string, tag = "3")]
    pub message: String,
    #[prost(message, repeated, tag = "4")]
    pub details: Vec<ErrorDetail>,
    /// JSON object.
    #[prost(string, optional, tag = "5")]
    pub inner_error: Option<String>,
}

/// `ErrorDetail`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorDetail {
    #[prost(string, tag = "1")]
    pub code: String,
    #[prost(string, optional, tag = "2")]
    pub target: Option<String>,
    #[prost(string, tag = "3")]
    pub message: String,
}

/// `TypeFilesResponse`: `index_file` holds the *content* of `index.json`; `type_files` maps path → content.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeFilesResponse {
    #[prost(string, tag = "1")]
    pub index_file: String,
    #[prost(map = "string, string", tag = "2")]
    pub type_files: HashMap<String, String>,
}

/// `google.protobuf.Empty` (no fields; identical on the wire).
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct Empty {}

// prost derives `Debug` for messages; these two carry `config`, which may hold secrets, so they print by
// hand instead (the derive is suppressed with `skip_debug` above).
impl fmt::Debug for ResourceSpecification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceSpecification")
            .field("type", &self.r#type)
            .field("api_version", &self.api_version)
            .field("config", &self.config.as_ref().map(|_| "[REDACTED]"))
            .field("properties_len", &self.properties.len())
            .field("config_id", &self.config_id)
            .finish()
    }
}

impl fmt::Debug for ResourceReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceReference")
            .field("type", &self.r#type)
            .field("api_version", &self.api_version)
            .field("identifiers", &self.identifiers)
            .field("config", &self.config.as_ref().map(|_| "[REDACTED]"))
            .field("config_id", &self.config_id)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn method_paths_round_trip() {
        for method in Method::ALL {
            assert_eq!(Method::from_path(method.path()), Some(method));
        }
        assert_eq!(Method::from_path("/extension.BicepExtension/Nope"), None);
    }

    /// Field numbers and wire types, byte for byte: tag = (field << 3) | 2 for length-delimited fields.
    #[test]
    fn resource_specification_wire_format() {
        let spec = ResourceSpecification {
            config: Some("{}".into()),
            r#type: "T".into(),
            api_version: Some("v".into()),
            properties: "{}".into(),
            config_id: None,
        };
        let bytes = spec.encode_to_vec();
        assert_eq!(
            bytes,
            [
                0x0a, 2, b'{', b'}', 0x12, 1, b'T', 0x1a, 1, b'v', 0x22, 2, b'{', b'}'
            ]
        );
        assert_eq!(
            ResourceSpecification::decode(bytes.as_slice()).unwrap(),
            spec
        );
    }

    #[test]
    fn resource_reference_wire_format() {
        let reference = ResourceReference {
            identifiers: "{}".into(),
            config: None,
            r#type: "T".into(),
            api_version: Some("v".into()),
            config_id: None,
        };
        assert_eq!(
            reference.encode_to_vec(),
            [0x0a, 2, b'{', b'}', 0x1a, 1, b'T', 0x22, 1, b'v']
        );
    }

    #[test]
    fn proto3_optional_empty_string_is_still_present() {
        // `optional` fields keep presence: an empty api version is sent and decoded as Some("").
        let reference = ResourceReference {
            identifiers: String::new(),
            config: None,
            r#type: String::new(),
            api_version: Some(String::new()),
            config_id: None,
        };
        let bytes = reference.encode_to_vec();
        assert_eq!(bytes, [0x22, 0]);
        assert_eq!(
            ResourceReference::decode(bytes.as_slice())
                .unwrap()
                .api_version,
            Some(String::new())
        );
    }

    #[test]
    fn response_and_error_wire_format() {
        let response = LocalExtensibilityOperationResponse {
            resource: None,
            error_data: Some(ErrorData {
                error: Some(Error {
                    code: "C".into(),
                    target: Some("/t".into()),
                    message: "m".into(),
                    details: vec![ErrorDetail {
                        code: "D".into(),
                        target: None,
                        message: "n".into(),
                    }],
                    inner_error: None,
                }),
            }),
        };
        let bytes = response.encode_to_vec();
        // errorData = field 2; inside: error = field 1; inside: code 1, target 2, message 3, details 4.
        let detail = [0x0a, 1, b'D', 0x1a, 1, b'n'];
        let mut error = vec![
            0x0a,
            1,
            b'C',
            0x12,
            2,
            b'/',
            b't',
            0x1a,
            1,
            b'm',
            0x22,
            detail.len() as u8,
        ];
        error.extend_from_slice(&detail);
        let mut error_data = vec![0x0a, error.len() as u8];
        error_data.extend_from_slice(&error);
        let mut expected = vec![0x12, error_data.len() as u8];
        expected.extend_from_slice(&error_data);
        assert_eq!(bytes, expected);
        assert_eq!(
            LocalExtensibilityOperationResponse::decode(bytes.as_slice()).unwrap(),
            response
        );
    }

    #[test]
    fn resource_status_is_field_five() {
        let resource = Resource {
            r#type: String::new(),
            api_version: None,
            identifiers: String::new(),
            properties: String::new(),
            status: Some("R".into()),
            config_id: None,
        };
        assert_eq!(resource.encode_to_vec(), [0x2a, 1, b'R']);
    }

    /// `Resource` as Bicep's proto declares it (no `configId`), to read what cairn sends as a Bicep peer would.
    #[derive(Clone, PartialEq, prost::Message)]
    struct BicepResource {
        #[prost(string, tag = "1")]
        r#type: String,
        #[prost(string, optional, tag = "2")]
        api_version: Option<String>,
        #[prost(string, tag = "3")]
        identifiers: String,
        #[prost(string, optional, tag = "4")]
        properties: Option<String>,
        #[prost(string, optional, tag = "5")]
        status: Option<String>,
    }

    #[test]
    fn config_id_is_field_1001_and_a_bicep_peer_skips_it() {
        let resource = Resource {
            r#type: "T".into(),
            api_version: None,
            identifiers: "{}".into(),
            properties: String::new(),
            status: None,
            config_id: Some("c".into()),
        };
        let bytes = resource.encode_to_vec();
        // Field 1001, wire type 2: the key (1001 << 3) | 2 = 8010 as a varint is 0xca 0x3e.
        assert_eq!(
            bytes,
            [0x0a, 1, b'T', 0x1a, 2, b'{', b'}', 0xca, 0x3e, 1, b'c']
        );
        assert_eq!(
            u32::from(bytes[7] & 0x7f) | (u32::from(bytes[8]) << 7),
            (CONFIG_ID_FIELD << 3) | 2
        );
        let bicep = BicepResource::decode(bytes.as_slice()).unwrap();
        assert_eq!(
            (bicep.r#type.as_str(), bicep.identifiers.as_str()),
            ("T", "{}")
        );
        assert_eq!(Resource::decode(bytes.as_slice()).unwrap(), resource);
        // Without one, the bytes are Bicep's.
        let plain = Resource {
            config_id: None,
            ..resource
        };
        assert_eq!(plain.encode_to_vec(), [0x0a, 1, b'T', 0x1a, 2, b'{', b'}']);
    }

    #[test]
    fn type_files_map_is_field_two() {
        let mut files = HashMap::new();
        files.insert("a".to_owned(), "b".to_owned());
        let response = TypeFilesResponse {
            index_file: "i".into(),
            type_files: files,
        };
        // map entry = message { key = 1, value = 2 } under field 2.
        assert_eq!(
            response.encode_to_vec(),
            [0x0a, 1, b'i', 0x12, 6, 0x0a, 1, b'a', 0x12, 1, b'b']
        );
    }

    #[test]
    fn debug_output_redacts_config() {
        let spec = ResourceSpecification {
            config: Some(r#"{"token":"s3cr3t"}"#.into()),
            r#type: "T".into(),
            api_version: None,
            properties: "{}".into(),
            config_id: None,
        };
        let reference = ResourceReference {
            identifiers: "{}".into(),
            config: Some(r#"{"token":"s3cr3t"}"#.into()),
            r#type: "T".into(),
            api_version: None,
            config_id: None,
        };
        assert!(!format!("{spec:?}").contains("s3cr3t"));
        assert!(!format!("{reference:?}").contains("s3cr3t"));
    }
}
