#!/usr/bin/env bash
# Installs a pinned nats-server binary for the multi-node cluster test
# (internal/clustertest): three nats-server processes form a JetStream
# cluster there, so the server runs as separate processes, not embedded.
#
# The version is the one go.mod requires for github.com/nats-io/nats-server/v2
# (the embedded server of `fzsidecar serve`), so the cluster test and the
# zero-config sidecar run the same server code. The binary lands in
# ${FZ_CACHE:-$HOME/.cache/fzsidecar}/bin/nats-server and the build is skipped
# when a binary built from the same version is there.
# Prints the binary's path on its last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

NATS_SERVER_VERSION="${FZ_NATS_SERVER_VERSION:-$(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)}"
if [[ ! "$NATS_SERVER_VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then
	echo "install-nats-server: cannot tell the nats-server version from go.mod (got '$NATS_SERVER_VERSION')" >&2
	exit 1
fi

exec bash .ci/go-install-cached.sh nats-server github.com/nats-io/nats-server/v2 "$NATS_SERVER_VERSION"
