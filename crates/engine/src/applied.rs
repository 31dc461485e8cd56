//! What a deployment applied to a resource, as the inventory records it for drift detection: the members of the
//! body the request declared, with the values the provider or extension answered (normalised as it stores them).
//!
//! The declared body cannot be stored as it is: it may hold secure parameter values, and nothing tells them apart
//! once evaluated. The answer can: the contract has extensions leave write-only values (passwords) out of what
//! they return, and providers name theirs (`ResourceProvider::write_only_properties`), which are removed as well.
//! Declared members the answer does not hold are left out, so what is recorded is what can be compared with the
//! live resource later; undeclared members (read-only, calculated, defaulted) are left out too, so drift is about
//! what the template controls and a re-apply repairs.

use serde_json::{Map, Value as Json};

/// `answered` restricted to the members `declared` names (object members matched exactly, else ignoring ASCII
/// case), recursively; array items are restricted item by item, the answer's length kept. Where `declared` is not
/// an object (or an array), the answered value is taken whole. Then every JSON pointer of `write_only` is removed.
pub(crate) fn applied(declared: &Json, answered: &Json, write_only: &[&str]) -> Json {
    let mut value = restrict(declared, answered);
    for pointer in write_only {
        remove_pointer(&mut value, pointer);
    }
    value
}

fn restrict(declared: &Json, answered: &Json) -> Json {
    match (declared, answered) {
        (Json::Object(declared), Json::Object(answered)) => {
            let mut out = Map::new();
            for (key, declared_value) in declared {
                let found = answered.get_key_value(key).or_else(|| {
                    answered
                        .iter()
                        .find(|(candidate, _)| candidate.eq_ignore_ascii_case(key))
                });
                if let Some((answered_key, answered_value)) = found {
                    out.insert(
                        answered_key.clone(),
                        restrict(declared_value, answered_value),
                    );
                }
            }
            Json::Object(out)
        }
        (Json::Array(declared), Json::Array(answered)) => Json::Array(
            answered
                .iter()
                .enumerate()
                .map(|(index, item)| match declared.get(index) {
                    Some(declared_item) => restrict(declared_item, item),
                    None => item.clone(),
                })
                .collect(),
        ),
        (_, answered) => answered.clone(),
    }
}

/// Removes what an RFC 6901 pointer names, if present.
fn remove_pointer(value: &mut Json, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    let parent = if parent.is_empty() {
        Some(value)
    } else {
        value.pointer_mut(parent)
    };
    match parent {
        Some(Json::Object(map)) => {
            map.remove(&last);
        }
        Some(Json::Array(items)) => {
            if let Ok(index) = last.parse::<usize>()
                && index < items.len()
            {
                items.remove(index);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_declared_members_are_kept_with_the_answered_values() {
        let declared = json!({"path": "./a//b.txt", "content": "hi", "password": "s3cr3t",
                              "nested": {"x": 1}});
        let answered = json!({"path": "a/b.txt", "content": "hi", "mode": "0644",
                              "nested": {"x": 1, "createdAt": "now"}});
        assert_eq!(
            applied(&declared, &answered, &[]),
            json!({"path": "a/b.txt", "content": "hi", "nested": {"x": 1}}),
            "normalised values, no undeclared member, no unanswered (write-only) member"
        );
    }

    #[test]
    fn members_match_ignoring_case_and_arrays_keep_the_answered_length() {
        let declared = json!({"Tags": {"env": "prod"}, "rules": [{"port": 80}]});
        let answered = json!({"tags": {"env": "prod", "owner": "x"},
                              "rules": [{"port": 80, "id": 1}, {"port": 443, "id": 2}]});
        assert_eq!(
            applied(&declared, &answered, &[]),
            json!({"tags": {"env": "prod"}, "rules": [{"port": 80}, {"port": 443, "id": 2}]})
        );
    }

    #[test]
    fn write_only_pointers_are_removed() {
        let declared =
            json!({"name": "s", "properties": {"value": "secret", "contentType": "text"}});
        let answered =
            json!({"name": "s", "properties": {"value": "secret", "contentType": "text"}});
        assert_eq!(
            applied(&declared, &answered, &["/properties/value", "/absent/x"]),
            json!({"name": "s", "properties": {"contentType": "text"}})
        );
    }
}
