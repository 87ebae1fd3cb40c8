package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// outcomes counts what the pipeline reports to its Observer.
type outcomes struct {
	mu    sync.Mutex
	kinds map[string]int
}

func (o *outcomes) Stage(pipeline.Stage, time.Duration) {}
func (o *outcomes) Depth(pipeline.Stage, int)           {}
func (o *outcomes) Done(out pipeline.Outcome, kind string, _ fz.Stats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.kinds == nil {
		o.kinds = map[string]int{}
	}
	o.kinds[string(out)+"/"+kind]++
}

func (o *outcomes) get(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.kinds[k]
}

// waitCounted waits until outcome k has been counted at least once. The
// pipeline counts an outcome just after it sends the result, so the producer
// may see the result first, and on a loaded machine the goroutine that
// counts may run much later; the callers then check the exact counts.
func (o *outcomes) waitCounted(t *testing.T, k string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for o.get(k) == 0 {
		if time.Now().After(deadline) {
			t.Errorf("outcome %s not counted within 30s of its result", k)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failingStore fails every Put with err while broken is set, and stores in
// the dirStore otherwise.
type failingStore struct {
	*dirStore
	broken atomic.Bool
	err    error
	puts   atomic.Int32
}

func (s *failingStore) Put(ctx context.Context, k pipeline.Key, blob []byte, m pipeline.Meta) error {
	s.puts.Add(1)
	if s.broken.Load() {
		return fmt.Errorf("put %s: %w", k, s.err)
	}
	return s.dirStore.Put(ctx, k, blob, m)
}

// waitResult waits up to d for pd's result.
func waitResult(t *testing.T, pd *ingest.Pending, d time.Duration) (*ingest.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := pd.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("no result within %v: the snapshot is being retried without end", d)
	}
	return res, err
}

// A snapshot the sink refuses for good (here: metadata it will never
// accept, as a non-finite error bound from an overflowed REL range was)
// gets an error result at once, even with retries unbounded
// (MaxDeliver 0), instead of being redelivered for ever; the snapshots
// around it are stored.
func TestPoisonSnapshotAnsweredAtOnce(t *testing.T) {
	e := newEnv(t)
	sink, err := sinks.Open(context.Background(), filepath.Join(e.StoreDir, "sink"))
	if err != nil {
		t.Fatal(err)
	}
	obs := &outcomes{}
	url := runInProcess(t, e, func(c *sidecarConfig) {
		c.Pipeline.Store = pipeline.SinkStore(sink)
		c.Pipeline.Observer = obs
		c.Receiver.MaxDeliver = 0
		codec := c.Pipeline.Codec
		c.Pipeline.Codec = func(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error) {
			blob, st, err := codec(ctx, src, p)
			if p.Dims[0] == 7 { // the poison snapshot
				st.MaxAbsErr = math.Inf(1)
			}
			return blob, st, err
		}
	})
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	poison := specFor(0)
	poison.Dims = []uint64{7, 48, 40}
	_, bad := publishOne(ctx, p, poison, 0)
	good, gpd := publishOne(ctx, p, specFor(1), 1)
	if bad == nil || gpd == nil {
		t.Fatal("publish failed")
	}
	_, err = waitResult(t, bad, 15*time.Second)
	var ie *ingest.Error
	if !errors.As(err, &ie) || ie.Code != ingest.CodeStore || !strings.Contains(ie.Message, "max_abs_err") {
		t.Fatalf("poison snapshot: want store_failed naming max_abs_err, got %v", err)
	}
	t.Logf("poison snapshot answered: %v", err)
	if good.res, good.err = waitResult(t, gpd, 15*time.Second); good.err != nil {
		t.Fatalf("the good snapshot next to it: %v", good.err)
	}
	if n := obs.get("retried/transient"); n != 0 {
		t.Errorf("a permanent sink error was retried %d times", n)
	}
	obs.waitCounted(t, "failed/store_failed")
	if n := obs.get("failed/store_failed"); n != 1 {
		t.Errorf("failed/store_failed counted %d times, want 1", n)
	}
	queueEmpty(t, p, url)
}

// A sink that keeps failing transiently (a full disk) is retried a bounded
// number of deliveries (MaxDeliver), then the producer gets store_failed
// with the last cause, the give-up is counted (metric kind gave_up), and the
// notification leaves the stream.
func TestTransientSinkFailureGivesUp(t *testing.T) {
	e := newEnv(t)
	store := &failingStore{dirStore: &dirStore{dir: e.StoreDir}, err: syscall.ENOSPC}
	store.broken.Store(true)
	obs := &outcomes{}
	url := runInProcess(t, e, func(c *sidecarConfig) {
		c.Pipeline.Store = store
		c.Pipeline.Observer = obs
		c.Receiver.MaxDeliver = 3
	})
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	_, pd := publishOne(ctx, p, specFor(0), 0)
	if pd == nil {
		t.Fatal("publish failed")
	}
	_, err := waitResult(t, pd, 30*time.Second)
	took := time.Since(t0)
	var ie *ingest.Error
	if !errors.As(err, &ie) || ie.Code != ingest.CodeStore ||
		!strings.Contains(ie.Message, "gave up after 3 deliveries") || !strings.Contains(ie.Message, "no space left") {
		t.Fatalf("want store_failed after 3 deliveries naming the cause, got %v", err)
	}
	t.Logf("answered after %v: %v", took.Round(time.Millisecond), err)
	if n := store.puts.Load(); n != 3 {
		t.Errorf("%d puts, want 3 (one per delivery)", n)
	}
	if took < 3*time.Second { // waits 1 s, then 2 s between deliveries
		t.Errorf("gave up after %v: the retries were not spaced out", took)
	}
	obs.waitCounted(t, "failed/"+pipeline.KindGaveUp)
	if obs.get("failed/"+pipeline.KindGaveUp) != 1 || obs.get("retried/transient") != 2 {
		t.Errorf("outcomes %v: want 2 retries and 1 gave_up", obs.kinds)
	}
	queueEmpty(t, p, url)
}

// While the sink fails, snapshots waiting for a retry keep their budget:
// producers are refused (policy fail) instead of filling shared memory past
// --budget, and the budget's count matches the segments that exist. Once
// the sink recovers, everything published is stored.
func TestBudgetHeldWhileRetrying(t *testing.T) {
	e := newEnv(t)
	e.Budget = 8 << 20
	store := &failingStore{dirStore: &dirStore{dir: e.StoreDir}, err: syscall.ENOSPC}
	store.broken.Store(true)
	url := runInProcess(t, e, func(c *sidecarConfig) { c.Pipeline.Store = store })
	p := newProducer(t, url, e.ShmDir, func(o *ingest.ProducerOptions) { o.Policy = ingest.Fail })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	shmBytes := func() int64 {
		var n int64
		filepath.WalkDir(e.ShmDir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		return n
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), shmBytes()))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var (
		all     []*sent
		pds     []*ingest.Pending
		refused int
	)
	end := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		spec := specFor(i)
		spec.Dims = []uint64{1 << 18} // 1 MiB
		s, pd := publishOne(ctx, p, spec, i)
		switch {
		case errors.Is(s.err, ingest.ErrBudgetFull):
			refused++
			time.Sleep(20 * time.Millisecond)
		case s.err != nil:
			t.Fatal(s.err)
		default:
			all, pds = append(all, s), append(pds, pd)
		}
	}
	close(stop)
	<-sampled
	st, err := p.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sink failing: %d published, %d refused; shared memory peak %.1f MiB; status %d bytes held by %d",
		len(all), refused, float64(peak.Load())/(1<<20), st.UsedBytes, st.Holds)
	if peak.Load() > e.Budget {
		t.Errorf("segments in shared memory peaked at %d bytes with a budget of %d: snapshots waiting for a retry lost their hold", peak.Load(), e.Budget)
	}
	if have := shmBytes(); st.UsedBytes < have {
		t.Errorf("status says %d bytes held while %d bytes of segments wait", st.UsedBytes, have)
	}
	if refused == 0 || len(all) == 0 {
		t.Errorf("want both stored and refused snapshots, got %d and %d", len(all), refused)
	}
	store.broken.Store(false)
	for i, pd := range pds {
		all[i].res, all[i].err = pd.Wait(ctx)
	}
	verify(t, e, all)
	// The sidecar lets a hold go just after it has published the result and
	// had its ack confirmed, so the producer can see the last result first.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := p.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.UsedBytes == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after all results the budget still holds %d bytes in %d holds", st.UsedBytes, st.Holds)
		}
	}
}

// A local sink that breaks after start (its directory replaced by a file,
// as a mistaken cleanup would) answers the producer with store_failed at
// once, not with silence.
func TestSinkBrokenLaterAnswered(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.StoreDir, "sink")
	sink, err := sinks.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := sinks.CheckWritable(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	url := runInProcess(t, e, func(c *sidecarConfig) { c.Pipeline.Store = pipeline.SinkStore(sink) })
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must(t, os.RemoveAll(dir))
	must(t, os.WriteFile(dir, []byte("not a directory"), 0o644))
	_, pd := publishOne(ctx, p, specFor(0), 0)
	if pd == nil {
		t.Fatal("publish failed")
	}
	_, err = waitResult(t, pd, 10*time.Second)
	var ie *ingest.Error
	if !errors.As(err, &ie) || ie.Code != ingest.CodeStore || !strings.Contains(ie.Message, "not a directory") {
		t.Fatalf("want store_failed saying the sink is not a directory, got %v", err)
	}
	t.Logf("answered: %v", err)
}

// A result that cannot be published (here the result stream is gone: the
// publish gets no stream acknowledgement, though the producer's own
// subscription sees it) is a transient failure: the snapshot keeps its
// budget hold until the sidecar has answered it durably, and is handed back.
// The producer, which saw the result, removed its segment; the redelivery
// finds the object stored for the same msg_id and answers ok again (not
// missing_segment), and that result is the one the result stream keeps.
func TestResultPublishFailureKeepsHold(t *testing.T) {
	e := newEnv(t)
	sink, err := sinks.Open(context.Background(), filepath.Join(e.StoreDir, "sink"))
	if err != nil {
		t.Fatal(err)
	}
	obs := &outcomes{}
	url := runInProcess(t, e, func(c *sidecarConfig) {
		c.Pipeline.Observer = obs
		c.Pipeline.Store = pipeline.SinkStore(sink)
	})
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, js := connectJS(t, ctx, url)
	defer nc.Close()
	var sub ingest.Subjects
	must(t, js.DeleteStream(ctx, sub.ResultStream()))
	s, pd := publishOne(ctx, p, specFor(0), 0)
	if pd == nil {
		t.Fatal(s.err)
	}
	for obs.get("retried/result") == 0 {
		if ctx.Err() != nil {
			t.Fatal("the result was never refused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	st, err := p.Status(ctx)
	must(t, err)
	if st.UsedBytes < int64(len(s.raw)) {
		t.Errorf("while its result could not be published the snapshot holds %d budget bytes, want >= %d: the producer still holds its segment", st.UsedBytes, len(s.raw))
	}
	res, err := pd.Wait(ctx) // seen on the producer's subscription
	if err != nil || !res.OK {
		t.Fatalf("first result: %+v %v", res, err)
	}
	_, _, err = ingest.EnsureStreams(ctx, js, sub, ingest.StreamConfig{})
	must(t, err)
	// The redelivery is answered durably, which frees the hold.
	for {
		st, err := p.Status(ctx)
		must(t, err)
		if st.UsedBytes == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the budget still holds %d bytes after the redelivery", st.UsedBytes)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := obs.get("failed/" + string(ingest.CodeNoSegment)); n != 0 {
		t.Errorf("the redelivery of a stored snapshot was answered missing_segment")
	}
	results, err := js.Stream(ctx, sub.ResultStream())
	must(t, err)
	m, err := results.GetLastMsgForSubject(ctx, sub.Result(p.ID(), res.MsgID))
	if err != nil {
		t.Fatalf("no result stored for %s: %v", res.MsgID, err)
	}
	var kept ingest.Result
	must(t, json.Unmarshal(m.Data, &kept))
	if !kept.OK || kept.Key != res.Key || kept.CompressedBytes != res.CompressedBytes {
		t.Errorf("result stream keeps %+v, want the ok result %+v", kept, *res)
	}
}
