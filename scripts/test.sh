#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs every test in the
# workspace (unit, data-driven conformance corpus, differential and CLI tests).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d ../shared/conformance ]; then
  echo "error: the conformance corpus is expected at ../shared/conformance (beside this repository)" >&2
  exit 2
fi

cargo build --workspace --all-targets --locked 2>/dev/null || cargo build --workspace --all-targets
cargo test --workspace --all-targets

# --- Azure SDK for Python against `cairn serve` (tests/python; owned by crates/server) -----------------
# Creates target/pyenv once, installs the official SDK, pytest and cryptography (for the test's self-signed
# certificate) from PyPI (a no-op when already there), and runs the SDK test against the debug `cairn`
# binary built above: TLS on 127.0.0.1:0 with a static bearer token.
PYENV=target/pyenv
if [ ! -x "$PYENV/bin/python" ]; then
  python3 -m venv "$PYENV"
fi
"$PYENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "azure-mgmt-resource-deployments==2.0.0" "azure-mgmt-resource==26.0.0" \
  "azure-mgmt-resource-deploymentstacks==1.0.0" \
  "pytest==9.2.0" "cryptography==50.0.2"
CAIRN_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/cairn" "$PYENV/bin/python" -m pytest -q tests/python
