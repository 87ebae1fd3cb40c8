package ingest

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
)

// startLeaseSidecar runs an embedded NATS server and a receiver with the
// given budget and admission lease; every snapshot is answered ok at once.
func startLeaseSidecar(t *testing.T, budget int64, lease time.Duration) (url, shm string) {
	t.Helper()
	shm = filepath.Join(t.TempDir(), "shm")
	ns, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := Connect(ctx, ConnOptions{URL: ns.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r, err := NewReceiver(ctx, nc, ReceiverConfig{ShmDir: shm, MaxInFlight: 4, Budget: budget, LeaseTTL: lease})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	jobs := make(chan *Job)
	done := make(chan struct{})
	go r.Run(rctx, jobs)
	go func() {
		defer close(done)
		for j := range jobs {
			j.Complete(context.Background(), Outcome{Key: j.Notice.Run + "/" + j.Notice.Var})
		}
	}()
	t.Cleanup(func() { stop(); <-done; r.Close() })
	return ns.ClientURL(), shm
}

func leaseProducer(t *testing.T, url, shm, id string) *Producer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := Connect(ctx, ConnOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p, err := NewProducer(ctx, nc, ProducerOptions{ID: id, ShmDir: shm, Policy: Fail})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A fill that takes several leases keeps its admission: the producer
// renews the lease while the snapshot is begun, so the sidecar does not
// give the bytes its segment occupies to another producer (the budget
// would run over when the notification is counted). After the result, no
// late renewal holds the bytes again.
func TestProducerRenewsLease(t *testing.T) {
	const lease = 2 * time.Second // renewals time out after lease/4: room for a loaded CI machine
	url, shm := startLeaseSidecar(t, 1000, lease)
	a := leaseProducer(t, url, shm, "slowfill")
	b := leaseProducer(t, url, shm, "other")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := Spec{Run: "r", Var: "v", DType: fz.Float32, Dims: []uint64{200}, Mode: fz.Abs, Bound: 0.1} // 800 bytes

	s, err := a.Begin(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * lease) // the fill: three leases
	if o, err := b.Begin(ctx, spec); !errors.Is(err, ErrBudgetFull) {
		if o != nil {
			o.Abort()
		}
		t.Fatalf("a second snapshot while the first (still begun, 3 leases later) holds 800 of 1000 bytes: %v, want budget_full", err)
	}
	pd, err := s.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The sidecar releases the hold after acknowledging the notification,
	// a round trip after the result: wait for that, then longer than a
	// renewal period (a renewal sent after the result would show as a
	// hold).
	waitReleased(ctx, t, a, "the answered snapshot's hold")
	time.Sleep(lease)
	st, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.UsedBytes != 0 || st.Holds != 0 {
		t.Fatalf("after the result: %d bytes in %d holds, want none", st.UsedBytes, st.Holds)
	}
	o, err := b.Begin(ctx, spec)
	if err != nil {
		t.Fatalf("after the first snapshot's result: %v", err)
	}
	o.Abort()
	// b's release and a's admission below travel on different
	// connections and subjects: without this wait the sidecar may read
	// the admission first and refuse it (CI-like load did).
	waitReleased(ctx, t, a, "b's release")

	// An aborted snapshot stops renewing: its bytes are free once the
	// release is read, and stay free.
	s, err = a.Begin(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	s.Abort()
	waitReleased(ctx, t, b, "a's release")
	time.Sleep(lease) // longer than a renewal period: a renewal after the abort would show
	if st, err := b.Status(ctx); err != nil || st.UsedBytes != 0 || st.Holds != 0 {
		t.Fatalf("a lease after an abort: %+v, %v; want no holds", st, err)
	}
	o, err = b.Begin(ctx, spec)
	if err != nil {
		t.Fatalf("after an abort: %v", err)
	}
	o.Abort()
}

// waitReleased waits until the sidecar holds no budget. A release is a
// plain publish on its own subject, so the sidecar may read it after an
// admission or renewal sent later (on the admit subject, perhaps by
// another connection): tests that need the release read first wait here.
func waitReleased(ctx context.Context, t *testing.T, p *Producer, what string) {
	t.Helper()
	for {
		st, err := p.Status(ctx)
		if err != nil {
			t.Fatalf("status while waiting for %s to be read: %v", what, err)
		}
		if st.Holds == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never read: %d bytes in %d holds", what, st.UsedBytes, st.Holds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A renewal the sidecar reads after the snapshot was answered (or after
// its admission was released) must not take budget again: renewals carry
// "renew": true and only extend an admission still held. Before, a late
// renewal (one the producer had given up waiting for on a loaded machine)
// was a fresh admission and left a ghost hold of the snapshot's size for a
// whole lease.
func TestLateRenewalTakesNoBudget(t *testing.T) {
	url, shm := startLeaseSidecar(t, 1000, time.Minute)
	a := leaseProducer(t, url, shm, "late")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := Spec{Run: "r", Var: "v", DType: fz.Float32, Dims: []uint64{200}, Mode: fz.Abs, Bound: 0.1} // 800 bytes
	s, err := a.Begin(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	msgID := s.n.MsgID
	if got, err := a.renewLease(msgID, 800, 5*time.Second); err != nil || got != time.Minute {
		t.Fatalf("renewal of a held admission: lease %v, %v; want granted for 1m", got, err)
	}
	s.Abort()
	// Wait until the sidecar has read the release, so the renewal below
	// is read after it (the case under test) and not before it (an
	// ordinary renewal).
	waitReleased(ctx, t, a, "the release")
	// The same renewal, read by the sidecar after the release.
	_, err = a.renewLease(msgID, 800, 5*time.Second)
	var ie *Error
	if !errors.As(err, &ie) || ie.Code != CodeLeaseUnknown {
		t.Fatalf("renewal after the release: %v, want %s", err, CodeLeaseUnknown)
	}
	st, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.UsedBytes != 0 || st.Holds != 0 {
		t.Fatalf("after a late renewal: %d bytes in %d holds, want none", st.UsedBytes, st.Holds)
	}
}

// A producer that aborts a snapshot and begins the next at once (policy
// fail, room for one snapshot) is admitted every time: the sidecar handles
// its release before the admission it sent next on the same connection.
// With a handler per subject the two ran concurrently, and the admission
// was refused for the bytes just given back (most tries at GOMAXPROCS=1).
func TestAbortThenBeginAgain(t *testing.T) {
	url, shm := startLeaseSidecar(t, 1000, time.Minute)
	p := leaseProducer(t, url, shm, "again")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := Spec{Run: "r", Var: "v", DType: fz.Float32, Dims: []uint64{200}, Mode: fz.Abs, Bound: 0.1} // 800 bytes
	const tries = 200
	refused := 0
	var first error
	for range tries {
		s, err := p.Begin(ctx, spec)
		if err != nil {
			if !errors.Is(err, ErrBudgetFull) {
				t.Fatal(err)
			}
			refused++
			first = cmp.Or(first, err)
			waitReleased(ctx, t, p, "the release")
			continue
		}
		if err := s.Abort(); err != nil {
			t.Fatal(err)
		}
	}
	if refused > 0 {
		t.Fatalf("%d of %d admissions right after the producer's own abort refused; first: %v", refused, tries, first)
	}
}
