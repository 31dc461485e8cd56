//! The `cairn` binary: parses the command line and dispatches to the library crates.

fn main() {}
