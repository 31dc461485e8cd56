//! The engine's modules import each other without a circle: reads every `crate::module` path in `src/` and checks
//! the graph of top-level modules is acyclic (so the code reads bottom-up: request facts, providers, links, the
//! run and its driver, roots, the engine).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level module a source file belongs to (`run/drive.rs` → `run`).
fn module_of(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .to_string();
    first.trim_end_matches(".rs").to_string()
}

fn collect(dir: &Path, root: &Path, graph: &mut BTreeMap<String, BTreeSet<String>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, root, graph);
            continue;
        }
        let module = module_of(path.strip_prefix(root).unwrap());
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let edges = graph.entry(module.clone()).or_default();
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    edges.insert(name);
                }
            }
        }
    }
}

#[test]
fn engine_modules_import_each_other_without_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    collect(&root, &root, &mut graph);
    assert!(
        graph.contains_key("run") && graph.contains_key("engine"),
        "{graph:?}"
    );
    // Depth-first search with colours: grey on the stack, black done.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Result<(), Vec<String>> {
        match state.get(node) {
            Some(1) => {
                let from = stack.iter().position(|n| n == node).unwrap();
                let mut circle = stack[from..].to_vec();
                circle.push(node.to_string());
                return Err(circle);
            }
            Some(2) => return Ok(()),
            _ => {}
        }
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, state, stack)?;
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        Ok(())
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if let Err(circle) = visit(node, &graph, &mut state, &mut Vec::new()) {
            panic!("import circle: {}", circle.join(" → "));
        }
    }
}
