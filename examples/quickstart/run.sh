#!/bin/sh
# cairn quickstart: creates the resource group `quickstart` and deploys main.json into it with the in-process
# engine (data in $CAIRN_HOME, default ~/.cairn) as the deployment `main` (the name the README's quick start
# gets from main.json, which its "Next steps" use), then prints the deployment's outputs. The files land in
# examples/quickstart/out/ (the Local extension's rootDirectory, set in main.parameters.json).
#
# Re-running re-applies the deployment: unchanged files are left alone; the Key Vault secret gets a new value
# (apiKey defaults to a fresh GUID) unless you pass one: ./run.sh -p apiKey=...
#
# Set CAIRN to use an installed binary instead of building one: CAIRN=cairn ./run.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

if [ -n "${CAIRN:-}" ]; then
    # `command` runs the program, not this function: with CAIRN=cairn a plain `$CAIRN` would call the
    # function itself, forever.
    cairn() { command $CAIRN "$@"; }
else
    # The first build takes a few minutes; later runs only check that the binary is fresh.
    cargo build --release -p cairn
    cairn() { cargo run --quiet --release -p cairn -- "$@"; }
fi

cairn group create --name quickstart --location local --output none
cairn deployment group create \
    --resource-group quickstart \
    --name main \
    --template-file main.json \
    --parameters @main.parameters.json \
    "$@" \
    --query properties.outputs

echo
echo "Files written (the Local rootDirectory is ./out):"
find out -type f | sort | sed 's/^/  /'
