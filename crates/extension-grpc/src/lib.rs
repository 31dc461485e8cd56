//! The Bicep local-deploy gRPC protocol (extension.proto): messages, client transport and server adapter.
