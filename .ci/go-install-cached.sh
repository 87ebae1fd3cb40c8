#!/usr/bin/env bash
# Builds a pinned Go program once into ${FZ_CACHE:-$HOME/.cache/fzsidecar}/bin
# and skips the build while a binary of the same version is there (stamp
# file NAME.version beside it). Used for the test servers that run as
# separate processes (MinIO, nats-server). Prints the binary's path on its
# last line of stdout; progress goes to stderr.
#
#   go-install-cached.sh NAME MODULE_PATH VERSION
set -euo pipefail
name="$1" module="$2" version="$3"

cache="${FZ_CACHE:-$HOME/.cache/fzsidecar}"
bindir="$cache/bin"
bin="$bindir/$name"
stamp="$bindir/$name.version"

if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
	echo "$name $version already installed" >&2
	echo "$bin"
	exit 0
fi

mkdir -p "$bindir"
echo "building $name $version into $bindir (takes minutes on a small machine)..." >&2
start=$(date +%s)
# Outside any module (cd /), so `go install pkg@version` builds exactly the
# pinned release with its own go.mod. GOTOOLCHAIN=local: build with the Go
# that is installed instead of fetching the toolchain the module names. CGO
# off: a static binary, no C toolchain.
(cd / && GOBIN="$bindir" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
	nice -n 10 go install -trimpath "$module@$version" >&2)
echo "$version" >"$stamp"
echo "$name built in $(($(date +%s) - start))s" >&2
echo "$bin"
