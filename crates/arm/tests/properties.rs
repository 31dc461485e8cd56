//! Property tests: resource IDs round-trip through their string form, compare equal under case changes,
//! and neither the ID parser nor the route classifier panics on any input; durations round-trip.

use std::time::Duration;

use cairn_arm::route::{Target, classify};
use cairn_arm::time::{format_duration, parse_duration};
use cairn_arm::{ResourceId, ResourceIdKind};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[A-Za-z0-9._()-]{1,12}",
        1 => "[a-zäöüß]{1,6}",
        1 => prop::sample::select(vec!["providers", "resourceGroups", "subscriptions", "deployments", "validate"])
            .prop_map(str::to_owned),
    ]
}

fn resource_type() -> impl Strategy<Value = String> {
    "[a-zA-Z][a-zA-Z0-9]{0,10}"
        .prop_filter("not a keyword", |t| !t.eq_ignore_ascii_case("providers"))
}

fn namespace() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Z][a-z]{1,8}\\.[A-Z][a-z]{1,8}",
        1 => Just("Microsoft.Management".to_owned()),
        1 => Just("Microsoft.Resources".to_owned()),
    ]
}

fn root() -> impl Strategy<Value = ResourceId> {
    prop_oneof![
        Just(ResourceId::tenant()),
        name().prop_map(|mg| ResourceId::management_group(&mg).unwrap()),
        name().prop_map(|s| ResourceId::subscription(&s).unwrap()),
        (name(), name()).prop_map(|(s, rg)| ResourceId::resource_group(&s, &rg).unwrap()),
    ]
}

type Layer = (String, Vec<(String, String)>);

fn layer() -> impl Strategy<Value = Layer> {
    (
        namespace(),
        prop::collection::vec((resource_type(), name()), 1..4),
    )
}

fn resource_id() -> impl Strategy<Value = ResourceId> {
    (root(), prop::collection::vec(layer(), 0..3)).prop_map(|(mut id, layers)| {
        for (ns, pairs) in layers {
            let mut pairs = pairs.into_iter();
            let (t, n) = pairs.next().expect("layers have a pair");
            id = id.provider(&ns, &t, &n).unwrap();
            for (t, n) in pairs {
                id = id.child(&t, &n).unwrap();
            }
        }
        id
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn format_then_parse_round_trips(id in resource_id()) {
        let text = id.to_string();
        let parsed = ResourceId::parse(&text).unwrap();
        prop_assert_eq!(parsed.to_string(), text.clone());
        prop_assert_eq!(&parsed, &id);
        prop_assert_eq!(parsed.kind(), id.kind());
        prop_assert_eq!(parsed.resource_type(), id.resource_type());
        prop_assert_eq!(parsed.names(), id.names());
        // Serde uses the same form.
        let json = serde_json::to_string(&id).unwrap();
        prop_assert_eq!(serde_json::from_str::<ResourceId>(&json).unwrap().to_string(), text);
    }

    #[test]
    fn ids_compare_equal_under_case_changes(id in resource_id(), flips in prop::collection::vec(any::<bool>(), 0..200)) {
        let text = id.to_string();
        let mangled: String = text
            .chars()
            .enumerate()
            .map(|(i, c)| if flips.get(i).copied().unwrap_or(false) {
                if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() }
            } else { c })
            .collect();
        let parsed = ResourceId::parse(&mangled).unwrap();
        prop_assert_eq!(&parsed, &id);
        use std::hash::{BuildHasher, RandomState};
        let hasher = RandomState::new();
        prop_assert_eq!(hasher.hash_one(&parsed), hasher.hash_one(&id));
    }

    #[test]
    fn parents_lead_to_the_tenant(id in resource_id()) {
        let mut current = id.clone();
        let mut steps = 0;
        while let Some(parent) = current.parent() {
            prop_assert!(parent.contains(&id));
            prop_assert!(parent.to_string().len() < current.to_string().len() || current.kind() == ResourceIdKind::Subscription);
            current = parent;
            steps += 1;
            prop_assert!(steps < 64);
        }
        prop_assert_eq!(current.kind(), ResourceIdKind::Tenant);
        if let Some(scope) = id.scope_id() {
            prop_assert!(scope.contains(&id));
        }
    }

    #[test]
    fn parser_never_panics_on_any_text(text in "\\PC{0,80}") {
        let _ = ResourceId::parse(&text);
    }

    #[test]
    fn parser_never_panics_on_id_like_text(
        parts in prop::collection::vec(
            prop_oneof![
                Just("providers".to_owned()), Just("subscriptions".to_owned()), Just("resourceGroups".to_owned()),
                Just("Microsoft.Management".to_owned()), Just("managementGroups".to_owned()), Just(String::new()),
                name(),
            ],
            0..12,
        ),
        trailing in any::<bool>(),
    ) {
        let mut text = format!("/{}", parts.join("/"));
        if trailing { text.push('/'); }
        if let Ok(id) = ResourceId::parse(&text) {
            // Whatever parses, formats to something that parses to the same ID.
            prop_assert_eq!(ResourceId::parse(&id.to_string()).unwrap(), id);
        }
    }

    #[test]
    fn classifier_never_panics(
        method in prop::sample::select(vec!["GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "TRACE", ""]),
        path in "(/[A-Za-z0-9%.()_-]{0,12}){0,10}/?",
        query in "[a-zA-Z0-9=&%.+$-]{0,40}",
    ) {
        let _ = classify(method, &path, Some(&query));
    }

    #[test]
    fn deployments_are_routed_at_any_scope(scope in root(), deployment in "[A-Za-z0-9._()-]{1,20}") {
        let id = scope.provider("Microsoft.Resources", "deployments", &deployment).unwrap();
        // Dot segments are refused as names (clients remove them from paths); the route's unit tests cover that.
        prop_assume!(!id.to_string().split('/').any(|s| s == "." || s == ".."));
        let encoded: String = id
            .to_string()
            .split('/')
            .skip(1)
            .map(|segment| format!("/{}", utf8_percent_encode(segment, NON_ALPHANUMERIC)))
            .collect();
        let route = classify("PUT", &encoded, Some("api-version=2025-04-01")).unwrap();
        prop_assert_eq!(&route.target, &Target::Deployment { id });
        prop_assert!(route.check_api_version().is_ok());
    }

    #[test]
    fn durations_round_trip_at_tick_resolution(nanos in 0u64..10_000_000_000_000_000) {
        let d = Duration::from_nanos(nanos / 100 * 100);
        prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
    }
}
