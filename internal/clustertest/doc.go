// Package clustertest runs fzsidecar as it is deployed beyond one node
// (docs/DEPLOY.md), on loopback, as separate processes: a 3-server NATS
// JetStream cluster (streams with 3 replicas), MinIO distributed over 4
// server processes behind a TCP load balancer, one `fzsidecar serve` per
// "node" and `fzsidecar simulate` producers, and it kills servers of each
// kind mid-stream.
//
// The deployment model it checks: shared memory is node-local, so a
// producer can only be served by its own node's sidecar. Each node
// therefore has its own subject prefix (fz-<node>), hence its own streams
// (FZ_<NODE>_SNAPSHOTS, FZ_<NODE>_RESULTS), consumer and admission subject,
// all on the one cluster; the sidecars share one bucket, where create-only
// puts keep two writers of one run/var/step from replacing each other.
//
// The binaries come from .ci/install-nats-server.sh and .ci/install-minio.sh
// (FZ_NATS_SERVER_BIN, FZ_MINIO_BIN). Without them the tests skip with a
// loud message, unless FZ_REQUIRE_NATIVE=1 or FZ_REQUIRE_MINIO=1 (CI), where
// they fail.
package clustertest
