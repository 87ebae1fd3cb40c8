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

exec bash "$(dirname "$0")/go-install-cached.sh" minio github.com/minio/minio "$MINIO_VERSION"
