//! Scope and deployment functions: `tenant`, `subscription`, `resourceGroup`, `managementGroup`, `deployment`,
//! `environment`, `deployer`. Their values come from the deployment facts.

use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::Value;

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("tenant", 0, Some(0), tenant),
    FunctionDef::eager("subscription", 0, Some(0), subscription),
    FunctionDef::eager("resourceGroup", 0, Some(0), resource_group),
    FunctionDef::eager("managementGroup", 0, Some(0), management_group),
    FunctionDef::eager("deployment", 0, Some(0), deployment),
    FunctionDef::eager("environment", 0, Some(0), environment),
    FunctionDef::eager("deployer", 0, Some(0), deployer),
];

fn fact(value: &Value, function: &str) -> Result<Value, FnError> {
    if value.is_null() {
        return Err(FnError::msg(format!(
            "the template function '{function}' is not available at this deployment scope."
        )));
    }
    Ok(value.clone())
}

fn tenant(ev: &mut Evaluator<'_>, _: Args) -> Result<Value, FnError> {
    fact(&ev.env().facts().tenant, "tenant")
}

fn subscription(ev: &mut Evaluator<'_>, _: Args) -> Result<Value, FnError> {
    fact(&ev.env().facts().subscription, "subscription")
}

fn resource_group(ev: &mut Evaluator<'_>, _: Args) -> Result<Value, FnError> {
    fact(&ev.env().facts().resource_group_object, "resourceGroup")
}

fn management_group(ev: &mut Evaluator<'_>, _: Args) -> Result<Value, FnError> {
    fact(&ev.env().facts().management_group_object, "managementGroup")
}

fn deployment(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let facts = ev.env().facts();
    if !facts.deployment.is_null() {
        return Ok(facts.deployment.clone());
    }
    Ok(ev.runtime(crate::env::RuntimeCall {
        name: "deployment",
        args: args.as_slice(),
    })?)
}

fn environment(ev: &mut Evaluator<'_>, _: Args) -> Result<Value, FnError> {
    fact(&ev.env().facts().environment, "environment")
}

fn deployer(ev: &mut Evaluator<'_>, _: Args) -> Result<Value, FnError> {
    fact(&ev.env().facts().deployer, "deployer")
}
