//! Bicep's extension type format (Azure/bicep-types: `index.json` and the `types.json` files it references) as
//! pure types: the serde [`model`], a resolved [`TypeSet`] loaded from a set of files, a [`TypeBuilder`] that
//! writes the files, and [`check`], which judges a resource body against a resource type the way Bicep's
//! compile-time checks do (unknown property, missing required property, wrong type, read-only property set,
//! identifier changed on update). No I/O: callers hand in the files' text.

pub mod build;
pub mod check;
pub mod model;
pub mod set;

pub use build::TypeBuilder;
pub use check::{
    Body, Finding, FindingKind, PathSegment, check_body, check_update, without_read_only,
};
pub use model::{Flags, ObjectProperty, TypeEntry, TypeIndex, TypeRef};
pub use set::{LoadError, TypeId, TypeSet};
