//! SDK for writing cairn/Bicep extensions in Rust: typed handlers served over HTTP v2 and local gRPC.
