package sinks

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/miniotest"
	"github.com/minio/minio-go/v7"
)

func openS3T(t *testing.T, srv *miniotest.Server, bucket string, cfg S3Config, opts ...Option) Sink {
	t.Helper()
	srv.SetEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, "s3://"+bucket+"/pfx/a", append([]Option{WithLogger(quiet), WithS3(cfg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestS3Conformance(t *testing.T) {
	srv := miniotest.Shared(t)
	testSink(t, func(t *testing.T) Sink { return openS3T(t, srv, srv.Bucket(t), S3Config{}) })
}

func TestS3LayoutAndMultipart(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.Bucket(t)
	s := openS3T(t, srv, bucket, S3Config{PartSize: 5 << 20, Threads: 3})
	ctx := context.Background()
	blob := blobOf(20, 12<<20+12345) // three parts
	k := Key{"r1", "temp", 42}
	if err := s.Put(ctx, k, blob, sampleMeta()); err != nil {
		t.Fatal(err)
	}
	cl := srv.Client(t)
	const obj = "pfx/a/r1/temp/000000000042.fz"
	info, err := cl.StatObject(ctx, bucket, obj, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		t.Fatalf("object not at %s: %v", obj, err)
	}
	if !strings.HasSuffix(info.ETag, "-3") {
		t.Errorf("ETag %q: expected a 3-part multipart upload", info.ETag)
	}
	if info.ChecksumCRC32C == "" {
		t.Errorf("object has no S3 CRC32C checksum: %+v", info)
	}
	if got := info.UserMetadata["Fz-Crc32c"]; got == "" || info.UserMetadata["Fz-Dtype"] != "f32" || info.UserMetadata["Fz-Dims"] != "10x20x30" {
		t.Errorf("user metadata = %v", info.UserMetadata)
	}
	got, m, err := s.Get(ctx, k)
	if err != nil || !bytes.Equal(got, blob) || m.CRC32C != CRC32C(blob) {
		t.Fatalf("Get: %v", err)
	}

	// A small blob goes in one PUT and still carries an S3 CRC32C.
	if err := s.Put(ctx, Key{"r1", "temp", 43}, blob[:1000], Meta{}); err != nil {
		t.Fatal(err)
	}
	info, err = cl.StatObject(ctx, bucket, "pfx/a/r1/temp/000000000043.fz", minio.StatObjectOptions{Checksum: true})
	if err != nil || strings.Contains(info.ETag, "-") || info.ChecksumCRC32C == "" {
		t.Errorf("small object: etag %q crc32c %q err %v", info.ETag, info.ChecksumCRC32C, err)
	}

	// Objects outside the layout are not catalog entries.
	cl.PutObject(ctx, bucket, "pfx/a/r1/temp/notes.txt", strings.NewReader("x"), 1, minio.PutObjectOptions{})
	cl.PutObject(ctx, bucket, "pfx/a/r1/temp/42.fz", strings.NewReader("x"), 1, minio.PutObjectOptions{})
	cl.PutObject(ctx, bucket, "other/r1/temp/000000000001.fz", strings.NewReader("x"), 1, minio.PutObjectOptions{})
	es, err := s.List(ctx, Filter{})
	if err != nil || len(es) != 2 || es[0].Key.Step != 42 || es[0].Meta.Dims[2] != 30 {
		t.Fatalf("List = %+v, %v", es, err)
	}
	// A foreign object under a valid name (no fz metadata) is skipped by
	// List and refused by Put rather than replaced.
	cl.PutObject(ctx, bucket, "pfx/a/r1/temp/000000000050.fz", strings.NewReader("x"), 1, minio.PutObjectOptions{})
	if es, err := s.List(ctx, Filter{Run: "r1", Var: "temp"}); err != nil || len(es) != 2 {
		t.Errorf("List with a foreign object = %v, %v", es, err)
	}
	if err := s.Put(ctx, Key{"r1", "temp", 50}, []byte("y"), Meta{}); !errors.Is(err, ErrConflict) {
		t.Errorf("Put over a foreign object = %v, want ErrConflict", err)
	}
}

func TestS3CorruptObject(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.Bucket(t)
	s := openS3T(t, srv, bucket, S3Config{})
	ctx := context.Background()
	k := Key{"r", "v", 3}
	blob := blobOf(21, 70000)
	if err := s.Put(ctx, k, blob, Meta{}); err != nil {
		t.Fatal(err)
	}
	// Replace the object behind the sink's back: same size and metadata,
	// one flipped bit, as a bad disk or a buggy tool would.
	cl := srv.Client(t)
	const obj = "pfx/a/r/v/000000000003.fz"
	info, err := cl.StatObject(ctx, bucket, obj, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(blob)
	bad[5000] ^= 1
	md := map[string]string{}
	for k, v := range info.UserMetadata {
		md[k] = v
	}
	if _, err := cl.PutObject(ctx, bucket, obj, bytes.NewReader(bad), int64(len(bad)), minio.PutObjectOptions{UserMetadata: md}); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Get(ctx, k)
	var ce *ChecksumError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "s3://"+bucket+"/"+obj) {
		t.Fatalf("Get of a corrupt object = %v, want a *ChecksumError naming it", err)
	}
}

func TestS3OpenErrors(t *testing.T) {
	srv := miniotest.Shared(t)
	ctx := context.Background()
	srv.SetEnv(t)
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, err := Open(ctx, "s3://no-such-bucket/x", WithLogger(lg)); err == nil || !strings.Contains(err.Error(), `"no-such-bucket" does not exist`) {
		t.Errorf("Open of a missing bucket = %v", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
	_, err := Open(ctx, "s3://"+srv.Bucket(t), WithLogger(lg), WithS3(S3Config{Attempts: 2, RetryBase: time.Millisecond}))
	if err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("Open with a wrong secret = %v, want a signature error", err)
	}
	// A server that is not there: a clear error, fast.
	start := time.Now()
	_, err = Open(ctx, "s3://bucket", WithLogger(lg), WithS3(S3Config{Endpoint: "http://127.0.0.1:1", RequestRetries: 1, Attempts: 1}))
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || time.Since(start) > 10*time.Second {
		t.Errorf("Open of an absent server = %v after %v", err, time.Since(start))
	}
	for _, secret := range []string{"wrong-secret-value", miniotest.SecretKey} {
		if strings.Contains(logs.String(), secret) || err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("a secret leaked into logs or errors")
		}
	}
}

// MinIO is killed while a multipart upload is under way and started again:
// the Put must retry and succeed, and no partial object may ever be
// visible. Run twice: once relying on minio-go's per-request retries, once
// with those off so that whole-upload attempts do the work.
func TestS3KillRestartMidUpload(t *testing.T) {
	srv := miniotest.Start(t)
	for _, c := range []struct {
		name string
		cfg  S3Config
	}{
		{"RequestRetries", S3Config{PartSize: 5 << 20, Threads: 2, RetryBase: 200 * time.Millisecond}},
		{"PutAttempts", S3Config{PartSize: 5 << 20, Threads: 2, RequestRetries: 1, Attempts: 20, RetryBase: 100 * time.Millisecond}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bucket := srv.Bucket(t)
			var logs syncBuffer
			s := openS3T(t, srv, bucket, c.cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			cl := srv.Client(t)
			core := minio.Core{Client: cl}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			blob := blobOf(22, 40<<20)
			k := Key{"r", "v", 9}
			const obj = "pfx/a/r/v/000000000009.fz"

			// Watch the object name the whole time: it must be absent
			// or complete.
			var partial atomic.Value
			watchCtx, stopWatch := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for watchCtx.Err() == nil {
					info, err := cl.StatObject(watchCtx, bucket, obj, minio.StatObjectOptions{})
					if err == nil && info.Size != int64(len(blob)) {
						partial.Store(info.Size)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()

			done := make(chan error, 1)
			go func() { done <- s.Put(ctx, k, blob, Meta{}) }()

			// Kill once at least one part is on the server.
			uploaded := false
			for !uploaded {
				select {
				case err := <-done:
					t.Fatalf("Put finished (%v) before the server could be killed mid-upload", err)
				default:
				}
				ups, _ := core.ListMultipartUploads(ctx, bucket, obj, "", "", "", 10)
				for _, u := range ups.Uploads {
					parts, _ := core.ListObjectParts(ctx, bucket, obj, u.UploadID, 0, 100)
					if len(parts.ObjectParts) > 0 {
						uploaded = true
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
			srv.Kill()
			time.Sleep(700 * time.Millisecond)
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Put across a server restart: %v\nlogs:\n%s", err, logs.String())
			}
			stopWatch()
			wg.Wait()
			if p := partial.Load(); p != nil {
				t.Fatalf("a partial object of %d bytes was visible", p)
			}
			got, _, err := s.Get(ctx, k)
			if err != nil || !bytes.Equal(got, blob) {
				t.Fatalf("Get after restart: %v", err)
			}
			es, err := s.List(ctx, Filter{})
			if err != nil || len(es) != 1 || es[0].Meta.Stored != uint64(len(blob)) {
				t.Fatalf("List after restart = %v, %v", es, err)
			}
			t.Logf("retries logged: %d", strings.Count(logs.String(), "retrying"))
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Writers racing on one key with multipart uploads: both pass the check at
// upload start, so only If-None-Match on completion keeps the second from
// replacing the first.
func TestS3ConcurrentMultipartPuts(t *testing.T) {
	srv := miniotest.Shared(t)
	s := openS3T(t, srv, srv.Bucket(t), S3Config{PartSize: 5 << 20, Threads: 2})
	ctx := context.Background()
	k := Key{"r", "v", 1}
	const n = 3
	blobs := make([][]byte, n)
	for i := range blobs {
		blobs[i] = blobOf(uint64(30+i), 11<<20)
	}
	// Writer 2 stores the same bytes as writer 1: for it, finding writer
	// 1's object is success.
	blobs[2] = blobs[1]
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Put(ctx, k, blobs[i], Meta{}) }()
	}
	wg.Wait()
	got, _, err := s.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	winner := 0
	if bytes.Equal(got, blobs[1]) {
		winner = 1
	} else if !bytes.Equal(got, blobs[0]) {
		t.Fatal("stored blob is none of the writers'")
	}
	for i, err := range errs {
		sameAsWinner := bytes.Equal(blobs[i], blobs[winner])
		if sameAsWinner && err != nil {
			t.Errorf("writer %d wrote the stored bytes but got %v", i, err)
		}
		if !sameAsWinner && !errors.Is(err, ErrConflict) {
			t.Errorf("writer %d lost the race but got %v, want ErrConflict", i, err)
		}
	}
}

// The writer process is SIGKILLed in the middle of a multipart upload: the
// object must not be visible, and a new writer stores it.
func TestS3KilledWriter(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.Bucket(t)
	srv.SetEnv(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "FZ_SINKS_HELPER=s3put", "FZ_SINKS_ROOT=s3://"+bucket+"/pfx/a")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	core := minio.Core{Client: srv.Client(t)}
	const obj = "pfx/a/r/v/000000000001.fz"
	for {
		ups, _ := core.ListMultipartUploads(ctx, bucket, obj, "", "", "", 10)
		if len(ups.Uploads) > 0 {
			parts, _ := core.ListObjectParts(ctx, bucket, obj, ups.Uploads[0].UploadID, 0, 100)
			if len(parts.ObjectParts) > 0 {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("writer ended before it could be killed mid-upload:\n%s", out.String())
		case <-ctx.Done():
			t.Fatal("no part uploaded within a minute")
		case <-time.After(5 * time.Millisecond):
		}
	}
	cmd.Process.Kill()
	<-exited
	if strings.Contains(out.String(), "helper: put ok") {
		t.Fatal("the writer finished before it was killed")
	}
	s := openS3T(t, srv, bucket, S3Config{PartSize: 5 << 20})
	if _, err := s.Stat(ctx, Key{"r", "v", 1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the writer was killed mid-upload, Stat = %v, want not found", err)
	}
	if es, err := s.List(ctx, Filter{}); err != nil || len(es) != 0 {
		t.Fatalf("List = %v, %v", es, err)
	}
	if err := s.Put(ctx, Key{"r", "v", 1}, s3KillBlob(), Meta{}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.Get(ctx, Key{"r", "v", 1}); err != nil || !bytes.Equal(got, s3KillBlob()) {
		t.Fatalf("Get: %v", err)
	}
}

func s3KillBlob() []byte { return blobOf(77, 60<<20) }

// The server forgets the multipart upload mid-way (here: aborted from
// outside; in life, a server restarted without its state): the Put starts
// a new upload and succeeds.
func TestS3UploadLost(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.Bucket(t)
	s := openS3T(t, srv, bucket, S3Config{PartSize: 5 << 20, Threads: 1, RetryBase: 50 * time.Millisecond})
	core := minio.Core{Client: srv.Client(t)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	blob := blobOf(40, 40<<20)
	k := Key{"r", "v", 2}
	const obj = "pfx/a/r/v/000000000002.fz"
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, k, blob, Meta{}) }()
	aborted := ""
	for aborted == "" {
		select {
		case err := <-done:
			t.Fatalf("Put finished (%v) before its upload could be aborted", err)
		case <-time.After(5 * time.Millisecond):
		}
		ups, _ := core.ListMultipartUploads(ctx, bucket, obj, "", "", "", 10)
		for _, u := range ups.Uploads {
			parts, _ := core.ListObjectParts(ctx, bucket, obj, u.UploadID, 0, 100)
			if len(parts.ObjectParts) > 0 && core.AbortMultipartUpload(ctx, bucket, obj, u.UploadID) == nil {
				aborted = u.UploadID
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Put after its upload was lost: %v", err)
	}
	got, _, err := s.Get(ctx, k)
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("Get: %v", err)
	}
}

// Two blobs of one size and one CRC32C but different bytes are a conflict,
// not a repeat, on S3 too (TestLocalConflictSameCRC says why such pairs are
// common: containers differing only in their header). Single PUT and
// multipart: the check runs before an attempt and after the server refuses
// the create.
func TestS3ConflictSameCRC(t *testing.T) {
	srv := miniotest.Shared(t)
	s := openS3T(t, srv, srv.Bucket(t), S3Config{PartSize: 5 << 20, Threads: 2})
	ctx := context.Background()
	for i, tail := range []int{1000, 11 << 20} {
		withCRC := func(seed uint64) []byte {
			head := blobOf(seed, 88)
			b := binary.LittleEndian.AppendUint32(head, CRC32C(head))
			return append(b, blobOf(99, tail)...)
		}
		a, b := withCRC(1), withCRC(2)
		if bytes.Equal(a, b) || CRC32C(a) != CRC32C(b) {
			t.Fatalf("test blobs: equal %v, CRC32C %08x %08x: want different bytes, one CRC", bytes.Equal(a, b), CRC32C(a), CRC32C(b))
		}
		k := Key{"r", "v", uint64(i)}
		if err := s.Put(ctx, k, a, Meta{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, k, a, Meta{}); err != nil {
			t.Fatalf("%d bytes: identical Put: %v", len(a), err)
		}
		if err := s.Put(ctx, k, b, Meta{}); !errors.Is(err, ErrConflict) {
			t.Fatalf("%d bytes: Put of other bytes with the same size and CRC32C: %v, want a conflict", len(a), err)
		}
		if got, _, err := s.Get(ctx, k); err != nil || !bytes.Equal(got, a) {
			t.Fatalf("%d bytes: stored blob changed (err %v)", len(a), err)
		}
	}
}
