//! Evaluation errors, shaped so callers can report them the way ARM does (code, message, position).

use std::fmt;

use cairn_expr::{ExprError, Span};

use crate::budget::{LIMIT_EXCEEDED, Limit};

/// One step of a JSON path inside the value being evaluated (`properties.tags['x']`, `items[3]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

/// Renders segments as a JSON path like `properties.items[2].name`.
pub fn render_path(segments: &[PathSegment]) -> String {
    let mut out = String::new();
    for seg in segments {
        match seg {
            PathSegment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSegment::Index(i) => {
                out.push_str(&format!("[{i}]"));
            }
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EvalErrorKind {
    #[error("the language expression is not valid: {0}")]
    Syntax(ExprError),
    /// `hint` is a "did you mean" sentence (with its leading space) or empty.
    #[error(
        "the template function '{name}' is not valid.{hint} Please see https://aka.ms/arm-functions for usage details"
    )]
    UnknownFunction { name: String, hint: String },
    #[error("unable to evaluate template language function '{name}': {message}")]
    Function { name: String, message: String },
    #[error("{message}")]
    Expression { message: String },
    /// A runtime value (e.g. `reference()`) is not available; the caller turns the whole template string into an
    /// unevaluated marker instead of failing.
    #[error("the value is not available until deployment: {reason}")]
    Unavailable { reason: String },
    /// An error with its own ARM code (`fail()`, host answers, limits).
    #[error("{message}")]
    Coded { code: String, message: String },
    /// An evaluation budget ran out (see [`crate::EvalLimits`]).
    #[error(
        "The template language evaluation exceeded {limit} ({setting} = {value}): {detail}.",
        setting = limit.setting()
    )]
    LimitExceeded {
        limit: Limit,
        value: u64,
        detail: String,
    },
}

/// What a secure error says instead of its detail. The detail may quote a secure value, or something computed from
/// one (`toUpper`, `base64`, a key of a secure object), so none of it is kept.
pub const SECURE_DETAIL: &str =
    "the expression reads a secure value, so the details are not shown.";

/// An evaluation error. `span` locates it inside the expression text; `node_span` locates the JSON string in the
/// source document; `path` is the JSON path below the node the caller asked to evaluate.
///
/// `secure` is true when the failed evaluation read a secure value (a secure parameter, a Key Vault secret, a
/// `list*` answer): the message then names the function but holds none of the values (see
/// [`EvalError::into_secure`]).
#[derive(Clone, Debug, PartialEq)]
pub struct EvalError {
    pub kind: EvalErrorKind,
    pub span: Option<Span>,
    pub node_span: Option<cairn_json::Span>,
    pub path: Vec<PathSegment>,
    pub secure: bool,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl std::error::Error for EvalError {}

impl EvalError {
    pub fn new(kind: EvalErrorKind) -> EvalError {
        EvalError {
            kind,
            span: None,
            node_span: None,
            path: Vec::new(),
            secure: false,
        }
    }

    pub fn expression(message: impl Into<String>) -> EvalError {
        EvalError::new(EvalErrorKind::Expression {
            message: message.into(),
        })
    }

    pub fn coded(code: impl Into<String>, message: impl Into<String>) -> EvalError {
        EvalError::new(EvalErrorKind::Coded {
            code: code.into(),
            message: message.into(),
        })
    }

    pub fn unavailable(reason: impl Into<String>) -> EvalError {
        EvalError::new(EvalErrorKind::Unavailable {
            reason: reason.into(),
        })
    }

    /// True when a budget ran out: callers must not treat it as a recoverable failure of one expression.
    pub fn is_limit(&self) -> bool {
        matches!(self.kind, EvalErrorKind::LimitExceeded { .. })
    }

    pub fn is_unavailable(&self) -> bool {
        matches!(self.kind, EvalErrorKind::Unavailable { .. })
    }

    /// Marks the error secure and drops every detail that may quote a value: a function error keeps the function
    /// name, a coded error its code, and every error its spans and path. Kinds whose text comes only from the
    /// template itself (syntax, unknown function) stay as they are. Marking twice changes nothing.
    pub fn into_secure(mut self) -> EvalError {
        if self.secure {
            return self;
        }
        self.secure = true;
        self.kind = match self.kind {
            EvalErrorKind::Function { name, .. } => EvalErrorKind::Function {
                name,
                message: SECURE_DETAIL.to_string(),
            },
            EvalErrorKind::Expression { .. } => EvalErrorKind::Expression {
                message: secure_sentence(),
            },
            EvalErrorKind::Coded { code, .. } => EvalErrorKind::Coded {
                code,
                message: secure_sentence(),
            },
            EvalErrorKind::Unavailable { .. } => EvalErrorKind::Unavailable {
                reason: SECURE_DETAIL.to_string(),
            },
            // The detail may hold a size computed from a secure value (`padLeft('x', secret)`); the limit and its
            // setting come from the configuration.
            EvalErrorKind::LimitExceeded { limit, value, .. } => EvalErrorKind::LimitExceeded {
                limit,
                value,
                detail: "the expression reads a secure value, so the details are not shown"
                    .to_string(),
            },
            kept @ (EvalErrorKind::Syntax(_) | EvalErrorKind::UnknownFunction { .. }) => kept,
        };
        self
    }

    /// [`EvalError::into_secure`] when `secure` is true.
    pub fn secure_if(self, secure: bool) -> EvalError {
        if secure { self.into_secure() } else { self }
    }

    /// The ARM error code.
    pub fn code(&self) -> &str {
        match &self.kind {
            EvalErrorKind::Coded { code, .. } => code,
            EvalErrorKind::LimitExceeded { .. } => LIMIT_EXCEEDED,
            _ => "InvalidTemplate",
        }
    }

    /// Sets the position inside the expression text, unless one is set: the innermost wins. Once the JSON string
    /// is known (`node_span`), spans of enclosing expressions (which index other strings) are not taken.
    pub fn with_span(mut self, span: Span) -> EvalError {
        if self.node_span.is_none() {
            self.span.get_or_insert(span);
        }
        self
    }

    pub fn with_node_span(mut self, span: cairn_json::Span) -> EvalError {
        self.node_span.get_or_insert(span);
        self
    }

    /// Prepends a path segment (errors bubble up from the leaf).
    pub fn at(mut self, segment: PathSegment) -> EvalError {
        self.path.insert(0, segment);
        self
    }
}

/// [`SECURE_DETAIL`] as a sentence of its own.
fn secure_sentence() -> String {
    format!("The template language expression failed: {SECURE_DETAIL}")
}

/// What a function implementation returns on failure; the evaluator adds the function name and position.
#[derive(Clone, Debug, PartialEq)]
pub enum FnError {
    /// A message about the call ("the index ... is out of range").
    Message(String),
    /// An error that already has its full shape (from a nested evaluation, or a coded error).
    Eval(Box<EvalError>),
}

impl FnError {
    pub fn msg(message: impl Into<String>) -> FnError {
        FnError::Message(message.into())
    }

    pub fn coded(code: impl Into<String>, message: impl Into<String>) -> FnError {
        FnError::Eval(Box::new(EvalError::coded(code, message)))
    }

    pub fn unavailable(reason: impl Into<String>) -> FnError {
        FnError::Eval(Box::new(EvalError::unavailable(reason)))
    }
}

impl From<EvalError> for FnError {
    fn from(e: EvalError) -> FnError {
        FnError::Eval(Box::new(e))
    }
}
