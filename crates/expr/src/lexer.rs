//! Tokens of the expression language, with byte spans.

use crate::ast::Span;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    String(String),
    Int(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Dot,
    Minus,
    /// A character that cannot start any token.
    Unknown(char),
    /// A string literal with no closing quote.
    UnterminatedString,
    End,
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Span,
}

pub(crate) fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

pub(crate) fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// Splits `text` into tokens; spans are offset by `base`.
pub(crate) fn lex(text: &str, base: usize) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        let start = i;
        let single = |tok| (tok, start + c.len_utf8());
        let (tok, end) = match c {
            c if c.is_whitespace() => {
                chars.next();
                continue;
            }
            '(' => single(Tok::LParen),
            ')' => single(Tok::RParen),
            '[' => single(Tok::LBracket),
            ']' => single(Tok::RBracket),
            ',' => single(Tok::Comma),
            '.' => single(Tok::Dot),
            '-' => single(Tok::Minus),
            '\'' => {
                chars.next();
                let mut s = String::new();
                let mut end = None;
                while let Some((j, ch)) = chars.next() {
                    if ch == '\'' {
                        if let Some(&(_, '\'')) = chars.peek() {
                            chars.next();
                            s.push('\'');
                            continue;
                        }
                        end = Some(j + 1);
                        break;
                    }
                    s.push(ch);
                }
                match end {
                    Some(end) => {
                        tokens.push(Token {
                            tok: Tok::String(s),
                            span: Span::new(base + start, base + end),
                        });
                    }
                    None => tokens.push(Token {
                        tok: Tok::UnterminatedString,
                        span: Span::new(base + start, base + text.len()),
                    }),
                }
                continue;
            }
            c if c.is_ascii_digit() => {
                let mut end = start;
                while let Some(&(j, d)) = chars.peek() {
                    if !d.is_ascii_digit() {
                        break;
                    }
                    end = j + 1;
                    chars.next();
                }
                tokens.push(Token {
                    tok: Tok::Int(text[start..end].to_string()),
                    span: Span::new(base + start, base + end),
                });
                continue;
            }
            c if is_ident_start(c) => {
                let mut end = start;
                while let Some(&(j, d)) = chars.peek() {
                    if !is_ident_continue(d) {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                tokens.push(Token {
                    tok: Tok::Ident(text[start..end].to_string()),
                    span: Span::new(base + start, base + end),
                });
                continue;
            }
            other => single(Tok::Unknown(other)),
        };
        chars.next();
        tokens.push(Token {
            tok,
            span: Span::new(base + start, base + end),
        });
    }
    tokens.push(Token {
        tok: Tok::End,
        span: Span::new(base + text.len(), base + text.len()),
    });
    tokens
}
