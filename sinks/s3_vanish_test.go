package sinks

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/miniotest"
	"github.com/minio/minio-go/v7"
)

// A taken key whose object is gone by the time its bytes are read back
// (HEAD found it, the GET answers NoSuchKey) holds nothing: the Put creates
// it. In TestClusterWithFaults MinIO dropped such a remnant of an upload cut
// off mid-commit, and the Put failed for good ("already exists; reading it to
// compare: The specified key does not exist"), a snapshot lost to its
// producer. Here a proxy in front of a real MinIO deletes the object just
// before forwarding the sink's first GET of it.
func TestS3VanishedWhileCompared(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.Bucket(t)
	const obj = "pfx/a/r/v/000000000007.fz"
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	real := srv.Client(t)
	var armed, fired atomic.Int32
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the client signed this host
	}}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/"+obj) && armed.Load() == 1 && fired.Add(1) == 1 {
			if err := real.RemoveObject(r.Context(), bucket, obj, minio.RemoveObjectOptions{}); err != nil {
				t.Errorf("removing %s behind the sink: %v", obj, err)
			}
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	srv.SetEnv(t)
	t.Setenv("AWS_ENDPOINT_URL", proxy.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, "s3://"+bucket+"/pfx/a", WithLogger(quiet), WithS3(S3Config{RetryBase: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := Key{"r", "v", 7}
	blob := blobOf(7, 300<<10)
	if err := s.Put(ctx, k, blob, Meta{}); err != nil {
		t.Fatal(err)
	}
	armed.Store(1)
	if err := s.Put(ctx, k, blob, Meta{}); err != nil {
		t.Fatalf("Put of a key whose object vanished while compared: %v", err)
	}
	if fired.Load() == 0 {
		t.Fatal("the sink never read the taken key back: the case was not tested")
	}
	got, _, err := s.Get(ctx, k)
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("Get after the Put: %v (%d bytes, want %d)", err, len(got), len(blob))
	}
}
