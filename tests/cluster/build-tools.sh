#!/usr/bin/env bash
# Builds the local control plane and its tools from the Go modules pinned under
# tests/cluster/go/ into a cache outside the repository, keyed by version:
#   $MGJ_CACHE_DIR/bin/<tool>-<version>/<binary>
# Idempotent: a binary that is already there is not rebuilt. Each build writes
# into a temporary directory and is renamed into place only when it succeeded,
# so an interrupted run never leaves a half-built tool that looks complete.
# Prints the bin directories as KEY=path lines on stdout (for `eval`/sourcing);
# progress goes to stderr.
#
#   build-tools.sh                  build every tool
#   build-tools.sh --core [TOOL...] build what the cluster and most tests need, plus TOOLs
#                                   (kueue, promtool, prometheus, prometheus-operator); the
#                                   others' paths are still printed
#   build-tools.sh --only TOOL...   build only TOOLs (`make images` needs the registry and
#                                   helm before the cluster's tools are done)
#
# Kueue, promtool, Prometheus and the Prometheus Operator are built late, by the few tests
# that use them (tests/conftest.py starts their build in the background when a session
# collects such tests), so a cold `make test` starts its tests while they compile.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${MGJ_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/multigpu-operator}"
export CGO_ENABLED=0

log() { echo "build-tools: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

all_tools=(k8s etcd node coredns pause kwok helm registry promtool prometheus prometheus-operator kueue)
core_tools=(k8s etcd node coredns pause kwok helm registry)
if [ "${1:-}" = --core ]; then
  shift
  wanted_tools=("${core_tools[@]}" "$@")
elif [ "${1:-}" = --only ] && [ $# -gt 1 ]; then
  shift
  wanted_tools=("$@")
else
  [ $# = 0 ] || fail "usage: build-tools.sh [--core [TOOL...] | --only TOOL...]"
  wanted_tools=("${all_tools[@]}")
fi
for tool in "${wanted_tools[@]}"; do
  [[ " ${all_tools[*]} " == *" $tool "* ]] || fail "unknown tool $tool (one of ${all_tools[*]})"
done

# wanted NAME: whether this run builds NAME.
wanted() { [[ " ${wanted_tools[*]} " == *" $1 "* ]]; }

command -v go >/dev/null || fail "go is not installed (Go >= 1.26 is required)"

# module_version DIR MODULE: the version DIR's go.mod pins for MODULE.
module_version() {
  (cd "$1" && go list -m -f '{{.Version}}' "$2") || fail "reading the version of $2 in $1"
}

# module_time DIR MODULE VERSION: the module's publication time (for build dates).
module_time() {
  (cd "$1" && go mod download -json "$2@$3" | sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' | head -n1)
}

# build_into NAME VERSION DIR LDFLAGS TAGS PKG...: build PKGs into the cache.
build_into() {
  local name=$1 version=$2 dir=$3 ldflags=$4 tags=$5
  shift 5
  local dest="$cache/bin/$name-$version"
  if ! wanted "$name"; then
    echo "$dest"
    return
  fi
  if built "$dest" "$@"; then
    log "$name $version: cached in $dest"
    echo "$dest"
    return
  fi
  # Several processes may want the same tool at once (a test session's background build
  # and a fixture): one builds, the others wait for it and find it cached.
  mkdir -p "$cache/bin"
  local lock
  exec {lock}>"$cache/bin/.$name-$version.lock"
  flock "$lock"
  # What an interrupted build left (it held this lock, so nobody is writing there now).
  rm -rf "$cache/bin/.$name-$version".??????
  if built "$dest" "$@"; then
    exec {lock}>&-
    log "$name $version: cached in $dest (built by another process)"
    echo "$dest"
    return
  fi
  log "$name $version: building $* (first build takes minutes)"
  local tmp
  tmp="$(mktemp -d "$cache/bin/.$name-$version.XXXXXX")"
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -tags="$tags" -ldflags="$ldflags" -o "$tmp/" "$@") >&2 \
    || { rm -rf "$tmp"; fail "go build of $name $version ($*) in $dir"; }
  rm -rf "$dest"
  mv "$tmp" "$dest"
  exec {lock}>&-
  log "$name $version: built in $((SECONDS - start)) s"
  echo "$dest"
}

# built DEST PKG...: whether every binary of PKGs is in DEST.
built() {
  local dest=$1 pkg
  shift
  for pkg in "$@"; do
    [ -x "$dest/$(basename "$pkg")" ] || return 1
  done
}

# Kubernetes servers and kubectl, plus etcd from the same module graph.
k8s_dir="$here/go/k8s"
k8s_version="$(module_version "$k8s_dir" k8s.io/kubernetes)"
etcd_version="$(module_version "$k8s_dir" go.etcd.io/etcd/server/v3)"
k8s_date="$(module_time "$k8s_dir" k8s.io/kubernetes "$k8s_version")"
k8s_minor="$(echo "$k8s_version" | cut -d. -f2)"
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  # Without these the binaries report v0.0.0-master and kwokctl picks
  # flags meant for another release.
  k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$k8s_date"
done
k8s_bin="$(build_into k8s "$k8s_version" "$k8s_dir" "-s -w$k8s_ldflags" "selinux,notest" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)"
etcd_bin="$(build_into etcd "$etcd_version" "$k8s_dir" \
  "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_version" "" ./cmd/etcd)"

# The real node (tests/cluster/realnode.py): kubelet and kube-proxy from the same module
# graph, CoreDNS with only the plugins a cluster DNS needs, and the pod sandbox's pause
# process compiled from the Kubernetes module's own source (no registry to pull it from).
node_bin="$(build_into node "$k8s_version" "$k8s_dir" "-s -w$k8s_ldflags" "selinux,notest" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)"
coredns_dir="$here/go/coredns"
coredns_version="$(module_version "$coredns_dir" github.com/coredns/coredns)"
coredns_bin="$(build_into coredns "$coredns_version" "$coredns_dir" "-s -w" "" \
  multigpu.dev/testcluster/coredns)"
pause_src="$(cd "$k8s_dir" && go mod download -json "k8s.io/kubernetes@$k8s_version" \
  | sed -n 's/.*"Dir": *"\(.*\)".*/\1/p')/build/pause/linux/pause.c"
pause_version="$(sed -n 's/^TAG ?= //p' "$(dirname "$(dirname "$pause_src")")/Makefile")"
pause_bin="$cache/bin/pause-$pause_version"
if wanted pause && [ ! -x "$pause_bin/pause" ]; then
  command -v gcc >/dev/null || fail "gcc is not installed (the pause binary is C)"
  tmp="$(mktemp -d "$cache/bin/.pause.XXXXXX")"
  # Upstream's flags (build/pause/Makefile): small, static, warnings are errors.
  gcc -Os -Wall -Werror -static -DVERSION="v$pause_version" -o "$tmp/pause" "$pause_src" \
    || { rm -rf "$tmp"; fail "compiling $pause_src"; }
  strip "$tmp/pause"
  rm -rf "$pause_bin" && mv "$tmp" "$pause_bin"
  log "pause $pause_version: built"
fi

# kwok (the node and pod simulator) and kwokctl (which runs the cluster).
kwok_dir="$here/go/kwok"
kwok_version="$(module_version "$kwok_dir" sigs.k8s.io/kwok)"
kwok_bin="$(build_into kwok "$kwok_version" "$kwok_dir" \
  "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${k8s_version#v}" "" \
  sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl)"

# helm (chart lint/template/install) and promtool (alert rule tests).
helm_dir="$here/go/helm"
helm_version="$(module_version "$helm_dir" helm.sh/helm/v4)"
helm_bin="$(build_into helm "$helm_version" "$helm_dir" \
  "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version -X helm.sh/helm/v4/internal/version.gitTreeState=clean" "" \
  helm.sh/helm/v4/cmd/helm)"
# The local cluster's OCI registry (tests/cluster/registry.py): images and the chart are
# pushed there and the real node pulls from it. Its main.go links the filesystem storage
# driver only: a cold build (empty GOCACHE, modules downloaded) took 46 s (68 s of CPU),
# 23 s beside the control plane's Go build cache.
registry_dir="$here/go/registry"
registry_version="$(module_version "$registry_dir" github.com/distribution/distribution/v3)"
registry_bin="$(build_into registry "$registry_version" "$registry_dir" \
  "-s -w -X github.com/distribution/distribution/v3/version.version=$registry_version" "" \
  multigpu.dev/testcluster/registry)"
prom_dir="$here/go/promtool"
prom_version="$(module_version "$prom_dir" github.com/prometheus/prometheus)"
prom_bin="$(build_into promtool "$prom_version" "$prom_dir" \
  "-s -w" "remove_all_sd" github.com/prometheus/prometheus/cmd/promtool)"

# Prometheus and the Prometheus Operator with its config reloader, for the tests that scrape
# the chart's monitors and evaluate its rules (tests/cluster/prometheus.py). Prometheus comes
# from promtool's module graph (the packages promtool compiled are reused) with the
# Kubernetes service discovery alone. Its module version v0.3XY.Z is Prometheus vX.Y.Z.
prom_release="${prom_version#v0.}"
prom_release="v${prom_release:0:1}.$((10#${prom_release:1:2})).${prom_release#*.}"
prometheus_bin="$(build_into prometheus "$prom_version" "$prom_dir" \
  "-s -w -X github.com/prometheus/common/version.Version=${prom_release#v}" \
  "remove_all_sd,enable_kubernetes_sd" github.com/prometheus/prometheus/cmd/prometheus)"
promop_dir="$here/go/prometheus-operator"
promop_version="$(module_version "$promop_dir" github.com/prometheus-operator/prometheus-operator)"
promop_bin="$(build_into prometheus-operator "$promop_version" "$promop_dir" \
  "-s -w -X github.com/prometheus/common/version.Version=${promop_version#v}" "" \
  github.com/prometheus-operator/prometheus-operator/cmd/operator \
  github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader)"

# Kueue's controller manager, for the queueing tests (tests/cluster/kueue.py). Its go.sum
# starts from Kueue's own: one dependency is not in the checksum database.
kueue_dir="$here/go/kueue"
kueue_version="$(module_version "$kueue_dir" sigs.k8s.io/kueue)"
kueue_bin="$(build_into kueue "$kueue_version" "$kueue_dir" \
  "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$kueue_version" "" \
  sigs.k8s.io/kueue/cmd/kueue)"

echo "K8S_BIN=$k8s_bin"
echo "K8S_VERSION=$k8s_version"
echo "ETCD_BIN=$etcd_bin"
echo "NODE_BIN=$node_bin"
echo "COREDNS_BIN=$coredns_bin"
echo "PAUSE_BIN=$pause_bin"
echo "PAUSE_VERSION=$pause_version"
echo "KWOK_BIN=$kwok_bin"
echo "HELM_BIN=$helm_bin"
echo "REGISTRY_BIN=$registry_bin"
echo "PROMTOOL_BIN=$prom_bin"
echo "PROMETHEUS_BIN=$prometheus_bin"
echo "PROMETHEUS_VERSION=$prom_release"
echo "PROMETHEUS_OPERATOR_BIN=$promop_bin"
echo "PROMETHEUS_OPERATOR_VERSION=$promop_version"
echo "KUEUE_BIN=$kueue_bin"
echo "KUEUE_VERSION=$kueue_version"
