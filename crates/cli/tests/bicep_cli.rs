//! Bicep sources end to end: `-f main.bicep` and `-p main.bicepparam` compile through a fake `bicep` (or `az`) that
//! the test puts alone on PATH; it records its arguments and prints known JSON, which cairn then deploys like a
//! JSON template. No network, no real Bicep.
#![cfg(unix)]

mod in_process;

use std::path::{Path, PathBuf};

use in_process::Cli;
use serde_json::json;

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

/// What the fake `bicep build` prints: an int parameter and its double as output.
fn compiled_template() -> String {
    json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": {"count": {"type": "int"}},
        "resources": [],
        "outputs": {"twice": {"type": "int", "value": "[mul(parameters('count'), 2)]"}}
    })
    .to_string()
}

/// A directory holding a fake compiler named `program` (`bicep` or `az`), which appends its arguments (and
/// `BICEP_PARAMETERS_OVERRIDES`) to `calls.log` and prints `build.out` or `build-params.out`; with `fail` present,
/// it prints a Bicep error on stderr and exits 1. Only shell builtins: PATH holds nothing else.
struct FakeCompiler {
    dir: tempfile::TempDir,
}

impl FakeCompiler {
    fn new(program: &str) -> FakeCompiler {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display();
        let script = format!(
            r#"#!/bin/sh
echo "$@" >> {root}/calls.log
if [ -n "$BICEP_PARAMETERS_OVERRIDES" ]; then echo "overrides $BICEP_PARAMETERS_OVERRIDES" >> {root}/calls.log; fi
verb="$1"
if [ "$1" = "bicep" ]; then verb="$2"; fi
if [ -f {root}/fail ]; then
  echo "main.bicep(3,7) : Error BCP018: Expected the \"=\" character at this location." >&2
  exit 1
fi
echo "main.bicep(1,1) : Warning no-unused-params: Parameter \"unused\" is declared but never used." >&2
while IFS= read -r line || [ -n "$line" ]; do printf '%s\n' "$line"; done < {root}/"$verb".out
"#
        );
        let path = dir.path().join(program);
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("build.out"), compiled_template()).unwrap();
        let parameters = json!({"$schema": "x", "contentVersion": "1.0.0.0", "parameters": {"count": {"value": 2}}});
        std::fs::write(
            dir.path().join("build-params.out"),
            json!({"parametersJson": parameters.to_string(), "templateJson": compiled_template()})
                .to_string(),
        )
        .unwrap();
        FakeCompiler { dir }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A `cairn` whose PATH holds this compiler and nothing else, with group `rg` created.
    fn cli(&self) -> Cli {
        let mut cli = Cli::new();
        cli.path = Some(self.dir.path().as_os_str().to_owned());
        cli.expect(
            &["group", "create", "-n", "rg", "-l", "local", "-o", "none"],
            0,
        );
        cli
    }
}

/// `main.bicep` and `main.bicepparam` in the working directory (their content is never read by cairn).
fn sources(cli: &Cli) -> (PathBuf, PathBuf) {
    let bicep = cli.write(
        "main.bicep",
        "param count int\noutput twice int = count * 2\n",
    );
    let params = cli.write("main.bicepparam", "using 'main.bicep'\nparam count = 2\n");
    (PathBuf::from(bicep), PathBuf::from(params))
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn a_bicep_template_compiles_through_the_bicep_cli() {
    let bicep = FakeCompiler::new("bicep");
    let cli = bicep.cli();
    let (template, _) = sources(&cli);
    let out = cli.run(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        &show(&template),
        "-p",
        "count=3",
        "--no-progress",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deployed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(deployed["name"], "main");
    assert_eq!(deployed["properties"]["outputs"]["twice"]["value"], 6);
    assert_eq!(
        bicep.calls(),
        [format!("build {} --stdout", show(&template))]
    );
    // The compiler's warnings reach the user.
    assert!(String::from_utf8_lossy(&out.stderr).contains("Warning no-unused-params"));
    // Offline validation takes Bicep too.
    let valid = cli.json(&[
        "template",
        "validate",
        "-f",
        &show(&template),
        "-p",
        "count=1",
    ]);
    assert_eq!(valid["status"], "valid");
}

#[test]
fn a_bicepparam_compiles_with_its_template_and_overrides() {
    let bicep = FakeCompiler::new("bicep");
    let cli = bicep.cli();
    let (template, params) = sources(&cli);
    // Alone: the template comes from the compiled parameters file (`using`).
    let alone = cli.json(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-p",
        &show(&params),
        "--no-progress",
        "--query",
        "{name: name, twice: properties.outputs.twice.value}",
    ]);
    assert_eq!(alone, json!({"name": "main", "twice": 4}));
    assert_eq!(
        bicep.calls(),
        [format!("build-params {} --stdout", show(&params))]
    );
    // With -f and a name=value override: az's arguments and BICEP_PARAMETERS_OVERRIDES; the override wins.
    let overridden = cli.json(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-n",
        "over",
        "-f",
        &show(&template),
        "-p",
        &format!("@{}", show(&params)),
        "count=10",
        "--no-progress",
        "--query",
        "properties.outputs.twice.value",
    ]);
    assert_eq!(overridden, json!(20));
    assert_eq!(
        bicep.calls()[1..],
        [
            format!(
                "build-params {} --stdout --bicep-file {}",
                show(&params),
                show(&template)
            ),
            r#"overrides {"count":10}"#.to_string(),
            format!("build {} --stdout", show(&template)),
        ]
    );
    // Only name=value goes with a .bicepparam, and only a .bicep template.
    let json_params = cli.write("other.json", r#"{"parameters": {}}"#);
    let error = cli.usage_error(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-p",
        &show(&params),
        &json_params,
    ]);
    assert!(error.contains("name=value"), "{error}");
    let json_template = cli.write("t.json", &compiled_template());
    let error = cli.usage_error(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        &json_template,
        "-p",
        &show(&params),
    ]);
    assert!(error.contains("only a .bicep template"), "{error}");
    // Stacks take Bicep the same way.
    let stack = cli.json(&[
        "stack",
        "group",
        "validate",
        "-g",
        "rg",
        "-n",
        "st",
        "-p",
        &show(&params),
        "--aou",
        "detachAll",
    ]);
    assert!(
        stack.get("error").is_none_or(serde_json::Value::is_null),
        "{stack}"
    );
}

#[test]
fn az_bicep_compiles_when_only_az_is_on_path() {
    let az = FakeCompiler::new("az");
    let cli = az.cli();
    let (template, params) = sources(&cli);
    let twice = cli.json(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        &show(&template),
        "-p",
        &show(&params),
        "--no-progress",
        "--query",
        "properties.outputs.twice.value",
    ]);
    assert_eq!(twice, json!(4));
    // `az bicep build-params` takes no --bicep-file: the template is compiled on its own.
    assert_eq!(
        az.calls(),
        [
            format!("bicep build-params --file {} --stdout", show(&params)),
            format!("bicep build --file {} --stdout", show(&template)),
        ]
    );
}

#[test]
fn without_a_compiler_the_message_names_what_to_install() {
    let empty = tempfile::tempdir().unwrap();
    let mut cli = Cli::new();
    cli.path = Some(empty.path().as_os_str().to_owned());
    let (template, params) = sources(&cli);
    for args in [
        vec![
            "deployment",
            "group",
            "create",
            "-g",
            "rg",
            "-f",
            template.to_str().unwrap(),
        ],
        vec![
            "deployment",
            "group",
            "validate",
            "-g",
            "rg",
            "-p",
            params.to_str().unwrap(),
        ],
        vec!["template", "validate", "-f", template.to_str().unwrap()],
    ] {
        let out = cli.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(
            error.contains("neither the Bicep CLI (`bicep`) nor the Azure CLI (`az`) is on PATH")
                && error.contains("az bicep install"),
            "{error}"
        );
    }
}

#[test]
fn compile_errors_are_passed_on_and_nothing_is_sent() {
    let bicep = FakeCompiler::new("bicep");
    let cli = bicep.cli();
    std::fs::write(bicep.dir.path().join("fail"), "").unwrap();
    let (template, _) = sources(&cli);
    let error = cli.usage_error(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        &show(&template),
    ]);
    assert!(error.contains("Error BCP018"), "{error}");
    assert!(error.contains("`bicep build` could not compile"), "{error}");
    cli.expect(
        &["deployment", "group", "show", "-g", "rg", "-n", "main"],
        1,
    );
}
