//! The type format end to end: files written by the builder load back, Bicep-written files load, bad files are
//! refused with typed errors, and each check finds what it should and nothing else.

use std::collections::BTreeMap;

use cairn_extension_types::{
    Body, FindingKind, Flags, LoadError, PathSegment, TypeBuilder, TypeSet, check_body,
    check_update, without_read_only,
};
use serde_json::json;

fn sample() -> TypeSet {
    let mut b = TypeBuilder::new("Widgets", "1.0.0");
    let string = b.string();
    let int = b.int_range(Some(1), Some(10));
    let boolean = b.bool();
    let colour = b.literals(["red", "green"]);
    let tags = b.map("tags", string.clone());
    let port = b.object(
        "port",
        vec![
            ("number", int.clone(), Flags::REQUIRED, ""),
            ("open", boolean.clone(), Flags::NONE, ""),
        ],
        None,
    );
    let ports = b.array(port);
    let body = b.object(
        "widget",
        vec![
            (
                "name",
                string.clone(),
                Flags::REQUIRED | Flags::IDENTIFIER,
                "the name",
            ),
            ("size", int, Flags::NONE, ""),
            ("colour", colour, Flags::NONE, ""),
            ("tags", tags, Flags::NONE, ""),
            ("ports", ports, Flags::NONE, ""),
            ("uid", string.clone(), Flags::READ_ONLY, ""),
        ],
        None,
    );
    b.resource("Widget", "1.0.0", body);
    let config = b.object(
        "config",
        vec![("endpoint", string, Flags::REQUIRED, "")],
        None,
    );
    b.configuration(config);
    b.finish()
}

fn findings(body: serde_json::Value) -> Vec<(FindingKind, String)> {
    let set = sample();
    let resource = set
        .resource("Widget", None, Some("1.0.0"))
        .expect("declared");
    check_body(&set, resource, &Body::from_template_json(&body))
        .into_iter()
        .map(|f| {
            let path = f
                .path
                .iter()
                .map(|s| match s {
                    PathSegment::Key(k) => k.clone(),
                    PathSegment::Index(i) => i.to_string(),
                })
                .collect::<Vec<_>>()
                .join("/");
            (f.kind, path)
        })
        .collect()
}

#[test]
fn written_files_load_back_the_same() {
    let set = sample();
    let files = set.to_files();
    let again = TypeSet::from_files(&files).expect("loads");
    assert_eq!(again, set);
    assert!(again.configuration().is_some());
    assert_eq!(again.settings().map(|s| s.name.as_str()), Some("Widgets"));
}

#[test]
fn bicep_written_files_load() {
    let index = r##"{"resources":{"Widget@1.0.0":{"$ref":"types.json#/2"}},"resourceFunctions":{},
        "settings":{"name":"Widgets","version":"1.0.0","isSingleton":false,"configurationType":{"$ref":"more.json#/0"}}}"##;
    let types = r##"[{"$type":"StringType"},
        {"$type":"ObjectType","name":"body","properties":{"name":{"type":{"$ref":"#/0"},"flags":17,"description":"n"},
          "extra":{"type":{"$ref":"more.json#/1"},"flags":0}}},
        {"$type":"ResourceType","name":"Widget@1.0.0","scopeType":0,"body":{"$ref":"#/1"},"flags":0,"functions":{}}]"##;
    let more = r##"[{"$type":"ObjectType","name":"config","properties":{}},{"$type":"AnyType"}]"##;
    let files = BTreeMap::from([
        ("index.json".to_string(), index.to_string()),
        ("types.json".to_string(), types.to_string()),
        ("more.json".to_string(), more.to_string()),
    ]);
    let set = TypeSet::from_files(&files).expect("loads");
    assert_eq!(set.len(), 5);
    let resource = set
        .resource("widget", Some("1.0.0"), None)
        .expect("found ignoring case");
    let found = check_body(&set, resource, &Body::from_json(&json!({"extra": 1})));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, FindingKind::MissingProperty);
}

#[test]
fn broken_files_are_refused_with_typed_errors() {
    let load = |index: &str, types: &str| {
        let files = BTreeMap::from([
            ("index.json".to_string(), index.to_string()),
            ("types.json".to_string(), types.to_string()),
        ]);
        TypeSet::from_files(&files).expect_err("refused")
    };
    let ok_index = r##"{"resources":{"A@1":{"$ref":"types.json#/0"}}}"##;
    assert!(matches!(load("{", "[]"), LoadError::Syntax { .. }));
    assert!(matches!(load(ok_index, "[]"), LoadError::OutOfRange { .. }));
    assert!(matches!(
        load(ok_index, r#"[{"$type":"StringType"}]"#),
        LoadError::NotAResourceType { .. }
    ));
    assert!(matches!(
        load(r##"{"resources":{"A@1":{"$ref":"types.json/0"}}}"##, "[]"),
        LoadError::BadReference { .. }
    ));
    assert!(matches!(
        load(
            r##"{"resources":{"A@1":{"$ref":"../etc/passwd#/0"}}}"##,
            "[]"
        ),
        LoadError::UnsafePath { .. }
    ));
    assert!(matches!(
        load(r##"{"resources":{"A@1":{"$ref":"gone.json#/0"}}}"##, "[]"),
        LoadError::MissingFile { .. }
    ));
    assert!(matches!(
        load(ok_index, r#"[{"$type":"NoSuchType"}]"#),
        LoadError::Syntax { .. }
    ));
}

#[test]
fn a_good_body_has_no_findings() {
    let body = json!({"name": "w", "size": 3, "colour": "red", "tags": {"a": "b"},
                      "ports": [{"number": 1, "open": true}]});
    assert_eq!(findings(body), vec![]);
}

#[test]
fn each_mistake_is_found_where_it_is() {
    use FindingKind::*;
    assert_eq!(
        findings(json!({"name": "w", "sise": 3})),
        vec![(UnknownProperty, "sise".into())]
    );
    assert_eq!(
        findings(json!({"size": 3})),
        vec![(MissingProperty, "name".into())]
    );
    assert_eq!(
        findings(json!({"name": 3})),
        vec![(WrongType, "name".into())]
    );
    assert_eq!(
        findings(json!({"name": "w", "size": 11})),
        vec![(InvalidValue, "size".into())]
    );
    assert_eq!(
        findings(json!({"name": "w", "size": 1.5})),
        vec![(WrongType, "size".into())]
    );
    assert_eq!(
        findings(json!({"name": "w", "colour": "blue"})),
        vec![(InvalidValue, "colour".into())]
    );
    assert_eq!(
        findings(json!({"name": "w", "uid": "x"})),
        vec![(ReadOnlyProperty, "uid".into())]
    );
    assert_eq!(
        findings(json!({"name": "w", "tags": {"a": 1}})),
        vec![(WrongType, "tags/a".into())]
    );
    assert_eq!(
        findings(json!({"name": "w", "ports": [{"number": 1}, {"open": "yes"}]})),
        vec![
            (WrongType, "ports/1/open".into()),
            (MissingProperty, "ports/1/number".into())
        ]
    );
    assert_eq!(findings(json!([])), vec![(WrongType, String::new())]);
}

#[test]
fn suggestions_name_the_closest_property_and_messages_quote_no_value() {
    let set = sample();
    let resource = set.resource("Widget", None, None).expect("only version");
    let body = json!({"name": 42, "sise": "topsecret", "colour": "topsecret2"});
    let found = check_body(&set, resource, &Body::from_json(&body));
    assert!(
        found
            .iter()
            .any(|f| f.message.contains("Did you mean 'size'?")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .all(|f| !f.message.contains("topsecret") && !f.message.contains("42"))
    );
}

#[test]
fn unevaluated_values_are_never_judged() {
    assert_eq!(
        findings(json!({"name": "[parameters('n')]", "size": "[variables('s')]"})),
        vec![]
    );
    assert_eq!(
        findings(json!({"name": "w", "ports": "[variables('p')]"})),
        vec![]
    );
    // The escape is a literal string, judged as one.
    assert_eq!(
        findings(json!({"name": "w", "size": "[[1]"})),
        vec![(FindingKind::WrongType, "size".into())]
    );
}

#[test]
fn identifiers_cannot_change_on_update() {
    let set = sample();
    let resource = set
        .resource("Widget", Some("1.0.0"), None)
        .expect("declared");
    let old = Body::from_json(&json!({"name": "a", "size": 1}));
    let same = Body::from_json(&json!({"name": "a", "size": 2}));
    let renamed = Body::from_json(&json!({"name": "b"}));
    let open = Body::from_template_json(&json!({"name": "[parameters('n')]"}));
    assert_eq!(check_update(&set, resource, &old, &same), vec![]);
    assert_eq!(check_update(&set, resource, &old, &open), vec![]);
    let changed = check_update(&set, resource, &old, &renamed);
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].kind, FindingKind::IdentifierChanged);
}

#[test]
fn identifiers_inside_objects_cannot_change_either() {
    let mut b = TypeBuilder::new("K", "1");
    let string = b.string();
    let metadata = b.object(
        "metadata",
        vec![
            (
                "name",
                string.clone(),
                Flags::REQUIRED | Flags::IDENTIFIER,
                "",
            ),
            ("labels", string, Flags::NONE, ""),
        ],
        None,
    );
    let body = b.object("o", vec![("metadata", metadata, Flags::REQUIRED, "")], None);
    b.resource("O", "1", body);
    let set = b.finish();
    let id = set.resource("O", None, None).expect("declared");
    let old = Body::from_json(&json!({"metadata": {"name": "a", "labels": "x"}}));
    let relabelled = Body::from_json(&json!({"metadata": {"name": "a", "labels": "y"}}));
    let renamed = Body::from_json(&json!({"metadata": {"name": "b"}}));
    assert_eq!(check_update(&set, id, &old, &relabelled), vec![]);
    let found = check_update(&set, id, &old, &renamed);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].path,
        vec![
            PathSegment::Key("metadata".into()),
            PathSegment::Key("name".into())
        ]
    );
}

#[test]
fn read_only_properties_are_left_out_of_comparisons() {
    let set = sample();
    let resource = set
        .resource("Widget", Some("1.0.0"), None)
        .expect("declared");
    let mut live = json!({"name": "a", "uid": "1234", "size": 2});
    without_read_only(&set, resource, &mut live);
    assert_eq!(live, json!({"name": "a", "size": 2}));
}

#[test]
fn discriminated_objects_judge_the_chosen_element() {
    let types = r##"[{"$type":"StringType"},{"$type":"IntegerType"},
      {"$type":"ObjectType","name":"a","properties":{"size":{"type":{"$ref":"#/1"},"flags":1}}},
      {"$type":"ObjectType","name":"b","properties":{"path":{"type":{"$ref":"#/0"},"flags":0}}},
      {"$type":"DiscriminatedObjectType","name":"shape","discriminator":"kind",
       "baseProperties":{"name":{"type":{"$ref":"#/0"},"flags":1}},"elements":{"a":{"$ref":"#/2"},"b":{"$ref":"#/3"}}},
      {"$type":"ResourceType","name":"S@1","body":{"$ref":"#/4"}}]"##;
    let index = r##"{"resources":{"S@1":{"$ref":"types.json#/5"}}}"##;
    let set =
        TypeSet::load(index, |f| (f == "types.json").then(|| types.to_string())).expect("loads");
    let resource = set.resource("S", None, None).expect("declared");
    let check = |v: serde_json::Value| {
        check_body(&set, resource, &Body::from_template_json(&v))
            .into_iter()
            .map(|f| f.kind)
            .collect::<Vec<_>>()
    };
    assert_eq!(check(json!({"kind": "a", "name": "n", "size": 1})), vec![]);
    assert_eq!(
        check(json!({"kind": "b", "name": "n", "size": 1})),
        vec![FindingKind::UnknownProperty]
    );
    assert_eq!(
        check(json!({"kind": "a", "name": "n"})),
        vec![FindingKind::MissingProperty]
    );
    assert_eq!(
        check(json!({"kind": "c", "name": "n"})),
        vec![FindingKind::InvalidValue]
    );
    assert_eq!(
        check(json!({"name": "n"})),
        vec![FindingKind::MissingProperty]
    );
    assert_eq!(
        check(json!({"kind": "[parameters('k')]", "name": "n", "whatever": 1})),
        vec![]
    );
}
