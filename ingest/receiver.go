package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLeaseTTL is how long an admission is reserved before its
// notification must arrive, unless configured.
const DefaultLeaseTTL = time.Minute

// ReceiverConfig configures the sidecar's receiving side.
type ReceiverConfig struct {
	Subjects Subjects
	ShmDir   string
	Streams  StreamConfig
	// Budget is the in-flight byte budget (also the largest snapshot).
	Budget int64
	// MaxBlock caps how long a blocking admission may wait, whatever the
	// producer asks for.
	MaxBlock time.Duration
	// LeaseTTL is how long an admission stays reserved without its
	// notification (the time a producer may take to fill a segment;
	// default DefaultLeaseTTL). Short, so that an admission whose producer
	// died or stalls cannot starve everyone; a producer needing longer
	// renews it by repeating the admission with the same msg_id.
	LeaseTTL time.Duration
	// AckWait is the JetStream redelivery timer; jobs in progress are kept
	// alive automatically, so it only matters when the sidecar dies.
	AckWait time.Duration
	// MaxInFlight is how many snapshots may be handed out at once; it is also
	// the consumer's MaxAckPending, so the server enforces it too.
	MaxInFlight int
	// MaxDeliver > 0 bounds deliveries: a snapshot failing transiently on
	// its last delivery gets an error result (Job.LastDelivery), and one
	// delivered more often (the sidecar died on it each time) is refused
	// with an error result. 0 retries without end.
	MaxDeliver int
	// ReclaimAfter is how long a segment must have lain unused before the
	// sidecar may remove it as orphaned by a producer that died (see
	// reclaim.go for the full rule); 0 means DefaultReclaimAfter, < 0 never.
	ReclaimAfter time.Duration
	Log          *slog.Logger
	// OnReject, if set, is called for every notification answered with an
	// error before it became a Job (metrics).
	OnReject func(code Code)
	// Features are advertised in the status reply; FeatureCUDAIPC also
	// admits notifications naming GPU memory (refused otherwise).
	Features []string
}

func (c *ReceiverConfig) defaults() {
	if c.ShmDir == "" {
		c.ShmDir = DefaultShmDir
	}
	if c.Budget <= 0 {
		c.Budget = 4 << 30
	}
	if c.MaxBlock <= 0 {
		c.MaxBlock = 10 * time.Minute
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.ReclaimAfter == 0 {
		c.ReclaimAfter = DefaultReclaimAfter
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 1
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Receiver takes snapshot notifications from JetStream, validates them and
// hands them out as Jobs; it also answers budget admissions.
type Receiver struct {
	cfg    ReceiverConfig
	nc     *nats.Conn
	js     jetstream.JetStream
	cons   jetstream.Consumer
	shm    *ShmDir
	budget *Budget
	log    *slog.Logger
	subs   []*nats.Subscription
	slots  chan struct{}
	active atomic.Int64 // jobs handed out and not finished
	wg     sync.WaitGroup
	admits chan struct{}
	// base bounds admission waits, which belong to no request context.
	base      context.Context
	cancel    context.CancelFunc
	snap      jetstream.Stream // the snapshot stream (reclaim.go reads it)
	reclaimed atomic.Int64     // orphaned segments removed (reclaim.go)
	// consumerGone and consumersRecreated: see watchConsumer (streams.go).
	consumerGone       atomic.Bool
	consumersRecreated atomic.Int64
}

// NewReceiver sets up streams, the durable consumer and the admission
// responder on nc.
func NewReceiver(ctx context.Context, nc *nats.Conn, cfg ReceiverConfig) (*Receiver, error) {
	cfg.defaults()
	if !ValidToken(cfg.Subjects.prefix()) {
		return nil, fmt.Errorf("subject prefix %q: expected 1-128 characters of A-Z a-z 0-9 _ -", cfg.Subjects.Prefix)
	}
	shm, err := OpenShmDir(cfg.ShmDir)
	if err != nil {
		return nil, err
	}
	r := &Receiver{cfg: cfg, nc: nc, shm: shm, budget: NewBudget(cfg.Budget), log: cfg.Log,
		slots: make(chan struct{}, cfg.MaxInFlight), admits: make(chan struct{}, 20000)}
	r.base, r.cancel = context.WithCancel(context.Background())
	if err := r.setup(ctx); err != nil {
		r.Close()
		return nil, err
	}
	if cfg.ReclaimAfter > 0 {
		r.wg.Add(1)
		go r.reclaimLoop(min(max(cfg.ReclaimAfter/2, 500*time.Millisecond), time.Minute))
	}
	return r, nil
}

func (r *Receiver) setup(ctx context.Context) error {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return err
	}
	r.js = js
	snap, _, err := EnsureStreams(ctx, js, r.cfg.Subjects, r.cfg.Streams)
	if err != nil {
		return err
	}
	r.snap = snap
	err = retryJS(ctx, func(ctx context.Context) (err error) {
		r.cons, err = snap.CreateOrUpdateConsumer(ctx, consumerConfig(r.cfg))
		return err
	})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	r.wg.Add(1)
	go r.watchConsumer() // streams.go: recreated if an administrator deletes it
	// After a restart the budget starts empty, but producers still hold the
	// segments of every queued notification: count them before admitting.
	var queued, bytes int64
	err = queuedNotifications(ctx, snap, r.cfg.Subjects, func(m *jetstream.RawStreamMsg) {
		n, _, _, err := DecodeNotification(m.Data)
		if err == nil {
			r.budget.Charge(n.MsgID, n.HostBytes())
			queued++
			bytes += n.HostBytes()
		}
	})
	if err != nil {
		return fmt.Errorf("count queued snapshots: %w", err)
	}
	if queued > 0 {
		r.log.Info("snapshots queued from before the restart", "count", queued, "bytes", bytes)
	}
	// Admissions and releases share one channel, filled by the
	// connection's reader in the order the server delivered them, and one
	// handler: a producer's release is then handled before the admission
	// it sent next. (With a handler per subject the two ran concurrently,
	// and "abort, then begin again" under policy fail was refused for the
	// budget the producer had just given back.)
	budgetMsgs := make(chan *nats.Msg, 1<<16)
	for _, subj := range []string{r.cfg.Subjects.Admit(), r.cfg.Subjects.Release()} {
		sub, err := r.nc.ChanQueueSubscribe(subj, "fzsidecar", budgetMsgs)
		if err != nil {
			return err
		}
		r.subs = append(r.subs, sub)
	}
	r.wg.Add(1)
	go r.handleBudgetMsgs(budgetMsgs)
	sub, err := r.nc.Subscribe(r.cfg.Subjects.Status(), r.onStatus)
	if err != nil {
		return err
	}
	r.subs = append(r.subs, sub)
	return r.nc.FlushWithContext(ctx)
}

// Budget exposes the in-flight budget (for metrics and tests).
func (r *Receiver) Budget() *Budget { return r.budget }

// ShmDir is the directory segments are mapped from.
func (r *Receiver) ShmDir() *ShmDir { return r.shm }

// Close stops admissions and waits for handlers; jobs already handed out
// stay valid until completed.
func (r *Receiver) Close() {
	r.cancel()
	for _, s := range r.subs {
		_ = s.Drain()
	}
	r.wg.Wait()
	if r.shm != nil {
		r.shm.Close()
	}
}

// Run hands out jobs on out until ctx ends, then closes out. It fetches a
// notification only when fewer than MaxInFlight jobs are outstanding, so a
// slow pipeline stops consumption and the queue grows in JetStream (on
// disk), never in memory.
func (r *Receiver) Run(ctx context.Context, out chan<- *Job) error {
	defer close(out)
	for {
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		var msg jetstream.Msg
		for msg == nil {
			if ctx.Err() != nil {
				<-r.slots
				return nil
			}
			m, err := r.cons.Next(jetstream.FetchMaxWait(time.Second))
			switch {
			case err == nil:
				msg = m
			case errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrNoMessages):
			default:
				// Server restarts and the like: wait and try again.
				r.log.Warn("fetch snapshot notification", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		}
		job := r.accept(ctx, msg)
		if job == nil {
			<-r.slots
			continue
		}
		select {
		case out <- job:
		case <-ctx.Done():
			job.HandBack(fmt.Errorf("sidecar shutting down"))
			return nil
		}
	}
}

// accept validates a notification. Bad ones are answered and acked here;
// good ones become a Job.
func (r *Receiver) accept(ctx context.Context, msg jetstream.Msg) *Job {
	delivered := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		delivered = md.NumDelivered
	}
	n, p, rt, err := DecodeNotification(msg.Data())
	j := &Job{Notice: n, Params: p, Delivered: delivered, Received: time.Now(), r: r, msg: msg}
	if err != nil {
		// Unreadable bodies can still be answered: the subject names the
		// producer (never the body: see subjectProducer) and the dedup
		// header the message.
		rt.Producer = r.subjectProducer(msg.Subject())
		if rt.MsgID == "" {
			if h := msg.Headers().Get(jetstream.MsgIDHeader); ValidToken(h) {
				rt.MsgID = h
			}
		}
		j.route = rt
		r.log.Warn("rejected snapshot notification", "producer", rt.Producer, "msg_id", rt.MsgID, "subject", msg.Subject(), "err", err)
		r.reject(ctx, j, AsError(err))
		return nil
	}
	if sp := r.subjectProducer(msg.Subject()); sp != n.Producer {
		j.route = Route{sp, n.MsgID} // answer the sender, not the producer it names
		r.log.Warn("rejected snapshot notification: producer differs from its subject", "producer", n.Producer, "subject", msg.Subject())
		r.reject(ctx, j, errorf(CodeInvalid, "producer %q differs from the subject %s: a producer publishes on %s.snap.<its own id>",
			n.Producer, msg.Subject(), r.cfg.Subjects.prefix()))
		return nil
	}
	j.route = Route{n.Producer, n.MsgID}
	// JetStream deduplicates on the header, results are matched on the
	// body's msg_id: they must be one value, or a retry could be stored
	// twice while its producer waits for a result that never comes
	// (docs/PROTOCOL.md section 4).
	if hdr := msg.Headers().Get(jetstream.MsgIDHeader); hdr != n.MsgID {
		r.log.Warn("rejected snapshot notification: Nats-Msg-Id differs from msg_id", "header", hdr, "msg_id", n.MsgID)
		r.reject(ctx, j, errorf(CodeInvalid, "header Nats-Msg-Id %q differs from the body's msg_id %q: publish with Nats-Msg-Id equal to msg_id", hdr, n.MsgID))
		return nil
	}
	if n.Device != nil && !slices.Contains(r.cfg.Features, FeatureCUDAIPC) {
		r.reject(ctx, j, errorf(CodeDeviceUnsupported, "this sidecar does not read GPU memory (its status reply does not list the %q feature): run `fzsidecar serve --backend gpu` on the GPU's node, or publish through a shared-memory segment", FeatureCUDAIPC))
		return nil
	}
	if n.HostBytes() > r.budget.Limit() {
		r.reject(ctx, j, errorf(CodeTooLarge, "snapshot of %d bytes exceeds the in-flight budget of %d bytes", n.Length, r.budget.Limit()))
		return nil
	}
	if r.cfg.MaxDeliver > 0 && delivered > uint64(r.cfg.MaxDeliver) {
		r.log.Error("giving up on snapshot delivered too often", "msg_id", n.MsgID, "deliveries", delivered)
		r.reject(ctx, j, errorf(CodeInternal, "gave up after %d deliveries without a result", delivered-1))
		return nil
	}
	r.budget.Charge(n.MsgID, n.HostBytes())
	j.startKeepAlive(r.cfg.AckWait)
	r.active.Add(1)
	return j
}

func (r *Receiver) reject(ctx context.Context, j *Job, e *Error) {
	j.finish(ctx, Result{Error: e})
	if r.cfg.OnReject != nil {
		r.cfg.OnReject(e.Code)
	}
}

// InFlight is the number of jobs handed out and not yet finished.
func (r *Receiver) InFlight() int { return int(r.active.Load()) }

// Job is one validated snapshot. The pipeline ends it with exactly one of
// Complete, Fail, Retry (transient trouble) or HandBack (shutdown).
type Job struct {
	Notice    Notification
	Params    fz.Params
	Delivered uint64 // 1 on first delivery; more after a restart or retry
	Received  time.Time

	r     *Receiver
	msg   jetstream.Msg
	route Route
	stop  chan struct{}
	once  sync.Once
}

// Map maps the snapshot's bytes read-only after checking the segment.
func (j *Job) Map() (*Mapping, error) {
	return j.r.shm.Map(j.Notice.Segment, j.Notice.Offset, j.Notice.Length)
}

// Outcome is what the pipeline reports for a stored snapshot.
type Outcome struct {
	Key   string
	Stats fz.Stats
	// GPUSeconds: a GPU-resident snapshot's device work (Result.GPUSeconds).
	GPUSeconds float64
}

// Complete answers success and acks: call it only after the sink committed.
func (j *Job) Complete(ctx context.Context, o Outcome) error {
	st := o.Stats
	return j.finish(ctx, Result{OK: true, Key: o.Key, RawBytes: st.RawBytes, CompressedBytes: st.CompressedBytes,
		Ratio: Float(st.Ratio()), AbsEB: Float(st.AbsEB), MaxAbsErr: Float(st.MaxAbsErr), GPUSeconds: o.GPUSeconds})
}

// Fail answers a permanent error and acks: the snapshot will not be retried.
func (j *Job) Fail(ctx context.Context, err error) error {
	e := AsError(err)
	j.r.log.Warn("snapshot failed", "producer", j.route.Producer, "msg_id", j.route.MsgID,
		"run", j.Notice.Run, "var", j.Notice.Var, "step", j.Notice.Step, "code", e.Code, "err", e.Message)
	return j.finish(ctx, Result{Error: e})
}

// LastDelivery reports whether this is the last delivery MaxDeliver allows:
// a transient failure now must be answered with an error result instead of
// being handed back (the next delivery would only be refused).
func (j *Job) LastDelivery() bool {
	return j.r.cfg.MaxDeliver > 0 && j.Delivered >= uint64(j.r.cfg.MaxDeliver)
}

// RetryDelay is how long a snapshot handed back after delivery n waits
// before JetStream delivers it again: 1 s, doubling per delivery, at most
// 30 s.
func RetryDelay(n uint64) time.Duration {
	if n < 1 {
		n = 1
	}
	return min(time.Second<<min(n-1, 5), 30*time.Second) // 1, 2, 4, 8, 16, 30 s
}

// Retry hands the snapshot back to JetStream for a later attempt after a
// transient failure (an unreachable or full sink), with a growing delay
// (RetryDelay). No reply is sent, and the snapshot keeps its budget hold:
// the producer still holds its segment while it waits.
func (j *Job) Retry(cause error) {
	j.handBack(RetryDelay(j.Delivered), cause, "snapshot will be retried")
}

// HandBack returns an unfinished snapshot to JetStream for immediate
// redelivery (shutdown): a restarted sidecar, or another one on the same
// stream, takes it up at once instead of after the ack wait.
func (j *Job) HandBack(cause error) {
	j.handBack(0, cause, "snapshot handed back")
}

func (j *Job) handBack(delay time.Duration, cause error, what string) {
	j.once.Do(func() {
		j.stopKeepAlive()
		j.r.log.Warn(what, "msg_id", j.route.MsgID, "delivery", j.Delivered, "in", delay, "err", cause)
		// A NAK with a delay, also 0: the server then records the
		// redelivery time in the consumer's stored state (a plain NAK only
		// queues it in memory, so a server restarted meanwhile would wait
		// the whole ack wait), and it is sent as a request, so we know the
		// server has it before shutdown closes the connection.
		if err := j.nak(delay); err != nil {
			j.r.log.Warn("nak failed; JetStream redelivers after the ack wait", "msg_id", j.route.MsgID, "err", err)
		}
		if j.stop != nil {
			j.r.active.Add(-1)
			<-j.r.slots
		}
	})
}

// finish publishes the result durably, then acks. A crash between the two
// only causes a redelivery, which the idempotent sink put and the result
// stream's deduplication absorb.
func (j *Job) finish(ctx context.Context, res Result) error {
	var ferr error
	j.once.Do(func() {
		unanswered := false // the producer still waits, holding its segment
		defer func() {
			j.stopKeepAlive()
			if j.route.MsgID != "" && !unanswered {
				j.r.budget.Release(j.route.MsgID)
			}
			if j.stop != nil { // handed-out jobs hold a slot
				j.r.active.Add(-1)
				<-j.r.slots
			}
		}()
		// Answer even during shutdown: the work is done and must not be lost.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		res.Version = ProtocolVersion
		res.Producer, res.MsgID = j.route.Producer, j.route.MsgID
		res.Run, res.Var, res.Step = j.Notice.Run, j.Notice.Var, j.Notice.Step
		res.Seconds = time.Since(j.Received).Seconds()
		if res.Producer != "" && res.MsgID != "" {
			data, err := json.Marshal(&res)
			if err != nil {
				ferr = fmt.Errorf("encode result: %w", err)
				return
			}
			subj := j.r.cfg.Subjects.Result(res.Producer, res.MsgID)
			if _, err := j.r.js.Publish(ctx, subj, data, jetstream.WithMsgID(res.MsgID)); err != nil {
				// Hand it back for a later delivery (after AckWait if even
				// the NAK fails); it keeps its budget hold meanwhile, and
				// MaxDeliver bounds how often this can happen.
				unanswered = true
				ferr = fmt.Errorf("publish result for %s: %w", res.MsgID, err)
				j.r.log.Error("result not published; snapshot will be redelivered", "msg_id", res.MsgID, "err", err)
				if err := j.nak(RetryDelay(j.Delivered)); err != nil {
					j.r.log.Warn("nak failed; JetStream redelivers after the ack wait", "msg_id", res.MsgID, "err", err)
				}
				return
			}
		}
		if err := j.msg.DoubleAck(ctx); err != nil {
			ferr = fmt.Errorf("ack snapshot %s: %w", res.MsgID, err)
			j.r.log.Warn("ack not confirmed; a redelivery will be answered again", "msg_id", res.MsgID, "err", err)
		}
	})
	return ferr
}

// nak hands the message back with a redelivery delay and waits until the
// server confirms it (an ack with a reply subject is answered once
// processed), so that a shutdown right after cannot lose it.
func (j *Job) nak(delay time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body := fmt.Appendf(nil, "-NAK {\"delay\": %d}", delay.Nanoseconds())
	_, err := j.r.nc.RequestWithContext(ctx, j.msg.Reply(), body)
	return err
}

// startKeepAlive tells JetStream the job is still being worked on, so a long
// compression is not redelivered to someone else meanwhile.
func (j *Job) startKeepAlive(ackWait time.Duration) {
	j.stop = make(chan struct{})
	every := max(ackWait/3, 100*time.Millisecond)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-j.stop:
				return
			case <-t.C:
				_ = j.msg.InProgress()
			}
		}
	}()
}

func (j *Job) stopKeepAlive() {
	if j.stop != nil {
		select {
		case <-j.stop:
		default:
			close(j.stop)
		}
	}
}
