//! The serde models of the deployments, deployment stacks and resource groups APIs: camelCase, `null`s
//! omitted, unknown fields ignored on input, enums extensible (unknown values kept).

pub mod common;
pub mod deployment;
pub mod extension;
pub mod lro;
pub mod operation;
pub mod parameters;
pub mod resource_group;
pub mod stack;
pub mod stack_drift;
pub mod stack_what_if;
pub mod what_if;
