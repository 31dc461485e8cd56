//! JSON with comments: a lossless parser that keeps key order and a source span for every node.
//!
//! ARM accepts JSON with `//` and `/* */` comments, literal newlines inside strings and trailing commas (as
//! Azure PowerShell and the CLI do). Templates need every node's position so that diagnostics can point at a
//! line and column, so this crate parses into its own tree ([`Node`]) rather than `serde_json::Value`.

mod line_index;
mod parser;
mod tree;

pub use line_index::{LineCol, LineIndex};
pub use parser::{ParseError, ParseErrorKind, parse};
pub use tree::{Member, Node, NodeKind, Number, Span};
