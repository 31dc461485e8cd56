//! Readable plans and precise errors, end to end on the in-process engine (stdin is not a terminal here; the
//! terminal side is `terminal_cli.rs`): snapshots of the deployment and stack what-if plans and of their `-o
//! table`/`tsv` rows, a test per flag of `deployment ... create` (`--what-if`, `-c`, `--yes`,
//! `--proceed-if-no-change`, `--what-if-exclude-change-types`, `--what-if-result-format`) and of stack create's
//! plan and refusal to delete without a terminal, and template problems rendered as `template validate` renders
//! them from every command, with "did you mean" for misspelt names and `-p` typos.

mod in_process;

use in_process::Cli;
use serde_json::{Value, json};

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Local files (`files/NAME.txt` holding `content`) as a 2.0 template's resources, one per name.
fn files_template(names: &[&str], content: &str) -> String {
    let resources: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| {
            (
                n.to_string(),
                json!({"extension": "local", "type": "File", "apiVersion": "1.0.0",
                       "properties": {"path": format!("{n}.txt"), "content": content}}),
            )
        })
        .collect();
    json!({
        "$schema": SCHEMA, "languageVersion": "2.0", "contentVersion": "1.0.0.0",
        "parameters": {"content": {"type": "string", "defaultValue": content}},
        "extensions": {"local": {"name": "Local", "version": "1.0.0"}},
        "resources": resources
    })
    .to_string()
}

/// A group `rg`, a parameters file `params.json` pointing the Local extension at `./files`, and the templates
/// `ab.json` (files a and b, content x) and `ac.json` (files a and c, content y) in the working directory.
fn files_setup() -> Cli {
    let cli = Cli::new();
    cli.expect(
        &["group", "create", "-n", "rg", "-l", "local", "-o", "none"],
        0,
    );
    cli.write(
        "params.json",
        &json!({"parameters": {}, "extensionConfigs": {"local": {"rootDirectory": {"value": "./files"}}}})
            .to_string(),
    );
    cli.write("ab.json", &files_template(&["a", "b"], "x"));
    cli.write("ac.json", &files_template(&["a", "c"], "y"));
    cli
}

fn file(cli: &Cli, name: &str) -> std::path::PathBuf {
    cli.work.path().join("files").join(name)
}

/// `cairn deployment group VERB -g rg -n files -f TEMPLATE -p params.json EXTRA...`.
fn deployment<'a>(verb: &'a str, template: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "deployment",
        "group",
        verb,
        "-g",
        "rg",
        "-n",
        "files",
        "-f",
        template,
        "-p",
        "params.json",
        "--no-progress",
    ];
    if verb != "create" {
        args.pop();
    }
    args.extend_from_slice(extra);
    args
}

/// `cairn stack group VERB -g rg -n st -f TEMPLATE -p params.json EXTRA...`.
fn stack<'a>(verb: &'a str, template: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "stack",
        "group",
        verb,
        "-g",
        "rg",
        "-n",
        "st",
        "-f",
        template,
        "-p",
        "params.json",
    ];
    args.extend_from_slice(extra);
    args
}

/// Files a and b deployed by a deployment, then the plan of files a (new content) and c.
#[test]
fn deployment_what_if_plan() {
    let cli = files_setup();
    cli.expect(&deployment("create", "ab.json", &["-o", "none"]), 0);
    let plan = cli.expect(&deployment("what-if", "ac.json", &[]), 0);
    // No colours off a terminal.
    assert!(!plan.contains('\x1b'), "{plan}");
    insta::assert_snapshot!(plan);
    let table = cli.expect(&deployment("what-if", "ac.json", &["-o", "table"]), 0);
    insta::assert_snapshot!("deployment_what_if_table", table);
    let tsv = cli.expect(&deployment("what-if", "ac.json", &["-o", "tsv"]), 0);
    insta::assert_snapshot!("deployment_what_if_tsv", tsv);
}

#[test]
fn what_if_exclude_change_types_and_result_format() {
    let cli = files_setup();
    cli.expect(&deployment("create", "ab.json", &["-o", "none"]), 0);
    // Same content for a, a new c: a is unchanged, and left out.
    cli.write("ac_same.json", &files_template(&["a", "c"], "x"));
    let all = cli.expect(&deployment("what-if", "ac_same.json", &[]), 0);
    assert!(
        all.contains("  = Local File {\"path\":\"a.txt\"} (a)"),
        "{all}"
    );
    let changed = cli.expect(
        &deployment("what-if", "ac_same.json", &["-x", "nochange", "Ignore"]),
        0,
    );
    assert!(!changed.contains("a.txt"), "{changed}");
    assert!(
        changed.contains("  + Local File {\"path\":\"c.txt\"} (c)"),
        "{changed}"
    );
    assert!(
        changed.ends_with("Resource changes: 1 to create.\n"),
        "{changed}"
    );
    // Resource ids only: no payloads, so no property changes either.
    let full: Value =
        serde_json::from_str(&cli.expect(&deployment("what-if", "ac.json", &["-o", "json"]), 0))
            .unwrap();
    assert!(full.to_string().contains("\"after\""), "{full:#}");
    let ids: Value = serde_json::from_str(&cli.expect(
        &deployment(
            "what-if",
            "ac.json",
            &["-o", "json", "-r", "ResourceIdOnly"],
        ),
        0,
    ))
    .unwrap();
    let changes = ids["properties"]["changes"].as_array().unwrap();
    assert!(!changes.is_empty());
    assert!(
        changes
            .iter()
            .all(|c| c.get("after").is_none() && c.get("delta").is_none()),
        "{ids:#}"
    );
}

#[test]
fn create_what_if_shows_the_plan_and_deploys_nothing() {
    let cli = files_setup();
    let out = cli.run(&deployment("create", "ab.json", &["--what-if"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The plan goes to stderr: stdout is the deployment's, and nothing was deployed.
    assert_eq!(stdout(&out), "");
    let plan = stderr(&out);
    assert!(
        plan.contains("  + Local File {\"path\":\"b.txt\"} (b)"),
        "{plan}"
    );
    assert!(plan.contains("Resource changes: 2 to create."), "{plan}");
    assert!(!file(&cli, "a.txt").exists());
    let listed = cli.json(&["deployment", "group", "list", "-g", "rg"]);
    assert_eq!(listed, json!([]));
    // With the exclusions of -x.
    let out = cli.run(&deployment(
        "create",
        "ab.json",
        &["--what-if", "--what-if-exclude-change-types", "Create"],
    ));
    assert!(
        stderr(&out).contains("Resource changes: none."),
        "{}",
        stderr(&out)
    );
}

#[test]
fn confirm_with_what_if_needs_a_terminal_or_yes() {
    let cli = files_setup();
    // Nobody to ask: refused before anything runs.
    let refused = cli.usage_error(&deployment("create", "ab.json", &["-c"]));
    assert!(
        refused.starts_with("error: -c/--confirm-with-what-if asks before deploying, but stdin is not a terminal: pass --yes"),
        "{refused}"
    );
    assert!(!refused.contains("Resource changes"), "{refused}");
    assert!(!file(&cli, "a.txt").exists());
    // --yes: the plan, then the deployment.
    let out = cli.run(&deployment(
        "create",
        "ab.json",
        &["--confirm-with-what-if", "--yes"],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Resource changes: 2 to create."),
        "{}",
        stderr(&out)
    );
    let record: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(record["properties"]["provisioningState"], "Succeeded");
    assert!(file(&cli, "a.txt").exists() && file(&cli, "b.txt").exists());
    // --yes and --proceed-if-no-change belong to -c.
    let out = cli.run(&deployment("create", "ab.json", &["--yes"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--confirm-with-what-if"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn proceed_if_no_change_deploys_an_unchanged_plan_without_asking() {
    let cli = files_setup();
    cli.expect(&deployment("create", "ab.json", &["-o", "none"]), 0);
    // Nothing changes: no question, even without a terminal.
    let out = cli.run(&deployment(
        "create",
        "ab.json",
        &["-c", "--proceed-if-no-change", "-o", "none"],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Resource changes: 2 no change."),
        "{}",
        stderr(&out)
    );
    // Something changes: it must ask, and cannot.
    let refused = cli.usage_error(&deployment(
        "create",
        "ac.json",
        &["-c", "--proceed-if-no-change"],
    ));
    assert!(
        refused.contains("Resource changes: 1 to create, 1 to modify, 1 to ignore.")
            && refused.contains("error: -c/--confirm-with-what-if asks before deploying"),
        "{refused}"
    );
    assert!(!file(&cli, "c.txt").exists());
}

/// Files a and b in stack st, then the plans of files a (new content) and c, deleting and detaching b.
#[test]
fn stack_what_if_plan() {
    let cli = files_setup();
    cli.expect(
        &stack(
            "create",
            "ab.json",
            &["--aou", "deleteAll", "--yes", "-o", "none"],
        ),
        0,
    );
    let plan = cli.expect(
        &stack("what-if", "ac.json", &["--aou", "deleteResources"]),
        0,
    );
    assert!(!plan.contains('\x1b'), "{plan}");
    insta::assert_snapshot!(plan);
    let detach = cli.expect(&stack("what-if", "ac.json", &["--aou", "detachAll"]), 0);
    insta::assert_snapshot!("stack_what_if_plan_detach", detach);
    let table = cli.expect(
        &stack(
            "what-if",
            "ac.json",
            &["--aou", "deleteResources", "-o", "table"],
        ),
        0,
    );
    insta::assert_snapshot!("stack_what_if_table", table);
    let tsv = cli.expect(
        &stack(
            "what-if",
            "ac.json",
            &["--aou", "deleteResources", "-o", "tsv"],
        ),
        0,
    );
    insta::assert_snapshot!("stack_what_if_tsv", tsv);
    // The JSON is still there for scripts, and what-if changed nothing.
    let json: Value = serde_json::from_str(&cli.expect(
        &stack(
            "what-if",
            "ac.json",
            &["--aou", "deleteResources", "-o", "json"],
        ),
        0,
    ))
    .unwrap();
    assert_eq!(
        json["type"], "Microsoft.Resources/deploymentStacksWhatIfResults",
        "{json:#}"
    );
    assert!(file(&cli, "b.txt").exists() && !file(&cli, "c.txt").exists());
}

#[test]
fn stack_create_shows_its_plan_and_refuses_deletes_without_a_terminal() {
    let cli = files_setup();
    // A first create deletes nothing: the plan, then the stack, without --yes.
    let out = cli.run(&stack(
        "create",
        "ab.json",
        &["--aou", "deleteResources", "-o", "none"],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Resource changes: 2 to create."),
        "{}",
        stderr(&out)
    );
    // An update that deletes b: refused (nobody to ask), with the plan and a message naming --yes.
    let refused = cli.usage_error(&stack("create", "ac.json", &["--aou", "deleteResources"]));
    assert!(
        refused.contains("  - Local File {\"path\":\"b.txt\"} (b)"),
        "{refused}"
    );
    assert!(
        refused.contains(
            "error: not changed: the update of stack 'st' deletes 1 resource (see the plan above) and stdin is not \
             a terminal to ask: pass --yes to update it anyway"
        ),
        "{refused}"
    );
    assert!(file(&cli, "b.txt").exists() && !file(&cli, "c.txt").exists());
    // Detaching deletes nothing: it goes ahead, and says so in its plan.
    let out = cli.run(&stack(
        "create",
        "ac.json",
        &["--aou", "detachAll", "-o", "none"],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("  ↷ Local File {\"path\":\"b.txt\"} (b)"),
        "{}",
        stderr(&out)
    );
    assert!(file(&cli, "b.txt").exists() && file(&cli, "c.txt").exists());
    // --yes: no plan, no question.
    cli.write("a_only.json", &files_template(&["a"], "y"));
    let out = cli.run(&stack(
        "create",
        "a_only.json",
        &["--aou", "deleteAll", "--yes", "-o", "none"],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("Resource changes"),
        "{}",
        stderr(&out)
    );
    assert!(!file(&cli, "c.txt").exists());
}

/// A template with a misspelt variable, parameter and function, the function after an escaped quote.
const TYPOS: &str = r#"{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "contentVersion": "1.0.0.0",
  "parameters": {
    "siteName": { "type": "string", "defaultValue": "web" }
  },
  "variables": {
    "prefix": "app"
  },
  "resources": [],
  "outputs": {
    "name": { "type": "string", "value": "[concat(variables('prefx'), parameters('siteNme'))]" },
    "quoted": { "type": "string", "value": "[concat('say \"hi\" ', toUppr('x'))]" }
  }
}
"#;

#[test]
fn template_problems_render_as_template_validate_renders_them() {
    let cli = files_setup();
    cli.write("typos.json", TYPOS);
    let validate = cli.usage_error(&["template", "validate", "-f", "typos.json"]);
    insta::assert_snapshot!(validate);
    // Every command that reads the template says the same, before anything is sent.
    let commands: [&[&str]; 6] = [
        &[
            "deployment",
            "group",
            "create",
            "-g",
            "rg",
            "-f",
            "typos.json",
        ],
        &[
            "deployment",
            "group",
            "validate",
            "-g",
            "rg",
            "-f",
            "typos.json",
        ],
        &[
            "deployment",
            "group",
            "what-if",
            "-g",
            "rg",
            "-f",
            "typos.json",
        ],
        &[
            "stack",
            "group",
            "create",
            "-g",
            "rg",
            "-n",
            "st",
            "-f",
            "typos.json",
            "--aou",
            "detachAll",
        ],
        &[
            "stack",
            "group",
            "validate",
            "-g",
            "rg",
            "-n",
            "st",
            "-f",
            "typos.json",
            "--aou",
            "detachAll",
        ],
        &[
            "stack",
            "group",
            "what-if",
            "-g",
            "rg",
            "-n",
            "st",
            "-f",
            "typos.json",
            "--aou",
            "detachAll",
        ],
    ];
    for args in commands {
        assert_eq!(cli.usage_error(args), validate, "{args:?}");
    }
}

#[test]
fn engine_findings_are_located_in_the_files() {
    let cli = files_setup();
    // Only evaluation finds these: a computed parameter name, and a misspelt property of a variable's object.
    cli.write(
        "computed.json",
        &serde_json::to_string_pretty(&json!({
            "$schema": SCHEMA, "languageVersion": "2.0", "contentVersion": "1.0.0.0",
            "parameters": {"siteName": {"type": "string", "defaultValue": "web"}},
            "variables": {"site": {"path": "a.txt"}},
            "extensions": {"local": {"name": "Local", "version": "1.0.0"}},
            "resources": {
                "a": {"extension": "local", "type": "File", "apiVersion": "1.0.0",
                      "properties": {"path": "[variables('site').paht]", "content": "a"}},
                "b": {"extension": "local", "type": "File", "apiVersion": "1.0.0",
                      "properties": {"path": "b.txt", "content": "[parameters(concat('site', 'Nme'))]"}}
            }
        }))
        .unwrap(),
    );
    let validate = cli.usage_error(&[
        "deployment",
        "group",
        "validate",
        "-g",
        "rg",
        "-f",
        "computed.json",
        "-p",
        "params.json",
    ]);
    insta::assert_snapshot!(validate);
    let stack = cli.usage_error(&[
        "stack",
        "group",
        "validate",
        "-g",
        "rg",
        "-n",
        "st",
        "-f",
        "computed.json",
        "-p",
        "params.json",
        "--aou",
        "detachAll",
    ]);
    assert_eq!(stack, validate);
}

#[test]
fn parameter_typos_and_words_are_explained() {
    let cli = files_setup();
    cli.write(
        "typos_fixed.json",
        &TYPOS
            .replace("prefx", "prefix")
            .replace("siteNme", "siteName")
            .replace("toUppr", "toUpper"),
    );
    let typo = cli.usage_error(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        "typos_fixed.json",
        "-p",
        "siteNme=x",
    ]);
    assert_eq!(
        typo,
        "error: -p siteNme=...: the template has no parameter 'siteNme'. Did you mean 'siteName'? (it declares siteName)\n"
    );
    let stack_typo = cli.usage_error(&[
        "stack",
        "group",
        "what-if",
        "-g",
        "rg",
        "-n",
        "st",
        "-f",
        "typos_fixed.json",
        "--aou",
        "detachAll",
        "-p",
        "sitename=ok",
        "SITENAM=x",
    ]);
    assert!(
        stack_typo.contains("Did you mean 'siteName'?"),
        "{stack_typo}"
    );
    let word = cli.usage_error(&[
        "deployment",
        "group",
        "what-if",
        "-g",
        "rg",
        "-f",
        "typos_fixed.json",
        "-p",
        "prod",
    ]);
    assert_eq!(
        word,
        "error: -p 'prod' is neither a file (there is no prod) nor name=value: give a parameters file (params.json \
         or @params.json), a .bicepparam file, or name=value\n"
    );
    let at = cli.usage_error(&[
        "template",
        "validate",
        "-f",
        "typos_fixed.json",
        "-p",
        "@prod.json",
    ]);
    assert_eq!(
        at,
        "error: -p '@prod.json': there is no parameters file prod.json\n"
    );
    // A parameters file's misspelt name: the engine's finding, in the file.
    cli.write(
        "typo.parameters.json",
        "{\n  \"parameters\": {\n    \"siteNme\": { \"value\": \"x\" }\n  }\n}\n",
    );
    let in_file = cli.usage_error(&[
        "deployment",
        "group",
        "validate",
        "-g",
        "rg",
        "-f",
        "typos_fixed.json",
        "-p",
        "typo.parameters.json",
    ]);
    insta::assert_snapshot!(in_file);
}

#[test]
fn a_missing_resource_group_suggests_creating_it() {
    let cli = files_setup();
    for args in [
        &[
            "deployment",
            "group",
            "create",
            "-g",
            "nogroup",
            "-f",
            "ab.json",
            "-p",
            "params.json",
        ][..],
        &[
            "stack",
            "group",
            "create",
            "-g",
            "nogroup",
            "-n",
            "st",
            "-f",
            "ab.json",
            "-p",
            "params.json",
            "--aou",
            "detachAll",
            "--yes",
        ][..],
    ] {
        let out = cli.run(args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).ends_with(
                "hint: create the resource group first: cairn group create -n nogroup -l local\n"
            ),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_misspelt_secret_parameter_is_not_echoed() {
    let cli = files_setup();
    cli.write(
        "secret.json",
        &json!({"$schema": SCHEMA, "contentVersion": "1.0.0.0",
                "parameters": {"adminPassword": {"type": "securestring"}}, "resources": []})
        .to_string(),
    );
    cli.write(
        "secret.parameters.json",
        "{\n  \"parameters\": {\n    \"adminPassword\": { \"value\": \"right-canary\" },\n    \"adminPasword\": { \"value\": \"typo-canary\" }\n  }\n}\n",
    );
    let shown = cli.usage_error(&[
        "deployment",
        "group",
        "validate",
        "-g",
        "rg",
        "-f",
        "secret.json",
        "-p",
        "secret.parameters.json",
    ]);
    assert!(
        shown.contains("Did you mean 'adminPassword'?")
            && shown.contains("--> secret.parameters.json:4:5 (parameters.adminPasword)"),
        "{shown}"
    );
    // The line is shown, its value is not.
    assert!(
        shown.contains("4 |     \"adminPasword\": { \"value\": \"***********\" }"),
        "{shown}"
    );
    assert!(!shown.contains("canary"), "{shown}");
}
