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
    /// Byte span in the source file, when known. [`SourceFile::locate`] narrows it to `token`.
    #[serde(skip)]
    pub span: Option<Span>,
    /// The part of the JSON string at `span` the finding is about (a function name, a parameter name, where an
    /// expression stops parsing), as a byte range of the string's decoded text.
    #[serde(skip)]
    pub token: Option<Span>,
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
            token: None,
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

    /// The part of the string at [`Diagnostic::span`] this finding is about (see [`Diagnostic::token`]).
    pub fn with_token(mut self, token: Span) -> Diagnostic {
        self.token = Some(token);
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

    /// Fills in line, column and file name of a diagnostic that has a span. With a token inside the JSON string at
    /// its span, the span narrows to the token as written in the file (escapes such as `\"` or `\u00e9` count as
    /// the characters they are written with), so the position is the token's.
    pub fn locate(&self, mut d: Diagnostic) -> Diagnostic {
        if let (Some(span), Some(token)) = (d.span, d.token) {
            let start = raw_offset(&self.text, span.start as usize, token.start as usize);
            let end = raw_offset(&self.text, span.start as usize, token.end as usize);
            if let (Some(start), Some(end)) = (start, end)
                && start <= end
                && end < span.end as usize
            {
                d.span = Some(Span::new(start, end));
            }
        }
        if let Some(span) = d.span {
            let pos = self.line_col(span.start as usize);
            d.line = Some(pos.line);
            d.column = Some(pos.column);
        }
        d.file.get_or_insert_with(|| self.name.clone());
        d
    }
}

/// Where byte `decoded` of the decoded text of the JSON string literal opening at byte `quote` of `text` is written:
/// escapes count as the characters they stand for. `None` when `quote` opens no string or the string is shorter.
fn raw_offset(text: &str, quote: usize, decoded: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.get(quote) != Some(&b'"') {
        return None;
    }
    let mut raw = quote + 1;
    let mut seen = 0;
    while seen < decoded {
        match *bytes.get(raw)? {
            b'"' => return None,
            b'\\' if bytes.get(raw + 1) == Some(&b'u') => {
                let unit = u32::from_str_radix(text.get(raw + 2..raw + 6)?, 16).ok()?;
                let low = text
                    .get(raw + 6..raw + 12)
                    .filter(|next| next.starts_with("\\u"))
                    .and_then(|next| u32::from_str_radix(&next[2..], 16).ok())
                    .filter(|low| (0xDC00..0xE000).contains(low));
                match low {
                    // A surrogate pair: one character of four bytes.
                    Some(_) if (0xD800..0xDC00).contains(&unit) => {
                        seen += 4;
                        raw += 12;
                    }
                    // A lone surrogate decodes to U+FFFD.
                    _ => {
                        seen += char::from_u32(unit).map_or(3, char::len_utf8);
                        raw += 6;
                    }
                }
            }
            b'\\' => {
                seen += 1;
                raw += 2;
            }
            _ => {
                let c = text.get(raw..)?.chars().next()?;
                seen += c.len_utf8();
                raw += c.len_utf8();
            }
        }
    }
    (seen == decoded).then_some(raw)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The diagnostic about `token` (a range of the decoded string) of the first string in `text`, located.
    fn locate_token(text: &str, token: std::ops::Range<usize>) -> Diagnostic {
        let source = SourceFile::new("t.json", text);
        let node = cairn_json::parse(text).unwrap();
        let string = &node.as_object().unwrap()[0].value;
        let d = Diagnostic::error("InvalidTemplate", "m", "a")
            .with_span(string.span)
            .with_token(Span::new(token.start, token.end));
        source.locate(d)
    }

    #[test]
    fn a_token_is_located_where_it_is_written() {
        let text = "{\n  \"a\": \"[toUppr('x')]\"\n}";
        let d = locate_token(text, 1..7);
        assert_eq!((d.line, d.column), (Some(2), Some(10)));
        assert_eq!(&text[d.span.unwrap().range()], "toUppr");
    }

    #[test]
    fn escapes_count_as_written() {
        // `\"`, `\u00e9` (2 bytes decoded, 6 written) and a surrogate pair (4 decoded, 12 written) before the token.
        let text = r#"{"a": "[concat('\"\u00e9\ud83d\ude00', prefx)]"}"#;
        let decoded = "[concat('\"\u{e9}\u{1f600}', prefx)]";
        let start = decoded.find("prefx").unwrap();
        let d = locate_token(text, start..start + 5);
        assert_eq!(&text[d.span.unwrap().range()], "prefx");
        assert_eq!(d.column, Some(text.find("prefx").unwrap() as u32 + 1));
    }

    #[test]
    fn a_token_outside_the_string_keeps_the_node_position() {
        let text = "{\"a\": \"[f()]\"}";
        let d = locate_token(text, 2..40);
        assert_eq!(d.column, Some(7));
        assert_eq!(&text[d.span.unwrap().range()], "\"[f()]\"");
    }
}
