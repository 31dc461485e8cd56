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
