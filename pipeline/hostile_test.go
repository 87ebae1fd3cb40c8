package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Hostile and malformed notifications get a typed error reply (when they
// name a usable producer) and never stop the sidecar.
func TestHostileNotifications(t *testing.T) {
	e := newEnv(t)
	url := runInProcess(t, e, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, js := connectJS(t, ctx, url)
	defer nc.Close()
	var sub ingest.Subjects
	results := make(chan ingest.Result, 64)
	s, err := nc.Subscribe(sub.ProducerResults("evil"), func(m *nats.Msg) {
		var r ingest.Result
		if json.Unmarshal(m.Data, &r) == nil {
			results <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unsubscribe()

	// Files the hostile messages point at.
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, make([]byte, 4096), 0o600)
	os.WriteFile(filepath.Join(e.ShmDir, "small.seg"), make([]byte, 100), 0o600)
	os.WriteFile(filepath.Join(e.ShmDir, "good.seg"), make([]byte, 4000), 0o600)
	os.Symlink(outside, filepath.Join(e.ShmDir, "escape.seg"))
	syscall.Mkfifo(filepath.Join(e.ShmDir, "fifo.seg"), 0o600)

	base := func(id string) map[string]any {
		return map[string]any{"v": 1, "msg_id": id, "producer": "evil", "run": "r", "var": "v", "step": 1,
			"dtype": "f32", "dims": []int{1000}, "mode": "abs", "bound": 0.1,
			"segment": "good.seg", "offset": 0, "length": 4000}
	}
	cases := []struct {
		id   string
		mut  func(m map[string]any)
		raw  string
		code ingest.Code
	}{
		{id: "traversal", mut: func(m map[string]any) { m["segment"] = "../../etc/passwd" }, code: ingest.CodeBadSegment},
		{id: "absolute", mut: func(m map[string]any) { m["segment"] = outside }, code: ingest.CodeBadSegment},
		{id: "symlink", mut: func(m map[string]any) { m["segment"] = "escape.seg" }, code: ingest.CodeBadSegment},
		{id: "fifo", mut: func(m map[string]any) { m["segment"] = "fifo.seg" }, code: ingest.CodeBadSegment},
		{id: "missing", mut: func(m map[string]any) { m["segment"] = "nope.seg" }, code: ingest.CodeNoSegment},
		{id: "truncated", mut: func(m map[string]any) { m["segment"] = "small.seg" }, code: ingest.CodeSizeMismatch},
		{id: "offset-lie", mut: func(m map[string]any) { m["offset"] = 400 }, code: ingest.CodeSizeMismatch},
		{id: "dims-lie", mut: func(m map[string]any) { m["dims"] = []int{2000} }, code: ingest.CodeSizeMismatch},
		{id: "huge", mut: func(m map[string]any) { m["dims"] = []int64{1 << 40}; m["length"] = int64(4) << 40 }, code: ingest.CodeTooLarge},
		{id: "dtype", mut: func(m map[string]any) { m["dtype"] = "complex128" }, code: ingest.CodeInvalid},
		{id: "version", mut: func(m map[string]any) { m["v"] = 99 }, code: ingest.CodeVersion},
		{id: "badjson", raw: `{"v":1,"msg_id":"badjson","producer":"evil","dims":[1,2,`, code: ingest.CodeMalformed},
		{id: "wrongtype", raw: `{"v":1,"msg_id":"wrongtype","producer":"evil","step":"x"}`, code: ingest.CodeMalformed},
	}
	for _, c := range cases {
		data := []byte(c.raw)
		if c.raw == "" {
			m := base(c.id)
			c.mut(m)
			data, _ = json.Marshal(m)
		}
		if _, err := js.Publish(ctx, sub.Snapshot("evil"), data, jetstream.WithMsgID(c.id)); err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
	}
	// Garbage nobody can be answered for must not stop anything either.
	for _, junk := range []string{"", "\x00\xff", `[]`, `{"producer":"a.b.>","msg_id":"*"}`} {
		if _, err := js.Publish(ctx, sub.Snapshot("evil"), []byte(junk)); err != nil {
			t.Fatal(err)
		}
	}
	// Then a good one: the sidecar is still alive and correct.
	good, _ := json.Marshal(base("good"))
	if _, err := js.Publish(ctx, sub.Snapshot("evil"), good, jetstream.WithMsgID("good")); err != nil {
		t.Fatal(err)
	}
	got := map[string]ingest.Result{}
	for len(got) < len(cases)+1 {
		select {
		case r := <-results:
			got[r.MsgID] = r
		case <-ctx.Done():
			t.Fatalf("only %d of %d results arrived: %v", len(got), len(cases)+1, got)
		}
	}
	for _, c := range cases {
		r := got[c.id]
		if r.OK || r.Error == nil || r.Error.Code != c.code || r.Error.Message == "" {
			t.Errorf("%s: got %+v (error %v), want code %s", c.id, r, r.Error, c.code)
		} else {
			t.Logf("%-10s -> %s: %s", c.id, r.Error.Code, r.Error.Message)
		}
	}
	if r := got["good"]; !r.OK || r.Key != "r/v/1.fz" {
		t.Errorf("good snapshot after the hostile ones: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(e.StoreDir, "r", "v", "1.fz")); err != nil {
		t.Error(err)
	}
}

// Budget full: Fail answers at once; Block waits and either times out or
// proceeds when room frees; a snapshot larger than the budget is refused.
func TestBudgetPolicies(t *testing.T) {
	e := newEnv(t)
	e.Budget = 1 << 20
	gate := make(chan struct{})
	url := runInProcess(t, e, func(c *sidecarConfig) {
		c.Pipeline.Store = &dirStore{dir: e.StoreDir, gate: gate}
	})
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := func(step uint64, elems uint64) ingest.Spec {
		return ingest.Spec{Run: "b", Var: "x", Step: step, DType: fz.Float32, Dims: []uint64{elems}, Mode: fz.Abs, Bound: 1e-2}
	}
	// 768 KiB in flight, held by the closed gate (a stalled sink).
	first, pd1 := publishOne(ctx, p, spec(1, 192<<10), 0)
	if first.err != nil {
		t.Fatal(first.err)
	}

	start := time.Now()
	_, err := p.BeginWithPolicy(ctx, spec(2, 128<<10), ingest.Fail)
	if !errors.Is(err, ingest.ErrBudgetFull) {
		t.Fatalf("fail policy: got %v, want budget full", err)
	}
	// Immediate, not after p's block timeout (90 s); the bound leaves room
	// for a loaded machine.
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("fail policy took %v, want an immediate answer", d)
	}
	t.Logf("fail policy: %v (after %v)", err, time.Since(start).Round(time.Millisecond))

	short := newProducer(t, url, e.ShmDir, func(o *ingest.ProducerOptions) {
		o.ID, o.BlockTimeout = "short", 700*time.Millisecond
	})
	start = time.Now()
	_, err = short.Begin(ctx, spec(3, 128<<10))
	if !errors.Is(err, ingest.ErrBudgetFull) || time.Since(start) < 700*time.Millisecond {
		t.Fatalf("block policy with timeout: got %v after %v", err, time.Since(start))
	}
	t.Logf("block policy timed out: %v (after %v)", err, time.Since(start).Round(time.Millisecond))

	if _, err := p.Begin(ctx, spec(4, 512<<10)); !errors.Is(err, ingest.ErrTooLarge) {
		t.Fatalf("2 MiB snapshot with a 1 MiB budget: got %v", err)
	}

	// A blocked producer proceeds once the first snapshot is stored.
	type out struct {
		s  *sent
		pd *ingest.Pending
	}
	blocked := make(chan out, 1)
	go func() {
		s, pd := publishOne(ctx, p, spec(5, 128<<10), 1)
		blocked <- out{s, pd}
	}()
	select {
	case o := <-blocked:
		t.Fatalf("admitted while the budget was full: %+v", o.s)
	case <-time.After(700 * time.Millisecond):
	}
	st, err := p.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.UsedBytes != 768<<10 || st.BudgetBytes != e.Budget {
		t.Fatalf("sidecar status %+v: want 768 KiB of %d used", st, e.Budget)
	}
	close(gate)
	if r, err := pd1.Wait(ctx); err != nil || !r.OK {
		t.Fatalf("first snapshot: %v %+v", err, r)
	}
	o := <-blocked
	if o.s.err != nil {
		t.Fatal(o.s.err)
	}
	if r, err := o.pd.Wait(ctx); err != nil || !r.OK {
		t.Fatalf("blocked snapshot: %v", err)
	}
}
