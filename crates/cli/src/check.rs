//! Template problems reported the one way `cairn template validate` reports them, whichever command finds them:
//! the static checks every command runs on a template file before anything is sent (the ones the engine runs
//! first), and the engine's or a server's ARM errors about a template or parameters file located back in that
//! file by their JSON path (`target`, or an `additionalInfo` `TemplateViolation`'s `path`), so both render as
//! `error[Code]: message`, `--> file:line:col (path)` and a snippet with the caret on the offending token.

use std::collections::HashSet;

use cairn_arm::ErrorDetail;
use cairn_json::{Node, Span};
use cairn_template::{Diagnostic, SourceFile, Template};

use crate::output::Failure;
use cairn_template::resource_types::{PathSegment as Segment, parse_arm_path as parse_path};

/// The files a command read, to locate the engine's findings in: the template (when it is a file) first, then the
/// parameters files.
#[derive(Debug, Default)]
pub(crate) struct InputFiles {
    pub(crate) sources: Vec<SourceFile>,
    /// Whether `sources` starts with the template.
    pub(crate) has_template: bool,
    /// Parameters given as `-p name=value`: they override every parameters file, so a finding about one is about
    /// the command line, not about the file that may name it too.
    pub(crate) inline: Vec<String>,
}

impl InputFiles {
    /// The files as findings show them: the parameters files with their string values masked, since a finding
    /// about a parameter is about its name and its value may be a secret (a misspelt `adminPasword` is declared
    /// nowhere, so nothing says it is secure).
    fn for_display(&self) -> Vec<SourceFile> {
        let skip = usize::from(self.has_template);
        self.sources
            .iter()
            .enumerate()
            .map(|(i, source)| {
                if i < skip {
                    source.clone()
                } else {
                    masked(source)
                }
            })
            .collect()
    }
}

/// `source` with every string value (not object keys) written as `*`s of the same byte length, so positions hold.
/// A text that does not parse is kept (its findings are about its syntax).
fn masked(source: &SourceFile) -> SourceFile {
    fn mask(node: &Node, text: &mut [u8]) {
        match &node.kind {
            cairn_json::NodeKind::String(_) => {
                let inside =
                    node.span.start as usize + 1..(node.span.end as usize).saturating_sub(1);
                if let Some(bytes) = text.get_mut(inside) {
                    bytes.fill(b'*');
                }
            }
            cairn_json::NodeKind::Array(items) => items.iter().for_each(|i| mask(i, text)),
            cairn_json::NodeKind::Object(members) => {
                members.iter().for_each(|m| mask(&m.value, text));
            }
            _ => {}
        }
    }
    let Ok(root) = cairn_json::parse(&source.text) else {
        return source.clone();
    };
    let mut text = source.text.clone().into_bytes();
    mask(&root, &mut text);
    // Whole characters were replaced by ASCII, so the text is still UTF-8.
    let text = String::from_utf8(text).unwrap_or_else(|_| source.text.clone());
    SourceFile::new(source.name.clone(), text)
}

/// The static findings about a template file that parses as JSON, as `template validate` gathers them: the size
/// and static checks, then the model's, each finding once. Located in `source`.
pub(crate) fn static_findings(source: &SourceFile, root: Node) -> (Template, Vec<Diagnostic>) {
    let mut findings = Vec::new();
    if let Some(d) = cairn_template::checks::check_size(source.text.len()) {
        findings.push(d);
    }
    findings.extend(cairn_template::checks::check_template(&root));
    let (template, model) = Template::parse(root);
    findings.extend(model);
    let located = findings.into_iter().map(|d| source.locate(d)).collect();
    (template, unique(located))
}

/// The findings with each (code, target, message) once: the static checks and the model both report some
/// section-shape problems.
pub(crate) fn unique(mut findings: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut seen = HashSet::new();
    findings.retain(|d| seen.insert((d.code.clone(), d.target.clone(), d.message.clone())));
    findings
}

/// The template problems an ARM error reports, located in `sources` (the template file first, then parameters
/// files): one finding per innermost error. `None` when none of them is about a place in those files (the error
/// is about something else, and is shown as it came).
/// A parameter given as `-p name=value` (in `inline`) is said to come from the command line.
fn locate(
    error: &ErrorDetail,
    sources: &[SourceFile],
    inline: &[String],
) -> Option<Vec<Diagnostic>> {
    let roots: Vec<Option<Node>> = sources
        .iter()
        .map(|s| cairn_json::parse(&s.text).ok())
        .collect();
    let mut leaves = Vec::new();
    innermost(error, &mut leaves);
    let mut any_located = false;
    let findings: Vec<Diagnostic> = leaves
        .into_iter()
        .map(|leaf| {
            if let Some(finding) = given_inline(leaf, inline) {
                any_located = true;
                return finding;
            }
            let finding = locate_detail(leaf, sources, &roots);
            any_located |= finding.line.is_some();
            finding
        })
        .collect();
    any_located.then(|| unique(findings))
}

/// A failure with the template problems of an invalid request (an ARM 400) shown as findings in `files`, as
/// `template validate` shows them ([`Failure::Reported`], exit 2); any other failure, or one about nothing in
/// those files, as it is.
pub(crate) fn explain(failure: Failure, files: &InputFiles) -> Failure {
    let Failure::Arm(error) = &failure else {
        return failure;
    };
    if error.status() != 400 {
        return failure;
    }
    match locate(error.detail(), &files.sources, &files.inline) {
        Some(findings) => {
            let shown = files.for_display();
            crate::render::print_diagnostics(&findings, &shown, crate::render::OutputFormat::Text);
            Failure::Reported
        }
        None => failure,
    }
}

/// Prints the error a deployment or stack ended with: its template problems as findings in `files` when it is
/// about places in them, else ARM's error JSON.
pub(crate) fn print_error(error: &ErrorDetail, files: &InputFiles) {
    match locate(error, &files.sources, &files.inline) {
        Some(findings) => {
            let shown = files.for_display();
            crate::render::print_diagnostics(&findings, &shown, crate::render::OutputFormat::Text)
        }
        None => crate::output::print_error_json(error),
    }
}

/// The errors with no inner errors below `error` (or `error` itself).
fn innermost<'e>(error: &'e ErrorDetail, out: &mut Vec<&'e ErrorDetail>) {
    match error.details.as_deref() {
        Some(details) if !details.is_empty() => {
            for d in details {
                innermost(d, out);
            }
        }
        _ => out.push(error),
    }
}

/// The JSON path an error is about: a `TemplateViolation`'s `path` (what ARM sends), else its `target`.
fn error_path(error: &ErrorDetail) -> Option<&str> {
    let violation = error
        .additional_info
        .iter()
        .flatten()
        .filter(|i| i.info_type.as_deref() == Some("TemplateViolation"))
        .find_map(|i| i.info.as_ref()?.get("path")?.as_str())
        .filter(|p| !p.is_empty());
    violation
        .or(error.target.as_deref())
        .filter(|p| !p.is_empty())
}

/// An ARM error about a parameter given as `-p name=value` as a finding that says so, not placed in a file (a
/// parameters file naming the parameter too was overridden). The value is not repeated: the command line has it.
fn given_inline(error: &ErrorDetail, inline: &[String]) -> Option<Diagnostic> {
    let path = error_path(error)?;
    let rest = path
        .strip_prefix("properties.")
        .unwrap_or(path)
        .strip_prefix("parameters.")?;
    let name = rest.split(['.', '[']).next()?;
    let given = inline.iter().find(|n| n.eq_ignore_ascii_case(name))?;
    let code = error.code.as_deref().unwrap_or("Error");
    let message = error.message.as_deref().unwrap_or_default();
    let mut finding = Diagnostic::error(
        code,
        format!("{message} (given on the command line: -p {given}=...)"),
        path,
    );
    // Shown as `--> command line (parameters.x.value)`.
    finding.file = Some("command line".to_owned());
    Some(finding)
}

/// One ARM error as a finding, positioned where its path leads in the template (or, for a request's parameters,
/// in a parameters file) when it leads somewhere.
fn locate_detail(
    error: &ErrorDetail,
    sources: &[SourceFile],
    roots: &[Option<Node>],
) -> Diagnostic {
    let code = error.code.as_deref().unwrap_or("Error");
    let message = error.message.as_deref().unwrap_or_default();
    let Some(path) = error_path(error) else {
        return Diagnostic::error(code, message, "");
    };
    // A request-level path (`properties.template.x`, `properties.parameters.p`) names the same places.
    let in_file = path
        .strip_prefix("properties.template.")
        .or_else(|| {
            path.strip_prefix("properties.")
                .filter(|p| p.starts_with("parameters."))
        })
        .unwrap_or(path);
    // Shown with the path the error is about; located where its `TemplateViolation` path leads (for a property
    // the template does not write, the closest place it does).
    let finding = Diagnostic::error(code, message, error.target.as_deref().unwrap_or(path));
    let Some(segments) = parse_path(in_file) else {
        return finding;
    };
    for (source, root) in sources.iter().zip(roots) {
        let Some(root) = root else { continue };
        let Some(place) = find(root, &segments, message) else {
            continue;
        };
        // In an object or array (an output, a resource), the string below it that holds the quoted name.
        let quoting = place
            .node
            .and_then(|node| quoting_string(node, message))
            .or(place.quoting);
        let located = match quoting {
            Some((node, token)) => finding.clone().with_span(node.span).with_token(token),
            None => finding.clone().with_span(place.span),
        };
        return source.locate(located);
    }
    finding
}

/// Where a path leads (the whole path: a path that stops short of its end leads nowhere).
struct Place<'n> {
    span: Span,
    /// The node a token may be searched in (the value), `None` when the place is a key.
    node: Option<&'n Node>,
    /// For a key, the string below its value that holds a name the message quotes.
    quoting: Option<(&'n Node, Span)>,
}

/// The first string at or below `node` (depth first) that holds a name `message` quotes, with the name's span.
fn quoting_string<'n>(node: &'n Node, message: &str) -> Option<(&'n Node, Span)> {
    match &node.kind {
        cairn_json::NodeKind::String(_) => token_in(node, message).map(|token| (node, token)),
        cairn_json::NodeKind::Array(items) => items.iter().find_map(|i| quoting_string(i, message)),
        cairn_json::NodeKind::Object(members) => members
            .iter()
            .find_map(|m| quoting_string(&m.value, message)),
        _ => None,
    }
}

/// Follows `segments` from `root`, keys ignoring case (ARM's property names are not case-sensitive; the last of
/// duplicate keys wins, as the parser keeps them). The last key's own span is the place when the value is not a
/// string (an object or array reads better from its key).
fn find<'n>(root: &'n Node, segments: &[Segment], message: &str) -> Option<Place<'n>> {
    let mut node = root;
    let mut key_span = None;
    for segment in segments {
        match segment {
            Segment::Key(key) => {
                let member = node
                    .as_object()?
                    .iter()
                    .rev()
                    .find(|m| m.key.eq_ignore_ascii_case(key))?;
                key_span = Some(member.key_span);
                node = &member.value;
            }
            Segment::Index(i) => {
                node = node.as_array()?.get(*i)?;
                key_span = None;
            }
        }
    }
    match (&node.kind, key_span) {
        (cairn_json::NodeKind::String(_), _) | (_, None) => Some(Place {
            span: node.span,
            node: Some(node),
            quoting: None,
        }),
        (_, Some(span)) => Some(Place {
            span,
            node: None,
            quoting: quoting_string(node, message),
        }),
    }
}

/// The part of a string node an error message quotes (`'toUppr'`, `'siteNme'`): the first quoted name of the
/// message, before the `(in '...')` that quotes the whole expression, that the string's text holds as a name
/// (not inside a longer one). A span of the decoded text, for [`Diagnostic::with_token`].
fn token_in(node: &Node, message: &str) -> Option<Span> {
    let text = node.as_str()?;
    let message = message.split(" (in '").next().unwrap_or(message);
    let quoted = message.split('\'').skip(1).step_by(2);
    for name in quoted {
        if name.is_empty() || name.len() == text.len() {
            continue;
        }
        // A literal argument (`parameters('x')`) reads best quoted; a function name bare.
        let as_literal = format!("'{name}'");
        if let Some(at) = text.find(&as_literal) {
            return Some(Span::new(at, at + as_literal.len()));
        }
        // Not inside a longer name (a property after a `.` is a name of its own).
        let is_name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let mut from = 0;
        while let Some(found) = text[from..].find(name) {
            let at = from + found;
            let before = text[..at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            if !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char) {
                return Some(Span::new(at, at + name.len()));
            }
            from = at + name.len();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_as_arm_writes_them() {
        assert_eq!(
            parse_path("resources[2].properties['a ''b'''].x").unwrap(),
            vec![
                Segment::Key("resources".into()),
                Segment::Index(2),
                Segment::Key("properties".into()),
                Segment::Key("a 'b'".into()),
                Segment::Key("x".into()),
            ]
        );
        assert_eq!(
            parse_path("['a.b']").unwrap(),
            vec![Segment::Key("a.b".into())]
        );
        assert!(parse_path("a[x]").is_none());
        assert!(parse_path("a..b").is_none());
    }

    const TEMPLATE: &str = r#"{
  "parameters": { "siteName": { "type": "string" } },
  "resources": [
    { "name": "[concat('\"a\"', parameters('siteNme'))]", "properties": { "x": "[toUppr('b')]" } }
  ]
}"#;

    fn sources() -> Vec<SourceFile> {
        vec![
            SourceFile::new("main.json", TEMPLATE),
            SourceFile::new(
                "params.json",
                r#"{ "parameters": { "siteNme": { "value": 1 } } }"#,
            ),
        ]
    }

    fn snippet_target(d: &Diagnostic, sources: &[SourceFile]) -> String {
        let source = sources
            .iter()
            .find(|s| Some(&s.name) == d.file.as_ref())
            .unwrap();
        source.text[d.span.unwrap().range()].to_string()
    }

    #[test]
    fn arm_errors_are_located_on_the_token_they_quote() {
        let error = ErrorDetail::new("InvalidTemplateDeployment", "not valid").with_details([
            ErrorDetail::new(
                "InvalidTemplate",
                "The template parameter 'siteNme' is not found. Did you mean 'siteName'? (in '[concat(...)]')",
            )
            .with_target("resources[0].name"),
            ErrorDetail::new("InvalidTemplate", "The template function 'toUppr' is not valid.")
                .with_target("properties.template.resources[0].properties.x"),
            ErrorDetail::new(
                "InvalidTemplate",
                "The template parameter 'siteNme' is provided but not declared in the template.",
            )
            .with_target("parameters.siteNme"),
            ErrorDetail::new("Conflict", "something else"),
        ]);
        let sources = sources();
        let found = locate(&error, &sources, &[]).unwrap();
        assert_eq!(found.len(), 4);
        assert_eq!(snippet_target(&found[0], &sources), "'siteNme'");
        assert_eq!((found[0].line, found[0].column), (Some(4), Some(44)));
        assert_eq!(snippet_target(&found[1], &sources), "toUppr");
        // Not in the template: the parameters file's key.
        assert_eq!(found[2].file.as_deref(), Some("params.json"));
        assert_eq!(snippet_target(&found[2], &sources), "\"siteNme\"");
        assert_eq!(found[3].line, None);
    }

    #[test]
    fn template_violations_give_the_path() {
        let error = ErrorDetail::new("InvalidTemplate", "bad").with_additional_info(
            "TemplateViolation",
            serde_json::json!({"lineNumber": 1, "linePosition": 200, "path": "resources[0].properties"}),
        );
        let found = locate(&error, &sources(), &[]).unwrap();
        assert_eq!(found[0].target, "resources[0].properties");
        assert_eq!(found[0].line, Some(4));
    }

    #[test]
    fn parameters_files_are_shown_with_their_values_masked() {
        let files = InputFiles {
            sources: sources(),
            has_template: true,
            inline: Vec::new(),
        };
        let shown = files.for_display();
        assert_eq!(shown[0].text, TEMPLATE);
        assert_eq!(
            shown[1].text,
            r#"{ "parameters": { "siteNme": { "value": 1 } } }"#
        );
        let secret = SourceFile::new("p.json", r#"{"a": {"value": "s3cré \" x"}}"#);
        let masked = masked(&secret);
        assert_eq!(masked.text, r#"{"a": {"value": "***********"}}"#);
        assert_eq!(masked.text.len(), secret.text.len());
    }

    /// A wrong value given as `-p name=value` is the command line's, not the parameters file's that names the
    /// parameter too (and whose value it overrode).
    #[test]
    fn a_parameter_given_inline_is_blamed_on_the_command_line() {
        let sources = vec![SourceFile::new(
            "main.parameters.json",
            r#"{ "parameters": { "greeting": { "value": "Hello" } } }"#,
        )];
        let error = ErrorDetail::new(
            "InvalidTemplate",
            "The provided value for the template parameter 'greeting' is not valid.",
        )
        .with_target("parameters.greeting.value");
        let found = locate(&error, &sources, &["greeting".to_owned()]).unwrap();
        assert_eq!(found[0].line, None, "{found:?}");
        assert!(
            found[0]
                .message
                .ends_with("(given on the command line: -p greeting=...)"),
            "{found:?}"
        );
        // From the file alone, it is the file's.
        assert_eq!(locate(&error, &sources, &[]).unwrap()[0].line, Some(1));
    }

    #[test]
    fn errors_about_nothing_in_the_files_are_not_located() {
        let error = ErrorDetail::new(
            "ResourceGroupNotFound",
            "Resource group 'x' could not be found.",
        );
        assert!(locate(&error, &sources(), &[]).is_none());
        let elsewhere = ErrorDetail::new("InvalidTemplate", "m").with_target("resources[7].name");
        assert!(locate(&elsewhere, &sources(), &[]).is_none());
    }
}
