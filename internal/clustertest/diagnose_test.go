package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// keepLogs copies every process's log into $FZ_CLUSTER_KEEP_LOGS/<test>-<time>/
// when that variable names a directory: the sidecars' (the killed ones'
// included), the producers' and the MinIO servers'.
func keepLogs(t *testing.T, nodes []*node, prods []*producer, mc *minioCluster) {
	t.Helper()
	root := os.Getenv("FZ_CLUSTER_KEEP_LOGS")
	if root == "" {
		return
	}
	dir := filepath.Join(root, t.Name()+"-"+time.Now().UTC().Format("20060102T150405.000"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping logs: %v", err)
		return
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Logf("keeping logs: %v", err)
		}
	}
	for _, nd := range nodes {
		write("sidecar-"+nd.name+".log", nd.log())
	}
	for _, p := range prods {
		write("producer-"+p.id+".log", p.out.String()+"\n--- stderr ---\n"+p.err.String())
	}
	for i, p := range mc.servers {
		b, _ := os.ReadFile(p.logPath)
		write(fmt.Sprintf("minio%d.log", i), string(b))
	}
	t.Logf("logs kept in %s", dir)
}

// diagnoseMissing reports, for each key of want missing from got (a
// listing), what each MinIO server answers to a HEAD of it, what each drive
// holds under its name, and every sidecar and producer log line naming it.
func diagnoseMissing(t *testing.T, ctx context.Context, mc *minioCluster, got, want []string, nodes []*node, prods []*producer) {
	t.Helper()
	for _, key := range want {
		if slices.Contains(got, key) {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "missing %s:\n", key)
		for i, ep := range mc.endpoints {
			if mc.servers[i].exited() {
				fmt.Fprintf(&b, "  HEAD via m%d: server down\n", i)
				continue
			}
			hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			info, err := s3Client(t, ep).StatObject(hctx, bucket, key, minio.StatObjectOptions{})
			cancel()
			if err != nil {
				fmt.Fprintf(&b, "  HEAD via m%d: %v (%+v)\n", i, err, minio.ToErrorResponse(err))
			} else {
				fmt.Fprintf(&b, "  HEAD via m%d: %d bytes, etag %s, modified %s, meta %v\n", i, info.Size, info.ETag,
					info.LastModified.Format(time.RFC3339Nano), info.UserMetadata)
			}
		}
		for i, d := range mc.drives {
			p := filepath.Join(d, bucket, key)
			var files []string
			filepath.Walk(p, func(path string, fi os.FileInfo, err error) error {
				if err == nil && path != p {
					rel, _ := filepath.Rel(p, path)
					files = append(files, fmt.Sprintf("%s (%d bytes, %s)", rel, fi.Size(), fi.ModTime().UTC().Format("15:04:05.000")))
				}
				return nil
			})
			if _, err := os.Stat(p); err != nil {
				fmt.Fprintf(&b, "  drive%d: %v\n", i, err)
			} else {
				fmt.Fprintf(&b, "  drive%d: %v\n", i, files)
			}
		}
		run, _, _ := strings.Cut(key, "/")
		for _, nd := range nodes {
			for _, l := range strings.Split(nd.log(), "\n") {
				if strings.Contains(l, key) || strings.Contains(l, "--- sidecar") {
					fmt.Fprintf(&b, "  %s: %s\n", nd.name, l)
				}
			}
		}
		for _, p := range prods {
			if "job-"+p.id == run {
				fmt.Fprintf(&b, "  producer %s stdout:\n%s\n", p.id, p.out.String())
			}
		}
		t.Log(b.String())
	}
}
