#!/usr/bin/env bash
# Installs a pinned MinIO server binary for the S3 integration tests of
# sinks/ and cmd/fzsidecar. MinIO is AGPL: it is only ever built and run as a
# separate process, never imported by this module.
#
# The binary lands in ${FZ_CACHE:-$HOME/.cache/fzsidecar}/bin/minio and the
# build is skipped when a binary built from the same pinned version is there.
# Prints the binary's path on its last line of stdout.
set -euo pipefail

# Pinned pseudo-version (2026-02-12); builds with Go 1.26 from the module proxy.
MINIO_VERSION="${FZ_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"

cache="${FZ_CACHE:-$HOME/.cache/fzsidecar}"
bindir="$cache/bin"
bin="$bindir/minio"
stamp="$bindir/minio.version"

if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$MINIO_VERSION" ]]; then
	echo "minio $MINIO_VERSION already installed" >&2
	echo "$bin"
	exit 0
fi

mkdir -p "$bindir"
echo "building minio $MINIO_VERSION into $bindir (takes minutes on a small machine)..." >&2
start=$(date +%s)
# GOTOOLCHAIN=local: build with the Go that is installed instead of fetching
# the toolchain MinIO's go.mod names. CGO off: a static binary, no C toolchain.
GOBIN="$bindir" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
	nice -n 10 go install -trimpath "github.com/minio/minio@$MINIO_VERSION" >&2
echo "$MINIO_VERSION" >"$stamp"
echo "minio built in $(($(date +%s) - start))s" >&2
echo "$bin"
