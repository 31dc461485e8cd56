//! Prints an expression back to canonical text: parsing the output gives the same tree.

use std::fmt;

use crate::ast::{Expr, ExprKind};

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::String(s) => write!(f, "'{}'", s.replace('\'', "''")),
            ExprKind::Int(i) => write!(f, "{i}"),
            ExprKind::Call {
                namespace,
                name,
                args,
            } => {
                if let Some(ns) = namespace {
                    write!(f, "{}.", ns.name)?;
                }
                write!(f, "{}(", name.name)?;
                for (i, arg) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{arg}")?;
                }
                f.write_str(")")
            }
            ExprKind::Property { target, name } => write!(f, "{target}.{}", name.name),
            ExprKind::Index { target, index } => write!(f, "{target}[{index}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::ast::{Expr, ExprKind, Ident, Span};

    fn ident() -> impl Strategy<Value = Ident> {
        "[A-Za-z_$][A-Za-z0-9_$]{0,6}".prop_map(|name| Ident {
            name,
            span: Span::default(),
        })
    }

    fn expr() -> impl Strategy<Value = Expr> {
        let leaf = prop_oneof![
            "\\PC{0,6}".prop_map(ExprKind::String),
            any::<i64>().prop_map(ExprKind::Int),
            (proptest::option::of(ident()), ident()).prop_map(|(namespace, name)| ExprKind::Call {
                namespace,
                name,
                args: vec![]
            }),
        ]
        .prop_map(|kind| Expr {
            kind,
            span: Span::default(),
        });
        leaf.prop_recursive(5, 48, 4, |inner| {
            prop_oneof![
                (
                    proptest::option::of(ident()),
                    ident(),
                    proptest::collection::vec(inner.clone(), 0..4)
                )
                    .prop_map(|(namespace, name, args)| ExprKind::Call {
                        namespace,
                        name,
                        args
                    }),
                (inner.clone(), ident()).prop_map(|(t, name)| ExprKind::Property {
                    target: Box::new(t),
                    name
                }),
                (inner.clone(), inner).prop_map(|(t, i)| ExprKind::Index {
                    target: Box::new(t),
                    index: Box::new(i)
                }),
            ]
            .prop_map(|kind| Expr {
                kind,
                span: Span::default(),
            })
        })
    }

    proptest! {
        #[test]
        fn print_then_parse_gives_the_same_tree(e in expr()) {
            let text = e.to_string();
            let back = crate::parse(&text).map_err(|err| TestCaseError::fail(format!("{text}: {err}")))?;
            prop_assert!(back.same_as(&e), "{} reparsed as {}", text, back);
        }

        #[test]
        fn parser_never_panics(s in "\\PC{0,64}") {
            let _ = crate::parse(&s);
        }

        #[test]
        fn parser_never_panics_on_expression_like_input(s in "[a-z()\\[\\]',.0-9 -]{0,64}") {
            let _ = crate::parse(&s);
        }
    }
}
