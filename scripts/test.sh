#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need (and builds the Kubernetes control plane that
# some of them start), then runs every test in the workspace (unit, data-driven conformance corpus, differential and
# CLI tests, the web console in headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d ../shared/conformance ]; then
  echo "error: the conformance corpus is expected at ../shared/conformance (beside this repository)" >&2
  exit 2
fi

# A fresh build of every test binary needs about 8 GB under target/ (more with the release builds of the benches):
# say so up front, since a full disk otherwise shows up as some unrelated compiler or test error much later.
free_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ -n "$free_kib" ] && [ "$free_kib" -lt $((12 * 1024 * 1024)) ]; then
  echo "warning: only $((free_kib / 1024)) MiB free on the disk holding $(pwd); the build needs about 8 GB" >&2
fi

# --- PostgreSQL for the tests that need a real server (crates/testpg: the PostgreSql extension, the PostgreSQL
# store and the CLI's store_* tests) -------------------------------------------------------------------------
# The tests start throwaway clusters themselves (initdb, pg_ctl and postgres from the `postgresql` package); they
# only need the binaries and, as root, an unprivileged account to run them as (PostgreSQL refuses root).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: PostgreSQL is missing; install it with: sudo apt-get install -y postgresql" >&2
    exit 2
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
fi
if [ "$(id -u)" -eq 0 ] && ! id -u cairn-test >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin cairn-test
fi

# --- Chromium and its WebDriver for the web console's browser test (crates/cli/tests/console_browser.rs; the console
# is crates/server's) ---------------------------------------------------------------------------------------------
# The test starts chromedriver and a headless Chromium itself; without them it fails, naming the packages.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: Chromium is missing; install it with: sudo apt-get install -y chromium chromium-driver" >&2
    exit 2
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
fi

# --- An OCI registry and skopeo for the extension artifact tests (crates/testregistry, crates/oci, the CLI's
# oci_cli test) -------------------------------------------------------------------------------------------------
# The tests start Debian's `docker-registry` (the CNCF distribution registry) themselves on loopback ports in temp
# directories, with and without basic auth; skopeo is the independent OCI client of the interop tests.
if ! command -v docker-registry >/dev/null 2>&1 || ! command -v skopeo >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: the OCI registry or skopeo is missing; install them with: sudo apt-get install -y docker-registry skopeo" >&2
    exit 2
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y docker-registry skopeo
fi

# --- kubectl for the Kubernetes benchmark (crates/stack-service/benches/kubernetes.rs) --------------------------
# `cargo test --all-targets` runs the benchmark once with a few objects as a smoke test; it compares cairn with
# `kubectl apply --server-side`/`--prune` and `kubectl delete`, so it needs a kubectl (any will do: another
# package may already provide one).
if ! command -v kubectl >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: kubectl is missing; install it with: sudo apt-get install -y kubernetes-client" >&2
    exit 2
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y kubernetes-client
fi

# --- Python for the Azure SDK tests and the request-size test's `requests` client -----------------------------
# Creates target/pyenv once and installs the official SDK (which brings `requests`), pytest and cryptography (for
# the test's self-signed certificate) from PyPI (a no-op when already there).
PYENV=target/pyenv
if [ ! -x "$PYENV/bin/python" ]; then
  python3 -m venv "$PYENV"
fi
"$PYENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "azure-mgmt-resource-deployments==2.0.0" "azure-mgmt-resource==26.0.0" \
  "azure-mgmt-resource-deploymentstacks==1.0.0" \
  "pytest==9.2.0" "cryptography==50.0.2"
# crates/server/tests/body_limit.rs sends an oversized body over TLS with Python `requests`, as the SDKs do.
CAIRN_TEST_PYTHON="$(pwd)/$PYENV/bin/python"
export CAIRN_TEST_PYTHON

# --- A real Kubernetes control plane for the tests that need an API server (crates/testkube) ----------------------
# The tests start etcd, kube-apiserver and kube-controller-manager themselves; the binaries are built once from their
# Go modules at pinned versions into ${CAIRN_TEST_CACHE:-$HOME/.cache/cairn-test} (the first build takes 10 to 30
# minutes on 2 cores and 4.9 GB of disk at its peak; later runs find them and skip it), and the script prints the
# directory they are in.
CAIRN_TEST_KUBE_BIN="$(bash scripts/kube-binaries.sh | tail -n 1)"
export CAIRN_TEST_KUBE_BIN

cargo build --workspace --all-targets --locked 2>/dev/null || cargo build --workspace --all-targets
# Every test target runs even after one fails, so a run reports every failure at once.
cargo test --workspace --all-targets --no-fail-fast

# --- Azure SDK for Python against `cairn serve` (tests/python; owned by crates/server) -----------------
# Runs the SDK tests against the debug `cairn` binary built above: TLS on 127.0.0.1:0 with a static bearer token;
# one server on a data directory, and three replicas on one throwaway PostgreSQL database that the `cairn-testpg`
# binary (crates/testpg) starts and stops.
CAIRN_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/cairn" \
  CAIRN_TESTPG_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/cairn-testpg" \
  "$PYENV/bin/python" -m pytest -q tests/python
