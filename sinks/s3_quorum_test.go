package sinks

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/miniotest"
)

// An object MinIO serves but never committed must not be taken for
// "already stored". MinIO with 4 drives reads at read quorum (2) and
// commits at write quorum (3); an upload cut off while its server was
// committing it leaves the object on 2 drives: readable, unacknowledged,
// and lost with one more drive (TestClusterWithFaults lost a snapshot so:
// the object of a sidecar killed mid-PUT sat on the drives of the MinIO
// server killed next). A repeated Put of the same blob, as a redelivery
// makes, must answer ok only once the object is written at write quorum.
// Single PUT and multipart.
func TestS3IdenticalPutCommitsPartialObject(t *testing.T) {
	srv := miniotest.StartDrives(t, 4)
	bucket := srv.Bucket(t)
	s := openS3T(t, srv, bucket, S3Config{PartSize: 5 << 20, Threads: 2})
	ctx := context.Background()
	for i, size := range []int{30 << 10, 11 << 20} {
		k := Key{"r", "v", uint64(i)}
		blob := blobOf(uint64(i+7), size)
		obj := filepath.Join(bucket, "pfx", "a", k.relPath())
		holding := func() []int {
			var on []int
			for d, dir := range srv.Drives {
				if _, err := os.Stat(filepath.Join(dir, obj, "xl.meta")); err == nil {
					on = append(on, d)
				}
			}
			return on
		}
		if err := s.Put(ctx, k, blob, Meta{}); err != nil {
			t.Fatal(err)
		}
		if on := holding(); len(on) != 4 {
			t.Fatalf("%d bytes: a fresh Put left the object on drives %v, want all 4", size, on)
		}
		// The remnant of a commit cut short: on 2 drives only.
		for _, dir := range srv.Drives[2:] {
			if err := os.RemoveAll(filepath.Join(dir, obj)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Stat(ctx, k); err != nil {
			t.Fatalf("%d bytes: MinIO no longer serves an object on 2 of 4 drives (the case this test is about): %v", size, err)
		}
		if err := s.Put(ctx, k, blob, Meta{}); err != nil {
			t.Fatalf("%d bytes: repeated Put of the same blob: %v", size, err)
		}
		if on := holding(); len(on) < 3 {
			t.Fatalf("%d bytes: a repeated Put answered ok while the object is on drives %v only, below MinIO's write quorum (3 of 4): one more lost drive loses it", size, on)
		}
		// And it survives losing one more drive's copy.
		if err := os.RemoveAll(filepath.Join(srv.Drives[0], obj)); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.Get(ctx, k)
		if err != nil || !bytes.Equal(got, blob) {
			t.Fatalf("%d bytes: after losing one drive's copy: %d bytes, err %v; want the blob", size, len(got), err)
		}
	}
}
