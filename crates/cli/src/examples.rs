//! Examples for every command: shown at the end of its `--help` (an `Examples:` section, as az shows them), in its
//! man page (`cairn man`) and in docs/cli.md's command list. One table, keyed by command path, so a new command
//! without examples fails the test that walks the command tree, and an example that no longer parses fails too.

use clap::Command;

/// One example: what it does, and the command line.
pub(crate) type Example = (&'static str, &'static str);

/// The examples of each command, by path below `cairn`.
pub(crate) const EXAMPLES: &[(&str, &[Example])] = &[
    (
        "template validate",
        &[
            (
                "Check a template and its parameters offline",
                "cairn template validate -f main.json -p @main.parameters.json",
            ),
            (
                "Check a Bicep file (compiled with the bicep CLI)",
                "cairn template validate -f main.bicep -p count=3",
            ),
        ],
    ),
    (
        "template expand",
        &[(
            "Print the deployment plan, with a pinned deployment context",
            "cairn template expand -f main.json -p @main.parameters.json --context ctx.json",
        )],
    ),
    (
        "extension list",
        &[
            ("List the registered extensions", "cairn extension list"),
            (
                "Only their names, for a script",
                "cairn extension list --query \"[].name\" -o tsv",
            ),
        ],
    ),
    (
        "extension conformance",
        &[
            (
                "Check the built-in Local extension",
                "cairn extension conformance --builtin local",
            ),
            (
                "Check an HTTP extension against a profile",
                "cairn extension conformance --url http://127.0.0.1:8080 --profile my-profile.json",
            ),
        ],
    ),
    (
        "extension pull",
        &[(
            "Pull an extension artifact into the cache",
            "cairn extension pull br:registry.example/ext/widgets:1.0.0",
        )],
    ),
    (
        "extension show",
        &[(
            "Show an artifact's digest, platforms and types",
            "cairn extension show br:registry.example/ext/widgets:1.0.0",
        )],
    ),
    (
        "extension publish",
        &[
            (
                "Publish an extension for Linux and macOS",
                "cairn extension publish types/index.json --bin-linux-x64 bin/ext-linux --bin-osx-arm64 bin/ext-osx --target br:registry.example/ext/widgets:1.0.0",
            ),
            (
                "Write the artifact to an OCI layout directory",
                "cairn extension publish types/index.json --bin-linux-x64 bin/ext --target ./widgets-oci",
            ),
        ],
    ),
    (
        "extension lock",
        &[(
            "Accept a moved tag: pin the digest it names now",
            "cairn extension lock -f main.json --upgrade",
        )],
    ),
    (
        "extension serve-local",
        &[(
            "Serve the Local extension on port 8080",
            "cairn extension serve-local --http 8080",
        )],
    ),
    (
        "serve",
        &[
            (
                "Serve the API on loopback without TLS",
                "cairn serve --listen 127.0.0.1:8080",
            ),
            (
                "Serve HTTPS with bearer tokens",
                "cairn serve --listen 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem --tokens tokens.txt",
            ),
            (
                "Let deployments use the Local extension, only under /srv/sites",
                "cairn serve --listen 127.0.0.1:8080 --local-root /srv/sites",
            ),
            (
                "Serve from a PostgreSQL database shared with other servers",
                "cairn serve --store postgres://cairn@db:5432/cairn --store-key-file /etc/cairn/store.key",
            ),
        ],
    ),
    (
        "store migrate",
        &[
            (
                "Bring a PostgreSQL store's schema up to date before upgrading the servers",
                "cairn store migrate --store postgres://cairn@db:5432/cairn",
            ),
            (
                "Bring the data directory in $CAIRN_HOME up to date",
                "cairn store migrate",
            ),
        ],
    ),
    (
        "store copy",
        &[(
            "Copy a data directory into an empty PostgreSQL database, keeping its master key",
            "cairn store copy --from ~/.cairn --to postgres://cairn@db:5432/cairn --to-key-file ~/.cairn/cairn.key",
        )],
    ),
    (
        "store rotate-key",
        &[
            (
                "Give the data directory in $CAIRN_HOME a fresh master key",
                "cairn store rotate-key",
            ),
            (
                "Rotate a PostgreSQL store's key; then give /etc/cairn/cairn-2.key to every server",
                "cairn store rotate-key --store postgres://cairn@db:5432/cairn --key-file /etc/cairn/cairn.key --new-key-file /etc/cairn/cairn-2.key",
            ),
        ],
    ),
    (
        "group create",
        &[(
            "Create the resource group `app` with a tag",
            "cairn group create -n app -l local --tags env=dev",
        )],
    ),
    (
        "group show",
        &[("Show a resource group", "cairn group show -n app")],
    ),
    (
        "group exists",
        &[(
            "Create a resource group unless it exists",
            "cairn group exists -n app -o tsv | grep -q true || cairn group create -n app -l local",
        )],
    ),
    (
        "group list",
        &[
            (
                "List the resource groups as a table",
                "cairn group list -o table",
            ),
            (
                "Names of the groups tagged env=dev",
                "cairn group list --query \"[?tags.env=='dev'].name\" -o tsv",
            ),
        ],
    ),
    (
        "group delete",
        &[(
            "Delete a group without asking",
            "cairn group delete -n app --yes",
        )],
    ),
    (
        "deployment group create",
        &[
            (
                "Deploy a template with a parameters file and an inline value",
                "cairn deployment group create -g app -f main.json -p @main.parameters.json -p count=3",
            ),
            (
                "Deploy Bicep with its .bicepparam, printing only the outputs",
                "cairn deployment group create -g app -p main.bicepparam --query properties.outputs",
            ),
            (
                "Deploy a template from a URL",
                "cairn deployment group create -g app -n web --template-uri https://example.com/templates/main.json",
            ),
            (
                "Deploy a template spec version",
                "cairn deployment group create -g app --template-spec /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/specs/providers/Microsoft.Resources/templateSpecs/web/versions/1.0",
            ),
            (
                "Show the plan and ask before deploying (on a terminal)",
                "cairn deployment group create -g app -f main.json -c",
            ),
            (
                "Show the plan, then deploy without asking (in a script)",
                "cairn deployment group create -g app -f main.json -c --yes",
            ),
            (
                "Ask only when the plan changes something",
                "cairn deployment group create -g app -f main.json -c --proceed-if-no-change",
            ),
            (
                "Only show the plan, leaving unchanged resources out",
                "cairn deployment group create -g app -f main.json --what-if --what-if-exclude-change-types NoChange Ignore",
            ),
        ],
    ),
    (
        "deployment group show",
        &[(
            "The outputs of a deployment",
            "cairn deployment group show -g app -n main --query properties.outputs",
        )],
    ),
    (
        "deployment group list",
        &[
            (
                "The deployments of a group as a table",
                "cairn deployment group list -g app -o table",
            ),
            (
                "Names of the failed ones",
                "cairn deployment group list -g app --query \"[?properties.provisioningState=='Failed'].name\" -o tsv",
            ),
        ],
    ),
    (
        "deployment group delete",
        &[(
            "Delete a deployment's history (its resources stay)",
            "cairn deployment group delete -g app -n main",
        )],
    ),
    (
        "deployment group validate",
        &[(
            "Validate a template and parameters without deploying",
            "cairn deployment group validate -g app -f main.json -p @main.parameters.json",
        )],
    ),
    (
        "deployment group what-if",
        &[
            (
                "Show what a deployment would change",
                "cairn deployment group what-if -g app -f main.json -p @main.parameters.json",
            ),
            (
                "The changes as a table",
                "cairn deployment group what-if -g app -f main.bicep -o table",
            ),
            (
                "Only what changes, by resource id",
                "cairn deployment group what-if -g app -f main.json -x NoChange -r ResourceIdOnly",
            ),
        ],
    ),
    (
        "deployment group cancel",
        &[(
            "Cancel a running deployment",
            "cairn deployment group cancel -g app -n main",
        )],
    ),
    (
        "deployment group export",
        &[(
            "Save the template a deployment ran",
            "cairn deployment group export -g app -n main",
        )],
    ),
    (
        "deployment sub create",
        &[
            (
                "Deploy at subscription scope (a location is required)",
                "cairn deployment sub create -l local -f groups.json",
            ),
            (
                "Show the plan and ask first",
                "cairn deployment sub create -l local -f groups.json --confirm-with-what-if",
            ),
        ],
    ),
    (
        "deployment sub show",
        &[(
            "Show a subscription deployment",
            "cairn deployment sub show -n groups",
        )],
    ),
    (
        "deployment sub list",
        &[(
            "The subscription's deployments as a table",
            "cairn deployment sub list -o table",
        )],
    ),
    (
        "deployment sub delete",
        &[(
            "Delete a subscription deployment's history",
            "cairn deployment sub delete -n groups",
        )],
    ),
    (
        "deployment sub validate",
        &[(
            "Validate at subscription scope",
            "cairn deployment sub validate -l local -f groups.json",
        )],
    ),
    (
        "deployment sub what-if",
        &[(
            "Show what a subscription deployment would change",
            "cairn deployment sub what-if -l local -f groups.json",
        )],
    ),
    (
        "deployment sub cancel",
        &[(
            "Cancel a running subscription deployment",
            "cairn deployment sub cancel -n groups",
        )],
    ),
    (
        "deployment sub export",
        &[(
            "The template a subscription deployment ran",
            "cairn deployment sub export -n groups",
        )],
    ),
    (
        "deployment operation group list",
        &[
            (
                "One line per resource with its state, status and duration",
                "cairn deployment operation group list -g app -n main -o table",
            ),
            (
                "The operations that failed, with their errors",
                "cairn deployment operation group list -g app -n main --query \"[?properties.provisioningState=='Failed'].properties.statusMessage\"",
            ),
        ],
    ),
    (
        "deployment operation sub list",
        &[(
            "Operations of a subscription deployment",
            "cairn deployment operation sub list -n groups -o table",
        )],
    ),
    (
        "keyvault create",
        &[(
            "Create a vault in group app",
            "cairn keyvault create -n app-kv -g app",
        )],
    ),
    (
        "keyvault secret set",
        &[
            (
                "Set a secret from a file (not the command line)",
                "cairn keyvault secret set --vault-name app-kv -n db-password --file password.txt",
            ),
            (
                "Set it from stdin",
                "cairn keyvault secret set --vault-name app-kv -n db-password --file -",
            ),
        ],
    ),
    (
        "keyvault secret show",
        &[(
            "Print a secret's value only",
            "cairn keyvault secret show --vault-name app-kv -n db-password --query value -o tsv",
        )],
    ),
    (
        "keyvault secret list",
        &[(
            "The vault's secrets (no values)",
            "cairn keyvault secret list --vault-name app-kv -o table",
        )],
    ),
    (
        "lint",
        &[
            (
                "Check a template's extension configs for a deployment stack",
                "cairn lint --stacks -f main.json -p main.parameters.json",
            ),
            (
                "The findings as JSON",
                "cairn lint --stacks -f main.json -o json",
            ),
        ],
    ),
    (
        "stack group create",
        &[
            (
                "Create or update a stack that deletes what leaves it",
                "cairn stack group create -n app -g app -f main.json -p @main.parameters.json --action-on-unmanage deleteResources",
            ),
            (
                "From Bicep, detaching what leaves it, without the plan or a question",
                "cairn stack group create -n app -g app -f main.bicep --aou detachAll --yes",
            ),
            (
                "Take over extension resources that already exist and no stack manages",
                "cairn stack group create -n app -g app -f main.json --aou detachAll --adopt",
            ),
        ],
    ),
    (
        "stack group validate",
        &[(
            "Validate a stack without deploying",
            "cairn stack group validate -n app -g app -f main.json --aou deleteResources",
        )],
    ),
    (
        "stack group show",
        &[(
            "The resources a stack manages",
            "cairn stack group show -n app -g app --query \"properties.resources[].id\"",
        )],
    ),
    (
        "stack group list",
        &[(
            "The stacks of a group as a table",
            "cairn stack group list -g app -o table",
        )],
    ),
    (
        "stack group delete",
        &[(
            "Delete a stack and every resource it manages",
            "cairn stack group delete -n app -g app --action-on-unmanage deleteAll --yes",
        )],
    ),
    (
        "stack group export",
        &[(
            "The template of a stack's deployment",
            "cairn stack group export -n app -g app --query template",
        )],
    ),
    (
        "stack group cancel",
        &[(
            "Stop the stack's running operation at its next safe point",
            "cairn stack group cancel -n app -g app",
        )],
    ),
    (
        "stack group what-if",
        &[
            (
                "What updating the stack would create, change, delete or detach",
                "cairn stack group what-if -n app -g app -f main.json --aou deleteResources",
            ),
            (
                "The changes as a table",
                "cairn stack group what-if -n app -g app -f main.json --aou detachAll -o table",
            ),
        ],
    ),
    (
        "stack group drift",
        &[
            (
                "Which managed resources were changed or deleted outside the stack (exit code 3 if any)",
                "cairn stack group drift -n app -g app",
            ),
            (
                "The resources not in sync, as a table",
                "cairn stack group drift -n app -g app --query \"properties.resources[?driftStatus!='inSync']\" -o table",
            ),
        ],
    ),
    (
        "stack sub create",
        &[(
            "A subscription stack deploying into group app",
            "cairn stack sub create -n platform -l local -f platform.json --deployment-resource-group app --aou deleteResources",
        )],
    ),
    (
        "stack sub validate",
        &[(
            "Validate a subscription stack",
            "cairn stack sub validate -n platform -l local -f platform.json --aou detachAll",
        )],
    ),
    (
        "stack sub show",
        &[(
            "Show a subscription stack",
            "cairn stack sub show -n platform",
        )],
    ),
    (
        "stack sub list",
        &[("The subscription's stacks", "cairn stack sub list -o table")],
    ),
    (
        "stack sub delete",
        &[(
            "Delete a subscription stack, detaching its resources",
            "cairn stack sub delete -n platform --aou detachAll --yes",
        )],
    ),
    (
        "stack sub export",
        &[(
            "The template of a subscription stack",
            "cairn stack sub export -n platform",
        )],
    ),
    (
        "stack sub cancel",
        &[(
            "Stop the stack's running operation at its next safe point",
            "cairn stack sub cancel -n platform --server https://cairn.example",
        )],
    ),
    (
        "stack sub what-if",
        &[(
            "Preview a subscription stack update",
            "cairn stack sub what-if -n platform -l local -f platform.json --aou deleteResources",
        )],
    ),
    (
        "stack sub drift",
        &[(
            "Drift of a subscription stack's resources",
            "cairn stack sub drift -n platform",
        )],
    ),
    (
        "stack mg create",
        &[(
            "A management group stack deploying into a subscription",
            "cairn stack mg create -n policies -m corp -l local -f policies.json --deployment-subscription 00000000-0000-0000-0000-000000000000 --aou detachAll",
        )],
    ),
    (
        "stack mg validate",
        &[(
            "Validate a management group stack",
            "cairn stack mg validate -n policies -m corp -l local -f policies.json --aou detachAll",
        )],
    ),
    (
        "stack mg show",
        &[(
            "Show a management group stack",
            "cairn stack mg show -n policies -m corp",
        )],
    ),
    (
        "stack mg list",
        &[(
            "The management group's stacks",
            "cairn stack mg list -m corp -o table",
        )],
    ),
    (
        "stack mg delete",
        &[(
            "Delete a management group stack",
            "cairn stack mg delete -n policies -m corp --aou detachAll --yes",
        )],
    ),
    (
        "stack mg export",
        &[(
            "The template of a management group stack",
            "cairn stack mg export -n policies -m corp",
        )],
    ),
    (
        "stack mg cancel",
        &[(
            "Stop the stack's running operation at its next safe point",
            "cairn stack mg cancel -n policies -m corp",
        )],
    ),
    (
        "stack mg what-if",
        &[(
            "Preview a management group stack update",
            "cairn stack mg what-if -n policies -m corp -l local -f policies.json --aou detachAll",
        )],
    ),
    (
        "stack mg drift",
        &[(
            "Drift of a management group stack's resources, as JSON",
            "cairn stack mg drift -n policies -m corp -o json",
        )],
    ),
    (
        "completion",
        &[
            (
                "Completions for bash, for this shell",
                "source <(cairn completion bash)",
            ),
            (
                "Install them for zsh",
                "cairn completion zsh > ~/.zfunc/_cairn",
            ),
        ],
    ),
    (
        "man",
        &[
            (
                "Read the page of a command",
                "cairn man deployment group create | man -l -",
            ),
            (
                "Write every page to a directory",
                "cairn man --dir ~/.local/share/man/man1",
            ),
        ],
    ),
];

/// The examples of the command at `path` (`deployment group create`), empty when it has none.
pub(crate) fn of(path: &str) -> &'static [Example] {
    EXAMPLES
        .iter()
        .find(|(p, _)| *p == path)
        .map_or(&[], |(_, examples)| examples)
}

/// Sets each command's `--help` epilogue to its examples (under a heading styled as clap styles its own).
pub(crate) fn attach(cmd: Command) -> Command {
    fn walk(cmd: Command, path: &str) -> Command {
        let examples = of(path);
        let mut cmd = if examples.is_empty() {
            cmd
        } else {
            let header = *cmd.get_styles().get_header();
            let mut text = format!("{header}Examples:{header:#}\n");
            for (about, line) in examples {
                text.push_str(&format!("  # {about}\n  {line}\n\n"));
            }
            cmd.after_help(text.trim_end().to_string())
        };
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        for name in names {
            let child_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path} {name}")
            };
            cmd = cmd.mut_subcommand(&name, |c| walk(c, &child_path));
        }
        cmd
    }
    walk(cmd, "")
}

#[cfg(test)]
/// The path below `cairn` of every leaf command (one that takes no subcommand), depth first.
pub(crate) fn leaf_paths(cmd: &Command) -> Vec<String> {
    fn walk(cmd: &Command, path: &str, out: &mut Vec<String>) {
        let children: Vec<&Command> = cmd
            .get_subcommands()
            .filter(|c| c.get_name() != "help")
            .collect();
        if children.is_empty() {
            out.push(path.to_string());
        }
        for child in children {
            let child_path = if path.is_empty() {
                child.get_name().to_string()
            } else {
                format!("{path} {}", child.get_name())
            };
            walk(child, &child_path, out);
        }
    }
    let mut out = Vec::new();
    walk(cmd, "", &mut out);
    out
}

/// The command below `cmd` at `path`.
pub(crate) fn find<'c>(cmd: &'c Command, path: &str) -> Option<&'c Command> {
    path.split_whitespace()
        .try_fold(cmd, |c, name| c.find_subcommand(name))
}
