//! The extensibility host: drives extensions over HTTP, local gRPC and in-process transports, with limits and long-running operations.
