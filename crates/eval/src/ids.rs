//! Resource IDs: building them per scope from a type and names, and splitting them apart again.

/// Splits `Ns/type1/type2` into the namespace and the type segments; `None` when there is no `/`.
pub fn split_type(full_type: &str) -> Option<(&str, Vec<&str>)> {
    let mut parts = full_type.split('/');
    let namespace = parts.next().filter(|n| !n.is_empty())?;
    let types: Vec<&str> = parts.collect();
    if types.is_empty() || types.iter().any(|t| t.is_empty()) {
        return None;
    }
    Some((namespace, types))
}

/// Why an ID could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("the resource type '{0}' is not valid: it must be 'Namespace/type[/childType...]'")]
    InvalidType(String),
    #[error(
        "unable to evaluate the resource ID: the type '{full_type}' has {types} segment(s) but {names} name(s) were given"
    )]
    MismatchingResourceSegments {
        full_type: String,
        types: usize,
        names: usize,
    },
}

/// `{scope}/providers/{ns}/{t1}/{n1}/{t2}/{n2}`; `scope` is `""` for tenant-level IDs. Resource groups and
/// subscriptions have their own shapes (`/subscriptions/{s}/resourceGroups/{name}`).
pub fn resource_id(scope: &str, full_type: &str, names: &[&str]) -> Result<String, IdError> {
    let Some((namespace, types)) = split_type(full_type) else {
        return Err(IdError::InvalidType(full_type.to_string()));
    };
    if types.len() != names.len() {
        return Err(IdError::MismatchingResourceSegments {
            full_type: full_type.to_string(),
            types: types.len(),
            names: names.len(),
        });
    }
    if namespace.eq_ignore_ascii_case("Microsoft.Resources") && types.len() == 1 {
        if types[0].eq_ignore_ascii_case("resourceGroups") && scope_is_subscription(scope) {
            return Ok(format!("{scope}/resourceGroups/{}", names[0]));
        }
        if types[0].eq_ignore_ascii_case("subscriptions") && scope.is_empty() {
            return Ok(format!("/subscriptions/{}", names[0]));
        }
    }
    let mut id = String::with_capacity(scope.len() + full_type.len() + 64);
    id.push_str(scope);
    id.push_str("/providers/");
    id.push_str(namespace);
    for (t, n) in types.iter().zip(names) {
        id.push('/');
        id.push_str(t);
        id.push('/');
        id.push_str(n);
    }
    Ok(id)
}

fn scope_is_subscription(scope: &str) -> bool {
    let parts: Vec<&str> = scope.split('/').collect();
    parts.len() == 3 && parts[0].is_empty() && parts[1].eq_ignore_ascii_case("subscriptions")
}

pub fn subscription_scope(subscription_id: &str) -> String {
    format!("/subscriptions/{subscription_id}")
}

pub fn resource_group_scope(subscription_id: &str, resource_group: &str) -> String {
    format!("/subscriptions/{subscription_id}/resourceGroups/{resource_group}")
}

pub fn management_group_scope(management_group: &str) -> String {
    format!("/providers/Microsoft.Management/managementGroups/{management_group}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let rg = resource_group_scope("s", "rg");
        assert_eq!(
            resource_id(
                &rg,
                "Microsoft.Network/virtualNetworks/subnets",
                &["v", "sn"]
            )
            .unwrap(),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/sn"
        );
        assert_eq!(
            resource_id(
                &subscription_scope("s"),
                "Microsoft.Resources/resourceGroups",
                &["rg"]
            )
            .unwrap(),
            "/subscriptions/s/resourceGroups/rg"
        );
        assert_eq!(
            resource_id("", "Microsoft.Foo/bars", &["b"]).unwrap(),
            "/providers/Microsoft.Foo/bars/b"
        );
        assert!(matches!(
            resource_id("", "Microsoft.Foo/bars", &["a", "b"]),
            Err(IdError::MismatchingResourceSegments { .. })
        ));
        assert!(resource_id("", "bars", &["a"]).is_err());
    }
}
