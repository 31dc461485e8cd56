//! Diagnostics: ARM-shaped findings (code, message, target JSON path) with a source position.

use cairn_json::{LineCol, LineIndex, Span};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One finding about a template or parameters file.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    pub severity: Severity,
    /// ARM error code (`InvalidTemplate`, `InvalidParameter`, `DeploymentCycle`, ...).
    pub code: String,
    pub message: String,
    /// JSON path of the offending element, ARM style: `resources[2].properties.name`.
    pub target: String,
    /// Byte span in the source file, when known.
    #[serde(skip)]
    pub span: Option<Span>,
    /// 1-based position of `span`, filled in by [`SourceFile::locate`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// Which file (template or parameters), for messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl Diagnostic {
    pub fn error(
        code: impl Into<String>,
        message: impl Into<String>,
        target: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code: code.into(),
            message: message.into(),
            target: target.into(),
            span: None,
            line: None,
            column: None,
            file: None,
        }
    }

    pub fn warning(
        code: impl Into<String>,
        message: impl Into<String>,
        target: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message, target)
        }
    }

    pub fn with_span(mut self, span: Span) -> Diagnostic {
        if span != Span::default() {
            self.span = Some(span);
        }
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A source text with its name and line index, for turning spans into positions and snippets.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    index: LineIndex,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let index = LineIndex::new(&text);
        SourceFile {
            name: name.into(),
            text,
            index,
        }
    }

    pub fn line_col(&self, offset: usize) -> LineCol {
        self.index.line_col(&self.text, offset)
    }

    pub fn line_text(&self, line: u32) -> &str {
        self.index.line_text(&self.text, line)
    }

    /// Fills in line, column and file name of a diagnostic that has a span.
    pub fn locate(&self, mut d: Diagnostic) -> Diagnostic {
        if let Some(span) = d.span {
            let pos = self.line_col(span.start as usize);
            d.line = Some(pos.line);
            d.column = Some(pos.column);
        }
        d.file.get_or_insert_with(|| self.name.clone());
        d
    }
}

/// Joins a JSON path and a child key or index, ARM style.
pub fn join_path(base: &str, key: &str) -> String {
    let simple = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    match (base.is_empty(), simple) {
        (true, true) => key.to_string(),
        (false, true) => format!("{base}.{key}"),
        (_, false) => format!("{base}['{}']", key.replace('\'', "''")),
    }
}

pub fn join_index(base: &str, index: usize) -> String {
    format!("{base}[{index}]")
}
