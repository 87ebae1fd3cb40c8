package sinks

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/miniotest"
	"github.com/minio/minio-go/v7"
)

// waitForPart blocks until the multipart upload of obj has a part on the
// server, failing t if done reports first.
func waitForPart(t *testing.T, srv *miniotest.Server, bucket, obj string, done <-chan error) {
	t.Helper()
	core := minio.Core{Client: srv.Client(t)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		select {
		case err := <-done:
			t.Fatalf("Put finished (%v) before the server could be stopped mid-upload", err)
		case <-ctx.Done():
			t.Fatal("no part uploaded within a minute")
		case <-time.After(5 * time.Millisecond):
		}
		ups, _ := core.ListMultipartUploads(ctx, bucket, obj, "", "", "", 10)
		for _, u := range ups.Uploads {
			parts, _ := core.ListObjectParts(ctx, bucket, obj, u.UploadID, 0, 100)
			if len(parts.ObjectParts) > 0 {
				return
			}
		}
	}
}

// A MinIO process stopped (SIGSTOP) in the middle of a multipart upload
// still accepts connections and buffers bytes, but never answers: without
// timeouts a part upload blocks for good (the ~2 min stall seen in the
// cluster test was the lucky case). The Put must fail with a transient
// *TimeoutError within seconds, so do reads, and after SIGCONT the same Put
// succeeds.
func TestS3StoppedServerFailsPut(t *testing.T) {
	srv := miniotest.Start(t)
	bucket := srv.Bucket(t)
	var logs syncBuffer
	const stall = 2 * time.Second
	s := openS3T(t, srv, bucket, S3Config{PartSize: 5 << 20, Threads: 2, StallTimeout: stall, ConnectTimeout: time.Second,
		RequestRetries: 2, Attempts: 2, RetryBase: 50 * time.Millisecond},
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := context.Background()
	stored := blobOf(50, 100000)
	if err := s.Put(ctx, Key{"r", "v", 1}, stored, Meta{}); err != nil {
		t.Fatal(err)
	}

	blob := blobOf(51, 40<<20)
	k := Key{"r", "v", 2}
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, k, blob, Meta{}) }()
	waitForPart(t, srv, bucket, "pfx/a/r/v/000000000002.fz", done)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	t0 := time.Now()
	// Generous against a loaded machine; without the timeouts the Put
	// never returns.
	const bound = 60 * time.Second
	var err error
	select {
	case err = <-done:
	case <-time.After(bound):
		t.Fatalf("Put to a stopped server still running after %v: it hangs\nlogs:\n%s", bound, logs.String())
	}
	took := time.Since(t0)
	var te *TimeoutError
	if err == nil || !errors.As(err, &te) || !te.Stall || !Retryable(err) {
		t.Fatalf("Put to a stopped server = %v (after %v), want a transient stall *TimeoutError\nlogs:\n%s", err, took, logs.String())
	}
	if !strings.Contains(err.Error(), "s3.stall_timeout") || !strings.Contains(logs.String(), "S3 request timed out") {
		t.Errorf("error %q or logs do not name the timeout\nlogs:\n%s", err, logs.String())
	}
	t.Logf("Put to a stopped server failed after %v: %v", took.Round(time.Millisecond), err)

	// Reads of a stopped server fail the same way.
	t0 = time.Now()
	gotc := make(chan error, 1)
	go func() { _, _, err := s.Get(ctx, Key{"r", "v", 1}); gotc <- err }()
	select {
	case err = <-gotc:
	case <-time.After(bound):
		t.Fatalf("Get from a stopped server still running after %v", bound)
	}
	if !errors.As(err, &te) {
		t.Fatalf("Get from a stopped server = %v, want a *TimeoutError", err)
	}
	t.Logf("Get from a stopped server failed after %v", time.Since(t0).Round(time.Millisecond))

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	paused = false
	if err := s.Put(ctx, k, blob, Meta{}); err != nil {
		t.Fatalf("Put after SIGCONT: %v", err)
	}
	for key, want := range map[Key][]byte{{"r", "v", 1}: stored, k: blob} {
		if got, _, err := s.Get(ctx, key); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get %v after SIGCONT: %v", key, err)
		}
	}
}

// A server stopped for a few seconds mid-upload and continued: the stalled
// requests time out, are retried, and the Put succeeds without a caller
// noticing more than the delay.
func TestS3StoppedServerRecovers(t *testing.T) {
	srv := miniotest.Start(t)
	bucket := srv.Bucket(t)
	var logs syncBuffer
	s := openS3T(t, srv, bucket, S3Config{PartSize: 5 << 20, Threads: 2, StallTimeout: time.Second,
		RequestRetries: 2, Attempts: 20, RetryBase: 100 * time.Millisecond},
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	blob := blobOf(52, 40<<20)
	k := Key{"r", "v", 3}
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, k, blob, Meta{}) }()
	waitForPart(t, srv, bucket, "pfx/a/r/v/000000000003.fz", done)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Put across a 4 s SIGSTOP: %v\nlogs:\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "S3 request timed out") {
		t.Errorf("no timeout logged while the server was stopped:\n%s", logs.String())
	}
	if got, _, err := s.Get(ctx, k); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("Get: %v", err)
	}
}

// A server that keeps sending, a byte at a time, never trips the stall
// timeout; the per-request deadline ends it. (A plain HTTP server: the
// trickle is the point, not S3.)
func TestS3RequestDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		for i := 0; i < 1000 && r.Context().Err() == nil; i++ {
			w.Write([]byte{'x'})
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	defer srv.Close()
	// The stall timeout is 40 times the trickle's gap (10 times made a
	// loaded machine's scheduling pause look like a stall).
	tr, err := newS3Transport(S3Config{ConnectTimeout: time.Second, StallTimeout: 2 * time.Second, RequestTimeout: 3 * time.Second}, false, quiet)
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Transport: tr}
	t0 := time.Now()
	resp, err := cl.Get(srv.URL + "/bucket/obj")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	var te *TimeoutError
	if !errors.As(err, &te) || te.Stall || !Retryable(err) {
		t.Fatalf("reading a trickling answer = %v after %d bytes, want a transient deadline *TimeoutError", err, buf.Len())
	}
	// 3 s plus 1000 bytes at 1 MiB/s.
	if took := time.Since(t0); took > 15*time.Second || buf.Len() < 5 {
		t.Errorf("deadline hit after %v and %d bytes, want about 3 s and ~60 bytes", took, buf.Len())
	}

	// The caller's own cancellation stays a context error (not retried).
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/bucket/obj", nil)
	resp, err = cl.Do(req)
	if err == nil {
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) {
		t.Fatalf("caller's deadline = %v, want context.DeadlineExceeded", err)
	}
}
