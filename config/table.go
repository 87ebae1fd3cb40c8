package config

import (
	"strings"
	"time"
)

// entry is one setting under its three names.
type entry struct {
	key  string // YAML path, dotted: "pipeline.writers"
	flag string // without dashes: "writers"
	help string
	// secret values are never echoed back in errors.
	secret bool
	parse  parser
	// show renders the current value for --help and `config` dumps.
	show func(*Settings) string
}

// Env is the environment variable of a key: FZ_ + the key upper-cased
// with dots as underscores (pipeline.writers → FZ_PIPELINE_WRITERS).
func Env(key string) string {
	return "FZ_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func sp(f func(*Settings) *string) func(*Settings) string {
	return func(s *Settings) string { return *f(s) }
}
func dur(f func(*Settings) *time.Duration) func(*Settings) string {
	return func(s *Settings) string { return f(s).String() }
}

var table = []entry{
	{key: "nats.listen", flag: "nats-listen", help: "address of the embedded NATS server; cannot be combined with nats.url (an external server)",
		parse: hostPort(func(s *Settings) *string { return &s.NATS.Listen }, false), show: sp(func(s *Settings) *string { return &s.NATS.Listen })},
	{key: "nats.url", flag: "nats-url", help: "external NATS server URL(s), nats://host:4222[,nats://...]; empty: run an embedded server",
		parse: str(func(s *Settings) *string { return &s.NATS.URL }), show: sp(func(s *Settings) *string { return &s.NATS.URL })},
	{key: "nats.subject_prefix", flag: "subject-prefix", help: "first token of every NATS subject; streams are <PREFIX>_SNAPSHOTS and <PREFIX>_RESULTS",
		parse: token(func(s *Settings) *string { return &s.NATS.SubjectPrefix }), show: sp(func(s *Settings) *string { return &s.NATS.SubjectPrefix })},
	{key: "nats.token", flag: "nats-token", help: "NATS auth token (prefer the environment variable: flags show up in ps)", secret: true,
		parse: str(func(s *Settings) *string { return &s.NATS.Token })},
	{key: "nats.user", flag: "nats-user", help: "NATS user name",
		parse: str(func(s *Settings) *string { return &s.NATS.User }), show: sp(func(s *Settings) *string { return &s.NATS.User })},
	{key: "nats.password", flag: "nats-password", help: "NATS password (prefer the environment variable)", secret: true,
		parse: str(func(s *Settings) *string { return &s.NATS.Password })},
	{key: "nats.nkey_file", flag: "nats-nkey", help: "file holding a NATS nkey user seed (SU...)",
		parse: str(func(s *Settings) *string { return &s.NATS.NkeyFile }), show: sp(func(s *Settings) *string { return &s.NATS.NkeyFile })},
	{key: "nats.creds_file", flag: "nats-creds", help: "NATS credentials file (JWT + seed, external servers)",
		parse: str(func(s *Settings) *string { return &s.NATS.CredsFile }), show: sp(func(s *Settings) *string { return &s.NATS.CredsFile })},
	{key: "nats.tls_ca", flag: "tls-ca", help: "CA certificate file to verify the NATS server",
		parse: str(func(s *Settings) *string { return &s.NATS.TLSCA }), show: sp(func(s *Settings) *string { return &s.NATS.TLSCA })},
	{key: "nats.tls_cert", flag: "tls-cert", help: "TLS certificate (client cert; with the embedded server also its cert)",
		parse: str(func(s *Settings) *string { return &s.NATS.TLSCert }), show: sp(func(s *Settings) *string { return &s.NATS.TLSCert })},
	{key: "nats.tls_key", flag: "tls-key", help: "TLS key file for nats.tls_cert",
		parse: str(func(s *Settings) *string { return &s.NATS.TLSKey }), show: sp(func(s *Settings) *string { return &s.NATS.TLSKey })},

	{key: "shm_dir", flag: "shm-dir", help: "directory of shared-memory segments; only files inside it are ever mapped",
		parse: nonEmpty(func(s *Settings) *string { return &s.ShmDir }, "a directory path"), show: sp(func(s *Settings) *string { return &s.ShmDir })},
	{key: "data_dir", flag: "data-dir", help: "state directory; the embedded JetStream store lives in DATA_DIR/jetstream and must persist across restarts",
		parse: nonEmpty(func(s *Settings) *string { return &s.DataDir }, "a directory path"), show: sp(func(s *Settings) *string { return &s.DataDir })},
	{key: "sink", flag: "sink", help: "where blobs go: a path, file:///path, or s3://bucket/prefix",
		parse: nonEmpty(func(s *Settings) *string { return &s.Sink }, "a path, file:///path or s3://bucket/prefix"), show: sp(func(s *Settings) *string { return &s.Sink })},
	{key: "backend", flag: "backend", help: "codec backend: auto (GPU if present), cpu or gpu",
		parse: oneOf(func(s *Settings) *string { return &s.Backend }, "auto", "cpu", "gpu"), show: sp(func(s *Settings) *string { return &s.Backend })},
	{key: "format_version", flag: "format-version", help: "container format version written: 1 (default; every release reads it) or 2 (group rates: smaller files, opt-in; readers need a build that lists v2 in 'fzsidecar version'; docs/FORMAT.md)",
		parse: formatVersion(func(s *Settings) *int { return &s.FormatVersion }), show: func(s *Settings) string { return itoa64(int64(s.FormatVersion)) }},
	{key: "tiling", flag: "tiling", help: "tile geometry written: boxes (default; every release reads it), flat (runs of 4096 consecutive values, flags bit 1: for narrow grids whose box tiles are mostly clipped), padded (box tiles, clipped ones coded whole, flags bit 2: for GPU speed on f32 rank-3 fields) or auto (per field: flat for a rank-3 field with ny·nx ≤ 2048 and at least 25 % of its values in clipped box tiles, else padded for an f32 rank-3 field with a clipped tile and sub-block growth ≤ 1.05, else boxes; docs/FORMAT.md §3.1); flat and padded need a reader from this release",
		parse: tiling(func(s *Settings) *string { return &s.Tiling }), show: sp(func(s *Settings) *string { return &s.Tiling })},
	{key: "gpus", flag: "gpus", help: "GPU devices for backend gpu/auto: one compression lane per device, e.g. 0,1 or all (default device 0)",
		parse: gpuList, show: func(s *Settings) string { return formatGPUs(s.GPUs) }},
	{key: "gpu_host", flag: "gpu-host", help: "how snapshots reach a GPU: register (pin the segment in place, kept while the producer reuses it; staging where that fails) or stage (copy through a pinned ring)",
		parse: oneOf(func(s *Settings) *string { return &s.GPUHost }, "register", "stage"), show: sp(func(s *Settings) *string { return &s.GPUHost })},
	{key: "gpu_lanes", flag: "gpu-lanes", help: "snapshots each GPU compresses at once (while one lane's kernels run, the others' copies keep PCIe busy)",
		parse: intIn(func(s *Settings) *int { return &s.GPULanes }, 1, 32, "a number of lanes"), show: func(s *Settings) string { return itoa64(int64(s.GPULanes)) }},
	{key: "gpu_device_lanes", flag: "gpu-device-lanes", help: "GPU-resident snapshots (CUDA IPC) each GPU compresses at once, on lanes of their own allocated at the first such snapshot (auto: 8, fewer or smaller jobs where their device memory would pass a fifth of the GPU's; each takes about 1.8 GB of device and 1.4 GB of pinned host memory)",
		parse: autoOrIntIn(func(s *Settings) *int { return &s.GPUDeviceLanes }, 1, 32, "a number of lanes"), show: func(s *Settings) string {
			if s.GPUDeviceLanes == 0 {
				return "auto"
			}
			return itoa64(int64(s.GPUDeviceLanes))
		}},
	{key: "gpu_arena", flag: "gpu-arena", help: "device input buffer per GPU lane; larger snapshots stream through it in two windows (auto: a quarter of the device memory over the lanes, at most 16GiB)",
		parse: sizeOrAuto(func(s *Settings) *int64 { return &s.GPUArena }), show: func(s *Settings) string {
			if s.GPUArena == 0 {
				return "auto"
			}
			return formatSize(s.GPUArena)
		}},
	{key: "budget", flag: "budget", help: "bytes of snapshots in flight (admitted or queued, not yet stored); also the largest accepted snapshot",
		parse: size(func(s *Settings) *int64 { return &s.Budget }), show: func(s *Settings) string { return formatSize(s.Budget) }},

	{key: "admission.max_block", flag: "max-block", help: "longest a producer with the block policy may wait for budget",
		parse: duration(func(s *Settings) *time.Duration { return &s.MaxBlock }), show: dur(func(s *Settings) *time.Duration { return &s.MaxBlock })},
	{key: "admission.lease_ttl", flag: "lease-ttl", help: "how long an admission is reserved before its notification must arrive",
		parse: duration(func(s *Settings) *time.Duration { return &s.LeaseTTL }), show: dur(func(s *Settings) *time.Duration { return &s.LeaseTTL })},

	{key: "jetstream.ack_wait", flag: "ack-wait", help: "after a crash, unfinished snapshots are redelivered this long after their last sign of life",
		parse: duration(func(s *Settings) *time.Duration { return &s.AckWait }), show: dur(func(s *Settings) *time.Duration { return &s.AckWait })},
	{key: "jetstream.dedup_window", flag: "dedup-window", help: "JetStream duplicate window for Nats-Msg-Id",
		parse: duration(func(s *Settings) *time.Duration { return &s.DedupWindow }), show: dur(func(s *Settings) *time.Duration { return &s.DedupWindow })},
	{key: "jetstream.result_ttl", flag: "result-ttl", help: "how long results stay in the result stream for late readers",
		parse: duration(func(s *Settings) *time.Duration { return &s.ResultTTL }), show: dur(func(s *Settings) *time.Duration { return &s.ResultTTL })},
	{key: "jetstream.max_queued", flag: "max-queued", help: "most notifications queued in the stream; beyond it publishes are refused",
		parse: int64In(func(s *Settings) *int64 { return &s.MaxQueued }, 1, 1<<40, "a positive count"), show: func(s *Settings) string { return itoa64(s.MaxQueued) }},
	{key: "jetstream.max_deliver", flag: "max-deliver", help: "give up (error result store_failed) on a snapshot failing transiently after this many deliveries; 0: never",
		parse: intIn(func(s *Settings) *int { return &s.MaxDeliver }, 0, 1<<30, "a count, 0 for never"), show: func(s *Settings) string { return itoa64(int64(s.MaxDeliver)) }},
	{key: "jetstream.replicas", flag: "replicas", help: "servers of a NATS cluster that keep each stream: 1, or 3 on a 3-server cluster (survives one server's loss); more than 1 needs nats.url",
		parse: intIn(func(s *Settings) *int { return &s.Replicas }, 1, 5, "1 to 5 servers (JetStream's limit)"), show: func(s *Settings) string { return itoa64(int64(s.Replicas)) }},

	{key: "pipeline.compressors", flag: "compressors", help: "snapshots copied and compressed at once (each uses all codec threads)",
		parse: intIn(func(s *Settings) *int { return &s.Pipeline.Compressors }, 1, 64, "a number of snapshots"), show: func(s *Settings) string { return itoa64(int64(s.Pipeline.Compressors)) }},
	{key: "pipeline.writers", flag: "writers", help: "sink writes at once",
		parse: intIn(func(s *Settings) *int { return &s.Pipeline.Writers }, 1, 256, "a number of concurrent writes"), show: func(s *Settings) string { return itoa64(int64(s.Pipeline.Writers)) }},
	{key: "pipeline.queue", flag: "queue", help: "compressed snapshots that may wait for a writer",
		parse: intIn(func(s *Settings) *int { return &s.Pipeline.Queue }, 1, 1024, "a number of snapshots"), show: func(s *Settings) string { return itoa64(int64(s.Pipeline.Queue)) }},
	{key: "pipeline.codec_threads", flag: "codec-threads", help: "CPU codec threads per snapshot; 0: all cores (the bytes do not depend on it)",
		parse: intIn(func(s *Settings) *int { return &s.Pipeline.CodecThreads }, 0, 4096, "a thread count, 0 for all cores"), show: func(s *Settings) string { return itoa64(int64(s.Pipeline.CodecThreads)) }},
	{key: "pipeline.drain_timeout", flag: "drain-timeout", help: "on SIGTERM, how long snapshots in flight may finish before the rest are handed back to JetStream",
		parse: duration(func(s *Settings) *time.Duration { return &s.Pipeline.DrainTimeout }), show: dur(func(s *Settings) *time.Duration { return &s.Pipeline.DrainTimeout })},

	{key: "metrics.listen", flag: "metrics-listen", help: "address of /metrics (Prometheus) and /healthz, or off",
		parse: hostPort(func(s *Settings) *string { return &s.Metrics.Listen }, true), show: sp(func(s *Settings) *string { return &s.Metrics.Listen })},
	{key: "log.level", flag: "log-level", help: "debug, info, warn or error",
		parse: oneOf(func(s *Settings) *string { return &s.Log.Level }, "debug", "info", "warn", "error"), show: sp(func(s *Settings) *string { return &s.Log.Level })},
	{key: "log.format", flag: "log-format", help: "text or json (structured logs on stderr)",
		parse: oneOf(func(s *Settings) *string { return &s.Log.Format }, "text", "json"), show: sp(func(s *Settings) *string { return &s.Log.Format })},

	{key: "s3.endpoint", flag: "s3-endpoint", help: "S3 endpoint URL for s3:// sinks, e.g. http://127.0.0.1:9000 (default $AWS_ENDPOINT_URL or AWS)",
		parse: str(func(s *Settings) *string { return &s.S3.Endpoint }), show: sp(func(s *Settings) *string { return &s.S3.Endpoint })},
	{key: "s3.region", flag: "s3-region", help: "S3 region (default $AWS_REGION or us-east-1)",
		parse: str(func(s *Settings) *string { return &s.S3.Region }), show: sp(func(s *Settings) *string { return &s.S3.Region })},
	{key: "s3.part_size", flag: "s3-part-size", help: "S3 multipart part size (at least 5MiB; default 16MiB)",
		parse: size(func(s *Settings) *int64 { return &s.S3.PartSize }), show: func(s *Settings) string { return formatSize(s.S3.PartSize) }},
	{key: "s3.threads", flag: "s3-threads", help: "S3 parts uploaded at once per object (default 4)",
		parse: intIn(func(s *Settings) *int { return &s.S3.Threads }, 0, 256, "a thread count"), show: func(s *Settings) string {
			if s.S3.Threads == 0 {
				return "" // the sink's default, stated in the help
			}
			return itoa64(int64(s.S3.Threads))
		}},
	{key: "s3.connect_timeout", flag: "s3-connect-timeout", help: "S3: limit on a TCP connect and TLS handshake (default 10s)",
		parse: duration(func(s *Settings) *time.Duration { return &s.S3.ConnectTimeout }), show: durOrDefault(func(s *Settings) *time.Duration { return &s.S3.ConnectTimeout })},
	{key: "s3.stall_timeout", flag: "s3-stall-timeout", help: "S3: a request fails when no byte moves for this long, so a dead or stopped server is noticed and the put retried (default 20s; keep above 10s)",
		parse: duration(func(s *Settings) *time.Duration { return &s.S3.StallTimeout }), show: durOrDefault(func(s *Settings) *time.Duration { return &s.S3.StallTimeout })},
	{key: "s3.request_timeout", flag: "s3-request-timeout", help: "S3: limit on one request in all, plus 1s per MiB of body (default 1m)",
		parse: duration(func(s *Settings) *time.Duration { return &s.S3.RequestTimeout }), show: durOrDefault(func(s *Settings) *time.Duration { return &s.S3.RequestTimeout })},
}

// durOrDefault shows an unset duration as "" (the default is in the help).
func durOrDefault(f func(*Settings) *time.Duration) func(*Settings) string {
	return func(s *Settings) string {
		if *f(s) == 0 {
			return ""
		}
		return f(s).String()
	}
}

func lookup(key string) *entry {
	for i := range table {
		if table[i].key == key {
			return &table[i]
		}
	}
	return nil
}

// Keys lists every YAML key with its environment variable and flag (docs).
func Keys() [][3]string {
	out := make([][3]string, len(table))
	for i, e := range table {
		out[i] = [3]string{e.key, Env(e.key), "--" + e.flag}
	}
	return out
}
