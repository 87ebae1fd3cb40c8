package ingest

import (
	"context"
	"sync"
	"time"
)

// Budget bounds the bytes of snapshots in flight: admitted or announced but
// not yet answered. It lives in the sidecar so that every producer, whatever
// its language, is held to the same limit, and it counts shared-memory
// bytes that producers hold on the sidecar's behalf.
//
// Holds are keyed by message id, so a retried admission or a redelivered
// notification never counts twice.
type Budget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	holds   map[string]*hold
	waiters []*waiter // FIFO: a large request at the head is never starved by small ones
	maxWait int
	now     func() time.Time
}

type hold struct {
	bytes int64
	// expires is when an admission that was never followed by its
	// notification is given back (the producer died or gave up). Zero once
	// the notification arrived.
	expires time.Time
}

type waiter struct {
	id      string
	bytes   int64
	ttl     time.Duration
	granted chan struct{}
	done    bool
}

// NewBudget makes a budget of limit bytes (> 0).
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, holds: map[string]*hold{}, maxWait: 10000, now: time.Now}
}

// Limit is the configured number of bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Used reports bytes held and the number of holds.
func (b *Budget) Used() (bytes int64, holds int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, len(b.holds)
}

// Acquire reserves n bytes under id for at most ttl until Charge confirms
// them. With wait it blocks (FIFO) until room frees or ctx ends; without it
// fails at once. Errors are ErrTooLarge or ErrBudgetFull with details.
func (b *Budget) Acquire(ctx context.Context, id string, n int64, wait bool, ttl time.Duration) error {
	if n < 0 {
		return errorf(CodeInvalid, "admission for %d bytes: expected a size >= 0", n)
	}
	if n > b.limit {
		return errorf(CodeTooLarge, "snapshot of %d bytes exceeds the whole in-flight budget of %d bytes: raise the sidecar's --budget", n, b.limit)
	}
	b.mu.Lock()
	b.expireLocked()
	if h, ok := b.holds[id]; ok {
		// A retried admission (the first reply was lost): already granted.
		if !h.expires.IsZero() {
			h.expires = b.now().Add(ttl)
		}
		b.mu.Unlock()
		return nil
	}
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.grantLocked(id, n, ttl)
		b.mu.Unlock()
		return nil
	}
	if !wait {
		used := b.used
		b.mu.Unlock()
		return errorf(CodeBudgetFull, "in-flight budget full: %d of %d bytes held, %d more requested", used, b.limit, n)
	}
	if len(b.waiters) >= b.maxWait {
		b.mu.Unlock()
		return errorf(CodeBudgetFull, "in-flight budget full and %d producers already waiting", b.maxWait)
	}
	w := &waiter{id: id, bytes: n, ttl: ttl, granted: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	// Expired leases only free room when someone looks; a waiter looks
	// periodically so a dead producer's lease cannot block it forever.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.granted:
			return nil
		case <-tick.C:
			b.mu.Lock()
			b.expireLocked()
			b.mu.Unlock()
		case <-ctx.Done():
			b.mu.Lock()
			defer b.mu.Unlock()
			if w.done { // granted in the meantime: keep the grant, caller asked for it
				return nil
			}
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			// Our departure may unblock smaller requests behind us.
			b.wakeLocked()
			return errorf(CodeBudgetFull, "in-flight budget still full after waiting: %d of %d bytes held, %d requested (%v)", b.used, b.limit, n, context.Cause(ctx))
		}
	}
}

func (b *Budget) grantLocked(id string, n int64, ttl time.Duration) {
	b.holds[id] = &hold{bytes: n, expires: b.now().Add(ttl)}
	b.used += n
}

// Charge records that the notification for id arrived with n bytes: an
// admission becomes a hold without expiry (resized to n), and a notification
// that skipped admission is counted anyway (it already occupies memory, so
// it may push usage past the limit, which only delays later admissions).
func (b *Budget) Charge(id string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.holds[id]; ok {
		b.used += n - h.bytes
		h.bytes, h.expires = n, time.Time{}
		b.wakeLocked()
		return
	}
	b.holds[id] = &hold{bytes: n}
	b.used += n
}

// Release frees id's bytes, if held.
func (b *Budget) Release(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.holds[id]; ok {
		delete(b.holds, id)
		b.used -= h.bytes
		b.wakeLocked()
	}
}

func (b *Budget) expireLocked() {
	now := b.now()
	freed := false
	for id, h := range b.holds {
		if !h.expires.IsZero() && now.After(h.expires) {
			delete(b.holds, id)
			b.used -= h.bytes
			freed = true
		}
	}
	if freed {
		b.wakeLocked()
	}
}

// wakeLocked grants waiters in order while they fit.
func (b *Budget) wakeLocked() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.bytes > b.limit {
			return
		}
		b.waiters = b.waiters[1:]
		if _, dup := b.holds[w.id]; !dup {
			b.grantLocked(w.id, w.bytes, w.ttl)
		}
		w.done = true
		close(w.granted)
	}
}

// Renew extends id's admission lease by ttl from now and reports whether
// id is held (a confirmed hold needs no renewal and is left as it is). It
// never creates a hold: a renewal read after the snapshot was answered or
// released must not take budget again.
func (b *Budget) Renew(id string, ttl time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked()
	h, ok := b.holds[id]
	if ok && !h.expires.IsZero() {
		h.expires = b.now().Add(ttl)
	}
	return ok
}

// ReleaseLease frees id only while it is an admission not yet confirmed by
// its notification.
func (b *Budget) ReleaseLease(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.holds[id]; ok && !h.expires.IsZero() {
		delete(b.holds, id)
		b.used -= h.bytes
		b.wakeLocked()
	}
}
