//! Recursive-descent parser from tokens to [`Expr`]. It never panics, whatever the input.

use crate::ast::{Expr, ExprKind, Ident, Span};
use crate::lexer::{Tok, Token, lex};

/// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
pub const MAX_DEPTH: usize = 200;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExprErrorKind {
    #[error("the expression is empty")]
    Empty,
    #[error("expected {expected} but found {found}")]
    Unexpected {
        expected: &'static str,
        found: String,
    },
    #[error("the string literal is not terminated")]
    UnterminatedString,
    #[error("the integer literal '{0}' is out of range")]
    IntegerOutOfRange(String),
    #[error("the expression is nested more than {MAX_DEPTH} levels deep")]
    TooDeep,
}

/// A syntax error with the byte span it applies to.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct ExprError {
    pub kind: ExprErrorKind,
    pub span: Span,
}

/// Parses expression text (without the outer brackets).
pub fn parse(text: &str) -> Result<Expr, ExprError> {
    parse_with_offset(text, 0)
}

pub(crate) fn parse_with_offset(text: &str, base: usize) -> Result<Expr, ExprError> {
    let tokens = lex(text, base);
    let mut p = Parser { tokens, pos: 0 };
    if p.peek().tok == Tok::End {
        return Err(ExprError {
            kind: ExprErrorKind::Empty,
            span: p.peek().span,
        });
    }
    let expr = p.expr(0)?;
    if p.peek().tok != Tok::End {
        return Err(p.unexpected("the end of the expression"));
    }
    Ok(expr)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Ident(s) => format!("'{s}'"),
        Tok::String(_) => "a string literal".into(),
        Tok::Int(s) => format!("'{s}'"),
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::LBracket => "'['".into(),
        Tok::RBracket => "']'".into(),
        Tok::Comma => "','".into(),
        Tok::Dot => "'.'".into(),
        Tok::Minus => "'-'".into(),
        Tok::Unknown(c) => format!("'{c}'"),
        Tok::UnterminatedString => "an unterminated string".into(),
        Tok::End => "the end of the expression".into(),
    }
}

impl Parser {
    fn peek(&self) -> &Token {
        // `lex` always ends with `End`, and `bump` never moves past it.
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if t.tok != Tok::End {
            self.pos += 1;
        }
        t
    }

    fn unexpected(&self, expected: &'static str) -> ExprError {
        let t = self.peek();
        if t.tok == Tok::UnterminatedString {
            return ExprError {
                kind: ExprErrorKind::UnterminatedString,
                span: t.span,
            };
        }
        ExprError {
            kind: ExprErrorKind::Unexpected {
                expected,
                found: describe(&t.tok),
            },
            span: t.span,
        }
    }

    fn expect(&mut self, tok: Tok, expected: &'static str) -> Result<Token, ExprError> {
        if self.peek().tok == tok {
            Ok(self.bump())
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn ident(&mut self, expected: &'static str) -> Result<Ident, ExprError> {
        match &self.peek().tok {
            Tok::Ident(name) => {
                let name = name.clone();
                let span = self.bump().span;
                Ok(Ident { name, span })
            }
            _ => Err(self.unexpected(expected)),
        }
    }

    fn expr(&mut self, depth: usize) -> Result<Expr, ExprError> {
        if depth > MAX_DEPTH {
            return Err(ExprError {
                kind: ExprErrorKind::TooDeep,
                span: self.peek().span,
            });
        }
        let mut expr = self.primary(depth)?;
        loop {
            match self.peek().tok {
                Tok::Dot => {
                    self.bump();
                    let name = self.property_name()?;
                    let span = expr.span.to(name.span);
                    expr = Expr {
                        kind: ExprKind::Property {
                            target: Box::new(expr),
                            name,
                        },
                        span,
                    };
                }
                Tok::LBracket => {
                    self.bump();
                    let index = self.expr(depth + 1)?;
                    let close = self.expect(Tok::RBracket, "']'")?;
                    let span = expr.span.to(close.span);
                    expr = Expr {
                        kind: ExprKind::Index {
                            target: Box::new(expr),
                            index: Box::new(index),
                        },
                        span,
                    };
                }
                _ => return Ok(expr),
            }
        }
    }

    /// Property names after `.` are identifiers; integers are accepted too (`x.0` reads property "0").
    fn property_name(&mut self) -> Result<Ident, ExprError> {
        if let Tok::Int(digits) = &self.peek().tok {
            let name = digits.clone();
            let span = self.bump().span;
            return Ok(Ident { name, span });
        }
        self.ident("a property name")
    }

    fn primary(&mut self, depth: usize) -> Result<Expr, ExprError> {
        let start = self.peek().span;
        match self.peek().tok.clone() {
            Tok::String(s) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::String(s),
                    span: start,
                })
            }
            Tok::Int(digits) => {
                self.bump();
                let value = parse_int(&digits, false, start)?;
                Ok(Expr {
                    kind: ExprKind::Int(value),
                    span: start,
                })
            }
            Tok::Minus => {
                self.bump();
                let Tok::Int(digits) = self.peek().tok.clone() else {
                    return Err(self.unexpected("an integer after '-'"));
                };
                let end = self.bump().span;
                let span = start.to(end);
                let value = parse_int(&digits, true, span)?;
                Ok(Expr {
                    kind: ExprKind::Int(value),
                    span,
                })
            }
            Tok::Ident(_) => {
                let first = self.ident("a function name")?;
                let (namespace, name) = if self.peek().tok == Tok::Dot {
                    self.bump();
                    let name = self.ident("a function name after the namespace")?;
                    (Some(first), name)
                } else {
                    (None, first)
                };
                self.expect(Tok::LParen, "'('")?;
                let mut args = Vec::new();
                if self.peek().tok != Tok::RParen {
                    loop {
                        args.push(self.expr(depth + 1)?);
                        if self.peek().tok == Tok::Comma {
                            self.bump();
                            continue;
                        }
                        break;
                    }
                }
                let close = self.expect(Tok::RParen, "',' or ')'")?;
                Ok(Expr {
                    kind: ExprKind::Call {
                        namespace,
                        name,
                        args,
                    },
                    span: start.to(close.span),
                })
            }
            _ => Err(self.unexpected("a string, an integer or a function call")),
        }
    }
}

fn parse_int(digits: &str, negative: bool, span: Span) -> Result<i64, ExprError> {
    let text = if negative {
        format!("-{digits}")
    } else {
        digits.to_string()
    };
    text.parse::<i64>().map_err(|_| ExprError {
        kind: ExprErrorKind::IntegerOutOfRange(text),
        span,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> String {
        parse(text).unwrap().to_string()
    }

    fn err(text: &str) -> (ExprErrorKind, std::ops::Range<usize>) {
        let e = parse(text).unwrap_err();
        (e.kind, e.span.range())
    }

    #[test]
    fn literals_and_calls() {
        assert_eq!(
            ok("concat('a', 'it''s', -13, 42)"),
            "concat('a', 'it''s', -13, 42)"
        );
        assert_eq!(ok("  util.tag( 'dev' ) "), "util.tag('dev')");
        assert_eq!(
            ok("reference('x').outputs.y.value[0]['k']"),
            "reference('x').outputs.y.value[0]['k']"
        );
        assert_eq!(ok("f()"), "f()");
        assert_eq!(ok("f(\n1,\n2)"), "f(1, 2)");
    }

    #[test]
    fn spans() {
        let e = parse("concat('a', b())").unwrap();
        assert_eq!(e.span.range(), 0..16);
        let ExprKind::Call { args, .. } = &e.kind else {
            panic!()
        };
        assert_eq!(args[1].span.range(), 12..15);
    }

    #[test]
    fn errors() {
        assert_eq!(err("").0, ExprErrorKind::Empty);
        assert_eq!(
            err("concat('a'").0,
            ExprErrorKind::Unexpected {
                expected: "',' or ')'",
                found: "the end of the expression".into()
            }
        );
        assert_eq!(
            err("concat('a)"),
            (ExprErrorKind::UnterminatedString, 7..10)
        );
        assert_eq!(err("f() g()").1, 4..5);
        assert_eq!(
            err("99999999999999999999").0,
            ExprErrorKind::IntegerOutOfRange("99999999999999999999".into())
        );
        assert!(matches!(err("a").0, ExprErrorKind::Unexpected { .. }));
        assert!(matches!(err("f(#)").0, ExprErrorKind::Unexpected { .. }));
        assert_eq!(err(&"f(".repeat(500)).0, ExprErrorKind::TooDeep);
    }
}
