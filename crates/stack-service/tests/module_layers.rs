//! The stack service's modules import each other without a circle: reads every `crate::module` path in `src/` and
//! checks the graph of top-level modules is acyclic, so the code reads bottom-up (request checks and stored state,
//! the service handle, the lease and fenced writes, then the create/update, delete and recovery runs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of `src/` (but the crate root) and the other modules it names as `crate::module`.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        assert!(
            path.is_file(),
            "{}: extend this test to folders",
            path.display()
        );
        let module = path.file_stem().unwrap().to_string_lossy().to_string();
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let edges: &mut BTreeSet<String> = graph.entry(module.clone()).or_default();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let name: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    edges.insert(name);
                }
            }
        }
    }
    graph
}

#[test]
fn stack_service_modules_import_each_other_without_a_circle() {
    let mut graph = import_graph();
    assert!(
        graph.contains_key("service") && graph.contains_key("put"),
        "{graph:?}"
    );
    // Peel off modules that import nothing still left; what cannot be peeled lies on a circle or imports one.
    loop {
        let leaves: Vec<String> = graph
            .iter()
            .filter(|(_, edges)| edges.iter().all(|e| !graph.contains_key(e)))
            .map(|(module, _)| module.clone())
            .collect();
        if leaves.is_empty() {
            break;
        }
        for leaf in leaves {
            graph.remove(&leaf);
        }
    }
    assert!(
        graph.is_empty(),
        "modules on or above an import circle: {graph:?}"
    );
}

#[test]
fn pure_modules_import_no_other_module() {
    let graph = import_graph();
    for pure in [
        "request",
        "state",
        "ending",
        "what_if_changes",
        "what_if_retention",
    ] {
        assert_eq!(graph.get(pure), Some(&BTreeSet::new()), "{pure}");
    }
}
