//! cidr functions.

use super::FunctionDef;

pub(super) const FUNCTIONS: &[FunctionDef] = &[];
