//! Taking over, from `kubectl apply` (client-side), the fields cairn applies too: what adopting an object
//! `kubectl` created needs to be cairn's from then on.
//!
//! Client-side apply records its fields under the manager `kubectl-client-side-apply` (an `Update`). When
//! cairn then applies the same values, server-side apply makes the two co-owners, and every later change
//! of such a field by cairn would be a conflict with `kubectl-client-side-apply` although nothing changed
//! since the take-over. kubectl solves the same problem for its own server-side apply by moving its
//! client-side manager's fields to its server-side one (client-go's `csaupgrade`); cairn does the same
//! for the fields its own apply holds, and only those: what kubectl set and the template does not declare
//! stays kubectl's, so no later apply removes it.
//!
//! Only after an apply that succeeded: an apply that changes a value kubectl owns still fails with the
//! conflict (the template and kubectl disagree; `force` decides), and a field kubectl changed after cairn
//! applied it is never co-owned (the change took it), so that conflict is still reported too.

use serde_json::{Map, Value, json};

/// The managers of `kubectl apply` without `--server-side` (`before-first-apply` is what the API server
/// names fields set before an object's first apply when managed fields were reset).
pub const CLIENT_SIDE_APPLY_MANAGERS: &[&str] =
    &["kubectl-client-side-apply", "before-first-apply"];

/// The `managedFields` of `object` with the fields `field_manager`'s apply holds taken out of the
/// client-side apply managers' entries (an entry left with nothing is dropped); `None` when there is
/// nothing to take.
pub fn taken_over(object: &Value, field_manager: &str) -> Option<Vec<Value>> {
    let entries = object.pointer("/metadata/managedFields")?.as_array()?;
    let is_main_resource = |entry: &Value| {
        entry
            .get("subresource")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    };
    let ours = entries
        .iter()
        .find(|entry| {
            entry.get("manager").and_then(Value::as_str) == Some(field_manager)
                && entry.get("operation").and_then(Value::as_str) == Some("Apply")
                && is_main_resource(entry)
        })?
        .get("fieldsV1")?
        .as_object()?;
    let mut changed = false;
    let mut kept = Vec::with_capacity(entries.len());
    for entry in entries {
        let client_side = entry
            .get("manager")
            .and_then(Value::as_str)
            .is_some_and(|manager| CLIENT_SIDE_APPLY_MANAGERS.contains(&manager))
            && entry.get("operation").and_then(Value::as_str) == Some("Update")
            && is_main_resource(entry);
        let Some(Value::Object(theirs)) = entry.get("fieldsV1").filter(|_| client_side) else {
            kept.push(entry.clone());
            continue;
        };
        let left = without(theirs, ours);
        if left == *theirs {
            kept.push(entry.clone());
            continue;
        }
        changed = true;
        if !left.is_empty() {
            let mut entry = entry.clone();
            entry["fieldsV1"] = Value::Object(left);
            kept.push(entry);
        }
    }
    changed.then_some(kept)
}

/// The merge patch that sets `entries` as the object's `managedFields`, only if the object is still at
/// `resourceVersion` (a write in between fails the patch with a conflict instead of being misattributed).
pub fn patch(entries: Vec<Value>, resource_version: &str) -> Value {
    json!({ "metadata": { "managedFields": entries, "resourceVersion": resource_version } })
}

/// The field set `owned` (a `fieldsV1` trie: `f:<field>`, `k:<key>`, `v:<value>` and `.` for the node
/// itself, `{}` at a leaf) without what `taken` holds.
fn without(owned: &Map<String, Value>, taken: &Map<String, Value>) -> Map<String, Value> {
    let mut left = Map::new();
    for (key, child) in owned {
        let rest = match (child, taken.get(key)) {
            (_, None) => Some(child.clone()),
            // Taken whole (a leaf of the taker's set): nothing of it is left.
            (_, Some(Value::Object(taken_child))) if taken_child.is_empty() => None,
            (Value::Object(child), Some(Value::Object(taken_child))) if !child.is_empty() => {
                let rest = without(child, taken_child);
                (!rest.is_empty()).then_some(Value::Object(rest))
            }
            // Owned whole, taken in part: it stays as it is.
            _ => Some(child.clone()),
        };
        if let Some(rest) = rest {
            left.insert(key.clone(), rest);
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(entries: Value) -> Value {
        json!({ "metadata": { "name": "flags", "managedFields": entries } })
    }

    #[test]
    fn what_cairn_applies_is_taken_from_kubectl_and_the_rest_stays() {
        let live = object(json!([
            { "manager": "kubectl-client-side-apply", "operation": "Update",
              "fieldsV1": { "f:data": { ".": {}, "f:beta": {}, "f:old": {} },
                            "f:metadata": { "f:annotations": { ".": {},
                                "f:kubectl.kubernetes.io/last-applied-configuration": {} } } } },
            { "manager": "cairn", "operation": "Apply",
              "fieldsV1": { "f:data": { "f:beta": {}, "f:gamma": {} } } },
            { "manager": "kube-controller-manager", "operation": "Update",
              "fieldsV1": { "f:data": { "f:beta": {} } } }
        ]));
        let entries = taken_over(&live, "cairn").expect("something to take");
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({ "f:data": { ".": {}, "f:old": {} },
                    "f:metadata": { "f:annotations": { ".": {},
                        "f:kubectl.kubernetes.io/last-applied-configuration": {} } } })
        );
        // cairn's own entry and other managers' are untouched.
        assert_eq!(entries[1], live["metadata"]["managedFields"][1]);
        assert_eq!(entries[2], live["metadata"]["managedFields"][2]);
    }

    #[test]
    fn an_entry_left_empty_goes_and_nothing_to_take_is_none() {
        let live = object(json!([
            { "manager": "kubectl-client-side-apply", "operation": "Update",
              "fieldsV1": { "f:data": { "f:beta": {} } } },
            { "manager": "cairn", "operation": "Apply", "fieldsV1": { "f:data": {} } }
        ]));
        let entries = taken_over(&live, "cairn").expect("something to take");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["manager"], "cairn");

        // Disjoint sets, another manager's apply, a subresource, or no apply of cairn's: nothing.
        for entries in [
            json!([
                { "manager": "kubectl-client-side-apply", "operation": "Update",
                  "fieldsV1": { "f:data": { "f:beta": {} } } },
                { "manager": "cairn", "operation": "Apply", "fieldsV1": { "f:data": { "f:gamma": {} } } }
            ]),
            json!([
                { "manager": "kubectl-edit", "operation": "Update",
                  "fieldsV1": { "f:data": { "f:beta": {} } } },
                { "manager": "cairn", "operation": "Apply", "fieldsV1": { "f:data": { "f:beta": {} } } }
            ]),
            json!([
                { "manager": "kubectl-client-side-apply", "operation": "Update", "subresource": "status",
                  "fieldsV1": { "f:status": {} } },
                { "manager": "cairn", "operation": "Apply", "fieldsV1": { "f:status": {} } }
            ]),
            json!([
                { "manager": "kubectl-client-side-apply", "operation": "Update",
                  "fieldsV1": { "f:data": { "f:beta": {} } } }
            ]),
        ] {
            assert_eq!(
                taken_over(&object(entries.clone()), "cairn"),
                None,
                "{entries}"
            );
        }
    }

    #[test]
    fn a_field_kubectl_owns_whole_stays_when_cairn_holds_part_of_it() {
        let owned = json!({ "f:spec": { "f:ports": {} } });
        let taken = json!({ "f:spec": { "f:ports": { "k:{\"port\":80}": { "f:port": {} } } } });
        assert_eq!(
            Value::Object(without(
                owned.as_object().unwrap(),
                taken.as_object().unwrap()
            )),
            owned
        );
    }
}
