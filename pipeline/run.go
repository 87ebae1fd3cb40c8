package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
)

// errDrainTimeout ends work still in flight DrainTimeout after shutdown.
var errDrainTimeout = errors.New("shutdown: drain timeout passed")

// item is one snapshot moving through the stages.
type item struct {
	job    *ingest.Job
	key    Key
	loc    string
	blob   []byte
	st     fz.Stats
	gpu    time.Duration // device work of a GPU-resident snapshot (device.go)
	queued time.Time     // when it entered the current queue
	unlock func()
	// stored: an earlier delivery already stored it (Finder); nothing to put
	stored bool
}

// Run processes jobs until the channel closes (the receiver closes it when
// ctx ends). Work already taken keeps going for up to DrainTimeout after ctx
// ends; whatever is still unfinished then is handed back to JetStream
// for immediate redelivery (a restart takes it up at once), so a shutdown
// loses nothing and delays little. Run returns
// once every job it received was completed, failed or handed back.
func Run(ctx context.Context, jobs <-chan *ingest.Job, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	// work outlives ctx by the drain timeout: in-flight snapshots finish
	// rather than being redone after a restart.
	work, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelWork(nil)
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		t := time.NewTimer(cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelWork(errDrainTimeout)
		case <-finished:
		}
	}()

	p := &pipe{cfg: cfg, work: work, keys: newKeyLocks(), bufs: newBufPool(cfg.Compressors)}
	compressQ := make(chan *item)
	storeQ := make(chan *item, cfg.Queue)

	var cw, sw sync.WaitGroup
	for range cfg.Compressors {
		cw.Add(1)
		go func() { defer cw.Done(); p.compressor(compressQ, storeQ) }()
	}
	for range cfg.Writers {
		sw.Add(1)
		go func() { defer sw.Done(); p.writer(storeQ) }()
	}
	p.dispatch(jobs, compressQ)
	close(compressQ)
	cw.Wait()
	close(storeQ)
	sw.Wait()
	return nil
}

type pipe struct {
	cfg  Config
	work context.Context
	keys *keyLocks
	bufs *bufPool
}

// dispatch feeds compressors in stream order. A snapshot whose key is
// already in flight (a duplicate or a redelivery racing its original) waits
// for it, so two notifications for one key are stored in stream order, as a
// sequential sidecar would; the create-only sink then keeps the first.
func (p *pipe) dispatch(jobs <-chan *ingest.Job, out chan<- *item) {
	for job := range jobs {
		n := job.Notice
		it := &item{job: job, key: Key{Run: n.Run, Var: n.Var, Step: n.Step}}
		it.loc = it.key.String()
		if l, ok := p.cfg.Store.(Locator); ok {
			it.loc = l.Location(it.key)
		}
		p.cfg.Observer.Depth(StageWait, 1)
		unlock, err := p.keys.lock(p.work, it.key)
		if err != nil {
			p.cfg.Observer.Depth(StageWait, -1)
			p.finish(it, err)
			continue
		}
		it.unlock = unlock
		select {
		case out <- it:
		case <-p.work.Done():
			p.cfg.Observer.Depth(StageWait, -1)
			p.finish(it, context.Cause(p.work))
		}
	}
}

func (p *pipe) compressor(in <-chan *item, out chan<- *item) {
	for it := range in {
		p.cfg.Observer.Depth(StageWait, -1)
		p.cfg.Observer.Stage(StageWait, time.Since(it.job.Received))
		if err := p.compress(it); err != nil {
			p.finish(it, err)
			continue
		}
		it.queued = time.Now()
		p.cfg.Observer.Depth(StageQueue, 1)
		select {
		case out <- it:
		case <-p.work.Done():
			p.cfg.Observer.Depth(StageQueue, -1)
			p.finish(it, context.Cause(p.work))
		}
	}
}

func (p *pipe) writer(in <-chan *item) {
	for it := range in {
		p.cfg.Observer.Depth(StageQueue, -1)
		p.cfg.Observer.Stage(StageQueue, time.Since(it.queued))
		if it.stored {
			p.finish(it, nil)
			continue
		}
		p.finish(it, p.store(it))
	}
}

// compress maps the segment, copies it out and compresses the copy.
func (p *pipe) compress(it *item) (err error) {
	defer p.recoverInto(it, &err)
	if err := p.work.Err(); err != nil {
		return context.Cause(p.work)
	}
	p.cfg.Observer.Depth(StageCompress, 1)
	defer p.cfg.Observer.Depth(StageCompress, -1)
	t0 := time.Now()
	if it.job.Notice.Device != nil {
		return p.compressDevice(it, t0)
	}
	m, err := it.job.Map()
	if err != nil {
		if p.storedBefore(it, err) {
			return nil
		}
		return err
	}
	var (
		blob []byte
		st   fz.Stats
		t1   time.Time
	)
	if p.cfg.Direct != nil {
		t1 = t0
		blob, st, err = p.cfg.Direct(p.work, m, it.job.Params) // closes or keeps m
	} else {
		// Compress from a private copy: the producer cannot then crash us
		// by truncating the file mid-read (CopyTo turns that fault into an
		// error; the codec's worker goroutines could not), nor tear the
		// snapshot by writing to it while the codec reads.
		buf := p.bufs.get(m.Len())
		defer p.bufs.put(buf)
		err = m.CopyTo(buf)
		m.Close()
		if err != nil {
			return err
		}
		t1 = time.Now()
		p.cfg.Observer.Stage(StageLoad, t1.Sub(t0))
		blob, st, err = p.cfg.Codec(p.work, buf, it.job.Params)
	}
	if err != nil {
		var ie *ingest.Error
		switch {
		case p.work.Err() != nil:
			return context.Cause(p.work)
		case errors.As(err, &ie): // e.g. truncated, from a direct codec
			return err
		}
		return classifyCompressErr(err)
	}
	p.cfg.Observer.Stage(StageCompress, time.Since(t1))
	it.blob, it.st = blob, st
	return nil
}

// storedBefore reports (and records in it) that a redelivered snapshot
// whose segment is gone was stored by an earlier delivery of the same
// msg_id: its producer had that delivery's result and removed the segment,
// though the result never reached the result stream. Answering it from the
// stored object avoids a false missing_segment.
func (p *pipe) storedBefore(it *item, mapErr error) bool {
	f, ok := p.cfg.Store.(Finder)
	if !ok || it.job.Delivered < 2 || ingest.AsError(mapErr).Code != ingest.CodeNoSegment {
		return false
	}
	m, ok, err := f.Find(p.work, it.key)
	if err != nil || !ok || m.MsgID != it.job.Notice.MsgID {
		return false
	}
	p.cfg.Log.Info("redelivered snapshot's segment is gone; an earlier delivery stored it", "key", it.loc,
		"msg_id", m.MsgID, "delivered", it.job.Delivered)
	it.st, it.stored = m.Stats, true
	return true
}

func (p *pipe) store(it *item) (err error) {
	defer p.recoverInto(it, &err)
	if err := p.work.Err(); err != nil {
		return context.Cause(p.work)
	}
	p.cfg.Observer.Depth(StageStore, 1)
	defer p.cfg.Observer.Depth(StageStore, -1)
	t0 := time.Now()
	j := it.job
	meta := Meta{Params: j.Params, Stats: it.st, Producer: j.Notice.Producer, MsgID: j.Notice.MsgID, Timestamp: time.Now()}
	if err := p.cfg.Store.Put(p.work, it.key, it.blob, meta); err != nil {
		return classifyStoreErr(it.loc, err)
	}
	p.cfg.Observer.Stage(StageStore, time.Since(t0))
	return nil
}

// finish ends a snapshot: result and ack after a commit, an error result
// for permanent failures, or a hand-back for transient ones and shutdown.
func (p *pipe) finish(it *item, err error) {
	j, n := it.job, it.job.Notice
	defer func() {
		if it.blob != nil && p.cfg.Release != nil {
			p.cfg.Release(it.blob)
		}
		it.blob = nil
		if it.unlock != nil {
			it.unlock()
		}
	}()
	var (
		out  Outcome
		kind string
	)
	switch {
	case err == nil:
		t0 := time.Now()
		if ferr := j.Complete(p.work, ingest.Outcome{Key: it.loc, Stats: it.st, GPUSeconds: it.gpu.Seconds()}); ferr != nil {
			// Stored, but the result or ack did not get through: JetStream
			// redelivers, and the idempotent put answers it again.
			p.cfg.Log.Warn("snapshot stored but not acknowledged", "key", it.loc, "err", ferr)
			out, kind = Retried, "result"
		} else {
			out = Stored
			p.cfg.Observer.Stage(StageResult, time.Since(t0))
		}
		p.cfg.Log.Info("snapshot stored", "run", n.Run, "var", n.Var, "step", n.Step, "key", it.loc,
			"raw", it.st.RawBytes, "compressed", it.st.CompressedBytes, "ratio", it.st.Ratio(), "max_err", it.st.MaxAbsErr,
			"seconds", time.Since(j.Received).Seconds())
	case isRetry(err) && p.work.Err() != nil:
		// Hand it back for immediate redelivery: a restarted sidecar takes
		// it up at once (not after the ack wait).
		j.HandBack(err)
		out, kind = Retried, "shutdown"
	case isRetry(err) && j.LastDelivery():
		// Transient, but out of deliveries (--max-deliver): the producer
		// gets an error result rather than waiting in silence.
		// The code of a transient compress failure (a GPU out of
		// memory) is kept; the rest are the sink's.
		code, msg := ingest.CodeStore, err.Error()
		if ie := (*ingest.Error)(nil); errors.As(err, &ie) {
			code, msg = ie.Code, ie.Message
		}
		e := &ingest.Error{Code: code, Message: fmt.Sprintf("gave up after %d deliveries: %s", j.Delivered, msg)}
		j.Fail(p.work, e)
		out, kind = Failed, KindGaveUp
	case isRetry(err):
		j.Retry(err)
		out, kind = Retried, "transient"
	default:
		j.Fail(p.work, err)
		out, kind = Failed, string(ingest.AsError(err).Code)
	}
	p.cfg.Observer.Stage(StageTotal, time.Since(j.Received))
	p.cfg.Observer.Done(out, kind, it.st)
	if p.cfg.OnResult != nil {
		p.cfg.OnResult(j, it.loc, it.st, err)
	}
}

// recoverInto turns a panic in a stage into an internal error for this
// snapshot only; the sidecar keeps serving the others.
func (p *pipe) recoverInto(it *item, err *error) {
	if r := recover(); r != nil {
		p.cfg.Log.Error("panic while processing snapshot", "msg_id", it.job.Notice.MsgID, "panic", r)
		*err = &ingest.Error{Code: ingest.CodeInternal, Message: fmt.Sprintf("sidecar failure while processing: %v", r)}
	}
}
