package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// ProducerOptions configure a Producer.
type ProducerOptions struct {
	// ID names this producer in subjects and segment names; default
	// <hostname>-<pid>. Results are addressed to it.
	ID       string
	Subjects Subjects
	// ShmDir must be the sidecar's --shm-dir.
	ShmDir string
	// Policy is what Begin does when the sidecar's budget is full.
	Policy Policy
	// BlockTimeout bounds a Block wait (default 1 minute).
	BlockTimeout time.Duration
	// PollInterval is how often results not seen live are looked up in the
	// result stream (they can be missed while reconnecting). Default 2s.
	PollInterval time.Duration
	// ReuseSegments is how many segments whose result has arrived are kept
	// for later snapshots of the same size instead of being removed
	// (default 0: a new file per snapshot). Reuse is what a simulation with
	// steady output wants: refilling existing pages is ~7x faster than
	// faulting in a fresh tmpfs file, and a GPU sidecar keeps a reused
	// segment registered as pinned memory, so its copy to the device runs at
	// the full PCIe rate (docs/PROTOCOL.md section 2, docs/PIPELINE.md).
	ReuseSegments int
	Log           *slog.Logger
}

// Spec describes a snapshot to publish.
type Spec struct {
	Run, Var string
	Step     uint64
	DType    fz.DType
	Dims     []uint64 // slowest → fastest
	Mode     fz.Mode
	Bound    float64
	Fill     *float64
}

// Producer publishes snapshots to a sidecar. It is safe for concurrent use.
type Producer struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	opts ProducerOptions
	log  *slog.Logger
	sub  *nats.Subscription

	mu        sync.Mutex
	pending   map[string]*Pending
	spare     []*Segment // finished segments kept for reuse (ReuseSegments)
	callbacks []func(Result)
	closed    bool
	done      chan struct{}
	wg        sync.WaitGroup
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// defaultIDs counts the default ids handed out in this process.
var defaultIDs atomic.Int64

// DefaultProducerID is <hostname>-<pid> with unsafe characters replaced;
// each later call in the process appends a counter (<hostname>-<pid>-2,
// -3, ...), so two producers of one process never share an id (they would
// share results' subjects and each other's segment names).
func DefaultProducerID() string {
	h, _ := os.Hostname()
	id := unsafeID.ReplaceAllString(h, "_")
	if len(id) > 100 {
		id = id[:100]
	}
	if n := defaultIDs.Add(1); n > 1 {
		return fmt.Sprintf("%s-%d-%d", id, os.Getpid(), n)
	}
	return fmt.Sprintf("%s-%d", id, os.Getpid())
}

// NewProducer starts receiving results on nc; nc should reconnect forever
// (Connect sets that up).
func NewProducer(ctx context.Context, nc *nats.Conn, o ProducerOptions) (*Producer, error) {
	if o.ID == "" {
		o.ID = DefaultProducerID()
	}
	if !ValidToken(o.ID) {
		return nil, fmt.Errorf("producer id %q: expected 1-128 characters of A-Z a-z 0-9 _ -", o.ID)
	}
	if o.ShmDir == "" {
		o.ShmDir = DefaultShmDir
	}
	if o.BlockTimeout <= 0 {
		o.BlockTimeout = time.Minute
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	p := &Producer{nc: nc, js: js, opts: o, log: o.Log, pending: map[string]*Pending{}, done: make(chan struct{})}
	p.sub, err = nc.Subscribe(o.Subjects.ProducerResults(o.ID), p.onResult)
	if err != nil {
		return nil, fmt.Errorf("subscribe to results: %w", err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		p.sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to results: %w", err)
	}
	p.wg.Add(1)
	go p.poll()
	return p, nil
}

// ID is the producer id.
func (p *Producer) ID() string { return p.opts.ID }

// OnResult registers fn to be called (from a library goroutine) with every
// result this producer receives, after the matching Pending is resolved.
func (p *Producer) OnResult(fn func(Result)) {
	p.mu.Lock()
	p.callbacks = append(p.callbacks, fn)
	p.mu.Unlock()
}

// Close stops receiving results and removes the segments of snapshots still
// pending (removal is safe for the sidecar; the results will not be seen).
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	pend := p.pending
	p.pending = map[string]*Pending{}
	p.mu.Unlock()
	close(p.done)
	err := p.sub.Unsubscribe()
	p.wg.Wait()
	for _, pd := range pend {
		pd.resolve(nil, errors.New("producer closed before the result arrived"))
	}
	p.mu.Lock()
	spare := p.spare
	p.spare = nil
	p.mu.Unlock()
	for _, seg := range spare {
		seg.Remove()
	}
	return err
}

// segment returns a spare segment of exactly size bytes (reused), or a new
// one.
func (p *Producer) segment(size int64) (seg *Segment, reused bool, err error) {
	p.mu.Lock()
	for i, seg := range p.spare {
		if int64(len(seg.Bytes())) == size {
			p.spare = append(p.spare[:i], p.spare[i+1:]...)
			p.mu.Unlock()
			return seg, true, nil
		}
	}
	p.mu.Unlock()
	seg, err = CreateSegment(p.opts.ShmDir, p.opts.ID, size)
	return seg, false, err
}

// recycle keeps a segment whose result has arrived for reuse, or removes
// it. The oldest spare goes first when the pool is full.
func (p *Producer) recycle(seg *Segment) {
	p.mu.Lock()
	if p.opts.ReuseSegments <= 0 || p.closed || len(seg.Bytes()) == 0 {
		p.mu.Unlock()
		seg.Remove()
		return
	}
	p.spare = append(p.spare, seg)
	var drop *Segment
	if len(p.spare) > p.opts.ReuseSegments {
		drop = p.spare[0]
		p.spare = p.spare[1:]
	}
	p.mu.Unlock()
	if drop != nil {
		drop.Remove()
	}
}

// Snapshot is an admitted snapshot whose segment the caller fills in place.
type Snapshot struct {
	p      *Producer
	n      Notification
	seg    *Segment
	policy Policy
	used   bool
	reused bool
	lease  *leaseKeeper
}

// Begin asks the sidecar for budget (per the producer's policy) and creates
// a segment of the snapshot's exact size. Fill it through Float32, Float64
// or Bytes, then Publish. With policy Fail and a full budget it returns an
// error matching ErrBudgetFull at once.
func (p *Producer) Begin(ctx context.Context, s Spec) (*Snapshot, error) {
	return p.BeginWithPolicy(ctx, s, p.opts.Policy)
}

// BeginWithPolicy is Begin with a per-snapshot policy.
func (p *Producer) BeginWithPolicy(ctx context.Context, s Spec, pol Policy) (*Snapshot, error) {
	n := Notification{
		Version: ProtocolVersion, MsgID: p.opts.ID + "-" + nuid.Next(), Producer: p.opts.ID,
		Run: s.Run, Var: s.Var, Step: s.Step, DType: s.DType.String(), Dims: append([]uint64(nil), s.Dims...),
		Mode: s.Mode.String(), Bound: s.Bound, Segment: "pending",
	}
	if s.Fill != nil {
		f := Float(*s.Fill)
		n.Fill = &f
	}
	if s.DType.Size() == 0 {
		return nil, fmt.Errorf("invalid dtype %v: expected f32 or f64", s.DType)
	}
	elems, err := fz.NumElements(s.Dims)
	if err != nil {
		return nil, err
	}
	n.Length = int64(elems) * int64(s.DType.Size())
	if _, err := n.Validate(); err != nil {
		return nil, err
	}
	lease, err := p.admit(ctx, n.MsgID, n.Length, pol)
	if err != nil {
		return nil, err
	}
	seg, reused, err := p.segment(n.Length)
	if err != nil {
		p.releaseLease(n.MsgID)
		return nil, err
	}
	n.Segment = seg.Name()
	snap := &Snapshot{p: p, n: n, seg: seg, policy: pol, reused: reused, lease: p.keepLease(n.MsgID, n.Length, lease)}
	// A snapshot dropped without Publish or Abort stops renewing once it
	// is garbage (its segment is then unreachable too).
	runtime.AddCleanup(snap, func(k *leaseKeeper) { k.stop() }, snap.lease)
	return snap, nil
}

// Reused says the segment is one of the producer's spares
// (ReuseSegments): it still holds what was last written into it, where a
// new segment is all zeros.
func (s *Snapshot) Reused() bool { return s.reused }

// Notification is what Publish will send (segment and sizes filled in).
func (s *Snapshot) Notification() Notification { return s.n }

// Bytes is the raw segment (little-endian elements).
func (s *Snapshot) Bytes() []byte { return s.seg.Bytes() }

// Float32 is the segment as float32 values, or nil if the dtype is f64.
func (s *Snapshot) Float32() []float32 {
	if s.n.DType != fz.Float32.String() {
		return nil
	}
	return s.seg.Float32()
}

// Float64 is the segment as float64 values, or nil if the dtype is f32.
func (s *Snapshot) Float64() []float64 {
	if s.n.DType != fz.Float64.String() {
		return nil
	}
	return s.seg.Float64()
}

// Abort gives the admission back and removes the segment without publishing.
func (s *Snapshot) Abort() error {
	if s.used {
		return errors.New("snapshot already published")
	}
	s.used = true
	s.lease.stop()
	s.p.releaseLease(s.n.MsgID)
	return s.seg.Remove()
}

// Publish announces the snapshot and returns a handle for its result. The
// segment must not be written after this; the library removes it when the
// result arrives. Publishing retries with the same message id until the
// stream accepts it or ctx ends, so a server restart neither loses nor
// duplicates the snapshot.
func (s *Snapshot) Publish(ctx context.Context) (*Pending, error) {
	if s.used {
		return nil, errors.New("snapshot already published or aborted")
	}
	p := s.p
	data, err := json.Marshal(&s.n)
	if err != nil {
		return nil, err
	}
	pd := &Pending{n: s.n, seg: s.seg, p: p, done: make(chan struct{}), sent: time.Now()}
	// Register first: the result can arrive before Publish returns.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("producer closed")
	}
	p.pending[s.n.MsgID] = pd
	p.mu.Unlock()
	s.used = true
	// No renewal may reach the sidecar after the notification: one that
	// arrived after the result would hold the bytes again for a lease.
	s.lease.stop()
	if err := p.publish(ctx, p.opts.Subjects.Snapshot(p.opts.ID), s.n.MsgID, data); err != nil {
		p.mu.Lock()
		delete(p.pending, s.n.MsgID)
		p.mu.Unlock()
		// Not in the stream (or unknown): keep the segment, in case it was
		// stored after all, only if the caller retries; here we give it up.
		p.releaseLease(s.n.MsgID)
		s.seg.Remove()
		return nil, err
	}
	return pd, nil
}

func (p *Producer) publish(ctx context.Context, subj, msgID string, data []byte) error {
	delay := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := p.js.Publish(actx, subj, data, jetstream.WithMsgID(msgID),
			jetstream.WithRetryAttempts(0))
		cancel()
		if err == nil {
			return nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			// The stream answered and refused (full, message too large):
			// retrying the same message will not help.
			return fmt.Errorf("publish snapshot %s: %w", msgID, err)
		}
		if errors.Is(err, nats.ErrConnectionClosed) {
			return fmt.Errorf("publish snapshot %s: %w", msgID, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publish snapshot %s: %w (last error: %v)", msgID, context.Cause(ctx), err)
		}
		p.log.Debug("publish failed, retrying with the same message id", "msg_id", msgID, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// admit performs the budget admission request/reply and returns the
// lease the sidecar granted (0 if it named none).
func (p *Producer) admit(ctx context.Context, msgID string, n int64, pol Policy) (time.Duration, error) {
	deadline := time.Now().Add(p.opts.BlockTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		wait := time.Until(deadline)
		if pol == Fail {
			wait = 0
		}
		// Long waits go in slices so a sidecar that dies meanwhile is noticed.
		slice := min(wait, 10*time.Second)
		req := AdmitRequest{Version: ProtocolVersion, MsgID: msgID, Producer: p.opts.ID, Bytes: n,
			Policy: pol.String(), TimeoutMS: slice.Milliseconds()}
		data, _ := json.Marshal(&req)
		rctx, cancel := context.WithTimeout(ctx, slice+5*time.Second)
		msg, err := p.nc.RequestWithContext(rctx, p.opts.Subjects.Admit(), data)
		cancel()
		retry := false
		if err != nil {
			if ctx.Err() != nil {
				return 0, fmt.Errorf("admission: %w", context.Cause(ctx))
			}
			if pol == Fail || time.Now().After(deadline) {
				return 0, errorf(CodeUnavailable, "no sidecar answered the admission request on %s: %v", p.opts.Subjects.Admit(), err)
			}
			retry = true
		} else {
			var rep AdmitReply
			if err := json.Unmarshal(msg.Data, &rep); err != nil {
				return 0, fmt.Errorf("admission reply is not valid JSON: %w", err)
			}
			if rep.Granted {
				return time.Duration(rep.LeaseMS) * time.Millisecond, nil
			}
			if rep.Error == nil {
				return 0, errorf(CodeInternal, "admission refused without a reason")
			}
			if rep.Error.Code != CodeBudgetFull || pol == Fail || time.Now().After(deadline) {
				return 0, rep.Error
			}
			retry = true
		}
		if retry {
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("admission: %w", context.Cause(ctx))
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

// leaseKeeper renews an admission's lease (PROTOCOL.md §3) while its
// snapshot is begun and not yet published: a fill that takes longer than
// the lease would otherwise see its bytes given to other producers while
// its segment still occupies them, and the budget would run over when its
// notification is counted. A renewal repeats the admission with the same
// msg_id (policy fail: granted again at once, never counted twice) every
// half lease.
type leaseKeeper struct {
	mu      sync.Mutex // held while a renewal is in flight, so stop waits for it
	stopped bool
	timer   *time.Timer
}

func (p *Producer) keepLease(msgID string, n int64, lease time.Duration) *leaseKeeper {
	k := &leaseKeeper{}
	if lease <= 0 {
		k.stopped = true // a sidecar that grants no lease needs no renewal
		return k
	}
	var renew func()
	renew = func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if k.stopped || closed {
			return
		}
		if got, err := p.renewLease(msgID, n, max(min(lease/4, 5*time.Second), 100*time.Millisecond)); err != nil {
			if errors.Is(err, nats.ErrConnectionClosed) {
				k.stopped = true
				return
			}
			p.log.Warn("admission lease not renewed; the sidecar may give this snapshot's budget to others until it is published",
				"msg_id", msgID, "bytes", n, "err", err)
		} else if got > 0 {
			lease = got
		}
		k.timer = time.AfterFunc(lease/2, renew)
	}
	k.timer = time.AfterFunc(lease/2, renew)
	return k
}

// stop ends the renewals; a renewal in flight finishes first.
func (k *leaseKeeper) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	if k.timer != nil {
		k.timer.Stop()
	}
}

// renewLease repeats msgID's admission (PROTOCOL.md §3) and returns the
// lease granted.
func (p *Producer) renewLease(msgID string, n int64, timeout time.Duration) (time.Duration, error) {
	data, _ := json.Marshal(&AdmitRequest{Version: ProtocolVersion, MsgID: msgID, Producer: p.opts.ID, Bytes: n,
		Policy: Fail.String(), Renew: true})
	msg, err := p.nc.Request(p.opts.Subjects.Admit(), data, timeout)
	if err != nil {
		return 0, err
	}
	var rep AdmitReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return 0, fmt.Errorf("admission reply is not valid JSON: %w", err)
	}
	if !rep.Granted {
		if rep.Error == nil {
			return 0, errorf(CodeInternal, "admission refused without a reason")
		}
		return 0, rep.Error
	}
	return time.Duration(rep.LeaseMS) * time.Millisecond, nil
}

func (p *Producer) releaseLease(msgID string) {
	data, _ := json.Marshal(&ReleaseRequest{Version: ProtocolVersion, MsgID: msgID})
	_ = p.nc.Publish(p.opts.Subjects.Release(), data)
}

func (p *Producer) onResult(m *nats.Msg) {
	var r Result
	if err := json.Unmarshal(m.Data, &r); err != nil {
		p.log.Warn("unreadable result", "subject", m.Subject, "err", err)
		return
	}
	p.deliver(r)
}

func (p *Producer) deliver(r Result) {
	p.mu.Lock()
	pd, ok := p.pending[r.MsgID]
	delete(p.pending, r.MsgID)
	cbs := p.callbacks
	p.mu.Unlock()
	if !ok {
		return // a duplicate (redelivery) or another process with our id
	}
	pd.resolve(&r, nil)
	for _, cb := range cbs {
		cb(r)
	}
}

// poll looks up results of snapshots pending for a while in the result
// stream: a result published while we were reconnecting never reaches the
// live subscription.
func (p *Producer) poll() {
	defer p.wg.Done()
	t := time.NewTicker(p.opts.PollInterval)
	defer t.Stop()
	var stream jetstream.Stream
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		p.mu.Lock()
		var old []*Pending
		for _, pd := range p.pending {
			if time.Since(pd.sent) > p.opts.PollInterval {
				old = append(old, pd)
			}
		}
		p.mu.Unlock()
		if len(old) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.PollInterval)
		if stream == nil {
			s, err := p.js.Stream(ctx, p.opts.Subjects.ResultStream())
			if err != nil {
				cancel()
				continue
			}
			stream = s
		}
		for _, pd := range old {
			m, err := stream.GetLastMsgForSubject(ctx, p.opts.Subjects.Result(p.opts.ID, pd.n.MsgID))
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgNotFound) {
					break
				}
				continue
			}
			var r Result
			if json.Unmarshal(m.Data, &r) == nil && r.MsgID == pd.n.MsgID {
				p.deliver(r)
			}
		}
		cancel()
	}
}

// Pending is a published snapshot awaiting its result.
type Pending struct {
	n    Notification
	seg  *Segment
	p    *Producer
	sent time.Time
	done chan struct{}
	once sync.Once
	res  *Result
	err  error
}

// Notification is what was published.
func (pd *Pending) Notification() Notification { return pd.n }

// Done is closed when the result has arrived.
func (pd *Pending) Done() <-chan struct{} { return pd.done }

func (pd *Pending) resolve(r *Result, err error) {
	pd.once.Do(func() {
		// A result means the sidecar will never read these bytes again, so
		// the segment can go or be reused. Without one (closing) it may
		// still be reading: removing is safe, rewriting is not.
		if r != nil && pd.p != nil {
			pd.p.recycle(pd.seg)
		} else {
			_ = pd.seg.Remove()
		}
		pd.res, pd.err = r, err
		close(pd.done)
	})
}

// Wait blocks until the result arrives or ctx ends. A result that reports
// an error is returned together with that error (an *Error).
func (pd *Pending) Wait(ctx context.Context) (*Result, error) {
	select {
	case <-pd.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for result of %s/%s step %d: %w", pd.n.Run, pd.n.Var, pd.n.Step, context.Cause(ctx))
	}
	if pd.err != nil {
		return nil, pd.err
	}
	return pd.res, pd.res.Err()
}

// PublishFile copies a raw little-endian file into a new segment, publishes
// it and returns the pending result. The file must hold exactly the bytes
// the spec's dims and dtype describe.
func (p *Producer) PublishFile(ctx context.Context, path string, s Spec) (*Pending, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	params := fz.Params{DType: s.DType, Dims: s.Dims, Mode: s.Mode, Bound: s.Bound, Fill: s.Fill}
	if err := params.Validate(st.Size()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	snap, err := p.Begin(ctx, s)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(f, snap.Bytes()); err != nil {
		snap.Abort()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return snap.Publish(ctx)
}

// Status asks the sidecar for its current load.
func (p *Producer) Status(ctx context.Context) (*Status, error) {
	m, err := p.nc.RequestWithContext(ctx, p.opts.Subjects.Status(), nil)
	if err != nil {
		return nil, fmt.Errorf("sidecar status: %w", err)
	}
	var st Status
	if err := json.Unmarshal(m.Data, &st); err != nil {
		return nil, fmt.Errorf("sidecar status: %w", err)
	}
	return &st, nil
}
