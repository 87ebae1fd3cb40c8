package sinks

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// blobOf returns n pseudo-random bytes determined by seed, so different
// seeds give different blobs of the same size.
func blobOf(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sampleMeta() Meta {
	return Meta{DType: "f32", Dims: []uint64{10, 20, 30}, Mode: "rel", Bound: 1e-3, AbsEB: 0.0125, MaxAbsErr: 0.0119, RawBytes: 24000, Extra: "host=n1 sim=heat"}
}

// testSink runs the behaviour every Sink must have. open returns an empty
// sink.
func testSink(t *testing.T, open func(t *testing.T) Sink) {
	ctx := context.Background()

	t.Run("RoundTrip", func(t *testing.T) {
		s := open(t)
		blob := blobOf(1, 5000)
		k := Key{Run: "run1", Var: "temp", Step: 42}
		before := time.Now().Add(-time.Second)
		if err := s.Put(ctx, k, blob, sampleMeta()); err != nil {
			t.Fatal(err)
		}
		got, m, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, blob) {
			t.Fatalf("Get returned %d bytes differing from the %d put", len(got), len(blob))
		}
		want := sampleMeta()
		want.Stored, want.CRC32C = uint64(len(blob)), CRC32C(blob)
		if m.Created.Before(before) || m.Created.After(time.Now().Add(time.Second)) {
			t.Errorf("Created = %v, expected about now", m.Created)
		}
		m.Created = time.Time{}
		if !metaEqual(m, want) {
			t.Errorf("meta = %+v\nwant %+v", m, want)
		}
		if r := m.Ratio(); r != float64(24000)/5000 {
			t.Errorf("ratio %v", r)
		}
		st, err := s.Stat(ctx, k)
		if err != nil || st.CRC32C != want.CRC32C || st.Stored != want.Stored {
			t.Errorf("Stat = %+v, %v", st, err)
		}
	})

	t.Run("EmptyBlob", func(t *testing.T) {
		s := open(t)
		k := Key{Run: "r", Var: "v", Step: 0}
		if err := s.Put(ctx, k, nil, Meta{}); err != nil {
			t.Fatal(err)
		}
		got, m, err := s.Get(ctx, k)
		if err != nil || len(got) != 0 || m.Stored != 0 {
			t.Fatalf("Get = %d bytes, %+v, %v", len(got), m, err)
		}
		es, err := s.List(ctx, Filter{})
		if err != nil || len(es) != 1 {
			t.Fatalf("List = %v, %v", es, err)
		}
	})

	t.Run("CreateOnly", func(t *testing.T) {
		s := open(t)
		k := Key{Run: "r", Var: "v", Step: 7}
		a, b := blobOf(2, 3000), blobOf(3, 3000)
		if err := s.Put(ctx, k, a, sampleMeta()); err != nil {
			t.Fatal(err)
		}
		// The same bytes again (a retry whose first reply was lost) succeed.
		if err := s.Put(ctx, k, a, sampleMeta()); err != nil {
			t.Fatalf("second identical Put: %v", err)
		}
		err := s.Put(ctx, k, b, sampleMeta())
		var ce *ConflictError
		if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) {
			t.Fatalf("Put of different bytes: err = %v, want a *ConflictError", err)
		}
		if ce.HaveCRC32C != CRC32C(a) || ce.PutCRC32C != CRC32C(b) || !strings.Contains(err.Error(), "000000000007.fz") {
			t.Errorf("conflict error does not describe both blobs and the object: %v", err)
		}
		got, _, err := s.Get(ctx, k)
		if err != nil || !bytes.Equal(got, a) {
			t.Fatalf("after conflicting Put the stored blob changed (err %v)", err)
		}
	})

	t.Run("ConcurrentPutsSameKey", func(t *testing.T) {
		s := open(t)
		k := Key{Run: "r", Var: "v", Step: 1}
		const n = 4
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.Put(ctx, k, blobOf(uint64(100+i), 2000), Meta{})
			}()
		}
		wg.Wait()
		ok := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if ok >= 0 {
					t.Fatalf("two different blobs both stored under one key (writers %d and %d)", ok, i)
				}
				ok = i
			case !errors.Is(err, ErrConflict):
				t.Fatalf("writer %d: %v", i, err)
			}
		}
		if ok < 0 {
			t.Fatal("no writer succeeded")
		}
		got, _, err := s.Get(ctx, k)
		if err != nil || !bytes.Equal(got, blobOf(uint64(100+ok), 2000)) {
			t.Fatalf("stored blob is not the winner's: %v", err)
		}
	})

	t.Run("MetaChecked", func(t *testing.T) {
		s := open(t)
		k := Key{Run: "r", Var: "v", Step: 1}
		blob := blobOf(4, 100)
		m := Meta{CRC32C: CRC32C(blob) ^ 1}
		if err := s.Put(ctx, k, blob, m); !errors.Is(err, ErrChecksum) {
			t.Errorf("Put with a wrong caller CRC: %v, want ErrChecksum", err)
		}
		if err := s.Put(ctx, k, blob, Meta{DType: "f32\n"}); err == nil {
			t.Error("Put accepted a dtype with a newline")
		}
		if _, err := s.Stat(ctx, k); !errors.Is(err, ErrNotFound) {
			t.Errorf("a rejected Put left something behind: Stat = %v", err)
		}
	})

	t.Run("BadKeys", func(t *testing.T) {
		s := open(t)
		bad := []Key{
			{Run: "", Var: "v"}, {Run: "..", Var: "v"}, {Run: "a/b", Var: "v"}, {Run: "r", Var: "."},
			{Run: "r", Var: "v w"}, {Run: ".hidden", Var: "v"}, {Run: "r", Var: "ü"}, {Run: "r", Var: "v", Step: MaxStep + 1},
			{Run: strings.Repeat("a", MaxNameLen+1), Var: "v"},
		}
		for _, k := range bad {
			if err := s.Put(ctx, k, []byte("x"), Meta{}); err == nil {
				t.Errorf("Put(%q) accepted a bad key", k)
			}
			if _, _, err := s.Get(ctx, k); err == nil || errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%q) = %v, want a validation error", k, err)
			}
		}
		if _, err := s.List(ctx, Filter{Var: "v"}); err == nil {
			t.Error("List with a variable but no run accepted")
		}
		if es, _ := s.List(ctx, Filter{}); len(es) != 0 {
			t.Errorf("bad keys left entries: %v", es)
		}
	})

	t.Run("ListAndNotFound", func(t *testing.T) {
		s := open(t)
		puts := []Key{
			{"runB", "u", 2}, {"runA", "temp", 10}, {"runA", "temp", 9}, {"runA", "pres", 10},
			{"runA", "temp", 100}, {"runB", "u", 1},
		}
		for i, k := range puts {
			if err := s.Put(ctx, k, blobOf(uint64(i), 100+i), Meta{RawBytes: 1000}); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.List(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		want := []Key{{"runA", "pres", 10}, {"runA", "temp", 9}, {"runA", "temp", 10}, {"runA", "temp", 100}, {"runB", "u", 1}, {"runB", "u", 2}}
		if len(all) != len(want) {
			t.Fatalf("List = %d entries, want %d: %v", len(all), len(want), all)
		}
		for i, e := range all {
			if e.Key != want[i] {
				t.Errorf("entry %d = %v, want %v", i, e.Key, want[i])
			}
			if e.Meta.RawBytes != 1000 || e.Meta.Stored == 0 || e.Meta.CRC32C == 0 {
				t.Errorf("entry %v has meta %+v", e.Key, e.Meta)
			}
		}
		es, err := s.List(ctx, Filter{Run: "runA", Var: "temp"})
		if err != nil || len(es) != 3 || es[2].Key.Step != 100 {
			t.Errorf("List(runA/temp) = %v, %v", es, err)
		}
		if es, err := s.List(ctx, Filter{Run: "runC"}); err != nil || len(es) != 0 {
			t.Errorf("List(runC) = %v, %v", es, err)
		}
		if st, err := Latest(ctx, s, "runA", "temp"); err != nil || st != 100 {
			t.Errorf("Latest(runA/temp) = %d, %v", st, err)
		}
		if st, err := Latest(ctx, s, "runB", ""); err != nil || st != 2 {
			t.Errorf("Latest(runB) = %d, %v", st, err)
		}
		se, err := StepEntries(ctx, s, "runA", 10)
		if err != nil || len(se) != 2 || se[0].Key.Var != "pres" || se[1].Key.Var != "temp" {
			t.Errorf("StepEntries(runA, 10) = %v, %v", se, err)
		}

		for _, c := range []struct {
			k     Key
			level string
			lists string
		}{
			{Key{"runZ", "temp", 1}, "run", "runA, runB"},
			{Key{"runA", "vel", 1}, "variable", "pres, temp"},
			{Key{"runA", "temp", 11}, "step", "9, 10, 100"},
		} {
			_, _, err := s.Get(ctx, c.k)
			var nf *NotFoundError
			if !errors.As(err, &nf) || !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%v) = %v, want *NotFoundError", c.k, err)
				continue
			}
			if nf.Level != c.level || !strings.Contains(err.Error(), c.lists) {
				t.Errorf("Get(%v): %q, want level %s listing %q", c.k, err, c.level, c.lists)
			}
			if _, err := s.ReadRange(ctx, c.k, 0, 1); !errors.Is(err, ErrNotFound) {
				t.Errorf("ReadRange(%v) = %v, want ErrNotFound", c.k, err)
			}
		}
		if _, err := StepEntries(ctx, s, "runB", 5); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "1, 2") {
			t.Errorf("StepEntries(runB, 5) = %v, want a not-found error listing steps 1, 2", err)
		}
		if _, err := Latest(ctx, s, "nope", ""); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "runA, runB") {
			t.Errorf("Latest(nope) = %v", err)
		}
	})

	t.Run("ReadRange", func(t *testing.T) {
		s := open(t)
		k := Key{Run: "r", Var: "v", Step: 3}
		blob := blobOf(5, 10000)
		if err := s.Put(ctx, k, blob, Meta{}); err != nil {
			t.Fatal(err)
		}
		for _, c := range [][2]int64{{0, 16}, {1234, 4321}, {9999, 1}, {10000, 0}, {0, 10000}} {
			got, err := s.ReadRange(ctx, k, c[0], c[1])
			if err != nil {
				t.Errorf("ReadRange(%d, %d): %v", c[0], c[1], err)
				continue
			}
			if !bytes.Equal(got, blob[c[0]:c[0]+c[1]]) {
				t.Errorf("ReadRange(%d, %d) returned other bytes", c[0], c[1])
			}
		}
		for _, c := range [][2]int64{{-1, 2}, {9999, 2}, {10001, 0}, {0, -1}, {5, 1 << 62}} {
			if _, err := s.ReadRange(ctx, k, c[0], c[1]); err == nil || !strings.Contains(err.Error(), "outside") {
				t.Errorf("ReadRange(%d, %d) = %v, want an out-of-range error", c[0], c[1], err)
			}
		}
	})
}

func metaEqual(a, b Meta) bool {
	if len(a.Dims) != len(b.Dims) {
		return false
	}
	for i := range a.Dims {
		if a.Dims[i] != b.Dims[i] {
			return false
		}
	}
	a.Dims, b.Dims = nil, nil
	return a.DType == b.DType && a.Mode == b.Mode && a.Bound == b.Bound && a.AbsEB == b.AbsEB &&
		a.MaxAbsErr == b.MaxAbsErr && a.RawBytes == b.RawBytes && a.Stored == b.Stored &&
		a.CRC32C == b.CRC32C && a.Extra == b.Extra && a.Created.Equal(b.Created)
}
