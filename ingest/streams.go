package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// EnsureStreams creates or updates the snapshot and result streams.
//
// Snapshots: work-queue retention (a message leaves the stream when the
// sidecar acks it, i.e. after the sink committed), file storage so queued
// notifications survive a restart, and discard-new so a full queue refuses
// rather than silently drops.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, sub Subjects, c StreamConfig) (snap, res jetstream.Stream, err error) {
	c.defaults()
	snap, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
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
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create stream %s: %w", sub.SnapshotStream(), err)
	}
	dup := min(c.DedupWindow, c.ResultTTL)
	res, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
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
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create stream %s: %w", sub.ResultStream(), err)
	}
	return snap, res, nil
}

// queuedNotifications calls fn for every notification still in the stream.
// After a restart these are snapshots whose segments producers still hold.
func queuedNotifications(ctx context.Context, s jetstream.Stream, sub Subjects, fn func(*jetstream.RawStreamMsg)) error {
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs == 0 {
		return nil
	}
	seq := info.State.FirstSeq
	for n := uint64(0); n < info.State.Msgs+1; n++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(sub.SnapshotWildcard()))
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
