//! The Bicep local-deploy gRPC protocol (`extension.proto`): messages, a client transport that runs an
//! extension binary, and a server adapter that serves any v2 transport over gRPC.
//!
//! - [`proto`]: the messages and method paths of service `extension.BicepExtension` (hand-written prost).
//! - [`mapping`]: pure conversions between v2 HTTP semantics and the gRPC messages, both directions.
//! - [`client`]: a typed gRPC client over any tonic channel.
//! - [`server`]: [`server::BicepExtension`] (the service trait), [`server::BicepExtensionServer`] (a tower
//!   service routing the six methods) and [`server::TransportBridge`], which serves any
//!   [`cairn_extension_contract::ExtensionTransport`] (e.g. an SDK extension in process) over gRPC.
//! - [`process`]: [`process::LocalProcessTransport`], the host's [`ExtensionTransport`] for a local extension
//!   binary started with `--socket <path>`.
//!
//! [`ExtensionTransport`]: cairn_extension_contract::ExtensionTransport

pub mod client;
pub mod mapping;
pub mod process;
pub mod proto;
pub mod server;

pub use client::{BicepExtensionClient, unix_socket_channel};
pub use process::{LaunchSpec, LocalProcessTransport};
pub use server::{BicepExtension, BicepExtensionServer, TransportBridge};
