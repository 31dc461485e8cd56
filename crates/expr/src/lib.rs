//! The ARM template expression language: lexer, parser, AST with spans, and printer.
//!
//! A JSON string is an expression when it starts with `[` (but not `[[`) and ends with `]`; see
//! [`classify`]. The grammar (reference `template-language.md` §2.2) is small: string and integer literals,
//! function calls (optionally `namespace.function` for user-defined functions), `.property` access and
//! `[index]` access. There are no operators.

mod ast;
mod lexer;
mod parser;
mod print;

pub use ast::{Expr, ExprKind, Ident, Span};
pub use parser::{ExprError, ExprErrorKind, MAX_DEPTH, parse};

/// What a template string turns out to be.
#[derive(Clone, Debug, PartialEq)]
pub enum TemplateString<'s> {
    /// A plain string (after removing the `[[` escape, if any).
    Literal(std::borrow::Cow<'s, str>),
    /// An expression: the text between the outer brackets, and its byte offset in the original string.
    Expression { text: &'s str, offset: usize },
}

/// Decides whether a JSON string value is an expression, per ARM's rule `^\[(?!\[).*\]$`.
pub fn classify(s: &str) -> TemplateString<'_> {
    if s.starts_with("[[") {
        if s.ends_with(']') {
            return TemplateString::Literal(std::borrow::Cow::Owned(s[1..].to_string()));
        }
        return TemplateString::Literal(std::borrow::Cow::Borrowed(s));
    }
    if s.len() >= 2 && s.starts_with('[') && s.ends_with(']') {
        return TemplateString::Expression {
            text: &s[1..s.len() - 1],
            offset: 1,
        };
    }
    TemplateString::Literal(std::borrow::Cow::Borrowed(s))
}

/// Parses a template string: `Ok(None)` for a literal, `Ok(Some(expr))` for an expression, with spans relative
/// to the start of `s`.
pub fn parse_template_string(s: &str) -> Result<Option<Expr>, ExprError> {
    match classify(s) {
        TemplateString::Literal(_) => Ok(None),
        TemplateString::Expression { text, offset } => {
            parser::parse_with_offset(text, offset).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(classify("[[abc]"), TemplateString::Literal("[abc]".into()));
        assert_eq!(classify("[[]"), TemplateString::Literal("[]".into()));
        assert_eq!(
            classify("[abc] def"),
            TemplateString::Literal("[abc] def".into())
        );
        assert_eq!(classify("plain"), TemplateString::Literal("plain".into()));
        assert!(matches!(
            classify("[f()]"),
            TemplateString::Expression {
                text: "f()",
                offset: 1
            }
        ));
        assert!(matches!(
            classify("[]"),
            TemplateString::Expression {
                text: "",
                offset: 1
            }
        ));
    }
}
