//! Rendering of diagnostics for people: `error[Code]: message`, the file position and a source snippet.

use cairn_template::{Diagnostic, Severity, SourceFile};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputFormat {
    Text,
}

/// Writes a line to stdout; a closed pipe (`cairn ... | head`) ends output quietly instead of panicking.
pub(crate) fn print_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

pub(crate) fn print_diagnostics(
    diags: &[Diagnostic],
    sources: &[SourceFile],
    _format: OutputFormat,
) {
    for d in diags {
        eprintln!("{}", render(d, sources));
    }
}

/// One diagnostic as text, with a snippet when its file and position are known.
pub(crate) fn render(d: &Diagnostic, sources: &[SourceFile]) -> String {
    let level = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    };
    let mut out = format!("{level}[{}]: {}", d.code, d.message);
    let file = d.file.as_deref().unwrap_or("");
    let target = if d.target.is_empty() {
        String::new()
    } else {
        format!(" ({})", d.target)
    };
    match (d.line, d.column) {
        (Some(line), Some(column)) => {
            out.push_str(&format!("\n  --> {file}:{line}:{column}{target}"));
            if let Some(source) = sources.iter().find(|s| s.name == file) {
                let text = source.line_text(line);
                let gutter = line.to_string().len();
                let before = column as usize - 1;
                // Carets under the whole offending token as written, up to the end of its line.
                let width = d
                    .span
                    .and_then(|span| source.text.get(span.range()))
                    .map_or(1, |token| {
                        let rest = text.chars().count().saturating_sub(before);
                        token
                            .lines()
                            .next()
                            .unwrap_or("")
                            .chars()
                            .count()
                            .clamp(1, rest.max(1))
                    });
                out.push_str(&format!(
                    "\n{:gutter$} |\n{line} | {text}\n{:gutter$} | {}{}",
                    "",
                    "",
                    " ".repeat(before),
                    "^".repeat(width)
                ));
            }
        }
        _ if !target.is_empty() => out.push_str(&format!("\n  --> {file}{target}")),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet() {
        let source = SourceFile::new("main.json", "{\n  \"a\": \"[foo()]\"\n}");
        let d = Diagnostic::error("InvalidTemplate", "bad", "a")
            .with_span(cairn_json::Span::new(9, 18));
        let d = source.locate(d);
        let text = render(&d, std::slice::from_ref(&source));
        assert_eq!(
            text,
            "error[InvalidTemplate]: bad\n  --> main.json:2:8 (a)\n  |\n2 |   \"a\": \"[foo()]\"\n  |        ^^^^^^^^^"
        );
        let token = source.locate(
            Diagnostic::error("InvalidTemplate", "bad", "a")
                .with_span(cairn_json::Span::new(9, 18))
                .with_token(cairn_json::Span::new(1, 4)),
        );
        assert_eq!(token.column, Some(10));
        let text = render(&token, &[source]);
        assert!(
            text.ends_with(&format!("\n  | {}^^^", " ".repeat(9))),
            "{text}"
        );
    }
}
