//! The built-in Local extension (1.0.0): File and Directory resources under a configured root directory.
