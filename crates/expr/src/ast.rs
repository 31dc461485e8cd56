//! Expression syntax tree. Every node carries the byte span it was parsed from.

/// A byte range in the expression's source string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start,
            end: other.end,
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// An identifier: a function name, namespace or property name.
#[derive(Clone, Debug)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    /// `'text'` with `''` decoded to `'`.
    String(String),
    /// An integer literal, possibly negative.
    Int(i64),
    /// `name(args)` or `namespace.name(args)`.
    Call {
        namespace: Option<Ident>,
        name: Ident,
        args: Vec<Expr>,
    },
    /// `target.name`
    Property { target: Box<Expr>, name: Ident },
    /// `target[index]`
    Index { target: Box<Expr>, index: Box<Expr> },
}

impl Expr {
    /// Structural equality that ignores spans (for round-trip tests and caching).
    pub fn same_as(&self, other: &Expr) -> bool {
        match (&self.kind, &other.kind) {
            (ExprKind::String(a), ExprKind::String(b)) => a == b,
            (ExprKind::Int(a), ExprKind::Int(b)) => a == b,
            (
                ExprKind::Call {
                    namespace: na,
                    name: a,
                    args: aa,
                },
                ExprKind::Call {
                    namespace: nb,
                    name: b,
                    args: ab,
                },
            ) => {
                na.as_ref().map(|n| &n.name) == nb.as_ref().map(|n| &n.name)
                    && a.name == b.name
                    && aa.len() == ab.len()
                    && aa.iter().zip(ab).all(|(x, y)| x.same_as(y))
            }
            (
                ExprKind::Property {
                    target: ta,
                    name: a,
                },
                ExprKind::Property {
                    target: tb,
                    name: b,
                },
            ) => a.name == b.name && ta.same_as(tb),
            (
                ExprKind::Index {
                    target: ta,
                    index: ia,
                },
                ExprKind::Index {
                    target: tb,
                    index: ib,
                },
            ) => ta.same_as(tb) && ia.same_as(ib),
            _ => false,
        }
    }

    /// The call's function name when this is a plain (non-namespaced) call to `name` (ignoring case).
    pub fn is_call_to(&self, name: &str) -> bool {
        matches!(&self.kind, ExprKind::Call { namespace: None, name: n, .. } if n.name.eq_ignore_ascii_case(name))
    }

    /// Visits this node and every node below it, parents first.
    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match &self.kind {
            ExprKind::String(_) | ExprKind::Int(_) => {}
            ExprKind::Call { args, .. } => args.iter().for_each(|a| a.walk(f)),
            ExprKind::Property { target, .. } => target.walk(f),
            ExprKind::Index { target, index } => {
                target.walk(f);
                index.walk(f);
            }
        }
    }
}
