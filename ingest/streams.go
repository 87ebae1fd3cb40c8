package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfig sizes the two JetStream streams.
type StreamConfig struct {
	// DedupWindow is how long JetStream remembers Nats-Msg-Id values; a
	// producer's publish retries must fall inside it. Beyond it, the sink's
	// create-only put still prevents duplicates.
	DedupWindow time.Duration
	// MaxQueued caps notifications waiting in the stream; once full, new
	// publishes are refused (the producer sees an error, nothing is lost).
	MaxQueued int64
	// ResultTTL is how long results stay fetchable for producers that were
	// disconnected when their result was published.
	ResultTTL time.Duration
	// Replicas is how many servers of a NATS cluster keep each stream (and
	// the consumer, which inherits it); 0 or 1: one. 3 on a 3-server
	// cluster lets any one server die without losing a queued snapshot.
	Replicas int
}

func (c *StreamConfig) defaults() {
	if c.DedupWindow <= 0 {
		c.DedupWindow = 10 * time.Minute
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = 100000
	}
	if c.ResultTTL <= 0 {
		c.ResultTTL = 24 * time.Hour
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
}

// EnsureStreams creates or updates the snapshot and result streams. A
// stream of the same name that another prefix's sidecar made is refused
// (ErrStreamOfOtherPrefix), not taken over.
//
// Snapshots: work-queue retention (a message leaves the stream when the
// sidecar acks it, i.e. after the sink committed), file storage so queued
// notifications survive a restart, and discard-new so a full queue refuses
// rather than silently drops.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, sub Subjects, c StreamConfig) (snap, res jetstream.Stream, err error) {
	c.defaults()
	snapCfg := jetstream.StreamConfig{
		Name:        sub.SnapshotStream(),
		Description: "fzsidecar snapshot notifications (one per shared-memory snapshot)",
		Subjects:    []string{sub.SnapshotWildcard()},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     c.MaxQueued,
		MaxMsgSize:  MaxNotificationBytes,
		Duplicates:  c.DedupWindow,
		AllowDirect: true,
		Replicas:    c.Replicas,
	}
	snap, err = ensureStream(ctx, js, sub, snapCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create stream %s: %w", sub.SnapshotStream(), err)
	}
	dup := min(c.DedupWindow, c.ResultTTL)
	resCfg := jetstream.StreamConfig{
		Name:              sub.ResultStream(),
		Description:       "fzsidecar results, one per snapshot, kept for late readers",
		Subjects:          []string{sub.ResultWildcard()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		MaxAge:            c.ResultTTL,
		MaxMsgsPerSubject: 1,
		MaxMsgSize:        MaxNotificationBytes,
		Duplicates:        dup,
		AllowDirect:       true,
		Replicas:          c.Replicas,
	}
	res, err = ensureStream(ctx, js, sub, resCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create stream %s: %w", sub.ResultStream(), err)
	}
	return snap, res, nil
}

// ErrStreamOfOtherPrefix is returned by EnsureStreams when a stream with
// this prefix's name exists but carries another prefix's subjects: stream
// names upper-case the prefix and turn '-' into '_', so prefixes differing
// only in case or '-'/'_' (fz-node-1, fz_node_1, FZ-NODE-1) share them.
// Updating the stream would take it over from the other sidecar (its
// producers' publishes would match no stream, its queued snapshots would be
// consumed by nobody), so the sidecar refuses to start instead.
var ErrStreamOfOtherPrefix = errors.New("stream belongs to another subject prefix")

// ensureStream creates the stream cfg or, when it exists with this prefix's
// subjects, updates it to cfg (new limits or replicas take effect). A stream
// of the same name with other subjects is refused with
// ErrStreamOfOtherPrefix, never updated.
func ensureStream(ctx context.Context, js jetstream.JetStream, sub Subjects, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	for {
		var s jetstream.Stream
		err := retryJS(ctx, func(ctx context.Context) (err error) {
			s, err = js.Stream(ctx, cfg.Name)
			return err
		})
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = retryJS(ctx, func(ctx context.Context) (err error) {
				s, err = js.CreateStream(ctx, cfg)
				return err
			})
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && ctx.Err() == nil {
				continue // created meanwhile (by another sidecar?): check whose it is
			}
			return s, err
		}
		if err != nil {
			return nil, err
		}
		if have := s.CachedInfo().Config.Subjects; !sameSubjects(have, cfg.Subjects) {
			other := "(unknown)"
			if len(have) > 0 {
				other, _, _ = strings.Cut(have[0], ".")
			}
			return nil, fmt.Errorf("%w: stream %s has subjects %v of subject prefix %q, not %v of this sidecar's prefix %q; "+
				"prefixes that differ only in case or '-'/'_' share stream names: give one of the sidecars a distinct --subject-prefix (docs/PROTOCOL.md §1)",
				ErrStreamOfOtherPrefix, cfg.Name, have, other, cfg.Subjects, sub.prefix())
		}
		err = retryJS(ctx, func(ctx context.Context) (err error) {
			s, err = js.UpdateStream(ctx, cfg)
			return err
		})
		return s, err
	}
}

// sameSubjects reports whether two subject lists hold the same subjects.
func sameSubjects(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// jsAttempt bounds one JetStream API request inside retryJS.
const jsAttempt = 3 * time.Second

// retryJS runs a JetStream API call op, each attempt bounded by a few
// seconds, again while the cluster cannot answer, until ctx ends. In a NATS
// cluster a request to a stream whose leader just died gets no reply at all
// until a new leader is elected (seconds), and one that finds no meta
// leader is refused as unavailable: without the retry, a sidecar starting
// during such an election would spend its whole start-up time on one lost
// request and fail (internal/clustertest kills servers to check this).
// Errors the cluster gave as its answer (bad configuration, not found) end
// the retries at once.
func retryJS(ctx context.Context, op func(context.Context) error) error {
	delay := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, jsAttempt)
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !clusterTransient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// clusterTransient reports errors that a NATS cluster electing leaders
// gives: a lost request (timeout), no responders, or an API error saying
// the cluster or the stream is temporarily unavailable.
func clusterTransient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10006, 10008, 10009, 10118: // cluster not active / not available / not leader, stream offline
			return true
		}
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// queuedNotifications calls fn for every notification still in the stream.
// After a restart these are snapshots whose segments producers still hold.
func queuedNotifications(ctx context.Context, s jetstream.Stream, sub Subjects, fn func(*jetstream.RawStreamMsg)) error {
	var info *jetstream.StreamInfo
	err := retryJS(ctx, func(ctx context.Context) (err error) {
		info, err = s.Info(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if info.State.Msgs == 0 {
		return nil
	}
	seq := info.State.FirstSeq
	for n := uint64(0); n < info.State.Msgs+1; n++ {
		var m *jetstream.RawStreamMsg
		err := retryJS(ctx, func(ctx context.Context) (err error) {
			m, err = s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(sub.SnapshotWildcard()))
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		fn(m)
		seq = m.Sequence + 1
	}
	return nil
}

// consumerConfig is the sidecar's durable pull consumer on the snapshot
// stream.
func consumerConfig(c ReceiverConfig) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       c.Subjects.Consumer(),
		Description:   "fzsidecar snapshot processing",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxAckPending: c.MaxInFlight,
		MaxDeliver:    -1,
		FilterSubject: c.Subjects.SnapshotWildcard(),
	}
}

// consumerCheckEvery is how often the receiver checks that its consumer
// still exists.
const consumerCheckEvery = 2 * time.Second

// watchConsumer recreates the snapshot consumer (and the streams, if they
// went too) when it has disappeared — an administrator deleted it — since
// without it nothing is consumed while everything else looks fine. While it
// is missing ConsumerMissing reports true, which fails /healthz. The
// recreated consumer has the same name, so the receiver's handle keeps
// fetching from it. Runs until the receiver closes.
func (r *Receiver) watchConsumer() {
	defer r.wg.Done()
	t := time.NewTicker(consumerCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-r.base.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.base, 10*time.Second)
		err := r.checkConsumer(ctx)
		cancel()
		if err != nil && r.base.Err() == nil {
			r.log.Error("snapshot consumer missing and not recreated; nothing is consumed until it is", "err", err)
		}
	}
}

// checkConsumer looks the consumer up and recreates it if it is gone.
// Other errors (server restarting) say nothing about the consumer.
func (r *Receiver) checkConsumer(ctx context.Context) error {
	_, err := r.js.Consumer(ctx, r.cfg.Subjects.SnapshotStream(), r.cfg.Subjects.Consumer())
	if err == nil || !(errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)) {
		if err == nil {
			r.consumerGone.Store(false)
		}
		return nil
	}
	r.consumerGone.Store(true)
	r.log.Error("snapshot consumer is gone (deleted by an administrator?); recreating it",
		"stream", r.cfg.Subjects.SnapshotStream(), "consumer", r.cfg.Subjects.Consumer(), "err", err)
	snap, _, err := EnsureStreams(ctx, r.js, r.cfg.Subjects, r.cfg.Streams)
	if err != nil {
		return err
	}
	if _, err := snap.CreateOrUpdateConsumer(ctx, consumerConfig(r.cfg)); err != nil {
		return fmt.Errorf("recreate consumer: %w", err)
	}
	r.consumerGone.Store(false)
	r.consumersRecreated.Add(1)
	r.log.Warn("snapshot consumer recreated; consuming again", "consumer", r.cfg.Subjects.Consumer())
	return nil
}

// ConsumerMissing reports that the snapshot consumer was found deleted and
// is not back yet: the sidecar is not consuming.
func (r *Receiver) ConsumerMissing() bool { return r.consumerGone.Load() }

// ConsumersRecreated counts consumers recreated after they disappeared.
func (r *Receiver) ConsumersRecreated() int64 { return r.consumersRecreated.Load() }
