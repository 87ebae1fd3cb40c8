package pipeline

import (
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
)

// Stage names a step of the pipeline in timings and queue depths.
type Stage string

const (
	StageWait     Stage = "wait"     // received → picked up by a compressor (queueing)
	StageLoad     Stage = "load"     // map the segment and copy it out of shared memory
	StageCompress Stage = "compress" // codec
	StageQueue    Stage = "queue"    // compressed → picked up by a writer
	StageStore    Stage = "store"    // sink put until durable
	StageResult   Stage = "result"   // publish the result and ack
	StageTotal    Stage = "total"    // received → acked
)

// Outcome is how a snapshot left the pipeline.
type Outcome string

const (
	Stored  Outcome = "stored"  // committed, result published, acked
	Failed  Outcome = "failed"  // permanent error, error result published, acked
	Retried Outcome = "retried" // handed back to JetStream (transient error or shutdown)
)

// KindGaveUp is the Done kind of a snapshot failed because its transient
// failures outlasted --max-deliver deliveries (its result says
// store_failed).
const KindGaveUp = "gave_up"

// Observer receives what the pipeline measures. Calls come from several
// goroutines at once.
type Observer interface {
	// Stage reports how long one snapshot spent in a stage.
	Stage(s Stage, d time.Duration)
	// Depth reports that the number of snapshots waiting for (or in) stage
	// s changed by delta.
	Depth(s Stage, delta int)
	// Done reports a finished snapshot; kind is "" when stored, otherwise
	// the ingest error code, KindGaveUp, or "transient"/"shutdown" for
	// retries.
	Done(o Outcome, kind string, st fz.Stats)
}

type nopObserver struct{}

func (nopObserver) Stage(Stage, time.Duration)     {}
func (nopObserver) Depth(Stage, int)               {}
func (nopObserver) Done(Outcome, string, fz.Stats) {}
