//! Type checking of values against ARM parameter/output types and user-defined types (`definitions`).
