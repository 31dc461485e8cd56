#!/usr/bin/env bash
# Builds the real Kubernetes control plane that crates/testkube starts for the tests: the official kube-apiserver
# and kube-controller-manager (Go module k8s.io/kubernetes) and etcd (Go module go.etcd.io/etcd/server/v3), at the
# pinned versions below, from the Go module proxy (the only place this project's machines can fetch them from).
#
# The binaries land in ${CAIRN_TEST_CACHE:-$HOME/.cache/cairn-test}/kube-<k8s>-etcd-<etcd>/bin, and the script
# prints that directory as the last line of its stdout (progress goes to stderr), so a caller can do
#   CAIRN_TEST_KUBE_BIN="$(scripts/kube-binaries.sh)"
# When all three binaries for this exact version set are already there it does nothing: a rebuild happens only when
# a version below changes. Go's module downloads and build cache go to $CACHE/go/{mod,build}, not to the user's
# own Go caches, so what the build costs is in one known place; the build cache is emptied after a successful
# build (nothing else uses it), the module downloads are kept for the next version bump.
#
# First build (README, "The test suite"): 31 minutes on a 2-core machine shared with two other builds, 19 minutes of
# CPU time (so about 10-15 minutes on idle cores); about 1 GB of module downloads, 4.9 GB of disk at the peak (3.7 GB
# of it Go's build cache), 1.2 GB kept afterwards (238 MB of binaries and the module downloads).
set -euo pipefail

# k8s.io/kubernetes v1.37.2 declares `go 1.26.0`, so the machine's Go 1.26 builds it without a toolchain download;
# its own go.mod pins the etcd client at v3.7.0, so etcd is the newest v3.7 patch release.
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3

CACHE="${CAIRN_TEST_CACHE:-$HOME/.cache/cairn-test}"
OUT="$CACHE/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
BIN="$OUT/bin"
PROGRAMS=(kube-apiserver kube-controller-manager etcd)

have_all() {
  local program
  for program in "${PROGRAMS[@]}"; do
    [ -x "$BIN/$program" ] || return 1
  done
}

if have_all; then
  echo "$BIN"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is missing; kube-apiserver, kube-controller-manager and etcd are built from their Go modules" >&2
  exit 2
fi

mkdir -p "$CACHE"
# Two test runs (say, two worktrees) building the same set at once would only slow each other down.
exec 9>"$CACHE/kube-binaries.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if have_all; then
  echo "$BIN"
  exit 0
fi

export GOMODCACHE="$CACHE/go/mod"
export GOCACHE="$CACHE/go/build"
# No VCS stamp: the temporary modules may sit inside some unrelated repository (or have no git at hand).
export GOFLAGS="-mod=mod -buildvcs=false"
# The machine's own Go: a toolchain line in a dependency must not make it fetch another one silently.
export GOTOOLCHAIN=local
export CGO_ENABLED=0

started=$(date +%s)
echo "building kube-apiserver and kube-controller-manager $KUBE_VERSION and etcd $ETCD_VERSION into $BIN" \
  "(once per version set; 10 to 30 minutes on 2 cores)" >&2

WORK="$OUT/src"
rm -rf "$WORK" "$BIN.partial"
mkdir -p "$WORK/kube" "$WORK/etcd" "$BIN.partial"

# --- kube-apiserver and kube-controller-manager -------------------------------------------------------------------
# k8s.io/kubernetes requires its staging modules (k8s.io/api, apimachinery, client-go, apiserver, ...) at v0.0.0
# and replaces them with ./staging/... in its own repository; a module that depends on it must replace each with the
# matching published release v0.<minor>.<patch>. The list is read from k8s.io/kubernetes's own go.mod so it stays
# right when the version changes.
cd "$WORK/kube"
cat >go.mod <<EOF
module cairn.invalid/kube-binaries

go 1.26.0
EOF
kube_mod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
if [ ! -f "$kube_mod" ]; then
  echo "error: cannot download k8s.io/kubernetes@$KUBE_VERSION from the Go module proxy" >&2
  exit 1
fi
staging_version="v0.${KUBE_VERSION#v1.}"
{
  echo
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  echo
  echo "replace ("
  awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$kube_mod" | sort -u |
    while read -r module; do echo "	$module => $module $staging_version"; done
  echo ")"
} >>go.mod
# A tools file keeps the programs' packages in the module graph for `go mod tidy`; the build tag keeps it out of
# every build (a main package cannot be imported for real).
cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
EOF
go mod tidy >&2
# Version stamps as Kubernetes' own release build sets them: /version reports the release, and the compatibility
# checks between the apiserver and the controller-manager see real versions rather than v0.0.0-master.
minor="${KUBE_VERSION#v1.}"
minor="${minor%%.*}"
version_pkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $version_pkg.gitVersion=$KUBE_VERSION -X $version_pkg.gitMajor=1 -X $version_pkg.gitMinor=$minor"
kube_ldflags+=" -X $version_pkg.gitTreeState=clean -X $version_pkg.buildDate=1970-01-01T00:00:00Z"
go build -trimpath -ldflags="$kube_ldflags" -o "$BIN.partial/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager >&2

# --- etcd ---------------------------------------------------------------------------------------------------------
# etcd's own main package lives in its repository's root module, which is not published for `go build`; it only calls
# etcdmain.Main, so a two-line main of our own builds the same server.
cd "$WORK/etcd"
cat >go.mod <<EOF
module cairn.invalid/etcd-binary

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
cat >main.go <<'EOF'
// Command etcd: the etcd server, exactly as etcd's own main runs it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
EOF
go mod tidy >&2
go build -trimpath -ldflags="-s -w" -o "$BIN.partial/etcd" . >&2

# Only a complete set is ever found under $BIN (an interrupted build leaves bin.partial behind, rebuilt next time).
rm -rf "$BIN"
mv "$BIN.partial" "$BIN"
build_cache_size=$(du -sh "$GOCACHE" | cut -f1)
go clean -cache
rm -rf "$WORK"

finished=$(date +%s)
echo "built in $(((finished - started) / 60)) min $(((finished - started) % 60)) s:" \
  "binaries $(du -sh "$BIN" | cut -f1), Go module downloads $(du -sh "$GOMODCACHE" | cut -f1) in $GOMODCACHE," \
  "Go build cache $build_cache_size (emptied)" >&2
echo "$BIN"
